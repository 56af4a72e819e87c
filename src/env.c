/* SPDX-License-Identifier: Apache-2.0
 * env.c - the agent's environment.
 *
 * DOC: Theory of Operation
 *
 * In enforce mode an unclassified variable is treated as a secret: only
 * names the policy lets through (env.pass), values the policy sets
 * (env.set), the secret placeholders and airlock's own variables reach the
 * agent. Shadow mode passes the unclassified variables too, but lists them
 * so that the caller records each by name (`env.drop`, would_block).
 * A secret's source variable (from_env) is replaced by its placeholder in
 * every mode: the real value never enters the sandbox.
 *
 * Later entries win over earlier ones with the same name, so the order of
 * building is: caller's, env.set, placeholders, airlock's own.
 */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_ca.h"
#include "oauth.h"
#include "util.h"

static const char *const airlock_vars[] = {
	"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy",
	"ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
	/* the CA bundle (the session CA among the system's) */
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
	"NPM_CONFIG_CAFILE", "PIP_CERT", "DENO_CERT", "NODE_EXTRA_CA_CERTS",
};

bool env_is_airlock_var(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(airlock_vars); i++)
		if (strlen(airlock_vars[i]) == len && memcmp(airlock_vars[i], name, len) == 0)
			return true;
	return false;
}

static bool name_is(const char *name, size_t len, const char *s)
{
	return s && strlen(s) == len && memcmp(s, name, len) == 0;
}

/* A name the policy itself gives a value to (env.set, a placeholder, a
 * secret's source): the caller's value of it never passes. */
static bool policy_owned(const struct policy *p, const char *name, size_t len)
{
	size_t i;

	if (env_is_airlock_var(name, len))
		return true;
	for (i = 0; i < p->nenv_set; i++)
		if (name_is(name, len, p->env_set_names[i]))
			return true;
	for (i = 0; i < p->nsecrets; i++)
		if (name_is(name, len, p->secrets[i].env) ||
		    name_is(name, len, p->secrets[i].from_env))
			return true;
	return oauth_env_owned(p, name, len);
}

static void push(struct env_result *r, size_t *cap, char *entry)
{
	if (r->n + 1 >= *cap) {
		*cap = *cap ? *cap * 2 : 32;
		r->envp = util_xrealloc(r->envp, *cap * sizeof(char *));
	}
	r->envp[r->n++] = entry;
	r->envp[r->n] = NULL;
}

void env_build(const struct policy *p, const struct broker *b, char **environ_in,
	       uint16_t proxy_port, bool pass_dropped, struct env_result *out)
{
	size_t cap = 0, i;
	char **e;

	memset(out, 0, sizeof(*out));
	for (e = environ_in; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		char *name;

		if (!eq || policy_owned(p, *e, len))
			continue;
		name = util_xstrndup(*e, len);
		if (policy_env_passes(p, name)) {
			free(name);
			push(out, &cap, util_xstrdup(*e));
			continue;
		}
		out->dropped = util_xrealloc(out->dropped,
					     (out->ndropped + 1) * sizeof(char *));
		out->dropped[out->ndropped++] = name;
		if (pass_dropped)
			push(out, &cap, util_xstrdup(*e));
	}
	for (i = 0; i < p->nenv_set; i++)
		push(out, &cap, util_xasprintf("%s=%s", p->env_set_names[i],
					       p->env_set_values[i]));
	for (i = 0; i < b->count; i++)
		push(out, &cap, util_xasprintf("%s=%s", b->secrets[i].def->env,
					       b->secrets[i].placeholder));
	for (i = 0; i < ARRAY_SIZE(airlock_vars); i++) {
		bool no = strcasecmp(airlock_vars[i], "NO_PROXY") == 0;

		if (!strstr(airlock_vars[i], "PROXY") && !strstr(airlock_vars[i], "proxy"))
			push(out, &cap, util_xasprintf("%s=%s", airlock_vars[i],
						       TLS_SYSTEM_BUNDLE));
		else if (no)
			push(out, &cap, util_xasprintf("%s=", airlock_vars[i]));
		else
			push(out, &cap, util_xasprintf("%s=http://127.0.0.1:%u",
						       airlock_vars[i], proxy_port));
	}
}

void env_result_set(struct env_result *r, const char *name, const char *value)
{
	size_t nl = strlen(name), j;
	char *entry = util_xasprintf("%s=%s", name, value);

	for (j = 0; j < r->n; j++)
		if (strncmp(r->envp[j], name, nl) == 0 && r->envp[j][nl] == '=') {
			free(r->envp[j]);
			r->envp[j] = entry;
			return;
		}
	r->envp = util_xrealloc(r->envp, (r->n + 2) * sizeof(char *));
	r->envp[r->n++] = entry;
	r->envp[r->n] = NULL;
}

void env_result_free(struct env_result *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->envp[i]);
	free(r->envp);
	for (i = 0; i < r->ndropped; i++)
		free(r->dropped[i]);
	free(r->dropped);
	memset(r, 0, sizeof(*r));
}
