/*
 * ct_digest.c - streaming SHA-256 over OpenSSL EVP (see ct_digest.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* O_CLOEXEC and posix_fadvise under -std=c11 */
#endif
#include "ct_internal.h"
#include "ct_digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Large reads keep the syscall count low on big files; 1 MiB is past the
 * point where a bigger block still helps on Linux. */
#define FILE_BLOCK (1024 * 1024)

struct ct_sha256 {
  EVP_MD_CTX *md;
};

ct_code ct_sha256_create(struct ct_sha256 **out)
{
  struct ct_sha256 *ctx = NULL;
  ct_code rc = CT_E_NO_MEMORY;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  ctx = calloc(1, sizeof(*ctx));
  if(!ctx)
    goto fail;
  ctx->md = EVP_MD_CTX_new();
  if(!ctx->md)
    goto fail;
  if(EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1) {
    rc = CT_E_UNSUPPORTED;
    goto fail;
  }
  *out = ctx;
  return CT_OK;
fail:
  ct_sha256_destroy(ctx);
  return rc;
}

ct_code ct_sha256_update(struct ct_sha256 *ctx, const void *data,
                         size_t length)
{
  if(!ctx || (!data && length))
    return CT_E_INVALID_ARGUMENT;
  if(!length)
    return CT_OK;
  if(EVP_DigestUpdate(ctx->md, data, length) != 1)
    return CT_E_SYSTEM;
  return CT_OK;
}

ct_code ct_sha256_final(struct ct_sha256 *ctx,
                        uint8_t out[CT_SHA256_LENGTH])
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  size_t i;

  if(!ctx || !out)
    return CT_E_INVALID_ARGUMENT;
  if(EVP_DigestFinal_ex(ctx->md, md, &md_len) != 1 ||
     md_len != CT_SHA256_LENGTH)
    return CT_E_SYSTEM;
  for(i = 0; i < CT_SHA256_LENGTH; i++)
    out[i] = md[i];
  /* Reset so the caller may hash the next message with the same context. */
  if(EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1)
    return CT_E_SYSTEM;
  return CT_OK;
}

void ct_sha256_destroy(struct ct_sha256 *ctx)
{
  if(!ctx)
    return;
  EVP_MD_CTX_free(ctx->md);
  free(ctx);
}

ct_code ct_sha256_file(const char *path, uint8_t out[CT_SHA256_LENGTH],
                       int32_t *out_errno)
{
  struct ct_sha256 *ctx = NULL;
  unsigned char *block = NULL;
  int fd = -1;
  int err = 0;
  ct_code rc;

  if(out_errno)
    *out_errno = 0;
  if(!path || !out)
    return CT_E_INVALID_ARGUMENT;
  rc = ct_sha256_create(&ctx);
  if(rc != CT_OK)
    goto done;
  block = malloc(FILE_BLOCK);
  if(!block) {
    rc = CT_E_NO_MEMORY;
    goto done;
  }
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if(fd < 0) {
    err = errno;
    rc = CT_E_SOURCE_IO;
    goto done;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for(;;) {
    ssize_t n = read(fd, block, FILE_BLOCK);
    if(n < 0) {
      if(errno == EINTR)
        continue;
      err = errno;
      rc = CT_E_SOURCE_IO;
      goto done;
    }
    if(n == 0)
      break;
    rc = ct_sha256_update(ctx, block, (size_t)n);
    if(rc != CT_OK)
      goto done;
  }
  rc = ct_sha256_final(ctx, out);
done:
  if(fd >= 0)
    close(fd);
  free(block);
  ct_sha256_destroy(ctx);
  if(out_errno)
    *out_errno = (int32_t)err;
  return rc;
}
