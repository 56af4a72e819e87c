/* SPDX-License-Identifier: Apache-2.0
 * fuzz_subst.c - libFuzzer target for subst.c, the substitution decision.
 *
 * The first byte picks the intercepted host (bound to secret a, to b, to
 * neither), the port and whether the connection is verified TLS; the rest
 * is a request head, parsed by http.c. Three secrets as in
 * tests/unit/test_subst.c (a: listed headers, paths and methods; b: any;
 * c: no header at all).
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - the decision is the same when made twice, and its fields are in
 *    range (a refusal names a secret, a where, a why, a form and, for the
 *    header wheres, a header of the request);
 *  - nothing that would be forwarded holds a placeholder: with PASS the
 *    head holds none (raw), with REWRITE the head with the rewritten
 *    values in place holds none;
 *  - a placeholder in the method or the target is always a refusal;
 *  - REWRITE only inside verified TLS and to a host some secret is bound
 *    to; rewritten headers are distinct, ascending, and each holds a value
 *    of a secret bound to that host; every injection names a rewritten
 *    header;
 *  - a refusal rewrites nothing; subst_rule() always writes a rule id
 *    starting with "secrets.".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "hostname.h"
#include "http.h"
#include "subst.h"

#define PA "ph-a-Zq3Lk9Xw2Pm8Rt5Vn1Bc"
#define PB "ph-b-Mx4Qa8Wz1Ep5Rk9Tn2Yu"
#define PC "ph-c-Ab1Cd2Ef3Gh4Ij5Kl6Mn"

static const char *const hosts[] = { "api.example.test", "other.example.test",
				     "x.b.example.test", "evil.example.test" };
static const uint16_t ports_pick[] = { 443, 8443, 80, 443 };
static const uint16_t ports[] = { 80, 443 };
static const char *const headers_a[] = { "authorization", "x-api-key" };
static const char *const paths_a[] = { "/v1/" };
static const char *const methods_a[] = { "GET", "POST" };
static const char *const none[] = { "" };

static struct host_rule rules_a[1], rules_b[2], rules_c[1];
static struct subst_secret secrets[3];
static struct subst_set set;
static bool ready;

static void setup(void)
{
	char err[200];

	CHECK(host_rule_parse("api.example.test", &rules_a[0], err, sizeof(err)));
	CHECK(host_rule_parse("other.example.test", &rules_b[0], err, sizeof(err)));
	CHECK(host_rule_parse("**.b.example.test", &rules_b[1], err, sizeof(err)));
	CHECK(host_rule_parse("api.example.test:8443", &rules_c[0], err, sizeof(err)));
	secrets[0] = (struct subst_secret){
		.name = "a", .placeholder = PA, .placeholder_len = strlen(PA),
		.value = "VALUE-A", .value_len = 7, .hosts = rules_a, .nhosts = 1,
		.headers = headers_a, .nheaders = 2, .paths = paths_a, .npaths = 1,
		.methods = methods_a, .nmethods = 2,
	};
	secrets[1] = (struct subst_secret){
		.name = "b", .placeholder = PB, .placeholder_len = strlen(PB),
		.value = "VALUE-B", .value_len = 7, .hosts = rules_b, .nhosts = 2,
	};
	secrets[2] = (struct subst_secret){
		.name = "c", .placeholder = PC, .placeholder_len = strlen(PC),
		.value = "VALUE-C", .value_len = 7, .hosts = rules_c, .nhosts = 1,
		.headers = none, .nheaders = 0,
	};
	set = (struct subst_set){ .secrets = secrets, .n = 3, .ports = ports, .nports = 2 };
	ready = true;
}

static bool has_placeholder(const char *p, size_t n)
{
	size_t k;

	for (k = 0; k < set.n; k++)
		if (n >= secrets[k].placeholder_len &&
		    memmem(p, n, secrets[k].placeholder, secrets[k].placeholder_len))
			return true;
	return false;
}

static bool bound_here(size_t k, const struct host_target *t, uint16_t port)
{
	size_t i;

	for (i = 0; i < secrets[k].nhosts; i++)
		if (host_rule_matches(&secrets[k].hosts[i], t, port, ports, 2, false))
			return true;
	return false;
}

static bool same(const struct subst_result *a, const struct subst_result *b)
{
	size_t i;

	if (a->verdict != b->verdict || a->nrewrites != b->nrewrites ||
	    a->ninjections != b->ninjections)
		return false;
	if (a->verdict == SUBST_REFUSE)
		return a->secret == b->secret && a->where == b->where && a->why == b->why &&
		       a->form == b->form && a->header == b->header;
	for (i = 0; i < a->nrewrites; i++)
		if (a->rewrites[i].header != b->rewrites[i].header ||
		    a->rewrites[i].len != b->rewrites[i].len ||
		    memcmp(a->rewrites[i].value, b->rewrites[i].value, a->rewrites[i].len) != 0)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request req;
	struct subst_result r, again;
	struct host_target t;
	const char *host;
	uint16_t port;
	bool tls;
	char *buf, rule[128];
	size_t len, h, i, k;

	if (!ready)
		setup();
	if (size < 1)
		return 0;
	host = hosts[data[0] & 3];
	port = ports_pick[(data[0] >> 2) & 3];
	tls = (data[0] >> 4) & 1;
	len = size - 1;
	buf = malloc(len ? len : 1);
	CHECK(buf != NULL);
	memcpy(buf, data + 1, len);
	if (http_parse_request(buf, len, &req, NULL) != HTTP_OK || req.is_connect) {
		free(buf);
		return 0;
	}
	CHECK(hostname_normalise(host, strlen(host), &t) == HOSTNAME_OK);
	subst_decide(&set, &req, &t, port, tls, &r);
	subst_decide(&set, &req, &t, port, tls, &again);
	CHECK((unsigned int)r.verdict < SUBST_VERDICT_COUNT);
	CHECK(same(&r, &again));

	if (has_placeholder(req.method.ptr, req.method.len) ||
	    has_placeholder(req.target.ptr, req.target.len))
		CHECK(r.verdict == SUBST_REFUSE);

	switch (r.verdict) {
	case SUBST_REFUSE:
		CHECK(r.secret < set.n && (unsigned int)r.where < SUBST_WHERE_COUNT &&
		      (unsigned int)r.why < SUBST_WHY_COUNT &&
		      (unsigned int)r.form < SUBST_FORM_COUNT);
		if (r.where == SUBST_WHERE_HEADER || r.where == SUBST_WHERE_HEADER_NAME)
			CHECK(r.header < req.headers.count);
		CHECK(r.nrewrites == 0 && r.ninjections == 0 && !r.rewrites && !r.injections);
		subst_rule(&set, &r, rule, sizeof(rule));
		CHECK(strncmp(rule, "secrets.", 8) == 0);
		break;
	case SUBST_PASS:
		CHECK(r.nrewrites == 0 && r.ninjections == 0);
		for (h = 0; h < req.headers.count; h++)
			CHECK(!has_placeholder(req.headers.h[h].value.ptr,
					       req.headers.h[h].value.len) &&
			      !has_placeholder(req.headers.h[h].name.ptr,
					       req.headers.h[h].name.len));
		break;
	case SUBST_REWRITE:
		CHECK(tls && r.nrewrites > 0 && r.ninjections >= r.nrewrites);
		for (k = 0; k < set.n && !bound_here(k, &t, port); k++)
			;
		CHECK(k < set.n);
		for (i = 0; i < r.nrewrites; i++) {
			const struct subst_rewrite *w = &r.rewrites[i];
			bool holds = false;

			CHECK(w->header < req.headers.count);
			if (i > 0)
				CHECK(w->header > r.rewrites[i - 1].header);
			CHECK(w->value[w->len] == '\0');
			CHECK(!has_placeholder(w->value, w->len));
			for (k = 0; k < set.n; k++)
				if (bound_here(k, &t, port) &&
				    (memmem(w->value, w->len, secrets[k].value, secrets[k].value_len) ||
				     (w->len > 6 && strncmp(w->value, "Basic ", 6) == 0)))
					holds = true;
			CHECK(holds);
		}
		for (i = 0; i < r.ninjections; i++) {
			bool named = false;

			for (k = 0; k < r.nrewrites; k++)
				named = named || r.rewrites[k].header == r.injections[i].header;
			CHECK(named && r.injections[i].secret < set.n &&
			      bound_here(r.injections[i].secret, &t, port));
		}
		for (h = 0, i = 0; h < req.headers.count; h++) {
			if (i < r.nrewrites && r.rewrites[i].header == h) {
				i++;
				continue;
			}
			CHECK(!has_placeholder(req.headers.h[h].value.ptr,
					       req.headers.h[h].value.len));
		}
		break;
	case SUBST_VERDICT_COUNT:
	default:
		CHECK(!"verdict out of range");
	}
	subst_result_free(&r);
	subst_result_free(&again);
	free(buf);
	return 0;
}
