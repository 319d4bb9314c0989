/*
 * ct_tls.c - the SSL_CTX hook: every new TLS connection of a loop is
 * verified here, with the loop's anchors and current trust policy.
 *
 * The engine turns off libcurl's own verification (VERIFYPEER/VERIFYHOST
 * 0, no CAINFO) and calls cti_tls_configure_ctx() from its
 * CURLOPT_SSL_CTX_FUNCTION. We set SSL_VERIFY_PEER and replace OpenSSL's
 * chain verification with our callback, so a refusal aborts the handshake
 * before any request byte is written. libcurl 7.88 creates one SSL_CTX per
 * connection, so the per-connection data hangs off the SSL_CTX (ex_data)
 * and is freed with it.
 *
 * Threads: everything here runs on the loop thread, except
 * cti_tls_state_create() (any thread, before the loop uses the state).
 */
#include "ct_tls_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

struct ca_cache {
  char *path;
  X509_STORE *store;                   /* one reference owned here */
  struct ca_cache *next;
};

struct cti_tls_state {
  X509_STORE *anchors;                 /* one reference owned here */
  struct ct_trust_policy *policy;      /* retained, frozen; may be NULL */
  struct ca_cache *cache;              /* per-transfer CA files */
};

/* What one connection needs in its verify callback. Owned by the SSL_CTX
 * (freed through the ex_data free function when curl frees the CTX). */
struct conn_trust {
  struct ct_trust_policy *policy;      /* retained at configure time */
  X509_STORE *anchors;                 /* one reference */
  char *host;
  int32_t port;
  int insecure;
  /* Borrowed from the transfer; only valid during the handshake. The link
   * is two-way (verdict->holder) and cleared from whichever end goes
   * first: the handshake's end (SSL_CB_HANDSHAKE_DONE, info_cb, which the
   * read-ahead hook chains to), the CTX's free, or the transfer's free
   * (cti_tls_verdict_release), so nothing ever writes a stale verdict. */
  struct cti_tls_verdict *verdict;
};

/* Clears the two-way link between a connection and its transfer's verdict. */
static void unbind_verdict(struct conn_trust *c)
{
  if(c->verdict)
    c->verdict->holder = NULL;
  c->verdict = NULL;
}

int cti_tls_verdict_release(struct cti_tls_verdict *verdict)
{
  struct conn_trust *c = verdict->holder;

  if(!c)
    return 0;
  unbind_verdict(c);
  return 1;
}

static int conn_index = -1;
static pthread_once_t conn_index_once = PTHREAD_ONCE_INIT;

static void conn_trust_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad,
                            int idx, long argl, void *argp)
{
  struct conn_trust *c = ptr;

  (void)parent;
  (void)ad;
  (void)idx;
  (void)argl;
  (void)argp;
  if(!c)
    return;
  unbind_verdict(c);
  ct_trust_policy_release(c->policy);
  X509_STORE_free(c->anchors);
  free(c->host);
  free(c);
}

static void make_conn_index(void)
{
  conn_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL,
                                        conn_trust_free);
}

static int get_conn_index(void)
{
  pthread_once(&conn_index_once, make_conn_index);
  return conn_index;
}

ct_code cti_tls_state_create(const char *ca_file,
                             struct cti_tls_state **out, char *errbuf)
{
  struct cti_tls_state *s = NULL;
  ct_code rc = CT_E_NO_MEMORY;
  X509_STORE *sys;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  s = calloc(1, sizeof(*s));
  if(!s)
    goto fail;
  if(ca_file) {
    rc = cti_trust_store_from_file(ca_file, &s->anchors, errbuf);
    if(rc != CT_OK)
      goto fail;
  }
  /* Without a CA file the system store is taken on the first TLS
   * connection (configure_ctx, loop thread): a session that only speaks
   * plain HTTP never parses the bundle (about 8 MiB and 30 ms). */
  (void)sys;
  if(get_conn_index() < 0) {
    cti_tls_err(errbuf, "OpenSSL refused an ex_data index");
    rc = CT_E_TLS;
    goto fail;
  }
  *out = s;
  return CT_OK;
fail:
  cti_tls_state_free(s);
  return rc;
}

void cti_tls_state_free(struct cti_tls_state *s)
{
  struct ca_cache *c;

  if(!s)
    return;
  while(s->cache) {
    c = s->cache;
    s->cache = c->next;
    X509_STORE_free(c->store);
    free(c->path);
    free(c);
  }
  ct_trust_policy_release(s->policy);
  X509_STORE_free(s->anchors);
  free(s);
}

void cti_tls_state_set_policy(struct cti_tls_state *s,
                              struct ct_trust_policy *policy)
{
  struct ct_trust_policy *old = s->policy;

  if(policy) {
    cti_trust_policy_freeze(policy);
    ct_trust_policy_retain(policy);
  }
  s->policy = policy;
  ct_trust_policy_release(old);   /* open connections keep their own ref */
}

/* The store for a per-transfer CA file, loaded on first use. Borrowed. */
static X509_STORE *cached_store(struct cti_tls_state *s, const char *path,
                                char *errbuf)
{
  struct ca_cache *c;
  X509_STORE *store = NULL;

  for(c = s->cache; c; c = c->next)
    if(!strcmp(c->path, path))
      return c->store;
  if(cti_trust_store_from_file(path, &store, errbuf) != CT_OK)
    return NULL;
  c = calloc(1, sizeof(*c));
  if(c)
    c->path = strdup(path);
  if(!c || !c->path) {
    free(c);
    X509_STORE_free(store);
    cti_tls_err(errbuf, "out of memory");
    return NULL;
  }
  c->store = store;
  c->next = s->cache;
  s->cache = c;
  return store;
}

/* Host and port of the URL curl is connecting for. On a redirect hop the
 * effective URL is already the new one when the connection is made. */
static int connection_host(CURL *easy, char **host, int32_t *port)
{
  char *url = NULL;
  char *h = NULL;
  char *p = NULL;
  CURLU *u = NULL;
  size_t n;
  int ok = 0;

  *host = NULL;
  *port = 0;
  if(curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK ||
     !url)
    return 0;
  u = curl_url();
  if(!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
     curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
    goto out;
  if(curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK)
    *port = (int32_t)atoi(p);
  /* "[::1]" -> "::1" (and drop a zone id, which no certificate names) */
  n = strlen(h);
  if(n > 2 && h[0] == '[' && h[n - 1] == ']') {
    char *pct;
    memmove(h, h + 1, n - 2);
    h[n - 2] = '\0';
    pct = strchr(h, '%');
    if(pct)
      *pct = '\0';
  }
  *host = strdup(h);
  ok = *host != NULL;
out:
  curl_free(h);
  curl_free(p);
  curl_url_cleanup(u);
  return ok;
}

static void write_verdict(struct cti_tls_verdict *v, int32_t reason,
                          int32_t verify_error, const char *message)
{
  if(!v)
    return;
  v->reason = reason;
  v->verify_error = verify_error;
  snprintf(v->message, sizeof(v->message), "%s", message);
}

/* Replaces X509_verify_cert for the connection: 1 accepts, 0 refuses and
 * (with SSL_VERIFY_PEER) aborts the handshake with an alert. */
static int verify_cb(X509_STORE_CTX *sctx, void *arg)
{
  struct conn_trust *c = arg;
  X509 *leaf = X509_STORE_CTX_get0_cert(sctx);
  struct cti_trust_outcome o;
  struct cti_report_target target;
  int32_t reason;

  if(c->insecure) {
    write_verdict(c->verdict, CT_TLS_OK, 0, "");
    return 1;
  }
  if(!leaf) {
    write_verdict(c->verdict, CT_TLS_CHAIN_INVALID,
                  X509_V_ERR_UNSPECIFIED, "the server sent no certificate");
    X509_STORE_CTX_set_error(sctx, X509_V_ERR_UNSPECIFIED);
    return 0;
  }
  target.host = c->host;
  target.port = c->port;
  cti_trust_check(c->policy, leaf, X509_STORE_CTX_get0_untrusted(sctx),
                  c->anchors, c->host, 0, &target, &o);
  reason = cti_trust_challenge(c->policy, leaf,
                               X509_STORE_CTX_get0_untrusted(sctx), c->host,
                               c->port, &o);
  if(reason != o.reason) {
    o.reason = reason;
    if(reason == CT_TLS_OK) {
      o.verify_error = 0;
      o.message[0] = '\0';
    }
    else if(reason == CT_TLS_REJECTED_BY_DELEGATE)
      snprintf(o.message, sizeof(o.message), "%s",
               "the server-trust challenge handler refused the server");
    else if(reason == CT_TLS_CHALLENGE_TIMED_OUT)
      snprintf(o.message, sizeof(o.message), "%s",
               "the server-trust challenge handler gave no answer in time");
  }
  write_verdict(c->verdict, o.reason, o.verify_error, o.message);
  if(o.reason != CT_TLS_OK) {
    X509_STORE_CTX_set_error(sctx, o.verify_error ? o.verify_error :
                             X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  X509_STORE_CTX_set_error(sctx, X509_V_OK);
  return 1;
}

static void info_cb(const SSL *ssl, int where, int ret)
{
  struct conn_trust *c;

  (void)ret;
  if(!(where & SSL_CB_HANDSHAKE_DONE))
    return;
  c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), get_conn_index());
  if(c)
    unbind_verdict(c);                 /* the transfer's pointer expires */
}

int cti_tls_configure_ctx(struct cti_tls_state *s, void *ssl_ctx,
                          void *curl_easy, const char *ca_file_override,
                          int insecure, struct cti_tls_verdict *verdict)
{
  SSL_CTX *ctx = ssl_ctx;
  struct conn_trust *c = NULL;
  X509_STORE *store;
  char errbuf[256];
  int idx = get_conn_index();
  int rc = CURLE_SSL_CONNECT_ERROR;

  errbuf[0] = '\0';
  /* The handshake with an https proxy, not with the origin: the engine
   * sets CURLOPT_SSL_VERIFYPEER 0 for every origin (insecure or not: this
   * hook verifies them) and CURLOPT_PROXY_SSL_VERIFYPEER 1 for proxies,
   * and libcurl 7.88 sets SSL_VERIFY_PEER or NONE from the connection's
   * own config just before calling us (ct_proxy.c). A proxy's certificate
   * is not judged with the origin's pins, policy, challenge hook or host
   * name: OpenSSL verifies it against CURLOPT_PROXY_CAINFO or the system
   * anchors, libcurl checks the proxy's name, and a failure ends the
   * handshake (CURLE_PEER_FAILED_VERIFICATION: CT_E_TLS). Leave the CTX
   * as libcurl made it; the origin's handshake inside the tunnel comes
   * here with SSL_VERIFY_NONE and is judged as always. */
  if(ctx && (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER))
    return CURLE_OK;
  if(!s || !ctx || !curl_easy || idx < 0) {
    write_verdict(verdict, CT_TLS_HANDSHAKE, 0, "TLS hook misconfigured");
    return CURLE_SSL_CONNECT_ERROR;
  }
  if(!s->anchors) {
    X509_STORE *sys = cti_trust_system_store();
    if(!sys || X509_STORE_up_ref(sys) != 1) {
      write_verdict(verdict, CT_TLS_CHAIN_INVALID, 0,
                    "the system trust store could not be loaded");
      return CURLE_SSL_CACERT_BADFILE;
    }
    s->anchors = sys;    /* only the loop thread touches the state */
  }
  store = s->anchors;
  if(ca_file_override) {
    store = cached_store(s, ca_file_override, errbuf);
    if(!store) {
      write_verdict(verdict, CT_TLS_CHAIN_INVALID, 0, errbuf);
      return CURLE_SSL_CACERT_BADFILE;
    }
  }
  c = calloc(1, sizeof(*c));
  if(!c) {
    write_verdict(verdict, CT_TLS_HANDSHAKE, 0, "out of memory");
    return CURLE_OUT_OF_MEMORY;
  }
  c->insecure = insecure != 0;
  c->verdict = verdict;
  if(verdict)
    verdict->holder = c;
  if(!connection_host(curl_easy, &c->host, &c->port)) {
    /* never verify without a name: that would skip the host check */
    write_verdict(verdict, CT_TLS_HANDSHAKE, 0,
                  "cannot tell which host the connection is for");
    goto fail;
  }
  if(X509_STORE_up_ref(store) != 1)
    goto fail;
  c->anchors = store;
  c->policy = s->policy;
  if(c->policy)
    ct_trust_policy_retain(c->policy);
  if(SSL_CTX_get_ex_data(ctx, idx)) {
    /* Not expected with libcurl 7.88 (one CTX per connection); refuse
     * rather than verify a connection with another one's data. */
    write_verdict(verdict, CT_TLS_HANDSHAKE, 0, "SSL_CTX configured twice");
    goto fail;
  }
  if(SSL_CTX_set_ex_data(ctx, idx, c) != 1) {
    write_verdict(verdict, CT_TLS_HANDSHAKE, 0, "out of memory");
    goto fail;
  }
  /* From here the CTX owns `c`. The shared store becomes the CTX's store
   * too (SSL_CTX_set_cert_store takes the reference we add). */
  if(X509_STORE_up_ref(store) == 1)
    SSL_CTX_set_cert_store(ctx, store);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_cert_verify_callback(ctx, verify_cb, c);
  SSL_CTX_set_info_callback(ctx, info_cb);
  /* a renegotiation would verify a new chain after the transfer's verdict
   * pointer expired; TLS 1.3 has none, TLS 1.2 servers do not get one */
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  /* libcurl 7.88 sets SSL_OP_NO_TICKET: a TLS 1.2 server that resumes
   * only by ticket (no session cache, nginx's default) then costs a full
   * handshake on every reconnect. Tickets go to the same session cache as
   * TLS 1.3 ones, under the same trust marker (ct_request.c), so one is
   * only offered to the host, port and trust generation that verified it. */
  SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
  return CURLE_OK;
fail:
  conn_trust_free(NULL, c, NULL, 0, 0, NULL);
  ERR_clear_error();
  return rc;
}
