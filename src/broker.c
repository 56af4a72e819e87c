/* SPDX-License-Identifier: Apache-2.0
 * broker.c - reading brokered secrets and making their placeholders.
 *
 * DOC: Theory of Operation
 *
 * The supervisor reads each secret once, before the sandbox exists, from
 * its own environment (from_env) or a file (from_file; the sandbox hides
 * the file). The agent gets, in the secret's `env` variable, a placeholder
 * that is random per session: useless outside this session, and never
 * guessable, yet shaped like the real value so that a client's own format
 * check (a length, a prefix, "hex only") accepts it:
 *
 *	placeholder = prefix + R random characters
 *	R = max(BROKER_RANDOM_MIN, value length - prefix length)
 *
 * so a value at least prefix + 32 characters long gets a placeholder of
 * exactly its length. The prefix is the policy's `prefix` (default
 * `airlock-ph-NAME-`: the name keeps a leaked request readable). The
 * random characters come from the smallest of a fixed list of classes
 * (digits, hex, lower/upper alphanumerics, base62, base64url, base64) that
 * holds the value's own characters after the prefix; base62 when none
 * does. Even the smallest class, digits, gives 32 * log2(10) > 106 bits.
 * Each character is drawn from getrandom() by rejection sampling: a byte
 * is used only below the largest multiple of the class size, so every
 * character is equally likely.
 *
 * Should:
 *  - wipe every value (explicit_bzero) on every path out, the failing ones
 *    included;
 *  - refuse a value with a control character: it is written into HTTP
 *    headers, where a CR or LF would end the header (and the scrubber
 *    relies on values having none);
 *  - draw again a placeholder that holds any secret's value (its own
 *    included): a short value, a PIN say, could turn up among 32 random
 *    digits, and the agent holds the placeholder.
 * Mustn't:
 *  - print a value, or any part of one, in an error.
 *
 * Values live only in this process's memory (not dumpable, see cmd_run.c).
 */
#include "broker.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "util.h"

/* Placeholders drawn for one secret before giving up (see
 * make_placeholder()). */
#define PLACEHOLDER_TRIES 16

static const char *const alphabet_names[] = {
	[BROKER_ALPHABET_DIGITS] = "digits",
	[BROKER_ALPHABET_HEX_LOWER] = "hex-lower",
	[BROKER_ALPHABET_HEX_UPPER] = "hex-upper",
	[BROKER_ALPHABET_ALNUM_LOWER] = "alnum-lower",
	[BROKER_ALPHABET_ALNUM_UPPER] = "alnum-upper",
	[BROKER_ALPHABET_BASE62] = "base62",
	[BROKER_ALPHABET_BASE64URL] = "base64url",
	[BROKER_ALPHABET_BASE64] = "base64",
};
static_assert(ARRAY_SIZE(alphabet_names) == BROKER_ALPHABET_COUNT,
	      "alphabet_names must name every broker_alphabet");

#define DIGITS "0123456789"
#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

static const char *const alphabet_chars[] = {
	[BROKER_ALPHABET_DIGITS] = DIGITS,
	[BROKER_ALPHABET_HEX_LOWER] = DIGITS "abcdef",
	[BROKER_ALPHABET_HEX_UPPER] = DIGITS "ABCDEF",
	[BROKER_ALPHABET_ALNUM_LOWER] = DIGITS LOWER,
	[BROKER_ALPHABET_ALNUM_UPPER] = DIGITS UPPER,
	[BROKER_ALPHABET_BASE62] = DIGITS UPPER LOWER,
	[BROKER_ALPHABET_BASE64URL] = DIGITS UPPER LOWER "-_",
	[BROKER_ALPHABET_BASE64] = DIGITS UPPER LOWER "+/",
};
static_assert(ARRAY_SIZE(alphabet_chars) == BROKER_ALPHABET_COUNT,
	      "alphabet_chars must list every broker_alphabet");

const char *broker_alphabet_to_string(enum broker_alphabet a)
{
	return (unsigned int)a < BROKER_ALPHABET_COUNT ? alphabet_names[a] : "?";
}

const char *broker_alphabet_chars(enum broker_alphabet a)
{
	ASSERT((unsigned int)a < BROKER_ALPHABET_COUNT);
	return alphabet_chars[a];
}

enum broker_alphabet broker_alphabet_of(const char *prefix, const char *value,
					size_t value_len)
{
	size_t plen = prefix ? strlen(prefix) : 0, start = 0, end = value_len;
	bool seen[256] = { false };
	unsigned int a;
	size_t i;

	if (plen > 0 && plen <= value_len && memcmp(value, prefix, plen) == 0)
		start = plen;
	while (end > start && value[end - 1] == '=')
		end--;
	if (end == start)
		return BROKER_ALPHABET_BASE62;
	for (i = start; i < end; i++)
		seen[(unsigned char)value[i]] = true;
	for (a = 0; a < BROKER_ALPHABET_COUNT; a++) {
		const char *chars = alphabet_chars[a];
		bool covers = true;
		unsigned int c;

		for (c = 1; c < 256 && covers; c++)
			if (seen[c] && !strchr(chars, (int)c))
				covers = false;
		if (covers && !seen[0])
			return (enum broker_alphabet)a;
	}
	return BROKER_ALPHABET_BASE62;
}

/* Fills @out with @n characters of @chars (@k of them), uniformly. */
static void random_chars(char *out, size_t n, const char *chars, size_t k)
{
	/* Bytes at or above the largest multiple of k would favour the
	 * first 256 % k characters: they are drawn again. */
	unsigned int limit = 256u - 256u % (unsigned int)k;
	uint8_t pool[64];
	size_t used = sizeof(pool), i = 0;

	ASSERT(k >= 2 && k <= 256);
	while (i < n) {
		if (used == sizeof(pool)) {
			util_random(pool, sizeof(pool));
			used = 0;
		}
		if (pool[used] < limit)
			out[i++] = chars[pool[used] % k];
		used++;
	}
	explicit_bzero(pool, sizeof(pool));
}

static char *placeholder_make(const char *prefix, const char *value, size_t value_len,
			      size_t min_random, size_t *len, char *err, size_t errlen);

char *broker_placeholder_make(const char *prefix, const char *value,
			      size_t value_len, size_t *len, char *err,
			      size_t errlen)
{
	return placeholder_make(prefix, value, value_len, BROKER_RANDOM_MIN, len, err, errlen);
}

/* ... with at least @min_random random characters. */
static char *placeholder_make(const char *prefix, const char *value, size_t value_len,
			      size_t min_random, size_t *len, char *err, size_t errlen)
{
	size_t plen = prefix ? strlen(prefix) : 0, nrand, i;
	const char *chars;
	char *ph;

	if (plen > BROKER_PREFIX_MAX) {
		snprintf(err, errlen, "the placeholder prefix must be at most %d characters",
			 BROKER_PREFIX_MAX);
		return NULL;
	}
	for (i = 0; i < plen; i++) {
		unsigned char c = (unsigned char)prefix[i];

		if (c < 0x21 || c > 0x7e) {
			snprintf(err, errlen,
				 "the placeholder prefix may hold only printable "
				 "ASCII without spaces (byte %zu is 0x%02x)", i, c);
			return NULL;
		}
	}
	nrand = value_len > plen ? value_len - plen : 0;
	if (nrand < min_random)
		nrand = min_random;
	chars = alphabet_chars[broker_alphabet_of(prefix, value, value_len)];
	ph = util_xmalloc(plen + nrand + 1);
	memcpy(ph, prefix, plen);
	random_chars(ph + plen, nrand, chars, strlen(chars));
	ph[plen + nrand] = '\0';
	*len = plen + nrand;
	return ph;
}

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
	v = util_read_file(d->from_file, BROKER_VALUE_MAX, &len);
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
	s->value = v;
	s->value_len = len;
	return 0;
}

/* Checks a value read into @s; the value itself is never printed. */
static int check_value(const struct broker_secret *s, char *err, size_t errlen)
{
	size_t i;

	if (s->value_len == 0) {
		snprintf(err, errlen, "secret %s: the value is empty", s->def->name);
		return -1;
	}
	if (s->value_len > BROKER_VALUE_MAX) {
		snprintf(err, errlen, "secret %s: the value is longer than %zu bytes",
			 s->def->name, BROKER_VALUE_MAX);
		return -1;
	}
	for (i = 0; i < s->value_len; i++) {
		unsigned char c = (unsigned char)s->value[i];

		if (c < 0x20 || c == 0x7f) {
			snprintf(err, errlen,
				 "secret %s: the value holds a control character "
				 "(0x%02x at byte %zu); it must fit in an HTTP header",
				 s->def->name, c, i);
			return -1;
		}
	}
	return 0;
}

/* Does @ph hold the value of any secret of @b (its own included)? A
 * placeholder is what the agent sees: holding a value would hand it over
 * (a short value, a PIN say, inside 32 random digits). */
static bool holds_a_value(const struct broker *b, const char *ph, size_t len)
{
	size_t j;

	for (j = 0; j < b->count; j++)
		if (memmem(ph, len, b->secrets[j].value, b->secrets[j].value_len))
			return true;
	return false;
}

/* Makes @s's placeholder, again while it holds a value of @b (all values
 * are read by now). */
static int make_placeholder(const struct broker *b, struct broker_secret *s,
			    char *err, size_t errlen)
{
	/* the policy fills in the default, airlock-ph-NAME- */
	const char *prefix = s->def->prefix ? s->def->prefix : "";
	size_t min = BROKER_RANDOM_MIN;
	char perr[160], kprefix[5] = "";
	int tries;

	/* an AWS access key id is no secret: its placeholder keeps the
	 * value's AKIA/ASIA and its length (SPEC §3.4) */
	if (s->def->aws == POLICY_AWS_KEY_ID) {
		if (s->value_len > 4 && (strncmp(s->value, "AKIA", 4) == 0 ||
					 strncmp(s->value, "ASIA", 4) == 0))
			memcpy(kprefix, s->value, 4);
		prefix = kprefix;
		min = BROKER_AWS_KEY_RANDOM_MIN;
	}

	for (tries = 0; tries < PLACEHOLDER_TRIES; tries++) {
		free(s->placeholder);
		s->placeholder = placeholder_make(prefix, s->value, s->value_len, min,
						  &s->placeholder_len, perr, sizeof(perr));
		if (!s->placeholder) {
			snprintf(err, errlen, "secret %s: %s", s->def->name, perr);
			return -1;
		}
		if (!holds_a_value(b, s->placeholder, s->placeholder_len))
			return 0;
	}
	snprintf(err, errlen,
		 "secret %s: every placeholder made holds a secret value: a value "
		 "this short cannot be hidden", s->def->name);
	return -1;
}

int broker_load(struct broker *b, const struct policy *p, char *err, size_t errlen)
{
	size_t i;

	b->count = 0;
	b->secrets = util_xcalloc(p->nsecrets ? p->nsecrets : 1, sizeof(*b->secrets));
	for (i = 0; i < p->nsecrets; i++) {
		struct broker_secret *s = &b->secrets[b->count];

		/* a captured secret has no value yet: the proxy registers
		 * each one it captures (capture.c); an OAuth secret's tokens
		 * come from the supervisor (oauth.c) */
		if (p->secrets[i].capture || p->secrets[i].oauth)
			continue;
		s->def = &p->secrets[i];
		b->count++;
		if (read_value(s, err, errlen) < 0 || check_value(s, err, errlen) < 0)
			goto fail;
	}
	for (i = 0; i < b->count; i++)
		if (make_placeholder(b, &b->secrets[i], err, errlen) < 0)
			goto fail;
	return 0;
fail:
	broker_free(b);
	return -1;
}

void broker_free(struct broker *b)
{
	size_t i;

	for (i = 0; i < b->count; i++) {
		struct broker_secret *s = &b->secrets[i];

		if (s->value) {
			explicit_bzero(s->value, s->value_len);
			free(s->value);
		}
		free(s->placeholder);
	}
	free(b->secrets);
	b->secrets = NULL;
	b->count = 0;
}

void broker_put(const struct broker *b, const struct policy *p,
		bool (*want)(const struct policy_secret *def), struct msg *blk)
{
	uint32_t n = 0;
	size_t i;

	for (i = 0; i < b->count; i++)
		n += !want || want(b->secrets[i].def);
	msg_put_u32(blk, n);
	for (i = 0; i < b->count; i++) {
		const struct broker_secret *s = &b->secrets[i];

		if (want && !want(s->def))
			continue;
		/* by its index: a secret of kind aws is several entries of
		 * one name */
		ASSERT(s->def >= p->secrets && s->def < p->secrets + p->nsecrets);
		msg_put_u32(blk, (uint32_t)(s->def - p->secrets));
		msg_put_cstr(blk, s->def->name);
		msg_put_str(blk, s->placeholder, s->placeholder_len);
		msg_put_bytes(blk, s->value, s->value_len);
	}
}

struct broker *broker_get(const struct policy *p, struct msg_reader *blk, int fd, char *err,
			  size_t errlen)
{
	struct broker *b = util_xcalloc(1, sizeof(*b));
	uint32_t n = 0, i;

	if (fd >= 0) {
		close(fd);
		snprintf(err, errlen, "the secrets came with a descriptor");
		goto fail;
	}
	if (!msg_get_u32(blk, &n) || n > p->nsecrets) {
		snprintf(err, errlen, "the secrets' configuration is not valid");
		goto fail;
	}
	b->secrets = util_xcalloc(n ? n : 1, sizeof(*b->secrets));
	for (i = 0; i < n; i++) {
		struct broker_secret *s = &b->secrets[b->count];
		const char *name = NULL, *ph = NULL;
		const void *value = NULL;
		size_t phlen = 0, len = 0;
		uint32_t k = UINT32_MAX;

		msg_get_u32(blk, &k);
		msg_get_str(blk, 4096, &name, NULL); /* compared below */
		msg_get_str(blk, BROKER_VALUE_MAX * 2 + BROKER_PREFIX_MAX, &ph, &phlen);
		msg_get_bytes(blk, BROKER_VALUE_MAX, &value, &len);
		if (blk->error || k >= p->nsecrets || strcmp(p->secrets[k].name, name) != 0 ||
		    !len || memchr(value, '\0', len)) {
			snprintf(err, errlen, "secret %zu of the configuration is not valid: %s",
				 (size_t)i, blk->error ? blk->error : "not a secret of the policy");
			goto fail;
		}
		s->def = &p->secrets[k];
		s->placeholder = util_xstrndup(ph, phlen);
		s->placeholder_len = phlen;
		s->value = util_xmalloc(len + 1);
		memcpy(s->value, value, len);
		s->value[len] = '\0';
		s->value_len = len;
		b->count++;
	}
	if (msg_end(blk))
		return b;
	snprintf(err, errlen, "the secrets' configuration: %s", blk->error);
fail:
	broker_drop(b);
	return NULL;
}

void broker_drop(struct broker *b)
{
	if (b) {
		broker_free(b);
		free(b);
	}
}

void broker_subst_secrets(const struct broker *b, struct subst_secret *out)
{
	size_t i;

	for (i = 0; i < b->count; i++) {
		const struct broker_secret *s = &b->secrets[i];
		const struct policy_secret *d = s->def;

		out[i] = (struct subst_secret){
			.name = d->name,
			.placeholder = s->placeholder,
			.placeholder_len = s->placeholder_len,
			.value = s->value,
			.value_len = s->value_len,
			.hosts = d->hosts,
			.nhosts = d->nhosts,
			.headers = (const char *const *)d->headers,
			.nheaders = d->nheaders,
			.paths = (const char *const *)d->paths,
			.npaths = d->npaths,
			.methods = (const char *const *)d->methods,
			.nmethods = d->nmethods,
			.body = (const char *const *)d->body,
			.nbody = d->nbody,
		};
		/* kind aws: never substituted (awsfilter.c re-signs the
		 * requests it verifies); a placeholder it leaves is refused */
		if (d->aws != POLICY_AWS_NONE) {
			out[i].hosts = NULL;
			out[i].nhosts = 0;
		}
	}
}

void broker_scrub_needles(const struct broker *b, struct scrub_needle *out)
{
	size_t i;

	for (i = 0; i < b->count; i++)
		out[i] = (struct scrub_needle){
			.value = b->secrets[i].value,
			.value_len = b->secrets[i].value_len,
			.placeholder = b->secrets[i].placeholder,
			.placeholder_len = b->secrets[i].placeholder_len,
		};
}

char *broker_placeholders_text(const struct broker *b, size_t *len)
{
	char *text = util_xstrdup(""), *next;
	size_t i;

	for (i = 0; i < b->count; i++) {
		next = util_xasprintf("%s%s=%s\n", text, b->secrets[i].def->env,
				      b->secrets[i].placeholder);
		free(text);
		text = next;
	}
	*len = strlen(text);
	return text;
}
