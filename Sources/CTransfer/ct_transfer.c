/*
 * ct_transfer.c - one transfer: its copy of the spec, its easy handle, and
 * the header, write, read and progress callbacks libcurl calls on the loop
 * thread. The byte path (write_cb) appends to the sink and bumps relaxed
 * atomic counters; it never calls into Swift unless the sink is a stream.
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

double cti_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void counter_store(int64_t *field, int64_t value)
{
  __atomic_store_n(field, value, __ATOMIC_RELAXED);
}

void ct_transfer_spec_init(struct ct_transfer_spec *spec)
{
  memset(spec, 0, sizeof(*spec));
  spec->body_length = -1;
  spec->range_end = -1;
  spec->flags = CT_FLAG_FOLLOW_REDIRECTS;
  spec->max_redirects = 16;
  spec->connect_timeout_ms = CTI_DEFAULT_CONNECT_TIMEOUT_MS;
  spec->max_decode_ratio = CT_DEFAULT_DECODE_RATIO;
}

static int has_crlf(const char *s)
{
  return strpbrk(s, "\r\n") != NULL;
}

static void set_local_error(struct cti_transfer *t, ct_code code, int err,
                            const char *message)
{
  if(t->local_code != CT_OK)
    return;            /* the first cause wins */
  t->local_code = code;
  t->local_errno = err;
  cti_copy_message(t->local_message, sizeof(t->local_message), message);
}

ct_code cti_transfer_create(struct ct_loop *loop,
                            const struct ct_transfer_spec *spec, void *ctx,
                            struct cti_transfer **out)
{
  struct cti_transfer *t;
  size_t i;

  *out = NULL;
  if(!spec->url || !*spec->url)
    return CT_E_INVALID_REQUEST;
  if(has_crlf(spec->url) || (spec->method && has_crlf(spec->method)))
    return CT_E_INVALID_REQUEST;
  for(i = 0; i < spec->header_count; i++) {
    const char *h = spec->headers ? spec->headers[i] : NULL;
    if(!h || has_crlf(h) || !strchr(h, ':'))
      return CT_E_INVALID_REQUEST;
  }
  if(spec->body_kind == CT_BODY_MEMORY && spec->body_length > 0 &&
     !spec->body_data)
    return CT_E_INVALID_ARGUMENT;
  if(spec->body_kind == CT_BODY_FILE && !spec->body_path)
    return CT_E_INVALID_ARGUMENT;
  if(spec->sink_kind == CT_SINK_FILE && !spec->sink_path &&
     !spec->sink_part_path)
    return CT_E_INVALID_ARGUMENT;
  /* A journal needs a file; a streamed digest needs the whole body. */
  if(spec->journal_path && spec->sink_kind != CT_SINK_FILE)
    return CT_E_INVALID_ARGUMENT;
  if(spec->expected_sha256 && (spec->range_end >= 0 || spec->range_start > 0))
    return CT_E_INVALID_ARGUMENT;
  for(i = 0; i < spec->resolve_count; i++) {
    const char *r = spec->resolve ? spec->resolve[i] : NULL;
    if(!r || has_crlf(r) || !strchr(r, ':'))
      return CT_E_INVALID_REQUEST;
  }

  t = calloc(1, sizeof(*t));
  if(!t)
    return CT_E_NO_MEMORY;
  t->loop = loop;
  t->ctx = ctx;
  t->flags = spec->flags;
  t->body_fd = -1;
  cti_sink_init(&t->sink);
  t->url = cti_strdup(spec->url);
  t->method = cti_strdup(spec->method);
  t->if_range = cti_strdup(spec->if_range);
  t->ca_file = cti_strdup(spec->ca_file);
  t->client_cert = cti_strdup(spec->client_cert);
  t->client_key = cti_strdup(spec->client_key);
  t->userpwd = cti_strdup(spec->user_password);
  t->body_path = cti_strdup(spec->body_path);
  t->spec = *spec;
  t->spec.url = NULL;
  t->spec.method = NULL;
  t->spec.headers = NULL;
  t->spec.body_data = NULL;
  t->spec.body_path = NULL;
  t->spec.sink_path = NULL;
  t->spec.sink_part_path = NULL;
  t->spec.if_range = NULL;
  t->spec.ca_file = NULL;
  t->spec.client_cert = NULL;
  t->spec.client_key = NULL;
  t->spec.user_password = NULL;
  t->spec.counters = NULL;
  t->spec.journal_path = NULL;
  t->spec.expected_sha256 = NULL;
  t->spec.resolve = NULL;
  if(cti_journal_create(t, spec) != CT_OK ||
     cti_checksum_create(t, spec->expected_sha256) != CT_OK)
    goto nomem;
  if(!t->url || (spec->method && !t->method))
    goto nomem;
  for(i = 0; i < spec->header_count; i++) {
    /* Proxy credentials go to proxies only (CURLOPT_PROXYHEADER): curl
     * strips a custom Authorization or Cookie header when it follows a
     * redirect to another scheme, host or port, but not this one. */
    int to_proxy = curl_strnequal(spec->headers[i], "Proxy-Authorization:",
                                  20);
    struct curl_slist **list = to_proxy ? &t->proxy_headers : &t->headers;
    struct curl_slist *n = curl_slist_append(*list, spec->headers[i]);
    if(!n)
      goto nomem;
    *list = n;
  }
  for(i = 0; i < spec->resolve_count; i++) {
    struct curl_slist *n = curl_slist_append(t->resolve, spec->resolve[i]);
    if(!n)
      goto nomem;
    t->resolve = n;
  }

  t->body_kind = spec->body_kind;
  t->body_mem = spec->body_data;
  t->body_length = spec->body_kind == CT_BODY_NONE ? 0 : spec->body_length;
  t->body_offset = spec->body_offset > 0 ? spec->body_offset : 0;

  t->sink.kind = spec->sink_kind;
  t->sink.buf_cap = spec->sink_buffer_size ? spec->sink_buffer_size :
    CTI_DEFAULT_SINK_BUFFER;
  if(spec->sink_kind == CT_SINK_FILE) {
    t->sink.path = cti_strdup(spec->sink_path);
    if(spec->sink_part_path)
      t->sink.part_path = cti_strdup(spec->sink_part_path);
    else if(asprintf(&t->sink.part_path, "%s.part", spec->sink_path) < 0)
      t->sink.part_path = NULL;
    if(!t->sink.part_path || (spec->sink_path && !t->sink.path))
      goto nomem;
  }
  t->resume_offset = spec->resume_offset > 0 ? spec->resume_offset : 0;
  /* A segment is [range_start, range_end]; anything else is a whole body. */
  if(spec->range_end >= 0 || spec->range_start > 0) {
    t->range_start = spec->range_start > 0 ? spec->range_start : 0;
    t->range_end = spec->range_end;
  }
  else {
    t->range_start = -1;
    t->range_end = -1;
  }
  t->content_length = -1;
  t->content_range_start = -1;
  t->progress_interval_ms = spec->progress_interval_ms ?
    spec->progress_interval_ms : CTI_DEFAULT_PROGRESS_MS;

  t->counters = spec->counters ? spec->counters : &t->own_counters;
  counter_store(&t->counters->bytes_sent, 0);
  counter_store(&t->counters->bytes_received, t->resume_offset);
  counter_store(&t->counters->bytes_expected_to_send, t->body_length);
  counter_store(&t->counters->bytes_expected_to_receive, -1);
  t->submit_time = cti_now();
  /* The easy handle comes from the loop's pool when the transfer starts. */
  *out = t;
  return CT_OK;
nomem:
  cti_transfer_free(t);
  return CT_E_NO_MEMORY;
}

/* --- response head --------------------------------------------------- */

static int hdr_append(struct cti_transfer *t, const char *data, size_t len)
{
  if(t->hdr_len + len + 1 > t->hdr_cap) {
    size_t cap = t->hdr_cap ? t->hdr_cap : 1024;
    char *grown;
    while(cap < t->hdr_len + len + 1)
      cap *= 2;
    /* Headers are bounded by libcurl (100 KiB per header, 300 KiB in
     * total in 7.88 is CURL_MAX_HTTP_HEADER per line); we bound the block
     * ourselves so a hostile server cannot grow it without limit. */
    if(cap > 1024 * 1024)
      return 0;
    grown = realloc(t->hdr, cap);
    if(!grown)
      return 0;
    t->hdr = grown;
    t->hdr_cap = cap;
  }
  memcpy(t->hdr + t->hdr_len, data, len);
  t->hdr_len += len;
  t->hdr[t->hdr_len] = 0;
  return 1;
}

/* Value of header line `line` (length len) if its name is `name`. */
static int header_value(const char *line, size_t len, const char *name,
                        char *out, size_t cap)
{
  size_t nlen = strlen(name);
  size_t start;
  size_t end = len;
  if(len <= nlen || strncasecmp(line, name, nlen) != 0 || line[nlen] != ':')
    return 0;
  start = nlen + 1;
  while(start < len && (line[start] == ' ' || line[start] == '\t'))
    start++;
  while(end > start && isspace((unsigned char)line[end - 1]))
    end--;
  if(end - start >= cap)
    return 0;
  memcpy(out, line + start, end - start);
  out[end - start] = 0;
  return 1;
}

static int is_redirect_to_follow(struct cti_transfer *t)
{
  char *location = NULL;
  if(!(t->flags & CT_FLAG_FOLLOW_REDIRECTS))
    return 0;
  if(t->status != 301 && t->status != 302 && t->status != 303 &&
     t->status != 307 && t->status != 308)
    return 0;
  /* CURLINFO_REDIRECT_URL is only filled when curl does NOT follow
   * (libcurl 7.88 sets it for "fake" follows only), so look for the
   * Location header of this hop ourselves; curl follows exactly those. */
  if(curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &location) ==
     CURLE_OK && location)
    return 1;
  if(!t->hdr || (strncasecmp(t->hdr, "Location:", 9) != 0 &&
                 !strcasestr(t->hdr, "\nLocation:")))
    return 0;
  /* When the maximum is reached curl stops and reports an error: that hop
   * is not final either, the error is. */
  return 1;
}

static void deliver_head(struct cti_transfer *t)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  struct ct_response_head head;
  char *url = NULL;
  long version = 0;
  int64_t expected = -1;

  t->head_delivered = 1;
  curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url);
  curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);

  if(t->resume_offset > 0) {
    if(t->status == 206 && t->content_range_start == t->resume_offset) {
      /* continues the part file */
    }
    else if(t->status == 200) {
      /* The server ignored Range, or If-Range said the file changed:
       * start again from zero, cleanly. */
      t->resume_offset = 0;
      counter_store(&t->counters->bytes_received, 0);
    }
  }
  if(t->status == 206 && (t->resume_offset > 0 || t->range_start >= 0)) {
    /* Bytes at the wrong offset would corrupt the file silently. */
    int64_t want = (t->range_start >= 0 ? t->range_start : 0) +
      t->resume_offset;
    if(t->content_range_start != want)
      set_local_error(t, CT_E_BAD_RESPONSE, 0,
                      "the server sent another range than asked for");
  }
  if(t->range_start >= 0 && t->range_end >= 0 && t->status == 200 &&
     (t->flags & CT_FLAG_FAIL_ON_RANGE_IGNORED)) {
    set_local_error(t, CT_E_BAD_RESPONSE, 0, "server ignored the Range");
  }
  if(t->content_length >= 0)
    expected = t->content_length + t->resume_offset;
  if(t->flags & CT_FLAG_NO_BODY)
    expected = 0;
  counter_store(&t->counters->bytes_expected_to_receive, expected);
  if(t->spec.max_body_size > 0 && expected > t->spec.max_body_size) {
    /* Refused before the sink is opened: nothing is stored (curl's
     * --max-filesize does the same with the announced length). */
    char text[128];
    snprintf(text, sizeof(text), "the announced body (%lld bytes) is "
             "larger than the limit of %lld bytes", (long long)expected,
             (long long)t->spec.max_body_size);
    set_local_error(t, CT_E_TOO_LARGE, 0, text);
  }

  if(t->sink.kind == CT_SINK_FILE && t->status < 300 &&
     t->local_code == CT_OK) {
    int64_t offset = t->resume_offset;
    int truncate_file = 1;
    ct_code rc;
    if(t->range_start >= 0) {
      /* A resumed segment continues inside its range. */
      offset = t->range_start + t->resume_offset;
      truncate_file = 0;
    }
    else if(offset > 0)
      truncate_file = CTI_SINK_TRIM;
    rc = cti_sink_open_file(&t->sink, offset, truncate_file);
    if(rc != CT_OK)
      set_local_error(t, rc, t->sink.sys_errno,
                      "cannot open the destination file");
    else if(offset == 0 && t->resume_offset == 0 && t->range_start < 0) {
      if(!(t->flags & CT_FLAG_NO_PREALLOCATE))
        cti_sink_preallocate(&t->sink, expected);
    }
    if(t->local_code == CT_OK && cti_checksum_on_head(t) == CT_OK)
      (void)cti_journal_on_head(t);   /* failures set local_code */
  }
  else if(t->sink.kind == CT_SINK_FILE && t->local_code == CT_OK) {
    /* An error page still goes to a file, as with URLSession: open it
     * fresh so a resume offset never mixes it with the partial body. */
    if(cti_sink_open_file(&t->sink, 0, 1) != CT_OK)
      set_local_error(t, CT_E_SINK_IO, t->sink.sys_errno,
                      "cannot open the destination file");
    t->resume_offset = 0;
    counter_store(&t->counters->bytes_received, 0);
  }
  if(t->sink.kind == CT_SINK_MEMORY && t->content_length > 0 &&
     t->local_code == CT_OK)
    cti_sink_reserve_memory(&t->sink, t->content_length);

  if(t->flags & CT_FLAG_AWAIT_DISPOSITION)
    t->awaiting_disposition = 1;
  if(!cb->on_response)
    return;
  head.status = t->status;
  head.http_version = version == CURL_HTTP_VERSION_2_0 ? 20 :
    version == CURL_HTTP_VERSION_1_0 ? 10 :
    version == CURL_HTTP_VERSION_3 ? 30 : 11;
  head.content_length = t->content_length;
  head.resume_offset = t->resume_offset;
  head.effective_url = url ? url : t->url;
  head.raw_headers = t->hdr ? t->hdr : "";
  head.raw_headers_length = t->hdr_len;
  cb->on_response(t->ctx, &head);
}

/* The three-digit status after "HTTP/x " in `p` (n bytes, not
 * NUL-terminated: curl's header lines are not), else 0. */
static long status_code(const char *p, size_t n)
{
  long v = 0;
  size_t i;
  for(i = 0; i < n && i < 3 && p[i] >= '0' && p[i] <= '9'; i++)
    v = v * 10 + (p[i] - '0');
  if(i != 3 || (n > 3 && p[3] >= '0' && p[3] <= '9'))
    return 0;
  return v;
}

static size_t header_cb(char *data, size_t size, size_t nitems, void *userp)
{
  struct cti_transfer *t = userp;
  size_t len = size * nitems;
  char value[512];

  if(len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
    /* A new response (after 1xx, a redirect or an auth round): start
     * its head afresh. */
    const char *sp = memchr(data, ' ', len);
    t->hdr_len = 0;
    if(t->hdr)
      t->hdr[0] = 0;       /* no stale line of the previous head */
    t->status = sp ? status_code(sp + 1, len - (size_t)(sp + 1 - data)) : 0;
    t->head_open = 1;
    t->content_length = -1;
    t->content_range_start = -1;
    t->body_decoded = 0;
    t->chunked = 0;
    free(t->etag);
    free(t->last_modified);
    t->etag = NULL;
    t->last_modified = NULL;
    return len;
  }
  if(len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
    /* End of this head. Deliver it if it is the final response. */
    t->head_open = 0;
    if(t->status >= 100 && t->status < 200)
      return len;
    if(is_redirect_to_follow(t))
      return len;
    if(!t->head_delivered)
      deliver_head(t);
    return len;
  }
  if(!hdr_append(t, data, len)) {
    set_local_error(t, CT_E_BAD_RESPONSE, 0, "response headers too large");
    return 0;
  }
  if(header_value(data, len, "Content-Length", value, sizeof(value))) {
    char *end = NULL;
    long long n = strtoll(value, &end, 10);
    if(end && *end == 0 && n >= 0)
      t->content_length = n;
  }
  else if(header_value(data, len, "Content-Range", value, sizeof(value))) {
    /* "bytes 100-199/1000" */
    if(strncasecmp(value, "bytes ", 6) == 0)
      t->content_range_start = strtoll(value + 6, NULL, 10);
  }
  else if(header_value(data, len, "Transfer-Encoding", value,
                       sizeof(value))) {
    if(strcasestr(value, "chunked"))
      t->chunked = 1;
  }
  else if(header_value(data, len, "ETag", value, sizeof(value))) {
    /* A validator goes back in If-Range and the journal: one with a CR
     * or LF (a bare CR survives curl's line split) is no validator. */
    free(t->etag);
    t->etag = strpbrk(value, "\r\n") ? NULL : strdup(value);
  }
  else if(header_value(data, len, "Last-Modified", value, sizeof(value))) {
    free(t->last_modified);
    t->last_modified = strpbrk(value, "\r\n") ? NULL : strdup(value);
  }
  return len;
}

/* --- body ------------------------------------------------------------ */

/* Whether the `len` bytes curl hands us now would take the body past its
 * limits; then the transfer fails with CT_E_TOO_LARGE before they are
 * stored, so memory and disk never hold more than the limit. */
static int over_limits(struct cti_transfer *t, size_t len)
{
  int64_t decoded = t->body_decoded + (int64_t)len;
  char text[160];

  if(t->spec.max_body_size > 0 &&
     decoded + t->resume_offset > t->spec.max_body_size) {
    snprintf(text, sizeof(text), "the response body is larger than the "
             "limit of %lld bytes", (long long)t->spec.max_body_size);
    set_local_error(t, CT_E_TOO_LARGE, 0, text);
    return 1;
  }
  if(t->spec.max_decode_ratio > 0 && decoded > CTI_DECODE_RATIO_FLOOR) {
    /* curl counts body bytes as received, before content decoding; we
     * see them decoded. Without chunked encoding curl counts a read
     * before it decodes it; with it, after: allow one read of lag. */
    curl_off_t raw = 0;
    if(curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &raw) !=
       CURLE_OK || raw < 0)
      raw = 0;
    if(t->chunked)
      raw += (curl_off_t)t->recv_buffer;
    if(decoded / t->spec.max_decode_ratio > (int64_t)raw) {
      snprintf(text, sizeof(text), "the response body decodes to more "
               "than %lld bytes per byte received (%lld from %lld)",
               (long long)t->spec.max_decode_ratio, (long long)decoded,
               (long long)raw);
      set_local_error(t, CT_E_TOO_LARGE, 0, text);
      return 1;
    }
  }
  t->body_decoded = decoded;
  return 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userp)
{
  struct cti_transfer *t = userp;
  size_t len = size * nmemb;
  ct_code rc;

  if(!t->head_delivered)
    deliver_head(t);       /* HTTP/1.0 or odd servers: no blank line seen */
  if(t->local_code != CT_OK)
    return 0;              /* CURLE_WRITE_ERROR; local_code says why */
  if(t->awaiting_disposition) {
    /* curl keeps this chunk and hands it again after the unpause. */
    t->paused_for_disposition = 1;
    return CURL_WRITEFUNC_PAUSE;
  }
  if(t->status >= 300 && t->status < 400 && is_redirect_to_follow(t))
    return len;            /* body of a redirect we follow */
  cti_rate_note_held(t, len);
  if(cti_rate_blocked(t, CTI_RECV))
    return CURL_WRITEFUNC_PAUSE;   /* redelivered after the rate timer */
  if(over_limits(t, len))
    return 0;              /* CURLE_WRITE_ERROR; local_code says why */
  cti_rate_consume(t, CTI_RECV, len);
  if(t->sink.kind == CT_SINK_STREAM) {
    struct ct_callbacks *cb = &t->loop->config.callbacks;
    if(cb->on_data)
      cb->on_data(t->ctx, data, len);
  }
  else {
    rc = cti_sink_write(&t->sink, data, len);
    if(rc == CT_OK) {
      cti_checksum_update(t, data, len);
      rc = cti_journal_after_write(t);
    }
    if(rc != CT_OK) {
      set_local_error(t, rc, t->sink.sys_errno, t->sink.failed ?
                      t->sink.failed : "cannot write the response body");
      return 0;
    }
  }
  __atomic_add_fetch(&t->counters->bytes_received, (int64_t)len,
                     __ATOMIC_RELAXED);
  return len;
}

static size_t read_cb(char *buffer, size_t size, size_t nitems, void *userp)
{
  struct cti_transfer *t = userp;
  size_t cap = size * nitems;
  size_t want = cap;
  ssize_t n;

  if(cti_rate_blocked(t, CTI_SEND))
    return CURL_READFUNC_PAUSE;
  if(t->body_kind == CT_BODY_PULL) {
    struct ct_callbacks *cb = &t->loop->config.callbacks;
    int64_t got = cb->on_read ? cb->on_read(t->ctx, buffer, cap) : -1;
    if(got == CT_READ_PAUSE) {
      /* Nothing buffered yet: wait for ct_loop_body_ready(). */
      t->body_waiting = 1;
      return CURL_READFUNC_PAUSE;
    }
    if(got < 0 || (size_t)got > cap) {
      set_local_error(t, CT_E_SOURCE_IO, 0, "the body stream failed");
      return CURL_READFUNC_ABORT;
    }
    t->body_pos += got;
    cti_rate_consume(t, CTI_SEND, (size_t)got);
    return (size_t)got;
  }
  if(t->body_kind != CT_BODY_FILE)
    return 0;
  if(t->body_length >= 0 && (int64_t)want > t->body_length - t->body_pos)
    want = (size_t)(t->body_length - t->body_pos);
  if(!want)
    return 0;
  for(;;) {
    n = pread(t->body_fd, buffer, want, (off_t)(t->body_offset + t->body_pos));
    if(n < 0 && errno == EINTR)
      continue;
    break;
  }
  if(n < 0) {
    set_local_error(t, CT_E_SOURCE_IO, errno, "cannot read the body file");
    return CURL_READFUNC_ABORT;
  }
  if(n == 0 && t->body_length >= 0 && t->body_pos < t->body_length) {
    /* The file shrank under us: the announced length cannot be met. */
    set_local_error(t, CT_E_SOURCE_IO, 0, "the body file shrank");
    return CURL_READFUNC_ABORT;
  }
  t->body_pos += n;
  cti_rate_consume(t, CTI_SEND, (size_t)n);
  return (size_t)n;
}

static int seek_cb(void *userp, curl_off_t offset, int origin)
{
  struct cti_transfer *t = userp;
  if(origin != SEEK_SET)
    return CURL_SEEKFUNC_CANTSEEK;
  if(t->body_kind == CT_BODY_FILE) {
    t->body_pos = offset;
    return CURL_SEEKFUNC_OK;
  }
  if(t->body_kind == CT_BODY_PULL && offset == 0) {
    struct ct_callbacks *cb = &t->loop->config.callbacks;
    if(cb->on_rewind && cb->on_rewind(t->ctx) == 0) {
      t->body_pos = 0;
      return CURL_SEEKFUNC_OK;
    }
    /* curl only says "seek callback returned error"; say what it means */
    set_local_error(t, CT_E_SOURCE_IO, 0, "the request body is a stream that "
                    "cannot be read again, and a redirect or an "
                    "authentication retry needs to send the body again");
  }
  return CURL_SEEKFUNC_CANTSEEK;
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

static int xferinfo_cb(void *userp, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
  struct cti_transfer *t = userp;
  (void)dltotal;
  (void)dlnow;
  counter_store(&t->counters->bytes_sent, ulnow);
  if(ultotal > 0)
    counter_store(&t->counters->bytes_expected_to_send, ultotal);
  cti_transfer_emit_progress(t, 0);
  return 0;
}

static uint64_t hash_string(const char *s);

static CURLcode ssl_ctx_cb(CURL *easy, void *ssl_ctx, void *userp)
{
  struct cti_transfer *t = userp;
  return (CURLcode)cti_tls_configure_ctx(t->loop->tls, ssl_ctx, easy,
                                         t->ca_file,
                                         (t->flags & CT_FLAG_INSECURE) != 0,
                                         &t->verdict);
}

/* --- setup ----------------------------------------------------------- */

ct_code cti_transfer_set_trust_marker(struct cti_transfer *t)
{
  char marker[96];

  snprintf(marker, sizeof(marker), "ct-trust:%llu:%d:%016llx",
           (unsigned long long)t->loop->trust_generation,
           (t->flags & CT_FLAG_INSECURE) ? 1 : 0,
           (unsigned long long)hash_string(t->ca_file));
  if(curl_easy_setopt(t->easy, CURLOPT_CAINFO, marker) != CURLE_OK)
    return CT_E_NO_MEMORY;
  t->trust_generation = t->loop->trust_generation;
  return CT_OK;
}

#define SETOPT(opt, val) do {                                   \
    if((sc = curl_easy_setopt(e, opt, val)) != CURLE_OK) goto badopt; \
  } while(0)

ct_code cti_transfer_setup(struct cti_transfer *t)
{
  CURL *e = t->easy;
  CURLcode sc = CURLE_OK;
  long httpver;
  int has_body = t->body_kind != CT_BODY_NONE;
  int big_sink = t->sink.kind == CT_SINK_FILE ||
    t->sink.kind == CT_SINK_DISCARD;

  SETOPT(CURLOPT_PRIVATE, t);
  SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
  SETOPT(CURLOPT_NOSIGNAL, 1L);
  SETOPT(CURLOPT_URL, t->url);
  SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
  SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  SETOPT(CURLOPT_SHARE, t->loop->share);
  SETOPT(CURLOPT_WRITEFUNCTION, write_cb);
  SETOPT(CURLOPT_WRITEDATA, t);
  SETOPT(CURLOPT_HEADERFUNCTION, header_cb);
  SETOPT(CURLOPT_HEADERDATA, t);
  SETOPT(CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
  SETOPT(CURLOPT_XFERINFODATA, t);
  SETOPT(CURLOPT_NOPROGRESS, 0L);
  t->recv_buffer = CURL_MAX_WRITE_SIZE;
  if(big_sink) {
    SETOPT(CURLOPT_BUFFERSIZE, 512L * 1024L);
    t->recv_buffer = 512u * 1024u;
  }
  if(t->headers)
    SETOPT(CURLOPT_HTTPHEADER, t->headers);
  if(t->resolve)
    SETOPT(CURLOPT_RESOLVE, t->resolve);
  if(t->proxy_headers) {
    SETOPT(CURLOPT_PROXYHEADER, t->proxy_headers);
    SETOPT(CURLOPT_HEADEROPT, (long)CURLHEADER_SEPARATE);
  }

  if(t->flags & CT_FLAG_FOLLOW_REDIRECTS) {
    SETOPT(CURLOPT_FOLLOWLOCATION, 1L);
    SETOPT(CURLOPT_MAXREDIRS, 16L);
  }
  if(!(t->flags & CT_FLAG_NO_DECOMPRESS) && t->resume_offset == 0 &&
     t->range_start < 0)
    SETOPT(CURLOPT_ACCEPT_ENCODING, "");

  /* Method and body. */
  if(t->flags & CT_FLAG_NO_BODY)
    SETOPT(CURLOPT_NOBODY, 1L);
  if(has_body) {
    if(t->body_kind == CT_BODY_FILE) {
      t->body_fd = open(t->body_path, O_RDONLY | O_CLOEXEC);
      if(t->body_fd < 0) {
        set_local_error(t, CT_E_INVALID_REQUEST, errno,
                        "cannot open the body file");
        return CT_E_INVALID_REQUEST;
      }
      if(t->body_length < 0) {
        off_t end = lseek(t->body_fd, 0, SEEK_END);
        if(end >= 0 && end >= t->body_offset)
          t->body_length = end - t->body_offset;
      }
      (void)posix_fadvise(t->body_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    counter_store(&t->counters->bytes_expected_to_send, t->body_length);
    SETOPT(CURLOPT_POST, 1L);
    if(t->body_kind == CT_BODY_MEMORY) {
      /* Borrowed, not copied: the owner keeps it alive until finish. */
      SETOPT(CURLOPT_POSTFIELDS, t->body_mem ? t->body_mem : "");
      SETOPT(CURLOPT_POSTFIELDSIZE_LARGE,
             (curl_off_t)(t->body_length > 0 ? t->body_length : 0));
    }
    else {
      SETOPT(CURLOPT_READFUNCTION, read_cb);
      SETOPT(CURLOPT_READDATA, t);
      SETOPT(CURLOPT_SEEKFUNCTION, seek_cb);
      SETOPT(CURLOPT_SEEKDATA, t);
      SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body_length);
      SETOPT(CURLOPT_UPLOAD_BUFFERSIZE, (long)CTI_FILE_READ_BLOCK);
    }
  }
  if(t->method) {
    if(strcmp(t->method, "HEAD") == 0)
      SETOPT(CURLOPT_NOBODY, 1L);
    else if(!(strcmp(t->method, "GET") == 0 && !has_body) &&
            !(strcmp(t->method, "POST") == 0 && has_body))
      SETOPT(CURLOPT_CUSTOMREQUEST, t->method);
  }

  /* Resume and segments. */
  if(t->range_start >= 0) {
    char range[64];
    if(t->range_end >= 0)
      snprintf(range, sizeof(range), "%lld-%lld",
               (long long)(t->range_start + t->resume_offset),
               (long long)t->range_end);
    else
      snprintf(range, sizeof(range), "%lld-",
               (long long)(t->range_start + t->resume_offset));
    SETOPT(CURLOPT_RANGE, range);
  }
  else if(t->resume_offset > 0) {
    char range[64];
    /* CURLOPT_RANGE, not RESUME_FROM: a 200 reply must restart cleanly
     * instead of failing with "server does not support byte ranges". */
    snprintf(range, sizeof(range), "%lld-", (long long)t->resume_offset);
    SETOPT(CURLOPT_RANGE, range);
  }
  if(t->range_start >= 0 || t->resume_offset > 0) {
    /* Segments too: every range must come from the same version. */
    if(t->if_range) {
      char *line = NULL;
      struct curl_slist *n;
      if(asprintf(&line, "If-Range: %s", t->if_range) < 0)
        return CT_E_NO_MEMORY;
      n = curl_slist_append(t->headers, line);
      free(line);
      if(!n)
        return CT_E_NO_MEMORY;
      t->headers = n;
      SETOPT(CURLOPT_HTTPHEADER, t->headers);
    }
  }

  /* Limits. */
  SETOPT(CURLOPT_MAXREDIRS, (long)(t->spec.max_redirects >= 0 ?
                                   t->spec.max_redirects : 16));
  SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)(t->spec.connect_timeout_ms > 0 ?
                                           t->spec.connect_timeout_ms :
                                           CTI_DEFAULT_CONNECT_TIMEOUT_MS));
  if(t->spec.timeout_ms > 0)
    SETOPT(CURLOPT_TIMEOUT_MS, (long)t->spec.timeout_ms);
  if(t->spec.low_speed_limit > 0 && t->spec.low_speed_time_s > 0) {
    SETOPT(CURLOPT_LOW_SPEED_LIMIT, (long)t->spec.low_speed_limit);
    SETOPT(CURLOPT_LOW_SPEED_TIME, (long)t->spec.low_speed_time_s);
  }
  /* max_recv_speed / max_send_speed: ct_ratelimit.c (see HTTP version). */
  if(t->userpwd) {
    SETOPT(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    SETOPT(CURLOPT_USERPWD, t->userpwd);
  }

  /* HTTP version: ALPN decides by default; h2c upgrades are never tried. */
  switch(t->spec.http_version) {
  case CT_HTTP_1_1:
    httpver = CURL_HTTP_VERSION_1_1;
    break;
  case CT_HTTP_1_0:
    httpver = CURL_HTTP_VERSION_1_0;
    break;
  default:
    httpver = CURL_HTTP_VERSION_2TLS;
    break;
  }
  httpver = cti_rate_http_version(t, httpver);   /* ct_ratelimit.c */
  SETOPT(CURLOPT_HTTP_VERSION, httpver);
  /* Wait for a connection that may multiplex only where one can: HTTP/2
   * comes from ALPN over TLS. On cleartext HTTP/1.1 PIPEWAIT would make
   * transfers to one host queue behind each other instead of opening
   * their own connections. */
  if(t->loop->config.multiplex && httpver != CURL_HTTP_VERSION_1_1 &&
     httpver != CURL_HTTP_VERSION_1_0 &&
     strncasecmp(t->url, "https:", 6) == 0)
    SETOPT(CURLOPT_PIPEWAIT, 1L);

  /* TLS: verification is ours (ct_tls.c), done in OpenSSL's verify step
   * with anchors loaded once per loop. libcurl must neither load the CA
   * bundle per connection (about 30 ms of CPU each) nor verify again. The
   * CAINFO marker is never loaded successfully; it only keeps connections
   * made under different trust settings (insecure, another CA file, an
   * older policy) from being reused by each other. */
  SETOPT(CURLOPT_SSL_VERIFYPEER, 0L);
  SETOPT(CURLOPT_SSL_VERIFYHOST, 0L);
  SETOPT(CURLOPT_CAPATH, NULL);
  if(cti_transfer_set_trust_marker(t) != CT_OK)
    goto badopt;
  /* Track the sockets: a policy change closes idle ones made before. */
  SETOPT(CURLOPT_OPENSOCKETFUNCTION, cti_tls_open_socket);
  SETOPT(CURLOPT_OPENSOCKETDATA, t);
  SETOPT(CURLOPT_CLOSESOCKETFUNCTION, cti_tls_close_socket);
  SETOPT(CURLOPT_CLOSESOCKETDATA, t->loop);
  SETOPT(CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_cb);
  SETOPT(CURLOPT_SSL_CTX_DATA, t);
  if(t->client_cert) {
    SETOPT(CURLOPT_SSLCERT, t->client_cert);
    SETOPT(CURLOPT_SSLCERTTYPE, "PEM");
  }
  if(t->client_key)
    SETOPT(CURLOPT_SSLKEY, t->client_key);
  return CT_OK;
badopt:
  if(sc == CURLE_OUT_OF_MEMORY) {
    set_local_error(t, CT_E_NO_MEMORY, 0, "out of memory setting an option");
    return CT_E_NO_MEMORY;
  }
  set_local_error(t, CT_E_INVALID_REQUEST, 0,
                  t->errbuf[0] ? t->errbuf : "libcurl refused an option");
  return CT_E_INVALID_REQUEST;
}

static uint64_t hash_string(const char *s)
{
  uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
  if(!s)
    return 0;
  while(*s) {
    h ^= (unsigned char)*s++;
    h *= 1099511628211ULL;
  }
  return h;
}

/* --- finish ---------------------------------------------------------- */

static void collect_metrics(struct cti_transfer *t, struct ct_metrics *m)
{
  CURL *e = t->easy;
  curl_off_t v = 0;
  long l = 0;
  char *s = NULL;

#define USEC(info, field) do {                                          \
    v = -1;                                                             \
    m->field = curl_easy_getinfo(e, info, &v) == CURLE_OK && v >= 0 ?   \
      (double)v / 1e6 : -1;                                             \
  } while(0)

  memset(m, 0, sizeof(*m));
  m->queued = t->add_time > 0 ? t->add_time - t->submit_time : 0;
  USEC(CURLINFO_NAMELOOKUP_TIME_T, name_lookup);
  USEC(CURLINFO_CONNECT_TIME_T, connect);
  USEC(CURLINFO_APPCONNECT_TIME_T, tls);
  USEC(CURLINFO_PRETRANSFER_TIME_T, request_sent);
  USEC(CURLINFO_STARTTRANSFER_TIME_T, first_byte);
  USEC(CURLINFO_TOTAL_TIME_T, total);
  USEC(CURLINFO_REDIRECT_TIME_T, redirect);
#undef USEC
  if(curl_easy_getinfo(e, CURLINFO_REDIRECT_COUNT, &l) == CURLE_OK)
    m->redirect_count = l;
  if(curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &l) == CURLE_OK)
    m->header_bytes = l;
  if(curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &l) == CURLE_OK)
    m->request_bytes = l;
  if(curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &v) == CURLE_OK)
    m->body_bytes_sent = v;
  if(curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &v) == CURLE_OK)
    m->body_bytes_received = v;
  if(curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &l) == CURLE_OK)
    m->http_version = l == CURL_HTTP_VERSION_2_0 ? 20 :
      l == CURL_HTTP_VERSION_1_0 ? 10 : l == CURL_HTTP_VERSION_3 ? 30 :
      l == CURL_HTTP_VERSION_1_1 ? 11 : 0;
  if(curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &l) == CURLE_OK)
    m->reused_connection = l == 0 && m->http_version != 0;
  if(curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &s) == CURLE_OK && s)
    cti_copy_message(m->remote_ip, sizeof(m->remote_ip), s);
  if(curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &l) == CURLE_OK)
    m->remote_port = (int32_t)l;
  if(curl_easy_getinfo(e, CURLINFO_LOCAL_IP, &s) == CURLE_OK && s)
    cti_copy_message(m->local_ip, sizeof(m->local_ip), s);
  if(curl_easy_getinfo(e, CURLINFO_LOCAL_PORT, &l) == CURLE_OK)
    m->local_port = (int32_t)l;
}

static ct_code classify(struct cti_transfer *t, CURLcode cc)
{
  struct cti_failure st;
  char *url = NULL;

  if(t->local_code != CT_OK)
    return t->local_code;
  if(cc == CURLE_OK)
    return CT_OK;
  if(t->verdict.reason != CT_TLS_OK) {
    switch(t->verdict.reason) {
    case CT_TLS_NO_PIN_MATCHED:
    case CT_TLS_POLICY_INVALID:
    case CT_TLS_REJECTED_BY_DELEGATE:
    case CT_TLS_CHALLENGE_TIMED_OUT:
      return CT_E_SERVER_TRUST;
    default:
      return CT_E_TLS;
    }
  }
  memset(&st, 0, sizeof(st));
  st.in_head = t->head_open;
  st.in_body = t->head_delivered;
  st.following_redirect = !t->head_open && is_redirect_to_follow(t);
  st.chunked = t->chunked;
  if(!t->easy ||
     curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK)
    url = t->url;
  st.effective_http = url && (!strncasecmp(url, "http://", 7) ||
                              !strncasecmp(url, "https://", 8));
  if(t->easy) {
    curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_COUNT, &st.redirects);
    curl_easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &st.os_errno);
  }
  return cti_code_from_curl_state(cc, &st);
}

/* Put a finished download in place: flush, fsync, rename, fsync the
 * folder. Blocks on the disk: runs on the worker (commit_run) unless the
 * worker is gone. */
static ct_code commit_file(struct cti_transfer *t, const char **message)
{
  ct_code code = CT_OK;
  int err;
  if(cti_checksum_deferred(t)) {
    code = cti_checksum_verify(t);  /* reads the part file back */
    if(code != CT_OK)
      return code;                  /* local_message says why */
  }
  if(t->sink.fd < 0 && t->local_code == CT_OK) {
    /* An empty body never opened the file: create it now so that a
     * successful download always leaves a (possibly empty) file. */
    code = cti_sink_open_file(&t->sink, 0, 1);
    if(code != CT_OK)
      *message = "cannot create the destination file";
  }
  if(code == CT_OK) {
    code = cti_sink_commit(&t->sink);
    if(code != CT_OK)     /* the step that failed: fsync, rename... */
      *message = t->sink.failed ? t->sink.failed :
        "cannot move the download into place";
  }
  if(code == CT_OK && t->sink.path &&
     (err = cti_fsync_parent(t->sink.path)) != 0) {
    /* Renamed, but the rename may not survive a crash: say so. */
    t->sink.sys_errno = err;
    t->sink.failed = "cannot fsync the destination folder";
    *message = t->sink.failed;
    code = CT_E_SINK_IO;
  }
  return code;
}

static void report(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message, int committed);

static void settle_file(struct cti_transfer *t, ct_code code);

static void commit_run(struct cti_job *job)       /* worker thread */
{
  struct cti_transfer *t = job->owner;
  t->commit_code = commit_file(t, &t->finish_message);
  /* The journal's last write (removal after the rename) waits on the
   * disk too: here, not on the loop. */
  settle_file(t, t->commit_code);
}

static void commit_done(struct cti_job *job)      /* loop thread */
{
  struct cti_transfer *t = job->owner;
  report(t, t->commit_code, t->finish_cc, t->finish_message, 1);
  t->committing = 0;
  cti_loop_retire(t->loop, t);     /* frees t, and job with it */
}

static void finish(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message)
{
  if(t->finished)
    return;
  t->finished = 1;
  if(code == CT_OK && t->checksum && !cti_checksum_deferred(t))
    code = cti_checksum_verify(t);
  if(code == CT_OK && t->sink.kind == CT_SINK_FILE) {
    /* The transfer stays "finishing" (in the table, its easy handle
     * kept for the result) until the commit job is done. */
    t->finish_cc = cc;
    t->finish_message = message;
    t->commit_job.run = commit_run;
    t->commit_job.done = commit_done;
    t->commit_job.owner = t;
    t->commit_job.gate_path = t->sink.path ? t->sink.path :
      t->sink.part_path;
    t->committing = 1;
    if(cti_worker_submit(t->loop->worker, &t->commit_job) == CT_OK)
      return;
    t->committing = 0;             /* no worker: commit here */
  }
  report(t, code, cc, message, 0);
}

/* After the outcome is known: remove or keep the part file, then write or
 * remove the journal. Blocks on the disk (worker after a commit). */
static void settle_file(struct cti_transfer *t, ct_code code)
{
  int keep = (t->flags & CT_FLAG_KEEP_PARTIAL) != 0;
  if(code != CT_OK && t->sink.kind == CT_SINK_FILE)
    cti_sink_abandon(&t->sink, keep && code != CT_E_CHECKSUM);
  if(t->journal)
    cti_journal_finish(t, code == CT_OK ? !t->sink.path :
                       keep && code != CT_E_CHECKSUM);
}

/* Build the result and call on_finish: after the commit, when there was
 * one (`committed`: the commit job ran commit_file and settle_file, and
 * `code` is its result). */
static void report(struct cti_transfer *t, ct_code code, CURLcode cc,
                   const char *message, int committed)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  struct ct_result r;
  char *url = NULL;
  char *redirect = NULL;

  memset(&r, 0, sizeof(r));
  if(t->easy && (t->added || t->add_time > 0))
    collect_metrics(t, &r.metrics);
  else
    r.metrics.queued = cti_now() - t->submit_time;

  if(!committed && code == CT_OK && t->sink.kind == CT_SINK_FILE)
    code = commit_file(t, &message);
  if(!committed)                   /* else the commit job settled it */
    settle_file(t, code);

  r.code = code;
  r.curl_code = (int32_t)cc;
  r.sys_errno = t->local_errno ? t->local_errno : t->sink.sys_errno;
  if(code == CT_OK)
    r.sys_errno = 0;
  r.tls_reason = t->verdict.reason;
  r.verify_error = t->verdict.verify_error;
  r.http_status = t->status;
  if(t->sink.kind == CT_SINK_FILE)
    r.bytes_on_disk = t->sink.durable;
  r.resume_offset = t->resume_offset;
  if(t->easy) {
    curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url);
    if(curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &redirect) ==
       CURLE_OK)
      r.redirect_url = redirect;
  }
  r.effective_url = url ? url : t->url;
  r.etag = t->etag;
  r.last_modified = t->last_modified;
  if(t->sink.kind == CT_SINK_FILE)
    r.file_path = (code == CT_OK && t->sink.path) ? t->sink.path :
      t->sink.part_path;
  if(code == CT_OK && t->sink.kind == CT_SINK_MEMORY && t->sink.mem_len) {
    r.body = t->sink.mem;       /* moved: the callee frees it */
    r.body_length = t->sink.mem_len;
    t->sink.mem = NULL;
    t->sink.mem_len = t->sink.mem_cap = 0;
  }
  if(code != CT_OK) {
    const char *text = message;
    if(t->local_code != CT_OK && t->local_message[0])
      text = t->local_message;
    else if(t->verdict.reason != CT_TLS_OK && t->verdict.message[0])
      text = t->verdict.message;
    else if(t->errbuf[0])
      text = t->errbuf;
    else if(cc != CURLE_OK && !text)
      text = curl_easy_strerror(cc);
    cti_copy_message(r.message, sizeof(r.message), text ? text : "");
    if(r.sys_errno && code == CT_E_SINK_IO) {
      /* "what failed: why", cut to fit; the errno is in sys_errno too. */
      size_t used = strlen(r.message);
      if(used + 3 < sizeof(r.message)) {
        memcpy(r.message + used, ": ", 3);
        cti_copy_message(r.message + used + 2, sizeof(r.message) - used - 2,
                         strerror(r.sys_errno));
      }
    }
  }
  cti_transfer_emit_progress(t, 1);
  if(cb->on_finish)
    cb->on_finish(t->ctx, &r);
  else
    free(r.body);    /* nobody to hand it to */
}

void cti_transfer_finish(struct cti_transfer *t, CURLcode cc)
{
  ct_code code = classify(t, cc);
  if(code == CT_E_BAD_RESPONSE && cc == CURLE_OUT_OF_MEMORY) {
    t->errbuf[0] = 0;   /* libcurl says "Out of memory": it is not */
    finish(t, code, cc, "a response header line is over libcurl's limit");
    return;
  }
  finish(t, code, cc, NULL);
}

void cti_transfer_finish_code(struct cti_transfer *t, ct_code code,
                              const char *message)
{
  if(t->local_code != CT_OK && code != CT_E_CANCELLED &&
     code != CT_E_SHUTDOWN)
    code = t->local_code;
  finish(t, code, CURLE_OK, message);
}

void cti_transfer_free(struct cti_transfer *t)
{
  if(!t)
    return;
  if(t->easy)
    curl_easy_cleanup(t->easy);
  if(t->body_fd >= 0)
    close(t->body_fd);
  curl_slist_free_all(t->headers);
  curl_slist_free_all(t->proxy_headers);
  curl_slist_free_all(t->resolve);
  cti_sink_free(&t->sink);
  free(t->url);
  free(t->method);
  free(t->if_range);
  free(t->ca_file);
  free(t->client_cert);
  free(t->client_key);
  free(t->userpwd);
  free(t->body_path);
  free(t->hdr);
  free(t->etag);
  free(t->last_modified);
  cti_journal_free(t->journal);
  cti_checksum_free(t->checksum);
  free(t);
}
