/*
 * ct_tls_sockets.c - which connection was made under which trust policy.
 *
 * curl opens and closes every socket of the loop through these callbacks,
 * so the loop knows the trust generation each connection was made under,
 * whether curl polls it now, and which transfers opened and last used it.
 * When the policy changes (ct_loop.c), connections of an older generation
 * that curl does not poll and that no live transfer opened or last used
 * sit idle in curl's pool: they are shut down, so nobody talks over a
 * connection the new policy never judged. (Running transfers
 * cannot pick them up either: their trust marker changed with the policy.)
 * Plain-HTTP connections are closed too: the loop does not know which
 * sockets carry TLS, and a policy change is rare. Loop thread only.
 */
#define _GNU_SOURCE
#include "ct_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The table is indexed by descriptor (descriptors are small and dense),
 * so the socket callback finds an entry without a search. */
struct cti_tracked_socket *cti_tracked_socket_find(struct ct_loop *loop,
                                                   curl_socket_t fd)
{
  if(fd < 0 || (size_t)fd >= loop->socket_cap || !loop->sockets[fd].open)
    return NULL;
  return &loop->sockets[fd];
}

curl_socket_t cti_tls_open_socket(void *clientp, curlsocktype purpose,
                                  struct curl_sockaddr *address)
{
  struct cti_transfer *t = clientp;
  struct ct_loop *loop = t->loop;
  struct cti_tracked_socket *slot;
  curl_socket_t fd;

  (void)purpose;
  fd = socket(address->family, address->socktype, address->protocol);
  if(fd == CURL_SOCKET_BAD) {
    /* libcurl only sees CURL_SOCKET_BAD and says "Couldn't connect":
     * keep the reason, so EMFILE is classified as what it is. */
    t->socket_errno = errno;
    return fd;
  }
  t->socket_errno = 0;
  if((size_t)fd >= loop->socket_cap) {
    size_t cap = loop->socket_cap ? loop->socket_cap : 64;
    struct cti_tracked_socket *grown;
    while(cap <= (size_t)fd)
      cap *= 2;
    grown = realloc(loop->sockets, cap * sizeof(*grown));
    if(!grown) {
      /* Untracked, it could outlive a policy change idle in the pool:
       * refuse the connection instead (curl reports it). */
      close(fd);
      return CURL_SOCKET_BAD;
    }
    memset(grown + loop->socket_cap, 0,
           (cap - loop->socket_cap) * sizeof(*grown));
    loop->sockets = grown;
    loop->socket_cap = cap;
  }
  slot = &loop->sockets[fd];
  memset(slot, 0, sizeof(*slot));
  slot->open = 1;
  slot->generation = t->trust_generation;
  slot->opener = t->id;
  __atomic_store_n(&loop->open_sockets,
                   __atomic_load_n(&loop->open_sockets, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
  return fd;
}

int cti_tls_close_socket(void *clientp, curl_socket_t fd)
{
  struct ct_loop *loop = clientp;
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  /* Out of the epoll set first: the number may be reused at once. */
  if(slot && slot->in_set)
    cti_watch_drop(loop, fd);

  if(slot && slot->open)
    __atomic_store_n(&loop->open_sockets,
                     __atomic_load_n(&loop->open_sockets, __ATOMIC_RELAXED) - 1,
                     __ATOMIC_RELAXED);
  if(slot)
    slot->open = 0;
  return close(fd);
}
void cti_tls_socket_polled(struct ct_loop *loop, curl_socket_t fd,
                           CURL *easy, int polled)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);
  struct cti_transfer *t = NULL;

  if(!slot)
    return;
  slot->polled = polled;
  /* Only while polled: curl may remove a socket for a handle whose
   * transfer is gone, and the slot says whether it is still polled. */
  if(polled && easy &&
     curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t) == CURLE_OK && t) {
    slot->user = t->id;
    t->sock = fd;             /* ct_loop.c drives it again after reading */
    t->sock_polled = 1;
    /* A read-ahead connection joins the loop's re-drive list the first
     * time libcurl polls its socket once its TLS has started. */
    cti_tls_conn_polled(loop, easy, fd);
  }
}

int cti_tls_socket_is_polled(struct ct_loop *loop, curl_socket_t fd)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  return slot && slot->polled;
}

/* 1 when transfer `id` is still running (paused counts as running). */
static int is_live(struct ct_loop *loop, uint64_t id)
{
  struct cti_transfer *t = id ? cti_loop_find(loop, id) : NULL;

  return t && t->phase < CT_PHASE_FINISHING;
}

void cti_tls_close_stale_sockets(struct ct_loop *loop)
{
  size_t i;
  size_t busy = 0;

  for(i = 0; i < loop->socket_cap; i++) {
    struct cti_tracked_socket *s = &loop->sockets[i];
    if(!s->open || s->shut || s->generation >= loop->trust_generation)
      continue;
    /* In use: curl polls it for a transfer, or a live transfer opened it
     * or was the last one polled on it (a paused one is not polled). */
    if(s->polled || is_live(loop, s->opener) || is_live(loop, s->user)) {
      busy++;
      continue;
    }
    /* Not close(): curl still owns the descriptor and closes it through
     * cti_tls_close_socket when it finds the connection dead. */
    shutdown((int)i, SHUT_RDWR);
    s->shut = 1;
  }
  loop->stale_sockets = busy;
}
