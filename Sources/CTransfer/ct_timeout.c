/*
 * ct_timeout.c - the idle timeout (no byte in either direction for a
 * while) and naming which timeout ended a transfer. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <stdio.h>
#include <time.h>
#include <string.h>

/* Why not CURLOPT_LOW_SPEED_LIMIT 1: libcurl compares an average over the
 * last five seconds, in whole bytes per second, so one byte every two
 * seconds counts as "too slow" and a burst followed by silence keeps the
 * average up for seconds after the last byte. Here "idle" is exact: the
 * sum of body bytes sent, head bytes and body bytes received did not
 * change. A transfer we paused (rate limit, a slow stream consumer, a
 * pending disposition) is waiting on us, not on the peer: its clock
 * restarts when it resumes.
 *
 * Why a sweep: checked from libcurl's progress callback, the idle clock
 * cost a callback and a clock read on each of the ten or so passes libcurl
 * makes over a small request, and a speed limit that made libcurl re-arm
 * a one-second timer on each of them (so that the callback ran while no
 * byte moved). The sweep looks at each transfer a few times per timeout
 * instead: a transfer fails between its timeout and its timeout plus one
 * period (an eighth of the timeout, 10 ms to 1 s). */

#define CTI_SWEEP_MIN_MS 10
#define CTI_SWEEP_MAX_MS 1000

static int64_t sweep_period_ms(int64_t idle_timeout_ms)
{
  int64_t period = idle_timeout_ms / 8;
  if(period < CTI_SWEEP_MIN_MS)
    return CTI_SWEEP_MIN_MS;
  return period > CTI_SWEEP_MAX_MS ? CTI_SWEEP_MAX_MS : period;
}

/* In curl (not held, not finishing) with an idle timeout. */
static int watched(const struct cti_transfer *t)
{
  return t->opts.idle_timeout_ms > 0 && cti_transfer_in_multi(t);
}

void cti_timeout_watch(struct ct_loop *loop, struct cti_transfer *t)
{
  int64_t due;
  if(t->opts.idle_timeout_ms <= 0)
    return;
  t->idle_since = t->add_time;
  t->idle_bytes = 0;
  due = (int64_t)(t->add_time * 1000.0) +
    sweep_period_ms(t->opts.idle_timeout_ms);
  if(loop->idle_sweep_ms < 0 || due < loop->idle_sweep_ms)
    loop->idle_sweep_ms = due;
}

/* Bytes moved so far: body bytes sent and received (libcurl's counters),
 * and head bytes (ours). */
static int64_t bytes_moved(struct cti_transfer *t)
{
  curl_off_t down = 0;
  curl_off_t up = 0;
  curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
  curl_easy_getinfo(t->easy, CURLINFO_SIZE_UPLOAD_T, &up);
  return (int64_t)down + (int64_t)up + (int64_t)t->hdr_len;
}

static void expire(struct ct_loop *loop, struct cti_transfer *t, double now)
{
  char text[160];
  snprintf(text, sizeof(text),
           "idle timeout (timeoutIntervalForRequest, %lld ms): no byte "
           "sent or received for %lld ms",
           (long long)t->opts.idle_timeout_ms,
           (long long)((now - t->idle_since) * 1000.0));
  cti_transfer_set_error(t, CT_E_TIMED_OUT, 0, text);
  cti_loop_fail(loop, t, CT_E_TIMED_OUT, text);
}

void cti_timeout_sweep(struct ct_loop *loop)
{
  double now = cti_now();
  int64_t period = -1;
  struct cti_transfer *t = loop->all;
  while(t) {
    /* Failing `t` unlinks it (and may free it): step first. */
    struct cti_transfer *next = t->next;
    if(watched(t)) {
      int64_t moved = bytes_moved(t);
      if(t->paused || moved != t->idle_bytes) {
        t->idle_since = now;
        t->idle_bytes = moved;
      }
      else if((now - t->idle_since) * 1000.0 >=
              (double)t->opts.idle_timeout_ms) {
        expire(loop, t, now);
        t = next;
        continue;
      }
      if(period < 0 || sweep_period_ms(t->opts.idle_timeout_ms) < period)
        period = sweep_period_ms(t->opts.idle_timeout_ms);
    }
    t = next;
  }
  loop->idle_sweep_ms = period < 0 ? -1 :
    (int64_t)(now * 1000.0) + period;
}

/* libcurl's texts (multi.c, speedcheck.c) say in which state the clock
 * ran out; CURLOPT_TIMEOUT_MS also runs while connecting, so a "Connection
 * timed out" is the total timeout when that one is the shorter. */
void cti_timeout_explain(struct cti_transfer *t)
{
  char text[CURL_ERROR_SIZE + 64];   /* cut to errbuf's size below */
  const char *which;
  int connect_first = t->opts.timeout_ms <= 0 ||
    t->opts.connect_timeout_ms <= 0 ||
    t->opts.connect_timeout_ms <= t->opts.timeout_ms;
  if(!strncmp(t->errbuf, "Operation too slow", 18))
    which = "speed limit (low_speed_limit for low_speed_time)";
  else if(!strncmp(t->errbuf, "Operation timed out", 19) || !connect_first)
    which = "total timeout (timeoutIntervalForResource)";
  else
    which = "connect timeout (connectTimeout)";
  snprintf(text, sizeof(text), "%s: %s", which,
           t->errbuf[0] ? t->errbuf : "timed out");
  cti_copy_message(t->errbuf, sizeof(t->errbuf), text);
}
