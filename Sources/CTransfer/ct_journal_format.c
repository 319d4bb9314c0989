/*
 * ct_journal_format.c - the resume journal on disk: what a new process
 * needs to continue a download after this one was killed. Formatting,
 * parsing, reading and atomically replacing a journal file; the per-transfer
 * journaling that decides when one is written is ct_journal.c.
 *
 * Format (text, one "key value" per line, values never contain a newline):
 *
 *   transfer-journal 1
 *   url http://host/path
 *   etag "abc"                  (empty value: none)
 *   last-modified Wed, 21 Oct 2015 07:28:00 GMT
 *   range 0 -1                  (segment [start, end]; -1 -1: whole body)
 *   length 1048576              (body length when known, else -1)
 *   durable 524288              (file offset: bytes [start, durable) hold
 *                                response bytes, written and fdatasync'd)
 *   end
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const char *data, size_t len)
{
  while(len) {
    ssize_t n = write(fd, data, len);
    if(n < 0) {
      if(errno == EINTR)
        continue;
      return -1;
    }
    if(n == 0) {
      errno = ENOSPC;
      return -1;
    }
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

/* A descriptor of the directory that holds `path` (to fsync a rename in
 * it), or -1 with errno set. dirname() may modify its argument: it gets a
 * copy. */
int cti_open_parent_dir(const char *path)
{
  char *copy = cti_strdup(path);
  int fd;
  int saved;

  if(!copy) {
    errno = ENOMEM;
    return -1;
  }
  fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  saved = errno;
  free(copy);
  errno = saved;
  return fd;
}

/* Write `len` bytes of `text` to `tmp_path` (a fresh file of ours, never
 * through a symlink: a stale one from a crash is removed first), fsync it,
 * rename it over `path` and fsync the directory `dir_fd`. Any thread.
 * Returns 0, or an errno with `*what` set. */
int cti_replace_file(const char *path, const char *tmp_path, int dir_fd,
                        const char *text, size_t len, const char **what)
{
  int fd;
  int err;

  if(dir_fd < 0) {
    *what = "open the directory of";
    return ENOENT;
  }
  (void)unlink(tmp_path);
  fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
            0600);
  if(fd < 0) {
    *what = "create";
    return errno;
  }
  if(write_all(fd, text, len) != 0 || fsync(fd) != 0) {
    err = errno;
    close(fd);
    unlink(tmp_path);
    *what = "write";
    return err;
  }
  if(close(fd) != 0 || rename(tmp_path, path) != 0) {
    err = errno;
    unlink(tmp_path);
    *what = "replace";
    return err;
  }
  /* The rename is durable only once the directory is. */
  if(fsync(dir_fd) != 0) {
    *what = "sync the directory of";
    return errno;
  }
  return 0;
}

/* ---- the format, for readers (ct_journal.h) ------------------------- */

char *ct_journal_format(const ct_journal_record *record, size_t *length)
{
  const char *url = record->url ? record->url : "";
  const char *etag = record->etag ? record->etag : "";
  const char *last_modified =
    record->last_modified ? record->last_modified : "";
  char *text = NULL;
  int len;

  /* A value is the rest of its line. */
  if(strchr(url, '\n') || strchr(etag, '\n') ||
     strchr(last_modified, '\n')) {
    errno = EINVAL;
    return NULL;
  }
  len = asprintf(&text,
                 "transfer-journal 1\n"
                 "url %s\n"
                 "etag %s\n"
                 "last-modified %s\n"
                 "range %lld %lld\n"
                 "length %lld\n"
                 "durable %lld\n"
                 "end\n",
                 url, etag, last_modified,
                 (long long)record->range_start, (long long)record->range_end,
                 (long long)record->length, (long long)record->durable);
  if(len < 0)
    return NULL;
  if(length)
    *length = (size_t)len;
  return text;
}

void ct_journal_clear(ct_journal_record *record)
{
  free(record->url);
  free(record->etag);
  free(record->last_modified);
  record->url = record->etag = record->last_modified = NULL;
}

/* A decimal int64 filling [p, p + n): an optional '-' then digits, no
 * sign-only, no overflow. Returns 1 and sets `*out`, else 0. */
static int parse_int64(const char *p, size_t n, int64_t *out)
{
  int negative = 0;
  uint64_t value = 0;
  uint64_t limit = (uint64_t)INT64_MAX;
  size_t i = 0;

  if(n > 0 && p[0] == '-') {
    negative = 1;
    limit += 1;
    i = 1;
  }
  if(i == n)
    return 0;
  for(; i < n; i++) {
    unsigned digit = (unsigned char)p[i] - '0';
    if(digit > 9 || value > (limit - digit) / 10)
      return 0;
    value = value * 10 + digit;
  }
  *out = negative ? (int64_t)(0 - value) : (int64_t)value;
  return 1;
}

/* A copy of [p, p + n) as a C string; `*out` NULL for an empty value when
 * `empty_is_null`. Returns 0, or -1 when memory runs out. */
static int copy_value(const char *p, size_t n, int empty_is_null, char **out)
{
  free(*out);
  *out = NULL;
  if(n == 0 && empty_is_null)
    return 0;
  *out = malloc(n + 1);
  if(!*out)
    return -1;
  memcpy(*out, p, n);
  (*out)[n] = '\0';
  return 0;
}

int ct_journal_parse(const char *bytes, size_t length, ct_journal_record *out)
{
  static const char magic[] = "transfer-journal 1\n";
  const char *p;
  const char *limit;
  int seen_end = 0, seen_durable = 0, seen_range = 0;
  int rc = 0;

  memset(out, 0, sizeof(*out));
  out->range_start = out->range_end = out->length = -1;
  if(!bytes || length > CT_JOURNAL_MAX_BYTES ||
     length < sizeof(magic) - 1 || memcmp(bytes, magic, sizeof(magic) - 1) ||
     memchr(bytes, '\0', length))
    return 0;
  p = bytes + sizeof(magic) - 1;
  limit = bytes + length;
  while(p < limit) {
    const char *newline = memchr(p, '\n', (size_t)(limit - p));
    const char *line_end = newline ? newline : limit;
    size_t line_len = (size_t)(line_end - p);
    const char *space = memchr(p, ' ', line_len);
    const char *value = space ? space + 1 : line_end;
    size_t key_len = (size_t)((space ? space : line_end) - p);
    size_t value_len = (size_t)(line_end - value);

    if(line_len == 3 && !memcmp(p, "end", 3)) {
      seen_end = 1;
    }
    else if(!space) {
      /* Lines without a value carry nothing; later versions may add some. */
    }
    else if(key_len == 3 && !memcmp(p, "url", 3)) {
      if(copy_value(value, value_len, 0, &out->url))
        goto no_memory;
    }
    else if(key_len == 4 && !memcmp(p, "etag", 4)) {
      if(copy_value(value, value_len, 1, &out->etag))
        goto no_memory;
    }
    else if(key_len == 13 && !memcmp(p, "last-modified", 13)) {
      if(copy_value(value, value_len, 1, &out->last_modified))
        goto no_memory;
    }
    else if(key_len == 5 && !memcmp(p, "range", 5)) {
      const char *gap = memchr(value, ' ', value_len);
      if(!gap ||
         !parse_int64(value, (size_t)(gap - value), &out->range_start) ||
         !parse_int64(gap + 1, (size_t)(line_end - gap - 1), &out->range_end))
        goto invalid;
      seen_range = 1;
    }
    else if(key_len == 6 && !memcmp(p, "length", 6)) {
      if(!parse_int64(value, value_len, &out->length))
        goto invalid;
    }
    else if(key_len == 7 && !memcmp(p, "durable", 7)) {
      if(!parse_int64(value, value_len, &out->durable))
        goto invalid;
      seen_durable = 1;
    }
    p = newline ? newline + 1 : limit;
  }
  /* A torn journal (no "end") or one missing what a resume needs is not
   * one; neither is an offset a segment cannot hold. */
  if(!seen_end || !out->url || !seen_durable || !seen_range ||
     out->durable < 0 || out->range_start < -1 || out->range_end < -1 ||
     out->length < -1)
    goto invalid;
  if(out->range_start >= 0 &&
     (out->durable < out->range_start ||
      (out->range_end >= 0 && out->durable > out->range_end + 1)))
    goto invalid;
  if(out->range_start < 0 && out->range_end >= 0)
    goto invalid;
  return 1;

no_memory:
  rc = -1;
invalid:
  ct_journal_clear(out);
  return rc;
}

int ct_journal_read(const char *path, ct_journal_record *out)
{
  char *buffer;
  size_t used = 0;
  struct stat info;
  int fd;
  int rc;

  memset(out, 0, sizeof(*out));
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if(fd < 0)
    return 0;
  if(fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) ||
     info.st_size > CT_JOURNAL_MAX_BYTES) {
    close(fd);
    return 0;
  }
  /* One byte more than a journal may hold: one that grew past the limit
   * while we read is refused by the parser. */
  buffer = malloc(CT_JOURNAL_MAX_BYTES + 1);
  if(!buffer) {
    close(fd);
    return -1;
  }
  while(used < CT_JOURNAL_MAX_BYTES + 1) {
    ssize_t n = read(fd, buffer + used, CT_JOURNAL_MAX_BYTES + 1 - used);
    if(n < 0 && errno == EINTR)
      continue;
    if(n <= 0)
      break;
    used += (size_t)n;
  }
  close(fd);
  rc = ct_journal_parse(buffer, used, out);
  free(buffer);
  return rc;
}

int ct_journal_write(const char *path, const ct_journal_record *record)
{
  const char *what = NULL;
  char *text;
  char *tmp_path = NULL;
  size_t len;
  int dir_fd;
  int err;

  text = ct_journal_format(record, &len);
  if(!text)
    return errno;
  if(asprintf(&tmp_path, "%s.tmp", path) < 0) {
    free(text);
    return ENOMEM;
  }
  dir_fd = cti_open_parent_dir(path);
  err = dir_fd < 0 ? errno :
    cti_replace_file(path, tmp_path, dir_fd, text, len, &what);
  if(dir_fd >= 0)
    close(dir_fd);
  free(tmp_path);
  free(text);
  return err;
}
