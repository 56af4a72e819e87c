/* SPDX-License-Identifier: Apache-2.0
 * proxy.c - the egress proxy's event loop: accept, timers, deferred close.
 * The state the workers share is proxy_shared.c's, the pipe pool's use
 * tunnel.c's.
 *
 * DOC: Theory of Operation
 *
 * One thread, one epoll set, non-blocking sockets, per worker. Every epoll
 * entry carries a tag in the high 32 bits of data.u64 and an index in the
 * low 32 (passt's habit); one switch dispatches. A connection's life is
 * the state table of conn.c; its request goes through upstream.c (rules,
 * DNS, address checks, connect), then tunnel.c (CONNECT) or exchange.c
 * (HTTP); every decision is a struct verdict applied in answer.c.
 * Connections closed during a batch of events are freed after it
 * (conn_reap), so no handler ever meets a freed connection.
 *
 * Workers. N processes may serve one listening socket: each registers it
 * with EPOLLEXCLUSIVE, so a new connection wakes one worker, not all, and
 * a worker accepts at most ACCEPT_BATCH per wake-up so that the others
 * get their share. What must hold across workers lives in a struct
 * proxy_shared (proxy_shared.c), created before the fork in MAP_SHARED
 * memory: the number of connections each client address holds (per
 * worker, so that a worker that dies can be forgotten) and so the
 * limits:
 *
 *  - the connection limit: --max-conns, and never more than the
 *    descriptors allow (two per connection, after a reserve);
 *  - the client limit: no address holds more than its share (a quarter of
 *    the connection limit by default), so that one client, slowloris
 *    heads or idle tunnels, cannot take every slot. A connection over
 *    either is closed at once; the first refusal of an address over its
 *    share is recorded (proxy.error, rule proxy.client-limit), again only
 *    after it fell below its share, so that a flood cannot flood the
 *    receipt stream.
 *
 * Self. When the proxy listens on a wildcard address, every address of
 * the host's interfaces on its port is the proxy itself; the list
 * (ifaddr.c) follows the kernel's notifications.
 *
 * When accept() runs out of descriptors, accepting pauses for 100 ms
 * instead of spinning. Deadlines are checked once a second against the
 * table of conn.c. Buffers exist only while a connection parses; an idle
 * tunnel holds its struct and its two sockets.
 */
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "dns.h"
#include "ifaddr.h"
#include "intercept.h"
#include "util.h"

#define PIPE_POOL 64           /* empty pipes kept for reuse */
#define ACCEPT_BATCH 64        /* accepts per wake-up: leave some to others */

/* --- watches (filters' own descriptors) ---------------------------------------- */

struct proxy_watch_slot {
	int fd;          /* -1: free */
	proxy_watch_fn fn;
	void *arg;
};

int proxy_watch(struct proxy *p, int fd, uint32_t events, proxy_watch_fn fn,
		void *arg)
{
	struct epoll_event ev;
	size_t i;

	for (i = 0; i < p->nwatches && p->watches[i].fd >= 0; i++)
		;
	if (i == p->nwatches) {
		p->watches = util_xrealloc(p->watches, (p->nwatches + 1) * sizeof(*p->watches));
		p->nwatches++;
	}
	ev.events = events;
	ev.data.u64 = ((uint64_t)PROXY_TAG_WATCH << 32) | i;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		p->watches[i].fd = -1;
		return -errno;
	}
	p->watches[i].fd = fd;
	p->watches[i].fn = fn;
	p->watches[i].arg = arg;
	return 0;
}

void proxy_set_tick(struct proxy *p, proxy_tick_fn fn, void *arg)
{
	size_t i;

	for (i = 0; i < p->nticks && p->ticks[i].arg != arg; i++)
		;
	if (!fn) {
		if (i < p->nticks)
			p->ticks[i] = p->ticks[--p->nticks];
		return;
	}
	if (i == p->nticks) {
		ASSERT(p->nticks < PROXY_TICKS_MAX);
		p->nticks++;
	}
	p->ticks[i].fn = fn;
	p->ticks[i].arg = arg;
}

void proxy_unwatch(struct proxy *p, int fd)
{
	size_t i;

	for (i = 0; i < p->nwatches; i++) {
		if (p->watches[i].fd == fd) {
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
			p->watches[i].fd = -1;
		}
	}
}

int proxy_resume(struct proxy *p, const struct filter_ref *ref, int r,
		 struct verdict *v)
{
	struct conn *c = ref->index < p->nconns ? p->conns[ref->index] : NULL;
	struct verdict none;

	if (!v) {
		verdict_set(&none, VERDICT_ALLOW, 0, NULL, NULL);
		v = &none;
	}
	if (!c || c->gen != ref->gen || (r != FILTER_CONTINUE && r != FILTER_VERDICT)) {
		verdict_clear(v);
		return -ESTALE;
	}
	return exchange_resume(c, ref->seq, (enum filter_result)r, v);
}

static int loop_resume(void *ctx, const struct filter_ref *ref, int r, struct verdict *v)
{
	return proxy_resume(ctx, ref, r, v);
}

static int loop_watch(void *ctx, int fd, uint32_t events, proxy_watch_fn fn, void *arg)
{
	return proxy_watch(ctx, fd, events, fn, arg);
}

static void loop_unwatch(void *ctx, int fd)
{
	proxy_unwatch(ctx, fd);
}

static void loop_set_tick(void *ctx, proxy_tick_fn fn, void *arg)
{
	proxy_set_tick(ctx, fn, arg);
}

void proxy_filter_loop(struct proxy *p, struct filter_loop *loop)
{
	loop->ctx = p;
	loop->resume = loop_resume;
	loop->watch = loop_watch;
	loop->unwatch = loop_unwatch;
	loop->set_tick = loop_set_tick;
}

/* --- accept -------------------------------------------------------------------- */

static void listen_arm(struct proxy *p, bool on)
{
	struct epoll_event ev = { 0 };
	size_t i;

	if (on == p->accepting)
		return;
	if (on) {
		/* EPOLLEXCLUSIVE: one waiting worker is woken, not all of
		 * them (it cannot be changed with EPOLL_CTL_MOD: the socket
		 * leaves and re-enters the set). */
		ev.events = EPOLLIN | EPOLLEXCLUSIVE;
		ev.data.u64 = (uint64_t)PROXY_TAG_LISTEN << 32;
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev) != 0)
			return;
		for (i = 0; i < p->ntlfd; i++) {
			ev.data.u64 = ((uint64_t)PROXY_TAG_TLISTEN << 32) | i;
			if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->tlfd[i], &ev) != 0) {
				while (i-- > 0)
					epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->tlfd[i], NULL);
				epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->lfd, NULL);
				return;
			}
		}
		p->accepting = true;
	} else {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->lfd, NULL);
		for (i = 0; i < p->ntlfd; i++)
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->tlfd[i], NULL);
		p->accepting = false;
	}
}

static void refuse_client(struct proxy *p, const struct addr *peer)
{
	char text[ADDR_STRLEN] = "unknown";
	json_t *s;

	if (peer->family == AF_INET || peer->family == AF_INET6)
		addr_format(peer, text, sizeof(text));
	s = json_pack("{s:s, s:i}", "client", text, "limit",
		      (int)proxy_shared_client_limit(p->shared));
	if (p->o.record)
		p->o.record(p->o.record_arg, "proxy.error", RECEIPT_BLOCK,
			    RECEIPT_POINT_EGRESS_PROXY, "proxy.client-limit", s,
			    "the client already holds its share of the proxy's connections");
	json_decref(s);
}

/* Accepts on @lfd: the proxy's socket, or a transparent listener. */
static void accept_some(struct proxy *p, int lfd, bool transparent)
{
	int i;

	for (i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct addr peer;
		struct conn *c;
		enum proxy_admit a;
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of descriptors: pause instead of spinning. */
				listen_arm(p, false);
				p->accept_resume = util_now_ms() + 100;
			}
			return;
		}
		/* Answers leave in several writes (head, body, TLS records):
		 * no Nagle wait for the client's delayed ACK between them. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (!addr_from_sockaddr((struct sockaddr *)&ss, sl, &peer, NULL))
			memset(&peer, 0, sizeof(peer));
		a = proxy_shared_acquire(p->shared, p->worker, &peer);
		if (a != ADMIT_OK) {
			if (a == ADMIT_CLIENT_FIRST)
				refuse_client(p, &peer);
			close(fd); /* this client only */
			continue;
		}
		c = conn_new(p, fd, &peer);
		if (!c) {
			proxy_shared_release(p->shared, p->worker, &peer);
			close(fd);
			continue;
		}
		/* counted before its first step, which may close it (a
		 * transparent connection to a denied address): its close
		 * gives the slot back */
		c->counted = true;
		if (transparent)
			tlisten_begin(c);
		else
			exchange_begin(c, false);
	}
}

/* --- the loop -------------------------------------------------------------------- */

static void expire(struct proxy *p, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < p->nconns; i++) {
		struct conn *c = p->conns[i];

		if (c && c->state != CONN_CLOSED && c->deadline && c->deadline <= now)
			conn_expire(c);
		else if (c && tunnel_early(c) && c->deadline && (!p->soon || c->deadline < p->soon))
			p->soon = c->deadline; /* a first flight's short pause */
	}
}

struct proxy *proxy_new(const struct proxy_opts *opts, char *err, size_t errlen)
{
	struct proxy *p = util_xcalloc(1, sizeof(*p));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct epoll_event ev;

	memset(&ss, 0, sizeof(ss));
	p->o = *opts;
	p->policy = opts->policy;
	p->t = opts->timeouts;
	p->epfd = -1;
	p->lfd = opts->listen_fd;
	p->tlfd[0] = p->tlfd[1] = -1;
	if (opts->ntlisten > ARRAY_SIZE(p->tlfd)) {
		snprintf(err, errlen, "at most %zu transparent listeners",
			 ARRAY_SIZE(p->tlfd));
		goto fail;
	}
	for (p->ntlfd = 0; p->ntlfd < opts->ntlisten; p->ntlfd++) {
		p->tlfd[p->ntlfd] = opts->tlisten_fds[p->ntlfd];
		if (fcntl(p->tlfd[p->ntlfd], F_SETFL, O_NONBLOCK) < 0) {
			snprintf(err, errlen, "transparent listener: %s", strerror(errno));
			goto fail;
		}
	}
	p->names = opts->names;
	/* Zero fields take the defaults, which a test may shorten. */
	if (!p->t.head_ms)
		p->t.head_ms = util_test_ms("head", 10000);
	if (!p->t.dns_ms)
		p->t.dns_ms = util_test_ms("dns", 5000);
	if (!p->t.connect_ms)
		p->t.connect_ms = util_test_ms("connect", 10000);
	if (!p->t.first_flight_ms)
		p->t.first_flight_ms = util_test_ms("first_flight", 10000);
	if (!p->t.ambiguous_ms)
		p->t.ambiguous_ms = util_test_ms("ambiguous", 1000);
	if (!p->t.idle_ms)
		p->t.idle_ms = util_test_ms("idle", 300000);
	if (opts->nfilters > FILTER_MAX) {
		snprintf(err, errlen, "at most %d filters", FILTER_MAX);
		goto fail;
	}
	if (opts->nfilters)
		memcpy(p->filters, opts->filters, opts->nfilters * sizeof(*p->filters));
	p->nfilters = opts->nfilters;
	p->intercept = opts->intercept;
	if (p->intercept)
		p->leaves = intercept_cache_new(p->intercept->client);
	util_raise_fd_limit();
	if (opts->shared) {
		p->shared = opts->shared;
		p->worker = opts->worker;
		if (p->worker >= proxy_shared_workers(opts->shared)) {
			snprintf(err, errlen, "worker %u of %u", p->worker,
				 proxy_shared_workers(opts->shared));
			goto fail;
		}
	} else {
		p->shared = proxy_shared_new(1, opts->max_conns, opts->client_limit, err,
					     errlen);
		if (!p->shared)
			goto fail;
		p->own_shared = true;
	}
	p->cap = proxy_shared_max_conns(p->shared);
	p->conns = util_xcalloc(p->cap, sizeof(struct conn *));
	p->free_ids = util_xcalloc(p->cap, sizeof(*p->free_ids));
	p->pool_max = PIPE_POOL;
	p->pool = util_xcalloc(p->pool_max, sizeof(*p->pool));

	if (getsockname(p->lfd, (struct sockaddr *)&ss, &sl) < 0 ||
	    !addr_from_sockaddr((struct sockaddr *)&ss, sl, &p->self.listen,
				&p->self.port)) {
		snprintf(err, errlen, "the listening socket has no IP address");
		goto fail;
	}
	{
		struct addr unspec;

		memset(&unspec, 0, sizeof(unspec));
		unspec.family = p->self.listen.family;
		p->self.wildcard = addr_equal(&p->self.listen, &unspec);
	}
	if (fcntl(p->lfd, F_SETFL, O_NONBLOCK) < 0) {
		snprintf(err, errlen, "listening socket: %s", strerror(errno));
		goto fail;
	}
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->epfd < 0) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		goto fail;
	}
	listen_arm(p, true);
	if (!p->accepting) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		goto fail;
	}
	if (p->self.wildcard) {
		p->ifaddrs = ifaddr_open(err, errlen);
		if (!p->ifaddrs)
			goto fail;
		p->self.local = ifaddr_list(p->ifaddrs, &p->self.nlocal);
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)PROXY_TAG_IFADDR << 32;
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, ifaddr_fd(p->ifaddrs), &ev) < 0) {
			snprintf(err, errlen, "epoll: %s", strerror(errno));
			goto fail;
		}
	}
	if (opts->signal_fd >= 0) {
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)PROXY_TAG_SIGNAL << 32;
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, opts->signal_fd, &ev) < 0) {
			snprintf(err, errlen, "epoll: %s", strerror(errno));
			goto fail;
		}
	}
	p->dns = dns_new(p->epfd, (uint64_t)PROXY_TAG_DNS << 32, p->policy->resolvers,
			 p->policy->nresolvers, p->t.dns_ms, err, errlen);
	if (!p->dns)
		goto fail;
	return p;
fail:
	if (p->epfd >= 0)
		close(p->epfd);
	ifaddr_close(p->ifaddrs);
	if (p->own_shared)
		proxy_shared_free(p->shared);
	free(p->conns);
	free(p->free_ids);
	free(p->pool);
	free(p);
	return NULL;
}

int proxy_set_policy(struct proxy *p, const struct policy *policy, char *err,
		     size_t errlen)
{
	if (dns_set_servers(p->dns, policy->resolvers, policy->nresolvers, err,
			    errlen) < 0)
		return -1;
	/* Requests already being decided keep the policy they started
	 * with (conn.policy). */
	p->policy = policy;
	return 0;
}

void proxy_stop(struct proxy *p, unsigned int drain_ms)
{
	if (p->stopping)
		return;
	p->stopping = true;
	p->stop_deadline = util_now_ms() + drain_ms;
	listen_arm(p, false);
}

static void on_signal_fd(struct proxy *p)
{
	struct signalfd_siginfo si;

	while (read(p->o.signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		if (p->o.on_signal && !p->o.on_signal(p->o.signal_arg, &si))
			proxy_stop(p, 0);
}

int proxy_run(struct proxy *p)
{
	struct epoll_event evs[256];
	uint64_t last_sweep = util_now_ms();

	for (;;) {
		uint64_t now = util_now_ms();
		int timeout = 1000, n, i;

		if (p->stopping && (p->live == 0 || now >= p->stop_deadline))
			break;
		if (!p->accepting && !p->stopping && now >= p->accept_resume)
			listen_arm(p, true);
		if (p->soon) /* a deadline shorter than the sweep's period */
			timeout = p->soon <= now ? 0
			      : p->soon - now < (uint64_t)timeout ? (int)(p->soon - now)
								  : timeout;
		timeout = dns_next_timeout_ms(p->dns, timeout);
		for (size_t k = 0; k < p->nticks; k++) {
			int t = p->ticks[k].fn(p->ticks[k].arg, now);

			if (t >= 0 && t < timeout)
				timeout = t;
		}
		if (p->o.record_flush) {
			int t = p->o.record_flush(p->o.record_arg);

			if (t >= 0 && t < timeout)
				timeout = t;
		}
		n = epoll_wait(p->epfd, evs, (int)ARRAY_SIZE(evs), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (i = 0; i < n; i++) {
			uint32_t low = (uint32_t)evs[i].data.u64;
			enum proxy_tag tag = (enum proxy_tag)(evs[i].data.u64 >> 32);

			switch (tag) {
			case PROXY_TAG_LISTEN:
				if (!p->stopping)
					accept_some(p, p->lfd, false);
				break;
			case PROXY_TAG_TLISTEN:
				if (!p->stopping && low < p->ntlfd)
					accept_some(p, p->tlfd[low], true);
				break;
			case PROXY_TAG_SIGNAL:
				on_signal_fd(p);
				break;
			case PROXY_TAG_CLIENT:
			case PROXY_TAG_UPSTREAM:
				if (low < p->nconns && p->conns[low])
					conn_event(p->conns[low], tag == PROXY_TAG_UPSTREAM,
						   evs[i].events);
				break;
			case PROXY_TAG_DNS:
				dns_handle(p->dns, (int)low, evs[i].events);
				break;
			case PROXY_TAG_IFADDR:
				ifaddr_refresh(p->ifaddrs);
				p->self.local = ifaddr_list(p->ifaddrs, &p->self.nlocal);
				break;
			case PROXY_TAG_WATCH:
				if (low < p->nwatches && p->watches[low].fd >= 0)
					p->watches[low].fn(p->watches[low].arg,
							   p->watches[low].fd, evs[i].events);
				break;
			default:
				break;
			}
		}
		dns_process_timeouts(p->dns);
		now = util_now_ms();
		if (now - last_sweep >= 1000 || p->stopping || (p->soon && now >= p->soon)) {
			last_sweep = now;
			p->soon = 0;
			expire(p, p->stopping && now >= p->stop_deadline ? UINT64_MAX : now);
		}
		conn_reap(p);
	}
	return 0;
}

void proxy_free(struct proxy *p)
{
	uint32_t i;

	if (!p)
		return;
	for (i = 0; i < p->nconns; i++)
		if (p->conns[i])
			conn_close(p->conns[i]);
	conn_reap(p);
	while (p->npool > 0) {
		p->npool--;
		close(p->pool[p->npool][0]);
		close(p->pool[p->npool][1]);
	}
	intercept_cache_free(p->leaves);
	dns_free(p->dns);
	ifaddr_close(p->ifaddrs);
	close(p->epfd);
	close(p->lfd);
	for (i = 0; i < p->ntlfd; i++)
		close(p->tlfd[i]);
	if (p->own_shared)
		proxy_shared_free(p->shared);
	free(p->watches);
	free(p->conns);
	free(p->free_ids);
	free(p->pool);
	free(p);
}
