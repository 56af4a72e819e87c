/* SPDX-License-Identifier: Apache-2.0
 * fuzz_hostname.c - libFuzzer target for hostname.c and the parsers of
 * addr.c it relies on.
 *
 * Input layout: the whole input is tried as a target host, as a CONNECT
 * authority and as an IPv4 notation (cross-checked against glibc). It is
 * then split at the first '\n' into RULE and TARGET: RULE goes through
 * host_rule_parse() (as a NUL-terminated copy) and, if valid, is matched
 * against TARGET on a few ports (0, 22, 80, 443, 8443 and the rule's own)
 * with egress.ports = {80, 443}. Without a '\n' the whole input is both.
 *
 * Every invariant is checked with abort(), so libFuzzer reports it:
 *  - a normalised name is 1..253 bytes of [a-z0-9-_.] without empty
 *    labels, and normalising it again gives the same name;
 *  - an address target's name is its canonical text and re-parses to the
 *    same address;
 *  - an authority re-assembled from its parts parses to the same parts;
 *  - addr_parse_ipv4_any() accepts exactly what inet_aton() accepts, bar
 *    inet_aton's trailing-whitespace tolerance, and addr_parse() accepts
 *    exactly the IPv4 that inet_pton() accepts;
 *  - host_rule_format() output re-parses to an equal rule and formats to
 *    the same text;
 *  - a rule matches what it names, allow matches imply deny matches, name
 *    rules never match addresses (nor CIDR rules names), matches respect
 *    label boundaries, and host_decide() agrees with host_rule_matches().
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "hostname.h"
#include "fuzz.h"

static bool rules_equal(const struct host_rule *a, const struct host_rule *b)
{
	if (a->kind != b->kind || a->port != b->port ||
	    strcmp(a->name, b->name) != 0)
		return false;
	if (a->kind != HOST_RULE_CIDR)
		return true;
	return a->cidr.prefix == b->cidr.prefix &&
	       addr_equal(&a->cidr.base, &b->cidr.base);
}

static void check_target(const struct host_target *t)
{
	struct host_target again;
	size_t n = strlen(t->name), i;

	CHECK(n > 0 && n <= HOSTNAME_MAX);
	if (t->is_addr) {
		char canon[ADDR_STRLEN], text[ADDR_STRLEN + 2];

		addr_format(&t->addr, canon, sizeof(canon));
		CHECK(strcmp(canon, t->name) == 0);
		if (t->addr.family == AF_INET6)
			snprintf(text, sizeof(text), "[%s]", t->name);
		else
			snprintf(text, sizeof(text), "%s", t->name);
		CHECK(hostname_normalise(text, strlen(text), &again) ==
		      HOSTNAME_OK);
		CHECK(again.is_addr && addr_equal(&again.addr, &t->addr));
		(void)addr_classify(&t->addr);
		return;
	}
	for (i = 0; i < n; i++) {
		char c = t->name[i];

		CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.');
	}
	CHECK(t->name[0] != '.' && t->name[n - 1] != '.');
	CHECK(!strstr(t->name, ".."));
	CHECK(hostname_normalise(t->name, n, &again) == HOSTNAME_OK);
	CHECK(!again.is_addr && strcmp(again.name, t->name) == 0);
}

static void check_normalise(const char *in, size_t len)
{
	struct host_target t;
	enum hostname_error e = hostname_normalise(in, len, &t);

	CHECK((unsigned int)e < HOSTNAME_ERROR_COUNT);
	CHECK(hostname_error_to_string(e) != NULL);
	if (e != HOSTNAME_OK) {
		CHECK(!t.is_addr && t.name[0] == '\0');
		return;
	}
	check_target(&t);
}

static void check_authority(const char *in, size_t len)
{
	struct host_target t, again;
	char text[HOSTNAME_MAX + 16];
	uint16_t port, port2;

	if (hostname_parse_authority(in, len, &t, &port) != HOSTNAME_OK) {
		CHECK(port == 0 && t.name[0] == '\0');
		return;
	}
	CHECK(port >= 1);
	check_target(&t);
	if (t.is_addr && t.addr.family == AF_INET6)
		snprintf(text, sizeof(text), "[%s]:%u", t.name, port);
	else
		snprintf(text, sizeof(text), "%s:%u", t.name, port);
	CHECK(hostname_parse_authority(text, strlen(text), &again, &port2) ==
	      HOSTNAME_OK);
	CHECK(port2 == port && again.is_addr == t.is_addr &&
	      strcmp(again.name, t.name) == 0);
}

static bool has_space(const char *s)
{
	for (; *s; s++) {
		if (*s == ' ' || (*s >= '\t' && *s <= '\r'))
			return true;
	}
	return false;
}

/* @s is NUL-terminated. */
static void check_addr_parsers(const char *s)
{
	struct in_addr ia;
	struct addr a, b;
	bool overflow = false;
	bool ours = addr_parse_ipv4_any(s, &a, &overflow);
	bool glibc = inet_aton(s, &ia) == 1;
	struct addr_cidr c;

	if (ours) {
		CHECK(glibc && memcmp(&ia, a.bytes, 4) == 0 && !overflow);
		(void)addr_classify(&a);
	}
	if (glibc && !ours)
		CHECK(has_space(s));
	if (overflow)
		CHECK(!glibc);
	/* The strict parser is exactly glibc's inet_pton for IPv4. */
	if (!strchr(s, ':'))
		CHECK(addr_parse(s, &a) == (inet_pton(AF_INET, s, &ia) == 1));
	if (addr_parse(s, &a)) {
		char text[ADDR_STRLEN];

		addr_format(&a, text, sizeof(text));
		CHECK(addr_parse(text, &b) && addr_equal(&a, &b));
		if (a.family == AF_INET)
			CHECK(inet_pton(AF_INET, s, &ia) == 1 &&
			      memcmp(&ia, a.bytes, 4) == 0);
		(void)addr_classify(&a);
		(void)addr_embedded_ipv4(&a, &b);
	}
	if (addr_parse_cidr(s, &c)) {
		char text[ADDR_STRLEN + 4];
		struct addr_cidr c2;

		addr_cidr_format(&c, text, sizeof(text));
		CHECK(addr_parse_cidr(text, &c2) && c2.prefix == c.prefix &&
		      addr_equal(&c2.base, &c.base));
		CHECK(addr_cidr_contains(&c, &c.base));
	}
}

/* A target the rule names must match it: the rule's own name, a name one
 * label below, or the CIDR's base address. */
static void check_rule_matches_itself(const struct host_rule *r)
{
	static const uint16_t ports[] = { 443 };
	uint16_t port = r->port > 0 ? (uint16_t)r->port : 443;
	char text[HOSTNAME_MAX + 8];
	struct host_target t;

	switch (r->kind) {
	case HOST_RULE_EXACT:
	case HOST_RULE_SELF_BELOW:
		snprintf(text, sizeof(text), "%s", r->name);
		break;
	case HOST_RULE_BELOW:
		if (strlen(r->name) + 2 > HOSTNAME_MAX)
			return;
		snprintf(text, sizeof(text), "a.%s", r->name);
		break;
	case HOST_RULE_ANY:
		snprintf(text, sizeof(text), "example.com");
		break;
	case HOST_RULE_CIDR: {
		char a[ADDR_STRLEN];

		addr_format(&r->cidr.base, a, sizeof(a));
		snprintf(text, sizeof(text),
			 r->cidr.base.family == AF_INET6 ? "[%s]" : "%s", a);
		break;
	}
	default:
		CHECK(!"unknown rule kind");
	}
	CHECK(hostname_normalise(text, strlen(text), &t) == HOSTNAME_OK);
	CHECK(host_rule_matches(r, &t, port, ports, 1, false));
	CHECK(host_rule_matches(r, &t, port, ports, 1, true));
	CHECK(!host_rule_matches(r, &t, 0, ports, 1, false));
}

static void check_decision(const struct host_rule *r,
			   const struct host_target *t, uint16_t port)
{
	static const uint16_t ports[] = { 80, 443 };
	bool m_allow = host_rule_matches(r, t, port, ports, 2, false);
	bool m_deny = host_rule_matches(r, t, port, ports, 2, true);
	enum host_verdict v;
	int index = 42;

	CHECK(!m_allow || m_deny);
	CHECK(!m_allow || port != 0);
	if (r->kind == HOST_RULE_CIDR)
		CHECK(!m_deny || t->is_addr);
	else
		CHECK(!m_deny || !t->is_addr);
	if (m_deny && r->kind == HOST_RULE_EXACT)
		CHECK(strcmp(t->name, r->name) == 0);
	if (m_deny && (r->kind == HOST_RULE_BELOW ||
		       (r->kind == HOST_RULE_SELF_BELOW &&
			strcmp(t->name, r->name) != 0))) {
		size_t n = strlen(t->name), s = strlen(r->name);

		CHECK(n > s + 1 && t->name[n - s - 1] == '.' &&
		      strcmp(t->name + n - s, r->name) == 0);
	}
	v = host_decide(r, 1, NULL, 0, ports, 2, t, port, &index);
	CHECK(m_allow ? (v == HOST_VERDICT_ALLOW && index == 0)
		      : (v == HOST_VERDICT_DENY_DEFAULT && index == -1));
	v = host_decide(r, 1, r, 1, ports, 2, t, port, &index);
	CHECK(m_deny ? (v == HOST_VERDICT_DENY_RULE && index == 0)
		     : (v == HOST_VERDICT_DENY_DEFAULT && index == -1));
	v = host_decide(NULL, 0, NULL, 0, ports, 2, t, port, &index);
	CHECK(v == HOST_VERDICT_DENY_DEFAULT && index == -1);
}

static void check_rule(const char *rule_text, const char *target,
		       size_t target_len)
{
	uint16_t try_ports[] = { 0, 22, 80, 443, 8443, 443 };
	char err[256], text[HOSTNAME_MAX + 64], text2[HOSTNAME_MAX + 64];
	struct host_rule r, again;
	struct host_target t;
	size_t i;

	if (!host_rule_parse(rule_text, &r, err, sizeof(err))) {
		CHECK(err[0] != '\0' && !strchr(err, '\n'));
		return;
	}
	CHECK(r.port == HOST_RULE_PORT_DEFAULT ||
	      r.port == HOST_RULE_PORT_ANY ||
	      (r.port >= 1 && r.port <= 65535));
	host_rule_format(&r, text, sizeof(text));
	CHECK(host_rule_parse(text, &again, err, sizeof(err)));
	CHECK(rules_equal(&r, &again));
	host_rule_format(&again, text2, sizeof(text2));
	CHECK(strcmp(text, text2) == 0);
	check_rule_matches_itself(&r);

	if (hostname_normalise(target, target_len, &t) != HOSTNAME_OK)
		return;
	if (r.port > 0)
		try_ports[5] = (uint16_t)r.port;
	for (i = 0; i < sizeof(try_ports) / sizeof(try_ports[0]); i++)
		check_decision(&r, &t, try_ports[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nl;
	char *copy;

	if (size > 4096)
		return 0;
	check_normalise(in, size);
	check_authority(in, size);

	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	check_addr_parsers(copy);

	nl = memchr(in, '\n', size);
	if (nl) {
		size_t rlen = (size_t)(nl - in);

		copy[rlen] = '\0';
		check_rule(copy, nl + 1, size - rlen - 1);
	} else {
		check_rule(copy, in, size);
	}
	free(copy);
	return 0;
}
