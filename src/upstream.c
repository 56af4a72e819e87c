/* SPDX-License-Identifier: Apache-2.0
 * upstream.c - from a request's target to an open upstream connection.
 *
 * DOC: Theory of Operation
 *
 * The same path serves a CONNECT tunnel and a plain http:// request:
 *
 *  1. The proxy itself: a target that is the proxy's own address and port
 *     is denied in every mode (egress.self, enforced in shadow too).
 *  2. The rules (egress.c), before any DNS: mode off skips them (and
 *     records mode.off).
 *  3. The resolver (dns.c) returns every A and AAAA answer; each one is
 *     checked, for being the proxy itself and by egress_decide_addrs(),
 *     and the connection goes to one checked address, never resolved
 *     again. An IP literal is checked the same way without DNS.
 *  4. The connection is opened non-blocking; its completion (or failure,
 *     or the connect timeout in conn.c) continues in the tunnel or the
 *     exchange.
 *
 * Every step decides on the connection's copied target fields, under the
 * policy the request started with (c->policy): a reload while a name is
 * resolving does not change the mode or the ranges it is judged by.
 */
#include "answer.h"
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns.h"
#include "ifaddr.h"
#include "util.h"

static json_t *addrs_json(const struct addr *addrs, size_t n)
{
	json_t *a = json_array();
	char text[ADDR_STRLEN];
	size_t i;

	ASSERT(a);
	for (i = 0; i < n; i++) {
		addr_format(&addrs[i], text, sizeof(text));
		json_array_append_new(a, json_pack("{s:s, s:s}", "address", text,
						   "class",
						   addr_class_to_string(addr_classify(&addrs[i]))));
	}
	return a;
}

bool upstream_is_self(struct conn *c, const struct addr *a, uint16_t port)
{
	struct proxy *p = c->p;

	if (p->ifaddrs) {
		/* Interfaces may have changed since the last event: read
		 * the kernel's news before deciding. */
		ifaddr_refresh(p->ifaddrs);
		p->self.local = ifaddr_list(p->ifaddrs, &p->self.nlocal);
	}
	return egress_is_self(&p->self, a, port);
}

static void deny_self(struct conn *c, const struct addr *addrs, size_t n)
{
	struct verdict v;

	verdict_set(&v, VERDICT_DENY, 403, "egress.self",
		    "the target is the proxy's own listening address");
	v.always = true;
	if (addrs)
		v.extra = json_pack("{s:o}", "addresses", addrs_json(addrs, n));
	(void)answer_apply(c, &v);
}

static void addresses_checked(struct conn *c, const struct addr *addrs, size_t n)
{
	struct verdict v;
	size_t bad = 0, i;

	for (i = 0; i < n; i++) {
		if (upstream_is_self(c, &addrs[i], c->port)) {
			deny_self(c, addrs, n);
			return;
		}
	}
	if (c->policy->mode != POLICY_MODE_OFF) {
		egress_decide_addrs(c->policy, addrs, n, c->port, &v, &bad);
		if (v.action != VERDICT_ALLOW && c->target.is_addr &&
		    strcmp(v.rule, "egress.special-address") == 0) {
			char text[ADDR_STRLEN];

			/* A literal does not resolve: say what it is. */
			addr_format(&addrs[bad], text, sizeof(text));
			snprintf(v.reason, sizeof(v.reason),
				 "%s is a special-purpose address (%s); add its range "
				 "to egress.allow_ranges",
				 text, addr_class_to_string(addr_classify(&addrs[bad])));
		}
		if (v.action != VERDICT_ALLOW) {
			v.extra = json_pack("{s:o}", "addresses", addrs_json(addrs, n));
			if (!answer_apply(c, &v))
				return;
		}
	}
	c->addr = *egress_pick(addrs, n);
	if (c->tunnel)
		tunnel_addressed(c);
	else
		exchange_addressed(c);
}

static void on_resolved(void *arg, uint64_t cookie, int status,
			const struct addr *addrs, size_t n, const char *error)
{
	struct proxy *p = arg;
	uint32_t index = (uint32_t)(cookie & 0xffffffffu);
	struct conn *c = index < p->nconns ? p->conns[index] : NULL;
	struct verdict v;

	if (!c || c->gen != (uint32_t)(cookie >> 32) || c->state != CONN_RESOLVE)
		return;
	if (status != DNS_OK || n == 0) {
		/* The proxy asks egress.resolver (else resolv.conf's
		 * servers), never /etc/hosts: a name only the hosts file
		 * knows fails here, and the answer says why. */
		verdict_setf(&v, VERDICT_FAIL, 502, "dns.failure",
			     "%s; the proxy resolves through egress.resolver "
			     "(or resolv.conf) only, not /etc/hosts",
			     error ? error : "no address");
		(void)answer_apply(c, &v);
		return;
	}
	/* Every answer is checked, however many there are. */
	addresses_checked(c, addrs, n);
}

void upstream_decide(struct conn *c)
{
	struct verdict v;
	uint64_t cookie;

	c->policy = c->p->policy;
	c->shadowed = false;
	c->allow_recorded = false;
	c->rule = NULL;
	c->rule_id[0] = '\0';
	if (c->target.is_addr && upstream_is_self(c, &c->target.addr, c->port)) {
		deny_self(c, NULL, 0);
		return;
	}
	if (c->policy->mode == POLICY_MODE_OFF) {
		snprintf(c->rule_id, sizeof(c->rule_id), "mode.off");
	} else {
		egress_decide_rules(c->policy, &c->target, c->port, &v);
		snprintf(c->rule_id, sizeof(c->rule_id), "%s", v.rule);
		c->rule = v.host_rule;
		if (!answer_apply(c, &v))
			return;
	}
	if (c->target.is_addr) {
		addresses_checked(c, &c->target.addr, 1);
		return;
	}
	conn_enter(c, CONN_RESOLVE);
	/* No interest: a half-closed client still gets its answer; HUP and
	 * ERR (always reported) mean it is gone. */
	conn_watch(c, false, 0);
	cookie = ((uint64_t)c->gen << 32) | c->index;
	if (dns_resolve(c->p->dns, c->target.name, on_resolved, c->p, cookie) < 0) {
		verdict_set(&v, VERDICT_FAIL, 502, "dns.failure",
			    "the resolver refused the query");
		(void)answer_apply(c, &v);
	}
}

static void connect_failed(struct conn *c, int err)
{
	struct verdict v;

	/* A tunnel's client already has its 200: close, never write an
	 * answer into the tunnel. On ports other than 80 and 443 the 200
	 * waits for the connection (tunnel.c): a 502 can still be said. */
	verdict_set(&v, VERDICT_FAIL, c->tunnel && !tunnel_early(c) ? 0 : 502, "upstream.connect",
		    strerror(err));
	(void)answer_apply(c, &v);
}

void upstream_connect(struct conn *c)
{
	struct sockaddr_storage ss;
	unsigned int sl = addr_to_sockaddr(&c->addr, c->port, &ss);
	int fd;

	fd = socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		connect_failed(c, errno);
		return;
	}
	/* A request's head and body, or a TLS record and the next, leave in
	 * separate writes: with Nagle's algorithm the second waits for the
	 * upstream's delayed ACK (40 ms per request). */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		connect_failed(c, err);
		return;
	}
	endpoint_set_fd(&c->upstream, fd);
	conn_watch(c, true, EPOLLOUT);
	if (c->upstream.registered == ENDPOINT_UNREGISTERED) {
		connect_failed(c, errno);
		return;
	}
	conn_enter(c, CONN_CONNECTING);
	/* The client's interest stays as it is until it reports something
	 * (upstream_step then quiets it): one epoll_ctl less per request. */
	if (c->cout.len)
		conn_watch(c, false, EPOLLOUT);
}

void upstream_step(struct conn *c, bool upstream, uint32_t events)
{
	int err = 0;
	socklen_t len = sizeof(err);

	(void)events;
	if (!upstream) {
		/* the 200 of a tunnel may still be on its way */
		int r = endpoint_flush(&c->client, &c->cout);

		if (r < 0 && r != -EAGAIN) {
			conn_close(c);
			return;
		}
		conn_watch(c, false, c->cout.len ? EPOLLOUT : 0);
		return;
	}
	if (getsockopt(c->upstream.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		connect_failed(c, err);
		return;
	}
	if (c->tunnel)
		tunnel_connected(c);
	else
		exchange_connected(c);
}
