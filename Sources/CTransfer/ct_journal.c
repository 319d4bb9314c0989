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
 * Threads: the loop thread writes the body (pwrite) and decides when the
 * journal is due; a small per-transfer sync thread then runs fdatasync and
 * replaces the journal, so that waiting for the disk never stalls the
 * network. The loop hands it an offset whose bytes were already written
 * (pwrite returned); fdatasync on a dup of the part file's fd covers every
 * byte written before the call, so the claim stays true while the loop goes
 * on writing beyond it. The first journal (at the response head) is
 * written on the loop's file worker (ct_worker.c) while the transfer holds
 * its body (CT_PAUSE_FILE: no byte of the response is written before it);
 * the last one (when the transfer ends) on the worker too, by the job that
 * commits or settles the file. None of them blocks the loop thread.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_INTERVAL_BYTES (64 * 1024 * 1024)
#define DEFAULT_INTERVAL_MS 1000

struct cti_journal {
  char *path;
  char *tmp_path;
  int dir_fd;            /* the journal's directory, for fsync */
  int64_t interval_bytes;
  int64_t interval_ms;
  double last_time;      /* loop thread: when the last update was asked */
  int64_t asked;         /* loop thread: the last offset handed over */

  /* What every journal of this response says besides `durable`; set on
   * the loop thread before the sync thread starts, read-only after. */
  char *url;
  char *etag;
  char *last_modified;
  int64_t range_start;
  int64_t range_end;
  int64_t length;

  /* Shared with the sync thread, under `lock`. */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int thread_started;
  int stop;
  int sync_fd;           /* dup of the part file's fd, owned here */
  int64_t requested;     /* offset to claim next */
  int64_t claimed;       /* `durable` of the last journal written; -1 */
  int worker_errno;      /* first failure of the sync thread */
  const char *worker_what;

  /* The validators of the response whose head came, handed by the loop
   * (cti_journal_on_head) to the worker (cti_journal_head_write). */
  char *next_url;
  char *next_etag;
  char *next_last_modified;
  int64_t next_range_start;
  int64_t next_range_end;
  int64_t next_length;
};

/* A descriptor of the directory that holds `path` (to fsync a rename in
 * it), or -1 with errno set. dirname() may modify its argument: it gets a
 * copy. */
static int open_parent_dir(const char *path)
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

ct_code cti_journal_create(struct cti_transfer *t,
                           const struct ct_transfer_spec *spec)
{
  struct cti_journal *j;

  if(!spec->journal_path)
    return CT_OK;
  j = calloc(1, sizeof(*j));
  if(!j)
    return CT_E_NO_MEMORY;
  j->dir_fd = -1;
  j->sync_fd = -1;
  j->claimed = -1;
  j->asked = -1;
  pthread_mutex_init(&j->lock, NULL);
  pthread_cond_init(&j->wake, NULL);
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
  /* A directory we cannot open shows up as an error at the first journal
   * write. */
  j->dir_fd = open_parent_dir(j->path);
  t->journal = j;
  return CT_OK;
}

/* Stop and join the sync thread, if any. Loop thread. */
static void stop_worker(struct cti_journal *j)
{
  if(!j->thread_started)
    return;
  pthread_mutex_lock(&j->lock);
  j->stop = 1;
  pthread_cond_signal(&j->wake);
  pthread_mutex_unlock(&j->lock);
  pthread_join(j->thread, NULL);
  j->thread_started = 0;
}

void cti_journal_free(struct cti_journal *j)
{
  if(!j)
    return;
  stop_worker(j);
  if(j->sync_fd >= 0)
    close(j->sync_fd);
  if(j->dir_fd >= 0)
    close(j->dir_fd);
  pthread_mutex_destroy(&j->lock);
  pthread_cond_destroy(&j->wake);
  free(j->path);
  free(j->tmp_path);
  free(j->url);
  free(j->etag);
  free(j->last_modified);
  free(j->next_url);
  free(j->next_etag);
  free(j->next_last_modified);
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

/* Write `len` bytes of `text` to `tmp_path` (a fresh file of ours, never
 * through a symlink: a stale one from a crash is removed first), fsync it,
 * rename it over `path` and fsync the directory `dir_fd`. Any thread.
 * Returns 0, or an errno with `*what` set. */
static int replace_file(const char *path, const char *tmp_path, int dir_fd,
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

/* Replace the journal with one claiming `durable`; the caller made sure
 * those bytes are on disk. Any thread (touches only `j`'s read-only
 * fields and its own files). Returns 0, or an errno with `*what` set. */
static int write_journal(struct cti_journal *j, int64_t durable,
                         const char **what)
{
  ct_journal_record record;
  size_t len;
  char *text;
  int err;

  record.url = j->url;
  record.etag = j->etag;
  record.last_modified = j->last_modified;
  record.range_start = j->range_start;
  record.range_end = j->range_end;
  record.length = j->length;
  record.durable = durable;
  text = ct_journal_format(&record, &len);
  if(!text) {
    *what = "format";
    return errno;
  }
  err = replace_file(j->path, j->tmp_path, j->dir_fd, text, len, what);
  free(text);
  return err;
}

static void *sync_main(void *arg)
{
  struct cti_journal *j = arg;
  pthread_mutex_lock(&j->lock);
  for(;;) {
    int64_t target;
    const char *what = NULL;
    int err = 0;
    while(!j->stop && (j->requested <= j->claimed || j->worker_errno))
      pthread_cond_wait(&j->wake, &j->lock);
    if(j->stop)
      break;
    target = j->requested;
    pthread_mutex_unlock(&j->lock);
    /* Covers every byte written to the file before this call, which
     * includes all of [start, target). */
    if(fdatasync(j->sync_fd) != 0) {
      err = errno;
      what = "sync the part file for";
    }
    else
      err = write_journal(j, target, &what);
    pthread_mutex_lock(&j->lock);
    if(err) {
      j->worker_errno = err;
      j->worker_what = what;
    }
    else if(target > j->claimed)
      j->claimed = target;
  }
  pthread_mutex_unlock(&j->lock);
  return NULL;
}

int cti_journal_on_head(struct cti_transfer *t)
{
  struct cti_journal *j = t->journal;
  if(!j || t->sink.fd < 0)
    return 0;
  free(j->next_url);
  free(j->next_etag);
  free(j->next_last_modified);
  j->next_url = cti_strdup(t->url);
  j->next_etag = cti_strdup(t->etag);
  j->next_last_modified = cti_strdup(t->last_modified);
  j->next_range_start = t->range_start;
  j->next_range_end = t->range_end;
  j->next_length = -1;
  if(t->content_length >= 0 && t->range_start < 0)
    j->next_length = t->content_length + t->resume_offset;
  if(!j->next_url || (t->etag && !j->next_etag) ||
     (t->last_modified && !j->next_last_modified)) {
    fail(t, ENOMEM, "record");
    return -1;
  }
  return 1;
}

int cti_journal_head_write(struct cti_journal *j, int64_t durable,
                           const char **what)
{
  int err;
  /* A new response: the sync thread of an earlier one must not write
   * under the new validators (it reads them unlocked). */
  stop_worker(j);
  free(j->url);
  free(j->etag);
  free(j->last_modified);
  j->url = j->next_url;
  j->etag = j->next_etag;
  j->last_modified = j->next_last_modified;
  j->next_url = j->next_etag = j->next_last_modified = NULL;
  j->range_start = j->next_range_start;
  j->range_end = j->next_range_end;
  j->length = j->next_length;
  /* Nothing of this response is written yet: claim what the part file
   * held before it (the resume offset, or 0 after a restart), under the
   * validators of this response. A restart truncated the file first, so
   * an older journal claiming more is replaced before any new byte. */
  err = write_journal(j, durable, what);
  if(!err) {
    pthread_mutex_lock(&j->lock);
    j->claimed = durable;
    pthread_mutex_unlock(&j->lock);
  }
  return err;
}

ct_code cti_journal_head_done(struct cti_transfer *t, int64_t durable,
                              int err, const char *what)
{
  struct cti_journal *j = t->journal;
  if(!j)
    return CT_OK;
  if(err) {
    fail(t, err, what ? what : "write");
    return CT_E_SINK_IO;
  }
  j->asked = durable;
  j->last_time = cti_now();
  return CT_OK;
}

static ct_code start_worker(struct cti_transfer *t)
{
  struct cti_journal *j = t->journal;
  if(j->sync_fd >= 0)
    close(j->sync_fd);
  j->sync_fd = fcntl(t->sink.fd, F_DUPFD_CLOEXEC, 0);
  if(j->sync_fd < 0) {
    fail(t, errno, "sync the part file for");
    return CT_E_SINK_IO;
  }
  j->stop = 0;
  j->worker_errno = 0;
  if(pthread_create(&j->thread, NULL, sync_main, j) != 0) {
    fail(t, EAGAIN, "start the sync thread of");
    return CT_E_SINK_IO;
  }
  j->thread_started = 1;
  return CT_OK;
}

ct_code cti_journal_after_write(struct cti_transfer *t)
{
  struct cti_journal *j = t->journal;
  int64_t pending;
  int err;
  const char *what;
  ct_code rc;

  if(!j || t->sink.fd < 0 || j->asked < 0)
    return CT_OK;
  pending = t->sink.durable + (int64_t)t->sink.buf_len;
  if(pending - j->asked < j->interval_bytes &&
     (cti_now() - j->last_time) * 1000.0 < (double)j->interval_ms)
    return CT_OK;
  if(pending == j->asked)
    return CT_OK;
  /* pwrite what is buffered; the sync thread makes it durable. A part
   * file unlinked under us must not be claimed: check it once per
   * update (one fstat), before the journal may say so. */
  rc = cti_sink_flush(&t->sink);
  if(rc == CT_OK)
    rc = cti_sink_check_linked(&t->sink);
  if(rc != CT_OK)
    return rc;      /* the sink's errno tells why; write_cb reports it */
  if(!j->thread_started) {
    rc = start_worker(t);
    if(rc != CT_OK)
      return rc;
  }
  pthread_mutex_lock(&j->lock);
  err = j->worker_errno;
  what = j->worker_what;
  if(!err) {
    j->requested = t->sink.durable;
    pthread_cond_signal(&j->wake);
  }
  pthread_mutex_unlock(&j->lock);
  if(err) {
    fail(t, err, what ? what : "write");
    return CT_E_SINK_IO;
  }
  j->asked = t->sink.durable;
  j->last_time = cti_now();
  return CT_OK;
}

void cti_journal_finish(struct cti_transfer *t, int part_kept)
{
  struct cti_journal *j = t->journal;
  int64_t claimed;
  if(!j)
    return;
  stop_worker(j);
  if(!part_kept || t->sink.vanished) {
    /* Renamed into place, removed, or unlinked under us (a journal the
     * sync thread wrote since then claims bytes that are gone): nothing
     * is left to resume. */
    if(unlink(j->path) == 0 && j->dir_fd >= 0)
      (void)fsync(j->dir_fd);
    return;
  }
  claimed = j->claimed;
  if(claimed < 0 && t->sink.durable <= t->sink.start)
    return;         /* never opened: an older journal stays as it was */
  if(t->sink.durable != claimed) {
    /* The sink closed its fd; make sure what it wrote is on disk before
     * the journal says so (its own fsync may have been skipped after a
     * failed flush). */
    int fd = t->sink.part_path ?
      open(t->sink.part_path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    const char *what = "write";
    if(fd < 0 || fdatasync(fd) != 0) {
      if(fd >= 0)
        close(fd);
      return;       /* the previous journal still tells the truth */
    }
    close(fd);
    if(write_journal(j, t->sink.durable, &what) == 0)
      j->claimed = t->sink.durable;
  }
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
  dir_fd = open_parent_dir(path);
  err = dir_fd < 0 ? errno :
    replace_file(path, tmp_path, dir_fd, text, len, &what);
  if(dir_fd >= 0)
    close(dir_fd);
  free(tmp_path);
  free(text);
  return err;
}
