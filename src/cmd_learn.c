/* SPDX-License-Identifier: Apache-2.0
 * cmd_learn.c - `airlock learn EVENTS... [--policy BASE] [--wildcards]
 * [--ranges] [--unverified]`: drafts a policy from what a (shadow) run
 * needed.
 *
 * DOC: Theory of Operation
 *
 * The draft is the base policy (BASE as written; else only what differs
 * from the embedded default policy that a run without --policy uses:
 * {"version": 1} and the additions) with additions, each made from
 * receipts of decision block or would_block and each explained on stderr
 * with the receipt seqs it came from:
 *
 * - egress.block by egress.default (and dns.block): an egress.allow rule
 *   for the exact name or address, with ":PORT" when the port is not one
 *   of egress.ports. A special-purpose literal (169.254.169.254) is never
 *   an allow rule alone: with --ranges (and a class --ranges drafts) it
 *   gets its allow_ranges entry too, else nothing. With --wildcards, two or more names directly below
 *   one parent of at least two labels become "*.parent".
 * - egress.block by egress.special-address, with --ranges only: an
 *   allow_ranges entry for each special-purpose answer, one address wide.
 *   Loopback, link-local (cloud metadata), unspecified, multicast and
 *   broadcast answers are never drafted: they reach this machine or its
 *   provider, not a service an agent needs.
 * - env.drop: the name goes to env.pass -- unless it is shell noise (_,
 *   PWD, OLDPWD, SHLVL: never), may hold a URL or connection string with
 *   a password (URL, URI, DSN, CONN in the name, any case: the receipt
 *   names no value; flagged, never passed), or looks like a credential
 *   (TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, any case).
 *   A credential becomes a secrets entry bound only to the hosts the
 *   proxy saw its value injected for (secret.inject of the secret named
 *   after it, lowercase) that the draft allows; where it saw none the
 *   entry is left out and flagged ("!") for a person. The hosts a
 *   session merely reached, or carried a refused placeholder toward
 *   (secret.block), are never evidence of where a credential belongs: a
 *   hostile shadow run would otherwise get it bound to its own host. A
 *   credential never goes to env.pass.
 *
 * Never drafted, only explained: what the recorded policy denied on
 * purpose (egress.deny[N]), what the base policy denies, the proxy's own
 * address, protocol violations (SNI or Host mismatch), and the blocks
 * whose lifting is a security decision (secret.block, git.block,
 * budget.*): widening where a secret or a repository credential goes is
 * what an attack needs, so learn leaves it to a person.
 *
 * The base's keys and rules are kept in order; additions are appended,
 * sorted, without duplicates (a target the base already allows adds
 * nothing). The same input always gives the same bytes. The draft is
 * checked with the policy parser before it is printed, and every target
 * the streams needed is re-decided against it; a stream that does not
 * verify is refused unless --unverified.
 *
 * Exit status: 0 the draft was printed; 1 a stream does not verify, or the
 * base policy is invalid; 2 usage error or a file that cannot be read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <jansson.h>

#include "addr.h"
#include "commands.h"
#include "egress.h"
#include "events.h"
#include "hostname.h"
#include "policy.h"
#include "util.h"

#define EXIT_NOT_VERIFIED 1
#define EXIT_USAGE 2
#define REFS_SHOWN 8

const char cmd_learn_help[] =
	"usage: airlock learn [--policy BASE] [--wildcards] [--ranges]\n"
	"                     [--pubkey FILE] [--unverified] EVENTS...\n"
	"\n"
	"Drafts a policy that would have allowed what the receipt streams\n"
	"EVENTS (files, or - for standard input) recorded as would_block or\n"
	"block, and prints it on standard output. Run the agent once in shadow\n"
	"mode, then learn from its stream. Each addition is explained on\n"
	"standard error with the receipt seqs it came from.\n"
	"\n"
	"  hosts      egress.allow rules for the exact names (NAME:PORT when the\n"
	"             port is not in egress.ports)\n"
	"  variables  env.pass names; a name that looks like a credential\n"
	"             (*TOKEN* *KEY* *SECRET* *PASSWORD* *PASSWD* *CREDENTIAL*\n"
	"             *AUTH*) becomes a secrets entry bound only to the hosts\n"
	"             its value was seen injected for (else left out, flagged\n"
	"             with !), never env.pass; *URL* *URI* *DSN* *CONN* (a\n"
	"             password may be in the value) and _ PWD OLDPWD SHLVL\n"
	"             are never passed\n"
	"\n"
	"Without --policy the draft holds only what differs from the defaults.\n"
	"Special-purpose addresses are never allow rules by themselves.\n"
	"\n"
	"  --policy BASE  start from BASE (its rules kept, in order; additions\n"
	"                 appended); default: the embedded default policy\n"
	"  --wildcards    several names below one parent become *.parent\n"
	"  --ranges       special-purpose addresses the streams were blocked for\n"
	"                 go to egress.allow_ranges (never loopback, link-local,\n"
	"                 unspecified, multicast or broadcast)\n"
	"  --pubkey FILE  the streams must be signed by this key (as verify)\n"
	"  --unverified   draft from a stream that does not verify\n"
	"  -h, --help     print this help\n"
	"\n"
	"Never drafted, only explained: what a policy denies on purpose, the\n"
	"proxy's own address, protocol violations, secrets sent to other hosts,\n"
	"other repositories, spend.\n"
	"\n"
	"Exit status: 0 the draft was printed (it passes airlock check); 1 a\n"
	"stream does not verify or BASE is invalid; 2 usage error or a file\n"
	"that cannot be read.\n";

struct learn_opts {
	const char *base;
	const char *pubkey;
	bool wildcards, ranges, unverified;
};

/* What the streams showed, keyed for sorting. Every value is a JSON
 * object with "refs": {session id: [seq, ...]} and what its key needs. */
struct learn {
	struct learn_opts o;
	struct policy *bp;     /* the base, parsed */
	json_t *root;          /* the draft document (owned) */
	json_t *targets;       /* "host\tport" -> {host, port, rules{}, refs} */
	json_t *ranges;        /* address -> {host, refs} */
	json_t *envs;          /* name -> {sessions{}, refs} */
	json_t *notes;         /* text -> {refs}: explained, not drafted */
	json_t *hosts;         /* session index (decimal) -> {name: true} */
	json_t *carried;       /* secret name -> {host: {refs}}: secret.inject */
	json_t *refused;       /* secret name -> {host: {refs}}: secret.block */
	size_t additions;
};

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock: learn: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see airlock learn --help)\n", stderr);
	return EXIT_USAGE;
}

/* --- references ---------------------------------------------------------- */

static json_t *entry(json_t *map, const char *key)
{
	json_t *e = json_object_get(map, key);

	if (!e) {
		e = json_pack("{s:{}}", "refs");
		ASSERT(e);
		json_object_set_new(map, key, e);
	}
	return e;
}

static void add_ref(json_t *e, const struct events_line *ln)
{
	json_t *refs = json_object_get(e, "refs");
	const char *sid = *ln->session_id ? ln->session_id : "?";
	json_t *a = json_object_get(refs, sid);

	if (!a) {
		a = json_array();
		json_object_set_new(refs, sid, a);
	}
	json_array_append_new(a, json_integer(ln->seq));
}

/* Appends @src's refs to @dst's. */
static void merge_refs(json_t *dst, const json_t *src)
{
	json_t *refs = json_object_get(dst, "refs"), *a;
	const char *sid;

	json_object_foreach(json_object_get(src, "refs"), sid, a) {
		json_t *acc = json_object_get(refs, sid), *v;
		size_t j;

		if (!acc) {
			acc = json_array();
			json_object_set_new(refs, sid, acc);
		}
		json_array_foreach(a, j, v)
			json_array_append(acc, v);
	}
}

/* "sess-1 seq 4, 9; sess-2 seq 3 (+5 more)" */
static void format_refs(const json_t *e, char *out, size_t len)
{
	const json_t *refs = json_object_get(e, "refs");
	size_t shown = 0, more = 0, i, off = 0;
	const char *sid;
	json_t *a, *v;

	out[0] = '\0';
	json_object_foreach((json_t *)refs, sid, a) {
		bool first = true;

		json_array_foreach(a, i, v) {
			int n;

			if (shown == REFS_SHOWN) {
				more++;
				continue;
			}
			if (first)
				n = snprintf(out + off, len - off, "%s%s seq %lld",
					     off ? "; " : "", sid,
					     (long long)json_integer_value(v));
			else
				n = snprintf(out + off, len - off, ", %lld",
					     (long long)json_integer_value(v));
			if (n < 0 || (size_t)n >= len - off) {
				out[off] = '\0';
				return;
			}
			off += (size_t)n;
			first = false;
			shown++;
		}
	}
	if (more)
		snprintf(out + off, len - off, " (+%zu more)", more);
}

__attribute__((format(printf, 3, 4))) static void
note(struct learn *l, const struct events_line *ln, const char *fmt, ...)
{
	char text[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	add_ref(entry(l->notes, text), ln);
}

/* Prints an explained line: "  + WHAT -- WHY: REFS" */
static void explain(const char *mark, const char *what, const json_t *e)
{
	char refs[512];

	format_refs(e, refs, sizeof(refs));
	fprintf(stderr, "  %s %s (%s)\n", mark, what, refs);
}

/* --- reading the streams --------------------------------------------------- */

static bool is_credential_name(const char *name)
{
	static const char *const words[] = {
		"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (strcasestr(name, words[i]))
			return true;
	return false;
}

/* Records that the session of @ln reached @host (a name) on @port. */
static void saw_host(struct learn *l, const struct events_line *ln, const char *host,
		     json_int_t port)
{
	struct host_target t;
	char key[32];
	json_t *set, *ports;

	if (hostname_normalise(host, strlen(host), &t) != HOSTNAME_OK || t.is_addr)
		return;
	snprintf(key, sizeof(key), "%zu", ln->session);
	set = json_object_get(l->hosts, key);
	if (!set) {
		set = json_object();
		json_object_set_new(l->hosts, key, set);
	}
	ports = json_object_get(set, t.name);
	if (!ports) {
		ports = json_array();
		json_object_set_new(set, t.name, ports);
	}
	if (port > 0 && port <= 65535 && json_array_size(ports) < 16)
		json_array_append_new(ports, json_integer(port));
}

/* A secret.inject or secret.block: the secret (by name) was seen going
 * to the host (injected) or carried toward it (refused). */
static void saw_secret(struct learn *l, const struct events_line *ln)
{
	const char *secret = events_str(ln->subject, "secret");
	const char *host = events_str(ln->subject, "host");
	json_t *map = strcmp(ln->type, "secret.inject") == 0 ? l->carried : l->refused;
	struct host_target t;
	json_t *by;

	if (!*secret || !*host || hostname_normalise(host, strlen(host), &t) != HOSTNAME_OK)
		return;
	by = json_object_get(map, secret);
	if (!by) {
		by = json_object();
		json_object_set_new(map, secret, by);
	}
	add_ref(entry(by, t.name), ln);
}

static json_int_t subject_port(const struct events_line *ln)
{
	return json_integer_value(json_object_get(ln->subject, "port"));
}

static bool rule_is(const char *rule, const char *prefix)
{
	return strncmp(rule, prefix, strlen(prefix)) == 0;
}

/* @rule: what refused it (the receipt's rule, or "dns.block"). */
static void need_target(struct learn *l, const struct events_line *ln,
			const char *host, long long port, const char *rule)
{
	char key[HOSTNAME_MAX + 32];
	json_t *e;

	snprintf(key, sizeof(key), "%s\t%05lld", host, port);
	e = entry(l->targets, key);
	if (!json_object_get(e, "host")) {
		json_object_set_new(e, "host", json_string(host));
		json_object_set_new(e, "port", json_integer(port));
		json_object_set_new(e, "rules", json_object());
	}
	json_object_set_new(json_object_get(e, "rules"), *rule ? rule : "?", json_true());
	add_ref(e, ln);
}

/* An egress.block: what rule decided tells what may be drafted. */
static void learn_egress(struct learn *l, const struct events_line *ln)
{
	const char *host = events_str(ln->subject, "host");
	json_t *port = json_object_get(ln->subject, "port");

	if (!*host || !json_is_integer(port)) {
		note(l, ln, "%s %s without a host and port: nothing to draft",
		     ln->type, ln->rule);
		return;
	}
	saw_host(l, ln, host, json_integer_value(port));
	if (strcmp(ln->rule, "egress.special-address") == 0) {
		json_t *addrs = json_object_get(ln->subject, "addresses"), *a;
		size_t i;

		if (!json_is_array(addrs) || json_array_size(addrs) == 0) {
			json_t *e = entry(l->ranges, host);

			json_object_set_new(e, "host", json_string(host));
			add_ref(e, ln);
			return;
		}
		json_array_foreach(addrs, i, a) {
			const char *text = events_str(a, "address");
			struct addr ad;
			json_t *e;

			if (!addr_parse(text, &ad) || addr_classify(&ad) == ADDR_CLASS_GLOBAL)
				continue;
			e = entry(l->ranges, text);
			json_object_set_new(e, "host", json_string(host));
			add_ref(e, ln);
		}
		return;
	}
	need_target(l, ln, host, (long long)json_integer_value(port), ln->rule);
}

static void learn_line(struct learn *l, const struct events_line *ln)
{
	const char *name;

	if (strcmp(ln->type, "secret.inject") == 0 || strcmp(ln->type, "secret.block") == 0)
		saw_secret(l, ln);
	switch (ln->ti->learn) {
	case EVENTS_LEARN_SEEN:
		saw_host(l, ln, events_str(ln->subject, "host"), subject_port(ln));
		return;
	case EVENTS_LEARN_NONE:
	case EVENTS_LEARN_EGRESS:
	case EVENTS_LEARN_NAME:
	case EVENTS_LEARN_ENV:
	case EVENTS_LEARN_REVIEW:
	case EVENTS_LEARN_COUNT:
		break;
	}
	if (ln->decision != RECEIPT_BLOCK && ln->decision != RECEIPT_WOULD_BLOCK)
		return;
	switch (ln->ti->learn) {
	case EVENTS_LEARN_EGRESS:
		learn_egress(l, ln);
		break;
	case EVENTS_LEARN_NAME:
		name = events_str(ln->subject, "name");
		if (!*name)
			name = events_str(ln->subject, "host");
		if (!*name) {
			note(l, ln, "%s without a name: nothing to draft", ln->type);
			break;
		}
		saw_host(l, ln, name, 0);
		need_target(l, ln, name, 0, "dns.block");
		break;
	case EVENTS_LEARN_ENV: {
		char key[32];
		json_t *e;

		name = events_str(ln->subject, "name");
		if (!*name) {
			note(l, ln, "%s without a name: nothing to draft", ln->type);
			break;
		}
		e = entry(l->envs, name);
		if (!json_object_get(e, "sessions"))
			json_object_set_new(e, "sessions", json_object());
		snprintf(key, sizeof(key), "%zu", ln->session);
		json_object_set_new(json_object_get(e, "sessions"), key, json_true());
		add_ref(e, ln);
		break;
	}
	case EVENTS_LEARN_REVIEW:
		if (strncmp(ln->type, "secret.", 7) == 0)
			note(l, ln, "not drafted: %s %s (secret %s toward %s): a secret "
			     "sent where the policy does not bind it is what an "
			     "exfiltration looks like; a person decides",
			     ln->type, ln->rule,
			     *events_str(ln->subject, "secret") ? events_str(ln->subject, "secret")
								: events_str(ln->subject, "name"),
			     events_str(ln->subject, "host"));
		else if (strcmp(ln->rule, "git.api_admin") == 0)
			note(l, ln, "not drafted: %s %s (%s %s %s): an API request that "
			     "creates or hands out credentials, grants access or moves "
			     "the repository; a person decides, and lists it in "
			     "git.api_allow to let it through",
			     ln->type, ln->rule, events_str(ln->subject, "method"),
			     events_str(ln->subject, "path"), events_str(ln->subject, "repo"));
		else if (strncmp(ln->type, "git.", 4) == 0)
			note(l, ln, "not drafted: %s %s (%s %s): widening git access is "
			     "for a person to decide (git.repos)",
			     ln->type, ln->rule, events_str(ln->subject, "operation"),
			     events_str(ln->subject, "repo"));
		else if (strncmp(ln->type, "budget.", 7) == 0)
			note(l, ln, "not drafted: %s %s: spend limits are for a person "
			     "to decide (spend.cap_usd, spend.prices)", ln->type, ln->rule);
		else
			note(l, ln, "not drafted: %s %s: for a person to decide",
			     ln->type, ln->rule);
		break;
	case EVENTS_LEARN_NONE:
	case EVENTS_LEARN_SEEN:
	case EVENTS_LEARN_COUNT:
		break;
	}
}

/* --- drafting ------------------------------------------------------------------ */

static json_t *object_at(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);

	if (!json_is_object(o)) {
		o = json_object();
		json_object_set_new(parent, key, o);
	}
	return o;
}

/* The array at @parent.@key, created (filled with @init when given) if
 * absent. */
static json_t *array_at(json_t *parent, const char *key, char *const *init,
			size_t ninit)
{
	json_t *a = json_object_get(parent, key);

	if (!json_is_array(a)) {
		size_t i;

		a = json_array();
		for (i = 0; i < ninit; i++)
			json_array_append_new(a, json_string(init[i]));
		json_object_set_new(parent, key, a);
	}
	return a;
}

static bool array_has(const json_t *a, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach((json_t *)a, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

static bool port_is_default(const struct policy *p, long long port)
{
	size_t i;

	if (port == 0)
		return true;
	for (i = 0; i < p->nports; i++)
		if (p->ports[i] == port)
			return true;
	return false;
}

/* Rules seen for a target that a draft may not lift. NULL: it may. */
static const char *forbidden(const json_t *rules, const char **which)
{
	const char *r;
	json_t *v;

	json_object_foreach((json_t *)rules, r, v) {
		*which = r;
		if (strcmp(r, "egress.self") == 0)
			return "the proxy's own address is never allowed";
		if (rule_is(r, "egress.deny["))
			return "the recorded policy denies it on purpose; remove that "
			       "deny rule by hand if it should be reached";
		if (strcmp(r, "egress.default") != 0 && strcmp(r, "dns.block") != 0)
			return "not a policy decision (the request itself was refused)";
	}
	return NULL;
}

static bool range_forbidden(enum addr_class c);

/* Decides which targets become rules; fills @rules (text -> entry). */
static void draft_targets(struct learn *l, json_t *rules)
{
	size_t n, i;
	const char **keys = events_sorted_keys(l->targets, &n);

	for (i = 0; i < n; i++) {
		json_t *e = json_object_get(l->targets, keys[i]);
		const char *host = events_str(e, "host"), *which = "";
		long long port = (long long)json_integer_value(json_object_get(e, "port"));
		uint16_t dport = port ? (uint16_t)port : (l->bp->nports ? l->bp->ports[0] : 443);
		struct verdict v;
		struct host_target t;
		const char *why;
		char text[HOSTNAME_MAX + 16], what[HOSTNAME_MAX + 512], tgt[HOSTNAME_MAX + 16];

		/* A name without a port (dns.block) is shown without one. */
		if (port)
			snprintf(tgt, sizeof(tgt), "%s:%lld", host, port);
		else
			snprintf(tgt, sizeof(tgt), "%s", host);
		if (port < 0 || port > 65535 ||
		    hostname_normalise(host, strlen(host), &t) != HOSTNAME_OK) {
			snprintf(what, sizeof(what), "not drafted: %s: not a valid host and "
				 "port", tgt);
			explain("-", what, e);
			continue;
		}
		why = forbidden(json_object_get(e, "rules"), &which);
		if (why) {
			snprintf(what, sizeof(what), "not drafted: %s (%s): %s", tgt, which, why);
			explain("-", what, e);
			continue;
		}
		/* A special-purpose literal: an allow rule alone never admits it
		 * (§3.3); loopback, link-local (cloud metadata) and the like
		 * never, the others with --ranges and their allow_ranges entry. */
		if (t.is_addr && addr_classify(&t.addr) != ADDR_CLASS_GLOBAL &&
		    !addr_is_allowed(&t.addr, l->bp->allow_ranges, l->bp->nallow_ranges)) {
			enum addr_class c = addr_classify(&t.addr);

			if (range_forbidden(c) || !l->o.ranges) {
				snprintf(what, sizeof(what), "not drafted: %s is a special-purpose "
					 "address (%s): %s", tgt, addr_class_to_string(c),
					 range_forbidden(c) ? "that class reaches this machine or "
					 "its provider, never a service to allow"
					 : "an allow rule alone would never match it (--ranges "
					 "would add it with its egress.allow_ranges entry)");
				explain("-", what, e);
				continue;
			}
			merge_refs(entry(l->ranges, t.name), e);
			json_object_set_new(json_object_get(l->ranges, t.name), "host",
					    json_string(t.name));
		}
		egress_decide_rules(l->bp, &t, dport, &v);
		if (v.action == VERDICT_ALLOW) {
			snprintf(what, sizeof(what), "nothing to add: %s is already allowed "
				 "by the base policy's %s", tgt, v.rule);
			explain("=", what, e);
			continue;
		}
		if (v.host_rule) {
			snprintf(what, sizeof(what), "not drafted: %s: the base policy "
				 "denies it (%s)", tgt, v.rule);
			explain("-", what, e);
			continue;
		}
		if (t.is_addr && t.addr.family == AF_INET6)
			snprintf(text, sizeof(text), port_is_default(l->bp, port) ? "%s" : "[%s]:%lld",
				 t.name, port);
		else if (port_is_default(l->bp, port))
			snprintf(text, sizeof(text), "%s", t.name);
		else
			snprintf(text, sizeof(text), "%s:%lld", t.name, port);
		if (json_object_get(rules, text))
			merge_refs(json_object_get(rules, text), e);
		else
			json_object_set(rules, text, e);
		json_object_set_new(e, "rule", json_string(text));
		json_object_set_new(e, "name", json_string(t.name));
		json_object_set_new(e, "is_addr", json_boolean(t.is_addr));
	}
	free(keys);
}

/* --wildcards: two or more exact names directly below one parent of at
 * least two labels (and on the same port) become "*.parent". */
static void draft_wildcards(json_t *rules)
{
	json_t *groups = json_object(), *out = json_object(), *g, *e;
	const char *text, *gk;
	size_t n, i;
	const char **keys;

	json_object_foreach(rules, text, e) {
		const char *name = events_str(e, "name"), *parent, *colon;
		char key[HOSTNAME_MAX + 16];

		parent = strchr(name, '.');
		if (json_is_true(json_object_get(e, "is_addr")) || !parent ||
		    !strchr(parent + 1, '.'))
			continue;
		colon = strchr(text, ':');
		snprintf(key, sizeof(key), "*%s%s", parent, colon ? colon : "");
		g = json_object_get(groups, key);
		if (!g) {
			g = json_array();
			json_object_set_new(groups, key, g);
		}
		json_array_append_new(g, json_string(text));
	}
	json_object_foreach(groups, gk, g) {
		json_t *merged;

		if (json_array_size(g) < 2)
			continue;
		merged = json_pack("{s:{}, s:s, s:o}", "refs", "rule", gk, "names", json_array());
		ASSERT(merged);
		json_array_foreach(g, i, e) {
			json_array_append(json_object_get(merged, "names"), e);
			merge_refs(merged, json_object_get(rules, json_string_value(e)));
		}
		json_object_set_new(out, gk, merged);
	}
	/* Replace the grouped names by their wildcard. */
	keys = events_sorted_keys(out, &n);
	for (i = 0; i < n; i++) {
		json_t *names = json_object_get(json_object_get(out, keys[i]), "names");

		for (size_t j = 0; j < json_array_size(names); j++)
			json_object_del(rules, json_string_value(json_array_get(names, j)));
		json_object_set(rules, keys[i], json_object_get(out, keys[i]));
	}
	free(keys);
	json_decref(groups);
	json_decref(out);
}

/* Appends to the text at @out (@len bytes, *@off used), cutting at the
 * end of the buffer. */
__attribute__((format(printf, 4, 5))) static void
appendf(char *out, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	*off = *off + (size_t)n < len ? *off + (size_t)n : len - 1;
}

/* Appends " a, b" of a JSON array of strings. */
static void list_names(char *out, size_t len, size_t *off, const json_t *names)
{
	size_t j;

	for (j = 0; j < json_array_size(names); j++)
		appendf(out, len, off, "%s %s", j ? "," : "",
			json_string_value(json_array_get(names, j)));
}

/* Appends the drafted host rules to egress.allow, sorted. */
static void apply_rules(struct learn *l, json_t *rules)
{
	json_t *allow = NULL;
	size_t n, i;
	const char **keys = events_sorted_keys(rules, &n);

	for (i = 0; i < n; i++) {
		json_t *e = json_object_get(rules, keys[i]), *names;
		char what[1024];
		size_t off;

		if (!allow)
			allow = array_at(object_at(l->root, "egress"), "allow", NULL, 0);
		if (array_has(allow, keys[i]))
			continue;
		json_array_append_new(allow, json_string(keys[i]));
		l->additions++;
		names = json_object_get(e, "names");
		if (!names) {
			snprintf(what, sizeof(what), "egress.allow \"%s\": blocked by the "
				 "default deny", keys[i]);
		} else {
			off = 0;
			appendf(what, sizeof(what), &off, "egress.allow \"%s\" "
				"(--wildcards), for", keys[i]);
			list_names(what, sizeof(what), &off, names);
		}
		explain("+", what, e);
	}
	free(keys);
}

/* Special-purpose classes that allow_ranges is never drafted for: they
 * reach this machine, its link (cloud metadata at 169.254.169.254) or
 * nothing at all. */
static bool range_forbidden(enum addr_class c)
{
	switch (c) {
	case ADDR_CLASS_THIS_NETWORK:
	case ADDR_CLASS_UNSPECIFIED:
	case ADDR_CLASS_LOOPBACK:
	case ADDR_CLASS_LINK_LOCAL:
	case ADDR_CLASS_BROADCAST:
	case ADDR_CLASS_MULTICAST:
		return true;
	case ADDR_CLASS_GLOBAL:
	case ADDR_CLASS_PRIVATE:
	case ADDR_CLASS_SHARED:
	case ADDR_CLASS_IETF_PROTOCOL:
	case ADDR_CLASS_DOCUMENTATION:
	case ADDR_CLASS_BENCHMARKING:
	case ADDR_CLASS_RESERVED:
	case ADDR_CLASS_ULA:
	case ADDR_CLASS_DISCARD:
	case ADDR_CLASS_SITE_LOCAL:
	case ADDR_CLASS_SRV6_SID:
	case ADDR_CLASS_RELAY_ANYCAST:
	case ADDR_CLASS_COUNT:
		break;
	}
	return false;
}

static void apply_ranges(struct learn *l)
{
	json_t *ranges = NULL;
	size_t n, i;
	const char **keys = events_sorted_keys(l->ranges, &n);

	for (i = 0; i < n; i++) {
		json_t *e = json_object_get(l->ranges, keys[i]);
		const char *host = events_str(e, "host"), *cls;
		char what[HOSTNAME_MAX + 256], cidr[ADDR_STRLEN + 8];
		struct addr a;

		if (!addr_parse(keys[i], &a)) {
			snprintf(what, sizeof(what), "not drafted: %s was refused for a "
				 "special-purpose address its receipt does not name", host);
			explain("-", what, e);
			continue;
		}
		cls = addr_class_to_string(addr_classify(&a));
		if (addr_is_allowed(&a, l->bp->allow_ranges, l->bp->nallow_ranges)) {
			snprintf(what, sizeof(what), "nothing to add: %s (%s, for %s) is "
				 "already in the base policy's allow_ranges", keys[i], cls, host);
			explain("=", what, e);
			continue;
		}
		if (range_forbidden(addr_classify(&a))) {
			snprintf(what, sizeof(what), "not drafted: %s (%s, for %s): that "
				 "class reaches this machine or its provider, never a "
				 "service to allow", keys[i], cls, host);
			explain("-", what, e);
			continue;
		}
		if (!l->o.ranges) {
			snprintf(what, sizeof(what), "not drafted (--ranges would add "
				 "it): %s (%s, for %s)", keys[i], cls, host);
			explain("-", what, e);
			continue;
		}
		snprintf(cidr, sizeof(cidr), "%s/%u", keys[i], a.family == AF_INET ? 32u : 128u);
		if (!ranges)
			ranges = array_at(object_at(l->root, "egress"), "allow_ranges", NULL, 0);
		if (array_has(ranges, cidr))
			continue;
		json_array_append_new(ranges, json_string(cidr));
		l->additions++;
		json_object_set_new(e, "cidr", json_string(cidr));
		if (strcmp(host, keys[i]) == 0)
			snprintf(what, sizeof(what), "egress.allow_ranges \"%s\": the "
				 "target is a special-purpose address (%s)", cidr, cls);
		else
			snprintf(what, sizeof(what), "egress.allow_ranges \"%s\": %s "
				 "resolved to a special-purpose address (%s)", cidr, host, cls);
		explain("+", what, e);
	}
	free(keys);
}

/* A name env.pass and from_env accept: [A-Za-z_][A-Za-z0-9_]*. */
static bool env_name_ok(const char *s)
{
	size_t i;

	if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (i = 1; s[i]; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return i <= 128;
}

/* The secret brokering @name in the base (from_env or env), or NULL. */
static const char *brokered_by(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++)
		if ((p->secrets[i].from_env && strcmp(p->secrets[i].from_env, name) == 0) ||
		    (p->secrets[i].env && strcmp(p->secrets[i].env, name) == 0))
			return p->secrets[i].name;
	return NULL;
}

static bool env_is_set(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->nenv_set; i++)
		if (strcmp(p->env_set_names[i], name) == 0)
			return true;
	return false;
}

/* A secrets key for variable @var that @secrets does not hold yet:
 * lowercase, then "-2", "-3"... */
static void secret_key(const char *var, const json_t *secrets, char *out, size_t len)
{
	char base[56];
	size_t i;
	int k;

	for (i = 0; i < sizeof(base) - 1 && var[i]; i++) {
		base[i] = var[i];
		if (base[i] >= 'A' && base[i] <= 'Z')
			base[i] |= 0x20;
	}
	base[i] = '\0';
	snprintf(out, len, "%s", base);
	for (k = 2; json_object_get(secrets, out); k++)
		snprintf(out, len, "%s-%d", base, k);
}

/* Does @p let the agent reach @name on one of the @ports it was seen on
 * (none seen: egress.ports)? */
static bool draft_allows(const struct policy *p, const char *name, const json_t *ports)
{
	struct verdict v;
	struct host_target t;
	size_t i;
	json_t *port;

	if (hostname_normalise(name, strlen(name), &t) != HOSTNAME_OK)
		return false;
	json_array_foreach((json_t *)ports, i, port) {
		egress_decide_rules(p, &t, (uint16_t)json_integer_value(port), &v);
		if (v.action == VERDICT_ALLOW)
			return true;
	}
	for (i = 0; json_array_size(ports) == 0 && i < p->nports; i++) {
		egress_decide_rules(p, &t, p->ports[i], &v);
		if (v.action == VERDICT_ALLOW)
			return true;
	}
	return false;
}

/* The names the sessions in @sessions reached, sorted, as a JSON array:
 * those the draft @p allows in *bound, the others in *unbound. */
static void session_hosts(struct learn *l, const struct policy *p, const json_t *sessions,
			  json_t **bound, json_t **unbound)
{
	json_t *all = json_object(), *v, *ports;
	const char *sk, *h;
	size_t n, i;
	const char **keys;

	*bound = json_array();
	*unbound = json_array();
	json_object_foreach((json_t *)sessions, sk, v) {
		json_t *set = json_object_get(l->hosts, sk);

		json_object_foreach(set, h, ports) {
			json_t *acc = json_object_get(all, h);

			if (!acc) {
				acc = json_array();
				json_object_set_new(all, h, acc);
			}
			json_array_extend(acc, ports);
		}
	}
	keys = events_sorted_keys(all, &n);
	for (i = 0; i < n; i++)
		json_array_append_new(draft_allows(p, keys[i], json_object_get(all, keys[i]))
					      ? *bound : *unbound,
				      json_string(keys[i]));
	free(keys);
	json_decref(all);
}

/* Variables a shell sets for itself: passing the caller's is noise. */
static bool is_shell_noise(const char *name)
{
	static const char *const names[] = { "_", "PWD", "OLDPWD", "SHLVL" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* A name whose value may be a URL or connection string with a password in
 * it (DATABASE_URL=postgres://u:pw@host/db): the receipt names the
 * variable, never its value, so the name decides. */
static bool may_hold_url_password(const char *name)
{
	static const char *const words[] = { "URL", "URI", "DSN", "CONN" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (strcasestr(name, words[i]))
			return true;
	return false;
}

/* Hosts in @by (host -> {refs}) into a sorted array; their refs merged
 * into @e. */
static json_t *secret_hosts(const json_t *by, json_t *e)
{
	json_t *a = json_array();
	size_t n, i;
	const char **keys = events_sorted_keys(by, &n);

	for (i = 0; i < n; i++) {
		json_array_append_new(a, json_string(keys[i]));
		merge_refs(e, json_object_get(by, keys[i]));
	}
	free(keys);
	return a;
}

/* A dropped variable that looks like a credential: a secrets entry bound
 * only to the hosts the proxy saw its value injected for (secret.inject
 * of the secret learn names after it) and that the draft @mid allows.
 * Where it saw none, nothing is drafted and it is flagged: the hosts a
 * session merely reached (or carried a refused placeholder to:
 * secret.block) are never evidence of where a credential belongs. */
static void draft_secret(struct learn *l, const struct policy *mid, const char *name,
			 json_t *e)
{
	bool had = json_object_get(l->root, "secrets") != NULL;
	json_t *secrets = object_at(l->root, "secrets"), *carried, *refused, *none;
	json_t *hosts = json_array(), *denied = json_array(), *reached, *unreached, *h;
	char what[2048], lower[72];
	size_t off = 0, i;

	none = json_object();
	secret_key(name, none, lower, sizeof(lower));
	json_decref(none);
	carried = secret_hosts(json_object_get(l->carried, lower), e);
	refused = secret_hosts(json_object_get(l->refused, lower), e);
	json_array_foreach(carried, i, h) {
		json_t *ports = json_array();

		json_array_append(draft_allows(mid, json_string_value(h), ports) ? hosts : denied,
				  h);
		json_decref(ports);
	}
	session_hosts(l, mid, json_object_get(e, "sessions"), &reached, &unreached);
	json_array_extend(reached, unreached);
	{
		/* One sorted list. */
		json_t *set = json_object();
		const char **keys;
		size_t n;

		json_array_foreach(reached, i, h)
			json_object_set(set, json_string_value(h), json_true());
		json_array_clear(reached);
		keys = events_sorted_keys(set, &n);
		for (i = 0; i < n; i++)
			json_array_append_new(reached, json_string(keys[i]));
		free(keys);
		json_decref(set);
	}
	if (json_array_size(hosts) == 0) {
		if (!had)
			json_object_del(l->root, "secrets");
		appendf(what, sizeof(what), &off, "not drafted, left unbound: %s looks "
			"like a credential, so it is never passed, and no request was "
			"seen carrying it to a host the draft allows; a person writes its "
			"secrets entry (hosts) if the agent needs it", name);
		if (json_array_size(denied)) {
			appendf(what, sizeof(what), &off, "; injected for, but the draft "
				"denies:");
			list_names(what, sizeof(what), &off, denied);
		}
		if (json_array_size(refused)) {
			appendf(what, sizeof(what), &off, "; its placeholder was carried "
				"toward (refused, never bound):");
			list_names(what, sizeof(what), &off, refused);
		}
		if (json_array_size(reached)) {
			appendf(what, sizeof(what), &off, "; its session reached (never "
				"evidence):");
			list_names(what, sizeof(what), &off, reached);
		}
		explain("!", what, e);
	} else {
		char key[72];

		secret_key(name, secrets, key, sizeof(key));
		json_object_set_new(secrets, key, json_pack("{s:s, s:O}", "from_env", name,
							    "hosts", hosts));
		l->additions++;
		appendf(what, sizeof(what), &off, "secrets.%s: %s looks like a "
			"credential, so it is brokered, never passed; bound only to the "
			"hosts its value was seen injected for:", key, name);
		list_names(what, sizeof(what), &off, hosts);
		if (json_array_size(refused)) {
			appendf(what, sizeof(what), &off, " (not bound, its placeholder was "
				"refused toward:");
			list_names(what, sizeof(what), &off, refused);
			appendf(what, sizeof(what), &off, ")");
		}
		explain("+", what, e);
	}
	json_decref(hosts);
	json_decref(denied);
	json_decref(carried);
	json_decref(refused);
	json_decref(reached);
	json_decref(unreached);
}

/* @mid: the draft so far (rules and ranges applied), which a secret's
 * hosts must be reachable under. */
static void apply_env(struct learn *l, const struct policy *mid)
{
	json_t *pass = NULL;
	size_t n, i;
	const char **keys = events_sorted_keys(l->envs, &n);

	for (i = 0; i < n; i++) {
		const char *name = keys[i], *by;
		json_t *e = json_object_get(l->envs, name);
		char what[2048];

		if (!env_name_ok(name)) {
			snprintf(what, sizeof(what), "not drafted: \"%s\" is not a variable "
				 "name env.pass can hold", name);
			explain("-", what, e);
		} else if (policy_env_is_reserved(name)) {
			snprintf(what, sizeof(what), "not drafted: %s: airlock sets it in "
				 "the sandbox itself", name);
			explain("-", what, e);
		} else if ((by = brokered_by(l->bp, name))) {
			snprintf(what, sizeof(what), "nothing to add: %s is brokered by the "
				 "base policy's secret %s", name, by);
			explain("=", what, e);
		} else if (env_is_set(l->bp, name)) {
			snprintf(what, sizeof(what), "nothing to add: %s is set by the base "
				 "policy's env.set", name);
			explain("=", what, e);
		} else if (policy_env_passes(l->bp, name)) {
			snprintf(what, sizeof(what), "nothing to add: %s already passes the "
				 "base policy's env.pass", name);
			explain("=", what, e);
		} else if (is_shell_noise(name)) {
			snprintf(what, sizeof(what), "not drafted: %s: the shell sets it "
				 "itself, nothing an agent needs passed", name);
			explain("-", what, e);
		} else if (is_credential_name(name)) {
			draft_secret(l, mid, name, e);
		} else if (may_hold_url_password(name)) {
			snprintf(what, sizeof(what), "not drafted: %s: a URL or connection "
				 "string may hold a password (postgres://user:password@...), "
				 "so it is never passed; a person decides (env.pass if it holds "
				 "none, env.set with the password left out otherwise)", name);
			explain("!", what, e);
		} else {
			if (!pass && !json_is_array(json_object_get(json_object_get(l->root, "env"),
								     "pass"))) {
				/* The default's list, in its order (a policy's env.pass
				 * replaces it, so the draft's starts with it). */
				json_t *d = json_loads(policy_default_text(), 0, NULL);

				ASSERT(d);
				json_object_set_new(object_at(l->root, "env"), "pass",
						    json_deep_copy(json_object_get(
							    json_object_get(d, "env"), "pass")));
				json_decref(d);
			}
			if (!pass)
				pass = array_at(object_at(l->root, "env"), "pass",
						l->bp->env_pass, l->bp->nenv_pass);
			if (array_has(pass, name))
				continue;
			json_array_append_new(pass, json_string(name));
			l->additions++;
			snprintf(what, sizeof(what), "env.pass \"%s\"", name);
			explain("+", what, e);
		}
	}
	free(keys);
}

static void print_notes(struct learn *l)
{
	size_t n, i;
	const char **keys = events_sorted_keys(l->notes, &n);

	for (i = 0; i < n; i++)
		explain("-", keys[i], json_object_get(l->notes, keys[i]));
	free(keys);
}

/* Re-decides every drafted rule and range against the final policy @p;
 * returns how many it would still deny (0 unless this code is wrong). */
static size_t recheck(struct learn *l, const struct policy *p, const json_t *rules)
{
	size_t bad = 0, n, i;
	const char **keys = events_sorted_keys(l->targets, &n);
	json_t *e;
	const char *k;

	for (i = 0; i < n; i++) {
		e = json_object_get(l->targets, keys[i]);
		const char *host = events_str(e, "host");
		long long port = (long long)json_integer_value(json_object_get(e, "port"));
		struct verdict v;
		struct host_target t;

		if (!json_object_get(e, "rule"))
			continue;
		ASSERT(hostname_normalise(host, strlen(host), &t) == HOSTNAME_OK);
		egress_decide_rules(p, &t, port ? (uint16_t)port : (p->nports ? p->ports[0] : 443), &v);
		if (v.action != VERDICT_ALLOW) {
			fprintf(stderr, "airlock: learn: internal error: the draft still "
				"denies %s:%lld (%s)\n", host, port, v.rule);
			bad++;
		}
	}
	free(keys);
	(void)rules;
	json_object_foreach(l->ranges, k, e) {
		struct addr a;

		if (!json_object_get(e, "cidr"))
			continue;
		ASSERT(addr_parse(k, &a));
		if (!addr_is_allowed(&a, p->allow_ranges, p->nallow_ranges)) {
			fprintf(stderr, "airlock: learn: internal error: the draft still "
				"refuses the address %s\n", k);
			bad++;
		}
	}
	return bad;
}

static int parse_opts(int argc, char **argv, struct learn_opts *o)
{
	enum { OPT_POLICY = 256, OPT_WILDCARDS, OPT_RANGES, OPT_PUBKEY, OPT_UNVERIFIED };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "wildcards", no_argument, NULL, OPT_WILDCARDS },
		{ "ranges", no_argument, NULL, OPT_RANGES },
		{ "pubkey", required_argument, NULL, OPT_PUBKEY },
		{ "unverified", no_argument, NULL, OPT_UNVERIFIED },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY:
			o->base = optarg;
			break;
		case OPT_WILDCARDS:
			o->wildcards = true;
			break;
		case OPT_RANGES:
			o->ranges = true;
			break;
		case OPT_PUBKEY:
			o->pubkey = optarg;
			break;
		case OPT_UNVERIFIED:
			o->unverified = true;
			break;
		case 'h':
			fputs(cmd_learn_help, stdout);
			return -1;
		case ':':
			return usage("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage("unknown option '-%c'", optopt);
			return usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage("expected one or more EVENTS files (- for standard input)");
	return 0;
}

static void print_policy_errors(const char *path, const struct policy_errors *errs)
{
	size_t i;

	for (i = 0; i < errs->count; i++)
		fprintf(stderr, "%s: %s: %s\n", path, errs->items[i].path,
			errs->items[i].message);
}

int cmd_learn(int argc, char **argv)
{
	struct learn l = { 0 };
	struct events_set set = { 0 };
	struct policy_errors errs = { 0 };
	struct events_iter it;
	struct events_line ln;
	const struct events_file *bad;
	struct policy *final = NULL, *mid = NULL;
	json_t *rules = NULL;
	char *text = NULL, *out = NULL, err[512];
	const char *base_text;
	json_error_t jerr;
	size_t len = 0, nsessions = 0, remaining;
	int rc;

	rc = parse_opts(argc, argv, &l.o);
	if (rc != 0) {
		rc = rc < 0 ? 0 : rc;
		goto out;
	}
	rc = EXIT_USAGE;
	if (l.o.base) {
		text = util_read_file(l.o.base, (size_t)1 << 20, &len);
		if (!text) {
			fprintf(stderr, "airlock: learn: --policy %s: %s\n", l.o.base,
				errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
			goto out;
		}
		base_text = text;
	} else {
		base_text = policy_default_text();
		len = strlen(base_text);
	}
	l.bp = policy_parse(base_text, len, NULL, &errs);
	if (!l.bp) {
		fprintf(stderr, "airlock: learn: the base policy %s is invalid "
			"(airlock check lists the errors):\n", l.o.base);
		print_policy_errors(l.o.base, &errs);
		rc = EXIT_NOT_VERIFIED;
		goto out;
	}
	/* Without a base, the draft holds only what differs from the embedded
	 * default policy (which is what a policy file leaves out means). */
	if (l.o.base)
		l.root = json_loadb(base_text, len, JSON_REJECT_DUPLICATES, &jerr);
	else
		l.root = json_pack("{s:i}", "version", 1);
	ASSERT(json_is_object(l.root)); /* policy_parse accepted it */

	if (events_load(&set, argv + optind, (size_t)(argc - optind), l.o.pubkey, err,
			sizeof(err)) < 0) {
		fprintf(stderr, "airlock: learn: %s\n", err);
		goto out;
	}
	bad = events_first_failure(&set);
	if (bad) {
		fprintf(stderr, "airlock: learn: %s:%zu: %s\n", bad->path, bad->vr.bad_line,
			bad->vr.reason);
		if (!l.o.unverified) {
			fprintf(stderr, "airlock: learn: the stream does not verify: nothing "
				"drafted (--unverified drafts from it anyway)\n");
			rc = EXIT_NOT_VERIFIED;
			goto out;
		}
		fprintf(stderr, "airlock: learn: --unverified: drafting from lines that "
			"do not verify\n");
	}

	l.targets = json_object();
	l.ranges = json_object();
	l.envs = json_object();
	l.notes = json_object();
	l.hosts = json_object();
	l.carried = json_object();
	l.refused = json_object();
	events_iter_init(&it, &set);
	while (events_next(&it, &ln)) {
		nsessions = ln.session + 1;
		if (ln.obj && (ln.verified || l.o.unverified))
			learn_line(&l, &ln);
	}
	events_iter_done(&it);

	fprintf(stderr, "airlock: learn: a draft from %zu session%s, starting from %s%s\n",
		nsessions, nsessions == 1 ? "" : "s",
		l.o.base ? "--policy " : "the embedded default policy",
		l.o.base ? l.o.base : "");
	rules = json_object();
	draft_targets(&l, rules);
	if (l.o.wildcards)
		draft_wildcards(rules);
	apply_rules(&l, rules);
	apply_ranges(&l);
	out = json_dumps(l.root, JSON_INDENT(2));
	ASSERT(out);
	mid = policy_parse(out, strlen(out), NULL, &errs);
	free(out);
	out = NULL;
	if (!mid) {
		fprintf(stderr, "airlock: learn: internal error: the draft does not "
			"pass airlock check:\n");
		print_policy_errors("draft", &errs);
		rc = EXIT_NOT_VERIFIED;
		goto out;
	}
	apply_env(&l, mid);
	print_notes(&l);

	out = json_dumps(l.root, JSON_INDENT(2));
	ASSERT(out);
	final = policy_parse(out, strlen(out), NULL, &errs);
	if (!final) {
		fprintf(stderr, "airlock: learn: internal error: the draft does not "
			"pass airlock check:\n");
		print_policy_errors("draft", &errs);
		rc = EXIT_NOT_VERIFIED;
		goto out;
	}
	remaining = recheck(&l, final, rules);
	if (remaining) {
		rc = EXIT_NOT_VERIFIED;
		goto out;
	}
	fprintf(stderr, "airlock: learn: %zu addition%s; the draft passes airlock "
		"check (%s)\n", l.additions, l.additions == 1 ? "" : "s", final->digest);
	printf("%s\n", out);
	rc = 0;
	if (fflush(stdout) != 0) {
		fprintf(stderr, "airlock: learn: standard output: %s\n", strerror(errno));
		rc = EXIT_USAGE;
	}
out:
	policy_errors_free(&errs);
	policy_free(final);
	policy_free(mid);
	policy_free(l.bp);
	json_decref(l.root);
	json_decref(l.targets);
	json_decref(l.ranges);
	json_decref(l.envs);
	json_decref(l.notes);
	json_decref(l.hosts);
	json_decref(l.carried);
	json_decref(l.refused);
	json_decref(rules);
	events_set_free(&set);
	free(text);
	free(out);
	return rc;
}
