/* SPDX-License-Identifier: Apache-2.0
 * awsfilter.h - secrets of kind "aws" in the HTTP exchange: a request
 * signed (SigV4) with the agent's placeholder credentials is verified and
 * re-signed with the real ones (sigv4.h), or refused.
 */
#ifndef AIRLOCK_AWSFILTER_H
#define AIRLOCK_AWSFILTER_H

#include "broker.h"
#include "filter.h"
#include "policy.h"
#include "receipt.h"

/* The filter's operations: registered before the secrets filter, with the
 * argument awsfilter_new() returns. */
extern const struct filter_ops awsfilter_ops;
/* Its registration (filter.h): configured with the secrets of kind aws;
 * not made without one. */
extern const struct filter_def awsfilter_def;

/* The aws secrets of @b (borrowed: valid until awsfilter_free()), or NULL
 * when @b has none; receipts go to @record. */
struct awsfilter *awsfilter_new(const struct broker *b, const struct policy *p,
				receipt_record_fn record, void *record_arg);
void awsfilter_free(struct awsfilter *f);

#endif /* AIRLOCK_AWSFILTER_H */
