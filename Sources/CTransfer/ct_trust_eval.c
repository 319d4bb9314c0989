/*
 * ct_trust_eval.c - the chain evaluation shared by the handshake hook
 * (ct_tls.c) and ct_trust_evaluate(): chain validation, host name, pins,
 * per-host rules, pin reports and the challenge handler.
 *
 * Pins are compared only against the chain OpenSSL built and verified, or
 * (invalid certificates allowed) the chain walked up from the leaf through
 * presented certificates that really issued one another: a server can send
 * anyone's certificate, not hold anyone's key.
 */
#include "ct_trust_internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

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

ct_chain_problem ct_chain_problem_from_verify_error(int32_t verify_error)
{
  return (ct_chain_problem)cti_chain_problem(verify_error);
}

/* ---- evaluation --- */

/* Verify `leaf` against `store`. On success `*done` is the verification
 * context (caller frees with X509_STORE_CTX_free), whose chain
 * (X509_STORE_CTX_get0_chain) is the validated one: borrowing it costs
 * nothing, where a copy (get1_chain) took a reference on every certificate
 * of every handshake. Else `*err` is the X509_V_ERR_*. */
static int verify_chain(X509_STORE *store, X509 *leaf,
                        STACK_OF(X509) *untrusted, time_t at, int partial,
                        X509_STORE_CTX **done, int *err)
{
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  X509_VERIFY_PARAM *param;
  int ok = 0;

  *done = NULL;
  *err = X509_V_ERR_OUT_OF_MEM;
  if(!ctx || X509_STORE_CTX_init(ctx, store, leaf, untrusted) != 1)
    goto out;
  X509_STORE_CTX_set_default(ctx, "ssl_server");
  param = X509_STORE_CTX_get0_param(ctx);
  if(at)
    X509_VERIFY_PARAM_set_time(param, at);
  if(partial)
    X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
  ok = X509_verify_cert(ctx) == 1 && X509_STORE_CTX_get0_chain(ctx);
  if(ok) {
    *done = ctx;
    ctx = NULL;
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
                    int untrusted_means_unpinned, X509_STORE_CTX **done,
                    struct cti_trust_outcome *out)
{
  int err = 0;

  if(!verify_chain(store, leaf, untrusted, at, partial, done, &err)) {
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

/* SPKI digests of a chain's certificates, each taken at most once per
 * evaluation: the policy's pins and a host rule's pins look at the same
 * chain. Certificates past SPKI_MEMO are hashed every time. */
#define SPKI_MEMO 10
struct spki_memo {
  unsigned char state[SPKI_MEMO];      /* 0 not yet, 1 hashed, 2 failed */
  unsigned char hash[SPKI_MEMO][SPKI_LEN];
};

static int chain_has_spki(STACK_OF(X509) *chain, struct spki_memo *memo,
                          unsigned char (*pins)[SPKI_LEN], size_t count)
{
  int i;
  size_t j;

  if(!count)
    return 0;
  for(i = 0; i < sk_X509_num(chain); i++) {
    unsigned char own[SPKI_LEN];
    unsigned char *hash = i < SPKI_MEMO ? memo->hash[i] : own;
    if(i >= SPKI_MEMO || !memo->state[i]) {
      int ok = cti_spki_sha256(sk_X509_value(chain, i), hash);
      if(i < SPKI_MEMO)
        memo->state[i] = ok ? 1 : 2;
      if(!ok)
        continue;
    }
    else if(memo->state[i] != 1)
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
 * References are borrowed; NULL when out of memory. With a validated chain
 * that chain itself comes back (`*owned` 0: do not free it); else a new
 * stack the caller frees (`*owned` 1). */
static STACK_OF(X509) *pin_chain(STACK_OF(X509) *validated, X509 *leaf,
                                 STACK_OF(X509) *untrusted, int *owned)
{
  STACK_OF(X509) *all;
  X509 *cur = leaf;
  int i;

  *owned = 0;
  if(validated)
    return validated;
  all = sk_X509_new_null();
  if(!all)
    return NULL;
  *owned = 1;
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
  *owned = 0;
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
  X509_STORE_CTX *verified = NULL;   /* owns the validated chain */
  STACK_OF(X509) *validated = NULL;   /* borrowed from `verified` */
  STACK_OF(X509) *all = NULL;
  int all_owned = 0;
  struct spki_memo memo;
  const struct host_rule *rule;
  time_t now = at ? at : time(NULL);

  memset(out, 0, sizeof(*out));
  memset(memo.state, 0, sizeof(memo.state));

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
                           &verified, out))
      goto done;
    break;
  case CT_PINNING_PUBLIC_KEY:
    if(!allow && !validate(anchors, leaf, untrusted, at, 0, check_host, 0,
                           &verified, out))
      goto done;
    validated = verified ? X509_STORE_CTX_get0_chain(verified) : NULL;
    all = pin_chain(validated, leaf, untrusted, &all_owned);
    if(!all || !chain_has_spki(all, &memo, p->pinned_spki,
                               p->pinned_spki_count)) {
      fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s",
                "no public key of the chain is pinned");
      goto done;
    }
    break;
  case CT_PINNING_CERTIFICATE:
    /* The pinned certificates are the only anchors (partial chains allowed
     * so that a pinned intermediate or leaf ends the chain). */
    if(!validate(p->pinned_store, leaf, untrusted, at, 1, check_host, 1,
                 &verified, out))
      goto done;
    validated = X509_STORE_CTX_get0_chain(verified);
    if(!chain_has_cert(validated, p->pinned_certs)) {
      fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s",
                "the validated chain contains no pinned certificate");
      goto done;
    }
    break;
  }

  /* Per-host rules, beyond AFNetworking. */
  if(p && host && p->rule_count) {
    rule = cti_trust_find_rule(p, host, now, NULL);
    if(rule) {
      if(!validated && verified)
        validated = X509_STORE_CTX_get0_chain(verified);
      if(!all)
        all = pin_chain(validated, leaf, untrusted, &all_owned);
      if(!all) {
        fail_with(out, CT_TLS_NO_PIN_MATCHED, 0, "%s", "out of memory");
        goto done;
      }
      if(!chain_has_spki(all, &memo, rule->spki, rule->spki_count) &&
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
  if(all_owned)
    sk_X509_free(all);
  X509_STORE_CTX_free(verified);       /* and with it the validated chain */
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
  int owned = 0;

  if(!p || !p->challenge_fn)
    return reason;
  chain = pin_chain(NULL, leaf, untrusted, &owned);
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
  if(owned)
    sk_X509_free(chain);
  return reason;
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
    X509 *x = cti_der_to_x509(ders[i], lengths[i]);
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
