/* SPDX-License-Identifier: Apache-2.0
 * merkle.c - RFC 6962 Merkle tree hashing, frontier and proofs (see
 * merkle.h).
 *
 * DOC: Theory of Operation
 *
 * The frontier (struct merkle_tree) is what the key holder keeps: for a
 * tree of n leaves, the roots of the perfect subtrees that the binary
 * digits of n stand for, largest (leftmost) first. Appending a leaf
 * merges equal-sized subtrees like a binary counter carrying, so each
 * leaf costs one leaf hash and on average one node hash; the root folds
 * the frontier from the smallest subtree up (RFC 6962's MTH splits at the
 * largest power of two below n, which is exactly that fold).
 *
 * Proofs need the inner nodes, so the store (struct merkle_store) keeps
 * every aligned perfect subtree's root, level by level (2n hashes for n
 * leaves). The RFC's recursive definitions then only ever ask for the
 * hash of a range that is either such a subtree (looked up) or a right
 * edge (folded from O(log n) lookups), so a proof costs O(log^2 n).
 */
#include "merkle.h"

#include <string.h>

#include <openssl/evp.h>

#include "util.h"

static const EVP_MD *sha256(void)
{
	/* Fetched once, as receipt_sha256_hex() does. */
	static EVP_MD *md;

	if (!md)
		md = EVP_MD_fetch(NULL, "SHA256", NULL);
	ASSERT(md);
	return md;
}

static EVP_MD_CTX *hash_ctx(void)
{
	static EVP_MD_CTX *ctx;

	if (!ctx)
		ctx = EVP_MD_CTX_new();
	ASSERT(ctx);
	return ctx;
}

static void hash3(uint8_t prefix, const void *a, size_t alen, const void *b,
		  size_t blen, merkle_hash out)
{
	EVP_MD_CTX *ctx = hash_ctx();
	unsigned int n = 0;

	ASSERT(EVP_DigestInit_ex(ctx, sha256(), NULL) == 1);
	ASSERT(EVP_DigestUpdate(ctx, &prefix, 1) == 1);
	if (alen)
		ASSERT(EVP_DigestUpdate(ctx, a, alen) == 1);
	if (blen)
		ASSERT(EVP_DigestUpdate(ctx, b, blen) == 1);
	ASSERT(EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == MERKLE_HASH_LEN);
}

void merkle_leaf_hash(const void *data, size_t len, merkle_hash out)
{
	hash3(0x00, data, len, NULL, 0, out);
}

void merkle_node_hash(const merkle_hash left, const merkle_hash right,
		      merkle_hash out)
{
	hash3(0x01, left, MERKLE_HASH_LEN, right, MERKLE_HASH_LEN, out);
}

static void empty_root(merkle_hash out)
{
	unsigned int n = 0;

	ASSERT(EVP_Digest("", 0, out, &n, sha256(), NULL) == 1 && n == MERKLE_HASH_LEN);
}

/* --- the frontier ------------------------------------------------------------ */

void merkle_init(struct merkle_tree *t)
{
	memset(t, 0, sizeof(*t));
}

void merkle_append_hash(struct merkle_tree *t, const merkle_hash leaf)
{
	merkle_hash h;
	unsigned k = 0;

	ASSERT(t->size < UINT64_MAX);
	memcpy(h, leaf, MERKLE_HASH_LEN);
	while (t->size & ((uint64_t)1 << k)) {
		merkle_node_hash(t->full[k], h, h);
		k++;
	}
	memcpy(t->full[k], h, MERKLE_HASH_LEN);
	t->size++;
}

void merkle_append(struct merkle_tree *t, const void *data, size_t len)
{
	merkle_hash h;

	merkle_leaf_hash(data, len, h);
	merkle_append_hash(t, h);
}

void merkle_root(const struct merkle_tree *t, merkle_hash out)
{
	bool any = false;
	unsigned k;

	for (k = 0; k < 64; k++) {
		if (!(t->size & ((uint64_t)1 << k)))
			continue;
		if (!any)
			memcpy(out, t->full[k], MERKLE_HASH_LEN);
		else
			merkle_node_hash(t->full[k], out, out);
		any = true;
	}
	if (!any)
		empty_root(out);
}

/* --- the store --------------------------------------------------------------- */

void merkle_store_init(struct merkle_store *s)
{
	memset(s, 0, sizeof(*s));
}

void merkle_store_free(struct merkle_store *s)
{
	unsigned k;

	for (k = 0; k < 64; k++)
		free(s->level[k]);
	memset(s, 0, sizeof(*s));
}

static void level_push(struct merkle_store *s, unsigned k, const merkle_hash h)
{
	size_t n = (size_t)(s->size >> k); /* nodes already there */

	if (n == s->cap[k]) {
		s->cap[k] = s->cap[k] ? s->cap[k] * 2 : 64;
		s->level[k] = util_xrealloc(s->level[k], s->cap[k] * MERKLE_HASH_LEN);
	}
	memcpy(s->level[k][n], h, MERKLE_HASH_LEN);
	if (k + 1 > s->nlevels)
		s->nlevels = k + 1;
}

void merkle_store_append(struct merkle_store *s, const merkle_hash leaf)
{
	uint64_t i = s->size;
	merkle_hash h;
	unsigned k = 0;

	ASSERT(s->size < ((uint64_t)1 << 62));
	level_push(s, 0, leaf);
	memcpy(h, leaf, MERKLE_HASH_LEN);
	/* Each completed pair makes a node one level up. Level k's count
	 * is (size + 1) >> k once this leaf is in. */
	while (i & 1) {
		merkle_node_hash(s->level[k][i - 1], h, h);
		i >>= 1;
		k++;
		level_push(s, k, h);
	}
	s->size++;
}

static unsigned log2_exact(uint64_t n)
{
	return (unsigned)__builtin_ctzll(n);
}

static uint64_t split_point(uint64_t n)
{
	/* the largest power of two below n (n >= 2) */
	return (uint64_t)1 << (63 - __builtin_clzll(n - 1));
}

/* MTH of the @n leaves from @lo; @lo is a multiple of the perfect
 * subtrees the RFC's recursions ask for. */
static void range_hash(const struct merkle_store *s, uint64_t lo, uint64_t n,
		       merkle_hash out)
{
	merkle_hash l, r;
	uint64_t k;

	if (n == 0) {
		empty_root(out);
		return;
	}
	if ((n & (n - 1)) == 0) {
		unsigned lv = log2_exact(n);

		ASSERT((lo & (n - 1)) == 0 && lv < s->nlevels);
		memcpy(out, s->level[lv][lo >> lv], MERKLE_HASH_LEN);
		return;
	}
	k = split_point(n);
	range_hash(s, lo, k, l);
	range_hash(s, lo + k, n - k, r);
	merkle_node_hash(l, r, out);
}

void merkle_store_root(const struct merkle_store *s, uint64_t size,
		       merkle_hash out)
{
	ASSERT(size <= s->size);
	range_hash(s, 0, size, out);
}

/* PATH(m, D[lo:lo+n]), appended after the recursion as the RFC lists
 * it: the deepest sibling first. */
static void path(const struct merkle_store *s, uint64_t m, uint64_t lo, uint64_t n,
		 merkle_hash *out, int *len)
{
	uint64_t k;

	if (n <= 1)
		return;
	k = split_point(n);
	if (m < k) {
		path(s, m, lo, k, out, len);
		range_hash(s, lo + k, n - k, out[(*len)++]);
	} else {
		path(s, m - k, lo + k, n - k, out, len);
		range_hash(s, lo, k, out[(*len)++]);
	}
}

int merkle_store_inclusion(const struct merkle_store *s, uint64_t index,
			   uint64_t size, merkle_hash out[MERKLE_PROOF_MAX])
{
	int len = 0;

	if (index >= size || size > s->size)
		return -1;
	path(s, index, 0, size, out, &len);
	return len;
}

/* SUBPROOF(m, D[lo:lo+n], b). */
static void subproof(const struct merkle_store *s, uint64_t m, uint64_t lo,
		     uint64_t n, bool b, merkle_hash *out, int *len)
{
	uint64_t k;

	if (m == n) {
		if (!b)
			range_hash(s, lo, n, out[(*len)++]);
		return;
	}
	k = split_point(n);
	if (m <= k) {
		subproof(s, m, lo, k, b, out, len);
		range_hash(s, lo + k, n - k, out[(*len)++]);
	} else {
		subproof(s, m - k, lo + k, n - k, false, out, len);
		range_hash(s, lo, k, out[(*len)++]);
	}
}

int merkle_store_consistency(const struct merkle_store *s, uint64_t old,
			     uint64_t size, merkle_hash out[MERKLE_PROOF_MAX])
{
	int len = 0;

	if (old > size || size > s->size)
		return -1;
	if (old == 0 || old == size)
		return 0;
	subproof(s, old, 0, size, true, out, &len);
	return len;
}

/* --- verifying --------------------------------------------------------------- */

bool merkle_verify_inclusion(uint64_t index, uint64_t size, const merkle_hash leaf,
			     const merkle_hash *p, size_t n, const merkle_hash root)
{
	uint64_t fn = index, sn;
	merkle_hash r;
	size_t i;

	if (index >= size || n > MERKLE_PROOF_MAX)
		return false;
	sn = size - 1;
	memcpy(r, leaf, MERKLE_HASH_LEN);
	for (i = 0; i < n; i++) {
		if (sn == 0)
			return false;
		if ((fn & 1) || fn == sn) {
			merkle_node_hash(p[i], r, r);
			if (!(fn & 1))
				while (!(fn & 1) && fn != 0) {
					fn >>= 1;
					sn >>= 1;
				}
		} else {
			merkle_node_hash(r, p[i], r);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && memcmp(r, root, MERKLE_HASH_LEN) == 0;
}

bool merkle_verify_consistency(uint64_t old, uint64_t size, const merkle_hash old_root,
			       const merkle_hash root, const merkle_hash *p, size_t n)
{
	merkle_hash fr, sr;
	const merkle_hash *c = p;
	uint64_t fn, sn;
	size_t i, cn = n;

	if (old > size || n > MERKLE_PROOF_MAX)
		return false;
	if (old == 0)
		return n == 0;
	if (old == size)
		return n == 0 && memcmp(old_root, root, MERKLE_HASH_LEN) == 0;
	if (n == 0)
		return false;
	fn = old - 1;
	sn = size - 1;
	while (fn & 1) {
		fn >>= 1;
		sn >>= 1;
	}
	/* A power-of-two old tree is a node of the new one: its root
	 * starts the path, without being part of the proof. */
	if ((old & (old - 1)) == 0) {
		memcpy(fr, old_root, MERKLE_HASH_LEN);
	} else {
		memcpy(fr, c[0], MERKLE_HASH_LEN);
		c++;
		cn--;
	}
	memcpy(sr, fr, MERKLE_HASH_LEN);
	for (i = 0; i < cn; i++) {
		if (sn == 0)
			return false;
		if ((fn & 1) || fn == sn) {
			merkle_node_hash(c[i], fr, fr);
			merkle_node_hash(c[i], sr, sr);
			if (!(fn & 1))
				while (!(fn & 1) && fn != 0) {
					fn >>= 1;
					sn >>= 1;
				}
		} else {
			merkle_node_hash(sr, c[i], sr);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && memcmp(fr, old_root, MERKLE_HASH_LEN) == 0 &&
	       memcmp(sr, root, MERKLE_HASH_LEN) == 0;
}
