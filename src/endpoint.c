/* SPDX-License-Identifier: Apache-2.0
 * endpoint.c - plain and TLS endpoints behind one interface.
 *
 * DOC: Theory of Operation
 *
 * A plain endpoint is recv()/send() on a non-blocking socket. A TLS
 * endpoint is SSL_read()/SSL_write() on the same socket; OpenSSL's
 * SSL_ERROR_WANT_READ and SSL_ERROR_WANT_WRITE become -EAGAIN, and the
 * direction the library waits for is kept per operation (rd_need for
 * reads, wr_need for writes), so the caller registers exactly the epoll
 * interest that unblocks it: a TLS write that must first read a record
 * waits for EPOLLIN, not EPOLLOUT. The error queue is cleared before every
 * call so that a stale error never decides the next one. A TLS stream that
 * ends without close_notify is a truncation (-ECONNRESET), never an EOF:
 * a cut response must not look complete.
 */
#include "endpoint.h"

#include <errno.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2up.h"
#include "util.h"

#define READ_CHUNK 16384

void endpoint_init(struct endpoint *e)
{
	e->fd = -1;
	e->ssl = NULL;
	e->rd_need = EPOLLIN;
	e->wr_need = EPOLLOUT;
	e->registered = ENDPOINT_UNREGISTERED;
	e->h2up = NULL;
}

void endpoint_set_fd(struct endpoint *e, int fd)
{
	endpoint_init(e);
	e->fd = fd;
}

void endpoint_set_ssl(struct endpoint *e, int fd, SSL *ssl)
{
	endpoint_init(e);
	e->fd = fd;
	e->ssl = ssl;
	/* RELEASE_BUFFERS: an idle TLS connection gives its read and write
	 * buffers (about 34 KiB) back between records */
	SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
				  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	ASSERT(SSL_set_fd(ssl, fd) == 1);
}

/* Maps the outcome of an SSL call that returned @ret <= 0; *need
 * receives the interest a retry waits for. */
static ssize_t ssl_result(struct endpoint *e, int ret, uint32_t *need)
{
	int err = SSL_get_error(e->ssl, ret);

	switch (err) {
	case SSL_ERROR_WANT_READ:
		*need = EPOLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*need = EPOLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		/* errno is meaningful only when the call itself failed */
		return errno && errno != EAGAIN ? -errno : -ECONNRESET;
	default:
		return -EPROTO;
	}
}

ssize_t endpoint_read_raw(struct endpoint *e, void *buf, size_t len)
{
	ASSERT(e->fd >= 0);
	if (!e->ssl) {
		ssize_t n;

		do
			n = recv(e->fd, buf, len, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return n;
	}
	{
		size_t got = 0;
		int r;

		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(e->ssl, buf, len, &got);
		if (r == 1) {
			e->rd_need = EPOLLIN;
			return (ssize_t)got;
		}
		return ssl_result(e, r, &e->rd_need);
	}
}

ssize_t endpoint_write_raw(struct endpoint *e, const void *buf, size_t len)
{
	ASSERT(e->fd >= 0);
	if (!e->ssl) {
		ssize_t n;

		do
			n = send(e->fd, buf, len, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return n;
	}
	{
		size_t put = 0;
		int r;

		/* SIGPIPE: the proxy ignores it process-wide (OpenSSL's
		 * socket BIO writes without MSG_NOSIGNAL). */
		ERR_clear_error();
		errno = 0;
		r = SSL_write_ex(e->ssl, buf, len, &put);
		if (r == 1) {
			e->wr_need = EPOLLOUT;
			return (ssize_t)put;
		}
		return ssl_result(e, r, &e->wr_need);
	}
}

ssize_t endpoint_read(struct endpoint *e, void *buf, size_t len)
{
	return e->h2up ? h2up_read(e, buf, len) : endpoint_read_raw(e, buf, len);
}

ssize_t endpoint_write(struct endpoint *e, const void *buf, size_t len)
{
	return e->h2up ? h2up_write(e, buf, len) : endpoint_write_raw(e, buf, len);
}

int endpoint_shutdown(struct endpoint *e)
{
	ASSERT(e->fd >= 0);
	if (e->ssl) {
		int r;

		ERR_clear_error();
		errno = 0;
		r = SSL_shutdown(e->ssl);
		if (r < 0) {
			ssize_t m = ssl_result(e, r, &e->wr_need);

			if (m == -EAGAIN)
				return -EAGAIN;
			/* the peer is gone: nothing more to say to it */
		}
	}
	if (shutdown(e->fd, SHUT_WR) < 0 && errno != ENOTCONN)
		return -errno;
	return 0;
}

bool endpoint_pending(const struct endpoint *e)
{
	if (e->h2up && h2up_pending(e->h2up))
		return true;
	return e->ssl && SSL_pending(e->ssl) > 0;
}

uint32_t endpoint_events(const struct endpoint *e, bool want_read,
			 bool want_write)
{
	if (e->h2up)
		return h2up_events(e, want_read, want_write);
	return (want_read ? e->rd_need : 0) | (want_write ? e->wr_need : 0);
}

ssize_t endpoint_read_buf(struct endpoint *e, struct buf *b, size_t max)
{
	size_t room;
	ssize_t n;

	if (b->len >= max)
		return -ENOBUFS;
	room = max - b->len < READ_CHUNK ? max - b->len : READ_CHUNK;
	n = endpoint_read(e, buf_reserve(b, room), room);
	if (n > 0)
		b->len += (size_t)n;
	return n;
}

int endpoint_flush(struct endpoint *e, struct buf *b)
{
	/* a translating endpoint has frames of its own to write */
	if (e->h2up && b->len == 0)
		return h2up_flush(e);
	while (b->len > 0) {
		ssize_t n = endpoint_write(e, b->data, b->len);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EAGAIN;
		buf_consume(b, (size_t)n);
	}
	return 0;
}

void endpoint_close(struct endpoint *e)
{
	h2up_free(e->h2up);
	if (e->ssl)
		SSL_free(e->ssl);
	if (e->fd >= 0)
		close(e->fd);
	endpoint_init(e);
}
