/* SPDX-License-Identifier: Apache-2.0
 * gitrules.c - the git binding's decisions.
 *
 * DOC: Theory of Operation
 *
 * An SCM token is valid for every repository its owner can reach; the
 * proxy is what binds it to the session's repository. It can only do so
 * if it reads each request the way the server will: one request, one
 * repository, one operation. So the rules accept few spellings and
 * refuse the rest instead of repairing them:
 *
 * - The grammar is closed. An SCM path is OWNER/REPO followed by one of
 *   the smart-HTTP or LFS operation paths, each with its method and query
 *   fixed; whatever else reaches an SCM host (the web UI, the dumb HTTP
 *   protocol, archive downloads, a different method) is refused. A server
 *   that grows a new endpoint cannot leak through a rule written before.
 * - One reading of a path. Every path is read by pathnorm.c, the
 *   normaliser every path rule of the proxy shares (the secrets' `paths`
 *   too), before any rule looks at it: ';' parameters ("..;"), segments
 *   of dots only, encoded dots and separators, backslashes, control and
 *   non-ASCII bytes are refused there, never resolved (a server that
 *   resolves them would see another repository than we decided on).
 * - Bytes are few. Only A-Z a-z 0-9 . _ - / may appear in an SCM path
 *   (no escape is read there at all): none of the others has one meaning
 *   on every server and in every proxy in between.
 * - The two normalisations the contract asks for are made, then the
 *   result is what is sent: empty segments are dropped ("//acme/api" is
 *   acme/api), case is folded and one ".git" removed. The verdict carries
 *   the canonical request-target ("/acme/api.git/info/refs?service=..."),
 *   which the proxy forwards in place of the client's, so no server,
 *   however it treats "//", case or ".git", reads another repository
 *   than the one decided. A REPO that still ends in ".git" after one is
 *   removed ("api.git.git") is refused: it names a repository "api.git"
 *   that the policy cannot name.
 * - The provider (git.provider, gitprov.c) gives the shape of a
 *   repository: OWNER/REPO on GitHub and Bitbucket, GROUP/SUB/.../PROJECT
 *   on GitLab. The operation is the path's end (at most one operation
 *   matches it) and the repository is everything before it, so a longer
 *   or shorter path is another repository, never the last two segments
 *   of it: with GitHub's shape, group/sub/repo is refused rather than
 *   given the rights of sub/repo. GitLab's "/-/" routes (web pages,
 *   archives, snippets' repositories) are no git operation of a project.
 * - LFS batch requests carry their operation in a JSON body: the path
 *   alone decides only that the repository is in scope (NEED_BODY); the
 *   body, read whole and bounded, decides download (fetch) or upload
 *   (push). An unreadable body is refused, never guessed.
 *
 * On an API host the binding is by path: the provider's repository
 * prefix (/repos/OWNER/REPO, /2.0/repositories/WORKSPACE/REPO) of a
 * repository in scope, or a git.api_allow prefix. API paths carry file
 * names and refs, so the escapes pathnorm.c deems safe are decoded there
 * and the rules read decoded segments (what a decoding server reads);
 * none is allowed in the prefix, OWNER or REPO; API paths are never
 * rewritten, so every spelling that would need it is refused. GitLab
 * names a project in one segment, /api/v4/projects/ID: its path with
 * each '/' as %2F, decoded exactly once (any other escape, %25 first,
 * is refused, so no second decoding can make another path), or a
 * numeric id, bound only when git.project_ids maps it (only the server
 * knows what an id is).
 *
 * Within a repository in scope, a token can mint a longer-lived one:
 * deploy keys, webhooks, collaborators, Actions secrets and runner
 * tokens, environment secrets, transfers, a PATCH of the repository
 * (visibility, name). Those requests are refused (git.api_admin, SPEC
 * 3.5) unless git.api_allow lists their path; their segments are
 * compared decoded and ignoring case, so no server's leniency reaches
 * one.
 *
 * SSH cannot be bound to a repository (the repository is inside the
 * encrypted session), so port 22 is refused unless the policy says
 * git.ssh, and then it reaches git.hosts only.
 *
 * Every function is pure; the verdict is a value the proxy records and
 * applies (shadow mode included: a would_block request never gets the
 * token).
 */
#include "gitrules.h"

#include <assert.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gitprov.h"
#include "pathnorm.h"
#include "util.h"

static const char *const decision_names[] = {
	[GITRULES_DENY] = "deny",
	[GITRULES_ALLOW] = "allow",
	[GITRULES_NEED_BODY] = "need-body",
};
static_assert(ARRAY_SIZE(decision_names) == GITRULES_DECISION_COUNT,
	      "decision_names");

static const char *const op_names[] = {
	[GITRULES_OP_NONE] = "none",
	[GITRULES_OP_FETCH] = "fetch",
	[GITRULES_OP_PUSH] = "push",
	[GITRULES_OP_LFS_BATCH] = "lfs-batch",
	[GITRULES_OP_LFS_DOWNLOAD] = "lfs-download",
	[GITRULES_OP_LFS_UPLOAD] = "lfs-upload",
	[GITRULES_OP_LFS_LOCKS] = "lfs-locks",
	[GITRULES_OP_API] = "api",
	[GITRULES_OP_SSH] = "ssh",
};
static_assert(ARRAY_SIZE(op_names) == GITRULES_OP_COUNT, "op_names");

static const char *const rule_names[] = {
	[GITRULES_RULE_SESSION_REPO] = "session.repo",
	[GITRULES_RULE_REPOS] = "git.repos",
	[GITRULES_RULE_API_ALLOW] = "git.api_allow",
	[GITRULES_RULE_SSH] = "git.ssh",
	[GITRULES_RULE_HOST] = "git.host",
	[GITRULES_RULE_PATH] = "git.path",
	[GITRULES_RULE_ENDPOINT] = "git.endpoint",
	[GITRULES_RULE_REPO] = "git.repo",
	[GITRULES_RULE_OPERATION] = "git.operation",
	[GITRULES_RULE_LFS] = "git.lfs",
	[GITRULES_RULE_API] = "git.api",
	[GITRULES_RULE_API_ADMIN] = "git.api_admin",
};
static_assert(ARRAY_SIZE(rule_names) == GITRULES_RULE_COUNT, "rule_names");

const char *gitrules_decision_to_string(enum gitrules_decision d)
{
	return (unsigned int)d < GITRULES_DECISION_COUNT ? decision_names[d]
							  : "?";
}

const char *gitrules_op_to_string(enum gitrules_op o)
{
	return (unsigned int)o < GITRULES_OP_COUNT ? op_names[o] : "?";
}

const char *gitrules_rule_to_string(enum gitrules_rule r)
{
	return (unsigned int)r < GITRULES_RULE_COUNT ? rule_names[r] : "?";
}

/* ------------------------------------------------------------------ */
/* Verdicts                                                           */
/* ------------------------------------------------------------------ */

static void verdict_init(struct gitrules_verdict *v)
{
	memset(v, 0, sizeof(*v));
	v->decision = GITRULES_DENY;
	v->rule = GITRULES_RULE_ENDPOINT;
	v->op = GITRULES_OP_NONE;
}

__attribute__((format(printf, 3, 4))) static void
deny(struct gitrules_verdict *v, enum gitrules_rule rule, const char *fmt, ...)
{
	va_list ap;

	v->decision = GITRULES_DENY;
	v->rule = rule;
	v->target[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

/* Reasons name the repository cut to this many bytes (the receipt's
 * subject carries it whole). */
#define REPO_FMT "%.160s"

static void deny_operation(struct gitrules_verdict *v)
{
	deny(v, GITRULES_RULE_OPERATION, REPO_FMT " may not be %s (git.repos allows %s only)",
	     v->repo, v->need == POLICY_GIT_PUSH ? "pushed" : "fetched",
	     v->allowed == POLICY_GIT_PUSH ? "push" : "fetch");
}

static void allow(struct gitrules_verdict *v)
{
	v->decision = GITRULES_ALLOW;
	snprintf(v->reason, sizeof(v->reason), REPO_FMT " %s allowed by %s", v->repo,
		 gitrules_op_to_string(v->op), gitrules_rule_to_string(v->rule));
}

/* ------------------------------------------------------------------ */
/* Hosts and repositories                                             */
/* ------------------------------------------------------------------ */

/* @a equals the normalised name @b, ignoring case and one trailing dot
 * of @a. */
static bool name_eq(const char *a, const char *b)
{
	size_t n = strlen(a);

	if (n > 0 && a[n - 1] == '.')
		n--;
	return n == strlen(b) && strncasecmp(a, b, n) == 0;
}

static bool in_list(char *const *list, size_t n, const char *host)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (name_eq(host, list[i]))
			return true;
	return false;
}

unsigned int gitrules_host_kind(const struct policy *p, const char *host)
{
	unsigned int k = 0;

	if (in_list(p->git_hosts, p->ngit_hosts, host))
		k |= GITRULES_HOST_SCM;
	if (in_list(p->git_api_hosts, p->ngit_api_hosts, host))
		k |= GITRULES_HOST_API;
	return k;
}

/* Is owner/repo on @host the session's repository? (The allow receipt
 * names session.repo or git.repos as its rule.) */
static bool is_session_repo(const struct policy *p, const char *host,
			    const char *owner_repo)
{
	const char *s = p->session_repo, *slash;
	size_t hl, n = strlen(host);

	if (!s)
		return false;
	slash = strchr(s, '/');
	ASSERT(slash);
	hl = (size_t)(slash - s);
	if (n > 0 && host[n - 1] == '.')
		n--;
	return hl == n && strncasecmp(s, host, n) == 0 &&
	       strcmp(slash + 1, owner_repo) == 0;
}

/* The rights on owner/repo and the verdict they give for @need. @owner
 * and @repo are validated names; @repo has no ".git". */
static void decide_repo(const struct policy *p, const char *host,
			const char *owner, const char *repo, unsigned int need,
			struct gitrules_verdict *v)
{
	v->allowed = policy_git_repo_ops(p, host, owner, repo);
	if (v->allowed == 0) {
		deny(v, GITRULES_RULE_REPO,
		     REPO_FMT " is neither the session repository nor in git.repos",
		     v->repo);
		return;
	}
	if (need && !(v->allowed & need)) {
		deny_operation(v);
		return;
	}
	v->rule = is_session_repo(p, host, v->repo) ? GITRULES_RULE_SESSION_REPO
						    : GITRULES_RULE_REPOS;
	allow(v);
}

/* ------------------------------------------------------------------ */
/* Paths                                                              */
/* ------------------------------------------------------------------ */

struct seg {
	const char *p;
	size_t n;
};

static bool seg_is(const struct seg *s, const char *lit)
{
	return s->p && s->n == strlen(lit) && memcmp(s->p, lit, s->n) == 0;
}

static bool is_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* The segments of a normalised path, for the grammar below (they point
 * into the struct pathnorm, which the caller keeps). */
static int segs_of(const struct pathnorm *pn, struct seg *segs)
{
	int i;

	for (i = 0; i < pn->nseg; i++) {
		segs[i].p = pn->path + pn->seg[i].off;
		segs[i].n = pn->seg[i].len;
	}
	return pn->nseg;
}

/* Reads the path of @r with pathnorm_parse() (the one normaliser of every
 * path rule: src/pathnorm.c) into @pn, at most @max bytes and
 * GITRULES_SEGMENTS_MAX segments; denies @v (git.path) and returns false
 * when it is refused. */
static bool read_path(const struct gitrules_request *r, size_t max, unsigned int flags,
		      struct pathnorm *pn, struct gitrules_verdict *v)
{
	enum pathnorm_error e = pathnorm_parse(r->path.ptr, r->path.len, max, flags, pn);

	if (e == PATHNORM_TOO_LONG) {
		deny(v, GITRULES_RULE_PATH, "the path is longer than %zu bytes", max);
		return false;
	}
	if (e != PATHNORM_OK) {
		deny(v, GITRULES_RULE_PATH, "%s", pathnorm_error_reason(e));
		return false;
	}
	if (pn->nseg > GITRULES_SEGMENTS_MAX) {
		deny(v, GITRULES_RULE_PATH, "the path has more than %d segments",
		     GITRULES_SEGMENTS_MAX);
		return false;
	}
	return true;
}

static bool ends_git(const char *s, size_t n)
{
	return n >= 4 && strncasecmp(s + n - 4, ".git", 4) == 0;
}

static bool dots_only(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] != '.')
			return false;
	return true;
}

static void lower_copy(char *out, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	out[n] = '\0';
}

/* Copies the validated repository path of @n segments (@s: the
 * namespace -- OWNER, or GitLab's GROUP/SUB/... -- then REPO),
 * lowercased, REPO without one ".git", into @owner ("group/sub" joined
 * by '/') / @repo and v->repo. @n is within the provider's depth (the
 * caller matched it). Returns false with @v denied when a segment is no
 * valid name for @gp: bytes other than A-Z a-z 0-9 . _ -, dots only, a
 * GitLab segment starting with '-' or a group ending in ".git", more
 * than GITRULES_NAME_MAX bytes of namespace or REPO. */
static bool read_repo(const struct gitprov *gp, const struct seg *s, int n,
		      bool strip_git, char *owner, char *repo,
		      struct gitrules_verdict *v)
{
	const struct seg *rs = &s[n - 1];
	size_t rn = rs->n, i, at = 0;
	int k;

	ASSERT(n >= 2);
	for (k = 0; k < n; k++) {
		if (s[k].n == 0 || s[k].n > GITRULES_NAME_MAX) {
			deny(v, GITRULES_RULE_PATH, "a segment of the repository is empty or longer than %d bytes",
			     GITRULES_NAME_MAX);
			return false;
		}
		for (i = 0; i < s[k].n; i++)
			if (!is_name_char((unsigned char)s[k].p[i]))
				goto bad;
		if (dots_only(s[k].p, s[k].n)) {
			deny(v, GITRULES_RULE_PATH, "a segment of the repository is dots only");
			return false;
		}
		if (gp->dash_routes && s[k].p[0] == '-') {
			deny(v, GITRULES_RULE_PATH,
			     "a %s group or project does not start with '-'", gp->display);
			return false;
		}
		if (k < n - 1 && n > 2 && ends_git(s[k].p, s[k].n)) {
			deny(v, GITRULES_RULE_PATH, "a group ends in \".git\": ambiguous");
			return false;
		}
		if (k < n - 1)
			at += s[k].n + (k ? 1 : 0);
	}
	if (at > GITRULES_NAME_MAX) {
		deny(v, GITRULES_RULE_PATH, "the groups are longer than %d bytes",
		     GITRULES_NAME_MAX);
		return false;
	}
	if (ends_git(rs->p, rn)) {
		if (!strip_git) {
			deny(v, GITRULES_RULE_PATH,
			     "an API path names the repository without \".git\"");
			return false;
		}
		rn -= 4;
		if (rn == 0 || dots_only(rs->p, rn)) {
			deny(v, GITRULES_RULE_PATH,
			     "REPO without \".git\" is empty or dots only");
			return false;
		}
		if (ends_git(rs->p, rn)) {
			deny(v, GITRULES_RULE_PATH,
			     "REPO ends in \".git\" twice: ambiguous");
			return false;
		}
	}
	at = 0;
	for (k = 0; k < n - 1; k++) {
		if (k)
			owner[at++] = '/';
		lower_copy(owner + at, s[k].p, s[k].n);
		at += s[k].n;
	}
	lower_copy(repo, rs->p, rn);
	snprintf(v->repo, sizeof(v->repo), "%s/%s", owner, repo);
	return true;
bad:
	deny(v, GITRULES_RULE_PATH, "OWNER and REPO may hold only A-Z a-z 0-9 . _ -");
	return false;
}

/* ------------------------------------------------------------------ */
/* SCM requests                                                       */
/* ------------------------------------------------------------------ */

/* Operation paths after OWNER/REPO. "*" is a variable segment: an OID for
 * objects, a lock id for unlock (checked by the entry's kind). */
enum ep_kind {
	EP_INFO_REFS,
	EP_UPLOAD_PACK,
	EP_RECEIVE_PACK,
	EP_LFS_BATCH,
	EP_LFS_OBJECT,
	EP_LFS_VERIFY,
	EP_LFS_LOCKS,
	EP_LFS_LOCKS_VERIFY,
	EP_LFS_UNLOCK,
};

struct endpoint {
	const char *what; /* for reasons */
	const char *segs[5];
	enum ep_kind kind;
	int nsegs;
};

static const struct endpoint endpoints[] = {
	{ "info/refs", { "info", "refs" }, EP_INFO_REFS, 2 },
	{ "git-upload-pack", { "git-upload-pack" }, EP_UPLOAD_PACK, 1 },
	{ "git-receive-pack", { "git-receive-pack" }, EP_RECEIVE_PACK, 1 },
	{ "the LFS batch API", { "info", "lfs", "objects", "batch" }, EP_LFS_BATCH, 4 },
	{ "an LFS object", { "info", "lfs", "objects", "*" }, EP_LFS_OBJECT, 4 },
	{ "LFS verify", { "info", "lfs", "verify" }, EP_LFS_VERIFY, 3 },
	{ "the LFS locks API", { "info", "lfs", "locks" }, EP_LFS_LOCKS, 3 },
	{ "LFS locks verify", { "info", "lfs", "locks", "verify" }, EP_LFS_LOCKS_VERIFY, 4 },
	{ "LFS unlock", { "info", "lfs", "locks", "*", "unlock" }, EP_LFS_UNLOCK, 5 },
};

static bool is_oid(const struct seg *s)
{
	size_t i;

	if (s->n != 64)
		return false;
	for (i = 0; i < s->n; i++)
		if (!((s->p[i] >= '0' && s->p[i] <= '9') || (s->p[i] >= 'a' && s->p[i] <= 'f')))
			return false;
	return true;
}

static bool is_lock_id(const struct seg *s)
{
	size_t i;

	if (s->n == 0 || s->n > GITRULES_NAME_MAX)
		return false;
	for (i = 0; i < s->n; i++)
		if (!is_name_char((unsigned char)s->p[i]))
			return false;
	return true;
}

/* Does @rest (n segments) match @e? */
static bool ep_match(const struct endpoint *e, const struct seg *rest, int n)
{
	int i;

	if (n != e->nsegs)
		return false;
	for (i = 0; i < n; i++) {
		if (strcmp(e->segs[i], "*") == 0) {
			if (e->kind == EP_LFS_OBJECT ? !is_oid(&rest[i]) : !is_lock_id(&rest[i]))
				return false;
		} else if (!seg_is(&rest[i], e->segs[i])) {
			return false;
		}
	}
	/* "locks/verify" is not the lock "verify" being unlocked, and
	 * "objects/batch" is no OID: the table order settles nothing, the
	 * variable segments' own grammar does. */
	return true;
}

static bool slice_is(struct http_slice s, const char *lit)
{
	return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* Sets v->op and v->need for endpoint @e and the request's method and
 * query; denies (git.endpoint) a method or query the operation does not
 * use. */
static bool endpoint_op(const struct endpoint *e, const struct gitrules_request *r,
			struct gitrules_verdict *v)
{
	bool get = slice_is(r->method, "GET"), post = slice_is(r->method, "POST");

	switch (e->kind) {
	case EP_INFO_REFS:
		if (!get)
			break;
		if (!r->has_query) {
			deny(v, GITRULES_RULE_ENDPOINT,
			     "info/refs without ?service= is the dumb HTTP protocol, not supported");
			return false;
		}
		if (slice_is(r->query, "service=git-upload-pack")) {
			v->op = GITRULES_OP_FETCH;
			v->need = POLICY_GIT_FETCH;
		} else if (slice_is(r->query, "service=git-receive-pack")) {
			v->op = GITRULES_OP_PUSH;
			v->need = POLICY_GIT_PUSH;
		} else {
			deny(v, GITRULES_RULE_ENDPOINT,
			     "info/refs takes exactly ?service=git-upload-pack or ?service=git-receive-pack");
			return false;
		}
		return true;
	case EP_UPLOAD_PACK:
		if (!post)
			break;
		v->op = GITRULES_OP_FETCH;
		v->need = POLICY_GIT_FETCH;
		goto no_query;
	case EP_RECEIVE_PACK:
		if (!post)
			break;
		v->op = GITRULES_OP_PUSH;
		v->need = POLICY_GIT_PUSH;
		goto no_query;
	case EP_LFS_BATCH:
		if (!post)
			break;
		v->op = GITRULES_OP_LFS_BATCH;
		v->need = 0;
		goto no_query;
	case EP_LFS_OBJECT:
		if (get || slice_is(r->method, "HEAD")) {
			v->op = GITRULES_OP_LFS_DOWNLOAD;
			v->need = POLICY_GIT_FETCH;
		} else if (slice_is(r->method, "PUT")) {
			v->op = GITRULES_OP_LFS_UPLOAD;
			v->need = POLICY_GIT_PUSH;
		} else {
			break;
		}
		goto no_query;
	case EP_LFS_VERIFY:
		if (!post)
			break;
		v->op = GITRULES_OP_LFS_UPLOAD;
		v->need = POLICY_GIT_PUSH;
		goto no_query;
	case EP_LFS_LOCKS:
		v->op = GITRULES_OP_LFS_LOCKS;
		if (get) {
			/* The lock list takes filters (?path=, ?cursor=,
			 * ?refspec=); they name no repository. */
			v->need = POLICY_GIT_FETCH;
			return true;
		}
		if (!post)
			break;
		v->need = POLICY_GIT_PUSH;
		goto no_query;
	case EP_LFS_LOCKS_VERIFY:
	case EP_LFS_UNLOCK:
		if (!post)
			break;
		v->op = GITRULES_OP_LFS_LOCKS;
		v->need = POLICY_GIT_PUSH;
		goto no_query;
	}
	v->op = GITRULES_OP_NONE;
	v->need = 0;
	deny(v, GITRULES_RULE_ENDPOINT, "%s does not take this method", e->what);
	return false;
no_query:
	if (r->has_query) {
		v->op = GITRULES_OP_NONE;
		v->need = 0;
		deny(v, GITRULES_RULE_ENDPOINT, "%s takes no query", e->what);
		return false;
	}
	return true;
}

/* Appends @s to v->target; the buffer is sized for the longest path this
 * file accepts, so running out is a bug. */
static void target_add(struct gitrules_verdict *v, size_t *at, const char *s, size_t n)
{
	ASSERT(*at + n < sizeof(v->target));
	memcpy(v->target + *at, s, n);
	*at += n;
	v->target[*at] = '\0';
}

static void build_target(const char *owner, const char *repo,
			 const struct seg *rest, int nrest,
			 const struct gitrules_request *r,
			 struct gitrules_verdict *v)
{
	size_t at = 0;
	int i;

	target_add(v, &at, "/", 1);
	target_add(v, &at, owner, strlen(owner));
	target_add(v, &at, "/", 1);
	target_add(v, &at, repo, strlen(repo));
	target_add(v, &at, ".git", 4);
	for (i = 0; i < nrest; i++) {
		target_add(v, &at, "/", 1);
		target_add(v, &at, rest[i].p, rest[i].n);
	}
	if (r->has_query) {
		target_add(v, &at, "?", 1);
		target_add(v, &at, r->query.ptr, r->query.len);
	}
}

/* A query the lock list forwards: the HTTP parser admits only visible
 * ASCII; '#' and '\\' are refused there too. Bounded like a path. */
static bool query_ok(const struct gitrules_request *r)
{
	size_t i;

	if (!r->has_query)
		return true;
	if (r->query.len > GITRULES_PATH_MAX)
		return false;
	for (i = 0; i < r->query.len; i++) {
		unsigned char c = (unsigned char)r->query.ptr[i];

		if (c <= 0x20 || c >= 0x7f || c == '#' || c == '\\')
			return false;
	}
	return true;
}

void gitrules_decide_scm(const struct policy *p, const char *host,
			 const struct gitrules_request *r,
			 struct gitrules_verdict *v)
{
	struct seg segs[GITRULES_SEGMENTS_MAX] = { { 0 } };
	char owner[GITRULES_NAME_MAX + 1], repo[GITRULES_NAME_MAX + 1];
	const struct gitprov *gp = gitprov_get(p->git_provider);
	const struct endpoint *e = NULL;
	struct pathnorm pn;
	int n, i, depth = 0;
	size_t k;

	verdict_init(v);
	if (!(gitrules_host_kind(p, host) & GITRULES_HOST_SCM)) {
		deny(v, GITRULES_RULE_HOST, "not a host of git.hosts");
		return;
	}
	/* No escape is read on an SCM host; "//" and a trailing '/' are
	 * dropped (the target sent upstream is rewritten). */
	if (!read_path(r, GITRULES_PATH_MAX, PATHNORM_DROP_EMPTY, &pn, v))
		return;
	n = segs_of(&pn, segs);
	for (i = 0; i < n; i++) {
		for (k = 0; k < segs[i].n; k++) {
			char c = segs[i].p[k];

			if (!is_name_char((unsigned char)c)) {
				deny(v, GITRULES_RULE_PATH,
				     "the path holds '%c': a git path has only A-Z a-z 0-9 . _ - /",
				     c);
				return;
			}
		}
	}
	if (gp->dash_routes) {
		for (i = 0; i < n; i++) {
			if (seg_is(&segs[i], "-")) {
				deny(v, GITRULES_RULE_ENDPOINT,
				     "a %s /-/ route (web pages, archives, snippets) is not a git "
				     "operation of a project", gp->display);
				return;
			}
		}
	}
	/* The operation is the path's end: at most one endpoint matches it
	 * (their last segments differ, and a variable segment has its own
	 * grammar); the repository is everything before. */
	for (k = 0; k < ARRAY_SIZE(endpoints); k++) {
		int m = endpoints[k].nsegs;

		if (n - m >= 1 && ep_match(&endpoints[k], segs + n - m, m)) {
			e = &endpoints[k];
			depth = n - m;
			break;
		}
	}
	if (!e || depth < gp->depth_min) {
		deny(v, GITRULES_RULE_ENDPOINT,
		     "not a git smart-HTTP or LFS request (%s and an operation)",
		     gp->depth_max > gp->depth_min ? "GROUP/.../PROJECT" : "OWNER/REPO");
		return;
	}
	if (depth > gp->depth_max) {
		if (gp->depth_max == 2)
			deny(v, GITRULES_RULE_REPO,
			     "nested group paths (GROUP/SUB/REPO) are not supported by %s: "
			     "a repository is OWNER/REPO (git.provider)", gp->display);
		else
			deny(v, GITRULES_RULE_PATH, "groups nest at most %d deep",
			     gp->depth_max - 1);
		return;
	}
	if (!read_repo(gp, segs, depth, true, owner, repo, v))
		return;
	if (!endpoint_op(e, r, v))
		return;
	if (!query_ok(r)) {
		deny(v, GITRULES_RULE_ENDPOINT, "the query holds a byte git does not send");
		return;
	}
	decide_repo(p, host, owner, repo, v->need, v);
	if (v->decision != GITRULES_ALLOW)
		return;
	if (v->op == GITRULES_OP_LFS_BATCH) {
		v->decision = GITRULES_NEED_BODY;
		snprintf(v->reason, sizeof(v->reason),
			 REPO_FMT " LFS batch: the operation is in the body", v->repo);
	}
	build_target(owner, repo, segs + depth, n - depth, r, v);
}

void gitrules_decide_lfs_batch(struct gitrules_verdict *v, const char *body,
			       size_t len)
{
	json_t *root = NULL, *op;
	json_error_t jerr;
	const char *s;

	ASSERT(v->decision == GITRULES_NEED_BODY && v->op == GITRULES_OP_LFS_BATCH);
	if (!body || len > GITRULES_LFS_BODY_MAX) {
		deny(v, GITRULES_RULE_LFS, "the LFS batch body is larger than %zu bytes",
		     GITRULES_LFS_BODY_MAX);
		goto out;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root || !json_is_object(root)) {
		deny(v, GITRULES_RULE_LFS, "the LFS batch body is not a JSON object");
		goto out;
	}
	op = json_object_get(root, "operation");
	s = json_string_value(op);
	if (s && strcmp(s, "download") == 0) {
		v->op = GITRULES_OP_LFS_DOWNLOAD;
		v->need = POLICY_GIT_FETCH;
	} else if (s && strcmp(s, "upload") == 0) {
		v->op = GITRULES_OP_LFS_UPLOAD;
		v->need = POLICY_GIT_PUSH;
	} else {
		v->op = GITRULES_OP_LFS_BATCH;
		deny(v, GITRULES_RULE_LFS,
		     "the LFS batch body's \"operation\" is neither \"download\" nor \"upload\"");
		goto out;
	}
	if (!(v->allowed & v->need)) {
		deny_operation(v);
		goto out;
	}
	allow(v);
out:
	json_decref(root);
}

/* ------------------------------------------------------------------ */
/* API requests                                                       */
/* ------------------------------------------------------------------ */

/* The host whose repositories API paths name: session.repo's, else the
 * only git.hosts entry; NULL when there is no such one host. */
static const char *api_scm_host(const struct policy *p, char *buf, size_t len)
{
	if (p->session_repo) {
		const char *slash = strchr(p->session_repo, '/');

		ASSERT(slash && (size_t)(slash - p->session_repo) < len);
		memcpy(buf, p->session_repo, (size_t)(slash - p->session_repo));
		buf[slash - p->session_repo] = '\0';
		return buf;
	}
	if (p->ngit_hosts == 1)
		return p->git_hosts[0];
	return NULL;
}

/* Within a repository's API (@rest: the index of the first segment after
 * the repository, @nrest segments from there, decoded), the requests that
 * create or hand out credentials, grant access or move the repository
 * (git.api_admin, the provider's list): what they are, for the reason,
 * or NULL. Compared ignoring case, so that no server's leniency reaches
 * one. */
static const char *api_admin_what(const struct gitprov *gp, const struct pathnorm *pn,
				  int rest, int nrest, struct http_slice method)
{
	size_t k;

	if (nrest == 0) {
		for (k = 0; k < gp->nself_methods; k++)
			if (slice_is(method, gp->self_methods[k]))
				return "a change of the repository itself (visibility, name, owner)";
		return NULL;
	}
	for (k = 0; k < gp->nadmin; k++) {
		const struct gitprov_admin *a = &gp->admin[k];

		if (!pathnorm_seg_is_ci(pn, rest, a->seg0))
			continue;
		if (!a->seg1)
			return a->what;
		if (strcmp(a->seg1, "*") == 0) {
			if (nrest >= 3 && pathnorm_seg_is_ci(pn, rest + 2, a->seg2))
				return a->what;
		} else if (nrest >= 2 && pathnorm_seg_is_ci(pn, rest + 1, a->seg1)) {
			return a->what;
		}
	}
	return NULL;
}

static void allow_api_allow(struct gitrules_verdict *v)
{
	v->decision = GITRULES_ALLOW;
	v->rule = GITRULES_RULE_API_ALLOW;
	v->op = GITRULES_OP_API;
	snprintf(v->reason, sizeof(v->reason), "allowed by git.api_allow");
}

/* The repository (@owner/@repo, read into v->repo) named by an API path
 * of @pn whose segments after it start at @rest: in scope for the
 * method's need, then not an admin endpoint unless git.api_allow lists
 * the path. Returns true when that settled @v; false when the repository
 * is out of scope (v denied with its reason, which git.api_allow may
 * still override). */
static bool api_repo_decide(const struct policy *p, const struct gitprov *gp,
			    const struct pathnorm *pn, int rest,
			    const struct gitrules_request *r, const char *owner,
			    const char *repo, struct gitrules_verdict *v)
{
	char hbuf[HOSTNAME_MAX + 1];
	const char *scm = api_scm_host(p, hbuf, sizeof(hbuf)), *what;

	if (scm) {
		decide_repo(p, scm, owner, repo, v->need, v);
	} else {
		deny(v, GITRULES_RULE_REPO,
		     "no one SCM host to bind API paths to: set session.repo");
	}
	if (v->decision != GITRULES_ALLOW)
		return false;
	what = api_admin_what(gp, pn, rest, pn->nseg - rest, r->method);
	if (!what)
		return true;
	if (policy_git_api_path_allowed(p, pn->path)) {
		allow_api_allow(v);
		return true;
	}
	deny(v, GITRULES_RULE_API_ADMIN,
	     "%s of " REPO_FMT " can create or hand out credentials, grant access "
	     "or move the repository: refused unless git.api_allow lists the path",
	     what, v->repo);
	return true;
}

/* GitLab's project id: one raw segment, @id of @n bytes. Either a numeric
 * id that git.project_ids maps (decimal, no leading zero), or the
 * project's path with each '/' written %2F (either case), decoded exactly
 * once: any other escape -- %25 (so %252F, double encoding), %2E, an
 * escaped letter -- and any byte but A-Z a-z 0-9 . _ - is refused, so
 * the path read here is the one GitLab reads. Writes the decoded path,
 * lowercase-agnostic, to @out ("group/sub/project"); false with @v
 * denied. */
static bool gitlab_project(const struct policy *p, const char *id, size_t n, char *out,
			   size_t outlen, struct gitrules_verdict *v)
{
	size_t i, at = 0;
	bool digits = n > 0;

	for (i = 0; i < n; i++)
		digits = digits && id[i] >= '0' && id[i] <= '9';
	if (digits) {
		unsigned long long num = 0;
		const char *path;

		if (id[0] == '0' || n > 19) {
			deny(v, GITRULES_RULE_PATH,
			     "a numeric project id is written without leading zeros, at most 19 digits");
			return false;
		}
		for (i = 0; i < n; i++)
			num = num * 10 + (unsigned long long)(id[i] - '0');
		path = policy_git_project_path(p, (uint64_t)num);
		if (!path) {
			deny(v, GITRULES_RULE_REPO,
			     "project id %llu is not in git.project_ids: a numeric id is bound "
			     "only when the policy names its project", num);
			return false;
		}
		if (!util_strlcpy(out, path, outlen)) {
			deny(v, GITRULES_RULE_PATH, "the project's path is too long");
			return false;
		}
		return true;
	}
	for (i = 0; i < n; i++) {
		if (at + 2 > outlen) {
			deny(v, GITRULES_RULE_PATH, "the project id is too long");
			return false;
		}
		if (id[i] == '%') {
			if (i + 2 < n && id[i + 1] == '2' && (id[i + 2] == 'F' || id[i + 2] == 'f')) {
				out[at++] = '/';
				i += 2;
				continue;
			}
			deny(v, GITRULES_RULE_PATH,
			     "the project id holds an escape other than %%2F (%%25 would be double "
			     "encoding): it is decoded exactly once");
			return false;
		}
		if (!is_name_char((unsigned char)id[i])) {
			unsigned char c = (unsigned char)id[i];

			if (c > 0x20 && c < 0x7f)
				deny(v, GITRULES_RULE_PATH,
				     "the project id holds '%c': only A-Z a-z 0-9 . _ - and %%2F", c);
			else
				deny(v, GITRULES_RULE_PATH,
				     "the project id holds the byte 0x%02x: only A-Z a-z 0-9 . _ - and %%2F",
				     c);
			return false;
		}
		out[at++] = id[i];
	}
	out[at] = '\0';
	return true;
}

/* A GitLab API request: /api/v4/projects/ID[/...] is bound to the
 * project ID names; other paths only by git.api_allow. */
static void decide_api_encoded(const struct policy *p, const struct gitprov *gp,
			       const struct gitrules_request *r, bool read,
			       struct gitrules_verdict *v)
{
	char prefix[64], decoded[GITRULES_API_PATH_MAX + 1];
	char syn[GITRULES_API_PATH_MAX + sizeof(prefix) + 1];
	char owner[GITRULES_NAME_MAX + 1], repo[GITRULES_NAME_MAX + 1];
	struct gitrules_request sr = *r;
	struct seg segs[GITRULES_SEGMENTS_MAX] = { { 0 } };
	struct pathnorm pn;
	const char *id, *end;
	size_t pl = 0, idn, restn, dl;
	int i, nsegs = 0;

	for (i = 0; i < gp->napi_prefix; i++)
		pl += (size_t)snprintf(prefix + pl, sizeof(prefix) - pl, "/%s", gp->api_prefix[i]);
	ASSERT(pl + 1 < sizeof(prefix));
	prefix[pl++] = '/';
	prefix[pl] = '\0';
	if (r->path.len > GITRULES_API_PATH_MAX) {
		deny(v, GITRULES_RULE_PATH, "the path is longer than %d bytes", GITRULES_API_PATH_MAX);
		return;
	}
	if (r->path.len <= pl || memcmp(r->path.ptr, prefix, pl) != 0) {
		/* Not a project's path: the decoded path, for git.api_allow */
		if (!read_path(r, GITRULES_API_PATH_MAX, PATHNORM_ESCAPES, &pn, v))
			return;
		goto api_allow;
	}
	id = r->path.ptr + pl;
	end = memchr(id, '/', r->path.len - pl);
	idn = end ? (size_t)(end - id) : r->path.len - pl;
	restn = r->path.len - pl - idn;
	if (!gitlab_project(p, id, idn, decoded, sizeof(decoded), v)) {
		struct gitrules_verdict keep = *v;

		/* An unmapped numeric id is out of scope, as an unlisted
		 * repository is: git.api_allow may still list its path. */
		if (v->rule != GITRULES_RULE_REPO ||
		    !read_path(r, GITRULES_API_PATH_MAX, PATHNORM_ESCAPES, &pn, v))
			return;
		if (policy_git_api_path_allowed(p, pn.path))
			allow_api_allow(v);
		else
			*v = keep;
		return;
	}
	/* The decoded project path's segments, each a name */
	dl = strlen(decoded);
	{
		const char *q = decoded;

		for (;;) {
			const char *sl = strchr(q, '/');

			if (nsegs == gp->depth_max) {
				deny(v, GITRULES_RULE_PATH, "groups nest at most %d deep",
				     gp->depth_max - 1);
				return;
			}
			segs[nsegs].p = q;
			segs[nsegs].n = sl ? (size_t)(sl - q) : strlen(q);
			nsegs++;
			if (!sl)
				break;
			q = sl + 1;
		}
	}
	if (nsegs < gp->depth_min) {
		deny(v, GITRULES_RULE_PATH,
		     "the project id names no GROUP/.../PROJECT (a path needs its %%2F, a number "
		     "git.project_ids)");
		return;
	}
	if (!read_repo(gp, segs, nsegs, false, owner, repo, v))
		return;
	/* The rest of the path, read by the one normaliser, behind the
	 * decoded project path: what git.api_allow and git.api_admin read. */
	ASSERT(pl + dl + restn < sizeof(syn));
	memcpy(syn, prefix, pl);
	memcpy(syn + pl, decoded, dl);
	memcpy(syn + pl + dl, id + idn, restn);
	sr.path.ptr = syn;
	sr.path.len = pl + dl + restn;
	{
		char keep[sizeof(v->repo)];

		memcpy(keep, v->repo, sizeof(keep));
		if (!read_path(&sr, sizeof(syn) - 1, PATHNORM_ESCAPES, &pn, v))
			return;
		memcpy(v->repo, keep, sizeof(keep));
	}
	v->op = read ? GITRULES_OP_FETCH : GITRULES_OP_PUSH;
	v->need = read ? POLICY_GIT_FETCH : POLICY_GIT_PUSH;
	if (api_repo_decide(p, gp, &pn, gp->napi_prefix + nsegs, r, owner, repo, v))
		return;
api_allow:
	if (policy_git_api_path_allowed(p, pn.path)) {
		allow_api_allow(v);
		return;
	}
	if (v->repo[0])
		return;
	v->op = GITRULES_OP_NONE;
	v->need = 0;
	deny(v, GITRULES_RULE_API,
	     "neither under /api/v4/projects/ID of a project in scope nor under git.api_allow");
}

void gitrules_decide_api(const struct policy *p, const char *host,
			 const struct gitrules_request *r,
			 struct gitrules_verdict *v)
{
	const struct gitprov *gp = gitprov_get(p->git_provider);
	struct seg segs[GITRULES_SEGMENTS_MAX] = { { 0 } };
	struct pathnorm pn;
	bool read;
	int n, base = 0;

	verdict_init(v);
	v->rule = GITRULES_RULE_API;
	if (!(gitrules_host_kind(p, host) & GITRULES_HOST_API)) {
		deny(v, GITRULES_RULE_HOST, "not a host of git.api_hosts");
		return;
	}
	read = slice_is(r->method, "GET") || slice_is(r->method, "HEAD");
	if (gp->api_id == GITPROV_API_ENCODED_PATH) {
		decide_api_encoded(p, gp, r, read, v);
		return;
	}
	/* API paths carry file names: safe escapes are decoded, and every
	 * rule below reads the decoded segments. "//" is refused: API paths
	 * are forwarded as written, never rewritten. */
	if (!read_path(r, GITRULES_API_PATH_MAX, PATHNORM_ESCAPES, &pn, v))
		return;
	v->op = read ? GITRULES_OP_FETCH : GITRULES_OP_PUSH;
	v->need = read ? POLICY_GIT_FETCH : POLICY_GIT_PUSH;
	n = segs_of(&pn, segs);
	/* GitHub Enterprise Server serves the same API under /api/v3. */
	if (gp->api_base[0] && n >= 2 && seg_is(&segs[0], gp->api_base[0]) &&
	    seg_is(&segs[1], gp->api_base[1]))
		base = 2;
	if (n - base >= gp->napi_prefix + 2) {
		bool prefixed = true;
		int i;

		for (i = 0; i < gp->napi_prefix; i++)
			prefixed = prefixed && seg_is(&segs[base + i], gp->api_prefix[i]);
		if (prefixed) {
			char owner[GITRULES_NAME_MAX + 1], repo[GITRULES_NAME_MAX + 1];
			int at = base + gp->napi_prefix;

			for (i = 0; i < at + 2; i++) {
				if (pn.seg[i].escaped) {
					deny(v, GITRULES_RULE_PATH,
					     "the API prefix and OWNER/REPO of an API path may hold no "
					     "percent-escape");
					return;
				}
			}
			if (!read_repo(gp, &segs[at], 2, false, owner, repo, v))
				return;
			if (api_repo_decide(p, gp, &pn, at + 2, r, owner, repo, v))
				return;
		}
	}
	if (policy_git_api_path_allowed(p, pn.path)) {
		allow_api_allow(v);
		return;
	}
	if (v->repo[0])
		return; /* the repository's own refusal says more */
	v->op = GITRULES_OP_NONE;
	v->need = 0;
	deny(v, GITRULES_RULE_API,
	     "neither under the repository API of a repository in scope nor under git.api_allow");
}

/* ------------------------------------------------------------------ */
/* Dispatch and SSH                                                   */
/* ------------------------------------------------------------------ */

void gitrules_decide_http(const struct policy *p, const char *host,
			  const struct gitrules_request *r,
			  struct gitrules_verdict *v)
{
	unsigned int kind = gitrules_host_kind(p, host);

	if (kind == (GITRULES_HOST_SCM | GITRULES_HOST_API)) {
		if (r->path.len >= 5 && memcmp(r->path.ptr, "/api/", 5) == 0)
			gitrules_decide_api(p, host, r, v);
		else
			gitrules_decide_scm(p, host, r, v);
	} else if (kind == GITRULES_HOST_API) {
		gitrules_decide_api(p, host, r, v);
	} else {
		gitrules_decide_scm(p, host, r, v);
	}
}

bool gitrules_decide_ssh(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct gitrules_verdict *v)
{
	if (port != 22)
		return false;
	verdict_init(v);
	v->op = GITRULES_OP_SSH;
	v->rule = GITRULES_RULE_SSH;
	if (!p->git_ssh) {
		deny(v, GITRULES_RULE_SSH,
		     "SSH (port 22) is refused: it cannot be bound to a repository (git.ssh is false)");
		return true;
	}
	if (t->is_addr || !in_list(p->git_hosts, p->ngit_hosts, t->name)) {
		deny(v, GITRULES_RULE_SSH, "SSH (port 22) reaches only git.hosts");
		return true;
	}
	v->decision = GITRULES_ALLOW;
	snprintf(v->reason, sizeof(v->reason),
		 "SSH to a git host, allowed by git.ssh (not bound to a repository)");
	return true;
}

char *gitrules_credential_header(const char *user, const char *token, size_t len)
{
	static const char basic[] = "Basic ";
	size_t ul = strlen(user), n = ul + 1 + len, i, out_len;
	unsigned char *plain;
	char *out;

	ASSERT(len >= 1 && len <= GITRULES_TOKEN_MAX);
	for (i = 0; i < len; i++)
		ASSERT((unsigned char)token[i] > 0x20 && (unsigned char)token[i] < 0x7f);
	plain = util_xmalloc(n);
	memcpy(plain, user, ul + 1); /* its NUL becomes the ':' */
	plain[ul] = ':';
	memcpy(plain + ul + 1, token, len);
	out_len = sizeof(basic) - 1 + 4 * ((n + 2) / 3);
	out = util_xmalloc(out_len + 1);
	memcpy(out, basic, sizeof(basic) - 1);
	ASSERT((size_t)EVP_EncodeBlock((unsigned char *)out + sizeof(basic) - 1, plain, (int)n) ==
	       out_len - (sizeof(basic) - 1));
	explicit_bzero(plain, n);
	free(plain);
	return out;
}
