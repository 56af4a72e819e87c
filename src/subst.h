/* SPDX-License-Identifier: Apache-2.0
 * subst.h - the secret broker's decision for one request: substitute the
 * real value for a placeholder, refuse the request, or pass it unchanged.
 *
 * Pure: no I/O, no policy lookups, no clock. The caller (the proxy) gives
 * the parsed request head, the host of the connection it arrived on and
 * whether that connection is intercepted TLS whose upstream certificate
 * verified; the answer says what to forward. Table-tested in
 * tests/unit/test_subst.c, fuzzed by tests/fuzz/fuzz_subst.c.
 *
 * Calling pattern, once the whole head of a request has been read:
 *
 *	struct subst_result r;
 *	subst_decide(&set, &req, &host, port, tls_verified, &r);
 *	switch (r.verdict) {
 *	case SUBST_REFUSE:  answer 403, record secret.block (subst_rule(),
 *	                    subst_why_to_string(), the where and form), and
 *	                    forward nothing of this request;
 *	case SUBST_REWRITE: forward the head with r.rewrites[i].value in place
 *	                    of header r.rewrites[i].header's value, record one
 *	                    secret.inject per r.injections[i];
 *	case SUBST_PASS:    forward the head unchanged.
 *	}
 *	subst_result_free(&r);   wipes the rewritten values
 */
#ifndef AIRLOCK_SUBST_H
#define AIRLOCK_SUBST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostname.h"
#include "http.h"

/* One brokered secret and what binds it. Every pointer is borrowed. A
 * list pointer of NULL means "any" (no restriction); a non-NULL list with
 * a count of 0 allows nothing. */
struct subst_secret {
	const char *name;
	const char *placeholder;
	size_t placeholder_len;    /* >= 1 */
	const char *value;         /* no CR, LF or NUL (broker.c refuses
				      every control byte): it is written
				      into a header */
	size_t value_len;
	const struct host_rule *hosts; /* the hosts the value may go to */
	size_t nhosts;
	const char *const *headers; /* lowercase header names; NULL: any */
	size_t nheaders;
	const char *const *paths;   /* path prefixes; NULL: any path */
	size_t npaths;
	const char *const *methods; /* exact, case-sensitive; NULL: any */
	size_t nmethods;
	const char *const *body;    /* body fields ("form:NAME",
				       "json:/POINTER"; bodysubst.h); NULL:
				       none */
	size_t nbody;
};

struct subst_set {
	const struct subst_secret *secrets;
	size_t n;
	/* egress.ports: the ports a host rule without ":PORT" stands for */
	const uint16_t *ports;
	size_t nports;
};

/* Keep the *_to_string() tables in sync (static_assert). */
enum subst_verdict {
	SUBST_PASS = 0, /* no placeholder: forward unchanged */
	SUBST_REWRITE,  /* every placeholder is where its secret allows */
	SUBST_REFUSE,   /* a placeholder where it may not be: 403 */
	SUBST_VERDICT_COUNT
};

/* Where a refused placeholder was seen. */
enum subst_where {
	SUBST_WHERE_METHOD = 0,
	SUBST_WHERE_PATH,        /* the request-target before '?' (or the
				    whole target when it crosses '?') */
	SUBST_WHERE_QUERY,
	SUBST_WHERE_HEADER_NAME,
	SUBST_WHERE_HEADER,      /* a header value */
	SUBST_WHERE_COUNT
};

/* Why it was refused; the order is the order of the checks. */
enum subst_why {
	SUBST_WHY_NOT_A_HEADER = 0, /* in the request line or a header name:
				       only header values are substituted */
	SUBST_WHY_ENCODED,          /* percent- or base64-encoded: never
				       substituted, so a smuggling attempt */
	SUBST_WHY_PLAIN_HTTP,       /* not inside verified, intercepted TLS */
	SUBST_WHY_HOST,             /* the host is not one of the secret's */
	SUBST_WHY_PATH,             /* the path is under none of `paths`, or
				       is ambiguous (dot segments, %2e, %2f,
				       %5c) */
	SUBST_WHY_METHOD,           /* the method is not in `methods` */
	SUBST_WHY_HEADER,           /* the header is not in `headers` */
	SUBST_WHY_COUNT
};

/* How it was written. */
enum subst_form {
	SUBST_FORM_RAW = 0,  /* the placeholder itself */
	SUBST_FORM_BASIC,    /* inside "Basic base64(user:password)" */
	SUBST_FORM_PERCENT,  /* percent-encoded, once or several times */
	SUBST_FORM_BASE64,   /* base64 or base64url of a text holding it, at
				any alignment, padded or not */
	SUBST_FORM_COUNT
};

const char *subst_verdict_to_string(enum subst_verdict v);
/* "method", "path", "query", "header-name", "header" */
const char *subst_where_to_string(enum subst_where w);
/* short ids: "not-a-header", "encoded", "plain-http", "host", "path",
 * "method", "header" */
const char *subst_why_to_string(enum subst_why w);
/* One sentence for the 403 body and the receipt's reason. */
const char *subst_why_reason(enum subst_why w);
/* "raw", "basic", "percent", "base64" */
const char *subst_form_to_string(enum subst_form f);

struct subst_rewrite {
	size_t header; /* index in the request's header table */
	char *value;   /* the value to send instead: owned, NUL-terminated,
			  holds real secret values (wiped by
			  subst_result_free) */
	size_t len;
};

/* One secret substituted in one header: a secret.inject receipt. */
struct subst_injection {
	size_t secret; /* index in the set */
	size_t header; /* index in the request's header table */
};

struct subst_result {
	enum subst_verdict verdict;

	/* SUBST_REFUSE: the first refused occurrence (request line first,
	 * then headers in order, secrets in set order). */
	size_t secret;
	enum subst_where where;
	enum subst_why why;
	enum subst_form form;
	size_t header; /* header index for the two header wheres */

	/* SUBST_REWRITE: one entry per rewritten header, in header order. */
	struct subst_rewrite *rewrites;
	size_t nrewrites;
	struct subst_injection *injections;
	size_t ninjections;
};

/* Decides @req (a complete, parsed head) arriving on a connection to @host
 * port @port. @tls_verified: the request came inside TLS the proxy
 * intercepted and the upstream connection it will go out on verified
 * (chain and name); false for plain http:// requests. @r is overwritten;
 * free it with subst_result_free() whatever the verdict.
 * The method and target are read from @req's slices, the path for
 * `paths` from req->path (empty = "/"). Placeholders are matched exactly
 * (byte for byte, no case folding); see subst.c for what is detected in
 * which form, and docs/SECRETS.md for what cannot be. */
void subst_decide(const struct subst_set *set, const struct http_request *req,
		  const struct host_target *host, uint16_t port, bool tls_verified,
		  struct subst_result *r);

void subst_result_free(struct subst_result *r);

/* The rule id of a refusal, for X-Airlock-Rule and the receipt:
 * "secrets.NAME.hosts" / ".paths" / ".methods" / ".headers" for those
 * whys, "secrets.NAME" for the others. Truncated to @len. */
void subst_rule(const struct subst_set *set, const struct subst_result *r,
		char *buf, size_t len);

/* Is @host:@port one of some secret's hosts? The proxy asks such hosts for
 * uncompressed answers (Accept-Encoding: identity), so that their bodies
 * can be scrubbed. */
bool subst_host_bound(const struct subst_set *set, const struct host_target *host,
		      uint16_t port);

/* Does @path (not NUL-terminated), read by pathnorm_parse() (safe escapes
 * decoded; a dot segment, a ';' parameter, a backslash, "//", %2E, %2F,
 * %5C and everything else ambiguous refused: not under any prefix), start
 * with @prefix, byte-wise? Exposed for tests. */
bool subst_path_under(const char *path, size_t len, const char *prefix);

#endif /* AIRLOCK_SUBST_H */
