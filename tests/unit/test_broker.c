/* SPDX-License-Identifier: Apache-2.0
 * test_broker.c - placeholders: their alphabet class, length, randomness
 * (no modulo bias), prefixes; reading secrets and refusing bad values
 * without printing them.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker.h"
#include "hostname.h"
#include "http.h"
#include "policy.h"
#include "scrub.h"
#include "subst.h"
#include "tap.h"
#include "util.h"

struct class_case {
	const char *prefix;
	const char *value;
	enum broker_alphabet want;
};

static const struct class_case class_cases[] = {
	{ "airlock-ph-x-", "0123456789", BROKER_ALPHABET_DIGITS },
	{ "airlock-ph-x-", "deadbeef0042", BROKER_ALPHABET_HEX_LOWER },
	{ "airlock-ph-x-", "DEADBEEF0042", BROKER_ALPHABET_HEX_UPPER },
	{ "airlock-ph-x-", "abcxyz0123", BROKER_ALPHABET_ALNUM_LOWER },
	{ "airlock-ph-x-", "ABCXYZ0123", BROKER_ALPHABET_ALNUM_UPPER },
	{ "airlock-ph-x-", "abcXYZ0123", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "ghp_abcXYZ0123", BROKER_ALPHABET_BASE64URL },
	{ "airlock-ph-x-", "xoxb-123-abc", BROKER_ALPHABET_BASE64URL },
	{ "airlock-ph-x-", "ab+cd/EF09", BROKER_ALPHABET_BASE64 },
	/* padding is not part of the alphabet */
	{ "airlock-ph-x-", "dGVzdA==", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "dGV+zdA=", BROKER_ALPHABET_BASE64 },
	{ "airlock-ph-x-", "====", BROKER_ALPHABET_BASE62 },
	/* no class holds these: the default */
	{ "airlock-ph-x-", "a-b+c", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "a.b", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "pass word", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "\xc3\xa9t\xc3\xa9", BROKER_ALPHABET_BASE62 },
	{ "airlock-ph-x-", "", BROKER_ALPHABET_BASE62 },
	/* the prefix is not the value's own alphabet */
	{ "sk-ant-api03-", "sk-ant-api03-0123abcdef", BROKER_ALPHABET_HEX_LOWER },
	{ "sk-", "sk-ABC-def", BROKER_ALPHABET_BASE64URL },
	{ "sk-ant-api03-", "sk-ant-api03-", BROKER_ALPHABET_BASE62 },
	/* a value that does not start with the prefix is judged whole */
	{ "sk-ant-", "0123", BROKER_ALPHABET_DIGITS },
	{ "sk-ant-", "sk-an", BROKER_ALPHABET_BASE64URL },
};

static void test_classes(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(class_cases); i++) {
		const struct class_case *c = &class_cases[i];
		enum broker_alphabet got =
			broker_alphabet_of(c->prefix, c->value, strlen(c->value));

		tap_is_str(broker_alphabet_to_string(got), broker_alphabet_to_string(c->want),
			   "class of '%s' after '%s'", c->value, c->prefix);
	}
	tap_is_str(broker_alphabet_to_string(BROKER_ALPHABET_COUNT), "?",
		   "an out-of-range class has a name");
}

static bool all_in(const char *s, size_t n, const char *chars)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strchr(chars, s[i]) || s[i] == '\0')
			return false;
	return true;
}

struct shape_case {
	const char *prefix;
	size_t value_len;  /* the value: prefix (when it fits) + 'a'... */
	char fill;         /* the character the value is made of */
	size_t want_len;
	enum broker_alphabet cls;
};

static const struct shape_case shape_cases[] = {
	/* short values: prefix + 32 */
	{ "airlock-ph-x-", 10, '7', 13 + 32, BROKER_ALPHABET_DIGITS },
	{ "airlock-ph-x-", 1, 'f', 13 + 32, BROKER_ALPHABET_HEX_LOWER },
	{ "airlock-ph-x-", 45, 'Z', 45, BROKER_ALPHABET_ALNUM_UPPER },
	/* long values: exactly their length */
	{ "sk-ant-api03-", 108, 'q', 108, BROKER_ALPHABET_ALNUM_LOWER },
	{ "x", 200, '_', 200, BROKER_ALPHABET_BASE64URL },
	{ "x", 33, '/', 33, BROKER_ALPHABET_BASE64 },
	{ "x", 32, '/', 33, BROKER_ALPHABET_BASE64 },
	/* no prefix: random characters only */
	{ "", 20, '3', 32, BROKER_ALPHABET_DIGITS },
	{ "", 64, 'A', 64, BROKER_ALPHABET_ALNUM_UPPER },
};

static void test_shapes(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(shape_cases); i++) {
		const struct shape_case *c = &shape_cases[i];
		size_t plen = strlen(c->prefix), len = 0;
		char *value = util_xmalloc(c->value_len + 1), *a, *b;
		char err[200];

		memset(value, c->fill, c->value_len);
		if (c->value_len >= plen)
			memcpy(value, c->prefix, plen);
		value[c->value_len] = '\0';
		a = broker_placeholder_make(c->prefix, value, c->value_len, &len, err,
					    sizeof(err));
		b = broker_placeholder_make(c->prefix, value, c->value_len, &len, err,
					    sizeof(err));
		if (!tap_ok(a && b, "placeholder for %zu x '%c' after '%s'", c->value_len,
			    c->fill, c->prefix)) {
			tap_diag("%s", err);
			free(a);
			free(b);
			free(value);
			continue;
		}
		tap_is_int(strlen(a), c->want_len, "  its length");
		tap_is_int(len, c->want_len, "  the length returned");
		tap_ok(strncmp(a, c->prefix, plen) == 0, "  starts with the prefix");
		tap_ok(all_in(a + plen, len - plen, broker_alphabet_chars(c->cls)),
		       "  the rest is %s", broker_alphabet_to_string(c->cls));
		tap_ok(strcmp(a, b) != 0, "  two placeholders differ");
		free(a);
		free(b);
		free(value);
	}
}

struct prefix_case {
	const char *prefix;
	bool ok;
};

static const struct prefix_case prefix_cases[] = {
	{ "airlock-ph-x-", true },
	{ "sk-ant-api03-", true },
	{ "~!@#$%^&*()_+", true },
	{ "", true },
	{ "with space", false },
	{ "tab\t", false },
	{ "nl\n", false },
	{ "\xc3\xa9", false },
	{ "del\x7f", false },
};

static void test_prefixes(void)
{
	char longp[BROKER_PREFIX_MAX + 2];
	size_t i, len;
	char err[200], *ph;

	for (i = 0; i < ARRAY_SIZE(prefix_cases); i++) {
		const struct prefix_case *c = &prefix_cases[i];

		err[0] = '\0';
		ph = broker_placeholder_make(c->prefix, "v", 1, &len, err, sizeof(err));
		tap_ok((ph != NULL) == c->ok, "prefix %zu ('%s') %s", i,
		       strpbrk(c->prefix, "\t\n") ? "a control byte" : c->prefix,
		       c->ok ? "accepted" : "refused");
		if (!c->ok)
			tap_ok(err[0] != '\0', "  with a reason (%s)", err);
		free(ph);
	}
	memset(longp, 'p', sizeof(longp) - 1);
	longp[BROKER_PREFIX_MAX] = '\0';
	ph = broker_placeholder_make(longp, "v", 1, &len, err, sizeof(err));
	tap_ok(ph != NULL, "a prefix of %d characters is accepted", BROKER_PREFIX_MAX);
	free(ph);
	longp[BROKER_PREFIX_MAX] = 'p';
	longp[BROKER_PREFIX_MAX + 1] = '\0';
	ph = broker_placeholder_make(longp, "v", 1, &len, err, sizeof(err));
	tap_ok(ph == NULL, "a prefix of %d characters is refused", BROKER_PREFIX_MAX + 1);
	free(ph);
}

/* Digits: 256 % 10 = 6, so "byte % 10" would make 0-5 each 26/256 likely
 * and 6-9 25/256: over 400,000 draws, 0-5 would average ~1,560 more than
 * 6-9 each. Unbiased, the difference of the two averages has a standard
 * deviation near 130. */
static void test_no_modulo_bias(void)
{
	const size_t n = 400000;
	char *value = util_xmalloc(n + 1), *ph, err[100];
	long count[10] = { 0 };
	double low = 0, high = 0;
	size_t i, len = 0;

	memset(value, '5', n);
	value[n] = '\0';
	ph = broker_placeholder_make("d", value, n, &len, err, sizeof(err));
	ASSERT(ph && len == n);
	for (i = 1; i < len; i++)
		count[ph[i] - '0']++;
	for (i = 0; i < 6; i++)
		low += (double)count[i] / 6;
	for (i = 6; i < 10; i++)
		high += (double)count[i] / 4;
	tap_ok(low - high < 650 && high - low < 650,
	       "digits are drawn uniformly (0-5: %.0f, 6-9: %.0f on average)", low, high);
	free(ph);
	free(value);
}

static struct policy *load(const char *json)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(json, strlen(json), NULL, &errs);

	if (!p)
		tap_diag("policy: %s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
	policy_errors_free(&errs);
	ASSERT(p);
	return p;
}

static void test_load(void)
{
	struct policy *p = load("{\"version\":1,\"secrets\":{"
				"\"tok\":{\"from_env\":\"TB_TOK\",\"hosts\":[\"a.example.test\"]},"
				"\"long\":{\"from_env\":\"TB_LONG\",\"hosts\":[\"a.example.test\"]}}}");
	const char *longv = "ghp_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH";
	struct broker b;
	char err[300];

	setenv("TB_TOK", "s3cr3t-VALUE", 1);
	setenv("TB_LONG", longv, 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), 0, "two secrets load");
	tap_is_int(b.count, 2, "  both");
	tap_ok(strncmp(b.secrets[0].placeholder, "airlock-ph-tok-", 15) == 0 &&
		       b.secrets[0].placeholder_len == 15 + 32,
	       "  a short value: airlock-ph-tok- and 32 characters (%s)",
	       b.secrets[0].placeholder);
	tap_ok(all_in(b.secrets[0].placeholder + 15, 32,
		      broker_alphabet_chars(BROKER_ALPHABET_BASE64URL)),
	       "  of the value's class (base64url)");
	tap_is_int(b.secrets[1].placeholder_len, strlen(longv),
		   "  a long value: a placeholder of its length");
	tap_ok(b.secrets[0].value_len == 12 && memcmp(b.secrets[0].value, "s3cr3t-VALUE", 12) == 0,
	       "  the value is held");
	broker_free(&b);
	tap_ok(b.count == 0 && b.secrets == NULL, "broker_free empties the broker");

	setenv("TB_TOK", "bad\r\nX-Injected: 1", 1);
	err[0] = '\0';
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "a value with CR LF is refused");
	tap_ok(strstr(err, "control character") && strstr(err, "tok") &&
		       !strstr(err, "Injected"),
	       "  naming the secret, not the value (%s)", err);
	tap_ok(b.count == 0 && b.secrets == NULL, "  and nothing is kept");

	setenv("TB_TOK", "", 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "an empty value is refused");
	tap_ok(strstr(err, "empty") != NULL, "  (%s)", err);

	unsetenv("TB_TOK");
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "an unset variable is refused");
	tap_ok(strstr(err, "TB_TOK") != NULL, "  naming it (%s)", err);

	/* "77" turns up in 32 random digits about one time in four: the
	 * placeholder is drawn again, so 20 sessions all succeed and none
	 * hands the agent the value (without the second draw, all 20 would
	 * succeed with probability 0.2%%). */
	setenv("TB_TOK", "77", 1);
	{
		int k, good = 0;

		for (k = 0; k < 20; k++) {
			if (broker_load(&b, p, err, sizeof(err)) == 0) {
				good += memmem(b.secrets[0].placeholder,
					       b.secrets[0].placeholder_len, "77", 2) == NULL;
				broker_free(&b);
			}
		}
		tap_is_int(good, 20, "a placeholder never holds a short value");
	}
	/* The default prefix airlock-ph-tok- holds "tok" whatever is drawn. */
	setenv("TB_TOK", "tok", 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1,
		   "a value that every placeholder would hold is refused");
	tap_ok(strstr(err, "too short") || strstr(err, "this short"), "  (%s)", err);
	unsetenv("TB_TOK");
	unsetenv("TB_LONG");
	policy_free(p);
}

static void test_file(void)
{
	char dir[] = "/tmp/test_broker.XXXXXX", path[64], json[256];
	struct policy *p;
	struct broker b;
	char err[300];
	FILE *f;

	ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/secret", dir);
	snprintf(json, sizeof(json),
		 "{\"version\":1,\"secrets\":{\"f\":{\"from_file\":\"%s\","
		 "\"env\":\"F_TOKEN\",\"hosts\":[\"a.example.test\"]}}}", path);
	p = load(json);

	f = fopen(path, "w");
	ASSERT(f);
	fputs("0123456789abcdef0123\r\n", f);
	fclose(f);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), 0, "a from_file secret loads");
	tap_ok(b.secrets[0].value_len == 20, "  without its CRLF");
	tap_ok(all_in(b.secrets[0].placeholder + 13, 32,
		      broker_alphabet_chars(BROKER_ALPHABET_HEX_LOWER)),
	       "  a hex value gets a hex placeholder (%s)", b.secrets[0].placeholder);
	broker_free(&b);

	f = fopen(path, "w");
	ASSERT(f);
	fwrite("abc\0def", 1, 7, f);
	fclose(f);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "a NUL in the file is refused");
	tap_ok(strstr(err, "0x00") != NULL, "  (%s)", err);

	unlink(path);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "a missing file is refused");
	tap_ok(strstr(err, path) != NULL, "  naming it (%s)", err);
	rmdir(dir);
	policy_free(p);
}

/* The policy's prefix, and the broker's secrets as subst.c and scrub.c
 * take them: a request through the decision gets the real value, a
 * response through the scrubber gets the placeholder back. */
static void test_prefix_and_glue(void)
{
	struct policy *p = load("{\"version\":1,\"secrets\":{"
				"\"ant\":{\"from_env\":\"TB_ANT\",\"prefix\":\"sk-ant-api03-\","
				"\"hosts\":[\"api.example.test\"],\"headers\":[\"x-api-key\"],"
				"\"paths\":[\"/v1/\"],\"methods\":[\"POST\"]},"
				"\"bare\":{\"from_env\":\"TB_BARE\",\"prefix\":\"\","
				"\"env\":\"BARE\",\"hosts\":[\"b.example.test\"]}}}");
	char ant[109], err[300], head[512], *text;
	struct subst_secret ss[2];
	struct scrub_needle sn[2];
	struct http_request req;
	struct host_target t;
	struct subst_result r;
	struct scrub_set *set;
	struct scrub_buf out = { 0 };
	struct broker b;
	size_t len;

	memcpy(ant, "sk-ant-api03-", 13);
	memset(ant + 13, 'x', 95);
	memcpy(ant + 100, "-AbCdEfG", 8);
	ant[108] = '\0';
	setenv("TB_ANT", ant, 1);
	setenv("TB_BARE", "0123456789", 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), 0, "secrets with prefixes load");
	tap_ok(strncmp(b.secrets[0].placeholder, "sk-ant-api03-", 13) == 0 &&
		       b.secrets[0].placeholder_len == 108,
	       "  the policy's prefix, and the value's length");
	tap_ok(all_in(b.secrets[0].placeholder + 13, 95,
		      broker_alphabet_chars(BROKER_ALPHABET_BASE64URL)),
	       "  in the class of the value after the prefix");
	tap_ok(b.secrets[1].placeholder_len == 32 &&
		       all_in(b.secrets[1].placeholder, 32, "0123456789"),
	       "  an empty prefix: 32 random digits for a digit value");

	text = broker_placeholders_text(&b, &len);
	snprintf(head, sizeof(head), "TB_ANT=%s\nBARE=%s\n", b.secrets[0].placeholder,
		 b.secrets[1].placeholder);
	tap_ok(len == strlen(head) && strcmp(text, head) == 0,
	       "the placeholders file: ENV=PLACEHOLDER lines");
	tap_ok(!strstr(text, ant) && !strstr(text, "0123456789"), "  without a value");
	free(text);

	broker_subst_secrets(&b, ss);
	snprintf(head, sizeof(head),
		 "POST /v1/messages HTTP/1.1\r\nHost: api.example.test\r\n"
		 "x-api-key: %s\r\nContent-Length: 0\r\n\r\n", b.secrets[0].placeholder);
	ASSERT(http_parse_request(head, strlen(head), &req, NULL) == HTTP_OK);
	ASSERT(hostname_normalise("api.example.test", 16, &t) == HOSTNAME_OK);
	subst_decide(&(struct subst_set){ .secrets = ss, .n = 2, .ports = p->ports,
					  .nports = p->nports },
		     &req, &t, 443, true, &r);
	tap_ok(r.verdict == SUBST_REWRITE && r.nrewrites == 1 && r.rewrites[0].header == 1 &&
		       r.rewrites[0].len == 108 && memcmp(r.rewrites[0].value, ant, 108) == 0 &&
		       r.ninjections == 1 && r.injections[0].secret == 0,
	       "broker -> subst: the bound request gets the real value");
	subst_result_free(&r);
	snprintf(head, sizeof(head),
		 "GET /v1/messages HTTP/1.1\r\nHost: api.example.test\r\n"
		 "x-api-key: %s\r\n\r\n", b.secrets[0].placeholder);
	ASSERT(http_parse_request(head, strlen(head), &req, NULL) == HTTP_OK);
	subst_decide(&(struct subst_set){ .secrets = ss, .n = 2, .ports = p->ports,
					  .nports = p->nports },
		     &req, &t, 443, true, &r);
	tap_ok(r.verdict == SUBST_REFUSE && r.why == SUBST_WHY_METHOD,
	       "  a method the policy does not list is refused");
	subst_result_free(&r);

	broker_scrub_needles(&b, sn);
	set = scrub_set_new(sn, 2);
	scrub_oneshot(set, ant, 108, &out, NULL);
	tap_ok(out.len == 108 && memcmp(out.data, b.secrets[0].placeholder, 108) == 0,
	       "broker -> scrub: the value comes back as the placeholder");
	tap_ok(scrub_set_keeps_length(set) == false, "  (the short value changes lengths)");
	scrub_buf_free(&out);
	scrub_set_free(set);
	broker_free(&b);
	unsetenv("TB_ANT");
	unsetenv("TB_BARE");
	policy_free(p);
}

int main(void)
{
	test_classes();
	test_shapes();
	test_prefixes();
	test_no_modulo_bias();
	test_load();
	test_file();
	test_prefix_and_glue();
	return tap_done();
}
