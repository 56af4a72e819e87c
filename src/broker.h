/* SPDX-License-Identifier: Apache-2.0
 * broker.h - brokered secrets (SPEC §3.4): real values held by the
 * supervisor, random per-session placeholders handed to the agent.
 */
#ifndef AIRLOCK_BROKER_H
#define AIRLOCK_BROKER_H

#include <stddef.h>

#include "policy.h"

#define BROKER_PLACEHOLDER_MAX 128

struct broker_secret {
	const struct policy_secret *def; /* borrowed from the policy */
	char placeholder[BROKER_PLACEHOLDER_MAX];
	char *value;                     /* wiped and freed by broker_free */
	size_t value_len;
};

struct broker {
	struct broker_secret *secrets;
	size_t count;
};

/* Reads every secret of @p (from the supervisor's environment or a file)
 * and makes its placeholder. Returns 0, or -1 with one line in @err naming
 * the secret that could not be read (its value is never printed). */
int broker_load(struct broker *b, const struct policy *p, char *err, size_t errlen);

/* Wipes every value. */
void broker_free(struct broker *b);

#endif /* AIRLOCK_BROKER_H */
