/* SPDX-License-Identifier: Apache-2.0
 * spend_tool.c - drives ledger.c and meter.c from the integration tests
 * and the benchmark, in processes of their own (it links airlock's
 * objects; see the Makefile).
 *
 *   spend_tool ledger SPEC SESSION PARENT|- CAP|none [--lease S] STEP...
 *	opens SESSION in SPEC (created if needed) and runs the steps in
 *	order, one output line each:
 *	  reserve:NANO      "reserve ok RID" | "reserve refused SESSION"
 *	  settle:NANO       settles the oldest reservation held: "settle ok
 *	                    SPENT OWN" (the session's row after it)
 *	  release           releases the oldest: "release ok"
 *	  settle-all:NANO   settles every reservation held: "settle-all ok N"
 *	  totals            "totals CAP SPENT RESERVED OWN" (-1: no cap)
 *	  wait:PATH         waits (at most 60 s) until PATH exists
 *	  touch:PATH        creates PATH
 *	  sleep:MS          sleeps
 *	  crash             exits 0 at once: no settle, no close
 *	  stop              stops itself (SIGSTOP) until continued
 *	  bench:N:NANO      N reserve+settle pairs at NANO: "bench N
 *	                    RESERVE_US SETTLE_US" (microseconds per call)
 *	then closes the session ("closed SPENT OWN"). Exit 0 when every step
 *	answered (a refusal is an answer), 1 on a ledger error, 2 on usage.
 *
 *   spend_tool meter --api A --path P --request FILE [--status N]
 *	   [--ctype T] [--response FILE] [--complete 0|1] [--rewrite FILE]
 *	   [--price MODEL=IN,OUT[,CW,CR]]... [--max-body N] [--default-max N]
 *	   [--seed N] [--repeat N]
 *	classifies POST P, parses the request, writes the rewritten body
 *	(or the body as it is) to --rewrite, meters the response fed in
 *	pseudo-random slices (--seed), and prints one JSON object: route,
 *	reservation, status/rule when refused, outcome, cost, tokens.
 *	--repeat N runs it N times and adds "cpu_us" per run.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ledger.h"
#include "meter.h"
#include "util.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

/* ------------------------------------------------------------------ */

#define MAX_HELD 4096

static int ledger_main(int argc, char **argv)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = NULL;
	struct ledger_session *s = NULL;
	struct ledger_refusal why;
	struct ledger_totals t;
	enum ledger_status st;
	static int64_t held[MAX_HELD];
	size_t nheld = 0, first = 0;
	int64_t cap, v, rid;
	char err[400];
	int i = 5;

	if (argc < 5)
		return 2;
	if (strcmp(argv[4], "none") == 0)
		cap = LEDGER_NO_CAP;
	else if (!parse_i64(argv[4], &cap))
		return 2;
	if (argc > 6 && strcmp(argv[5], "--lease") == 0) {
		if (!parse_i64(argv[6], &v) || v <= 0)
			return 2;
		o.lease_seconds = (unsigned)v;
		i = 7;
	}
	if (ledger_open(argv[1], &o, &l, err, sizeof(err)) != LEDGER_OK) {
		fprintf(stderr, "spend_tool: %s\n", err);
		return 1;
	}
	st = ledger_session_open(l, argv[2], strcmp(argv[3], "-") ? argv[3] : NULL,
				 cap, &s);
	if (st != LEDGER_OK) {
		printf("open %s\n", st == LEDGER_NO_PARENT ? "no-parent" :
		       st == LEDGER_CONFLICT ? "conflict" : "error");
		fprintf(stderr, "spend_tool: %s\n", ledger_error(l));
		ledger_close(l);
		return st == LEDGER_ERROR ? 1 : 0;
	}
	for (; i < argc; i++) {
		const char *a = argv[i];

		if (strncmp(a, "reserve:", 8) == 0 && parse_i64(a + 8, &v)) {
			st = ledger_reserve(s, v, &rid, &why);
			if (st == LEDGER_OK) {
				if (nheld == MAX_HELD)
					goto bad;
				held[nheld++] = rid;
				printf("reserve ok %lld\n", (long long)rid);
			} else if (st == LEDGER_REFUSED) {
				printf("reserve refused %s\n", why.session);
			} else {
				goto fail;
			}
		} else if ((strncmp(a, "settle:", 7) == 0 && parse_i64(a + 7, &v)) ||
			   strcmp(a, "release") == 0) {
			bool rel = a[0] == 'r';

			if (first == nheld)
				goto bad;
			st = rel ? ledger_release(s, held[first])
				 : ledger_settle(s, held[first], v, &t);
			if (st != LEDGER_OK)
				goto fail;
			first++;
			if (rel)
				printf("release ok\n");
			else
				printf("settle ok %lld %lld\n", (long long)t.spent,
				       (long long)t.own_spent);
		} else if (strncmp(a, "settle-all:", 11) == 0 && parse_i64(a + 11, &v)) {
			size_t k = 0;

			for (; first < nheld; first++, k++)
				if (ledger_settle(s, held[first], v, NULL) != LEDGER_OK)
					goto fail;
			printf("settle-all ok %zu\n", k);
		} else if (strcmp(a, "totals") == 0) {
			if (ledger_session_totals(s, &t) != LEDGER_OK)
				goto fail;
			printf("totals %lld %lld %lld %lld\n", (long long)t.cap,
			       (long long)t.spent, (long long)t.reserved,
			       (long long)t.own_spent);
		} else if (strncmp(a, "wait:", 5) == 0) {
			struct stat sb;
			int k;

			for (k = 0; k < 6000 && stat(a + 5, &sb) != 0; k++)
				usleep(10000);
			if (k == 6000)
				goto bad;
		} else if (strncmp(a, "touch:", 6) == 0) {
			FILE *f = fopen(a + 6, "w");

			if (!f)
				goto bad;
			fclose(f);
		} else if (strncmp(a, "sleep:", 6) == 0 && parse_i64(a + 6, &v)) {
			usleep((useconds_t)v * 1000);
		} else if (strcmp(a, "crash") == 0) {
			fflush(stdout);
			_exit(0);
		} else if (strcmp(a, "stop") == 0) {
			fflush(stdout);
			raise(SIGSTOP);
		} else if (strncmp(a, "bench:", 6) == 0) {
			int64_t n, k;
			char *colon = strchr(a + 6, ':');
			double tr = 0, ts, t0;

			if (!colon)
				goto bad;
			*colon = '\0';
			if (!parse_i64(a + 6, &n) || !parse_i64(colon + 1, &v))
				goto bad;
			ts = 0;
			for (k = 0; k < n; k++) {
				t0 = now_us();
				if (ledger_reserve(s, v, &rid, &why) != LEDGER_OK)
					goto fail;
				tr += now_us() - t0;
				t0 = now_us();
				if (ledger_settle(s, rid, v, NULL) != LEDGER_OK)
					goto fail;
				ts += now_us() - t0;
			}
			printf("bench %lld %.1f %.1f\n", (long long)n, tr / (double)n,
			       ts / (double)n);
		} else {
			goto bad;
		}
		fflush(stdout);
	}
	if (ledger_session_close(s, &t) != LEDGER_OK) {
		s = NULL;
		goto fail;
	}
	printf("closed %lld %lld\n", (long long)t.spent, (long long)t.own_spent);
	ledger_close(l);
	return 0;
fail:
	fprintf(stderr, "spend_tool: %s: %s\n", argv[i], ledger_error(l));
	ledger_close(l);
	return 1;
bad:
	fprintf(stderr, "spend_tool: bad or failed step '%s'\n", argv[i]);
	ledger_close(l);
	return 2;
}

/* ------------------------------------------------------------------ */

#define MAX_PRICES 16

static bool parse_price(char *arg, struct meter_price *p)
{
	char *eq = strchr(arg, '='), *f[4] = { 0 }, *save = NULL, *tok;
	double v[4];
	int n = 0;

	if (!eq)
		return false;
	*eq = '\0';
	for (tok = strtok_r(eq + 1, ",", &save); tok && n < 4;
	     tok = strtok_r(NULL, ",", &save))
		f[n++] = tok;
	if (n != 2 && n != 4)
		return false;
	for (int i = 0; i < n; i++) {
		char *end;

		v[i] = strtod(f[i], &end);
		if (*end)
			return false;
	}
	return meter_price_set(p, arg, v[0], v[1], n == 4 ? &v[2] : NULL,
			       n == 4 ? &v[3] : NULL);
}

static int meter_main(int argc, char **argv)
{
	struct meter_price prices[MAX_PRICES];
	struct meter_config cfg = { .prices = prices };
	const char *api = NULL, *path = NULL, *reqf = NULL, *respf = NULL,
		   *ctype = NULL, *rewf = NULL;
	int status = 200, complete = 1, i, status_out = 0;
	unsigned seed = 1, repeat = 1, rep;
	enum meter_api a;
	enum meter_endpoint ep;
	enum meter_route route;
	struct meter_request req;
	struct meter_refusal why;
	struct meter_charge ch;
	char *body = NULL, *resp = NULL, *nb = NULL;
	size_t blen = 0, rlen = 0, nlen = 0;
	double c0, c1;

	for (i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i];
		char *v = argv[i + 1];
		int64_t n;

		if (strcmp(k, "--api") == 0)
			api = v;
		else if (strcmp(k, "--path") == 0)
			path = v;
		else if (strcmp(k, "--request") == 0)
			reqf = v;
		else if (strcmp(k, "--response") == 0)
			respf = v;
		else if (strcmp(k, "--ctype") == 0)
			ctype = v;
		else if (strcmp(k, "--rewrite") == 0)
			rewf = v;
		else if (strcmp(k, "--status") == 0 && parse_i64(v, &n))
			status = (int)n;
		else if (strcmp(k, "--complete") == 0 && parse_i64(v, &n))
			complete = (int)n;
		else if (strcmp(k, "--seed") == 0 && parse_i64(v, &n))
			seed = (unsigned)n;
		else if (strcmp(k, "--repeat") == 0 && parse_i64(v, &n) && n > 0)
			repeat = (unsigned)n;
		else if (strcmp(k, "--max-body") == 0 && parse_i64(v, &n))
			cfg.max_body_bytes = (uint64_t)n;
		else if (strcmp(k, "--default-max") == 0 && parse_i64(v, &n))
			cfg.default_max_output_tokens = (uint64_t)n;
		else if (strcmp(k, "--price") == 0 && cfg.nprices < MAX_PRICES &&
			 parse_price(v, &prices[cfg.nprices]))
			cfg.nprices++;
		else {
			fprintf(stderr, "spend_tool meter: bad option '%s'\n", k);
			return 2;
		}
	}
	if (i != argc || !api || !path || !reqf || !meter_api_from_string(api, &a))
		return 2;
	body = util_read_file(reqf, 64u << 20, &blen);
	if (!body)
		return 2;
	if (respf && !(resp = util_read_file(respf, 64u << 20, &rlen))) {
		free(body);
		return 2;
	}
	route = meter_classify(a, "POST", 4, path, strlen(path), &ep);
	if (route != METER_ROUTE_METER) {
		printf("{\"route\":\"%s\"}\n", meter_route_to_string(route));
		goto out;
	}
	if (!meter_request_parse(&cfg, ep, body, blen, &req, &why)) {
		printf("{\"route\":\"meter\",\"refused\":%d,\"rule\":\"%s\"}\n",
		       why.status, why.rule);
		goto out;
	}
	nb = meter_request_rewrite(&req, body, blen, &nlen);
	if (rewf) {
		FILE *f = fopen(rewf, "w");

		if (!f || fwrite(nb ? nb : body, 1, nb ? nlen : blen, f) !=
			      (nb ? nlen : blen) || fclose(f) != 0) {
			status_out = 2;
			goto out;
		}
	}
	c0 = cpu_us();
	for (rep = 0; rep < repeat; rep++) {
		struct meter_response *r;
		size_t off = 0;
		unsigned x = seed + rep;

		if (rep > 0) {
			/* What the proxy does per call: parse (and rewrite),
			 * then meter the answer. */
			char *again;

			if (!meter_request_parse(&cfg, ep, body, blen, &req, &why)) {
				status_out = 1;
				goto out;
			}
			again = meter_request_rewrite(&req, body, blen, &nlen);
			free(again);
		}
		if (!resp) {
			meter_charge_unanswered(&req, &ch);
			continue;
		}
		r = meter_response_new(&cfg, &req, status, ctype,
				       ctype ? strlen(ctype) : 0);
		while (off < rlen) {
			size_t n;

			x = x * 1103515245u + 12345u;
			n = 1 + (x >> 16) % 1500;
			if (n > rlen - off)
				n = rlen - off;
			meter_response_feed(r, resp + off, n);
			off += n;
		}
		meter_response_finish(r, complete != 0, &ch);
		meter_response_free(r);
	}
	c1 = cpu_us();
	printf("{\"route\":\"meter\",\"model\":\"%s\",\"reservation\":%lld,"
	       "\"max_output\":%llu,\"stream\":%s,\"rewritten\":%s,\"outcome\":\"%s\","
	       "\"cost\":%lld,\"input\":%llu,\"output\":%llu,\"cache_write\":%llu,"
	       "\"cache_read\":%llu,\"cpu_us\":%.2f}\n",
	       req.model, (long long)req.reservation,
	       (unsigned long long)req.max_output, req.stream ? "true" : "false",
	       nb ? "true" : "false", meter_outcome_to_string(ch.outcome),
	       (long long)ch.cost, (unsigned long long)ch.usage.input,
	       (unsigned long long)ch.usage.output,
	       (unsigned long long)ch.usage.cache_write,
	       (unsigned long long)ch.usage.cache_read, (c1 - c0) / repeat);
out:
	free(nb);
	free(body);
	free(resp);
	return status_out;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "ledger") == 0)
		return ledger_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "meter") == 0)
		return meter_main(argc - 1, argv + 1);
	fprintf(stderr, "usage: spend_tool ledger|meter ... (see the comment at "
		"the top of tests/helpers/spend_tool.c)\n");
	return 2;
}
