/* SPDX-License-Identifier: Apache-2.0
 * cmd_proxy.c - `airlock proxy`: the egress proxy as a standalone service,
 * for providers that enforce egress at their network layer.
 *
 * DOC: Theory of Operation
 *
 * The same proxy (proxy.c) that serves a sandbox, on a listening socket of
 * its own, with the same processes and the same receipt stream. This
 * process is the supervisor: it parses the policy, binds the socket,
 * starts the key holder (keeper.c), which alone loads the signing key and
 * writes every line, then --workers proxy workers (worker.c, default one
 * per online CPU) that share the socket. The workers wait until
 * session.start is written, so the stream begins with it; a worker that
 * cannot start makes the session a session.refused. session.end is
 * written once every worker has exited, so the stream verifies like a
 * session's.
 *
 * SIGHUP reloads the policy: a valid one is named to the key holder, which
 * writes policy.reload (the stream's digest changes there, and only there),
 * then sent to every worker for new requests; an invalid one changes
 * nothing and writes policy.reload with decision block and the errors.
 * SIGTERM and SIGINT stop accepting and give open connections up to 5 s to
 * finish. A worker that ends on its own (killed, or unable to go on) stops
 * the proxy: its end is recorded (proxy.error), the other workers drain
 * and airlock exits 125 after session.end. A key holder that dies stops
 * everything at once (125): nothing could be recorded any more.
 *
 * Old policies are kept until exit: a request decided under one may still
 * point at its rules when it is recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "commands.h"
#include "policy.h"
#include "session.h"
#include "spendd.h"
#include "supervisor.h"
#include "util.h"
#include "worker.h"

/* How long open connections may finish after SIGTERM (a test may shorten
 * it: AIRLOCK_TEST_TIMEOUTS drain). */
#define DRAIN_MS util_test_ms("drain", 5000)

const char cmd_proxy_help[] =
	"usage: airlock proxy --policy FILE --listen ADDR:PORT [--events DEST]\n"
	"                     [--events otlp+http://HOST:PORT/PATH [--feed-queue N]]\n"
	"                     [--signing-key FILE] [--session ID] [--workers N]\n"
	"                     [--max-conns N] [--client-limit N]\n"
	"                     [--ca-cert FILE --ca-key FILE | --ca-out FILE]\n"
	"                     [--placeholders FILE]\n"
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
	SESSION_FEED_HELP
	"  --signing-key FILE  Ed25519 key (PKCS#8 PEM) to sign receipts with\n"
	"  --session ID        the session id in every receipt\n"
	"  --workers N         proxy processes sharing the socket, one event\n"
	"                      loop each (default: one per online CPU)\n"
	"  --max-conns N       connections at once, in all workers (default 16384,\n"
	"                      and never more than the descriptors allow)\n"
	"  --client-limit N    connections one client address may hold (default a\n"
	"                      quarter of the connection limit)\n"
	"  --ca-cert FILE      intercept TLS (secret, git, spend and\n"
	"  --ca-key FILE       egress.intercept hosts) with this CA (PEM; the key\n"
	"                      unencrypted); needs --events\n"
	"  --ca-out FILE       intercept with a fresh CA (EC P-256, valid 90 days,\n"
	"                      its key only in memory) and write its certificate\n"
	"                      here; needs --events\n"
	"  --placeholders FILE write ENV=PLACEHOLDER lines (mode 0600) for the\n"
	"                      policy's secrets, read from this process's\n"
	"                      environment or files\n"
	"  -h, --help          show this help\n"
	"\n"
	"Signals: SIGHUP reloads the policy (an invalid one is refused and the\n"
	"old one kept); SIGTERM or SIGINT stop accepting, let open connections\n"
	"finish for up to 5 s, write session.end and exit 0.\n"
	"\n"
	"Exit status: 0 after SIGTERM/SIGINT, 125 when the proxy cannot start or\n"
	"a worker ends on its own (the end is recorded as proxy.error).\n";

struct proxy_state {
	struct supervisor sv;
	const char *path;
	struct policy **old;  /* every policy loaded after the first, freed at exit */
	size_t nold;
};

static const struct supervisor_words proxy_words = {
	.ends = ", so the proxy stops",
	.worker_lost = "the proxy stops",
	.start_error = "proxy.error",
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
	*len = (socklen_t)addr_to_sockaddr(&a, (uint16_t)port, ss);
	return true;
}

/* A worker refused a call for the spend cap under on_exhausted "stop":
 * the session the proxy serves is ended (it has no agent of its own to
 * signal): budget.exhausted, then the workers drain and the proxy exits
 * 125. */
static void exhausted(struct supervisor *sv)
{
	if (!sv->failure[0])
		snprintf(sv->failure, sizeof(sv->failure),
			 "the spend cap is exhausted and spend.on_exhausted is stop: "
			 "the proxy stops");
	session_record(sv->s, "budget.exhausted", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		       "spend.on_exhausted", json_pack("{s:s}", "on_exhausted", "stop"),
		       sv->failure);
	supervisor_stop(sv, DRAIN_MS);
}

/* SIGHUP: the new policy is parsed here; the key holder writes the
 * policy.reload line, where the stream's digest changes; then every
 * worker gets the policy, checks it is the one named, and puts it in
 * force. */
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
		session_record(st->sv.s, "policy.reload", RECEIPT_BLOCK,
			       RECEIPT_POINT_SUPERVISOR, "policy",
			       json_pack("{s:s, s:o}", "path", st->path, "errors", list),
			       "the new policy is invalid: the old one stays in force");
		util_warn("proxy: SIGHUP: %s is invalid (%zu errors); keeping the old policy",
			  st->path, errs.count);
		policy_errors_free(&errs);
		return;
	}
	session_reload(st->sv.s, np);
	st->old = util_xrealloc(st->old, (st->nold + 1) * sizeof(struct policy *));
	st->old[st->nold++] = np;
	if (worker_pool_reload(&st->sv.wp, np, err, sizeof(err)) < 0) {
		supervisor_fail(&st->sv, "proxy.error", "proxy.worker",
				json_pack("{s:s}", "path", st->path),
				"the reloaded policy could not be given to the workers: %s",
				err);
		return;
	}
	util_warn("proxy: policy reloaded (%s)", np->digest);
}

static void on_signal(struct supervisor *sv, const struct signalfd_siginfo *si)
{
	struct proxy_state *st = sv->arg;

	if (si->ssi_signo == SIGHUP && !sv->wp.stopping)
		reload(st);
	else if (si->ssi_signo == SIGTERM || si->ssi_signo == SIGINT)
		supervisor_stop(sv, DRAIN_MS);
}

static const struct supervisor_ops proxy_ops = {
	.signal = on_signal,
	.exhausted = exhausted,
};

/* A fresh standalone CA outlives a session's: the platform distributes
 * its certificate to the sandboxes it serves. */
#define PROXY_CA_LIFETIME ((long)90 * 24 * 3600)

/* Writes @len bytes of @text to @path (created or truncated, @mode, never
 * through a symbolic link). Returns 0 or -errno. */
static int write_file(const char *path, const char *text, size_t len, mode_t mode)
{
	size_t done = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0)
		r = -errno;
	while (r == 0 && done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

static void write_ca_out(struct session *s, const char *path)
{
	char err[512], *pem = NULL;
	int r;

	if (keeper_ca_cert(&s->k, &pem, err, sizeof(err)) < 0 || !pem)
		session_refuse(s, "tls.ca", pem ? err : "the key holder has no CA");
	r = write_file(path, pem, strlen(pem), 0644);
	free(pem);
	if (r < 0) {
		snprintf(err, sizeof(err), "--ca-out %s: %s", path, strerror(-r));
		session_refuse(s, "tls.ca", err);
	}
}

static void write_placeholders(struct session *s, const struct broker *b,
			       const struct gitcred *g, const struct oauth *o,
			       const char *path)
{
	size_t len, i;
	char *text = broker_placeholders_text(b, &len), *more_text, *full;
	int r;

	/* the git token's placeholder under each git.token_env variable */
	for (i = 0; g->placeholder && i < s->p->ngit_token_env; i++) {
		char *more;
		size_t j;

		/* git.credential's own variable is the broker's line already */
		for (j = 0; j < b->count; j++)
			if (strcmp(b->secrets[j].def->env, s->p->git_token_env[i]) == 0)
				break;
		if (j < b->count)
			continue;
		more = util_xasprintf("%s%s=%s\n", text, s->p->git_token_env[i],
					    g->placeholder);

		free(text);
		text = more;
		len = strlen(text);
	}
	more_text = oauth_placeholders_text(o);
	full = util_xasprintf("%s%s", text, more_text);
	free(text);
	free(more_text);
	text = full;
	len = strlen(text);
	r = write_file(path, text, len, 0600);
	free(text);
	if (r < 0) {
		char err[512];

		snprintf(err, sizeof(err), "--placeholders %s: %s", path, strerror(-r));
		session_refuse(s, "secrets", err);
	}
}

int cmd_proxy(int argc, char **argv)
{
	enum { OPT_POLICY = 256, OPT_LISTEN, OPT_EVENTS, OPT_KEY, OPT_SESSION,
	       OPT_WORKERS, OPT_MAX_CONNS, OPT_CLIENT_LIMIT, OPT_CA_CERT, OPT_CA_KEY,
	       OPT_CA_OUT, OPT_PLACEHOLDERS, OPT_FEED_QUEUE };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "events", required_argument, NULL, OPT_EVENTS },
		{ "feed-queue", required_argument, NULL, OPT_FEED_QUEUE },
		{ "signing-key", required_argument, NULL, OPT_KEY },
		{ "session", required_argument, NULL, OPT_SESSION },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "max-conns", required_argument, NULL, OPT_MAX_CONNS },
		{ "client-limit", required_argument, NULL, OPT_CLIENT_LIMIT },
		{ "ca-cert", required_argument, NULL, OPT_CA_CERT },
		{ "ca-key", required_argument, NULL, OPT_CA_KEY },
		{ "ca-out", required_argument, NULL, OPT_CA_OUT },
		{ "placeholders", required_argument, NULL, OPT_PLACEHOLDERS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *policy_path = NULL, *listen_at = NULL, *events = NULL,
		   *key = NULL, *session_id = NULL, *ca_out = NULL, *placeholders = NULL;
	struct session_ca ca = { NULL, NULL, PROXY_CA_LIFETIME };
	struct policy_errors errs = { 0 };
	struct proxy_state st = { .path = NULL };
	struct sockaddr_storage ss;
	struct session s;
	char err[512], *id = NULL, text[ADDR_STRLEN + 16];
	unsigned int workers = 0;
	unsigned long max_conns = 0, client_limit = 0;
	socklen_t sl;
	sigset_t mask;
	struct policy *p;
	int c, fd, one = 1;
	size_t i;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY: policy_path = optarg; break;
		case OPT_LISTEN: listen_at = optarg; break;
		case OPT_EVENTS: (void)session_events_option("proxy", optarg, &events); break;
		case OPT_FEED_QUEUE: session_feed_queue_option("proxy", optarg); break;
		case OPT_KEY: key = optarg; break;
		case OPT_CA_CERT: ca.cert = optarg; break;
		case OPT_CA_KEY: ca.key = optarg; break;
		case OPT_CA_OUT: ca_out = optarg; break;
		case OPT_PLACEHOLDERS: placeholders = optarg; break;
		case OPT_WORKERS: workers = worker_parse_count("proxy", optarg); break;
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
		case OPT_SESSION:
			if (!policy_session_id_valid(optarg))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "proxy: --session must be 1-128 characters of "
					 "A-Z a-z 0-9 . _ : - starting with a letter or digit");
			session_id = optarg;
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
	session_feed_check("proxy", events);
	if (!ca.cert != !ca.key)
		util_die(EXIT_AIRLOCK_FAILURE, "proxy: --ca-cert and --ca-key go together");
	if (ca.cert && ca_out)
		util_die(EXIT_AIRLOCK_FAILURE,
			 "proxy: --ca-out writes a fresh CA's certificate: not with --ca-cert");
	if ((ca.cert || ca_out) && !events)
		util_die(EXIT_AIRLOCK_FAILURE,
			 "proxy: interception needs --events: the key holder that keeps the "
			 "CA key is the one that writes the receipts");
	if (!parse_listen(listen_at, &ss, &sl))
		util_die(EXIT_AIRLOCK_FAILURE,
			 "proxy: --listen must be IPV4:PORT or [IPV6]:PORT, not '%s'", listen_at);
	/* The supervisor will hold secret values: no core dumps, no ptrace
	 * from the caller's other processes; and its children (the key
	 * holder and the workers) start as copies of it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "PR_SET_DUMPABLE");
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
	sigaddset(&mask, SIGCHLD);
	st.path = policy_path; /* SIGHUP reads it again (reload()) */
	supervisor_init(&st.sv, &s, &proxy_ops, &st, &proxy_words);
	supervisor_signals(&st.sv, &mask);

	/* The key holder first (it alone loads the key), then the ledger and
	 * the secrets (supervisor.c), then the workers, which serve only
	 * once session.start is written. */
	session_open_ca(&s, events, key, p, id, "airlock-proxy",
			ca.cert || ca_out ? &ca : NULL);
	supervisor_open(&st.sv, &(struct supervisor_plan){ .metered = spendd_wanted(p) });
	if (ca_out)
		write_ca_out(&s, ca_out);
	if (placeholders)
		write_placeholders(&s, &st.sv.broker, &st.sv.git, &st.sv.oauth, placeholders);
	if (supervisor_start_workers(&st.sv, workers ? workers : worker_default_count(),
				     &(struct supervisor_listen){
					     .fd = fd,
					     .max_conns = (unsigned int)max_conns,
					     .client_limit = (unsigned int)client_limit,
					     .intercept = ca.cert || ca_out },
				     err, sizeof(err)) < 0 ||
	    !supervisor_wait_ready(&st.sv, err, sizeof(err))) {
		if (st.sv.workers)
			worker_pool_release(&st.sv.wp);
		session_refuse(&s, "proxy", err);
	}
	close(fd); /* the workers serve it */
	if (supervisor_begin(&st.sv, "egress proxy started", err, sizeof(err)) < 0)
		supervisor_fail(&st.sv, "proxy.error", "spend.ledger", json_object(), "%s", err);
	if (worker_pool_go(&st.sv.wp) < 0)
		supervisor_fail(&st.sv, "proxy.error", "proxy.worker", json_object(),
				"cannot start the egress proxy workers");
	{
		char at[ADDR_STRLEN];
		struct addr bound;
		uint16_t port;

		ASSERT(addr_from_sockaddr((struct sockaddr *)&ss, sl, &bound, &port));
		addr_format(&bound, at, sizeof(at));
		snprintf(text, sizeof(text), bound.family == AF_INET6 ? "[%s]:%u" : "%s:%u",
			 at, port);
	}
	/* Every process is started: the supervisor's own filter (confine.c). */
	if (supervisor_confine(&st.sv, err, sizeof(err)) < 0)
		supervisor_fail(&st.sv, "proxy.error", "proxy.worker", json_object(),
				"supervisor: %s", err);
	fprintf(stderr, "airlock proxy: listening on %s\n", text);
	fflush(stderr);
	supervisor_run(&st.sv);
	supervisor_finish(&st.sv);
	c = st.sv.failure[0] ? EXIT_AIRLOCK_FAILURE : 0;
	session_end(&s, c);
	if (st.sv.failure[0])
		util_warn("proxy: %s", st.sv.failure);
	for (i = 0; i < st.nold; i++)
		policy_free(st.old[i]);
	free(st.old);
	supervisor_free(&st.sv);
	policy_free(p);
	free(id);
	return c;
}
