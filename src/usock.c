/* SPDX-License-Identifier: Apache-2.0
 * usock.c - the unix-socket gate (see usock.h, docs/UNIX-SOCKETS.md).
 *
 * DOC: Theory of Operation
 *
 * A read-only mount does not stop connect(): a host daemon's pathname unix
 * socket anywhere in the sandbox's view (/var/tmp, /opt, /etc, beside or
 * inside the workspace) would receive the agent's bytes, and Landlock (up
 * to ABI 7) has no right for connecting to one. So the agent's seccomp
 * filter hands every call that can name a destination - connect(),
 * sendmsg(), sendmmsg(), sendto() with an address - to init as a user
 * notification, and init performs the call itself:
 *
 *   1. It copies what the call names out of the agent: the address, the
 *      data, the control messages (process_vm_readv), and the socket
 *      itself (pidfd_getfd on a pidfd of the calling thread, whose fd
 *      table may be its own). The copies cannot change under the gate.
 *   2. It answers nothing with SECCOMP_USER_NOTIF_FLAG_CONTINUE: the
 *      kernel would then look the descriptor up again, and another thread
 *      of the agent could have put a unix socket at that number, and a
 *      host path in the address, in between. Every notified call, TCP and
 *      UDP included, is performed on the gate's copy of the socket.
 *   3. For an AF_UNIX socket naming a pathname (connect(), or a datagram
 *      socket's destination), it resolves the path as the agent's thread
 *      would (the same root; /proc/TID/cwd for a relative path; symbolic
 *      links followed) to an O_PATH descriptor and decides on that inode:
 *      allowed if it lies beneath an fs.rw path, or if a socket of the
 *      sandbox's own network namespace is bound to it (a NETLINK_SOCK_DIAG
 *      dump made from inside lists the device and inode of every socket
 *      file bound there; no host daemon's socket is among them). Otherwise
 *      the call fails with EACCES and nothing reaches the socket.
 *   4. An allowed destination is connected through /proc/self/fd/N of that
 *      O_PATH descriptor: the inode checked is the inode connected, even
 *      if the path is renamed or replaced meanwhile.
 *   5. It performs the call with no effective capability (with the agent's
 *      authority, not init's: SO_MARK, a raised priority and the like stay
 *      refused as they would be to the agent); only a checked
 *      SCM_CREDENTIALS message is sent with CAP_SYS_ADMIN, since the
 *      kernel compares its pid with the sender's, which is init.
 *      Control messages are walked as __scm_send walks them (the last
 *      may end unpadded: msg_controllen = CMSG_LEN(n)) and keep their
 *      layout; credentials the gate adds go where CMSG_NXTHDR finds the
 *      next header, never right after unpadded bytes (issue 27).
 *   6. A call that would block on a blocking socket (a full buffer, a
 *      connect in progress, a full backlog) is finished by a worker
 *      process forked for it, so that one waiting call never holds up the
 *      agent's others; the worker answers the notification itself.
 *
 * The filter is loaded with SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: once
 * the gate holds a call, only a fatal signal interrupts the caller, so a
 * call the gate performed is never restarted and performed twice.
 *
 * Should: let the agent use its own unix sockets (stream, datagram,
 * seqpacket, socketpair, abstract, descriptor passing) and sockets under
 * fs.rw; answer every other call exactly as the kernel would.
 * Mustn't: reach a socket bound outside the sandbox by any path, symbolic
 * link, rename race or rewritten memory; decide on memory or descriptors
 * the agent can change after the check; block the gate for one call.
 *
 * Limits (docs/UNIX-SOCKETS.md): the dump carries only 32 bits of an inode
 * number, so on a filesystem whose inode numbers are larger a socket
 * beyond 2^32 is refused even when the agent bound it; a server in the
 * sandbox sees init (pid 1) in SO_PEERCRED of a connection the gate made
 * (messages carry the agent's SCM_CREDENTIALS, which the gate adds);
 * a stream sendmsg() sends at most 1 MiB per call; MSG_ZEROCOPY is
 * ignored (the gate copies).
 */
#include "usock.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/kcmp.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define USOCK_SEND_MAX (1U << 20)  /* bytes the gate copies at a time */
#define USOCK_RW_MAX 0x7ffff000UL  /* MAX_RW_COUNT: bytes one call moves */
#define USOCK_CTL_MAX 65536        /* control bytes of one message */
#define USOCK_MMSG_MAX 1024        /* messages of one sendmmsg (UIO_MAXIOV) */
#define USOCK_IOV_MAX 1024         /* iovecs of one message (UIO_MAXIOV) */
#define USOCK_FDS_MAX USOCK_CMSG_FDS_MAX
#define USOCK_WORKERS_MAX 64
#define USOCK_PIDFDS 32            /* threads whose pidfds are kept */
#define USOCK_DIAG_BUF 65536

#define USOCK_DIAG_FOUND 1
#define USOCK_DIAG_DONE 2

/* op_run()'s answer when the call must wait: a worker finishes it. */
#define OP_DEFER LONG_MIN
#define OP_UNKNOWN (-1000)

static_assert(sizeof(((struct sockaddr_un *)0)->sun_path) == USOCK_PATH_MAX,
	      "sun_path is USOCK_PATH_MAX bytes");

static const char *const addr_kind_names[] = {
	[USOCK_ADDR_NONE] = "none",
	[USOCK_ADDR_PATH] = "path",
	[USOCK_ADDR_ABSTRACT] = "abstract",
	[USOCK_ADDR_INVALID] = "invalid",
};
static_assert(ARRAY_SIZE(addr_kind_names) == USOCK_ADDR_COUNT,
	      "one name per address kind");

const char *usock_addr_kind_to_string(enum usock_addr_kind k)
{
	return (unsigned)k < USOCK_ADDR_COUNT ? addr_kind_names[k] : "?";
}

struct mount_dev {
	uint64_t id;   /* mount id, as statx(STATX_MNT_ID) gives it */
	uint32_t kdev; /* the superblock's dev_t, major << 20 | minor */
};

struct worker {
	pid_t pid;
	uint64_t id;   /* the notification it answers */
};

struct pidfd_slot {
	pid_t tid;
	int fd;                    /* -1: free */
	pid_t tgid;                /* its thread group, 0 until asked */
	uint64_t used;
};

struct usock_gate {
	int listener;
	int diag;                  /* NETLINK_SOCK_DIAG socket, or -1 */
	char *const *rw;
	size_t nrw;
	struct mount_dev *mounts;
	size_t nmounts;
	struct worker workers[USOCK_WORKERS_MAX];
	size_t nworkers;
	struct pidfd_slot pidfds[USOCK_PIDFDS];
	uint64_t tick;
	struct seccomp_notif *notif;
	size_t notif_size;
	struct seccomp_notif_resp *resp;
	size_t resp_size;
	uint32_t seq;
	unsigned char *data;       /* USOCK_SEND_MAX */
	unsigned char *ctl;        /* USOCK_CTL_MAX and a credentials message */
	unsigned char *diagbuf;    /* USOCK_DIAG_BUF */
	struct mmsghdr *mmsg;      /* USOCK_MMSG_MAX */
	struct iovec *iov;         /* USOCK_IOV_MAX */
};

/* One call, copied out of the agent: everything op_run() needs. */
struct op {
	int sock;                  /* the gate's copy of the agent's socket */
	int domain, type;          /* SO_DOMAIN, SO_TYPE; OP_UNKNOWN until asked */
	int fl;                    /* its file flags; OP_UNKNOWN until asked */
	bool connect;
	bool in_progress;          /* a stream connect has begun */
	struct sockaddr_storage addr;
	socklen_t addrlen;         /* 0: no address */
	int path_fd;               /* O_PATH of a checked destination, or -1 */
	pid_t tid;                 /* the caller: its memory holds the data */
	const struct iovec *riov;  /* the data, in the caller's memory */
	size_t nriov;
	struct iovec one;          /* sendto()'s single buffer */
	size_t total;              /* bytes the call sends */
	size_t sent;
	unsigned char *buf;        /* USOCK_SEND_MAX bytes: one chunk of them, */
	size_t chunk_off, chunk_len; /* copied from the caller's memory */
	unsigned char *ctl;
	size_t ctllen;
	/* The caller's credentials, sent with every chunk of a unix send: a
	 * receiver with SO_PASSCRED sees the agent, not init or a worker. */
	unsigned char credbuf[CMSG_SPACE(sizeof(struct ucred))];
	bool has_cred;
	int fds[USOCK_FDS_MAX];    /* the gate's copies of SCM_RIGHTS fds */
	size_t nfds;
	bool creds;
	int flags;                 /* the agent's MSG_* flags */
};

/* One notification being served. */
struct call {
	struct usock_gate *g;
	uint64_t id;
	pid_t tid;
	int pidfd;                 /* of the calling thread */
	const __u64 *args;
};

static void op_init(struct op *op, const struct call *c)
{
	memset(op, 0, sizeof(*op));
	op->sock = -1;
	op->path_fd = -1;
	op->domain = op->type = op->fl = OP_UNKNOWN;
	op->tid = c->tid;
	op->buf = c->g->data;
}

static void op_release(struct op *op)
{
	size_t i;

	if (op->sock >= 0)
		close(op->sock);
	if (op->path_fd >= 0)
		close(op->path_fd);
	for (i = 0; i < op->nfds; i++)
		close(op->fds[i]);
	op->sock = -1;
	op->path_fd = -1;
	op->nfds = 0;
}

/* The socket's properties, asked of the kernel only when a decision
 * needs them (most calls need none): >= 0, or -errno (-ENOTSOCK). */
static int sock_opt(struct op *op, int *cache, int opt)
{
	socklen_t l = sizeof(int);
	int v;

	if (*cache != OP_UNKNOWN)
		return *cache;
	if (getsockopt(op->sock, SOL_SOCKET, opt, &v, &l) < 0)
		return -errno;
	*cache = v;
	return v;
}

static int sock_domain(struct op *op)
{
	return sock_opt(op, &op->domain, SO_DOMAIN);
}

static int sock_type(struct op *op)
{
	return sock_opt(op, &op->type, SO_TYPE);
}

/* True if the agent's call may block: a blocking socket, no MSG_DONTWAIT. */
static bool may_wait(struct op *op)
{
	if (op->fl == OP_UNKNOWN) {
		int fl = fcntl(op->sock, F_GETFL);

		op->fl = fl < 0 ? O_NONBLOCK : fl;
	}
	return !(op->fl & O_NONBLOCK) && !(op->flags & MSG_DONTWAIT);
}

/* --- pure helpers -------------------------------------------------------- */

enum usock_addr_kind usock_addr_classify(const void *addr, size_t len,
					 char path[USOCK_PATH_MAX + 1])
{
	const size_t off = offsetof(struct sockaddr_un, sun_path);
	sa_family_t family;
	size_t n;

	path[0] = '\0';
	if (len < sizeof(family))
		return USOCK_ADDR_NONE;
	memcpy(&family, addr, sizeof(family));
	if (family != AF_UNIX)
		return USOCK_ADDR_NONE;
	if (len > sizeof(struct sockaddr_un))
		return USOCK_ADDR_INVALID;
	/* Only the family: autobind for bind(), EINVAL for connect(). */
	if (len <= off)
		return USOCK_ADDR_ABSTRACT;
	if (((const char *)addr)[off] == '\0')
		return USOCK_ADDR_ABSTRACT;
	/* The kernel ends the path at the address's length or its first
	 * NUL, whichever comes first (unix_mkname_bsd). */
	n = len - off;
	memcpy(path, (const char *)addr + off, n);
	path[n] = '\0';
	return USOCK_ADDR_PATH;
}

bool usock_proc_self_rewrite(const char *path, pid_t tid, char *out, size_t outlen)
{
	static const char *const selves[] = { "/proc/self/", "/proc/thread-self/" };
	const char *rest = NULL;
	size_t i;
	int n;

	for (i = 0; i < ARRAY_SIZE(selves) && !rest; i++)
		if (strncmp(path, selves[i], strlen(selves[i])) == 0)
			rest = path + strlen(selves[i]);
	if (!rest)
		return util_strlcpy(out, path, outlen);
	n = snprintf(out, outlen, "/proc/%d/%s", (int)tid, rest);
	return n >= 0 && (size_t)n < outlen;
}

bool usock_path_under(const char *path, char *const *dirs, size_t ndirs)
{
	size_t i;

	for (i = 0; i < ndirs; i++) {
		size_t n = strlen(dirs[i]);

		while (n > 1 && dirs[i][n - 1] == '/')
			n--;
		if (strncmp(path, dirs[i], n) != 0)
			continue;
		if (path[n] == '\0' || path[n] == '/' || (n == 1 && dirs[i][0] == '/'))
			return true;
	}
	return false;
}

int usock_diag_scan(const void *buf, size_t len, uint32_t kdev, uint32_t ino32)
{
	const unsigned char *p = buf;
	int ret = 0;

	while (len >= sizeof(struct nlmsghdr)) {
		struct nlmsghdr h;
		size_t mlen;

		memcpy(&h, p, sizeof(h));
		mlen = h.nlmsg_len;
		if (mlen < sizeof(h) || mlen > len)
			return -EPROTO;
		if (h.nlmsg_type == NLMSG_DONE)
			return ret | USOCK_DIAG_DONE;
		if (h.nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr e;

			if (mlen < NLMSG_LENGTH(sizeof(e)))
				return -EPROTO;
			memcpy(&e, p + NLMSG_HDRLEN, sizeof(e));
			return e.error < 0 && e.error >= -4095 ? e.error : -EPROTO;
		}
		if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    mlen >= NLMSG_LENGTH(sizeof(struct unix_diag_msg))) {
			size_t off = NLMSG_ALIGN(NLMSG_LENGTH(sizeof(struct unix_diag_msg)));

			while (off + sizeof(struct nlattr) <= mlen) {
				struct nlattr a;

				memcpy(&a, p + off, sizeof(a));
				if (a.nla_len < sizeof(a) || off + a.nla_len > mlen)
					return -EPROTO;
				if ((a.nla_type & NLA_TYPE_MASK) == UNIX_DIAG_VFS &&
				    a.nla_len >= NLA_HDRLEN + sizeof(struct unix_diag_vfs)) {
					struct unix_diag_vfs v;

					memcpy(&v, p + off + NLA_HDRLEN, sizeof(v));
					if (v.udiag_vfs_dev == kdev && v.udiag_vfs_ino == ino32)
						ret |= USOCK_DIAG_FOUND;
				}
				off += NLA_ALIGN(a.nla_len);
			}
		}
		mlen = NLMSG_ALIGN(mlen);
		if (mlen >= len)
			break;
		p += mlen;
		len -= mlen;
	}
	return ret;
}

/* The kernel's __cmsg_nxthdr over a buffer of @len bytes: the next header
 * at @off, or SIZE_MAX at the end. */
static size_t cmsg_next(const unsigned char *ctl, size_t len, size_t off)
{
	struct cmsghdr c;
	size_t next;

	memcpy(&c, ctl + off, sizeof(c));
	next = off + CMSG_ALIGN(c.cmsg_len);
	if (next < off || next + sizeof(struct cmsghdr) > len)
		return SIZE_MAX;
	return next;
}

int usock_cmsg_scan(const void *ctl, size_t len, struct usock_cmsg_scan *out)
{
	const unsigned char *p = ctl;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	/* CMSG_FIRSTHDR: a buffer shorter than a header holds none. */
	if (len < sizeof(struct cmsghdr))
		return 0;
	while (off != SIZE_MAX) {
		struct cmsghdr c;
		size_t datalen;

		memcpy(&c, p + off, sizeof(c));
		/* __scm_send: a header must fit whole in the buffer. */
		if (c.cmsg_len < sizeof(struct cmsghdr) || c.cmsg_len > len - off)
			return -EINVAL;
		datalen = c.cmsg_len - CMSG_LEN(0);
		if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == SCM_RIGHTS) {
			/* scm_fp_copy: whole ints only, at most SCM_MAX_FD. */
			size_t n = datalen / sizeof(int), i;

			if (out->nfds + n > USOCK_CMSG_FDS_MAX)
				return -EINVAL;
			for (i = 0; i < n; i++)
				memcpy(&out->fds[out->nfds++],
				       p + off + CMSG_LEN(0) + i * sizeof(int), sizeof(int));
		} else if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == SCM_CREDENTIALS) {
			struct ucred u;

			if (c.cmsg_len != CMSG_LEN(sizeof(u)))
				return -EINVAL;
			memcpy(&u, p + off + CMSG_LEN(0), sizeof(u));
			/* The kernel checks every one: two that differ cannot
			 * both be the sender's (0 is nobody's pid). */
			out->creds_pid = out->creds && out->creds_pid != u.pid ? 0 : u.pid;
			out->creds = true;
		}
		/* Where CMSG_NXTHDR puts the next header: past the padding
		 * of this one, even when the buffer ends unpadded after its
		 * data (msg_controllen = CMSG_LEN(n) is what many senders
		 * pass), so up to CMSG_ALIGN(len). */
		out->end = off + CMSG_ALIGN(c.cmsg_len);
		off = cmsg_next(p, len, off);
	}
	return 0;
}

void usock_cmsg_replace_fds(void *ctl, size_t len, const int *fds, size_t nfds)
{
	unsigned char *p = ctl;
	size_t off = 0, k = 0;

	if (len < sizeof(struct cmsghdr))
		return;
	while (off != SIZE_MAX) {
		struct cmsghdr c;

		memcpy(&c, p + off, sizeof(c));
		if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == SCM_RIGHTS) {
			size_t n = (c.cmsg_len - CMSG_LEN(0)) / sizeof(int), i;

			for (i = 0; i < n; i++) {
				ASSERT(k < nfds);
				memcpy(p + off + CMSG_LEN(0) + i * sizeof(int), &fds[k++],
				       sizeof(int));
			}
		}
		off = cmsg_next(p, len, off);
	}
	ASSERT(k == nfds);
}

/* --- the agent's thread ------------------------------------------------- */

static pid_t read_tgid(pid_t tid)
{
	char path[64], *text, *p;
	unsigned long v;
	pid_t tgid = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	text = util_read_file(path, 1 << 16, NULL);
	if (!text)
		return -1;
	p = strstr(text, "\nTgid:");
	if (p) {
		p += 6;
		while (*p == ' ' || *p == '\t')
			p++;
		*strchrnul(p, '\n') = '\0';
		if (util_parse_uint(p, 1, INT_MAX, &v))
			tgid = (pid_t)v;
	}
	free(text);
	return tgid;
}

int usock_thread_pidfd(pid_t tid, bool legacy)
{
	pid_t tgid;
	int fd;

	if (!legacy) {
		fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
		if (fd >= 0 || errno != EINVAL)
			return fd >= 0 ? fd : -errno;
	}
	/* Before Linux 6.9: only a thread group has a pidfd, and
	 * pidfd_getfd() reads its leader's fd table. Use it only if the
	 * thread shares that table (threads cloned without CLONE_FILES have
	 * their own). */
	tgid = read_tgid(tid);
	if (tgid < 0)
		return -ESRCH;
	fd = (int)syscall(SYS_pidfd_open, tgid, 0);
	if (fd < 0)
		return -errno;
	if (tgid != tid && syscall(SYS_kcmp, tgid, tid, KCMP_FILES, 0, 0) != 0) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* Copies @len bytes at the agent's @addr. -EFAULT as the kernel would
 * answer for a bad pointer; -EACCES when the gate may not read (the
 * agent's memory belongs to a user namespace above the sandbox's). */
static int read_mem(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n;

	if (len == 0)
		return 0;
	n = process_vm_readv(tid, &l, 1, &r, 1, 0);
	if (n < 0)
		return errno == EPERM ? -EACCES : -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_writev(tid, &l, 1, &r, 1, 0);

	if (n < 0)
		return errno == EPERM ? -EACCES : -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* --- capabilities: the gate acts with the agent's authority --------------- */

/* Init keeps CAP_SYS_PTRACE effective (to copy from the agent; it grants
 * nothing on sockets or files) and CAP_SYS_ADMIN permitted, raised only
 * to send a checked SCM_CREDENTIALS message, whose pid the kernel would
 * otherwise compare with init's. */
static int caps_apply(bool admin)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	d[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted |= CAP_TO_MASK(CAP_SYS_PTRACE);
	d[CAP_TO_INDEX(CAP_SYS_ADMIN)].permitted |= CAP_TO_MASK(CAP_SYS_ADMIN);
	d[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective |= CAP_TO_MASK(CAP_SYS_PTRACE);
	if (admin)
		d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective |= CAP_TO_MASK(CAP_SYS_ADMIN);
	return (int)syscall(SYS_capset, &h, d);
}

static void caps_set(bool admin)
{
	/* Within the permitted set usock_gate_new() left: cannot fail. */
	ASSERT(caps_apply(admin) == 0);
}

/* --- pidfds of the agent's threads ------------------------------------------ */

/* A pidfd names a struct pid, not a number: a cached one for a thread
 * that is gone (its tid free for reuse) answers ESRCH, never another
 * thread. So a cache by tid is safe if ESRCH means "open it again". */
static int pidfd_get(struct usock_gate *g, pid_t tid, bool fresh)
{
	struct pidfd_slot *victim = &g->pidfds[0];
	size_t i;
	int fd;

	for (i = 0; i < USOCK_PIDFDS; i++) {
		struct pidfd_slot *e = &g->pidfds[i];

		if (e->fd >= 0 && e->tid == tid) {
			if (!fresh) {
				e->used = ++g->tick;
				return e->fd;
			}
			close(e->fd);
			e->fd = -1;
		}
		if (e->fd < 0 || e->used < victim->used)
			victim = e;
	}
	fd = usock_thread_pidfd(tid, false);
	if (fd < 0)
		return fd;
	if (victim->fd >= 0)
		close(victim->fd);
	victim->fd = fd;
	victim->tid = tid;
	victim->tgid = 0;
	victim->used = ++g->tick;
	return fd;
}

/* The caller's thread group (its pid), kept with its pidfd: a tid's
 * group never changes while the pidfd still names it. */
static pid_t call_tgid(struct usock_gate *g, pid_t tid)
{
	size_t i;

	for (i = 0; i < USOCK_PIDFDS; i++) {
		struct pidfd_slot *e = &g->pidfds[i];

		if (e->fd >= 0 && e->tid == tid) {
			if (e->tgid == 0)
				e->tgid = read_tgid(tid);
			return e->tgid;
		}
	}
	return read_tgid(tid);
}

/* --- mounts: the superblock device of a file ------------------------------ */

static int mounts_load(struct usock_gate *g)
{
	char *text, *line, *save = NULL;
	size_t cap = 0;

	text = util_read_file("/proc/self/mountinfo", 16 << 20, NULL);
	if (!text)
		return -errno;
	g->nmounts = 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long id, major, minor;
		char *end;

		/* "ID PARENT MAJOR:MINOR ..." */
		id = strtoul(line, &end, 10);
		if (*end != ' ')
			continue;
		(void)strtoul(end + 1, &end, 10);
		if (*end != ' ')
			continue;
		major = strtoul(end + 1, &end, 10);
		if (*end != ':')
			continue;
		minor = strtoul(end + 1, &end, 10);
		if (*end != ' ' || major >= (1UL << 12) || minor >= (1UL << 20))
			continue;
		if (g->nmounts == cap) {
			cap = cap ? cap * 2 : 64;
			g->mounts = util_xrealloc(g->mounts, cap * sizeof(*g->mounts));
		}
		g->mounts[g->nmounts].id = id;
		g->mounts[g->nmounts].kdev = (uint32_t)(major << 20 | minor);
		g->nmounts++;
	}
	free(text);
	return 0;
}

/* The superblock device of the mount @id, as the diag dump reports it
 * (st_dev can differ: btrfs gives each subvolume its own). The table is
 * read at the first need (most sessions never name a unix path) and again
 * when a mount is not in it. */
static int mount_kdev(struct usock_gate *g, uint64_t id, uint32_t *kdev)
{
	int pass;
	size_t i;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < g->nmounts; i++) {
			if (g->mounts[i].id == id) {
				*kdev = g->mounts[i].kdev;
				return 0;
			}
		}
		if (pass == 0 && mounts_load(g) < 0)
			break;
	}
	return -ENOENT;
}

/* --- the decision: whose socket is this? --------------------------------- */

/* Returns 1 if a socket of our network namespace is bound to the file
 * (@kdev, @ino32), 0 if none, or -errno (the gate could not tell). */
static int diag_bound_here(struct usock_gate *g, uint32_t kdev, uint32_t ino32)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} msg;
	int found = 0, r;

	if (g->diag < 0) {
		g->diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (g->diag < 0)
			return -errno;
	}
	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.nlh.nlmsg_seq = ++g->seq;
	msg.req.sdiag_family = AF_UNIX;
	msg.req.udiag_states = ~0U;
	msg.req.udiag_show = UDIAG_SHOW_VFS;
	if (send(g->diag, &msg, sizeof(msg), 0) != (ssize_t)sizeof(msg)) {
		r = -EIO;
		goto reset;
	}
	for (;;) {
		ssize_t n = recv(g->diag, g->diagbuf, USOCK_DIAG_BUF, MSG_TRUNC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || n > USOCK_DIAG_BUF) {
			r = n < 0 ? -errno : -EPROTO;
			goto reset;
		}
		r = usock_diag_scan(g->diagbuf, (size_t)n, kdev, ino32);
		if (r == -EPROTO)
			goto reset;
		/* The dump's own error ends it: the socket stays usable. */
		if (r < 0)
			return r;
		if (r & USOCK_DIAG_FOUND)
			found = 1;
		if (r & USOCK_DIAG_DONE)
			return found;
	}
reset:
	/* A dump read halfway would answer the next query: start afresh. */
	close(g->diag);
	g->diag = -1;
	return r;
}

/* Resolves the pathname @path of an AF_UNIX address as the agent's thread
 * would and decides. On success op->path_fd holds the destination and
 * op->addr names it through /proc/self/fd; returns 0, -EACCES (a socket
 * the agent may not reach), or the errno the resolution gave. */
static int check_destination(struct call *c, struct op *op, const char *path)
{
	char full[PATH_MAX], fdpath[64];
	struct sockaddr_un *sun = (struct sockaddr_un *)&op->addr;
	int dirfd = AT_FDCWD, fd = -1, r, n;
	struct statx stx;
	uint32_t kdev;

	if (!usock_proc_self_rewrite(path, c->tid, full, sizeof(full)))
		return -ENAMETOOLONG;
	if (full[0] != '/') {
		snprintf(fdpath, sizeof(fdpath), "/proc/%d/cwd", (int)c->tid);
		dirfd = open(fdpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0)
			return errno == ENOENT ? -ESRCH : -EACCES;
	}
	fd = openat(dirfd, full, O_PATH | O_CLOEXEC);
	r = fd < 0 ? -errno : 0;
	if (dirfd >= 0)
		close(dirfd);
	if (r < 0)
		return r;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_INO | STATX_MNT_ID, &stx) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISSOCK(stx.stx_mode)) {
		r = -ECONNREFUSED;
		goto out;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if (c->g->nrw > 0) {
		char where[PATH_MAX];
		ssize_t len = readlink(fdpath, where, sizeof(where) - 1);

		if (len > 0) {
			where[len] = '\0';
			if (usock_path_under(where, c->g->rw, c->g->nrw))
				goto allowed;
		}
	}
	/* The dump has 32 bits of the inode number: larger ones cannot be
	 * told apart, so they are refused. */
	r = -EACCES;
	if (!(stx.stx_mask & STATX_MNT_ID) || stx.stx_ino > UINT32_MAX ||
	    mount_kdev(c->g, stx.stx_mnt_id, &kdev) < 0)
		goto out;
	n = diag_bound_here(c->g, kdev, (uint32_t)stx.stx_ino);
	if (n != 1)
		goto out;
allowed:
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path, sizeof(sun->sun_path), "%s", fdpath);
	op->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	op->path_fd = fd;
	return 0;
out:
	close(fd);
	return r;
}

/* --- the data of a send ---------------------------------------------------- */

/* Copies the op's bytes from @off (up to USOCK_SEND_MAX of them) out of the
 * caller's memory into op->buf: the gate never holds more than one chunk
 * of a large send. */
static int load_chunk(struct op *op, size_t off)
{
	struct iovec slice[USOCK_IOV_MAX], l;
	size_t want = op->total - off, pos = 0, n = 0, k = 0, i;
	ssize_t got;

	if (want > USOCK_SEND_MAX)
		want = USOCK_SEND_MAX;
	op->chunk_off = off;
	op->chunk_len = 0;
	if (want == 0)
		return 0;
	for (i = 0; i < op->nriov && n < want; i++) {
		const struct iovec *v = &op->riov[i];
		size_t skip, take;

		if (pos + v->iov_len <= off) {
			pos += v->iov_len;
			continue;
		}
		skip = pos < off ? off - pos : 0;
		take = v->iov_len - skip;
		if (take > want - n)
			take = want - n;
		slice[k].iov_base = (char *)v->iov_base + skip;
		slice[k].iov_len = take;
		k++;
		n += take;
		pos += v->iov_len;
	}
	ASSERT(n == want && k <= ARRAY_SIZE(slice));
	l.iov_base = op->buf;
	l.iov_len = want;
	got = process_vm_readv(op->tid, &l, 1, slice, k, 0);
	if (got < 0)
		return errno == EPERM ? -EACCES : -errno;
	if ((size_t)got != want)
		return -EFAULT;
	op->chunk_len = want;
	return 0;
}

/* Sets the op's data: @n buffers at @riov in the caller's memory (the
 * iovecs themselves already copied), and copies the first chunk. */
static int set_data(struct op *op, const struct iovec *riov, size_t n)
{
	size_t i;

	op->riov = riov;
	op->nriov = n;
	op->total = 0;
	for (i = 0; i < n; i++) {
		if (riov[i].iov_len > (size_t)SSIZE_MAX)
			return -EINVAL;
		/* import_iovec: a call moves at most MAX_RW_COUNT bytes. */
		if (riov[i].iov_len > USOCK_RW_MAX - op->total) {
			op->total = USOCK_RW_MAX;
			break;
		}
		op->total += riov[i].iov_len;
	}
	/* A stream takes the bytes in chunks; a message goes whole. */
	if (op->total > USOCK_SEND_MAX) {
		int t = sock_type(op);

		if (t < 0)
			return t;
		if (t != SOCK_STREAM)
			return -EMSGSIZE;
	}
	return load_chunk(op, 0);
}

/* --- copying a call out of the agent -------------------------------------- */

static int get_socket(struct call *c, int agent_fd, struct op *op)
{
	op->sock = (int)syscall(SYS_pidfd_getfd, c->pidfd, agent_fd, 0);
	if (op->sock < 0 && errno == ESRCH) {
		/* A cached pidfd of a thread since gone: the tid is new. */
		c->pidfd = pidfd_get(c->g, c->tid, true);
		if (c->pidfd < 0)
			return c->pidfd;
		op->sock = (int)syscall(SYS_pidfd_getfd, c->pidfd, agent_fd, 0);
	}
	if (op->sock >= 0)
		return 0;
	return errno == EPERM ? -EACCES : -errno;
}

/* Copies the address of @len bytes at @uaddr (move_addr_to_kernel), and,
 * if it names a unix pathname the gate must judge, judges it. */
static int get_address(struct call *c, struct op *op, uint64_t uaddr, long len)
{
	char path[USOCK_PATH_MAX + 1];
	enum usock_addr_kind k;
	int r;

	if (len < 0 || (size_t)len > sizeof(op->addr))
		return -EINVAL;
	op->addrlen = (socklen_t)len;
	if (len == 0)
		return 0;
	r = read_mem(c->tid, uaddr, &op->addr, (size_t)len);
	if (r < 0)
		return r;
	k = usock_addr_classify(&op->addr, (size_t)len, path);
	if (k != USOCK_ADDR_PATH)
		return 0;
	/* A unix pathname matters only to a unix socket; there, only to
	 * connect() and a datagram socket's destination: a stream socket
	 * refuses an address, a seqpacket one ignores it. */
	r = sock_domain(op);
	if (r < 0 || r != AF_UNIX)
		return r < 0 ? r : 0;
	if (!op->connect) {
		r = sock_type(op);
		if (r < 0 || r != SOCK_DGRAM)
			return r < 0 ? r : 0;
	}
	return check_destination(c, op, path);
}

/* A unix send carries the caller's credentials: an SCM_CREDENTIALS of
 * its own is checked (what the kernel asks of a sender without
 * privilege: its own pid; uid and gid the kernel checks itself, as init's
 * are the agent's), and without one the gate adds it, since the kernel
 * would attach init's. Appended to op->ctl (in the gate's buffer, which
 * has room for it); @scan describes what the agent sent. */
static int add_credentials(struct call *c, struct op *op, const struct usock_cmsg_scan *scan)
{
	bool unix_sock = sock_domain(op) == AF_UNIX;
	struct ucred u;
	struct cmsghdr h;

	if (!unix_sock && !scan->creds)
		return 0;
	u.pid = call_tgid(c->g, c->tid);
	u.uid = getuid();
	u.gid = getgid();
	if (u.pid <= 0)
		return -ESRCH;
	if (scan->creds && scan->creds_pid != u.pid)
		return -EPERM;
	op->creds = true;
	if (!unix_sock)
		return 0;
	memset(op->credbuf, 0, sizeof(op->credbuf));
	h.cmsg_len = CMSG_LEN(sizeof(u));
	h.cmsg_level = SOL_SOCKET;
	h.cmsg_type = SCM_CREDENTIALS;
	memcpy(op->credbuf, &h, sizeof(h));
	memcpy(op->credbuf + CMSG_LEN(0), &u, sizeof(u));
	op->has_cred = true;
	if (scan->creds)
		return 0;
	/* The agent's control data, if any, is already in the gate's buffer;
	 * the credentials go where the kernel looks for the next header. */
	op->ctl = c->g->ctl;
	ASSERT(op->ctl);
	op->ctllen = usock_cmsg_append(op->ctl, op->ctllen, scan, op->credbuf,
				       sizeof(op->credbuf));
	return 0;
}

size_t usock_cmsg_append(void *ctl, size_t len, const struct usock_cmsg_scan *scan,
			 const void *cmsg, size_t cmsglen)
{
	unsigned char *p = ctl;
	size_t at = scan->end;

	ASSERT(at <= CMSG_ALIGN(len) && at % sizeof(size_t) == 0);
	/* The padding an unpadded last message lacked. */
	if (at > len)
		memset(p + len, 0, at - len);
	memcpy(p + at, cmsg, cmsglen);
	return at + cmsglen;
}

/* Copies one struct msghdr's name, data (its first chunk) and control of
 * the agent's sendmsg() into @op. */
static int get_message(struct call *c, struct op *op, const struct msghdr *m)
{
	struct usock_gate *g = c->g;
	struct usock_cmsg_scan scan;
	size_t i, n;
	int r;

	if ((int)m->msg_namelen < 0)
		return -EINVAL;
	if (m->msg_iovlen > USOCK_IOV_MAX)
		return -EMSGSIZE;
	if (m->msg_name && m->msg_namelen > 0) {
		socklen_t nl = m->msg_namelen;

		/* __copy_msghdr clamps an over-long name for sendmsg. */
		if (nl > sizeof(struct sockaddr_storage))
			nl = sizeof(struct sockaddr_storage);
		r = get_address(c, op, (uint64_t)(uintptr_t)m->msg_name, (long)nl);
		if (r < 0)
			return r;
	}
	n = m->msg_iovlen;
	r = read_mem(c->tid, (uint64_t)(uintptr_t)m->msg_iov, g->iov, n * sizeof(struct iovec));
	if (r == 0)
		r = set_data(op, g->iov, n);
	if (r < 0)
		return r;

	if (m->msg_controllen > INT_MAX || m->msg_controllen > USOCK_CTL_MAX)
		return -ENOBUFS;
	memset(&scan, 0, sizeof(scan));
	if (m->msg_controllen > 0 && m->msg_control) {
		r = read_mem(c->tid, (uint64_t)(uintptr_t)m->msg_control, g->ctl,
			     m->msg_controllen);
		if (r < 0)
			return r;
		op->ctl = g->ctl;
		op->ctllen = m->msg_controllen;
		r = usock_cmsg_scan(op->ctl, op->ctllen, &scan);
		if (r < 0)
			return r;
	}
	/* The descriptors are numbers in the agent's table: the message
	 * carries the gate's copies of the same files. */
	for (i = 0; i < scan.nfds; i++) {
		op->fds[i] = (int)syscall(SYS_pidfd_getfd, c->pidfd, scan.fds[i], 0);
		if (op->fds[i] < 0)
			return errno == EPERM ? -EACCES : -EBADF;
		op->nfds = i + 1;
	}
	if (op->nfds > 0)
		usock_cmsg_replace_fds(op->ctl, op->ctllen, op->fds, op->nfds);
	return add_credentials(c, op, &scan);
}

/* --- performing a call ----------------------------------------------------- */

static long connect_finish(int sock, int timeout_ms)
{
	struct pollfd p = { sock, POLLOUT, 0 };
	socklen_t l = sizeof(int);
	int err = 0, n;

	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return timeout_ms == 0 ? OP_DEFER : -EINPROGRESS;
	if (n < 0)
		return -errno;
	if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		return -errno;
	return err ? -err : 0;
}

/* The socket's send timeout in ms (-1: none), which bounds a blocking
 * connect as the kernel's would. */
static int send_timeout_ms(int sock)
{
	struct timeval tv;
	socklen_t l = sizeof(tv);
	long long ms;

	if (getsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) < 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return -1;
	ms = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	return ms > INT_MAX ? INT_MAX : ms < 1 ? 1 : (int)ms;
}

static long op_connect(struct op *op, bool may_block)
{
	const struct sockaddr *a = (const struct sockaddr *)&op->addr;
	int type, r, e;

	if (may_block) {
		if (op->in_progress)
			return connect_finish(op->sock, send_timeout_ms(op->sock));
		r = connect(op->sock, a, op->addrlen);
		return r < 0 ? -errno : 0;
	}
	type = may_wait(op) ? sock_type(op) : OP_UNKNOWN;
	if (type != SOCK_STREAM && type != SOCK_SEQPACKET) {
		r = connect(op->sock, a, op->addrlen);
		return r < 0 ? -errno : 0;
	}
	/* A blocking stream connect: started without blocking (the socket
	 * is not connected yet, so no other call of the agent's can be using
	 * it meanwhile), finished by a worker if it does not complete now. */
	if (fcntl(op->sock, F_SETFL, op->fl | O_NONBLOCK) < 0)
		return -errno;
	r = connect(op->sock, a, op->addrlen);
	e = errno;
	(void)fcntl(op->sock, F_SETFL, op->fl);
	if (r == 0)
		return 0;
	if (e == EINPROGRESS || e == EALREADY) {
		op->in_progress = true;
		return connect_finish(op->sock, 0);
	}
	if (e == EAGAIN)
		return OP_DEFER;  /* a unix listener's full backlog */
	return -e;
}

static long op_send(struct op *op, bool may_block)
{
	int flags = (op->flags & ~MSG_ZEROCOPY) | MSG_NOSIGNAL;

	if (!may_block)
		flags |= MSG_DONTWAIT;
	for (;;) {
		struct iovec iov;
		struct msghdr m;
		size_t at;
		ssize_t n;

		if (op->sent == op->chunk_off + op->chunk_len && op->sent < op->total) {
			int r = load_chunk(op, op->sent);

			if (r < 0)
				return op->sent ? (long)op->sent : r;
		}
		at = op->sent - op->chunk_off;
		iov.iov_base = op->buf + at;
		iov.iov_len = op->chunk_len - at;
		memset(&m, 0, sizeof(m));
		if (op->addrlen > 0) {
			m.msg_name = &op->addr;
			m.msg_namelen = op->addrlen;
		}
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		/* Control messages travel with the first bytes only; the
		 * credentials with every chunk. */
		if (op->sent == 0 && op->ctllen > 0) {
			m.msg_control = op->ctl;
			m.msg_controllen = op->ctllen;
		} else if (op->has_cred) {
			m.msg_control = op->credbuf;
			m.msg_controllen = sizeof(op->credbuf);
		}
		n = sendmsg(op->sock, &m, flags);
		if (n < 0) {
			if (errno == EINTR && may_block)
				continue;
			/* A blocking call that must wait: a worker goes on
			 * from here, as the kernel would block. */
			if (errno == EAGAIN && !may_block && may_wait(op))
				return OP_DEFER;
			return op->sent ? (long)op->sent : -errno;
		}
		op->sent += (size_t)n;
		/* A stream goes on until its buffer is full (non-blocking)
		 * or everything is sent (blocking); a message is whole. */
		if (op->sent >= op->total || sock_type(op) != SOCK_STREAM)
			return (long)op->sent;
	}
}

/* Runs @op with the agent's authority. A result of -EPIPE on a stream
 * raises SIGPIPE in the caller, as the kernel would have. */
static long op_run(struct call *c, struct op *op, bool may_block)
{
	long r;

	if (op->creds)
		caps_set(true);
	r = op->connect ? op_connect(op, may_block) : op_send(op, may_block);
	if (op->creds)
		caps_set(false);
	if (r == -EPIPE && !op->connect && !(op->flags & MSG_NOSIGNAL) &&
	    (sock_type(op) == SOCK_STREAM || sock_type(op) == SOCK_SEQPACKET))
		(void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGPIPE, NULL, 0);
	return r;
}

static void respond(struct usock_gate *g, uint64_t id, long r)
{
	memset(g->resp, 0, g->resp_size);
	g->resp->id = id;
	if (r < 0)
		g->resp->error = (int32_t)r;
	else
		g->resp->val = r;
	/* ENOENT: the caller is gone (killed), nothing to answer. */
	(void)ioctl(g->listener, SECCOMP_IOCTL_NOTIF_SEND, g->resp);
}

/* Turns an op's result into the call's answer (sendmmsg's count). */
typedef long (*finish_fn)(struct call *c, long r, void *arg);

/* Hands @op to a worker process that may block, which answers @c itself
 * (with @finish, when set, turning the op's result into the answer).
 * At the worker limit the call runs here, blocking the gate: bounded by
 * the agent's own sockets. Returns the answer if it ran here, else
 * OP_DEFER. */
static long defer(struct call *c, struct op *op, finish_fn finish, void *arg)
{
	struct usock_gate *g = c->g;
	long r;
	pid_t pid;

	if (g->nworkers < USOCK_WORKERS_MAX) {
		pid = fork();
		if (pid == 0) {
			r = op_run(c, op, true);
			if (finish)
				r = finish(c, r, arg);
			respond(g, c->id, r);
			_exit(0);
		}
		if (pid > 0) {
			g->workers[g->nworkers].pid = pid;
			g->workers[g->nworkers].id = c->id;
			g->nworkers++;
			return OP_DEFER;
		}
	}
	r = op_run(c, op, true);
	return finish ? finish(c, r, arg) : r;
}

/* --- the calls --------------------------------------------------------------- */

static bool still_waiting(const struct call *c)
{
	uint64_t id = c->id;

	return ioctl(c->g->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

#define GONE (LONG_MIN + 1)  /* the caller vanished: answer nothing */

static long do_connect(struct call *c)
{
	struct op op;
	long r;

	op_init(&op, c);
	op.connect = true;
	r = get_socket(c, (int)c->args[0], &op);
	if (r == 0)
		r = get_address(c, &op, c->args[1], (long)(int)c->args[2]);
	if (!still_waiting(c))
		r = GONE;
	else if (r == 0)
		r = op_run(c, &op, false);
	if (r == OP_DEFER)
		r = defer(c, &op, NULL, NULL);
	op_release(&op);
	return r;
}

static long do_sendto(struct call *c)
{
	struct op op;
	long r;

	op_init(&op, c);
	op.flags = (int)c->args[3];
	r = get_socket(c, (int)c->args[0], &op);
	if (r == 0)
		r = get_address(c, &op, c->args[4], (long)(int)c->args[5]);
	if (r == 0) {
		struct usock_cmsg_scan none;

		memset(&none, 0, sizeof(none));
		op.one.iov_base = (void *)(uintptr_t)c->args[1];
		op.one.iov_len = (size_t)c->args[2];
		r = set_data(&op, &op.one, 1);
		if (r == 0)
			r = add_credentials(c, &op, &none);
	}
	if (!still_waiting(c))
		r = GONE;
	else if (r == 0)
		r = op_run(c, &op, false);
	if (r == OP_DEFER)
		r = defer(c, &op, NULL, NULL);
	op_release(&op);
	return r;
}

static long do_sendmsg(struct call *c)
{
	struct msghdr m = { 0 };
	struct op op;
	long r;

	op_init(&op, c);
	op.flags = (int)c->args[2];
	r = get_socket(c, (int)c->args[0], &op);
	if (r == 0)
		r = read_mem(c->tid, c->args[1], &m, sizeof(m));
	if (r == 0)
		r = get_message(c, &op, &m);
	if (!still_waiting(c))
		r = GONE;
	else if (r == 0)
		r = op_run(c, &op, false);
	if (r == OP_DEFER)
		r = defer(c, &op, NULL, NULL);
	op_release(&op);
	return r;
}

/* sendmmsg: the messages one by one; msg_len written back for each sent.
 * The kernel's rule for errors: after at least one message, the count. */
struct mmsg_ctx {
	uint64_t vec;
	unsigned int i;
};

static long mmsg_finish(struct call *c, long r, void *arg)
{
	const struct mmsg_ctx *x = arg;
	unsigned int len;
	int w;

	if (r < 0)
		return x->i > 0 ? (long)x->i : r;
	len = (unsigned int)r;
	w = write_mem(c->tid, x->vec + (uint64_t)x->i * sizeof(struct mmsghdr) +
		      offsetof(struct mmsghdr, msg_len), &len, sizeof(len));
	if (w < 0)
		return x->i > 0 ? (long)x->i : w;
	return (long)x->i + 1;
}

static long do_sendmmsg(struct call *c)
{
	struct usock_gate *g = c->g;
	struct mmsg_ctx x;
	unsigned int vlen = (unsigned int)c->args[2];
	long r = 0;
	struct op op;

	x.vec = c->args[1];
	if (vlen > USOCK_MMSG_MAX)
		vlen = USOCK_MMSG_MAX;
	op_init(&op, c);
	r = get_socket(c, (int)c->args[0], &op);
	if (r == 0 && vlen > 0)
		r = read_mem(c->tid, x.vec, g->mmsg, vlen * sizeof(struct mmsghdr));
	if (r < 0 || vlen == 0) {
		op_release(&op);
		return still_waiting(c) ? r : GONE;
	}
	for (x.i = 0; x.i < vlen; x.i++) {
		struct op m;

		op_init(&m, c);
		m.sock = op.sock;
		m.domain = op.domain;
		m.type = op.type;
		m.fl = op.fl;
		m.flags = (int)c->args[3];
		r = get_message(c, &m, &g->mmsg[x.i].msg_hdr);
		if (!still_waiting(c)) {
			r = GONE;
		} else if (r == 0) {
			r = op_run(c, &m, false);
			/* Only the first message may wait for a worker. */
			if (r == OP_DEFER && x.i == 0)
				r = defer(c, &m, mmsg_finish, &x);
			else if (r == OP_DEFER)
				r = (long)x.i;
			else
				r = mmsg_finish(c, r, &x);
		} else if (x.i > 0) {
			r = (long)x.i;
		}
		m.sock = -1;  /* op owns it */
		op_release(&m);
		if (r == GONE || r == OP_DEFER || r < 0 || r == (long)x.i)
			break;
	}
	op_release(&op);
	return r;
}

/* The filter kills calls through another ABI before they are notified;
 * the gate checks again where it knows the native one. */
static bool native_arch(uint32_t arch)
{
#if defined(__x86_64__)
	return arch == AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
	return arch == AUDIT_ARCH_AARCH64;
#else
	(void)arch;
	return true;
#endif
}

int usock_gate_serve(struct usock_gate *g)
{
	struct call c;
	long r;

	memset(g->notif, 0, g->notif_size);
	if (ioctl(g->listener, SECCOMP_IOCTL_NOTIF_RECV, g->notif) < 0) {
		/* ENOENT: the caller died between poll() and here. */
		if (errno == EINTR || errno == ENOENT)
			return 0;
		return -errno;
	}
	memset(&c, 0, sizeof(c));
	c.g = g;
	c.id = g->notif->id;
	c.tid = (pid_t)g->notif->pid;
	c.args = g->notif->data.args;
	c.pidfd = pidfd_get(g, c.tid, false);
	if (c.pidfd < 0) {
		if (c.pidfd != -ESRCH)
			respond(g, c.id, -EACCES);
		return 0;
	}
	switch (native_arch(g->notif->data.arch) ? g->notif->data.nr : -1) {
	case __NR_connect:
		r = do_connect(&c);
		break;
	case __NR_sendto:
		r = do_sendto(&c);
		break;
	case __NR_sendmsg:
		r = do_sendmsg(&c);
		break;
	case __NR_sendmmsg:
		r = do_sendmmsg(&c);
		break;
	default:
		r = -ENOSYS;
		break;
	}
	if (r == -ESRCH)
		r = GONE;  /* the caller went away while we copied */
	if (r != OP_DEFER && r != GONE)
		respond(g, c.id, r);
	return 0;
}

bool usock_gate_reaped(struct usock_gate *g, pid_t pid, int wstatus)
{
	size_t i;

	for (i = 0; i < g->nworkers; i++) {
		if (g->workers[i].pid != pid)
			continue;
		/* A worker killed before answering (by the agent, where
		 * Landlock cannot scope signals): the call was interrupted.
		 * If it did answer, this answer finds no call. */
		if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
			respond(g, g->workers[i].id, -EINTR);
		g->workers[i] = g->workers[--g->nworkers];
		return true;
	}
	return false;
}

int usock_gate_fd(const struct usock_gate *g)
{
	return g->listener;
}

struct usock_gate *usock_gate_new(int listener, char *const *rw, size_t nrw,
				  char *err, size_t errlen)
{
	struct seccomp_notif_sizes sizes;
	struct usock_gate *g;
	size_t i;
	__u64 flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;

	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
		snprintf(err, errlen, "seccomp notification sizes: %s", strerror(errno));
		close(listener);
		return NULL;
	}
	g = util_xcalloc(1, sizeof(*g));
	g->listener = listener;
	g->diag = -1;
	for (i = 0; i < USOCK_PIDFDS; i++)
		g->pidfds[i].fd = -1;
	g->rw = rw;
	g->nrw = nrw;
	g->notif_size = sizes.seccomp_notif > sizeof(struct seccomp_notif)
				? sizes.seccomp_notif : sizeof(struct seccomp_notif);
	g->resp_size = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
			       ? sizes.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
	g->notif = util_xcalloc(1, g->notif_size);
	g->resp = util_xcalloc(1, g->resp_size);
	g->data = util_xmalloc(USOCK_SEND_MAX);
	g->ctl = util_xmalloc(USOCK_CTL_MAX + CMSG_SPACE(sizeof(struct ucred)));
	g->diagbuf = util_xmalloc(USOCK_DIAG_BUF);
	g->mmsg = util_xcalloc(USOCK_MMSG_MAX, sizeof(*g->mmsg));
	g->iov = util_xcalloc(USOCK_IOV_MAX, sizeof(*g->iov));
	/* Wake the caller on the gate's CPU (Linux 6.6): a round trip
	 * without a migration. Older kernels lack it; it only costs time. */
	(void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
	/* From here on init needs only what the gate uses (caps_set()):
	 * without CAP_DAC_OVERRIDE and the like, the gate resolves paths
	 * and performs calls with the agent's authority. */
	if (caps_apply(false) < 0) {
		snprintf(err, errlen, "limiting init's capabilities: %s", strerror(errno));
		goto fail;
	}
	return g;
fail:
	close(listener);
	free(g->notif);
	free(g->resp);
	free(g->data);
	free(g->ctl);
	free(g->diagbuf);
	free(g->mmsg);
	free(g->iov);
	free(g->mounts);
	free(g);
	return NULL;
}

/* --- the hand-off ---------------------------------------------------------- */

static void *handoff_thread(void *arg)
{
	struct usock_handoff *h = arg;
	char cbuf[CMSG_SPACE(sizeof(int))], one = 'L';
	struct iovec iov = { &one, 1 };
	struct msghdr m;
	struct cmsghdr *cm;
	size_t got = 0;
	int fd = -1;

	while (got < sizeof(fd)) {
		ssize_t n = read(h->pipe[0], (char *)&fd + got, sizeof(fd) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			h->result = -EPIPE;
			return NULL;
		}
		got += (size_t)n;
	}
	if (fd < 0) {
		h->result = fd;
		return NULL;
	}
	memset(&m, 0, sizeof(m));
	memset(cbuf, 0, sizeof(cbuf));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	h->result = sendmsg(h->chan, &m, MSG_NOSIGNAL) == 1 ? 0 : -errno;
	return NULL;
}

int usock_handoff_start(struct usock_handoff *h, int chan)
{
	pthread_t t;
	int r;

	memset(h, 0, sizeof(*h));
	h->chan = chan;
	if (pipe2(h->pipe, O_CLOEXEC) < 0)
		return -errno;
	r = pthread_create(&t, NULL, handoff_thread, h);
	if (r != 0) {
		close(h->pipe[0]);
		close(h->pipe[1]);
		return -r;
	}
	h->thread = (unsigned long)t;
	return 0;
}

int usock_handoff_finish(struct usock_handoff *h, int listener)
{
	int r;

	r = util_write_all(h->pipe[1], &listener, sizeof(listener));
	if (r < 0)
		close(h->pipe[1]);  /* the thread sees EOF */
	(void)pthread_join((pthread_t)h->thread, NULL);
	if (r == 0)
		close(h->pipe[1]);
	close(h->pipe[0]);
	if (listener >= 0)
		close(listener);
	if (r < 0)
		return r;
	return listener < 0 ? listener : h->result;
}

int usock_handoff_receive(int chan)
{
	char cbuf[CMSG_SPACE(sizeof(int))], one;
	struct iovec iov = { &one, 1 };
	struct msghdr m;
	struct cmsghdr *cm;
	ssize_t n;
	int fd;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	do
		n = recvmsg(chan, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -EPIPE;
	if (n < 0)
		return -errno;
	cm = CMSG_FIRSTHDR(&m);
	if (one != 'L' || !cm || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}
