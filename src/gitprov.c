/* SPDX-License-Identifier: Apache-2.0
 * gitprov.c - the provider table of the git binding.
 *
 * DOC: Theory of Operation
 *
 * GitHub, GitLab and Bitbucket name repositories and their APIs in
 * different shapes; the binding's rules are the same. So the shapes live
 * here, one row a provider, and the rules (gitrules.c), the filter
 * (gitfilter.c) and the policy checker (policy.c) read the row:
 *
 * - the depth of a repository's path on a git host (GitHub OWNER/REPO,
 *   Bitbucket WORKSPACE/REPO, GitLab GROUP/SUB/.../PROJECT) and whether a
 *   "/-/" segment starts a route of its own (GitLab);
 * - the REST prefix a repository's API lives under and how the
 *   repository is named there (two segments, or GitLab's one %2F-encoded
 *   segment or numeric id);
 * - the admin endpoints below it that mint credentials, grant access or
 *   move the repository (git.api_admin), and the methods that change the
 *   repository itself;
 * - the credential's forms: the Basic user name on git hosts
 *   (x-access-token, oauth2, x-token-auth) and a token header of the API
 *   besides Authorization (GitLab's PRIVATE-TOKEN).
 *
 * Adding a provider is adding a row (and its name to git.provider's
 * documentation); no rule branches on a provider's name.
 */
#include "gitprov.h"

#include <assert.h>
#include <string.h>

#include "util.h"

static const struct gitprov_admin github_admin[] = {
	{ "keys", NULL, NULL, "deploy keys" },
	{ "hooks", NULL, NULL, "webhooks" },
	{ "collaborators", NULL, NULL, "collaborators" },
	{ "invitations", NULL, NULL, "invitations" },
	{ "transfer", NULL, NULL, "a transfer of the repository" },
	{ "actions", "secrets", NULL, "Actions secrets" },
	{ "actions", "variables", NULL, "Actions variables" },
	{ "actions", "runners", NULL, "Actions runners and their registration tokens" },
	{ "environments", "*", "secrets", "environment secrets" },
	{ "environments", "*", "variables", "environment variables" },
	{ "dependabot", "secrets", NULL, "Dependabot secrets" },
	{ "codespaces", "secrets", NULL, "Codespaces secrets" },
};

static const struct gitprov_admin gitlab_admin[] = {
	{ "access_tokens", NULL, NULL, "project access tokens" },
	{ "deploy_tokens", NULL, NULL, "deploy tokens" },
	{ "deploy_keys", NULL, NULL, "deploy keys" },
	{ "variables", NULL, NULL, "CI/CD variables" },
	{ "hooks", NULL, NULL, "webhooks" },
	{ "members", NULL, NULL, "members" },
	{ "invitations", NULL, NULL, "invitations" },
	{ "share", NULL, NULL, "a share with a group" },
	{ "transfer", NULL, NULL, "a transfer of the project" },
	{ "runners", NULL, NULL, "runners (enabling one for the project)" },
};

static const struct gitprov_admin bitbucket_admin[] = {
	{ "deploy-keys", NULL, NULL, "deploy keys" },
	{ "hooks", NULL, NULL, "webhooks" },
	{ "permissions-config", NULL, NULL, "user and group permissions" },
	{ "pipelines_config", "variables", NULL, "Pipelines variables" },
	{ "pipelines_config", "ssh", NULL, "Pipelines SSH keys" },
	{ "deployments_config", NULL, NULL, "deployment environments' variables" },
};

static const char *const patch_only[] = { "PATCH" };
static const char *const put_patch[] = { "PATCH", "PUT" };

static const struct gitprov table[] = {
	[GITPROV_GITHUB] = {
		.name = "github",
		.display = "GitHub",
		.depth_min = 2,
		.depth_max = 2,
		.api_prefix = { "repos" },
		.napi_prefix = 1,
		.api_base = { "api", "v3" },
		.api_id = GITPROV_API_OWNER_REPO,
		.admin = github_admin,
		.nadmin = ARRAY_SIZE(github_admin),
		.self_methods = patch_only,
		.nself_methods = ARRAY_SIZE(patch_only),
		.git_user = "x-access-token",
		.api_token_header = NULL,
	},
	[GITPROV_GITLAB] = {
		.name = "gitlab",
		.display = "GitLab",
		.depth_min = 2,
		.depth_max = GITPROV_DEPTH_MAX,
		.dash_routes = true,
		.api_prefix = { "api", "v4", "projects" },
		.napi_prefix = 3,
		.api_id = GITPROV_API_ENCODED_PATH,
		.admin = gitlab_admin,
		.nadmin = ARRAY_SIZE(gitlab_admin),
		.self_methods = put_patch,
		.nself_methods = ARRAY_SIZE(put_patch),
		.git_user = "oauth2",
		.api_token_header = "PRIVATE-TOKEN",
	},
	[GITPROV_BITBUCKET] = {
		.name = "bitbucket",
		.display = "Bitbucket",
		.depth_min = 2,
		.depth_max = 2,
		.api_prefix = { "2.0", "repositories" },
		.napi_prefix = 2,
		.api_id = GITPROV_API_OWNER_REPO,
		.admin = bitbucket_admin,
		.nadmin = ARRAY_SIZE(bitbucket_admin),
		.self_methods = put_patch,
		.nself_methods = ARRAY_SIZE(put_patch),
		.git_user = "x-token-auth",
		.api_token_header = NULL,
	},
};
static_assert(ARRAY_SIZE(table) == GITPROV_COUNT, "the provider table");

const struct gitprov *gitprov_get(enum gitprov_id id)
{
	ASSERT((unsigned int)id < GITPROV_COUNT);
	return &table[id];
}

bool gitprov_from_name(const char *name, enum gitprov_id *out)
{
	size_t i;

	for (i = 0; name && i < ARRAY_SIZE(table); i++) {
		if (strcmp(name, table[i].name) == 0) {
			*out = (enum gitprov_id)i;
			return true;
		}
	}
	return false;
}

const char *gitprov_names(void)
{
	return "\"github\", \"gitlab\" or \"bitbucket\"";
}
