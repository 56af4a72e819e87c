/* SPDX-License-Identifier: Apache-2.0
 * test_oauth.c - OAuth brokered (oauth.c): the policy's `oauth` member and
 * its canonical form, the grant's form body, the token endpoint's answer
 * checked, the refresh schedule. The exchange itself is tested against a
 * stand-in token endpoint in tests/integration/66-secret-oauth.t.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oauth.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

#define NOW ((time_t)1800000000)

static struct policy *parse(const char *json, struct policy_errors *errs)
{
	return policy_parse(json, strlen(json), NULL, errs);
}

static const char *const GOOD =
	"{\"version\":1,\"secrets\":{\"api\":{\"env\":\"API_TOKEN\","
	"\"hosts\":[\"api.example.com\"],\"oauth\":{"
	"\"token_url\":\"https://Auth.Example.com:443/oauth/token\",\"client_id\":\"cli-1\","
	"\"client_secret_from_env\":\"CS\",\"refresh_token_from_env\":\"RT\","
	"\"scope\":\"read write\"}}}}";

/* @from replaced by @to in GOOD: the first error's path and message. */
static void refused(const char *from, const char *to, const char *path, const char *msg)
{
	struct policy_errors errs = { 0 };
	const char *at = strstr(GOOD, from);
	char *json;
	struct policy *p;

	ASSERT(at);
	json = util_xasprintf("%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
	p = parse(json, &errs);
	if (!tap_ok(!p && errs.count > 0 && strcmp(errs.items[0].path, path) == 0 &&
			    strstr(errs.items[0].message, msg) != NULL,
		    "refused at %s: %s", path, msg) &&
	    errs.count)
		tap_diag("got %s: %s", errs.items[0].path, errs.items[0].message);
	policy_free(p);
	policy_errors_free(&errs);
	free(json);
}

static void test_policy(void)
{
	struct policy_errors errs = { 0 };
	struct policy *p;
	const struct policy_oauth *o;

	refused("\"cli-1\"", "\"cli 1\"", "secrets.api.oauth.client_id", "visible ASCII");
	{
		char *json = util_xstrdup(GOOD);

		p = parse(json, &errs);
		tap_ok(p != NULL, "a secret with oauth parses");
		o = p ? p->secrets[0].oauth : NULL;
		tap_is_str(o ? o->token_url : NULL, "https://auth.example.com/oauth/token",
			   "token_url is canonical (host lowercased, :443 dropped)");
		tap_is_str(o ? o->host : NULL, "auth.example.com", "its host");
		tap_is_int(o ? o->port : 0, 443, "its port");
		tap_is_str(o ? o->path : NULL, "/oauth/token", "its path");
		tap_is_str(o ? o->scope : NULL, "read write", "scope");
		tap_ok(p && strstr(p->canonical, "\"oauth\":{") &&
			       strstr(p->canonical, "\"refresh_token_from_env\":\"RT\""),
		       "oauth is in the canonical text");
		policy_free(p);
		policy_errors_free(&errs);
		free(json);
	}
	refused("https://Auth.Example.com:443/oauth/token", "http://auth.example.com/t",
		"secrets.api.oauth.token_url", "https://");
	refused("https://Auth.Example.com:443/oauth/token", "https://auth.example.com",
		"secrets.api.oauth.token_url", "path");
	refused("https://Auth.Example.com:443/oauth/token", "https://u@auth.example.com/t",
		"secrets.api.oauth.token_url", "user-info");
	refused("\"refresh_token_from_env\":\"RT\",", "", "secrets.api.oauth",
		"refresh_token_from_env and refresh_token_from_file is required");
	refused("\"client_secret_from_env\":\"CS\",",
		"\"client_secret_from_env\":\"CS\",\"client_secret_from_file\":\"/x\",",
		"secrets.api.oauth", "not both");
	refused("\"refresh_token_from_env\":\"RT\"", "\"refresh_token_from_env\":\"1RT\"",
		"secrets.api.oauth.refresh_token_from_env", "variable name");
	refused("\"scope\":\"read write\"", "\"scope\":\"a\\nb\"", "secrets.api.oauth.scope",
		"printable");
	refused("\"env\":\"API_TOKEN\",", "", "secrets.api.env", "oauth");
	refused("\"env\":\"API_TOKEN\",", "\"env\":\"API_TOKEN\",\"from_env\":\"X\",",
		"secrets.api", "OAuth secret");
	refused("\"scope\":\"read write\"", "\"scope\":\"r\",\"x\":1", "secrets.api.oauth.x",
		"");
	refused("{\"version\":1,", "{\"version\":1,\"git\":{\"credential\":\"api\"},", "git.credential",
		"OAuth token");
}

static void test_body(void)
{
	struct policy_secret def = { 0 };
	struct policy_oauth o = { 0 };
	struct oauth_secret s = { 0 };
	char *b;

	o.client_id = "cli-1";
	o.scope = "read write";
	def.oauth = &o;
	s.def = &def;
	s.refresh_token = "rt/+=&x";
	s.refresh_token_len = strlen(s.refresh_token);
	s.client_secret = "c s";
	s.client_secret_len = 3;
	b = oauth_request_body(&s);
	tap_is_str(b,
		   "grant_type=refresh_token&refresh_token=rt%2F%2B%3D%26x&client_id=cli-1"
		   "&client_secret=c%20s&scope=read%20write",
		   "the grant's form body, percent-encoded");
	free(b);
	s.client_secret = NULL;
	o.scope = NULL;
	b = oauth_request_body(&s);
	tap_is_str(b, "grant_type=refresh_token&refresh_token=rt%2F%2B%3D%26x&client_id=cli-1",
		   "a public client without scope: neither member");
	free(b);
}

static void answer(unsigned int status, const char *body, int want, const char *what)
{
	char *tok, *rot, err[256] = "";
	size_t tl, rl;
	time_t exp;
	int r = oauth_check_answer(status, body, strlen(body), NOW, &tok, &tl, &exp, &rot, &rl,
				   err, sizeof(err));

	tap_is_int(r, want, "%s%s%s", what, r ? ": " : "", r ? err : "");
	free(tok);
	free(rot);
}

static void test_answer(void)
{
	char *tok, *rot, err[256];
	size_t tl, rl;
	time_t exp;

	const char *good = "{\"access_token\":\"at-1\",\"token_type\":\"bearer\","
			   "\"expires_in\":120,\"refresh_token\":\"rt-2\"}";

	tap_is_int(oauth_check_answer(200, good, strlen(good), NOW, &tok, &tl, &exp, &rot, &rl,
				      err, sizeof(err)),
		   0, "a good answer");
	tap_is_str(tok, "at-1", "... its token");
	tap_is_int(exp, NOW + 120, "... expires_in from now");
	tap_is_str(rot, "rt-2", "... a rotated refresh token");
	free(tok);
	free(rot);
	tap_is_int(oauth_check_answer(200, "{\"access_token\":\"at-1\"}", 23, NOW, &tok, &tl,
				      &exp, &rot, &rl, err, sizeof(err)),
		   0, "no expires_in");
	tap_is_int(exp, NOW + OAUTH_DEFAULT_LIFETIME_S, "... the default lifetime");
	tap_ok(rot == NULL, "... no rotation");
	free(tok);
	tap_is_int(oauth_check_answer(400, "{\"error\":\"invalid_grant\"}", 25, NOW, &tok, &tl,
				      &exp, &rot, &rl, err, sizeof(err)),
		   -1, "an error status is refused");
	tap_is_str(err, "the token endpoint answered HTTP 400: invalid_grant",
		   "... naming the status and error");
	answer(200, "[]", -1, "not an object");
	answer(200, "{\"access_token\":\"\"}", -1, "an empty token");
	answer(200, "{\"access_token\":\"a b\"}", -1, "a token with a space");
	answer(200, "{\"access_token\":\"a\",\"token_type\":\"mac\"}", -1, "token_type mac");
	answer(200, "{\"access_token\":\"a\",\"expires_in\":0}", -1, "expires_in 0");
	answer(200, "{\"access_token\":\"a\",\"expires_in\":\"60\"}", -1, "expires_in a string");
	answer(200, "{\"access_token\":\"a\",\"access_token\":\"b\"}", -1, "a duplicate member");
	answer(200, "{\"access_token\":\"a\",\"refresh_token\":5}", -1, "refresh_token a number");
}

static void test_schedule(void)
{
	tap_is_int(oauth_refresh_at(NOW, NOW + 3600), NOW + 3300,
		   "a one-hour token: refreshed 300 s before expiry");
	tap_is_int(oauth_refresh_at(NOW, NOW + 4), NOW + 2, "a 4 s token: half way");
	tap_is_int(oauth_refresh_at(NOW, NOW + 1), NOW + 1, "a 1 s token: at expiry");
}

int main(void)
{
	test_policy();
	test_body();
	test_answer();
	test_schedule();
	return tap_done();
}
