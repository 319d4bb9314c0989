/*
 * ct_types.h - codes, results and the callback table of the transfer engine.
 *
 * Nothing here includes libcurl or OpenSSL: Swift imports this header as it
 * is, and the engine's dependencies stay private to the .c files.
 */
#ifndef CT_TYPES_H
#define CT_TYPES_H

/* The engine is built on Linux interfaces (epoll, eventfd, timerfd,
 * netlink). Every source of the engine, and Swift's import of it, includes
 * this header: a build anywhere else stops here, with what to do. */
#if !defined(__linux__)
#error "Transfer builds on Linux only (its engine uses epoll, eventfd, timerfd and netlink). On macOS or Windows, build and test it in a Linux container: see docs/PLATFORMS.md and the Dockerfile at the top of the repository."
#endif

#include <stddef.h>
#include <stdint.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if !__has_feature(nullability)
#define _Nonnull
#define _Nullable
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Stable codes: never renumbered, new ones are appended. */
typedef enum ct_code {
  CT_OK = 0,
  CT_E_INVALID_ARGUMENT = 1,  /* a NULL or out-of-range argument (our bug) */
  CT_E_NO_MEMORY = 2,
  CT_E_INVALID_REQUEST = 3,   /* bad URL, scheme, header, method */
  CT_E_CANNOT_CONNECT = 4,    /* DNS, refused, unreachable */
  CT_E_TIMED_OUT = 5,
  CT_E_TLS = 6,               /* handshake failed, untrusted chain */
  CT_E_SERVER_TRUST = 7,      /* refused by the pinning policy */
  CT_E_TOO_MANY_REDIRECTS = 8,
  CT_E_REDIRECT_REFUSED = 9,  /* e.g. to a non-HTTP scheme */
  CT_E_TRUNCATED = 10,        /* body shorter than announced */
  CT_E_BAD_RESPONSE = 11,     /* garbage status line or headers */
  CT_E_CANCELLED = 12,
  CT_E_SINK_IO = 13,          /* writing the destination failed: errno */
  CT_E_SOURCE_IO = 14,        /* reading the upload body failed: errno */
  CT_E_CHECKSUM = 15,         /* body digest differs from the expected one */
  CT_E_TRANSPORT = 16,        /* any other network failure: curl_code */
  CT_E_SHUTDOWN = 17,         /* the loop is shutting down or gone */
  CT_E_SYSTEM = 18,           /* epoll, eventfd, thread creation: errno */
  CT_E_UNSUPPORTED = 19,      /* libcurl lacks a feature we need */
  CT_E_NOT_FOUND = 20,        /* no transfer with that id */
  CT_E_HTTP_STATUS = 21,      /* used by higher layers only */
  CT_E_TOO_LARGE = 22,        /* body over max_body_size / decode ratio */
  CT_E_INTERNAL = 23,         /* libcurl misused or refused to start: a bug */
  CT_E_PROXY = 24,            /* the proxy refused, wants credentials, or
                               * its name does not resolve */
  CT_E_EMPTY_REPLY = 25,      /* the server closed the connection without
                               * sending a byte of response */
  CT_E_TOO_MANY_OPEN_FILES = 26  /* a socket or file could not be opened:
                                  * the process's descriptor limit
                                  * (RLIMIT_NOFILE, EMFILE) or the system's
                                  * file table (ENFILE); sys_errno says
                                  * which, the message names the limit */
} ct_code;

/* Why the trust evaluation refused a chain (ct_result.tls_reason). */
typedef enum ct_tls_reason {
  CT_TLS_OK = 0,
  CT_TLS_CHAIN_INVALID = 1,     /* OpenSSL rejected it; see verify_error */
  CT_TLS_HOSTNAME_MISMATCH = 2,
  CT_TLS_NO_PIN_MATCHED = 3,
  CT_TLS_POLICY_INVALID = 4,    /* the policy itself is refused */
  CT_TLS_REJECTED_BY_DELEGATE = 5,
  CT_TLS_HANDSHAKE = 6,         /* the handshake failed before evaluation */
  CT_TLS_CHALLENGE_TIMED_OUT = 7  /* the challenge handler gave no answer in
                                   * time: refused (fail closed) */
} ct_tls_reason;

/* Per-transfer timings, seconds from the start of the transfer; -1 unknown. */
struct ct_metrics {
  double queued;           /* submit -> added to curl (on the loop) */
  double name_lookup;
  double connect;
  double tls;              /* appconnect; 0 for plain HTTP */
  double request_sent;     /* pretransfer */
  double first_byte;       /* starttransfer */
  double total;
  double redirect;
  int64_t redirect_count;
  int64_t header_bytes;
  int64_t request_bytes;   /* bytes of request headers sent */
  int64_t body_bytes_sent;
  int64_t body_bytes_received;  /* decoded body bytes */
  int32_t http_version;    /* 10, 11, 20, 30; 0 unknown */
  int32_t reused_connection;    /* 1 when no new connection was made */
  int32_t remote_port;
  int32_t local_port;
  char remote_ip[64];
  char local_ip[64];
};

/* The outcome of a finished transfer, handed to on_finish. */
struct ct_result {
  ct_code code;
  int32_t curl_code;       /* CURLcode, 0 if libcurl was not the cause */
  int32_t sys_errno;       /* from the sink, the source or a syscall */
  int32_t tls_reason;      /* ct_tls_reason */
  int32_t verify_error;    /* X509_V_ERR_* when tls_reason says chain */
  long http_status;
  int64_t bytes_on_disk;   /* file sinks: bytes durably in the file */
  int64_t resume_offset;   /* the offset the transfer started at */
  int64_t write_buffer_peak;  /* file sinks: the largest write buffer held
                               * (it starts at 64 KiB and doubles while it
                               * fills within 100 ms); 0: never needed */
  const char *_Nullable effective_url;
  const char *_Nullable redirect_url;  /* Location when not followed */
  const char *_Nullable etag;          /* validators of the response */
  const char *_Nullable last_modified;
  const char *_Nullable file_path;     /* file sinks: final or kept path */
  /* Memory sinks: the body. Ownership moves to the callee, who releases
   * it with ct_buffer_free(); NULL when empty or not a memory sink. */
  void *_Nullable body;
  size_t body_length;
  struct ct_metrics metrics;
  char message[256];       /* CURLOPT_ERRORBUFFER, OpenSSL or strerror */
};

/* Response head: the final response's status line and headers. */
struct ct_response_head {
  long status;
  int32_t http_version;
  int64_t content_length;  /* -1 when unknown */
  int64_t resume_offset;   /* > 0 when a 206 continues a partial file */
  const char *_Nonnull effective_url;
  int32_t url_unchanged;   /* 1: effective_url is the spec's url, byte for
                              byte (no redirect): an owner that has the
                              request's URL need not copy or parse it */
  const char *_Nonnull raw_headers;  /* "Name: value\r\n" lines */
  size_t raw_headers_length;
  uint32_t set_cookie_lines;  /* lines named Set-Cookie among them: a
                                 cookie store need not scan the block
                                 when 0 */
};

/* A progress snapshot (copied by the callee). */
struct ct_progress {
  int64_t bytes_sent;
  int64_t bytes_expected_to_send;      /* -1 unknown */
  int64_t bytes_received;              /* includes resume_offset */
  int64_t bytes_expected_to_receive;   /* -1 unknown; includes offset */
  double elapsed;                      /* seconds since start */
};

/*
 * Callbacks into the owner of a transfer. All run on the loop thread and
 * must return quickly: copy what you need and hop to your own queue. They
 * must not call back into the loop synchronously except through
 * ct_loop_* command functions, which only enqueue.
 *
 * `ctx` is the pointer given to ct_loop_submit.
 */
/* on_read's answer when no bytes are buffered yet (see below). */
#define CT_READ_PAUSE (-2)
/* on_data's answers (see below). */
#define CT_DATA_CONTINUE 0
#define CT_DATA_PAUSE 1

struct ct_callbacks {
  /* The final response head is complete (after redirects). Optional. */
  void (*_Nullable on_response)(void *_Nullable ctx,
                                const struct ct_response_head *_Nonnull head);
  /* Throttled progress (see ct_transfer_spec.progress_interval_ms). */
  void (*_Nullable on_progress)(void *_Nullable ctx,
                                const struct ct_progress *_Nonnull progress);
  /* Body chunks, only for CT_SINK_STREAM. The bytes are valid only during
   * the call. Return CT_DATA_CONTINUE, or CT_DATA_PAUSE when the owner
   * cannot take more for now: this chunk is taken, and the transfer holds
   * every later one (CT_PAUSE_CONSUMER; libcurl keeps at most the one
   * read it has, and stops reading the socket) until the owner calls
   * ct_loop_consumer_ready(). */
  int32_t (*_Nullable on_data)(void *_Nullable ctx,
                               const void *_Nonnull bytes, size_t length);
  /* Exactly once per submitted transfer, last of all its callbacks. The
   * result (and the strings it points to) are valid only during the call;
   * `body` is moved to the callee. */
  void (*_Nullable on_finish)(void *_Nullable ctx,
                              const struct ct_result *_Nonnull result);
  /* Pull source for CT_BODY_PULL: fill up to `capacity` bytes, return the
   * count, 0 at the end, -1 on error, or CT_READ_PAUSE when nothing is
   * buffered yet: the transfer's upload then waits (other transfers go
   * on) until the owner calls ct_loop_body_ready(). Runs on the loop
   * thread and must not block: read slow streams on a thread of your own
   * into a buffer this callback drains. */
  int64_t (*_Nullable on_read)(void *_Nullable ctx, void *_Nonnull buffer,
                               size_t capacity);
  /* Pull source rewind (after a redirect or auth retry): 0 ok, -1 cannot.
   * Must not block either: drop what is buffered and answer at once; the
   * reads that follow may return CT_READ_PAUSE until the new stream has
   * bytes (or -1 if no new stream can be had). */
  int32_t (*_Nullable on_rewind)(void *_Nullable ctx);
  /* After each pass over ready events, with ct_loop_config.batch_ctx: the
   * moment to hand over, in one go, whatever the callbacks above queued.
   * Optional. */
  void (*_Nullable on_batch_end)(void *_Nullable batch_ctx);
  /* Once, on the loop thread, as the last call with batch_ctx: after the
   * last on_batch_end, when the loop thread is about to exit. The place to
   * release what batch_ctx holds. Optional. */
  void (*_Nullable on_loop_end)(void *_Nullable batch_ctx);
  /* One line of libcurl's verbose trace (CT_FLAG_TRACE only), without its
   * line end: `kind` is a ct_debug_kind. The values of Authorization,
   * Cookie, Proxy-Authorization and Set-Cookie are already replaced by
   * "[redacted]"; body bytes never come here. `line` is valid only during
   * the call. Optional. */
  void (*_Nullable on_debug)(void *_Nullable ctx, int32_t kind,
                             const char *_Nonnull line, size_t length);
  /* libcurl is about to follow a redirect (CT_FLAG_FOLLOW_REDIRECTS):
   * `status` of the hop, the URL it came from, and its Location value as
   * sent (maybe relative). The strings are valid only during the call.
   * Optional. */
  void (*_Nullable on_redirect)(void *_Nullable ctx, long status,
                                const char *_Nonnull from,
                                const char *_Nonnull location);
};

/* What one on_debug line is. */
typedef enum {
  CT_DEBUG_TEXT = 0,         /* libcurl's own "* ..." messages */
  CT_DEBUG_HEADER_IN = 1,    /* a response header line ("< ...") */
  CT_DEBUG_HEADER_OUT = 2    /* a request header line ("> ...") */
} ct_debug_kind;

/* Redacts the credential values in one header or trace line, in place:
 * the values of Authorization, Cookie, Proxy-Authorization, Set-Cookie and
 * of any header whose name contains token, secret, key, auth, session,
 * passw, pwd, cookie, credential or signature in any case, except
 * WWW-Authenticate and Proxy-Authenticate (at the line start, or inside "[name: value]" as HTTP/2 traces write
 * them) become "[redacted]". Writes at most `cap` bytes (NUL included)
 * to `out` and returns the length written, without the NUL. */
size_t ct_debug_redact(const char *_Nonnull line, size_t length,
                       char *_Nonnull out, size_t cap);

/* Release a body handed over in ct_result.body. Accepts NULL. */
void ct_buffer_free(void *_Nullable body);

/* The class of a CURLcode with no transfer state (the one table of
 * ct_error.c); for tools that only have the number. */
ct_code ct_code_for_curl_code(int32_t curl_code);
/* The same for a CURLMcode (a failed curl_multi_* call). */
ct_code ct_code_for_curl_multi_code(int32_t multi_code);

/* A stable name for a code ("timed_out"), never NULL. */
const char *_Nonnull ct_code_name(ct_code code);

#ifdef __cplusplus
}
#endif
#endif /* CT_TYPES_H */
