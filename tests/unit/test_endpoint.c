/* SPDX-License-Identifier: Apache-2.0
 * test_endpoint.c - plain and TLS endpoints over a socketpair: bytes both
 * ways, EOF versus truncation, and the mapping of SSL_ERROR_WANT_* to the
 * epoll interest a blocked call waits for (a TLS read that must write
 * waits for EPOLLOUT).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint.h"
#include "tap.h"
#include "util.h"

/* A self-signed P-256 certificate and key, in memory. */
static void make_cert(X509 **cert, EVP_PKEY **key)
{
	X509_NAME *name;

	*key = EVP_EC_gen("P-256");
	ASSERT(*key);
	*cert = X509_new();
	ASSERT(*cert);
	ASSERT(X509_set_version(*cert, 2) == 1);
	ASSERT(ASN1_INTEGER_set(X509_get_serialNumber(*cert), 1) == 1);
	ASSERT(X509_gmtime_adj(X509_getm_notBefore(*cert), -60));
	ASSERT(X509_gmtime_adj(X509_getm_notAfter(*cert), 3600));
	name = X509_get_subject_name(*cert);
	ASSERT(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					  (const unsigned char *)"endpoint.test", -1, -1, 0) == 1);
	ASSERT(X509_set_issuer_name(*cert, name) == 1);
	ASSERT(X509_set_pubkey(*cert, *key) == 1);
	ASSERT(X509_sign(*cert, *key, EVP_sha256()) > 0);
}

static void nonblock(int fd)
{
	ASSERT(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

/* Waits (bounded) until @fd has one of @events. */
static bool wait_for(int fd, uint32_t events)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	if (events & EPOLLIN)
		p.events |= POLLIN;
	if (events & EPOLLOUT)
		p.events |= POLLOUT;
	return poll(&p, 1, 2000) > 0;
}

/* Writes all of @len bytes through @e, waiting as it says. */
static bool put_all(struct endpoint *e, const char *d, size_t len)
{
	size_t off = 0;
	int rounds = 0;

	while (off < len && rounds++ < 10000) {
		ssize_t n = endpoint_write(e, d + off, len - off);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n != -EAGAIN || !wait_for(e->fd, endpoint_events(e, false, true)))
			return false;
	}
	return off == len;
}

static void test_plain(void)
{
	struct endpoint a, b;
	char buf[64];
	int sv[2];
	ssize_t n;

	ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	nonblock(sv[0]);
	nonblock(sv[1]);
	endpoint_set_fd(&a, sv[0]);
	endpoint_set_fd(&b, sv[1]);
	tap_ok(endpoint_plain(&a) && endpoint_open(&a), "a socket endpoint is plain and open");
	tap_is_int(endpoint_read(&b, buf, sizeof(buf)), -EAGAIN, "nothing to read: -EAGAIN");
	tap_is_int(endpoint_events(&b, true, true), EPOLLIN | EPOLLOUT,
		   "a plain read waits for EPOLLIN, a write for EPOLLOUT");
	tap_is_int(endpoint_write(&a, "hello", 5), 5, "write: the bytes moved");
	n = endpoint_read(&b, buf, sizeof(buf));
	tap_ok(n == 5 && memcmp(buf, "hello", 5) == 0, "read: the same bytes");
	tap_is_int(endpoint_shutdown(&a), 0, "shutdown sends our FIN");
	tap_is_int(endpoint_read(&b, buf, sizeof(buf)), 0, "the peer reads EOF (0)");
	endpoint_close(&b);
	tap_is_int(endpoint_write(&a, "x", 1), -EPIPE, "writing to a closed peer: -EPIPE, no SIGPIPE");
	endpoint_close(&a);
	tap_ok(!endpoint_open(&a) && a.fd == -1, "closed: empty");
}

struct tls_pair {
	SSL_CTX *sctx, *cctx;
	struct endpoint srv, cli;
};

static void tls_pair_new(struct tls_pair *t, int sndbuf)
{
	X509 *cert;
	EVP_PKEY *key;
	SSL *s, *c;
	int sv[2];

	make_cert(&cert, &key);
	t->sctx = SSL_CTX_new(TLS_server_method());
	t->cctx = SSL_CTX_new(TLS_client_method());
	ASSERT(t->sctx && t->cctx);
	ASSERT(SSL_CTX_use_certificate(t->sctx, cert) == 1);
	ASSERT(SSL_CTX_use_PrivateKey(t->sctx, key) == 1);
	if (sndbuf) {
		int i;

		/* a flight far larger than the socket buffer */
		for (i = 0; i < 64; i++)
			ASSERT(SSL_CTX_add_extra_chain_cert(t->sctx, X509_dup(cert)) == 1);
	}
	SSL_CTX_set_verify(t->cctx, SSL_VERIFY_NONE, NULL);
	X509_free(cert);
	EVP_PKEY_free(key);
	ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	if (sndbuf) {
		ASSERT(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) == 0);
		ASSERT(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf)) == 0);
	}
	nonblock(sv[0]);
	nonblock(sv[1]);
	s = SSL_new(t->sctx);
	c = SSL_new(t->cctx);
	ASSERT(s && c);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	endpoint_set_ssl(&t->srv, sv[0], s);
	endpoint_set_ssl(&t->cli, sv[1], c);
}

static void tls_pair_free(struct tls_pair *t)
{
	endpoint_close(&t->srv);
	endpoint_close(&t->cli);
	SSL_CTX_free(t->sctx);
	SSL_CTX_free(t->cctx);
}

/* Reads @want bytes from @r while @w (the peer) makes progress on its
 * own pending write of @wd (@wlen, may be 0): both are driven, without
 * blocking, for at most 2 s. Returns the bytes read. */
static size_t drive(struct endpoint *r, char *out, size_t want, struct endpoint *w,
		    const char *wd, size_t wlen)
{
	size_t got = 0, put = 0;
	int rounds;

	for (rounds = 0; rounds < 2000 && (got < want || put < wlen); rounds++) {
		struct pollfd p[2] = { { r->fd, POLLIN | POLLOUT, 0 },
				       { w->fd, POLLIN | POLLOUT, 0 } };

		if (got < want) {
			ssize_t n = endpoint_read(r, out + got, want - got);

			if (n > 0)
				got += (size_t)n;
			else if (n != -EAGAIN)
				break;
		}
		if (put < wlen) {
			ssize_t n = endpoint_write(w, wd + put, wlen - put);

			if (n > 0)
				put += (size_t)n;
			else if (n != -EAGAIN)
				break;
		}
		(void)poll(p, 2, 1);
	}
	return got;
}

static void test_tls(void)
{
	struct tls_pair t;
	char buf[256];
	ssize_t n;

	tls_pair_new(&t, 0);
	tap_ok(!endpoint_plain(&t.cli) && !endpoint_plain(&t.srv), "a TLS endpoint is not plain");
	/* The client's write starts the handshake: it must read the
	 * server's flight before anything is sent. */
	n = endpoint_write(&t.cli, "ping", 4);
	tap_is_int(n, -EAGAIN, "a TLS write before the handshake is done: -EAGAIN");
	tap_is_int(endpoint_events(&t.cli, false, true), EPOLLIN,
		   "and it waits for EPOLLIN (SSL_ERROR_WANT_READ), not EPOLLOUT");
	n = endpoint_read(&t.srv, buf, sizeof(buf));
	tap_is_int(n, -EAGAIN, "the server reads the ClientHello, answers, waits");
	tap_is_int(endpoint_events(&t.srv, true, false), EPOLLIN, "for the client's next flight");
	tap_ok(put_all(&t.cli, "ping", 4), "the client's write completes once the server answered");
	tap_ok(drive(&t.srv, buf, 4, &t.cli, NULL, 0) == 4 && memcmp(buf, "ping", 4) == 0,
	       "the server reads the bytes");
	tap_ok(put_all(&t.srv, "pong!", 5), "the server writes back");
	tap_ok(drive(&t.cli, buf, 5, &t.srv, NULL, 0) == 5 && memcmp(buf, "pong!", 5) == 0,
	       "the client reads them");
	tap_ok(!endpoint_pending(&t.cli), "nothing decrypted is left waiting");
	tap_ok(put_all(&t.srv, "abcdef", 6), "six more bytes");
	(void)wait_for(t.cli.fd, EPOLLIN);
	n = endpoint_read(&t.cli, buf, 2);
	tap_ok(n == 2 && endpoint_pending(&t.cli),
	       "a short read leaves decrypted bytes that no epoll event announces (pending)");
	tap_ok(drive(&t.cli, buf, 4, &t.srv, NULL, 0) == 4 && memcmp(buf, "cdef", 4) == 0,
	       "reading again gets them");
	tap_is_int(endpoint_shutdown(&t.srv), 0, "shutdown: close_notify and FIN");
	(void)wait_for(t.cli.fd, EPOLLIN);
	tap_is_int(endpoint_read(&t.cli, buf, sizeof(buf)), 0,
		   "close_notify reads as EOF (0)");
	tls_pair_free(&t);

	tls_pair_new(&t, 0);
	tap_ok(drive(&t.srv, buf, 1, &t.cli, "x", 1) == 1, "a second pair carries a byte");
	shutdown(t.srv.fd, SHUT_WR); /* a FIN without close_notify */
	(void)wait_for(t.cli.fd, EPOLLIN);
	n = endpoint_read(&t.cli, buf, sizeof(buf));
	tap_ok(n < 0 && n != -EAGAIN,
	       "a TLS stream cut without close_notify is an error (%zd), not EOF", n);
	tls_pair_free(&t);
}

/* A TLS read that has to write: the server's first read must send its
 * whole flight (a long certificate chain) into a socket whose buffer
 * holds less, so SSL_read reports SSL_ERROR_WANT_WRITE. */
static void test_tls_read_needs_write(void)
{
	struct tls_pair t;
	char buf[64];
	ssize_t n = 0;
	int i;

	tls_pair_new(&t, 4096);
	tap_is_int(endpoint_write(&t.cli, "q", 1), -EAGAIN,
		   "small buffers: the client sends its hello, waits");
	for (i = 0; i < 100; i++) {
		n = endpoint_read(&t.srv, buf, sizeof(buf));
		if (n != -EAGAIN || endpoint_events(&t.srv, true, false) == EPOLLOUT)
			break;
		(void)wait_for(t.srv.fd, EPOLLIN);
	}
	tap_ok(n == -EAGAIN && endpoint_events(&t.srv, true, false) == EPOLLOUT,
	       "a TLS read that must write its handshake waits for EPOLLOUT (got %u)",
	       endpoint_events(&t.srv, true, false));
	tap_is_int(endpoint_events(&t.srv, false, true), EPOLLOUT,
		   "a write's own interest is unchanged");
	tap_ok(drive(&t.srv, buf, 1, &t.cli, "q", 1) == 1 && buf[0] == 'q',
	       "once the client drains the socket, the server's read completes");
	tap_is_int(endpoint_events(&t.srv, true, false), EPOLLIN,
		   "a completed read waits for EPOLLIN again");
	tls_pair_free(&t);
}

static void test_bufs(void)
{
	struct endpoint a, b;
	struct buf in = { 0 }, out = { 0 };
	int sv[2], r;
	ssize_t n;

	ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	nonblock(sv[0]);
	nonblock(sv[1]);
	endpoint_set_fd(&a, sv[0]);
	endpoint_set_fd(&b, sv[1]);
	buf_puts(&out, "0123456789");
	r = endpoint_flush(&a, &out);
	tap_ok(r == 0 && out.len == 0, "flush writes everything and empties the buffer");
	n = endpoint_read_buf(&b, &in, 4);
	tap_ok(n == 4 && in.len == 4 && memcmp(in.data, "0123", 4) == 0,
	       "read_buf stops at its bound");
	tap_is_int(endpoint_read_buf(&b, &in, 4), -ENOBUFS, "a full buffer: -ENOBUFS");
	n = endpoint_read_buf(&b, &in, 64);
	tap_ok(n == 6 && in.len == 10, "then reads the rest");
	buf_free(&in);
	buf_free(&out);
	endpoint_close(&a);
	endpoint_close(&b);
}

int main(void)
{
	test_plain();
	test_tls();
	test_tls_read_needs_write();
	test_bufs();
	return tap_done();
}
