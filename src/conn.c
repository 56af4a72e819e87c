/* SPDX-License-Identifier: Apache-2.0
 * conn.c - the connection state table, deferred close, answers.
 *
 * DOC: Theory of Operation
 *
 * Every state a connection can be in is one row of conn_states[]: its
 * name, the timer that starts when it is entered, what expiry does, who
 * handles a hang-up (EPOLLHUP/EPOLLERR, which epoll reports whatever the
 * interest, level-triggered) on each side, and the function that serves
 * its events. conn_enter() is the only way into a state, so a state's
 * deadline cannot be forgotten or set twice; conn_expire() reads the same
 * row. A hang-up that the state does not own closes the connection at
 * once: otherwise its level-triggered events would spin the loop.
 *
 * Closing is deferred (passt's flow table does the same): conn_close()
 * closes the sockets at once (they leave the epoll set, the peer sees the
 * close) and puts the connection on the batch's dead list; conn_reap()
 * frees it after the batch. A later event of the same batch for it finds
 * CONN_CLOSED and is dropped; a DNS answer or a filter's resume finds it
 * by (index, generation) and a slot is reused only after the reap, with a
 * new generation. No caller ever holds a freed connection.
 *
 * An error answer is written in CONN_ANSWERING (bounded), then our FIN
 * goes with it and CONN_LINGER waits briefly for the client's FIN, so
 * that closing with unread bytes does not reset the answer away.
 */
#include "answer.h"
#include "conn.h"
#include "h2.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define ANSWER_MS 5000
#define LINGER_MS 2000

enum conn_timer {
	TIMER_NONE,
	TIMER_HEAD,         /* head_ms from the first byte; idle_ms before */
	TIMER_FIRST_FLIGHT,
	TIMER_CONNECT,
	TIMER_IDLE,         /* restarted whenever bytes move */
	TIMER_FILTER,       /* a pending filter: head_ms */
	TIMER_ANSWER,
	TIMER_LINGER,
};

enum conn_expiry {
	EXPIRE_CLOSE,        /* close, no receipt */
	EXPIRE_HEAD,         /* 408 timeout.head (nothing received: close) */
	EXPIRE_FIRST_FLIGHT, /* proxy.error timeout.first-flight, close */
	EXPIRE_CONNECT,      /* upstream.connect: 502, or close in a tunnel */
	EXPIRE_FILTER,       /* 502 proxy.filter-timeout */
};

struct conn_state_info {
	const char *name;
	enum conn_timer timer;
	enum conn_expiry expiry;
	bool own_client_hup;   /* the step handles the client's hang-up */
	bool own_upstream_hup; /* ... and the upstream's */
	void (*step)(struct conn *c, bool upstream, uint32_t events);
};

static void step_closing(struct conn *c, bool upstream, uint32_t events);

static const struct conn_state_info conn_states[] = {
	/* HEAD: a client that hangs up after its request still has it
	 * read; an inner connection notices its idle upstream's close. */
	[CONN_HEAD] = { "head", TIMER_HEAD, EXPIRE_HEAD, true, true, exchange_step },
	/* RESOLVE: no interest at all; a hang-up means the client is gone
	 * (a half-closed client still gets its answer). */
	[CONN_RESOLVE] = { "resolve", TIMER_NONE, EXPIRE_CLOSE, false, false, NULL },
	/* FIRST_FLIGHT: an upstream opened early (ports other than 80 and
	 * 443) that hangs up still has its last bytes delivered. */
	[CONN_FIRST_FLIGHT] = { "first-flight", TIMER_FIRST_FLIGHT,
				EXPIRE_FIRST_FLIGHT, false, true, tunnel_step },
	[CONN_CONNECTING] = { "connecting", TIMER_CONNECT, EXPIRE_CONNECT, false,
			      true, upstream_step },
	/* TUNNEL: a side that hangs up may still be owed bytes. */
	[CONN_TUNNEL] = { "tunnel", TIMER_IDLE, EXPIRE_CLOSE, true, true, tunnel_step },
	[CONN_REQ_BODY] = { "request-body", TIMER_IDLE, EXPIRE_CLOSE, false, true,
			    exchange_step },
	[CONN_RESP_HEAD] = { "response-head", TIMER_IDLE, EXPIRE_CLOSE, false, true,
			     exchange_step },
	[CONN_RESP_BODY] = { "response-body", TIMER_IDLE, EXPIRE_CLOSE, false, true,
			     exchange_step },
	[CONN_PENDING] = { "pending", TIMER_FILTER, EXPIRE_FILTER, false, false,
			   exchange_step },
	/* The handshakes of an intercepted tunnel: the upstream's reports its
	 * own failure; the client is not read until its turn. */
	[CONN_TLS_UPSTREAM] = { "tls-upstream", TIMER_CONNECT, EXPIRE_CLOSE, false,
				true, intercept_step },
	[CONN_TLS_CLIENT] = { "tls-client", TIMER_CONNECT, EXPIRE_CLOSE, true, false,
			      intercept_step },
	[CONN_ANSWERING] = { "answering", TIMER_ANSWER, EXPIRE_CLOSE, false, false,
			     step_closing },
	[CONN_LINGER] = { "linger", TIMER_LINGER, EXPIRE_CLOSE, true, false,
			  step_closing },
	/* H2: streams both ways, idle while no byte moves (h2.c) */
	[CONN_H2] = { "h2", TIMER_IDLE, EXPIRE_CLOSE, true, true, h2_step },
	[CONN_CLOSED] = { "closed", TIMER_NONE, EXPIRE_CLOSE, true, true, NULL },
};
static_assert(ARRAY_SIZE(conn_states) == CONN_STATE_COUNT,
	      "conn_states out of sync with enum conn_state");

const char *conn_state_to_string(enum conn_state s)
{
	return (unsigned int)s < CONN_STATE_COUNT ? conn_states[s].name : "unknown";
}

static uint64_t timer_ms(const struct conn *c, enum conn_timer t)
{
	const struct proxy_timeouts *to = &c->p->t;

	switch (t) {
	case TIMER_HEAD:
		/* A new connection has head_ms for its first request; an
		 * idle kept-alive one waits idle_ms, and the head timeout
		 * runs again from the next request's first byte. */
		return c->requests == 0 || c->cin.len ? to->head_ms : to->idle_ms;
	case TIMER_FIRST_FLIGHT: return tunnel_first_flight_ms(c);
	case TIMER_CONNECT: return to->connect_ms;
	case TIMER_IDLE: return to->idle_ms;
	case TIMER_FILTER: return to->head_ms;
	case TIMER_ANSWER: return ANSWER_MS;
	case TIMER_LINGER: return LINGER_MS;
	case TIMER_NONE:
	default: return 0;
	}
}

void conn_enter(struct conn *c, enum conn_state s)
{
	uint64_t ms;

	ASSERT((unsigned int)s < CONN_STATE_COUNT);
	if (c->state == CONN_CLOSED)
		return; /* nothing leaves CLOSED */
	c->state = s;
	ms = timer_ms(c, conn_states[s].timer);
	c->deadline = ms ? util_now_ms() + ms : 0;
}

void conn_touch(struct conn *c)
{
	enum conn_timer t = conn_states[c->state].timer;

	if (t == TIMER_IDLE || t == TIMER_HEAD)
		c->deadline = util_now_ms() + timer_ms(c, t);
}

struct conn *conn_new(struct proxy *p, int fd, const struct addr *peer)
{
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
	c->p = p;
	c->index = index;
	/* A DNS answer or a filter's resume finds its connection by
	 * (index, gen): a reused slot must never look like the old one. */
	if (++p->next_gen == 0)
		p->next_gen = 1;
	c->gen = p->next_gen;
	endpoint_set_fd(&c->client, fd);
	endpoint_init(&c->upstream);
	c->peer = *peer;
	c->state = CONN_HEAD;
	p->conns[index] = c;
	p->live++;
	conn_watch(c, false, EPOLLIN | EPOLLRDHUP);
	if (c->client.registered == ENDPOINT_UNREGISTERED) {
		/* never registered: nothing can reach it */
		c->client.fd = -1;
		p->conns[index] = NULL;
		p->free_ids[p->nfree++] = index;
		p->live--;
		free(c);
		return NULL;
	}
	return c;
}

void conn_watch(struct conn *c, bool upstream, uint32_t events)
{
	struct endpoint *e = upstream ? &c->upstream : &c->client;
	struct epoll_event ev;

	if (e->fd < 0 || e->registered == events)
		return;
	ev.events = events;
	ev.data.u64 = ((uint64_t)(upstream ? PROXY_TAG_UPSTREAM : PROXY_TAG_CLIENT) << 32) |
		      c->index;
	if (e->registered == ENDPOINT_UNREGISTERED) {
		if (epoll_ctl(c->p->epfd, EPOLL_CTL_ADD, e->fd, &ev) == 0)
			e->registered = events;
	} else if (epoll_ctl(c->p->epfd, EPOLL_CTL_MOD, e->fd, &ev) == 0) {
		e->registered = events;
	}
}

void conn_unwatch(struct conn *c, bool upstream)
{
	struct endpoint *e = upstream ? &c->upstream : &c->client;

	if (e->fd < 0 || e->registered == ENDPOINT_UNREGISTERED)
		return;
	epoll_ctl(c->p->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	e->registered = ENDPOINT_UNREGISTERED;
}

void conn_drop_upstream(struct conn *c)
{
	/* close() removes it from the epoll set */
	endpoint_close(&c->upstream);
	buf_free(&c->uin);
	buf_free(&c->uout);
}

void conn_close(struct conn *c)
{
	struct proxy *p = c->p;

	if (c->state == CONN_CLOSED)
		return;
	if (c->x)
		exchange_free(c, FILTER_OUTCOME_CLIENT_GONE);
	tunnel_close(c);
	h2_free(c);
	if (c->upgraded) {
		c->upgraded->free(c->upgraded);
		c->upgraded = NULL;
	}
	intercept_free(c);
	endpoint_close(&c->client);
	endpoint_close(&c->upstream);
	buf_free(&c->cin);
	buf_free(&c->cout);
	buf_free(&c->uin);
	buf_free(&c->uout);
	if (c->counted) {
		proxy_shared_release(p->shared, p->worker, &c->peer);
		c->counted = false;
	}
	c->state = CONN_CLOSED;
	c->deadline = 0;
	c->next_dead = p->dead;
	p->dead = c;
}

void conn_reap(struct proxy *p)
{
	while (p->dead) {
		struct conn *c = p->dead;

		p->dead = c->next_dead;
		ASSERT(c->state == CONN_CLOSED);
		ASSERT(p->conns[c->index] == c);
		p->conns[c->index] = NULL;
		p->free_ids[p->nfree++] = c->index;
		p->live--;
		free(c);
	}
}

void conn_event(struct conn *c, bool upstream, uint32_t events)
{
	const struct conn_state_info *si = &conn_states[c->state];

	if (c->state == CONN_CLOSED)
		return; /* closed earlier in this batch */
	if ((events & (EPOLLHUP | EPOLLERR)) &&
	    !(upstream ? si->own_upstream_hup : si->own_client_hup)) {
		conn_close(c);
		return;
	}
	if (si->step)
		si->step(c, upstream, events);
}

void conn_expire(struct conn *c)
{
	struct verdict v;

	switch (conn_states[c->state].expiry) {
	case EXPIRE_HEAD:
		if (c->cin.len == 0) {
			conn_close(c); /* an idle keep-alive or silent client */
			return;
		}
		c->target_known = false;
		verdict_set(&v, VERDICT_FAIL, 408, "timeout.head",
			    "the request head did not arrive in time");
		break;
	case EXPIRE_FIRST_FLIGHT:
		if (tunnel_first_flight_expired(c))
			return;
		verdict_set(&v, VERDICT_FAIL, 0, "timeout.first-flight",
			    c->cin.len ? "the client's first flight did not end in time"
				       : "the client sent nothing after CONNECT");
		break;
	case EXPIRE_CONNECT:
		verdict_set(&v, VERDICT_FAIL, c->tunnel && !tunnel_early(c) ? 0 : 502,
			    "upstream.connect", "connection timed out");
		break;
	case EXPIRE_FILTER:
		verdict_set(&v, VERDICT_FAIL, 502, "proxy.filter-timeout",
			    "a filter did not answer in time");
		break;
	case EXPIRE_CLOSE:
	default:
		conn_close(c);
		return;
	}
	(void)answer_apply(c, &v);
}

bool conn_can_answer(const struct conn *c)
{
	if (!endpoint_open(&c->client) || c->state == CONN_ANSWERING ||
	    c->state == CONN_LINGER)
		return false;
	/* A tunnel's client stops speaking HTTP with us at its 200 (on
	 * ports other than 80 and 443 it comes once the upstream is
	 * connected); an exchange cannot answer in the middle of a
	 * response. */
	if (c->tunnel)
		return !c->transparent &&
		       (c->state == CONN_HEAD || c->state == CONN_RESOLVE ||
			(tunnel_early(c) && c->state == CONN_CONNECTING));
	return !exchange_response_open(c);
}

void conn_answer(struct conn *c, const struct buf *answer)
{
	if (c->x)
		exchange_free(c, FILTER_OUTCOME_REFUSED);
	/* Output already queued is whole messages (see verdict.c): the
	 * answer follows it. */
	buf_append(&c->cout, answer->data, answer->len);
	conn_drop_upstream(c);
	conn_finish(c);
}

void conn_finish(struct conn *c)
{
	buf_free(&c->cin);
	conn_enter(c, CONN_ANSWERING);
	conn_watch(c, false, EPOLLOUT);
	step_closing(c, false, 0);
}

static void step_closing(struct conn *c, bool upstream, uint32_t events)
{
	(void)upstream;
	if (c->state == CONN_ANSWERING) {
		int r = endpoint_flush(&c->client, &c->cout);

		if (r < 0 && r != -EAGAIN) {
			conn_close(c);
			return;
		}
		if (c->cout.len > 0) {
			conn_watch(c, false, endpoint_events(&c->client, false, true));
			return;
		}
		if (endpoint_shutdown(&c->client) == -EAGAIN) {
			conn_watch(c, false, endpoint_events(&c->client, false, true));
			return;
		}
		buf_free(&c->cout);
		conn_enter(c, CONN_LINGER);
		conn_watch(c, false, EPOLLIN | EPOLLRDHUP);
		return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		char sink[4096];
		ssize_t n;

		while ((n = endpoint_read(&c->client, sink, sizeof(sink))) > 0)
			;
		if (n != -EAGAIN)
			conn_close(c);
	}
}

static json_t *subject_of(const struct conn *c, bool request)
{
	json_t *s = json_object();
	const char *path = NULL;
	const char *method = request && c->inner ? exchange_request(c, &path) : NULL;

	ASSERT(s);
	if (method) {
		/* A request inside a tunnel: the receipt is about it; the
		 * tunnel's own CONNECT stays as subject.tunnel. */
		json_object_set_new(s, "method", json_string(method));
		json_object_set_new(s, "path", json_string(path ? path : "/"));
		json_object_set_new(s, "tunnel", json_string(c->method));
	} else {
		json_object_set_new(s, "method", json_string(c->method));
	}
	json_object_set_new(s, "host", json_string(c->target.name));
	json_object_set_new(s, "port", json_integer(c->port));
	if (c->transparent) {
		char text[ADDR_STRLEN];

		addr_format(&c->orig_dst, text, sizeof(text));
		json_object_set_new(s, "transparent", json_true());
		json_object_set_new(s, "destination", json_string(text));
	}
	return s;
}

json_t *conn_subject(const struct conn *c)
{
	return subject_of(c, true);
}

json_t *conn_tunnel_subject(const struct conn *c)
{
	return subject_of(c, false);
}

int64_t conn_record(struct conn *c, const char *type, enum receipt_decision d,
		    const char *rule, json_t *subject, const char *reason)
{
	return conn_record_at(c, RECEIPT_POINT_EGRESS_PROXY, type, d, rule, subject,
			      reason);
}

int64_t conn_record_at(struct conn *c, enum receipt_point point, const char *type,
		       enum receipt_decision d, const char *rule, json_t *subject,
		       const char *reason)
{
	const struct proxy_opts *o = &c->p->o;
	int64_t seq = -1;

	if (o->record)
		seq = o->record(o->record_arg, type, d, point, rule, subject, reason);
	json_decref(subject);
	return seq;
}
