/* SPDX-License-Identifier: Apache-2.0
 * capture.h - credentials captured from answers (`capture` rules of a
 * secret, docs/SECRETS.md "Captured values"): which answers a rule reads,
 * the values at its JSON pointers and headers, their expiry, and the
 * placeholder that stands for each.
 *
 * Pure but for the CSPRNG: the secret filter (secretfilter.c) calls these
 * on an intercepted exchange, registers what they return and tells the
 * other workers (worker.c, MSG_CAPTURE).
 */
#ifndef AIRLOCK_CAPTURE_H
#define AIRLOCK_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hostname.h"
#include "policy.h"

/* The largest answer body read for a capture: a bigger one is cut. */
#define CAPTURE_BODY_MAX ((size_t)1024 * 1024)
/* Values one answer may carry. */
#define CAPTURE_VALUES_MAX 8

/* Does @path (without its query) match @pattern: the same segments, a
 * "*" segment matching any one non-empty segment? */
bool capture_path_match(const char *pattern, const char *path);

/* The first capture rule of @p that reads the answer to @method @path on
 * @host:@port (the connection's), with its secret and index; NULL when
 * none. */
const struct policy_capture *capture_match(const struct policy *p,
					   const struct host_target *host, uint16_t port,
					   const char *method, const char *path,
					   const struct policy_secret **secret, size_t *index);

struct capture_value {
	char *value;       /* wiped by capture_values_free */
	size_t len;
	const char *where; /* the rule's pointer or header name (borrowed) */
};

/* The values @rule reads in the JSON @body (string members at its
 * pointers; a missing pointer reads nothing) and the expiry at its
 * `expires` pointer (an RFC 3339 string, or a number of seconds from
 * @now), 0 when none. Returns how many values (0..CAPTURE_VALUES_MAX),
 * or -1 with a reason in @err when the body is not JSON, a pointer
 * names something other than a string, or the expiry cannot be read.
 * The JSON is parsed with a wiping allocator. */
int capture_json(const struct policy_capture *rule, const char *body, size_t len,
		 time_t now, struct capture_value *out, time_t *expires, char *err,
		 size_t errlen);

void capture_values_free(struct capture_value *v, size_t n);

/* A placeholder for a captured @value: its leading letters up to a first
 * '_' or '-' kept (and that separator), the rest random characters of the
 * value's alphabet class, as long as the value (and never fewer than
 * BROKER_RANDOM_MIN random ones). NULL when it cannot be made. */
char *capture_placeholder(const char *value, size_t len, size_t *phlen);

#endif /* AIRLOCK_CAPTURE_H */
