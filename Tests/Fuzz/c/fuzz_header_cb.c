/*
 * fuzz_header_cb.c - the engine's own response-header parsing: libcurl's
 * header callback in ct_response.c (status line, Content-Length,
 * Content-Range, ETag, Last-Modified, the raw block handed to Swift).
 * This file includes ct_response.c (for its static helpers) and drives
 * cti_header_cb line by line as libcurl would, on a transfer with a
 * discard sink (no file is opened) and an easy handle that was never
 * performed, in the phase libcurl's callbacks run in (connecting).
 *
 * Input: one flag byte (bit 0 follow redirects, bit 1 a resume offset),
 * then header lines, each ending at '\n' (kept, as curl delivers them).
 *
 * Properties: the delivered block is NUL-terminated at its length and at
 * most 1 MiB; Content-Length is -1 or non-negative; ETag and
 * Last-Modified hold no CR or LF.
 */
#include "../../../Sources/CTransfer/ct_response.c"

#define REQUIRE(c) do { if(!(c)) { \
  fprintf(stderr, "invariant violated: %s (line %d)\n", #c, __LINE__); \
  abort(); } } while(0)

static void on_response(void *ctx, const struct ct_response_head *head)
{
  (void)ctx;
  REQUIRE(head->raw_headers);
  REQUIRE(head->raw_headers_length <= 1024 * 1024);
  REQUIRE(head->raw_headers[head->raw_headers_length] == 0);
  REQUIRE(head->content_length >= -1);
  REQUIRE(head->effective_url);
}

static void check_value(const char *v)
{
  if(v)
    REQUIRE(!strchr(v, '\r') && !strchr(v, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static struct ct_loop loop;
  struct cti_transfer *t;
  size_t start = 1;
  size_t i;

  if(size < 1)
    return 0;
  loop.config.callbacks.on_response = on_response;
  t = calloc(1, sizeof(*t));
  REQUIRE(t);
  t->loop = &loop;
  t->easy = curl_easy_init();
  REQUIRE(t->easy);
  t->url = "http://127.0.0.1/";
  t->counters = &t->own_counters;
  t->sink.kind = CT_SINK_DISCARD;
  t->phase = CT_PHASE_CONNECTING;      /* as if added to libcurl */
  t->range_start = -1;
  t->range_end = -1;
  t->content_length = -1;
  t->content_range_start = -1;
  if(data[0] & 1)
    t->flags |= CT_FLAG_FOLLOW_REDIRECTS;
  if(data[0] & 2)
    t->resume_offset = 100;
  for(i = 1; i <= size; i++) {
    if(i == size || data[i - 1] == '\n') {
      if(i > start || i == size) {
        size_t len = i - start;
        /* curl hands a private copy; so do we, for ASan to see overruns */
        char *line = malloc(len ? len : 1);
        size_t got;
        REQUIRE(line);
        memcpy(line, data + start, len);
        got = cti_header_cb(line, 1, len, t);
        free(line);
        REQUIRE(got == len || got == 0);
        check_value(t->etag);
        check_value(t->last_modified);
        REQUIRE(t->content_length >= -1);
        if(!got)
          break;
      }
      start = i;
    }
  }
  if(t->hdr)
    REQUIRE(t->hdr_len < t->hdr_cap && t->hdr[t->hdr_len] == 0);
  free(t->hdr);
  free(t->etag);
  free(t->last_modified);
  curl_easy_cleanup(t->easy);
  free(t);
  return 0;
}
