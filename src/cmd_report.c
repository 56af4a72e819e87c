/* SPDX-License-Identifier: Apache-2.0
 * cmd_report.c - `airlock report [--pubkey FILE] EVENTS... -o FILE.html`:
 * receipt streams as one self-contained HTML page for a person.
 *
 * DOC: Theory of Operation
 *
 * The page answers an auditor's questions in the order they ask them: can
 * I trust this record (verification first: intact or not, at which line
 * and why, and whether the key was pinned), then per session what ran
 * (mode, policy digest, command, duration, exit), what it was stopped or
 * would have been stopped from doing (blocks and would-blocks grouped by
 * rule, with the exact subjects), which secrets it used where, what it did
 * with git, what it spent against its cap, and finally every receipt in a
 * filterable timeline.
 *
 * Self-contained: the style sheet, the script, the charts (inline SVG) and
 * the data are in the file; it names no URL. Its Content-Security-Policy
 * says the same to the browser -- default-src 'none', and the one style
 * sheet and the one script allowed by their SHA-256 -- so even a mistake
 * in escaping could neither fetch anything nor run a script that came
 * from a receipt.
 *
 * Untrusted text. Every receipt member can hold what a hostile agent
 * chose (a host name, a reason, a subject). In markup it is escaped
 * (& < > " '); in the data block it is JSON with every '<' written as
 * \u003c, so no receipt can close the <script> element that holds it;
 * the script then only ever assigns textContent.
 *
 * Size. One pass over the streams: each line is parsed, folded into its
 * session's summary (maps bounded by the distinct subjects shown) and
 * appended to the timeline's rows in memory, then the page is written
 * summary first. The browser renders only the timeline rows in view, so a
 * 100,000-line stream opens in about a second (docs/AUDIT.md).
 *
 * A stream that does not verify is rendered all the same: the failure is
 * the first thing on the page, the session holding the bad line says so,
 * and the timeline marks the bad line and every line after it.
 *
 * Exit status: 0 the page was written and every stream verified; 1 the
 * page was written but a stream does not verify; 2 usage error, or a file
 * that cannot be read or written (nothing written).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "commands.h"
#include "events.h"
#include "report_page.h"
#include "util.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.1.0"
#endif

#define EXIT_NOT_VERIFIED 1
#define EXIT_USAGE 2
/* Distinct subjects listed per rule, and rows of the destination table. */
#define SUBJECTS_SHOWN 40
#define SUBJECTS_KEPT 4096
#define DESTS_SHOWN 60
#define CHART_POINTS_MAX 1500

const char cmd_report_help[] =
	"usage: airlock report [--pubkey FILE] EVENTS... -o FILE.html\n"
	"\n"
	"Verifies the receipt streams EVENTS (files, or - for standard input)\n"
	"and writes one self-contained HTML page (style, script and charts\n"
	"inline; it makes no network request of any kind) to read in a browser:\n"
	"the verification result first, then per session its mode, policy\n"
	"digest, command, duration and exit, the counts per type, the blocks and\n"
	"would-blocks grouped by rule with their exact subjects, the secrets\n"
	"used (by name and host), git operations by repository, spend over time\n"
	"against the cap, and the whole timeline, filterable by session, type,\n"
	"decision and text. A stream that does not verify is still shown, with\n"
	"the line where verification stopped and why.\n"
	"\n"
	"  -o, --output FILE  where to write the page (replaced atomically;\n"
	"                     - for standard output); required\n"
	"  --pubkey FILE      every line must be signed by this key (as verify);\n"
	"                     without it the page says the key was not pinned\n"
	"  -h, --help         print this help\n"
	"\n"
	"Exit status: 0 written and every stream verified; 1 written, but a\n"
	"stream does not verify; 2 usage error, or a file that cannot be read\n"
	"or written (nothing written).\n";

struct report_opts {
	const char *out, *pubkey;
};

struct spend_point {
	int64_t ms;
	double total, cost;
	bool refused;
	char model[64];
};

/* One session stream, as the page summarises it. */
struct rsession {
	size_t file;
	size_t first_line, last_line;
	char *id, *mode, *policy, *argv0, *opener;
	int64_t start_ms, end_ms;
	bool ended, has_exit, has_spend, has_cap, failed, unverified;
	long long exit_status;
	double spend_usd, cap_usd, total;
	size_t bad_line;
	json_t *counts;   /* type -> n */
	json_t *blocks;   /* rule -> {n, decisions{}, subjects{text: [n, seq]}, more} */
	json_t *secrets;  /* "secret\thost" -> {secret, host, headers{}, types{}} */
	json_t *git;      /* repo -> op -> decision -> n */
	json_t *tokens;   /* git.token subjects */
	json_t *dests;    /* "host:port" -> {host, port, allow, would_block, block} */
	size_t decisions[RECEIPT_DECISION_COUNT + 1];
	struct spend_point *pts;
	size_t npts, cappts;
	/* The figures of the lines that do not verify, kept apart (NULL while
	 * every line so far verified): never added to the ones above. */
	struct rsession *uv;
};

struct report {
	struct report_opts o;
	struct events_set set;
	struct rsession *s;
	size_t ns, caps;
	json_t *types, *rules, *reasons;  /* string -> index */
	json_t *type_list, *rule_list, *reason_list;
	char *rows;        /* the timeline's rows: "[...],[...]" */
	size_t rows_len, nrows;
	FILE *rows_f;
	size_t *file_lines, *file_sessions; /* per file, for the verification table */
};

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock: report: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see airlock report --help)\n", stderr);
	return EXIT_USAGE;
}

/* --- output helpers ---------------------------------------------------------- */

/* @s escaped for HTML text and attribute values. */
static void h(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f); break;
		}
	}
}

/* JSON text for a <script> element: every '<' as \u003c (only ever inside
 * a string, since JSON has no other place for it). */
static void put_script_json(FILE *f, const char *s, size_t n)
{
	size_t i, from = 0;

	for (i = 0; i < n; i++) {
		if (s[i] != '<')
			continue;
		fwrite(s + from, 1, i - from, f);
		fputs("\\u003c", f);
		from = i + 1;
	}
	fwrite(s + from, 1, n - from, f);
}

static void put_json(FILE *f, const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	ASSERT(s);
	put_script_json(f, s, strlen(s));
	free(s);
}

/* base64 of the SHA-256 of @s, for a CSP hash source. */
static void csp_hash(const char *s, char out[64])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	ASSERT(EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32);
	ASSERT(EVP_EncodeBlock((unsigned char *)out, md, 32) == 44);
}

/* @n with thousands separators: 100,000. */
static void fmt_count(size_t n, char *out, size_t len)
{
	char digits[32];
	size_t nd, i, o = 0;

	nd = (size_t)snprintf(digits, sizeof(digits), "%zu", n);
	for (i = 0; i < nd && o + 2 < len; i++) {
		if (i && (nd - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
}

static void fmt_money(double usd, char *out, size_t len)
{
	if (usd > -1 && usd < 1 && usd != 0)
		snprintf(out, len, "$%.4f", usd);
	else
		snprintf(out, len, "$%.2f", usd);
}

static void fmt_duration(int64_t ms, char *out, size_t len)
{
	if (ms < 0)
		snprintf(out, len, "unknown");
	else if (ms < 60000)
		snprintf(out, len, "%.1f s", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(out, len, "%lld min %02lld s", (long long)(ms / 60000),
			 (long long)(ms / 1000 % 60));
	else
		snprintf(out, len, "%lld h %02lld min", (long long)(ms / 3600000),
			 (long long)(ms / 60000 % 60));
}

/* "2026-03-01 09:00:00.000 UTC" from an RFC 3339 ts (or the raw text). */
static void put_ts(FILE *f, const char *ts)
{
	if (strlen(ts) == 24 && ts[10] == 'T' && ts[23] == 'Z') {
		char buf[40];

		snprintf(buf, sizeof(buf), "%.10s %.12s UTC", ts, ts + 11);
		h(f, buf);
	} else {
		h(f, *ts ? ts : "unknown");
	}
}

static json_int_t inc(json_t *map, const char *key, json_int_t by)
{
	json_int_t n = json_integer_value(json_object_get(map, key)) + by;

	json_object_set_new(map, key, json_integer(n));
	return n;
}

static json_t *obj_at(json_t *map, const char *key)
{
	json_t *o = json_object_get(map, key);

	if (!o) {
		o = json_object();
		json_object_set_new(map, key, o);
	}
	return o;
}

/* The index of @s in a string table (added when new). */
static json_int_t intern(json_t *index, json_t *list, const char *s)
{
	json_t *v = json_object_get(index, s);

	if (v)
		return json_integer_value(v);
	json_object_set_new(index, s, json_integer((json_int_t)json_array_size(list)));
	json_array_append_new(list, json_string(s));
	return (json_int_t)json_array_size(list) - 1;
}

/* --- folding lines into sessions -------------------------------------------------- */

static void session_init(struct rsession *s, const struct events_line *ln)
{
	memset(s, 0, sizeof(*s));
	s->file = ln->file;
	s->first_line = ln->lineno;
	s->id = util_xstrdup(*ln->session_id ? ln->session_id : "(no session id)");
	s->mode = util_xstrdup("");
	s->policy = util_xstrdup(ln->policy);
	s->argv0 = util_xstrdup("");
	s->opener = util_xstrdup(ln->type);
	s->start_ms = ln->ts_ms;
	s->end_ms = -1;
	s->counts = json_object();
	s->blocks = json_object();
	s->secrets = json_object();
	s->git = json_object();
	s->tokens = json_array();
	s->dests = json_object();
}

static struct rsession *session_new(struct report *r, const struct events_line *ln)
{
	struct rsession *s;

	if (r->ns == r->caps) {
		r->caps = r->caps ? r->caps * 2 : 8;
		r->s = util_xrealloc(r->s, r->caps * sizeof(*r->s));
	}
	s = &r->s[r->ns++];
	session_init(s, ln);
	return s;
}

static void session_free(struct rsession *s)
{
	free(s->id);
	free(s->mode);
	free(s->policy);
	free(s->argv0);
	free(s->opener);
	json_decref(s->counts);
	json_decref(s->blocks);
	json_decref(s->secrets);
	json_decref(s->git);
	json_decref(s->tokens);
	json_decref(s->dests);
	free(s->pts);
	if (s->uv) {
		session_free(s->uv);
		free(s->uv);
	}
}

static void replace(char **field, const char *v)
{
	free(*field);
	*field = util_xstrdup(v);
}

static void add_point(struct rsession *s, const struct events_line *ln, bool refused)
{
	struct spend_point *p;
	double v;

	if (s->npts == s->cappts) {
		s->cappts = s->cappts ? s->cappts * 2 : 16;
		s->pts = util_xrealloc(s->pts, s->cappts * sizeof(*s->pts));
	}
	p = &s->pts[s->npts++];
	memset(p, 0, sizeof(*p));
	p->ms = ln->ts_ms;
	p->refused = refused;
	if (!refused && (events_num(ln->subject, "cost_usd", &v) || events_num(ln->subject, "cost", &v)))
		p->cost = v;
	if (events_num(ln->subject, "total_usd", &v) || events_num(ln->subject, "spent_usd", &v) ||
	    events_num(ln->subject, "session_usd", &v))
		s->total = v;
	else if (!refused)
		s->total += p->cost;
	p->total = s->total;
	snprintf(p->model, sizeof(p->model), "%s", events_str(ln->subject, "model"));
	if (events_num(ln->subject, "cap_usd", &v) || events_num(ln->subject, "cap", &v)) {
		s->cap_usd = v;
		s->has_cap = true;
	}
}

/* The subject as the page shows it: its bytes as signed. */
static char *subject_text(const struct events_line *ln)
{
	char *t;

	if (ln->subject_raw)
		return util_xstrndup(ln->subject_raw, ln->subject_raw_len);
	if (!ln->subject)
		return util_xstrdup(ln->obj ? "{}" : "");
	t = json_dumps(ln->subject, JSON_COMPACT);
	ASSERT(t);
	return t;
}

static void fold_block(struct rsession *s, const struct events_line *ln, const char *subj)
{
	const char *rule = *ln->rule ? ln->rule : "(no rule)";
	json_t *b = json_object_get(s->blocks, rule), *subs, *e;

	if (!b) {
		b = json_pack("{s:i, s:{}, s:{}, s:{}, s:i}", "n", 0, "decisions", "types",
			      "subjects", "more", 0);
		ASSERT(b);
		json_object_set_new(s->blocks, rule, b);
	}
	inc(b, "n", 1);
	inc(json_object_get(b, "decisions"), ln->decision_s, 1);
	inc(json_object_get(b, "types"), ln->type, 1);
	subs = json_object_get(b, "subjects");
	e = json_object_get(subs, subj);
	if (e) {
		json_array_set_new(e, 0, json_integer(json_integer_value(json_array_get(e, 0)) + 1));
	} else if (json_object_size(subs) < SUBJECTS_KEPT) {
		json_object_set_new(subs, subj, json_pack("[i, I, s]", 1, (json_int_t)ln->seq,
							   ln->decision_s));
	} else {
		inc(b, "more", 1);
	}
}

static void fold_dest(struct rsession *s, const struct events_line *ln)
{
	const char *host = events_str(ln->subject, "host");
	json_t *port = json_object_get(ln->subject, "port"), *d;
	char key[320];

	if (!*host)
		host = events_str(ln->subject, "name"); /* dns.block */
	if (!*host)
		return;
	if (json_is_integer(port))
		snprintf(key, sizeof(key), "%s:%lld", host, (long long)json_integer_value(port));
	else
		snprintf(key, sizeof(key), "%s", host);
	d = json_object_get(s->dests, key);
	if (!d) {
		if (json_object_size(s->dests) >= SUBJECTS_KEPT)
			return;
		d = json_pack("{s:s, s:i, s:i, s:i, s:i}", "host", key, "allow", 0,
			      "would_block", 0, "block", 0, "requests", 0);
		ASSERT(d);
		json_object_set_new(s->dests, key, d);
	}
	if (strcmp(ln->type, "http.request") == 0)
		inc(d, "requests", 1);
	else if (ln->decision != RECEIPT_DECISION_COUNT && ln->decision != RECEIPT_INFO)
		inc(d, ln->decision_s, 1);
}

static void fold_secret(struct rsession *s, const struct events_line *ln)
{
	const char *name = events_str(ln->subject, "secret");
	const char *host = events_str(ln->subject, "host");
	const char *header = events_str(ln->subject, "header");
	char key[512], tkey[96];
	json_t *e;

	if (!*name)
		name = events_str(ln->subject, "name");
	snprintf(key, sizeof(key), "%s\t%s", name, host);
	e = json_object_get(s->secrets, key);
	if (!e) {
		if (json_object_size(s->secrets) >= SUBJECTS_KEPT)
			return;
		e = json_pack("{s:s, s:s, s:{}, s:{}, s:I}", "secret", name, "host", host,
			      "headers", "types", "first", (json_int_t)ln->seq);
		ASSERT(e);
		json_object_set_new(s->secrets, key, e);
	}
	if (*header)
		json_object_set_new(json_object_get(e, "headers"), header, json_true());
	snprintf(tkey, sizeof(tkey), "%s/%s", ln->type, ln->decision_s);
	inc(json_object_get(e, "types"), tkey, 1);
}

static void fold_git(struct rsession *s, const struct events_line *ln)
{
	const char *repo = events_str(ln->subject, "repo");
	const char *op = events_str(ln->subject, "operation");

	if (strcmp(ln->type, "git.token") == 0) {
		if (json_array_size(s->tokens) < SUBJECTS_SHOWN)
			json_array_append_new(s->tokens,
					      json_pack("[I, s, O]", (json_int_t)ln->seq, ln->ts,
							ln->subject ? ln->subject : json_null()));
		return;
	}
	if (!*repo)
		repo = "(no repository)";
	if (!*op)
		op = ln->type;
	if (!json_object_get(s->git, repo) && json_object_size(s->git) >= SUBJECTS_KEPT)
		return;
	inc(obj_at(obj_at(s->git, repo), op), ln->decision_s, 1);
}

static void fold(struct report *r, struct rsession *s, const struct events_line *ln,
		 const char *subj)
{
	double v;

	s->last_line = ln->lineno;
	if (!ln->obj)
		return;
	inc(s->counts, *ln->type ? ln->type : "(no type)", 1);
	s->decisions[ln->decision]++;
	if (ln->ts_ms >= 0)
		s->end_ms = ln->ts_ms;
	if (receipt_type_opens_stream(ln->type)) {
		replace(&s->mode, events_str(ln->subject, "mode"));
		replace(&s->argv0, events_str(ln->subject, "argv0"));
		replace(&s->opener, ln->type);
		s->start_ms = ln->ts_ms;
	}
	if (strcmp(ln->type, "policy.reload") == 0 && ln->decision == RECEIPT_INFO)
		replace(&s->policy, ln->policy);
	if (strcmp(ln->type, "session.end") == 0) {
		s->ended = true;
		if (events_num(ln->subject, "exit", &v)) {
			s->has_exit = true;
			s->exit_status = (long long)v;
		}
		if (events_num(ln->subject, "spend_usd", &v)) {
			s->has_spend = true;
			s->spend_usd = v;
		}
	}
	if (ln->decision == RECEIPT_BLOCK || ln->decision == RECEIPT_WOULD_BLOCK)
		fold_block(s, ln, subj);
	switch (ln->ti->group) {
	case EVENTS_GROUP_EGRESS:
	case EVENTS_GROUP_HTTP:
		fold_dest(s, ln);
		break;
	case EVENTS_GROUP_SECRET:
		fold_secret(s, ln);
		break;
	case EVENTS_GROUP_GIT:
		fold_git(s, ln);
		break;
	case EVENTS_GROUP_SESSION:
	case EVENTS_GROUP_ENV:
	case EVENTS_GROUP_POLICY:
	case EVENTS_GROUP_ERROR:
	case EVENTS_GROUP_OTHER:
	case EVENTS_GROUP_SPEND:
	case EVENTS_GROUP_COUNT:
		break;
	}
	/* A block of any type toward a host (git.block, secret.block,
	 * budget.block...) counts for that destination too. */
	if ((ln->decision == RECEIPT_BLOCK || ln->decision == RECEIPT_WOULD_BLOCK) &&
	    ln->ti->group != EVENTS_GROUP_EGRESS && ln->ti->group != EVENTS_GROUP_HTTP)
		fold_dest(s, ln);
	switch (ln->ti->group) {
	case EVENTS_GROUP_EGRESS:
	case EVENTS_GROUP_HTTP:
	case EVENTS_GROUP_SECRET:
	case EVENTS_GROUP_GIT:
		break;
	case EVENTS_GROUP_SPEND:
		if (strcmp(ln->type, "budget.charge") == 0)
			add_point(s, ln, false);
		else if (strcmp(ln->type, "budget.block") == 0)
			add_point(s, ln, true);
		else if (events_num(ln->subject, "cap_usd", &v)) {
			s->cap_usd = v;
			s->has_cap = true;
		}
		break;
	case EVENTS_GROUP_SESSION:
	case EVENTS_GROUP_ENV:
	case EVENTS_GROUP_POLICY:
	case EVENTS_GROUP_ERROR:
	case EVENTS_GROUP_OTHER:
	case EVENTS_GROUP_COUNT:
		break;
	}
	(void)r;
}

/* Appends the timeline row of @ln. */
static void add_row(struct report *r, const struct events_line *ln, const char *subj)
{
	json_int_t type = intern(r->types, r->type_list, *ln->type ? ln->type : "(not JSON)");
	json_int_t rule = intern(r->rules, r->rule_list, ln->rule);
	json_int_t reason = intern(r->reasons, r->reason_list, ln->reason);
	int flags = (!ln->verified ? 1 : 0) | (ln->bad ? 2 : 0) | (!ln->obj ? 4 : 0);
	json_t *row;

	row = json_pack("[I, I, I, I, i, I, s, I, i, I]", (json_int_t)(r->ns - 1),
			(json_int_t)ln->seq, (json_int_t)ln->ts_ms, type, (int)ln->decision, rule,
			ln->obj ? subj : "(this line is not a JSON object)", reason, flags,
			(json_int_t)ln->lineno);
	ASSERT(row);
	if (r->nrows)
		fputc(',', r->rows_f);
	put_json(r->rows_f, row);
	json_decref(row);
	r->nrows++;
}

static void read_all(struct report *r)
{
	struct events_iter it;
	struct events_line ln;
	struct rsession *s = NULL;

	r->rows_f = open_memstream(&r->rows, &r->rows_len);
	ASSERT(r->rows_f);
	r->file_lines = util_xcalloc(r->set.nfiles + 1, sizeof(*r->file_lines));
	r->file_sessions = util_xcalloc(r->set.nfiles + 1, sizeof(*r->file_sessions));
	events_iter_init(&it, &r->set);
	while (events_next(&it, &ln)) {
		char *subj;

		r->file_lines[ln.file]++;
		if (ln.new_session || !s) {
			s = session_new(r, &ln);
			r->file_sessions[ln.file]++;
		}
		if (!ln.verified)
			s->unverified = true;
		if (ln.bad) {
			s->failed = true;
			s->bad_line = ln.lineno;
		}
		subj = subject_text(&ln);
		if (ln.verified) {
			fold(r, s, &ln, subj);
		} else {
			/* Never a fact: its figures are kept apart. */
			if (!s->uv) {
				s->uv = util_xcalloc(1, sizeof(*s->uv));
				session_init(s->uv, &ln);
			}
			fold(r, s->uv, &ln, subj);
			s->last_line = ln.lineno;
		}
		add_row(r, &ln, subj);
		free(subj);
	}
	events_iter_done(&it);
	ASSERT(fclose(r->rows_f) == 0);
	r->rows_f = NULL;
}

/* --- the page ------------------------------------------------------------------ */

static void head(FILE *f, const struct report *r)
{
	char css[64], js[64];
	size_t i;

	csp_hash(report_page_css, css);
	csp_hash(report_page_js, js);
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", f);
	fprintf(f, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
		"style-src 'sha256-%s'; script-src 'sha256-%s'; img-src data:; "
		"base-uri 'none'; form-action 'none'\">\n", css, js);
	fputs("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"referrer\" content=\"no-referrer\">\n<title>airlock report: ", f);
	for (i = 0; i < r->ns && i < 3; i++) {
		h(f, r->s[i].id);
		if (i + 1 < r->ns && i < 2)
			fputs(", ", f);
	}
	if (r->ns > 3)
		fprintf(f, " and %zu more", r->ns - 3);
	fprintf(f, "</title>\n<style>%s</style>\n</head>\n", report_page_css);
}

static void top(FILE *f, const struct report *r)
{
	char now[25];
	size_t i;

	util_rfc3339_now(now);
	fputs("<body>\n<header class=\"top\"><div class=\"brand\">air<span>lock</span></div>"
	      "<div class=\"what\">session report</div><div class=\"gen\">", f);
	for (i = 0; i < r->set.nfiles; i++) {
		h(f, r->set.files[i].path);
		fputs(i + 1 < r->set.nfiles ? ", " : "", f);
	}
	fputs(" &middot; generated ", f);
	put_ts(f, now);
	fputs("</div></header>\n<main>\n", f);
}

static const char icon_ok[] =
	"<svg class=\"icon\" viewBox=\"0 0 44 44\" aria-hidden=\"true\"><circle cx=\"22\" "
	"cy=\"22\" r=\"21\" fill=\"#12805c\"/><path d=\"M12.5 22.5l6.5 6.5 13-14\" "
	"stroke=\"#fff\" stroke-width=\"4\" fill=\"none\" stroke-linecap=\"round\" "
	"stroke-linejoin=\"round\"/></svg>";
static const char icon_bad[] =
	"<svg class=\"icon\" viewBox=\"0 0 44 44\" aria-hidden=\"true\"><circle cx=\"22\" "
	"cy=\"22\" r=\"21\" fill=\"#c42b2b\"/><path d=\"M14 14l16 16M30 14L14 30\" "
	"stroke=\"#fff\" stroke-width=\"4\" fill=\"none\" stroke-linecap=\"round\"/></svg>";

static void verification(FILE *f, const struct report *r)
{
	const size_t *file_lines = r->file_lines, *file_sessions = r->file_sessions;
	const struct events_file *bad = events_first_failure(&r->set);
	size_t i, lines = 0;

	for (i = 0; i < r->set.nfiles; i++)
		lines += file_lines[i];
	fprintf(f, "<section id=\"verification\" class=\"card %s\" data-ok=\"%s\" "
		"data-pinned=\"%s\">\n%s<div>\n", bad ? "bad" : "ok", bad ? "false" : "true",
		r->set.pubkey_path ? "true" : "false", bad ? icon_bad : icon_ok);
	if (!bad) {
		char c[32];

		fmt_count(lines, c, sizeof(c));
		fprintf(f, "<h1>Verified: every line is intact</h1>\n<p>%s line%s in %zu "
			"session%s: the SHA-256 chain, every Ed25519 signature, the seq "
			"numbers and each session's closing counts check out.</p>\n",
			c, lines == 1 ? "" : "s", r->ns, r->ns == 1 ? "" : "s");
	} else {
		fputs("<h1>Verification failed: this record was altered or is incomplete</h1>\n"
		      "<p>", f);
		h(f, bad->path);
		fprintf(f, ", line %zu: <b>", bad->vr.bad_line);
		h(f, bad->vr.reason);
		if (bad->vr.bad_line <= 1)
			fputs("</b>. Nothing in it verified: what is shown below proves "
			      "nothing.</p>\n", f);
		else
			fprintf(f, "</b>. The lines before line %zu verified; line %zu and "
				"every line after it are shown below but prove nothing "
				"(striped in the timeline).</p>\n", bad->vr.bad_line,
				bad->vr.bad_line);
	}
	if (r->set.pubkey_path) {
		fputs("<span class=\"key pinned\">Key pinned (--pubkey ", f);
		h(f, r->set.pubkey_path);
		fputs("): every line was signed by that key, which proves who wrote it</span>\n", f);
	} else {
		fputs("<span class=\"key unpinned\">Key not pinned: each session was checked "
		      "against the key its own session.start names, which proves the record "
		      "was not altered since, not who wrote it (pin it with --pubkey)</span>\n", f);
	}
	fputs("<h3>Files</h3>\n<table class=\"files\"><tr><th>file</th><th class=\"num\">lines"
	      "</th><th class=\"num\">sessions</th><th>result</th></tr>\n", f);
	for (i = 0; i < r->set.nfiles; i++) {
		const struct events_file *ef = &r->set.files[i];

		fprintf(f, "<tr class=\"verify-file\" data-ok=\"%s\" data-line=\"%zu\" "
			"data-reason=\"", ef->vr.ok ? "true" : "false", ef->vr.bad_line);
		h(f, ef->vr.reason);
		fputs("\"><td class=\"mono\">", f);
		h(f, ef->path);
		fprintf(f, "</td><td class=\"num\">%zu</td><td class=\"num\">%zu</td>",
			file_lines[i], file_sessions[i]);
		if (ef->vr.ok) {
			fputs("<td>intact</td></tr>\n", f);
		} else {
			fprintf(f, "<td class=\"reason\">line %zu: ", ef->vr.bad_line);
			h(f, ef->vr.reason);
			fputs("</td></tr>\n", f);
		}
	}
	fputs("</table>\n</div>\n</section>\n", f);
}

static void nav(FILE *f, const struct report *r)
{
	size_t i;

	if (r->ns < 2)
		return;
	fputs("<nav class=\"card sessions\"><h2>Sessions</h2>\n<table><tr><th>session</th>"
	      "<th>mode</th><th>command</th><th>started</th><th class=\"num\">receipts</th>"
	      "<th class=\"num\">blocked</th><th class=\"num\">would block</th><th>exit</th>"
	      "</tr>\n", f);
	for (i = 0; i < r->ns; i++) {
		const struct rsession *s = &r->s[i];

		fprintf(f, "<tr><td><a href=\"#session-%zu\">", i + 1);
		h(f, s->id);
		fputs("</a>", f);
		if (s->unverified)
			fputs(" <span class=\"pill unverified\">not verified</span>", f);
		fputs("</td><td><span class=\"pill ", f);
		h(f, s->mode);
		fputs("\">", f);
		h(f, *s->mode ? s->mode : "?");
		fputs("</span></td><td class=\"mono\">", f);
		h(f, s->argv0);
		fputs("</td><td>", f);
		if (s->start_ms >= 0) {
			char ts[40];
			time_t t = (time_t)(s->start_ms / 1000);
			struct tm tm;

			gmtime_r(&t, &tm);
			strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S UTC", &tm);
			h(f, ts);
		}
		fprintf(f, "</td><td class=\"num\">%zu</td><td class=\"num\">%zu",
			s->last_line - s->first_line + 1, s->decisions[RECEIPT_BLOCK]);
		if (s->uv)
			fprintf(f, " <span class=\"unverified-n\">+%zu unverified</span>",
				s->uv->decisions[RECEIPT_BLOCK]);
		fprintf(f, "</td><td class=\"num\">%zu", s->decisions[RECEIPT_WOULD_BLOCK]);
		if (s->uv)
			fprintf(f, " <span class=\"unverified-n\">+%zu unverified</span>",
				s->uv->decisions[RECEIPT_WOULD_BLOCK]);
		fputs("</td><td>", f);
		if (s->has_exit)
			fprintf(f, "<span class=\"pill %s\">%lld</span>",
				s->exit_status ? "exitbad" : "exit0", s->exit_status);
		else
			fputs("<span class=\"pill exitbad\">no session.end</span>", f);
		fputs("</td></tr>\n", f);
	}
	fputs("</table></nav>\n", f);
}

static void fact(FILE *f, const char *dt, const char *dd, const char *cls)
{
	fprintf(f, "<div%s><dt>%s</dt><dd%s>", strcmp(cls, "wide") == 0 ? " class=\"wide\"" : "",
		dt, strcmp(cls, "mono") == 0 || strcmp(cls, "wide") == 0 ? " class=\"mono\"" : "");
	h(f, dd);
	fputs("</dd></div>\n", f);
}

static void put_stat(FILE *f, const char *cls, size_t n, const char *what)
{
	char c[32];

	fmt_count(n, c, sizeof(c));
	fprintf(f, "<div class=\"stat %s\"><b>%s</b><span>%s</span></div>", cls, c, what);
}

static void counts(FILE *f, const struct rsession *s)
{
	size_t n, i;
	const char **keys = events_sorted_keys(s->counts, &n);
	json_int_t max = 1;

	for (i = 0; i < n; i++)
		if (json_integer_value(json_object_get(s->counts, keys[i])) > max)
			max = json_integer_value(json_object_get(s->counts, keys[i]));
	fputs("<table class=\"counts\">\n", f);
	for (i = 0; i < n; i++) {
		const struct events_type *ti = events_type_find(keys[i]);
		json_int_t c = json_integer_value(json_object_get(s->counts, keys[i]));
		double w = 100.0 * (double)c / (double)max;

		fprintf(f, "<tr data-type=\"");
		h(f, keys[i]);
		fputs("\"><td class=\"type\">", f);
		h(f, keys[i]);
		fputs("</td><td class=\"label\">", f);
		h(f, ti->name[0] ? ti->label : "");
		fprintf(f, "</td><td class=\"bar\"><svg viewBox=\"0 0 100 10\" "
			"preserveAspectRatio=\"none\" aria-hidden=\"true\"><rect class=\"track\" "
			"width=\"100\" height=\"10\" rx=\"2\"/><rect class=\"g-%s\" width=\"%.2f\" "
			"height=\"10\" rx=\"2\"/></svg></td><td class=\"num\">%lld</td></tr>\n",
			events_group_to_string(ti->group), w < 1.5 ? 1.5 : w, (long long)c);
	}
	fputs("</table>\n", f);
	free(keys);
}

struct ranked {
	const char *key;
	json_int_t n, seq;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* A subject as fields (name, then value; strings as themselves, other
 * values as compact JSON; the bytes as signed are in the timeline). Text
 * that is not a JSON object is shown as it is. */
static void put_subject(FILE *f, const char *raw)
{
	json_t *o = json_loads(raw, JSON_DECODE_ANY, NULL);

	fputs("<span class=\"subject\">", f);
	if (!json_is_object(o) || json_object_size(o) == 0) {
		h(f, raw);
	} else {
		const char *k;
		json_t *v;

		json_object_foreach(o, k, v) {
			char *t = NULL;

			if (json_is_real(v)) {
				char num[40];

				snprintf(num, sizeof(num), "%.15g", json_real_value(v));
				t = util_xstrdup(num);
			} else if (!json_is_string(v)) {
				t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			}
			fputs("<span class=\"field\" data-key=\"", f);
			h(f, k);
			fputs("\"><span class=\"k\">", f);
			h(f, k);
			fputs("</span> <span class=\"v\">", f);
			h(f, t ? t : json_string_value(v));
			fputs("</span></span> ", f);
			free(t);
		}
	}
	fputs("</span>", f);
	json_decref(o);
}

static void blocks(FILE *f, const struct rsession *s, size_t index)
{
	size_t n = json_object_size(s->blocks), i = 0;
	struct ranked *rules = util_xcalloc(n + 1, sizeof(*rules));
	const char *k, *d;
	json_t *b, *v;

	if (n == 0) {
		fputs("<p class=\"empty\">Nothing was blocked or would have been.</p>\n", f);
		free(rules);
		return;
	}
	json_object_foreach(s->blocks, k, b) {
		rules[i].key = k;
		rules[i].n = json_integer_value(json_object_get(b, "n"));
		rules[i++].seq = 0;
	}
	qsort(rules, n, sizeof(*rules), cmp_ranked);
	fputs("<table class=\"blocks\"><tr><th>rule</th><th>decisions</th><th>exact subjects"
	      "</th></tr>\n", f);
	for (i = 0; i < n; i++) {
		json_t *subjects;
		json_int_t more;
		struct ranked *subs;
		size_t j, ns;

		b = json_object_get(s->blocks, rules[i].key);
		subjects = json_object_get(b, "subjects");
		fputs("<tr data-rule=\"", f);
		h(f, rules[i].key);
		fputs("\"><td class=\"rule\">", f);
		h(f, rules[i].key);
		fputs("<br><span class=\"label\">", f);
		json_object_foreach(json_object_get(b, "types"), d, v) {
			h(f, d);
			fputc(' ', f);
		}
		fprintf(f, "</span><br><a class=\"jump\" href=\"#timeline\" data-session=\"%zu\" "
			"data-q=\"", index);
		h(f, rules[i].key);
		fputs("\">in the timeline &rsaquo;</a></td><td>", f);
		json_object_foreach(json_object_get(b, "decisions"), d, v) {
			fprintf(f, "<span class=\"pill ");
			h(f, d);
			fprintf(f, "\">%lld ", (long long)json_integer_value(v));
			h(f, d);
			fputs("</span> ", f);
		}
		fputs("</td><td><ul>", f);
		ns = json_object_size(subjects);
		subs = util_xcalloc(ns + 1, sizeof(*subs));
		j = 0;
		json_object_foreach(subjects, d, v) {
			subs[j].key = d;
			subs[j].n = json_integer_value(json_array_get(v, 0));
			subs[j++].seq = json_integer_value(json_array_get(v, 1));
		}
		qsort(subs, ns, sizeof(*subs), cmp_ranked);
		for (j = 0; j < ns && j < SUBJECTS_SHOWN; j++) {
			v = json_object_get(subjects, subs[j].key);
			fputs("<li data-decision=\"", f);
			h(f, json_string_value(json_array_get(v, 2)));
			fputs("\">", f);
			put_subject(f, subs[j].key);
			fprintf(f, "<span class=\"n\">&times;%lld &middot; seq %lld</span></li>",
				(long long)subs[j].n, (long long)subs[j].seq);
		}
		more = (json_int_t)(ns > SUBJECTS_SHOWN ? ns - SUBJECTS_SHOWN : 0) +
		       json_integer_value(json_object_get(b, "more"));
		if (more)
			fprintf(f, "<li class=\"more\">and %lld more distinct subjects (see the "
				"timeline)</li>", (long long)more);
		fputs("</ul></td></tr>\n", f);
		free(subs);
	}
	fputs("</table>\n", f);
	free(rules);
}

static void secrets(FILE *f, const struct rsession *s)
{
	size_t n, i;
	const char **keys = events_sorted_keys(s->secrets, &n);

	if (n == 0) {
		fputs("<p class=\"empty\">No brokered secret was used.</p>\n", f);
		free(keys);
		return;
	}
	fputs("<table class=\"secrets\"><tr><th>secret</th><th>host</th><th>headers</th>"
	      "<th>what happened</th></tr>\n", f);
	for (i = 0; i < n; i++) {
		json_t *e = json_object_get(s->secrets, keys[i]), *v;
		const char *k, *hd;

		fputs("<tr data-secret=\"", f);
		h(f, events_str(e, "secret"));
		fputs("\" data-host=\"", f);
		h(f, events_str(e, "host"));
		fputs("\"><td class=\"mono\"><b>", f);
		h(f, events_str(e, "secret"));
		fputs("</b></td><td class=\"mono\">", f);
		h(f, events_str(e, "host"));
		fputs("</td><td class=\"mono\">", f);
		json_object_foreach(json_object_get(e, "headers"), hd, v) {
			h(f, hd);
			fputc(' ', f);
		}
		fputs("</td><td>", f);
		json_object_foreach(json_object_get(e, "types"), k, v) {
			const char *slash = strchr(k, '/');
			const char *dec = slash ? slash + 1 : "";
			const char *what = strncmp(k, "secret.inject", 13) == 0   ? "injected"
					   : strncmp(k, "secret.scrub", 12) == 0  ? "scrubbed"
					   : strncmp(k, "secret.block", 12) == 0  ? "refused"
										  : k;

			if (strcmp(what, "refused") == 0 && strcmp(dec, "would_block") == 0)
				what = "would refuse";
			fputs("<span class=\"pill ", f);
			h(f, strcmp(what, "injected") == 0 || strcmp(what, "scrubbed") == 0 ? "info" : dec);
			fputs("\">", f);
			h(f, what);
			fprintf(f, " &times;%lld</span> ", (long long)json_integer_value(v));
		}
		fprintf(f, "<span class=\"n\">from seq %lld</span></td></tr>\n",
			(long long)json_integer_value(json_object_get(e, "first")));
	}
	fputs("</table>\n", f);
	free(keys);
}

static void git(FILE *f, const struct rsession *s)
{
	size_t n, i;
	const char **keys = events_sorted_keys(s->git, &n);
	json_t *t;

	if (n == 0 && json_array_size(s->tokens) == 0) {
		fputs("<p class=\"empty\">No git operation.</p>\n", f);
		free(keys);
		return;
	}
	if (n) {
		fputs("<table class=\"git\"><tr><th>repository</th><th>operation</th>"
		      "<th class=\"num\">allowed</th><th class=\"num\">would block</th>"
		      "<th class=\"num\">blocked</th></tr>\n", f);
		for (i = 0; i < n; i++) {
			json_t *ops = json_object_get(s->git, keys[i]), *decs;
			const char *op;

			json_object_foreach(ops, op, decs) {
				fputs("<tr data-repo=\"", f);
				h(f, keys[i]);
				fputs("\" data-operation=\"", f);
				h(f, op);
				fputs("\"><td class=\"mono\"><b>", f);
				h(f, keys[i]);
				fputs("</b></td><td>", f);
				h(f, op);
				fprintf(f, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
					"<td class=\"num\">%lld</td></tr>\n",
					(long long)json_integer_value(json_object_get(decs, "allow")),
					(long long)json_integer_value(json_object_get(decs, "would_block")),
					(long long)json_integer_value(json_object_get(decs, "block")));
			}
		}
		fputs("</table>\n", f);
	}
	json_array_foreach(s->tokens, i, t) {
		char *subj = json_dumps(json_array_get(t, 2), JSON_COMPACT | JSON_ENCODE_ANY);

		ASSERT(subj);
		fprintf(f, "<p class=\"token\">Token minted (seq %lld, ",
			(long long)json_integer_value(json_array_get(t, 0)));
		put_ts(f, json_string_value(json_array_get(t, 1)));
		fputs("): <code>", f);
		h(f, subj);
		fputs("</code></p>\n", f);
		free(subj);
	}
	free(keys);
}

static int cmp_dest(const void *a, const void *b)
{
	return cmp_ranked(a, b);
}

static void dests(FILE *f, const struct rsession *s)
{
	size_t n = json_object_size(s->dests), i = 0;
	struct ranked *d = util_xcalloc(n + 1, sizeof(*d));
	const char *k;
	json_t *e;

	if (n == 0) {
		fputs("<p class=\"empty\">No network request.</p>\n", f);
		free(d);
		return;
	}
	json_object_foreach(s->dests, k, e) {
		d[i].key = k;
		d[i].n = json_integer_value(json_object_get(e, "allow")) +
			 json_integer_value(json_object_get(e, "would_block")) +
			 json_integer_value(json_object_get(e, "block")) +
			 json_integer_value(json_object_get(e, "requests"));
		d[i++].seq = 0;
	}
	qsort(d, n, sizeof(*d), cmp_dest);
	fputs("<table class=\"dests\"><tr><th>host:port</th><th class=\"num\">allowed</th>"
	      "<th class=\"num\">would block</th><th class=\"num\">blocked</th>"
	      "<th class=\"num\">HTTP requests</th></tr>\n", f);
	for (i = 0; i < n && i < DESTS_SHOWN; i++) {
		e = json_object_get(s->dests, d[i].key);
		fputs("<tr><td class=\"mono\">", f);
		h(f, d[i].key);
		fprintf(f, "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
			"<td class=\"num\">%lld</td><td class=\"num\">%lld</td></tr>\n",
			(long long)json_integer_value(json_object_get(e, "allow")),
			(long long)json_integer_value(json_object_get(e, "would_block")),
			(long long)json_integer_value(json_object_get(e, "block")),
			(long long)json_integer_value(json_object_get(e, "requests")));
	}
	if (n > DESTS_SHOWN)
		fprintf(f, "<tr><td colspan=\"5\" class=\"empty\">and %zu more</td></tr>\n",
			n - DESTS_SHOWN);
	fputs("</table>\n", f);
	free(d);
}

/* A step of 1, 2, 2.5 or 5 times a power of ten giving four or five
 * ticks up to @max (> 0). */
static double nice_step(double max)
{
	static const double m[] = { 1, 2, 2.5, 5 };
	double p = 1;
	size_t i;

	while (p * 10 <= max / 4)
		p *= 10;
	while (p > max / 4)
		p /= 10;
	for (i = 0; i < ARRAY_SIZE(m); i++)
		if (max / (m[i] * p) <= 5)
			return m[i] * p;
	return 10 * p;
}

static void rel_time(int64_t ms, char *out, size_t len)
{
	if (ms < 60000)
		snprintf(out, len, "+%.1f s", (double)ms / 1000);
	else
		snprintf(out, len, "+%lld:%02lld", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
}

#define CW 560.0
#define CH 270.0
#define CL 62.0
#define CR 16.0
#define CT 14.0
#define CB 34.0

static void chart(FILE *f, const struct rsession *s)
{
	int64_t x0 = s->start_ms, x1 = s->end_ms;
	double ymax = 0, step;
	size_t i, every;
	int k;
	char money[32];

	if (s->npts == 0 && !s->has_cap && !s->has_spend) {
		fputs("<p class=\"empty\">No metered call in this session.</p>\n", f);
		return;
	}
	if (x0 < 0 && s->npts)
		x0 = s->pts[0].ms;
	if (x1 < x0 + 1000)
		x1 = x0 + 1000;
	for (i = 0; i < s->npts; i++)
		if (s->pts[i].total > ymax)
			ymax = s->pts[i].total;
	if (s->has_spend && s->spend_usd > ymax)
		ymax = s->spend_usd;
	if (s->has_cap && s->cap_usd > ymax)
		ymax = s->cap_usd;
	ymax = ymax > 0 ? ymax * 1.12 : 1;
	step = nice_step(ymax);

#define X(ms) (CL + (CW - CL - CR) * (double)((ms) - x0) / (double)(x1 - x0))
#define Y(v) (CH - CB - (CH - CT - CB) * (v) / ymax)
	fprintf(f, "<div class=\"chart\"><svg class=\"spend\" viewBox=\"0 0 %.0f %.0f\" "
		"role=\"img\" aria-label=\"spend over time\" data-cap=\"%s\" data-points=\"%zu\">\n",
		CW, CH, s->has_cap ? "true" : "false", s->npts);
	for (k = 0; (double)k * step <= ymax + 1e-12; k++) {
		double y = (double)k * step;

		snprintf(money, sizeof(money), step < 0.01 ? "$%.4f" : "$%.2f", y);
		fprintf(f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", CL, CW - CR,
			Y(y), Y(y), CL - 8, Y(y) + 4, money);
	}
	for (i = 0; i <= 4; i++) {
		int64_t t = x0 + (x1 - x0) * (int64_t)i / 4;
		char lbl[32];

		rel_time(t - x0, lbl, sizeof(lbl));
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>\n", X(t),
			CH - CB + 18, i == 0 ? "start" : i == 4 ? "end" : "middle", lbl);
	}
	fprintf(f, "<line class=\"axis\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", CL,
		CW - CR, Y(0), Y(0));
	every = s->npts > CHART_POINTS_MAX ? s->npts / CHART_POINTS_MAX + 1 : 1;
	/* The spent line: a step up at each charge. */
	fprintf(f, "<path class=\"area\" d=\"M%.1f %.1f", X(x0), Y(0));
	for (i = 0; i < s->npts; i++) {
		if (s->pts[i].refused || (i % every && i + 1 != s->npts))
			continue;
		fprintf(f, "H%.1fV%.1f", X(s->pts[i].ms), Y(s->pts[i].total));
	}
	fprintf(f, "H%.1fV%.1fZ\"/>\n", X(x1), Y(0));
	fprintf(f, "<path class=\"spent\" d=\"M%.1f %.1f", X(x0), Y(0));
	for (i = 0; i < s->npts; i++) {
		if (s->pts[i].refused || (i % every && i + 1 != s->npts))
			continue;
		fprintf(f, "H%.1fV%.1f", X(s->pts[i].ms), Y(s->pts[i].total));
	}
	fprintf(f, "H%.1f\"/>\n", X(x1));
	for (i = 0; s->npts <= 400 && i < s->npts; i++) {
		const struct spend_point *p = &s->pts[i];
		char cost[32], tot[32];

		fmt_money(p->cost, cost, sizeof(cost));
		fmt_money(p->total, tot, sizeof(tot));
		fprintf(f, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"><title>",
			p->refused ? "refused" : "pt", X(p->ms), Y(p->total),
			p->refused ? "5.5" : "3");
		h(f, p->model);
		if (p->refused)
			fprintf(f, ": refused (budget.block), spent %s</title></circle>\n", tot);
		else
			fprintf(f, ": %s, total %s</title></circle>\n", cost, tot);
	}
	if (s->has_cap) {
		fmt_money(s->cap_usd, money, sizeof(money));
		fprintf(f, "<line class=\"cap\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
			"<text class=\"caplabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">cap %s"
			"</text>\n", CL, CW - CR, Y(s->cap_usd), Y(s->cap_usd), CW - CR - 4,
			Y(s->cap_usd) - 6, money);
	}
	fputs("</svg>\n<div class=\"legend\"><span><i></i>spent (session total)</span>", f);
	if (s->has_cap)
		fputs("<span><i class=\"cap\"></i>cap</span>", f);
	fputs("<span><i class=\"ref\"></i>call refused for the cap</span></div></div>\n", f);
#undef X
#undef Y
}

/* The figures of @s: its facts, counts, blocks, secrets, git, spend and
 * destinations. */
static void figures(FILE *f, const struct report *r, const struct rsession *s, size_t index)
{
	const struct events_file *ef = &r->set.files[s->file];
	char buf[128];

	fputs("<dl class=\"facts\">\n", f);
	fact(f, "Command", *s->argv0 ? s->argv0 : "unknown", "mono");
	if (s->start_ms >= 0) {
		time_t t = (time_t)(s->start_ms / 1000);
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
		fact(f, "Started", buf, "");
	} else {
		fact(f, "Started", "unknown", "");
	}
	fmt_duration(s->start_ms >= 0 && s->end_ms >= 0 ? s->end_ms - s->start_ms : -1, buf,
		     sizeof(buf));
	fact(f, "Duration", buf, "");
	if (s->has_exit)
		snprintf(buf, sizeof(buf), "%lld", s->exit_status);
	else
		snprintf(buf, sizeof(buf), "%s", s->ended ? "not recorded" : "no session.end");
	fact(f, "Exit", buf, "");
	fact(f, "Policy digest", *s->policy ? s->policy : "unknown", "wide");
	snprintf(buf, sizeof(buf), "%zu (lines %zu-%zu of ", s->last_line - s->first_line + 1,
		 s->first_line, s->last_line);
	fprintf(f, "<div><dt>Receipts</dt><dd>");
	h(f, buf);
	h(f, ef->path);
	fputs(")</dd></div>\n", f);
	if (s->has_spend || s->npts || s->has_cap) {
		char a[32];

		fmt_money(s->has_spend ? s->spend_usd : s->total, a, sizeof(a));
		if (s->has_cap) {
			char b[32];

			fmt_money(s->cap_usd, b, sizeof(b));
			snprintf(buf, sizeof(buf), "%s of a %s cap", a, b);
		} else {
			snprintf(buf, sizeof(buf), "%s (no cap recorded)", a);
		}
		fact(f, "Spend", buf, "");
	} else {
		fact(f, "Spend", "not metered", "");
	}
	fputs("</dl>\n<div class=\"stats\">", f);
	put_stat(f, "block", s->decisions[RECEIPT_BLOCK], "blocked");
	put_stat(f, "would_block", s->decisions[RECEIPT_WOULD_BLOCK], "would have been blocked");
	put_stat(f, "allow", s->decisions[RECEIPT_ALLOW], "allowed");
	put_stat(f, "info", s->decisions[RECEIPT_INFO] + s->decisions[RECEIPT_DECISION_COUNT],
	     "recorded for information");
	fputs("</div>\n<div class=\"cols\"><div><h3>Blocks and would-blocks, by rule</h3>\n", f);
	blocks(f, s, index);
	fputs("</div><div><h3>Receipts by type</h3>\n", f);
	counts(f, s);
	fputs("</div></div>\n<div class=\"cols even\"><div><h3>Spend over time</h3>\n", f);
	chart(f, s);
	fputs("</div><div><h3>Secrets</h3>\n", f);
	secrets(f, s);
	fputs("<h3>Git, by repository</h3>\n", f);
	git(f, s);
	fputs("</div></div>\n<h3>Destinations</h3>\n", f);
	dests(f, s);
}

static void session_section(FILE *f, const struct report *r, size_t index)
{
	const struct rsession *s = &r->s[index];
	const struct events_file *ef = &r->set.files[s->file];

	fprintf(f, "<section class=\"card session\" id=\"session-%zu\" data-session=\"", index + 1);
	h(f, s->id);
	fputs("\" data-mode=\"", f);
	h(f, s->mode);
	fprintf(f, "\" data-verified=\"%s\">\n<div class=\"session-head\"><span class=\"sid\">",
		s->unverified ? "false" : "true");
	h(f, s->id);
	fputs("</span><span class=\"pill ", f);
	h(f, s->mode);
	fputs("\">", f);
	h(f, *s->mode ? s->mode : "mode unknown");
	fputs("</span>", f);
	if (strcmp(s->opener, "session.refused") == 0)
		fputs("<span class=\"pill refused\">refused to start</span>", f);
	if (s->has_exit)
		fprintf(f, "<span class=\"pill %s\">exit %lld</span>",
			s->exit_status ? "exitbad" : "exit0", s->exit_status);
	if (s->failed)
		fprintf(f, "<span class=\"pill unverified\">verification failed at line %zu</span>",
			s->bad_line);
	else if (s->unverified)
		fputs("<span class=\"pill unverified\">not verified</span>", f);
	fputs("</div>\n", f);
	if (s->failed || s->unverified) {
		fputs("<div class=\"banner\">", f);
		if (s->failed) {
			fputs("Verification failed in this session at ", f);
			h(f, ef->path);
			fprintf(f, " line %zu: ", s->bad_line);
			h(f, ef->vr.reason);
			fputs(". What follows from that line on proves nothing.", f);
		} else {
			fputs("This session comes after the line where verification failed: "
			      "nothing in it is verified.", f);
		}
		fputs("</div>\n", f);
	}
	if (s->uv)
		fputs("<p class=\"verified-only\">The figures below count only the lines "
		      "that verify; those of the lines that do not are set apart after "
		      "them, greyed.</p>\n", f);
	figures(f, r, s, index);
	if (s->uv) {
		fprintf(f, "<div class=\"unverified-figures\" data-verified=\"false\">"
			"<h3>From lines %zu-%zu, which do not verify: not facts</h3>\n",
			s->uv->first_line, s->uv->last_line);
		figures(f, r, s->uv, index);
		fputs("</div>\n", f);
	}
	fputs("</section>\n", f);
}

static void timeline(FILE *f, const struct report *r)
{
	int d;

	fprintf(f, "<section class=\"card\" id=\"timeline\"><h2>Timeline</h2>\n"
		"<div class=\"filters\"><select id=\"f-session\" aria-label=\"session\">"
		"<option value=\"\">all sessions</option></select>"
		"<select id=\"f-type\" aria-label=\"type\"><option value=\"\">all types</option>"
		"</select><span id=\"f-decisions\">");
	for (d = 0; d <= RECEIPT_DECISION_COUNT; d++)
		fprintf(f, "<label><input type=\"checkbox\" value=\"%d\" checked> %s</label>", d,
			d < RECEIPT_DECISION_COUNT
				? receipt_decision_to_string((enum receipt_decision)d)
				: "other");
	fprintf(f, "</span><input type=\"search\" id=\"f-text\" placeholder=\"filter: host, "
		"rule, reason&hellip;\" aria-label=\"text\"><span id=\"tl-count\">%zu receipts"
		"</span></div>\n<div id=\"tl-head\"><span>seq</span><span>time (UTC)</span>"
		"<span>type</span><span>decision</span><span>rule</span><span>subject</span>"
		"</div>\n<div id=\"tl-view\"><div id=\"tl-spacer\"></div></div>\n"
		"<div id=\"tl-detail\" hidden></div>\n<noscript><p class=\"empty\">The timeline "
		"needs JavaScript; everything above is plain HTML.</p></noscript>\n</section>\n",
		r->nrows);
}

static void data(FILE *f, const struct report *r)
{
	json_t *sessions = json_array(), *types = json_array(), *decisions = json_array();
	size_t i;
	int d;
	json_t *t;

	for (i = 0; i < r->ns; i++)
		json_array_append_new(sessions, json_pack("{s:s, s:s}", "id", r->s[i].id, "file",
							  r->set.files[r->s[i].file].path));
	json_array_foreach(r->type_list, i, t) {
		const struct events_type *ti = events_type_find(json_string_value(t));

		json_array_append_new(types, json_pack("[O, s, s]", t,
						       ti->name[0] ? ti->label : json_string_value(t),
						       events_group_to_string(ti->group)));
	}
	for (d = 0; d < RECEIPT_DECISION_COUNT; d++)
		json_array_append_new(decisions,
				      json_string(receipt_decision_to_string((enum receipt_decision)d)));
	json_array_append_new(decisions, json_string("other"));
	fputs("<script type=\"application/json\" id=\"airlock-data\">{\"sessions\":", f);
	put_json(f, sessions);
	fputs(",\"types\":", f);
	put_json(f, types);
	fputs(",\"rules\":", f);
	put_json(f, r->rule_list);
	fputs(",\"reasons\":", f);
	put_json(f, r->reason_list);
	fputs(",\"decisions\":", f);
	put_json(f, decisions);
	fputs(",\"rows\":[", f);
	fwrite(r->rows, 1, r->rows_len, f);
	fputs("]}</script>\n", f);
	json_decref(sessions);
	json_decref(types);
	json_decref(decisions);
}

static void page(FILE *f, const struct report *r)
{
	size_t i;

	head(f, r);
	top(f, r);
	verification(f, r);
	nav(f, r);
	for (i = 0; i < r->ns; i++)
		session_section(f, r, i);
	timeline(f, r);
	fprintf(f, "<footer>airlock %s &middot; <span id=\"render-ms\"></span></footer>\n"
		"</main>\n", AIRLOCK_VERSION);
	data(f, r);
	fprintf(f, "<script>%s</script>\n</body>\n</html>\n", report_page_js);
}

static int parse_opts(int argc, char **argv, struct report_opts *o)
{
	enum { OPT_PUBKEY = 256 };
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "pubkey", required_argument, NULL, OPT_PUBKEY },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case OPT_PUBKEY:
			o->pubkey = optarg;
			break;
		case 'h':
			fputs(cmd_report_help, stdout);
			return -1;
		case ':':
			return usage("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage("unknown option '-%c'", optopt);
			return usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->out || !*o->out)
		return usage("-o FILE.html is required");
	if (optind >= argc)
		return usage("expected one or more EVENTS files (- for standard input)");
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report r;
	size_t i;
	char err[512], *tmp = NULL;
	bool to_stdout;
	FILE *f = NULL;
	int rc, fd = -1;

	memset(&r, 0, sizeof(r));
	rc = parse_opts(argc, argv, &r.o);
	if (rc != 0) {
		rc = rc < 0 ? 0 : rc;
		goto out;
	}
	rc = EXIT_USAGE;
	if (events_load(&r.set, argv + optind, (size_t)(argc - optind), r.o.pubkey, err,
			sizeof(err)) < 0) {
		fprintf(stderr, "airlock: report: %s\n", err);
		goto out;
	}
	to_stdout = strcmp(r.o.out, "-") == 0;
	if (!to_stdout) {
		tmp = util_xasprintf("%s.tmp.XXXXXX", r.o.out);
		fd = mkstemp(tmp);
		if (fd < 0 || fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
			fprintf(stderr, "airlock: report: %s: %s\n", r.o.out, strerror(errno));
			goto out;
		}
		fd = -1;
	} else {
		f = stdout;
	}
	r.types = json_object();
	r.rules = json_object();
	r.reasons = json_object();
	r.type_list = json_array();
	r.rule_list = json_array();
	r.reason_list = json_array();
	read_all(&r);
	page(f, &r);
	if (fflush(f) != 0 || ferror(f) || (!to_stdout && fsync(fileno(f)) < 0))
		goto write_failed;
	if (!to_stdout) {
		if (fclose(f) != 0) {
			f = NULL;
			goto write_failed;
		}
		f = NULL;
		if (rename(tmp, r.o.out) < 0)
			goto write_failed;
		free(tmp);
		tmp = NULL;
	}
	rc = events_first_failure(&r.set) ? EXIT_NOT_VERIFIED : 0;
	if (rc)
		fprintf(stderr, "airlock: report: %s:%zu: %s (the page shows it)\n",
			events_first_failure(&r.set)->path, events_first_failure(&r.set)->vr.bad_line,
			events_first_failure(&r.set)->vr.reason);
	goto out;
write_failed:
	fprintf(stderr, "airlock: report: %s: %s\n", r.o.out, strerror(errno ? errno : EIO));
	rc = EXIT_USAGE;
out:
	if (f && f != stdout)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	for (i = 0; i < r.ns; i++)
		session_free(&r.s[i]);
	free(r.s);
	free(r.rows);
	free(r.file_lines);
	free(r.file_sessions);
	json_decref(r.types);
	json_decref(r.rules);
	json_decref(r.reasons);
	json_decref(r.type_list);
	json_decref(r.rule_list);
	json_decref(r.reason_list);
	events_set_free(&r.set);
	return rc;
}
