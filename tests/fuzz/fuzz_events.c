/* SPDX-License-Identifier: Apache-2.0
 * fuzz_events.c - libFuzzer target for the stream reader of learn, report
 * and export (events.c): arbitrary bytes as an events file, verified and
 * then read line by line.
 *
 * Invariants: the lines tile the input (each line's bytes lie in it, in
 * order, separated by one newline); sessions never go backwards; a line
 * is verified only if the whole input verified or it lies before the bad
 * line; the raw subject lies inside its line and parses to the same JSON
 * as the parsed subject; the SHA-256 is 64 lowercase hex digits.
 */
#include <string.h>

#include "events.h"
#include "fuzz.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct events_set set;
	struct events_iter it;
	struct events_line ln;
	size_t off = 0, last_session = 0, i;

	memset(&set, 0, sizeof(set));
	set.files = util_xcalloc(1, sizeof(*set.files));
	set.nfiles = 1;
	set.files[0].path = util_xstrdup("fuzz");
	set.files[0].text = util_xmalloc(size + 1);
	memcpy(set.files[0].text, data, size);
	set.files[0].text[size] = '\0';
	set.files[0].len = size;
	receipt_verify_buffer(set.files[0].text, size, NULL, &set.files[0].vr);

	events_iter_init(&it, &set);
	while (events_next(&it, &ln)) {
		CHECK(ln.text == set.files[0].text + off);
		CHECK(off + ln.len <= size);
		CHECK(memchr(ln.text, '\n', ln.len) == NULL);
		off += ln.len;
		if (off < size) {
			CHECK(set.files[0].text[off] == '\n');
			off++;
		}
		CHECK(ln.session >= last_session);
		CHECK(ln.new_session || ln.session == last_session);
		last_session = ln.session;
		CHECK(!ln.verified || set.files[0].vr.ok || ln.lineno < set.files[0].vr.bad_line);
		CHECK(strlen(ln.sha256) == 64);
		for (i = 0; i < 64; i++)
			CHECK((ln.sha256[i] >= '0' && ln.sha256[i] <= '9') ||
			      (ln.sha256[i] >= 'a' && ln.sha256[i] <= 'f'));
		CHECK(!ln.subject || ln.obj);
		if (ln.subject_raw) {
			json_t *again;

			CHECK(ln.subject);
			CHECK(ln.subject_raw >= ln.text &&
			      ln.subject_raw + ln.subject_raw_len <= ln.text + ln.len);
			again = json_loadb(ln.subject_raw, ln.subject_raw_len, 0, NULL);
			CHECK(again && json_equal(again, ln.subject));
			json_decref(again);
		}
		CHECK(ln.ti != NULL);
	}
	CHECK(off == size);
	events_iter_done(&it);
	events_set_free(&set);
	return 0;
}
