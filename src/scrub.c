/* SPDX-License-Identifier: Apache-2.0
 * scrub.c - the response scrubber.
 *
 * DOC: Theory of Operation
 *
 * The real value of a brokered secret must never reach the sandbox, and an
 * upstream may well send it back (an API that echoes its request, an error
 * page quoting a header). Every intercepted response's head and body go
 * through this scrubber, which replaces each occurrence of a value by that
 * secret's placeholder.
 *
 * Matching is leftmost, then longest (of equally long values, the first
 * given), without overlaps: the same answer as one replace pass over the
 * whole body, whatever the split into reads and chunks. The stream holds
 * back only what a later read could still turn into a match: a position is
 * decided once the longest value's window from it is complete, or when a
 * control byte lies between it and the end of what was fed. Values hold no
 * control byte (broker.c refuses them), so no match can span one. What is
 * held back is therefore fewer than the longest value's length and
 * depends only on the stream's own bytes and the values' lengths, never on
 * their contents: a sandbox that controls what an upstream echoes cannot
 * learn a value's first characters from which bytes arrive late.
 *
 * For the same reason the search does no early-exit comparison against a
 * value. Each window of Q bytes (Q = 16, or a shorter value's length) has
 * a rolling polynomial hash modulo 2^64 with an odd base drawn from the
 * kernel CSPRNG per set: every input byte costs the same arithmetic, and
 * only where a window's hash equals the hash of a value's first Q bytes --
 * those Q bytes really occur, or a collision the sandbox cannot aim at
 * without the base -- is the whole value compared, with CRYPTO_memcmp().
 * What timing could tell is then whether 16 bytes equal a value's first
 * 16: no better than guessing them.
 *
 * Memory per stream: one buffer of (longest value - 1) + SCRUB_PIECE bytes;
 * larger inputs are worked through in pieces. The buffer is wiped after
 * every piece beyond what is held back, and wholly by scrub_free().
 */
#include "scrub.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "util.h"

/* The part of a feed worked on at once. */
#define SCRUB_PIECE ((size_t)16384)
/* The width of the hashed windows. */
#define SCRUB_Q ((size_t)16)

struct needle {
	const char *value;
	size_t len;
	const char *ph;
	size_t phlen;
	size_t group;    /* index in scrub_set.q */
	uint64_t target; /* hash of the value's first q bytes */
};

struct scrub_set {
	struct needle *nd;
	size_t n;
	size_t max_len;
	uint64_t base;
	/* The distinct window widths, min(SCRUB_Q, value length), and
	 * base^(q - 1) for each. */
	size_t q[SCRUB_Q];
	uint64_t top[SCRUB_Q];
	size_t nq;
	bool keeps_length;
};

struct scrub {
	const struct scrub_set *set;
	char *work; /* held bytes, then the piece being worked on */
	size_t work_cap;
	size_t held;
	uint64_t *counts;
};

/* Bytes weigh 1..256, so that NULs count. Arithmetic is modulo 2^64. */
static uint64_t weight(char c)
{
	return (uint64_t)(unsigned char)c + 1;
}

static uint64_t hash(const struct scrub_set *set, const char *p, size_t len)
{
	uint64_t h = 0;
	size_t i;

	for (i = 0; i < len; i++)
		h = h * set->base + weight(p[i]);
	return h;
}

static uint64_t power(uint64_t b, size_t e)
{
	uint64_t r = 1;

	while (e-- > 0)
		r *= b;
	return r;
}

static bool is_control(char c)
{
	unsigned char u = (unsigned char)c;

	return u < 0x20 || u == 0x7f;
}

struct scrub_set *scrub_set_new(const struct scrub_needle *needles, size_t n)
{
	struct scrub_set *set = util_xcalloc(1, sizeof(*set));
	size_t i, j;

	ASSERT(n >= 1);
	set->nd = util_xcalloc(n, sizeof(*set->nd));
	set->n = n;
	set->keeps_length = true;
	util_random(&set->base, sizeof(set->base));
	set->base |= 1;
	for (i = 0; i < n; i++) {
		const struct scrub_needle *in = &needles[i];
		struct needle *d = &set->nd[i];
		size_t q;

		ASSERT(in->value && in->value_len > 0 && in->placeholder);
		for (j = 0; j < in->value_len; j++)
			ASSERT(!is_control(in->value[j]));
		d->value = in->value;
		d->len = in->value_len;
		d->ph = in->placeholder;
		d->phlen = in->placeholder_len;
		q = d->len < SCRUB_Q ? d->len : SCRUB_Q;
		for (j = 0; j < set->nq && set->q[j] != q; j++)
			;
		if (j == set->nq) {
			ASSERT(set->nq < SCRUB_Q);
			set->q[j] = q;
			set->top[j] = power(set->base, q - 1);
			set->nq++;
		}
		d->group = j;
		d->target = hash(set, d->value, q);
		if (d->len > set->max_len)
			set->max_len = d->len;
		if (d->len != d->phlen)
			set->keeps_length = false;
	}
	return set;
}

void scrub_set_free(struct scrub_set *set)
{
	if (!set)
		return;
	explicit_bzero(set->nd, set->n * sizeof(*set->nd));
	free(set->nd);
	explicit_bzero(set, sizeof(*set));
	free(set);
}

size_t scrub_set_count(const struct scrub_set *set)
{
	return set->n;
}

size_t scrub_set_max_len(const struct scrub_set *set)
{
	return set->max_len;
}

bool scrub_set_keeps_length(const struct scrub_set *set)
{
	return set->keeps_length;
}

static void append(struct scrub_buf *out, const char *p, size_t len)
{
	if (len == 0)
		return;
	ASSERT(out->len <= out->cap && len <= SIZE_MAX / 2 - out->len);
	if (out->cap - out->len < len) {
		size_t cap = out->cap ? out->cap : 256;

		while (cap - out->len < len)
			cap *= 2;
		out->data = util_xrealloc(out->data, cap);
		out->cap = cap;
	}
	memcpy(out->data + out->len, p, len);
	out->len += len;
}

/* Where the decided part of @buf (@n bytes) ends when more may follow:
 * a position may wait only if the longest value's window from it runs
 * past the end without crossing a control byte. */
static size_t decided_end(const struct scrub_set *set, const char *buf, size_t n)
{
	size_t lo = n >= set->max_len - 1 ? n - (set->max_len - 1) : 0, j;

	for (j = n; j > lo; j--)
		if (is_control(buf[j - 1]))
			return j;
	return lo;
}

/* Scans @buf[0..n), replacing matches that start before @limit (a match
 * may end after it, never after n). Output goes to @out, replacements are
 * added to @counts. Returns the position scanning stopped at (>= limit). */
static size_t scan_one_width(const struct scrub_set *set, const char *buf, size_t n,
			     size_t limit, struct scrub_buf *out, uint64_t *counts);

static size_t scan(const struct scrub_set *set, const char *buf, size_t n,
		   size_t limit, struct scrub_buf *out, uint64_t *counts)
{
	uint64_t h[SCRUB_Q];
	size_t i = 0, emit = 0, g, k;

	if (set->nq == 1)
		return scan_one_width(set, buf, n, limit, out, counts);

	for (g = 0; g < set->nq; g++)
		h[g] = set->q[g] <= n ? hash(set, buf, set->q[g]) : 0;
	while (i < limit) {
		size_t best = set->n, step, s;

		for (k = 0; k < set->n; k++) {
			const struct needle *d = &set->nd[k];

			/* i + len <= n also says the window of q bytes
			 * from i is in, so h[group] is current */
			if (i + d->len <= n && h[d->group] == d->target &&
			    CRYPTO_memcmp(buf + i, d->value, d->len) == 0 &&
			    (best == set->n || d->len > set->nd[best].len))
				best = k;
		}
		step = 1;
		if (best < set->n) {
			append(out, buf + emit, i - emit);
			append(out, set->nd[best].ph, set->nd[best].phlen);
			counts[best]++;
			step = set->nd[best].len;
			emit = i + step;
		}
		for (s = 0; s < step; s++, i++) {
			for (g = 0; g < set->nq; g++) {
				size_t q = set->q[g];

				/* drop buf[i], take buf[i + q] */
				if (i + q < n)
					h[g] = (h[g] - weight(buf[i]) * set->top[g]) * set->base +
					       weight(buf[i + q]);
			}
		}
	}
	ASSERT(emit <= i && i <= n);
	append(out, buf + emit, i - emit);
	return i;
}

/* scan() when every value has the same window width q (the usual case:
 * values of 16 bytes or more). The same matches, found faster: a window
 * holding a control byte cannot start a match (values hold none), so the
 * positions whose window does are passed over without hashing, and the
 * hash is computed afresh at the first clean window after them. What is
 * skipped depends only on where the stream's control bytes are, never on
 * the values (binary bodies, full of control bytes, go fast; text is
 * hashed byte by byte as before). Positions passed over may lie beyond
 * @limit: their windows hold a control byte already in @buf, so nothing
 * that comes later can make them match. */
/* Does @h equal the first window's hash of some value? Every target is
 * compared, whatever the answer. */
static inline bool hits(const struct scrub_set *set, uint64_t h)
{
	bool hit = false;
	size_t k;

	for (k = 0; k < set->n; k++)
		hit |= h == set->nd[k].target;
	return hit;
}

static size_t scan_one_width(const struct scrub_set *set, const char *buf, size_t n,
			     size_t limit, struct scrub_buf *out, uint64_t *counts)
{
	const size_t q = set->q[0];
	const uint64_t top = set->top[0], base = set->base;
	size_t i = 0, emit = 0, k;
	bool have = false; /* h is the hash of buf[i..i+q) */
	uint64_t h = 0;

	while (i < limit) {
		size_t best = set->n;

		if (i + q > n) {
			i = limit; /* no value fits from here on */
			break;
		}
		if (!have) {
			size_t j = i + q;

			while (j > i && !is_control(buf[j - 1]))
				j--;
			if (j > i) {
				i = j; /* every window up to the control byte holds it */
				continue;
			}
			h = hash(set, buf + i, q);
			have = true;
		}
		/* Roll while no value's first window hashes equal, no control
		 * byte enters and the window stays inside what was fed: the
		 * same arithmetic for every byte. */
		while (i < limit && i + q < n && !hits(set, h)) {
			unsigned char c = (unsigned char)buf[i + q];

			if (c < 0x20 || c == 0x7f)
				break;
			h = (h - weight(buf[i]) * top) * base + (uint64_t)c + 1;
			i++;
		}
		if (i >= limit)
			break;
		for (k = 0; k < set->n; k++) {
			const struct needle *d = &set->nd[k];

			if (h == d->target && i + d->len <= n &&
			    CRYPTO_memcmp(buf + i, d->value, d->len) == 0 &&
			    (best == set->n || d->len > set->nd[best].len))
				best = k;
		}
		if (best < set->n) {
			append(out, buf + emit, i - emit);
			append(out, set->nd[best].ph, set->nd[best].phlen);
			counts[best]++;
			i += set->nd[best].len;
			emit = i;
			have = false;
			continue;
		}
		if (i + q < n && !is_control(buf[i + q])) {
			h = (h - weight(buf[i]) * top) * base + weight(buf[i + q]);
			i++;
		} else if (i + q < n) {
			i += q + 1; /* the windows from i + 1 to i + q hold buf[i + q] */
			have = false;
		} else {
			i++;
			have = false;
		}
	}
	ASSERT(emit <= i && i <= n);
	append(out, buf + emit, i - emit);
	return i;
}

struct scrub *scrub_new(const struct scrub_set *set)
{
	struct scrub *s = util_xcalloc(1, sizeof(*s));

	s->set = set;
	s->work_cap = set->max_len - 1 + SCRUB_PIECE;
	s->work = util_xmalloc(s->work_cap);
	s->counts = util_xcalloc(set->n, sizeof(*s->counts));
	return s;
}

void scrub_free(struct scrub *s)
{
	if (!s)
		return;
	explicit_bzero(s->work, s->work_cap);
	free(s->work);
	free(s->counts);
	free(s);
}

/* Works on work[0..n): decides what it can (all of it when @final), keeps
 * the rest at the front, wipes the remainder. */
static void work_on(struct scrub *s, size_t n, bool final, struct scrub_buf *out)
{
	size_t limit = final ? n : decided_end(s->set, s->work, n);
	size_t at = scan(s->set, s->work, n, limit, out, s->counts);

	s->held = n - at;
	memmove(s->work, s->work + at, s->held);
	explicit_bzero(s->work + s->held, n - s->held);
	ASSERT(s->held < s->set->max_len);
}

void scrub_feed(struct scrub *s, const void *in, size_t len, struct scrub_buf *out)
{
	const char *p = in;

	while (len > 0) {
		size_t take = len < SCRUB_PIECE ? len : SCRUB_PIECE;

		ASSERT(s->held + take <= s->work_cap);
		memcpy(s->work + s->held, p, take);
		work_on(s, s->held + take, false, out);
		p += take;
		len -= take;
	}
}

void scrub_finish(struct scrub *s, struct scrub_buf *out)
{
	work_on(s, s->held, true, out);
	ASSERT(s->held == 0);
}

size_t scrub_held(const struct scrub *s)
{
	return s->held;
}

const uint64_t *scrub_counts(const struct scrub *s)
{
	return s->counts;
}

uint64_t scrub_oneshot(const struct scrub_set *set, const void *in, size_t len,
		       struct scrub_buf *out, uint64_t *counts)
{
	uint64_t *mine = util_xcalloc(set->n, sizeof(*mine)), total = 0;
	size_t k;

	(void)scan(set, in, len, len, out, mine);
	for (k = 0; k < set->n; k++) {
		total += mine[k];
		if (counts)
			counts[k] += mine[k];
	}
	free(mine);
	return total;
}

void scrub_buf_free(struct scrub_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
