/* SPDX-License-Identifier: Apache-2.0
 * h2.h - HTTP/2 inside an intercepted tunnel: the client chose h2, and
 * every client stream is one exchange through the filter table (h2.c).
 *
 * Internal to the proxy (intercept.c starts it, conn.c steps and frees
 * it, exchange.c forwards proxy_resume() and receipts' subjects to it).
 */
#ifndef AIRLOCK_H2_H
#define AIRLOCK_H2_H

#include <stdbool.h>
#include <stdint.h>

#include "filter.h"
#include "h2limits.h"
#include "verdict.h"

struct conn;

/* gRPC's length-prefixed messages (a scrubbed answer is re-framed one
 * message at a time). */
enum h2_grpc {
	H2_GRPC_MORE,        /* no whole message yet */
	H2_GRPC_MESSAGE,     /* one: *payload, *plen; it takes *used bytes */
	H2_GRPC_COMPRESSED,  /* its compressed flag is set */
	H2_GRPC_TOO_LARGE,   /* over H2_GRPC_MAX_MESSAGE */
};
enum h2_grpc h2_grpc_parse(const char *in, size_t len, const char **payload, uint32_t *plen,
			   size_t *used);
/* Appends a message frame holding @payload to @out. */
struct buf;
void h2_grpc_frame(struct buf *out, const char *payload, size_t len);

/* Both TLS handshakes are done and the client was given h2: the sessions start
 * (their prefaces and SETTINGS are queued) and @c enters CONN_H2. With
 * !@upstream_h2 the upstream speaks HTTP/1.1: one stream's exchange at a
 * time on it, in the order they passed the filters. */
void h2_begin(struct conn *c, bool upstream_h2);
void h2_step(struct conn *c, bool upstream, uint32_t events);
/* Frees the sessions and every stream (its filters hear the client left
 * or the answer was cut). Safe when @c has none. */
void h2_free(struct conn *c);
/* proxy_resume() for the stream whose filter_ref has @seq. */
int h2_resume(struct conn *c, uint32_t seq, enum filter_result r, struct verdict *v);
/* The method and path of the stream being decided (a receipt's subject),
 * or NULL. */
const char *h2_request(const struct conn *c, const char **path);

#endif /* AIRLOCK_H2_H */
