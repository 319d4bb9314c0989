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
  for(i = 0; i < spec->connect_to_count; i++) {
    const char *c = spec->connect_to ? spec->connect_to[i] : NULL;
    if(!c || has_crlf(c) || !strchr(c, ':'))
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
  t->unix_socket_path = cti_strdup(spec->unix_socket_path);
  t->netrc_file = cti_strdup(spec->netrc_file);
  t->ciphers = cti_strdup(spec->ciphers);
  t->tls13_ciphers = cti_strdup(spec->tls13_ciphers);
  t->body_path = cti_strdup(spec->body_path);
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
  for(i = 0; i < spec->connect_to_count; i++) {
    struct curl_slist *n = curl_slist_append(t->connect_to,
                                             spec->connect_to[i]);
    if(!n)
      goto nomem;
    t->connect_to = n;
  }

  t->body_kind = spec->body_kind;
  t->body_mem = spec->body_data;
  t->body_length = spec->body_kind == CT_BODY_NONE ? 0 : spec->body_length;
  t->body_offset = spec->body_offset > 0 ? spec->body_offset : 0;

  t->sink.kind = spec->sink_kind;
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
  curl_slist_free_all(t->headers);
  curl_slist_free_all(t->proxy_headers);
  curl_slist_free_all(t->resolve);
  curl_slist_free_all(t->connect_to);
  cti_proxy_free(t->proxy);
  cti_sink_free(&t->sink);
  free(t->url);
  free(t->method);
  free(t->if_range);
  free(t->ca_file);
  free(t->client_cert);
  free(t->client_key);
  free(t->userpwd);
  free(t->unix_socket_path);
  free(t->netrc_file);
  free(t->ciphers);
  free(t->tls13_ciphers);
  free(t->body_path);
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
