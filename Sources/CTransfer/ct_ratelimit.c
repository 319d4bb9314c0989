/*
 * ct_ratelimit.c - bandwidth limits as token buckets, per transfer and
 * shared by all transfers of a loop.
 *
 * libcurl's own limiter (CURLOPT_MAX_RECV_SPEED_LARGE) does not hold on
 * fast links with the libcurl we ship against (7.88: a 1 MiB/s limit lets
 * 4 MiB through loopback in 0.1 s), and dividing a shared budget by the
 * number of transfers wastes what idle ones leave. So the engine keeps its
 * own buckets: the write (download) and read (upload) callbacks take
 * tokens for the bytes they pass on; a transfer in debt is paused with
 * CURL_WRITEFUNC_PAUSE / CURL_READFUNC_PAUSE, and a timerfd of the loop
 * unpauses it when the debt is repaid. A chunk larger than the bucket goes
 * through and leaves the bucket in debt, so the average rate holds however
 * large libcurl's buffers are.
 *
 * HTTP/2: pausing one stream of a multiplexed connection does
 * not stop its bytes. libcurl 7.88 sets the paused stream's window to 0,
 * but what the server sent under the old window (32 MiB, lib/http2.c
 * HTTP2_HUGE_WINDOW_SIZE) arrives anyway and waits in the transfer's
 * pause buffer (up to 64 MiB): a stream limited to 8 MB/s raised RSS by
 * 50 MB. libcurl's own limit (CURLOPT_MAX_RECV_SPEED_LARGE) is worse
 * there: a rate-limited transfer is not read, so once its receive buffer
 * is full on_data_chunk_recv returns NGHTTP2_ERR_PAUSE and the whole
 * connection stops until its next turn; an unlimited 8 MiB stream on it
 * finished only after the limited 64 MiB one (RateLimitHTTP2Tests). So a
 * transfer with a limit of its own at setup goes over HTTP/1.1 (HTTP/2 is
 * only ever preferred), on a connection of its own: curl 7.88 never puts
 * a 1.1 transfer on an h2 connection (url.c). A pause there stops reading
 * the socket, and libcurl holds at most the one read it handed us. What
 * remains: a limit set while an HTTP/2 stream already runs, and the
 * loop-wide limit, still pause multiplexed streams.
 *
 * Everything runs on the loop thread.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* Bytes a bucket may hold: 100 ms of its rate, at least 16 KiB. */
static double burst_of(int64_t rate)
{
  double burst = (double)rate / 10.0;
  return burst < 16384.0 ? 16384.0 : burst;
}

static void refill(struct cti_bucket *b, int64_t rate, double now)
{
  if(rate <= 0) {
    b->tokens = 0;
    b->last = 0;
    return;
  }
  if(b->last <= 0) {
    b->tokens = burst_of(rate);   /* a fresh bucket starts full */
  }
  else {
    b->tokens += (now - b->last) * (double)rate;
    if(b->tokens > burst_of(rate))
      b->tokens = burst_of(rate);
  }
  b->last = now;
}

static int64_t task_rate(struct cti_transfer *t, int dir)
{
  return dir == CTI_RECV ? t->opts.max_recv_speed : t->opts.max_send_speed;
}

long cti_rate_http_version(struct cti_transfer *t, long wanted)
{
  if(t->opts.max_recv_speed <= 0 && t->opts.max_send_speed <= 0 &&
     !(t->flags & CT_FLAG_CONSUMER_PACED))
    return wanted;
  if(wanted == CURL_HTTP_VERSION_1_0)
    return wanted;
  return CURL_HTTP_VERSION_1_1;   /* a connection of its own */
}

static int64_t loop_rate(struct ct_loop *loop, int dir)
{
  return dir == CTI_RECV ? loop->total_recv_limit : loop->total_send_limit;
}

ct_code cti_rate_open(struct ct_loop *loop)
{
  struct epoll_event ev;
  loop->rate_timerfd = timerfd_create(CLOCK_MONOTONIC,
                                      TFD_CLOEXEC | TFD_NONBLOCK);
  if(loop->rate_timerfd < 0)
    return cti_fd_exhausted(errno) ? CT_E_TOO_MANY_OPEN_FILES : CT_E_SYSTEM;
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.fd = loop->rate_timerfd;
  if(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->rate_timerfd, &ev) != 0)
    return CT_E_SYSTEM;
  return CT_OK;
}

void cti_rate_close(struct ct_loop *loop)
{
  if(loop->rate_timerfd >= 0)
    close(loop->rate_timerfd);
  loop->rate_timerfd = -1;
}

static void arm(struct ct_loop *loop, double now, double wait)
{
  struct itimerspec its;
  double deadline = now + wait;
  if(loop->rate_deadline > 0 && loop->rate_deadline <= deadline)
    return;           /* an earlier wake-up is already set */
  if(wait < 0.001)
    wait = 0.001;     /* zero would disarm the timer */
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)wait;
  its.it_value.tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9);
  if(timerfd_settime(loop->rate_timerfd, 0, &its, NULL) == 0)
    loop->rate_deadline = deadline;
}

int cti_rate_blocked(struct cti_transfer *t, int dir)
{
  struct ct_loop *loop = t->loop;
  int64_t own = task_rate(t, dir);
  int64_t shared = loop_rate(loop, dir);
  double now;
  double wait = 0;

  if(own <= 0 && shared <= 0)
    return 0;
  now = cti_now();
  refill(&t->bucket[dir], own, now);
  refill(&loop->total_bucket[dir], shared, now);
  if(own > 0 && t->bucket[dir].tokens < 0)
    wait = -t->bucket[dir].tokens / (double)own;
  if(shared > 0 && loop->total_bucket[dir].tokens < 0) {
    double w = -loop->total_bucket[dir].tokens / (double)shared;
    if(w > wait)
      wait = w;
  }
  if(wait <= 0)
    return 0;
  cti_transfer_pause(t, CT_PAUSE_RATE, 1, dir == CTI_RECV ?
                     "over the receive rate" : "over the send rate");
  arm(loop, now, wait);
  return 1;
}

void cti_rate_consume(struct cti_transfer *t, int dir, size_t len)
{
  if(task_rate(t, dir) > 0)
    t->bucket[dir].tokens -= (double)len;
  if(loop_rate(t->loop, dir) > 0)
    t->loop->total_bucket[dir].tokens -= (double)len;
}

void cti_rate_on_timer(struct ct_loop *loop)
{
  struct cti_transfer *t;
  uint64_t expirations;
  while(read(loop->rate_timerfd, &expirations, sizeof(expirations)) < 0 &&
        errno == EINTR)
    ;
  loop->rate_deadline = 0;
  /* Let every rate-paused transfer try again: its callback takes tokens
   * or pauses it once more (and re-arms the timer). Transfers paused by
   * the user or waiting for a disposition stay paused. */
  for(t = loop->all; t; t = t->next) {
    if(t->paused & CT_PAUSE_RATE)
      cti_transfer_pause(t, CT_PAUSE_RATE, 0, "rate timer");
  }
}

void cti_rate_note_held(struct cti_transfer *t, size_t len)
{
  curl_off_t raw = 0;
  int64_t held;
  if(task_rate(t, CTI_RECV) <= 0 && loop_rate(t->loop, CTI_RECV) <= 0 &&
     t->sink.kind != CT_SINK_STREAM)
    return;           /* nothing pauses it: nothing to measure (a stream
                         sink's consumer may: CT_PAUSE_CONSUMER) */
  /* Body bytes curl counted as received minus those passed on before this
   * chunk: what libcurl holds for us (this chunk included). Exact for an
   * identity-encoded body; a compressed one reads low. */
  if(curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &raw) != CURLE_OK)
    return;
  held = (int64_t)raw - t->body_decoded;
  if(held < (int64_t)len)
    held = (int64_t)len;
  if(held > __atomic_load_n(&t->counters->peak_held, __ATOMIC_RELAXED))
    __atomic_store_n(&t->counters->peak_held, held, __ATOMIC_RELAXED);
}
