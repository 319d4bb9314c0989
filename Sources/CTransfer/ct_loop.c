/*
 * ct_loop.c - the event loop: one thread owning a CURLM, an epoll fd, a
 * timerfd for curl's timeout and an eventfd that other threads write to
 * when they queue a command. Nothing polls: with no transfers and no
 * commands the thread sleeps in epoll_wait with no timeout.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define MAX_EVENTS 256

void ct_loop_config_init(struct ct_loop_config *config)
{
  memset(config, 0, sizeof(*config));
  config->multiplex = 1;
  config->share_tls_sessions = 1;
}

/* --- id table (loop thread only) -------------------------------------- */

static struct cti_transfer **bucket_of(struct ct_loop *loop, uint64_t id)
{
  return &loop->buckets[id & (loop->bucket_count - 1)];
}

static void table_insert(struct ct_loop *loop, struct cti_transfer *t)
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

/* --- finishing ------------------------------------------------------- */

/* Easy handles are reused: curl_easy_reset keeps a handle's buffers,
 * which saves an init, a cleanup and their allocations per transfer.
 *
 * Only a handle whose transfer curl ended fully goes back to the pool.
 * curl_easy_reset does not undo everything: when curl's multi_done stops
 * early (the transfer was removed while pending or running, or its
 * HTTP/2 connection is still used by other streams) the handle keeps its
 * receive buffer, and curl then refuses CURLOPT_BUFFERSIZE on it. Such a
 * handle is cleaned up instead. */
static CURL *easy_take(struct ct_loop *loop)
{
  if(loop->easy_pool_count > 0)
    return loop->easy_pool[--loop->easy_pool_count];
  return curl_easy_init();
}

/* Whether the transfer that just got CURLMSG_DONE with `cc` on `easy` left
 * the handle clean: it succeeded on a connection of its own (HTTP/1.x;
 * with HTTP/2 or 3 other streams may still use it, and curl only
 * finishes a transfer fully when the connection falls idle). */
static int easy_ended_clean(CURL *easy, CURLcode cc)
{
  long version = 0;
  if(cc != CURLE_OK)
    return 0;
  if(curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK)
    return 0;
  return version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1;
}

static void easy_give_back(struct ct_loop *loop, CURL *easy, int clean)
{
  if(clean && loop->easy_pool_count < CTI_EASY_POOL && !loop->stop) {
    curl_easy_reset(easy);
    loop->easy_pool[loop->easy_pool_count++] = easy;
  }
  else
    curl_easy_cleanup(easy);
}

/* Take `t` out of curl and the table, report, free. Loop thread only. */
static void retire(struct ct_loop *loop, struct cti_transfer *t)
{
  if(t->committing)
    return;          /* its commit job retires it when done */
  if(t->added) {
    curl_multi_remove_handle(loop->multi, t->easy);
    t->added = 0;
  }
  if(t->easy) {
    easy_give_back(loop, t->easy, t->easy_clean && !t->added);
    t->easy = NULL;
  }
  table_remove(loop, t);
  __atomic_sub_fetch(&loop->active, 1, __ATOMIC_RELAXED);
  cti_transfer_free(t);
  /* Connections of an older trust policy that were busy when it changed
   * are closed once they fall idle. */
  if(loop->stale_sockets)
    cti_tls_close_stale_sockets(loop);
}

void cti_loop_retire(struct ct_loop *loop, struct cti_transfer *t)
{
  retire(loop, t);
}

static void drain_done(struct ct_loop *loop)
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
      t->easy_clean = easy_ended_clean(t->easy, cc);
      curl_multi_remove_handle(loop->multi, t->easy);
      t->added = 0;
      cti_transfer_finish(t, cc);
    }
    retire(loop, t);
  }
}

static void socket_action(struct ct_loop *loop, curl_socket_t s, int bits)
{
  int running = 0;
  CURLMcode mc = curl_multi_socket_action(loop->multi, s, bits, &running);
  if(mc == CURLM_BAD_SOCKET && s != CURL_SOCKET_TIMEOUT) {
    /* curl already forgot the socket (closed between the event and now).
     * Benign, but stop watching it so a stale registration cannot spin. */
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s, NULL);   /* EBADF if closed */
  }
  else if(mc != CURLM_OK) {
    /* Out of memory or an internal curl error: the transfers curl could
     * not drive still end through their own timeouts or errors, which
     * drain_done reports. Counted in multi_errors. */
    __atomic_add_fetch(&loop->multi_errors, 1, __ATOMIC_RELAXED);
  }
  drain_done(loop);
}

/* --- curl callbacks -------------------------------------------------- */

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp,
                     void *socketp)
{
  struct ct_loop *loop = userp;
  struct epoll_event ev;
  if(what == CURL_POLL_REMOVE) {
    cti_tls_socket_polled(loop, s, easy, 0);
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s, NULL);   /* EBADF if closed */
    return 0;
  }
  memset(&ev, 0, sizeof(ev));
  ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
    ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
  ev.data.fd = s;
  cti_tls_socket_polled(loop, s, easy, 1);
  if(!socketp) {
    if(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
      epoll_ctl(loop->epfd, EPOLL_CTL_MOD, s, &ev);
    curl_multi_assign(loop->multi, s, loop);   /* mark as registered */
  }
  else if(epoll_ctl(loop->epfd, EPOLL_CTL_MOD, s, &ev) != 0 &&
          errno == ENOENT) {
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s, &ev);
  }
  return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
  struct ct_loop *loop = userp;
  struct itimerspec its;
  (void)multi;
  memset(&its, 0, sizeof(its));
  if(timeout_ms == 0) {
    /* Never call curl from inside its own callback: flag it and let the
     * loop run the timeout right after the current dispatch. */
    loop->run_timeout_now = 1;
  }
  else if(timeout_ms > 0) {
    its.it_value.tv_sec = timeout_ms / 1000;
    its.it_value.tv_nsec = (timeout_ms % 1000) * 1000000L;
  }
  timerfd_settime(loop->timerfd, 0, &its, NULL);   /* zero disarms */
  return 0;
}

/* --- commands -------------------------------------------------------- */

static void add_transfer(struct ct_loop *loop, struct cti_transfer *t)
{
  CURLMcode mc;
  ct_code rc;
  table_insert(loop, t);
  t->easy = easy_take(loop);
  if(!t->easy) {
    cti_transfer_finish_code(t, CT_E_NO_MEMORY, "cannot create a transfer");
    retire(loop, t);
    return;
  }
  rc = cti_transfer_setup(t);
  if(rc != CT_OK) {
    t->easy_clean = 1;          /* never added: curl did not run it */
    cti_transfer_finish_code(t, rc, "invalid request");
    retire(loop, t);
    return;
  }
  t->add_time = cti_now();
  mc = curl_multi_add_handle(loop->multi, t->easy);
  if(mc != CURLM_OK) {
    cti_transfer_finish_code(t, cti_code_from_multi(mc),
                             curl_multi_strerror(mc));
    retire(loop, t);
    return;
  }
  t->added = 1;
}

static void cancel_transfer(struct ct_loop *loop, struct cti_transfer *t,
                            int keep_partial, ct_code code)
{
  if(keep_partial)
    t->flags |= CT_FLAG_KEEP_PARTIAL;
  else if(code == CT_E_CANCELLED)
    t->flags &= ~(uint32_t)CT_FLAG_KEEP_PARTIAL;
  if(t->added) {
    curl_multi_remove_handle(loop->multi, t->easy);
    t->added = 0;
  }
  cti_transfer_finish_code(t, code, code == CT_E_SHUTDOWN ?
                           "the session was shut down" : "cancelled");
  retire(loop, t);
}

static void unpause_if_free(struct cti_transfer *t)
{
  if(t->added && !t->paused_by_user && !t->paused_for_disposition)
    curl_easy_pause(t->easy, CURLPAUSE_CONT);
}

static void run_command(struct ct_loop *loop, struct cti_command *c)
{
  struct cti_transfer *t = NULL;
  if(c->kind == CTI_CMD_SUBMIT) {
    if(loop->stop) {
      /* Shutting down: still exactly one finish per transfer. */
      table_insert(loop, c->transfer);
      cancel_transfer(loop, c->transfer, 0, CT_E_CANCELLED);
    }
    else
      add_transfer(loop, c->transfer);
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
      if(!t->finished && t->easy &&
         cti_transfer_set_trust_marker(t) != CT_OK)
        cancel_transfer(loop, t, 0, CT_E_NO_MEMORY);  /* fail closed */
    }
    cti_tls_close_stale_sockets(loop);
    return;
  }
  t = table_find(loop, c->id);
  if(!t || t->committing)
    return;          /* finished already: commands on it are no-ops */
  switch(c->kind) {
  case CTI_CMD_CANCEL:
    cancel_transfer(loop, t, c->arg, CT_E_CANCELLED);
    break;
  case CTI_CMD_PAUSE:
    if(!t->paused_by_user && t->added) {
      t->paused_by_user = 1;
      curl_easy_pause(t->easy, CURLPAUSE_ALL);
    }
    break;
  case CTI_CMD_RESUME:
    if(t->paused_by_user) {
      t->paused_by_user = 0;
      unpause_if_free(t);
    }
    break;
  case CTI_CMD_DISPOSITION:
    if(!t->awaiting_disposition)
      break;
    t->awaiting_disposition = 0;
    if(c->arg == CT_DISPOSITION_CANCEL) {
      cancel_transfer(loop, t, 0, CT_E_CANCELLED);
      break;
    }
    if(c->arg == CT_DISPOSITION_BECOME_FILE && c->path) {
      ct_code rc;
      free(t->sink.mem);
      t->sink.mem = NULL;
      t->sink.mem_len = t->sink.mem_cap = 0;
      t->sink.kind = CT_SINK_FILE;
      free(t->sink.part_path);
      t->sink.part_path = c->path;    /* moved */
      c->path = NULL;
      free(t->sink.path);
      t->sink.path = NULL;             /* the part file is the result */
      rc = cti_sink_open_file(&t->sink, 0, 1);
      if(rc != CT_OK) {
        cancel_transfer(loop, t, 0, rc);
        break;
      }
    }
    if(t->paused_for_disposition) {
      t->paused_for_disposition = 0;
      unpause_if_free(t);
    }
    break;
  case CTI_CMD_BODY_READY:
    /* Not gated on body_waiting: a wake-up must never be dropped because a
     * flag disagrees. This runs between socket_action calls, so a
     * CURL_READFUNC_PAUSE that read_cb returned has taken effect (curl set
     * KEEP_SEND_PAUSE before returning to us) and CONT always finds it;
     * unpausing a transfer that is not paused is a no-op for curl, and a
     * read that finds nothing pauses again. */
    t->body_waiting = 0;
    if(!t->rate_paused)
      unpause_if_free(t);
    /* curl_easy_pause() marks the handle to run now; run the timeouts on
     * the next pass ourselves too, whether or not curl called timer_cb,
     * or the upload could wait for an unrelated event. */
    loop->run_timeout_now = 1;
    break;
  case CTI_CMD_SPEED:
    /* Read by the rate buckets at the next chunk (ct_ratelimit.c). */
    t->spec.max_recv_speed = c->a;
    t->spec.max_send_speed = c->b;
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

static void drain_commands(struct ct_loop *loop)
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

static ct_code enqueue(struct ct_loop *loop, struct cti_command *c)
{
  uint64_t one = 1;
  int wake;
  pthread_mutex_lock(&loop->lock);
  if(loop->closing) {
    pthread_mutex_unlock(&loop->lock);
    return CT_E_SHUTDOWN;
  }
  wake = loop->cmd_head == NULL;
  c->next = NULL;
  if(loop->cmd_tail)
    loop->cmd_tail->next = c;
  else
    loop->cmd_head = c;
  loop->cmd_tail = c;
  pthread_mutex_unlock(&loop->lock);
  /* One write per batch: later commands of the same batch find the loop
   * already woken. */
  if(wake) {
    while(write(loop->eventfd, &one, sizeof(one)) < 0 && errno == EINTR)
      ;
  }
  return CT_OK;
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

/* --- the thread ------------------------------------------------------ */

static void loop_free(struct ct_loop *loop);

static void *loop_main(void *arg)
{
  struct ct_loop *loop = arg;
  struct epoll_event events[MAX_EVENTS];

  pthread_setname_np(pthread_self(), "transfer-loop");

  while(!loop->stop) {
    int i;
    int n = epoll_wait(loop->epfd, events, MAX_EVENTS,
                       loop->run_timeout_now ? 0 : -1);
    __atomic_add_fetch(&loop->wakeups, 1, __ATOMIC_RELAXED);
    if(n < 0) {
      if(errno == EINTR)
        continue;
      break;         /* epoll itself failed: nothing sane to do but stop */
    }
    if(loop->run_timeout_now) {
      loop->run_timeout_now = 0;
      socket_action(loop, CURL_SOCKET_TIMEOUT, 0);
    }
    for(i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if(fd == loop->eventfd) {
        drain_commands(loop);
        cti_worker_collect(loop->worker);
      }
      else if(fd == loop->timerfd) {
        uint64_t expirations;
        while(read(loop->timerfd, &expirations, sizeof(expirations)) < 0 &&
              errno == EINTR)
          ;
        socket_action(loop, CURL_SOCKET_TIMEOUT, 0);
      }
      else if(fd == loop->rate_timerfd) {
        cti_rate_on_timer(loop);
      }
      else {
        int bits = 0;
        if(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
          bits |= CURL_CSELECT_IN;
        if(events[i].events & EPOLLOUT)
          bits |= CURL_CSELECT_OUT;
        if(events[i].events & EPOLLERR)
          bits |= CURL_CSELECT_ERR;
        socket_action(loop, fd, bits);
      }
    }
    if(loop->config.callbacks.on_batch_end)
      loop->config.callbacks.on_batch_end(loop->config.batch_ctx);
  }

  /* Shutdown: refuse new commands, run those queued (submits finish as
   * cancelled), then cancel whatever is still in flight. */
  pthread_mutex_lock(&loop->lock);
  loop->closing = 1;
  pthread_mutex_unlock(&loop->lock);
  drain_commands(loop);
  /* Commits under way end first (each reports once); none starts later:
   * a cancelled transfer has nothing to commit. */
  cti_worker_drain(loop->worker);
  while(loop->all)
    cancel_transfer(loop, loop->all, 0, CT_E_CANCELLED);
  if(loop->config.callbacks.on_batch_end)
    loop->config.callbacks.on_batch_end(loop->config.batch_ctx);
  if(loop->config.callbacks.on_loop_end)
    loop->config.callbacks.on_loop_end(loop->config.batch_ctx);
  /* Destroyed from one of its own callbacks: nobody joins this (detached)
   * thread, so it frees the loop itself, last of all. */
  if(loop->free_on_exit)
    loop_free(loop);
  return NULL;
}

/* --- lifecycle ------------------------------------------------------- */

static void loop_free(struct ct_loop *loop)
{
  if(!loop)
    return;
  cti_worker_free(loop->worker);   /* before the eventfd it writes to */
  while(loop->easy_pool_count > 0)
    curl_easy_cleanup(loop->easy_pool[--loop->easy_pool_count]);
  if(loop->multi)
    curl_multi_cleanup(loop->multi);
  if(loop->share)
    curl_share_cleanup(loop->share);
  free(loop->sockets);           /* after curl closed every connection */
  cti_tls_state_free(loop->tls);
  if(loop->epfd >= 0)
    close(loop->epfd);
  if(loop->timerfd >= 0)
    close(loop->timerfd);
  if(loop->eventfd >= 0)
    close(loop->eventfd);
  cti_rate_close(loop);
  pthread_mutex_destroy(&loop->lock);
  free(loop->buckets);
  free(loop->ca_file);
  free(loop);
}

static ct_code open_fds(struct ct_loop *loop)
{
  struct epoll_event ev;
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  loop->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  loop->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if(loop->epfd < 0 || loop->timerfd < 0 || loop->eventfd < 0)
    return CT_E_SYSTEM;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.fd = loop->timerfd;
  if(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->timerfd, &ev) != 0)
    return CT_E_SYSTEM;
  ev.data.fd = loop->eventfd;
  if(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->eventfd, &ev) != 0)
    return CT_E_SYSTEM;
  return cti_rate_open(loop);
}

ct_code ct_loop_create(const struct ct_loop_config *config,
                       struct ct_loop **out)
{
  struct ct_loop *loop = NULL;
  ct_code rc = CT_E_NO_MEMORY;
  char errbuf[256] = "";

  if(!config || !out)
    return CT_E_INVALID_ARGUMENT;
  *out = NULL;
  rc = cti_global_init();
  if(rc != CT_OK)
    return rc;
  rc = CT_E_NO_MEMORY;
  loop = calloc(1, sizeof(*loop));
  if(!loop)
    return CT_E_NO_MEMORY;
  loop->epfd = loop->timerfd = loop->eventfd = -1;
  loop->rate_timerfd = -1;
  pthread_mutex_init(&loop->lock, NULL);
  loop->config = *config;
  loop->ca_file = cti_strdup(config->ca_file);
  loop->config.ca_file = loop->ca_file;
  loop->next_id = 1;
  loop->total_recv_limit = config->max_total_recv_speed;
  loop->total_send_limit = config->max_total_send_speed;
  loop->bucket_count = 64;
  loop->buckets = calloc(loop->bucket_count, sizeof(*loop->buckets));
  if(!loop->buckets || (config->ca_file && !loop->ca_file))
    goto fail;

  rc = open_fds(loop);
  if(rc == CT_OK)
    rc = cti_worker_create(loop->eventfd, &loop->worker);
  if(rc != CT_OK)
    goto fail;
  rc = cti_tls_state_create(loop->ca_file, &loop->tls, errbuf);
  if(rc != CT_OK)
    goto fail;

  rc = CT_E_NO_MEMORY;
  loop->multi = curl_multi_init();
  loop->share = curl_share_init();
  if(!loop->multi || !loop->share)
    goto fail;
  /* One thread uses the share handle, so it needs no lock functions. */
  curl_share_setopt(loop->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  if(config->share_tls_sessions)
    curl_share_setopt(loop->share, CURLSHOPT_SHARE,
                      CURL_LOCK_DATA_SSL_SESSION);
  curl_multi_setopt(loop->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(loop->multi, CURLMOPT_SOCKETDATA, loop);
  curl_multi_setopt(loop->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(loop->multi, CURLMOPT_TIMERDATA, loop);
  curl_multi_setopt(loop->multi, CURLMOPT_PIPELINING,
                    config->multiplex ? CURLPIPE_MULTIPLEX : CURLPIPE_NOTHING);
  /* libcurl's default cache size follows the number of handles in the
   * multi, which drops to nothing between bursts of short transfers and
   * then closes the connections we want to reuse: fix it instead. */
  curl_multi_setopt(loop->multi, CURLMOPT_MAXCONNECTS,
                    (long)(config->max_idle_connections > 0 ?
                           config->max_idle_connections : 256));
  if(config->max_connections_per_host > 0)
    curl_multi_setopt(loop->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                      (long)config->max_connections_per_host);
  if(config->max_total_connections > 0)
    curl_multi_setopt(loop->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      (long)config->max_total_connections);
  if(config->max_concurrent_streams > 0)
    curl_multi_setopt(loop->multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
                      (long)config->max_concurrent_streams);

  if(pthread_create(&loop->thread, NULL, loop_main, loop) != 0) {
    rc = CT_E_SYSTEM;
    goto fail;
  }
  loop->thread_started = 1;
  *out = loop;
  return CT_OK;
fail:
  loop_free(loop);
  return rc;
}

void ct_loop_destroy(struct ct_loop *loop)
{
  uint64_t one = 1;
  if(!loop)
    return;
  if(!loop->thread_started) {
    loop_free(loop);
    return;
  }
  if(pthread_equal(pthread_self(), loop->thread)) {
    /* From a callback on the loop thread (the last reference to the owner
     * dropped in on_finish, say): joining ourselves would fail with
     * EDEADLK and freeing here would pull the loop from under the code
     * that called us. Mark it stopping and let loop_main, once back at
     * the top, finish every transfer and free the loop. */
    pthread_mutex_lock(&loop->lock);
    loop->stop_requested = 1;
    pthread_mutex_unlock(&loop->lock);
    loop->stop = 1;
    loop->free_on_exit = 1;
    pthread_detach(loop->thread);
    return;
  }
  /* A flag, not a queued command: stopping needs no allocation, so it
   * works when memory is short. Commands queued before it run first
   * (drain_commands reads both under the same lock). */
  pthread_mutex_lock(&loop->lock);
  loop->stop_requested = 1;
  pthread_mutex_unlock(&loop->lock);
  while(write(loop->eventfd, &one, sizeof(one)) < 0 && errno == EINTR)
    ;
  if(pthread_join(loop->thread, NULL) != 0)
    return;          /* cannot happen for a joinable thread not ourselves;
                        leak rather than free a loop still running */
  loop_free(loop);
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

int64_t ct_loop_active_count(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->active, __ATOMIC_RELAXED);
}

uint64_t ct_loop_wakeups(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->wakeups, __ATOMIC_RELAXED);
}
