/* ct_tls_internal.h - the engine's interface to trust evaluation. */
#ifndef CT_TLS_INTERNAL_H
#define CT_TLS_INTERNAL_H

#include "CTransfer.h"

struct cti_tls_state;

struct cti_tls_verdict {
  int32_t reason;          /* ct_tls_reason */
  int32_t verify_error;    /* X509_V_ERR_* */
  char message[256];
};

ct_code cti_tls_state_create(const char *ca_file, struct cti_tls_state **out,
                             char *errbuf);
void cti_tls_state_free(struct cti_tls_state *state);
void cti_tls_state_set_policy(struct cti_tls_state *state,
                              struct ct_trust_policy *policy);
int cti_tls_configure_ctx(struct cti_tls_state *state, void *ssl_ctx,
                          void *curl_easy, const char *ca_file_override,
                          int insecure, struct cti_tls_verdict *verdict);
#endif
