/* SPDX-License-Identifier: Apache-2.0
 * probe - tries one thing a hostile agent would try and reports whether
 * the kernel let it. Used by the sandbox tests from inside the sandbox.
 *
 *   probe ACTION [ARGS]   prints "allowed" (exit 0) or "denied: ERRNO" (1)
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

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
	fprintf(stderr, "probe: unknown action '%s'\n", a);
	return 2;
}
