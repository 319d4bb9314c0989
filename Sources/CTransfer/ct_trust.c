/*
 * ct_trust.c - trust policies, anchors, certificate helpers and the chain
 * evaluation shared by the handshake hook (ct_tls.c) and
 * ct_trust_evaluate().
 *
 * A policy is mutable until frozen (handed to a loop); after that it is
 * only read, from any thread, so the evaluation takes no lock. OpenSSL
 * objects it holds (X509_STORE, X509) are themselves safe to read
 * concurrently.
 */
#define _GNU_SOURCE 1                 /* memmem, timegm */
#include "ct_tls_internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define SPKI_LEN 32

struct host_rule {
  char **patterns;
  size_t pattern_count;
  char **exclusions;
  size_t exclusion_count;
  int include_subdomains;
  unsigned char (*spki)[SPKI_LEN];     /* explicit SPKI pins */
  size_t spki_count;
  STACK_OF(X509) *certs;               /* certificate pins */
  char **report_pins;                  /* base64 of all pins, for reports */
  size_t report_pin_count;
  int64_t expires;
  int report_only;
};

struct ct_trust_policy {
  int refs;                            /* __atomic */
  int frozen;                          /* __atomic */
  ct_pinning_mode mode;
  int allow_invalid;
  int validates_domain;
  STACK_OF(X509) *pinned_certs;
  X509_STORE *pinned_store;            /* the pinned certs as anchors */
  unsigned char (*pinned_spki)[SPKI_LEN];  /* explicit + from certs */
  size_t pinned_spki_count;
  size_t explicit_spki_count;
  struct host_rule *rules;
  size_t rule_count;
  ct_pin_report_fn report_fn;
  void *report_ctx;
  void (*report_release)(void *ctx);
  ct_trust_challenge_fn challenge_fn;
  void *challenge_ctx;
  void (*challenge_release)(void *ctx);
};

struct ct_trust_anchors {
  X509_STORE *store;
};

void cti_tls_err(char *errbuf, const char *msg)
{
  if(errbuf)
    snprintf(errbuf, 256, "%s", msg);
}

static STACK_OF(X509) *pin_chain(STACK_OF(X509) *validated, X509 *leaf,
                                 STACK_OF(X509) *untrusted);

/* ---- small helpers --- */

static int spki_sha256(X509 *cert, unsigned char out[SPKI_LEN])
{
  unsigned char *der = NULL;
  unsigned int mdlen = 0;
  int len;
  int ok;

  len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
  if(len <= 0)
    return 0;
  ok = EVP_Digest(der, (size_t)len, out, &mdlen, EVP_sha256(), NULL);
  OPENSSL_free(der);
  return ok && mdlen == SPKI_LEN;
}

static void spki_base64(const unsigned char hash[SPKI_LEN], char out[45])
{
  EVP_EncodeBlock((unsigned char *)out, hash, SPKI_LEN);
  out[44] = '\0';
}

/* A 44-character base64 SHA-256 digest; 1 on success. */
static int spki_decode(const char *b64, unsigned char out[SPKI_LEN])
{
  unsigned char buf[48];
  const char *s = b64;

  if(!strncmp(s, "sha256//", 8))
    s += 8;
  if(strlen(s) != 44 || s[43] != '=' || s[42] == '=')
    return 0;
  if(EVP_DecodeBlock(buf, (const unsigned char *)s, 44) != 33)
    return 0;
  memcpy(out, buf, SPKI_LEN);
  return 1;
}

static X509 *der_to_x509(const uint8_t *der, size_t length)
{
  const unsigned char *p = der;
  X509 *x;

  if(!der || !length || length > 1024 * 1024)
    return NULL;
  x = d2i_X509(NULL, &p, (long)length);
  if(x && p != der + length) {        /* trailing garbage: not one cert */
    X509_free(x);
    x = NULL;
  }
  ERR_clear_error();
  return x;
}

static int push_spki(unsigned char (**arr)[SPKI_LEN], size_t *count,
                     const unsigned char hash[SPKI_LEN])
{
  unsigned char (*grown)[SPKI_LEN];

  grown = realloc(*arr, (*count + 1) * sizeof(**arr));
  if(!grown)
    return 0;
  memcpy(grown[*count], hash, SPKI_LEN);
  *arr = grown;
  (*count)++;
  return 1;
}

static char *lower_dup(const char *s)
{
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  size_t i;

  if(!d)
    return NULL;
  for(i = 0; i < n; i++)
    d[i] = (char)tolower((unsigned char)s[i]);
  if(n && d[n - 1] == '.')             /* "example.com." == "example.com" */
    n--;
  d[n] = '\0';
  return d;
}

static void free_strings(char **v, size_t n)
{
  size_t i;

  if(!v)
    return;
  for(i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

int32_t cti_chain_problem(int err)
{
  switch(err) {
  case X509_V_OK:
    return CT_CHAIN_OK;
  case X509_V_ERR_CERT_HAS_EXPIRED:
  case X509_V_ERR_CRL_HAS_EXPIRED:
    return CT_CHAIN_EXPIRED;
  case X509_V_ERR_CERT_NOT_YET_VALID:
  case X509_V_ERR_CRL_NOT_YET_VALID:
    return CT_CHAIN_NOT_YET_VALID;
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
  case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
  case X509_V_ERR_CERT_UNTRUSTED:
    return CT_CHAIN_UNKNOWN_ISSUER;
  case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
  case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    return CT_CHAIN_SELF_SIGNED;
  case X509_V_ERR_CERT_SIGNATURE_FAILURE:
  case X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE:
  case X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
    return CT_CHAIN_BAD_SIGNATURE;
  default:
    return CT_CHAIN_OTHER;
  }
}

/* ---- the system store --- */

static pthread_once_t system_once = PTHREAD_ONCE_INIT;
static X509_STORE *system_store;

static void load_system_store(void)
{
  X509_STORE *store = X509_STORE_new();

  if(store && X509_STORE_set_default_paths(store) != 1) {
    X509_STORE_free(store);
    store = NULL;
  }
  ERR_clear_error();
  system_store = store;                /* kept for the process lifetime */
}

X509_STORE *cti_trust_system_store(void)
{
  pthread_once(&system_once, load_system_store);
  return system_store;
}

/* ---- policy --- */

ct_code ct_trust_policy_create(struct ct_trust_policy **out)
{
  struct ct_trust_policy *p = NULL;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  p = calloc(1, sizeof(*p));
  if(!p)
    goto fail;
  p->refs = 1;
  p->mode = CT_PINNING_NONE;
  p->validates_domain = 1;
  p->pinned_certs = sk_X509_new_null();
  p->pinned_store = X509_STORE_new();
  if(!p->pinned_certs || !p->pinned_store)
    goto fail;
  *out = p;
  return CT_OK;
fail:
  ct_trust_policy_release(p);
  return CT_E_NO_MEMORY;
}

void ct_trust_policy_retain(struct ct_trust_policy *policy)
{
  if(policy)
    __atomic_add_fetch(&policy->refs, 1, __ATOMIC_RELAXED);
}

static void free_rule(struct host_rule *r)
{
  free_strings(r->patterns, r->pattern_count);
  free_strings(r->exclusions, r->exclusion_count);
  free_strings(r->report_pins, r->report_pin_count);
  free(r->spki);
  sk_X509_pop_free(r->certs, X509_free);
}

void ct_trust_policy_release(struct ct_trust_policy *p)
{
  size_t i;

  if(!p)
    return;
  /* acq_rel: every write made before the last release happens before
   * the free below */
  if(__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  if(p->report_release)
    p->report_release(p->report_ctx);
  if(p->challenge_release)
    p->challenge_release(p->challenge_ctx);
  for(i = 0; i < p->rule_count; i++)
    free_rule(&p->rules[i]);
  free(p->rules);
  free(p->pinned_spki);
  sk_X509_pop_free(p->pinned_certs, X509_free);
  X509_STORE_free(p->pinned_store);
  free(p);
}

void cti_trust_policy_freeze(struct ct_trust_policy *p)
{
  __atomic_store_n(&p->frozen, 1, __ATOMIC_RELEASE);
}

static int is_frozen(const struct ct_trust_policy *p)
{
  return __atomic_load_n(&p->frozen, __ATOMIC_ACQUIRE);
}

ct_code ct_trust_policy_set_mode(struct ct_trust_policy *p,
                                 ct_pinning_mode mode)
{
  if(!p || is_frozen(p) || mode < CT_PINNING_NONE ||
     mode > CT_PINNING_CERTIFICATE)
    return CT_E_INVALID_ARGUMENT;
  p->mode = mode;
  return CT_OK;
}

ct_code ct_trust_policy_set_allow_invalid(struct ct_trust_policy *p,
                                          int32_t allow)
{
  if(!p || is_frozen(p))
    return CT_E_INVALID_ARGUMENT;
  p->allow_invalid = allow != 0;
  return CT_OK;
}

ct_code ct_trust_policy_set_validates_domain(struct ct_trust_policy *p,
                                             int32_t validates)
{
  if(!p || is_frozen(p))
    return CT_E_INVALID_ARGUMENT;
  p->validates_domain = validates != 0;
  return CT_OK;
}

ct_code ct_trust_policy_add_pinned_certificate(struct ct_trust_policy *p,
                                               const uint8_t *der,
                                               size_t length)
{
  X509 *x = NULL;
  unsigned char hash[SPKI_LEN];
  ct_code rc = CT_E_INVALID_ARGUMENT;

  if(!p || is_frozen(p) || !der)
    return CT_E_INVALID_ARGUMENT;
  x = der_to_x509(der, length);
  if(!x || !spki_sha256(x, hash))
    goto fail;
  rc = CT_E_NO_MEMORY;
  /* the store takes its own reference */
  if(X509_STORE_add_cert(p->pinned_store, x) != 1) {
    /* the same certificate twice is not an error */
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    if(ERR_GET_REASON(e) != X509_R_CERT_ALREADY_IN_HASH_TABLE)
      goto fail;
  }
  if(!push_spki(&p->pinned_spki, &p->pinned_spki_count, hash))
    goto fail;
  if(!sk_X509_push(p->pinned_certs, x))
    goto fail;
  return CT_OK;
fail:
  X509_free(x);
  return rc;
}

ct_code ct_trust_policy_add_pinned_spki(struct ct_trust_policy *p,
                                        const char *b64)
{
  unsigned char hash[SPKI_LEN];

  if(!p || is_frozen(p) || !b64 || !spki_decode(b64, hash))
    return CT_E_INVALID_ARGUMENT;
  if(!push_spki(&p->pinned_spki, &p->pinned_spki_count, hash))
    return CT_E_NO_MEMORY;
  p->explicit_spki_count++;
  return CT_OK;
}

/* "host", "*.host"; no other '*', no empty label, no blank. */
static int pattern_ok(const char *s)
{
  size_t i;
  size_t n = strlen(s);

  if(!n || n > 253)
    return 0;
  if(s[0] == '*') {
    if(n < 3 || s[1] != '.')
      return 0;
    s += 2;
    n -= 2;
  }
  if(s[0] == '.' || strstr(s, ".."))
    return 0;
  for(i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if(!(isalnum(c) || c == '.' || c == '-' || c == ':' || c == '_'))
      return 0;
  }
  return 1;
}

static char **copy_patterns(const char *const *src, size_t n,
                            char *errbuf, int *bad)
{
  char **v;
  size_t i;

  *bad = 0;
  v = calloc(n ? n : 1, sizeof(*v));
  if(!v)
    return NULL;
  for(i = 0; i < n; i++) {
    if(!src[i] || !pattern_ok(src[i])) {
      char msg[256];
      snprintf(msg, sizeof(msg), "invalid host pattern \"%.200s\"",
               src[i] ? src[i] : "(null)");
      cti_tls_err(errbuf, msg);
      *bad = 1;
      free_strings(v, n);
      return NULL;
    }
    v[i] = lower_dup(src[i]);
    if(!v[i]) {
      free_strings(v, n);
      return NULL;
    }
  }
  return v;
}

ct_code ct_trust_policy_add_host_rule(struct ct_trust_policy *p,
                                      const struct ct_host_rule_spec *spec,
                                      char *errbuf)
{
  struct host_rule r;
  struct host_rule *grown;
  ct_code rc = CT_E_INVALID_ARGUMENT;
  size_t i;
  int bad = 0;
  char msg[256];

  memset(&r, 0, sizeof(r));
  if(!p || !spec) {
    cti_tls_err(errbuf, "missing policy or rule");
    return CT_E_INVALID_ARGUMENT;
  }
  if(is_frozen(p)) {
    cti_tls_err(errbuf, "the policy is in use by a loop and cannot change");
    return CT_E_INVALID_ARGUMENT;
  }
  if(!spec->pattern_count || !spec->patterns) {
    cti_tls_err(errbuf, "a pin rule needs at least one host pattern");
    return CT_E_INVALID_ARGUMENT;
  }
  if(!spec->report_only && spec->spki_count + spec->cert_count < 2) {
    snprintf(msg, sizeof(msg), "an enforced pin rule for \"%.150s\" needs "
             "at least two pins (one of them a backup), got %zu",
             spec->patterns[0] ? spec->patterns[0] : "",
             spec->spki_count + spec->cert_count);
    cti_tls_err(errbuf, msg);
    return CT_E_INVALID_ARGUMENT;
  }
  if(spec->spki_count + spec->cert_count == 0) {
    cti_tls_err(errbuf, "a pin rule needs at least one pin");
    return CT_E_INVALID_ARGUMENT;
  }
  if((spec->spki_count && !spec->spki_sha256) ||
     (spec->cert_count && (!spec->cert_ders || !spec->cert_lengths)) ||
     (spec->exclusion_count && !spec->exclusions)) {
    cti_tls_err(errbuf, "a count is set but its array is NULL");
    return CT_E_INVALID_ARGUMENT;
  }

  r.include_subdomains = spec->include_subdomains != 0;
  r.expires = spec->expires_unix;
  r.report_only = spec->report_only != 0;
  r.pattern_count = spec->pattern_count;
  r.patterns = copy_patterns(spec->patterns, spec->pattern_count, errbuf,
                             &bad);
  if(!r.patterns) {
    r.pattern_count = 0;
    rc = bad ? CT_E_INVALID_ARGUMENT : CT_E_NO_MEMORY;
    goto fail;
  }
  r.exclusion_count = spec->exclusion_count;
  r.exclusions = copy_patterns(spec->exclusions, spec->exclusion_count,
                               errbuf, &bad);
  if(!r.exclusions) {
    r.exclusion_count = 0;
    rc = bad ? CT_E_INVALID_ARGUMENT : CT_E_NO_MEMORY;
    goto fail;
  }
  r.report_pins = calloc(spec->spki_count + spec->cert_count,
                         sizeof(char *));
  r.certs = sk_X509_new_null();
  if(!r.report_pins || !r.certs) {
    rc = CT_E_NO_MEMORY;
    goto fail;
  }
  for(i = 0; i < spec->spki_count; i++) {
    unsigned char hash[SPKI_LEN];
    char b64[45];
    if(!spec->spki_sha256[i] || !spki_decode(spec->spki_sha256[i], hash)) {
      snprintf(msg, sizeof(msg), "pin \"%.100s\" is not the base64 of a "
               "SHA-256 digest (44 characters)",
               spec->spki_sha256[i] ? spec->spki_sha256[i] : "(null)");
      cti_tls_err(errbuf, msg);
      rc = CT_E_INVALID_ARGUMENT;
      goto fail;
    }
    spki_base64(hash, b64);
    r.report_pins[r.report_pin_count] = strdup(b64);
    if(!r.report_pins[r.report_pin_count] ||
       !push_spki(&r.spki, &r.spki_count, hash)) {
      rc = CT_E_NO_MEMORY;
      goto fail;
    }
    r.report_pin_count++;
  }
  for(i = 0; i < spec->cert_count; i++) {
    unsigned char hash[SPKI_LEN];
    char b64[45];
    X509 *x = der_to_x509(spec->cert_ders[i], spec->cert_lengths[i]);
    if(!x || !spki_sha256(x, hash)) {
      X509_free(x);
      snprintf(msg, sizeof(msg), "pinned certificate %zu is not a DER "
               "certificate", i);
      cti_tls_err(errbuf, msg);
      rc = CT_E_INVALID_ARGUMENT;
      goto fail;
    }
    if(!sk_X509_push(r.certs, x)) {
      X509_free(x);
      rc = CT_E_NO_MEMORY;
      goto fail;
    }
    spki_base64(hash, b64);
    r.report_pins[r.report_pin_count] = strdup(b64);
    if(!r.report_pins[r.report_pin_count]) {
      rc = CT_E_NO_MEMORY;
      goto fail;
    }
    r.report_pin_count++;
  }
  grown = realloc(p->rules, (p->rule_count + 1) * sizeof(*grown));
  if(!grown) {
    rc = CT_E_NO_MEMORY;
    goto fail;
  }
  grown[p->rule_count] = r;
  p->rules = grown;
  p->rule_count++;
  return CT_OK;
fail:
  free_rule(&r);
  return rc;
}

ct_code ct_trust_policy_set_report_handler(struct ct_trust_policy *p,
                                           ct_pin_report_fn fn, void *ctx,
                                           void (*release_ctx)(void *))
{
  if(!p || is_frozen(p))
    return CT_E_INVALID_ARGUMENT;
  if(p->report_release)
    p->report_release(p->report_ctx);
  p->report_fn = fn;
  p->report_ctx = ctx;
  p->report_release = release_ctx;
  return CT_OK;
}

ct_code ct_trust_policy_set_challenge_handler(struct ct_trust_policy *p,
                                              ct_trust_challenge_fn fn,
                                              void *ctx,
                                              void (*release_ctx)(void *))
{
  if(!p || is_frozen(p))
    return CT_E_INVALID_ARGUMENT;
  if(p->challenge_release)
    p->challenge_release(p->challenge_ctx);
  p->challenge_fn = fn;
  p->challenge_ctx = ctx;
  p->challenge_release = release_ctx;
  return CT_OK;
}

int32_t cti_trust_challenge(const struct ct_trust_policy *p, X509 *leaf,
                            STACK_OF(X509) *untrusted, const char *host,
                            int32_t port,
                            const struct cti_trust_outcome *outcome)
{
  struct ct_trust_challenge ch;
  STACK_OF(X509) *chain = NULL;
  unsigned char **ders = NULL;
  size_t *lengths = NULL;
  int n;
  int i;
  int count = 0;
  int32_t reason = outcome->reason;

  if(!p || !p->challenge_fn)
    return reason;
  chain = pin_chain(NULL, leaf, untrusted);
  n = chain ? sk_X509_num(chain) : 0;
  ders = calloc(n ? (size_t)n : 1, sizeof(*ders));
  lengths = calloc(n ? (size_t)n : 1, sizeof(*lengths));
  if(!chain || !ders || !lengths)
    goto out;                          /* no memory: default handling */
  for(i = 0; i < n; i++) {
    int len = i2d_X509(sk_X509_value(chain, i), &ders[count]);
    if(len > 0)
      lengths[count++] = (size_t)len;
    else
      ders[count] = NULL;
  }
  memset(&ch, 0, sizeof(ch));
  ch.host = host;
  ch.port = port;
  ch.chain_ders = (const uint8_t *const *)ders;
  ch.chain_lengths = lengths;
  ch.chain_count = (size_t)count;
  ch.proposed_reason = outcome->reason;
  ch.verify_error = outcome->verify_error;
  ch.message = outcome->message;
  reason = p->challenge_fn(p->challenge_ctx, &ch);
out:
  for(i = 0; i < count; i++)
    OPENSSL_free(ders[i]);
  free(ders);
  free(lengths);
  sk_X509_free(chain);
  return reason;
}

ct_chain_problem ct_chain_problem_from_verify_error(int32_t verify_error)
{
  return (ct_chain_problem)cti_chain_problem(verify_error);
}

/* ---- host patterns --- */

/* `host` is lower case without a trailing dot. */
static int pattern_matches(const char *pattern, const char *host,
                           int include_subdomains)
{
  size_t hn = strlen(host);
  size_t pn;

  if(pattern[0] == '*') {
    const char *base = pattern + 1;    /* ".example.com" */
    const char *dot;
    pn = strlen(base);
    if(hn <= pn || strcmp(host + hn - pn, base))
      return 0;
    if(include_subdomains)
      return 1;
    /* exactly one label in front of the base */
    dot = memchr(host, '.', hn - pn);
    return dot == NULL;
  }
  if(!strcmp(pattern, host))
    return 1;
  pn = strlen(pattern);
  return include_subdomains && hn > pn + 1 &&
         !strcmp(host + hn - pn, pattern) && host[hn - pn - 1] == '.';
}

static const struct host_rule *find_rule(const struct ct_trust_policy *p,
                                         const char *host, time_t at)
{
  char *h;
  size_t i;
  size_t j;
  const struct host_rule *found = NULL;

  if(!p->rule_count)
    return NULL;
  h = lower_dup(host);
  if(!h)
    return NULL;
  for(i = 0; i < p->rule_count && !found; i++) {
    const struct host_rule *r = &p->rules[i];
    int hit = 0;
    if(r->expires && (int64_t)at > r->expires)
      continue;
    for(j = 0; j < r->pattern_count && !hit; j++)
      hit = pattern_matches(r->patterns[j], h, r->include_subdomains);
    for(j = 0; j < r->exclusion_count && hit; j++)
      if(pattern_matches(r->exclusions[j], h, 0))
        hit = 0;
    if(hit)
      found = r;
  }
  free(h);
  return found;
}

/* ---- evaluation --- */

/* Verify `leaf` against `store`. On success `*chain` is the validated
 * chain (caller frees); else `*err` is the X509_V_ERR_*. */
static int verify_chain(X509_STORE *store, X509 *leaf,
                        STACK_OF(X509) *untrusted, time_t at, int partial,
                        STACK_OF(X509) **chain, int *err)
{
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  X509_VERIFY_PARAM *param;
  int ok = 0;

  *chain = NULL;
  *err = X509_V_ERR_OUT_OF_MEM;
  if(!ctx || X509_STORE_CTX_init(ctx, store, leaf, untrusted) != 1)
    goto out;
  X509_STORE_CTX_set_default(ctx, "ssl_server");
  param = X509_STORE_CTX_get0_param(ctx);
  if(at)
    X509_VERIFY_PARAM_set_time(param, at);
  if(partial)
    X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
  ok = X509_verify_cert(ctx) == 1;
  if(ok) {
    *chain = X509_STORE_CTX_get1_chain(ctx);
    *err = X509_V_OK;
  }
  else {
    *err = X509_STORE_CTX_get_error(ctx);
    if(*err == X509_V_OK)
      *err = X509_V_ERR_UNSPECIFIED;
  }
out:
  X509_STORE_CTX_free(ctx);
  ERR_clear_error();
  return ok;
}

static int host_matches(X509 *leaf, const char *host)
{
  char buf[INET6_ADDRSTRLEN + 2];
  unsigned char addr[16];
  size_t n = strlen(host);

  /* "[::1]" -> "::1" */
  if(n > 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(buf)) {
    memcpy(buf, host + 1, n - 2);
    buf[n - 2] = '\0';
    host = buf;
  }
  if(inet_pton(AF_INET, host, addr) == 1 ||
     inet_pton(AF_INET6, host, addr) == 1)
    return X509_check_ip_asc(leaf, host, 0) == 1;
  return X509_check_host(leaf, host, strlen(host),
                         X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
}

static int is_ip_literal(const char *host)
{
  unsigned char addr[16];
  return inet_pton(AF_INET, host, addr) == 1 ||
         inet_pton(AF_INET6, host, addr) == 1 || host[0] == '[';
}

static void fail_with(struct cti_trust_outcome *out, int32_t reason,
                      int verify_error, const char *fmt, const char *arg)
{
  out->reason = reason;
  out->verify_error = verify_error;
  snprintf(out->message, sizeof(out->message), fmt, arg);
}

/* Validate against `store`, then the host name. 1: valid. */
static int validate(X509_STORE *store, X509 *leaf, STACK_OF(X509) *untrusted,
                    time_t at, int partial, const char *check_host,
                    int untrusted_means_unpinned, STACK_OF(X509) **chain,
                    struct cti_trust_outcome *out)
{
  int err = 0;

  if(!verify_chain(store, leaf, untrusted, at, partial, chain, &err)) {
    int32_t problem = cti_chain_problem(err);
    if(untrusted_means_unpinned && (problem == CT_CHAIN_UNKNOWN_ISSUER ||
                                    problem == CT_CHAIN_SELF_SIGNED))
      fail_with(out, CT_TLS_NO_PIN_MATCHED, err, "the chain does not lead "
                "to a pinned certificate: %s",
                X509_verify_cert_error_string(err));
    else
      fail_with(out, CT_TLS_CHAIN_INVALID, err,
                "certificate chain invalid: %s",
                X509_verify_cert_error_string(err));
    return 0;
  }
  if(check_host && !host_matches(leaf, check_host)) {
    fail_with(out, CT_TLS_HOSTNAME_MISMATCH,
              is_ip_literal(check_host) ? X509_V_ERR_IP_ADDRESS_MISMATCH :
              X509_V_ERR_HOSTNAME_MISMATCH,
              "the certificate does not match host \"%.200s\"", check_host);
    return 0;
  }
  return 1;
}

static int chain_has_spki(STACK_OF(X509) *chain,
                          unsigned char (*pins)[SPKI_LEN], size_t count)
{
  int i;
  size_t j;

  for(i = 0; i < sk_X509_num(chain); i++) {
    unsigned char hash[SPKI_LEN];
    if(!spki_sha256(sk_X509_value(chain, i), hash))
      continue;
    for(j = 0; j < count; j++)
      if(!memcmp(hash, pins[j], SPKI_LEN))
        return 1;
  }
  return 0;
}

static int chain_has_cert(STACK_OF(X509) *chain, STACK_OF(X509) *pins)
{
  int i;
  int j;

  for(i = 0; i < sk_X509_num(chain); i++)
    for(j = 0; j < sk_X509_num(pins); j++)
      if(!X509_cmp(sk_X509_value(chain, i), sk_X509_value(pins, j)))
        return 1;
  return 0;
}

/* 1 when `issuer` really issued `cert`: names (and key identifiers) agree
 * AND `cert`'s signature verifies with `issuer`'s public key. */
static int really_issued(X509 *issuer, X509 *cert)
{
  EVP_PKEY *key;
  int ok;

  if(X509_check_issued(issuer, cert) != X509_V_OK)
    return 0;
  key = X509_get0_pubkey(issuer);
  ok = key && X509_verify(cert, key) == 1;
  ERR_clear_error();
  return ok;
}

/* What pins are checked against. With a chain OpenSSL built and verified
 * (`validated`), exactly that chain: certificates the server merely sent
 * never count (a server can send anyone's certificate, not its key).
 * Without one (invalid certificates allowed), the chain walked up from
 * the leaf through presented certificates that really issued the previous
 * one (name match and signature), so unrelated extras never count either.
 * References are borrowed; NULL when out of memory. */
static STACK_OF(X509) *pin_chain(STACK_OF(X509) *validated, X509 *leaf,
                                 STACK_OF(X509) *untrusted)
{
  STACK_OF(X509) *all = sk_X509_new_null();
  X509 *cur = leaf;
  int i;

  if(!all)
    return NULL;
  if(validated) {
    for(i = 0; i < sk_X509_num(validated); i++)
      if(!sk_X509_push(all, sk_X509_value(validated, i)))
        goto fail;
    return all;
  }
  if(!sk_X509_push(all, leaf))
    goto fail;
  /* Each step adds a certificate not yet in `all`, so this ends after at
   * most sk_X509_num(untrusted) steps; a self-signed one ends it too. */
  while(X509_check_issued(cur, cur) != X509_V_OK) {
    X509 *next = NULL;
    for(i = 0; i < sk_X509_num(untrusted) && !next; i++) {
      X509 *x = sk_X509_value(untrusted, i);
      int j;
      int seen = 0;
      for(j = 0; j < sk_X509_num(all) && !seen; j++)
        seen = !X509_cmp(sk_X509_value(all, j), x);
      if(!seen && really_issued(x, cur))
        next = x;
    }
    if(!next)
      break;
    if(!sk_X509_push(all, next))
      goto fail;
    cur = next;
  }
  ERR_clear_error();
  return all;
fail:
  sk_X509_free(all);
  return NULL;
}

static void send_report(const struct ct_trust_policy *p,
                        const struct host_rule *r, STACK_OF(X509) *chain,
                        const struct cti_report_target *target, time_t at)
{
  struct ct_pin_report rep;
  int n = sk_X509_num(chain);
  unsigned char **ders = calloc(n ? (size_t)n : 1, sizeof(*ders));
  size_t *lengths = calloc(n ? (size_t)n : 1, sizeof(*lengths));
  int i;
  int count = 0;

  if(!ders || !lengths)
    goto out;
  for(i = 0; i < n; i++) {
    int len = i2d_X509(sk_X509_value(chain, i), &ders[count]);
    if(len > 0)
      lengths[count++] = (size_t)len;
    else
      ders[count] = NULL;
  }
  memset(&rep, 0, sizeof(rep));
  rep.host = target->host;
  rep.port = target->port;
  rep.pattern = r->patterns[0];
  rep.chain_ders = (const uint8_t *const *)ders;
  rep.chain_lengths = lengths;
  rep.chain_count = (size_t)count;
  rep.pins = (const char *const *)r->report_pins;
  rep.pin_count = r->report_pin_count;
  rep.time_unix = (int64_t)at;
  rep.expires_unix = r->expires;
  rep.enforced = !r->report_only;
  p->report_fn(p->report_ctx, &rep);
  for(i = 0; i < count; i++)
    OPENSSL_free(ders[i]);
out:
  free(ders);
  free(lengths);
}

void cti_trust_check(const struct ct_trust_policy *p, X509 *leaf,
                     STACK_OF(X509) *untrusted, X509_STORE *anchors,
                     const char *host, time_t at,
                     const struct cti_report_target *target,
                     struct cti_trust_outcome *out)
{
  ct_pinning_mode mode = p ? p->mode : CT_PINNING_NONE;
  int allow = p ? p->allow_invalid : 0;
  int vdom = p ? p->validates_domain : 1;
  size_t pins = p ? (size_t)sk_X509_num(p->pinned_certs) +
                    p->explicit_spki_count : 0;
  const char *check_host = vdom ? host : NULL;
  STACK_OF(X509) *validated = NULL;
  STACK_OF(X509) *all = NULL;
  const struct host_rule *rule;
  time_t now = at ? at : time(NULL);

  memset(out, 0, sizeof(*out));

  /* AFSecurityPolicy: "In order to validate a domain name for self signed
   * certificates, you MUST use pinning." */
  if(host && allow && vdom && (mode == CT_PINNING_NONE || pins == 0)) {
    fail_with(out, CT_TLS_POLICY_INVALID, 0, "%s", "validating the domain "
              "name while allowing invalid certificates requires pinning "
              "(a pinning mode and pinned certificates)");
    goto done;
  }

  switch(mode) {
  case CT_PINNING_NONE:
    if(!allow && !validate(anchors, leaf, untrusted, at, 0, check_host, 0,
                           &validated, out))
      goto done;
    break;
  case CT_PINNING_PUBLIC_KEY:
    if(!allow && !validate(anchors, leaf, untrusted, at, 0, check_host, 0,
                           &validated, out))
      goto done;
    all = pin_chain(validated, leaf, untrusted);
    if(!all || !chain_has_spki(all, p->pinned_spki, p->pinned_spki_count)) {
      fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s",
                "no public key of the chain is pinned");
      goto done;
    }
    break;
  case CT_PINNING_CERTIFICATE:
    /* The pinned certificates are the only anchors (partial chains allowed
     * so that a pinned intermediate or leaf ends the chain). */
    if(!validate(p->pinned_store, leaf, untrusted, at, 1, check_host, 1,
                 &validated, out))
      goto done;
    if(!chain_has_cert(validated, p->pinned_certs)) {
      fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s",
                "the validated chain contains no pinned certificate");
      goto done;
    }
    break;
  }

  /* Per-host rules, beyond AFNetworking. */
  if(p && host) {
    rule = find_rule(p, host, now);
    if(rule) {
      if(!all)
        all = pin_chain(validated, leaf, untrusted);
      if(!all) {
        fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s", "out of memory");
        goto done;
      }
      if(!chain_has_spki(all, rule->spki, rule->spki_count) &&
         !chain_has_cert(all, rule->certs)) {
        if(target && p->report_fn)
          send_report(p, rule, all, target, now);
        if(rule->report_only)
          out->report_only_mismatch = 1;
        else
          fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "no pin of the rule for "
                    "\"%.180s\" matched the chain", rule->patterns[0]);
      }
    }
  }
done:
  sk_X509_free(all);
  sk_X509_pop_free(validated, X509_free);
}

/* ---- anchors --- */

static ct_code anchors_wrap(X509_STORE *store, struct ct_trust_anchors **out)
{
  struct ct_trust_anchors *a = calloc(1, sizeof(*a));

  if(!a) {
    X509_STORE_free(store);
    return CT_E_NO_MEMORY;
  }
  a->store = store;
  *out = a;
  return CT_OK;
}

ct_code ct_trust_anchors_create_default(struct ct_trust_anchors **out,
                                        char *errbuf)
{
  X509_STORE *s;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  s = cti_trust_system_store();
  if(!s || X509_STORE_up_ref(s) != 1) {
    cti_tls_err(errbuf, "the system trust store could not be loaded");
    return CT_E_TLS;
  }
  return anchors_wrap(s, out);
}

static ct_code store_from_list(const struct ct_der_list *list,
                               X509_STORE **out)
{
  X509_STORE *store = X509_STORE_new();
  size_t i;

  *out = NULL;
  if(!store)
    return CT_E_NO_MEMORY;
  for(i = 0; i < list->count; i++) {
    X509 *x = der_to_x509(list->ders[i], list->lengths[i]);
    if(!x) {
      X509_STORE_free(store);
      return CT_E_INVALID_ARGUMENT;
    }
    X509_STORE_add_cert(store, x);     /* duplicates are ignored */
    X509_free(x);
  }
  ERR_clear_error();
  *out = store;
  return CT_OK;
}

/* Read a whole (small) file; 1 on success, caller frees *data. */
static int read_file(const char *path, uint8_t **data, size_t *len)
{
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t cap = 0;
  size_t n = 0;
  int ok = 0;

  *data = NULL;
  *len = 0;
  if(!f)
    return 0;
  for(;;) {
    size_t got;
    if(n == cap) {
      uint8_t *grown;
      if(cap >= 64u * 1024 * 1024)     /* no bundle is that large */
        goto out;
      cap = cap ? cap * 2 : 65536;
      grown = realloc(buf, cap);
      if(!grown)
        goto out;
      buf = grown;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
    if(got == 0) {
      ok = !ferror(f);
      break;
    }
  }
out:
  fclose(f);
  if(!ok) {
    free(buf);
    return 0;
  }
  *data = buf;
  *len = n;
  return 1;
}

ct_code cti_trust_store_from_file(const char *path, X509_STORE **out,
                                  char *errbuf)
{
  uint8_t *data = NULL;
  size_t len = 0;
  struct ct_der_list list;
  ct_code rc;
  char msg[256];

  memset(&list, 0, sizeof(list));
  *out = NULL;
  if(!read_file(path, &data, &len)) {
    snprintf(msg, sizeof(msg), "cannot read CA file \"%.200s\"", path);
    cti_tls_err(errbuf, msg);
    return CT_E_INVALID_ARGUMENT;
  }
  rc = ct_cert_parse(data, len, &list);
  free(data);
  if(rc != CT_OK) {
    snprintf(msg, sizeof(msg), "no certificate in CA file \"%.200s\"",
             path);
    cti_tls_err(errbuf, msg);
    return rc;
  }
  rc = store_from_list(&list, out);
  ct_der_list_free(&list);
  if(rc != CT_OK)
    cti_tls_err(errbuf, "the CA file holds a malformed certificate");
  return rc;
}

ct_code ct_trust_anchors_create_from_file(const char *path,
                                          struct ct_trust_anchors **out,
                                          char *errbuf)
{
  X509_STORE *store = NULL;
  ct_code rc;

  if(!path || !out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  rc = cti_trust_store_from_file(path, &store, errbuf);
  if(rc != CT_OK)
    return rc;
  return anchors_wrap(store, out);
}

ct_code ct_trust_anchors_create_from_ders(const uint8_t *const *ders,
                                          const size_t *lengths,
                                          size_t count,
                                          struct ct_trust_anchors **out,
                                          char *errbuf)
{
  struct ct_der_list list;
  X509_STORE *store = NULL;
  ct_code rc;

  if(!out || (count && (!ders || !lengths)))
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  list.count = count;
  list.ders = (uint8_t **)ders;        /* read only below */
  list.lengths = (size_t *)lengths;
  rc = store_from_list(&list, &store);
  if(rc != CT_OK) {
    cti_tls_err(errbuf, "an anchor is not a DER certificate");
    return rc;
  }
  return anchors_wrap(store, out);
}

void ct_trust_anchors_destroy(struct ct_trust_anchors *a)
{
  if(!a)
    return;
  X509_STORE_free(a->store);
  free(a);
}

/* ---- evaluation without a connection --- */

ct_code ct_trust_evaluate(const struct ct_trust_policy *policy,
                          const uint8_t *const *ders, const size_t *lengths,
                          size_t count, const char *host,
                          int64_t evaluation_time_unix,
                          const struct ct_trust_anchors *anchors,
                          struct ct_trust_result *out)
{
  STACK_OF(X509) *chain = NULL;
  X509_STORE *store;
  struct cti_trust_outcome o;
  ct_code rc = CT_E_INVALID_ARGUMENT;
  size_t i;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  if(!ders || !lengths || !count) {
    snprintf(out->message, sizeof(out->message), "no certificate to "
             "evaluate");
    return CT_E_INVALID_ARGUMENT;
  }
  store = anchors ? anchors->store : cti_trust_system_store();
  if(!store) {
    snprintf(out->message, sizeof(out->message), "no trust anchors");
    return CT_E_TLS;
  }
  chain = sk_X509_new_null();
  if(!chain)
    return CT_E_NO_MEMORY;
  for(i = 0; i < count; i++) {
    X509 *x = der_to_x509(ders[i], lengths[i]);
    if(!x || !sk_X509_push(chain, x)) {
      X509_free(x);
      snprintf(out->message, sizeof(out->message), "certificate %zu is not "
               "DER", i);
      goto out;
    }
  }
  cti_trust_check(policy, sk_X509_value(chain, 0), chain, store,
                  host && *host ? host : NULL,
                  (time_t)evaluation_time_unix, NULL, &o);
  out->reason = o.reason;
  out->verify_error = o.verify_error;
  out->chain_problem = cti_chain_problem(o.verify_error);
  if(o.reason == CT_TLS_HOSTNAME_MISMATCH)
    out->chain_problem = CT_CHAIN_OK;
  out->report_only_mismatch = o.report_only_mismatch;
  memcpy(out->message, o.message, sizeof(out->message));
  rc = CT_OK;
out:
  sk_X509_pop_free(chain, X509_free);
  return rc;
}

/* ---- certificate helpers --- */

void ct_der_list_free(struct ct_der_list *list)
{
  size_t i;

  if(!list)
    return;
  for(i = 0; i < list->count; i++)
    OPENSSL_free(list->ders[i]);
  free(list->ders);
  free(list->lengths);
  memset(list, 0, sizeof(*list));
}

static int list_push(struct ct_der_list *l, X509 *x)
{
  unsigned char *der = NULL;
  uint8_t **d;
  size_t *n;
  int len = i2d_X509(x, &der);

  if(len <= 0)
    return 0;
  d = realloc(l->ders, (l->count + 1) * sizeof(*d));
  if(!d) {
    OPENSSL_free(der);
    return 0;
  }
  l->ders = d;
  n = realloc(l->lengths, (l->count + 1) * sizeof(*n));
  if(!n) {
    OPENSSL_free(der);
    return 0;
  }
  l->lengths = n;
  l->ders[l->count] = der;
  l->lengths[l->count] = (size_t)len;
  l->count++;
  return 1;
}

ct_code ct_cert_parse(const uint8_t *data, size_t length,
                      struct ct_der_list *out)
{
  BIO *bio = NULL;
  X509 *x = NULL;
  ct_code rc = CT_E_INVALID_ARGUMENT;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  if(!data || !length || length > INT32_MAX)
    return CT_E_INVALID_ARGUMENT;
  if(memmem(data, length, "-----BEGIN", 10)) {
    bio = BIO_new_mem_buf(data, (int)length);
    if(!bio)
      return CT_E_NO_MEMORY;
    /* PEM_read_bio_X509 skips blocks that are not certificates */
    while((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
      int ok = list_push(out, x);
      X509_free(x);
      if(!ok) {
        rc = CT_E_NO_MEMORY;
        goto fail;
      }
    }
  }
  else {
    x = der_to_x509(data, length);
    if(x) {
      int ok = list_push(out, x);
      X509_free(x);
      if(!ok) {
        rc = CT_E_NO_MEMORY;
        goto fail;
      }
    }
  }
  ERR_clear_error();
  BIO_free(bio);
  return out->count ? CT_OK : CT_E_INVALID_ARGUMENT;
fail:
  ERR_clear_error();
  BIO_free(bio);
  ct_der_list_free(out);
  return rc;
}

ct_code ct_cert_spki_sha256(const uint8_t *der, size_t length, char *out,
                            size_t capacity)
{
  X509 *x;
  unsigned char hash[SPKI_LEN];
  char b64[45];
  int ok;

  if(!der || !out || capacity < 45)
    return CT_E_INVALID_ARGUMENT;
  x = der_to_x509(der, length);
  if(!x)
    return CT_E_INVALID_ARGUMENT;
  ok = spki_sha256(x, hash);
  X509_free(x);
  if(!ok)
    return CT_E_INVALID_ARGUMENT;
  spki_base64(hash, b64);
  memcpy(out, b64, 45);
  return CT_OK;
}

static void name_line(X509_NAME *name, char *out, size_t cap)
{
  BIO *bio = BIO_new(BIO_s_mem());
  int n;

  out[0] = '\0';
  if(!bio)
    return;
  if(X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0) {
    n = BIO_read(bio, out, (int)cap - 1);
    if(n > 0)
      out[n] = '\0';
  }
  BIO_free(bio);
}

static int64_t asn1_unix(const ASN1_TIME *t)
{
  struct tm tm;

  memset(&tm, 0, sizeof(tm));
  if(!t || ASN1_TIME_to_tm(t, &tm) != 1)
    return 0;
  return (int64_t)timegm(&tm);
}

ct_code ct_cert_info(const uint8_t *der, size_t length,
                     struct ct_cert_info *out)
{
  X509 *x;

  if(!der || !out)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  x = der_to_x509(der, length);
  if(!x)
    return CT_E_INVALID_ARGUMENT;
  name_line(X509_get_subject_name(x), out->subject, sizeof(out->subject));
  name_line(X509_get_issuer_name(x), out->issuer, sizeof(out->issuer));
  out->not_before_unix = asn1_unix(X509_get0_notBefore(x));
  out->not_after_unix = asn1_unix(X509_get0_notAfter(x));
  out->is_ca = X509_check_ca(x) > 0;
  /* not X509_check_issued(): it also wants keyCertSign, which a
   * self-signed server certificate often lacks */
  out->self_signed = !X509_NAME_cmp(X509_get_subject_name(x),
                                    X509_get_issuer_name(x)) &&
                     X509_verify(x, X509_get0_pubkey(x)) == 1;
  X509_free(x);
  ERR_clear_error();
  return CT_OK;
}
