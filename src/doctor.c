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
 *
 * Caching: the probe's answer holds as long as the things it depends on
 * do, so `airlock run` (doctor_probe_begin(true)) takes an answer cached
 * earlier in the same boot instead of probing again: one file, "probe",
 * in /run/airlock for root ($XDG_RUNTIME_DIR/airlock for other users,
 * AIRLOCK_PROBE_CACHE_DIR when set). The answer is cached under a key
 * (cache_key_make): the boot (/proc/sys/kernel/random/boot_id), this
 * binary (device, inode, size, modification and change times), the real
 * and effective ids, the caller's user, mount, PID and cgroup
 * namespaces, its seccomp, no_new_privs and capability sets, its LSM
 * label and the sysctls that limit namespaces and seccomp. It fails
 * closed: the file is used only when it is a regular file with one link,
 * owned by the effective user, mode 0600, in a directory of that user
 * that nobody else may write, and its text is byte for byte what this
 * code writes for the current key, ending in the SHA-256 of the rest;
 * and only when its answer is that enforce mode can run (a negative
 * answer is never cached, so a host that lacks something is probed
 * every time, and says what). Anything else is ignored and the host
 * probed, and that probe replaces the file (or removes it when enforce
 * cannot run). `airlock doctor` never reads the cache: it probes, and
 * refreshes or removes the cache with what it found. The transparent
 * mode's probe is not cached. The sandbox itself still creates its
 * namespaces and loads its filter at every start, and fails if the
 * kernel refuses: the cache spares the probe, never the checks.
 */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "receipt_line.h"
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

/* The probe's answer, cached per boot (see "Caching" above). */
#define CACHE_FILE "probe"
#define CACHE_MAGIC "airlock probe cache 1\n"
#define CACHE_MAX 8192

/* The cache's directory: AIRLOCK_PROBE_CACHE_DIR, else /run/airlock for
 * root and $XDG_RUNTIME_DIR/airlock for others; false: none. */
static bool cache_dir_path(char *out, size_t len)
{
	const char *env = getenv("AIRLOCK_PROBE_CACHE_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env && *env)
		n = snprintf(out, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(out, len, "/run/airlock");
	else if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/airlock", xdg);
	else
		return false;
	return n > 0 && (size_t)n < len;
}

/* The cache's directory, opened: not a symbolic link, owned by this
 * effective user, writable by nobody else. -1 when there is none such. */
static int cache_dir_open(bool create)
{
	char dir[4096];
	struct stat st;
	int fd;

	if (!cache_dir_path(dir, sizeof(dir)))
		return -1;
	if (create)
		(void)mkdir(dir, 0700);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return -1;
	}
	return fd;
}

struct keybuf {
	char s[CACHE_MAX];
	size_t n;
	bool full;
};

static void key_add(struct keybuf *k, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void key_add(struct keybuf *k, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (k->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(k->s + k->n, sizeof(k->s) - k->n, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(k->s) - k->n)
		k->full = true;
	else
		k->n += (size_t)n;
}

/* Appends " " and the start of small file @path, its final newline
 * dropped and other blanks made '_'; " -" when it cannot be read. */
static void key_add_file(struct keybuf *k, const char *path)
{
	char buf[512];
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		key_add(k, " -");
		return;
	}
	do
		r = read(fd, buf, sizeof(buf) - 1);
	while (r < 0 && errno == EINTR);
	close(fd);
	if (r < 0) {
		key_add(k, " -");
		return;
	}
	while (r > 0 && buf[r - 1] == '\n')
		r--;
	buf[r] = 0;
	for (ssize_t i = 0; i < r; i++)
		if (buf[i] == '\n' || buf[i] == ' ' || buf[i] == '\t' || buf[i] == 0)
			buf[i] = '_';
	key_add(k, " %s", r ? buf : "_");
}

/* What the probe's answer depends on, as text: the boot, this binary,
 * who runs it and in which namespaces, under which seccomp filters and
 * capabilities and LSM label, and the sysctls that limit namespaces and
 * seccomp. A cached answer holds only under the same key. NULL when a
 * part that must be known cannot be read (then nothing is cached). */
static char *cache_key_make(void)
{
	static const char *const ns[] = { "user", "mnt", "pid", "cgroup" };
	static const char *const sysctls[] = {
		"/proc/sys/user/max_user_namespaces",
		"/proc/sys/user/max_mnt_namespaces",
		"/proc/sys/user/max_net_namespaces",
		"/proc/sys/user/max_pid_namespaces",
		"/proc/sys/user/max_ipc_namespaces",
		"/proc/sys/user/max_uts_namespaces",
		"/proc/sys/kernel/unprivileged_userns_clone",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
		"/proc/sys/kernel/seccomp/actions_avail",
		"/proc/sys/kernel/unprivileged_bpf_disabled",
	};
	struct keybuf *k = util_xmalloc(sizeof(*k));
	char boot[64], *status, *line, *save = NULL;
	struct stat st;
	size_t i;
	int fd;
	ssize_t r;

	k->n = 0;
	k->full = false;
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -1 : read(fd, boot, sizeof(boot) - 1);
	if (fd >= 0)
		close(fd);
	if (r < 32 || stat("/proc/self/exe", &st) < 0)
		goto fail;
	boot[r] = 0;
	boot[strcspn(boot, "\n")] = 0;
	key_add(k, "boot %s\n", boot);
	key_add(k, "exe %llu %llu %lld %lld.%09ld %lld.%09ld\n",
		(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		(long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		(long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	key_add(k, "ids %u %u %u %u\n", (unsigned)getuid(), (unsigned)geteuid(),
		(unsigned)getgid(), (unsigned)getegid());
	key_add(k, "ns");
	for (i = 0; i < ARRAY_SIZE(ns); i++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
		if (stat(path, &st) < 0)
			goto fail;
		key_add(k, " %llu:%llu", (unsigned long long)st.st_dev,
			(unsigned long long)st.st_ino);
	}
	key_add(k, "\nstatus");
	status = util_read_file("/proc/self/status", 1 << 16, NULL);
	if (!status)
		goto fail;
	for (line = strtok_r(status, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "Seccomp", 7) || !strncmp(line, "NoNewPrivs:", 11) ||
		    !strncmp(line, "Cap", 3)) {
			for (char *c = line; *c; c++)
				if (*c == ' ' || *c == '\t')
					*c = '_';
			key_add(k, " %s", line);
		}
	free(status);
	key_add(k, "\nlsm");
	key_add_file(k, "/proc/self/attr/current");
	key_add(k, "\nsysctl");
	for (i = 0; i < ARRAY_SIZE(sysctls); i++)
		key_add_file(k, sysctls[i]);
	key_add(k, "\n");
	if (k->full)
		goto fail;
	{
		char *s = util_xstrndup(k->s, k->n);

		free(k);
		return s;
	}
fail:
	free(k);
	return NULL;
}

/* The cache file's text for @key and @caps, without its "sum" line. */
static char *cache_body(const char *key, const struct doctor_caps *c)
{
	char *s = NULL;

	if (asprintf(&s, CACHE_MAGIC "%scaps %d %d %d %d %d %d %d %d\n", key, c->userns,
		     c->netns, c->pidns, c->mountns, c->ipcns, c->utsns, c->seccomp,
		     c->landlock) < 0)
		return NULL;
	return s;
}

static bool caps_all_required(const struct doctor_caps *c)
{
	return c->userns && c->netns && c->pidns && c->mountns && c->ipcns &&
	       c->utsns && c->seccomp;
}

/* Parses "caps U N P M I T S L\n" (the seven required capabilities, 0 or
 * 1, and the Landlock ABI) into @u and @landlock. */
static bool parse_caps(const char *p, int u[7], int *landlock)
{
	int i;

	if (strncmp(p, "caps ", 5) != 0)
		return false;
	p += 5;
	for (i = 0; i < 8; i++) {
		char *end;
		long v;

		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno != 0 || v < 0 || v > (i < 7 ? 1 : 1000) ||
		    *end != (i < 7 ? ' ' : '\n'))
			return false;
		if (i < 7)
			u[i] = (int)v;
		else
			*landlock = (int)v;
		p = end + 1;
	}
	return true;
}

/* Reads the cached answer for @key into @caps. True only for a regular
 * file in the cache's directory owned by this effective user, mode 0600,
 * one link, whose text is exactly what cache_write() writes for @key
 * (magic, key, caps, the SHA-256 of all that) and whose answer is that
 * enforce mode can run: anything else is not a cache hit, and the host
 * is probed. */
static bool cache_read(const char *key, struct doctor_caps *caps)
{
	char text[CACHE_MAX + 1], sum[RECEIPT_SHA256_HEX_LEN + 1], *body = NULL;
	struct doctor_caps c;
	int u[7], dirfd, fd;
	size_t got = 0, klen = strlen(key);
	bool hit = false;
	struct stat st;
	const char *p;
	ssize_t r;

	dirfd = cache_dir_open(false);
	if (dirfd < 0)
		return false;
	fd = openat(dirfd, CACHE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dirfd);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0600 || st.st_nlink != 1 || st.st_size > CACHE_MAX)
		goto out;
	while (got < CACHE_MAX) {
		r = read(fd, text + got, CACHE_MAX - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	text[got] = 0;
	if (strlen(text) != got)
		goto out;
	p = text;
	if (strncmp(p, CACHE_MAGIC, strlen(CACHE_MAGIC)) != 0)
		goto out;
	p += strlen(CACHE_MAGIC);
	if (strncmp(p, key, klen) != 0)
		goto out;
	p += klen;
	memset(&c, 0, sizeof(c));
	if (!parse_caps(p, u, &c.landlock))
		goto out;
	c.userns = u[0];
	c.netns = u[1];
	c.pidns = u[2];
	c.mountns = u[3];
	c.ipcns = u[4];
	c.utsns = u[5];
	c.seccomp = u[6];
	if (!caps_all_required(&c))
		goto out;
	/* Byte for byte what would be written: no other spelling passes. */
	body = cache_body(key, &c);
	if (!body || strncmp(text, body, strlen(body)) != 0)
		goto out;
	p = text + strlen(body);
	receipt_sha256_hex(body, strlen(body), sum);
	if (strncmp(p, "sum ", 4) != 0 || strncmp(p + 4, sum, RECEIPT_SHA256_HEX_LEN) != 0 ||
	    strcmp(p + 4 + RECEIPT_SHA256_HEX_LEN, "\n") != 0)
		goto out;
	*caps = c;
	hit = true;
out:
	free(body);
	close(fd);
	return hit;
}

/* Replaces the cached answer with @caps, probed under @key, when enforce
 * mode can run with it; removes it otherwise. Best effort: a cache that
 * cannot be written only means the next start probes again. */
static void cache_write(const char *key, const struct doctor_caps *caps)
{
	char tmp[64], sum[RECEIPT_SHA256_HEX_LEN + 1], *body;
	int dirfd, fd;

	dirfd = cache_dir_open(caps_all_required(caps));
	if (dirfd < 0)
		return;
	if (!caps_all_required(caps) || !key || !(body = cache_body(key, caps))) {
		(void)unlinkat(dirfd, CACHE_FILE, 0);
		close(dirfd);
		return;
	}
	receipt_sha256_hex(body, strlen(body), sum);
	snprintf(tmp, sizeof(tmp), CACHE_FILE ".%d.tmp", (int)getpid());
	(void)unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok = fchmod(fd, 0600) == 0 && util_write_all(fd, body, strlen(body)) == 0 &&
		     util_write_all(fd, "sum ", 4) == 0 &&
		     util_write_all(fd, sum, RECEIPT_SHA256_HEX_LEN) == 0 &&
		     util_write_all(fd, "\n", 1) == 0;
		ok = close(fd) == 0 && ok;
		if (!ok || renameat(dirfd, tmp, dirfd, CACHE_FILE) < 0)
			(void)unlinkat(dirfd, tmp, 0);
	}
	free(body);
	close(dirfd);
}

/* A probe under way (doctor_probe_begin), or none: pid -1. @key is what
 * its answer is cached under (NULL: not cached); @hit says the answer
 * came from the cache, in @cached, and no child runs. */
static struct {
	pid_t pid;
	int fd;
	char *key;
	bool hit;
	struct doctor_caps cached;
} pending = { -1, -1, NULL, false, { 0 } };

void doctor_probe_begin(bool use_cache)
{
	int fds[2];
	pid_t pid;

	if (pending.pid > 0 || pending.hit)
		return;
	free(pending.key);
	pending.key = cache_key_make();
	if (use_cache && pending.key && cache_read(pending.key, &pending.cached)) {
		pending.hit = true;
		return;
	}
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
	pending.hit = false;
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
	doctor_probe_begin(true);
	if (pending.hit) {
		*caps = pending.cached;
		pending.hit = false;
		caps->transparent = transparent_collect() && caps->netns;
		return;
	}
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
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		cache_write(pending.key, caps);
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
	/* Never from the cache: doctor exercises the host, and refreshes
	 * the cache (or removes it) with what it found. */
	doctor_probe_begin(false);
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
