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
	{ "{" V "'egress': {'alow': []}}", "egress.alow: unknown key (did you mean \"allow\"?)\n", NULL },
	{ "{" V "'egress': {'allow_range': []}}",
	  "egress.allow_range: unknown key (did you mean \"allow_ranges\"?)\n", NULL },
	{ "{" V "'egres': {}}", "egres: unknown key (did you mean \"egress\"?)\n", NULL },
	{ "{" V "'egress': {'xy': []}}", "egress.xy: unknown key\n", NULL },
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
	/* egress: transparent, intercept */
	{ "{" V "'egress': {'transparent': 'yes'}}", "egress.transparent: expected true or false\n", NULL },
	{ "{" V "'egress': {'transparent': 1}}", "egress.transparent: expected true or false\n", NULL },
	{ "{" V "'egress': {'intercept': 'x.com'}}", "egress.intercept: expected an array\n", NULL },
	{ "{" V "'egress': {'intercept': [7]}}", "egress.intercept[0]: expected a string\n", NULL },
	{ "{" V "'egress': {'intercept': ['bad host']}}", "egress.intercept[0]: %R\n", "bad host" },
	{ "{" V "'egress': {'intercept': ['*.x.com', '*.X.com.']}}",
	  "egress.intercept[1]: duplicate of egress.intercept[0]\n", NULL },
	/* secrets: prefix, paths, methods */
#define SEC(extra) "{" V "'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], " extra "}}}"
	{ SEC("'prefix': 'has space'"),
	  "secrets.a.prefix: expected up to 128 printable ASCII characters without spaces, or null\n", NULL },
	{ SEC("'prefix': 'tab\\t'"),
	  "secrets.a.prefix: expected up to 128 printable ASCII characters without spaces, or null\n", NULL },
	{ SEC("'prefix': '\\u00e9t\\u00e9-'"),
	  "secrets.a.prefix: expected up to 128 printable ASCII characters without spaces, or null\n", NULL },
	{ SEC("'prefix': 12"),
	  "secrets.a.prefix: expected up to 128 printable ASCII characters without spaces, or null\n", NULL },
	{ SEC("'paths': '/v1/'"), "secrets.a.paths: expected an array of path prefixes or null\n", NULL },
	{ SEC("'paths': []"), "secrets.a.paths: must not be empty (null or no \"paths\" means any path)\n", NULL },
	{ SEC("'paths': [1]"), "secrets.a.paths[0]: expected a string\n", NULL },
	{ SEC("'paths': ['v1/']"), "secrets.a.paths[0]: expected a path starting with \"/\"\n", NULL },
	{ SEC("'paths': ['']"), "secrets.a.paths[0]: expected a path starting with \"/\"\n", NULL },
	{ SEC("'paths': ['/a//b']"), "secrets.a.paths[0]: empty path segment (\"//\")\n", NULL },
	{ SEC("'paths': ['/a/../b']"), "secrets.a.paths[0]: \".\" and \"..\" segments are not allowed\n", NULL },
	{ SEC("'paths': ['/a/.']"), "secrets.a.paths[0]: \".\" and \"..\" segments are not allowed\n", NULL },
	{ SEC("'paths': ['/v%31/']"), "secrets.a.paths[0]: percent-escapes are not allowed\n", NULL },
	{ SEC("'paths': ['/v1?x=1']"),
	  "secrets.a.paths[0]: expected only A-Z a-z 0-9 and - . _ ~ ! $ & ' ( ) * + , ; = : @ / in a path\n", NULL },
	{ SEC("'paths': ['/v1/', '/v1/']"), "secrets.a.paths[1]: duplicate of secrets.a.paths[0]\n", NULL },
	{ SEC("'methods': 'GET'"), "secrets.a.methods: expected an array of HTTP methods or null\n", NULL },
	{ SEC("'methods': []"), "secrets.a.methods: must not be empty (null or no \"methods\" means any method)\n", NULL },
	{ SEC("'methods': ['get']"),
	  "secrets.a.methods[0]: expected an upper-case HTTP method such as \"GET\" or \"POST\"\n", NULL },
	{ SEC("'methods': ['gET']"),
	  "secrets.a.methods[0]: expected an upper-case HTTP method such as \"GET\" or \"POST\"\n", NULL },
	{ SEC("'methods': ['-GET']"),
	  "secrets.a.methods[0]: expected an upper-case HTTP method such as \"GET\" or \"POST\"\n", NULL },
	{ SEC("'methods': ['GE T']"),
	  "secrets.a.methods[0]: expected an upper-case HTTP method such as \"GET\" or \"POST\"\n", NULL },
	{ SEC("'methods': ['POST', 'GET', 'POST']"), "secrets.a.methods[2]: duplicate of secrets.a.methods[0]\n", NULL },
	/* secrets: body fields and capture rules */
	{ SEC("'body': ['form:']"),
	  "secrets.a.body[0]: expected \"form:NAME\" (a form field: letters, digits, _ . - [ ]) or \"json:/POINTER\" (an RFC 6901 pointer)\n", NULL },
	{ SEC("'body': ['json:/a~2']"),
	  "secrets.a.body[0]: expected \"form:NAME\" (a form field: letters, digits, _ . - [ ]) or \"json:/POINTER\" (an RFC 6901 pointer)\n", NULL },
	{ SEC("'body': ['header:x']"),
	  "secrets.a.body[0]: expected \"form:NAME\" (a form field: letters, digits, _ . - [ ]) or \"json:/POINTER\" (an RFC 6901 pointer)\n", NULL },
	{ SEC("'body': []"), "secrets.a.body: must not be empty (null or no \"body\" means no body field)\n", NULL },
	{ SEC("'body': ['form:a', 'form:a']"), "secrets.a.body[1]: duplicate of secrets.a.body[0]\n", NULL },
	{ SEC("'capture': [{'hosts': ['c.com'], 'json': ['/token']}]"),
	  "secrets.a: a captured secret (capture) has no from_env or from_file\n", NULL },
#define CAP(rule) "{" V "'secrets': {'a': {'hosts': ['x.com'], 'capture': [" rule "]}}}"
	{ CAP("{'hosts': ['c.com']}"),
	  "secrets.a.capture[0]: give \"json\" or \"headers\": where the answer carries the credential\n", NULL },
	{ CAP("{'json': ['/token']}"),
	  "secrets.a.capture[0].hosts: required key is missing: a capture rule needs the hosts whose answers it reads\n", NULL },
	{ CAP("{'hosts': ['c.com'], 'json': ['token']}"),
	  "secrets.a.capture[0].json[0]: expected an RFC 6901 JSON pointer (\"/token\")\n", NULL },
	{ CAP("{'hosts': ['c.com'], 'json': ['/t'], 'paths': ['/a//b']}"),
	  "secrets.a.capture[0].paths[0]: expected a path (\"/sessions/*/scm-credentials\": '*' matches one whole segment) without '?', '#', '%', '\\' or \"//\"\n", NULL },
	{ CAP("{'hosts': ['c.com'], 'json': ['/t'], 'expires': 5}"),
	  "secrets.a.capture[0].expires: expected an RFC 6901 JSON pointer (\"/expires_at\") or null\n", NULL },
	{ CAP("{'hosts': ['c.com'], 'json': ['/t'], 'bogus': 1}"), "secrets.a.capture[0].bogus: unknown key\n", NULL },
	{ "{" V "'secrets': {'a': {'hosts': ['x.com'], 'capture': []}}}",
	  "secrets.a.capture: expected an array of 1 to 64 capture rules or null\n"
	  "secrets.a: one of from_env and from_file is required\n", NULL },
	{ "{" V "'secrets': {'a': {'hosts': ['x.com'], 'env': 'A', 'capture': [{'hosts': ['c.com'], 'json': ['/t']}]}}}",
	  "secrets.a: a captured secret has no env: the agent gets its placeholder in the answer it was captured from\n", NULL },
	/* git: api_hosts, github_app, token_env, api_allow */
	{ "{" V "'git': {'api_hosts': ['*.github.com']}}",
	  "git.api_hosts[0]: wildcards are not allowed: API hosts are exact names\n", NULL },
	{ "{" V "'git': {'api_hosts': ['192.0.2.1']}}",
	  "git.api_hosts[0]: expected a host name, not an IP address\n", NULL },
	{ "{" V "'git': {'api_hosts': ['api.github.com', 'API.github.com.']}}",
	  "git.api_hosts[1]: duplicate of git.api_hosts[0]\n", NULL },
	{ "{" V "'git': {'api_hosts': 'api.github.com'}}", "git.api_hosts: expected an array\n", NULL },
#define APP_REPO "'session': {'repo': 'github.com/acme/api'}, "
#define APP(extra) "{" V APP_REPO "'git': {'github_app': {'app_id': 'Iv1.x', 'installation_id': 7, " \
	"'private_key_file': '/etc/app.pem'" extra "}}}"
	{ "{" V APP_REPO "'git': {'github_app': []}}", "git.github_app: expected an object\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {}}}",
	  "git.github_app.app_id: required key is missing\n"
	  "git.github_app.installation_id: required key is missing\n"
	  "git.github_app.private_key_file: required key is missing\n", NULL },
	{ "{" V "'git': {'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}}}",
	  "git.github_app: needs session.repo: the token is minted for the session's repository\n", NULL },
	{ "{" V APP_REPO "'secrets': {'gh': {'from_env': 'T', 'hosts': ['github.com']}},"
	  " 'git': {'credential': 'gh', 'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}}}",
	  "git: give only one of credential, github_app and gitlab_mint\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 0, 'installation_id': 7, 'private_key_file': '/k'}}}",
	  "git.github_app.app_id: expected the App's client id (1 to 128 characters of A-Z a-z 0-9 . _ -) "
	  "or its numeric id (a positive integer)\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 'a b', 'installation_id': 7, 'private_key_file': '/k'}}}",
	  "git.github_app.app_id: expected the App's client id*\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 1.5, 'installation_id': 7, 'private_key_file': '/k'}}}",
	  "git.github_app.app_id: expected the App's client id*\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': '', 'installation_id': 7, 'private_key_file': '/k'}}}",
	  "git.github_app.app_id: expected the App's client id*\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 'x', 'installation_id': 0, 'private_key_file': '/k'}}}",
	  "git.github_app.installation_id: expected a positive integer\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 'x', 'installation_id': '7', 'private_key_file': '/k'}}}",
	  "git.github_app.installation_id: expected a positive integer\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 'x', 'installation_id': 7, 'private_key_file': ''}}}",
	  "git.github_app.private_key_file: expected a non-empty path\n", NULL },
	{ "{" V APP_REPO "'git': {'github_app': {'app_id': 'x', 'installation_id': 7, 'private_key_file': null}}}",
	  "git.github_app.private_key_file: expected a non-empty path\n", NULL },
	{ APP(", 'api': 'http://api.github.com'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": expected https://\n", NULL },
	{ APP(", 'api': 'https://'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": expected a host\n", NULL },
	{ APP(", 'api': 'https://u:p@api.github.com'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": user-info ('@') is not allowed\n", NULL },
	{ APP(", 'api': 'https://api.github.com/?x=1'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": a query or fragment is not allowed\n", NULL },
	{ APP(", 'api': 'https://api.github.com:0'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": expected a port from 1 to 65535\n", NULL },
	{ APP(", 'api': 'https://api.github.com:99999'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": expected a port from 1 to 65535\n", NULL },
	{ APP(", 'api': 'https://bad host/'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": character outside a-z 0-9 - _ in host name\n", NULL },
	{ APP(", 'api': 'https://ghe.example/api/../v3'"),
	  "git.github_app.api: expected an https URL such as \"https://api.github.com\": \".\" and \"..\" segments are not allowed\n", NULL },
	{ APP(", 'api': 7"), "git.github_app.api: expected an https URL such as \"https://api.github.com\"\n", NULL },
	{ APP(", 'ca': ''"), "git.github_app.ca: expected a non-empty path or null\n", NULL },
	{ APP(", 'permissions': []"),
	  "git.github_app.permissions: expected an object of permission names to \"read\", \"write\" or \"admin\"\n", NULL },
	{ APP(", 'permissions': {'Issues': 'read'}"),
	  "git.github_app.permissions.Issues: invalid permission name: expected GitHub's name "
	  "([a-z][a-z0-9_]*, e.g. \"pull_requests\")\n", NULL },
	{ APP(", 'permissions': {'issues': 'delete'}"),
	  "git.github_app.permissions.issues: expected \"read\", \"write\" or \"admin\"\n", NULL },
	{ APP(", 'permissions': {'issues': true}"),
	  "git.github_app.permissions.issues: expected \"read\", \"write\" or \"admin\"\n", NULL },
	{ APP(", 'installation': 7"), "git.github_app.installation: unknown key\n", NULL },
	{ "{" V "'git': {'token_env': 'GH_TOKEN'}}", "git.token_env: expected an array\n", NULL },
	{ "{" V "'git': {'token_env': ['1X']}}",
	  "git.token_env[0]: expected a variable name ([A-Za-z_][A-Za-z0-9_]*)\n", NULL },
	{ "{" V "'git': {'token_env': ['HTTPS_PROXY']}}",
	  "git.token_env[0]: \"HTTPS_PROXY\" is one of airlock's own variables\n", NULL },
	{ "{" V "'git': {'token_env': ['GH_TOKEN', 'GH_TOKEN']}}", "git.token_env[1]: duplicate of git.token_env[0]\n", NULL },
	/* the git token's variables against env.set and other placeholders */
	{ "{" V APP_REPO "'env': {'set': {'CI': '1'}}, 'git': {'token_env': ['GH_TOKEN', 'CI'],"
	  " 'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}}}",
	  "git.token_env[1]: \"CI\" is also set by env.set\n", NULL },
	{ "{" V APP_REPO "'env': {'set': {'GH_TOKEN': '1'}}, 'git': {"
	  " 'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}}}",
	  "env.set.GH_TOKEN: \"GH_TOKEN\" is also a git.token_env variable (the git token's placeholder)\n", NULL },
	{ "{" V APP_REPO "'secrets': {'npm': {'from_env': 'GITHUB_TOKEN', 'hosts': ['npm.example']}},"
	  " 'git': {'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}}}",
	  "secrets.npm.env: \"GITHUB_TOKEN\" is also a git.token_env variable (the git token's placeholder)\n", NULL },
	{ "{" V APP_REPO "'git': {'token_env': ['NPM_TOKEN'],"
	  " 'github_app': {'app_id': 1, 'installation_id': 2, 'private_key_file': '/k'}},"
	  " 'secrets': {'npm': {'from_env': 'REAL', 'env': 'NPM_TOKEN', 'hosts': ['npm.example']}}}",
	  "git.token_env[0]: \"NPM_TOKEN\" is already the placeholder variable of secrets.npm\n", NULL },
	{ "{" V "'git': {'api_allow': '/graphql'}}", "git.api_allow: expected an array\n", NULL },
	{ "{" V "'git': {'api_allow': ['/']}}",
	  "git.api_allow[0]: \"/\" would allow every path: list the prefixes the agent needs (e.g. \"/graphql\")\n", NULL },
	{ "{" V "'git': {'api_allow': ['graphql']}}", "git.api_allow[0]: expected a path starting with \"/\"\n", NULL },
	{ "{" V "'git': {'api_allow': ['/graphql', '/graphql/']}}", "git.api_allow[1]: duplicate of git.api_allow[0]\n", NULL },
	{ "{" V "'git': {'api_allow': ['/a/../b']}}", "git.api_allow[0]: \".\" and \"..\" segments are not allowed\n", NULL },
	{ "{" V "'git': {'api_allow': ['/repos/acme/api/..;/keys']}}",
	  "git.api_allow[0]: the path holds a ';' parameter (\"..;\" is \"..\" to some servers): no request path can match it\n", NULL },
	{ "{" V "'git': {'api_allow': ['/repos/acme/api/.../keys']}}",
	  "git.api_allow[0]: the path has a \".\" or \"..\" segment (or one of dots only): no request path can match it\n", NULL },
	/* spend */
	{ "{" V "'spend': []}", "spend: expected an object\n", NULL },
	{ "{" V "'spend': {'budget': 1}}", "spend.budget: unknown key\n", NULL },
	{ "{" V "'spend': {'cap_usd': -0.01}}", "spend.cap_usd: expected a number >= 0 (USD) or null (no cap)\n", NULL },
	{ "{" V "'spend': {'cap_usd': '5'}}", "spend.cap_usd: expected a number >= 0 (USD) or null (no cap)\n", NULL },
	{ "{" V "'spend': {'cap_usd': 1e999}}", "$: invalid JSON at line 1, column *\n", NULL },
	{ "{" V "'spend': {'ledger': 'sqlite:spend.db'}}", "spend.ledger: \"sqlite:PATH\": expected an absolute path\n", NULL },
	{ "{" V "'spend': {'ledger': 'sqlite:/a/../b'}}",
	  "spend.ledger: \"sqlite:PATH\": \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'spend': {'ledger': 'mysql://db/x'}}",
	  "spend.ledger: expected \"sqlite:/PATH\", \"postgresql://...\" or null (this session alone, in memory)\n", NULL },
	{ "{" V "'spend': {'ledger': 5}}",
	  "spend.ledger: expected \"sqlite:/PATH\", \"postgresql://...\" or null (this session alone, in memory)\n", NULL },
	{ "{" V "'spend': {'ledger': 'postgresql://u:secret@db/x'}}",
	  "spend.ledger: a password does not belong in the policy: give it in PGPASSWORD or ~/.pgpass\n", NULL },
	{ "{" V "'spend': {'ledger': 'postgres://db/x?sslmode=require&Password=secret'}}",
	  "spend.ledger: a password does not belong in the policy: give it in PGPASSWORD or ~/.pgpass\n", NULL },
	{ "{" V "'spend': {'ledger': 'postgresql://db/x y'}}",
	  "spend.ledger: a PostgreSQL URI has no spaces, control or non-ASCII characters\n", NULL },
	{ "{" V "'spend': {'providers': {}}}", "spend.providers: expected an array\n", NULL },
	{ "{" V "'spend': {'providers': ['anthropic']}}", "spend.providers[0]: expected an object\n", NULL },
	{ "{" V "'spend': {'providers': [{}]}}",
	  "spend.providers[0].api: required key is missing\n"
	  "spend.providers[0].hosts: required key is missing: a provider needs the hosts it is metered on\n", NULL },
	/* a refused provider's slot is reused by the next one */
	{ "{" V "'spend': {'providers': [{'hosts': ['a.com']}, {'api': 'openai', 'hosts': ['b.com']}]}}",
	  "spend.providers[0].api: required key is missing\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'gemini', 'hosts': ['x.com']}]}}",
	  "spend.providers[0].api: expected \"anthropic\" or \"openai\"\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'openai', 'hosts': []}]}}",
	  "spend.providers[0].hosts: must not be empty: a provider needs the hosts it is metered on\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'openai', 'hosts': ['*.openai.com']}]}}",
	  "spend.providers[0].hosts[0]: wildcards are not allowed: provider hosts are exact names\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'openai', 'hosts': ['a.com', 'A.com']}]}}",
	  "spend.providers[0].hosts[1]: duplicate of spend.providers[0].hosts[0]\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'openai', 'hosts': ['a.com']}, {'api': 'anthropic', 'hosts': ['a.com']}]}}",
	  "spend.providers[1].hosts[0]: \"a.com\" is already a host of spend.providers[0]\n", NULL },
	{ "{" V "'spend': {'providers': [{'api': 'openai', 'hosts': ['a.com'], 'path': '/v1'}]}}",
	  "spend.providers[0].path: unknown key\n", NULL },
	{ "{" V "'spend': {'prices': []}}", "spend.prices: expected an object of model names to prices\n", NULL },
	{ "{" V "'spend': {'prices': {'m': 3}}}", "spend.prices.m: expected an object\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {}}}}",
	  "spend.prices.m.input: required key is missing\nspend.prices.m.output: required key is missing\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': -1, 'output': 1}}}}",
	  "spend.prices.m.input: expected a number from 0 to 1000000 (USD per million tokens)\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': 1000001}}}}",
	  "spend.prices.m.output: expected a number from 0 to 1000000 (USD per million tokens)\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': null}}}}",
	  "spend.prices.m.output: expected a number from 0 to 1000000 (USD per million tokens)\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': 1, 'cache_write': 1250000.01}}}}",
	  "spend.prices.m.cache_write: expected a number from 0 to 1250000 (USD per million tokens) or null\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': 1, 'cache_read': 1000000.5}}}}",
	  "spend.prices.m.cache_read: expected a number from 0 to 1000000 (USD per million tokens) or null\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': 1, 'cache_read': '0.1'}}}}",
	  "spend.prices.m.cache_read: expected a number from 0 to 1000000 (USD per million tokens) or null\n", NULL },
	{ "{" V "'spend': {'prices': {'m': {'input': 1, 'output': 1, 'batch': 0.5}}}}",
	  "spend.prices.m.batch: unknown key\n", NULL },
	{ "{" V "'spend': {'prices': {'a*b': {'input': 1, 'output': 1}}}}",
	  "spend.prices[\"a*b\"]: invalid model name: expected 1 to 128 printable ASCII characters without spaces, '*' only at the end\n", NULL },
	{ "{" V "'spend': {'prices': {'gpt 4': {'input': 1, 'output': 1}}}}",
	  "spend.prices[\"gpt 4\"]: invalid model name*\n", NULL },
	{ "{" V "'spend': {'prices': {'': {'input': 1, 'output': 1}}}}",
	  "spend.prices[\"\"]: invalid model name*\n", NULL },
	{ "{" V "'spend': {'parent': '-p', 'ledger': 'sqlite:/l.db'}}",
	  "spend.parent: expected 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit "
	  "(a session id), or null\n", NULL },
	{ "{" V "'spend': {'parent': 'p'}}",
	  "spend.parent: needs spend.ledger: the parent session must exist in the same ledger\n", NULL },
	{ "{" V "'spend': {'parent': 'p', 'ledger': null}}",
	  "spend.parent: needs spend.ledger: the parent session must exist in the same ledger\n", NULL },
	{ "{" V "'session': {'id': 's1'}, 'spend': {'parent': 's1', 'ledger': 'sqlite:/l.db'}}",
	  "spend.parent: a session cannot be its own parent\n", NULL },
	{ "{" V "'spend': {'on_exhausted': 'halt'}}", "spend.on_exhausted: expected \"block\" or \"stop\"\n", NULL },
	{ "{" V "'spend': {'on_exhausted': null}}", "spend.on_exhausted: expected \"block\" or \"stop\"\n", NULL },
	{ "{" V "'spend': {'max_body_bytes': 0}}", "spend.max_body_bytes: expected an integer from 1 to 1073741824\n", NULL },
	{ "{" V "'spend': {'max_body_bytes': 1073741825}}",
	  "spend.max_body_bytes: expected an integer from 1 to 1073741824\n", NULL },
	{ "{" V "'spend': {'max_body_bytes': 1024.0}}", "spend.max_body_bytes: expected an integer from 1 to 1073741824\n", NULL },
	{ "{" V "'spend': {'default_max_output_tokens': -5}}",
	  "spend.default_max_output_tokens: expected an integer from 1 to 10000000\n", NULL },
	{ "{" V "'spend': {'default_max_output_tokens': 10000001}}",
	  "spend.default_max_output_tokens: expected an integer from 1 to 10000000\n", NULL },
	{ "{" V "'spend': {'pass': ['/v1/x', 'v1/y', '/v1/../z', '/', '/a%2e']}}",
	  "spend.pass[1]: expected a path starting with \"/\"\n"
	  "spend.pass[2]: \".\" and \"..\" segments are not allowed\n"
	  "spend.pass[3]: \"/\" would pass every request unmetered: list the prefixes to pass (e.g. \"/v1/messages/count_tokens\")\n"
	  "spend.pass[4]: percent-escapes are not allowed\n", NULL },
	{ "{" V "'spend': {'pass': '/v1/x'}}", "spend.pass: expected an array\n", NULL },
	{ "{" V "'spend': {'server_state': 'yes'}}",
	  "spend.server_state: expected \"refuse\" or \"allow\"\n", NULL },
	{ "{" V "'spend': {'server_state': 'allow'}}",
	  "spend.server_state_reserve_usd: needed when spend.server_state is \"allow\": the USD reserved on top for the input the provider adds from stored state\n", NULL },
	{ "{" V "'spend': {'server_state': 'allow', 'server_state_reserve_usd': null}}",
	  "spend.server_state_reserve_usd: must be a number when spend.server_state is \"allow\"\n", NULL },
	{ "{" V "'spend': {'server_state_reserve_usd': -1}}",
	  "spend.server_state_reserve_usd: expected a number of USD from 0 to 1e9, or null\n", NULL },
	{ "{" V "'spend': {'ledger_timeout_ms': 0}}",
	  "spend.ledger_timeout_ms: expected an integer from 1 to 600000\n", NULL },
	{ "{" V "'spend': {'ledger_timeout_ms': 600001}}",
	  "spend.ledger_timeout_ms: expected an integer from 1 to 600000\n", NULL },
	/* receipts */
	{ "{" V "'receipts': {'sign': 'none'}}",
	  "receipts.sign: expected \"line\" or \"checkpoint\"\n", NULL },
	{ "{" V "'receipts': {'sign': 1, 'checkpoint_ms': 0}}",
	  "receipts.sign: expected \"line\" or \"checkpoint\"\n"
	  "receipts.checkpoint_ms: expected an integer from 1 to 60000\n", NULL },
	{ "{" V "'receipts': {'checkpoint_ms': 60001, 'every': 3}}",
	  "receipts.checkpoint_ms: expected an integer from 1 to 60000\n"
	  "receipts.every: unknown key\n", NULL },
	{ "{" V "'receipts': []}", "receipts: expected an object\n", NULL },
	/* env: airlock's own variables, also in env.pass */
	{ "{" V "'env': {'pass': ['PATH', 'https_proxy']}}",
	  "env.pass[1]: \"https_proxy\" is one of airlock's own variables\n", NULL },
	{ "{" V "'env': {'set': {'NPM_CONFIG_CAFILE': '/x'}}}",
	  "env.set.NPM_CONFIG_CAFILE: \"NPM_CONFIG_CAFILE\" is one of airlock's own variables\n", NULL },
	{ "{" V "'env': {'set': {'PIP_CERT': '/x'}}}",
	  "env.set.PIP_CERT: \"PIP_CERT\" is one of airlock's own variables\n", NULL },
	{ "{" V "'secrets': {'a': {'from_env': 'T', 'env': 'DENO_CERT', 'hosts': ['x.com']}}}",
	  "secrets.a.env: \"DENO_CERT\" is one of airlock's own variables\n", NULL },
	/* fs: ro, protect */
	{ "{" V "'fs': {'ro': 'x'}}", "fs.ro: expected an array\n", NULL },
	{ "{" V "'fs': {'ro': ['root/.pyenv']}}", "fs.ro[0]: expected an absolute path\n", NULL },
	{ "{" V "'fs': {'ro': ['/a/../b']}}", "fs.ro[0]: \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'fs': {'ro': ['/a', '/a/']}}", "fs.ro[1]: duplicate of fs.ro[0]\n", NULL },
	{ "{" V "'fs': {'rw': ['/srv/x'], 'ro': ['/srv//x/']}}", "fs.ro[0]: same path as fs.rw[0]\n", NULL },
	{ "{" V "'fs': {'ro': ['/srv/x'], 'hide': ['/a', '/srv/x']}}", "fs.hide[1]: same path as fs.ro[0]\n", NULL },
	{ "{" V "'fs': {'protect': 'x'}}", "fs.protect: expected an array\n", NULL },
	{ "{" V "'fs': {'protect': ['/abs']}}",
	  "fs.protect[0]: expected a path relative to the workspace (no leading \"/\")\n", NULL },
	{ "{" V "'fs': {'protect': ['a/../b']}}", "fs.protect[0]: \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'fs': {'protect': ['./Makefile']}}", "fs.protect[0]: \".\" and \"..\" components are not allowed\n", NULL },
	{ "{" V "'fs': {'protect': ['']}}",
	  "fs.protect[0]: expected a path inside the workspace, not the workspace itself\n", NULL },
	{ "{" V "'fs': {'protect': ['a//b/', 'a/b']}}", "fs.protect[1]: duplicate of fs.protect[0]\n", NULL },
	/* many errors in one document, in document order */
	{ "{'mode': 'loud', 'egress': {'alow': [], 'ports': [80, 0, 80]},"
	  " 'secrets': {'a': {'from_env': 'T'}}, 'git': {'credential': 'b'},"
	  " 'fs': {'rw': ['x']}}",
	  "mode: expected \"off\", \"shadow\" or \"enforce\"\n"
	  "egress.alow: unknown key (did you mean \"allow\"?)\n"
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
	/* git.provider, git.project_ids and the provider's repository shape */
	{ "{" V "'git': {'provider': 'gitea'}}",
	  "git.provider: expected \"github\", \"gitlab\" or \"bitbucket\"\n", NULL },
	{ "{" V "'git': {'provider': 'GitLab'}}",
	  "git.provider: expected \"github\", \"gitlab\" or \"bitbucket\"\n", NULL },
	{ "{" V "'git': {'project_ids': {'1': 'a/b'}}}",
	  "git.project_ids: only for git.provider \"gitlab\" (numeric project ids)\n", NULL },
	{ "{" V "'git': {'provider': 'gitlab', 'project_ids': {'01': 'a/b', 'x': 'a/b', '0': 'a/b',"
	  " '5': 'a', '6': 7, '7': 'a//b', '8': 'a/-b/c', '9': 'a.git/b/c', '12345678901234567890': 'a/b'}}}",
	  "git.project_ids[\"01\"]: a project id is a decimal number >= 1 without leading zeros\n"
	  "git.project_ids.x: a project id is a decimal number >= 1 without leading zeros\n"
	  "git.project_ids[\"0\"]: a project id is a decimal number >= 1 without leading zeros\n"
	  "git.project_ids[\"5\"]: expected \"GROUP/.../PROJECT\" or \"HOST/GROUP/.../PROJECT\"\n"
	  "git.project_ids[\"6\"]: expected \"GROUP/.../PROJECT\"\n"
	  "git.project_ids[\"7\"]: a GROUP must be 1 to 255 characters\n"
	  "git.project_ids[\"8\"]: a GitLab path segment does not start with '-'\n"
	  "git.project_ids[\"9\"]: a GROUP does not end in \".git\"\n"
	  "git.project_ids[\"12345678901234567890\"]: a project id is a decimal number >= 1 without leading zeros\n",
	  NULL },
	{ "{" V "'session': {'repo': 'github.com/acme/sub/api'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/api'}, 'git': {'provider': 'gitlab'}}",
	  "session.repo: expected \"HOST/GROUP/.../PROJECT\"\n", NULL },
	{ "{" V "'session': {'repo': 'bitbucket.org/ws/sub/api'}, 'git': {'provider': 'bitbucket'}}",
	  "session.repo: expected \"HOST/OWNER/REPO\"\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/a/b'}, 'git': {'provider': 'gitlab', 'github_app': {'app_id': 'Iv1.x',"
	  " 'installation_id': 7, 'private_key_file': '/etc/app.pem'}}}",
	  "git: github_app mints GitHub tokens: git.provider is \"gitlab\"\n", NULL },
	/* git.gitlab_mint */
	{ "{" V "'session': {'repo': 'gitlab.com/a/b/c'}, 'git': {'provider': 'gitlab', 'gitlab_mint': {}}}",
	  "git.gitlab_mint: give one of token_env and token_file (the group or instance token the supervisor mints with)\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/a/b/c'}, 'git': {'provider': 'gitlab', 'gitlab_mint': {'token_env': 'A',"
	  " 'token_file': '/x'}}}",
	  "git.gitlab_mint: give one of token_env and token_file (the group or instance token the supervisor mints with)\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/a/b/c'}, 'git': {'provider': 'gitlab', 'gitlab_mint': {'token_env': '1A',"
	  " 'expires_minutes': 0, 'api': 'http://gitlab.com', 'ca': '', 'x': 1}}}",
	  "git.gitlab_mint.token_env: expected the name of the supervisor's environment variable that holds the group or instance token\n"
	  "git.gitlab_mint.expires_minutes: expected minutes, 1 to 525600\n"
	  "git.gitlab_mint.api: expected an https URL such as \"https://gitlab.com\": *\n"
	  "git.gitlab_mint.ca: expected a non-empty path or null\n"
	  "git.gitlab_mint.x: unknown key*\n", NULL },
	{ "{" V "'session': {'repo': 'github.com/a/b'}, 'git': {'gitlab_mint': {'token_env': 'A'}}}",
	  "git.gitlab_mint: mints GitLab project access tokens: needs git.provider \"gitlab\"\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/a/b/c'}, 'env': {'pass': ['PATH', 'GL_*']},"
	  " 'git': {'provider': 'gitlab', 'gitlab_mint': {'token_env': 'GL_ADMIN'}}}",
	  "git.gitlab_mint.token_env: GL_ADMIN is passed by env.pass: the agent would hold the group token\n", NULL },
	{ "{" V "'git': {'provider': 'gitlab', 'gitlab_mint': {'token_env': 'A'}}}",
	  "git.gitlab_mint: needs session.repo: the token is minted for the session's project\n", NULL },
	{ "{" V "'session': {'repo': 'gitlab.com/a/b/c'}, 'secrets': {'s': {'from_env': 'X', 'hosts': ['x.com']}},"
	  " 'git': {'provider': 'gitlab', 'credential': 's', 'gitlab_mint': {'token_env': 'A'}}}",
	  "git: give only one of credential, github_app and gitlab_mint\n", NULL },
	/* a control character in a key stays escaped: one error, one line */
	{ "{" V "'a\\nb': 1}", "$[\"a\\nb\"]: unknown key\n", NULL },
	{ "{" V "'egress': {'allow': ['a\\nb']}}", "egress.allow[0]: %R\n", "a\nb" },
	/* publish */
#define PUBSEC " 'secrets': {'t': {'from_env': 'T', 'hosts': ['p.example']}}"
	{ "{" V "'publish': {}}", "publish: expected an array\n", NULL },
	{ "{" V "'secrets': {'t': {'from_env': 'T', 'hosts': []}},"
	  " 'publish': [{'listen': '127.0.0.1:80', 'port': 80}]}",
	  "secrets.t.hosts: must not be empty: a secret needs the hosts it may be sent to\n", NULL },
	{ "{" V "'publish': [{}]}",
	  "publish[0].listen: required key is missing: the address and port to listen on\n"
	  "publish[0].port: required key is missing: the sandbox's port to relay to\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1', 'port': 80}]}",
	  "publish[0].listen: expected \"IP:PORT\" (IPv6 as \"[ADDR]:PORT\"), such as \"127.0.0.1:8080\"\n", NULL },
	{ "{" V "'publish': [{'listen': 'localhost:80', 'port': 80}]}",
	  "publish[0].listen: expected \"IP:PORT\" (IPv6 as \"[ADDR]:PORT\"), such as \"127.0.0.1:8080\"\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 0}]}",
	  "publish[0].port: expected an integer from 1 to 65535\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'protocol': 'udp'}]}",
	  "publish[0].protocol: expected \"http\" or \"tcp\"\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'auth': 'nope'}]," PUBSEC "}",
	  "publish[0].auth: \"nope\" is not a key of secrets\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'auth': 't', 'protocol': 'tcp'}]," PUBSEC "}",
	  "publish[0]: auth needs protocol \"http\" (a tcp stream carries no request to check)\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'auth_cookie': 'c'}]}",
	  "publish[0]: auth_cookie names the cookie that carries auth's value: set auth too\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'auth': 't', 'auth_cookie': 'a b'}]," PUBSEC "}",
	  "publish[0].auth_cookie: expected a cookie name (1-128 token characters), or null\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'max_response_bytes': 0}]}",
	  "publish[0].max_response_bytes: expected an integer from 1 to 1125899906842624, or null (no limit)\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'max_conns': 5000}]}",
	  "publish[0].max_conns: expected an integer from 1 to 4096\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'exposed': 1}]}",
	  "publish[0].exposed: expected true or false\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'expose': true}]}",
	  "publish[0].expose: unknown key (did you mean \"exposed\"?)\n", NULL },
	{ "{" V "'publish': [{'listen': '127.0.0.1:80', 'port': 80}, {'listen': '127.0.0.1:80', 'port': 81}]}",
	  "publish[1]: same listen as publish[0]\n", NULL },
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
	"{'version': 1, 'publish': []}",
	"{'version': 1, 'publish': [{'listen': '0.0.0.0:8080', 'port': 8080, 'exposed': true,"
	" 'protocol': 'tcp', 'max_conns': 1, 'rate_bytes': 1000, 'max_response_bytes': null},"
	" {'listen': '[::1]:8080', 'port': 3000, 'auth': 't', 'auth_cookie': 'airlock_auth',"
	" 'max_response_bytes': 1048576}],"
	" 'secrets': {'t': {'from_env': 'T', 'hosts': ['p.example']}}}",
	/* a secret only publish[].auth uses may be sent nowhere */
	"{'version': 1, 'secrets': {'t': {'from_env': 'T', 'hosts': []}},"
	" 'publish': [{'listen': '127.0.0.1:80', 'port': 80, 'auth': 't'}]}",
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
	"{'version': 1, 'egress': {'transparent': true, 'intercept': ['*.example.com', '192.0.2.0/24:443']}}",
	/* an empty prefix (a placeholder of random characters only), any path */
	"{'version': 1, 'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'prefix': '',"
	" 'paths': ['/', '/v1/', '/a-._~!$&\\u0027()*+,;=:@/'], 'methods': ['GET', 'M-SEARCH', 'POST'],"
	" 'headers': null}}}",
	"{'version': 1, 'secrets': {'a': {'from_env': 'T', 'hosts': ['x.com'], 'prefix': 'ghp_',"
	" 'paths': null, 'methods': null}}}",
	/* the credential's own variable may be one of the token's */
	"{'version': 1, 'secrets': {'gh': {'from_file': '/run/gh', 'env': 'GH_TOKEN', 'hosts': ['github.com']}},"
	" 'git': {'credential': 'gh', 'hosts': ['github.com'], 'token_env': ['GH_TOKEN', 'GITHUB_TOKEN']}}",
	/* without a git token the token's variables are free */
	"{'version': 1, 'secrets': {'npm': {'from_env': 'GITHUB_TOKEN', 'hosts': ['npm.example']}},"
	" 'env': {'set': {'GH_TOKEN': 'x'}}}",
	"{'version': 1, 'session': {'repo': 'github.com/acme/api'}, 'git': {'token_env': [],"
	" 'github_app': {'app_id': 12345, 'installation_id': 9007199254740993, 'private_key_file': 'app.pem',"
	" 'api': 'https://ghe.example:8443/api/v3/', 'ca': '/etc/ghe-ca.pem',"
	" 'permissions': {'issues': 'write', 'pull_requests': 'write', 'organization_projects': 'admin'}},"
	" 'api_hosts': ['api.github.com'], 'api_allow': ['/graphql', '/user/repos/']}}",
	"{'version': 1, 'session': {'repo': 'github.com/acme/api'}, 'git': {'github_app': null, 'credential': null}}",
	"{'version': 1, 'session': {'id': 'child-1'}, 'spend': {'cap_usd': 0, 'ledger': "
	"'postgresql://airlock@db.internal:5432/spend?sslmode=verify-full', 'parent': 'root-1',"
	" 'providers': [{'api': 'openai', 'hosts': ['api.openai.com']}, {'api': 'openai', 'hosts': ['llm.example']}],"
	" 'prices': {'*': {'input': 0, 'output': 0}, 'gpt-4o': {'input': 2.5, 'output': 10, 'cache_write': null,"
	" 'cache_read': 1.25}}, 'on_exhausted': 'stop', 'max_body_bytes': 1, 'default_max_output_tokens': 10000000}}",
	/* GitLab: nested groups, a host-qualified key, numeric ids */
	"{'version': 1, 'session': {'repo': 'gitlab.example/acme/platform/api'}, 'git': {'provider': 'gitlab',"
	" 'hosts': ['gitlab.example', 'gitlab.other'], 'repos': {'acme/platform/lib': ['fetch'],"
	" 'gitlab.other/a/b/c/d': ['push'], 'acme/tools.git': ['fetch']},"
	" 'project_ids': {'123': 'acme/platform/api', '9007199254740993': 'Acme/Lib.git'}}}",
	"{'version': 1, 'session': {'repo': 'bitbucket.org/ws/api'}, 'git': {'provider': 'bitbucket',"
	" 'hosts': ['bitbucket.org'], 'api_hosts': ['api.bitbucket.org'], 'repos': {'ws/lib': ['fetch']}}}",
	"{'version': 1, 'git': {'provider': 'github', 'project_ids': {}}}",
	"{'version': 1, 'session': {'repo': 'gitlab.example/acme/api'}, 'git': {'provider': 'gitlab',"
	" 'gitlab_mint': {'api': 'https://gitlab.example:8443/', 'token_file': '/etc/airlock/gl.token',"
	" 'expires_minutes': 525600, 'ca': '/etc/gl-ca.pem'}, 'token_env': ['GITLAB_TOKEN']}}",
	"{'version': 1, 'spend': {'cap_usd': null, 'ledger': 'postgres://'}}",
	/* the largest prices, whose default cache_write is 1.25 x input */
	"{'version': 1, 'spend': {'cap_usd': 1e300, 'prices': {'m': {'input': 1000000, 'output': 1000000}},"
	" 'max_body_bytes': 1073741824}}",
	"{'version': 1, 'spend': {'prices': {'m': {'input': 0, 'output': 0, 'cache_write': 1250000,"
	" 'cache_read': 1000000}}}}",
	"{'version': 1, 'spend': {'cap_usd': 12.5, 'ledger': 'sqlite:/var/lib/airlock/spend.db'}}",
	"{'version': 1, 'fs': {'hide': ['/opt/secret'], 'ro': ['/opt/secret/tool', '/root/.pyenv'],"
	" 'protect': ['Makefile', '.github/workflows', 'scripts//ci/']}}",
	/* body fields and capture rules */
	"{'version': 1, 'secrets': {'rt': {'from_env': 'RT', 'hosts': ['auth.example'],"
	" 'body': ['json:/a~1b/0', 'form:refresh_token']},"
	" 'scm': {'hosts': ['github.com'], 'headers': ['authorization'], 'capture': [{'hosts': ['cp.example'],"
	" 'methods': ['POST'], 'paths': ['/sessions/*/scm-credentials'], 'json': ['/token'],"
	" 'expires': '/expires_at'}, {'hosts': ['cp.example:8443'], 'headers': ['X-Token']}]}}}",
};

/* Each valid document is accepted, and its canonical form reads back to
 * itself (the digest is a function of meaning). */
static void test_valid(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(valid_docs); i++) {
		struct policy_errors errs = { 0 }, errs2 = { 0 };
		struct policy *p = parse(valid_docs[i], NULL, &errs), *q = NULL;
		char *got = join_errors(&errs);

		if (!tap_ok(p && errs.count == 0, "valid %zu: %.60s", i, valid_docs[i]))
			printf("#   errors:\n%s", got);
		free(got);
		if (p)
			q = policy_parse(p->canonical, strlen(p->canonical), NULL, &errs2);
		got = join_errors(&errs2);
		if (!tap_ok(q && strcmp(q->canonical, p->canonical) == 0,
			    "valid %zu: the canonical form reads back to itself", i))
			printf("#   errors:\n%s", got);
		free(got);
		policy_free(q);
		policy_free(p);
		policy_errors_free(&errs);
		policy_errors_free(&errs2);
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

/* Every new section at once, and documents that mean the same. */
#define RICH_SESSION "'session': {'id': 's1', 'repo': 'github.com/acme/api'}"
#define RICH_EGRESS "'egress': {'allow': ['x.example'], 'intercept': ['audit.example', '*.cdn.example'], 'transparent': true}"
#define RICH_SECRETS                                                           \
	"'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"  \
	" 'prefix': 'sk-ant-api03-', 'paths': ['/v1/', '/v2/'], 'methods': ['POST', 'GET']}}"
#define RICH_GIT                                                               \
	"'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']}," \
	" 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"     \
	" 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"         \
	" 'api_allow': ['/graphql', '/search']}"
#define RICH_SPEND                                                             \
	"'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"                      \
	" 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"                       \
	" 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}}," \
	" 'on_exhausted': 'stop'}"
#define RICH_FS "'fs': {'ro': ['/root/.pyenv'], 'protect': ['Makefile', '.github']}"
#define RICH(egress, secrets, git, spend, fs)                                  \
	"{'version': 1, " RICH_SESSION ", " egress ", " secrets ", " git ", " spend ", " fs "}"
#define RICH_DOC RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT, RICH_SPEND, RICH_FS)

static const char *const same_as_rich[] = {
	/* keys reordered at every level */
	"{" RICH_FS ", " RICH_SPEND ", " RICH_GIT ", " RICH_SECRETS ", " RICH_EGRESS ", " RICH_SESSION
	", 'version': 1}",
	/* defaults written out, sets reordered, spelling variants */
	RICH("'egress': {'transparent': true, 'intercept': ['Audit.Example.', '*.cdn.example'], 'allow': ['x.example']}",
	     "'secrets': {'ant': {'methods': ['GET', 'POST'], 'paths': ['/v2/', '/v1/'], 'prefix': 'sk-ant-api03-',"
	     " 'hosts': ['api.anthropic.com'], 'env': 'ANTHROPIC_API_KEY', 'from_env': 'ANTHROPIC_API_KEY',"
	     " 'headers': null, 'from_file': null}}",
	     "'git': {'api_allow': ['/search/', '/graphql'], 'token_env': ['GH_TOKEN'], 'ssh': false,"
	     " 'github_app': {'permissions': {'checks': 'read', 'issues': 'write'}, 'ca': null,"
	     " 'api': 'HTTPS://API.GitHub.com:443/', 'private_key_file': '/etc/app.pem', 'installation_id': 7,"
	     " 'app_id': '42'}, 'credential': null, 'repos': {'Acme/Lib.git': ['fetch']},"
	     " 'api_hosts': ['API.github.com.'], 'hosts': ['github.com']}",
	     "'spend': {'default_max_output_tokens': 8192, 'max_body_bytes': 33554432, 'on_exhausted': 'stop',"
	     " 'parent': null, 'prices': {'claude-haiku': {'input': 0.8, 'output': 4.0, 'cache_write': 1.0,"
	     " 'cache_read': 0.08}, 'claude-*': {'output': 15, 'input': 3.0, 'cache_read': 0.3, 'cache_write': 3.75}},"
	     " 'providers': [{'hosts': ['API.anthropic.com'], 'api': 'anthropic'}],"
	     " 'ledger': 'sqlite://var//lib/airlock/spend.db/', 'cap_usd': 5.0}",
	     "'fs': {'protect': ['.github/', 'Makefile'], 'ro': ['/root//.pyenv'], 'rw': [], 'hide': []}"),
};

/* Each differs from RICH_DOC in one semantic value of a new key. */
static const char *const differs_from_rich[] = {
	RICH("'egress': {'allow': ['x.example'], 'intercept': ['audit.example', '*.cdn.example'], 'transparent': false}",
	     RICH_SECRETS, RICH_GIT, RICH_SPEND, RICH_FS),
	RICH("'egress': {'allow': ['x.example'], 'intercept': ['*.cdn.example', 'audit.example'], 'transparent': true}",
	     RICH_SECRETS, RICH_GIT, RICH_SPEND, RICH_FS),
	RICH("'egress': {'allow': ['x.example'], 'intercept': ['audit.example'], 'transparent': true}",
	     RICH_SECRETS, RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, "'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"
	     " 'paths': ['/v1/', '/v2/'], 'methods': ['POST', 'GET']}}", RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, "'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"
	     " 'prefix': 'sk-ant-api03-', 'paths': ['/v1/'], 'methods': ['POST', 'GET']}}", RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, "'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"
	     " 'prefix': 'sk-ant-api03-', 'paths': ['/v1', '/v2/'], 'methods': ['POST', 'GET']}}", RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, "'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"
	     " 'prefix': 'sk-ant-api03-', 'paths': ['/v1/', '/v2/'], 'methods': ['POST']}}", RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, "'secrets': {'ant': {'from_env': 'ANTHROPIC_API_KEY', 'hosts': ['api.anthropic.com'],"
	     " 'prefix': 'sk-ant-api03-', 'paths': ['/v1/', '/v2/']}}", RICH_GIT, RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 43, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 8, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app2.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'api': 'https://api.github.com:8443', 'permissions': {'issues': 'write', 'checks': 'read'}},"
	     " 'token_env': ['GH_TOKEN'], 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'ca': '/etc/ca.pem', 'permissions': {'issues': 'write', 'checks': 'read'}},"
	     " 'token_env': ['GH_TOKEN'], 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'read', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}},"
	     " 'api_allow': ['/graphql', '/search']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS,
	     "'git': {'hosts': ['github.com'], 'api_hosts': ['api.github.com'], 'repos': {'acme/lib': ['fetch']},"
	     " 'github_app': {'app_id': 42, 'installation_id': 7, 'private_key_file': '/etc/app.pem',"
	     " 'permissions': {'issues': 'write', 'checks': 'read'}}, 'token_env': ['GH_TOKEN'],"
	     " 'api_allow': ['/graphql']}", RICH_SPEND, RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5.01, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/other.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'openai', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15, 'cache_read': 0.31}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}}}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db', 'parent': 'root',"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db', 'max_body_bytes': 1048576,"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT,
	     "'spend': {'cap_usd': 5, 'ledger': 'sqlite:/var/lib/airlock/spend.db', 'default_max_output_tokens': 4096,"
	     " 'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']}],"
	     " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku': {'input': 0.8, 'output': 4}},"
	     " 'on_exhausted': 'stop'}", RICH_FS),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT, RICH_SPEND, "'fs': {'ro': ['/root/.pyenv'], 'protect': ['Makefile']}"),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT, RICH_SPEND, "'fs': {'ro': [], 'protect': ['Makefile', '.github']}"),
	RICH(RICH_EGRESS, RICH_SECRETS, RICH_GIT, RICH_SPEND,
	     "'fs': {'rw': ['/root/.pyenv'], 'protect': ['Makefile', '.github']}"),
};

static void test_rich_digests(void)
{
	char *base = digest_of(RICH_DOC, NULL), *d;
	size_t i, j;
	char **all;

	tap_ok(base != NULL, "the document with every new key is valid");
	if (!base)
		return;
	for (i = 0; i < ARRAY_SIZE(same_as_rich); i++) {
		d = digest_of(same_as_rich[i], NULL);
		tap_is_str(d, base, "new keys: same meaning, same digest (%zu)", i);
		free(d);
	}
	all = util_xcalloc(ARRAY_SIZE(differs_from_rich), sizeof(*all));
	for (i = 0; i < ARRAY_SIZE(differs_from_rich); i++) {
		all[i] = digest_of(differs_from_rich[i], NULL);
		tap_ok(all[i] && strcmp(all[i], base) != 0,
		       "new keys: one semantic change, another digest (%zu)", i);
	}
	for (i = 0; i < ARRAY_SIZE(differs_from_rich); i++)
		for (j = i + 1; j < ARRAY_SIZE(differs_from_rich); j++)
			if (all[i] && all[j] && strcmp(all[i], all[j]) == 0)
				tap_ok(false, "new-key variants %zu and %zu collide", i, j);
	for (i = 0; i < ARRAY_SIZE(differs_from_rich); i++)
		free(all[i]);
	free(all);
	free(base);
}

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
		"\"mode\":\"shadow\",\"publish\":[],"
		"\"receipts\":{\"checkpoint_ms\":250,\"sign\":\"line\"},"
		"\"secrets\":{\"api\":{\"env\":\"API_KEY\",\"from_env\":\"API_KEY\",\"from_file\":null,"
		"\"headers\":[\"x-api-key\"],\"hosts\":[\"api.example.com\"],\"methods\":null,\"paths\":null,"
		"\"prefix\":\"airlock-ph-api-\"},"
		"\"gh\":{\"env\":\"GH\",\"from_env\":\"GH\",\"from_file\":null,\"headers\":null,"
		"\"hosts\":[\"github.com\"],\"methods\":null,\"paths\":null,\"prefix\":\"airlock-ph-gh-\"}},"
		"\"session\":{\"id\":\"s1\",\"repo\":\"github.com/acme/api\"},"
		"\"spend\":{\"cap_usd\":null,\"default_max_output_tokens\":8192,\"ledger\":null,"
		"\"ledger_timeout_ms\":5000,"
		"\"max_body_bytes\":33554432,\"on_exhausted\":\"block\",\"parent\":null,"
		"\"pass\":[\"/v1/messages/count_tokens\"],\"prices\":{},"
		"\"providers\":[],\"server_state\":\"refuse\",\"server_state_reserve_usd\":null},\"version\":1}";

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

/* Defaults of the new keys, as the canonical form and struct policy show
 * them. */
static void test_canonical_new(void)
{
	static const char *const want_in_min[] = {
		"\"egress\":{\"allow\":[],\"allow_ranges\":[],\"deny\":[],\"intercept\":[],"
		"\"ports\":[80,443],\"resolver\":[],\"transparent\":false,\"upstream_ca\":null}",
		"\"git\":{\"api_allow\":[],\"api_hosts\":[],\"credential\":null,\"github_app\":null,"
		"\"hosts\":[],\"repos\":{},\"ssh\":false,\"token_env\":[\"GH_TOKEN\",\"GITHUB_TOKEN\"]}",
		"\"spend\":{\"cap_usd\":null,\"default_max_output_tokens\":8192,\"ledger\":null,"
		"\"ledger_timeout_ms\":5000,"
		"\"max_body_bytes\":33554432,\"on_exhausted\":\"block\",\"parent\":null,"
		"\"pass\":[\"/v1/messages/count_tokens\"],\"prices\":{},"
		"\"providers\":[],\"server_state\":\"refuse\",\"server_state_reserve_usd\":null}",
		"\"fs\":{\"hide\":[],\"protect\":[],\"ro\":[],\"rw\":[]}",
	};
	struct policy_errors errs = { 0 };
	struct policy *p;
	size_t i;

	p = parse("{'version': 1}", NULL, &errs);
	ASSERT(p);
	for (i = 0; i < ARRAY_SIZE(want_in_min); i++)
		if (!tap_ok(strstr(p->canonical, want_in_min[i]) != NULL,
			    "default in the canonical form: %.40s", want_in_min[i]))
			tap_diag("canonical: %s", p->canonical);
	tap_ok(!p->transparent && p->nintercept == 0 && !p->git_github_app &&
	       p->ngit_token_env == 2 && strcmp(p->git_token_env[0], "GH_TOKEN") == 0 &&
	       strcmp(p->git_token_env[1], "GITHUB_TOKEN") == 0 && p->ngit_api_allow == 0 &&
	       !p->spend_has_cap && p->spend_ledger_kind == POLICY_LEDGER_MEMORY &&
	       !p->spend_ledger && !p->spend_ledger_target && !p->spend_parent &&
	       p->spend_on_exhausted == POLICY_EXHAUSTED_BLOCK &&
	       p->spend_max_body_bytes == 32u << 20 && p->spend_default_max_output_tokens == 8192 &&
	       p->nfs_ro == 0 && p->nfs_protect == 0,
	       "defaults of the new keys in struct policy");
	policy_free(p);
	policy_errors_free(&errs);

	p = parse("{'version': 1, 'session': {'repo': 'github.com/acme/api'},"
		  " 'secrets': {'a.b': {'from_env': 'T', 'hosts': ['x.com'], 'paths': ['/v2/', '/v1']}},"
		  " 'git': {'github_app': {'app_id': 12345, 'installation_id': 7, 'private_key_file': '/k',"
		  " 'api': 'HTTPS://GHE.Example:443/api/v3/', 'permissions': {'issues': 'write', 'checks': 'read'}}},"
		  " 'spend': {'cap_usd': 5, 'ledger': 'sqlite://var//spend.db/',"
		  " 'prices': {'m*': {'input': 3, 'output': 15}, 'h': {'input': 0.8, 'output': 4, 'cache_read': null}}},"
		  " 'fs': {'protect': ['a//b/', '.git/x'], 'ro': ['/r//o/']}}",
		  NULL, &errs);
	tap_ok(p != NULL, "the document of new keys parses");
	if (!p) {
		if (errs.count)
			tap_diag("%s: %s", errs.items[0].path, errs.items[0].message);
		policy_errors_free(&errs);
		return;
	}
	tap_ok(strstr(p->canonical, "\"prefix\":\"airlock-ph-a.b-\"") &&
	       strcmp(p->secrets[0].prefix, "airlock-ph-a.b-") == 0,
	       "prefix defaults to airlock-ph-NAME-");
	tap_ok(strstr(p->canonical, "\"headers\":null,\"hosts\":[\"x.com\"],\"methods\":null,"
				    "\"paths\":[\"/v1\",\"/v2/\"]") != NULL,
	       "paths sorted and kept as written, methods null");
	tap_ok(strstr(p->canonical, "\"github_app\":{\"api\":\"https://ghe.example/api/v3\","
				    "\"app_id\":\"12345\",\"ca\":null,\"installation_id\":7,"
				    "\"permissions\":{\"checks\":\"read\",\"issues\":\"write\"},"
				    "\"private_key_file\":\"/k\"}") != NULL,
	       "github_app: numeric app_id as a string, api canonical");
	tap_ok(p->git_github_app && strcmp(p->git_github_app->api_host, "ghe.example") == 0 &&
	       p->git_github_app->api_port == 443 &&
	       strcmp(p->git_github_app->api_path, "/api/v3") == 0 &&
	       p->git_github_app->npermissions == 2 &&
	       strcmp(p->git_github_app->permissions[0].name, "checks") == 0 &&
	       p->git_github_app->permissions[1].level == POLICY_GH_WRITE,
	       "github_app fields");
	tap_ok(strstr(p->canonical, "\"cap_usd\":5.0,") &&
	       strstr(p->canonical, "\"ledger\":\"sqlite:/var/spend.db\"") &&
	       p->spend_ledger_kind == POLICY_LEDGER_SQLITE &&
	       strcmp(p->spend_ledger_target, "/var/spend.db") == 0,
	       "cap and ledger canonical");
	tap_ok(strstr(p->canonical, "\"prices\":{\"h\":{\"cache_read\":0.08,\"cache_write\":1.0,"
				    "\"input\":0.8,\"output\":4.0},\"m*\":{\"cache_read\":0.3,"
				    "\"cache_write\":3.75,\"input\":3.0,\"output\":15.0}}") != NULL,
	       "prices: cache defaults 1.25 x and 0.1 x input, 15 digits");
	tap_ok(p->nspend_prices == 2 && p->spend_prices[0].cache_read == 0.08 &&
	       p->spend_prices[1].cache_read == 0.3 && p->spend_prices[1].is_prefix &&
	       !p->spend_prices[0].is_prefix,
	       "the prices the meter uses are the canonical ones");
	tap_ok(strstr(p->canonical, "\"protect\":[\".git/x\",\"a/b\"],\"ro\":[\"/r/o\"]") != NULL,
	       "fs.protect and fs.ro cleaned and sorted");
	policy_free(p);
	policy_errors_free(&errs);

	p = parse("{'version': 1, 'session': {'repo': 'github.com/a/b'}, 'git': {'github_app':"
		  " {'app_id': 'x', 'installation_id': 1, 'private_key_file': '/k',"
		  " 'api': 'https://[2001:DB8::1]:8443/'}}}", NULL, &errs);
	tap_ok(p && strcmp(p->git_github_app->api, "https://[2001:db8::1]:8443") == 0 &&
	       strcmp(p->git_github_app->api_host, "2001:db8::1") == 0 &&
	       p->git_github_app->api_port == 8443 && p->git_github_app->api_path[0] == '\0',
	       "github_app.api with an IPv6 address and a port");
	policy_free(p);
	policy_errors_free(&errs);

	p = parse("{'version': 1, 'session': {'repo': 'github.com/a/b'}, 'git': {'github_app':"
		  " {'app_id': 'x', 'installation_id': 1, 'private_key_file': '/k'}}}", NULL, &errs);
	tap_ok(p && strcmp(p->git_github_app->api, "https://api.github.com") == 0 &&
	       strcmp(p->git_github_app->api_host, "api.github.com") == 0 &&
	       p->git_github_app->api_port == 443 && !p->git_github_app->ca &&
	       p->git_github_app->npermissions == 0,
	       "github_app.api defaults to https://api.github.com");
	policy_free(p);
	policy_errors_free(&errs);
}

static void test_accessors(void)
{
	struct policy_errors errs = { 0 };
	const struct policy_price *pr;
	const struct policy_secret *sec;
	struct policy *p;

	p = parse("{'version': 1, 'session': {'repo': 'github.com/acme/api'},"
		  " 'secrets': {'gh': {'from_env': 'GH', 'hosts': ['github.com']},"
		  " 'ant': {'from_env': 'K', 'hosts': ['api.anthropic.com'], 'paths': ['/v1/', '/beta'],"
		  " 'methods': ['POST']}},"
		  " 'git': {'hosts': ['github.com', 'git.example'], 'credential': 'gh',"
		  " 'repos': {'acme/lib': ['fetch'], 'other/tool': ['push'], 'git.example/x/y': ['fetch', 'push'],"
		  " 'github.com/acme/lib': ['push']}, 'api_allow': ['/graphql', '/user/repos']},"
		  " 'spend': {'providers': [{'api': 'anthropic', 'hosts': ['api.anthropic.com']},"
		  " {'api': 'openai', 'hosts': ['api.openai.com', 'llm.example']}],"
		  " 'prices': {'claude-*': {'input': 3, 'output': 15}, 'claude-haiku-*': {'input': 1, 'output': 5},"
		  " 'claude-haiku-4': {'input': 0.5, 'output': 2}, 'gpt-4o': {'input': 2.5, 'output': 10}}}}",
		  NULL, &errs);
	tap_ok(p != NULL, "the accessor document parses");
	if (!p) {
		if (errs.count)
			tap_diag("%s: %s", errs.items[0].path, errs.items[0].message);
		policy_errors_free(&errs);
		return;
	}
	sec = policy_secret_by_name(p, "ant");
	tap_ok(sec && strcmp(sec->from_env, "K") == 0, "secret by name");
	tap_ok(!policy_secret_by_name(p, "ANT") && !policy_secret_by_name(p, "x"),
	       "secret names are exact");
	tap_ok(sec && policy_secret_applies(sec, "POST", "/v1/messages") &&
	       policy_secret_applies(sec, "POST", "/betax") &&
	       !policy_secret_applies(sec, "GET", "/v1/messages") &&
	       !policy_secret_applies(sec, "post", "/v1/messages") &&
	       !policy_secret_applies(sec, "POST", "/v1") &&
	       !policy_secret_applies(sec, "POST", "/v2/messages"),
	       "secret paths are byte prefixes, methods exact");
	sec = policy_secret_by_name(p, "gh");
	tap_ok(sec && policy_secret_applies(sec, "DELETE", "/anything"),
	       "a secret without paths or methods applies everywhere");

	tap_is_int(policy_git_repo_ops(p, "github.com", "acme", "api"),
		   POLICY_GIT_FETCH | POLICY_GIT_PUSH, "session repo: fetch and push");
	tap_is_int(policy_git_repo_ops(p, "GitHub.com.", "ACME", "Api.git"),
		   POLICY_GIT_FETCH | POLICY_GIT_PUSH, "session repo, case and .git ignored");
	tap_is_int(policy_git_repo_ops(p, "git.example", "acme", "api"), 0,
		   "the session repo's name on another host: nothing");
	tap_is_int(policy_git_repo_ops(p, "github.com", "acme", "lib"),
		   POLICY_GIT_FETCH | POLICY_GIT_PUSH, "a host-less and a hosted entry add up");
	tap_is_int(policy_git_repo_ops(p, "git.example", "acme", "lib"), POLICY_GIT_FETCH,
		   "a host-less entry on another git host");
	tap_is_int(policy_git_repo_ops(p, "gitlab.com", "acme", "lib"), 0,
		   "a host-less entry does not cover a host outside git.hosts");
	tap_is_int(policy_git_repo_ops(p, "github.com", "other", "tool"), POLICY_GIT_PUSH,
		   "push-only entry");
	tap_is_int(policy_git_repo_ops(p, "git.example", "x", "y"),
		   POLICY_GIT_FETCH | POLICY_GIT_PUSH, "hosted entry");
	tap_is_int(policy_git_repo_ops(p, "github.com", "x", "y"), 0, "hosted entry on another host");
	tap_is_int(policy_git_repo_ops(p, "github.com", "acme", "api2"), 0, "unlisted repository");
	tap_is_int(policy_git_repo_ops(p, "github.com", "acme", ".git"), 0, "\".git\" alone is no repository");

	tap_ok(policy_git_api_path_allowed(p, "/graphql") &&
	       policy_git_api_path_allowed(p, "/graphql/x") &&
	       policy_git_api_path_allowed(p, "/user/repos") &&
	       !policy_git_api_path_allowed(p, "/graphqlx") &&
	       !policy_git_api_path_allowed(p, "/user") &&
	       !policy_git_api_path_allowed(p, "/") &&
	       !policy_git_api_path_allowed(p, "/GRAPHQL"),
	       "git.api_allow: whole segments");
	tap_ok(policy_git_has_token(p), "a credential is a token");

	tap_ok(policy_spend_provider_for_host(p, "api.anthropic.com") &&
	       policy_spend_provider_for_host(p, "api.anthropic.com")->api == POLICY_SPEND_ANTHROPIC &&
	       policy_spend_provider_for_host(p, "llm.example") &&
	       policy_spend_provider_for_host(p, "llm.example")->api == POLICY_SPEND_OPENAI &&
	       !policy_spend_provider_for_host(p, "api.github.com"),
	       "provider by host");
	pr = policy_spend_price(p, "claude-haiku-4");
	tap_ok(pr && strcmp(pr->model, "claude-haiku-4") == 0, "price: the exact name wins");
	pr = policy_spend_price(p, "claude-haiku-4-5");
	tap_ok(pr && strcmp(pr->model, "claude-haiku-*") == 0, "price: the longest prefix wins");
	pr = policy_spend_price(p, "claude-sonnet-4-5");
	tap_ok(pr && strcmp(pr->model, "claude-*") == 0 && pr->input == 3.0 &&
	       pr->cache_write == 3.75, "price: a shorter prefix");
	tap_ok(policy_spend_price(p, "gpt-4o") && !policy_spend_price(p, "gpt-4o-mini") &&
	       !policy_spend_price(p, "claude") && !policy_spend_price(p, ""),
	       "price: an exact name is no prefix; an unknown model has no price");
	policy_free(p);
	policy_errors_free(&errs);

	p = parse("{'version': 1, 'spend': {'prices': {'*': {'input': 1, 'output': 1},"
		  " 'a*': {'input': 2, 'output': 2}, 'a!*': {'input': 3, 'output': 3}}}}", NULL, &errs);
	/* "a!*" sorts before "a*": the longest match is not the last one. */
	tap_ok(p && policy_spend_price(p, "b")->input == 1 && policy_spend_price(p, "")->input == 1 &&
	       policy_spend_price(p, "abc")->input == 2 && policy_spend_price(p, "a!b")->input == 3 &&
	       !policy_git_has_token(p),
	       "price: \"*\" is the fallback");
	policy_free(p);
	policy_errors_free(&errs);

	tap_is_str(policy_gh_access_to_string(POLICY_GH_ADMIN), "admin", "gh access names");
	tap_is_str(policy_ledger_to_string(POLICY_LEDGER_POSTGRESQL), "postgresql", "ledger names");
	tap_is_str(policy_spend_api_to_string(POLICY_SPEND_OPENAI), "openai", "spend api names");
	tap_is_str(policy_on_exhausted_to_string(POLICY_EXHAUSTED_STOP), "stop", "on_exhausted names");
	tap_is_str(policy_ledger_to_string(POLICY_LEDGER_COUNT), "?", "out of range names");
	tap_ok(policy_env_is_reserved("NPM_CONFIG_CAFILE") && policy_env_is_reserved("PIP_CERT") &&
	       policy_env_is_reserved("DENO_CERT") && policy_env_is_reserved("NODE_EXTRA_CA_CERTS"),
	       "the CA variables are airlock's own");
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
	test_rich_digests();
	test_canonical();
	test_canonical_new();
	test_accessors();
	test_default();
	test_load();
	test_examples();
	return tap_done();
}
