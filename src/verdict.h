/* SPDX-License-Identifier: Apache-2.0
 * verdict.h - what a decider concluded, as a value.
 *
 * Deciders (egress.c, the exchange's own checks, filters) are pure: they
 * fill a struct verdict and return. answer_apply() (answer.c, the proxy's)
 * is the one place that records it, applies shadow mode, and answers or
 * closes, so that no caller decides a second time what a deny means.
 *
 * A value on a low floor: verdict.[ch] depend on nothing of the proxy
 * (docs/ARCHITECTURE.md, "Layering"; scripts/include-graph --check).
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

#endif /* AIRLOCK_VERDICT_H */
