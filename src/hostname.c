/* SPDX-License-Identifier: Apache-2.0
 * hostname.c - target normalisation and the allow/deny matcher.
 *
 * DOC: Theory of Operation
 *
 * Every egress decision compares a target the agent chose with rules the
 * policy author wrote. Both go through the same normaliser, so a rule and a
 * target that denote the same host have the same bytes, and the matcher is
 * a plain string/CIDR comparison on label boundaries.
 *
 * Normalisation (hostname_normalise) refuses rather than repairs. A target
 * is exactly one of:
 *  - an IPv6 literal in exactly one pair of brackets;
 *  - an IPv4 address in any notation glibc's inet_aton() reads ("127.1",
 *    "0x7f.1", "2130706433", with or without one trailing dot): some parser
 *    on the way to the wire would read it as that address, so it IS that
 *    address and is matched only by address rules;
 *  - a DNS name: ASCII lowercased, one trailing dot removed, labels of 1..63
 *    bytes from a-z 0-9 - _ without a leading or trailing hyphen, at most
 *    253 bytes.
 * Everything else is refused, with the most specific reason we can give
 * (user-info, percent-escape, zone id, non-ASCII before a generic "bad
 * character"). A name whose last label looks like a number ("256.1.1.1",
 * "4294967296", "1.2.3.4.5", "foo.123", "0x") is refused as HOSTNAME_BAD_IPV4
 * rather than resolved: parsers disagree about such strings (the WHATWG URL
 * parser refuses them, some resolvers read them as numbers), and no real
 * top-level domain is numeric (RFC 3696 §2), so denying costs nothing.
 *
 * Rules (host_rule_parse) are NAME, *.NAME (strictly below), **.NAME (itself
 * and below), * (every name, never an address) or an address/CIDR, each with
 * an optional ":PORT" / ":*". A bare IPv6 rule cannot carry a port (the
 * colon would be ambiguous); "[IPv6]:PORT" can. Wildcards are only ever the
 * whole leftmost label. A rule that normalises to an address ("127.1") is
 * that address rule, exactly as the same text would be as a target.
 *
 * Matching (host_rule_matches, host_decide): deny rules are consulted first
 * and any match wins; then the first matching allow rule; otherwise the
 * default deny. Name rules never match address targets and address rules
 * never match names. An IPv4 address and its IPv4-mapped IPv6 form are the
 * same destination, so an address rule matches both. A rule without a port
 * allows only egress.ports but denies every port.
 */
#include "hostname.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util.h"

static const char *const error_names[] = {
	[HOSTNAME_OK] = "ok",
	[HOSTNAME_EMPTY] = "empty host",
	[HOSTNAME_TOO_LONG] = "host name longer than 253 bytes",
	[HOSTNAME_LABEL_EMPTY] = "empty label in host name",
	[HOSTNAME_LABEL_TOO_LONG] = "label longer than 63 bytes in host name",
	[HOSTNAME_BAD_CHAR] = "character outside a-z 0-9 - _ in host name",
	[HOSTNAME_HYPHEN] = "label starts or ends with '-' in host name",
	[HOSTNAME_NON_ASCII] = "non-ASCII host name (IDNs must be punycode)",
	[HOSTNAME_PERCENT] = "percent-escape in host name",
	[HOSTNAME_USERINFO] = "user-info ('@') in host",
	[HOSTNAME_ZONE_ID] = "IPv6 zone id in host",
	[HOSTNAME_BAD_BRACKETS] =
		"brackets must enclose exactly one IPv6 literal",
	[HOSTNAME_BAD_IPV6] = "invalid IPv6 literal in brackets",
	[HOSTNAME_BAD_IPV4] = "ambiguous numeric host (invalid IPv4 notation)",
};
static_assert(ARRAY_SIZE(error_names) == HOSTNAME_ERROR_COUNT,
	      "error_names out of sync with enum hostname_error");

const char *hostname_error_to_string(enum hostname_error e)
{
	if ((unsigned int)e >= HOSTNAME_ERROR_COUNT || !error_names[e])
		return "unknown error";
	return error_names[e];
}

/* ------------------------------------------------------------------ */
/* Normalisation                                                      */
/* ------------------------------------------------------------------ */

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || util_is_digit(c) || c == '-' || c == '_' ||
	       c == '.';
}

/* The reasons that hold wherever they occur in the string, most specific
 * first: they tell the user what the agent tried (smuggle credentials, an
 * escape, an interface) better than "bad character" would. */
static enum hostname_error scan_bytes(const char *in, size_t len)
{
	bool at = false, pct = false, v6ish = false, high = false,
	     nul = false;
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '@')
			at = true;
		else if (c == '%')
			pct = true;
		else if (c == ':' || c == '[' || c == ']')
			v6ish = true;
		else if (c >= 0x80)
			high = true;
		else if (c == '\0')
			nul = true;
	}
	if (at)
		return HOSTNAME_USERINFO;
	if (pct)
		return v6ish ? HOSTNAME_ZONE_ID : HOSTNAME_PERCENT;
	if (high)
		return HOSTNAME_NON_ASCII;
	if (nul)
		return HOSTNAME_BAD_CHAR;
	return HOSTNAME_OK;
}

static void set_addr_target(struct host_target *out, const struct addr *a)
{
	out->is_addr = true;
	out->addr = *a;
	addr_format(a, out->name, sizeof(out->name));
}

static enum hostname_error normalise_bracketed(const char *in, size_t len,
					       struct host_target *out)
{
	char buf[ADDR_STRLEN];
	const char *inner = in + 1;
	struct addr a;
	size_t n;

	if (len < 2 || in[0] != '[' || in[len - 1] != ']')
		return HOSTNAME_BAD_BRACKETS;
	n = len - 2;
	if (memchr(inner, '[', n) || memchr(inner, ']', n))
		return HOSTNAME_BAD_BRACKETS;
	/* "[x.com]", "[127.0.0.1]", "[]": brackets around a non-IPv6 thing
	 * are a parser-confusion attempt, not a typo of an IPv6 literal. */
	if (!memchr(inner, ':', n))
		return HOSTNAME_BAD_BRACKETS;
	if (n >= sizeof(buf))
		return HOSTNAME_BAD_IPV6;
	memcpy(buf, inner, n);
	buf[n] = '\0';
	if (!addr_parse(buf, &a) || a.family != AF_INET6)
		return HOSTNAME_BAD_IPV6;
	set_addr_target(out, &a);
	return HOSTNAME_OK;
}

/* All digits, or "0x" and hex digits: the last label of something a URL
 * parser or resolver may read as a number (WHATWG "ends in a number"). */
static bool numeric_label(const char *l, size_t n)
{
	size_t i = 0;

	if (n >= 2 && l[0] == '0' && l[1] == 'x') {
		for (i = 2; i < n; i++) {
			if (!util_is_digit(l[i]) && !(l[i] >= 'a' && l[i] <= 'f'))
				return false;
		}
		return true;
	}
	if (n == 0)
		return false;
	for (i = 0; i < n; i++) {
		if (!util_is_digit(l[i]))
			return false;
	}
	return true;
}

/* @buf holds @n bytes of valid characters. Checks each label; on success
 * *last points at the last label. */
static enum hostname_error check_labels(const char *buf, size_t n,
					const char **last, size_t *lastlen)
{
	size_t start = 0, i;

	for (i = 0; i <= n; i++) {
		size_t llen;

		if (i < n && buf[i] != '.')
			continue;
		llen = i - start;
		if (llen == 0)
			return HOSTNAME_LABEL_EMPTY;
		if (llen > 63)
			return HOSTNAME_LABEL_TOO_LONG;
		if (buf[start] == '-' || buf[i - 1] == '-')
			return HOSTNAME_HYPHEN;
		*last = buf + start;
		*lastlen = llen;
		start = i + 1;
	}
	return HOSTNAME_OK;
}

static enum hostname_error normalise_name(const char *in, size_t len,
					  struct host_target *out)
{
	char buf[HOSTNAME_MAX + 2];
	const char *last = NULL;
	size_t n = len, i, lastlen = 0;
	enum hostname_error e;
	bool overflow;
	struct addr a;

	/* One trailing dot may still be removed below, hence MAX + 1. */
	if (n > HOSTNAME_MAX + 1)
		return HOSTNAME_TOO_LONG;
	for (i = 0; i < n; i++)
		buf[i] = util_ascii_lower(in[i]);
	if (n > 0 && buf[n - 1] == '.')
		n--;
	buf[n] = '\0';
	if (n == 0)
		return HOSTNAME_EMPTY;
	if (n > HOSTNAME_MAX)
		return HOSTNAME_TOO_LONG;
	for (i = 0; i < n; i++) {
		if (is_name_char(buf[i]))
			continue;
		/* An unbracketed IPv6 literal: say what is wrong with it. */
		if (strchr(buf, ':') && addr_parse(buf, &a) &&
		    a.family == AF_INET6)
			return HOSTNAME_BAD_BRACKETS;
		return HOSTNAME_BAD_CHAR;
	}
	if (addr_parse_ipv4_any(buf, &a, &overflow)) {
		set_addr_target(out, &a);
		return HOSTNAME_OK;
	}
	if (overflow)
		return HOSTNAME_BAD_IPV4;
	e = check_labels(buf, n, &last, &lastlen);
	if (e != HOSTNAME_OK)
		return e;
	if (numeric_label(last, lastlen))
		return HOSTNAME_BAD_IPV4;
	memcpy(out->name, buf, n + 1);
	return HOSTNAME_OK;
}

enum hostname_error hostname_normalise(const char *in, size_t len,
				       struct host_target *out)
{
	enum hostname_error e;

	memset(out, 0, sizeof(*out));
	if (!in || len == 0)
		return HOSTNAME_EMPTY;
	e = scan_bytes(in, len);
	if (e == HOSTNAME_OK) {
		if (memchr(in, '[', len) || memchr(in, ']', len))
			e = normalise_bracketed(in, len, out);
		else
			e = normalise_name(in, len, out);
	}
	if (e != HOSTNAME_OK)
		memset(out, 0, sizeof(*out));
	return e;
}

/* Decimal 1..65535 without sign or leading zero: one spelling per port. */
static bool parse_port(const char *p, size_t n, unsigned int *out)
{
	unsigned int v = 0;
	size_t i;

	if (n == 0 || n > 5 || p[0] == '0')
		return false;
	for (i = 0; i < n; i++) {
		if (!util_is_digit(p[i]))
			return false;
		v = v * 10 + (unsigned int)(p[i] - '0');
	}
	if (v > 65535)
		return false;
	*out = v;
	return true;
}

enum hostname_error hostname_parse_authority(const char *in, size_t len,
					     struct host_target *out,
					     uint16_t *port)
{
	enum hostname_error e;
	unsigned int p;
	size_t hlen;

	memset(out, 0, sizeof(*out));
	*port = 0;
	if (!in || len == 0)
		return HOSTNAME_EMPTY;
	e = scan_bytes(in, len);
	if (e != HOSTNAME_OK)
		return e;
	if (in[0] == '[') {
		const char *close = memchr(in, ']', len);

		if (!close)
			return HOSTNAME_BAD_BRACKETS;
		hlen = (size_t)(close - in) + 1;
		/* "[::1]]:80", "[::1]x" */
		if (hlen < len && in[hlen] != ':')
			return HOSTNAME_BAD_BRACKETS;
	} else {
		const char *colon = memrchr(in, ':', len);

		/* An unbracketed IPv6 literal splits at its last colon and
		 * the host part is then refused as BAD_BRACKETS/BAD_CHAR. */
		hlen = colon ? (size_t)(colon - in) : len;
	}
	e = hostname_normalise(in, hlen, out);
	if (e != HOSTNAME_OK)
		return e;
	if (hlen == len || !parse_port(in + hlen + 1, len - hlen - 1, &p) ||
	    p == 0) {
		memset(out, 0, sizeof(*out));
		return HOSTNAME_BAD_CHAR;
	}
	*port = (uint16_t)p;
	return HOSTNAME_OK;
}

/* ------------------------------------------------------------------ */
/* Rules                                                              */
/* ------------------------------------------------------------------ */

/* Long enough for any valid rule ("**." + 253 + ":65535"); longer input
 * is refused before any copy. */
#define RULE_TEXT_MAX (HOSTNAME_MAX + 16)

__attribute__((format(printf, 3, 4))) static bool
rule_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* clang-14's analyzer misreads x86-64's array-typed va_list here. */
	vsnprintf(err, errlen, fmt, ap); /* NOLINT(clang-analyzer-valist.*) */
	va_end(ap);
	return false;
}

/* @text made printable for a one-line message: bytes outside printable
 * ASCII become \xNN, quotes and backslashes are escaped, and long input is
 * cut with "...". The rule text comes from a policy file and may hold
 * anything JSON can carry, including newlines. */
static void render(const char *text, char *out, size_t outlen)
{
	size_t n = 0;

	for (; *text; text++) {
		unsigned char c = (unsigned char)*text;
		char piece[5];
		size_t plen;

		if (c < 0x20 || c >= 0x7f)
			plen = (size_t)snprintf(piece, sizeof(piece), "\\x%02x",
						c);
		else if (c == '\'' || c == '\\')
			plen = (size_t)snprintf(piece, sizeof(piece), "\\%c",
						c);
		else
			plen = (size_t)snprintf(piece, sizeof(piece), "%c", c);
		if (n + plen + 4 > outlen) {
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		memcpy(out + n, piece, plen);
		n += plen;
	}
	out[n] = '\0';
}

static void cidr_full(struct addr_cidr *c, const struct addr *a)
{
	memset(c, 0, sizeof(*c));
	c->base = *a;
	c->prefix = a->family == AF_INET ? 32 : 128;
}

/* The NAME after "*." or "**.". */
static bool parse_wild_suffix(const char *text, const char *suffix,
			      struct host_rule *out, char *err, size_t errlen)
{
	struct host_target t;
	enum hostname_error e;

	if (strchr(suffix, '*'))
		return rule_error(err, errlen,
				  "'%s': a wildcard may only be the whole "
				  "leftmost label",
				  text);
	if (strchr(suffix, '/') || strchr(suffix, ':'))
		return rule_error(err, errlen,
				  "'%s': a wildcard cannot precede an address",
				  text);
	e = hostname_normalise(suffix, strlen(suffix), &t);
	if (e != HOSTNAME_OK)
		return rule_error(err, errlen, "'%s': %s", text,
				  hostname_error_to_string(e));
	if (t.is_addr)
		return rule_error(err, errlen,
				  "'%s': a wildcard cannot precede an address",
				  text);
	memcpy(out->name, t.name, sizeof(out->name));
	return true;
}

static bool parse_rule_host(const char *text, const char *host,
			    bool bracketed, struct host_rule *out, char *err,
			    size_t errlen)
{
	struct host_target t;
	enum hostname_error e;
	struct addr a;

	/* User-info, escapes, zone ids and non-ASCII get their own reason
	 * wherever they are, as they do in targets. */
	e = scan_bytes(host, strlen(host));
	if (e != HOSTNAME_OK)
		return rule_error(err, errlen, "'%s': %s", text,
				  hostname_error_to_string(e));
	if (bracketed) {
		if (!addr_parse_cidr(host, &out->cidr) ||
		    out->cidr.base.family != AF_INET6)
			return rule_error(err, errlen,
					  "'%s': brackets must enclose an IPv6 "
					  "address or CIDR",
					  text);
		out->kind = HOST_RULE_CIDR;
		return true;
	}
	if (strcmp(host, "*") == 0) {
		out->kind = HOST_RULE_ANY;
		return true;
	}
	if (strncmp(host, "**.", 3) == 0) {
		out->kind = HOST_RULE_SELF_BELOW;
		return parse_wild_suffix(text, host + 3, out, err, errlen);
	}
	if (strncmp(host, "*.", 2) == 0) {
		out->kind = HOST_RULE_BELOW;
		return parse_wild_suffix(text, host + 2, out, err, errlen);
	}
	if (strchr(host, '*'))
		return rule_error(err, errlen,
				  "'%s': a wildcard may only be the whole "
				  "leftmost label ('*.NAME' or '**.NAME')",
				  text);
	if (strchr(host, '/')) {
		if (!addr_parse_cidr(host, &out->cidr))
			return rule_error(err, errlen,
					  "'%s': invalid CIDR (strict address, "
					  "prefix without leading zero, host "
					  "bits zero; an IPv6 CIDR with a port "
					  "needs brackets)",
					  text);
		out->kind = HOST_RULE_CIDR;
		return true;
	}
	if (strchr(host, ':')) {
		if (!addr_parse(host, &a))
			return rule_error(err, errlen,
					  "'%s': invalid IPv6 address (an "
					  "IPv6 rule with a port needs "
					  "brackets: [ADDR]:PORT)",
					  text);
		cidr_full(&out->cidr, &a);
		out->kind = HOST_RULE_CIDR;
		return true;
	}
	e = hostname_normalise(host, strlen(host), &t);
	if (e != HOSTNAME_OK)
		return rule_error(err, errlen, "'%s': %s", text,
				  hostname_error_to_string(e));
	if (t.is_addr) {
		/* "127.1" is 127.0.0.1 as a target, so it is as a rule. */
		cidr_full(&out->cidr, &t.addr);
		out->kind = HOST_RULE_CIDR;
		return true;
	}
	out->kind = HOST_RULE_EXACT;
	memcpy(out->name, t.name, sizeof(out->name));
	return true;
}

bool host_rule_parse(const char *raw, struct host_rule *out, char *err,
		     size_t errlen)
{
	char host[RULE_TEXT_MAX + 1], text[96];
	const char *port_text = NULL, *hstart, *hend;
	bool bracketed = false;
	struct host_rule r;
	size_t n, colons = 0, i;

	ASSERT(err && errlen > 0);
	err[0] = '\0';
	memset(out, 0, sizeof(*out));
	memset(&r, 0, sizeof(r));
	r.port = HOST_RULE_PORT_DEFAULT;
	n = raw ? strlen(raw) : 0;
	if (n == 0)
		return rule_error(err, errlen, "empty host rule");
	render(raw, text, sizeof(text));
	if (n > RULE_TEXT_MAX)
		return rule_error(err, errlen, "'%s': longer than %d bytes",
				  text, RULE_TEXT_MAX);
	hstart = raw;
	for (i = 0; i < n; i++)
		colons += raw[i] == ':';
	hend = raw + n;
	if (raw[0] == '[') {
		const char *close = strchr(raw, ']');

		if (!close)
			return rule_error(err, errlen, "'%s': unbalanced '['",
					  text);
		bracketed = true;
		hstart = raw + 1;
		hend = close;
		if (close[1] == ':')
			port_text = close + 2;
		else if (close[1] != '\0')
			return rule_error(err, errlen,
					  "'%s': only ':PORT' may follow ']'",
					  text);
	} else if (colons == 1) {
		hend = strchr(raw, ':');
		port_text = hend + 1;
	}
	/* colons >= 2 without brackets: a bare IPv6 address or CIDR, which
	 * cannot carry a port. */
	if (port_text) {
		unsigned int p;

		if (strcmp(port_text, "*") == 0)
			r.port = HOST_RULE_PORT_ANY;
		else if (parse_port(port_text, strlen(port_text), &p) && p)
			r.port = (int)p;
		else
			return rule_error(err, errlen,
					  "'%s': port must be 1..65535 (no "
					  "leading zero) or '*'",
					  text);
	}
	if (hend == hstart)
		return rule_error(err, errlen, "'%s': empty host", text);
	if (memchr(hstart, '[', (size_t)(hend - hstart)) ||
	    memchr(hstart, ']', (size_t)(hend - hstart)))
		return rule_error(err, errlen, "'%s': misplaced bracket", text);
	memcpy(host, hstart, (size_t)(hend - hstart));
	host[hend - hstart] = '\0';
	if (!parse_rule_host(text, host, bracketed, &r, err, errlen))
		return false;
	*out = r;
	return true;
}

void host_rule_format(const struct host_rule *r, char *out, size_t len)
{
	char host[HOSTNAME_MAX + 8], port[16] = "";
	bool bracket = false;

	ASSERT(len >= HOSTNAME_MAX + 64);
	switch (r->kind) {
	case HOST_RULE_EXACT:
		snprintf(host, sizeof(host), "%s", r->name);
		break;
	case HOST_RULE_BELOW:
		snprintf(host, sizeof(host), "*.%s", r->name);
		break;
	case HOST_RULE_SELF_BELOW:
		snprintf(host, sizeof(host), "**.%s", r->name);
		break;
	case HOST_RULE_ANY:
		snprintf(host, sizeof(host), "*");
		break;
	case HOST_RULE_CIDR:
		if (r->cidr.prefix == (r->cidr.base.family == AF_INET ? 32u
								      : 128u))
			addr_format(&r->cidr.base, host, sizeof(host));
		else
			addr_cidr_format(&r->cidr, host, sizeof(host));
		bracket = r->cidr.base.family == AF_INET6 &&
			  r->port != HOST_RULE_PORT_DEFAULT;
		break;
	default:
		ASSERT(!"unknown host rule kind");
	}
	if (r->port == HOST_RULE_PORT_ANY)
		snprintf(port, sizeof(port), ":*");
	else if (r->port > 0)
		snprintf(port, sizeof(port), ":%d", r->port);
	snprintf(out, len, "%s%s%s%s", bracket ? "[" : "", host,
		 bracket ? "]" : "", port);
}

/* ------------------------------------------------------------------ */
/* Matching                                                           */
/* ------------------------------------------------------------------ */

static bool port_matches(const struct host_rule *r, uint16_t port,
			 const uint16_t *ports, size_t nports, bool is_deny)
{
	size_t i;

	if (!is_deny && port == 0)
		return false;
	if (r->port == HOST_RULE_PORT_ANY)
		return true;
	if (r->port > 0)
		return r->port == (int)port;
	if (r->port != HOST_RULE_PORT_DEFAULT)
		return false; /* corrupt rule: never widen */
	if (is_deny)
		return true;
	for (i = 0; i < nports; i++) {
		if (ports[i] == port)
			return true;
	}
	return false;
}

/* Is @name strictly below @suffix on a label boundary? */
static bool name_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return s > 0 && n > s + 1 && name[n - s - 1] == '.' &&
	       memcmp(name + n - s, suffix, s) == 0;
}

static bool cidr_matches(const struct addr_cidr *c, const struct addr *a)
{
	struct addr alt;

	if (addr_cidr_contains(c, a))
		return true;
	memset(&alt, 0, sizeof(alt));
	if (a->family == AF_INET) {
		alt.family = AF_INET6;
		alt.bytes[10] = 0xff;
		alt.bytes[11] = 0xff;
		memcpy(alt.bytes + 12, a->bytes, 4);
	} else {
		static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0,
						    0, 0, 0xff, 0xff };

		if (a->family != AF_INET6 || memcmp(a->bytes, mapped, 12) != 0)
			return false;
		alt.family = AF_INET;
		memcpy(alt.bytes, a->bytes + 12, 4);
	}
	return addr_cidr_contains(c, &alt);
}

bool host_rule_matches(const struct host_rule *r, const struct host_target *t,
		       uint16_t port, const uint16_t *ports, size_t nports,
		       bool is_deny)
{
	if (!port_matches(r, port, ports, nports, is_deny))
		return false;
	switch (r->kind) {
	case HOST_RULE_EXACT:
		return !t->is_addr && r->name[0] &&
		       strcmp(t->name, r->name) == 0;
	case HOST_RULE_BELOW:
		return !t->is_addr && name_below(t->name, r->name);
	case HOST_RULE_SELF_BELOW:
		return !t->is_addr && r->name[0] &&
		       (strcmp(t->name, r->name) == 0 ||
			name_below(t->name, r->name));
	case HOST_RULE_ANY:
		return !t->is_addr && t->name[0];
	case HOST_RULE_CIDR:
		return t->is_addr && cidr_matches(&r->cidr, &t->addr);
	}
	return false;
}

enum host_verdict host_decide(const struct host_rule *allow, size_t nallow,
			      const struct host_rule *deny, size_t ndeny,
			      const uint16_t *ports, size_t nports,
			      const struct host_target *t, uint16_t port,
			      int *index)
{
	size_t i;
	int dummy;

	if (!index)
		index = &dummy;
	for (i = 0; i < ndeny; i++) {
		if (host_rule_matches(&deny[i], t, port, ports, nports, true)) {
			*index = (int)i;
			return HOST_VERDICT_DENY_RULE;
		}
	}
	for (i = 0; i < nallow; i++) {
		if (host_rule_matches(&allow[i], t, port, ports, nports,
				      false)) {
			*index = (int)i;
			return HOST_VERDICT_ALLOW;
		}
	}
	*index = -1;
	return HOST_VERDICT_DENY_DEFAULT;
}
