/*
 * ct_command.c - the cross-thread command queue: any thread queues a
 * command (submit, cancel, pause, resume, disposition, limits, trust
 * policy) under the loop's lock and wakes the loop through its eventfd;
 * the loop thread drains the queue and runs each command.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void run_command(struct ct_loop *loop, struct cti_command *c)
{
  struct cti_transfer *t = NULL;
  if(c->kind == CTI_CMD_SUBMIT) {
    if(loop->stop) {
      /* Shutting down: still exactly one finish per transfer. */
      cti_loop_insert(loop, c->transfer);
      cti_loop_cancel_transfer(loop, c->transfer, 0, CT_E_CANCELLED);
    }
    else
      cti_loop_add(loop, c->transfer);
    return;
  }
  if(c->kind == CTI_CMD_TOTAL_SPEED) {
    loop->total_recv_limit = c->a;
    loop->total_send_limit = c->b;
    return;
  }
  if(c->kind == CTI_CMD_TRUST_POLICY) {
    struct cti_transfer *next;
    cti_tls_state_set_policy(loop->tls, c->policy);
    /* Every handshake from now on is judged by the new policy: new
     * transfers and the next hops of running ones get a new trust marker,
     * so none of them reuses a connection or resumes a TLS session made
     * under the old policy; idle connections of the old one are closed. */
    loop->trust_generation++;
    for(t = loop->all; t; t = next) {
      next = t->next;
      if(t->phase < CT_PHASE_FINISHING && t->easy &&
         cti_transfer_set_trust_marker(t) != CT_OK)
        /* fail closed */
        cti_loop_cancel_transfer(loop, t, 0, CT_E_NO_MEMORY);
    }
    cti_tls_close_stale_sockets(loop);
    return;
  }
  t = cti_loop_find(loop, c->id);
  if(t && c->kind == CTI_CMD_CANCEL && t->phase == CT_PHASE_COMMITTING) {
    /* Before the download is in place a cancel still wins (ct_loop.h). */
    cti_transfer_cancel_commit(t, c->arg);
    return;
  }
  if(!t || t->phase >= CT_PHASE_FINISHING)
    return;          /* finished already: commands on it are no-ops */
  switch(c->kind) {
  case CTI_CMD_CANCEL:
    cti_loop_cancel_transfer(loop, t, c->arg, CT_E_CANCELLED);
    break;
  case CTI_CMD_PAUSE:
    /* Not admitted yet (held for its origin or the descriptor budget):
     * recorded, and applied when it is. */
    cti_transfer_pause(t, CT_PAUSE_USER, 1, "suspended");
    break;
  case CTI_CMD_RESUME:
    cti_transfer_pause(t, CT_PAUSE_USER, 0, "resumed");
    break;
  case CTI_CMD_DISPOSITION:
    if(t->phase != CT_PHASE_DECIDING)
      break;
    if(c->arg == CT_DISPOSITION_CANCEL) {
      cti_loop_cancel_transfer(loop, t, 0, CT_E_CANCELLED);
      break;
    }
    if(c->arg == CT_DISPOSITION_BECOME_FILE && c->path) {
      ct_code rc = cti_sink_become_file(&t->sink, c->path);
      c->path = NULL;                  /* moved */
      if(rc != CT_OK) {
        /* A file error naming the step and its errno, not a cancel. */
        cti_transfer_set_error(t, rc, t->sink.sys_errno, t->sink.failed);
        cti_loop_fail(loop, t, rc, t->sink.failed);
        break;
      }
      cti_loop_count_file(loop, t);
    }
    cti_transfer_set_phase(t, CT_PHASE_RECEIVING, "disposition answered");
    cti_transfer_pause(t, CT_PAUSE_DISPOSITION, 0, "disposition answered");
    break;
  case CTI_CMD_BODY_READY:
    /* The body source has bytes (or its end) again. Clearing the reason
     * resumes libcurl unless another reason (user, rate) still holds it;
     * clearing a reason that is not set changes nothing, and a read that
     * finds nothing pauses again, so a wake-up is never lost. This runs
     * between socket_action calls: a CURL_READFUNC_PAUSE that read_cb
     * returned has taken effect. */
    if(cti_transfer_in_multi(t))
      cti_transfer_pause(t, CT_PAUSE_SOURCE, 0, "body source ready");
    /* curl_easy_pause() marks the handle to run now; run the timeouts on
     * the next pass ourselves too, whether or not curl called timer_cb,
     * or the upload could wait for an unrelated event. */
    loop->run_timeout_now = 1;
    break;
  case CTI_CMD_CONSUMER_READY:
    /* The owner's consumer drained its buffer (ct_loop.h). The reason
     * was set on this thread by the write callback before the owner
     * could see its buffer full, so this clear always comes after it. */
    if(cti_transfer_in_multi(t) && (t->paused & CT_PAUSE_CONSUMER)) {
      cti_transfer_pause(t, CT_PAUSE_CONSUMER, 0, "consumer ready");
      /* As for BODY_READY: make libcurl run the unpaused transfer now. */
      loop->run_timeout_now = 1;
    }
    break;
  case CTI_CMD_SPEED:
    /* Read by the rate buckets at the next chunk (ct_ratelimit.c). */
    t->opts.max_recv_speed = c->a;
    t->opts.max_send_speed = c->b;
    break;
  default:
    break;
  }
}

static void free_command(struct cti_command *c)
{
  free(c->path);
  if(c->policy)
    ct_trust_policy_release(c->policy);
  free(c);
}

void cti_command_drain(struct ct_loop *loop)
{
  struct cti_command *c;
  uint64_t value;
  int stop;
  /* Reset the eventfd first: a command queued after we took the list
   * writes it again and wakes us for the next round. */
  while(read(loop->eventfd, &value, sizeof(value)) < 0 && errno == EINTR)
    ;
  pthread_mutex_lock(&loop->lock);
  c = loop->cmd_head;
  loop->cmd_head = loop->cmd_tail = NULL;
  stop = loop->stop_requested;
  pthread_mutex_unlock(&loop->lock);
  while(c) {
    struct cti_command *next = c->next;
    run_command(loop, c);
    free_command(c);
    c = next;
  }
  /* After the commands queued before the stop request: they run first. */
  if(stop)
    loop->stop = 1;
}

/* Appends the chain `first`..`last` (linked through `next`) in one go. */
static ct_code enqueue_chain(struct ct_loop *loop, struct cti_command *first,
                             struct cti_command *last)
{
  uint64_t one = 1;
  int wake;
  pthread_mutex_lock(&loop->lock);
  if(loop->closing) {
    pthread_mutex_unlock(&loop->lock);
    return CT_E_SHUTDOWN;
  }
  wake = loop->cmd_head == NULL;
  last->next = NULL;
  if(loop->cmd_tail)
    loop->cmd_tail->next = first;
  else
    loop->cmd_head = first;
  loop->cmd_tail = last;
  pthread_mutex_unlock(&loop->lock);
  /* One write per batch: later commands of the same batch find the loop
   * already woken. */
  if(wake) {
    while(write(loop->eventfd, &one, sizeof(one)) < 0 && errno == EINTR)
      ;
  }
  return CT_OK;
}

static ct_code enqueue(struct ct_loop *loop, struct cti_command *c)
{
  return enqueue_chain(loop, c, c);
}

static ct_code simple_command(struct ct_loop *loop, enum cti_command_kind k,
                              uint64_t id, int32_t arg, int64_t a, int64_t b)
{
  struct cti_command *c;
  ct_code rc;
  if(!loop)
    return CT_E_INVALID_ARGUMENT;
  if(k != CTI_CMD_TOTAL_SPEED && k != CTI_CMD_TRUST_POLICY &&
     (id == 0 || id >= __atomic_load_n(&loop->next_id, __ATOMIC_RELAXED)))
    return CT_E_NOT_FOUND;
  c = calloc(1, sizeof(*c));
  if(!c)
    return CT_E_NO_MEMORY;
  c->kind = k;
  c->id = id;
  c->arg = arg;
  c->a = a;
  c->b = b;
  rc = enqueue(loop, c);
  if(rc != CT_OK)
    free_command(c);
  return rc;
}

ct_code ct_loop_submit(struct ct_loop *loop,
                       const struct ct_transfer_spec *spec, void *ctx,
                       uint64_t *out_id)
{
  struct cti_transfer *t = NULL;
  struct cti_command *c;
  uint64_t id;
  ct_code rc;

  if(!loop || !spec || !out_id)
    return CT_E_INVALID_ARGUMENT;
  *out_id = 0;
  rc = cti_transfer_create(loop, spec, ctx, &t);
  if(rc != CT_OK)
    return rc;
  c = calloc(1, sizeof(*c));
  if(!c) {
    cti_transfer_free(t);
    return CT_E_NO_MEMORY;
  }
  id = __atomic_fetch_add(&loop->next_id, 1, __ATOMIC_RELAXED);
  t->id = id;
  c->kind = CTI_CMD_SUBMIT;
  c->transfer = t;
  c->id = id;
  __atomic_add_fetch(&loop->active, 1, __ATOMIC_RELAXED);
  rc = enqueue(loop, c);
  if(rc != CT_OK) {
    __atomic_sub_fetch(&loop->active, 1, __ATOMIC_RELAXED);
    cti_transfer_free(t);
    free(c);
    return rc;
  }
  /* Not c->id or t->id: once queued, both belong to the loop thread, which
   * may already have run the transfer and freed them. */
  *out_id = id;
  return CT_OK;
}

ct_code ct_loop_submit_batch(struct ct_loop *loop,
                             const struct ct_transfer_spec *specs,
                             void *const *ctxs, size_t count,
                             uint64_t *out_ids)
{
  struct cti_command *first = NULL;
  struct cti_command *last = NULL;
  struct cti_command *c;
  struct cti_transfer *t;
  uint64_t id;
  size_t i;
  ct_code rc = CT_OK;

  if(!loop || (count && (!specs || !ctxs || !out_ids)))
    return CT_E_INVALID_ARGUMENT;
  if(!count)
    return CT_OK;
  memset(out_ids, 0, count * sizeof(*out_ids));
  /* Build every transfer first: a spec refused halfway queues nothing. */
  for(i = 0; i < count; i++) {
    t = NULL;
    rc = cti_transfer_create(loop, &specs[i], ctxs[i], &t);
    if(rc != CT_OK)
      goto fail;
    c = calloc(1, sizeof(*c));
    if(!c) {
      cti_transfer_free(t);
      rc = CT_E_NO_MEMORY;
      goto fail;
    }
    c->kind = CTI_CMD_SUBMIT;
    c->transfer = t;
    if(last)
      last->next = c;
    else
      first = c;
    last = c;
  }
  /* Ids are taken in one step, in order, once nothing can fail but the
   * queue itself. */
  id = __atomic_fetch_add(&loop->next_id, (uint64_t)count, __ATOMIC_RELAXED);
  for(c = first, i = 0; c; c = c->next, i++) {
    c->id = id + i;
    c->transfer->id = id + i;
    out_ids[i] = id + i;
  }
  __atomic_add_fetch(&loop->active, (int64_t)count, __ATOMIC_RELAXED);
  rc = enqueue_chain(loop, first, last);
  if(rc != CT_OK) {
    __atomic_sub_fetch(&loop->active, (int64_t)count, __ATOMIC_RELAXED);
    memset(out_ids, 0, count * sizeof(*out_ids));
    goto fail;
  }
  /* Not c->transfer: queued, the commands belong to the loop thread. */
  return CT_OK;
fail:
  while(first) {
    c = first->next;
    cti_transfer_free(first->transfer);
    free(first);
    first = c;
  }
  return rc;
}

ct_code ct_loop_cancel(struct ct_loop *loop, uint64_t id,
                       int32_t keep_partial)
{
  return simple_command(loop, CTI_CMD_CANCEL, id, keep_partial, 0, 0);
}

ct_code ct_loop_pause(struct ct_loop *loop, uint64_t id)
{
  return simple_command(loop, CTI_CMD_PAUSE, id, 0, 0, 0);
}

ct_code ct_loop_resume(struct ct_loop *loop, uint64_t id)
{
  return simple_command(loop, CTI_CMD_RESUME, id, 0, 0, 0);
}

ct_code ct_loop_body_ready(struct ct_loop *loop, uint64_t id)
{
  return simple_command(loop, CTI_CMD_BODY_READY, id, 0, 0, 0);
}

ct_code ct_loop_consumer_ready(struct ct_loop *loop, uint64_t id)
{
  return simple_command(loop, CTI_CMD_CONSUMER_READY, id, 0, 0, 0);
}

ct_code ct_loop_set_disposition(struct ct_loop *loop, uint64_t id,
                                ct_disposition disposition, const char *path)
{
  struct cti_command *c;
  ct_code rc;
  if(!loop)
    return CT_E_INVALID_ARGUMENT;
  if(disposition == CT_DISPOSITION_BECOME_FILE && !path)
    return CT_E_INVALID_ARGUMENT;
  if(id == 0 || id >= __atomic_load_n(&loop->next_id, __ATOMIC_RELAXED))
    return CT_E_NOT_FOUND;
  c = calloc(1, sizeof(*c));
  if(!c)
    return CT_E_NO_MEMORY;
  c->kind = CTI_CMD_DISPOSITION;
  c->id = id;
  c->arg = (int32_t)disposition;
  if(path) {
    c->path = strdup(path);
    if(!c->path) {
      free(c);
      return CT_E_NO_MEMORY;
    }
  }
  rc = enqueue(loop, c);
  if(rc != CT_OK)
    free_command(c);
  return rc;
}

ct_code ct_loop_set_speed_limit(struct ct_loop *loop, uint64_t id,
                                int64_t max_recv, int64_t max_send)
{
  return simple_command(loop, CTI_CMD_SPEED, id, 0, max_recv, max_send);
}

ct_code ct_loop_set_total_speed_limit(struct ct_loop *loop, int64_t max_recv,
                                      int64_t max_send)
{
  return simple_command(loop, CTI_CMD_TOTAL_SPEED, 0, 0, max_recv, max_send);
}

ct_code ct_loop_set_trust_policy(struct ct_loop *loop,
                                 struct ct_trust_policy *policy)
{
  struct cti_command *c;
  ct_code rc;
  if(!loop)
    return CT_E_INVALID_ARGUMENT;
  c = calloc(1, sizeof(*c));
  if(!c)
    return CT_E_NO_MEMORY;
  c->kind = CTI_CMD_TRUST_POLICY;
  if(policy) {
    ct_trust_policy_retain(policy);
    c->policy = policy;
  }
  rc = enqueue(loop, c);
  if(rc != CT_OK)
    free_command(c);
  return rc;
}
