/*
 * ct_trust_policy.c - trust policy objects: reference counting, setters,
 * per-host rule parsing and which rule applies to a host.
 *
 * A policy is mutable until frozen (handed to a loop); after that it is
 * only read, from any thread, so the evaluation takes no lock. OpenSSL
 * objects it holds (X509_STORE, X509) are themselves safe to read
 * concurrently.
 */
#include "ct_trust_internal.h"
#include "ct_hostmatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

/* ---- small helpers --- */

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

static void free_strings(char **v, size_t n)
{
  size_t i;

  if(!v)
    return;
  for(i = 0; i < n; i++)
    free(v[i]);
  free(v);
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
  x = cti_der_to_x509(der, length);
  if(!x || !cti_spki_sha256(x, hash))
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
    if(!src[i] || !cti_host_pattern_ok(src[i])) {
      char msg[256];
      snprintf(msg, sizeof(msg), "invalid host pattern \"%.200s\"",
               src[i] ? src[i] : "(null)");
      cti_tls_err(errbuf, msg);
      *bad = 1;
      free_strings(v, n);
      return NULL;
    }
    v[i] = cti_host_lower_dup(src[i]);
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
    cti_spki_base64(hash, b64);
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
    X509 *x = cti_der_to_x509(spec->cert_ders[i], spec->cert_lengths[i]);
    if(!x || !cti_spki_sha256(x, hash)) {
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
    cti_spki_base64(hash, b64);
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

const struct host_rule *cti_trust_find_rule(const struct ct_trust_policy *p,
                                            const char *host, time_t at,
                                            size_t *index)
{
  char *h;
  size_t i;
  size_t j;
  int best_rank = 0;
  const struct host_rule *found = NULL;

  if(!p->rule_count)
    return NULL;
  h = cti_host_lower_dup(host);
  if(!h)
    return NULL;
  /* TrustKit's precedence, not insertion order: an exact host beats
   * "*.parent", which beats include-subdomains on a parent (the longer
   * parent first). A tie keeps the rule added first. */
  for(i = 0; i < p->rule_count; i++) {
    const struct host_rule *r = &p->rules[i];
    int rank = 0;
    if(r->expires && (int64_t)at > r->expires)
      continue;
    for(j = 0; j < r->pattern_count; j++) {
      int k = cti_host_match_rank(r->patterns[j], h, r->include_subdomains);
      if(k > rank)
        rank = k;
    }
    for(j = 0; j < r->exclusion_count && rank; j++)
      if(cti_host_match_rank(r->exclusions[j], h, 0))
        rank = 0;
    if(rank > best_rank) {
      best_rank = rank;
      found = r;
      if(index)
        *index = i;
    }
  }
  free(h);
  return found;
}

int64_t ct_trust_policy_rule_for_host(const struct ct_trust_policy *p,
                                      const char *host, int64_t at_unix)
{
  size_t index = 0;

  if(!p || !host)
    return -1;
  if(!cti_trust_find_rule(p, host, at_unix ? (time_t)at_unix : time(NULL),
                          &index))
    return -1;
  return (int64_t)index;
}
