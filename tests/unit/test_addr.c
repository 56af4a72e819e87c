/* SPDX-License-Identifier: Apache-2.0
 * test_addr.c - table tests of addr.c: strict and inet_aton-style parsing
 * (cross-checked against glibc), CIDRs, the special-purpose classifier at
 * the first and last address of every block and just outside it, the IPv6
 * embeddings of IPv4, and exemptions.
 *
 * Every address here is a pure computation; no packet is sent. "Global"
 * examples are well-known public resolvers or block edges.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "addr.h"
#include "tap.h"
#include "util.h"

#define C(x) ADDR_CLASS_##x

struct classify_case {
	const char *text;
	enum addr_class want;
};

static const struct classify_case classify_cases[] = {
	/* 0.0.0.0/8 */
	{ "0.0.0.0", C(THIS_NETWORK) },
	{ "0.255.255.255", C(THIS_NETWORK) },
	{ "1.0.0.0", C(GLOBAL) },
	{ "1.1.1.1", C(GLOBAL) },
	{ "8.8.8.8", C(GLOBAL) },
	/* 10.0.0.0/8 */
	{ "9.255.255.255", C(GLOBAL) },
	{ "10.0.0.0", C(PRIVATE) },
	{ "10.255.255.255", C(PRIVATE) },
	{ "11.0.0.0", C(GLOBAL) },
	/* 100.64.0.0/10 */
	{ "100.63.255.255", C(GLOBAL) },
	{ "100.64.0.0", C(SHARED) },
	{ "100.127.255.255", C(SHARED) },
	{ "100.128.0.0", C(GLOBAL) },
	/* 127.0.0.0/8 */
	{ "126.255.255.255", C(GLOBAL) },
	{ "127.0.0.0", C(LOOPBACK) },
	{ "127.0.0.1", C(LOOPBACK) },
	{ "127.255.255.255", C(LOOPBACK) },
	{ "128.0.0.0", C(GLOBAL) },
	/* 169.254.0.0/16 */
	{ "169.253.255.255", C(GLOBAL) },
	{ "169.254.0.0", C(LINK_LOCAL) },
	{ "169.254.169.254", C(LINK_LOCAL) },
	{ "169.254.255.255", C(LINK_LOCAL) },
	{ "169.255.0.0", C(GLOBAL) },
	/* 172.16.0.0/12 */
	{ "172.15.255.255", C(GLOBAL) },
	{ "172.16.0.0", C(PRIVATE) },
	{ "172.31.255.255", C(PRIVATE) },
	{ "172.32.0.0", C(GLOBAL) },
	/* 192.0.0.0/24, including the globally reachable .9 and .10 */
	{ "191.255.255.255", C(GLOBAL) },
	{ "192.0.0.0", C(IETF_PROTOCOL) },
	{ "192.0.0.9", C(IETF_PROTOCOL) },
	{ "192.0.0.10", C(IETF_PROTOCOL) },
	{ "192.0.0.170", C(IETF_PROTOCOL) },
	{ "192.0.0.255", C(IETF_PROTOCOL) },
	{ "192.0.1.0", C(GLOBAL) },
	/* 192.0.2.0/24 */
	{ "192.0.2.0", C(DOCUMENTATION) },
	{ "192.0.2.255", C(DOCUMENTATION) },
	{ "192.0.3.0", C(GLOBAL) },
	/* 192.88.99.0/24 */
	{ "192.88.98.255", C(GLOBAL) },
	{ "192.88.99.0", C(RELAY_ANYCAST) },
	{ "192.88.99.255", C(RELAY_ANYCAST) },
	{ "192.88.100.0", C(GLOBAL) },
	/* 192.168.0.0/16 */
	{ "192.167.255.255", C(GLOBAL) },
	{ "192.168.0.0", C(PRIVATE) },
	{ "192.168.255.255", C(PRIVATE) },
	{ "192.169.0.0", C(GLOBAL) },
	/* 198.18.0.0/15 */
	{ "198.17.255.255", C(GLOBAL) },
	{ "198.18.0.0", C(BENCHMARKING) },
	{ "198.19.255.255", C(BENCHMARKING) },
	{ "198.20.0.0", C(GLOBAL) },
	/* 198.51.100.0/24 */
	{ "198.51.99.255", C(GLOBAL) },
	{ "198.51.100.0", C(DOCUMENTATION) },
	{ "198.51.100.255", C(DOCUMENTATION) },
	{ "198.51.101.0", C(GLOBAL) },
	/* 203.0.113.0/24 */
	{ "203.0.112.255", C(GLOBAL) },
	{ "203.0.113.0", C(DOCUMENTATION) },
	{ "203.0.113.255", C(DOCUMENTATION) },
	{ "203.0.114.0", C(GLOBAL) },
	/* 224.0.0.0/4, 240.0.0.0/4, 255.255.255.255 */
	{ "223.255.255.255", C(GLOBAL) },
	{ "224.0.0.0", C(MULTICAST) },
	{ "239.255.255.255", C(MULTICAST) },
	{ "240.0.0.0", C(RESERVED) },
	{ "255.255.255.254", C(RESERVED) },
	{ "255.255.255.255", C(BROADCAST) },

	/* IPv6: ::, ::1 and IPv4-compatible ::/96 */
	{ "::", C(UNSPECIFIED) },
	{ "::1", C(LOOPBACK) },
	{ "::2", C(THIS_NETWORK) },
	{ "::127.0.0.1", C(LOOPBACK) },
	{ "::169.254.169.254", C(LINK_LOCAL) },
	{ "::10.0.0.1", C(PRIVATE) },
	{ "::8.8.8.8", C(GLOBAL) },
	{ "::255.255.255.255", C(BROADCAST) },
	/* IPv4-mapped ::ffff:0:0/96 */
	{ "::ffff:0.0.0.0", C(THIS_NETWORK) },
	{ "::ffff:127.0.0.1", C(LOOPBACK) },
	{ "::ffff:169.254.169.254", C(LINK_LOCAL) },
	{ "::ffff:10.0.0.1", C(PRIVATE) },
	{ "::ffff:100.64.0.1", C(SHARED) },
	{ "::ffff:8.8.8.8", C(GLOBAL) },
	{ "::ffff:1.1.1.1", C(GLOBAL) },
	{ "::ffff:255.255.255.255", C(BROADCAST) },
	/* Next to the mapped block: no embedding, IETF-reserved ::/8 */
	{ "::fffe:808:808", C(RESERVED) },
	{ "::1:0:808:808", C(RESERVED) },
	{ "::ffff:0:808:808", C(RESERVED) },
	{ "0:0:0:1::", C(RESERVED) },
	/* NAT64 64:ff9b::/96 */
	{ "64:ff9b::", C(THIS_NETWORK) },
	{ "64:ff9b::a9fe:a9fe", C(LINK_LOCAL) },
	{ "64:ff9b::127.0.0.1", C(LOOPBACK) },
	{ "64:ff9b::192.168.1.1", C(PRIVATE) },
	{ "64:ff9b::8.8.8.8", C(GLOBAL) },
	{ "64:ff9b::1:808:808", C(RESERVED) },
	/* Local-use NAT64 64:ff9b:1::/48 */
	{ "64:ff9b:1::808:808", C(GLOBAL) },
	{ "64:ff9b:1::a00:1", C(PRIVATE) },
	{ "64:ff9b:1::a9fe:a9fe", C(LINK_LOCAL) },
	{ "64:ff9b:1:ffff::808:808", C(IETF_PROTOCOL) },
	{ "64:ff9b:1:0:0:1:808:808", C(IETF_PROTOCOL) },
	{ "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", C(IETF_PROTOCOL) },
	{ "64:ff9b:2::808:808", C(RESERVED) },
	/* 100::/64 and 100:0:0:1::/64 */
	{ "100::", C(DISCARD) },
	{ "100::ffff:ffff:ffff:ffff", C(DISCARD) },
	{ "100:0:0:1::", C(DISCARD) },
	{ "100:0:0:1:ffff:ffff:ffff:ffff", C(DISCARD) },
	{ "100:0:0:2::", C(RESERVED) },
	/* Teredo 2001::/32: client IPv4 = last 32 bits inverted */
	{ "2001:0:101:101:8000:63bf:80ff:fffe", C(LOOPBACK) },
	{ "2001:0:101:101::5601:5601", C(LINK_LOCAL) },
	{ "2001:0:101:101::f5ff:fffe", C(PRIVATE) },
	{ "2001:0:101:101:8000:63bf:f7f7:f7f7", C(GLOBAL) },
	{ "2001::", C(BROADCAST) },
	{ "2001::ffff:ffff", C(THIS_NETWORK) },
	{ "2001:0:ffff:ffff:ffff:ffff:f7f7:f7f7", C(GLOBAL) },
	/* The rest of 2001::/23 */
	{ "2001:1::", C(IETF_PROTOCOL) },
	{ "2001:1::1", C(GLOBAL) },
	{ "2001:1::2", C(GLOBAL) },
	{ "2001:1::3", C(GLOBAL) },
	{ "2001:1::4", C(IETF_PROTOCOL) },
	{ "2001:2::", C(BENCHMARKING) },
	{ "2001:2:0:ffff:ffff:ffff:ffff:ffff", C(BENCHMARKING) },
	{ "2001:2:1::", C(IETF_PROTOCOL) },
	{ "2001:3::", C(GLOBAL) },
	{ "2001:3:ffff:ffff:ffff:ffff:ffff:ffff", C(GLOBAL) },
	{ "2001:4:112::", C(GLOBAL) },
	{ "2001:4:113::", C(IETF_PROTOCOL) },
	{ "2001:10::", C(IETF_PROTOCOL) },
	{ "2001:1f:ffff::", C(IETF_PROTOCOL) },
	{ "2001:20::", C(GLOBAL) },
	{ "2001:2f:ffff:ffff::", C(GLOBAL) },
	{ "2001:30::", C(GLOBAL) },
	{ "2001:3f:ffff::", C(GLOBAL) },
	{ "2001:40::", C(IETF_PROTOCOL) },
	{ "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", C(IETF_PROTOCOL) },
	{ "2001:200::", C(GLOBAL) },
	/* 2001:db8::/32 */
	{ "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", C(GLOBAL) },
	{ "2001:db8::", C(DOCUMENTATION) },
	{ "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C(DOCUMENTATION) },
	{ "2001:db9::", C(GLOBAL) },
	/* 6to4 2002::/16: IPv4 in bits 16..47 */
	{ "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(GLOBAL) },
	{ "2002::", C(THIS_NETWORK) },
	{ "2002:a9fe:a9fe::", C(LINK_LOCAL) },
	{ "2002:7f00:1::", C(LOOPBACK) },
	{ "2002:a00:1::1", C(PRIVATE) },
	{ "2002:c0a8:101::", C(PRIVATE) },
	{ "2002:808:808::", C(GLOBAL) },
	{ "2002:101:101:ffff::1", C(GLOBAL) },
	{ "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(BROADCAST) },
	{ "2003::", C(GLOBAL) },
	/* 2000::/3 edges and 3fff::/20 */
	{ "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED) },
	{ "2000::", C(GLOBAL) },
	{ "2606:4700::1", C(GLOBAL) },
	{ "2620:4f:8000::1", C(GLOBAL) },
	{ "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(GLOBAL) },
	{ "3fff::", C(DOCUMENTATION) },
	{ "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", C(DOCUMENTATION) },
	{ "3fff:1000::", C(GLOBAL) },
	{ "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(GLOBAL) },
	{ "4000::", C(RESERVED) },
	/* 5f00::/16 */
	{ "5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED) },
	{ "5f00::", C(SRV6_SID) },
	{ "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(SRV6_SID) },
	{ "5f01::", C(RESERVED) },
	/* fc00::/7, fe80::/10, fec0::/10, ff00::/8 */
	{ "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED) },
	{ "fc00::", C(ULA) },
	{ "fd00::1", C(ULA) },
	{ "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(ULA) },
	{ "fe00::", C(RESERVED) },
	{ "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED) },
	{ "fe80::", C(LINK_LOCAL) },
	{ "fe80::1", C(LINK_LOCAL) },
	{ "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(LINK_LOCAL) },
	{ "fec0::", C(SITE_LOCAL) },
	{ "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(SITE_LOCAL) },
	{ "ff00::", C(MULTICAST) },
	{ "ff02::1", C(MULTICAST) },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(MULTICAST) },
};

struct parse_case {
	const char *text;
	bool ok;
	const char *canon; /* addr_format of the result */
};

static const struct parse_case parse_cases[] = {
	{ "1.2.3.4", true, "1.2.3.4" },
	{ "0.0.0.0", true, "0.0.0.0" },
	{ "255.255.255.255", true, "255.255.255.255" },
	{ "10.0.0.10", true, "10.0.0.10" },
	{ "01.2.3.4", false, NULL },
	{ "1.2.3.04", false, NULL },
	{ "1.2.3", false, NULL },
	{ "1.2.3.4.5", false, NULL },
	{ "256.0.0.0", false, NULL },
	{ "1.2.3.256", false, NULL },
	{ "1.2.3.4.", false, NULL },
	{ " 1.2.3.4", false, NULL },
	{ "1.2.3.4 ", false, NULL },
	{ "1.2.3.4\n", false, NULL },
	{ "0x1.2.3.4", false, NULL },
	{ "+1.2.3.4", false, NULL },
	{ "1..3.4", false, NULL },
	{ "2130706433", false, NULL },
	{ "", false, NULL },
	{ "::1", true, "::1" },
	{ "::", true, "::" },
	{ "2001:DB8::1", true, "2001:db8::1" },
	{ "2001:db8:0:0:0:0:0:1", true, "2001:db8::1" },
	{ "::ffff:1.2.3.4", true, "::ffff:1.2.3.4" },
	{ "1:2:3:4:5:6:7:8", true, "1:2:3:4:5:6:7:8" },
	{ "::ffff:01.2.3.4", false, NULL },
	{ "[::1]", false, NULL },
	{ "fe80::1%eth0", false, NULL },
	{ "fe80::1%25eth0", false, NULL },
	{ "1:2:3:4:5:6:7:8:9", false, NULL },
	{ "::g", false, NULL },
	{ "2001:db8::1/64", false, NULL },
	{ ":::1", false, NULL },
	{ "::1 ", false, NULL },
};

struct any_case {
	const char *text;
	bool ok;
	bool overflow;
	const char *canon;
	bool glibc_differs; /* inet_aton accepts trailing junk; we do not */
};

/* Each row is also run through glibc's inet_aton(). */
static const struct any_case any_cases[] = {
	{ "127.0.0.1", true, false, "127.0.0.1", false },
	{ "127.1", true, false, "127.0.0.1", false },
	{ "127.0.1", true, false, "127.0.0.1", false },
	{ "2130706433", true, false, "127.0.0.1", false },
	{ "0x7f.1", true, false, "127.0.0.1", false },
	{ "0X7F.1", true, false, "127.0.0.1", false },
	{ "0177.0.0.1", true, false, "127.0.0.1", false },
	{ "0x7f.0.0.1", true, false, "127.0.0.1", false },
	{ "0x7F000001", true, false, "127.0.0.1", false },
	{ "017700000001", true, false, "127.0.0.1", false },
	{ "0x7f.0x0.0x0.0x1", true, false, "127.0.0.1", false },
	{ "0", true, false, "0.0.0.0", false },
	{ "00", true, false, "0.0.0.0", false },
	{ "0.0", true, false, "0.0.0.0", false },
	{ "1.2.3", true, false, "1.2.0.3", false },
	{ "0x10", true, false, "0.0.0.16", false },
	{ "1.2.0xffff", true, false, "1.2.255.255", false },
	{ "1.0xffffff", true, false, "1.255.255.255", false },
	{ "4294967295", true, false, "255.255.255.255", false },
	{ "0xffffffff", true, false, "255.255.255.255", false },
	{ "037777777777", true, false, "255.255.255.255", false },
	{ "0377.0377.0377.0377", true, false, "255.255.255.255", false },
	{ "0xa9fea9fe", true, false, "169.254.169.254", false },
	{ "0000000000000000000000000000000000000000000000127.1", true, false,
	  "87.0.0.1", false },
	{ "0x000000000000000000000000000000007f.1", true, false, "127.0.0.1",
	  false },
	/* The shape, but inet_aton refuses: flagged for denial. */
	{ "4294967296", false, true, NULL, false },
	{ "0x100000000", false, true, NULL, false },
	{ "99999999999999999999999", false, true, NULL, false },
	{ "256.1.1.1", false, true, NULL, false },
	{ "1.256.3", false, true, NULL, false },
	{ "1.2.65536", false, true, NULL, false },
	{ "1.2.0x10000", false, true, NULL, false },
	{ "1.0x1000000", false, true, NULL, false },
	{ "0400.1.1.1", false, true, NULL, false },
	{ "08", false, true, NULL, false },
	{ "0779.1", false, true, NULL, false },
	{ "0x", false, true, NULL, false },
	{ "0x.1", false, true, NULL, false },
	{ "1.2.3.0x", false, true, NULL, false },
	/* Not the shape at all. */
	{ "127.0.0.1.", false, false, NULL, false },
	{ "1.2.3.4.5", false, false, NULL, false },
	{ "1..2", false, false, NULL, false },
	{ ".1", false, false, NULL, false },
	{ "1.", false, false, NULL, false },
	{ "-1", false, false, NULL, false },
	{ "+1.2.3.4", false, false, NULL, false },
	{ " 1.2.3.4", false, false, NULL, false },
	{ "0x1g", false, false, NULL, false },
	{ "00x7f.1", false, false, NULL, false },
	{ "1.2.3.4a", false, false, NULL, false },
	{ "1e3", false, false, NULL, false },
	{ "a.b.c.d", false, false, NULL, false },
	{ "", false, false, NULL, false },
	/* glibc's inet_aton ignores whitespace and what follows; we do not. */
	{ "1.2.3.4 junk", false, false, NULL, true },
	{ "1.2.3.4\t", false, false, NULL, true },
	{ "127.1\n", false, false, NULL, true },
};

struct cidr_case {
	const char *text;
	bool ok;
	const char *canon; /* addr_cidr_format */
};

static const struct cidr_case cidr_cases[] = {
	{ "10.0.0.0/8", true, "10.0.0.0/8" },
	{ "10.0.0.0/32", true, "10.0.0.0/32" },
	{ "10.0.0.0", true, "10.0.0.0/32" },
	{ "0.0.0.0/0", true, "0.0.0.0/0" },
	{ "192.168.1.128/25", true, "192.168.1.128/25" },
	{ "2001:db8::/32", true, "2001:db8::/32" },
	{ "2001:DB8::/32", true, "2001:db8::/32" },
	{ "::/0", true, "::/0" },
	{ "::1/128", true, "::1/128" },
	{ "::1", true, "::1/128" },
	{ "fe80::/10", true, "fe80::/10" },
	{ "10.0.0.1/8", false, NULL },
	{ "192.168.1.129/25", false, NULL },
	{ "1.2.3.4/0", false, NULL },
	{ "2001:db8::1/32", false, NULL },
	{ "10.0.0.0/08", false, NULL },
	{ "10.0.0.0/33", false, NULL },
	{ "::/129", false, NULL },
	{ "10.0.0.0/", false, NULL },
	{ "10.0.0.0/-1", false, NULL },
	{ "10.0.0.0/+8", false, NULL },
	{ "10.0.0.0/8/8", false, NULL },
	{ "10.0.0.0/ 8", false, NULL },
	{ "010.0.0.0/8", false, NULL },
	{ "10/8", false, NULL },
	{ "/8", false, NULL },
	{ "fe80::%eth0/10", false, NULL },
	{ "[2001:db8::]/32", false, NULL },
	{ "2001:db8::/32 ", false, NULL },
};

struct contains_case {
	const char *cidr;
	const char *addr;
	bool want;
};

static const struct contains_case contains_cases[] = {
	{ "10.0.0.0/8", "10.0.0.0", true },
	{ "10.0.0.0/8", "10.255.255.255", true },
	{ "10.0.0.0/8", "9.255.255.255", false },
	{ "10.0.0.0/8", "11.0.0.0", false },
	{ "10.0.0.0/8", "::ffff:10.0.0.1", false },
	{ "192.168.1.128/25", "192.168.1.127", false },
	{ "192.168.1.128/25", "192.168.1.255", true },
	{ "0.0.0.0/0", "255.255.255.255", true },
	{ "1.2.3.4/32", "1.2.3.4", true },
	{ "1.2.3.4/32", "1.2.3.5", false },
	{ "::/0", "::1", true },
	{ "::/0", "1.2.3.4", false },
	{ "2001:db8::/33", "2001:db8:7fff:ffff::", true },
	{ "2001:db8::/33", "2001:db8:8000::", false },
	{ "fe80::/10", "febf::1", true },
	{ "fe80::/10", "fec0::1", false },
};

struct embed_case {
	const char *text;
	const char *v4; /* NULL: no embedded IPv4 */
};

static const struct embed_case embed_cases[] = {
	{ "::ffff:1.2.3.4", "1.2.3.4" },
	{ "::1.2.3.4", "1.2.3.4" },
	{ "::2", "0.0.0.2" },
	{ "::", NULL },
	{ "::1", NULL },
	{ "64:ff9b::1.2.3.4", "1.2.3.4" },
	{ "64:ff9b::1:102:304", NULL },
	{ "64:ff9b:1::1.2.3.4", "1.2.3.4" },
	{ "64:ff9b:1:1::1.2.3.4", NULL },
	{ "2002:102:304::", "1.2.3.4" },
	{ "2002:102:304:ffff:ffff:ffff:ffff:ffff", "1.2.3.4" },
	{ "2001:0:101:101::fefd:fcfb", "1.2.3.4" },
	{ "2001:1::fefd:fcfb", NULL },
	{ "2001:db8::1", NULL },
	{ "2606:4700::1", NULL },
	{ "1.2.3.4", NULL },
};

struct allowed_case {
	const char *text;
	bool with_exempt;
	bool want;
};

/* Exemptions: 10.0.0.0/8 and fd00::/8. */
static const struct allowed_case allowed_cases[] = {
	{ "8.8.8.8", false, true },
	{ "2606:4700::1", false, true },
	{ "10.1.2.3", false, false },
	{ "10.1.2.3", true, true },
	{ "172.16.0.1", true, false },
	{ "127.0.0.1", true, false },
	{ "169.254.169.254", true, false },
	{ "::ffff:10.1.2.3", true, true },
	{ "::ffff:10.1.2.3", false, false },
	{ "::ffff:172.16.0.1", true, false },
	{ "2002:a01:203::", true, false },
	{ "fd00::1", true, true },
	{ "fd00::1", false, false },
	{ "fc00::1", true, false },
	{ "::1", true, false },
};

/* A printable rendering of @s for a TAP description (control bytes as
 * \xNN). Returns one of a few rotating static buffers. */
static const char *show(const char *s)
{
	static char bufs[4][256];
	static int next;
	char *out = bufs[next++ % 4];
	size_t n = 0;

	for (; *s && n + 5 < sizeof(bufs[0]); s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c >= 0x7f)
			n += (size_t)snprintf(out + n, 5, "\\x%02x", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
	return out;
}

static bool must_parse(const char *text, struct addr *a)
{
	if (addr_parse(text, a))
		return true;
	tap_ok(false, "test table: cannot parse '%s'", text);
	return false;
}

static void test_classify(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(classify_cases); i++) {
		const struct classify_case *c = &classify_cases[i];
		struct addr a;

		if (!must_parse(c->text, &a))
			continue;
		tap_is_str(addr_class_to_string(addr_classify(&a)),
			   addr_class_to_string(c->want), "classify %s",
			   c->text);
	}
}

static void test_parse(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		char text[ADDR_STRLEN];
		struct addr a;
		bool ok = addr_parse(c->text, &a);

		if (!c->ok) {
			tap_ok(!ok, "addr_parse refuses '%s'", show(c->text));
			continue;
		}
		if (!tap_ok(ok, "addr_parse accepts '%s'", c->text))
			continue;
		addr_format(&a, text, sizeof(text));
		tap_is_str(text, c->canon, "addr_parse '%s' canonical",
			   c->text);
	}
}

static void test_parse_any(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(any_cases); i++) {
		const struct any_case *c = &any_cases[i];
		char text[ADDR_STRLEN];
		struct in_addr ia;
		struct addr a;
		bool overflow = !c->overflow; /* must be written */
		bool ok = addr_parse_ipv4_any(c->text, &a, &overflow);
		bool glibc = inet_aton(c->text, &ia) == 1;

		tap_ok(ok == c->ok && overflow == c->overflow,
		       "ipv4_any '%s': ok=%d overflow=%d", show(c->text),
		       c->ok, c->overflow);
		if (c->glibc_differs) {
			tap_ok(glibc && !ok,
			       "ipv4_any '%s': glibc accepts, we refuse",
			       show(c->text));
			continue;
		}
		if (!ok) {
			tap_ok(!glibc, "ipv4_any '%s': glibc refuses too",
			       show(c->text));
			continue;
		}
		addr_format(&a, text, sizeof(text));
		tap_is_str(text, c->canon, "ipv4_any '%s' value", c->text);
		tap_ok(glibc && memcmp(&ia, a.bytes, 4) == 0,
		       "ipv4_any '%s': same address as glibc", c->text);
	}
	tap_ok(!addr_parse_ipv4_any("0x", &(struct addr){ 0 }, NULL),
	       "ipv4_any accepts a NULL overflow pointer");
}

static void test_cidr(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cidr_cases); i++) {
		const struct cidr_case *c = &cidr_cases[i];
		char text[ADDR_STRLEN + 4];
		struct addr_cidr cidr;
		bool ok = addr_parse_cidr(c->text, &cidr);

		if (!c->ok) {
			tap_ok(!ok, "cidr refuses '%s'", c->text);
			continue;
		}
		if (!tap_ok(ok, "cidr accepts '%s'", c->text))
			continue;
		addr_cidr_format(&cidr, text, sizeof(text));
		tap_is_str(text, c->canon, "cidr '%s' canonical", c->text);
	}
	for (i = 0; i < ARRAY_SIZE(contains_cases); i++) {
		const struct contains_case *c = &contains_cases[i];
		struct addr_cidr cidr;
		struct addr a;

		if (!tap_ok(addr_parse_cidr(c->cidr, &cidr) &&
				    addr_parse(c->addr, &a),
			    "contains table row %zu parses", i))
			continue;
		tap_ok(addr_cidr_contains(&cidr, &a) == c->want,
		       "%s %s %s", c->cidr, c->want ? "contains" : "excludes",
		       c->addr);
	}
}

static void test_embedded(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(embed_cases); i++) {
		const struct embed_case *c = &embed_cases[i];
		char text[ADDR_STRLEN];
		struct addr a, v4;
		bool got;

		if (!must_parse(c->text, &a))
			continue;
		got = addr_embedded_ipv4(&a, &v4);
		if (!c->v4) {
			tap_ok(!got, "%s embeds no IPv4", c->text);
			continue;
		}
		if (!tap_ok(got && v4.family == AF_INET, "%s embeds IPv4",
			    c->text))
			continue;
		addr_format(&v4, text, sizeof(text));
		tap_is_str(text, c->v4, "%s embeds %s", c->text, c->v4);
	}
}

static void test_allowed(void)
{
	struct addr_cidr exempt[2];
	size_t i;

	if (!tap_ok(addr_parse_cidr("10.0.0.0/8", &exempt[0]) &&
			    addr_parse_cidr("fd00::/8", &exempt[1]),
		    "exemption list parses"))
		return;
	for (i = 0; i < ARRAY_SIZE(allowed_cases); i++) {
		const struct allowed_case *c = &allowed_cases[i];
		struct addr a;

		if (!must_parse(c->text, &a))
			continue;
		tap_ok(addr_is_allowed(&a, exempt, c->with_exempt ? 2 : 0) ==
			       c->want,
		       "%s is %s %s exemptions", c->text,
		       c->want ? "allowed" : "refused",
		       c->with_exempt ? "with" : "without");
	}
}

static void test_misc(void)
{
	struct addr a, b, c;
	bool distinct = true;
	int i, j;

	for (i = 0; i < ADDR_CLASS_COUNT; i++) {
		for (j = 0; j < i; j++) {
			if (strcmp(addr_class_to_string((enum addr_class)i),
				   addr_class_to_string((enum addr_class)j)) ==
			    0)
				distinct = false;
		}
		if (strcmp(addr_class_to_string((enum addr_class)i),
			   "unknown") == 0)
			distinct = false;
	}
	tap_ok(distinct, "every class has its own name");
	tap_is_str(addr_class_to_string(ADDR_CLASS_COUNT), "unknown",
		   "out-of-range class");
	tap_is_str(addr_class_to_string(ADDR_CLASS_GLOBAL), "global",
		   "global class name");

	addr_parse("1.2.3.4", &a);
	addr_parse("::ffff:1.2.3.4", &b);
	addr_parse("1.2.3.4", &c);
	tap_ok(addr_equal(&a, &c), "equal IPv4 addresses");
	tap_ok(!addr_equal(&a, &b), "IPv4 and its mapped form differ");
	addr_parse("1.2.3.5", &c);
	tap_ok(!addr_equal(&a, &c), "different IPv4 addresses");
}

struct sockaddr_case {
	const char *addr;
	uint16_t port;
	int family;
	unsigned int len;
};

static const struct sockaddr_case sockaddr_cases[] = {
	{ "198.18.0.10", 8080, AF_INET, sizeof(struct sockaddr_in) },
	{ "0.0.0.0", 1, AF_INET, sizeof(struct sockaddr_in) },
	{ "2001:db8::1", 443, AF_INET6, sizeof(struct sockaddr_in6) },
	{ "::ffff:127.0.0.1", 65535, AF_INET6, sizeof(struct sockaddr_in6) },
};

static void test_sockaddr(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_un un;
	struct addr a, back;
	uint16_t port = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sockaddr_cases); i++) {
		const struct sockaddr_case *sc = &sockaddr_cases[i];
		unsigned int len;

		ASSERT(addr_parse(sc->addr, &a));
		len = addr_to_sockaddr(&a, sc->port, &ss);
		tap_ok(len == sc->len && ss.ss_family == sc->family,
		       "%s: a sockaddr of its family and size", sc->addr);
		tap_ok(addr_from_sockaddr((struct sockaddr *)&ss, len, &back, &port) &&
			       addr_equal(&a, &back) && port == sc->port,
		       "%s port %u: back unchanged", sc->addr, sc->port);
		tap_ok(!addr_from_sockaddr((struct sockaddr *)&ss, len - 1, &back, NULL),
		       "%s: a short length is refused", sc->addr);
	}
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	tap_ok(!addr_from_sockaddr((struct sockaddr *)&un, sizeof(un), &back, NULL),
	       "an AF_UNIX address is not an IP address");
}

int main(void)
{
	test_classify();
	test_sockaddr();
	test_parse();
	test_parse_any();
	test_cidr();
	test_embedded();
	test_allowed();
	test_misc();
	return tap_done();
}
