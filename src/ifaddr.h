/* SPDX-License-Identifier: Apache-2.0
 * ifaddr.h - the addresses of the host's interfaces, kept current from
 * the kernel's netlink notifications.
 *
 * A proxy that listens on a wildcard address is reachable at every one of
 * them: the self check (egress_is_self) needs the list as it is now, not
 * as it was at start. Owns one NETLINK_ROUTE socket, opened and read
 * completely by ifaddr_open(); later changes are read when the socket is
 * readable (ifaddr_fd() in the caller's epoll set) and before each check
 * (ifaddr_refresh()), so an address added a moment ago already counts.
 */
#ifndef AIRLOCK_IFADDR_H
#define AIRLOCK_IFADDR_H

#include <stddef.h>

#include "addr.h"

struct ifaddr_set;

/* Opens the socket, subscribes to address changes and reads the current
 * list. Returns NULL with a reason in @err. */
struct ifaddr_set *ifaddr_open(char *err, size_t errlen);

/* The socket to watch for readability. */
int ifaddr_fd(const struct ifaddr_set *s);

/* Reads pending notifications without blocking; when any announced a
 * change (or some were lost), reads the whole list again. On a failure
 * the old list stays. */
void ifaddr_refresh(struct ifaddr_set *s);

/* The current list (valid until the next ifaddr_refresh()). */
const struct addr *ifaddr_list(const struct ifaddr_set *s, size_t *n);

void ifaddr_close(struct ifaddr_set *s);

#endif /* AIRLOCK_IFADDR_H */
