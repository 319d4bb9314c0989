/*
 * ct_netlink.c - NETLINK_ROUTE queries and change monitoring for the
 * reachability monitor. Independent of the transfer loop: nothing here
 * touches libcurl, and every function owns the sockets it opens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if.h>
#include <netinet/in.h>

#include "ct_netlink.h"

#define NL_BUFSIZE 16384

/* NLMSG_OK with the signed length this file uses (the header's version
 * compares a __u32 with an int). */
#define MSG_OK(nh, len) ((len) >= (int)sizeof(struct nlmsghdr) && \
                         (nh)->nlmsg_len >= sizeof(struct nlmsghdr) && \
                         (int)(nh)->nlmsg_len <= (len))

static void set_errno_out(int *out_errno, int value)
{
  if(out_errno)
    *out_errno = value;
}

ct_code ct_netlink_monitor_open(int *out_fd, int *out_errno)
{
  struct sockaddr_nl local;
  int fd;
  int err;

  if(!out_fd)
    return CT_E_INVALID_ARGUMENT;
  *out_fd = -1;
  set_errno_out(out_errno, 0);
  fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
              NETLINK_ROUTE);
  if(fd < 0) {
    set_errno_out(out_errno, errno);
    return CT_E_SYSTEM;
  }
  memset(&local, 0, sizeof(local));
  local.nl_family = AF_NETLINK;
  local.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE |
                    RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if(bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0) {
    err = errno;
    close(fd);
    set_errno_out(out_errno, err);
    return CT_E_SYSTEM;
  }
  *out_fd = fd;
  return CT_OK;
}

int ct_netlink_monitor_drain(int fd)
{
  char buf[NL_BUFSIZE];
  int events = 0;

  for(;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    struct nlmsghdr *nh;
    int len;

    if(n < 0) {
      if(errno == EINTR)
        continue;
      if(errno == EAGAIN || errno == EWOULDBLOCK)
        return events;
      if(errno == ENOBUFS) {
        /* The kernel dropped messages: something changed, re-evaluate. */
        events++;
        continue;
      }
      return -errno;
    }
    if(n == 0)
      return events;
    len = (int)n;
    for(nh = (struct nlmsghdr *)buf; MSG_OK(nh, len);
        nh = NLMSG_NEXT(nh, len)) {
      switch(nh->nlmsg_type) {
      case RTM_NEWLINK:
      case RTM_DELLINK:
      case RTM_NEWROUTE:
      case RTM_DELROUTE:
      case RTM_NEWADDR:
      case RTM_DELADDR:
        events++;
        break;
      default:
        break;
      }
    }
  }
}

/* A socket for one request/response exchange, with a receive deadline so a
 * silent kernel (it never is) cannot hang the caller. */
static int open_query_socket(int *out_errno)
{
  struct sockaddr_nl local;
  struct timeval tv;
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  int err;

  if(fd < 0) {
    set_errno_out(out_errno, errno);
    return -1;
  }
  memset(&local, 0, sizeof(local));
  local.nl_family = AF_NETLINK;
  tv.tv_sec = 1;
  tv.tv_usec = 0;
  if(bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0 ||
     setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
    err = errno;
    close(fd);
    set_errno_out(out_errno, err);
    return -1;
  }
  return fd;
}

static void add_attr(struct nlmsghdr *nh, size_t cap, unsigned short type,
                     const void *data, size_t len)
{
  size_t off = NLMSG_ALIGN(nh->nlmsg_len);
  struct rtattr *rta = (struct rtattr *)((char *)nh + off);

  if(off + RTA_SPACE(len) > cap)
    return;
  rta->rta_type = type;
  rta->rta_len = (unsigned short)RTA_LENGTH(len);
  memcpy(RTA_DATA(rta), data, len);
  nh->nlmsg_len = (uint32_t)(off + RTA_SPACE(len));
}

/*
 * Send `req` and receive the one answer with its sequence number. Returns 0
 * and copies the answer into `reply` (at most `cap` bytes), a positive errno
 * from an NLMSG_ERROR answer, or -1 with `*sys_errno` set when the socket
 * failed.
 */
static int exchange(int fd, struct nlmsghdr *req, char *reply, size_t cap,
                    int *sys_errno)
{
  char buf[NL_BUFSIZE];
  uint32_t seq = req->nlmsg_seq;

  if(send(fd, req, req->nlmsg_len, 0) < 0) {
    *sys_errno = errno;
    return -1;
  }
  for(;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    struct nlmsghdr *nh;
    int len;

    if(n < 0) {
      if(errno == EINTR)
        continue;
      *sys_errno = errno;
      return -1;
    }
    len = (int)n;
    for(nh = (struct nlmsghdr *)buf; MSG_OK(nh, len);
        nh = NLMSG_NEXT(nh, len)) {
      if(nh->nlmsg_seq != seq)
        continue;
      if(nh->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA(nh);
        if(nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
          return EPROTO;
        if(e->error == 0)
          continue; /* an ACK, not our answer */
        return -e->error;
      }
      if(nh->nlmsg_len > cap)
        return EMSGSIZE;
      memcpy(reply, nh, nh->nlmsg_len);
      return 0;
    }
  }
}

static int query_link(int fd, int32_t ifindex, struct ct_route_info *out,
                      int *sys_errno)
{
  struct {
    struct nlmsghdr nh;
    struct ifinfomsg ifi;
  } req;
  char reply[NL_BUFSIZE];
  struct nlmsghdr *nh = (struct nlmsghdr *)reply;
  struct ifinfomsg *ifi;
  struct rtattr *rta;
  int rc;
  int len;

  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 2;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  rc = exchange(fd, &req.nh, reply, sizeof(reply), sys_errno);
  if(rc != 0)
    return rc;
  if(nh->nlmsg_type != RTM_NEWLINK ||
     nh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
    return EPROTO;
  ifi = (struct ifinfomsg *)NLMSG_DATA(nh);
  out->link_type = ifi->ifi_type;
  out->link_flags = ifi->ifi_flags;
  len = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi)));
  for(rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
    if(rta->rta_type == IFLA_IFNAME) {
      size_t n = RTA_PAYLOAD(rta);
      if(n >= sizeof(out->ifname))
        n = sizeof(out->ifname) - 1;
      memcpy(out->ifname, RTA_DATA(rta), n);
      out->ifname[n] = '\0';
    }
  }
  return 0;
}

ct_code ct_netlink_route_get(int family, const void *addr,
                             struct ct_route_info *out, int *out_errno)
{
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
  } req;
  char reply[NL_BUFSIZE];
  struct nlmsghdr *nh = (struct nlmsghdr *)reply;
  struct rtmsg *rt;
  struct rtattr *rta;
  size_t addr_len;
  int sys_errno = 0;
  int fd = -1;
  int rc;
  int len;
  ct_code code = CT_E_SYSTEM;

  if(!addr || !out)
    return CT_E_INVALID_ARGUMENT;
  if(family == AF_INET)
    addr_len = 4;
  else if(family == AF_INET6)
    addr_len = 16;
  else
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  set_errno_out(out_errno, 0);

  fd = open_query_socket(out_errno);
  if(fd < 0)
    return CT_E_SYSTEM;

  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  req.nh.nlmsg_type = RTM_GETROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.rt.rtm_family = (unsigned char)family;
  req.rt.rtm_dst_len = (unsigned char)(addr_len * 8);
  add_attr(&req.nh, sizeof(req), RTA_DST, addr, addr_len);

  rc = exchange(fd, &req.nh, reply, sizeof(reply), &sys_errno);
  if(rc < 0) {
    set_errno_out(out_errno, sys_errno);
    goto done;
  }
  if(rc > 0) {
    /* ENETUNREACH, EHOSTUNREACH, EACCES (prohibit), EINVAL (blackhole) */
    set_errno_out(out_errno, rc);
    code = CT_E_NOT_FOUND;
    goto done;
  }
  if(nh->nlmsg_type != RTM_NEWROUTE ||
     nh->nlmsg_len < NLMSG_LENGTH(sizeof(*rt))) {
    set_errno_out(out_errno, EPROTO);
    goto done;
  }
  rt = (struct rtmsg *)NLMSG_DATA(nh);
  out->route_type = rt->rtm_type;
  len = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(*rt)));
  for(rta = RTM_RTA(rt); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
    if(rta->rta_type == RTA_OIF && RTA_PAYLOAD(rta) >= sizeof(int32_t))
      memcpy(&out->ifindex, RTA_DATA(rta), sizeof(int32_t));
  }
  if(out->ifindex <= 0) {
    set_errno_out(out_errno, ENETUNREACH);
    code = CT_E_NOT_FOUND;
    goto done;
  }
  rc = query_link(fd, out->ifindex, out, &sys_errno);
  if(rc < 0) {
    set_errno_out(out_errno, sys_errno);
    goto done;
  }
  if(rc > 0) {
    /* The interface vanished between the two answers. */
    set_errno_out(out_errno, rc);
    code = CT_E_NOT_FOUND;
    goto done;
  }
  code = CT_OK;
done:
  close(fd);
  return code;
}

#define MAX_DEFAULT_ROUTES 16

struct candidate {
  int32_t ifindex;
  uint32_t priority;
};

/* Read the parts of a dump answer, keeping the output interfaces of default
 * unicast routes of the main table. Returns 0, a positive errno from the
 * kernel, or -1 with `*sys_errno` set. */
static int collect_default_routes(int fd, uint32_t seq,
                                  struct candidate *cands, int *count,
                                  int *sys_errno)
{
  char buf[NL_BUFSIZE];

  for(;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    struct nlmsghdr *nh;
    int len;

    if(n < 0) {
      if(errno == EINTR)
        continue;
      *sys_errno = errno;
      return -1;
    }
    len = (int)n;
    for(nh = (struct nlmsghdr *)buf; MSG_OK(nh, len);
        nh = NLMSG_NEXT(nh, len)) {
      struct rtmsg *rt;
      struct rtattr *rta;
      uint32_t table;
      int alen;
      struct candidate c;

      if(nh->nlmsg_seq != seq)
        continue;
      if(nh->nlmsg_type == NLMSG_DONE)
        return 0;
      if(nh->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA(nh);
        if(nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
          return EPROTO;
        if(e->error == 0)
          continue;
        return -e->error;
      }
      if(nh->nlmsg_type != RTM_NEWROUTE ||
         nh->nlmsg_len < NLMSG_LENGTH(sizeof(*rt)))
        continue;
      rt = (struct rtmsg *)NLMSG_DATA(nh);
      if(rt->rtm_dst_len != 0 || rt->rtm_type != RTN_UNICAST)
        continue;
      table = rt->rtm_table;
      c.ifindex = 0;
      c.priority = 0;
      alen = (int)(nh->nlmsg_len - NLMSG_LENGTH(sizeof(*rt)));
      for(rta = RTM_RTA(rt); RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
        size_t plen = RTA_PAYLOAD(rta);
        if(rta->rta_type == RTA_TABLE && plen >= sizeof(uint32_t))
          memcpy(&table, RTA_DATA(rta), sizeof(uint32_t));
        else if(rta->rta_type == RTA_OIF && plen >= sizeof(int32_t))
          memcpy(&c.ifindex, RTA_DATA(rta), sizeof(int32_t));
        else if(rta->rta_type == RTA_PRIORITY && plen >= sizeof(uint32_t))
          memcpy(&c.priority, RTA_DATA(rta), sizeof(uint32_t));
        else if(rta->rta_type == RTA_MULTIPATH && c.ifindex == 0 &&
                plen >= sizeof(struct rtnexthop)) {
          /* ECMP: the first next hop stands for the route. */
          struct rtnexthop *nhop = (struct rtnexthop *)RTA_DATA(rta);
          c.ifindex = nhop->rtnh_ifindex;
        }
      }
      if(table != RT_TABLE_MAIN || c.ifindex <= 0 ||
         *count >= MAX_DEFAULT_ROUTES)
        continue;
      cands[(*count)++] = c;
    }
  }
}

ct_code ct_netlink_default_route(int family, struct ct_route_info *out,
                                 int *out_errno)
{
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
  } req;
  struct candidate cands[MAX_DEFAULT_ROUTES];
  int count = 0;
  int sys_errno = 0;
  int fd;
  int rc;
  int i;
  ct_code code = CT_E_SYSTEM;

  if(!out)
    return CT_E_INVALID_ARGUMENT;
  if(family != AF_INET && family != AF_INET6)
    return CT_E_INVALID_ARGUMENT;
  memset(out, 0, sizeof(*out));
  set_errno_out(out_errno, 0);
  fd = open_query_socket(out_errno);
  if(fd < 0)
    return CT_E_SYSTEM;

  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  req.nh.nlmsg_type = RTM_GETROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nh.nlmsg_seq = 3;
  req.rt.rtm_family = (unsigned char)family;
  if(send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
    set_errno_out(out_errno, errno);
    goto done;
  }
  rc = collect_default_routes(fd, req.nh.nlmsg_seq, cands, &count,
                              &sys_errno);
  if(rc < 0) {
    set_errno_out(out_errno, sys_errno);
    goto done;
  }
  if(rc > 0) {
    set_errno_out(out_errno, rc);
    goto done;
  }

  /* Lowest metric first; a handful of entries, so insertion sort. */
  for(i = 1; i < count; i++) {
    struct candidate c = cands[i];
    int j = i - 1;
    while(j >= 0 && cands[j].priority > c.priority) {
      cands[j + 1] = cands[j];
      j--;
    }
    cands[j + 1] = c;
  }
  code = CT_E_NOT_FOUND;
  set_errno_out(out_errno, ENETUNREACH);
  for(i = 0; i < count; i++) {
    struct ct_route_info info;
    memset(&info, 0, sizeof(info));
    info.ifindex = cands[i].ifindex;
    info.route_type = RTN_UNICAST;
    rc = query_link(fd, cands[i].ifindex, &info, &sys_errno);
    if(rc < 0) {
      set_errno_out(out_errno, sys_errno);
      code = CT_E_SYSTEM;
      goto done;
    }
    if(rc > 0)
      continue;
    if((info.link_flags & IFF_UP) && (info.link_flags & IFF_RUNNING)) {
      *out = info;
      set_errno_out(out_errno, 0);
      code = CT_OK;
      goto done;
    }
  }
done:
  close(fd);
  return code;
}
