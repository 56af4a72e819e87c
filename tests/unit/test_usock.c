/* SPDX-License-Identifier: Apache-2.0
 * test_usock.c - table tests of the unix-socket gate's pure parts: how an
 * AF_UNIX address is read (as the kernel reads it), /proc/self rewriting,
 * the fs.rw prefix rule, the NETLINK_SOCK_DIAG dump scanner and the
 * control-message walker; and the thread pidfd on this kernel and on the
 * path older kernels take.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "tap.h"
#include "usock.h"
#include "util.h"

#define K(x) USOCK_ADDR_##x

/* --- addresses ------------------------------------------------------------ */

struct addr_case {
	const char *what;
	int family;
	const char *path;       /* bytes after the family */
	size_t pathlen;         /* how many of them */
	long len;               /* the address length given; -1: exact */
	enum usock_addr_kind want;
	const char *want_path;
};

static const struct addr_case addr_cases[] = {
	{ "a path with its NUL", AF_UNIX, "/run/x.sock", 12, -1, K(PATH), "/run/x.sock" },
	{ "a path without NUL", AF_UNIX, "rel.sock", 8, -1, K(PATH), "rel.sock" },
	{ "a path ends at its first NUL", AF_UNIX, "a\0b", 3, -1, K(PATH), "a" },
	{ "a path ends at the length", AF_UNIX, "abcdef", 6, 2 + 3, K(PATH), "abc" },
	{ "abstract", AF_UNIX, "\0name", 5, -1, K(ABSTRACT), "" },
	{ "only the family (autobind)", AF_UNIX, "", 0, -1, K(ABSTRACT), "" },
	{ "too long for sockaddr_un", AF_UNIX, "x", 1, 111, K(INVALID), "" },
	{ "IPv4", AF_INET, "\0\120\177\0\0\1", 6, -1, K(NONE), "" },
	{ "a family alone, shorter than sa_family_t", AF_UNIX, "", 0, 1, K(NONE), "" },
};

static void test_addresses(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(addr_cases); i++) {
		const struct addr_case *t = &addr_cases[i];
		unsigned char buf[sizeof(struct sockaddr_storage)];
		char path[USOCK_PATH_MAX + 1];
		sa_family_t f = (sa_family_t)t->family;
		size_t len = t->len >= 0 ? (size_t)t->len : sizeof(f) + t->pathlen;
		enum usock_addr_kind k;

		memset(buf, 'Z', sizeof(buf));
		memcpy(buf, &f, sizeof(f));
		memcpy(buf + sizeof(f), t->path, t->pathlen);
		k = usock_addr_classify(buf, len, path);
		tap_is_str(usock_addr_kind_to_string(k), usock_addr_kind_to_string(t->want),
			   "address: %s", t->what);
		if (t->want == K(PATH))
			tap_is_str(path, t->want_path, "address: %s: the path", t->what);
	}
	{
		/* 108 bytes of path and no NUL: the whole sun_path. */
		struct sockaddr_un sun;
		char path[USOCK_PATH_MAX + 1];

		sun.sun_family = AF_UNIX;
		memset(sun.sun_path, 'p', sizeof(sun.sun_path));
		tap_ok(usock_addr_classify(&sun, sizeof(sun), path) == K(PATH) &&
		       strlen(path) == USOCK_PATH_MAX,
		       "address: a full 108-byte path is read whole");
	}
	tap_is_str(usock_addr_kind_to_string(USOCK_ADDR_COUNT), "?", "kind names end at COUNT");
}

/* --- /proc/self ------------------------------------------------------------- */

static void test_proc_self(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "/proc/self/fd/3", "/proc/42/fd/3" },
		{ "/proc/thread-self/cwd/s.sock", "/proc/42/cwd/s.sock" },
		{ "/proc/selfish/x", "/proc/selfish/x" },
		{ "/proc/self", "/proc/self" },
		{ "proc/self/fd/3", "proc/self/fd/3" },
		{ "/run/x.sock", "/run/x.sock" },
	};
	char out[64], tiny[8];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		tap_ok(usock_proc_self_rewrite(cases[i].in, 42, out, sizeof(out)),
		       "proc-self: %s fits", cases[i].in);
		tap_is_str(out, cases[i].want, "proc-self: %s", cases[i].in);
	}
	tap_ok(!usock_proc_self_rewrite("/proc/self/fd/3", 42, tiny, sizeof(tiny)),
	       "proc-self: a result that does not fit is refused");
}

/* --- fs.rw ---------------------------------------------------------------- */

static void test_under(void)
{
	static char *const dirs[] = { "/srv/data", "/var/run/docker.sock", "/opt/x/" };
	static const struct {
		const char *path;
		bool want;
	} cases[] = {
		{ "/srv/data", true },
		{ "/srv/data/a/b.sock", true },
		{ "/srv/database.sock", false },
		{ "/srv", false },
		{ "/var/run/docker.sock", true },
		{ "/var/run/docker.sock.bak", false },
		{ "/opt/x/s", true },
		{ "/opt/xy", false },
		{ "/home/u/s", false },
	};
	static char *const root[] = { "/" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++)
		tap_ok(usock_path_under(cases[i].path, dirs, ARRAY_SIZE(dirs)) == cases[i].want,
		       "fs.rw: %s is %s", cases[i].path, cases[i].want ? "under" : "not under");
	tap_ok(usock_path_under("/a", root, 1), "fs.rw: everything is under /");
	tap_ok(!usock_path_under("/a", dirs, 0), "fs.rw: nothing is under no path");
}

/* --- the diag dump ---------------------------------------------------------- */

/* Appends one SOCK_DIAG_BY_FAMILY message with a VFS attribute (when
 * @vfs) to @buf at @off; returns the new offset. */
static size_t put_sock(unsigned char *buf, size_t off, bool vfs, uint32_t dev, uint32_t ino)
{
	struct nlmsghdr h;
	struct unix_diag_msg m;
	struct nlattr a;
	struct unix_diag_vfs v;
	size_t start = off;

	memset(&m, 0, sizeof(m));
	m.udiag_family = AF_UNIX;
	off += NLMSG_HDRLEN;
	memcpy(buf + off, &m, sizeof(m));
	off += NLMSG_ALIGN(sizeof(m));
	/* An attribute the scanner must skip, then the VFS one. */
	a.nla_len = NLA_HDRLEN + 1;
	a.nla_type = UNIX_DIAG_SHUTDOWN;
	memcpy(buf + off, &a, sizeof(a));
	buf[off + NLA_HDRLEN] = 0;
	off += NLA_ALIGN(a.nla_len);
	if (vfs) {
		a.nla_len = NLA_HDRLEN + sizeof(v);
		a.nla_type = UNIX_DIAG_VFS;
		v.udiag_vfs_dev = dev;
		v.udiag_vfs_ino = ino;
		memcpy(buf + off, &a, sizeof(a));
		memcpy(buf + off + NLA_HDRLEN, &v, sizeof(v));
		off += NLA_ALIGN(a.nla_len);
	}
	memset(&h, 0, sizeof(h));
	h.nlmsg_len = (uint32_t)(off - start);
	h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	memcpy(buf + start, &h, sizeof(h));
	return off;
}

static size_t put_done(unsigned char *buf, size_t off)
{
	struct nlmsghdr h;

	memset(&h, 0, sizeof(h));
	h.nlmsg_len = NLMSG_LENGTH(sizeof(int));
	h.nlmsg_type = NLMSG_DONE;
	memcpy(buf + off, &h, sizeof(h));
	memset(buf + off + NLMSG_HDRLEN, 0, sizeof(int));
	return off + NLMSG_ALIGN(h.nlmsg_len);
}

static void test_diag(void)
{
	unsigned char buf[1024];
	size_t n;
	struct nlmsghdr h;
	struct nlmsgerr e;

	n = put_sock(buf, 0, true, 0x800001, 1234);
	n = put_sock(buf, n, false, 0, 0);
	tap_is_int(usock_diag_scan(buf, n, 0x800001, 1234), 1, "diag: a bound socket is found");
	tap_is_int(usock_diag_scan(buf, n, 0x800001, 1235), 0, "diag: another inode is not");
	tap_is_int(usock_diag_scan(buf, n, 0x800002, 1234), 0, "diag: nor the same inode on another device");
	n = put_done(buf, n);
	tap_is_int(usock_diag_scan(buf, n, 0x800001, 1234), 3, "diag: found, then the dump's end");
	tap_is_int(usock_diag_scan(buf, n, 1, 1), 2, "diag: the end alone");
	/* A message longer than the buffer, an attribute past its message. */
	n = put_sock(buf, 0, true, 1, 1);
	tap_is_int(usock_diag_scan(buf, n - 4, 1, 1), -EPROTO, "diag: a truncated message is malformed");
	memcpy(&h, buf, sizeof(h));
	h.nlmsg_len -= 4;
	memcpy(buf, &h, sizeof(h));
	tap_is_int(usock_diag_scan(buf, n - 4, 1, 1), -EPROTO,
		   "diag: an attribute overrunning its message is malformed");
	/* The dump's own error. */
	memset(&h, 0, sizeof(h));
	h.nlmsg_len = NLMSG_LENGTH(sizeof(e));
	h.nlmsg_type = NLMSG_ERROR;
	memset(&e, 0, sizeof(e));
	e.error = -ENOENT;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + NLMSG_HDRLEN, &e, sizeof(e));
	tap_is_int(usock_diag_scan(buf, h.nlmsg_len, 1, 1), -ENOENT, "diag: an error message is its errno");
	e.error = -100000;
	memcpy(buf + NLMSG_HDRLEN, &e, sizeof(e));
	tap_is_int(usock_diag_scan(buf, h.nlmsg_len, 1, 1), -EPROTO,
		   "diag: an error out of errno's range is malformed (found by fuzz_usock)");
	tap_is_int(usock_diag_scan(buf, 3, 1, 1), 0, "diag: less than a header is nothing yet");
}

/* --- control messages -------------------------------------------------------- */

/* Appends one control message to @buf at @off; returns the new offset. */
static size_t put_cmsg(unsigned char *buf, size_t off, int level, int type,
		       const void *data, size_t len)
{
	struct cmsghdr c;

	memset(&c, 0, sizeof(c));
	c.cmsg_len = CMSG_LEN(len);
	c.cmsg_level = level;
	c.cmsg_type = type;
	memcpy(buf + off, &c, sizeof(c));
	memcpy(buf + off + CMSG_LEN(0), data, len);
	return off + CMSG_SPACE(len);
}

static void test_cmsg(void)
{
	unsigned char buf[4096];
	struct usock_cmsg_scan s;
	int fds[3] = { 7, 8, 9 }, more[2] = { 10, 11 }, repl[5] = { 100, 101, 102, 103, 104 };
	int big[254];
	struct ucred u = { 4242, 0, 0 };
	struct cmsghdr c;
	size_t n, i;
	int tos = 1;

	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, fds, sizeof(fds));
	n = put_cmsg(buf, n, IPPROTO_IP, 1 /* IP_TOS */, &tos, sizeof(tos));
	n = put_cmsg(buf, n, SOL_SOCKET, SCM_RIGHTS, more, sizeof(more));
	n = put_cmsg(buf, n, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
	tap_is_int(usock_cmsg_scan(buf, n, &s), 0, "cmsg: a mixed buffer is well formed");
	tap_is_int(s.nfds, 5, "cmsg: five descriptors in two SCM_RIGHTS");
	tap_ok(s.nfds == 5 && s.fds[0] == 7 && s.fds[2] == 9 && s.fds[3] == 10 && s.fds[4] == 11,
	       "cmsg: in their order");
	tap_ok(s.creds && s.creds_pid == 4242, "cmsg: SCM_CREDENTIALS and its pid");
	tap_is_int(s.end, n, "cmsg: a message appended goes at the end");
	tap_ok(usock_cmsg_scan(buf, n + 8, &s) == 0 && s.end == n,
	       "cmsg: after the last header, not after trailing bytes the kernel ignores");
	usock_cmsg_replace_fds(buf, n, repl, 5);
	tap_is_int(usock_cmsg_scan(buf, n, &s), 0, "cmsg: still well formed after replacing");
	tap_ok(s.fds[0] == 100 && s.fds[4] == 104, "cmsg: every descriptor replaced in place");

	tap_is_int(usock_cmsg_scan(buf, 0, &s), 0, "cmsg: no control data");
	tap_ok(usock_cmsg_scan(buf, sizeof(struct cmsghdr) - 1, &s) == 0 && s.nfds == 0,
	       "cmsg: a buffer shorter than a header holds nothing (CMSG_FIRSTHDR)");
	memset(&c, 0, sizeof(c));
	c.cmsg_len = sizeof(c) - 1;
	memcpy(buf, &c, sizeof(c));
	tap_is_int(usock_cmsg_scan(buf, sizeof(c), &s), -EINVAL, "cmsg: a length below the header");
	c.cmsg_len = 64;
	memcpy(buf, &c, sizeof(c));
	tap_is_int(usock_cmsg_scan(buf, 32, &s), -EINVAL, "cmsg: a length past the buffer");
	c.cmsg_len = CMSG_LEN(sizeof(int)) + 2;
	c.cmsg_level = SOL_SOCKET;
	c.cmsg_type = SCM_RIGHTS;
	memcpy(buf, &c, sizeof(c));
	tap_ok(usock_cmsg_scan(buf, CMSG_SPACE(sizeof(int) + 2), &s) == 0 && s.nfds == 1,
	       "cmsg: SCM_RIGHTS counts whole ints (scm_fp_copy)");
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u) - 4);
	tap_is_int(usock_cmsg_scan(buf, n, &s), -EINVAL, "cmsg: a short SCM_CREDENTIALS");
	for (i = 0; i < ARRAY_SIZE(big); i++)
		big[i] = (int)i;
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, big, 253 * sizeof(int));
	tap_is_int(usock_cmsg_scan(buf, n, &s), 0, "cmsg: 253 descriptors (SCM_MAX_FD)");
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, big, 254 * sizeof(int));
	tap_is_int(usock_cmsg_scan(buf, n, &s), -EINVAL, "cmsg: 254 are refused");
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, big, 200 * sizeof(int));
	n = put_cmsg(buf, n, SOL_SOCKET, SCM_RIGHTS, big, 60 * sizeof(int));
	tap_is_int(usock_cmsg_scan(buf, n, &s), -EINVAL, "cmsg: and so are 260 in two messages");
}

/* The kernel's walk (for_each_cmsghdr over __cmsg_nxthdr) of @len bytes:
 * the number of SOL_SOCKET messages of @type, or -1 if __scm_send would
 * refuse the buffer. */
static int kernel_count(const unsigned char *buf, size_t len, int type)
{
	size_t off = 0;
	int count = 0;

	if (len < sizeof(struct cmsghdr))
		return 0;
	for (;;) {
		struct cmsghdr c;

		memcpy(&c, buf + off, sizeof(c));
		if (c.cmsg_len < sizeof(c) || c.cmsg_len > len - off)
			return -1;
		if (c.cmsg_level == SOL_SOCKET && c.cmsg_type == type)
			count++;
		off += CMSG_ALIGN(c.cmsg_len);
		if (off + sizeof(c) > len)
			return count;
	}
}

/* Issue 27: a sender that passes msg_controllen = CMSG_LEN(n) (its last
 * message unpadded, as Chromium does) must find the kernel's answer, not
 * EINVAL from credentials the gate appended in the padding. */
static void test_cmsg_unpadded(void)
{
	unsigned char buf[4096], plain[4096];
	struct usock_cmsg_scan s;
	struct ucred u = { 4242, 0, 0 }, other = { 4343, 0, 0 };
	unsigned char cred[CMSG_SPACE(sizeof(struct ucred))];
	int fds[4] = { 7, 8, 9, 10 };
	int repl[5] = { 17, 18, 19, 20, 21 }; /* one for each of 1 + k descriptors */
	size_t k, n;

	memset(cred, 0, sizeof(cred));
	put_cmsg(cred, 0, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
	for (k = 1; k <= 4; k++) {
		size_t len;

		/* one SCM_RIGHTS, unpadded */
		memset(buf, 0xa5, sizeof(buf));
		put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, fds, k * sizeof(int));
		len = CMSG_LEN(k * sizeof(int));
		tap_ok(usock_cmsg_scan(buf, len, &s) == 0 && s.nfds == k && !s.creds,
		       "cmsg: CMSG_LEN(%zu ints) is well formed", k);
		tap_is_int(s.end, CMSG_SPACE(k * sizeof(int)),
			   "cmsg: CMSG_LEN(%zu ints): the next header is aligned", k);
		n = usock_cmsg_append(buf, len, &s, cred, sizeof(cred));
		tap_ok(n == CMSG_SPACE(k * sizeof(int)) + sizeof(cred) &&
			       kernel_count(buf, n, SCM_RIGHTS) == 1 &&
			       kernel_count(buf, n, SCM_CREDENTIALS) == 1,
		       "cmsg: CMSG_LEN(%zu ints) + credentials: the kernel finds both", k);
		tap_ok(memcmp(buf + len, "\0\0\0\0\0\0\0", CMSG_SPACE(k * sizeof(int)) - len) == 0,
		       "cmsg: CMSG_LEN(%zu ints) + credentials: padding zeroed", k);
		tap_ok(usock_cmsg_scan(buf, n, &s) == 0 && s.nfds == k && s.creds &&
			       s.fds[k - 1] == fds[k - 1],
		       "cmsg: and so does the gate");

		/* SCM_RIGHTS, SCM_CREDENTIALS, SCM_RIGHTS unpadded */
		n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, fds, sizeof(int));
		n = put_cmsg(buf, n, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
		put_cmsg(buf, n, SOL_SOCKET, SCM_RIGHTS, fds, k * sizeof(int));
		len = n + CMSG_LEN(k * sizeof(int));
		memcpy(plain, buf, len);
		tap_ok(usock_cmsg_scan(buf, len, &s) == 0 && s.nfds == k + 1 && s.creds &&
			       s.creds_pid == 4242 && s.end == n + CMSG_SPACE(k * sizeof(int)),
		       "cmsg: three messages, the last unpadded");
		usock_cmsg_replace_fds(buf, len, repl, s.nfds);
		/* what the caller sent, with each descriptor in its place
		 * replaced: the first message's one, then the last's k */
		memcpy(plain + CMSG_LEN(0), &repl[0], sizeof(int));
		{
			size_t i;

			for (i = 0; i < k; i++)
				memcpy(plain + n + CMSG_LEN(0) + i * sizeof(int), &repl[1 + i],
				       sizeof(int));
		}
		tap_ok(memcmp(buf, plain, len) == 0 && kernel_count(buf, len, SCM_RIGHTS) == 2,
		       "cmsg: replacing keeps the caller's layout");
	}
	/* Two credentials that differ: one is forged. */
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_CREDENTIALS, &other, sizeof(other));
	n = put_cmsg(buf, n, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
	tap_ok(usock_cmsg_scan(buf, n, &s) == 0 && s.creds && s.creds_pid == 0,
	       "cmsg: two credentials with different pids match no sender");
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
	n = put_cmsg(buf, n, SOL_SOCKET, SCM_CREDENTIALS, &u, sizeof(u));
	tap_ok(usock_cmsg_scan(buf, n, &s) == 0 && s.creds && s.creds_pid == 4242,
	       "cmsg: two that agree are the sender's");
	/* Trailing bytes shorter than a header: ignored, then overwritten. */
	n = put_cmsg(buf, 0, SOL_SOCKET, SCM_RIGHTS, fds, 3 * sizeof(int));
	tap_ok(usock_cmsg_scan(buf, n + 12, &s) == 0 && s.end == n, "cmsg: trailing bytes ignored");
	n = usock_cmsg_append(buf, n + 12, &s, cred, sizeof(cred));
	tap_ok(kernel_count(buf, n, SCM_CREDENTIALS) == 1 && kernel_count(buf, n, SCM_RIGHTS) == 1,
	       "cmsg: credentials appended over them");
	/* No control message at all. */
	tap_ok(usock_cmsg_scan(buf, 0, &s) == 0 &&
		       usock_cmsg_append(buf, 0, &s, cred, sizeof(cred)) == sizeof(cred) &&
		       kernel_count(buf, sizeof(cred), SCM_CREDENTIALS) == 1,
	       "cmsg: credentials alone");
}

/* --- thread pidfds -------------------------------------------------------------- */

struct thread_arg {
	pid_t tid;
	int ready[2], go[2];
};

static void *thread_main(void *arg)
{
	struct thread_arg *t = arg;
	char c;

	t->tid = (pid_t)syscall(SYS_gettid);
	if (write(t->ready[1], "r", 1) != 1 || read(t->go[0], &c, 1) != 1)
		t->tid = -1;
	return NULL;
}

static void test_pidfd(void)
{
	struct thread_arg t;
	pthread_t th;
	char c;
	int legacy, fresh, copy;

	if (pipe(t.ready) < 0 || pipe(t.go) < 0 ||
	    pthread_create(&th, NULL, thread_main, &t) != 0) {
		tap_ok(false, "pidfd: cannot start a thread");
		return;
	}
	if (read(t.ready[0], &c, 1) != 1) {
		tap_ok(false, "pidfd: the thread did not start");
		return;
	}
	/* The path of kernels before 6.9: the group's pidfd, after kcmp()
	 * showed the thread shares its leader's fd table. */
	legacy = usock_thread_pidfd(t.tid, true);
	tap_ok(legacy >= 0, "pidfd: a thread sharing the fd table gets the group's pidfd");
	copy = legacy >= 0 ? (int)syscall(SYS_pidfd_getfd, legacy, t.go[1], 0) : -1;
	tap_ok(copy >= 0, "pidfd: and pidfd_getfd() reads that table");
	if (copy >= 0)
		close(copy);
	fresh = usock_thread_pidfd(t.tid, false);
	tap_ok(fresh >= 0, "pidfd: this kernel's own way (PIDFD_THREAD, or the same fallback)");
	tap_is_int(usock_thread_pidfd(999999999, false), -ESRCH, "pidfd: no such thread");
	tap_ok(write(t.go[1], "q", 1) == 1, "pidfd: the thread is told to end");
	pthread_join(th, NULL);
	if (legacy >= 0)
		close(legacy);
	if (fresh >= 0)
		close(fresh);
	close(t.ready[0]);
	close(t.ready[1]);
	close(t.go[0]);
	close(t.go[1]);
}

int main(void)
{
	test_addresses();
	test_proc_self();
	test_under();
	test_diag();
	test_cmsg();
	test_cmsg_unpadded();
	test_pidfd();
	return tap_done();
}
