/*
 * load - the benchmark's load generator (not part of airlock).
 *
 * DOC: Theory of Operation
 * One thread, one level-triggered epoll loop, non-blocking sockets, a fixed
 * table of connections. Each connection walks the same state machine:
 *
 *   connect -> [send CONNECT -> read "HTTP/1.x 200 ...\r\n\r\n"]
 *           -> send request (bench/proto.h) -> read the response
 *
 * the bracketed part only through a proxy (--proxy); without it the
 * connection goes straight to the upstream (the "direct" baseline). The
 * client speaks first, as airlock's first-flight check requires.
 *
 * Modes:
 *   bulk  one tunnel, one request for --bytes of response; reports MB/s
 *         measured from the request to the last byte.
 *   rr    --conns concurrent clients; each request opens a NEW tunnel,
 *         sends --req bytes, reads --resp bytes, closes. Stops after
 *         --requests requests or --seconds, whichever comes first.
 *         Reports requests/s and latency percentiles (connect() to the
 *         last response byte).
 *   hold  opens --conns tunnels (at most --inflight being set up at once),
 *         each verified by one small request/response; then holds them
 *         idle for --hold seconds (or until SIGUSR1), counting tunnels the
 *         proxy drops; then sends one more request on every tunnel to show
 *         it still works. --ready FILE is written once all are set up;
 *         --limit S bounds the set-up phase (the rest count as errors).
 *
 * Output: one line of key=value pairs on stdout. Exit 0 when the run had
 * no error, 1 otherwise, 2 on bad usage. With LOAD_DEBUG set in the
 * environment, each idle tunnel that the proxy closes or writes into is
 * described on stderr (its local port and the bytes received).
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
#include <time.h>
#include <unistd.h>

#include "proto.h"

enum mode { M_BULK, M_RR, M_HOLD };
enum cstate { C_FREE, C_CONNECTING, C_SEND_CONNECT, C_READ_CONNECT,
	      C_SEND_REQ, C_READ_RESP, C_IDLE };
enum err { E_CONNECT, E_STATUS, E_EOF, E_TIMEOUT, E_IO, E_DATA, E_COUNT };
static const char *const err_name[E_COUNT] = {
	"connect", "status", "eof", "timeout", "io", "data"
};

struct conn {
	int fd;
	enum cstate st;
	uint8_t verify; /* hold: this is the second request */
	uint32_t off;   /* bytes of the current outbound message sent */
	uint32_t hseen; /* CONNECT answer: bytes read so far */
	uint32_t crlf;  /* CONNECT answer: matched part of "\r\n\r\n" */
	char status[16];
	uint64_t left;  /* response bytes still expected */
	double t0, deadline;
};

static struct {
	enum mode mode;
	struct sockaddr_in target, proxy;
	int use_proxy;
	char target_str[64];
	uint64_t bytes;
	int conns, inflight;
	long requests;
	double seconds, hold, timeout, limit;
	uint32_t req, resp;
	const char *ready;
} opt = { .mode = M_RR, .bytes = 1ull << 30, .conns = 64, .inflight = 256,
	  .requests = 20000, .seconds = 20, .hold = 30, .timeout = 15,
	  .req = 1024, .resp = 1024 };

static struct conn *tab;
static int ep;
static char connect_msg[256];
static size_t connect_len;
static char *reqbuf;
static char rbuf[1 << 20];
static long errs[E_COUNT];
static char first_err[160];
static volatile sig_atomic_t got_usr1, got_term;
static double t_origin;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_usr1(int s) { (void)s; got_usr1 = 1; }
static void on_term(int s) { (void)s; got_term = 1; }

static int parse_addr(const char *s, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

static void set_ev(struct conn *c, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
}

static void conn_free(struct conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->st = C_FREE;
}

static void conn_fail(struct conn *c, enum err e, const char *what)
{
	errs[e]++;
	if (first_err[0] == '\0')
		snprintf(first_err, sizeof(first_err), "%s:%s", err_name[e],
			 what);
	conn_free(c);
}

/* Starts a connection in slot c. Returns 0, or -1 (counted as an error). */
static int conn_start(struct conn *c)
{
	const struct sockaddr_in *to = opt.use_proxy ? &opt.proxy : &opt.target;
	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	c->t0 = now();
	c->deadline = c->t0 + opt.timeout;
	if (c->fd < 0) {
		conn_fail(c, E_CONNECT, strerror(errno));
		return -1;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->st = C_CONNECTING;
	struct epoll_event e = { .events = EPOLLOUT, .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
	if (connect(c->fd, (const struct sockaddr *)to, sizeof(*to)) < 0 &&
	    errno != EINPROGRESS) {
		conn_fail(c, E_CONNECT, strerror(errno));
		return -1;
	}
	return 0;
}

/* Sends the rest of msg; returns 1 when all sent, 0 on EAGAIN, -1 error. */
static int send_rest(struct conn *c, const char *msg, size_t len)
{
	while (c->off < len) {
		ssize_t w = send(c->fd, msg + c->off, len - c->off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		c->off += (uint32_t)w;
	}
	return 1;
}

static void begin_request(struct conn *c)
{
	c->st = C_SEND_REQ;
	c->off = 0;
	c->left = opt.mode == M_BULK ? opt.bytes : opt.resp;
}

/* Completed-request hooks, set per mode. */
static long done_ok, started;
static double *lat;
static long nlat;
static long established, dropped, verified;
static double t_first_req, t_last_byte;

static void on_response(struct conn *c)
{
	double t = now();
	switch (opt.mode) {
	case M_BULK:
		t_last_byte = t;
		done_ok++;
		conn_free(c);
		break;
	case M_RR:
		if (nlat < opt.requests)
			lat[nlat++] = t - c->t0;
		done_ok++;
		conn_free(c);
		break;
	case M_HOLD:
		if (c->verify) {
			verified++;
			conn_free(c);
		} else {
			established++;
			c->st = C_IDLE;
			set_ev(c, EPOLLIN);
		}
		break;
	}
}

static int all_b(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 'b')
			return 0;
	return 1;
}

/* Drives c as far as it can go without blocking. */
static void conn_step(struct conn *c, uint32_t events)
{
	for (;;) {
		switch (c->st) {
		case C_FREE:
			return;
		case C_CONNECTING: {
			int err = 0;
			socklen_t len = sizeof(err);
			if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
				return;
			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err != 0) {
				conn_fail(c, E_CONNECT, strerror(err));
				return;
			}
			c->off = 0;
			if (opt.use_proxy)
				c->st = C_SEND_CONNECT;
			else
				begin_request(c);
			break;
		}
		case C_SEND_CONNECT: {
			int r = send_rest(c, connect_msg, connect_len);
			if (r < 0) {
				conn_fail(c, E_IO, strerror(errno));
				return;
			}
			if (r == 0) {
				set_ev(c, EPOLLOUT);
				return;
			}
			c->st = C_READ_CONNECT;
			set_ev(c, EPOLLIN);
			return; /* the answer cannot be there yet */
		}
		case C_READ_CONNECT: {
			/* The client speaks first: nothing but the answer's
			 * head can arrive before our request, so reading into
			 * a scratch buffer over-reads nothing. */
			ssize_t r = read(c->fd, rbuf, sizeof(rbuf));
			if (r < 0) {
				if (errno == EAGAIN || errno == EINTR)
					return;
				conn_fail(c, E_IO, strerror(errno));
				return;
			}
			if (r == 0) {
				conn_fail(c, E_EOF, "CONNECT answer");
				return;
			}
			for (ssize_t i = 0; i < r; i++) {
				if (c->hseen < sizeof(c->status) - 1)
					c->status[c->hseen] = rbuf[i];
				c->hseen++;
				static const char end[] = "\r\n\r\n";
				if (rbuf[i] == end[c->crlf])
					c->crlf++;
				else
					c->crlf = rbuf[i] == '\r' ? 1 : 0;
				if (c->crlf == 4) {
					if (i != r - 1) {
						conn_fail(c, E_STATUS,
							  "data after CONNECT answer");
						return;
					}
					break;
				}
			}
			if (c->crlf < 4) {
				if (c->hseen > 8192) {
					conn_fail(c, E_STATUS, "CONNECT answer too long");
					return;
				}
				return;
			}
			if (strncmp(c->status, "HTTP/1.", 7) != 0 ||
			    strncmp(c->status + 8, " 200", 4) != 0) {
				char msg[32];
				snprintf(msg, sizeof(msg), "%.12s", c->status);
				conn_fail(c, E_STATUS, msg);
				return;
			}
			begin_request(c);
			break;
		}
		case C_SEND_REQ: {
			if (opt.mode == M_BULK && t_first_req == 0)
				t_first_req = now();
			int r = send_rest(c, reqbuf, opt.req);
			if (r < 0) {
				conn_fail(c, E_IO, strerror(errno));
				return;
			}
			if (r == 0) {
				set_ev(c, EPOLLOUT);
				return;
			}
			c->st = C_READ_RESP;
			set_ev(c, EPOLLIN);
			return;
		}
		case C_READ_RESP: {
			for (;;) {
				size_t want = c->left < sizeof(rbuf)
						      ? (size_t)c->left
						      : sizeof(rbuf);
				ssize_t r = read(c->fd, rbuf, want);
				if (r < 0) {
					if (errno == EAGAIN || errno == EINTR)
						return;
					conn_fail(c, E_IO, strerror(errno));
					return;
				}
				if (r == 0) {
					conn_fail(c, E_EOF, "response");
					return;
				}
				/* The upstream answers 'b' bytes only: anything
				 * else is the proxy writing into the tunnel. Bulk
				 * checks the ends of each read (cheap), the others
				 * every byte. */
				if (opt.mode == M_BULK
					    ? rbuf[0] != 'b' || rbuf[r - 1] != 'b'
					    : !all_b(rbuf, (size_t)r)) {
					conn_fail(c, E_DATA, "response is not the upstream's");
					return;
				}
				c->left -= (uint64_t)r;
				if (c->left == 0) {
					on_response(c);
					return;
				}
			}
		}
		case C_IDLE: {
			/* Anything readable on an idle tunnel is the proxy
			 * closing or resetting it. */
			ssize_t r = read(c->fd, rbuf, sizeof(rbuf));
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			dropped++;
			if (getenv("LOAD_DEBUG")) {
				struct sockaddr_in me;
				socklen_t ml = sizeof(me);
				getsockname(c->fd, (struct sockaddr *)&me, &ml);
				fprintf(stderr, "load: idle tunnel dropped at %.3f s "
					"(local port %u): %s %.*s\n", now() - t_origin,
					ntohs(me.sin_port),
					r == 0 ? "EOF" : r < 0 ? strerror(errno) : "data:",
					r > 0 ? (int)(r < 80 ? r : 80) : 0, rbuf);
			}
			conn_fail(c, r == 0 ? E_EOF : E_IO,
				  r == 0 ? "idle tunnel closed"
				  : r > 0 ? "unexpected data on idle tunnel"
					  : strerror(errno));
			return;
		}
		}
	}
}

static void check_deadlines(double t)
{
	for (int i = 0; i < opt.conns; i++) {
		struct conn *c = &tab[i];
		if (c->st != C_FREE && c->st != C_IDLE && t > c->deadline)
			conn_fail(c, E_TIMEOUT, "deadline");
	}
}

static int busy(void)
{
	int n = 0;
	for (int i = 0; i < opt.conns; i++)
		if (tab[i].st != C_FREE && tab[i].st != C_IDLE)
			n++;
	return n;
}

static void loop_once(int timeout_ms)
{
	struct epoll_event evs[512];
	int n = epoll_wait(ep, evs, 512, timeout_ms);
	for (int i = 0; i < n; i++)
		conn_step(evs[i].data.ptr, evs[i].events);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double p)
{
	if (nlat == 0)
		return 0;
	long i = (long)(p * (double)(nlat - 1) + 0.5);
	return lat[i] * 1000.0;
}

static long total_errs(void)
{
	long s = 0;
	for (int i = 0; i < E_COUNT; i++)
		s += errs[i];
	return s;
}

static void print_errs(void)
{
	printf(" errors=%ld", total_errs());
	for (int i = 0; i < E_COUNT; i++)
		if (errs[i])
			printf(" err_%s=%ld", err_name[i], errs[i]);
	if (first_err[0]) {
		for (char *p = first_err; *p; p++)
			if (*p == ' ')
				*p = '_';
		printf(" first_error=%s", first_err);
	}
}

static void run_bulk(void)
{
	conn_start(&tab[0]);
	double t_end = now() + opt.timeout;
	while (tab[0].st != C_FREE && now() < t_end && !got_term)
		loop_once(100);
	if (tab[0].st != C_FREE)
		conn_fail(&tab[0], E_TIMEOUT, "bulk transfer");
	double secs = t_last_byte > 0 ? t_last_byte - t_first_req : 0;
	printf("mode=bulk bytes=%llu seconds=%.4f mb_per_s=%.1f",
	       (unsigned long long)opt.bytes, secs,
	       secs > 0 ? (double)opt.bytes / secs / 1e6 : 0.0);
	print_errs();
	printf("\n");
}

static void run_rr(void)
{
	lat = calloc((size_t)opt.requests, sizeof(*lat));
	double t_start = now(), t_stop = t_start + opt.seconds, t_scan = t_start;
	for (;;) {
		double t = now();
		int active = 0;
		for (int i = 0; i < opt.conns; i++) {
			if (tab[i].st == C_FREE && started < opt.requests &&
			    t < t_stop && !got_term) {
				started++;
				conn_start(&tab[i]);
			}
			if (tab[i].st != C_FREE)
				active++;
		}
		if (active == 0)
			break;
		loop_once(10);
		if (t - t_scan > 0.1) {
			check_deadlines(t);
			t_scan = t;
		}
	}
	double secs = now() - t_start;
	qsort(lat, (size_t)nlat, sizeof(*lat), cmp_double);
	printf("mode=rr conns=%d requests=%ld ok=%ld seconds=%.3f req_per_s=%.0f "
	       "p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f",
	       opt.conns, started, done_ok, secs, (double)done_ok / secs,
	       pct(0.50), pct(0.90), pct(0.99), nlat ? lat[nlat - 1] * 1000 : 0);
	print_errs();
	printf("\n");
}

static void run_hold(void)
{
	double t_start = now(), t_scan = t_start;
	double t_limit = opt.limit > 0 ? t_start + opt.limit : 1e300;
	int next = 0;
	/* Phase 1: set up every tunnel, --inflight at a time, for at most
	 * --limit seconds. */
	for (;;) {
		double t = now();
		if (t > t_limit) {
			for (int i = 0; i < opt.conns; i++)
				if (tab[i].st != C_FREE && tab[i].st != C_IDLE)
					conn_fail(&tab[i], E_TIMEOUT, "setup limit");
			break;
		}
		int b = busy();
		while (next < opt.conns && b < opt.inflight && !got_term) {
			conn_start(&tab[next++]);
			b++;
		}
		if (b == 0 && (next >= opt.conns || got_term))
			break;
		loop_once(10);
		if (t - t_scan > 0.1) {
			check_deadlines(t);
			t_scan = t;
		}
	}
	double setup = now() - t_start;
	long setup_errs = total_errs();
	fprintf(stderr, "load: hold: %ld/%d tunnels up in %.2f s, %ld errors\n",
		established, opt.conns, setup, setup_errs);
	if (opt.ready) {
		FILE *f = fopen(opt.ready, "w");
		if (f) {
			fprintf(f, "%ld\n", established);
			fclose(f);
		}
	}
	/* Phase 2: idle. */
	double t_hold_end = now() + opt.hold;
	while (!got_usr1 && !got_term && now() < t_hold_end)
		loop_once(100);
	/* Phase 3: one more request on every tunnel that is still up. */
	long idle = 0;
	for (int i = 0; i < opt.conns; i++) {
		struct conn *c = &tab[i];
		if (c->st != C_IDLE)
			continue;
		idle++;
		c->verify = 1;
		c->deadline = now() + opt.timeout;
		begin_request(c);
		conn_step(c, EPOLLOUT);
	}
	t_scan = now();
	while (busy() > 0) {
		double t = now();
		loop_once(10);
		if (t - t_scan > 0.1) {
			check_deadlines(t);
			t_scan = t;
		}
	}
	printf("mode=hold conns=%d established=%ld setup_s=%.3f setup_errors=%ld "
	       "not_started=%d dropped=%ld verified=%ld",
	       opt.conns, established, setup, setup_errs, opt.conns - next,
	       dropped, verified);
	(void)idle;
	print_errs();
	printf("\n");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: load --target ADDR:PORT [--proxy ADDR:PORT] --mode bulk|rr|hold\n"
		"  [--bytes N] [--conns N] [--requests N] [--seconds S]\n"
		"  [--req BYTES] [--resp BYTES] [--inflight N] [--hold S]\n"
		"  [--timeout S] [--limit S] [--ready FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *target = NULL, *proxy = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--target"))
			target = v;
		else if (!strcmp(a, "--proxy"))
			proxy = v;
		else if (!strcmp(a, "--mode"))
			opt.mode = !strcmp(v, "bulk") ? M_BULK
				 : !strcmp(v, "hold") ? M_HOLD
				 : !strcmp(v, "rr")   ? M_RR
						      : (usage(), M_RR);
		else if (!strcmp(a, "--bytes"))
			opt.bytes = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--conns"))
			opt.conns = atoi(v);
		else if (!strcmp(a, "--requests"))
			opt.requests = atol(v);
		else if (!strcmp(a, "--seconds"))
			opt.seconds = atof(v);
		else if (!strcmp(a, "--req"))
			opt.req = (uint32_t)atol(v);
		else if (!strcmp(a, "--resp"))
			opt.resp = (uint32_t)atol(v);
		else if (!strcmp(a, "--inflight"))
			opt.inflight = atoi(v);
		else if (!strcmp(a, "--hold"))
			opt.hold = atof(v);
		else if (!strcmp(a, "--timeout"))
			opt.timeout = atof(v);
		else if (!strcmp(a, "--limit"))
			opt.limit = atof(v);
		else if (!strcmp(a, "--ready"))
			opt.ready = v;
		else
			usage();
	}
	if (target == NULL || parse_addr(target, &opt.target) < 0 ||
	    (proxy && parse_addr(proxy, &opt.proxy) < 0) || opt.conns < 1 ||
	    opt.req < PROTO_HDR || opt.requests < 1)
		usage();
	opt.use_proxy = proxy != NULL;
	if (opt.mode == M_BULK) {
		opt.conns = 1;
		opt.req = PROTO_HDR;
	}
	snprintf(opt.target_str, sizeof(opt.target_str), "%s", target);
	connect_len = (size_t)snprintf(connect_msg, sizeof(connect_msg),
				       "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
				       target, target);
	reqbuf = malloc(opt.req);
	memset(reqbuf, 'a', opt.req);
	proto_format(reqbuf, opt.mode == M_BULK ? opt.bytes : opt.resp, opt.req);

	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	tab = calloc((size_t)opt.conns, sizeof(*tab));
	for (int i = 0; i < opt.conns; i++)
		tab[i].fd = -1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	t_origin = now();
	switch (opt.mode) {
	case M_BULK: run_bulk(); break;
	case M_RR: run_rr(); break;
	case M_HOLD: run_hold(); break;
	}
	fflush(stdout);
	return total_errs() == 0 ? 0 : 1;
}
