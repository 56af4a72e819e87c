/* SPDX-License-Identifier: Apache-2.0
 * fuzz_policy.c - libFuzzer target for policy_parse().
 *
 * Beyond "no crash, no leak" it checks the properties the rest of airlock
 * relies on: a policy is returned exactly when there is no error; every
 * error is one non-empty line; the canonical form is a fixed point
 * (parsing it gives the same canonical text and digest), which is what
 * makes the digest a function of meaning rather than of spelling; and the
 * documented invariants of struct policy hold (defaults filled in, the git
 * token's two sources exclusive, sets sorted, prices finite and in range,
 * the price lookup finding every exact entry).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy.h"

static void check_errors(const struct policy_errors *errs)
{
	size_t i;
	const char *s;

	for (i = 0; i < errs->count; i++) {
		CHECK(errs->items[i].path[0] != '\0');
		CHECK(errs->items[i].message[0] != '\0');
		for (s = errs->items[i].message; *s; s++)
			CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
		for (s = errs->items[i].path; *s; s++)
			CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
	}
}

static void check_sorted(char *const *v, size_t n)
{
	size_t i;

	for (i = 1; i < n; i++)
		CHECK(strcmp(v[i - 1], v[i]) < 0);
}

static bool price_ok(double d)
{
	return isfinite(d) && d >= 0 && d <= 1e6 * 1.25;
}

static void check_policy(const struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_secret *s = &p->secrets[i];

		CHECK(s->env && s->prefix && s->nhosts > 0);
		CHECK((s->from_env == NULL) != (s->from_file == NULL));
		CHECK(policy_secret_by_name(p, s->name) == s);
		CHECK(!s->paths || s->npaths > 0);
		CHECK(!s->methods || s->nmethods > 0);
		check_sorted(s->paths, s->npaths);
		check_sorted(s->methods, s->nmethods);
	}
	CHECK(!(p->git_credential && p->git_github_app));
	CHECK(policy_git_has_token(p) == (p->git_credential || p->git_github_app));
	if (p->git_github_app) {
		const struct policy_github_app *a = p->git_github_app;

		CHECK(a->app_id && a->private_key_file && a->api && a->api_host &&
		      a->api_path && a->installation_id >= 1 && a->api_port >= 1);
		CHECK(strncmp(a->api, "https://", 8) == 0 && p->session_repo);
	}
	if (p->session_repo) {
		char buf[600];
		const char *o = strchr(p->session_repo, '/');
		const char *r = strrchr(p->session_repo, '/'); /* GitLab: groups nest */

		CHECK((size_t)(o - p->session_repo) < 300 && (size_t)(r - o - 1) < 300);
		memcpy(buf, p->session_repo, (size_t)(o - p->session_repo));
		buf[o - p->session_repo] = '\0';
		{
			char owner[300];

			memcpy(owner, o + 1, (size_t)(r - o - 1));
			owner[r - o - 1] = '\0';
			CHECK(policy_git_repo_ops(p, buf, owner, r + 1) ==
			      (POLICY_GIT_FETCH | POLICY_GIT_PUSH));
		}
	}
	check_sorted(p->git_hosts, p->ngit_hosts);
	check_sorted(p->git_api_hosts, p->ngit_api_hosts);
	check_sorted(p->git_token_env, p->ngit_token_env);
	check_sorted(p->git_api_allow, p->ngit_api_allow);
	for (i = 0; i < p->ngit_api_allow; i++)
		CHECK(policy_git_api_path_allowed(p, p->git_api_allow[i]));
	check_sorted(p->fs_ro, p->nfs_ro);
	check_sorted(p->fs_protect, p->nfs_protect);
	for (i = 0; i < p->nfs_protect; i++)
		CHECK(p->fs_protect[i][0] && p->fs_protect[i][0] != '/');
	CHECK(!p->spend_has_cap || (isfinite(p->spend_cap_usd) && p->spend_cap_usd >= 0));
	CHECK((p->spend_ledger == NULL) == (p->spend_ledger_kind == POLICY_LEDGER_MEMORY));
	CHECK(!p->spend_parent || p->spend_ledger);
	CHECK(p->spend_max_body_bytes >= 1 && p->spend_default_max_output_tokens >= 1);
	for (i = 0; i < p->nspend_providers; i++) {
		size_t j;

		CHECK(p->spend_providers[i].nhosts > 0);
		for (j = 0; j < p->spend_providers[i].nhosts; j++)
			CHECK(policy_spend_provider_for_host(p, p->spend_providers[i].hosts[j]) ==
			      &p->spend_providers[i]);
	}
	for (i = 0; i < p->nspend_prices; i++) {
		const struct policy_price *pr = &p->spend_prices[i];

		CHECK(price_ok(pr->input) && price_ok(pr->output) &&
		      price_ok(pr->cache_write) && price_ok(pr->cache_read));
		if (i > 0)
			CHECK(strcmp(p->spend_prices[i - 1].model, pr->model) < 0);
		if (!pr->is_prefix)
			CHECK(policy_spend_price(p, pr->model) == pr);
		else
			CHECK(policy_spend_price(p, pr->model) != NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const enum policy_mode enforce = POLICY_MODE_ENFORCE;
	struct policy_errors errs = { 0 }, errs2 = { 0 };
	struct policy *p, *q = NULL;

	p = policy_parse((const char *)data, size, NULL, &errs);
	CHECK((p == NULL) == (errs.count > 0));
	check_errors(&errs);
	if (p) {
		check_policy(p);
		q = policy_parse(p->canonical, strlen(p->canonical), NULL, &errs2);
		CHECK(q && errs2.count == 0);
		CHECK(strcmp(q->canonical, p->canonical) == 0);
		CHECK(strcmp(q->digest, p->digest) == 0);
		policy_free(q);
		q = policy_parse((const char *)data, size, &enforce, &errs2);
		CHECK(q && q->mode == POLICY_MODE_ENFORCE);
		CHECK((p->mode == POLICY_MODE_ENFORCE) ==
		      (strcmp(p->digest, q->digest) == 0));
	}
	policy_free(q);
	policy_free(p);
	policy_errors_free(&errs);
	policy_errors_free(&errs2);
	return 0;
}
