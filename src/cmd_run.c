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
 * - shadow and enforce need the sandbox (SPEC §4), which is not part of this
 *   build yet: run refuses with 125 rather than pretend.
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
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "doctor.h"
#include "policy.h"
#include "receipt.h"
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
	"Modes: 'off' runs CMD unchanged. 'shadow' and 'enforce' need the sandbox,\n"
	"which this version of airlock does not provide yet: they exit 125.\n"
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

/* Session ids appear in every receipt and in file names: keep them to a
 * conservative alphabet (the same one policy.c enforces for session.id). */
static bool session_id_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || !strchr("._:-", c)))
			return false;
	}
	return true;
}

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
			if (!session_id_valid(optarg))
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
	size_t i;

	if (!o->policy_path)
		return policy_default(override);
	p = policy_load(o->policy_path, override, &errs);
	if (p)
		return p;
	for (i = 0; i < errs.count; i++)
		fprintf(stderr, "%s: %s: %s\n", o->policy_path, errs.items[i].path,
			errs.items[i].message);
	util_die(EXIT_AIRLOCK_FAILURE,
		 "policy %s is invalid (%zu error%s above); 'airlock check %s' "
		 "lists them",
		 o->policy_path, errs.count, errs.count == 1 ? "" : "s",
		 o->policy_path);
}

static char *make_session_id(const struct run_opts *o, const struct policy *p)
{
	uint8_t rnd[8];
	char hex[17];

	if (o->session)
		return util_xstrdup(o->session);
	if (p->session_id)
		return util_xstrdup(p->session_id);
	util_random(rnd, sizeof(rnd));
	util_hex(rnd, sizeof(rnd), hex);
	return util_xasprintf("sess-%s", hex);
}

static int exec_status(int err)
{
	return (err == ENOENT || err == ENOTDIR) ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

static void report_exec_failure(const char *cmd, int err)
{
	if (exec_status(err) == EXIT_NOT_FOUND)
		util_warn("%s: command not found", cmd);
	else
		util_warn("%s: cannot execute: %s", cmd, strerror(err));
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* Forks and execs @cmd; returns its wait status encoded as SPEC §2 exit
 * status (or 126/127 on exec failure, reported on stderr). */
static int spawn_and_wait(char **cmd)
{
	sigset_t mask, old;
	int errpipe[2] = { -1, -1 }, sfd = -1, status = 0, err = 0, ret;
	pid_t pid;
	ssize_t r;
	size_t i;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	for (i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(&mask, forwarded[i]);
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
		execvp(cmd[0], cmd);
		err = errno;
		(void)util_write_all(errpipe[1], &err, sizeof(err));
		_exit(exec_status(err));
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

		ret = waitpid(pid, &status, WNOHANG);
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
		return exec_status(err);
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static json_t *start_subject(const struct policy *p, const char *pubkey,
			     const char *argv0)
{
	struct doctor_caps caps;
	json_t *s;

	doctor_probe(&caps);
	s = json_pack("{s:s, s:o, s:s, s:s}", "mode", policy_mode_to_string(p->mode),
		      "capabilities", doctor_caps_json(&caps), "pubkey", pubkey,
		      "argv0", argv0);
	ASSERT(s);
	return s;
}

static EVP_PKEY *signing_key(const struct run_opts *o)
{
	char err[256];
	EVP_PKEY *k;

	if (!o->signing_key) {
		k = receipt_key_generate();
		if (!k)
			util_die(EXIT_AIRLOCK_FAILURE, "cannot generate a signing key");
		return k;
	}
	k = receipt_key_load(o->signing_key, err, sizeof(err));
	if (!k)
		util_die(EXIT_AIRLOCK_FAILURE, "--signing-key %s: %s", o->signing_key, err);
	return k;
}

static int run_off_with_events(const struct run_opts *o, const struct policy *p,
			       const char *session)
{
	struct receipt_writer *w;
	char err[256], pub[64];
	EVP_PKEY *key = signing_key(o);
	json_t *subject;
	int status;

	if (!receipt_pubkey_b64(key, pub, sizeof(pub)))
		util_die(EXIT_AIRLOCK_FAILURE, "cannot encode the signing public key");
	w = receipt_open(o->events, key, session, p->digest, err, sizeof(err));
	EVP_PKEY_free(key);
	if (!w)
		util_die(EXIT_AIRLOCK_FAILURE, "--events %s: %s", o->events, err);
	subject = start_subject(p, pub, o->cmd[0]);
	if (receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
			   "session", subject, "session started in mode off") < 0)
		util_die(EXIT_AIRLOCK_FAILURE, "--events %s: cannot write the receipt",
			 o->events);
	json_decref(subject);
	status = spawn_and_wait(o->cmd);
	if (receipt_close(w, status) < 0)
		util_warn("--events %s: cannot write session.end", o->events);
	return status;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o;
	struct policy *p;
	char *session;
	int status;

	parse_opts(argc, argv, &o);
	p = load_policy(&o);
	if (p->mode != POLICY_MODE_OFF)
		util_die(EXIT_AIRLOCK_FAILURE,
			 "mode %s needs the sandbox, which this version of airlock "
			 "does not provide yet; use --mode off",
			 policy_mode_to_string(p->mode));
	if (o.workspace && chdir(o.workspace) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "--workspace %s", o.workspace);
	session = make_session_id(&o, p);

	if (!o.events) {
		/* Nothing to record: become CMD, changing nothing. */
		policy_free(p);
		free(session);
		execvp(o.cmd[0], o.cmd);
		status = errno;
		report_exec_failure(o.cmd[0], status);
		return exec_status(status);
	}
	status = run_off_with_events(&o, p, session);
	policy_free(p);
	free(session);
	return status;
}
