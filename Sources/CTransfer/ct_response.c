/*
 * ct_response.c - the response head: libcurl's header callback, parsing
 * the lines we need, telling a followed redirect from the final response,
 * and delivering that head (on_response) once, opening the sink for it.
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

int cti_transfer_redirect_followed(struct cti_transfer *t)
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

/* The file work of the final head, on the worker: the digest of the
 * prefix a resumed download already has, then the first journal. */
static void head_run(struct cti_job *job)            /* worker thread */
{
  struct cti_transfer *t = job->owner;
  struct cti_head_work *h = &t->head;
  h->code = CT_OK;
  h->journal_err = 0;
  if(h->prefix > 0)
    h->code = cti_checksum_hash_prefix(t, t->sink.part_path, h->prefix,
                                       &h->err, &h->failed);
  if(h->code == CT_OK && h->journal)
    h->journal_err = cti_journal_head_write(t->journal, h->durable,
                                            &h->journal_what);
}

/* Its results, on the loop thread: record failures (the transfer's first
 * local error) and whether the journal was written. */
static void head_record(struct cti_transfer *t)
{
  struct cti_head_work *h = &t->head;
  if(h->code != CT_OK)
    cti_transfer_set_error(t, h->code, h->err, h->failed);
  else if(h->journal)
    (void)cti_journal_head_done(t, h->durable, h->journal_err,
                                h->journal_what);
}

static void head_done(struct cti_job *job)           /* loop thread */
{
  struct cti_transfer *t = job->owner;
  if(t->phase >= CT_PHASE_FINISHING)
    return;    /* ended meanwhile: its file job, queued after this one,
                  settles */
  head_record(t);
  if(t->local_code != CT_OK) {
    cti_loop_fail(t->loop, t, t->local_code, NULL);
    return;
  }
  cti_transfer_pause(t, CT_PAUSE_FILE, 0, "head file work done");
  /* Let curl pass the held body on now, not at an unrelated event. */
  t->loop->run_timeout_now = 1;
}

/* The part file was opened for the final head: hand the file work the
 * head needs to the worker. Until it is done the write callback holds the
 * body (CT_PAUSE_FILE): the journal is written before any byte of this
 * response, and the prefix is hashed before the bytes after it. */
static void start_head_work(struct cti_transfer *t)
{
  struct cti_head_work *h = &t->head;
  int journal;
  memset(h, 0, sizeof(*h));
  h->prefix = cti_checksum_on_head(t);
  journal = cti_journal_on_head(t);
  if(journal < 0)
    return;                    /* no memory: local_code is set */
  h->journal = journal;
  h->durable = t->sink.durable;
  if(!h->prefix && !h->journal)
    return;
  h->job.run = head_run;
  h->job.done = head_done;
  h->job.owner = t;
  h->job.gate_path = t->sink.path ? t->sink.path : t->sink.part_path;
  h->job.gate = CTI_GATE_FILE;
  if(cti_worker_submit(t->loop->worker, &h->job) == CT_OK) {
    /* Set now, before any body byte: the write callback holds the body
     * while the reason is set, and the idle timeout does not run. */
    cti_transfer_pause(t, CT_PAUSE_FILE, 1, "head file work");
    return;
  }
  head_run(&h->job);           /* no worker (shutdown): here */
  head_record(t);
}

void cti_transfer_deliver_head(struct cti_transfer *t)
{
  struct ct_callbacks *cb = &t->loop->config.callbacks;
  struct ct_response_head head;
  char *url = NULL;
  long version = 0;
  int64_t expected = -1;

  cti_transfer_set_phase(t, (t->flags & CT_FLAG_AWAIT_DISPOSITION) ?
                         CT_PHASE_DECIDING : CT_PHASE_RECEIVING,
                         "final head");
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
      cti_counter_store(&t->counters->bytes_received, 0);
    }
  }
  if(t->status == 206 && (t->resume_offset > 0 || t->range_start >= 0)) {
    /* Bytes at the wrong offset would corrupt the file silently. */
    int64_t want = (t->range_start >= 0 ? t->range_start : 0) +
      t->resume_offset;
    if(t->content_range_start != want)
      cti_transfer_set_error(t, CT_E_BAD_RESPONSE, 0,
                             "the server sent another range than asked for");
  }
  if(t->range_start >= 0 && t->range_end >= 0 && t->status == 200 &&
     (t->flags & CT_FLAG_FAIL_ON_RANGE_IGNORED)) {
    cti_transfer_set_error(t, CT_E_BAD_RESPONSE, 0,
                           "server ignored the Range");
  }
  if(t->content_length >= 0)
    expected = t->content_length + t->resume_offset;
  if(t->flags & CT_FLAG_NO_BODY)
    expected = 0;
  cti_counter_store(&t->counters->bytes_expected_to_receive, expected);
  if(t->opts.max_body_size > 0 && expected > t->opts.max_body_size) {
    /* Refused before the sink is opened: nothing is stored (curl's
     * --max-filesize does the same with the announced length). */
    char text[128];
    snprintf(text, sizeof(text), "the announced body (%lld bytes) is "
             "larger than the limit of %lld bytes", (long long)expected,
             (long long)t->opts.max_body_size);
    cti_transfer_set_error(t, CT_E_TOO_LARGE, 0, text);
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
      cti_transfer_set_error(t, rc, t->sink.sys_errno,
                             "cannot open the destination file");
    else if(offset == 0 && t->resume_offset == 0 && t->range_start < 0) {
      if(!(t->flags & CT_FLAG_NO_PREALLOCATE))
        cti_sink_preallocate(&t->sink, expected);
    }
    if(t->local_code == CT_OK)
      start_head_work(t);
  }
  else if(t->sink.kind == CT_SINK_FILE && t->local_code == CT_OK) {
    /* An error page still goes to a file, as with URLSession: open it
     * fresh so a resume offset never mixes it with the partial body. */
    if(cti_sink_open_file(&t->sink, 0, 1) != CT_OK)
      cti_transfer_set_error(t, CT_E_SINK_IO, t->sink.sys_errno,
                             "cannot open the destination file");
    t->resume_offset = 0;
    cti_counter_store(&t->counters->bytes_received, 0);
  }
  if(t->sink.kind == CT_SINK_MEMORY && t->content_length > 0 &&
     t->local_code == CT_OK)
    cti_sink_reserve_memory(&t->sink, t->content_length);

  if(!cb->on_response)
    return;
  head.status = t->status;
  head.http_version = version == CURL_HTTP_VERSION_2_0 ? 20 :
    version == CURL_HTTP_VERSION_1_0 ? 10 :
    version == CURL_HTTP_VERSION_3 ? 30 : 11;
  head.content_length = t->content_length;
  head.resume_offset = t->resume_offset;
  head.effective_url = url ? url : t->url;
  head.url_unchanged = head.effective_url == t->url ||
    (t->url && strcmp(head.effective_url, t->url) == 0);
  head.raw_headers = t->hdr ? t->hdr : "";
  head.raw_headers_length = t->hdr_len;
  head.set_cookie_lines = t->set_cookies;
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

size_t cti_header_cb(char *data, size_t size, size_t nitems, void *userp)
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
    /* A status line after the final head (a broken server) changes no
     * phase: that head was delivered already. */
    if(t->phase == CT_PHASE_CONNECTING)
      cti_transfer_set_phase(t, CT_PHASE_HEAD, "status line");
    else if(t->phase == CT_PHASE_CHALLENGED)
      cti_transfer_set_phase(t, CT_PHASE_HEAD, "libcurl answered the 401");
    t->content_length = -1;
    t->content_range_start = -1;
    t->body_decoded = 0;
    t->chunked = 0;
    t->set_cookies = 0;
    free(t->etag);
    free(t->last_modified);
    t->etag = NULL;
    t->last_modified = NULL;
    return len;
  }
  if(len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
    /* End of this head. Deliver it if it is the final response. */
    if(t->status >= 100 && t->status < 200) {
      if(t->phase == CT_PHASE_HEAD)
        cti_transfer_set_phase(t, CT_PHASE_CONNECTING, "informational head");
      return len;
    }
    if(cti_transfer_redirect_followed(t)) {
      cti_transfer_report_redirect(t);
      if(t->phase == CT_PHASE_HEAD)
        cti_transfer_set_phase(t, CT_PHASE_CONNECTING, "redirect");
      return len;
    }
    if(t->status == 401 && t->userpwd && !cti_transfer_head_delivered(t)) {
      /* libcurl may answer this challenge itself (Digest, or Basic it
       * did not send up front); it decides only after this callback. The
       * 401 is final when its body (cti_write_cb) or the end of the
       * transfer (cti_transfer_finish) comes before another status line:
       * libcurl skips the body of a response it answers. */
      if(t->phase == CT_PHASE_HEAD)
        cti_transfer_set_phase(t, CT_PHASE_CHALLENGED, "401 libcurl may answer");
      return len;
    }
    if(!cti_transfer_head_delivered(t))
      cti_transfer_deliver_head(t);
    return len;
  }
  if(!hdr_append(t, data, len)) {
    cti_transfer_set_error(t, CT_E_BAD_RESPONSE, 0,
                           "response headers too large");
    return 0;
  }
  /* Only the first letter is compared for most lines: each name this
   * engine reads is looked for only where it can be. */
  switch(len ? data[0] | 0x20 : 0) {
  case 'c':
    if(header_value(data, len, "Content-Length", value, sizeof(value))) {
      char *end = NULL;
      long long n = strtoll(value, &end, 10);
      if(end && *end == 0 && n >= 0)
        t->content_length = n;
    }
    else if(header_value(data, len, "Content-Range", value,
                         sizeof(value))) {
      /* "bytes 100-199/1000" */
      if(strncasecmp(value, "bytes ", 6) == 0)
        t->content_range_start = strtoll(value + 6, NULL, 10);
    }
    break;
  case 't':
    if(header_value(data, len, "Transfer-Encoding", value, sizeof(value)) &&
       strcasestr(value, "chunked"))
      t->chunked = 1;
    break;
  /* Validators serve only a download's resume data and journal: a body
   * kept in memory or dropped does not copy them. */
  case 'e':
    if(t->sink.kind == CT_SINK_FILE &&
       header_value(data, len, "ETag", value, sizeof(value))) {
      /* A validator goes back in If-Range and the journal: one with a CR
       * or LF (a bare CR survives curl's line split) is no validator. */
      free(t->etag);
      t->etag = strpbrk(value, "\r\n") ? NULL : strdup(value);
    }
    break;
  case 's':
    /* Counted only: libcurl's jar and the session's store parse them. */
    if(len > 11 && strncasecmp(data, "Set-Cookie:", 11) == 0)
      t->set_cookies++;
    break;
  case 'l':
    if(t->sink.kind == CT_SINK_FILE &&
       header_value(data, len, "Last-Modified", value, sizeof(value))) {
      free(t->last_modified);
      t->last_modified = strpbrk(value, "\r\n") ? NULL : strdup(value);
    }
    break;
  default:
    break;
  }
  return len;
}
