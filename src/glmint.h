/* SPDX-License-Identifier: Apache-2.0
 * glmint.h - a GitLab project access token minted for the session
 * (git.gitlab_mint, docs/GIT.md): the supervisor asks GitLab, with a
 * group or instance token it holds (never the agent), for a token of the
 * session's project alone, with the least role and scopes, and revokes it
 * when the session ends.
 *
 * Calling pattern (gitcred.c):
 *	glmint_admin_token(p, &admin, err)      from the supervisor's env/file
 *	glmint_mint(p, admin, session_id, &tok, err)  before session.start
 *	... the workers inject tok.value ...
 *	glmint_revoke(p, admin, &tok, err)      at the session's end
 *	glmint_token_clear(&tok); wipe admin
 * Blocking (at most GHAPP_TIMEOUT_MS each), outside the sandbox and the
 * proxy, over ghapp_https() (the same checked connection as the GitHub
 * mint).
 */
#ifndef AIRLOCK_GLMINT_H
#define AIRLOCK_GLMINT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "policy.h"

/* GitLab's role (access_level) the token gets: Developer, the least that
 * pushes. */
#define GLMINT_DEVELOPER 30

/* What a mint asks for. */
struct glmint_scope {
	char project[256];     /* "group/sub/project", lowercase */
	const char *scopes[3]; /* "read_repository", "write_repository", "api" */
	size_t nscopes;
	int access_level;
	char expires_at[11];   /* "YYYY-MM-DD" (GitLab's granularity) */
};

/* The scope of the session's token: the session's project; scopes
 * read_repository and write_repository (the session's project may be
 * pushed), api when git.api_hosts names a host; the Developer role;
 * expiry git.gitlab_mint's
 * expires_minutes from @now, as a date, at the earliest tomorrow (UTC):
 * GitLab takes a date, and a token expires at its start. */
void glmint_scope_from_policy(const struct policy *p, time_t now, struct glmint_scope *out);

struct glmint_token {
	char *value;         /* the token; a secret */
	size_t len;
	uint64_t id;         /* GitLab's id of the token, for the revocation */
	time_t expires_at;   /* the start (UTC) of the expiry date */
	struct glmint_scope granted;
};

void glmint_token_clear(struct glmint_token *t);

/* The group or instance token the supervisor mints with: the variable
 * token_env of its own environment, or the first line of token_file.
 * Returns a copy (wipe it), or NULL with one line in @err. */
char *glmint_admin_token(const struct policy *p, char *err, size_t errlen);

/* Checks a mint's answer: 201, JSON, a "token" of 1..GHAPP_TOKEN_MAX
 * visible ASCII bytes, an "id" >= 1, "scopes" none that was not asked,
 * "access_level" not above the asked, "expires_at" not after the asked
 * date, not "revoked". 0 with @out filled, or -1 with one line in @err
 * (never holding the token). */
int glmint_check_answer(const struct glmint_scope *asked, unsigned int status,
			const char *content_type, const char *body, size_t len,
			struct glmint_token *out, char *err, size_t errlen);

/* POST {api}/api/v4/projects/ENCODED-PATH/access_tokens with
 * "PRIVATE-TOKEN: @admin" and {"name", "scopes", "access_level",
 * "expires_at"}; glmint_check_answer(). 0 or -1 with @err. */
int glmint_mint(const struct policy *p, const char *admin, const char *session_id,
		struct glmint_token *out, char *err, size_t errlen);

/* DELETE {api}/api/v4/projects/ENCODED-PATH/access_tokens/ID: 204 (or
 * 404: already gone) is success. 0 or -1 with @err. */
int glmint_revoke(const struct policy *p, const char *admin, const struct glmint_token *t,
		  char *err, size_t errlen);

/* The git.token receipt's subject: host, project, scopes, access_level,
 * expires_at, token_id (never the token). @t NULL: what was asked. */
json_t *glmint_subject(const struct policy *p, const struct glmint_scope *asked,
		       const struct glmint_token *t);

#endif /* AIRLOCK_GLMINT_H */
