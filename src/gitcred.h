/* SPDX-License-Identifier: Apache-2.0
 * gitcred.h - the supervisor's side of the git credential (docs/GIT.md):
 * the token the proxy workers inject on allowed git requests, and the
 * placeholder the agent holds for it.
 *
 * Calling pattern (airlock run; airlock proxy alike):
 *
 *	mintd_start(&mint, p, ...);           before the secrets (github_app)
 *	gitcred_start(&s, p, &broker, &mint, &g);  before session.start: a mint
 *	                                      that fails refuses the session
 *	gitcred_env(p, &g, &env);             the placeholder, git.token_env
 *	session_begin(...); gitcred_record(&s, p, &g);
 *	filter_source.git = &g;               before the workers fork: the
 *	                                      git filter's configuration
 *	loop: at gitcred_next(&g) (0: never) gitcred_refresh(&s, p, &g, &wp)
 *	gitcred_finish(&s, p, &g);            before session_end(): revokes
 *	gitcred_free(&g);                     wipes
 */
#ifndef AIRLOCK_GITCRED_H
#define AIRLOCK_GITCRED_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "broker.h"
#include "env.h"
#include "ghapp.h"
#include "glmint.h"
#include "mintd.h"
#include "policy.h"
#include "session.h"
#include "worker.h"

struct gitcred {
	bool minted;                 /* git.github_app */
	struct ghapp_token tok;      /* the latest minted token */
	const char *value;           /* what the workers get: tok.value or
					the git.credential secret's value
					(borrowed from the broker) */
	size_t value_len;
	char *placeholder;           /* owned */
	size_t placeholder_len;
	time_t next_mint;            /* when to mint again (0: never) */
	/* git.gitlab_mint: the project access token, and the group or
	 * instance token that minted it (to revoke it at the end). */
	bool gl_minted;
	struct glmint_token gltok;
	char *gl_admin;
	struct mintd *mint;          /* the mint process (borrowed), or NULL */
};

/* Does @p's credential come from the GitHub App mint (the mint process
 * must be started)? */
bool gitcred_needs_mint(const struct policy *p);

/* The credential of @p: git.credential's value from @b, or a token minted
 * now (the key holder of @s signs the JWT, the mint process @mint makes
 * the request; @mint is kept for the refreshes and must be started when
 * @p has git.github_app). A mint that fails or grants more than asked
 * refuses the session (session_refuse: 125, does not return). Nothing to
 * do without either: @g stays empty. */
void gitcred_start(struct session *s, const struct policy *p, const struct broker *b,
		   struct mintd *mint, struct gitcred *g);

/* After session.start: the git.token line of the first mint. */
void gitcred_record(struct session *s, const struct policy *p, const struct gitcred *g);

/* Puts the placeholder under every git.token_env variable of @env
 * (replacing what it held there). */
void gitcred_env(const struct policy *p, const struct gitcred *g, struct env_result *env);

/* When the credential in force expires (0: never). */
time_t gitcred_expires(const struct gitcred *g);

/* When the next refresh is due (0: never). */
time_t gitcred_next(const struct gitcred *g);

/* Mints again (blocking, at most GHAPP_TIMEOUT_MS): on success the
 * workers of @wp get the new token and git.token records it; on failure
 * git.token records a block, the old token stays in force until it
 * expires (the workers then answer 502), and the next try is in
 * GHAPP_RETRY_S. */
void gitcred_refresh(struct session *s, const struct policy *p, struct gitcred *g,
		     struct worker_pool *wp);

/* At the session's end, before session_end(), once the workers are
 * gone: revokes a GitLab project token minted for the session and
 * records it (git.token, allow when revoked, block when the revocation
 * failed). Nothing for the other sources. Safe to call twice. */
void gitcred_finish(struct session *s, const struct policy *p, struct gitcred *g);

/* Wipes and frees; safe on a zeroed or freed one. */
void gitcred_free(struct gitcred *g);

#endif /* AIRLOCK_GITCRED_H */
