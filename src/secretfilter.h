/* SPDX-License-Identifier: Apache-2.0
 * secretfilter.h - the secret broker as a filter of the HTTP exchange:
 * placeholders substituted or refused in requests (subst.h), real values
 * scrubbed from responses (scrub.h), and their receipts.
 */
#ifndef AIRLOCK_SECRETFILTER_H
#define AIRLOCK_SECRETFILTER_H

#include "broker.h"
#include "filter.h"
#include "policy.h"
#include "proxy.h"

/* The filter's operations: register them with the argument that
 * secretfilter_new() returns. */
extern const struct filter_ops secretfilter_ops;

/* Builds the filter's tables from @b (borrowed: values and placeholders,
 * valid until secretfilter_free()) and @p (the policy the secrets come
 * from); receipts go to @record. Never NULL. */
struct secretfilter *secretfilter_new(const struct broker *b, const struct policy *p,
				      proxy_record_fn record, void *record_arg);
void secretfilter_free(struct secretfilter *f);

/* The registry of every value the proxy injects (registry.h): the
 * filter's own, holding the brokered secrets; the git filter adds its
 * token (gitfilter_set_registry()). Valid until secretfilter_free(). */
struct registry;
struct registry *secretfilter_registry(struct secretfilter *f);

/* The scrubber's set of the values registered so far, or NULL when none
 * (tests and the fuzz target compare against it). */
struct scrub_set;
const struct scrub_set *secretfilter_scrub_set(const struct secretfilter *f);

#endif /* AIRLOCK_SECRETFILTER_H */
