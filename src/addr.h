/* SPDX-License-Identifier: Apache-2.0
 * addr.h - IP addresses, CIDRs and the special-purpose classifier
 * (docs/PROXY.md, "Decision").
 *
 * Pure functions, no I/O: every function here is table-tested in
 * tests/unit/test_addr.c.
 */
#ifndef AIRLOCK_ADDR_H
#define AIRLOCK_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An IPv4 or IPv6 address in network byte order. IPv4 uses bytes[0..3]. */
struct addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t bytes[16];
};

struct addr_cidr {
	struct addr base; /* host bits are zero */
	unsigned int prefix; /* 0..32 or 0..128 */
};

/* Address classes. ADDR_CLASS_GLOBAL is the only one a name may resolve
 * to without an allow_ranges exemption. Keep addr_class_to_string() in sync
 * (a static_assert checks the table size). */
enum addr_class {
	ADDR_CLASS_GLOBAL = 0,
	ADDR_CLASS_THIS_NETWORK,   /* 0.0.0.0/8 */
	ADDR_CLASS_UNSPECIFIED,    /* ::/128 */
	ADDR_CLASS_LOOPBACK,       /* 127.0.0.0/8, ::1/128 */
	ADDR_CLASS_PRIVATE,        /* RFC 1918 */
	ADDR_CLASS_SHARED,         /* 100.64.0.0/10 CGNAT */
	ADDR_CLASS_LINK_LOCAL,     /* 169.254.0.0/16, fe80::/10 */
	ADDR_CLASS_IETF_PROTOCOL,  /* 192.0.0.0/24 (all of it), 2001::/23
				      (non-global parts), 64:ff9b:1::/48
				      outside the /96 layout */
	ADDR_CLASS_DOCUMENTATION,  /* 192.0.2/24, 198.51.100/24, 203.0.113/24,
				      2001:db8::/32, 3fff::/20 */
	ADDR_CLASS_BENCHMARKING,   /* 198.18.0.0/15, 2001:2::/48 */
	ADDR_CLASS_RESERVED,       /* 240.0.0.0/4; IPv6 outside 2000::/3 that
				      no other class covers */
	ADDR_CLASS_BROADCAST,      /* 255.255.255.255/32 */
	ADDR_CLASS_MULTICAST,      /* 224.0.0.0/4, ff00::/8 */
	ADDR_CLASS_ULA,            /* fc00::/7 */
	ADDR_CLASS_DISCARD,        /* 100::/64 discard-only, 100:0:0:1::/64 */
	ADDR_CLASS_SITE_LOCAL,     /* fec0::/10 (deprecated) */
	ADDR_CLASS_SRV6_SID,       /* 5f00::/16 */
	ADDR_CLASS_RELAY_ANYCAST,  /* 192.88.99.0/24 deprecated 6to4 relay */
	ADDR_CLASS_COUNT
};

const char *addr_class_to_string(enum addr_class c);

/* Strict numeric parse: dotted-quad IPv4 (exactly four decimal parts, no
 * leading zeros) or an IPv6 literal without brackets and without zone id.
 * Returns false for anything else. */
bool addr_parse(const char *s, struct addr *out);

/* Parses the IPv4 notations that any libc parser (inet_aton) accepts: one to
 * four parts, each decimal, octal (leading 0) or hex (0x), e.g. "2130706433",
 * "0x7f.1", "0177.0.0.1", "127.1". Accepts exactly what glibc's inet_aton
 * accepts except that trailing whitespace (and whatever follows it) is
 * refused, as getaddrinfo's inet_aton_exact does. Returns false if @s is not
 * such a notation. A string that has the form (one to four dot-separated
 * parts, each [0-9]+ or 0x[0-9a-f]*) but that inet_aton still refuses -- a
 * part overflows, an octal part holds 8 or 9, "0x" has no digits -- also
 * returns false and sets *overflow = true (it is not a valid name either:
 * callers deny it). @overflow may be NULL. */
bool addr_parse_ipv4_any(const char *s, struct addr *out, bool *overflow);

/* "ADDR/PREFIX" or a bare ADDR (full-length prefix). Host bits must be zero.
 * IPv4 part must be strict dotted-quad; PREFIX is decimal without leading
 * zeros. */
bool addr_parse_cidr(const char *s, struct addr_cidr *out);

bool addr_equal(const struct addr *a, const struct addr *b);
bool addr_cidr_contains(const struct addr_cidr *c, const struct addr *a);

/* If @a is an IPv6 address that embeds an IPv4 address (IPv4-mapped
 * ::ffff:0:0/96, IPv4-compatible ::/96 other than :: and ::1, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 with
 * the client address inverted), stores it in @v4 and returns true.
 * In 64:ff9b:1::/48 only the /96 layout (bits 48..95 zero, IPv4 in the last
 * 32 bits) counts as embedding; other addresses there are classified
 * IETF_PROTOCOL because the translator's prefix length is unknown. */
bool addr_embedded_ipv4(const struct addr *a, struct addr *v4);

/* Classifies @a; IPv6 with an embedded IPv4 address is judged by that
 * address (a 6to4 address wrapping a global IPv4 is global). */
enum addr_class addr_classify(const struct addr *a);

/* True when @a may be connected to: its class is GLOBAL, or it lies in one
 * of @exempt (egress.allow_ranges). An IPv4-mapped address ::ffff:a.b.c.d is
 * also exempt when a.b.c.d is (it is the same destination). */
bool addr_is_allowed(const struct addr *a, const struct addr_cidr *exempt,
		     size_t nexempt);

/* Socket addresses. addr_to_sockaddr() fills @ss with @a and @port (host
 * order) and returns its length. addr_from_sockaddr() reads an AF_INET or
 * AF_INET6 address of @len bytes; false for any other family or a short
 * @len. @port may be NULL. */
struct sockaddr;
struct sockaddr_storage;
unsigned int addr_to_sockaddr(const struct addr *a, uint16_t port,
			      struct sockaddr_storage *ss);
bool addr_from_sockaddr(const struct sockaddr *sa, size_t len, struct addr *a,
			uint16_t *port);

/* Canonical text (inet_ntop form; IPv6 without brackets). @out must hold
 * ADDR_STRLEN bytes (checked: a shorter buffer is an ASSERT failure). */
#define ADDR_STRLEN 46
void addr_format(const struct addr *a, char *out, size_t len);

/* Canonical text of a CIDR, "ADDR/PREFIX". @out holds ADDR_STRLEN + 4. */
void addr_cidr_format(const struct addr_cidr *c, char *out, size_t len);

#endif /* AIRLOCK_ADDR_H */
