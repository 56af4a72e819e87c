/* SPDX-License-Identifier: Apache-2.0
 * exchange.c - the HTTP exchange: request head, filters, bodies both ways,
 * response head, keep-alive.
 *
 * DOC: Theory of Operation
 *
 * One module serves HTTP wherever the proxy speaks it:
 *
 *  - the proxy's own requests: absolute-form http:// (any method), each
 *    decided on its own (upstream.c) and sent over a new upstream
 *    connection with "Connection: close"; origin-form is refused there;
 *  - "inner" connections: HTTP inside a CONNECT tunnel (its first flight
 *    was HTTP/1.x; later a TLS-intercepted tunnel), where the target is
 *    fixed to the CONNECT host and port, already checked. Requests are
 *    origin-form; every one must carry a Host naming that host (and that
 *    port, when it names one), else 403 egress.host_mismatch: a tunnel
 *    approved for one name never reaches another virtual host of a
 *    shared front end. The upstream connection is kept between requests
 *    while both sides keep it; Upgrade: websocket is passed, and after
 *    the upstream's 101 the bytes are relayed (tunnel.c): untouched, or,
 *    what the upstream sends, through the transform a filter installs
 *    (the secret filter's WebSocket scrubber). Interim heads and the 101
 *    head are parsed and written from copies the filters may edit.
 *
 * Heads are parsed strictly (http.c) and their fields copied out
 * (struct filter_request, struct filter_response) before the head is
 * consumed: every decision reads the copies. Requests are written
 * upstream from the copies: hop-by-hop headers dropped, Host from the
 * checked target, framing written from the parsed values so that proxy
 * and upstream cannot disagree where a message ends. Response framing is
 * rewritten the same way; a response whose body a filter transforms is
 * re-framed as chunked (HTTP/1.1 client) or delimited by close.
 *
 * Filters (filter.h) are called in their table order at the request
 * head, on each decoded body slice (or once with the whole body, which
 * a filter may replace: Content-Length is then the new length), at the
 * response head and on each decoded response slice, and hear the
 * outcome when the exchange ends. A filter may pend: the connection
 * then reads nothing until proxy_resume().
 *
 * Coded answers (decode.c): requests on an intercepted connection ask
 * for identity; an answer with a Content-Encoding there anyway, or with
 * a transfer coding before chunked on any connection, is decoded before
 * the filters see it (the scrubber reads plain bytes), relayed without
 * its coding and re-framed. Its head waits for the first decoded byte,
 * so that a coding the proxy does not know, too many codings, or a body
 * that does not decode are answered 502 (upstream.coding); a failure
 * after that cuts the answer. The decoder runs only while the client
 * takes its output, so a bomb costs a bounded buffer, then a cut at the
 * bound on the decoded size.
 *
 * A filter's transform may hold the head until its first output (a body
 * read whole before anything of it is relayed): a cut before then is a
 * 502. A filter may ask for the request again instead of relaying an
 * answer (an OAuth 401): when the answer is replayable (HTTP/1.1 kept
 * alive on both sides, a request body none or read whole, the answer's
 * end framed, not decoded, not sent again already) it is read and
 * dropped, and the request goes once more, from the copies the filters
 * left, on the same upstream connection.
 *
 * Bodies stream both ways with bounded buffers: a side is read only while
 * the other has room (BUF_HIGH), interim 1xx answers only as fast as the
 * client takes them, and no total time limit applies while bytes move
 * (server-sent events). An error in a body that is already being
 * forwarded closes both sides with a proxy.error receipt; an error before
 * any of the response is written is answered (400, 502).
 */
#include "answer.h"
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "decode.h"
#include "h2.h"
#include "http.h"
#include "util.h"

#define HEAD_MAX (8192 + 32768 + 16)
#define BUF_HIGH ((size_t)64 * 1024) /* stop reading while this much is queued */

struct exchange {
	uint32_t seq;                /* requests served on this connection */
	bool active;                 /* a request is in progress */
	/* the request, copied */
	struct filter_request rq;
	char *method, *path, *query;
	struct host_target host;     /* as the request named it */
	struct host_target conn_host; /* where the connection goes */
	bool port_explicit;
	int version_minor;
	bool keep_alive, head_only, ws, expect_continue;
	enum http_body req_body;
	uint64_t req_left;
	struct http_chunked req_ch;
	bool req_done;               /* the whole request body is in */
	bool head_sent;              /* the request head went upstream */
	bool collecting;             /* reading the whole body first */
	uint64_t whole_max;
	struct buf whole;
	/* filters */
	struct filter_chain ch;
	/* the response */
	struct filter_response rs;
	char *resp_te;               /* Transfer-Encoding as validated */
	enum http_body resp_body;
	uint64_t resp_left;
	struct http_chunked resp_ch;
	bool resp_open;              /* its head is queued, its end is not */
	bool resp_keep_alive;
	bool upstream_keep_alive;
	bool transform;
	bool transform_changes_length; /* some transform may change it */
	bool rechunk;                /* transformed output goes out chunked */
	uint64_t bytes_up, bytes_down;
	enum filter_outcome outcome;
	bool outcome_set;
	/* a coded answer (a content coding from an intercepted upstream,
	 * a transfer coding from any), decoded here */
	struct decode *dec;
	struct decode_codings codings;
	struct buf held;             /* its head, until its first decoded byte */
	bool filter_transform;       /* a filter writes the bytes to send */
	bool dec_in_done;            /* the coded body's framing ended */
	bool dec_blocked;            /* decoded bytes wait for the client */
	bool up_eof;                 /* the upstream closed: the rest is in uin */
	/* a filter holds the head until its transform's first bytes */
	bool hold;
	const char *hold_rule, *hold_reason; /* the 502 if it cuts first */
	/* a filter asked for the request again (filter_transform.retry) */
	bool discard;                /* the answer is read and dropped */
	bool retried;                /* the request went a second time */
	/* a response filter waits for proxy_resume() */
	size_t resp_next;            /* the response_head hook to run next */
	char head_cl[24];            /* HEAD's Content-Length, relayed */
	size_t slice_wait;           /* 1 + the filter whose response_body
					waits at the last slice, 0: none */
	struct buf slice_out;        /* what the others wrote of that slice */
};

static void step_head(struct conn *c, bool upstream, uint32_t events);
static void step_body(struct conn *c, bool upstream, uint32_t events);
static bool response_filters(struct conn *c);
static void response_complete(struct conn *c);
static void run_filters(struct conn *c);

static void set_outcome(struct exchange *x, enum filter_outcome o)
{
	if (!x->outcome_set) {
		x->outcome = o;
		x->outcome_set = true;
	}
}

/* Ends the current request's filters and copies: @outcome unless one
 * was set on the way. */
static void request_reset(struct exchange *x, enum filter_outcome outcome)
{
	if (x->active) {
		struct filter_stats st;
		size_t i;

		set_outcome(x, outcome);
		st.status = x->rs.status;
		st.bytes_up = x->bytes_up;
		st.bytes_down = x->bytes_down;
		for (i = 0; i < x->ch.n; i++)
			if (x->ch.f[i].ops->done)
				x->ch.f[i].ops->done(x->ch.f[i].st, x->outcome, &st);
	}
	free(x->method);
	free(x->path);
	free(x->query);
	free(x->resp_te);
	free(x->rs.reason);
	free(x->rq.target);
	filter_headers_free(&x->rq.headers);
	filter_headers_free(&x->rs.headers);
	buf_free(&x->whole);
	decode_free(x->dec);
	buf_free(&x->held);
	buf_free(&x->slice_out);
	{
		uint32_t seq = x->seq;

		memset(x, 0, sizeof(*x));
		x->seq = seq;
	}
}

void exchange_free(struct conn *c, enum filter_outcome outcome)
{
	struct exchange *x = c->x;

	if (!x)
		return;
	c->x = NULL; /* before the hooks: they may not re-enter */
	request_reset(x, outcome);
	free(x);
}

bool exchange_response_open(const struct conn *c)
{
	return c->x && c->x->resp_open;
}

void exchange_begin(struct conn *c, bool inner)
{
	c->inner = inner;
	c->tunnel = false;
	conn_enter(c, CONN_HEAD);
	if (inner) /* the first flight is in cin */
		step_head(c, false, 0);
}

/* --- failing -------------------------------------------------------------- */

static void fail(struct conn *c, int status, const char *rule, const char *reason,
		 enum filter_outcome outcome)
{
	struct verdict v;

	if (c->x)
		set_outcome(c->x, outcome);
	verdict_set(&v, VERDICT_FAIL, status, rule, reason);
	(void)answer_apply(c, &v);
}

/* --- the request head ------------------------------------------------------- */

static bool is_framing(struct http_slice name)
{
	return http_slice_eq_ci(name, "content-length") ||
	       http_slice_eq_ci(name, "transfer-encoding");
}

static char *slice_dup(struct http_slice s)
{
	return util_xstrndup(s.ptr ? s.ptr : "", s.len);
}

static bool lists_token(const struct http_headers *hs, const char *name,
			const char *token)
{
	int i;

	for (i = http_header_find(hs, name, 0); i >= 0;
	     i = http_header_find(hs, name, (size_t)i + 1)) {
		const char *v = hs->h[i].value.ptr;
		size_t len = hs->h[i].value.len, p = 0, tl = strlen(token);

		while (p < len) {
			size_t q = p;

			while (q < len && v[q] != ',')
				q++;
			{
				size_t a = p, b = q;

				while (a < b && (v[a] == ' ' || v[a] == '\t'))
					a++;
				while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
					b--;
				if (b - a == tl && strncasecmp(v + a, token, tl) == 0)
					return true;
			}
			p = q + 1;
		}
	}
	return false;
}

/* Copies what later steps decide on out of the parsed head. Inside a
 * tunnel the request goes where the connection goes (@c's target and
 * port): every filter decides on that, never on the Host header. */
static void copy_request(struct exchange *x, const struct conn *c,
			 const struct http_request *req)
{
	size_t i;

	x->active = true;
	x->seq++;
	x->method = slice_dup(req->method);
	x->path = req->path.len ? slice_dup(req->path) : util_xstrdup("/");
	x->query = req->has_query ? slice_dup(req->query) : NULL;
	x->host = req->host;
	x->port_explicit = req->port_explicit;
	x->version_minor = req->version_minor;
	x->keep_alive = req->keep_alive;
	x->head_only = strcmp(x->method, "HEAD") == 0;
	x->req_body = req->body;
	x->req_left = req->content_length;
	x->req_done = req->body == HTTP_BODY_NONE ||
		      (req->body == HTTP_BODY_LENGTH && req->content_length == 0);
	if (req->body == HTTP_BODY_CHUNKED)
		http_chunked_init(&x->req_ch, NULL);
	{
		int e = http_header_find(&req->headers, "expect", 0);

		x->expect_continue = e >= 0 &&
				     http_slice_eq_ci(req->headers.h[e].value, "100-continue");
	}
	for (i = 0; i < req->headers.count; i++) {
		const struct http_header *h = &req->headers.h[i];
		char *name, *value;

		if (http_slice_eq_ci(h->name, "host") || is_framing(h->name) ||
		    http_is_hop_by_hop(&req->headers, h->name))
			continue;
		name = slice_dup(h->name);
		value = slice_dup(h->value);
		filter_headers_add(&x->rq.headers, name, value);
		free(name);
		free(value);
	}
	x->rq.method = x->method;
	x->rq.named_host = &x->host;
	if (c->inner) {
		x->conn_host = c->target;
		x->rq.host = &x->conn_host;
		x->rq.port = c->port;
		x->rq.named_port = req->port_explicit ? req->port : c->port;
	} else {
		x->rq.host = &x->host;
		x->rq.port = req->port;
		x->rq.named_port = req->port;
	}
	x->rq.path = x->path;
	x->rq.query = x->query;
	x->rq.named_port_explicit = x->port_explicit;
	x->rq.body = req->body;
	x->rq.content_length = req->content_length;
}

/* Inside a tunnel: does the request name the tunnel's host (and port)? */
static bool host_matches(const struct conn *c, const struct http_request *req)
{
	if (!req->has_host || req->host.is_addr != c->target.is_addr ||
	    strcmp(req->host.name, c->target.name) != 0)
		return false;
	return !req->port_explicit || req->port == c->port;
}

static void parse_head(struct conn *c)
{
	struct http_request req;
	enum http_result r = http_parse_request(c->cin.data, c->cin.len, &req, NULL);
	struct exchange *x;

	if (r == HTTP_INCOMPLETE) {
		if (c->cin.len >= HEAD_MAX) {
			c->target_known = c->inner;
			fail(c, 400, "http.too-large", "request head too large",
			     FILTER_OUTCOME_REFUSED);
		} else if (c->client_eof) {
			conn_close(c); /* gone before its request was whole */
		}
		return;
	}
	if (r != HTTP_OK) {
		char why[VERDICT_REASON_MAX];

		snprintf(why, sizeof(why), "malformed request: %s%s%s",
			 req.error ? req.error : "malformed",
			 req.error_detail ? ": " : "",
			 req.error_detail ? req.error_detail : "");
		c->target_known = false;
		fail(c, 400, r == HTTP_TOO_LARGE ? "http.too-large" : "http.malformed",
		     why, FILTER_OUTCOME_REFUSED);
		return;
	}
	c->requests++;
	/* Inside a tunnel the connection stays the CONNECT's (its receipts
	 * name the tunnel); a request's own method is in the exchange. */
	if (!c->inner) {
		size_t mlen = req.method.len < sizeof(c->method) - 1 ? req.method.len
								     : sizeof(c->method) - 1;

		memcpy(c->method, req.method.ptr, mlen);
		c->method[mlen] = '\0';
	}
	if (req.is_connect) {
		if (c->inner) {
			c->target_known = true;
			fail(c, 400, "http.form", "CONNECT inside a tunnel is not accepted",
			     FILTER_OUTCOME_REFUSED);
			return;
		}
		c->target = req.host;
		c->port = req.port;
		c->target_known = true;
		/* What follows the head is the tunnel's first flight. */
		buf_consume(&c->cin, req.head_len);
		exchange_free(c, FILTER_OUTCOME_COMPLETE);
		tunnel_begin(c);
		return;
	}
	if (!c->inner) {
		c->target = req.host;
		c->port = req.port;
		c->target_known = req.has_host;
		if (req.form == HTTP_FORM_ORIGIN || !req.has_host) {
			fail(c, 400, "http.form",
			     "origin-form requests are not accepted by a forward proxy",
			     FILTER_OUTCOME_REFUSED);
			return;
		}
	}
	if (!c->x)
		c->x = util_xcalloc(1, sizeof(*c->x));
	x = c->x;
	copy_request(x, c, &req);
	x->rq.inner = c->inner;
	x->rq.client_tls = !endpoint_plain(&c->client);
	/* An intercepted answer is read (scrubbed, metered): ask for it
	 * uncompressed. One that comes coded anyway is decoded. */
	if (c->intercept)
		filter_headers_set(&x->rq.headers, "Accept-Encoding", "identity");
	x->ws = c->inner && lists_token(&req.headers, "upgrade", "websocket") &&
		lists_token(&req.headers, "connection", "upgrade");
	x->rq.upgrade = http_header_find(&req.headers, "upgrade", 0) >= 0;
	/* From here on only the copies are read: the head is consumed. */
	buf_consume(&c->cin, req.head_len);
	if (!c->inner) {
		upstream_decide(c);
		return;
	}
	c->target_known = true;
	if (!host_matches(c, &req)) {
		struct verdict v;

		verdict_set(&v, VERDICT_DENY, 403, "egress.host_mismatch",
			    "the request's Host is not the tunnel's host");
		v.extra = json_pack("{s:s, s:s?}", "request_method", x->method,
				    "request_host", x->host.name[0] ? x->host.name : NULL);
		set_outcome(x, FILTER_OUTCOME_REFUSED);
		if (!answer_apply(c, &v))
			return;
		x->outcome_set = false;
	}
	run_filters(c);
}

/* --- filters ---------------------------------------------------------------- */

static struct filter_ref ref_of(const struct conn *c)
{
	struct filter_ref r = { c->index, c->gen, c->x ? c->x->seq : 0 };

	return r;
}

static void pend(struct conn *c,
		 void (*resume)(struct conn *c, enum filter_result r, struct verdict *v))
{
	c->on_resume = resume;
	conn_enter(c, CONN_PENDING);
	conn_watch(c, false, c->cout.len ? EPOLLOUT : 0);
	conn_watch(c, true, 0);
}

/* The verdict of a filter; true when the exchange goes on. */
static bool filter_verdict(struct conn *c, struct verdict *v)
{
	if (v->action == VERDICT_ALLOW) {
		verdict_clear(v);
		return true;
	}
	set_outcome(c->x, FILTER_OUTCOME_REFUSED);
	if (!answer_apply(c, v))
		return false;
	c->x->outcome_set = false;
	return true;
}

static void proceed(struct conn *c);
static void send_head(struct conn *c);

static void resume_head(struct conn *c, enum filter_result r, struct verdict *v)
{
	if (r == FILTER_VERDICT && !filter_verdict(c, v))
		return;
	c->x->ch.next++;
	run_filters(c);
}

/* What the filters asked of the request (filter_chain_request). */
static void take_asks(struct exchange *x, const struct filter_asks *a)
{
	if (!a->whole_body || x->req_body == HTTP_BODY_NONE)
		return;
	x->collecting = true;
	if (!x->whole_max || a->max_body < x->whole_max)
		x->whole_max = a->max_body;
}

static void run_filters(struct conn *c)
{
	struct exchange *x = c->x;
	struct proxy *p = c->p;
	struct filter_asks asks = { false, 0 };
	struct verdict v;
	enum filter_result r;

	if (x->ch.next == 0 && x->ch.n == 0) {
		x->rq.policy = c->policy ? c->policy : p->policy;
		filter_chain_attach(&x->ch, p->filters, p->nfilters, &x->rq);
	}
	while ((r = filter_chain_request(&x->ch, &x->rq, NULL, ref_of(c), &asks, &v)) !=
	       FILTER_CONTINUE) {
		take_asks(x, &asks);
		if (r == FILTER_PENDING) {
			pend(c, resume_head);
			return;
		}
		if (!filter_verdict(c, &v))
			return;
		verdict_clear(&v);
		x->ch.next++;
	}
	take_asks(x, &asks);
	if (x->collecting) {
		if (x->req_body == HTTP_BODY_LENGTH && x->req_left > x->whole_max) {
			fail(c, 413, "http.body-too-large",
			     "the request body is larger than a filter reads",
			     FILTER_OUTCOME_REFUSED);
			return;
		}
		/* The client waits for a 100 before it sends the body: the
		 * upstream sees the request only once it is whole. */
		if (x->expect_continue) {
			buf_puts(&c->cout, "HTTP/1.1 100 Continue\r\n\r\n");
			filter_headers_remove(&x->rq.headers, "expect");
		}
		conn_enter(c, CONN_REQ_BODY);
		step_body(c, false, 0);
		return;
	}
	proceed(c);
}

static void resume_whole(struct conn *c, enum filter_result r, struct verdict *v);

/* The whole body is in x->whole: every filter sees it, in order. */
static void run_whole(struct conn *c)
{
	struct exchange *x = c->x;
	struct verdict v;
	enum filter_result r;

	while ((r = filter_chain_request(&x->ch, &x->rq, &x->whole, ref_of(c), NULL, &v)) !=
	       FILTER_CONTINUE) {
		if (r == FILTER_PENDING) {
			pend(c, resume_whole);
			return;
		}
		if (!filter_verdict(c, &v))
			return;
		verdict_clear(&v);
		x->ch.next++;
	}
	proceed(c);
}

static void resume_whole(struct conn *c, enum filter_result r, struct verdict *v)
{
	if (r == FILTER_VERDICT && !filter_verdict(c, v))
		return;
	c->x->ch.next++;
	run_whole(c);
}

/* A streamed request body slice (read-only for the filters). */
static bool filter_request_slice(struct conn *c, const char *d, size_t n, bool last)
{
	struct exchange *x = c->x;
	struct verdict v;
	enum filter_result r;
	size_t i = 0;

	while ((r = filter_chain_slice(&x->ch, &i, d, n, last, ref_of(c), &v)) !=
	       FILTER_CONTINUE) {
		if (r == FILTER_PENDING) {
			/* only a whole body can wait */
			fail(c, 502, "proxy.filter",
			     "a filter cannot wait in the middle of a body",
			     FILTER_OUTCOME_REFUSED);
			return false;
		}
		if (!filter_verdict(c, &v))
			return false;
		verdict_clear(&v);
		i++;
	}
	return true;
}

/* The request goes upstream: over the open connection (inner), or a new
 * one. */
static void proceed(struct conn *c)
{
	if (c->inner && endpoint_open(&c->upstream)) {
		if (c->upstream.h2up && c->x->rq.upgrade) {
			/* no Upgrade over h2 (h2up.c): its own connection */
			intercept_reopen(c);
			return;
		}
		/* opened before the first flight was read (tunnel.c, ports
		 * other than 80 and 443): the tunnel is recorded now */
		if (!c->allow_recorded && !c->shadowed)
			answer_record_allow(c, json_pack("{s:b}", "tls", 0));
		send_head(c);
		return;
	}
	if (c->intercept) {
		/* the upstream of an intercepted tunnel is its verified TLS
		 * connection: once gone, never replaced by a plain one */
		fail(c, 0, "upstream.closed", "the upstream closed the intercepted connection",
		     FILTER_OUTCOME_UPSTREAM_ERROR);
		return;
	}
	upstream_connect(c);
}

void exchange_addressed(struct conn *c)
{
	run_filters(c);
}

void exchange_upstream_ready(struct conn *c)
{
	send_head(c);
}

void exchange_connected(struct conn *c)
{
	if (c->intercept) {
		intercept_reopened(c); /* after intercept_reopen() */
		return;
	}
	if (c->inner)
		answer_record_allow(c, json_pack("{s:b}", "tls", 0));
	else
		answer_record_allow(c, NULL);
	send_head(c);
}

static void put_host(struct buf *b, const struct host_target *h, bool explicit_port,
		     uint16_t port)
{
	if (h->is_addr && h->addr.family == AF_INET6)
		buf_printf(b, "Host: [%s]", h->name);
	else
		buf_printf(b, "Host: %s", h->name);
	if (explicit_port)
		buf_printf(b, ":%u", port);
	buf_puts(b, "\r\n");
}

static void send_head(struct conn *c)
{
	struct exchange *x = c->x;
	struct buf *b = &c->uout;
	size_t i;

	for (i = 0; i < x->ch.n && !x->retried; i++)
		if (x->ch.f[i].ops->request_sent)
			x->ch.f[i].ops->request_sent(x->ch.f[i].st);
	if (x->rq.target)
		buf_printf(b, "%s %s HTTP/1.1\r\n", x->method, x->rq.target);
	else
		buf_printf(b, "%s %s%s%s HTTP/1.1\r\n", x->method, x->path,
			   x->query ? "?" : "", x->query ? x->query : "");
	put_host(b, &x->host, x->port_explicit, x->rq.named_port);
	for (i = 0; i < x->rq.headers.count; i++)
		buf_printf(b, "%s: %s\r\n", x->rq.headers.h[i].name,
			   x->rq.headers.h[i].value);
	if (x->collecting)
		buf_printf(b, "Content-Length: %zu\r\n", x->whole.len);
	else if (x->req_body == HTTP_BODY_LENGTH)
		buf_printf(b, "Content-Length: %llu\r\n",
			   (unsigned long long)x->req_left);
	else if (x->req_body == HTTP_BODY_CHUNKED)
		buf_puts(b, "Transfer-Encoding: chunked\r\n");
	if (x->ws)
		buf_puts(b, "Connection: upgrade\r\nUpgrade: websocket\r\n");
	else if (!c->inner || !x->keep_alive)
		buf_puts(b, "Connection: close\r\n");
	buf_puts(b, "\r\n");
	if (x->collecting) {
		/* kept until the answer's head: the request may go again */
		buf_append(b, x->whole.data, x->whole.len);
		x->bytes_up += x->whole.len;
		x->req_done = true;
	}
	x->head_sent = true;
	conn_enter(c, x->req_done ? CONN_RESP_HEAD : CONN_REQ_BODY);
	step_body(c, false, 0);
}

/* --- the request body ---------------------------------------------------------- */

/* Moves request body bytes from cin on: to uout as they are framed
 * (streaming) or, decoded, to x->whole (collecting). Returns false when
 * @c was closed or answered. */
static bool pump_request(struct conn *c)
{
	struct exchange *x = c->x;

	while (!x->req_done && c->cin.len > 0) {
		struct http_slice data = { NULL, 0 };
		size_t used;

		if (x->req_body == HTTP_BODY_LENGTH) {
			used = c->cin.len < x->req_left ? c->cin.len : (size_t)x->req_left;
			data.ptr = c->cin.data;
			data.len = used;
			x->req_left -= used;
			x->req_done = x->req_left == 0;
		} else {
			enum http_chunked_result r =
				http_chunked_feed(&x->req_ch, c->cin.data, c->cin.len,
						  &used, &data);

			if (r == HTTP_CHUNKED_BAD) {
				/* Once the head is upstream nothing can be
				 * answered: both sides close. */
				fail(c, x->head_sent ? 0 : 400, "http.malformed",
				     x->req_ch.error, FILTER_OUTCOME_REFUSED);
				return false;
			}
			x->req_done = r == HTTP_CHUNKED_DONE;
		}
		if (x->collecting) {
			if (data.len > x->whole_max - x->whole.len) {
				fail(c, 413, "http.body-too-large",
				     "the request body is larger than a filter reads",
				     FILTER_OUTCOME_REFUSED);
				return false;
			}
			buf_append(&x->whole, data.ptr, data.len);
		} else {
			if (data.len && !filter_request_slice(c, data.ptr, data.len, false))
				return false;
			buf_append(&c->uout, c->cin.data, used);
			x->bytes_up += data.len;
		}
		buf_consume(&c->cin, used);
	}
	if (x->req_done && !x->collecting && x->ch.n &&
	    !filter_request_slice(c, NULL, 0, true))
		return false;
	return true;
}

/* --- the response ------------------------------------------------------------- */

static void copy_response_headers(struct exchange *x, const struct http_response *resp)
{
	size_t i;

	filter_headers_free(&x->rs.headers);
	for (i = 0; i < resp->headers.count; i++) {
		const struct http_header *h = &resp->headers.h[i];
		char *name, *value;

		if (is_framing(h->name) || http_is_hop_by_hop(&resp->headers, h->name))
			continue;
		name = slice_dup(h->name);
		value = slice_dup(h->value);
		filter_headers_add(&x->rs.headers, name, value);
		free(name);
		free(value);
	}
}

static void write_headers(struct buf *b, const struct filter_headers *hs)
{
	size_t i;

	for (i = 0; i < hs->count; i++)
		buf_printf(b, "%s: %s\r\n", hs->h[i].name, hs->h[i].value);
}

/* --- coded answers --------------------------------------------------------- */

/* A refused or failed coding: 502 while the head is held, else the
 * answer is cut; either way a receipt names the coding. */
static void coding_fail(struct conn *c, const char *coding, const char *codings,
			const char *why)
{
	struct exchange *x = c->x;
	struct verdict v;

	verdict_setf(&v, VERDICT_FAIL, x->resp_open ? 0 : 502, "upstream.coding",
		     "the answer's %s coding: %s", coding, why);
	v.extra = json_pack("{s:s, s:s, s:s, s:s}", "request_method", x->method,
			    "request_path", x->path, "coding", coding, "codings", codings);
	set_outcome(x, x->resp_open ? FILTER_OUTCOME_CUT : FILTER_OUTCOME_UPSTREAM_ERROR);
	(void)answer_apply(c, &v);
}

/* The codings of the final response head (every Content-Encoding field
 * in order, on an intercepted connection; then Transfer-Encoding's
 * before chunked, which is this hop's to undo on any connection). With
 * one, the body is decoded before the filters see it, and the head says
 * no coding. Returns false when the answer was refused: a coding the
 * proxy cannot decode, or more than it undoes. */
static bool decode_setup(struct conn *c)
{
	struct exchange *x = c->x;
	struct decode_codings cs = { .n = 0 };
	enum decode_codings_result r;
	char bad[64], listed[256];
	size_t content;

	if (x->resp_body == HTTP_BODY_NONE)
		return true;
	/* content codings undone: the head changes */
	r = decode_codings_head(&x->rs.headers, c->intercept, x->resp_te, &cs, &content, bad,
				sizeof(bad), listed, sizeof(listed));
	if (r != DECODE_CODINGS_OK) {
		coding_fail(c, bad, listed,
			    r == DECODE_CODINGS_TOO_MANY
				    ? "more codings than the proxy undoes (2): not relayed unread"
				    : "the proxy cannot decode it: not relayed unread");
		return false;
	}
	if (cs.n == 0)
		return true;
	if (content > 0)
		decode_strip_head(&x->rs.headers);
	x->codings = cs;
	x->dec = decode_new(&cs, DECODE_MAX_OUT_DEFAULT);
	return true;
}

/* The held head of a decoded answer goes out. */
static void release_head(struct conn *c)
{
	struct exchange *x = c->x;

	if (x->resp_open)
		return;
	buf_append(&c->cout, x->held.data, x->held.len);
	buf_free(&x->held);
	x->resp_open = true;
}

static int response_slice(struct conn *c, const char *d, size_t n, bool last);

/* Gives the decoder what it takes of the coded body in uin. Returns 1
 * when something moved, 0 when more must be read, -1 when @c was closed
 * or answered. */
static int decode_feed(struct conn *c, bool eof)
{
	struct exchange *x = c->x;
	struct http_slice data = { NULL, 0 };
	size_t avail, used = 0;
	bool done = false;

	if (x->resp_body == HTTP_BODY_LENGTH && x->resp_left == 0) {
		done = true;
	} else if (c->uin.len == 0) {
		if (!eof)
			return 0;
		if (x->resp_body != HTTP_BODY_UNTIL_CLOSE) {
			/* truncated: the client sees a cut answer */
			set_outcome(x, FILTER_OUTCOME_CUT);
			conn_close(c);
			return -1;
		}
		done = true;
	} else {
		avail = decode_room(x->dec);
		if (avail > c->uin.len)
			avail = c->uin.len;
		if (x->resp_body == HTTP_BODY_UNTIL_CLOSE) {
			used = avail;
			data.ptr = c->uin.data;
			data.len = used;
		} else if (x->resp_body == HTTP_BODY_LENGTH) {
			used = avail < x->resp_left ? avail : (size_t)x->resp_left;
			data.ptr = c->uin.data;
			data.len = used;
			x->resp_left -= used;
			done = x->resp_left == 0;
		} else {
			enum http_chunked_result r =
				http_chunked_feed(&x->resp_ch, c->uin.data, avail, &used, &data);

			if (r == HTTP_CHUNKED_BAD) {
				fail(c, x->resp_open ? 0 : 502, "upstream.malformed",
				     x->resp_ch.error,
				     x->resp_open ? FILTER_OUTCOME_CUT
						  : FILTER_OUTCOME_UPSTREAM_ERROR);
				return -1;
			}
			done = r == HTTP_CHUNKED_DONE;
		}
		ASSERT(data.len <= avail);
		if (data.len) {
			size_t put = decode_put(x->dec, data.ptr, data.len);

			ASSERT(put == data.len);
		}
		buf_consume(&c->uin, used);
	}
	if (done) {
		x->dec_in_done = true;
		decode_end(x->dec);
	}
	return used > 0 || done ? 1 : 0;
}

/* pump_response() for a decoded answer: coded bytes from uin into the
 * decoder, decoded ones through the filters to cout, while the client
 * takes them (the decoder holds the rest: memory stays bounded whatever
 * the ratio). */
static int pump_decoded(struct conn *c, bool eof)
{
	struct exchange *x = c->x;
	char piece[16384];

	eof = eof || x->up_eof;
	x->dec_blocked = false;
	for (;;) {
		size_t got = 0;
		enum decode_result r;
		int f;

		if (c->cout.len >= BUF_HIGH) {
			x->dec_blocked = true;
			return 0;
		}
		r = decode_get(x->dec, piece, sizeof(piece), &got);
		switch (r) {
		case DECODE_OUTPUT:
			if (!x->hold)
				release_head(c);
			if (response_slice(c, piece, got, false) < 0)
				return -1;
			continue;
		case DECODE_DONE:
			if (!x->hold)
				release_head(c);
			f = response_slice(c, NULL, 0, true);
			return f < 0 ? -1 : f == 0 ? 2 : 1;
		case DECODE_ERROR: {
			char codings[64];

			decode_codings_format(&x->codings, codings, sizeof(codings));
			coding_fail(c, decode_coding_name(decode_error_coding(x->dec)), codings,
				    decode_error(x->dec));
			return -1;
		}
		case DECODE_NEED_INPUT:
		case DECODE_RESULT_COUNT:
		default:
			break;
		}
		ASSERT(!x->dec_in_done); /* an ended decoder needs nothing */
		f = decode_feed(c, eof);
		if (f <= 0)
			return f;
	}
}

/* An interim head (1xx) or the 101 of an upgrade: copied, shown to the
 * filters (which may scrub its reason phrase and fields), written to the
 * client from the copies. The hop-by-hop fields stay in a 101 (Upgrade,
 * Connection), the framing ones go. */
static void relay_interim(struct conn *c, const struct http_response *resp)
{
	struct exchange *x = c->x;
	struct filter_response rs;
	size_t i;

	memset(&rs, 0, sizeof(rs));
	rs.status = resp->status;
	rs.reason = slice_dup(resp->reason_phrase);
	rs.body = HTTP_BODY_NONE;
	for (i = 0; i < resp->headers.count; i++) {
		const struct http_header *h = &resp->headers.h[i];
		char *name, *value;

		if (is_framing(h->name) ||
		    (resp->status != 101 && http_is_hop_by_hop(&resp->headers, h->name)))
			continue;
		name = slice_dup(h->name);
		value = slice_dup(h->value);
		filter_headers_add(&rs.headers, name, value);
		free(name);
		free(value);
	}
	for (i = 0; i < x->ch.n; i++)
		if (x->ch.f[i].ops->response_interim)
			x->ch.f[i].ops->response_interim(x->ch.f[i].st, &rs);
	buf_printf(&c->cout, "HTTP/1.1 %u %s\r\n", rs.status, rs.reason);
	write_headers(&c->cout, &rs.headers);
	buf_puts(&c->cout, "\r\n");
	free(rs.reason);
	filter_headers_free(&rs.headers);
}

/* After a 101: the transform a filter installs for what the upstream
 * sends from now on. Returns false when two filters want one (closed). */
static bool take_upgraded(struct conn *c)
{
	struct exchange *x = c->x;
	size_t i;

	for (i = 0; i < x->ch.n; i++) {
		struct filter_stream *fs;

		if (!x->ch.f[i].ops->upgraded)
			continue;
		fs = x->ch.f[i].ops->upgraded(x->ch.f[i].st);
		if (!fs)
			continue;
		if (c->upgraded) {
			fs->free(fs);
			fail(c, 0, "proxy.filter", "two filters transform one upgraded connection",
			     FILTER_OUTCOME_CUT);
			return false;
		}
		c->upgraded = fs;
	}
	return true;
}

/* Parses the response heads in uin: interim ones are relayed, a 101
 * switches an inner websocket exchange to a tunnel, the final one is
 * written with its framing and moves to RESP_BODY. Returns false when
 * @c left the exchange (closed, answered, tunnel). */
static bool response_head(struct conn *c)
{
	struct exchange *x = c->x;
	struct http_response resp;

	for (;;) {
		enum http_result r = http_parse_response(c->uin.data, c->uin.len, &resp,
							 NULL, x->head_only);

		if (r == HTTP_INCOMPLETE)
			return true;
		if (r != HTTP_OK) {
			fail(c, 502, "upstream.malformed",
			     resp.error ? resp.error : "malformed response",
			     FILTER_OUTCOME_UPSTREAM_ERROR);
			return false;
		}
		if (resp.status == 101) {
			if (!x->ws || c->state != CONN_RESP_HEAD) {
				fail(c, 502, "upstream.malformed",
				     "the upstream switched protocols without being asked",
				     FILTER_OUTCOME_UPSTREAM_ERROR);
				return false;
			}
			/* The upstream agreed: its head through the
			 * filters, then whatever each side sends (what the
			 * upstream sends through a filter's transform, when
			 * one is installed). */
			x->rs.status = 101;
			relay_interim(c, &resp);
			buf_consume(&c->uin, resp.head_len);
			if (!take_upgraded(c))
				return false;
			set_outcome(x, FILTER_OUTCOME_COMPLETE);
			exchange_free(c, FILTER_OUTCOME_COMPLETE);
			tunnel_from_exchange(c);
			return false;
		}
		if (resp.status < 200) {
			/* interim: the final head follows */
			relay_interim(c, &resp);
			buf_consume(&c->uin, resp.head_len);
			continue;
		}
		break;
	}
	x->rs.status = resp.status;
	free(x->rs.reason);
	x->rs.reason = slice_dup(resp.reason_phrase);
	x->rs.body = resp.body;
	x->rs.content_length = resp.content_length;
	x->resp_body = resp.body;
	x->resp_left = resp.content_length;
	x->upstream_keep_alive = resp.keep_alive;
	copy_response_headers(x, &resp);
	if (resp.body == HTTP_BODY_CHUNKED) {
		/* The codings before "chunked" (gzip, ...) are the body's:
		 * pass the list on as the parser validated it. */
		int te = http_header_find(&resp.headers, "transfer-encoding", 0);

		x->resp_te = te >= 0 ? slice_dup(resp.headers.h[te].value)
				     : util_xstrdup("chunked");
		http_chunked_init(&x->resp_ch, NULL);
	}
	if (x->head_only) {
		/* the answer to HEAD has no body, but its Content-Length is
		 * the GET's: clients read it (S3's HeadObject) */
		int k = http_header_find(&resp.headers, "content-length", 0);
		struct http_slice v = k >= 0 ? resp.headers.h[k].value : (struct http_slice){ 0 };
		size_t j = 0;

		while (j < v.len && j + 1 < sizeof(x->head_cl) && v.ptr[j] >= '0' &&
		       v.ptr[j] <= '9')
			j++;
		if (j > 0 && j == v.len)
			memcpy(x->head_cl, v.ptr, j);
	}
	/* the head is copied: from here on only the copies count */
	buf_consume(&c->uin, resp.head_len);
	/* An early answer (the request body not yet sent): the rest of the
	 * request is never sent and the connection ends with it. */
	x->resp_keep_alive = x->keep_alive && c->state == CONN_RESP_HEAD &&
			     resp.body != HTTP_BODY_UNTIL_CLOSE &&
			     (!c->inner || x->upstream_keep_alive);
	if (!decode_setup(c))
		return false;
	/* sent again on the same connection: once, over a connection both
	 * sides keep, with a body none or read whole (x->whole), after the
	 * whole request went, and with an answer whose end is framed */
	x->rs.replayable = c->inner && !x->retried && !x->ws && !x->dec && x->keep_alive &&
			   x->upstream_keep_alive && c->state == CONN_RESP_HEAD && x->req_done &&
			   (x->req_body == HTTP_BODY_NONE || x->collecting) &&
			   resp.body != HTTP_BODY_UNTIL_CLOSE;
	x->rs.can_wait = true;
	x->resp_next = 0;
	return response_filters(c);
}

static void resume_response_head(struct conn *c, enum filter_result r, struct verdict *v)
{
	struct exchange *x = c->x;

	if (r == FILTER_VERDICT) {
		if (!filter_verdict(c, v))
			return;
		x->resp_next++; /* shadow: on past the one that decided */
	}
	/* FILTER_CONTINUE: the hook that waited is called again */
	if (response_filters(c))
		step_body(c, true, 0);
}

/* The final head through the response filters from x->resp_next on,
 * then written. Returns false when @c left the exchange (closed,
 * answered) or a filter waits (CONN_PENDING: resume_response_head()). */
static bool response_filters(struct conn *c)
{
	struct exchange *x = c->x;
	struct buf *head;

	for (; x->resp_next < x->ch.n; x->resp_next++) {
		size_t i = x->resp_next;
		struct filter_transform tf = { .enabled = false };
		struct verdict v;
		enum filter_result r;

		if (!x->ch.f[i].ops->response_head)
			continue;
		verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
		r = x->ch.f[i].ops->response_head(x->ch.f[i].st, &x->rs, &tf, &v);
		if (r == FILTER_PENDING) {
			verdict_clear(&v);
			pend(c, resume_response_head);
			return false;
		}
		if (r == FILTER_VERDICT && !filter_verdict(c, &v))
			return false;
		verdict_clear(&v);
		if (tf.retry && x->rs.replayable) {
			/* this answer is dropped; the request goes again
			 * once it is read (resend()) */
			x->discard = true;
			conn_enter(c, CONN_RESP_BODY);
			return true;
		}
		if (tf.enabled && x->resp_body != HTTP_BODY_NONE) {
			x->transform = true;
			if (!tf.keeps_length)
				x->transform_changes_length = true;
			if (tf.hold_head && !x->hold) {
				x->hold = true;
				x->hold_rule = tf.hold_rule;
				x->hold_reason = tf.hold_reason;
			}
		}
	}
	buf_free(&x->whole);
	if (x->dec) {
		/* the decoded bytes go out re-framed, through the filters'
		 * transform or as they are */
		x->filter_transform = x->transform;
		x->transform = true;
		x->transform_changes_length = true;
	}
	/* the head, from the copies (a decoded answer's waits for its
	 * first byte: until then a failure is still a 502) */
	head = x->dec || x->hold ? &x->held : &c->cout;
	buf_printf(head, "HTTP/1.1 %u %s\r\n", x->rs.status,
		   x->rs.reason ? x->rs.reason : "");
	write_headers(head, &x->rs.headers);
	/* A transform that keeps the length keeps Content-Length too. */
	if (x->transform && (x->transform_changes_length || x->resp_body != HTTP_BODY_LENGTH)) {
		x->rechunk = x->version_minor >= 1;
		if (x->rechunk)
			buf_puts(head, "Transfer-Encoding: chunked\r\n");
		else
			x->resp_keep_alive = false; /* delimited by close */
	} else if (x->resp_body == HTTP_BODY_LENGTH) {
		buf_printf(head, "Content-Length: %llu\r\n",
			   (unsigned long long)x->rs.content_length);
	} else if (x->resp_body == HTTP_BODY_CHUNKED) {
		buf_printf(head, "Transfer-Encoding: %s\r\n", x->resp_te);
	} else if (x->head_cl[0]) {
		buf_printf(head, "Content-Length: %s\r\n", x->head_cl);
	}
	buf_printf(head, "Connection: %s\r\n\r\n",
		   x->resp_keep_alive ? "keep-alive" : "close");
	x->resp_open = !x->dec && !x->hold;
	conn_enter(c, CONN_RESP_BODY);
	return true;
}

/* A slice's output (@ok: every filter took it) to the client. Returns
 * @ok; when false @c was closed or answered. Frees @out. */
static bool slice_out(struct conn *c, struct buf *out, bool last, bool ok)
{
	struct exchange *x = c->x;

	if (ok && (out->len || last))
		release_head(c);
	if (ok && x->transform && out->len) {
		if (x->rechunk)
			buf_printf(&c->cout, "%zx\r\n", out->len);
		buf_append(&c->cout, out->data, out->len);
		if (x->rechunk)
			buf_puts(&c->cout, "\r\n");
		x->bytes_down += out->len;
	}
	if (ok && x->transform && last && x->rechunk)
		buf_puts(&c->cout, "0\r\n\r\n");
	buf_free(out);
	if (!ok && !x->resp_open) {
		/* a filter refused it while its head was held: 502 */
		fail(c, 502, x->hold_rule ? x->hold_rule : "proxy.filter",
		     x->hold_reason ? x->hold_reason : "a filter refused the answer",
		     FILTER_OUTCOME_UPSTREAM_ERROR);
	} else if (!ok) {
		/* a filter cut it: the client sees a truncated response */
		set_outcome(x, FILTER_OUTCOME_CUT);
		conn_close(c);
	}
	return ok;
}

/* One decoded response slice: through the transform, or observed.
 * Returns 1, 0 when a transform waits at the last slice (the caller
 * pends: resume_response_body()), -1 when @c was closed or answered. */
static int response_slice(struct conn *c, const char *d, size_t n, bool last)
{
	struct exchange *x = c->x;
	struct buf out = { 0 };
	size_t i, wait = 0;
	bool ok = true;

	for (i = 0; i < x->ch.n && ok; i++) {
		int r;

		if (!x->ch.f[i].ops->response_body)
			continue;
		r = x->ch.f[i].ops->response_body(x->ch.f[i].st, d, n, last,
						  x->transform ? &out : NULL);
		if (r < 0 || (r > 0 && (wait || !last || !x->transform)))
			ok = false;
		else if (r > 0)
			wait = i + 1;
	}
	if (ok && x->dec && !x->filter_transform && n)
		buf_append(&out, d, n); /* decoded, relayed as it is */
	if (ok && wait) {
		x->slice_wait = wait;
		if (out.len)
			buf_append(&x->slice_out, out.data, out.len);
		buf_free(&out);
		return 0;
	}
	return slice_out(c, &out, last, ok) ? 1 : -1;
}

/* The transform that waited at the last slice is resumed: it writes the
 * rest, and the answer is complete. */
static void resume_response_body(struct conn *c, enum filter_result r, struct verdict *v)
{
	struct exchange *x = c->x;
	size_t i = x->slice_wait - 1;
	struct buf out = x->slice_out;
	int w;

	x->slice_wait = 0;
	memset(&x->slice_out, 0, sizeof(x->slice_out));
	if (r == FILTER_VERDICT && !filter_verdict(c, v)) {
		buf_free(&out);
		return;
	}
	w = x->ch.f[i].ops->response_body(x->ch.f[i].st, NULL, 0, true, &out);
	if (!slice_out(c, &out, true, w == 0))
		return;
	conn_enter(c, CONN_RESP_BODY);
	response_complete(c);
}

/* Moves response body bytes from uin to cout. Returns 1 when the
 * response is complete, 0 when more is to come, 2 when a filter waits
 * at its end (the caller pends), -1 when @c was closed. */
/* pump_response()'s answer for response_slice()'s of the last slice. */
static int slice_result(int r)
{
	return r < 0 ? -1 : r == 0 ? 2 : 1;
}

static int pump_response(struct conn *c, bool eof)
{
	struct exchange *x = c->x;

	if (x->dec)
		return pump_decoded(c, eof);
	/* A body that is empty by its framing (1xx-free no-body statuses,
	 * HEAD, Content-Length: 0) is complete with its head: nothing is
	 * awaited from the upstream, and a transform still ends its output
	 * (the terminal chunk of a re-chunked answer). */
	if (x->resp_body == HTTP_BODY_NONE ||
	    (x->resp_body == HTTP_BODY_LENGTH && x->resp_left == 0))
		return x->discard ? 1 : slice_result(response_slice(c, NULL, 0, true));
	while (c->uin.len > 0) {
		struct http_slice data = { NULL, 0 };
		size_t used;
		bool done = false;

		if (x->resp_body == HTTP_BODY_UNTIL_CLOSE) {
			used = c->uin.len;
			data.ptr = c->uin.data;
			data.len = used;
		} else if (x->resp_body == HTTP_BODY_LENGTH) {
			used = c->uin.len < x->resp_left ? c->uin.len : (size_t)x->resp_left;
			data.ptr = c->uin.data;
			data.len = used;
			x->resp_left -= used;
			done = x->resp_left == 0;
		} else {
			enum http_chunked_result r =
				http_chunked_feed(&x->resp_ch, c->uin.data, c->uin.len,
						  &used, &data);

			if (r == HTTP_CHUNKED_BAD) {
				fail(c, 0, "upstream.malformed", x->resp_ch.error,
				     FILTER_OUTCOME_CUT);
				return -1;
			}
			done = r == HTTP_CHUNKED_DONE;
		}
		if (!x->transform && !x->discard) {
			buf_append(&c->cout, c->uin.data, used);
			x->bytes_down += data.len;
		}
		if ((data.len || done) && x->ch.n && !x->discard) {
			int r = response_slice(c, data.ptr, data.len, done);

			if (r < 0)
				return -1;
			if (r == 0) {
				buf_consume(&c->uin, used);
				return 2;
			}
		}
		buf_consume(&c->uin, used);
		if (done)
			return 1;
	}
	if (eof && x->resp_body == HTTP_BODY_UNTIL_CLOSE)
		return x->ch.n ? slice_result(response_slice(c, NULL, 0, true)) : 1;
	return 0;
}

static void record_request(struct conn *c)
{
	struct exchange *x = c->x;
	json_t *s;

	if (!c->inner)
		return;
	s = conn_subject(c);
	json_object_set_new(s, "method", json_string(x->method));
	json_object_set_new(s, "path", json_string(x->path));
	json_object_set_new(s, "status", json_integer(x->rs.status));
	json_object_set_new(s, "bytes_up", json_integer((json_int_t)x->bytes_up));
	json_object_set_new(s, "bytes_down", json_integer((json_int_t)x->bytes_down));
	if (x->dec) {
		char codings[64];

		decode_codings_format(&x->codings, codings, sizeof(codings));
		json_object_set_new(s, "decoded", json_string(codings));
	}
	if (c->upstream.h2up) { /* carried over h2 (h2up.c) */
		json_object_set_new(s, "protocol", json_string("http/1.1"));
		json_object_set_new(s, "upstream_protocol", json_string("h2"));
	}
	conn_record(c, "http.request", RECEIPT_ALLOW, c->rule_id, s, "relayed");
}

/* The response is relayed: keep the client for its next request, or end. */
static void response_done(struct conn *c)
{
	struct exchange *x = c->x;
	bool keep = x->resp_keep_alive;

	x->resp_open = false;
	record_request(c);
	request_reset(x, FILTER_OUTCOME_COMPLETE);
	if (!c->inner || !keep)
		conn_drop_upstream(c);
	else
		conn_watch(c, true, EPOLLIN | EPOLLRDHUP); /* notice its close */
	if (!keep || c->client_eof) {
		/* the answer's end, our FIN, then a short linger */
		exchange_free(c, FILTER_OUTCOME_COMPLETE);
		conn_finish(c);
		return;
	}
	conn_enter(c, CONN_HEAD);
	step_head(c, false, 0);
}

/* The whole response is in cout: sent as far as the client takes it,
 * then the exchange ends. */
static void response_complete(struct conn *c)
{
	int r = endpoint_flush(&c->client, &c->cout);

	if (r < 0 && r != -EAGAIN) {
		conn_close(c);
		return;
	}
	conn_touch(c);
	response_done(c);
}

/* The dropped answer is read: the request goes again, from the copies
 * the filters left (filter_transform.retry). */
static void resend(struct conn *c)
{
	struct exchange *x = c->x;

	x->discard = false;
	x->retried = true;
	free(x->resp_te);
	x->resp_te = NULL;
	free(x->rs.reason);
	filter_headers_free(&x->rs.headers);
	memset(&x->rs, 0, sizeof(x->rs));
	x->resp_body = HTTP_BODY_NONE;
	x->resp_left = 0;
	memset(&x->resp_ch, 0, sizeof(x->resp_ch));
	send_head(c);
}

/* Reads the upstream (bounded by what the client has still to take)
 * and parses what came. */
static void step_body(struct conn *c, bool upstream, uint32_t events)
{
	struct exchange *x = c->x;
	bool hangup = upstream && (events & (EPOLLHUP | EPOLLERR));
	bool up_ready = upstream && (events & (c->upstream.rd_need | EPOLLRDHUP |
						 EPOLLHUP | EPOLLERR));
	bool cl_ready = !upstream && (events & (c->client.rd_need | EPOLLRDHUP));
	bool moved = false;
	int r;

	/* the request side */
	if ((cl_ready || endpoint_pending(&c->client)) && c->state == CONN_REQ_BODY &&
	    c->uout.len < BUF_HIGH) {
		ssize_t n = endpoint_read_buf(&c->client, &c->cin, c->cin.len + 16384);

		if (n == 0 || (n < 0 && n != -EAGAIN && n != -ENOBUFS)) {
			set_outcome(x, FILTER_OUTCOME_CLIENT_GONE);
			conn_close(c);
			return;
		}
		moved = n > 0;
	}
	if (c->state == CONN_REQ_BODY) {
		if (!pump_request(c))
			return;
		if (x->req_done) {
			if (x->collecting && !x->head_sent) {
				x->ch.next = 0;
				run_whole(c);
				return;
			}
			conn_enter(c, CONN_RESP_HEAD);
		}
	}
	if (x->head_sent) {
		size_t before = c->uout.len;

		r = endpoint_flush(&c->upstream, &c->uout);
		if (r < 0 && r != -EAGAIN) {
			fail(c, exchange_response_open(c) ? 0 : 502, "upstream.write",
			     strerror(-r), FILTER_OUTCOME_UPSTREAM_ERROR);
			return;
		}
		moved = moved || c->uout.len < before;
	}
	/* the response side: an interim answer or an early final one may
	 * come while the body is still going up; not while the client lags
	 * behind (interim answers must not pile up), unless the upstream
	 * hung up (its last bytes are bounded by its socket buffer). */
	if (x->head_sent && (up_ready || endpoint_pending(&c->upstream)) &&
	    (c->cout.len < BUF_HIGH || hangup)) {
		bool eof = false;

		for (;;) {
			ssize_t n = endpoint_read_buf(&c->upstream, &c->uin,
						      c->uin.len + 16384);

			if (n > 0) {
				moved = true;
				if (c->uin.len < BUF_HIGH && !hangup)
					continue;
				break;
			}
			/* EOF, or an error: either way no more bytes */
			eof = n != -EAGAIN && n != -ENOBUFS;
			break;
		}
		if (eof) {
			if (c->state != CONN_RESP_BODY) {
				if (c->uin.len && !response_head(c))
					return;
				if (c->state != CONN_RESP_BODY) {
					fail(c, 502, "upstream.closed",
					     "the upstream closed before a complete response",
					     FILTER_OUTCOME_UPSTREAM_ERROR);
					return;
				}
			}
			r = pump_response(c, true);
			if (r < 0)
				return;
			if (r == 2) {
				/* a filter waits at the end: the upstream is
				 * done with */
				if (x->resp_body == HTTP_BODY_UNTIL_CLOSE || c->inner)
					x->resp_keep_alive = false;
				conn_drop_upstream(c);
				pend(c, resume_response_body);
				return;
			}
			if (r == 0 && x->dec && x->dec_blocked) {
				/* A decoded answer waits for the client: the
				 * rest of the upstream's bytes are in uin,
				 * pumped as the client takes them. */
				x->up_eof = true;
				if (x->resp_body == HTTP_BODY_UNTIL_CLOSE || c->inner)
					x->resp_keep_alive = false;
				endpoint_close(&c->upstream);
				buf_free(&c->uout);
			} else if (r == 0) {
				/* truncated: the client sees it */
				set_outcome(x, FILTER_OUTCOME_CUT);
				conn_close(c);
				return;
			} else {
				/* a response delimited by the close ends the
				 * connection; after a complete one the upstream
				 * is just gone, and inside a tunnel (or
				 * interception) the tunnel ends with it: a next
				 * request never goes over a connection of the
				 * proxy's choosing */
				if (x->discard) {
					fail(c, 502, "upstream.closed",
					     "the upstream closed before the request could go "
					     "again", FILTER_OUTCOME_UPSTREAM_ERROR);
					return;
				}
				if (x->resp_body == HTTP_BODY_UNTIL_CLOSE || c->inner)
					x->resp_keep_alive = false;
				conn_drop_upstream(c);
				response_done(c);
				return;
			}
		}
	}
	if (c->uin.len > 0 && (c->state == CONN_RESP_HEAD || c->state == CONN_REQ_BODY) &&
	    !response_head(c))
		return;
	if (c->state == CONN_RESP_BODY) {
		r = pump_response(c, false);
		if (r < 0)
			return;
		if (r == 2) {
			pend(c, resume_response_body);
			return;
		}
		if (r == 1 && x->discard) {
			resend(c);
			return;
		}
		if (r == 1) {
			response_complete(c);
			return;
		}
	}
	{
		size_t before = c->cout.len;

		r = endpoint_flush(&c->client, &c->cout);
		if (r < 0 && r != -EAGAIN) {
			set_outcome(x, FILTER_OUTCOME_CLIENT_GONE);
			conn_close(c);
			return;
		}
		moved = moved || c->cout.len < before;
	}
	if (moved)
		conn_touch(c);
	conn_watch(c, false,
		   endpoint_events(&c->client,
				   c->state == CONN_REQ_BODY && c->uout.len < BUF_HIGH,
				   c->cout.len > 0 || x->dec_blocked) |
			   (c->state == CONN_REQ_BODY ? EPOLLRDHUP : 0));
	if (x->head_sent)
		conn_watch(c, true, endpoint_events(&c->upstream, c->cout.len < BUF_HIGH,
						    c->uout.len > 0));
	else
		conn_watch(c, true, 0);
}

/* --- between requests ------------------------------------------------------------ */

static void step_head(struct conn *c, bool upstream, uint32_t events)
{
	if (upstream) {
		/* An inner connection's idle upstream: bytes out of turn or
		 * its close end the connection, as they would a tunnel. A
		 * TLS upstream may send records that carry no data (a TLS 1.3
		 * session ticket): reading them moves nothing. */
		if (!endpoint_plain(&c->upstream) && !(events & (EPOLLHUP | EPOLLERR))) {
			char b;

			if (endpoint_read(&c->upstream, &b, 1) == -EAGAIN) {
				conn_watch(c, true,
					   endpoint_events(&c->upstream, true, false) |
						   EPOLLRDHUP);
				return;
			}
		}
		/* The end of the last answer may still be queued for the
		 * client: it gets it, then our FIN. */
		conn_drop_upstream(c);
		exchange_free(c, FILTER_OUTCOME_COMPLETE);
		conn_finish(c);
		return;
	}
	/* TLS may hold a pipelined request already decrypted, which no
	 * epoll event announces. */
	if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
	    endpoint_pending(&c->client)) {
		size_t before = c->cin.len;
		ssize_t n = endpoint_read_buf(&c->client, &c->cin, HEAD_MAX);

		if (n == 0) {
			c->client_eof = true;
			if (c->cin.len == 0) {
				conn_close(c);
				return;
			}
		} else if (n < 0 && n != -EAGAIN && n != -ENOBUFS) {
			conn_close(c);
			return;
		}
		if (before == 0 && c->cin.len > 0)
			conn_touch(c); /* the head timeout runs from its first byte */
	}
	if (c->cout.len > 0) { /* the end of a previous response */
		int r = endpoint_flush(&c->client, &c->cout);
		if (r < 0 && r != -EAGAIN) {
			conn_close(c);
			return;
		}
		if (c->cout.len > 0) {
			conn_watch(c, false, endpoint_events(&c->client, false, true));
			return;
		}
	}
	if (c->client_eof && c->cin.len == 0) {
		conn_close(c);
		return;
	}
	conn_watch(c, false, c->client_eof ? 0 : EPOLLIN | EPOLLRDHUP);
	if (c->cin.len > 0) {
		parse_head(c);
		return;
	}
	/* Idle between requests: the buffers the last one grew (16 KiB
	 * and more each) go back until the next one comes. */
	buf_release_empty(&c->cin);
	buf_release_empty(&c->cout);
	buf_release_empty(&c->uin);
	buf_release_empty(&c->uout);
}

void exchange_step(struct conn *c, bool upstream, uint32_t events)
{
	switch (c->state) {
	case CONN_HEAD:
		step_head(c, upstream, events);
		return;
	case CONN_REQ_BODY:
	case CONN_RESP_HEAD:
	case CONN_RESP_BODY:
		step_body(c, upstream, events);
		return;
	case CONN_PENDING:
		if (!upstream && c->cout.len > 0) {
			int r = endpoint_flush(&c->client, &c->cout);

			if (r < 0 && r != -EAGAIN) {
				conn_close(c);
				return;
			}
			conn_watch(c, false, c->cout.len ? endpoint_events(&c->client, false, true)
							  : 0);
		}
		return;
	case CONN_RESOLVE:
	case CONN_FIRST_FLIGHT:
	case CONN_CONNECTING:
	case CONN_TLS_UPSTREAM:
	case CONN_TLS_CLIENT:
	case CONN_TUNNEL:
	case CONN_ANSWERING:
	case CONN_LINGER:
	case CONN_H2:
	case CONN_CLOSED:
	case CONN_STATE_COUNT:
	default:
		return;
	}
}

int exchange_resume(struct conn *c, uint32_t seq, enum filter_result r,
		    struct verdict *v)
{
	void (*fn)(struct conn *, enum filter_result, struct verdict *);

	if (c->h2)
		return h2_resume(c, seq, r, v);
	if (c->state != CONN_PENDING || !c->x || c->x->seq != seq || !c->on_resume) {
		verdict_clear(v);
		return -ESTALE;
	}
	fn = c->on_resume;
	c->on_resume = NULL;
	/* Every path out of fn enters a state of its own (connecting, the
	 * body, pending again, an answer). */
	fn(c, r, v);
	return 0;
}

const char *exchange_request(const struct conn *c, const char **path)
{
	const struct exchange *x = c->x;

	if (c->h2)
		return h2_request(c, path);
	*path = NULL;
	if (!x || !x->active || !x->method)
		return NULL;
	*path = x->path;
	return x->method;
}
