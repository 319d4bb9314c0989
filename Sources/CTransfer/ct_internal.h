/* ct_internal.h - private declarations shared by the engine's .c files. */
#ifndef CT_INTERNAL_H
#define CT_INTERNAL_H

#include "CTransfer.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "ct_tls_internal.h"

#define CTI_DEFAULT_SINK_BUFFER (2u * 1024u * 1024u)  /* the ceiling */
/* A file sink's write buffer starts small and doubles, up to its ceiling,
 * each time it fills faster than CTI_SINK_GROW_NS: a slow or small
 * download holds 64 KiB, only a fast bulk one reaches the ceiling. */
#define CTI_FIRST_SINK_BUFFER (64u * 1024u)
#define CTI_SINK_GROW_NS 100000000ull
/* Growth past 64 KiB comes out of one budget for the whole process: a few
 * bulk downloads get 2 MiB each, a hundred parallel ones do not make a
 * hundred 2 MiB buffers. */
#define CTI_SINK_GROWTH_BUDGET (8 * 1024 * 1024)
#define CTI_DIRECT_WRITE (256u * 1024u)   /* chunks this big skip the buffer */
#define CTI_DEFAULT_CONNECT_TIMEOUT_MS 30000
#define CTI_DEFAULT_PROGRESS_MS 16
#define CTI_FILE_READ_BLOCK (2u * 1024u * 1024u)
#define CTI_EASY_POOL 256
#define CTI_BIG_RECV_BUFFER (512u * 1024u)  /* file, discard: bulk bodies */
/* Only this many bulk transfers of a loop at once get the big receive
 * buffer (libcurl allocates it per transfer); the others share the
 * bandwidth anyway and get CTI_MID_RECV_BUFFER. */
#define CTI_BIG_RECV_SLOTS 8
#define CTI_MID_RECV_BUFFER (64u * 1024u)
/* OpenSSL's read buffer on bulk TLS connections (ct_tls_read.c): one
 * recv() brings up to four 16 KiB records. */
#define CTI_TLS_READ_AHEAD (64u * 1024u)
/* Limits: memory and disk follow the bytes that really came,
 * never what the server announced. */
#define CTI_MEM_FIRST_RESERVE (1u << 20)    /* memory sink, from a length */
#define CTI_PREALLOC_FIRST ((int64_t)16 << 20)  /* file, first reservation */
#define CTI_PREALLOC_MARGIN ((int64_t)256 << 20) /* free space left alone */
#define CTI_DECODE_RATIO_FLOOR ((int64_t)1 << 20)
/* The file sink checks that its part file is still linked this often. */
#define CTI_SINK_LINK_CHECK ((int64_t)16 << 20)

/* --- ct_sink.c --------------------------------------------------------- */

struct cti_sink {
  ct_sink_kind kind;
  /* memory */
  char *mem;
  size_t mem_len;
  size_t mem_cap;
  size_t mem_hint;      /* announced length: grow to it, not past it */
  /* file */
  int fd;
  char *path;           /* final destination, NULL: keep the part file */
  char *part_path;
  char *buf;
  size_t buf_len;
  size_t buf_cap;       /* the buffer's size now */
  size_t buf_max;       /* its ceiling (spec's sink_buffer_size) */
  size_t buf_peak;      /* the largest size it had (ct_result) */
  uint64_t buf_since;   /* CLOCK_MONOTONIC_COARSE ns it was last empty */
  int64_t base;         /* file offset of buf[0] */
  int64_t durable;      /* bytes [start, durable) written to the fd */
  int64_t start;        /* offset this sink began writing at */
  int sys_errno;
  const char *failed;   /* what failed, "cannot fsync the part file"... */
  int created;          /* we created the part file */
  int vanished;         /* the part file was unlinked under us */
  int no_sync;          /* CT_FLAG_NO_SYNC: neither write-back nor fsync */
  int64_t checked;      /* offset of the last check that it is linked */
  int64_t prealloc_goal;  /* announced end of file; 0: do not reserve */
  int64_t prealloc_end;   /* blocks reserved (KEEP_SIZE) up to here */
};

void cti_sink_init(struct cti_sink *sink);
/* How cti_sink_open_file treats what the part file already holds. */
#define CTI_SINK_KEEP     0   /* a segment: other ranges live there too */
#define CTI_SINK_TRUNCATE 1   /* start from an empty file */
#define CTI_SINK_TRIM     2   /* resume: cut to `offset`, fail if shorter */
/* Open the part file for writing at `offset`, never through a symlink;
 * a new one is created 0600. `mode` is one of CTI_SINK_*. */
ct_code cti_sink_open_file(struct cti_sink *sink, int64_t offset,
                           int mode);
/* A memory sink becomes a file sink writing the part file `part_path`
 * (moved in: the sink frees it) from offset 0, kept there on success (no
 * rename). On failure `failed` names the step and sys_errno says why. */
ct_code cti_sink_become_file(struct cti_sink *sink, char *part_path);
/* Start over at offset 0 (a 200 answered a range request). */
ct_code cti_sink_restart(struct cti_sink *sink);
/* Hint the final size so the file system can allocate it in few pieces.
 * Blocks are reserved ahead of the writes, geometrically (at most about
 * twice what was written, plus 16 MiB), only while free space allows, and
 * released past the end of the file when the sink is committed or
 * abandoned: an announced length alone never costs disk. */
void cti_sink_preallocate(struct cti_sink *sink, int64_t total);
/* Memory sink: reserve for an announced length (at most 1 MiB now; the
 * rest grows geometrically as bytes come, up to the hint). */
void cti_sink_reserve_memory(struct cti_sink *sink, int64_t total);
/* Append bytes; CT_OK or CT_E_SINK_IO / CT_E_NO_MEMORY. */
ct_code cti_sink_write(struct cti_sink *sink, const char *data, size_t len);
/* Write buffered bytes out (no fsync). */
ct_code cti_sink_flush(struct cti_sink *sink);
/* CT_E_SINK_IO (ENOENT, `vanished` set) when the part file was unlinked
 * under us (its folder removed, say): writes would go to a file nobody
 * can find. One fstat; callers check at intervals, not per chunk. */
ct_code cti_sink_check_linked(struct cti_sink *sink);
/* Success: flush, check the part file is still linked, fsync, close,
 * rename to path. On failure `failed` names the step, sys_errno why. */
ct_code cti_sink_commit(struct cti_sink *sink);
/* Failure: close; remove the part file unless keep (then flush + fsync).
 * A vanished part file is never removed by path (the name may now be
 * someone else's) and keeps no bytes: `durable` drops to 0. */
void cti_sink_abandon(struct cti_sink *sink, int keep);
void cti_sink_free(struct cti_sink *sink);

/* --- ct_worker.c ------------------------------------------------------ */

/* Blocking file work off the loop thread. `run` runs on the
 * worker, `done` on the loop thread afterwards; whoever queued the job
 * owns its memory and keeps what `run` uses out of reach until `done`. */
struct cti_job {
  struct cti_job *next;
  void (*run)(struct cti_job *job);
  void (*done)(struct cti_job *job);   /* may free the job */
  void *owner;
  const char *gate_path;     /* tests only: see ct_worker.c; NULL: none */
  int gate;                  /* which test gate: CTI_GATE_* */
};
#define CTI_GATE_COMMIT 0    /* TRANSFER_TEST_COMMIT_GATE: commits */
#define CTI_GATE_FILE   1    /* TRANSFER_TEST_FILE_GATE: head, settle */

struct cti_worker;

/* Start the worker; it wakes the loop through `eventfd` (the loop's). */
ct_code cti_worker_create(int eventfd, struct cti_worker **out);
/* Queue `job` (any thread). CT_E_SHUTDOWN once drained: run it inline. */
ct_code cti_worker_submit(struct cti_worker *w, struct cti_job *job);
/* Loop thread: run `done` of every finished job. */
void cti_worker_collect(struct cti_worker *w);
/* Loop thread, at shutdown: wait for every queued job, collect them. */
void cti_worker_drain(struct cti_worker *w);
void cti_worker_free(struct cti_worker *w);
/* fsync the folder holding `path` (makes a rename in it durable); 0 or an
 * errno. Blocks: worker thread. */
int cti_fsync_parent(const char *path);

/* --- ct_ratelimit.c ---------------------------------------------------- */

struct ct_loop;
struct cti_transfer;

enum { CTI_RECV = 0, CTI_SEND = 1 };

struct cti_bucket {
  double tokens;       /* may go negative: a debt to repay before more */
  double last;         /* monotonic seconds of the last refill; 0: fresh */
};

/* The loop's rate timerfd, registered in its epoll set. */
ct_code cti_rate_open(struct ct_loop *loop);
void cti_rate_close(struct ct_loop *loop);
/* 1 when `t` must pause direction `dir` now (its bucket or the loop's is
 * in debt; the timer is armed), else 0. */
int cti_rate_blocked(struct cti_transfer *t, int dir);
/* Take `len` bytes' worth of tokens after passing them on. */
void cti_rate_consume(struct cti_transfer *t, int dir, size_t len);
/* The rate timer fired: unpause transfers paused for their rate. */
void cti_rate_on_timer(struct ct_loop *loop);
/* Setup: the HTTP version (CURL_HTTP_VERSION_*) to ask for, given the one
 * the spec leads to: a transfer with a limit of its own is kept off shared
 * HTTP/2 connections (HTTP/1.1, a connection of its own). */
long cti_rate_http_version(struct cti_transfer *t, long wanted);
/* A body chunk of `len` bytes reached the write callback of a limited
 * transfer: record in its counters how much libcurl held for it. */
void cti_rate_note_held(struct cti_transfer *t, size_t len);

/* --- ct_transfer.c, ct_request.c, ct_response.c, ct_body.c, ct_result.c */

/* The scalar options a transfer keeps from its ct_transfer_spec for its
 * whole life. Only scalars: what the spec points to (URL, headers, paths,
 * bodies, proxy settings) is copied into the transfer's own fields when
 * it is made, so nothing here can point into the caller's memory, and a
 * pointer field added to the spec later is not kept by accident. */
struct cti_options {
  int64_t connect_timeout_ms;
  int64_t timeout_ms;
  int64_t low_speed_limit;
  int64_t low_speed_time_s;
  int64_t idle_timeout_ms;
  int64_t max_redirects;
  int64_t max_recv_speed;        /* changed later by ct_loop_set_speed */
  int64_t max_send_speed;
  int64_t max_body_size;
  int64_t max_decode_ratio;
  ct_http_version http_version;
  uint32_t auth_schemes;
  int32_t ip_resolve;
  int32_t tls_min;
  int32_t tls_max;
  int32_t netrc;
};

/* Copies the scalars above out of `spec`. */
void cti_options_copy(struct cti_options *o,
                      const struct ct_transfer_spec *spec);

struct cti_transfer {
  uint64_t id;
  struct ct_loop *loop;
  CURL *easy;
  void *ctx;
  struct cti_transfer *hnext;   /* id hash chain */
  struct cti_transfer *next;    /* all transfers of the loop */
  struct cti_transfer *prev;

  uint32_t flags;
  struct cti_options opts;       /* the spec's scalars (cti_options_copy) */
  /* The spec's strings and the lists below: copies after the transfer
   * in its own allocation (ct_transfer.c), never freed on their own. */
  char *body_path;
  char *url;
  char *method;
  char *ca_file;
  char *client_cert;
  char *client_key;
  char *userpwd;
  char *unix_socket_path;
  char *netrc_file;
  char *ciphers;
  char *tls13_ciphers;
  struct curl_slist *headers;
  struct curl_slist *proxy_headers;  /* Proxy-Authorization: proxies only */
  /* The Accept-Encoding line ahead of `headers` when libcurl decodes: a
   * line of ours spares libcurl formatting its own on every request
   * (set_request in ct_request.c). Points at static text: nothing to free. */
  struct curl_slist accept_encoding;

  /* body source */
  ct_body_kind body_kind;
  const char *body_mem;
  int body_fd;
  int64_t body_length;     /* -1 unknown */
  int64_t body_offset;
  int64_t body_pos;

  struct cti_sink sink;
  struct ct_counters *counters;   /* user's block or own_counters */
  struct ct_counters own_counters;

  /* response head of the current hop */
  char *hdr;
  size_t hdr_len;
  size_t hdr_cap;
  long status;
  int64_t content_length;
  int64_t content_range_start;
  int64_t body_decoded;     /* body bytes of this response passed on */
  int chunked;              /* this response is Transfer-Encoding: chunked */
  uint32_t set_cookies;     /* Set-Cookie lines in this head */
  int cookies_to_drop;      /* a read-only transfer's private cookie
                             * list on the handle: dropped at release */
  size_t recv_buffer;       /* CURLOPT_BUFFERSIZE: the most one read gets */
  int big_recv_slot;        /* holds one of the loop's CTI_BIG_RECV_SLOTS */
  /* The socket curl last asked to poll for this transfer (sock_polled:
   * once asked; whether it still is, the socket table says). */
  int sock_polled;
  curl_socket_t sock;
  char *etag;
  char *last_modified;
  int64_t resume_offset;
  int64_t range_start;
  int64_t range_end;

  uint32_t progress_interval_ms;
  double last_progress;     /* monotonic seconds */
  double submit_time;
  double add_time;
  double idle_since;        /* ct_timeout.c: when bytes last moved, as
                               seen by the sweep */
  int64_t idle_bytes;       /* ct_timeout.c: bytes moved until then */

  /* Where the transfer is in its life and why it is paused: changed only
   * through cti_transfer_set_phase and cti_transfer_pause (ct_phase.c). */
  ct_phase phase;
  uint32_t paused;          /* CT_PAUSE_* reasons; libcurl paused if any */
  int socket_errno;         /* a socket() of ours failed: its errno */
  /* Descriptors counted in loop->fd_admitted while admitted (0: not
   * admitted; ct_loop_transfers.c): its socket and its open files. */
  int fds_admitted;
  int held;                 /* waiting in loop->held for the budget */
  struct cti_transfer *held_next;
  struct cti_transfer *held_prev;
  /* Its origin's slot (ct_origin.c) while it counts there or waits in
   * it; NULL: not under the per-origin rule, or released. */
  struct cti_origin *origin;
  int origin_waiting;       /* in origin->wait_head..wait_tail */
  struct cti_transfer *origin_next;
  struct cti_transfer *origin_prev;
  ct_code local_code;       /* failure found by our callbacks */
  int local_errno;
  char local_message[200];   /* room for two hex SHA-256 digests */
  struct cti_journal *journal;    /* ct_journal.c; NULL: no journal */
  struct cti_checksum *checksum;  /* ct_checksum.c; NULL: no digest */
  struct cti_bucket bucket[2];    /* ct_ratelimit.c: CTI_RECV, CTI_SEND */
  char errbuf[CURL_ERROR_SIZE];
  struct cti_tls_verdict verdict;
  uint64_t trust_generation;      /* of the CAINFO marker now set */
  struct curl_slist *resolve;     /* CURLOPT_RESOLVE entries */
  struct curl_slist *connect_to;  /* CURLOPT_CONNECT_TO entries */
  struct cti_proxy *proxy;        /* ct_proxy.c; NULL: the environment's */
  uint64_t profile;               /* key of its easy options; 0: none */
  /* At the final head, the file work it needs (the digest of a resumed
   * prefix, the first journal) runs on the worker as `head.job`; until
   * it is done no body byte is written (the CT_PAUSE_FILE reason). The
   * worker reports in head.code/err/failed, never in local_code. */
  struct cti_head_work {
    struct cti_job job;
    int64_t prefix;          /* bytes of the part file to hash first */
    int64_t durable;         /* what the first journal claims */
    int journal;             /* the first journal is due */
    ct_code code;            /* worker: the prefix's digest failed */
    int err;
    const char *failed;
    int journal_err;         /* worker: the journal's errno, or 0 */
    const char *journal_what;
  } head;
  /* CT_PHASE_COMMITTING (ct_result.c): the file job of a finished
   * download. Its fields are the job's inputs and outputs, not states:
   * the phase says whether it runs. */
  struct cti_commit_work {
    struct cti_job job;
    ct_code code;             /* the outcome so far; the worker's final */
    CURLcode cc;
    const char *message;
    int clean;                /* retire()'s `clean`, for after the job */
    int cancel;               /* atomic: 1 + keep_partial, a cancel that
                                 came while the job waited or ran; read
                                 by the worker before it renames */
  } commit;
};

ct_code cti_transfer_create(struct ct_loop *loop,
                            const struct ct_transfer_spec *spec, void *ctx,
                            struct cti_transfer **out);
/* Before an easy handle is taken: open the body file, add If-Range, and
 * compute t->profile, the key of the options that follow from the kind
 * of transfer (ct_request.c). On failure fills local_code/message. */
ct_code cti_transfer_prepare(struct cti_transfer *t);
/* Configure t->easy: the profile's options unless `configured` (the handle
 * was last set up with t->profile), then the per-request ones. On failure
 * fills local_code/message. */
ct_code cti_transfer_setup(struct cti_transfer *t, int configured);
/* Build the result and call on_finish exactly once; frees nothing. */
void cti_transfer_finish(struct cti_transfer *t, CURLcode cc);
void cti_transfer_finish_code(struct cti_transfer *t, ct_code code,
                              const char *message);
void cti_transfer_free(struct cti_transfer *t);
/* Record the first local cause of failure (later ones are ignored): the
 * result then carries `code`, `err` as sys_errno and `message`. */
void cti_transfer_set_error(struct cti_transfer *t, ct_code code, int err,
                            const char *message);
void cti_transfer_emit_progress(struct cti_transfer *t, int force);
double cti_now(void);
/* (Re)set the CURLOPT_CAINFO trust marker from loop->trust_generation, so
 * that the transfer's next connection (a later redirect hop too) neither
 * reuses a connection nor resumes a TLS session made under other trust
 * settings: curl matches both on CAfile. Safe between multi calls (curl
 * 7.88 copies CAfile into each new connection; the easy's copy is read
 * only when a connection is created). Loop thread. */
ct_code cti_transfer_set_trust_marker(struct cti_transfer *t);

static inline void cti_counter_store(int64_t *field, int64_t value)
{
  __atomic_store_n(field, value, __ATOMIC_RELAXED);
}
/* ct_response.c: the head of this hop is a redirect curl follows. */
int cti_transfer_redirect_followed(struct cti_transfer *t);
/* ct_response.c: the final head came: open the sink, call on_response. */
void cti_transfer_deliver_head(struct cti_transfer *t);
/* ct_result.c: a cancel came while the commit job runs (ct_loop.h). */
void cti_transfer_cancel_commit(struct cti_transfer *t, int keep_partial);
/* libcurl callbacks, installed by cti_transfer_setup (ct_request.c). */
size_t cti_header_cb(char *data, size_t size, size_t nitems, void *userp);
size_t cti_write_cb(char *data, size_t size, size_t nmemb, void *userp);
size_t cti_read_cb(char *buffer, size_t size, size_t nitems, void *userp);
int cti_seek_cb(void *userp, curl_off_t offset, int origin);
int cti_xferinfo_cb(void *userp, curl_off_t dltotal, curl_off_t dlnow,
                    curl_off_t ultotal, curl_off_t ulnow);
/* ct_debug.c: CURLOPT_DEBUGFUNCTION, installed only with CT_FLAG_TRACE. */
int cti_debug_cb(CURL *easy, curl_infotype type, char *data, size_t size,
                 void *userp);
/* ct_debug.c: tell on_redirect that curl follows this hop's Location. */
void cti_transfer_report_redirect(struct cti_transfer *t);

/* --- ct_timeout.c ------------------------------------------------------ */

/* The idle timeout is checked by a sweep of the loop, not per libcurl
 * callback. cti_timeout_watch: `t` was just added to curl (its clock
 * starts at add_time); schedules a sweep soon enough for its timeout.
 * cti_timeout_sweep: the sweep is due (loop->idle_sweep_ms passed); fails
 * every transfer idle for its timeout and schedules the next sweep. */
void cti_timeout_watch(struct ct_loop *loop, struct cti_transfer *t);
void cti_timeout_sweep(struct ct_loop *loop);
/* A libcurl timeout ended `t`: say in t->errbuf which one fired. */
void cti_timeout_explain(struct cti_transfer *t);

/* --- ct_phase.c -------------------------------------------------------- */

/* Move `t` to phase `to` (see ct_phase in ct_loop.h); `why` is static text
 * for the trace. Moving to the phase it is in does nothing; an illegal
 * move asserts in debug builds and is counted and ignored otherwise. Loop
 * thread. */
void cti_transfer_set_phase(struct cti_transfer *t, ct_phase to,
                            const char *why);
/* Set (on) or clear one CT_PAUSE_* reason. The user reason pauses libcurl
 * with curl_easy_pause; the others are set from libcurl's callbacks, which
 * return *_PAUSE themselves. libcurl is resumed only when the last reason
 * clears. Setting a reason outside libcurl (see cti_transfer_in_multi) is
 * illegal, but for the user's before admission: it is recorded, and
 * applied when the transfer is added. Loop thread; never from inside a
 * callback when clearing. */
void cti_transfer_pause(struct cti_transfer *t, uint32_t reason, int on,
                        const char *why);

/* In libcurl's multi handle: added and not yet finishing. */
static inline int cti_transfer_in_multi(const struct cti_transfer *t)
{
  return t->phase >= CT_PHASE_CONNECTING && t->phase <= CT_PHASE_RECEIVING;
}

/* The final response head was delivered (and the transfer runs). */
static inline int cti_transfer_head_delivered(const struct cti_transfer *t)
{
  return t->phase == CT_PHASE_DECIDING || t->phase == CT_PHASE_RECEIVING;
}

/* --- ct_proxy.c -------------------------------------------------------- */

struct cti_proxy;

/* Copy the spec's proxy settings into t->proxy (none for the environment
 * default). CT_E_INVALID_REQUEST for a CR or LF, CT_E_NO_MEMORY. */
ct_code cti_proxy_create(struct cti_transfer *t,
                         const struct ct_transfer_spec *spec);
/* The proxy options of t's easy handle (loop thread, in setup). */
CURLcode cti_proxy_setup(struct cti_transfer *t);
/* ct_cookies.c: the handle's share and cookie engine for its flags;
 * `configured`: the handle comes from the pool set up for the same
 * profile, cookie flags included (cti_easy_take). */
CURLcode cti_cookies_setup(struct cti_transfer *t, int configured);
/* ct_cookies.c: the handle forgets a read-only transfer's private list
 * (a jar handle keeps its cookie file list: cti_easy_take drops it). */
void cti_cookies_done(struct cti_transfer *t);
/* The status with which a proxy refused the transfer: a CONNECT answered
 * with other than 2xx, or (explicit proxies only) a 407 to a forwarded
 * request; -1 when an explicit http(s) proxy's connection ended before it
 * answered CONNECT (`cc` is how the transfer ended; the message then says
 * so); 0 when none. Fills t->errbuf when curl left it empty. */
long cti_proxy_refusal(struct cti_transfer *t, CURLcode cc);
void cti_proxy_free(struct cti_proxy *p);

/* --- ct_journal_format.c ----------------------------------------------- */

/* A descriptor of the directory that holds `path` (to fsync a rename in
 * it), or -1 with errno set. */
int cti_open_parent_dir(const char *path);

/* Write `len` bytes of `text` to `tmp_path` (a fresh file, never through a
 * symlink), fsync it, rename it over `path` and fsync the directory
 * `dir_fd`. Any thread. Returns 0, or an errno with `*what` set. */
int cti_replace_file(const char *path, const char *tmp_path, int dir_fd,
                     const char *text, size_t len, const char **what);

/* --- ct_journal.c ------------------------------------------------------ */

struct cti_journal;

/* Set up the journal of `t` from its spec (no file is touched yet). */
ct_code cti_journal_create(struct cti_transfer *t,
                           const struct ct_transfer_spec *spec);
/* The part file was opened for the final response: take its validators
 * for the first journal (loop thread). 1: that journal is due, written
 * by cti_journal_head_write on the worker; 0: none; -1: no memory (the
 * transfer's local error is set). */
int cti_journal_on_head(struct cti_transfer *t);
/* Worker (head job): stop an earlier sync thread, install the validators
 * and write the first journal claiming `durable`. 0 or an errno, with
 * `*what` naming the step. */
int cti_journal_head_write(struct cti_journal *j, int64_t durable,
                           const char **what);
/* Loop thread, after the head job: record the journal written (err 0) or
 * fail the transfer with what went wrong. */
ct_code cti_journal_head_done(struct cti_transfer *t, int64_t durable,
                              int err, const char *what);
/* After body bytes went to the sink: every interval, flush + fdatasync the
 * part file, then replace the journal. */
ct_code cti_journal_after_write(struct cti_transfer *t);
/* The transfer ended (after commit or abandon): remove the journal when
 * the part file was renamed or removed, else record the final count. */
void cti_journal_finish(struct cti_transfer *t, int part_kept);
void cti_journal_free(struct cti_journal *j);

/* --- ct_checksum.c ----------------------------------------------------- */

struct cti_checksum;

ct_code cti_checksum_create(struct cti_transfer *t, const uint8_t *expected);
/* The final response starts the body at resume_offset: reset. Returns
 * the length of the prefix the part file already holds (resume_offset),
 * which cti_checksum_hash_prefix must hash before any new byte; 0: none. */
int64_t cti_checksum_on_head(struct cti_transfer *t);
/* Worker (head job): hash [0, end) of the part file at `path`, once.
 * CT_OK, or CT_E_SINK_IO / CT_E_NO_MEMORY with *err and *failed set. */
ct_code cti_checksum_hash_prefix(struct cti_transfer *t, const char *path,
                                 int64_t end, int *err, const char **failed);
void cti_checksum_update(struct cti_transfer *t, const void *data,
                         size_t len);
/* CT_OK when the digest matches, else CT_E_CHECKSUM with local_code and
 * local_message set (both digests in hex). Reads no file. */
ct_code cti_checksum_verify(struct cti_transfer *t);
void cti_checksum_free(struct cti_checksum *c);

/* --- ct_loop.c, ct_command.c, ct_loop_transfers.c, ct_pool.c ---------- */

enum cti_command_kind {
  CTI_CMD_SUBMIT,
  CTI_CMD_CANCEL,
  CTI_CMD_PAUSE,
  CTI_CMD_RESUME,
  CTI_CMD_DISPOSITION,
  CTI_CMD_SPEED,
  CTI_CMD_TOTAL_SPEED,
  CTI_CMD_TRUST_POLICY,
  CTI_CMD_BODY_READY,
  CTI_CMD_CONSUMER_READY
};

struct cti_command {
  struct cti_command *next;
  enum cti_command_kind kind;
  uint64_t id;
  struct cti_transfer *transfer;   /* SUBMIT */
  int32_t arg;
  int64_t a;
  int64_t b;
  char *path;
  struct ct_trust_policy *policy;
};

/* The longest URL beginning ct_origin.c remembers (loop->origin_last). */
#define CTI_ORIGIN_PREFIX_MAX 128

struct ct_loop {
  struct ct_loop_config config;
  char *ca_file;
  CURLM *multi;
  CURLSH *share;
  struct cti_tls_state *tls;
  int epfd;
  int eventfd;
  pthread_t thread;
  int thread_started;

  pthread_mutex_t lock;          /* guards the command queue and closing */
  struct cti_command *cmd_head;
  struct cti_command *cmd_tail;
  int closing;
  int stop_requested;            /* under lock: ct_loop_destroy was called */
  int free_on_exit;              /* destroyed from its own thread */
  int joined;                    /* ct_loop_stop ended the thread and closed
                                    the connections; destroy frees the rest */

  int run_timeout_now;
  int64_t curl_deadline;         /* monotonic ms of curl's timeout; -1 */
  int64_t idle_sweep_ms;         /* monotonic ms of the next idle sweep
                                    (ct_timeout.c); -1: none */
  int stop;
  struct cti_transfer *all;      /* every transfer the loop owns */
  struct cti_tls_conn *tls_conns;  /* read-ahead connections (ct_tls_read.c) */
  struct cti_transfer **buckets; /* id hash */
  size_t bucket_count;
  int64_t transfer_count;
  uint64_t trust_generation;     /* bumped by each policy change */
  struct cti_tracked_socket *sockets;  /* ct_tls_sockets.c, by fd */
  size_t socket_cap;
  size_t stale_sockets;          /* old-generation sockets still in use */
  /* The admission rule (ct_fdlimit.c): the transfers admitted (in
   * libcurl, or committing their file) hold at most fd_budget
   * descriptors by their count (ct_transfer_descriptors); the others wait
   * in `held`, oldest first. 0: no budget. idle_budget: the idle
   * connections libcurl keeps (CURLMOPT_MAXCONNECTS). */
  int64_t fd_budget;
  int64_t idle_budget;
  int64_t fd_admitted;           /* atomic, one writer: the loop thread */
  struct cti_transfer *held;
  struct cti_transfer *held_tail;
  int64_t held_count;            /* atomic, one writer: transfers in `held` */
  int64_t open_sockets;          /* atomic, one writer: ct_tls_sockets.c */
  int admitting;                 /* admit_held() runs: no re-entry */
  /* Per-origin admission (ct_origin.c): origins by key, those with room
   * and waiting transfers, and how many transfers wait in all. */
  struct cti_origin **origin_buckets;  /* CTI_ORIGIN_BUCKETS, lazily */
  /* The origin the last transfer entered, and how its URL began (scheme
   * and authority, as written): most transfers go where the one before
   * went, and are matched on those bytes without a key or a hash. NULL
   * once that record is freed. */
  struct cti_origin *origin_last;
  char origin_last_prefix[CTI_ORIGIN_PREFIX_MAX];
  size_t origin_last_prefix_len;
  struct cti_origin *origin_ready;
  int64_t origin_waiting;        /* atomic, one writer: the loop thread */
  /* Records kept for reuse with no transfer (ct_origin.c), the most
   * recently idle first; at most CT_ORIGIN_IDLE_MAX. */
  struct cti_origin *origin_idle;
  struct cti_origin *origin_idle_tail;
  int64_t origin_idle_count;     /* atomic, one writer: the loop thread */
  int64_t origin_records;        /* atomic, one writer: in the table */
  int64_t origin_allocated;      /* atomic, one writer: ever allocated */
  CURL *easy_pool[CTI_EASY_POOL];  /* handles kept for reuse, set up */
  uint64_t easy_profile[CTI_EASY_POOL];  /* ... with this profile */
  /* CTI_EASY_AS_IS: reusable only with its own profile (ct_pool.c) */
  unsigned char easy_as_is[CTI_EASY_POOL];
  int easy_pool_count;
  uint64_t setopt_calls;         /* atomic, one writer: curl_easy_setopt */
  uint64_t epoll_ctl_calls;      /* atomic, one writer: ct_watch.c */
  uint64_t checksum_read;        /* atomic: part-file bytes read to hash */
  int big_recv_in_use;           /* transfers holding a big receive buffer */
  int tls_read_ahead_conns;      /* live connections reading ahead */
  int tls_redrive_again;         /* re-drives left over: do not sleep */
  uint64_t tls_redrive_pass;     /* each re-drive pass: ct_tls_read.c */
  uint64_t tls_unpauses;         /* transfers libcurl was told to resume */
  uint64_t tls_redrives;         /* atomic, one writer: ct_loop.c */
  uint64_t tls_verdicts_released; /* atomic, one writer: retire() */
  uint64_t tls_redrive_checks;   /* atomic, one writer: ct_tls_read.c */

  uint64_t next_id;              /* atomic */
  int64_t active;                /* atomic: submitted, not finished */
  uint64_t wakeups;              /* atomic */
  uint64_t multi_errors;         /* atomic: curl_multi_socket_action failed */
  uint64_t illegal_transitions;  /* atomic: ct_phase.c refused a change */
  int trace_phases;              /* CT_TRACE_PHASES=1: trace to stderr */

  /* loop-wide shared speed limit (token bucket) */
  int64_t total_recv_limit;
  int64_t total_send_limit;
  struct cti_bucket total_bucket[2];   /* ct_ratelimit.c */
  int rate_timerfd;
  double rate_deadline;                /* armed wake-up; 0: none */
  struct cti_worker *worker;           /* ct_worker.c: blocking file work */
};

/* ct_command.c: run the queued commands (then honour a stop request). */
void cti_command_drain(struct ct_loop *loop);

/* ct_loop_transfers.c, loop thread. Insert `t` in the id table. */
void cti_loop_insert(struct ct_loop *loop, struct cti_transfer *t);
/* Insert `t`, set it up and hand it to libcurl, or finish it. */
void cti_loop_add(struct ct_loop *loop, struct cti_transfer *t);
/* Finish and retire every transfer libcurl reports done. */
void cti_loop_drain_done(struct ct_loop *loop);
/* End `t` now with `code` and `message`, then retire it. */
void cti_loop_fail(struct ct_loop *loop, struct cti_transfer *t,
                   ct_code code, const char *message);
/* Cancel `t` (CT_E_CANCELLED or CT_E_SHUTDOWN as `code`). */
void cti_loop_cancel_transfer(struct ct_loop *loop, struct cti_transfer *t,
                              int keep_partial, ct_code code);

/* ct_pool.c, loop thread: a pooled handle last set up with `profile`
 * (*configured = 1: only the per-request options are needed), else a
 * reset one from the pool or a new one (*configured = 0). Profile 0
 * matches nothing. NULL: out of memory. */
CURL *cti_easy_take(struct ct_loop *loop, uint64_t profile, int *configured);
/* Whether `easy` may go back to the pool after CURLMSG_DONE with `cc`:
 * 0 no, CTI_EASY_CLEAN for any later transfer, CTI_EASY_AS_IS only for
 * one of the same profile (see ct_pool.c). */
#define CTI_EASY_CLEAN 1
#define CTI_EASY_AS_IS 2
int cti_easy_ended_clean(CURL *easy, CURLcode cc);
/* Pool `easy`, set up with `profile`, when `clean` (one of the values
 * above) and there is room, else clean it up. */
void cti_easy_give_back(struct ct_loop *loop, CURL *easy, uint64_t profile,
                        int clean);
/* One more epoll_ctl call for a socket of curl's
 * (ct_loop_epoll_ctl_calls). Loop thread. */
static inline void cti_count_epoll_ctl(struct ct_loop *loop)
{
  __atomic_store_n(&loop->epoll_ctl_calls,
                   __atomic_load_n(&loop->epoll_ctl_calls,
                                   __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
}
/* One more curl_easy_setopt call (ct_loop_setopt_calls). Loop thread. */
static inline void cti_count_setopt(struct ct_loop *loop)
{
  __atomic_store_n(&loop->setopt_calls,
                   __atomic_load_n(&loop->setopt_calls, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
}

/* --- ct_origin.c ------------------------------------------------------ */

/* One connection per transfer to an origin (cleartext HTTP/1.x, or any
 * transfer that cannot multiplex) under max_connections_per_host: the
 * loop starts at most that many per origin and keeps the others waiting
 * here, oldest first, instead of handing them to libcurl, whose queue
 * for a full host is not first-come first-served (7.88: a new transfer
 * takes the connection that frees up, the waiting one it woke goes to
 * the back of the queue). Loop thread only. */
#define CTI_ORIGIN_BUCKETS 256
struct cti_origin;
/* Count `t` against its origin: 0 when it may start now (or is not under
 * the rule), 1 when it waits in its origin's queue. */
int cti_origin_enter(struct ct_loop *loop, struct cti_transfer *t);
/* The oldest waiting transfer of an origin with room again, counted as
 * running; NULL when none may start. */
struct cti_transfer *cti_origin_next(struct ct_loop *loop);
/* `t` ended or left its queue: its place is free (idempotent). */
void cti_origin_leave(struct ct_loop *loop, struct cti_transfer *t);
/* Free every origin (loop teardown, no transfer left). */
void cti_origin_free_all(struct ct_loop *loop);

/* --- ct_tls_sockets.c ------------------------------------------------- */

/* A socket curl opened through us: under which trust generation, by which
 * transfer, and which transfer curl last polled it for. */
struct cti_tracked_socket {
  int open;                      /* the entry for this descriptor is used */
  uint64_t generation;
  uint64_t opener;               /* transfer id */
  uint64_t user;                 /* transfer id, 0: none yet */
  int polled;                    /* curl polls it for some transfer */
  int shut;
  int in_set;                    /* in the loop's epoll set (ct_watch.c) */
  uint32_t events;               /* with these EPOLL* events */
};

/* CURLOPT_OPENSOCKETFUNCTION (data: the transfer) and
 * CURLOPT_CLOSESOCKETFUNCTION (data: the loop, which outlives every
 * connection; a transfer may not). Loop thread. */
curl_socket_t cti_tls_open_socket(void *clientp, curlsocktype purpose,
                                  struct curl_sockaddr *address);
int cti_tls_close_socket(void *clientp, curl_socket_t fd);
/* The entry of `fd` if the loop opened that socket and it is open; NULL
 * otherwise (not ours, or closed). */
struct cti_tracked_socket *cti_tracked_socket_find(struct ct_loop *loop,
                                                   curl_socket_t fd);
/* curl asked to poll `fd` for `easy` (polled 1) or stopped polling it
 * (CURL_POLL_REMOVE, polled 0): remember who uses it. */
void cti_tls_socket_polled(struct ct_loop *loop, curl_socket_t fd,
                           CURL *easy, int polled);
/* 1 when curl polls `fd` now. */
int cti_tls_socket_is_polled(struct ct_loop *loop, curl_socket_t fd);
/* --- ct_watch.c ------------------------------------------------------- */

/* CURLMOPT_SOCKETFUNCTION's two requests: poll `fd` for `events`
 * (EPOLLIN/EPOLLOUT), or stop (CURL_POLL_REMOVE). `socketp` is curl's
 * per-socket pointer, used for the sockets the loop did not open. */
void cti_watch_socket(struct ct_loop *loop, curl_socket_t fd,
                      uint32_t events, void *socketp);
void cti_unwatch_socket(struct ct_loop *loop, curl_socket_t fd);
/* An epoll event for `fd`: 1 when it is for a socket curl does not poll
 * (an idle connection left in the set); the socket has then been taken out
 * of the set and curl is not to be told. 0: hand the event to curl. */
int cti_watch_idle_event(struct ct_loop *loop, curl_socket_t fd);
/* Take `fd` out of the epoll set now: it is about to be closed, or curl
 * no longer knows it. */
void cti_watch_drop(struct ct_loop *loop, curl_socket_t fd);

/* --- ct_tls_read.c ---------------------------------------------------- */

/* Make the connection of `ssl_ctx` read ahead in CTI_TLS_READ_AHEAD
 * blocks and count its records. From the SSL_CTX hook, loop thread. */
void cti_tls_read_ahead_enable(struct ct_loop *loop, void *ssl_ctx,
                               uint64_t opener);
/* One read-ahead TLS connection (ct_tls_read.c): the loop drives its
 * socket again while OpenSSL holds whole records for it. */
struct cti_tls_conn;
/* libcurl polls `fd` for `easy`: when its connection reads ahead, the
 * loop lists the connection (once; it leaves when freed). Loop thread. */
void cti_tls_conn_polled(struct ct_loop *loop, CURL *easy, curl_socket_t fd);
/* The listed connection after `c` (the first for NULL). Loop thread. */
struct cti_tls_conn *cti_tls_conn_next(struct ct_loop *loop,
                                       struct cti_tls_conn *c);
/* The socket to drive again in re-drive pass `pass` (once per pass), or
 * CURL_SOCKET_BAD: OpenSSL holds no whole record, or libcurl read none
 * of them the last drives. Loop thread, from ct_loop.c. */
curl_socket_t cti_tls_conn_wants_drive(struct ct_loop *loop,
                                       struct cti_tls_conn *c, uint64_t pass);
/* 1 when the connection of `easy` has OpenSSL read ahead. Loop thread. */
int cti_tls_reads_ahead(CURL *easy);
/* Start held transfers (oldest first) while the connection budget has
 * room; at the end of each loop pass, never while closing. Loop thread,
 * outside libcurl's callbacks. ct_loop_transfers.c. */
void cti_loop_admit_held(struct ct_loop *loop);
/* An admitted transfer opened a file it did not count when admitted (a
 * memory sink that became a file): count its descriptor too. It may take
 * the count past the budget for a while; later transfers wait. */
void cti_loop_count_file(struct ct_loop *loop, struct cti_transfer *t);

/* After a policy change, and after each retired transfer while some remain
 * (loop->stale_sockets): shut down connections opened under an older
 * trust generation that no live transfer opened or uses (idle in curl's
 * pool); curl then finds them dead and closes them. Loop thread. */
void cti_tls_close_stale_sockets(struct ct_loop *loop);

/* Retire a transfer whose commit job is done (CT_PHASE_COMMITTING):
 * out of the table, its easy handle back to the pool, freed. Loop thread. */
void cti_loop_retire(struct ct_loop *loop, struct cti_transfer *t);

/* The live transfer with `id`, or NULL. Loop thread. */
struct cti_transfer *cti_loop_find(struct ct_loop *loop, uint64_t id);

/* --- ct_error.c -------------------------------------------------------- */

/* Where a transfer was when libcurl failed it (see ct_error.c). */
struct cti_failure {
  int in_head;             /* a status line came, its head did not end */
  int in_body;             /* the final head was delivered */
  int following_redirect;  /* the last head was a redirect being followed */
  int effective_http;      /* the effective URL is http: or https: */
  int chunked;             /* the response body is chunked */
  long redirects;          /* redirects followed (CURLINFO_REDIRECT_COUNT) */
  long os_errno;           /* CURLINFO_OS_ERRNO: 0 when no socket error */
  long proxy_refusal;      /* cti_proxy_refusal(): 0, or the proxy's no
                              (-1: it died before answering CONNECT) */
  int socket_errno;        /* errno of a failed socket() in our open
                            * callback (ct_tls_sockets.c); 0: none */
};

/* The one CURLcode -> ct_code table; `st` may be NULL (no state). */
ct_code cti_code_from_curl_state(CURLcode cc, const struct cti_failure *st);
ct_code cti_code_from_curl(CURLcode cc);
ct_code cti_code_from_multi(CURLMcode mc);
void cti_copy_message(char *dst, size_t cap, const char *src);

/* --- ct_fdlimit.c ------------------------------------------------------ */

/* ct_connection_budget() for this process now: the soft RLIMIT_NOFILE
 * and the descriptors open at the call. */
struct ct_fd_budget cti_fd_connection_budget(int64_t idle_wanted);
/* 1 for EMFILE and ENFILE: out of descriptors, not a network failure. */
int cti_fd_exhausted(int err);
/* "<what>: all N descriptors of the open-file limit (RLIMIT_NOFILE,
 * ulimit -n) are in use" (EMFILE), or the ENFILE text, into buf. */
void cti_fd_limit_text(char *buf, size_t cap, const char *what, int err);

/* --- ct_global.c ------------------------------------------------------- */

ct_code cti_global_init(void);
/* "Accept-Encoding: " and every coding this libcurl decodes, as libcurl
 * itself would send for CURLOPT_ACCEPT_ENCODING "" (ct_global.c). */
const char *cti_accept_encoding_line(void);
char *cti_strdup(const char *s);

#endif /* CT_INTERNAL_H */
