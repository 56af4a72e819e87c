/* SPDX-License-Identifier: Apache-2.0
 * test_bodysubst.c - body fields (bodysubst.c) and captured values
 * (capture.c): substitution in listed form fields and JSON members,
 * refusal anywhere else and why; capture paths, JSON pointers, expiry
 * and placeholders.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bodysubst.h"
#include "broker.h"
#include "capture.h"
#include "tap.h"
#include "util.h"

#define PA "airlock-ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc7Hd4Jf6Gs0Ty"
#define VA "rt-real-AAAA-1111"
#define PB "airlock-ph-b-Mx4Qa8Wz1Ep5Rk9Tn2Yu6Io3Pl7As0Df"
#define VB "cs-real-BBBB"

static struct host_rule rules_a[1];
static const char *const body_a[] = { "form:refresh_token", "json:/auth/rt" };
static const char *const paths_a[] = { "/oauth/" };
static const char *const methods_a[] = { "POST" };
static const uint16_t ports[] = { 443 };
static struct subst_secret secrets[2];
static struct subst_set set;
static struct host_target api, other;

static void setup(void)
{
	char err[200];

	ASSERT(host_rule_parse("api.example.test", &rules_a[0], err, sizeof(err)));
	ASSERT(hostname_normalise("api.example.test", 16, &api) == HOSTNAME_OK);
	ASSERT(hostname_normalise("other.example.test", 18, &other) == HOSTNAME_OK);
	secrets[0] = (struct subst_secret){
		.name = "a", .placeholder = PA, .placeholder_len = strlen(PA),
		.value = VA, .value_len = strlen(VA), .hosts = rules_a, .nhosts = 1,
		.paths = paths_a, .npaths = 1, .methods = methods_a, .nmethods = 1,
		.body = body_a, .nbody = 2,
	};
	/* bound to the same host, no body field */
	secrets[1] = (struct subst_secret){
		.name = "b", .placeholder = PB, .placeholder_len = strlen(PB),
		.value = VB, .value_len = strlen(VB), .hosts = rules_a, .nhosts = 1,
	};
	set = (struct subst_set){ secrets, 2, ports, 1 };
}

struct body_case {
	const char *name;
	const char *ctype;
	const char *method, *path;
	bool other_host, plain;
	const char *body;
	enum subst_verdict verdict;
	const char *want;  /* REWRITE: the body; REFUSE: the why */
	size_t secret;     /* REFUSE */
	const char *field; /* REFUSE: the field, or NULL */
};

#define FORM "application/x-www-form-urlencoded"
#define JSON "application/json"

static const struct body_case cases[] = {
	{ "form field", FORM, "POST", "/oauth/token", false, false,
	  "grant_type=refresh_token&refresh_token=" PA "&x=1", SUBST_REWRITE,
	  "grant_type=refresh_token&refresh_token=rt-real-AAAA-1111&x=1", 0, NULL },
	{ "form field, percent-encoded placeholder", FORM "; charset=utf-8", "POST", "/oauth/t",
	  false, false, "refresh_token=%61irlock-ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc7Hd4Jf6Gs0Ty",
	  SUBST_REWRITE, "refresh_token=rt-real-AAAA-1111", 0, NULL },
	{ "form: value re-encoded", FORM, "POST", "/oauth/t", false, false,
	  "refresh_token=x+" PA, SUBST_REWRITE, "refresh_token=x%20rt-real-AAAA-1111", 0, NULL },
	{ "form: no placeholder", FORM, "POST", "/oauth/t", false, false, "a=b&c=d", SUBST_PASS,
	  NULL, 0, NULL },
	{ "form: another field", FORM, "POST", "/oauth/t", false, false,
	  "refresh_token=x&other=" PA, SUBST_REFUSE, "body", 0, "form:other" },
	{ "form: encoded in another field", FORM, "POST", "/oauth/t", false, false,
	  "other=%61irlock-ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc7Hd4Jf6Gs0Ty", SUBST_REFUSE, "body", 0,
	  "form:other" },
	{ "form: as a name", FORM, "POST", "/oauth/t", false, false, PA "=1", SUBST_REFUSE,
	  "body", 0, NULL },
	{ "form: path not bound", FORM, "POST", "/v1/t", false, false, "refresh_token=" PA,
	  SUBST_REFUSE, "path", 0, "form:refresh_token" },
	{ "form: method not bound", FORM, "PUT", "/oauth/t", false, false, "refresh_token=" PA,
	  SUBST_REFUSE, "method", 0, "form:refresh_token" },
	{ "form: another host", FORM, "POST", "/oauth/t", true, false, "refresh_token=" PA,
	  SUBST_REFUSE, "host", 0, "form:refresh_token" },
	{ "form: plain http", FORM, "POST", "/oauth/t", false, true, "refresh_token=" PA,
	  SUBST_REFUSE, "plain-http", 0, "form:refresh_token" },
	{ "form: a secret without body fields", FORM, "POST", "/oauth/t", false, false,
	  "refresh_token=" PB, SUBST_REFUSE, "body", 1, "form:refresh_token" },
	{ "form: malformed escape", FORM, "POST", "/oauth/t", false, false,
	  "refresh_token=" PA "%zz", SUBST_REFUSE, "unreadable", 0, NULL },
	{ "json member", JSON, "POST", "/oauth/t", false, false,
	  "{\"auth\": {\"rt\": \"" PA "\"}, \"n\": [1, true, null]}", SUBST_REWRITE,
	  "{\"auth\":{\"rt\":\"rt-real-AAAA-1111\"},\"n\":[1,true,null]}", 0, NULL },
	{ "json member, escaped placeholder", "application/vnd.x+json", "POST", "/oauth/t", false,
	  false, "{\"auth\": {\"rt\": \"\\u0061irlock-ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc7Hd4Jf6Gs0Ty\"}}",
	  SUBST_REWRITE, "{\"auth\":{\"rt\":\"rt-real-AAAA-1111\"}}", 0, NULL },
	{ "json: another member", JSON, "POST", "/oauth/t", false, false,
	  "{\"auth\": {\"x\": \"" PA "\"}}", SUBST_REFUSE, "body", 0, "json:/auth/x" },
	{ "json: in an array", JSON, "POST", "/oauth/t", false, false,
	  "{\"auth\": [\"" PA "\"]}", SUBST_REFUSE, "body", 0, "json:/auth/0" },
	{ "json: as a member name", JSON, "POST", "/oauth/t", false, false,
	  "{\"" PA "\": 1}", SUBST_REFUSE, "body", 0, NULL },
	{ "json: duplicate member", JSON, "POST", "/oauth/t", false, false,
	  "{\"auth\": {\"rt\": \"" PA "\", \"rt\": \"x\"}}", SUBST_REFUSE, "unreadable", 0, NULL },
	{ "json: not JSON", JSON, "POST", "/oauth/t", false, false, "{\"auth\": " PA,
	  SUBST_REFUSE, "unreadable", 0, NULL },
	{ "another type", "text/plain", "POST", "/oauth/t", false, false, "refresh_token=" PA,
	  SUBST_REFUSE, "body", 0, NULL },
	{ "no type", NULL, "POST", "/oauth/t", false, false, "x " PA, SUBST_REFUSE, "body", 0,
	  NULL },
};

static void test_bodies(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct body_case *c = &cases[i];
		struct bodysubst_request q = { c->method, c->path, c->ctype,
					       c->other_host ? &other : &api, 443, !c->plain };
		struct bodysubst_result r = { 0 };

		bodysubst_decide(&set, &q, c->body, strlen(c->body), &r);
		tap_is_int((int)r.verdict, (int)c->verdict, "%s: verdict", c->name);
		if (c->verdict == SUBST_REWRITE && r.verdict == SUBST_REWRITE) {
			char *got = util_xstrndup(r.body, r.len);

			tap_is_str(got, c->want, "%s: body", c->name);
			free(got);
			tap_ok(r.ninj == 1 && r.inj[0].secret == 0, "%s: one injection", c->name);
		}
		if (c->verdict == SUBST_REFUSE && r.verdict == SUBST_REFUSE) {
			tap_is_str(r.why, c->want, "%s: why", c->name);
			tap_ok(r.secret == c->secret, "%s: the secret", c->name);
			tap_ok((!c->field && !r.field) ||
				       (c->field && r.field && strcmp(c->field, r.field) == 0),
			       "%s: field %s", c->name, r.field ? r.field : "(none)");
		}
		bodysubst_result_free(&r);
	}
	tap_ok(bodysubst_wanted(&set, &api, 443), "a host where a body-field secret is bound");
	tap_ok(!bodysubst_wanted(&set, &other, 443), "... not another");
}

static void test_capture(void)
{
	char *json[] = { "/token", "/a~1b/0" }, err[200], *ph;
	struct policy_capture rule = { .json = json, .njson = 2, .expires = "/exp" };
	struct capture_value v[CAPTURE_VALUES_MAX];
	time_t exp;
	size_t phlen;
	int n;
	const char *ok = "{\"token\": \"ghs_abcdefghijklmnopqrstuvwxyz0123456789AB\", "
			 "\"a/b\": [\"second\"], \"exp\": \"2030-01-02T03:04:05Z\"}";

	tap_ok(capture_path_match("/sessions/*/scm-credentials", "/sessions/s1/scm-credentials"),
	       "'*' matches one segment");
	tap_ok(!capture_path_match("/sessions/*/scm-credentials", "/sessions/a/b/scm-credentials"),
	       "... never two");
	tap_ok(!capture_path_match("/sessions/*/scm-credentials", "/sessions//scm-credentials"),
	       "... never an empty one");
	tap_ok(!capture_path_match("/sessions/*/x", "/sessions/s1/x/y"), "paths are exact");
	tap_ok(!capture_path_match("/a", "/ab"), "segments whole");

	n = capture_json(&rule, ok, strlen(ok), 1000, v, &exp, err, sizeof(err));
	tap_is_int(n, 2, "two pointers, two values");
	tap_is_str(n > 0 ? v[0].value : "", "ghs_abcdefghijklmnopqrstuvwxyz0123456789AB",
		   "the value at /token");
	tap_is_str(n > 1 ? v[1].value : "", "second", "the value at /a~1b/0 (escaped pointer)");
	tap_is_int((int)(exp - 1893553445), 0, "the RFC 3339 expiry");
	capture_values_free(v, n > 0 ? (size_t)n : 0);
	n = capture_json(&rule, "{\"token\": \"t0123\", \"exp\": 60}", 29, 1000, v, &exp, err,
			 sizeof(err));
	tap_ok(n == 1 && exp == 1060, "a number of seconds from now");
	capture_values_free(v, n > 0 ? (size_t)n : 0);
	n = capture_json(&rule, "{\"x\": 1}", 8, 1000, v, &exp, err, sizeof(err));
	tap_ok(n == 0 && exp == 0, "no value: nothing captured");
	tap_is_int(capture_json(&rule, "{\"token\": 5}", 12, 0, v, &exp, err, sizeof(err)), -1,
		   "a number where a credential should be: refused");
	tap_is_int(capture_json(&rule, "nope", 4, 0, v, &exp, err, sizeof(err)), -1,
		   "not JSON: refused");
	tap_is_int(capture_json(&rule, "{\"token\": \"t\", \"exp\": \"soon\"}", 29, 0, v, &exp,
				err, sizeof(err)),
		   -1, "an unreadable expiry: refused");

	ph = capture_placeholder("ghs_abcdefghijklmnopqrstuvwxyz0123456789AB", 42, &phlen);
	tap_ok(ph && phlen == 42 && strncmp(ph, "ghs_", 4) == 0 &&
		       strspn(ph + 4, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") ==
			       38 &&
		       strcmp(ph, "ghs_abcdefghijklmnopqrstuvwxyz0123456789AB") != 0,
	       "placeholder: prefix kept, same length and alphabet, random");
	free(ph);
	ph = capture_placeholder("0123456789abcdef0123456789abcdef01234567", 40, &phlen);
	tap_ok(ph && phlen == 40 && strspn(ph, "0123456789abcdef") == 40,
	       "placeholder of a hex token: hex, no prefix");
	free(ph);
	ph = capture_placeholder("short", 5, &phlen);
	tap_ok(ph && phlen == BROKER_RANDOM_MIN, "a short value: at least %d random characters",
	       BROKER_RANDOM_MIN);
	free(ph);
}

int main(void)
{
	setup();
	test_bodies();
	test_capture();
	return tap_done();
}
