/* SPDX-License-Identifier: Apache-2.0
 * test_egress.c - the egress decision: rules, then every address.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "egress.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	if (!p)
		tap_diag("policy: %s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

static struct addr A(const char *s)
{
	struct addr a;

	ASSERT(addr_parse(s, &a));
	return a;
}

struct rule_case {
	const char *host;
	uint16_t port;
	bool allow;
	const char *rule_id;
};

static const struct rule_case rule_cases[] = {
	{ "api.example.com", 443, true, "egress.allow[0]" },
	{ "api.example.com", 80, true, "egress.allow[0]" },
	{ "api.example.com", 8080, false, "egress.default" },
	{ "x.cdn.example.com", 443, true, "egress.allow[1]" },
	{ "a.b.cdn.example.com", 443, true, "egress.allow[1]" },
	{ "cdn.example.com", 443, false, "egress.default" },
	{ "evilcdn.example.com", 443, false, "egress.default" },
	{ "bad.cdn.example.com", 443, false, "egress.deny[0]" },
	{ "bad.cdn.example.com", 9999, false, "egress.deny[0]" },
	{ "registry.example.org", 8443, true, "egress.allow[2]" },
	{ "registry.example.org", 443, false, "egress.default" },
	{ "api.example.com.evil.com", 443, false, "egress.default" },
	{ "203.0.113.7", 443, true, "egress.allow[3]" },
	{ "203.0.113.8", 443, false, "egress.default" },
};

static void test_rules(void)
{
	struct policy *p = load("{\"version\":1,\"egress\":{"
				"\"allow\":[\"api.example.com\",\"*.cdn.example.com\","
				"\"registry.example.org:8443\",\"203.0.113.7\"],"
				"\"deny\":[\"bad.cdn.example.com\"]}}");
	size_t i;

	for (i = 0; i < ARRAY_SIZE(rule_cases); i++) {
		const struct rule_case *rc = &rule_cases[i];
		struct host_target t;
		struct verdict v;
		bool allow;

		ASSERT(hostname_normalise(rc->host, strlen(rc->host), &t) == HOSTNAME_OK);
		egress_decide_rules(p, &t, rc->port, &v);
		allow = v.action == VERDICT_ALLOW;
		tap_ok(allow == rc->allow && strcmp(v.rule, rc->rule_id) == 0,
		       "%s:%u -> %s %s (got %s %s)", rc->host, rc->port,
		       rc->allow ? "allow" : "deny", rc->rule_id, allow ? "allow" : "deny",
		       v.rule);
		tap_ok((v.host_rule != NULL) == (strcmp(rc->rule_id, "egress.default") != 0),
		       "%s:%u: the deciding rule is named iff one decided", rc->host, rc->port);
		tap_ok(allow || (v.status == 403 && !v.always),
		       "%s:%u: a rule's deny is a 403 that shadow mode may let pass",
		       rc->host, rc->port);
	}
	policy_free(p);
}

static void test_addrs(void)
{
	struct policy *p = load("{\"version\":1,\"egress\":{\"allow_ranges\":[\"198.18.0.0/15\","
				"\"10.0.0.0/8\"],\"deny\":[\"10.1.0.0/16\",\"198.18.0.13:443\","
				"\"[2001:db8::/32]\"]}}");
	struct addr good[] = { A("8.8.8.8"), A("2606:4700::1"), A("198.18.0.10") };
	struct addr mixed[] = { A("8.8.8.8"), A("172.16.0.1") };
	struct addr meta[] = { A("169.254.169.254") };
	struct addr mapped[] = { A("::ffff:127.0.0.1") };
	struct addr v6only[] = { A("fd00::1") };
	struct addr ranged[] = { A("10.2.0.1") };
	struct addr denied[] = { A("198.18.0.10"), A("10.1.2.3") };
	struct addr denied_mapped[] = { A("::ffff:10.1.2.3") };
	struct addr port_rule[] = { A("198.18.0.13") };
	struct verdict v;
	size_t bad = 99;

	egress_decide_addrs(p, good, ARRAY_SIZE(good), 443, &v, &bad);
	tap_ok(v.action == VERDICT_ALLOW, "global answers and an allow_ranges answer are allowed");
	egress_decide_addrs(p, mixed, ARRAY_SIZE(mixed), 443, &v, &bad);
	tap_ok(v.action == VERDICT_DENY && bad == 1 &&
		       strcmp(v.rule, "egress.special-address") == 0,
	       "one private answer among public ones denies the name (index %zu)", bad);
	tap_ok(v.always && v.status == 403,
	       "a special-purpose address is denied in shadow mode too (always)");
	egress_decide_addrs(p, meta, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_DENY && v.always, "the metadata address is denied, always");
	egress_decide_addrs(p, mapped, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_DENY, "IPv4-mapped loopback is denied");
	egress_decide_addrs(p, v6only, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_DENY, "a ULA-only answer is denied");
	egress_decide_addrs(p, ranged, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_ALLOW, "10.2.0.1 is in allow_ranges and no deny rule lists it");
	bad = 99;
	egress_decide_addrs(p, denied, ARRAY_SIZE(denied), 80, &v, &bad);
	tap_ok(v.action == VERDICT_DENY && bad == 1 && strcmp(v.rule, "egress.deny[0]") == 0 &&
		       v.host_rule == &p->deny[0],
	       "an answer in a deny CIDR denies the name though allow_ranges covers it (%s)",
	       v.rule);
	tap_ok(!v.always, "a deny rule on an answer is a policy decision (shadow may pass it)");
	egress_decide_addrs(p, denied_mapped, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_DENY && strcmp(v.rule, "egress.deny[0]") == 0,
	       "the same address IPv4-mapped: denied by the same rule (%s)", v.rule);
	egress_decide_addrs(p, port_rule, 1, 443, &v, &bad);
	tap_ok(v.action == VERDICT_DENY && strcmp(v.rule, "egress.deny[1]") == 0,
	       "an address deny rule with a port applies on that port (%s)", v.rule);
	egress_decide_addrs(p, port_rule, 1, 80, &v, &bad);
	tap_ok(v.action == VERDICT_ALLOW, "and not on another");
	policy_free(p);
}

static struct egress_self self_at(const char *listen, uint16_t port,
				  const struct addr *local, size_t n)
{
	struct egress_self s;
	struct addr unspec;

	memset(&s, 0, sizeof(s));
	s.listen = A(listen);
	s.port = port;
	memset(&unspec, 0, sizeof(unspec));
	unspec.family = s.listen.family;
	s.wildcard = addr_equal(&s.listen, &unspec);
	s.local = local;
	s.nlocal = n;
	return s;
}

static void test_self_and_pick(void)
{
	struct addr ifs[] = { A("198.18.0.20"), A("2001:db8::20") };
	struct egress_self self = self_at("127.0.0.1", 3128, NULL, 0);
	struct egress_self any4 = self_at("0.0.0.0", 3128, ifs, ARRAY_SIZE(ifs));
	struct egress_self any6 = self_at("::", 3128, ifs, ARRAY_SIZE(ifs));
	struct egress_self bound = self_at("198.18.0.20", 3128, NULL, 0);
	struct addr lo = A("127.0.0.1"), lo2 = A("127.0.0.2"), pub = A("8.8.8.8");
	struct addr m = A("::ffff:127.0.0.1"), v6lo = A("::1");
	struct addr zero4 = A("0.0.0.0"), zero6 = A("::");
	struct addr ifa = A("198.18.0.20"), ifa_m = A("::ffff:198.18.0.20");
	struct addr ifb = A("2001:db8::20"), other = A("198.18.0.21");
	struct addr list[] = { A("2606:4700::1"), A("8.8.8.8"), A("1.1.1.1") };
	struct addr only6[] = { A("2606:4700::1"), A("2606:4700::2") };

	tap_ok(egress_is_self(&self, &lo, 3128), "127.0.0.1:3128 is the proxy");
	tap_ok(!egress_is_self(&self, &lo, 3129), "another port is not");
	tap_ok(!egress_is_self(&self, &lo2, 3128), "another address is not");
	tap_ok(egress_is_self(&self, &m, 3128), "::ffff:127.0.0.1:3128 is the proxy");
	tap_ok(egress_is_self(&any4, &lo2, 3128), "a wildcard listener: any loopback");
	tap_ok(egress_is_self(&any6, &v6lo, 3128), "a wildcard IPv6 listener: ::1");
	tap_ok(!egress_is_self(&any4, &pub, 3128), "a wildcard listener: not a public address");
	tap_ok(egress_is_self(&self, &zero4, 3128), "0.0.0.0:3128 reaches a 127.0.0.1 listener: self");
	tap_ok(egress_is_self(&self, &zero6, 3128), ":: on the listening port: self");
	tap_ok(!egress_is_self(&self, &zero4, 80), "0.0.0.0 on another port is not self");
	tap_ok(egress_is_self(&any4, &ifa, 3128), "a wildcard listener: an interface's address");
	tap_ok(egress_is_self(&any4, &ifa_m, 3128), "... also IPv4-mapped");
	tap_ok(egress_is_self(&any6, &ifb, 3128), "a wildcard listener: an interface's IPv6 address");
	tap_ok(!egress_is_self(&any4, &other, 3128), "not an address no interface has");
	tap_ok(!egress_is_self(&any4, &ifa, 80), "an interface's address on another port is not");
	tap_ok(!egress_is_self(&self, &ifa, 3128),
	       "a listener bound to 127.0.0.1 is not reached at an interface's address");
	tap_ok(egress_is_self(&bound, &ifa, 3128) && !egress_is_self(&bound, &lo, 3128),
	       "a listener bound to 198.18.0.20: that address, not loopback");
	tap_ok(addr_equal(egress_pick(list, 3), &list[1]), "the first IPv4 answer is picked");
	tap_ok(addr_equal(egress_pick(only6, 2), &only6[0]), "else the first IPv6 answer");
}

int main(void)
{
	test_rules();
	test_addrs();
	test_self_and_pick();
	return tap_done();
}
