/* SPDX-License-Identifier: Apache-2.0
 * test_dnsstub.c - table tests of dnsstub.c: the strict parse of a query
 * (every malformation answered or dropped as documented), the answer for
 * each type and mode, the names no rule could allow (every port tried),
 * the once-per-name recording, and the shared table (one address per
 * name, never reused, a full table, readers in another process that see
 * complete entries and cannot write).
 *
 * Every query is answered from an exact-size heap copy, so that under
 * `make SAN=1` a read past the datagram is an ASan error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dnsstub.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	if (!p)
		tap_diag("policy: %s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

struct qbuf {
	uint8_t b[1200];
	size_t n;
};

static void put(struct qbuf *q, const void *p, size_t n)
{
	ASSERT(q->n + n <= sizeof(q->b));
	memcpy(q->b + q->n, p, n);
	q->n += n;
}

static void put16(struct qbuf *q, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(q, b, 2);
}

/* Appends hex digits (spaces ignored). */
static void put_hex(struct qbuf *q, const char *hex)
{
	while (*hex) {
		unsigned int v;

		if (*hex == ' ') {
			hex++;
			continue;
		}
		ASSERT(sscanf(hex, "%2x", &v) == 1);
		ASSERT(q->n < sizeof(q->b));
		q->b[q->n++] = (uint8_t)v;
		hex += 2;
	}
}

/* A dotted name on the wire; "" is the root. */
static void put_name(struct qbuf *q, const char *name)
{
	while (*name) {
		size_t l = strcspn(name, ".");
		uint8_t lb = (uint8_t)l;

		ASSERT(l > 0 && l < 64);
		put(q, &lb, 1);
		put(q, name, l);
		name += l;
		if (*name == '.')
			name++;
	}
	put(q, "", 1);
}

static void header(struct qbuf *q, uint16_t id, uint16_t flags, uint16_t qd,
		   uint16_t an, uint16_t ns, uint16_t ar)
{
	q->n = 0;
	put16(q, id);
	put16(q, flags);
	put16(q, qd);
	put16(q, an);
	put16(q, ns);
	put16(q, ar);
}

static void query(struct qbuf *q, uint16_t id, const char *name, uint16_t qtype)
{
	header(q, id, 0x0100, 1, 0, 0, 0);
	put_name(q, name);
	put16(q, qtype);
	put16(q, 1);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Answers @q from an exact-size copy. */
static size_t answer(struct dnsstub *s, const struct qbuf *q, uint8_t *out,
		     struct dnsstub_result *res)
{
	uint8_t *copy = util_xmalloc(q->n ? q->n : 1);
	size_t n;

	memcpy(copy, q->b, q->n);
	n = dnsstub_answer(s, copy, q->n, out, DNSSTUB_ANSWER_MAX, res);
	free(copy);
	return n;
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

/* Checks the response @r (@n bytes) to @q against @want: framing, echoed
 * id/RD/opcode/question, rcode, and for an answer the one A record. */
static bool response_ok(const struct qbuf *q, const uint8_t *r, size_t n,
			enum dnsstub_outcome want, bool echo_question,
			const struct dnsstub_result *res, const char *what)
{
	uint16_t flags, qflags = get16(q->b + 2);
	size_t qend = 12;
	bool ok = true;

	if (want == DNSSTUB_DROP)
		return tap_ok(n == 0, "%s: nothing sent", what);
	if (n < 12)
		return tap_ok(false, "%s: a response of %zu bytes", what, n);
	flags = get16(r + 2);
	ok &= get16(r) == get16(q->b);
	ok &= (flags & 0x8000) != 0;                     /* QR */
	ok &= (flags & 0x7800) == (qflags & 0x7800);     /* opcode */
	ok &= (flags & 0x0400) != 0;                     /* AA */
	ok &= (flags & 0x0200) == 0;                     /* TC */
	ok &= (flags & 0x0100) == (qflags & 0x0100);     /* RD echoed */
	ok &= (flags & 0x0080) != 0;                     /* RA */
	ok &= (flags & 0x0070) == 0;                     /* Z, AD, CD */
	ok &= (int)(flags & 0x000f) == rcode_of(want);
	ok &= get16(r + 4) == (echo_question ? 1 : 0);
	ok &= get16(r + 6) == (want == DNSSTUB_ANSWER ? 1 : 0);
	ok &= get16(r + 8) == 0 && get16(r + 10) == 0;
	if (echo_question) {
		/* The question as it was sent, case included. */
		while (q->b[qend] != 0)
			qend += q->b[qend] + 1u;
		qend += 5;
		ok &= n >= qend && memcmp(r + 12, q->b + 12, qend - 12) == 0;
	}
	if (want == DNSSTUB_ANSWER) {
		static const uint8_t rr[12] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0,
						DNSSTUB_TTL, 0, 4 };

		ok &= n == qend + 16 && memcmp(r + qend, rr, sizeof(rr)) == 0 &&
		      res->addr.family == AF_INET &&
		      memcmp(r + qend + 12, res->addr.bytes, 4) == 0;
	} else {
		ok &= n == (echo_question ? qend : 12);
	}
	return tap_ok(ok, "%s: %s, rcode %d, framing", what,
		      dnsstub_outcome_to_string(want), rcode_of(want));
}

static struct dnsstub_table *table_new(uint32_t capacity)
{
	struct dnsstub_table *t = NULL;

	ASSERT(dnsstub_table_new(capacity, &t) == 0);
	return t;
}

static const char *addr_text(const struct addr *a)
{
	static char buf[ADDR_STRLEN];

	addr_format(a, buf, sizeof(buf));
	return buf;
}

/* ------------------------------------------------------------------ */
/* The parse: every malformation                                      */
/* ------------------------------------------------------------------ */

/* The question "allowed.test" A IN, as hex. */
#define QALLOWED "07616c6c6f776564 0474657374 00 0001 0001"
#define HDR(flags, qd, an, ns, ar) "abcd " flags " " qd " " an " " ns " " ar " "
#define OPT_EMPTY "00 0029 04d0 00000000 0000"

struct raw_case {
	const char *what;
	const char *hex;
	enum dnsstub_outcome want;
	bool echo_question;
};

static const struct raw_case raw_cases[] = {
	{ "empty datagram", "", DNSSTUB_DROP, false },
	{ "11 bytes", "abcd 0100 0001 0000 0000 00", DNSSTUB_DROP, false },
	{ "a response (QR)", HDR("8100", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_DROP, false },
	{ "header only", HDR("0100", "0000", "0000", "0000", "0000"),
	  DNSSTUB_FORMERR, false },
	{ "well-formed", HDR("0100", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_ANSWER, true },
	{ "RD clear is echoed clear", HDR("0000", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_ANSWER, true },
	{ "opcode IQUERY", HDR("0900", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_NOTIMP, false },
	{ "opcode STATUS", HDR("1000", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_NOTIMP, false },
	{ "opcode NOTIFY", HDR("2000", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_NOTIMP, false },
	{ "opcode UPDATE", HDR("2800", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_NOTIMP, false },
	{ "TC set in a query", HDR("0300", "0001", "0000", "0000", "0000") QALLOWED,
	  DNSSTUB_FORMERR, false },
	{ "two questions", HDR("0100", "0002", "0000", "0000", "0000") QALLOWED QALLOWED,
	  DNSSTUB_FORMERR, false },
	{ "an answer in a query", HDR("0100", "0001", "0001", "0000", "0000") QALLOWED,
	  DNSSTUB_FORMERR, false },
	{ "an authority record", HDR("0100", "0001", "0000", "0001", "0000") QALLOWED,
	  DNSSTUB_FORMERR, false },
	{ "two additional records", HDR("0100", "0001", "0000", "0000", "0002") QALLOWED
	  OPT_EMPTY OPT_EMPTY, DNSSTUB_FORMERR, false },
	{ "compression pointer in the question",
	  HDR("0100", "0001", "0000", "0000", "0000") "07616c6c6f776564 c00c 0001 0001",
	  DNSSTUB_FORMERR, false },
	{ "pointer as the whole name", HDR("0100", "0001", "0000", "0000", "0000")
	  "c00c 0001 0001", DNSSTUB_FORMERR, false },
	{ "label type 01 (0x40)", HDR("0100", "0001", "0000", "0000", "0000")
	  "41 61 00 0001 0001", DNSSTUB_FORMERR, false },
	{ "label type 10 (0x80)", HDR("0100", "0001", "0000", "0000", "0000")
	  "81 61 00 0001 0001", DNSSTUB_FORMERR, false },
	{ "label past the end", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f77", DNSSTUB_FORMERR, false },
	{ "no terminating root label", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564", DNSSTUB_FORMERR, false },
	{ "no type and class", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00", DNSSTUB_FORMERR, false },
	{ "half a class", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 0001 00", DNSSTUB_FORMERR, false },
	{ "a trailing byte", HDR("0100", "0001", "0000", "0000", "0000") QALLOWED "00",
	  DNSSTUB_FORMERR, false },
	{ "EDNS OPT, no options", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  OPT_EMPTY, DNSSTUB_ANSWER, true },
	{ "EDNS OPT with a cookie", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  "00 0029 04d0 00008000 000c 000a 0008 0102030405060708",
	  DNSSTUB_ANSWER, true },
	{ "EDNS version 1 is answered without EDNS",
	  HDR("0100", "0001", "0000", "0000", "0001") QALLOWED "00 0029 04d0 00010000 0000",
	  DNSSTUB_ANSWER, true },
	{ "OPT owner not the root", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  "0161 00 0029 04d0 00000000 0000", DNSSTUB_FORMERR, false },
	{ "additional record not OPT", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  "00 00fa 00ff 00000000 0000", DNSSTUB_FORMERR, false },
	{ "OPT rdlen past the end", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  "00 0029 04d0 00000000 0008 000a0004", DNSSTUB_FORMERR, false },
	{ "OPT option length past rdlen", HDR("0100", "0001", "0000", "0000", "0001")
	  QALLOWED "00 0029 04d0 00000000 0006 000a 0008 0102", DNSSTUB_FORMERR, false },
	{ "OPT half an option header", HDR("0100", "0001", "0000", "0000", "0001")
	  QALLOWED "00 0029 04d0 00000000 0002 000a", DNSSTUB_FORMERR, false },
	{ "OPT header cut short", HDR("0100", "0001", "0000", "0000", "0001") QALLOWED
	  "00 0029 04d0 0000", DNSSTUB_FORMERR, false },
	{ "bytes after the OPT record", HDR("0100", "0001", "0000", "0000", "0001")
	  QALLOWED OPT_EMPTY "00", DNSSTUB_FORMERR, false },
	{ "class CHAOS", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 0001 0003", DNSSTUB_REFUSED, true },
	{ "class ANY", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 0001 00ff", DNSSTUB_REFUSED, true },
	{ "qtype OPT", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 0029 0001", DNSSTUB_FORMERR, false },
	{ "qtype TSIG", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 00fa 0001", DNSSTUB_FORMERR, false },
	{ "qtype TKEY", HDR("0100", "0001", "0000", "0000", "0000")
	  "07616c6c6f776564 0474657374 00 00f9 0001", DNSSTUB_FORMERR, false },
};

static void test_raw(void)
{
	struct policy *p = load("{\"version\":1,\"mode\":\"enforce\",\"egress\":{"
				"\"allow\":[\"allowed.test\"]}}");
	struct dnsstub_table *t = table_new(16);
	struct dnsstub *s = dnsstub_new(p, t);
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(raw_cases); i++) {
		const struct raw_case *c = &raw_cases[i];
		struct qbuf q = { .n = 0 };
		size_t n;

		put_hex(&q, c->hex);
		n = answer(s, &q, out, &res);
		tap_is_str(dnsstub_outcome_to_string(res.outcome),
			   dnsstub_outcome_to_string(c->want), "%s: outcome", c->what);
		response_ok(&q, out, n, c->want, c->echo_question, &res, c->what);
	}
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

/* Sizes: the longest name the wire allows, one byte more, and a query
 * over DNSSTUB_QUERY_MAX. */
static void test_lengths(void)
{
	struct policy *p = load("{\"version\":1,\"mode\":\"shadow\"}");
	struct dnsstub_table *t = table_new(16);
	struct dnsstub *s = dnsstub_new(p, t);
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	char name[300];
	struct qbuf q;
	size_t n;

	/* Three 63-byte labels and one of 61: 3 * 64 + 62 + 1 = 255 bytes
	 * on the wire. */
	memset(name, 'a', sizeof(name));
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	query(&q, 1, name, 1);
	n = answer(s, &q, out, &res);
	tap_is_str(dnsstub_outcome_to_string(res.outcome), "answer",
		   "a 253-byte name (255 on the wire) is answered");
	response_ok(&q, out, n, DNSSTUB_ANSWER, true, &res, "253-byte name");
	tap_is_int(strlen(res.display), 253, "its display form is the name");

	name[253] = 'a';
	name[254] = '\0';
	query(&q, 2, name, 1);
	n = answer(s, &q, out, &res);
	tap_is_str(dnsstub_outcome_to_string(res.outcome), "formerr",
		   "a 254-byte name (256 on the wire) is FORMERR");
	tap_ok(n == 12, "FORMERR is a bare header");

	header(&q, 3, 0x0100, 1, 0, 0, 1);
	put_name(&q, "allowed.test");
	put16(&q, 1);
	put16(&q, 1);
	put_hex(&q, "00 0029 04d0 00000000");
	put16(&q, (uint16_t)(DNSSTUB_QUERY_MAX + 1 - q.n - 2));
	while (q.n < DNSSTUB_QUERY_MAX + 1)
		put(&q, "", 1);
	n = answer(s, &q, out, &res);
	tap_is_str(dnsstub_outcome_to_string(res.outcome), "formerr",
		   "a %d-byte query is FORMERR, however well-formed",
		   DNSSTUB_QUERY_MAX + 1);
	tap_ok(n == 12, "and only its header is answered");
	/* A length byte with the top bits set, followed by as many bytes
	 * as it would count: still no label. 0x40 (64: one over the
	 * limit), 0x80, 0xc0 (a pointer, here to offset 12). */
	{
		static const uint8_t tops[] = { 0x40, 0x80, 0xc0 };
		size_t k;

		for (k = 0; k < ARRAY_SIZE(tops); k++) {
			header(&q, (uint16_t)(10 + k), 0x0100, 1, 0, 0, 0);
			put(&q, &tops[k], 1);
			while (q.n < 13u + tops[k])
				put(&q, "a", 1);
			put_hex(&q, "00 0001 0001");
			n = answer(s, &q, out, &res);
			tap_is_str(dnsstub_outcome_to_string(res.outcome), "formerr",
				   "length byte 0x%02x with %u bytes after it: FORMERR",
				   tops[k], tops[k]);
			tap_ok(n == 12, "FORMERR for 0x%02x is a bare header", tops[k]);
		}
	}
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

/* ------------------------------------------------------------------ */
/* Names: normalisation, invalid names, display form                  */
/* ------------------------------------------------------------------ */

struct name_case {
	const char *what;
	const char *wire;      /* hex of the name on the wire */
	enum dnsstub_outcome want;
	const char *display;
	const char *rule_id;   /* for a refusal */
};

static const struct name_case name_cases[] = {
	{ "plain", "07616c6c6f776564 0474657374 00", DNSSTUB_ANSWER, "allowed.test", "" },
	{ "upper case is the same name", "07414c4c6f574544 0454455354 00",
	  DNSSTUB_ANSWER, "allowed.test", "" },
	{ "underscore and hyphen", "055f612d6231 07616c6c6f776564 0474657374 00",
	  DNSSTUB_NXDOMAIN_POLICY, "_a-b1.allowed.test", "egress.default" },
	{ "the root", "00", DNSSTUB_NXDOMAIN_INVALID, ".", "dns.invalid-name" },
	{ "a dot inside a label", "03612e62 0474657374 00", DNSSTUB_NXDOMAIN_INVALID,
	  "a\\046b.test", "dns.invalid-name" },
	{ "a NUL inside a label", "03610062 0474657374 00", DNSSTUB_NXDOMAIN_INVALID,
	  "a\\000b.test", "dns.invalid-name" },
	{ "a space", "03612062 0474657374 00", DNSSTUB_NXDOMAIN_INVALID,
	  "a\\032b.test", "dns.invalid-name" },
	{ "non-ASCII (UTF-8)", "04c3a97461 0474657374 00", DNSSTUB_NXDOMAIN_INVALID,
	  "\\195\\169ta.test", "dns.invalid-name" },
	{ "a leading hyphen", "022d61 0474657374 00", DNSSTUB_NXDOMAIN_INVALID,
	  "-a.test", "dns.invalid-name" },
	{ "an IPv4 address as a name", "01310132 0133 0134 00", DNSSTUB_NXDOMAIN_INVALID,
	  "1.2.3.4", "dns.invalid-name" },
	{ "an inet_aton form as a name", "03313237 0131 00", DNSSTUB_NXDOMAIN_INVALID,
	  "127.1", "dns.invalid-name" },
	{ "a hex form as a name", "0a30783766303030303031 00", DNSSTUB_NXDOMAIN_INVALID,
	  "0x7f000001", "dns.invalid-name" },
	{ "a numeric last label", "03666f6f 03313233 00", DNSSTUB_NXDOMAIN_INVALID,
	  "foo.123", "dns.invalid-name" },
};

static void test_names(void)
{
	struct policy *p = load("{\"version\":1,\"mode\":\"enforce\",\"egress\":{"
				"\"allow\":[\"allowed.test\"]}}");
	struct dnsstub_table *t = table_new(16);
	struct dnsstub *s = dnsstub_new(p, t);
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(name_cases); i++) {
		const struct name_case *c = &name_cases[i];
		struct qbuf q;
		size_t n;

		header(&q, (uint16_t)(100 + i), 0x0100, 1, 0, 0, 0);
		put_hex(&q, c->wire);
		put16(&q, 1);
		put16(&q, 1);
		n = answer(s, &q, out, &res);
		tap_is_str(dnsstub_outcome_to_string(res.outcome),
			   dnsstub_outcome_to_string(c->want), "%s: outcome", c->what);
		tap_is_str(res.display, c->display, "%s: display form", c->what);
		tap_is_str(res.rule_id, c->rule_id, "%s: rule", c->what);
		tap_ok(res.blocked == (c->want != DNSSTUB_ANSWER) && !res.would_block,
		       "%s: blocked iff refused", c->what);
		response_ok(&q, out, n, c->want, true, &res, c->what);
	}
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

/* ------------------------------------------------------------------ */
/* Decisions per mode and type                                        */
/* ------------------------------------------------------------------ */

struct decide_case {
	const char *name;
	uint16_t qtype;
	enum dnsstub_outcome want;
	bool would_block;
	bool record;
	const char *rule_id;
};

#define POLICY_RULES                                                        \
	"\"egress\":{\"allow\":[\"allowed.test\",\"*.wild.test\","          \
	"\"api.test:8443\",\"any.test:*\",\"den.test\"],"                   \
	"\"deny\":[\"bad.wild.test\",\"den.test\"]},"                       \
	"\"git\":{\"hosts\":[\"git.test\"],\"api_hosts\":[\"api.git.test\"]}"

static const struct decide_case enforce_cases[] = {
	{ "allowed.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "allowed.test", 28, DNSSTUB_NODATA, false, false, "" },
	{ "allowed.test", 15, DNSSTUB_NODATA, false, false, "" },   /* MX */
	{ "allowed.test", 16, DNSSTUB_NODATA, false, false, "" },   /* TXT */
	{ "allowed.test", 65, DNSSTUB_NODATA, false, false, "" },   /* HTTPS */
	{ "allowed.test", 255, DNSSTUB_NODATA, false, false, "" },  /* ANY */
	{ "x.wild.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "a.b.wild.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "wild.test", 1, DNSSTUB_NXDOMAIN_POLICY, false, true, "egress.default" },
	{ "wild.test", 28, DNSSTUB_NXDOMAIN_POLICY, false, false, "egress.default" },
	{ "bad.wild.test", 1, DNSSTUB_NXDOMAIN_POLICY, false, true, "egress.deny[0]" },
	{ "den.test", 1, DNSSTUB_NXDOMAIN_POLICY, false, true, "egress.deny[1]" },
	{ "api.test", 1, DNSSTUB_ANSWER, false, false, "" },        /* 8443 only */
	{ "any.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "git.test", 1, DNSSTUB_ANSWER, false, false, "" },        /* git.hosts */
	{ "api.git.test", 1, DNSSTUB_ANSWER, false, false, "" },    /* api_hosts */
	{ "other.test", 1, DNSSTUB_NXDOMAIN_POLICY, false, true, "egress.default" },
	{ "other.test", 1, DNSSTUB_NXDOMAIN_POLICY, false, false, "egress.default" },
	{ "OTHER.test", 28, DNSSTUB_NXDOMAIN_POLICY, false, false, "egress.default" },
	{ "other.test", 16, DNSSTUB_NXDOMAIN_POLICY, false, false, "egress.default" },
	{ "allowed.test.evil", 1, DNSSTUB_NXDOMAIN_POLICY, false, true, "egress.default" },
};

static const struct decide_case shadow_cases[] = {
	{ "allowed.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "other.test", 1, DNSSTUB_ANSWER, true, true, "egress.default" },
	{ "other.test", 1, DNSSTUB_ANSWER, true, false, "egress.default" },
	{ "other.test", 28, DNSSTUB_NODATA, true, false, "egress.default" },
	{ "aaaa-first.test", 28, DNSSTUB_NODATA, true, true, "egress.default" },
	{ "aaaa-first.test", 1, DNSSTUB_ANSWER, true, false, "egress.default" },
	{ "bad.wild.test", 1, DNSSTUB_ANSWER, true, true, "egress.deny[0]" },
	{ "1.2.3.4", 1, DNSSTUB_NXDOMAIN_INVALID, false, true, "dns.invalid-name" },
	{ "1.2.3.4", 1, DNSSTUB_NXDOMAIN_INVALID, false, false, "dns.invalid-name" },
};

static const struct decide_case off_cases[] = {
	{ "allowed.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "other.test", 1, DNSSTUB_ANSWER, false, false, "" },
	{ "other.test", 28, DNSSTUB_NODATA, false, false, "" },
	{ "foo.123", 1, DNSSTUB_NXDOMAIN_INVALID, false, true, "dns.invalid-name" },
};

static void run_decide(const char *mode, const struct decide_case *cases,
		       size_t ncases)
{
	char json[1024];
	struct policy *p;
	struct dnsstub_table *t = table_new(64);
	struct dnsstub *s;
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	size_t i;

	snprintf(json, sizeof(json), "{\"version\":1,\"mode\":\"%s\",%s}", mode,
		 POLICY_RULES);
	p = load(json);
	s = dnsstub_new(p, t);
	for (i = 0; i < ncases; i++) {
		const struct decide_case *c = &cases[i];
		struct qbuf q;
		size_t n;

		query(&q, (uint16_t)(7000 + i), c->name, c->qtype);
		n = answer(s, &q, out, &res);
		tap_is_str(dnsstub_outcome_to_string(res.outcome),
			   dnsstub_outcome_to_string(c->want), "%s: %s type %u: outcome",
			   mode, c->name, c->qtype);
		response_ok(&q, out, n, c->want, true, &res, c->name);
		tap_ok(res.would_block == c->would_block && res.record == c->record &&
			       res.blocked == (rcode_of(c->want) != 0),
		       "%s: %s type %u: would_block %d record %d blocked %d", mode,
		       c->name, c->qtype, res.would_block, res.record, res.blocked);
		tap_is_str(res.rule_id, c->rule_id, "%s: %s: rule", mode, c->name);
		tap_ok((res.reason != NULL) == (c->rule_id[0] != '\0'),
		       "%s: %s: a reason exactly when refused", mode, c->name);
		tap_is_int(res.qtype, c->qtype, "%s: %s: qtype reported", mode, c->name);
		if (c->want == DNSSTUB_ANSWER) {
			char name[HOSTNAME_MAX + 1];

			tap_ok(dnsstub_addr_is_synthetic(&res.addr) &&
				       dnsstub_table_lookup_addr(t, &res.addr, name) &&
				       strcasecmp(name, c->name) == 0,
			       "%s: %s: %s stands for it", mode, c->name,
			       addr_text(&res.addr));
		}
	}
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

static void test_decide(void)
{
	run_decide("enforce", enforce_cases, ARRAY_SIZE(enforce_cases));
	run_decide("shadow", shadow_cases, ARRAY_SIZE(shadow_cases));
	run_decide("off", off_cases, ARRAY_SIZE(off_cases));
}

/* ------------------------------------------------------------------ */
/* dnsstub_name_allowable: every port                                 */
/* ------------------------------------------------------------------ */

struct allowable_case {
	const char *what;
	const char *egress; /* the "egress" object's members */
	const char *git;    /* the "git" object's members, or NULL */
	const char *host;
	bool allowable;
	const char *rule_id; /* when not */
};

static const struct allowable_case allowable_cases[] = {
	{ "a default-port rule", "\"allow\":[\"x.test\"]", NULL, "x.test", true, "" },
	{ "a default-port rule, no egress.ports", "\"allow\":[\"x.test\"],\"ports\":[]",
	  NULL, "x.test", false, "egress.default" },
	{ "one explicit port", "\"allow\":[\"x.test:8080\"],\"ports\":[]", NULL, "x.test",
	  true, "" },
	{ "that port denied", "\"allow\":[\"x.test:8080\"],\"deny\":[\"x.test:8080\"]",
	  NULL, "x.test", false, "egress.deny[0]" },
	{ "port-less deny beats :*", "\"allow\":[\"x.test:*\"],\"deny\":[\"x.test\"]",
	  NULL, "x.test", false, "egress.deny[0]" },
	{ ":* with egress.ports denied: a port no rule names",
	  "\"allow\":[\"x.test:*\"],\"deny\":[\"x.test:80\",\"x.test:443\"]", NULL,
	  "x.test", true, "" },
	{ "egress.ports denied, one explicit allowed",
	  "\"allow\":[\"x.test\",\"x.test:8443\"],\"deny\":[\"x.test:80\",\"x.test:443\"]",
	  NULL, "x.test", true, "" },
	{ "every named port denied",
	  "\"allow\":[\"x.test\"],\"deny\":[\"x.test:80\",\"x.test:443\"]", NULL,
	  "x.test", false, "egress.deny[0]" },
	{ "* allows every name", "\"allow\":[\"*\"]", NULL, "any.where.test", true, "" },
	{ "* but a deny below", "\"allow\":[\"*\"],\"deny\":[\"*.corp.test\"]", NULL,
	  "a.corp.test", false, "egress.deny[0]" },
	{ "an address rule never allows a name", "\"allow\":[\"203.0.113.7\"]", NULL,
	  "x.test", false, "egress.default" },
	{ "a git host needs no allow rule", "\"allow\":[]", "\"hosts\":[\"git.test\"]",
	  "git.test", true, "" },
	{ "a git API host needs no allow rule", "\"allow\":[]",
	  "\"api_hosts\":[\"api.git.test\"]", "api.git.test", true, "" },
	{ "a deny rule beats a git host", "\"deny\":[\"git.test\"]",
	  "\"hosts\":[\"git.test\"]", "git.test", false, "egress.deny[0]" },
	{ "a git host denied on 443 only, no SSH", "\"deny\":[\"git.test:443\"]",
	  "\"hosts\":[\"git.test\"]", "git.test", false, "egress.deny[0]" },
	{ "a git host denied on 443, SSH on", "\"deny\":[\"git.test:443\"]",
	  "\"hosts\":[\"git.test\"],\"ssh\":true", "git.test", true, "" },
	{ "below a git host is not one", "\"allow\":[]", "\"hosts\":[\"git.test\"]",
	  "x.git.test", false, "egress.default" },
};

static void test_allowable(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(allowable_cases); i++) {
		const struct allowable_case *c = &allowable_cases[i];
		char json[1024];
		struct policy *p;
		struct host_target t;
		struct verdict v;
		bool got;

		snprintf(json, sizeof(json), "{\"version\":1,\"egress\":{%s}%s%s%s}",
			 c->egress, c->git ? ",\"git\":{" : "", c->git ? c->git : "",
			 c->git ? "}" : "");
		p = load(json);
		ASSERT(hostname_normalise(c->host, strlen(c->host), &t) == HOSTNAME_OK);
		memset(&v, 0, sizeof(v));
		got = dnsstub_name_allowable(p, &t, &v);
		tap_ok(got == c->allowable, "%s: %s is %sallowable", c->what, c->host,
		       c->allowable ? "" : "not ");
		if (!c->allowable)
			tap_is_str(v.rule, c->rule_id, "%s: explained by its rule", c->what);
		policy_free(p);
	}
}

/* ------------------------------------------------------------------ */
/* The table                                                          */
/* ------------------------------------------------------------------ */

static void test_table_full(void)
{
	struct policy *p = load("{\"version\":1,\"mode\":\"enforce\",\"egress\":{"
				"\"allow\":[\"*\"],\"deny\":[\"no.test\"]}}");
	struct dnsstub_table *t = table_new(3);
	struct dnsstub *s = dnsstub_new(p, t);
	static const char *const names[] = { "a.test", "b.test", "c.test" };
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	struct addr first[3], a;
	char name[HOSTNAME_MAX + 1];
	struct qbuf q;
	size_t i, n;

	for (i = 0; i < 3; i++) {
		query(&q, (uint16_t)i, names[i], 1);
		answer(s, &q, out, &res);
		first[i] = res.addr;
		tap_ok(res.outcome == DNSSTUB_ANSWER &&
			       res.addr.bytes[0] == 240 && res.addr.bytes[1] == 0 &&
			       res.addr.bytes[2] == 0 && res.addr.bytes[3] == i + 1,
		       "%s gets 240.0.0.%zu (got %s)", names[i], i + 1,
		       addr_text(&res.addr));
	}
	tap_is_int(dnsstub_table_count(t), 3, "three entries");
	query(&q, 9, "d.test", 1);
	n = answer(s, &q, out, &res);
	tap_is_str(dnsstub_outcome_to_string(res.outcome), "servfail",
		   "a fourth name in a table of 3: SERVFAIL");
	response_ok(&q, out, n, DNSSTUB_SERVFAIL, true, &res, "table full");
	tap_ok(res.blocked && res.record && strcmp(res.rule_id, "dns.table-full") == 0,
	       "recorded once as dns.table-full");
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_SERVFAIL && !res.record,
	       "asked again: SERVFAIL, not recorded again");
	query(&q, 10, "d.test", 28);
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_NODATA && !res.blocked,
	       "AAAA of that name needs no address: NODATA");
	query(&q, 11, "no.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_NXDOMAIN_POLICY,
	       "a denied name is NXDOMAIN, full table or not");
	for (i = 0; i < 3; i++) {
		query(&q, (uint16_t)(20 + i), names[i], 1);
		answer(s, &q, out, &res);
		tap_ok(res.outcome == DNSSTUB_ANSWER && addr_equal(&res.addr, &first[i]),
		       "%s keeps its address when the table is full", names[i]);
	}
	/* Lookups by address. */
	tap_ok(dnsstub_table_lookup_addr(t, &first[1], name) &&
		       strcmp(name, "b.test") == 0,
	       "240.0.0.2 -> b.test");
	ASSERT(addr_parse("::ffff:240.0.0.3", &a));
	tap_ok(dnsstub_table_lookup_addr(t, &a, name) && strcmp(name, "c.test") == 0,
	       "::ffff:240.0.0.3 -> c.test");
	ASSERT(addr_parse("240.0.0.4", &a));
	tap_ok(!dnsstub_table_lookup_addr(t, &a, name) && name[0] == '\0' &&
		       dnsstub_addr_is_synthetic(&a),
	       "240.0.0.4 is synthetic but was never handed out");
	ASSERT(addr_parse("240.0.0.0", &a));
	tap_ok(!dnsstub_table_lookup_addr(t, &a, name), "240.0.0.0 stands for nothing");
	ASSERT(addr_parse("240.1.0.1", &a));
	tap_ok(!dnsstub_table_lookup_addr(t, &a, name) && !dnsstub_addr_is_synthetic(&a),
	       "240.1.0.1 is outside the synthetic range");
	ASSERT(addr_parse("203.0.113.9", &a));
	tap_ok(!dnsstub_table_lookup_addr(t, &a, name) && !dnsstub_addr_is_synthetic(&a),
	       "a real address is not synthetic");
	ASSERT(addr_parse("2001:db8::1", &a));
	tap_ok(!dnsstub_table_lookup_addr(t, &a, name) && !dnsstub_addr_is_synthetic(&a),
	       "an IPv6 address is not synthetic");
	tap_is_int(dnsstub_table_add(t, "e.test", &a), -ENOSPC,
		   "dnsstub_table_add on a full table: -ENOSPC");
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

/* The stub remembers 2 x capacity names: past that, every refusal is
 * recorded again (the trail never misses one) and new names get no
 * address. */
static void test_names_bound(void)
{
	struct policy *p = load("{\"version\":1,\"mode\":\"enforce\",\"egress\":{"
				"\"allow\":[\"*.ok.test\"]}}");
	struct dnsstub_table *t = table_new(1);
	struct dnsstub *s = dnsstub_new(p, t);
	uint8_t out[DNSSTUB_ANSWER_MAX];
	struct dnsstub_result res;
	struct qbuf q;

	query(&q, 1, "n1.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.record, "first refused name recorded");
	query(&q, 2, "n2.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.record, "second refused name recorded");
	query(&q, 3, "n3.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_NXDOMAIN_POLICY && res.record,
	       "a third name past the bound: still refused and recorded");
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_NXDOMAIN_POLICY && res.record,
	       "asked again past the bound: recorded again");
	query(&q, 4, "n1.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_NXDOMAIN_POLICY && !res.record,
	       "a remembered name is not recorded twice");
	query(&q, 5, "a.ok.test", 1);
	answer(s, &q, out, &res);
	tap_ok(res.outcome == DNSSTUB_SERVFAIL, "an allowed new name past the bound: SERVFAIL");
	tap_is_int(dnsstub_table_count(t), 0, "and no address was handed out");
	dnsstub_free(s);
	dnsstub_table_free(t);
	policy_free(p);
}

/* A reader in another process: sees entries as they are published,
 * cannot write the table by any route. */
static void test_reader_process(void)
{
	struct dnsstub_table *t = table_new(8);
	struct addr a0, a1;
	int go[2], done[2];
	pid_t pid;
	char c;
	int status;

	ASSERT(dnsstub_table_add(t, "first.test", &a0) == 0);
	ASSERT(pipe(go) == 0 && pipe(done) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		char name[HOSTNAME_MAX + 1];
		struct addr a;
		int fails = 0, fd = dnsstub_table_fd(t);
		struct dnsstub_table *t2 = NULL;
		void *w;

		close(go[1]);
		close(done[0]);
		/* Through the inherited descriptor: no writable mapping, no
		 * write, no truncation. */
		w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		fails += w != MAP_FAILED;
		fails += write(fd, "x", 1) >= 0;
		fails += ftruncate(fd, 0) == 0;
		fails += dnsstub_table_open(fd, &t2) != 0;
		if (t2) {
			fails += !dnsstub_table_lookup_addr(t2, &a0, name) ||
				 strcmp(name, "first.test") != 0;
			dnsstub_table_free(t2);
		}
		fails += dnsstub_table_make_reader(t) != 0;
		fails += dnsstub_table_fd(t) != -1;
		fails += !dnsstub_table_lookup_addr(t, &a0, name) ||
			 strcmp(name, "first.test") != 0;
		fails += dnsstub_table_add(t, "x.test", &a) != -EROFS;
		if (util_write_all(done[1], "r", 1) != 0 || read(go[0], &c, 1) != 1)
			_exit(100);
		/* The writer added second.test meanwhile. */
		ASSERT(addr_parse("240.0.0.2", &a));
		fails += !dnsstub_table_lookup_addr(t, &a, name) ||
			 strcmp(name, "second.test") != 0;
		_exit(fails);
	}
	close(go[0]);
	close(done[1]);
	tap_ok(read(done[0], &c, 1) == 1, "the reader process started");
	ASSERT(dnsstub_table_add(t, "second.test", &a1) == 0);
	tap_ok(util_write_all(go[1], "g", 1) == 0, "second.test added after it attached");
	ASSERT(waitpid(pid, &status, 0) == pid);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "the reader sees both names, cannot map, write or truncate the table "
	       "(%d checks failed)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(go[1]);
	close(done[0]);
	dnsstub_table_free(t);
}

/* mprotect on a reader's mapping: it must never become writable. */
static void test_reader_mprotect(void)
{
	struct dnsstub_table *t = table_new(2), *r = NULL;
	struct addr a;
	char name[HOSTNAME_MAX + 1];

	ASSERT(dnsstub_table_add(t, "one.test", &a) == 0);
	tap_is_int(dnsstub_table_open(dnsstub_table_fd(t), &r), 0, "a second view opens");
	tap_ok(r && dnsstub_table_lookup_addr(r, &a, name) && strcmp(name, "one.test") == 0,
	       "and reads the entry");
	tap_is_int(dnsstub_table_capacity(r), 2, "its capacity comes from the table");
	if (r) {
		/* The struct is private, but its first mapping address is what
		 * lookup reads: find it through /proc/self/maps instead of
		 * guessing, by the memfd's name. */
		FILE *f = fopen("/proc/self/maps", "r");
		char line[512];
		int tried = 0, refused = 0;

		while (f && fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;
			char perms[8];

			if (!strstr(line, "airlock-dnsstub") ||
			    sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 ||
			    perms[1] == 'w')
				continue;
			tried++;
			if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) < 0 &&
			    errno == EACCES)
				refused++;
		}
		if (f)
			fclose(f);
		tap_ok(tried > 0 && tried == refused,
		       "mprotect(PROT_WRITE) on the read-only view: EACCES (%d of %d)",
		       refused, tried);
	}
	dnsstub_table_free(r);
	dnsstub_table_free(t);
}

static void test_open_refuses(void)
{
	struct dnsstub_table *r = NULL;
	char path[] = "/tmp/airlock-dnsstub-test.XXXXXX";
	int fd;

	fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ASSERT(fd >= 0 && ftruncate(fd, 64 + 256) == 0);
	tap_is_int(dnsstub_table_open(fd, &r), -EINVAL, "an unsealed memfd is refused");
	close(fd);
	fd = mkstemp(path);
	ASSERT(fd >= 0);
	unlink(path);
	tap_is_int(dnsstub_table_open(fd, &r), -EINVAL, "a plain file is refused");
	close(fd);
	tap_ok(r == NULL, "and nothing is returned");
	tap_is_int(dnsstub_table_new(0, &r), -EINVAL, "capacity 0 is refused");
	tap_is_int(dnsstub_table_new(DNSSTUB_TABLE_MAX + 1, &r), -EINVAL,
		   "capacity over %u is refused", DNSSTUB_TABLE_MAX);
	tap_is_int(dnsstub_table_new(DNSSTUB_TABLE_MAX, &r), 0,
		   "capacity %u is made", DNSSTUB_TABLE_MAX);
	if (r) {
		struct addr a;
		uint32_t i;
		bool ok = true;
		char name[HOSTNAME_MAX + 1], want[ADDR_STRLEN];

		for (i = 0; i < DNSSTUB_TABLE_MAX && ok; i++) {
			snprintf(want, sizeof(want), "n%u.test", i);
			ok = dnsstub_table_add(r, want, &a) == 0;
		}
		ok = ok && dnsstub_table_lookup_addr(r, &a, name) &&
		     strcmp(name, "n16383.test") == 0;
		addr_format(&a, want, sizeof(want));
		tap_ok(ok && strcmp(want, "240.0.64.0") == 0,
		       "the last of %u names is 240.0.64.0 (got %s)", DNSSTUB_TABLE_MAX, want);
		dnsstub_table_free(r);
	}
}

static void test_outcome_names(void)
{
	int i;

	for (i = 0; i < DNSSTUB_OUTCOME_COUNT; i++)
		tap_ok(strcmp(dnsstub_outcome_to_string((enum dnsstub_outcome)i), "unknown") != 0,
		       "outcome %d has a name (%s)", i,
		       dnsstub_outcome_to_string((enum dnsstub_outcome)i));
	tap_is_str(dnsstub_outcome_to_string(DNSSTUB_OUTCOME_COUNT), "unknown",
		   "out of range: unknown");
}

int main(void)
{
	test_raw();
	test_lengths();
	test_names();
	test_decide();
	test_allowable();
	test_table_full();
	test_names_bound();
	test_reader_process();
	test_reader_mprotect();
	test_open_refuses();
	test_outcome_names();
	return tap_done();
}
