/* SPDX-License-Identifier: Apache-2.0
 * test_wsscrub.c - the registry of injected values (registry.c) and the
 * scrubber of an upstream's WebSocket frames (wsscrub.c): a value in one
 * frame, split across the reads at every offset, split across the frames
 * of a message at every offset, in a masked frame, in a ping; frames
 * without a value pass byte for byte; frames that cannot be scrubbed
 * (RSV bits, reserved opcodes, bad fragmentation) are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "tap.h"
#include "util.h"
#include "wsscrub.h"

#define VALUE "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
#define PH "airlock-ph-api-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
#define TOKEN "ghs_0123456789ABCDEFGHIJabcdefghij0123"
#define TOKEN_PH "ghs_placeholderplaceholderplaceholder0"

/* --- frames ------------------------------------------------------------------- */

struct frames {
	char data[1 << 21];
	size_t len;
};

static void frame(struct frames *f, int fin, int opcode, const char *p, size_t n,
		  const unsigned char *mask)
{
	unsigned char *o = (unsigned char *)f->data + f->len;
	size_t h = 2, i;

	o[0] = (unsigned char)((fin ? 0x80 : 0) | opcode);
	if (n < 126) {
		o[1] = (unsigned char)n;
	} else if (n < 65536) {
		o[1] = 126;
		o[2] = (unsigned char)(n >> 8);
		o[3] = (unsigned char)n;
		h = 4;
	} else {
		o[1] = 127;
		for (i = 0; i < 8; i++)
			o[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
		h = 10;
	}
	if (mask) {
		o[1] |= 0x80;
		memcpy(o + h, mask, 4);
		h += 4;
	}
	for (i = 0; i < n; i++)
		o[h + i] = (unsigned char)(p[i] ^ (mask ? mask[i & 3] : 0));
	f->len += h + n;
}

/* Parses @d: the messages' payloads concatenated, "|" after each message,
 * control frames as "<OP:payload>". Returns false on a frame a client
 * would refuse (masked, RSV, bad fragmentation). */
static bool parse(const char *d, size_t len, char *out, size_t cap, int *first_opcode)
{
	const unsigned char *p = (const unsigned char *)d;
	size_t at = 0, o = 0;
	bool in_msg = false;

	*first_opcode = -1;
	while (at < len) {
		int fin, op;
		uint64_t n;
		size_t i;

		if (len - at < 2)
			return false;
		fin = p[at] & 0x80;
		op = p[at] & 0x0f;
		if ((p[at] & 0x70) || (p[at + 1] & 0x80))
			return false;
		n = p[at + 1] & 0x7f;
		at += 2;
		if (n == 126) {
			n = (uint64_t)p[at] << 8 | p[at + 1];
			at += 2;
		} else if (n == 127) {
			n = 0;
			for (i = 0; i < 8; i++)
				n = n << 8 | p[at + i];
			at += 8;
		}
		if (len - at < n || o + n + 8 > cap)
			return false;
		if (op >= 8) {
			o += (size_t)snprintf(out + o, cap - o, "<%d:", op);
			memcpy(out + o, p + at, n);
			o += n;
			out[o++] = '>';
		} else {
			if ((op == 0) != in_msg)
				return false;
			if (op != 0 && *first_opcode < 0)
				*first_opcode = op;
			in_msg = !fin;
			memcpy(out + o, p + at, n);
			o += n;
			if (fin)
				out[o++] = '|';
		}
		at += n;
	}
	out[o] = '\0';
	return !in_msg;
}

static struct registry_set *one_value(struct registry **reg)
{
	*reg = registry_new();
	registry_add(*reg, "api", VALUE, strlen(VALUE), PH, strlen(PH));
	return registry_acquire(*reg);
}

/* Feeds @in split at @k; returns the output (caller frees), or NULL on
 * a refusal. */
static char *run(const struct scrub_set *set, const char *in, size_t len, size_t k,
		 size_t *outlen)
{
	struct wsscrub *w = wsscrub_new(set);
	struct scrub_buf out = { 0 };
	char *r = NULL;

	if (wsscrub_feed(w, in, k, &out) == 0 && wsscrub_feed(w, in + k, len - k, &out) == 0) {
		r = util_xmalloc(out.len + 1);
		memcpy(r, out.data ? out.data : "", out.len);
		*outlen = out.len;
	}
	scrub_buf_free(&out);
	wsscrub_free(w);
	return r;
}

/* --- the registry ---------------------------------------------------------------- */

static void test_registry(void)
{
	struct registry *reg = registry_new();
	struct registry_set *a, *b;
	struct scrub_buf out = { 0 };

	tap_ok(registry_acquire(reg) == NULL, "registry: empty, no set");
	tap_is_int(registry_add(reg, "api", VALUE, strlen(VALUE), PH, strlen(PH)), 1,
		   "registry: a value is added");
	tap_is_int(registry_add(reg, "other", VALUE, strlen(VALUE), "x", 1), 0,
		   "registry: the same value again is not added twice");
	tap_is_int(registry_add(reg, "bad", "a\nb", 3, "x", 1), -1,
		   "registry: a value with a control byte is refused");
	tap_is_int(registry_add(reg, "bad", "", 0, "x", 1), -1, "registry: an empty value is refused");
	tap_is_int(registry_add(reg, "bad", "abc", 3, "", 0), -1,
		   "registry: an empty placeholder is refused");
	a = registry_acquire(reg);
	tap_is_int(registry_count(reg), 1, "registry: one value");
	tap_is_int(registry_add(reg, "git.token", TOKEN, strlen(TOKEN), TOKEN_PH,
				strlen(TOKEN_PH)),
		   1, "registry: a token joins");
	b = registry_acquire(reg);
	tap_is_int(scrub_set_count(registry_scrub(a)), 1, "registry: an older set keeps its values");
	tap_is_int(scrub_set_count(registry_scrub(b)), 2, "registry: the new set has both");
	tap_is_str(registry_name(b, 1), "git.token", "registry: names");
	(void)scrub_oneshot(registry_scrub(b), "x " TOKEN " " VALUE,
			    strlen("x " TOKEN " " VALUE), &out, NULL);
	tap_ok(out.len > 0 && !memmem(out.data, out.len, TOKEN, strlen(TOKEN)) &&
		       memmem(out.data, out.len, PH, strlen(PH)) &&
		       memmem(out.data, out.len, TOKEN_PH, strlen(TOKEN_PH)),
	       "registry: the set scrubs every kind of value");
	scrub_buf_free(&out);
	registry_release(a);
	registry_release(b);
	registry_free(reg);
}

/* --- frames ------------------------------------------------------------------------ */

static void test_split_reads(void)
{
	struct registry *reg;
	struct registry_set *rs = one_value(&reg);
	static struct frames f;
	static char msg[4096];
	const char *payload = "one " VALUE " end";
	size_t k, bad = 0, nk = 0;
	int op;

	f.len = 0;
	frame(&f, 1, 1, payload, strlen(payload), NULL);
	for (k = 0; k <= f.len; k++, nk++) {
		size_t n = 0;
		char *o = run(registry_scrub(rs), f.data, f.len, k, &n);

		if (!o || !parse(o, n, msg, sizeof(msg), &op) || op != 1 ||
		    strcmp(msg, "one " PH " end|") != 0 || memmem(o, n, VALUE, strlen(VALUE)))
			bad++;
		free(o);
	}
	tap_is_int(bad, 0, "a value in one frame, the stream split at each of %zu offsets: "
		   "one text message holding the placeholder", nk);
	registry_release(rs);
	registry_free(reg);
}

static void test_split_frames(void)
{
	struct registry *reg;
	struct registry_set *rs = one_value(&reg);
	static struct frames f;
	static char msg[4096];
	size_t k, bad = 0, n = strlen(VALUE);
	int op;

	for (k = 0; k <= n; k++) {
		char a[128], b[128];
		size_t olen = 0, cut;
		char *o;

		snprintf(a, sizeof(a), "two %.*s", (int)k, VALUE);
		snprintf(b, sizeof(b), "%s end", VALUE + k);
		f.len = 0;
		frame(&f, 0, 2, a, strlen(a), NULL);
		frame(&f, 1, 9, "ping", 4, NULL); /* a control frame in between */
		frame(&f, 1, 0, b, strlen(b), NULL);
		cut = f.len / 2;
		o = run(registry_scrub(rs), f.data, f.len, cut, &olen);
		if (!o || !parse(o, olen, msg, sizeof(msg), &op) || op != 2 ||
		    memmem(o, olen, VALUE, strlen(VALUE)) ||
		    (strcmp(msg, "two " PH " end|<9:ping>") != 0 &&
		     strcmp(msg, "<9:ping>two " PH " end|") != 0 &&
		     !(strstr(msg, "<9:ping>") && strstr(msg, PH)))) {
			tap_diag("k=%zu: %s", k, o ? msg : "(refused)");
			bad++;
		}
		free(o);
	}
	tap_is_int(bad, 0, "a value split across two frames of a message at every offset: "
		   "the message holds the placeholder, a binary message stays binary");
	registry_release(rs);
	registry_free(reg);
}

static void test_kinds(void)
{
	static const unsigned char mask[4] = { 0x11, 0x22, 0x33, 0x44 };
	struct registry *reg;
	struct registry_set *rs = one_value(&reg);
	static struct frames f;
	static char msg[4096];
	size_t olen = 0;
	char *o;
	int op;

	f.len = 0;
	frame(&f, 1, 1, "three " VALUE, strlen("three " VALUE), mask);
	o = run(registry_scrub(rs), f.data, f.len, 3, &olen);
	tap_ok(o && parse(o, olen, msg, sizeof(msg), &op) && strcmp(msg, "three " PH "|") == 0,
	       "a masked frame: unmasked, scrubbed");
	free(o);

	f.len = 0;
	frame(&f, 1, 9, VALUE, strlen(VALUE), NULL);
	frame(&f, 1, 8, "\x03\xe8" VALUE, 2 + strlen(VALUE), NULL);
	o = run(registry_scrub(rs), f.data, f.len, 7, &olen);
	tap_ok(o && parse(o, olen, msg, sizeof(msg), &op) &&
		       strcmp(msg, "<9:" PH "><8:\x03\xe8" PH ">") == 0,
	       "ping and close frames: scrubbed whole");
	free(o);

	/* no value: byte for byte */
	f.len = 0;
	frame(&f, 1, 1, "hello", 5, NULL);
	frame(&f, 1, 2, "\x00\x01\x02", 3, NULL);
	frame(&f, 1, 10, "", 0, NULL);
	{
		static char big[70000];

		memset(big, 'x', sizeof(big));
		frame(&f, 1, 2, big, sizeof(big), NULL);
	}
	o = run(registry_scrub(rs), f.data, f.len, 100, &olen);
	tap_ok(o && olen == f.len && memcmp(o, f.data, f.len) == 0,
	       "frames without a value pass byte for byte (a 70000-byte frame too)");
	free(o);

	/* a frame over the hold bound comes out in fragments, same bytes */
	{
		size_t n = (size_t)1536 * 1024, at, got = 0, frames = 0, bad = 0;
		char *big = util_xmalloc(n);
		struct wsscrub *w = wsscrub_new(registry_scrub(rs));
		struct scrub_buf out = { 0 };
		static struct frames g;

		memset(big, 'y', n);
		memcpy(big + n / 2 - 10, VALUE, strlen(VALUE));
		g.len = 0;
		frame(&g, 1, 2, big, n, NULL);
		for (at = 0; at < g.len; at += 65536) {
			size_t take = g.len - at < 65536 ? g.len - at : 65536;

			if (wsscrub_feed(w, g.data + at, take, &out) < 0)
				bad++;
		}
		at = 0;
		while (at < out.len) {
			const unsigned char *p = (const unsigned char *)out.data + at;
			uint64_t len = p[1] & 0x7f;
			size_t h = 2, i;

			if (len == 126) {
				len = (uint64_t)p[2] << 8 | p[3];
				h = 4;
			} else if (len == 127) {
				len = 0;
				for (i = 0; i < 8; i++)
					len = len << 8 | p[2 + i];
				h = 10;
			}
			if (memmem(p + h, len, VALUE, strlen(VALUE)))
				bad++;
			got += len;
			frames++;
			at += h + len;
		}
		tap_ok(bad == 0 && frames > 1 && got == n - strlen(VALUE) + strlen(PH) &&
			       !memmem(out.data, out.len, VALUE, strlen(VALUE)),
		       "a 1.5 MiB frame: relayed in %zu fragments as it comes, scrubbed", frames);
		scrub_buf_free(&out);
		wsscrub_free(w);
		free(big);
	}
	registry_release(rs);
	registry_free(reg);
}

static void test_refused(void)
{
	static const struct {
		const char *bytes;
		size_t len;
		const char *what;
	} cases[] = {
		{ "\xc1\x05hello", 7, "a compressed frame (RSV1)" },
		{ "\x83\x00", 2, "a reserved data opcode" },
		{ "\x8b\x00", 2, "a reserved control opcode" },
		{ "\x80\x01x", 3, "a continuation outside a message" },
		{ "\x01\x01x\x01\x01y", 6, "a new message inside a fragmented one" },
		{ "\x09\x01x", 3, "a fragmented ping" },
		{ "\x89\x7e\x00\x80", 4, "a ping over 125 bytes" },
	};
	struct registry *reg;
	struct registry_set *rs = one_value(&reg);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct wsscrub *w = wsscrub_new(registry_scrub(rs));
		struct scrub_buf out = { 0 };
		int r = wsscrub_feed(w, cases[i].bytes, cases[i].len, &out);

		tap_ok(r == -1 && wsscrub_error(w) && wsscrub_feed(w, "\x81\x00", 2, &out) == -1,
		       "refused, and nothing more is read: %s (%s)", cases[i].what,
		       wsscrub_error(w) ? wsscrub_error(w) : "no error");
		scrub_buf_free(&out);
		wsscrub_free(w);
	}
	registry_release(rs);
	registry_free(reg);
}

int main(void)
{
	test_registry();
	test_split_reads();
	test_split_frames();
	test_kinds();
	test_refused();
	return tap_done();
}
