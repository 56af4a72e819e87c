/* SPDX-License-Identifier: Apache-2.0
 * fuzz_h2grpc.c - libFuzzer target for the gRPC path of an intercepted h2
 * answer (h2.c): DATA frames of any size carry length-prefixed messages;
 * each whole message goes through the scrubber (one feed, then its end,
 * as the secret filter's transform is driven per message) and is
 * re-framed with its new length (h2_grpc_parse, h2_grpc_frame).
 *
 * Input: a first byte choosing the DATA frame size (1..256), a second
 * saying whether to build messages (1) or take the rest raw (0); built
 * messages splice the registered values into payloads where the bytes say.
 *
 * Invariants, each checked with abort():
 *  - no registered value is in any message given out;
 *  - what is given out parses back as whole messages, as many as came in
 *    whole, each the scrubbed payload of one that came in (the same as
 *    scrub_oneshot() of it);
 *  - a compressed or oversized message stops the stream: nothing after
 *    it is given out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fuzz.h"
#include "h2.h"
#include "scrub.h"

static const struct scrub_needle needles[] = {
	{ "SECRETvalue-0123456789abcdef", 28, "ph-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 35 },
	{ "Tok_9Z", 6, "ph-yyyyyyyyyy", 13 },
};
#define NNEEDLES (sizeof(needles) / sizeof(needles[0]))

static struct scrub_set *set;

static bool has_value(const char *p, size_t n)
{
	size_t k;

	if (!p || n == 0) /* an empty buffer may be a NULL data pointer */
		return false;
	for (k = 0; k < NNEEDLES; k++)
		if (memmem(p, n, needles[k].value, needles[k].value_len))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf stream = { 0 }, gin = { 0 }, out = { 0 }, expect = { 0 };
	struct scrub *s;
	size_t frame, off, nin = 0, nout = 0;
	bool stopped = false;

	if (!set)
		set = scrub_set_new(needles, NNEEDLES);
	if (size < 2)
		return 0;
	frame = (size_t)data[0] + 1;
	if (data[1] & 1) {
		/* messages: [len byte][payload...], a payload byte 0xff
		 * splices a value in */
		off = 2;
		while (off < size) {
			size_t n = data[off++], j;
			struct buf m = { 0 };

			for (j = 0; j < n && off < size; j++, off++) {
				if (data[off] == 0xff)
					buf_append(&m, needles[j % NNEEDLES].value,
						   needles[j % NNEEDLES].value_len);
				else
					buf_append(&m, &data[off], 1);
			}
			h2_grpc_frame(&stream, m.data ? m.data : "", m.len);
			buf_free(&m);
		}
	} else {
		buf_append(&stream, data + 2, size - 2);
	}
	s = scrub_new(set);
	/* DATA frames of @frame bytes, as u_data gets them */
	for (off = 0; off < stream.len && !stopped; off += frame) {
		size_t n = stream.len - off < frame ? stream.len - off : frame;

		buf_append(&gin, stream.data + off, n);
		for (;;) {
			const char *payload;
			uint32_t plen;
			size_t used;
			struct scrub_buf sb = { 0 };
			enum h2_grpc r = h2_grpc_parse(gin.data, gin.len, &payload, &plen, &used);

			if (r == H2_GRPC_MORE)
				break;
			if (r != H2_GRPC_MESSAGE) {
				stopped = true;
				break;
			}
			nin++;
			scrub_feed(s, payload, plen, &sb);
			scrub_finish(s, &sb);
			CHECK(!has_value(sb.data, sb.len));
			h2_grpc_frame(&out, sb.data ? sb.data : "", sb.len);
			scrub_buf_free(&sb);
			(void)scrub_oneshot(set, payload, plen, &sb, NULL);
			h2_grpc_frame(&expect, sb.data ? sb.data : "", sb.len);
			scrub_buf_free(&sb);
			buf_consume(&gin, used);
		}
	}
	/* the output parses back, message for message */
	CHECK(out.len == expect.len && (out.len == 0 || memcmp(out.data, expect.data, out.len) == 0));
	for (off = 0; off < out.len;) {
		const char *payload;
		uint32_t plen;
		size_t used;

		CHECK(h2_grpc_parse(out.data + off, out.len - off, &payload, &plen, &used) ==
		      H2_GRPC_MESSAGE);
		CHECK(!has_value(payload, plen));
		off += used;
		nout++;
	}
	CHECK(nout == nin);
	scrub_free(s);
	buf_free(&stream);
	buf_free(&gin);
	buf_free(&out);
	buf_free(&expect);
	return 0;
}
