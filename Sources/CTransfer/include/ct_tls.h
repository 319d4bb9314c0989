/*
 * ct_tls.h - server-trust policy input for the engine.
 *
 * A policy is built on any thread, then handed to a loop, which applies it
 * in the OpenSSL verify step of every new TLS connection (redirect hops and
 * HTTP/2 connections included). A refusal aborts the handshake before any
 * request byte is sent and the transfer finishes with CT_E_SERVER_TRUST
 * (pins, policy) or CT_E_TLS (chain, hostname).
 *
 * The same evaluation runs without a connection through ct_trust_evaluate(),
 * so a policy can be checked against a chain in unit tests or by users.
 *
 * Semantics follow AFNetworking's AFSecurityPolicy:
 * - validating a domain while allowing invalid certificates with no pins is
 *   refused (CT_TLS_POLICY_INVALID);
 * - CT_PINNING_NONE: plain validation against the anchors (and the host
 *   name), or nothing at all when invalid certificates are allowed;
 * - CT_PINNING_CERTIFICATE: the pinned certificates are the only anchors
 *   (a pinned root, intermediate, leaf or self-signed certificate ends the
 *   chain) and the validated chain must contain one of them;
 * - CT_PINNING_PUBLIC_KEY: the chain is validated against the anchors
 *   unless invalid certificates are allowed, and some key of the chain must
 *   equal a pinned key (keys of the pinned certificates, plus SPKI SHA-256
 *   pins added with ct_trust_policy_add_pinned_spki()).
 * Beyond AFNetworking, per-host rules (ct_trust_policy_add_host_rule) add
 * SPKI/certificate pins for host patterns, enforced or report-only.
 */
#ifndef CT_TLS_H
#define CT_TLS_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_pinning_mode {
  CT_PINNING_NONE = 0,
  CT_PINNING_PUBLIC_KEY = 1,
  CT_PINNING_CERTIFICATE = 2
} ct_pinning_mode;

/* Opaque, immutable once handed to a loop, reference counted. */
struct ct_trust_policy;

/* Create an empty policy (mode none, validates domain, invalid refused).
 * On CT_OK the caller owns one reference. Any thread. */
ct_code ct_trust_policy_create(struct ct_trust_policy *_Nullable
                               *_Nonnull out);
/* Reference counting; atomic, any thread. Release accepts NULL. */
void ct_trust_policy_retain(struct ct_trust_policy *_Nonnull policy);
void ct_trust_policy_release(struct ct_trust_policy *_Nullable policy);

/*
 * Setters. They fail with CT_E_INVALID_ARGUMENT once the policy has been
 * handed to a loop (it is frozen then); build a new policy instead. Not
 * safe to call concurrently on one policy from two threads.
 */
ct_code ct_trust_policy_set_mode(struct ct_trust_policy *_Nonnull policy,
                                 ct_pinning_mode mode);
ct_code ct_trust_policy_set_allow_invalid(struct ct_trust_policy *_Nonnull
                                          policy, int32_t allow);
ct_code ct_trust_policy_set_validates_domain(struct ct_trust_policy
                                             *_Nonnull policy,
                                             int32_t validates);
/* Pin one certificate (DER, copied). CT_E_INVALID_ARGUMENT when the bytes
 * are not one DER certificate. */
ct_code ct_trust_policy_add_pinned_certificate(struct ct_trust_policy
                                               *_Nonnull policy,
                                               const uint8_t *_Nonnull der,
                                               size_t length);
/* Pin a public key by the base64 SHA-256 of its SubjectPublicKeyInfo (as
 * in HPKP and curl's "sha256//"); counts as a pin in public-key mode. */
ct_code ct_trust_policy_add_pinned_spki(struct ct_trust_policy *_Nonnull
                                        policy,
                                        const char *_Nonnull sha256_base64);

/* A per-host pin rule (read only during the call; everything is copied). */
struct ct_host_rule_spec {
  /* "example.com" (that host only) or "*.example.com" (exactly one more
   * label). Matching ignores case and a trailing dot. At least one. */
  const char *_Nonnull const *_Nullable patterns;
  size_t pattern_count;
  /* 1: an exact pattern also covers every subdomain ("example.com" covers
   * "a.b.example.com"). */
  int32_t include_subdomains;
  /* Hosts (same pattern syntax) the rule does not apply to. */
  const char *_Nonnull const *_Nullable exclusions;
  size_t exclusion_count;
  /* base64 SHA-256 of SPKIs. */
  const char *_Nonnull const *_Nullable spki_sha256;
  size_t spki_count;
  /* Pinned certificates (DER): a chain containing one matches. */
  const uint8_t *_Nonnull const *_Nullable cert_ders;
  const size_t *_Nullable cert_lengths;
  size_t cert_count;
  /* Unix time after which the rule no longer applies; 0: never expires. */
  int64_t expires_unix;
  /* 1: a mismatch is only reported (see ct_trust_policy_set_report_handler)
   * and the connection proceeds. 0: enforce, which requires at least two
   * pins (spki + certificates), one of them a backup. */
  int32_t report_only;
};

/**
 * Add a per-host rule. Of the rules that match the host and have not
 * expired, the most specific applies (TrustKit's precedence, not insertion
 * order): an exact host beats "*.example.com", which beats
 * include-subdomains on a parent (a longer parent beats a shorter one); on
 * a tie the rule added first. The chain OpenSSL verified (or, when invalid
 * certificates are allowed, the chain from the leaf through presented
 * certificates that really issued each other; never other certificates
 * the server merely sent) must contain a pinned key or certificate.
 * Returns CT_E_INVALID_ARGUMENT with a sentence in `errbuf` (256 bytes,
 * may be NULL) for an empty or malformed pattern, bad base64, a digest
 * that is not 32 bytes, a bad DER, or an enforced rule with fewer than two
 * pins.
 */
ct_code ct_trust_policy_add_host_rule(struct ct_trust_policy *_Nonnull
                                      policy,
                                      const struct ct_host_rule_spec
                                      *_Nonnull spec,
                                      char *_Nullable errbuf);

/**
 * Index (in insertion order) of the host rule that applies to `host` at
 * `at_unix` (0: now), or -1 when none does. Any thread; for tests and
 * tools that want to see the precedence.
 */
int64_t ct_trust_policy_rule_for_host(const struct ct_trust_policy
                                      *_Nullable policy,
                                      const char *_Nullable host,
                                      int64_t at_unix);

/**
 * How specifically host `pattern` ("host" or "*.host") covers `host`,
 * ignoring case and a trailing dot: 0 when it does not (or the pattern is
 * malformed); otherwise a rank, larger for more specific matches (exact
 * host > "*.parent" > include-subdomains on a parent; within a kind, the
 * longer pattern). The rule with the highest rank applies. Any thread;
 * exposed for tests and fuzzing.
 */
int32_t ct_host_pattern_match(const char *_Nullable pattern,
                              const char *_Nullable host,
                              int32_t include_subdomains);

/* What a per-host rule saw when a chain did not match its pins. Valid only
 * during the callback; copy what you keep. */
struct ct_pin_report {
  const char *_Nonnull host;
  int32_t port;                        /* 0 when unknown */
  const char *_Nonnull pattern;        /* the rule's first pattern */
  /* The certificates the pins were checked against, leaf first (DER). */
  const uint8_t *_Nonnull const *_Nonnull chain_ders;
  const size_t *_Nonnull chain_lengths;
  size_t chain_count;
  /* The rule's pins: base64 SPKI SHA-256 (certificate pins included as
   * the SHA-256 of their key). */
  const char *_Nonnull const *_Nonnull pins;
  size_t pin_count;
  int64_t time_unix;                   /* when the check ran */
  int64_t expires_unix;                /* the rule's expiration, 0 none */
  int32_t enforced;                    /* 0: report-only, connection kept */
};

typedef void (*ct_pin_report_fn)(void *_Nullable ctx,
                                 const struct ct_pin_report *_Nonnull
                                 report);

/**
 * Called for every per-host pin mismatch seen in a handshake (enforced and
 * report-only), on the loop thread, during the handshake: copy and return.
 * `ctx` is owned by the policy from now on: `release_ctx` (may be NULL)
 * runs once when the policy is freed or the handler replaced. Not called by
 * ct_trust_evaluate(), which reports in its result instead.
 */
ct_code ct_trust_policy_set_report_handler(struct ct_trust_policy *_Nonnull
                                           policy,
                                           ct_pin_report_fn _Nullable fn,
                                           void *_Nullable ctx,
                                           void (*_Nullable release_ctx)
                                           (void *_Nullable ctx));

/* A server-trust challenge: the chain a handshake presented and what the
 * policy decided. Valid only during the callback. */
struct ct_trust_challenge {
  const char *_Nonnull host;
  int32_t port;                        /* 0 when unknown */
  const uint8_t *_Nonnull const *_Nonnull chain_ders;  /* leaf first */
  const size_t *_Nonnull chain_lengths;
  size_t chain_count;
  int32_t proposed_reason;             /* the policy's ct_tls_reason */
  int32_t verify_error;
  const char *_Nonnull message;
};

/* Returns the final ct_tls_reason: `proposed_reason` for the default
 * handling, CT_TLS_OK to trust the server anyway ("use credential"),
 * CT_TLS_REJECTED_BY_DELEGATE to refuse it ("cancel"/"reject"),
 * CT_TLS_CHALLENGE_TIMED_OUT when the handler's owner gave up waiting for
 * an answer (refused: the transfer fails with CT_E_SERVER_TRUST). */
typedef int32_t (*ct_trust_challenge_fn)(void *_Nullable ctx,
                                         const struct ct_trust_challenge
                                         *_Nonnull challenge);

/**
 * Ask `fn` about every TLS handshake (AFURLSessionManager's server-trust
 * authentication challenge). It runs on the loop thread in the middle of
 * the handshake and blocks the loop, every transfer of it, while it runs:
 * answer from state you already have, or hand the question to another
 * thread and wait for its answer with a bound (the Swift session waits at
 * most SessionConfiguration.serverTrustChallengeTimeout, then answers
 * CT_TLS_CHALLENGE_TIMED_OUT); never wait unbounded on a thread that may
 * wait on the loop.
 * `ctx` is owned by the policy like the report handler's. Not called for
 * insecure transfers nor by ct_trust_evaluate().
 */
ct_code ct_trust_policy_set_challenge_handler(struct ct_trust_policy
                                              *_Nonnull policy,
                                              ct_trust_challenge_fn
                                              _Nullable fn,
                                              void *_Nullable ctx,
                                              void (*_Nullable release_ctx)
                                              (void *_Nullable ctx));

/**
 * Install `policy` (retained; NULL removes it) for the loop's new TLS
 * connections. A connection is checked once, at its handshake: one busy
 * with a transfer when the policy changes carries that transfer to its
 * end under the old policy, but no later transfer or redirect hop reuses
 * it (nor resumes a TLS session made under the old policy). The loop
 * shuts down idle pooled connections of the old policy at once, and busy
 * ones as soon as they fall idle (ct_tls_sockets.c).
 */
struct ct_loop;
ct_code ct_loop_set_trust_policy(struct ct_loop *_Nonnull loop,
                                 struct ct_trust_policy *_Nullable policy);

/* ---- Trust anchors and certificates ---------------------------------- */

/* An immutable set of trust anchors (an X509_STORE). Safe to share between
 * threads once created. */
struct ct_trust_anchors;

/* The system's default anchors (OpenSSL's default paths). */
ct_code ct_trust_anchors_create_default(struct ct_trust_anchors *_Nullable
                                        *_Nonnull out,
                                        char *_Nullable errbuf);
/* Every certificate of a PEM bundle file. CT_E_INVALID_ARGUMENT (with a
 * sentence in errbuf) when the file cannot be read or holds none. */
ct_code ct_trust_anchors_create_from_file(const char *_Nonnull path,
                                          struct ct_trust_anchors
                                          *_Nullable *_Nonnull out,
                                          char *_Nullable errbuf);
/* The given DER certificates (copied); none (count 0, NULL arrays) gives
 * an empty set that trusts nothing. */
ct_code ct_trust_anchors_create_from_ders(const uint8_t *_Nonnull const
                                          *_Nullable ders,
                                          const size_t *_Nullable lengths,
                                          size_t count,
                                          struct ct_trust_anchors
                                          *_Nullable *_Nonnull out,
                                          char *_Nullable errbuf);
void ct_trust_anchors_destroy(struct ct_trust_anchors *_Nullable anchors);

/* Kinds of chain failure, from OpenSSL's X509_V_ERR_* code. */
typedef enum ct_chain_problem {
  CT_CHAIN_OK = 0,
  CT_CHAIN_EXPIRED = 1,
  CT_CHAIN_NOT_YET_VALID = 2,
  CT_CHAIN_UNKNOWN_ISSUER = 3,   /* incomplete chain or foreign CA */
  CT_CHAIN_SELF_SIGNED = 4,      /* self-signed leaf or untrusted root */
  CT_CHAIN_BAD_SIGNATURE = 5,
  CT_CHAIN_OTHER = 6
} ct_chain_problem;

/* X509_V_ERR_* (ct_result.verify_error) -> ct_chain_problem. */
ct_chain_problem ct_chain_problem_from_verify_error(int32_t verify_error);

struct ct_trust_result {
  int32_t reason;          /* ct_tls_reason */
  int32_t verify_error;    /* X509_V_ERR_*, 0 when none */
  int32_t chain_problem;   /* ct_chain_problem from verify_error */
  /* 1 when a report-only host rule did not match (the result stays OK). */
  int32_t report_only_mismatch;
  char message[256];
};

/**
 * Evaluate a chain (leaf first, DER) against `policy` (NULL: the default
 * policy) without a connection, as the handshake would. `host` NULL skips
 * the host name check (and per-host rules); an IP literal is matched
 * against IP SANs. `evaluation_time_unix` 0 means now. `anchors` NULL
 * means the system anchors (loaded once per process). Any thread.
 * Returns CT_OK when the evaluation ran (the verdict is in `out`), or
 * CT_E_INVALID_ARGUMENT when the input is not a chain of certificates.
 */
ct_code ct_trust_evaluate(const struct ct_trust_policy *_Nullable policy,
                          const uint8_t *_Nonnull const *_Nonnull ders,
                          const size_t *_Nonnull lengths, size_t count,
                          const char *_Nullable host,
                          int64_t evaluation_time_unix,
                          const struct ct_trust_anchors *_Nullable anchors,
                          struct ct_trust_result *_Nonnull out);

/* A list of DER certificates allocated by the engine. */
struct ct_der_list {
  size_t count;
  uint8_t *_Nonnull *_Nullable ders;
  size_t *_Nullable lengths;
};

/**
 * Parse PEM (any number of CERTIFICATE blocks, other blocks skipped) or a
 * single DER certificate into `out` (zeroed first). CT_E_INVALID_ARGUMENT
 * when no certificate is found; release with ct_der_list_free() on CT_OK.
 */
ct_code ct_cert_parse(const uint8_t *_Nonnull data, size_t length,
                      struct ct_der_list *_Nonnull out);
void ct_der_list_free(struct ct_der_list *_Nullable list);

/* base64 SHA-256 of the certificate's SubjectPublicKeyInfo into `out`
 * (at least 45 bytes, NUL-terminated). */
ct_code ct_cert_spki_sha256(const uint8_t *_Nonnull der, size_t length,
                            char *_Nonnull out, size_t capacity);

/* Human-readable facts of one certificate (NUL-terminated strings). */
struct ct_cert_info {
  char subject[256];       /* RFC 2253, e.g. "CN=leaf,O=Transfer" */
  char issuer[256];
  int64_t not_before_unix;
  int64_t not_after_unix;
  int32_t is_ca;           /* basicConstraints CA:TRUE */
  int32_t self_signed;     /* subject == issuer and self-verifying */
};
ct_code ct_cert_info(const uint8_t *_Nonnull der, size_t length,
                     struct ct_cert_info *_Nonnull out);

/* ---- Diagnostic probe -------------------------------------------------- */

struct ct_trust_probe_result {
  ct_code code;            /* CT_OK, CT_E_TLS, CT_E_SERVER_TRUST, ... */
  int32_t curl_code;
  int32_t reason;          /* ct_tls_reason of the last handshake */
  int32_t verify_error;
  int32_t handshakes;      /* TLS connections the hook configured */
  long http_status;
  char message[256];
};

/**
 * One blocking GET of `url` through the same TLS hook the loop uses, on
 * the calling thread, with its own connection (never pooled): for tests,
 * diagnostics and the CLI. `ca_file` NULL uses the system anchors;
 * `follow_redirects` follows up to 5; `timeout_ms` 0 means 10 s. The body
 * is discarded. Returns the transfer's ct_code (also in `out->code`).
 * Like a loop, the probe freezes `policy` (its setters refuse afterwards).
 */
ct_code ct_trust_probe(struct ct_trust_policy *_Nullable policy,
                       const char *_Nonnull url,
                       const char *_Nullable ca_file,
                       int32_t insecure, int32_t follow_redirects,
                       int64_t timeout_ms,
                       struct ct_trust_probe_result *_Nonnull out);

#ifdef __cplusplus
}
#endif
#endif /* CT_TLS_H */
