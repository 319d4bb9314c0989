/*
 * ct_loop_transfers.c - the transfers a loop owns: the id table, adding a
 * transfer to libcurl, collecting the ones libcurl finished, failing or
 * cancelling one, and retiring it. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <stdlib.h>

static struct cti_transfer **bucket_of(struct ct_loop *loop, uint64_t id)
{
  return &loop->buckets[id & (loop->bucket_count - 1)];
}

void cti_loop_insert(struct ct_loop *loop, struct cti_transfer *t)
{
  struct cti_transfer **b;
  if((size_t)loop->transfer_count + 1 > loop->bucket_count) {
    /* grow x2 and rehash: keeps chains short for 10k+ queued transfers */
    size_t count = loop->bucket_count * 2;
    struct cti_transfer **grown = calloc(count, sizeof(*grown));
    if(grown) {
      size_t i;
      for(i = 0; i < loop->bucket_count; i++) {
        struct cti_transfer *x = loop->buckets[i];
        while(x) {
          struct cti_transfer *n = x->hnext;
          x->hnext = grown[x->id & (count - 1)];
          grown[x->id & (count - 1)] = x;
          x = n;
        }
      }
      free(loop->buckets);
      loop->buckets = grown;
      loop->bucket_count = count;
    }
  }
  b = bucket_of(loop, t->id);
  t->hnext = *b;
  *b = t;
  t->next = loop->all;
  t->prev = NULL;
  if(loop->all)
    loop->all->prev = t;
  loop->all = t;
  loop->transfer_count++;
}

static void table_remove(struct ct_loop *loop, struct cti_transfer *t)
{
  struct cti_transfer **b = bucket_of(loop, t->id);
  while(*b && *b != t)
    b = &(*b)->hnext;
  if(*b)
    *b = t->hnext;
  if(t->prev)
    t->prev->next = t->next;
  else if(loop->all == t)
    loop->all = t->next;
  if(t->next)
    t->next->prev = t->prev;
  loop->transfer_count--;
}

static struct cti_transfer *table_find(struct ct_loop *loop, uint64_t id)
{
  struct cti_transfer *t = *bucket_of(loop, id);
  while(t && t->id != id)
    t = t->hnext;
  return t;
}

struct cti_transfer *cti_loop_find(struct ct_loop *loop, uint64_t id)
{
  return table_find(loop, id);
}

static void admit(struct ct_loop *loop, struct cti_transfer *t);
static void add_within_budget(struct ct_loop *loop, struct cti_transfer *t);

/* Take `t` off the held list (it is on it). O(1): a shutdown cancels
 * every held transfer, newest first. */
static void unhold(struct ct_loop *loop, struct cti_transfer *t)
{
  if(t->held_prev)
    t->held_prev->held_next = t->held_next;
  else
    loop->held = t->held_next;
  if(t->held_next)
    t->held_next->held_prev = t->held_prev;
  else
    loop->held_tail = t->held_prev;
  t->held_next = t->held_prev = NULL;
  t->held = 0;
  __atomic_store_n(&loop->held_count,
                   __atomic_load_n(&loop->held_count, __ATOMIC_RELAXED) - 1,
                   __ATOMIC_RELAXED);
}

/* Add `delta` to the descriptors the admitted transfers count. */
static void count_fds(struct ct_loop *loop, int64_t delta)
{
  __atomic_store_n(&loop->fd_admitted,
                   __atomic_load_n(&loop->fd_admitted, __ATOMIC_RELAXED) +
                   delta, __ATOMIC_RELAXED);
}

/* Whether `t` may start now: its descriptors fit in what the budget has
 * left, or nothing else is admitted (then one that can never fit tries,
 * and its socket() or open() fails with the error naming the limit). */
static int fits(const struct ct_loop *loop, const struct cti_transfer *t)
{
  return loop->fd_budget <= 0 || loop->fd_admitted == 0 ||
    loop->fd_admitted + ct_transfer_descriptors(t->sink.kind, t->body_kind)
      <= loop->fd_budget;
}

void cti_loop_count_file(struct ct_loop *loop, struct cti_transfer *t)
{
  if(!t->fds_admitted)
    return;
  t->fds_admitted++;
  count_fds(loop, 1);
}

void cti_loop_admit_held(struct ct_loop *loop)
{
  if(loop->admitting || loop->closing)
    return;
  loop->admitting = 1;
  /* Waiting for their origin first: each goes on to the budget's queue
   * (behind the transfers held there) or starts. */
  {
    struct cti_transfer *t;
    while((t = cti_origin_next(loop)))
      add_within_budget(loop, t);
  }
  while(loop->held && fits(loop, loop->held)) {
    struct cti_transfer *t = loop->held;
    unhold(loop, t);
    if(t->phase == CT_PHASE_QUEUED)   /* never one that ended held */
      admit(loop, t);
  }
  loop->admitting = 0;
}

/* Take a finished transfer out of the table and free it. `clean`: curl
 * ended its easy handle fully (or never ran it), so the pool may keep it.
 * Loop thread only. */
static void release(struct ct_loop *loop, struct cti_transfer *t, int clean)
{
  /* A connection whose handshake never reported its end must not keep a
   * pointer into this transfer: released here, and counted (0 is healthy),
   * before the phase says it is done. */
  if(cti_tls_verdict_release(&t->verdict))
    __atomic_store_n(&loop->tls_verdicts_released,
                     __atomic_load_n(&loop->tls_verdicts_released,
                                     __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
  cti_transfer_set_phase(t, CT_PHASE_DONE, "retired");
  if(t->easy) {
    cti_cookies_done(t);   /* ct_cookies.c: before the pool resets it */
    cti_easy_give_back(loop, t->easy, t->profile, clean);
    t->easy = NULL;
  }
  if(t->big_recv_slot) {
    loop->big_recv_in_use--;
    t->big_recv_slot = 0;
  }
  table_remove(loop, t);
  cti_origin_leave(loop, t);
  if(t->held)
    unhold(loop, t);
  if(t->fds_admitted) {
    count_fds(loop, -(int64_t)t->fds_admitted);
    t->fds_admitted = 0;
  }
  __atomic_sub_fetch(&loop->active, 1, __ATOMIC_RELAXED);
  cti_transfer_free(t);
  /* Its file is closed now (a committed download's too), its connection
   * closed or idle: the next held transfer starts at the end of this
   * loop pass (cti_loop_admit_held), not here inside the caller's walk
   * over the transfers. */
  /* Connections of an older trust policy that were busy when it changed
   * are closed once they fall idle. */
  if(loop->stale_sockets)
    cti_tls_close_stale_sockets(loop);
}

/* After finishing: released now, or by the file job when it is done. */
static void retire(struct ct_loop *loop, struct cti_transfer *t, int clean)
{
  /* libcurl is done with its connection: the next of its origin may start
   * at the end of this pass, even while a download commits its file. */
  cti_origin_leave(loop, t);
  if(t->phase == CT_PHASE_COMMITTING) {
    t->commit.clean = clean;
    return;
  }
  release(loop, t, clean);
}

void cti_loop_retire(struct ct_loop *loop, struct cti_transfer *t)
{
  release(loop, t, t->commit.clean);
}

void cti_loop_drain_done(struct ct_loop *loop)
{
  CURLMsg *msg;
  int left;
  while((msg = curl_multi_info_read(loop->multi, &left))) {
    struct cti_transfer *t = NULL;
    if(msg->msg != CURLMSG_DONE)
      continue;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
    if(!t)
      continue;
    /* Read the result before removing the handle: msg belongs to curl
     * and is invalid after curl_multi_remove_handle. */
    {
      CURLcode cc = msg->data.result;
      int clean = cti_easy_ended_clean(t->easy, cc);
      /* A stream that ended paused may leave bytes in curl's pause buffer,
       * which only a full multi_done frees: not for another transfer. */
      if(clean == CTI_EASY_AS_IS && t->paused)
        clean = 0;
      curl_multi_remove_handle(loop->multi, t->easy);
      cti_transfer_finish(t, cc);
      retire(loop, t, clean);
    }
  }
}

void cti_loop_add(struct ct_loop *loop, struct cti_transfer *t)
{
  cti_loop_insert(loop, t);
  /* Its origin at its connection limit: it waits there, in order
   * (ct_origin.c), and comes back through cti_loop_admit_held. */
  if(cti_origin_enter(loop, t))
    return;
  add_within_budget(loop, t);
}

/* Start `t` (in the table, counted by its origin), or hold it while the
 * descriptor budget is spent or others are held before it. */
static void add_within_budget(struct ct_loop *loop, struct cti_transfer *t)
{
  if(loop->held || !fits(loop, t)) {
    /* Over the descriptor budget (or behind one that is): wait, queued,
     * holding no descriptor, in order,
     * until a transfer retires (cancel and shutdown find it in the
     * table as any queued transfer). */
    t->held = 1;
    t->held_prev = loop->held_tail;
    t->held_next = NULL;
    if(loop->held_tail)
      loop->held_tail->held_next = t;
    else
      loop->held = t;
    loop->held_tail = t;
    __atomic_store_n(&loop->held_count,
                     __atomic_load_n(&loop->held_count, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    return;
  }
  admit(loop, t);
}

/* Prepare `t` and hand it to libcurl; its descriptors are counted
 * against the budget from here until it retires (after its file is
 * committed, for a download). */
static void admit(struct ct_loop *loop, struct cti_transfer *t)
{
  CURLMcode mc;
  ct_code rc;
  int configured = 0;
  t->fds_admitted = (int)ct_transfer_descriptors(t->sink.kind, t->body_kind);
  count_fds(loop, t->fds_admitted);
  rc = cti_transfer_prepare(t);
  if(rc != CT_OK) {
    cti_transfer_finish_code(t, rc, "invalid request");
    retire(loop, t, 0);
    return;
  }
  t->easy = cti_easy_take(loop, t->profile, &configured);
  if(!t->easy) {
    cti_transfer_finish_code(t, CT_E_NO_MEMORY, "cannot create a transfer");
    retire(loop, t, 0);
    return;
  }
  rc = cti_transfer_setup(t, configured);
  if(rc != CT_OK) {
    cti_transfer_finish_code(t, rc, "invalid request");
    retire(loop, t, 1);         /* never added: curl did not run it */
    return;
  }
  t->add_time = cti_now();
  mc = curl_multi_add_handle(loop->multi, t->easy);
  if(mc != CURLM_OK) {
    cti_transfer_finish_code(t, cti_code_from_multi(mc),
                             curl_multi_strerror(mc));
    retire(loop, t, 0);
    return;
  }
  cti_transfer_set_phase(t, CT_PHASE_CONNECTING, "added to curl");
  cti_timeout_watch(loop, t);
  if(t->paused & CT_PAUSE_USER)
    /* Suspended before it was admitted (CT_FLAG_START_PAUSED, or a pause
     * while it waited for its origin or the descriptor budget). The read
     * and write callbacks hold it as well: curl 7.88 resets its pause
     * bits when the request starts. */
    curl_easy_pause(t->easy, CURLPAUSE_ALL);
}

/* End `t` now with `code` (a local cause recorded before wins, unless
 * the code is a cancel). */
void cti_loop_fail(struct ct_loop *loop, struct cti_transfer *t,
                          ct_code code, const char *message)
{
  if(cti_transfer_in_multi(t))
    curl_multi_remove_handle(loop->multi, t->easy);
  /* Ended while held (a cancel): it leaves the queue now, though a
   * download's retire waits for the worker to settle its file. */
  if(t->held)
    unhold(loop, t);
  cti_origin_leave(loop, t);
  cti_transfer_finish_code(t, code, message);
  retire(loop, t, 0);
}

void cti_loop_cancel_transfer(struct ct_loop *loop, struct cti_transfer *t,
                            int keep_partial, ct_code code)
{
  if(keep_partial)
    t->flags |= CT_FLAG_KEEP_PARTIAL;
  else if(code == CT_E_CANCELLED)
    t->flags &= ~(uint32_t)CT_FLAG_KEEP_PARTIAL;
  cti_loop_fail(loop, t, code, code == CT_E_SHUTDOWN ?
                "the session was shut down" : "cancelled");
}
