/* SPDX-License-Identifier: Apache-2.0
 * fuzz_msg.c - libFuzzer target for the message readers (msg.c) and the
 * key holder's check of a record request (keeper_parse_record), which take
 * bytes from a proxy worker: a less trusted process that parses hostile
 * input and may have been taken over.
 *
 * The input is one datagram. It is read three ways, each on an exact-size
 * heap copy so that ASan reports any read past its end:
 *  - as a record request from a worker and from the supervisor;
 *  - field by field, following the kind bytes, with a bound taken from the
 *    input's first byte;
 *  - as the key holder's other requests (set-policy, end).
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - an accepted record has a type of the receipt grammar, a decision and
 *    a point inside their enums, a subject that is a JSON object, no flag
 *    but MSG_RECORD_WANT_SEQ; from a worker, no stream-opening type, no
 *    session.end or policy.reload, and a point of the proxy's own; its
 *    strings lie inside the message and end at their NUL;
 *  - an accepted record, written again with msg.c's writer from the fields
 *    read, is byte for byte the input: there is one encoding of a message,
 *    so two peers can never disagree about what one says;
 *  - a refused record leaves a reason; a reader that failed once fails to
 *    the end, msg_end() included, and says why;
 *  - every string a getter hands out is NUL-terminated inside the buffer,
 *    holds no NUL and is within its bound; every offset stays within the
 *    message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "keeper.h"
#include "msg.h"
#include "receipt_line.h"

static uint8_t *copy_exact(const uint8_t *s, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	CHECK(p != NULL);
	if (len)
		memcpy(p, s, len);
	return p;
}

static bool inside(const void *p, size_t n, const uint8_t *buf, size_t len)
{
	const uint8_t *q = p;

	return q >= buf && n <= len && (size_t)(q - buf) <= len - n;
}

static bool worker_point(enum receipt_point p)
{
	return p == RECEIPT_POINT_EGRESS_PROXY || p == RECEIPT_POINT_BROKER ||
	       p == RECEIPT_POINT_GIT;
}

static void check_record(const uint8_t *buf, size_t len, enum keeper_peer peer)
{
	struct keeper_record_req req;
	struct msg_reader r;
	char why[256] = "";
	struct msg again = { 0 };
	char *subject;

	if (!msg_reader_init(&r, MSG_CHAN_KEEPER, buf, len) || r.type != MSG_RECORD) {
		CHECK(r.error != NULL || r.type != MSG_RECORD);
		return;
	}
	if (!keeper_parse_record(&r, peer, &req, why, sizeof(why))) {
		CHECK(why[0] != '\0');
		CHECK(req.subject == NULL);
		return;
	}
	CHECK(receipt_type_valid(req.type, strlen(req.type)));
	CHECK(inside(req.type, strlen(req.type) + 1, buf, len));
	CHECK(inside(req.rule, strlen(req.rule) + 1, buf, len));
	CHECK(inside(req.reason, strlen(req.reason) + 1, buf, len));
	CHECK(strlen(req.rule) <= KEEPER_TEXT_MAX && strlen(req.reason) <= KEEPER_TEXT_MAX);
	CHECK((unsigned)req.decision < RECEIPT_DECISION_COUNT);
	CHECK((unsigned)req.point < RECEIPT_POINT_COUNT);
	CHECK(json_is_object(req.subject));
	CHECK(strcmp(req.type, "session.end") != 0);
	if (peer == KEEPER_PEER_WORKER) {
		CHECK(!receipt_type_opens_stream(req.type));
		CHECK(strcmp(req.type, "policy.reload") != 0);
		CHECK(worker_point(req.point));
	}
	/* Written again from what was read: the very same bytes. The
	 * subject travels as text, so the input's text is what is compared:
	 * it is taken from the message (the 6th field). */
	{
		struct msg_reader r2;
		const char *t, *ru, *sj, *re;
		uint32_t fl, de, po;

		CHECK(msg_reader_init(&r2, MSG_CHAN_KEEPER, buf, len));
		CHECK(msg_get_u32(&r2, &fl) && msg_get_str(&r2, MSG_MAX, &t, NULL) &&
		      msg_get_u32(&r2, &de) && msg_get_u32(&r2, &po) &&
		      msg_get_str(&r2, MSG_MAX, &ru, NULL) &&
		      msg_get_str(&r2, MSG_MAX, &sj, NULL) &&
		      msg_get_str(&r2, MSG_MAX, &re, NULL) && msg_end(&r2));
		CHECK(fl == (req.want_seq ? MSG_RECORD_WANT_SEQ : 0u));
		subject = strdup(sj);
		CHECK(subject != NULL);
	}
	msg_start(&again, MSG_RECORD);
	msg_put_u32(&again, req.want_seq ? MSG_RECORD_WANT_SEQ : 0);
	msg_put_cstr(&again, req.type);
	msg_put_u32(&again, (uint32_t)req.decision);
	msg_put_u32(&again, (uint32_t)req.point);
	msg_put_cstr(&again, req.rule);
	msg_put_cstr(&again, subject);
	msg_put_cstr(&again, req.reason);
	CHECK(!again.overflow && again.len == len && memcmp(again.buf, buf, len) == 0);
	msg_free(&again);
	free(subject);
	json_decref(req.subject);
}

/* Walks the fields by their kind bytes: whatever a getter hands out lies
 * inside the message, and a failure sticks. */
static void walk(const uint8_t *buf, size_t len, size_t bound)
{
	struct msg_reader r;
	bool failed;
	size_t steps;

	failed = !msg_reader_init(&r, MSG_CHAN_KEEPER, buf, len);
	for (steps = 0; steps < 64; steps++) {
		uint8_t kind = r.off < len ? buf[r.off] : 0;
		const char *s;
		const void *b;
		uint32_t u32;
		uint64_t u64;
		size_t n = 0;
		bool ok;

		CHECK(r.off <= len);
		switch (kind) {
		case 'i':
			ok = msg_get_u32(&r, &u32);
			break;
		case 'q':
			ok = msg_get_u64(&r, &u64);
			break;
		case 's':
			ok = msg_get_str(&r, bound, &s, &n);
			if (ok) {
				CHECK(n <= bound && strlen(s) == n);
				CHECK(inside(s, n + 1, buf, len));
			}
			break;
		case 'b':
			ok = msg_get_bytes(&r, bound, &b, &n);
			if (ok)
				CHECK(n <= bound && inside(b, n, buf, len));
			break;
		default:
			ok = msg_get_u32(&r, &u32); /* the wrong kind: must fail */
			CHECK(!ok);
			break;
		}
		if (failed)
			CHECK(!ok);
		if (!ok) {
			failed = true;
			CHECK(r.error != NULL);
		}
		if (r.off == len && !failed)
			break;
	}
	CHECK(msg_end(&r) == (!failed && r.off == len));
	if (failed)
		CHECK(r.error != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = copy_exact(data, size);

	check_record(buf, size, KEEPER_PEER_WORKER);
	check_record(buf, size, KEEPER_PEER_SUPERVISOR);
	walk(buf, size, size ? data[0] : 0);
	walk(buf, size, MSG_MAX);
	free(buf);
	return 0;
}
