/* SPDX-License-Identifier: Apache-2.0
 * events.c - reading receipt streams back, and the table of receipt types
 * (see events.h).
 *
 * DOC: Theory of Operation
 *
 * learn, report and export look back at sessions; what they may believe is
 * exactly what `airlock verify` vouches for. So a file is read whole
 * (bounded by EVENTS_FILE_MAX), verified by receipt_verify_buffer() -- the
 * same code and the same verdict as `airlock verify` -- and only then read
 * line by line. Each line carries whether it lies before the file's first
 * bad line; the commands decide what an unverified line is worth (learn
 * and export refuse it unless told otherwise, report shows it marked).
 *
 * Lines are parsed with jansson, duplicates rejected, one at a time: the
 * iterator owns the current line's JSON and frees it on the next call, so
 * a pass over a 100,000-line stream holds one parsed line at a time. The
 * SHA-256 of each line's bytes (what the next line's "prev" holds) is
 * computed here so that every tool names a line the same way.
 *
 * The table. Every receipt type is one entry: its label, its OCSF class,
 * what learn does with it, where the report groups it, and how a block of
 * it is graded. A family entry ("egress.") covers the types of that family
 * not listed, and the catch-all covers types added later elsewhere, so an
 * unknown type is shown and exported, never dropped.
 */
#include "events.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "util.h"

/* --- the OCSF classes -------------------------------------------------------- */

struct ocsf_class {
	const char *name;
	int uid;
	int category_uid;
	const char *category;
};

static const struct ocsf_class ocsf_classes[] = {
	[EVENTS_OCSF_BASE] = { "Base Event", 0, 0, "Uncategorized" },
	[EVENTS_OCSF_PROCESS] = { "Process Activity", 1007, 1, "System Activity" },
	[EVENTS_OCSF_NETWORK] = { "Network Activity", 4001, 4, "Network Activity" },
	[EVENTS_OCSF_HTTP] = { "HTTP Activity", 4002, 4, "Network Activity" },
	[EVENTS_OCSF_DNS] = { "DNS Activity", 4003, 4, "Network Activity" },
	[EVENTS_OCSF_FINDING] = { "Detection Finding", 2004, 2, "Findings" },
};
static_assert(ARRAY_SIZE(ocsf_classes) == EVENTS_OCSF_COUNT,
	      "ocsf_classes matches enum events_ocsf");

const char *events_ocsf_to_string(enum events_ocsf c)
{
	ASSERT((unsigned)c < EVENTS_OCSF_COUNT);
	return ocsf_classes[c].name;
}

int events_ocsf_class_uid(enum events_ocsf c)
{
	ASSERT((unsigned)c < EVENTS_OCSF_COUNT);
	return ocsf_classes[c].uid;
}

int events_ocsf_category_uid(enum events_ocsf c)
{
	ASSERT((unsigned)c < EVENTS_OCSF_COUNT);
	return ocsf_classes[c].category_uid;
}

const char *events_ocsf_category_name(enum events_ocsf c)
{
	ASSERT((unsigned)c < EVENTS_OCSF_COUNT);
	return ocsf_classes[c].category;
}

static const char *const learn_names[] = {
	[EVENTS_LEARN_NONE] = "none",
	[EVENTS_LEARN_SEEN] = "seen",
	[EVENTS_LEARN_EGRESS] = "egress",
	[EVENTS_LEARN_NAME] = "name",
	[EVENTS_LEARN_ENV] = "env",
	[EVENTS_LEARN_REVIEW] = "review",
};
static_assert(ARRAY_SIZE(learn_names) == EVENTS_LEARN_COUNT,
	      "learn_names matches enum events_learn");

const char *events_learn_to_string(enum events_learn l)
{
	ASSERT((unsigned)l < EVENTS_LEARN_COUNT);
	return learn_names[l];
}

static const char *const group_names[] = {
	[EVENTS_GROUP_SESSION] = "session",
	[EVENTS_GROUP_EGRESS] = "egress",
	[EVENTS_GROUP_HTTP] = "http",
	[EVENTS_GROUP_ENV] = "env",
	[EVENTS_GROUP_SECRET] = "secret",
	[EVENTS_GROUP_GIT] = "git",
	[EVENTS_GROUP_SPEND] = "spend",
	[EVENTS_GROUP_POLICY] = "policy",
	[EVENTS_GROUP_ERROR] = "error",
	[EVENTS_GROUP_OTHER] = "other",
};
static_assert(ARRAY_SIZE(group_names) == EVENTS_GROUP_COUNT,
	      "group_names matches enum events_group");

const char *events_group_to_string(enum events_group g)
{
	ASSERT((unsigned)g < EVENTS_GROUP_COUNT);
	return group_names[g];
}

/* --- the receipt types ------------------------------------------------------- */

#define O(x) EVENTS_OCSF_##x
#define L(x) EVENTS_LEARN_##x
#define G(x) EVENTS_GROUP_##x

/* Exact names first, then families, then the catch-all (last). */
static const struct events_type types[] = {
	/* name               label                   OCSF        learn      group       sev  http */
	{ "session.start",    "Session started",      O(PROCESS), L(NONE),   G(SESSION), 0, 0 },
	{ "session.refused",  "Session refused",      O(PROCESS), L(NONE),   G(SESSION), 4, 0 },
	{ "session.end",      "Session ended",        O(PROCESS), L(NONE),   G(SESSION), 0, 0 },
	{ "policy.reload",    "Policy reloaded",      O(BASE),    L(NONE),   G(POLICY),  0, 0 },
	{ "env.drop",         "Variable dropped",     O(BASE),    L(ENV),    G(ENV),     0, 0 },
	{ "egress.allow",     "Egress allowed",       O(NETWORK), L(SEEN),   G(EGRESS),  0, 0 },
	{ "egress.block",     "Egress blocked",       O(NETWORK), L(EGRESS), G(EGRESS),  0, 403 },
	{ "dns.block",        "Name refused (DNS)",   O(DNS),     L(NAME),   G(EGRESS),  0, 0 },
	{ "http.request",     "HTTP request",         O(HTTP),    L(SEEN),   G(HTTP),    0, 0 },
	{ "secret.inject",    "Secret injected",      O(HTTP),    L(NONE),   G(SECRET),  0, 0 },
	{ "secret.block",     "Placeholder refused",  O(HTTP),    L(REVIEW), G(SECRET),  4, 403 },
	{ "secret.scrub",     "Secret scrubbed",      O(HTTP),    L(NONE),   G(SECRET),  0, 0 },
	{ "git.allow",        "Git allowed",          O(HTTP),    L(NONE),   G(GIT),     0, 0 },
	{ "git.block",        "Git refused",          O(HTTP),    L(REVIEW), G(GIT),     0, 403 },
	{ "git.token",        "Git token minted",     O(HTTP),    L(NONE),   G(GIT),     4, 0 },
	{ "budget.charge",    "Spend charged",        O(BASE),    L(NONE),   G(SPEND),   0, 0 },
	{ "budget.block",     "Spend refused",        O(HTTP),    L(REVIEW), G(SPEND),   0, 429 },
	{ "budget.exhausted", "Spend cap reached",    O(BASE),    L(REVIEW), G(SPEND),   0, 0 },
	{ "proxy.error",      "Proxy error",          O(NETWORK), L(NONE),   G(ERROR),   2, 0 },
	{ "sandbox.error",    "Sandbox error",        O(BASE),    L(NONE),   G(ERROR),   4, 0 },
	{ "receipt.gap",      "Feed gap",             O(BASE),    L(NONE),   G(ERROR),   0, 0 },
	/* families */
	{ "egress.",          "Egress",               O(NETWORK), L(NONE),   G(EGRESS),  0, 403 },
	{ "dns.",             "DNS",                  O(DNS),     L(NONE),   G(EGRESS),  0, 0 },
	{ "http.",            "HTTP",                 O(HTTP),    L(NONE),   G(HTTP),    0, 0 },
	{ "secret.",          "Secret",               O(HTTP),    L(NONE),   G(SECRET),  0, 0 },
	{ "git.",             "Git",                  O(HTTP),    L(NONE),   G(GIT),     0, 0 },
	{ "budget.",          "Spend",                O(BASE),    L(NONE),   G(SPEND),   0, 0 },
	{ "session.",         "Session",              O(PROCESS), L(NONE),   G(SESSION), 0, 0 },
	/* everything else */
	{ "",                 "Other",                O(BASE),    L(NONE),   G(OTHER),   0, 0 },
};

#undef O
#undef L
#undef G

const struct events_type *events_type_find(const char *type)
{
	size_t i, n;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		n = strlen(types[i].name);
		if (n && types[i].name[n - 1] != '.' && strcmp(type, types[i].name) == 0)
			return &types[i];
	}
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		n = strlen(types[i].name);
		if (n && types[i].name[n - 1] == '.' && strncmp(type, types[i].name, n) == 0 &&
		    type[n] != '\0')
			return &types[i];
	}
	return &types[ARRAY_SIZE(types) - 1];
}

const struct events_type *events_types(size_t *n)
{
	*n = ARRAY_SIZE(types);
	return types;
}

enum receipt_decision events_decision_from_string(const char *s)
{
	int d;

	for (d = 0; d < RECEIPT_DECISION_COUNT; d++)
		if (strcmp(s, receipt_decision_to_string((enum receipt_decision)d)) == 0)
			return (enum receipt_decision)d;
	return RECEIPT_DECISION_COUNT;
}

static int digits(const char *s, size_t n)
{
	int v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

int64_t events_parse_ts(const char *ts)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	struct tm tm = { 0 };
	int y, mo, d, h, mi, s, ms;
	time_t t;

	if (strlen(ts) != 24 || ts[4] != '-' || ts[7] != '-' || ts[10] != 'T' ||
	    ts[13] != ':' || ts[16] != ':' || ts[19] != '.' || ts[23] != 'Z')
		return -1;
	y = digits(ts, 4);
	mo = digits(ts + 5, 2);
	d = digits(ts + 8, 2);
	h = digits(ts + 11, 2);
	mi = digits(ts + 14, 2);
	s = digits(ts + 17, 2);
	ms = digits(ts + 20, 3);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h < 0 ||
	    h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60 || ms < 0)
		return -1;
	if (mo == 2 && d == 29 && (y % 4 != 0 || (y % 100 == 0 && y % 400 != 0)))
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -1;
	return (int64_t)t * 1000 + ms;
}

/* --- files ------------------------------------------------------------------- */

/* Reads @in to its end into a NUL-terminated buffer of at most
 * EVENTS_FILE_MAX bytes. Returns it (the caller frees), or NULL with errno
 * set (EFBIG when too big). */
static char *read_all(FILE *in, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = util_xmalloc(cap + 1);

	for (;;) {
		size_t got;

		if (n == cap) {
			if (cap >= EVENTS_FILE_MAX) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			cap = cap * 2 > EVENTS_FILE_MAX ? EVENTS_FILE_MAX : cap * 2;
			buf = util_xrealloc(buf, cap + 1);
		}
		got = fread(buf + n, 1, cap - n, in);
		n += got;
		if (got == 0) {
			if (ferror(in)) {
				int e = errno ? errno : EIO;

				free(buf);
				errno = e;
				return NULL;
			}
			break;
		}
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

int events_load(struct events_set *set, char *const *paths, size_t npaths,
		const char *pubkey_path, char *err, size_t errlen)
{
	EVP_PKEY *pin = NULL;
	bool stdin_used = false;
	char why[256];
	FILE *in = NULL;
	size_t i;
	int rc = -1;

	memset(set, 0, sizeof(*set));
	if (pubkey_path) {
		pin = receipt_pubkey_load(pubkey_path, why, sizeof(why));
		if (!pin) {
			snprintf(err, errlen, "--pubkey %s: %s", pubkey_path, why);
			goto out;
		}
		set->pubkey_path = util_xstrdup(pubkey_path);
	}
	set->files = util_xcalloc(npaths ? npaths : 1, sizeof(*set->files));
	for (i = 0; i < npaths; i++) {
		struct events_file *f = &set->files[i];
		bool is_stdin = strcmp(paths[i], "-") == 0;

		f->path = util_xstrdup(paths[i]);
		set->nfiles++;
		if (is_stdin && stdin_used) {
			snprintf(err, errlen, "-: standard input can be read only once");
			goto out;
		}
		stdin_used |= is_stdin;
		in = is_stdin ? stdin : fopen(paths[i], "re");
		if (!in) {
			snprintf(err, errlen, "%s: %s", paths[i], strerror(errno));
			goto out;
		}
		f->text = read_all(in, &f->len);
		if (!f->text) {
			snprintf(err, errlen, "%s: %s", paths[i],
				 errno == EFBIG ? "larger than 1 GiB" : strerror(errno));
			goto out;
		}
		if (in != stdin)
			fclose(in);
		in = NULL;
		receipt_verify_buffer(f->text, f->len, pin, &f->vr);
	}
	rc = 0;
out:
	if (in && in != stdin)
		fclose(in);
	EVP_PKEY_free(pin);
	if (rc < 0)
		events_set_free(set);
	return rc;
}

void events_set_free(struct events_set *set)
{
	size_t i;

	for (i = 0; i < set->nfiles; i++) {
		free(set->files[i].path);
		free(set->files[i].text);
		receipt_verify_result_free(&set->files[i].vr);
	}
	free(set->files);
	free(set->pubkey_path);
	memset(set, 0, sizeof(*set));
}

const struct events_file *events_first_failure(const struct events_set *set)
{
	size_t i;

	for (i = 0; i < set->nfiles; i++)
		if (!set->files[i].vr.ok)
			return &set->files[i];
	return NULL;
}

/* --- lines ------------------------------------------------------------------- */

const char *events_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

bool events_num(const json_t *o, const char *key, double *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		return false;
	*out = json_number_value(v);
	return true;
}

/* The raw scanner below runs only on text jansson has accepted as one JSON
 * object, so it need not validate: it only finds where values end. */
static void skip_ws(const char *s, size_t len, size_t *i)
{
	while (*i < len && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' || s[*i] == '\r'))
		(*i)++;
}

static bool scan_string(const char *s, size_t len, size_t *i)
{
	for ((*i)++; *i < len; (*i)++) {
		if (s[*i] == '\\')
			(*i)++;
		else if (s[*i] == '"') {
			(*i)++;
			return true;
		}
	}
	return false;
}

static bool scan_value(const char *s, size_t len, size_t *i)
{
	int depth = 0;

	do {
		skip_ws(s, len, i);
		if (*i >= len)
			return false;
		switch (s[*i]) {
		case '"':
			if (!scan_string(s, len, i))
				return false;
			break;
		case '{':
		case '[':
			depth++;
			(*i)++;
			break;
		case '}':
		case ']':
			depth--;
			(*i)++;
			break;
		case ',':
		case ':':
			if (depth == 0)
				return false;
			(*i)++;
			break;
		default:
			/* A NUL is no JSON token (jansson may stop at one and
			 * accept the text before it); strchr() would match its
			 * own terminator, so the scan would never move. */
			if (s[*i] == '\0')
				return false;
			while (*i < len && s[*i] != '\0' && !strchr(",:]} \t\r\n", s[*i]))
				(*i)++;
			break;
		}
	} while (depth > 0);
	return depth == 0;
}

/* The bytes of the value of top-level member @key in the JSON object
 * @s (@len bytes, already parsed by jansson). */
static bool raw_member(const char *s, size_t len, const char *key, const char **out,
		       size_t *outlen)
{
	size_t i = 0, klen = strlen(key);

	skip_ws(s, len, &i);
	if (i >= len || s[i] != '{')
		return false;
	for (i++;;) {
		size_t k, v;

		skip_ws(s, len, &i);
		if (i >= len || s[i] != '"')
			return false;
		k = i;
		if (!scan_string(s, len, &i))
			return false;
		skip_ws(s, len, &i);
		if (i >= len || s[i] != ':')
			return false;
		i++;
		skip_ws(s, len, &i);
		v = i;
		if (!scan_value(s, len, &i))
			return false;
		if (i - v > 0 && k + klen + 2 <= len && s[k + klen + 1] == '"' &&
		    memcmp(s + k + 1, key, klen) == 0 && memchr(s + k + 1, '\\', klen) == NULL) {
			*out = s + v;
			*outlen = i - v;
			return true;
		}
		skip_ws(s, len, &i);
		if (i < len && s[i] == ',') {
			i++;
			continue;
		}
		return false;
	}
}

void events_iter_init(struct events_iter *it, const struct events_set *set)
{
	memset(it, 0, sizeof(*it));
	it->set = set;
}

void events_iter_done(struct events_iter *it)
{
	json_decref(it->cur);
	it->cur = NULL;
}

static void line_sha256(const char *text, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	ASSERT(EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) == 1 &&
	       mdlen == 32);
	util_hex(md, 32, out);
}

json_t *events_line_parse(struct events_line *ln, const char *text, size_t len)
{
	json_t *obj, *seq;

	memset(ln, 0, sizeof(*ln));
	ln->text = text;
	ln->len = len;
	line_sha256(text, len, ln->sha256);
	obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (obj && !json_is_object(obj)) {
		json_decref(obj);
		obj = NULL;
	}
	ln->obj = obj;
	ln->seq = -1;
	seq = json_object_get(ln->obj, "seq");
	if (json_is_integer(seq))
		ln->seq = json_integer_value(seq);
	ln->ts = events_str(ln->obj, "ts");
	ln->session_id = events_str(ln->obj, "session");
	ln->type = events_str(ln->obj, "type");
	ln->decision_s = events_str(ln->obj, "decision");
	ln->point = events_str(ln->obj, "point");
	ln->rule = events_str(ln->obj, "rule");
	ln->policy = events_str(ln->obj, "policy");
	ln->reason = events_str(ln->obj, "reason");
	ln->prev = events_str(ln->obj, "prev");
	ln->subject = json_object_get(ln->obj, "subject");
	if (!json_is_object(ln->subject))
		ln->subject = NULL;
	if (ln->subject && !raw_member(text, len, "subject", &ln->subject_raw,
				       &ln->subject_raw_len))
		ln->subject_raw = NULL;
	ln->decision = events_decision_from_string(ln->decision_s);
	ln->ts_ms = events_parse_ts(ln->ts);
	ln->ti = events_type_find(ln->type);
	return obj;
}

bool events_next(struct events_iter *it, struct events_line *ln)
{
	const struct events_file *f;
	const char *start, *nl;
	size_t len;

	json_decref(it->cur);
	it->cur = NULL;
	for (;;) {
		if (it->file >= it->set->nfiles)
			return false;
		f = &it->set->files[it->file];
		if (it->off < f->len)
			break;
		it->file++;
		it->off = 0;
		it->lineno = 0;
	}
	start = f->text + it->off;
	nl = memchr(start, '\n', f->len - it->off);
	len = nl ? (size_t)(nl - start) : f->len - it->off;
	it->off += len + (nl ? 1 : 0);
	it->cur = events_line_parse(ln, start, len);
	ln->file = it->file;
	ln->lineno = ++it->lineno;
	ln->verified = f->vr.ok || ln->lineno < f->vr.bad_line;
	ln->bad = !f->vr.ok && ln->lineno == f->vr.bad_line;

	/* A stream begins at the first line of a file, after a session.end,
	 * or wherever a seq 0 appears (a spliced file). */
	if (!it->any || ln->lineno == 1 || it->after_end || ln->seq == 0) {
		if (it->any)
			it->session++;
		ln->new_session = true;
	}
	it->any = true;
	it->after_end = strcmp(ln->type, "session.end") == 0;
	ln->session = it->session;
	return true;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

const char **events_sorted_keys(const json_t *map, size_t *n)
{
	const char **keys = util_xcalloc(json_object_size(map) + 1, sizeof(*keys));
	const char *k;
	json_t *v;

	*n = 0;
	json_object_foreach((json_t *)map, k, v)
		keys[(*n)++] = k;
	qsort(keys, *n, sizeof(*keys), cmp_key);
	return keys;
}
