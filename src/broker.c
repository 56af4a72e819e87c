/* SPDX-License-Identifier: Apache-2.0
 * broker.c - reading brokered secrets and making their placeholders.
 *
 * DOC: Theory of Operation
 *
 * The supervisor reads each secret once, before the sandbox exists, from
 * its own environment (from_env) or a file (from_file; the sandbox hides
 * the file). The agent gets, in the secret's `env` variable, a placeholder
 * of the form `airlock-ph-<NAME>-<32 hex digits>`: 128 random bits per
 * session, so it is useless outside this session and cannot be guessed.
 * The name inside keeps logs readable and the placeholder recognisable to
 * a human reading a leaked request. Values live only in this process's
 * memory (not dumpable, see cmd_run.c) and are wiped with explicit_bzero
 * on every path out.
 */
#include "broker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define SECRET_FILE_MAX ((size_t)64 * 1024)

static int read_value(struct broker_secret *s, char *err, size_t errlen)
{
	const struct policy_secret *d = s->def;
	size_t len = 0;
	char *v;

	if (d->from_env) {
		const char *e = getenv(d->from_env);

		if (!e) {
			snprintf(err, errlen, "secret %s: variable %s is not set",
				 d->name, d->from_env);
			return -1;
		}
		s->value = util_xstrdup(e);
		s->value_len = strlen(e);
		return 0;
	}
	v = util_read_file(d->from_file, SECRET_FILE_MAX, &len);
	if (!v) {
		snprintf(err, errlen, "secret %s: cannot read %s: %s", d->name,
			 d->from_file, strerror(errno));
		return -1;
	}
	/* One trailing newline is the file's, not the secret's. */
	if (len > 0 && v[len - 1] == '\n')
		v[--len] = '\0';
	if (len > 0 && v[len - 1] == '\r')
		v[--len] = '\0';
	if (memchr(v, '\0', len)) {
		explicit_bzero(v, len);
		free(v);
		snprintf(err, errlen, "secret %s: %s contains a NUL byte", d->name,
			 d->from_file);
		return -1;
	}
	s->value = v;
	s->value_len = len;
	return 0;
}

int broker_load(struct broker *b, const struct policy *p, char *err, size_t errlen)
{
	size_t i;

	b->count = 0;
	b->secrets = util_xcalloc(p->nsecrets, sizeof(*b->secrets));
	for (i = 0; i < p->nsecrets; i++) {
		struct broker_secret *s = &b->secrets[i];
		uint8_t rnd[16];
		char hex[33];

		s->def = &p->secrets[i];
		b->count = i + 1;
		if (read_value(s, err, errlen) < 0)
			goto fail;
		if (s->value_len == 0) {
			snprintf(err, errlen, "secret %s: the value is empty", s->def->name);
			goto fail;
		}
		util_random(rnd, sizeof(rnd));
		util_hex(rnd, sizeof(rnd), hex);
		if ((size_t)snprintf(s->placeholder, sizeof(s->placeholder),
				     "airlock-ph-%s-%s", s->def->name, hex) >=
		    sizeof(s->placeholder)) {
			snprintf(err, errlen, "secret %s: name too long", s->def->name);
			goto fail;
		}
	}
	return 0;
fail:
	broker_free(b);
	return -1;
}

void broker_free(struct broker *b)
{
	size_t i;

	for (i = 0; i < b->count; i++) {
		if (b->secrets[i].value) {
			explicit_bzero(b->secrets[i].value, b->secrets[i].value_len);
			free(b->secrets[i].value);
		}
	}
	free(b->secrets);
	b->secrets = NULL;
	b->count = 0;
}
