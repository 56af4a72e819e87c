/* SPDX-License-Identifier: Apache-2.0
 * fuzz_dnsstub.c - libFuzzer target for dnsstub.c: the parse of untrusted
 * queries, the answers, the decisions and the table.
 *
 * Input layout: a sequence of datagrams, each a 2-byte big-endian length
 * then that many bytes (a short last one takes what is left), at most 8.
 * Each input gets fresh stubs for enforce, shadow and off mode over one
 * policy, each with a table of 3 names (so that a full table is reached),
 * and every datagram is answered by each stub twice, from exact-size heap
 * copies (ASan sees any read past the datagram).
 *
 * Invariants, checked with abort():
 *  - nothing is answered (length 0) exactly for DNSSTUB_DROP, which is
 *    exactly a datagram under 12 bytes or with QR set;
 *  - a response is at most DNSSTUB_ANSWER_MAX bytes, echoes the id, RD
 *    and opcode, has QR, AA, RA, the rcode of its outcome, at most one
 *    question — the query's bytes as received — one answer exactly for
 *    DNSSTUB_ANSWER and nothing else;
 *  - an answer's address is synthetic, in the table, standing for the
 *    name asked (its display form), which is a valid normalised name;
 *  - asking again gives the same outcome and address (one address per
 *    name, never reused);
 *  - the display form is printable ASCII; a rule and a reason come
 *    exactly with blocked or would_block; record implies one of them;
 *    would_block only in shadow mode, NXDOMAIN for policy only in
 *    enforce, and then no rule could allow the name;
 *  - in enforce mode a name is answered only when a rule could allow it
 *    (the stub never hands out an address for a name outside the policy).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dnsstub.h"
#include "fuzz.h"
#include "policy.h"
#include "util.h"

static const char policy_json[] =
	"{\"version\":1,\"mode\":\"enforce\",\"egress\":{"
	"\"allow\":[\"allowed.test\",\"*.wild.test\",\"api.test:8443\",\"*:9\"],"
	"\"deny\":[\"bad.wild.test\",\"*.deny.test:*\"]},"
	"\"git\":{\"hosts\":[\"git.test\"]}}";

static struct policy *policies[3];

static void init_policies(void)
{
	static const enum policy_mode modes[3] = { POLICY_MODE_ENFORCE,
						   POLICY_MODE_SHADOW,
						   POLICY_MODE_OFF };
	struct policy_errors errs = { 0 };
	int i;

	if (policies[0])
		return;
	for (i = 0; i < 3; i++) {
		policies[i] = policy_parse(policy_json, strlen(policy_json), &modes[i], &errs);
		CHECK(policies[i] != NULL);
	}
}

static int rcode_of(enum dnsstub_outcome o)
{
	switch (o) {
	case DNSSTUB_ANSWER:
	case DNSSTUB_NODATA:
		return 0;
	case DNSSTUB_FORMERR:
		return 1;
	case DNSSTUB_SERVFAIL:
		return 2;
	case DNSSTUB_NXDOMAIN_POLICY:
	case DNSSTUB_NXDOMAIN_INVALID:
		return 3;
	case DNSSTUB_NOTIMP:
		return 4;
	case DNSSTUB_REFUSED:
		return 5;
	case DNSSTUB_DROP:
	case DNSSTUB_OUTCOME_COUNT:
	default:
		return -1;
	}
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void check_response(const uint8_t *q, size_t qlen, const uint8_t *r, size_t n,
			   const struct dnsstub_result *res)
{
	uint16_t flags, qflags;
	size_t i;

	CHECK(res->outcome < DNSSTUB_OUTCOME_COUNT);
	CHECK((n == 0) == (res->outcome == DNSSTUB_DROP));
	CHECK((res->outcome == DNSSTUB_DROP) == (qlen < 12 || (q[2] & 0x80)));
	CHECK(n <= DNSSTUB_ANSWER_MAX);
	CHECK(memchr(res->display, '\0', sizeof(res->display)) != NULL);
	for (i = 0; res->display[i]; i++)
		CHECK(res->display[i] > 0x20 && res->display[i] < 0x7f);
	CHECK((res->rule_id[0] != '\0') == (res->blocked || res->would_block));
	CHECK((res->reason != NULL) == (res->blocked || res->would_block));
	CHECK(!res->record || res->blocked || res->would_block);
	CHECK(!(res->blocked && res->would_block));
	CHECK(!res->blocked || rcode_of(res->outcome) == 2 || rcode_of(res->outcome) == 3);
	if (n == 0)
		return;
	CHECK(n >= 12);
	flags = get16(r + 2);
	qflags = get16(q + 2);
	CHECK(get16(r) == get16(q));
	CHECK((flags & 0x8000) && (flags & 0x0400) && (flags & 0x0080));
	CHECK((flags & 0x7800) == (qflags & 0x7800));
	CHECK((flags & 0x0100) == (qflags & 0x0100));
	CHECK((flags & 0x0270) == 0);
	CHECK((int)(flags & 0xf) == rcode_of(res->outcome));
	CHECK(get16(r + 4) <= 1 && get16(r + 8) == 0 && get16(r + 10) == 0);
	CHECK((get16(r + 6) == 1) == (res->outcome == DNSSTUB_ANSWER));
	CHECK(get16(r + 6) <= 1);
	if (get16(r + 4) == 1) {
		size_t end = n - (res->outcome == DNSSTUB_ANSWER ? 16 : 0);

		CHECK(res->has_question && end > 12 && end <= qlen);
		CHECK(memcmp(r + 12, q + 12, end - 12) == 0);
	} else {
		CHECK(n == 12);
	}
	if (res->outcome == DNSSTUB_ANSWER) {
		CHECK(res->qtype == 1 && res->addr.family == AF_INET);
		CHECK(memcmp(r + n - 4, res->addr.bytes, 4) == 0);
		CHECK(get16(r + n - 16) == 0xc00c && get16(r + n - 6) == 4);
	}
}

/* One datagram through the stub of policies[m], twice. */
static void one(struct dnsstub *s, struct dnsstub_table *t, int m,
		const uint8_t *data, size_t len)
{
	uint8_t *q = malloc(len ? len : 1), r[DNSSTUB_ANSWER_MAX], r2[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res, res2;
	size_t n, n2;

	CHECK(q != NULL);
	memcpy(q, data, len);
	n = dnsstub_answer(s, q, len, r, sizeof(r), &res);
	check_response(q, len, r, n, &res);
	n2 = dnsstub_answer(s, q, len, r2, sizeof(r2), &res2);
	check_response(q, len, r2, n2, &res2);
	CHECK(res.outcome == res2.outcome && n == n2 && memcmp(r, r2, n) == 0);
	CHECK(strcmp(res.display, res2.display) == 0);
	if (res.outcome == DNSSTUB_ANSWER) {
		char name[HOSTNAME_MAX + 1];
		struct host_target ht;

		CHECK(addr_equal(&res.addr, &res2.addr));
		CHECK(dnsstub_addr_is_synthetic(&res.addr));
		CHECK(dnsstub_table_lookup_addr(t, &res.addr, name));
		CHECK(strcmp(name, res.display) == 0);
		CHECK(hostname_normalise(name, strlen(name), &ht) == HOSTNAME_OK);
		CHECK(!ht.is_addr && strcmp(ht.name, name) == 0);
	}
	CHECK(!res.would_block || policies[m]->mode == POLICY_MODE_SHADOW);
	if (res.outcome == DNSSTUB_ANSWER && policies[m]->mode == POLICY_MODE_ENFORCE) {
		struct host_target ht;
		struct verdict v;

		CHECK(!res.blocked);
		CHECK(hostname_normalise(res.display, strlen(res.display), &ht) ==
		      HOSTNAME_OK);
		CHECK(dnsstub_name_allowable(policies[m], &ht, &v));
	}
	if (res.outcome == DNSSTUB_NXDOMAIN_POLICY) {
		struct host_target ht;
		struct verdict v;

		CHECK(policies[m]->mode == POLICY_MODE_ENFORCE);
		CHECK(hostname_normalise(res.display, strlen(res.display), &ht) ==
		      HOSTNAME_OK);
		CHECK(!dnsstub_name_allowable(policies[m], &ht, &v));
	}
	free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dnsstub_table *tables[3];
	struct dnsstub *stubs[3];
	int m, k;

	init_policies();
	for (m = 0; m < 3; m++) {
		CHECK(dnsstub_table_new(3, &tables[m]) == 0);
		stubs[m] = dnsstub_new(policies[m], tables[m]);
	}
	for (k = 0; k < 8 && size >= 2; k++) {
		size_t len = get16(data);

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		for (m = 0; m < 3; m++)
			one(stubs[m], tables[m], m, data, len);
		data += len;
		size -= len;
	}
	for (m = 0; m < 3; m++) {
		CHECK(dnsstub_table_count(tables[m]) <= 3);
		dnsstub_free(stubs[m]);
		dnsstub_table_free(tables[m]);
	}
	return 0;
}
