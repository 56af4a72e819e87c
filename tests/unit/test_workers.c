/* SPDX-License-Identifier: Apache-2.0
 * test_workers.c - proxy workers sharing one listening socket and the
 * per-client counts (struct proxy_shared, created before the fork): a
 * client's share holds across workers, and the counts of a worker that
 * died are released by proxy_shared_worker_gone().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy.h"
#include "proxy.h"
#include "tap.h"
#include "util.h"

#define LIMIT 3

static int listen_on(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ASSERT(listen(fd, 64) == 0);
	ASSERT(getsockname(fd, (struct sockaddr *)&sin, &sl) == 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static pid_t start_worker(int lfd, struct proxy_shared *sh, unsigned int worker)
{
	static const char pol[] = "{\"version\":1,\"mode\":\"enforce\","
				  "\"egress\":{\"resolver\":[\"127.0.0.1:9\"]}}";
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		struct policy_errors errs = { 0 };
		struct policy *p = policy_parse(pol, strlen(pol), NULL, &errs);
		struct proxy_opts o;
		struct proxy *px;
		char err[256];

		ASSERT(p);
		memset(&o, 0, sizeof(o));
		o.listen_fd = lfd;
		o.policy = p;
		o.signal_fd = -1;
		o.shared = sh;
		o.worker = worker;
		px = proxy_new(&o, err, sizeof(err));
		if (!px)
			_exit(1);
		proxy_run(px);
		_exit(0);
	}
	return pid;
}

/* Opens @n connections, each with an unfinished request head. */
static void open_some(uint16_t port, int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ASSERT(fds[i] >= 0);
		ASSERT(connect(fds[i], (struct sockaddr *)&sin, sizeof(sin)) == 0);
		ASSERT(send(fds[i], "GET http://x", 12, MSG_NOSIGNAL) == 12);
	}
	usleep(300 * 1000);
}

/* How many of @fds the proxy still holds (not closed on us). */
static int kept(const int *fds, int n)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		struct pollfd p = { fds[i], POLLIN, 0 };
		char c;

		if (poll(&p, 1, 0) == 0 || recv(fds[i], &c, 1, MSG_DONTWAIT) > 0)
			k++;
	}
	return k;
}

static void close_all(int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		close(fds[i]);
}

int main(void)
{
	char err[256];
	struct proxy_shared *sh = proxy_shared_new(2, 0, LIMIT, err, sizeof(err));
	int a[2], b[2], c[3], d[3];
	uint16_t port;
	int lfd = listen_on(&port);
	pid_t w0, w1;

	tap_ok(sh != NULL, "shared state for 2 workers");
	tap_is_int(proxy_shared_client_limit(sh), LIMIT, "its client limit is the one asked");
	tap_ok(proxy_shared_new(0, 0, 0, err, sizeof(err)) == NULL && strstr(err, "workers"),
	       "0 workers is refused (%s)", err);
	w0 = start_worker(lfd, sh, 0);
	usleep(200 * 1000);
	open_some(port, a, 2);
	tap_is_int(kept(a, 2), 2, "worker 0 holds the client's first 2 connections");
	/* worker 0 stops taking connections: worker 1 serves the socket */
	kill(w0, SIGSTOP);
	w1 = start_worker(lfd, sh, 1);
	usleep(200 * 1000);
	open_some(port, b, 2);
	tap_is_int(kept(b, 2), 1,
		   "worker 1 admits 1 more and closes the next: the share (3) counts both workers");
	/* worker 0 dies; until its counts are released they still count */
	kill(w0, SIGKILL);
	waitpid(w0, NULL, 0);
	open_some(port, c, 1);
	tap_is_int(kept(c, 1), 0, "a dead worker's connections still count until released");
	proxy_shared_worker_gone(sh, 0);
	open_some(port, d, 3);
	tap_is_int(kept(d, 3), 2, "released: the client holds 1 and gets 2 more (3 in all)");
	close_all(a, 2);
	close_all(b, 2);
	close_all(c, 1);
	close_all(d, 3);
	usleep(200 * 1000);
	open_some(port, d, 3);
	tap_is_int(kept(d, 3), 3, "once the client closed them, its whole share is free again");
	close_all(d, 3);
	kill(w1, SIGKILL);
	waitpid(w1, NULL, 0);
	proxy_shared_free(sh);
	close(lfd);
	return tap_done();
}
