/* SPDX-License-Identifier: Apache-2.0
 * proxy.c - the egress proxy's event loop: accept, timers, deferred close,
 * the pipe pool and the state the workers share.
 *
 * DOC: Theory of Operation
 *
 * One thread, one epoll set, non-blocking sockets, per worker. Every epoll
 * entry carries a tag in the high 32 bits of data.u64 and an index in the
 * low 32 (passt's habit); one switch dispatches. A connection's life is
 * the state table of conn.c; its request goes through upstream.c (rules,
 * DNS, address checks, connect), then tunnel.c (CONNECT) or exchange.c
 * (HTTP); every decision is a struct verdict applied in verdict.c.
 * Connections closed during a batch of events are freed after it
 * (conn_reap), so no handler ever meets a freed connection.
 *
 * Workers. N processes may serve one listening socket: each registers it
 * with EPOLLEXCLUSIVE, so a new connection wakes one worker, not all, and
 * a worker accepts at most ACCEPT_BATCH per wake-up so that the others
 * get their share. What must hold across workers lives in a struct
 * proxy_shared, created before the fork in MAP_SHARED memory: the number
 * of connections each client address holds (per worker, so that a worker
 * that dies can be forgotten) and so the limits:
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "dns.h"
#include "ifaddr.h"
#include "intercept.h"
#include "util.h"

#define PIPE_SIZE (1 << 20)    /* asked of each pipe (F_SETPIPE_SZ) */
#define PIPE_POOL 64           /* empty pipes kept for reuse */
#define ACCEPT_BATCH 64        /* accepts per wake-up: leave some to others */
#define FD_RESERVE 32          /* descriptors kept for everything else */
#define MAX_CONNS_DEFAULT 16384
#define WORKERS_MAX 1024

/* --- shared state ----------------------------------------------------------- */

struct client_slot {
	struct addr a;     /* family 0: empty */
	uint32_t reported; /* a refusal was recorded since it was last under */
};

struct proxy_shared {
	pthread_mutex_t lock;     /* process-shared, robust */
	size_t map_len;
	unsigned int workers;
	unsigned int max_conns;
	unsigned int client_limit;
	uint32_t nslots;          /* a power of two */
	uint64_t seed;
	/* then: uint32_t live[workers]; struct client_slot slots[nslots];
	 * uint32_t counts[nslots * workers] */
};

static uint32_t *shared_live(struct proxy_shared *s)
{
	return (uint32_t *)(s + 1);
}

static struct client_slot *shared_slots(struct proxy_shared *s)
{
	size_t off = sizeof(*s) + s->workers * sizeof(uint32_t);

	off = (off + 15) & ~(size_t)15;
	return (struct client_slot *)((char *)s + off);
}

static uint32_t *shared_counts(struct proxy_shared *s)
{
	return (uint32_t *)(shared_slots(s) + s->nslots);
}

static size_t shared_size(unsigned int workers, uint32_t nslots)
{
	size_t off = sizeof(struct proxy_shared) + workers * sizeof(uint32_t);

	off = (off + 15) & ~(size_t)15;
	return off + nslots * sizeof(struct client_slot) +
	       (size_t)nslots * workers * sizeof(uint32_t);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max < 262144) {
		struct rlimit want = { 262144, 262144 };

		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Connections one process's descriptors can carry: two each. */
static unsigned int fd_conns(void)
{
	struct rlimit rl;
	rlim_t n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return MAX_CONNS_DEFAULT;
	n = rl.rlim_cur > FD_RESERVE + 2 ? (rl.rlim_cur - FD_RESERVE) / 2 : 1;
	return n > UINT32_MAX / 4 ? UINT32_MAX / 4 : (unsigned int)n;
}

struct proxy_shared *proxy_shared_new(unsigned int workers,
				      unsigned int max_conns,
				      unsigned int client_limit, char *err,
				      size_t errlen)
{
	pthread_mutexattr_t ma;
	struct proxy_shared *s;
	unsigned int limit, per;
	uint32_t nslots = 16;
	size_t len;
	void *m;

	if (workers == 0 || workers > WORKERS_MAX) {
		snprintf(err, errlen, "workers must be 1..%d", WORKERS_MAX);
		return NULL;
	}
	raise_fd_limit();
	limit = max_conns ? max_conns : MAX_CONNS_DEFAULT;
	per = fd_conns();
	if ((uint64_t)per * workers < limit)
		limit = per * workers;
	/* every distinct client holds at least one connection */
	while (nslots < 2u * limit && nslots < (1u << 24))
		nslots *= 2;
	len = shared_size(workers, nslots);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "shared memory: %s", strerror(errno));
		return NULL;
	}
	s = m;
	s->map_len = len;
	s->workers = workers;
	s->max_conns = limit;
	s->client_limit = client_limit ? client_limit : (limit / 4 ? limit / 4 : 1);
	s->nslots = nslots;
	util_random(&s->seed, sizeof(s->seed));
	if (pthread_mutexattr_init(&ma) != 0 ||
	    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) != 0 ||
	    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&s->lock, &ma) != 0) {
		snprintf(err, errlen, "shared memory: cannot make a shared lock");
		munmap(m, len);
		return NULL;
	}
	pthread_mutexattr_destroy(&ma);
	return s;
}

unsigned int proxy_shared_max_conns(const struct proxy_shared *s)
{
	return s->max_conns;
}

unsigned int proxy_shared_client_limit(const struct proxy_shared *s)
{
	return s->client_limit;
}

void proxy_shared_free(struct proxy_shared *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	munmap(s, s->map_len);
}

static void shared_lock(struct proxy_shared *s)
{
	/* A worker that died holding it leaves the table as it was between
	 * two stores: usable; its own counts are forgotten by the parent. */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&s->lock);
}

static void shared_unlock(struct proxy_shared *s)
{
	pthread_mutex_unlock(&s->lock);
}

static uint32_t slot_hash(const struct proxy_shared *s, const struct addr *a)
{
	uint64_t h = s->seed ^ (uint64_t)a->family;
	size_t i;

	for (i = 0; i < sizeof(a->bytes); i++) {
		h ^= a->bytes[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return (uint32_t)(h ^ (h >> 32));
}

/* The slot of @a, or the empty slot where it would go. */
static uint32_t slot_find(struct proxy_shared *s, const struct addr *a)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t mask = s->nslots - 1, i = slot_hash(s, a) & mask;

	while (slots[i].a.family != 0 && !addr_equal(&slots[i].a, a))
		i = (i + 1) & mask;
	return i;
}

static uint64_t slot_total(struct proxy_shared *s, uint32_t i)
{
	const uint32_t *cnt = shared_counts(s) + (size_t)i * s->workers;
	uint64_t t = 0;
	unsigned int w;

	for (w = 0; w < s->workers; w++)
		t += cnt[w];
	return t;
}

/* Empties slot @i, moving later entries of its run back (linear
 * probing's deletion without tombstones). */
static void slot_remove(struct proxy_shared *s, uint32_t i)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t *counts = shared_counts(s), mask = s->nslots - 1, j = i;

	for (;;) {
		slots[i].a.family = 0;
		memset(counts + (size_t)i * s->workers, 0, s->workers * sizeof(uint32_t));
		for (;;) {
			uint32_t home;

			j = (j + 1) & mask;
			if (slots[j].a.family == 0)
				return;
			home = slot_hash(s, &slots[j].a) & mask;
			/* j stays unless its home lies cyclically outside
			 * (i, j] */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		slots[i] = slots[j];
		memcpy(counts + (size_t)i * s->workers, counts + (size_t)j * s->workers,
		       s->workers * sizeof(uint32_t));
		i = j;
	}
}

/* The key of a client: an IPv4-mapped address is its IPv4 address. */
static void client_key(const struct addr *peer, struct addr *key)
{
	struct addr v4;

	*key = *peer;
	if (peer->family == AF_INET6 && addr_embedded_ipv4(peer, &v4) &&
	    memcmp(peer->bytes, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
		*key = v4;
	if (key->family != AF_INET && key->family != AF_INET6) {
		/* cannot happen with an IP listener; one shared key if it did */
		memset(key, 0, sizeof(*key));
		key->family = AF_INET;
	}
}

enum admit { ADMIT_OK, ADMIT_FULL, ADMIT_CLIENT, ADMIT_CLIENT_FIRST };

static enum admit shared_acquire(struct proxy_shared *s, unsigned int worker,
				 const struct addr *peer)
{
	uint32_t *live = shared_live(s);
	struct client_slot *slots = shared_slots(s);
	enum admit r = ADMIT_OK;
	uint64_t total = 0;
	struct addr key;
	unsigned int w;
	uint32_t i;

	client_key(peer, &key);
	shared_lock(s);
	for (w = 0; w < s->workers; w++)
		total += live[w];
	if (total >= s->max_conns) {
		r = ADMIT_FULL;
		goto out;
	}
	i = slot_find(s, &key);
	if (slots[i].a.family == 0) {
		slots[i].a = key;
		slots[i].reported = 0;
	}
	if (slot_total(s, i) >= s->client_limit) {
		r = slots[i].reported ? ADMIT_CLIENT : ADMIT_CLIENT_FIRST;
		slots[i].reported = 1;
		goto out;
	}
	shared_counts(s)[(size_t)i * s->workers + worker]++;
	live[worker]++;
out:
	shared_unlock(s);
	return r;
}

static void shared_release(struct proxy_shared *s, unsigned int worker,
			   const struct addr *peer)
{
	struct client_slot *slots = shared_slots(s);
	uint32_t *cnt;
	struct addr key;
	uint32_t i;

	client_key(peer, &key);
	shared_lock(s);
	i = slot_find(s, &key);
	cnt = shared_counts(s) + (size_t)i * s->workers + worker;
	if (slots[i].a.family != 0 && *cnt > 0) {
		(*cnt)--;
		shared_live(s)[worker]--;
		if (slot_total(s, i) == 0)
			slot_remove(s, i);
		else if (slot_total(s, i) < s->client_limit)
			slots[i].reported = 0;
	}
	shared_unlock(s);
}

void proxy_shared_worker_gone(struct proxy_shared *s, unsigned int worker)
{
	struct client_slot *slots;
	uint32_t i;

	if (!s || worker >= s->workers)
		return;
	slots = shared_slots(s);
	shared_lock(s);
	if (shared_live(s)[worker] == 0) {
		/* it held nothing (live is the sum of its counts): nothing to
		 * forget, and the table's pages are not touched (at the end of
		 * every session, one call per worker) */
		shared_unlock(s);
		return;
	}
	shared_live(s)[worker] = 0;
	for (i = 0; i < s->nslots; i++)
		shared_counts(s)[(size_t)i * s->workers + worker] = 0;
	/* Removing shifts entries back: an entry moved to a slot already
	 * passed is checked again by staying on the same index. */
	for (i = 0; i < s->nslots;) {
		if (slots[i].a.family != 0 && slot_total(s, i) == 0) {
			slot_remove(s, i);
			continue;
		}
		i++;
	}
	shared_unlock(s);
}

void proxy_client_release(struct proxy *p, const struct addr *peer)
{
	shared_release(p->shared, p->worker, peer);
}

/* --- pipes ----------------------------------------------------------------- */

/* A tunnel borrows one pipe per direction only while bytes are in flight,
 * so an idle tunnel holds its two sockets and nothing else. */
int proxy_pipe_get(struct proxy *p, int fds[2])
{
	if (p->npool > 0) {
		p->npool--;
		fds[0] = p->pool[p->npool][0];
		fds[1] = p->pool[p->npool][1];
		return 0;
	}
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	(void)fcntl(fds[1], F_SETPIPE_SZ, PIPE_SIZE);
	return 0;
}

void proxy_pipe_put(struct proxy *p, int fds[2], bool empty)
{
	if (empty && p->npool < p->pool_max) {
		p->pool[p->npool][0] = fds[0];
		p->pool[p->npool][1] = fds[1];
		p->npool++;
	} else {
		close(fds[0]);
		close(fds[1]);
	}
	fds[0] = fds[1] = -1;
}

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
		      (int)p->shared->client_limit);
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
		enum admit a;
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
		a = shared_acquire(p->shared, p->worker, &peer);
		if (a != ADMIT_OK) {
			if (a == ADMIT_CLIENT_FIRST)
				refuse_client(p, &peer);
			close(fd); /* this client only */
			continue;
		}
		c = conn_new(p, fd, &peer, transparent);
		if (!c) {
			shared_release(p->shared, p->worker, &peer);
			close(fd);
			continue;
		}
		c->counted = true;
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
		else if (c && c->early && c->deadline && (!p->soon || c->deadline < p->soon))
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
	raise_fd_limit();
	if (opts->shared) {
		p->shared = opts->shared;
		p->worker = opts->worker;
		if (p->worker >= opts->shared->workers) {
			snprintf(err, errlen, "worker %u of %u", p->worker,
				 opts->shared->workers);
			goto fail;
		}
	} else {
		p->shared = proxy_shared_new(1, opts->max_conns, opts->client_limit, err,
					     errlen);
		if (!p->shared)
			goto fail;
		p->own_shared = true;
	}
	p->cap = p->shared->max_conns;
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
		if (p->o.record_flush)
			p->o.record_flush(p->o.record_arg);
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
