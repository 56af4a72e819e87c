/* SPDX-License-Identifier: Apache-2.0
 * oauth.h - OAuth access tokens brokered by the supervisor (`oauth` on a
 * secret, docs/SECRETS.md "OAuth"): the refresh_token grant made outside
 * the sandbox (ghapp_https(), as a GitHub App mint is), the token handed
 * to every proxy worker behind one stable placeholder, refreshed before
 * it expires and once after a 401 from a bound host.
 *
 * Calling pattern (airlock run):
 *
 *	oauth_start(&s, p, &o);              before session.start: a grant
 *	                                     that fails refuses the session
 *	oauth_env(&o, &env);                 the placeholders, secrets.NAME.env
 *	session_begin(...); oauth_record(&s, &o);
 *	worker_pool_start(...); oauth_send(&o, &wp);   before go
 *	wp.oauth401 = oauth_on_401 (arg: a struct oauth_ctx)
 *	loop: at oauth_next(&o) (0: never) oauth_refresh_due(&s, p, &o, &wp)
 *	oauth_free(&o);                      wipes
 *
 * The client secret, the refresh token and the access tokens live only
 * here (the supervisor) and, for the access token, in the workers.
 */
#ifndef AIRLOCK_OAUTH_H
#define AIRLOCK_OAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "env.h"
#include "policy.h"
#include "session.h"
#include "worker.h"

/* An access token is 1 to OAUTH_TOKEN_MAX visible ASCII bytes. */
#define OAUTH_TOKEN_MAX 8192
/* The lifetime assumed when the answer has no expires_in. */
#define OAUTH_DEFAULT_LIFETIME_S 3600
/* Refresh this long before expiry, or at half the lifetime when that is
 * shorter (the test-only oauth_refresh_margin of AIRLOCK_TEST_TIMEOUTS,
 * in ms, shortens it). */
#define OAUTH_REFRESH_MARGIN_S 300
/* After a failed refresh, try again this often (or sooner, before the
 * token in force expires). */
#define OAUTH_RETRY_S 30
/* A 401 asks for a refresh of the token it answered, once. */

struct oauth_secret {
	const struct policy_secret *def;
	char *client_secret;   /* or NULL (a public client) */
	size_t client_secret_len;
	char *refresh_token;   /* rotated when the endpoint sends a new one */
	size_t refresh_token_len;
	char *value;           /* the access token in force, or NULL */
	size_t len;
	char *ph;              /* the stable placeholder */
	size_t phlen;
	time_t expires_at;     /* of value; 1 once a refresh failed after a 401 */
	time_t next;           /* the next refresh (0: none) */
};

struct oauth {
	struct oauth_secret *s;
	size_t n;
};

/* What the pool's oauth401 hook needs. */
struct oauth_ctx {
	struct session *s;
	const struct policy *p;
	struct oauth *o;
	struct worker_pool *wp;
};

/* The form body of the refresh_token grant for @s (percent-encoded). The
 * caller wipes and frees it. */
char *oauth_request_body(const struct oauth_secret *s);

/* Checks a token endpoint's answer: status 200, a JSON object with
 * "access_token" (1..OAUTH_TOKEN_MAX visible ASCII), "token_type" (if
 * given) "Bearer" in any case, "expires_in" (if given) a number of
 * seconds from 1 to 10^8, "refresh_token" (if given, a rotation) visible
 * ASCII. Returns 0 with the token, its expiry from @now and a rotated
 * refresh token (or NULL) in the out parameters (the caller wipes them),
 * or -1 with one line in @err that never holds a credential. */
int oauth_check_answer(unsigned int status, const char *body, size_t len, time_t now,
		       char **token, size_t *token_len, time_t *expires_at, char **rotated,
		       size_t *rotated_len, char *err, size_t errlen);

/* When to refresh a token valid from @now until @expires_at. */
time_t oauth_refresh_at(time_t now, time_t expires_at);

/* Reads every oauth secret's credentials of @p and obtains its first
 * access token. A failure refuses the session (session_refuse: 125, with
 * session.refused naming secrets.NAME.oauth; does not return). */
void oauth_start(struct session *s, const struct policy *p, struct oauth *o);

/* After session.start: one secret.refresh (why "start") per secret. */
void oauth_record(struct session *s, const struct oauth *o);

/* Each secret's placeholder under its env name. */
void oauth_env(const struct oauth *o, struct env_result *env);

/* "ENV=PLACEHOLDER\n" for each secret (airlock proxy --placeholders). */
char *oauth_placeholders_text(const struct oauth *o);

/* Every worker gets every token (before go). Returns 0 or -errno. */
int oauth_send(const struct oauth *o, struct worker_pool *wp);

/* The earliest refresh due (0: none). */
time_t oauth_next(const struct oauth *o);

/* Refreshes every secret whose time has come (blocking). */
void oauth_refresh_due(struct session *s, const struct policy *p, struct oauth *o,
		       struct worker_pool *wp);

/* The pool's oauth401 hook: @arg is a struct oauth_ctx. Refreshes the
 * secret when @value is still its token in force (a 401 to an older one
 * changes nothing). */
void oauth_on_401(void *arg, const char *secret, const void *value, size_t len);

/* Does @name (@len bytes) name a variable of @p that holds an OAuth
 * credential (never passed to the sandbox: env.c)? */
bool oauth_env_owned(const struct policy *p, const char *name, size_t len);

/* Wipes the OAuth credentials' values out of this process's environ
 * (the sandbox's init inherits it). */
void oauth_scrub_environ(const struct policy *p);

/* In a proxy worker (worker_config.forget, @arg the struct oauth): wipes
 * the refresh tokens and client secrets, and their variables in environ;
 * the workers need only the access tokens, which come by message. */
void oauth_forget(void *arg);

/* Wipes and frees; safe on a zeroed or freed one. */
void oauth_free(struct oauth *o);

#endif /* AIRLOCK_OAUTH_H */
