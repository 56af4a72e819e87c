/* SPDX-License-Identifier: Apache-2.0
 * test_exchange.c - the HTTP exchange's filter hooks, end to end: a real
 * proxy (forked) with a test filter, this process as client and upstream
 * on loopback. Each case shows one hook doing its job on the wire:
 * headers rewritten, a whole body replaced (and re-framed), a response
 * transformed (and re-chunked), a verdict answered, a pending hook
 * resumed from a watched descriptor, the outcome reported at the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filter.h"
#include "policy.h"
#include "proxy.h"
#include "tap.h"
#include "util.h"

static int report_fd = -1; /* the child's end of the report pipe */
static struct proxy *the_proxy;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char line[512];
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
	(void)util_write_all(report_fd, line, (size_t)n);
}

/* --- the test filter ---------------------------------------------------------- */

struct tstate {
	char path[128];
	bool inner;
	uint64_t seen_up;
	int timer;
	struct filter_ref ref;
	bool deny_after_wait;
};

static void *t_attach(void *arg, const struct filter_request *rq)
{
	struct tstate *st;

	(void)arg;
	if (strncmp(rq->path, "/skip", 5) == 0)
		return NULL; /* this filter does not apply */
	st = util_xcalloc(1, sizeof(*st));
	snprintf(st->path, sizeof(st->path), "%s", rq->path);
	st->inner = rq->inner;
	st->timer = -1;
	return st;
}

static void on_timer(void *arg, int fd, uint32_t events)
{
	struct tstate *st = arg;
	struct filter_ref ref = st->ref; /* st may be freed by the resume */
	bool deny = st->deny_after_wait;
	struct verdict v;
	uint64_t n;

	(void)events;
	(void)!read(fd, &n, sizeof(n));
	proxy_unwatch(the_proxy, fd);
	close(fd);
	st->timer = -1;
	if (deny) {
		verdict_set(&v, VERDICT_DENY, 429, "test.budget", "over the test budget");
		v.type = "budget.block";
		report("resume %d", proxy_resume(the_proxy, &ref, FILTER_VERDICT, &v));
	} else {
		report("resume %d", proxy_resume(the_proxy, &ref, FILTER_CONTINUE, NULL));
	}
	/* a second resume for the same exchange finds it no longer pending */
	report("again %d", proxy_resume(the_proxy, &ref, FILTER_CONTINUE, NULL));
}

static enum filter_result t_request_head(void *p, struct filter_request *rq,
					 struct filter_asks *asks, struct filter_ref ref,
					 struct verdict *v)
{
	struct tstate *st = p;

	filter_headers_add(&rq->headers, "X-Filter", st->inner ? "inner" : "plain");
	{
		char port[16];

		/* the port every decision is made on: the connection's */
		snprintf(port, sizeof(port), "%u", rq->port);
		filter_headers_add(&rq->headers, "X-Port", port);
	}
	filter_headers_remove(&rq->headers, "x-drop");
	filter_headers_set(&rq->headers, "X-Twice", "one");
	if (strcmp(rq->path, "/deny") == 0) {
		verdict_set(v, VERDICT_DENY, 403, "test.deny", "the test filter denies /deny");
		return FILTER_VERDICT;
	}
	if (strcmp(rq->path, "/whole") == 0 || strcmp(rq->path, "/big") == 0) {
		asks->whole_body = true;
		asks->max_body = 64;
	}
	if (strncmp(rq->path, "/pend", 5) == 0) {
		struct itimerspec its = { { 0, 0 }, { 0, 200 * 1000 * 1000 } };

		st->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		ASSERT(st->timer >= 0);
		ASSERT(timerfd_settime(st->timer, 0, &its, NULL) == 0);
		ASSERT(proxy_watch(the_proxy, st->timer, 0x001 /* EPOLLIN */, on_timer, st) == 0);
		st->ref = ref;
		st->deny_after_wait = strcmp(rq->path, "/pend-deny") == 0;
		return FILTER_PENDING;
	}
	return FILTER_CONTINUE;
}

static enum filter_result t_request_body(void *p, const char *data, size_t len,
					 bool last, struct buf *body,
					 struct filter_ref ref, struct verdict *v)
{
	struct tstate *st = p;

	(void)ref;
	(void)v;
	(void)last;
	if (body) {
		struct buf nb = { 0 };
		size_t i;

		buf_puts(&nb, "REPLACED:");
		for (i = 0; i < body->len; i++) {
			char ch = body->data[i];

			if (ch >= 'a' && ch <= 'z')
				ch = (char)(ch - 'a' + 'A');
			buf_append(&nb, &ch, 1);
		}
		buf_free(body);
		*body = nb;
		return FILTER_CONTINUE;
	}
	st->seen_up += len;
	ASSERT(data || len == 0);
	return FILTER_CONTINUE;
}

static enum filter_result t_response_head(void *p, struct filter_response *rs,
					  struct filter_transform *tf, struct verdict *v)
{
	struct tstate *st = p;
	char text[16];

	(void)v;
	snprintf(text, sizeof(text), "%u", rs->status);
	filter_headers_add(&rs->headers, "X-Seen", text);
	filter_headers_remove(&rs->headers, "x-secret");
	if (strcmp(st->path, "/reason") == 0) {
		free(rs->reason);
		rs->reason = util_xstrdup("Rewritten");
	}
	if (strcmp(st->path, "/transform") == 0)
		tf->enabled = true;
	return FILTER_CONTINUE;
}

/* Interim heads and the reason phrase are the filters' too. */
static void t_response_interim(void *p, struct filter_response *rs)
{
	(void)p;
	free(rs->reason);
	rs->reason = util_xstrdup("Interim-Seen");
	filter_headers_set(&rs->headers, "Link", "</rewritten>");
}

static int t_response_body(void *p, const char *data, size_t len, bool last,
			   struct buf *out)
{
	size_t i;

	(void)p;
	(void)last;
	if (!out)
		return 0;
	for (i = 0; i < len; i++) {
		if (data[i] == 'a')
			buf_puts(out, "AA");
		else
			buf_append(out, &data[i], 1);
	}
	return 0;
}

static void t_done(void *p, enum filter_outcome o, const struct filter_stats *s)
{
	struct tstate *st = p;

	report("done %s %s %u %llu %llu seen=%llu", st->path, filter_outcome_to_string(o),
	       s->status, (unsigned long long)s->bytes_up, (unsigned long long)s->bytes_down,
	       (unsigned long long)st->seen_up);
	if (st->timer >= 0) {
		proxy_unwatch(the_proxy, st->timer);
		close(st->timer);
	}
	free(st);
}

static const struct filter_ops test_ops = {
	.name = "test",
	.attach = t_attach,
	.request_head = t_request_head,
	.request_body = t_request_body,
	.response_head = t_response_head,
	.response_body = t_response_body,
	.response_interim = t_response_interim,
	.done = t_done,
};

static int64_t receipt_seq;

static int64_t t_record(void *arg, const char *type, enum receipt_decision d,
			enum receipt_point point, const char *rule, json_t *subject,
			const char *reason)
{
	(void)arg;
	(void)point;
	(void)subject;
	(void)reason;
	report("receipt %s %s %s", type, receipt_decision_to_string(d), rule);
	return ++receipt_seq;
}

/* --- the harness ------------------------------------------------------------------ */

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
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ASSERT(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	return fd;
}

static void send_str(int fd, const char *s)
{
	ASSERT(util_write_all(fd, s, strlen(s)) == 0);
}

/* Reads until @until appears (or the peer closes, or 5 s). */
static void read_until(int fd, struct buf *b, const char *until)
{
	for (;;) {
		char tmp[4096];
		ssize_t n;

		if (b->len && memmem(b->data, b->len, until, strlen(until)))
			return;
		n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0)
			return;
		buf_append(b, tmp, (size_t)n);
	}
}

static bool has(const struct buf *b, const char *s)
{
	return b->len && memmem(b->data, b->len, s, strlen(s)) != NULL;
}

/* The upstream's side of one request: accepts, reads the head and a
 * Content-Length body, answers @resp. The request is left in @req. */
static int upstream_serve(int lfd, struct buf *req, const char *resp)
{
	struct timeval tv = { 5, 0 };
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	const char *cl;

	if (fd < 0)
		return -1;
	ASSERT(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	read_until(fd, req, "\r\n\r\n");
	cl = req->len ? memmem(req->data, req->len, "Content-Length: ", 16) : NULL;
	if (cl) {
		size_t want = strtoul(cl + 16, NULL, 10);
		const char *end = memmem(req->data, req->len, "\r\n\r\n", 4);

		while (end && (size_t)(req->data + req->len - (end + 4)) < want) {
			char tmp[4096];
			ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
			size_t off = (size_t)(end - req->data);

			if (n <= 0)
				break;
			buf_append(req, tmp, (size_t)n);
			end = req->data + off;
		}
	}
	send_str(fd, resp);
	return fd;
}

static pid_t start_proxy(uint16_t *port, int *reports)
{
	static const char pol[] =
		"{\"version\":1,\"mode\":\"enforce\",\"egress\":{\"allow\":[\"127.0.0.1:*\"],"
		"\"allow_ranges\":[\"127.0.0.0/8\"],\"resolver\":[\"127.0.0.1:9\"]}}";
	int lfd = listen_on(port), pfd[2];
	pid_t pid;

	ASSERT(pipe(pfd) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct policy_errors errs = { 0 };
		struct policy *p = policy_parse(pol, strlen(pol), NULL, &errs);
		struct filter_reg reg = { &test_ops, NULL };
		struct proxy_opts o;
		char err[256];

		close(pfd[0]);
		report_fd = pfd[1];
		signal(SIGPIPE, SIG_IGN);
		ASSERT(p);
		memset(&o, 0, sizeof(o));
		o.listen_fd = lfd;
		o.policy = p;
		o.record = t_record;
		o.signal_fd = -1;
		o.filters = &reg;
		o.nfilters = 1;
		the_proxy = proxy_new(&o, err, sizeof(err));
		if (!the_proxy) {
			report("proxy_new: %s", err);
			_exit(1);
		}
		proxy_run(the_proxy);
		_exit(0);
	}
	close(lfd);
	close(pfd[1]);
	*reports = pfd[0];
	return pid;
}

/* The report lines that arrived so far (waits up to @ms for @want). */
static void reports_until(int fd, struct buf *b, const char *want, int ms)
{
	while (!has(b, want)) {
		struct pollfd p = { fd, POLLIN, 0 };
		char tmp[1024];
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return;
		n = read(fd, tmp, sizeof(tmp));
		if (n <= 0)
			return;
		buf_append(b, tmp, (size_t)n);
	}
}

static const char ok_resp[] =
	"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Secret: s\r\nX-Keep: k\r\n\r\nbanana-data";

int main(void)
{
	struct buf rep = { 0 };
	uint16_t pport, uport;
	int rfd, ulfd = listen_on(&uport);
	pid_t pid = start_proxy(&pport, &rfd);
	char line[512];

	/* 1. request and response heads rewritten; streamed body observed */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "POST http://127.0.0.1:%u/edit HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			 "X-Drop: gone\r\nX-Twice: a\r\nX-Twice: b\r\nContent-Length: 5\r\n\r\nhello",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "banana-data");
		tap_ok(has(&req, "\r\nX-Filter: plain\r\n") && !has(&req, "X-Drop") &&
			       has(&req, "X-Twice: one\r\n") && !has(&req, "X-Twice: a") &&
			       !has(&req, "X-Twice: b"),
		       "request_head: a header added, one removed, one set once");
		tap_ok(has(&req, "Content-Length: 5\r\n") && has(&req, "\r\n\r\nhello"),
		       "the body streamed unchanged");
		tap_ok(has(&resp, "X-Seen: 200\r\n") && !has(&resp, "X-Secret") &&
			       has(&resp, "X-Keep: k") && has(&resp, "Content-Length: 11"),
		       "response_head: a header added, one removed, framing kept");
		reports_until(rfd, &rep, "done /edit", 2000);
		tap_ok(has(&rep, "done /edit complete 200 5 11 seen=5"),
		       "done: complete, status, bytes both ways; request_body saw 5 bytes");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 2. the whole body, replaced: framing rewritten */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "POST http://127.0.0.1:%u/whole HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			 "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		read_until(c, &resp, "\r\n\r\n");
		tap_ok(has(&resp, "HTTP/1.1 100 Continue"),
		       "whole body with Expect: 100-continue: the proxy answers the 100 itself");
		send_str(c, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "banana-data");
		tap_ok(has(&req, "Content-Length: 14\r\n") && has(&req, "\r\n\r\nREPLACED:ABCDE") &&
			       !has(&req, "Transfer-Encoding") && !has(&req, "Expect"),
		       "the upstream gets the replaced body with a Content-Length of its own");
		tap_ok(has(&resp, "banana-data"), "and the client its answer");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 3. over the whole-body bound: 413, nothing forwarded */
	{
		struct buf resp = { 0 };
		int c = dial(pport);

		snprintf(line, sizeof(line),
			 "POST http://127.0.0.1:%u/big HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			 "Content-Length: 100\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		read_until(c, &resp, "\n\n");
		tap_ok(has(&resp, "HTTP/1.1 413 ") && has(&resp, "X-Airlock-Rule: http.body-too-large"),
		       "a body over what the filter reads: 413");
		close(c);
		buf_free(&resp);
	}
	/* 4. a verdict from request_head: answered, recorded, not forwarded */
	{
		struct buf resp = { 0 };
		int c = dial(pport);

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/deny HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		read_until(c, &resp, "\n\n");
		tap_ok(has(&resp, "HTTP/1.1 403 ") && has(&resp, "X-Airlock-Rule: test.deny") &&
			       has(&resp, "X-Airlock-Receipt: "),
		       "a filter's deny: 403 with its rule and receipt");
		reports_until(rfd, &rep, "done /deny", 2000);
		tap_ok(has(&rep, "receipt egress.block block test.deny") &&
			       has(&rep, "done /deny refused"),
		       "recorded as egress.block; the filter hears 'refused'");
		close(c);
		buf_free(&resp);
	}
	/* 5. a response transformed: re-framed as chunked */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/transform HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "0\r\n\r\n");
		tap_ok(has(&resp, "Transfer-Encoding: chunked\r\n") && !has(&resp, "Content-Length") &&
			       has(&resp, "\r\n\r\n10\r\nbAAnAAnAA-dAAtAA\r\n0\r\n\r\n"),
		       "a transform that changes the length: re-chunked to the client");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 6. pending, resumed from a watched timer */
	{
		struct buf req = { 0 }, resp = { 0 };
		uint64_t t0 = util_now_ms(), t1;
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/pend HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		t1 = util_now_ms();
		read_until(c, &resp, "banana-data");
		tap_ok(t1 - t0 >= 180 && has(&req, "GET /pend HTTP/1.1"),
		       "a pending hook: the request goes upstream only after the resume (%llu ms)",
		       (unsigned long long)(t1 - t0));
		tap_ok(has(&resp, "banana-data"), "and is answered");
		reports_until(rfd, &rep, "again", 2000);
		tap_ok(has(&rep, "resume 0") && has(&rep, "again -116"),
		       "proxy_resume: 0, then -ESTALE for an exchange no longer pending");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 7. pending, resumed with a verdict */
	{
		struct buf resp = { 0 };
		int c = dial(pport);

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/pend-deny HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		read_until(c, &resp, "\n\n");
		tap_ok(has(&resp, "HTTP/1.1 429 ") && has(&resp, "X-Airlock-Rule: test.budget"),
		       "resumed with a verdict: 429 with its rule");
		reports_until(rfd, &rep, "budget.block", 2000);
		tap_ok(has(&rep, "receipt budget.block block test.budget"),
		       "recorded with the verdict's own receipt type");
		close(c);
		buf_free(&resp);
	}
	/* 8. inside a tunnel: the filter sees an inner request */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n"
			 "GET /in HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "banana-data");
		tap_ok(has(&req, "GET /in HTTP/1.1\r\n") && has(&req, "X-Filter: inner\r\n"),
		       "HTTP inside a tunnel goes through the same filters (inner)");
		tap_ok(has(&resp, "X-Seen: 200"), "its response too");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 8b. inside a tunnel the filters decide on the tunnel's port, not
	 * the Host header's (which names none here: 80 by default) */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;
		char want[32];

		snprintf(line, sizeof(line),
			 "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n"
			 "GET /inport HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "banana-data");
		snprintf(want, sizeof(want), "X-Port: %u\r\n", uport);
		tap_ok(has(&req, want) && has(&req, "Host: 127.0.0.1\r\n"),
		       "a Host without a port inside a tunnel: the filters see the tunnel's "
		       "port, the upstream the Host as sent");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 8c. interim heads and the final reason phrase go through the
	 * filters */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/reason HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req,
				   "HTTP/1.1 103 Early Hints\r\nLink: </secret>\r\n\r\n"
				   "HTTP/1.1 200 Secret-Reason\r\nContent-Length: 11\r\n\r\n"
				   "banana-data");
		read_until(c, &resp, "banana-data");
		tap_ok(has(&resp, "HTTP/1.1 103 Interim-Seen\r\nLink: </rewritten>\r\n\r\n") &&
			       !has(&resp, "secret") && !has(&resp, "Early Hints"),
		       "an interim head is written from what the filters left");
		tap_ok(has(&resp, "HTTP/1.1 200 Rewritten\r\n") && !has(&resp, "Secret-Reason"),
		       "the final reason phrase is the filters' to edit");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	/* 9. a filter that does not attach sees nothing */
	{
		struct buf req = { 0 }, resp = { 0 };
		int c = dial(pport), u;

		snprintf(line, sizeof(line),
			 "GET http://127.0.0.1:%u/skip HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
			 uport, uport);
		send_str(c, line);
		u = upstream_serve(ulfd, &req, ok_resp);
		read_until(c, &resp, "banana-data");
		tap_ok(!has(&req, "X-Filter") && has(&resp, "X-Secret: s"),
		       "attach returned NULL: no hook ran");
		close(u);
		close(c);
		buf_free(&req);
		buf_free(&resp);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(ulfd);
	close(rfd);
	buf_free(&rep);
	return tap_done();
}
