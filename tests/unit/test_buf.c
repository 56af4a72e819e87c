/* SPDX-License-Identifier: Apache-2.0
 * test_buf.c - buf.c: growth, consumption, and buf_release_empty()
 * giving back the storage of an empty buffer only (an idle connection's
 * buffers, exchange.c).
 */
#include <string.h>

#include "buf.h"
#include "tap.h"

int main(void)
{
	struct buf b = { 0 };

	buf_release_empty(&b);
	tap_ok(b.data == NULL && b.cap == 0, "an unused buffer: nothing to release");

	buf_append(&b, "hello", 5);
	tap_ok(b.len == 5 && b.cap >= 5, "appended 5 bytes");
	buf_release_empty(&b);
	tap_ok(b.data != NULL && b.len == 5 && memcmp(b.data, "hello", 5) == 0,
	       "a buffer holding bytes keeps them");

	(void)buf_reserve(&b, 20000);
	tap_ok(b.cap >= 20005, "grown to %zu", b.cap);
	buf_consume(&b, 5);
	tap_ok(b.len == 0 && b.data != NULL, "consumed: empty, storage kept");
	buf_release_empty(&b);
	tap_ok(b.data == NULL && b.cap == 0 && b.len == 0, "released: no storage left");

	buf_puts(&b, "again");
	tap_ok(b.len == 5 && memcmp(b.data, "again", 5) == 0, "usable again after release");
	buf_free(&b);
	return tap_done();
}
