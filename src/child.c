/* SPDX-License-Identifier: Apache-2.0
 * child.c - see child.h.
 *
 * DOC: Theory of Operation
 *
 * Every process of a session but the supervisor and the sandbox's init (the
 * key holder, the proxy workers, the ledger process, the DNS stub, the
 * relays) is forked from the supervisor, and so starts as a copy of its
 * memory, descriptors, environment and signal dispositions. child_start()
 * is the one prologue they all run before doing anything else, so that
 * none forgets a step:
 *
 *   1. not dumpable: no core file, and no process of the caller's (other
 *      than one with CAP_SYS_PTRACE) may ptrace it or read its memory;
 *   2. SIGKILL when its parent dies, then a check that the parent is still
 *      the supervisor (it may have died before the request was made) --
 *      except the key holder, which on its channel's close writes what it
 *      was sent and exits (docs/ARCHITECTURE.md, "How a session ends");
 *   3. its name (PR_SET_NAME);
 *   4. every descriptor closed but the ones its job needs;
 *   5. the environment's bytes wiped (the caller's environment may hold
 *      secret values) but for the variables the child's libraries read;
 *   6. SIGPIPE ignored, and the terminal's signals when the session must
 *      end through the supervisor rather than by the child's death.
 *
 * child_fatal() is the one way a child says why it stops: one MSG_FATAL
 * on its channel to the supervisor, which reads it when it reaps the
 * child, then exit 125.
 *
 * Should: leave the child with nothing of the supervisor's it did not ask
 * for. Mustn't: fail silently (a step that fails is the child's last
 * words), touch the parent.
 */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "msg.h"
#include "util.h"

static int child_ctl = -1;
static const char *child_who = "airlock";

void child_set_channel(int ctl)
{
	child_ctl = ctl;
}

static void (*fatal_hook)(void *arg);
static void *fatal_hook_arg;

void child_on_fatal(void (*fn)(void *arg), void *arg)
{
	fatal_hook = fn;
	fatal_hook_arg = arg;
}

void child_fatal(const char *fmt, ...)
{
	void (*hook)(void *arg) = fatal_hook;
	char reason[256];
	struct msg m = { 0 };
	va_list ap;

	fatal_hook = NULL; /* once, even if it ends here again */
	if (hook)
		hook(fatal_hook_arg);

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	msg_start(&m, MSG_FATAL);
	msg_put_cstr(&m, reason);
	if (child_ctl < 0 || msg_send(child_ctl, &m, -1, MSG_DONTWAIT) < 0)
		util_warn("%s: %s", child_who, reason);
	_exit(EXIT_AIRLOCK_FAILURE);
}

/* Keeps the environment strings @keep_env keeps, wipes the others. */
static void filter_environment(bool (*keep_env)(const char *entry))
{
	char **kept = NULL;
	size_t n = 0, i;

	for (i = 0; keep_env && environ && environ[i]; i++) {
		if (!keep_env(environ[i]))
			continue;
		kept = util_xrealloc(kept, (n + 1) * sizeof(*kept));
		kept[n++] = util_xstrdup(environ[i]);
	}
	confine_wipe_environment();
	for (i = 0; i < n; i++) {
		size_t len = strlen(kept[i]);
		char *eq = strchr(kept[i], '=');

		if (eq) {
			*eq = '\0';
			(void)setenv(kept[i], eq + 1, 1);
		}
		explicit_bzero(kept[i], len);
		free(kept[i]);
	}
	free(kept);
}

void child_start(const struct child_spec *s)
{
	static const int terminal[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
					SIGUSR2 };
	size_t i;

	child_ctl = s->ctl;
	child_who = s->who;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		child_fatal("PR_SET_DUMPABLE: %s", strerror(errno));
	if (!s->outlives_parent) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
			child_fatal("PR_SET_PDEATHSIG: %s", strerror(errno));
		if (getppid() != s->parent)
			_exit(EXIT_AIRLOCK_FAILURE); /* the supervisor died first */
	}
	(void)prctl(PR_SET_NAME, s->name, 0, 0, 0);
	if (s->null_stdio) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
		    dup2(null, STDOUT_FILENO) < 0)
			child_fatal("/dev/null: %s", strerror(errno));
		if (null > STDERR_FILENO)
			close(null);
	}
	confine_close_fds(s->keep, s->nkeep);
	filter_environment(s->keep_env);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; s->ignore_session_signals && i < ARRAY_SIZE(terminal); i++)
		signal(terminal[i], SIG_IGN);
}

void child_read_last_words(int ctl, char *fatal, size_t len)
{
	uint8_t *buf;
	struct msg_reader r;
	const char *reason;
	int fd;

	if (ctl < 0 || fatal[0])
		return;
	buf = util_xmalloc(MSG_MAX);
	for (;;) {
		ssize_t n = msg_recv(ctl, buf, MSG_MAX, &fd, MSG_DONTWAIT);

		if (fd >= 0)
			close(fd);
		if (n <= 0)
			break;
		if (msg_reader_init(&r, MSG_CHAN_COMMON, buf, (size_t)n) && r.type == MSG_FATAL &&
		    msg_get_str(&r, len - 1, &reason, NULL) && msg_end(&r)) {
			(void)util_strlcpy(fatal, reason, len);
			break;
		}
	}
	free(buf);
}

void child_describe_exit(int wstatus, const char *fatal, char *out, size_t len)
{
	if (fatal && fatal[0])
		snprintf(out, len, "%s", fatal);
	else if (WIFSIGNALED(wstatus))
		snprintf(out, len, "killed by signal %d", WTERMSIG(wstatus));
	else
		snprintf(out, len, "exited with status %d", WEXITSTATUS(wstatus));
}
