/* SPDX-License-Identifier: Apache-2.0
 * dnsstub.h - the sandbox's DNS stub for transparent mode: the answer to
 * one query from untrusted bytes, and the table of synthetic addresses
 * that stand for the names asked (docs/TRANSPARENT.md).
 *
 * No I/O: the caller receives a datagram and sends what dnsstub_answer()
 * built (transparent_stub_serve() in transparent.h does both). Table-tested
 * in tests/unit/test_dnsstub.c, fuzzed by tests/fuzz/fuzz_dnsstub.c.
 */
#ifndef AIRLOCK_DNSSTUB_H
#define AIRLOCK_DNSSTUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "egress.h"
#include "hostname.h"
#include "policy.h"

/* ------------------------------------------------------------------ */
/* The table: synthetic address <-> name, shared between processes    */
/* ------------------------------------------------------------------ */

/* The synthetic addresses are 240.0.0.1 + index, index < capacity: with
 * the largest table they stay inside 240.0.0.0/16, part of the reserved
 * 240.0.0.0/4 that no host on the internet has. */
#define DNSSTUB_ADDR_FIRST 0xf0000001u /* 240.0.0.1 */
#define DNSSTUB_TABLE_MAX 16384u      /* names per session, the default */

struct dnsstub_table;

/* Makes an empty table of @capacity (1..DNSSTUB_TABLE_MAX) names in a
 * sealed memfd: its size cannot change, and no process can map it for
 * writing again; the mapping returned here is the only writable one.
 * Call it in the process that will answer queries (the writer) before
 * forking the readers. Returns 0 and *out (free with dnsstub_table_free),
 * or -errno (-EINVAL for a bad capacity). */
int dnsstub_table_new(uint32_t capacity, struct dnsstub_table **out);

/* Turns @t, inherited across fork() from the writer, into a read-only
 * view in this process: the writable mapping is replaced by a read-only
 * one that mprotect() cannot make writable, and the descriptor is closed.
 * Call it first thing in every reader (a proxy worker). Returns 0 or
 * -errno (then @t is unusable here: free it and fail closed). */
int dnsstub_table_make_reader(struct dnsstub_table *t);

/* A read-only view of the table in memfd @fd (received from the writer,
 * e.g. over SCM_RIGHTS; @fd stays the caller's). Returns 0 and *out, or
 * -errno (-EINVAL when @fd is not such a table). */
int dnsstub_table_open(int fd, struct dnsstub_table **out);

/* The memfd behind @t, for handing to a reader that is not a child
 * (dnsstub_table_open); -1 in a reader made by make_reader. */
int dnsstub_table_fd(const struct dnsstub_table *t);

void dnsstub_table_free(struct dnsstub_table *t);

/* How many names the table holds, and can hold. */
uint32_t dnsstub_table_count(const struct dnsstub_table *t);
uint32_t dnsstub_table_capacity(const struct dnsstub_table *t);

/* Writer only: appends @name (a normalised name, 1..HOSTNAME_MAX bytes;
 * ASSERTed) and stores its synthetic address in *out. The entry is
 * complete before readers can see it. No dedupe: the stub keeps one
 * entry per name. Returns 0, -ENOSPC when the table is full, -EROFS on a
 * reader's view. */
int dnsstub_table_add(struct dnsstub_table *t, const char *name,
		      struct addr *out);

/* Readers and writer: the name that the synthetic address @a stands for.
 * @a is AF_INET or its IPv4-mapped AF_INET6 form. Returns true and the
 * NUL-terminated name in @name when @a was handed out this session;
 * false for any other address (not synthetic, or not given out yet: the
 * caller then judges @a as an IP literal). Lock-free, never blocks. */
bool dnsstub_table_lookup_addr(const struct dnsstub_table *t,
			       const struct addr *a,
			       char name[HOSTNAME_MAX + 1]);

/* Is @a in the synthetic range (240.0.0.0/16, or its IPv4-mapped form),
 * handed out or not? */
bool dnsstub_addr_is_synthetic(const struct addr *a);

/* ------------------------------------------------------------------ */
/* The stub                                                           */
/* ------------------------------------------------------------------ */

#define DNSSTUB_TTL 5           /* seconds, of every synthetic answer */
#define DNSSTUB_QUERY_MAX 512   /* a longer datagram is FORMERR */
#define DNSSTUB_ANSWER_MAX 512  /* what dnsstub_answer() may write */
/* A name as received, escaped for a receipt (see dnsstub_result). */
#define DNSSTUB_DISPLAY_MAX (4 * 255 + 1)

/* What the stub did with one datagram. Keep dnsstub_outcome_to_string()
 * in sync (static_assert). */
enum dnsstub_outcome {
	DNSSTUB_ANSWER = 0,      /* NOERROR, one synthetic A record */
	DNSSTUB_NODATA,          /* NOERROR, no answer: AAAA and every
				    other type */
	DNSSTUB_NXDOMAIN_POLICY, /* enforce: no allow rule could match the
				    name on any port */
	DNSSTUB_NXDOMAIN_INVALID,/* not a valid DNS name, or an IP address
				    written as a name */
	DNSSTUB_SERVFAIL,        /* the table is full */
	DNSSTUB_FORMERR,         /* malformed query */
	DNSSTUB_NOTIMP,          /* opcode other than QUERY */
	DNSSTUB_REFUSED,         /* class other than IN */
	DNSSTUB_DROP,            /* nothing sent: shorter than a header, or
				    a response (QR set) */
	DNSSTUB_OUTCOME_COUNT
};

const char *dnsstub_outcome_to_string(enum dnsstub_outcome o);

struct dnsstub_result {
	enum dnsstub_outcome outcome;
	uint16_t qtype;          /* valid when a question was parsed */
	bool has_question;
	/* The name asked, lowercase, labels joined by '.', no trailing dot
	 * ("." for the root); every byte outside a-z 0-9 - _ written as
	 * \DDD (decimal, as in a zone file): printable ASCII, for a
	 * receipt's subject. "" when no question was parsed. */
	char display[DNSSTUB_DISPLAY_MAX];
	struct addr addr;        /* DNSSTUB_ANSWER: the synthetic address */
	/* The name is refused (NXDOMAIN_POLICY, NXDOMAIN_INVALID,
	 * SERVFAIL): the caller records dns.block with decision block. */
	bool blocked;
	/* Shadow mode: enforce would answer NXDOMAIN_POLICY, the stub
	 * answered anyway; dns.block with decision would_block. */
	bool would_block;
	/* First time this name is blocked or would_block: write the
	 * receipt now (once per name; see dnsstub_new). */
	bool record;
	char rule_id[EGRESS_RULE_ID_MAX]; /* blocked / would_block: the
					     deciding rule ("egress.default",
					     "egress.deny[N]",
					     "dns.invalid-name",
					     "dns.table-full") */
	const char *reason;      /* static, one line; NULL when allowed */
};

struct dnsstub;

/* A stub answering for @p's mode and rules with addresses from @table
 * (the writer's; both stay the caller's and must outlive the stub). It
 * remembers up to 2 x the table's capacity names (the decision, the
 * address, whether the name was recorded); past that every refusal
 * sets record (an audit trail never misses a name) and new names get
 * SERVFAIL for A. */
struct dnsstub *dnsstub_new(const struct policy *p,
			    struct dnsstub_table *table);
void dnsstub_free(struct dnsstub *s);

/* Answers the datagram @q of @qlen bytes (untrusted; any length; only
 * the first min(@qlen, DNSSTUB_QUERY_MAX + 1) bytes are read). Writes
 * the response into @out (@outlen >= DNSSTUB_ANSWER_MAX, ASSERTed) and
 * fills *res. Returns the response's length; 0 means send nothing
 * (DNSSTUB_DROP). Never forwards anything anywhere. The response echoes
 * the id, RD, and the question's bytes as received (so a resolver's
 * 0x20 case check passes); it is authoritative (AA) and claims
 * recursion (RA); an EDNS OPT record in the query is accepted and
 * ignored (the response has none). */
size_t dnsstub_answer(struct dnsstub *s, const uint8_t *q, size_t qlen,
		      uint8_t *out, size_t outlen, struct dnsstub_result *res);

/* Could any rule let a connection to @t through, on any port? True when
 * egress.deny / egress.allow allow it on at least one port (every port
 * a rule or egress.ports names is tried, and one that none names), or
 * when @t is in git.hosts or git.api_hosts (they need no allow rule on
 * port 443; git.hosts also port 22 with git.ssh) and no deny rule takes
 * that port. When false, *v is the verdict that explains it: the first
 * deny rule that matched on a port tried, else egress.default. @t is a
 * name (not an address). */
bool dnsstub_name_allowable(const struct policy *p,
			    const struct host_target *t,
			    struct verdict *v);

#endif /* AIRLOCK_DNSSTUB_H */
