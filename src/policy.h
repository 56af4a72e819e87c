/* SPDX-License-Identifier: Apache-2.0
 * policy.h - the JSON policy: validation, defaults, canonical form and
 * digest.
 */
#ifndef AIRLOCK_POLICY_H
#define AIRLOCK_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "gitprov.h"
#include "hostname.h"

enum policy_mode {
	POLICY_MODE_OFF = 0,
	POLICY_MODE_SHADOW,
	POLICY_MODE_ENFORCE,
	POLICY_MODE_COUNT
};

const char *policy_mode_to_string(enum policy_mode m);
/* Returns false for anything but "off", "shadow", "enforce". */
bool policy_mode_from_string(const char *s, enum policy_mode *out);

#define POLICY_SECRET_ANY_HEADER NULL

/* One `capture` rule of a secret (docs/SECRETS.md "Captured values"). */
struct policy_capture {
	struct host_rule *hosts; /* at least one */
	size_t nhosts;
	char **methods;    /* upper-case, sorted; NULL = any */
	size_t nmethods;
	char **paths;      /* exact paths, '*' one whole segment; NULL = any */
	size_t npaths;
	char **json;       /* RFC 6901 pointers to a string member */
	size_t njson;
	char **headers;    /* lowercase answer header names */
	size_t nheaders;
	char *expires;     /* RFC 6901 pointer to an RFC 3339 time or a
			      number of seconds, or NULL */
};

/* A secret of kind "aws" (SPEC §3.4) is read into one entry per
 * credential, under the secret's name and in this order: the access key
 * id, the secret access key, the session token (when given). Its requests
 * are re-signed (sigv4.c, awsfilter.c), never substituted. */
enum policy_aws_part {
	POLICY_AWS_NONE = 0, /* another kind */
	POLICY_AWS_KEY_ID,
	POLICY_AWS_SECRET,
	POLICY_AWS_TOKEN,
};

/* `oauth` of a secret (docs/SECRETS.md "OAuth"): where and how the
 * supervisor obtains the access token (the refresh_token grant). */
struct policy_oauth {
	char *token_url;   /* canonical https://HOST[:PORT]/PATH */
	char *host;        /* normalised */
	uint16_t port;
	char *path;        /* non-empty */
	char *client_id;
	char *client_secret_from_env;  /* at most one of the two; none: a */
	char *client_secret_from_file; /* public client */
	char *refresh_token_from_env;  /* exactly one of the two */
	char *refresh_token_from_file;
	char *scope;       /* or NULL */
};

struct policy_secret {
	char *name;        /* key in "secrets" */
	char *from_env;    /* exactly one of from_env / from_file is set */
	char *from_file;
	char *env;         /* variable that carries the placeholder; never
			      NULL (defaults to from_env) */
	char *prefix;      /* the placeholder's fixed start; never NULL
			      (default "airlock-ph-NAME-"; may be ""), 0-128
			      bytes of printable ASCII without space */
	struct host_rule *hosts; /* document order; at least one */
	size_t nhosts;
	char **headers;    /* lowercase, sorted; NULL = any header */
	size_t nheaders;
	char **paths;      /* request path prefixes ("/v1/"), plain byte
			      prefixes, sorted; NULL = any path */
	size_t npaths;
	char **methods;    /* upper-case method tokens, sorted; NULL = any */
	size_t nmethods;
	char **body;       /* body fields where the placeholder may be
			      substituted: "form:NAME", "json:/POINTER";
			      sorted; NULL = none */
	size_t nbody;
	struct policy_capture *capture; /* non-NULL: the value is captured
			      from answers (no from_env/from_file, no env) */
	size_t ncapture;
	enum policy_aws_part aws; /* kind "aws": which credential */
	struct policy_oauth *oauth; /* non-NULL: the value is an OAuth access
			      token the supervisor obtains (no from_env,
			      from_file or capture) */
};

#define POLICY_GIT_FETCH 1u
#define POLICY_GIT_PUSH 2u

struct policy_git_repo {
	char *host;  /* NULL = any of git.hosts (or session.repo's host) */
	char *owner; /* lowercase; GitLab: the namespace, "group/sub" */
	char *repo;  /* lowercase, without ".git" */
	unsigned int ops; /* POLICY_GIT_* */
};

/* git.project_ids: a GitLab numeric project id and the project it names. */
struct policy_git_project_id {
	uint64_t id;   /* >= 1 */
	char *repo;    /* "group/sub/project", lowercase, without ".git" */
};

/* git.gitlab_mint: the supervisor mints a project access token for the
 * session's project with a group or instance token it holds. */
struct policy_gitlab_mint {
	char *api;          /* canonical "https://HOST[:PORT][/PATH]", default
			       "https://gitlab.com"; the API is {api}/api/v4 */
	char *api_host;     /* as in struct policy_github_app */
	uint16_t api_port;
	char *api_path;
	char *token_env;    /* the supervisor's variable holding the group or
			       instance token; exactly one of token_env and
			       token_file */
	char *token_file;
	uint32_t expires_minutes; /* 1..POLICY_GITLAB_EXPIRES_MAX, default 60 */
	char *ca;           /* PEM file of CAs for api, or NULL */
};

#define POLICY_GITLAB_EXPIRES_MAX (365u * 24 * 60)

/* A level of a GitHub App permission. */
enum policy_gh_access {
	POLICY_GH_READ = 0,
	POLICY_GH_WRITE,
	POLICY_GH_ADMIN,
	POLICY_GH_ACCESS_COUNT
};

const char *policy_gh_access_to_string(enum policy_gh_access a);

struct policy_gh_permission {
	char *name;                 /* GitHub's name: [a-z][a-z0-9_]{0,63} */
	enum policy_gh_access level;
};

/* git.github_app: the supervisor mints installation tokens itself. */
struct policy_github_app {
	char *app_id;            /* client id ("Iv23li...") or the numeric App
				    id in decimal (a JSON number is turned into
				    this string) */
	uint64_t installation_id; /* >= 1 */
	char *private_key_file;  /* the App's RSA key (PEM) */
	char *api;               /* canonical base URL, "https://HOST[:PORT]
				    [/PATH]", no trailing slash; default
				    "https://api.github.com" */
	char *api_host;          /* normalised HOST of api (a name or an IP
				    address's canonical text) */
	uint16_t api_port;       /* 443 unless api names another */
	char *api_path;          /* "" or "/PATH" (e.g. "/api/v3") */
	char *ca;                /* PEM file of CAs for api; NULL = system
				    store plus egress.upstream_ca */
	/* Added to what the supervisor derives (contents: read or write,
	 * metadata: read); for a name it derives too, the higher level
	 * wins. Sorted by name. */
	struct policy_gh_permission *permissions;
	size_t npermissions;
};

struct policy_endpoint {
	struct addr addr;
	uint16_t port;
};

enum policy_ledger {
	POLICY_LEDGER_MEMORY = 0, /* null: this session alone, in memory */
	POLICY_LEDGER_SQLITE,     /* "sqlite:/PATH" */
	POLICY_LEDGER_POSTGRESQL, /* "postgresql://..." or "postgres://..." */
	POLICY_LEDGER_COUNT
};

const char *policy_ledger_to_string(enum policy_ledger l);

enum policy_spend_api {
	POLICY_SPEND_ANTHROPIC = 0,
	POLICY_SPEND_OPENAI,
	POLICY_SPEND_API_COUNT
};

const char *policy_spend_api_to_string(enum policy_spend_api a);

enum policy_on_exhausted {
	POLICY_EXHAUSTED_BLOCK = 0, /* 429 for this and further calls */
	POLICY_EXHAUSTED_STOP,      /* 429, then the session is ended */
	POLICY_EXHAUSTED_COUNT
};

const char *policy_on_exhausted_to_string(enum policy_on_exhausted e);

/* spend.server_state: a metered request whose input the provider adds
 * from state the proxy cannot see (previous_response_id, a stored
 * prompt, a file id, ...). */
enum policy_server_state {
	POLICY_SERVER_STATE_REFUSE = 0, /* 403 budget.block spend.unbounded */
	POLICY_SERVER_STATE_ALLOW,      /* reserve server_state_reserve_usd more */
	POLICY_SERVER_STATE_COUNT
};

const char *policy_server_state_to_string(enum policy_server_state s);

struct policy_spend_provider {
	enum policy_spend_api api;
	char **hosts;      /* exact normalised names, sorted; at least one;
			      a host belongs to one provider only */
	size_t nhosts;
};

/* One entry of spend.prices, USD per million tokens. Every value is
 * finite, 0 <= v <= 1e6 (cache_write <= 1.25e6), kept to 15 significant
 * digits. */
struct policy_price {
	char *model;       /* as written: an exact name, or a prefix
			      followed by '*' ("*" alone matches any) */
	bool is_prefix;    /* model ends in '*' */
	double input;
	double output;
	double cache_write; /* default 1.25 x input */
	double cache_read;  /* default 0.1 x input */
};

/* publish: one port of the sandbox reachable from outside (docs/SANDBOX.md,
 * "Publishing"). */
enum policy_publish_protocol {
	POLICY_PUBLISH_HTTP = 0,
	POLICY_PUBLISH_TCP,
	POLICY_PUBLISH_PROTOCOL_COUNT
};

const char *policy_publish_protocol_to_string(enum policy_publish_protocol p);

#define POLICY_PUBLISH_MAX 64               /* entries */
#define POLICY_PUBLISH_CONNS_DEFAULT 64     /* max_conns */
#define POLICY_PUBLISH_CONNS_MAX 4096

struct policy_publish {
	struct policy_endpoint listen;  /* where the supervisor side listens */
	uint16_t port;                  /* the sandbox's loopback port */
	enum policy_publish_protocol protocol; /* default http */
	char *auth;                     /* a key of secrets, or NULL */
	char *auth_cookie;              /* a cookie name, or NULL (bearer only) */
	uint64_t max_response_bytes;    /* 0: unlimited */
	uint64_t max_conns;             /* open connections at once */
	uint64_t rate_bytes;            /* bytes per second, both ways, over
					   the listener; 0: unlimited */
	bool exposed;                   /* a wildcard or non-loopback listen
					   is meant */
};

struct policy {
	enum policy_mode mode;
	char *session_id;   /* NULL when the policy names none */
	char *session_repo; /* "host/owner/repo", lowercase; NULL if none
			       (GitLab: "host/group/sub/project": the
			       repository is after the last '/') */

	/* Rule lists and resolvers keep document order (an index names a
	 * rule; resolvers are asked in order); the other lists are sets,
	 * sorted, without duplicates. */
	struct host_rule *allow;
	size_t nallow;
	struct host_rule *deny;
	size_t ndeny;
	uint16_t *ports;    /* ascending; may be empty */
	size_t nports;
	struct addr_cidr *allow_ranges;
	size_t nallow_ranges;
	struct policy_endpoint *resolvers; /* empty = the host's resolv.conf */
	size_t nresolvers;
	char *upstream_ca;  /* NULL = system trust store */
	struct host_rule *intercept; /* egress.intercept: more hosts whose
					TLS the proxy terminates, for audit;
					document order */
	size_t nintercept;
	bool transparent;   /* egress.transparent */

	struct policy_secret *secrets; /* document order */
	size_t nsecrets;

	char **git_hosts;   /* normalised names, sorted */
	size_t ngit_hosts;
	char **git_api_hosts; /* git.api_hosts: REST API hosts, same form */
	size_t ngit_api_hosts;
	struct policy_git_repo *git_repos;
	size_t ngit_repos;
	char *git_credential; /* a key of secrets, or NULL */
	struct policy_github_app *git_github_app; /* NULL if none; never set
						     together with
						     git_credential */
	char **git_token_env; /* variables that get the git token's
				 placeholder, sorted; default GH_TOKEN,
				 GITHUB_TOKEN; may be empty */
	size_t ngit_token_env;
	char **git_api_allow; /* path prefixes on git.api_hosts, whole
				 segments ("/graphql" covers "/graphql" and
				 "/graphql/..."); no trailing '/', never "/";
				 sorted */
	size_t ngit_api_allow;
	struct policy_git_project_id *git_project_ids; /* sorted by id */
	size_t ngit_project_ids;
	struct policy_gitlab_mint *git_gitlab_mint; /* NULL if none; never
						       with git_credential or
						       git_github_app */
	enum gitprov_id git_provider; /* git.provider; default GitHub */
	bool git_ssh;
	bool receipts_checkpoint; /* receipts.sign "checkpoint" (else "line") */

	/* spend */
	bool spend_has_cap;    /* false: cap_usd null (no cap of its own) */
	double spend_cap_usd;  /* >= 0, valid when spend_has_cap */
	enum policy_ledger spend_ledger_kind;
	char *spend_ledger;    /* canonical text; NULL for memory */
	char *spend_ledger_target; /* the sqlite file's absolute path, or
				      the libpq URI (== spend_ledger); NULL
				      for memory */
	struct policy_spend_provider *spend_providers; /* document order */
	size_t nspend_providers;
	struct policy_price *spend_prices; /* sorted by model */
	size_t nspend_prices;
	char *spend_parent;    /* a session id, or NULL */
	enum policy_on_exhausted spend_on_exhausted;
	uint64_t spend_max_body_bytes;          /* default 32 MiB */
	uint64_t spend_default_max_output_tokens; /* default 8192 */
	char **spend_pass;     /* path prefixes passed unmetered on a
				  provider's hosts under a cap, whole
				  segments, no trailing '/', never "/";
				  sorted; default
				  ["/v1/messages/count_tokens"] */
	size_t nspend_pass;
	enum policy_server_state spend_server_state; /* default refuse */
	bool spend_has_server_state_reserve;
	double spend_server_state_reserve_usd; /* >= 0; set (a number) when
						  server_state is allow */
	uint64_t spend_ledger_timeout_ms;      /* default 5000 */
	uint64_t receipts_checkpoint_ms;       /* receipts.checkpoint_ms, default 250 */

	char **env_pass;    /* names, sorted; a trailing '*' is a prefix match */
	size_t nenv_pass;
	char **env_set_names;
	char **env_set_values;
	size_t nenv_set;

	char **fs_rw;       /* absolute, cleaned ("/a//b/" -> "/a/b"), sorted */
	size_t nfs_rw;
	char **fs_ro;       /* host paths shown read-only even when hidden */
	size_t nfs_ro;
	char **fs_hide;
	size_t nfs_hide;
	char **fs_protect;  /* workspace-relative ("a/b", no leading '/', no
			       "." or ".."), cleaned, sorted: read-only to
			       the agent */
	size_t nfs_protect;

	struct policy_publish *publish; /* sorted by listen */
	size_t npublish;

	char *canonical;    /* canonical JSON of the effective policy */
	char digest[7 + 64 + 1]; /* "sha256:" + hex */
};

/* One validation error: "json.path: message". */
struct policy_error {
	char *path;    /* e.g. "egress.allow[2]"; "$" for the root */
	char *message;
};

struct policy_errors {
	struct policy_error *items;
	size_t count;
};

void policy_errors_free(struct policy_errors *errs);

/* Parses and validates a policy document of @len bytes. On success returns
 * a policy (free with policy_free()) and leaves @errs empty; on failure
 * returns NULL and fills @errs with every error found, in document order
 * (@errs is overwritten, not appended to: free an earlier result first;
 * free this one with policy_errors_free()).
 * If @mode_override is not NULL it replaces "mode" before the canonical form
 * and digest are computed (the digest is of the effective policy). */
struct policy *policy_parse(const char *text, size_t len,
			    const enum policy_mode *mode_override,
			    struct policy_errors *errs);

/* Reads @path (at most 1 MiB) and parses it. File errors are reported as one
 * error with path "$". */
struct policy *policy_load(const char *path,
			   const enum policy_mode *mode_override,
			   struct policy_errors *errs);

/* The embedded default policy (version 1, shadow, nothing allowed, no
 * secrets), parsed from the JSON text that policy_default_text() returns
 * (examples/shadow-default.json is a copy). */
struct policy *policy_default(const enum policy_mode *mode_override);
const char *policy_default_text(void);

void policy_free(struct policy *p);

/* Is @s a valid session id: 1-128 characters of A-Z a-z 0-9 . _ : -,
 * starting with a letter or a digit (session.id, --session)? */
bool policy_session_id_valid(const char *s);

/* Does the name @var pass env.pass? */
bool policy_env_passes(const struct policy *p, const char *var);

/* Is @name one of the variables airlock sets in the sandbox itself
 * (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their lowercase twins,
 * SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO,
 * NPM_CONFIG_CAFILE, PIP_CERT, DENO_CERT, NODE_EXTRA_CA_CERTS)? Neither a
 * placeholder variable nor env.set nor env.pass may name one. */
bool policy_env_is_reserved(const char *name);

/* The secret called @name (case-sensitive), or NULL. */
const struct policy_secret *policy_secret_by_name(const struct policy *p,
						  const char *name);

/* Does @s apply to a request with @method and @path (the path without its
 * query)? True when s->methods is NULL or lists @method exactly, and
 * s->paths is NULL or one of them is a byte prefix of @path. Hosts and
 * headers are the caller's. */
bool policy_secret_applies(const struct policy_secret *s, const char *method,
			   const char *path);

/* The git operations (POLICY_GIT_* bits, 0 = none) allowed on
 * HOST/OWNER/REPO: fetch|push for session.repo, an entry's ops for a
 * git.repos entry with that host, or without a host when @host is in
 * git.hosts or is session.repo's host; the union when several apply.
 * Compared case-insensitively; one trailing ".git" of @repo is ignored, one
 * trailing dot of @host too. The caller rejects ambiguous paths ("..",
 * escapes) before asking. */
unsigned int policy_git_repo_ops(const struct policy *p, const char *host,
				 const char *owner, const char *repo);

/* Is @path (without its query) under one of git.api_allow, by whole
 * segments? @path is the normal form pathnorm_parse() gave (the git rules
 * never ask about a raw request path). */
bool policy_git_api_path_allowed(const struct policy *p, const char *path);

/* The project git.project_ids maps numeric id @id to
 * ("group/sub/project"), or NULL. */
const char *policy_git_project_path(const struct policy *p, uint64_t id);

/* Does git have a token to inject (git.credential, git.github_app or
 * git.gitlab_mint)? */
bool policy_git_has_token(const struct policy *p);

/* The spend provider that meters @host (a normalised name), or NULL. */
const struct policy_spend_provider *
policy_spend_provider_for_host(const struct policy *p, const char *host);

/* The price of @model: the entry named exactly @model, else the entry
 * with the longest prefix ("NAME*") that starts @model; NULL when none
 * (an unknown price is not a price of zero: the caller refuses). */
const struct policy_price *policy_spend_price(const struct policy *p,
					      const char *model);

#endif /* AIRLOCK_POLICY_H */
