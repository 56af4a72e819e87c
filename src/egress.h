/* SPDX-License-Identifier: Apache-2.0
 * egress.h - the egress decision (docs/PROXY.md): rules first, then the
 * addresses a target resolved to, and whether a target is the proxy
 * itself. Pure functions, no I/O: each fills a struct verdict that the
 * proxy applies in one place (verdict.h).
 */
#ifndef AIRLOCK_EGRESS_H
#define AIRLOCK_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "hostname.h"
#include "policy.h"
#include "verdict.h"

/* The rule ids of docs/PROXY.md ("egress.deny[2]", "egress.default", ...). */
#define EGRESS_RULE_ID_MAX VERDICT_RULE_MAX

/* Decides @t:@port against egress.deny/allow (deny first, fail closed):
 * VERDICT_ALLOW with the allow rule's id and rule, or VERDICT_DENY 403.
 * @v->extra is NULL. */
void egress_decide_rules(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct verdict *v);

/* Checks every address of a target on @port: a special-purpose address
 * not exempted by egress.allow_ranges denies (rule
 * egress.special-address, enforced in shadow mode too); then an address
 * that a CIDR or address rule of egress.deny matches on @port denies
 * (egress.deny[N]). On a deny *bad receives the index of the first
 * offending address. VERDICT_ALLOW otherwise (rule egress.addresses). */
void egress_decide_addrs(const struct policy *p, const struct addr *addrs,
			 size_t n, uint16_t port, struct verdict *v,
			 size_t *bad);

/* The proxy's own listening address. When it listens on a wildcard
 * (0.0.0.0 or ::), @local lists the addresses of the host's interfaces
 * (borrowed, kept current by the caller). */
struct egress_self {
	struct addr listen;
	uint16_t port;
	bool wildcard;
	const struct addr *local;
	size_t nlocal;
};

/* Is @a:@port the proxy itself? On its port: the unspecified addresses
 * (they reach a local listener), the listening address (also written
 * IPv4-mapped), and with a wildcard listener every loopback address and
 * every address of @s->local. */
bool egress_is_self(const struct egress_self *s, const struct addr *a,
		    uint16_t port);

/* The address the proxy connects to: the first IPv4 answer, else the
 * first IPv6 answer. @n > 0. */
const struct addr *egress_pick(const struct addr *addrs, size_t n);

#endif /* AIRLOCK_EGRESS_H */
