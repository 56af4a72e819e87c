/* SPDX-License-Identifier: Apache-2.0
 * test_policy.c - policy validation, defaults, canonical form and digest.
 *
 * Documents in the tables are written with single quotes for readability;
 * json() turns every ' into " before parsing (a literal quote in a value is
 * written as \u0027). Expected errors are "path: message" lines; a line
 * ending in '*' matches any message with that prefix.
 */
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"
#include "util.h"

static char *json(const char *single_quoted)
{
	char *s = util_xstrdup(single_quoted), *p;

	for (p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	return s;
}

static struct policy *parse(const char *sq, const enum policy_mode *mode,
			    struct policy_errors *errs)
{
	char *doc = json(sq);
	struct policy *p = policy_parse(doc, strlen(doc), mode, errs);

	free(doc);
	return p;
}

/* "path: message\n" for every error. */
static char *join_errors(const struct policy_errors *errs)
{
	char *out = util_xstrdup(""), *next;
	size_t i;

	for (i = 0; i < errs->count; i++) {
		next = util_xasprintf("%s%s: %s\n", out, errs->items[i].path,
				      errs->items[i].message);
		free(out);
		out = next;
	}
	return out;
}

/* Compares line by line; an expected line ending in '*' is a prefix. */
static bool errors_match(const char *got, const char *want)
{
	while (*got && *want) {
		const char *ge = strchr(got, '\n'), *we = strchr(want, '\n');
		size_t gl, wl;

		if (!ge || !we)
			return false;
		gl = (size_t)(ge - got);
		wl = (size_t)(we - want);
		if (wl > 0 && want[wl - 1] == '*') {
			if (gl < wl - 1 || memcmp(got, want, wl - 1) != 0)
				return false;
		} else if (gl != wl || memcmp(got, want, gl) != 0) {
			return false;
		}
		got = ge + 1;
		want = we + 1;
	}
	return !*got && !*want;
}

/* ---- every validation error, with its exact path ----------------------- */

struct err_case {
	const char *doc;
	const char *want; /* "path: message\n"... */
	/* When set, "%R" in want stands for host_rule_parse()'s message on
	 * this rule: its wording belongs to hostname.c (test_hostname.c). */
	const char *rule;
};

/* @want with "%R" replaced by the host rule error of @rule. */
static char *expand_want(const struct err_case *tc)
{
	const char *r = tc->rule ? strstr(tc->want, "%R") : NULL;
	char err[512];
	struct host_rule hr;

	if (!r)
		return util_xstrdup(tc->want);
	if (host_rule_parse(tc->rule, &hr, err, sizeof(err)))
		snprintf(err, sizeof(err), "(rule unexpectedly valid)");
	return util_xasprintf("%.*s%s%s", (int)(r - tc->want), tc->want, err, r + 2);
}

#define V "'version': 1, "

static const struct err_case err_cases[] = {
	/* the document */
	{ "{", "$: invalid JSON at line 1, column 1: *\n", NULL },
	{ "{'version': 1, 'version': 1}",
	  "$: invalid JSON at line 1, column 24: duplicate object key near '\"version\"'\n", NULL },
	{ "{'version': 1}x", "$: invalid JSON at line 1, column 15: end of file expected*\n", NULL },
	{ "", "$: invalid JSON at line 1, column 0: *\n", NULL },
	{ "[]", "$: expected an object\n", NULL },
	{ "{}", "version: required key is missing\n", NULL },
	{ "{'version': 2}", "version: unsupported version 2 (this airlock reads version 1)\n", NULL },
	{ "{'version': '1'}", "version: expected the integer 1\n", NULL },
	{ "{'version': 1.0}", "version: expected the integer 1\n", NULL },
	{ "{'version': true}", "version: expected the integer 1\n", NULL },
	{ "{" V "'mode': 'audit'}", "mode: expected \"off\", \"shadow\" or \"enforce\"\n", NULL },
	{ "{" V "'mode': null}", "mode: expected \"off\", \"shadow\" or \"enforce\"\n", NULL },
	{ "{" V "'mode': 'Enforce'}", "mode: expected \"off\", \"shadow\" or \"enforce\"\n", NULL },
	{ "{" V "'budget': {'requests': 10}}", "budget: unknown key\n", NULL },
	{ "{" V "'foo bar': 1}", "$[\"foo bar\"]: unknown key\n", NULL },
	/* session */
	{ "{" V "'session': null}", "session: expected an object\n", NULL },
	{ "{" V "'session': {'user': 'x'}}", "session.user: unknown key\n", NULL },
	{ "{" V "'session': {'id': '-x'}}",
	  "session.id: expected 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit\n", NULL },
	{ "{" V "'session': {'id': 'a b'}}",
	  "session.id: expected 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit\n", NULL },
	{ "{" V "'session': {'id': 42}}", "session.id: expected a string or null\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/acme'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/acme/api/x'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': '/acme/api'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': '192.0.2.1/acme/api'}}",
	  "session.repo: the host must be a name, not an IP address\n", NULL },
	{ "{" V "'session': {'repo': 'git hub.com/acme/api'}}",
	  "session.repo: character outside a-z 0-9 - _ in host name\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/../api'}}",
	  "session.repo: OWNER must not be \".\" or \"..\"\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/ac me/api'}}",
	  "session.repo: OWNER may contain only A-Z a-z 0-9 . _ -\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/acme//api'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/acme/.git'}}",
	  "session.repo: REPO without its \".git\" must not be empty, \".\" or \"..\"\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/acme/'}}",
	  "session.repo: REPO must be 1 to 255 characters\n", NULL },
	{ "{" V "'session': {'repo': 7}}", "session.repo: expected a string or null\n", NULL },
	/* egress */
	{ "{" V "'egress': []}", "egress: expected an object\n", NULL },
	{ "{" V "'egress': {'alow': []}}", "egress.alow: unknown key\n", NULL },
	{ "{" V "'egress': {'allow': 'example.com'}}", "egress.allow: expected an array\n", NULL },
	{ "{" V "'egress': {'allow': ['example.com', 7]}}", "egress.allow[1]: expected a string\n", NULL },
	{ "{" V "'egress': {'allow': ['api.example.com', 'API.Example.com.']}}",
	  "egress.allow[1]: duplicate of egress.allow[0]\n", NULL },
	{ "{" V "'egress': {'allow': ['a..b']}}",
	  "egress.allow[0]: %R\n", "a..b" },
	{ "{" V "'egress': {'deny': ['*.*.example.com']}}",
	  "egress.deny[0]: %R\n", "*.*.example.com" },
	{ "{" V "'egress': {'deny': ['x.com:0']}}",
	  "egress.deny[0]: %R\n", "x.com:0" },
	{ "{" V "'egress': {'ports': [0]}}", "egress.ports[0]: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'egress': {'ports': [65536]}}", "egress.ports[0]: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'egress': {'ports': [443.0]}}", "egress.ports[0]: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'egress': {'ports': ['443']}}", "egress.ports[0]: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'egress': {'ports': [-1]}}", "egress.ports[0]: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'egress': {'ports': [443, 80, 443]}}", "egress.ports[2]: duplicate of egress.ports[0]\n", NULL },
	{ "{" V "'egress': {'ports': 443}}", "egress.ports: expected an array\n", NULL },
	{ "{" V "'egress': {'allow_ranges': ['10.0.0.1/8']}}",
	  "egress.allow_ranges[0]: host bits must be zero: did you mean \"10.0.0.0/8\"?\n", NULL },
	{ "{" V "'egress': {'allow_ranges': ['2001:db8::1/32']}}",
	  "egress.allow_ranges[0]: host bits must be zero: did you mean \"2001:db8::/32\"?\n", NULL },
	{ "{" V "'egress': {'allow_ranges': ['10.0.0.0/33']}}",
	  "egress.allow_ranges[0]: expected a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\"\n", NULL },
	{ "{" V "'egress': {'allow_ranges': ['intranet']}}",
	  "egress.allow_ranges[0]: expected a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\"\n", NULL },
	{ "{" V "'egress': {'allow_ranges': ['10.0.0.0/8', '10.0.0.0/8']}}",
	  "egress.allow_ranges[1]: duplicate of egress.allow_ranges[0]\n", NULL },
	{ "{" V "'egress': {'resolver': ['192.0.2.53']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['::1:53']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['[::1]:0']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['192.0.2.53:65536']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['[192.0.2.53]:53']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['dns.example:53']}}",
	  "egress.resolver[0]: expected \"IP:PORT\" with a port from 1 to 65535 (IPv6 as \"[::1]:53\")\n", NULL },
	{ "{" V "'egress': {'resolver': ['[::1]:53', '[0::1]:53']}}",
	  "egress.resolver[1]: duplicate of egress.resolver[0]\n", NULL },
	{ "{" V "'egress': {'upstream_ca': ''}}", "egress.upstream_ca: expected a non-empty path or null\n", NULL },
	{ "{" V "'egress': {'upstream_ca': ['/a']}}", "egress.upstream_ca: expected a non-empty path or null\n", NULL },
	/* secrets */
	{ "{" V "'secrets': []}", "secrets: expected an object\n", NULL },
	{ "{" V "'secrets': {'a': 'TOKEN'}}", "secrets.a: expected an object\n", NULL },
	{ "{" V "'secrets': {'bad name': {'from_env': 'T', 'hosts': ['x.com']}}}",
	  "secrets[\"bad name\"]: invalid secret name: expected 1 to 64 characters of A-Z a-z 0-9 _ . -\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'from_file': '/t', 'hosts': ['x.com']}}}",
	  "secrets.a: give one of from_env and from_file, not both\n", NULL },
	{ "{" V "'secrets': {'a': {'env': 'T', 'hosts': ['x.com']}}}",
	  "secrets.a: one of from_env and from_file is required\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': '1T', 'hosts': ['x.com']}}}",
	  "secrets.a.from_env: expected a variable name ([A-Za-z_][A-Za-z0-9_]*) or null\n", NULL },
	{ "{" V "'secrets': {'a': {'from_file': '', 'env': 'T', 'hosts': ['x.com']}}}",
	  "secrets.a.from_file: expected a non-empty path or null\n", NULL },
	{ "{" V "'secrets': {'a': {'from_file': '/run/t', 'hosts': ['x.com']}}}",
	  "secrets.a.env: required with from_file (the variable that carries the placeholder)\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'env': 'A-B', 'hosts': ['x.com']}}}",
	  "secrets.a.env: expected a variable name ([A-Za-z_][A-Za-z0-9_]*)\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T'}}}",
	  "secrets.a.hosts: required key is missing: a secret needs the hosts it may be sent to\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': []}}}",
	  "secrets.a.hosts: must not be empty: a secret needs the hosts it may be sent to\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com', 'bad host']}}}",
	  "secrets.a.hosts[1]: %R\n", "bad host" },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'headers': []}}}",
	  "secrets.a.headers: must not be empty (null or no \"headers\" means any header)\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'headers': ['x api key']}}}",
	  "secrets.a.headers[0]: expected an HTTP header field name (RFC 9110 token)\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'headers': ['x-api-key:']}}}",
	  "secrets.a.headers[0]: expected an HTTP header field name (RFC 9110 token)\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'headers': ['X-Api-Key', 'x-api-key']}}}",
	  "secrets.a.headers[1]: duplicate of secrets.a.headers[0]\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'headers': 'x-api-key'}}}",
	  "secrets.a.headers: expected an array of header names or null\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'value': 's3cret'}}}",
	  "secrets.a.value: unknown key\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'env': 'X', 'hosts': ['x.com']},"
	  " 'b': {'from_env': 'U', 'env': 'X', 'hosts': ['y.com']}}}",
	  "secrets.b.env: \"X\" is already the placeholder variable of secrets.a\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com']},"
	  " 'b-2': {'from_env': 'T', 'hosts': ['y.com']}}}",
	  "secrets[\"b-2\"].env: \"T\" is already the placeholder variable of secrets.a\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'env': 'HTTPS_PROXY', 'hosts': ['x.com']}}}",
	  "secrets.a.env: \"HTTPS_PROXY\" is one of airlock's own variables\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'no_proxy', 'hosts': ['x.com']}}}",
	  "secrets.a.env: \"no_proxy\" is one of airlock's own variables\n", NULL },
	{ "{" V "'env': {'set': {'TOKEN': 'x'}}, 'secrets': {'a': {'from_env': 'TOKEN', 'hosts': ['x.com']}}}",
	  "secrets.a.env: \"TOKEN\" is also set by env.set\n", NULL },
	/* git */
	{ "{" V "'git': {'hosts': ['*.github.com']}}",
	  "git.hosts[0]: wildcards are not allowed: git hosts are exact names\n", NULL },
	{ "{" V "'git': {'hosts': ['192.0.2.1']}}",
	  "git.hosts[0]: expected a host name, not an IP address\n", NULL },
	{ "{" V "'git': {'hosts': ['github.com:443']}}",
	  "git.hosts[0]: character outside a-z 0-9 - _ in host name\n", NULL },
	{ "{" V "'git': {'hosts': ['GitHub.com', 'github.com.']}}",
	  "git.hosts[1]: duplicate of git.hosts[0]\n", NULL },
	{ "{" V "'git': {'repos': []}}", "git.repos: expected an object\n", NULL },
	{ "{" V "'git': {'repos': {'acme': ['fetch']}}}",
	  "git.repos.acme: expected \"OWNER/REPO\" or \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'git': {'hosts': ['github.com'], 'repos': {'gitlab.com/acme/api': ['fetch']}}}",
	  "git.repos[\"gitlab.com/acme/api\"]: host \"gitlab.com\" is neither in git.hosts nor the host of session.repo\n", NULL },
	{ "{" V "'git': {'repos': {'acme/api': ['fetch'], 'Acme/API.git': ['push']}}}",
	  "git.repos[\"Acme/API.git\"]: same repository as git.repos[\"acme/api\"]\n", NULL },
	{ "{" V "'git': {'repos': {'acme/api': []}}}", "git.repos[\"acme/api\"]: must not be empty\n", NULL },
	{ "{" V "'git': {'repos': {'acme/api': 'fetch'}}}",
	  "git.repos[\"acme/api\"]: expected an array of \"fetch\" and \"push\"\n", NULL },
	{ "{" V "'git': {'repos': {'acme/api': ['fetch', 'clone']}}}",
	  "git.repos[\"acme/api\"][1]: expected \"fetch\" or \"push\"\n", NULL },
	{ "{" V "'git': {'repos': {'acme/api': ['push', 'push']}}}",
	  "git.repos[\"acme/api\"][1]: duplicate of git.repos[\"acme/api\"][0]\n", NULL },
	{ "{" V "'git': {'credential': 'github'}}", "git.credential: no secret named \"github\"\n", NULL },
	{ "{" V "'git': {'credential': 7}}", "git.credential: expected the name of a secret or null\n", NULL },
	{ "{" V "'git': {'ssh': 'no'}}", "git.ssh: expected true or false\n", NULL },
	{ "{" V "'git': {'ssh': 0}}", "git.ssh: expected true or false\n", NULL },
	{ "{" V "'git': {'lfs': true}}", "git.lfs: unknown key\n", NULL },
	/* env */
	{ "{" V "'env': {'pass': 'PATH'}}", "env.pass: expected an array\n", NULL },
	{ "{" V "'env': {'pass': ['*']}}",
	  "env.pass[0]: expected a variable name ([A-Za-z_][A-Za-z0-9_]*), optionally ending in \"*\"\n", NULL },
	{ "{" V "'env': {'pass': ['L*C']}}",
	  "env.pass[0]: expected a variable name ([A-Za-z_][A-Za-z0-9_]*), optionally ending in \"*\"\n", NULL },
	{ "{" V "'env': {'pass': ['PATH', 'HOME', 'PATH']}}", "env.pass[2]: duplicate of env.pass[0]\n", NULL },
	{ "{" V "'env': {'set': {'HTTP_PROXY': 'http://evil.example'}}}",
	  "env.set.HTTP_PROXY: \"HTTP_PROXY\" is one of airlock's own variables\n", NULL },
	{ "{" V "'env': {'set': {'SSL_CERT_FILE': '/x'}}}",
	  "env.set.SSL_CERT_FILE: \"SSL_CERT_FILE\" is one of airlock's own variables\n", NULL },
	{ "{" V "'env': {'set': {'CI': 1}}}", "env.set.CI: expected a string\n", NULL },
	{ "{" V "'env': {'set': {'bad-name': 'x'}}}",
	  "env.set[\"bad-name\"]: invalid variable name: expected [A-Za-z_][A-Za-z0-9_]*\n", NULL },
	{ "{" V "'env': {'set': ['CI=1']}}", "env.set: expected an object\n", NULL },
	/* fs */
	{ "{" V "'fs': {'rw': ['relative/dir']}}", "fs.rw[0]: expected an absolute path\n", NULL },
	{ "{" V "'fs': {'rw': ['/a/../etc']}}", "fs.rw[0]: \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'fs': {'hide': ['/a/./b']}}", "fs.hide[0]: \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'fs': {'hide': ['/a/b', '/a//b/']}}", "fs.hide[1]: duplicate of fs.hide[0]\n", NULL },
	{ "{" V "'fs': {'tmp': []}}", "fs.tmp: unknown key\n", NULL },
	/* many errors in one document, in document order */
	{ "{'mode': 'loud', 'egress': {'alow': [], 'ports': [80, 0, 80]},"
	  " 'secrets': {'a': {'from_env': 'T'}}, 'git': {'credential': 'b'},"
	  " 'fs': {'rw': ['x']}}",
	  "mode: expected \"off\", \"shadow\" or \"enforce\"\n"
	  "egress.alow: unknown key\n"
	  "egress.ports[1]: expected an integer from 1 to 65535\n"
	  "egress.ports[2]: duplicate of egress.ports[0]\n"
	  "secrets.a.hosts: required key is missing: a secret needs the hosts it may be sent to\n"
	  "git.credential: no secret named \"b\"\n"
	  "fs.rw[0]: expected an absolute path\n"
	  "version: required key is missing\n", NULL },
	{ "{'fs': {'hide': ['rel']}, " V "'secrets': {'x': {'from_env': 'A', 'from_file': '/f',"
	  " 'hosts': ['*.*']}, 'y': {'from_env': 'A', 'hosts': ['y.com']}},"
	  " 'env': {'set': {'A': '1'}}}",
	  "fs.hide[0]: expected an absolute path\n"
	  "secrets.x.hosts[0]: %R\n"
	  "secrets.x: give one of from_env and from_file, not both\n"
	  "secrets.y.env: \"A\" is also set by env.set\n", "*.*" },
	{ "{" V "'git': {'repos': {'a/b': ['pull'], 'x.example/a/b': ['fetch']}},"
	  " 'session': {'repo': 'y.example/a/b'}, 'egress': {'allow': ['ok.example', 'ok.example:*', 'OK.example']}}",
	  "git.repos[\"a/b\"][0]: expected \"fetch\" or \"push\"\n"
	  "git.repos[\"x.example/a/b\"]: host \"x.example\" is neither in git.hosts nor the host of session.repo\n"
	  "egress.allow[2]: duplicate of egress.allow[0]\n", NULL },
	/* a control character in a key stays escaped: one error, one line */
	{ "{" V "'a\\nb': 1}", "$[\"a\\nb\"]: unknown key\n", NULL },
	{ "{" V "'egress': {'allow': ['a\\nb']}}", "egress.allow[0]: %R\n", "a\nb" },
};

static void test_errors(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(err_cases); i++) {
		struct policy_errors errs = { 0 };
		struct policy *p = parse(err_cases[i].doc, NULL, &errs);
		char *got = join_errors(&errs), *want = expand_want(&err_cases[i]);
		bool ok = !p && errors_match(got, want);

		if (!tap_ok(ok, "error case %zu: %.60s", i, err_cases[i].doc))
			printf("#   got:\n%s#   want:\n%s", got, want);
		free(want);
		free(got);
		policy_free(p);
		policy_errors_free(&errs);
	}
}

/* A long value is quoted cut short, on a character boundary. */
static void test_long_quote(void)
{
	struct policy_errors errs = { 0 };
	char name[101], *doc, *want;
	struct policy *p;

	memset(name, 'A', 100);
	name[100] = '\0';
	doc = util_xasprintf("{'version': 1, 'env': {'set': {'%s': 'x'}},"
			     " 'secrets': {'s': {'from_env': '%s', 'hosts': ['x.com']}}}",
			     name, name);
	p = parse(doc, NULL, &errs);
	want = util_xasprintf("\"%.80s...\" is also set by env.set", name);
	if (!tap_ok(!p && errs.count == 1 && strcmp(errs.items[0].message, want) == 0,
		    "a long value is quoted cut to 80 bytes") && errs.count)
		tap_diag("got: %s", errs.items[0].message);
	free(want);
	free(doc);
	policy_free(p);
	policy_errors_free(&errs);
}

/* ---- valid documents ------------------------------------------------ */

static const char *const valid_docs[] = {
	"{'version': 1}",
	"{'version': 1, 'mode': 'off'}",
	"{'version': 1, 'egress': {'ports': []}}",
	"{'version': 1, 'session': {'id': 'a', 'repo': null}}",
	"{'version': 1, 'session': {'id': 'Sess:1.2_3-4', 'repo': 'GitHub.com./Acme/API.git'}}",
	/* git.credential names a secret that comes later in the document */
	"{'version': 1, 'git': {'credential': 'gh'},"
	" 'secrets': {'gh': {'from_file': '/run/gh', 'env': 'GH_TOKEN', 'hosts': ['github.com']}}}",
	/* a repo on the session's host needs no git.hosts entry */
	"{'version': 1, 'git': {'repos': {'git.example/a/b': ['push', 'fetch']}},"
	" 'session': {'repo': 'git.example/acme/api'}}",
	/* the same repository with and without a host are two entries */
	"{'version': 1, 'git': {'hosts': ['h.example'], 'repos': {'a/b': ['fetch'], 'h.example/a/b': ['push']}}}",
	"{'version': 1, 'secrets': {'a.b_c-1': {'from_env': 'X', 'env': null, 'from_file': null,"
	" 'hosts': ['*'], 'headers': null}}}",
	"{'version': 1, 'secrets': {'a': {'from_env': 'X', 'hosts': ['x.com'], 'headers': ['!#$%&\\u0027*+-.^_`|~']}}}",
	"{'version': 1, 'egress': {'allow_ranges': ['0.0.0.0/0', '::/0', '198.18.0.0/15', '192.0.2.7'],"
	" 'resolver': ['127.0.0.53:53', '[2001:db8::53]:5353']}}",
	"{'version': 1, 'env': {'pass': ['LC_*', '_X', 'A1'], 'set': {'EMPTY': '', 'U': '\\u00e9'}}}",
	"{'version': 1, 'fs': {'rw': ['/'], 'hide': ['/home/u/.ssh', '//x//']}}",
	"{'version': 1, 'egress': {'allow': ['*', '**.example.com', '192.0.2.0/24', '[2001:db8::1]:443'],"
	" 'deny': ['x.example.com:*']}}",
};

static void test_valid(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(valid_docs); i++) {
		struct policy_errors errs = { 0 };
		struct policy *p = parse(valid_docs[i], NULL, &errs);
		char *got = join_errors(&errs);

		if (!tap_ok(p && errs.count == 0, "valid %zu: %.60s", i, valid_docs[i]))
			printf("#   errors:\n%s", got);
		free(got);
		policy_free(p);
		policy_errors_free(&errs);
	}
}

/* ---- digests ------------------------------------------------------------ */

static char *digest_of(const char *sq, const enum policy_mode *mode)
{
	struct policy_errors errs = { 0 };
	struct policy *p = parse(sq, mode, &errs);
	char *d = NULL;

	if (p)
		d = util_xstrdup(p->digest);
	else if (errs.count)
		tap_diag("unexpected error: %s: %s", errs.items[0].path,
			 errs.items[0].message);
	policy_free(p);
	policy_errors_free(&errs);
	return d;
}

#define BASE_SESSION "'session': {'id': 's1', 'repo': 'github.com/acme/api'}"
#define BASE_EGRESS                                                            \
	"'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"  \
	" 'ports': [80, 443], 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53'],"   \
	" 'upstream_ca': null}"
#define BASE_SECRETS                                                           \
	"'secrets': {'api': {'from_env': 'API_KEY', 'env': 'API_KEY', 'hosts': ['api.example.com'],"  \
	" 'headers': ['x-api-key']}, 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}"
#define BASE_GIT                                                               \
	"'git': {'hosts': ['github.com'], 'repos': {'acme/lib': ['fetch']}, 'credential': 'gh', 'ssh': false}"
#define BASE_ENV "'env': {'pass': ['PATH', 'HOME'], 'set': {'CI': '1'}}"
#define BASE_FS "'fs': {'rw': ['/srv/cache'], 'hide': ['/etc/secret']}"
#define BASE(mode, session, egress, secrets, git, env, fs)                     \
	"{'version': 1, 'mode': " mode ", " session ", " egress ", " secrets ", " git ", " env ", " fs "}"
#define BASE_DOC BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS)

/* Documents that mean the same as BASE_DOC. */
static const char *const same_as_base[] = {
	/* reordered keys and other whitespace */
	"{ 'fs' : {'hide': ['/etc/secret'], 'rw': ['/srv/cache']},\n\t" BASE_ENV ",\n" BASE_GIT ","
	BASE_SECRETS ", " BASE_EGRESS ", " BASE_SESSION ", 'mode': 'shadow', 'version': 1 }",
	/* spelling variants */
	BASE("'shadow'", "'session': {'repo': 'GitHub.COM./Acme/API.git', 'id': 's1'}",
	     "'egress': {'allow': ['API.Example.com.', '*.CDN.example.com'], 'deny': ['Bad.Example.Com'],"
	     " 'ports': [443, 80], 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     "'secrets': {'gh': {'hosts': ['GITHUB.com'], 'from_env': 'GH', 'env': 'GH', 'from_file': null,"
	     " 'headers': null}, 'api': {'from_env': 'API_KEY', 'hosts': ['api.example.com.'],"
	     " 'headers': ['X-API-Key']}}",
	     "'git': {'hosts': ['GitHub.com.'], 'repos': {'Acme/Lib.git': ['fetch']}, 'credential': 'gh'}",
	     "'env': {'set': {'CI': '\\u0031'}, 'pass': ['HOME', 'PATH']}",
	     "'fs': {'rw': ['//srv//cache/'], 'hide': ['/etc/secret/']}"),
};

/* Each differs from BASE_DOC in one semantic value. */
static const char *const differs_from_base[] = {
	BASE("'enforce'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'off'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", "'session': {'id': 's2', 'repo': 'github.com/acme/api'}", BASE_EGRESS,
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", "'session': {'id': 's1', 'repo': 'github.com/acme/api2'}", BASE_EGRESS,
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", "'session': {'id': 's1'}", BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '**.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com:443', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	/* rule order is kept (receipts may name a rule by its index) */
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['*.cdn.example.com', 'api.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': [],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'ports': [443], 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'ports': [], 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/9'], 'resolver': ['127.0.0.53:53']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:5353']}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION,
	     "'egress': {'allow': ['api.example.com', '*.cdn.example.com'], 'deny': ['bad.example.com'],"
	     " 'allow_ranges': ['10.0.0.0/8'], 'resolver': ['127.0.0.53:53'], 'upstream_ca': '/etc/ca.pem'}",
	     BASE_SECRETS, BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS,
	     "'secrets': {'api': {'from_env': 'API_KEY', 'env': 'API_KEY2', 'hosts': ['api.example.com'],"
	     " 'headers': ['x-api-key']}, 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}",
	     BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS,
	     "'secrets': {'api': {'from_file': '/run/api', 'env': 'API_KEY', 'hosts': ['api.example.com'],"
	     " 'headers': ['x-api-key']}, 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}",
	     BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS,
	     "'secrets': {'api': {'from_env': 'API_KEY', 'env': 'API_KEY', 'hosts': ['*.example.com'],"
	     " 'headers': ['x-api-key']}, 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}",
	     BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS,
	     "'secrets': {'api': {'from_env': 'API_KEY', 'env': 'API_KEY', 'hosts': ['api.example.com']},"
	     " 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}",
	     BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS,
	     "'secrets': {'api2': {'from_env': 'API_KEY', 'env': 'API_KEY', 'hosts': ['api.example.com'],"
	     " 'headers': ['x-api-key']}, 'gh': {'from_env': 'GH', 'hosts': ['github.com']}}",
	     BASE_GIT, BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS,
	     "'git': {'hosts': ['github.com', 'gitlab.com'], 'repos': {'acme/lib': ['fetch']}, 'credential': 'gh'}",
	     BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS,
	     "'git': {'hosts': ['github.com'], 'repos': {'acme/lib': ['fetch', 'push']}, 'credential': 'gh'}",
	     BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS,
	     "'git': {'hosts': ['github.com'], 'repos': {'github.com/acme/lib': ['fetch']}, 'credential': 'gh'}",
	     BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS,
	     "'git': {'hosts': ['github.com'], 'repos': {'acme/lib': ['fetch']}, 'credential': null}",
	     BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS,
	     "'git': {'hosts': ['github.com'], 'repos': {'acme/lib': ['fetch']}, 'credential': 'gh', 'ssh': true}",
	     BASE_ENV, BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT,
	     "'env': {'pass': ['PATH', 'HOME', 'LC_*'], 'set': {'CI': '1'}}", BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT,
	     "'env': {'pass': ['PATH', 'HOME'], 'set': {'CI': 'true'}}", BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT,
	     "'env': {'set': {'CI': '1'}}", BASE_FS),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV,
	     "'fs': {'rw': ['/srv/cache', '/var/tmp'], 'hide': ['/etc/secret']}"),
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV,
	     "'fs': {'rw': ['/srv/cache'], 'hide': []}"),
	/* a path component's case matters */
	BASE("'shadow'", BASE_SESSION, BASE_EGRESS, BASE_SECRETS, BASE_GIT, BASE_ENV,
	     "'fs': {'rw': ['/srv/Cache'], 'hide': ['/etc/secret']}"),
};

static void test_digests(void)
{
	const enum policy_mode enforce = POLICY_MODE_ENFORCE, shadow = POLICY_MODE_SHADOW;
	char *base = digest_of(BASE_DOC, NULL), *d, *e;
	size_t i, j;
	char **all;

	tap_ok(base != NULL, "the base document is valid");
	if (!base)
		return;
	tap_ok(strncmp(base, "sha256:", 7) == 0 && strlen(base) == 71,
	       "digest is sha256: + 64 hex digits");
	for (i = 0; i < ARRAY_SIZE(same_as_base); i++) {
		d = digest_of(same_as_base[i], NULL);
		tap_is_str(d, base, "same meaning, same digest (%zu)", i);
		free(d);
	}
	/* Every variant differs from the base and from each other. */
	all = util_xcalloc(ARRAY_SIZE(differs_from_base), sizeof(*all));
	for (i = 0; i < ARRAY_SIZE(differs_from_base); i++) {
		all[i] = digest_of(differs_from_base[i], NULL);
		tap_ok(all[i] && strcmp(all[i], base) != 0,
		       "one semantic change, another digest (%zu)", i);
	}
	for (i = 0; i < ARRAY_SIZE(differs_from_base); i++)
		for (j = i + 1; j < ARRAY_SIZE(differs_from_base); j++)
			if (all[i] && all[j] && strcmp(all[i], all[j]) == 0)
				tap_ok(false, "variants %zu and %zu collide", i, j);
	for (i = 0; i < ARRAY_SIZE(differs_from_base); i++)
		free(all[i]);
	free(all);

	/* --mode replaces the mode before the digest. */
	d = digest_of(BASE_DOC, &enforce);
	e = digest_of(differs_from_base[0], NULL);
	tap_is_str(d, e, "mode override enforce == a document saying enforce");
	free(d);
	d = digest_of(differs_from_base[0], &shadow);
	tap_is_str(d, base, "mode override shadow == a document saying shadow");
	free(d);
	free(e);
	free(base);
}

/* ---- canonical form ------------------------------------------------------ */

static void test_canonical(void)
{
	struct policy_errors errs = { 0 }, errs2 = { 0 };
	struct policy *p, *q;
	const char *want =
		"{\"egress\":{\"allow\":[\"api.example.com\",\"*.cdn.example.com\"],"
		"\"allow_ranges\":[\"10.0.0.0/8\"],\"deny\":[\"bad.example.com\"],\"intercept\":[],"
		"\"ports\":[80,443],\"resolver\":[\"127.0.0.53:53\"],\"transparent\":false,\"upstream_ca\":null},"
		"\"env\":{\"pass\":[\"HOME\",\"PATH\"],\"set\":{\"CI\":\"1\"}},"
		"\"fs\":{\"hide\":[\"/etc/secret\"],\"protect\":[],\"ro\":[],\"rw\":[\"/srv/cache\"]},"
		"\"git\":{\"api_allow\":[],\"api_hosts\":[],\"credential\":\"gh\",\"github_app\":null,"
		"\"hosts\":[\"github.com\"],\"repos\":{\"acme/lib\":[\"fetch\"]},\"ssh\":false,"
		"\"token_env\":[\"GH_TOKEN\",\"GITHUB_TOKEN\"]},"
		"\"mode\":\"shadow\","
		"\"secrets\":{\"api\":{\"env\":\"API_KEY\",\"from_env\":\"API_KEY\",\"from_file\":null,"
		"\"headers\":[\"x-api-key\"],\"hosts\":[\"api.example.com\"],\"methods\":null,\"paths\":null,"
		"\"prefix\":\"airlock-ph-api-\"},"
		"\"gh\":{\"env\":\"GH\",\"from_env\":\"GH\",\"from_file\":null,\"headers\":null,"
		"\"hosts\":[\"github.com\"],\"methods\":null,\"paths\":null,\"prefix\":\"airlock-ph-gh-\"}},"
		"\"session\":{\"id\":\"s1\",\"repo\":\"github.com/acme/api\"},"
		"\"spend\":{\"cap_usd\":null,\"default_max_output_tokens\":8192,\"ledger\":null,"
		"\"max_body_bytes\":33554432,\"on_exhausted\":\"block\",\"parent\":null,\"prices\":{},"
		"\"providers\":[]},\"version\":1}";

	p = parse(BASE_DOC, NULL, &errs);
	tap_ok(p != NULL, "base parses");
	if (!p)
		return;
	tap_is_str(p->canonical, want, "canonical form of the base document");
	q = policy_parse(p->canonical, strlen(p->canonical), NULL, &errs2);
	tap_ok(q && strcmp(q->canonical, p->canonical) == 0 &&
	       strcmp(q->digest, p->digest) == 0,
	       "the canonical form parses to itself");
	policy_free(q);
	policy_free(p);
	policy_errors_free(&errs);
	policy_errors_free(&errs2);

	p = parse("{'version': 1, 'git': {'repos': {'A/B.git': ['push', 'fetch']}},"
		  " 'secrets': {'s': {'from_env': 'T', 'hosts': ['x.com'], 'headers': ['B', 'a']}},"
		  " 'egress': {'ports': [8443, 443, 80], 'allow_ranges': ['2001:db8::/32', '10.0.0.0/8', '0:0::0/0']}}",
		  NULL, &errs);
	tap_ok(p && strstr(p->canonical, "\"repos\":{\"a/b\":[\"fetch\",\"push\"]}"),
	       "repo keys normalised and git operations sorted");
	tap_ok(p && strstr(p->canonical, "\"headers\":[\"a\",\"b\"]"),
	       "header names lowercased and sorted");
	tap_ok(p && strstr(p->canonical, "\"ports\":[80,443,8443]"), "ports sorted");
	tap_ok(p && strstr(p->canonical, "\"allow_ranges\":[\"10.0.0.0/8\",\"::/0\",\"2001:db8::/32\"]"),
	       "allow_ranges canonical and sorted (IPv4 first)");
	if (p) {
		tap_is_int(p->ngit_repos, 1, "one git repo");
		tap_ok(p->git_repos[0].host == NULL, "repo without host: any of git.hosts");
		tap_is_str(p->git_repos[0].owner, "a", "owner lowercased");
		tap_is_str(p->git_repos[0].repo, "b", "repo lowercased, .git removed");
		tap_is_int(p->git_repos[0].ops, POLICY_GIT_FETCH | POLICY_GIT_PUSH, "ops");
		tap_is_str(p->secrets[0].env, "T", "env defaults to from_env");
		tap_ok(p->secrets[0].from_file == NULL, "from_file absent");
	}
	policy_free(p);
	policy_errors_free(&errs);

	p = parse("{'version': 1, 'session': {'repo': 'GitHub.com./Acme/API.git'}, 'fs': {'rw': ['//a//b/']}}",
		  NULL, &errs);
	tap_ok(p && strcmp(p->session_repo, "github.com/acme/api") == 0,
	       "session.repo normalised");
	tap_ok(p && p->nfs_rw == 1 && strcmp(p->fs_rw[0], "/a/b") == 0, "fs path cleaned");
	tap_ok(p && p->session_id == NULL && p->upstream_ca == NULL &&
	       p->git_credential == NULL && !p->git_ssh, "absent values are NULL/false");
	tap_ok(p && p->nports == 2 && p->ports[0] == 80 && p->ports[1] == 443,
	       "default ports [80, 443]");
	tap_ok(p && p->nenv_pass == 4, "default env.pass has four names");
	policy_free(p);
	policy_errors_free(&errs);
}

/* ---- default policy, env, load ------------------------------------------ */

static void test_default(void)
{
	const enum policy_mode enforce = POLICY_MODE_ENFORCE;
	struct policy_errors errs = { 0 };
	enum policy_mode m;
	struct policy *d = policy_default(NULL), *e = policy_default(&enforce);
	char *min = digest_of("{'version': 1}", NULL);

	tap_ok(d->mode == POLICY_MODE_SHADOW && d->nallow == 0 && d->nsecrets == 0 &&
	       d->ngit_repos == 0 && d->ngit_hosts == 0, "default: shadow, nothing allowed, no secrets");
	tap_is_str(d->digest, min, "default policy == {\"version\": 1}");
	tap_ok(e->mode == POLICY_MODE_ENFORCE && strcmp(e->digest, d->digest) != 0,
	       "default policy takes the mode override");
	tap_ok(policy_env_passes(d, "PATH") && policy_env_passes(d, "TERM") &&
	       !policy_env_passes(d, "PATHX") && !policy_env_passes(d, "AWS_SECRET_ACCESS_KEY"),
	       "default env.pass");
	free(min);
	policy_free(d);
	policy_free(e);

	d = parse("{'version': 1, 'env': {'pass': ['LC_*', 'X']}}", NULL, &errs);
	tap_ok(d && policy_env_passes(d, "LC_ALL") && policy_env_passes(d, "LC_") &&
	       policy_env_passes(d, "X") && !policy_env_passes(d, "XY") &&
	       !policy_env_passes(d, "LANG"), "env.pass prefix patterns");
	policy_free(d);
	policy_errors_free(&errs);

	tap_ok(policy_env_is_reserved("HTTPS_PROXY") && policy_env_is_reserved("https_proxy") &&
	       policy_env_is_reserved("GIT_SSL_CAINFO") && !policy_env_is_reserved("Https_Proxy") &&
	       !policy_env_is_reserved("PATH"), "reserved variables");

	tap_ok(policy_mode_from_string("enforce", &m) && m == POLICY_MODE_ENFORCE &&
	       !policy_mode_from_string("ENFORCE", &m) && !policy_mode_from_string("", &m),
	       "mode names");
	tap_is_str(policy_mode_to_string(POLICY_MODE_OFF), "off", "mode to string");
}

static void test_load(void)
{
	struct policy_errors errs = { 0 };
	struct policy *p;

	p = policy_load("/nonexistent/policy.json", NULL, &errs);
	tap_ok(!p && errs.count == 1 && strcmp(errs.items[0].path, "$") == 0 &&
	       strcmp(errs.items[0].message, "cannot read: No such file or directory") == 0,
	       "missing file: one error at $");
	policy_errors_free(&errs);
	p = policy_load("/", NULL, &errs);
	tap_ok(!p && errs.count == 1 &&
	       strcmp(errs.items[0].message, "cannot read: Is a directory") == 0,
	       "directory: cannot read");
	policy_errors_free(&errs);
}

/* ---- the committed examples --------------------------------------------- */

static char *src_path(const char *rel)
{
	const char *root = getenv("AIRLOCK_SRC");

	return util_xasprintf("%s/%s", root && *root ? root : ".", rel);
}

static void test_examples(void)
{
	struct policy_errors errs = { 0 };
	char *pattern = src_path("examples/*.json"), *path, *text;
	struct policy *p, *d;
	glob_t g;
	size_t i, len;
	int n = 0;

	if (glob(pattern, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++, n++) {
			p = policy_load(g.gl_pathv[i], NULL, &errs);
			tap_ok(p != NULL, "example %s is valid", g.gl_pathv[i]);
			if (!p && errs.count)
				tap_diag("%s: %s", errs.items[0].path, errs.items[0].message);
			policy_free(p);
			policy_errors_free(&errs);
		}
		globfree(&g);
	}
	tap_ok(n >= 4, "found the examples (%d)", n);
	free(pattern);

	pattern = src_path("examples/invalid/*.json");
	n = 0;
	if (glob(pattern, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++, n++) {
			p = policy_load(g.gl_pathv[i], NULL, &errs);
			tap_ok(!p && errs.count > 0, "invalid example %s is refused",
			       g.gl_pathv[i]);
			policy_free(p);
			policy_errors_free(&errs);
		}
		globfree(&g);
	}
	tap_ok(n >= 3, "found the invalid examples (%d)", n);
	free(pattern);

	/* examples/shadow-default.json is the embedded default, verbatim. */
	path = src_path("examples/shadow-default.json");
	text = util_read_file(path, 1 << 20, &len);
	tap_is_str(text, policy_default_text(),
		   "examples/shadow-default.json is the embedded default text");
	free(text);
	free(path);
	d = policy_default(NULL);
	path = src_path("examples/full.json");
	p = policy_load(path, NULL, &errs);
	tap_ok(p && p->nsecrets == 1 && !p->git_credential && p->git_github_app &&
	       p->git_github_app->installation_id == 4242 && p->nallow == 3 &&
	       p->spend_has_cap && p->spend_cap_usd == 5.0 &&
	       p->spend_ledger_kind == POLICY_LEDGER_SQLITE && p->nspend_prices == 1,
	       "examples/full.json has the reference example's content");
	tap_ok(p && strcmp(p->digest, d->digest) != 0, "full.json differs from the default");
	policy_free(p);
	policy_free(d);
	policy_errors_free(&errs);
	free(path);
}

int main(void)
{
	test_errors();
	test_long_quote();
	test_valid();
	test_digests();
	test_canonical();
	test_default();
	test_load();
	test_examples();
	return tap_done();
}
