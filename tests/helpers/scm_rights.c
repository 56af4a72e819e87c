/* SPDX-License-Identifier: Apache-2.0
 * scm_rights - passes descriptors over unix sockets the way real programs
 * lay out their control messages, and checks that they arrive (issue 27:
 * Chromium's msg_controllen = CMSG_LEN(n), the last message unpadded).
 *
 *   scm_rights DIR   runs every case on socketpairs (stream, datagram,
 *                    seqpacket) and on pathname sockets bound in DIR
 *                    (stream, unconnected datagram with msg_name), with
 *                    sendmsg() and (a datagram socketpair) sendmmsg(); prints
 *                    "ok NAME" or "not ok NAME: WHY" for each and exits 1
 *                    if any failed
 *   scm_rights refuse  prints the errno of a sendmsg with a malformed
 *                    control message and of one with credentials naming
 *                    another pid ("EINVAL EPERM" without privilege)
 *
 * Each case sends one byte with k = 1..4 descriptors (read ends of
 * distinct pipes), to a receiver with and without SO_PASSCRED: SCM_RIGHTS
 * alone (CMSG_LEN and CMSG_SPACE), after SCM_CREDENTIALS, after another
 * SCM_RIGHTS, and before SCM_CREDENTIALS (itself unpadded). The receiver
 * checks the byte, every descriptor (device and inode, in order) and,
 * with SO_PASSCRED, credentials naming the sender.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define KMAX 4
#define CTL_MAX 512

static int failures;

enum layout { RIGHTS_LEN, RIGHTS_SPACE, CREDS_RIGHTS, RIGHTS_RIGHTS, RIGHTS_CREDS, LAYOUTS };
static const char *const layout_names[] = {
	"rights CMSG_LEN", "rights CMSG_SPACE", "creds+rights CMSG_LEN",
	"rights+rights CMSG_LEN", "rights+creds CMSG_LEN",
};

struct chan {
	const char *name;
	int tx, rx;
	struct sockaddr_un to;  /* for an unconnected datagram socket */
	socklen_t tolen;
	bool mmsg;              /* send with sendmmsg() */
};

static void result(bool good, const char *chan, const char *what, int k, int passcred,
		   const char *why)
{
	if (good) {
		printf("ok %s: %s k=%d passcred=%d\n", chan, what, k, passcred);
	} else {
		printf("not ok %s: %s k=%d passcred=%d: %s\n", chan, what, k, passcred, why);
		failures++;
	}
	fflush(stdout);
}

/* Appends a control message at @off of @ctl; returns the offset of the
 * next one (CMSG_SPACE) and sets *@unpadded to where this one ends. */
static size_t put(unsigned char *ctl, size_t off, int type, const void *data, size_t len,
		  size_t *unpadded)
{
	struct cmsghdr h;

	memset(&h, 0, sizeof(h));
	h.cmsg_len = CMSG_LEN(len);
	h.cmsg_level = SOL_SOCKET;
	h.cmsg_type = type;
	memcpy(ctl + off, &h, sizeof(h));
	memcpy(ctl + off + CMSG_LEN(0), data, len);
	*unpadded = off + CMSG_LEN(len);
	return off + CMSG_SPACE(len);
}

static int one_case(struct chan *c, enum layout l, int k, int passcred)
{
	unsigned char ctl[CTL_MAX] __attribute__((aligned(8)));
	unsigned char rctl[CTL_MAX] __attribute__((aligned(8)));
	int pipes[KMAX][2], fds[KMAX + 1], got[2 * KMAX + 2], ngot = 0, i, nsent = k;
	struct ucred me = { getpid(), getuid(), getgid() }, rcred;
	bool have_cred = false;
	struct cmsghdr *h;
	struct msghdr m;
	struct iovec iov;
	size_t off = 0, end = 0;
	char byte = 'x', rbyte = 0;
	char why[160] = "";
	ssize_t n;

	if (setsockopt(c->rx, SOL_SOCKET, SO_PASSCRED, &passcred, sizeof(passcred)) < 0)
		return perror("SO_PASSCRED"), -1;
	for (i = 0; i < k; i++)
		if (pipe(pipes[i]) < 0)
			return perror("pipe"), -1;
	for (i = 0; i < k; i++)
		fds[i] = pipes[i][0];
	memset(ctl, 0xa5, sizeof(ctl));
	switch (l) {
	case RIGHTS_LEN:
		put(ctl, 0, SCM_RIGHTS, fds, k * sizeof(int), &end);
		break;
	case RIGHTS_SPACE:
		end = put(ctl, 0, SCM_RIGHTS, fds, k * sizeof(int), &end);
		break;
	case CREDS_RIGHTS:
		off = put(ctl, 0, SCM_CREDENTIALS, &me, sizeof(me), &end);
		put(ctl, off, SCM_RIGHTS, fds, k * sizeof(int), &end);
		break;
	case RIGHTS_RIGHTS:
		/* the first descriptor alone, then all k (k + 1 in all) */
		off = put(ctl, 0, SCM_RIGHTS, fds, sizeof(int), &end);
		put(ctl, off, SCM_RIGHTS, fds, k * sizeof(int), &end);
		nsent = k + 1;
		break;
	case RIGHTS_CREDS:
		off = put(ctl, 0, SCM_RIGHTS, fds, k * sizeof(int), &end);
		put(ctl, off, SCM_CREDENTIALS, &me, sizeof(me), &end);
		break;
	case LAYOUTS:
		break;
	}
	memset(&m, 0, sizeof(m));
	iov.iov_base = &byte;
	iov.iov_len = 1;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = end;
	if (c->tolen) {
		m.msg_name = &c->to;
		m.msg_namelen = c->tolen;
	}
	if (c->mmsg) {
		struct mmsghdr mm;

		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr = m;
		n = sendmmsg(c->tx, &mm, 1, MSG_DONTWAIT);
		if (n == 1)
			n = (ssize_t)mm.msg_len;
	} else {
		n = sendmsg(c->tx, &m, MSG_DONTWAIT);
	}
	if (n != 1) {
		snprintf(why, sizeof(why), "sendmsg (controllen %zu): %s", end,
			 n < 0 ? strerror(errno) : "short");
		goto out;
	}

	memset(&m, 0, sizeof(m));
	iov.iov_base = &rbyte;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = rctl;
	m.msg_controllen = sizeof(rctl);
	n = recvmsg(c->rx, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n != 1 || rbyte != 'x') {
		snprintf(why, sizeof(why), "recvmsg: %s", n < 0 ? strerror(errno) : "wrong data");
		goto out;
	}
	if (m.msg_flags & MSG_CTRUNC) {
		snprintf(why, sizeof(why), "control data truncated");
		goto out;
	}
	for (h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
			size_t cnt = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int), j;

			for (j = 0; j < cnt && ngot < (int)(sizeof(got) / sizeof(got[0])); j++)
				memcpy(&got[ngot++], CMSG_DATA(h) + j * sizeof(int), sizeof(int));
		} else if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS) {
			memcpy(&rcred, CMSG_DATA(h), sizeof(rcred));
			have_cred = true;
		}
	}
	if (ngot != nsent) {
		snprintf(why, sizeof(why), "%d descriptors arrived, not %d", ngot, nsent);
		goto out;
	}
	for (i = 0; i < nsent; i++) {
		/* RIGHTS_RIGHTS sends fds[0] first, then fds[0..k-1] */
		int want = l == RIGHTS_RIGHTS ? fds[i == 0 ? 0 : i - 1] : fds[i];
		struct stat a, b;

		if (fstat(got[i], &a) < 0 || fstat(want, &b) < 0 || a.st_dev != b.st_dev ||
		    a.st_ino != b.st_ino) {
			snprintf(why, sizeof(why), "descriptor %d is not the one sent", i);
			goto out;
		}
	}
	if (passcred && (!have_cred || rcred.pid != me.pid || rcred.uid != me.uid ||
			 rcred.gid != me.gid)) {
		snprintf(why, sizeof(why), "credentials: %s",
			 have_cred ? "not the sender's" : "none arrived");
		goto out;
	}
	if (!passcred && have_cred) {
		snprintf(why, sizeof(why), "credentials arrived without SO_PASSCRED");
		goto out;
	}
out:
	result(why[0] == 0, c->name, layout_names[l], k, passcred, why);
	for (i = 0; i < ngot; i++)
		close(got[i]);
	for (i = 0; i < k; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	return 0;
}

static int run_all(struct chan *c)
{
	int l, k, pc;

	for (l = 0; l < LAYOUTS; l++)
		for (k = 1; k <= KMAX; k++)
			for (pc = 0; pc <= 1; pc++)
				if (one_case(c, (enum layout)l, k, pc) < 0)
					return -1;
	return 0;
}

static int pair(const char *name, int type, bool mmsg)
{
	struct chan c;
	int sv[2], r;

	memset(&c, 0, sizeof(c));
	c.name = name;
	c.mmsg = mmsg;
	if (socketpair(AF_UNIX, type, 0, sv) < 0)
		return perror("socketpair"), -1;
	c.tx = sv[0];
	c.rx = sv[1];
	r = run_all(&c);
	close(sv[0]);
	close(sv[1]);
	return r;
}

static int path_stream(const char *dir)
{
	struct sockaddr_un a;
	struct chan c;
	int l, r;

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/scm-%d.sock", dir, (int)getpid());
	unlink(a.sun_path);
	memset(&c, 0, sizeof(c));
	c.name = "path stream";
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	c.tx = socket(AF_UNIX, SOCK_STREAM, 0);
	if (l < 0 || c.tx < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    connect(c.tx, (struct sockaddr *)&a, sizeof(a)) < 0 || (c.rx = accept(l, NULL, NULL)) < 0)
		return perror("path stream"), -1;
	r = run_all(&c);
	close(l);
	close(c.tx);
	close(c.rx);
	unlink(a.sun_path);
	return r;
}

static int path_dgram(const char *dir)
{
	struct chan c;
	int r;

	memset(&c, 0, sizeof(c));
	c.name = "path dgram";
	c.to.sun_family = AF_UNIX;
	snprintf(c.to.sun_path, sizeof(c.to.sun_path), "%s/scm-%d.dgram", dir, (int)getpid());
	c.tolen = sizeof(c.to);
	unlink(c.to.sun_path);
	c.rx = socket(AF_UNIX, SOCK_DGRAM, 0);
	c.tx = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (c.rx < 0 || c.tx < 0 || bind(c.rx, (struct sockaddr *)&c.to, c.tolen) < 0)
		return perror("path dgram"), -1;
	r = run_all(&c);
	close(c.tx);
	close(c.rx);
	unlink(c.to.sun_path);
	return r;
}

static const char *errname(int e)
{
	switch (e) {
	case 0: return "ok";
	case EINVAL: return "EINVAL";
	case EPERM: return "EPERM";
	case ESRCH: return "ESRCH";
	case EACCES: return "EACCES";
	default: return strerror(e);
	}
}

/* A header longer than the buffer, then credentials naming another pid. */
static int refuse(void)
{
	unsigned char ctl[CTL_MAX] __attribute__((aligned(8)));
	struct ucred other = { getppid() > 1 ? getppid() : 1, getuid(), getgid() };
	int sv[2], fd = 0, e1, e2;
	struct cmsghdr *h;
	struct msghdr m;
	struct iovec iov;
	size_t end;
	char byte = 'x';

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0)
		return perror("socketpair"), 2;
	memset(&m, 0, sizeof(m));
	iov.iov_base = &byte;
	iov.iov_len = 1;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	memset(ctl, 0, sizeof(ctl));
	put(ctl, 0, SCM_RIGHTS, &fd, sizeof(fd), &end);
	h = (struct cmsghdr *)(void *)ctl;
	h->cmsg_len = CMSG_LEN(2 * sizeof(int));
	m.msg_controllen = end;
	e1 = sendmsg(sv[0], &m, MSG_DONTWAIT) < 0 ? errno : 0;
	put(ctl, 0, SCM_CREDENTIALS, &other, sizeof(other), &end);
	m.msg_controllen = end;
	e2 = sendmsg(sv[0], &m, MSG_DONTWAIT) < 0 ? errno : 0;
	printf("%s %s\n", errname(e1), errname(e2));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "refuse") == 0)
		return refuse();
	if (argc != 2) {
		fprintf(stderr, "usage: scm_rights DIR | refuse\n");
		return 2;
	}
	if (pair("pair stream", SOCK_STREAM, false) < 0 || pair("pair dgram", SOCK_DGRAM, false) < 0 ||
	    pair("pair seqpacket", SOCK_SEQPACKET, false) < 0 ||
	    pair("pair dgram sendmmsg", SOCK_DGRAM, true) < 0 || path_stream(argv[1]) < 0 ||
	    path_dgram(argv[1]) < 0)
		return 2;
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}
