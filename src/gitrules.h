/* SPDX-License-Identifier: Apache-2.0
 * gitrules.h - the git binding's decisions (docs/GIT.md): which request to
 * an SCM host (git.hosts) or to its REST API (git.api_hosts) is a git
 * operation on a repository in scope, and which SSH connection may pass.
 *
 * Pure functions over the policy and the request's bytes: no I/O, no
 * allocation, no state. Table-tested in tests/unit/test_gitrules.c and
 * fuzzed by tests/fuzz/fuzz_gitrules.c. The DOC block of gitrules.c says
 * why each rule exists.
 *
 * Calling pattern in the proxy, for each request read inside an
 * intercepted tunnel to @host (the CONNECT host, normalised):
 *
 *	struct gitrules_request r = { req.method, req.path, req.query,
 *				      req.has_query };
 *	gitrules_decide_http(policy, host, &r, &v);
 *	if (v.decision == GITRULES_NEED_BODY) {
 *		read the whole body, at most GITRULES_LFS_BODY_MAX bytes
 *		(more: gitrules_decide_lfs_batch() with the length alone
 *		refuses it), then
 *		gitrules_decide_lfs_batch(&v, body, len);
 *	}
 *	ALLOW: record git.allow (host, repo when v.repo[0], operation,
 *	       rule); forward v.target instead of the client's target when
 *	       v.target[0] (SCM requests); on an SCM host drop the agent's
 *	       Authorization and add gitrules_credential_header(token); on
 *	       an API host substitute the token's placeholder in
 *	       Authorization; if there is no valid token (a failed refresh
 *	       after expiry) answer 502 instead;
 *	DENY:  record git.block (repo, operation, v.rule, v.reason); in
 *	       enforce mode answer 403, in shadow mode forward the client's
 *	       request unchanged but WITHOUT the token (never inject on a
 *	       would_block request).
 *
 * For CONNECT and transparent connections to port 22: gitrules_decide_ssh().
 */
#ifndef AIRLOCK_GITRULES_H
#define AIRLOCK_GITRULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostname.h"
#include "http.h"
#include "policy.h"

/* Longest path (without its query) of a git request: longer ones are
 * refused. Smart-HTTP paths are short ("/OWNER/REPO.git/info/refs"); API
 * paths carry file names and refs, hence the larger bound. */
#define GITRULES_PATH_MAX 1024
#define GITRULES_API_PATH_MAX 4096
/* Segments of a path (after empty ones are dropped): more are refused. */
#define GITRULES_SEGMENTS_MAX 64
/* OWNER and REPO: 1-255 bytes each, as in the policy. */
#define GITRULES_NAME_MAX 255
/* Bytes of an LFS batch body gitrules_decide_lfs_batch() reads. git-lfs
 * sends at most 100 objects per batch (under 20 KiB). */
#define GITRULES_LFS_BODY_MAX ((size_t)1024 * 1024)
#define GITRULES_REASON_MAX 256

/* Keep gitrules_decision_to_string() in sync (static_assert). */
enum gitrules_decision {
	GITRULES_DENY = 0,   /* refused: git.block */
	GITRULES_ALLOW,      /* a git operation in scope: git.allow */
	GITRULES_NEED_BODY,  /* an LFS batch of a repository in scope: its
				operation is in the body, decide with
				gitrules_decide_lfs_batch() */
	GITRULES_DECISION_COUNT
};

const char *gitrules_decision_to_string(enum gitrules_decision d);

/* The operation a request performs; the receipt's "operation". Keep
 * gitrules_op_to_string() in sync (static_assert). */
enum gitrules_op {
	GITRULES_OP_NONE = 0,     /* "none": not a git operation */
	GITRULES_OP_FETCH,        /* "fetch": upload-pack; API GET/HEAD */
	GITRULES_OP_PUSH,         /* "push": receive-pack; other API methods */
	GITRULES_OP_LFS_BATCH,    /* "lfs-batch": until the body is read */
	GITRULES_OP_LFS_DOWNLOAD, /* "lfs-download" (needs fetch) */
	GITRULES_OP_LFS_UPLOAD,   /* "lfs-upload" (needs push) */
	GITRULES_OP_LFS_LOCKS,    /* "lfs-locks": list (fetch), lock,
				     unlock, verify (push) */
	GITRULES_OP_API,          /* "api": a git.api_allow path */
	GITRULES_OP_SSH,          /* "ssh": a connection to port 22 */
	GITRULES_OP_COUNT
};

const char *gitrules_op_to_string(enum gitrules_op o);

/* The rule or check that decided; the receipt's "rule". Keep
 * gitrules_rule_to_string() in sync (static_assert). */
enum gitrules_rule {
	GITRULES_RULE_SESSION_REPO = 0, /* "session.repo": allowed, the
					   session's own repository */
	GITRULES_RULE_REPOS,      /* "git.repos": allowed by a git.repos
				     entry */
	GITRULES_RULE_API_ALLOW,  /* "git.api_allow": allowed by a prefix */
	GITRULES_RULE_SSH,        /* "git.ssh": SSH allowed or refused */
	GITRULES_RULE_HOST,       /* "git.host": not an SCM (API) host of
				     the policy: the caller asked the wrong
				     question */
	GITRULES_RULE_PATH,       /* "git.path": a path that is ambiguous or
				     malformed (escapes, "..", backslash,
				     control bytes, too long) */
	GITRULES_RULE_ENDPOINT,   /* "git.endpoint": not a smart-HTTP or LFS
				     request (wrong method, query, dumb
				     HTTP, any other path) */
	GITRULES_RULE_REPO,       /* "git.repo": a repository out of scope */
	GITRULES_RULE_OPERATION,  /* "git.operation": in scope, but not for
				     this operation (a sibling's push) */
	GITRULES_RULE_LFS,        /* "git.lfs": an LFS batch body without a
				     valid operation */
	GITRULES_RULE_API,        /* "git.api": an API path outside the
				     binding */
	GITRULES_RULE_API_ADMIN,  /* "git.api_admin": in a repository in
				     scope, a request that creates or hands
				     out credentials, grants access or moves
				     the repository, not in git.api_allow */
	GITRULES_RULE_COUNT
};

const char *gitrules_rule_to_string(enum gitrules_rule r);

/* A request inside an intercepted tunnel, as http_parse_request() gives
 * it (slices, not NUL-terminated, may hold any byte). */
struct gitrules_request {
	struct http_slice method;
	struct http_slice path;   /* from the first '/' up to '?' */
	struct http_slice query;  /* after '?' */
	bool has_query;           /* a '?' was present (even "?" alone) */
};

/* What a decision concluded. */
struct gitrules_verdict {
	enum gitrules_decision decision;
	enum gitrules_rule rule;
	enum gitrules_op op;
	/* The POLICY_GIT_* right the operation needs (0 when the request is
	 * no operation, or for NEED_BODY until the body is read), and the
	 * rights the policy grants on repo. */
	unsigned int need;
	unsigned int allowed;
	/* "owner/repo", lowercase, without ".git"; "" when the request
	 * named no repository (or one that could not be read). */
	char repo[2 * GITRULES_NAME_MAX + 2];
	/* SCM requests, when ALLOW or NEED_BODY: the request-target to send
	 * upstream in place of the client's, "/owner/repo.git/REST[?query]"
	 * -- lowercase, one slash between segments, the operation's path
	 * exactly -- so that what was decided is what the server reads.
	 * "" otherwise, and for API requests (forwarded unchanged: the
	 * decision refuses every spelling it would have to rewrite). */
	char target[GITRULES_PATH_MAX + 2 * GITRULES_NAME_MAX + 64];
	char reason[GITRULES_REASON_MAX]; /* one line, printable ASCII */
};

/* Kinds of git host, as bits. */
#define GITRULES_HOST_SCM 1u /* in git.hosts */
#define GITRULES_HOST_API 2u /* in git.api_hosts */

/* Which lists name @host (a normalised name; a trailing dot and case are
 * ignored): GITRULES_HOST_* bits, 0 for none. The proxy intercepts TLS to
 * every host with a non-zero answer and sends each request there through
 * gitrules_decide_http(). */
unsigned int gitrules_host_kind(const struct policy *p, const char *host);

/* A request to @host, which is in git.hosts, git.api_hosts or both: an
 * SCM host's requests go to gitrules_decide_scm(), an API host's to
 * gitrules_decide_api(); on a host in both lists (GitHub Enterprise
 * Server serves git and its API on one name) a path under "/api/" is an
 * API request and any other an SCM request. A host in neither list is
 * refused (git.host). Fills every field of @v. */
void gitrules_decide_http(const struct policy *p, const char *host,
			  const struct gitrules_request *r,
			  struct gitrules_verdict *v);

/* A smart-HTTP or LFS request to the SCM host @host (refused with
 * git.host unless it is in git.hosts). Accepted forms, OWNER/REPO
 * compared case-insensitively, one ".git" removed (docs/GIT.md):
 *	GET  /OWNER/REPO[.git]/info/refs?service=git-upload-pack    fetch
 *	GET  /OWNER/REPO[.git]/info/refs?service=git-receive-pack   push
 *	POST /OWNER/REPO[.git]/git-upload-pack                      fetch
 *	POST /OWNER/REPO[.git]/git-receive-pack                     push
 *	POST /OWNER/REPO[.git]/info/lfs/objects/batch               NEED_BODY
 *	GET|HEAD /OWNER/REPO[.git]/info/lfs/objects/OID             lfs-download
 *	PUT  /OWNER/REPO[.git]/info/lfs/objects/OID                 lfs-upload
 *	POST /OWNER/REPO[.git]/info/lfs/verify                      lfs-upload
 *	GET  /OWNER/REPO[.git]/info/lfs/locks[?query]               lfs-locks, fetch
 *	POST /OWNER/REPO[.git]/info/lfs/locks                       lfs-locks, push
 *	POST /OWNER/REPO[.git]/info/lfs/locks/verify                lfs-locks, push
 *	POST /OWNER/REPO[.git]/info/lfs/locks/ID/unlock             lfs-locks, push
 * (OID: 64 lowercase hex digits; ID: 1-255 bytes of A-Z a-z 0-9 . _ -).
 * OWNER/REPO is the provider's shape (gitprov.h): with git.provider
 * "gitlab" GROUP/SUB/.../PROJECT, 2 to GITPROV_DEPTH_MAX segments, and
 * a "-" segment (a /-/ route) refused; v->repo and the target then hold
 * the whole path.
 * The path is read by pathnorm_parse() without escapes; duplicate and
 * trailing slashes are dropped. Refused: every path pathnorm.c refuses,
 * any byte but A-Z a-z 0-9 . _ - / in the path (so every percent-escape,
 * ';', backslash, control and non-ASCII byte), segments of dots only
 * ("." "..", "..."), a REPO that still
 * ends in ".git" after one is removed, a path longer than
 * GITRULES_PATH_MAX, a query on any form but info/refs and the lock list,
 * nested groups where the provider has none (more than OWNER/REPO
 * before the operation), and everything else. ALLOW and NEED_BODY set
 * v->target. */
void gitrules_decide_scm(const struct policy *p, const char *host,
			 const struct gitrules_request *r,
			 struct gitrules_verdict *v);

/* Completes a NEED_BODY verdict of gitrules_decide_scm() with the LFS
 * batch request body (@len bytes; the caller read all of it, or passes
 * its length alone with @body NULL when it was over GITRULES_LFS_BODY_MAX,
 * which refuses it). The body is a JSON object whose "operation" is
 * "download" (lfs-download, needs fetch) or "upload" (lfs-upload, needs
 * push); anything else is refused (git.lfs). The caller forwards exactly
 * the bytes it passed here. @v must hold NEED_BODY (ASSERTed); it becomes
 * ALLOW or DENY. */
void gitrules_decide_lfs_batch(struct gitrules_verdict *v, const char *body,
			       size_t len);

/* A request to the REST API host @host (refused with git.host unless it
 * is in git.api_hosts). The repository prefix is the provider's
 * (gitprov.h): GitHub's below, Bitbucket's /2.0/repositories/W/R, and
 * GitLab's /api/v4/projects/ID where ID is the project's path with '/'
 * as %2F (decoded exactly once: no other escape) or a numeric id that
 * git.project_ids maps; git.api_allow is then compared with the path as
 * decoded, the project written as its path. For GitHub, allowed:
 *  - [/api/v3]/repos/OWNER/REPO and everything below it, for a repository
 *    in scope on the session repository's host (without session.repo:
 *    the one host of git.hosts, if there is exactly one): GET and HEAD
 *    need fetch, other methods push;
 *  - a path under one of git.api_allow (whole segments, compared with
 *    the decoded path), any method.
 * The path is read by pathnorm_parse() with PATHNORM_ESCAPES: refused
 * (git.path) is every path it refuses (';' parameters, segments of dots
 * only, %2E %2F %5C %25 %3B %3F %23, control bytes, escapes that are not
 * UTF-8, backslashes...), "//" (but one trailing '/'), a path longer than
 * GITRULES_API_PATH_MAX or of more than GITRULES_SEGMENTS_MAX segments,
 * any percent-escape in "api", "v3", "repos", OWNER or REPO, a REPO
 * ending in ".git". Within a repository in scope, the requests that
 * create or hand out credentials, grant access or move the repository
 * (keys, hooks, collaborators, invitations, transfer, actions/secrets,
 * actions/variables, actions/runners, environments/E/secrets and
 * variables, dependabot/secrets, codespaces/secrets, any method; a PATCH
 * of the repository itself; decoded segments, any case) are refused
 * (git.api_admin) unless git.api_allow lists the path. Every other path
 * is refused (git.api). The query is not looked at: it names no
 * repository. v->target stays "". */
void gitrules_decide_api(const struct policy *p, const char *host,
			 const struct gitrules_request *r,
			 struct gitrules_verdict *v);

/* A connection to @t:@port. Returns false when @port is not 22 (not an
 * SSH question: the egress rules decide alone, @v untouched). For port 22
 * fills @v: refused unless git.ssh is true, and then allowed only to a
 * name in git.hosts (never an IP literal); rule git.ssh, op ssh. The
 * proxy asks after egress.deny (a deny rule still wins) and instead of
 * egress.allow for port 22, then checks the addresses as for any name. */
bool gitrules_decide_ssh(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct gitrules_verdict *v);

/* The Authorization value the proxy injects on an allowed SCM request:
 * "Basic " + base64(@user + ":" + token), @user the provider's
 * (gitprov.h: "x-access-token" for GitHub, "oauth2" for GitLab,
 * "x-token-auth" for Bitbucket). @token is @len (1 to
 * GITRULES_TOKEN_MAX) bytes of visible ASCII, ASSERTed: the caller
 * checked the token when it got it. Returns a new string, a credential:
 * the caller wipes it (explicit_bzero over strlen) before free(). */
#define GITRULES_TOKEN_MAX 8192
char *gitrules_credential_header(const char *user, const char *token, size_t len);

#endif /* AIRLOCK_GITRULES_H */
