/* SPDX-License-Identifier: Apache-2.0
 * h2limits.h - the limits of one h2 connection, each side: the agent's
 * (h2.c) and an h2 upstream's (h2up.c). A header of constants alone, so
 * that the upstream endpoint (h2up.c) stays below the proxy core
 * (docs/ARCHITECTURE.md, "Layering").
 */
#ifndef AIRLOCK_H2LIMITS_H
#define AIRLOCK_H2LIMITS_H

#include <stdint.h>

/* Limits of one h2 connection (each side). */
#define H2_MAX_STREAMS 100             /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define H2_STREAM_WINDOW 65535         /* per stream, each direction */
#define H2_CONN_WINDOW (1024 * 1024)   /* per connection, each direction */
#define H2_MAX_HEADER_LIST 65536       /* decoded bytes of one header block */
#define H2_RESET_BURST 200             /* client resets before the rate */
#define H2_RESET_RATE 33               /* ... resets a second from then on */
#define H2_MAX_OUTBOUND_ACK 100        /* SETTINGS/PING acks queued */
#define H2_MAX_SETTINGS 32             /* entries of one SETTINGS frame */
/* a refused stream's body read and dropped after its answer, before a
 * reset */
#define H2_DRAIN_MAX ((uint64_t)256 * 1024)
#define H2_MAX_CONTINUATIONS 8         /* CONTINUATION frames of a block */
#define H2_GRPC_MAX_MESSAGE (4 * 1024 * 1024) /* a gRPC message held whole
						 to be scrubbed (gRPC's
						 default bound) */

#endif
