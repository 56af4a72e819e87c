/* SPDX-License-Identifier: Apache-2.0
 * policy.h - the JSON policy (SPEC §3): validation, defaults, canonical form
 * and digest.
 */
#ifndef AIRLOCK_POLICY_H
#define AIRLOCK_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
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

struct policy_secret {
	char *name;        /* key in "secrets" */
	char *from_env;    /* exactly one of from_env / from_file is set */
	char *from_file;
	char *env;         /* variable that carries the placeholder; never
			      NULL (defaults to from_env) */
	struct host_rule *hosts; /* document order; at least one */
	size_t nhosts;
	char **headers;    /* lowercase, sorted; NULL = any header */
	size_t nheaders;
};

#define POLICY_GIT_FETCH 1u
#define POLICY_GIT_PUSH 2u

struct policy_git_repo {
	char *host;  /* NULL = any of git.hosts */
	char *owner; /* lowercase */
	char *repo;  /* lowercase, without ".git" */
	unsigned int ops; /* POLICY_GIT_* */
};

struct policy_endpoint {
	struct addr addr;
	uint16_t port;
};

struct policy {
	enum policy_mode mode;
	char *session_id;   /* NULL when the policy names none */
	char *session_repo; /* "host/owner/repo", lowercase; NULL if none */

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

	struct policy_secret *secrets; /* document order */
	size_t nsecrets;

	char **git_hosts;   /* normalised names, sorted */
	size_t ngit_hosts;
	struct policy_git_repo *git_repos;
	size_t ngit_repos;
	char *git_credential; /* a key of secrets, or NULL */
	bool git_ssh;

	char **env_pass;    /* names, sorted; a trailing '*' is a prefix match */
	size_t nenv_pass;
	char **env_set_names;
	char **env_set_values;
	size_t nenv_set;

	char **fs_rw;       /* absolute, cleaned ("/a//b/" -> "/a/b"), sorted */
	size_t nfs_rw;
	char **fs_hide;
	size_t nfs_hide;
	char **fs_ro;       /* absolute, cleaned, sorted: shown read-only */
	size_t nfs_ro;
	char **fs_protect;  /* workspace-relative, cleaned ("a//b/" -> "a/b"),
			       sorted: read-only inside the workspace */
	size_t nfs_protect;

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

/* The embedded default policy of SPEC §3.7, parsed from the JSON text that
 * policy_default_text() returns (examples/shadow-default.json is a copy). */
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
 * SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS,
 * GIT_SSL_CAINFO)? Neither a secret placeholder nor env.set may use one. */
bool policy_env_is_reserved(const char *name);

#endif /* AIRLOCK_POLICY_H */
