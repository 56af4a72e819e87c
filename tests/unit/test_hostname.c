/* SPDX-License-Identifier: Apache-2.0
 * test_hostname.c - table tests of hostname.c: target normalisation (every
 * trick of docs/POLICY.md), CONNECT authorities, host rule parsing and
 * formatting, and the allow/deny decision.
 */
#include <stdio.h>
#include <string.h>

#include "hostname.h"
#include "tap.h"
#include "util.h"

#define E(x) HOSTNAME_##x

/* A printable rendering of @s (@len bytes) for a TAP description. Returns
 * one of a few rotating static buffers. */
static const char *show_n(const char *s, size_t len)
{
	static char bufs[4][96];
	static int next;
	char *out = bufs[next++ % 4];
	size_t n = 0, i;

	for (i = 0; i < len && n + 8 < sizeof(bufs[0]); i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f)
			n += (size_t)snprintf(out + n, 5, "\\x%02x", c);
		else
			out[n++] = (char)c;
	}
	if (i < len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

static const char *show(const char *s)
{
	return show_n(s, strlen(s));
}

/* Names built at run time: 63/64-byte labels and 253/254-byte names. */
static char label63[64], label64[65], name253[254], name253dot[255],
	name254[255];

static void build_long_names(void)
{
	size_t i;

	memset(label63, 'a', 63);
	memset(label64, 'b', 64);
	/* Three labels of 63 and one of 61 with three dots: 253 bytes. */
	for (i = 0; i < 253; i++)
		name253[i] = (i % 64 == 63) ? '.' : 'c';
	name253[253] = '\0';
	memcpy(name253dot, name253, 253);
	name253dot[253] = '.';
	name253dot[254] = '\0';
	memcpy(name254, name253, 253);
	name254[253] = 'c';
	name254[254] = '\0';
}

struct norm_case {
	const char *in;
	size_t len; /* 0: strlen(in) */
	enum hostname_error want;
	bool is_addr;
	const char *name;
};

static struct norm_case norm_cases[] = {
	/* Plain names, case and the trailing dot. */
	{ "example.com", 0, E(OK), false, "example.com" },
	{ "Example.COM", 0, E(OK), false, "example.com" },
	{ "example.com.", 0, E(OK), false, "example.com" },
	{ "EXAMPLE.COM.", 0, E(OK), false, "example.com" },
	{ "localhost", 0, E(OK), false, "localhost" },
	{ "_dmarc.example.com", 0, E(OK), false, "_dmarc.example.com" },
	{ "a_b.example.com", 0, E(OK), false, "a_b.example.com" },
	{ "a-b.example.com", 0, E(OK), false, "a-b.example.com" },
	{ "xn--bcher-kva.example", 0, E(OK), false, "xn--bcher-kva.example" },
	{ "a", 0, E(OK), false, "a" },
	{ "1a", 0, E(OK), false, "1a" },
	{ "0x1g", 0, E(OK), false, "0x1g" },
	{ "0xg.com", 0, E(OK), false, "0xg.com" },
	{ "123.example", 0, E(OK), false, "123.example" },
	{ "1.2.3.4.com", 0, E(OK), false, "1.2.3.4.com" },
	{ "foo.123a", 0, E(OK), false, "foo.123a" },
	{ "foo.0xz", 0, E(OK), false, "foo.0xz" },
	/* Empty things. */
	{ "", 0, E(EMPTY), false, NULL },
	{ ".", 0, E(EMPTY), false, NULL },
	{ "..", 0, E(LABEL_EMPTY), false, NULL },
	{ ".a", 0, E(LABEL_EMPTY), false, NULL },
	{ "a..b", 0, E(LABEL_EMPTY), false, NULL },
	{ "example.com..", 0, E(LABEL_EMPTY), false, NULL },
	/* Hyphens. */
	{ "-a.com", 0, E(HYPHEN), false, NULL },
	{ "a-.com", 0, E(HYPHEN), false, NULL },
	{ "a.-b.com", 0, E(HYPHEN), false, NULL },
	{ "a.com-", 0, E(HYPHEN), false, NULL },
	{ "-", 0, E(HYPHEN), false, NULL },
	/* Characters. */
	{ "exa mple.com", 0, E(BAD_CHAR), false, NULL },
	{ "example.com/", 0, E(BAD_CHAR), false, NULL },
	{ "exa*mple.com", 0, E(BAD_CHAR), false, NULL },
	{ "a\\b.com", 0, E(BAD_CHAR), false, NULL },
	{ "example.com:80", 0, E(BAD_CHAR), false, NULL },
	{ "example.com\r\n", 0, E(BAD_CHAR), false, NULL },
	{ "example.com\0.evil.com", 21, E(BAD_CHAR), false, NULL },
	{ "\0", 1, E(BAD_CHAR), false, NULL },
	{ "b\xc3\xbc" "cher.example", 0, E(NON_ASCII), false, NULL },
	{ "exa\x80mple.com", 0, E(NON_ASCII), false, NULL },
	{ "\xef\xbc\x8e" "com", 0, E(NON_ASCII), false, NULL },
	{ "exa%6dple.com", 0, E(PERCENT), false, NULL },
	{ "%2e", 0, E(PERCENT), false, NULL },
	{ "user@example.com", 0, E(USERINFO), false, NULL },
	{ "user:pass@example.com", 0, E(USERINFO), false, NULL },
	{ "example.com@evil.com", 0, E(USERINFO), false, NULL },
	{ "fe80::1%eth0", 0, E(ZONE_ID), false, NULL },
	{ "[fe80::1%25eth0]", 0, E(ZONE_ID), false, NULL },
	{ "[fe80::1%eth0]", 0, E(ZONE_ID), false, NULL },
	/* IPv6 and brackets. */
	{ "[::1]", 0, E(OK), true, "::1" },
	{ "[2001:DB8::1]", 0, E(OK), true, "2001:db8::1" },
	{ "[2001:db8:0:0:0:0:0:1]", 0, E(OK), true, "2001:db8::1" },
	{ "[::ffff:127.0.0.1]", 0, E(OK), true, "::ffff:127.0.0.1" },
	{ "[::]", 0, E(OK), true, "::" },
	{ "::1", 0, E(BAD_BRACKETS), false, NULL },
	{ "2001:db8::1", 0, E(BAD_BRACKETS), false, NULL },
	{ "[x.com]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[[x.com]]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[[::1]]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[127.0.0.1]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[", 0, E(BAD_BRACKETS), false, NULL },
	{ "[::1", 0, E(BAD_BRACKETS), false, NULL },
	{ "::1]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[::1]:80", 0, E(BAD_BRACKETS), false, NULL },
	{ "x[::1]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[::1]]", 0, E(BAD_BRACKETS), false, NULL },
	{ "[::g]", 0, E(BAD_IPV6), false, NULL },
	{ "[1:2:3:4:5:6:7:8:9]", 0, E(BAD_IPV6), false, NULL },
	{ "[::1 ]", 0, E(BAD_IPV6), false, NULL },
	{ "[:::::::::::::::::::::::::::::::::::::::::::::::::]", 0,
	  E(BAD_IPV6), false, NULL },
	/* IPv4 in every inet_aton notation is that address. */
	{ "127.0.0.1", 0, E(OK), true, "127.0.0.1" },
	{ "127.1", 0, E(OK), true, "127.0.0.1" },
	{ "2130706433", 0, E(OK), true, "127.0.0.1" },
	{ "0x7f.1", 0, E(OK), true, "127.0.0.1" },
	{ "0X7F.1", 0, E(OK), true, "127.0.0.1" },
	{ "0177.0.0.1", 0, E(OK), true, "127.0.0.1" },
	{ "0x7f.0.0.1", 0, E(OK), true, "127.0.0.1" },
	{ "127.0.0.1.", 0, E(OK), true, "127.0.0.1" },
	{ "0x7f.1.", 0, E(OK), true, "127.0.0.1" },
	{ "0", 0, E(OK), true, "0.0.0.0" },
	{ "1.2.3", 0, E(OK), true, "1.2.0.3" },
	{ "0x10", 0, E(OK), true, "0.0.0.16" },
	{ "0xa9fea9fe", 0, E(OK), true, "169.254.169.254" },
	{ "169.254.169.254", 0, E(OK), true, "169.254.169.254" },
	{ "4294967295", 0, E(OK), true, "255.255.255.255" },
	{ "8.8.8.8", 0, E(OK), true, "8.8.8.8" },
	/* Numeric-looking but not an address: denied, never resolved. */
	{ "4294967296", 0, E(BAD_IPV4), false, NULL },
	{ "256.1.1.1", 0, E(BAD_IPV4), false, NULL },
	{ "1.2.3.4.5", 0, E(BAD_IPV4), false, NULL },
	{ "1.2.3.4.5.", 0, E(BAD_IPV4), false, NULL },
	{ "foo.123", 0, E(BAD_IPV4), false, NULL },
	{ "example.0x10", 0, E(BAD_IPV4), false, NULL },
	{ "08", 0, E(BAD_IPV4), false, NULL },
	{ "0x", 0, E(BAD_IPV4), false, NULL },
	{ "1.0x", 0, E(BAD_IPV4), false, NULL },
	{ "0779.1", 0, E(BAD_IPV4), false, NULL },
	{ "99999999999999999999", 0, E(BAD_IPV4), false, NULL },
	/* Lengths (filled in by main()). */
	{ NULL, 0, E(OK), false, NULL }, /* label63 */
	{ NULL, 0, E(LABEL_TOO_LONG), false, NULL }, /* label64 */
	{ NULL, 0, E(OK), false, NULL }, /* name253 */
	{ NULL, 0, E(OK), false, NULL }, /* name253dot */
	{ NULL, 0, E(TOO_LONG), false, NULL }, /* name254 */
};

struct auth_case {
	const char *in;
	size_t len; /* 0: strlen(in) */
	enum hostname_error want;
	const char *name;
	unsigned int port;
};

static const struct auth_case auth_cases[] = {
	{ "example.com:443", 0, E(OK), "example.com", 443 },
	{ "EXAMPLE.com.:443", 0, E(OK), "example.com", 443 },
	{ "example.com:1", 0, E(OK), "example.com", 1 },
	{ "example.com:65535", 0, E(OK), "example.com", 65535 },
	{ "[::1]:8080", 0, E(OK), "::1", 8080 },
	{ "[2001:DB8::1]:443", 0, E(OK), "2001:db8::1", 443 },
	{ "127.1:80", 0, E(OK), "127.0.0.1", 80 },
	{ "0x7f.1:443", 0, E(OK), "127.0.0.1", 443 },
	{ "example.com", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:0", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:65536", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:99999", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:100000", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:+443", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:-1", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:0443", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:44 3", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:443 ", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:443:", 0, E(BAD_CHAR), NULL, 0 },
	{ "example.com:443\0", 16, E(BAD_CHAR), NULL, 0 },
	{ "example.com:http", 0, E(BAD_CHAR), NULL, 0 },
	{ "::1:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[::1]", 0, E(BAD_CHAR), NULL, 0 },
	{ "[::1]:", 0, E(BAD_CHAR), NULL, 0 },
	{ "[::1]443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[::1]]:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[[::1]]:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[x.com]:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[127.0.0.1]:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "[::1:443", 0, E(BAD_BRACKETS), NULL, 0 },
	{ "user@example.com:443", 0, E(USERINFO), NULL, 0 },
	{ "example.com:443@evil.com", 0, E(USERINFO), NULL, 0 },
	{ "[fe80::1%25eth0]:443", 0, E(ZONE_ID), NULL, 0 },
	{ "4294967296:80", 0, E(BAD_IPV4), NULL, 0 },
	{ ":443", 0, E(EMPTY), NULL, 0 },
	{ "", 0, E(EMPTY), NULL, 0 },
};

struct rule_case {
	const char *text;
	bool ok;
	enum host_rule_kind kind;
	const char *canon; /* host_rule_format; for a refusal, a substring
			      the reason must contain (or NULL) */
	int port;
};

#define K(x) HOST_RULE_##x
#define PD HOST_RULE_PORT_DEFAULT
#define PA HOST_RULE_PORT_ANY
#define BAD(t) { t, false, K(EXACT), NULL, 0 }
#define BADM(t, m) { t, false, K(EXACT), m, 0 }

static const struct rule_case rule_cases[] = {
	{ "example.com", true, K(EXACT), "example.com", PD },
	{ "Example.COM.", true, K(EXACT), "example.com", PD },
	{ "*.example.com", true, K(BELOW), "*.example.com", PD },
	{ "*.Example.com.", true, K(BELOW), "*.example.com", PD },
	{ "**.example.com", true, K(SELF_BELOW), "**.example.com", PD },
	{ "*", true, K(ANY), "*", PD },
	{ "*:443", true, K(ANY), "*:443", 443 },
	{ "*:*", true, K(ANY), "*:*", PA },
	{ "example.com:443", true, K(EXACT), "example.com:443", 443 },
	{ "example.com:*", true, K(EXACT), "example.com:*", PA },
	{ "*.x.com.:8443", true, K(BELOW), "*.x.com:8443", 8443 },
	{ "registry.npmjs.org:443", true, K(EXACT), "registry.npmjs.org:443",
	  443 },
	{ "203.0.113.7", true, K(CIDR), "203.0.113.7", PD },
	{ "203.0.113.7:443", true, K(CIDR), "203.0.113.7:443", 443 },
	{ "10.0.0.0/8", true, K(CIDR), "10.0.0.0/8", PD },
	{ "10.0.0.0/8:443", true, K(CIDR), "10.0.0.0/8:443", 443 },
	{ "2001:db8::/32", true, K(CIDR), "2001:db8::/32", PD },
	{ "[2001:db8::/32]:443", true, K(CIDR), "[2001:db8::/32]:443", 443 },
	{ "[::1]:8080", true, K(CIDR), "[::1]:8080", 8080 },
	{ "[::1]", true, K(CIDR), "::1", PD },
	{ "::1", true, K(CIDR), "::1", PD },
	{ "[2001:DB8::1]:*", true, K(CIDR), "[2001:db8::1]:*", PA },
	{ "127.1", true, K(CIDR), "127.0.0.1", PD },
	{ "2130706433:443", true, K(CIDR), "127.0.0.1:443", 443 },
	{ "0x7f.1", true, K(CIDR), "127.0.0.1", PD },
	{ "127.0.0.1.", true, K(CIDR), "127.0.0.1", PD },
	BAD(""),
	BAD("foo*.x.com"),
	BAD("a.*.x.com"),
	BAD("*x.com"),
	BAD("x.*"),
	BAD("*."),
	BAD("**"),
	BAD("**."),
	BAD("***.x.com"),
	BADM("*.*.x.com", "wildcard"),
	BADM("*.127.0.0.1", "cannot precede an address"),
	BAD("**.127.1"),
	BAD("*.2130706433"),
	BAD("*.10.0.0.0/8"),
	BAD("*.::1"),
	BAD("*.[::1]"),
	BADM("x.com:0", "port"),
	BAD("x.com:"),
	BAD("x.com:65536"),
	BAD("x.com:0443"),
	BAD("x.com:+443"),
	BAD("x.com:44x"),
	BAD("x.com:**"),
	BAD(":443"),
	BAD("x.com:443:80"),
	BAD("2001:db8::/32:443"),
	BADM("10.0.0.1/8", "host bits"),
	BAD("10.0.0.0/08"),
	BAD("127.1/8"),
	BAD("[10.0.0.1]:80"),
	BAD("[10.0.0.0/8]"),
	BAD("[x.com]:443"),
	BAD("[::1"),
	BAD("[::1]x"),
	BAD("[::1]:"),
	BAD("[[::1]]"),
	BAD("[]"),
	BAD("exa mple.com"),
	BADM("user@x.com", "user-info"),
	BADM("b\xc3\xbc" "cher.de", "'b\\xc3\\xbccher.de': non-ASCII"),
	BADM("exa%6dple.com", "percent"),
	BADM("foo.123", "numeric"),
	BAD("4294967296"),
	BAD("-x.com"),
	BAD("x..com"),
	BADM("fe80::1%eth0", "zone id"),
	BADM("[fe80::1%25eth0]:443", "zone id"),
	BADM("x.com\n", "'x.com\\x0a'"),
	BADM("x.com\r\nHost: evil", "\\x0d\\x0a"),
	BADM("it's.com", "'it\\'s.com'"),
	BADM("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	     "...': longer than"),
};

/* Rule lists are NULL-terminated; targets are request hosts. */
struct decide_case {
	const char *allow[4];
	const char *deny[4];
	const char *target;
	unsigned int port;
	enum host_verdict want;
	int index;
};

#define ALLOW HOST_VERDICT_ALLOW
#define DENY HOST_VERDICT_DENY_RULE
#define DEFAULT HOST_VERDICT_DENY_DEFAULT

static const struct decide_case decide_cases[] = {
	/* Exact names, ports from egress.ports = {443, 80}. */
	{ { "example.com" }, { NULL }, "example.com", 443, ALLOW, 0 },
	{ { "example.com" }, { NULL }, "example.com", 80, ALLOW, 0 },
	{ { "example.com" }, { NULL }, "EXAMPLE.COM.", 443, ALLOW, 0 },
	{ { "example.com" }, { NULL }, "example.com", 8080, DEFAULT, -1 },
	{ { "example.com" }, { NULL }, "www.example.com", 443, DEFAULT, -1 },
	{ { "example.com" }, { NULL }, "example.com.evil.com", 443, DEFAULT,
	  -1 },
	{ { "example.com:8080" }, { NULL }, "example.com", 8080, ALLOW, 0 },
	{ { "example.com:8080" }, { NULL }, "example.com", 443, DEFAULT, -1 },
	/* *.x.com: strictly below, on a label boundary. */
	{ { "*.x.com" }, { NULL }, "a.x.com", 443, ALLOW, 0 },
	{ { "*.x.com" }, { NULL }, "a.b.x.com", 443, ALLOW, 0 },
	{ { "*.x.com" }, { NULL }, "x.com", 443, DEFAULT, -1 },
	{ { "*.x.com" }, { NULL }, "evilx.com", 443, DEFAULT, -1 },
	{ { "*.x.com" }, { NULL }, "a.evilx.com", 443, DEFAULT, -1 },
	{ { "*.x.com" }, { NULL }, "x.com.evil.com", 443, DEFAULT, -1 },
	{ { "*.x.com" }, { NULL }, "a.x.com.evil.com", 443, DEFAULT, -1 },
	{ { "*.x.com" }, { NULL }, "ax.com", 443, DEFAULT, -1 },
	{ { "*.com" }, { NULL }, "com", 443, DEFAULT, -1 },
	/* **.x.com: itself and below. */
	{ { "**.x.com" }, { NULL }, "x.com", 443, ALLOW, 0 },
	{ { "**.x.com" }, { NULL }, "a.b.x.com", 443, ALLOW, 0 },
	{ { "**.x.com" }, { NULL }, "evilx.com", 443, DEFAULT, -1 },
	{ { "**.x.com" }, { NULL }, "x.co", 443, DEFAULT, -1 },
	/* *: every name, never an address, only egress.ports. */
	{ { "*" }, { NULL }, "anything.example", 443, ALLOW, 0 },
	{ { "*" }, { NULL }, "anything.example", 22, DEFAULT, -1 },
	{ { "*" }, { NULL }, "127.0.0.1", 443, DEFAULT, -1 },
	{ { "*" }, { NULL }, "2130706433", 443, DEFAULT, -1 },
	{ { "*" }, { NULL }, "[::1]", 443, DEFAULT, -1 },
	{ { "*:*" }, { NULL }, "anything.example", 22, ALLOW, 0 },
	{ { "*:*" }, { NULL }, "8.8.8.8", 443, DEFAULT, -1 },
	{ { "*:*" }, { NULL }, "anything.example", 0, DEFAULT, -1 },
	/* Domain rules never match IP literals, and vice versa. */
	{ { "example.com" }, { NULL }, "127.0.0.1", 443, DEFAULT, -1 },
	{ { "localhost" }, { NULL }, "127.0.0.1", 443, DEFAULT, -1 },
	{ { "127.0.0.1" }, { NULL }, "localhost", 443, DEFAULT, -1 },
	/* Deny beats allow, whatever the order. */
	{ { "*" }, { "gist.github.com" }, "gist.github.com", 443, DENY, 0 },
	{ { "*" }, { "gist.github.com" }, "api.github.com", 443, ALLOW, 0 },
	{ { "x.com:443" }, { "x.com" }, "x.com", 443, DENY, 0 },
	{ { "x.com:*" }, { "x.com" }, "x.com", 8443, DENY, 0 },
	{ { "x.com:*" }, { "x.com:22" }, "x.com", 22, DENY, 0 },
	{ { "x.com:*" }, { "x.com:22" }, "x.com", 443, ALLOW, 0 },
	{ { "*" }, { "a.com", "*.x.com" }, "b.x.com", 443, DENY, 1 },
	{ { "*" }, { "a.com", "**.x.com" }, "x.com", 443, DENY, 1 },
	{ { "**.x.com" }, { "*.x.com" }, "x.com", 443, ALLOW, 0 },
	{ { "a.com", "b.com", "**.b.com" }, { NULL }, "c.b.com", 443, ALLOW,
	  2 },
	{ { "a.com", "b.com", "**.b.com" }, { NULL }, "b.com", 443, ALLOW, 1 },
	/* Address rules, every IPv4 notation, IPv4-mapped form. */
	{ { "10.0.0.0/8" }, { NULL }, "10.1.2.3", 443, ALLOW, 0 },
	{ { "10.0.0.0/8" }, { NULL }, "0xa.1", 443, ALLOW, 0 },
	{ { "10.0.0.0/8" }, { NULL }, "167772161", 443, ALLOW, 0 },
	{ { "10.0.0.0/8" }, { NULL }, "[::ffff:10.0.0.1]", 443, ALLOW, 0 },
	{ { "10.0.0.0/8" }, { NULL }, "11.0.0.1", 443, DEFAULT, -1 },
	{ { "10.0.0.0/8" }, { NULL }, "ten.example", 443, DEFAULT, -1 },
	{ { "0.0.0.0/0" }, { "127.0.0.1" }, "2130706433", 443, DENY, 0 },
	{ { "0.0.0.0/0" }, { "127.0.0.1" }, "0x7f.1", 443, DENY, 0 },
	{ { "0.0.0.0/0" }, { "127.0.0.1" }, "0177.0.0.1", 443, DENY, 0 },
	{ { "0.0.0.0/0" }, { "127.0.0.1" }, "[::ffff:127.0.0.1]", 443, DENY,
	  0 },
	{ { "::/0" }, { "::ffff:127.0.0.1" }, "127.0.0.1", 443, DENY, 0 },
	{ { "0.0.0.0/0" }, { "127.0.0.1" }, "127.0.0.2", 443, ALLOW, 0 },
	{ { "[2001:db8::/32]:443" }, { NULL }, "[2001:db8::1]", 443, ALLOW,
	  0 },
	{ { "[2001:db8::/32]:443" }, { NULL }, "[2001:db8::1]", 80, DEFAULT,
	  -1 },
	{ { "[2001:db8::/32]:443" }, { NULL }, "[2001:db9::1]", 443, DEFAULT,
	  -1 },
	{ { "203.0.113.7:443" }, { NULL }, "203.0.113.7", 443, ALLOW, 0 },
	{ { "203.0.113.7:443" }, { NULL }, "203.0.113.8", 443, DEFAULT, -1 },
	/* Nothing to match: fail closed. */
	{ { NULL }, { NULL }, "example.com", 443, DEFAULT, -1 },
	{ { NULL }, { "example.com" }, "example.com", 443, DENY, 0 },
};

static void test_normalise(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(norm_cases); i++) {
		const struct norm_case *c = &norm_cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		struct host_target t;
		enum hostname_error e = hostname_normalise(c->in, len, &t);
		const char *what = show_n(c->in, len);

		tap_is_str(hostname_error_to_string(e),
			   hostname_error_to_string(c->want), "normalise '%s'",
			   what);
		if (c->want != HOSTNAME_OK || e != HOSTNAME_OK)
			continue;
		tap_ok(t.is_addr == c->is_addr, "'%s' is %s", what,
		       c->is_addr ? "an address" : "a name");
		tap_is_str(t.name, c->name ? c->name : c->in,
			   "'%s' normalised", what);
	}
	tap_is_int(hostname_normalise(NULL, 0, &(struct host_target){ 0 }),
		   HOSTNAME_EMPTY, "NULL host is empty");
}

static void test_authority(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(auth_cases); i++) {
		const struct auth_case *c = &auth_cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		const char *what = show_n(c->in, len);
		struct host_target t;
		uint16_t port = 7;
		enum hostname_error e =
			hostname_parse_authority(c->in, len, &t, &port);

		tap_is_str(hostname_error_to_string(e),
			   hostname_error_to_string(c->want), "authority '%s'",
			   what);
		if (c->want != HOSTNAME_OK) {
			tap_is_int(port, 0, "authority '%s': no port", what);
			continue;
		}
		if (e != HOSTNAME_OK)
			continue;
		tap_is_str(t.name, c->name, "authority '%s' host", what);
		tap_is_int(port, c->port, "authority '%s' port", what);
	}
}

/* Field by field: struct padding is not part of a rule. */
static bool rules_equal(const struct host_rule *a, const struct host_rule *b)
{
	if (a->kind != b->kind || a->port != b->port ||
	    strcmp(a->name, b->name) != 0)
		return false;
	return a->kind != HOST_RULE_CIDR ||
	       (a->cidr.prefix == b->cidr.prefix &&
		addr_equal(&a->cidr.base, &b->cidr.base));
}

static void test_rules(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(rule_cases); i++) {
		const struct rule_case *c = &rule_cases[i];
		char err[256], text[HOSTNAME_MAX + 64], err2[256];
		struct host_rule r, again;
		bool ok = host_rule_parse(c->text, &r, err, sizeof(err));

		if (!c->ok) {
			tap_ok(!ok && err[0] && !strchr(err, '\n') &&
				       (!c->canon || strstr(err, c->canon)),
			       "rule '%s' refused (%s)", show(c->text),
			       ok ? "accepted" : show(err));
			continue;
		}
		if (!tap_ok(ok, "rule '%s' accepted%s%s", c->text,
			    ok ? "" : ": ", ok ? "" : err))
			continue;
		host_rule_format(&r, text, sizeof(text));
		tap_ok(r.kind == c->kind && r.port == c->port,
		       "rule '%s' kind %d port %d", c->text, (int)c->kind,
		       c->port);
		tap_is_str(text, c->canon, "rule '%s' canonical", c->text);
		tap_ok(host_rule_parse(text, &again, err2, sizeof(err2)) &&
			       rules_equal(&r, &again),
		       "rule '%s' re-parses to the same rule", c->text);
	}
	{
		char err[256] = "x";
		struct host_rule r;

		host_rule_parse("*.x.com", &r, err, sizeof(err));
		tap_is_str(err, "", "err is cleared on success");
		tap_is_str(r.name, "x.com", "*.x.com keeps the suffix only");
		host_rule_parse("**.x.com", &r, err, sizeof(err));
		tap_is_str(r.name, "x.com", "**.x.com keeps the suffix only");
	}
}

static bool parse_list(const char *const *texts, struct host_rule *out,
		       size_t *n)
{
	char err[256];

	for (*n = 0; *n < 4 && texts[*n]; (*n)++) {
		if (!host_rule_parse(texts[*n], &out[*n], err, sizeof(err))) {
			tap_ok(false, "test table: rule '%s': %s", texts[*n],
			       err);
			return false;
		}
	}
	return true;
}

static void test_decide(void)
{
	static const uint16_t ports[] = { 443, 80 };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(decide_cases); i++) {
		const struct decide_case *c = &decide_cases[i];
		struct host_rule allow[4], deny[4];
		size_t nallow, ndeny;
		struct host_target t;
		enum host_verdict v;
		int index = 99;

		if (!parse_list(c->allow, allow, &nallow) ||
		    !parse_list(c->deny, deny, &ndeny))
			continue;
		if (!tap_ok(hostname_normalise(c->target, strlen(c->target),
					       &t) == HOSTNAME_OK,
			    "test table: target '%s'", c->target))
			continue;
		v = host_decide(allow, nallow, deny, ndeny, ports,
				ARRAY_SIZE(ports), &t, (uint16_t)c->port,
				&index);
		tap_ok(v == c->want && index == c->index,
		       "decide row %zu: %s:%u -> %d[%d] (got %d[%d])", i,
		       c->target, c->port, (int)c->want, c->index, (int)v,
		       index);
	}
}

/* host_rule_matches directly: is_deny widens a port-less rule. */
static void test_matches(void)
{
	static const uint16_t ports[] = { 443 };
	struct host_target t;
	struct host_rule r;
	char err[128];

	if (!tap_ok(host_rule_parse("x.com", &r, err, sizeof(err)) &&
			    hostname_normalise("x.com", 5, &t) == HOSTNAME_OK,
		    "matches fixtures parse"))
		return;
	tap_ok(host_rule_matches(&r, &t, 443, ports, 1, false),
	       "allow x.com on egress port");
	tap_ok(!host_rule_matches(&r, &t, 22, ports, 1, false),
	       "allow x.com not on other port");
	tap_ok(host_rule_matches(&r, &t, 22, ports, 1, true),
	       "deny x.com on every port");
	tap_ok(!host_rule_matches(&r, &t, 443, NULL, 0, false),
	       "allow without egress.ports matches nothing");
	tap_ok(host_decide(&r, 1, NULL, 0, ports, 1, &t, 443, NULL) ==
		       HOST_VERDICT_ALLOW,
	       "host_decide accepts a NULL index");
}

static void test_strings(void)
{
	bool distinct = true;
	int i, j;

	for (i = 0; i < HOSTNAME_ERROR_COUNT; i++) {
		for (j = 0; j < i; j++) {
			if (strcmp(hostname_error_to_string(
					   (enum hostname_error)i),
				   hostname_error_to_string(
					   (enum hostname_error)j)) == 0)
				distinct = false;
		}
	}
	tap_ok(distinct, "every hostname error has its own text");
	tap_is_str(hostname_error_to_string(HOSTNAME_ERROR_COUNT),
		   "unknown error", "out-of-range error");
}

int main(void)
{
	size_t n = ARRAY_SIZE(norm_cases);

	build_long_names();
	norm_cases[n - 5].in = label63;
	norm_cases[n - 4].in = label64;
	norm_cases[n - 3].in = name253;
	norm_cases[n - 2].in = name253dot;
	norm_cases[n - 2].name = name253;
	norm_cases[n - 1].in = name254;
	test_normalise();
	test_authority();
	test_rules();
	test_decide();
	test_matches();
	test_strings();
	return tap_done();
}
