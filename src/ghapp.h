/* SPDX-License-Identifier: Apache-2.0
 * ghapp.h - minting a GitHub App installation token scoped down to the
 * session (docs/GIT.md): the scope a policy asks for, the App's JWT, the
 * answer's validation, and the blocking HTTPS client that does the mint.
 *
 * The key holder loads the key and signs the JWT (ghapp_key_load,
 * ghapp_jwt); the mint process, which holds no key and no secret value,
 * makes the request (ghapp_mint_scope: mintd.c, gitcred.c has the calling
 * pattern); the request never
 * passes through the sandbox or the proxy. ghapp_mint() does both in one
 * process (tests/helpers/ghmint). After a mint: record git.token
 * (ghapp_subject), hand tok.value to the proxy's injection, mint again at
 * ghapp_refresh_at(&tok) (a failure: git.token block, retry every
 * GHAPP_RETRY_S while the old token is valid; after its expiry the proxy
 * answers 502 to git requests).
 *
 * Every function is safe to call with a policy that has no git.github_app
 * only where it says so. Nothing here logs, prints or puts in argv a
 * token, a JWT or a key; the buffers that held one are wiped.
 */
#ifndef AIRLOCK_GHAPP_H
#define AIRLOCK_GHAPP_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "policy.h"

/* A token is 1 to GHAPP_TOKEN_MAX bytes of visible ASCII. GitHub's format
 * changes (2026: stateless "ghs_" tokens longer than 40 characters), so no
 * length or prefix is assumed; the bound only keeps a header sane. */
#define GHAPP_TOKEN_MAX 8192
/* The whole answer (head and body) the client reads. An answer lists each
 * repository in full (a few KiB each). */
#define GHAPP_ANSWER_MAX ((size_t)2 * 1024 * 1024)
/* The time one mint may take, resolving included, when the caller passes
 * 0. */
#define GHAPP_TIMEOUT_MS 30000
/* Refresh this long before expiry (GitHub's tokens live one hour), or at
 * half the lifetime when that is shorter. */
#define GHAPP_REFRESH_MARGIN_S 600
/* How often to try again after a failed refresh. */
#define GHAPP_RETRY_S 30
/* An answer whose token expires sooner than this is refused. */
#define GHAPP_MIN_LIFETIME_S 120
/* Repositories one mint may ask for: GitHub's own limit. */
#define GHAPP_REPOS_MAX 500

/* What a mint asks for, or what an answer granted. */
struct ghapp_perm {
	char *name;                  /* GitHub's permission name */
	enum policy_gh_access level;
};

struct ghapp_scope {
	char *owner;        /* the session repository's owner, lowercase */
	char **repos;       /* bare names, lowercase, sorted, unique */
	size_t nrepos;
	struct ghapp_perm *perms; /* sorted by name, unique */
	size_t nperms;
};

void ghapp_scope_free(struct ghapp_scope *s);

/* The scope of the session's token: the session repository and every
 * git.repos entry of the same owner on its host (entries without a host
 * count), by bare name; contents "write" if any of them may be pushed,
 * else "read"; metadata "read"; the policy's permissions added, the
 * higher level winning for a name given twice. Needs git.github_app and
 * session.repo (the policy checker requires both together). Returns 0,
 * or -1 with one line in @err (more than GHAPP_REPOS_MAX repositories).
 * Free @out with ghapp_scope_free(). */
int ghapp_scope_from_policy(const struct policy *p, struct ghapp_scope *out,
			    char *err, size_t errlen);

/* The mint's JSON body for @s: {"repositories":[...],"permissions":{...}},
 * compact, members in that order. The caller frees it. */
char *ghapp_request_body(const struct ghapp_scope *s);

/* Reads the App's private key (PEM, PKCS#1 or PKCS#8, not encrypted): an
 * RSA key of at least 2048 bits. Warns on stderr when the file is
 * readable by group or others. Returns NULL with one line in @err. The
 * file's bytes are wiped from memory once parsed. Free with
 * EVP_PKEY_free(). */
EVP_PKEY *ghapp_key_load(const char *path, char *err, size_t errlen);

/* The same without printing: the warning (or "") goes to @warn, for a
 * caller that reports it later in its own order (the key holder). */
EVP_PKEY *ghapp_key_load_quiet(const char *path, char *warn, size_t warnlen, char *err,
			       size_t errlen);

/* The App's JWT for @app_id at @now: header {"alg":"RS256","typ":"JWT"},
 * claims {"iat":now-60,"exp":now+540,"iss":app_id} (compact, in that
 * order), base64url without padding, signed RS256 (PKCS#1 v1.5, SHA-256)
 * with @key. @app_id is as the policy keeps it ([A-Za-z0-9._-], ASSERTed).
 * Returns the JWT, a credential for ten minutes: the caller wipes it
 * (explicit_bzero over strlen) before free(). NULL with one line in @err
 * when @key is no RSA key or signing fails. */
char *ghapp_jwt(EVP_PKEY *key, const char *app_id, time_t now, char *err,
		size_t errlen);

/* "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)" (RFC 3339) to Unix time. */
bool ghapp_parse_rfc3339(const char *s, time_t *out);

/* Between begin and end, jansson allocates with a wiping allocator (every
 * block zeroed when freed): for JSON that holds credentials. Only objects
 * made in between may be freed in between, and all of them before end. */
struct ghapp_json_alloc {
	json_malloc_t m;
	json_free_t f;
};
void ghapp_json_wipe_begin(struct ghapp_json_alloc *saved);
void ghapp_json_wipe_end(const struct ghapp_json_alloc *saved);

/* The prologue of a mint's answer check (GitHub App, GitLab): status 201
 * (otherwise the answer's "message", shown printable), a JSON media type
 * (application/json, parameters allowed), a JSON object. Returns the
 * parsed object (the caller decrefs it), or NULL with one line in @err.
 * Call it between ghapp_json_wipe_begin() and _end(). */
json_t *ghapp_answer_object(unsigned int status, const char *content_type, const char *body,
			    size_t len, char *err, size_t errlen);

/* A minted token. */
struct ghapp_token {
	char *value;           /* the token; a secret: never logged */
	size_t len;
	time_t issued_at;      /* when the answer was checked */
	time_t expires_at;
	struct ghapp_scope granted; /* what the answer said it grants */
};

/* Wipes and frees what @t holds and zeroes it (safe on a zeroed token). */
void ghapp_token_clear(struct ghapp_token *t);

/* Checks a mint's answer against what was @asked, at @now. Accepted only
 * when: @status is 201; @content_type (NULL: absent) is application/json;
 * the body is a JSON object (no duplicate member) with "token" (a string
 * of 1..GHAPP_TOKEN_MAX visible ASCII bytes), "expires_at" (RFC 3339, at
 * least GHAPP_MIN_LIFETIME_S after @now), "repository_selection"
 * "selected" (never "all"), "repositories" exactly the asked names (by
 * "name", case-insensitively, each once; a "full_name" or "owner.login"
 * must name the asked owner), and "permissions" none that was not asked
 * and none at a higher level (fewer or lower is accepted: GitHub grants
 * at most what the installation has). Another status gives "the mint
 * answered HTTP N" and GitHub's "message" when there is one. Returns 0
 * with @out filled (the caller ghapp_token_clear()s it), or -1 with one
 * line in @err (never holding the token) and @out zeroed. Not for
 * threads: jansson's allocator is swapped for a wiping one during the
 * parse (and restored), so no other thread may use jansson meanwhile. */
int ghapp_check_answer(const struct ghapp_scope *asked, unsigned int status,
		       const char *content_type, const char *body, size_t len,
		       time_t now, struct ghapp_token *out, char *err,
		       size_t errlen);

/* When to mint again: GHAPP_REFRESH_MARGIN_S before expires_at, or half
 * way through the token's life when that comes later (or sooner: the
 * test-only git_refresh_margin of AIRLOCK_TEST_TIMEOUTS, in ms). */
time_t ghapp_refresh_at(const struct ghapp_token *t);

/* The subject of a git.token receipt: {"host", "installation_id",
 * "owner", "repositories", "permissions", "expires_at"}, from the granted
 * scope and @t when the mint succeeded, from @asked alone (no expires_at)
 * when it failed (@t NULL). Never the token. Both NULL: the scope the
 * policy asks for, as ghapp_scope_from_policy() makes it. The caller
 * owns the reference. */
json_t *ghapp_subject(const struct policy *p, const struct ghapp_scope *asked,
		      const struct ghapp_token *t);

/* Mints a token for @p's session: scope, JWT, then POST
 * {api}/app/installations/{id}/access_tokens over HTTPS, and
 * ghapp_check_answer(). The API's name is resolved through
 * egress.resolver (empty: the host's resolv.conf; DNS only, never
 * /etc/hosts) and every answer must pass the special-purpose address
 * check of egress.allow_ranges, or nothing is connected to; an IP literal
 * is checked likewise. Only checked addresses are connected to (IPv4
 * first). The server's certificate must verify for the API's name (or
 * address) against git.github_app.ca when given, else the system store
 * plus egress.upstream_ca; TLS 1.2 or 1.3, ALPN http/1.1. At most
 * GHAPP_ANSWER_MAX bytes are read; the whole mint takes at most
 * @timeout_ms (0: GHAPP_TIMEOUT_MS). Blocking; not for the proxy's event
 * loop. Returns 0 with @out filled, or -1 with one line in @err. */
int ghapp_mint(const struct policy *p, EVP_PKEY *key, unsigned int timeout_ms,
	       struct ghapp_token *out, char *err, size_t errlen);

/* The same with a JWT signed elsewhere (the key holder signs it): @jwt is
 * borrowed and left as it is (the caller wipes it). The scope is @p's
 * (ghapp_scope_from_policy()). */
int ghapp_mint_jwt(const struct policy *p, const char *jwt, unsigned int timeout_ms,
		   struct ghapp_token *out, char *err, size_t errlen);

/* The request and the answer's check of ghapp_mint_jwt(), for a scope
 * and an installation given by the caller (the mint process, mintd.c,
 * takes both from the supervisor's message): POST
 * {api}/app/installations/@installation_id/access_tokens asking for
 * @asked, the answer checked against @asked. The connection is @p's
 * git.github_app's (api, ca) and egress's. */
int ghapp_mint_scope(const struct policy *p, uint64_t installation_id,
		     const struct ghapp_scope *asked, const char *jwt, unsigned int timeout_ms,
		     struct ghapp_token *out, char *err, size_t errlen);

/* Is @s (@n bytes) a token airlock accepts: 1 to GHAPP_TOKEN_MAX bytes of
 * visible ASCII (no length or prefix assumed)? */
bool ghapp_token_ok(const char *s, size_t n);

/* The answer of ghapp_https(). */
struct ghapp_reply {
	unsigned int status;
	char content_type[128];
	bool has_content_type;
	char *body;       /* NUL-terminated (may hold NULs); wiped on free */
	size_t len;
};

void ghapp_reply_free(struct ghapp_reply *r);

/* The monotonic deadline of an exchange of @timeout_ms (0:
 * GHAPP_TIMEOUT_MS) from now, for ghapp_https(). */
long long ghapp_deadline(unsigned int timeout_ms);

/* One HTTPS exchange of the supervisor, made as the mint makes it (the
 * connection of ghapp_mint() above: the policy's resolvers, the
 * special-purpose address check, only checked addresses, the
 * certificate verified for @host against @ca -- named @ca_key in
 * errors -- or the system store plus egress.upstream_ca; TLS 1.2+;
 * answers up to GHAPP_ANSWER_MAX): sends @request (a whole HTTP/1.1
 * request with "Connection: close") to @host:@port and reads the answer
 * by @deadline (ghapp_deadline()). Used by the GitLab mint (glmint.c)
 * and the OAuth refresh (oauth.c).
 * Returns 0 with @out filled (ghapp_reply_free() it), or -1 with one
 * line in @why. */
int ghapp_https(const struct policy *p, const char *host, uint16_t port, const char *ca,
		const char *ca_key, const char *request, long long deadline,
		struct ghapp_reply *out, char *why, size_t whylen);

#endif /* AIRLOCK_GHAPP_H */
