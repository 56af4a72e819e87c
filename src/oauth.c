/* SPDX-License-Identifier: Apache-2.0
 * oauth.c - OAuth access tokens brokered by the supervisor (see oauth.h).
 *
 * DOC: Theory of Operation
 *
 * A secret with `oauth` has no value of its own: its value is an access
 * token that the supervisor obtains with the refresh_token grant at the
 * token endpoint, over the HTTPS client of the GitHub App mint
 * (ghapp_https(): resolved through egress.resolver, addresses checked,
 * certificate verified against the system store plus egress.upstream_ca),
 * never through the sandbox or the proxy. The client secret and the
 * refresh token are read from the supervisor's environment or files,
 * which the sandbox never gets (env.c drops the variables, the files are
 * masked). The agent holds one placeholder, made at start and kept for
 * the session; each token is handed to every proxy worker behind it as a
 * captured value is (MSG_CAPTURE), the newest in force. A refresh comes
 * before expiry (expires_in, less a margin) and once after a bound host
 * answered 401 to the token in force. A refresh that fails leaves the
 * token in force until it expires (after a 401, it ends at once): then a
 * request with the placeholder is answered 502 (fail closed). Each
 * refresh is a secret.refresh receipt (secret, why, expires_at), never a
 * value.
 */
#include "oauth.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "ghapp.h"
#include "receipt.h"
#include "util.h"

extern char **environ;

static void wipe(char **p, size_t *len)
{
	if (*p) {
		explicit_bzero(*p, *len);
		free(*p);
	}
	*p = NULL;
	*len = 0;
}

/* A credential from the environment or a file (one trailing newline is
 * the file's). NULL with @err. */
static char *read_cred(const char *env, const char *file, const char *what,
		       const char *secret, size_t *len, char *err, size_t errlen)
{
	char *v;
	size_t i;

	if (env) {
		const char *e = getenv(env);

		if (!e || !*e) {
			snprintf(err, errlen, "secret %s: %s variable %s is not set", secret, what,
				 env);
			return NULL;
		}
		v = util_xstrdup(e);
		*len = strlen(e);
	} else {
		v = util_read_file(file, BROKER_VALUE_MAX, len);
		if (!v) {
			snprintf(err, errlen, "secret %s: cannot read the %s file %s: %s", secret,
				 what, file, strerror(errno));
			return NULL;
		}
		if (*len > 0 && v[*len - 1] == '\n')
			v[--*len] = '\0';
		if (*len > 0 && v[*len - 1] == '\r')
			v[--*len] = '\0';
	}
	for (i = 0; i < *len; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] == 0x7f)
			break;
	if (*len == 0 || i < *len) {
		snprintf(err, errlen, "secret %s: the %s is empty or holds a control character",
			 secret, what);
		wipe(&v, len);
		return NULL;
	}
	return v;
}

/* application/x-www-form-urlencoded: unreserved bytes as they are. */
static void form_put(char **out, size_t *olen, const char *name, const char *v, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, need = *olen + strlen(name) + 2 + 3 * n + 1;
	char *o = util_xmalloc(need), *p;

	memcpy(o, *out, *olen);
	p = o + *olen;
	if (*olen)
		*p++ = '&';
	p += sprintf(p, "%s=", name);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	explicit_bzero(*out, *olen);
	free(*out);
	*out = o;
	*olen = (size_t)(p - o);
}

char *oauth_request_body(const struct oauth_secret *s)
{
	const struct policy_oauth *a = s->def->oauth;
	char *out = util_xstrdup("");
	size_t len = 0;

	form_put(&out, &len, "grant_type", "refresh_token", strlen("refresh_token"));
	form_put(&out, &len, "refresh_token", s->refresh_token, s->refresh_token_len);
	form_put(&out, &len, "client_id", a->client_id, strlen(a->client_id));
	if (s->client_secret)
		form_put(&out, &len, "client_secret", s->client_secret, s->client_secret_len);
	if (a->scope)
		form_put(&out, &len, "scope", a->scope, strlen(a->scope));
	return out;
}

static bool visible(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return n > 0;
}

int oauth_check_answer(unsigned int status, const char *body, size_t len, time_t now,
		       char **token, size_t *token_len, time_t *expires_at, char **rotated,
		       size_t *rotated_len, char *err, size_t errlen)
{
	struct ghapp_json_alloc saved;
	json_t *root, *at, *tt, *ei, *rt, *e;
	int rc = -1;

	*token = *rotated = NULL;
	*token_len = *rotated_len = 0;
	*expires_at = 0;
	ghapp_json_wipe_begin(&saved);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (status != 200) {
		e = json_is_object(root) ? json_object_get(root, "error") : NULL;
		snprintf(err, errlen, "the token endpoint answered HTTP %u%s%.64s", status,
			 json_is_string(e) && visible(json_string_value(e),
						      json_string_length(e))
				 ? ": "
				 : "",
			 json_is_string(e) && visible(json_string_value(e), json_string_length(e))
				 ? json_string_value(e)
				 : "");
		goto out;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "the token endpoint's answer is not a JSON object");
		goto out;
	}
	at = json_object_get(root, "access_token");
	tt = json_object_get(root, "token_type");
	ei = json_object_get(root, "expires_in");
	rt = json_object_get(root, "refresh_token");
	if (!json_is_string(at) || json_string_length(at) > OAUTH_TOKEN_MAX ||
	    !visible(json_string_value(at), json_string_length(at))) {
		snprintf(err, errlen, "the answer has no access_token of 1 to %d visible "
				      "characters", OAUTH_TOKEN_MAX);
		goto out;
	}
	if (tt && (!json_is_string(tt) || strcasecmp(json_string_value(tt), "bearer") != 0)) {
		snprintf(err, errlen, "the answer's token_type is not Bearer");
		goto out;
	}
	if (ei && (!json_is_number(ei) || json_number_value(ei) < 1 ||
		   json_number_value(ei) > 1e8)) {
		snprintf(err, errlen, "the answer's expires_in is not a number of seconds");
		goto out;
	}
	if (rt && (!json_is_string(rt) || json_string_length(rt) > BROKER_VALUE_MAX ||
		   !visible(json_string_value(rt), json_string_length(rt)))) {
		snprintf(err, errlen, "the answer's refresh_token is not a token");
		goto out;
	}
	*token_len = json_string_length(at);
	*token = util_xstrndup(json_string_value(at), *token_len);
	*expires_at = now + (ei ? (time_t)json_number_value(ei) : OAUTH_DEFAULT_LIFETIME_S);
	if (rt) {
		*rotated_len = json_string_length(rt);
		*rotated = util_xstrndup(json_string_value(rt), *rotated_len);
	}
	rc = 0;
out:
	json_decref(root);
	ghapp_json_wipe_end(&saved);
	return rc;
}

time_t oauth_refresh_at(time_t now, time_t expires_at)
{
	time_t life = expires_at - now, margin = OAUTH_REFRESH_MARGIN_S;
	unsigned int test = util_test_ms("oauth_refresh_margin", UINT_MAX);

	if (test != UINT_MAX)
		margin = (time_t)(test / 1000);
	if (margin > life / 2)
		margin = life / 2;
	return expires_at - margin;
}

/* One refresh_token grant: 0 with s->value, s->expires_at (and a rotated
 * refresh token) replaced, or -1 with @err. */
static int grant(const struct policy *p, struct oauth_secret *s, char *err, size_t errlen)
{
	const struct policy_oauth *a = s->def->oauth;
	struct ghapp_reply ans;
	char *body = oauth_request_body(s), *req, host[300], why[256] = "";
	char *tok, *rot;
	size_t tlen, rlen;
	time_t exp;
	int rc = -1;

	if (a->port == 443)
		snprintf(host, sizeof(host), strchr(a->host, ':') ? "[%s]" : "%s", a->host);
	else
		snprintf(host, sizeof(host), strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host,
			 (unsigned int)a->port);
	req = util_xasprintf("POST %s HTTP/1.1\r\n"
			     "Host: %s\r\n"
			     "Accept: application/json\r\n"
			     "User-Agent: airlock\r\n"
			     "Content-Type: application/x-www-form-urlencoded\r\n"
			     "Content-Length: %zu\r\n"
			     "Connection: close\r\n"
			     "\r\n%s",
			     a->path, host, strlen(body), body);
	explicit_bzero(body, strlen(body));
	free(body);
	if (ghapp_https(p, a->host, a->port, NULL, "egress.upstream_ca", req,
			ghapp_deadline(0), &ans, why, sizeof(why)) == 0 &&
	    oauth_check_answer(ans.status, ans.body, ans.len, time(NULL), &tok, &tlen, &exp,
			       &rot, &rlen, why, sizeof(why)) == 0) {
		wipe(&s->value, &s->len);
		s->value = tok;
		s->len = tlen;
		s->expires_at = exp;
		if (rot) {
			wipe(&s->refresh_token, &s->refresh_token_len);
			s->refresh_token = rot;
			s->refresh_token_len = rlen;
		}
		s->next = oauth_refresh_at(time(NULL), exp);
		rc = 0;
	} else {
		snprintf(err, errlen, "token refresh at %s: %s", a->host, why[0] ? why : "failed");
	}
	ghapp_reply_free(&ans);
	explicit_bzero(req, strlen(req));
	free(req);
	return rc;
}

static json_t *refresh_subject(const struct oauth_secret *s, const char *why)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "secret", s->def->name, "why", why,
			      "token_url", s->def->oauth->token_url);
	char t[32];
	struct tm tm;

	if (s->value && s->expires_at > 1 && gmtime_r(&s->expires_at, &tm) &&
	    strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm))
		json_object_set_new(j, "expires_at", json_string(t));
	return j;
}

static void rule_of(const struct oauth_secret *s, char *rule, size_t len)
{
	snprintf(rule, len, "secrets.%s.oauth", s->def->name);
}

void oauth_start(struct session *s, const struct policy *p, struct oauth *o)
{
	char err[512] = "", rule[200];
	size_t i;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < p->nsecrets; i++)
		o->n += p->secrets[i].oauth != NULL;
	if (!o->n)
		return;
	o->s = util_xcalloc(o->n, sizeof(*o->s));
	o->n = 0;
	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_oauth *a = p->secrets[i].oauth;
		struct oauth_secret *x;

		if (!a)
			continue;
		x = &o->s[o->n++];
		x->def = &p->secrets[i];
		rule_of(x, rule, sizeof(rule));
		if (a->client_secret_from_env || a->client_secret_from_file) {
			x->client_secret = read_cred(a->client_secret_from_env,
						     a->client_secret_from_file, "client secret",
						     x->def->name, &x->client_secret_len, err,
						     sizeof(err));
			if (!x->client_secret)
				session_refuse(s, rule, err);
		}
		x->refresh_token = read_cred(a->refresh_token_from_env, a->refresh_token_from_file,
					     "refresh token", x->def->name,
					     &x->refresh_token_len, err, sizeof(err));
		if (!x->refresh_token || grant(p, x, err, sizeof(err)) != 0)
			session_refuse(s, rule, err);
		/* shaped like the first token, kept for the session */
		x->ph = broker_placeholder_make(x->def->prefix, x->value, x->len, &x->phlen, err,
						sizeof(err));
		if (!x->ph)
			session_refuse(s, rule, err);
	}
}

void oauth_record(struct session *s, const struct oauth *o)
{
	char rule[200];
	size_t i;

	for (i = 0; i < o->n; i++) {
		rule_of(&o->s[i], rule, sizeof(rule));
		session_record(s, "secret.refresh", RECEIPT_ALLOW, RECEIPT_POINT_BROKER, rule,
			       refresh_subject(&o->s[i], "start"),
			       "OAuth access token obtained outside the sandbox");
	}
}

void oauth_env(const struct oauth *o, struct env_result *env)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		env_result_set(env, o->s[i].def->env, o->s[i].ph);
}

char *oauth_placeholders_text(const struct oauth *o)
{
	char *text = util_xstrdup(""), *next;
	size_t i;

	for (i = 0; i < o->n; i++) {
		next = util_xasprintf("%s%s=%s\n", text, o->s[i].def->env, o->s[i].ph);
		free(text);
		text = next;
	}
	return text;
}

static int send_one(const struct oauth_secret *x, struct worker_pool *wp)
{
	return worker_pool_value(wp, x->def->name, x->expires_at, x->ph, x->phlen, x->value,
				 x->len);
}

int oauth_send(const struct oauth *o, struct worker_pool *wp)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < o->n; i++) {
		int r = send_one(&o->s[i], wp);

		if (r < 0)
			rc = r;
	}
	return rc;
}

time_t oauth_next(const struct oauth *o)
{
	time_t t = 0;
	size_t i;

	for (i = 0; i < o->n; i++)
		if (o->s[i].next && (!t || o->s[i].next < t))
			t = o->s[i].next;
	return t;
}

/* Refreshes @x for @why ("expiry", "401"); records it either way. */
static void refresh(struct session *s, const struct policy *p, struct oauth_secret *x,
		    struct worker_pool *wp, const char *why)
{
	char err[512] = "", rule[200];
	time_t now = time(NULL), retry;

	rule_of(x, rule, sizeof(rule));
	if (grant(p, x, err, sizeof(err)) == 0) {
		if (send_one(x, wp) < 0)
			util_warn("the refreshed OAuth token of %s could not reach every proxy "
				  "worker", x->def->name);
		session_record(s, "secret.refresh", RECEIPT_ALLOW, RECEIPT_POINT_BROKER, rule,
			       refresh_subject(x, why),
			       strcmp(why, "401") == 0
				       ? "OAuth access token refreshed after a 401 from a bound "
					 "host"
				       : "OAuth access token refreshed before expiry");
		return;
	}
	if (strcmp(why, "401") == 0 && x->value) {
		/* the token was refused upstream: it ends now (fail closed) */
		x->expires_at = 1;
		if (send_one(x, wp) < 0)
			util_warn("the end of the OAuth token of %s could not reach every proxy "
				  "worker", x->def->name);
	}
	retry = OAUTH_RETRY_S;
	if (x->expires_at > now && (x->expires_at - now) / 2 < retry)
		retry = (x->expires_at - now) / 2;
	x->next = now + (retry > 0 ? retry : 1);
	session_record(s, "secret.refresh", RECEIPT_BLOCK, RECEIPT_POINT_BROKER, rule,
		       refresh_subject(x, why), err);
}

void oauth_refresh_due(struct session *s, const struct policy *p, struct oauth *o,
		       struct worker_pool *wp)
{
	time_t now = time(NULL);
	size_t i;

	for (i = 0; i < o->n; i++)
		if (o->s[i].next && o->s[i].next <= now)
			refresh(s, p, &o->s[i], wp, "expiry");
}

void oauth_on_401(void *arg, const char *secret, const void *value, size_t len)
{
	struct oauth_ctx *c = arg;
	size_t i;

	for (i = 0; i < c->o->n; i++) {
		struct oauth_secret *x = &c->o->s[i];

		/* only the token in force: a 401 to an older one was
		 * answered by a refresh already */
		if (strcmp(x->def->name, secret) == 0 && x->value && x->expires_at > 1 &&
		    x->len == len && memcmp(x->value, value, len) == 0)
			refresh(c->s, c->p, x, c->wp, "401");
	}
}

bool oauth_env_owned(const struct policy *p, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_oauth *a = p->secrets[i].oauth;
		const char *e1 = a ? a->client_secret_from_env : NULL;
		const char *e2 = a ? a->refresh_token_from_env : NULL;

		if ((e1 && strlen(e1) == len && memcmp(e1, name, len) == 0) ||
		    (e2 && strlen(e2) == len && memcmp(e2, name, len) == 0))
			return true;
	}
	return false;
}

static void oauth_scrub_environ_one(const struct policy_oauth *a)
{
	const char *names[2] = { a->client_secret_from_env, a->refresh_token_from_env };
	size_t i;
	char **e;

	for (i = 0; i < 2; i++) {
		size_t n = names[i] ? strlen(names[i]) : 0;

		for (e = environ; n && e && *e; e++)
			if (strncmp(*e, names[i], n) == 0 && (*e)[n] == '=')
				explicit_bzero(*e + n + 1, strlen(*e + n + 1));
	}
}

void oauth_scrub_environ(const struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++)
		if (p->secrets[i].oauth)
			oauth_scrub_environ_one(p->secrets[i].oauth);
}

void oauth_forget(void *arg)
{
	struct oauth *o = arg;
	size_t i;

	for (i = 0; i < o->n; i++) {
		wipe(&o->s[i].client_secret, &o->s[i].client_secret_len);
		wipe(&o->s[i].refresh_token, &o->s[i].refresh_token_len);
		if (o->s[i].def)
			oauth_scrub_environ_one(o->s[i].def->oauth);
	}
}

void oauth_free(struct oauth *o)
{
	size_t i;

	for (i = 0; i < o->n; i++) {
		struct oauth_secret *x = &o->s[i];

		wipe(&x->client_secret, &x->client_secret_len);
		wipe(&x->refresh_token, &x->refresh_token_len);
		wipe(&x->value, &x->len);
		free(x->ph);
	}
	free(o->s);
	memset(o, 0, sizeof(*o));
}
