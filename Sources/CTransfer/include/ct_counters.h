/*
 * ct_counters.h - byte counters any thread may read without a lock.
 *
 * The loop thread is the only writer; readers use the static inline
 * functions below (relaxed atomic loads), so Swift reads the four counts of
 * a running transfer without a lock and without a hop to the loop.
 */
#ifndef CT_COUNTERS_H
#define CT_COUNTERS_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are written with __atomic builtins only. ct_counters_create()
 * hands out cache-line aligned blocks, so the counters of different
 * transfers never share a line. */
struct ct_counters {
  int64_t bytes_sent;
  int64_t bytes_expected_to_send;      /* -1 unknown */
  int64_t bytes_received;              /* body bytes, incl. resume offset */
  int64_t bytes_expected_to_receive;   /* -1 unknown */
  /* Rate-limited transfers and stream sinks only: the most body bytes
   * libcurl had received but not yet handed to us (held while a limit or
   * the stream's consumer paused the transfer). */
  int64_t peak_held;
  int64_t reserved[3];                 /* pads the block to 64 bytes */
};

/* Allocate a zeroed block with both expectations at -1. The caller owns it
 * and frees it with ct_counters_destroy() once no transfer uses it. */
ct_code ct_counters_create(struct ct_counters *_Nullable *_Nonnull out);
void ct_counters_destroy(struct ct_counters *_Nullable counters);

static inline int64_t
ct_counters_sent(const struct ct_counters *_Nonnull c)
{
  return __atomic_load_n(&c->bytes_sent, __ATOMIC_RELAXED);
}

static inline int64_t
ct_counters_expected_to_send(const struct ct_counters *_Nonnull c)
{
  return __atomic_load_n(&c->bytes_expected_to_send, __ATOMIC_RELAXED);
}

static inline int64_t
ct_counters_received(const struct ct_counters *_Nonnull c)
{
  return __atomic_load_n(&c->bytes_received, __ATOMIC_RELAXED);
}

static inline int64_t
ct_counters_expected_to_receive(const struct ct_counters *_Nonnull c)
{
  return __atomic_load_n(&c->bytes_expected_to_receive, __ATOMIC_RELAXED);
}

static inline int64_t
ct_counters_peak_held(const struct ct_counters *_Nonnull c)
{
  return __atomic_load_n(&c->peak_held, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif
#endif /* CT_COUNTERS_H */
