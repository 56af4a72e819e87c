/* SPDX-License-Identifier: Apache-2.0
 * merkle.h - RFC 6962 / RFC 9162 Merkle tree hashing: the tree over a
 * receipt stream's lines (docs/RECEIPTS.md, "Checkpoints").
 *
 * Leaf hash = SHA-256(0x00 || bytes), node hash = SHA-256(0x01 || left ||
 * right), the empty tree's root = SHA-256(""). The key holder keeps a
 * struct merkle_tree (the frontier: one hash per set bit of the size,
 * O(log n) memory) beside the prev chain; whoever holds every leaf hash
 * (a verifier reading the stream) builds a struct merkle_store and makes
 * inclusion and consistency proofs from it (RFC 9162 §2.1.3, §2.1.4).
 */
#ifndef AIRLOCK_MERKLE_H
#define AIRLOCK_MERKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MERKLE_HASH_LEN 32
/* A proof of a tree of at most 2^63 leaves has at most 64 hashes. */
#define MERKLE_PROOF_MAX 64

typedef uint8_t merkle_hash[MERKLE_HASH_LEN];

void merkle_leaf_hash(const void *data, size_t len, merkle_hash out);
void merkle_node_hash(const merkle_hash left, const merkle_hash right,
		      merkle_hash out);

/* The frontier of a tree: full[k] is the root of the perfect subtree of
 * 2^k leaves that bit k of size stands for (valid when that bit is set). */
struct merkle_tree {
	uint64_t size;
	merkle_hash full[64];
};

void merkle_init(struct merkle_tree *t);
void merkle_append_hash(struct merkle_tree *t, const merkle_hash leaf);
/* Appends the leaf of @len bytes of @data. */
void merkle_append(struct merkle_tree *t, const void *data, size_t len);
void merkle_root(const struct merkle_tree *t, merkle_hash out);

/* Every node hash of a tree whose leaves are all known: level k holds
 * the roots of the aligned perfect subtrees of 2^k leaves. */
struct merkle_store {
	uint64_t size;
	merkle_hash *level[64];
	size_t cap[64];
	unsigned nlevels;
};

void merkle_store_init(struct merkle_store *s);
void merkle_store_append(struct merkle_store *s, const merkle_hash leaf);
void merkle_store_free(struct merkle_store *s);

/* The root of the first @size leaves (@size <= s->size). */
void merkle_store_root(const struct merkle_store *s, uint64_t size,
		       merkle_hash out);

/* The inclusion proof of leaf @index in the tree of the first @size
 * leaves (RFC 9162 §2.1.3.1): its hashes into @path, their number
 * returned; -1 when @index >= @size or @size > s->size. */
int merkle_store_inclusion(const struct merkle_store *s, uint64_t index,
			   uint64_t size, merkle_hash path[MERKLE_PROOF_MAX]);

/* The consistency proof from the tree of @old leaves to that of @size
 * (RFC 9162 §2.1.4.1; empty when @old is 0 or @old == @size); -1 when
 * @old > @size or @size > s->size. */
int merkle_store_consistency(const struct merkle_store *s, uint64_t old,
			     uint64_t size, merkle_hash path[MERKLE_PROOF_MAX]);

/* RFC 9162 §2.1.3.2: does @path prove @leaf is leaf @index of the tree of
 * @size leaves whose root is @root? */
bool merkle_verify_inclusion(uint64_t index, uint64_t size, const merkle_hash leaf,
			     const merkle_hash *path, size_t n, const merkle_hash root);

/* RFC 9162 §2.1.4.2: does @path prove the tree of @old leaves (root
 * @old_root) is a prefix of that of @size leaves (root @root)? An @old of
 * 0 is consistent with anything (empty proof); @old == @size needs an
 * empty proof and equal roots. */
bool merkle_verify_consistency(uint64_t old, uint64_t size, const merkle_hash old_root,
			       const merkle_hash root, const merkle_hash *path,
			       size_t n);

#endif /* AIRLOCK_MERKLE_H */
