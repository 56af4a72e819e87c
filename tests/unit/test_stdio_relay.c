/* SPDX-License-Identifier: Apache-2.0
 * test_stdio_relay.c - which descriptors the agent may hold as they are,
 * and ending the relays safely when someone else reaped them.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stdio_relay.h"
#include "tap.h"
#include "util.h"

struct passes_case {
	const char *what;
	int fd;
	bool want;
};

static void test_passes(void)
{
	char tmpl[] = "/tmp/airlock-relay.XXXXXX";
	int p[2], sv[2], file, null, pty, closed;

	ASSERT(pipe(p) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	file = mkstemp(tmpl);
	ASSERT(file >= 0);
	unlink(tmpl);
	null = open("/dev/null", O_RDWR);
	pty = posix_openpt(O_RDWR | O_NOCTTY);
	closed = dup(null);
	close(closed);
	{
		const struct passes_case cases[] = {
			{ "a pipe (read end)", p[0], true },
			{ "a pipe (write end)", p[1], true },
			{ "a regular file", file, false },
			{ "/dev/null", null, false },
			{ "a socket", sv[0], false },
			{ "a closed descriptor", closed, false },
			{ "a terminal (pty master)", pty, pty >= 0 },
		};
		size_t i;

		for (i = 0; i < ARRAY_SIZE(cases); i++)
			tap_ok(stdio_relay_passes(cases[i].fd) == cases[i].want,
			       "%s %s", cases[i].what,
			       cases[i].want ? "is passed as it is" : "gets a pipe");
	}
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
	close(file);
	close(null);
	if (pty >= 0)
		close(pty);
}

/* PID 1 of a PID namespace of its own: the relays copy, another reaper
 * takes them, their pid is given to an unrelated process, and
 * stdio_relay_finish() must not kill that one. Reports three bytes on
 * @report: the pid was reused, the unrelated process lives, the output
 * arrived. */
__attribute__((noreturn)) static void reuse_scenario(int report, const char *in_path,
						     const char *out_path)
{
	struct stdio_relay r;
	char err[256], got[16] = "", res[3] = { 0, 0, 0 };
	pid_t victim;
	int fd, status;
	FILE *f;

	fd = open(in_path, O_RDONLY);
	ASSERT(fd >= 0 && dup2(fd, 0) == 0);
	fd = open(out_path, O_WRONLY | O_TRUNC);
	ASSERT(fd >= 0 && dup2(fd, 1) == 1);
	ASSERT(stdio_relay_start(&r, err, sizeof(err)) == 0);
	ASSERT(r.in_pid > 0 && r.out_pid > 0);
	ASSERT(write(r.agent[1], "hello\n", 6) == 6);
	stdio_relay_detach(&r);
	/* Another reaper: both relays end by themselves (end of output;
	 * EPIPE on input), and are reaped here, not by the relay code. */
	while (waitpid(-1, &status, 0) > 0)
		;
	/* The next pid handed out is the input relay's old one. */
	f = fopen("/proc/sys/kernel/ns_last_pid", "w");
	if (f) {
		fprintf(f, "%d", (int)r.in_pid - 1);
		fclose(f);
	}
	victim = fork();
	if (victim == 0) {
		pause();
		_exit(0);
	}
	res[0] = victim == r.in_pid;
	stdio_relay_finish(&r);
	res[1] = kill(victim, 0) == 0 && waitpid(victim, &status, WNOHANG) == 0;
	kill(victim, SIGKILL);
	waitpid(victim, &status, 0);
	f = fopen(out_path, "r");
	if (f) {
		if (!fgets(got, sizeof(got), f))
			got[0] = '\0';
		fclose(f);
	}
	res[2] = strcmp(got, "hello\n") == 0;
	ASSERT(write(report, res, sizeof(res)) == (ssize_t)sizeof(res));
	_exit(0);
}

static bool write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok;
}

static void test_reaped_elsewhere(void)
{
	char in_path[] = "/tmp/airlock-relay-in.XXXXXX";
	char out_path[] = "/tmp/airlock-relay-out.XXXXXX";
	char res[3];
	int p[2], fd, status;
	uid_t uid = getuid();
	gid_t gid = getgid();
	pid_t pid;

	fd = mkstemp(in_path);
	ASSERT(fd >= 0 && write(fd, "input\n", 6) == 6);
	close(fd);
	fd = mkstemp(out_path);
	ASSERT(fd >= 0);
	close(fd);
	ASSERT(pipe(p) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		char map[64];

		close(p[0]);
		/* A user namespace gives us ns_last_pid of our own PID
		 * namespace; the child forked next is its PID 1. */
		if (unshare(CLONE_NEWUSER | CLONE_NEWPID) < 0)
			_exit(2);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if (!write_str("/proc/self/uid_map", map) ||
		    !write_str("/proc/self/setgroups", "deny"))
			_exit(2);
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		if (!write_str("/proc/self/gid_map", map))
			_exit(2);
		pid = fork();
		if (pid == 0)
			reuse_scenario(p[1], in_path, out_path);
		_exit(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0 ? 0 : 1);
	}
	close(p[1]);
	memset(res, 0, sizeof(res));
	if (read(p[0], res, sizeof(res)) != (ssize_t)sizeof(res))
		res[0] = -1;
	close(p[0]);
	waitpid(pid, &status, 0);
	if (res[0] == -1) {
		tap_ok(true, "# skip no user and PID namespaces here (status %d)", status);
	} else if (!res[0]) {
		tap_ok(true, "# skip the input relay's pid was not handed out again");
	} else {
		tap_ok(res[1], "a process that got a reaped relay's pid is not killed by "
		       "stdio_relay_finish()");
	}
	tap_ok(res[0] == -1 || res[2], "the output reached the file although another "
	       "reaper took the relays");
	unlink(in_path);
	unlink(out_path);
}

int main(void)
{
	test_passes();
	test_reaped_elsewhere();
	return tap_done();
}
