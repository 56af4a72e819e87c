/* SPDX-License-Identifier: Apache-2.0
 * filter_table.c - the filters, in the order the exchange runs them
 * (filter.h: filter_table). The one module that names every filter, so
 * that filter.c and the filters depend on filter.h only
 * (docs/ARCHITECTURE.md, "Layering"). Adding a filter: its own file (its
 * ops and its struct filter_def), and a line here, where it runs.
 */
#include <assert.h>
#include <string.h>

#include "filter.h"

#include "awsfilter.h"
#include "gitfilter.h"
#include "secretfilter.h"
#include "spendfilter.h"
#include "util.h"

const struct filter_def *const filter_table[] = {
	/* aws: requests signed with placeholder credentials, verified and
	 * re-signed (SigV4) before the secrets filter sees them */
	&awsfilter_def,
	/* secrets: placeholders in requests, and every value the proxy
	 * injects (the git token too) scrubbed from every answer; makes the
	 * registry of injected values the filters after it add to */
	&secretfilter_def,
	/* git: every request to a git host, with the session's credential */
	&gitfilter_def,
	/* spend: metered calls to the providers (only when spend is metered) */
	&spendfilter_def,
};
const size_t filter_table_len = ARRAY_SIZE(filter_table);
static_assert(ARRAY_SIZE(filter_table) <= FILTER_MAX, "a proxy takes every filter");

const struct filter_def *filter_table_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < filter_table_len; i++)
		if (strlen(filter_table[i]->name) == len &&
		    memcmp(filter_table[i]->name, name, len) == 0)
			return filter_table[i];
	return NULL;
}

bool filter_table_needs_cleartext(const struct policy *p, const struct host_target *t,
				  uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < filter_table_len; i++)
		if (filter_table[i]->ops->needs_cleartext &&
		    filter_table[i]->ops->needs_cleartext(p, t, port, any_port))
			return true;
	return false;
}
