/* SPDX-License-Identifier: Apache-2.0
 * wsscrub.c - WebSocket frames from an upstream, scrubbed (wsscrub.h).
 *
 * DOC: Theory of Operation
 *
 * A small state machine over the server's byte stream: the frame header
 * (2 to 14 bytes) is gathered first; then the payload, unmasked as it
 * comes (a server must not mask, but one that does would otherwise hide
 * a value from the scrubber while the client unmasks it), goes to the
 * message's scrub stream, or, for a control frame, is gathered whole.
 * Output frames are written from what the stream released: at the end
 * of each data frame (and, for a frame over 1 MiB, after each slice of
 * it) a non-final fragment with the bytes released so far (none: no
 * frame), and at the message's end a final fragment with the rest; so a
 * message of one frame stays one frame. The first fragment written carries the message's opcode, the
 * others are continuations, so the client reassembles the same message.
 */
#include "wsscrub.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define CONTROL_MAX 125
/* A data frame up to this long is written whole, as one frame, once it
 * has all come (the client sees the frames the upstream sent, but for the
 * replacements); a longer one is written as fragments as it comes. */
#define WS_HOLD_MAX ((uint64_t)1024 * 1024)

enum phase { PH_HEAD = 0, PH_PAYLOAD, PH_FAILED };

struct wsscrub {
	const struct scrub_set *set;
	struct scrub *stream;       /* the current message's payload */
	enum phase phase;
	uint8_t head[14];
	size_t head_len;
	/* the frame being read */
	bool fin;
	uint8_t opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t left, done, len;
	/* the message being read */
	bool in_message;
	uint8_t msg_opcode;
	bool msg_started;           /* a fragment of it was written */
	/* a control frame, gathered */
	char ctl[CONTROL_MAX];
	size_t ctl_len;
	uint64_t *counts;           /* in control frames */
	uint64_t *sum;
	const char *error;
	struct scrub_buf tmp;
};

struct wsscrub *wsscrub_new(const struct scrub_set *set)
{
	struct wsscrub *w = util_xcalloc(1, sizeof(*w));

	w->set = set;
	w->stream = scrub_new(set);
	w->counts = util_xcalloc(scrub_set_count(set), sizeof(*w->counts));
	w->sum = util_xcalloc(scrub_set_count(set), sizeof(*w->sum));
	return w;
}

void wsscrub_free(struct wsscrub *w)
{
	if (!w)
		return;
	scrub_free(w->stream);
	if (w->tmp.data)
		explicit_bzero(w->tmp.data, w->tmp.cap);
	scrub_buf_free(&w->tmp);
	explicit_bzero(w->ctl, sizeof(w->ctl));
	free(w->counts);
	free(w->sum);
	free(w);
}

const char *wsscrub_error(const struct wsscrub *w)
{
	return w->error;
}

const uint64_t *wsscrub_counts(struct wsscrub *w)
{
	const uint64_t *s = scrub_counts(w->stream);
	size_t k, n = scrub_set_count(w->set);

	/* the messages' stream plus the control frames' */
	for (k = 0; k < n; k++)
		w->sum[k] = s[k] + w->counts[k];
	return w->sum;
}

static int fail(struct wsscrub *w, const char *why)
{
	w->phase = PH_FAILED;
	w->error = why;
	return -1;
}

static void put_frame(struct scrub_buf *out, bool fin, uint8_t opcode, const char *p,
		      size_t n)
{
	uint8_t h[10];
	size_t hl;

	h[0] = (uint8_t)((fin ? 0x80 : 0) | opcode);
	if (n < 126) {
		h[1] = (uint8_t)n;
		hl = 2;
	} else if (n < 65536) {
		h[1] = 126;
		h[2] = (uint8_t)(n >> 8);
		h[3] = (uint8_t)n;
		hl = 4;
	} else {
		size_t i;

		h[1] = 127;
		for (i = 0; i < 8; i++)
			h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
		hl = 10;
	}
	if (out->cap - out->len < hl + n) {
		size_t cap = out->cap ? out->cap : 256;

		while (cap - out->len < hl + n)
			cap *= 2;
		out->data = util_xrealloc(out->data, cap);
		out->cap = cap;
	}
	memcpy(out->data + out->len, h, hl);
	if (n)
		memcpy(out->data + out->len + hl, p, n);
	out->len += hl + n;
}

/* Writes what the message's stream released (w->tmp) as a fragment;
 * @fin ends the message (a frame is written even when empty). */
static void emit_data(struct wsscrub *w, bool fin, struct scrub_buf *out)
{
	if (!fin && w->tmp.len == 0)
		return;
	put_frame(out, fin, w->msg_started ? 0 : w->msg_opcode, w->tmp.data, w->tmp.len);
	w->msg_started = true;
	if (w->tmp.len)
		explicit_bzero(w->tmp.data, w->tmp.len);
	w->tmp.len = 0;
}

/* The header in w->head is whole: checks it and starts the payload. */
static int start_frame(struct wsscrub *w)
{
	uint8_t b0 = w->head[0], b1 = w->head[1];
	size_t i, off = 2;

	w->fin = (b0 & 0x80) != 0;
	w->opcode = b0 & 0x0f;
	w->masked = (b1 & 0x80) != 0;
	if (b0 & 0x70)
		return fail(w, "a WebSocket frame with an RSV bit (a compressed frame or an "
			       "extension) cannot be scrubbed");
	w->left = b1 & 0x7f;
	if (w->left == 126) {
		w->left = (uint64_t)w->head[2] << 8 | w->head[3];
		off = 4;
	} else if (w->left == 127) {
		w->left = 0;
		for (i = 0; i < 8; i++)
			w->left = w->left << 8 | w->head[2 + i];
		off = 10;
		if (w->left >> 63)
			return fail(w, "a WebSocket frame length with its top bit set");
	}
	if (w->masked)
		memcpy(w->mask, w->head + off, 4);
	w->done = 0;
	w->len = w->left;
	switch (w->opcode) {
	case 0x0:
		if (!w->in_message)
			return fail(w, "a WebSocket continuation frame outside a message");
		break;
	case 0x1:
	case 0x2:
		if (w->in_message)
			return fail(w, "a new WebSocket message inside a fragmented one");
		w->in_message = true;
		w->msg_opcode = w->opcode;
		w->msg_started = false;
		break;
	case 0x8:
	case 0x9:
	case 0xa:
		if (!w->fin || w->left > CONTROL_MAX)
			return fail(w, "a fragmented or oversized WebSocket control frame");
		w->ctl_len = 0;
		break;
	default:
		return fail(w, "a WebSocket frame with a reserved opcode");
	}
	w->phase = PH_PAYLOAD;
	return 0;
}

/* The frame's payload is all read. */
static void end_frame(struct wsscrub *w, struct scrub_buf *out)
{
	w->phase = PH_HEAD;
	w->head_len = 0;
	if (w->opcode >= 0x8) {
		struct scrub_buf sb = { 0 };
		size_t n;

		(void)scrub_oneshot(w->set, w->ctl, w->ctl_len, &sb, w->counts);
		n = sb.len < CONTROL_MAX ? sb.len : CONTROL_MAX;
		put_frame(out, true, w->opcode, sb.data, n);
		if (sb.data)
			explicit_bzero(sb.data, sb.cap);
		scrub_buf_free(&sb);
		explicit_bzero(w->ctl, sizeof(w->ctl));
		return;
	}
	if (w->fin) {
		scrub_finish(w->stream, &w->tmp);
		emit_data(w, true, out);
		w->in_message = false;
	} else {
		emit_data(w, false, out);
	}
}

/* How long the header whose first bytes are in w->head is. */
static size_t head_need(const struct wsscrub *w)
{
	size_t n = 2;

	if (w->head_len < 2)
		return 2;
	if ((w->head[1] & 0x7f) == 126)
		n += 2;
	else if ((w->head[1] & 0x7f) == 127)
		n += 8;
	if (w->head[1] & 0x80)
		n += 4;
	return n;
}

int wsscrub_feed(struct wsscrub *w, const void *in, size_t len, struct scrub_buf *out)
{
	const uint8_t *p = in;

	if (w->phase == PH_FAILED)
		return -1;
	while (len > 0 || (w->phase == PH_PAYLOAD && w->left == 0)) {
		if (w->phase == PH_HEAD) {
			size_t need = head_need(w);

			while (len > 0 && w->head_len < need) {
				w->head[w->head_len++] = *p++;
				len--;
				need = head_need(w);
			}
			if (w->head_len < need)
				break;
			if (start_frame(w) < 0)
				return -1;
			continue;
		}
		/* the payload */
		{
			size_t take = len < w->left ? len : (size_t)w->left, i;
			char chunk[4096];

			if (take > sizeof(chunk))
				take = sizeof(chunk);
			for (i = 0; i < take; i++)
				chunk[i] = (char)(w->masked ? p[i] ^ w->mask[(w->done + i) & 3]
							    : p[i]);
			if (w->opcode >= 0x8) {
				memcpy(w->ctl + w->ctl_len, chunk, take);
				w->ctl_len += take;
			} else if (take) {
				scrub_feed(w->stream, chunk, take, &w->tmp);
			}
			explicit_bzero(chunk, take);
			p += take;
			len -= take;
			w->left -= take;
			w->done += take;
			if (w->left == 0)
				end_frame(w, out);
			else if (len == 0 && w->opcode < 0x8 && w->len > WS_HOLD_MAX)
				emit_data(w, false, out);
		}
	}
	return 0;
}
