/* SPDX-License-Identifier: Apache-2.0
 * conn.h - the proxy's connections: the state table, the internal state
 * of struct proxy, and the calls the proxy's modules make of each other.
 *
 * Internal to the proxy (proxy.c, conn.c, answer.c, upstream.c, tunnel.c,
 * tlisten.c, exchange.c, h2.c, intercept.c); nothing outside includes it.
 *
 * Contracts every module keeps:
 *  - A connection is closed only by conn_close(), which marks it
 *    CONN_CLOSED, closes its sockets at once (they leave the epoll set)
 *    and frees its memory after the current event batch. Any function
 *    that may close returns normally; its caller checks
 *    conn_closed(c) before touching @c again. The pointer itself stays
 *    valid until the batch ends.
 *  - State changes go through conn_enter(), which arms the state's timer
 *    from the table in conn.c; no other code sets a deadline.
 *  - Decisions read copied fields (method, target, rule, the exchange's
 *    struct filter_request), never slices into a buffer: buffers move.
 */
#ifndef AIRLOCK_CONN_H
#define AIRLOCK_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "buf.h"
#include "egress.h"
#include "endpoint.h"
#include "filter.h"
#include "hostname.h"
#include "policy.h"
#include "proxy.h"
#include "verdict.h"

/* The tag in the high 32 bits of an epoll event's data.u64 (the low 32
 * hold a connection index, a descriptor or 0). */
enum proxy_tag {
	PROXY_TAG_LISTEN = 1,
	PROXY_TAG_SIGNAL,
	PROXY_TAG_CLIENT,
	PROXY_TAG_UPSTREAM,
	PROXY_TAG_DNS,
	PROXY_TAG_IFADDR,
	PROXY_TAG_WATCH,
	PROXY_TAG_TLISTEN,  /* low 32 bits: the index in proxy.tlfd */
};

/* Keep the table in conn.c in sync (static_assert). */
enum conn_state {
	CONN_HEAD = 0,     /* reading a request head */
	CONN_RESOLVE,      /* the target's name is being resolved */
	CONN_FIRST_FLIGHT, /* CONNECT answered 200: reading the first flight */
	CONN_CONNECTING,   /* the upstream connection is being opened */
	CONN_TUNNEL,       /* bytes relayed both ways */
	CONN_REQ_BODY,     /* HTTP: the request body goes upstream */
	CONN_RESP_HEAD,    /* HTTP: waiting for the response head */
	CONN_RESP_BODY,    /* HTTP: the response body goes to the client */
	CONN_PENDING,      /* HTTP: a filter waits for proxy_resume() */
	CONN_TLS_UPSTREAM, /* intercepted: the upstream TLS handshake */
	CONN_TLS_CLIENT,   /* intercepted: the client's TLS handshake */
	CONN_ANSWERING,    /* an error answer is being written */
	CONN_LINGER,       /* answer sent and FIN with it: waiting for the
			      client's FIN so that closing resets nothing */
	CONN_H2,           /* intercepted, h2 on both sides: streams (h2.c) */
	CONN_CLOSED,       /* marked; freed after the event batch */
	CONN_STATE_COUNT
};

const char *conn_state_to_string(enum conn_state s);

/* Each phase's part of a connection is its own, opaque to the others:
 * struct tunnel (tunnel.c), struct exchange (exchange.c), struct
 * intercept_state (intercept.c), struct h2 (h2.c). What is left here is
 * the connection's: its endpoints and buffers, the request it decides,
 * its state and its timer. */
struct tunnel;
struct exchange;
struct intercept_state;
struct intercept_cache;
struct h2;

struct conn {
	struct proxy *p;
	uint32_t index, gen;
	enum conn_state state;
	bool tunnel;          /* a CONNECT tunnel; else an HTTP exchange */
	bool inner;           /* HTTP inside a tunnel: the target is fixed */
	bool target_known;    /* method/target/port below describe the
			         request */
	bool shadowed;        /* a would_block was recorded for it */
	bool allow_recorded;  /* its egress.allow is written */
	bool counted;         /* holds a slot of the per-client count */
	bool client_eof;      /* the client sent its FIN */
	bool transparent;     /* accepted on a transparent listener: no
				 HTTP is spoken with the proxy itself */
	struct addr orig_dst; /* transparent: the destination the client
				 connected to (a synthetic address or the
				 literal), and its port in c->port */
	uint32_t requests;    /* request heads parsed on this connection */
	struct endpoint client, upstream;
	uint64_t deadline;    /* ms (util_now_ms); 0: none */
	struct buf cin, cout, uin, uout;
	struct addr peer;     /* the client's address */
	const struct policy *policy; /* the policy its request is decided
					under (a reload does not change it) */
	char method[24];
	struct host_target target;
	uint16_t port;
	const struct host_rule *rule;
	char rule_id[VERDICT_RULE_MAX];
	struct addr addr;     /* the one checked address connected to */
	struct tunnel *t;      /* the tunnel's part (tunnel.c); NULL until
				  the connection is one */
	bool intercept;       /* TLS is terminated here (intercept.c) */
	struct intercept_state *ic; /* the handshakes in progress */
	struct filter_stream *upgraded; /* after a 101: what the upstream
					   sends goes through it (tunnel.c) */
	/* HTTP */
	struct exchange *x;
	struct h2 *h2;        /* h2 on both sides (h2.c) */
	/* CONN_PENDING: called by proxy_resume() */
	void (*on_resume)(struct conn *c, enum filter_result r,
			  struct verdict *v);
	struct conn *next_dead;
};

struct ifaddr_set;
struct proxy_shared;

struct proxy {
	struct proxy_opts o;
	struct proxy_timeouts t;
	const struct policy *policy; /* for requests decided from now on */
	int epfd;
	int lfd;
	struct egress_self self;
	struct ifaddr_set *ifaddrs;  /* when listening on a wildcard */
	struct dns *dns;
	struct conn **conns;
	uint32_t nconns, cap, live;
	uint32_t *free_ids;
	uint32_t nfree;
	struct conn *dead;           /* closed during this batch */
	bool accepting;
	uint64_t accept_resume;      /* ms: descriptor back-off */
	uint32_t next_gen;           /* generations only ever increase */
	bool stopping;
	uint64_t stop_deadline;
	int (*pool)[2];              /* empty pipes tunnels borrow
					(tunnel.c; drained by proxy_free) */
	size_t npool, pool_max;
	struct proxy_shared *shared;
	bool own_shared;
	unsigned int worker;
	struct filter_reg filters[FILTER_MAX];
	size_t nfilters;
	struct proxy_watch_slot *watches;
	size_t nwatches;
	struct {
		int (*fn)(void *arg, uint64_t now_ms);
		void *arg;
	} ticks[PROXY_TICKS_MAX];    /* proxy_set_tick() */
	size_t nticks;
	int tlfd[2];                 /* transparent listeners (tlisten.c) */
	size_t ntlfd;
	const struct dnsstub_table *names;
	const struct intercept_opts *intercept; /* NULL: never intercept */
	struct intercept_cache *leaves;         /* parsed leaves, per host */
	uint64_t soon;               /* ms: a deadline before the next
					once-a-second sweep (0: none) */
};

/* --- conn.c ------------------------------------------------------------ */

/* A connection on @fd from @peer, watched, in CONN_HEAD; its first step
 * is the caller's (proxy.c): an HTTP exchange with the proxy
 * (exchange_begin), or one redirected to it (tlisten_begin). NULL: no
 * slot (@fd stays the caller's). */
struct conn *conn_new(struct proxy *p, int fd, const struct addr *peer);
void conn_enter(struct conn *c, enum conn_state s);
/* Bytes moved: the state's idle timer starts again. */
void conn_touch(struct conn *c);
/* Marks @c closed (see above). Safe on a closed connection. */
void conn_close(struct conn *c);
static inline bool conn_closed(const struct conn *c)
{
	return c->state == CONN_CLOSED;
}
/* Frees the connections closed during the batch. */
void conn_reap(struct proxy *p);
void conn_event(struct conn *c, bool upstream, uint32_t events);
/* The state's deadline passed. */
void conn_expire(struct conn *c);
/* Sets the epoll interest of one side (registering it the first time). */
void conn_watch(struct conn *c, bool upstream, uint32_t events);
/* Takes one side out of the epoll set (its socket stays open). */
void conn_unwatch(struct conn *c, bool upstream);
/* Closes the upstream side only (an exchange that ended, an answer). */
void conn_drop_upstream(struct conn *c);
/* Queues an answer (already formatted) after whatever complete output is
 * queued, drops the upstream and enters CONN_ANSWERING. */
void conn_answer(struct conn *c, const struct buf *answer);
/* The client gets what is queued in cout, then our FIN, then a short
 * linger for its FIN (CONN_ANSWERING, CONN_LINGER). */
void conn_finish(struct conn *c);
/* Can an HTTP answer still be written to the client? */
bool conn_can_answer(const struct conn *c);
/* The request's subject for a receipt: method, host, port. Inside a
 * tunnel, the request's method and path, and the tunnel's method as
 * "tunnel". */
json_t *conn_subject(const struct conn *c);
/* The connection's own subject (a tunnel's: its CONNECT), for what is
 * decided once per connection (egress.allow). */
json_t *conn_tunnel_subject(const struct conn *c);
/* Writes one receipt; returns its seq or -1. Consumes @subject. */
int64_t conn_record(struct conn *c, const char *type, enum receipt_decision d,
		    const char *rule, json_t *subject, const char *reason);
/* The same, observed by @point. */
int64_t conn_record_at(struct conn *c, enum receipt_point point, const char *type,
		       enum receipt_decision d, const char *rule, json_t *subject,
		       const char *reason);

/* --- upstream.c: decide, resolve, check, connect ------------------------ */

/* The rules for c->target:c->port (not in mode off), then the address
 * checks on the literal or on every DNS answer; on success c->addr is set
 * and the tunnel or the exchange continues (tunnel_addressed,
 * exchange_addressed). Any deny goes through answer_apply(). */
void upstream_decide(struct conn *c);
/* Opens the connection to c->addr:c->port and enters CONN_CONNECTING;
 * on failure applies the verdict (502, or close inside a tunnel). */
void upstream_connect(struct conn *c);
void upstream_step(struct conn *c, bool upstream, uint32_t events);
/* Checks @a against the proxy's own addresses (refreshing the interface
 * list first when listening on a wildcard). */
bool upstream_is_self(struct conn *c, const struct addr *a, uint16_t port);

/* --- tunnel.c ----------------------------------------------------------- */

/* A CONNECT head was parsed into c's target fields: decide it. */
void tunnel_begin(struct conn *c);
void tunnel_addressed(struct conn *c);
void tunnel_connected(struct conn *c);
void tunnel_step(struct conn *c, bool upstream, uint32_t events);
/* An HTTP exchange switched protocols (101): relay both ways from now
 * on; cin/uin hold bytes already read past the heads. */
void tunnel_from_exchange(struct conn *c);
void tunnel_free(struct conn *c);
/* Frees the tunnel's part (c->t) and returns its pipes (conn_close). */
void tunnel_close(struct conn *c);
/* A tunnel on a port where the server may speak first: its upstream is
 * opened before the first flight is classified. */
bool tunnel_early(const struct conn *c);
/* The SNI of the tunnel's ClientHello; NULL when its first flight is not
 * TLS (or not read yet). */
const char *tunnel_sni(const struct conn *c);
/* The first-flight timer (CONN_FIRST_FLIGHT), in ms from now. */
uint64_t tunnel_first_flight_ms(const struct conn *c);
/* The first-flight deadline passed: true when the tunnel handled it (an
 * ambiguous first flight relayed as opaque, an idle one closed), false
 * for the timeout.first-flight failure. */
bool tunnel_first_flight_expired(struct conn *c);
/* The first flight read so far starts like a TLS record: it never counts
 * as ambiguous, it must become a ClientHello within the first-flight
 * timeout. */
static inline bool tunnel_flight_tls(const struct conn *c)
{
	return c->cin.len > 0 && (unsigned char)c->cin.data[0] == 0x16;
}

/* --- tlisten.c: transparent mode ---------------------------------------- */

/* @c was accepted on a transparent listener: reads its original
 * destination and decides it as a CONNECT to the name the synthetic
 * address stands for, or to the IP literal (docs/TRANSPARENT.md). */
void tlisten_begin(struct conn *c);
/* --- intercept.c: TLS interception -------------------------------------- */

/* Is c's tunnel (its ClientHello read and checked) one whose TLS the proxy
 * terminates? The one question a CONNECT and a transparent connection
 * ask before their upstream is connected. */
bool intercept_wanted(const struct conn *c);
/* The upstream TCP connection of an intercepted tunnel is open: the
 * upstream handshake (verified), then the client's (its ClientHello is in
 * c->cin), then HTTP inside (exchange.c, inner) over the two TLS
 * endpoints; an upstream that does not verify gets the client a 502
 * naming the reason inside TLS, and nothing of the request is sent. */
void intercept_connected(struct conn *c);
/* An Upgrade request on an h2 upstream: a new http/1.1 one (intercept.c). */
void intercept_reopen(struct conn *c);
void intercept_reopened(struct conn *c);
void intercept_step(struct conn *c, bool upstream, uint32_t events);
void intercept_free(struct conn *c);

/* --- exchange.c ---------------------------------------------------------- */

/* Starts serving HTTP on @c: the proxy's own requests (absolute-form), or
 * with @inner the origin-form requests inside a tunnel to c->target:port
 * (c->addr already checked). Bytes already read are in c->cin. */
void exchange_begin(struct conn *c, bool inner);
void exchange_addressed(struct conn *c);
void exchange_connected(struct conn *c);
/* The upstream intercept_reopen() asked for is ready: the request goes. */
void exchange_upstream_ready(struct conn *c);
void exchange_step(struct conn *c, bool upstream, uint32_t events);
/* Frees the exchange; filters still attached hear @outcome. */
void exchange_free(struct conn *c, enum filter_outcome outcome);
/* The method and path of the request in progress on @c (NULL when none):
 * inside a tunnel, the one a receipt is about. */
const char *exchange_request(const struct conn *c, const char **path);
/* proxy_resume() for exchange @seq of @c; -ESTALE when it is not the one
 * waiting (then @v is only cleared). */
int exchange_resume(struct conn *c, uint32_t seq, enum filter_result r,
		    struct verdict *v);
/* The response has started (its head is queued) and is not complete:
 * no answer can be written any more. */
bool exchange_response_open(const struct conn *c);

#endif /* AIRLOCK_CONN_H */
