/* SPDX-License-Identifier: Apache-2.0
 * transparent.c - the redirect of transparent mode, inside the sandbox's
 * network namespace.
 *
 * DOC: Theory of Operation
 *
 * The sandbox's network namespace has only loopback, so nothing the agent
 * sends can leave it; programs that honour the proxy variables reach the
 * proxy's listener on 127.0.0.1. Transparent mode serves the others
 * (Node's fetch, Go and Rust binaries, anything with its own resolver):
 *
 *   1. The sandbox's resolv.conf names the DNS stub (dnsstub.c), served
 *      by the supervisor on a UDP socket made in the namespace; it
 *      answers A with a synthetic address standing for the name.
 *   2. A default route through lo, with source 127.0.0.1 (and ::1), lets
 *      connect() to any address proceed instead of failing with
 *      ENETUNREACH; without the source, the kernel would pick no address
 *      for a link-scope route on lo and the SYN would go nowhere.
 *   3. An nftables table of airlock's own, loaded through libnftables in
 *      the namespace (by init, which holds CAP_NET_ADMIN there before it
 *      drops every capability): the nat output hook redirects every TCP
 *      connection whose destination is not loopback to the transparent
 *      listener's port on 127.0.0.1 / [::1]; the filter output hook,
 *      which sees packets after that redirect, lets through loopback
 *      traffic and the stub's DNS, and drops every other UDP datagram
 *      and every packet to a non-loopback address (an untracked TCP
 *      segment, say). A dropped packet fails the send at once with EPERM,
 *      so a program falls back or reports an error instead of waiting.
 *   4. The proxy accepts on the transparent listener and asks the kernel
 *      (conntrack) where the connection was first sent: SO_ORIGINAL_DST.
 *      A synthetic address is a request for its name, any other address
 *      a request for that IP literal; loopback is never a redirected
 *      destination, so a client that connects to the listener directly
 *      gets -ENOENT.
 *
 * The rules are the namespace's only ones and outlive no one: the
 * namespace dies with the session. The agent cannot change them: it has
 * no capability, and seccomp refuses new namespaces.
 *
 * Should: redirect TCP to every non-loopback IPv4 and IPv6 address, let
 * DNS reach the stub and its answers come back, let loopback work.
 * Mustn't: run in a namespace with an interface up besides lo (refused),
 * add the routes before the rules are in place (a connection would then
 * hang rather than fail), let any UDP datagram leave loopback, shell out.
 */
#include "transparent.h"

/* glibc's network headers first: the kernel's then skip what glibc
 * already defined (linux/libc-compat.h). */
#include <net/if.h>
#include <netinet/in.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <linux/rtnetlink.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dynlib.h"
#include "util.h"

#define RULESET_MAX 2048

__attribute__((format(printf, 3, 4))) static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* libnftables is loaded on first use (dynlib.h): a session without
 * transparent mode does not map it and the libraries it needs. */
#define NFT_FUNCS(X) \
	X(nft_ctx_new) \
	X(nft_ctx_buffer_error) \
	X(nft_ctx_buffer_output) \
	X(nft_run_cmd_from_buffer) \
	X(nft_ctx_get_error_buffer) \
	X(nft_ctx_free)

DYNLIB_DEFINE(nft_lib, nft, "libnftables.so.1", NFT_FUNCS);

bool transparent_preload(char *err, size_t errlen)
{
	if (dynlib_load(&nft_lib))
		return true;
	set_err(err, errlen, "transparent mode needs libnftables: %s", nft_lib.err);
	return false;
}

void transparent_config_default(struct transparent_config *cfg,
				uint16_t listen_port)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen_port = listen_port;
	ASSERT(addr_parse(TRANSPARENT_STUB_ADDR, &cfg->stub));
	cfg->stub_port = TRANSPARENT_STUB_PORT;
}

static bool is_loopback(const struct addr *a)
{
	return addr_classify(a) == ADDR_CLASS_LOOPBACK;
}

static bool from_sockaddr(const struct sockaddr_storage *ss, struct addr *a,
			  uint16_t *port)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		a->family = AF_INET;
		memcpy(a->bytes, &sin->sin_addr, 4);
		*port = ntohs(sin->sin_port);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		a->family = AF_INET6;
		memcpy(a->bytes, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
		return true;
	}
	return false;
}

bool transparent_has_ipv6(void)
{
	struct sockaddr_in6 sin6;
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_addr = in6addr_loopback;
	ok = bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) == 0;
	close(fd);
	return ok;
}

bool transparent_ruleset(const struct transparent_config *cfg, bool ipv6,
			 char *out, size_t len)
{
	const char *sfam = cfg->stub.family == AF_INET6 ? "ip6" : "ip";
	char stub[ADDR_STRLEN];
	int n;

	ASSERT(cfg->listen_port > 0 && cfg->stub_port > 0 &&
	       is_loopback(&cfg->stub));
	addr_format(&cfg->stub, stub, sizeof(stub));
	/* "add" then "delete" makes the table exist before it is removed,
	 * so the whole text is one transaction that replaces it. Priority
	 * -100 is the nat output hook's usual place (dstnat); the filter
	 * chain at 0 runs after it and sees redirected packets with their
	 * new, loopback, destination. A reply on a redirected connection
	 * still bears the client's address as its destination there (it is
	 * un-NATed later): a local address, as is every address a socket
	 * in the namespace can have, hence "fib daddr type local" rather
	 * than loopback alone. */
	n = snprintf(out, len,
		     "add table inet airlock\n"
		     "delete table inet airlock\n"
		     "table inet airlock {\n"
		     "\tchain nat_output {\n"
		     "\t\ttype nat hook output priority -100; policy accept;\n"
		     "\t\tip daddr 127.0.0.0/8 return\n"
		     "%s"
		     "\t\tmeta l4proto tcp redirect to :%u\n"
		     "\t}\n"
		     "\tchain filter_output {\n"
		     "\t\ttype filter hook output priority 0; policy drop;\n"
		     "\t\t%s daddr %s udp dport %u accept\n"
		     "\t\t%s saddr %s udp sport %u accept\n"
		     "\t\tmeta l4proto udp drop\n"
		     "\t\tfib daddr type local accept\n"
		     "\t}\n"
		     "}\n",
		     ipv6 ? "\t\tip6 daddr ::1 return\n" : "",
		     cfg->listen_port, sfam, stub, cfg->stub_port, sfam, stub,
		     cfg->stub_port);
	return n > 0 && (size_t)n < len;
}

/* No interface of the namespace but lo is up; brings lo up. A fresh
 * namespace may hold the kernel's fallback tunnel devices (sit0, tunl0,
 * ...), always down; an interface that is up means this is not the
 * sandbox's own namespace. */
static int loopback_only_up(char *err, size_t errlen)
{
	struct if_nameindex *ifs = NULL, *i;
	struct ifreq ifr;
	int fd, rc;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		set_err(err, errlen, "socket: %s", strerror(-rc));
		goto out;
	}
	ifs = if_nameindex();
	if (!ifs) {
		rc = -errno;
		set_err(err, errlen, "cannot list network interfaces: %s", strerror(-rc));
		goto out;
	}
	for (i = ifs; i->if_index != 0; i++) {
		memset(&ifr, 0, sizeof(ifr));
		if (!util_strlcpy(ifr.ifr_name, i->if_name, sizeof(ifr.ifr_name)) ||
		    ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
			rc = errno ? -errno : -ENAMETOOLONG;
			set_err(err, errlen, "cannot read the flags of %s: %s", i->if_name,
				strerror(-rc));
			goto out;
		}
		if (strcmp(i->if_name, "lo") == 0) {
			if (ifr.ifr_flags & IFF_UP)
				continue;
			ifr.ifr_flags |= IFF_UP;
			if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) {
				rc = -errno;
				set_err(err, errlen, "cannot bring lo up: %s", strerror(-rc));
				goto out;
			}
		} else if (ifr.ifr_flags & IFF_UP) {
			rc = -EEXIST;
			set_err(err, errlen,
				"the network namespace has interface %s up besides lo: "
				"transparent mode needs the sandbox's own namespace",
				i->if_name);
			goto out;
		}
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ifs)
		if_freenameindex(ifs);
	return rc;
}

/* Loads @text with libnftables; its error text goes into @err. */
static int load_ruleset(const char *text, char *err, size_t errlen)
{
	struct nft_ctx *ctx;
	int rc, fd;

	/* libnftables exit()s when it cannot open its netlink socket (a
	 * kernel without nf_tables): find that out first and say so. */
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0) {
		rc = -errno;
		set_err(err, errlen, "transparent mode needs nftables, which this "
			"kernel refuses: %s", strerror(-rc));
		return rc;
	}
	close(fd);
	if (!transparent_preload(err, errlen))
		return -ENOSYS;
	ctx = nft.nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		set_err(err, errlen, "libnftables: cannot make a context");
		return -ENOMEM;
	}
	/* Errors into a buffer, not onto our stderr. */
	if (nft.nft_ctx_buffer_error(ctx) != 0 || nft.nft_ctx_buffer_output(ctx) != 0) {
		rc = -ENOMEM;
		set_err(err, errlen, "libnftables: cannot buffer its messages");
		goto out;
	}
	errno = 0;
	if (nft.nft_run_cmd_from_buffer(ctx, text) != 0) {
		const char *e = nft.nft_ctx_get_error_buffer(ctx);
		size_t n;

		rc = errno ? -errno : -EPERM;
		/* Its first line names what the kernel refused. */
		n = e ? strcspn(e, "\n") : 0;
		set_err(err, errlen, "cannot load the transparent redirect (nftables): %.*s",
			(int)(n > 200 ? 200 : n), n ? e : "refused");
		goto out;
	}
	rc = 0;
out:
	nft.nft_ctx_free(ctx);
	return rc;
}

static void nl_attr(struct nlmsghdr *nh, size_t cap, unsigned short type,
		    const void *data, size_t len)
{
	struct rtattr *rta;
	size_t at = NLMSG_ALIGN(nh->nlmsg_len);

	ASSERT(at + RTA_SPACE(len) <= cap);
	rta = (struct rtattr *)((char *)nh + at);
	rta->rta_type = type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(rta), data, len);
	nh->nlmsg_len = (uint32_t)(at + RTA_SPACE(len));
}

/* Adds "default dev lo src LOOPBACK" for @family over rtnetlink, and
 * waits (at most a second) for the kernel's acknowledgement. */
static int add_default_route(int family, char *err, size_t errlen)
{
	union {
		struct nlmsghdr nh;
		char buf[256]; /* cppcheck-suppress unusedStructMember ; its size */
	} req, ack;
	struct sockaddr_nl kernel;
	struct timeval tv = { .tv_sec = 1, .tv_usec = 0 };
	struct rtmsg *rt;
	uint32_t oif = if_nametoindex("lo");
	const char *fam = family == AF_INET ? "IPv4" : "IPv6";
	struct nlmsgerr *ne;
	ssize_t n;
	int fd = -1, rc;

	if (oif == 0) {
		rc = -ENODEV;
		set_err(err, errlen, "no lo interface");
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_NEWROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
	req.nh.nlmsg_seq = 1;
	rt = NLMSG_DATA(&req.nh);
	rt->rtm_family = (unsigned char)family;
	rt->rtm_dst_len = 0;
	rt->rtm_table = RT_TABLE_MAIN;
	rt->rtm_protocol = RTPROT_BOOT;
	rt->rtm_scope = family == AF_INET ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_UNICAST;
	nl_attr(&req.nh, sizeof(req), RTA_OIF, &oif, sizeof(oif));
	if (family == AF_INET) {
		struct in_addr src = { .s_addr = htonl(INADDR_LOOPBACK) };

		nl_attr(&req.nh, sizeof(req), RTA_PREFSRC, &src, sizeof(src));
	} else {
		nl_attr(&req.nh, sizeof(req), RTA_PREFSRC, &in6addr_loopback,
			sizeof(in6addr_loopback));
	}

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		rc = -errno;
		set_err(err, errlen, "rtnetlink: %s", strerror(-rc));
		goto out;
	}
	memset(&kernel, 0, sizeof(kernel));
	kernel.nl_family = AF_NETLINK;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != (ssize_t)req.nh.nlmsg_len) {
		rc = -errno;
		set_err(err, errlen, "rtnetlink: cannot send the %s route: %s", fam,
			strerror(-rc));
		goto out;
	}
	do
		n = recv(fd, &ack, sizeof(ack), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		rc = -errno;
		set_err(err, errlen, "rtnetlink: no answer for the %s route: %s", fam,
			strerror(-rc));
		goto out;
	}
	if ((size_t)n < NLMSG_LENGTH(sizeof(*ne)) || ack.nh.nlmsg_type != NLMSG_ERROR ||
	    ack.nh.nlmsg_seq != req.nh.nlmsg_seq) {
		rc = -EPROTO;
		set_err(err, errlen, "rtnetlink: unexpected answer for the %s route", fam);
		goto out;
	}
	ne = NLMSG_DATA(&ack.nh);
	if (ne->error != 0) {
		rc = ne->error < 0 ? ne->error : -EPROTO;
		set_err(err, errlen, "cannot add the %s default route through lo: %s",
			fam, strerror(-rc));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int transparent_setup(const struct transparent_config *cfg, char *err,
		      size_t errlen)
{
	char ruleset[RULESET_MAX];
	bool ipv6;
	int rc;

	if (cfg->listen_port == 0 || cfg->stub_port == 0 ||
	    (cfg->stub.family != AF_INET && cfg->stub.family != AF_INET6) ||
	    !is_loopback(&cfg->stub)) {
		set_err(err, errlen,
			"transparent mode: the listener needs a port and the stub a "
			"loopback address and port");
		return -EINVAL;
	}
	rc = loopback_only_up(err, errlen);
	if (rc < 0)
		return rc;
	ipv6 = transparent_has_ipv6();
	if (cfg->stub.family == AF_INET6 && !ipv6) {
		set_err(err, errlen, "transparent mode: the stub is on IPv6, which "
				     "this namespace does not have");
		return -EAFNOSUPPORT;
	}
	ASSERT(transparent_ruleset(cfg, ipv6, ruleset, sizeof(ruleset)));
	rc = load_ruleset(ruleset, err, errlen);
	if (rc < 0)
		return rc;
	rc = add_default_route(AF_INET, err, errlen);
	if (rc < 0)
		return rc;
	if (ipv6)
		rc = add_default_route(AF_INET6, err, errlen);
	return rc;
}

/* A listening TCP socket on loopback @family port @port: the descriptor
 * or -errno. */
static int listen_on(int family, uint16_t port, char *err, size_t errlen)
{
	const char *text = family == AF_INET ? "127.0.0.1" : "::1";
	struct sockaddr_storage ss;
	struct addr a;
	socklen_t sl;
	int fd, one = 1;

	ASSERT(addr_parse(text, &a));
	sl = (socklen_t)addr_to_sockaddr(&a, port, &ss);
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if ((family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0)
		goto fail;
	return fd;
fail:
	one = -errno;
	set_err(err, errlen, "transparent listener on %s port %u: %s", text, port,
		strerror(-one));
	if (fd >= 0)
		close(fd);
	return one;
}

int transparent_listen(uint16_t port, int fds[2], uint16_t *bound, char *err,
		       size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addr a;
	int rc;

	memset(&ss, 0, sizeof(ss));
	fds[1] = -1;
	fds[0] = listen_on(AF_INET, port, err, errlen);
	if (fds[0] < 0)
		return fds[0];
	if (getsockname(fds[0], (struct sockaddr *)&ss, &sl) < 0 ||
	    !from_sockaddr(&ss, &a, &port)) {
		rc = -errno;
		set_err(err, errlen, "transparent listener: getsockname: %s", strerror(-rc));
		goto fail;
	}
	if (transparent_has_ipv6()) {
		fds[1] = listen_on(AF_INET6, port, err, errlen);
		if (fds[1] < 0) {
			rc = fds[1];
			fds[1] = -1;
			goto fail;
		}
	}
	*bound = port;
	return 0;
fail:
	close(fds[0]);
	fds[0] = -1;
	return rc;
}

int transparent_stub_socket(const struct addr *a, uint16_t port, char *err,
			    size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = (socklen_t)addr_to_sockaddr(a, port, &ss);
	int fd, rc;

	fd = socket(a->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, sl) == 0)
		return fd;
	rc = -errno;
	{
		char text[ADDR_STRLEN];

		addr_format(a, text, sizeof(text));
		set_err(err, errlen, "DNS stub socket on %s port %u: %s", text, port,
			strerror(-rc));
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int transparent_sandbox_prepare(int listen_fds[2], int *stub_fd, char *err,
				size_t errlen)
{
	struct transparent_config cfg;
	uint16_t port = 0;
	int rc;

	*stub_fd = -1;
	listen_fds[0] = listen_fds[1] = -1;
	rc = transparent_listen(0, listen_fds, &port, err, errlen);
	if (rc < 0)
		goto out;
	transparent_config_default(&cfg, port);
	rc = transparent_stub_socket(&cfg.stub, cfg.stub_port, err, errlen);
	if (rc < 0)
		goto out;
	*stub_fd = rc;
	rc = transparent_setup(&cfg, err, errlen);
out:
	if (rc < 0) {
		if (*stub_fd >= 0)
			close(*stub_fd);
		if (listen_fds[0] >= 0)
			close(listen_fds[0]);
		if (listen_fds[1] >= 0)
			close(listen_fds[1]);
		*stub_fd = -1;
		listen_fds[0] = listen_fds[1] = -1;
		return rc;
	}
	return 0;
}

int transparent_original_dst(int fd, struct addr *a, uint16_t *port)
{
	struct sockaddr_storage local, orig;
	socklen_t sl = sizeof(local), ol = sizeof(orig);
	struct addr v4;
	int rc;

	memset(&local, 0, sizeof(local));
	memset(&orig, 0, sizeof(orig));
	if (getsockname(fd, (struct sockaddr *)&local, &sl) < 0)
		return -errno;
	if (local.ss_family == AF_INET)
		rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &ol);
	else if (local.ss_family == AF_INET6)
		rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig, &ol);
	else
		return -EAFNOSUPPORT;
	if (rc < 0)
		return -errno;
	if (!from_sockaddr(&orig, a, port))
		return -EPROTO;
	/* Loopback is never redirected: this is the listener itself. */
	if (is_loopback(a) || addr_classify(a) == ADDR_CLASS_UNSPECIFIED ||
	    (addr_embedded_ipv4(a, &v4) && is_loopback(&v4)))
		return -ENOENT;
	return 0;
}

int transparent_stub_serve(int fd, struct dnsstub *s,
			   struct dnsstub_result *res)
{
	uint8_t q[DNSSTUB_QUERY_MAX + 1], out[DNSSTUB_ANSWER_MAX];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n;
	size_t len;

	do
		n = recvfrom(fd, q, sizeof(q), MSG_DONTWAIT | MSG_TRUNC,
			     (struct sockaddr *)&from, &fl);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	/* MSG_TRUNC: n is the datagram's real length; a longer one than
	 * the buffer reads as over-long, which is FORMERR. */
	len = (size_t)n < sizeof(q) ? (size_t)n : sizeof(q);
	len = dnsstub_answer(s, q, len, out, sizeof(out), res);
	if (len > 0)
		(void)sendto(fd, out, len, MSG_DONTWAIT | MSG_NOSIGNAL,
			     (struct sockaddr *)&from, fl);
	return 1;
}

bool transparent_resolv_conf(const struct addr *stub, char *out, size_t len)
{
	char text[ADDR_STRLEN];
	int n;

	addr_format(stub, text, sizeof(text));
	n = snprintf(out, len,
		     "# airlock transparent mode: the session's DNS stub. It forwards\n"
		     "# nothing and answers each name with an address that stands for\n"
		     "# it; the proxy decides every connection to such an address.\n"
		     "nameserver %s\n",
		     text);
	return n > 0 && (size_t)n < len;
}

/* Connects to @dst:80 from a non-blocking socket and checks that the
 * listener @lfd accepts it, within a second, with that original destination. */
static int selftest_connect(int lfd, const char *dst, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	struct addr want, got;
	uint16_t port = 0;
	socklen_t sl;
	int cfd = -1, afd = -1, rc;

	ASSERT(addr_parse(dst, &want));
	sl = (socklen_t)addr_to_sockaddr(&want, 80, &ss);
	cfd = socket(want.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (cfd < 0) {
		rc = -errno;
		set_err(err, errlen, "probe socket: %s", strerror(-rc));
		goto out;
	}
	if (connect(cfd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		set_err(err, errlen, "connect to %s through the redirect: %s", dst,
			strerror(-rc));
		goto out;
	}
	do
		rc = poll(&pfd, 1, 1000);
	while (rc < 0 && errno == EINTR);
	if (rc <= 0) {
		rc = rc < 0 ? -errno : -ETIMEDOUT;
		set_err(err, errlen, "a connection to %s did not reach the listener", dst);
		goto out;
	}
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (afd < 0) {
		rc = -errno;
		set_err(err, errlen, "accept: %s", strerror(-rc));
		goto out;
	}
	rc = transparent_original_dst(afd, &got, &port);
	if (rc < 0) {
		set_err(err, errlen, "no original destination for %s: %s", dst,
			strerror(-rc));
		goto out;
	}
	if (!addr_equal(&got, &want) || port != 80) {
		rc = -EPROTO;
		set_err(err, errlen, "the original destination of %s came back wrong", dst);
		goto out;
	}
	rc = 0;
out:
	if (afd >= 0)
		close(afd);
	if (cfd >= 0)
		close(cfd);
	return rc;
}

/* A UDP datagram to an outside address must fail at once. */
static int selftest_udp(char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct addr a;
	socklen_t sl;
	int fd, rc;

	ASSERT(addr_parse("203.0.113.9", &a));
	sl = (socklen_t)addr_to_sockaddr(&a, 53, &ss);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		set_err(err, errlen, "probe socket: %s", strerror(-rc));
		return rc;
	}
	rc = (int)sendto(fd, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&ss, sl);
	if (rc >= 0 || errno != EPERM) {
		set_err(err, errlen, "a UDP datagram to 203.0.113.9 was not refused");
		rc = -EPROTO;
	} else {
		rc = 0;
	}
	close(fd);
	return rc;
}

int transparent_selftest(char *err, size_t errlen)
{
	struct transparent_config cfg;
	uint16_t port = 0;
	int fds[2] = { -1, -1 }, rc;

	/* The interfaces are checked before a single packet is sent; lo is
	 * up afterwards, which the listener on [::1] needs. */
	rc = loopback_only_up(err, errlen);
	if (rc < 0)
		goto out;
	rc = transparent_listen(0, fds, &port, err, errlen);
	if (rc < 0)
		goto out;
	transparent_config_default(&cfg, port);
	rc = transparent_setup(&cfg, err, errlen);
	if (rc < 0)
		goto out;
	rc = selftest_connect(fds[0], "203.0.113.9", err, errlen);
	if (rc == 0 && fds[1] >= 0)
		rc = selftest_connect(fds[1], "2001:db8::9", err, errlen);
	if (rc == 0)
		rc = selftest_udp(err, errlen);
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return rc;
}
