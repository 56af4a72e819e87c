/* SPDX-License-Identifier: Apache-2.0
 * transparent.h - transparent mode inside the sandbox's network namespace:
 * the redirect of every outgoing TCP connection to the proxy's
 * transparent listener, UDP refused but DNS to the stub, and the original
 * destination of a redirected connection (docs/TRANSPARENT.md).
 */
#ifndef AIRLOCK_TRANSPARENT_H
#define AIRLOCK_TRANSPARENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "dnsstub.h"

/* Where the sandbox's resolv.conf points: resolvers take no port, so it
 * is 53 in real sessions. */
#define TRANSPARENT_STUB_ADDR "127.0.0.53"
#define TRANSPARENT_STUB_PORT 53

struct transparent_config {
	uint16_t listen_port; /* the transparent listener's port on 127.0.0.1
				 (and [::1] when the namespace has IPv6) */
	struct addr stub;     /* the DNS stub's address: a loopback address */
	uint16_t stub_port;   /* the stub's UDP port */
};

/* Fills @cfg with the stub at 127.0.0.53:53 and @listen_port. */
void transparent_config_default(struct transparent_config *cfg,
				uint16_t listen_port);

/* Does this namespace have IPv6 on loopback (an AF_INET6 socket can be
 * bound to [::1])? Decides whether setup and listen do IPv6. */
bool transparent_has_ipv6(void);

/* The nftables ruleset of @cfg (its own table, "inet airlock", replaced
 * whole if it exists), with the IPv6 rules when @ipv6. Writes the
 * NUL-terminated text into @out; returns false when it does not fit. */
bool transparent_ruleset(const struct transparent_config *cfg, bool ipv6,
			 char *out, size_t len);

/* Sets up the redirect in the calling process's network namespace, where
 * it must hold CAP_NET_ADMIN (the sandbox's init, before it drops its
 * capabilities): brings lo up, refuses a namespace with any other
 * interface up (the kernel's fallback tunnels, always down, are no
 * matter), loads the ruleset through libnftables, then adds a default
 * route through lo (IPv4 with source 127.0.0.1, IPv6 with source ::1
 * when the namespace has IPv6) so that connect() to any address leaves
 * through the redirect instead of failing with ENETUNREACH. The routes
 * come last: if anything fails, no route was added and connections to
 * outside addresses still fail at once. Returns 0, or -errno with one
 * line saying what failed in @err (@errlen > 0). */
int transparent_setup(const struct transparent_config *cfg, char *err,
		      size_t errlen);

/* Loads libnftables now, in a process that can still read the host's
 * libraries (transparent_setup would load it on first use; a sandbox's
 * init inherits it from the supervisor that called this). Returns
 * true, or false with one line in @err (@errlen > 0). */
bool transparent_preload(char *err, size_t errlen);

/* In the namespace: the transparent listener's sockets, TCP, listening,
 * non-blocking, close-on-exec: fds[0] on 127.0.0.1:PORT, fds[1] on
 * [::1]:PORT (IPV6_V6ONLY) or -1 without IPv6. @port 0 picks a free port
 * for both. *bound receives the port (the ruleset's listen_port).
 * Returns 0, or -errno with @err filled (no socket left open). */
int transparent_listen(uint16_t port, int fds[2], uint16_t *bound,
		       char *err, size_t errlen);

/* In the namespace: the stub's UDP socket bound to @a:@port,
 * non-blocking, close-on-exec. Returns the descriptor or -errno with
 * @err filled. */
int transparent_stub_socket(const struct addr *a, uint16_t port, char *err,
			    size_t errlen);

/* The destination that the accepted connection @fd was first sent to,
 * before the redirect (SO_ORIGINAL_DST, IP6T_SO_ORIGINAL_DST). Returns 0
 * with *a and *port; -ENOENT when @fd was not redirected (the kernel
 * knows no other destination, or it is a loopback one: a client that
 * connected to the listener directly); other -errno from the kernel. */
int transparent_original_dst(int fd, struct addr *a, uint16_t *port);

/* Serves one datagram of the non-blocking stub socket @fd with @s:
 * receives it, answers it (dnsstub_answer) to its sender. Returns 1 with
 * *res filled (the caller records dns.block when res->record), 0 when no
 * datagram is waiting, -errno on a socket error (the socket stays
 * usable: log it and wait for the next EPOLLIN). A reply that cannot be
 * sent at once is dropped (the client asks again). Call it until it
 * returns 0 or less on each EPOLLIN. */
int transparent_stub_serve(int fd, struct dnsstub *s,
			   struct dnsstub_result *res);

/* The sandbox's init, in its own network namespace while it still holds
 * CAP_NET_ADMIN there: makes the transparent listener's sockets
 * (listen_fds[0] on 127.0.0.1, listen_fds[1] on [::1] or -1 without
 * IPv6, on one free port), the stub's UDP socket on 127.0.0.53:53
 * (*stub_fd), then sets the redirect up to that port
 * (transparent_setup). The descriptors are the caller's, to hand to the
 * supervisor. Returns 0, or -errno with @err filled and no descriptor
 * left open. */
int transparent_sandbox_prepare(int listen_fds[2], int *stub_fd, char *err,
				size_t errlen);

/* The sandbox's /etc/resolv.conf naming only the stub at @stub (port 53
 * implied). Returns false when @len is too small. */
bool transparent_resolv_conf(const struct addr *stub, char *out, size_t len);

/* The probe of `airlock doctor`: in a fresh network namespace where the
 * caller holds CAP_NET_ADMIN and nothing else runs, sets the redirect up
 * with a listener on a free port, connects to 203.0.113.9:80 (and
 * [2001:db8::9]:80 with IPv6), and checks that the listener accepted
 * it with that original destination, in at most about a second. The
 * namespace keeps the redirect afterwards: call it in a throw-away
 * child. Returns 0 or -errno with @err filled. */
int transparent_selftest(char *err, size_t errlen);

#endif /* AIRLOCK_TRANSPARENT_H */
