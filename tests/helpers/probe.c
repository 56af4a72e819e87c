/* SPDX-License-Identifier: Apache-2.0
 * probe - tries one thing a hostile agent would try and reports whether
 * the kernel let it. Used by the sandbox tests from inside the sandbox.
 *
 *   probe ACTION [ARGS]   prints "allowed" (exit 0) or "denied: ERRNO" (1)
 *
 * The race-* actions print counts (exit 0 if no host socket was reached);
 * the *-loop actions print the mean cost of one call in nanoseconds.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <termios.h>
#include <unistd.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int report(long r)
{
	if (r >= 0) {
		puts("allowed");
		return 0;
	}
	printf("denied: %s\n", strerrorname_np(errno));
	return 1;
}

static int tcp_connect(const char *ip, const char *port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return report(-1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
		return 2;
	return report(connect(fd, (struct sockaddr *)&sin, sizeof(sin)));
}

static int abstract_connect(const char *name)
{
	struct sockaddr_un sun;
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (fd < 0 || n + 1 > sizeof(sun.sun_path))
		return report(-1);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path + 1, name, n);
	return report(connect(fd, (struct sockaddr *)&sun,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)));
}

static int vm_read(pid_t pid)
{
	char buf[16];
	struct iovec local = { buf, sizeof(buf) }, remote = { (void *)0x400000, sizeof(buf) };

	return report(process_vm_readv(pid, &local, 1, &remote, 1, 0));
}

static int clone_ns(void)
{
	long r = syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, NULL);

	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return report(r);
}

static int iouring_connect(void)
{
	struct io_uring_params p;
	long fd;

	memset(&p, 0, sizeof(p));
	fd = syscall(SYS_io_uring_setup, 8, &p);
	/* Without a ring there is no io_uring socket or connect either. */
	return report(fd);
}


/* --- unix sockets (tests/integration/47-sandbox-unix-sockets.t) ---------- */

static socklen_t unix_addr(struct sockaddr_un *sun, const char *path)
{
	size_t n = strlen(path);

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (n >= sizeof(sun->sun_path)) {
		fprintf(stderr, "probe: path too long: %s\n", path);
		exit(2);
	}
	memcpy(sun->sun_path, path, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

static int unix_connect(int type, const char *path)
{
	struct sockaddr_un sun;
	socklen_t len = unix_addr(&sun, path);
	int fd = socket(AF_UNIX, type, 0);
	long r;

	if (fd < 0)
		return report(-1);
	r = connect(fd, (struct sockaddr *)&sun, len);
	/* A datagram socket connected to a host socket must not send. */
	if (r == 0 && type == SOCK_DGRAM)
		r = send(fd, "probe-connected", 15, 0);
	return report(r);
}

static int unix_send(const char *how, const char *path)
{
	struct sockaddr_un sun;
	socklen_t len = unix_addr(&sun, path);
	struct iovec iov = { "probe-datagram", 14 };
	struct msghdr m;
	struct mmsghdr mm[2];
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (fd < 0)
		return report(-1);
	memset(&m, 0, sizeof(m));
	m.msg_name = &sun;
	m.msg_namelen = len;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (!strcmp(how, "sendto"))
		return report(sendto(fd, "probe-datagram", 14, 0, (struct sockaddr *)&sun, len));
	if (!strcmp(how, "sendmsg"))
		return report(sendmsg(fd, &m, 0));
	memset(mm, 0, sizeof(mm));
	mm[0].msg_hdr = m;
	mm[1].msg_hdr = m;
	return report(sendmmsg(fd, mm, 2, 0));
}

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Binds a stream listener at @path (removing what is there first). */
static int own_listener(const char *path)
{
	struct sockaddr_un sun;
	socklen_t len = unix_addr(&sun, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	(void)unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, len) < 0 || listen(fd, 4096) < 0) {
		perror("probe: own listener");
		exit(2);
	}
	return fd;
}

/* Drains @lfd's accept queue; returns how many connections were there. */
static long drain(int lfd)
{
	long n = 0;
	int c;

	while ((c = accept(lfd, NULL, NULL)) >= 0) {
		close(c);
		n++;
	}
	return n;
}

struct race {
	atomic_int stop;
	long n;
	const char *a, *b;
	struct sockaddr_storage addr[2];
	socklen_t addrlen[2];
	struct sockaddr_storage shared;  /* flipped between addr[0] and addr[1] */
	int fd;                          /* the number that is swapped */
	int kinds[2][3];                 /* domain, type, protocol of each side */
};

static void *rename_loop(void *arg)
{
	struct race *r = arg;
	long i;

	for (i = 0; i < r->n && !atomic_load(&r->stop); i++)
		(void)syscall(SYS_renameat2, AT_FDCWD, r->a, AT_FDCWD, r->b, 2 /* EXCHANGE */);
	return NULL;
}

/* race-rename OWN HOST N: OWN (our listener) and HOST (a host socket in the
 * same directory) swap names all the while connect(OWN) is tried N times. */
static int race_rename(const char *own, const char *host, long n)
{
	struct race r;
	pthread_t t;
	long i, ok = 0, refused = 0, reached_own = 0;
	int lfd = own_listener(own);

	memset(&r, 0, sizeof(r));
	r.a = own;
	r.b = host;
	r.n = n * 4;
	pthread_create(&t, NULL, rename_loop, &r);
	for (i = 0; i < n; i++) {
		struct sockaddr_un sun;
		socklen_t len = unix_addr(&sun, own);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		if (connect(fd, (struct sockaddr *)&sun, len) == 0)
			ok++;
		else
			refused++;
		close(fd);
		reached_own += drain(lfd);
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	reached_own += drain(lfd);
	printf("connected %ld refused %ld own %ld host %ld\n", ok, refused, reached_own,
	       ok - reached_own);
	return ok == reached_own ? 0 : 1;
}

static void *flip_loop(void *arg)
{
	struct race *r = arg;
	long i;

	for (i = 0; !atomic_load(&r->stop); i++)
		memcpy(&r->shared, &r->addr[i & 1], sizeof(r->shared));
	return NULL;
}

/* race-memory OWN HOST N: connect() N times with an address another
 * thread keeps rewriting between OWN (our listener) and HOST. */
static int race_memory(const char *own, const char *host, long n)
{
	struct race r;
	pthread_t t;
	long i, ok = 0, reached_own = 0;
	int lfd = own_listener(own);

	memset(&r, 0, sizeof(r));
	unix_addr((struct sockaddr_un *)&r.addr[0], own);
	unix_addr((struct sockaddr_un *)&r.addr[1], host);
	pthread_create(&t, NULL, flip_loop, &r);
	for (i = 0; i < n; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		if (connect(fd, (struct sockaddr *)&r.shared, sizeof(struct sockaddr_un)) == 0)
			ok++;
		close(fd);
		reached_own += drain(lfd);
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	reached_own += drain(lfd);
	printf("connected %ld own %ld host %ld\n", ok, reached_own, ok - reached_own);
	return ok == reached_own ? 0 : 1;
}

static void *swap_loop(void *arg)
{
	struct race *r = arg;
	long i;

	for (i = 0; !atomic_load(&r->stop); i++) {
		int k = (int)(i & 1);
		int s = socket(r->kinds[k][0], r->kinds[k][1], r->kinds[k][2]);

		if (s >= 0) {
			dup2(s, r->fd);
			close(s);
		}
		memcpy(&r->shared, &r->addr[k], sizeof(r->shared));
	}
	return NULL;
}

/* race-fd stream|dgram HOST PORT N: call connect() (stream) or sendto()
 * (dgram) N times on one descriptor number that another thread keeps
 * replacing, alternately, by an IPv4 socket and a unix socket, and with
 * an address it keeps rewriting between 127.0.0.1:PORT and HOST: the
 * moment a unix socket and HOST meet, the host would be reached. */
static int race_fd(const char *kind, const char *host, const char *port, long n)
{
	bool dgram = !strcmp(kind, "dgram");
	struct sockaddr_in *sin;
	struct race r;
	pthread_t t;
	long i, ok = 0;

	memset(&r, 0, sizeof(r));
	sin = (struct sockaddr_in *)&r.addr[0];
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(port));
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	unix_addr((struct sockaddr_un *)&r.addr[1], host);
	r.kinds[0][0] = AF_INET;
	r.kinds[0][1] = dgram ? SOCK_DGRAM : SOCK_STREAM;
	r.kinds[1][0] = AF_UNIX;
	r.kinds[1][1] = dgram ? SOCK_DGRAM : SOCK_STREAM;
	r.fd = 100;
	pthread_create(&t, NULL, swap_loop, &r);
	for (i = 0; i < n; i++) {
		long x = dgram ? sendto(r.fd, "race", 4, 0, (struct sockaddr *)&r.shared,
					sizeof(struct sockaddr_un))
			       : connect(r.fd, (struct sockaddr *)&r.shared,
					 sizeof(struct sockaddr_un));

		if (x >= 0)
			ok++;
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	/* Success is possible only toward 127.0.0.1: the test reads the host
	 * listener's log to tell. */
	printf("calls %ld succeeded %ld\n", n, ok);
	return 0;
}

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg, c;

	while ((c = accept(lfd, NULL, NULL)) >= 0)
		close(c);
	return NULL;
}

/* connect-loop IP PORT N [nonblock]: N times socket, connect, close; IP
 * "self": to a listener of our own on 127.0.0.1 (a thread accepts). */
static int connect_loop(const char *ip, const char *port, long n, bool nonblock)
{
	struct sockaddr_in sin;
	socklen_t l = sizeof(sin);
	double t0, t1;
	long i, ok = 0;
	pthread_t t;
	int lfd;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	if (!strcmp(ip, "self")) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 4096) < 0 ||
		    getsockname(lfd, (struct sockaddr *)&sin, &l) < 0)
			return report(-1);
		pthread_create(&t, NULL, acceptor, &lfd);
	} else {
		sin.sin_port = htons((uint16_t)atoi(port));
		if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
			return 2;
	}
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
		int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));

		if (r == 0 || errno == EINPROGRESS)
			ok++;
		close(fd);
	}
	t1 = now_ns();
	printf("connect%s %.0f ns/call (%ld of %ld connected)\n", nonblock ? "-nonblocking" : "",
	       (t1 - t0) / (double)n, ok, n);
	return ok == n ? 0 : 1;
}

/* pipe-loop N: N round trips of one byte between two processes, the
 * floor of any hand-off to another process. */
static int pipe_loop(long n)
{
	int a[2], b[2];
	double t0, t1;
	char c = 'x';
	long i;
	pid_t pid;

	if (pipe(a) < 0 || pipe(b) < 0)
		return report(-1);
	pid = fork();
	if (pid == 0) {
		for (i = 0; i < n; i++)
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	t0 = now_ns();
	for (i = 0; i < n; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return report(-1);
	t1 = now_ns();
	waitpid(pid, NULL, 0);
	printf("pipe %.0f ns/call\n", (t1 - t0) / (double)n);
	return 0;
}

static void *sink(void *arg)
{
	int fd = *(int *)arg;
	char buf[65536];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

/* send-loop sendmsg|send|sendto N: N calls of 64 bytes on a connected TCP
 * socket to a listener of our own (a thread drains it). */
static int send_loop(const char *how, long n)
{
	struct sockaddr_in sin;
	socklen_t l = sizeof(sin);
	char buf[64] = "x";
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m;
	pthread_t t;
	double t0, t1;
	long i;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), c, a;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &l) < 0)
		return report(-1);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return report(-1);
	a = accept(lfd, NULL, NULL);
	pthread_create(&t, NULL, sink, &a);
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		ssize_t r = !strcmp(how, "sendmsg") ? sendmsg(c, &m, 0)
			    : !strcmp(how, "sendto") ? sendto(c, buf, sizeof(buf), 0,
							      (struct sockaddr *)&sin, sizeof(sin))
			    : send(c, buf, sizeof(buf), 0);

		if (r != (ssize_t)sizeof(buf))
			return report(-1);
	}
	t1 = now_ns();
	shutdown(c, SHUT_WR);
	pthread_join(t, NULL);
	printf("%s %.0f ns/call\n", how, (t1 - t0) / (double)n);
	return 0;
}

/* deny-listener CMD...: runs CMD where seccomp() may not create a
 * user-notification listener (as on a kernel or a container runtime that
 * does not allow it). */
static int deny_listener(char **cmd)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { ARRAY_LEN(f), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return report(-1);
	execvp(cmd[0], cmd);
	return report(-1);
}

struct own_gate {
	int listener;
	atomic_int stop;
};

/* Answers every notification of the agent's own listener "continue". */
static void *own_gate_loop(void *arg)
{
	struct own_gate *g = arg;

	while (!atomic_load(&g->stop)) {
		struct seccomp_notif n;
		struct seccomp_notif_resp r;
		struct pollfd p = { g->listener, POLLIN, 0 };

		if (poll(&p, 1, 100) != 1)
			continue;
		memset(&n, 0, sizeof(n));
		if (ioctl(g->listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
			continue;
		memset(&r, 0, sizeof(r));
		r.id = n.id;
		r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		(void)ioctl(g->listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
	}
	return NULL;
}

/* own-listener PATH: the agent stacks a filter of its own that notifies
 * connect() to a listener it holds, and answers "continue" (a newer
 * filter's notification wins a tie, and "continue" would skip the
 * sandbox's): then connects to the unix socket PATH. */
static int own_listener_bypass(const char *path)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { ARRAY_LEN(f), f };
	struct own_gate g;
	pthread_t t;
	int r;

	memset(&g, 0, sizeof(g));
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	g.listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (g.listener < 0)
		return report(-1);
	pthread_create(&t, NULL, own_gate_loop, &g);
	r = unix_connect(SOCK_STREAM, path);
	atomic_store(&g.stop, 1);
	pthread_join(t, NULL);
	return r;
}

/* int80 / x32: a getpid() through the i386 or x32 ABI, whose numbers the
 * sandbox's (x86-64) filter would not recognise: the process must die. */
static int other_abi(const char *which)
{
#if defined(__x86_64__)
	long r;

	if (!strcmp(which, "int80")) {
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
		printf("allowed %ld\n", r);
		return 0;
	}
	return report(syscall(0x40000000L | SYS_getpid));
#else
	(void)which;
	puts("skip: not x86-64");
	return 3;
#endif
}

int main(int argc, char **argv)
{
	const char *a = argc > 1 ? argv[1] : "";

	if (!strcmp(a, "raw"))
		return report(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
	if (!strcmp(a, "raw6"))
		return report(socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
	if (!strcmp(a, "packet"))
		return report(socket(AF_PACKET, SOCK_RAW, 0));
	if (!strcmp(a, "netlink-audit"))
		return report(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
	if (!strcmp(a, "netlink-route"))
		return report(socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	if (!strcmp(a, "vsock"))
		return report(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0));
	if (!strcmp(a, "iouring"))
		return iouring_connect();
	if (!strcmp(a, "tcp") && argc == 4)
		return tcp_connect(argv[2], argv[3]);
	if (!strcmp(a, "abstract") && argc == 3)
		return abstract_connect(argv[2]);
	if (!strcmp(a, "kill") && argc == 3)
		return report(kill(atoi(argv[2]), 0));
	if (!strcmp(a, "ptrace") && argc == 3)
		return report(ptrace(PTRACE_ATTACH, atoi(argv[2]), NULL, NULL));
	if (!strcmp(a, "vmread") && argc == 3)
		return vm_read(atoi(argv[2]));
	if (!strcmp(a, "unshare-user"))
		return report(unshare(CLONE_NEWUSER));
	if (!strcmp(a, "unshare-net"))
		return report(unshare(CLONE_NEWNET));
	if (!strcmp(a, "clone-netns"))
		return clone_ns();
	if (!strcmp(a, "mount"))
		return report(mount("none", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(a, "keyctl"))
		return report(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
				      KEY_SPEC_SESSION_KEYRING, 0));
	if (!strcmp(a, "bpf"))
		return report(syscall(SYS_bpf, 0, NULL, 0));
	if (!strcmp(a, "perf"))
		return report(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	if (!strcmp(a, "userfaultfd"))
		return report(syscall(SYS_userfaultfd, 0));
	if (!strcmp(a, "tiocsti")) {
		char c = 'x';

		return report(ioctl(0, TIOCSTI, &c));
	}
	if (!strcmp(a, "tiocsti-high")) {
		char c = 'x';

		/* The same request with junk in the upper 32 bits. */
		return report(syscall(SYS_ioctl, 0, 0x100000000UL | TIOCSTI, &c));
	}
	if (!strcmp(a, "unix-connect") && argc == 3)
		return unix_connect(SOCK_STREAM, argv[2]);
	if (!strcmp(a, "unix-seqpacket") && argc == 3)
		return unix_connect(SOCK_SEQPACKET, argv[2]);
	if (!strcmp(a, "unix-dgram-connect") && argc == 3)
		return unix_connect(SOCK_DGRAM, argv[2]);
	if ((!strcmp(a, "unix-sendto") || !strcmp(a, "unix-sendmsg") ||
	     !strcmp(a, "unix-sendmmsg")) && argc == 3)
		return unix_send(a + 5, argv[2]);
	if (!strcmp(a, "race-rename") && argc == 5)
		return race_rename(argv[2], argv[3], atol(argv[4]));
	if (!strcmp(a, "race-memory") && argc == 5)
		return race_memory(argv[2], argv[3], atol(argv[4]));
	if (!strcmp(a, "race-fd") && argc == 6)
		return race_fd(argv[2], argv[3], argv[4], atol(argv[5]));
	if (!strcmp(a, "connect-loop") && (argc == 5 || argc == 6))
		return connect_loop(argv[2], argv[3], atol(argv[4]), argc == 6);
	if (!strcmp(a, "int80") || !strcmp(a, "x32"))
		return other_abi(a);
	if (!strcmp(a, "own-listener") && argc == 3)
		return own_listener_bypass(argv[2]);
	if (!strcmp(a, "deny-listener") && argc >= 3)
		return deny_listener(argv + 2);
	if (!strcmp(a, "pipe-loop") && argc == 3)
		return pipe_loop(atol(argv[2]));
	if (!strcmp(a, "send-loop") && argc == 4)
		return send_loop(argv[2], atol(argv[3]));
	fprintf(stderr, "probe: unknown action '%s'\n", a);
	return 2;
}
