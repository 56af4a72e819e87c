/* SPDX-License-Identifier: Apache-2.0
 * test_glmint.c - the GitLab project token mint (git.gitlab_mint): the
 * scope asked for, and which answers are accepted.
 */
#include <stdlib.h>
#include <string.h>

#include "glmint.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	if (!p)
		tap_diag("policy: %s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

#define POLICY(api_hosts, minutes)                                                           \
	"{\"version\":1,\"session\":{\"repo\":\"gitlab.test/acme/platform/api\"},"            \
	"\"git\":{\"provider\":\"gitlab\",\"hosts\":[\"gitlab.test\"],\"api_hosts\":" api_hosts \
	",\"gitlab_mint\":{\"token_env\":\"GL_ADMIN\",\"expires_minutes\":" minutes "}}}"

/* 2026-12-07T17:00:00Z */
#define NOW ((time_t)1796662800)

static void test_scope(void)
{
	struct glmint_scope s;
	struct policy *p = load(POLICY("[\"gitlab.test\"]", "90"));

	glmint_scope_from_policy(p, NOW, &s);
	tap_is_str(s.project, "acme/platform/api", "scope: the session's project, nested");
	tap_ok(s.nscopes == 3 && strcmp(s.scopes[0], "read_repository") == 0 &&
		       strcmp(s.scopes[1], "write_repository") == 0 &&
		       strcmp(s.scopes[2], "api") == 0,
	       "scope: read/write_repository, api with an API host");
	tap_is_int(s.access_level, GLMINT_DEVELOPER, "scope: Developer");
	tap_is_str(s.expires_at, "2026-12-09", "scope: 90 minutes: at the earliest tomorrow, rounded up to a date");
	policy_free(p);
	p = load(POLICY("[]", "4320"));
	glmint_scope_from_policy(p, NOW, &s);
	tap_ok(s.nscopes == 2, "scope: no api scope without an API host");
	tap_is_str(s.expires_at, "2026-12-11", "scope: three days, rounded up");
	policy_free(p);
}

static const char *const ANSWER_OK =
	"{\"id\":42,\"name\":\"airlock-s\",\"scopes\":[\"read_repository\",\"write_repository\"],"
	"\"access_level\":30,\"expires_at\":\"2026-12-09\",\"token\":\"glpat-abcdef\","
	"\"active\":true,\"revoked\":false}";

static void test_answer(void)
{
	struct policy *p = load(POLICY("[]", "90"));
	struct glmint_scope s;
	struct glmint_token t;
	char err[256];
	static const struct {
		unsigned int status;
		const char *ct, *body, *why;
	} bad[] = {
		{ 401, "application/json", "{\"message\":\"401 Unauthorized\"}", "HTTP 401: 401 Unauthorized" },
		{ 201, "text/html", "{}", "not application/json" },
		{ 201, "application/json", "[1]", "not a JSON object" },
		{ 201, "application/json", "{\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-09\"}",
		  "no valid \"token\"" },
		{ 201, "application/json", "{\"token\":\"a b\",\"id\":1}", "no valid \"token\"" },
		{ 201, "application/json", "{\"token\":\"t\",\"scopes\":[]}", "no token \"id\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[\"read_repository\",\"sudo\"],\"access_level\":30,"
		  "\"expires_at\":\"2026-12-09\"}", "scope \"sudo\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[\"api\"],\"access_level\":30,"
		  "\"expires_at\":\"2026-12-09\"}", "scope \"api\"" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":40,\"expires_at\":\"2026-12-09\"}",
		  "access_level 40" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-10\"}",
		  "later than asked" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":null}",
		  "later than asked" },
		{ 201, "application/json",
		  "{\"token\":\"t\",\"id\":1,\"scopes\":[],\"access_level\":30,\"expires_at\":\"2026-12-09\","
		  "\"revoked\":true}", "revoked" },
	};
	size_t i;

	glmint_scope_from_policy(p, NOW, &s);
	tap_is_int(glmint_check_answer(&s, 201, "application/json; charset=utf-8", ANSWER_OK,
				       strlen(ANSWER_OK), &t, err, sizeof(err)),
		   0, "answer: the exact grant is accepted");
	tap_ok(t.value && strcmp(t.value, "glpat-abcdef") == 0 && t.len == 12 && t.id == 42 &&
		       t.granted.nscopes == 2 && t.granted.access_level == 30 &&
		       t.expires_at == (time_t)1796774400,
	       "answer: token, id, scopes, role, expiry");
	glmint_token_clear(&t);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = glmint_check_answer(&s, bad[i].status, bad[i].ct, bad[i].body,
					     strlen(bad[i].body), &t, err, sizeof(err));

		tap_ok(rc == -1 && strstr(err, bad[i].why) && !t.value && !strstr(err, "glpat"),
		       "answer refused: %s (%s)", bad[i].why, err);
	}
	policy_free(p);
}

int main(void)
{
	test_scope();
	test_answer();
	return tap_done();
}
