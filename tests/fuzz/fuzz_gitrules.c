/* SPDX-License-Identifier: Apache-2.0
 * fuzz_gitrules.c - libFuzzer target for gitrules.c.
 *
 * Input layout: "METHOD\nTARGET\nBODY": METHOD and TARGET (a path with an
 * optional "?query") up to their '\n', BODY the rest (an LFS batch body).
 * Missing parts are empty. The request is decided on an SCM host, an API
 * host, and a host serving both (GitHub Enterprise Server), against a
 * policy with a session repository and siblings of each kind.
 *
 * Invariants (abort() on failure, so libFuzzer keeps the input):
 *  - every verdict has a reason of printable ASCII, and a target only
 *    when it allows (or needs the body) on an SCM host;
 *  - deciding the same request twice gives the same verdict;
 *  - an SCM request that is allowed (or needs its body) was written with
 *    only A-Z a-z 0-9 . _ - / in its path, no "." or ".." segment, within
 *    GITRULES_PATH_MAX; its target is "/" + repo + ".git/" + the
 *    operation, lowercase, without "//", and deciding the target itself
 *    gives the same verdict (the normal form is a fixed point);
 *  - an allowed operation's right is one the policy grants on that
 *    repository (policy_git_repo_ops agrees), and never 0;
 *  - an LFS batch is allowed only as download (fetch) or upload (push);
 *  - an API request allowed for a repository names it as
 *    [/api/v3]/repos/OWNER/REPO, and its path holds no "..", "//", "%2F",
 *    "%2E", "%5C", "%25", "%3B" (in any case), ';', or segment of dots
 *    only; and it is none of git.api_admin's (deploy keys, hooks,
 *    collaborators, invitations, transfer, Actions secrets, variables and
 *    runners, environment secrets and variables, Dependabot and
 *    Codespaces secrets, a PATCH of the repository), in any case, escaped
 *    or not: the policy's git.api_allow lists none of them.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "gitrules.h"
#include "policy.h"
#include "util.h"

static struct policy *policy, *gitlab;

static const char *const POLICY_JSON =
	"{\"version\":1,\"session\":{\"repo\":\"git.test/acme/api\"},"
	"\"git\":{\"hosts\":[\"git.test\",\"ghe.test\"],"
	"\"api_hosts\":[\"api.git.test\",\"ghe.test\"],"
	"\"repos\":{\"acme/lib\":[\"fetch\"],\"acme/tools\":[\"fetch\",\"push\"],"
	"\"acme/drop\":[\"push\"],\"ghe.test/acme/ghe\":[\"fetch\"]},"
	"\"api_allow\":[\"/graphql\",\"/api/graphql\"]}}";

/* git.provider "gitlab": nested groups, the encoded-path API. */
static const char *const GITLAB_JSON =
	"{\"version\":1,\"session\":{\"repo\":\"gitlab.test/acme/platform/api\"},"
	"\"git\":{\"provider\":\"gitlab\",\"hosts\":[\"gitlab.test\"],"
	"\"api_hosts\":[\"gitlab.test\"],\"repos\":{\"acme/platform/lib\":[\"fetch\"],"
	"\"acme/tools\":[\"fetch\",\"push\"]},\"project_ids\":{\"123\":\"acme/platform/api\"}}}";

static void init(void)
{
	struct policy_errors errs = { 0 };

	if (policy)
		return;
	policy = policy_parse(POLICY_JSON, strlen(POLICY_JSON), NULL, &errs);
	CHECK(policy);
	policy_errors_free(&errs);
	gitlab = policy_parse(GITLAB_JSON, strlen(GITLAB_JSON), NULL, &errs);
	CHECK(gitlab);
	policy_errors_free(&errs);
}

static void check_common(const struct gitrules_verdict *v)
{
	size_t i;

	CHECK((unsigned int)v->decision < GITRULES_DECISION_COUNT);
	CHECK((unsigned int)v->rule < GITRULES_RULE_COUNT);
	CHECK((unsigned int)v->op < GITRULES_OP_COUNT);
	CHECK(v->reason[0]);
	for (i = 0; v->reason[i]; i++)
		CHECK(v->reason[i] >= 0x20 && v->reason[i] < 0x7f);
	if (v->decision == GITRULES_DENY)
		CHECK(v->target[0] == '\0');
	if (v->decision == GITRULES_ALLOW && v->op != GITRULES_OP_API) {
		CHECK(v->need == POLICY_GIT_FETCH || v->need == POLICY_GIT_PUSH);
		CHECK(v->allowed & v->need);
		CHECK(v->rule == GITRULES_RULE_SESSION_REPO || v->rule == GITRULES_RULE_REPOS);
	}
}

static bool same(const struct gitrules_verdict *a, const struct gitrules_verdict *b)
{
	return a->decision == b->decision && a->rule == b->rule && a->op == b->op &&
	       a->need == b->need && a->allowed == b->allowed &&
	       strcmp(a->repo, b->repo) == 0 && strcmp(a->target, b->target) == 0 &&
	       strcmp(a->reason, b->reason) == 0;
}

static bool has_dot_segment(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t s;

		while (i < n && p[i] == '/')
			i++;
		s = i;
		while (i < n && p[i] != '/')
			i++;
		if ((i - s == 1 && p[s] == '.') || (i - s == 2 && p[s] == '.' && p[s + 1] == '.'))
			return true;
	}
	return false;
}

static bool has_ci(const char *p, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; i + k <= n; i++)
		if (strncasecmp(p + i, needle, k) == 0)
			return true;
	return false;
}

static void check_scm(const struct policy *pol, const char *host,
		      const struct gitrules_request *r, const struct gitrules_verdict *v,
		      const char *body, size_t blen)
{
	struct gitrules_request again;
	struct gitrules_verdict v2;
	char owner[GITRULES_NAME_MAX + 1];
	const char *slash, *q;
	size_t i, plen;

	if (v->decision == GITRULES_DENY)
		return;
	CHECK(r->path.len <= GITRULES_PATH_MAX);
	for (i = 0; i < r->path.len; i++) {
		char c = r->path.ptr[i];

		CHECK(isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' || c == '/');
	}
	CHECK(!has_dot_segment(r->path.ptr, r->path.len));

	/* The target: "/" repo ".git/" rest, lowercase, no "//". */
	CHECK(v->target[0] == '/');
	CHECK(strncmp(v->target + 1, v->repo, strlen(v->repo)) == 0);
	CHECK(strncmp(v->target + 1 + strlen(v->repo), ".git/", 5) == 0);
	q = strchr(v->target, '?');
	plen = q ? (size_t)(q - v->target) : strlen(v->target);
	CHECK(!memmem(v->target, plen, "//", 2));
	CHECK(v->target[plen - 1] != '/');
	for (i = 0; i < plen; i++)
		CHECK(!isupper((unsigned char)v->target[i]));
	CHECK(!has_dot_segment(v->target, plen));

	/* The rights are the policy's. */
	slash = strrchr(v->repo, '/'); /* GitLab: groups nest */
	CHECK(slash && (size_t)(slash - v->repo) <= GITRULES_NAME_MAX);
	memcpy(owner, v->repo, (size_t)(slash - v->repo));
	owner[slash - v->repo] = '\0';
	CHECK(policy_git_repo_ops(pol, host, owner, slash + 1) == v->allowed);
	CHECK(!memmem(v->target, plen, "/-/", 3)); /* GitLab's routes; the query may say anything */

	/* A fixed point. */
	again = *r;
	again.path.ptr = v->target;
	again.path.len = plen;
	again.has_query = q != NULL;
	again.query.ptr = q ? q + 1 : NULL;
	again.query.len = q ? strlen(q + 1) : 0;
	gitrules_decide_scm(pol, host, &again, &v2);
	CHECK(same(v, &v2));

	if (v->decision == GITRULES_NEED_BODY) {
		struct gitrules_verdict b = *v;

		gitrules_decide_lfs_batch(&b, body, blen);
		check_common(&b);
		if (b.decision == GITRULES_ALLOW) {
			CHECK((b.op == GITRULES_OP_LFS_DOWNLOAD && b.need == POLICY_GIT_FETCH) ||
			      (b.op == GITRULES_OP_LFS_UPLOAD && b.need == POLICY_GIT_PUSH));
			CHECK(strcmp(b.target, v->target) == 0);
		} else {
			CHECK(b.decision == GITRULES_DENY);
		}
	}
}

/* A segment of '.' and ' ' only, with a '.', raw. */
static bool has_dots_only_segment(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t s;
		bool dot = false, only = true;

		while (i < n && p[i] == '/')
			i++;
		s = i;
		while (i < n && p[i] != '/') {
			if (p[i] == '.')
				dot = true;
			else if (p[i] != ' ')
				only = false;
			i++;
		}
		if (i > s && dot && only)
			return true;
	}
	return false;
}

/* The first segment of @rest ("/SEG/..." after OWNER/REPO), decoded of
 * letter escapes, lowercased, into @out; false when it is not there. */
static bool first_seg(const char *rest, size_t n, size_t skip, char *out, size_t size)
{
	size_t i = 0, o = 0, k;

	for (k = 0; k <= skip; k++) {
		if (i >= n || rest[i] != '/')
			return false;
		i++;
		o = 0;
		while (i < n && rest[i] != '/') {
			char c = rest[i];

			if (c == '%' && i + 2 < n && isxdigit((unsigned char)rest[i + 1]) &&
			    isxdigit((unsigned char)rest[i + 2])) {
				char hex[3] = { rest[i + 1], rest[i + 2], 0 };

				c = (char)strtol(hex, NULL, 16);
				i += 2;
			}
			if (o + 1 < size)
				out[o++] = (char)tolower((unsigned char)c);
			i++;
		}
	}
	out[o] = '\0';
	return o > 0;
}

static bool admin_path(const char *rest, size_t n, struct http_slice method)
{
	static const char *const one[] = { "keys", "hooks", "collaborators", "invitations",
					   "transfer" };
	char s0[64], s1[64], s2[64];
	size_t i;

	if (!first_seg(rest, n, 0, s0, sizeof(s0)))
		return method.len == 5 && memcmp(method.ptr, "PATCH", 5) == 0;
	for (i = 0; i < ARRAY_SIZE(one); i++)
		if (strcmp(s0, one[i]) == 0)
			return true;
	if (!first_seg(rest, n, 1, s1, sizeof(s1)))
		return false;
	if (strcmp(s0, "actions") == 0 &&
	    (!strcmp(s1, "secrets") || !strcmp(s1, "variables") || !strcmp(s1, "runners")))
		return true;
	if ((strcmp(s0, "dependabot") == 0 || strcmp(s0, "codespaces") == 0) &&
	    !strcmp(s1, "secrets"))
		return true;
	if (strcmp(s0, "environments") == 0 && first_seg(rest, n, 2, s2, sizeof(s2)) &&
	    (!strcmp(s2, "secrets") || !strcmp(s2, "variables")))
		return true;
	return false;
}

static void check_api(const struct gitrules_request *r, const struct gitrules_verdict *v)
{
	const char *p = r->path.ptr;
	size_t n = r->path.len, base = 0, rest;

	CHECK(v->target[0] == '\0');
	CHECK(v->decision != GITRULES_NEED_BODY);
	if (v->decision != GITRULES_ALLOW)
		return;
	CHECK(n <= GITRULES_API_PATH_MAX);
	CHECK(!has_dot_segment(p, n));
	CHECK(!memmem(p, n, "//", 2) && !memchr(p, '\\', n));
	CHECK(!has_ci(p, n, "%2f") && !has_ci(p, n, "%2e") && !has_ci(p, n, "%5c") &&
	      !has_ci(p, n, "%25") && !has_ci(p, n, "%3b") && !memchr(p, ';', n));
	CHECK(!has_dots_only_segment(p, n));
	if (v->op == GITRULES_OP_API)
		return;
	if (n >= 8 && memcmp(p, "/api/v3/", 8) == 0)
		base = 7;
	CHECK(n - base > 7 && memcmp(p + base, "/repos/", 7) == 0);
	CHECK(strncasecmp(p + base + 7, v->repo, strlen(v->repo)) == 0);
	CHECK(n - base - 7 == strlen(v->repo) || p[base + 7 + strlen(v->repo)] == '/');
	/* git.api_admin: none of these is allowed but by git.api_allow (the
	 * policy lists none), in any case, escaped or not */
	rest = base + 7 + strlen(v->repo);
	CHECK(!admin_path(p + rest, n - rest, r->method));
}

/* GitLab's API: an allowed project request names, in its one ID
 * segment, the verdict's project -- its path with only %2F escapes,
 * decoded once, or the one mapped id -- and never an admin endpoint. */
static void check_gitlab_api(const struct gitrules_request *r, const struct gitrules_verdict *v)
{
	static const char pre[] = "/api/v4/projects/";
	const char *p = r->path.ptr, *id, *e;
	size_t n = r->path.len, idn, i, pl = sizeof(pre) - 1;
	bool digits = true;

	CHECK(v->target[0] == '\0');
	if (v->decision != GITRULES_ALLOW)
		return;
	CHECK(n > pl && memcmp(p, pre, pl) == 0);
	CHECK(!has_dot_segment(p, n) && !has_dots_only_segment(p, n));
	CHECK(!has_ci(p, n, "%25") && !has_ci(p, n, "%2e") && !memchr(p, ';', n));
	id = p + pl;
	e = memchr(id, '/', n - pl);
	idn = e ? (size_t)(e - id) : n - pl;
	for (i = 0; i < idn; i++)
		digits = digits && isdigit((unsigned char)id[i]);
	if (digits) {
		CHECK(idn == 3 && memcmp(id, "123", 3) == 0 &&
		      strcmp(v->repo, "acme/platform/api") == 0);
	} else {
		char dec[GITRULES_API_PATH_MAX + 1];
		size_t at = 0;

		for (i = 0; i < idn; i++) {
			if (id[i] == '%') {
				CHECK(i + 2 < idn && id[i + 1] == '2' && (id[i + 2] | 0x20) == 'f');
				dec[at++] = '/';
				i += 2;
			} else {
				dec[at++] = (char)tolower((unsigned char)id[i]);
			}
		}
		dec[at] = '\0';
		CHECK(strcmp(dec, v->repo) == 0);
	}
	if (e) {
		char s0[64];

		if (first_seg(e, n - (size_t)(e - p), 0, s0, sizeof(s0)))
			CHECK(strcmp(s0, "access_tokens") && strcmp(s0, "deploy_tokens") &&
			      strcmp(s0, "deploy_keys") && strcmp(s0, "variables") &&
			      strcmp(s0, "hooks") && strcmp(s0, "members") && strcmp(s0, "share") &&
			      strcmp(s0, "transfer") && strcmp(s0, "runners") &&
			      strcmp(s0, "invitations"));
	} else {
		CHECK(!(r->method.len == 3 && memcmp(r->method.ptr, "PUT", 3) == 0));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const hosts[] = { "git.test", "api.git.test", "ghe.test" };
	const char *s = (const char *)data, *end = s + size, *nl, *q;
	struct gitrules_request r;
	size_t i;

	init();
	memset(&r, 0, sizeof(r));
	nl = memchr(s, '\n', size);
	r.method.ptr = s;
	r.method.len = nl ? (size_t)(nl - s) : size;
	s = nl ? nl + 1 : end;
	nl = memchr(s, '\n', (size_t)(end - s));
	r.path.ptr = s;
	r.path.len = nl ? (size_t)(nl - s) : (size_t)(end - s);
	q = memchr(r.path.ptr, '?', r.path.len);
	if (q) {
		r.has_query = true;
		r.query.ptr = q + 1;
		r.query.len = r.path.len - (size_t)(q + 1 - r.path.ptr);
		r.path.len = (size_t)(q - r.path.ptr);
	}
	s = nl ? nl + 1 : end;

	for (i = 0; i < ARRAY_SIZE(hosts); i++) {
		struct gitrules_verdict a, b;
		unsigned int kind = gitrules_host_kind(policy, hosts[i]);

		gitrules_decide_http(policy, hosts[i], &r, &a);
		gitrules_decide_http(policy, hosts[i], &r, &b);
		check_common(&a);
		CHECK(same(&a, &b));
		if (a.target[0] || a.decision == GITRULES_NEED_BODY)
			check_scm(policy, hosts[i], &r, &a, s, (size_t)(end - s));
		else if (kind & GITRULES_HOST_API)
			check_api(&r, &a);

		gitrules_decide_scm(policy, hosts[i], &r, &a);
		check_common(&a);
		if (kind & GITRULES_HOST_SCM)
			check_scm(policy, hosts[i], &r, &a, s, (size_t)(end - s));
		else
			CHECK(a.decision == GITRULES_DENY && a.rule == GITRULES_RULE_HOST);
		gitrules_decide_api(policy, hosts[i], &r, &a);
		check_common(&a);
		if (kind & GITRULES_HOST_API)
			check_api(&r, &a);
		else
			CHECK(a.decision == GITRULES_DENY && a.rule == GITRULES_RULE_HOST);
	}
	{
		struct gitrules_verdict a, b;

		gitrules_decide_http(gitlab, "gitlab.test", &r, &a);
		gitrules_decide_http(gitlab, "gitlab.test", &r, &b);
		check_common(&a);
		CHECK(same(&a, &b));
		if (r.path.len >= 5 && memcmp(r.path.ptr, "/api/", 5) == 0)
			check_gitlab_api(&r, &a);
		else
			check_scm(gitlab, "gitlab.test", &r, &a, s, (size_t)(end - s));
	}
	return 0;
}
