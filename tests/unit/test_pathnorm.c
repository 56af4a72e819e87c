/* SPDX-License-Identifier: Apache-2.0
 * test_pathnorm.c - the one path normaliser (src/pathnorm.c): a table of
 * hostile paths, each refused for its reason, and refused by every rule
 * that reads paths through it (the git smart-HTTP rules, the REST binding,
 * the secrets' `paths`); normal paths read and decoded; limits; prefixes.
 */
#include <stdlib.h>
#include <string.h>

#include "gitrules.h"
#include "pathnorm.h"
#include "policy.h"
#include "subst.h"
#include "tap.h"
#include "util.h"

/* A hostile segment X, read as "/v1/X/x" (and "/repos/acme/api/X/x",
 * "/acme/api/X/git-upload-pack"). @len: X's length when it holds a NUL. */
struct hostile {
	const char *seg;
	size_t len;
	enum pathnorm_error want; /* with PATHNORM_ESCAPES */
	bool scm;                 /* also refused on an SCM host, where empty
				     segments are dropped */
};

static const struct hostile hostile[] = {
	/* dot segments, and what some server makes one of */
	{ "..", 0, PATHNORM_DOT_SEGMENT, true },
	{ ".", 0, PATHNORM_DOT_SEGMENT, true },
	{ "...", 0, PATHNORM_DOT_SEGMENT, true },
	{ "....", 0, PATHNORM_DOT_SEGMENT, true },
	{ "..%20", 0, PATHNORM_DOT_SEGMENT, true },
	{ ".%20.", 0, PATHNORM_DOT_SEGMENT, true },
	/* ';' parameters: "..;" is ".." to Tomcat and Jetty */
	{ "..;", 0, PATHNORM_PARAMETER, true },
	{ ".;", 0, PATHNORM_PARAMETER, true },
	{ "..;x", 0, PATHNORM_PARAMETER, true },
	{ "..;/..", 0, PATHNORM_PARAMETER, true },
	{ "a;b", 0, PATHNORM_PARAMETER, true },
	{ ";", 0, PATHNORM_PARAMETER, true },
	{ "..%3b", 0, PATHNORM_PARAMETER, true },
	{ "..%3B", 0, PATHNORM_PARAMETER, true },
	{ "%3b", 0, PATHNORM_PARAMETER, true },
	/* encoded dots */
	{ "%2e%2e", 0, PATHNORM_ENCODED_DOT, true },
	{ "%2E%2E", 0, PATHNORM_ENCODED_DOT, true },
	{ ".%2e", 0, PATHNORM_ENCODED_DOT, true },
	{ "%2e.", 0, PATHNORM_ENCODED_DOT, true },
	{ "%2e", 0, PATHNORM_ENCODED_DOT, true },
	{ "a%2eb", 0, PATHNORM_ENCODED_DOT, true },
	{ "%c0%ae%c0%ae", 0, PATHNORM_UTF8, true },
	{ "%e0%80%ae", 0, PATHNORM_UTF8, true },
	/* separators: encoded, backslashes, overlong */
	{ "a%2fb", 0, PATHNORM_ENCODED_SLASH, true },
	{ "a%2Fb", 0, PATHNORM_ENCODED_SLASH, true },
	{ "..%2f..", 0, PATHNORM_ENCODED_SLASH, true },
	{ "a%5cb", 0, PATHNORM_ENCODED_SLASH, true },
	{ "a%5Cb", 0, PATHNORM_ENCODED_SLASH, true },
	{ "a\\b", 0, PATHNORM_BACKSLASH, true },
	{ "..\\..", 0, PATHNORM_BACKSLASH, true },
	{ "%c0%af", 0, PATHNORM_UTF8, true },
	{ "%e0%80%af", 0, PATHNORM_UTF8, true },
	{ "%f0%80%80%af", 0, PATHNORM_UTF8, true },
	{ "%c1%9c", 0, PATHNORM_UTF8, true },
	/* double encoding and delimiters */
	{ "%252e%252e", 0, PATHNORM_ENCODED_DELIM, true },
	{ "%252f", 0, PATHNORM_ENCODED_DELIM, true },
	{ "%25", 0, PATHNORM_ENCODED_DELIM, true },
	{ "a%3fb", 0, PATHNORM_ENCODED_DELIM, true },
	{ "a%23b", 0, PATHNORM_ENCODED_DELIM, true },
	/* NUL and control bytes, raw and escaped */
	{ "a%00b", 0, PATHNORM_NUL, true },
	{ "a\0b", 3, PATHNORM_NUL, true },
	{ "..\0", 3, PATHNORM_NUL, true },
	{ "a%0ab", 0, PATHNORM_CONTROL, true },
	{ "a%0D%0Ab", 0, PATHNORM_CONTROL, true },
	{ "a\tb", 0, PATHNORM_CONTROL, true },
	{ "a\rb", 0, PATHNORM_CONTROL, true },
	{ "a%7fb", 0, PATHNORM_CONTROL, true },
	{ "a\x7f", 0, PATHNORM_CONTROL, true },
	/* escapes that are not UTF-8 */
	{ "%ed%a0%80", 0, PATHNORM_UTF8, true },
	{ "%f4%90%80%80", 0, PATHNORM_UTF8, true },
	{ "%c3", 0, PATHNORM_UTF8, true },
	{ "%ff", 0, PATHNORM_UTF8, true },
	{ "%80", 0, PATHNORM_UTF8, true },
	/* malformed escapes */
	{ "a%", 0, PATHNORM_BAD_ESCAPE, true },
	{ "a%4", 0, PATHNORM_BAD_ESCAPE, true },
	{ "a%zz", 0, PATHNORM_BAD_ESCAPE, true },
	{ "a%%32e", 0, PATHNORM_BAD_ESCAPE, true },
	{ "%+2e", 0, PATHNORM_BAD_ESCAPE, true },
	/* bytes no URL path holds */
	{ "\xc3\xa9", 0, PATHNORM_NON_ASCII, true },
	{ "\xc0\xae\xc0\xae", 0, PATHNORM_NON_ASCII, true },
	{ "a b", 0, PATHNORM_BYTE, true },
	{ "a\"b", 0, PATHNORM_BYTE, true },
	{ "a<b>", 0, PATHNORM_BYTE, true },
	{ "a|b", 0, PATHNORM_BYTE, true },
	{ "a{b}", 0, PATHNORM_BYTE, true },
	{ "a`b", 0, PATHNORM_BYTE, true },
	{ "a^b", 0, PATHNORM_BYTE, true },
	{ "a[b]", 0, PATHNORM_BYTE, true },
	{ "a#b", 0, PATHNORM_BYTE, true },
	{ "a?b", 0, PATHNORM_BYTE, true },
	/* an empty segment: refused where "//" is not dropped */
	{ "", 0, PATHNORM_EMPTY_SEGMENT, false },
};

static const char *const POLICY_JSON =
	"{\"version\":1,\"session\":{\"repo\":\"git.test/acme/api\"},"
	"\"git\":{\"hosts\":[\"git.test\"],\"api_hosts\":[\"api.git.test\"],"
	"\"api_allow\":[\"/graphql\"]}}";

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

/* "PRE" X "POST" into @buf; returns the length. */
static size_t build(char *buf, size_t size, const char *pre, const struct hostile *h,
		    const char *post)
{
	size_t a = strlen(pre), n = h->len ? h->len : strlen(h->seg), b = strlen(post);

	ASSERT(a + n + b < size);
	memcpy(buf, pre, a);
	memcpy(buf + a, h->seg, n);
	memcpy(buf + a + n, post, b);
	buf[a + n + b] = '\0';
	return a + n + b;
}

static struct gitrules_request mkreq(const char *method, const char *path, size_t len)
{
	struct gitrules_request r;

	memset(&r, 0, sizeof(r));
	r.method.ptr = method;
	r.method.len = strlen(method);
	r.path.ptr = path;
	r.path.len = len;
	return r;
}

static void test_hostile(void)
{
	struct policy *p = load(POLICY_JSON);
	static struct pathnorm pn;
	char buf[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(hostile); i++) {
		const struct hostile *h = &hostile[i];
		struct gitrules_request r;
		struct gitrules_verdict v;
		enum pathnorm_error e;
		size_t n;

		/* the normaliser, both ways */
		n = build(buf, sizeof(buf), "/v1/", h, "/x");
		e = pathnorm_parse(buf, n, PATHNORM_MAX, PATHNORM_ESCAPES, &pn);
		tap_ok(e == h->want, "pathnorm refuses /v1/%s/x: %s (got %s)", h->seg,
		       pathnorm_error_to_string(h->want), pathnorm_error_to_string(e));
		e = pathnorm_parse(buf, n, PATHNORM_MAX, 0, &pn);
		tap_ok(e != PATHNORM_OK || !h->scm, "  and without escapes: %s",
		       pathnorm_error_to_string(e));
		if (h->scm) {
			e = pathnorm_parse(buf, n, PATHNORM_MAX, PATHNORM_DROP_EMPTY, &pn);
			tap_ok(e != PATHNORM_OK, "  and dropping empty segments: %s",
			       pathnorm_error_to_string(e));
		}
		/* the secrets' paths */
		tap_ok(!subst_path_under(buf, n, "/v1/") && !subst_path_under(buf, n, "/"),
		       "  secrets: /v1/%s/x is under no prefix", h->seg);
		/* the REST binding: a repository in scope, any method */
		n = build(buf, sizeof(buf), "/repos/acme/api/", h, "/x");
		r = mkreq("GET", buf, n);
		gitrules_decide_api(p, "api.git.test", &r, &v);
		tap_ok(v.decision == GITRULES_DENY && v.rule == GITRULES_RULE_PATH,
		       "  git.api_hosts: GET /repos/acme/api/%s/x is refused (git.path; got %s: %s)",
		       h->seg, gitrules_rule_to_string(v.rule), v.reason);
		n = build(buf, sizeof(buf), "/graphql/", h, "/x");
		r = mkreq("POST", buf, n);
		gitrules_decide_api(p, "api.git.test", &r, &v);
		tap_ok(v.decision == GITRULES_DENY && v.rule == GITRULES_RULE_PATH,
		       "  git.api_allow: POST /graphql/%s/x is refused (git.path)", h->seg);
		/* the smart-HTTP rules */
		if (h->scm) {
			n = build(buf, sizeof(buf), "/acme/api/", h, "/git-upload-pack");
			r = mkreq("POST", buf, n);
			gitrules_decide_scm(p, "git.test", &r, &v);
			tap_ok(v.decision == GITRULES_DENY && v.rule == GITRULES_RULE_PATH,
			       "  git.hosts: POST /acme/api/%s/git-upload-pack is refused (git.path; got %s)",
			       h->seg, gitrules_rule_to_string(v.rule));
		}
	}
	policy_free(p);
}

struct normal {
	const char *in;
	unsigned int flags;
	const char *want; /* the normal path */
	int nseg;
	bool escaped;
};

static const struct normal normal[] = {
	{ "/", PATHNORM_ESCAPES, "/", 0, false },
	{ "/a", PATHNORM_ESCAPES, "/a", 1, false },
	{ "/a/", PATHNORM_ESCAPES, "/a/", 1, false },
	{ "/a/b.c/d-e_f~g", 0, "/a/b.c/d-e_f~g", 3, false },
	{ "/a:b@c!$&'()*+,=", 0, "/a:b@c!$&'()*+,=", 1, false },
	{ "/compare/v1...v2", 0, "/compare/v1...v2", 2, false },
	{ "/.well-known/x", 0, "/.well-known/x", 2, false },
	{ "/a/b..c/d.", 0, "/a/b..c/d.", 3, false },
	{ "/contents/a%20b.txt", PATHNORM_ESCAPES, "/contents/a b.txt", 2, true },
	{ "/%C3%A9t%C3%A9", PATHNORM_ESCAPES, "/\xc3\xa9t\xc3\xa9", 1, true },
	{ "/x/%F0%9F%98%80", PATHNORM_ESCAPES, "/x/\xf0\x9f\x98\x80", 2, true },
	{ "/k%65ys", PATHNORM_ESCAPES, "/keys", 1, true },
	{ "/a%2Bb", PATHNORM_ESCAPES, "/a+b", 1, true },
	{ "//a//b/", PATHNORM_DROP_EMPTY, "/a/b", 2, false },
	{ "//", PATHNORM_DROP_EMPTY, "/", 0, false },
	{ "/a/b/", PATHNORM_DROP_EMPTY, "/a/b", 2, false },
};

static void test_normal(void)
{
	static struct pathnorm pn;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(normal); i++) {
		const struct normal *c = &normal[i];
		enum pathnorm_error e = pathnorm_parse(c->in, strlen(c->in), PATHNORM_MAX,
						       c->flags, &pn);

		tap_ok(e == PATHNORM_OK && strcmp(pn.path, c->want) == 0 &&
			       pn.len == strlen(c->want) && pn.nseg == c->nseg &&
			       pn.escaped == c->escaped,
		       "pathnorm reads %s as %s (%d segments; got %s %s %d)", c->in, c->want,
		       c->nseg, pathnorm_error_to_string(e), pn.path, pn.nseg);
	}
	tap_ok(pathnorm_parse("/a/b", 4, PATHNORM_MAX, 0, &pn) == PATHNORM_OK &&
		       pathnorm_seg_is(&pn, 1, "b") && !pathnorm_seg_is(&pn, 2, "b") &&
		       !pathnorm_seg_is(&pn, -1, "a") && pn.seg[1].raw_off == 3 &&
		       pn.seg[1].raw_len == 1 && !pn.seg[1].escaped,
	       "segments: bounds, raw offsets");
	tap_ok(pathnorm_parse("/A/%42", 6, PATHNORM_MAX, PATHNORM_ESCAPES, &pn) == PATHNORM_OK &&
		       pathnorm_seg_is_ci(&pn, 0, "a") && pathnorm_seg_is(&pn, 1, "B") &&
		       pn.seg[1].escaped && pn.seg[1].raw_len == 3 && !pn.seg[0].escaped,
	       "segments: case, decoded, escaped");
	tap_is_int(pathnorm_parse("/a%20b", 6, PATHNORM_MAX, 0, &pn), PATHNORM_ESCAPE,
		   "without PATHNORM_ESCAPES every '%%' is refused");
	tap_is_int(pathnorm_parse("/a//b", 5, PATHNORM_MAX, PATHNORM_ESCAPES, &pn),
		   PATHNORM_EMPTY_SEGMENT, "\"//\" is refused unless dropped");
	tap_is_int(pathnorm_parse("//a", 3, PATHNORM_MAX, 0, &pn), PATHNORM_EMPTY_SEGMENT,
		   "a leading \"//\" too");
	tap_is_int(pathnorm_parse("/a//", 4, PATHNORM_MAX, 0, &pn), PATHNORM_EMPTY_SEGMENT,
		   "and a trailing \"//\"");
}

static void test_limits(void)
{
	static struct pathnorm pn;
	static char buf[PATHNORM_MAX + 8];
	size_t n;
	int i;

	tap_is_int(pathnorm_parse("", 0, PATHNORM_MAX, 0, &pn), PATHNORM_NOT_ABSOLUTE,
		   "an empty path is refused");
	tap_is_int(pathnorm_parse("a/b", 3, PATHNORM_MAX, 0, &pn), PATHNORM_NOT_ABSOLUTE,
		   "a relative path is refused");
	tap_is_int(pathnorm_parse("*", 1, PATHNORM_MAX, 0, &pn), PATHNORM_NOT_ABSOLUTE,
		   "the asterisk form is refused");
	tap_is_int(pathnorm_parse("\\a", 2, PATHNORM_MAX, 0, &pn), PATHNORM_NOT_ABSOLUTE,
		   "a leading backslash is refused");
	buf[0] = '/';
	memset(buf + 1, 'a', PATHNORM_MAX - 1);
	tap_is_int(pathnorm_parse(buf, PATHNORM_MAX, PATHNORM_MAX, 0, &pn), PATHNORM_OK,
		   "a path of exactly PATHNORM_MAX bytes is read");
	tap_ok(pn.len == PATHNORM_MAX && pn.path[PATHNORM_MAX] == '\0', "  whole");
	buf[PATHNORM_MAX] = 'a';
	tap_is_int(pathnorm_parse(buf, PATHNORM_MAX + 1, PATHNORM_MAX, 0, &pn), PATHNORM_TOO_LONG,
		   "one byte more is refused");
	tap_is_int(pathnorm_parse(buf, 11, 10, 0, &pn), PATHNORM_TOO_LONG,
		   "a caller's own limit holds");
	n = 0;
	for (i = 0; i < PATHNORM_SEGMENTS_MAX; i++) {
		buf[n++] = '/';
		buf[n++] = 'a';
	}
	tap_is_int(pathnorm_parse(buf, n, PATHNORM_MAX, 0, &pn), PATHNORM_OK,
		   "%d segments are read", PATHNORM_SEGMENTS_MAX);
	tap_is_int(pn.nseg, PATHNORM_SEGMENTS_MAX, "  all of them");
	buf[n] = '/';
	buf[n + 1] = 'a';
	tap_is_int(pathnorm_parse(buf, n + 2, PATHNORM_MAX, 0, &pn),
		   PATHNORM_TOO_MANY_SEGMENTS, "one more is refused");
	/* escapes only shorten: the longest escaped path fits */
	n = 0;
	buf[n++] = '/';
	while (n + 3 <= PATHNORM_MAX) {
		buf[n++] = '%';
		buf[n++] = '4';
		buf[n++] = '1';
	}
	tap_is_int(pathnorm_parse(buf, n, PATHNORM_MAX, PATHNORM_ESCAPES, &pn), PATHNORM_OK,
		   "a path of escapes up to the limit is read");
	tap_ok(pn.len == 1 + (n - 1) / 3, "  decoded");
}

static void test_under(void)
{
	static struct pathnorm pn;
	static const struct {
		const char *path, *prefix;
		bool whole, under;
	} cases[] = {
		{ "/graphql", "/graphql", true, true },
		{ "/graphql/x", "/graphql", true, true },
		{ "/graphql/", "/graphql", true, true },
		{ "/graphqlx", "/graphql", true, false },
		{ "/graph", "/graphql", true, false },
		{ "/graphql/x", "/graphql/", true, true },
		{ "/graphqlx", "/graphql", false, true },
		{ "/v1/x", "/v1/", false, true },
		{ "/v1", "/v1/", false, false },
		{ "/anything", "/", true, true },
		{ "/", "/", false, true },
		{ "/repos/acme/api/k%65ys/1", "/repos/acme/api/keys", true, true },
		{ "/repos/acme/api/KEYS", "/repos/acme/api/keys", true, false },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		ASSERT(pathnorm_parse(cases[i].path, strlen(cases[i].path), PATHNORM_MAX,
				      PATHNORM_ESCAPES, &pn) == PATHNORM_OK);
		tap_ok(pathnorm_under(&pn, cases[i].prefix, cases[i].whole) == cases[i].under,
		       "%s %s under %s (%s)", cases[i].path, cases[i].under ? "is" : "is not",
		       cases[i].prefix, cases[i].whole ? "whole segments" : "bytes");
	}
}

static void test_names(void)
{
	int i;

	for (i = 0; i < PATHNORM_ERROR_COUNT; i++)
		tap_ok(strcmp(pathnorm_error_to_string((enum pathnorm_error)i), "?") != 0 &&
			       strcmp(pathnorm_error_reason((enum pathnorm_error)i), "?") != 0,
		       "error %d has a name and a reason (%s)", i,
		       pathnorm_error_to_string((enum pathnorm_error)i));
	tap_is_str(pathnorm_error_to_string(PATHNORM_ERROR_COUNT), "?", "out of range");
}

int main(void)
{
	test_hostile();
	test_normal();
	test_limits();
	test_under();
	test_names();
	return tap_done();
}
