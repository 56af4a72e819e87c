/* SPDX-License-Identifier: Apache-2.0
 * util.h - small helpers shared by every module: fatal errors, checked
 * allocation, bounded string handling and the always-on ASSERT().
 */
#ifndef AIRLOCK_UTIL_H
#define AIRLOCK_UTIL_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Exit statuses of `airlock run` (man/airlock.1). */
#define EXIT_AIRLOCK_FAILURE 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

/* Always-on invariant check: a security property never depends on NDEBUG. */
#define ASSERT(expr)                                                       \
	do {                                                               \
		if (!(expr))                                               \
			util_assert_fail(#expr, __FILE__, __LINE__);       \
	} while (0)

__attribute__((noreturn)) void util_assert_fail(const char *expr,
						const char *file, int line);

/* Prints "airlock: MESSAGE" on stderr and exits with @status. */
__attribute__((noreturn, format(printf, 2, 3))) void
util_die(int status, const char *fmt, ...);

/* Like util_die() and appends ": strerror(errno)". */
__attribute__((noreturn, format(printf, 2, 3))) void
util_die_errno(int status, const char *fmt, ...);

/* Prints "airlock: MESSAGE" on stderr. */
__attribute__((format(printf, 1, 2))) void util_warn(const char *fmt, ...);

/* Allocation that cannot fail: out of memory aborts the process. */
void *util_xmalloc(size_t n);
void *util_xcalloc(size_t nmemb, size_t size);
void *util_xrealloc(void *p, size_t n);
char *util_xstrdup(const char *s);
char *util_xstrndup(const char *s, size_t n);
__attribute__((format(printf, 1, 2))) char *util_xasprintf(const char *fmt,
							 ...);

/* Copies @src into @dst of @size bytes; false (and dst untouched beyond a
 * NUL at dst[0]) when it does not fit. */
bool util_strlcpy(char *dst, const char *src, size_t size);

/* Reads a whole file into a NUL-terminated malloc'd buffer, refusing files
 * over @max bytes. Returns NULL and sets errno on failure (EFBIG if too big).
 * The caller frees *out. @len receives the length without the NUL. */
char *util_read_file(const char *path, size_t max, size_t *len);

/* Writes all of @buf to @fd, retrying on EINTR and short writes.
 * Returns 0 or -errno. */
int util_write_all(int fd, const void *buf, size_t len);

/* Opens /dev/null on each of descriptors 0-2 that is closed, so that no
 * socket or file airlock opens later can take one of their numbers (and
 * be handed to a child as its standard stream). Dies if it cannot. */
void util_stdio_fill(void);

/* Closes again, in a child about to exec a command unchanged, the
 * descriptors util_stdio_fill() opened. */
void util_stdio_unfill(void);

/* Lowercase hex of @len bytes into @out (2*len+1 bytes). */
void util_hex(const uint8_t *in, size_t len, char *out);

/* Current UTC time as RFC 3339 with milliseconds, e.g.
 * "2026-11-30T12:00:00.123Z"; @out must hold 25 bytes. */
void util_rfc3339_now(char out[25]);

/* Fills @buf with @len bytes from the kernel CSPRNG; aborts on failure. */
void util_random(void *buf, size_t len);

/* The exit status `airlock run` gives for a command: its own, or 128+N if it was killed
 * by signal N. */
int util_wait_status(int wstatus);

/* The exit status of `airlock run` when exec failed with @err: 127 not found, else 126. */
int util_exec_status(int err);

/* SIGCHLD and the signals a session forwards to its command (SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2), in an emptied @set. */
void util_session_sigset(sigset_t *set);

/* A TCP connection to @host (a name or an address; pinned, see
 * util_tcp_pin(), or resolved now) and @port, whose connect, sends and
 * receives time out after @timeout_s seconds. Returns
 * the socket (close-on-exec), or -1 with a reason in @err. */
int util_tcp_connect(const char *host, const char *port, int timeout_s, char *err,
		     size_t errlen);

/* Resolves @host and @port now and keeps the addresses: util_tcp_connect()
 * to the same host and port then uses them without resolving again (for
 * a process whose filter will not let it read the resolver's files). At
 * most UTIL_TCP_PINS pins a process. Returns 0, or -1 with a reason in
 * @err. */
#define UTIL_TCP_PINS 4
int util_tcp_pin(const char *host, const char *port, char *err, size_t errlen);

/* Milliseconds of CLOCK_MONOTONIC: the one clock of every deadline. */
uint64_t util_now_ms(void);
/* Raises RLIMIT_NOFILE: to 262144 when the hard limit allows it, else to
 * the hard limit. */
void util_raise_fd_limit(void);

/* A poll loop's wall-clock timer at @at (Unix time; 0: none, e.g. a
 * credential's next refresh): true when it is due; otherwise false, with
 * @*timeout (ms, -1: none) lowered to the time left until it. */
bool util_timer_due(int64_t at, int *timeout);

/* A timeout that a test may shorten (test-only; docs/TESTING.md): the
 * value of @key in AIRLOCK_TEST_TIMEOUTS ("key=ms,key=ms"), if that is a
 * number below @def, else @def. It can only shorten a timeout, never
 * lengthen one, so a stray setting fails closed. */
unsigned int util_test_ms(const char *key, unsigned int def);

/* ASCII character classes, independent of the locale (a name's meaning
 * must not depend on LC_CTYPE, and <ctype.h> is undefined for negative
 * chars). Every parser uses these. */
static inline bool util_is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static inline bool util_is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool util_is_alnum(int c)
{
	return util_is_digit(c) || util_is_alpha(c);
}

/* 0..15 for a hex digit of either case, else -1. */
static inline int util_hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static inline char util_ascii_lower(char c)
{
	if (c >= 'A' && c <= 'Z')
		return (char)(c - 'A' + 'a');
	return c;
}

/* Parses a decimal integer in [min, max] with no sign, spaces or junk. */
bool util_parse_uint(const char *s, unsigned long min, unsigned long max,
		     unsigned long *out);

#endif /* AIRLOCK_UTIL_H */
