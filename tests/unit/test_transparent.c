/* SPDX-License-Identifier: Apache-2.0
 * test_transparent.c - transparent.c in fresh network namespaces: the
 * ruleset's text, the refusals (bad configuration, an interface besides
 * lo, a second setup), what a connection sees before and after setup
 * (ENETUNREACH, then the listener with its original destination), a
 * client that connects to the listener directly, UDP, the stub's socket
 * served with transparent_stub_serve(), and the doctor's self-test.
 *
 * Each case runs in a forked child that unshares a user and network
 * namespace of its own (it has only lo; addresses like 203.0.113.9 are
 * never reachable from it) and reports its checks over a pipe, one line
 * each, which the parent turns into TAP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dnsstub.h"
#include "policy.h"
#include "tap.h"
#include "transparent.h"
#include "util.h"

static FILE *report;

/* In a child: one check, sent to the parent. */
__attribute__((format(printf, 2, 3))) static void check(bool cond, const char *fmt,
							 ...)
{
	va_list ap;

	fprintf(report, "%d ", cond ? 1 : 0);
	va_start(ap, fmt);
	vfprintf(report, fmt, ap);
	va_end(ap);
	fputc('\n', report);
	fflush(report);
}

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = util_write_all(fd, text, strlen(text)) == 0;
	close(fd);
	return ok;
}

/* New user and network namespaces, as root of the user namespace (so
 * that ip(8), run from here, keeps its capabilities across exec). */
static bool enter_namespaces(void)
{
	char line[64];
	uid_t uid = getuid();
	gid_t gid = getgid();

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return false;
	(void)write_file("/proc/self/setgroups", "deny");
	snprintf(line, sizeof(line), "0 %u 1\n", (unsigned int)uid);
	if (!write_file("/proc/self/uid_map", line))
		return false;
	snprintf(line, sizeof(line), "0 %u 1\n", (unsigned int)gid);
	return write_file("/proc/self/gid_map", line);
}

/* Runs @fn in a child in fresh user and network namespaces; every line
 * it reports becomes a TAP line here, and its exit must be clean. */
static void in_netns(const char *what, void (*fn)(void))
{
	int fds[2];
	pid_t pid;
	FILE *in;
	char line[1024];
	int status, lines = 0;

	ASSERT(pipe(fds) == 0);
	fflush(stdout);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		report = fdopen(fds[1], "w");
		if (!report)
			_exit(3);
		alarm(30);
		if (!enter_namespaces()) {
			check(false, "%s: unshare: %s", what, strerror(errno));
			_exit(2);
		}
		fn();
		fclose(report);
		_exit(0);
	}
	close(fds[1]);
	in = fdopen(fds[0], "r");
	ASSERT(in);
	while (fgets(line, sizeof(line), in)) {
		line[strcspn(line, "\n")] = '\0';
		tap_ok(line[0] == '1', "%s: %s", what, line + 2);
		lines++;
	}
	fclose(in);
	ASSERT(waitpid(pid, &status, 0) == pid);
	tap_ok(lines > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "%s: the child reported %d checks and exited cleanly", what, lines);
}

static struct addr A(const char *s)
{
	struct addr a;

	ASSERT(addr_parse(s, &a));
	return a;
}

static socklen_t sockaddr_of(const char *ip, uint16_t port, struct sockaddr_storage *ss)
{
	struct addr a = A(ip);

	memset(ss, 0, sizeof(*ss));
	if (a.family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, a.bytes, 4);
		return sizeof(*s);
	}
	{
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		memcpy(&s->sin6_addr, a.bytes, 16);
		return sizeof(*s);
	}
}

/* A non-blocking connect to @ip:@port: 0 if under way or done, else the
 * errno. The socket goes into *fd. */
static int try_connect(const char *ip, uint16_t port, int *fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, port, &ss);

	*fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return errno;
	if (connect(*fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS)
		return 0;
	return errno;
}

/* Accepts on @lfd within a second: the descriptor or -1. */
static int accept_within(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	if (poll(&p, 1, 1000) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static int udp_send(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, port, &ss);
	int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return errno;
	rc = sendto(fd, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&ss, sl) == 1 ? 0 : errno;
	close(fd);
	return rc;
}

static bool ipv6_here(void)
{
	return transparent_has_ipv6();
}

/* ------------------------------------------------------------------ */

static void test_ruleset_text(void)
{
	struct transparent_config cfg;
	char buf[2048];

	transparent_config_default(&cfg, 4321);
	tap_ok(transparent_ruleset(&cfg, true, buf, sizeof(buf)), "the ruleset fits");
	tap_ok(strncmp(buf, "add table inet airlock\ndelete table inet airlock\n", 49) == 0,
	       "it replaces the table inet airlock whole");
	tap_ok(strstr(buf, "meta l4proto tcp redirect to :4321\n") != NULL,
	       "TCP is redirected to the listener's port");
	tap_ok(strstr(buf, "ip daddr 127.0.0.0/8 return\n") &&
		       strstr(buf, "ip6 daddr ::1 return\n"),
	       "loopback is not redirected (IPv4 and IPv6)");
	tap_ok(strstr(buf, "ip daddr 127.0.0.53 udp dport 53 accept\n") &&
		       strstr(buf, "ip saddr 127.0.0.53 udp sport 53 accept\n"),
	       "DNS to the stub and its answers pass");
	tap_ok(strstr(buf, "meta l4proto udp drop\n") &&
		       strstr(buf, "policy drop;") && strstr(buf, "fib daddr type local accept"),
	       "other UDP is dropped, and everything not local");
	tap_ok(transparent_ruleset(&cfg, false, buf, sizeof(buf)) &&
		       strstr(buf, "ip6") == NULL,
	       "without IPv6 no ip6 rule");
	tap_ok(!transparent_ruleset(&cfg, true, buf, 100), "a short buffer: false");
	tap_ok(transparent_resolv_conf(&cfg.stub, buf, sizeof(buf)) &&
		       strstr(buf, "\nnameserver 127.0.0.53\n") != NULL &&
		       strstr(buf, "search") == NULL,
	       "resolv.conf names the stub only");
	tap_ok(!transparent_resolv_conf(&cfg.stub, buf, 20), "resolv.conf: a short buffer");
}

static void bad_config(void)
{
	struct transparent_config cfg;
	char err[256] = "";
	int fd;

	transparent_config_default(&cfg, 0);
	check(transparent_setup(&cfg, err, sizeof(err)) == -EINVAL && err[0],
	      "port 0 is refused with a reason (%s)", err);
	transparent_config_default(&cfg, 4000);
	cfg.stub = A("203.0.113.53");
	err[0] = '\0';
	check(transparent_setup(&cfg, err, sizeof(err)) == -EINVAL && err[0],
	      "a stub that is not loopback is refused");
	check(try_connect("203.0.113.9", 80, &fd) == ENETUNREACH,
	      "nothing was set up: 203.0.113.9 is unreachable");
	close(fd);
}

static void interface_down(void)
{
	char err[256] = "";

	check(system("ip link add airlockv0 type veth peer name airlockv1") == 0,
	      "a veth pair in the namespace, down");
	check(transparent_selftest(err, sizeof(err)) == 0,
	      "interfaces that are down (as the kernel's fallback tunnels) do not "
	      "stop the self-test (%s)", err[0] ? err : "ok");
}

static void interface_up(void)
{
	struct transparent_config cfg;
	char err[256] = "";
	int fd;

	/* Only one end up: the refusal must name that one, whatever order
	 * the kernel lists the interfaces in. */
	check(system("ip link add airlockv0 type veth peer name airlockv1 && "
		     "ip link set airlockv0 up") == 0,
	      "a veth pair in the namespace, one end up");
	transparent_config_default(&cfg, 4000);
	check(transparent_setup(&cfg, err, sizeof(err)) == -EEXIST &&
		      strstr(err, "airlockv0 up besides lo") != NULL,
	      "setup refuses a namespace with another interface up (%s)", err);
	check(try_connect("203.0.113.9", 80, &fd) == ENETUNREACH,
	      "and left no route behind");
	close(fd);
	err[0] = '\0';
	check(transparent_selftest(err, sizeof(err)) == -EEXIST,
	      "the self-test refuses it too, before sending anything");
}

static void redirect(void)
{
	struct transparent_config cfg;
	struct addr a;
	uint16_t port = 0, oport = 0;
	char err[256] = "", text[ADDR_STRLEN];
	int lfds[2], cfd, afd, rc;

	/* Before: the namespace has only lo, and it is down. */
	rc = try_connect("203.0.113.9", 80, &cfd);
	check(rc == ENETUNREACH, "before setup: connect to 203.0.113.9 fails with "
				 "ENETUNREACH (%s)", strerror(rc));
	close(cfd);
	rc = transparent_setup(&(struct transparent_config){ 0 }, err, sizeof(err));
	check(rc == -EINVAL, "an empty configuration is refused");

	/* As in the sandbox: lo is up before the sockets are made. */
	check(system("ip link set lo up") == 0, "lo up");
	err[0] = '\0';
	rc = transparent_listen(0, lfds, &port, err, sizeof(err));
	check(rc == 0 && port > 0 && lfds[0] >= 0, "listener on 127.0.0.1:%u", port);
	transparent_config_default(&cfg, port);
	rc = transparent_setup(&cfg, err, sizeof(err));
	check(rc == 0, "setup (%s)", rc ? err : "ok");
	if (rc != 0)
		return;

	rc = try_connect("203.0.113.9", 80, &cfd);
	afd = rc == 0 ? accept_within(lfds[0]) : -1;
	check(afd >= 0, "connect to 203.0.113.9:80 lands on the listener");
	rc = afd >= 0 ? transparent_original_dst(afd, &a, &oport) : -1;
	if (rc == 0)
		addr_format(&a, text, sizeof(text));
	check(rc == 0 && strcmp(text, "203.0.113.9") == 0 && oport == 80,
	      "SO_ORIGINAL_DST is 203.0.113.9:80");
	close(cfd);
	if (afd >= 0)
		close(afd);

	rc = try_connect("240.0.0.1", 443, &cfd);
	afd = rc == 0 ? accept_within(lfds[0]) : -1;
	rc = afd >= 0 ? transparent_original_dst(afd, &a, &oport) : -1;
	check(rc == 0 && addr_equal(&a, &(struct addr){ .family = AF_INET,
							.bytes = { 240, 0, 0, 1 } }) &&
		      oport == 443,
	      "a synthetic address (240.0.0.1:443) is redirected with its port");
	close(cfd);
	if (afd >= 0)
		close(afd);

	/* Directly to the listener: not redirected, no destination. */
	{
		char lp[8];

		snprintf(lp, sizeof(lp), "%u", port);
		rc = try_connect("127.0.0.1", port, &cfd);
		afd = rc == 0 ? accept_within(lfds[0]) : -1;
		rc = afd >= 0 ? transparent_original_dst(afd, &a, &oport) : 0;
		check(afd >= 0 && rc == -ENOENT,
		      "a client connecting to 127.0.0.1:%s directly gets -ENOENT", lp);
		close(cfd);
		if (afd >= 0)
			close(afd);
	}

	if (lfds[1] >= 0) {
		rc = try_connect("2001:db8::9", 8443, &cfd);
		afd = rc == 0 ? accept_within(lfds[1]) : -1;
		rc = afd >= 0 ? transparent_original_dst(afd, &a, &oport) : -1;
		if (rc == 0)
			addr_format(&a, text, sizeof(text));
		check(rc == 0 && strcmp(text, "2001:db8::9") == 0 && oport == 8443,
		      "IPv6: [2001:db8::9]:8443 lands on [::1] with its destination");
		close(cfd);
		if (afd >= 0)
			close(afd);
		rc = try_connect("::ffff:203.0.113.9", 80, &cfd);
		afd = rc == 0 ? accept_within(lfds[0]) : -1;
		rc = afd >= 0 ? transparent_original_dst(afd, &a, &oport) : -1;
		if (rc == 0)
			addr_format(&a, text, sizeof(text));
		check(rc == 0 && strcmp(text, "203.0.113.9") == 0,
		      "an IPv4-mapped destination is IPv4 on the wire: on 127.0.0.1");
		close(cfd);
		if (afd >= 0)
			close(afd);
		check(udp_send("2001:db8::9", 443) == EPERM, "IPv6 UDP: EPERM at once");
	} else {
		check(!ipv6_here(), "no IPv6 listener only when there is no IPv6");
	}

	check(udp_send("203.0.113.9", 53) == EPERM, "UDP to 203.0.113.9:53: EPERM at once");
	check(udp_send("127.0.0.1", 9) == EPERM, "UDP to 127.0.0.1:9: EPERM");
	check(udp_send("127.0.0.53", 54) == EPERM, "UDP to the stub's address, another port: EPERM");
	check(udp_send("127.0.0.53", 53) == 0, "UDP to the stub (127.0.0.53:53) is sent");

	err[0] = '\0';
	rc = transparent_setup(&cfg, err, sizeof(err));
	check(rc == -EEXIST && err[0], "a second setup in the same namespace: -EEXIST (%s)",
	      err);
	close(lfds[0]);
	if (lfds[1] >= 0)
		close(lfds[1]);
}

static void stub_serve(void)
{
	struct policy_errors errs = { 0 };
	static const char json[] =
		"{\"version\":1,\"mode\":\"enforce\",\"egress\":{\"allow\":[\"a.test\"]}}";
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);
	struct transparent_config cfg;
	struct dnsstub_table *t = NULL;
	struct dnsstub *s;
	struct dnsstub_result res;
	struct sockaddr_storage ss;
	socklen_t sl;
	uint8_t q[700], r[600];
	char err[256] = "";
	int sfd, cfd, lfds[2], rc;
	uint16_t port;
	ssize_t n;
	static const uint8_t query[] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
					 1, 'a', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1 };

	ASSERT(p && dnsstub_table_new(16, &t) == 0);
	s = dnsstub_new(p, t);
	check(system("ip link set lo up") == 0, "lo up");
	check(transparent_listen(0, lfds, &port, err, sizeof(err)) == 0, "listener");
	transparent_config_default(&cfg, port);
	sfd = transparent_stub_socket(&cfg.stub, cfg.stub_port, err, sizeof(err));
	check(sfd >= 0, "the stub's socket on 127.0.0.53:53 (%s)", sfd < 0 ? err : "ok");
	check(transparent_stub_socket(&cfg.stub, cfg.stub_port, err, sizeof(err)) == -EADDRINUSE,
	      "a second one on the same address: EADDRINUSE");
	check(transparent_setup(&cfg, err, sizeof(err)) == 0, "setup");
	check(transparent_stub_serve(sfd, s, &res) == 0, "nothing waiting: 0");

	cfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sl = sockaddr_of("127.0.0.53", 53, &ss);
	ASSERT(cfd >= 0 && connect(cfd, (struct sockaddr *)&ss, sl) == 0);
	{
		struct timeval tv = { .tv_sec = 2 };

		ASSERT(setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	}
	check(send(cfd, query, sizeof(query), 0) == (ssize_t)sizeof(query), "a query is sent");
	rc = transparent_stub_serve(sfd, s, &res);
	check(rc == 1 && res.outcome == DNSSTUB_ANSWER, "served: an answer for a.test");
	n = recv(cfd, r, sizeof(r), 0);
	check(n == (ssize_t)sizeof(query) + 16 && r[0] == 0x12 && r[1] == 0x34 &&
		      r[n - 4] == 240 && r[n - 1] == 1,
	      "the client gets it: 240.0.0.1");
	check(transparent_stub_serve(sfd, s, &res) == 0, "then nothing: 0");

	/* Over-long: FORMERR, a bare header. */
	memset(q, 0, sizeof(q));
	memcpy(q, query, sizeof(query));
	check(send(cfd, q, sizeof(q), 0) == (ssize_t)sizeof(q), "a 700-byte datagram");
	rc = transparent_stub_serve(sfd, s, &res);
	n = recv(cfd, r, sizeof(r), 0);
	check(rc == 1 && res.outcome == DNSSTUB_FORMERR && n == 12 && (r[3] & 15) == 1,
	      "FORMERR, header only");
	/* A response is dropped: nothing comes back. */
	memcpy(q, query, sizeof(query));
	q[2] |= 0x80;
	check(send(cfd, q, sizeof(query), 0) == (ssize_t)sizeof(query), "a response sent to it");
	rc = transparent_stub_serve(sfd, s, &res);
	{
		struct timeval tv = { .tv_usec = 200000 };

		ASSERT(setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	}
	n = recv(cfd, r, sizeof(r), 0);
	check(rc == 1 && res.outcome == DNSSTUB_DROP && n < 0, "is dropped: no reply");
	close(cfd);
	close(sfd);
	close(lfds[0]);
	if (lfds[1] >= 0)
		close(lfds[1]);
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

static void selftest(void)
{
	char err[256] = "";
	int rc = transparent_selftest(err, sizeof(err));

	check(rc == 0, "the self-test passes in a fresh namespace (%s)", rc ? err : "ok");
}

int main(void)
{
	test_ruleset_text();
	in_netns("bad configuration", bad_config);
	in_netns("another interface, down", interface_down);
	in_netns("another interface, up", interface_up);
	in_netns("redirect", redirect);
	in_netns("stub socket", stub_serve);
	in_netns("self-test", selftest);
	return tap_done();
}
