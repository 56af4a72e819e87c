/* SPDX-License-Identifier: Apache-2.0
 * egress.h - the egress decision (SPEC §3.2, §3.3): rules first, then the
 * addresses a target resolved to. Pure functions, no I/O.
 */
#ifndef AIRLOCK_EGRESS_H
#define AIRLOCK_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "hostname.h"
#include "policy.h"

/* The rule ids of docs/PROXY.md ("egress.deny[2]", "egress.default", ...). */
#define EGRESS_RULE_ID_MAX 48

struct egress_verdict {
	bool allow;
	char rule_id[EGRESS_RULE_ID_MAX];
	const struct host_rule *rule; /* the deciding rule, or NULL */
	const char *reason;           /* static, one line */
};

/* Decides @t:@port against egress.deny/allow (deny first, fail closed). */
void egress_decide_rules(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct egress_verdict *v);

/* Checks every address (SPEC §3.3): denied if any is special-purpose and
 * not exempted by egress.allow_ranges. On denial *bad receives the index
 * of the first such address. */
void egress_decide_addrs(const struct policy *p, const struct addr *addrs,
			 size_t n, struct egress_verdict *v, size_t *bad);

/* Is @a:@port the proxy's own listening address @self? A wildcard @self
 * matches every loopback and unspecified address on its port. */
bool egress_is_self(const struct addr *self, uint16_t self_port,
		    const struct addr *a, uint16_t port);

/* The address the proxy connects to: the first IPv4 answer, else the
 * first IPv6 answer. @n > 0. */
const struct addr *egress_pick(const struct addr *addrs, size_t n);

#endif /* AIRLOCK_EGRESS_H */
