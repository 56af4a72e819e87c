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
 *    Then every answer is held against the CIDR and address rules of
 *    egress.deny (on the request's port): a name may not lead to an
 *    address the policy denies outright.
 *
 * The special-address check holds in shadow mode too (verdict.always):
 * letting a request reach the host's loopback or a metadata service
 * teaches nothing a policy could use. The proxy then connects to one
 * address it checked (egress_pick), and never resolves again: a
 * rebinding DNS server gains nothing from a TTL of zero.
 *
 * The proxy itself (egress_is_self) is its listening address on its
 * port, and when it listens on a wildcard, every address of the host's
 * interfaces there: a proxy that tunnels into itself is a loop that
 * multiplies one client's connections and hides the real target.
 */
#include "egress.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "gitrules.h"

void egress_decide_rules(const struct policy *p, const struct host_target *t,
			 uint16_t port, struct verdict *v)
{
	int idx = -1;
	enum host_verdict hv = host_decide(p->allow, p->nallow, p->deny, p->ndeny,
					   p->ports, p->nports, t, port, &idx);
	struct gitrules_verdict gv;

	/* Port 22 is SSH: git.ssh decides it instead of egress.allow (a
	 * deny rule still wins). */
	if (hv != HOST_VERDICT_DENY_RULE && gitrules_decide_ssh(p, t, port, &gv)) {
		if (gv.decision == GITRULES_ALLOW) {
			verdict_set(v, VERDICT_ALLOW, 0, "git.ssh", gv.reason);
		} else {
			verdict_set(v, VERDICT_DENY, 403, "git.ssh", gv.reason);
			v->type = "git.block";
			v->point = RECEIPT_POINT_GIT;
		}
		return;
	}
	/* git.hosts and git.api_hosts need no egress.allow rule on 443. */
	if (hv == HOST_VERDICT_DENY_DEFAULT && port == 443 && !t->is_addr &&
	    gitrules_host_kind(p, t->name)) {
		verdict_set(v, VERDICT_ALLOW, 0,
			    gitrules_host_kind(p, t->name) & GITRULES_HOST_SCM ? "git.hosts"
									     : "git.api_hosts",
			    "a git host of the policy");
		return;
	}
	switch (hv) {
	case HOST_VERDICT_ALLOW:
		verdict_set(v, VERDICT_ALLOW, 0, NULL, "allowed by egress.allow");
		v->host_rule = &p->allow[idx];
		snprintf(v->rule, sizeof(v->rule), "egress.allow[%d]", idx);
		break;
	case HOST_VERDICT_DENY_RULE:
		verdict_set(v, VERDICT_DENY, 403, NULL, "denied by egress.deny");
		v->host_rule = &p->deny[idx];
		snprintf(v->rule, sizeof(v->rule), "egress.deny[%d]", idx);
		break;
	case HOST_VERDICT_DENY_DEFAULT:
	default:
		if (t->is_addr &&
		    !addr_is_allowed(&t->addr, p->allow_ranges, p->nallow_ranges))
			/* An allow rule alone would not do: say so now. */
			verdict_setf(v, VERDICT_DENY, 403, "egress.default",
				     "no egress.allow rule matches this host and port; "
				     "it is also a special-purpose address (%s), which "
				     "needs its range in egress.allow_ranges too",
				     addr_class_to_string(addr_classify(&t->addr)));
		else
			verdict_set(v, VERDICT_DENY, 403, "egress.default",
				    "no egress.allow rule matches this host and port");
		break;
	}
}

void egress_decide_addrs(const struct policy *p, const struct addr *addrs,
			 size_t n, uint16_t port, struct verdict *v,
			 size_t *bad)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		if (!addr_is_allowed(&addrs[i], p->allow_ranges, p->nallow_ranges)) {
			char text[ADDR_STRLEN];

			*bad = i;
			addr_format(&addrs[i], text, sizeof(text));
			verdict_setf(v, VERDICT_DENY, 403, "egress.special-address",
				     "resolves to %s, a special-purpose address (%s); "
				     "add its range to egress.allow_ranges",
				     text, addr_class_to_string(addr_classify(&addrs[i])));
			v->always = true;
			return;
		}
	}
	for (i = 0; i < n; i++) {
		struct host_target t;

		memset(&t, 0, sizeof(t));
		t.is_addr = true;
		t.addr = addrs[i];
		for (j = 0; j < p->ndeny; j++) {
			if (p->deny[j].kind != HOST_RULE_CIDR ||
			    !host_rule_matches(&p->deny[j], &t, port, p->ports,
					       p->nports, true))
				continue;
			*bad = i;
			verdict_set(v, VERDICT_DENY, 403, NULL,
				    "resolves to an address egress.deny lists");
			v->host_rule = &p->deny[j];
			snprintf(v->rule, sizeof(v->rule), "egress.deny[%zu]", j);
			return;
		}
	}
	verdict_set(v, VERDICT_ALLOW, 0, "egress.addresses",
		    "every address is globally reachable or in allow_ranges");
}

static bool is_local(const struct addr *a)
{
	enum addr_class c = addr_classify(a);

	return c == ADDR_CLASS_LOOPBACK || c == ADDR_CLASS_THIS_NETWORK ||
	       c == ADDR_CLASS_UNSPECIFIED;
}

static bool same_host(const struct addr *x, const struct addr *a)
{
	struct addr v4;

	if (addr_equal(x, a))
		return true;
	/* ::ffff:127.0.0.1 is 127.0.0.1. */
	return addr_embedded_ipv4(a, &v4) && addr_equal(x, &v4);
}

bool egress_is_self(const struct egress_self *s, const struct addr *a,
		    uint16_t port)
{
	size_t i;

	if (port != s->port)
		return false;
	/* 0.0.0.0 and :: reach the local listener on Linux, whatever
	 * address it is bound to. */
	if (addr_classify(a) == ADDR_CLASS_UNSPECIFIED ||
	    (a->family == AF_INET && a->bytes[0] == 0 && a->bytes[1] == 0 &&
	     a->bytes[2] == 0 && a->bytes[3] == 0))
		return true;
	if (!s->wildcard)
		return same_host(&s->listen, a);
	if (is_local(a))
		return true;
	for (i = 0; i < s->nlocal; i++)
		if (same_host(&s->local[i], a))
			return true;
	return false;
}

const struct addr *egress_pick(const struct addr *addrs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (addrs[i].family == AF_INET)
			return &addrs[i];
	return &addrs[0];
}
