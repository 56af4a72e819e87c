/* SPDX-License-Identifier: Apache-2.0
 * policy.c - the JSON policy (SPEC §3): validation, defaults, canonical form
 * and digest.
 *
 * DOC: Theory of Operation
 *
 * A policy is the one thing a user writes to tell airlock what an agent may
 * do, so this module has two jobs: refuse anything it does not understand,
 * and turn what it does understand into one unambiguous value whose digest
 * every receipt carries.
 *
 * Parsing happens in three steps:
 *
 * 1. jansson decodes the text with JSON_REJECT_DUPLICATES (a key given twice
 *    would make the document mean whatever the last reader decided). A
 *    decoding error is the only error reported alone: there is no tree to
 *    walk.
 *
 * 2. A pre-scan reads the few facts that one part of the document may
 *    cross-reference in another (secret names, env.set names, git.hosts,
 *    the host of session.repo). Knowing them before the walk lets each
 *    error be reported where it sits, in document order, whatever order the
 *    author wrote the sections in.
 *
 * 3. One walk over the tree, in document order (jansson keeps the order of
 *    object members), validates every value and fills struct policy. Every
 *    error is collected as "json.path: message"; the walk never stops at the
 *    first one, and it never repairs input: a value is either exactly valid
 *    or an error. Unknown keys, wrong types (a real such as 443.0 where an
 *    integer belongs) and out-of-range values are all errors. Errors about
 *    a missing key or about a whole object (from_env and from_file both
 *    given) are reported where the object closes, after its members.
 *
 * Only a policy without any error gets a canonical form. It is rendered
 * from struct policy, not from the input, so that what is hashed is exactly
 * what the other modules enforce: every key of the schema, defaults filled
 * in, null where a value is absent, names lowercased, rules, addresses and
 * paths in their canonical text, sets sorted. Two lists keep the author's
 * order because order carries meaning there: host rule lists (receipts may
 * name a rule by its index) and egress.resolver (the order DNS servers are
 * asked in). jansson prints it with JSON_COMPACT | JSON_SORT_KEYS and the
 * digest is "sha256:" + the hex SHA-256 of that text, so whitespace, key
 * order and spelling variants (case, trailing dots, "repo.git", "//" in a
 * path) never change the digest and any change of meaning does.
 *
 * The embedded default policy (SPEC §3.7) is a JSON text parsed through the
 * same code, so it can never drift from what `airlock check` accepts.
 */
#include "policy.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "util.h"

#define POLICY_MAX_BYTES ((size_t)1024 * 1024)
#define POLICY_SECRET_NAME_MAX 64
#define POLICY_SESSION_ID_MAX 128
#define POLICY_REPO_PART_MAX 255
/* How much of an offending value an error message quotes. */
#define POLICY_QUOTE_MAX 80

static const char *const mode_names[] = {
	[POLICY_MODE_OFF] = "off",
	[POLICY_MODE_SHADOW] = "shadow",
	[POLICY_MODE_ENFORCE] = "enforce",
};
static_assert(ARRAY_SIZE(mode_names) == POLICY_MODE_COUNT,
	      "mode_names out of sync with enum policy_mode");

/* Variables airlock sets in the sandbox itself (SPEC §3.6, §5.3): a secret
 * placeholder or an env.set entry under one of these names would either be
 * overwritten or silently redirect the agent's traffic. */
static const char *const reserved_env[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy",
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
	"NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
};

static const char default_policy_json[] =
	"{\n"
	"  \"version\": 1,\n"
	"  \"mode\": \"shadow\",\n"
	"  \"session\": { \"id\": null, \"repo\": null },\n"
	"  \"egress\": {\n"
	"    \"allow\": [],\n"
	"    \"deny\": [],\n"
	"    \"ports\": [80, 443],\n"
	"    \"allow_ranges\": [],\n"
	"    \"resolver\": [],\n"
	"    \"upstream_ca\": null\n"
	"  },\n"
	"  \"secrets\": {},\n"
	"  \"git\": { \"hosts\": [], \"repos\": {}, \"credential\": null, \"ssh\": false },\n"
	"  \"env\": { \"pass\": [\"PATH\", \"HOME\", \"LANG\", \"TERM\"], \"set\": {} },\n"
	"  \"fs\": { \"rw\": [], \"hide\": [], \"ro\": [], \"protect\": [] }\n"
	"}\n";

static const uint16_t default_ports[] = { 80, 443 };
static const char *const default_env_pass[] = { "PATH", "HOME", "LANG", "TERM" };

const char *policy_mode_to_string(enum policy_mode m)
{
	if ((unsigned int)m >= POLICY_MODE_COUNT)
		return "?";
	return mode_names[m];
}

bool policy_mode_from_string(const char *s, enum policy_mode *out)
{
	size_t i;

	for (i = 0; i < POLICY_MODE_COUNT; i++) {
		if (strcmp(s, mode_names[i]) == 0) {
			*out = (enum policy_mode)i;
			return true;
		}
	}
	return false;
}

bool policy_env_is_reserved(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(reserved_env); i++)
		if (strcmp(name, reserved_env[i]) == 0)
			return true;
	return false;
}

/* ---- small helpers ---------------------------------------------------- */

struct strv {
	char **v;
	size_t n;
};

static void strv_push(struct strv *sv, char *owned)
{
	sv->v = util_xrealloc(sv->v, (sv->n + 1) * sizeof(*sv->v));
	sv->v[sv->n++] = owned;
}

static void strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_u16(const void *a, const void *b)
{
	uint16_t x = *(const uint16_t *)a, y = *(const uint16_t *)b;

	return (x > y) - (x < y);
}

static int cmp_cidr(const void *a, const void *b)
{
	const struct addr_cidr *x = a, *y = b;
	int r;

	if (x->base.family != y->base.family)
		return x->base.family == AF_INET ? -1 : 1;
	r = memcmp(x->base.bytes, y->base.bytes, sizeof(x->base.bytes));
	if (r)
		return r;
	return (x->prefix > y->prefix) - (x->prefix < y->prefix);
}

/* ASCII only: tolower() would follow the locale, and a name's meaning must
 * not depend on the caller's LANG. */
static void ascii_lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_ident(const char *s)
{
	if (!is_alpha(*s) && *s != '_')
		return false;
	for (s++; *s; s++)
		if (!is_alpha(*s) && !is_digit(*s) && *s != '_')
			return false;
	return true;
}

/* An environment variable name as POSIX shells accept it. */
static bool env_name_ok(const char *s)
{
	return is_ident(s);
}

/* A JSON string literal of @s, cut to POLICY_QUOTE_MAX bytes (on a UTF-8
 * character boundary) so that an error line stays readable whatever the
 * input held. The caller frees the result. */
static char *quote(const char *s)
{
	size_t n = strlen(s);
	bool cut = n > POLICY_QUOTE_MAX;
	json_t *j;
	char *q, *out;

	if (cut) {
		n = POLICY_QUOTE_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	j = json_stringn(s, n);
	ASSERT(j);
	q = json_dumps(j, JSON_ENCODE_ANY);
	ASSERT(q);
	json_decref(j);
	if (!cut)
		return q;
	/* Put the ellipsis inside the quotes: "abc..." */
	q[strlen(q) - 1] = '\0';
	out = util_xasprintf("%s...\"", q);
	free(q);
	return out;
}

/* The path of member @key of the node at @parent: "a.b" when @key is an
 * identifier, a["k-ey"] otherwise; a child of the root "$" has no prefix
 * ("version"), except a bracketed one ($["a b"]). */
static char *path_key(const char *parent, const char *key)
{
	bool root = strcmp(parent, "$") == 0;
	char *q, *p;

	if (is_ident(key))
		return root ? util_xstrdup(key)
			    : util_xasprintf("%s.%s", parent, key);
	q = quote(key);
	p = util_xasprintf("%s[%s]", parent, q);
	free(q);
	return p;
}

static char *path_index(const char *parent, size_t i)
{
	return util_xasprintf("%s[%zu]", parent, i);
}

/* ---- parse context ---------------------------------------------------- */

struct ctx {
	struct policy *p;
	struct policy_errors *errs;

	/* Pre-scanned facts (step 2 of the Theory of Operation). The json_t
	 * pointers are borrowed from the document; the sets are owned. A
	 * "_ok" flag is false when the section itself is broken: its own
	 * error is reported there, and references into it are not judged. */
	json_t *secrets;      /* root "secrets" object, NULL if absent */
	bool secrets_ok;
	json_t *env_set;      /* env.set object, NULL if absent */
	json_t *git_hosts;    /* set of valid normalised git.hosts */
	bool git_hosts_ok;
	char session_host[HOSTNAME_MAX + 1]; /* "" when no session.repo */
	bool session_repo_ok;

	bool have_version;
	/* Placeholder variables of the secrets walked so far -> the path of
	 * their secret. */
	json_t *secret_envs;
	/* The secret being walked, and its path. */
	struct policy_secret *cur;
	const char *cur_path;
	bool cur_has_from_env, cur_has_from_file, cur_has_env, cur_has_hosts;
};

/* Control characters and DEL become '?'. Quoted input is already escaped
 * by quote(), but a foreign error text (host_rule_parse's) may echo raw
 * input, and JSON does not escape DEL: one error is always one line,
 * with nothing for a terminal to interpret. */
static void scrub(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* Records "path: message". */
__attribute__((format(printf, 3, 4))) static void
err_add(struct ctx *c, const char *path, const char *fmt, ...)
{
	struct policy_errors *e = c->errs;
	va_list ap;
	char *msg;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	ASSERT(n >= 0);
	scrub(msg);
	/* Doubling at each power of two keeps a document with 100000 errors
	 * linear, without a capacity field in the public struct. */
	if ((e->count & (e->count - 1)) == 0)
		e->items = util_xrealloc(e->items, (e->count ? 2 * e->count : 1) *
							   sizeof(*e->items));
	e->items[e->count].path = util_xstrdup(path);
	scrub(e->items[e->count].path);
	e->items[e->count].message = msg;
	e->count++;
}

/* A set of canonical strings, each remembering the path where it was
 * first seen, to report a duplicate against its original. jansson's hash
 * table keeps this linear on a hostile 1 MiB document. */
static json_t *seen_new(void)
{
	json_t *o = json_object();

	ASSERT(o);
	return o;
}

/* Returns true (and reports) if @canon was seen before; else remembers
 * it. */
static bool seen_dup(struct ctx *c, json_t *seen, const char *canon,
		     const char *path, const char *what)
{
	json_t *first = json_object_get(seen, canon);

	if (first) {
		err_add(c, path, "%s %s", what, json_string_value(first));
		return true;
	}
	json_object_set_new(seen, canon, json_string(path));
	return false;
}

struct field {
	const char *name;
	void (*parse)(struct ctx *c, json_t *v, const char *path);
};

/* Walks @obj in document order, giving each known member to its parser
 * and reporting unknown ones. Returns false (after reporting) when @obj is
 * not an object. */
static bool walk_object(struct ctx *c, json_t *obj, const char *path,
			const struct field *fields, size_t nfields)
{
	const char *key;
	json_t *v;
	size_t i;

	if (!json_is_object(obj)) {
		err_add(c, path, "expected an object");
		return false;
	}
	json_object_foreach(obj, key, v) {
		char *kp = path_key(path, key);

		for (i = 0; i < nfields; i++)
			if (strcmp(key, fields[i].name) == 0)
				break;
		if (i < nfields)
			fields[i].parse(c, v, kp);
		else
			err_add(c, kp, "unknown key");
		free(kp);
	}
	return true;
}

/* ---- value parsers shared by several keys ----------------------------- */

struct repo_ref {
	char host[HOSTNAME_MAX + 1]; /* "" when not given */
	char owner[POLICY_REPO_PART_MAX + 1];
	char repo[POLICY_REPO_PART_MAX + 1];
};

/* OWNER or REPO: [A-Za-z0-9._-]+, not "." or "..", lowercased. */
static bool repo_part(const char *s, size_t n, char *out, const char *what,
		      char *why, size_t whylen)
{
	size_t i;

	if (n == 0 || n > POLICY_REPO_PART_MAX) {
		snprintf(why, whylen, "%s must be 1 to %d characters", what,
			 POLICY_REPO_PART_MAX);
		return false;
	}
	for (i = 0; i < n; i++) {
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("._-", s[i])) {
			snprintf(why, whylen,
				 "%s may contain only A-Z a-z 0-9 . _ -", what);
			return false;
		}
	}
	memcpy(out, s, n);
	out[n] = '\0';
	ascii_lower(out);
	if (strcmp(out, ".") == 0 || strcmp(out, "..") == 0) {
		snprintf(why, whylen, "%s must not be \".\" or \"..\"", what);
		return false;
	}
	return true;
}

/* Parses "HOST/OWNER/REPO" (or, unless @need_host, "OWNER/REPO"): HOST a
 * DNS name (never an IP literal), a trailing ".git" removed from REPO,
 * everything lowercased. Slashes are never collapsed: "a//b" is refused. */
static bool repo_parse(const char *s, bool need_host, struct repo_ref *out,
		       char *why, size_t whylen)
{
	const char *part[3];
	size_t len[3], nparts = 0, n;
	const char *p = s, *slash;
	struct host_target t;
	const char *form = need_host ? "expected \"HOST/OWNER/REPO\""
				     : "expected \"OWNER/REPO\" or \"HOST/OWNER/REPO\"";

	memset(out, 0, sizeof(*out));
	for (;;) {
		if (nparts == 3) {
			snprintf(why, whylen, "%s", form);
			return false;
		}
		slash = strchr(p, '/');
		part[nparts] = p;
		len[nparts] = slash ? (size_t)(slash - p) : strlen(p);
		nparts++;
		if (!slash)
			break;
		p = slash + 1;
	}
	if (nparts < 2 || (need_host && nparts != 3)) {
		snprintf(why, whylen, "%s", form);
		return false;
	}
	if (nparts == 3) {
		enum hostname_error he;

		if (len[0] == 0) {
			snprintf(why, whylen, "%s", form);
			return false;
		}
		he = hostname_normalise(part[0], len[0], &t);
		if (he != HOSTNAME_OK) {
			snprintf(why, whylen, "%s",
				 hostname_error_to_string(he));
			return false;
		}
		if (t.is_addr) {
			snprintf(why, whylen,
				 "the host must be a name, not an IP address");
			return false;
		}
		if (!util_strlcpy(out->host, t.name, sizeof(out->host))) {
			snprintf(why, whylen, "invalid host: too long");
			return false;
		}
	}
	if (!repo_part(part[nparts - 2], len[nparts - 2], out->owner, "OWNER",
		       why, whylen) ||
	    !repo_part(part[nparts - 1], len[nparts - 1], out->repo, "REPO",
		       why, whylen))
		return false;
	n = strlen(out->repo);
	if (n >= 4 && strcmp(out->repo + n - 4, ".git") == 0) {
		out->repo[n - 4] = '\0';
		if (!out->repo[0] || strcmp(out->repo, ".") == 0 ||
		    strcmp(out->repo, "..") == 0) {
			snprintf(why, whylen,
				 "REPO without its \".git\" must not be empty, \".\" or \"..\"");
			return false;
		}
	}
	return true;
}

/* A git host: an exact DNS name, normalised. */
static bool git_host_parse(const char *s, char out[HOSTNAME_MAX + 1],
			   char *why, size_t whylen)
{
	struct host_target t;
	enum hostname_error he;

	if (strchr(s, '*')) {
		snprintf(why, whylen,
			 "wildcards are not allowed: git hosts are exact names");
		return false;
	}
	he = hostname_normalise(s, strlen(s), &t);
	if (he != HOSTNAME_OK) {
		snprintf(why, whylen, "%s", hostname_error_to_string(he));
		return false;
	}
	if (t.is_addr) {
		snprintf(why, whylen, "expected a host name, not an IP address");
		return false;
	}
	return util_strlcpy(out, t.name, HOSTNAME_MAX + 1);
}

static void cidr_mask(struct addr_cidr *c)
{
	unsigned int bits = c->base.family == AF_INET ? 32 : 128, i;

	for (i = c->prefix; i < bits; i++)
		c->base.bytes[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
}

/* addr_parse_cidr(), plus the reason when it refuses: a CIDR whose host
 * bits are set is a likely typo, so say which network was meant. */
static bool cidr_parse(const char *s, struct addr_cidr *out, char *why,
		       size_t whylen)
{
	char a[ADDR_STRLEN], fixed[ADDR_STRLEN + 4];
	const char *slash = strchr(s, '/');
	struct addr_cidr c;
	struct addr orig;
	unsigned long prefix;
	size_t n;

	if (addr_parse_cidr(s, out))
		return true;
	snprintf(why, whylen,
		 "expected a CIDR such as \"10.0.0.0/8\" or \"2001:db8::/32\"");
	if (!slash)
		return false;
	n = (size_t)(slash - s);
	if (n >= sizeof(a) || (slash[1] == '0' && slash[2] != '\0'))
		return false;
	memcpy(a, s, n);
	a[n] = '\0';
	if (!addr_parse(a, &c.base) ||
	    !util_parse_uint(slash + 1, 0, c.base.family == AF_INET ? 32 : 128,
			     &prefix))
		return false;
	c.prefix = (unsigned int)prefix;
	orig = c.base;
	cidr_mask(&c);
	if (addr_equal(&orig, &c.base))
		return false;
	addr_cidr_format(&c, fixed, sizeof(fixed));
	snprintf(why, whylen, "host bits must be zero: did you mean \"%s\"?",
		 fixed);
	return false;
}

/* "IP:PORT", IPv6 as "[ADDR]:PORT"; the port is required. */
static bool endpoint_parse(const char *s, struct policy_endpoint *out)
{
	bool bracketed = s[0] == '[';
	char host[ADDR_STRLEN];
	const char *port, *start = s, *end;
	size_t n;
	unsigned long v;

	if (bracketed) {
		start = s + 1;
		end = strchr(start, ']');
		if (!end || end[1] != ':')
			return false;
		port = end + 2;
	} else {
		end = strchr(s, ':');
		if (!end || strchr(end + 1, ':'))
			return false;
		port = end + 1;
	}
	n = (size_t)(end - start);
	if (n >= sizeof(host))
		return false;
	memcpy(host, start, n);
	host[n] = '\0';
	if (!addr_parse(host, &out->addr))
		return false;
	/* Brackets exactly when IPv6, so that every endpoint has one
	 * spelling. */
	if ((out->addr.family == AF_INET6) != bracketed)
		return false;
	if (port[0] == '0' || !util_parse_uint(port, 1, 65535, &v))
		return false;
	out->port = (uint16_t)v;
	return true;
}

static void endpoint_format(const struct policy_endpoint *e, char *out,
			    size_t len)
{
	char a[ADDR_STRLEN];

	addr_format(&e->addr, a, sizeof(a));
	if (e->addr.family == AF_INET6)
		snprintf(out, len, "[%s]:%u", a, e->port);
	else
		snprintf(out, len, "%s:%u", a, e->port);
}

/* An absolute path without "." or ".." components; repeated and trailing
 * slashes are dropped (they change nothing on Linux). The caller frees
 * *out. */
static bool fs_path_clean(const char *s, char **out, const char **why)
{
	size_t n = strlen(s), i = 0, o = 0;
	char *buf;

	if (s[0] != '/') {
		*why = "expected an absolute path";
		return false;
	}
	if (n >= PATH_MAX) {
		*why = "path longer than 4095 bytes";
		return false;
	}
	buf = util_xmalloc(n + 2);
	while (s[i]) {
		size_t start, len;

		while (s[i] == '/')
			i++;
		start = i;
		while (s[i] && s[i] != '/')
			i++;
		len = i - start;
		if (len == 0)
			break;
		if ((len == 1 && s[start] == '.') ||
		    (len == 2 && s[start] == '.' && s[start + 1] == '.')) {
			free(buf);
			*why = "\".\" and \"..\" components are not allowed";
			return false;
		}
		buf[o++] = '/';
		memcpy(buf + o, s + start, len);
		o += len;
	}
	if (o == 0)
		buf[o++] = '/';
	buf[o] = '\0';
	*out = buf;
	return true;
}

/* RFC 9110 §5.6.2 token. */
static bool header_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_alpha(*s) && !is_digit(*s) && !strchr("!#$%&'*+-.^_`|~", *s))
			return false;
	return true;
}

/* An env.pass entry: a variable name, optionally ending in '*' (a prefix
 * match). A lone "*" is refused: passing every variable would hand the
 * agent whatever secrets the caller's environment holds. */
static bool env_pattern_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n > 0 && s[n - 1] == '*')
		n--;
	if (n == 0 || (!is_alpha(s[0]) && s[0] != '_'))
		return false;
	for (i = 1; i < n; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '_')
			return false;
	return true;
}

static bool secret_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_SECRET_NAME_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

bool policy_session_id_valid(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_SESSION_ID_MAX)
		return false;
	if (!is_alpha(s[0]) && !is_digit(s[0]))
		return false;
	for (i = 1; i < n; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("._:-", s[i]))
			return false;
	return true;
}

/* An array of host rules (egress.allow, egress.deny, secrets.*.hosts).
 * Replaces *out; duplicates after normalisation are errors. */
static void parse_rules(struct ctx *c, json_t *v, const char *path,
			struct host_rule **out, size_t *nout)
{
	json_t *seen = NULL, *el;
	size_t i;

	if (!json_is_array(v)) {
		err_add(c, path, "expected an array");
		return;
	}
	seen = seen_new();
	free(*out);
	*out = util_xcalloc(json_array_size(v), sizeof(**out));
	*nout = 0;
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i);
		char err[256], canon[HOSTNAME_MAX + 64];
		struct host_rule r;

		if (!json_is_string(el)) {
			err_add(c, ep, "expected a string");
		} else if (!host_rule_parse(json_string_value(el), &r, err,
					    sizeof(err))) {
			err_add(c, ep, "%s", err);
		} else {
			host_rule_format(&r, canon, sizeof(canon));
			if (!seen_dup(c, seen, canon, ep, "duplicate of"))
				(*out)[(*nout)++] = r;
		}
		free(ep);
	}
	json_decref(seen);
}

/* A string array whose members each pass @check (which canonicalises into
 * a malloc'd string or says why not); duplicates after canonicalisation
 * are errors. Replaces *out; sorted when @sort. */
typedef char *(*str_check_fn)(const char *s, char *why, size_t whylen);

static void parse_str_set(struct ctx *c, json_t *v, const char *path,
			  str_check_fn check, bool sort, char ***out,
			  size_t *nout)
{
	struct strv sv = { 0 };
	json_t *seen = NULL, *el;
	size_t i;

	if (!json_is_array(v)) {
		err_add(c, path, "expected an array");
		return;
	}
	seen = seen_new();
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i), *canon, why[256];

		if (!json_is_string(el)) {
			err_add(c, ep, "expected a string");
		} else if (!(canon = check(json_string_value(el), why,
					   sizeof(why)))) {
			err_add(c, ep, "%s", why);
		} else if (seen_dup(c, seen, canon, ep, "duplicate of")) {
			free(canon);
		} else {
			strv_push(&sv, canon);
		}
		free(ep);
	}
	json_decref(seen);
	if (sort && sv.n > 1)
		qsort(sv.v, sv.n, sizeof(*sv.v), cmp_str);
	strv_free(*out, *nout);
	*out = sv.v;
	*nout = sv.n;
}

static char *check_env_pattern(const char *s, char *why, size_t whylen)
{
	if (!env_pattern_ok(s)) {
		snprintf(why, whylen, "expected a variable name "
			 "([A-Za-z_][A-Za-z0-9_]*), optionally ending in \"*\"");
		return NULL;
	}
	return util_xstrdup(s);
}

static char *check_fs_path(const char *s, char *why, size_t whylen)
{
	const char *reason = NULL;
	char *out = NULL;

	if (fs_path_clean(s, &out, &reason))
		return out;
	snprintf(why, whylen, "%s", reason);
	return NULL;
}

/* A path inside the workspace: relative, without "." or ".." components,
 * not the workspace itself. */
static char *check_fs_relative(const char *s, char *why, size_t whylen)
{
	const char *reason = NULL;
	char *abs, *out = NULL;

	if (s[0] == '/') {
		snprintf(why, whylen, "expected a path relative to the workspace");
		return NULL;
	}
	abs = util_xasprintf("/%s", s);
	if (!fs_path_clean(abs, &out, &reason)) {
		snprintf(why, whylen, "%s", reason);
	} else if (strcmp(out, "/") == 0) {
		snprintf(why, whylen, "expected a path inside the workspace, "
			 "not the workspace itself");
	} else {
		free(abs);
		abs = util_xstrdup(out + 1);
		free(out);
		return abs;
	}
	free(out);
	free(abs);
	return NULL;
}

static char *check_header(const char *s, char *why, size_t whylen)
{
	char *out;

	if (!header_name_ok(s)) {
		snprintf(why, whylen,
			 "expected an HTTP header field name (RFC 9110 token)");
		return NULL;
	}
	out = util_xstrdup(s);
	ascii_lower(out);
	return out;
}

static char *check_git_host(const char *s, char *why, size_t whylen)
{
	char name[HOSTNAME_MAX + 1];

	if (!git_host_parse(s, name, why, whylen))
		return NULL;
	return util_xstrdup(name);
}

/* Replaces *dst by a copy of a JSON string, or NULL for JSON null. */
static void set_str(char **dst, json_t *v)
{
	free(*dst);
	*dst = json_is_string(v) ? util_xstrdup(json_string_value(v)) : NULL;
}

/* ---- root and sections ------------------------------------------------ */

static void parse_version(struct ctx *c, json_t *v, const char *path)
{
	c->have_version = true;
	if (!json_is_integer(v))
		err_add(c, path, "expected the integer 1");
	else if (json_integer_value(v) != 1)
		err_add(c, path,
			"unsupported version %" JSON_INTEGER_FORMAT
			" (this airlock reads version 1)",
			json_integer_value(v));
}

static void parse_mode(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_string(v) ||
	    !policy_mode_from_string(json_string_value(v), &c->p->mode))
		err_add(c, path, "expected \"off\", \"shadow\" or \"enforce\"");
}

static void parse_session_id(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v) && !json_is_string(v))
		err_add(c, path, "expected a string or null");
	else if (json_is_string(v) && !policy_session_id_valid(json_string_value(v)))
		err_add(c, path,
			"expected 1 to 128 characters of A-Z a-z 0-9 . _ : - "
			"starting with a letter or digit");
	else
		set_str(&c->p->session_id, v);
}

static void parse_session_repo(struct ctx *c, json_t *v, const char *path)
{
	struct repo_ref r;
	char why[256];

	free(c->p->session_repo);
	c->p->session_repo = NULL;
	if (json_is_null(v))
		return;
	if (!json_is_string(v)) {
		err_add(c, path, "expected a string or null");
		return;
	}
	if (!repo_parse(json_string_value(v), true, &r, why, sizeof(why))) {
		err_add(c, path, "%s", why);
		return;
	}
	c->p->session_repo = util_xasprintf("%s/%s/%s", r.host, r.owner, r.repo);
}

static const struct field session_fields[] = {
	{ "id", parse_session_id },
	{ "repo", parse_session_repo },
};

static void parse_session(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, session_fields, ARRAY_SIZE(session_fields));
}

static void parse_allow(struct ctx *c, json_t *v, const char *path)
{
	parse_rules(c, v, path, &c->p->allow, &c->p->nallow);
}

static void parse_deny(struct ctx *c, json_t *v, const char *path)
{
	parse_rules(c, v, path, &c->p->deny, &c->p->ndeny);
}

static void parse_ports(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	json_t *seen, *el;
	size_t i;

	if (!json_is_array(v)) {
		err_add(c, path, "expected an array");
		return;
	}
	seen = seen_new();
	free(p->ports);
	p->ports = util_xcalloc(json_array_size(v), sizeof(*p->ports));
	p->nports = 0;
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i);
		json_int_t port = json_integer_value(el);

		if (!json_is_integer(el) || port < 1 || port > 65535) {
			err_add(c, ep, "expected an integer from 1 to 65535");
		} else {
			char key[8];

			snprintf(key, sizeof(key), "%u", (unsigned int)port);
			if (!seen_dup(c, seen, key, ep, "duplicate of"))
				p->ports[p->nports++] = (uint16_t)port;
		}
		free(ep);
	}
	json_decref(seen);
	qsort(p->ports, p->nports, sizeof(*p->ports), cmp_u16);
}

static void parse_allow_ranges(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	json_t *seen, *el;
	size_t i;

	if (!json_is_array(v)) {
		err_add(c, path, "expected an array");
		return;
	}
	seen = seen_new();
	free(p->allow_ranges);
	p->allow_ranges = util_xcalloc(json_array_size(v), sizeof(*p->allow_ranges));
	p->nallow_ranges = 0;
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i), why[128], canon[ADDR_STRLEN + 4];
		struct addr_cidr cidr;

		if (!json_is_string(el)) {
			err_add(c, ep, "expected a string");
		} else if (!cidr_parse(json_string_value(el), &cidr, why,
				       sizeof(why))) {
			err_add(c, ep, "%s", why);
		} else {
			addr_cidr_format(&cidr, canon, sizeof(canon));
			if (!seen_dup(c, seen, canon, ep, "duplicate of"))
				p->allow_ranges[p->nallow_ranges++] = cidr;
		}
		free(ep);
	}
	json_decref(seen);
	qsort(p->allow_ranges, p->nallow_ranges, sizeof(*p->allow_ranges),
	      cmp_cidr);
}

static void parse_resolver(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	json_t *seen, *el;
	size_t i;

	if (!json_is_array(v)) {
		err_add(c, path, "expected an array");
		return;
	}
	seen = seen_new();
	free(p->resolvers);
	p->resolvers = util_xcalloc(json_array_size(v), sizeof(*p->resolvers));
	p->nresolvers = 0;
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i), canon[ADDR_STRLEN + 8];
		struct policy_endpoint e;

		if (!json_is_string(el)) {
			err_add(c, ep, "expected a string");
		} else if (!endpoint_parse(json_string_value(el), &e)) {
			err_add(c, ep, "expected \"IP:PORT\" with a port from 1 "
				       "to 65535 (IPv6 as \"[::1]:53\")");
		} else {
			endpoint_format(&e, canon, sizeof(canon));
			if (!seen_dup(c, seen, canon, ep, "duplicate of"))
				p->resolvers[p->nresolvers++] = e;
		}
		free(ep);
	}
	json_decref(seen);
}

static void parse_upstream_ca(struct ctx *c, json_t *v, const char *path)
{
	if ((!json_is_null(v) && !json_is_string(v)) ||
	    (json_is_string(v) && json_string_length(v) == 0))
		err_add(c, path, "expected a non-empty path or null");
	else
		set_str(&c->p->upstream_ca, v);
}

static const struct field egress_fields[] = {
	{ "allow", parse_allow },
	{ "deny", parse_deny },
	{ "ports", parse_ports },
	{ "allow_ranges", parse_allow_ranges },
	{ "resolver", parse_resolver },
	{ "upstream_ca", parse_upstream_ca },
};

static void parse_egress(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, egress_fields, ARRAY_SIZE(egress_fields));
}

static void parse_secret_from_env(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->cur_has_from_env = true;
	if (!json_is_string(v) || !env_name_ok(json_string_value(v)))
		err_add(c, path, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*) or null");
	else
		set_str(&c->cur->from_env, v);
}

static void parse_secret_from_file(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->cur_has_from_file = true;
	if (!json_is_string(v) || json_string_length(v) == 0)
		err_add(c, path, "expected a non-empty path or null");
	else
		set_str(&c->cur->from_file, v);
}

/* The placeholder variable must not collide with airlock's own variables,
 * with env.set, or with another secret's placeholder: any of those would
 * make the agent see something else than the placeholder, or one
 * placeholder stand for two secrets. */
static void check_secret_env(struct ctx *c, const char *env, const char *path)
{
	char *q = quote(env);
	json_t *other;

	if (policy_env_is_reserved(env)) {
		err_add(c, path, "%s is one of airlock's own variables", q);
		goto out;
	}
	if (c->env_set && json_object_get(c->env_set, env)) {
		err_add(c, path, "%s is also set by env.set", q);
		goto out;
	}
	other = json_object_get(c->secret_envs, env);
	if (other) {
		err_add(c, path, "%s is already the placeholder variable of %s",
			q, json_string_value(other));
		goto out;
	}
	json_object_set_new(c->secret_envs, env, json_string(c->cur_path));
out:
	free(q);
}

static void parse_secret_env(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->cur_has_env = true;
	if (!json_is_string(v) || !env_name_ok(json_string_value(v))) {
		err_add(c, path, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		return;
	}
	check_secret_env(c, json_string_value(v), path);
	set_str(&c->cur->env, v);
}

static void parse_secret_hosts(struct ctx *c, json_t *v, const char *path)
{
	c->cur_has_hosts = true;
	parse_rules(c, v, path, &c->cur->hosts, &c->cur->nhosts);
	if (json_is_array(v) && json_array_size(v) == 0)
		err_add(c, path, "must not be empty: a secret needs the hosts it "
				 "may be sent to");
}

static void parse_secret_headers(struct ctx *c, json_t *v, const char *path)
{
	struct policy_secret *s = c->cur;

	if (json_is_null(v))
		return;
	if (!json_is_array(v)) {
		err_add(c, path, "expected an array of header names or null");
		return;
	}
	if (json_array_size(v) == 0) {
		err_add(c, path, "must not be empty (null or no \"headers\" "
				 "means any header)");
		return;
	}
	parse_str_set(c, v, path, check_header, true, &s->headers,
		      &s->nheaders);
}

static const struct field secret_fields[] = {
	{ "from_env", parse_secret_from_env },
	{ "from_file", parse_secret_from_file },
	{ "env", parse_secret_env },
	{ "hosts", parse_secret_hosts },
	{ "headers", parse_secret_headers },
};

static void parse_secret(struct ctx *c, const char *name, json_t *v,
			 const char *path)
{
	struct policy_secret *s = &c->p->secrets[c->p->nsecrets];
	char *sub = NULL;

	memset(s, 0, sizeof(*s));
	s->name = util_xstrdup(name);
	c->cur = s;
	c->cur_path = path;
	c->cur_has_from_env = c->cur_has_from_file = false;
	c->cur_has_env = c->cur_has_hosts = false;
	if (!secret_name_ok(name))
		err_add(c, path, "invalid secret name: expected 1 to 64 "
				 "characters of A-Z a-z 0-9 _ . -");
	if (!walk_object(c, v, path, secret_fields, ARRAY_SIZE(secret_fields)))
		goto out;
	if (c->cur_has_from_env && c->cur_has_from_file)
		err_add(c, path, "give one of from_env and from_file, not both");
	else if (!c->cur_has_from_env && !c->cur_has_from_file)
		err_add(c, path, "one of from_env and from_file is required");
	if (!c->cur_has_env) {
		sub = path_key(path, "env");
		if (c->cur_has_from_file && !c->cur_has_from_env) {
			err_add(c, sub, "required with from_file (the variable "
					"that carries the placeholder)");
		} else if (s->from_env && !c->cur_has_from_file) {
			check_secret_env(c, s->from_env, sub);
			s->env = util_xstrdup(s->from_env);
		}
		free(sub);
	}
	if (!c->cur_has_hosts) {
		sub = path_key(path, "hosts");
		err_add(c, sub, "required key is missing: a secret needs the "
				"hosts it may be sent to");
		free(sub);
	}
out:
	c->p->nsecrets++;
	c->cur = NULL;
}

static void parse_secrets(struct ctx *c, json_t *v, const char *path)
{
	const char *name;
	json_t *entry;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object");
		return;
	}
	c->p->secrets = util_xcalloc(json_object_size(v), sizeof(*c->p->secrets));
	json_object_foreach(v, name, entry) {
		char *ep = path_key(path, name);

		parse_secret(c, name, entry, ep);
		free(ep);
	}
}

static void parse_git_hosts(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_git_host, true, &c->p->git_hosts,
		      &c->p->ngit_hosts);
}

/* The operations of one git.repos entry. Returns POLICY_GIT_* bits, 0
 * after reporting an error. */
static unsigned int parse_git_ops(struct ctx *c, json_t *v, const char *path)
{
	unsigned int ops = 0, bit;
	bool bad = false;
	json_t *seen, *el;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0) {
		err_add(c, path, json_is_array(v) ? "must not be empty"
			: "expected an array of \"fetch\" and \"push\"");
		return 0;
	}
	seen = seen_new();
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i);
		const char *s = json_string_value(el);

		if (s && strcmp(s, "fetch") == 0)
			bit = POLICY_GIT_FETCH;
		else if (s && strcmp(s, "push") == 0)
			bit = POLICY_GIT_PUSH;
		else
			bit = 0;
		if (!bit) {
			err_add(c, ep, "expected \"fetch\" or \"push\"");
			bad = true;
		} else if (seen_dup(c, seen, s, ep, "duplicate of")) {
			bad = true;
		}
		ops |= bit;
		free(ep);
	}
	json_decref(seen);
	return bad ? 0 : ops;
}

/* "host/owner/repo", or "owner/repo" when @host is NULL or "". */
static void git_repo_key(const char *host, const char *owner,
			 const char *repo, char *out, size_t len)
{
	if (host && host[0])
		snprintf(out, len, "%s/%s/%s", host, owner, repo);
	else
		snprintf(out, len, "%s/%s", owner, repo);
}

static void parse_git_repos(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	const char *key;
	json_t *seen, *ops;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object");
		return;
	}
	seen = seen_new();
	p->git_repos = util_xcalloc(json_object_size(v), sizeof(*p->git_repos));
	json_object_foreach(v, key, ops) {
		char *kp = path_key(path, key), why[256];
		struct policy_git_repo *g = &p->git_repos[p->ngit_repos];
		struct repo_ref r;
		unsigned int bits;
		bool ok = true;

		if (!repo_parse(key, false, &r, why, sizeof(why))) {
			err_add(c, kp, "%s", why);
			ok = false;
		} else if (r.host[0] && c->git_hosts_ok && c->session_repo_ok &&
			   !json_object_get(c->git_hosts, r.host) &&
			   strcmp(r.host, c->session_host) != 0) {
			err_add(c, kp, "host \"%s\" is neither in git.hosts nor "
				       "the host of session.repo", r.host);
			ok = false;
		}
		if (ok) {
			char canon[HOSTNAME_MAX + 2 * POLICY_REPO_PART_MAX + 3];

			git_repo_key(r.host, r.owner, r.repo, canon,
				     sizeof(canon));
			ok = !seen_dup(c, seen, canon, kp, "same repository as");
		}
		bits = parse_git_ops(c, ops, kp);
		if (ok) {
			g->host = r.host[0] ? util_xstrdup(r.host) : NULL;
			g->owner = util_xstrdup(r.owner);
			g->repo = util_xstrdup(r.repo);
			g->ops = bits;
			p->ngit_repos++;
		}
		free(kp);
	}
	json_decref(seen);
}

static void parse_git_credential(struct ctx *c, json_t *v, const char *path)
{
	const char *name = json_string_value(v);

	if (!json_is_null(v) && !name) {
		err_add(c, path, "expected the name of a secret or null");
		return;
	}
	if (name && c->secrets_ok &&
	    !(c->secrets && json_object_get(c->secrets, name))) {
		char *q = quote(name);

		err_add(c, path, "no secret named %s", q);
		free(q);
		return;
	}
	set_str(&c->p->git_credential, v);
}

static void parse_git_ssh(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_boolean(v))
		err_add(c, path, "expected true or false");
	else
		c->p->git_ssh = json_is_true(v);
}

static const struct field git_fields[] = {
	{ "hosts", parse_git_hosts },
	{ "repos", parse_git_repos },
	{ "credential", parse_git_credential },
	{ "ssh", parse_git_ssh },
};

static void parse_git(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, git_fields, ARRAY_SIZE(git_fields));
}

static void parse_env_pass(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_env_pattern, true, &c->p->env_pass,
		      &c->p->nenv_pass);
}

static void parse_env_set(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	const char *name;
	json_t *val;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object");
		return;
	}
	p->env_set_names = util_xcalloc(json_object_size(v), sizeof(char *));
	p->env_set_values = util_xcalloc(json_object_size(v), sizeof(char *));
	json_object_foreach(v, name, val) {
		char *kp = path_key(path, name), *q = quote(name);

		if (!env_name_ok(name)) {
			err_add(c, kp, "invalid variable name: expected "
				       "[A-Za-z_][A-Za-z0-9_]*");
		} else if (policy_env_is_reserved(name)) {
			err_add(c, kp, "%s is one of airlock's own variables", q);
		} else if (!json_is_string(val)) {
			err_add(c, kp, "expected a string");
		} else {
			p->env_set_names[p->nenv_set] = util_xstrdup(name);
			p->env_set_values[p->nenv_set] =
				util_xstrdup(json_string_value(val));
			p->nenv_set++;
		}
		free(q);
		free(kp);
	}
}

static const struct field env_fields[] = {
	{ "pass", parse_env_pass },
	{ "set", parse_env_set },
};

static void parse_env(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, env_fields, ARRAY_SIZE(env_fields));
}

static void parse_fs_rw(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_fs_path, true, &c->p->fs_rw,
		      &c->p->nfs_rw);
}

static void parse_fs_hide(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_fs_path, true, &c->p->fs_hide,
		      &c->p->nfs_hide);
}

static void parse_fs_ro(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_fs_path, true, &c->p->fs_ro,
		      &c->p->nfs_ro);
}

static void parse_fs_protect(struct ctx *c, json_t *v, const char *path)
{
	parse_str_set(c, v, path, check_fs_relative, true, &c->p->fs_protect,
		      &c->p->nfs_protect);
}

static const struct field fs_fields[] = {
	{ "rw", parse_fs_rw },
	{ "hide", parse_fs_hide },
	{ "ro", parse_fs_ro },
	{ "protect", parse_fs_protect },
};

static void parse_fs(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, fs_fields, ARRAY_SIZE(fs_fields));
}

static const struct field root_fields[] = {
	{ "version", parse_version },
	{ "mode", parse_mode },
	{ "session", parse_session },
	{ "egress", parse_egress },
	{ "secrets", parse_secrets },
	{ "git", parse_git },
	{ "env", parse_env },
	{ "fs", parse_fs },
};

/* Step 2: facts that other sections refer to. Broken sections are left to
 * the walk to report; here they only switch the cross-checks off. */
static void prescan(struct ctx *c, json_t *root)
{
	json_t *sec = json_object_get(root, "secrets");
	json_t *git = json_object_get(root, "git");
	json_t *hosts = json_object_get(git, "hosts");
	json_t *session = json_object_get(root, "session");
	json_t *repo = json_object_get(session, "repo");
	json_t *set = json_object_get(json_object_get(root, "env"), "set");
	json_t *el;
	size_t i;

	c->secrets = json_is_object(sec) ? sec : NULL;
	c->secrets_ok = !sec || c->secrets;
	c->env_set = json_is_object(set) ? set : NULL;

	c->git_hosts = seen_new();
	c->secret_envs = seen_new();
	c->git_hosts_ok = !git || (json_is_object(git) &&
				   (!hosts || json_is_array(hosts)));
	json_array_foreach(hosts, i, el) {
		char name[HOSTNAME_MAX + 1], why[128];

		if (json_is_string(el) &&
		    git_host_parse(json_string_value(el), name, why, sizeof(why)))
			json_object_set_new(c->git_hosts, name, json_true());
	}

	c->session_repo_ok = !repo || json_is_null(repo);
	if (json_is_string(repo)) {
		struct repo_ref r;
		char why[256];

		if (repo_parse(json_string_value(repo), true, &r, why, sizeof(why))) {
			c->session_repo_ok = true;
			memcpy(c->session_host, r.host, sizeof(c->session_host));
		}
	}
	if (session && !json_is_object(session))
		c->session_repo_ok = false;
}

static void set_defaults(struct policy *p)
{
	size_t i;

	p->mode = POLICY_MODE_SHADOW;
	p->ports = util_xcalloc(ARRAY_SIZE(default_ports), sizeof(*p->ports));
	memcpy(p->ports, default_ports, sizeof(default_ports));
	p->nports = ARRAY_SIZE(default_ports);
	p->env_pass = util_xcalloc(ARRAY_SIZE(default_env_pass), sizeof(char *));
	for (i = 0; i < ARRAY_SIZE(default_env_pass); i++)
		p->env_pass[i] = util_xstrdup(default_env_pass[i]);
	p->nenv_pass = ARRAY_SIZE(default_env_pass);
	qsort(p->env_pass, p->nenv_pass, sizeof(char *), cmp_str);
}

/* ---- canonical form --------------------------------------------------- */

static json_t *jstr(const char *s)
{
	json_t *j = s ? json_string(s) : json_null();

	ASSERT(j);
	return j;
}

static json_t *jstrv(char *const *v, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < n; i++)
		json_array_append_new(a, jstr(v[i]));
	return a;
}

static json_t *jrules(const struct host_rule *r, size_t n)
{
	json_t *a = json_array();
	char buf[HOSTNAME_MAX + 64];
	size_t i;

	for (i = 0; i < n; i++) {
		host_rule_format(&r[i], buf, sizeof(buf));
		json_array_append_new(a, jstr(buf));
	}
	return a;
}

/* The effective policy as JSON; every key of the schema is present. */
static json_t *policy_to_json(const struct policy *p)
{
	json_t *egress, *secrets, *git, *repos, *env, *set, *a;
	char buf[HOSTNAME_MAX + 2 * POLICY_REPO_PART_MAX + 8];
	size_t i;

	a = json_array();
	for (i = 0; i < p->nports; i++)
		json_array_append_new(a, json_integer(p->ports[i]));
	egress = json_pack("{s:o, s:o, s:o}", "allow", jrules(p->allow, p->nallow),
			   "deny", jrules(p->deny, p->ndeny), "ports", a);
	a = json_array();
	for (i = 0; i < p->nallow_ranges; i++) {
		addr_cidr_format(&p->allow_ranges[i], buf, sizeof(buf));
		json_array_append_new(a, jstr(buf));
	}
	json_object_set_new(egress, "allow_ranges", a);
	a = json_array();
	for (i = 0; i < p->nresolvers; i++) {
		endpoint_format(&p->resolvers[i], buf, sizeof(buf));
		json_array_append_new(a, jstr(buf));
	}
	json_object_set_new(egress, "resolver", a);
	json_object_set_new(egress, "upstream_ca", jstr(p->upstream_ca));

	secrets = json_object();
	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_secret *s = &p->secrets[i];

		json_object_set_new(secrets, s->name,
			json_pack("{s:o, s:o, s:o, s:o, s:o}",
				  "from_env", jstr(s->from_env),
				  "from_file", jstr(s->from_file),
				  "env", jstr(s->env),
				  "hosts", jrules(s->hosts, s->nhosts),
				  "headers", s->headers ? jstrv(s->headers, s->nheaders)
							: json_null()));
	}

	repos = json_object();
	for (i = 0; i < p->ngit_repos; i++) {
		const struct policy_git_repo *g = &p->git_repos[i];

		a = json_array();
		if (g->ops & POLICY_GIT_FETCH)
			json_array_append_new(a, jstr("fetch"));
		if (g->ops & POLICY_GIT_PUSH)
			json_array_append_new(a, jstr("push"));
		git_repo_key(g->host, g->owner, g->repo, buf, sizeof(buf));
		json_object_set_new(repos, buf, a);
	}
	git = json_pack("{s:o, s:o, s:o, s:b}",
			"hosts", jstrv(p->git_hosts, p->ngit_hosts),
			"repos", repos,
			"credential", jstr(p->git_credential),
			"ssh", p->git_ssh);

	set = json_object();
	for (i = 0; i < p->nenv_set; i++)
		json_object_set_new(set, p->env_set_names[i],
				    jstr(p->env_set_values[i]));
	env = json_pack("{s:o, s:o}", "pass", jstrv(p->env_pass, p->nenv_pass),
			"set", set);

	a = json_pack("{s:i, s:s, s:{s:o, s:o}, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:o, s:o}}",
		      "version", 1,
		      "mode", policy_mode_to_string(p->mode),
		      "session", "id", jstr(p->session_id),
		      "repo", jstr(p->session_repo),
		      "egress", egress, "secrets", secrets, "git", git,
		      "env", env,
		      "fs", "rw", jstrv(p->fs_rw, p->nfs_rw),
		      "hide", jstrv(p->fs_hide, p->nfs_hide),
		      "ro", jstrv(p->fs_ro, p->nfs_ro),
		      "protect", jstrv(p->fs_protect, p->nfs_protect));
	ASSERT(a);
	return a;
}

/* Fills p->canonical and p->digest. */
static void policy_seal(struct policy *p)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	json_t *j = policy_to_json(p);
	int ok;

	p->canonical = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	ASSERT(p->canonical);
	ok = EVP_Digest(p->canonical, strlen(p->canonical), md, &mdlen,
			EVP_sha256(), NULL);
	ASSERT(ok == 1 && mdlen == 32);
	memcpy(p->digest, "sha256:", 7);
	util_hex(md, mdlen, p->digest + 7);
}

/* ---- public entry points ---------------------------------------------- */

struct policy *policy_parse(const char *text, size_t len,
			    const enum policy_mode *mode_override,
			    struct policy_errors *errs)
{
	struct ctx c = { 0 };
	struct policy *p = NULL;
	json_error_t jerr;
	json_t *root = NULL;

	errs->items = NULL;
	errs->count = 0;
	c.errs = errs;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (jerr.line > 0)
			err_add(&c, "$", "invalid JSON at line %d, column %d: %s",
				jerr.line, jerr.column, jerr.text);
		else
			err_add(&c, "$", "invalid JSON: %s", jerr.text);
		goto out;
	}
	p = util_xcalloc(1, sizeof(*p));
	c.p = p;
	set_defaults(p);
	if (!json_is_object(root)) {
		err_add(&c, "$", "expected an object");
		goto out;
	}
	prescan(&c, root);
	walk_object(&c, root, "$", root_fields, ARRAY_SIZE(root_fields));
	if (!c.have_version)
		err_add(&c, "version", "required key is missing");
	if (errs->count == 0) {
		if (mode_override)
			p->mode = *mode_override;
		policy_seal(p);
	}
out:
	json_decref(c.git_hosts);
	json_decref(c.secret_envs);
	json_decref(root);
	if (errs->count > 0) {
		policy_free(p);
		p = NULL;
	}
	return p;
}

struct policy *policy_load(const char *path,
			   const enum policy_mode *mode_override,
			   struct policy_errors *errs)
{
	struct policy *p = NULL;
	size_t len = 0;
	char *text;

	text = util_read_file(path, POLICY_MAX_BYTES, &len);
	if (!text) {
		struct ctx c = { .errs = errs };

		errs->items = NULL;
		errs->count = 0;
		err_add(&c, "$", "cannot read: %s", strerror(errno));
		return NULL;
	}
	p = policy_parse(text, len, mode_override, errs);
	free(text);
	return p;
}

struct policy *policy_default(const enum policy_mode *mode_override)
{
	struct policy_errors errs = { 0 };
	struct policy *p;

	p = policy_parse(default_policy_json, strlen(default_policy_json),
			 mode_override, &errs);
	/* A broken built-in text is a bug, never a user error. */
	ASSERT(p && errs.count == 0);
	return p;
}

const char *policy_default_text(void)
{
	return default_policy_json;
}

void policy_errors_free(struct policy_errors *errs)
{
	size_t i;

	if (!errs)
		return;
	for (i = 0; i < errs->count; i++) {
		free(errs->items[i].path);
		free(errs->items[i].message);
	}
	free(errs->items);
	errs->items = NULL;
	errs->count = 0;
}

void policy_free(struct policy *p)
{
	size_t i;

	if (!p)
		return;
	free(p->session_id);
	free(p->session_repo);
	free(p->allow);
	free(p->deny);
	free(p->ports);
	free(p->allow_ranges);
	free(p->resolvers);
	free(p->upstream_ca);
	for (i = 0; i < p->nsecrets; i++) {
		struct policy_secret *s = &p->secrets[i];

		free(s->name);
		free(s->from_env);
		free(s->from_file);
		free(s->env);
		free(s->hosts);
		strv_free(s->headers, s->nheaders);
	}
	free(p->secrets);
	strv_free(p->git_hosts, p->ngit_hosts);
	for (i = 0; i < p->ngit_repos; i++) {
		free(p->git_repos[i].host);
		free(p->git_repos[i].owner);
		free(p->git_repos[i].repo);
	}
	free(p->git_repos);
	free(p->git_credential);
	strv_free(p->env_pass, p->nenv_pass);
	strv_free(p->env_set_names, p->nenv_set);
	strv_free(p->env_set_values, p->nenv_set);
	strv_free(p->fs_rw, p->nfs_rw);
	strv_free(p->fs_hide, p->nfs_hide);
	strv_free(p->fs_ro, p->nfs_ro);
	strv_free(p->fs_protect, p->nfs_protect);
	free(p->canonical);
	free(p);
}

bool policy_env_passes(const struct policy *p, const char *var)
{
	size_t i;

	for (i = 0; i < p->nenv_pass; i++) {
		const char *pat = p->env_pass[i];
		size_t n = strlen(pat);

		if (n > 0 && pat[n - 1] == '*') {
			if (strncmp(var, pat, n - 1) == 0)
				return true;
		} else if (strcmp(var, pat) == 0) {
			return true;
		}
	}
	return false;
}
