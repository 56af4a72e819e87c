/* SPDX-License-Identifier: Apache-2.0
 * test_filter_config.c - each filter of filter_table configured the way a
 * worker is: the supervisor's side writes the filter's block from its
 * holdings (config_put), the worker's side makes the filter from it
 * (make) and takes later ones (configure). What a filter holds comes
 * from its block alone; a block that does not match the policy, or has a
 * byte too many, is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awsfilter.h"
#include "broker.h"
#include "filter.h"
#include "gitcred.h"
#include "gitfilter.h"
#include "msg.h"
#include "policy.h"
#include "registry.h"
#include "secretfilter.h"
#include "spendfilter.h"
#include "tap.h"
#include "util.h"

static const char policy_text[] =
	"{\"version\": 1, \"mode\": \"enforce\","
	" \"secrets\": {\"k\": {\"from_env\": \"K\", \"hosts\": [\"api.test\"]},"
	"   \"s3\": {\"kind\": \"aws\", \"from_env\": {\"access_key_id\": \"AK\","
	"     \"secret_access_key\": \"SK\"}, \"hosts\": [\"s3.aws.test\"]}},"
	" \"git\": {\"hosts\": [\"git.test\"]}}";

#define TOKEN "ghs_0123456789012345678901234567890123456789"
#define TOKEN2 "ghs_abcdefghijabcdefghijabcdefghijabcdefghij"
#define GIT_PH "airlock-ph-gh-0123456789abcdefghijklmnopqrstuv"

static struct policy *load(void)
{
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(policy_text, strlen(policy_text), NULL, &errs);

	if (!p)
		fprintf(stderr, "# %s: %s\n", errs.items[0].path, errs.items[0].message);
	ASSERT(p);
	return p;
}

/* A broker as broker_load() would make it, of the first @n secrets of @p. */
static void fill_broker(struct broker *b, const struct policy *p, size_t n)
{
	size_t i;

	ASSERT(n <= p->nsecrets);
	b->secrets = util_xcalloc(n, sizeof(*b->secrets));
	b->count = n;
	for (i = 0; i < n; i++) {
		char v[64], ph[64];

		snprintf(v, sizeof(v), "value-%zu-of-the-secret-0123456789abcdef", i);
		snprintf(ph, sizeof(ph), "placeholder-%zu-0123456789abcdef012345", i);
		b->secrets[i].def = &p->secrets[i];
		b->secrets[i].value = util_xstrdup(v);
		b->secrets[i].value_len = strlen(v);
		b->secrets[i].placeholder = util_xstrdup(ph);
		b->secrets[i].placeholder_len = strlen(ph);
	}
}

/* Filter @d made as a worker makes it, from the block its config_put
 * writes from @src. */
static void *make(const struct filter_def *d, const struct filter_source *src,
		  struct filter_env *env, char *err, size_t errlen)
{
	struct msg blk = { 0 };
	struct msg_reader r;
	int fd = -1;
	void *f;

	err[0] = '\0';
	msg_start_block(&blk, FILTER_CONFIG_MAX);
	ASSERT(!d->config_put || d->config_put(src, &blk, &fd, err, errlen) == 0);
	msg_reader_block(&r, blk.buf, blk.len);
	f = d->make(env, &r, fd, err, errlen);
	msg_free(&blk);
	/* cppcheck-suppress returnDanglingLifetime ; a filter copies what it reads */
	return f;
}

static void test_table(void)
{
	size_t i, ok = 0;

	for (i = 0; i < filter_table_len; i++)
		ok += filter_table[i]->make && filter_table[i]->ops &&
		      strcmp(filter_table[i]->ops->name, filter_table[i]->name) == 0 &&
		      filter_table_find(filter_table[i]->name, strlen(filter_table[i]->name)) ==
			      filter_table[i];
	tap_is_int((int)ok, (int)filter_table_len,
		   "every filter registers a make, its ops, and is found by its name");
	tap_ok(!filter_table_find("secret", 6) && !filter_table_find("secretsx", 8),
	       "a name that is no filter's is not found");
}

static void test_made_from_blocks(void)
{
	struct policy *p = load();
	struct broker b = { 0 };
	struct gitcred g = { 0 }, g2;
	struct filter_source src = { .policy = p, .broker = &b, .git = &g, .spend = NULL };
	struct filter_env env = { .policy = p };
	struct secretfilter *sf;
	struct awsfilter *af;
	struct gitfilter *gf;
	struct msg blk = { 0 };
	struct msg_reader r;
	char err[256];

	tap_is_int((int)p->nsecrets, 3, "the policy has k, and s3's two parts");
	fill_broker(&b, p, p->nsecrets);
	g.value = TOKEN;
	g.value_len = strlen(TOKEN);
	g.placeholder = util_xstrdup(GIT_PH);
	g.placeholder_len = strlen(GIT_PH);

	af = make(&awsfilter_def, &src, &env, err, sizeof(err));
	tap_ok(af != NULL, "aws: made from its block (s3's key id and secret key)");
	sf = make(&secretfilter_def, &src, &env, err, sizeof(err));
	tap_ok(sf && env.registry == secretfilter_registry(sf),
	       "secrets: made, and its registry is offered to the filters after it");
	tap_is_int((int)registry_count(env.registry), 3,
		   "every brokered value came in the block and is registered to be scrubbed");
	gf = make(&gitfilter_def, &src, &env, err, sizeof(err));
	tap_ok(gf != NULL, "git: made from its block");
	tap_is_int((int)registry_count(env.registry), 4, "its token joined the registry");
	tap_ok(make(&spendfilter_def, &src, &env, err, sizeof(err)) == NULL && !err[0],
	       "spend: not made when nothing is metered, and that is no error");

	/* the git token's refresh: the same filter's block again */
	g2 = g;
	g2.value = TOKEN2;
	g2.value_len = strlen(TOKEN2);
	msg_start_block(&blk, FILTER_CONFIG_MAX);
	ASSERT(gitfilter_def.config_put(&(struct filter_source){ .policy = p, .git = &g2 }, &blk,
					&(int){ -1 }, err, sizeof(err)) == 0);
	msg_reader_block(&r, blk.buf, blk.len);
	tap_ok(gitfilter_def.configure(gf, &r, -1, err, sizeof(err)) == 0 &&
	       registry_count(env.registry) == 5,
	       "git: a later block puts the refreshed token in force (and in the registry)");
	msg_start_block(&blk, FILTER_CONFIG_MAX);
	msg_put_u64(&blk, 0);
	msg_put_bytes(&blk, "not a token\n", 12);
	msg_put_bytes(&blk, GIT_PH, strlen(GIT_PH));
	msg_reader_block(&r, blk.buf, blk.len);
	tap_ok(gitfilter_def.configure(gf, &r, -1, err, sizeof(err)) < 0 && err[0],
	       "git: a block whose token is not a token is refused");
	msg_start_block(&blk, FILTER_CONFIG_MAX);
	ASSERT(gitfilter_def.config_put(&src, &blk, &(int){ -1 }, err, sizeof(err)) == 0);
	msg_put_u32(&blk, 1);
	msg_reader_block(&r, blk.buf, blk.len);
	tap_ok(gitfilter_def.configure(gf, &r, -1, err, sizeof(err)) < 0,
	       "git: a block with a field too many is refused");
	msg_free(&blk);

	gitfilter_free(gf);
	secretfilter_free(sf);
	awsfilter_free(af);
	broker_free(&b);
	free(g.placeholder);
	policy_free(p);
}

/* broker_put() and broker_get(): what the secrets' and aws's blocks are
 * made of. The two parts of s3 share a name: each keeps its own entry. */
static void test_broker_blocks(void)
{
	struct policy *p = load();
	struct broker b = { 0 }, *got;
	struct msg blk = { 0 };
	struct msg_reader r;
	char err[256];
	size_t i, same = 0;

	fill_broker(&b, p, p->nsecrets);
	msg_start_block(&blk, FILTER_CONFIG_MAX);
	broker_put(&b, p, NULL, &blk);
	msg_reader_block(&r, blk.buf, blk.len);
	got = broker_get(p, &r, -1, err, sizeof(err));
	tap_ok(got && got->count == b.count, "a broker's secrets read back, as many as were put");
	for (i = 0; got && i < got->count && i < b.count; i++)
		same += got->secrets[i].def == b.secrets[i].def &&
			got->secrets[i].value_len == b.secrets[i].value_len &&
			memcmp(got->secrets[i].value, b.secrets[i].value, b.secrets[i].value_len) == 0 &&
			strcmp(got->secrets[i].placeholder, b.secrets[i].placeholder) == 0;
	tap_is_int((int)same, (int)b.count,
		   "each with its own definition (s3's secret key is not its key id), value "
		   "and placeholder");
	broker_drop(got);
	msg_free(&blk);
	broker_free(&b);
	policy_free(p);
}

static void test_refused_blocks(void)
{
	struct policy *p = load();
	struct broker b = { 0 };
	struct filter_source src = { .policy = p, .broker = &b };
	struct filter_env env = { .policy = p };
	struct msg blk = { 0 };
	struct msg_reader r;
	char err[256];
	void *f;

	/* only k: no secret of kind aws */
	fill_broker(&b, p, 1);
	tap_ok(make(&awsfilter_def, &src, &env, err, sizeof(err)) == NULL && !err[0],
	       "aws: not made without a secret of its kind, and that is no error");

	msg_start_block(&blk, FILTER_CONFIG_MAX);
	msg_put_u32(&blk, 1);
	msg_put_u32(&blk, 7); /* no such index */
	msg_put_cstr(&blk, "k");
	msg_put_cstr(&blk, "ph");
	msg_put_bytes(&blk, "v", 1);
	msg_reader_block(&r, blk.buf, blk.len);
	f = secretfilter_def.make(&env, &r, -1, err, sizeof(err));
	tap_ok(!f && err[0], "secrets: a secret the policy does not have is refused");

	msg_start_block(&blk, FILTER_CONFIG_MAX);
	msg_put_u32(&blk, 1);
	msg_put_u32(&blk, 1); /* s3's index, k's name */
	msg_put_cstr(&blk, "k");
	msg_put_cstr(&blk, "ph");
	msg_put_bytes(&blk, "v", 1);
	msg_reader_block(&r, blk.buf, blk.len);
	f = secretfilter_def.make(&env, &r, -1, err, sizeof(err));
	tap_ok(!f && err[0], "secrets: an index whose secret has another name is refused");

	msg_start_block(&blk, FILTER_CONFIG_MAX);
	broker_put(&b, p, NULL, &blk);
	msg_put_u32(&blk, 0);
	msg_reader_block(&r, blk.buf, blk.len);
	f = secretfilter_def.make(&env, &r, -1, err, sizeof(err));
	tap_ok(!f && err[0], "secrets: a block with a field too many is refused");

	msg_start_block(&blk, FILTER_CONFIG_MAX);
	msg_put_u32(&blk, 1);
	msg_reader_block(&r, blk.buf, blk.len);
	f = spendfilter_def.make(&env, &r, -1, err, sizeof(err));
	tap_ok(!f && err[0], "spend: metered without the ledger's channel is refused");

	msg_free(&blk);
	broker_free(&b);
	policy_free(p);
}

int main(void)
{
	test_table();
	test_made_from_blocks();
	test_broker_blocks();
	test_refused_blocks();
	return tap_done();
}
