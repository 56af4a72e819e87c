/* SPDX-License-Identifier: Apache-2.0
 * dynlib.c - a shared library loaded with dlopen() on first use
 * (dynlib.h).
 */
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

bool dynlib_load(struct dynlib *d)
{
	void *h, *sym;
	size_t i;

	if (d->state)
		return d->state > 0;
	d->state = -1;
	/* RTLD_NOW: a missing symbol is an error here, not a crash later. */
	h = dlopen(d->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();

		snprintf(d->err, sizeof(d->err), "cannot load %s: %s", d->soname,
			 e ? e : "not found");
		return false;
	}
	for (i = 0; i < d->n; i++) {
		sym = dlsym(h, d->names[i]);
		if (!sym) {
			snprintf(d->err, sizeof(d->err), "%s has no %s", d->soname,
				 d->names[i]);
			dlclose(h);
			return false;
		}
		/* POSIX: a function pointer has the size and representation
		 * of a void pointer; the table is an array of them
		 * (DYNLIB_DEFINE checks its size). */
		memcpy((char *)d->table + i * sizeof(sym), &sym, sizeof(sym));
	}
	d->state = 1;
	return true;
}
