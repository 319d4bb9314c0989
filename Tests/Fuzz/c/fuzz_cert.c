/*
 * fuzz_cert.c - certificate and PEM parsing through the public API of
 * include/ct_tls.h only: ct_cert_parse (PEM bundle or one DER), then for
 * each certificate ct_cert_info and ct_cert_spki_sha256, and the whole
 * list as anchors and as a chain for ct_trust_evaluate.
 *
 * Properties: a parsed list is non-empty with non-empty DERs; info
 * strings are NUL-terminated; an SPKI digest is 44 base64 characters.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ct_tls.h"

#define REQUIRE(c) do { if(!(c)) { \
  fprintf(stderr, "invariant violated: %s (line %d)\n", #c, __LINE__); \
  abort(); } } while(0)

static void check_one(const uint8_t *der, size_t len)
{
  struct ct_cert_info info;
  char spki[64];
  size_t i;

  memset(&info, 0x55, sizeof(info));
  if(ct_cert_info(der, len, &info) == CT_OK) {
    REQUIRE(memchr(info.subject, 0, sizeof(info.subject)));
    REQUIRE(memchr(info.issuer, 0, sizeof(info.issuer)));
  }
  memset(spki, 0x55, sizeof(spki));
  if(ct_cert_spki_sha256(der, len, spki, sizeof(spki)) == CT_OK) {
    REQUIRE(strlen(spki) == 44);
    for(i = 0; i < 44; i++)
      REQUIRE(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789+/=", spki[i]));
  }
  /* A buffer too small must be refused, not overrun. */
  (void)ct_cert_spki_sha256(der, len, spki, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct ct_der_list list;
  struct ct_trust_anchors *anchors = NULL;
  struct ct_trust_result result;
  size_t i;

  /* The raw input as one DER. */
  check_one(data, size);

  if(ct_cert_parse(data, size, &list) != CT_OK)
    return 0;
  REQUIRE(list.count > 0 && list.ders && list.lengths);
  for(i = 0; i < list.count; i++) {
    REQUIRE(list.ders[i] && list.lengths[i] > 0);
    check_one(list.ders[i], list.lengths[i]);
  }
  if(ct_trust_anchors_create_from_ders((const uint8_t *const *)list.ders,
                                       list.lengths, list.count, &anchors,
                                       NULL) == CT_OK) {
    /* The chain judged against itself, at a fixed time. */
    (void)ct_trust_evaluate(NULL, (const uint8_t *const *)list.ders,
                            list.lengths, list.count, "localhost",
                            1700000000, anchors, &result);
    REQUIRE(memchr(result.message, 0, sizeof(result.message)));
    ct_trust_anchors_destroy(anchors);
  }
  ct_der_list_free(&list);
  return 0;
}
