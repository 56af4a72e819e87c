/* SPDX-License-Identifier: Apache-2.0
 * fuzz_dns.c - libFuzzer target for dns.c and the c-ares response handling
 * under it, through the real module over loopback.
 *
 * One resolver (dns_new, timeout 200 ms) and one fake DNS server (UDP and
 * TCP on the same 127.0.0.1 port) live across iterations, in one epoll
 * set. Each input resolves "fuzz.example"; the server answers each query
 * (A and AAAA, UDP or TCP) with the input, its id (bytes 0-1) set to the
 * query's and, when long enough, the type at bytes 26-27 (just after a
 * question for "fuzz.example") set to the query's type, so that c-ares
 * matches it to the query; then, over UDP, with a well-formed NXDOMAIN
 * that ends the query if the input did not (c-ares ignores it otherwise).
 * The loop is bounded (iterations and the resolver's own deadline).
 * Nothing is ever sent anywhere but 127.0.0.1.
 *
 * Invariants, checked with abort():
 *  - the callback runs exactly once per resolve, with that resolve's
 *    cookie, never from inside dns_resolve();
 *  - status is an enum dns_status; DNS_OK comes with n >= 1 addresses and
 *    no error, anything else with n == 0, no addresses and the status's
 *    one-line text;
 *  - every address is AF_INET or AF_INET6 and its bytes occur in the input
 *    (the resolver returns what the server said, it invents nothing);
 *  - nothing is left pending after the callback.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns.h"
#include "fuzz.h"

#define TAG_DNS (1ull << 32)
#define TAG_UDP (2ull << 32)
#define TAG_LISTEN (3ull << 32)
#define TAG_CONN (4ull << 32)
#define QNAME "fuzz.example"
#define QTYPE_AT 26 /* 12-byte header + "\4fuzz\7example\0" */

static int epfd = -1, udp = -1, lsn = -1, conn = -1;
static struct dns *dns;
static const uint8_t *input;
static size_t input_len;
static uint64_t iteration;
static int calls;
static int in_resolve;
static uint8_t tbuf[4096];
static size_t tlen;

static void cb(void *arg, uint64_t cookie, int status,
	       const struct addr *addrs, size_t n, const char *error)
{
	size_t i;

	(void)arg;
	CHECK(!in_resolve);
	CHECK(cookie == iteration);
	CHECK(calls == 0);
	calls++;
	CHECK(status >= 0 && status < DNS_STATUS_COUNT);
	if (status == DNS_OK) {
		CHECK(n >= 1 && addrs != NULL && error == NULL);
	} else {
		CHECK(n == 0 && addrs == NULL && error != NULL);
		CHECK(strcmp(error, dns_status_to_string(status)) == 0);
	}
	for (i = 0; i < n; i++) {
		size_t len = addrs[i].family == AF_INET ? 4 : 16;

		CHECK(addrs[i].family == AF_INET || addrs[i].family == AF_INET6);
		CHECK(memmem(input, input_len, addrs[i].bytes, len) != NULL);
	}
}

static void watch(int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
}

static void setup(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct policy_endpoint ep;
	char err[256];
	int tries;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	CHECK(epfd >= 0);
	for (tries = 0; tries < 50; tries++) {
		udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		lsn = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		CHECK(udp >= 0 && lsn >= 0);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		CHECK(bind(udp, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		CHECK(getsockname(udp, (struct sockaddr *)&sa, &sl) == 0);
		if (bind(lsn, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    listen(lsn, 4) == 0)
			break;
		close(udp);
		close(lsn);
	}
	CHECK(tries < 50);
	watch(udp, TAG_UDP);
	watch(lsn, TAG_LISTEN);
	memset(&ep, 0, sizeof(ep));
	CHECK(addr_parse("127.0.0.1", &ep.addr));
	ep.port = ntohs(sa.sin_port);
	dns = dns_new(epfd, TAG_DNS, &ep, 1, 200, err, sizeof(err));
	if (!dns)
		fprintf(stderr, "dns_new: %s\n", err);
	CHECK(dns != NULL);
}

/* The input as the answer to @q (@qlen bytes): id and type patched. */
static size_t make_answer(const uint8_t *q, size_t qlen, uint8_t *out,
			  size_t cap)
{
	size_t n = input_len < cap ? input_len : cap;

	memcpy(out, input, n);
	if (n >= 2) {
		out[0] = q[0];
		out[1] = q[1];
	}
	if (n >= QTYPE_AT + 2 && qlen >= QTYPE_AT + 2) {
		out[QTYPE_AT] = q[QTYPE_AT];
		out[QTYPE_AT + 1] = q[QTYPE_AT + 1];
	}
	return n;
}

/* A well-formed NXDOMAIN for @q: header with QR, RD, RA and the question. */
static size_t make_nxdomain(const uint8_t *q, size_t qlen, uint8_t *out,
			    size_t cap)
{
	if (qlen < 12 || qlen > cap)
		return 0;
	memcpy(out, q, qlen);
	out[2] = 0x81;
	out[3] = 0x83;
	memset(out + 6, 0, 6);
	return qlen;
}

static void serve_udp(void)
{
	uint8_t q[512], out[65536];

	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(udp, q, sizeof(q), 0,
				     (struct sockaddr *)&from, &fl);
		size_t m;

		if (n < 0)
			return;
		/* only ever answer the resolver, on loopback */
		if (from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			continue;
		m = make_answer(q, (size_t)n, out, sizeof(out));
		(void)sendto(udp, out, m, 0, (struct sockaddr *)&from, fl);
		m = make_nxdomain(q, (size_t)n, out, sizeof(out));
		if (m)
			(void)sendto(udp, out, m, 0, (struct sockaddr *)&from,
				     fl);
	}
}

static void close_conn(void)
{
	if (conn < 0)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, conn, NULL);
	close(conn);
	conn = -1;
	tlen = 0;
}

static void serve_tcp(void)
{
	uint8_t out[65536 + 2];
	ssize_t n = read(conn, tbuf + tlen, sizeof(tbuf) - tlen);

	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		close_conn();
		return;
	}
	tlen += (size_t)n;
	while (tlen >= 2) {
		size_t l = (size_t)(tbuf[0] << 8 | tbuf[1]), m;

		if (l + 2 > sizeof(tbuf)) {
			close_conn();
			return;
		}
		if (tlen < l + 2)
			return;
		m = make_answer(tbuf + 2, l, out + 2, 65535);
		out[0] = (uint8_t)(m >> 8);
		out[1] = (uint8_t)m;
		/* the socket buffer holds one small answer; a short write
		 * just truncates it, which c-ares must survive too */
		(void)write(conn, out, m + 2);
		memmove(tbuf, tbuf + 2 + l, tlen - 2 - l);
		tlen -= 2 + l;
	}
}

static void accept_conn(void)
{
	int c = accept4(lsn, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (c < 0)
		return;
	close_conn();
	conn = c;
	watch(conn, TAG_CONN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int i;

	if (!dns)
		setup();
	input = data;
	input_len = size;
	iteration++;
	calls = 0;
	in_resolve = 1;
	CHECK(dns_resolve(dns, QNAME, cb, NULL, iteration) == 0);
	in_resolve = 0;

	for (i = 0; i < 1000 && calls == 0; i++) {
		struct epoll_event evs[16];
		int t = dns_next_timeout_ms(dns, 50), n, k;

		if (t < 0 || t > 50)
			t = 50;
		n = epoll_wait(epfd, evs, 16, t);
		for (k = 0; k < n; k++) {
			uint64_t tag = evs[k].data.u64 & ~0xffffffffull;

			if (tag == TAG_DNS)
				dns_handle(dns, (int)(uint32_t)evs[k].data.u64,
					   evs[k].events);
			else if (tag == TAG_UDP)
				serve_udp();
			else if (tag == TAG_LISTEN)
				accept_conn();
			else if (tag == TAG_CONN)
				serve_tcp();
		}
		dns_process_timeouts(dns);
	}
	CHECK(calls == 1);
	CHECK(dns_pending(dns) == 0);
	return 0;
}
