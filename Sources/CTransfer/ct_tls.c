/*
 * ct_tls.c - trust anchors loaded once per loop, and chain + hostname
 * verification in OpenSSL's verify step. (Provisional: the pinning policy
 * is evaluated by the security layer that replaces this file.)
 */
#include "ct_internal.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

struct cti_tls_state {
  X509_STORE *store;
  struct ct_trust_policy *policy;
};

struct ct_trust_policy {
  int refs;
};

ct_code ct_trust_policy_create(struct ct_trust_policy **out)
{
  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = calloc(1, sizeof(**out));
  if(!*out)
    return CT_E_NO_MEMORY;
  (*out)->refs = 1;
  return CT_OK;
}

void ct_trust_policy_retain(struct ct_trust_policy *policy)
{
  __atomic_add_fetch(&policy->refs, 1, __ATOMIC_RELAXED);
}

void ct_trust_policy_release(struct ct_trust_policy *policy)
{
  if(policy && __atomic_sub_fetch(&policy->refs, 1, __ATOMIC_ACQ_REL) == 0)
    free(policy);
}

/* The system store is parsed once per process (about 30 ms of CPU for
 * Debian's bundle) and shared, read-only, by every loop. */
static X509_STORE *system_store;
static pthread_once_t system_once = PTHREAD_ONCE_INIT;

static void load_system_store(void)
{
  system_store = X509_STORE_new();
  if(system_store && X509_STORE_set_default_paths(system_store) == 1) {
    /* Force the lazy file lookup to load now, while we are single-use. */
    X509_STORE_load_file(system_store, X509_get_default_cert_file());
  }
  ERR_clear_error();
}

ct_code cti_tls_state_create(const char *ca_file, struct cti_tls_state **out,
                             char *errbuf)
{
  struct cti_tls_state *state = calloc(1, sizeof(*state));
  if(!state)
    return CT_E_NO_MEMORY;
  if(!ca_file) {
    pthread_once(&system_once, load_system_store);
    if(!system_store || X509_STORE_up_ref(system_store) != 1)
      goto fail;
    state->store = system_store;
    *out = state;
    return CT_OK;
  }
  state->store = X509_STORE_new();
  if(!state->store)
    goto fail;
  if(ca_file) {
    if(X509_STORE_load_file(state->store, ca_file) != 1) {
      if(errbuf)
        snprintf(errbuf, 256, "cannot load CA file %s", ca_file);
      ERR_clear_error();
      cti_tls_state_free(state);
      return CT_E_INVALID_REQUEST;
    }
  }
  *out = state;
  return CT_OK;
fail:
  cti_tls_state_free(state);
  return CT_E_NO_MEMORY;
}

void cti_tls_state_free(struct cti_tls_state *state)
{
  if(!state)
    return;
  X509_STORE_free(state->store);
  ct_trust_policy_release(state->policy);
  free(state);
}

void cti_tls_state_set_policy(struct cti_tls_state *state,
                              struct ct_trust_policy *policy)
{
  if(policy)
    ct_trust_policy_retain(policy);
  ct_trust_policy_release(state->policy);
  state->policy = policy;
}

static int verdict_index = -1;
static pthread_once_t verdict_once = PTHREAD_ONCE_INIT;

static void make_index(void)
{
  verdict_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static int verify_cb(int ok, X509_STORE_CTX *store_ctx)
{
  SSL *ssl = X509_STORE_CTX_get_ex_data(store_ctx,
                                        SSL_get_ex_data_X509_STORE_CTX_idx());
  struct cti_tls_verdict *verdict;
  int err;
  if(ok || !ssl)
    return ok;
  verdict = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), verdict_index);
  err = X509_STORE_CTX_get_error(store_ctx);
  if(verdict && verdict->reason == CT_TLS_OK) {
    verdict->reason = err == X509_V_ERR_HOSTNAME_MISMATCH ||
      err == X509_V_ERR_IP_ADDRESS_MISMATCH ?
      CT_TLS_HOSTNAME_MISMATCH : CT_TLS_CHAIN_INVALID;
    verdict->verify_error = err;
    snprintf(verdict->message, sizeof(verdict->message), "%s",
             X509_verify_cert_error_string(err));
  }
  return 0;
}

static int host_from_url(const char *url, char *host, size_t cap)
{
  const char *p = strstr(url, "://");
  const char *end;
  size_t n;
  if(!p)
    return 0;
  p += 3;
  if(*p == '[') {
    end = strchr(p, ']');
    if(!end)
      return 0;
    p++;
  }
  else {
    end = p + strcspn(p, ":/?#");
  }
  n = (size_t)(end - p);
  if(n == 0 || n >= cap)
    return 0;
  memcpy(host, p, n);
  host[n] = 0;
  return 1;
}

int cti_tls_configure_ctx(struct cti_tls_state *state, void *ssl_ctx,
                          void *curl_easy, const char *ca_file_override,
                          int insecure, struct cti_tls_verdict *verdict)
{
  SSL_CTX *ctx = ssl_ctx;
  X509_VERIFY_PARAM *param;
  char *url = NULL;
  char host[256];
  (void)ca_file_override;

  pthread_once(&verdict_once, make_index);
  if(insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return CURLE_OK;
  }
  X509_STORE_up_ref(state->store);
  SSL_CTX_set_cert_store(ctx, state->store);
  SSL_CTX_set_ex_data(ctx, verdict_index, verdict);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_cb);
  param = SSL_CTX_get0_param(ctx);
  if(curl_easy_getinfo(curl_easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK &&
     url && host_from_url(url, host, sizeof(host))) {
    if(X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1)
      X509_VERIFY_PARAM_set1_host(param, host, 0);
  }
  return CURLE_OK;
}
