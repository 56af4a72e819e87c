/* SPDX-License-Identifier: Apache-2.0
 * ifaddr.c - interface addresses from netlink (see ifaddr.h).
 *
 * DOC: Theory of Operation
 *
 * One NETLINK_ROUTE socket, bound to the IPv4 and IPv6 address groups, so
 * that the kernel queues a message on it for every address added or
 * removed. The list itself always comes from a full dump (RTM_GETADDR),
 * never from applying notifications one by one: a notification only
 * marks the list stale. A dump's replies carry our sequence number and
 * are told apart from notifications by it; a notification that arrives
 * during a dump makes the dump run again (bounded), and a lost one
 * (ENOBUFS: the socket overflowed) counts as a change. Reading is
 * non-blocking; a dump waits at most DUMP_WAIT_MS for its next part.
 */
#include "ifaddr.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define DUMP_WAIT_MS 200
#define DUMP_TRIES 4
#define RECV_BUF 16384

struct ifaddr_set {
	int fd;
	uint32_t seq;
	bool stale;
	struct addr *a;
	size_t n;
};

struct addr_list {
	struct addr *a;
	size_t n, cap;
};

static void add(struct addr_list *l, const struct addr *x)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->a = util_xrealloc(l->a, l->cap * sizeof(*l->a));
	}
	l->a[l->n++] = *x;
}

/* One RTM_NEWADDR message: its local address, if it has one. */
static bool parse_addr(const struct nlmsghdr *h, struct addr *out)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int len = (int)IFA_PAYLOAD(h);
	const struct rtattr *rta;
	const void *local = NULL, *address = NULL;
	size_t alen;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
		return false;
	if (ifa->ifa_family == AF_INET)
		alen = 4;
	else if (ifa->ifa_family == AF_INET6)
		alen = 16;
	else
		return false;
	for (rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (RTA_PAYLOAD(rta) != alen)
			continue;
		if (rta->rta_type == IFA_LOCAL)
			local = RTA_DATA(rta);
		else if (rta->rta_type == IFA_ADDRESS)
			address = RTA_DATA(rta);
	}
	/* On a point-to-point link IFA_ADDRESS is the peer; IFA_LOCAL is
	 * ours whenever it is present. */
	if (!local)
		local = address;
	if (!local)
		return false;
	memset(out, 0, sizeof(*out));
	out->family = ifa->ifa_family;
	memcpy(out->bytes, local, alen);
	return true;
}

/* Reads what is queued. With @dump (non-NULL), collects the replies to
 * the dump numbered s->seq until NLMSG_DONE (returns 1), waiting for more
 * up to DUMP_WAIT_MS; without, returns 0 at EAGAIN. Notifications mark
 * the set stale. Returns -1 on an error. */
static int drain(struct ifaddr_set *s, struct addr_list *dump)
{
	char buf[RECV_BUF] __attribute__((aligned(__alignof__(struct nlmsghdr))));

	for (;;) {
		ssize_t r = recv(s->fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;
		size_t left;

		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				s->stale = true; /* notifications were lost */
				continue;
			}
			if (errno != EAGAIN)
				return -1;
			if (!dump)
				return 0;
			{
				struct pollfd pfd = { .fd = s->fd, .events = POLLIN };

				if (poll(&pfd, 1, DUMP_WAIT_MS) <= 0)
					return -1;
			}
			continue;
		}
		left = (size_t)r;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			bool ours = dump && h->nlmsg_seq == s->seq && h->nlmsg_pid != 0;

			if (!ours) {
				if (h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR)
					s->stale = true;
				continue;
			}
			if (h->nlmsg_type == NLMSG_DONE)
				return 1;
			if (h->nlmsg_type == NLMSG_ERROR)
				return -1;
			if (h->nlmsg_type == RTM_NEWADDR) {
				struct addr a;

				if (parse_addr(h, &a))
					add(dump, &a);
			}
		}
	}
}

static int dump(struct ifaddr_set *s)
{
	struct {
		struct nlmsghdr h;
		struct ifaddrmsg ifa;
	} req;
	struct addr_list list = { NULL, 0, 0 };
	int tries, r = -1;

	for (tries = 0; tries < DUMP_TRIES; tries++) {
		list.n = 0;
		memset(&req, 0, sizeof(req));
		req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifa));
		req.h.nlmsg_type = RTM_GETADDR;
		req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
		req.h.nlmsg_seq = ++s->seq;
		req.ifa.ifa_family = AF_UNSPEC;
		s->stale = false;
		if (send(s->fd, &req, req.h.nlmsg_len, 0) < 0)
			goto out;
		if (drain(s, &list) != 1)
			goto out;
		if (!s->stale)
			break;
	}
	free(s->a);
	s->a = list.a;
	s->n = list.n;
	list.a = NULL;
	r = 0;
out:
	if (r < 0)
		s->stale = true; /* tried again at the next refresh */
	free(list.a);
	return r;
}

struct ifaddr_set *ifaddr_open(char *err, size_t errlen)
{
	struct ifaddr_set *s = util_xcalloc(1, sizeof(*s));
	struct sockaddr_nl snl;

	s->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       NETLINK_ROUTE);
	if (s->fd < 0) {
		snprintf(err, errlen, "netlink: %s", strerror(errno));
		goto fail;
	}
	memset(&snl, 0, sizeof(snl));
	snl.nl_family = AF_NETLINK;
	snl.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
	if (bind(s->fd, (struct sockaddr *)&snl, sizeof(snl)) < 0) {
		snprintf(err, errlen, "netlink: bind: %s", strerror(errno));
		goto fail;
	}
	if (dump(s) < 0) {
		snprintf(err, errlen, "netlink: cannot read the interface addresses");
		goto fail;
	}
	return s;
fail:
	ifaddr_close(s);
	return NULL;
}

int ifaddr_fd(const struct ifaddr_set *s)
{
	return s->fd;
}

void ifaddr_refresh(struct ifaddr_set *s)
{
	(void)drain(s, NULL);
	if (s->stale)
		(void)dump(s); /* on failure: stale stays set, tried again */
}

const struct addr *ifaddr_list(const struct ifaddr_set *s, size_t *n)
{
	*n = s->n;
	return s->a;
}

void ifaddr_close(struct ifaddr_set *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->a);
	free(s);
}
