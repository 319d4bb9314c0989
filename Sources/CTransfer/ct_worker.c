/*
 * ct_worker.c - a thread for the loop's blocking file work.
 *
 * The loop thread never waits on the disk: work that may (fsync, rename,
 * a directory fsync at commit; the first journal and the digest of a
 * resumed prefix at the head; removing or syncing the part file and the
 * journal's last write when a download fails) is queued here as a job. The worker runs
 * each job's `run` in order, then hands the job back to the loop, which
 * runs its `done` on the loop thread (woken through its eventfd). A job's
 * memory belongs to whoever queued it; the worker and the loop only link
 * it. Between cti_worker_submit and `done` nothing else may touch what
 * `run` uses: the loop keeps the owning transfer out of reach (see
 * CT_PHASE_COMMITTING).
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cti_worker {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct cti_job *todo_head;     /* under lock, in submit order */
  struct cti_job *todo_tail;
  struct cti_job *done_head;     /* under lock, back to the loop */
  struct cti_job *done_tail;
  int stop;                      /* under lock: exit once todo is empty */
  int started;
  pthread_t thread;
  int eventfd;                   /* the loop's, borrowed */
  char *gate[2];                 /* TRANSFER_TEST_*_GATE, see below */
  size_t gate_dir_len[2];
};

static void push(struct cti_job **head, struct cti_job **tail,
                 struct cti_job *job)
{
  job->next = NULL;
  if(*tail)
    (*tail)->next = job;
  else
    *head = job;
  *tail = job;
}

/* Test-only gates: with TRANSFER_TEST_COMMIT_GATE (commit jobs) or
 * TRANSFER_TEST_FILE_GATE (the head's file work, the settle of a failed
 * download) naming a FIFO, a gated job whose path lies in the FIFO's
 * folder first opens the FIFO for reading (so the test sees, by opening
 * it for writing, that the job is waiting) and reads one byte (the test's
 * release). Jobs elsewhere are not gated, so tests running beside it are
 * not affected. Read only where CT_TEST_HOOKS is defined (debug builds). */
static void pass_gate(struct cti_worker *w, const char *path, int which)
{
  int fd;
  char byte;
  const char *gate = which == CTI_GATE_FILE ? w->gate[1] : w->gate[0];
  size_t len = which == CTI_GATE_FILE ? w->gate_dir_len[1] :
    w->gate_dir_len[0];
  if(!gate || !path || strncmp(path, gate, len) != 0)
    return;
  fd = open(gate, O_RDONLY | O_CLOEXEC);
  if(fd < 0)
    return;
  while(read(fd, &byte, 1) < 0 && errno == EINTR)
    ;
  close(fd);
}

static void *worker_main(void *arg)
{
  struct cti_worker *w = arg;
  uint64_t one = 1;

  pthread_setname_np(pthread_self(), "transfer-files");
  pthread_mutex_lock(&w->lock);
  for(;;) {
    struct cti_job *job = w->todo_head;
    if(!job) {
      if(w->stop)
        break;
      pthread_cond_wait(&w->wake, &w->lock);
      continue;
    }
    w->todo_head = job->next;
    if(!w->todo_head)
      w->todo_tail = NULL;
    pthread_mutex_unlock(&w->lock);

    pass_gate(w, job->gate_path, job->gate);
    job->run(job);

    pthread_mutex_lock(&w->lock);
    push(&w->done_head, &w->done_tail, job);
    /* Wake the loop; it collects under the same lock, so a job pushed
     * after its collect wakes it again. */
    while(write(w->eventfd, &one, sizeof(one)) < 0 && errno == EINTR)
      ;
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

ct_code cti_worker_create(int eventfd, struct cti_worker **out)
{
  struct cti_worker *w = calloc(1, sizeof(*w));
  const char *gates[2];
  int i;
  *out = NULL;
  if(!w)
    return CT_E_NO_MEMORY;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  w->eventfd = eventfd;
#ifdef CT_TEST_HOOKS
  gates[0] = getenv("TRANSFER_TEST_COMMIT_GATE");
  gates[1] = getenv("TRANSFER_TEST_FILE_GATE");
#else
  /* Release builds: no environment variable can hold the worker. */
  gates[0] = gates[1] = NULL;
#endif
  for(i = 0; i < 2; i++) {
    if(gates[i] && gates[i][0] && strrchr(gates[i], '/')) {
      w->gate[i] = cti_strdup(gates[i]);
      w->gate_dir_len[i] = (size_t)(strrchr(gates[i], '/') - gates[i]) + 1;
    }
  }
  if(pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w->gate[0]);
    free(w->gate[1]);
    free(w);
    return CT_E_SYSTEM;
  }
  w->started = 1;
  *out = w;
  return CT_OK;
}

ct_code cti_worker_submit(struct cti_worker *w, struct cti_job *job)
{
  if(!w)
    return CT_E_SHUTDOWN;
  pthread_mutex_lock(&w->lock);
  if(w->stop) {
    pthread_mutex_unlock(&w->lock);
    return CT_E_SHUTDOWN;
  }
  push(&w->todo_head, &w->todo_tail, job);
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  return CT_OK;
}

void cti_worker_collect(struct cti_worker *w)
{
  struct cti_job *job;
  if(!w)
    return;
  pthread_mutex_lock(&w->lock);
  job = w->done_head;
  w->done_head = w->done_tail = NULL;
  pthread_mutex_unlock(&w->lock);
  while(job) {
    struct cti_job *next = job->next;
    job->done(job);            /* may free the job */
    job = next;
  }
}

void cti_worker_drain(struct cti_worker *w)
{
  if(!w || !w->started)
    return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  /* The worker is never the calling thread (only the loop drains), so
   * the join cannot deadlock; it returns once every queued job ran. */
  pthread_join(w->thread, NULL);
  w->started = 0;
  cti_worker_collect(w);
}

void cti_worker_free(struct cti_worker *w)
{
  if(!w)
    return;
  cti_worker_drain(w);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w->gate[0]);
  free(w->gate[1]);
  free(w);
}

int cti_fsync_parent(const char *path)
{
  const char *slash = strrchr(path, '/');
  char *dir;
  int fd;
  int err = 0;
  if(!slash)
    dir = cti_strdup(".");
  else if(slash == path)
    dir = cti_strdup("/");
  else
    dir = strndup(path, (size_t)(slash - path));
  if(!dir)
    return ENOMEM;
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if(fd < 0)
    err = errno;
  else {
    if(fsync(fd) != 0 && errno != EINVAL)   /* EINVAL: cannot sync dirs */
      err = errno;
    close(fd);
  }
  free(dir);
  return err;
}
