/* SPDX-License-Identifier: Apache-2.0
 * tunnel.c - CONNECT: the 200, the first flight, the relay.
 *
 * DOC: Theory of Operation
 *
 * After the rules and the address checks (upstream.c) the client gets
 * "200 Connection established" and its first flight is read, none of it
 * forwarded before it is classified:
 *
 *  - a TLS ClientHello (clienthello.c) must carry an SNI equal to the
 *    CONNECT host (egress.sni_mismatch otherwise); port 443 takes
 *    nothing else;
 *  - a first flight shaped like an HTTP/1.x request line is served as
 *    HTTP by the exchange (exchange.c, "inner" mode): every request in
 *    it must name the CONNECT host, so that a tunnel approved for one
 *    name never reaches another virtual host on a shared front end;
 *  - any other protocol passes to ports other than 80 and 443, recorded
 *    with "tls": false.
 *
 * On ports 80 and 443 the upstream is opened only once the first flight
 * is classified. On every other port (SPEC 5.1) servers may speak first
 * (SMTP, SSH, database banners): the upstream is opened at once and what
 * it says is relayed (early_step) while the client's bytes are held and
 * classified the same way, none forwarded before. A flight that stays
 * ambiguous (neither TLS, which must become a whole ClientHello, nor
 * decidably HTTP or not) is relayed as opaque after the ambiguity pause
 * of client silence (1 s); should its first line then complete an HTTP
 * request line, the tunnel is refused before that line's end goes
 * upstream (line_check), so the pause never skips the Host checks.
 *
 * The same first-flight bytes then go upstream unchanged. A TLS 1.3
 * client may have to send a second ClientHello after the server's
 * HelloRetryRequest; so that the name cannot change there, a tunnel
 * whose client offers TLS 1.3 starts relaying through user space: it
 * forwards the server's bytes while reading the first handshake message,
 * and holds the client's. A ServerHello ends the watch; a
 * HelloRetryRequest makes the next ClientHello pass the same SNI check
 * before any of it is forwarded.
 *
 * Then, when both endpoints are plain sockets, bytes move with splice()
 * through a pipe per direction borrowed from the proxy's pool while bytes
 * are in flight: they never enter user space and an idle tunnel holds
 * only its two sockets. A TLS endpoint (an intercepted connection that
 * switched protocols) relays through the endpoint calls instead. A side
 * that ends (EOF) has its FIN passed on once its bytes are delivered; a
 * side that hangs up still gets the bytes it is owed, then the tunnel
 * ends.
 */
#include "answer.h"
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clienthello.h"
#include "http.h"
#include "util.h"

#define SPLICE_MAX (1 << 20) /* bytes moved by one splice() call */
#define RELAY_HIGH ((size_t)64 * 1024) /* buffered relay: stop reading */
#define PIPE_SIZE (1 << 20)    /* asked of each pipe (F_SETPIPE_SZ) */

enum watch_phase {
	WATCH_SERVER_HELLO, /* reading the server's first handshake bytes */
	WATCH_SECOND_HELLO, /* after a HelloRetryRequest: the client's next
			       ClientHello, held */
	WATCH_DONE,
};

struct tls_watch {
	enum watch_phase phase;
	struct serverhello_watch sh;
};

/* A tunnel borrows one pipe per direction only while bytes are in flight,
 * so an idle tunnel holds its two sockets and nothing else. */
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

/* Returns an empty pipe to the pool, or closes it. */
static void pipe_put(struct proxy *p, int fds[2], bool empty)
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

/* One direction of a spliced tunnel. */
struct half {
	int pipe[2];     /* borrowed from the pool while bytes are in flight */
	size_t pending;  /* bytes in the pipe */
	bool eof;        /* the source finished */
	bool shut;       /* the destination got our FIN */
};

/* The tunnel's part of a connection (c->t): only this file sees it. */
struct tunnel {
	int8_t tls;           /* first flight: 1 TLS, 0 not, -1 not read */
	char sni[HOSTNAME_MAX + 1];
	bool spliced;         /* relaying with splice() */
	bool early;           /* ports other than 80 and 443: the upstream
				 is opened before the first flight is
				 classified, and what it says first is
				 relayed */
	uint64_t flight_start;/* ms: the first byte of an early first
				 flight (its pauses never outlast the
				 first-flight timeout from there) */
	struct buf *line;     /* an ambiguous first flight relayed as
				 opaque that could still begin an HTTP
				 request line: the first line so far,
				 checked before each later client byte is
				 forwarded (line_check) */
	struct half c2u, u2c;
	struct half *draining;/* one side gone: the half it is still owed */
	struct tls_watch *watch; /* TLS hello watch (HelloRetryRequest) */
};

/* c->t, made the first time @c becomes a tunnel. */
static void part_new(struct conn *c)
{
	if (c->t)
		return;
	c->t = util_xcalloc(1, sizeof(*c->t));
	c->t->c2u.pipe[0] = c->t->c2u.pipe[1] = -1;
	c->t->u2c.pipe[0] = c->t->u2c.pipe[1] = -1;
	c->t->tls = -1;
}

void tunnel_free(struct conn *c)
{
	if (!c->t)
		return;
	free(c->t->watch);
	c->t->watch = NULL;
	if (c->t->line) {
		buf_free(c->t->line);
		free(c->t->line);
		c->t->line = NULL;
	}
}

static void release_half(struct proxy *p, struct half *h)
{
	if (h->pipe[0] < 0)
		return;
	pipe_put(p, h->pipe, h->pending == 0);
	h->pipe[0] = h->pipe[1] = -1;
	h->pending = 0;
}

void tunnel_close(struct conn *c)
{
	if (!c->t)
		return;
	tunnel_free(c);
	release_half(c->p, &c->t->c2u);
	release_half(c->p, &c->t->u2c);
	free(c->t);
	c->t = NULL;
}

bool tunnel_early(const struct conn *c)
{
	return c->t && c->t->early;
}

const char *tunnel_sni(const struct conn *c)
{
	return c->t && c->t->tls == 1 ? c->t->sni : NULL;
}

uint64_t tunnel_first_flight_ms(const struct conn *c)
{
	const struct proxy_timeouts *to = &c->p->t;
	uint64_t spent;

	/* The upstream already open: idle while the client is silent, the
	 * ambiguity pause once it has said something that is neither TLS
	 * nor yet HTTP. */
	if (!tunnel_early(c) || !endpoint_open(&c->upstream) || tunnel_flight_tls(c))
		return to->first_flight_ms;
	if (!c->cin.len)
		return to->idle_ms;
	/* a flight trickled byte by byte is still decided within the
	 * first-flight timeout of its first */
	spent = c->t->flight_start ? util_now_ms() - c->t->flight_start : 0;
	if (spent >= to->first_flight_ms)
		return 1;
	return to->first_flight_ms - spent < to->ambiguous_ms ? to->first_flight_ms - spent
							      : to->ambiguous_ms;
}

static json_t *tls_extra(const struct conn *c)
{
	if (c->t->tls == 1)
		return json_pack("{s:b, s:s}", "tls", 1, "sni", c->t->sni);
	return json_pack("{s:b}", "tls", 0);
}

/* The upstream failed (a reset, TLS cut short): nothing more goes to it,
 * the client still gets what was read from it (cout), then our FIN, and
 * the connection ends (conn_finish). */
static void upstream_gone(struct conn *c)
{
	conn_drop_upstream(c);
	buf_free(&c->cin);
	tunnel_free(c);
	conn_finish(c);
}

void tunnel_begin(struct conn *c)
{
	part_new(c);
	c->tunnel = true;
	c->t->tls = -1;
	c->t->sni[0] = '\0';
	c->t->spliced = false;
	upstream_decide(c);
}

void tunnel_addressed(struct conn *c)
{
	if (c->port != 80 && c->port != 443) {
		/* Servers speak first on these ports (SMTP, SSH, database
		 * banners): the upstream is opened at once and what it
		 * says is relayed while the client's first flight is read
		 * and classified, none of it forwarded before. The 200
		 * waits for the connection: a refused or timed-out one is
		 * still answered 502. Mode off inspects nothing: the
		 * tunnel starts as it connects. */
		if (c->policy->mode == POLICY_MODE_OFF) {
			if (!c->transparent)
				buf_puts(&c->cout, "HTTP/1.1 200 Connection established\r\n\r\n");
		} else {
			c->t->early = true;
		}
		upstream_connect(c);
		return;
	}
	/* A redirected connection never asked the proxy for a tunnel. */
	if (!c->transparent)
		buf_puts(&c->cout, "HTTP/1.1 200 Connection established\r\n\r\n");
	conn_enter(c, CONN_FIRST_FLIGHT);
	tunnel_step(c, false, 0);
}

/* The first flight is decided (or allowed as it is): the tunnel goes on
 * over the upstream opened early, or opens it now. */
static void flight_done(struct conn *c)
{
	c->t->early = false;
	if (endpoint_open(&c->upstream))
		tunnel_connected(c);
	else
		upstream_connect(c);
}

/* Ports other than 80 and 443: the first flight cannot grow any more (the
 * client's FIN, or the ambiguity pause of client silence passed). What
 * is not TLS is relayed as an opaque protocol; an unfinished ClientHello
 * is not ambiguous and never relayed. */
static void flight_final(struct conn *c)
{
	if (tunnel_flight_tls(c)) {
		conn_close(c);
		return;
	}
	c->t->tls = 0;
	if (c->cin.len && http_sniff_request(c->cin.data, c->cin.len) == HTTP_INCOMPLETE) {
		/* It may still become an HTTP request line: waiting for the
		 * pause must not make HTTP skip its Host checks. The rest
		 * of the first line is checked before it is forwarded
		 * (line_check). */
		c->t->line = util_xcalloc(1, sizeof(*c->t->line));
		buf_append(c->t->line, c->cin.data, c->cin.len);
	}
	flight_done(c);
}

bool tunnel_first_flight_expired(struct conn *c)
{
	if (!c->t->early || !endpoint_open(&c->upstream) || tunnel_flight_tls(c))
		return false;
	if (c->cin.len == 0) {
		conn_close(c); /* idle both ways, as an idle tunnel */
		return true;
	}
	flight_final(c);
	return true;
}

static void first_flight_deny(struct conn *c, const char *rule,
			      const char *reason, json_t *extra)
{
	struct verdict v;

	verdict_set(&v, VERDICT_DENY, 0, rule, reason);
	v.extra = extra;
	/* the client already has its 200: a deny closes the tunnel */
	if (answer_apply(c, &v))
		flight_done(c);
}

static void first_flight(struct conn *c)
{
	struct clienthello ch;
	enum clienthello_result r;

	if (c->policy->mode == POLICY_MODE_OFF) {
		/* off: nothing is checked (docs/PROXY.md). */
		flight_done(c);
		return;
	}
	r = clienthello_parse((const uint8_t *)c->cin.data, c->cin.len, &ch);
	if (r == CLIENTHELLO_INCOMPLETE) {
		if (c->cin.len < CLIENTHELLO_FLIGHT_MAX)
			return;
		r = CLIENTHELLO_MALFORMED;
	}
	c->t->tls = r != CLIENTHELLO_NOT_TLS ? 1 : 0;
	if (r == CLIENTHELLO_NOT_TLS) {
		enum http_result h;

		if (c->port == 443) {
			first_flight_deny(c, "egress.sni_mismatch",
					  "the first flight to port 443 is not a TLS ClientHello",
					  json_pack("{s:b, s:s}", "tls", 0, "error",
						    ch.reason ? ch.reason : "not TLS"));
			return;
		}
		h = http_sniff_request(c->cin.data, c->cin.len);
		if (h == HTTP_INCOMPLETE)
			return;
		if (h == HTTP_OK) {
			/* HTTP inside the tunnel: served request by request
			 * (over the upstream when it was opened early) */
			c->t->early = false;
			c->tunnel = false;
			exchange_begin(c, true);
			return;
		}
		if (c->port == 80) {
			first_flight_deny(c, "egress.protocol",
					  "the first flight to port 80 is neither HTTP nor TLS",
					  json_pack("{s:b}", "tls", 0));
			return;
		}
		flight_done(c); /* SSH and other protocols */
		return;
	}
	if (r != CLIENTHELLO_OK) {
		first_flight_deny(c, "egress.sni_mismatch", "malformed TLS ClientHello",
				  json_pack("{s:b, s:s}", "tls", 1, "error",
					    ch.reason ? ch.reason : "malformed"));
		return;
	}
	if (ch.has_sni)
		(void)util_strlcpy(c->t->sni, ch.sni, sizeof(c->t->sni));
	if (ch.offers_tls13 && !c->t->watch) {
		c->t->watch = util_xcalloc(1, sizeof(*c->t->watch));
		c->t->watch->phase = WATCH_SERVER_HELLO;
		serverhello_watch_init(&c->t->watch->sh);
	}
	if (!ch.has_sni || c->target.is_addr || strcmp(ch.sni, c->target.name) != 0) {
		first_flight_deny(c, "egress.sni_mismatch",
				  !ch.has_sni ? "the TLS ClientHello has no SNI"
					      : "the SNI is not the CONNECT host",
				  json_pack("{s:s?}", "sni", ch.has_sni ? ch.sni : NULL));
		return;
	}
	if (intercept_wanted(c)) {
		/* TLS ends here: no HelloRetryRequest to watch, the proxy
		 * answers the ClientHello itself. */
		c->intercept = true;
		tunnel_free(c);
	}
	flight_done(c);
}

/* Ports other than 80 and 443, the upstream open: the server's bytes go
 * to the client as they come; the client's are held in cin and
 * classified (first_flight); client silence after a flight that is
 * neither TLS nor yet HTTP relays it as opaque (the deadline, conn.c). */
static void early_step(struct conn *c, bool upstream, uint32_t events)
{
	const uint32_t rd = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
	size_t had = c->cin.len;
	bool client_eof = false;
	int r;

	if (!events || (upstream && (events & rd))) {
		while (c->cout.len < RELAY_HIGH) {
			ssize_t n = endpoint_read_buf(&c->upstream, &c->cout, RELAY_HIGH);

			if (n > 0) {
				if (c->cin.len == 0)
					conn_enter(c, CONN_FIRST_FLIGHT); /* not idle */
				continue;
			}
			if (n != -EAGAIN && n != -ENOBUFS) {
				/* The server ended first: the client gets what
				 * it said, then the end. Nothing of the client
				 * went upstream. */
				c->t->tls = 0;
				answer_record_allow(c, tls_extra(c));
				upstream_gone(c);
				return;
			}
			break;
		}
	}
	if (!events || (!upstream && (events & rd))) {
		ssize_t n = endpoint_read_buf(&c->client, &c->cin, CLIENTHELLO_FLIGHT_MAX);

		if (n == 0)
			client_eof = true;
		else if (n < 0 && n != -EAGAIN && n != -ENOBUFS) {
			conn_close(c);
			return;
		}
	}
	r = endpoint_flush(&c->client, &c->cout);
	if (r < 0 && r != -EAGAIN) {
		conn_close(c);
		return;
	}
	/* (bytes that came with the CONNECT head are in cin from the
	 * start: the first call classifies them) */
	if (c->cin.len > had || (!events && c->cin.len > 0)) {
		/* Each client byte starts the ambiguity pause again; an
		 * unfinished ClientHello keeps the deadline of its first. */
		if (!c->t->flight_start)
			c->t->flight_start = util_now_ms();
		if (had == 0 || !tunnel_flight_tls(c)) {
			conn_enter(c, CONN_FIRST_FLIGHT);
			if (c->cin.len && !tunnel_flight_tls(c) &&
			    (!c->p->soon || c->deadline < c->p->soon))
				c->p->soon = c->deadline;
		}
		first_flight(c);
		if (conn_closed(c) || c->state != CONN_FIRST_FLIGHT || !c->t->early)
			return;
	}
	if (client_eof) {
		flight_final(c);
		return;
	}
	conn_watch(c, false, EPOLLIN | EPOLLRDHUP | (c->cout.len ? EPOLLOUT : 0));
	conn_watch(c, true, c->cout.len < RELAY_HIGH ? EPOLLIN | EPOLLRDHUP : 0);
}

static void step_first_flight(struct conn *c, bool upstream, uint32_t events)
{
	int r;

	if (c->t->early) {
		early_step(c, upstream, events);
		return;
	}
	r = endpoint_flush(&c->client, &c->cout);
	bool readable = events & (EPOLLIN | EPOLLRDHUP);

	if (r < 0 && r != -EAGAIN) {
		conn_close(c);
		return;
	}
	if (readable) {
		ssize_t n = endpoint_read_buf(&c->client, &c->cin, CLIENTHELLO_FLIGHT_MAX);

		if (n == 0 || (n < 0 && n != -EAGAIN && n != -ENOBUFS)) {
			conn_close(c);
			return;
		}
	}
	if (c->cin.len > 0) {
		first_flight(c);
		if (c->state != CONN_FIRST_FLIGHT)
			return;
	}
	/* EPOLLOUT only while the 200 is still queued: an always writable
	 * socket would spin the loop while the hello trickles. */
	conn_watch(c, false, EPOLLIN | EPOLLRDHUP | (c->cout.len ? EPOLLOUT : 0));
}

void tunnel_connected(struct conn *c)
{
	if (c->t->early) {
		/* opened before the first flight: the 200, then read it */
		if (!c->transparent)
			buf_puts(&c->cout, "HTTP/1.1 200 Connection established\r\n\r\n");
		conn_enter(c, CONN_FIRST_FLIGHT);
		early_step(c, false, 0);
		return;
	}
	if (c->intercept) {
		intercept_connected(c);
		return;
	}
	/* The first flight, unchanged. */
	buf_append(&c->uout, c->cin.data, c->cin.len);
	buf_free(&c->cin);
	answer_record_allow(c, tls_extra(c));
	conn_enter(c, CONN_TUNNEL);
	tunnel_step(c, false, 0);
}

/* What the upstream sent after a 101 (in uin) goes to the client
 * through the installed transform. Returns false when @c was closed. */
static bool upgraded_out(struct conn *c)
{
	int r;

	if (c->uin.len == 0)
		return true;
	r = c->upgraded->feed(c->upgraded, c->uin.data, c->uin.len, &c->cout);
	buf_free(&c->uin);
	if (r < 0) {
		conn_close(c);
		return false;
	}
	return true;
}

void tunnel_from_exchange(struct conn *c)
{
	part_new(c);
	c->tunnel = true;
	c->t->spliced = false;
	/* bytes the client sent after its request head go upstream */
	buf_append(&c->uout, c->cin.data, c->cin.len);
	buf_free(&c->cin);
	/* and the upstream's after its 101 go to the client */
	if (c->upgraded) {
		if (!upgraded_out(c))
			return;
	} else {
		buf_append(&c->cout, c->uin.data, c->uin.len);
		buf_free(&c->uin);
	}
	conn_enter(c, CONN_TUNNEL);
	tunnel_step(c, false, 0);
}

/* --- the HelloRetryRequest watch ------------------------------------------ */

/* The server's bytes @d (@n, forwarded anyway) until its first
 * handshake message shows whether it is a HelloRetryRequest. */
static void watch_server(struct tls_watch *w, const uint8_t *d, size_t n)
{
	switch (serverhello_watch_feed(&w->sh, d, n)) {
	case SERVERHELLO_RETRY:
		w->phase = WATCH_SECOND_HELLO;
		break;
	case SERVERHELLO_OTHER:
		w->phase = WATCH_DONE;
		break;
	case SERVERHELLO_MORE:
	case SERVERHELLO_KIND_COUNT:
	default:
		break;
	}
}

/* After a HelloRetryRequest: finds the client's second ClientHello in
 * the held bytes (after change_cipher_spec or early data records) and
 * checks its SNI. Returns true when the watch is over (forward what is
 * held), false to wait for more. May apply a verdict (and close). */
static bool watch_second_hello(struct conn *c)
{
	const uint8_t *d = (const uint8_t *)c->cin.data;
	size_t off = 0, len = c->cin.len;
	struct clienthello ch;
	enum clienthello_result r;
	int next = clienthello_next_hello(d, len, &off);

	if (next == 0) {
		if (len >= CLIENTHELLO_FLIGHT_MAX)
			goto bad;
		return false;
	}
	if (next < 0)
		return true; /* an alert: the client gives up */
	r = clienthello_parse(d + off, len - off, &ch);
	if (r == CLIENTHELLO_INCOMPLETE) {
		if (len - off >= CLIENTHELLO_FLIGHT_MAX)
			goto bad;
		return false;
	}
	if (r == CLIENTHELLO_OK && ch.has_sni && strcmp(ch.sni, c->t->sni) == 0)
		return true;
	{
		struct verdict v;

		verdict_set(&v, VERDICT_DENY, 0, "egress.sni_mismatch",
			    r != CLIENTHELLO_OK ? "malformed second TLS ClientHello"
			    : !ch.has_sni ? "the second TLS ClientHello has no SNI"
					  : "the second TLS ClientHello names another host");
		v.extra = json_pack("{s:s?, s:b}", "sni",
				    r == CLIENTHELLO_OK && ch.has_sni ? ch.sni : NULL,
				    "hello_retry", 1);
		return answer_apply(c, &v);
	}
bad:
	{
		struct verdict v;

		verdict_set(&v, VERDICT_DENY, 0, "egress.sni_mismatch",
			    "no second TLS ClientHello after a HelloRetryRequest");
		return answer_apply(c, &v);
	}
}

/* --- relay through user space ------------------------------------------------- */

static uint32_t half_events(bool want_read, bool want_write, const struct endpoint *e)
{
	return endpoint_events(e, want_read, want_write) | (want_read ? EPOLLRDHUP : 0);
}

/* The client's bytes in cin after an ambiguous first flight was relayed
 * (c->t->line): an HTTP request line completed by them is refused before
 * they are forwarded (egress.protocol); once the first line cannot be
 * one, the watch ends. Returns false when @c was closed. */
static bool line_check(struct conn *c)
{
	enum http_result h;

	buf_append(c->t->line, c->cin.data, c->cin.len);
	h = http_sniff_request(c->t->line->data, c->t->line->len);
	if (h == HTTP_OK) {
		struct verdict v;

		verdict_set(&v, VERDICT_DENY, 0, "egress.protocol",
			    "an HTTP request line completed after the first-flight pause");
		v.extra = json_pack("{s:b}", "tls", 0);
		if (!answer_apply(c, &v))
			return false;
	}
	if (h != HTTP_INCOMPLETE) {
		buf_free(c->t->line);
		free(c->t->line);
		c->t->line = NULL;
	}
	buf_append(&c->uout, c->cin.data, c->cin.len);
	buf_free(&c->cin);
	return true;
}

/* Moves what each side has to the other through cout/uout; during a
 * watch the server's bytes are inspected and the client's held. Returns
 * false when @c was closed. */
static bool buffered_step(struct conn *c, bool relay)
{
	struct tls_watch *w = c->t->watch;
	bool watching = w && w->phase != WATCH_DONE;
	bool hold = watching || c->t->line;
	bool read_up = (relay || hold) && !c->t->u2c.eof && c->cout.len < RELAY_HIGH;
	bool read_cl = (relay || hold) && !c->t->c2u.eof && c->uout.len < RELAY_HIGH &&
		       c->cin.len < CLIENTHELLO_FLIGHT_MAX;
	bool moved = false;
	ssize_t n;
	int r;

	while (read_up) {
		size_t before = c->cout.len;

		if (c->upgraded) {
			n = endpoint_read_buf(&c->upstream, &c->uin, RELAY_HIGH);
			if (n > 0) {
				if (!upgraded_out(c))
					return false;
				moved = true;
				if (c->cout.len >= RELAY_HIGH)
					break; /* the client first */
				continue;
			}
		} else {
			n = endpoint_read_buf(&c->upstream, &c->cout, RELAY_HIGH);
		}
		if (n > 0) {
			moved = true;
			if (w && w->phase == WATCH_SERVER_HELLO)
				watch_server(w, (const uint8_t *)c->cout.data + before,
					     (size_t)n);
			continue;
		}
		if (n == 0) {
			c->t->u2c.eof = true;
			if (w)
				w->phase = WATCH_DONE; /* nothing more to see */
		} else if (n != -EAGAIN && n != -ENOBUFS) {
			/* reset, or TLS cut without close_notify: what it
			 * sent before is still owed to the client */
			upstream_gone(c);
			return false;
		}
		break;
	}
	while (read_cl) {
		n = endpoint_read_buf(&c->client, hold ? &c->cin : &c->uout,
				      hold ? CLIENTHELLO_FLIGHT_MAX : RELAY_HIGH);
		if (n > 0) {
			moved = true;
			continue;
		}
		if (n == 0) {
			if (watching) { /* the handshake was not finished */
				conn_close(c);
				return false;
			}
			c->t->c2u.eof = true;
		} else if (n != -EAGAIN && n != -ENOBUFS) {
			conn_close(c);
			return false;
		}
		break;
	}
	if (w && w->phase == WATCH_SECOND_HELLO && c->cin.len > 0) {
		bool over = watch_second_hello(c);

		if (conn_closed(c))
			return false;
		if (over)
			w->phase = WATCH_DONE;
	}
	if (c->t->line && !c->t->watch && c->cin.len > 0 && !line_check(c))
		return false;
	if (w && w->phase == WATCH_DONE) {
		/* release what was held */
		buf_append(&c->uout, c->cin.data, c->cin.len);
		buf_free(&c->cin);
		tunnel_free(c);
		w = NULL;
	}
	r = endpoint_flush(&c->client, &c->cout);
	if (r < 0 && r != -EAGAIN) {
		conn_close(c);
		return false;
	}
	r = endpoint_flush(&c->upstream, &c->uout);
	if (r < 0 && r != -EAGAIN) {
		conn_close(c);
		return false;
	}
	/* A side that ended gets the other's FIN once its bytes are out. */
	if (c->t->u2c.eof && c->cout.len == 0 && !c->t->u2c.shut) {
		(void)endpoint_shutdown(&c->client);
		c->t->u2c.shut = true;
	}
	if (c->t->c2u.eof && c->uout.len == 0 && !c->t->c2u.shut) {
		(void)endpoint_shutdown(&c->upstream);
		c->t->c2u.shut = true;
	}
	if (c->t->u2c.shut && c->t->c2u.shut) {
		conn_close(c);
		return false;
	}
	if (moved)
		conn_touch(c);
	watching = c->t->watch != NULL;
	relay = relay || watching || c->t->line;
	conn_watch(c, false, half_events(relay && !c->t->c2u.eof && c->uout.len < RELAY_HIGH,
					 c->cout.len > 0, &c->client));
	conn_watch(c, true, half_events(relay && !c->t->u2c.eof && c->cout.len < RELAY_HIGH,
					c->uout.len > 0, &c->upstream));
	return true;
}

/* --- splice --------------------------------------------------------------------- */

/* Moves bytes src -> pipe -> dst (@read: try the source too). Returns
 * the bytes written to dst, or -1 if the tunnel must close. A read
 * shorter than asked drained the socket: no second read is tried (the
 * level-triggered interest reports what comes next). When @other is
 * already shut, the tunnel closes right after this half ends, and the
 * close sends the FIN: no shutdown() of its own. */
static ssize_t splice_half(struct proxy *p, int src, int dst, struct half *h,
			   bool read, const struct half *other)
{
	ssize_t moved = 0;
	bool drained = !read;

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
			if (h->pipe[0] >= 0)
				pipe_put(p, h->pipe, true);
			if (!h->shut) {
				if (!other->shut)
					shutdown(dst, SHUT_WR);
				h->shut = true;
			}
			return moved;
		}
		if (drained) {
			/* idle: give the pipe back */
			if (h->pipe[0] >= 0)
				pipe_put(p, h->pipe, true);
			return moved;
		}
		if (h->pipe[0] < 0 && pipe_get(p, h->pipe) < 0)
			return -1;
		n = splice(src, NULL, h->pipe[1], NULL, SPLICE_MAX,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0) {
			if (errno != EAGAIN) {
				/* a reset source: the bytes it sent before
				 * are still delivered, then its end */
				h->eof = true;
				continue;
			}
			drained = true;
			continue;
		}
		if (n == 0) {
			h->eof = true;
			continue;
		}
		h->pending += (size_t)n;
		drained = n < SPLICE_MAX;
	}
}

static uint32_t splice_events(const struct half *in, const struct half *out)
{
	uint32_t ev = 0;

	if (!in->eof && in->pending == 0)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (out->pending > 0)
		ev |= EPOLLOUT;
	return ev;
}

/* Serves one side's event (@events 0: both directions, both ways): a
 * readable side feeds its half, a writable side takes its half's
 * pending bytes. */
static void splice_step(struct conn *c, bool upstream, uint32_t events)
{
	const uint32_t rd = EPOLLIN | EPOLLRDHUP | EPOLLHUP;
	/* A half runs when its source is readable or its destination
	 * writable; either way it reads its source again once the pipe is
	 * out: a destination that took the last bytes wants the next ones
	 * now, not after another epoll round trip (and the interest stays
	 * as it is: no epoll_ctl per megabyte). */
	bool c2u_go = !events || (!upstream && (events & rd)) ||
		      (upstream && (events & EPOLLOUT));
	bool u2c_go = !events || (upstream && (events & rd)) ||
		      (!upstream && (events & EPOLLOUT));
	ssize_t a = 0, b = 0;

	/* One side is gone (splice_hangup): only its last bytes, still in
	 * the pipe, are delivered to the other, then the tunnel ends. */
	if (c->t->draining) {
		struct half *h = c->t->draining;
		bool to_up = h == &c->t->c2u;

		a = splice_half(c->p, -1, to_up ? c->upstream.fd : c->client.fd, h, false,
				to_up ? &c->t->u2c : &c->t->c2u);
		if (a < 0 || h->pending == 0) {
			conn_close(c);
			return;
		}
		if (a > 0)
			conn_touch(c);
		conn_watch(c, to_up, EPOLLOUT);
		return;
	}
	if (c2u_go)
		a = splice_half(c->p, c->client.fd, c->upstream.fd, &c->t->c2u, true, &c->t->u2c);
	if (a >= 0 && u2c_go)
		b = splice_half(c->p, c->upstream.fd, c->client.fd, &c->t->u2c, true, &c->t->c2u);
	if (a < 0 || b < 0 || (c->t->c2u.shut && c->t->u2c.shut)) {
		conn_close(c);
		return;
	}
	/* Idle means no byte moved: events that move nothing do not keep a
	 * tunnel alive. */
	if (a > 0 || b > 0)
		conn_touch(c);
	conn_watch(c, false, splice_events(&c->t->c2u, &c->t->u2c));
	conn_watch(c, true, splice_events(&c->t->u2c, &c->t->c2u));
}

/* EPOLLHUP or EPOLLERR on one side of a spliced tunnel: the side leaves
 * the epoll set, or the tunnel ends. */
static void splice_hangup(struct conn *c, bool upstream, uint32_t events)
{
	struct half *from = upstream ? &c->t->u2c : &c->t->c2u;

	if (!(events & EPOLLERR)) {
		splice_step(c, false, 0); /* take what it still has, deliver what we can */
		if (conn_closed(c))
			return;
	}
	if ((events & EPOLLERR) || from->pending == 0) {
		conn_close(c);
		return;
	}
	/* Its last bytes wait for the other side: keep only that. */
	conn_unwatch(c, upstream);
	from->eof = true;
	c->t->draining = from;
	splice_step(c, false, 0);
}

/* The 200 and the first flight (or the heads before a 101) are out:
 * from now on the kernel moves the bytes. No splice is tried yet: the
 * level-triggered interest reports whatever is already waiting. */
static void start_splice(struct conn *c)
{
	buf_free(&c->cin);
	buf_free(&c->cout);
	buf_free(&c->uin);
	buf_free(&c->uout);
	c->t->spliced = true;
	conn_watch(c, false, EPOLLIN | EPOLLRDHUP);
	conn_watch(c, true, EPOLLIN | EPOLLRDHUP);
}

void tunnel_step(struct conn *c, bool upstream, uint32_t events)
{
	bool plain = endpoint_plain(&c->client) && endpoint_plain(&c->upstream) &&
		     !c->upgraded;

	if (c->state == CONN_FIRST_FLIGHT) {
		step_first_flight(c, upstream, events);
		return;
	}
	if (c->t->spliced) {
		if (events & (EPOLLHUP | EPOLLERR))
			splice_hangup(c, upstream, events);
		else
			splice_step(c, upstream, events);
		return;
	}
	/* Before splicing (the 200 and first flight still going out, a TLS
	 * watch), or relaying TLS: a hang-up ends the tunnel unless it is
	 * a plain EOF that buffered_step reads. An upstream's error is read
	 * there too, after the bytes it sent before it: the client gets
	 * those (upstream_gone). */
	if (events & EPOLLERR) {
		if (upstream)
			(void)buffered_step(c, true);
		else
			conn_close(c);
		return;
	}
	if (plain && !c->t->watch && !c->t->line && c->cin.len == 0) {
		/* only queued bytes to write, then splice */
		int r = endpoint_flush(&c->client, &c->cout);

		if (r == 0)
			r = endpoint_flush(&c->upstream, &c->uout);
		if (r < 0 && r != -EAGAIN) {
			conn_close(c);
			return;
		}
		if (c->cout.len == 0 && c->uout.len == 0) {
			start_splice(c);
			return;
		}
		conn_watch(c, false, c->cout.len ? EPOLLOUT : 0);
		conn_watch(c, true, c->uout.len ? EPOLLOUT : 0);
		return;
	}
	if (!buffered_step(c, !plain))
		return;
	if (plain && !c->t->watch && !c->t->line && c->cout.len == 0 && c->uout.len == 0 &&
	    c->cin.len == 0)
		start_splice(c);
}
