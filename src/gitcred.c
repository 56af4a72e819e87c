/* SPDX-License-Identifier: Apache-2.0
 * gitcred.c - the git credential in the supervisor.
 *
 * DOC: Theory of Operation
 *
 * The credential the proxy workers inject on allowed git requests: the
 * value of the git.credential secret (borrowed from the broker), or a
 * GitHub App installation token minted for the session: the key holder
 * signs the App's JWT (the key never leaves it), the supervisor makes the
 * scope from the policy in force and hands both to the mint process
 * (mintd.c), which makes the HTTPS request (the policy's resolvers, the
 * address checks, the API's certificate) outside the sandbox and the
 * proxy, and parses the answer; the supervisor checks what it says back.
 * A mint at start that fails or grants more than asked refuses the
 * session; a refresh that fails keeps the old token until it expires,
 * after which the workers answer 502. The placeholder the agent holds
 * under git.token_env is the one the workers replace on git.api_hosts.
 *
 * The minted token is in the supervisor's memory and, through fork, in
 * the workers' (which inject it); the sandbox's init wipes its copy
 * (gitcred_free from the scrub hook); the mint process holds it only
 * until it has answered. The key stays in the key holder; the JWT it
 * signs lives ten minutes and is wiped after the request.
 */
#include "gitcred.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "keeper.h"
#include "mintd.h"
#include "util.h"

static void git_mint(struct session *s, const struct policy *p, struct gitcred *g,
		     struct ghapp_token *tok, char *err, size_t errlen)
{
	const struct policy_github_app *app = p->git_github_app;
	struct ghapp_scope asked;
	char *jwt, why[256];

	memset(tok, 0, sizeof(*tok));
	if (!app) {
		snprintf(err, errlen, "the policy in force has no git.github_app");
		return;
	}
	if (ghapp_scope_from_policy(p, &asked, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "token mint at %s: %s", app->api_host, why);
		return;
	}
	jwt = keeper_sign_jwt(&s->k, err, errlen);
	if (jwt) {
		int rc = mintd_mint(g->mint, jwt, app->installation_id, &asked, tok, err, errlen);
		explicit_bzero(jwt, strlen(jwt));
		free(jwt);
		if (rc != 0)
			ghapp_token_clear(tok);
	}
	ghapp_scope_free(&asked);
}

bool gitcred_needs_mint(const struct policy *p)
{
	return p->git_github_app && !p->git_credential && !p->git_gitlab_mint;
}

/* Before session.start: the credential, or a refusal (125). */
void gitcred_start(struct session *s, const struct policy *p, const struct broker *b,
		   struct mintd *mint, struct gitcred *g)
{
	char err[512] = "";

	memset(g, 0, sizeof(*g));
	g->mint = mint;
	if (p->git_credential) {
		size_t i;

		for (i = 0; i < b->count; i++) {
			if (strcmp(b->secrets[i].def->name, p->git_credential) != 0)
				continue;
			g->value = b->secrets[i].value;
			g->value_len = b->secrets[i].value_len;
			g->placeholder = util_xstrdup(b->secrets[i].placeholder);
			g->placeholder_len = b->secrets[i].placeholder_len;
		}
		ASSERT(g->value); /* the policy checker requires the secret */
		return;
	}
	if (p->git_gitlab_mint) {
		g->gl_admin = glmint_admin_token(p, err, sizeof(err));
		if (!g->gl_admin)
			session_refuse(s, "git.gitlab_mint", err);
		if (glmint_mint(p, g->gl_admin, s->id, &g->gltok, err, sizeof(err)) != 0)
			session_refuse(s, "git.gitlab_mint", err);
		g->gl_minted = true;
		g->value = g->gltok.value;
		g->value_len = g->gltok.len;
		g->placeholder = broker_placeholder_make("glpat-", g->gltok.value, g->gltok.len,
							 &g->placeholder_len, err, sizeof(err));
		ASSERT(g->placeholder);
		return;
	}
	if (!p->git_github_app)
		return;
	ASSERT(mint);
	g->minted = true;
	git_mint(s, p, g, &g->tok, err, sizeof(err));
	if (!g->tok.value)
		session_refuse(s, "git.github_app", err);
	g->value = g->tok.value;
	g->value_len = g->tok.len;
	g->next_mint = ghapp_refresh_at(&g->tok);
	/* shaped like the token (client-side format checks), worthless */
	g->placeholder = broker_placeholder_make("ghs_", g->tok.value, g->tok.len,
						 &g->placeholder_len, err, sizeof(err));
	ASSERT(g->placeholder);
}

/* After session.start: the git.token line of the first mint. */
void gitcred_record(struct session *s, const struct policy *p, const struct gitcred *g)
{
	if (g->gl_minted)
		session_record(s, "git.token", RECEIPT_ALLOW, RECEIPT_POINT_GIT, "git.gitlab_mint",
			       glmint_subject(p, NULL, &g->gltok),
			       "project access token minted for the session's project");
	if (g->minted)
		session_record(s, "git.token", RECEIPT_ALLOW, RECEIPT_POINT_GIT,
			       "git.github_app", ghapp_subject(p, &g->tok.granted, &g->tok),
			       "installation token minted for the session's repositories");
}

/* The placeholder under every git.token_env variable (replacing what the
 * environment held there). */
void gitcred_env(const struct policy *p, const struct gitcred *g,
			 struct env_result *env)
{
	size_t i;

	if (!g->placeholder)
		return;
	for (i = 0; i < p->ngit_token_env; i++)
		env_result_set(env, p->git_token_env[i], g->placeholder);
}

time_t gitcred_expires(const struct gitcred *g)
{
	return g->minted ? g->tok.expires_at : g->gl_minted ? g->gltok.expires_at : 0;
}

/* A refresh is due: mint, hand the new token to the workers, record. */
void gitcred_refresh(struct session *s, const struct policy *p, struct gitcred *g,
			     struct worker_pool *wp)
{
	struct ghapp_token fresh;
	char err[512] = "";

	git_mint(s, p, g, &fresh, err, sizeof(err));
	if (!fresh.value) {
		session_record(s, "git.token", RECEIPT_BLOCK, RECEIPT_POINT_GIT, "git.github_app",
			       p->git_github_app ? ghapp_subject(p, NULL, NULL) : json_object(),
			       err);
		g->next_mint = time(NULL) + GHAPP_RETRY_S;
		return;
	}
	ghapp_token_clear(&g->tok);
	g->tok = fresh;
	g->value = g->tok.value;
	g->value_len = g->tok.len;
	/* the git filter's configuration again, with the new token (the
	 * filter is found in the table: the git filter reads gitcred.h) */
	if (worker_pool_configure(wp, filter_table_find("git", 3),
				  &(struct filter_source){ .policy = p, .git = g }) < 0)
		util_warn("the refreshed git token could not reach every proxy worker");
	g->next_mint = ghapp_refresh_at(&g->tok);
	session_record(s, "git.token", RECEIPT_ALLOW, RECEIPT_POINT_GIT, "git.github_app",
		       ghapp_subject(p, &g->tok.granted, &g->tok),
		       "installation token refreshed before expiry");
}

void gitcred_finish(struct session *s, const struct policy *p, struct gitcred *g)
{
	char err[512] = "";

	if (!g->gl_minted || !g->gltok.value)
		return;
	if (glmint_revoke(p, g->gl_admin, &g->gltok, err, sizeof(err)) == 0)
		session_record(s, "git.token", RECEIPT_ALLOW, RECEIPT_POINT_GIT, "git.gitlab_mint",
			       glmint_subject(p, NULL, &g->gltok),
			       "project access token revoked at the session's end");
	else
		session_record(s, "git.token", RECEIPT_BLOCK, RECEIPT_POINT_GIT, "git.gitlab_mint",
			       glmint_subject(p, NULL, &g->gltok), err);
	g->gl_minted = false;
}

void gitcred_free(struct gitcred *g)
{
	glmint_token_clear(&g->gltok);
	if (g->gl_admin) {
		explicit_bzero(g->gl_admin, strlen(g->gl_admin));
		free(g->gl_admin);
	}
	ghapp_token_clear(&g->tok);
	if (g->placeholder) {
		explicit_bzero(g->placeholder, g->placeholder_len);
		free(g->placeholder);
	}
	memset(g, 0, sizeof(*g));
}

time_t gitcred_next(const struct gitcred *g)
{
	return g->next_mint;
}
