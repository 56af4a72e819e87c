/* SPDX-License-Identifier: Apache-2.0
 * filter_table.c - the filters, in the order the exchange runs them
 * (filter.h: filter_table). The one module that names every filter, so
 * that filter.c and the filters depend on filter.h only
 * (docs/ARCHITECTURE.md, "Layering").
 */
#include "filter.h"

#include "awsfilter.h"
#include "gitfilter.h"
#include "secretfilter.h"
#include "spendfilter.h"
#include "util.h"

const struct filter_def filter_table[] = {
	/* aws: requests signed with placeholder credentials, verified and
	 * re-signed (SigV4) before the secrets filter sees them */
	{ "aws", &awsfilter_ops },
	/* secrets: placeholders in requests, and every value the proxy
	 * injects (the git token too) scrubbed from every answer */
	{ "secrets", &secretfilter_ops },
	/* git: every request to a git host, with the session's credential */
	{ "git", &gitfilter_ops },
	/* spend: metered calls to the providers (only when spend is metered) */
	{ "spend", &spendfilter_ops },
};
const size_t filter_table_len = ARRAY_SIZE(filter_table);

bool filter_table_needs_cleartext(const struct policy *p, const struct host_target *t,
				  uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < filter_table_len; i++)
		if (filter_table[i].ops->needs_cleartext &&
		    filter_table[i].ops->needs_cleartext(p, t, port, any_port))
			return true;
	return false;
}
