/*
 * ct_digest.h - streaming SHA-256 for the engine and its tests.
 *
 * A thin wrapper over OpenSSL's EVP interface. The context is opaque so that
 * this header (and Swift, which imports it) never sees an OpenSSL type.
 *
 * Threads: a context is not shared; one thread at a time may use it. Distinct
 * contexts may be used concurrently from any threads. ct_sha256_file() keeps
 * no state and is safe from any thread.
 */
#ifndef CT_DIGEST_H
#define CT_DIGEST_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Length in bytes of a SHA-256 digest. */
#define CT_SHA256_LENGTH 32

/* Opaque running digest. */
struct ct_sha256;

/**
 * Create a context ready for ct_sha256_update(). On CT_OK `*out` belongs to
 * the caller, who releases it with ct_sha256_destroy(); on any other code
 * `*out` is NULL. Returns CT_E_INVALID_ARGUMENT for a NULL `out`,
 * CT_E_NO_MEMORY when allocation fails, CT_E_UNSUPPORTED when the OpenSSL in
 * use cannot provide SHA-256.
 */
ct_code ct_sha256_create(struct ct_sha256 *_Nullable *_Nonnull out);

/**
 * Feed `length` bytes at `data` (borrowed for the call only). `data` may be
 * NULL only when `length` is 0. Returns CT_E_INVALID_ARGUMENT for a NULL
 * context or data, CT_E_SYSTEM if OpenSSL fails.
 */
ct_code ct_sha256_update(struct ct_sha256 *_Nonnull ctx,
                         const void *_Nullable data, size_t length);

/**
 * Write the digest of everything fed so far to `out` (CT_SHA256_LENGTH
 * bytes) and reset the context, so that it can hash a new message. The
 * caller still owns the context.
 */
ct_code ct_sha256_final(struct ct_sha256 *_Nonnull ctx,
                        uint8_t out[_Nonnull CT_SHA256_LENGTH]);

/* Release a context. Accepts NULL. */
void ct_sha256_destroy(struct ct_sha256 *_Nullable ctx);

/**
 * Hash the whole file at `path`, read in large blocks, into `out`
 * (CT_SHA256_LENGTH bytes). On CT_E_SOURCE_IO the file could not be opened
 * or read and `*out_errno` (when not NULL) holds the errno; it is set to 0
 * on success. `out` is left untouched on failure.
 */
ct_code ct_sha256_file(const char *_Nonnull path,
                       uint8_t out[_Nonnull CT_SHA256_LENGTH],
                       int32_t *_Nullable out_errno);

#ifdef __cplusplus
}
#endif
#endif /* CT_DIGEST_H */
