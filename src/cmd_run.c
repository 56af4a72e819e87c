/* SPDX-License-Identifier: Apache-2.0
 * cmd_run.c - `airlock run`: option parsing, policy loading and the
 * session lifecycle around the agent command.
 *
 * DOC: Theory of Operation
 *
 * `run` loads the effective policy (the file, or the embedded default
 * policy, with --mode/--enforce applied), picks the session id (--session,
 * else the policy's session.id, else a random one), and then:
 *
 * - mode off without --events: records session.start, session.exec and
 *   session.end in the default events file (when it can; silently not
 *   otherwise), then execs CMD in place. Same pid, environment, network and
 *   filesystem: there is nothing airlock could change, so it changes
 *   nothing, and prints nothing.
 * - mode off with --events: forks CMD, writes session.start before it runs
 *   and session.end with its exit status after it ends. Signals sent to
 *   airlock by another process (kill) are forwarded to CMD; signals the
 *   terminal sends to the whole foreground process group reach CMD directly
 *   and are not forwarded a second time.
 * - shadow and enforce: refuses (125) when a file that decides or records
 *   the session lies where the agent can write (runfiles.c), gives the
 *   agent pipes for the caller's descriptors that are files
 *   (stdio_relay.c), reads the secrets, builds the agent's environment,
 *   writes session.start and one env.drop per unclassified variable, starts
 *   the sandbox (sandbox.c) and has its proxy socket served until the
 *   sandbox's init exits. Where the host lacks a capability (doctor.c), it
 *   writes a session.refused block receipt instead of session.start and
 *   exits 125. The egress proxy (proxy.c) runs in proxy worker processes
 *   (worker.c) and every receipt is written by the key holder (keeper.c):
 *   see "the processes of a session" below. Without --events the receipts
 *   go to $XDG_STATE_HOME/airlock/SESSION.jsonl (else
 *   ~/.local/state/airlock/), named on stderr at the end with the
 *   fingerprint of the key that signed them.
 *
 * Exit status (man page, EXIT STATUS): CMD's own, 128+N if CMD was killed by signal N,
 * 125 when airlock fails, 126 when CMD cannot be executed, 127 when it is
 * not found. An exec failure travels back over a close-on-exec pipe, so it
 * is never confused with CMD exiting 126 or 127 itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "commands.h"
#include "confine.h"
#include "dnsd.h"
#include "dnsstub.h"
#include "gitcred.h"
#include "oauth.h"
#include "doctor.h"
#include "env.h"
#include "policy.h"
#include "publish.h"
#include "receipt.h"
#include "run_hints.h"
#include "runfiles.h"
#include "sandbox.h"
#include "session.h"
#include "spendd.h"
#include "stdio_relay.h"
#include "supervisor.h"
#include "transparent.h"
#include "tls_ca.h"
#include "util.h"
#include "worker.h"

const char cmd_run_help[] =
	"usage: airlock run [OPTIONS] -- CMD [ARG...]\n"
	"\n"
	"Runs CMD as an agent session under a policy.\n"
	"\n"
	"Options:\n"
	"  --policy FILE       the policy (default: the embedded default policy:\n"
	"                      mode shadow, nothing allowed, no secrets)\n"
	"  --mode MODE         off | shadow | enforce; overrides the policy's mode\n"
	"  --enforce           same as --mode enforce\n"
	"  --events DEST       write the receipt stream to DEST: '-' (stdout),\n"
	"                      'fd:N', or a path (appended to, created 0600);\n"
	"                      default: $XDG_STATE_HOME/airlock/SESSION.jsonl\n"
	"                      ($HOME/.local/state/airlock/ when unset), named\n"
	"                      on stderr at the end with the key's fingerprint\n"
	SESSION_FEED_HELP
	"  --signing-key FILE  sign receipts with this Ed25519 key (PKCS#8 PEM,\n"
	"                      from 'airlock keygen'); default: a fresh key per\n"
	"                      session, whose public key is in session.start\n"
	"  --witness URL=KEYFILE  have the C2SP witness at URL (airlock witness)\n"
	"                      cosign each new checkpoint as the session goes,\n"
	"                      and the last one at the end; KEYFILE is its\n"
	"                      public key (SPKI PEM); each cosignature is a\n"
	"                      receipt.cosignature line, the last one's goes\n"
	"                      into session.end (see airlock verify --witness)\n"
	"  --session ID        the session id (default: the policy's session.id,\n"
	"                      else a random one)\n"
	"  --workspace DIR     the agent's working directory (default: the\n"
	"                      current directory)\n"
	"  --workers N         egress proxy processes, one event loop each\n"
	"                      (default: one per online CPU)\n"
	"  --parent ID         the parent session in the spend ledger (same as\n"
	"                      spend.parent, which it overrides): this session's\n"
	"                      spend also counts against every ancestor's cap\n"
	"  --publish [ADDR:]PORT:SANDBOX_PORT\n"
	"                      publish the sandbox's loopback port SANDBOX_PORT\n"
	"                      on ADDR:PORT of the host (ADDR default 127.0.0.1;\n"
	"                      repeatable), as an entry of the policy's publish\n"
	"                      list with protocol http (see docs/SANDBOX.md)\n"
	"  --quiet             no summary of what the session blocked at the end\n"
	"                      (by default, when it blocked anything: the count\n"
	"                      by rule, the first targets and the events file)\n"
	"  -h, --help          show this help\n"
	"\n"
	"Modes: 'off' runs CMD unchanged. 'shadow' and 'enforce' run it in the\n"
	"sandbox (new namespaces, read-only host, network only through the proxy\n"
	"at 127.0.0.1:3128); enforce drops every variable not in env.pass and\n"
	"refuses to start (125) where 'airlock doctor' reports a missing\n"
	"capability; shadow passes them and records each as env.drop\n"
	"would_block. The agent's only network path is the egress proxy, which\n"
	"applies the policy's egress rules ('airlock proxy --help'). The agent\n"
	"sees the host read-only, without the caller's credentials (/root,\n"
	"/home, $HOME, /etc/shadow, ...: a private empty $HOME, /tmp and\n"
	"/var/tmp instead); the workspace's .git/config, hooks and info stay\n"
	"read-only. In shadow and enforce mode, the policy, the signing key,\n"
	"the events file and the files the policy names may not lie in the\n"
	"workspace or an fs.rw path (125).\n"
	"\n"
	"Exit status: CMD's own status (128+N if it was killed by signal N);\n"
	"125 if airlock itself fails, 126 if CMD cannot be executed, 127 if CMD\n"
	"is not found.\n";

struct run_opts {
	const char *policy_path;
	bool have_mode;
	enum policy_mode mode;
	const char *events;
	const char *signing_key;
	const char *session;
	const char *workspace;
	unsigned int workers;      /* 0: one per online CPU */
	const char *parent;        /* --parent, or NULL */
	bool quiet;                /* --quiet: no summary of blocks */
	char **publish;            /* --publish arguments */
	size_t npublish;
	char **cmd;
};

static void parse_opts(int argc, char **argv, struct run_opts *o)
{
	enum { OPT_POLICY = 256, OPT_MODE, OPT_ENFORCE, OPT_EVENTS, OPT_KEY,
	       OPT_SESSION, OPT_WORKSPACE, OPT_WORKERS, OPT_PARENT, OPT_QUIET,
	       OPT_WITNESS, OPT_PUBLISH, OPT_FEED_QUEUE };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "enforce", no_argument, NULL, OPT_ENFORCE },
		{ "events", required_argument, NULL, OPT_EVENTS },
		{ "signing-key", required_argument, NULL, OPT_KEY },
		{ "session", required_argument, NULL, OPT_SESSION },
		{ "workspace", required_argument, NULL, OPT_WORKSPACE },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "parent", required_argument, NULL, OPT_PARENT },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "witness", required_argument, NULL, OPT_WITNESS },
		{ "feed-queue", required_argument, NULL, OPT_FEED_QUEUE },
		{ "publish", required_argument, NULL, OPT_PUBLISH },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY:
			o->policy_path = optarg;
			break;
		case OPT_MODE:
			if (!policy_mode_from_string(optarg, &o->mode))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "run: --mode must be off, shadow or enforce, not '%s'",
					 optarg);
			if (o->have_mode && o->mode != POLICY_MODE_ENFORCE)
				goto conflict;
			o->have_mode = true;
			break;
		case OPT_ENFORCE:
			if (o->have_mode && o->mode != POLICY_MODE_ENFORCE)
				goto conflict;
			o->have_mode = true;
			o->mode = POLICY_MODE_ENFORCE;
			break;
		case OPT_EVENTS:
			(void)session_events_option("run", optarg, &o->events);
			break;
		case OPT_FEED_QUEUE:
			session_feed_queue_option("run", optarg);
			break;
		case OPT_KEY:
			o->signing_key = optarg;
			break;
		case OPT_WITNESS:
			session_set_witness(optarg);
			break;
		case OPT_SESSION:
			if (!policy_session_id_valid(optarg))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "run: --session must be 1-128 characters of "
					 "A-Z a-z 0-9 . _ : - starting with a letter or digit");
			o->session = optarg;
			break;
		case OPT_WORKSPACE:
			o->workspace = optarg;
			break;
		case OPT_WORKERS:
			o->workers = worker_parse_count("run", optarg);
			break;
		case OPT_PARENT:
			if (!policy_session_id_valid(optarg))
				util_die(EXIT_AIRLOCK_FAILURE,
					 "run: --parent must be 1-128 characters of "
					 "A-Z a-z 0-9 . _ : - starting with a letter or digit");
			o->parent = optarg;
			break;
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_PUBLISH:
			o->publish = util_xrealloc(o->publish,
						   (o->npublish + 1) * sizeof(char *));
			o->publish[o->npublish++] = optarg;
			break;
		case 'h':
			fputs(cmd_run_help, stdout);
			exit(0);
		case ':':
			util_die(EXIT_AIRLOCK_FAILURE, "run: option '%s' needs a value",
				 argv[optind - 1]);
		default:
			util_die(EXIT_AIRLOCK_FAILURE,
				 "run: unknown option '%s' (see 'airlock run --help')",
				 argv[optind - 1]);
		}
	}
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0 &&
	    argv[optind][0] == '-')
		util_die(EXIT_AIRLOCK_FAILURE, "run: unknown option '%s'", argv[optind]);
	if (optind >= argc)
		util_die(EXIT_AIRLOCK_FAILURE,
			 "run: no command given: use 'airlock run [OPTIONS] -- CMD [ARG...]'");
	session_feed_check("run", o->events);
	o->cmd = argv + optind;
	return;
conflict:
	util_die(EXIT_AIRLOCK_FAILURE, "run: --mode and --enforce disagree; give one");
}

static struct policy *load_policy(const struct run_opts *o)
{
	const enum policy_mode *override = o->have_mode ? &o->mode : NULL;
	struct policy_errors errs = { 0 };
	struct policy *p;

	if (!o->policy_path)
		return policy_default(override);
	p = policy_load(o->policy_path, override, &errs);
	if (p)
		return p;
	session_die_invalid_policy(o->policy_path, &errs);
}

static void report_exec_failure(const char *cmd, int err)
{
	if (util_exec_status(err) == EXIT_NOT_FOUND)
		util_warn("run: %s: command not found", cmd);
	else
		util_warn("run: %s: cannot execute: %s", cmd, strerror(err));
}

/* Forks and execs @cmd; returns its wait status encoded as airlock run's exit
 * status (or 126/127 on exec failure, reported on stderr). */
static int spawn_and_wait(char **cmd, const char *workspace)
{
	sigset_t mask, old;
	int errpipe[2] = { -1, -1 }, sfd = -1, status = 0, err = 0;
	pid_t pid;
	ssize_t r;

	util_session_sigset(&mask);
	if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "sigprocmask");
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "signalfd");
	if (pipe2(errpipe, O_CLOEXEC) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "pipe");
	pid = fork();
	if (pid < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "fork");
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(errpipe[0]);
		if (chdir(workspace) < 0) {
			fprintf(stderr, "airlock: --workspace %s: %s\n", workspace,
				strerror(errno));
			_exit(EXIT_AIRLOCK_FAILURE);
		}
		util_stdio_unfill();
		execvp(cmd[0], cmd);
		err = errno;
		(void)util_write_all(errpipe[1], &err, sizeof(err));
		_exit(util_exec_status(err));
	}
	close(errpipe[1]);
	do
		r = read(errpipe[0], &err, sizeof(err));
	while (r < 0 && errno == EINTR);
	close(errpipe[0]);
	if (r != (ssize_t)sizeof(err))
		err = 0; /* EOF: the exec succeeded */

	for (;;) {
		struct signalfd_siginfo si;
		pid_t ret = waitpid(pid, &status, WNOHANG);

		if (ret == pid)
			break;
		if (ret < 0 && errno != EINTR)
			util_die_errno(EXIT_AIRLOCK_FAILURE, "waitpid");
		r = read(sfd, &si, sizeof(si));
		if (r != (ssize_t)sizeof(si))
			continue;
		if (si.ssi_signo == SIGCHLD)
			continue;
		/* The terminal signals the whole foreground group, CMD
		 * included; only signals aimed at airlock are passed on. */
		if (si.ssi_code != SI_KERNEL)
			kill(pid, (int)si.ssi_signo);
	}
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (err != 0) {
		report_exec_failure(cmd[0], err);
		return util_exec_status(err);
	}
	return util_wait_status(status);
}

static int run_off_with_events(const struct run_opts *o, const struct policy *p,
			       const char *id, const char *workspace)
{
	struct session s;
	int status;

	session_open(&s, o->events, o->signing_key, p, id, o->cmd[0]);
	session_begin(&s, "session.start", RECEIPT_INFO, "session",
		      "session started in mode off");
	status = spawn_and_wait(o->cmd, workspace);
	session_end(&s, status);
	return status;
}

/* --- the processes of a session ---------------------------------------------
 *
 * Started in this order (docs/ARCHITECTURE.md says why):
 *
 *   1. the key holder (session_open, before any secret is read): it loads
 *      the signing key and writes every receipt; we never read the key;
 *   2. the secrets are read, the environment built, session.start and
 *      env.drop asked for;
 *   3. the sandbox's init, cloned from us (we hold no key, and init wipes
 *      the secret values from its copy);
 *   4. the proxy workers, forked from us once the sandbox has handed over
 *      its proxy socket; each serves it in a loop of its own.
 *
 * Steps 2 to 4 and the loop are supervisor.c's (the same for `airlock
 * proxy`); this file adds init, the DNS stub and the publish relay as
 * rows of its table. The loop forwards signals to init and reaps whatever
 * ends. Init's exit ends the session: the workers are told to stop, and
 * once they have exited the key holder writes session.end. A worker that
 * dies before (killed, or unable to go on) has taken the agent's only
 * network path with it: the session is ended (125) and the worker's end
 * recorded. A key holder that dies means nothing more can be recorded:
 * the sandbox is killed and airlock exits 125 at once. */

/* The sandbox's part of the supervisor (supervisor.c): its init is a
 * row of the table, awaited; its end ends the session. */
struct run_sup {
	struct supervisor sv;
	struct sandbox *sb;
	bool init_done;
	int init_status;
	uint64_t term_at;       /* ms: then init gets SIGTERM (exhausted) */
	uint64_t term_kill_at;  /* ms: then init is killed (exhausted) */
	bool term_sent;
};

static const struct supervisor_words run_words = {
	.ends = ", so the session was ended",
	.worker_lost = "the agent lost its network path, so the session was ended",
	.start_error = "sandbox.error",
};

/* When the spend cap ends the session (on_exhausted "stop"): the agent
 * gets SIGTERM this long after the refusal (so that the refused call's
 * 429 reaches it, rather than racing the signal), and SIGKILL the grace
 * after that. */
#define SPEND_STOP_NOTICE_MS 1000
#define SPEND_STOP_GRACE_MS 10000

/* A worker refused a call for the cap under on_exhausted "stop": the
 * session ends (SIGTERM, SIGKILL after the grace, exit 125). */
static void spend_exhausted(struct supervisor *sv)
{
	struct run_sup *x = sv->arg;

	if (!sv->failure[0])
		snprintf(sv->failure, sizeof(sv->failure),
			 "the spend cap is exhausted and spend.on_exhausted is stop: "
			 "the session was ended");
	session_record(sv->s, "budget.exhausted", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		       "spend.on_exhausted", json_pack("{s:s}", "on_exhausted", "stop"),
		       "a metered call was refused for the spend cap: the agent is "
		       "sent SIGTERM in 1 s, and SIGKILL 10 s after that");
	x->term_at = util_now_ms() + SPEND_STOP_NOTICE_MS;
	x->term_kill_at = x->term_at + SPEND_STOP_GRACE_MS;
}

/* The exhausted session's SIGTERM, then SIGKILL, to init. */
static int spend_tick(struct supervisor *sv, uint64_t now)
{
	struct run_sup *x = sv->arg;
	uint64_t next;

	if (!sv->exhausted || x->init_done)
		return -1;
	if (!x->term_sent && now >= x->term_at) {
		kill(x->sb->init_pid, SIGTERM);
		x->term_sent = true;
	}
	if (now >= x->term_kill_at) {
		kill(x->sb->init_pid, SIGKILL);
		x->term_kill_at = now + SPEND_STOP_GRACE_MS;
	}
	next = x->term_sent ? x->term_kill_at : x->term_at;
	return next > now ? (int)(next - now) : 0;
}

static void forward_signal(struct supervisor *sv, const struct signalfd_siginfo *si)
{
	struct run_sup *x = sv->arg;

	/* The terminal signals the whole foreground group; only signals
	 * aimed at airlock are passed on. */
	if (si->ssi_code != SI_KERNEL && !x->init_done)
		kill(x->sb->init_pid, (int)si->ssi_signo);
}

static const struct supervisor_ops run_ops = {
	.signal = forward_signal,
	.exhausted = spend_exhausted,
	.tick = spend_tick,
};

/* Init's exit ends the session: the workers and the DNS stub are told to
 * stop. */
static void init_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	struct run_sup *x = sv->arg;

	(void)pr;
	(void)pid;
	x->init_done = true;
	x->init_status = wstatus;
	supervisor_stop(sv, 0);
	supervisor_stop_procs(sv);
}

/* The publish relay ended (recorded there). */
static void publish_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	(void)sv;
	(void)pr;
	(void)publish_reaped(pid, wstatus);
}

/* supervisor_open()'s forks: the relay of published ports (publish.c),
 * before any secret is read. */
static int run_forks(void *arg, const char **rule, char *err, size_t errlen)
{
	struct supervisor *sv = arg;

	*rule = "publish";
	if (publish_start(sv->s, sv->s->p, err, errlen) < 0)
		return -1;
	if (publish_pid() > 0)
		(void)supervisor_add(sv, &(struct sv_proc){
			.name = "publish relay", .pid = publish_pid(), .ctl = -1,
			.on_exit = publish_exit });
	return 0;
}

/* --- shadow and enforce ---------------------------------------------------- */

/* The absolute, symlink-free form of @path, relative to the caller's
 * directory (see runfiles_resolve(): a path that does not exist yet is
 * resolved as far as it exists). */
static char *resolve(const char *path, bool must_exist)
{
	char *r = must_exist ? realpath(path, NULL) : runfiles_resolve(path);

	if (!r)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "%s", path);
	return r;
}

/* A path the view shows (writable, or read-only with @writable false) may
 * not be the root (the whole host would be writable, over the private
 * /tmp, /proc and /dev, or the view replaced by the host's) nor lie in the
 * kernel's own trees. @path is absolute and resolved. Returns false with
 * the reason in @err. */
static bool view_path_ok(const char *what, const char *path, bool writable,
			 char *err, size_t errlen)
{
	static const char *const kernel[] = { "/proc", "/dev", "/sys" };
	size_t i;

	if (strcmp(path, "/") == 0) {
		if (writable)
			snprintf(err, errlen,
				 "%s is /: that would make the whole host writable; run from, "
				 "or pass --workspace, a project directory", what);
		else
			snprintf(err, errlen, "%s is /: list the paths below it you mean", what);
		return false;
	}
	for (i = 0; i < ARRAY_SIZE(kernel); i++) {
		if (runfiles_under(path, kernel[i])) {
			snprintf(err, errlen,
				 "%s %s is inside %s, which the sandbox provides itself",
				 what, path, kernel[i]);
			return false;
		}
	}
	return true;
}

static void add_path(char ***v, size_t *n, char *path)
{
	*v = util_xrealloc(*v, (*n + 1) * sizeof(char *));
	(*v)[(*n)++] = path;
}

static void free_paths(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static bool is_path_dest(const char *events)
{
	return events && strcmp(events, "-") != 0 && strncmp(events, "fd:", 3) != 0;
}

/* --- the files that decide and record the session --------------------------
 *
 * None may lie where the agent can write (runfiles.c): the receipts'
 * destination and the signing key are checked before either is opened (a
 * refusal is then one line, and not written into a file the agent could
 * have planted); the policy and the files it names afterwards, refused
 * with a session.refused receipt. */

/* The descriptor --events names ("-" or "fd:N"), or -1 for a path. */
static int events_fd(const char *events)
{
	unsigned long n;

	if (strcmp(events, "-") == 0)
		return 1;
	if (strncmp(events, "fd:", 3) == 0 && util_parse_uint(events + 3, 0, INT_MAX, &n))
		return (int)n;
	return -1;
}

/* The workspace (first) and the fs.rw paths that are acceptable ones: those
 * that are not are refused before the agent starts anyway. */
static const char **writable_paths(const struct sandbox_config *cfg, size_t *n)
{
	const char **w = util_xcalloc(cfg->nrw + 1, sizeof(*w));
	char err[512];
	size_t i;

	*n = 0;
	if (view_path_ok("the workspace", cfg->workspace, true, err, sizeof(err)))
		w[(*n)++] = cfg->workspace;
	for (i = 0; i < cfg->nrw; i++)
		if (view_path_ok("fs.rw path", cfg->rw[i], true, err, sizeof(err)))
			w[(*n)++] = cfg->rw[i];
	return w;
}

static void check_record_files(const struct run_opts *o, const char *events,
			       bool events_default, const struct sandbox_config *cfg)
{
	struct runfiles_entry e[2];
	char err[PATH_MAX + 512];
	size_t n, i, ne = 0;
	const char **w = writable_paths(cfg, &n);

	e[ne].what = events_default ? "the default events file" : "--events";
	e[ne].fd = events_fd(events);
	e[ne].path = e[ne].fd < 0 ? events : NULL;
	ne++;
	if (o->signing_key) {
		e[ne].what = "--signing-key";
		e[ne].path = o->signing_key;
		e[ne].fd = -1;
		ne++;
	}
	for (i = 0; i < ne; i++)
		if (!runfiles_check(&e[i], w, n, err, sizeof(err)))
			util_die(EXIT_AIRLOCK_FAILURE, "%s", err);
	free(w);
}

/* Refuses the session when @path (NULL: not given), named @what, lies
 * where the agent can write. */
static void check_policy_file(struct session *s, const char *what, const char *path,
			      const char **w, size_t n)
{
	struct runfiles_entry e = { what, path, -1 };
	char err[PATH_MAX + 512];

	if (path && !runfiles_check(&e, w, n, err, sizeof(err)))
		session_refuse(s, "files", err);
}

static void check_policy_files(struct session *s, const struct run_opts *o,
			       const struct policy *p, const struct sandbox_config *cfg)
{
	const struct policy_github_app *app = p->git_github_app;
	char what[160];
	size_t n, i;
	const char **w = writable_paths(cfg, &n);

	check_policy_file(s, "--policy", o->policy_path, w, n);
	for (i = 0; i < p->nsecrets; i++) {
		snprintf(what, sizeof(what), "secrets.%s.from_file", p->secrets[i].name);
		check_policy_file(s, what, p->secrets[i].from_file, w, n);
	}
	check_policy_file(s, "egress.upstream_ca", p->upstream_ca, w, n);
	if (app) {
		check_policy_file(s, "git.github_app.private_key_file",
				  app->private_key_file, w, n);
		check_policy_file(s, "git.github_app.ca", app->ca, w, n);
	}
	if (p->git_gitlab_mint) {
		check_policy_file(s, "git.gitlab_mint.token_file", p->git_gitlab_mint->token_file, w, n);
		check_policy_file(s, "git.gitlab_mint.ca", p->git_gitlab_mint->ca, w, n);
	}
	if (p->spend_ledger_kind == POLICY_LEDGER_SQLITE)
		check_policy_file(s, "spend.ledger", p->spend_ledger_target, w, n);
	free(w);
}

/* The view's paths from the policy, checked (a refusal is a session.refused
 * receipt), and airlock's own files, which the agent never sees. */
static void plan_view(struct session *s, const struct run_opts *o, const struct policy *p,
		      const char *events, struct sandbox_config *cfg)
{
	char err[512];
	size_t i;

	if (!view_path_ok("the workspace", cfg->workspace, true, err, sizeof(err)))
		session_refuse(s, "workspace", err);
	for (i = 0; i < cfg->nrw; i++)
		if (!view_path_ok("fs.rw path", cfg->rw[i], true, err, sizeof(err)))
			session_refuse(s, "fs.rw", err);
	for (i = 0; i < p->nfs_ro; i++) {
		add_path(&cfg->ro, &cfg->nro, resolve(p->fs_ro[i], true));
		if (!view_path_ok("fs.ro path", cfg->ro[cfg->nro - 1], false, err, sizeof(err)))
			session_refuse(s, "fs.ro", err);
	}
	for (i = 0; i < p->nfs_hide; i++) {
		add_path(&cfg->hide, &cfg->nhide, resolve(p->fs_hide[i], false));
		if (strcmp(cfg->hide[cfg->nhide - 1], "/") == 0)
			session_refuse(s, "fs.hide", "fs.hide path is /: list the paths below "
				       "it you mean");
	}
	for (i = 0; i < p->nfs_protect; i++)
		add_path(&cfg->protect, &cfg->nprotect, util_xstrdup(p->fs_protect[i]));
	check_policy_files(s, o, p, cfg);

	if (o->policy_path)
		add_path(&cfg->mask, &cfg->nmask, resolve(o->policy_path, false));
	if (o->signing_key)
		add_path(&cfg->mask, &cfg->nmask, resolve(o->signing_key, false));
	if (is_path_dest(events))
		add_path(&cfg->mask, &cfg->nmask, resolve(events, false));
	for (i = 0; i < p->nsecrets; i++) {
		const struct policy_oauth *a = p->secrets[i].oauth;

		if (p->secrets[i].from_file)
			add_path(&cfg->mask, &cfg->nmask, resolve(p->secrets[i].from_file, false));
		if (a && a->client_secret_from_file)
			add_path(&cfg->mask, &cfg->nmask, resolve(a->client_secret_from_file, false));
		if (a && a->refresh_token_from_file)
			add_path(&cfg->mask, &cfg->nmask, resolve(a->refresh_token_from_file, false));
	}
	if (p->git_github_app && p->git_github_app->private_key_file)
		add_path(&cfg->mask, &cfg->nmask,
			 resolve(p->git_github_app->private_key_file, false));
	if (p->git_gitlab_mint && p->git_gitlab_mint->token_file)
		add_path(&cfg->mask, &cfg->nmask, resolve(p->git_gitlab_mint->token_file, false));
	if (p->spend_ledger_kind == POLICY_LEDGER_SQLITE && p->spend_ledger_target)
		add_path(&cfg->mask, &cfg->nmask, resolve(p->spend_ledger_target, false));
}

/* Without --events, the caller learns where the receipts went, and the
 * fingerprint of the key that signed them (to pin a key made for the
 * session), from one line on stderr at the end. With --events the caller
 * chose the place and reads the key from session.start; nothing is added
 * to what the command printed. */
static void report_receipts(const struct session *s, const struct run_opts *o,
			    const char *events, bool events_default)
{
	char fp[RUNFILES_FINGERPRINT_LEN];

	if (!events_default || !runfiles_fingerprint(s->k.pubkey, fp))
		return;
	util_warn("receipts: %s (key %s%s)", events, fp,
		  o->signing_key ? "" : ", made for this session");
}

/* The CA bundle the sandbox trusts: the system's, egress.upstream_ca's
 * and the session CA the key holder made. Refuses the session when it
 * cannot be built. */
static char *make_ca_bundle(struct session *s, const struct policy *p, size_t *len)
{
	char err[512], *pem = NULL, *bundle;

	*len = 0;
	if (!s->open)
		return NULL;
	if (keeper_ca_cert(&s->k, &pem, err, sizeof(err)) < 0)
		session_refuse(s, "tls.ca", err);
	if (!pem)
		return NULL;
	bundle = tls_bundle_make(pem, strlen(pem), TLS_SYSTEM_BUNDLE, p->upstream_ca, len,
				 err, sizeof(err));
	free(pem);
	if (!bundle)
		session_refuse(s, "egress.upstream_ca", err);
	return bundle;
}

static int run_sandboxed(const struct run_opts *o, const struct policy *p,
			 const char *id, const char *workspace, const char *events,
			 bool events_default)
{
	bool enforce = p->mode == POLICY_MODE_ENFORCE;
	struct sandbox_config cfg;
	struct stdio_relay relay;
	struct env_result env;
	struct dnsstub_table *table = NULL;
	struct dnsd stub = { .pid = -1, .ctl = -1 };
	struct run_sup x;
	struct supervisor *sv = &x.sv;
	struct sandbox sb;
	struct session s;
	struct session_ca ca = { NULL, NULL, 0 };
	char err[512], *ca_bundle;
	int tl[2], status, exec_err;
	sigset_t mask;
	size_t ntl = 0, i;

	memset(&cfg, 0, sizeof(cfg));
	memset(&x, 0, sizeof(x));
	x.sb = &sb;
	/* The supervisor holds secret values: no core dumps, no ptrace
	 * from the caller's other processes. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "PR_SET_DUMPABLE");
	cfg.workspace = workspace;
	for (i = 0; i < p->nfs_rw; i++)
		add_path(&cfg.rw, &cfg.nrw, resolve(p->fs_rw[i], true));
	check_record_files(o, events, events_default, &cfg);
	if (events_default && runfiles_make_parents(events, err, sizeof(err)) < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "no --events given, and the default events "
			 "file %s cannot be made: %s", events, err);
	/* Before any secret or key is in memory: the relays are copies. */
	if (stdio_relay_start(&relay, err, sizeof(err)) < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "%s", err);
	for (i = 0; i < 3; i++)
		cfg.stdio[i] = relay.agent[i];

	supervisor_init(sv, &s, &run_ops, &x, &run_words);
	session_open_ca(&s, events, o->signing_key, p, id, o->cmd[0], &ca);
	/* Transparent mode is needed for enforce only when asked for. */
	s.caps.need_transparent = enforce && p->transparent;
	if (!doctor_enforce_ready(&s.caps)) {
		json_t *caps = doctor_caps_json(&s.caps), *name;
		char missing[256] = "";
		size_t k;

		json_array_foreach(json_object_get(caps, "missing"), k, name) {
			if (k > 0)
				strncat(missing, ", ", sizeof(missing) - strlen(missing) - 1);
			strncat(missing, json_string_value(name),
				sizeof(missing) - strlen(missing) - 1);
		}
		json_decref(caps);
		snprintf(err, sizeof(err),
			 "mode %s needs %s, which this host does not provide "
			 "(see 'airlock doctor')",
			 policy_mode_to_string(p->mode), missing);
		session_refuse(&s, "capabilities", err);
	}
	plan_view(&s, o, p, events, &cfg);
	/* The ledger, the relay of published ports, then the secrets. */
	supervisor_open(sv, &(struct supervisor_plan){
		.metered = spendd_wanted(p) || o->parent, .parent = o->parent,
		.forks = run_forks, .forks_arg = sv });
	cfg.pass_ns = publish_active();
	cfg.home = getenv("HOME");
	ca_bundle = make_ca_bundle(&s, p, &cfg.ca_bundle_len);
	cfg.ca_bundle = ca_bundle;

	env_build(p, &sv->broker, environ, SANDBOX_PROXY_PORT, !enforce, &env);
	gitcred_env(p, &sv->git, &env);
	oauth_env(&sv->oauth, &env);
	cfg.envp = env.envp;
	cfg.argv = o->cmd;
	cfg.proxy_port = SANDBOX_PROXY_PORT;
	cfg.transparent = p->transparent && s.caps.transparent;
	if (p->transparent && !s.caps.transparent)
		util_warn("transparent mode cannot run on this host (see 'airlock "
			  "doctor'): this shadow session runs without it");
	cfg.scrub = supervisor_forget;
	cfg.scrub_arg = sv;

	if (supervisor_begin(sv, enforce ? "session started in mode enforce"
					 : "session started in mode shadow",
			     err, sizeof(err)) < 0)
		supervisor_abort(sv, "sandbox.error", "spend.ledger", err, "spend ledger");
	for (i = 0; i < env.ndropped; i++)
		session_record(&s, "env.drop", enforce ? RECEIPT_BLOCK : RECEIPT_WOULD_BLOCK,
		       RECEIPT_POINT_SUPERVISOR, "env.pass",
		       json_pack("{s:s}", "name", env.dropped[i]),
		       enforce ? "not in env.pass: not passed to the agent"
			       : "not in env.pass: enforce would drop it");

	/* Blocked before the clone, so no SIGCHLD or forwarded signal can be
	 * lost before the loop reads them from its signalfd. */
	util_session_sigset(&mask);
	supervisor_signals(sv, &mask);
	if (sandbox_start(&cfg, &sb, err, sizeof(err)) < 0)
		supervisor_abort(sv, "sandbox.error", "sandbox", err, "sandbox");
	(void)supervisor_add(sv, &(struct sv_proc){
		.name = "sandbox init", .pid = sb.init_pid, .ctl = -1, .awaited = true,
		.kill_on_fail = true, .on_exit = init_exit });
	stdio_relay_detach(&relay);
	if (publish_attach(&sb, &sv->broker, err, sizeof(err)) < 0)
		supervisor_abort(sv, "sandbox.error", "publish", err, NULL);
	if (cfg.transparent) {
		/* After init exists, so that it never holds the table. */
		int r = dnsstub_table_new(DNSSTUB_TABLE_MAX, &table);

		if (r < 0) {
			snprintf(err, sizeof(err), "transparent mode: the table of "
				 "synthetic addresses: %s", strerror(-r));
			supervisor_abort(sv, "sandbox.error", "transparent", err, NULL);
		}
		/* Its copy of our memory forgets the secret values and the
		 * token first, as init's does; then our copy of its socket
		 * goes. */
		if (dnsd_start(&stub, p, table, sb.stub_fd, supervisor_forget, sv, err,
			       sizeof(err)) < 0)
			supervisor_abort(sv, "sandbox.error", "transparent", err, NULL);
		supervisor_add_dnsd(sv, &stub);
		close(sb.stub_fd);
		sb.stub_fd = -1;
		for (i = 0; i < 2; i++)
			if (sb.tlisten_fd[i] >= 0)
				tl[ntl++] = sb.tlisten_fd[i];
	}
	/* The sandbox is the proxy socket's only client: no share of its
	 * own, the connection limit is all of its. */
	if (supervisor_start_workers(sv, o->workers ? o->workers : worker_default_count(),
				     &(struct supervisor_listen){
					     .fd = sb.proxy_fd, .tlisten = tl, .ntlisten = ntl,
					     .names = table,
					     .client_limit = PROXY_CLIENT_LIMIT_NONE,
					     .intercept = s.open },
				     err, sizeof(err)) < 0)
		supervisor_abort(sv, "sandbox.error", "proxy", err, "egress proxy");
	/* The DNS stub is the table's only writer now; the workers read it. */
	dnsstub_table_free(table);
	table = NULL;
	/* The workers serve it: we keep no copy. */
	close(sb.proxy_fd);
	sb.proxy_fd = -1;
	for (i = 0; i < 2; i++) {
		if (sb.tlisten_fd[i] >= 0)
			close(sb.tlisten_fd[i]);
		sb.tlisten_fd[i] = -1;
	}
	/* Every process of the session is started: from here the supervisor
	 * waits, signals, talks on its channels and refreshes the git token,
	 * under a filter of its own (confine.c). */
	if (supervisor_confine(sv, err, sizeof(err)) < 0)
		supervisor_abort(sv, "sandbox.error", "supervisor", err, "supervisor");
	supervisor_run(sv);
	status = x.init_status;
	publish_stop();
	supervisor_finish(sv);
	if (sv->failure[0]) {
		sandbox_release(&sb);
		session_end(&s, EXIT_AIRLOCK_FAILURE);
		util_die(EXIT_AIRLOCK_FAILURE, "%s", sv->failure);
	}
	status = sandbox_exit_status(&sb, status, &exec_err);
	/* Everything the agent wrote reaches the caller first. */
	stdio_relay_finish(&relay);
	if (exec_err)
		report_exec_failure(o->cmd[0], exec_err);
	/* Not found, by exec or by what it ran ("#!/usr/bin/env node"
	 * exits 127 itself): say so when a hidden path is why. */
	if (status == EXIT_NOT_FOUND)
		(void)run_hint_not_found(&cfg, o->cmd[0], stderr);
	sandbox_release(&sb);
	session_end(&s, status);
	/* Every receipt is written: what the session blocked, read back. */
	if (!o->quiet && is_path_dest(events))
		(void)run_summary(events, s.id, stderr);
	report_receipts(&s, o, events, events_default);

	env_result_free(&env);
	supervisor_free(sv);
	free(ca_bundle);
	free_paths(cfg.rw, cfg.nrw);
	free_paths(cfg.ro, cfg.nro);
	free_paths(cfg.hide, cfg.nhide);
	free_paths(cfg.protect, cfg.nprotect);
	free_paths(cfg.mask, cfg.nmask);
	return status;
}

/* Mode off without --events: the session is recorded in the default
 * events file (session.start, session.exec, session.end) and CMD is then
 * exec'd in place. Off changes nothing, so a default file that cannot be
 * written only means no record: nothing is printed. */
static void record_off(const struct policy *p, const char *id, const char *argv0,
		       const char *events)
{
	struct session s;
	char err[512], dest[32];
	int fd;

	if (!events || runfiles_make_parents(events, err, sizeof(err)) < 0)
		return;
	fd = open(events, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	snprintf(dest, sizeof(dest), "fd:%d", fd);
	session_open(&s, dest, NULL, p, id, argv0);
	session_begin(&s, "session.start", RECEIPT_INFO, "session",
		      "session started in mode off");
	session_record(&s, "session.exec", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		       "mode", json_pack("{s:s}", "argv0", argv0),
		       "mode off: CMD is executed in place of airlock, which does not "
		       "see its exit status (session.end's exit 0 only closes the stream)");
	session_end(&s, 0);
	close(fd);
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct policy *p;
	char *session, *workspace, *events_default = NULL;
	int status;

	parse_opts(argc, argv, &o);
	/* The capability probe runs in a child while the policy loads. */
	if (!o.have_mode || o.mode != POLICY_MODE_OFF || o.events)
		doctor_probe_begin(true);
	p = load_policy(&o);
	publish_merge_args(&p, o.publish, o.npublish);
	/* Transparent mode's probe (nftables) only when the policy wants it. */
	if (p->transparent && p->mode != POLICY_MODE_OFF)
		doctor_transparent_begin();
	/* Every other path (policy, key, events, secret files) is relative
	 * to the caller's directory: only CMD runs in the workspace. */
	workspace = realpath(o.workspace ? o.workspace : ".", NULL);
	if (!workspace)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "--workspace %s",
			       o.workspace ? o.workspace : ".");
	session = session_choose_id(o.session, p, "sess");
	if (!o.events) {
		char err[512];

		events_default = runfiles_default_events(session, err, sizeof(err));
		if (!events_default && p->mode != POLICY_MODE_OFF)
			util_die(EXIT_AIRLOCK_FAILURE, "%s", err);
	}

	if (p->mode != POLICY_MODE_OFF) {
		status = run_sandboxed(&o, p, session, workspace,
				       o.events ? o.events : events_default, !o.events);
	} else if (!o.events) {
		/* Become CMD, changing nothing. */
		doctor_probe_cancel();
		record_off(p, session, o.cmd[0], events_default);
		if (chdir(workspace) < 0)
			util_die_errno(EXIT_AIRLOCK_FAILURE, "--workspace %s", workspace);
		policy_free(p);
		free(session);
		free(workspace);
		free(events_default);
		util_stdio_unfill();
		execvp(o.cmd[0], o.cmd);
		status = errno;
		report_exec_failure(o.cmd[0], status);
		return util_exec_status(status);
	} else {
		status = run_off_with_events(&o, p, session, workspace);
	}
	policy_free(p);
	free(session);
	free(o.publish);
	free(workspace);
	free(events_default);
	return status;
}
