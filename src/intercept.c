/* SPDX-License-Identifier: Apache-2.0
 * intercept.c - TLS interception: the hosts it applies to, and the two
 * handshakes that turn a CONNECT tunnel into HTTP the proxy reads.
 *
 * DOC: Theory of Operation
 *
 * The proxy terminates TLS only for the hosts the policy binds something
 * to: a secret's hosts (substitution needs the request in clear), git's
 * hosts (repository rules), spend providers (metering) and
 * egress.intercept (audit). Every other tunnel passes through untouched
 * after the SNI check (tunnel.c).
 *
 * An intercepted tunnel goes through the same steps as any other up to
 * its first flight: the rules and address checks, the 200, the
 * ClientHello read and its SNI checked against the CONNECT host. Then:
 *
 *  1. the upstream TCP connection is opened to the checked address
 *     (upstream.c) and the proxy's own TLS handshake runs on it: SNI =
 *     the host, ALPN h2 and http/1.1 whatever the client offers, the
 *     chain and the name verified against
 *     the system store plus egress.upstream_ca (tls.c); the session of
 *     an earlier verified connection to the same host:port is offered
 *     for resumption (the session cache below). Nothing of the
 *     client's bytes has gone upstream, and nothing will if this fails;
 *  2. the client's handshake: a leaf for the host, issued by the session
 *     CA in the key holder (which alone holds the CA key, and checks that
 *     the policy intercepts that host) and cached per worker, answers the
 *     ClientHello already read (OpenSSL reads it from a memory BIO, then
 *     from the socket); it is given h2 whenever it offers it, whatever
 *     the upstream chose: an h2 client has each stream one exchange
 *     (h2.c), relayed as h2 streams to an h2 upstream or one HTTP/1.1
 *     exchange after another to an HTTP/1.1 upstream; else HTTP/1.1,
 *     each request carried as one h2 stream when the upstream chose h2
 *     (h2up.c), but a request asking for Upgrade (WebSocket), which gets
 *     an upstream connection of its own asked for http/1.1 only
 *     (intercept_reopen(): same address, verified again);
 *  3. if the upstream did not verify, the client, now speaking TLS with
 *     the proxy, gets a 502 naming the reason (proxy.error, rule
 *     upstream.tls) and the connection ends: never a fallback to
 *     pass-through. Otherwise the connection is recorded (egress.allow
 *     with "intercepted": true) and becomes an inner HTTP exchange over
 *     two TLS endpoints (exchange.c): every request's Host must be the
 *     tunnel's host, and every request runs the filter chain (secrets,
 *     git, spend), as HTTP inside a plain tunnel does.
 *
 * The upstream is verified before the client's handshake, so a client
 * never completes a handshake with a proxy that would then have nowhere
 * to send its request but an unverified server. Leaves are fetched
 * synchronously: once per host per worker (and again every half hour), a
 * round trip to the key holder of well under a millisecond.
 *
 * Should: terminate TLS only for the hosts above, verify every upstream,
 * answer the ClientHello the SNI check read. Mustn't: hold the CA key,
 * pass an intercepted tunnel through, send a byte of the request to an
 * upstream that did not verify.
 */
#include "answer.h"
#include "conn.h"
#include "intercept.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/x509.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "h2.h"
#include "h2up.h"
#include "filter.h"
#include "tls.h"
#include "util.h"

#define CACHE_MAX TLS_CA_CACHE_MAX

/* --- which hosts ----------------------------------------------------------- */

/* The tunnels a filter needs in clear (filter_table: secrets, git, spend)
 * and egress.intercept's hosts, which are opened up for audit alone. */
static bool wanted(const struct policy *p, const struct host_target *t, uint16_t port,
		   bool any_port)
{
	if (p->mode == POLICY_MODE_OFF)
		return false;
	if (filter_host_ruled(p->intercept, p->nintercept, p, t, port, any_port))
		return true;
	return filter_table_needs_cleartext(p, t, port, any_port);
}

bool intercept_host_wanted(const struct policy *p, const struct host_target *t,
			   uint16_t port)
{
	return wanted(p, t, port, false);
}

bool intercept_host_named(const struct policy *p, const struct host_target *t)
{
	return wanted(p, t, 0, true);
}

/* --- the leaf cache ---------------------------------------------------------- */

struct cached_leaf {
	char host[HOSTNAME_MAX + 1];
	struct tls_cert *cert;
	time_t refresh;          /* fetch again from then on */
	uint64_t used;           /* for eviction: least recently used goes */
};

/* An upstream TLS session to resume (tls.c asks the client context to
 * hand each new session here): keyed by the verified name and the port. */
struct cached_session {
	char host[HOSTNAME_MAX + 1];
	uint16_t port;
	SSL_SESSION *sess;
	uint64_t used;
};

struct intercept_cache {
	struct cached_leaf e[CACHE_MAX];
	size_t n;
	uint64_t tick;
	struct cached_session s[CACHE_MAX];
	size_t ns;
};

/* This worker's cache (one per process): the new-session callback has
 * only the SSL to go by. */
static struct intercept_cache *worker_cache;

static int session_new(SSL *ssl, SSL_SESSION *sess);

struct intercept_cache *intercept_cache_new(SSL_CTX *client)
{
	worker_cache = util_xcalloc(1, sizeof(struct intercept_cache));
	if (client) {
		/* upstream sessions resumed: kept here, not in OpenSSL's
		 * internal store */
		SSL_CTX_set_session_cache_mode(client, SSL_SESS_CACHE_CLIENT |
							       SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(client, session_new);
	}
	return worker_cache;
}

static struct cached_session *session_slot(struct intercept_cache *ic, const char *host,
					   uint16_t port)
{
	size_t i;

	for (i = 0; i < ic->ns; i++)
		if (ic->s[i].port == port && strcmp(ic->s[i].host, host) == 0)
			return &ic->s[i];
	return NULL;
}

/* The client context's new-session callback (a TLS 1.3 ticket comes
 * after the handshake, one or more per connection): the newest session
 * of a verified host:port replaces the one before (a copy is kept;
 * returns 0: OpenSSL's reference stays its own). Only a session whose chain and name verified is
 * kept, so a resumption never skips a check the full handshake made. */
static int session_new(SSL *ssl, SSL_SESSION *sess)
{
	struct intercept_cache *ic = worker_cache;
	const char *host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	struct cached_session *slot;
	SSL_SESSION *copy;
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	uint16_t port;
	size_t i;

	if (!ic || !host || strlen(host) > HOSTNAME_MAX ||
	    SSL_get_verify_result(ssl) != X509_V_OK || !SSL_SESSION_is_resumable(sess) ||
	    getpeername(SSL_get_fd(ssl), (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		return 0;
	slot = session_slot(ic, host, port);
	if (!slot && ic->ns < CACHE_MAX) {
		slot = &ic->s[ic->ns++];
		slot->sess = NULL; /* (a slot emptied by session_offer) */
	} else if (!slot) {
		slot = &ic->s[0];
		for (i = 1; i < ic->ns; i++)
			if (ic->s[i].used < slot->used)
				slot = &ic->s[i];
	}
	/* A copy: the connection's own session is marked not resumable
	 * when it ends without a close_notify (ssl_clear_bad_session),
	 * which an intercepted upstream connection usually does. */
	copy = SSL_SESSION_dup(sess);
	if (!copy)
		return 0;
	if (slot->sess)
		SSL_SESSION_free(slot->sess);
	(void)util_strlcpy(slot->host, host, sizeof(slot->host));
	slot->port = port;
	slot->sess = copy;
	slot->used = ++ic->tick;
	return 0; /* OpenSSL keeps (and drops) its own reference */
}

/* Offers the session kept for @host:@port, if any, to @ssl (before its
 * SSL_connect). The server may refuse it: then a full handshake runs. */
static void session_offer(struct intercept_cache *ic, SSL *ssl, const char *host,
			  uint16_t port)
{
	struct cached_session *slot = ic ? session_slot(ic, host, port) : NULL;

	if (!slot)
		return;
	if (!SSL_SESSION_is_resumable(slot->sess) ||
	    (time_t)(SSL_SESSION_get_time(slot->sess) + SSL_SESSION_get_timeout(slot->sess)) <=
		    time(NULL)) {
		SSL_SESSION_free(slot->sess);
		*slot = ic->s[--ic->ns];
		ic->s[ic->ns].sess = NULL;
		return;
	}
	slot->used = ++ic->tick;
	(void)SSL_set_session(ssl, slot->sess);
}

void intercept_cache_free(struct intercept_cache *ic)
{
	size_t i;

	if (!ic)
		return;
	for (i = 0; i < ic->n; i++)
		tls_cert_free(ic->e[i].cert);
	for (i = 0; i < ic->ns; i++)
		SSL_SESSION_free(ic->s[i].sess);
	if (worker_cache == ic)
		worker_cache = NULL;
	free(ic);
}

/* The parsed leaf for @host, fetched when missing or due. Borrowed from
 * the cache (SSL takes its own references). NULL with one line in @err. */
static const struct tls_cert *leaf_for(struct proxy *p, const char *host, char *err,
				       size_t errlen)
{
	struct intercept_cache *ic = p->leaves;
	const struct intercept_opts *o = p->intercept;
	struct cached_leaf *slot = NULL;
	struct tls_leaf leaf;
	struct tls_cert *cert;
	time_t now = time(NULL);
	size_t i;

	for (i = 0; i < ic->n; i++)
		if (strcmp(ic->e[i].host, host) == 0) {
			slot = &ic->e[i];
			break;
		}
	if (slot && now < slot->refresh) {
		slot->used = ++ic->tick;
		return slot->cert;
	}
	if (!o->leaf) {
		snprintf(err, errlen, "no session CA");
		return NULL;
	}
	if (o->leaf(o->leaf_arg, host, &leaf, err, errlen) < 0)
		return NULL;
	cert = tls_cert_from_pem(leaf.cert_pem, leaf.cert_len, leaf.key_pem, leaf.key_len,
				 err, errlen);
	tls_leaf_free(&leaf);
	if (!cert)
		return NULL;
	if (!slot && ic->n < CACHE_MAX) {
		slot = &ic->e[ic->n++];
	} else if (!slot) {
		slot = &ic->e[0];
		for (i = 1; i < ic->n; i++)
			if (ic->e[i].used < slot->used)
				slot = &ic->e[i];
	}
	tls_cert_free(slot->cert);
	(void)util_strlcpy(slot->host, host, sizeof(slot->host));
	slot->cert = cert;
	/* The key holder hands out leaves with at least TLS_LEAF_REFRESH
	 * left (it issues a new one before): asking again after half of
	 * that never serves an expired one. */
	slot->refresh = now + TLS_LEAF_REFRESH / 2;
	slot->used = ++ic->tick;
	return cert;
}

/* --- the handshakes ------------------------------------------------------------ */

struct intercept_state {
	BIO *hello;           /* the ClientHello already read, until consumed */
	bool upstream_h2;     /* the upstream chose h2 */
	bool reopen;          /* a second upstream connection, http/1.1
				 only, for an Upgrade (intercept_reopen) */
	char *upstream_error; /* why the upstream did not verify, or NULL */
};

void intercept_free(struct conn *c)
{
	if (!c->ic)
		return;
	/* the BIO belongs to the SSL once set */
	free(c->ic->upstream_error);
	free(c->ic);
	c->ic = NULL;
}

bool intercept_wanted(const struct conn *c)
{
	return c->p->intercept && tunnel_sni(c) &&
	       intercept_host_wanted(c->policy, &c->target, c->port);
}

/* Makes @e a TLS endpoint on its socket, keeping its epoll registration. */
static void make_tls(struct endpoint *e, SSL *ssl)
{
	uint32_t reg = e->registered;

	endpoint_set_ssl(e, e->fd, ssl);
	e->registered = reg;
}

static void fail_close(struct conn *c, const char *rule, const char *why)
{
	struct verdict v;

	verdict_set(&v, VERDICT_FAIL, 0, rule, why);
	v.extra = json_pack("{s:b, s:s, s:b}", "tls", 1, "sni", tunnel_sni(c), "intercepted", 1);
	(void)answer_apply(c, &v);
}

/* The waiting a TLS call asked for, as epoll interest on @upstream's side. */
static void want(struct conn *c, bool upstream, int ssl_err)
{
	conn_watch(c, upstream, ssl_err == SSL_ERROR_WANT_WRITE ? EPOLLOUT : EPOLLIN);
}

static void client_begin(struct conn *c);

/* The proxy's TLS handshake with the upstream, on the connected socket:
 * ALPN h2 and http/1.1 (@h2), else http/1.1 alone. */
static void upstream_handshake(struct conn *c, bool h2)
{
	char err[256];
	SSL *ssl;

	/* The system store, loaded on the first upstream handshake. */
	if (tls_client_trust_system(c->p->intercept->client) < 0) {
		fail_close(c, "upstream.tls", "cannot load the system's trust store");
		return;
	}
	ssl = SSL_new(c->p->intercept->client);
	if (!ssl) {
		ERR_clear_error();
		fail_close(c, "upstream.tls", "cannot make a TLS connection");
		return;
	}
	if (tls_client_prepare(ssl, c->target.name, err, sizeof(err)) < 0) {
		SSL_free(ssl);
		fail_close(c, "upstream.tls", err);
		return;
	}
	if (h2 && tls_client_offer_h2(ssl) < 0) {
		SSL_free(ssl);
		fail_close(c, "upstream.tls", "cannot offer h2");
		return;
	}
	if (!c->target.is_addr)
		session_offer(c->p->leaves, ssl, c->target.name, c->port);
	make_tls(&c->upstream, ssl);
	conn_enter(c, CONN_TLS_UPSTREAM);
	/* The client waits for our ServerHello (or, reopening, for the
	 * answer): nothing to read from it. */
	conn_watch(c, false, 0);
	intercept_step(c, true, 0);
}

/* The upstream is asked for h2 and http/1.1 whatever the client offers:
 * an h2 client's streams go as streams or one HTTP/1.1 exchange after
 * another (h2.c), an HTTP/1.1 client's requests as HTTP/1.1 or each one
 * h2 stream (h2up.c). */
void intercept_connected(struct conn *c)
{
	c->ic = util_xcalloc(1, sizeof(*c->ic));
	upstream_handshake(c, true);
}

/* An HTTP/1.1 request asking for Upgrade (WebSocket) on a connection
 * whose upstream chose h2: it gets an upstream connection of its own, to
 * the same checked address, verified again, asked for http/1.1 only
 * (WebSocket over h2, RFC 8441, is not offered). The h2 connection is
 * closed first: the exchange that follows an upgrade is the last one. */
void intercept_reopen(struct conn *c)
{
	conn_drop_upstream(c);
	upstream_connect(c);
}

/* The socket of intercept_reopen() is connected. */
void intercept_reopened(struct conn *c)
{
	c->ic = util_xcalloc(1, sizeof(*c->ic));
	c->ic->reopen = true;
	upstream_handshake(c, false);
}

static void step_upstream(struct conn *c)
{
	SSL *ssl = c->upstream.ssl;
	int r, e;

	ERR_clear_error();
	r = SSL_connect(ssl);
	if (r == 1 && c->ic->reopen) {
		intercept_free(c);
		if (!tls_alpn_ok(ssl) || tls_alpn_is_h2(ssl)) {
			fail_close(c, "upstream.tls",
				   "the upstream chose a protocol other than http/1.1");
			return;
		}
		exchange_upstream_ready(c);
		return;
	}
	if (r == 1) {
		if (!tls_alpn_ok(ssl)) {
			c->ic->upstream_error =
				util_xstrdup("the upstream chose a protocol other than http/1.1");
			conn_drop_upstream(c);
		} else {
			c->ic->upstream_h2 = tls_alpn_is_h2(ssl);
		}
		client_begin(c);
		return;
	}
	e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		want(c, true, e);
		return;
	}
	{
		char why[256];

		tls_handshake_error(ssl, r, why, sizeof(why));
		if (c->ic->reopen) {
			intercept_free(c);
			fail_close(c, "upstream.tls", why);
			return;
		}
		c->ic->upstream_error = util_xstrdup(why);
	}
	conn_drop_upstream(c);
	client_begin(c);
}

/* The client's handshake, answering the ClientHello in c->cin. */
static void client_begin(struct conn *c)
{
	const struct tls_cert *cert;
	char err[256];
	SSL *ssl;

	if (endpoint_open(&c->upstream))
		conn_unwatch(c, true); /* not read until the exchange starts */
	cert = leaf_for(c->p, c->target.name, err, sizeof(err));
	if (!cert) {
		fail_close(c, "tls.leaf", err);
		return;
	}
	ssl = SSL_new(c->p->intercept->server);
	if (!ssl) {
		ERR_clear_error();
		fail_close(c, "tls.leaf", "cannot make a TLS connection");
		return;
	}
	if (tls_server_use_cert(ssl, cert, err, sizeof(err)) < 0) {
		SSL_free(ssl);
		fail_close(c, "tls.leaf", err);
		return;
	}
	/* h2 to a client that offers it, whatever the upstream chose (h2.c
	 * relays stream to stream, or one HTTP/1.1 exchange after another);
	 * never when the answer is our 502 (HTTP/1.1) */
	if (!c->ic->upstream_error)
		tls_server_offer_h2(ssl);
	make_tls(&c->client, ssl);
	c->ic->hello = BIO_new(BIO_s_mem());
	ASSERT(c->ic->hello);
	/* empty: "try again", not end of file */
	BIO_set_mem_eof_return(c->ic->hello, -1);
	ASSERT(BIO_write(c->ic->hello, c->cin.data, (int)c->cin.len) == (int)c->cin.len);
	buf_free(&c->cin);
	SSL_set0_rbio(ssl, c->ic->hello); /* the SSL owns it now */
	conn_enter(c, CONN_TLS_CLIENT);
	intercept_step(c, false, 0);
}

static void established(struct conn *c)
{
	bool h2, upstream_h2;

	if (c->ic->upstream_error) {
		struct verdict v;

		/* The client speaks TLS with us: the 502 can be written. */
		c->tunnel = false;
		c->inner = true;
		verdict_setf(&v, VERDICT_FAIL, 502, "upstream.tls",
			     "the upstream's certificate does not verify: %s",
			     c->ic->upstream_error);
		v.extra = json_pack("{s:b, s:s, s:b}", "tls", 1, "sni", tunnel_sni(c),
				    "intercepted", 1);
		intercept_free(c);
		(void)answer_apply(c, &v);
		return;
	}
	upstream_h2 = c->ic->upstream_h2;
	intercept_free(c);
	h2 = tls_alpn_is_h2(c->client.ssl);
	answer_record_allow(c, json_pack("{s:b, s:s, s:b, s:s, s:s}", "tls", 1, "sni", tunnel_sni(c),
					  "intercepted", 1, "protocol", h2 ? "h2" : "http/1.1",
					  "upstream_protocol", upstream_h2 ? "h2" : "http/1.1"));
	c->tunnel = false;
	if (h2) {
		/* the client chose h2: stream to stream (h2.c), to an h2
		 * or an HTTP/1.1 upstream */
		h2_begin(c, upstream_h2);
		return;
	}
	if (upstream_h2)
		h2up_attach(&c->upstream); /* HTTP/1.1 carried over h2 */
	exchange_begin(c, true);
	if (!conn_closed(c) && c->state == CONN_HEAD)
		exchange_step(c, false, EPOLLIN);
}

static void step_client(struct conn *c)
{
	SSL *ssl = c->client.ssl;

	for (;;) {
		int r, e;

		ERR_clear_error();
		r = SSL_accept(ssl);
		if (r == 1) {
			established(c);
			return;
		}
		e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_WANT_READ && c->ic->hello &&
		    BIO_ctrl_pending(c->ic->hello) == 0) {
			/* The ClientHello is consumed: the rest comes from the
			 * socket. */
			BIO *sock = BIO_new_socket(c->client.fd, BIO_NOCLOSE);

			ASSERT(sock);
			c->ic->hello = NULL;
			SSL_set0_rbio(ssl, sock);
			continue;
		}
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			want(c, false, e);
			return;
		}
		{
			char why[256];

			tls_handshake_error(ssl, r, why, sizeof(why));
			fail_close(c, "tls.client", why);
		}
		return;
	}
}

void intercept_step(struct conn *c, bool upstream, uint32_t events)
{
	(void)events;
	if (c->state == CONN_TLS_UPSTREAM) {
		if (upstream || events == 0)
			step_upstream(c);
		return;
	}
	if (c->state == CONN_TLS_CLIENT && !upstream)
		step_client(c);
}
