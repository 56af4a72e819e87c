/* SPDX-License-Identifier: Apache-2.0
 * gitprov.h - the SCM providers of the git binding (git.provider, SPEC
 * 3.5, docs/GIT.md): one table, one row a provider, holding everything
 * that differs between GitHub, GitLab and Bitbucket -- the depth of a
 * repository's path on a git host, the REST prefix a repository's API
 * lives under, the admin endpoints (git.api_admin) below it, and the
 * credential's forms. gitrules.c, gitfilter.c and policy.c read the row;
 * none of them branches on the provider's name.
 *
 * Pure data and lookups: no I/O, no allocation.
 */
#ifndef AIRLOCK_GITPROV_H
#define AIRLOCK_GITPROV_H

#include <stdbool.h>
#include <stddef.h>

/* Keep the table of gitprov.c in sync (static_assert). */
enum gitprov_id {
	GITPROV_GITHUB = 0, /* the default */
	GITPROV_GITLAB,
	GITPROV_BITBUCKET,
	GITPROV_COUNT
};

/* Most groups a GitLab path nests (GitLab's own limit is 20 subgroups
 * under a top group): a repository is at most this many segments. */
#define GITPROV_DEPTH_MAX 21

/* An admin endpoint below a repository's API prefix (git.api_admin):
 * segments compared decoded and ignoring case; seg1 NULL: seg0 and
 * everything below it; seg1 "*": any one segment, then seg2. */
struct gitprov_admin {
	const char *seg0, *seg1, *seg2;
	const char *what; /* for the reason */
};

/* How a repository is named in the REST API. */
enum gitprov_api_id {
	GITPROV_API_OWNER_REPO = 0, /* PREFIX/OWNER/REPO: two plain segments */
	GITPROV_API_ENCODED_PATH,   /* PREFIX/ID: one segment, the project's
				       path with each '/' as %2F, or a
				       numeric id (git.project_ids) */
};

struct gitprov {
	const char *name;      /* git.provider's value, receipts' "provider" */
	const char *display;   /* "GitHub" */
	/* Segments of a repository's path on a git host: NAMESPACE.../REPO.
	 * GitHub and Bitbucket: exactly 2 (OWNER/REPO, WORKSPACE/REPO);
	 * GitLab: 2 to GITPROV_DEPTH_MAX (GROUP/SUB/.../PROJECT). */
	int depth_min, depth_max;
	/* A segment "-" on a git host starts a route that is not the
	 * project's repository (GitLab's /-/ routes: web pages, archives,
	 * snippets' repositories). */
	bool dash_routes;
	/* The REST API: segments before the repository, and an optional
	 * base in front of them (GitHub Enterprise Server's /api/v3). */
	const char *api_prefix[3];
	int napi_prefix;
	const char *api_base[2]; /* NULL: none */
	enum gitprov_api_id api_id;
	/* git.api_admin */
	const struct gitprov_admin *admin;
	size_t nadmin;
	const char *const *self_methods; /* methods that change the repository
					    itself (visibility, name, owner) */
	size_t nself_methods;
	/* Credentials: the Basic user name injected on git hosts; a header
	 * besides Authorization that carries a token on the API (NULL:
	 * none). */
	const char *git_user;
	const char *api_token_header;
};

const struct gitprov *gitprov_get(enum gitprov_id id);

/* The provider named @name ("github", "gitlab", "bitbucket", exactly).
 * Returns false for anything else. */
bool gitprov_from_name(const char *name, enum gitprov_id *out);

/* "github, gitlab, bitbucket": for error messages. */
const char *gitprov_names(void);

#endif /* AIRLOCK_GITPROV_H */
