/*
 * ct_trust_probe.c - one blocking HTTPS GET through the trust hook, on the
 * calling thread, without a loop: for the tests. Compiled only where
 * CT_TEST_HOOKS is defined (debug builds: Package.swift), so a release
 * build carries none of it.
 * It configures the easy handle exactly as the engine must (see
 * ct_tls_internal.h): libcurl's verification off, ours through
 * CURLOPT_SSL_CTX_FUNCTION.
 */
#ifdef CT_TEST_HOOKS
#include "ct_internal.h"
#include "ct_tls_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

struct probe {
  struct cti_tls_state *state;
  int insecure;
  int handshakes;
  struct cti_tls_verdict verdict;
};

static CURLcode probe_ctx_cb(CURL *easy, void *ssl_ctx, void *arg)
{
  struct probe *p = arg;

  p->handshakes++;
  return (CURLcode)cti_tls_configure_ctx(p->state, ssl_ctx, easy, NULL,
                                         p->insecure, &p->verdict);
}

static size_t discard(char *ptr, size_t size, size_t n, void *arg)
{
  (void)ptr;
  (void)arg;
  return size * n;
}

/* The verdict first; the CURLcode goes through the one table. */
static ct_code code_for(CURL *easy, CURLcode cc, int32_t reason)
{
  struct cti_failure st;
  char *url = NULL;

  if(reason == CT_TLS_NO_PIN_MATCHED || reason == CT_TLS_POLICY_INVALID ||
     reason == CT_TLS_REJECTED_BY_DELEGATE ||
     reason == CT_TLS_CHALLENGE_TIMED_OUT)
    return CT_E_SERVER_TRUST;
  if(reason == CT_TLS_CHAIN_INVALID || reason == CT_TLS_HOSTNAME_MISMATCH)
    return CT_E_TLS;
  memset(&st, 0, sizeof(st));
  if(curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK &&
     url)
    st.effective_http = !strncasecmp(url, "http://", 7) ||
      !strncasecmp(url, "https://", 8);
  curl_easy_getinfo(easy, CURLINFO_REDIRECT_COUNT, &st.redirects);
  curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &st.os_errno);
  return cti_code_from_curl_state(cc, &st);
}

ct_code ct_trust_probe(struct ct_trust_policy *policy, const char *url,
                       const char *ca_file, int32_t insecure,
                       int32_t follow_redirects, int64_t timeout_ms,
                       struct ct_trust_probe_result *out)
{
  struct probe p;
  CURL *easy = NULL;
  CURLcode cc;
  char errbuf[CURL_ERROR_SIZE];
  ct_code rc;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  memset(&p, 0, sizeof(p));
  errbuf[0] = '\0';
  if(!url) {
    out->code = CT_E_INVALID_ARGUMENT;
    return out->code;
  }
  rc = cti_tls_state_create(ca_file, &p.state, out->message);
  if(rc != CT_OK) {
    out->code = rc;
    return rc;
  }
  cti_tls_state_set_policy(p.state, policy);
  p.insecure = insecure != 0;
  easy = curl_easy_init();
  if(!easy) {
    rc = CT_E_NO_MEMORY;
    goto out;
  }
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   (long)(timeout_ms > 0 ? timeout_ms : 10000));
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, follow_redirects ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
  /* libcurl verifies nothing; the hook does it all */
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(easy, CURLOPT_CAINFO, NULL);
  curl_easy_setopt(easy, CURLOPT_CAPATH, NULL);
  curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, probe_ctx_cb);
  curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, &p);
  curl_easy_setopt(easy, CURLOPT_SSL_SESSIONID_CACHE, 0L);
  curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
  cc = curl_easy_perform(easy);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &out->http_status);
  out->curl_code = (int32_t)cc;
  out->reason = p.verdict.reason;
  out->verify_error = p.verdict.verify_error;
  out->handshakes = p.handshakes;
  rc = code_for(easy, cc, p.verdict.reason);
  if(p.verdict.message[0])
    snprintf(out->message, sizeof(out->message), "%s", p.verdict.message);
  else if(cc != CURLE_OK)
    snprintf(out->message, sizeof(out->message), "%s",
             errbuf[0] ? errbuf : curl_easy_strerror(cc));
out:
  out->code = rc;
  curl_easy_cleanup(easy);
  cti_tls_verdict_release(&p.verdict);   /* p is on this stack frame */
  cti_tls_state_free(p.state);
  return rc;
}

#endif /* CT_TEST_HOOKS */
