/*
 * ct_tls_internal.h - the engine's side of the trust hook (private).
 *
 * ct_loop.c / ct_transfer.c call these; ct_tls.c and ct_trust*.c implement
 * them (ct_trust_internal.h says which file does what). May include
 * OpenSSL; never included from include/.
 */
#ifndef CT_TLS_INTERNAL_H
#define CT_TLS_INTERNAL_H

#include "CTransfer.h"

#include <time.h>
#include <openssl/x509.h>

/*
 * How the engine uses this (ct_loop.c / ct_transfer.c):
 *
 *   loop create:   cti_tls_state_create(cfg->ca_file, &loop->tls, errbuf)
 *   policy change: cti_tls_state_set_policy(loop->tls, policy), on the loop
 *                  thread; then bump loop->trust_generation, re-set every
 *                  live transfer's CAINFO marker
 *                  (cti_transfer_set_trust_marker: no connection or TLS
 *                  session of the old policy matches it any more; a
 *                  resumed session skips the certificate, so the new
 *                  policy would never see it) and shut down idle
 *                  connections of the old generation
 *                  (cti_tls_close_stale_sockets, ct_tls_sockets.c).
 *   each easy:     CURLOPT_SSL_VERIFYPEER 0, CURLOPT_SSL_VERIFYHOST 0,
 *                  CURLOPT_CAPATH NULL, CURLOPT_CAINFO a marker naming
 *                  the trust generation, insecure flag and CA file (curl
 *                  matches pooled connections and TLS sessions on CAfile,
 *                  so each trust setting keeps its own), socket open/close
 *                  callbacks (ct_tls_sockets.c), CURLOPT_SSL_CTX_FUNCTION
 *                  calling
 *                    cti_tls_configure_ctx(loop->tls, ssl_ctx, easy,
 *                        t->ca_file, t->flags & CT_FLAG_INSECURE,
 *                        &t->verdict)
 *                  Insecure transfers must not share: CURLOPT_FRESH_CONNECT
 *                  1, CURLOPT_FORBID_REUSE 1, CURLOPT_SSL_SESSIONID_CACHE 0
 *                  (curl cannot tell them apart: VERIFYPEER is 0 for all).
 *   start:         memset(&t->verdict, 0, sizeof(t->verdict))
 *   finish:        if t->verdict.reason != CT_TLS_OK the verdict wins over
 *                  the CURLcode (CURLE_SSL_CONNECT_ERROR or
 *                  CURLE_PEER_FAILED_VERIFICATION):
 *                    NO_PIN_MATCHED, POLICY_INVALID, REJECTED_BY_DELEGATE
 *                      -> CT_E_SERVER_TRUST
 *                    CHAIN_INVALID, HOSTNAME_MISMATCH, HANDSHAKE -> CT_E_TLS
 *                  and tls_reason, verify_error, message are copied into
 *                  ct_result. ct_trust_probe.c does exactly this.
 */

/* One per loop: the shared trust anchors, a cache of per-transfer CA files
 * and the current policy. Created on any thread, then loop thread only. */
struct cti_tls_state;

/*
 * Load trust anchors once (`ca_file`, a PEM bundle, or the system store
 * when NULL) into an X509_STORE shared by every connection of the loop.
 * On failure `errbuf` (256 bytes, may be NULL) says why. Any thread.
 */
ct_code cti_tls_state_create(const char *_Nullable ca_file,
                             struct cti_tls_state *_Nullable *_Nonnull out,
                             char *_Nullable errbuf);
/* Frees the state; connections still open keep their own references. */
void cti_tls_state_free(struct cti_tls_state *_Nullable state);

/* Replace the policy: retains and freezes the new one, releases the old
 * one. Loop thread only (the loop bumps its trust_generation). */
void cti_tls_state_set_policy(struct cti_tls_state *_Nonnull state,
                              struct ct_trust_policy *_Nullable policy);

/* Filled by the verification; owned by the transfer and zeroed when the
 * transfer starts. Written on the loop thread during handshakes only. */
struct cti_tls_verdict {
  int32_t reason;          /* ct_tls_reason */
  int32_t verify_error;    /* X509_V_ERR_* */
  char message[256];
  /* The connection that may still write here (ct_tls.c's conn_trust),
   * NULL once either side let go: the link is cleared from both ends. */
  void *_Nullable holder;
};

/* Ends the connection's hold on `verdict`, if it still has one (its
 * handshake never reported its end). Returns 1 when it had to, else 0.
 * Called before the verdict's memory goes away. Loop thread. */
int cti_tls_verdict_release(struct cti_tls_verdict *_Nonnull verdict);

/*
 * CURLOPT_SSL_CTX_FUNCTION body, loop thread, once per new TLS connection
 * (curl 7.88 creates one SSL_CTX per connection). Installs the shared store,
 * SSL_VERIFY_PEER and a cert-verify callback that evaluates the chain with
 * the current policy for the connection's host (taken from the easy
 * handle's effective URL). The connection keeps its own reference to the
 * policy and anchors; `verdict` is written during this handshake only
 * (forgotten at handshake end), so it must live until the transfer ends.
 * `ca_file_override` (nullable) is loaded once per distinct path and cached
 * in the state. `insecure` 1 accepts any chain and host. Returns 0
 * (CURLE_OK) or a CURLcode that aborts the connection.
 */
int cti_tls_configure_ctx(struct cti_tls_state *_Nonnull state,
                          void *_Nonnull ssl_ctx, void *_Nonnull curl_easy,
                          const char *_Nullable ca_file_override,
                          int insecure,
                          struct cti_tls_verdict *_Nullable verdict);

/* ---- shared between ct_tls.c and ct_trust*.c --------------------------- */

struct cti_trust_outcome {
  int32_t reason;
  int32_t verify_error;
  int32_t report_only_mismatch;
  char message[256];
};

/* Where the pin report goes during a handshake (NULL: nowhere). */
struct cti_report_target {
  const char *_Nonnull host;
  int32_t port;
};

/*
 * The evaluation shared by the handshake and ct_trust_evaluate(): `leaf`
 * and `untrusted` (the presented chain; may contain the leaf; only used
 * to build the chain, pins never match a certificate merely sent) against
 * `anchors`, `host` (NULL: no name check, no host rules) at `at` (0: now).
 * `report` non-NULL calls the policy's report handler on a host-rule miss.
 * Any thread; reads the policy only.
 */
void cti_trust_check(const struct ct_trust_policy *_Nullable policy,
                     X509 *_Nonnull leaf,
                     STACK_OF(X509) *_Nullable untrusted,
                     X509_STORE *_Nonnull anchors,
                     const char *_Nullable host, time_t at,
                     const struct cti_report_target *_Nullable report,
                     struct cti_trust_outcome *_Nonnull out);

/* Run the policy's challenge handler (if any) on a handshake's outcome;
 * returns the final ct_tls_reason. Loop thread. */
int32_t cti_trust_challenge(const struct ct_trust_policy *_Nullable policy,
                            X509 *_Nonnull leaf,
                            STACK_OF(X509) *_Nullable untrusted,
                            const char *_Nonnull host, int32_t port,
                            const struct cti_trust_outcome *_Nonnull
                            outcome);

/* Freeze a policy (setters refuse afterwards). */
void cti_trust_policy_freeze(struct ct_trust_policy *_Nonnull policy);

/* The process-wide system store (loaded once), borrowed; NULL on failure. */
X509_STORE *_Nullable cti_trust_system_store(void);

/* A new store holding every certificate of a PEM (or DER) file; the
 * caller owns it. CT_E_INVALID_ARGUMENT with a sentence in errbuf. */
ct_code cti_trust_store_from_file(const char *_Nonnull path,
                                  X509_STORE *_Nullable *_Nonnull out,
                                  char *_Nullable errbuf);

/* X509_V_ERR_* -> ct_chain_problem. */
int32_t cti_chain_problem(int verify_error);

/* Copy `msg` into a 256-byte buffer when it is not NULL. */
void cti_tls_err(char *_Nullable errbuf, const char *_Nonnull msg);

#endif /* CT_TLS_INTERNAL_H */
