/* SPDX-License-Identifier: Apache-2.0
 * sandbox.c - namespaces, filesystem view, privileges, seccomp and Landlock
 * for the agent.
 *
 * DOC: Theory of Operation
 *
 * Three processes take part:
 *
 *   supervisor (airlock run, outside)
 *     `- init: PID 1 of the new PID namespace, inside every new namespace
 *          `- agent: the command, with no capabilities, under seccomp
 *
 * The supervisor clone()s init into new user, mount, PID, network, IPC and
 * UTS namespaces, writes init's uid/gid maps (the caller's own ids, mapped
 * to themselves) and only then lets it go on, over a pipe. Before that,
 * the supervisor plans the filesystem view (view.c: paths resolved,
 * errors reported as one line). Init:
 *
 *   0. wipes the secrets in its copy of memory and takes the agent's
 *      descriptors 0-2 (pipes, where the caller's are files: stdio_relay.c)
 *      in place of the caller's own;
 *   1. asks to be SIGKILLed when the supervisor dies (PR_SET_PDEATHSIG) and
 *      then checks the supervisor is still there: if it died first, the
 *      sync pipe gives EOF and init exits; the death of PID 1 kills every
 *      process of the namespace, so nothing can outlive the supervisor;
 *   2. brings up loopback, the only interface of its network namespace, and
 *      creates the proxy's listening socket there (127.0.0.1:PORT). The
 *      socket goes to the supervisor over a unix socket pair, as a typed
 *      message of msg.h carrying it (MSG_SANDBOX_SOCKET; a failure is
 *      MSG_FATAL), so the proxy is served from outside: the agent can
 *      reach the proxy and nothing else;
 *   3. builds the filesystem view on a tmpfs (as bubblewrap does): the host
 *      root bound read-only (recursively, with mount_setattr), a fresh
 *      /proc for the new PID namespace, a minimal /dev, then the plan of
 *      view.c: the caller's credentials hidden, private /tmp, /var/tmp and
 *      $HOME, the workspace and fs.rw bound writable, fs.ro read-only, the
 *      workspace's .git/config, hooks, info and fs.protect read-only,
 *      fs.hide and the files airlock must keep from the agent masked; then
 *      pivot_root into it and detach the old root;
 *   4. forks the agent, receives its seccomp listener and serves the
 *      unix-socket gate (src/usock.c) while it waits, reaping every orphan;
 *      when the agent ends init exits with its status, which takes the
 *      whole namespace down.
 *
 * The agent, before exec: setsid (no TIOCSTI into the caller's terminal),
 * every descriptor but 0-2 closed on exec, Landlock limiting writes to the
 * writable paths, every capability dropped (bounding, ambient, effective,
 * permitted, inheritable; securebits locked), no_new_privs, and a seccomp
 * filter that fails dangerous calls with EPERM (so tools print errors
 * instead of dying mysteriously) and turns every call that can name a
 * socket address (connect, sendto with one, sendmsg, sendmmsg) into a
 * notification that init serves: no host unix socket can be reached.
 * Calls from another architecture's ABI kill the process: their numbers
 * would bypass the filter.
 *
 * Should: see the host read-only, write its workspace, /tmp, /var/tmp, its
 * $HOME and fs.rw, reach 127.0.0.1:PORT. Mustn't: see airlock's own files
 * (policy, key, secret files, events file) or the caller's credentials,
 * change what the host runs later (.git/config, hooks), hold the caller's
 * descriptors to files, see or signal the supervisor, create namespaces or
 * mounts, open raw/packet sockets, reach a unix socket the host bound
 * (outside fs.rw), use io_uring, bpf, perf, keyrings or process_vm_*,
 * outlive the session.
 *
 * In transparent mode (docs/TRANSPARENT.md) init also makes, in step 2,
 * the transparent listener's and the DNS stub's sockets, loads the
 * redirect while it still holds CAP_NET_ADMIN in its namespace
 * (transparent.c), and hands the sockets over after the proxy's; in step
 * 3 the view's /etc/resolv.conf names the stub.
 *
 * Setup failures inside init travel to the supervisor as one line of text
 * over the socket pair; the supervisor reports it and exits 125.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "sandbox_filter.h"
#include "transparent.h"
#include "tls_ca.h"
#include "usock.h"
#include "msg.h"
#include "util.h"
#include "view.h"

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | \
		  CLONE_NEWIPC | CLONE_NEWUTS)

/* Inside init, after pivot_root, the new root is assembled here (on the
 * staging tmpfs) and the host root is reachable at OLD. */
#define NEW "/newroot"
#define OLD "/oldroot"

/* State init needs; lives in init's copy of the supervisor's memory. */
struct init_ctx {
	const struct sandbox_config *cfg;
	int sync_fd;   /* read end: the supervisor has written our id maps */
	int ctl_fd;    /* socket pair end: listening fd or an error line */
	int exec_fd;   /* write end: errno of a failed exec */
	const struct view_plan *view; /* the filesystem view (view.c) */
	int gate_fd;   /* agent's end of the listener hand-off (usock.h) */
	uid_t uid;
	gid_t gid;
};

/* Reports a setup failure to the supervisor (MSG_FATAL) and exits. */
__attribute__((noreturn, format(printf, 2, 3))) static void
init_fail(const struct init_ctx *c, const char *fmt, ...)
{
	char reason[512];
	struct msg m = { 0 };
	va_list ap;
	int err = errno;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	n = strlen(reason);
	if (err && n + 3 < sizeof(reason))
		snprintf(reason + n, sizeof(reason) - n, ": %s", strerror(err));
	msg_start(&m, MSG_FATAL);
	msg_put_cstr(&m, reason);
	(void)msg_send(c->ctl_fd, &m, -1, 0);
	_exit(EXIT_AIRLOCK_FAILURE);
}

/* Hands @fd, the socket of @role, to the supervisor; @more: another
 * follows in this hand-over. */
static void send_socket(const struct init_ctx *c, uint32_t role, bool more, int fd)
{
	struct msg m = { 0 };

	msg_start(&m, MSG_SANDBOX_SOCKET);
	msg_put_u32(&m, role);
	msg_put_u32(&m, more ? 1u : 0u);
	if (msg_send(c->ctl_fd, &m, fd, 0) < 0)
		init_fail(c, "passing a socket to the supervisor");
	msg_free(&m);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return -errno;
	r = util_write_all(fd, text, strlen(text));
	close(fd);
	return r;
}

static void loopback_up(const struct init_ctx *c)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		init_fail(c, "socket for loopback");
	memset(&ifr, 0, sizeof(ifr));
	util_strlcpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name));
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		init_fail(c, "loopback flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		init_fail(c, "bringing up loopback");
	close(fd);
}

/* Creates the proxy's listening socket inside our network namespace and
 * passes it to the supervisor. */
static void hand_over_proxy_socket(const struct init_ctx *c)
{
	struct sockaddr_in sin;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		init_fail(c, "proxy socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(c->cfg->proxy_port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		init_fail(c, "binding the proxy socket to 127.0.0.1:%u",
			  c->cfg->proxy_port);
	if (listen(fd, SOMAXCONN) < 0)
		init_fail(c, "listen on the proxy socket");

	send_socket(c, MSG_SANDBOX_SOCK_PROXY, false, fd);
	close(fd);
}

/* Transparent mode: the listener's and the stub's sockets, made here and
 * passed to the supervisor one message each: the IPv4 listener, the stub,
 * and the IPv6 listener when the namespace has IPv6. The redirect is
 * loaded before they leave. */
static void hand_over_transparent(const struct init_ctx *c)
{
	char err[256];
	int lfd[2], stub;

	if (transparent_sandbox_prepare(lfd, &stub, err, sizeof(err)) < 0) {
		errno = 0;
		init_fail(c, "transparent mode: %s", err);
	}
	send_socket(c, MSG_SANDBOX_SOCK_TLISTEN4, true, lfd[0]);
	send_socket(c, MSG_SANDBOX_SOCK_STUB, lfd[1] >= 0, stub);
	if (lfd[1] >= 0)
		send_socket(c, MSG_SANDBOX_SOCK_TLISTEN6, false, lfd[1]);
	close(lfd[0]);
	close(stub);
	if (lfd[1] >= 0)
		close(lfd[1]);
}

/* publish: the descriptors of init's user and network namespaces, as
 * one message "N", for the relay (publish.c) to make its connections to
 * the sandbox's loopback in. A namespace descriptor grants nothing by
 * itself: joining it takes CAP_SYS_ADMIN over it, which the supervisor's
 * side has as the creator of the user namespace. */
static void hand_over_ns(const struct init_ctx *c)
{
	char cbuf[CMSG_SPACE(2 * sizeof(int))], tag = 'N';
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	int fds[2];

	fds[0] = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	fds[1] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0 || fds[1] < 0)
		init_fail(c, "opening the namespaces' descriptors");
	memset(&msg, 0, sizeof(msg));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = &tag;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	if (sendmsg(c->ctl_fd, &msg, MSG_NOSIGNAL) < 0)
		init_fail(c, "passing the namespaces' descriptors");
	close(fds[0]);
	close(fds[1]);
}

/* @path (absolute, inside the view) with "." and ".." components and
 * duplicate slashes resolved lexically, never above the view's root. */
static void view_path_clean(char *path)
{
	char out[PATH_MAX], *save = NULL, *part;
	size_t len = 0;

	out[0] = '\0';
	for (part = strtok_r(path, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		size_t n = strlen(part);

		if (strcmp(part, ".") == 0)
			continue;
		if (strcmp(part, "..") == 0) {
			while (len > 0 && out[len - 1] != '/')
				len--;
			if (len > 0)
				len--;
			out[len] = '\0';
			continue;
		}
		ASSERT(len + 1 + n < sizeof(out));
		out[len++] = '/';
		memcpy(out + len, part, n + 1);
		len += n;
	}
	if (len == 0)
		snprintf(out, sizeof(out), "/");
	memcpy(path, out, strlen(out) + 1);
}

/* Transparent mode: the view's /etc/resolv.conf names the stub. A file on
 * the staging tmpfs is bound over it read-only; where the host's is a
 * symbolic link, over what it points to inside the view (which must be
 * shown: a target in a hidden directory is refused with a line saying
 * how to show it). */
static void bind_resolv_conf(const struct init_ctx *c)
{
	char text[512], path[PATH_MAX], link[PATH_MAX], tmp[2 * PATH_MAX];
	char where[PATH_MAX + 16];
	struct transparent_config tc;
	struct stat st;
	int fd, hops;

	transparent_config_default(&tc, 1);
	if (!transparent_resolv_conf(&tc.stub, text, sizeof(text)))
		init_fail(c, "transparent mode: resolv.conf");
	fd = open("/resolv.conf", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0 || util_write_all(fd, text, strlen(text)) < 0)
		init_fail(c, "transparent mode: writing resolv.conf");
	close(fd);
	/* path is inside the view; where is the same below NEW. */
	snprintf(path, sizeof(path), "/etc/resolv.conf");
	for (hops = 0;; hops++) {
		ssize_t n;

		snprintf(where, sizeof(where), NEW "%s", path);
		if (lstat(where, &st) < 0 || !S_ISLNK(st.st_mode))
			break;
		n = readlink(where, link, sizeof(link) - 1);
		if (n <= 0 || hops >= 8)
			init_fail(c, "transparent mode: /etc/resolv.conf is a symbolic "
				  "link that does not resolve");
		link[n] = '\0';
		if (link[0] == '/') {
			snprintf(tmp, sizeof(tmp), "%s", link);
		} else {
			char *slash = strrchr(path, '/');

			ASSERT(slash);
			slash[1] = '\0';
			snprintf(tmp, sizeof(tmp), "%s%s", path, link);
		}
		if (strlen(tmp) >= sizeof(path))
			init_fail(c, "transparent mode: /etc/resolv.conf: link too long");
		memcpy(path, tmp, strlen(tmp) + 1);
		view_path_clean(path);
	}
	if (lstat(where, &st) < 0 || !S_ISREG(st.st_mode)) {
		errno = 0;
		init_fail(c, "transparent mode: /etc/resolv.conf is %s, which the "
			  "sandbox does not show as a file (list its directory in "
			  "fs.ro)", path);
	}
	if (mount("/resolv.conf", where, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, where, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0)
		init_fail(c, "transparent mode: binding %s", path);
}

static void bind_dev_node(const struct init_ctx *c, const char *name)
{
	char src[64], dst[64];
	int fd;

	snprintf(src, sizeof(src), OLD "/dev/%s", name);
	snprintf(dst, sizeof(dst), NEW "/dev/%s", name);
	fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
	if (fd < 0)
		init_fail(c, "creating %s", dst);
	close(fd);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		init_fail(c, "binding /dev/%s", name);
}

static void make_dev(const struct init_ctx *c)
{
	static const char *const nodes[] = { "null", "zero", "full", "random",
					     "urandom", "tty" };
	static const char *const links[][2] = {
		{ "/proc/self/fd", NEW "/dev/fd" },
		{ "/proc/self/fd/0", NEW "/dev/stdin" },
		{ "/proc/self/fd/1", NEW "/dev/stdout" },
		{ "/proc/self/fd/2", NEW "/dev/stderr" },
		{ "pts/ptmx", NEW "/dev/ptmx" },
	};
	size_t i;

	if (mount("airlock-dev", NEW "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
		  "mode=0755") < 0)
		init_fail(c, "mounting /dev");
	for (i = 0; i < ARRAY_SIZE(nodes); i++)
		bind_dev_node(c, nodes[i]);
	for (i = 0; i < ARRAY_SIZE(links); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			init_fail(c, "creating %s", links[i][1]);
	if (mkdir(NEW "/dev/pts", 0755) < 0 || mkdir(NEW "/dev/shm", 01777) < 0)
		init_fail(c, "creating /dev/pts and /dev/shm");
	if (mount("devpts", NEW "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		init_fail(c, "mounting /dev/pts");
	if (mount("airlock-shm", NEW "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=01777") < 0)
		init_fail(c, "mounting /dev/shm");
}

/* The kernel knobs under the fresh /proc: writable for uid 0 inside (a
 * root caller) whatever its capabilities, so read-only, as bubblewrap
 * does; Landlock is not relied on for this. */
static void proc_read_only(const struct init_ctx *c)
{
	static const char *const knobs[] = { "sys", "sysrq-trigger", "irq", "bus" };
	char path[64];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(knobs); i++) {
		snprintf(path, sizeof(path), NEW "/proc/%s", knobs[i]);
		if (access(path, F_OK) < 0)
			continue;
		if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID |
			  MS_NODEV | MS_NOEXEC, NULL) < 0)
			init_fail(c, "making /proc/%s read-only", knobs[i]);
	}
}

/* The CA bundle the agent trusts (the session CA among the system's),
 * written on the staging tmpfs and bound read-only over the system
 * bundle's path, so that clients reading no variable trust it too. A host
 * without that file keeps its own (the variables name the path anyway). */
static void show_ca_bundle(const struct init_ctx *c)
{
	struct mount_attr attr;
	struct stat st;
	size_t done = 0;
	int fd;

	if (!c->cfg->ca_bundle || stat(NEW TLS_SYSTEM_BUNDLE, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return;
	fd = open("/ca-bundle.crt", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
	if (fd < 0)
		init_fail(c, "creating the CA bundle");
	while (done < c->cfg->ca_bundle_len) {
		ssize_t n = write(fd, c->cfg->ca_bundle + done, c->cfg->ca_bundle_len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			init_fail(c, "writing the CA bundle");
		done += (size_t)n;
	}
	close(fd);
	if (mount("/ca-bundle.crt", NEW TLS_SYSTEM_BUNDLE, NULL, MS_BIND, NULL) < 0)
		init_fail(c, "binding the CA bundle");
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (mount_setattr(AT_FDCWD, NEW TLS_SYSTEM_BUNDLE, 0, &attr, sizeof(attr)) < 0)
		init_fail(c, "making the CA bundle read-only");
}

static void build_root(const struct init_ctx *c)
{
	struct mount_attr attr;
	char msg[512];
	int fd;

	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		init_fail(c, "making mounts private");
	/* A staging tmpfs becomes our root; the host root moves to OLD. */
	if (mount("airlock-root", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		init_fail(c, "mounting the staging tmpfs");
	if (chdir("/tmp") < 0 || mkdir("newroot", 0755) < 0 ||
	    mkdir("oldroot", 0755) < 0)
		init_fail(c, "preparing the staging tmpfs");
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0)
		init_fail(c, "pivot_root to the staging tmpfs");
	if (chdir("/") < 0)
		init_fail(c, "chdir /");
	/* An empty, unreadable file to mask files with. */
	fd = open("/hidden", O_CREAT | O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0)
		init_fail(c, "creating the mask file");
	close(fd);

	/* The host root, recursively and read-only, without setuid or
	 * device files. */
	if (mount(OLD, NEW, NULL, MS_BIND | MS_REC, NULL) < 0)
		init_fail(c, "binding the host root");
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (mount_setattr(AT_FDCWD, NEW, AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		init_fail(c, "making the host root read-only");

	if (mount("proc", NEW "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		init_fail(c, "mounting /proc");
	proc_read_only(c);
	make_dev(c);
	/* The rest: hidden paths, private /tmp, /var/tmp and $HOME, the
	 * workspace, fs.* and the protected repository files, airlock's own
	 * files (view.c). */
	if (view_apply(c->view, NEW, OLD, "/hidden", msg, sizeof(msg)) < 0) {
		errno = 0;
		init_fail(c, "%s", msg);
	}
	if (c->cfg->transparent)
		bind_resolv_conf(c);
	show_ca_bundle(c);

	/* Enter the view and drop the host root and the staging tmpfs. */
	if (chdir(NEW) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		init_fail(c, "entering the sandbox root");
}

/* struct landlock_ruleset_attr as of ABI 6, whatever the headers have. */
struct ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

/* Landlock: writes only beneath the writable paths of the view and /dev.
 * Reads are left to the read-only mounts. From ABI 6 the agent is also
 * scoped: no signal to a process outside its domain (init, the gate's
 * workers) and no abstract unix socket made outside it. Returns the ABI
 * applied (0: kernel without Landlock). */
static int apply_landlock(const struct view_plan *view)
{
	struct ruleset_attr ra;
	struct landlock_path_beneath_attr pb;
	const char **paths;
	size_t i, n;
	long abi;
	int rfd;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
		      LANDLOCK_CREATE_RULESET_VERSION);
	if (abi <= 0)
		return 0;
	memset(&ra, 0, sizeof(ra));
	ra.handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE |
			       LANDLOCK_ACCESS_FS_REMOVE_DIR |
			       LANDLOCK_ACCESS_FS_REMOVE_FILE |
			       LANDLOCK_ACCESS_FS_MAKE_CHAR |
			       LANDLOCK_ACCESS_FS_MAKE_DIR |
			       LANDLOCK_ACCESS_FS_MAKE_REG |
			       LANDLOCK_ACCESS_FS_MAKE_SOCK |
			       LANDLOCK_ACCESS_FS_MAKE_FIFO |
			       LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			       LANDLOCK_ACCESS_FS_MAKE_SYM;
	if (abi >= 2)
		ra.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		ra.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	/* The network namespace stands in for Landlock's network rights. */
	ra.handled_access_net = 0;
	if (abi >= 6)
		ra.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	rfd = (int)syscall(SYS_landlock_create_ruleset, &ra,
			   abi >= 6 ? sizeof(ra) : abi >= 4 ? 2 * sizeof(uint64_t)
							 : sizeof(uint64_t), 0);
	if (rfd < 0)
		return -errno;
	pb.allowed_access = ra.handled_access_fs;
	n = view_writable(view, NULL, 0);
	paths = util_xcalloc(n + 1, sizeof(*paths));
	paths[0] = "/dev";
	view_writable(view, paths + 1, n);
	for (i = 0; i < n + 1; i++) {
		int fd = open(paths[i], O_PATH | O_CLOEXEC);

		if (fd < 0)
			continue;
		pb.parent_fd = fd;
		/* A file (not a directory) accepts only file rights. */
		if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH,
			    &pb, 0) < 0) {
			struct landlock_path_beneath_attr fpb = pb;

			fpb.allowed_access &= LANDLOCK_ACCESS_FS_WRITE_FILE |
					      LANDLOCK_ACCESS_FS_TRUNCATE;
			(void)syscall(SYS_landlock_add_rule, rfd,
				      LANDLOCK_RULE_PATH_BENEATH, &fpb, 0);
		}
		close(fd);
	}
	free(paths);
	if (syscall(SYS_landlock_restrict_self, rfd, 0) < 0) {
		int err = errno;

		close(rfd);
		return -err;
	}
	close(rfd);
	return (int)abi;
}

static int drop_capabilities(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	unsigned long cap;

	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	/* uid 0 inside (when the caller is root) must not regain anything
	 * on exec. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
		  SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
		  SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
		  SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) < 0)
		return -errno;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

/* Once the gate holds a call, only a fatal signal may interrupt the
 * caller (WAIT_KILLABLE_RECV, Linux 5.19): a call the gate performed is
 * never restarted and performed again. Older kernels load without it. */
int sandbox_filter_load(void)
{
	struct sock_fprog prog = {
		.len = sandbox_filter_len,
		.filter = (struct sock_filter *)sandbox_filter,
	};
	long fd;

	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		     SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
		     &prog);
	if (fd < 0 && errno == EINVAL)
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			     SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	return fd < 0 ? -errno : (int)fd;
}

__attribute__((noreturn)) static void exec_agent(const struct init_ctx *c)
{
	extern char **environ;
	struct usock_handoff handoff;
	int err, r;

	if (setsid() < 0)
		goto fail;
	/* Only 0-2 and the exec error pipe (already close-on-exec) survive. */
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	if (chdir(c->cfg->workspace) < 0)
		goto fail;
	r = apply_landlock(c->view);
	if (r < 0) {
		errno = -r;
		goto fail;
	}
	r = drop_capabilities();
	if (r < 0) {
		errno = -r;
		goto fail;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto fail;
	r = usock_handoff_start(&handoff, c->gate_fd);
	if (r < 0) {
		errno = -r;
		goto fail;
	}
	r = usock_handoff_finish(&handoff, sandbox_filter_load());
	if (r < 0) {
		errno = -r;
		goto fail;
	}
	close(c->gate_fd);
	/* execvp searches the PATH of environ: make it the agent's. */
	environ = c->cfg->envp;
	execvp(c->cfg->argv[0], c->cfg->argv);
fail:
	err = errno;
	(void)util_write_all(c->exec_fd, &err, sizeof(err));
	_exit(EXIT_CANNOT_EXEC);
}

/* PID 1: serves the unix-socket gate, waits for the agent, reaps orphans
 * (and the gate's workers), forwards termination signals, and exits with
 * the agent's status (which kills the namespace). @sfd reads the session
 * signals; @gate is NULL if the agent ended before loading its filter. */
__attribute__((noreturn)) static void init_loop(pid_t agent, int sfd,
						struct usock_gate *gate)
{
	struct pollfd p[2];
	int status = 0;

	p[0].fd = sfd;
	p[0].events = POLLIN;
	p[1].fd = gate ? usock_gate_fd(gate) : -1;
	p[1].events = POLLIN;
	for (;;) {
		struct signalfd_siginfo si;
		pid_t pid;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			util_die_errno(EXIT_AIRLOCK_FAILURE, "sandbox init: poll");
		}
		if (p[1].revents & POLLIN) {
			int r = usock_gate_serve(gate);

			if (r < 0) {
				/* The agent's calls would hang: end the session. */
				kill(agent, SIGKILL);
				util_die(EXIT_AIRLOCK_FAILURE, "sandbox: the unix-socket gate "
					 "failed: %s", strerror(-r));
			}
		} else if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			p[1].fd = -1; /* no process is left under the filter */
		}
		if (!(p[0].revents & POLLIN))
			continue;
		if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			kill(agent, (int)si.ssi_signo);
			continue;
		}
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			if (pid == agent)
				_exit(util_wait_status(status));
			if (gate)
				(void)usock_gate_reaped(gate, pid, status);
		}
	}
}

/* The agent's descriptors 0-2 (pipes where the caller's are files) take
 * the place of the caller's own here already, so that no process of the
 * sandbox ever holds those. */
static void take_stdio(const struct init_ctx *c)
{
	const int *fds = c->cfg->stdio;
	int i, j;

	for (i = 0; i < 3; i++) {
		ASSERT(fds[i] == -1 || fds[i] > 2);
		if (fds[i] >= 0 && dup2(fds[i], i) < 0)
			init_fail(c, "replacing descriptor %d", i);
	}
	for (i = 0; i < 3; i++) {
		for (j = 0; j < i && fds[j] != fds[i]; j++)
			;
		if (fds[i] >= 0 && j == i)
			close(fds[i]);
	}
}

__attribute__((noreturn)) static void init_main(struct init_ctx *c)
{
	struct usock_gate *gate = NULL;
	int sfd, gate_pair[2], listener;
	sigset_t set;
	char go;
	pid_t agent;

	if (c->cfg->scrub)
		c->cfg->scrub(c->cfg->scrub_arg);
	take_stdio(c);
	/* The supervisor is not dumpable, so neither is this copy of it, and
	 * the /proc files of a non-dumpable process belong to root: an
	 * unprivileged supervisor could not write our id maps. Nothing secret
	 * is left in this memory now; dumpable again until the maps are
	 * written. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		init_fail(c, "PR_SET_DUMPABLE");
	{
		struct msg m = { 0 };

		msg_start(&m, MSG_SANDBOX_READY);
		if (msg_send(c->ctl_fd, &m, -1, 0) < 0)
			_exit(EXIT_AIRLOCK_FAILURE);
		msg_free(&m);
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		init_fail(c, "PR_SET_PDEATHSIG");
	/* The supervisor writes our id maps, then one byte. EOF means it
	 * died before (PDEATHSIG may have been set too late to fire). */
	if (read(c->sync_fd, &go, 1) != 1)
		_exit(EXIT_AIRLOCK_FAILURE);
	close(c->sync_fd);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		init_fail(c, "PR_SET_DUMPABLE");
	if (sethostname("airlock", 7) < 0)
		init_fail(c, "sethostname");
	loopback_up(c);
	hand_over_proxy_socket(c);
	if (c->cfg->transparent)
		hand_over_transparent(c);
	if (c->cfg->pass_ns)
		hand_over_ns(c);
	build_root(c);

	util_session_sigset(&set);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		init_fail(c, "sigprocmask");
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		init_fail(c, "signalfd");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate_pair) < 0)
		init_fail(c, "creating the gate's channel");
	agent = fork();
	if (agent < 0)
		init_fail(c, "fork");
	if (agent == 0) {
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		close(sfd);
		close(gate_pair[0]);
		close(c->ctl_fd);
		c->gate_fd = gate_pair[1];
		exec_agent(c);
	}
	close(gate_pair[1]);
	/* The agent hands over its filter's listener just before exec; EOF
	 * means it failed before (it reports why over the exec pipe). */
	listener = usock_handoff_receive(gate_pair[0]);
	close(gate_pair[0]);
	if (listener >= 0) {
		char err[256];

		gate = usock_gate_new(listener, c->cfg->rw, c->cfg->nrw, err, sizeof(err));
		if (!gate) {
			errno = 0;
			init_fail(c, "%s", err);
		}
	} else if (listener != -EPIPE) {
		errno = -listener;
		init_fail(c, "receiving the seccomp listener");
	}
	/* Setup is over: closing the control socket tells the supervisor. */
	close(c->ctl_fd);
	close(c->exec_fd);
	init_loop(agent, sfd, gate);
}

static int write_id_maps(pid_t pid, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	char path[64], map[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
	r = write_file(path, map);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
		r = write_file(path, "deny");
	}
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
		snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
		r = write_file(path, map);
	}
	if (r < 0)
		snprintf(err, errlen, "writing the sandbox's id maps: %s", strerror(-r));
	return r;
}

/* Receives init's next message, which must be @want: MSG_SANDBOX_READY,
 * or MSG_SANDBOX_SOCKET (its role and more flag in @role and @more, its
 * socket in *@fd); 0 wants none. Init's MSG_FATAL, or
 * anything else, is an error in @err. */
static int from_init(int ctl, uint32_t want, uint32_t *role, uint32_t *more,
		     int *fd, char *err, size_t errlen)
{
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg_reader r;
	const char *reason;
	uint32_t ro = 0, mo = 0;
	int rfd = -1, ret = -1;
	ssize_t n;

	do
		n = msg_recv(ctl, buf, MSG_MAX, &rfd, 0);
	while (n == -EINTR);
	if (n <= 0 || !msg_reader_init(&r, MSG_CHAN_SANDBOX, buf, (size_t)n)) {
		snprintf(err, errlen, "the sandbox ended during setup");
		goto out;
	}
	if (r.type == MSG_FATAL) {
		if (msg_get_str(&r, 511, &reason, NULL) && msg_end(&r))
			snprintf(err, errlen, "%s", reason);
		else
			snprintf(err, errlen, "the sandbox sent a bad message: %s", r.error);
		goto out;
	}
	if (r.type != want ||
	    (want == MSG_SANDBOX_SOCKET &&
	     (!msg_get_u32(&r, &ro) || !msg_get_u32(&r, &mo) || rfd < 0 || mo > 1)) ||
	    (want != MSG_SANDBOX_SOCKET && rfd >= 0) || !msg_end(&r)) {
		if (want == 0)
			snprintf(err, errlen, "the sandbox sent %s during its setup",
				 msg_type_to_string(r.type));
		else
			snprintf(err, errlen, "the sandbox sent %s where %s was due",
				 msg_type_to_string(r.type), msg_type_to_string(want));
		goto out;
	}
	if (role)
		*role = ro;
	if (more)
		*more = mo;
	if (fd) {
		*fd = rfd;
		rfd = -1;
	}
	ret = 0;
out:
	if (rfd >= 0)
		close(rfd);
	free(buf);
	return ret;
}

/* Waits for init's MSG_SANDBOX_READY: it is dumpable, so its id maps may
 * be written. */
static int wait_ready(int ctl, char *err, size_t errlen)
{
	return from_init(ctl, MSG_SANDBOX_READY, NULL, NULL, NULL, err, errlen);
}

/* Receives the proxy socket, or init's error line. */
static int receive_proxy_socket(int ctl, int *fd_out, char *err, size_t errlen)
{
	uint32_t role, more;

	if (from_init(ctl, MSG_SANDBOX_SOCKET, &role, &more, fd_out, err, errlen) < 0)
		return -1;
	if (role != MSG_SANDBOX_SOCK_PROXY || more) {
		close(*fd_out);
		*fd_out = -1;
		snprintf(err, errlen, "the sandbox sent no proxy socket");
		return -1;
	}
	return 0;
}

/* Transparent mode: receives init's sockets (hand_over_transparent)
 * into @sb, or its error line: the IPv4 listener, the stub, and the IPv6
 * listener when there is one, in that order. */
static int receive_transparent(int ctl, struct sandbox *sb, char *err, size_t errlen)
{
	static const uint32_t order[] = { MSG_SANDBOX_SOCK_TLISTEN4, MSG_SANDBOX_SOCK_STUB,
					  MSG_SANDBOX_SOCK_TLISTEN6 };
	int *slot[] = { &sb->tlisten_fd[0], &sb->stub_fd, &sb->tlisten_fd[1] };
	uint32_t role, more = 1;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(order) && more; i++) {
		if (from_init(ctl, MSG_SANDBOX_SOCKET, &role, &more, slot[i], err, errlen) < 0)
			return -1;
		if (role != order[i] || (i == 0 && !more) || (i == 2 && more)) {
			snprintf(err, errlen, "the sandbox sent a wrong transparent mode socket");
			return -1;
		}
	}
	return 0;
}

/* publish: receives init's "N" message (hand_over_ns) into @sb. */
static int receive_ns(int ctl, struct sandbox *sb, char *err, size_t errlen)
{
	char buf[512], cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	ssize_t r;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf) - 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	do
		r = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		snprintf(err, errlen, "the sandbox ended during setup");
		return -1;
	}
	buf[r] = '\0';
	if (buf[0] == 'E') {
		snprintf(err, errlen, "%s", buf + 1);
		return -1;
	}
	cm = CMSG_FIRSTHDR(&msg);
	if (r != 1 || buf[0] != 'N' || !cm || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
		snprintf(err, errlen, "the sandbox sent no namespace descriptors");
		return -1;
	}
	memcpy(sb->ns_fd, CMSG_DATA(cm), 2 * sizeof(int));
	return 0;
}

static void close_transparent(struct sandbox *sb)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (sb->ns_fd[i] >= 0)
			close(sb->ns_fd[i]);
		sb->ns_fd[i] = -1;
	}
	if (sb->tlisten_fd[0] >= 0)
		close(sb->tlisten_fd[0]);
	if (sb->tlisten_fd[1] >= 0)
		close(sb->tlisten_fd[1]);
	if (sb->stub_fd >= 0)
		close(sb->stub_fd);
	sb->tlisten_fd[0] = sb->tlisten_fd[1] = sb->stub_fd = -1;
	sb->ns_fd[0] = sb->ns_fd[1] = -1;
}

/* Waits for init to finish setup: the control socket closes (EOF) when the
 * agent has been forked, or carries init's MSG_FATAL. */
static int wait_setup(int ctl, char *err, size_t errlen)
{
	uint8_t probe;
	ssize_t n;

	do
		n = recv(ctl, &probe, 1, MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n < 0) {
		snprintf(err, errlen, "sandbox setup: %s", strerror(errno));
		return -1;
	}
	return from_init(ctl, 0, NULL, NULL, NULL, err, errlen) < 0 ? -1 : 0;
}

int sandbox_start(const struct sandbox_config *cfg, struct sandbox *sb,
		  char *err, size_t errlen)
{
	int sync[2] = { -1, -1 }, ctl[2] = { -1, -1 }, ex[2] = { -1, -1 };
	struct view_plan view;
	struct init_ctx c;
	pid_t pid;
	int ret = -1;

	memset(sb, 0, sizeof(*sb));
	sb->init_pid = -1;
	sb->proxy_fd = -1;
	sb->tlisten_fd[0] = sb->tlisten_fd[1] = sb->stub_fd = -1;
	sb->ns_fd[0] = sb->ns_fd[1] = -1;
	sb->exec_err_fd = -1;
	if (view_plan_build(cfg, &view, err, errlen) < 0)
		goto out;
	if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
		snprintf(err, errlen, "creating sandbox channels: %s", strerror(errno));
		goto out;
	}
	c.cfg = cfg;
	c.sync_fd = sync[0];
	c.ctl_fd = ctl[1];
	c.exec_fd = ex[1];
	c.view = &view;
	c.uid = getuid();
	c.gid = getgid();

	pid = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		snprintf(err, errlen, "creating the sandbox namespaces: %s "
			 "(see 'airlock doctor')", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(sync[1]);
		close(ctl[0]);
		close(ex[0]);
		init_main(&c);
	}
	sb->init_pid = pid;
	close(sync[0]);
	sync[0] = -1;
	close(ctl[1]);
	ctl[1] = -1;
	close(ex[1]);
	ex[1] = -1;
	if (wait_ready(ctl[0], err, errlen) < 0 ||
	    write_id_maps(pid, c.uid, c.gid, err, errlen) < 0)
		goto kill;
	if (util_write_all(sync[1], "g", 1) < 0) {
		snprintf(err, errlen, "starting the sandbox: %s", strerror(errno));
		goto kill;
	}
	if (receive_proxy_socket(ctl[0], &sb->proxy_fd, err, errlen) < 0)
		goto kill;
	if (cfg->transparent && receive_transparent(ctl[0], sb, err, errlen) < 0)
		goto kill;
	if (cfg->pass_ns && receive_ns(ctl[0], sb, err, errlen) < 0)
		goto kill;
	if (wait_setup(ctl[0], err, errlen) < 0)
		goto kill;
	sb->exec_err_fd = ex[0];
	ex[0] = -1;
	sb->landlock_abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
					LANDLOCK_CREATE_RULESET_VERSION);
	if (sb->landlock_abi < 0)
		sb->landlock_abi = 0;
	ret = 0;
	goto out;
kill:
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	sb->init_pid = -1;
	if (sb->proxy_fd >= 0)
		close(sb->proxy_fd);
	sb->proxy_fd = -1;
	close_transparent(sb);
out:
	if (sync[0] >= 0)
		close(sync[0]);
	if (sync[1] >= 0)
		close(sync[1]);
	if (ctl[0] >= 0)
		close(ctl[0]);
	if (ctl[1] >= 0)
		close(ctl[1]);
	if (ex[0] >= 0)
		close(ex[0]);
	if (ex[1] >= 0)
		close(ex[1]);
	view_plan_free(&view);
	return ret;
}

int sandbox_exit_status(struct sandbox *sb, int wstatus, int *exec_errno)
{
	int e = 0;
	ssize_t n = -1;

	*exec_errno = 0;
	if (sb->exec_err_fd >= 0) {
		do
			n = read(sb->exec_err_fd, &e, sizeof(e));
		while (n < 0 && errno == EINTR);
	}
	if (n == (ssize_t)sizeof(e) && e != 0) {
		*exec_errno = e;
		return util_exec_status(e);
	}
	return util_wait_status(wstatus);
}

void sandbox_release(struct sandbox *sb)
{
	if (sb->proxy_fd >= 0)
		close(sb->proxy_fd);
	if (sb->exec_err_fd >= 0)
		close(sb->exec_err_fd);
	sb->proxy_fd = -1;
	sb->exec_err_fd = -1;
	close_transparent(sb);
}
