/*
 * ct_timeout.c - the idle timeout (no byte in either direction for a
 * while) and naming which timeout ended a transfer. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <stdio.h>
#include <time.h>
#include <string.h>

/* Why not CURLOPT_LOW_SPEED_LIMIT 1 alone: libcurl compares an average
 * over the last five seconds, in whole bytes per second, so one byte
 * every two seconds counts as "too slow" and a burst followed by silence
 * keeps the average up for seconds after the last byte. Here "idle" is
 * exact: the sum of bytes sent (request body), head bytes and body bytes
 * received did not change. Uploads count through ulnow, which libcurl
 * updates as it sends. A transfer we paused (rate limit, a slow stream
 * consumer, a pending disposition) is waiting on us, not on the peer: the
 * clock restarts when it resumes. */
/* The coarse monotonic clock: the last tick, read without the TSC. libcurl
 * calls the progress callback about ten times for a small request, and the
 * idle timeout is counted in seconds: a tick (at most 10 ms) is precision
 * enough, and the precise clock was 1-2 % of such a request's CPU. */
static double coarse_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cti_timeout_idle_expired(struct cti_transfer *t, curl_off_t dlnow,
                             curl_off_t ulnow)
{
  int64_t moved;
  double now;
  if(t->opts.idle_timeout_ms <= 0)
    return 0;
  now = coarse_now();
  moved = (int64_t)dlnow + (int64_t)ulnow + (int64_t)t->hdr_len;
  if(t->idle_since <= 0 || t->paused || moved != t->idle_bytes) {
    t->idle_since = now;
    t->idle_bytes = moved;
    return 0;
  }
  if((now - t->idle_since) * 1000.0 < (double)t->opts.idle_timeout_ms)
    return 0;
  {
    char text[160];
    snprintf(text, sizeof(text),
             "idle timeout (timeoutIntervalForRequest, %lld ms): no byte "
             "sent or received for %lld ms",
             (long long)t->opts.idle_timeout_ms,
             (long long)((now - t->idle_since) * 1000.0));
    cti_transfer_set_error(t, CT_E_TIMED_OUT, 0, text);
  }
  return 1;
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
