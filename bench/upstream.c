/*
 * upstream - the benchmark's origin server (not part of airlock).
 *
 * DOC: Theory of Operation
 * One thread, one level-triggered epoll loop, non-blocking sockets. Every
 * connection speaks the bench protocol (bench/proto.h): the client sends a
 * 32-byte header "R <resp:16 hex> <total:8 hex>   \n" followed by
 * total - 32 bytes of padding; the server reads exactly that many bytes,
 * answers with exactly resp bytes, and waits for the next request on the
 * same connection. The client always speaks first, so a proxy that reads
 * the first flight before it connects upstream (airlock) is served too.
 * Bytes are read exactly as needed: no request is ever over-read, so no
 * per-connection buffer beyond the header is required.
 *
 *   upstream ADDR PORT
 *
 * Prints "upstream: listening on ADDR:PORT" on stderr once it accepts,
 * runs until SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"

enum state { ST_HDR, ST_BODY, ST_WRITE };

struct conn {
	int fd;
	enum state st;
	uint32_t hlen;
	char hdr[PROTO_HDR];
	uint64_t in_left;
	uint64_t out_left;
};

#define BUFSZ (1u << 20)
static char rbuf[BUFSZ];
static char wbuf[BUFSZ];
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void conn_close(int ep, struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
}

static void set_events(int ep, struct conn *c, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
}

/* Returns 0 to keep the connection, -1 to close it. */
static int conn_write(int ep, struct conn *c)
{
	while (c->out_left > 0) {
		size_t n = c->out_left < BUFSZ ? (size_t)c->out_left : BUFSZ;
		ssize_t w = write(c->fd, wbuf, n);
		if (w < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		c->out_left -= (uint64_t)w;
	}
	c->st = ST_HDR;
	c->hlen = 0;
	set_events(ep, c, EPOLLIN);
	return 0;
}

static int conn_read(int ep, struct conn *c)
{
	for (;;) {
		ssize_t r;
		if (c->st == ST_HDR) {
			r = read(c->fd, c->hdr + c->hlen, PROTO_HDR - c->hlen);
		} else {
			size_t n = c->in_left < BUFSZ ? (size_t)c->in_left : BUFSZ;
			r = read(c->fd, rbuf, n);
		}
		if (r < 0)
			return (errno == EAGAIN) ? 0 : (errno == EINTR ? 0 : -1);
		if (r == 0)
			return -1;
		if (c->st == ST_HDR) {
			c->hlen += (uint32_t)r;
			if (c->hlen < PROTO_HDR)
				continue;
			uint64_t resp, total;
			if (proto_parse(c->hdr, &resp, &total) < 0)
				return -1;
			c->in_left = total - PROTO_HDR;
			c->out_left = resp;
			c->st = ST_BODY;
		} else {
			c->in_left -= (uint64_t)r;
		}
		if (c->st == ST_BODY && c->in_left == 0) {
			c->st = ST_WRITE;
			if (conn_write(ep, c) < 0)
				return -1;
			if (c->st == ST_WRITE) {
				set_events(ep, c, EPOLLOUT);
				return 0;
			}
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: upstream ADDR PORT\n");
		return 2;
	}
	memset(wbuf, 'b', sizeof(wbuf));
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)atoi(argv[2])) };
	if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) {
		fprintf(stderr, "upstream: bad address %s\n", argv[1]);
		return 2;
	}
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(ls, 65535) < 0) {
		perror("upstream: listen");
		return 1;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event le = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &le);
	fprintf(stderr, "upstream: listening on %s:%s\n", argv[1], argv[2]);

	struct epoll_event evs[256];
	while (!stop) {
		int n = epoll_wait(ep, evs, 256, 500);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (c == NULL) {
				for (;;) {
					int fd = accept4(ls, NULL, NULL,
							 SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0)
						break;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
						   sizeof(one));
					struct conn *nc = calloc(1, sizeof(*nc));
					if (nc == NULL) {
						close(fd);
						continue;
					}
					nc->fd = fd;
					nc->st = ST_HDR;
					struct epoll_event e = { .events = EPOLLIN,
								 .data.ptr = nc };
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
				}
				continue;
			}
			int rc;
			if (c->st == ST_WRITE)
				rc = (evs[i].events & (EPOLLERR | EPOLLHUP)) &&
						     !(evs[i].events & EPOLLOUT)
					     ? -1
					     : conn_write(ep, c);
			else
				rc = conn_read(ep, c);
			if (rc < 0)
				conn_close(ep, c);
		}
	}
	return 0;
}
