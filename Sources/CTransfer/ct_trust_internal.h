/*
 * ct_trust_internal.h - what the ct_trust*.c files share (private).
 *
 *   ct_trust_policy.c  policy objects: setters, host-rule parsing, which
 *                      rule applies to a host
 *   ct_trust_eval.c    evaluation: chain checks, pins, reports, challenge
 *   ct_trust_cert.c    certificates: DER/PEM parsing, SPKI digests, cert
 *                      info, anchors, CA files, the system store
 *   ct_hostmatch.c     host patterns (ct_hostmatch.h)
 */
#ifndef CT_TRUST_INTERNAL_H
#define CT_TRUST_INTERNAL_H

#include "ct_tls_internal.h"

#include <openssl/x509.h>

#define SPKI_LEN 32

struct host_rule {
  char *_Nonnull *_Nullable patterns;
  size_t pattern_count;
  char *_Nonnull *_Nullable exclusions;
  size_t exclusion_count;
  int include_subdomains;
  unsigned char (*_Nullable spki)[SPKI_LEN];  /* explicit SPKI pins */
  size_t spki_count;
  STACK_OF(X509) *_Nullable certs;     /* certificate pins */
  char *_Nonnull *_Nullable report_pins;  /* base64 of all pins, for reports */
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
  STACK_OF(X509) *_Nullable pinned_certs;
  X509_STORE *_Nullable pinned_store;  /* the pinned certs as anchors */
  unsigned char (*_Nullable pinned_spki)[SPKI_LEN];  /* explicit + from certs */
  size_t pinned_spki_count;
  size_t explicit_spki_count;
  struct host_rule *_Nullable rules;
  size_t rule_count;
  ct_pin_report_fn _Nullable report_fn;
  void *_Nullable report_ctx;
  void (*_Nullable report_release)(void *_Nullable ctx);
  ct_trust_challenge_fn _Nullable challenge_fn;
  void *_Nullable challenge_ctx;
  void (*_Nullable challenge_release)(void *_Nullable ctx);
};

struct ct_trust_anchors {
  X509_STORE *_Nullable store;
};

/* ---- ct_trust_cert.c --- */

/* SHA-256 of the certificate's SubjectPublicKeyInfo; 1 on success. */
int cti_spki_sha256(X509 *_Nonnull cert, unsigned char out[_Nonnull SPKI_LEN]);
/* 44 characters of base64 and a NUL. */
void cti_spki_base64(const unsigned char hash[_Nonnull SPKI_LEN], char out[_Nonnull 45]);
/* Exactly one DER certificate (no trailing bytes), or NULL. */
X509 *_Nullable cti_der_to_x509(const uint8_t *_Nullable der, size_t length);

/* ---- ct_trust_policy.c --- */

/* The rule that applies to `host` at `at`: among rules that have not
 * expired and whose exclusions do not cover the host, the most specific
 * match (cti_host_match_rank); on a tie the first added. NULL: none. */
const struct host_rule *_Nullable
cti_trust_find_rule(const struct ct_trust_policy *_Nonnull policy,
                    const char *_Nonnull host, time_t at,
                    size_t *_Nullable index);

#endif /* CT_TRUST_INTERNAL_H */
