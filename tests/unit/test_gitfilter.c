/* SPDX-License-Identifier: Apache-2.0
 * test_gitfilter.c - the git filter's credential step: when the
 * credential is given (allowed, inside TLS, with a token), and how the
 * API placeholder becomes the token in an Authorization value.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gitfilter.h"
#include "registry.h"
#include "tap.h"
#include "util.h"

#define PH "airlock-ph-gh-0123456789abcdefghijklmnopqrstuv"
#define TOK "ghs_stateless_2026_0123456789012345678901234567890123456789012345678901234567890"

struct plan_case {
	enum gitrules_decision d;
	bool api, tls, have;
	enum gitfilter_cred want;
	const char *why;
};

static const struct plan_case plans[] = {
	{ GITRULES_ALLOW, false, true, true, GITFILTER_CRED_INJECT, "SCM, allowed, TLS: injected" },
	{ GITRULES_ALLOW, true, true, true, GITFILTER_CRED_SUBST, "API, allowed, TLS: substituted" },
	{ GITRULES_ALLOW, false, false, true, GITFILTER_CRED_NONE, "plain http: never" },
	{ GITRULES_ALLOW, true, false, true, GITFILTER_CRED_NONE, "API over plain http: never" },
	{ GITRULES_DENY, false, true, true, GITFILTER_CRED_NONE, "refused (or would_block): never" },
	{ GITRULES_DENY, true, true, true, GITFILTER_CRED_NONE, "API refused: never" },
	{ GITRULES_NEED_BODY, false, true, true, GITFILTER_CRED_NONE, "undecided: never" },
	{ GITRULES_ALLOW, false, true, false, GITFILTER_CRED_MISSING, "no valid token: 502" },
	{ GITRULES_DENY, false, true, false, GITFILTER_CRED_NONE, "refused without a token: 403, not 502" },
	{ GITRULES_ALLOW, false, false, false, GITFILTER_CRED_NONE, "plain http without a token: none" },
};

/* base64 of "x-access-token:" PH and of "x-access-token:" TOK */
struct auth_case {
	const char *in;
	const char *want; /* NULL: not substituted */
	const char *why;
};

static char *b64(const char *s)
{
	size_t n = strlen(s);
	char *out = util_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

int main(void)
{
	size_t i;
	char *basic_ph = b64("x-access-token:" PH), *basic_tok = b64("x-access-token:" TOK);
	char *basic_other = b64("x-access-token:" PH "x"), *basic_nocolon = b64(PH);
	char *in_basic = util_xasprintf("Basic %s", basic_ph);
	char *want_basic = util_xasprintf("Basic %s", basic_tok);
	char *in_other = util_xasprintf("Basic %s", basic_other);
	char *in_nocolon = util_xasprintf("Basic %s", basic_nocolon);
	const struct auth_case auths[] = {
		{ "Bearer " PH, "Bearer " TOK, "Bearer PH" },
		{ "bearer " PH, "bearer " TOK, "the scheme in any case" },
		{ "token " PH, "token " TOK, "token PH (gh's form)" },
		{ in_basic, want_basic, "Basic x-access-token:PH, re-encoded" },
		{ in_other, NULL, "Basic with a longer password: not ours" },
		{ in_nocolon, NULL, "Basic without a colon: refused" },
		{ "Bearer " PH "x", NULL, "a longer token: the agent's own" },
		{ "Bearer " "airlock-ph-gh-0123", NULL, "a prefix of it: the agent's own" },
		{ "Bearer ghp_agents_own_token", NULL, "another token: forwarded unchanged" },
		{ "Basic !!!!", NULL, "bad base64: not ours" },
		{ "Basic ", NULL, "empty credentials" },
		{ "Digest " PH, NULL, "another scheme" },
		{ PH, NULL, "no scheme" },
	};

	tap_is_str(gitfilter_cred_to_string(GITFILTER_CRED_INJECT), "inject", "names: inject");
	tap_is_str(gitfilter_cred_to_string(GITFILTER_CRED_COUNT), "unknown", "names: out of range");
	for (i = 0; i < ARRAY_SIZE(plans); i++) {
		const struct plan_case *c = &plans[i];

		tap_is_str(gitfilter_cred_to_string(gitfilter_cred_plan(c->d, c->api, c->tls, c->have)),
			   gitfilter_cred_to_string(c->want), "plan: %s", c->why);
	}
	for (i = 0; i < ARRAY_SIZE(auths); i++) {
		char *got = gitfilter_subst_auth(auths[i].in, PH, strlen(PH), TOK, strlen(TOK));

		tap_is_str(got, auths[i].want, "auth: %s", auths[i].why);
		free(got);
	}
	{
		struct gitfilter *g = gitfilter_new(NULL, NULL);

		tap_ok(!gitfilter_set_token(g, "has space", 9, 0), "a token with a space is refused");
		tap_ok(!gitfilter_set_token(g, "", 0, 0), "an empty token is refused");
		tap_ok(!gitfilter_set_token(g, "a\nb", 3, 0), "a token with a newline is refused");
		tap_ok(gitfilter_set_token(g, TOK, strlen(TOK), 0), "a long stateless token is taken");
		tap_ok(gitfilter_set_token(g, NULL, 0, 0), "no token");
		{
			struct registry *reg = registry_new();
			struct registry_set *rs;

			gitfilter_set_placeholder(g, PH, strlen(PH));
			tap_ok(gitfilter_set_registry(g, reg) && registry_count(reg) == 0,
			       "registry: no token, nothing registered");
			tap_ok(gitfilter_set_token(g, TOK, strlen(TOK), 0) &&
				       registry_count(reg) == 1,
			       "registry: a token set is registered");
			tap_ok(gitfilter_set_token(g, "ghs_second_token_0123456789", 27, 0) &&
				       registry_count(reg) == 2,
			       "registry: a refreshed token joins the first (both scrubbed)");
			rs = registry_acquire(reg);
			tap_is_str(registry_name(rs, 0), "git.token", "registry: named git.token");
			registry_release(rs);
			gitfilter_set_registry(g, NULL);
			registry_free(reg);
		}
		gitfilter_free(g);
	}
	free(basic_ph);
	free(basic_tok);
	free(basic_other);
	free(basic_nocolon);
	free(in_basic);
	free(want_basic);
	free(in_other);
	free(in_nocolon);
	return tap_done();
}
