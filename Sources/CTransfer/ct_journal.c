/*
 * ct_journal.c - the resume journal of one file-sink transfer: when it is
 * due, and the sync thread that makes its claims durable. The format and
 * its readers and writers are in ct_journal_format.c.
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
  j->dir_fd = cti_open_parent_dir(j->path);
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

static void fail(struct cti_transfer *t, int err, const char *what)
{
  if(t->local_code != CT_OK)
    return;
  t->local_code = CT_E_SINK_IO;
  t->local_errno = err;
  snprintf(t->local_message, sizeof(t->local_message),
           "cannot %s the resume journal", what);
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
  err = cti_replace_file(j->path, j->tmp_path, j->dir_fd, text, len, what);
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
