/* SPDX-License-Identifier: Apache-2.0
 * proxy.c - the egress proxy's event loop and connection state machine.
 *
 * DOC: Theory of Operation
 *
 * One thread, one epoll set, non-blocking sockets. Every epoll entry
 * carries a tag in the high 32 bits of data.u64 and an index in the low 32
 * (passt's habit); one switch dispatches. A connection walks:
 *
 *   HEAD -> RESOLVE -> (CONNECT: FIRST_FLIGHT ->) CONNECTING
 *        -> TUNNEL                     (CONNECT: splice both ways)
 *        -> REQ_BODY -> RESP_HEAD -> RESP_BODY -> HEAD again (keep-alive)
 *   any state -> CLOSING (an error answer being flushed) -> closed
 *
 * - HEAD: the request head is read into a buffer and parsed by http.c,
 *   strictly; anything malformed is answered 400 and recorded.
 * - The decision (egress.c) runs on the normalised target before any DNS;
 *   the resolver (dns.c, c-ares on the same epoll set) returns every
 *   answer; each is checked; the connection goes to one checked address
 *   and is never resolved again.
 * - CONNECT: after the checks the client gets "200", and its first flight
 *   is read and parsed (clienthello.c) before the upstream connection is
 *   opened; the same bytes are then written upstream unchanged. Then the
 *   bytes are relayed with splice() through a pipe per direction: they
 *   never enter user space.
 * - Plain http: the request is rewritten to origin-form (hop-by-hop
 *   headers dropped, Host forced to the target, framing rewritten from the
 *   parsed values so proxy and upstream cannot disagree about it), the body
 *   is relayed with the framing the parser validated, and the response
 *   head is parsed strictly before it is relayed.
 *
 * A peer can only ever close its own connection: every error path ends in
 * conn_close(). Deadlines (head, first flight, connect, idle) are checked
 * once a second. When accept() runs out of descriptors, accepting pauses
 * for 100 ms instead of spinning. Buffers exist only while a connection
 * parses; an idle tunnel holds its struct and its two sockets.
 */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clienthello.h"
#include "dns.h"
#include "egress.h"
#include "hostname.h"
#include "http.h"
#include "util.h"

enum tag { TAG_LISTEN = 1, TAG_SIGNAL, TAG_CLIENT, TAG_UPSTREAM, TAG_DNS };

enum state {
	S_HEAD,
	S_RESOLVE,
	S_FIRST_FLIGHT,
	S_CONNECTING,
	S_TUNNEL,
	S_REQ_BODY,
	S_RESP_HEAD,
	S_RESP_BODY,
	S_CLOSING,
};

#define HEAD_MAX (8192 + 32768 + 16)
#define RELAY_CHUNK 16384
#define BUF_HIGH ((size_t)64 * 1024) /* stop reading while this much is queued */
#define SPLICE_MAX (1 << 20)   /* bytes moved by one splice() call */
#define PIPE_SIZE (1 << 20)    /* asked of each pipe (F_SETPIPE_SZ) */
#define PIPE_POOL 64           /* empty pipes kept for reuse */

struct buf {
	char *data;
	size_t len, cap;
};

struct half {        /* one direction of a tunnel */
	int pipe[2];     /* borrowed from the pool while bytes are in flight */
	size_t pending;  /* bytes in the pipe */
	bool eof;        /* source finished */
	bool shut;       /* destination shut down for writing */
};

struct conn {
	uint32_t index;
	uint32_t gen;
	enum state state;
	int cfd, ufd;
	uint32_t cev, uev;          /* registered epoll interest */
	uint64_t deadline;          /* ms, CLOCK_MONOTONIC; 0: none */
	struct buf cin, cout, uin, uout;
	/* the request being served */
	bool is_connect;
	bool head_only;             /* HEAD request: response has no body */
	bool keep_alive;            /* client wants the connection kept */
	char method[24];
	struct host_target target;
	uint16_t port;
	const struct host_rule *rule;
	char rule_id[EGRESS_RULE_ID_MAX];
	bool shadowed;              /* a would_block was recorded */
	int tls;                    /* CONNECT first flight: 1 TLS, 0 not, -1 n/a */
	char sni[HOSTNAME_MAX + 1];
	struct addr addr;           /* where we connect */
	/* request and response bodies */
	enum http_body body;
	uint64_t left;
	struct http_chunked *chunked;
	bool resp_keep_alive;
	/* tunnel */
	bool spliced;               /* the 200 and first flight are out */
	struct half *draining;      /* one side gone: the half still owed */
	bool shut_wr;               /* CLOSING: our FIN is sent */
	struct half c2u, u2c;
};

struct proxy {
	struct proxy_opts o;
	struct proxy_timeouts t;
	const struct policy *policy;
	int epfd;
	int lfd;
	struct addr self;
	uint16_t self_port;
	struct dns *dns;
	struct conn **conns;
	uint32_t nconns, cap, live;
	uint32_t *free_ids;
	uint32_t nfree;
	bool accepting;
	uint64_t accept_resume;     /* ms: EMFILE back-off */
	uint32_t next_gen;          /* generations: only ever increase */
	bool stopping;
	uint64_t stop_deadline;
	int pool[PIPE_POOL][2];     /* empty pipes for tunnels to borrow */
	size_t npool;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t ev_data(enum tag tag, uint32_t low)
{
	return ((uint64_t)tag << 32) | low;
}

/* --- buffers ------------------------------------------------------------- */

static void buf_append(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;

		while (cap < b->len + n)
			cap *= 2;
		b->data = util_xrealloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

__attribute__((format(printf, 2, 3))) static void buf_printf(struct buf *b,
							     const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	ASSERT(n >= 0 && (size_t)n < sizeof(tmp));
	buf_append(b, tmp, (size_t)n);
}

static void buf_consume(struct buf *b, size_t n)
{
	ASSERT(n <= b->len);
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

static void buf_free(struct buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* Reads what is available from @fd into @b, at most @max bytes in all.
 * Returns bytes read, 0 on EOF, -EAGAIN when nothing is there, -errno. */
static ssize_t buf_read(struct buf *b, int fd, size_t max)
{
	ssize_t r;

	if (b->len >= max)
		return -ENOBUFS;
	if (b->cap - b->len < RELAY_CHUNK && b->cap < max) {
		size_t cap = b->cap ? b->cap * 2 : 4096;

		if (cap < b->len + RELAY_CHUNK)
			cap = b->len + RELAY_CHUNK;
		b->data = util_xrealloc(b->data, cap);
		b->cap = cap;
	}
	r = recv(fd, b->data + b->len, (b->cap - b->len) < (max - b->len)
					       ? b->cap - b->len : max - b->len, 0);
	if (r < 0)
		return -errno;
	b->len += (size_t)r;
	return r;
}

/* Writes as much of @b to @fd as it takes. Returns 0 or -errno (-EAGAIN:
 * try again when writable). */
static int buf_flush(struct buf *b, int fd)
{
	while (b->len > 0) {
		ssize_t w = send(fd, b->data, b->len, MSG_NOSIGNAL);

		if (w < 0)
			return errno == EINTR ? 0 : -errno;
		buf_consume(b, (size_t)w);
	}
	return 0;
}

/* --- connections --------------------------------------------------------- */

static struct conn *conn_get(struct proxy *p, uint32_t index)
{
	return index < p->nconns ? p->conns[index] : NULL;
}

/* The connection at @idx if it is still the one with generation @gen:
 * after a call that may have closed it, the caller reloads its pointer
 * from here and never touches the old one. */
static struct conn *still(struct proxy *p, uint32_t idx, uint32_t gen)
{
	struct conn *c = conn_get(p, idx);

	return c && c->gen == gen ? c : NULL;
}

#define EV_REMOVED UINT32_MAX /* the fd has left the epoll set */

static void set_interest(struct proxy *p, struct conn *c, bool upstream,
			 uint32_t events)
{
	int fd = upstream ? c->ufd : c->cfd;
	uint32_t *cur = upstream ? &c->uev : &c->cev;
	struct epoll_event ev;

	if (fd < 0 || *cur == events || *cur == EV_REMOVED)
		return;
	ev.events = events;
	ev.data.u64 = ev_data(upstream ? TAG_UPSTREAM : TAG_CLIENT, c->index);
	if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		*cur = events;
}

/* Pipes: a tunnel borrows one per direction only while bytes are in
 * flight, so an idle tunnel holds its two sockets and nothing else. */
static int pipe_get(struct proxy *p, int fds[2])
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

/* Returns @h's pipe to the pool if it is empty, else closes it. */
static void half_release(struct proxy *p, struct half *h)
{
	if (h->pipe[0] < 0)
		return;
	if (h->pending == 0 && p->npool < PIPE_POOL) {
		p->pool[p->npool][0] = h->pipe[0];
		p->pool[p->npool][1] = h->pipe[1];
		p->npool++;
	} else {
		close(h->pipe[0]);
		close(h->pipe[1]);
	}
	h->pipe[0] = h->pipe[1] = -1;
	h->pending = 0;
}

static void conn_close(struct proxy *p, struct conn *c)
{
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	half_release(p, &c->c2u);
	half_release(p, &c->u2c);
	buf_free(&c->cin);
	buf_free(&c->cout);
	buf_free(&c->uin);
	buf_free(&c->uout);
	free(c->chunked);
	p->conns[c->index] = NULL;
	p->free_ids[p->nfree++] = c->index;
	p->live--;
	free(c);
}

static struct conn *conn_new(struct proxy *p, int fd)
{
	struct epoll_event ev;
	struct conn *c;
	uint32_t index;

	if (p->nfree > 0) {
		index = p->free_ids[--p->nfree];
	} else {
		if (p->nconns == p->cap)
			return NULL;
		index = p->nconns++;
	}
	c = util_xcalloc(1, sizeof(*c));
	c->index = index;
	/* A DNS answer finds its connection by (index, gen): a reused slot
	 * must never look like the connection that asked. */
	if (++p->next_gen == 0)
		p->next_gen = 1;
	c->gen = p->next_gen;
	c->cfd = fd;
	c->ufd = -1;
	c->c2u.pipe[0] = c->c2u.pipe[1] = -1;
	c->u2c.pipe[0] = c->u2c.pipe[1] = -1;
	c->state = S_HEAD;
	c->deadline = now_ms() + p->t.head_ms;
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.u64 = ev_data(TAG_CLIENT, index);
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		p->free_ids[p->nfree++] = index;
		return NULL;
	}
	c->cev = ev.events;
	p->conns[index] = c;
	p->live++;
	return c;
}

/* --- receipts and answers ------------------------------------------------ */

static int64_t record(struct proxy *p, const char *type, enum receipt_decision d,
		      const char *rule, json_t *subject, const char *reason)
{
	int64_t seq = -1;

	if (p->o.record)
		seq = p->o.record(p->o.record_arg, type, d,
				  RECEIPT_POINT_EGRESS_PROXY, rule, subject, reason);
	json_decref(subject);
	return seq;
}

static json_t *target_subject(const struct conn *c)
{
	json_t *s = json_object();

	ASSERT(s);
	json_object_set_new(s, "method", json_string(c->method));
	json_object_set_new(s, "host", json_string(c->target.name));
	json_object_set_new(s, "port", json_integer(c->port));
	return s;
}

static void add_rule_text(json_t *s, const struct host_rule *r)
{
	char text[HOSTNAME_MAX + 64];

	if (!r)
		return;
	host_rule_format(r, text, sizeof(text));
	json_object_set_new(s, "rule", json_string(text));
}

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

/* Queues an error answer and moves @c to CLOSING. */
static void answer(struct proxy *p, struct conn *c, int status, const char *rule,
		   int64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void answer(struct proxy *p, struct conn *c, int status, const char *rule,
		   int64_t seq, const char *fmt, ...)
{
	const char *text = status == 400 ? "Bad Request"
			   : status == 403 ? "Forbidden"
			   : status == 408 ? "Request Timeout"
			   : status == 502 ? "Bad Gateway"
					   : "Error";
	char body[600], receipt[24];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(body, sizeof(body) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(body) - 2)
		n = (int)sizeof(body) - 2;
	/* One line: no CR or LF from a reason may split the body. */
	for (int i = 0; i < n; i++)
		if (body[i] == '\r' || body[i] == '\n' || (unsigned char)body[i] < 0x20)
			body[i] = ' ';
	body[n++] = '\n';
	body[n] = '\0';
	if (seq >= 0)
		snprintf(receipt, sizeof(receipt), "%lld", (long long)seq);
	else
		snprintf(receipt, sizeof(receipt), "none");
	c->cout.len = 0;
	buf_printf(&c->cout,
		   "HTTP/1.1 %d %s\r\nX-Airlock-Rule: %s\r\nX-Airlock-Receipt: %s\r\n"
		   "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
		   "Connection: close\r\n\r\n",
		   status, text, rule, receipt, n);
	buf_append(&c->cout, body, (size_t)n);
	if (c->ufd >= 0) {
		close(c->ufd);
		c->ufd = -1;
	}
	c->state = S_CLOSING;
	c->deadline = now_ms() + 5000;
	set_interest(p, c, false, EPOLLOUT);
}

/* A deny: in shadow mode it is recorded as would_block and the request goes
 * on (returns true); otherwise it is answered 403 (returns false). */
static bool deny(struct proxy *p, struct conn *c, const char *rule,
		 const struct host_rule *hr, const char *reason, json_t *extra,
		 bool always)
{
	bool shadow = p->policy->mode == POLICY_MODE_SHADOW && !always;
	json_t *s = target_subject(c);
	int64_t seq;

	add_rule_text(s, hr);
	if (extra)
		json_object_update(s, extra);
	json_decref(extra);
	seq = record(p, "egress.block", shadow ? RECEIPT_WOULD_BLOCK : RECEIPT_BLOCK,
		     rule, s, reason);
	if (shadow) {
		c->shadowed = true;
		return true;
	}
	answer(p, c, 403, rule, seq, "airlock: denied %s %s:%u: %s", c->method,
	       c->target.name, c->port, reason);
	return false;
}

static void fail(struct proxy *p, struct conn *c, int status, const char *rule,
		 const char *error)
{
	json_t *s = target_subject(c);
	int64_t seq;

	json_object_set_new(s, "error", json_string(error));
	seq = record(p, "proxy.error", RECEIPT_BLOCK, rule, s, error);
	if (status)
		answer(p, c, status, rule, seq, "airlock: %s %s:%u: %s", c->method,
		       c->target.name, c->port, error);
	else
		conn_close(p, c);
}

/* --- the request --------------------------------------------------------- */

static void start_connect(struct proxy *p, struct conn *c);
static void on_resolved(void *arg, uint64_t cookie, int status,
			const struct addr *addrs, size_t n, const char *error);

/* After the rules and the address checks: CONNECT answers 200 and waits
 * for the first flight; plain http connects. */
static void addresses_checked(struct proxy *p, struct conn *c,
			      const struct addr *addrs, size_t n)
{
	struct egress_verdict v;
	size_t bad = 0, i;

	for (i = 0; i < n; i++) {
		if (egress_is_self(&p->self, p->self_port, &addrs[i], c->port)) {
			deny(p, c, "egress.self", NULL,
			     "the target is the proxy's own listening address",
			     json_pack("{s:o}", "addresses", addrs_json(addrs, n)), true);
			return;
		}
	}
	if (p->policy->mode != POLICY_MODE_OFF) {
		egress_decide_addrs(p->policy, addrs, n, &v, &bad);
		if (!v.allow && !deny(p, c, v.rule_id, NULL, v.reason,
				      json_pack("{s:o}", "addresses",
						addrs_json(addrs, n)),
				      false))
			return;
	}
	c->addr = *egress_pick(addrs, n);
	if (c->is_connect) {
		buf_printf(&c->cout, "HTTP/1.1 200 Connection established\r\n\r\n");
		c->state = S_FIRST_FLIGHT;
		c->deadline = now_ms() + p->t.first_flight_ms;
		set_interest(p, c, false, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
		return;
	}
	start_connect(p, c);
}

static void on_resolved(void *arg, uint64_t cookie, int status,
			const struct addr *addrs, size_t n, const char *error)
{
	struct proxy *p = arg;
	struct conn *c = conn_get(p, (uint32_t)(cookie & 0xffffffffu));

	if (!c || c->gen != (uint32_t)(cookie >> 32) || c->state != S_RESOLVE)
		return;
	if (status != 0 || n == 0) {
		fail(p, c, 502, "dns.failure", error ? error : "no address");
		return;
	}
	/* Every answer is checked, however many there are. */
	addresses_checked(p, c, addrs, n);
}

/* The parsed head of a new request on @c: decide, then resolve. */
static void handle_request(struct proxy *p, struct conn *c,
			   const struct http_request *req)
{
	struct egress_verdict v;
	uint64_t cookie;

	c->is_connect = req->is_connect;
	c->head_only = strcmp(c->method, "HEAD") == 0;
	c->target = req->host;
	c->port = req->port;
	c->keep_alive = req->keep_alive;
	c->shadowed = false;
	c->tls = -1;
	c->sni[0] = '\0';
	c->rule = NULL;
	c->body = req->body;
	c->left = req->content_length;

	if (req->form == HTTP_FORM_ORIGIN || !req->has_host) {
		fail(p, c, 400, "http.form",
		     "origin-form requests are not accepted by a forward proxy");
		return;
	}
	if (c->target.is_addr &&
	    egress_is_self(&p->self, p->self_port, &c->target.addr, c->port)) {
		deny(p, c, "egress.self", NULL,
		     "the target is the proxy's own listening address", NULL, true);
		return;
	}
	if (p->policy->mode == POLICY_MODE_OFF) {
		snprintf(c->rule_id, sizeof(c->rule_id), "mode.off");
	} else {
		egress_decide_rules(p->policy, &c->target, c->port, &v);
		snprintf(c->rule_id, sizeof(c->rule_id), "%s", v.rule_id);
		c->rule = v.rule;
		if (!v.allow && !deny(p, c, v.rule_id, v.rule, v.reason, NULL, false))
			return;
	}
	if (c->target.is_addr) {
		addresses_checked(p, c, &c->target.addr, 1);
		return;
	}
	c->state = S_RESOLVE;
	c->deadline = 0; /* the resolver has its own timeout */
	/* No interest: a half-closed client still gets its answer; HUP and
	 * ERR (always reported) mean it is gone. */
	set_interest(p, c, false, 0);
	cookie = ((uint64_t)c->gen << 32) | c->index;
	if (dns_resolve(p->dns, c->target.name, on_resolved, p, cookie) < 0) {
		c = conn_get(p, (uint32_t)(cookie & 0xffffffffu));
		if (c && c->gen == (uint32_t)(cookie >> 32) && c->state == S_RESOLVE)
			fail(p, c, 502, "dns.failure", "the resolver refused the query");
	}
}

static void parse_head(struct proxy *p, struct conn *c)
{
	struct http_request req;
	enum http_result r = http_parse_request(c->cin.data, c->cin.len, &req, NULL);
	size_t mlen;

	if (r == HTTP_INCOMPLETE)
		return;
	if (r != HTTP_OK) {
		char why[256];
		json_t *s;
		int64_t seq;

		snprintf(why, sizeof(why), "%s%s%s", req.error ? req.error : "malformed",
			 req.error_detail ? ": " : "",
			 req.error_detail ? req.error_detail : "");
		s = json_pack("{s:s}", "error", why);
		seq = record(p, "proxy.error", RECEIPT_BLOCK,
			     r == HTTP_TOO_LARGE ? "http.too-large" : "http.malformed", s,
			     why);
		answer(p, c, 400, r == HTTP_TOO_LARGE ? "http.too-large" : "http.malformed",
		       seq, "airlock: malformed request: %s", why);
		return;
	}
	/* The head's slices die with buf_consume() below: copy what is
	 * needed later. The body (if any) and pipelined bytes stay in cin. */
	mlen = req.method.len < sizeof(c->method) - 1 ? req.method.len
						      : sizeof(c->method) - 1;
	memcpy(c->method, req.method.ptr, mlen);
	c->method[mlen] = '\0';
	c->uout.len = 0;
	if (!req.is_connect) {
		size_t i;

		/* origin-form request head for upstream, framing rewritten */
		buf_append(&c->uout, req.method.ptr, req.method.len);
		buf_append(&c->uout, " ", 1);
		if (req.path.len)
			buf_append(&c->uout, req.path.ptr, req.path.len);
		else
			buf_append(&c->uout, "/", 1);
		if (req.has_query) {
			buf_append(&c->uout, "?", 1);
			buf_append(&c->uout, req.query.ptr, req.query.len);
		}
		buf_printf(&c->uout, " HTTP/1.1\r\n");
		if (req.host.is_addr && req.host.addr.family == AF_INET6)
			buf_printf(&c->uout, "Host: [%s]", req.host.name);
		else
			buf_printf(&c->uout, "Host: %s", req.host.name);
		if (req.port_explicit)
			buf_printf(&c->uout, ":%u", req.port);
		buf_printf(&c->uout, "\r\n");
		for (i = 0; i < req.headers.count; i++) {
			const struct http_header *h = &req.headers.h[i];

			if (http_slice_eq_ci(h->name, "host") ||
			    http_slice_eq_ci(h->name, "content-length") ||
			    http_slice_eq_ci(h->name, "transfer-encoding") ||
			    http_is_hop_by_hop(&req.headers, h->name))
				continue;
			buf_append(&c->uout, h->name.ptr, h->name.len);
			buf_append(&c->uout, ": ", 2);
			buf_append(&c->uout, h->value.ptr, h->value.len);
			buf_append(&c->uout, "\r\n", 2);
		}
		if (req.body == HTTP_BODY_LENGTH)
			buf_printf(&c->uout, "Content-Length: %llu\r\n",
				   (unsigned long long)req.content_length);
		else if (req.body == HTTP_BODY_CHUNKED)
			buf_printf(&c->uout, "Transfer-Encoding: chunked\r\n");
		buf_printf(&c->uout, "Connection: close\r\n\r\n");
	}
	buf_consume(&c->cin, req.head_len);
	handle_request(p, c, &req);
}

/* --- upstream ------------------------------------------------------------ */

static void start_connect(struct proxy *p, struct conn *c)
{
	struct sockaddr_storage ss;
	struct epoll_event ev;
	socklen_t sl;
	int fd;

	memset(&ss, 0, sizeof(ss));
	if (c->addr.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(c->port);
		memcpy(&sin->sin_addr, c->addr.bytes, 4);
		sl = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(c->port);
		memcpy(&sin6->sin6_addr, c->addr.bytes, 16);
		sl = sizeof(*sin6);
	}
	fd = socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		/* A CONNECT client already has its 200: close, never write
		 * an answer into its tunnel. */
		fail(p, c, c->is_connect ? 0 : 502, "upstream.connect", strerror(errno));
		return;
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		fail(p, c, c->is_connect ? 0 : 502, "upstream.connect", strerror(err));
		return;
	}
	c->ufd = fd;
	ev.events = EPOLLOUT;
	ev.data.u64 = ev_data(TAG_UPSTREAM, c->index);
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		fail(p, c, c->is_connect ? 0 : 502, "upstream.connect", strerror(errno));
		return;
	}
	c->uev = EPOLLOUT;
	c->state = S_CONNECTING;
	c->deadline = now_ms() + p->t.connect_ms;
	set_interest(p, c, false, c->cout.len ? EPOLLOUT : 0);
}

static void record_allow(struct proxy *p, struct conn *c, json_t *extra)
{
	char text[ADDR_STRLEN];
	json_t *s;

	if (c->shadowed) {
		json_decref(extra);
		return; /* its would_block receipt already tells the story */
	}
	s = target_subject(c);
	addr_format(&c->addr, text, sizeof(text));
	json_object_set_new(s, "address", json_string(text));
	add_rule_text(s, c->rule);
	if (extra)
		json_object_update(s, extra);
	json_decref(extra);
	record(p, "egress.allow", RECEIPT_ALLOW, c->rule_id, s,
	       p->policy->mode == POLICY_MODE_OFF ? "mode off: not checked"
						  : "allowed");
}

static bool tunnel_start(struct proxy *p, struct conn *c)
{
	buf_free(&c->cin);
	buf_free(&c->uin);
	buf_free(&c->uout);
	c->spliced = true;
	c->state = S_TUNNEL;
	c->deadline = now_ms() + p->t.idle_ms;
	return true;
}

/* The upstream connection is open. */
static void connected(struct proxy *p, struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		fail(p, c, c->is_connect ? 0 : 502, "upstream.connect", strerror(err));
		return;
	}
	if (c->is_connect) {
		/* The first flight, unchanged, then splice. */
		buf_append(&c->uout, c->cin.data, c->cin.len);
		c->cin.len = 0;
		record_allow(p, c, c->tls == 1 ? json_pack("{s:b, s:s}", "tls", 1, "sni", c->sni)
					       : json_pack("{s:b}", "tls", 0));
		c->state = S_TUNNEL;
		c->deadline = now_ms() + p->t.idle_ms;
		return;
	}
	record_allow(p, c, NULL);
	c->state = S_REQ_BODY;
	c->deadline = now_ms() + p->t.idle_ms;
	if (c->body == HTTP_BODY_CHUNKED) {
		c->chunked = util_xcalloc(1, sizeof(*c->chunked));
		http_chunked_init(c->chunked, NULL);
	}
}

/* --- CONNECT first flight ----------------------------------------------- */

static void first_flight(struct proxy *p, struct conn *c)
{
	struct clienthello ch;
	enum clienthello_result r;
	bool tls_port = c->port == 443;
	json_t *extra;

	if (p->policy->mode == POLICY_MODE_OFF) {
		/* off: nothing is checked (docs/PROXY.md). */
		start_connect(p, c);
		return;
	}
	r = clienthello_parse((const uint8_t *)c->cin.data, c->cin.len, &ch);
	if (r == CLIENTHELLO_INCOMPLETE) {
		if (c->cin.len >= CLIENTHELLO_FLIGHT_MAX)
			r = CLIENTHELLO_MALFORMED;
		else
			return;
	}
	c->tls = r != CLIENTHELLO_NOT_TLS;
	if (r == CLIENTHELLO_OK && ch.has_sni)
		snprintf(c->sni, sizeof(c->sni), "%s", ch.sni);
	if (r == CLIENTHELLO_NOT_TLS && !tls_port) {
		/* Another protocol on a port that is not 443 (SSH, ...). */
		start_connect(p, c);
		return;
	}
	if (r != CLIENTHELLO_OK) {
		extra = json_pack("{s:b, s:s}", "tls", r != CLIENTHELLO_NOT_TLS,
				  "error", ch.reason ? ch.reason : "not TLS");
		if (deny(p, c, "egress.sni_mismatch", NULL,
			 r == CLIENTHELLO_NOT_TLS
				 ? "the first flight to port 443 is not a TLS ClientHello"
				 : "malformed TLS ClientHello",
			 extra, false))
			start_connect(p, c);
		else
			conn_close(p, c); /* the client already has its 200 */
		return;
	}
	if (!ch.has_sni || c->target.is_addr || strcmp(ch.sni, c->target.name) != 0) {
		extra = json_pack("{s:s?}", "sni", ch.has_sni ? ch.sni : NULL);
		if (deny(p, c, "egress.sni_mismatch", NULL,
			 !ch.has_sni ? "the TLS ClientHello has no SNI"
				     : "the SNI is not the CONNECT host",
			 extra, false))
			start_connect(p, c);
		else
			conn_close(p, c);
		return;
	}
	start_connect(p, c);
}

/* --- plain http bodies and responses ------------------------------------- */

/* Moves request body bytes from cin to uout per the parsed framing. Returns
 * true when the body is complete. */
static bool pump_request_body(struct proxy *p, struct conn *c)
{
	if (c->body == HTTP_BODY_NONE)
		return true;
	if (c->body == HTTP_BODY_LENGTH) {
		size_t n = c->cin.len < c->left ? c->cin.len : (size_t)c->left;

		buf_append(&c->uout, c->cin.data, n);
		buf_consume(&c->cin, n);
		c->left -= n;
		return c->left == 0;
	}
	ASSERT(c->chunked);
	while (c->cin.len > 0) {
		struct http_slice data;
		size_t used = 0;
		enum http_chunked_result r =
			http_chunked_feed(c->chunked, c->cin.data, c->cin.len, &used, &data);

		buf_append(&c->uout, c->cin.data, used);
		buf_consume(&c->cin, used);
		if (r == HTTP_CHUNKED_DONE)
			return true;
		if (r == HTTP_CHUNKED_BAD) {
			fail(p, c, 0, "http.malformed", c->chunked->error);
			return false;
		}
		if (r == HTTP_CHUNKED_MORE)
			break;
	}
	return false;
}

/* Relays the response head in uin, once complete: interim (1xx) heads are
 * passed on as they come, the final one moves @c to RESP_BODY. */
static void response_head(struct proxy *p, struct conn *c)
{
	struct http_response resp;
	size_t i;

	for (;;) {
		enum http_result r = http_parse_response(c->uin.data, c->uin.len, &resp, NULL, c->head_only);
		if (r == HTTP_INCOMPLETE)
			return;
		if (r != HTTP_OK) {
			fail(p, c, 502, "upstream.malformed",
			     resp.error ? resp.error : "malformed response");
			return;
		}
		if (resp.status == 101) {
			fail(p, c, 502, "upstream.malformed",
			     "the upstream switched protocols without being asked");
			return;
		}
		buf_printf(&c->cout, "HTTP/1.1 %u ", resp.status);
		buf_append(&c->cout, resp.reason_phrase.ptr, resp.reason_phrase.len);
		buf_printf(&c->cout, "\r\n");
		for (i = 0; i < resp.headers.count; i++) {
			const struct http_header *h = &resp.headers.h[i];

			if (http_slice_eq_ci(h->name, "content-length") ||
			    http_slice_eq_ci(h->name, "transfer-encoding") ||
			    http_is_hop_by_hop(&resp.headers, h->name))
				continue;
			buf_append(&c->cout, h->name.ptr, h->name.len);
			buf_append(&c->cout, ": ", 2);
			buf_append(&c->cout, h->value.ptr, h->value.len);
			buf_append(&c->cout, "\r\n", 2);
		}
		buf_consume(&c->uin, resp.head_len);
		if (resp.status < 200) {
			buf_append(&c->cout, "\r\n", 2); /* interim: the final head follows */
			continue;
		}
		break;
	}
	c->body = resp.body;
	c->left = resp.content_length;
	if (resp.body == HTTP_BODY_LENGTH)
		buf_printf(&c->cout, "Content-Length: %llu\r\n",
			   (unsigned long long)resp.content_length);
	else if (resp.body == HTTP_BODY_CHUNKED) {
		/* The codings before "chunked" (gzip, ...) are the body's:
		 * pass the list on as the parser validated it (chunked last). */
		int te = http_header_find(&resp.headers, "transfer-encoding", 0);

		buf_printf(&c->cout, "Transfer-Encoding: ");
		if (te >= 0)
			buf_append(&c->cout, resp.headers.h[te].value.ptr,
				   resp.headers.h[te].value.len);
		else
			buf_printf(&c->cout, "chunked");
		buf_printf(&c->cout, "\r\n");
	}
	c->resp_keep_alive = c->keep_alive && c->state == S_RESP_HEAD &&
			     resp.body != HTTP_BODY_UNTIL_CLOSE;
	buf_printf(&c->cout, "Connection: %s\r\n\r\n",
		   c->resp_keep_alive ? "keep-alive" : "close");
	free(c->chunked);
	c->chunked = NULL;
	if (c->body == HTTP_BODY_CHUNKED) {
		c->chunked = util_xcalloc(1, sizeof(*c->chunked));
		http_chunked_init(c->chunked, NULL);
	}
	c->state = S_RESP_BODY;
}

/* Moves response body bytes from uin to cout. Returns true when the
 * response is complete (for UNTIL_CLOSE: never; EOF ends it). */
static bool pump_response_body(struct proxy *p, struct conn *c)
{
	if (c->body == HTTP_BODY_NONE)
		return true;
	if (c->body == HTTP_BODY_UNTIL_CLOSE) {
		buf_append(&c->cout, c->uin.data, c->uin.len);
		c->uin.len = 0;
		return false;
	}
	if (c->body == HTTP_BODY_LENGTH) {
		size_t n = c->uin.len < c->left ? c->uin.len : (size_t)c->left;

		buf_append(&c->cout, c->uin.data, n);
		buf_consume(&c->uin, n);
		c->left -= n;
		return c->left == 0;
	}
	ASSERT(c->chunked);
	while (c->uin.len > 0) {
		struct http_slice data;
		size_t used = 0;
		enum http_chunked_result r =
			http_chunked_feed(c->chunked, c->uin.data, c->uin.len, &used, &data);

		buf_append(&c->cout, c->uin.data, used);
		buf_consume(&c->uin, used);
		if (r == HTTP_CHUNKED_DONE)
			return true;
		if (r == HTTP_CHUNKED_BAD) {
			fail(p, c, 0, "upstream.malformed", c->chunked->error);
			return false;
		}
		if (r == HTTP_CHUNKED_MORE)
			break;
	}
	return false;
}

/* The response is relayed: keep the client for its next request, or end. */
static void response_done(struct proxy *p, struct conn *c)
{
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
	close(c->ufd);
	c->ufd = -1;
	c->uev = 0;
	buf_free(&c->uin);
	buf_free(&c->uout);
	free(c->chunked);
	c->chunked = NULL;
	if (!c->resp_keep_alive) {
		c->state = S_CLOSING;
		c->deadline = now_ms() + 5000;
		return;
	}
	c->state = S_HEAD;
	/* An idle kept-alive connection waits idle_ms; the head timeout
	 * starts with the next request's first byte (see step). */
	c->deadline = now_ms() + (c->cin.len ? p->t.head_ms : p->t.idle_ms);
}

/* --- tunnel -------------------------------------------------------------- */

/* Moves bytes src -> pipe -> dst. Returns the bytes written to dst, or -1
 * if the tunnel must close. */
static ssize_t splice_half(struct proxy *p, int src, int dst, struct half *h)
{
	ssize_t moved = 0;

	for (;;) {
		ssize_t n;

		if (h->pending > 0) {
			n = splice(h->pipe[0], NULL, dst, NULL, h->pending,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n < 0)
				return errno == EAGAIN ? moved : -1;
			h->pending -= (size_t)n;
			moved += n;
			continue;
		}
		if (h->eof) {
			half_release(p, h);
			if (!h->shut) {
				shutdown(dst, SHUT_WR);
				h->shut = true;
			}
			return moved;
		}
		if (h->pipe[0] < 0 && pipe_get(p, h->pipe) < 0)
			return -1;
		n = splice(src, NULL, h->pipe[1], NULL, SPLICE_MAX,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0) {
			if (errno != EAGAIN)
				return -1;
			half_release(p, h); /* idle: give the pipe back */
			return moved;
		}
		if (n == 0) {
			h->eof = true;
			continue;
		}
		h->pending += (size_t)n;
	}
}

static uint32_t tunnel_events(const struct half *in, const struct half *out)
{
	uint32_t ev = 0;

	if (!in->eof && in->pending == 0)
		ev |= EPOLLIN;
	if (out->pending > 0)
		ev |= EPOLLOUT;
	return ev;
}

static void tunnel_step(struct proxy *p, struct conn *c)
{
	ssize_t a = 0, b = 0;

	/* One side is gone (tunnel_hangup): only its last bytes, still in
	 * the pipe, are delivered to the other, then the tunnel ends. */
	if (c->draining) {
		struct half *h = c->draining;
		int dst = h == &c->c2u ? c->ufd : c->cfd;

		a = splice_half(p, -1, dst, h);
		if (a < 0 || h->pending == 0) {
			conn_close(p, c);
			return;
		}
		if (a > 0)
			c->deadline = now_ms() + p->t.idle_ms;
		set_interest(p, c, dst == c->ufd, EPOLLOUT);
		return;
	}
	a = splice_half(p, c->cfd, c->ufd, &c->c2u);
	if (a >= 0)
		b = splice_half(p, c->ufd, c->cfd, &c->u2c);
	if (a < 0 || b < 0 || (c->c2u.shut && c->u2c.shut)) {
		conn_close(p, c);
		return;
	}
	/* Idle means no byte moved: events that move nothing do not keep a
	 * tunnel alive. */
	if (a > 0 || b > 0)
		c->deadline = now_ms() + p->t.idle_ms;
	set_interest(p, c, false, tunnel_events(&c->c2u, &c->u2c));
	set_interest(p, c, true, tunnel_events(&c->u2c, &c->c2u));
}

/* EPOLLHUP or EPOLLERR on one side of a tunnel. They are reported whatever
 * the interest, so the side must leave the epoll set or the tunnel end. */
static void tunnel_hangup(struct proxy *p, struct conn *c, bool upstream,
			  uint32_t events)
{
	uint32_t idx = c->index, gen = c->gen;
	struct half *from = upstream ? &c->u2c : &c->c2u;
	int fd = upstream ? c->ufd : c->cfd;

	if (!(events & EPOLLERR))
		tunnel_step(p, c); /* take what it still has, deliver what we can */
	if (!(c = still(p, idx, gen)))
		return;
	if ((events & EPOLLERR) || from->pending == 0 || !c->spliced) {
		conn_close(p, c);
		return;
	}
	/* Its last bytes wait for the other side: keep only that. */
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, NULL);
	*(upstream ? &c->uev : &c->cev) = EV_REMOVED;
	from->eof = true;
	c->draining = from;
	tunnel_step(p, c);
}

/* --- the state machine --------------------------------------------------- */

/* Reads the client into cin (bounded) in the states that want its bytes.
 * Returns false if @c was closed. */
static bool read_client(struct proxy *p, struct conn *c, size_t max)
{
	ssize_t r = buf_read(&c->cin, c->cfd, max);

	if (r == -EAGAIN || r == -EINTR || r == -ENOBUFS)
		return true;
	if (r <= 0) {
		conn_close(p, c);
		return false;
	}
	return true;
}


/* An error answer: flush it, shut our side, then wait briefly for the
 * client's FIN so that closing does not reset the answer away. */
static void step_closing(struct proxy *p, struct conn *c, uint32_t events)
{
	if (!c->shut_wr) {
		int r = buf_flush(&c->cout, c->cfd);

		if (r < 0 && r != -EAGAIN) {
			conn_close(p, c);
			return;
		}
		if (c->cout.len > 0) {
			set_interest(p, c, false, EPOLLOUT);
			return;
		}
		shutdown(c->cfd, SHUT_WR);
		c->shut_wr = true;
		c->deadline = now_ms() + 2000;
		set_interest(p, c, false, EPOLLIN | EPOLLRDHUP);
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		char sink[4096];
		ssize_t n;

		while ((n = recv(c->cfd, sink, sizeof(sink), 0)) > 0)
			;
		if (n == 0 || errno != EAGAIN)
			conn_close(p, c);
	}
}

static void step_tunnel(struct proxy *p, struct conn *c)
{
	int r1, r2;

	if (c->spliced) {
		tunnel_step(p, c);
		return;
	}
	/* Still writing the 200 and the first flight. */
	r1 = buf_flush(&c->cout, c->cfd);
	r2 = buf_flush(&c->uout, c->ufd);
	if ((r1 < 0 && r1 != -EAGAIN) || (r2 < 0 && r2 != -EAGAIN)) {
		conn_close(p, c);
		return;
	}
	if (c->cout.len == 0 && c->uout.len == 0) {
		if (tunnel_start(p, c))
			tunnel_step(p, c);
		return;
	}
	set_interest(p, c, false, c->cout.len ? EPOLLOUT : 0);
	set_interest(p, c, true, c->uout.len ? EPOLLOUT : 0);
}

static void step_response(struct proxy *p, struct conn *c, bool upstream,
			  bool readable, bool hangup);

static void step_req_body(struct proxy *p, struct conn *c, bool upstream,
			  bool readable)
{
	uint32_t idx = c->index, gen = c->gen;
	size_t r_before, cin_before;
	bool progress;
	int r;

	if (upstream && readable && c->cout.len < BUF_HIGH) {
		/* The upstream speaks before the body is complete: a 100
		 * Continue, or an early final answer. (Not while the client
		 * lags behind: interim answers must not pile up.) */
		ssize_t n = buf_read(&c->uin, c->ufd, c->uin.len + RELAY_CHUNK);

		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR && n != -ENOBUFS)) {
			fail(p, c, 502, "upstream.closed",
			     "the upstream closed before a complete response");
			return;
		}
		response_head(p, c);
		if (!(c = still(p, idx, gen)) || c->state == S_CLOSING)
			return;
		if (c->state == S_RESP_BODY) {
			/* The rest of the request body is never sent; the
			 * client connection ends with this response. */
			step_response(p, c, false, false, false);
			return;
		}
	}
	cin_before = c->cin.len;
	if (!upstream && readable && c->uout.len < BUF_HIGH &&
	    !read_client(p, c, c->cin.len + RELAY_CHUNK))
		return;
	progress = c->cin.len != cin_before;
	if (pump_request_body(p, c))
		c->state = S_RESP_HEAD;
	if (!(c = still(p, idx, gen)) || c->state == S_CLOSING)
		return;
	r_before = c->uout.len;
	r = buf_flush(&c->uout, c->ufd);
	if (r < 0 && r != -EAGAIN) {
		fail(p, c, 502, "upstream.write", strerror(-r));
		return;
	}
	r = buf_flush(&c->cout, c->cfd);
	if (r < 0 && r != -EAGAIN) {
		conn_close(p, c);
		return;
	}
	if (progress || c->uout.len < r_before)
		c->deadline = now_ms() + p->t.idle_ms; /* bytes moved */
	set_interest(p, c, true, (c->uout.len ? EPOLLOUT : 0) |
				 (c->cout.len < BUF_HIGH ? EPOLLIN : 0));
	set_interest(p, c, false, (c->state == S_REQ_BODY && c->uout.len < BUF_HIGH
					   ? EPOLLIN | EPOLLRDHUP : 0) |
					  (c->cout.len ? EPOLLOUT : 0));
	if (c->state == S_RESP_HEAD && c->uin.len > 0)
		step_response(p, c, false, false, false);
}

static void step_response(struct proxy *p, struct conn *c, bool upstream,
			  bool readable, bool hangup)
{
	uint32_t idx = c->index, gen = c->gen;
	int r;

	if (c->uout.len > 0) {
		r = buf_flush(&c->uout, c->ufd);
		if (r < 0 && r != -EAGAIN) {
			fail(p, c, 502, "upstream.write", strerror(-r));
			return;
		}
	}
	/* Past BUF_HIGH the upstream waits for the client; but a hang-up is
	 * reported whatever the interest, so then its last bytes (bounded
	 * by its socket buffer) are taken at once instead of spinning. */
	if (upstream && readable && (c->cout.len < BUF_HIGH || hangup)) {
		ssize_t n = buf_read(&c->uin, c->ufd, c->uin.len + RELAY_CHUNK);

		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR && n != -ENOBUFS)) {
			if (c->state == S_RESP_HEAD) {
				fail(p, c, 502, "upstream.closed",
				     "the upstream closed before a complete response");
				return;
			}
			pump_response_body(p, c);
			if (!(c = still(p, idx, gen)))
				return;
			if (c->body == HTTP_BODY_LENGTH && c->left != 0) {
				conn_close(p, c); /* truncated: the client sees it */
				return;
			}
			c->resp_keep_alive = false;
			response_done(p, c);
			goto flush;
		}
	}
	if (c->state == S_RESP_HEAD) {
		response_head(p, c);
		if (!(c = still(p, idx, gen)) || c->state == S_CLOSING)
			return;
	}
	if (c->state == S_RESP_BODY && pump_response_body(p, c))
		response_done(p, c);
	if (!(c = still(p, idx, gen)))
		return;
flush:
	r = buf_flush(&c->cout, c->cfd);
	if (r < 0 && r != -EAGAIN) {
		conn_close(p, c);
		return;
	}
	c->deadline = now_ms() + p->t.idle_ms;
	if (c->state == S_CLOSING) {
		step_closing(p, c, 0);
		return;
	}
	if (c->state == S_HEAD) {
		c->deadline = now_ms() + (c->cin.len ? p->t.head_ms : p->t.idle_ms);
		set_interest(p, c, false, EPOLLIN | EPOLLRDHUP |
					  (c->cout.len ? EPOLLOUT : 0));
		if (c->cout.len == 0 && c->cin.len > 0)
			parse_head(p, c); /* a pipelined request */
		return;
	}
	set_interest(p, c, false, c->cout.len ? EPOLLOUT : 0);
	set_interest(p, c, true, (c->cout.len < BUF_HIGH ? EPOLLIN : 0) |
				 (c->uout.len ? EPOLLOUT : 0));
}

static void step(struct proxy *p, struct conn *c, bool upstream, uint32_t events)
{
	bool readable = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	uint32_t idx = c->index, gen = c->gen;
	int r;

	/* EPOLLHUP and EPOLLERR are reported whatever the interest, level-
	 * triggered: a client that is gone (reset, or both ways closed) ends
	 * its connection here, or its events would spin the loop. The tunnel
	 * handles its own (it may still owe the other side bytes). */
	if (!upstream && (events & (EPOLLHUP | EPOLLERR)) && c->state != S_TUNNEL &&
	    c->state != S_HEAD) {
		conn_close(p, c);
		return;
	}
	if (upstream && (events & (EPOLLHUP | EPOLLERR)) && c->state != S_TUNNEL &&
	    c->state != S_CONNECTING && c->state != S_RESP_HEAD &&
	    c->state != S_RESP_BODY && c->state != S_REQ_BODY) {
		conn_close(p, c);
		return;
	}

	switch (c->state) {
	case S_HEAD:
		if (readable) {
			size_t before = c->cin.len;

			if (!read_client(p, c, HEAD_MAX))
				return;
			if (before == 0 && c->cin.len > 0)
				c->deadline = now_ms() + p->t.head_ms;
		}
		if (c->cout.len > 0) { /* the end of a previous response */
			r = buf_flush(&c->cout, c->cfd);
			if (r < 0 && r != -EAGAIN) {
				conn_close(p, c);
				return;
			}
			if (c->cout.len > 0)
				return;
			set_interest(p, c, false, EPOLLIN | EPOLLRDHUP);
		}
		parse_head(p, c);
		if ((c = still(p, idx, gen)) && c->state == S_HEAD && c->cin.len >= HEAD_MAX)
			fail(p, c, 400, "http.too-large", "request head too large");
		break;
	case S_RESOLVE:
		return; /* HUP and ERR were handled above */
	case S_FIRST_FLIGHT:
		r = buf_flush(&c->cout, c->cfd);
		if (r < 0 && r != -EAGAIN) {
			conn_close(p, c);
			return;
		}
		if (readable && !read_client(p, c, CLIENTHELLO_FLIGHT_MAX))
			return;
		if (c->cin.len > 0) {
			first_flight(p, c);
			if (!(c = still(p, idx, gen)) || c->state != S_FIRST_FLIGHT)
				return;
		}
		/* EPOLLOUT only while the 200 is still queued: an always
		 * writable socket would spin the loop while the hello trickles. */
		set_interest(p, c, false,
			     EPOLLIN | EPOLLRDHUP | (c->cout.len ? EPOLLOUT : 0));
		return;
	case S_CONNECTING:
		if (!upstream) {
			r = buf_flush(&c->cout, c->cfd);
			if (r < 0 && r != -EAGAIN) {
				conn_close(p, c);
				return;
			}
			set_interest(p, c, false, c->cout.len ? EPOLLOUT : 0);
			return;
		}
		connected(p, c);
		if (!(c = still(p, idx, gen)))
			return;
		if (c->state == S_TUNNEL)
			step_tunnel(p, c);
		else if (c->state == S_REQ_BODY)
			step_req_body(p, c, false, false);
		break;
	case S_TUNNEL:
		if (events & (EPOLLHUP | EPOLLERR))
			tunnel_hangup(p, c, upstream, events);
		else
			step_tunnel(p, c);
		return;
	case S_REQ_BODY:
		step_req_body(p, c, upstream, readable);
		return;
	case S_RESP_HEAD:
	case S_RESP_BODY:
		step_response(p, c, upstream, readable,
			      upstream && (events & (EPOLLHUP | EPOLLERR)));
		return;
	case S_CLOSING:
		step_closing(p, c, events);
		return;
	}
	/* A request was just decided: flush an answer, or the 200. */
	if (!(c = still(p, idx, gen)))
		return;
	if (c->state == S_CLOSING)
		step_closing(p, c, 0);
	else if (c->state == S_FIRST_FLIGHT)
		step(p, c, false, 0);
}

/* --- accept, timers, the loop -------------------------------------------- */

static void accept_all(struct proxy *p)
{
	for (;;) {
		int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of descriptors: pause instead of spinning. */
				struct epoll_event ev = { 0 };

				ev.data.u64 = ev_data(TAG_LISTEN, 0);
				epoll_ctl(p->epfd, EPOLL_CTL_MOD, p->lfd, &ev);
				p->accepting = false;
				p->accept_resume = now_ms() + 100;
			}
			return;
		}
		if (!conn_new(p, fd))
			close(fd); /* full: this client only */
	}
}

static void resume_accept(struct proxy *p)
{
	struct epoll_event ev = { 0 };

	ev.events = EPOLLIN;
	ev.data.u64 = ev_data(TAG_LISTEN, 0);
	if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, p->lfd, &ev) == 0)
		p->accepting = true;
}

static void expire(struct proxy *p, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < p->nconns; i++) {
		struct conn *c = p->conns[i];

		if (!c || !c->deadline || c->deadline > now)
			continue;
		switch (c->state) {
		case S_HEAD:
			if (c->cin.len == 0)
				conn_close(p, c); /* idle keep-alive or silent */
			else
				fail(p, c, 408, "timeout.head",
				     "the request head did not arrive in time");
			break;
		case S_FIRST_FLIGHT:
			fail(p, c, 0, "timeout.first-flight",
			     "the client sent nothing after CONNECT");
			break;
		case S_CONNECTING:
			fail(p, c, c->is_connect ? 0 : 502, "upstream.connect",
			     "connection timed out");
			break;
		case S_RESOLVE:
		case S_TUNNEL:
		case S_REQ_BODY:
		case S_RESP_HEAD:
		case S_RESP_BODY:
		case S_CLOSING:
			conn_close(p, c);
			break;
		}
	}
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

static bool sockaddr_to_addr(const struct sockaddr_storage *ss, struct addr *a,
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
	if (!p->t.head_ms)
		p->t.head_ms = 10000;
	if (!p->t.dns_ms)
		p->t.dns_ms = 5000;
	if (!p->t.connect_ms)
		p->t.connect_ms = 10000;
	if (!p->t.first_flight_ms)
		p->t.first_flight_ms = 10000;
	if (!p->t.idle_ms)
		p->t.idle_ms = 300000;
	p->cap = opts->max_conns ? opts->max_conns : 16384;
	p->conns = util_xcalloc(p->cap, sizeof(struct conn *));
	p->free_ids = util_xcalloc(p->cap, sizeof(*p->free_ids));
	p->lfd = opts->listen_fd;
	raise_fd_limit();

	if (getsockname(p->lfd, (struct sockaddr *)&ss, &sl) < 0 ||
	    !sockaddr_to_addr(&ss, &p->self, &p->self_port)) {
		snprintf(err, errlen, "the listening socket has no IP address");
		goto fail;
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
	ev.events = EPOLLIN;
	ev.data.u64 = ev_data(TAG_LISTEN, 0);
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev) < 0) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		goto fail;
	}
	p->accepting = true;
	if (opts->signal_fd >= 0) {
		ev.events = EPOLLIN;
		ev.data.u64 = ev_data(TAG_SIGNAL, 0);
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, opts->signal_fd, &ev) < 0) {
			snprintf(err, errlen, "epoll: %s", strerror(errno));
			goto fail;
		}
	}
	p->dns = dns_new(p->epfd, (uint64_t)TAG_DNS << 32, p->policy->resolvers,
			 p->policy->nresolvers, p->t.dns_ms, err, errlen);
	if (!p->dns)
		goto fail;
	return p;
fail:
	if (p->epfd > 0)
		close(p->epfd);
	free(p->conns);
	free(p->free_ids);
	free(p);
	return NULL;
}

int proxy_set_policy(struct proxy *p, const struct policy *policy, char *err,
		     size_t errlen)
{
	if (dns_set_servers(p->dns, policy->resolvers, policy->nresolvers, err,
			    errlen) < 0)
		return -1;
	p->policy = policy;
	return 0;
}

void proxy_stop(struct proxy *p, unsigned int drain_ms)
{
	if (p->stopping)
		return;
	p->stopping = true;
	p->stop_deadline = now_ms() + drain_ms;
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->lfd, NULL);
	p->accepting = false;
}

int proxy_run(struct proxy *p)
{
	struct epoll_event evs[256];
	uint64_t last_sweep = now_ms();

	for (;;) {
		uint64_t now = now_ms();
		int timeout = 1000, n, i;

		if (p->stopping && (p->live == 0 || now >= p->stop_deadline))
			break;
		if (!p->accepting && !p->stopping && now >= p->accept_resume)
			resume_accept(p);
		timeout = dns_next_timeout_ms(p->dns, timeout);
		n = epoll_wait(p->epfd, evs, (int)ARRAY_SIZE(evs), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (i = 0; i < n; i++) {
			uint32_t low = (uint32_t)evs[i].data.u64;
			struct conn *c;

			switch ((enum tag)(evs[i].data.u64 >> 32)) {
			case TAG_LISTEN:
				if (!p->stopping)
					accept_all(p);
				break;
			case TAG_SIGNAL: {
				struct signalfd_siginfo si;

				while (read(p->o.signal_fd, &si, sizeof(si)) ==
				       (ssize_t)sizeof(si))
					if (p->o.on_signal &&
					    !p->o.on_signal(p->o.signal_arg, &si))
						proxy_stop(p, 0);
				break;
			}
			case TAG_CLIENT:
			case TAG_UPSTREAM:
				c = conn_get(p, low);
				if (c)
					step(p, c, (evs[i].data.u64 >> 32) == TAG_UPSTREAM,
					     evs[i].events);
				break;
			case TAG_DNS:
				dns_handle(p->dns, (int)low, evs[i].events);
				break;
			}
		}
		dns_process_timeouts(p->dns);
		now = now_ms();
		if (now - last_sweep >= 1000 || p->stopping) {
			last_sweep = now;
			expire(p, p->stopping && now >= p->stop_deadline ? UINT64_MAX : now);
		}
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
			conn_close(p, p->conns[i]);
	while (p->npool > 0) {
		p->npool--;
		close(p->pool[p->npool][0]);
		close(p->pool[p->npool][1]);
	}
	dns_free(p->dns);
	close(p->epfd);
	close(p->lfd);
	free(p->conns);
	free(p->free_ids);
	free(p);
}
