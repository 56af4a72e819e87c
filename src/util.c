/* SPDX-License-Identifier: Apache-2.0
 * util.c - see util.h.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t util_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void util_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max < 262144) {
		struct rlimit want = { 262144, 262144 };

		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

bool util_timer_due(int64_t at, int *timeout)
{
	int64_t now = (int64_t)time(NULL);

	if (!at)
		return false;
	if (now >= at)
		return true;
	if (*timeout < 0 || (at - now) * 1000 < *timeout)
		*timeout = (int)((at - now) * 1000);
	return false;
}

unsigned int util_test_ms(const char *key, unsigned int def)
{
	const char *s = getenv("AIRLOCK_TEST_TIMEOUTS");
	size_t kl = strlen(key);

	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len > kl + 1 && strncmp(s, key, kl) == 0 && s[kl] == '=') {
			char num[16];
			unsigned long v;

			if (len - kl - 1 < sizeof(num)) {
				memcpy(num, s + kl + 1, len - kl - 1);
				num[len - kl - 1] = '\0';
				if (util_parse_uint(num, 1, def, &v))
					return (unsigned int)v;
			}
		}
		s = end ? end + 1 : NULL;
	}
	return def;
}

void util_assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "airlock: internal error: assertion '%s' failed at %s:%d\n",
		expr, file, line);
	abort();
}

static void vwarn(const char *fmt, va_list ap, int err)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (err)
		fprintf(stderr, "airlock: %s: %s\n", msg, strerror(err));
	else
		fprintf(stderr, "airlock: %s\n", msg);
}

void util_die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap, 0);
	va_end(ap);
	exit(status);
}

void util_die_errno(int status, const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap, err);
	va_end(ap);
	exit(status);
}

void util_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap, 0);
	va_end(ap);
}

__attribute__((noreturn)) static void oom(void)
{
	fputs("airlock: out of memory\n", stderr);
	abort();
}

void *util_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

void *util_xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

void *util_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom();
	return q;
}

char *util_xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom();
	return p;
}

char *util_xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (!p)
		oom();
	return p;
}

char *util_xasprintf(const char *fmt, ...)
{
	char *p = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	return p;
}

bool util_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size == 0)
		return false;
	if (n >= size) {
		dst[0] = '\0';
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

char *util_read_file(const char *path, size_t max, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t used = 0, cap;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto fail;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto fail;
	}
	cap = 4096;
	buf = util_xmalloc(cap);
	for (;;) {
		ssize_t r;

		if (used + 1 >= cap) {
			if (cap > max + 1) {
				errno = EFBIG;
				goto fail;
			}
			cap *= 2;
			buf = util_xrealloc(buf, cap);
		}
		r = read(fd, buf + used, cap - used - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		if (r == 0)
			break;
		used += (size_t)r;
		if (used > max) {
			errno = EFBIG;
			goto fail;
		}
	}
	buf[used] = '\0';
	close(fd);
	if (len)
		*len = used;
	return buf;
fail:
	err = errno;
	free(buf);
	close(fd);
	errno = err;
	return NULL;
}

int util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

void util_hex(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * len] = '\0';
}

void util_rfc3339_now(char out[25])
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	/* Years past 9999 would not fit; RFC 3339 has four digits anyway. */
	if (strftime(out, 20, "%Y-%m-%dT%H:%M:%S", &tm) != 19)
		memcpy(out, "9999-12-31T23:59:59", 20);
	snprintf(out + 19, 6, ".%03uZ", (unsigned int)(ts.tv_nsec / 1000000) % 1000u);
}

void util_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t r = getrandom(p, len, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			util_die_errno(EXIT_AIRLOCK_FAILURE, "getrandom");
		}
		p += r;
		len -= (size_t)r;
	}
}

bool util_parse_uint(const char *s, unsigned long min, unsigned long max,
		     unsigned long *out)
{
	unsigned long v = 0;
	const char *p;

	if (!s || !*s || strlen(s) > 20)
		return false;
	for (p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (v > (ULONG_MAX - (unsigned long)(*p - '0')) / 10)
			return false;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

int util_wait_status(int wstatus)
{
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return WEXITSTATUS(wstatus);
}

int util_exec_status(int err)
{
	return (err == ENOENT || err == ENOTDIR) ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

void util_session_sigset(sigset_t *set)
{
	static const int forwarded[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP,
					  SIGQUIT, SIGUSR1, SIGUSR2 };
	size_t i;

	sigemptyset(set);
	for (i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(set, forwarded[i]);
}

static unsigned int stdio_filled; /* bit n: descriptor n was closed */

void util_stdio_fill(void)
{
	int fd;

	for (fd = 0; fd < 3; fd++) {
		int nfd;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		nfd = open("/dev/null", O_RDWR);
		if (nfd != fd) {
			fprintf(stderr, "airlock: cannot open /dev/null on closed descriptor %d\n",
				fd);
			exit(EXIT_AIRLOCK_FAILURE);
		}
		stdio_filled |= 1u << fd;
	}
}

void util_stdio_unfill(void)
{
	int fd;

	for (fd = 0; fd < 3; fd++)
		if (stdio_filled & (1u << fd))
			close(fd);
}

/* util_tcp_pin()'s addresses: never freed (they live as long as the
 * process that pinned them). */
static struct {
	char *host, *port;
	struct addrinfo *ai;
} tcp_pins[UTIL_TCP_PINS];
static size_t ntcp_pins;

static int tcp_resolve(const char *host, const char *port, struct addrinfo **ai,
		       char *err, size_t errlen)
{
	struct addrinfo hints;
	int r;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	r = getaddrinfo(host, port, &hints, ai);
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(r));
		return -1;
	}
	return 0;
}

static struct addrinfo *tcp_pinned(const char *host, const char *port)
{
	size_t i;

	for (i = 0; i < ntcp_pins; i++)
		if (strcmp(tcp_pins[i].host, host) == 0 && strcmp(tcp_pins[i].port, port) == 0)
			return tcp_pins[i].ai;
	return NULL;
}

int util_tcp_pin(const char *host, const char *port, char *err, size_t errlen)
{
	struct addrinfo *ai = NULL;

	if (tcp_pinned(host, port))
		return 0;
	if (ntcp_pins == UTIL_TCP_PINS) {
		snprintf(err, errlen, "%s: more than %d addresses pinned", host, UTIL_TCP_PINS);
		return -1;
	}
	if (tcp_resolve(host, port, &ai, err, errlen) < 0)
		return -1;
	tcp_pins[ntcp_pins].host = util_xstrdup(host);
	tcp_pins[ntcp_pins].port = util_xstrdup(port);
	tcp_pins[ntcp_pins].ai = ai;
	ntcp_pins++;
	return 0;
}

int util_tcp_connect(const char *host, const char *port, int timeout_s, char *err,
		     size_t errlen)
{
	struct addrinfo *pinned = tcp_pinned(host, port), *ai = pinned, *a;
	struct timeval tv = { timeout_s, 0 };
	int fd = -1;

	if (!ai && tcp_resolve(host, port, &ai, err, errlen) < 0)
		return -1;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		snprintf(err, errlen, "%s:%s: %s", host, port, strerror(errno));
		close(fd);
		fd = -1;
	}
	if (!pinned)
		freeaddrinfo(ai);
	return fd;
}
