/* SPDX-License-Identifier: Apache-2.0
 * policy.c - the JSON policy: validation, defaults, canonical form and
 * digest.
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
 *    cross-reference in another (secret names and their placeholder
 *    variables, env.set names, git.hosts, the git token's variables, the
 *    session's repository and id, whether spend has a ledger). Knowing them
 *    before the walk lets each error be reported where it sits, in document
 *    order, whatever order the author wrote the sections in.
 *
 * 3. One walk over the tree, in document order (jansson keeps the order of
 *    object members), validates every value and fills struct policy. Every
 *    error is collected as "json.path: message"; the walk never stops at the
 *    first one, and it never repairs input: a value is either exactly valid
 *    or an error. Unknown keys, wrong types (a real such as 443.0 where an
 *    integer belongs) and out-of-range values are all errors. Errors about
 *    a missing key or about a whole object (from_env and from_file both
 *    given) are reported where the object closes, after its members.
 *    Every list goes through one reader, list_parse(): one loop, one
 *    duplicate rule and one wording for all of them.
 *
 * Only a policy without any error gets a canonical form. It is rendered
 * from struct policy, not from the input, so that what is hashed is exactly
 * what the other modules enforce: every key of the schema, defaults filled
 * in, null where a value is absent, names lowercased, rules, addresses,
 * URLs and paths in their canonical text, sets sorted, numbers kept to 15
 * significant digits (so that 0.3 is written "0.3" and reads back as the
 * same double). Some lists keep the author's order because order carries
 * meaning there: host rule lists (receipts may name a rule by its index),
 * egress.resolver (the order DNS servers are asked in) and spend.providers.
 * jansson prints it with JSON_COMPACT | JSON_SORT_KEYS and the digest is
 * "sha256:" + the hex SHA-256 of that text, so whitespace, key order and
 * spelling variants (case, trailing dots, "repo.git", "//" in a path) never
 * change the digest and any change of meaning does.
 *
 * The embedded default policy is a JSON text parsed through the same code,
 * so it can never drift from what `airlock check` accepts.
 */
#include "policy.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "pathnorm.h"
#include "util.h"

#define POLICY_MAX_BYTES ((size_t)1024 * 1024)
#define POLICY_SECRET_NAME_MAX 64
#define POLICY_SESSION_ID_MAX 128
#define POLICY_REPO_PART_MAX 255
#define POLICY_PREFIX_MAX 128
#define POLICY_METHOD_MAX 32
#define POLICY_URL_PATH_MAX 1024
#define POLICY_APP_ID_MAX 128
#define POLICY_GH_PERMISSION_MAX 64
#define POLICY_MODEL_MAX 128
#define POLICY_PRICE_MAX 1e6
/* Default cache prices, as multiples of the input price. */
#define POLICY_CACHE_WRITE_FACTOR 1.25
#define POLICY_CACHE_READ_FACTOR 0.1
#define POLICY_BODY_MAX ((uint64_t)1 << 30)
#define POLICY_BODY_DEFAULT ((uint64_t)32 << 20)
#define POLICY_OUTPUT_TOKENS_MAX 10000000
#define POLICY_OUTPUT_TOKENS_DEFAULT 8192
#define POLICY_LEDGER_TIMEOUT_MAX 600000
#define POLICY_LEDGER_TIMEOUT_DEFAULT 5000
#define POLICY_CHECKPOINT_MS_MAX 60000
#define POLICY_CHECKPOINT_MS_DEFAULT 250
/* Significant digits of every number in the canonical form. */
#define POLICY_REAL_DIGITS 15
/* Longest canonical text of a list element (a path), for duplicates. */
#define LIST_KEY_MAX (PATH_MAX + 64)
/* How much of an offending value an error message quotes. */
#define POLICY_QUOTE_MAX 80

#define DEFAULT_GITHUB_API "https://api.github.com"

static const char *const mode_names[] = {
	[POLICY_MODE_OFF] = "off",
	[POLICY_MODE_SHADOW] = "shadow",
	[POLICY_MODE_ENFORCE] = "enforce",
};
static_assert(ARRAY_SIZE(mode_names) == POLICY_MODE_COUNT,
	      "mode_names out of sync with enum policy_mode");

static const char *const gh_access_names[] = {
	[POLICY_GH_READ] = "read",
	[POLICY_GH_WRITE] = "write",
	[POLICY_GH_ADMIN] = "admin",
};
static_assert(ARRAY_SIZE(gh_access_names) == POLICY_GH_ACCESS_COUNT,
	      "gh_access_names out of sync with enum policy_gh_access");

static const char *const ledger_names[] = {
	[POLICY_LEDGER_MEMORY] = "memory",
	[POLICY_LEDGER_SQLITE] = "sqlite",
	[POLICY_LEDGER_POSTGRESQL] = "postgresql",
};
static_assert(ARRAY_SIZE(ledger_names) == POLICY_LEDGER_COUNT,
	      "ledger_names out of sync with enum policy_ledger");

static const char *const spend_api_names[] = {
	[POLICY_SPEND_ANTHROPIC] = "anthropic",
	[POLICY_SPEND_OPENAI] = "openai",
};
static_assert(ARRAY_SIZE(spend_api_names) == POLICY_SPEND_API_COUNT,
	      "spend_api_names out of sync with enum policy_spend_api");

static const char *const on_exhausted_names[] = {
	[POLICY_EXHAUSTED_BLOCK] = "block",
	[POLICY_EXHAUSTED_STOP] = "stop",
};
static_assert(ARRAY_SIZE(on_exhausted_names) == POLICY_EXHAUSTED_COUNT,
	      "on_exhausted_names out of sync with enum policy_on_exhausted");

static const char *const server_state_names[] = {
	[POLICY_SERVER_STATE_REFUSE] = "refuse",
	[POLICY_SERVER_STATE_ALLOW] = "allow",
};
static_assert(ARRAY_SIZE(server_state_names) == POLICY_SERVER_STATE_COUNT,
	      "server_state_names out of sync with enum policy_server_state");
static const char *const default_spend_pass[] = { "/v1/messages/count_tokens" };

/* Variables airlock sets in the sandbox itself (the proxy and the CA
 * bundle): a placeholder, an env.set entry or an env.pass entry under one
 * of these names would either be overwritten or silently redirect the
 * agent's traffic or trust. */
static const char *const reserved_env[] = {
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy",
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
	"GIT_SSL_CAINFO", "NPM_CONFIG_CAFILE", "PIP_CERT", "DENO_CERT",
	"NODE_EXTRA_CA_CERTS",
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
	"    \"upstream_ca\": null,\n"
	"    \"intercept\": [],\n"
	"    \"transparent\": false\n"
	"  },\n"
	"  \"secrets\": {},\n"
	"  \"git\": {\n"
	"    \"hosts\": [],\n"
	"    \"api_hosts\": [],\n"
	"    \"repos\": {},\n"
	"    \"credential\": null,\n"
	"    \"github_app\": null,\n"
	"    \"token_env\": [\"GITHUB_TOKEN\", \"GH_TOKEN\"],\n"
	"    \"api_allow\": [],\n"
	"    \"ssh\": false\n"
	"  },\n"
	"  \"spend\": {\n"
	"    \"cap_usd\": null,\n"
	"    \"ledger\": null,\n"
	"    \"providers\": [],\n"
	"    \"prices\": {},\n"
	"    \"parent\": null,\n"
	"    \"on_exhausted\": \"block\",\n"
	"    \"max_body_bytes\": 33554432,\n"
	"    \"default_max_output_tokens\": 8192\n"
	"  },\n"
	"  \"env\": { \"pass\": [\"PATH\", \"HOME\", \"LANG\", \"TERM\"], \"set\": {} },\n"
	"  \"fs\": { \"rw\": [], \"ro\": [], \"hide\": [], \"protect\": [] }\n"
	"}\n";

static const uint16_t default_ports[] = { 80, 443 };
static const char *const default_env_pass[] = { "PATH", "HOME", "LANG", "TERM" };
static const char *const default_token_env[] = { "GITHUB_TOKEN", "GH_TOKEN" };

static const char *enum_name(const char *const *names, size_t n, unsigned int v)
{
	return v < n ? names[v] : "?";
}

/* Index of @s in @names, or -1. */
static int enum_find(const char *const *names, size_t n, const char *s)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return (int)i;
	return -1;
}

const char *policy_mode_to_string(enum policy_mode m)
{
	return enum_name(mode_names, ARRAY_SIZE(mode_names), (unsigned int)m);
}

const char *policy_gh_access_to_string(enum policy_gh_access a)
{
	return enum_name(gh_access_names, ARRAY_SIZE(gh_access_names),
			 (unsigned int)a);
}

const char *policy_ledger_to_string(enum policy_ledger l)
{
	return enum_name(ledger_names, ARRAY_SIZE(ledger_names), (unsigned int)l);
}

const char *policy_spend_api_to_string(enum policy_spend_api a)
{
	return enum_name(spend_api_names, ARRAY_SIZE(spend_api_names),
			 (unsigned int)a);
}

const char *policy_on_exhausted_to_string(enum policy_on_exhausted e)
{
	return enum_name(on_exhausted_names, ARRAY_SIZE(on_exhausted_names),
			 (unsigned int)e);
}

const char *policy_server_state_to_string(enum policy_server_state st)
{
	return enum_name(server_state_names, ARRAY_SIZE(server_state_names),
			 (unsigned int)st);
}

bool policy_mode_from_string(const char *s, enum policy_mode *out)
{
	int i = enum_find(mode_names, ARRAY_SIZE(mode_names), s);

	if (i < 0)
		return false;
	*out = (enum policy_mode)i;
	return true;
}

bool policy_env_is_reserved(const char *name)
{
	return enum_find(reserved_env, ARRAY_SIZE(reserved_env), name) >= 0;
}

/* ---- small helpers ---------------------------------------------------- */

static void strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static char **strv_dup(const char *const *v, size_t n)
{
	char **out = util_xcalloc(n ? n : 1, sizeof(*out));
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = util_xstrdup(v[i]);
	return out;
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

/* A number as the canonical form writes it: POLICY_REAL_DIGITS
 * significant digits, and no negative zero. Rounding on input makes the
 * value the other modules use the one the digest covers. */
static double real_canon(double v)
{
	char buf[64];

	if (v == 0)
		return 0;
	snprintf(buf, sizeof(buf), "%.*g", POLICY_REAL_DIGITS, v);
	return strtod(buf, NULL);
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
	 * pointers and strings are borrowed from the document; the sets are
	 * owned. A "_ok" flag is false when the section itself is broken: its
	 * own error is reported there, and references into it are not
	 * judged. */
	json_t *secrets;      /* root "secrets" object, NULL if absent */
	json_t *env_set;      /* env.set object, NULL if absent */
	json_t *git_hosts;    /* set of valid normalised git.hosts */
	const char *session_id; /* session.id when a string, else NULL */
	/* The git credential's secret (whose placeholder the git token's
	 * variables share), the token's variables (git.token_env or its
	 * default; empty when git has no token), and the placeholder
	 * variable of every other secret -> the path of its secret (the
	 * first one wins). */
	const char *git_credential;
	json_t *token_envs;
	json_t *other_secret_envs;

	/* Placeholder variables of the secrets walked so far -> the path of
	 * their secret. */
	json_t *secret_envs;
	/* The secret, price and provider being walked, and their paths. */
	struct policy_secret *cur;
	const char *cur_path;
	struct policy_capture *cur_capture;
	struct policy_price *cur_price;
	struct policy_spend_provider *cur_provider;
	const char *cur_provider_path;
	struct policy_publish *cur_pub; /* the publish entry being walked */
	json_t *publish_auths;     /* secret names publish[].auth gives */
	bool pub_has_listen, pub_has_port;
	/* spend.providers hosts seen so far -> the path of their provider. */
	json_t *provider_hosts;
	/* fs paths seen so far -> path: fs.ro's, and fs.rw's and fs.hide's. */
	json_t *fs_ro_seen, *fs_other_seen;

	char session_host[HOSTNAME_MAX + 1]; /* "" when no session.repo */
	/* git.provider's row (pre-scanned: session.repo and git.repos are
	 * read in its shape; GitHub when it is absent or invalid). */
	const struct gitprov *gp;
	bool secrets_ok, git_hosts_ok, session_repo_ok;
	bool git_token;          /* git.credential or git.github_app given */
	bool token_env_explicit; /* the author wrote git.token_env */
	bool spend_ledger_set;   /* spend.ledger is a string */
	bool have_version;
	/* Which keys the object being walked had. */
	bool cur_has_from_env, cur_has_from_file, cur_has_env, cur_has_hosts;
	bool cur_has_prefix;
	/* kind "aws": the objects of from_env/from_file and env */
	bool cur_kind_aws;
	json_t *cur_aws_from, *cur_aws_env;
	bool app_has_id, app_has_installation, app_has_key;
	bool price_has_input, price_has_output, price_has_cw, price_has_cr;
	bool prov_has_api, prov_has_hosts;
	bool git_has_credential, git_has_app; /* given, not null */
	bool git_has_glmint;
	bool glmint_has_token_env, glmint_has_token_file;
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

/* "path.key: required key is missing[: why]". */
static void err_missing(struct ctx *c, const char *path, const char *key,
			const char *why)
{
	char *sub = path_key(path, key);

	if (why)
		err_add(c, sub, "required key is missing: %s", why);
	else
		err_add(c, sub, "required key is missing");
	free(sub);
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

/* The edit distance (insert, delete, substitute one byte) of two keys,
 * capped at 9: enough to say "did you mean" for a typo. */
static size_t key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	size_t row[65];

	if (la > 64 || lb > 64)
		return 9;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb] < 9 ? row[lb] : 9;
}

/* "unknown key", with the closest known key when one is near: at most 2
 * edits, and fewer than half the key (so "a" never suggests "ca"). */
static void unknown_key(struct ctx *c, const char *path, const char *key,
			const struct field *fields, size_t nfields)
{
	size_t i, best = 3, len = strlen(key);
	const char *near = NULL;

	for (i = 0; i < nfields; i++) {
		size_t d = key_distance(key, fields[i].name);

		if (d < best && 2 * d < len) {
			best = d;
			near = fields[i].name;
		}
	}
	if (near)
		err_add(c, path, "unknown key (did you mean \"%s\"?)", near);
	else
		err_add(c, path, "unknown key");
}

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
			unknown_key(c, kp, key, fields, nfields);
		free(kp);
	}
	return true;
}

/* ---- the list reader -------------------------------------------------- */

/* How one kind of list is read. Every list of the policy is read by
 * list_parse(), with one of the kinds below. */
struct list_kind {
	size_t size; /* bytes per element */
	/* Checks @el and writes the element to @out; false after reporting
	 * at @path why not, leaving nothing allocated. Called only with
	 * strings when .strings is set. */
	bool (*parse)(struct ctx *c, json_t *el, const char *path, void *out);
	/* The element's canonical text for the duplicate check: a pointer
	 * into the element or into @buf (LIST_KEY_MAX bytes). NULL: no
	 * duplicate check. */
	const char *(*key)(const void *el, char *buf, size_t len);
	void (*drop)(void *el);   /* frees what an element owns; NULL if none */
	int (*cmp)(const void *a, const void *b); /* NULL: document order */
	bool strings;             /* "expected a string" for other elements */
	const char *not_array;    /* NULL: "expected an array" */
	const char *empty;        /* non-NULL: [] is refused with this */
	const char *dup;          /* NULL: "duplicate of" */
};

static void list_free(const struct list_kind *k, void *items, size_t n)
{
	if (k->drop) {
		size_t i;

		for (i = 0; i < n; i++)
			k->drop((unsigned char *)items + i * k->size);
	}
	free(items);
}

/* Reads the array @v as a list of kind @k. Returns a new array of *n
 * elements (free with list_free()), or NULL after reporting that @v is not
 * an array or is refused empty. *ok is true when every element was valid
 * (refused ones are reported and left out). */
static void *list_parse(struct ctx *c, json_t *v, const char *path,
			const struct list_kind *k, size_t *n, bool *ok)
{
	unsigned char *items;
	json_t *seen, *el;
	size_t i;

	*n = 0;
	*ok = false;
	if (!json_is_array(v)) {
		err_add(c, path, "%s", k->not_array ? k->not_array : "expected an array");
		return NULL;
	}
	if (k->empty && json_array_size(v) == 0) {
		err_add(c, path, "%s", k->empty);
		return NULL;
	}
	*ok = true;
	items = util_xcalloc(json_array_size(v) ? json_array_size(v) : 1, k->size);
	seen = seen_new();
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i), buf[LIST_KEY_MAX];
		void *slot = items + *n * k->size;

		/* A refused element may have left bytes in its slot. */
		memset(slot, 0, k->size);
		if (k->strings && !json_is_string(el)) {
			err_add(c, ep, "expected a string");
			*ok = false;
		} else if (!k->parse(c, el, ep, slot)) {
			*ok = false;
		} else if (k->key && seen_dup(c, seen, k->key(slot, buf, sizeof(buf)),
					      ep, k->dup ? k->dup : "duplicate of")) {
			if (k->drop)
				k->drop(slot);
			*ok = false;
		} else {
			(*n)++;
		}
		free(ep);
	}
	json_decref(seen);
	if (k->cmp && *n > 1)
		qsort(items, *n, k->size, k->cmp);
	return items;
}

/* Replaces the list (@arr, @n) of kind @k by the one at @v, unless @v is
 * refused as a whole (then the old list stays, to be freed with the
 * policy). */
#define LIST_SET(c, v, path, k, arr, n)                                       \
	do {                                                                  \
		size_t n_;                                                    \
		bool ok_;                                                     \
		void *a_ = list_parse((c), (v), (path), (k), &n_, &ok_);      \
		if (a_) {                                                     \
			list_free((k), (arr), (n));                           \
			(arr) = a_;                                           \
			(n) = n_;                                             \
		}                                                             \
	} while (0)

static const char *key_str(const void *el, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return *(char *const *)el;
}

static void drop_str(void *el)
{
	free(*(char **)el);
}

/* Stores a copy of @s in the char * at @out. */
static bool put_str(void *out, const char *s)
{
	*(char **)out = util_xstrdup(s);
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

/* Parses "HOST/OWNER/REPO" (or, unless @need_host, "OWNER/REPO") in the
 * shape of provider @gp: HOST a DNS name (never an IP literal), a
 * trailing ".git" removed from REPO, everything lowercased. OWNER is one
 * segment, or, for a provider whose repositories nest (GitLab), the
 * groups "group/sub/..." up to the repository; then, without @need_host,
 * the first segment is a HOST only when it is one of @hosts (git.hosts,
 * or @session_host), since a group can look like a name. Slashes are
 * never collapsed: "a//b" is refused. */
static bool repo_parse(const char *s, bool need_host, const struct gitprov *gp,
		       json_t *hosts, const char *session_host, struct repo_ref *out,
		       char *why, size_t whylen)
{
	const char *part[GITPROV_DEPTH_MAX + 2];
	size_t len[GITPROV_DEPTH_MAX + 2], nparts = 0, n, i, at = 0, first;
	const char *p = s, *slash;
	struct host_target t;
	bool nested = gp->depth_max > gp->depth_min, has_host;
	const char *form = nested ? (need_host ? "expected \"HOST/GROUP/.../PROJECT\""
					       : "expected \"GROUP/.../PROJECT\" or "
						 "\"HOST/GROUP/.../PROJECT\"")
				  : (need_host ? "expected \"HOST/OWNER/REPO\""
					       : "expected \"OWNER/REPO\" or \"HOST/OWNER/REPO\"");

	memset(out, 0, sizeof(*out));
	for (;;) {
		if (nparts == (size_t)gp->depth_max + 1) {
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
	if (need_host) {
		has_host = true;
	} else if (!nested) {
		has_host = nparts == (size_t)gp->depth_max + 1;
	} else {
		has_host = false;
		if (len[0] > 0 && len[0] <= HOSTNAME_MAX) {
			char h[HOSTNAME_MAX + 1];

			memcpy(h, part[0], len[0]);
			h[len[0]] = '\0';
			ascii_lower(h);
			has_host = (hosts && json_object_get(hosts, h)) ||
				   (session_host && strcmp(h, session_host) == 0);
		}
	}
	first = has_host ? 1 : 0;
	if (nparts < first + (size_t)gp->depth_min) {
		snprintf(why, whylen, "%s", form);
		return false;
	}
	if (has_host) {
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
	for (i = first; i + 1 < nparts; i++) {
		char seg[POLICY_REPO_PART_MAX + 1];

		if (!repo_part(part[i], len[i], seg, nested ? "a GROUP" : "OWNER", why, whylen))
			return false;
		if (gp->dash_routes && seg[0] == '-') {
			snprintf(why, whylen, "a %s path segment does not start with '-'",
				 gp->display);
			return false;
		}
		n = strlen(seg);
		if (nested && n >= 4 && strcmp(seg + n - 4, ".git") == 0) {
			snprintf(why, whylen, "a GROUP does not end in \".git\"");
			return false;
		}
		if (at + (at ? 1 : 0) + n > POLICY_REPO_PART_MAX) {
			snprintf(why, whylen, "the groups are longer than %d characters",
				 POLICY_REPO_PART_MAX);
			return false;
		}
		if (at)
			out->owner[at++] = '/';
		memcpy(out->owner + at, seg, n + 1);
		at += n;
	}
	if (!repo_part(part[nparts - 1], len[nparts - 1], out->repo,
		       nested ? "PROJECT" : "REPO", why, whylen))
		return false;
	if (gp->dash_routes && out->repo[0] == '-') {
		snprintf(why, whylen, "a %s path segment does not start with '-'", gp->display);
		return false;
	}
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

/* An exact DNS name, normalised (git.hosts, git.api_hosts, a provider's
 * hosts); @what names the list in the wildcard message. */
static bool exact_host_parse(const char *s, const char *what,
			     char out[HOSTNAME_MAX + 1], char *why, size_t whylen)
{
	struct host_target t;
	enum hostname_error he;

	if (strchr(s, '*')) {
		snprintf(why, whylen,
			 "wildcards are not allowed: %s are exact names", what);
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

/* A path without "." or ".." components, absolute (@relative false) or
 * relative to the workspace (@relative true: no leading '/', not empty);
 * repeated and trailing slashes are dropped (they change nothing on
 * Linux). The caller frees *out. */
static bool fs_path_clean(const char *s, bool relative, char **out,
			  const char **why)
{
	size_t n = strlen(s), i = 0, o = 0;
	char *buf;

	if (!relative && s[0] != '/') {
		*why = "expected an absolute path";
		return false;
	}
	if (relative && s[0] == '/') {
		*why = "expected a path relative to the workspace (no leading \"/\")";
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
		if (o > 0 || !relative)
			buf[o++] = '/';
		memcpy(buf + o, s + start, len);
		o += len;
	}
	if (o == 0 && relative) {
		free(buf);
		*why = "expected a path inside the workspace, not the workspace itself";
		return false;
	}
	if (o == 0)
		buf[o++] = '/';
	buf[o] = '\0';
	*out = buf;
	return true;
}

/* Characters of a URL path besides letters and digits (RFC 3986 pchar
 * and '/'), without '%': an escape would give one path two spellings. */
#define URL_PATH_CHARS "-._~!$&'()*+,;=:@/"

/* A URL path or path prefix: starts with '/', no '%', no empty, "." or
 * ".." segment. A trailing '/' is kept when @keep_slash, else dropped
 * ("/" becomes ""). The caller frees *out. */
static bool url_path_clean(const char *s, bool keep_slash, char **out,
			   const char **why)
{
	size_t n = strlen(s), i;

	if (s[0] != '/') {
		*why = "expected a path starting with \"/\"";
		return false;
	}
	if (n > POLICY_URL_PATH_MAX) {
		*why = "path longer than 1024 bytes";
		return false;
	}
	for (i = 0; i < n; i++) {
		if (s[i] == '%') {
			*why = "percent-escapes are not allowed";
			return false;
		}
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr(URL_PATH_CHARS, s[i])) {
			*why = "expected only A-Z a-z 0-9 and - . _ ~ ! $ & ' ( ) * + , ; = : @ / in a path";
			return false;
		}
	}
	for (i = 0; i < n; i++) {
		size_t start = i + 1, len;

		if (s[i] != '/')
			continue;
		len = strcspn(s + start, "/");
		if (len == 0 && start < n) {
			*why = "empty path segment (\"//\")";
			return false;
		}
		if ((len == 1 && s[start] == '.') ||
		    (len == 2 && s[start] == '.' && s[start + 1] == '.')) {
			*why = "\".\" and \"..\" segments are not allowed";
			return false;
		}
	}
	if (!keep_slash && s[n - 1] == '/')
		n--;
	*out = util_xstrndup(s, n);
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

/* An upper-case method token: [A-Z][A-Z0-9_-]*, at most 32 bytes. HTTP
 * methods are case-sensitive, so "get" is refused rather than raised. */
static bool method_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_METHOD_MAX || !(s[0] >= 'A' && s[0] <= 'Z'))
		return false;
	for (i = 1; i < n; i++)
		if (!(s[i] >= 'A' && s[i] <= 'Z') && !is_digit(s[i]) &&
		    s[i] != '-' && s[i] != '_')
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

/* A placeholder prefix: printable ASCII without space (it must survive
 * headers, Basic credentials and shells unquoted), at most 128 bytes. */
static bool prefix_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n > POLICY_PREFIX_MAX)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
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

/* ---- list kinds ------------------------------------------------------- */

static bool el_rule(struct ctx *c, json_t *el, const char *path, void *out)
{
	char err[256];

	if (host_rule_parse(json_string_value(el), out, err, sizeof(err)))
		return true;
	err_add(c, path, "%s", err);
	return false;
}

static const char *key_rule(const void *el, char *buf, size_t len)
{
	host_rule_format(el, buf, len);
	return buf;
}

static const struct list_kind rule_list = {
	.size = sizeof(struct host_rule), .parse = el_rule, .key = key_rule,
	.strings = true,
};

static const struct list_kind secret_hosts_list = {
	.size = sizeof(struct host_rule), .parse = el_rule, .key = key_rule,
	.strings = true,
	.empty = "must not be empty: a secret needs the hosts it may be sent to",
};

/* The same, where [] is valid: a secret that publish[].auth names may be
 * sent nowhere (it is only compared with what inbound requests carry). */
static const struct list_kind auth_secret_hosts_list = {
	.size = sizeof(struct host_rule), .parse = el_rule, .key = key_rule,
	.strings = true,
};

static bool el_port(struct ctx *c, json_t *el, const char *path, void *out)
{
	json_int_t port = json_integer_value(el);

	if (!json_is_integer(el) || port < 1 || port > 65535) {
		err_add(c, path, "expected an integer from 1 to 65535");
		return false;
	}
	*(uint16_t *)out = (uint16_t)port;
	return true;
}

static const char *key_port(const void *el, char *buf, size_t len)
{
	snprintf(buf, len, "%u", (unsigned int)*(const uint16_t *)el);
	return buf;
}

static const struct list_kind port_list = {
	.size = sizeof(uint16_t), .parse = el_port, .key = key_port,
	.cmp = cmp_u16,
};

static bool el_cidr(struct ctx *c, json_t *el, const char *path, void *out)
{
	char why[128];

	if (cidr_parse(json_string_value(el), out, why, sizeof(why)))
		return true;
	err_add(c, path, "%s", why);
	return false;
}

static const char *key_cidr(const void *el, char *buf, size_t len)
{
	addr_cidr_format(el, buf, len);
	return buf;
}

static const struct list_kind cidr_list = {
	.size = sizeof(struct addr_cidr), .parse = el_cidr, .key = key_cidr,
	.cmp = cmp_cidr, .strings = true,
};

static bool el_endpoint(struct ctx *c, json_t *el, const char *path, void *out)
{
	if (endpoint_parse(json_string_value(el), out))
		return true;
	err_add(c, path, "expected \"IP:PORT\" with a port from 1 to 65535 "
			 "(IPv6 as \"[::1]:53\")");
	return false;
}

static const char *key_endpoint(const void *el, char *buf, size_t len)
{
	endpoint_format(el, buf, len);
	return buf;
}

static const struct list_kind endpoint_list = {
	.size = sizeof(struct policy_endpoint), .parse = el_endpoint,
	.key = key_endpoint, .strings = true,
};

static bool el_env_pattern(struct ctx *c, json_t *el, const char *path,
			   void *out)
{
	const char *s = json_string_value(el);

	if (!env_pattern_ok(s)) {
		err_add(c, path, "expected a variable name "
			"([A-Za-z_][A-Za-z0-9_]*), optionally ending in \"*\"");
		return false;
	}
	if (policy_env_is_reserved(s)) {
		char *q = quote(s);

		err_add(c, path, "%s is one of airlock's own variables", q);
		free(q);
		return false;
	}
	return put_str(out, s);
}

#define STR_LIST(fn, sorted)                                                  \
	{ .size = sizeof(char *), .parse = (fn), .key = key_str,              \
	  .drop = drop_str, .cmp = (sorted) ? cmp_str : NULL, .strings = true }

static const struct list_kind env_pattern_list = STR_LIST(el_env_pattern, true);

/* A fs.rw / fs.hide / fs.ro path; @ro says which. A path in fs.ro and in
 * one of the others would be shown read-only and writable, or read-only
 * and hidden: say so instead of picking one. */
static bool fs_abs_el(struct ctx *c, json_t *el, const char *path, void *out,
		      bool ro)
{
	const char *why = NULL;
	json_t *other;
	char *clean;

	if (!fs_path_clean(json_string_value(el), false, &clean, &why)) {
		err_add(c, path, "%s", why);
		return false;
	}
	other = json_object_get(ro ? c->fs_other_seen : c->fs_ro_seen, clean);
	if (other) {
		err_add(c, path, "same path as %s", json_string_value(other));
		free(clean);
		return false;
	}
	if (!json_object_get(ro ? c->fs_ro_seen : c->fs_other_seen, clean))
		json_object_set_new(ro ? c->fs_ro_seen : c->fs_other_seen, clean,
				    json_string(path));
	*(char **)out = clean;
	return true;
}

static bool el_fs_rw_hide(struct ctx *c, json_t *el, const char *path, void *out)
{
	return fs_abs_el(c, el, path, out, false);
}

static bool el_fs_ro(struct ctx *c, json_t *el, const char *path, void *out)
{
	return fs_abs_el(c, el, path, out, true);
}

static bool el_fs_rel(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *why = NULL;
	char *clean;

	if (!fs_path_clean(json_string_value(el), true, &clean, &why)) {
		err_add(c, path, "%s", why);
		return false;
	}
	*(char **)out = clean;
	return true;
}

static const struct list_kind fs_rw_hide_list = STR_LIST(el_fs_rw_hide, true);
static const struct list_kind fs_ro_list = STR_LIST(el_fs_ro, true);
static const struct list_kind fs_rel_list = STR_LIST(el_fs_rel, true);

static bool el_header(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);

	if (!header_name_ok(s)) {
		err_add(c, path, "expected an HTTP header field name (RFC 9110 token)");
		return false;
	}
	put_str(out, s);
	ascii_lower(*(char **)out);
	return true;
}

static const struct list_kind header_list = {
	.size = sizeof(char *), .parse = el_header, .key = key_str,
	.drop = drop_str, .cmp = cmp_str, .strings = true,
	.not_array = "expected an array of header names or null",
	.empty = "must not be empty (null or no \"headers\" means any header)",
};

static bool el_secret_path(struct ctx *c, json_t *el, const char *path,
			   void *out)
{
	const char *why = NULL;

	if (url_path_clean(json_string_value(el), true, out, &why))
		return true;
	err_add(c, path, "%s", why);
	return false;
}

static const struct list_kind secret_path_list = {
	.size = sizeof(char *), .parse = el_secret_path, .key = key_str,
	.drop = drop_str, .cmp = cmp_str, .strings = true,
	.not_array = "expected an array of path prefixes or null",
	.empty = "must not be empty (null or no \"paths\" means any path)",
};

static bool el_method(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);

	if (method_ok(s))
		return put_str(out, s);
	err_add(c, path, "expected an upper-case HTTP method such as \"GET\" or \"POST\"");
	return false;
}

static const struct list_kind method_list = {
	.size = sizeof(char *), .parse = el_method, .key = key_str,
	.drop = drop_str, .cmp = cmp_str, .strings = true,
	.not_array = "expected an array of HTTP methods or null",
	.empty = "must not be empty (null or no \"methods\" means any method)",
};

static bool exact_host_el(struct ctx *c, json_t *el, const char *path,
			  void *out, const char *what)
{
	char name[HOSTNAME_MAX + 1], why[256];

	if (exact_host_parse(json_string_value(el), what, name, why, sizeof(why)))
		return put_str(out, name);
	err_add(c, path, "%s", why);
	return false;
}

static bool el_git_host(struct ctx *c, json_t *el, const char *path, void *out)
{
	return exact_host_el(c, el, path, out, "git hosts");
}

static bool el_api_host(struct ctx *c, json_t *el, const char *path, void *out)
{
	return exact_host_el(c, el, path, out, "API hosts");
}

static const struct list_kind git_host_list = STR_LIST(el_git_host, true);
static const struct list_kind api_host_list = STR_LIST(el_api_host, true);




static bool el_provider_host(struct ctx *c, json_t *el, const char *path,
			     void *out)
{
	char name[HOSTNAME_MAX + 1], why[256];
	json_t *other;

	if (!exact_host_parse(json_string_value(el), "provider hosts", name, why,
			      sizeof(why))) {
		err_add(c, path, "%s", why);
		return false;
	}
	/* One host, one meter: two providers on a host would leave which
	 * API's usage counts to chance. */
	other = json_object_get(c->provider_hosts, name);
	if (other && strcmp(json_string_value(other), c->cur_provider_path) != 0) {
		char *q = quote(name);

		err_add(c, path, "%s is already a host of %s", q,
			json_string_value(other));
		free(q);
		return false;
	}
	if (!other)
		json_object_set_new(c->provider_hosts, name,
				    json_string(c->cur_provider_path));
	return put_str(out, name);
}

static const struct list_kind provider_host_list = {
	.size = sizeof(char *), .parse = el_provider_host, .key = key_str,
	.drop = drop_str, .cmp = cmp_str, .strings = true,
	.empty = "must not be empty: a provider needs the hosts it is metered on",
};

static bool el_git_op(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);
	unsigned int bit = 0;

	if (s && strcmp(s, "fetch") == 0)
		bit = POLICY_GIT_FETCH;
	else if (s && strcmp(s, "push") == 0)
		bit = POLICY_GIT_PUSH;
	if (!bit) {
		err_add(c, path, "expected \"fetch\" or \"push\"");
		return false;
	}
	*(unsigned int *)out = bit;
	return true;
}

static const char *key_git_op(const void *el, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return *(const unsigned int *)el == POLICY_GIT_FETCH ? "fetch" : "push";
}

static const struct list_kind git_op_list = {
	.size = sizeof(unsigned int), .parse = el_git_op, .key = key_git_op,
	.not_array = "expected an array of \"fetch\" and \"push\"",
	.empty = "must not be empty",
};

/* A git.token_env entry. The token's variables must not be airlock's own
 * (never), nor, when git has a token at all, an env.set name or another
 * secret's placeholder variable: the agent would see something else than
 * the token's placeholder, or one variable would stand for two secrets.
 * The git credential's own variable may be listed: it carries the same
 * placeholder. */
static bool el_token_env(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);
	json_t *other;
	char *q;
	bool ok = false;

	if (!env_name_ok(s)) {
		err_add(c, path, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		return false;
	}
	q = quote(s);
	if (policy_env_is_reserved(s)) {
		err_add(c, path, "%s is one of airlock's own variables", q);
		goto out;
	}
	if (c->git_token && c->env_set && json_object_get(c->env_set, s)) {
		err_add(c, path, "%s is also set by env.set", q);
		goto out;
	}
	other = c->git_token ? json_object_get(c->other_secret_envs, s) : NULL;
	if (other) {
		err_add(c, path, "%s is already the placeholder variable of %s", q,
			json_string_value(other));
		goto out;
	}
	ok = put_str(out, s);
out:
	free(q);
	return ok;
}

static const struct list_kind token_env_list = STR_LIST(el_token_env, true);

static bool el_api_allow(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *why = NULL;
	char *clean;

	if (!url_path_clean(json_string_value(el), false, &clean, &why)) {
		err_add(c, path, "%s", why);
		return false;
	}
	/* A prefix that the normaliser of request paths refuses would never
	 * match a request: an error, not a rule that silently does nothing. */
	if (clean[0]) {
		struct pathnorm pn;
		enum pathnorm_error pe = pathnorm_parse(clean, strlen(clean), PATHNORM_MAX, 0, &pn);

		if (pe != PATHNORM_OK) {
			err_add(c, path, "%s: no request path can match it", pathnorm_error_reason(pe));
			free(clean);
			return false;
		}
	}
	if (!clean[0]) {
		free(clean);
		err_add(c, path, "\"/\" would allow every path: list the "
				 "prefixes the agent needs (e.g. \"/graphql\")");
		return false;
	}
	*(char **)out = clean;
	return true;
}

static const struct list_kind api_allow_list = STR_LIST(el_api_allow, true);

/* Replaces *dst by a copy of a JSON string, or NULL for JSON null. */
static void set_str(char **dst, json_t *v)
{
	free(*dst);
	*dst = json_is_string(v) ? util_xstrdup(json_string_value(v)) : NULL;
}

/* A file path value: a non-empty string, or null when @nullable. Returns
 * false after reporting. */
static bool file_value(struct ctx *c, json_t *v, const char *path,
		       bool nullable, char **dst)
{
	if ((nullable && json_is_null(v)) ||
	    (json_is_string(v) && json_string_length(v) > 0)) {
		set_str(dst, v);
		return true;
	}
	err_add(c, path, nullable ? "expected a non-empty path or null"
				  : "expected a non-empty path");
	return false;
}

static void parse_bool(struct ctx *c, json_t *v, const char *path, bool *out)
{
	if (!json_is_boolean(v))
		err_add(c, path, "expected true or false");
	else
		*out = json_is_true(v);
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

#define SESSION_ID_MSG                                                        \
	"expected 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a "  \
	"letter or digit"

static void parse_session_id(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v) && !json_is_string(v))
		err_add(c, path, "expected a string or null");
	else if (json_is_string(v) && !policy_session_id_valid(json_string_value(v)))
		err_add(c, path, SESSION_ID_MSG);
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
	if (!repo_parse(json_string_value(v), true, c->gp, NULL, NULL, &r, why, sizeof(why))) {
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
	LIST_SET(c, v, path, &rule_list, c->p->allow, c->p->nallow);
}

static void parse_deny(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &rule_list, c->p->deny, c->p->ndeny);
}

static void parse_intercept(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &rule_list, c->p->intercept, c->p->nintercept);
}

static void parse_ports(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &port_list, c->p->ports, c->p->nports);
}

static void parse_allow_ranges(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &cidr_list, c->p->allow_ranges, c->p->nallow_ranges);
}

static void parse_resolver(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &endpoint_list, c->p->resolvers, c->p->nresolvers);
}

static void parse_upstream_ca(struct ctx *c, json_t *v, const char *path)
{
	file_value(c, v, path, true, &c->p->upstream_ca);
}

static void parse_transparent(struct ctx *c, json_t *v, const char *path)
{
	parse_bool(c, v, path, &c->p->transparent);
}

static const struct field egress_fields[] = {
	{ "allow", parse_allow },
	{ "deny", parse_deny },
	{ "ports", parse_ports },
	{ "allow_ranges", parse_allow_ranges },
	{ "resolver", parse_resolver },
	{ "upstream_ca", parse_upstream_ca },
	{ "intercept", parse_intercept },
	{ "transparent", parse_transparent },
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
	if (json_is_object(v)) { /* kind aws: parse_aws() reads it */
		c->cur_aws_from = v;
		return;
	}
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
	if (json_is_object(v)) { /* kind aws: parse_aws() reads it */
		c->cur_aws_from = v;
		return;
	}
	file_value(c, v, path, true, &c->cur->from_file);
}

static bool is_git_credential(const struct ctx *c, const char *secret)
{
	return c->git_credential && strcmp(c->git_credential, secret) == 0;
}

/* The placeholder variable must not collide with airlock's own variables,
 * with env.set, with another secret's placeholder or (unless this secret
 * is the git credential, whose placeholder they share) with the git
 * token's variables: any of those would make the agent see something else
 * than the placeholder, or one placeholder stand for two secrets. When the
 * author wrote git.token_env, a clash with it is reported there. */
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
	if (!c->token_env_explicit && json_object_get(c->token_envs, env) &&
	    !is_git_credential(c, c->cur->name))
		err_add(c, path, "%s is also a git.token_env variable (the git "
				 "token's placeholder)", q);
out:
	free(q);
}

static void parse_secret_env(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->cur_has_env = true;
	if (json_is_object(v)) { /* kind aws: parse_aws() reads it */
		c->cur_aws_env = v;
		return;
	}
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
	if (json_object_get(c->publish_auths, c->cur->name))
		LIST_SET(c, v, path, &auth_secret_hosts_list, c->cur->hosts, c->cur->nhosts);
	else
		LIST_SET(c, v, path, &secret_hosts_list, c->cur->hosts, c->cur->nhosts);
}

static void parse_secret_headers(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &header_list, c->cur->headers,
			 c->cur->nheaders);
}

static void parse_secret_prefix(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->cur_has_prefix = true;
	if (!json_is_string(v) || !prefix_ok(json_string_value(v)))
		err_add(c, path, "expected up to 128 printable ASCII characters "
				 "without spaces, or null");
	else
		set_str(&c->cur->prefix, v);
}

static void parse_secret_paths(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &secret_path_list, c->cur->paths,
			 c->cur->npaths);
}

static void parse_secret_methods(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &method_list, c->cur->methods,
			 c->cur->nmethods);
}

/* ---- secrets.NAME.body and secrets.NAME.capture ---------------------- */

/* An RFC 6901 pointer: "" or "/..." whose '~' escapes are ~0 and ~1. */
static bool json_pointer_ok(const char *s)
{
	if (*s && *s != '/')
		return false;
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
		if (*s == '~' && s[1] != '0' && s[1] != '1')
			return false;
	}
	return true;
}

static bool el_body_field(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);

	if ((strncmp(s, "form:", 5) == 0 && s[5] && strlen(s) <= 5 + 256 &&
	     strspn(s + 5, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			   "0123456789_.-[]") == strlen(s + 5)) ||
	    (strncmp(s, "json:/", 6) == 0 && json_pointer_ok(s + 5)))
		return put_str(out, s);
	err_add(c, path, "expected \"form:NAME\" (a form field: letters, digits, _ . - [ ]) "
			 "or \"json:/POINTER\" (an RFC 6901 pointer)");
	return false;
}

static const struct list_kind body_field_list = {
	.size = sizeof(char *), .parse = el_body_field, .key = key_str,
	.drop = drop_str, .cmp = cmp_str, .strings = true,
	.not_array = "expected an array of body fields or null",
	.empty = "must not be empty (null or no \"body\" means no body field)",
};

static void parse_secret_body(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &body_field_list, c->cur->body, c->cur->nbody);
}

/* A capture path: "/" then segments of visible ASCII without '?', '#',
 * '%' or '\\'; a segment "*" matches any one segment. */
static bool el_capture_path(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el), *q;

	for (q = s; *q > 0x20 && *q < 0x7f && !strchr("?#%\\", *q); q++)
		;
	if (*s == '/' && !*q && !strstr(s, "//") && strlen(s) <= 1024)
		return put_str(out, s);
	err_add(c, path, "expected a path (\"/sessions/*/scm-credentials\": '*' "
			 "matches one whole segment) without '?', '#', '%%', '\\' or \"//\"");
	return false;
}

static bool el_json_pointer(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *s = json_string_value(el);

	if (*s == '/' && json_pointer_ok(s))
		return put_str(out, s);
	err_add(c, path, "expected an RFC 6901 JSON pointer (\"/token\")");
	return false;
}

static const struct list_kind capture_path_list = STR_LIST(el_capture_path, true);
static const struct list_kind json_pointer_list = STR_LIST(el_json_pointer, true);

static void parse_capture_hosts(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &secret_hosts_list, c->cur_capture->hosts,
		 c->cur_capture->nhosts);
}

static void parse_capture_methods(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &method_list, c->cur_capture->methods,
			 c->cur_capture->nmethods);
}

static void parse_capture_paths(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &capture_path_list, c->cur_capture->paths,
			 c->cur_capture->npaths);
}

static void parse_capture_json(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &json_pointer_list, c->cur_capture->json,
			 c->cur_capture->njson);
}

static void parse_capture_headers(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		LIST_SET(c, v, path, &header_list, c->cur_capture->headers,
			 c->cur_capture->nheaders);
}

static void parse_capture_expires(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	if (!json_is_string(v) || *json_string_value(v) != '/' ||
	    !json_pointer_ok(json_string_value(v)))
		err_add(c, path, "expected an RFC 6901 JSON pointer (\"/expires_at\") or null");
	else
		set_str(&c->cur_capture->expires, v);
}

static const struct field capture_fields[] = {
	{ "hosts", parse_capture_hosts },
	{ "methods", parse_capture_methods },
	{ "paths", parse_capture_paths },
	{ "json", parse_capture_json },
	{ "headers", parse_capture_headers },
	{ "expires", parse_capture_expires },
};

static void parse_secret_capture(struct ctx *c, json_t *v, const char *path)
{
	json_t *el;
	size_t i;

	if (json_is_null(v))
		return;
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64) {
		err_add(c, path, "expected an array of 1 to 64 capture rules or null");
		return;
	}
	c->cur->capture = util_xcalloc(json_array_size(v), sizeof(*c->cur->capture));
	json_array_foreach(v, i, el) {
		char *ep = path_index(path, i);

		c->cur_capture = &c->cur->capture[c->cur->ncapture++];
		if (walk_object(c, el, ep, capture_fields, ARRAY_SIZE(capture_fields))) {
			if (!c->cur_capture->nhosts)
				err_missing(c, ep, "hosts", "a capture rule needs the hosts "
							    "whose answers it reads");
			if (!json_object_get(el, "json") && !json_object_get(el, "headers"))
				err_add(c, ep, "give \"json\" or \"headers\": where the "
					       "answer carries the credential");
		}
		c->cur_capture = NULL;
		free(ep);
	}
}

static void parse_secret_kind(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	if (!json_is_string(v) || strcmp(json_string_value(v), "aws") != 0)
		err_add(c, path, "expected \"aws\" or null");
	else
		c->cur_kind_aws = true;
}

/* ---- secrets of kind aws ------------------------------------------------ */

static const char *const aws_parts[] = { "access_key_id", "secret_access_key",
					 "session_token" };
static const char *const aws_default_env[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
					       "AWS_SESSION_TOKEN" };

/* Unknown members of a kind aws object (from_env, from_file, env). */
static void aws_keys(struct ctx *c, json_t *obj, const char *path)
{
	const char *key;
	json_t *el;
	size_t k;

	json_object_foreach(obj, key, el) {
		for (k = 0; k < ARRAY_SIZE(aws_parts); k++)
			if (strcmp(key, aws_parts[k]) == 0)
				break;
		if (k == ARRAY_SIZE(aws_parts)) {
			char *sub = path_key(path, key);

			err_add(c, sub, "unknown key: expected access_key_id, "
					"secret_access_key or session_token");
			free(sub);
		}
	}
}

/* One credential of the aws secret @s into @d (@s itself for the key id):
 * its source and the variable that carries its placeholder. Returns false
 * when the source is absent (the session token may be). */
static bool aws_part(struct ctx *c, const struct policy_secret *s, struct policy_secret *d,
		     size_t k, const char *path)
{
	bool file = c->cur_has_from_file;
	char *fp = path_key(path, file ? "from_file" : "from_env");
	char *sub = path_key(fp, aws_parts[k]);
	json_t *v = json_object_get(c->cur_aws_from, aws_parts[k]);
	json_t *e = c->cur_aws_env ? json_object_get(c->cur_aws_env, aws_parts[k]) : NULL;
	bool ok = false;

	if (!v || json_is_null(v)) {
		if (k < 2)
			err_add(c, sub, "required: kind aws needs the access key id and "
					"the secret access key");
		goto out;
	}
	if (d != s) {
		memset(d, 0, sizeof(*d));
		d->name = util_xstrdup(s->name);
		if (s->nhosts) {
			d->hosts = util_xmalloc(s->nhosts * sizeof(*s->hosts));
			memcpy(d->hosts, s->hosts, s->nhosts * sizeof(*s->hosts));
		}
		d->nhosts = s->nhosts;
		d->prefix = util_xstrdup("");
	}
	d->aws = (enum policy_aws_part)(POLICY_AWS_KEY_ID + k);
	if (file)
		(void)file_value(c, v, sub, false, &d->from_file);
	else if (!json_is_string(v) || !env_name_ok(json_string_value(v)))
		err_add(c, sub, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*)");
	else
		set_str(&d->from_env, v);
	free(sub);
	sub = path_key(path, "env");
	if (e && !json_is_null(e)) {
		char *esub = path_key(sub, aws_parts[k]);

		if (!json_is_string(e) || !env_name_ok(json_string_value(e)))
			err_add(c, esub, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		else
			d->env = util_xstrdup(json_string_value(e));
		free(sub);
		sub = esub;
	} else {
		d->env = util_xstrdup(d->from_env ? d->from_env : aws_default_env[k]);
	}
	if (d->env)
		check_secret_env(c, d->env, sub);
	ok = true;
out:
	free(sub);
	free(fp);
	return ok;
}

/* A secret of kind aws (SPEC §3.4): from_env or from_file is an object
 * naming each credential; hosts default to **.amazonaws.com. @s is the
 * secret's first entry (the key id); the others follow it. */
static void parse_aws(struct ctx *c, struct policy_secret *s, const char *path)
{
	size_t k;

	if (!c->cur_kind_aws) {
		err_add(c, path, "from_env, from_file or env as an object is for "
				 "\"kind\": \"aws\" only");
		return;
	}
	if (c->cur_has_from_env && c->cur_has_from_file) {
		err_add(c, path, "give one of from_env and from_file, not both");
		return;
	}
	if (!c->cur_aws_from) {
		err_add(c, path, "kind aws: from_env or from_file must be an object "
				 "naming access_key_id, secret_access_key and "
				 "(optionally) session_token");
		return;
	}
	if (c->cur_aws_env == NULL && c->cur_has_env)
		err_add(c, path, "kind aws: env must be an object (the variable of "
				 "each credential's placeholder)");
	if (c->cur_has_prefix || s->headers || s->paths || s->methods)
		err_add(c, path, "kind aws takes no prefix, headers, paths or methods: "
				 "its requests are re-signed, not substituted");
	if (is_git_credential(c, s->name))
		err_add(c, path, "a secret of kind aws cannot be git.credential");
	{
		char *fp = path_key(path, c->cur_has_from_file ? "from_file" : "from_env");
		char *ep = path_key(path, "env");

		aws_keys(c, c->cur_aws_from, fp);
		if (c->cur_aws_env)
			aws_keys(c, c->cur_aws_env, ep);
		free(fp);
		free(ep);
	}
	if (!c->cur_has_hosts) {
		char err[256];

		s->hosts = util_xcalloc(1, sizeof(*s->hosts));
		ASSERT(host_rule_parse("**.amazonaws.com", s->hosts, err, sizeof(err)));
		s->nhosts = 1;
		c->cur_has_hosts = true;
	}
	free(s->prefix);
	s->prefix = util_xstrdup("");
	for (k = 0; k < ARRAY_SIZE(aws_parts); k++) {
		struct policy_secret *d = k ? &c->p->secrets[c->p->nsecrets + 1] : s;

		if (aws_part(c, s, d, k, path) && k)
			c->p->nsecrets++;
	}
}

static void parse_secret_oauth(struct ctx *c, json_t *v, const char *path);

static const struct field secret_fields[] = {
	{ "kind", parse_secret_kind },
	{ "from_env", parse_secret_from_env },
	{ "from_file", parse_secret_from_file },
	{ "env", parse_secret_env },
	{ "hosts", parse_secret_hosts },
	{ "headers", parse_secret_headers },
	{ "prefix", parse_secret_prefix },
	{ "paths", parse_secret_paths },
	{ "methods", parse_secret_methods },
	{ "body", parse_secret_body },
	{ "capture", parse_secret_capture },
	{ "oauth", parse_secret_oauth },
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
	c->cur_has_env = c->cur_has_hosts = c->cur_has_prefix = false;
	c->cur_kind_aws = false;
	c->cur_aws_from = c->cur_aws_env = NULL;
	if (!secret_name_ok(name))
		err_add(c, path, "invalid secret name: expected 1 to 64 "
				 "characters of A-Z a-z 0-9 _ . -");
	if (!walk_object(c, v, path, secret_fields, ARRAY_SIZE(secret_fields)))
		goto out;
	if (c->cur_kind_aws || c->cur_aws_from || c->cur_aws_env) {
		parse_aws(c, s, path);
		goto out;
	}
	if (!c->cur_has_prefix)
		s->prefix = util_xasprintf("airlock-ph-%s-", name);
	if (c->cur_has_from_env && c->cur_has_from_file)
		err_add(c, path, "give one of from_env and from_file, not both");
	else if (s->capture && (c->cur_has_from_env || c->cur_has_from_file))
		err_add(c, path, "a captured secret (capture) has no from_env or from_file");
	else if (s->oauth && (c->cur_has_from_env || c->cur_has_from_file || s->capture))
		err_add(c, path, "an OAuth secret (oauth) has no from_env, from_file or capture: "
				 "its value is the access token the supervisor obtains");
	else if (!s->capture && !s->oauth && !c->cur_has_from_env && !c->cur_has_from_file)
		err_add(c, path, "one of from_env and from_file is required");
	if (s->capture && c->cur_has_env)
		err_add(c, path, "a captured secret has no env: the agent gets its "
				 "placeholder in the answer it was captured from");
	if (!c->cur_has_env && !s->capture) {
		sub = path_key(path, "env");
		if (s->oauth) {
			err_add(c, sub, "required with oauth (the variable that "
					"carries the placeholder)");
		} else if (c->cur_has_from_file && !c->cur_has_from_env) {
			err_add(c, sub, "required with from_file (the variable "
					"that carries the placeholder)");
		} else if (s->from_env && !c->cur_has_from_file) {
			check_secret_env(c, s->from_env, sub);
			s->env = util_xstrdup(s->from_env);
		}
		free(sub);
	}
	if (!c->cur_has_hosts)
		err_missing(c, path, "hosts", "a secret needs the hosts it may be sent to");
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
	/* up to three entries each: a secret of kind aws has one per
	 * credential */
	c->p->secrets = util_xcalloc(3 * json_object_size(v) + 1, sizeof(*c->p->secrets));
	json_object_foreach(v, name, entry) {
		char *ep = path_key(path, name);

		parse_secret(c, name, entry, ep);
		free(ep);
	}
}

static void parse_git_hosts(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &git_host_list, c->p->git_hosts, c->p->ngit_hosts);
}

static void parse_git_api_hosts(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &api_host_list, c->p->git_api_hosts,
		 c->p->ngit_api_hosts);
}

/* The operations of one git.repos entry. Returns POLICY_GIT_* bits, 0
 * after reporting an error. */
static unsigned int parse_git_ops(struct ctx *c, json_t *v, const char *path)
{
	unsigned int ops = 0, *bits;
	size_t i, n;
	bool ok;

	bits = list_parse(c, v, path, &git_op_list, &n, &ok);
	for (i = 0; bits && i < n; i++)
		ops |= bits[i];
	free(bits);
	return ok ? ops : 0;
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

		if (!repo_parse(key, false, c->gp, c->git_hosts, c->session_host, &r, why,
				sizeof(why))) {
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
	c->git_has_credential = name != NULL;
	if (name && c->secrets_ok &&
	    !(c->secrets && json_object_get(c->secrets, name))) {
		char *q = quote(name);

		err_add(c, path, "no secret named %s", q);
		free(q);
		return;
	}
	if (name && c->secrets_ok && json_is_object(json_object_get(c->secrets, name)) &&
	    json_is_object(json_object_get(json_object_get(c->secrets, name), "oauth"))) {
		err_add(c, path, "secret %s is an OAuth token (oauth): git.credential names a "
				 "secret with a value of its own", name);
		return;
	}
	set_str(&c->p->git_credential, v);
}

/* "https://HOST[:PORT][/PATH]" into @a's api fields: the scheme and HOST
 * lowercased, ":443" and a trailing '/' dropped. No user-info, query or
 * fragment. On failure *why says what is wrong and @a is unchanged. */
static bool https_url_parse(const char *s, char **url, char **host, uint16_t *portp,
			    char **pathp, const char **why)
{
	char authority[HOSTNAME_MAX + 16], hostbuf[HOSTNAME_MAX + 3];
	const char *auth = s + 8, *slash, *colon, *rb;
	unsigned long port = 443;
	struct host_target t;
	enum hostname_error he;
	char *path = NULL;
	size_t n, hn;

	if (strncasecmp(s, "https://", 8) != 0) {
		*why = "expected https://";
		return false;
	}
	if (strpbrk(auth, "?#")) {
		*why = "a query or fragment is not allowed";
		return false;
	}
	slash = strchr(auth, '/');
	n = slash ? (size_t)(slash - auth) : strlen(auth);
	if (memchr(auth, '@', n)) {
		*why = "user-info ('@') is not allowed";
		return false;
	}
	if (n == 0 || n >= sizeof(authority)) {
		*why = n ? "the host is too long" : "expected a host";
		return false;
	}
	memcpy(authority, auth, n);
	authority[n] = '\0';
	colon = strrchr(authority, ':');
	rb = strrchr(authority, ']');
	hn = n;
	if (colon && (authority[0] != '[' || (rb && colon > rb))) {
		if (colon[1] == '0' ||
		    !util_parse_uint(colon + 1, 1, 65535, &port)) {
			*why = "expected a port from 1 to 65535";
			return false;
		}
		hn = (size_t)(colon - authority);
	}
	he = hostname_normalise(authority, hn, &t);
	if (he != HOSTNAME_OK) {
		*why = hostname_error_to_string(he);
		return false;
	}
	if (slash && !url_path_clean(slash, false, &path, why))
		return false;
	if (t.is_addr && t.addr.family == AF_INET6)
		snprintf(hostbuf, sizeof(hostbuf), "[%s]", t.name);
	else
		snprintf(hostbuf, sizeof(hostbuf), "%s", t.name);
	free(*url);
	free(*host);
	free(*pathp);
	*host = util_xstrdup(t.name);
	*portp = (uint16_t)port;
	*pathp = path ? path : util_xstrdup("");
	if (port == 443)
		*url = util_xasprintf("https://%s%s", hostbuf, *pathp);
	else
		*url = util_xasprintf("https://%s:%lu%s", hostbuf, port, *pathp);
	return true;
}

static bool api_url_parse(const char *s, struct policy_github_app *a,
			  const char **why)
{
	return https_url_parse(s, &a->api, &a->api_host, &a->api_port, &a->api_path, why);
}

/* ---- secrets.NAME.oauth ----------------------------------------------- */

static void parse_oauth_token_url(struct ctx *c, json_t *v, const char *path)
{
	struct policy_oauth *o = c->cur->oauth;
	const char *why = "expected a string";

	if (!json_is_string(v) ||
	    !https_url_parse(json_string_value(v), &o->token_url, &o->host, &o->port, &o->path,
			     &why))
		err_add(c, path, "expected an https:// URL of the token endpoint: %s", why);
	else if (!*o->path)
		err_add(c, path, "expected the token endpoint's path (https://HOST/oauth/token)");
}

static void parse_oauth_client_id(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	size_t i;

	for (i = 0; s && s[i]; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			break;
	if (!s || !*s || s[i] || i > 512)
		err_add(c, path, "expected 1 to 512 visible ASCII characters");
	else
		set_str(&c->cur->oauth->client_id, v);
}

static void parse_oauth_scope(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	size_t i;

	if (json_is_null(v))
		return;
	for (i = 0; s && s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			break;
	if (!s || s[i] || i > 1024)
		err_add(c, path, "expected up to 1024 printable ASCII characters or null");
	else
		set_str(&c->cur->oauth->scope, v);
}

static void oauth_env(struct ctx *c, json_t *v, const char *path, char **out)
{
	if (json_is_null(v))
		return;
	if (!json_is_string(v) || !env_name_ok(json_string_value(v)))
		err_add(c, path, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*) or null");
	else
		set_str(out, v);
}

static void parse_oauth_cs_env(struct ctx *c, json_t *v, const char *path)
{
	oauth_env(c, v, path, &c->cur->oauth->client_secret_from_env);
}

static void parse_oauth_cs_file(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		file_value(c, v, path, true, &c->cur->oauth->client_secret_from_file);
}

static void parse_oauth_rt_env(struct ctx *c, json_t *v, const char *path)
{
	oauth_env(c, v, path, &c->cur->oauth->refresh_token_from_env);
}

static void parse_oauth_rt_file(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_null(v))
		file_value(c, v, path, true, &c->cur->oauth->refresh_token_from_file);
}

static const struct field oauth_fields[] = {
	{ "token_url", parse_oauth_token_url },
	{ "client_id", parse_oauth_client_id },
	{ "client_secret_from_env", parse_oauth_cs_env },
	{ "client_secret_from_file", parse_oauth_cs_file },
	{ "refresh_token_from_env", parse_oauth_rt_env },
	{ "refresh_token_from_file", parse_oauth_rt_file },
	{ "scope", parse_oauth_scope },
};

static void parse_secret_oauth(struct ctx *c, json_t *v, const char *path)
{
	struct policy_oauth *o;

	if (json_is_null(v))
		return;
	o = c->cur->oauth = util_xcalloc(1, sizeof(*o));
	if (!walk_object(c, v, path, oauth_fields, ARRAY_SIZE(oauth_fields)))
		return;
	if (!json_object_get(v, "token_url"))
		err_missing(c, path, "token_url", "the token endpoint to refresh at");
	if (!json_object_get(v, "client_id"))
		err_missing(c, path, "client_id", "the OAuth client's id");
	if (o->client_secret_from_env && o->client_secret_from_file)
		err_add(c, path, "give one of client_secret_from_env and "
				 "client_secret_from_file, not both");
	if (o->refresh_token_from_env && o->refresh_token_from_file)
		err_add(c, path, "give one of refresh_token_from_env and "
				 "refresh_token_from_file, not both");
	else if (!o->refresh_token_from_env && !o->refresh_token_from_file)
		err_add(c, path, "one of refresh_token_from_env and refresh_token_from_file "
				 "is required");
}

static bool app_id_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_APP_ID_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

static void parse_app_id(struct ctx *c, json_t *v, const char *path)
{
	struct policy_github_app *a = c->p->git_github_app;

	c->app_has_id = true;
	if (json_is_integer(v) && json_integer_value(v) >= 1) {
		free(a->app_id);
		a->app_id = util_xasprintf("%" JSON_INTEGER_FORMAT,
					   json_integer_value(v));
	} else if (json_is_string(v) && app_id_ok(json_string_value(v))) {
		set_str(&a->app_id, v);
	} else {
		err_add(c, path, "expected the App's client id (1 to 128 "
				 "characters of A-Z a-z 0-9 . _ -) or its "
				 "numeric id (a positive integer)");
	}
}

static void parse_app_installation(struct ctx *c, json_t *v, const char *path)
{
	c->app_has_installation = true;
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		err_add(c, path, "expected a positive integer");
	else
		c->p->git_github_app->installation_id =
			(uint64_t)json_integer_value(v);
}

static void parse_app_key(struct ctx *c, json_t *v, const char *path)
{
	c->app_has_key = true;
	file_value(c, v, path, false, &c->p->git_github_app->private_key_file);
}

static void parse_app_api(struct ctx *c, json_t *v, const char *path)
{
	const char *why = NULL;

	if (!json_is_string(v))
		err_add(c, path, "expected an https URL such as \"%s\"",
			DEFAULT_GITHUB_API);
	else if (!api_url_parse(json_string_value(v), c->p->git_github_app, &why))
		err_add(c, path, "expected an https URL such as \"%s\": %s",
			DEFAULT_GITHUB_API, why);
}

static void parse_app_ca(struct ctx *c, json_t *v, const char *path)
{
	file_value(c, v, path, true, &c->p->git_github_app->ca);
}

/* GitHub's permission names: snake_case ("pull_requests"). The list is
 * GitHub's to extend, so any such name is accepted; GitHub refuses a mint
 * that asks for one it does not know, and the session does not start. */
static bool gh_permission_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_GH_PERMISSION_MAX || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	for (i = 1; i < n; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && !is_digit(s[i]) && s[i] != '_')
			return false;
	return true;
}

static int cmp_gh_permission(const void *a, const void *b)
{
	const struct policy_gh_permission *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void parse_app_permissions(struct ctx *c, json_t *v, const char *path)
{
	struct policy_github_app *a = c->p->git_github_app;
	const char *name;
	json_t *level;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object of permission names to "
				 "\"read\", \"write\" or \"admin\"");
		return;
	}
	a->permissions = util_xcalloc(json_object_size(v) ? json_object_size(v) : 1,
				      sizeof(*a->permissions));
	json_object_foreach(v, name, level) {
		char *kp = path_key(path, name);
		int l = enum_find(gh_access_names, ARRAY_SIZE(gh_access_names),
				  json_string_value(level));

		if (!gh_permission_name_ok(name)) {
			err_add(c, kp, "invalid permission name: expected "
				       "GitHub's name ([a-z][a-z0-9_]*, e.g. "
				       "\"pull_requests\")");
		} else if (l < 0) {
			err_add(c, kp, "expected \"read\", \"write\" or \"admin\"");
		} else {
			a->permissions[a->npermissions].name = util_xstrdup(name);
			a->permissions[a->npermissions].level =
				(enum policy_gh_access)l;
			a->npermissions++;
		}
		free(kp);
	}
	qsort(a->permissions, a->npermissions, sizeof(*a->permissions),
	      cmp_gh_permission);
}

static const struct field app_fields[] = {
	{ "app_id", parse_app_id },
	{ "installation_id", parse_app_installation },
	{ "private_key_file", parse_app_key },
	{ "api", parse_app_api },
	{ "ca", parse_app_ca },
	{ "permissions", parse_app_permissions },
};

static void app_free(struct policy_github_app *a)
{
	size_t i;

	if (!a)
		return;
	free(a->app_id);
	free(a->private_key_file);
	free(a->api);
	free(a->api_host);
	free(a->api_path);
	free(a->ca);
	for (i = 0; i < a->npermissions; i++)
		free(a->permissions[i].name);
	free(a->permissions);
	free(a);
}

static void parse_git_app(struct ctx *c, json_t *v, const char *path)
{
	const char *why = NULL;
	struct policy_github_app *a;

	if (json_is_null(v))
		return;
	c->git_has_app = true;
	a = util_xcalloc(1, sizeof(*a));
	ASSERT(api_url_parse(DEFAULT_GITHUB_API, a, &why));
	app_free(c->p->git_github_app);
	c->p->git_github_app = a;
	c->app_has_id = c->app_has_installation = c->app_has_key = false;
	if (!walk_object(c, v, path, app_fields, ARRAY_SIZE(app_fields)))
		return;
	if (!c->app_has_id)
		err_missing(c, path, "app_id", NULL);
	if (!c->app_has_installation)
		err_missing(c, path, "installation_id", NULL);
	if (!c->app_has_key)
		err_missing(c, path, "private_key_file", NULL);
	/* The token is minted for the session repository (and git.repos
	 * entries of its owner): without one there is nothing to scope it
	 * to. */
	if (c->session_repo_ok && !c->session_host[0])
		err_add(c, path, "needs session.repo: the token is minted for "
				 "the session's repository");
}

#define DEFAULT_GITLAB_API "https://gitlab.com"

static void parse_glmint_api(struct ctx *c, json_t *v, const char *path)
{
	struct policy_gitlab_mint *m = c->p->git_gitlab_mint;
	struct policy_github_app tmp = { 0 };
	const char *why = NULL;

	if (!json_is_string(v) || !api_url_parse(json_string_value(v), &tmp, &why)) {
		err_add(c, path, "expected an https URL such as \"%s\"%s%s", DEFAULT_GITLAB_API,
			why ? ": " : "", why ? why : "");
		return;
	}
	free(m->api);
	free(m->api_host);
	free(m->api_path);
	m->api = tmp.api;
	m->api_host = tmp.api_host;
	m->api_port = tmp.api_port;
	m->api_path = tmp.api_path;
}

static void parse_glmint_token_env(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v);

	if (json_is_null(v))
		return;
	c->glmint_has_token_env = true;
	if (!s || !env_name_ok(s))
		err_add(c, path, "expected the name of the supervisor's environment variable "
				 "that holds the group or instance token");
	else
		set_str(&c->p->git_gitlab_mint->token_env, v);
}

static void parse_glmint_token_file(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	c->glmint_has_token_file = true;
	file_value(c, v, path, false, &c->p->git_gitlab_mint->token_file);
}

static void parse_glmint_expires(struct ctx *c, json_t *v, const char *path)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > (json_int_t)POLICY_GITLAB_EXPIRES_MAX)
		err_add(c, path, "expected minutes, 1 to %u", POLICY_GITLAB_EXPIRES_MAX);
	else
		c->p->git_gitlab_mint->expires_minutes = (uint32_t)json_integer_value(v);
}

static void parse_glmint_ca(struct ctx *c, json_t *v, const char *path)
{
	file_value(c, v, path, true, &c->p->git_gitlab_mint->ca);
}

static const struct field glmint_fields[] = {
	{ "api", parse_glmint_api },
	{ "token_env", parse_glmint_token_env },
	{ "token_file", parse_glmint_token_file },
	{ "expires_minutes", parse_glmint_expires },
	{ "ca", parse_glmint_ca },
};

static void glmint_free(struct policy_gitlab_mint *m)
{
	if (!m)
		return;
	free(m->api);
	free(m->api_host);
	free(m->api_path);
	free(m->token_env);
	free(m->token_file);
	free(m->ca);
	free(m);
}

static void parse_git_glmint(struct ctx *c, json_t *v, const char *path)
{
	struct policy_gitlab_mint *m;
	struct policy_github_app tmp = { 0 };
	const char *why = NULL;

	if (json_is_null(v))
		return;
	c->git_has_glmint = true;
	m = util_xcalloc(1, sizeof(*m));
	ASSERT(api_url_parse(DEFAULT_GITLAB_API, &tmp, &why));
	m->api = tmp.api;
	m->api_host = tmp.api_host;
	m->api_port = tmp.api_port;
	m->api_path = tmp.api_path;
	m->expires_minutes = 60;
	glmint_free(c->p->git_gitlab_mint);
	c->p->git_gitlab_mint = m;
	c->glmint_has_token_env = c->glmint_has_token_file = false;
	if (!walk_object(c, v, path, glmint_fields, ARRAY_SIZE(glmint_fields)))
		return;
	if (c->glmint_has_token_env == c->glmint_has_token_file)
		err_add(c, path, "give one of token_env and token_file (the group or instance "
				 "token the supervisor mints with)");
	if (c->gp->api_id != GITPROV_API_ENCODED_PATH)
		err_add(c, path, "mints GitLab project access tokens: needs git.provider \"gitlab\"");
	if (c->session_repo_ok && !c->session_host[0])
		err_add(c, path, "needs session.repo: the token is minted for the session's project");
}

static void parse_git_token_env(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &token_env_list, c->p->git_token_env,
		 c->p->ngit_token_env);
}

static void parse_git_api_allow(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &api_allow_list, c->p->git_api_allow,
		 c->p->ngit_api_allow);
}

static void parse_git_ssh(struct ctx *c, json_t *v, const char *path)
{
	parse_bool(c, v, path, &c->p->git_ssh);
}

static void parse_git_provider(struct ctx *c, json_t *v, const char *path)
{
	enum gitprov_id id;

	if (!gitprov_from_name(json_string_value(v), &id)) {
		err_add(c, path, "expected %s", gitprov_names());
		return;
	}
	c->p->git_provider = id;
}

static int cmp_project_id(const void *a, const void *b)
{
	uint64_t x = ((const struct policy_git_project_id *)a)->id;
	uint64_t y = ((const struct policy_git_project_id *)b)->id;

	return x < y ? -1 : x > y;
}

/* git.project_ids: {"123": "group/sub/project"}: GitLab's numeric ids of
 * projects, so that /api/v4/projects/123/... can be bound. */
static void parse_git_project_ids(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	const char *key;
	json_t *el;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object of numeric project ids to \"GROUP/.../PROJECT\"");
		return;
	}
	if (json_object_size(v) > 0 && c->gp->api_id != GITPROV_API_ENCODED_PATH) {
		err_add(c, path, "only for git.provider \"gitlab\" (numeric project ids)");
		return;
	}
	p->git_project_ids = util_xcalloc(json_object_size(v) + 1, sizeof(*p->git_project_ids));
	json_object_foreach(v, key, el) {
		char *kp = path_key(path, key), why[256];
		struct repo_ref r;
		uint64_t id = 0;
		size_t i, n = strlen(key);
		bool ok = n >= 1 && n <= 19 && key[0] != '0';

		for (i = 0; ok && i < n; i++)
			ok = is_digit(key[i]);
		if (ok)
			id = strtoull(key, NULL, 10);
		if (!ok || id == 0) {
			err_add(c, kp, "a project id is a decimal number >= 1 without leading zeros");
		} else if (!json_is_string(el)) {
			err_add(c, kp, "expected \"GROUP/.../PROJECT\"");
		} else if (!repo_parse(json_string_value(el), false, c->gp, NULL, NULL, &r, why,
				       sizeof(why))) {
			err_add(c, kp, "%s", why);
		} else {
			p->git_project_ids[p->ngit_project_ids].id = id;
			p->git_project_ids[p->ngit_project_ids].repo =
				util_xasprintf("%s/%s", r.owner, r.repo);
			p->ngit_project_ids++;
		}
		free(kp);
	}
	qsort(p->git_project_ids, p->ngit_project_ids, sizeof(*p->git_project_ids),
	      cmp_project_id);
}

static const struct field git_fields[] = {
	{ "provider", parse_git_provider },
	{ "project_ids", parse_git_project_ids },
	{ "hosts", parse_git_hosts },
	{ "api_hosts", parse_git_api_hosts },
	{ "repos", parse_git_repos },
	{ "credential", parse_git_credential },
	{ "github_app", parse_git_app },
	{ "gitlab_mint", parse_git_glmint },
	{ "token_env", parse_git_token_env },
	{ "api_allow", parse_git_api_allow },
	{ "ssh", parse_git_ssh },
};

static void parse_git(struct ctx *c, json_t *v, const char *path)
{
	if (!walk_object(c, v, path, git_fields, ARRAY_SIZE(git_fields)))
		return;
	if (c->git_has_credential + c->git_has_app + c->git_has_glmint > 1)
		err_add(c, path, "give only one of credential, github_app and gitlab_mint");
	if (c->git_has_app && c->p->git_provider != GITPROV_GITHUB)
		err_add(c, path, "github_app mints GitHub tokens: git.provider is \"%s\"",
			gitprov_get(c->p->git_provider)->name);
}

/* ---- spend ------------------------------------------------------------- */

static void parse_spend_cap(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;

	if (json_is_null(v)) {
		p->spend_has_cap = false;
	} else if (json_is_number(v) && json_number_value(v) >= 0) {
		p->spend_has_cap = true;
		p->spend_cap_usd = real_canon(json_number_value(v));
	} else {
		err_add(c, path, "expected a number >= 0 (USD) or null (no cap)");
	}
}

/* Is there a password in the libpq URI @s: "user:password@" in the
 * authority or a "password" parameter? */
static bool pg_uri_has_password(const char *s)
{
	const char *auth = strstr(s, "://") + 3, *q = strchr(auth, '?');
	size_t alen = strcspn(auth, "/?");
	const char *at = NULL, *p;

	for (p = auth; p < auth + alen; p++)
		if (*p == '@')
			at = p;
	if (at && memchr(auth, ':', (size_t)(at - auth)))
		return true;
	while (q) {
		q++;
		if (strncasecmp(q, "password=", 9) == 0)
			return true;
		q = strchr(q, '&');
	}
	return false;
}

/* Why the libpq URI @s is refused, or NULL. The policy is a file many
 * people read and its text is printed by check --canonical: a password
 * does not belong in it. */
static const char *pg_uri_refused(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return "a PostgreSQL URI has no spaces, control or "
			       "non-ASCII characters";
	if (pg_uri_has_password(s))
		return "a password does not belong in the policy: give it in "
		       "PGPASSWORD or ~/.pgpass";
	return NULL;
}

static void parse_spend_ledger(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v), *why = NULL;
	struct policy *p = c->p;
	char *clean = NULL;

	if (json_is_null(v))
		return;
	if (s && strncmp(s, "sqlite:", 7) == 0) {
		if (!fs_path_clean(s + 7, false, &clean, &why)) {
			err_add(c, path, "\"sqlite:PATH\": %s", why);
			return;
		}
		p->spend_ledger_kind = POLICY_LEDGER_SQLITE;
		p->spend_ledger = util_xasprintf("sqlite:%s", clean);
		p->spend_ledger_target = clean;
		return;
	}
	if (s && (strncmp(s, "postgresql://", 13) == 0 ||
		  strncmp(s, "postgres://", 11) == 0)) {
		why = pg_uri_refused(s);
		if (why) {
			err_add(c, path, "%s", why);
			return;
		}
		p->spend_ledger_kind = POLICY_LEDGER_POSTGRESQL;
		p->spend_ledger = util_xstrdup(s);
		p->spend_ledger_target = util_xstrdup(s);
		return;
	}
	err_add(c, path, "expected \"sqlite:/PATH\", \"postgresql://...\" "
			 "or null (this session alone, in memory)");
}

static void parse_provider_api(struct ctx *c, json_t *v, const char *path)
{
	int i = enum_find(spend_api_names, ARRAY_SIZE(spend_api_names),
			  json_string_value(v));

	c->prov_has_api = true;
	if (i < 0)
		err_add(c, path, "expected \"anthropic\" or \"openai\"");
	else
		c->cur_provider->api = (enum policy_spend_api)i;
}

static void parse_provider_hosts(struct ctx *c, json_t *v, const char *path)
{
	c->prov_has_hosts = true;
	LIST_SET(c, v, path, &provider_host_list, c->cur_provider->hosts,
		 c->cur_provider->nhosts);
}

static const struct field provider_fields[] = {
	{ "api", parse_provider_api },
	{ "hosts", parse_provider_hosts },
};

static void drop_provider(void *el)
{
	struct policy_spend_provider *pr = el;

	strv_free(pr->hosts, pr->nhosts);
}

static bool el_provider(struct ctx *c, json_t *el, const char *path, void *out)
{
	size_t before = c->errs->count;

	c->cur_provider = out;
	c->cur_provider_path = path;
	c->prov_has_api = c->prov_has_hosts = false;
	if (walk_object(c, el, path, provider_fields, ARRAY_SIZE(provider_fields))) {
		if (!c->prov_has_api)
			err_missing(c, path, "api", NULL);
		if (!c->prov_has_hosts)
			err_missing(c, path, "hosts", "a provider needs the hosts "
						      "it is metered on");
	}
	c->cur_provider = NULL;
	c->cur_provider_path = NULL;
	if (c->errs->count == before)
		return true;
	drop_provider(out);
	return false;
}

static const struct list_kind provider_list = {
	.size = sizeof(struct policy_spend_provider), .parse = el_provider,
	.drop = drop_provider,
};

static void parse_spend_providers(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &provider_list, c->p->spend_providers,
		 c->p->nspend_providers);
}

/* A model name or "prefix*": printable ASCII without space, '*' only at
 * the end. */
static bool model_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_MODEL_MAX)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f ||
		    (s[i] == '*' && i != n - 1))
			return false;
	return true;
}

/* A price in USD per million tokens, 0 to @max; null only when @nullable.
 * cache_write may reach 1.25 x the largest input price, the default it
 * takes from input, so that every canonical form reads back. */
static void price_value(struct ctx *c, json_t *v, const char *path,
			double *out, bool *given, bool nullable, double max)
{
	double d = json_number_value(v);

	*given = !(nullable && json_is_null(v));
	if (!*given)
		return;
	if (!json_is_number(v) || d < 0 || d > max)
		err_add(c, path, "expected a number from 0 to %.0f (USD per "
				 "million tokens)%s", max, nullable ? " or null" : "");
	else
		*out = real_canon(d);
}

static void parse_price_input(struct ctx *c, json_t *v, const char *path)
{
	price_value(c, v, path, &c->cur_price->input, &c->price_has_input, false,
		    POLICY_PRICE_MAX);
}

static void parse_price_output(struct ctx *c, json_t *v, const char *path)
{
	price_value(c, v, path, &c->cur_price->output, &c->price_has_output, false,
		    POLICY_PRICE_MAX);
}

static void parse_price_cw(struct ctx *c, json_t *v, const char *path)
{
	price_value(c, v, path, &c->cur_price->cache_write, &c->price_has_cw, true,
		    POLICY_CACHE_WRITE_FACTOR * POLICY_PRICE_MAX);
}

static void parse_price_cr(struct ctx *c, json_t *v, const char *path)
{
	price_value(c, v, path, &c->cur_price->cache_read, &c->price_has_cr, true,
		    POLICY_PRICE_MAX);
}

static const struct field price_fields[] = {
	{ "input", parse_price_input },
	{ "output", parse_price_output },
	{ "cache_write", parse_price_cw },
	{ "cache_read", parse_price_cr },
};

static int cmp_price(const void *a, const void *b)
{
	const struct policy_price *x = a, *y = b;

	return strcmp(x->model, y->model);
}

static void parse_spend_prices(struct ctx *c, json_t *v, const char *path)
{
	struct policy *p = c->p;
	const char *model;
	json_t *entry;

	if (!json_is_object(v)) {
		err_add(c, path, "expected an object of model names to prices");
		return;
	}
	p->spend_prices = util_xcalloc(json_object_size(v) ? json_object_size(v) : 1,
				       sizeof(*p->spend_prices));
	json_object_foreach(v, model, entry) {
		char *kp = path_key(path, model);
		struct policy_price *pr = &p->spend_prices[p->nspend_prices];
		size_t before = c->errs->count;

		memset(pr, 0, sizeof(*pr));
		c->cur_price = pr;
		c->price_has_input = c->price_has_output = false;
		c->price_has_cw = c->price_has_cr = false;
		if (!model_ok(model))
			err_add(c, kp, "invalid model name: expected 1 to 128 "
				       "printable ASCII characters without "
				       "spaces, '*' only at the end");
		if (walk_object(c, entry, kp, price_fields, ARRAY_SIZE(price_fields))) {
			if (!c->price_has_input)
				err_missing(c, kp, "input", NULL);
			if (!c->price_has_output)
				err_missing(c, kp, "output", NULL);
		}
		if (c->errs->count == before) {
			size_t n = strlen(model);

			pr->model = util_xstrdup(model);
			pr->is_prefix = model[n - 1] == '*';
			if (!c->price_has_cw)
				pr->cache_write = real_canon(POLICY_CACHE_WRITE_FACTOR * pr->input);
			if (!c->price_has_cr)
				pr->cache_read = real_canon(POLICY_CACHE_READ_FACTOR * pr->input);
			p->nspend_prices++;
		}
		c->cur_price = NULL;
		free(kp);
	}
	qsort(p->spend_prices, p->nspend_prices, sizeof(*p->spend_prices),
	      cmp_price);
}

static void parse_spend_parent(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v);

	if (json_is_null(v))
		return;
	if (!s || !policy_session_id_valid(s)) {
		err_add(c, path, SESSION_ID_MSG " (a session id), or null");
		return;
	}
	if (c->session_id && strcmp(c->session_id, s) == 0) {
		err_add(c, path, "a session cannot be its own parent");
		return;
	}
	/* The parent must exist in the same ledger, and a session's memory
	 * holds no other session. */
	if (!c->spend_ledger_set) {
		err_add(c, path, "needs spend.ledger: the parent session must "
				 "exist in the same ledger");
		return;
	}
	set_str(&c->p->spend_parent, v);
}

static void parse_spend_on_exhausted(struct ctx *c, json_t *v, const char *path)
{
	int i = enum_find(on_exhausted_names, ARRAY_SIZE(on_exhausted_names),
			  json_string_value(v));

	if (i < 0)
		err_add(c, path, "expected \"block\" or \"stop\"");
	else
		c->p->spend_on_exhausted = (enum policy_on_exhausted)i;
}

static void parse_uint_range(struct ctx *c, json_t *v, const char *path,
			     uint64_t max, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    (uint64_t)json_integer_value(v) > max)
		err_add(c, path, "expected an integer from 1 to %llu",
			(unsigned long long)max);
	else
		*out = (uint64_t)json_integer_value(v);
}

static void parse_spend_max_body(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_range(c, v, path, POLICY_BODY_MAX, &c->p->spend_max_body_bytes);
}

static void parse_spend_max_output(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_range(c, v, path, POLICY_OUTPUT_TOKENS_MAX,
			 &c->p->spend_default_max_output_tokens);
}

/* A spend.pass prefix: a clean path, whole segments. */
static bool el_spend_pass(struct ctx *c, json_t *el, const char *path, void *out)
{
	const char *why = NULL;
	char *clean;

	if (!url_path_clean(json_string_value(el), false, &clean, &why)) {
		err_add(c, path, "%s", why);
		return false;
	}
	if (!clean[0]) {
		free(clean);
		err_add(c, path, "\"/\" would pass every request unmetered: list "
				 "the prefixes to pass (e.g. \"/v1/messages/count_tokens\")");
		return false;
	}
	*(char **)out = clean;
	return true;
}

static const struct list_kind spend_pass_list = STR_LIST(el_spend_pass, true);

static void parse_spend_pass(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &spend_pass_list, c->p->spend_pass, c->p->nspend_pass);
}

static void parse_spend_server_state(struct ctx *c, json_t *v, const char *path)
{
	int i = enum_find(server_state_names, ARRAY_SIZE(server_state_names),
			  json_string_value(v));

	if (i < 0)
		err_add(c, path, "expected \"refuse\" or \"allow\"");
	else
		c->p->spend_server_state = (enum policy_server_state)i;
}

static void parse_spend_server_state_reserve(struct ctx *c, json_t *v,
					     const char *path)
{
	struct policy *p = c->p;

	if (json_is_null(v)) {
		p->spend_has_server_state_reserve = false;
	} else if (json_is_number(v) && json_number_value(v) >= 0 &&
		   json_number_value(v) <= 1e9) {
		p->spend_has_server_state_reserve = true;
		p->spend_server_state_reserve_usd = real_canon(json_number_value(v));
	} else {
		err_add(c, path, "expected a number of USD from 0 to 1e9, or null");
	}
}

static void parse_spend_ledger_timeout(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_range(c, v, path, POLICY_LEDGER_TIMEOUT_MAX,
			 &c->p->spend_ledger_timeout_ms);
}

static const struct field spend_fields[] = {
	{ "cap_usd", parse_spend_cap },
	{ "ledger", parse_spend_ledger },
	{ "providers", parse_spend_providers },
	{ "prices", parse_spend_prices },
	{ "parent", parse_spend_parent },
	{ "on_exhausted", parse_spend_on_exhausted },
	{ "max_body_bytes", parse_spend_max_body },
	{ "default_max_output_tokens", parse_spend_max_output },
	{ "pass", parse_spend_pass },
	{ "server_state", parse_spend_server_state },
	{ "server_state_reserve_usd", parse_spend_server_state_reserve },
	{ "ledger_timeout_ms", parse_spend_ledger_timeout },
};

static void parse_spend(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, spend_fields, ARRAY_SIZE(spend_fields));
	/* "allow" is a bound only with the amount it reserves. */
	if (json_is_object(v) &&
	    c->p->spend_server_state == POLICY_SERVER_STATE_ALLOW &&
	    !c->p->spend_has_server_state_reserve &&
	    !json_object_get(v, "server_state_reserve_usd"))
		err_add(c, "spend.server_state_reserve_usd", "needed when "
			"spend.server_state is \"allow\": the USD reserved on top "
			"for the input the provider adds from stored state");
	else if (json_is_object(v) &&
		 c->p->spend_server_state == POLICY_SERVER_STATE_ALLOW &&
		 !c->p->spend_has_server_state_reserve &&
		 json_is_null(json_object_get(v, "server_state_reserve_usd")))
		err_add(c, "spend.server_state_reserve_usd", "must be a number "
			"when spend.server_state is \"allow\"");
}

/* ---- env and fs -------------------------------------------------------- */

static void parse_env_pass(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &env_pattern_list, c->p->env_pass, c->p->nenv_pass);
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
		} else if (!c->token_env_explicit &&
			   json_object_get(c->token_envs, name)) {
			/* An explicit git.token_env reports the clash
			 * itself. */
			err_add(c, kp, "%s is also a git.token_env variable (the "
				       "git token's placeholder)", q);
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
	LIST_SET(c, v, path, &fs_rw_hide_list, c->p->fs_rw, c->p->nfs_rw);
}

static void parse_fs_ro(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &fs_ro_list, c->p->fs_ro, c->p->nfs_ro);
}

static void parse_fs_hide(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &fs_rw_hide_list, c->p->fs_hide, c->p->nfs_hide);
}

static void parse_fs_protect(struct ctx *c, json_t *v, const char *path)
{
	LIST_SET(c, v, path, &fs_rel_list, c->p->fs_protect, c->p->nfs_protect);
}

static const struct field fs_fields[] = {
	{ "rw", parse_fs_rw },
	{ "ro", parse_fs_ro },
	{ "hide", parse_fs_hide },
	{ "protect", parse_fs_protect },
};

static void parse_fs(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, fs_fields, ARRAY_SIZE(fs_fields));
}

/* receipts: how lines are signed (docs/RECEIPTS.md, "Checkpoints"). */
static void parse_receipts_sign(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v);

	if (s && strcmp(s, "line") == 0)
		c->p->receipts_checkpoint = false;
	else if (s && strcmp(s, "checkpoint") == 0)
		c->p->receipts_checkpoint = true;
	else
		err_add(c, path, "expected \"line\" or \"checkpoint\"");
}

static void parse_receipts_checkpoint_ms(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_range(c, v, path, POLICY_CHECKPOINT_MS_MAX,
			 &c->p->receipts_checkpoint_ms);
}

static const struct field receipts_fields[] = {
	{ "sign", parse_receipts_sign },
	{ "checkpoint_ms", parse_receipts_checkpoint_ms },
};

static void parse_receipts(struct ctx *c, json_t *v, const char *path)
{
	walk_object(c, v, path, receipts_fields, ARRAY_SIZE(receipts_fields));
}

/* ---- publish ----------------------------------------------------------- */

static const char *const publish_protocol_names[] = {
	[POLICY_PUBLISH_HTTP] = "http",
	[POLICY_PUBLISH_TCP] = "tcp",
};
static_assert(ARRAY_SIZE(publish_protocol_names) == POLICY_PUBLISH_PROTOCOL_COUNT,
	      "publish_protocol_names out of sync");

const char *policy_publish_protocol_to_string(enum policy_publish_protocol p)
{
	ASSERT((unsigned)p < POLICY_PUBLISH_PROTOCOL_COUNT);
	return publish_protocol_names[p];
}

static void parse_pub_listen(struct ctx *c, json_t *v, const char *path)
{
	c->pub_has_listen = true;
	if (!json_is_string(v) || !endpoint_parse(json_string_value(v), &c->cur_pub->listen))
		err_add(c, path, "expected \"IP:PORT\" (IPv6 as \"[ADDR]:PORT\"), "
				 "such as \"127.0.0.1:8080\"");
}

static void parse_pub_port(struct ctx *c, json_t *v, const char *path)
{
	uint64_t port = 0;

	c->pub_has_port = true;
	parse_uint_range(c, v, path, 65535, &port);
	c->cur_pub->port = (uint16_t)port;
}

static void parse_pub_protocol(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v);

	if (s && strcmp(s, "http") == 0)
		c->cur_pub->protocol = POLICY_PUBLISH_HTTP;
	else if (s && strcmp(s, "tcp") == 0)
		c->cur_pub->protocol = POLICY_PUBLISH_TCP;
	else
		err_add(c, path, "expected \"http\" or \"tcp\"");
}

static void parse_pub_auth(struct ctx *c, json_t *v, const char *path)
{
	const char *s = json_string_value(v);

	if (json_is_null(v))
		return;
	if (!s) {
		err_add(c, path, "expected the name of a secret, or null");
		return;
	}
	if (c->secrets_ok && !(c->secrets && json_object_get(c->secrets, s))) {
		char *q = quote(s);

		err_add(c, path, "%s is not a key of secrets", q);
		free(q);
		return;
	}
	set_str(&c->cur_pub->auth, v);
}

/* A cookie name: an HTTP token (RFC 6265 cookie-name). */
static bool cookie_name_ok(const char *s)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	size_t i, n = strlen(s);

	if (n == 0 || n > 128)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr(tchar, s[i])))
			return false;
	return true;
}

static void parse_pub_auth_cookie(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_null(v))
		return;
	if (!json_is_string(v) || !cookie_name_ok(json_string_value(v)))
		err_add(c, path, "expected a cookie name (1-128 token characters), or null");
	else
		set_str(&c->cur_pub->auth_cookie, v);
}

/* An integer from 1 to @max, or null (0: unlimited). */
static void parse_uint_or_null(struct ctx *c, json_t *v, const char *path,
			       uint64_t max, uint64_t *out)
{
	if (json_is_null(v))
		*out = 0;
	else if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		 (uint64_t)json_integer_value(v) > max)
		err_add(c, path, "expected an integer from 1 to %llu, or null (no limit)",
			(unsigned long long)max);
	else
		*out = (uint64_t)json_integer_value(v);
}

static void parse_pub_max_response(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_or_null(c, v, path, (uint64_t)1 << 50, &c->cur_pub->max_response_bytes);
}

static void parse_pub_rate(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_or_null(c, v, path, (uint64_t)1 << 40, &c->cur_pub->rate_bytes);
}

static void parse_pub_max_conns(struct ctx *c, json_t *v, const char *path)
{
	parse_uint_range(c, v, path, POLICY_PUBLISH_CONNS_MAX, &c->cur_pub->max_conns);
}

static void parse_pub_exposed(struct ctx *c, json_t *v, const char *path)
{
	parse_bool(c, v, path, &c->cur_pub->exposed);
}

static const struct field publish_fields[] = {
	{ "listen", parse_pub_listen },
	{ "port", parse_pub_port },
	{ "protocol", parse_pub_protocol },
	{ "auth", parse_pub_auth },
	{ "auth_cookie", parse_pub_auth_cookie },
	{ "max_response_bytes", parse_pub_max_response },
	{ "max_conns", parse_pub_max_conns },
	{ "rate_bytes", parse_pub_rate },
	{ "exposed", parse_pub_exposed },
};

static void drop_publish(void *el)
{
	struct policy_publish *pb = el;

	free(pb->auth);
	free(pb->auth_cookie);
}

static bool el_publish(struct ctx *c, json_t *el, const char *path, void *out)
{
	size_t before = c->errs->count;
	struct policy_publish *pb = out;

	pb->max_conns = POLICY_PUBLISH_CONNS_DEFAULT;
	c->cur_pub = pb;
	c->pub_has_listen = c->pub_has_port = false;
	if (walk_object(c, el, path, publish_fields, ARRAY_SIZE(publish_fields))) {
		if (!c->pub_has_listen)
			err_missing(c, path, "listen", "the address and port to listen on");
		if (!c->pub_has_port)
			err_missing(c, path, "port", "the sandbox's port to relay to");
		if (pb->auth_cookie && !pb->auth)
			err_add(c, path, "auth_cookie names the cookie that carries "
					 "auth's value: set auth too");
		if (pb->auth && pb->protocol == POLICY_PUBLISH_TCP)
			err_add(c, path, "auth needs protocol \"http\" (a tcp stream "
					 "carries no request to check)");
	}
	c->cur_pub = NULL;
	if (c->errs->count == before)
		return true;
	drop_publish(out);
	return false;
}

static const char *key_publish(const void *el, char *buf, size_t len)
{
	endpoint_format(&((const struct policy_publish *)el)->listen, buf, len);
	return buf;
}

static int cmp_publish(const void *a, const void *b)
{
	char x[ADDR_STRLEN + 8], y[ADDR_STRLEN + 8];

	key_publish(a, x, sizeof(x));
	key_publish(b, y, sizeof(y));
	return strcmp(x, y);
}

static const struct list_kind publish_list = {
	.size = sizeof(struct policy_publish), .parse = el_publish,
	.drop = drop_publish, .key = key_publish, .cmp = cmp_publish,
	.dup = "same listen as",
};

static void parse_publish(struct ctx *c, json_t *v, const char *path)
{
	if (json_is_array(v) && json_array_size(v) > POLICY_PUBLISH_MAX) {
		err_add(c, path, "at most %d entries", POLICY_PUBLISH_MAX);
		return;
	}
	LIST_SET(c, v, path, &publish_list, c->p->publish, c->p->npublish);
}

static const struct field root_fields[] = {
	{ "version", parse_version },
	{ "mode", parse_mode },
	{ "session", parse_session },
	{ "egress", parse_egress },
	{ "secrets", parse_secrets },
	{ "git", parse_git },
	{ "spend", parse_spend },
	{ "env", parse_env },
	{ "fs", parse_fs },
	{ "receipts", parse_receipts },
	{ "publish", parse_publish },
};

/* ---- pre-scan and defaults -------------------------------------------- */

/* The git token's variables and the other secrets' placeholders, for the
 * clashes check_secret_env(), el_token_env() and parse_env_set() report. */
static void prescan_token(struct ctx *c, json_t *root)
{
	json_t *git = json_object_get(root, "git");
	json_t *cred = json_object_get(git, "credential");
	json_t *app = json_object_get(git, "github_app");
	json_t *glm = json_object_get(git, "gitlab_mint");
	json_t *tenv = json_object_get(git, "token_env");
	json_t *sec = json_object_get(root, "secrets"), *s, *el;
	const char *name;
	size_t i;

	c->token_envs = seen_new();
	c->other_secret_envs = seen_new();
	c->git_credential = json_string_value(cred);
	c->git_token = c->git_credential || (app && !json_is_null(app)) ||
		       (glm && !json_is_null(glm));
	c->token_env_explicit = tenv != NULL;
	if (c->git_token && !tenv)
		for (i = 0; i < ARRAY_SIZE(default_token_env); i++)
			json_object_set_new(c->token_envs, default_token_env[i],
					    json_true());
	json_array_foreach(tenv, i, el)
		if (c->git_token && json_is_string(el))
			json_object_set_new(c->token_envs, json_string_value(el),
					    json_true());
	json_object_foreach(sec, name, s) {
		json_t *env = json_object_get(s, "env");
		const char *e = json_string_value(env);
		char *sp;

		if (!env || json_is_null(env))
			e = json_string_value(json_object_get(s, "from_env"));
		if (!e || is_git_credential(c, name) ||
		    json_object_get(c->other_secret_envs, e))
			continue;
		sp = path_key("secrets", name);
		json_object_set_new(c->other_secret_envs, e, json_string(sp));
		free(sp);
	}
}

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
	json_t *ledger = json_object_get(json_object_get(root, "spend"), "ledger");
	json_t *el;
	size_t i;

	c->secrets = json_is_object(sec) ? sec : NULL;
	c->secrets_ok = !sec || c->secrets;
	c->env_set = json_is_object(set) ? set : NULL;
	c->session_id = json_string_value(json_object_get(session, "id"));
	c->spend_ledger_set = json_is_string(ledger);

	c->git_hosts = seen_new();
	c->secret_envs = seen_new();
	c->provider_hosts = seen_new();
	c->fs_ro_seen = seen_new();
	c->fs_other_seen = seen_new();
	c->git_hosts_ok = !git || (json_is_object(git) &&
				   (!hosts || json_is_array(hosts)));
	json_array_foreach(hosts, i, el) {
		char name[HOSTNAME_MAX + 1], why[128];

		if (json_is_string(el) &&
		    exact_host_parse(json_string_value(el), "git hosts", name, why,
				     sizeof(why)))
			json_object_set_new(c->git_hosts, name, json_true());
	}

	{
		enum gitprov_id id = GITPROV_GITHUB;

		(void)gitprov_from_name(json_string_value(json_object_get(git, "provider")), &id);
		c->gp = gitprov_get(id);
	}
	c->publish_auths = seen_new();
	json_array_foreach(json_object_get(root, "publish"), i, el) {
		const char *a = json_string_value(json_object_get(el, "auth"));

		if (a)
			json_object_set_new(c->publish_auths, a, json_true());
	}

	c->session_repo_ok = !repo || json_is_null(repo);
	if (json_is_string(repo)) {
		struct repo_ref r;
		char why[256];

		if (repo_parse(json_string_value(repo), true, c->gp, NULL, NULL, &r, why,
			       sizeof(why))) {
			c->session_repo_ok = true;
			memcpy(c->session_host, r.host, sizeof(c->session_host));
		}
	}
	if (session && !json_is_object(session))
		c->session_repo_ok = false;
	prescan_token(c, root);
}

static void set_defaults(struct policy *p)
{
	p->mode = POLICY_MODE_SHADOW;
	p->ports = util_xcalloc(ARRAY_SIZE(default_ports), sizeof(*p->ports));
	memcpy(p->ports, default_ports, sizeof(default_ports));
	p->nports = ARRAY_SIZE(default_ports);
	p->env_pass = strv_dup(default_env_pass, ARRAY_SIZE(default_env_pass));
	p->nenv_pass = ARRAY_SIZE(default_env_pass);
	qsort(p->env_pass, p->nenv_pass, sizeof(char *), cmp_str);
	p->git_token_env = strv_dup(default_token_env, ARRAY_SIZE(default_token_env));
	p->ngit_token_env = ARRAY_SIZE(default_token_env);
	qsort(p->git_token_env, p->ngit_token_env, sizeof(char *), cmp_str);
	p->spend_on_exhausted = POLICY_EXHAUSTED_BLOCK;
	p->spend_max_body_bytes = POLICY_BODY_DEFAULT;
	p->spend_default_max_output_tokens = POLICY_OUTPUT_TOKENS_DEFAULT;
	p->spend_pass = strv_dup(default_spend_pass, ARRAY_SIZE(default_spend_pass));
	p->nspend_pass = ARRAY_SIZE(default_spend_pass);
	p->spend_server_state = POLICY_SERVER_STATE_REFUSE;
	p->spend_ledger_timeout_ms = POLICY_LEDGER_TIMEOUT_DEFAULT;
	p->receipts_checkpoint_ms = POLICY_CHECKPOINT_MS_DEFAULT;
}

/* ---- canonical form --------------------------------------------------- */

static json_t *jstr(const char *s)
{
	json_t *j = s ? json_string(s) : json_null();

	ASSERT(j);
	return j;
}

/* @v as an array, or null when @v is NULL and @nullable. */
static json_t *jstrv(char *const *v, size_t n, bool nullable)
{
	json_t *a;
	size_t i;

	if (nullable && !v)
		return json_null();
	a = json_array();
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

static json_t *jreal(double d)
{
	json_t *j = json_real(d);

	ASSERT(j);
	return j;
}

static json_t *egress_to_json(const struct policy *p)
{
	char buf[ADDR_STRLEN + 8];
	json_t *egress, *a;
	size_t i;

	a = json_array();
	for (i = 0; i < p->nports; i++)
		json_array_append_new(a, json_integer(p->ports[i]));
	egress = json_pack("{s:o, s:o, s:o, s:o, s:b}",
			   "allow", jrules(p->allow, p->nallow),
			   "deny", jrules(p->deny, p->ndeny), "ports", a,
			   "intercept", jrules(p->intercept, p->nintercept),
			   "transparent", p->transparent);
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
	return egress;
}

/* A secret's body fields and capture rules, in its canonical object. */
static void captured_to_json(json_t *o, const struct policy_secret *s)
{
	json_t *a;
	size_t i;

	/* absent when not given: the canonical text (and digest) of a
	 * policy without them stays what it was */
	if (s->body)
		json_object_set_new(o, "body", jstrv(s->body, s->nbody, true));
	if (!s->capture)
		return;
	a = json_array();
	for (i = 0; i < s->ncapture; i++) {
		const struct policy_capture *k = &s->capture[i];

		json_array_append_new(a, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
				"hosts", jrules(k->hosts, k->nhosts),
				"methods", jstrv(k->methods, k->nmethods, true),
				"paths", jstrv(k->paths, k->npaths, true),
				"json", jstrv(k->json, k->njson, true),
				"headers", jstrv(k->headers, k->nheaders, true),
				"expires", jstr(k->expires)));
	}
	json_object_set_new(o, "capture", a);
}

/* A secret of kind aws, from its first entry @i (the key id). */
static json_t *aws_to_json(const struct policy *p, size_t i)
{
	const struct policy_secret *s = &p->secrets[i];
	json_t *from = json_object(), *env = json_object();
	bool file = s->from_file != NULL;
	size_t k;

	for (k = i; k < p->nsecrets && p->secrets[k].aws != POLICY_AWS_NONE &&
		    strcmp(p->secrets[k].name, s->name) == 0; k++) {
		const struct policy_secret *d = &p->secrets[k];
		const char *part = aws_parts[d->aws - POLICY_AWS_KEY_ID];

		json_object_set_new(from, part, jstr(file ? d->from_file : d->from_env));
		json_object_set_new(env, part, jstr(d->env));
	}
	return json_pack("{s:s, s:o, s:o, s:o, s:o}", "kind", "aws",
			 file ? "from_file" : "from_env", from,
			 file ? "from_env" : "from_file", json_null(), "env", env,
			 "hosts", jrules(s->hosts, s->nhosts));
}

static void oauth_to_json(json_t *o, const struct policy_secret *s)
{
	const struct policy_oauth *a = s->oauth;

	if (a)
		json_object_set_new(o, "oauth", json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o}",
				"token_url", a->token_url, "client_id", a->client_id,
				"client_secret_from_env", jstr(a->client_secret_from_env),
				"client_secret_from_file", jstr(a->client_secret_from_file),
				"refresh_token_from_env", jstr(a->refresh_token_from_env),
				"refresh_token_from_file", jstr(a->refresh_token_from_file),
				"scope", jstr(a->scope)));
}

static json_t *secrets_to_json(const struct policy *p)
{
	json_t *secrets = json_object();
	size_t i;

	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_secret *s = &p->secrets[i];

		if (s->aws == POLICY_AWS_KEY_ID)
			json_object_set_new(secrets, s->name, aws_to_json(p, i));
		if (s->aws != POLICY_AWS_NONE)
			continue;

		json_object_set_new(secrets, s->name,
			json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
				  "from_env", jstr(s->from_env),
				  "from_file", jstr(s->from_file),
				  "env", jstr(s->env),
				  "prefix", jstr(s->prefix),
				  "hosts", jrules(s->hosts, s->nhosts),
				  "headers", jstrv(s->headers, s->nheaders, true),
				  "paths", jstrv(s->paths, s->npaths, true),
				  "methods", jstrv(s->methods, s->nmethods, true)));
		captured_to_json(json_object_get(secrets, s->name), s);
		oauth_to_json(json_object_get(secrets, s->name), s);
	}
	return secrets;
}

static json_t *app_to_json(const struct policy_github_app *a)
{
	json_t *perms;
	size_t i;

	if (!a)
		return json_null();
	perms = json_object();
	for (i = 0; i < a->npermissions; i++)
		json_object_set_new(perms, a->permissions[i].name,
				    jstr(policy_gh_access_to_string(a->permissions[i].level)));
	return json_pack("{s:o, s:I, s:o, s:o, s:o, s:o}",
			 "app_id", jstr(a->app_id),
			 "installation_id", (json_int_t)a->installation_id,
			 "private_key_file", jstr(a->private_key_file),
			 "api", jstr(a->api), "ca", jstr(a->ca),
			 "permissions", perms);
}

static json_t *git_to_json(const struct policy *p)
{
	char buf[HOSTNAME_MAX + 2 * POLICY_REPO_PART_MAX + 8];
	json_t *repos = json_object();
	size_t i;

	for (i = 0; i < p->ngit_repos; i++) {
		const struct policy_git_repo *g = &p->git_repos[i];
		json_t *a = json_array();


		if (g->ops & POLICY_GIT_FETCH)
			json_array_append_new(a, jstr("fetch"));
		if (g->ops & POLICY_GIT_PUSH)
			json_array_append_new(a, jstr("push"));
		git_repo_key(g->host, g->owner, g->repo, buf, sizeof(buf));
		json_object_set_new(repos, buf, a);
	}
	json_t *ids = NULL;

	/* Written only when not the default, so that the canonical form of a
	 * GitHub policy stays what it was. */
	if (p->ngit_project_ids) {
		ids = json_object();
		for (i = 0; i < p->ngit_project_ids; i++) {
			snprintf(buf, sizeof(buf), "%llu",
				 (unsigned long long)p->git_project_ids[i].id);
			json_object_set_new(ids, buf, jstr(p->git_project_ids[i].repo));
		}
	}
	json_t *glm = NULL;

	if (p->git_gitlab_mint) {
		const struct policy_gitlab_mint *m = p->git_gitlab_mint;

		glm = json_pack("{s:o, s:o, s:o, s:I, s:o}", "api", jstr(m->api), "token_env",
				jstr(m->token_env), "token_file", jstr(m->token_file),
				"expires_minutes", (json_int_t)m->expires_minutes, "ca", jstr(m->ca));
	}
	return json_pack("{s:o*, s:o*, s:o*, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}",
			 "gitlab_mint", glm,
			 "provider", p->git_provider == GITPROV_GITHUB
					     ? NULL
					     : jstr(gitprov_get(p->git_provider)->name),
			 "project_ids", ids,
			 "hosts", jstrv(p->git_hosts, p->ngit_hosts, false),
			 "api_hosts", jstrv(p->git_api_hosts, p->ngit_api_hosts, false),
			 "repos", repos,
			 "credential", jstr(p->git_credential),
			 "github_app", app_to_json(p->git_github_app),
			 "token_env", jstrv(p->git_token_env, p->ngit_token_env, false),
			 "api_allow", jstrv(p->git_api_allow, p->ngit_api_allow, false),
			 "ssh", p->git_ssh);
}

static json_t *spend_to_json(const struct policy *p)
{
	json_t *providers = json_array(), *prices = json_object();
	size_t i;

	for (i = 0; i < p->nspend_providers; i++) {
		const struct policy_spend_provider *pr = &p->spend_providers[i];

		json_array_append_new(providers,
			json_pack("{s:s, s:o}",
				  "api", policy_spend_api_to_string(pr->api),
				  "hosts", jstrv(pr->hosts, pr->nhosts, false)));
	}
	for (i = 0; i < p->nspend_prices; i++) {
		const struct policy_price *pr = &p->spend_prices[i];

		json_object_set_new(prices, pr->model,
			json_pack("{s:o, s:o, s:o, s:o}",
				  "input", jreal(pr->input),
				  "output", jreal(pr->output),
				  "cache_write", jreal(pr->cache_write),
				  "cache_read", jreal(pr->cache_read)));
	}
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:I, s:o, s:s, s:o, s:I}",
			 "cap_usd", p->spend_has_cap ? jreal(p->spend_cap_usd)
						     : json_null(),
			 "ledger", jstr(p->spend_ledger),
			 "providers", providers, "prices", prices,
			 "parent", jstr(p->spend_parent),
			 "on_exhausted",
			 policy_on_exhausted_to_string(p->spend_on_exhausted),
			 "max_body_bytes", (json_int_t)p->spend_max_body_bytes,
			 "default_max_output_tokens",
			 (json_int_t)p->spend_default_max_output_tokens,
			 "pass", jstrv(p->spend_pass, p->nspend_pass, false),
			 "server_state",
			 policy_server_state_to_string(p->spend_server_state),
			 "server_state_reserve_usd",
			 p->spend_has_server_state_reserve
				 ? jreal(p->spend_server_state_reserve_usd) : json_null(),
			 "ledger_timeout_ms", (json_int_t)p->spend_ledger_timeout_ms);
}

static json_t *publish_to_json(const struct policy *p)
{
	json_t *a = json_array();
	char buf[ADDR_STRLEN + 8];
	size_t i;

	for (i = 0; i < p->npublish; i++) {
		const struct policy_publish *pb = &p->publish[i];
		json_t *o;

		endpoint_format(&pb->listen, buf, sizeof(buf));
		o = json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:I, s:o, s:b}",
			      "listen", buf, "port", (int)pb->port,
			      "protocol", policy_publish_protocol_to_string(pb->protocol),
			      "auth", jstr(pb->auth), "auth_cookie", jstr(pb->auth_cookie),
			      "max_response_bytes", pb->max_response_bytes
				      ? json_integer((json_int_t)pb->max_response_bytes)
				      : json_null(),
			      "max_conns", (json_int_t)pb->max_conns,
			      "rate_bytes", pb->rate_bytes
				      ? json_integer((json_int_t)pb->rate_bytes)
				      : json_null(),
			      "exposed", pb->exposed);
		ASSERT(o);
		json_array_append_new(a, o);
	}
	return a;
}

/* The effective policy as JSON; every key of the schema is present. */
static json_t *policy_to_json(const struct policy *p)
{
	json_t *env, *set, *j;
	size_t i;

	set = json_object();
	for (i = 0; i < p->nenv_set; i++)
		json_object_set_new(set, p->env_set_names[i],
				    jstr(p->env_set_values[i]));
	env = json_pack("{s:o, s:o}",
			"pass", jstrv(p->env_pass, p->nenv_pass, false),
			"set", set);

	j = json_pack("{s:i, s:s, s:{s:o, s:o}, s:o, s:o, s:o, s:o, s:o,"
		      " s:{s:o, s:o, s:o, s:o}}",
		      "version", 1,
		      "mode", policy_mode_to_string(p->mode),
		      "session", "id", jstr(p->session_id),
		      "repo", jstr(p->session_repo),
		      "egress", egress_to_json(p),
		      "secrets", secrets_to_json(p),
		      "git", git_to_json(p),
		      "spend", spend_to_json(p),
		      "env", env,
		      "fs", "rw", jstrv(p->fs_rw, p->nfs_rw, false),
		      "ro", jstrv(p->fs_ro, p->nfs_ro, false),
		      "hide", jstrv(p->fs_hide, p->nfs_hide, false),
		      "protect", jstrv(p->fs_protect, p->nfs_protect, false));
	ASSERT(j);
	ASSERT(json_object_set_new(j, "receipts",
				   json_pack("{s:s, s:I}", "sign",
					     p->receipts_checkpoint ? "checkpoint" : "line",
					     "checkpoint_ms",
					     (json_int_t)p->receipts_checkpoint_ms)) == 0);
	json_object_set_new(j, "publish", publish_to_json(p));
	return j;
}

/* Fills p->canonical and p->digest. */
static void policy_seal(struct policy *p)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	json_t *j = policy_to_json(p);
	int ok;

	p->canonical = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS |
				     JSON_REAL_PRECISION(POLICY_REAL_DIGITS));
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
	if (p->git_gitlab_mint && p->git_gitlab_mint->token_env &&
	    policy_env_passes(p, p->git_gitlab_mint->token_env))
		err_add(&c, "git.gitlab_mint.token_env", "%s is passed by env.pass: the agent "
			"would hold the group token", p->git_gitlab_mint->token_env);
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
	json_decref(c.token_envs);
	json_decref(c.other_secret_envs);
	json_decref(c.provider_hosts);
	json_decref(c.fs_ro_seen);
	json_decref(c.fs_other_seen);
	json_decref(c.publish_auths);
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
	size_t i, j;

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
	free(p->intercept);
	for (i = 0; i < p->nsecrets; i++) {
		struct policy_secret *s = &p->secrets[i];

		free(s->name);
		free(s->from_env);
		free(s->from_file);
		free(s->env);
		free(s->prefix);
		free(s->hosts);
		strv_free(s->headers, s->nheaders);
		strv_free(s->paths, s->npaths);
		strv_free(s->methods, s->nmethods);
		strv_free(s->body, s->nbody);
		for (j = 0; j < s->ncapture; j++) {
			free(s->capture[j].hosts);
			strv_free(s->capture[j].methods, s->capture[j].nmethods);
			strv_free(s->capture[j].paths, s->capture[j].npaths);
			strv_free(s->capture[j].json, s->capture[j].njson);
			strv_free(s->capture[j].headers, s->capture[j].nheaders);
			free(s->capture[j].expires);
		}
		free(s->capture);
		if (s->oauth) {
			free(s->oauth->token_url);
			free(s->oauth->host);
			free(s->oauth->path);
			free(s->oauth->client_id);
			free(s->oauth->client_secret_from_env);
			free(s->oauth->client_secret_from_file);
			free(s->oauth->refresh_token_from_env);
			free(s->oauth->refresh_token_from_file);
			free(s->oauth->scope);
			free(s->oauth);
		}
	}
	free(p->secrets);
	strv_free(p->git_hosts, p->ngit_hosts);
	strv_free(p->git_api_hosts, p->ngit_api_hosts);
	for (i = 0; i < p->ngit_repos; i++) {
		free(p->git_repos[i].host);
		free(p->git_repos[i].owner);
		free(p->git_repos[i].repo);
	}
	free(p->git_repos);
	for (i = 0; i < p->ngit_project_ids; i++)
		free(p->git_project_ids[i].repo);
	free(p->git_project_ids);
	glmint_free(p->git_gitlab_mint);
	free(p->git_credential);
	app_free(p->git_github_app);
	strv_free(p->git_token_env, p->ngit_token_env);
	strv_free(p->git_api_allow, p->ngit_api_allow);
	free(p->spend_ledger);
	free(p->spend_ledger_target);
	list_free(&provider_list, p->spend_providers, p->nspend_providers);
	for (i = 0; i < p->nspend_prices; i++)
		free(p->spend_prices[i].model);
	free(p->spend_prices);
	free(p->spend_parent);
	strv_free(p->spend_pass, p->nspend_pass);
	strv_free(p->env_pass, p->nenv_pass);
	strv_free(p->env_set_names, p->nenv_set);
	strv_free(p->env_set_values, p->nenv_set);
	strv_free(p->fs_rw, p->nfs_rw);
	strv_free(p->fs_ro, p->nfs_ro);
	strv_free(p->fs_hide, p->nfs_hide);
	strv_free(p->fs_protect, p->nfs_protect);
	list_free(&publish_list, p->publish, p->npublish);
	free(p->canonical);
	free(p);
}

/* ---- accessors ---------------------------------------------------------- */

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

const struct policy_secret *policy_secret_by_name(const struct policy *p,
						  const char *name)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++)
		if (strcmp(p->secrets[i].name, name) == 0)
			return &p->secrets[i];
	return NULL;
}

bool policy_secret_applies(const struct policy_secret *s, const char *method,
			   const char *path)
{
	bool ok = !s->methods;
	size_t i;

	for (i = 0; !ok && i < s->nmethods; i++)
		ok = strcmp(s->methods[i], method) == 0;
	if (!ok || !s->paths)
		return ok;
	for (i = 0; i < s->npaths; i++)
		if (strncmp(path, s->paths[i], strlen(s->paths[i])) == 0)
			return true;
	return false;
}

/* Does the name @a equal @b ignoring ASCII case, and one trailing dot of
 * @a? */
static bool name_eq(const char *a, const char *b)
{
	size_t n = strlen(a);

	if (n > 0 && a[n - 1] == '.')
		n--;
	return n == strlen(b) && strncasecmp(a, b, n) == 0;
}

/* Does @repo (ignoring one trailing ".git") equal the lowercase @want,
 * ignoring case? */
static bool repo_eq(const char *repo, const char *want)
{
	size_t n = strlen(repo);

	if (n > 4 && strcasecmp(repo + n - 4, ".git") == 0)
		n -= 4;
	return n == strlen(want) && strncasecmp(repo, want, n) == 0;
}

static bool is_git_host(const struct policy *p, const char *host)
{
	size_t i;

	for (i = 0; i < p->ngit_hosts; i++)
		if (name_eq(host, p->git_hosts[i]))
			return true;
	return false;
}

unsigned int policy_git_repo_ops(const struct policy *p, const char *host,
				 const char *owner, const char *repo)
{
	unsigned int ops = 0;
	bool on_session_host = false;
	size_t i;

	if (p->session_repo) {
		const char *s = p->session_repo, *o = strchr(s, '/');
		const char *r = strrchr(s, '/');
		char h[HOSTNAME_MAX + 1], ow[POLICY_REPO_PART_MAX + 1];

		ASSERT(o && r && (size_t)(o - s) < sizeof(h) &&
		       (size_t)(r - o - 1) < sizeof(ow));
		memcpy(h, s, (size_t)(o - s));
		h[o - s] = '\0';
		memcpy(ow, o + 1, (size_t)(r - o - 1));
		ow[r - o - 1] = '\0';
		on_session_host = name_eq(host, h);
		if (on_session_host && strcasecmp(owner, ow) == 0 &&
		    repo_eq(repo, r + 1))
			ops |= POLICY_GIT_FETCH | POLICY_GIT_PUSH;
	}
	for (i = 0; i < p->ngit_repos; i++) {
		const struct policy_git_repo *g = &p->git_repos[i];
		bool host_ok = g->host ? name_eq(host, g->host)
				       : on_session_host || is_git_host(p, host);

		if (host_ok && strcasecmp(owner, g->owner) == 0 &&
		    repo_eq(repo, g->repo))
			ops |= g->ops;
	}
	return ops;
}

bool policy_git_api_path_allowed(const struct policy *p, const char *path)
{
	size_t i;

	for (i = 0; i < p->ngit_api_allow; i++) {
		size_t n = strlen(p->git_api_allow[i]);

		if (strncmp(path, p->git_api_allow[i], n) == 0 &&
		    (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

const char *policy_git_project_path(const struct policy *p, uint64_t id)
{
	size_t i;

	for (i = 0; i < p->ngit_project_ids; i++)
		if (p->git_project_ids[i].id == id)
			return p->git_project_ids[i].repo;
	return NULL;
}

bool policy_git_has_token(const struct policy *p)
{
	return p->git_credential || p->git_github_app || p->git_gitlab_mint;
}

const struct policy_spend_provider *
policy_spend_provider_for_host(const struct policy *p, const char *host)
{
	size_t i, j;

	for (i = 0; i < p->nspend_providers; i++)
		for (j = 0; j < p->spend_providers[i].nhosts; j++)
			if (strcmp(p->spend_providers[i].hosts[j], host) == 0)
				return &p->spend_providers[i];
	return NULL;
}

const struct policy_price *policy_spend_price(const struct policy *p,
					      const char *model)
{
	const struct policy_price *best = NULL;
	size_t i, best_len = 0;

	for (i = 0; i < p->nspend_prices; i++) {
		const struct policy_price *pr = &p->spend_prices[i];
		size_t n = strlen(pr->model);

		if (!pr->is_prefix) {
			if (strcmp(pr->model, model) == 0)
				return pr;
			continue;
		}
		if (strncmp(model, pr->model, n - 1) == 0 &&
		    (!best || n - 1 > best_len)) {
			best = pr;
			best_len = n - 1;
		}
	}
	return best;
}
