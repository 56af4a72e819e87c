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
	const char *const *names; /* symbol names, ... */
	const size_t *offsets;	/* ... where each goes in @table */
	size_t n;
	void *table;		/* a struct of function pointers */
	int state;		/* 0 not tried, 1 loaded, -1 failed */
	char err[200];		/* why it failed */
};

/* Loads @d once: opens its library and resolves every symbol, or none.
 * Returns true when every function pointer is set; otherwise false, and
 * d->err says why (the same answer on every later call). */
bool dynlib_load(struct dynlib *d);

#endif
