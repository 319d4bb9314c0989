/*
 * ct_journal.c - the resume journal of a file sink: what a new process
 * needs to continue a download after this one was killed.
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
 *
 * The rule that makes kill -9 and power loss safe: bytes are written and
 * fdatasync'd first, and only then is a journal claiming them written to
 * `<journal>.tmp`, fsync'd, renamed over the journal, and the directory
 * fsync'd. A journal therefore never claims bytes that are not on disk; the
 * part file may hold more (written after the last update), which the next
 * run drops by truncating to `durable`. A torn temp file is never renamed,
 * and a journal without its "end" line is refused by readers.
 *
 * Every function runs on the loop thread of the transfer.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_INTERVAL_BYTES (16 * 1024 * 1024)
#define DEFAULT_INTERVAL_MS 1000

struct cti_journal {
  char *path;
  char *tmp_path;
  int dir_fd;            /* the journal's directory, for fsync */
  int64_t interval_bytes;
  int64_t interval_ms;
  int64_t claimed;       /* `durable` of the last journal written; -1 */
  double last_time;
};

ct_code cti_journal_create(struct cti_transfer *t,
                           const struct ct_transfer_spec *spec)
{
  struct cti_journal *j;
  char *copy;

  if(!spec->journal_path)
    return CT_OK;
  j = calloc(1, sizeof(*j));
  if(!j)
    return CT_E_NO_MEMORY;
  j->dir_fd = -1;
  j->claimed = -1;
  j->interval_bytes = spec->journal_interval_bytes > 0 ?
    spec->journal_interval_bytes : DEFAULT_INTERVAL_BYTES;
  j->interval_ms = spec->journal_interval_ms > 0 ?
    spec->journal_interval_ms : DEFAULT_INTERVAL_MS;
  j->path = cti_strdup(spec->journal_path);
  if(!j->path || asprintf(&j->tmp_path, "%s.tmp", j->path) < 0) {
    j->tmp_path = NULL;
    cti_journal_free(j);
    return CT_E_NO_MEMORY;
  }
  copy = cti_strdup(j->path);
  if(!copy) {
    cti_journal_free(j);
    return CT_E_NO_MEMORY;
  }
  /* dirname() may modify its argument: hence the copy. A directory we
   * cannot open shows up as an error at the first journal write. */
  j->dir_fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(copy);
  t->journal = j;
  return CT_OK;
}

void cti_journal_free(struct cti_journal *j)
{
  if(!j)
    return;
  if(j->dir_fd >= 0)
    close(j->dir_fd);
  free(j->path);
  free(j->tmp_path);
  free(j);
}

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

static void fail(struct cti_transfer *t, int err, const char *what)
{
  if(t->local_code != CT_OK)
    return;
  t->local_code = CT_E_SINK_IO;
  t->local_errno = err;
  snprintf(t->local_message, sizeof(t->local_message),
           "cannot %s the resume journal", what);
}

/* Replace the journal with one claiming `durable`. The caller made sure
 * those bytes are on disk. */
static ct_code write_journal(struct cti_transfer *t, int64_t durable)
{
  struct cti_journal *j = t->journal;
  char *text = NULL;
  int len;
  int fd;
  int64_t length = -1;

  if(j->dir_fd < 0) {
    fail(t, ENOENT, "open the directory of");
    return CT_E_SINK_IO;
  }
  if(t->content_length >= 0) {
    length = t->range_start >= 0 ? -1 :
      t->content_length + t->resume_offset;
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
                 t->url, t->etag ? t->etag : "",
                 t->last_modified ? t->last_modified : "",
                 (long long)t->range_start, (long long)t->range_end,
                 (long long)length, (long long)durable);
  if(len < 0)
    return CT_E_NO_MEMORY;
  fd = open(j->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if(fd < 0) {
    free(text);
    fail(t, errno, "create");
    return CT_E_SINK_IO;
  }
  if(write_all(fd, text, (size_t)len) != 0 || fsync(fd) != 0) {
    int err = errno;
    free(text);
    close(fd);
    unlink(j->tmp_path);
    fail(t, err, "write");
    return CT_E_SINK_IO;
  }
  free(text);
  if(close(fd) != 0 || rename(j->tmp_path, j->path) != 0) {
    int err = errno;
    unlink(j->tmp_path);
    fail(t, err, "replace");
    return CT_E_SINK_IO;
  }
  /* The rename is durable only once the directory is. */
  if(fsync(j->dir_fd) != 0) {
    fail(t, errno, "sync the directory of");
    return CT_E_SINK_IO;
  }
  j->claimed = durable;
  j->last_time = cti_now();
  return CT_OK;
}

ct_code cti_journal_on_head(struct cti_transfer *t)
{
  if(!t->journal || t->sink.fd < 0)
    return CT_OK;
  /* Nothing of this response is written yet: claim what the part file
   * held before it (the resume offset, or 0 after a restart), under the
   * validators of this response. A restart truncated the file first, so
   * an older journal claiming more is replaced before any new byte. */
  return write_journal(t, t->sink.durable);
}

ct_code cti_journal_after_write(struct cti_transfer *t)
{
  struct cti_journal *j = t->journal;
  int64_t pending;
  ct_code rc;

  if(!j || t->sink.fd < 0 || j->claimed < 0)
    return CT_OK;
  pending = t->sink.durable + (int64_t)t->sink.buf_len;
  if(pending - j->claimed < j->interval_bytes &&
     (cti_now() - j->last_time) * 1000.0 < (double)j->interval_ms)
    return CT_OK;
  if(pending == j->claimed)
    return CT_OK;
  rc = cti_sink_flush(&t->sink);
  if(rc != CT_OK)
    return rc;      /* the sink's errno tells why; write_cb reports it */
  /* Data first, journal second: see the comment at the top. */
  if(fdatasync(t->sink.fd) != 0) {
    fail(t, errno, "sync the part file for");
    return CT_E_SINK_IO;
  }
  return write_journal(t, t->sink.durable);
}

void cti_journal_finish(struct cti_transfer *t, int part_kept)
{
  struct cti_journal *j = t->journal;
  if(!j)
    return;
  if(!part_kept) {
    /* Renamed into place or removed: nothing is left to resume. */
    if(unlink(j->path) == 0 && j->dir_fd >= 0)
      (void)fsync(j->dir_fd);
    return;
  }
  if(j->claimed < 0 && t->sink.durable <= t->sink.start)
    return;         /* never opened: an older journal stays as it was */
  if(t->sink.durable != j->claimed) {
    /* The sink closed its fd; make sure what it wrote is on disk before
     * the journal says so (its own fsync may have been skipped after a
     * failed flush). */
    int fd = t->sink.part_path ?
      open(t->sink.part_path, O_WRONLY | O_CLOEXEC) : -1;
    if(fd < 0 || fdatasync(fd) != 0) {
      if(fd >= 0)
        close(fd);
      return;       /* the previous journal still tells the truth */
    }
    close(fd);
    (void)write_journal(t, t->sink.durable);
  }
}
