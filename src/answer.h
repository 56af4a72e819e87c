/* SPDX-License-Identifier: Apache-2.0
 * answer.h - what a verdict does to a connection: recorded, answered,
 * closed (answer.c). The proxy's own: its callers are the phases of a
 * connection (tunnel, exchange, interception, upstream, h2).
 */
#ifndef AIRLOCK_ANSWER_H
#define AIRLOCK_ANSWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "verdict.h"

struct conn;

/* Applies @v to @c: records it (DENY, FAIL), turns a DENY into
 * would_block in shadow mode (unless @always) and returns true: the
 * request goes on. Otherwise answers @status with X-Airlock-Rule and
 * X-Airlock-Receipt when an answer can still be written on @c, else
 * closes @c, and returns false. ALLOW returns true and records nothing.
 * Consumes @v->extra in every case. */
bool answer_apply(struct conn *c, struct verdict *v);

/* The recording half of answer_apply(), for a request that is one of
 * several on @c (an HTTP/2 stream, h2.c): records @v (DENY, FAIL) with
 * its receipt's seq in @seq (-1: none), and returns true when the request
 * goes on (ALLOW, would_block in shadow mode); false: the caller refuses
 * it (with @v->status when it can still answer). Never answers or closes.
 * Consumes @v->extra. */
bool answer_record(struct conn *c, struct verdict *v, int64_t *seq);

struct buf;
/* The plain-text body of a refusal (what, why, rule, receipt @seq),
 * appended to @text. */
void answer_text(const struct conn *c, const struct verdict *v, int64_t seq,
		 struct buf *text);

/* The allow receipt of @c's request (egress.allow with the address
 * connected to, the rule and @extra, consumed); nothing when the request
 * was already recorded as would_block. */
void answer_record_allow(struct conn *c, json_t *extra);

#endif /* AIRLOCK_ANSWER_H */
