/* SPDX-License-Identifier: Apache-2.0
 * cmd_run.c - `airlock run`: option parsing, policy loading and the
 * session lifecycle around the agent command.
 *
 * DOC: Theory of Operation
 *
 * `run` loads the effective policy (the file, or the embedded default of
 * SPEC §3.7, with --mode/--enforce applied), picks the session id (--session,
 * else the policy's session.id, else a random one), and then:
 *
 * - mode off without --events: execs CMD in place. Same pid, environment,
 *   network and filesystem: there is nothing airlock could change, so it
 *   changes nothing (SPEC §3.1).
 * - mode off with --events: forks CMD, writes session.start before it runs
 *   and session.end with its exit status after it ends. Signals sent to
 *   airlock by another process (kill) are forwarded to CMD; signals the
 *   terminal sends to the whole foreground process group reach CMD directly
 *   and are not forwarded a second time.
 * - shadow and enforce: reads the secrets, builds the agent's environment,
 *   writes session.start and one env.drop per unclassified variable, starts
 *   the sandbox (sandbox.c) and serves its proxy socket until the sandbox's
 *   init exits. Where the host lacks a capability (doctor.c), it writes a
 *   session.refused block receipt instead of session.start and exits 125.
 *   The egress proxy (proxy.c) serves the sandbox's proxy socket from this
 *   process, in the loop that also waits for the sandbox.
 *
 * Exit status (SPEC §2): CMD's own, 128+N if CMD was killed by signal N,
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
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "commands.h"
#include "doctor.h"
#include "env.h"
#include "policy.h"
#include "proxy.h"
#include "receipt.h"
#include "sandbox.h"
#include "session.h"
#include "util.h"

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
	"                      'fd:N', or a path (appended to, created 0600)\n"
	"  --signing-key FILE  sign receipts with this Ed25519 key (PKCS#8 PEM,\n"
	"                      from 'airlock keygen'); default: a fresh key per\n"
	"                      session, whose public key is in session.start\n"
	"  --session ID        the session id (default: the policy's session.id,\n"
	"                      else a random one)\n"
	"  --workspace DIR     the agent's working directory (default: the\n"
	"                      current directory)\n"
	"  -h, --help          show this help\n"
	"\n"
	"Modes: 'off' runs CMD unchanged. 'shadow' and 'enforce' run it in the\n"
	"sandbox (new namespaces, read-only host, network only through the proxy\n"
	"at 127.0.0.1:3128); enforce drops every variable not in env.pass and\n"
	"refuses to start (125) where 'airlock doctor' reports a missing\n"
	"capability; shadow passes them and records each as env.drop\n"
	"would_block. The agent's only network path is the egress proxy, which\n"
	"applies the policy's egress rules ('airlock proxy --help').\n"
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
	char **cmd;
};

static void parse_opts(int argc, char **argv, struct run_opts *o)
{
	enum { OPT_POLICY = 256, OPT_MODE, OPT_ENFORCE, OPT_EVENTS, OPT_KEY,
	       OPT_SESSION, OPT_WORKSPACE };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "enforce", no_argument, NULL, OPT_ENFORCE },
		{ "events", required_argument, NULL, OPT_EVENTS },
		{ "signing-key", required_argument, NULL, OPT_KEY },
		{ "session", required_argument, NULL, OPT_SESSION },
		{ "workspace", required_argument, NULL, OPT_WORKSPACE },
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
			o->events = optarg;
			break;
		case OPT_KEY:
			o->signing_key = optarg;
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
		util_warn("%s: command not found", cmd);
	else
		util_warn("%s: cannot execute: %s", cmd, strerror(err));
}

/* Forks and execs @cmd; returns its wait status encoded as SPEC §2 exit
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

/* --- the proxy socket ------------------------------------------------------
 *
 * The egress proxy (proxy.c) serves the sandbox's proxy socket from here,
 * outside the sandbox, in the same loop that waits for the sandbox's init
 * and forwards signals to it. */

struct supervise_ctx {
	pid_t init_pid;
	int status;
	bool done;
};

static bool supervise_signal(void *arg, const struct signalfd_siginfo *si)
{
	struct supervise_ctx *x = arg;

	if (si->ssi_signo == SIGCHLD) {
		if (waitpid(x->init_pid, &x->status, WNOHANG) == x->init_pid) {
			x->done = true;
			return false; /* stop serving: the session is over */
		}
		return true;
	}
	/* The terminal signals the whole foreground group; only signals aimed
	 * at airlock are passed on. */
	if (si->ssi_code != SI_KERNEL)
		kill(x->init_pid, (int)si->ssi_signo);
	return true;
}

static void block_signals(void)
{
	sigset_t mask;

	util_session_sigset(&mask);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "sigprocmask");
}

/* Serves the proxy socket and forwards signals until init exits; returns
 * init's wait status. */
static int supervise(struct session *s, struct sandbox *sb)
{
	struct supervise_ctx x = { sb->init_pid, 0, false };
	struct proxy_opts po;
	struct proxy *px;
	char err[256];
	sigset_t mask;
	int sfd;

	util_session_sigset(&mask);
	/* Already blocked by run_sandboxed(), before the sandbox started. */
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "signalfd");
	/* splice() into a socket the peer has closed raises SIGPIPE (it has
	 * no MSG_NOSIGNAL): a peer must only ever close its own connection.
	 * The sandbox already runs, so the agent keeps the default. */
	signal(SIGPIPE, SIG_IGN);
	memset(&po, 0, sizeof(po));
	po.listen_fd = sb->proxy_fd;
	sb->proxy_fd = -1; /* the proxy owns it now */
	po.policy = s->p;
	po.record = session_record_borrowed;
	po.record_arg = s;
	po.signal_fd = sfd;
	po.on_signal = supervise_signal;
	po.signal_arg = &x;
	px = proxy_new(&po, err, sizeof(err));
	if (!px) {
		kill(sb->init_pid, SIGKILL);
		session_record(s, "sandbox.error", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
			       "proxy", json_object(), err);
		session_end(s, EXIT_AIRLOCK_FAILURE);
		util_die(EXIT_AIRLOCK_FAILURE, "egress proxy: %s", err);
	}
	if (proxy_run(px) < 0)
		util_warn("egress proxy: %s", strerror(errno));
	proxy_free(px);
	/* A loop that ended without init's exit (it cannot, barring an
	 * internal error): make sure the sandbox is gone. */
	if (!x.done) {
		kill(sb->init_pid, SIGKILL);
		while (waitpid(sb->init_pid, &x.status, 0) < 0 && errno == EINTR)
			;
	}
	close(sfd);
	return x.status;
}

/* --- shadow and enforce ---------------------------------------------------- */

/* The absolute, symlink-free form of @path, relative to the caller's
 * directory. A path that does not exist (yet) keeps its spelling, made
 * absolute: a mask for it is then simply not needed. */
static char *resolve(const char *path, bool must_exist)
{
	char *r = realpath(path, NULL), *cwd;

	if (r)
		return r;
	if (must_exist)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "%s", path);
	if (path[0] == '/')
		return util_xstrdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "getcwd");
	r = util_xasprintf("%s/%s", cwd, path);
	free(cwd);
	return r;
}

/* A writable path may not be the root (the whole host would be writable,
 * over the private /tmp, /proc and /dev) nor lie in the kernel's own
 * trees. @path is absolute and resolved. Returns false with the reason in
 * @err. */
static bool writable_ok(const char *what, const char *path, char *err, size_t errlen)
{
	static const char *const kernel[] = { "/proc", "/dev", "/sys" };
	size_t i;

	if (strcmp(path, "/") == 0) {
		snprintf(err, errlen,
			 "%s is /: that would make the whole host writable; run from, "
			 "or pass --workspace, a project directory", what);
		return false;
	}
	for (i = 0; i < ARRAY_SIZE(kernel); i++) {
		size_t n = strlen(kernel[i]);

		if (strncmp(path, kernel[i], n) == 0 && (path[n] == '\0' || path[n] == '/')) {
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

/* Runs in the sandbox's init, a copy of our memory: wipes the secret
 * values, and the environment strings they came from. */
static void scrub_secrets(void *arg)
{
	struct broker *b = arg;
	size_t i;
	char **e;

	for (i = 0; i < b->count; i++) {
		const char *name = b->secrets[i].def->from_env;
		size_t n = name ? strlen(name) : 0;

		for (e = environ; name && e && *e; e++)
			if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
				explicit_bzero(*e + n + 1, strlen(*e + n + 1));
	}
	broker_free(b);
}

static bool is_path_dest(const char *events)
{
	return events && strcmp(events, "-") != 0 && strncmp(events, "fd:", 3) != 0;
}

static int run_sandboxed(const struct run_opts *o, const struct policy *p,
			 const char *id, const char *workspace)
{
	bool enforce = p->mode == POLICY_MODE_ENFORCE;
	struct sandbox_config cfg;
	struct env_result env;
	struct broker broker;
	struct sandbox sb;
	struct session s;
	char err[512];
	int status, exec_err;
	size_t i;

	memset(&cfg, 0, sizeof(cfg));
	/* The supervisor holds secret values: no core dumps, no ptrace
	 * from the caller's other processes. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "PR_SET_DUMPABLE");
	session_open(&s, o->events, o->signing_key, p, id, o->cmd[0]);
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
	if (broker_load(&broker, p, err, sizeof(err)) < 0)
		session_refuse(&s, "secrets", err);

	cfg.workspace = workspace;
	if (!writable_ok("the workspace", workspace, err, sizeof(err)))
		session_refuse(&s, "workspace", err);
	for (i = 0; i < p->nfs_rw; i++) {
		add_path(&cfg.rw, &cfg.nrw, resolve(p->fs_rw[i], true));
		if (!writable_ok("fs.rw path", cfg.rw[cfg.nrw - 1], err, sizeof(err)))
			session_refuse(&s, "fs.rw", err);
	}
	for (i = 0; i < p->nfs_hide; i++)
		add_path(&cfg.hide, &cfg.nhide, resolve(p->fs_hide[i], false));
	/* airlock's own files never reach the agent (SPEC §3.6). */
	if (o->policy_path)
		add_path(&cfg.hide, &cfg.nhide, resolve(o->policy_path, false));
	if (o->signing_key)
		add_path(&cfg.hide, &cfg.nhide, resolve(o->signing_key, false));
	if (is_path_dest(o->events))
		add_path(&cfg.hide, &cfg.nhide, resolve(o->events, false));
	for (i = 0; i < p->nsecrets; i++)
		if (p->secrets[i].from_file)
			add_path(&cfg.hide, &cfg.nhide,
				 resolve(p->secrets[i].from_file, false));

	env_build(p, &broker, environ, SANDBOX_PROXY_PORT, !enforce, &env);
	cfg.envp = env.envp;
	cfg.argv = o->cmd;
	cfg.proxy_port = SANDBOX_PROXY_PORT;
	cfg.scrub = scrub_secrets;
	cfg.scrub_arg = &broker;

	session_begin(&s, "session.start", RECEIPT_INFO, "session",
		      enforce ? "session started in mode enforce"
			      : "session started in mode shadow");
	for (i = 0; i < env.ndropped; i++)
		session_record(&s, "env.drop", enforce ? RECEIPT_BLOCK : RECEIPT_WOULD_BLOCK,
		       RECEIPT_POINT_SUPERVISOR, "env.pass",
		       json_pack("{s:s}", "name", env.dropped[i]),
		       enforce ? "not in env.pass: not passed to the agent"
			       : "not in env.pass: enforce would drop it");

	/* Blocked before the clone, so no SIGCHLD or forwarded signal can be
	 * lost before supervise() reads them from its signalfd. */
	block_signals();
	if (sandbox_start(&cfg, &sb, err, sizeof(err)) < 0) {
		session_record(&s, "sandbox.error", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		       "sandbox", json_object(), err);
		session_end(&s, EXIT_AIRLOCK_FAILURE);
		util_die(EXIT_AIRLOCK_FAILURE, "sandbox: %s", err);
	}
	status = supervise(&s, &sb);
	status = sandbox_exit_status(&sb, status, &exec_err);
	if (exec_err)
		report_exec_failure(o->cmd[0], exec_err);
	sandbox_release(&sb);
	session_end(&s, status);

	env_result_free(&env);
	broker_free(&broker);
	free_paths(cfg.rw, cfg.nrw);
	free_paths(cfg.hide, cfg.nhide);
	return status;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct policy *p;
	char *session, *workspace;
	int status;

	parse_opts(argc, argv, &o);
	/* The capability probe runs in a child while the policy loads. */
	if (!o.have_mode || o.mode != POLICY_MODE_OFF || o.events)
		doctor_probe_begin();
	p = load_policy(&o);
	/* Every other path (policy, key, events, secret files) is relative
	 * to the caller's directory: only CMD runs in the workspace. */
	workspace = realpath(o.workspace ? o.workspace : ".", NULL);
	if (!workspace)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "--workspace %s",
			       o.workspace ? o.workspace : ".");
	session = session_choose_id(o.session, p, "sess");

	if (p->mode != POLICY_MODE_OFF) {
		status = run_sandboxed(&o, p, session, workspace);
	} else if (!o.events) {
		/* Nothing to record: become CMD, changing nothing. */
		doctor_probe_cancel();
		if (chdir(workspace) < 0)
			util_die_errno(EXIT_AIRLOCK_FAILURE, "--workspace %s", workspace);
		policy_free(p);
		free(session);
		free(workspace);
		execvp(o.cmd[0], o.cmd);
		status = errno;
		report_exec_failure(o.cmd[0], status);
		return util_exec_status(status);
	} else {
		status = run_off_with_events(&o, p, session, workspace);
	}
	policy_free(p);
	free(session);
	free(workspace);
	return status;
}
