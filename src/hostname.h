/* SPDX-License-Identifier: Apache-2.0
 * hostname.h - target normalisation and the allow/deny matcher
 * (docs/POLICY.md).
 *
 * Pure functions, no I/O, table-tested in tests/unit/test_hostname.c and
 * fuzzed by tests/fuzz/fuzz_hostname.c.
 */
#ifndef AIRLOCK_HOSTNAME_H
#define AIRLOCK_HOSTNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define HOSTNAME_MAX 253

/* Why a host string was refused. Keep hostname_error_to_string() in sync. */
enum hostname_error {
	HOSTNAME_OK = 0,
	HOSTNAME_EMPTY,
	HOSTNAME_TOO_LONG,        /* > 253 bytes after normalisation */
	HOSTNAME_LABEL_EMPTY,     /* "a..b", ".a", ".." */
	HOSTNAME_LABEL_TOO_LONG,  /* > 63 bytes */
	HOSTNAME_BAD_CHAR,        /* outside a-z 0-9 - _ */
	HOSTNAME_HYPHEN,          /* label starts or ends with '-' */
	HOSTNAME_NON_ASCII,       /* byte >= 0x80: IDNs must be punycode */
	HOSTNAME_PERCENT,         /* percent-escape */
	HOSTNAME_USERINFO,        /* '@' */
	HOSTNAME_ZONE_ID,         /* "fe80::1%eth0" */
	HOSTNAME_BAD_BRACKETS,    /* "[x.com]", "[[::1]]", unbalanced */
	HOSTNAME_BAD_IPV6,        /* bracketed but not a valid IPv6 literal */
	HOSTNAME_BAD_IPV4,        /* IPv4 notation whose parts overflow, or a
				     name whose last label is numeric
				     ("foo.123", "1.2.3.4.5", "08") */
	HOSTNAME_ERROR_COUNT
};

const char *hostname_error_to_string(enum hostname_error e);

/* A request target host after normalisation. */
struct host_target {
	bool is_addr;                 /* an IP literal (any IPv4 notation) */
	struct addr addr;             /* valid when is_addr */
	char name[HOSTNAME_MAX + 1];  /* lowercase, no trailing dot; for an
					 address, its canonical text
					 (addr_format: IPv6 without
					 brackets) */
};

/* Normalises the host part of a request target (@len bytes, not necessarily
 * NUL-terminated; may contain NULs, which are refused). Accepts a DNS name,
 * an IPv4 address in any libc notation (treated as the address), or an IPv6
 * literal in exactly one pair of brackets. Names: ASCII lowercase, one
 * trailing dot removed. The IPv4 test is made after that dot is removed, so
 * "127.0.0.1." and "0x7f.1." are addresses too. A name whose last label is
 * all digits or "0x" + hex digits but which is not an inet_aton address
 * ("256.1.1.1", "4294967296", "1.2.3.4.5", "foo.123") is HOSTNAME_BAD_IPV4.
 * When several errors apply the first of this order is reported:
 * USERINFO, ZONE_ID ('%' with ':' or brackets) / PERCENT, NON_ASCII,
 * BAD_CHAR (a NUL), the bracket errors, TOO_LONG, EMPTY, BAD_CHAR /
 * BAD_BRACKETS (an unbracketed IPv6 literal), BAD_IPV4 (overflow), the
 * label errors (first offending label), BAD_IPV4 (numeric last label).
 * On error *out is zeroed. */
enum hostname_error hostname_normalise(const char *in, size_t len,
				       struct host_target *out);

/* Splits "HOST:PORT" (CONNECT authority; IPv6 in brackets) into a
 * normalised target and a port 1..65535 (decimal, no sign, no leading zero).
 * Returns HOSTNAME_OK or the reason; a host error is reported before a port
 * error; a missing or bad port gives HOSTNAME_BAD_CHAR. */
enum hostname_error hostname_parse_authority(const char *in, size_t len,
					     struct host_target *out,
					     uint16_t *port);

enum host_rule_kind {
	HOST_RULE_EXACT,      /* example.com */
	HOST_RULE_BELOW,      /* *.example.com: any depth below, not itself */
	HOST_RULE_SELF_BELOW, /* **.example.com: itself and below */
	HOST_RULE_ANY,        /* * : every name (never an IP literal) */
	HOST_RULE_CIDR,       /* IP literal or CIDR: only IP-literal targets */
};

#define HOST_RULE_PORT_DEFAULT (-1) /* no ":PORT": egress.ports apply */
#define HOST_RULE_PORT_ANY 0        /* ":*" */

struct host_rule {
	enum host_rule_kind kind;
	char name[HOSTNAME_MAX + 1]; /* suffix for BELOW/SELF_BELOW, the name
					for EXACT; empty otherwise */
	struct addr_cidr cidr;       /* for HOST_RULE_CIDR */
	int port;                    /* HOST_RULE_PORT_*, or 1..65535 */
};

/* Parses one rule of egress.allow / egress.deny. On failure returns false
 * and writes a one-line reason into @err (never NULL, @errlen > 0).
 * Accepted: NAME, *.NAME, **.NAME, *, an IPv4 address (any inet_aton
 * notation, e.g. "127.1" is the rule 127.0.0.1), a strict IPv4 CIDR, a bare
 * IPv6 address or CIDR (no port), or "[IPv6 or IPv6 CIDR]"; each optionally
 * followed by ":PORT" (1..65535, no leading zero) or ":*", except a bare
 * IPv6. */
bool host_rule_parse(const char *text, struct host_rule *out, char *err,
		     size_t errlen);

/* Canonical text of a rule (lowercase, no trailing dot, canonical address).
 * @out holds at least HOSTNAME_MAX + 64 bytes. */
void host_rule_format(const struct host_rule *r, char *out, size_t len);

/* Does @r match @t on @port? A rule without a port matches the ports in
 * @ports (egress.ports) when @is_deny is false, and every port when it is
 * true (a deny rule without a port denies the host outright). Port 0 never
 * matches an allow rule. An address rule treats an IPv4 address and its
 * IPv4-mapped IPv6 form (::ffff:a.b.c.d) as the same destination. */
bool host_rule_matches(const struct host_rule *r, const struct host_target *t,
		       uint16_t port, const uint16_t *ports, size_t nports,
		       bool is_deny);

enum host_verdict {
	HOST_VERDICT_DENY_DEFAULT = 0, /* nothing matched: fail closed */
	HOST_VERDICT_DENY_RULE,        /* a deny rule matched (beats allow) */
	HOST_VERDICT_ALLOW,
};

/* Decides @t:@port against the rule lists. *index receives the index of
 * the deciding rule in its list (-1 for the default deny); @index may be
 * NULL. */
enum host_verdict host_decide(const struct host_rule *allow, size_t nallow,
			      const struct host_rule *deny, size_t ndeny,
			      const uint16_t *ports, size_t nports,
			      const struct host_target *t, uint16_t port,
			      int *index);

#endif /* AIRLOCK_HOSTNAME_H */
