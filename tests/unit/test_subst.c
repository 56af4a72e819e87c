/* SPDX-License-Identifier: Apache-2.0
 * test_subst.c - the substitution decision: where a placeholder is
 * substituted (headers, Basic, Bearer, token), where it is refused and
 * why (request line, query, header names, unlisted headers, paths,
 * methods, hosts, plain http, encoded forms), and what passes unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "http.h"
#include "subst.h"
#include "tap.h"
#include "util.h"

#define PA "airlock-ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc7Hd4Jf6Gs0Ty"
#define PB "airlock-ph-b-Mx4Qa8Wz1Ep5Rk9Tn2Yu6Io3Pl7As0Df"
#define PC "airlock-ph-c-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv"
#define VA "sk-real-AAAA-1111"
#define VB "ghp_realBBBB2222"
#define VC "real-CCCC"

static struct host_rule rules_a[1], rules_b[2], rules_c[1];
static const char *const headers_a[] = { "authorization", "x-api-key" };
static const char *const paths_a[] = { "/v1/", "/v2/models" };
static const char *const methods_a[] = { "GET", "POST" };
static const char *const none[] = { "" };
static const uint16_t ports[] = { 80, 443 };

static struct subst_secret secrets[3];
static struct subst_set set;

static void setup(void)
{
	char err[200];

	ASSERT(host_rule_parse("api.example.test", &rules_a[0], err, sizeof(err)));
	ASSERT(host_rule_parse("other.example.test", &rules_b[0], err, sizeof(err)));
	ASSERT(host_rule_parse("**.b.example.test", &rules_b[1], err, sizeof(err)));
	ASSERT(host_rule_parse("api.example.test:8443", &rules_c[0], err, sizeof(err)));
	secrets[0] = (struct subst_secret){
		.name = "a", .placeholder = PA, .placeholder_len = strlen(PA),
		.value = VA, .value_len = strlen(VA),
		.hosts = rules_a, .nhosts = 1,
		.headers = headers_a, .nheaders = 2,
		.paths = paths_a, .npaths = 2,
		.methods = methods_a, .nmethods = 2,
	};
	secrets[1] = (struct subst_secret){
		.name = "b", .placeholder = PB, .placeholder_len = strlen(PB),
		.value = VB, .value_len = strlen(VB),
		.hosts = rules_b, .nhosts = 2,
	};
	/* bound to a port of its own, and to no header at all */
	secrets[2] = (struct subst_secret){
		.name = "c", .placeholder = PC, .placeholder_len = strlen(PC),
		.value = VC, .value_len = strlen(VC),
		.hosts = rules_c, .nhosts = 1,
		.headers = none, .nheaders = 0,
	};
	set = (struct subst_set){ .secrets = secrets, .n = 3, .ports = ports, .nports = 2 };
}

/* ------------------------------------------------------------------ */
/* Building requests                                                  */
/* ------------------------------------------------------------------ */

static void add(char **out, size_t *len, const char *s, size_t n)
{
	*out = util_xrealloc(*out, *len + n + 1);
	memcpy(*out + *len, s, n);
	*len += n;
	(*out)[*len] = '\0';
}

/* OpenSSL's encoder, not subst.c's: the test must not agree with itself. */
static void b64(const char *in, bool url, char **out, size_t *len)
{
	size_t n = strlen(in), i, o = 0;
	char *enc = util_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)in, (int)n);
	for (i = 0; enc[i]; i++) {
		if (url && enc[i] == '=')
			continue;
		enc[o++] = url && enc[i] == '+' ? '-' : url && enc[i] == '/' ? '_' : enc[i];
	}
	add(out, len, enc, o);
	free(enc);
}

static void pct_all(const char *in, char **out, size_t *len, bool twice)
{
	char tmp[8];

	for (; *in; in++) {
		snprintf(tmp, sizeof(tmp), twice ? "%%25%02X" : "%%%02X", (unsigned char)*in);
		add(out, len, tmp, strlen(tmp));
	}
}

/* Expands {TOKEN}s of @tmpl; "|" becomes CRLF. */
static char *expand(const char *tmpl, size_t *outlen)
{
	char *out = NULL, tmp[256];
	size_t len = 0;

	add(&out, &len, "", 0);
	while (*tmpl) {
		const char *end;
		char tok[64];

		if (*tmpl == '|') {
			add(&out, &len, "\r\n", 2);
			tmpl++;
			continue;
		}
		if (*tmpl != '{' || !(end = strchr(tmpl, '}'))) {
			add(&out, &len, tmpl++, 1);
			continue;
		}
		ASSERT((size_t)(end - tmpl) < sizeof(tok));
		memcpy(tok, tmpl + 1, (size_t)(end - tmpl - 1));
		tok[end - tmpl - 1] = '\0';
		tmpl = end + 1;
		if (!strcmp(tok, "PA"))
			add(&out, &len, PA, strlen(PA));
		else if (!strcmp(tok, "PB"))
			add(&out, &len, PB, strlen(PB));
		else if (!strcmp(tok, "PC"))
			add(&out, &len, PC, strlen(PC));
		else if (!strcmp(tok, "VA"))
			add(&out, &len, VA, strlen(VA));
		else if (!strcmp(tok, "VB"))
			add(&out, &len, VB, strlen(VB));
		else if (!strcmp(tok, "BASIC_PA"))
			b64("user:" PA, false, &out, &len);
		else if (!strcmp(tok, "BASIC_PA_USER"))
			b64(PA ":", false, &out, &len);
		else if (!strcmp(tok, "BASIC_VA"))
			b64("user:" VA, false, &out, &len);
		else if (!strcmp(tok, "BASIC_VA_USER"))
			b64(VA ":", false, &out, &len);
		else if (!strcmp(tok, "BASIC_PA_PB"))
			b64(PA ":" PB, false, &out, &len);
		else if (!strcmp(tok, "BASIC_NONE"))
			b64("user:password", false, &out, &len);
		else if (!strcmp(tok, "B64_PA0"))
			b64(PA, false, &out, &len);
		else if (!strcmp(tok, "B64_PA1"))
			b64("x" PA "yz", false, &out, &len);
		else if (!strcmp(tok, "B64_PA2"))
			b64("xy" PA, false, &out, &len);
		else if (!strcmp(tok, "B64URL_PA"))
			b64("{\"k\":\"" PA "\"}", true, &out, &len);
		else if (!strcmp(tok, "PCT_PA"))
			pct_all(PA, &out, &len, false);
		else if (!strcmp(tok, "PCT2_PA"))
			pct_all(PA, &out, &len, true);
		else if (!strcmp(tok, "PCT_B64_PA")) {
			char *e = NULL;
			size_t elen = 0;

			b64("xy" PA, false, &e, &elen);
			pct_all(e, &out, &len, false);
			free(e);
		} else if (!strcmp(tok, "UPPER_PA")) {
			size_t i;

			snprintf(tmp, sizeof(tmp), "%s", PA);
			for (i = 0; tmp[i]; i++)
				if (tmp[i] >= 'a' && tmp[i] <= 'z')
					tmp[i] = (char)(tmp[i] - 32);
			add(&out, &len, tmp, strlen(tmp));
		} else {
			ASSERT(!"unknown token");
		}
	}
	*outlen = len;
	return out;
}

/* ------------------------------------------------------------------ */
/* Cases                                                              */
/* ------------------------------------------------------------------ */

#define API "Host: api.example.test|"

struct rw {
	int header;
	const char *value; /* template */
};

struct scase {
	const char *name;
	const char *head; /* template, without the final empty line */
	const char *host; /* the intercepted host; NULL: api.example.test */
	uint16_t port;    /* 0: 443 */
	bool plain;       /* plain http: not tls_verified */
	enum subst_verdict verdict;
	/* SUBST_REFUSE */
	size_t secret;
	enum subst_where where;
	enum subst_why why;
	enum subst_form form;
	size_t header;
	const char *rule;
	/* SUBST_REWRITE */
	struct rw rw[2];
	size_t ninject;
};

static const struct scase cases[] = {
	/* --- substituted ------------------------------------------------ */
	{ .name = "Bearer in Authorization",
	  .head = "GET /v1/messages HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "Bearer {VA}" } }, .ninject = 1 },
	{ .name = "token scheme",
	  .head = "POST /v1/x HTTP/1.1|" API "Authorization: token {PA}|Content-Length: 0|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "token {VA}" } }, .ninject = 1 },
	{ .name = "a bare value in x-api-key (header names in any case)",
	  .head = "GET /v1/ HTTP/1.1|" API "X-Api-Key: {PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "{VA}" } }, .ninject = 1 },
	{ .name = "Basic: the password",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Basic {BASIC_PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "Basic {BASIC_VA}" } }, .ninject = 1 },
	{ .name = "Basic: the user, scheme in lower case, two spaces",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: basic  {BASIC_PA_USER}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "Basic {BASIC_VA_USER}" } }, .ninject = 1 },
	{ .name = "two headers rewritten",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Bearer {PA}|Accept: */*|x-api-key: {PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "Bearer {VA}" }, { 3, "{VA}" } }, .ninject = 2 },
	{ .name = "a path listed exactly (/v2/models)",
	  .head = "GET /v2/models HTTP/1.1|" API "x-api-key: {PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "{VA}" } }, .ninject = 1 },
	{ .name = "a query does not change the path",
	  .head = "GET /v1/x?limit=5 HTTP/1.1|" API "x-api-key: {PA}|",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "{VA}" } }, .ninject = 1 },
	{ .name = "b: any header, any path, any method, below **.b.example.test",
	  .head = "DELETE /anything HTTP/1.1|Host: x.b.example.test|Cookie: s={PB}; t=1|",
	  .host = "x.b.example.test",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "s={VB}; t=1" } }, .ninject = 1 },
	{ .name = "b: both placeholders of one header bound to the host",
	  .head = "GET / HTTP/1.1|Host: other.example.test|X-Two: {PB} {PB}|",
	  .host = "other.example.test",
	  .verdict = SUBST_REWRITE, .rw = { { 1, "{VB} {VB}" } }, .ninject = 1 },

	/* --- passed unchanged -------------------------------------------- */
	{ .name = "the agent's own Authorization",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Bearer mine-0123|",
	  .verdict = SUBST_PASS },
	{ .name = "the agent's own Basic credentials",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Basic {BASIC_NONE}|",
	  .verdict = SUBST_PASS },
	{ .name = "a placeholder in another case is not the placeholder",
	  .head = "GET /v1/a?k={UPPER_PA} HTTP/1.1|" API "X-Other: {UPPER_PA}|",
	  .verdict = SUBST_PASS },
	{ .name = "nothing at all, plain http",
	  .head = "GET http://api.example.test/ HTTP/1.1|" API, .plain = true, .port = 80,
	  .verdict = SUBST_PASS },

	/* --- refused: the request line and header names ---------------------- */
	{ .name = "in the query",
	  .head = "GET /v1/a?key={PA} HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_QUERY,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_RAW, .rule = "secrets.a" },
	{ .name = "in the path",
	  .head = "GET /v1/{PA}/x HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_PATH,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_RAW, .rule = "secrets.a" },
	{ .name = "percent-encoded in the path",
	  .head = "GET /v1/{PCT_PA} HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_PATH,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_PERCENT, .rule = "secrets.a" },
	{ .name = "percent-encoded twice in the query",
	  .head = "GET /v1/?q={PCT2_PA} HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_QUERY,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_PERCENT, .rule = "secrets.a" },
	{ .name = "base64url in the query",
	  .head = "GET /v1/?state={B64URL_PA} HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_QUERY,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_BASE64, .rule = "secrets.a" },
	{ .name = "percent-encoded base64 in the query",
	  .head = "GET /v1/?d={PCT_B64_PA} HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_QUERY,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_BASE64, .rule = "secrets.a" },
	{ .name = "in an absolute-form target (plain http)",
	  .head = "GET http://api.example.test/?k={PB} HTTP/1.1|" API, .plain = true, .port = 80,
	  .verdict = SUBST_REFUSE, .secret = 1, .where = SUBST_WHERE_QUERY,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_RAW, .rule = "secrets.b" },
	{ .name = "as the method",
	  .head = "{PA} /v1/ HTTP/1.1|" API,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_METHOD,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_RAW, .rule = "secrets.a" },
	{ .name = "in a header name",
	  .head = "GET /v1/ HTTP/1.1|" API "X-{PB}: 1|",
	  .verdict = SUBST_REFUSE, .secret = 1, .where = SUBST_WHERE_HEADER_NAME,
	  .why = SUBST_WHY_NOT_A_HEADER, .form = SUBST_FORM_RAW, .header = 1,
	  .rule = "secrets.b" },

	/* --- refused: header values ------------------------------------------- */
	{ .name = "a header the secret does not list",
	  .head = "GET /v1/ HTTP/1.1|" API "Authorization: Bearer {PA}|X-Debug: {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HEADER, .form = SUBST_FORM_RAW, .header = 2,
	  .rule = "secrets.a.headers" },
	{ .name = "Basic in a header the secret does not list",
	  .head = "GET /v1/ HTTP/1.1|" API "X-Auth: Basic {BASIC_PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HEADER, .form = SUBST_FORM_BASIC, .header = 1,
	  .rule = "secrets.a.headers" },
	{ .name = "base64 (aligned) in a header",
	  .head = "GET /v1/ HTTP/1.1|" API "X-Data: {B64_PA0}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_ENCODED, .form = SUBST_FORM_BASE64, .header = 1, .rule = "secrets.a" },
	{ .name = "base64 (one byte off) in a listed header",
	  .head = "GET /v1/ HTTP/1.1|" API "X-Api-Key: {B64_PA1}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_ENCODED, .form = SUBST_FORM_BASE64, .header = 1, .rule = "secrets.a" },
	{ .name = "base64 (two bytes off) in a header",
	  .head = "GET /v1/ HTTP/1.1|" API "X-Data: {B64_PA2}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_ENCODED, .form = SUBST_FORM_BASE64, .header = 1, .rule = "secrets.a" },
	{ .name = "percent-encoded in a header",
	  .head = "GET /v1/ HTTP/1.1|" API "Referer: https://x.test/?k={PCT_PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_ENCODED, .form = SUBST_FORM_PERCENT, .header = 1, .rule = "secrets.a" },
	{ .name = "a path the secret does not list",
	  .head = "GET /admin HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_PATH, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.paths" },
	{ .name = "a listed prefix climbed out of with ..",
	  .head = "GET /v1/../admin HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_PATH, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.paths" },
	{ .name = "a listed prefix climbed out of with %2e%2e",
	  .head = "GET /v1/%2e%2e/admin HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_PATH, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.paths" },
	{ .name = "/v2 is not under /v2/models",
	  .head = "GET /v2 HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_PATH, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.paths" },
	{ .name = "a method the secret does not list",
	  .head = "DELETE /v1/a HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_METHOD, .form = SUBST_FORM_RAW, .header = 1,
	  .rule = "secrets.a.methods" },
	{ .name = "methods are case-sensitive",
	  .head = "post /v1/a HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_METHOD, .form = SUBST_FORM_RAW, .header = 1,
	  .rule = "secrets.a.methods" },
	{ .name = "another intercepted host",
	  .head = "GET /v1/a HTTP/1.1|Host: other.example.test|Authorization: Bearer {PA}|",
	  .host = "other.example.test",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HOST, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.hosts" },
	{ .name = "the bound host's name as a suffix is another host",
	  .head = "GET /v1/a HTTP/1.1|Host: api.example.test.evil.test|x-api-key: {PA}|",
	  .host = "api.example.test.evil.test",
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HOST, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.hosts" },
	{ .name = "the bound host on a port its rule does not allow",
	  .head = "GET /v1/a HTTP/1.1|Host: api.example.test:8443|x-api-key: {PA}|",
	  .port = 8443,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HOST, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a.hosts" },
	{ .name = "a placeholder of a secret bound elsewhere, beside one bound here",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Bearer {PA}|x-api-key: {PB}|",
	  .verdict = SUBST_REFUSE, .secret = 1, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HOST, .form = SUBST_FORM_RAW, .header = 2, .rule = "secrets.b.hosts" },
	{ .name = "Basic with two secrets, one not bound here",
	  .head = "GET /v1/a HTTP/1.1|" API "Authorization: Basic {BASIC_PA_PB}|",
	  .verdict = SUBST_REFUSE, .secret = 1, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HOST, .form = SUBST_FORM_BASIC, .header = 1, .rule = "secrets.b.hosts" },
	{ .name = "plain http to the bound host",
	  .head = "GET http://api.example.test/v1/a HTTP/1.1|" API "Authorization: Bearer {PA}|",
	  .plain = true, .port = 80,
	  .verdict = SUBST_REFUSE, .secret = 0, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_PLAIN_HTTP, .form = SUBST_FORM_RAW, .header = 1, .rule = "secrets.a" },
	{ .name = "c: bound to no header (an empty list) on its own port",
	  .head = "GET / HTTP/1.1|Host: api.example.test:8443|Authorization: Bearer {PC}|",
	  .port = 8443,
	  .verdict = SUBST_REFUSE, .secret = 2, .where = SUBST_WHERE_HEADER,
	  .why = SUBST_WHY_HEADER, .form = SUBST_FORM_RAW, .header = 1,
	  .rule = "secrets.c.headers" },
};

static void check_case(const struct scase *c)
{
	size_t len = 0;
	char *head = expand(c->head, &len);
	struct http_request req;
	struct host_target host;
	struct subst_result r;
	const char *hn = c->host ? c->host : "api.example.test";
	enum http_result hr;

	add(&head, &len, "\r\n", 2);
	hr = http_parse_request(head, len, &req, NULL);
	if (!tap_ok(hr == HTTP_OK, "%s: the request parses", c->name)) {
		tap_diag("%s: %s", http_result_to_string(hr), req.error ? req.error : "");
		free(head);
		return;
	}
	ASSERT(hostname_normalise(hn, strlen(hn), &host) == HOSTNAME_OK);
	subst_decide(&set, &req, &host, c->port ? c->port : 443, !c->plain, &r);
	tap_is_str(subst_verdict_to_string(r.verdict), subst_verdict_to_string(c->verdict),
		   "  verdict");
	if (r.verdict == SUBST_REFUSE && c->verdict == SUBST_REFUSE) {
		char rule[128];

		subst_rule(&set, &r, rule, sizeof(rule));
		tap_ok(r.secret == c->secret && r.where == c->where && r.why == c->why &&
			       r.form == c->form && r.header == c->header &&
			       strcmp(rule, c->rule) == 0 && r.nrewrites == 0 && r.ninjections == 0,
		       "  refused: secret %zu, %s, %s, %s, header %zu, %s, nothing rewritten",
		       c->secret, subst_where_to_string(c->where), subst_why_to_string(c->why),
		       subst_form_to_string(c->form), c->header, c->rule);
		if (!(r.secret == c->secret && r.where == c->where && r.why == c->why &&
		      r.form == c->form && r.header == c->header))
			tap_diag("got secret %zu, %s, %s, %s, header %zu, %s", r.secret,
				 subst_where_to_string(r.where), subst_why_to_string(r.why),
				 subst_form_to_string(r.form), r.header, rule);
	}
	if (r.verdict == SUBST_REWRITE && c->verdict == SUBST_REWRITE) {
		size_t want = c->rw[1].value ? 2 : 1, i;
		bool ok = r.nrewrites == want && r.ninjections == c->ninject;

		for (i = 0; ok && i < want; i++) {
			size_t vlen = 0;
			char *v = expand(c->rw[i].value, &vlen);

			ok = r.rewrites[i].header == (size_t)c->rw[i].header &&
			     r.rewrites[i].len == vlen &&
			     memcmp(r.rewrites[i].value, v, vlen) == 0 &&
			     r.rewrites[i].value[vlen] == '\0';
			if (!ok)
				tap_diag("header %zu: got '%s', want '%s'", r.rewrites[i].header,
					 r.rewrites[i].value, v);
			free(v);
		}
		for (i = 0; ok && i < r.ninjections; i++)
			ok = r.injections[i].secret < set.n &&
			     r.injections[i].header < req.headers.count;
		tap_ok(ok, "  %zu header(s) rewritten, %zu injection(s)", want, c->ninject);
	}
	if (r.verdict == SUBST_PASS)
		tap_ok(r.nrewrites == 0 && r.ninjections == 0, "  nothing rewritten");
	subst_result_free(&r);
	tap_ok(r.rewrites == NULL && r.nrewrites == 0, "  the result is freed");
	free(head);
}

struct path_case {
	const char *path;
	const char *prefix;
	bool under;
};

static const struct path_case path_cases[] = {
	{ "/v1/x", "/v1/", true },
	{ "/v1/", "/v1/", true },
	{ "/v1", "/v1/", false },
	{ "/v1x", "/v1", false },             /* whole segments only */
	{ "/v1", "/v1", true },
	{ "/v1/x", "/v1", true },
	{ "/sessions/1/provider-auth/x", "/sessions/1/pr", false },
	{ "/sessions/1/pr", "/sessions/1/pr", true },
	{ "/sessions/1/prompt", "/sessions/1/pr", false },
	{ "/V1/x", "/v1/", false },
	{ "//v1/x", "/v1/", false },
	{ "/v1//x", "/v1/", false },          /* "//": one normaliser, pathnorm.c */
	{ "/v1/a.b/...", "/v1/", false },     /* dots only: trimmed to ".." by some servers */
	{ "/v1/a.b/a...b", "/v1/", true },
	{ "/v1/%41", "/v1/", true },
	{ "/v1/../x", "/v1/", false },
	{ "/v1/..", "/v1/", false },
	{ "/v1/./x", "/v1/", false },
	{ "/v1/.", "/v1/", false },
	{ "/v1/..;/x", "/v1/", false },
	{ "/v1/.;x/y", "/v1/", false },
	{ "/v1/%2e%2E/x", "/v1/", false },
	{ "/v1/%2E/x", "/v1/", false },
	{ "/v1/a%2Fb", "/v1/", false },
	{ "/v1/a%2fb", "/v1/", false },
	{ "/v1/a%5Cb", "/v1/", false },
	{ "/v1/a\\b", "/v1/", false },
	{ "/v1/a;b", "/v1/", false },         /* a ';' parameter, anywhere */
	{ "/v1/..%3b/x", "/v1/", false },
	{ "/v1/%3B/x", "/v1/", false },
	{ "/v1/.../x", "/v1/", false },       /* dots only: ".." to some servers */
	{ "/v1/..%20/x", "/v1/", false },
	{ "/v1/a%252e", "/v1/", false },      /* double encoding */
	{ "/v1/%C0%AE%C0%AE/x", "/v1/", false }, /* overlong '.' */
	{ "/v1/a%00", "/v1/", false },
	{ "/v1/a%zz", "/v1/", false },
	{ "/v%31/x", "/v1/", true },          /* decoded: what a server reads */
	{ "/v1/a%20b", "/v1/", true },
	{ "/", "/", true },
};

static void test_paths(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(path_cases); i++) {
		const struct path_case *c = &path_cases[i];

		tap_ok(subst_path_under(c->path, strlen(c->path), c->prefix) == c->under,
		       "'%s' %s under '%s'", c->path, c->under ? "is" : "is not", c->prefix);
	}
}

struct bound_case {
	const char *host;
	uint16_t port;
	bool bound;
};

static const struct bound_case bound_cases[] = {
	{ "api.example.test", 443, true },
	{ "api.example.test", 80, true },      /* egress.ports */
	{ "api.example.test", 8443, true },    /* c's own port */
	{ "api.example.test", 8080, false },
	{ "other.example.test", 443, true },
	{ "b.example.test", 443, true },       /* **. covers the name itself */
	{ "deep.x.b.example.test", 443, true },
	{ "example.test", 443, false },
	{ "evil.test", 443, false },
};

static void test_bound(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bound_cases); i++) {
		const struct bound_case *c = &bound_cases[i];
		struct host_target t;

		ASSERT(hostname_normalise(c->host, strlen(c->host), &t) == HOSTNAME_OK);
		tap_ok(subst_host_bound(&set, &t, c->port) == c->bound, "%s:%u %s bound",
		       c->host, c->port, c->bound ? "is" : "is not");
	}
}

static void test_names(void)
{
	tap_is_str(subst_why_reason(SUBST_WHY_HOST),
		   "a secret placeholder to a host the secret is not bound to",
		   "a refusal's reason is a sentence");
	tap_is_str(subst_why_to_string(SUBST_WHY_COUNT), "?", "out of range: ?");
	tap_is_str(subst_where_to_string(SUBST_WHERE_HEADER_NAME), "header-name",
		   "where names");
	tap_is_str(subst_form_to_string(SUBST_FORM_BASE64), "base64", "form names");
}

int main(void)
{
	size_t i;

	setup();
	for (i = 0; i < ARRAY_SIZE(cases); i++)
		check_case(&cases[i]);
	test_paths();
	test_bound();
	test_names();
	return tap_done();
}
