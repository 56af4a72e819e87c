/* SPDX-License-Identifier: Apache-2.0
 * fuzz_policy.c - libFuzzer target for policy_parse().
 *
 * Beyond "no crash, no leak" it checks the properties the rest of airlock
 * relies on: a policy is returned exactly when there is no error; every
 * error is one non-empty line; and the canonical form is a fixed point
 * (parsing it gives the same canonical text and digest), which is what
 * makes the digest a function of meaning rather than of spelling.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_errors(const struct policy_errors *errs)
{
	size_t i;
	const char *s;

	for (i = 0; i < errs->count; i++) {
		ASSERT(errs->items[i].path[0] != '\0');
		ASSERT(errs->items[i].message[0] != '\0');
		for (s = errs->items[i].message; *s; s++)
			ASSERT((unsigned char)*s >= 0x20 && *s != 0x7f);
		for (s = errs->items[i].path; *s; s++)
			ASSERT((unsigned char)*s >= 0x20 && *s != 0x7f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const enum policy_mode enforce = POLICY_MODE_ENFORCE;
	struct policy_errors errs = { 0 }, errs2 = { 0 };
	struct policy *p, *q = NULL;

	p = policy_parse((const char *)data, size, NULL, &errs);
	ASSERT((p == NULL) == (errs.count > 0));
	check_errors(&errs);
	if (p) {
		q = policy_parse(p->canonical, strlen(p->canonical), NULL, &errs2);
		ASSERT(q && errs2.count == 0);
		ASSERT(strcmp(q->canonical, p->canonical) == 0);
		ASSERT(strcmp(q->digest, p->digest) == 0);
		policy_free(q);
		q = policy_parse((const char *)data, size, &enforce, &errs2);
		ASSERT(q && q->mode == POLICY_MODE_ENFORCE);
		ASSERT((p->mode == POLICY_MODE_ENFORCE) ==
		       (strcmp(p->digest, q->digest) == 0));
	}
	policy_free(q);
	policy_free(p);
	policy_errors_free(&errs);
	policy_errors_free(&errs2);
	return 0;
}
