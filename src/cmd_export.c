/* SPDX-License-Identifier: Apache-2.0
 * cmd_export.c - `airlock export --format ocsf [--pubkey FILE]
 * [--unverified] [-o FILE] EVENTS...`: receipts as OCSF 1.1.0 JSON Lines
 * for a SIEM.
 *
 * DOC: Theory of Operation
 *
 * A SIEM record is only as good as the line it came from, so export
 * verifies every stream first, with the same verifier as `airlock verify`,
 * and writes nothing when one does not verify (exit 1) unless
 * --unverified is given; then every event says whether its line verified.
 *
 * Each receipt becomes one event of the OCSF class its type's entry in the
 * events.c table names (Network Activity, HTTP Activity, DNS Activity,
 * Process Activity, or Base Event for types OCSF has no class for), and
 * each receipt of decision block or would_block is followed by a
 * Detection Finding. Every event carries what ties it to its signed line:
 * metadata.sequence is the receipt's seq, metadata.correlation_uid its
 * session, and unmapped.airlock holds the line's SHA-256 (of its bytes
 * without the newline: the next line's "prev"), the policy digest, the
 * file and line number, and every member of the receipt but the
 * signature. docs/AUDIT.md gives the mapping field by field.
 *
 * Output goes to standard output, or to -o FILE through a temporary file
 * renamed into place, so that a failed export never leaves half a file.
 *
 * Exit status: 0 exported; 1 a stream does not verify (nothing written);
 * 2 usage error, a file that cannot be read or written.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "addr.h"
#include "commands.h"
#include "events.h"
#include "export.h"
#include "util.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.1.0"
#endif

#define OCSF_VERSION "1.1.0"
#define EXIT_NOT_VERIFIED 1
#define EXIT_USAGE 2

const char cmd_export_help[] =
	"usage: airlock export --format ocsf [--pubkey FILE] [--unverified]\n"
	"                      [-o FILE] EVENTS...\n"
	"\n"
	"Writes the receipts of EVENTS (files, or - for standard input) as OCSF\n"
	"1.1.0 JSON Lines, one event per line, for a SIEM: egress.* as Network\n"
	"Activity (4001), http.request, git.* and secret.* as HTTP Activity\n"
	"(4002), dns.block as DNS Activity (4003), session.start and\n"
	"session.end as Process Activity (1007), other types as Base Event (0);\n"
	"every block and would_block is followed by a Detection Finding (2004).\n"
	"Each event carries the receipt's seq (metadata.sequence), its line's\n"
	"SHA-256 and the policy digest (unmapped.airlock), which tie it to the\n"
	"signed line. docs/AUDIT.md gives the mapping field by field.\n"
	"\n"
	"The streams are verified first (as airlock verify); one that does not\n"
	"verify is refused and nothing is written.\n"
	"\n"
	"  --format ocsf  the output format (required; ocsf is the only one)\n"
	"  --pubkey FILE  every line must be signed by this key (as verify)\n"
	"  --unverified   export a stream that does not verify; each event's\n"
	"                 unmapped.airlock.verified says whether its line did\n"
	"  -o FILE        write to FILE (mode 0600, replaced atomically) instead\n"
	"                 of standard output\n"
	"  -h, --help     print this help\n"
	"\n"
	"Exit status: 0 exported; 1 a stream does not verify (nothing written);\n"
	"2 usage error, or a file that cannot be read or written.\n";

struct export_opts {
	const char *format, *pubkey, *out;
	bool unverified;
};

__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("airlock: export: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see airlock export --help)\n", stderr);
	return EXIT_USAGE;
}

static const char *const severity_names[] = {
	"Unknown", "Informational", "Low", "Medium", "High", "Critical", "Fatal",
};

/* OCSF severity_id: informational unless refused; a would_block is one
 * step below the block it would have been. */
static int severity_of(const struct events_line *ln)
{
	int s = ln->ti->block_severity ? ln->ti->block_severity : 3;

	switch (ln->decision) {
	case RECEIPT_BLOCK:
		return s;
	case RECEIPT_WOULD_BLOCK:
		return s > 2 ? s - 1 : 2;
	case RECEIPT_ALLOW:
	case RECEIPT_INFO:
	case RECEIPT_DECISION_COUNT:
		break;
	}
	return 1;
}

/* The Security Control profile: action and disposition. Nothing for an
 * info line. */
static void set_action(json_t *ev, const struct events_line *ln)
{
	const char *an = "Unknown", *dn = "Unknown";
	int action = 0, disp = 0;

	switch (ln->decision) {
	case RECEIPT_ALLOW:
		action = 1, an = "Allowed", disp = 1, dn = "Allowed";
		break;
	case RECEIPT_BLOCK:
		action = 2, an = "Denied", disp = 2, dn = "Blocked";
		break;
	case RECEIPT_WOULD_BLOCK:
		action = 1, an = "Allowed", disp = 15, dn = "Detected";
		break;
	case RECEIPT_INFO:
	case RECEIPT_DECISION_COUNT:
		return;
	}
	json_object_set_new(ev, "action_id", json_integer(action));
	json_object_set_new(ev, "action", json_string(an));
	json_object_set_new(ev, "disposition_id", json_integer(disp));
	json_object_set_new(ev, "disposition", json_string(dn));
}

static json_t *endpoint(const char *host, const json_t *port, const char *address)
{
	json_t *e = json_object();
	struct addr a;

	if (*host && addr_parse(host, &a))
		json_object_set_new(e, "ip", json_string(host));
	else if (*host)
		json_object_set_new(e, "hostname", json_string(host));
	if (*address && !json_object_get(e, "ip"))
		json_object_set_new(e, "ip", json_string(address));
	if (json_is_integer(port))
		json_object_set_new(e, "port", json_integer(json_integer_value(port)));
	if (json_object_size(e) == 0)
		json_object_set_new(e, "name", json_string("unknown"));
	return e;
}

/* The receipt's destination: subject host, port, address (or the first
 * of addresses). */
static json_t *dst_of(const struct events_line *ln)
{
	const char *host = events_str(ln->subject, "host");
	const char *address = events_str(ln->subject, "address");
	json_t *addrs = json_object_get(ln->subject, "addresses");

	if (!*host)
		host = events_str(ln->subject, "target");
	if (!*address && json_is_array(addrs))
		address = events_str(json_array_get(addrs, 0), "address");
	return endpoint(host, json_object_get(ln->subject, "port"), address);
}

static json_t *src_of(const struct events_line *ln)
{
	return json_pack("{s:s, s:s}", "name", "agent", "uid", ln->session_id);
}

static json_t *unmapped(const struct events_line *ln, const char *path)
{
	json_t *u = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s,"
			      " s:O, s:s, s:b, s:{s:s, s:I}}",
			      "seq", (json_int_t)ln->seq, "line_sha256", ln->sha256,
			      "prev", ln->prev, "policy", ln->policy,
			      "session", ln->session_id, "ts", ln->ts, "type", ln->type,
			      "decision", ln->decision_s, "point", ln->point,
			      "rule", ln->rule, "label", ln->ti->label,
			      "subject", ln->subject ? ln->subject : json_object(),
			      "reason", ln->reason, "verified", ln->verified,
			      "source", "file", path, "line", (json_int_t)ln->lineno);

	ASSERT(u);
	if (!ln->lineno) /* a line on its own (the live feed): no line number */
		json_object_del(json_object_get(u, "source"), "line");
	return json_pack("{s:o}", "airlock", u);
}

/* The members every event has. @uid_suffix tells a finding's uid apart
 * from its activity's. */
static json_t *event_new(const struct events_line *ln, enum events_ocsf cls,
			 int activity, const char *activity_name, const char *path,
			 const char *uid_suffix)
{
	int uid = events_ocsf_class_uid(cls), sev = severity_of(ln);
	char type_name[160], muid[256];
	json_t *ev, *md;

	snprintf(type_name, sizeof(type_name), "%s: %s", events_ocsf_to_string(cls),
		 activity_name);
	snprintf(muid, sizeof(muid), "%s:%lld%s", ln->session_id, (long long)ln->seq,
		 uid_suffix);
	md = json_pack("{s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:s, s:I, s:s, s:s, s:s, s:s}",
		       "version", OCSF_VERSION,
		       "product", "name", "airlock", "vendor_name", "airlock",
		       "version", AIRLOCK_VERSION, "feature", "name",
		       *ln->point ? ln->point : "unknown",
		       "uid", muid, "sequence", (json_int_t)ln->seq,
		       "correlation_uid", ln->session_id, "original_time", ln->ts,
		       "event_code", ln->type, "log_name", path);
	ASSERT(md);
	if (ln->decision == RECEIPT_BLOCK || ln->decision == RECEIPT_WOULD_BLOCK ||
	    ln->decision == RECEIPT_ALLOW)
		json_object_set_new(md, "profiles", json_pack("[s]", "security_control"));
	ev = json_pack("{s:i, s:s, s:i, s:s, s:i, s:s, s:I, s:s, s:I, s:i, s:s, s:s, s:o}",
		       "class_uid", uid, "class_name", events_ocsf_to_string(cls),
		       "category_uid", events_ocsf_category_uid(cls),
		       "category_name", events_ocsf_category_name(cls),
		       "activity_id", activity, "activity_name", activity_name,
		       "type_uid", (json_int_t)uid * 100 + activity, "type_name", type_name,
		       "time", (json_int_t)(ln->ts_ms >= 0 ? ln->ts_ms : 0),
		       "severity_id", sev, "severity", severity_names[sev],
		       "message", ln->reason, "metadata", md);
	ASSERT(ev);
	set_action(ev, ln);
	json_object_set_new(ev, "unmapped", unmapped(ln, path));
	return ev;
}

static void set_status(json_t *ev, bool success, const char *code)
{
	json_object_set_new(ev, "status_id", json_integer(success ? 1 : 2));
	json_object_set_new(ev, "status", json_string(success ? "Success" : "Failure"));
	if (*code)
		json_object_set_new(ev, "status_code", json_string(code));
}

struct http_method {
	const char *name;
	int id;
};

static int http_activity(const char *method, const char **name)
{
	static const struct http_method methods[] = {
		{ "CONNECT", 1 }, { "DELETE", 2 }, { "GET", 3 }, { "HEAD", 4 },
		{ "OPTIONS", 5 }, { "POST", 6 }, { "PUT", 7 }, { "TRACE", 8 },
	};
	static const char *const names[] = {
		"Unknown", "Connect", "Delete", "Get", "Head", "Options", "Post", "Put", "Trace",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(methods); i++)
		if (strcmp(method, methods[i].name) == 0) {
			*name = names[methods[i].id];
			return methods[i].id;
		}
	*name = "Other";
	return 99;
}

/* The activity event of @ln. */
static json_t *activity_event(const struct events_line *ln, const struct export_session *s,
			      const char *path)
{
	bool refused = ln->decision == RECEIPT_BLOCK;
	const char *aname;
	json_t *ev = NULL;
	double exit_code;
	int act;

	switch (ln->ti->ocsf) {
	case EVENTS_OCSF_NETWORK:
		if (strcmp(ln->type, "proxy.error") == 0)
			act = 4, aname = "Fail";
		else if (refused)
			act = 5, aname = "Refuse";
		else
			act = 1, aname = "Open";
		ev = event_new(ln, EVENTS_OCSF_NETWORK, act, aname, path, "");
		json_object_set_new(ev, "src_endpoint", src_of(ln));
		json_object_set_new(ev, "dst_endpoint", dst_of(ln));
		json_object_set_new(ev, "connection_info",
				    json_pack("{s:i, s:s, s:s}", "direction_id", 2,
					      "direction", "Outbound", "protocol_name", "tcp"));
		if (*ln->rule && ln->decision != RECEIPT_INFO)
			json_object_set_new(ev, "firewall_rule",
					    json_pack("{s:s, s:s}", "uid", ln->rule, "name",
						      *events_str(ln->subject, "rule")
							      ? events_str(ln->subject, "rule")
							      : ln->rule));
		set_status(ev, !refused, ln->rule);
		break;
	case EVENTS_OCSF_HTTP: {
		json_t *url, *req, *resp, *v;
		const char *path_s = events_str(ln->subject, "path");
		const char *method = events_str(ln->subject, "method");
		json_int_t code = 0;

		act = http_activity(method, &aname);
		ev = event_new(ln, EVENTS_OCSF_HTTP, act, aname, path, "");
		url = json_object();
		if (*events_str(ln->subject, "host"))
			json_object_set_new(url, "hostname",
					    json_string(events_str(ln->subject, "host")));
		if (*path_s)
			json_object_set_new(url, "path", json_string(path_s));
		req = json_pack("{s:o}", "url", url);
		if (*method)
			json_object_set_new(req, "http_method", json_string(method));
		v = json_object_get(ln->subject, "status");
		if (json_is_integer(v))
			code = json_integer_value(v);
		else if (refused)
			code = ln->ti->block_status;
		resp = json_pack("{s:I}", "code", code);
		json_object_set_new(ev, "http_request", req);
		json_object_set_new(ev, "http_response", resp);
		if (code)
			json_object_set_new(ev, "http_status", json_integer(code));
		json_object_set_new(ev, "src_endpoint", src_of(ln));
		json_object_set_new(ev, "dst_endpoint", dst_of(ln));
		if (json_is_integer(json_object_get(ln->subject, "bytes_in")) ||
		    json_is_integer(json_object_get(ln->subject, "bytes_out"))) {
			json_t *t = json_object();

			if ((v = json_object_get(ln->subject, "bytes_in")) && json_is_integer(v))
				json_object_set(t, "bytes_in", v);
			if ((v = json_object_get(ln->subject, "bytes_out")) && json_is_integer(v))
				json_object_set(t, "bytes_out", v);
			json_object_set_new(ev, "traffic", t);
		}
		set_status(ev, !refused && (code == 0 || code < 400), ln->rule);
		break;
	}
	case EVENTS_OCSF_DNS: {
		const char *name = events_str(ln->subject, "name");

		if (!*name)
			name = events_str(ln->subject, "host");
		ev = event_new(ln, EVENTS_OCSF_DNS, 2, "Response", path, "");
		json_object_set_new(ev, "query", json_pack("{s:s, s:s}", "hostname", name,
							   "type", "A"));
		json_object_set_new(ev, "rcode_id", json_integer(3));
		json_object_set_new(ev, "rcode", json_string("NXDomain"));
		json_object_set_new(ev, "src_endpoint", src_of(ln));
		json_object_set_new(ev, "dst_endpoint",
				    json_pack("{s:s}", "name", "airlock DNS stub"));
		set_status(ev, ln->decision != RECEIPT_BLOCK, ln->rule);
		break;
	}
	case EVENTS_OCSF_PROCESS: {
		bool end = strcmp(ln->type, "session.end") == 0;
		bool ok = !refused;

		ev = event_new(ln, EVENTS_OCSF_PROCESS, end ? 2 : 1, end ? "Terminate" : "Launch",
			       path, "");
		json_object_set_new(ev, "process", json_pack("{s:s, s:s}", "name",
							     *s->argv0 ? s->argv0 : "unknown",
							     "uid", ln->session_id));
		json_object_set_new(ev, "actor",
				    json_pack("{s:{s:s}}", "process", "name", "airlock"));
		json_object_set_new(ev, "device", json_pack("{s:i, s:s}", "type_id", 0,
							    "type", "Unknown"));
		if (end && events_num(ln->subject, "exit", &exit_code)) {
			json_object_set_new(ev, "exit_code", json_integer((json_int_t)exit_code));
			ok = exit_code == 0;
		}
		set_status(ev, ok, ln->rule);
		break;
	}
	case EVENTS_OCSF_BASE:
	case EVENTS_OCSF_FINDING:
	case EVENTS_OCSF_COUNT:
		ev = event_new(ln, EVENTS_OCSF_BASE, 99, ln->ti->name[0] ? ln->ti->label : ln->type,
			       path, "");
		set_status(ev, !refused, ln->rule);
		break;
	}
	return ev;
}

/* The Detection Finding that follows the activity @act of a block or a
 * would_block. */
static json_t *finding_event(const struct events_line *ln, const json_t *act,
			     const char *path)
{
	char uid[256], title[512];
	json_t *ev, *dst;

	snprintf(uid, sizeof(uid), "%s:%lld", ln->session_id, (long long)ln->seq);
	snprintf(title, sizeof(title), "%s%s: %s", ln->ti->name[0] ? ln->ti->label : ln->type,
		 ln->decision == RECEIPT_WOULD_BLOCK ? " (would block)" : "", ln->rule);
	ev = event_new(ln, EVENTS_OCSF_FINDING, 1, "Create", path, ":finding");
	json_object_set_new(ev, "finding_info",
			    json_pack("{s:s, s:s, s:s, s:[s], s:{s:s, s:s, s:i, s:s},"
				      " s:[{s:s, s:O}]}",
				      "uid", uid, "title", title, "desc", ln->reason,
				      "types", ln->type,
				      "analytic", "uid", ln->rule, "name", ln->rule,
				      "type_id", 1, "type", "Rule",
				      "related_events", "uid", uid, "type_uid",
				      json_object_get(act, "type_uid")));
	json_object_set_new(ev, "status_id", json_integer(1));
	json_object_set_new(ev, "status", json_string("New"));
	dst = json_object_get(act, "dst_endpoint");
	if (dst)
		json_object_set_new(ev, "evidences", json_pack("[{s:O}]", "dst_endpoint", dst));
	return ev;
}

json_t *export_ocsf_events(const struct events_line *ln, struct export_session *s,
			   const char *path)
{
	json_t *out = json_array(), *act;

	ASSERT(out && ln->obj);
	if (ln->seq == 0 || receipt_type_opens_stream(ln->type))
		snprintf(s->argv0, sizeof(s->argv0), "%s", events_str(ln->subject, "argv0"));
	act = activity_event(ln, s, path);
	json_array_append_new(out, act);
	if (ln->decision == RECEIPT_BLOCK || ln->decision == RECEIPT_WOULD_BLOCK)
		json_array_append_new(out, finding_event(ln, act, path));
	return out;
}

static int write_event(FILE *out, json_t *ev)
{
	char *s = json_dumps(ev, JSON_COMPACT);
	int rc;

	ASSERT(s);
	rc = fputs(s, out) < 0 || fputc('\n', out) == EOF ? -1 : 0;
	free(s);
	return rc;
}

static int parse_opts(int argc, char **argv, struct export_opts *o)
{
	enum { OPT_FORMAT = 256, OPT_PUBKEY, OPT_UNVERIFIED };
	static const struct option opts[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "pubkey", required_argument, NULL, OPT_PUBKEY },
		{ "unverified", no_argument, NULL, OPT_UNVERIFIED },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case OPT_FORMAT:
			o->format = optarg;
			break;
		case OPT_PUBKEY:
			o->pubkey = optarg;
			break;
		case OPT_UNVERIFIED:
			o->unverified = true;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'h':
			fputs(cmd_export_help, stdout);
			return -1;
		case ':':
			return usage("%s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage("unknown option '-%c'", optopt);
			return usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->format)
		return usage("--format ocsf is required");
	if (strcmp(o->format, "ocsf") != 0)
		return usage("unknown format '%s': the only format is ocsf", o->format);
	if (optind >= argc)
		return usage("expected one or more EVENTS files (- for standard input)");
	if (o->out && (!*o->out || strcmp(o->out, "-") == 0))
		o->out = NULL;
	return 0;
}

int cmd_export(int argc, char **argv)
{
	struct export_opts o;
	struct events_set set = { 0 };
	struct export_session sess = { { 0 } };
	struct events_iter it;
	struct events_line ln;
	const struct events_file *bad;
	char err[512], *tmp = NULL;
	FILE *out = NULL;
	size_t events = 0, findings = 0, skipped = 0;
	int rc, fd = -1;

	rc = parse_opts(argc, argv, &o);
	if (rc != 0) {
		rc = rc < 0 ? 0 : rc;
		goto out;
	}
	rc = EXIT_USAGE;
	if (events_load(&set, argv + optind, (size_t)(argc - optind), o.pubkey, err,
			sizeof(err)) < 0) {
		fprintf(stderr, "airlock: export: %s\n", err);
		goto out;
	}
	bad = events_first_failure(&set);
	if (bad) {
		fprintf(stderr, "airlock: export: %s:%zu: %s\n", bad->path, bad->vr.bad_line,
			bad->vr.reason);
		if (!o.unverified) {
			fprintf(stderr, "airlock: export: the stream does not verify: nothing "
				"exported (--unverified exports it, marking each event)\n");
			rc = EXIT_NOT_VERIFIED;
			goto out;
		}
	}
	if (o.out) {
		tmp = util_xasprintf("%s.tmp.XXXXXX", o.out);
		fd = mkstemp(tmp);
		if (fd < 0 || fchmod(fd, 0600) < 0 || !(out = fdopen(fd, "w"))) {
			fprintf(stderr, "airlock: export: %s: %s\n", o.out, strerror(errno));
			goto out;
		}
		fd = -1;
	} else {
		out = stdout;
	}

	events_iter_init(&it, &set);
	while (events_next(&it, &ln)) {
		const char *path = set.files[ln.file].path;
		json_t *evs, *ev;
		size_t i;

		if (ln.new_session)
			memset(&sess, 0, sizeof(sess));
		if (!ln.obj) {
			fprintf(stderr, "airlock: export: %s:%zu: not a JSON object: skipped\n",
				path, ln.lineno);
			skipped++;
			continue;
		}
		evs = export_ocsf_events(&ln, &sess, path);
		json_array_foreach(evs, i, ev) {
			if (write_event(out, ev) < 0) {
				json_decref(evs);
				goto write_failed;
			}
			if (i == 0)
				events++;
			else
				findings++;
		}
		json_decref(evs);
	}
	events_iter_done(&it);
	if (fflush(out) != 0 || (out != stdout && fsync(fileno(out)) < 0))
		goto write_failed;
	if (out != stdout) {
		if (fclose(out) != 0) {
			out = NULL;
			goto write_failed;
		}
		out = NULL;
		if (rename(tmp, o.out) < 0)
			goto write_failed;
		free(tmp);
		tmp = NULL;
	}
	if (o.out)
		fprintf(stderr, "airlock: export: %zu events and %zu findings written to %s%s\n",
			events, findings, o.out, skipped ? " (some lines skipped)" : "");
	rc = 0;
	goto out;
write_failed:
	events_iter_done(&it);
	fprintf(stderr, "airlock: export: %s: %s\n", o.out ? o.out : "standard output",
		strerror(errno ? errno : EIO));
	rc = EXIT_USAGE;
out:
	if (out && out != stdout)
		fclose(out);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	events_set_free(&set);
	return rc;
}
