/* SPDX-License-Identifier: Apache-2.0
 * verdict.c - a verdict as a value: its setters and its action's name.
 *
 * What a verdict means for a connection (recorded, answered, closed) is
 * the proxy's business: answer.c.
 */
#include "verdict.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static const char *const action_names[] = {
	[VERDICT_ALLOW] = "allow",
	[VERDICT_DENY] = "deny",
	[VERDICT_FAIL] = "fail",
	[VERDICT_CLOSE] = "close",
};
static_assert(ARRAY_SIZE(action_names) == VERDICT_ACTION_COUNT,
	      "action_names out of sync with enum verdict_action");

const char *verdict_action_to_string(enum verdict_action a)
{
	return (unsigned int)a < VERDICT_ACTION_COUNT ? action_names[a] : "unknown";
}

void verdict_set(struct verdict *v, enum verdict_action action, int status,
		 const char *rule, const char *reason)
{
	memset(v, 0, sizeof(*v));
	v->point = RECEIPT_POINT_EGRESS_PROXY;
	v->action = action;
	v->status = status;
	if (rule)
		(void)util_strlcpy(v->rule, rule, sizeof(v->rule));
	if (reason)
		snprintf(v->reason, sizeof(v->reason), "%s", reason);
}

void verdict_setf(struct verdict *v, enum verdict_action action, int status,
		  const char *rule, const char *fmt, ...)
{
	va_list ap;

	verdict_set(v, action, status, rule, NULL);
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

void verdict_clear(struct verdict *v)
{
	json_decref(v->extra);
	v->extra = NULL;
}
