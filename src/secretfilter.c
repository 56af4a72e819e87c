/* SPDX-License-Identifier: Apache-2.0
 * secretfilter.c - the secret broker in the HTTP exchange.
 *
 * DOC: Theory of Operation
 *
 * The agent holds placeholders; the proxy holds the values (broker.c).
 * This filter is the first of the exchange's chain (then git, then
 * spend) and sees every request the proxy serves: plain http://
 * requests, HTTP inside a plain tunnel, and HTTP inside an intercepted
 * TLS tunnel (intercept.c). Tunnels that pass through are never seen: a
 * placeholder sent there is worthless, since the upstream cannot use it.
 *
 * Requests. Once the whole head is read and copied, subst_decide() (pure,
 * subst.c) says, from the method, the path, the query and every header:
 *
 *  - PASS: no placeholder; the request goes on unchanged (an
 *    Authorization of the agent's own is never touched);
 *  - REWRITE: every placeholder is in a header its secret allows, on a
 *    host, path and method it allows, inside intercepted TLS whose
 *    upstream verified: the values are written into those headers (in
 *    HTTP Basic decoded, substituted and re-encoded; after "Bearer " or
 *    "token " too) and each substitution is recorded (secret.inject:
 *    secret name, host, header; never a value);
 *  - REFUSE: a placeholder anywhere else (the request line and its query,
 *    a header the secret does not list, another host, plain http, an
 *    encoded form): 403 with the rule, secret.block saying where it was
 *    seen and why, and nothing of the request is forwarded. In shadow
 *    mode it is recorded as would_block and forwarded as the agent sent
 *    it, with the placeholder: never the value.
 *
 * Requests to a host a secret is bound to ask for identity encoding, so
 * that answers can be scrubbed.
 *
 * Responses. Every response's header values (a header whose name holds
 * a value is dropped), and its decoded body
 * through a stream that holds back at most the longest value's length
 * less one byte (scrub.c), have each real value replaced by its
 * placeholder, whatever the split into reads and chunks. When every
 * placeholder is as long as its value the body keeps its Content-Length;
 * otherwise the exchange re-frames it. On an intercepted connection a
 * coded answer reaches this filter decoded (decode.c, in the exchange);
 * elsewhere one with a Content-Encoding other than identity (in any of
 * its fields) cannot be read: it is relayed as it is and recorded
 * (secret.scrub, decision info, "not scrubbed").
 * Replacements are recorded per secret once the response ends.
 *
 * Git hosts: the token git injects is git's to bind to a repository (its
 * own filter, after this one); on git.hosts and git.api_hosts this
 * filter leaves git.credential's placeholder to it.
 */
#include "secretfilter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scrub.h"
#include "subst.h"
#include "util.h"

struct secretfilter {
	const struct broker *b;
	const struct policy *p;
	struct subst_secret *ss;
	struct subst_set all;        /* every secret */
	struct subst_set nogit;      /* without git.credential's (git hosts) */
	struct subst_secret *ss_nogit;
	struct scrub_needle *needles;
	struct scrub_set *scrub;
	proxy_record_fn record;
	void *record_arg;
};

struct sf_state {
	struct secretfilter *f;
	char host[HOSTNAME_MAX + 1];
	uint16_t port;
	char method[24];
	char *path;
	bool bound;                  /* a secret's host */
	struct scrub *body;          /* the response body's stream, or NULL */
	uint64_t *head_counts;       /* replacements in the response head */
	json_t *injected;            /* secret.inject receipts to write when
					the request leaves ([[rule, subject]]) */
};

static bool is_git_host(const struct policy *p, const char *host)
{
	size_t i;

	for (i = 0; i < p->ngit_hosts; i++)
		if (strcmp(p->git_hosts[i], host) == 0)
			return true;
	for (i = 0; i < p->ngit_api_hosts; i++)
		if (strcmp(p->git_api_hosts[i], host) == 0)
			return true;
	return false;
}

struct secretfilter *secretfilter_new(const struct broker *b, const struct policy *p,
				      proxy_record_fn record, void *record_arg)
{
	struct secretfilter *f = util_xcalloc(1, sizeof(*f));
	size_t i, n = 0;

	f->b = b;
	f->p = p;
	f->record = record;
	f->record_arg = record_arg;
	f->ss = util_xcalloc(b->count ? b->count : 1, sizeof(*f->ss));
	f->ss_nogit = util_xcalloc(b->count ? b->count : 1, sizeof(*f->ss_nogit));
	broker_subst_secrets(b, f->ss);
	f->all = (struct subst_set){ f->ss, b->count, p->ports, p->nports };
	for (i = 0; i < b->count; i++)
		if (!p->git_credential || strcmp(b->secrets[i].def->name, p->git_credential) != 0)
			f->ss_nogit[n++] = f->ss[i];
	f->nogit = (struct subst_set){ f->ss_nogit, n, p->ports, p->nports };
	if (b->count) {
		f->needles = util_xcalloc(b->count, sizeof(*f->needles));
		broker_scrub_needles(b, f->needles);
		f->scrub = scrub_set_new(f->needles, b->count);
	}
	return f;
}

void secretfilter_free(struct secretfilter *f)
{
	if (!f)
		return;
	scrub_set_free(f->scrub);
	free(f->needles);
	free(f->ss);
	free(f->ss_nogit);
	free(f);
}

const struct scrub_set *secretfilter_scrub_set(const struct secretfilter *f)
{
	return f->scrub;
}

static int64_t record(struct sf_state *st, const char *type, enum receipt_decision d,
		      const char *rule, json_t *subject, const char *reason)
{
	int64_t seq = -1;

	if (st->f->record)
		seq = st->f->record(st->f->record_arg, type, d, RECEIPT_POINT_BROKER, rule,
				    subject, reason);
	json_decref(subject);
	return seq;
}

static json_t *subject(const struct sf_state *st, const char *secret)
{
	return json_pack("{s:s, s:s, s:i, s:s, s:s}", "secret", secret, "host", st->host,
			 "port", st->port, "method", st->method, "path",
			 st->path ? st->path : "/");
}

static void *sf_attach(void *arg, const struct filter_request *rq)
{
	struct secretfilter *f = arg;
	struct sf_state *st;

	/* mode off changes nothing (the standalone proxy's off forwards
	 * every request as it came) */
	if (!f->b->count || f->p->mode == POLICY_MODE_OFF)
		return NULL;
	st = util_xcalloc(1, sizeof(*st));
	st->f = f;
	(void)util_strlcpy(st->host, rq->host->name, sizeof(st->host));
	st->port = rq->port;
	(void)util_strlcpy(st->method, rq->method, sizeof(st->method));
	st->path = util_xstrdup(rq->path);
	st->head_counts = util_xcalloc(f->b->count, sizeof(uint64_t));
	return st;
}

static struct http_slice slice(const char *s)
{
	struct http_slice r = { s, s ? strlen(s) : 0 };

	return r;
}

/* The copied head as the parser's shape, for subst_decide(): every slice
 * points into @rq or @target (which the caller keeps). Header indexes are
 * the header list's. Returns false when the list is longer than a parsed
 * head can be (another filter added fields): refused, fail closed. */
static bool as_parsed(const struct filter_request *rq, const char *target,
		      struct http_request *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	if (rq->headers.count > HTTP_MAX_HEADERS)
		return false;
	out->method = slice(rq->method);
	out->target = slice(target);
	out->form = HTTP_FORM_ORIGIN;
	out->version_minor = 1;
	out->has_host = true;
	out->host = *rq->host;
	out->port = rq->port;
	out->path = slice(rq->path);
	out->has_query = rq->query != NULL;
	out->query = slice(rq->query);
	out->headers.count = rq->headers.count;
	for (i = 0; i < rq->headers.count; i++) {
		out->headers.h[i].name = slice(rq->headers.h[i].name);
		out->headers.h[i].value = slice(rq->headers.h[i].value);
	}
	out->body = rq->body;
	out->content_length = rq->content_length;
	return true;
}

static void refuse(struct sf_state *st, const struct subst_set *set,
		   const struct subst_result *r, const struct filter_request *rq,
		   struct verdict *v)
{
	char rule[VERDICT_RULE_MAX];
	const char *header = NULL;

	subst_rule(set, r, rule, sizeof(rule));
	if ((r->where == SUBST_WHERE_HEADER || r->where == SUBST_WHERE_HEADER_NAME) &&
	    r->header < rq->headers.count)
		header = rq->headers.h[r->header].name;
	verdict_setf(v, VERDICT_DENY, 403, rule,
		     "a placeholder of secret %s in the %s: %s", set->secrets[r->secret].name,
		     subst_where_to_string(r->where), subst_why_reason(r->why));
	v->type = "secret.block";
	v->point = RECEIPT_POINT_BROKER;
	v->extra = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s}", "request_method",
			     st->method, "secret", set->secrets[r->secret].name, "where",
			     subst_where_to_string(r->where), "header", header, "why",
			     subst_why_to_string(r->why), "form",
			     subst_form_to_string(r->form), "path", st->path);
}

static enum filter_result sf_request_head(void *vst, struct filter_request *rq,
					  struct filter_asks *asks, struct filter_ref ref,
					  struct verdict *v)
{
	struct sf_state *st = vst;
	struct secretfilter *f = st->f;
	const struct subst_set *set = is_git_host(f->p, st->host) ? &f->nogit : &f->all;
	bool tls = rq->inner && rq->client_tls;
	struct http_request hr;
	struct subst_result r;
	char *target;
	size_t i;

	(void)asks;
	(void)ref;
	target = util_xasprintf("%s%s%s", rq->path, rq->query ? "?" : "",
				rq->query ? rq->query : "");
	if (!as_parsed(rq, target, &hr)) {
		free(target);
		verdict_set(v, VERDICT_FAIL, 502, "proxy.filter",
			    "too many header fields to decide on the secrets");
		return FILTER_VERDICT;
	}
	subst_decide(set, &hr, rq->host, rq->port, tls, &r);
	free(target);
	switch (r.verdict) {
	case SUBST_REFUSE:
		refuse(st, set, &r, rq, v);
		subst_result_free(&r);
		return FILTER_VERDICT;
	case SUBST_REWRITE:
		for (i = 0; i < r.nrewrites; i++) {
			struct filter_header *h = &rq->headers.h[r.rewrites[i].header];

			explicit_bzero(h->value, strlen(h->value));
			free(h->value);
			h->value = util_xstrndup(r.rewrites[i].value, r.rewrites[i].len);
		}
		for (i = 0; i < r.ninjections; i++) {
			const struct subst_secret *s = &set->secrets[r.injections[i].secret];
			json_t *sj = subject(st, s->name);
			char rule[VERDICT_RULE_MAX];

			json_object_set_new(sj, "header",
					    json_string(rq->headers.h[r.injections[i].header].name));
			snprintf(rule, sizeof(rule), "secrets.%s", s->name);
			/* recorded when the request leaves (sf_request_sent):
			 * a later filter may still refuse it */
			if (!st->injected)
				st->injected = json_array();
			json_array_append_new(st->injected, json_pack("[s, o]", rule, sj));
		}
		break;
	case SUBST_PASS:
	case SUBST_VERDICT_COUNT:
	default:
		break;
	}
	subst_result_free(&r);
	st->bound = subst_host_bound(&f->all, rq->host, rq->port);
	if (st->bound)
		filter_headers_set(&rq->headers, "Accept-Encoding", "identity");
	return FILTER_CONTINUE;
}

/* Wipes and removes header @i of @hs. */
static void drop_header(struct filter_headers *hs, size_t i)
{
	struct filter_header *h = &hs->h[i];

	explicit_bzero(h->name, strlen(h->name));
	explicit_bzero(h->value, strlen(h->value));
	free(h->name);
	free(h->value);
	memmove(h, h + 1, (hs->count - i - 1) * sizeof(*h));
	hs->count--;
}

/* Replaces each value in the header values of @rs. A header whose name
 * holds a value is dropped (a placeholder may hold characters a name
 * cannot), and counted. */
static void scrub_headers(struct sf_state *st, struct filter_response *rs)
{
	struct scrub_buf out = { 0 };
	size_t i = 0;

	while (i < rs->headers.count) {
		struct filter_header *h = &rs->headers.h[i];

		out.len = 0;
		if (scrub_oneshot(st->f->scrub, h->name, strlen(h->name), &out,
				  st->head_counts) > 0) {
			drop_header(&rs->headers, i);
			continue;
		}
		out.len = 0;
		if (scrub_oneshot(st->f->scrub, h->value, strlen(h->value), &out,
				  st->head_counts) > 0) {
			explicit_bzero(h->value, strlen(h->value));
			free(h->value);
			h->value = util_xstrndup(out.data, out.len);
		}
		i++;
	}
	scrub_buf_free(&out);
}

static enum filter_result sf_response_head(void *vst, struct filter_response *rs,
					   struct filter_transform *tf, struct verdict *v)
{
	struct sf_state *st = vst;
	const char *ce = NULL;
	int i;

	(void)v;
	/* every field counts: "identity" then "gzip" is compressed */
	for (i = filter_headers_find(&rs->headers, "content-encoding", 0); i >= 0 && !ce;
	     i = filter_headers_find(&rs->headers, "content-encoding", (size_t)i + 1))
		if (strcasecmp(rs->headers.h[i].value, "identity") != 0)
			ce = rs->headers.h[i].value;
	scrub_headers(st, rs);
	if (rs->body == HTTP_BODY_NONE)
		return FILTER_CONTINUE;
	if (ce) {
		if (st->bound) {
			json_t *sj = json_pack("{s:s, s:i, s:s, s:s, s:s, s:b}", "host", st->host,
					       "port", st->port, "method", st->method, "path",
					       st->path, "content_encoding", ce, "scrubbed", 0);

			record(st, "secret.scrub", RECEIPT_INFO, "secrets.scrub", sj,
			       "a compressed answer from a bound host was relayed as it is, "
			       "not scrubbed");
		}
		return FILTER_CONTINUE;
	}
	st->body = scrub_new(st->f->scrub);
	tf->enabled = true;
	tf->keeps_length = scrub_set_keeps_length(st->f->scrub);
	return FILTER_CONTINUE;
}

static int sf_response_body(void *vst, const char *data, size_t len, bool last,
			    struct buf *out)
{
	struct sf_state *st = vst;
	struct scrub_buf sb = { 0 };

	if (!st->body || !out)
		return 0;
	if (len)
		scrub_feed(st->body, data, len, &sb);
	if (last)
		scrub_finish(st->body, &sb);
	if (sb.len)
		buf_append(out, sb.data, sb.len);
	scrub_buf_free(&sb);
	return 0;
}

static void sf_request_sent(void *vst)
{
	struct sf_state *st = vst;
	json_t *e;
	size_t i;

	json_array_foreach(st->injected, i, e)
		record(st, "secret.inject", RECEIPT_ALLOW,
		       json_string_value(json_array_get(e, 0)),
		       json_incref(json_array_get(e, 1)),
		       "the placeholder was replaced by the secret's value");
	json_decref(st->injected);
	st->injected = NULL;
}

static void sf_done(void *vst, enum filter_outcome outcome,
		    const struct filter_stats *stats)
{
	struct sf_state *st = vst;
	const uint64_t *body = st->body ? scrub_counts(st->body) : NULL;
	size_t k;

	(void)outcome;
	(void)stats;
	for (k = 0; k < st->f->b->count; k++) {
		uint64_t h = st->head_counts[k], b = body ? body[k] : 0;
		const char *name = st->f->b->secrets[k].def->name;
		char rule[VERDICT_RULE_MAX];
		json_t *sj;

		if (!h && !b)
			continue;
		sj = subject(st, name);
		json_object_set_new(sj, "in_head", json_integer((json_int_t)h));
		json_object_set_new(sj, "in_body", json_integer((json_int_t)b));
		snprintf(rule, sizeof(rule), "secrets.%s", name);
		record(st, "secret.scrub", RECEIPT_ALLOW, rule, sj,
		       "the secret's value in a response was replaced by its placeholder");
	}
	scrub_free(st->body);
	free(st->head_counts);
	json_decref(st->injected); /* never left: nothing was injected */
	free(st->path);
	free(st);
}

const struct filter_ops secretfilter_ops = {
	.name = "secrets",
	.attach = sf_attach,
	.request_head = sf_request_head,
	.request_body = NULL,
	.response_head = sf_response_head,
	.response_body = sf_response_body,
	.request_sent = sf_request_sent,
	.done = sf_done,
};
