/* SPDX-License-Identifier: Apache-2.0
 * broker.h - brokered secrets: real values held by the supervisor, random
 * per-session placeholders handed to the agent, shaped like the values.
 */
#ifndef AIRLOCK_BROKER_H
#define AIRLOCK_BROKER_H

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"
#include "scrub.h"
#include "subst.h"

/* A placeholder carries at least this many random characters after its
 * prefix, whatever the value's length. */
#define BROKER_RANDOM_MIN 32
/* ... but an AWS access key id's (not a secret; kind aws): AKIA + 16. */
#define BROKER_AWS_KEY_RANDOM_MIN 16
/* Longest prefix broker_placeholder_make() accepts. */
#define BROKER_PREFIX_MAX 128
/* Longest value broker_load() reads (a from_file secret's file). */
#define BROKER_VALUE_MAX ((size_t)64 * 1024)

/* The character classes a placeholder's random part is drawn from, smallest
 * first. Keep broker_alphabet_to_string() in sync (static_assert). */
enum broker_alphabet {
	BROKER_ALPHABET_DIGITS = 0, /* 0-9 */
	BROKER_ALPHABET_HEX_LOWER,  /* 0-9 a-f */
	BROKER_ALPHABET_HEX_UPPER,  /* 0-9 A-F */
	BROKER_ALPHABET_ALNUM_LOWER,/* 0-9 a-z */
	BROKER_ALPHABET_ALNUM_UPPER,/* 0-9 A-Z */
	BROKER_ALPHABET_BASE62,     /* 0-9 A-Z a-z: the default */
	BROKER_ALPHABET_BASE64URL,  /* base62 - _ */
	BROKER_ALPHABET_BASE64,     /* base62 + / */
	BROKER_ALPHABET_COUNT
};

const char *broker_alphabet_to_string(enum broker_alphabet a);

/* The characters of @a, NUL-terminated. */
const char *broker_alphabet_chars(enum broker_alphabet a);

/* The smallest class, in enum order, that holds every character of the
 * value's distinctive part: the value after @prefix when the value starts
 * with @prefix, else the whole value, in both cases without trailing '='
 * (base64 padding). BASE62 when that part is empty or no class holds it
 * (a '.', a space, a '+' beside a '-', ...). */
enum broker_alphabet broker_alphabet_of(const char *prefix, const char *value,
					size_t value_len);

/* Makes a placeholder for @value: @prefix followed by random characters of
 * broker_alphabet_of(), as many as make the placeholder as long as the
 * value, and never fewer than BROKER_RANDOM_MIN. Characters come from the
 * kernel CSPRNG by rejection sampling (no modulo bias).
 * Returns a NUL-terminated malloc'd string (its length in *len), or NULL
 * with one line in @err when @prefix is longer than BROKER_PREFIX_MAX or
 * holds a byte outside printable ASCII without space (0x21-0x7e); an
 * empty prefix is allowed (NULL is the empty prefix). Never reads @value
 * beyond @value_len; never writes it. */
char *broker_placeholder_make(const char *prefix, const char *value,
			      size_t value_len, size_t *len, char *err,
			      size_t errlen);

struct broker_secret {
	const struct policy_secret *def; /* borrowed from the policy */
	char *placeholder;               /* owned; NUL-terminated */
	size_t placeholder_len;
	char *value;                     /* wiped and freed by broker_free */
	size_t value_len;
};

struct broker {
	struct broker_secret *secrets;
	size_t count;
};

/* Reads every secret of @p (from the supervisor's environment or a file)
 * and makes its placeholder. A value must be 1 to BROKER_VALUE_MAX bytes
 * with no control character (it travels in an HTTP header). Returns 0, or
 * -1 with one line in @err naming the secret that could not be read (its
 * value is never printed); on failure every value read so far is wiped and
 * @b is empty. */
int broker_load(struct broker *b, const struct policy *p, char *err, size_t errlen);

/* Wipes every value; frees everything @b owns. */
void broker_free(struct broker *b);

/* The secrets of @b as subst_decide() takes them: @out has room for
 * b->count entries, in the same order (an injection's or refusal's index
 * is an index in b->secrets). Every pointer is borrowed from @b and its
 * policy: valid until broker_free() or policy_free(). */
void broker_subst_secrets(const struct broker *b, struct subst_secret *out);

/* The values and placeholders of @b as scrub_set_new() takes them; @out
 * has room for b->count entries, in the same order; borrowed like the
 * above. */
void broker_scrub_needles(const struct broker *b, struct scrub_needle *out);

/* The secrets of @b (loaded from @p) for which @want is true (every one
 * when NULL), in order, appended to a filter's configuration block
 * (filter.h): u32 count, then for each u32 its index in p->secrets, str
 * its name, str placeholder, bytes value. */
struct msg;
struct msg_reader;
void broker_put(const struct broker *b, const struct policy *p,
		bool (*want)(const struct policy_secret *def), struct msg *blk);

/* Reads back a whole block broker_put() wrote (msg_end() included),
 * each secret's definition taken from @p (the same policy); a descriptor
 * @fd that came with it (-1: none) is closed and refused. Returns a new
 * broker (broker_drop() it), or NULL with one line in @err: a secret @p
 * does not have, a value broker_load() would not have admitted, a byte
 * too many. */
struct broker *broker_get(const struct policy *p, struct msg_reader *blk, int fd, char *err,
			  size_t errlen);

/* Wipes and frees a broker of broker_get() (NULL is fine). */
void broker_drop(struct broker *b);

/* "ENV=PLACEHOLDER\n" for each secret, in policy order: the text of
 * `airlock proxy --placeholders FILE` (the caller writes it, mode 0600).
 * Placeholders are no secret from the agent, which holds them; values
 * never appear. Returns a malloc'd string, its length in *len. */
char *broker_placeholders_text(const struct broker *b, size_t *len);

#endif /* AIRLOCK_BROKER_H */
