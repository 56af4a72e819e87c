/* SPDX-License-Identifier: Apache-2.0
 * test_intercept.c - which hosts the proxy intercepts (a table of
 * policies and targets), and the key holder's leaf requests as a real
 * process: a leaf for an intercepted host chains to the session CA the
 * supervisor is given; a host the policy does not intercept, a name that
 * is not normalised, or a session without a CA is refused, and the worker
 * keeps its channel.
 */
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intercept.h"
#include "keeper.h"
#include "policy.h"
#include "filter.h"
#include "receipt.h"
#include "tap.h"
#include "tls_ca.h"
#include "util.h"

static const char policy_text[] =
	"{\"version\": 1, \"mode\": \"enforce\","
	" \"egress\": {\"ports\": [443, 8443], \"intercept\": [\"*.audit.test\", \"exact.test:9443\"]},"
	" \"secrets\": {\"k\": {\"from_env\": \"K\", \"hosts\": [\"api.test\", \"10.0.0.7\"]},"
	"   \"s3\": {\"kind\": \"aws\", \"from_env\": {\"access_key_id\": \"AK\","
	"     \"secret_access_key\": \"SK\"}, \"hosts\": [\"s3.aws.test\"]}},"
	" \"git\": {\"hosts\": [\"git.test\"], \"api_hosts\": [\"api.git.test\"]},"
	" \"spend\": {\"cap_usd\": 1, \"ledger\": null,"
	"   \"providers\": [{\"api\": \"anthropic\", \"hosts\": [\"llm.test\"]}],"
	"   \"prices\": {\"m\": {\"input\": 1, \"output\": 1}}}}";

static struct policy *load(const char *text, const char *mode)
{
	struct policy_errors errs = { 0 };
	enum policy_mode m;
	struct policy *p;

	ASSERT(policy_mode_from_string(mode, &m));
	p = policy_parse(text, strlen(text), &m, &errs);
	if (!p)
		fprintf(stderr, "# %s: %s\n", errs.items[0].path, errs.items[0].message);
	ASSERT(p);
	return p;
}

static struct host_target target(const char *host)
{
	struct host_target t;

	ASSERT(hostname_normalise(host, strlen(host), &t) == HOSTNAME_OK);
	return t;
}

static void test_hosts(void)
{
	static const struct {
		const char *host;
		uint16_t port;
		bool want, named;
	} cases[] = {
		{ "api.test", 443, true, true },      /* a secret's host, egress.ports */
		{ "api.test", 8443, true, true },
		{ "api.test", 80, false, true },      /* not in egress.ports */
		{ "API.test.", 443, true, true },     /* normalised */
		{ "other.test", 443, false, false },
		{ "10.0.0.7", 443, true, true },      /* an address rule */
		{ "git.test", 443, true, true },      /* git.hosts: 443 only */
		{ "git.test", 8443, false, true },
		{ "api.git.test", 443, true, true },
		{ "llm.test", 443, true, true },      /* a spend provider */
		{ "llm.test", 80, false, true },
		{ "x.audit.test", 443, true, true },  /* egress.intercept */
		{ "a.b.audit.test", 8443, true, true },
		{ "audit.test", 443, false, false },  /* *. is below only */
		{ "exact.test", 9443, true, true },   /* a rule with its port */
		{ "exact.test", 443, false, true },
	};
	struct policy *p = load(policy_text, "enforce");
	struct policy *off = load(policy_text, "off");
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct host_target t = target(cases[i].host);

		tap_is_int(intercept_host_wanted(p, &t, cases[i].port), cases[i].want,
			   "%s:%u is %sintercepted", cases[i].host, cases[i].port,
			   cases[i].want ? "" : "not ");
		tap_is_int(intercept_host_named(p, &t), cases[i].named,
			   "%s: a leaf may %sbe issued", cases[i].host,
			   cases[i].named ? "" : "not ");
		tap_is_int(intercept_host_wanted(off, &t, cases[i].port), 0,
			   "%s:%u: nothing is intercepted in mode off", cases[i].host,
			   cases[i].port);
	}
	policy_free(p);
	policy_free(off);
}

static char tmpdir[] = "/tmp/airlock-test-intercept.XXXXXX";

/* Does @pem's first certificate name @host and chain to @ca_pem? */
static bool leaf_ok(const char *pem, const char *ca_pem, const char *host)
{
	BIO *b = BIO_new_mem_buf(pem, -1), *cb = BIO_new_mem_buf(ca_pem, -1);
	X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
	X509 *ca = PEM_read_bio_X509(cb, NULL, NULL, NULL);
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	bool ok = leaf && ca && st && ctx && X509_STORE_add_cert(st, ca) == 1 &&
		  X509_STORE_CTX_init(ctx, st, leaf, NULL) == 1 &&
		  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0) == 1 &&
		  X509_verify_cert(ctx) == 1;

	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	X509_free(leaf);
	X509_free(ca);
	BIO_free(b);
	BIO_free(cb);
	return ok;
}

static void test_leaves(void)
{
	struct policy *p = load(policy_text, "enforce");
	struct keeper_config kc = { 0 };
	struct keeper k;
	struct keeper_link wl = { .fd = -1 };
	struct tls_leaf leaf;
	char err[512], *ca_pem = NULL, *events = util_xasprintf("%s/leaf.jsonl", tmpdir);
	json_t *sub;
	int64_t seq;

	kc.events = events;
	kc.session = "sess-intercept-test";
	kc.policy_digest = p->digest;
	kc.ca = true;
	kc.ca_policy = p;
	ASSERT(keeper_start(&kc, &k, err, sizeof(err)) == 0);
	if (keeper_wait_ready(&k, err, sizeof(err)) < 0) {
		tap_ok(false, "the key holder starts with a CA: %s", err);
		goto out;
	}
	sub = json_pack("{s:s}", "pubkey", k.pubkey);
	ASSERT(keeper_record(&k.link, false, "session.start", RECEIPT_INFO,
			     RECEIPT_POINT_SUPERVISOR, NULL, sub, NULL, &seq) == 0);
	json_decref(sub);
	tap_is_int(keeper_ca_cert(&k, &ca_pem, err, sizeof(err)), 0, "the supervisor gets the CA");
	tap_ok(ca_pem && strncmp(ca_pem, "-----BEGIN CERTIFICATE-----", 27) == 0,
	       "... as PEM");
	ASSERT(keeper_new_channel(&k, &wl.fd) == 0);

	tap_is_int(keeper_leaf(&wl, "api.test", &leaf, err, sizeof(err)), 0,
		   "a leaf for a secret's host");
	tap_ok(leaf.cert_pem && ca_pem && leaf_ok(leaf.cert_pem, ca_pem, "api.test"),
	       "... names it and chains to the session CA");
	tap_ok(leaf.key_pem && strstr(leaf.key_pem, "PRIVATE KEY"), "... with its key");
	tls_leaf_free(&leaf);
	tap_is_int(keeper_leaf(&wl, "10.0.0.7", &leaf, err, sizeof(err)), 0,
		   "a leaf for an address a secret binds");
	tls_leaf_free(&leaf);

	tap_is_int(keeper_leaf(&wl, "other.test", &leaf, err, sizeof(err)), -1,
		   "a host the policy does not intercept: refused");
	tap_ok(strstr(err, "does not intercept") != NULL, "... saying so (%s)", err);
	tap_ok(leaf.cert_pem == NULL && leaf.key_pem == NULL, "... and nothing is handed out");
	tap_is_int(keeper_leaf(&wl, "API.test", &leaf, err, sizeof(err)), -1,
		   "a name that is not normalised: refused");
	tap_is_int(keeper_leaf(&wl, "x.audit.test", &leaf, err, sizeof(err)), 0,
		   "the worker keeps its channel after a refusal");
	tls_leaf_free(&leaf);
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "the session ends");
out:
	keeper_link_close(&wl);
	keeper_release(&k);
	free(ca_pem);
	unlink(events);
	free(events);
	policy_free(p);

	/* without a CA */
	{
		struct policy *q = load(policy_text, "enforce");
		char *ev = util_xasprintf("%s/noca.jsonl", tmpdir);
		struct keeper_config nc = { .events = ev, .session = "sess-noca",
					    .policy_digest = q->digest };
		struct keeper_link l2 = { .fd = -1 };
		char *pem = NULL;

		ASSERT(keeper_start(&nc, &k, err, sizeof(err)) == 0);
		ASSERT(keeper_wait_ready(&k, err, sizeof(err)) == 0);
		sub = json_pack("{s:s}", "pubkey", k.pubkey);
		ASSERT(keeper_record(&k.link, false, "session.start", RECEIPT_INFO,
				     RECEIPT_POINT_SUPERVISOR, NULL, sub, NULL, &seq) == 0);
		json_decref(sub);
		tap_ok(keeper_ca_cert(&k, &pem, err, sizeof(err)) == 0 && pem == NULL,
		       "without a CA the supervisor gets none");
		ASSERT(keeper_new_channel(&k, &l2.fd) == 0);
		tap_is_int(keeper_leaf(&l2, "api.test", &leaf, err, sizeof(err)), -1,
			   "without a CA no leaf is issued");
		(void)keeper_end(&k, 0, err, sizeof(err));
		keeper_link_close(&l2);
		keeper_release(&k);
		unlink(ev);
		free(ev);
		policy_free(q);
	}
}

/* The filter table: its order, and each filter answers for its own hosts
 * (intercept.c asks them all, and egress.intercept itself). */
static void test_filter_table(void)
{
	static const struct {
		const char *host;
		uint16_t port;
		const char *needs; /* the filters that say yes, in table order */
	} cases[] = {
		{ "api.test", 443, "secrets" },
		{ "s3.aws.test", 443, "aws secrets" },
		{ "git.test", 443, "git" },
		{ "git.test", 8443, "" },
		{ "api.git.test", 443, "git" },
		{ "llm.test", 443, "spend" },
		{ "x.audit.test", 443, "" }, /* egress.intercept: no filter's */
		{ "other.test", 443, "" },
	};
	struct policy *p = load(policy_text, "enforce");
	char got[64];
	size_t i, j;

	tap_is_int((int)filter_table_len, 4, "four filters in the table");
	tap_is_str(filter_table[0]->name, "aws", "aws runs first (it re-signs before placeholders are looked for)");
	tap_is_str(filter_table[1]->name, "secrets", "then secrets");
	tap_is_str(filter_table[2]->name, "git", "then git");
	tap_is_str(filter_table[3]->name, "spend", "then spend");
	for (i = 0; i < filter_table_len; i++)
		tap_is_str(filter_table[i]->ops->name, filter_table[i]->name,
			   "entry %zu: its ops are the %s filter's", i, filter_table[i]->name);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct host_target t = target(cases[i].host);

		got[0] = '\0';
		for (j = 0; j < filter_table_len; j++)
			if (filter_table[j]->ops->needs_cleartext(p, &t, cases[i].port, false))
				snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
					 got[0] ? " " : "", filter_table[j]->name);
		tap_is_str(got, cases[i].needs, "%s:%u: the filters that need it in clear",
			   cases[i].host, cases[i].port);
	}
	policy_free(p);
}

int main(void)
{
	ASSERT(mkdtemp(tmpdir));
	signal(SIGPIPE, SIG_IGN);
	test_hosts();
	test_filter_table();
	test_leaves();
	rmdir(tmpdir);
	return tap_done();
}
