/* SPDX-License-Identifier: Apache-2.0
 * stdio_relay.c - see stdio_relay.h.
 *
 * DOC: Theory of Operation
 *
 * A descriptor is a capability: whoever holds the caller's stdout, when it
 * is a regular file, can ftruncate() it, lseek() and overwrite it, read it
 * back (O_RDWR), or change its flags for every other holder -- and with
 * `--events -` that file also holds the receipts of earlier sessions. So
 * the agent holds the caller's standard descriptors only where that gives
 * it nothing more than the data: a terminal (kept a terminal, so that
 * programs behave as they do interactively; TIOCSTI is refused by the
 * seccomp filter and the agent has no controlling terminal) and a pipe.
 * For anything else (regular files, sockets, devices other than
 * terminals, /dev/null included) the agent gets a pipe, and a relay
 * outside the sandbox copies:
 *
 *   supervisor
 *     |- out relay: agent's stdout pipe -> caller's 1, stderr pipe -> caller's 2
 *     |- in relay:  caller's 0 -> agent's stdin pipe
 *     `- sandbox init -> agent (holds only the pipes' other ends)
 *
 * When the caller's 1 and 2 are one open file description (2>&1), the
 * agent gets one pipe for both, so what it writes keeps its order.
 *
 * The relays are forked before any secret or key is loaded (they are
 * copies of the supervisor) and hold nothing but the caller's descriptors
 * and their pipe ends. They ignore the signals a terminal sends to the
 * whole foreground group (the supervisor forwards those to the agent), and
 * die with the supervisor (PR_SET_PDEATHSIG). They never set O_NONBLOCK on
 * a caller's descriptor: its flags are shared with the caller's other
 * processes; a caller's descriptor that is non-blocking already is waited
 * on with poll().
 *
 * End: the out relay finishes when every writer of its pipes is gone,
 * which is when the whole sandbox is (init's exit kills every process of
 * its PID namespace); the supervisor waits for it before it writes
 * session.end and exits, so no output is lost. The relays are waited for
 * and signalled through pidfds: a supervisor loop that reaps every child
 * (waitpid(-1)) may reap one first, and a pid must not be signalled once
 * reaped (by then it may be another process's). The in relay ends on end of
 * input or when the agent side is closed (EPIPE), and is stopped by the
 * supervisor at the end in any case (input the agent did not read is
 * dropped; a shared file offset may have moved past what it read).
 * If the caller's output cannot be written (a closed socket), that stream
 * is closed, and the agent gets EPIPE as it would have.
 *
 * Should: give the agent the data and nothing of the caller's files, copy
 * all of it before airlock exits. Mustn't: hold an agent-side end (the
 * output would never end), stall the caller's other processes.
 */
#include "stdio_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "confine.h"
#include "util.h"

#define RELAY_BUF (128 * 1024)

bool stdio_relay_passes(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return false;
	if (S_ISFIFO(st.st_mode))
		return true;
	return S_ISCHR(st.st_mode) && isatty(fd);
}

/* Are descriptors @a and @b one open file description? */
static bool same_description(int a, int b)
{
	struct stat sa, sb;
	long r = syscall(SYS_kcmp, (long)getpid(), (long)getpid(), KCMP_FILE,
			 (long)a, (long)b);

	if (r >= 0)
		return r == 0;
	/* No kcmp (CONFIG_KCMP off): the same file is close enough. */
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static void ensure_open(void)
{
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* The lowest free descriptor: this one. */
		if (open("/dev/null", O_RDWR) != fd)
			util_die_errno(EXIT_AIRLOCK_FAILURE, "opening /dev/null as descriptor %d",
				       fd);
	}
}

/* Waits until @fd is ready for @events (a descriptor of the caller's that
 * is non-blocking). */
static void wait_ready(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events, .revents = 0 };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

/* Writes all of @buf to @fd, waiting where @fd is non-blocking. Returns 0,
 * or -1 when @fd cannot take it (closed reader, error). */
static int write_full(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_ready(fd, POLLOUT);
				continue;
			}
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The relay's own process (child_start()): dies with the supervisor,
 * ignores what the terminal sends the whole group, never stops on a closed
 * reader; keeps only @keep, and no capability. */
static void become_relay(pid_t parent, const int *keep, size_t nkeep)
{
	sigset_t none;

	child_start(&(struct child_spec){ .name = "airlock-relay", .who = "stdio relay",
					  .parent = parent, .ctl = -1, .keep = keep,
					  .nkeep = nkeep, .ignore_session_signals = true });
	/* It copies between descriptors it holds: no privilege needed. */
	if (confine_drop_capabilities() < 0)
		_exit(EXIT_AIRLOCK_FAILURE);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Copies @out_r to 1 and @err_r to 2 (either may be -1) until both end. */
__attribute__((noreturn)) static void copy_out(int out_r, int err_r)
{
	struct pollfd p[2] = { { out_r, POLLIN, 0 }, { err_r, POLLIN, 0 } };
	static char buf[RELAY_BUF];
	size_t i;

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(EXIT_AIRLOCK_FAILURE);
		}
		for (i = 0; i < 2; i++) {
			ssize_t n;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			/* End of the agent's output, or the caller's side
			 * is gone: the agent then gets EPIPE. */
			if (n <= 0 || write_full((int)i + 1, buf, (size_t)n) < 0) {
				close(p[i].fd);
				p[i].fd = -1;
			}
		}
	}
	_exit(0);
}

/* Copies 0 to @in_w until either ends. */
__attribute__((noreturn)) static void copy_in(int in_w)
{
	static char buf[RELAY_BUF];

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			wait_ready(0, POLLIN);
			continue;
		}
		if (n <= 0 || write_full(in_w, buf, (size_t)n) < 0)
			break;
	}
	_exit(0);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* A pidfd for our child @pid, taken before anyone could reap it; -1 where
 * the kernel has none (then waitpid() and kill() are used). */
static int child_pidfd(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits until the child behind @pidfd (else @pid) has ended, and reaps it
 * unless someone else did. With @kill, ends it first. */
static void end_child(pid_t *pid, int *pidfd, bool kill_it)
{
	if (*pid <= 0)
		return;
	if (*pidfd >= 0) {
		struct pollfd p = { .fd = *pidfd, .events = POLLIN, .revents = 0 };

		if (kill_it)
			(void)syscall(SYS_pidfd_send_signal, *pidfd, SIGKILL, NULL, 0);
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
		(void)waitpid(*pid, NULL, WNOHANG);
		close_fd(pidfd);
	} else {
		if (kill_it)
			kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	*pid = -1;
}

int stdio_relay_start(struct stdio_relay *r, char *err, size_t errlen)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
	bool relay[3], shared;
	pid_t parent = getpid();
	int i, ret = -1;

	ensure_open();
	r->out_pid = -1;
	r->in_pid = -1;
	r->out_pidfd = -1;
	r->in_pidfd = -1;
	for (i = 0; i < 3; i++) {
		r->agent[i] = -1;
		relay[i] = !stdio_relay_passes(i);
	}
	shared = relay[1] && relay[2] && same_description(1, 2);
	if ((relay[0] && pipe2(in, O_CLOEXEC) < 0) ||
	    (relay[1] && pipe2(out, O_CLOEXEC) < 0) ||
	    (relay[2] && !shared && pipe2(er, O_CLOEXEC) < 0)) {
		snprintf(err, errlen, "creating the agent's standard pipes: %s",
			 strerror(errno));
		goto out;
	}
	r->agent[0] = in[0];
	r->agent[1] = out[1];
	r->agent[2] = shared ? out[1] : er[1];

	if (relay[1] || relay[2]) {
		r->out_pid = fork();
		if (r->out_pid < 0) {
			snprintf(err, errlen, "starting the output relay: %s", strerror(errno));
			goto out;
		}
		if (r->out_pid == 0) {
			int keep[] = { 1, 2, out[0], er[0] };

			become_relay(parent, keep, ARRAY_SIZE(keep));
			copy_out(out[0], er[0]);
		}
		r->out_pidfd = child_pidfd(r->out_pid);
	}
	if (relay[0]) {
		r->in_pid = fork();
		if (r->in_pid < 0) {
			snprintf(err, errlen, "starting the input relay: %s", strerror(errno));
			goto out;
		}
		if (r->in_pid == 0) {
			int keep[] = { 0, in[1] };

			become_relay(parent, keep, ARRAY_SIZE(keep));
			copy_in(in[1]);
		}
		r->in_pidfd = child_pidfd(r->in_pid);
	}
	ret = 0;
out:
	/* The relays' ends are theirs alone. */
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&er[0]);
	if (ret < 0) {
		stdio_relay_detach(r);
		stdio_relay_finish(r);
	}
	return ret;
}

void stdio_relay_detach(struct stdio_relay *r)
{
	int i, j;

	for (i = 0; i < 3; i++) {
		for (j = 0; j < i && r->agent[j] != r->agent[i]; j++)
			;
		if (r->agent[i] >= 0 && j == i)
			close(r->agent[i]);
	}
	for (i = 0; i < 3; i++)
		r->agent[i] = -1;
}

void stdio_relay_finish(struct stdio_relay *r)
{
	end_child(&r->out_pid, &r->out_pidfd, false);
	end_child(&r->in_pid, &r->in_pidfd, true);
}
