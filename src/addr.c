/* SPDX-License-Identifier: Apache-2.0
 * addr.c - IP addresses, CIDRs and the special-purpose classifier.
 *
 * DOC: Theory of Operation
 *
 * The proxy connects only to addresses it has checked (docs/PROXY.md), so this
 * module answers one question: "may a name resolve to this address?". The
 * answer is a pure function of 16 bytes; there is no I/O and no state.
 *
 * Parsing. There are two IPv4 parsers on purpose:
 *  - addr_parse() is strict (exactly four decimal parts, no leading zeros,
 *    or an IPv6 literal without zone id) and is what policies and DNS
 *    answers are written in. IPv4 is parsed by hand so the strictness does
 *    not depend on the libc; IPv6 goes to inet_pton() after we have refused
 *    every byte that cannot belong to an IPv6 literal (a zone id's '%').
 *  - addr_parse_ipv4_any() reproduces glibc's inet_aton() (1..4 parts, each
 *    decimal, octal or hex, the last part filling the remaining bytes),
 *    because a target such as "0x7f.1" or "2130706433" is read as 127.0.0.1
 *    by some parser between the agent and the wire, and we must judge the
 *    address that parser would reach, never the "name". The one divergence:
 *    inet_aton() ignores trailing whitespace and anything after it ("1.2.3.4
 *    junk"); getaddrinfo() stopped doing that (CVE-2016-10739) and so do we.
 *    Strings with the shape of such a notation that inet_aton() still refuses
 *    (overflow, octal 8/9, "0x" with no digits) are flagged so callers can
 *    deny them instead of handing them to a resolver as a name.
 *
 * Classification. IPv4 and IPv6 each have a fixed table of the IANA
 * special-purpose blocks that are not globally reachable, scanned first
 * match wins (more specific entries first). IPv6 addresses that carry an
 * IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by that
 * IPv4 address: a 6to4 address around 10.0.0.1 is private, one around a
 * global address is global. We err towards "special" wherever the registry
 * is ambiguous: all of 192.0.0.0/24 (although .9 and .10 are globally
 * reachable anycast), the deprecated 6to4 relay 192.88.99.0/24, and every
 * IPv6 address outside 2000::/3 (IANA: "Reserved by IETF") that no other
 * entry names.
 *
 * Exemptions (egress.allow_ranges) are plain CIDR containment; an
 * IPv4-mapped address is also tested as its IPv4 address because a
 * dual-stack socket connecting to it reaches exactly that IPv4 host.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util.h"

static const char *const class_names[] = {
	[ADDR_CLASS_GLOBAL] = "global",
	[ADDR_CLASS_THIS_NETWORK] = "this-network",
	[ADDR_CLASS_UNSPECIFIED] = "unspecified",
	[ADDR_CLASS_LOOPBACK] = "loopback",
	[ADDR_CLASS_PRIVATE] = "private",
	[ADDR_CLASS_SHARED] = "shared",
	[ADDR_CLASS_LINK_LOCAL] = "link-local",
	[ADDR_CLASS_IETF_PROTOCOL] = "ietf-protocol",
	[ADDR_CLASS_DOCUMENTATION] = "documentation",
	[ADDR_CLASS_BENCHMARKING] = "benchmarking",
	[ADDR_CLASS_RESERVED] = "reserved",
	[ADDR_CLASS_BROADCAST] = "broadcast",
	[ADDR_CLASS_MULTICAST] = "multicast",
	[ADDR_CLASS_ULA] = "unique-local",
	[ADDR_CLASS_DISCARD] = "discard",
	[ADDR_CLASS_SITE_LOCAL] = "site-local",
	[ADDR_CLASS_SRV6_SID] = "srv6-sid",
	[ADDR_CLASS_RELAY_ANYCAST] = "6to4-relay-anycast",
};
static_assert(ARRAY_SIZE(class_names) == ADDR_CLASS_COUNT,
	      "class_names out of sync with enum addr_class");

const char *addr_class_to_string(enum addr_class c)
{
	if ((unsigned int)c >= ADDR_CLASS_COUNT || !class_names[c])
		return "unknown";
	return class_names[c];
}

/* ------------------------------------------------------------------ */
/* Parsing                                                            */
/* ------------------------------------------------------------------ */

static void set_ipv4(struct addr *out, uint32_t host_order)
{
	memset(out, 0, sizeof(*out));
	out->family = AF_INET;
	out->bytes[0] = (uint8_t)(host_order >> 24);
	out->bytes[1] = (uint8_t)(host_order >> 16);
	out->bytes[2] = (uint8_t)(host_order >> 8);
	out->bytes[3] = (uint8_t)host_order;
}

/* Exactly "D.D.D.D", each D 0..255 in decimal without leading zeros:
 * the only IPv4 form that has a single spelling per address. */
static bool parse_ipv4_strict(const char *s, struct addr *out)
{
	uint32_t v = 0;
	int part;

	for (part = 0; part < 4; part++) {
		unsigned int octet = 0;
		int ndigits = 0;

		if (part > 0 && *s++ != '.')
			return false;
		while (util_is_digit(*s)) {
			/* A leading zero means octal to inet_aton. */
			if (ndigits == 1 && octet == 0)
				return false;
			octet = octet * 10 + (unsigned int)(*s - '0');
			if (octet > 255)
				return false;
			ndigits++;
			s++;
		}
		if (ndigits == 0)
			return false;
		v = (v << 8) | octet;
	}
	if (*s != '\0')
		return false;
	set_ipv4(out, v);
	return true;
}

static bool parse_ipv6(const char *s, struct addr *out)
{
	struct in6_addr a6;
	const char *p;

	if (strlen(s) >= INET6_ADDRSTRLEN)
		return false;
	/* inet_pton already refuses '%', but the refusal of a zone id is a
	 * security property of ours, not an accident of the libc. */
	for (p = s; *p; p++) {
		if (util_hex_value(*p) < 0 && *p != ':' && *p != '.')
			return false;
	}
	if (inet_pton(AF_INET6, s, &a6) != 1)
		return false;
	memset(out, 0, sizeof(*out));
	out->family = AF_INET6;
	memcpy(out->bytes, &a6, 16);
	return true;
}

bool addr_parse(const char *s, struct addr *out)
{
	struct addr tmp;

	if (!s || !*s)
		return false;
	if (strchr(s, ':')) {
		if (!parse_ipv6(s, &tmp))
			return false;
	} else if (!parse_ipv4_strict(s, &tmp)) {
		return false;
	}
	*out = tmp;
	return true;
}

/* Saturates instead of wrapping so that arbitrarily long parts (glibc
 * accepts any number of leading zeros) cannot overflow into a valid value. */
#define IPV4_PART_BIG 0x100000000ull

bool addr_parse_ipv4_any(const char *s, struct addr *out, bool *overflow)
{
	/* Largest value of the last part given the number of parts. */
	static const uint64_t last_max[4] = { 0xffffffffu, 0xffffffu, 0xffffu,
					      0xffu };
	uint64_t parts[4];
	size_t nparts = 0, i;
	bool refused = false;
	uint32_t v;

	if (overflow)
		*overflow = false;
	if (!s)
		return false;
	for (;;) {
		uint64_t val = 0;

		if (nparts == 4 || !util_is_digit(*s))
			return false; /* not the shape of an inet_aton string */
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
			int ndigits = 0, d;

			for (s += 2; (d = util_hex_value(*s)) >= 0; s++, ndigits++) {
				val = val * 16 + (uint64_t)d;
				if (val >= IPV4_PART_BIG)
					val = IPV4_PART_BIG;
			}
			/* strtoul() reads the "0" and stops at the 'x'. */
			if (ndigits == 0)
				refused = true;
		} else {
			unsigned int base = s[0] == '0' ? 8 : 10;

			for (; util_is_digit(*s); s++) {
				if ((unsigned int)(*s - '0') >= base)
					refused = true;
				val = val * base + (uint64_t)(*s - '0');
				if (val >= IPV4_PART_BIG)
					val = IPV4_PART_BIG;
			}
		}
		parts[nparts++] = val;
		if (*s == '\0')
			break;
		if (*s != '.')
			return false;
		s++;
	}
	for (i = 0; i + 1 < nparts; i++) {
		if (parts[i] > 0xff)
			refused = true;
	}
	if (parts[nparts - 1] > last_max[nparts - 1])
		refused = true;
	if (refused) {
		if (overflow)
			*overflow = true;
		return false;
	}
	v = 0;
	for (i = 0; i + 1 < nparts; i++)
		v |= (uint32_t)parts[i] << (24 - 8 * i);
	v |= (uint32_t)parts[nparts - 1];
	set_ipv4(out, v);
	return true;
}

static unsigned int family_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

/* Is bit @i (0 = most significant of byte 0) set? */
static bool bit_set(const uint8_t *bytes, unsigned int i)
{
	return (bytes[i / 8] >> (7 - i % 8)) & 1;
}

bool addr_parse_cidr(const char *s, struct addr_cidr *out)
{
	char buf[INET6_ADDRSTRLEN];
	struct addr_cidr c;
	const char *slash;
	unsigned int prefix = 0, i, max;
	size_t alen;

	if (!s)
		return false;
	slash = strchr(s, '/');
	alen = slash ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(buf))
		return false;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	memset(&c, 0, sizeof(c));
	if (!addr_parse(buf, &c.base))
		return false;
	max = family_bits(c.base.family);
	if (!slash) {
		prefix = max;
	} else {
		const char *p = slash + 1;

		if (!util_is_digit(*p) || (p[0] == '0' && p[1] != '\0'))
			return false; /* empty or leading zero */
		for (; util_is_digit(*p); p++) {
			prefix = prefix * 10 + (unsigned int)(*p - '0');
			if (prefix > max)
				return false;
		}
		if (*p != '\0')
			return false;
	}
	/* Reject rather than mask: "10.0.0.1/8" is probably a typo for a host
	 * rule, and silently widening it would allow more than was written. */
	for (i = prefix; i < max; i++) {
		if (bit_set(c.base.bytes, i))
			return false;
	}
	c.prefix = prefix;
	*out = c;
	return true;
}

/* ------------------------------------------------------------------ */
/* Comparison                                                         */
/* ------------------------------------------------------------------ */

bool addr_equal(const struct addr *a, const struct addr *b)
{
	if (a->family != b->family)
		return false;
	if (a->family != AF_INET && a->family != AF_INET6)
		return false;
	return memcmp(a->bytes, b->bytes, family_bits(a->family) / 8) == 0;
}

static bool prefix_match(const uint8_t *net, const uint8_t *a,
			 unsigned int prefix)
{
	unsigned int whole = prefix / 8, rest = prefix % 8;

	if (memcmp(net, a, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((net[whole] ^ a[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool addr_cidr_contains(const struct addr_cidr *c, const struct addr *a)
{
	if (c->base.family != a->family)
		return false;
	if (a->family != AF_INET && a->family != AF_INET6)
		return false;
	if (c->prefix > family_bits(a->family))
		return false;
	return prefix_match(c->base.bytes, a->bytes, c->prefix);
}

/* ------------------------------------------------------------------ */
/* Classification                                                     */
/* ------------------------------------------------------------------ */

struct special_block {
	uint8_t net[16];
	unsigned int prefix;
	enum addr_class cls;
};

#define V4(a, b, c, d, p, k) { { a, b, c, d }, p, ADDR_CLASS_##k }

/* First match wins: the more specific entries come first. */
static const struct special_block special_v4[] = {
	V4(0, 0, 0, 0, 8, THIS_NETWORK),
	V4(10, 0, 0, 0, 8, PRIVATE),
	V4(100, 64, 0, 0, 10, SHARED),
	V4(127, 0, 0, 0, 8, LOOPBACK),
	V4(169, 254, 0, 0, 16, LINK_LOCAL),
	V4(172, 16, 0, 0, 12, PRIVATE),
	/* IANA marks 192.0.0.9/32 (PCP anycast) and 192.0.0.10/32 (TURN
	 * anycast) globally reachable; an agent has no business with either
	 * and a single /24 is easier to audit: the whole block is special. */
	V4(192, 0, 0, 0, 24, IETF_PROTOCOL),
	V4(192, 0, 2, 0, 24, DOCUMENTATION),
	/* Deprecated by RFC 7526; what answers there is anyone's guess. */
	V4(192, 88, 99, 0, 24, RELAY_ANYCAST),
	V4(192, 168, 0, 0, 16, PRIVATE),
	V4(198, 18, 0, 0, 15, BENCHMARKING),
	V4(198, 51, 100, 0, 24, DOCUMENTATION),
	V4(203, 0, 113, 0, 24, DOCUMENTATION),
	V4(224, 0, 0, 0, 4, MULTICAST),
	V4(255, 255, 255, 255, 32, BROADCAST),
	V4(240, 0, 0, 0, 4, RESERVED),
};

#define V6(p, k, ...) { { __VA_ARGS__ }, p, ADDR_CLASS_##k }

/* Consulted after the embedded-IPv4 forms, ::/128 and ::1/128. */
static const struct special_block special_v6[] = {
	/* The globally reachable assignments inside 2001::/23. */
	V6(128, GLOBAL, 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	   0, 0x01),                                       /* PCP anycast */
	V6(128, GLOBAL, 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	   0, 0x02),                                       /* TURN anycast */
	V6(128, GLOBAL, 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	   0, 0x03),                                       /* DNS-SD SRP */
	V6(32, GLOBAL, 0x20, 0x01, 0x00, 0x03),            /* AMT */
	V6(48, GLOBAL, 0x20, 0x01, 0x00, 0x04, 0x01, 0x12), /* AS112-v6 */
	V6(28, GLOBAL, 0x20, 0x01, 0x00, 0x20),            /* ORCHIDv2 */
	V6(28, GLOBAL, 0x20, 0x01, 0x00, 0x30),            /* DRIP DETs */
	V6(48, BENCHMARKING, 0x20, 0x01, 0x00, 0x02, 0x00, 0x00),
	/* The rest of 2001::/23: deprecated ORCHID 2001:10::/28 and the
	 * unassigned remainder. (Teredo 2001::/32 is an embedding.) */
	V6(23, IETF_PROTOCOL, 0x20, 0x01, 0x00),
	V6(32, DOCUMENTATION, 0x20, 0x01, 0x0d, 0xb8),
	V6(20, DOCUMENTATION, 0x3f, 0xff, 0x00),
	V6(16, SRV6_SID, 0x5f, 0x00),
	V6(64, DISCARD, 0x01, 0x00),
	V6(64, DISCARD, 0x01, 0x00, 0, 0, 0, 0, 0, 0x01), /* RFC 9780 dummy */
	/* Local-use NAT64 outside the /96 layout: the translator's prefix
	 * length, hence where the IPv4 address sits, is unknown. */
	V6(48, IETF_PROTOCOL, 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01),
	V6(7, ULA, 0xfc),
	V6(10, LINK_LOCAL, 0xfe, 0x80),
	V6(10, SITE_LOCAL, 0xfe, 0xc0),
	V6(8, MULTICAST, 0xff),
	V6(3, GLOBAL, 0x20),
	/* IANA: everything else is "Reserved by IETF". */
	V6(0, RESERVED, 0),
};

static enum addr_class lookup(const struct special_block *t, size_t n,
			      const struct addr *a)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (prefix_match(t[i].net, a->bytes, t[i].prefix))
			return t[i].cls;
	}
	return ADDR_CLASS_GLOBAL;
}

static bool all_zero(const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (b[i])
			return false;
	}
	return true;
}

static void v4_from(struct addr *v4, const uint8_t *src, uint8_t xor)
{
	int i;

	memset(v4, 0, sizeof(*v4));
	v4->family = AF_INET;
	for (i = 0; i < 4; i++)
		v4->bytes[i] = src[i] ^ xor;
}

bool addr_embedded_ipv4(const struct addr *a, struct addr *v4)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
					    0, 0, 0xff, 0xff };
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	static const uint8_t nat64_local[12] = { 0x00, 0x64, 0xff, 0x9b,
						 0x00, 0x01 };
	const uint8_t *b = a->bytes;

	if (a->family != AF_INET6)
		return false;
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0 ||
	    memcmp(b, nat64_local, 12) == 0) {
		v4_from(v4, b + 12, 0);
		return true;
	}
	if (all_zero(b, 12)) {
		/* IPv4-compatible, except :: and ::1 which are their own. */
		if (all_zero(b + 12, 3) && b[15] <= 1)
			return false;
		v4_from(v4, b + 12, 0);
		return true;
	}
	if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4: 2002:AABB:CCDD::/48 */
		v4_from(v4, b + 2, 0);
		return true;
	}
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
		/* Teredo: the client's public address, bits inverted. */
		v4_from(v4, b + 12, 0xff);
		return true;
	}
	return false;
}

enum addr_class addr_classify(const struct addr *a)
{
	struct addr v4;

	if (a->family == AF_INET)
		return lookup(special_v4, ARRAY_SIZE(special_v4), a);
	/* An unknown family is never connectable. */
	if (a->family != AF_INET6)
		return ADDR_CLASS_RESERVED;
	if (all_zero(a->bytes, 16))
		return ADDR_CLASS_UNSPECIFIED;
	if (all_zero(a->bytes, 15) && a->bytes[15] == 1)
		return ADDR_CLASS_LOOPBACK;
	if (addr_embedded_ipv4(a, &v4))
		return lookup(special_v4, ARRAY_SIZE(special_v4), &v4);
	return lookup(special_v6, ARRAY_SIZE(special_v6), a);
}

static bool is_v4_mapped(const struct addr *a, struct addr *v4)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
					    0, 0, 0xff, 0xff };

	if (a->family != AF_INET6 || memcmp(a->bytes, mapped, 12) != 0)
		return false;
	v4_from(v4, a->bytes + 12, 0);
	return true;
}

bool addr_is_allowed(const struct addr *a, const struct addr_cidr *exempt,
		     size_t nexempt)
{
	struct addr v4;
	bool mapped = is_v4_mapped(a, &v4);
	size_t i;

	if (addr_classify(a) == ADDR_CLASS_GLOBAL)
		return true;
	for (i = 0; i < nexempt; i++) {
		if (addr_cidr_contains(&exempt[i], a))
			return true;
		if (mapped && addr_cidr_contains(&exempt[i], &v4))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* Formatting                                                         */
/* ------------------------------------------------------------------ */

void addr_format(const struct addr *a, char *out, size_t len)
{
	const char *text;

	ASSERT(len >= ADDR_STRLEN);
	ASSERT(a->family == AF_INET || a->family == AF_INET6);
	text = inet_ntop(a->family, a->bytes, out, (socklen_t)len);
	ASSERT(text != NULL);
}

void addr_cidr_format(const struct addr_cidr *c, char *out, size_t len)
{
	char text[ADDR_STRLEN];

	ASSERT(len >= ADDR_STRLEN + 4);
	addr_format(&c->base, text, sizeof(text));
	snprintf(out, len, "%s/%u", text, c->prefix);
}

unsigned int addr_to_sockaddr(const struct addr *a, uint16_t port,
			      struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, a->bytes, 4);
		return sizeof(*sin);
	}
	ASSERT(a->family == AF_INET6);
	{
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a->bytes, 16);
		return sizeof(*sin6);
	}
}

bool addr_from_sockaddr(const struct sockaddr *sa, size_t len, struct addr *a,
			uint16_t *port)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		a->family = AF_INET;
		memcpy(a->bytes, &sin->sin_addr, 4);
		if (port)
			*port = ntohs(sin->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		a->family = AF_INET6;
		memcpy(a->bytes, &sin6->sin6_addr, 16);
		if (port)
			*port = ntohs(sin6->sin6_port);
		return true;
	}
	return false;
}
