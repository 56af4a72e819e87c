/* SPDX-License-Identifier: Apache-2.0
 * verdict.h - what a decider concluded, as a value.
 *
 * Deciders (egress.c, the exchange's own checks, filters) are pure: they
 * fill a struct verdict and return. verdict_apply() is the one place that
 * records it, applies shadow mode, and answers or closes, so that no
 * caller decides a second time what a deny means.
 */
#ifndef AIRLOCK_VERDICT_H
#define AIRLOCK_VERDICT_H

#include <jansson.h>
#include <stdbool.h>

#include "hostname.h"
#include "receipt.h"

#define VERDICT_RULE_MAX 48
#define VERDICT_REASON_MAX 256

/* Keep verdict_action_to_string() in sync (static_assert on the table). */
enum verdict_action {
	VERDICT_ALLOW = 0, /* go on; nothing is recorded here (the allow
			      receipt is written once the upstream is
			      reached) */
	VERDICT_DENY,      /* a policy decision: egress.block (or @type),
			      would_block in shadow mode unless @always */
	VERDICT_FAIL,      /* nothing can be forwarded (malformed, DNS,
			      upstream, timeout): proxy.error (or @type),
			      decision block in every mode */
	VERDICT_CLOSE,     /* close without a receipt (the client is gone,
			      an idle connection timed out) */
	VERDICT_ACTION_COUNT
};

const char *verdict_action_to_string(enum verdict_action a);

struct verdict {
	enum verdict_action action;
	/* The answer when one can be written: 400, 403, 408, 413, 429 or
	 * 502; 0 means close instead (e.g. inside a tunnel after its 200,
	 * or an error in a body already being forwarded). */
	int status;
	char rule[VERDICT_RULE_MAX];          /* the receipt's rule id */
	char reason[VERDICT_REASON_MAX];      /* one line, for the receipt
						 and the answer's body */
	const char *type;                     /* receipt type; NULL: by
						 action */
	json_t *extra;                        /* subject members to add;
						 owned by the verdict */
	const struct host_rule *host_rule;    /* the deciding rule, if any */
	bool always;                          /* enforced in shadow mode too
						 (address checks, the proxy
						 itself, protocol errors) */
	enum receipt_point point;             /* who observed it: the
						 egress proxy (verdict_set's
						 default), the broker, git */
};

/* Fills @v (every field, extra NULL). @reason may be NULL. */
void verdict_set(struct verdict *v, enum verdict_action action, int status,
		 const char *rule, const char *reason);
/* The same with a printf reason. */
__attribute__((format(printf, 5, 6))) void
verdict_setf(struct verdict *v, enum verdict_action action, int status,
	     const char *rule, const char *fmt, ...);

/* Drops @v->extra (for a verdict that is not applied). */
void verdict_clear(struct verdict *v);

struct conn;

/* Applies @v to @c: records it (DENY, FAIL), turns a DENY into
 * would_block in shadow mode (unless @always) and returns true: the
 * request goes on. Otherwise answers @status with X-Airlock-Rule and
 * X-Airlock-Receipt when an answer can still be written on @c, else
 * closes @c, and returns false. ALLOW returns true and records nothing.
 * Consumes @v->extra in every case. */
bool verdict_apply(struct conn *c, struct verdict *v);

/* The recording half of verdict_apply(), for a request that is one of
 * several on @c (an HTTP/2 stream, h2.c): records @v (DENY, FAIL) with
 * its receipt's seq in @seq (-1: none), and returns true when the request
 * goes on (ALLOW, would_block in shadow mode); false: the caller refuses
 * it (with @v->status when it can still answer). Never answers or closes.
 * Consumes @v->extra. */
bool verdict_record(struct conn *c, struct verdict *v, int64_t *seq);

struct buf;
/* The plain-text body of a refusal (what, why, rule, receipt @seq),
 * appended to @text. */
void verdict_answer_text(const struct conn *c, const struct verdict *v, int64_t seq,
			 struct buf *text);

/* The allow receipt of @c's request (egress.allow with the address
 * connected to, the rule and @extra, consumed); nothing when the request
 * was already recorded as would_block. */
void verdict_record_allow(struct conn *c, json_t *extra);

#endif /* AIRLOCK_VERDICT_H */
