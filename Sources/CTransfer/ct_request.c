/*
 * ct_request.c - the request side of a transfer: configuring its easy
 * handle (method, body, ranges, limits, HTTP version, TLS hook and trust
 * marker) and the read and seek callbacks of an upload body.
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

size_t cti_read_cb(char *buffer, size_t size, size_t nitems, void *userp)
{
  struct cti_transfer *t = userp;
  size_t cap = size * nitems;
  size_t want = cap;
  ssize_t n;

  if(t->paused & CT_PAUSE_USER)
    /* A suspend that came before libcurl started the request: curl 7.88
     * resets its pause bits when the request starts, so hold it here. */
    return CURL_READFUNC_PAUSE;
  if(cti_rate_blocked(t, CTI_SEND))
    return CURL_READFUNC_PAUSE;
  if(t->body_kind == CT_BODY_PULL) {
    struct ct_callbacks *cb = &t->loop->config.callbacks;
    int64_t got = cb->on_read ? cb->on_read(t->ctx, buffer, cap) : -1;
    if(got == CT_READ_PAUSE) {
      /* Nothing buffered yet: wait for ct_loop_body_ready(). */
      cti_transfer_pause(t, CT_PAUSE_SOURCE, 1, "body source empty");
      return CURL_READFUNC_PAUSE;
    }
    if(got < 0 || (size_t)got > cap) {
      cti_transfer_set_error(t, CT_E_SOURCE_IO, 0, "the body stream failed");
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
    cti_transfer_set_error(t, CT_E_SOURCE_IO, errno,
                           "cannot read the body file");
    return CURL_READFUNC_ABORT;
  }
  if(n == 0 && t->body_length >= 0 && t->body_pos < t->body_length) {
    /* The file shrank under us: the announced length cannot be met. */
    cti_transfer_set_error(t, CT_E_SOURCE_IO, 0, "the body file shrank");
    return CURL_READFUNC_ABORT;
  }
  t->body_pos += n;
  cti_rate_consume(t, CTI_SEND, (size_t)n);
  return (size_t)n;
}

int cti_seek_cb(void *userp, curl_off_t offset, int origin)
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
    cti_transfer_set_error(t, CT_E_SOURCE_IO, 0,
                           "the request body is a stream that cannot be "
                           "read again, and a redirect or an authentication "
                           "retry needs to send the body again");
  }
  return CURL_SEEKFUNC_CANTSEEK;
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
  SETOPT(CURLOPT_WRITEFUNCTION, cti_write_cb);
  SETOPT(CURLOPT_WRITEDATA, t);
  SETOPT(CURLOPT_HEADERFUNCTION, cti_header_cb);
  SETOPT(CURLOPT_HEADERDATA, t);
  SETOPT(CURLOPT_XFERINFOFUNCTION, cti_xferinfo_cb);
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
        cti_transfer_set_error(t, CT_E_INVALID_REQUEST, errno,
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
    cti_counter_store(&t->counters->bytes_expected_to_send, t->body_length);
    SETOPT(CURLOPT_POST, 1L);
    if(t->body_kind == CT_BODY_MEMORY) {
      /* Borrowed, not copied: the owner keeps it alive until finish. */
      SETOPT(CURLOPT_POSTFIELDS, t->body_mem ? t->body_mem : "");
      SETOPT(CURLOPT_POSTFIELDSIZE_LARGE,
             (curl_off_t)(t->body_length > 0 ? t->body_length : 0));
    }
    else {
      SETOPT(CURLOPT_READFUNCTION, cti_read_cb);
      SETOPT(CURLOPT_READDATA, t);
      SETOPT(CURLOPT_SEEKFUNCTION, cti_seek_cb);
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
  else if(t->spec.idle_timeout_ms > 0) {
    /* The idle check itself is ct_timeout.c's, in the xferinfo callback.
     * A speed limit makes libcurl run the transfer (and so that callback)
     * every second even when no byte moves; the time is too long for
     * libcurl's own check, which averages, to ever fire first. */
    SETOPT(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SETOPT(CURLOPT_LOW_SPEED_TIME, (long)(t->spec.idle_timeout_ms / 1000 +
                                          3600));
  }
  /* max_recv_speed / max_send_speed: ct_ratelimit.c (see HTTP version). */
  if(t->userpwd) {
    long auth = 0;
    if(!t->spec.auth_schemes || (t->spec.auth_schemes & CT_AUTH_BASIC))
      auth |= CURLAUTH_BASIC;
    if(t->spec.auth_schemes & CT_AUTH_DIGEST)
      auth |= CURLAUTH_DIGEST;
    SETOPT(CURLOPT_HTTPAUTH, auth);
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
  sc = cti_proxy_setup(t);           /* ct_proxy.c */
  if(sc != CURLE_OK)
    goto badopt;
  return CT_OK;
badopt:
  if(sc == CURLE_OUT_OF_MEMORY) {
    cti_transfer_set_error(t, CT_E_NO_MEMORY, 0,
                           "out of memory setting an option");
    return CT_E_NO_MEMORY;
  }
  cti_transfer_set_error(t, CT_E_INVALID_REQUEST, 0, t->errbuf[0] ?
                         t->errbuf : "libcurl refused an option");
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
