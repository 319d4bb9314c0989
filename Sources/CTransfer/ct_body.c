/*
 * ct_body.c - the byte path of a response body: libcurl's write callback
 * appends to the sink and bumps relaxed atomic counters, never calling
 * into Swift unless the sink is a stream; limits and rate checks; and
 * throttled progress.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Whether the `len` bytes curl hands us now would take the body past its
 * limits; then the transfer fails with CT_E_TOO_LARGE before they are
 * stored, so memory and disk never hold more than the limit. */
static int over_limits(struct cti_transfer *t, size_t len)
{
  int64_t decoded = t->body_decoded + (int64_t)len;
  char text[160];

  if(t->opts.max_body_size > 0 &&
     decoded + t->resume_offset > t->opts.max_body_size) {
    snprintf(text, sizeof(text), "the response body is larger than the "
             "limit of %lld bytes", (long long)t->opts.max_body_size);
    cti_transfer_set_error(t, CT_E_TOO_LARGE, 0, text);
    return 1;
  }
  if(t->opts.max_decode_ratio > 0 && decoded > CTI_DECODE_RATIO_FLOOR) {
    /* curl counts body bytes as received, before content decoding; we
     * see them decoded. Without chunked encoding curl counts a read
     * before it decodes it; with it, after: allow one read of lag. */
    curl_off_t raw = 0;
    if(curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &raw) !=
       CURLE_OK || raw < 0)
      raw = 0;
    if(t->chunked)
      raw += (curl_off_t)t->recv_buffer;
    if(decoded / t->opts.max_decode_ratio > (int64_t)raw) {
      snprintf(text, sizeof(text), "the response body decodes to more "
               "than %lld bytes per byte received (%lld from %lld)",
               (long long)t->opts.max_decode_ratio, (long long)decoded,
               (long long)raw);
      cti_transfer_set_error(t, CT_E_TOO_LARGE, 0, text);
      return 1;
    }
  }
  t->body_decoded = decoded;
  return 0;
}

size_t cti_write_cb(char *data, size_t size, size_t nmemb, void *userp)
{
  struct cti_transfer *t = userp;
  size_t len = size * nmemb;
  ct_code rc;

  if(!cti_transfer_head_delivered(t))
    /* HTTP/1.0 or odd servers: no blank line seen */
    cti_transfer_deliver_head(t);
  if(t->local_code != CT_OK)
    return 0;              /* CURLE_WRITE_ERROR; local_code says why */
  if(t->paused & CT_PAUSE_FILE)
    /* The head's file work runs on the worker (ct_response.c); curl
     * keeps this chunk and hands it again after the unpause. */
    return CURL_WRITEFUNC_PAUSE;
  if(t->phase == CT_PHASE_DECIDING) {
    /* curl keeps this chunk and hands it again after the unpause. */
    cti_transfer_pause(t, CT_PAUSE_DISPOSITION, 1, "body before the answer");
    return CURL_WRITEFUNC_PAUSE;
  }
  if(t->paused & CT_PAUSE_USER)
    /* Suspended before libcurl started the request (curl 7.88 resets its
     * pause bits then): curl keeps the chunk until the resume. */
    return CURL_WRITEFUNC_PAUSE;
  if(t->paused & CT_PAUSE_CONSUMER)
    /* The owner's buffer is full: curl keeps this chunk, stops reading
     * the socket, and hands it again after ct_loop_consumer_ready(). */
    return CURL_WRITEFUNC_PAUSE;
  if(t->status >= 300 && t->status < 400 && cti_transfer_redirect_followed(t))
    return len;            /* body of a redirect we follow */
  cti_rate_note_held(t, len);
  if(cti_rate_blocked(t, CTI_RECV))
    return CURL_WRITEFUNC_PAUSE;   /* redelivered after the rate timer */
  if(over_limits(t, len))
    return 0;              /* CURLE_WRITE_ERROR; local_code says why */
  cti_rate_consume(t, CTI_RECV, len);
  if(t->sink.kind == CT_SINK_STREAM) {
    struct ct_callbacks *cb = &t->loop->config.callbacks;
    /* The chunk is taken either way; a full owner holds the next ones
     * (the check above). The owner may queue ct_loop_consumer_ready()
     * as soon as on_data returns, but commands run on this thread after
     * this callback, so the reason is always set before it is cleared. */
    if(cb->on_data && cb->on_data(t->ctx, data, len) == CT_DATA_PAUSE)
      cti_transfer_pause(t, CT_PAUSE_CONSUMER, 1, "consumer full");
  }
  else {
    rc = cti_sink_write(&t->sink, data, len);
    if(rc == CT_OK) {
      cti_checksum_update(t, data, len);
      rc = cti_journal_after_write(t);
    }
    if(rc != CT_OK) {
      cti_transfer_set_error(t, rc, t->sink.sys_errno, t->sink.failed ?
                             t->sink.failed :
                             "cannot write the response body");
      return 0;
    }
  }
  __atomic_add_fetch(&t->counters->bytes_received, (int64_t)len,
                     __ATOMIC_RELAXED);
  return len;
}

void cti_transfer_emit_progress(struct cti_transfer *t, int force)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  struct ct_progress p;
  double now;
  if(!cb->on_progress)
    return;
  now = cti_now();
  if(!force &&
     (now - t->last_progress) * 1000.0 < (double)t->progress_interval_ms)
    return;
  t->last_progress = now;
  p.bytes_sent = ct_counters_sent(t->counters);
  p.bytes_expected_to_send = ct_counters_expected_to_send(t->counters);
  p.bytes_received = ct_counters_received(t->counters);
  p.bytes_expected_to_receive = ct_counters_expected_to_receive(t->counters);
  p.elapsed = now - t->submit_time;
  cb->on_progress(t->ctx, &p);
}

/* Only for transfers that report progress: the idle timeout is the loop's
 * sweep (ct_timeout.c). */
int cti_xferinfo_cb(void *userp, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
  struct cti_transfer *t = userp;
  (void)dltotal;
  (void)dlnow;
  cti_counter_store(&t->counters->bytes_sent, ulnow);
  if(ultotal > 0)
    cti_counter_store(&t->counters->bytes_expected_to_send, ultotal);
  cti_transfer_emit_progress(t, 0);
  return 0;
}
