/* SPDX-License-Identifier: Apache-2.0
 * test_aws_secret.c - secrets of kind aws: the policy (one entry per
 * credential, defaults, errors naming their JSON path, the canonical form
 * round trip) and the broker (placeholders shaped like the real values:
 * AKIA/ASIA kept, lengths and alphabets; never substituted by the generic
 * broker; every value in the scrubbing set).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "policy.h"
#include "subst.h"
#include "tap.h"
#include "util.h"

#define GOOD                                                                    \
	"{\"version\": 1, \"secrets\": {\"aws\": {\"kind\": \"aws\", \"from_env\": " \
	"{\"access_key_id\": \"TA_KEY\", \"secret_access_key\": \"TA_SECRET\", "   \
	"\"session_token\": \"TA_TOKEN\"}}}}"

static bool has_error(const struct policy_errors *e, const char *path, const char *msg)
{
	size_t i;

	for (i = 0; i < e->count; i++)
		if (strcmp(e->items[i].path, path) == 0 && strstr(e->items[i].message, msg))
			return true;
	return false;
}

static void test_policy(void)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(GOOD, strlen(GOOD), NULL, &errs), *q;
	char rule[HOSTNAME_MAX + 64];
	size_t k;

	tap_ok(p != NULL, "kind aws with from_env: valid");
	if (!p)
		return;
	tap_is_int(p->nsecrets, 3, "one entry per credential");
	for (k = 0; k < 3; k++) {
		tap_is_str(p->secrets[k].name, "aws", "entry %zu: the secret's name", k);
		tap_is_int(p->secrets[k].aws, POLICY_AWS_KEY_ID + (int)k, "entry %zu: its part", k);
		tap_is_int(p->secrets[k].nhosts, 1, "entry %zu: one host rule", k);
		host_rule_format(&p->secrets[k].hosts[0], rule, sizeof(rule));
		tap_is_str(rule, "**.amazonaws.com", "entry %zu: hosts default to **.amazonaws.com", k);
	}
	tap_is_str(p->secrets[1].from_env, "TA_SECRET", "the secret access key's variable");
	tap_is_str(p->secrets[2].env, "TA_TOKEN", "env defaults to the from_env names");
	tap_ok(strstr(p->canonical, "\"kind\":\"aws\"") != NULL,
	       "the canonical form shows one secret of kind aws");
	q = policy_parse(p->canonical, strlen(p->canonical), NULL, &errs);
	tap_ok(q && strcmp(q->digest, p->digest) == 0,
	       "the canonical form parses back to the same digest");
	policy_free(q);
	policy_free(p);

	{
		const char *t = "{\"version\": 1, \"secrets\": {\"s3\": {\"kind\": \"aws\", "
				"\"from_file\": {\"access_key_id\": \"/k\", "
				"\"secret_access_key\": \"/s\"}, \"hosts\": [\"minio.example\"]}}}";

		p = policy_parse(t, strlen(t), NULL, &errs);
		tap_ok(p && p->nsecrets == 2, "from_file without a session token: two entries");
		tap_ok(p && strcmp(p->secrets[0].env, "AWS_ACCESS_KEY_ID") == 0 &&
			       strcmp(p->secrets[1].env, "AWS_SECRET_ACCESS_KEY") == 0,
		       "from_file: the standard variables carry the placeholders");
		tap_ok(p && strcmp(p->secrets[1].from_file, "/s") == 0, "from_file: the file");
		tap_ok(p && p->secrets[1].nhosts == 1 &&
			       strcmp(p->secrets[1].hosts[0].name, "minio.example") == 0,
		       "hosts given replace the default, on every entry");
		policy_free(p);
		policy_errors_free(&errs);
	}

	{
		const char *t = "{\"version\": 1, \"secrets\": {"
				"\"a\": {\"kind\": \"aws\", \"prefix\": \"x\", \"from_env\": "
				"{\"access_key_id\": \"A\", \"bogus\": \"B\"}},"
				"\"b\": {\"from_env\": {\"access_key_id\": \"A\"}, \"hosts\": [\"x.com\"]},"
				"\"c\": {\"kind\": \"gcp\", \"from_env\": \"C\", \"hosts\": [\"x.com\"]},"
				"\"d\": {\"kind\": \"aws\", \"from_env\": \"D\"},"
				"\"e\": {\"kind\": \"aws\", \"from_env\": {\"access_key_id\": \"1x\", "
				"\"secret_access_key\": \"E\"}}}}";

		p = policy_parse(t, strlen(t), NULL, &errs);
		tap_ok(!p, "invalid kind aws secrets are refused");
		tap_ok(has_error(&errs, "secrets.a", "takes no prefix"),
		       "prefix with kind aws: an error at secrets.a");
		tap_ok(has_error(&errs, "secrets.a.from_env.bogus", "unknown key"),
		       "an unknown credential: named by its path");
		tap_ok(has_error(&errs, "secrets.a.from_env.secret_access_key", "required"),
		       "the secret access key is required");
		tap_ok(has_error(&errs, "secrets.b", "\"kind\": \"aws\" only"),
		       "an object from_env without kind aws: an error");
		tap_ok(has_error(&errs, "secrets.c.kind", "expected \"aws\""),
		       "another kind: an error at its path");
		tap_ok(has_error(&errs, "secrets.d", "must be an object"),
		       "kind aws with a string from_env: an error");
		tap_ok(has_error(&errs, "secrets.e.from_env.access_key_id", "variable name"),
		       "a bad variable name: named by its path");
		policy_free(p);
		policy_errors_free(&errs);
	}
}

static bool all_of(const char *s, size_t n, const char *chars)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strchr(chars, s[i]))
			return false;
	return true;
}

static void test_broker(void)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(GOOD, strlen(GOOD), NULL, &errs);
	const char *key = "ASIAREAL0KEY0ID12345", *secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
	const char *token = "FwoGZXIvYXdzEJr//////////wEaDOK+7example/token+value==";
	struct broker b = { 0 };
	char err[256];

	if (!p)
		return;
	setenv("TA_KEY", key, 1);
	setenv("TA_SECRET", secret, 1);
	setenv("TA_TOKEN", token, 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), 0, "the three credentials load");
	tap_is_int(b.count, 3, "... as three brokered values");
	if (b.count == 3) {
		struct subst_secret ss[3];

		tap_is_int(b.secrets[0].placeholder_len, strlen(key),
			   "the key id's placeholder has its length");
		tap_ok(strncmp(b.secrets[0].placeholder, "ASIA", 4) == 0 &&
			       all_of(b.secrets[0].placeholder + 4, 16,
				      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
		       "... ASIA kept, then 16 of 0-9 A-Z");
		tap_ok(strcmp(b.secrets[0].placeholder, key) != 0, "... and is not the key id");
		tap_is_int(b.secrets[1].placeholder_len, 40, "the secret's placeholder: 40 characters");
		tap_ok(all_of(b.secrets[1].placeholder, 40,
			      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/"),
		       "... of the secret's alphabet (base64)");
		tap_is_int(b.secrets[2].placeholder_len, strlen(token),
			   "the session token's placeholder has its length");
		broker_subst_secrets(&b, ss);
		tap_ok(ss[0].nhosts == 0 && ss[1].nhosts == 0 && ss[2].nhosts == 0,
		       "aws values are bound to no host for substitution (re-signed instead)");
	}
	broker_free(&b);
	setenv("TA_KEY", "AKIDEXAMPLE", 1);
	tap_is_int(broker_load(&b, p, err, sizeof(err)), 0, "a key id without AKIA/ASIA loads");
	tap_ok(b.count == 3 && b.secrets[0].placeholder_len == 16,
	       "... its placeholder: 16 random characters");
	broker_free(&b);
	unsetenv("TA_SECRET");
	tap_is_int(broker_load(&b, p, err, sizeof(err)), -1, "an unset credential fails the load");
	tap_ok(strstr(err, "TA_SECRET") != NULL && !strstr(err, secret),
	       "... naming the variable, never a value");
	unsetenv("TA_KEY");
	unsetenv("TA_TOKEN");
	policy_free(p);
}

int main(void)
{
	test_policy();
	test_broker();
	return tap_done();
}
