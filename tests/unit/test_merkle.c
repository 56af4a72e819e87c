/* SPDX-License-Identifier: Apache-2.0
 * test_merkle.c - RFC 6962 hashing, the frontier and proofs (merkle.c).
 *
 * The vectors below were computed with an independent Python reference
 * (hashlib, the RFC's recursive MTH, PATH and SUBPROOF) over the leaves
 * of Certificate Transparency's own merkle tree tests; the roots are
 * those CT publishes. Every proof of every small tree is then checked
 * against the verifiers, and tampered proofs must fail.
 */
#include <stdlib.h>
#include <string.h>

#include "merkle.h"
#include "tap.h"
#include "util.h"

static const char *const leaves_hex[] = {
	"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
	"606162636465666768696a6b6c6d6e6f",
};

static const char *const roots_hex[] = {
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};

static const struct {
	uint64_t m, n;
	const char *path; /* hex hashes, comma separated */
} inclusions[] = {
	{ 0, 1, "" },
	{ 0, 8, "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7,"
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e,"
		"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4" },
	{ 5, 8, "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b,"
		"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0,"
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7" },
	{ 2, 3, "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125" },
	{ 6, 7, "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a,"
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7" },
	{ 3, 5, "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7,"
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125,"
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b" },
};

static const struct {
	uint64_t m, n;
	const char *path;
} consistencies[] = {
	{ 1, 1, "" },
	{ 1, 8, "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7,"
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e,"
		"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4" },
	{ 6, 8, "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a,"
		"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0,"
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7" },
	{ 2, 5, "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e,"
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b" },
	{ 3, 7, "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7,"
		"07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7,"
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125,"
		"837dbb152e9b079010717e84e865da4ebc0fa198a806d59d31bf15accef22d0e" },
	{ 4, 7, "837dbb152e9b079010717e84e865da4ebc0fa198a806d59d31bf15accef22d0e" },
};

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;
	unsigned v;

	while (s[0] && s[1]) {
		if (sscanf(s, "%2x", &v) != 1)
			abort();
		out[n++] = (uint8_t)v;
		s += 2;
		if (*s == ',')
			s++;
	}
	return n;
}

static char *hex_path(const merkle_hash *p, int n)
{
	static char buf[MERKLE_PROOF_MAX * 65 + 1];
	char *o = buf;
	int i;

	*o = '\0';
	for (i = 0; i < n; i++) {
		if (i)
			*o++ = ',';
		util_hex(p[i], MERKLE_HASH_LEN, o);
		o += 64;
	}
	*o = '\0';
	return buf;
}

static void vectors(void)
{
	struct merkle_store s;
	struct merkle_tree t;
	merkle_hash root, want, path[MERKLE_PROOF_MAX];
	uint8_t data[32];
	size_t i;
	int n;

	merkle_init(&t);
	merkle_store_init(&s);
	merkle_root(&t, root);
	unhex(roots_hex[0], want);
	tap_ok(memcmp(root, want, 32) == 0, "the empty tree's root is SHA-256(\"\")");
	for (i = 0; i < ARRAY_SIZE(leaves_hex); i++) {
		size_t len = unhex(leaves_hex[i], data);
		merkle_hash lh;

		merkle_append(&t, data, len);
		merkle_leaf_hash(data, len, lh);
		merkle_store_append(&s, lh);
		merkle_root(&t, root);
		unhex(roots_hex[i + 1], want);
		tap_ok(memcmp(root, want, 32) == 0, "frontier root of %zu leaves", i + 1);
		merkle_store_root(&s, i + 1, root);
		tap_ok(memcmp(root, want, 32) == 0, "store root of %zu leaves", i + 1);
	}
	for (i = 0; i < ARRAY_SIZE(inclusions); i++) {
		n = merkle_store_inclusion(&s, inclusions[i].m, inclusions[i].n, path);
		tap_is_str(hex_path(path, n), inclusions[i].path,
			   "inclusion proof of leaf %llu in %llu",
			   (unsigned long long)inclusions[i].m,
			   (unsigned long long)inclusions[i].n);
	}
	for (i = 0; i < ARRAY_SIZE(consistencies); i++) {
		n = merkle_store_consistency(&s, consistencies[i].m, consistencies[i].n,
					     path);
		tap_is_str(hex_path(path, n), consistencies[i].path,
			   "consistency proof %llu -> %llu",
			   (unsigned long long)consistencies[i].m,
			   (unsigned long long)consistencies[i].n);
	}
	tap_is_int(merkle_store_inclusion(&s, 8, 8, path), -1, "index == size refused");
	tap_is_int(merkle_store_inclusion(&s, 0, 9, path), -1, "size beyond the store refused");
	tap_is_int(merkle_store_consistency(&s, 5, 4, path), -1, "old > size refused");
	merkle_store_free(&s);
}

/* Every proof of every tree up to 70 leaves verifies; flipping a bit of
 * the leaf, the root or any hash of the path, or claiming another index
 * or size, fails. */
static void exhaustive(void)
{
	struct merkle_store s;
	struct merkle_tree t;
	merkle_hash roots[71], path[MERKLE_PROOF_MAX], leaf[70], bad;
	uint64_t n, m;
	size_t fails = 0, checks = 0, j;
	int len;

	merkle_init(&t);
	merkle_store_init(&s);
	merkle_root(&t, roots[0]);
	for (n = 0; n < 70; n++) {
		char text[32];

		snprintf(text, sizeof(text), "leaf %llu", (unsigned long long)n);
		merkle_leaf_hash(text, strlen(text), leaf[n]);
		merkle_append_hash(&t, leaf[n]);
		merkle_store_append(&s, leaf[n]);
		merkle_root(&t, roots[n + 1]);
	}
	for (n = 1; n <= 70; n++) {
		merkle_hash sr;

		merkle_store_root(&s, n, sr);
		if (memcmp(sr, roots[n], 32) != 0)
			fails++;
		for (m = 0; m < n; m++) {
			len = merkle_store_inclusion(&s, m, n, path);
			checks++;
			if (len < 0 || !merkle_verify_inclusion(m, n, leaf[m], path, (size_t)len,
								roots[n]))
				fails++;
			memcpy(bad, leaf[m], 32);
			bad[3] ^= 1;
			if (merkle_verify_inclusion(m, n, bad, path, (size_t)len, roots[n]))
				fails++;
			if (merkle_verify_inclusion(m, n, leaf[m], path, (size_t)len, roots[n - 1]))
				fails++;
			if (m + 1 < n && merkle_verify_inclusion(m + 1, n, leaf[m], path,
								 (size_t)len, roots[n]))
				fails++;
			for (j = 0; j < (size_t)len; j++) {
				path[j][j % 32] ^= 0x80;
				if (merkle_verify_inclusion(m, n, leaf[m], path, (size_t)len,
							    roots[n]))
					fails++;
				path[j][j % 32] ^= 0x80;
			}
			if (len > 0 && merkle_verify_inclusion(m, n, leaf[m], path,
							       (size_t)len - 1, roots[n]))
				fails++;
		}
		for (m = 0; m <= n; m++) {
			len = merkle_store_consistency(&s, m, n, path);
			checks++;
			if (len < 0 || !merkle_verify_consistency(m, n, roots[m], roots[n], path,
								  (size_t)len))
				fails++;
			if (m > 0 && m < n) {
				memcpy(bad, roots[m], 32);
				bad[0] ^= 1;
				if (merkle_verify_consistency(m, n, bad, roots[n], path,
							      (size_t)len))
					fails++;
				if (merkle_verify_consistency(m, n, roots[m], roots[n - 1], path,
							      (size_t)len))
					fails++;
				for (j = 0; j < (size_t)len; j++) {
					path[j][5] ^= 0x01;
					if (merkle_verify_consistency(m, n, roots[m], roots[n],
								      path, (size_t)len))
						fails++;
					path[j][5] ^= 0x01;
				}
			}
		}
	}
	tap_ok(fails == 0, "%zu proofs of trees of 1-70 leaves verify, and every "
	       "tampered one fails (%zu failures)", checks, fails);
	/* a fork: the same size, one leaf different, is not consistent */
	{
		struct merkle_store f;
		merkle_hash froot;

		merkle_store_init(&f);
		for (n = 0; n < 40; n++) {
			merkle_hash h;

			memcpy(h, leaf[n], 32);
			if (n == 17)
				h[0] ^= 0xff;
			merkle_store_append(&f, h);
		}
		merkle_store_root(&f, 30, froot);
		len = merkle_store_consistency(&s, 30, 50, path);
		tap_ok(!merkle_verify_consistency(30, 50, froot, roots[50], path, (size_t)len),
		       "a forked tree is not consistent with the real one");
		merkle_store_free(&f);
	}
	merkle_store_free(&s);
}

int main(void)
{
	vectors();
	exhaustive();
	return tap_done();
}
