/* SPDX-License-Identifier: Apache-2.0
 * confine.c - seccomp allowlists for the key holder and the proxy workers.
 *
 * DOC: Theory of Operation
 *
 * A proxy worker parses the agent's HTTP and TLS: it is the process an
 * attacker reaches first, and it must be worth as little as possible once
 * taken over. The key holder takes requests from workers and holds the
 * keys. Both do a small, fixed job, so each gets an allowlist: only the
 * calls that job needs, with arguments checked where a call has a
 * harmless and a harmful use. Everything else fails with EPERM. The agent's
 * own filter (sandbox.c) is the opposite, a denylist, because the agent
 * runs arbitrary programs.
 *
 * Should (both): read and write descriptors it already holds, send and
 * receive on its channels, allocate memory, tell the time, open files
 * read-only (libraries read their configuration lazily), exit.
 * Should (worker): create TCP and UDP sockets over IPv4 and IPv6, connect,
 * accept on the listening socket it was given, splice through pipes.
 * Should (feed, the live feed's process): the same clients as a worker
 * (TCP to the collector and the witness, whose addresses it resolved
 * before its filter), start threads of its own; and open no file at all.
 *
 * Mustn't: execve/execveat (the filter is the only thing between a
 * hijacked worker and a shell); open a file for writing, create, truncate,
 * rename, link, unlink, chmod or chown anything (no new files: the stream
 * is written by the key holder, through a descriptor opened before its
 * filter); create any other socket (unix sockets would reach the host's
 * daemons; raw and packet sockets the network); listen or bind; ptrace or
 * process_vm_*; signal another process (tgkill only to itself, for
 * abort()); fork or clone; mount, pivot_root, unshare, setns; bpf, perf,
 * keyctl, io_uring, userfaultfd; map or remap memory executable (no new
 * code at run time); prctl beyond naming itself and reading its
 * dumpable flag (so it cannot make itself dumpable again); raise a
 * resource limit.
 *
 * Read-only opens are allowed because libraries read files lazily; which
 * files is limited by Landlock to a short list the caller gives (for a
 * worker: resolv.conf, the hosts and nsswitch files, OpenSSL's
 * configuration and trust store): a read-only open of anything else, the
 * signing key file above all, fails with EACCES even when the process
 * runs as root. Capabilities are dropped first, so root's DAC override
 * does not matter either.
 *
 * Arguments that live in memory cannot be checked by seccomp: openat2's
 * flags (refused outright, so libc uses openat, whose flags are checked)
 * and clone3's (not allowed at all).
 */
#include "confine.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/prctl.h>
#include <sched.h>
#include <openssl/x509.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "util.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

static const char *const profile_names[] = {
	[CONFINE_KEEPER] = "keeper",
	[CONFINE_WORKER] = "worker",
	[CONFINE_LEDGER] = "ledger",
	[CONFINE_SUPERVISOR] = "supervisor",
	[CONFINE_FEED] = "feed",
	[CONFINE_MINT] = "mint",
};
static_assert(ARRAY_SIZE(profile_names) == CONFINE_PROFILE_COUNT,
	      "profile_names matches enum confine_profile");

const char *confine_profile_to_string(enum confine_profile p)
{
	ASSERT((unsigned)p < CONFINE_PROFILE_COUNT);
	return profile_names[p];
}

/* Allowed without looking at their arguments. Names, not numbers: a name
 * this architecture lacks (open on arm64) is skipped. */
static const char *const common_calls[] = {
	"read", "readv", "pread64", "write", "writev", "lseek", "close",
	"fstat", "newfstatat", "statx", "fcntl", "getdents64",
	"brk", "munmap", "mremap", "madvise",
	"futex", "getrandom", "clock_gettime", "clock_getres", "gettimeofday",
	"nanosleep", "clock_nanosleep",
	"rt_sigreturn", "rt_sigprocmask", "rt_sigaction", "sigaltstack",
	"restart_syscall", "exit", "exit_group",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
	"sched_yield", "sched_getaffinity", "uname", "sysinfo",
	"poll", "ppoll", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "epoll_pwait2",
	"recvmsg", "sendmsg", "recvfrom", "sendto",
	"fsync", "fdatasync",
};

static const char *const worker_calls[] = {
	"connect", "accept4", "accept", "setsockopt", "getsockopt",
	"getsockname", "getpeername", "shutdown", "splice", "pipe2",
	"recvmmsg", "sendmmsg",
};

/* The ledger process: SQLite's file calls (its -wal and -shm files, locks
 * by fcntl, which is common) and libpq's socket calls. */
static const char *const ledger_calls[] = {
	"connect", "setsockopt", "getsockopt", "getsockname", "getpeername",
	"shutdown", "pwrite64", "pwritev", "ftruncate", "fallocate", "unlink",
	"unlinkat", "fchmod", "fchown", "readlink", "readlinkat", "lstat", "stat",
	"access", "faccessat", "faccessat2", "getcwd", "flock",
};

/* The mint process: one HTTPS client at a time, its resolver's UDP. */
static const char *const mint_calls[] = {
	"connect", "setsockopt", "getsockopt", "getsockname", "getpeername",
	"shutdown",
};

/* The supervisor after start-up: its children (wait, signal), the memfd
 * of a reloaded policy, the HTTPS client of the GitLab mint and the OAuth
 * refresh (sockets are checked below), the files libraries look at. */
static const char *const supervisor_calls[] = {
	"wait4", "waitid", "kill", "pidfd_open", "pidfd_send_signal",
	"memfd_create", "ftruncate", "connect", "setsockopt", "getsockopt",
	"getsockname", "getpeername", "shutdown", "pipe2", "dup", "dup3",
	"readlink", "readlinkat", "lstat", "stat", "access", "faccessat",
	"faccessat2", "getcwd", "statfs", "fstatfs", "getrusage",
	"rt_sigtimedwait", "rt_sigpending", "setitimer", "alarm",
};

/* The live feed: its clients of the collector and the witness (sockets
 * are checked below), its threads' set-up. */
static const char *const feed_calls[] = {
	"connect", "setsockopt", "getsockopt", "getsockname", "getpeername",
	"shutdown", "set_robust_list", "rseq",
};

/* Adds @name with @n argument comparisons; a name unknown here is no
 * error. */
static int allow(scmp_filter_ctx ctx, const char *name, unsigned n,
		 const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, n, cmp);
}

static int allow_list(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
	size_t i;
	int r = 0;

	for (i = 0; i < n && r == 0; i++)
		r = allow(ctx, names[i], 0, NULL);
	return r;
}

/* The calls allowed only with some arguments. */
static int allow_checked(scmp_filter_ctx ctx, enum confine_profile p)
{
	/* Read-only opens: no write access, no O_CREAT, O_TRUNC (Linux
	 * truncates even with O_RDONLY) or O_TMPFILE. */
	const scmp_datum_t open_bad = O_ACCMODE | O_CREAT | O_TRUNC |
				      (O_TMPFILE & ~O_DIRECTORY);
	const struct scmp_arg_cmp openat_ro = SCMP_A2(SCMP_CMP_MASKED_EQ, open_bad, 0);
	const struct scmp_arg_cmp open_ro = SCMP_A1(SCMP_CMP_MASKED_EQ, open_bad, 0);
	const struct scmp_arg_cmp no_exec = SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	/* prlimit64(pid, resource, new = NULL, old): reading only. */
	const struct scmp_arg_cmp get_only[] = {
		SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0),
	};
	const struct scmp_arg_cmp to_self = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
	static const unsigned long prctl_ok[] = { PR_SET_NAME, PR_GET_NAME,
						  PR_GET_DUMPABLE };
	static const unsigned long ioctl_ok[] = { TCGETS, FIONREAD, FIONBIO };
	static const int families[] = { AF_INET, AF_INET6 };
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	size_t i;
	int r = 0;

	if (p == CONFINE_LEDGER) {
		/* Files are limited by Landlock: the ledger's directory only
		 * for writing. */
		r |= allow(ctx, "openat", 0, NULL);
		r |= allow(ctx, "open", 0, NULL);
	} else if (p == CONFINE_FEED) {
		/* No file at all; threads only: a clone that makes no
		 * thread (a fork) is refused, and clone3, whose flags are in
		 * memory, says ENOSYS so that libc uses clone. */
		const struct scmp_arg_cmp thread = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD,
							   CLONE_THREAD);
		int nr = seccomp_syscall_resolve_name("clone3");

		r |= allow(ctx, "clone", 1, &thread);
		if (nr != __NR_SCMP_ERROR)
			r |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	} else {
		r |= allow(ctx, "openat", 1, &openat_ro);
		r |= allow(ctx, "open", 1, &open_ro);
	}
	r |= allow(ctx, "mmap", 1, &no_exec);
	r |= allow(ctx, "mprotect", 1, &no_exec);
	r |= allow(ctx, "prlimit64", 2, get_only);
	r |= allow(ctx, "tgkill", 1, &to_self);
	for (i = 0; i < ARRAY_SIZE(prctl_ok); i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, prctl_ok[i]);

		r |= allow(ctx, "prctl", 1, &c);
	}
	for (i = 0; i < ARRAY_SIZE(ioctl_ok); i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu,
						ioctl_ok[i]);

		r |= allow(ctx, "ioctl", 1, &c);
	}
	if (p == CONFINE_LEDGER) {
		/* libpq: a unix socket or TCP to the server, UDP to resolve its
		 * name. The type without its flags: no raw sockets. */
		static const int lfam[] = { AF_UNIX, AF_INET, AF_INET6 };

		for (i = 0; i < ARRAY_SIZE(lfam); i++) {
			for (size_t j = 0; j < ARRAY_SIZE(types); j++) {
				const struct scmp_arg_cmp c[] = {
					SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)lfam[i]),
					SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
						(scmp_datum_t)types[j]),
				};

				r |= allow(ctx, "socket", 2, c);
			}
		}
	}
	if (p == CONFINE_WORKER || p == CONFINE_SUPERVISOR || p == CONFINE_FEED ||
	    p == CONFINE_MINT) {
		for (i = 0; i < ARRAY_SIZE(families); i++) {
			for (size_t j = 0; j < ARRAY_SIZE(types); j++) {
				/* The type without SOCK_NONBLOCK and
				 * SOCK_CLOEXEC: no raw sockets. */
				const struct scmp_arg_cmp c[] = {
					SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]),
					SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
						(scmp_datum_t)types[j]),
				};

				r |= allow(ctx, "socket", 2, c);
			}
		}
	}
	return r;
}

static const char *const client_reads[] = {
	"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
	"/etc/gai.conf", "/etc/ssl/openssl.cnf", "/etc/ssl/certs", "/usr/lib/ssl",
	"/usr/share/ca-certificates", "/usr/local/share/ca-certificates",
	"/etc/ca-certificates", "/dev/urandom",
};
static_assert(ARRAY_SIZE(client_reads) + CONFINE_CLIENT_OWNED_MAX == CONFINE_CLIENT_READS_MAX,
	      "CONFINE_CLIENT_READS_MAX");

/* Adds @path, resolved (Landlock checks the file a link leads to), to
 * @out and @own when it exists. */
static void add_real(const char *path, const char **out, size_t *n, char **own,
		     size_t *nown)
{
	char *real = path && *path ? realpath(path, NULL) : NULL;

	if (!real)
		return;
	out[(*n)++] = real;
	own[(*nown)++] = real;
}

/* The system trust store as OpenSSL will look for it (its default file and
 * directories, or SSL_CERT_FILE and SSL_CERT_DIR): a client context may
 * load it on its first handshake, once confined (tls.c). */
static void trust_paths(const char **out, size_t *n, char **own, size_t *nown)
{
	const char *file = getenv(X509_get_default_cert_file_env());
	const char *dirs = getenv(X509_get_default_cert_dir_env());
	char *copy, *d, *save = NULL;
	int k = 0;

	add_real(file ? file : X509_get_default_cert_file(), out, n, own, nown);
	copy = util_xstrdup(dirs ? dirs : X509_get_default_cert_dir());
	for (d = strtok_r(copy, ":", &save); d && k < CONFINE_TRUST_DIRS_MAX;
	     d = strtok_r(NULL, ":", &save), k++)
		add_real(d, out, n, own, nown);
	free(copy);
}

size_t confine_client_reads(const char **out, char **own, size_t *nown)
{
	size_t n = 0, i;
	char *real, *slash;

	for (i = 0; i < ARRAY_SIZE(client_reads); i++)
		out[n++] = client_reads[i];
	*nown = 0;
	real = realpath("/etc/resolv.conf", NULL);
	if (real && (slash = strrchr(real, '/')) && slash != real) {
		*slash = '\0';
		if (strcmp(real, "/etc") != 0) {
			own[(*nown)++] = real;
			out[n++] = real;
			real = NULL;
		}
	}
	free(real);
	trust_paths(out, &n, own, nown);
	return n;
}

bool confine_client_env(const char *entry)
{
	static const char *const names[] = { "SSL_CERT_FILE", "SSL_CERT_DIR",
					     "OPENSSL_CONF", "OPENSSL_MODULES",
					     "LOCALDOMAIN", "RES_OPTIONS",
					     "AIRLOCK_TEST_TIMEOUTS" };
	size_t i, n = strcspn(entry, "=");

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (strlen(names[i]) == n && strncmp(entry, names[i], n) == 0)
			return true;
	return false;
}

int confine_drop_capabilities(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	return (int)syscall(SYS_capset, &hdr, data);
}

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* Every filesystem right Landlock ABI @abi knows: all of them are
 * handled, so only what a rule grants is allowed. */
static uint64_t landlock_fs_rights(long abi)
{
	uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0-12 */

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

/* The rights below a read-write path of confine_self_rw(). */
static uint64_t rw_rights(long abi)
{
	uint64_t r = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
		     LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG |
		     LANDLOCK_ACCESS_FS_REMOVE_FILE;

	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	return r;
}

/* Returns 0 (also on a kernel without Landlock) or -errno. The @nrw
 * paths after the @n read-only ones are directories where files may be
 * written. */
static int restrict_paths(const char *const *paths, size_t n,
			  const char *const *rw, size_t nrw)
{
	struct landlock_ruleset_attr ra;
	long abi;
	size_t i;
	int rfd, ret = 0;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
		      LANDLOCK_CREATE_RULESET_VERSION);
	if (abi <= 0)
		return 0;
	memset(&ra, 0, sizeof(ra));
	ra.handled_access_fs = landlock_fs_rights(abi);
	rfd = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
	if (rfd < 0)
		return -errno;
	for (i = 0; i < n + nrw && ret == 0; i++) {
		struct landlock_path_beneath_attr pb;
		struct stat st;
		int fd = open(i < n ? paths[i] : rw[i - n], O_PATH | O_CLOEXEC);

		if (fd < 0)
			continue;
		memset(&pb, 0, sizeof(pb));
		pb.parent_fd = fd;
		pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			pb.allowed_access |= i < n ? LANDLOCK_ACCESS_FS_READ_DIR
						   : rw_rights(abi);
		if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH,
			    &pb, 0) < 0)
			ret = -errno;
		close(fd);
	}
	if (ret == 0 && syscall(SYS_landlock_restrict_self, rfd, 0) < 0)
		ret = -errno;
	close(rfd);
	return ret;
}

/* Builds and loads the seccomp filter of @p. */
static int load_filter(enum confine_profile p, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	int r = 0;

	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot build the %s filter",
			 profile_names[p]);
		return -1;
	}
	r |= seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	r |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	r |= allow_list(ctx, common_calls, ARRAY_SIZE(common_calls));
	if (p == CONFINE_WORKER)
		r |= allow_list(ctx, worker_calls, ARRAY_SIZE(worker_calls));
	if (p == CONFINE_LEDGER)
		r |= allow_list(ctx, ledger_calls, ARRAY_SIZE(ledger_calls));
	if (p == CONFINE_SUPERVISOR)
		r |= allow_list(ctx, supervisor_calls, ARRAY_SIZE(supervisor_calls));
	if (p == CONFINE_FEED)
		r |= allow_list(ctx, feed_calls, ARRAY_SIZE(feed_calls));
	if (p == CONFINE_MINT)
		r |= allow_list(ctx, mint_calls, ARRAY_SIZE(mint_calls));
	r |= allow_checked(ctx, p);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r != 0) {
		snprintf(err, errlen, "seccomp: cannot load the %s filter: %s",
			 profile_names[p], strerror(r < 0 ? -r : EINVAL));
		return -1;
	}
	return 0;
}

int confine_supervisor(char *err, size_t errlen)
{
#ifdef __SANITIZE_ADDRESS__
	/* make SAN=1: LeakSanitizer's check at exit stops the process's
	 * threads with clone and ptrace, which this filter refuses (it then
	 * dies with "LeakSanitizer has encountered a fatal error"). The
	 * check runs here instead, once, for what was allocated so far. */
	__lsan_do_leak_check();
#endif
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	return load_filter(CONFINE_SUPERVISOR, err, errlen);
}

int confine_self(enum confine_profile p, const char *const *read_paths,
		 size_t nread, char *err, size_t errlen)
{
	return confine_self_rw(p, read_paths, nread, NULL, 0, err, errlen);
}

int confine_self_rw(enum confine_profile p, const char *const *read_paths,
		    size_t nread, const char *const *rw_paths, size_t nrw,
		    char *err, size_t errlen)
{
	int r;

	ASSERT((unsigned)p < CONFINE_PROFILE_COUNT);
	if (confine_drop_capabilities() < 0) {
		snprintf(err, errlen, "dropping capabilities: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	r = restrict_paths(read_paths, nread, rw_paths, nrw);
	if (r < 0) {
		snprintf(err, errlen, "landlock: %s", strerror(-r));
		return -1;
	}
	return load_filter(p, err, errlen);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

void confine_close_fds(const int *keep, size_t n)
{
	int *k = util_xcalloc(n ? n : 1, sizeof(int));
	unsigned int next = 0;
	size_t i, m = 0;

	for (i = 0; i < n; i++)
		if (keep[i] >= 0)
			k[m++] = keep[i];
	qsort(k, m, sizeof(int), cmp_int);
	for (i = 0; i < m; i++) {
		if ((unsigned int)k[i] > next)
			ASSERT(close_range(next, (unsigned int)k[i] - 1, 0) == 0);
		next = (unsigned int)k[i] + 1;
	}
	ASSERT(close_range(next, ~0U, 0) == 0);
	free(k);
}

void confine_wipe_environment(void)
{
	char **e;

	for (e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	ASSERT(clearenv() == 0);
}
