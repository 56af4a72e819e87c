/* SPDX-License-Identifier: Apache-2.0
 * glmint.c - minting a GitLab project access token for the session.
 *
 * DOC: Theory of Operation
 *
 * A GitLab deployment often gives its agents one group or instance token:
 * every project the deployment reaches, GitLab does not narrow it. With
 * git.gitlab_mint that token stays with the supervisor (its environment
 * or a file the sandbox never shows) and the workers inject a token that
 * GitLab itself binds to the session's project:
 *
 * - POST /api/v4/projects/PATH/access_tokens (PATH %2F-encoded) asks for
 *   a project access token of the session's project, with the least
 *   role that pushes (Developer) and scopes
 *   (read_repository, write_repository, and api only when the policy
 *   binds an API host), expiring at the date expires_minutes gives (GitLab
 *   takes a date: at the earliest tomorrow).
 * - The answer is not trusted to have honoured the request: a scope not
 *   asked, a higher role, a later expiry, a revoked token refuse it, and
 *   the session does not start.
 * - At the session's end the token is revoked (DELETE
 *   .../access_tokens/ID): it is worth nothing once the session is over,
 *   whatever its date says.
 * - The exchange is ghapp_https(): the policy's resolvers, the address
 *   checks, the certificate for the API's name, bounded size and time;
 *   the answer is parsed with the wiping allocator.
 *
 * A project access token belongs to one project: the siblings of
 * git.repos are bound by the proxy as always, but the minted token does
 * not reach them (GitLab answers 404 or 401 there).
 */
#include "glmint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ghapp.h"
#include "util.h"

#define ADMIN_TOKEN_FILE_MAX ((size_t)16 * 1024)

void glmint_scope_from_policy(const struct policy *p, time_t now, struct glmint_scope *out)
{
	const struct policy_gitlab_mint *m = p->git_gitlab_mint;
	const char *slash;
	time_t when, tomorrow;
	struct tm tm;

	ASSERT(m && p->session_repo);
	memset(out, 0, sizeof(*out));
	slash = strchr(p->session_repo, '/');
	ASSERT(slash && util_strlcpy(out->project, slash + 1, sizeof(out->project)));
	/* The session's project may always be pushed: write_repository and
	 * the Developer role (the least that pushes; Reporter reads). */
	out->scopes[out->nscopes++] = "read_repository";
	out->scopes[out->nscopes++] = "write_repository";
	out->access_level = GLMINT_DEVELOPER;
	if (p->ngit_api_hosts)
		out->scopes[out->nscopes++] = "api";
	when = now + (time_t)m->expires_minutes * 60;
	tomorrow = now + (time_t)24 * 60 * 60;
	if (when < tomorrow)
		when = tomorrow;
	ASSERT(gmtime_r(&when, &tm));
	/* a token valid until the end of the minutes' day: the next date */
	if (tm.tm_hour || tm.tm_min || tm.tm_sec) {
		when += (time_t)24 * 60 * 60;
		ASSERT(gmtime_r(&when, &tm));
	}
	strftime(out->expires_at, sizeof(out->expires_at), "%Y-%m-%d", &tm);
}

void glmint_token_clear(struct glmint_token *t)
{
	if (!t)
		return;
	if (t->value) {
		explicit_bzero(t->value, t->len);
		free(t->value);
	}
	memset(t, 0, sizeof(*t));
}

char *glmint_admin_token(const struct policy *p, char *err, size_t errlen)
{
	const struct policy_gitlab_mint *m = p->git_gitlab_mint;
	char *v = NULL;
	size_t n;

	ASSERT(m);
	if (m->token_env) {
		const char *e = getenv(m->token_env);

		if (!e || !*e) {
			snprintf(err, errlen, "git.gitlab_mint.token_env: %s is not set", m->token_env);
			return NULL;
		}
		v = util_xstrdup(e);
	} else {
		size_t len = 0;

		v = util_read_file(m->token_file, ADMIN_TOKEN_FILE_MAX, &len);
		if (!v) {
			snprintf(err, errlen, "git.gitlab_mint.token_file %s: %s", m->token_file,
				 strerror(errno));
			return NULL;
		}
		v[strcspn(v, "\r\n")] = '\0';
	}
	n = strlen(v);
	if (!ghapp_token_ok(v, n)) {
		snprintf(err, errlen, "git.gitlab_mint: the group or instance token is not 1 to %d "
				      "visible ASCII characters", GHAPP_TOKEN_MAX);
		explicit_bzero(v, n);
		free(v);
		return NULL;
	}
	return v;
}

static bool asked_scope(const struct glmint_scope *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nscopes; i++)
		if (strcmp(s->scopes[i], name) == 0)
			return true;
	return false;
}

int glmint_check_answer(const struct glmint_scope *asked, unsigned int status,
			const char *content_type, const char *body, size_t len,
			struct glmint_token *out, char *err, size_t errlen)
{
	json_t *root = NULL, *scopes, *el, *tok, *id, *lvl, *exp, *rev;
	const char *ts, *es;
	size_t i, tl;
	struct tm tm;
	int rc = -1;
	struct ghapp_json_alloc saved;

	memset(out, 0, sizeof(*out));
	ghapp_json_wipe_begin(&saved);
	root = ghapp_answer_object(status, content_type, body, len, err, errlen);
	if (!root)
		goto out;
	tok = json_object_get(root, "token");
	ts = json_string_value(tok);
	tl = ts ? json_string_length(tok) : 0;
	if (!ts || !ghapp_token_ok(ts, tl)) {
		snprintf(err, errlen, "the answer has no valid \"token\"");
		goto out;
	}
	id = json_object_get(root, "id");
	if (!json_is_integer(id) || json_integer_value(id) < 1) {
		snprintf(err, errlen, "the answer has no token \"id\" (it could not be revoked)");
		goto out;
	}
	scopes = json_object_get(root, "scopes");
	if (!json_is_array(scopes)) {
		snprintf(err, errlen, "the answer has no \"scopes\"");
		goto out;
	}
	json_array_foreach(scopes, i, el) {
		const char *sc = json_string_value(el);

		if (!sc || !asked_scope(asked, sc)) {
			snprintf(err, errlen, "granted more than asked: scope \"%.40s\"",
				 sc ? sc : "?");
			goto out;
		}
	}
	lvl = json_object_get(root, "access_level");
	if (!json_is_integer(lvl) || json_integer_value(lvl) > asked->access_level) {
		snprintf(err, errlen, "granted more than asked: access_level %lld, asked %d",
			 json_is_integer(lvl) ? (long long)json_integer_value(lvl) : -1LL,
			 asked->access_level);
		goto out;
	}
	exp = json_object_get(root, "expires_at");
	es = json_string_value(exp);
	memset(&tm, 0, sizeof(tm));
	if (!es || strlen(es) != 10 || !strptime(es, "%Y-%m-%d", &tm) ||
	    strcmp(es, asked->expires_at) > 0) {
		snprintf(err, errlen, "the token expires later than asked (%.20s, asked %s)",
			 es ? es : "never", asked->expires_at);
		goto out;
	}
	rev = json_object_get(root, "revoked");
	if (json_is_true(rev) || json_is_false(json_object_get(root, "active"))) {
		snprintf(err, errlen, "the answer's token is revoked or inactive");
		goto out;
	}
	out->value = util_xstrndup(ts, tl);
	out->len = tl;
	out->id = (uint64_t)json_integer_value(id);
	out->expires_at = timegm(&tm);
	out->granted = *asked;
	util_strlcpy(out->granted.expires_at, es, sizeof(out->granted.expires_at));
	out->granted.access_level = (int)json_integer_value(lvl);
	out->granted.nscopes = 0;
	json_array_foreach(scopes, i, el) {
		const char *sc = json_string_value(el);
		size_t k;

		for (k = 0; k < asked->nscopes; k++)
			if (strcmp(asked->scopes[k], sc) == 0 &&
			    out->granted.nscopes < ARRAY_SIZE(out->granted.scopes))
				out->granted.scopes[out->granted.nscopes++] = asked->scopes[k];
	}
	rc = 0;
out:
	json_decref(root);
	ghapp_json_wipe_end(&saved);
	return rc;
}

/* "group%2Fsub%2Fproject": the project's path as GitLab's API names it. */
static void encoded_project(const char *project, char *out, size_t outlen)
{
	size_t at = 0, i;

	for (i = 0; project[i]; i++) {
		ASSERT(at + 4 < outlen);
		if (project[i] == '/') {
			memcpy(out + at, "%2F", 3);
			at += 3;
		} else {
			out[at++] = project[i];
		}
	}
	out[at] = '\0';
}

static char *host_header(const struct policy_gitlab_mint *m)
{
	bool v6 = strchr(m->api_host, ':') != NULL;

	if (m->api_port == 443)
		return util_xasprintf(v6 ? "[%s]" : "%s", m->api_host);
	return util_xasprintf(v6 ? "[%s]:%u" : "%s:%u", m->api_host, (unsigned int)m->api_port);
}

static void wipe_str(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

int glmint_mint(const struct policy *p, const char *admin, const char *session_id,
		struct glmint_token *out, char *err, size_t errlen)
{
	const struct policy_gitlab_mint *m = p->git_gitlab_mint;
	struct glmint_scope asked;
	struct ghapp_reply reply;
	char enc[3 * sizeof(asked.project)], name[80], why[256] = "";
	char *body = NULL, *req = NULL, *host = NULL;
	json_t *scopes, *o;
	size_t i;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&reply, 0, sizeof(reply));
	glmint_scope_from_policy(p, time(NULL), &asked);
	encoded_project(asked.project, enc, sizeof(enc));
	snprintf(name, sizeof(name), "airlock-%.60s", session_id ? session_id : "session");
	for (i = 0; name[i]; i++)
		if (!name_char(name[i]))
			name[i] = '-';
	scopes = json_array();
	for (i = 0; i < asked.nscopes; i++)
		json_array_append_new(scopes, json_string(asked.scopes[i]));
	o = json_pack("{s:s, s:o, s:i, s:s}", "name", name, "scopes", scopes, "access_level",
		      asked.access_level, "expires_at", asked.expires_at);
	ASSERT(o);
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	ASSERT(body);
	host = host_header(m);
	req = util_xasprintf("POST %s/api/v4/projects/%s/access_tokens HTTP/1.1\r\n"
			     "Host: %s\r\n"
			     "Accept: application/json\r\n"
			     "PRIVATE-TOKEN: %s\r\n"
			     "User-Agent: airlock\r\n"
			     "Content-Type: application/json\r\n"
			     "Content-Length: %zu\r\n"
			     "Connection: close\r\n"
			     "\r\n%s",
			     m->api_path, enc, host, admin, strlen(body), body);
	if (ghapp_https(p, m->api_host, m->api_port, m->ca, "git.gitlab_mint.ca", req,
			ghapp_deadline(0), &reply, why, sizeof(why)) != 0)
		goto out;
	if (glmint_check_answer(&asked, reply.status,
				reply.has_content_type ? reply.content_type : NULL, reply.body,
				reply.len, out, why, sizeof(why)) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "project token mint at %s: %s", m->api_host,
			 why[0] ? why : "failed");
	ghapp_reply_free(&reply);
	wipe_str(req);
	free(body);
	free(host);
	return rc;
}

int glmint_revoke(const struct policy *p, const char *admin, const struct glmint_token *t,
		  char *err, size_t errlen)
{
	const struct policy_gitlab_mint *m = p->git_gitlab_mint;
	struct ghapp_reply reply;
	char enc[3 * sizeof(t->granted.project)], why[256] = "";
	char *req, *host;
	int rc = -1;

	memset(&reply, 0, sizeof(reply));
	encoded_project(t->granted.project, enc, sizeof(enc));
	host = host_header(m);
	req = util_xasprintf("DELETE %s/api/v4/projects/%s/access_tokens/%llu HTTP/1.1\r\n"
			     "Host: %s\r\n"
			     "PRIVATE-TOKEN: %s\r\n"
			     "User-Agent: airlock\r\n"
			     "Connection: close\r\n"
			     "\r\n",
			     m->api_path, enc, (unsigned long long)t->id, host, admin);
	if (ghapp_https(p, m->api_host, m->api_port, m->ca, "git.gitlab_mint.ca", req,
			ghapp_deadline(0), &reply, why, sizeof(why)) != 0)
		goto out;
	if (reply.status != 204 && reply.status != 404) {
		snprintf(why, sizeof(why), "the revocation answered HTTP %u", reply.status);
		goto out;
	}
	rc = 0;
out:
	if (rc != 0)
		snprintf(err, errlen, "project token revocation at %s: %s", m->api_host,
			 why[0] ? why : "failed");
	ghapp_reply_free(&reply);
	wipe_str(req);
	free(host);
	return rc;
}

json_t *glmint_subject(const struct policy *p, const struct glmint_scope *asked,
		       const struct glmint_token *t)
{
	const struct glmint_scope *s = t ? &t->granted : asked;
	json_t *sc = json_array(), *o;
	size_t i;

	for (i = 0; i < s->nscopes; i++)
		json_array_append_new(sc, json_string(s->scopes[i]));
	o = json_pack("{s:s, s:s, s:o, s:i, s:s}", "host", p->git_gitlab_mint->api_host, "project",
		      s->project, "scopes", sc, "access_level", s->access_level, "expires_at",
		      s->expires_at);
	ASSERT(o);
	if (t)
		json_object_set_new(o, "token_id", json_integer((json_int_t)t->id));
	return o;
}
