/* SPDX-License-Identifier: Apache-2.0
 * spendfilter.h - the spend filter of the proxy's exchange: meters the
 * metered requests to spend providers, reserving before anything is
 * forwarded and settling from the provider's answer (docs/SPEND.md).
 *
 * It runs in a proxy worker and talks to the ledger process (spendd.h)
 * over the worker's ledger channel; a reservation pends the exchange
 * (FILTER_PENDING) until the ledger answers. A worker:
 *
 *	sf = spendfilter_new(&cfg);            before proxy_new()
 *	reg = { &spendfilter_ops, sf };        in proxy_opts.filters
 *	px = proxy_new(...);
 *	proxy_filter_loop(px, &loop);
 *	spendfilter_start(sf, &loop);          watches the ledger channel
 *	... proxy_run(px) ...
 *	spendfilter_free(sf);                  (or exit)
 */
#ifndef AIRLOCK_SPENDFILTER_H
#define AIRLOCK_SPENDFILTER_H

#include <stddef.h>

#include "filter.h"
#include "policy.h"

struct spendfilter_config {
	const struct policy *policy;  /* borrowed: outlives the filter */
	int ledger_fd;                /* the worker's channel to the ledger
					 process; owned by the filter */
	/* Called (on the loop) after a call was refused for a cap in
	 * enforce mode when the policy's on_exhausted is "stop", once the
	 * refusal is recorded; @reason is one line. May be NULL. */
	void (*exhausted)(void *arg, const char *reason);
	void *exhausted_arg;
};

struct spendfilter;

/* Returns the filter, or NULL with a reason in @err (a price out of the
 * meter's range, which a valid policy never has). */
struct spendfilter *spendfilter_new(const struct spendfilter_config *cfg, char *err,
				    size_t errlen);

/* Watches the ledger channel in @loop (copied; the proxy's,
 * proxy_filter_loop()). Returns 0 or -errno. */
int spendfilter_start(struct spendfilter *sf, const struct filter_loop *loop);

/* The filter's operations; register with the filter as its argument. */
extern const struct filter_ops spendfilter_ops;
/* Its registration (filter.h): configured with the worker's channel to
 * the ledger; not made when nothing is metered. */
extern const struct filter_def spendfilter_def;

void spendfilter_free(struct spendfilter *sf);

#endif /* AIRLOCK_SPENDFILTER_H */
