/* SPDX-License-Identifier: Apache-2.0
 * doctor.c - host capability probe and `airlock doctor`.
 *
 * DOC: Theory of Operation
 *
 * A capability is reported present only if it was exercised: each probe runs
 * in a forked child that really unshares the namespace (inside a fresh user
 * namespace, the way the sandbox will), really loads a seccomp filter, and
 * asks the kernel for its Landlock ABI. Reading sysctls or kernel configs
 * would only guess: an LSM, a container runtime's seccomp profile or a
 * namespace limit can each refuse what the configuration seems to allow.
 *
 * The children report through a pipe as a fixed struct and exit; the parent
 * reaps them. A child that dies or says nothing counts as "absent", so the
 * probe fails closed.
 *
 * Enforce mode needs the user, network, PID, mount, IPC and UTS namespaces
 * and seccomp (SPEC §4). Landlock is a second layer used where the kernel
 * has it, so its absence does not stop enforce mode; its ABI version is
 * reported.
 *
 * Transparent mode is probed the same way: in the child's fresh network
 * namespace the redirect is really loaded and a connection to an outside
 * address must reach a local listener with its original destination
 * (transparent.c). It counts for enforce mode only when the caller's
 * policy asks for it (need_transparent).
 */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stddef.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
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

/* Loads a real filter (with no_new_privs, as the sandbox does) and checks
 * that it acts: getppid() must fail with the errno the filter returns. */
static bool probe_seccomp(void)
{
	scmp_filter_ctx ctx;
	bool ok = false;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return false;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return false;
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EOWNERDEAD), SCMP_SYS(getppid), 0) == 0 &&
	    seccomp_load(ctx) == 0) {
		errno = 0;
		ok = syscall(SYS_getppid) < 0 && errno == EOWNERDEAD;
	}
	seccomp_release(ctx);
	return ok;
}

static int probe_landlock(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
			   LANDLOCK_CREATE_RULESET_VERSION);

	return abi > 0 ? (int)abi : 0;
}

/* The redirect in this process's fresh network namespace (the probe
 * leaves it there; the namespace dies with the child). Bounded: the
 * connection is local, and waited for a second at most. */
static bool probe_transparent(void)
{
	char err[256];

	return transparent_selftest(err, sizeof(err)) == 0;
}

static void probe_child(int fd)
{
	struct doctor_caps c;

	memset(&c, 0, sizeof(c));
	/* A non-dumpable caller (airlock run's supervisor) makes this child
	 * non-dumpable too, and then it may not write its own id maps. */
	(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	c.userns = enter_userns();
	/* Without a user namespace, the rest is still probed directly: that
	 * is what a privileged caller would get, and doctor reports it. */
	c.netns = unshare(CLONE_NEWNET) == 0;
	c.transparent = c.netns && probe_transparent();
	c.mountns = unshare(CLONE_NEWNS) == 0;
	c.ipcns = unshare(CLONE_NEWIPC) == 0;
	c.utsns = unshare(CLONE_NEWUTS) == 0;
	c.pidns = probe_pidns();
	c.seccomp = probe_seccomp();
	c.landlock = probe_landlock();
	_exit(util_write_all(fd, &c, sizeof(c)) == 0 ? 0 : 1);
}

void doctor_probe(struct doctor_caps *caps)
{
	int fds[2] = { -1, -1 };
	pid_t pid;
	ssize_t r;
	int status;

	memset(caps, 0, sizeof(*caps));
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		close(fds[0]);
		probe_child(fds[1]);
	}
	close(fds[1]);
	fds[1] = -1;
	do
		r = read(fds[0], caps, sizeof(*caps));
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(*caps))
		memset(caps, 0, sizeof(*caps));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
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
	/* SPEC §7 prints landlock right after seccomp. */
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
	"Probes this host's isolation capabilities by really creating each\n"
	"namespace and loading a seccomp filter, and prints one JSON object:\n"
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
			fputs("airlock doctor: see 'airlock doctor --help'\n", stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "airlock doctor: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
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
