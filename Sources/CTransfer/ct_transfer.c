/*
 * ct_transfer.c - one transfer's life outside libcurl's callbacks: its
 * copy of the spec (checked here), its first local error, and freeing it.
 * The callbacks live by concern: ct_request.c (setup, upload body),
 * ct_response.c (head), ct_body.c (body bytes, progress) and ct_result.c
 * (result and metrics).
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

void cti_transfer_set_error(struct cti_transfer *t, ct_code code, int err,
                            const char *message)
{
  if(t->local_code != CT_OK)
    return;            /* the first cause wins */
  if((code == CT_E_SINK_IO || code == CT_E_SOURCE_IO) &&
     cti_fd_exhausted(err)) {
    /* A file we could not open for want of a descriptor: the limit is
     * the cause, not the file or the disk. */
    t->local_code = CT_E_TOO_MANY_OPEN_FILES;
    t->local_errno = err;
    cti_fd_limit_text(t->local_message, sizeof(t->local_message),
                      message ? message : "cannot open a file", err);
    return;
  }
  t->local_code = code;
  t->local_errno = err;
  cti_copy_message(t->local_message, sizeof(t->local_message), message);
}

/*
 * A transfer's copies of the spec's strings, and its header, resolve and
 * connect-to lists (curl_slist nodes pointing at copies of the lines), live
 * after it in its one allocation: a request costs no allocation per string
 * or per header. libcurl only reads the lists (CURLOPT_HTTPHEADER and the
 * others keep the pointer), and they live as long as the transfer, which
 * sets them again on every request it makes with a reused handle
 * (set_request in ct_request.c). None of these is freed on its own, and
 * none may be given to curl_slist_append or curl_slist_free_all.
 */
struct tail {
  struct curl_slist *node;       /* the next free node */
  char *text;                    /* the next free byte */
};

/* Bytes a copy of `s` takes (0: no string). */
static size_t text_size(const char *s)
{
  return s ? strlen(s) + 1 : 0;
}

static char *tail_copy(struct tail *b, const char *s)
{
  char *copy;
  if(!s)
    return NULL;
  copy = b->text;
  b->text = stpcpy(copy, s) + 1;
  return copy;
}

/* Appends a node for `copy` (already in the tail) at `*end`, the next
 * pointer of the list's last node (or its head). */
static void tail_append(struct tail *b, struct curl_slist ***end, char *copy)
{
  struct curl_slist *n = b->node++;
  n->data = copy;
  n->next = NULL;
  **end = n;
  *end = &n->next;
}

/* Whether the transfer sends If-Range: a validator and a range or a
 * resume offset (as range_start >= 0 || resume_offset > 0 once set). */
static int sends_if_range(const struct ct_transfer_spec *spec)
{
  return spec->if_range && (spec->range_end >= 0 || spec->range_start > 0 ||
                            spec->resume_offset > 0);
}

#define IF_RANGE "If-Range: "

ct_code cti_transfer_create(struct ct_loop *loop,
                            const struct ct_transfer_spec *spec, void *ctx,
                            struct cti_transfer **out)
{
  struct cti_transfer *t;
  struct curl_slist **headers_end;
  struct curl_slist **proxy_end;
  struct curl_slist **end;
  struct tail b;
  size_t nodes;
  size_t text;
  size_t i;
  int if_range;

  *out = NULL;
  if(!spec->url || !*spec->url)
    return CT_E_INVALID_REQUEST;
  if(has_crlf(spec->url) || (spec->method && has_crlf(spec->method)))
    return CT_E_INVALID_REQUEST;
  text = 0;
  for(i = 0; i < spec->header_count; i++) {
    const char *h = spec->headers ? spec->headers[i] : NULL;
    if(!h || has_crlf(h) || !strchr(h, ':'))
      return CT_E_INVALID_REQUEST;
    text += text_size(h);
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
    text += text_size(r);
  }
  for(i = 0; i < spec->connect_to_count; i++) {
    const char *c = spec->connect_to ? spec->connect_to[i] : NULL;
    if(!c || has_crlf(c) || !strchr(c, ':'))
      return CT_E_INVALID_REQUEST;
    text += text_size(c);
  }
  if_range = sends_if_range(spec);
  nodes = spec->header_count + spec->resolve_count + spec->connect_to_count +
    (if_range ? 1 : 0);
  if(if_range)
    text += strlen(IF_RANGE) + text_size(spec->if_range);
  text += text_size(spec->url) + text_size(spec->method) +
    text_size(spec->ca_file) + text_size(spec->client_cert) +
    text_size(spec->client_key) + text_size(spec->user_password) +
    text_size(spec->unix_socket_path) + text_size(spec->netrc_file) +
    text_size(spec->ciphers) + text_size(spec->tls13_ciphers) +
    text_size(spec->body_path);

  /* sizeof(*t) is a multiple of its alignment: the nodes after it are
   * aligned, the text follows them. */
  t = calloc(1, sizeof(*t) + nodes * sizeof(struct curl_slist) + text);
  if(!t)
    return CT_E_NO_MEMORY;
  b.node = (struct curl_slist *)(void *)(t + 1);
  b.text = (char *)(b.node + nodes);
  t->loop = loop;
  t->ctx = ctx;
  t->flags = spec->flags;
  if(spec->flags & CT_FLAG_START_PAUSED)
    t->paused = CT_PAUSE_USER;        /* applied when admitted (ct_loop_transfers.c) */
  t->body_fd = -1;
  cti_sink_init(&t->sink);
  t->url = tail_copy(&b, spec->url);
  t->method = tail_copy(&b, spec->method);
  t->ca_file = tail_copy(&b, spec->ca_file);
  t->client_cert = tail_copy(&b, spec->client_cert);
  t->client_key = tail_copy(&b, spec->client_key);
  t->userpwd = tail_copy(&b, spec->user_password);
  t->unix_socket_path = tail_copy(&b, spec->unix_socket_path);
  t->netrc_file = tail_copy(&b, spec->netrc_file);
  t->ciphers = tail_copy(&b, spec->ciphers);
  t->tls13_ciphers = tail_copy(&b, spec->tls13_ciphers);
  t->body_path = tail_copy(&b, spec->body_path);
  headers_end = &t->headers;
  proxy_end = &t->proxy_headers;
  for(i = 0; i < spec->header_count; i++) {
    /* Proxy credentials go to proxies only (CURLOPT_PROXYHEADER): curl
     * strips a custom Authorization or Cookie header when it follows a
     * redirect to another scheme, host or port, but not this one. */
    int to_proxy = curl_strnequal(spec->headers[i], "Proxy-Authorization:",
                                  20);
    tail_append(&b, to_proxy ? &proxy_end : &headers_end,
                tail_copy(&b, spec->headers[i]));
  }
  if(if_range) {
    /* Segments too: every range must come from the same version. */
    char *line = b.text;
    b.text = stpcpy(stpcpy(line, IF_RANGE), spec->if_range) + 1;
    tail_append(&b, &headers_end, line);
  }
  end = &t->resolve;
  for(i = 0; i < spec->resolve_count; i++)
    tail_append(&b, &end, tail_copy(&b, spec->resolve[i]));
  end = &t->connect_to;
  for(i = 0; i < spec->connect_to_count; i++)
    tail_append(&b, &end, tail_copy(&b, spec->connect_to[i]));
  cti_options_copy(&t->opts, spec);
  {
    /* ct_proxy.c: a CR or LF in a proxy setting, or no memory */
    ct_code prc = cti_proxy_create(t, spec);
    if(prc != CT_OK) {
      cti_transfer_free(t);
      return prc;
    }
  }
  if(cti_journal_create(t, spec) != CT_OK ||
     cti_checksum_create(t, spec->expected_sha256) != CT_OK)
    goto nomem;

  t->body_kind = spec->body_kind;
  t->body_mem = spec->body_data;
  t->body_length = spec->body_kind == CT_BODY_NONE ? 0 : spec->body_length;
  t->body_offset = spec->body_offset > 0 ? spec->body_offset : 0;

  t->sink.kind = spec->sink_kind;
  t->sink.no_sync = (spec->flags & CT_FLAG_NO_SYNC) != 0;
  t->sink.buf_max = spec->sink_buffer_size ? spec->sink_buffer_size :
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
  cti_counter_store(&t->counters->bytes_sent, 0);
  cti_counter_store(&t->counters->bytes_received, t->resume_offset);
  cti_counter_store(&t->counters->bytes_expected_to_send, t->body_length);
  cti_counter_store(&t->counters->bytes_expected_to_receive, -1);
  t->submit_time = cti_now();
  /* The easy handle comes from the loop's pool when the transfer starts. */
  *out = t;
  return CT_OK;
nomem:
  cti_transfer_free(t);
  return CT_E_NO_MEMORY;
}

void cti_transfer_free(struct cti_transfer *t)
{
  if(!t)
    return;
  /* No connection may keep a pointer into this transfer (retire() counts
   * the ones that still did; here for the paths that never ran it). */
  cti_tls_verdict_release(&t->verdict);
  if(t->easy)
    curl_easy_cleanup(t->easy);
  if(t->body_fd >= 0)
    close(t->body_fd);
  /* The spec's strings and the lists live in `t`'s own allocation. */
  cti_proxy_free(t->proxy);
  cti_sink_free(&t->sink);
  free(t->hdr);
  free(t->etag);
  free(t->last_modified);
  cti_journal_free(t->journal);
  cti_checksum_free(t->checksum);
  free(t);
}

void cti_options_copy(struct cti_options *o,
                      const struct ct_transfer_spec *spec)
{
  o->connect_timeout_ms = spec->connect_timeout_ms;
  o->timeout_ms = spec->timeout_ms;
  o->low_speed_limit = spec->low_speed_limit;
  o->low_speed_time_s = spec->low_speed_time_s;
  o->idle_timeout_ms = spec->idle_timeout_ms;
  o->max_redirects = spec->max_redirects;
  o->max_recv_speed = spec->max_recv_speed;
  o->max_send_speed = spec->max_send_speed;
  o->max_body_size = spec->max_body_size;
  o->max_decode_ratio = spec->max_decode_ratio;
  o->http_version = spec->http_version;
  o->auth_schemes = spec->auth_schemes;
  o->ip_resolve = spec->ip_resolve;
  o->tls_min = spec->tls_min;
  o->tls_max = spec->tls_max;
  o->netrc = spec->netrc;
}
