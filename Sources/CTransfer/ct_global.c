/* ct_global.c - one-time libcurl initialisation and small shared helpers. */
#include "ct_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static ct_code init_result = CT_OK;
static int has_psl;

static void global_init(void)
{
  curl_version_info_data *info;
  /* curl_global_init is not thread-safe in 7.88; pthread_once makes it
   * happen exactly once however many loops start at the same time. */
  if(curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    init_result = CT_E_SYSTEM;
    return;
  }
  info = curl_version_info(CURLVERSION_NOW);
  /* Without libpsl, libcurl accepts a cookie for a public suffix
   * (Domain=co.uk) from any host under it; ct_curl_has_psl tells. */
  has_psl = info && (info->features & CURL_VERSION_PSL) != 0;
  /* We need curl_multi_socket_action with CURLMOPT_TIMERFUNCTION, TLS
   * through OpenSSL for the SSL_CTX hook, and 7.68+ for curl_multi_wakeup
   * era semantics of pause handling. */
  if(!info || info->version_num < 0x074400 || !info->ssl_version ||
     strncmp(info->ssl_version, "OpenSSL", 7) != 0)
    init_result = CT_E_UNSUPPORTED;
}

ct_code cti_global_init(void)
{
  pthread_once(&init_once, global_init);
  return init_result;
}

char *cti_strdup(const char *s)
{
  return s ? strdup(s) : NULL;
}

const char *ct_curl_version(void)
{
  return curl_version();
}

int ct_curl_has_psl(void)
{
  cti_global_init();
  return has_psl;
}

void ct_buffer_free(void *body)
{
  free(body);
}
