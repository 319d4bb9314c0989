/*
 * ct_watch.c - curl's sockets in the loop's epoll set.
 *
 * libcurl stops polling a connection's socket when its transfer ends
 * (CURL_POLL_REMOVE) and polls it again when the next transfer takes the
 * connection from its pool. Done literally, that is an EPOLL_CTL_DEL and an
 * EPOLL_CTL_ADD per request on a keep-alive connection: 7-8 % of the CPU of
 * a client of small requests (perf, 20,000 GETs of 1 KiB).
 *
 * A socket the loop opened (ct_tls_sockets.c tracks it by descriptor) stays
 * in the set while it is idle in curl's pool instead. Polled again for the
 * same events, it costs no system call. If an idle socket becomes ready
 * (the server closed the connection, or sent something unasked), it is
 * taken out of the set then and curl is not woken: curl finds out itself,
 * with its liveness check, when it next considers the connection. An idle
 * socket that was polled for writing is taken out at once (it would be
 * ready at once). A tracked socket leaves the set before it is closed, so
 * a descriptor number reused by a new socket always starts outside.
 * Sockets the loop did not open (the threaded resolver's) are added and
 * removed as curl asks. Loop thread only.
 */
#include "ct_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>

static int ctl(struct ct_loop *loop, int op, curl_socket_t fd,
               uint32_t events)
{
  struct epoll_event ev;

  memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.fd = fd;
  cti_count_epoll_ctl(loop);
  return epoll_ctl(loop->epfd, op, fd, &ev);
}

/* Adds `fd`, or changes its events if it is in the set already. */
static void add(struct ct_loop *loop, curl_socket_t fd, uint32_t events)
{
  if(ctl(loop, EPOLL_CTL_ADD, fd, events) != 0 && errno == EEXIST)
    ctl(loop, EPOLL_CTL_MOD, fd, events);
}

/* Changes the events of `fd`, or adds it if it is not in the set. */
static void modify(struct ct_loop *loop, curl_socket_t fd, uint32_t events)
{
  if(ctl(loop, EPOLL_CTL_MOD, fd, events) != 0 && errno == ENOENT)
    ctl(loop, EPOLL_CTL_ADD, fd, events);
}

void cti_watch_socket(struct ct_loop *loop, curl_socket_t fd,
                      uint32_t events, void *socketp)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  if(slot) {
    if(slot->in_set && slot->events == events)
      return;                   /* idle with these events, or unchanged */
    if(slot->in_set)
      modify(loop, fd, events);
    else
      add(loop, fd, events);
    slot->in_set = 1;
    slot->events = events;
    return;
  }
  /* Not ours: curl's per-socket pointer says whether it is in the set. */
  if(!socketp) {
    add(loop, fd, events);
    curl_multi_assign(loop->multi, fd, loop);
  }
  else
    modify(loop, fd, events);
}

void cti_unwatch_socket(struct ct_loop *loop, curl_socket_t fd)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  if(slot && slot->in_set && !(slot->events & EPOLLOUT))
    return;                     /* idle: stays in the set */
  cti_watch_drop(loop, fd);
}

int cti_watch_idle_event(struct ct_loop *loop, curl_socket_t fd)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  if(!slot || slot->polled || !slot->in_set)
    return 0;
  cti_watch_drop(loop, fd);
  return 1;
}

void cti_watch_drop(struct ct_loop *loop, curl_socket_t fd)
{
  struct cti_tracked_socket *slot = cti_tracked_socket_find(loop, fd);

  if(slot && !slot->in_set)
    return;
  ctl(loop, EPOLL_CTL_DEL, fd, 0);   /* EBADF if already closed */
  if(slot)
    slot->in_set = 0;
}
