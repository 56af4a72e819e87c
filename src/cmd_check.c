/* SPDX-License-Identifier: Apache-2.0
 * cmd_check.c - `airlock check [--mode MODE] [--json] [--canonical] POLICY`:
 * validates a policy file and prints its digest, its canonical form, or
 * every error with its JSON path.
 *
 * Exit status: 0 valid, 1 invalid or unreadable, 2 usage error (one line on
 * stderr, nothing on stdout).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commands.h"
#include "policy.h"
#include "util.h"

const char cmd_check_help[] =
	"usage: airlock check [--mode MODE] [--json] [--canonical] POLICY\n"
	"\n"
	"Validates the policy file POLICY (\"-\" reads standard input).\n"
	"\n"
	"A valid policy prints \"ok sha256:<digest>\": the digest of the\n"
	"effective policy in canonical form, the same digest every receipt of\n"
	"a session under this policy carries. An invalid one prints every\n"
	"error, one per line, as \"POLICY: json.path: message\".\n"
	"\n"
	"Options:\n"
	"  --mode MODE   off | shadow | enforce; replaces the policy's mode, as\n"
	"                'airlock run --mode' does, before the digest is taken\n"
	"  --json        print {\"ok\":true,\"digest\":\"sha256:...\"} or\n"
	"                {\"ok\":false,\"errors\":[{\"path\":...,\"message\":...}]}\n"
	"  --canonical   print the canonical JSON of the effective policy (every\n"
	"                key, defaults filled in) instead of the digest\n"
	"  -h, --help    print this help\n"
	"\n"
	"Exit status: 0 valid, 1 invalid or unreadable, 2 usage error.\n";

enum check_output { CHECK_OUT_TEXT, CHECK_OUT_JSON, CHECK_OUT_CANONICAL };

struct check_opts {
	const char *path;
	bool have_mode;
	enum policy_mode mode;
	bool json, canonical;
};

/* Returns 0, or 2 after printing a usage error (or -1 after printing the
 * help: the caller exits 0). */
static int parse_opts(int argc, char **argv, struct check_opts *o)
{
	enum { OPT_MODE = 256, OPT_JSON, OPT_CANONICAL };
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "canonical", no_argument, NULL, OPT_CANONICAL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_MODE:
			if (!policy_mode_from_string(optarg, &o->mode)) {
				util_warn("check: --mode must be off, shadow or "
					  "enforce, not '%s'", optarg);
				return 2;
			}
			o->have_mode = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_CANONICAL:
			o->canonical = true;
			break;
		case 'h':
			fputs(cmd_check_help, stdout);
			return -1;
		case ':':
			util_warn("check: option '%s' needs a value",
				  argv[optind - 1]);
			return 2;
		default:
			if (optopt)
				util_warn("check: unknown option '-%c' (see "
					  "'airlock check --help')", optopt);
			else
				util_warn("check: unknown option '%s' (see "
					  "'airlock check --help')",
					  argv[optind - 1]);
			return 2;
		}
	}
	if (o->json && o->canonical) {
		util_warn("check: --json and --canonical exclude each other");
		return 2;
	}
	if (optind >= argc) {
		util_warn("check: no policy file given (see 'airlock check --help')");
		return 2;
	}
	if (argc - optind > 1) {
		util_warn("check: one policy file at a time, not '%s' too",
			  argv[optind + 1]);
		return 2;
	}
	o->path = argv[optind];
	return 0;
}

static void print_errors_json(const struct policy_errors *errs)
{
	json_t *arr = json_array(), *out;
	char *text;
	size_t i;

	for (i = 0; i < errs->count; i++)
		json_array_append_new(arr, json_pack("{s:s, s:s}",
			"path", errs->items[i].path,
			"message", errs->items[i].message));
	out = json_pack("{s:b, s:o}", "ok", 0, "errors", arr);
	text = json_dumps(out, JSON_COMPACT);
	ASSERT(text);
	puts(text);
	free(text);
	json_decref(out);
}

static void print_ok_json(const struct policy *p)
{
	json_t *out = json_pack("{s:b, s:s}", "ok", 1, "digest", p->digest);
	char *text = json_dumps(out, JSON_COMPACT);

	ASSERT(text);
	puts(text);
	free(text);
	json_decref(out);
}

int cmd_check(int argc, char **argv)
{
	struct policy_errors errs = { 0 };
	struct policy *p = NULL;
	struct check_opts o;
	int status, r;
	size_t i;

	r = parse_opts(argc, argv, &o);
	if (r != 0)
		return r < 0 ? 0 : r;
	/* /dev/stdin rather than fd 0 directly: util_read_file's bounded
	 * reader then serves both cases. */
	p = policy_load(strcmp(o.path, "-") == 0 ? "/dev/stdin" : o.path,
			o.have_mode ? &o.mode : NULL, &errs);
	if (!p) {
		if (o.json)
			print_errors_json(&errs);
		else
			for (i = 0; i < errs.count; i++)
				printf("%s: %s: %s\n", o.path, errs.items[i].path,
				       errs.items[i].message);
		status = 1;
		goto out;
	}
	if (o.json)
		print_ok_json(p);
	else if (o.canonical)
		puts(p->canonical);
	else
		printf("ok %s\n", p->digest);
	status = 0;
out:
	/* A verdict nobody could read is no verdict. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		util_warn("check: cannot write the result to standard output");
		status = 1;
	}
	policy_free(p);
	policy_errors_free(&errs);
	return status;
}
