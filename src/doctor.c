/* SPDX-License-Identifier: Apache-2.0
 * doctor.c - host capability probe and `airlock doctor`.
 *
 * DOC: Theory of Operation
 *
 * A capability is reported present only if it was exercised: a child
 * enters new user, network, PID, mount, IPC and UTS namespaces with one
 * unshare() - the set the sandbox's clone makes - then loads the
 * sandbox's own seccomp filter (the one built into airlock) with its
 * user-notification listener and makes a call that a thread it started
 * before the filter must answer, as the sandbox's init answers the agent;
 * it also asks the kernel for its Landlock ABI. Reading sysctls or kernel
 * configs would only guess: an LSM, a container runtime's seccomp profile
 * or a namespace limit can each refuse what the configuration seems to
 * allow.
 *
 * Only when that unshare() fails does the child try the namespaces one
 * by one, to tell which is missing. The probe costs one namespace set of
 * the sandbox's kind; doctor_probe_begin() starts it early so that it
 * runs beside the caller's own start-up work.
 *
 * The children report through a pipe as a fixed struct and exit; the parent
 * reaps them. A child that dies or says nothing counts as "absent", so the
 * probe fails closed.
 *
 * Enforce mode needs the user, network, PID, mount, IPC and UTS namespaces
 * and seccomp with user notifications (docs/SANDBOX.md; the unix-socket gate,
 * src/usock.c, serves them). Landlock is a second layer used where the
 * kernel has it, so its absence does not stop enforce mode; its ABI
 * version is reported.
 *
 * Transparent mode is probed the same way, but only when asked
 * (doctor_transparent_begin: `airlock doctor`, and a run whose policy
 * wants transparent mode): in a child of its own, in fresh user and
 * network namespaces, the redirect is really loaded and a connection to
 * an outside address must reach a local listener with its original
 * destination (transparent.c). Loading nftables chains is the most
 * expensive part of a probe (the kernel patches its hooks on every
 * CPU), so a run that does not use transparent mode does not pay for
 * it. It counts for enforce mode only when the caller's policy asks for
 * it (need_transparent).
 */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "sandbox_filter.h"
#include "transparent.h"
#include "util.h"

/* Writes "0 ID 1" to /proc/self/FILE (after denying setgroups), mapping
 * root inside the new user namespace to the caller outside. */
static bool write_map(const char *file, unsigned int id)
{
	char path[64], line[64];
	int fd, n;
	bool ok;

	snprintf(path, sizeof(path), "/proc/self/%s", file);
	n = snprintf(line, sizeof(line), "0 %u 1\n", id);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = util_write_all(fd, line, (size_t)n) == 0;
	close(fd);
	return ok;
}

static bool enter_userns(void)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	int fd;

	if (unshare(CLONE_NEWUSER) < 0)
		return false;
	fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)util_write_all(fd, "deny", 4);
		close(fd);
	}
	return write_map("uid_map", uid) && write_map("gid_map", gid);
}

/* A PID namespace is usable only if the next child really becomes pid 1. */
static bool probe_pidns(void)
{
	pid_t pid;
	int status;

	if (unshare(CLONE_NEWPID) < 0)
		return false;
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(getpid() == 1 ? 0 : 1);
	if (waitpid(pid, &status, 0) != pid)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Answers the one notification of @listener from thread @agent: must be
 * its connect(), answered with an errno the kernel never gives connect().
 * Waits at most two seconds. */
static bool seccomp_probe_answer(int listener, pid_t agent)
{
	/* The kernel's structs may be larger than this header's. */
	union {
		struct seccomp_notif n;
		char bytes[512];
	} n;
	union {
		struct seccomp_notif_resp r;
		char bytes[512];
	} resp;
	struct seccomp_notif_sizes sizes;
	struct pollfd p = { listener, POLLIN, 0 };

	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0 ||
	    sizes.seccomp_notif > sizeof(n.bytes) ||
	    sizes.seccomp_notif_resp > sizeof(resp.bytes))
		return false;
	memset(&n, 0, sizeof(n));
	memset(&resp, 0, sizeof(resp));
	if (poll(&p, 1, 2000) != 1 || !(p.revents & POLLIN))
		return false;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
		return false;
	resp.r.id = n.n.id;
	resp.r.error = -EOWNERDEAD;
	return (pid_t)n.n.pid == agent && n.n.data.nr == __NR_connect &&
	       ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) == 0;
}

struct answerer {
	int pipe[2];  /* the listener's number, from the main thread */
	pid_t tid;    /* the main thread, whose call it answers */
	bool ok;
};

/* Started before the filter, so outside it: answers the main thread's
 * one notified call. */
static void *seccomp_probe_answerer(void *arg)
{
	struct answerer *a = arg;
	size_t got = 0;
	int listener;

	while (got < sizeof(listener)) {
		ssize_t n = read(a->pipe[0], (char *)&listener + got, sizeof(listener) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		got += (size_t)n;
	}
	if (listener >= 0)
		a->ok = seccomp_probe_answer(listener, a->tid);
	return NULL;
}

/* Seccomp as the sandbox uses it: its filter loads (after no_new_privs)
 * and acts, its user notifications reach a supervisor that answers them,
 * and pidfd_getfd() (which the gate copies sockets with) exists.
 * seccomp_probe_start() starts the answering thread; it must come before
 * unshare(CLONE_NEWPID), after which no thread can be created. Returns
 * false if it cannot. seccomp_probe_finish() loads the filter on the
 * calling thread (the child's only other one), so it comes last. */
static bool seccomp_probe_start(struct answerer *a, pthread_t *t)
{
	memset(a, 0, sizeof(*a));
	a->tid = (pid_t)syscall(SYS_gettid);
	if (pipe2(a->pipe, O_CLOEXEC) < 0)
		return false;
	if (pthread_create(t, NULL, seccomp_probe_answerer, a) != 0) {
		close(a->pipe[0]);
		close(a->pipe[1]);
		return false;
	}
	return true;
}

static bool seccomp_probe_finish(struct answerer *a, pthread_t t)
{
	int listener, self, copy;
	bool called = false;

	listener = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -1 : sandbox_filter_load();
	if (util_write_all(a->pipe[1], &listener, sizeof(listener)) == 0 && listener >= 0) {
		int r;

		errno = 0;
		r = connect(-1, NULL, 0);
		called = r < 0 && errno == EOWNERDEAD;
	}
	close(a->pipe[1]);
	pthread_join(t, NULL);
	close(a->pipe[0]);
	if (listener >= 0)
		close(listener);
	self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	copy = self < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, self, 0, 0);
	if (copy >= 0)
		close(copy);
	if (self >= 0)
		close(self);
	return called && a->ok && copy >= 0;
}

static int probe_landlock(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);

	return abi > 0 ? (int)abi : 0;
}

/* The slow path, after the all-namespaces clone failed: each namespace
 * on its own, to tell which one the host refuses. */
__attribute__((noreturn)) static void probe_one_by_one(int fd)
{
	struct doctor_caps c;
	struct answerer a;
	bool started;
	pthread_t t;

	memset(&c, 0, sizeof(c));
	/* A non-dumpable caller (airlock run's supervisor) makes this child
	 * non-dumpable too, and then it may not write its own id maps. */
	(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	c.userns = enter_userns();
	/* Without a user namespace, the rest is still probed directly: that
	 * is what a privileged caller would get, and doctor reports it. */
	c.netns = unshare(CLONE_NEWNET) == 0;
	c.mountns = unshare(CLONE_NEWNS) == 0;
	c.ipcns = unshare(CLONE_NEWIPC) == 0;
	c.utsns = unshare(CLONE_NEWUTS) == 0;
	started = seccomp_probe_start(&a, &t);
	c.pidns = probe_pidns();
	c.landlock = probe_landlock();
	c.seccomp = started && seccomp_probe_finish(&a, t);
	_exit(util_write_all(fd, &c, sizeof(c)) == 0 ? 0 : 1);
}

/* The fast path: in new user, mount, network, IPC and UTS namespaces
 * (one unshare), then a PID one whose first child must be its PID 1: the
 * set the sandbox's clone makes. Returns only if the first unshare fails. */
static void probe_in_namespaces(int fd)
{
	struct doctor_caps c;
	struct answerer a;
	bool started;
	pthread_t t;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
		    CLONE_NEWUTS) < 0)
		return;
	memset(&c, 0, sizeof(c));
	c.userns = c.netns = c.mountns = c.ipcns = c.utsns = true;
	started = seccomp_probe_start(&a, &t);
	c.pidns = probe_pidns();
	c.landlock = probe_landlock();
	c.seccomp = started && seccomp_probe_finish(&a, t);
	_exit(util_write_all(fd, &c, sizeof(c)) == 0 ? 0 : 1);
}

/* A probe under way (doctor_probe_begin), or none: pid -1. */
static struct {
	pid_t pid;
	int fd;
} pending = { -1, -1 };

void doctor_probe_begin(void)
{
	int fds[2];
	pid_t pid;

	if (pending.pid > 0)
		return;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		/* Not to outlive a caller that dies (say, on a bad policy),
		 * and not readable by other processes: this copy of the
		 * caller may hold its environment's secrets. (The slow path
		 * needs to be dumpable to write its own id maps.) */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		probe_in_namespaces(fds[1]);
		probe_one_by_one(fds[1]);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return;
	}
	pending.pid = pid;
	pending.fd = fds[0];
}

/* The transparent mode's probe under way (doctor_transparent_begin), or
 * none: pid -1. Its child exits 0 when the redirect worked. */
static pid_t pending_transparent = -1;

void doctor_transparent_begin(void)
{
	pid_t pid;

	if (pending_transparent > 0)
		return;
	/* Here, not in the child: the sandbox's init, forked later from
	 * this process, inherits the library (its absence shows as the
	 * probe's failure). */
	(void)transparent_preload(NULL, 0);
	pid = fork();
	if (pid == 0) {
		char err[256];
		int null;

		(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		/* (dumpable, to write its own id maps, as probe_one_by_one) */
		(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if (geteuid() != 0 && !enter_userns())
			_exit(1);
		if (unshare(CLONE_NEWNET) < 0)
			_exit(1);
		/* doctor prints JSON only: libraries' complaints go nowhere. */
		null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			(void)dup2(null, STDERR_FILENO);
		_exit(transparent_selftest(err, sizeof(err)) == 0 ? 0 : 1);
	}
	if (pid > 0)
		pending_transparent = pid;
}

/* Collects the transparent probe: true when it ran and the redirect
 * worked (bounded: the connection is local, and waited for a second at
 * most). */
static bool transparent_collect(void)
{
	int status;
	pid_t pid = pending_transparent;

	if (pid < 0)
		return false;
	pending_transparent = -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void doctor_probe_cancel(void)
{
	if (pending_transparent > 0) {
		kill(pending_transparent, SIGKILL);
		(void)transparent_collect();
	}
	if (pending.pid < 0)
		return;
	kill(pending.pid, SIGKILL);
	while (waitpid(pending.pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(pending.fd);
	pending.pid = -1;
	pending.fd = -1;
}

void doctor_probe(struct doctor_caps *caps)
{
	ssize_t r;
	int status;

	memset(caps, 0, sizeof(*caps));
	doctor_probe_begin();
	if (pending.pid < 0) {
		(void)transparent_collect();
		return;
	}
	do
		r = read(pending.fd, caps, sizeof(*caps));
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(*caps))
		memset(caps, 0, sizeof(*caps));
	while (waitpid(pending.pid, &status, 0) < 0 && errno == EINTR)
		;
	close(pending.fd);
	pending.pid = -1;
	pending.fd = -1;
	caps->transparent = transparent_collect() && caps->netns;
}

struct cap_field {
	const char *name;
	size_t offset;
};

#define CAP_FIELD(f) { #f, offsetof(struct doctor_caps, f) }
/* Required by enforce mode, in the order they are printed. */
static const struct cap_field required[] = {
	CAP_FIELD(userns), CAP_FIELD(netns), CAP_FIELD(pidns),
	CAP_FIELD(mountns), CAP_FIELD(ipcns), CAP_FIELD(utsns),
	CAP_FIELD(seccomp),
};

static bool cap_get(const struct doctor_caps *caps, const struct cap_field *f)
{
	return *(const bool *)((const char *)caps + f->offset);
}

bool doctor_enforce_ready(const struct doctor_caps *caps)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(required); i++)
		if (!cap_get(caps, &required[i]))
			return false;
	return !caps->need_transparent || caps->transparent;
}

json_t *doctor_caps_json(const struct doctor_caps *caps)
{
	json_t *o = json_object(), *missing = json_array();
	size_t i;

	ASSERT(o && missing);
	for (i = 0; i < ARRAY_SIZE(required); i++) {
		bool v = cap_get(caps, &required[i]);

		json_object_set_new(o, required[i].name, json_boolean(v));
		if (!v)
			json_array_append_new(missing, json_string(required[i].name));
	}
	/* The documented order has landlock right after seccomp. */
	json_object_set_new(o, "landlock", json_integer(caps->landlock));
	json_object_set_new(o, "transparent", json_boolean(caps->transparent));
	if (caps->need_transparent && !caps->transparent)
		json_array_append_new(missing, json_string("transparent"));
	json_object_set_new(o, "enforce_ready",
			    json_boolean(json_array_size(missing) == 0));
	json_object_set_new(o, "missing", missing);
	return o;
}

const char cmd_doctor_help[] =
	"usage: airlock doctor [--pretty]\n"
	"\n"
	"Probes this host's isolation capabilities by really creating the\n"
	"namespaces and loading the sandbox's seccomp filter (whose user\n"
	"notifications must reach a supervisor), and prints one JSON object:\n"
	"  userns netns pidns mountns ipcns utsns seccomp  (true|false)\n"
	"  landlock       Landlock ABI version (0: absent; optional layer)\n"
	"  transparent    whether transparent mode (egress.transparent) can run\n"
	"                 here; enforce needs it only when a policy asks for it\n"
	"  enforce_ready  true when enforce mode can run here\n"
	"  missing        the names of the absent required capabilities\n"
	"\n"
	"Options:\n"
	"  --pretty   indent the JSON\n"
	"  -h, --help show this help\n"
	"\n"
	"Exit status: 0 if enforce mode can run here, 1 if not, 2 on usage error.\n";

int cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pretty", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct doctor_caps caps;
	size_t flags = JSON_COMPACT;
	json_t *o;
	char *text;
	bool ready;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			flags = JSON_INDENT(2);
			break;
		case 'h':
			fputs(cmd_doctor_help, stdout);
			return 0;
		default:
			fputs("airlock: doctor: see 'airlock doctor --help'\n", stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "airlock: doctor: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	doctor_transparent_begin();
	doctor_probe(&caps);
	ready = doctor_enforce_ready(&caps);
	o = doctor_caps_json(&caps);
	text = json_dumps(o, flags);
	ASSERT(text);
	puts(text);
	free(text);
	json_decref(o);
	return ready ? 0 : 1;
}
