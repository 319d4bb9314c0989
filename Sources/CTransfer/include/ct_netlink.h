/*
 * ct_netlink.h - route and link queries over NETLINK_ROUTE, for reachability.
 *
 * The Swift Reachability type asks the kernel which interface a packet to an
 * address would leave through (RTM_GETROUTE), what kind of link that is
 * (RTM_GETLINK), and listens for link, route and address changes on a
 * subscribed socket. No packet leaves the machine for any of this.
 */
#ifndef CT_NETLINK_H
#define CT_NETLINK_H

#include "ct_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The output interface of a route, as the kernel chose it. */
struct ct_route_info {
  int32_t ifindex;       /* output interface index (RTA_OIF) */
  uint8_t route_type;    /* RTN_UNICAST, RTN_LOCAL, ... */
  uint16_t link_type;   /* ARPHRD_* of the interface (ifi_type) */
  uint32_t link_flags;   /* IFF_* of the interface (ifi_flags) */
  char ifname[16];       /* IFNAMSIZ, NUL-terminated */
};

/**
 * Open a non-blocking, close-on-exec NETLINK_ROUTE socket subscribed to
 * link, IPv4/IPv6 route and IPv4/IPv6 address changes. Safe from any thread.
 *
 * On CT_OK `*out_fd` is the socket and the caller owns it (close(2) it).
 * On CT_E_SYSTEM `*out_errno` (when not NULL) says why and `*out_fd` is -1.
 */
ct_code ct_netlink_monitor_open(int *_Nonnull out_fd,
                                int *_Nullable out_errno);

/**
 * Read every message queued on a socket from ct_netlink_monitor_open()
 * without blocking. Returns how many change messages were read (a receive
 * buffer overflow counts as one: something changed and was lost), 0 when
 * nothing was queued, or -errno on a read error.
 */
int ct_netlink_monitor_drain(int fd);

/**
 * Ask the kernel for the route a packet to `addr` would take (RTM_GETROUTE),
 * then describe its output interface (RTM_GETLINK). Blocks for at most about
 * a second per query; safe from any thread; uses its own socket.
 *
 * `family` is AF_INET (`addr` points to 4 bytes) or AF_INET6 (16 bytes).
 * Returns CT_OK and fills `out`; CT_E_NOT_FOUND when the kernel has no usable
 * route (unreachable, prohibited, blackhole: `*out_errno` is its error);
 * CT_E_INVALID_ARGUMENT for a bad family; CT_E_SYSTEM when the socket itself
 * failed (`*out_errno` says why).
 */
ct_code ct_netlink_route_get(int family, const void *_Nonnull addr,
                             struct ct_route_info *_Nonnull out,
                             int *_Nullable out_errno);

/**
 * Find the default route of `family` (AF_INET or AF_INET6): a unicast route
 * with prefix length 0 in the main table whose output interface is up
 * (IFF_UP) and has a carrier (IFF_RUNNING), the lowest metric first; fill
 * `out` with that interface. Blocks for at most about a second per query;
 * safe from any thread.
 *
 * Returns CT_OK; CT_E_NOT_FOUND when there is no such route (or only routes
 * over interfaces that are down); CT_E_INVALID_ARGUMENT for a bad family;
 * CT_E_SYSTEM when the socket failed (`*out_errno` says why).
 */
ct_code ct_netlink_default_route(int family,
                                 struct ct_route_info *_Nonnull out,
                                 int *_Nullable out_errno);

#ifdef __cplusplus
}
#endif

#endif /* CT_NETLINK_H */
