/* SPDX-License-Identifier: Apache-2.0
 * filter.c - the editable header list of filter.h, the name tables, the
 * host helpers of needs_cleartext hooks and the filter chain. It knows no
 * filter: their table is filter_table.c.
 */
#include "filter.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hostname.h"
#include "policy.h"
#include "util.h"

/* Header values may be credentials (an injected Authorization, a
 * substituted secret): wiped before they are freed. */
static void free_value(char *v)
{
	if (v) {
		explicit_bzero(v, strlen(v));
		free(v);
	}
}

static const char *const result_names[] = {
	[FILTER_CONTINUE] = "continue",
	[FILTER_VERDICT] = "verdict",
	[FILTER_PENDING] = "pending",
};
static_assert(ARRAY_SIZE(result_names) == FILTER_RESULT_COUNT,
	      "result_names out of sync with enum filter_result");

static const char *const outcome_names[] = {
	[FILTER_OUTCOME_COMPLETE] = "complete",
	[FILTER_OUTCOME_CUT] = "cut",
	[FILTER_OUTCOME_UPSTREAM_ERROR] = "upstream-error",
	[FILTER_OUTCOME_CLIENT_GONE] = "client-gone",
	[FILTER_OUTCOME_REFUSED] = "refused",
};
static_assert(ARRAY_SIZE(outcome_names) == FILTER_OUTCOME_COUNT,
	      "outcome_names out of sync with enum filter_outcome");

const char *filter_result_to_string(enum filter_result r)
{
	return (unsigned int)r < FILTER_RESULT_COUNT ? result_names[r] : "unknown";
}

const char *filter_outcome_to_string(enum filter_outcome o)
{
	return (unsigned int)o < FILTER_OUTCOME_COUNT ? outcome_names[o] : "unknown";
}

int filter_headers_find(const struct filter_headers *hs, const char *name,
			size_t from)
{
	size_t i;

	for (i = from; i < hs->count; i++)
		if (strcasecmp(hs->h[i].name, name) == 0)
			return (int)i;
	return -1;
}

const char *filter_headers_get(const struct filter_headers *hs,
			       const char *name)
{
	int i = filter_headers_find(hs, name, 0);

	return i >= 0 ? hs->h[i].value : NULL;
}

void filter_headers_add(struct filter_headers *hs, const char *name,
			const char *value)
{
	if (hs->count == hs->cap) {
		hs->cap = hs->cap ? hs->cap * 2 : 16;
		hs->h = util_xrealloc(hs->h, hs->cap * sizeof(*hs->h));
	}
	hs->h[hs->count].name = util_xstrdup(name);
	hs->h[hs->count].value = util_xstrdup(value);
	hs->count++;
}

void filter_headers_set(struct filter_headers *hs, const char *name,
			const char *value)
{
	int first = filter_headers_find(hs, name, 0);
	size_t i, j;

	if (first < 0) {
		filter_headers_add(hs, name, value);
		return;
	}
	free_value(hs->h[first].value);
	hs->h[first].value = util_xstrdup(value);
	/* every later one goes; the order of the others is kept */
	for (i = j = (size_t)first + 1; i < hs->count; i++) {
		if (strcasecmp(hs->h[i].name, name) == 0) {
			free(hs->h[i].name);
			free_value(hs->h[i].value);
			continue;
		}
		hs->h[j++] = hs->h[i];
	}
	hs->count = j;
}

size_t filter_headers_remove(struct filter_headers *hs, const char *name)
{
	size_t i = 0, j = 0, removed = 0;

	for (i = 0; i < hs->count; i++) {
		if (strcasecmp(hs->h[i].name, name) == 0) {
			free(hs->h[i].name);
			free_value(hs->h[i].value);
			removed++;
			continue;
		}
		hs->h[j++] = hs->h[i];
	}
	hs->count = j;
	return removed;
}

void filter_headers_free(struct filter_headers *hs)
{
	size_t i;

	for (i = 0; i < hs->count; i++) {
		free(hs->h[i].name);
		free_value(hs->h[i].value);
	}
	free(hs->h);
	hs->h = NULL;
	hs->count = hs->cap = 0;
}

bool filter_host_named(char *const *names, size_t n, const struct host_target *t)
{
	size_t i;

	if (t->is_addr)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(names[i], t->name) == 0)
			return true;
	return false;
}

bool filter_host_ruled(const struct host_rule *rules, size_t n, const struct policy *p,
		       const struct host_target *t, uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct host_rule r = rules[i];

		if (any_port) {
			r.port = HOST_RULE_PORT_ANY;
			port = 443;
		}
		if (host_rule_matches(&r, t, port, p->ports, p->nports, false))
			return true;
	}
	return false;
}

/* --- the calling sequence --------------------------------------------------------- */

void filter_chain_attach(struct filter_chain *ch, const struct filter_reg *regs, size_t nregs,
			 const struct filter_request *rq)
{
	size_t i;

	for (i = 0; i < nregs && ch->n < FILTER_MAX; i++) {
		void *st = regs[i].ops->attach ? regs[i].ops->attach(regs[i].arg, rq) : NULL;

		if (!st)
			continue;
		ch->f[ch->n].ops = regs[i].ops;
		ch->f[ch->n].st = st;
		ch->n++;
	}
}

/* What one filter's answer @r (its verdict in @v) means for the chain:
 * FILTER_PENDING or a refusal stop it (a refusal keeps @v); anything
 * else, @v cleared, lets the next filter go (FILTER_CONTINUE). */
static enum filter_result chain_step(enum filter_result r, struct verdict *v)
{
	if (r == FILTER_VERDICT && v->action != VERDICT_ALLOW)
		return FILTER_VERDICT;
	verdict_clear(v);
	return r == FILTER_PENDING ? FILTER_PENDING : FILTER_CONTINUE;
}

enum filter_result filter_chain_request(struct filter_chain *ch, struct filter_request *rq,
					struct buf *whole, struct filter_ref ref,
					struct filter_asks *asks, struct verdict *v)
{
	for (; ch->next < ch->n; ch->next++) {
		const struct filter_ops *ops = ch->f[ch->next].ops;
		void *st = ch->f[ch->next].st;
		struct filter_asks a = { false, 0 };
		enum filter_result r;

		if (whole ? !ops->request_body : !ops->request_head)
			continue;
		verdict_set(v, VERDICT_ALLOW, 0, NULL, NULL);
		if (whole)
			r = ops->request_body(st, NULL, 0, true, whole, ref, v);
		else
			r = ops->request_head(st, rq, &a, ref, v);
		if (a.whole_body && asks) {
			uint64_t max = a.max_body ? a.max_body : FILTER_WHOLE_BODY_DEFAULT;

			if (!asks->whole_body || max < asks->max_body)
				asks->max_body = max;
			asks->whole_body = true;
		}
		r = chain_step(r, v);
		if (r != FILTER_CONTINUE)
			return r;
	}
	ch->next = 0;
	return FILTER_CONTINUE;
}

enum filter_result filter_chain_slice(struct filter_chain *ch, size_t *i, const char *d,
				      size_t n, bool last, struct filter_ref ref,
				      struct verdict *v)
{
	for (; *i < ch->n; (*i)++) {
		const struct filter_ops *ops = ch->f[*i].ops;
		enum filter_result r;

		if (!ops->request_body)
			continue;
		verdict_set(v, VERDICT_ALLOW, 0, NULL, NULL);
		r = ops->request_body(ch->f[*i].st, d, n, last, NULL, ref, v);
		r = chain_step(r, v);
		if (r != FILTER_CONTINUE)
			return r;
	}
	return FILTER_CONTINUE;
}
