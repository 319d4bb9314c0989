/* ct_counters.c - aligned counter blocks. */
#include "ct_internal.h"

#include <stdlib.h>
#include <string.h>

ct_code ct_counters_create(struct ct_counters **out)
{
  struct ct_counters *c;
  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  c = aligned_alloc(64, sizeof(*c));
  if(!c)
    return CT_E_NO_MEMORY;
  memset(c, 0, sizeof(*c));
  c->bytes_expected_to_send = -1;
  c->bytes_expected_to_receive = -1;
  *out = c;
  return CT_OK;
}

void ct_counters_destroy(struct ct_counters *counters)
{
  free(counters);
}
