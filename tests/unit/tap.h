/* SPDX-License-Identifier: Apache-2.0
 * tap.h - a minimal TAP producer for the C unit tests (header-only).
 *
 *	tap_ok(cond, "what %s", ...);  tap_is_int(got, want, "...");
 *	tap_is_str(got, want, "...");  return tap_done();
 *
 * Diagnostics (a failure, got and want, tap_diag) go to stderr, which prove
 * shows without -v: a failed run says why.
 */
#ifndef AIRLOCK_TAP_H
#define AIRLOCK_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static inline bool
tap_ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond) {
		tap_failed++;
		fprintf(stderr, "# Failed test %d: ", tap_n);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	return cond;
}

#define tap_is_int(got, want, ...)                                          \
	do {                                                                \
		long long tap_g_ = (long long)(got), tap_w_ = (long long)(want); \
		if (!tap_ok(tap_g_ == tap_w_, __VA_ARGS__))                 \
			fprintf(stderr, "#   got %lld, want %lld\n", tap_g_, tap_w_); \
	} while (0)

#define tap_is_str(got, want, ...)                                          \
	do {                                                                \
		const char *tap_g_ = (got), *tap_w_ = (want);               \
		bool tap_eq_ = (tap_g_ && tap_w_) ? strcmp(tap_g_, tap_w_) == 0 \
						  : tap_g_ == tap_w_;       \
		if (!tap_ok(tap_eq_, __VA_ARGS__))                          \
			fprintf(stderr, "#   got '%s', want '%s'\n",          \
			       tap_g_ ? tap_g_ : "(null)",                  \
			       tap_w_ ? tap_w_ : "(null)");                 \
	} while (0)

__attribute__((format(printf, 1, 2))) static inline void
tap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Prints the plan and returns the process exit status. */
static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif /* AIRLOCK_TAP_H */
