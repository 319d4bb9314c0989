/*
 * ct_checksum.c - the expected SHA-256 of a download, computed on the loop
 * thread as the bytes go to the sink: no second pass over the file.
 *
 * The one exception is a resumed transfer: the bytes already in the part
 * file were hashed by an earlier transfer (maybe an earlier process) whose
 * digest state is gone, so they must be read back (unavoidable without
 * persisting OpenSSL's internal state). That read never runs on the loop
 * thread: at the final head the file worker hashes the prefix,
 * once, while the transfer holds its body (CT_PAUSE_FILE); the new bytes
 * are then hashed as they are written, and the commit reads nothing back.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIX_BLOCK (1024 * 1024)

struct cti_checksum {
  struct ct_sha256 *ctx;
  uint8_t expected[CT_SHA256_LENGTH];
};

ct_code cti_checksum_create(struct cti_transfer *t, const uint8_t *expected)
{
  struct cti_checksum *c;
  ct_code rc;

  if(!expected)
    return CT_OK;
  c = calloc(1, sizeof(*c));
  if(!c)
    return CT_E_NO_MEMORY;
  rc = ct_sha256_create(&c->ctx);
  if(rc != CT_OK) {
    free(c);
    return rc;
  }
  memcpy(c->expected, expected, CT_SHA256_LENGTH);
  t->checksum = c;
  return CT_OK;
}

void cti_checksum_free(struct cti_checksum *c)
{
  if(!c)
    return;
  ct_sha256_destroy(c->ctx);
  free(c);
}

int64_t cti_checksum_on_head(struct cti_transfer *t)
{
  struct cti_checksum *c = t->checksum;
  uint8_t scratch[CT_SHA256_LENGTH];

  if(!c)
    return 0;
  /* Start over: a redirect or a restart may have fed bytes before. */
  (void)ct_sha256_final(c->ctx, scratch);
  return t->resume_offset;
}

ct_code cti_checksum_hash_prefix(struct cti_transfer *t, const char *path,
                                 int64_t end, int *err, const char **failed)
{
  struct cti_checksum *c = t->checksum;
  char *block;
  int64_t done = 0;
  ct_code rc = CT_OK;
  int fd = path ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;

  if(fd < 0) {
    *err = path ? errno : EINVAL;
    *failed = "cannot read the partial file to hash it";
    return CT_E_SINK_IO;
  }
  block = malloc(PREFIX_BLOCK);
  if(!block) {
    close(fd);
    *err = ENOMEM;
    *failed = "no memory to hash the partial file";
    return CT_E_NO_MEMORY;
  }
  while(done < end) {
    size_t want = (size_t)(end - done < PREFIX_BLOCK ?
                           end - done : PREFIX_BLOCK);
    ssize_t n = pread(fd, block, want, (off_t)done);
    if(n < 0 && errno == EINTR)
      continue;
    if(n <= 0) {
      *err = n < 0 ? errno : 0;
      *failed = "the partial file is shorter than its resume offset";
      rc = CT_E_SINK_IO;
      break;
    }
    (void)ct_sha256_update(c->ctx, block, (size_t)n);
    __atomic_add_fetch(&t->loop->checksum_read, (uint64_t)n,
                       __ATOMIC_RELAXED);
    done += n;
  }
  free(block);
  close(fd);
  return rc;
}

void cti_checksum_update(struct cti_transfer *t, const void *data, size_t len)
{
  if(t->checksum)
    (void)ct_sha256_update(t->checksum->ctx, data, len);
}

static void hex(const uint8_t *bytes, char *out)
{
  static const char digits[] = "0123456789abcdef";
  int i;
  for(i = 0; i < CT_SHA256_LENGTH; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * CT_SHA256_LENGTH] = 0;
}

ct_code cti_checksum_verify(struct cti_transfer *t)
{
  struct cti_checksum *c = t->checksum;
  uint8_t actual[CT_SHA256_LENGTH];
  char want[2 * CT_SHA256_LENGTH + 1];
  char got[2 * CT_SHA256_LENGTH + 1];

  if(!c)
    return CT_OK;
  if(ct_sha256_final(c->ctx, actual) != CT_OK) {
    cti_transfer_set_error(t, CT_E_CHECKSUM, 0,
                           "cannot compute the SHA-256 of the body");
    return CT_E_CHECKSUM;
  }
  if(memcmp(actual, c->expected, CT_SHA256_LENGTH) == 0)
    return CT_OK;
  hex(c->expected, want);
  hex(actual, got);
  /* Only called for a transfer that succeeded: nothing else is recorded. */
  t->local_code = CT_E_CHECKSUM;
  t->local_errno = 0;
  snprintf(t->local_message, sizeof(t->local_message),
           "SHA-256 mismatch: expected %s, got %s", want, got);
  return CT_E_CHECKSUM;
}

uint64_t ct_loop_checksum_bytes_read(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->checksum_read, __ATOMIC_RELAXED);
}
