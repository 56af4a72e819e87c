/* SPDX-License-Identifier: Apache-2.0
 * wsscrub.h - the scrubber of the WebSocket frames an upstream sends after
 * a 101 (RFC 6455, server to client).
 *
 * Pure: no I/O. The frames are parsed; the payloads of each message's
 * data frames go through one scrub stream (scrub.c), so that a value split
 * across frames of a message or across reads is found, and every frame is
 * written again, unmasked, with what the stream released (a frame may
 * carry fewer or more bytes than it came with: the message's bytes are
 * the same but for the replacements). A message's last frame flushes the
 * stream. Control frames (ping, pong, close) are scrubbed whole (at most
 * 125 bytes, cut to 125 after a replacement).
 *
 * What it cannot read it refuses (wsscrub_feed() returns -1, the caller
 * closes the connection): a frame with an RSV bit (a compressed frame of
 * permessage-deflate, or another extension), a reserved opcode, a control
 * frame over 125 bytes or fragmented, a continuation outside a message or
 * a new message inside one.
 */
#ifndef AIRLOCK_WSSCRUB_H
#define AIRLOCK_WSSCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "scrub.h"

struct wsscrub;

struct wsscrub *wsscrub_new(const struct scrub_set *set);
void wsscrub_free(struct wsscrub *w);

/* Appends to @out the frames to send for @len more bytes of the
 * upstream's stream. Returns 0, or -1 when a frame cannot be scrubbed
 * (wsscrub_error() says why); nothing more may be fed then. */
int wsscrub_feed(struct wsscrub *w, const void *in, size_t len, struct scrub_buf *out);
const char *wsscrub_error(const struct wsscrub *w);

/* Replacements so far, indexed like the set's needles. */
const uint64_t *wsscrub_counts(struct wsscrub *w);

#endif /* AIRLOCK_WSSCRUB_H */
