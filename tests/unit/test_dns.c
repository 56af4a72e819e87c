/* SPDX-License-Identifier: Apache-2.0
 * test_dns.c - the resolver (dns.c) against DNS servers played by the test
 * itself: UDP (and TCP, for truncated answers) sockets on 127.0.0.1 that
 * answer each query with a crafted response, driven from the same epoll
 * loop as the resolver. Run it inside a network namespace with only
 * loopback (tests/netns-exec); it never sends a packet anywhere else.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dns.h"
#include "tap.h"
#include "util.h"

#define TAG_DNS (1ull << 32)
#define TAG_FAKE (2ull << 32)
#define FAKE_UDP 0
#define FAKE_LISTEN 1
#define FAKE_CONN 2
#define T_A 1
#define T_AAAA 28
#define T_CNAME 5

static int epfd = -1;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ------------------------------------------------------------------ */
/* DNS messages                                                       */
/* ------------------------------------------------------------------ */

struct query {
	uint16_t id;
	uint16_t qtype;
	char name[256];
	const uint8_t *question; /* name + type + class, as received */
	size_t qlen;
};

struct msg {
	uint8_t b[8192];
	size_t len;
};

static void put8(struct msg *m, unsigned int v)
{
	ASSERT(m->len < sizeof(m->b));
	m->b[m->len++] = (uint8_t)v;
}

static void put16(struct msg *m, unsigned int v)
{
	put8(m, v >> 8);
	put8(m, v & 0xff);
}

static void put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void put_name(struct msg *m, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t n = dot ? (size_t)(dot - name) : strlen(name);

		put8(m, (unsigned int)n);
		ASSERT(m->len + n <= sizeof(m->b));
		memcpy(m->b + m->len, name, n);
		m->len += n;
		name += n;
		if (*name == '.')
			name++;
	}
	put8(m, 0);
}

static int parse_query(const uint8_t *b, size_t n, struct query *q)
{
	size_t off = 12, out = 0;

	memset(q, 0, sizeof(*q));
	if (n < 12 || (b[4] << 8 | b[5]) != 1)
		return -1;
	q->id = (uint16_t)(b[0] << 8 | b[1]);
	while (off < n && b[off]) {
		size_t l = b[off];

		if (l > 63 || off + 1 + l > n || out + l + 2 > sizeof(q->name))
			return -1;
		if (out)
			q->name[out++] = '.';
		memcpy(q->name + out, b + off + 1, l);
		out += l;
		off += 1 + l;
	}
	if (off + 5 > n)
		return -1;
	q->name[out] = '\0';
	q->qtype = (uint16_t)(b[off + 1] << 8 | b[off + 2]);
	q->question = b + 12;
	q->qlen = off + 5 - 12;
	return 0;
}

/* Header answering @q (same id, RD+RA, @rcode, TC if @tc) and its question. */
static void msg_start(struct msg *m, const struct query *q, unsigned int rcode,
		      bool tc)
{
	m->len = 0;
	put16(m, q->id);
	put16(m, 0x8000u | 0x0100u | 0x0080u | (tc ? 0x0200u : 0) | rcode);
	put16(m, 1);
	put16(m, 0);
	put16(m, 0);
	put16(m, 0);
	memcpy(m->b + m->len, q->question, q->qlen);
	m->len += q->qlen;
}

/* Appends an answer RR; @owner NULL points at the question name. TTL 0. */
static void msg_rr(struct msg *m, const char *owner, unsigned int type,
		   const void *rdata, size_t rdlen)
{
	unsigned int an = (unsigned int)(m->b[6] << 8 | m->b[7]) + 1;

	if (owner)
		put_name(m, owner);
	else
		put16(m, 0xc00c);
	put16(m, type);
	put16(m, 1);
	put32(m, 0);
	put16(m, (unsigned int)rdlen);
	ASSERT(m->len + rdlen <= sizeof(m->b));
	memcpy(m->b + m->len, rdata, rdlen);
	m->len += rdlen;
	m->b[6] = (uint8_t)(an >> 8);
	m->b[7] = (uint8_t)an;
}

static void msg_addr(struct msg *m, const char *owner, const char *ip)
{
	uint8_t a[16];

	if (inet_pton(AF_INET, ip, a) == 1)
		msg_rr(m, owner, T_A, a, 4);
	else if (inet_pton(AF_INET6, ip, a) == 1)
		msg_rr(m, owner, T_AAAA, a, 16);
	else
		ASSERT(!"bad test address");
}

static void msg_cname(struct msg *m, const char *owner, const char *target)
{
	struct msg t = { .len = 0 };

	put_name(&t, target);
	msg_rr(m, owner, T_CNAME, t.b, t.len);
}

/* ------------------------------------------------------------------ */
/* Fake DNS servers                                                   */
/* ------------------------------------------------------------------ */

struct fake;
typedef void (*behave_fn)(struct fake *f, const struct query *q, bool tcp);

#define MAX_SEEN 1024
#define MAX_HELD 8

struct fake {
	int idx;
	int udp, tcp, conn;
	uint16_t port;
	behave_fn behave;
	int step;                   /* per-case state */
	struct sockaddr_in from;    /* last UDP client */
	uint8_t tbuf[65536 + 2];    /* TCP input */
	size_t tlen;
	unsigned int nq, nq_tcp;    /* queries received */
	char seen[MAX_SEEN][272];   /* "TYPE name" of each query */
	struct msg held;            /* a response kept for later */
	bool have_held;
	struct msg heldq[MAX_HELD]; /* b_hold()'s */
	int nheld;
};

static struct fake fakes[3];

/* How many different queries ("TYPE name") @f was asked. */
static int distinct_seen(const struct fake *f)
{
	unsigned int i, j, n = f->nq < MAX_SEEN ? f->nq : MAX_SEEN;
	int d = 0;

	/* (cppcheck takes f->nq for the zero of the static fakes[]) */
	// cppcheck-suppress knownConditionTrueFalse
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && strcmp(f->seen[i], f->seen[j]) != 0; j++)
			;
		d += j == i;
	}
	return d;
}

static void fake_send(struct fake *f, const struct msg *m, bool tcp)
{
	if (tcp) {
		uint8_t len[2] = { (uint8_t)(m->len >> 8), (uint8_t)m->len };

		ASSERT(f->conn >= 0);
		ASSERT(write(f->conn, len, 2) == 2);
		ASSERT(write(f->conn, m->b, m->len) == (ssize_t)m->len);
		return;
	}
	ASSERT(f->from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	ASSERT(sendto(f->udp, m->b, m->len, 0, (struct sockaddr *)&f->from,
		      sizeof(f->from)) == (ssize_t)m->len);
}

static void fake_send_raw(struct fake *f, const void *b, size_t n)
{
	ASSERT(f->from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	ASSERT(sendto(f->udp, b, n, 0, (struct sockaddr *)&f->from,
		      sizeof(f->from)) == (ssize_t)n);
}

static void watch(int fd, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };

	ASSERT(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
}

static void fake_start(int idx, behave_fn behave)
{
	struct fake *f = &fakes[idx];
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int tries;

	memset(f, 0, sizeof(*f));
	f->idx = idx;
	f->behave = behave;
	f->conn = -1;
	for (tries = 0; tries < 20; tries++) {
		f->udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		f->tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		ASSERT(f->udp >= 0 && f->tcp >= 0);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ASSERT(bind(f->udp, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		ASSERT(getsockname(f->udp, (struct sockaddr *)&sa, &sl) == 0);
		if (bind(f->tcp, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    listen(f->tcp, 8) == 0)
			break;
		close(f->udp);
		close(f->tcp);
	}
	ASSERT(tries < 20);
	f->port = ntohs(sa.sin_port);
	watch(f->udp, TAG_FAKE | (uint32_t)(idx << 2) | FAKE_UDP);
	watch(f->tcp, TAG_FAKE | (uint32_t)(idx << 2) | FAKE_LISTEN);
}

static void fake_stop(int idx)
{
	struct fake *f = &fakes[idx];

	close(f->udp);
	close(f->tcp);
	if (f->conn >= 0)
		close(f->conn);
	f->udp = f->tcp = f->conn = -1;
}

static void fake_got(struct fake *f, const struct query *q, bool tcp)
{
	if (f->nq < MAX_SEEN)
		snprintf(f->seen[f->nq], sizeof(f->seen[0]), "%s %s",
			 q->qtype == T_A ? "A" : q->qtype == T_AAAA ? "AAAA" : "?",
			 q->name);
	f->nq++;
	if (tcp)
		f->nq_tcp++;
	f->behave(f, q, tcp);
}

static void fake_io(int idx, int kind)
{
	struct fake *f = &fakes[idx];
	struct query q;
	ssize_t n;

	if (kind == FAKE_UDP) {
		for (;;) {
			uint8_t buf[4096];
			socklen_t fl = sizeof(f->from);

			n = recvfrom(f->udp, buf, sizeof(buf), 0,
				     (struct sockaddr *)&f->from, &fl);
			if (n < 0)
				return;
			if (parse_query(buf, (size_t)n, &q) == 0)
				fake_got(f, &q, false);
		}
	}
	if (kind == FAKE_LISTEN) {
		int c = accept4(f->tcp, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (c < 0)
			return;
		if (f->conn >= 0) {
			epoll_ctl(epfd, EPOLL_CTL_DEL, f->conn, NULL);
			close(f->conn);
		}
		f->conn = c;
		f->tlen = 0;
		watch(c, TAG_FAKE | (uint32_t)(idx << 2) | FAKE_CONN);
		return;
	}
	n = read(f->conn, f->tbuf + f->tlen, sizeof(f->tbuf) - f->tlen);
	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		epoll_ctl(epfd, EPOLL_CTL_DEL, f->conn, NULL);
		close(f->conn);
		f->conn = -1;
		return;
	}
	f->tlen += (size_t)n;
	while (f->tlen >= 2) {
		size_t l = (size_t)(f->tbuf[0] << 8 | f->tbuf[1]);

		if (f->tlen < 2 + l)
			break;
		if (parse_query(f->tbuf + 2, l, &q) == 0)
			fake_got(f, &q, true);
		memmove(f->tbuf, f->tbuf + 2 + l, f->tlen - 2 - l);
		f->tlen -= 2 + l;
	}
}

/* A port on 127.0.0.1 where nothing listens: UDP to it draws an ICMP port
 * unreachable. */
static uint16_t dead_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ASSERT(getsockname(s, (struct sockaddr *)&sa, &sl) == 0);
	close(s);
	return ntohs(sa.sin_port);
}

static struct policy_endpoint ep(uint16_t port)
{
	struct policy_endpoint e;

	memset(&e, 0, sizeof(e));
	ASSERT(addr_parse("127.0.0.1", &e.addr));
	e.port = port;
	return e;
}

/* ------------------------------------------------------------------ */
/* Results and the loop                                               */
/* ------------------------------------------------------------------ */

struct result {
	int calls;
	int status;
	char error[80];
	char addrs[4096];          /* "a b c", addr_format() of each */
	size_t n;
	uint64_t cookie;
	uint64_t started, at;      /* ms */
	bool bad_shape;            /* status/addrs/n/error inconsistent */
};

static int total_calls, calls_in_resolve;
static bool in_resolve;

static void on_result(void *arg, uint64_t cookie, int status,
		      const struct addr *addrs, size_t n, const char *error)
{
	struct result *r = arg;
	size_t i, off = 0;

	total_calls++;
	if (in_resolve)
		calls_in_resolve++;
	r->calls++;
	r->status = status;
	r->cookie = cookie;
	r->n = n;
	r->at = now_ms();
	r->addrs[0] = '\0';
	snprintf(r->error, sizeof(r->error), "%s", error ? error : "(null)");
	if (status == DNS_OK)
		r->bad_shape = n == 0 || !addrs || error;
	else
		r->bad_shape = n != 0 || addrs || !error ||
			       strcmp(error, dns_status_to_string(status)) != 0;
	for (i = 0; i < n; i++) {
		char t[ADDR_STRLEN];

		if (addrs[i].family != AF_INET && addrs[i].family != AF_INET6) {
			r->bad_shape = true;
			continue;
		}
		addr_format(&addrs[i], t, sizeof(t));
		if (off + strlen(t) + 2 < sizeof(r->addrs))
			off += (size_t)snprintf(r->addrs + off,
						sizeof(r->addrs) - off, "%s%s",
						i ? " " : "", t);
	}
}

/* on_result(), then resolves "second.example" from inside the callback. */
static struct dns *chain_dns;
static struct result *chain_next;
static int chain_rc = -1;

static void on_chain(void *arg, uint64_t cookie, int status,
		     const struct addr *addrs, size_t n, const char *error)
{
	on_result(arg, cookie, status, addrs, n, error);
	chain_rc = dns_resolve(chain_dns, "second.example", on_result,
			       chain_next, 2);
}

static int start(struct dns *d, const char *name, struct result *r,
		 uint64_t cookie)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->started = now_ms();
	in_resolve = true;
	rc = dns_resolve(d, name, on_result, r, cookie);
	in_resolve = false;
	return rc;
}

/* Runs the loop until @want callbacks have happened in total (counted from
 * total_calls at entry) or @max_ms pass. Returns the callbacks seen. */
static int run(struct dns *d, int want, unsigned int max_ms)
{
	uint64_t end = now_ms() + max_ms;
	int base = total_calls, iterations = 0;

	while (total_calls - base < want && now_ms() < end &&
	       iterations++ < 100000) {
		struct epoll_event evs[64];
		int t = d ? dns_next_timeout_ms(d, 50) : 50, n, i;

		if (t < 0 || t > 50)
			t = 50;
		n = epoll_wait(epfd, evs, 64, t);
		for (i = 0; i < n; i++) {
			uint64_t u = evs[i].data.u64;
			uint32_t low = (uint32_t)u;

			if ((u >> 32) == (TAG_DNS >> 32))
				dns_handle(d, (int)low, evs[i].events);
			else if ((u >> 32) == (TAG_FAKE >> 32))
				fake_io((int)(low >> 2), (int)(low & 3));
		}
		if (d)
			dns_process_timeouts(d);
	}
	return total_calls - base;
}

static struct dns *new_dns(const uint16_t *ports, size_t n,
			   unsigned int timeout_ms)
{
	struct policy_endpoint eps[4];
	char err[256] = "";
	struct dns *d;
	size_t i;

	ASSERT(n <= 4);
	for (i = 0; i < n; i++)
		eps[i] = ep(ports[i]);
	d = dns_new(epfd, TAG_DNS, eps, n, timeout_ms, err, sizeof(err));
	if (!d)
		tap_diag("dns_new: %s", err);
	ASSERT(d);
	return d;
}

/* Resolves @name against fake server 0 with @behave; fills @r. */
static void resolve_with(behave_fn behave, const char *name,
			 unsigned int timeout_ms, struct result *r)
{
	struct dns *d;

	fake_start(0, behave);
	d = new_dns(&fakes[0].port, 1, timeout_ms);
	ASSERT(start(d, name, r, 42) == 0);
	run(d, 1, timeout_ms + 2000);
	dns_free(d);
	fake_stop(0);
}

/* ------------------------------------------------------------------ */
/* Server behaviours                                                  */
/* ------------------------------------------------------------------ */

static void b_a_only(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A)
		msg_addr(&m, NULL, "93.184.216.34");
	fake_send(f, &m, tcp);
}

static void b_aaaa_only(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_AAAA)
		msg_addr(&m, NULL, "2001:db8::1");
	fake_send(f, &m, tcp);
}

/* Both families, two each; the AAAA answer is sent before the A answer. */
static void b_both_reversed(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A) {
		msg_addr(&m, NULL, "192.0.2.1");
		msg_addr(&m, NULL, "192.0.2.2");
		f->held = m;
		f->have_held = true;
		return;
	}
	msg_addr(&m, NULL, "2001:db8::1");
	msg_addr(&m, NULL, "2001:db8::2");
	fake_send(f, &m, tcp);
	if (f->have_held) {
		fake_send(f, &f->held, tcp);
		f->have_held = false;
	}
}

static void b_cname(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	msg_cname(&m, NULL, "edge.cdn.example");
	msg_cname(&m, "edge.cdn.example", "pop7.cdn.example");
	if (q->qtype == T_A) {
		msg_addr(&m, "pop7.cdn.example", "198.51.100.7");
		msg_addr(&m, "pop7.cdn.example", "198.51.100.8");
	} else {
		msg_addr(&m, "pop7.cdn.example", "2001:db8:7::1");
	}
	fake_send(f, &m, tcp);
}

static void b_many_a(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A)
		for (int i = 0; i < 10; i++) {
			char ip[32];

			snprintf(ip, sizeof(ip), "203.0.113.%d", 200 - i * 7);
			msg_addr(&m, NULL, ip);
		}
	fake_send(f, &m, tcp);
}

static void b_rcode(struct fake *f, const struct query *q, bool tcp,
		    unsigned int rcode)
{
	struct msg m;

	msg_start(&m, q, rcode, false);
	fake_send(f, &m, tcp);
}

static void b_nxdomain(struct fake *f, const struct query *q, bool tcp)
{
	b_rcode(f, q, tcp, 3);
}

static void b_servfail(struct fake *f, const struct query *q, bool tcp)
{
	b_rcode(f, q, tcp, 2);
}

static void b_refused(struct fake *f, const struct query *q, bool tcp)
{
	b_rcode(f, q, tcp, 5);
}

static void b_nodata(struct fake *f, const struct query *q, bool tcp)
{
	b_rcode(f, q, tcp, 0);
}

static void b_silent(struct fake *f, const struct query *q, bool tcp)
{
	(void)f;
	(void)q;
	(void)tcp;
}

/* A answers, AAAA is never answered. */
static void b_drop_aaaa(struct fake *f, const struct query *q, bool tcp)
{
	if (q->qtype == T_A)
		b_a_only(f, q, tcp);
}

/* Junk that is not a DNS message, then the real answer. */
static void b_garbage_then_answer(struct fake *f, const struct query *q,
				  bool tcp)
{
	static const uint8_t junk[] = { 0xde, 0xad, 0xbe, 0xef, 0x00 };
	uint8_t hdr_only[12];

	fake_send_raw(f, junk, sizeof(junk));
	/* a bare header with the right id and no question */
	memset(hdr_only, 0, sizeof(hdr_only));
	hdr_only[0] = (uint8_t)(q->id >> 8);
	hdr_only[1] = (uint8_t)q->id;
	hdr_only[2] = 0x81;
	hdr_only[3] = 0x80;
	fake_send_raw(f, hdr_only, sizeof(hdr_only));
	fake_send_raw(f, hdr_only, 0);
	b_a_only(f, q, tcp);
}

/* Right id and question, ANCOUNT 1, the answer cut off mid-record. */
static void b_truncated_rr(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	msg_addr(&m, NULL, "192.0.2.99");
	m.len -= 7;
	fake_send(f, &m, tcp);
}

/* First a response with another id (A 6.6.6.6), then the real one. */
static void b_wrong_id_first(struct fake *f, const struct query *q, bool tcp)
{
	struct query other = *q;
	struct msg m;

	other.id = (uint16_t)(q->id ^ 0x5a5a);
	msg_start(&m, &other, 0, false);
	msg_addr(&m, NULL, q->qtype == T_A ? "6.6.6.6" : "2001:db8::666");
	fake_send(f, &m, tcp);
	b_a_only(f, q, tcp);
}

/* Only a wrong-id response: nothing usable ever arrives. */
static void b_wrong_id_only(struct fake *f, const struct query *q, bool tcp)
{
	struct query other = *q;
	struct msg m;

	other.id = (uint16_t)(q->id + 1);
	msg_start(&m, &other, 0, false);
	msg_addr(&m, NULL, "6.6.6.6");
	fake_send(f, &m, tcp);
}

/* A different A answer for every A query (TTL 0): a rebinding server. */
static void b_rebind(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A)
		msg_addr(&m, NULL, f->step++ == 0 ? "198.51.100.1" : "127.0.0.1");
	fake_send(f, &m, tcp);
}

static void b_localhost(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A)
		msg_addr(&m, NULL, "203.0.113.9");
	fake_send(f, &m, tcp);
}

/* Over UDP: truncated (TC, no answer) for A; over TCP: 60 A records. */
static void b_tc(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	if (q->qtype == T_AAAA) {
		b_nodata(f, q, tcp);
		return;
	}
	msg_start(&m, q, 0, !tcp);
	if (tcp)
		for (int i = 0; i < 60; i++) {
			char ip[32];

			snprintf(ip, sizeof(ip), "198.18.%d.%d", i / 10, i);
			msg_addr(&m, NULL, ip);
		}
	fake_send(f, &m, tcp);
}

/* "hN.example" -> A 10.0.N/256.N%256, AAAA none. */
static void b_numbered(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;
	unsigned long i = strtoul(q->name + 1, NULL, 10);

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A) {
		char ip[32];

		snprintf(ip, sizeof(ip), "10.0.%lu.%lu", i / 256, i % 256);
		msg_addr(&m, NULL, ip);
	}
	fake_send(f, &m, tcp);
}

/* RCODE g_rc_a for A, g_rc_aaaa for AAAA, without answers; -1: silent. */
static int g_rc_a, g_rc_aaaa;

static void b_rcodes(struct fake *f, const struct query *q, bool tcp)
{
	int rc = q->qtype == T_A ? g_rc_a : g_rc_aaaa;

	if (rc >= 0)
		b_rcode(f, q, tcp, (unsigned int)rc);
}

/* Keeps its answers (A 192.0.2.50) until fake_flush(). */
static void b_hold(struct fake *f, const struct query *q, bool tcp)
{
	struct msg *m;

	(void)tcp;
	if (f->nheld == MAX_HELD)
		return;
	m = &f->heldq[f->nheld++];
	msg_start(m, q, 0, false);
	if (q->qtype == T_A)
		msg_addr(m, NULL, "192.0.2.50");
}

static void fake_flush(int idx)
{
	struct fake *f = &fakes[idx];
	int i;

	for (i = 0; i < f->nheld; i++)
		fake_send(f, &f->heldq[i], false);
	f->nheld = 0;
}

/* Server 0 and 1 of the dns_set_servers test: each names itself. */
static void b_whoami(struct fake *f, const struct query *q, bool tcp)
{
	struct msg m;

	msg_start(&m, q, 0, false);
	if (q->qtype == T_A)
		msg_addr(&m, NULL, f->idx == 0 ? "192.0.2.10" : "192.0.2.11");
	fake_send(f, &m, tcp);
}

/* ------------------------------------------------------------------ */
/* Cases                                                              */
/* ------------------------------------------------------------------ */

static void test_answers(void)
{
	struct result r;

	resolve_with(b_a_only, "a-only.example", 3000, &r);
	tap_is_int(r.calls, 1, "A only: one callback");
	tap_is_int(r.status, DNS_OK, "A only: ok");
	tap_is_str(r.addrs, "93.184.216.34", "A only: the A address");
	tap_ok(!r.bad_shape && r.cookie == 42, "A only: n, addrs, error, cookie consistent");

	resolve_with(b_aaaa_only, "aaaa-only.example", 3000, &r);
	tap_is_int(r.status, DNS_OK, "AAAA only: ok");
	tap_is_str(r.addrs, "2001:db8::1", "AAAA only: the AAAA address");

	resolve_with(b_both_reversed, "both.example", 3000, &r);
	tap_is_int(r.status, DNS_OK, "A and AAAA: ok");
	tap_is_str(r.addrs, "192.0.2.1 192.0.2.2 2001:db8::1 2001:db8::2",
		   "A and AAAA: every address, A first although AAAA came first");
	tap_is_int(r.n, 4, "A and AAAA: n == 4");

	resolve_with(b_cname, "www.example", 3000, &r);
	tap_is_int(r.status, DNS_OK, "CNAME chain: ok");
	tap_is_str(r.addrs, "198.51.100.7 198.51.100.8 2001:db8:7::1",
		   "CNAME chain: the addresses at the end of the chain");

	resolve_with(b_many_a, "many.example", 3000, &r);
	tap_is_str(r.addrs,
		   "203.0.113.200 203.0.113.193 203.0.113.186 203.0.113.179 "
		   "203.0.113.172 203.0.113.165 203.0.113.158 203.0.113.151 "
		   "203.0.113.144 203.0.113.137",
		   "ten A records: all returned, in answer order");
	tap_ok(!r.bad_shape, "ten A records: shape consistent");
}

static void test_failures(void)
{
	struct result r;
	uint64_t took;

	resolve_with(b_nxdomain, "nope.example", 3000, &r);
	tap_is_int(r.status, DNS_NXDOMAIN, "NXDOMAIN: status");
	tap_is_str(r.error, "NXDOMAIN", "NXDOMAIN: error text");
	tap_ok(r.n == 0 && !r.bad_shape, "NXDOMAIN: no address, shape consistent");

	resolve_with(b_servfail, "broken.example", 3000, &r);
	tap_is_int(r.status, DNS_SERVFAIL, "SERVFAIL: status");
	tap_is_str(r.error, "server failure (SERVFAIL, REFUSED or unreachable)",
		   "SERVFAIL: error text");
	tap_ok(fakes[0].nq >= 4, "SERVFAIL: the server was tried again (%u queries)",
	       fakes[0].nq);

	resolve_with(b_nodata, "empty.example", 3000, &r);
	tap_is_int(r.status, DNS_NODATA, "NOERROR without data: status");
	tap_is_str(r.error, "no A or AAAA record", "NOERROR without data: error text");

	resolve_with(b_garbage_then_answer, "junk.example", 3000, &r);
	tap_is_int(r.status, DNS_OK, "junk, empty and question-less packets are ignored");
	tap_is_str(r.addrs, "93.184.216.34", "junk: the real answer that follows is used");

	resolve_with(b_truncated_rr, "cut.example", 3000, &r);
	tap_is_int(r.status, DNS_BADRESP, "answer cut mid-record: malformed response");
	tap_ok(!r.bad_shape && r.n == 0, "answer cut mid-record: no address");

	resolve_with(b_silent, "silent.example", 400, &r);
	took = r.at - r.started;
	tap_is_int(r.status, DNS_TIMEOUT, "silent server: timeout");
	tap_is_str(r.error, "timeout", "silent server: error text");
	tap_ok(r.calls == 1 && took >= 350 && took <= 400 + 1000,
	       "silent server: reported after %llu ms (timeout 400)",
	       (unsigned long long)took);

	resolve_with(b_drop_aaaa, "v4.example", 400, &r);
	took = r.at - r.started;
	tap_is_int(r.status, DNS_OK, "AAAA never answered: the A answer is returned");
	tap_is_str(r.addrs, "93.184.216.34", "AAAA never answered: A address");
	tap_ok(took >= 350 && took <= 400 + 1000,
	       "AAAA never answered: waited for it until the deadline (%llu ms)",
	       (unsigned long long)took);

	resolve_with(b_wrong_id_first, "id.example", 3000, &r);
	tap_is_str(r.addrs, "93.184.216.34",
		   "a response with another id is ignored (6.6.6.6 not returned)");

	resolve_with(b_wrong_id_only, "id2.example", 400, &r);
	tap_is_int(r.status, DNS_TIMEOUT, "only wrong-id responses: timeout");
}

/* How the two statuses combine when neither query gave an address. */
static void test_combined(void)
{
	static const struct {
		int a, aaaa;
		enum dns_status want;
	} cases[] = {
		{ 0, 3, DNS_NXDOMAIN },  /* NODATA + NXDOMAIN */
		{ 3, 0, DNS_NXDOMAIN },
		{ 2, 0, DNS_SERVFAIL },  /* SERVFAIL + NODATA */
		{ 0, 5, DNS_SERVFAIL },  /* NODATA + REFUSED */
		{ 3, 2, DNS_NXDOMAIN },  /* NXDOMAIN + SERVFAIL */
		{ 4, 0, DNS_SERVFAIL },  /* NOTIMP + NODATA */
		{ 1, 1, DNS_FORMERR },
		{ 0, -1, DNS_TIMEOUT },  /* NODATA + no answer */
		{ 2, 1, DNS_SERVFAIL },  /* the A query's when both differ */
	};
	struct result r;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		g_rc_a = cases[i].a;
		g_rc_aaaa = cases[i].aaaa;
		resolve_with(b_rcodes, "mixed.example", 300, &r);
		tap_ok(r.calls == 1 && r.status == (int)cases[i].want && !r.bad_shape,
		       "RCODE %d for A, %d for AAAA: %s (got %s)", cases[i].a,
		       cases[i].aaaa, dns_status_to_string(cases[i].want), r.error);
	}
}

/* Answers that arrive after the deadline, and resolves that expire while
 * they wait for room among the queries in flight. */
static void test_late(void)
{
	static struct result rs[100];
	struct result r;
	struct dns *d;
	int i, timeouts = 0, once = 0;
	uint64_t worst = 0;

	/* timeout 20 ms: c-ares' own schedule (10 ms per try at least) runs
	 * past the deadline, so its queries outlive the resolve */
	fake_start(0, b_hold);
	d = new_dns(&fakes[0].port, 1, 20);
	ASSERT(start(d, "late.example", &r, 9) == 0);
	run(d, 1, 2000);
	tap_ok(r.calls == 1 && r.status == DNS_TIMEOUT,
	       "answer held past the deadline: timeout (%s)", r.error);
	fake_flush(0);
	run(d, 1, 200);
	tap_is_int(r.calls, 1, "a late answer does not call back again");
	tap_is_int(dns_pending(d), 0, "nothing pending after a late answer");
	dns_free(d);
	fake_stop(0);

	/* 100 resolves = 200 queries > DNS_MAX_QUERIES, silent server, a
	 * deadline nothing reaches here: the queries in flight are the
	 * distinct ones the server saw (a retry asks the same again) */
	fake_start(0, b_silent);
	d = new_dns(&fakes[0].port, 1, 60000);
	total_calls = 0;
	for (i = 0; i < 100; i++) {
		char name[32];

		snprintf(name, sizeof(name), "q%d.example", i);
		ASSERT(start(d, name, &rs[i], (uint64_t)i) == 0);
	}
	for (i = 0; i < 100 && distinct_seen(&fakes[0]) < DNS_MAX_QUERIES; i++)
		run(d, 1000, 20);
	run(d, 1000, 50); /* room for one more, had there been any */
	tap_is_int(distinct_seen(&fakes[0]), DNS_MAX_QUERIES,
		   "at most DNS_MAX_QUERIES queries in flight, the rest queued");
	dns_free(d);
	fake_stop(0);

	/* the same with a 300 ms deadline: the queued resolves expire with
	 * the others, not 300 ms after they got room (a deadline of their
	 * own would start when the first ones expire) */
	fake_start(0, b_silent);
	d = new_dns(&fakes[0].port, 1, 300);
	total_calls = 0;
	for (i = 0; i < 100; i++) {
		char name[32];

		snprintf(name, sizeof(name), "q%d.example", i);
		ASSERT(start(d, name, &rs[i], (uint64_t)i) == 0);
	}
	run(d, 100, 30000);
	for (i = 0; i < 100; i++) {
		if (rs[i].calls == 1)
			once++;
		if (rs[i].status == DNS_TIMEOUT)
			timeouts++;
		/* resolves 0..63 are in flight at once (two queries each) */
		if (i >= DNS_MAX_QUERIES / 2 && rs[i].at > rs[0].at &&
		    rs[i].at - rs[0].at > worst)
			worst = rs[i].at - rs[0].at;
	}
	tap_ok(once == 100 && timeouts == 100,
	       "queued resolves expire too: %d callbacks, %d timeouts", once,
	       timeouts);
	tap_ok(worst < 250, "queued resolves keep their deadline: they expire "
	       "with the first (%llu ms after it)", (unsigned long long)worst);
	dns_free(d);
	fake_stop(0);
}

static void test_servers(void)
{
	struct result r;
	struct dns *d;
	uint16_t ports[2];
	uint64_t took;

	/* the first server's port is closed: ICMP port unreachable */
	fake_start(0, b_a_only);
	ports[0] = dead_port();
	ports[1] = fakes[0].port;
	d = new_dns(ports, 2, 30000); /* a try times out after 5 s */
	ASSERT(start(d, "two.example", &r, 1) == 0);
	run(d, 1, 5000);
	took = r.at - r.started;
	tap_is_str(r.addrs, "93.184.216.34",
		   "first server unreachable (ICMP): the second answers");
	tap_ok(took < 2500, "first server unreachable: no timeout waited (%llu ms)",
	       (unsigned long long)took);
	dns_free(d);
	fake_stop(0);

	/* the first server answers REFUSED */
	fake_start(0, b_refused);
	fake_start(1, b_a_only);
	ports[0] = fakes[0].port;
	ports[1] = fakes[1].port;
	d = new_dns(ports, 2, 3000);
	ASSERT(start(d, "refused.example", &r, 1) == 0);
	run(d, 1, 5000);
	tap_is_str(r.addrs, "93.184.216.34",
		   "first server REFUSED: the second answers");
	tap_ok(fakes[0].nq >= 1 && fakes[1].nq >= 1,
	       "first server REFUSED: both were asked, in order");
	dns_free(d);
	fake_stop(0);
	fake_stop(1);

	/* every server unreachable */
	ports[0] = dead_port();
	d = new_dns(ports, 1, 3000);
	ASSERT(start(d, "dead.example", &r, 1) == 0);
	run(d, 1, 5000);
	tap_is_int(r.status, DNS_SERVFAIL,
		   "only server unreachable: server failure (%s)", r.error);
	dns_free(d);

	/* truncated over UDP: asked again over TCP, every record kept */
	resolve_with(b_tc, "big.example", 3000, &r);
	tap_is_int(r.n, 60, "TC over UDP: retried over TCP, all 60 A records");
	tap_ok(strncmp(r.addrs, "198.18.0.0 198.18.0.1 198.18.0.2", 32) == 0 &&
	       strstr(r.addrs, "198.18.5.59") != NULL,
	       "TC over UDP: in answer order");
	tap_ok(fakes[0].nq_tcp >= 1, "TC over UDP: a TCP query was made");
}

static void test_no_cache_no_search_no_hosts(void)
{
	struct result r1, r2;
	struct dns *d;
	unsigned int i;
	bool only_foo = true;

	/* rebinding: two resolves, two questions, two different answers */
	fake_start(0, b_rebind);
	d = new_dns(&fakes[0].port, 1, 3000);
	ASSERT(start(d, "rebind.example", &r1, 1) == 0);
	run(d, 1, 4000);
	ASSERT(start(d, "rebind.example", &r2, 2) == 0);
	run(d, 1, 4000);
	tap_is_str(r1.addrs, "198.51.100.1", "rebinding: first answer");
	tap_is_str(r2.addrs, "127.0.0.1",
		   "rebinding: second resolve asks again (no cache)");
	tap_is_int(fakes[0].nq, 4, "rebinding: the server saw A+AAAA twice");
	dns_free(d);
	fake_stop(0);

	/* a search list and ndots from the environment are not applied */
	setenv("LOCALDOMAIN", "corp.example", 1);
	setenv("RES_OPTIONS", "ndots:5 attempts:5 timeout:30 rotate", 1);
	fake_start(0, b_a_only);
	d = new_dns(&fakes[0].port, 1, 3000);
	ASSERT(start(d, "foo", &r1, 1) == 0);
	run(d, 1, 4000);
	for (i = 0; i < fakes[0].nq && i < MAX_SEEN; i++)
		if (strcmp(fakes[0].seen[i], "A foo") != 0 &&
		    strcmp(fakes[0].seen[i], "AAAA foo") != 0) {
			tap_diag("asked: %s", fakes[0].seen[i]);
			only_foo = false;
		}
	tap_is_int(fakes[0].nq, 2, "single label: exactly two questions");
	tap_ok(only_foo && fakes[0].nq == 2 &&
	       strcmp(fakes[0].seen[0], "A foo") == 0 &&
	       strcmp(fakes[0].seen[1], "AAAA foo") == 0,
	       "single label: asked as \"foo\" (no search suffix)");
	tap_is_str(r1.addrs, "93.184.216.34", "single label: answered");
	dns_free(d);
	fake_stop(0);

	/* ... and RES_OPTIONS timeout:30 attempts:5 does not stretch ours */
	fake_start(0, b_silent);
	d = new_dns(&fakes[0].port, 1, 300);
	ASSERT(start(d, "x.example", &r1, 1) == 0);
	run(d, 1, 3000);
	tap_ok(r1.status == DNS_TIMEOUT && r1.at - r1.started <= 300 + 250,
	       "RES_OPTIONS does not change the timeout (%llu ms)",
	       (unsigned long long)(r1.at - r1.started));
	dns_free(d);
	fake_stop(0);
	unsetenv("LOCALDOMAIN");
	unsetenv("RES_OPTIONS");

	/* /etc/hosts is not consulted */
	resolve_with(b_localhost, "localhost", 3000, &r1);
	tap_is_str(r1.addrs, "203.0.113.9",
		   "localhost: the DNS answer, never /etc/hosts' 127.0.0.1");
	tap_is_int(fakes[0].nq, 2, "localhost: the server was asked");
}

#define MANY 1000

static void test_concurrency(void)
{
	static struct result rs[MANY];
	struct dns *d;
	int i, good = 0, once = 0, got;
	char name[64];

	fake_start(0, b_numbered);
	d = new_dns(&fakes[0].port, 1, 5000);
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "h%d.example", i);
		ASSERT(start(d, name, &rs[i], (uint64_t)i << 20) == 0);
	}
	tap_is_int(dns_pending(d), MANY, "%d resolves pending", MANY);
	got = run(d, MANY, 8000);
	tap_is_int(got, MANY, "%d concurrent resolves: every callback", MANY);
	for (i = 0; i < MANY; i++) {
		char want[32];

		snprintf(want, sizeof(want), "10.0.%d.%d", i / 256, i % 256);
		if (rs[i].calls == 1)
			once++;
		if (rs[i].status == DNS_OK && strcmp(rs[i].addrs, want) == 0 &&
		    rs[i].cookie == (uint64_t)i << 20)
			good++;
		else if (i - good < 5)
			tap_diag("h%d: status %d '%s' addrs '%s' after %llu ms", i,
				 rs[i].status, rs[i].error, rs[i].addrs,
				 (unsigned long long)(rs[i].at - rs[i].started));
	}
	tap_is_int(once, MANY, "concurrent: each callback exactly once");
	tap_is_int(good, MANY, "concurrent: each got its own answer and cookie");
	tap_is_int(dns_pending(d), 0, "concurrent: nothing pending after");
	dns_free(d);
	fake_stop(0);
}

static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ASSERT(dir);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n - 1; /* the DIR's own */
}

/* Every socket that is not one of the test's: CLOEXEC and non-blocking? */
static int check_foreign_sockets(int *nsock)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int bad = 0, k;

	ASSERT(dir);
	*nsock = 0;
	while ((e = readdir(dir))) {
		int fd = atoi(e->d_name);
		struct stat st;
		bool ours = fd == dirfd(dir) || fd == epfd;

		if (e->d_name[0] == '.' || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		for (k = 0; k < 3; k++)
			if (fd == fakes[k].udp || fd == fakes[k].tcp ||
			    fd == fakes[k].conn)
				ours = true;
		if (ours)
			continue;
		(*nsock)++;
		if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC) ||
		    !(fcntl(fd, F_GETFL) & O_NONBLOCK))
			bad++;
	}
	closedir(dir);
	return bad;
}

static void test_lifecycle(void)
{
	static struct result r[80];
	struct result chained;
	struct dns *d;
	char err[256];
	struct policy_endpoint bad;
	int before, i, nsock = 0, bad_socks;
	uint16_t ports[2];

	/* invalid names: refused at once, no callback */
	fake_start(0, b_a_only);
	d = new_dns(&fakes[0].port, 1, 3000);
	tap_is_int(start(d, "Upper.example", &r[0], 0), -EINVAL, "uppercase name refused");
	tap_is_int(start(d, "dot.example.", &r[0], 0), -EINVAL, "trailing dot refused");
	tap_is_int(start(d, "192.0.2.1", &r[0], 0), -EINVAL, "IP literal refused");
	tap_is_int(start(d, "", &r[0], 0), -EINVAL, "empty name refused");
	tap_is_int(start(d, "a..b", &r[0], 0), -EINVAL, "empty label refused");
	tap_is_int(start(d, "a\\.b", &r[0], 0), -EINVAL, "backslash refused");
	tap_is_int(dns_pending(d), 0, "refused names leave nothing pending");
	tap_is_int(dns_next_timeout_ms(d, 1234), 1234, "idle: next timeout is the caller's");
	tap_is_int(dns_next_timeout_ms(d, -1), -1, "idle: no timeout at all");

	/* the sockets c-ares opens */
	ASSERT(start(d, "sock.example", &r[0], 0) == 0);
	bad_socks = check_foreign_sockets(&nsock);
	tap_ok(nsock >= 1 && bad_socks == 0,
	       "resolver sockets are CLOEXEC and non-blocking (%d sockets, %d bad)",
	       nsock, bad_socks);
	run(d, 1, 4000);

	/* a callback may start another resolve */
	chain_dns = d;
	chain_next = &chained;
	memset(&chained, 0, sizeof(chained));
	memset(&r[1], 0, sizeof(r[1]));
	ASSERT(dns_resolve(d, "first.example", on_chain, &r[1], 1) == 0);
	run(d, 2, 4000);
	tap_ok(r[1].calls == 1 && chain_rc == 0 && chained.calls == 1 &&
	       chained.status == DNS_OK && chained.cookie == 2,
	       "a callback can start another resolve");
	dns_free(d);
	fake_stop(0);

	/* dns_free with queries in flight: no callback, every socket closed */
	before = count_fds();
	fake_start(0, b_silent);
	d = new_dns(&fakes[0].port, 1, 5000);
	total_calls = 0;
	for (i = 0; i < 80; i++) {
		char name[32];

		snprintf(name, sizeof(name), "pending%d.example", i);
		ASSERT(start(d, name, &r[i], (uint64_t)i) == 0);
	}
	run(d, 0, 50);
	tap_is_int(dns_pending(d), 80,
		   "80 resolves pending (some queued) before dns_free");
	dns_free(d);
	tap_is_int(total_calls, 0, "dns_free: pending callbacks are not called");
	fake_stop(0);
	tap_is_int(count_fds(), before, "dns_free: every resolver socket closed");
	dns_free(NULL);

	/* a synchronous c-ares failure (no socket can be opened) is still
	 * delivered later, never from inside dns_resolve() */
	{
		struct rlimit old, lim;
		int fds[4096], nfd = 0;
		struct dns *d2;

		ports[0] = dead_port();
		d = new_dns(ports, 1, 3000);
		d2 = new_dns(ports, 1, 3000);
		ASSERT(getrlimit(RLIMIT_NOFILE, &old) == 0);
		lim = old;
		lim.rlim_cur = 256;
		ASSERT(setrlimit(RLIMIT_NOFILE, &lim) == 0);
		while (nfd < 4096 && (fds[nfd] = dup(epfd)) >= 0)
			nfd++;
		calls_in_resolve = 0;
		ASSERT(start(d, "nofd.example", &r[0], 7) == 0);
		total_calls = 0;
		ASSERT(start(d2, "nofd.example", &r[1], 8) == 0);
		dns_free(d2);
		tap_is_int(total_calls, 0,
			   "dns_free: a completed resolve not yet delivered is not called back");
		tap_is_int(r[0].calls, 0, "EMFILE: no callback from inside dns_resolve()");
		tap_is_int(dns_next_timeout_ms(d, 1000), 0,
			   "EMFILE: the completed resolve makes the next timeout 0");
		while (nfd > 0)
			close(fds[--nfd]);
		ASSERT(setrlimit(RLIMIT_NOFILE, &old) == 0);
		dns_process_timeouts(d);
		tap_ok(r[0].calls == 1 && r[0].status != DNS_OK && !r[0].bad_shape,
		       "EMFILE: delivered by dns_process_timeouts() (%s)", r[0].error);
		dns_free(d);
	}
	tap_is_int(calls_in_resolve, 0, "no callback ever ran inside dns_resolve()");

	/* policy reload: new resolves use the new servers, the old finish */
	fake_start(0, b_whoami);
	fake_start(1, b_whoami);
	d = new_dns(&fakes[0].port, 1, 3000);
	ASSERT(start(d, "reload.example", &r[0], 0) == 0);
	ports[1] = fakes[1].port;
	{
		struct policy_endpoint e = ep(ports[1]);

		tap_is_int(dns_set_servers(d, &e, 1, err, sizeof(err)), 0,
			   "dns_set_servers with a query in flight");
	}
	ASSERT(start(d, "reload.example", &r[1], 1) == 0);
	run(d, 2, 4000);
	tap_is_str(r[0].addrs, "192.0.2.10", "reload: the resolve in flight finished on the old server");
	tap_is_str(r[1].addrs, "192.0.2.11", "reload: the new resolve went to the new server");
	bad = ep(0);
	tap_is_int(dns_set_servers(d, &bad, 1, err, sizeof(err)), -1,
		   "dns_set_servers refuses port 0");
	tap_ok(err[0] != '\0', "dns_set_servers says why (%s)", err);
	ASSERT(start(d, "again.example", &r[2], 2) == 0);
	run(d, 1, 4000);
	tap_is_str(r[2].addrs, "192.0.2.11", "a refused reload keeps the servers");
	dns_free(d);
	fake_stop(0);
	fake_stop(1);

	/* DNS_MAX_LIVE */
	fake_start(0, b_silent);
	d = new_dns(&fakes[0].port, 1, 3000);
	for (i = 0; i < DNS_MAX_LIVE; i++)
		if (dns_resolve(d, "busy.example", on_result, &r[0], 0) != 0)
			break;
	tap_is_int(i, DNS_MAX_LIVE, "DNS_MAX_LIVE resolves accepted");
	tap_is_int(dns_resolve(d, "busy.example", on_result, &r[0], 0), -EAGAIN,
		   "one more: -EAGAIN");
	total_calls = 0;
	dns_free(d);
	tap_is_int(total_calls, 0, "dns_free of DNS_MAX_LIVE resolves: no callback");
	fake_stop(0);

	/* an IPv6 server (::1, nothing listening) */
	{
		struct policy_endpoint e6;

		memset(&e6, 0, sizeof(e6));
		ASSERT(addr_parse("::1", &e6.addr));
		e6.port = dead_port();
		d = dns_new(epfd, TAG_DNS, &e6, 1, 1000, err, sizeof(err));
		tap_ok(d != NULL, "dns_new with an IPv6 server");
		if (d) {
			ASSERT(start(d, "v6.example", &r[0], 1) == 0);
			run(d, 1, 3000);
			tap_ok(r[0].calls == 1 && r[0].status != DNS_OK,
			       "IPv6 server unreachable: %s", r[0].error);
			dns_free(d);
		}
	}

	/* no servers: the host's resolv.conf (nothing is sent) */
	err[0] = '\0';
	d = dns_new(epfd, TAG_DNS, NULL, 0, 0, err, sizeof(err));
	tap_ok(d != NULL, "dns_new with no servers reads resolv.conf (%s)", err);
	dns_free(d);
}

int main(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	ASSERT(epfd >= 0);
	test_answers();
	test_failures();
	test_combined();
	test_late();
	test_servers();
	test_no_cache_no_search_no_hosts();
	test_concurrency();
	test_lifecycle();
	close(epfd);
	return tap_done();
}
