/* SPDX-License-Identifier: Apache-2.0
 * test_gitrules.c - the git binding's decisions: smart-HTTP and LFS paths
 * on git.hosts, LFS batch bodies, REST paths on git.api_hosts, SSH.
 */
#include <stdlib.h>
#include <string.h>

#include "gitrules.h"
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

static const char *const POLICY =
	"{\"version\":1,\"session\":{\"repo\":\"git.test/acme/api\"},"
	"\"git\":{\"hosts\":[\"git.test\",\"git2.test\"],"
	"\"api_hosts\":[\"api.git.test\"],"
	"\"repos\":{\"acme/shared-lib\":[\"fetch\"],\"acme/tools\":[\"fetch\",\"push\"],"
	"\"other/pushonly\":[\"push\"],\"git2.test/acme/onlythere\":[\"fetch\"]},"
	"\"api_allow\":[\"/graphql\",\"/user\"]}}";

#define OID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A path with explicit length (NUL bytes inside) when len != 0. */
struct scm_case {
	const char *host;
	const char *method;
	const char *path;
	size_t len;
	const char *query; /* NULL: no '?' */
	const char *decision;
	const char *rule;
	const char *op;
	const char *repo;
	const char *target;
};

static const struct scm_case scm_cases[] = {
	/* The four smart-HTTP requests of the session repository. */
	{ "git.test", "GET", "/acme/api.git/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "acme/api",
	  "/acme/api.git/info/refs?service=git-upload-pack" },
	{ "git.test", "GET", "/acme/api/info/refs", 0, "service=git-receive-pack",
	  "allow", "session.repo", "push", "acme/api",
	  "/acme/api.git/info/refs?service=git-receive-pack" },
	{ "git.test", "POST", "/acme/api.git/git-upload-pack", 0, NULL,
	  "allow", "session.repo", "fetch", "acme/api", "/acme/api.git/git-upload-pack" },
	{ "git.test", "POST", "/acme/api.git/git-receive-pack", 0, NULL,
	  "allow", "session.repo", "push", "acme/api", "/acme/api.git/git-receive-pack" },
	/* Spellings that normalise: case, ".git", "//", a trailing '/'. */
	{ "git.test", "GET", "/ACME/API.git/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "acme/api",
	  "/acme/api.git/info/refs?service=git-upload-pack" },
	{ "git.test", "GET", "/acme/API.GIT/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "acme/api",
	  "/acme/api.git/info/refs?service=git-upload-pack" },
	{ "git.test", "GET", "//acme/api/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "acme/api",
	  "/acme/api.git/info/refs?service=git-upload-pack" },
	{ "git.test", "POST", "/acme//api.git///git-upload-pack/", 0, NULL,
	  "allow", "session.repo", "fetch", "acme/api", "/acme/api.git/git-upload-pack" },
	{ "GIT.test.", "POST", "/acme/api/git-upload-pack", 0, NULL,
	  "allow", "session.repo", "fetch", "acme/api", "/acme/api.git/git-upload-pack" },
	/* Siblings: as git.repos says. */
	{ "git.test", "POST", "/acme/shared-lib.git/git-upload-pack", 0, NULL,
	  "allow", "git.repos", "fetch", "acme/shared-lib",
	  "/acme/shared-lib.git/git-upload-pack" },
	{ "git.test", "POST", "/acme/shared-lib.git/git-receive-pack", 0, NULL,
	  "deny", "git.operation", "push", "acme/shared-lib", "" },
	{ "git.test", "GET", "/Acme/Shared-Lib/info/refs", 0, "service=git-receive-pack",
	  "deny", "git.operation", "push", "acme/shared-lib", "" },
	{ "git.test", "POST", "/acme/tools/git-receive-pack", 0, NULL,
	  "allow", "git.repos", "push", "acme/tools", "/acme/tools.git/git-receive-pack" },
	{ "git.test", "POST", "/other/pushonly/git-upload-pack", 0, NULL,
	  "deny", "git.operation", "fetch", "other/pushonly", "" },
	{ "git.test", "POST", "/other/pushonly/git-receive-pack", 0, NULL,
	  "allow", "git.repos", "push", "other/pushonly", "/other/pushonly.git/git-receive-pack" },
	{ "git.test", "GET", "/acme/other/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.repo", "fetch", "acme/other", "" },
	{ "git.test", "GET", "/acme/api-other/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.repo", "fetch", "acme/api-other", "" },
	{ "git.test", "GET", "/acm/eapi/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.repo", "fetch", "acm/eapi", "" },
	/* Hosts: a host-less entry on every git host, a hosted one only
	 * there, the session repository only on its own. */
	{ "git2.test", "POST", "/acme/onlythere/git-upload-pack", 0, NULL,
	  "allow", "git.repos", "fetch", "acme/onlythere", "/acme/onlythere.git/git-upload-pack" },
	{ "git.test", "POST", "/acme/onlythere/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "acme/onlythere", "" },
	{ "git2.test", "POST", "/acme/shared-lib/git-upload-pack", 0, NULL,
	  "allow", "git.repos", "fetch", "acme/shared-lib", "/acme/shared-lib.git/git-upload-pack" },
	{ "git2.test", "POST", "/acme/api/git-receive-pack", 0, NULL,
	  "deny", "git.repo", "push", "acme/api", "" },
	{ "other.test", "POST", "/acme/api/git-upload-pack", 0, NULL,
	  "deny", "git.host", "none", "", "" },
	{ "api.git.test", "POST", "/acme/api/git-upload-pack", 0, NULL,
	  "deny", "git.host", "none", "", "" },
	/* Ambiguous spellings: refused, never resolved. */
	{ "git.test", "GET", "/acme/api.git/../other/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api/../../other/x/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/./api/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api/./git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/%2e%2e/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api/%2e%2e/%2e%2e/other/api/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme%2Fapi/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api%2egit/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/%61cme/api/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme\\api/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api\\..\\other/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api.git.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api.GIT.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/..git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api\0/git-upload-pack", 26, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api\t/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/ap\xc3\xae/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api;x/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api~1/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/a pi/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "GET", "/acme/api/info/refs;x", 0, "service=git-upload-pack",
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "/acme/api/git-upload-pack@", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "acme/api/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ "git.test", "POST", "", 0, NULL, "deny", "git.path", "none", "", "" },
	/* Not a git operation. */
	{ "git.test", "GET", "/", 0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/acme/api", 0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/ACME/API.git/", 0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/login", 0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/acme/api.git/info/refs", 0, NULL,
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/info/refs", 0, "",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/info/refs", 0, "service=git-upload-pack&x=1",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/info/refs", 0, "service=git-upload-archive",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "POST", "/acme/api.git/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "HEAD", "/acme/api.git/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "post", "/acme/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "POST", "/acme/api.git/git-upload-pack", 0, "x",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "POST", "/acme/api.git/git-receive-pack", 0, "",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/HEAD", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/acme/api.git/objects/info/packs", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/acme/api/archive/refs/heads/main.zip", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET", "/acme/api.git/INFO/REFS", 0, "service=git-upload-pack",
	  "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "POST", "/acme/api.git/git-upload-pack/x", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	/* Nested groups. */
	{ "git.test", "GET", "/group/sub/repo.git/info/refs", 0, "service=git-upload-pack",
	  "deny", "git.repo", "none", "", "" },
	{ "git.test", "POST", "/x/acme/api/git-receive-pack", 0, NULL,
	  "deny", "git.repo", "none", "", "" },
	/* LFS. */
	{ "git.test", "POST", "/acme/api.git/info/lfs/objects/batch", 0, NULL,
	  "need-body", "session.repo", "lfs-batch", "acme/api",
	  "/acme/api.git/info/lfs/objects/batch" },
	{ "git.test", "POST", "/acme/other.git/info/lfs/objects/batch", 0, NULL,
	  "deny", "git.repo", "lfs-batch", "acme/other", "" },
	{ "git.test", "GET", "/acme/api.git/info/lfs/objects/batch", 0, NULL,
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/objects/batch", 0, "x=1",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET", "/acme/api.git/info/lfs/objects/" OID, 0, NULL,
	  "allow", "session.repo", "lfs-download", "acme/api",
	  "/acme/api.git/info/lfs/objects/" OID },
	{ "git.test", "HEAD", "/acme/shared-lib/info/lfs/objects/" OID, 0, NULL,
	  "allow", "git.repos", "lfs-download", "acme/shared-lib",
	  "/acme/shared-lib.git/info/lfs/objects/" OID },
	{ "git.test", "PUT", "/acme/api.git/info/lfs/objects/" OID, 0, NULL,
	  "allow", "session.repo", "lfs-upload", "acme/api",
	  "/acme/api.git/info/lfs/objects/" OID },
	{ "git.test", "PUT", "/acme/shared-lib.git/info/lfs/objects/" OID, 0, NULL,
	  "deny", "git.operation", "lfs-upload", "acme/shared-lib", "" },
	{ "git.test", "DELETE", "/acme/api.git/info/lfs/objects/" OID, 0, NULL,
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "GET",
	  "/acme/api.git/info/lfs/objects/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
	  0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "GET",
	  "/acme/api.git/info/lfs/objects/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
	  0, NULL, "deny", "git.endpoint", "none", "", "" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/verify", 0, NULL,
	  "allow", "session.repo", "lfs-upload", "acme/api", "/acme/api.git/info/lfs/verify" },
	{ "git.test", "POST", "/acme/shared-lib.git/info/lfs/verify", 0, NULL,
	  "deny", "git.operation", "lfs-upload", "acme/shared-lib", "" },
	{ "git.test", "GET", "/acme/api.git/info/lfs/locks", 0, "path=a.bin&limit=100",
	  "allow", "session.repo", "lfs-locks", "acme/api",
	  "/acme/api.git/info/lfs/locks?path=a.bin&limit=100" },
	{ "git.test", "GET", "/acme/shared-lib.git/info/lfs/locks", 0, NULL,
	  "allow", "git.repos", "lfs-locks", "acme/shared-lib",
	  "/acme/shared-lib.git/info/lfs/locks" },
	{ "git.test", "POST", "/acme/shared-lib.git/info/lfs/locks", 0, NULL,
	  "deny", "git.operation", "lfs-locks", "acme/shared-lib", "" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/locks/verify", 0, NULL,
	  "allow", "session.repo", "lfs-locks", "acme/api", "/acme/api.git/info/lfs/locks/verify" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/locks/17/unlock", 0, NULL,
	  "allow", "session.repo", "lfs-locks", "acme/api",
	  "/acme/api.git/info/lfs/locks/17/unlock" },
	{ "git.test", "POST", "/acme/shared-lib.git/info/lfs/locks/17/unlock", 0, NULL,
	  "deny", "git.operation", "lfs-locks", "acme/shared-lib", "" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/locks/verify", 0, "x",
	  "deny", "git.endpoint", "none", "acme/api", "" },
	{ "git.test", "POST", "/acme/api.git/info/lfs/objects", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
};

static struct gitrules_request mkreq(const char *method, const char *path, size_t len,
				     const char *query)
{
	struct gitrules_request r;

	r.method.ptr = method;
	r.method.len = strlen(method);
	r.path.ptr = path;
	r.path.len = len ? len : strlen(path);
	r.has_query = query != NULL;
	r.query.ptr = query;
	r.query.len = query ? strlen(query) : 0;
	return r;
}

static bool verdict_is(const struct gitrules_verdict *v, const char *decision,
		       const char *rule, const char *op, const char *repo,
		       const char *target)
{
	bool ok = strcmp(gitrules_decision_to_string(v->decision), decision) == 0 &&
		  strcmp(gitrules_rule_to_string(v->rule), rule) == 0 &&
		  strcmp(gitrules_op_to_string(v->op), op) == 0 &&
		  strcmp(v->repo, repo) == 0 && strcmp(v->target, target) == 0 &&
		  v->reason[0] != '\0';
	size_t i;

	for (i = 0; v->reason[i]; i++)
		ok = ok && v->reason[i] >= 0x20 && v->reason[i] < 0x7f; /* one printable line */

	if (!ok)
		tap_diag("got %s %s %s repo '%s' target '%s' (%s)",
			 gitrules_decision_to_string(v->decision),
			 gitrules_rule_to_string(v->rule), gitrules_op_to_string(v->op),
			 v->repo, v->target, v->reason);
	return ok;
}

/* Each case of @cases decided by @decide under the policy @policy. */
static void run_scm_cases(const char *policy, const char *name,
			  void (*decide)(const struct policy *, const char *,
					 const struct gitrules_request *, struct gitrules_verdict *),
			  const struct scm_case *cases, size_t n)
{
	struct policy *p = load(policy);
	size_t i;

	for (i = 0; i < n; i++) {
		const struct scm_case *c = &cases[i];
		struct gitrules_request r = mkreq(c->method, c->path, c->len, c->query);
		struct gitrules_verdict v;

		decide(p, c->host, &r, &v);
		tap_ok(verdict_is(&v, c->decision, c->rule, c->op, c->repo, c->target),
		       "%s %s %s %s%s%s -> %s %s", name, c->host, c->method, c->path,
		       c->query ? "?" : "", c->query ? c->query : "", c->decision, c->rule);
	}
	policy_free(p);
}

static void test_scm(void)
{
	run_scm_cases(POLICY, "scm", gitrules_decide_scm, scm_cases, ARRAY_SIZE(scm_cases));
}

/* Paths at and over the limits. */
static void test_scm_limits(void)
{
	struct policy *p = load(POLICY);
	char path[GITRULES_PATH_MAX + 64];
	struct gitrules_request r;
	struct gitrules_verdict v;
	size_t n;
	int i;

	/* Exactly GITRULES_PATH_MAX bytes, made of slashes: normalised. */
	n = GITRULES_PATH_MAX - strlen("/acme/api/git-upload-pack");
	memset(path, '/', n);
	strcpy(path + n, "/acme/api/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_scm(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "allow", "session.repo", "fetch", "acme/api",
			  "/acme/api.git/git-upload-pack"),
	       "a path of exactly %d bytes is read", GITRULES_PATH_MAX);
	memset(path, '/', n + 1);
	strcpy(path + n + 1, "/acme/api/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_scm(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.path", "none", "", ""),
	       "a path of %d bytes is refused", GITRULES_PATH_MAX + 1);

	/* An OWNER of 256 bytes. */
	path[0] = '/';
	memset(path + 1, 'a', 256);
	strcpy(path + 257, "/api/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_scm(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.path", "none", "", ""),
	       "an OWNER of 256 bytes is refused");

	/* More than GITRULES_SEGMENTS_MAX segments. */
	n = 0;
	for (i = 0; i < GITRULES_SEGMENTS_MAX; i++) {
		memcpy(path + n, "/a", 2);
		n += 2;
	}
	strcpy(path + n, "/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_scm(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.path", "none", "", ""),
	       "more than %d segments are refused", GITRULES_SEGMENTS_MAX);
	policy_free(p);
}

struct lfs_case {
	const char *path;
	const char *body; /* NULL: over the limit */
	const char *decision;
	const char *rule;
	const char *op;
};

static const struct lfs_case lfs_cases[] = {
	{ "/acme/api/info/lfs/objects/batch",
	  "{\"operation\":\"download\",\"transfers\":[\"basic\"],\"objects\":[]}",
	  "allow", "session.repo", "lfs-download" },
	{ "/acme/api/info/lfs/objects/batch", "{\"operation\":\"upload\"}",
	  "allow", "session.repo", "lfs-upload" },
	{ "/acme/shared-lib/info/lfs/objects/batch", "{\"operation\":\"download\"}",
	  "allow", "git.repos", "lfs-download" },
	{ "/acme/shared-lib/info/lfs/objects/batch", "{\"operation\":\"upload\"}",
	  "deny", "git.operation", "lfs-upload" },
	{ "/other/pushonly/info/lfs/objects/batch", "{\"operation\":\"download\"}",
	  "deny", "git.operation", "lfs-download" },
	{ "/acme/api/info/lfs/objects/batch", "{\"operation\":\"delete\"}",
	  "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "{\"operation\":\"Download\"}",
	  "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "{\"operation\":1}",
	  "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "{}", "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "[\"upload\"]", "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "operation=upload", "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "", "deny", "git.lfs", "lfs-batch" },
	{ "/acme/shared-lib/info/lfs/objects/batch",
	  "{\"operation\":\"download\",\"operation\":\"upload\"}",
	  "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", "{\"operation\":\"download\"} {}",
	  "deny", "git.lfs", "lfs-batch" },
	{ "/acme/api/info/lfs/objects/batch", NULL, "deny", "git.lfs", "lfs-batch" },
};

static void test_lfs_batch(void)
{
	struct policy *p = load(POLICY);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(lfs_cases); i++) {
		const struct lfs_case *c = &lfs_cases[i];
		struct gitrules_request r = mkreq("POST", c->path, 0, NULL);
		struct gitrules_verdict v;

		gitrules_decide_scm(p, "git.test", &r, &v);
		ASSERT(v.decision == GITRULES_NEED_BODY);
		if (c->body)
			gitrules_decide_lfs_batch(&v, c->body, strlen(c->body));
		else
			gitrules_decide_lfs_batch(&v, NULL, GITRULES_LFS_BODY_MAX + 1);
		tap_ok(strcmp(gitrules_decision_to_string(v.decision), c->decision) == 0 &&
			       strcmp(gitrules_rule_to_string(v.rule), c->rule) == 0 &&
			       strcmp(gitrules_op_to_string(v.op), c->op) == 0 &&
			       (v.decision == GITRULES_ALLOW) == (v.target[0] != '\0'),
		       "lfs batch %s %s -> %s %s %s (got %s %s %s: %s)", c->path,
		       c->body ? c->body : "(too large)", c->decision, c->rule, c->op,
		       gitrules_decision_to_string(v.decision), gitrules_rule_to_string(v.rule),
		       gitrules_op_to_string(v.op), v.reason);
	}
	policy_free(p);
}

struct api_case {
	const char *method;
	const char *path;
	const char *decision;
	const char *rule;
	const char *op;
	const char *repo;
};

static const struct api_case api_cases[] = {
	{ "GET", "/repos/acme/api", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/pulls", "allow", "session.repo", "fetch", "acme/api" },
	{ "HEAD", "/repos/acme/api/pulls", "allow", "session.repo", "fetch", "acme/api" },
	{ "POST", "/repos/acme/api/pulls", "allow", "session.repo", "push", "acme/api" },
	{ "GET", "/repos/ACME/Api/issues", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/api/v3/repos/acme/api/pulls", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/contents/a%20b.txt", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/contents/%C3%A9t%C3%A9", "allow", "session.repo", "fetch",
	  "acme/api" },
	{ "GET", "/repos/acme/shared-lib/contents/README.md", "allow", "git.repos", "fetch",
	  "acme/shared-lib" },
	{ "PATCH", "/repos/acme/shared-lib/issues/1", "deny", "git.operation", "push",
	  "acme/shared-lib" },
	{ "PUT", "/repos/acme/shared-lib/contents/x", "deny", "git.operation", "push",
	  "acme/shared-lib" },
	{ "GET", "/repos/acme/other/issues", "deny", "git.repo", "fetch", "acme/other" },
	{ "DELETE", "/repos/acme/other", "deny", "git.repo", "push", "acme/other" },
	{ "POST", "/graphql", "allow", "git.api_allow", "api", "" },
	{ "POST", "/graphql/x", "allow", "git.api_allow", "api", "" },
	{ "GET", "/user", "allow", "git.api_allow", "api", "" },
	{ "POST", "/graphqlx", "deny", "git.api", "none", "" },
	{ "GET", "/users/x", "deny", "git.api", "none", "" },
	{ "GET", "/orgs/acme/repos", "deny", "git.api", "none", "" },
	{ "GET", "/repos/acme", "deny", "git.api", "none", "" },
	{ "GET", "/REPOS/acme/api", "deny", "git.api", "none", "" },
	{ "GET", "/", "deny", "git.api", "none", "" },
	{ "GET", "/repos/acme/api.git/issues", "deny", "git.path", "fetch", "" },
	{ "GET", "/repos/acme/api/../other", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/./x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/%2e%2e/%2e%2e/acme/other", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%2Fb", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%5cb", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%252e", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%00", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%zz", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%4", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%C0%AF", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%E0%80%AF", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%F0%80%80%AF", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%ED%A0%80", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%F4%90%80%80", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%C3", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%AF", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%F0%9F%98%80.txt", "allow", "session.repo", "fetch",
	  "acme/api" },
	{ "GET", "/repos/acme/%61pi", "deny", "git.path", "fetch", "" },
	{ "GET", "/repos/%61cme/api", "deny", "git.path", "fetch", "" },
	{ "GET", "/repos/acme/api\\x", "deny", "git.path", "none", "" },
	{ "GET", "/repos//acme/api", "deny", "git.path", "none", "" },
	{ "GET", "//repos/acme/api", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api//x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/a\x01pi", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/a;pi", "deny", "git.path", "none", "" },
	{ "GET", "repos/acme/api", "deny", "git.path", "none", "" },
	{ "POST", "/graphql/../repos/acme/other", "deny", "git.path", "none", "" },
	/* ";" parameters and their encodings: "..;" is ".." to Java servers
	 * (issue 19: this passed with the token substituted). */
	{ "GET", "/repos/acme/api/..;/secret-repo", "deny", "git.path", "none", "" },
	{ "POST", "/repos/acme/api/..;/..;/other/x/keys", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/..%3b/secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/..%3B/secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/.;/x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/%2e%2e;/x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api;x/pulls", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/pulls;jsessionid=1", "deny", "git.path", "none", "" },
	/* Dots: encoded, mixed, doubled past "..", trimmed by some servers. */
	{ "GET", "/repos/acme/api/.%2e/secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/%2E./secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/.../secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/..%20/secret-repo", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/%C0%AE%C0%AE/x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/a%252e%252e/x", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%3Fb", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/a%23b", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/contents/%5c..%5cx", "deny", "git.path", "none", "" },
	{ "GET", "/repos/acme/api/compare/v1...v2", "allow", "session.repo", "fetch", "acme/api" },
	/* The structure may hold no escape, even of a letter. */
	{ "GET", "/rep%6fs/acme/api", "deny", "git.path", "fetch", "" },
	{ "GET", "/api/v%33/repos/acme/api", "deny", "git.path", "fetch", "" },
	/* git.api_admin: credentials, access, moves (SPEC 3.5). */
	{ "POST", "/repos/acme/api/keys", "deny", "git.api_admin", "push", "acme/api" },
	{ "GET", "/repos/acme/api/keys", "deny", "git.api_admin", "fetch", "acme/api" },
	{ "DELETE", "/repos/acme/api/keys/1", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/repos/acme/api/keys/", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/repos/ACME/API/KEYS", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/repos/acme/api/%6beys", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/repos/acme/api/k%65ys", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/api/v3/repos/acme/api/keys", "deny", "git.api_admin", "push", "acme/api" },
	{ "POST", "/repos/acme/api/hooks", "deny", "git.api_admin", "push", "acme/api" },
	{ "PATCH", "/repos/acme/api/hooks/1/config", "deny", "git.api_admin", "push", "acme/api" },
	{ "PUT", "/repos/acme/api/collaborators/mallory", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "GET", "/repos/acme/api/invitations", "deny", "git.api_admin", "fetch", "acme/api" },
	{ "POST", "/repos/acme/api/transfer", "deny", "git.api_admin", "push", "acme/api" },
	{ "PUT", "/repos/acme/api/actions/secrets/DEPLOY", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "GET", "/repos/acme/api/actions/secrets/public-key", "deny", "git.api_admin", "fetch",
	  "acme/api" },
	{ "POST", "/repos/acme/api/actions/variables", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "POST", "/repos/acme/api/actions/runners/registration-token", "deny", "git.api_admin",
	  "push", "acme/api" },
	{ "POST", "/repos/acme/api/actions/runners/remove-token", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "POST", "/repos/acme/api/actions/runners/generate-jitconfig", "deny", "git.api_admin",
	  "push", "acme/api" },
	{ "PUT", "/repos/acme/api/environments/prod/secrets/K", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "POST", "/repos/acme/api/environments/prod/variables", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "PUT", "/repos/acme/api/dependabot/secrets/K", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "PUT", "/repos/acme/api/codespaces/secrets/K", "deny", "git.api_admin", "push",
	  "acme/api" },
	{ "PATCH", "/repos/acme/api", "deny", "git.api_admin", "push", "acme/api" },
	{ "PATCH", "/repos/acme/api/", "deny", "git.api_admin", "push", "acme/api" },
	{ "GET", "/repos/acme/shared-lib/hooks", "deny", "git.api_admin", "fetch",
	  "acme/shared-lib" },
	{ "POST", "/repos/acme/shared-lib/keys", "deny", "git.operation", "push",
	  "acme/shared-lib" },
	{ "POST", "/repos/acme/other/keys", "deny", "git.repo", "push", "acme/other" },
	/* ...and only those: whole segments, the other Actions and
	 * environment paths, the repository's other methods. */
	{ "GET", "/repos/acme/api/keysx", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/contents/keys", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/actions/runs", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/actions", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/environments", "allow", "session.repo", "fetch", "acme/api" },
	{ "GET", "/repos/acme/api/environments/prod", "allow", "session.repo", "fetch",
	  "acme/api" },
	{ "POST", "/repos/acme/api/issues/1/comments", "allow", "session.repo", "push",
	  "acme/api" },
	{ "PATCH", "/repos/acme/api/pulls/1", "allow", "session.repo", "push", "acme/api" },
	{ "GET", "/repos/acme/api", "allow", "session.repo", "fetch", "acme/api" },
};

static void test_api(void)
{
	struct policy *p = load(POLICY);
	char longpath[GITRULES_API_PATH_MAX + 2];
	struct gitrules_request r;
	struct gitrules_verdict v;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(api_cases); i++) {
		const struct api_case *c = &api_cases[i];

		r = mkreq(c->method, c->path, 0, NULL);
		gitrules_decide_api(p, "api.git.test", &r, &v);
		tap_ok(verdict_is(&v, c->decision, c->rule, c->op, c->repo, ""),
		       "api %s %s -> %s %s %s", c->method, c->path, c->decision, c->rule,
		       c->op);
	}
	r = mkreq("GET", "/repos/acme/api", 0, "q=../../x%2F");
	gitrules_decide_api(p, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "allow", "session.repo", "fetch", "acme/api", ""),
	       "api: the query names no repository and is not looked at");
	r = mkreq("GET", "/repos/acme/api", 0, NULL);
	gitrules_decide_api(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.host", "none", "", ""),
	       "api: a host outside git.api_hosts is refused");

	memcpy(longpath, "/repos/acme/api/", 16);
	memset(longpath + 16, 'x', GITRULES_API_PATH_MAX - 16);
	longpath[GITRULES_API_PATH_MAX] = '\0';
	r = mkreq("GET", longpath, 0, NULL);
	gitrules_decide_api(p, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "allow", "session.repo", "fetch", "acme/api", ""),
	       "api: a path of exactly %d bytes is read", GITRULES_API_PATH_MAX);
	longpath[GITRULES_API_PATH_MAX] = 'x';
	longpath[GITRULES_API_PATH_MAX + 1] = '\0';
	r = mkreq("GET", longpath, 0, NULL);
	gitrules_decide_api(p, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.path", "none", "", ""),
	       "api: a path of %d bytes is refused", GITRULES_API_PATH_MAX + 1);
	policy_free(p);
}

/* git.api_allow lets an admin path through, by whole segments. */
static void test_api_admin_allow(void)
{
	struct policy *p = load("{\"version\":1,\"session\":{\"repo\":\"git.test/acme/api\"},"
				"\"git\":{\"hosts\":[\"git.test\"],\"api_hosts\":[\"api.git.test\"],"
				"\"repos\":{\"acme/lib\":[\"fetch\"]},"
				"\"api_allow\":[\"/repos/acme/api/keys\",\"/repos/acme/lib/hooks\","
				"\"/repos/acme/api/actions/runners/registration-token\"]}}");
	static const struct api_case cases[] = {
		{ "POST", "/repos/acme/api/keys", "allow", "git.api_allow", "api", "acme/api" },
		{ "DELETE", "/repos/acme/api/keys/7", "allow", "git.api_allow", "api", "acme/api" },
		{ "GET", "/repos/acme/api/keys", "allow", "git.api_allow", "api", "acme/api" },
		{ "POST", "/repos/acme/api/%6beys", "allow", "git.api_allow", "api", "acme/api" },
		{ "POST", "/repos/acme/api/actions/runners/registration-token", "allow",
		  "git.api_allow", "api", "acme/api" },
		{ "POST", "/repos/acme/api/actions/runners/remove-token", "deny", "git.api_admin",
		  "push", "acme/api" },
		{ "POST", "/repos/acme/api/hooks", "deny", "git.api_admin", "push", "acme/api" },
		{ "POST", "/repos/acme/api/keysx", "allow", "session.repo", "push", "acme/api" },
		{ "POST", "/repos/ACME/api/keys", "deny", "git.api_admin", "push", "acme/api" },
		{ "POST", "/repos/acme/api/keys/..;/hooks", "deny", "git.path", "none", "" },
		{ "POST", "/repos/acme/api/keys/%2e%2e/hooks", "deny", "git.path", "none", "" },
		{ "POST", "/repos/acme/api/keys/../hooks", "deny", "git.path", "none", "" },
		{ "POST", "/repos/acme/api/keys//x", "deny", "git.path", "none", "" },
		{ "POST", "/repos/acme/lib/hooks", "allow", "git.api_allow", "api", "acme/lib" },
		{ "PATCH", "/repos/acme/api", "deny", "git.api_admin", "push", "acme/api" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct api_case *c = &cases[i];
		struct gitrules_request r = mkreq(c->method, c->path, 0, NULL);
		struct gitrules_verdict v;

		gitrules_decide_api(p, "api.git.test", &r, &v);
		tap_ok(verdict_is(&v, c->decision, c->rule, c->op, c->repo, ""),
		       "api_allow %s %s -> %s %s %s", c->method, c->path, c->decision, c->rule,
		       c->op);
	}
	policy_free(p);
}

/* One host serving git and its API (GitHub Enterprise Server). */
static void test_dispatch(void)
{
	struct policy *p = load("{\"version\":1,\"session\":{\"repo\":\"ghe.test/acme/api\"},"
				"\"git\":{\"hosts\":[\"ghe.test\"],\"api_hosts\":[\"ghe.test\","
				"\"api.ghe.test\"],\"api_allow\":[\"/api/graphql\"]}}");
	static const struct {
		const char *host, *method, *path, *query, *decision, *rule, *op;
	} cases[] = {
		{ "ghe.test", "GET", "/api/v3/repos/acme/api/pulls", NULL, "allow",
		  "session.repo", "fetch" },
		{ "ghe.test", "GET", "/api/v3/repos/acme/other", NULL, "deny", "git.repo",
		  "fetch" },
		{ "ghe.test", "POST", "/api/graphql", NULL, "allow", "git.api_allow", "api" },
		{ "ghe.test", "POST", "/api/v3/repos/acme/api/hooks", NULL, "deny",
		  "git.api_admin", "push" },
		{ "ghe.test", "GET", "/api/v3/repos/acme/api/..;/other", NULL, "deny", "git.path",
		  "none" },
		{ "ghe.test", "GET", "/acme/api.git/info/refs", "service=git-upload-pack",
		  "allow", "session.repo", "fetch" },
		{ "ghe.test", "POST", "/acme/other.git/git-upload-pack", NULL, "deny",
		  "git.repo", "fetch" },
		{ "ghe.test", "GET", "/acme/api/pulls", NULL, "deny", "git.endpoint", "none" },
		{ "api.ghe.test", "POST", "/repos/acme/api/issues", NULL, "allow",
		  "session.repo", "push" },
		{ "api.ghe.test", "POST", "/acme/api/git-upload-pack", NULL, "deny",
		  "git.api", "none" },
		{ "other.test", "POST", "/acme/api/git-upload-pack", NULL, "deny", "git.host",
		  "none" },
	};
	size_t i;

	tap_is_int(gitrules_host_kind(p, "ghe.test"), GITRULES_HOST_SCM | GITRULES_HOST_API,
		   "host kind: in both lists");
	tap_is_int(gitrules_host_kind(p, "API.GHE.TEST."), GITRULES_HOST_API,
		   "host kind: API only (case, trailing dot)");
	tap_is_int(gitrules_host_kind(p, "x.ghe.test"), 0, "host kind: neither");
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct gitrules_request r = mkreq(cases[i].method, cases[i].path, 0,
						  cases[i].query);
		struct gitrules_verdict v;

		gitrules_decide_http(p, cases[i].host, &r, &v);
		tap_ok(strcmp(gitrules_decision_to_string(v.decision), cases[i].decision) == 0 &&
			       strcmp(gitrules_rule_to_string(v.rule), cases[i].rule) == 0 &&
			       strcmp(gitrules_op_to_string(v.op), cases[i].op) == 0,
		       "dispatch %s %s %s -> %s %s %s (got %s %s %s)", cases[i].host,
		       cases[i].method, cases[i].path, cases[i].decision, cases[i].rule,
		       cases[i].op, gitrules_decision_to_string(v.decision),
		       gitrules_rule_to_string(v.rule), gitrules_op_to_string(v.op));
	}
	policy_free(p);
}

/* API paths without session.repo: bound to the one git host, or to none. */
static void test_api_scm_host(void)
{
	struct policy *one = load("{\"version\":1,\"git\":{\"hosts\":[\"git.test\"],"
				  "\"api_hosts\":[\"api.git.test\"],"
				  "\"repos\":{\"acme/lib\":[\"fetch\"]}}}");
	struct policy *two = load("{\"version\":1,\"git\":{\"hosts\":[\"git.test\",\"b.test\"],"
				  "\"api_hosts\":[\"api.git.test\"],"
				  "\"repos\":{\"acme/lib\":[\"fetch\"]}}}");
	struct gitrules_request r = mkreq("GET", "/repos/acme/lib", 0, NULL);
	struct gitrules_verdict v;

	gitrules_decide_api(one, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "allow", "git.repos", "fetch", "acme/lib", ""),
	       "api without session.repo: the one git host binds");
	gitrules_decide_api(two, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.repo", "fetch", "acme/lib", ""),
	       "api without session.repo and two git hosts: refused");
	policy_free(one);
	policy_free(two);
}

static void test_ssh(void)
{
	struct policy *off = load(POLICY);
	struct policy *on = load("{\"version\":1,\"git\":{\"hosts\":[\"git.test\"],"
				 "\"ssh\":true}}");
	static const struct {
		bool on;
		const char *target;
		uint16_t port;
		int asked; /* 0: not an SSH question */
		const char *decision;
	} cases[] = {
		{ false, "git.test", 22, 1, "deny" },
		{ false, "other.test", 22, 1, "deny" },
		{ false, "git.test", 443, 0, "" },
		{ true, "git.test", 22, 1, "allow" },
		{ true, "GIT.TEST.", 22, 1, "allow" },
		{ true, "other.test", 22, 1, "deny" },
		{ true, "sub.git.test", 22, 1, "deny" },
		{ true, "198.18.0.10", 22, 1, "deny" },
		{ true, "git.test", 2222, 0, "" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct host_target t;
		struct gitrules_verdict v;
		bool asked;

		ASSERT(hostname_normalise(cases[i].target, strlen(cases[i].target), &t) ==
		       HOSTNAME_OK);
		memset(&v, 0x5a, sizeof(v));
		asked = gitrules_decide_ssh(cases[i].on ? on : off, &t, cases[i].port, &v);
		if (!cases[i].asked) {
			tap_ok(!asked, "ssh (%s) %s:%u is no SSH question",
			       cases[i].on ? "on" : "off", cases[i].target, cases[i].port);
			continue;
		}
		tap_ok(asked && strcmp(gitrules_decision_to_string(v.decision),
				       cases[i].decision) == 0 &&
			       v.rule == GITRULES_RULE_SSH && v.op == GITRULES_OP_SSH &&
			       v.reason[0],
		       "ssh (%s) %s:%u -> %s (%s)", cases[i].on ? "on" : "off",
		       cases[i].target, cases[i].port, cases[i].decision, v.reason);
	}
	policy_free(off);
	policy_free(on);
}

static void test_names(void)
{
	int i;

	for (i = 0; i < GITRULES_RULE_COUNT; i++)
		tap_ok(strcmp(gitrules_rule_to_string((enum gitrules_rule)i), "?") != 0,
		       "rule %d has a name (%s)", i, gitrules_rule_to_string((enum gitrules_rule)i));
	tap_is_str(gitrules_rule_to_string(GITRULES_RULE_COUNT), "?", "rule: out of range");
	tap_is_str(gitrules_op_to_string(GITRULES_OP_COUNT), "?", "op: out of range");
	tap_is_str(gitrules_decision_to_string(GITRULES_DECISION_COUNT), "?",
		   "decision: out of range");
}

static void test_credential(void)
{
	char tok[GITRULES_TOKEN_MAX + 1], *h;

	h = gitrules_credential_header("x-access-token", "ghs_abc", 7);
	tap_is_str(h, "Basic eC1hY2Nlc3MtdG9rZW46Z2hzX2FiYw==", "credential header: Basic x-access-token:TOKEN");
	free(h);
	memset(tok, 'A', GITRULES_TOKEN_MAX);
	h = gitrules_credential_header("x-access-token", tok, GITRULES_TOKEN_MAX);
	tap_ok(strlen(h) == 6 + 4 * ((15 + GITRULES_TOKEN_MAX + 2) / 3) &&
		       strcmp(h + strlen(h) - 8, "QUFBQUE=") == 0,
	       "credential header: a token of %d bytes", GITRULES_TOKEN_MAX);
	free(h);
}

/* ---- providers (gitprov.h) ---------------------------------------------- */

static const char *const GITLAB =
	"{\"version\":1,\"session\":{\"repo\":\"gitlab.test/acme/platform/api\"},"
	"\"git\":{\"provider\":\"gitlab\",\"hosts\":[\"gitlab.test\"],\"api_hosts\":[\"gitlab.test\"],"
	"\"repos\":{\"acme/platform/lib\":[\"fetch\"],\"acme/tools\":[\"fetch\",\"push\"]},"
	"\"project_ids\":{\"123\":\"acme/platform/api\",\"77\":\"acme/platform/lib\","
	"\"99\":\"acme/platform/secret\"},"
	"\"api_allow\":[\"/api/v4/graphql\",\"/api/v4/projects/acme/platform/api/hooks\"]}}";

static const char *const BITBUCKET =
	"{\"version\":1,\"session\":{\"repo\":\"bitbucket.test/ws/api\"},"
	"\"git\":{\"provider\":\"bitbucket\",\"hosts\":[\"bitbucket.test\"],"
	"\"api_hosts\":[\"api.bitbucket.test\"],\"repos\":{\"ws/lib\":[\"fetch\"]}}}";

#define GL "gitlab.test"
#define BB "bitbucket.test"
#define BA "api.bitbucket.test"
#define GLAPI "/api/v4/projects/acme%2Fplatform%2Fapi"

static const struct scm_case gitlab_cases[] = {
	/* nested groups, .git optional, case folded, "//" dropped */
	{ GL, "GET", "/acme/platform/api.git/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "acme/platform/api",
	  "/acme/platform/api.git/info/refs?service=git-upload-pack" },
	{ GL, "GET", "/Acme/Platform/API/info/refs", 0, "service=git-receive-pack",
	  "allow", "session.repo", "push", "acme/platform/api",
	  "/acme/platform/api.git/info/refs?service=git-receive-pack" },
	{ GL, "POST", "//acme//platform/api.git/git-receive-pack/", 0, NULL,
	  "allow", "session.repo", "push", "acme/platform/api",
	  "/acme/platform/api.git/git-receive-pack" },
	{ GL, "POST", "/acme/platform/lib.git/git-upload-pack", 0, NULL,
	  "allow", "git.repos", "fetch", "acme/platform/lib", "/acme/platform/lib.git/git-upload-pack" },
	{ GL, "POST", "/acme/platform/lib.git/git-receive-pack", 0, NULL,
	  "deny", "git.operation", "push", "acme/platform/lib", "" },
	{ GL, "POST", "/acme/tools/git-receive-pack", 0, NULL,
	  "allow", "git.repos", "push", "acme/tools", "/acme/tools.git/git-receive-pack" },
	{ GL, "POST", "/acme/platform/api.git/info/lfs/objects/batch", 0, NULL,
	  "need-body", "session.repo", "lfs-batch", "acme/platform/api",
	  "/acme/platform/api.git/info/lfs/objects/batch" },
	/* other projects: a prefix, a suffix, a sub-project, a wiki */
	{ GL, "POST", "/acme/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "acme/api", "" },
	{ GL, "POST", "/platform/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "platform/api", "" },
	{ GL, "POST", "/acme/platform/api/x.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "acme/platform/api/x", "" },
	{ GL, "POST", "/acme/platform/api.wiki.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "acme/platform/api.wiki", "" },
	{ GL, "POST", "/acme/platform/secret.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "acme/platform/secret", "" },
	/* /-/ routes, dots, escapes, reserved shapes */
	{ GL, "POST", "/acme/platform/api/-/snippets/1.git/git-upload-pack", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ GL, "GET", "/acme/platform/api/-/archive/main/api-main.zip", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ GL, "POST", "/acme/platform/api/-/../../secret.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/acme/platform/%2e%2e/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/acme/platform%2Fapi.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/acme/platform/./api.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/acme.git/platform/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/-acme/platform/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/acme/platform/api.git.git/git-upload-pack", 0, NULL,
	  "deny", "git.path", "none", "", "" },
	{ GL, "POST", "/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.endpoint", "none", "", "" },
	{ GL, "GET", "/acme/platform/api.git/info/refs", 0, NULL,
	  "deny", "git.endpoint", "none", "acme/platform/api", "" },
};

static const struct scm_case bitbucket_cases[] = {
	{ BB, "POST", "/ws/api.git/git-receive-pack", 0, NULL,
	  "allow", "session.repo", "push", "ws/api", "/ws/api.git/git-receive-pack" },
	{ BB, "GET", "/WS/Api/info/refs", 0, "service=git-upload-pack",
	  "allow", "session.repo", "fetch", "ws/api", "/ws/api.git/info/refs?service=git-upload-pack" },
	{ BB, "POST", "/ws/lib.git/git-upload-pack", 0, NULL,
	  "allow", "git.repos", "fetch", "ws/lib", "/ws/lib.git/git-upload-pack" },
	{ BB, "POST", "/ws/lib.git/git-receive-pack", 0, NULL,
	  "deny", "git.operation", "push", "ws/lib", "" },
	{ BB, "POST", "/ws/sub/api.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "none", "", "" },
	{ BB, "POST", "/ws/other.git/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "fetch", "ws/other", "" },
	{ BB, "POST", "/ws/api/-/x/git-upload-pack", 0, NULL,
	  "deny", "git.repo", "none", "", "" },
};

struct api_pcase {
	const char *host, *method, *path;
	const char *decision, *rule, *op, *repo;
};

static const struct api_pcase gitlab_api_cases[] = {
	{ GL, "GET", GLAPI "/merge_requests", "allow", "session.repo", "fetch", "acme/platform/api" },
	{ GL, "GET", "/api/v4/projects/ACME%2fPlatform%2fAPI", "allow", "session.repo", "fetch",
	  "acme/platform/api" },
	{ GL, "POST", GLAPI "/merge_requests", "allow", "session.repo", "push", "acme/platform/api" },
	{ GL, "DELETE", GLAPI, "allow", "session.repo", "push", "acme/platform/api" },
	{ GL, "GET", GLAPI "/repository/files/README.md/raw", "allow", "session.repo", "fetch",
	  "acme/platform/api" },
	{ GL, "GET", "/api/v4/projects/123/repository/tree", "allow", "session.repo", "fetch",
	  "acme/platform/api" },
	{ GL, "GET", "/api/v4/projects/77/repository/tree", "allow", "git.repos", "fetch",
	  "acme/platform/lib" },
	{ GL, "POST", "/api/v4/projects/77/merge_requests", "deny", "git.operation", "push",
	  "acme/platform/lib" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Flib", "allow", "git.repos", "fetch",
	  "acme/platform/lib" },
	/* other projects: mapped out of scope, unmapped, a shorter path */
	{ GL, "GET", "/api/v4/projects/99", "deny", "git.repo", "fetch", "acme/platform/secret" },
	{ GL, "GET", "/api/v4/projects/124", "deny", "git.repo", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform", "deny", "git.repo", "fetch",
	  "acme/platform" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Fsecret/repository/tree", "deny", "git.repo",
	  "fetch", "acme/platform/secret" },
	/* spellings: decoded exactly once, nothing ambiguous */
	{ GL, "GET", "/api/v4/projects/0123", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%252Fplatform%252Fapi", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2F..%2Fsecret", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2F%2Eapi", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2F%61pi", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Fapi%2F", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2F%2Fplatform%2Fapi", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Fapi.git", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme/platform/api", "deny", "git.path", "none", "" },
	{ GL, "GET", GLAPI "/../../99", "deny", "git.path", "none", "acme/platform/api" },
	{ GL, "GET", GLAPI "/%2e%2e/x", "deny", "git.path", "none", "acme/platform/api" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Fapi;x", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fpl\xce\x91tform%2Fapi", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4/projects/acme%2Fplatform%2Fapi\x01", "deny", "git.path", "none", "" },
	{ GL, "GET", "/api/v4//projects/" "acme%2Fplatform%2Fapi", "deny", "git.path", "none", "" },
	/* outside the binding */
	{ GL, "GET", "/api/v4/projects", "deny", "git.api", "none", "" },
	{ GL, "GET", "/api/v4/user", "deny", "git.api", "none", "" },
	{ GL, "GET", "/api/v4/groups/acme/variables", "deny", "git.api", "none", "" },
	{ GL, "POST", "/api/v4/graphql", "allow", "git.api_allow", "api", "" },
	{ GL, "POST", "/api/graphql", "deny", "git.api", "none", "" },
	/* admin endpoints */
	{ GL, "POST", GLAPI "/access_tokens", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "POST", "/api/v4/projects/123/access_tokens", "deny", "git.api_admin", "push",
	  "acme/platform/api" },
	{ GL, "GET", GLAPI "/deploy_tokens", "deny", "git.api_admin", "fetch", "acme/platform/api" },
	{ GL, "POST", GLAPI "/deploy_keys", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "GET", GLAPI "/variables/AWS_KEY", "deny", "git.api_admin", "fetch", "acme/platform/api" },
	{ GL, "GET", GLAPI "/%76ariables", "deny", "git.api_admin", "fetch", "acme/platform/api" },
	{ GL, "POST", GLAPI "/MEMBERS", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "POST", GLAPI "/share", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "PUT", GLAPI "/transfer", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "POST", GLAPI "/runners", "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "PUT", GLAPI, "deny", "git.api_admin", "push", "acme/platform/api" },
	{ GL, "GET", GLAPI "/hooks", "allow", "git.api_allow", "api", "acme/platform/api" },
	{ GL, "POST", "/api/v4/projects/123/hooks", "allow", "git.api_allow", "api",
	  "acme/platform/api" },
};

static const struct api_pcase bitbucket_api_cases[] = {
	{ BA, "GET", "/2.0/repositories/ws/api/pullrequests", "allow", "session.repo", "fetch", "ws/api" },
	{ BA, "POST", "/2.0/repositories/ws/api/pullrequests", "allow", "session.repo", "push", "ws/api" },
	{ BA, "GET", "/2.0/repositories/WS/API/src/main/README.md", "allow", "session.repo", "fetch",
	  "ws/api" },
	{ BA, "GET", "/2.0/repositories/ws/lib/src", "allow", "git.repos", "fetch", "ws/lib" },
	{ BA, "POST", "/2.0/repositories/ws/lib/pullrequests", "deny", "git.operation", "push", "ws/lib" },
	{ BA, "GET", "/2.0/repositories/ws/other", "deny", "git.repo", "fetch", "ws/other" },
	{ BA, "POST", "/2.0/repositories/ws/api/deploy-keys", "deny", "git.api_admin", "push", "ws/api" },
	{ BA, "GET", "/2.0/repositories/ws/api/hooks", "deny", "git.api_admin", "fetch", "ws/api" },
	{ BA, "PUT", "/2.0/repositories/ws/api/permissions-config/users/x", "deny", "git.api_admin",
	  "push", "ws/api" },
	{ BA, "POST", "/2.0/repositories/ws/api/pipelines_config/variables/", "deny", "git.api_admin",
	  "push", "ws/api" },
	{ BA, "PUT", "/2.0/repositories/ws/api", "deny", "git.api_admin", "push", "ws/api" },
	{ BA, "GET", "/2.0/repositories/%7Bws-uuid%7D/api", "deny", "git.path", "fetch", "" },
	{ BA, "GET", "/2.0/repositories/ws/api%2Fx", "deny", "git.path", "none", "" },
	{ BA, "GET", "/2.0/repositories/ws/../ws/api", "deny", "git.path", "none", "" },
	{ BA, "GET", "/repos/ws/api", "deny", "git.api", "none", "" },
	{ BA, "GET", "/2.0/user", "deny", "git.api", "none", "" },
};

static void run_api_cases(const char *policy, const char *name, const struct api_pcase *cases,
			  size_t n)
{
	struct policy *p = load(policy);
	size_t i;

	for (i = 0; i < n; i++) {
		const struct api_pcase *c = &cases[i];
		struct gitrules_request r = mkreq(c->method, c->path, 0, NULL);
		struct gitrules_verdict v;

		gitrules_decide_http(p, c->host, &r, &v);
		tap_ok(verdict_is(&v, c->decision, c->rule, c->op, c->repo, ""),
		       "%s api %s %s -> %s %s", name, c->method, c->path, c->decision, c->rule);
	}
	policy_free(p);
}

static void test_providers(void)
{
	struct policy *p;
	struct gitrules_request r;
	struct gitrules_verdict v;
	char path[GITRULES_PATH_MAX];
	size_t at = 0;
	int i;
	char *h;

	run_scm_cases(GITLAB, "gitlab", gitrules_decide_http, gitlab_cases,
		      ARRAY_SIZE(gitlab_cases));
	run_scm_cases(BITBUCKET, "bitbucket", gitrules_decide_http, bitbucket_cases,
		      ARRAY_SIZE(bitbucket_cases));
	run_api_cases(GITLAB, "gitlab", gitlab_api_cases, ARRAY_SIZE(gitlab_api_cases));
	run_api_cases(BITBUCKET, "bitbucket", bitbucket_api_cases, ARRAY_SIZE(bitbucket_api_cases));

	/* GitLab: 20 subgroups under a top group are read, 21 are not */
	p = load(GITLAB);
	for (i = 0; i < GITPROV_DEPTH_MAX; i++)
		at += (size_t)snprintf(path + at, sizeof(path) - at, "/g%d", i);
	snprintf(path + at, sizeof(path) - at, "/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_http(p, GL, &r, &v);
	tap_ok(v.decision == GITRULES_DENY && v.rule == GITRULES_RULE_REPO,
	       "gitlab: a project %d segments deep is read (and out of scope)", GITPROV_DEPTH_MAX);
	snprintf(path + at, sizeof(path) - at, "/p/git-upload-pack");
	r = mkreq("POST", path, 0, NULL);
	gitrules_decide_http(p, GL, &r, &v);
	tap_ok(v.decision == GITRULES_DENY && v.rule == GITRULES_RULE_PATH,
	       "gitlab: %d segments deep is refused", GITPROV_DEPTH_MAX + 1);
	/* The same request on the GitHub policy: nested paths stay refused */
	policy_free(p);
	p = load(POLICY);
	r = mkreq("POST", "/acme/platform/api.git/git-upload-pack", 0, NULL);
	gitrules_decide_http(p, "git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.repo", "none", "", ""),
	       "github: GROUP/SUB/REPO is still refused");
	r = mkreq("GET", "/api/v4/projects/acme%2Fapi", 0, NULL);
	gitrules_decide_api(p, "api.git.test", &r, &v);
	tap_ok(verdict_is(&v, "deny", "git.path", "none", "", ""),
	       "github: GitLab's API shape is not bound");
	policy_free(p);

	h = gitrules_credential_header(gitprov_get(GITPROV_GITLAB)->git_user, "glpat-x", 7);
	tap_is_str(h, "Basic b2F1dGgyOmdscGF0LXg=", "gitlab: Basic oauth2:TOKEN");
	free(h);
	h = gitrules_credential_header(gitprov_get(GITPROV_BITBUCKET)->git_user, "bbt", 3);
	tap_is_str(h, "Basic eC10b2tlbi1hdXRoOmJidA==", "bitbucket: Basic x-token-auth:TOKEN");
	free(h);
	tap_is_str(gitprov_get(GITPROV_GITLAB)->api_token_header, "PRIVATE-TOKEN",
		   "gitlab: the API's token header");
}

int main(void)
{
	test_scm();
	test_scm_limits();
	test_lfs_batch();
	test_api();
	test_api_admin_allow();
	test_dispatch();
	test_api_scm_host();
	test_ssh();
	test_names();
	test_credential();
	test_providers();
	return tap_done();
}
