/* SPDX-License-Identifier: Apache-2.0
 * cmd_spend.c - `airlock spend show`, `set` and `audit`: read and change
 * the spend ledger, and recompute the charges of receipt streams against
 * it (ledger.h, docs/SPEND.md).
 *
 * Exit statuses: 0 done; 1 the ledger cannot be opened, or has no such
 * session, or refused the change; 2 a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "ledger.h"
#include "meter.h"
#include "util.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2

const char cmd_spend_help[] =
	"usage: airlock spend show [--ledger L] [--json] [SESSION]\n"
	"       airlock spend set [--ledger L] SESSION --cap USD [--parent ID]\n"
	"       airlock spend audit [--ledger L] EVENTS...\n"
	"\n"
	"Reads and changes the spend ledger, where the sessions' caps, spent\n"
	"and reserved money live. Sessions form a tree (`airlock run --parent`):\n"
	"a session's spent and reserved include its descendants', and a call is\n"
	"refused when it would take the session or any ancestor past its cap.\n"
	"\n"
	"show prints the tree under SESSION (every tree without one): each\n"
	"session with its parent, cap, spent and reserved (its subtree's), its\n"
	"own spent, and how many processes run it and how many calls are in\n"
	"flight. Amounts are US dollars.\n"
	"\n"
	"set changes the cap of SESSION; a running session honours it from its\n"
	"next call, and calls refused for the cap go through again once it is\n"
	"raised. A SESSION not in the ledger is created (and the ledger with it)\n"
	"under --parent, as a budget that sessions run under with --parent\n"
	"SESSION; the line printed says which it was.\n"
	"\n"
	"audit reads receipt streams and recomputes every budget.charge from\n"
	"the receipt alone (each token count times the per-million price the\n"
	"receipt names, rounded up to a nano-dollar), checks that each charge\n"
	"adds up to the session's total, and compares each session's last total\n"
	"with its own spent money in the ledger. One line per session, then\n"
	"'audit: ok' or what differs.\n"
	"\n"
	"Options:\n"
	"  --ledger L   sqlite:PATH, postgresql://... (a password comes from\n"
	"               PGPASSWORD or ~/.pgpass, never from the command line);\n"
	"               default: sqlite:$XDG_STATE_HOME/airlock/spend.db, by\n"
	"               default under ~/.local/state\n"
	"  --json       show: one JSON object {\"ledger\":...,\"sessions\":[...]}\n"
	"               with exact amounts in nano-dollars (*_nano) as well\n"
	"  --cap USD    set: the new cap, a decimal number of dollars with at\n"
	"               most 9 decimals, or \"none\" for no cap of its own\n"
	"  --parent ID  set: the parent of a session set creates (for one that\n"
	"               exists, it must be its parent)\n"
	"  -h, --help   print this help\n"
	"\n"
	"Exit status: 0 done (audit: everything agrees), 1 the ledger or the\n"
	"session cannot be had (audit: something differs), 2 usage error.\n";

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock: spend: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see airlock spend --help)\n", stderr);
	return EXIT_USAGE;
}

/* "12", "0.5", "3.000000001" -> nano-dollars, exactly; "none" ->
 * LEDGER_NO_CAP. Digits, at most one '.', at most 9 decimals, at most
 * 1e9 dollars. */
static bool parse_usd(const char *s, int64_t *out)
{
	int64_t whole = 0, frac = 0;
	int digits = 0, decimals = -1;
	const char *p;

	if (!s)
		return false;
	if (strcmp(s, "none") == 0) {
		*out = LEDGER_NO_CAP;
		return true;
	}
	for (p = s; *p; p++) {
		if (*p == '.' && decimals < 0 && digits > 0) {
			decimals = 0;
			continue;
		}
		if (*p < '0' || *p > '9')
			return false;
		if (decimals >= 0) {
			if (++decimals > 9)
				return false;
			frac = frac * 10 + (*p - '0');
		} else {
			if (++digits > 10)
				return false;
			whole = whole * 10 + (*p - '0');
		}
	}
	if (digits == 0 || decimals == 0)
		return false;
	for (; decimals > 0 && decimals < 9; decimals++)
		frac *= 10;
	if (whole > METER_MONEY_MAX / METER_NANO_PER_USD)
		return false;
	*out = whole * METER_NANO_PER_USD + frac;
	return *out <= METER_MONEY_MAX;
}

static void print_usd(char buf[METER_USD_LEN], int64_t v)
{
	if (v == LEDGER_NO_CAP) {
		snprintf(buf, METER_USD_LEN, "-");
		return;
	}
	meter_format_usd(v, buf);
}

static json_t *usd_json(int64_t v)
{
	if (v == LEDGER_NO_CAP)
		return json_null();
	return json_real((double)v / (double)METER_NANO_PER_USD);
}

static json_t *nano_json(int64_t v)
{
	return v == LEDGER_NO_CAP ? json_null() : json_integer(v);
}

static void show_json(const char *spec, const struct ledger_row *rows, size_t n)
{
	json_t *arr = json_array(), *out;
	char *shown = ledger_redact(spec), *text;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ledger_row *r = &rows[i];

		json_array_append_new(arr, json_pack(
			"{s:s, s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i}",
			"session", r->id,
			"parent", r->parent ? json_string(r->parent) : json_null(),
			"depth", (int)r->depth,
			"cap_usd", usd_json(r->t.cap),
			"spent_usd", usd_json(r->t.spent),
			"reserved_usd", usd_json(r->t.reserved),
			"own_spent_usd", usd_json(r->t.own_spent),
			"cap_nano", nano_json(r->t.cap),
			"spent_nano", nano_json(r->t.spent),
			"reserved_nano", nano_json(r->t.reserved),
			"own_spent_nano", nano_json(r->t.own_spent),
			"holders", (int)r->holders,
			"reservations", (int)r->reservations));
	}
	out = json_pack("{s:s, s:o}", "ledger", shown, "sessions", arr);
	/* 15 significant digits print every amount below a million dollars
	 * exactly as the decimal it is; *_nano are exact always. */
	text = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(15));
	ASSERT(text);
	puts(text);
	free(text);
	json_decref(out);
	free(shown);
}

static void show_text(const struct ledger_row *rows, size_t n)
{
	size_t i, w = strlen("SESSION");
	char cap[METER_USD_LEN], spent[METER_USD_LEN], res[METER_USD_LEN],
		own[METER_USD_LEN];

	for (i = 0; i < n; i++)
		if ((size_t)2 * rows[i].depth + strlen(rows[i].id) > w)
			w = (size_t)2 * rows[i].depth + strlen(rows[i].id);
	printf("%-*s  %-16s  %14s  %14s  %14s  %14s  %7s  %8s\n", (int)w, "SESSION",
	       "PARENT", "CAP", "SPENT", "RESERVED", "OWN", "RUNNING", "IN-FLIGHT");
	for (i = 0; i < n; i++) {
		const struct ledger_row *r = &rows[i];

		print_usd(cap, r->t.cap);
		print_usd(spent, r->t.spent);
		print_usd(res, r->t.reserved);
		print_usd(own, r->t.own_spent);
		printf("%*s%-*s  %-16s  %14s  %14s  %14s  %14s  %7u  %8u\n",
		       (int)(2 * r->depth), "", (int)(w - (size_t)2 * r->depth), r->id,
		       r->parent ? r->parent : "-", cap, spent, res, own, r->holders,
		       r->reservations);
	}
}

struct spend_opts {
	const char *ledger;
	const char *session;
	const char *parent;
	const char *cap;
	bool json;
};

/* Returns 0, EXIT_USAGE after a message, or -1 after printing the help. */
static int parse_opts(int argc, char **argv, bool is_set, struct spend_opts *o)
{
	enum { OPT_LEDGER = 256, OPT_JSON, OPT_CAP, OPT_PARENT };
	static const struct option opts[] = {
		{ "ledger", required_argument, NULL, OPT_LEDGER },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "cap", required_argument, NULL, OPT_CAP },
		{ "parent", required_argument, NULL, OPT_PARENT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = is_set ? "set" : "show";
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	/* Options may follow SESSION (`spend set SESSION --cap 5`). */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_LEDGER:
			o->ledger = optarg;
			break;
		case OPT_JSON:
			if (is_set)
				return usage("set takes no --json");
			o->json = true;
			break;
		case OPT_CAP:
			if (!is_set)
				return usage("show takes no --cap");
			o->cap = optarg;
			break;
		case OPT_PARENT:
			if (!is_set)
				return usage("show takes no --parent");
			o->parent = optarg;
			break;
		case 'h':
			fputs(cmd_spend_help, stdout);
			return -1;
		case ':':
			return usage("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage("unknown option '%s' for %s", argv[optind - 1], name);
		}
	}
	if (argc - optind > 1)
		return usage("%s takes one SESSION, not '%s' too", name, argv[optind + 1]);
	o->session = optind < argc ? argv[optind] : NULL;
	if (is_set) {
		if (!o->session)
			return usage("set needs a SESSION");
		if (!o->cap)
			return usage("set needs --cap USD");
	}
	return 0;
}

static enum ledger_status open_ledger(const struct spend_opts *o, bool create,
				      struct ledger **l, char **spec)
{
	struct ledger_options lo = { .create = create };
	enum ledger_status st;
	char err[400];

	*spec = o->ledger ? util_xstrdup(o->ledger) : ledger_default_spec();
	if (!*spec) {
		util_warn("spend: no --ledger, and neither XDG_STATE_HOME nor HOME "
			  "is set for the default");
		return LEDGER_INVALID;
	}
	if (o->ledger) {
		char *shown = ledger_redact(o->ledger);

		if (strcmp(shown, o->ledger) != 0)
			util_warn("spend: the password in --ledger is visible to "
				  "other users (ps); use PGPASSWORD or ~/.pgpass");
		free(shown);
	}
	st = ledger_open(*spec, &lo, l, err, sizeof(err));
	if (st != LEDGER_OK)
		util_warn("spend: %s", err);
	return st;
}

static int spend_show(int argc, char **argv)
{
	struct spend_opts o;
	struct ledger *l = NULL;
	struct ledger_row *rows = NULL;
	size_t n = 0;
	char *spec = NULL;
	int status = EXIT_FAILED, r;

	r = parse_opts(argc, argv, false, &o);
	if (r != 0)
		return r < 0 ? 0 : r;
	if (open_ledger(&o, false, &l, &spec) != LEDGER_OK)
		goto out;
	if (ledger_show(l, o.session, &rows, &n) != LEDGER_OK) {
		util_warn("spend: %s", ledger_error(l));
		goto out;
	}
	if (o.json)
		show_json(spec, rows, n);
	else
		show_text(rows, n);
	status = 0;
out:
	if (fflush(stdout) != 0 || ferror(stdout)) {
		util_warn("spend: cannot write to standard output");
		status = EXIT_FAILED;
	}
	ledger_rows_free(rows, n);
	ledger_close(l);
	free(spec);
	return status;
}

static int spend_set(int argc, char **argv)
{
	struct spend_opts o;
	struct ledger *l = NULL;
	struct ledger_row *rows = NULL;
	enum ledger_status st;
	char *spec = NULL, now[METER_USD_LEN], was[METER_USD_LEN];
	int64_t cap;
	size_t n = 0;
	int status = EXIT_FAILED, r, tries;

	r = parse_opts(argc, argv, true, &o);
	if (r != 0)
		return r < 0 ? 0 : r;
	if (!parse_usd(o.cap, &cap))
		return usage("--cap must be dollars (e.g. 5 or 0.25, at most 9 "
			     "decimals, at most 1000000000) or none, not '%s'", o.cap);
	if (open_ledger(&o, true, &l, &spec) != LEDGER_OK)
		goto out;
	print_usd(now, cap);
	/* Set it if it is there, else create it; a create that loses a race
	 * with another one sets it. */
	for (tries = 0; tries < 2; tries++) {
		st = ledger_show(l, o.session, &rows, &n);
		if (st == LEDGER_OK) {
			if (o.parent && (!rows[0].parent ||
					 strcmp(rows[0].parent, o.parent) != 0)) {
				util_warn("spend: session '%s' is under %s%s%s, not '%s'",
					  o.session, rows[0].parent ? "'" : "",
					  rows[0].parent ? rows[0].parent : "no parent",
					  rows[0].parent ? "'" : "", o.parent);
				goto out;
			}
			print_usd(was, rows[0].t.cap);
			st = ledger_set_cap(l, o.session, cap);
			if (st == LEDGER_OK)
				printf("%s: cap %s (was %s)\n", o.session,
				       cap == LEDGER_NO_CAP ? "none" : now,
				       rows[0].t.cap == LEDGER_NO_CAP ? "none" : was);
			break;
		}
		if (st != LEDGER_NOT_FOUND)
			break;
		st = ledger_create(l, o.session, o.parent, cap);
		if (st == LEDGER_OK)
			printf("%s: created%s%s, cap %s\n", o.session,
			       o.parent ? " under " : "", o.parent ? o.parent : "",
			       cap == LEDGER_NO_CAP ? "none" : now);
		if (st != LEDGER_CONFLICT)
			break;
		ledger_rows_free(rows, n);
		rows = NULL;
		n = 0;
	}
	if (st != LEDGER_OK) {
		util_warn("spend: %s", ledger_error(l));
		goto out;
	}
	status = 0;
out:
	if (fflush(stdout) != 0 || ferror(stdout)) {
		util_warn("spend: cannot write to standard output");
		status = EXIT_FAILED;
	}
	ledger_rows_free(rows, n);
	ledger_close(l);
	free(spec);
	return status;
}

/* --- audit ----------------------------------------------------------------- */

typedef unsigned __int128 u128;

struct audited {
	char *session;
	size_t charges, recomputed, unpriced, differ;
	int64_t sum;            /* the costs charged */
	int64_t last_total;     /* total_nano of the last charge, -1: none */
	bool totals_break;      /* a total is not the one before plus the cost */
};

static int64_t jint(json_t *o, const char *k, bool *ok)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		*ok = false;
		return 0;
	}
	return (int64_t)json_integer_value(v);
}

/* Recomputes @subj's cost from its counts and prices: 1 agrees, 0
 * differs, -1 cannot (no usage or no price on the receipt). */
static int recompute(json_t *subj, int64_t cost, int64_t *out)
{
	static const char *const counts[] = { "input_tokens", "output_tokens",
					      "cache_write_tokens", "cache_read_tokens" };
	static const char *const prices[] = { "input", "output", "cache_write",
					      "cache_read" };
	json_t *pn = json_object_get(subj, "price_nano_per_million");
	u128 sum = 0;
	bool ok = true;
	size_t i;

	if (!json_is_object(pn) ||
	    strcmp(json_string_value(json_object_get(subj, "outcome")) ?
		   json_string_value(json_object_get(subj, "outcome")) : "", "usage") != 0)
		return -1;
	for (i = 0; i < 4; i++)
		sum += (u128)(uint64_t)jint(subj, counts[i], &ok) *
		       (u128)(uint64_t)jint(pn, prices[i], &ok);
	if (!ok)
		return -1;
	sum = (sum + 999999) / 1000000;
	if (sum > (u128)METER_MONEY_MAX)
		return 0;
	*out = (int64_t)sum;
	return *out == cost ? 1 : 0;
}

static struct audited *audited_for(struct audited **v, size_t *n, const char *session)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i].session, session) == 0)
			return &(*v)[i];
	*v = util_xrealloc(*v, (*n + 1) * sizeof(**v));
	memset(&(*v)[*n], 0, sizeof(**v));
	(*v)[*n].session = util_xstrdup(session);
	(*v)[*n].last_total = -1;
	return &(*v)[(*n)++];
}

/* Reads the charges of one stream; false when it cannot be read. */
static bool audit_stream(const char *path, struct audited **v, size_t *n, bool *bad)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;

	if (!f) {
		util_warn("spend audit: %s: %s", path, strerror(errno));
		return false;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		json_t *o, *subj;
		json_error_t err;
		struct audited *a;
		bool ok = true;
		int64_t cost, total, again = 0;
		int r;

		lineno++;
		o = json_loadb(line, (size_t)len, 0, &err);
		if (!json_is_object(o) ||
		    !json_is_string(json_object_get(o, "type")) ||
		    strcmp(json_string_value(json_object_get(o, "type")), "budget.charge") != 0 ||
		    !json_is_string(json_object_get(o, "session"))) {
			json_decref(o);
			continue;
		}
		subj = json_object_get(o, "subject");
		a = audited_for(v, n, json_string_value(json_object_get(o, "session")));
		a->charges++;
		cost = jint(subj, "cost_nano", &ok);
		total = jint(subj, "total_nano", &ok);
		if (!ok) {
			printf("%s:%lu: a budget.charge without cost_nano and total_nano\n",
			       path, lineno);
			a->differ++;
			*bad = true;
			json_decref(o);
			continue;
		}
		a->sum += cost;
		if (a->last_total >= 0 && total != a->last_total + cost)
			a->totals_break = true;
		a->last_total = total;
		r = recompute(subj, cost, &again);
		if (r < 0) {
			a->unpriced++;
		} else if (r == 0) {
			char c1[METER_USD_LEN], c2[METER_USD_LEN];

			print_usd(c1, cost);
			print_usd(c2, again);
			printf("%s:%lu: charged $%s, the receipt's counts and prices "
			       "make $%s\n", path, lineno, c1, c2);
			a->differ++;
			*bad = true;
		} else {
			a->recomputed++;
		}
		json_decref(o);
	}
	free(line);
	fclose(f);
	return true;
}

static int spend_audit(int argc, char **argv)
{
	enum { OPT_LEDGER = 256 };
	static const struct option opts[] = {
		{ "ledger", required_argument, NULL, OPT_LEDGER },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct spend_opts o;
	struct audited *v = NULL;
	struct ledger *l = NULL;
	char *spec = NULL;
	size_t n = 0, i;
	bool bad = false, ledger_ok = false;
	int c;

	memset(&o, 0, sizeof(o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_LEDGER:
			o.ledger = optarg;
			break;
		case 'h':
			fputs(cmd_spend_help, stdout);
			return 0;
		case ':':
			return usage("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage("unknown option '%s' for audit", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage("audit needs EVENTS (one or more receipt streams)");
	for (i = (size_t)optind; i < (size_t)argc; i++)
		if (!audit_stream(argv[i], &v, &n, &bad))
			bad = true;
	/* The ledger: the one named, else the default if there is one. */
	if (o.ledger || (spec = ledger_default_spec()) != NULL) {
		struct spend_opts lo = o;

		free(spec);
		spec = NULL;
		if (open_ledger(&lo, false, &l, &spec) == LEDGER_OK)
			ledger_ok = true;
		else if (o.ledger)
			bad = true;
	}
	for (i = 0; i < n; i++) {
		struct audited *a = &v[i];
		struct ledger_row *rows = NULL;
		size_t nr = 0;
		char sum[METER_USD_LEN], own[METER_USD_LEN], diff[METER_USD_LEN];

		print_usd(sum, a->sum);
		printf("%s: %zu charges, $%s; %zu recomputed from their receipts, "
		       "%zu differ, %zu not recomputable (a whole reservation, or no "
		       "price on the receipt)", a->session, a->charges, sum,
		       a->recomputed, a->differ, a->unpriced);
		if (a->totals_break) {
			printf("; the session's totals do not add up charge by charge");
			bad = true;
		}
		if (!ledger_ok) {
			printf("; ledger not checked\n");
			continue;
		}
		if (ledger_show(l, a->session, &rows, &nr) != LEDGER_OK || nr == 0) {
			printf("; not in the ledger\n");
			bad = true;
		} else if (rows[0].t.own_spent == a->last_total) {
			print_usd(own, rows[0].t.own_spent);
			printf("; the ledger agrees (own spent $%s)\n", own);
		} else {
			print_usd(own, rows[0].t.own_spent);
			print_usd(diff, rows[0].t.own_spent - a->last_total);
			printf("; the ledger DIFFERS: own spent $%s, $%s more than the "
			       "stream's last total\n", own, diff);
			bad = true;
		}
		ledger_rows_free(rows, nr);
	}
	printf("audit: %s\n", bad ? "differences found" : "ok");
	for (i = 0; i < n; i++)
		free(v[i].session);
	free(v);
	ledger_close(l);
	free(spec);
	if (fflush(stdout) != 0 || ferror(stdout))
		return EXIT_FAILED;
	return bad ? EXIT_FAILED : 0;
}

int cmd_spend(int argc, char **argv)
{
	if (argc < 2)
		return usage("show, set or audit?");
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(cmd_spend_help, stdout);
		return 0;
	}
	if (strcmp(argv[1], "show") == 0)
		return spend_show(argc - 1, argv + 1);
	if (strcmp(argv[1], "set") == 0)
		return spend_set(argc - 1, argv + 1);
	if (strcmp(argv[1], "audit") == 0)
		return spend_audit(argc - 1, argv + 1);
	return usage("unknown subcommand '%s': show, set or audit", argv[1]);
}
