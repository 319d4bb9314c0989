/*
 * ct_loop.c - the event loop: one thread owning a CURLM, an epoll fd and an
 * eventfd that other threads write to when they queue a command
 * (ct_command.c). curl's timeout is epoll_wait's timeout (no timerfd: that
 * cost a timerfd_settime per curl timer change and a read per expiry).
 * Nothing polls: with no transfers and no commands the thread sleeps in
 * epoll_wait with no timeout. Also the loop's lifecycle: create, destroy,
 * free.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 256

static _Atomic uint64_t trust_generation_base;

void ct_loop_config_init(struct ct_loop_config *config)
{
  memset(config, 0, sizeof(*config));
  config->multiplex = 1;
  config->share_tls_sessions = 1;
}

/* curl_multi_socket_action failed for another reason than a forgotten
 * socket (out of memory, an internal error): curl may never drive the
 * transfers of that call again, and one without a timeout would wait
 * forever. They end now with a typed error (CT_E_NO_MEMORY for out of
 * memory): for a socket, the transfers that opened it or were last polled
 * on it; for the timeout, or when none of those is still in curl, every
 * transfer in curl, since which ones curl failed to run is unknown. */
static void fail_driven(struct ct_loop *loop, curl_socket_t s, CURLMcode mc)
{
  ct_code code = cti_code_from_multi(mc);
  const char *text = curl_multi_strerror(mc);
  uint64_t opener = 0;
  uint64_t user = 0;
  struct cti_transfer *t;
  struct cti_transfer *next;
  int known = 0;

  if(s != CURL_SOCKET_TIMEOUT && s >= 0 && (size_t)s < loop->socket_cap &&
     loop->sockets[s].open) {
    opener = loop->sockets[s].opener;
    user = loop->sockets[s].user;
  }
  for(t = loop->all; t; t = t->next) {
    if(cti_transfer_in_multi(t) && (t->id == opener || t->id == user))
      known = 1;
  }
  for(t = loop->all; t; t = next) {
    next = t->next;
    if(!cti_transfer_in_multi(t))
      continue;
    if(known && t->id != opener && t->id != user)
      continue;
    cti_loop_fail(loop, t, code, text);
  }
}

static void socket_action(struct ct_loop *loop, curl_socket_t s, int bits)
{
  int running = 0;
  CURLMcode mc = curl_multi_socket_action(loop->multi, s, bits, &running);
  if(mc == CURLM_BAD_SOCKET && s != CURL_SOCKET_TIMEOUT) {
    /* curl already forgot the socket (closed between the event and now).
     * Benign, but stop watching it so a stale registration cannot spin. */
    cti_watch_drop(loop, s);
    cti_loop_drain_done(loop);
    return;
  }
  /* Whatever curl finished before it failed is reported first. */
  cti_loop_drain_done(loop);
  if(mc != CURLM_OK) {
    __atomic_add_fetch(&loop->multi_errors, 1, __ATOMIC_RELAXED);
    fail_driven(loop, s, mc);
  }
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp,
                     void *socketp)
{
  struct ct_loop *loop = userp;
  if(what == CURL_POLL_REMOVE) {
    cti_tls_socket_polled(loop, s, easy, 0);
    cti_unwatch_socket(loop, s);
    return 0;
  }
  cti_tls_socket_polled(loop, s, easy, 1);
  cti_watch_socket(loop, s, ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
                   ((what & CURL_POLL_OUT) ? EPOLLOUT : 0), socketp);
  return 0;
}

/* OpenSSL reads ahead on bulk TLS connections (ct_tls_read.c), so whole
 * records can wait in its buffer while the socket is empty: libcurl 7.88
 * stops reading (it asks SSL_pending, then polls the socket) and epoll
 * never reports them. After each pass, drive again the socket of every
 * read-ahead connection whose OpenSSL holds a whole record. The
 * connection is what is driven, not a transfer: one socket_action on an
 * HTTP/2 socket runs every stream on it (libcurl 7.88 hands the read to
 * the first and wakes those nghttp2 gave bytes to), and its streams come
 * and go while records wait. Only read-ahead connections are looked at
 * (the loop's tls_conns list, filled at the handshake's end and when
 * libcurl polls their socket), so other traffic costs the re-drive
 * nothing. A connection whose OpenSSL found the socket empty waits for
 * epoll; one that libcurl did not read from after a few drives (every
 * stream paused) waits for a record or an unpause (ct_tls_read.c).
 * Bounded: what is left after REDRIVE_PASSES runs on the next pass,
 * without sleeping. */
#define REDRIVE_PASSES 64
#define REDRIVE_BATCH 64

static void redrive_tls(struct ct_loop *loop)
{
  int pass;

  loop->tls_redrive_again = 0;
  for(pass = 0; pass < REDRIVE_PASSES; pass++) {
    curl_socket_t fds[REDRIVE_BATCH];
    struct cti_tls_conn *c = NULL;
    int n = 0;
    int i;

    loop->tls_redrive_pass++;
    while(n < REDRIVE_BATCH && (c = cti_tls_conn_next(loop, c)) != NULL) {
      curl_socket_t fd = cti_tls_conn_wants_drive(loop, c,
                                                  loop->tls_redrive_pass);
      if(fd != CURL_SOCKET_BAD)
        fds[n++] = fd;
    }
    if(n == 0)
      return;
    /* socket_action may close connections: only descriptors are kept */
    for(i = 0; i < n; i++) {
      __atomic_store_n(&loop->tls_redrives,
                       __atomic_load_n(&loop->tls_redrives,
                                       __ATOMIC_RELAXED) + 1,
                       __ATOMIC_RELAXED);
      socket_action(loop, fds[i], CURL_CSELECT_IN);
    }
  }
  loop->tls_redrive_again = 1;
}

/* Monotonic milliseconds. */
static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
  struct ct_loop *loop = userp;
  (void)multi;
  if(timeout_ms == 0) {
    /* Never call curl from inside its own callback: flag it and let the
     * loop run the timeout right after the current dispatch. */
    loop->run_timeout_now = 1;
    loop->curl_deadline = -1;
  }
  else if(timeout_ms > 0)
    loop->curl_deadline = now_ms() + timeout_ms;
  else
    loop->curl_deadline = -1;     /* -1: no timeout */
  return 0;
}

/* epoll_wait's timeout: 0 when curl's timeout is due, -1 when curl has
 * none, else the milliseconds to its deadline (rounded up: waking early
 * would only spin). */
static int wait_ms(struct ct_loop *loop)
{
  int64_t left;
  int64_t deadline = loop->curl_deadline;
  if(loop->run_timeout_now || loop->tls_redrive_again)
    return 0;
  /* The idle sweep's deadline as well (ct_timeout.c). */
  if(loop->idle_sweep_ms >= 0 &&
     (deadline < 0 || loop->idle_sweep_ms < deadline))
    deadline = loop->idle_sweep_ms;
  if(deadline < 0)
    return -1;
  left = deadline - now_ms();
  if(left <= 0)
    return 0;
  return left > 3600 * 1000 ? 3600 * 1000 : (int)left;
}

static void loop_free(struct ct_loop *loop);

static void *loop_main(void *arg)
{
  struct ct_loop *loop = arg;
  struct epoll_event events[MAX_EVENTS];

  pthread_setname_np(pthread_self(), "transfer-loop");

  while(!loop->stop) {
    int i;
    int n = epoll_wait(loop->epfd, events, MAX_EVENTS, wait_ms(loop));
    __atomic_add_fetch(&loop->wakeups, 1, __ATOMIC_RELAXED);
    if(n < 0) {
      if(errno == EINTR)
        continue;
      break;         /* epoll itself failed: nothing sane to do but stop */
    }
    if(loop->run_timeout_now || loop->curl_deadline >= 0 ||
       loop->idle_sweep_ms >= 0) {
      int64_t now = now_ms();
      if(loop->run_timeout_now ||
         (loop->curl_deadline >= 0 && loop->curl_deadline <= now)) {
        loop->run_timeout_now = 0;
        loop->curl_deadline = -1;  /* curl sets the next one, if any */
        socket_action(loop, CURL_SOCKET_TIMEOUT, 0);
      }
      if(loop->idle_sweep_ms >= 0 && loop->idle_sweep_ms <= now)
        cti_timeout_sweep(loop);
    }
    for(i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if(fd == loop->eventfd) {
        cti_command_drain(loop);
        cti_worker_collect(loop->worker);
      }
      else if(fd == loop->rate_timerfd) {
        cti_rate_on_timer(loop);
      }
      else if(!cti_watch_idle_event(loop, fd)) {
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
    if(loop->tls_conns || loop->tls_redrive_again)
      redrive_tls(loop);
    /* Transfers retired in this pass made room under the budget. */
    if(loop->held || loop->origin_ready)
      cti_loop_admit_held(loop);
    if(loop->config.callbacks.on_batch_end)
      loop->config.callbacks.on_batch_end(loop->config.batch_ctx);
  }

  /* Shutdown: refuse new commands, run those queued (submits finish as
   * cancelled), then cancel whatever is still in flight. */
  pthread_mutex_lock(&loop->lock);
  loop->closing = 1;
  pthread_mutex_unlock(&loop->lock);
  cti_command_drain(loop);
  /* Commits under way end first (each reports once); none starts later:
   * a cancelled transfer has nothing to commit. */
  cti_worker_drain(loop->worker);
  while(loop->all)
    cti_loop_cancel_transfer(loop, loop->all, 0, CT_E_CANCELLED);
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
  ct_cookie_jar_release(loop->config.cookie_jar);   /* no handle left */
  free(loop->sockets);           /* after curl closed every connection */
  cti_tls_state_free(loop->tls);
  if(loop->epfd >= 0)
    close(loop->epfd);
  if(loop->eventfd >= 0)
    close(loop->eventfd);
  cti_rate_close(loop);
  pthread_mutex_destroy(&loop->lock);
  cti_origin_free_all(loop);
  free(loop->buckets);
  free(loop->ca_file);
  free(loop);
}

static ct_code open_fds(struct ct_loop *loop)
{
  struct epoll_event ev;
  int err;
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  err = errno;
  loop->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if(loop->eventfd < 0)
    err = errno;
  if(loop->epfd < 0 || loop->eventfd < 0)
    return cti_fd_exhausted(err) ? CT_E_TOO_MANY_OPEN_FILES : CT_E_SYSTEM;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
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
  loop->epfd = loop->eventfd = -1;
  loop->curl_deadline = -1;
  loop->idle_sweep_ms = -1;
  loop->rate_timerfd = -1;
  pthread_mutex_init(&loop->lock, NULL);
  loop->config = *config;
  if(config->cookie_jar)
    ct_cookie_jar_retain(config->cookie_jar);   /* loop_free releases it */
  /* Trust generations unique among loops: TLS sessions in a cookie jar
   * shared by several loops match only the loop that made them (the
   * CAINFO marker names the generation, ct_request.c). */
  loop->trust_generation = atomic_fetch_add(&trust_generation_base,
                                            (uint64_t)1 << 32);
  {
    const char *trace = getenv("CT_TRACE_PHASES");
    loop->trace_phases = trace && trace[0] == '1';
  }
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
  /* The admission rule (ct_fdlimit.c): the admitted transfers hold at
   * most fd_budget descriptors (ct_loop_transfers.c holds the others), and
   * libcurl keeps at most idle_budget idle connections, so that both and
   * the reserve stay under the open-file limit. A configured
   * max_total_connections stays libcurl's own queue
   * (CURLMOPT_MAX_TOTAL_CONNECTIONS, transfers wait there connecting); the
   * budget is not passed to it: set for every loop, libcurl 7.88 let
   * requests on fresh loops stall for seconds (FastPathTests, BatchTests
   * under load), so the budget is enforced by holding, not by libcurl. */
  {
    struct ct_fd_budget budget =
      cti_fd_connection_budget(config->max_idle_connections);
    loop->fd_budget = budget.descriptors;
    loop->idle_budget = budget.idle;
    /* Fixed, not libcurl's default: that follows the number of handles in
     * the multi, which drops to nothing between bursts of short transfers
     * and then closes the connections we want to reuse. */
    curl_multi_setopt(loop->multi, CURLMOPT_MAXCONNECTS,
                      (long)loop->idle_budget);
  }
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

/* What a joined loop no longer needs: its connections (and their
 * sockets), the DNS and TLS-session cache, epoll and the rate timer. The
 * eventfd, the worker, the lock and the TLS state stay until
 * loop_free: commands refused after the stop still take the lock. */
static void release_network(struct ct_loop *loop)
{
  while(loop->easy_pool_count > 0)
    curl_easy_cleanup(loop->easy_pool[--loop->easy_pool_count]);
  if(loop->multi)
    curl_multi_cleanup(loop->multi);
  loop->multi = NULL;
  if(loop->share)
    curl_share_cleanup(loop->share);
  loop->share = NULL;
  if(loop->epfd >= 0)
    close(loop->epfd);
  loop->epfd = -1;
  cti_rate_close(loop);
}

void ct_loop_stop(struct ct_loop *loop)
{
  uint64_t one = 1;
  if(!loop || !loop->thread_started || loop->joined ||
     pthread_equal(pthread_self(), loop->thread))
    return;
  pthread_mutex_lock(&loop->lock);
  loop->stop_requested = 1;
  pthread_mutex_unlock(&loop->lock);
  while(write(loop->eventfd, &one, sizeof(one)) < 0 && errno == EINTR)
    ;
  if(pthread_join(loop->thread, NULL) != 0)
    return;
  loop->joined = 1;
  release_network(loop);
}

void ct_loop_destroy(struct ct_loop *loop)
{
  uint64_t one = 1;
  if(!loop)
    return;
  if(!loop->thread_started || loop->joined) {
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
   * (cti_command_drain reads both under the same lock). */
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

int64_t ct_loop_active_count(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->active, __ATOMIC_RELAXED);
}

void ct_loop_pool_stats(const struct ct_loop *loop, struct ct_pool_stats *out)
{
  out->open_connections = __atomic_load_n(&loop->open_sockets, __ATOMIC_RELAXED);
  out->active_transfers = __atomic_load_n(&loop->active, __ATOMIC_RELAXED);
  out->queued_transfers =
    __atomic_load_n(&loop->held_count, __ATOMIC_RELAXED) +
    __atomic_load_n(&loop->origin_waiting, __ATOMIC_RELAXED);
}

uint64_t ct_loop_wakeups(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->wakeups, __ATOMIC_RELAXED);
}

uint64_t ct_loop_tls_redrives(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->tls_redrives, __ATOMIC_RELAXED);
}

uint64_t ct_loop_tls_verdicts_released(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->tls_verdicts_released, __ATOMIC_RELAXED);
}

uint64_t ct_loop_tls_redrive_checks(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->tls_redrive_checks, __ATOMIC_RELAXED);
}

uint64_t ct_loop_setopt_calls(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->setopt_calls, __ATOMIC_RELAXED);
}

uint64_t ct_loop_epoll_ctl_calls(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->epoll_ctl_calls, __ATOMIC_RELAXED);
}

int64_t ct_loop_connection_budget(const struct ct_loop *loop, int64_t *idle)
{
  if(idle)
    *idle = loop ? loop->idle_budget : 0;
  return loop ? loop->fd_budget : 0;
}

int64_t ct_loop_descriptors_admitted(const struct ct_loop *loop)
{
  return loop ? __atomic_load_n(&loop->fd_admitted, __ATOMIC_RELAXED) : 0;
}
