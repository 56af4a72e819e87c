/* SPDX-License-Identifier: Apache-2.0
 * fuzz_dnsd.c - libFuzzer target for dnsd_read(): the supervisor's read of
 * the DNS stub's channel. The stub (airlock-dns) parses the sandbox's
 * datagrams (fuzz_dnsstub.c); the supervisor, which holds the secret
 * values, parses only what the stub sends it, so a stub the sandbox took
 * over reaches the supervisor through this parse alone.
 *
 * Input layout: up to 8 datagrams, each a 2-byte big-endian length then
 * that many bytes (a short last one takes what is left). A datagram whose
 * first byte is odd is turned into a MSG_DNS_BLOCK built with msg.c's
 * writer from the bytes that follow (so that the fields are reached, and
 * the expected outcome is known); an even one is sent as it is. They are
 * sent on a SOCK_SEQPACKET pair, then dnsd_read() reads them all.
 *
 * Invariants, checked with abort():
 *  - every block handed to the callback has a rule, a host and a reason
 *    within their limits, a qtype of 16 bits, a known outcome;
 *  - the blocks handed out come in order, each from a valid built message
 *    (field for field) or from a raw datagram (which may happen to be
 *    one), and none after the first built message that is not valid;
 *  - a built MSG_FATAL (the stub's last words) ends the read, and its
 *    reason, when it fits, is what dnsd_read() keeps as the last words;
 *  - every valid built message before the first other datagram is
 *    handed out; without raw datagrams, exactly those are, and
 *    dnsd_read() returns true exactly when every datagram was valid.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dnsd.h"
#include "egress.h"
#include "fuzz.h"
#include "msg.h"

#define MAX_DGRAMS 8

struct built {
	bool valid;            /* a well-formed MSG_DNS_BLOCK within limits */
	bool known;            /* built here (else raw bytes: unknown) */
	bool fatal;            /* a MSG_FATAL with @reason instead */
	uint32_t wb, qtype, outcome;
	char rule[64], host[300], reason[600];
};

struct seen {
	const struct built *b;
	size_t nb, n;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Takes a string of up to @max bytes (its length from one byte, scaled)
 * from *@p, without NUL bytes. */
static void take_str(const uint8_t **p, size_t *len, char *out, size_t max, unsigned scale)
{
	size_t n = 0, want;

	out[0] = '\0';
	if (*len == 0)
		return;
	want = (size_t)(*p)[0] * scale;
	(*p)++;
	(*len)--;
	if (want > max)
		want = max;
	while (n < want && *len > 0) {
		out[n++] = (char)((*p)[0] ? (*p)[0] : 'x');
		(*p)++;
		(*len)--;
	}
	out[n] = '\0';
}

static uint32_t take_u32(const uint8_t **p, size_t *len)
{
	uint32_t v = 0;
	int i;

	for (i = 0; i < 4 && *len > 0; i++) {
		v = v << 8 | (*p)[0];
		(*p)++;
		(*len)--;
	}
	return v;
}

static void build(struct built *b, const uint8_t *p, size_t len, struct msg *m)
{
	uint8_t sel;

	memset(b, 0, sizeof(*b));
	b->known = true;
	sel = len ? p[0] : 0;
	p += len ? 1 : 0;
	len -= len ? 1 : 0;
	/* small values most of the time, so that valid ones are common */
	b->wb = take_u32(&p, &len);
	if (sel & 2)
		b->wb &= 1;
	take_str(&p, &len, b->rule, sizeof(b->rule) - 1, 1);
	take_str(&p, &len, b->host, sizeof(b->host) - 1, 2);
	b->qtype = take_u32(&p, &len);
	if (sel & 4)
		b->qtype &= 0xffff;
	b->outcome = take_u32(&p, &len);
	if (sel & 8)
		b->outcome %= DNSSTUB_OUTCOME_COUNT + 1;
	take_str(&p, &len, b->reason, sizeof(b->reason) - 1, 3);
	if (sel & 32) {
		/* the stub's last words */
		b->fatal = true;
		msg_start(m, MSG_FATAL);
		msg_put_cstr(m, b->reason);
		return;
	}
	msg_start(m, MSG_DNS_BLOCK);
	msg_put_u32(m, b->wb);
	msg_put_cstr(m, b->rule);
	msg_put_cstr(m, b->host);
	msg_put_u32(m, b->qtype);
	msg_put_u32(m, b->outcome);
	msg_put_cstr(m, b->reason);
	if (sel & 16)
		msg_put_u32(m, 0); /* a trailing field: invalid */
	b->valid = !(sel & 16) && b->wb <= 1 && b->qtype <= 65535 &&
		   b->outcome < DNSSTUB_OUTCOME_COUNT &&
		   strlen(b->rule) < EGRESS_RULE_ID_MAX && strlen(b->reason) <= DNSD_REASON_MAX;
}

static void on_block(void *arg, const struct dnsd_block *blk)
{
	struct seen *s = arg;
	const struct built *b;

	CHECK(blk->rule && blk->host && blk->reason);
	CHECK(strlen(blk->rule) < EGRESS_RULE_ID_MAX);
	CHECK(strlen(blk->host) < DNSSTUB_DISPLAY_MAX);
	CHECK(strlen(blk->reason) <= DNSD_REASON_MAX);
	CHECK(blk->qtype <= 65535);
	CHECK((unsigned)blk->outcome < DNSSTUB_OUTCOME_COUNT);
	CHECK(s->n < s->nb);
	b = &s->b[s->n++];
	if (!b->known)
		return; /* raw bytes that happen to be a valid block */
	CHECK(b->valid);
	CHECK(blk->would_block == (b->wb == 1));
	CHECK(strcmp(blk->rule, b->rule) == 0);
	CHECK(strcmp(blk->host, b->host) == 0);
	CHECK(strcmp(blk->reason, b->reason) == 0);
	CHECK(blk->qtype == b->qtype && (uint32_t)blk->outcome == b->outcome);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct built b[MAX_DGRAMS];
	struct msg m = { 0 };
	struct seen s = { b, 0, 0 };
	struct dnsd d = { .pid = -1, .ctl = -1 };
	size_t k, prefix = 0, first_bad = MAX_DGRAMS;
	bool all_valid = true, raw = false, ok;
	int sv[2], buf = 1 << 20;

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	for (k = 0; k < MAX_DGRAMS && size >= 2; k++) {
		size_t len = get16(data);

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		if (len > 8192)
			len = 8192; /* 8 of them fit the socket's buffer */
		if (len > 0 && (data[0] & 1)) {
			build(&b[k], data + 1, len - 1, &m);
			CHECK(msg_send(sv[1], &m, -1, MSG_DONTWAIT) == 0);
		} else {
			memset(&b[k], 0, sizeof(b[k]));
			raw = true;
			/* an empty datagram reads as the end of the channel */
			CHECK(send(sv[1], data, len, MSG_DONTWAIT) == (ssize_t)len);
		}
		if (all_valid && b[k].valid) {
			prefix++;
		} else if (all_valid) {
			all_valid = false;
			first_bad = k;
		}
		data += len;
		size -= len;
	}
	s.nb = k;
	d.ctl = sv[0];
	ok = dnsd_read(&d, on_block, &s);
	CHECK(s.n >= prefix);
	if (!raw) {
		CHECK(s.n == prefix);
		CHECK(ok == all_valid);
		if (first_bad < k && b[first_bad].fatal &&
		    strlen(b[first_bad].reason) < sizeof(d.fatal))
			CHECK(strcmp(d.fatal, b[first_bad].reason) == 0);
		else
			CHECK(d.fatal[0] == '\0');
	}
	msg_free(&m);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
