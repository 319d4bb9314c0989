/*
 * ct_loop.h - the engine: one event-loop thread, its lifecycle and the
 * commands other threads send it.
 *
 * Every function here is safe from any thread unless it says otherwise.
 * Commands are queued and executed on the loop thread, where every libcurl
 * call happens; a function returning CT_OK means "queued", and the effect
 * shows in the callbacks of the transfer concerned.
 */
#ifndef CT_LOOP_H
#define CT_LOOP_H

#include "ct_transfer.h"

struct ct_cookie_jar;   /* ct_cookies.h */

#ifdef __cplusplus
extern "C" {
#endif

struct ct_loop;

/*
 * The phase of a transfer (ct_phase.c). Every transfer moves forward
 * through these, one setter at a time, and ends in CT_PHASE_DONE:
 *
 *   QUEUED      submitted; not yet handed to libcurl (in the command queue).
 *   CONNECTING  in libcurl's multi handle, no response head being read:
 *               waiting for a connection slot, resolving, connecting, TLS,
 *               sending the request (and its body), waiting for a status
 *               line; also between the hops of a redirect or after a 1xx.
 *   HEAD        a status line came; the rest of its head has not.
 *   CHALLENGED  a whole 401 head came for a transfer with credentials:
 *               libcurl may answer it itself (Digest, or Basic it did not
 *               send up front) and decides only after the head. A new
 *               status line means it did (back to HEAD); a body byte or the
 *               end of the transfer means the 401 is final.
 *   DECIDING    the final head was delivered (on_response) and the owner
 *               asked to answer it (CT_FLAG_AWAIT_DISPOSITION): no body byte
 *               is passed on until ct_loop_set_disposition().
 *   RECEIVING   the final head was delivered; the body flows.
 *   FINISHING   out of libcurl: the outcome is decided and the result
 *               built; on_finish is called here, unless a file job is due.
 *   COMMITTING  a download's file job runs on the worker thread (fsync,
 *               rename and folder fsync of a success; removing or syncing
 *               the part file and the journal's last write of a failure).
 *               The loop does not touch the sink, report or free the
 *               transfer until the job is done; on_finish follows it. A
 *               cancel that comes now still wins over a commit that has not
 *               renamed yet.
 *   DONE        retired: the easy handle went back to the pool or was
 *               cleaned up; the transfer is about to be freed.
 *
 * Legal moves: QUEUED -> CONNECTING | FINISHING; CONNECTING -> HEAD |
 * DECIDING | RECEIVING | FINISHING; HEAD -> CONNECTING (1xx, redirect) |
 * CHALLENGED | DECIDING | RECEIVING | FINISHING; CHALLENGED -> HEAD |
 * DECIDING | RECEIVING | FINISHING; DECIDING -> RECEIVING | FINISHING;
 * RECEIVING -> FINISHING; FINISHING -> COMMITTING | DONE; COMMITTING ->
 * DONE.
 *
 * Pausing is not a phase but a set of reasons (CT_PAUSE_*) beside it: a
 * transfer may be paused while connecting (an upload held by its rate) or
 * while deciding or receiving. libcurl is paused while any reason is set
 * and resumed only when the last one clears.
 */
typedef enum ct_phase {
  CT_PHASE_QUEUED = 0,
  CT_PHASE_CONNECTING = 1,
  CT_PHASE_HEAD = 2,
  CT_PHASE_CHALLENGED = 3,
  CT_PHASE_DECIDING = 4,
  CT_PHASE_RECEIVING = 5,
  CT_PHASE_FINISHING = 6,
  CT_PHASE_COMMITTING = 7,
  CT_PHASE_DONE = 8
} ct_phase;

#define CT_PAUSE_USER        (1u << 0)   /* ct_loop_pause() */
#define CT_PAUSE_DISPOSITION (1u << 1)   /* body came while DECIDING */
#define CT_PAUSE_RATE        (1u << 2)   /* over a speed limit, for now */
#define CT_PAUSE_SOURCE      (1u << 3)   /* reserved: body source empty */
#define CT_PAUSE_FILE        (1u << 4)   /* the head's file work (journal,
                                            digest of a resumed prefix)
                                            runs on the worker: set when
                                            it is handed over, cleared
                                            when it is done */
#define CT_PAUSE_CONSUMER    (1u << 5)   /* on_data asked to stop: the
                                            owner's buffer is full, until
                                            ct_loop_consumer_ready() */

/* One change of phase or of pause reasons, for tracing. */
struct ct_phase_event {
  uint64_t id;                 /* the transfer */
  ct_phase from;
  ct_phase to;                 /* == from when only the reasons changed */
  uint32_t paused_before;      /* CT_PAUSE_* bits */
  uint32_t paused_after;
  const char *_Nonnull why;    /* static text, e.g. "status line" */
};

/* "queued", "connecting", ...; "?" for a value out of range. */
const char *_Nonnull ct_phase_name(ct_phase phase);

struct ct_loop_config {
  struct ct_callbacks callbacks;       /* shared by all transfers */
  void *_Nullable batch_ctx;           /* for callbacks.on_batch_end */
  /* PEM bundle of trust anchors, loaded once and shared by every TLS
   * connection of the loop. NULL: the system bundle. */
  const char *_Nullable ca_file;
  /* 0: unlimited. Transfers that take a connection each (HTTP/1.x) wait
   * in the loop, first come first served, while this many of their origin
   * run (ct_origin.c); HTTP/2 ones wait in libcurl
   * (CURLMOPT_MAX_HOST_CONNECTIONS, not first come first served). */
  int64_t max_connections_per_host;
  /* 0: unlimited; else libcurl's CURLMOPT_MAX_TOTAL_CONNECTIONS (the
   * transfers beyond it wait in libcurl, connecting). Independently the
   * loop admits transfers only within the open-file limit's share
   * (ct_connection_budget, below) and queues the others. */
  int64_t max_total_connections;
  int64_t max_concurrent_streams;      /* HTTP/2; 0: libcurl's default */
  /* Idle connections kept for reuse (CURLMOPT_MAXCONNECTS); 0:
   * CT_DEFAULT_IDLE_CONNECTIONS. Lowered to a third of the open-file
   * limit's spare descriptors when that is less (ct_connection_budget). */
  int64_t max_idle_connections;
  int32_t multiplex;                   /* 1: HTTP/2 multiplexing (default) */
  int32_t share_tls_sessions;          /* 1: resume TLS sessions (default) */
  /* Shared bandwidth limit over all transfers of the loop, bytes/s. */
  int64_t max_total_recv_speed;
  int64_t max_total_send_speed;
  /* Called on the loop thread for every phase and pause change of every
   * transfer, in order, with `batch_ctx`; NULL: none. It may run inside
   * libcurl callbacks: it must not block, and may only queue commands.
   * For the engine's tests: only builds with CT_TEST_HOOKS (debug builds,
   * Package.swift) call it; a release build ignores it.
   * Independently, CT_TRACE_PHASES=1 in the environment (read when the
   * loop is created) prints each change to stderr. */
  void (*_Nullable on_phase)(void *_Nullable batch_ctx,
                             const struct ct_phase_event *_Nonnull event);
  /* The cookie jar of transfers with CT_FLAG_COOKIES(_READ_ONLY); NULL:
   * none. The loop holds a reference (ct_cookie_jar_retain) until freed. */
  struct ct_cookie_jar *_Nullable cookie_jar;
};

void ct_loop_config_init(struct ct_loop_config *_Nonnull config);

/* Descriptors kept free for the rest of the process (its files, pipes and
 * logs, libcurl's resolver, the file worker's journal writes) when sizing
 * the descriptor budget. */
#define CT_FD_RESERVE 16
/* The idle connections kept for reuse when max_idle_connections is 0. */
#define CT_DEFAULT_IDLE_CONNECTIONS 256

/**
 * The admission rule, given the soft RLIMIT_NOFILE `soft_limit` (0: no
 * limit), the descriptors `in_use` when the loop is created and the idle
 * connections wanted `idle_wanted` (max_idle_connections; 0 or less:
 * CT_DEFAULT_IDLE_CONNECTIONS). With spare = soft_limit - in_use -
 * CT_FD_RESERVE (0 when negative):
 *
 *   idle        = max(1, min(idle_wanted, spare / 3))
 *   descriptors = max(1, spare - idle)
 *
 * `descriptors` is what running transfers may hold at once: each admitted
 * transfer counts one for its socket and one more for each file it has
 * open (a file sink's part file, a file upload's body), see
 * ct_transfer_descriptors(). `idle` caps the connections libcurl keeps for
 * reuse (CURLMOPT_MAXCONNECTS), so idle + running + CT_FD_RESERVE stay
 * under the limit. A transfer that does not fit waits queued in the loop,
 * holding no descriptor, instead of failing with EMFILE; when nothing
 * else runs it is admitted whatever it counts, so one that can never fit
 * tries and fails with CT_E_TOO_MANY_OPEN_FILES naming the limit.
 * No soft limit: descriptors 0 (no budget) and idle = idle_wanted.
 * Pure; any thread. ct_loop_create applies it with getrlimit() and the
 * count of /proc/self/fd. A configured max_total_connections is libcurl's
 * own cap (CURLMOPT_MAX_TOTAL_CONNECTIONS), apart from this rule.
 */
struct ct_fd_budget {
  int64_t descriptors;   /* for running transfers; 0: no budget */
  int64_t idle;          /* CURLMOPT_MAXCONNECTS, at least 1 */
};
struct ct_fd_budget ct_connection_budget(int64_t idle_wanted,
                                         uint64_t soft_limit,
                                         uint64_t in_use);

/* The descriptors a transfer of this kind counts against the budget while
 * admitted: 1 (its socket), +1 for a file sink, +1 for a file body.
 * Pure; any thread. */
int64_t ct_transfer_descriptors(ct_sink_kind sink, ct_body_kind body);

/* The soft RLIMIT_NOFILE of the process now; 0: no limit. Any thread. */
uint64_t ct_open_file_limit(void);

/**
 * The budget the loop uses (ct_connection_budget at creation): its
 * descriptors for running transfers (0: unlimited), and in `*idle` (when
 * not NULL) its cap on idle connections. Any thread.
 */
int64_t ct_loop_connection_budget(const struct ct_loop *_Nonnull loop,
                                  int64_t *_Nullable idle);

/* Descriptors the loop's admitted transfers count now (loop thread's
 * counter, read atomically). Any thread. */
int64_t ct_loop_descriptors_admitted(const struct ct_loop *_Nonnull loop);

/**
 * Create a loop and start its thread. On CT_OK `*out` owns the loop until
 * ct_loop_destroy(). Fails with CT_E_INVALID_ARGUMENT for a NULL argument,
 * CT_E_NO_MEMORY, CT_E_SYSTEM if the kernel refuses an fd or the thread,
 * or the code of a failed libcurl start (CT_E_UNSUPPORTED: too old or
 * missing a feature) or CA bundle load; `*out` is NULL then. No errno is
 * reported; CT_E_TOO_MANY_OPEN_FILES when the loop's own descriptors
 * (epoll, eventfd, timerfd) hit the descriptor limit.
 */
ct_code ct_loop_create(const struct ct_loop_config *_Nonnull config,
                       struct ct_loop *_Nullable *_Nonnull out);

/**
 * Stop the loop: every transfer still queued or running finishes exactly
 * once with CT_E_CANCELLED, then the thread exits and everything is freed.
 * From any other thread it blocks until done. From a callback on the loop
 * thread itself (say on_finish dropping the last reference to its owner)
 * it only marks the loop stopping and returns: the loop thread finishes
 * the transfers, calls on_batch_end and on_loop_end, frees the loop and
 * exits on its own. Either way the caller must not use `loop` again.
 */
void ct_loop_destroy(struct ct_loop *_Nullable loop);

/**
 * Stop the loop without freeing it: every transfer still queued or running
 * finishes exactly once with CT_E_CANCELLED, the thread exits, and the
 * connections, the DNS cache and the loop's epoll and timer descriptors are
 * released before it returns. Every later command fails with CT_E_SHUTDOWN
 * (the loop's memory stays valid for them); ct_loop_destroy() frees the
 * rest. Blocks until done; from the loop thread itself, or on a loop
 * already stopped, it does nothing. Not concurrently with ct_loop_destroy().
 */
void ct_loop_stop(struct ct_loop *_Nonnull loop);

/**
 * Queue a transfer on the loop. Safe from any thread.
 *
 * On CT_OK, `on_finish` runs exactly once on the loop thread and `ctx`
 * stays borrowed until then; `*out_id` names the transfer in later
 * commands. On any other code nothing was queued, no callback will run,
 * and the caller still owns `ctx`. Spec errors that need libcurl to find
 * (a bad URL, say) are reported through on_finish.
 */
ct_code ct_loop_submit(struct ct_loop *_Nonnull loop,
                       const struct ct_transfer_spec *_Nonnull spec,
                       void *_Nullable ctx, uint64_t *_Nonnull out_id);

/**
 * Queue `count` transfers on the loop in one command: one lock, one wake-up.
 * Safe from any thread (from a loop callback too: they start on the next
 * pass). `ctxs[i]` goes with `specs[i]`; `out_ids[i]` receives its id.
 *
 * All or nothing. On CT_OK each transfer's `on_finish` runs exactly once on
 * the loop thread and every ctx stays borrowed until then. On any other code
 * nothing was queued, no callback will run, the caller still owns every ctx
 * and `out_ids` is all zeros. `count` 0 is CT_OK and does nothing.
 */
ct_code ct_loop_submit_batch(struct ct_loop *_Nonnull loop,
                             const struct ct_transfer_spec *_Nonnull specs,
                             void *_Nullable const *_Nonnull ctxs,
                             size_t count, uint64_t *_Nonnull out_ids);

/** Cancel: finishes with CT_E_CANCELLED. With `keep_partial`, a file sink
 * keeps its part file flushed and fsync'd, and the result says how many
 * bytes it holds (for resume data). Unknown ids give CT_E_NOT_FOUND only
 * when the id was never issued; a finished id is ignored (CT_OK).
 *
 * A download whose body is complete is committed on the file worker
 * (FINISHING: checksum, fsync, rename into place). A cancel that reaches
 * the loop during the commit still wins if the worker has not begun to
 * move the file into place: the result is CT_E_CANCELLED, the destination
 * is not touched, and the part file (and journal) are kept or removed by
 * `keep_partial` exactly as for a cancel while receiving (as URLSession:
 * the file was never delivered). Once the worker has begun the rename the
 * cancel is ignored and the result is the commit's. Other finishing
 * transfers (failed, or not file sinks) ignore a cancel. */
ct_code ct_loop_cancel(struct ct_loop *_Nonnull loop, uint64_t id,
                       int32_t keep_partial);

/** Pause both directions of a running transfer without closing its
 * connection; resume continues where it stopped. A transfer still
 * waiting to start (held for its origin's connection limit or the
 * descriptor budget) starts paused. A pause racing with the transfer's
 * end does nothing: to start a transfer paused for certain, submit it
 * with CT_FLAG_START_PAUSED. */
ct_code ct_loop_pause(struct ct_loop *_Nonnull loop, uint64_t id);
ct_code ct_loop_resume(struct ct_loop *_Nonnull loop, uint64_t id);

/** A CT_BODY_PULL transfer whose on_read returned CT_READ_PAUSE has
 * bytes (or its end, or an error) to give now: call on_read again. Safe
 * from any thread; ignored when the transfer is not waiting for its body
 * or has finished. */
ct_code ct_loop_body_ready(struct ct_loop *_Nonnull loop, uint64_t id);

/** A CT_SINK_STREAM transfer whose on_data returned CT_DATA_PAUSE may
 * deliver chunks again: the owner's consumer drained its buffer. Clears
 * CT_PAUSE_CONSUMER; libcurl resumes unless another reason (user, rate)
 * still holds the transfer. Safe from any thread; ignored when the
 * transfer is not held by its consumer or has finished. The reason is
 * set on the loop thread in the callback that got CT_DATA_PAUSE, and
 * this command runs on the loop thread after that callback returns, so
 * a wake-up is never lost. */
ct_code ct_loop_consumer_ready(struct ct_loop *_Nonnull loop, uint64_t id);

typedef enum ct_disposition {
  CT_DISPOSITION_ALLOW = 0,
  CT_DISPOSITION_CANCEL = 1,
  CT_DISPOSITION_BECOME_FILE = 2  /* switch the sink to a file at `path` */
} ct_disposition;

/** Answer a transfer submitted with CT_FLAG_AWAIT_DISPOSITION after its
 * on_response. `path` is copied; it names the part file for BECOME_FILE. */
ct_code ct_loop_set_disposition(struct ct_loop *_Nonnull loop, uint64_t id,
                                ct_disposition disposition,
                                const char *_Nullable path);

/** Change a transfer's receive/send limit while it runs (0: unlimited). */
ct_code ct_loop_set_speed_limit(struct ct_loop *_Nonnull loop, uint64_t id,
                                int64_t max_recv, int64_t max_send);

/** Change the loop-wide shared limit (token bucket over all transfers). */
ct_code ct_loop_set_total_speed_limit(struct ct_loop *_Nonnull loop,
                                      int64_t max_recv, int64_t max_send);

/* Introspection for tests: transfers queued or running, and the number of
 * loop iterations (epoll returns) so far. Relaxed reads. */
int64_t ct_loop_active_count(const struct ct_loop *_Nonnull loop);
uint64_t ct_loop_wakeups(const struct ct_loop *_Nonnull loop);

/* The connection pool at a glance, for metrics gauges (relaxed reads, any
 * thread, no lock; the fields are read one by one, not as one snapshot):
 * sockets the engine's transfers opened and that are not closed yet (in use
 * or idle in libcurl's pool); transfers submitted and not finished; and of
 * those, transfers waiting in the loop for a connection under the
 * open-file budget (ct_fdlimit.c) or their origin's connection limit
 * (max_connections_per_host, ct_origin.c). */
struct ct_pool_stats {
  int64_t open_connections;
  int64_t active_transfers;
  int64_t queued_transfers;
};
void ct_loop_pool_stats(const struct ct_loop *_Nonnull loop,
                        struct ct_pool_stats *_Nonnull out);
/* Introspection for tests: the per-origin records of the connection limit
 * (ct_origin.c). `records` in the table, `idle` of them kept with no
 * transfer for reuse (at most CT_ORIGIN_IDLE_MAX, the most recently used),
 * `allocated` ever. Relaxed reads, any thread. */
#define CT_ORIGIN_IDLE_MAX 64
struct ct_origin_stats {
  int64_t records;
  int64_t idle;
  int64_t allocated;
};
void ct_loop_origin_stats(const struct ct_loop *_Nonnull loop,
                          struct ct_origin_stats *_Nonnull out);
/* Introspection for tests: how often the loop drove a TLS connection again
 * because OpenSSL held records read ahead that epoll cannot report (bulk
 * HTTPS bodies, ct_tls_read.c). Relaxed read, any thread. */
uint64_t ct_loop_tls_redrives(const struct ct_loop *_Nonnull loop);
/* How many finished transfers a TLS connection still pointed into (their
 * trust verdict) when they were freed: the handshake never reported its
 * end to the trust hook. The pointer is cleared then; 0 is the healthy
 * value. Relaxed read, any thread. */
uint64_t ct_loop_tls_verdicts_released(const struct ct_loop *_Nonnull loop);
/* How many times the re-drive looked at a connection (only read-ahead
 * connections whose socket libcurl polls are looked at). Relaxed read,
 * any thread. */
uint64_t ct_loop_tls_redrive_checks(const struct ct_loop *_Nonnull loop);
/* curl_easy_setopt calls made so far: a handle reused for the same option
 * profile is given only the per-request options (ct_pool.c). */
uint64_t ct_loop_setopt_calls(const struct ct_loop *_Nonnull loop);
/* epoll_ctl calls made for curl's sockets so far: a keep-alive connection
 * stays in the epoll set between its transfers (ct_watch.c). */
uint64_t ct_loop_epoll_ctl_calls(const struct ct_loop *_Nonnull loop);
/* Bytes of part files read back to hash them: a resumed download with an
 * expected SHA-256 reads its prefix once, at the head, on the worker. */
uint64_t ct_loop_checksum_bytes_read(const struct ct_loop *_Nonnull loop);
/* Phase changes refused as illegal (see ct_phase): 0 unless the engine has
 * a bug. Debug builds assert instead; release builds ignore the change. */
uint64_t ct_loop_illegal_transitions(const struct ct_loop *_Nonnull loop);

/* libcurl's version string, for diagnostics. */
const char *_Nonnull ct_curl_version(void);

/* 1 when the libcurl in use was built with libpsl (CURL_VERSION_PSL): its
 * cookie engine then refuses a Set-Cookie whose Domain is a public suffix
 * (Domain=co.uk). 0 without it, or when libcurl failed to initialise.
 * Safe from any thread; initialises libcurl once if no loop has. */
int ct_curl_has_psl(void);
/* libcurl's features as `curl --version` names them ("alt-svc AsynchDNS
 * HTTP2 ..."), space-separated. A static string built on the first call;
 * safe from any thread. */
const char *_Nonnull ct_curl_features(void);

#ifdef __cplusplus
}
#endif
#endif /* CT_LOOP_H */
