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
  CURLcode rc = (CURLcode)cti_tls_configure_ctx(t->loop->tls, ssl_ctx, easy,
                                                t->ca_file,
                                                (t->flags & CT_FLAG_INSECURE)
                                                != 0, &t->verdict);
  /* Bulk bodies read ahead (ct_tls_read.c); a trace keeps libcurl's own
   * message callback. */
  if(rc == CURLE_OK && t->recv_buffer > CURL_MAX_WRITE_SIZE &&
     !(t->flags & CT_FLAG_TRACE))
    cti_tls_read_ahead_enable(t->loop, ssl_ctx, t->id);
  return rc;
}

static void trust_marker(struct cti_transfer *t, char *out, size_t cap)
{
  snprintf(out, cap, "ct-trust:%llu:%d:%016llx",
           (unsigned long long)t->loop->trust_generation,
           (t->flags & CT_FLAG_INSECURE) ? 1 : 0,
           (unsigned long long)hash_string(t->ca_file));
}

ct_code cti_transfer_set_trust_marker(struct cti_transfer *t)
{
  char marker[96];

  trust_marker(t, marker, sizeof(marker));
  cti_count_setopt(t->loop);
  if(curl_easy_setopt(t->easy, CURLOPT_CAINFO, marker) != CURLE_OK)
    return CT_E_NO_MEMORY;
  t->trust_generation = t->loop->trust_generation;
  return CT_OK;
}

/*
 * The options of an easy handle come in two kinds (for the pool):
 *
 *  - the profile: every option that follows from the kind of transfer
 *    (memory GET, file or discard sink, upload and its body kind, method,
 *    redirects, limits, HTTP version, TLS trust, client certificate,
 *    credentials). set_profile() runs twice over the same code: first it
 *    only hashes each (option, value) into a key, then, unless the handle
 *    from the pool was set up with that very key, it resets the handle
 *    and applies them. Any option set there is part of the key by
 *    construction, so a handle is reused as is only when the same options
 *    would be set again. A transfer with an explicit proxy has no key (0):
 *    its handle is always reset and set up in full.
 *  - per request: what names this transfer (URL, headers, range, body,
 *    the private pointer and every callback's user data), set every time
 *    by set_request(), to NULL where the transfer has none, so nothing of
 *    the previous transfer on the handle survives.
 *
 * A new option goes in set_profile when its value follows from the kind of
 * transfer, in set_request when it points into the transfer or changes
 * per request (and must then be set, or cleared, on every request).
 */
struct profile_run {
  CURL *e;
  int apply;            /* 0: hash into key; 1: curl_easy_setopt */
  uint64_t key;
  struct ct_loop *loop; /* counts the setopt calls */
};

static void mix(struct profile_run *r, uint64_t v)
{
  /* A word at a time (FNV-1a a byte at a time cost about 40 instructions
   * per value, on every request): xor, an odd multiply and a shift, each
   * a bijection of the key for a given value, so two profiles that differ
   * in one value never meet at that step. */
  r->key = (r->key ^ v) * 0x9E3779B97F4A7C15ULL;
  r->key ^= r->key >> 29;
}

/* One option of the profile; `set` is the setopt expression (typed by the
 * caller's macro), `v` what identifies its value. */
#define PROFILE(opt, val, v) do {                                     \
    if(r->apply) {                                                    \
      cti_count_setopt(r->loop);                                      \
      if((sc = curl_easy_setopt(r->e, opt, val)) != CURLE_OK)         \
        goto badopt;                                                  \
    }                                                                 \
    else {                                                            \
      mix(r, (uint64_t)(opt));                                        \
      mix(r, (uint64_t)(v));                                          \
    }                                                                 \
  } while(0)
#define PLONG(opt, val) PROFILE(opt, (long)(val), (long)(val))
#define PSTR(opt, val) PROFILE(opt, (const char *)(val), hash_string(val))
#define PFUNC(opt, fn) PROFILE(opt, fn, 1)

/* CURLOPT_SSLVERSION for a ct_tls_version minimum and maximum. */
static long tls_version(int32_t min, int32_t max)
{
  long v = min == CT_TLS_1_3 ? CURL_SSLVERSION_TLSv1_3 :
    min == CT_TLS_1_2 ? CURL_SSLVERSION_TLSv1_2 : CURL_SSLVERSION_DEFAULT;
  if(max == CT_TLS_1_2)
    v |= CURL_SSLVERSION_MAX_TLSv1_2;
  else if(max == CT_TLS_1_3)
    v |= CURL_SSLVERSION_MAX_TLSv1_3;
  return v;
}

/* Whether libcurl asks for and decodes compressed bodies: not for a
 * range, whose offsets count encoded bytes of a body we cannot decode
 * from the middle. */
static int decodes_content(const struct cti_transfer *t)
{
  return !(t->flags & CT_FLAG_NO_DECOMPRESS) && t->resume_offset == 0 &&
    t->range_start < 0;
}

static CURLcode set_profile(struct cti_transfer *t, struct profile_run *r)
{
  CURLcode sc = CURLE_OK;
  long httpver;
  int has_body = t->body_kind != CT_BODY_NONE;
  char marker[96];

  /* The same for every transfer of the loop. */
  PLONG(CURLOPT_NOSIGNAL, 1L);
  /* Set per request (ct_cookies.c), but a handle set up for the same way
   * of using the jar keeps it (cti_cookies_setup). */
  if(!r->apply)
    mix(r, t->flags & (CT_FLAG_COOKIES | CT_FLAG_COOKIES_READ_ONLY));
  PSTR(CURLOPT_PROTOCOLS_STR, "http,https");
  PSTR(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  PROFILE(CURLOPT_SHARE, t->loop->share, 1);
  PFUNC(CURLOPT_WRITEFUNCTION, cti_write_cb);
  PFUNC(CURLOPT_HEADERFUNCTION, cti_header_cb);
  PFUNC(CURLOPT_XFERINFOFUNCTION, cti_xferinfo_cb);
  /* The fast path leaves libcurl's progress meter off (CT_FLAG_NO_PROGRESS):
   * the idle timeout needs no callback (ct_timeout.c). */
  PLONG(CURLOPT_NOPROGRESS, (t->flags & CT_FLAG_NO_PROGRESS) ? 1L : 0L);
  if(t->flags & CT_FLAG_TRACE) {
    /* Only when asked: a debug function costs a call per curl message
     * (its data pointer is per request: set_request). */
    PFUNC(CURLOPT_DEBUGFUNCTION, cti_debug_cb);
    PLONG(CURLOPT_VERBOSE, 1L);
  }
  if(t->recv_buffer != CURL_MAX_WRITE_SIZE)
    PLONG(CURLOPT_BUFFERSIZE, t->recv_buffer);
  if(t->proxy_headers)
    PLONG(CURLOPT_HEADEROPT, CURLHEADER_SEPARATE);

  if(t->flags & CT_FLAG_FOLLOW_REDIRECTS) {
    PLONG(CURLOPT_FOLLOWLOCATION, 1L);
    PLONG(CURLOPT_MAXREDIRS, 16L);
  }
  if(decodes_content(t))
    PSTR(CURLOPT_ACCEPT_ENCODING, "");

  /* Method and body kind (the body itself is per request). */
  if(t->flags & CT_FLAG_NO_BODY)
    PLONG(CURLOPT_NOBODY, 1L);
  if(has_body) {
    PLONG(CURLOPT_POST, 1L);
    if(t->body_kind != CT_BODY_MEMORY) {
      PFUNC(CURLOPT_READFUNCTION, cti_read_cb);
      PFUNC(CURLOPT_SEEKFUNCTION, cti_seek_cb);
      PLONG(CURLOPT_UPLOAD_BUFFERSIZE, CTI_FILE_READ_BLOCK);
    }
  }
  if(t->method) {
    if(strcmp(t->method, "HEAD") == 0)
      PLONG(CURLOPT_NOBODY, 1L);
    else if(!(strcmp(t->method, "GET") == 0 && !has_body) &&
            !(strcmp(t->method, "POST") == 0 && has_body))
      PSTR(CURLOPT_CUSTOMREQUEST, t->method);
  }

  /* Limits. */
  PLONG(CURLOPT_MAXREDIRS, t->opts.max_redirects >= 0 ?
        t->opts.max_redirects : 16);
  PLONG(CURLOPT_CONNECTTIMEOUT_MS, t->opts.connect_timeout_ms > 0 ?
        t->opts.connect_timeout_ms : CTI_DEFAULT_CONNECT_TIMEOUT_MS);
  if(t->opts.timeout_ms > 0)
    PLONG(CURLOPT_TIMEOUT_MS, t->opts.timeout_ms);
  if(t->opts.low_speed_limit > 0 && t->opts.low_speed_time_s > 0) {
    PLONG(CURLOPT_LOW_SPEED_LIMIT, t->opts.low_speed_limit);
    PLONG(CURLOPT_LOW_SPEED_TIME, t->opts.low_speed_time_s);
  }
  /* The idle timeout is the loop's sweep (ct_timeout.c): no option. A
   * speed limit would make libcurl re-arm a one-second timer on every
   * pass over the transfer. */
  /* max_recv_speed / max_send_speed: ct_ratelimit.c (see HTTP version). */
  if(t->userpwd) {
    long auth = 0;
    if(!t->opts.auth_schemes || (t->opts.auth_schemes & CT_AUTH_BASIC))
      auth |= CURLAUTH_BASIC;
    if(t->opts.auth_schemes & CT_AUTH_DIGEST)
      auth |= CURLAUTH_DIGEST;
    PLONG(CURLOPT_HTTPAUTH, auth);
    PSTR(CURLOPT_USERPWD, t->userpwd);
  }

  /* HTTP version: ALPN decides by default; h2c upgrades are never tried. */
  switch(t->opts.http_version) {
  case CT_HTTP_1_1:
    httpver = CURL_HTTP_VERSION_1_1;
    break;
  case CT_HTTP_1_0:
    httpver = CURL_HTTP_VERSION_1_0;
    break;
  case CT_HTTP_2_PRIOR_KNOWLEDGE:
    httpver = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    break;
  default:
    httpver = CURL_HTTP_VERSION_2TLS;
    break;
  }
  httpver = cti_rate_http_version(t, httpver);   /* ct_ratelimit.c */
  PLONG(CURLOPT_HTTP_VERSION, httpver);
  /* Wait for a connection that may multiplex only where one can: HTTP/2
   * comes from ALPN over TLS. On cleartext HTTP/1.1 PIPEWAIT would make
   * transfers to one host queue behind each other instead of opening
   * their own connections. */
  if(t->loop->config.multiplex && httpver != CURL_HTTP_VERSION_1_1 &&
     httpver != CURL_HTTP_VERSION_1_0 &&
     strncasecmp(t->url, "https:", 6) == 0)
    PLONG(CURLOPT_PIPEWAIT, 1L);

  /* TLS: verification is ours (ct_tls.c), done in OpenSSL's verify step
   * with anchors loaded once per loop. libcurl must neither load the CA
   * bundle per connection (about 30 ms of CPU each) nor verify again. The
   * CAINFO marker is never loaded successfully; it only keeps connections
   * made under different trust settings (insecure, another CA file, an
   * older policy) from being reused by each other. */
  PLONG(CURLOPT_SSL_VERIFYPEER, 0L);
  PLONG(CURLOPT_SSL_VERIFYHOST, 0L);
  PSTR(CURLOPT_CAPATH, NULL);
  if(r->apply) {
    trust_marker(t, marker, sizeof(marker));
    PSTR(CURLOPT_CAINFO, marker);
  }
  else {
    /* The key takes what the marker is made of, unformatted: this runs
     * for every transfer, the formatting only when options are applied. */
    mix(r, (uint64_t)CURLOPT_CAINFO);
    mix(r, t->loop->trust_generation);
    mix(r, (t->flags & CT_FLAG_INSECURE) ? 1 : 0);
    mix(r, hash_string(t->ca_file));
  }
  /* Track the sockets: a policy change closes idle ones made before. */
  PFUNC(CURLOPT_OPENSOCKETFUNCTION, cti_tls_open_socket);
  PFUNC(CURLOPT_CLOSESOCKETFUNCTION, cti_tls_close_socket);
  PROFILE(CURLOPT_CLOSESOCKETDATA, t->loop, 1);
  PFUNC(CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_cb);
  if(t->client_cert) {
    PSTR(CURLOPT_SSLCERT, t->client_cert);
    PSTR(CURLOPT_SSLCERTTYPE, "PEM");
  }
  if(t->client_key)
    PSTR(CURLOPT_SSLKEY, t->client_key);
  if(t->opts.tls_min || t->opts.tls_max)
    PLONG(CURLOPT_SSLVERSION, tls_version(t->opts.tls_min, t->opts.tls_max));
  if(t->ciphers)
    PSTR(CURLOPT_SSL_CIPHER_LIST, t->ciphers);
  if(t->tls13_ciphers)
    PSTR(CURLOPT_TLS13_CIPHERS, t->tls13_ciphers);

  /* curl's connection options (all off unless asked for). */
  if(t->opts.ip_resolve == CT_IP_V4)
    PLONG(CURLOPT_IPRESOLVE, CURL_IPRESOLVE_V4);
  else if(t->opts.ip_resolve == CT_IP_V6)
    PLONG(CURLOPT_IPRESOLVE, CURL_IPRESOLVE_V6);
  if(t->unix_socket_path)
    PSTR(CURLOPT_UNIX_SOCKET_PATH, t->unix_socket_path);
  if(t->flags & CT_FLAG_PATH_AS_IS)
    PLONG(CURLOPT_PATH_AS_IS, 1L);
  if(t->opts.netrc != CT_NETRC_IGNORED) {
    PLONG(CURLOPT_NETRC, t->opts.netrc == CT_NETRC_REQUIRED ?
          CURL_NETRC_REQUIRED : CURL_NETRC_OPTIONAL);
    if(t->netrc_file)
      PSTR(CURLOPT_NETRC_FILE, t->netrc_file);
  }
  if(t->flags & CT_FLAG_NO_PROXY) {
    /* Both set: libcurl then reads none of the environment's variables. */
    PSTR(CURLOPT_PROXY, "");
    PSTR(CURLOPT_NOPROXY, "");
  }
  if(r->apply) {
    t->trust_generation = t->loop->trust_generation;
    sc = cti_proxy_setup(t);           /* ct_proxy.c */
  }
badopt:
  return sc;
}

#define SETOPT(opt, val) do {                                           \
    cti_count_setopt(t->loop);                                          \
    if((sc = curl_easy_setopt(e, opt, val)) != CURLE_OK) goto badopt;   \
  } while(0)

/* The request's header lines, with our Accept-Encoding line first when
 * libcurl decodes and the request names none. For CURLOPT_ACCEPT_ENCODING
 * libcurl 7.88 formats its own line anew on every request with its
 * byte-at-a-time printf (about 4,600 instructions by callgrind), then
 * formats it again into the request; a custom line of the same text is
 * formatted once. Decoding still follows CURLOPT_ACCEPT_ENCODING, which
 * the profile sets. */
static struct curl_slist *request_headers(struct cti_transfer *t)
{
  const struct curl_slist *h;
  if(!decodes_content(t))
    return t->headers;
  for(h = t->headers; h; h = h->next) {
    /* "Name:" sends or drops the field, "Name;" sends it empty: either
     * way the request's own line decides. */
    if(curl_strnequal(h->data, "Accept-Encoding", 15) &&
       (h->data[15] == ':' || h->data[15] == ';'))
      return t->headers;
  }
  t->accept_encoding.data = (char *)cti_accept_encoding_line();
  t->accept_encoding.next = t->headers;
  return &t->accept_encoding;
}

static CURLcode set_request(struct cti_transfer *t, int configured)
{
  CURL *e = t->easy;
  CURLcode sc = CURLE_OK;
  char range[64];
  const char *ranged = NULL;

  SETOPT(CURLOPT_PRIVATE, t);
  SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
  SETOPT(CURLOPT_URL, t->url);
  SETOPT(CURLOPT_WRITEDATA, t);
  SETOPT(CURLOPT_HEADERDATA, t);
  SETOPT(CURLOPT_XFERINFODATA, t);
  SETOPT(CURLOPT_OPENSOCKETDATA, t);
  SETOPT(CURLOPT_SSL_CTX_DATA, t);
  SETOPT(CURLOPT_HTTPHEADER, request_headers(t));
  SETOPT(CURLOPT_PROXYHEADER, t->proxy_headers);
  SETOPT(CURLOPT_RESOLVE, t->resolve);
  SETOPT(CURLOPT_CONNECT_TO, t->connect_to);
  if(t->flags & CT_FLAG_TRACE)
    SETOPT(CURLOPT_DEBUGDATA, t);
  /* Cookies differ per request (flags, a read-only copy of the jar): the
   * jar's share or the loop's, set every time (ct_cookies.c). */
  sc = cti_cookies_setup(t, configured);
  if(sc != CURLE_OK)
    goto badopt;

  /* Resume and segments. */
  if(t->range_start >= 0) {
    if(t->range_end >= 0)
      snprintf(range, sizeof(range), "%lld-%lld",
               (long long)(t->range_start + t->resume_offset),
               (long long)t->range_end);
    else
      snprintf(range, sizeof(range), "%lld-",
               (long long)(t->range_start + t->resume_offset));
    ranged = range;
  }
  else if(t->resume_offset > 0) {
    /* CURLOPT_RANGE, not RESUME_FROM: a 200 reply must restart cleanly
     * instead of failing with "server does not support byte ranges". */
    snprintf(range, sizeof(range), "%lld-", (long long)t->resume_offset);
    ranged = range;
  }
  SETOPT(CURLOPT_RANGE, ranged);

  /* The body: borrowed, not copied (the owner keeps it alive until
   * finish), or read through cti_read_cb. */
  if(t->body_kind == CT_BODY_MEMORY) {
    SETOPT(CURLOPT_POSTFIELDS, t->body_mem ? t->body_mem : "");
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE,
           (curl_off_t)(t->body_length > 0 ? t->body_length : 0));
  }
  else if(t->body_kind != CT_BODY_NONE) {
    SETOPT(CURLOPT_READDATA, t);
    SETOPT(CURLOPT_SEEKDATA, t);
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body_length);
  }
badopt:
  return sc;
}

/* Whether the body may be large, decided before the request goes out
 * (curl takes CURLOPT_BUFFERSIZE before the head arrives, and allocates
 * that buffer per transfer). Memory and stream sinks get curl's default
 * 16 KiB: their bodies are mostly small, and a big one costs only more
 * reads. File and discard sinks get 512 KiB, the size that keeps bulk
 * downloads fast, unless the body is known small: no body (HEAD), or a
 * range shorter than the buffer. */
static int big_body(const struct cti_transfer *t)
{
  if(t->sink.kind != CT_SINK_FILE && t->sink.kind != CT_SINK_DISCARD)
    return 0;
  if((t->flags & CT_FLAG_NO_BODY) ||
     (t->method && strcmp(t->method, "HEAD") == 0))
    return 0;
  if(t->range_start >= 0 && t->range_end >= 0 &&
     t->range_end - (t->range_start + t->resume_offset) + 1 <
     (int64_t)CTI_BIG_RECV_BUFFER)
    return 0;
  return 1;
}

ct_code cti_transfer_prepare(struct cti_transfer *t)
{
  struct profile_run r;
  CURLcode sc;

  /* What set_profile reads besides the spec. */
  t->recv_buffer = CURL_MAX_WRITE_SIZE;
  if(big_body(t)) {
    if(t->loop->big_recv_in_use < CTI_BIG_RECV_SLOTS) {
      t->loop->big_recv_in_use++;
      t->big_recv_slot = 1;
      t->recv_buffer = CTI_BIG_RECV_BUFFER;
    }
    else
      t->recv_buffer = CTI_MID_RECV_BUFFER;
  }
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
  if(t->body_kind != CT_BODY_NONE)
    cti_counter_store(&t->counters->bytes_expected_to_send, t->body_length);
  /* If-Range, for a range or a resume, is in t->headers already
   * (ct_transfer.c). */
  memset(&r, 0, sizeof(r));
  r.key = 1469598103934665603ULL;
  sc = set_profile(t, &r);        /* hashes only: cannot fail */
  /* No reuse as is with an explicit proxy or credentials: libcurl keeps
   * a handle's authentication state (Digest nonce, picked scheme) across
   * transfers, and it must not follow a credential to another request. */
  t->profile = (t->proxy || t->userpwd) ? 0 : (r.key ? r.key : 1);
  (void)sc;
  return CT_OK;
}

ct_code cti_transfer_setup(struct cti_transfer *t, int configured)
{
  CURLcode sc = CURLE_OK;

  if(!configured) {
    struct profile_run r;
    memset(&r, 0, sizeof(r));
    r.e = t->easy;
    r.apply = 1;
    r.loop = t->loop;
    sc = set_profile(t, &r);
  }
  else
    t->trust_generation = t->loop->trust_generation;
  if(sc == CURLE_OK)
    sc = set_request(t, configured);
  if(sc == CURLE_OK)
    return CT_OK;
  t->profile = 0;       /* half set up: reset before any reuse */
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
