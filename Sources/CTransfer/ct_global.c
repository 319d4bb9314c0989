/* ct_global.c - one-time libcurl initialisation and small shared helpers. */
#include "ct_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static ct_code init_result = CT_OK;
static int has_psl;
static char accept_encoding[64] = "Accept-Encoding: ";

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
  /* The codings libcurl lists for CURLOPT_ACCEPT_ENCODING "", in its
   * order; identity alone when it decodes none. */
  if(info && (info->features & CURL_VERSION_LIBZ))
    strcat(accept_encoding, "deflate, gzip");
  if(info && (info->features & CURL_VERSION_BROTLI))
    strcat(accept_encoding, accept_encoding[17] ? ", br" : "br");
#ifdef CURL_VERSION_ZSTD
  if(info && (info->features & CURL_VERSION_ZSTD))
    strcat(accept_encoding, accept_encoding[17] ? ", zstd" : "zstd");
#endif
  if(!accept_encoding[17])
    strcat(accept_encoding, "identity");
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

const char *cti_accept_encoding_line(void)
{
  cti_global_init();
  return accept_encoding;
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

/* curl --version's feature names, in its order (newer bits when the
 * headers know them). */
static const struct {
  int bit;
  const char *name;
} feature_names[] = {
  {CURL_VERSION_ALTSVC, "alt-svc"},
  {CURL_VERSION_ASYNCHDNS, "AsynchDNS"},
  {CURL_VERSION_BROTLI, "brotli"},
  {CURL_VERSION_GSSAPI, "GSS-API"},
#ifdef CURL_VERSION_HSTS
  {CURL_VERSION_HSTS, "HSTS"},
#endif
  {CURL_VERSION_HTTP2, "HTTP2"},
  {CURL_VERSION_HTTPS_PROXY, "HTTPS-proxy"},
  {CURL_VERSION_IDN, "IDN"},
  {CURL_VERSION_IPV6, "IPv6"},
  {CURL_VERSION_KERBEROS5, "Kerberos"},
  {CURL_VERSION_LARGEFILE, "Largefile"},
  {CURL_VERSION_LIBZ, "libz"},
  {CURL_VERSION_NTLM, "NTLM"},
  {CURL_VERSION_PSL, "PSL"},
  {CURL_VERSION_SPNEGO, "SPNEGO"},
  {CURL_VERSION_SSL, "SSL"},
#ifdef CURL_VERSION_THREADSAFE
  {CURL_VERSION_THREADSAFE, "threadsafe"},
#endif
  {CURL_VERSION_TLSAUTH_SRP, "TLS-SRP"},
  {CURL_VERSION_UNIX_SOCKETS, "UnixSockets"},
#ifdef CURL_VERSION_ZSTD
  {CURL_VERSION_ZSTD, "zstd"},
#endif
};

static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static char features[512];

static void build_features(void)
{
  curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
  size_t pos = 0;
  size_t i;

  features[0] = 0;
  if(!info)
    return;
  for(i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++) {
    size_t n = strlen(feature_names[i].name);
    if(!(info->features & feature_names[i].bit))
      continue;
    if(pos + n + 2 > sizeof(features))
      break;
    if(pos)
      features[pos++] = ' ';
    memcpy(features + pos, feature_names[i].name, n);
    pos += n;
    features[pos] = 0;
  }
}

const char *ct_curl_features(void)
{
  pthread_once(&features_once, build_features);
  return features;
}

void ct_buffer_free(void *body)
{
  free(body);
}
