/*
 * ct_transfer.h - what a transfer is: request, body source, sink, limits.
 *
 * A spec is read only during ct_loop_submit(): every string and array is
 * copied, except the memory body (borrowed until on_finish, see below).
 */
#ifndef CT_TRANSFER_H
#define CT_TRANSFER_H

#include "ct_counters.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_body_kind {
  CT_BODY_NONE = 0,
  CT_BODY_MEMORY = 1,   /* body_data/body_length, borrowed until finish */
  CT_BODY_FILE = 2,     /* body_path from body_offset, read in big blocks */
  CT_BODY_PULL = 3      /* on_read / on_rewind callbacks */
} ct_body_kind;

typedef enum ct_sink_kind {
  CT_SINK_MEMORY = 0,   /* accumulated in C, moved out in ct_result.body */
  CT_SINK_FILE = 1,     /* buffered writes to sink_path (see below) */
  CT_SINK_DISCARD = 2,  /* counted, not stored */
  CT_SINK_STREAM = 3    /* each chunk to on_data */
} ct_sink_kind;

typedef enum ct_http_version {
  CT_HTTP_AUTO = 0,     /* HTTP/2 over TLS when ALPN agrees, else 1.1 */
  CT_HTTP_1_1 = 1,
  CT_HTTP_2 = 2,        /* prefer 2 (h2c prior knowledge is not used) */
  CT_HTTP_1_0 = 3,
  CT_HTTP_2_PRIOR_KNOWLEDGE = 4  /* HTTP/2 from the first byte, also on
                                  * cleartext (h2c, no Upgrade) */
} ct_http_version;

/* Which addresses a host name may resolve to (CURLOPT_IPRESOLVE). */
typedef enum ct_ip_version {
  CT_IP_ANY = 0,
  CT_IP_V4 = 4,
  CT_IP_V6 = 6
} ct_ip_version;

/* TLS protocol versions for tls_min / tls_max (0: libcurl's default). */
typedef enum ct_tls_version {
  CT_TLS_DEFAULT = 0,
  CT_TLS_1_2 = 12,
  CT_TLS_1_3 = 13
} ct_tls_version;

/* Credentials from a netrc file (CURLOPT_NETRC). */
typedef enum ct_netrc {
  CT_NETRC_IGNORED = 0,
  CT_NETRC_OPTIONAL = 1,   /* used when the file has the host */
  CT_NETRC_REQUIRED = 2    /* the URL's credentials are ignored */
} ct_netrc;

/* Flags */
#define CT_FLAG_NO_BODY           (1u << 0)  /* HEAD: do not read a body */
#define CT_FLAG_FOLLOW_REDIRECTS  (1u << 1)
#define CT_FLAG_INSECURE          (1u << 2)  /* no peer/host verification */
#define CT_FLAG_KEEP_PARTIAL      (1u << 3)  /* failure keeps .part + state */
#define CT_FLAG_AWAIT_DISPOSITION (1u << 4)  /* pause at first body byte
                                              * until ct_loop_set_disposition */
#define CT_FLAG_NO_DECOMPRESS     (1u << 5)  /* do not ask for gzip etc. */
#define CT_FLAG_FAIL_ON_RANGE_IGNORED (1u << 6)
#define CT_FLAG_NO_PREALLOCATE    (1u << 7)
/* libcurl's verbose trace goes to ct_callbacks.on_debug (text and header
 * lines only, credentials redacted); without it no debug function is
 * installed at all. A high bit, away from the flags others add. */
#define CT_FLAG_TRACE             (1u << 16)
/* Cookies (ct_cookies.h), with the loop's cookie_jar: send the jar's
 * cookies and store what responses set; or READ_ONLY: send them, store
 * nothing. Neither: no cookie is sent or stored. */
#define CT_FLAG_COOKIES           (1u << 8)
#define CT_FLAG_COOKIES_READ_ONLY (1u << 9)
#define CT_FLAG_NO_PROGRESS       (1u << 10)  /* no on_progress and no send
                                              * counting: libcurl's
                                              * NOPROGRESS stays on */
/* A CT_SINK_STREAM transfer whose on_data may answer CT_DATA_PAUSE. It
 * goes over HTTP/1.1 on a connection of its own, as a rate-limited one
 * does (ct_ratelimit.c): pausing an HTTP/2 stream does not stop its bytes
 * (libcurl 7.88 keeps what the 32 MiB stream window let through, measured
 * at 33 MB for one held stream), while pausing HTTP/1.1 stops reading
 * the socket. A high bit, away from the flags others add. */
#define CT_FLAG_CONSUMER_PACED    (1u << 20)
/* Send the URL path as given: "/../" and "/./" are not squashed
 * (CURLOPT_PATH_AS_IS). A high bit, away from the flags others add. */
#define CT_FLAG_PATH_AS_IS        (1u << 22)
/* Nobody reads this transfer's timings: ct_result.metrics holds only the
 * body byte counts and the queue time, without the twenty-odd
 * curl_easy_getinfo calls of the rest. */
#define CT_FLAG_NO_METRICS        (1u << 23)
/* The owner suspended the request before handing it over: it starts
 * paused as if ct_loop_pause() had come first, and nothing moves until
 * ct_loop_resume(). A pause command cannot do this race-free, since the
 * loop may finish a small transfer before the id is known. */
#define CT_FLAG_START_PAUSED      (1u << 24)
/* No proxy, and the environment's proxy variables are not read: libcurl
 * 7.88 otherwise calls getenv five times per request (http_proxy,
 * all_proxy, ALL_PROXY, no_proxy, NO_PROXY). Part of the handle's
 * profile, so the handle is still reused as is; spec.proxy and the other
 * proxy fields must be NULL. */
#define CT_FLAG_NO_PROXY          (1u << 25)
/* A CT_SINK_FILE the owner reads once and removes (a body bound for
 * stdout): no write-back while writing, no fsync of the file or of its
 * folder when it is placed. Placing it is still a rename. A resume
 * journal, if any, is still synced. */
#define CT_FLAG_NO_SYNC           (1u << 26)

/* HTTP authentication schemes libcurl may answer a 401 with, using
 * `user_password` (CURLOPT_HTTPAUTH). Basic alone is sent up front;
 * with Digest, libcurl waits for the server's challenge, answers it once
 * (again only after a stale=true renonce) and returns the 401 that
 * refuses the answer. */
#define CT_AUTH_BASIC             (1u << 0)
#define CT_AUTH_DIGEST            (1u << 1)  /* RFC 7616: MD5, SHA-256 */

struct ct_transfer_spec {
  const char *_Nullable url;         /* http or https only; required */
  const char *_Nullable method;      /* NULL: GET, or POST with a body */
  /* "Name: value" lines, without CR/LF (refused otherwise). */
  const char *_Nullable const *_Nullable headers;
  size_t header_count;
  uint32_t flags;

  ct_body_kind body_kind;
  const void *_Nullable body_data;
  int64_t body_length;               /* memory/file; -1: to end / unknown */
  const char *_Nullable body_path;
  int64_t body_offset;

  ct_sink_kind sink_kind;
  /* File sink: bytes go to `sink_part_path` (default "<sink_path>.part",
   * created 0600: private while it is written); on success they are
   * flushed, fsync'd, given ct_file_placed_mode() and renamed to
   * sink_path, and the
   * folder fsync'd, on the loop's file worker thread (the transfer reports
   * once that is done; a cancel meanwhile changes nothing). With
   * sink_path NULL the part file is kept as the result (file_path). On
   * failure the part file is removed unless CT_FLAG_KEEP_PARTIAL. */
  const char *_Nullable sink_path;
  const char *_Nullable sink_part_path;
  size_t sink_buffer_size;           /* the write buffer's ceiling; 0: 2 MiB.
                                      * It starts at 64 KiB (or this, when
                                      * smaller) and doubles each time it
                                      * fills within 100 ms. */
  /* Resume: continue the part file at this offset with Range, and with
   * If-Range when `if_range` (an ETag or a Last-Modified) is set. A 200 in
   * reply restarts the file from zero. */
  int64_t resume_offset;
  const char *_Nullable if_range;
  /* Segments: a byte range [range_start, range_end] (inclusive) written at
   * the same offsets of the part file; range_end -1 means none. */
  int64_t range_start;
  int64_t range_end;

  int64_t connect_timeout_ms;        /* 0: library default (30 s) */
  int64_t timeout_ms;                /* whole transfer; 0: none */
  int64_t low_speed_limit;           /* bytes/s; 0: off */
  int64_t low_speed_time_s;
  /* Idle timeout (URLSession's timeoutIntervalForRequest): the transfer
   * fails with CT_E_TIMED_OUT when no byte moved in either direction
   * (request body sent, response head or body received) for this long,
   * while it was not paused by us; 0: off. Checked at least once a
   * second, so it fires within about a second past the interval. */
  int64_t idle_timeout_ms;
  int64_t max_redirects;             /* with CT_FLAG_FOLLOW_REDIRECTS */
  int64_t max_recv_speed;            /* bytes/s; 0: unlimited */
  int64_t max_send_speed;
  ct_http_version http_version;
  const char *_Nullable ca_file;     /* overrides the loop's anchors */
  const char *_Nullable client_cert; /* PEM */
  const char *_Nullable client_key;  /* PEM */
  const char *_Nullable user_password;  /* "user:password" */
  uint32_t auth_schemes;             /* CT_AUTH_*; 0: CT_AUTH_BASIC */
  int32_t priority;                  /* 0 default; higher first in queue */
  uint32_t progress_interval_ms;     /* 0: 16 ms; on_progress throttling */

  /* Optional counters block the loop writes (see ct_counters.h). */
  struct ct_counters *_Nullable counters;

  /* Crash-safe resume (file sinks). With `journal_path` set, the loop keeps
   * a small text journal there (format in ct_journal_format.c): the URL, the
   * response's validators, the segment range and `durable`, the file
   * offset up to which the part file holds response bytes. The journal
   * only ever claims bytes that were written and fdatasync'd before it was
   * replaced (temp file + fsync + rename + fsync of the directory), so a
   * kill -9 or a power loss at any moment leaves a journal the next run
   * can trust after truncating the part file to `durable` (segments: after
   * resuming each range from its own journal). It is rewritten when the
   * response head arrives, then at most every `journal_interval_bytes`
   * (0: 64 MiB) or `journal_interval_ms` (0: 1000) of body, and last when
   * the transfer ends: removed after the part file was renamed to
   * sink_path, kept (final count) when the part file is kept. */
  const char *_Nullable journal_path;
  int64_t journal_interval_bytes;
  int64_t journal_interval_ms;
  /* Integrity: the expected SHA-256 (CT_SHA256_LENGTH = 32 raw bytes) of
   * the whole body, hashed on the loop thread as the bytes are written; a
   * resumed transfer instead hashes its whole part file once at commit, on
   * the loop's file worker (the loop never reads the file back).
   * On mismatch the transfer fails with CT_E_CHECKSUM, the message gives
   * both digests and nothing is placed at sink_path. Whole bodies only:
   * with a segment range it is refused (CT_E_INVALID_ARGUMENT). */
  const uint8_t *_Nullable expected_sha256;
  /* Limits on what a server can make us spend, for every sink kind.
   * `max_body_size`: the most body bytes of the final response, counted
   * decoded (as written to the sink) plus resume_offset; 0: no limit. A
   * larger Content-Length fails at the head, a body that grows past it
   * fails in the write callback before the chunk is stored.
   * `max_decode_ratio`: once more than 1 MiB was decoded, the most decoded
   * bytes per body byte received (Content-Encoding); 0: no limit. The
   * default (CT_DEFAULT_DECODE_RATIO, set by ct_transfer_spec_init) is
   * Apache POI's zip-bomb ratio: above what served text reaches (5-50:1),
   * below a deflate bomb (fixed Huffman ~158:1, dynamic ~1030:1, stacked
   * encodings far beyond).
   * Both fail with CT_E_TOO_LARGE; a file sink then removes its part file
   * (or keeps it, trimmed to the bytes written, with KEEP_PARTIAL). */
  int64_t max_body_size;
  int64_t max_decode_ratio;
  /* curl's --resolve (CURLOPT_RESOLVE): "HOST:PORT:ADDR[,ADDR...]"
   * entries, copied, that pin a host name and port to addresses without
   * asking DNS; TLS still verifies HOST. They enter the loop's shared DNS
   * cache, so give every transfer of a loop the same list (a session
   * setting). A bad entry fails the transfer with CT_E_INVALID_REQUEST. */
  const char *_Nullable const *_Nullable resolve;
  size_t resolve_count;
  /* Proxy, as curl's CURLOPT_PROXY: NULL (the default) lets libcurl read
   * http_proxy, https_proxy, all_proxy and no_proxy from the environment;
   * "" uses no proxy and ignores the environment; otherwise
   * "SCHEME://HOST:PORT" with SCHEME http, https (TLS to the proxy),
   * socks5 (names resolved here) or socks5h (by the proxy). Credentials go
   * to the proxy only (Basic for http(s), RFC 1929 for SOCKS5).
   * `no_proxy` is CURLOPT_NOPROXY: comma-separated hosts or domains that
   * bypass it, "*" for all. An https proxy's certificate is verified by
   * OpenSSL against `proxy_ca_file` (NULL: the system anchors) and its
   * host name, never with the origin's pins (see ct_tls.c). A proxy that
   * refuses (a non-2xx CONNECT answer, a 407, a SOCKS refusal) or cannot
   * be resolved fails the transfer with CT_E_PROXY. A string with CR or
   * LF is refused (CT_E_INVALID_REQUEST). */
  const char *_Nullable proxy;
  const char *_Nullable proxy_user;
  const char *_Nullable proxy_password;
  const char *_Nullable no_proxy;
  const char *_Nullable proxy_ca_file;
  /* curl's connection options, all part of the connection profile (a
   * connection made under other values is not reused):
   * `ip_resolve` (ct_ip_version), `unix_socket_path` (connect to this Unix
   * domain socket whatever the URL's host and port; copied),
   * `tls_min` / `tls_max` (ct_tls_version; a TLS handshake outside them
   * fails with CT_E_TLS), `netrc` (ct_netrc) with `netrc_file` (NULL:
   * ~/.netrc; copied), `ciphers` (OpenSSL's cipher list for TLS 1.2 and
   * below, CURLOPT_SSL_CIPHER_LIST) and `tls13_ciphers` (TLS 1.3 suites,
   * CURLOPT_TLS13_CIPHERS), NULL: OpenSSL's defaults; copied. A list with
   * no usable cipher fails the transfer with CT_E_TLS. */
  int32_t ip_resolve;
  const char *_Nullable unix_socket_path;
  int32_t tls_min;
  int32_t tls_max;
  int32_t netrc;
  const char *_Nullable netrc_file;
  const char *_Nullable ciphers;
  const char *_Nullable tls13_ciphers;
  /* curl's --connect-to (CURLOPT_CONNECT_TO): "HOST:PORT:CONNECT-HOST:
   * CONNECT-PORT" entries, copied; a request for HOST:PORT connects to the
   * other pair (an empty field matches any / keeps the original), while
   * TLS and Host: still name HOST. An entry with CR or LF, or without a
   * colon, is refused (CT_E_INVALID_REQUEST). */
  const char *_Nullable const *_Nullable connect_to;
  size_t connect_to_count;
};

#define CT_DEFAULT_DECODE_RATIO 100

/* Fill a spec with defaults (GET, memory sink, 30 s connect timeout,
 * decode ratio CT_DEFAULT_DECODE_RATIO, no body size limit). */
void ct_transfer_spec_init(struct ct_transfer_spec *_Nonnull spec);

/**
 * The mode a downloaded file gets when it is placed at its final name:
 * 0666 without the process's umask, as open(2) gives curl's output files
 * (0644 under the usual umask 022). Part files and journals stay 0600.
 * Safe from any thread: the umask is read from /proc/self/status, never
 * set; without it (Linux before 4.7, no /proc) the umask is taken as 022.
 */
unsigned int ct_file_placed_mode(void);

#ifdef __cplusplus
}
#endif
#endif /* CT_TRANSFER_H */
