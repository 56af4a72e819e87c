/* SPDX-License-Identifier: Apache-2.0
 * transparent-parts - the building blocks of transparent mode on their
 * own, as the sandbox and the supervisor will use them, for
 * tests/integration/75-transparent-parts.t:
 *
 *   transparent-parts --policy FILE --log FILE [--no-setup] -- CMD [ARG...]
 *
 * Run it as root of a fresh user + network namespace (the sandbox's
 * position). It makes the transparent listener's sockets and the DNS
 * stub's socket (127.0.0.53:53) there, then, unless --no-setup (the
 * control: sockets but no redirect), sets up the redirect
 * (transparent_setup). It forks
 *
 *   - a reader of the address table (as a proxy worker is): it accepts
 *     on the listener, reads the original destination, looks a synthetic
 *     address up, logs "tcp ADDR PORT NAME" ("-" when not synthetic;
 *     "tcp none" for a connection that was not redirected), and answers
 *     an HTTP request with "origdst=ADDR:PORT name=NAME";
 *   - CMD, with the listener's port in $TRANSPARENT_PORT;
 *
 * and serves the stub itself (as the supervisor will), logging
 * "dns NAME QTYPE OUTCOME blocked=B would_block=W record=R rule=RULE" per
 * query. It exits with CMD's status once CMD ends; everything stops by
 * itself after 120 seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnsstub.h"
#include "policy.h"
#include "transparent.h"
#include "util.h"

static int logfd = -1;

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)util_write_all(logfd, line, (size_t)n);
}

/* Reads until the end of a request head, at most 8 KiB and 2 seconds. */
static void read_head(int fd)
{
	char buf[8192];
	size_t len = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (len < sizeof(buf) - 1 && poll(&p, 1, 2000) == 1) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

		if (n <= 0)
			return;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return;
	}
}

static void serve_conn(int fd, struct dnsstub_table *t)
{
	char name[HOSTNAME_MAX + 1] = "-", text[ADDR_STRLEN], body[512], resp[768];
	struct addr a;
	uint16_t port = 0;
	int rc, flags = fcntl(fd, F_GETFL);
	int n;

	if (flags >= 0)
		(void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	rc = transparent_original_dst(fd, &a, &port);
	if (rc < 0) {
		note("tcp none %s", strerror(-rc));
		snprintf(body, sizeof(body), "origdst=none\n");
	} else {
		addr_format(&a, text, sizeof(text));
		if (!dnsstub_table_lookup_addr(t, &a, name))
			snprintf(name, sizeof(name), "-");
		note("tcp %s %u %s", text, port, name);
		snprintf(body, sizeof(body), "origdst=%s%s%s:%u name=%s\n",
			 a.family == AF_INET6 ? "[" : "", text,
			 a.family == AF_INET6 ? "]" : "", port, name);
	}
	read_head(fd);
	n = snprintf(resp, sizeof(resp),
		     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		     strlen(body), body);
	(void)util_write_all(fd, resp, (size_t)n);
	close(fd);
}

/* The proxy worker's part: never returns. */
static void reader(int lfds[2], struct dnsstub_table *t)
{
	struct pollfd p[2];
	int i, np = 0;

	if (dnsstub_table_make_reader(t) < 0)
		util_die(1, "cannot make the table read-only here");
	for (i = 0; i < 2; i++) {
		if (lfds[i] >= 0) {
			p[np].fd = lfds[i];
			p[np].events = POLLIN;
			np++;
		}
	}
	for (;;) {
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (i = 0; i < np; i++) {
			int fd;

			if (!(p[i].revents & POLLIN))
				continue;
			fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				serve_conn(fd, t);
		}
	}
}

int main(int argc, char **argv)
{
	const char *policy_path = NULL, *log_path = NULL;
	struct transparent_config cfg;
	struct policy_errors errs = { 0 };
	struct dnsstub_table *table = NULL;
	struct dnsstub *stub;
	struct policy *p;
	char err[512];
	int lfds[2], sfd, i, status = 0, rc;
	bool setup = true;
	uint16_t port;
	pid_t rpid, cpid;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
			policy_path = argv[++i];
		else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc)
			log_path = argv[++i];
		else if (strcmp(argv[i], "--no-setup") == 0)
			setup = false;
		else if (strcmp(argv[i], "--") == 0)
			break;
		else
			util_die(2, "usage: transparent-parts --policy FILE --log FILE "
				    "[--no-setup] -- CMD [ARG...]");
	}
	if (!policy_path || !log_path || i + 1 >= argc)
		util_die(2, "usage: transparent-parts --policy FILE --log FILE "
			    "[--no-setup] -- CMD [ARG...]");
	alarm(120);
	logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		util_die_errno(1, "%s", log_path);
	p = policy_load(policy_path, NULL, &errs);
	if (!p)
		util_die(1, "%s: %s", policy_path,
			 errs.count ? errs.items[0].message : "cannot load");

	if (transparent_listen(0, lfds, &port, err, sizeof(err)) < 0)
		util_die(1, "%s", err);
	transparent_config_default(&cfg, port);
	sfd = transparent_stub_socket(&cfg.stub, cfg.stub_port, err, sizeof(err));
	if (sfd < 0)
		util_die(1, "%s", err);
	if (setup && transparent_setup(&cfg, err, sizeof(err)) < 0)
		util_die(1, "%s", err);
	note("ready port=%u ipv6=%d setup=%d", port, lfds[1] >= 0, setup);

	rc = dnsstub_table_new(DNSSTUB_TABLE_MAX, &table);
	if (rc < 0)
		util_die(1, "dnsstub_table_new: %s", strerror(-rc));
	stub = dnsstub_new(p, table);

	rpid = fork();
	if (rpid < 0)
		util_die_errno(1, "fork");
	if (rpid == 0) {
		close(sfd);
		reader(lfds, table);
	}
	cpid = fork();
	if (cpid < 0)
		util_die_errno(1, "fork");
	if (cpid == 0) {
		char text[8];

		snprintf(text, sizeof(text), "%u", port);
		setenv("TRANSPARENT_PORT", text, 1);
		execvp(argv[i + 1], argv + i + 1);
		_exit(127);
	}
	close(lfds[0]);
	if (lfds[1] >= 0)
		close(lfds[1]);

	for (;;) {
		struct pollfd pf = { .fd = sfd, .events = POLLIN };
		struct dnsstub_result res;
		pid_t w = waitpid(cpid, &status, WNOHANG);

		if (w == cpid)
			break;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		while (transparent_stub_serve(sfd, stub, &res) > 0) {
			note("dns %s %u %s blocked=%d would_block=%d record=%d rule=%s",
			     res.has_question ? res.display : "?", res.qtype,
			     dnsstub_outcome_to_string(res.outcome), res.blocked,
			     res.would_block, res.record, res.rule_id[0] ? res.rule_id : "-");
		}
	}
	kill(rpid, SIGKILL);
	(void)waitpid(rpid, NULL, 0);
	dnsstub_free(stub);
	dnsstub_table_free(table);
	policy_free(p);
	close(sfd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
