/* SPDX-License-Identifier: Apache-2.0
 * dynlib.h - a shared library loaded with dlopen() on first use.
 *
 * libpq (a PostgreSQL spend ledger) and libnftables (transparent mode)
 * bring 22 of the 38 libraries airlock would otherwise map, relocate
 * and copy on every start and fork, for features most sessions never
 * use (docs/PERFORMANCE.md). Their callers keep the library's header
 * for its types and call through a table of function pointers that
 * dynlib_load() fills in.
 */
#ifndef AIRLOCK_DYNLIB_H
#define AIRLOCK_DYNLIB_H

#include <stdbool.h>
#include <stddef.h>

struct dynlib {
	const char *soname;	/* e.g. "libpq.so.5" */
	const char *const *names; /* symbol names, in the order of ... */
	size_t n;
	void *table;		/* ... a struct of as many function pointers */
	int state;		/* 0 not tried, 1 loaded, -1 failed */
	char err[200];		/* why it failed */
};

/* The names and the struct are tokens here, not expressions to bracket. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define DYNLIB_MEMBER_(f) __typeof__(f) *f;
#define DYNLIB_NAME_(f) #f,

/* Defines @api, a struct with one pointer member per function that
 * FUNCS(X) lists (X(name) each, the library's own names and types), and
 * @lib, the struct dynlib that fills it from @soname: call api.name()
 * once dynlib_load(&lib) said true. */
#define DYNLIB_DEFINE(lib, api, soname, FUNCS)                                   \
	static struct {                                                           \
		FUNCS(DYNLIB_MEMBER_)                                             \
	} api;                                                                    \
	static const char *const lib##_names[] = { FUNCS(DYNLIB_NAME_) };         \
	_Static_assert(sizeof(api) == sizeof(lib##_names) / sizeof(char *) *     \
					      sizeof(void *),                    \
		       "a table of function pointers and nothing else");          \
	static struct dynlib lib = { soname, lib##_names,                         \
				     sizeof(lib##_names) / sizeof(char *), &api, 0, "" }
/* NOLINTEND(bugprone-macro-parentheses) */

/* Loads @d once: opens its library and resolves every symbol, or none.
 * Returns true when every function pointer is set; otherwise false, and
 * d->err says why (the same answer on every later call). */
bool dynlib_load(struct dynlib *d);

#endif
