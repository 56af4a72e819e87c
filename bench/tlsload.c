/* SPDX-License-Identifier: Apache-2.0
 * tlsload - the interception benchmark's TLS origin and load generator
 * (not part of airlock).
 *
 * DOC: Theory of Operation
 * Blocking sockets, one thread per connection on both sides: the point is
 * to load the proxy between them, and on a machine of two cores a few
 * dozen threads are plenty.
 *
 *   tlsload serve --listen ADDR:PORT --cert FILE --key FILE --expect HEADER
 *       HTTP/1.1 over TLS (1.2/1.3, ALPN http/1.1), keep-alive. Every
 *       request must carry the header line HEADER exactly (the value the
 *       proxy substituted), else 401. GET /bytes/N answers N bytes, any
 *       /text/N N letters, any other path 64 bytes, with Content-Length.
 *
 *   tlsload run --proxy ADDR:PORT --host NAME --ca FILE --header HEADER
 *               --mode keepalive|newconn|bulk|idle [--conns N] [--seconds S]
 *               [--bytes N] [--text 1]
 *       Each of --conns threads: CONNECT NAME:443 through the proxy, TLS
 *       with SNI NAME verified against --ca, then requests carrying
 *       HEADER (a placeholder): keepalive sends them all on one
 *       connection, newconn opens a new tunnel and TLS session for each
 *       (no session resumption: two full handshakes per request), bulk
 *       asks once for --bytes (zeros; letters with --text 1), idle sends
 *       one request on each connection, one connection at a time, and then
 *       holds them all open, idle,
 *       for --seconds (printing "idle-ready" once every request was
 *       answered: the moment to read the proxy's memory). Output: one line
 *       of key=value pairs (requests, errors, seconds, rps, mbps).
 *
 *   Metered calls (bench/spend_proxy.py): serve --json FILE --sse FILE
 *       answers a request whose head carries "X-Llm-Script: stream" with
 *       FILE --sse (text/event-stream), any other with FILE --json
 *       (application/json). run --post FILE sends POST /v1/messages with
 *       FILE as its JSON body instead of GET. --mode interleave: --proxy
 *       is a comma-separated list; one thread keeps one tunnel through
 *       each and makes --rounds rounds of one call through each, in a
 *       rotated order; output: one line per proxy with the median and
 *       quartiles of its calls' latency (request sent to last byte).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *o_listen, *o_cert, *o_key, *o_expect, *o_proxy, *o_host, *o_ca,
	*o_header, *o_mode = "keepalive";
static int o_conns = 8;
static double o_seconds = 10;
static unsigned long long o_bytes = 1ull << 30;
static int o_text, o_rounds = 200;
static char *o_post, *o_json, *o_sse;  /* file contents, or NULL */
static size_t o_post_len, o_json_len, o_sse_len;
static SSL_CTX *ctx;
static atomic_ullong n_requests, n_errors, n_bytes;
static atomic_bool stop;
static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *m)
{
	fprintf(stderr, "tlsload: %s\n", m);
	ERR_print_errors_fp(stderr);
	exit(2);
}

/* The contents of @path (or die). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *b;

	if (!f || fstat(fileno(f), &st) < 0)
		die("cannot read a --post/--json/--sse file");
	b = malloc((size_t)st.st_size + 1);
	if (!b || fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		die("cannot read a --post/--json/--sse file");
	fclose(f);
	b[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return b;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		die("ADDR:PORT expected");
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		die("bad IPv4 address");
}

/* Reads one HTTP/1.1 head into @buf (NUL-terminated); returns its length
 * or -1. Bytes read past it are left in @buf after the head: *@extra. */
static int read_head(SSL *s, char *buf, size_t cap, size_t *have, size_t *extra)
{
	for (;;) {
		char *end = *have ? memmem(buf, *have, "\r\n\r\n", 4) : NULL;
		int n;

		if (end) {
			size_t hl = (size_t)(end - buf) + 4;

			*extra = *have - hl;
			return (int)hl;
		}
		if (*have >= cap - 1)
			return -1;
		n = SSL_read(s, buf + *have, (int)(cap - 1 - *have));
		if (n <= 0)
			return -1;
		*have += (size_t)n;
		buf[*have] = '\0';
	}
}

static bool write_all(SSL *s, const void *p, size_t len)
{
	while (len > 0) {
		int n = SSL_write(s, p, (int)(len > 1 << 20 ? 1 << 20 : len));

		if (n <= 0)
			return false;
		p = (const char *)p + n;
		len -= (size_t)n;
	}
	return true;
}

/* --- the origin ------------------------------------------------------------ */

/* Reads and drops the body of the request whose head is in @buf (its
 * Content-Length); @extra bytes of it (or more) already follow the
 * head. Returns how many of them were the body's, or -1. */
static long skip_body(SSL *s, const char *buf, size_t extra)
{
	const char *cl = strcasestr(buf, "\r\ncontent-length:");
	unsigned long long len = cl ? strtoull(cl + 17, NULL, 10) : 0;
	char sink[16384];

	if (len <= extra)
		return (long)len;
	len -= extra;
	while (len > 0) {
		int n = SSL_read(s, sink, (int)(len > sizeof(sink) ? sizeof(sink) : len));

		if (n <= 0)
			return -1;
		len -= (unsigned long long)n;
	}
	return (long)extra;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static char zeros[1 << 16], text[1 << 16];
	char buf[16384];
	size_t have = 0, extra;
	SSL *s = SSL_new(ctx);

	if (!text[0])
		for (size_t i = 0; i < sizeof(text); i++)
			text[i] = (char)('a' + i % 26);
	SSL_set_fd(s, fd);
	if (SSL_accept(s) != 1)
		goto out;
	for (;;) {
		int hl = read_head(s, buf, sizeof(buf), &have, &extra);
		unsigned long long len = 64;
		char head[256];
		const char *fill = zeros, *ctype = "application/octet-stream";
		long used;
		bool ok;

		if (hl < 0)
			break;
		buf[hl - 2] = '\0';
		ok = !o_expect || strstr(buf, o_expect) != NULL;
		if (strncmp(buf, "GET /bytes/", 11) == 0)
			len = strtoull(buf + 11, NULL, 10);
		if (strncmp(buf, "GET /text/", 10) == 0) {
			len = strtoull(buf + 10, NULL, 10);
			fill = text;
		}
		if (o_sse && strcasestr(buf, "\r\nX-Llm-Script: stream")) {
			fill = o_sse;
			len = o_sse_len;
			ctype = "text/event-stream";
		} else if (o_json) {
			fill = o_json;
			len = o_json_len;
			ctype = "application/json";
		}
		used = skip_body(s, buf, extra);
		if (used < 0)
			break;
		snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %llu\r\n\r\n",
			 ok ? "200 OK" : "401 Unauthorized", ctype, ok ? len : 0ull);
		if (!write_all(s, head, strlen(head)))
			break;
		if (ok && fill != zeros && fill != text) {
			if (!write_all(s, fill, (size_t)len))
				break;
			len = 0;
		}
		while (ok && len > 0) {
			size_t n = len > sizeof(zeros) ? sizeof(zeros) : (size_t)len;

			if (!write_all(s, fill, n))
				goto out;
			len -= n;
		}
		memmove(buf, buf + hl + used, extra - (size_t)used);
		have = extra - (size_t)used;
	}
out:
	SSL_free(s);
	close(fd);
	return NULL;
}

__attribute__((noreturn)) static void serve(void)
{
	struct sockaddr_in sa;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, o_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, o_key, SSL_FILETYPE_PEM) != 1)
		die("cannot load the origin's certificate");
	parse_addr(o_listen, &sa);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1024) < 0)
		die("cannot listen");
	fprintf(stderr, "tlsload: serving\n");
	for (;;) {
		pthread_t t;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd) != 0) {
			close(fd);
			continue;
		}
		pthread_detach(t);
	}
}

/* --- the client ---------------------------------------------------------------- */

/* A tunnel to o_host:443 through the proxy, TLS verified. NULL on error. */
static SSL *open_tunnel(const char *proxy, int *fdp)
{
	struct sockaddr_in sa;
	char buf[4096];
	size_t have = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, n;
	SSL *s;

	parse_addr(proxy, &sa);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	n = snprintf(buf, sizeof(buf), "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n",
		     o_host, o_host);
	if (write(fd, buf, (size_t)n) != n)
		goto fail;
	/* the answer head, byte by byte: nothing of TLS may be eaten */
	while (have < sizeof(buf) - 1) {
		if (read(fd, buf + have, 1) != 1)
			goto fail;
		have++;
		if (have >= 4 && memcmp(buf + have - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	if (strncmp(buf, "HTTP/1.1 200", 12) != 0 && strncmp(buf, "HTTP/1.0 200", 12) != 0)
		goto fail;
	s = SSL_new(ctx);
	SSL_set_tlsext_host_name(s, o_host);
	SSL_set1_host(s, o_host);
	SSL_set_fd(s, fd);
	if (SSL_connect(s) != 1) {
		SSL_free(s);
		goto fail;
	}
	*fdp = fd;
	return s;
fail:
	close(fd);
	return NULL;
}

/* One request on @s; true when a 200 with its whole body came back. */
static bool request(SSL *s, const char *path, unsigned long long *got)
{
	char buf[16384], req[1024];
	size_t have = 0, extra;
	unsigned long long len;
	const char *cl;
	int hl, n;

	if (o_post)
		n = snprintf(req, sizeof(req), "POST /v1/messages HTTP/1.1\r\nHost: %s\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
			     "%s\r\n\r\n", o_host, o_post_len, o_header);
	else
		n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n",
			     path, o_host, o_header);
	if (!write_all(s, req, (size_t)n) || (o_post && !write_all(s, o_post, o_post_len)))
		return false;
	hl = read_head(s, buf, sizeof(buf), &have, &extra);
	if (hl < 0 || strncmp(buf, "HTTP/1.1 200", 12) != 0)
		return false;
	cl = strcasestr(buf, "\r\ncontent-length:");
	if (!cl)
		return false;
	len = strtoull(cl + 17, NULL, 10);
	*got = len;
	if (extra > len)
		return false;
	len -= extra;
	while (len > 0) {
		n = SSL_read(s, buf, (int)(len > sizeof(buf) ? sizeof(buf) : len));
		if (n <= 0)
			return false;
		len -= (unsigned long long)n;
	}
	return true;
}

static void close_tunnel(SSL *s, int fd)
{
	SSL_free(s);
	close(fd);
}

static void *client(void *arg)
{
	SSL *s = NULL;
	int fd = -1;
	unsigned long long got;

	(void)arg;
	if (strcmp(o_mode, "bulk") == 0) {
		char path[64];

		snprintf(path, sizeof(path), o_text ? "/text/%llu" : "/bytes/%llu", o_bytes);
		s = open_tunnel(o_proxy, &fd);
		if (s && request(s, path, &got)) {
			atomic_fetch_add(&n_requests, 1);
			atomic_fetch_add(&n_bytes, got);
		} else {
			atomic_fetch_add(&n_errors, 1);
		}
		if (s)
			close_tunnel(s, fd);
		return NULL;
	}
	if (strcmp(o_mode, "idle") == 0) {
		/* one connection at a time: what stays is the idle cost, not
		 * the high-water mark of many handshakes at once */
		pthread_mutex_lock(&one_at_a_time);
		s = open_tunnel(o_proxy, &fd);
		if (s && request(s, "/r", &got))
			atomic_fetch_add(&n_requests, 1);
		else
			atomic_fetch_add(&n_errors, 1);
		pthread_mutex_unlock(&one_at_a_time);
		while (!atomic_load(&stop))
			usleep(50000);
		if (s)
			close_tunnel(s, fd);
		return NULL;
	}
	while (!atomic_load(&stop)) {
		if (!s) {
			s = open_tunnel(o_proxy, &fd);
			if (!s) {
				atomic_fetch_add(&n_errors, 1);
				usleep(10000);
				continue;
			}
		}
		if (request(s, "/r", &got)) {
			atomic_fetch_add(&n_requests, 1);
		} else {
			atomic_fetch_add(&n_errors, 1);
			close_tunnel(s, fd);
			s = NULL;
			continue;
		}
		if (strcmp(o_mode, "newconn") == 0) {
			close_tunnel(s, fd);
			s = NULL;
		}
	}
	if (s)
		close_tunnel(s, fd);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* --mode interleave: one call through each proxy per round, the order
 * rotated each round; the latency percentiles of each proxy's calls. */
static int interleave(void)
{
	char *list = strdup(o_proxy), *save = NULL, *p;
	const char *proxies[32];
	SSL *ss[32];
	int fds[32], np = 0, i, r, errors = 0;
	double *lat;
	unsigned long long got;

	for (p = strtok_r(list, ",", &save); p && np < 32; p = strtok_r(NULL, ",", &save))
		proxies[np++] = p;
	lat = calloc((size_t)np * (size_t)o_rounds, sizeof(*lat));
	if (!np || !lat)
		die("--proxy: a list of ADDR:PORT");
	for (i = 0; i < np; i++) {
		ss[i] = open_tunnel(proxies[i], &fds[i]);
		if (!ss[i])
			die("cannot open a tunnel through a proxy");
		/* a first call each: handshakes and first-use costs out of
		 * the figures */
		for (r = 0; r < 5; r++)
			if (!request(ss[i], "/r", &got))
				die("a warm-up call failed");
	}
	for (r = 0; r < o_rounds; r++)
		for (int k = 0; k < np; k++) {
			i = (k + r) % np;
			double t0 = now();

			if (!request(ss[i], "/r", &got)) {
				errors++;
				close_tunnel(ss[i], fds[i]);
				ss[i] = open_tunnel(proxies[i], &fds[i]);
				if (!ss[i])
					die("cannot reopen a tunnel through a proxy");
				lat[i * o_rounds + r] = -1;
				continue;
			}
			lat[i * o_rounds + r] = now() - t0;
		}
	for (i = 0; i < np; i++) {
		double *v = lat + i * o_rounds;
		int n = 0;

		for (r = 0; r < o_rounds; r++)
			if (v[r] >= 0)
				v[n++] = v[r];
		qsort(v, (size_t)n, sizeof(*v), cmp_double);
		printf("proxy=%s calls=%d median_ms=%.3f q1_ms=%.3f q3_ms=%.3f\n", proxies[i],
		       n, n ? v[n / 2] * 1e3 : 0, n ? v[n / 4] * 1e3 : 0,
		       n ? v[3 * n / 4] * 1e3 : 0);
		close_tunnel(ss[i], fds[i]);
	}
	printf("errors=%d\n", errors);
	free(lat);
	free(list);
	return errors ? 1 : 0;
}

static int run(void)
{
	pthread_t *t = calloc((size_t)o_conns, sizeof(*t));
	double start, secs;
	int i, n = strcmp(o_mode, "bulk") == 0 ? 1 : o_conns;

	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_file(ctx, o_ca) != 1)
		die("cannot load --ca");
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	if (strcmp(o_mode, "interleave") == 0)
		return interleave();
	start = now();
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, client, NULL);
	if (strcmp(o_mode, "idle") == 0) {
		/* every connection answered once (or failed), then the hold */
		while (n_requests + n_errors < (unsigned long long)n && now() - start < 120)
			usleep(20000);
		printf("idle-ready\n");
		fflush(stdout);
		start = now();
	}
	if (n > 1 || strcmp(o_mode, "bulk") != 0) {
		while (now() - start < o_seconds)
			usleep(20000);
		atomic_store(&stop, true);
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	secs = now() - start;
	printf("mode=%s conns=%d requests=%llu errors=%llu seconds=%.3f rps=%.1f mbps=%.1f\n",
	       o_mode, n, (unsigned long long)n_requests, (unsigned long long)n_errors, secs,
	       (double)n_requests / secs, (double)n_bytes / secs / 1e6);
	free(t);
	return n_errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	int i;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		die("usage: tlsload serve|run OPTIONS (see the source)");
	for (i = 2; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (!strcmp(k, "--listen")) o_listen = v;
		else if (!strcmp(k, "--cert")) o_cert = v;
		else if (!strcmp(k, "--key")) o_key = v;
		else if (!strcmp(k, "--expect")) o_expect = v;
		else if (!strcmp(k, "--proxy")) o_proxy = v;
		else if (!strcmp(k, "--host")) o_host = v;
		else if (!strcmp(k, "--ca")) o_ca = v;
		else if (!strcmp(k, "--header")) o_header = v;
		else if (!strcmp(k, "--mode")) o_mode = v;
		else if (!strcmp(k, "--conns")) o_conns = atoi(v);
		else if (!strcmp(k, "--seconds")) o_seconds = atof(v);
		else if (!strcmp(k, "--bytes")) o_bytes = strtoull(v, NULL, 10);
		else if (!strcmp(k, "--text")) o_text = atoi(v);
		else if (!strcmp(k, "--rounds")) o_rounds = atoi(v);
		else if (!strcmp(k, "--post")) o_post = slurp(v, &o_post_len);
		else if (!strcmp(k, "--json")) o_json = slurp(v, &o_json_len);
		else if (!strcmp(k, "--sse")) o_sse = slurp(v, &o_sse_len);
		else die("unknown option");
	}
	if (!strcmp(argv[1], "serve") && o_listen && o_cert && o_key)
		serve();
	if (!strcmp(argv[1], "run") && o_proxy && o_host && o_ca && o_header)
		return run();
	die("missing options");
	return 2;
}
