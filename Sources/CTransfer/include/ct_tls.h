/*
 * ct_tls.h - server-trust policy input for the engine.
 *
 * A policy is built on any thread, then handed to a loop, which applies it
 * in the OpenSSL verify step of every new TLS connection (redirect hops and
 * HTTP/2 connections included). A refusal aborts the handshake before any
 * request byte is sent and the transfer finishes with CT_E_SERVER_TRUST.
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

/* Create an empty policy (mode none, validates domain, invalid refused). */
ct_code ct_trust_policy_create(struct ct_trust_policy *_Nullable *_Nonnull out);
void ct_trust_policy_retain(struct ct_trust_policy *_Nonnull policy);
void ct_trust_policy_release(struct ct_trust_policy *_Nullable policy);

/**
 * Install `policy` (retained; NULL removes it) for the loop's new TLS
 * connections. Connections already open keep the policy they were checked
 * with; the loop closes idle pooled connections so none outlives a change.
 */
struct ct_loop;
ct_code ct_loop_set_trust_policy(struct ct_loop *_Nonnull loop,
                                 struct ct_trust_policy *_Nullable policy);

#ifdef __cplusplus
}
#endif
#endif /* CT_TLS_H */
