/* SPDX-License-Identifier: Apache-2.0
 * endpoint.h - one side of a proxied connection: a socket, or TLS over a
 * socket, behind the same four calls.
 *
 * The HTTP exchange and the tunnel read and write endpoints, never raw
 * descriptors, so that a TLS-intercepted connection runs the same code as
 * a plain one (OpenBSD httpd swaps its read/write callbacks the same way).
 *
 * Contract of every I/O call: it returns the bytes moved (> 0), 0 for the
 * peer's orderly end (EOF, or TLS close_notify), or -errno. -EAGAIN means
 * "call again once endpoint_events() is ready": for a plain socket a read
 * waits for EPOLLIN and a write for EPOLLOUT; for TLS either may wait for
 * the other direction (a TLS read may have to write a handshake or key
 * update record, a write may have to read one), and the endpoint
 * remembers which (SSL_ERROR_WANT_READ/WANT_WRITE). A TLS endpoint may
 * also hold decrypted bytes that no epoll event announces: a reader that
 * stops before -EAGAIN checks endpoint_pending() when it resumes.
 * Calls never block and never raise SIGPIPE.
 */
#ifndef AIRLOCK_ENDPOINT_H
#define AIRLOCK_ENDPOINT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* registered: not in the epoll set (yet, or any more) */
#define ENDPOINT_UNREGISTERED UINT32_MAX

struct endpoint {
	int fd;             /* -1: no connection on this side */
	SSL *ssl;           /* NULL: plain; owned */
	uint32_t rd_need;   /* epoll events the last blocked read waits for */
	uint32_t wr_need;   /* ... and the last blocked write */
	uint32_t registered;/* interest in the epoll set (conn.c keeps it) */
	struct h2up *h2up;  /* NULL, or HTTP/1.1 carried over h2 (h2up.c) */
};

/* An empty endpoint (fd -1). */
void endpoint_init(struct endpoint *e);
/* A plain socket, non-blocking; the endpoint owns @fd. */
void endpoint_set_fd(struct endpoint *e, int fd);
/* TLS over the socket @fd; the endpoint owns @fd and @ssl (already set
 * up as client or server, SSL_set_fd done or not: this does it). Partial
 * writes and a moving write buffer are enabled (the buffers move). */
void endpoint_set_ssl(struct endpoint *e, int fd, SSL *ssl);

static inline bool endpoint_open(const struct endpoint *e)
{
	return e->fd >= 0;
}

/* Plain sockets on both sides can be spliced; TLS cannot. */
static inline bool endpoint_plain(const struct endpoint *e)
{
	return e->ssl == NULL;
}

ssize_t endpoint_read(struct endpoint *e, void *buf, size_t len);
ssize_t endpoint_write(struct endpoint *e, const void *buf, size_t len);

/* The socket or TLS itself, under any translation (h2up.c). */
ssize_t endpoint_read_raw(struct endpoint *e, void *buf, size_t len);
ssize_t endpoint_write_raw(struct endpoint *e, const void *buf, size_t len);

/* Sends our end of the stream: TLS close_notify, then the socket's FIN.
 * Returns 0, -EAGAIN (call again when endpoint_events(e, false, true)
 * is ready) or -errno. */
int endpoint_shutdown(struct endpoint *e);

/* TLS: decrypted bytes are waiting in the library. */
bool endpoint_pending(const struct endpoint *e);

/* The epoll interest that lets a blocked read (@want_read) and/or write
 * (@want_write) make progress. */
uint32_t endpoint_events(const struct endpoint *e, bool want_read,
			 bool want_write);

/* Appends what is available to @b, until @b holds @max bytes: returns as
 * endpoint_read() (-ENOBUFS when @b is already full). */
ssize_t endpoint_read_buf(struct endpoint *e, struct buf *b, size_t max);

/* Writes @b out, consuming what was written. Returns 0 when @b is empty,
 * -EAGAIN while bytes remain, or -errno. */
int endpoint_flush(struct endpoint *e, struct buf *b);

/* Frees the TLS state and closes the socket (which also leaves every
 * epoll set); the endpoint is empty afterwards. */
void endpoint_close(struct endpoint *e);

#endif /* AIRLOCK_ENDPOINT_H */
