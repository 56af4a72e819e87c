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
		struct egress_verdict v;

		ASSERT(hostname_normalise(rc->host, strlen(rc->host), &t) == HOSTNAME_OK);
		egress_decide_rules(p, &t, rc->port, &v);
		tap_ok(v.allow == rc->allow && strcmp(v.rule_id, rc->rule_id) == 0,
		       "%s:%u -> %s %s (got %s %s)", rc->host, rc->port,
		       rc->allow ? "allow" : "deny", rc->rule_id, v.allow ? "allow" : "deny",
		       v.rule_id);
		tap_ok((v.rule != NULL) == (strcmp(rc->rule_id, "egress.default") != 0),
		       "%s:%u: the deciding rule is named iff one decided", rc->host, rc->port);
	}
	policy_free(p);
}

static void test_addrs(void)
{
	struct policy *p = load("{\"version\":1,\"egress\":{\"allow_ranges\":[\"198.18.0.0/15\"]}}");
	struct addr good[] = { A("8.8.8.8"), A("2606:4700::1"), A("198.18.0.10") };
	struct addr mixed[] = { A("8.8.8.8"), A("10.0.0.1") };
	struct addr meta[] = { A("169.254.169.254") };
	struct addr mapped[] = { A("::ffff:127.0.0.1") };
	struct addr v6only[] = { A("fd00::1") };
	struct egress_verdict v;
	size_t bad = 99;

	egress_decide_addrs(p, good, ARRAY_SIZE(good), &v, &bad);
	tap_ok(v.allow, "global answers and an allow_ranges answer are allowed");
	egress_decide_addrs(p, mixed, ARRAY_SIZE(mixed), &v, &bad);
	tap_ok(!v.allow && bad == 1 && strcmp(v.rule_id, "egress.special-address") == 0,
	       "one private answer among public ones denies the name (index %zu)", bad);
	egress_decide_addrs(p, meta, 1, &v, &bad);
	tap_ok(!v.allow, "the metadata address is denied");
	egress_decide_addrs(p, mapped, 1, &v, &bad);
	tap_ok(!v.allow, "IPv4-mapped loopback is denied");
	egress_decide_addrs(p, v6only, 1, &v, &bad);
	tap_ok(!v.allow, "a ULA-only answer is denied");
	policy_free(p);
}

static void test_self_and_pick(void)
{
	struct addr self = A("127.0.0.1"), any4 = A("0.0.0.0"), any6 = A("::");
	struct addr lo = A("127.0.0.1"), lo2 = A("127.0.0.2"), pub = A("8.8.8.8");
	struct addr m = A("::ffff:127.0.0.1"), v6lo = A("::1");
	struct addr list[] = { A("2606:4700::1"), A("8.8.8.8"), A("1.1.1.1") };
	struct addr only6[] = { A("2606:4700::1"), A("2606:4700::2") };

	tap_ok(egress_is_self(&self, 3128, &lo, 3128), "127.0.0.1:3128 is the proxy");
	tap_ok(!egress_is_self(&self, 3128, &lo, 3129), "another port is not");
	tap_ok(!egress_is_self(&self, 3128, &lo2, 3128), "another address is not");
	tap_ok(egress_is_self(&self, 3128, &m, 3128), "::ffff:127.0.0.1:3128 is the proxy");
	tap_ok(egress_is_self(&any4, 3128, &lo2, 3128), "a wildcard listener: any loopback");
	tap_ok(egress_is_self(&any6, 3128, &v6lo, 3128), "a wildcard IPv6 listener: ::1");
	tap_ok(!egress_is_self(&any4, 3128, &pub, 3128), "a wildcard listener: not a public address");
	tap_ok(egress_is_self(&self, 3128, &any4, 3128), "0.0.0.0:3128 reaches a 127.0.0.1 listener: self");
	tap_ok(egress_is_self(&self, 3128, &any6, 3128), ":: on the listening port: self");
	tap_ok(!egress_is_self(&self, 3128, &any4, 80), "0.0.0.0 on another port is not self");
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
