/* SPDX-License-Identifier: Apache-2.0
 * test_dynlib.c - dynlib.c: a library is mapped only once it is loaded,
 * every symbol or none, and a failure says what is missing (the same
 * answer every time).
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "dynlib.h"
#include "tap.h"
#include "util.h"

/* Whether a file whose name contains @name is mapped into this process. */
static bool mapped(const char *name)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name))
			found = true;
	fclose(f);
	return found;
}

#define GOOD_FUNCS(X) X(PQlibVersion) X(PQstatus)
DYNLIB_DEFINE(lib, pq, "libpq.so.5", GOOD_FUNCS);

int main(void)
{
	static const char *const bad[] = { "PQlibVersion", "PQnoSuchFunction" };
	struct dynlib none = { "libairlock-no-such-library.so.1", lib_names, 2, &pq, 0, "" };
	struct dynlib partial = { "libpq.so.5", bad, 2, &pq, 0, "" };

	/* The programs are not linked with it (Makefile: DLOPEN_PKGS). */
	tap_ok(!mapped("libpq.so"), "libpq is not mapped before it is loaded");
	tap_ok(!mapped("libnftables.so"), "libnftables is not mapped at start either");

	tap_ok(!dynlib_load(&none), "a library that is not there: false");
	tap_ok(strstr(none.err, "cannot load libairlock-no-such-library.so.1") != NULL,
	       "the error names the library (%s)", none.err);
	tap_ok(!dynlib_load(&none) && none.state == -1, "asked again: the same answer");

	tap_ok(!dynlib_load(&partial), "a symbol missing: false");
	tap_ok(strstr(partial.err, "libpq.so.5 has no PQnoSuchFunction") != NULL,
	       "the error names the symbol (%s)", partial.err);

	tap_ok(dynlib_load(&lib), "every symbol there: true");
	tap_ok(pq.PQlibVersion && pq.PQstatus, "every pointer set");
	tap_ok(pq.PQlibVersion && pq.PQlibVersion() >= 100000,
	       "the function answers through its pointer (libpq %d)",
	       pq.PQlibVersion ? pq.PQlibVersion() : 0);
	tap_ok(pq.PQstatus && pq.PQstatus(NULL) == CONNECTION_BAD,
	       "a second function too");
	tap_ok(mapped("libpq.so"), "now libpq is mapped");
	tap_ok(dynlib_load(&lib), "loading again is a no-op: true");
	return tap_done();
}
