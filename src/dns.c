/* SPDX-License-Identifier: Apache-2.0
 * dns.c - the egress proxy's resolver, see dns.h.
 *
 * DOC: Theory of Operation
 *
 * The proxy decides on addresses, not names: it classifies
 * every address a name resolves to, denies the name if any of them is
 * special-purpose, and connects only to one it classified. This module's
 * job is to hand it those addresses, all of them, straight from the DNS
 * servers of the policy (egress.resolver, else the host's resolv.conf), and
 * nothing else.
 *
 * What we ask. Two c-ares queries per resolve, ares_query(A) and
 * ares_query(AAAA), with the name exactly as given. Not ares_getaddrinfo():
 * in c-ares 1.18 it consults the "lookups" order (hosts file first by
 * default), can append search domains, answers IP literals itself, and
 * re-sorts the addresses by RFC 6724 (opening UDP sockets to each answer to
 * find a source address) unless told not to. ares_query() is a bare DNS
 * query: the hosts file, the search list and ndots never enter into it, and
 * each of the two statuses is ours to combine. Each response is parsed by
 * c-ares (ares_parse_a_reply / ares_parse_aaaa_reply), which follows the
 * CNAME chain and keeps the records of the queried type whose owner is the
 * name or a CNAME target, in the order the server wrote them.
 *
 * Why no hosts file. /etc/hosts maps names the policy allows to whatever
 * the host's administrator (or a compromised tool) wrote there; "localhost"
 * there is 127.0.0.1. The proxy must judge what DNS says. Belt and braces:
 * the channels are also created with ARES_OPT_LOOKUPS "b" (DNS only).
 *
 * Why no search list, no ndots. The name is already the normalised target
 * the rules matched ("api" is not "api.corp.example"): resolving anything
 * else would check one name and connect to another. ares_query() never
 * searches; the channels also carry ARES_FLAG_NOSEARCH, an empty domain
 * list (so LOCALDOMAIN and resolv.conf "search" are not read) and
 * ARES_FLAG_NOALIASES (HOSTALIASES is not read).
 *
 * Why no cache. DNS rebinding is defeated by the proxy pinning the address
 * it checked for the one connection that asked, not by remembering answers:
 * a cache would make one lookup's answer decide another connection, with a
 * TTL chosen by whoever runs the name's servers. c-ares 1.18 has no cache;
 * we add none. Every resolve asks the servers.
 *
 * Why every answer. The classification, the allow_ranges exemptions and the
 * choice of the address to connect to belong to the proxy (egress.c); a
 * filter here would be a second, silent policy. We return every A address
 * of the A response, then every AAAA address of the AAAA response, without
 * deduplicating. Records c-ares does not keep (another owner, another type,
 * a bad RDATA length) are not addresses of this name: nothing can connect to
 * them, so dropping them cannot let an unchecked address through.
 *
 * Timeouts. Each resolve has a deadline (timeout_ms after dns_resolve())
 * that this module enforces itself. c-ares' own retry schedule (2 tries per
 * server, per-try timeout timeout_ms / (3 * nservers), doubled on the second
 * round) ends at about the same time, so a query whose resolve has already
 * been answered does not linger in c-ares for long; c-ares 1.18 cannot
 * cancel one query, so it is left to finish and its answer is dropped. At the
 * deadline a resolve reports the addresses it has (one family answered, the
 * other did not: the proxy can only ever connect to what it was given) or
 * "timeout".
 *
 * Servers. SERVFAIL, REFUSED, NOTIMP, an ICMP port unreachable or a
 * timeout moves a query to the next server (c-ares, in the policy's order:
 * ARES_OPT_NOROTATE). c-ares 1.18 then reports the first four alike
 * (ECONNREFUSED, the status a query starts with): they are one status
 * here, DNS_SERVFAIL, rather than a precise-looking wrong one. An ICMP
 * error that a connected UDP socket reports on the next send instead of
 * on receive is made to come back on receive (see sock_sendv()), so the
 * query that drew it moves on at once instead of waiting for its timeout.
 * A truncated (TC) UDP answer is asked again over TCP rather than used: a
 * truncated answer may lack addresses. resolv.conf is
 * read once, by a throwaway channel, for its nameserver lines only; the
 * working channel gets that list explicitly, so "options rotate/ndots/
 * attempts", RES_OPTIONS and "search" never apply. A policy reload
 * (dns_set_servers) makes a new channel; the old one serves the resolves
 * already started and is destroyed once idle (c-ares 1.18 refuses to change
 * servers while queries are pending).
 *
 * Bursts. c-ares 1.18 sends every query to a server through one UDP
 * socket; hundreds at once overflow the socket buffers at one end or the
 * other and come back as timeouts. At most DNS_MAX_QUERIES queries are in
 * flight; later resolves wait in order, their deadline running.
 *
 * Sockets and the loop. c-ares opens its sockets through our socket
 * functions: SOCK_NONBLOCK | SOCK_CLOEXEC at creation (no window in which a
 * concurrent fork+exec inherits them), TCP_NODELAY, MSG_NOSIGNAL.
 * ARES_OPT_SOCK_STATE_CB tells us which sockets exist and what they wait
 * for; each is in the proxy's epoll set with data.u64 = ev_tag | fd, and a
 * socket leaves the set (and our table) before c-ares closes it.
 *
 * Callbacks. c-ares calls us back from inside ares_query() (some errors)
 * and ares_process_fd(). We never call the proxy from there: a completed
 * resolve goes on a ready list, and dns_handle()/dns_process_timeouts()
 * deliver the ready list once c-ares has returned. So the proxy is never
 * re-entered from dns_resolve(), and its callbacks may start new resolves.
 */
#include "dns.h"

#include <arpa/nameser.h>
#include <ares.h>
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "hostname.h"
#include "util.h"

static const char *const status_names[] = {
	[DNS_OK] = "ok",
	[DNS_NXDOMAIN] = "NXDOMAIN",
	[DNS_NODATA] = "no A or AAAA record",
	[DNS_TIMEOUT] = "timeout",
	[DNS_SERVFAIL] = "server failure (SERVFAIL, REFUSED or unreachable)",
	[DNS_FORMERR] = "server reported a format error",
	[DNS_BADRESP] = "malformed response",
	[DNS_NOMEM] = "out of memory",
	[DNS_FAILED] = "resolver error",
};
static_assert(ARRAY_SIZE(status_names) == DNS_STATUS_COUNT,
	      "dns_status_to_string() table out of sync");

const char *dns_status_to_string(enum dns_status s)
{
	if ((unsigned int)s >= DNS_STATUS_COUNT)
		return "resolver error";
	return status_names[s];
}

/* c-ares' tries per server; the per-try timeout is timeout_ms / (3 * n)
 * because the second round waits twice as long (1 + 2 = 3). */
#define DNS_TRIES 2
#define DNS_MIN_TRY_MS 10

struct dns_req;

/* One of the two c-ares queries of a resolve. */
struct dns_query {
	struct dns_req *req;
	int family;              /* AF_INET (A) or AF_INET6 (AAAA) */
	bool answered;           /* c-ares called back while it mattered */
	enum dns_status status;  /* valid when answered */
	struct addr *addrs;      /* malloc'd, when status == DNS_OK */
	size_t n;
};

/* QUEUED: in d->queued, waiting for room among the queries in flight.
 * ACTIVE: in d->active, its queries in c-ares, waiting for answers or its
 * deadline. READY: in d->ready, callback due. DELIVERED: in no list; alive
 * only until c-ares has called back for both queries (pending == 0). */
enum req_state { REQ_QUEUED, REQ_ACTIVE, REQ_READY, REQ_DELIVERED };

struct chan;

struct dns_req {
	struct dns *d;
	struct chan *chan;
	struct dns_req *prev, *next;
	enum req_state state;
	char name[HOSTNAME_MAX + 1];
	unsigned int pending;    /* c-ares queries not yet called back */
	uint64_t deadline;       /* CLOCK_MONOTONIC, ms */
	dns_cb cb;
	void *arg;
	uint64_t cookie;
	struct dns_query q[2];   /* [0] A, [1] AAAA */
};

struct req_list {
	struct dns_req *head, *tail;
};

/* A c-ares channel: one per server list. */
struct chan {
	ares_channel ch;
	struct dns *d;
	struct chan *next;
	size_t nq;               /* c-ares queries in flight */
	bool retired;            /* replaced: destroyed once nq == 0 */
};

/* A c-ares socket registered in the epoll set. */
struct sock {
	int fd;
	struct chan *chan;
	uint32_t events;
};

struct dns {
	int epfd;
	uint64_t ev_tag;
	unsigned int timeout_ms;
	struct chan *cur;        /* new resolves go here */
	struct chan *chans;      /* every channel, cur included */
	struct sock *socks;
	size_t nsocks, socks_cap;
	/* queued and active are both in creation order, which is deadline
	 * order (one timeout for all): the queue is started from its head
	 * only, and only while nothing older waits. */
	struct req_list queued;
	struct req_list active;
	struct req_list ready;
	size_t nq;               /* c-ares queries in flight, all channels */
	size_t live;             /* struct dns_req allocated */
	size_t due;              /* callbacks not yet called */
	bool closing;            /* in dns_free(): no more deliveries */
	bool in_callback;
	bool warned_epoll;
};

static void list_append(struct req_list *l, struct dns_req *r)
{
	r->next = NULL;
	r->prev = l->tail;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

static void list_unlink(struct req_list *l, struct dns_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		l->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		l->tail = r->prev;
	r->prev = r->next = NULL;
}

static void req_free(struct dns *d, struct dns_req *r)
{
	free(r->q[0].addrs);
	free(r->q[1].addrs);
	free(r);
	ASSERT(d->live > 0);
	d->live--;
}

/* Empties @l and returns its first element; the rest follow by ->next. */
static struct dns_req *list_take(struct req_list *l)
{
	struct dns_req *r = l->head;

	l->head = l->tail = NULL;
	return r;
}

/* ------------------------------------------------------------------ */
/* Sockets: created by c-ares through these, registered in epoll.      */

static size_t sock_find(const struct dns *d, int fd)
{
	size_t i;

	for (i = 0; i < d->nsocks; i++)
		if (d->socks[i].fd == fd)
			return i;
	return d->nsocks;
}

/* Takes @fd out of the epoll set and our table (before it is closed). */
static void sock_forget(struct dns *d, int fd)
{
	size_t i = sock_find(d, fd);

	if (i == d->nsocks)
		return;
	(void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
	d->socks[i] = d->socks[--d->nsocks];
}

static void on_sock_state(void *data, ares_socket_t fd, int readable,
			  int writable)
{
	struct chan *c = data;
	struct dns *d = c->d;
	struct epoll_event ev;
	size_t i;

	if (!readable && !writable) {
		sock_forget(d, fd);
		return;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = (readable ? EPOLLIN : 0u) | (writable ? EPOLLOUT : 0u);
	ev.data.u64 = d->ev_tag | (uint32_t)fd;
	i = sock_find(d, fd);
	if (i < d->nsocks) {
		d->socks[i].chan = c;
		if (d->socks[i].events == ev.events)
			return;
		if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) {
			d->socks[i].events = ev.events;
			return;
		}
		d->socks[i] = d->socks[--d->nsocks];
		if (errno != ENOENT)
			goto fail;
	}
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto fail;
	if (d->nsocks == d->socks_cap) {
		d->socks_cap = d->socks_cap ? 2 * d->socks_cap : 8;
		d->socks = util_xrealloc(d->socks,
					 d->socks_cap * sizeof(*d->socks));
	}
	d->socks[d->nsocks].fd = fd;
	d->socks[d->nsocks].chan = c;
	d->socks[d->nsocks].events = ev.events;
	d->nsocks++;
	return;
fail:
	/* Nothing to return an error to: the queries on this socket will
	 * time out. Say so once. */
	if (!d->warned_epoll) {
		d->warned_epoll = true;
		util_warn("dns: cannot watch a resolver socket: %s",
			  strerror(errno));
	}
}

static ares_socket_t sock_open(int domain, int type, int protocol,
			       void *data)
{
	int fd = socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
	int one = 1;

	(void)data;
	if (fd < 0)
		return ARES_SOCKET_BAD;
	if (type == SOCK_STREAM)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
	return fd;
}

static int sock_close(ares_socket_t fd, void *data)
{
	struct chan *c = data;

	sock_forget(c->d, fd);
	return close(fd);
}

static int sock_connect(ares_socket_t fd, const struct sockaddr *sa,
			ares_socklen_t len, void *data)
{
	(void)data;
	return connect(fd, sa, len);
}

static ares_ssize_t sock_recvfrom(ares_socket_t fd, void *buf, size_t len,
				  int flags, struct sockaddr *from,
				  ares_socklen_t *fromlen, void *data)
{
	(void)data;
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

/* A connected UDP socket reports an ICMP unreachable drawn by an earlier
 * datagram on the next send, which then sends nothing. c-ares would blame
 * (and move) only the query being sent, and the query that drew the ICMP
 * would wait for its timeout on a dead server. So the datagram is sent
 * once more: its own ICMP comes back through recvfrom(), and c-ares moves
 * every query of that server on. */
static ares_ssize_t sock_sendv(ares_socket_t fd, const struct iovec *iov,
			       int iovcnt, void *data)
{
	struct msghdr m;
	ssize_t n;
	int type = 0;
	socklen_t tl = sizeof(type);

	(void)data;
	if (iovcnt < 0) {
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.msg_iov = (struct iovec *)iov;
	m.msg_iovlen = (size_t)iovcnt;
	n = sendmsg(fd, &m, MSG_NOSIGNAL);
	if (n < 0 && errno == ECONNREFUSED &&
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
	    type == SOCK_DGRAM)
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
	return n;
}

static const struct ares_socket_functions sock_funcs = {
	.asocket = sock_open,
	.aclose = sock_close,
	.aconnect = sock_connect,
	.arecvfrom = sock_recvfrom,
	.asendv = sock_sendv,
};

/* ------------------------------------------------------------------ */
/* Answers                                                            */

static enum dns_status map_ares(int status)
{
	switch (status) {
	case ARES_SUCCESS:
		return DNS_OK;
	case ARES_ENOTFOUND:
		return DNS_NXDOMAIN;
	case ARES_ENODATA:
		return DNS_NODATA;
	case ARES_ETIMEOUT:
		return DNS_TIMEOUT;
	/* c-ares 1.18 drops SERVFAIL, REFUSED and NOTIMP answers, moves on
	 * to the next server, and when none is left reports the status the
	 * query started with, ECONNREFUSED, which is also what an ICMP
	 * unreachable or a socket error gives: one status for all. */
	case ARES_ESERVFAIL:
	case ARES_EREFUSED:
	case ARES_ENOTIMP:
	case ARES_ECONNREFUSED:
		return DNS_SERVFAIL;
	case ARES_EFORMERR:
		return DNS_FORMERR;
	case ARES_EBADRESP:
		return DNS_BADRESP;
	case ARES_ENOMEM:
		return DNS_NOMEM;
	default:
		return DNS_FAILED;
	}
}

/* Stores the addresses of q->family in the response @abuf. */
static void parse_answer(struct dns_query *q, const unsigned char *abuf,
			 int alen)
{
	struct hostent *he = NULL;
	size_t want = q->family == AF_INET ? 4 : 16, n = 0, i;
	int rc;

	if (q->family == AF_INET)
		rc = ares_parse_a_reply(abuf, alen, &he, NULL, NULL);
	else
		rc = ares_parse_aaaa_reply(abuf, alen, &he, NULL, NULL);
	if (rc != ARES_SUCCESS) {
		q->status = map_ares(rc);
		goto out;
	}
	if (he->h_addrtype != q->family || (size_t)he->h_length != want) {
		q->status = DNS_BADRESP;
		goto out;
	}
	while (he->h_addr_list && he->h_addr_list[n])
		n++;
	if (n == 0) {
		q->status = DNS_NODATA;
		goto out;
	}
	q->addrs = util_xcalloc(n, sizeof(*q->addrs));
	for (i = 0; i < n; i++) {
		q->addrs[i].family = q->family;
		memcpy(q->addrs[i].bytes, he->h_addr_list[i], want);
	}
	q->n = n;
	q->status = DNS_OK;
out:
	if (he)
		ares_free_hostent(he);
}

/* The c-ares callback of one query; see enum req_state. */
static void on_query(void *arg, int status, int timeouts, unsigned char *abuf,
		     int alen)
{
	struct dns_query *q = arg;
	struct dns_req *r = q->req;
	struct dns *d = r->d;

	(void)timeouts;
	ASSERT(r->pending > 0 && r->chan->nq > 0 && d->nq > 0);
	r->pending--;
	r->chan->nq--;
	d->nq--;
	if (r->state == REQ_ACTIVE && !d->closing) {
		q->answered = true;
		if (status == ARES_SUCCESS && abuf && alen > 0)
			parse_answer(q, abuf, alen);
		else
			q->status = status == ARES_SUCCESS ? DNS_BADRESP
							   : map_ares(status);
		if (r->pending == 0) {
			list_unlink(&d->active, r);
			r->state = REQ_READY;
			list_append(&d->ready, r);
		}
		return;
	}
	/* Answered after its deadline, or torn down by dns_free(). */
	if (r->state == REQ_DELIVERED && r->pending == 0)
		req_free(d, r);
}

static enum dns_status combine(enum dns_status a, enum dns_status b)
{
	if (a == b || b == DNS_NODATA)
		return a;
	if (a == DNS_NODATA)
		return b;
	if (a == DNS_NXDOMAIN || b == DNS_NXDOMAIN)
		return DNS_NXDOMAIN;
	return a;
}

static void deliver_one(struct dns *d, struct dns_req *r)
{
	struct dns_query *a = &r->q[0], *aaaa = &r->q[1];
	enum dns_status sa = a->answered ? a->status : DNS_TIMEOUT;
	enum dns_status s6 = aaaa->answered ? aaaa->status : DNS_TIMEOUT;
	struct addr *all = NULL;
	size_t n = a->n + aaaa->n;

	r->state = REQ_DELIVERED;
	ASSERT(d->due > 0);
	d->due--;
	d->in_callback = true;
	if (n > 0) {
		all = util_xcalloc(n, sizeof(*all));
		if (a->n)
			memcpy(all, a->addrs, a->n * sizeof(*all));
		if (aaaa->n)
			memcpy(all + a->n, aaaa->addrs, aaaa->n * sizeof(*all));
		r->cb(r->arg, r->cookie, DNS_OK, all, n, NULL);
		free(all);
	} else {
		enum dns_status s = combine(sa, s6);

		ASSERT(s != DNS_OK);
		r->cb(r->arg, r->cookie, (int)s, NULL, 0,
		      dns_status_to_string(s));
	}
	d->in_callback = false;
	if (r->pending == 0)
		req_free(d, r);
}

/* Calls back the resolves that were ready when called; those a callback
 * makes ready wait for the next round (dns_next_timeout_ms() says 0). */
static void deliver(struct dns *d)
{
	struct dns_req *r = list_take(&d->ready), *next;

	for (; r; r = next) {
		next = r->next;
		r->prev = r->next = NULL;
		deliver_one(d, r);
	}
}

static void expire_list(struct dns *d, struct req_list *l, uint64_t now)
{
	struct dns_req *r;

	while ((r = l->head) != NULL && r->deadline <= now) {
		list_unlink(l, r);
		r->state = REQ_READY;
		list_append(&d->ready, r);
	}
}

static void expire(struct dns *d, uint64_t now)
{
	expire_list(d, &d->queued, now);
	expire_list(d, &d->active, now);
}

/* Hands @r's two queries to c-ares, on the current channel. */
static void req_start(struct dns *d, struct dns_req *r)
{
	struct chan *c = d->cur;

	r->chan = c;
	r->state = REQ_ACTIVE;
	list_append(&d->active, r);
	/* Both counted first: either query may complete inside ares_query(). */
	r->pending = 2;
	c->nq += 2;
	d->nq += 2;
	ares_query(c->ch, r->name, ns_c_in, ns_t_a, on_query, &r->q[0]);
	ares_query(c->ch, r->name, ns_c_in, ns_t_aaaa, on_query, &r->q[1]);
}

/* Starts queued resolves while there is room. */
static void pump(struct dns *d)
{
	struct dns_req *r;

	while ((r = d->queued.head) != NULL && d->nq + 2 <= DNS_MAX_QUERIES) {
		list_unlink(&d->queued, r);
		req_start(d, r);
	}
}

/* ------------------------------------------------------------------ */
/* Channels                                                           */

static void chan_free(struct dns *d, struct chan *c)
{
	size_t i;

	/* Calls on_query(ARES_EDESTRUCTION) for what is in flight and closes
	 * the sockets through sock_close(). */
	ares_destroy(c->ch);
	for (i = 0; i < d->nsocks;) {
		if (d->socks[i].chan == c)
			sock_forget(d, d->socks[i].fd);
		else
			i++;
	}
	free(c);
}

static void reap(struct dns *d)
{
	struct chan **pp = &d->chans, *c;

	while ((c = *pp) != NULL) {
		if (c->retired && c->nq == 0) {
			*pp = c->next;
			chan_free(d, c);
		} else {
			pp = &c->next;
		}
	}
}

/* Options every channel gets; see the Theory of Operation. */
static int base_options(struct ares_options *o, char *lookups)
{
	memset(o, 0, sizeof(*o));
	o->flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
	o->lookups = lookups;
	o->domains = NULL;
	o->ndomains = 0;
	o->ndots = 1;
	o->sortlist = NULL;
	o->nsort = 0;
	o->timeout = DNS_TIMEOUT_MS_DEFAULT / 3;
	o->tries = DNS_TRIES;
	return ARES_OPT_FLAGS | ARES_OPT_LOOKUPS | ARES_OPT_DOMAINS |
	       ARES_OPT_NDOTS | ARES_OPT_SORTLIST | ARES_OPT_NOROTATE |
	       ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
}

/* The nameserver lines of resolv.conf (c-ares' reading of them: no
 * nameserver line, or no file, gives 127.0.0.1:53 as in glibc). The caller
 * frees *out with ares_free_data(). */
static int read_resolv_conf(struct ares_addr_port_node **out, char *err,
			    size_t errlen)
{
	struct ares_options o;
	char lookups[] = "b";
	ares_channel tmp;
	int mask = base_options(&o, lookups), rc;

	*out = NULL;
	rc = ares_init_options(&tmp, &o, mask);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "resolv.conf: %s", ares_strerror(rc));
		return -1;
	}
	rc = ares_get_servers_ports(tmp, out);
	ares_destroy(tmp);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "resolv.conf: %s", ares_strerror(rc));
		return -1;
	}
	return 0;
}

static int chan_new(struct dns *d, const struct policy_endpoint *servers,
		    size_t nservers, struct chan **out, char *err,
		    size_t errlen)
{
	struct ares_addr_port_node *nodes = NULL, *conf = NULL, *list, *p;
	struct ares_options o;
	char lookups[] = "b";
	struct chan *c = NULL;
	unsigned long long per_try;
	size_t n = 0, i;
	int mask = base_options(&o, lookups), rc, ret = -1;

	*out = NULL;
	if (nservers == 0) {
		if (read_resolv_conf(&conf, err, errlen) < 0)
			goto out;
		list = conf;
	} else {
		nodes = util_xcalloc(nservers, sizeof(*nodes));
		for (i = 0; i < nservers; i++) {
			const struct policy_endpoint *e = &servers[i];

			if ((e->addr.family != AF_INET &&
			     e->addr.family != AF_INET6) || e->port == 0) {
				snprintf(err, errlen,
					 "resolver %zu: not an address and port",
					 i);
				goto out;
			}
			nodes[i].family = e->addr.family;
			if (e->addr.family == AF_INET)
				memcpy(&nodes[i].addr.addr4, e->addr.bytes, 4);
			else
				memcpy(&nodes[i].addr.addr6, e->addr.bytes, 16);
			nodes[i].udp_port = e->port;
			nodes[i].tcp_port = e->port;
			nodes[i].next = i + 1 < nservers ? &nodes[i + 1] : NULL;
		}
		list = nodes;
	}
	for (p = list; p; p = p->next)
		n++;
	if (n == 0) {
		snprintf(err, errlen, "no DNS server to ask");
		goto out;
	}

	per_try = d->timeout_ms / (3ull * n);
	if (per_try < DNS_MIN_TRY_MS)
		per_try = DNS_MIN_TRY_MS;
	if (per_try > INT_MAX)
		per_try = INT_MAX;
	o.timeout = (int)per_try;
	o.servers = NULL;
	o.nservers = 0; /* set below, with ports; keeps resolv.conf unread */
	c = util_xcalloc(1, sizeof(*c));
	c->d = d;
	o.sock_state_cb = on_sock_state;
	o.sock_state_cb_data = c;
	mask |= ARES_OPT_SERVERS | ARES_OPT_SOCK_STATE_CB;
	rc = ares_init_options(&c->ch, &o, mask);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares: %s", ares_strerror(rc));
		free(c);
		goto out;
	}
	ares_set_socket_functions(c->ch, &sock_funcs, c);
	rc = ares_set_servers_ports(c->ch, list);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares: setting servers: %s",
			 ares_strerror(rc));
		ares_destroy(c->ch);
		free(c);
		goto out;
	}
	*out = c;
	ret = 0;
out:
	free(nodes);
	if (conf)
		ares_free_data(conf);
	return ret;
}

/* ------------------------------------------------------------------ */
/* API                                                                */

struct dns *dns_new(int epfd, uint64_t ev_tag,
		    const struct policy_endpoint *servers, size_t nservers,
		    unsigned int timeout_ms, char *err, size_t errlen)
{
	struct dns *d;
	int rc;

	ASSERT((ev_tag & 0xffffffffu) == 0);
	ASSERT(servers || nservers == 0);
	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares: %s", ares_strerror(rc));
		return NULL;
	}
	d = util_xcalloc(1, sizeof(*d));
	d->epfd = epfd;
	d->ev_tag = ev_tag;
	d->timeout_ms = timeout_ms ? timeout_ms : DNS_TIMEOUT_MS_DEFAULT;
	if (chan_new(d, servers, nservers, &d->cur, err, errlen) < 0) {
		free(d);
		ares_library_cleanup();
		return NULL;
	}
	d->chans = d->cur;
	return d;
}

int dns_resolve(struct dns *d, const char *name, dns_cb cb, void *arg,
		uint64_t cookie)
{
	struct host_target t;
	struct dns_req *r;
	size_t len;

	if (!name || !cb)
		return -EINVAL;
	len = strnlen(name, HOSTNAME_MAX + 1);
	if (len == 0 || len > HOSTNAME_MAX ||
	    hostname_normalise(name, len, &t) != HOSTNAME_OK || t.is_addr ||
	    strcmp(t.name, name) != 0)
		return -EINVAL;
	if (d->live >= DNS_MAX_LIVE)
		return -EAGAIN;

	r = util_xcalloc(1, sizeof(*r));
	r->d = d;
	memcpy(r->name, name, len + 1);
	r->deadline = util_now_ms() + d->timeout_ms;
	r->cb = cb;
	r->arg = arg;
	r->cookie = cookie;
	r->q[0].req = r;
	r->q[0].family = AF_INET;
	r->q[1].req = r;
	r->q[1].family = AF_INET6;
	d->live++;
	d->due++;
	if (d->queued.head || d->nq + 2 > DNS_MAX_QUERIES) {
		r->state = REQ_QUEUED;
		list_append(&d->queued, r);
	} else {
		req_start(d, r);
	}
	return 0;
}

void dns_handle(struct dns *d, int fd, uint32_t epoll_events)
{
	size_t i;

	ASSERT(!d->in_callback);
	i = sock_find(d, fd);
	if (i < d->nsocks) {
		struct sock *s = &d->socks[i];
		bool err = (epoll_events & (EPOLLERR | EPOLLHUP)) != 0;
		ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;

		/* An error is read (recv returns it, c-ares moves on to
		 * the next server) and, when c-ares waits to write, written. */
		if ((epoll_events & EPOLLIN) || err)
			rfd = fd;
		if ((epoll_events & EPOLLOUT) ||
		    (err && (s->events & EPOLLOUT)))
			wfd = fd;
		ares_process_fd(s->chan->ch, rfd, wfd);
	}
	pump(d);
	deliver(d);
	reap(d);
}

int dns_next_timeout_ms(struct dns *d, int max_ms)
{
	long long best = max_ms < 0 ? -1 : max_ms;
	struct chan *c;

	if (d->ready.head)
		return 0;
	if (d->active.head || d->queued.head) {
		uint64_t now = util_now_ms(), dl;
		long long left;

		if (!d->active.head)
			dl = d->queued.head->deadline;
		else if (!d->queued.head)
			dl = d->active.head->deadline;
		else
			dl = d->active.head->deadline < d->queued.head->deadline
				     ? d->active.head->deadline
				     : d->queued.head->deadline;
		left = dl > now ? (long long)(dl - now) : 0;
		if (best < 0 || left < best)
			best = left;
	}
	for (c = d->chans; c; c = c->next) {
		struct timeval tv;
		long long ms;

		if (c->nq == 0 || !ares_timeout(c->ch, NULL, &tv))
			continue;
		/* c-ares truncates to whole ms: "0" may be 0.9 ms early, and
		 * waking early would spin until it is due. */
		ms = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000 + 1;
		if (best < 0 || ms < best)
			best = ms;
	}
	return best > INT_MAX ? INT_MAX : (int)best;
}

void dns_process_timeouts(struct dns *d)
{
	struct chan *c;

	ASSERT(!d->in_callback);
	for (c = d->chans; c; c = c->next)
		if (c->nq > 0)
			ares_process_fd(c->ch, ARES_SOCKET_BAD,
					ARES_SOCKET_BAD);
	expire(d, util_now_ms());
	pump(d);
	deliver(d);
	reap(d);
}

int dns_set_servers(struct dns *d, const struct policy_endpoint *servers,
		    size_t nservers, char *err, size_t errlen)
{
	struct chan *c;

	ASSERT(servers || nservers == 0);
	if (chan_new(d, servers, nservers, &c, err, errlen) < 0)
		return -1;
	d->cur->retired = true;
	c->next = d->chans;
	d->chans = c;
	d->cur = c;
	reap(d);
	return 0;
}

size_t dns_pending(const struct dns *d)
{
	return d->due;
}

void dns_free(struct dns *d)
{
	struct chan *c;
	struct dns_req *r, *next;

	if (!d)
		return;
	ASSERT(!d->in_callback);
	d->closing = true;
	/* Each ares_destroy() calls on_query() for its queries: delivered
	 * resolves are freed there, the others below. */
	while ((c = d->chans) != NULL) {
		d->chans = c->next;
		chan_free(d, c);
	}
	for (r = list_take(&d->queued); r; r = next) {
		next = r->next;
		req_free(d, r);
	}
	for (r = list_take(&d->active); r; r = next) {
		next = r->next;
		req_free(d, r);
	}
	for (r = list_take(&d->ready); r; r = next) {
		next = r->next;
		req_free(d, r);
	}
	ASSERT(d->live == 0 && d->nsocks == 0);
	free(d->socks);
	free(d);
	ares_library_cleanup();
}
