/* SPDX-License-Identifier: Apache-2.0
 * registry.c - every value the proxy injects, with its placeholder: what
 * the response scrubber hides (see registry.h).
 *
 * DOC: Theory of Operation
 *
 * Entries are appended and never removed (a token that was refreshed may
 * still be echoed by an upstream). Each addition builds a fresh scrub set
 * over every entry; the registry holds one reference to the newest set,
 * and each stream that scrubs holds another, so a set lives while a
 * response that started with it is being relayed. Entries own copies of
 * their strings, which stay put when the entry array grows, so that sets
 * can borrow them: the registry is freed only after every set taken
 * from it was released (the worker frees it at exit).
 */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "util.h"

struct entry {
	char *name;
	char *value;
	size_t len;
	char *ph;
	size_t phlen;
};

struct registry_set {
	unsigned int refs;
	struct scrub_set *set;
	struct scrub_needle *needles;
	const char **names;
	size_t n;
};

struct registry {
	struct entry *e;
	size_t n;
	struct registry_set *current;
};

struct registry *registry_new(void)
{
	return util_xcalloc(1, sizeof(struct registry));
}

void registry_release(struct registry_set *s)
{
	if (!s)
		return;
	ASSERT(s->refs > 0);
	if (--s->refs > 0)
		return;
	scrub_set_free(s->set);
	explicit_bzero(s->needles, s->n * sizeof(*s->needles));
	free(s->needles);
	free(s->names);
	free(s);
}

void registry_free(struct registry *r)
{
	size_t i;

	if (!r)
		return;
	registry_release(r->current);
	for (i = 0; i < r->n; i++) {
		explicit_bzero(r->e[i].value, r->e[i].len);
		free(r->e[i].value);
		free(r->e[i].name);
		free(r->e[i].ph);
	}
	free(r->e);
	free(r);
}

static bool clean(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

static void rebuild(struct registry *r)
{
	struct registry_set *s = util_xcalloc(1, sizeof(*s));
	size_t i;

	s->refs = 1;
	s->n = r->n;
	s->needles = util_xcalloc(r->n, sizeof(*s->needles));
	s->names = util_xcalloc(r->n, sizeof(*s->names));
	for (i = 0; i < r->n; i++) {
		s->needles[i] = (struct scrub_needle){ r->e[i].value, r->e[i].len, r->e[i].ph,
						       r->e[i].phlen };
		s->names[i] = r->e[i].name;
	}
	s->set = scrub_set_new(s->needles, s->n);
	registry_release(r->current);
	r->current = s;
}

int registry_add(struct registry *r, const char *name, const char *value, size_t len,
		 const char *placeholder, size_t phlen)
{
	struct entry *e;
	size_t i;

	if (!name || !value || !placeholder || len == 0 || len > REGISTRY_VALUE_MAX ||
	    phlen == 0 || phlen > REGISTRY_VALUE_MAX || strlen(name) > REGISTRY_NAME_MAX ||
	    !clean(value, len))
		return -1;
	for (i = 0; i < r->n; i++)
		if (r->e[i].len == len && CRYPTO_memcmp(r->e[i].value, value, len) == 0)
			return 0;
	if (r->n >= REGISTRY_MAX)
		return -1;
	r->e = util_xrealloc(r->e, (r->n + 1) * sizeof(*r->e));
	e = &r->e[r->n++];
	e->name = util_xstrdup(name);
	e->value = util_xstrndup(value, len);
	e->len = len;
	e->ph = util_xstrndup(placeholder, phlen);
	e->phlen = phlen;
	rebuild(r);
	return 1;
}

size_t registry_count(const struct registry *r)
{
	return r->n;
}

struct registry_set *registry_acquire(struct registry *r)
{
	if (!r || !r->current)
		return NULL;
	r->current->refs++;
	return r->current;
}

const struct scrub_set *registry_scrub(const struct registry_set *s)
{
	return s->set;
}

const char *registry_name(const struct registry_set *s, size_t k)
{
	ASSERT(k < s->n);
	return s->names[k];
}
