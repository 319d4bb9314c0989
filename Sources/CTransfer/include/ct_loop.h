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

#ifdef __cplusplus
extern "C" {
#endif

struct ct_loop;

struct ct_loop_config {
  struct ct_callbacks callbacks;       /* shared by all transfers */
  void *_Nullable batch_ctx;           /* for callbacks.on_batch_end */
  /* PEM bundle of trust anchors, loaded once and shared by every TLS
   * connection of the loop. NULL: the system bundle. */
  const char *_Nullable ca_file;
  int64_t max_connections_per_host;    /* 0: unlimited */
  int64_t max_total_connections;       /* 0: unlimited */
  int64_t max_concurrent_streams;      /* HTTP/2; 0: libcurl's default */
  int64_t max_idle_connections;        /* kept for reuse; 0: 256 */
  int32_t multiplex;                   /* 1: HTTP/2 multiplexing (default) */
  int32_t share_tls_sessions;          /* 1: resume TLS sessions (default) */
  /* Shared bandwidth limit over all transfers of the loop, bytes/s. */
  int64_t max_total_recv_speed;
  int64_t max_total_send_speed;
};

void ct_loop_config_init(struct ct_loop_config *_Nonnull config);

/**
 * Create a loop and start its thread. On CT_OK `*out` owns the loop until
 * ct_loop_destroy(). Fails with CT_E_SYSTEM (errno in `*out_errno` when not
 * NULL) if the kernel refuses an fd or the thread.
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

/** Cancel: finishes with CT_E_CANCELLED. With `keep_partial`, a file sink
 * keeps its part file flushed and fsync'd, and the result says how many
 * bytes it holds (for resume data). Unknown ids give CT_E_NOT_FOUND only
 * when the id was never issued; a finished id is ignored (CT_OK). */
ct_code ct_loop_cancel(struct ct_loop *_Nonnull loop, uint64_t id,
                       int32_t keep_partial);

/** Pause both directions of a running transfer without closing its
 * connection; resume continues where it stopped. */
ct_code ct_loop_pause(struct ct_loop *_Nonnull loop, uint64_t id);
ct_code ct_loop_resume(struct ct_loop *_Nonnull loop, uint64_t id);

/** A CT_BODY_PULL transfer whose on_read returned CT_READ_PAUSE has
 * bytes (or its end, or an error) to give now: call on_read again. Safe
 * from any thread; ignored when the transfer is not waiting for its body
 * or has finished. */
ct_code ct_loop_body_ready(struct ct_loop *_Nonnull loop, uint64_t id);

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

/* libcurl's version string, for diagnostics. */
const char *_Nonnull ct_curl_version(void);

#ifdef __cplusplus
}
#endif
#endif /* CT_LOOP_H */
