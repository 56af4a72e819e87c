/* SPDX-License-Identifier: Apache-2.0
 * cmd_proxy.c - `airlock proxy`: the egress proxy as a standalone service,
 * for providers that enforce egress at their network layer.
 *
 * DOC: Theory of Operation
 *
 * The same proxy (proxy.c) that serves a sandbox, on a listening socket of
 * its own, with the same receipt stream: session.start when it starts
 * listening, session.end when it stops, so the stream verifies like a
 * session's. SIGHUP reloads the policy: a valid one replaces the old one
 * for new requests and writes policy.reload (the stream's digest changes
 * there, and only there); an invalid one changes nothing and writes
 * policy.reload with decision block and the errors. SIGTERM and SIGINT stop
 * accepting and give open connections up to 5 s to finish.
 *
 * Old policies are kept until exit: a request decided under one may still
 * point at its rules when it is recorded.
 */
#include <errno.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "commands.h"
#include "policy.h"
#include "proxy.h"
#include "session.h"
#include "util.h"

#define DRAIN_MS 5000

const char cmd_proxy_help[] =
	"usage: airlock proxy --policy FILE --listen ADDR:PORT [--events DEST]\n"
	"                     [--signing-key FILE] [--session ID]\n"
	"                     [--max-conns N] [--client-limit N]\n"
	"\n"
	"Runs the egress proxy alone, for providers that enforce egress at their\n"
	"network layer. Its receipt stream starts with session.start and ends\n"
	"with session.end when it stops, so it verifies like a session's.\n"
	"\n"
	"Options:\n"
	"  --policy FILE       the policy (required)\n"
	"  --listen ADDR:PORT  where to listen: an IP address and a port\n"
	"                      ([::1]:3128 for IPv6; port 0 picks a free one)\n"
	"  --events DEST       receipts: '-', 'fd:N' or a path (appended, 0600)\n"
	"  --signing-key FILE  Ed25519 key (PKCS#8 PEM) to sign receipts with\n"
	"  --session ID        the session id in every receipt\n"
	"  --max-conns N       connections at once (default 16384, and never more\n"
	"                      than the descriptors allow)\n"
	"  --client-limit N    connections one client address may hold (default a\n"
	"                      quarter of the connection limit)\n"
	"  -h, --help          show this help\n"
	"\n"
	"Signals: SIGHUP reloads the policy (an invalid one is refused and the\n"
	"old one kept); SIGTERM or SIGINT stop accepting, let open connections\n"
	"finish for up to 5 s, write session.end and exit 0.\n"
	"\n"
	"Exit status: 0 after SIGTERM/SIGINT, 125 when the proxy cannot start.\n";

struct proxy_state {
	struct proxy *px;
	struct session *s;
	const char *path;
	struct policy **old;  /* every policy ever loaded, freed at exit */
	size_t nold;
};

static bool parse_listen(const char *text, struct sockaddr_storage *ss,
			 socklen_t *len)
{
	char host[64];
	const char *colon = strrchr(text, ':');
	unsigned long port;
	struct addr a;
	size_t hl;

	if (!colon || !util_parse_uint(colon + 1, 0, 65535, &port))
		return false;
	hl = (size_t)(colon - text);
	if (hl >= 2 && text[0] == '[' && text[hl - 1] == ']') {
		text++;
		hl -= 2;
		if (hl >= sizeof(host))
			return false;
		memcpy(host, text, hl);
		host[hl] = '\0';
		if (!addr_parse(host, &a) || a.family != AF_INET6)
			return false;
	} else {
		if (hl >= sizeof(host))
			return false;
		memcpy(host, text, hl);
		host[hl] = '\0';
		if (!addr_parse(host, &a) || a.family != AF_INET)
			return false;
	}
	memset(ss, 0, sizeof(*ss));
	if (a.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		memcpy(&sin->sin_addr, a.bytes, 4);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		memcpy(&sin6->sin6_addr, a.bytes, 16);
		*len = sizeof(*sin6);
	}
	return true;
}

static void reload(struct proxy_state *st)
{
	struct policy_errors errs = { 0 };
	struct policy *np = policy_load(st->path, NULL, &errs);
	char err[512];

	if (!np) {
		json_t *list = json_array();
		size_t i;

		for (i = 0; i < errs.count; i++)
			json_array_append_new(list, json_sprintf("%s: %s", errs.items[i].path,
								 errs.items[i].message));
		session_record(st->s, "policy.reload", RECEIPT_BLOCK,
			       RECEIPT_POINT_SUPERVISOR, "policy",
			       json_pack("{s:s, s:o}", "path", st->path, "errors", list),
			       "the new policy is invalid: the old one stays in force");
		util_warn("proxy: SIGHUP: %s is invalid (%zu errors); keeping the old policy",
			  st->path, errs.count);
		policy_errors_free(&errs);
		return;
	}
	if (proxy_set_policy(st->px, np, err, sizeof(err)) < 0) {
		session_record(st->s, "policy.reload", RECEIPT_BLOCK,
			       RECEIPT_POINT_SUPERVISOR, "policy",
			       json_pack("{s:s}", "path", st->path), err);
		util_warn("proxy: SIGHUP: %s; keeping the old policy", err);
		policy_free(np);
		return;
	}
	session_reload(st->s, np);
	st->old = util_xrealloc(st->old, (st->nold + 1) * sizeof(struct policy *));
	st->old[st->nold++] = np;
	util_warn("proxy: policy reloaded (%s)", np->digest);
}

static bool on_signal(void *arg, const struct signalfd_siginfo *si)
{
	struct proxy_state *st = arg;

	if (si->ssi_signo == SIGHUP) {
		reload(st);
		return true;
	}
	proxy_stop(st->px, DRAIN_MS);
	return true;
}

int cmd_proxy(int argc, char **argv)
{
	enum { OPT_POLICY = 256, OPT_LISTEN, OPT_EVENTS, OPT_KEY, OPT_SESSION,
	       OPT_MAX_CONNS, OPT_CLIENT_LIMIT };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "events", required_argument, NULL, OPT_EVENTS },
		{ "signing-key", required_argument, NULL, OPT_KEY },
		{ "session", required_argument, NULL, OPT_SESSION },
		{ "max-conns", required_argument, NULL, OPT_MAX_CONNS },
		{ "client-limit", required_argument, NULL, OPT_CLIENT_LIMIT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *policy_path = NULL, *listen_at = NULL, *events = NULL,
		   *key = NULL, *session_id = NULL;
	struct policy_errors errs = { 0 };
	struct proxy_state st = { 0 };
	struct sockaddr_storage ss;
	struct proxy_opts po;
	struct session s;
	char err[256], *id = NULL, text[ADDR_STRLEN + 16];
	unsigned long max_conns = 0, client_limit = 0;
	socklen_t sl;
	sigset_t mask;
	struct policy *p;
	int c, fd, sfd, one = 1;
	size_t i;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY: policy_path = optarg; break;
		case OPT_LISTEN: listen_at = optarg; break;
		case OPT_EVENTS: events = optarg; break;
		case OPT_KEY: key = optarg; break;
		case OPT_SESSION:
			if (!policy_session_id_valid(optarg))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "proxy: --session must be 1-128 characters of "
					 "A-Z a-z 0-9 . _ : - starting with a letter or digit");
			session_id = optarg;
			break;
		case OPT_MAX_CONNS:
			if (!util_parse_uint(optarg, 1, 1u << 24, &max_conns))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "proxy: --max-conns must be a number from 1 to %u",
					 1u << 24);
			break;
		case OPT_CLIENT_LIMIT:
			if (!util_parse_uint(optarg, 1, 1u << 24, &client_limit))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "proxy: --client-limit must be a number from 1 to %u",
					 1u << 24);
			break;
		case 'h':
			fputs(cmd_proxy_help, stdout);
			return 0;
		default:
			util_die(EXIT_AIRLOCK_FAILURE,
				 "proxy: unknown option or missing value '%s' (see 'airlock proxy --help')",
				 argv[optind - 1]);
		}
	}
	if (optind < argc)
		util_die(EXIT_AIRLOCK_FAILURE, "proxy: unexpected argument '%s'", argv[optind]);
	if (!policy_path || !listen_at)
		util_die(EXIT_AIRLOCK_FAILURE, "proxy: --policy and --listen are required");
	if (!parse_listen(listen_at, &ss, &sl))
		util_die(EXIT_AIRLOCK_FAILURE,
			 "proxy: --listen must be IPV4:PORT or [IPV6]:PORT, not '%s'", listen_at);
	p = policy_load(policy_path, NULL, &errs);
	if (!p)
		session_die_invalid_policy(policy_path, &errs);
	id = session_choose_id(session_id, p, "proxy");

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "proxy: socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "proxy: cannot listen on %s", listen_at);
	if (listen(fd, SOMAXCONN) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "proxy: listen");
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "proxy: getsockname");

	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "proxy: signalfd");

	session_open(&s, events, key, p, id, "airlock-proxy");
	memset(&po, 0, sizeof(po));
	po.listen_fd = fd;
	po.policy = p;
	po.record = session_record_borrowed;
	po.record_arg = &s;
	po.signal_fd = sfd;
	po.on_signal = on_signal;
	po.signal_arg = &st;
	po.max_conns = (unsigned int)max_conns;
	po.client_limit = (unsigned int)client_limit;
	st.s = &s;
	st.path = policy_path;
	st.px = proxy_new(&po, err, sizeof(err));
	if (!st.px)
		session_refuse(&s, "proxy", err);
	session_begin(&s, "session.start", RECEIPT_INFO, "session",
		      "egress proxy started");
	if (ss.ss_family == AF_INET6) {
		char a6[ADDR_STRLEN];

		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a6, sizeof(a6));
		snprintf(text, sizeof(text), "[%s]:%u", a6,
			 ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
	} else {
		char a4[ADDR_STRLEN];

		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, a4, sizeof(a4));
		snprintf(text, sizeof(text), "%s:%u", a4,
			 ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	fprintf(stderr, "airlock proxy: listening on %s\n", text);
	fflush(stderr);
	c = proxy_run(st.px);
	proxy_free(st.px);
	session_end(&s, c < 0 ? EXIT_AIRLOCK_FAILURE : 0);
	for (i = 0; i < st.nold; i++)
		policy_free(st.old[i]);
	free(st.old);
	policy_free(p);
	free(id);
	close(sfd);
	return c < 0 ? EXIT_AIRLOCK_FAILURE : 0;
}
