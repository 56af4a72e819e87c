/* SPDX-License-Identifier: Apache-2.0
 * test_conncount.c - a connection that its first step closes gives its
 * slot of the connection limit back.
 *
 * A proxy (forked) with --max-conns 1 and a transparent listener: a
 * connection to that listener that was not redirected has no original
 * destination, and tlisten_begin() refuses and closes it at once, inside
 * the accept. Its slot must be released by that close; were it counted
 * only after its first step, the count would leak and, the limit being
 * one, every later connection would be refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "policy.h"
#include "proxy.h"
#include "tap.h"
#include "util.h"

static int listen_on(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	ASSERT(fd >= 0);
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ASSERT(listen(fd, 16) == 0);
	ASSERT(getsockname(fd, (struct sockaddr *)&sin, &sl) == 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static int dial(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ASSERT(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	return fd;
}

/* Everything the peer sends until it closes (or 10 s of silence). */
static void read_all(int fd, struct buf *b)
{
	for (;;) {
		char tmp[1024];
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);

		if (n <= 0)
			return;
		buf_append(b, tmp, (size_t)n);
	}
}

static int64_t no_record(void *arg, const char *type, enum receipt_decision d,
			 enum receipt_point point, const char *rule, json_t *subject,
			 const char *reason)
{
	(void)arg;
	(void)type;
	(void)d;
	(void)point;
	(void)rule;
	(void)reason;
	(void)subject; /* borrowed: conn_record_at() drops it */
	return 1;
}

static pid_t start_proxy(uint16_t *port, uint16_t *tport)
{
	static const char pol[] =
		"{\"version\":1,\"mode\":\"enforce\",\"egress\":{\"allow\":[\"127.0.0.1:*\"],"
		"\"resolver\":[\"127.0.0.1:9\"]}}";
	int lfd = listen_on(port), tfd = listen_on(tport);
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		struct policy_errors errs = { 0 };
		struct policy *p = policy_parse(pol, strlen(pol), NULL, &errs);
		struct proxy_opts o;
		struct proxy *px;
		char err[256];

		signal(SIGPIPE, SIG_IGN);
		ASSERT(p);
		memset(&o, 0, sizeof(o));
		o.listen_fd = lfd;
		o.policy = p;
		o.record = no_record;
		o.signal_fd = -1;
		o.max_conns = 1;
		o.client_limit = PROXY_CLIENT_LIMIT_NONE;
		o.tlisten_fds = &tfd;
		o.ntlisten = 1;
		px = proxy_new(&o, err, sizeof(err));
		if (!px) {
			fprintf(stderr, "proxy_new: %s\n", err);
			_exit(1);
		}
		proxy_run(px);
		_exit(0);
	}
	close(lfd);
	close(tfd);
	return pid;
}

int main(void)
{
	uint16_t port, tport;
	pid_t pid = start_proxy(&port, &tport);
	struct buf b = { 0 };
	int i, fd;

	/* Three connections to the transparent listener, none redirected:
	 * each is closed without a byte. */
	for (i = 0; i < 3; i++) {
		fd = dial(tport);
		read_all(fd, &b);
		close(fd);
	}
	tap_is_int((long long)b.len, 0, "unredirected transparent connections: closed, nothing said");

	/* The one slot is free again: a plain connection is served (a
	 * request the proxy refuses is answered, not closed unheard). */
	fd = dial(port);
	ASSERT(util_write_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27) == 0);
	read_all(fd, &b);
	close(fd);
	tap_ok(b.len > 9 && memcmp(b.data, "HTTP/1.1 ", 9) == 0,
	       "after them the limit of one still admits a connection (%.*s)",
	       (int)(b.len > 12 ? 12 : b.len), b.data ? b.data : "");
	buf_free(&b);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return tap_done();
}
