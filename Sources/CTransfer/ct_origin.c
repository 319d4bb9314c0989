/*
 * ct_origin.c - per-origin admission: with max_connections_per_host set,
 * transfers that take a connection each (HTTP/1.x) start at most that
 * many per origin; the others wait here in arrival order and start, one
 * for each that ends, at the end of a loop pass (cti_loop_admit_held).
 *
 * libcurl 7.88 has a queue of its own for a host at its limit, but it
 * is not first-come first-served: a transfer that ends wakes the oldest
 * waiting one for a later timeout run, and a transfer added meanwhile
 * runs first and takes the connection, sending the woken one to the back
 * of the queue. Under a steady backlog some requests go round that queue
 * many times (an open-loop benchmark saw p99.9 several times the queue's
 * depth over its rate). Waiting here, libcurl never sees a full host for
 * these transfers. Transfers that may share a connection (HTTP/2 over
 * TLS, or prior knowledge) are left to libcurl. Loop thread only.
 *
 * An origin's record outlives its last transfer: it stays in the table,
 * idle, so that a client making one request at a time to a host finds it
 * again instead of allocating and freeing one per request. At most
 * CT_ORIGIN_IDLE_MAX records are kept idle; past that the one idle the
 * longest is freed, so memory stays bounded however many origins a loop
 * has seen.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct cti_origin {
  struct cti_origin *next;        /* hash chain */
  struct cti_origin *ready_next;  /* in loop->origin_ready when `ready` */
  /* In loop->origin_idle (most recently idle first) when `idle`. */
  struct cti_origin *idle_prev;
  struct cti_origin *idle_next;
  int ready;
  int idle;                       /* no transfer counts or waits in it */
  uint64_t hash;
  int64_t running;                /* transfers counted, not waiting */
  struct cti_transfer *wait_head;
  struct cti_transfer *wait_tail;
  char key[];                     /* "scheme://host:port", lower case */
};

/* Longest origin key kept; a longer one is not under the rule. */
#define KEY_MAX 300

/* "scheme://host:port" of `url`, lower case, the default port added;
 * 0 when the URL has no authority or it does not fit. `*prefix`: how many
 * bytes of `url` that was read from (up to the end of the authority). */
static size_t origin_key(const char *url, char *out, size_t size,
                         size_t *prefix)
{
  const char *sep = strstr(url, "://");
  const char *host;
  const char *end;
  const char *at;
  const char *port;
  size_t n = 0;
  size_t i;
  int https;
  if(!sep || sep == url)
    return 0;
  https = (size_t)(sep - url) == 5 && strncasecmp(url, "https", 5) == 0;
  host = sep + 3;
  end = host + strcspn(host, "/?#");
  /* Credentials are not part of the origin. */
  for(at = end; at > host && at[-1] != '@'; at--)
    ;
  if(at > host)
    host = at;
  if(end == host)
    return 0;
  *prefix = (size_t)(end - url);
  /* A port after the host (an IPv6 literal's colons are inside []). */
  port = end;
  for(i = (size_t)(end - host); i > 0; i--) {
    char c = host[i - 1];
    if(c == ':') {
      port = host + i - 1;
      break;
    }
    if(c == ']')
      break;
  }
  if((size_t)(sep - url) + 3 + (size_t)(end - host) + 7 >= size)
    return 0;
  for(i = 0; url + i < sep + 3; i++)
    out[n++] = (char)(url[i] >= 'A' && url[i] <= 'Z' ? url[i] + 32 : url[i]);
  for(i = 0; host + i < end; i++)
    out[n++] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32
                                                       : host[i]);
  if(port == end || port + 1 == end) {
    if(port + 1 == end)
      n--;                        /* "host:" means the default port */
    memcpy(out + n, https ? ":443" : ":80", https ? 4 : 3);
    n += https ? 4 : 3;
  }
  out[n] = '\0';
  return n;
}

static uint64_t key_hash(const char *key, size_t len)
{
  uint64_t h = 14695981039346656037ULL;   /* FNV-1a */
  size_t i;
  for(i = 0; i < len; i++) {
    h ^= (unsigned char)key[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Whether `t` takes a connection of its own: not when it may wait for
 * an HTTP/2 connection to share (ct_request.c sets PIPEWAIT for those). */
static int one_per_connection(const struct ct_loop *loop,
                              const struct cti_transfer *t)
{
  ct_http_version v = t->opts.http_version;
  if(v == CT_HTTP_2_PRIOR_KNOWLEDGE)
    return 0;
  if(v == CT_HTTP_1_1 || v == CT_HTTP_1_0)
    return 1;
  return !(loop->config.multiplex && strncasecmp(t->url, "https:", 6) == 0);
}

static void set_waiting(struct ct_loop *loop, int64_t delta)
{
  __atomic_store_n(&loop->origin_waiting,
                   __atomic_load_n(&loop->origin_waiting, __ATOMIC_RELAXED) +
                   delta, __ATOMIC_RELAXED);
}

/* Store `v` in a counter the tests read (ct_loop_origin_stats). */
static void set_stat(int64_t *counter, int64_t v)
{
  __atomic_store_n(counter, v, __ATOMIC_RELAXED);
}

static void idle_unlink(struct ct_loop *loop, struct cti_origin *o)
{
  if(o->idle_prev)
    o->idle_prev->idle_next = o->idle_next;
  else
    loop->origin_idle = o->idle_next;
  if(o->idle_next)
    o->idle_next->idle_prev = o->idle_prev;
  else
    loop->origin_idle_tail = o->idle_prev;
  o->idle_prev = o->idle_next = NULL;
  o->idle = 0;
  set_stat(&loop->origin_idle_count, loop->origin_idle_count - 1);
}

/* Take `o` out of its hash chain and free it. */
static void origin_free(struct ct_loop *loop, struct cti_origin *o)
{
  struct cti_origin **b;
  b = &loop->origin_buckets[o->hash % CTI_ORIGIN_BUCKETS];
  while(*b && *b != o)
    b = &(*b)->next;
  if(*b)
    *b = o->next;
  if(loop->origin_last == o)
    loop->origin_last = NULL;
  free(o);
  set_stat(&loop->origin_records, loop->origin_records - 1);
}

static struct cti_origin *find_or_add(struct ct_loop *loop, const char *key,
                                      size_t len)
{
  uint64_t h = key_hash(key, len);
  struct cti_origin **b;
  struct cti_origin *o;
  if(!loop->origin_buckets) {
    loop->origin_buckets = calloc(CTI_ORIGIN_BUCKETS, sizeof(*b));
    if(!loop->origin_buckets)
      return NULL;
  }
  b = &loop->origin_buckets[h % CTI_ORIGIN_BUCKETS];
  for(o = *b; o; o = o->next)
    if(o->hash == h && strcmp(o->key, key) == 0) {
      if(o->idle)
        idle_unlink(loop, o);     /* in use again: kept, not allocated */
      return o;
    }
  o = calloc(1, sizeof(*o) + len + 1);
  if(!o)
    return NULL;
  o->hash = h;
  memcpy(o->key, key, len + 1);
  o->next = *b;
  *b = o;
  set_stat(&loop->origin_records, loop->origin_records + 1);
  set_stat(&loop->origin_allocated, loop->origin_allocated + 1);
  return o;
}

/* Keep `o` idle when nothing counts in it and it is not on the ready
 * list; past the bound, free the record idle the longest. */
static void idle_if_unused(struct ct_loop *loop, struct cti_origin *o)
{
  if(o->running > 0 || o->wait_head || o->ready || o->idle)
    return;
  o->idle = 1;
  o->idle_prev = NULL;
  o->idle_next = loop->origin_idle;
  if(loop->origin_idle)
    loop->origin_idle->idle_prev = o;
  else
    loop->origin_idle_tail = o;
  loop->origin_idle = o;
  set_stat(&loop->origin_idle_count, loop->origin_idle_count + 1);
  if(loop->origin_idle_count > CT_ORIGIN_IDLE_MAX) {
    struct cti_origin *oldest = loop->origin_idle_tail;
    idle_unlink(loop, oldest);
    origin_free(loop, oldest);
  }
}

/* Whether `url` begins with the last transfer's scheme and authority,
 * byte for byte, and its authority ends there. */
static int same_as_last(const struct ct_loop *loop, const char *url)
{
  size_t n = loop->origin_last_prefix_len;
  char c;
  if(!loop->origin_last || strncmp(url, loop->origin_last_prefix, n) != 0)
    return 0;
  c = url[n];
  return c == '\0' || c == '/' || c == '?' || c == '#';
}

/* The record of `t`'s origin, found or made; NULL when `t` is not under
 * the rule (no authority, a key too long) or there is no memory. */
static struct cti_origin *origin_of(struct ct_loop *loop,
                                    const struct cti_transfer *t)
{
  char key[KEY_MAX];
  size_t len;
  size_t prefix = 0;
  struct cti_origin *o;
  if(same_as_last(loop, t->url)) {
    o = loop->origin_last;
    if(o->idle)
      idle_unlink(loop, o);       /* in use again */
    return o;
  }
  len = origin_key(t->url, key, sizeof(key), &prefix);
  if(!len)
    return NULL;
  o = find_or_add(loop, key, len);
  if(o && prefix < sizeof(loop->origin_last_prefix)) {
    memcpy(loop->origin_last_prefix, t->url, prefix);
    loop->origin_last_prefix_len = prefix;
    loop->origin_last = o;
  }
  return o;
}

int cti_origin_enter(struct ct_loop *loop, struct cti_transfer *t)
{
  struct cti_origin *o;
  int64_t limit = loop->config.max_connections_per_host;
  if(limit <= 0 || !t->url || !one_per_connection(loop, t))
    return 0;
  o = origin_of(loop, t);
  if(!o)
    return 0;            /* no memory, or not under the rule: libcurl's own
                            limit still holds */
  t->origin = o;
  if(o->running < limit && !o->wait_head) {
    o->running++;
    return 0;
  }
  t->origin_waiting = 1;
  t->origin_next = NULL;
  t->origin_prev = o->wait_tail;
  if(o->wait_tail)
    o->wait_tail->origin_next = t;
  else
    o->wait_head = t;
  o->wait_tail = t;
  set_waiting(loop, 1);
  return 1;
}

static void unlink_waiting(struct ct_loop *loop, struct cti_origin *o,
                           struct cti_transfer *t)
{
  if(t->origin_prev)
    t->origin_prev->origin_next = t->origin_next;
  else
    o->wait_head = t->origin_next;
  if(t->origin_next)
    t->origin_next->origin_prev = t->origin_prev;
  else
    o->wait_tail = t->origin_prev;
  t->origin_next = t->origin_prev = NULL;
  t->origin_waiting = 0;
  set_waiting(loop, -1);
}

struct cti_transfer *cti_origin_next(struct ct_loop *loop)
{
  struct cti_origin *o;
  while((o = loop->origin_ready)) {
    if(o->wait_head && o->running < loop->config.max_connections_per_host) {
      struct cti_transfer *t = o->wait_head;
      unlink_waiting(loop, o, t);
      o->running++;
      return t;
    }
    loop->origin_ready = o->ready_next;
    o->ready_next = NULL;
    o->ready = 0;
    idle_if_unused(loop, o);
  }
  return NULL;
}

void cti_origin_leave(struct ct_loop *loop, struct cti_transfer *t)
{
  struct cti_origin *o = t->origin;
  if(!o)
    return;
  t->origin = NULL;
  if(t->origin_waiting)
    unlink_waiting(loop, o, t);
  else
    o->running--;
  if(o->wait_head && o->running < loop->config.max_connections_per_host) {
    if(!o->ready) {
      o->ready = 1;
      o->ready_next = loop->origin_ready;
      loop->origin_ready = o;
    }
    return;
  }
  idle_if_unused(loop, o);
}

void cti_origin_free_all(struct ct_loop *loop)
{
  size_t i;
  if(!loop->origin_buckets)
    return;
  for(i = 0; i < CTI_ORIGIN_BUCKETS; i++) {
    struct cti_origin *o = loop->origin_buckets[i];
    while(o) {
      struct cti_origin *next = o->next;
      free(o);
      o = next;
    }
  }
  free(loop->origin_buckets);
  loop->origin_buckets = NULL;
  loop->origin_last = NULL;
  loop->origin_ready = NULL;
  loop->origin_idle = NULL;
  loop->origin_idle_tail = NULL;
  set_stat(&loop->origin_records, 0);
  set_stat(&loop->origin_idle_count, 0);
}

void ct_loop_origin_stats(const struct ct_loop *loop,
                          struct ct_origin_stats *out)
{
  out->records = __atomic_load_n(&loop->origin_records, __ATOMIC_RELAXED);
  out->idle = __atomic_load_n(&loop->origin_idle_count, __ATOMIC_RELAXED);
  out->allocated = __atomic_load_n(&loop->origin_allocated,
                                   __ATOMIC_RELAXED);
}
