/* SPDX-License-Identifier: Apache-2.0
 * cmd_check.c - `airlock check [--mode MODE] [--json] [--canonical] POLICY`:
 * validates a policy file and prints its digest, its canonical form, or
 * every error with its JSON path.
 *
 * A valid policy may still do less than its author meant; those are
 * warnings (stderr, or "warnings" in --json; the exit status stays 0):
 * - a secret's host that no egress rule admits (secrets.NAME.hosts do not
 *   allow a host by themselves; git hosts are allowed by git.hosts);
 * - an egress.allow rule for special-purpose addresses outside
 *   egress.allow_ranges: the address check refuses it whatever it says.
 *
 * Exit status: 0 valid, 1 invalid or unreadable, 2 usage error (one line on
 * stderr, nothing on stdout).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "addr.h"
#include "commands.h"
#include "egress.h"
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
	"Warnings (a valid policy that does less than it seems to: a secret's\n"
	"host no egress rule admits, an allow rule for a special-purpose\n"
	"address outside egress.allow_ranges) go to standard error, or to\n"
	"\"warnings\" with --json; they do not change the exit status.\n"
	"\n"
	"Options:\n"
	"  --mode MODE   off | shadow | enforce; replaces the policy's mode, as\n"
	"                'airlock run --mode' does, before the digest is taken\n"
	"  --json        print {\"ok\":true,\"digest\":\"sha256:...\",\"warnings\":[...]}\n"
	"                or\n"
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

static bool is_ident(const char *s)
{
	size_t i;

	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (i = 0; s[i]; i++)
		if (!(s[i] == '_' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

static void warn_add(json_t *warnings, const char *path, const char *message)
{
	json_array_append_new(warnings, json_pack("{s:s, s:s}", "path", path,
						  "message", message));
}

/* A representative target of @r (a name under a wildcard, the first
 * address of a CIDR) and the port to ask about; false for "*". */
static bool rule_target(const struct policy *p, const struct host_rule *r,
			struct host_target *t, uint16_t *port)
{
	char name[HOSTNAME_MAX + 8];

	memset(t, 0, sizeof(*t));
	switch (r->kind) {
	case HOST_RULE_EXACT:
	case HOST_RULE_SELF_BELOW:
		snprintf(name, sizeof(name), "%s", r->name);
		break;
	case HOST_RULE_BELOW:
		snprintf(name, sizeof(name), "x.%s", r->name);
		break;
	case HOST_RULE_CIDR:
		t->is_addr = true;
		t->addr = r->cidr.base;
		break;
	case HOST_RULE_ANY:
	default:
		return false;
	}
	if (!t->is_addr && hostname_normalise(name, strlen(name), t) != HOSTNAME_OK)
		return false;
	if (r->port > 0)
		*port = (uint16_t)r->port;
	else if (p->nports == 0)
		*port = 443;
	else {
		size_t i;

		*port = p->ports[0];
		for (i = 0; i < p->nports; i++)
			if (p->ports[i] == 443)
				*port = 443;
	}
	return true;
}

/* Is every address of @c special-purpose and outside allow_ranges? Its
 * first and last address stand for it when both are of one special class
 * (10.0.0.0/8): a rule as wide as 0.0.0.0/0 spans classes and global
 * addresses, and is not reported. */
static bool cidr_never_allowed(const struct policy *p, const struct addr_cidr *c)
{
	struct addr last = c->base;
	unsigned int bits = c->base.family == AF_INET ? 32 : 128, i;

	for (i = c->prefix; i < bits; i++)
		last.bytes[i / 8] |= (uint8_t)(0x80u >> (i % 8));
	if (addr_classify(&c->base) != addr_classify(&last))
		return false;
	return !addr_is_allowed(&c->base, p->allow_ranges, p->nallow_ranges) &&
	       !addr_is_allowed(&last, p->allow_ranges, p->nallow_ranges);
}

/* The warnings of a valid policy, as [{path, message}]. */
static json_t *policy_warnings(const struct policy *p)
{
	json_t *w = json_array();
	char path[HOSTNAME_MAX + 128], msg[3 * HOSTNAME_MAX + 512];
	char text[HOSTNAME_MAX + 64];
	size_t i, j;

	if (p->mode == POLICY_MODE_OFF)
		return w;
	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_secret *s = &p->secrets[i];

		if (s->aws > POLICY_AWS_KEY_ID) /* one warning per aws secret */
			continue;
		for (j = 0; j < s->nhosts; j++) {
			struct host_target t;
			struct verdict v;
			uint16_t port;

			if (!rule_target(p, &s->hosts[j], &t, &port))
				continue;
			egress_decide_rules(p, &t, port, &v);
			verdict_clear(&v);
			if (v.action == VERDICT_ALLOW)
				continue;
			host_rule_format(&s->hosts[j], text, sizeof(text));
			if (is_ident(s->name))
				snprintf(path, sizeof(path), "secrets.%s.hosts[%zu]", s->name, j);
			else
				snprintf(path, sizeof(path), "secrets[\"%s\"].hosts[%zu]", s->name, j);
			if (strcmp(v.rule, "egress.default") == 0)
				snprintf(msg, sizeof(msg),
					 "no egress.allow rule admits %s on port %u: a "
					 "secret's hosts do not allow a host by themselves; "
					 "add \"%s\" to egress.allow",
					 text, port, text);
			else
				snprintf(msg, sizeof(msg),
					 "%s denies %s on port %u: the secret can never be "
					 "sent there", v.rule, text, port);
			warn_add(w, path, msg);
		}
	}
	for (i = 0; i < p->nallow; i++) {
		const struct host_rule *r = &p->allow[i];

		if (r->kind != HOST_RULE_CIDR || !cidr_never_allowed(p, &r->cidr))
			continue;
		host_rule_format(r, text, sizeof(text));
		snprintf(path, sizeof(path), "egress.allow[%zu]", i);
		snprintf(msg, sizeof(msg),
			 "%s can never match: it is a special-purpose address (%s) and "
			 "the address check refuses it; add its range to "
			 "egress.allow_ranges",
			 text, addr_class_to_string(addr_classify(&r->cidr.base)));
		warn_add(w, path, msg);
	}
	return w;
}

static void print_ok_json(const struct policy *p, json_t *warnings)
{
	json_t *out = json_pack("{s:b, s:s, s:O}", "ok", 1, "digest", p->digest,
				"warnings", warnings);
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
	json_t *warnings = NULL;
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
	warnings = policy_warnings(p);
	if (!o.json)
		for (i = 0; i < json_array_size(warnings); i++) {
			json_t *w = json_array_get(warnings, i);

			util_warn("check: warning: %s: %s: %s", o.path,
				  json_string_value(json_object_get(w, "path")),
				  json_string_value(json_object_get(w, "message")));
		}
	if (o.json)
		print_ok_json(p, warnings);
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
	json_decref(warnings);
	policy_free(p);
	policy_errors_free(&errs);
	return status;
}
