/* SPDX-License-Identifier: Apache-2.0
 * egress.c - the egress decision.
 *
 * DOC: Theory of Operation
 *
 * Two steps, both fail-closed, both pure:
 *
 * 1. Rules (before any DNS): the normalised target and port against
 *    egress.deny, then egress.allow (hostname.c decides the match). A deny
 *    beats an allow; nothing matching denies ("egress.default").
 * 2. Addresses (after DNS, or the literal itself): every answer is
 *    classified (addr.c); a single special-purpose answer outside
 *    egress.allow_ranges denies the whole name. Denying only the bad
 *    answers would let a name with one public and one internal address
 *    steer the proxy at will.
 *
 * The proxy then connects to one address it checked (egress_pick), and
 * never resolves again: a rebinding DNS server gains nothing from a TTL of
 * zero.
 */
#include "egress.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

void egress_decide_rules(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct egress_verdict *v)
{
	int idx = -1;
	enum host_verdict hv = host_decide(p->allow, p->nallow, p->deny, p->ndeny,
					   p->ports, p->nports, t, port, &idx);

	memset(v, 0, sizeof(*v));
	switch (hv) {
	case HOST_VERDICT_ALLOW:
		v->allow = true;
		v->rule = &p->allow[idx];
		snprintf(v->rule_id, sizeof(v->rule_id), "egress.allow[%d]", idx);
		v->reason = "allowed by egress.allow";
		break;
	case HOST_VERDICT_DENY_RULE:
		v->rule = &p->deny[idx];
		snprintf(v->rule_id, sizeof(v->rule_id), "egress.deny[%d]", idx);
		v->reason = "denied by egress.deny";
		break;
	case HOST_VERDICT_DENY_DEFAULT:
	default:
		snprintf(v->rule_id, sizeof(v->rule_id), "egress.default");
		v->reason = "no egress.allow rule matches this host and port";
		break;
	}
}

void egress_decide_addrs(const struct policy *p, const struct addr *addrs,
			 size_t n, struct egress_verdict *v, size_t *bad)
{
	size_t i;

	memset(v, 0, sizeof(*v));
	for (i = 0; i < n; i++) {
		if (!addr_is_allowed(&addrs[i], p->allow_ranges, p->nallow_ranges)) {
			*bad = i;
			snprintf(v->rule_id, sizeof(v->rule_id), "egress.special-address");
			v->reason = "resolves to a special-purpose address";
			return;
		}
	}
	v->allow = true;
	snprintf(v->rule_id, sizeof(v->rule_id), "egress.addresses");
	v->reason = "every address is globally reachable or in allow_ranges";
}

static bool is_local(const struct addr *a)
{
	enum addr_class c = addr_classify(a);

	return c == ADDR_CLASS_LOOPBACK || c == ADDR_CLASS_THIS_NETWORK ||
	       c == ADDR_CLASS_UNSPECIFIED;
}

bool egress_is_self(const struct addr *self, uint16_t self_port,
		    const struct addr *a, uint16_t port)
{
	struct addr unspec;
	struct addr v4;

	if (port != self_port)
		return false;
	/* 0.0.0.0 and :: reach the local listener on Linux, whatever
	 * address it is bound to. */
	if (addr_classify(a) == ADDR_CLASS_UNSPECIFIED ||
	    (a->family == AF_INET && a->bytes[0] == 0 && a->bytes[1] == 0 &&
	     a->bytes[2] == 0 && a->bytes[3] == 0))
		return true;
	memset(&unspec, 0, sizeof(unspec));
	unspec.family = self->family;
	if (addr_equal(self, &unspec))
		return is_local(a);
	if (addr_equal(self, a))
		return true;
	/* ::ffff:127.0.0.1 is 127.0.0.1. */
	return addr_embedded_ipv4(a, &v4) && addr_equal(self, &v4);
}

const struct addr *egress_pick(const struct addr *addrs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (addrs[i].family == AF_INET)
			return &addrs[i];
	return &addrs[0];
}
