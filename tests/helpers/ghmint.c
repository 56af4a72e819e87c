/* SPDX-License-Identifier: Apache-2.0
 * ghmint - test-only: mints a GitHub App installation token with ghapp.c,
 * exactly as the key holder does, so that the integration tests exercise
 * the module against the stand-in API (tests/helpers/github_api.py).
 *
 *   ghmint POLICY [TIMEOUT_MS]
 *
 * On success prints one JSON object and exits 0: {"subject": the git.token
 * receipt's subject, "token_sha256": hex, "token_length": n,
 * "refresh_before": seconds from ghapp_refresh_at() to the expiry}. (Not
 * from the issue: the stand-in's clock second and ours may differ by one.)
 * The token itself is
 * never printed: the tests compare its hash with the one the stand-in
 * logged. On failure prints the one-line reason on stderr, exits 1.
 */
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ghapp.h"
#include "policy.h"
#include "util.h"

int main(int argc, char **argv)
{
	struct policy_errors errs = { 0 };
	struct ghapp_token tok = { 0 };
	unsigned char md[32];
	char hex[65], err[512];
	unsigned long timeout = 0;
	struct policy *p;
	EVP_PKEY *key;
	json_t *out;
	char *text;

	if (argc < 2 || argc > 3 || (argc == 3 && !util_parse_uint(argv[2], 1, 600000, &timeout))) {
		fprintf(stderr, "usage: ghmint POLICY [TIMEOUT_MS]\n");
		return 2;
	}
	p = policy_load(argv[1], NULL, &errs);
	if (!p) {
		fprintf(stderr, "ghmint: %s: %s\n", errs.count ? errs.items[0].path : "?",
			errs.count ? errs.items[0].message : "?");
		return 2;
	}
	if (!p->git_github_app) {
		fprintf(stderr, "ghmint: the policy has no git.github_app\n");
		return 2;
	}
	key = ghapp_key_load(p->git_github_app->private_key_file, err, sizeof(err));
	if (!key) {
		fprintf(stderr, "ghmint: %s\n", err);
		return 1;
	}
	if (ghapp_mint(p, key, (unsigned int)timeout, &tok, err, sizeof(err)) != 0) {
		fprintf(stderr, "ghmint: %s\n", err);
		EVP_PKEY_free(key);
		policy_free(p);
		return 1;
	}
	ASSERT(EVP_Digest(tok.value, tok.len, md, NULL, EVP_sha256(), NULL) == 1);
	util_hex(md, sizeof(md), hex);
	out = json_pack("{s:o,s:s,s:I,s:I}", "subject", ghapp_subject(p, NULL, &tok),
			"token_sha256", hex, "token_length", (json_int_t)tok.len,
			"refresh_before", (json_int_t)(tok.expires_at - ghapp_refresh_at(&tok)));
	text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	printf("%s\n", text);
	free(text);
	json_decref(out);
	ghapp_token_clear(&tok);
	EVP_PKEY_free(key);
	policy_free(p);
	return 0;
}
