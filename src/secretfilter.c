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
 * Binding is by the connection: rq->host and rq->port are the tunnel's
 * (the CONNECT target, the transparent connection's original
 * destination). A Host header that names another host or port (a
 * mismatch that shadow mode lets through) only narrows: the request is
 * decided again on what it names, and substituted only if both allow.
 *
 * Requests to a host a secret is bound to ask for identity encoding, so
 * that answers can be scrubbed; WebSocket requests lose their
 * permessage-deflate offers, so that frames come uncompressed.
 *
 * Responses. The filter holds the registry of every value the proxy
 * injects (registry.h: the brokered secrets, and the git token the git
 * filter registers), and attaches to every exchange once one is
 * registered. From the answer's first head on (after the request went
 * out, so every value injected into it is in), each real value is
 * replaced by its placeholder in: every interim head's reason phrase and
 * fields (1xx, the 101 of an upgrade), the final head's reason phrase and
 * fields (a field whose name holds a value is dropped), the decoded body
 * through a stream that holds back at most the longest value's length
 * less one byte (scrub.c), whatever the split into reads and chunks, and,
 * after a 101, the upstream's WebSocket frames (wsscrub.c, installed on
 * the connection through the upgraded hook). When every placeholder is
 * as long as its value the body keeps its Content-Length; otherwise the
 * exchange re-frames it; a chunked body is always re-chunked (chunk
 * extensions and trailers never pass). On an intercepted connection a
 * coded answer reaches this filter decoded (decode.c, in the exchange);
 * elsewhere one with a Content-Encoding other than identity (in any of
 * its fields) cannot be read: it is relayed as it is, re-framed, and
 * recorded (secret.scrub, decision info, "not scrubbed"). Replacements are recorded per value once the response (or
 * the WebSocket connection) ends; a frame that cannot be scrubbed closes
 * the connection with a secret.scrub block.
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

#include "registry.h"
#include "scrub.h"
#include "subst.h"
#include "util.h"
#include "wsscrub.h"

struct secretfilter {
	const struct broker *b;
	const struct policy *p;
	struct subst_secret *ss;
	struct subst_set all;        /* every secret */
	struct subst_set nogit;      /* without git.credential's (git hosts) */
	struct subst_secret *ss_nogit;
	struct registry *reg;        /* every value the proxy injects */
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
	struct registry_set *set;    /* the values to scrub (a reference) */
	struct scrub *body;          /* the response body's stream, or NULL */
	uint64_t *head_counts;       /* replacements in the response heads */
	json_t *injected;            /* secret.inject receipts to write when
					the request leaves ([[rule, subject]]) */
	bool passthrough;            /* a compressed body: relayed re-framed,
					not scrubbed */
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
	f->reg = registry_new();
	for (i = 0; i < b->count; i++) {
		const struct broker_secret *bs = &b->secrets[i];

		/* broker.c admitted the value: it registers */
		ASSERT(registry_add(f->reg, bs->def->name, bs->value, bs->value_len,
				    bs->placeholder, bs->placeholder_len) >= 0);
	}
	return f;
}

void secretfilter_free(struct secretfilter *f)
{
	if (!f)
		return;
	registry_free(f->reg);
	free(f->ss);
	free(f->ss_nogit);
	free(f);
}

struct registry *secretfilter_registry(struct secretfilter *f)
{
	return f->reg;
}

const struct scrub_set *secretfilter_scrub_set(const struct secretfilter *f)
{
	struct registry_set *rs = registry_acquire(f->reg);
	const struct scrub_set *set = rs ? registry_scrub(rs) : NULL;

	/* the registry keeps its newest set until a value is added */
	registry_release(rs);
	return set;
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
	if (f->p->mode == POLICY_MODE_OFF || (!f->b->count && !registry_count(f->reg)))
		return NULL;
	st = util_xcalloc(1, sizeof(*st));
	st->f = f;
	(void)util_strlcpy(st->host, rq->host->name, sizeof(st->host));
	st->port = rq->port;
	(void)util_strlcpy(st->method, rq->method, sizeof(st->method));
	st->path = util_xstrdup(rq->path);
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

static void drop_header(struct filter_headers *hs, size_t i);

/* Removes the permessage-deflate offers from Sec-WebSocket-Extensions
 * (a comma list of extensions, each with ";"-parameters); a field left
 * empty goes. */
static void strip_deflate(struct filter_headers *hs)
{
	int i = filter_headers_find(hs, "sec-websocket-extensions", 0);

	while (i >= 0) {
		struct filter_header *h = &hs->h[i];
		char *out = util_xcalloc(1, strlen(h->value) + 1), *save = NULL, *tok;
		size_t olen = 0;

		for (tok = strtok_r(h->value, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			const char *t = tok;
			size_t n;

			while (*t == ' ' || *t == '\t')
				t++;
			n = strcspn(t, "; \t");
			if (n == strlen("permessage-deflate") &&
			    strncasecmp(t, "permessage-deflate", n) == 0)
				continue;
			if (olen)
				out[olen++] = ',';
			memcpy(out + olen, tok, strlen(tok));
			olen += strlen(tok);
		}
		out[olen] = '\0';
		free(h->value);
		h->value = out;
		if (strspn(out, " \t") == olen) {
			drop_header(hs, (size_t)i);
			i = filter_headers_find(hs, "sec-websocket-extensions", (size_t)i);
			continue;
		}
		i = filter_headers_find(hs, "sec-websocket-extensions", (size_t)i + 1);
	}
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
	/* The Host header may narrow where a value goes, never widen it:
	 * when it names another host or port (a mismatch that goes on in
	 * shadow mode), the value must be bound there as well. */
	if (r.verdict == SUBST_REWRITE && rq->named_host &&
	    (rq->named_host->is_addr != rq->host->is_addr ||
	     strcmp(rq->named_host->name, rq->host->name) != 0 || rq->named_port != rq->port)) {
		subst_result_free(&r);
		subst_decide(set, &hr, rq->named_host, rq->named_port, tls, &r);
	}
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
	/* WebSocket frames are scrubbed: none may come compressed */
	strip_deflate(&rq->headers);
	return FILTER_CONTINUE;
}

/* The values to scrub from this exchange's answer on: taken at its
 * first head, after the request went out, so that every value injected
 * into it (a token refreshed while the request waited included) is in. */
static const struct scrub_set *values(struct sf_state *st)
{
	if (!st->set) {
		st->set = registry_acquire(st->f->reg);
		if (!st->set)
			return NULL;
		st->head_counts =
			util_xcalloc(scrub_set_count(registry_scrub(st->set)), sizeof(uint64_t));
	}
	return registry_scrub(st->set);
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

/* Replaces each value in @*text (malloc'd, NUL-terminated); returns the
 * number of replacements. */
static uint64_t scrub_text(struct sf_state *st, const struct scrub_set *set, char **text)
{
	struct scrub_buf out = { 0 };
	uint64_t n;

	if (!*text)
		return 0;
	n = scrub_oneshot(set, *text, strlen(*text), &out, st->head_counts);
	if (n > 0) {
		explicit_bzero(*text, strlen(*text));
		free(*text);
		*text = util_xstrndup(out.data, out.len);
		explicit_bzero(out.data, out.len);
	}
	scrub_buf_free(&out);
	return n;
}

/* Replaces each value in the reason phrase and the header values of @rs.
 * A header whose name holds a value is dropped (a placeholder may hold
 * characters a name cannot), and counted. */
static void scrub_head(struct sf_state *st, struct filter_response *rs)
{
	const struct scrub_set *set = values(st);
	size_t i = 0;

	if (!set)
		return;
	(void)scrub_text(st, set, &rs->reason);
	while (i < rs->headers.count) {
		struct filter_header *h = &rs->headers.h[i];
		struct scrub_buf out = { 0 };
		uint64_t n = scrub_oneshot(set, h->name, strlen(h->name), &out, st->head_counts);

		scrub_buf_free(&out);
		if (n > 0) {
			drop_header(&rs->headers, i);
			continue;
		}
		(void)scrub_text(st, set, &h->value);
		i++;
	}
}

static void sf_response_interim(void *vst, struct filter_response *rs)
{
	scrub_head(vst, rs);
}

static enum filter_result sf_response_head(void *vst, struct filter_response *rs,
					   struct filter_transform *tf, struct verdict *v)
{
	struct sf_state *st = vst;
	const char *ce = NULL;
	int i;

	(void)v;
	scrub_head(st, rs);
	if (rs->body == HTTP_BODY_NONE || !values(st))
		return FILTER_CONTINUE;
	/* every field counts: "identity" then "gzip" is compressed */
	for (i = filter_headers_find(&rs->headers, "content-encoding", 0); i >= 0 && !ce;
	     i = filter_headers_find(&rs->headers, "content-encoding", (size_t)i + 1))
		if (strcasecmp(rs->headers.h[i].value, "identity") != 0)
			ce = rs->headers.h[i].value;
	if (ce) {
		if (st->bound) {
			json_t *sj = json_pack("{s:s, s:i, s:s, s:s, s:s, s:b}", "host", st->host,
					       "port", st->port, "method", st->method, "path",
					       st->path, "content_encoding", ce, "scrubbed", 0);

			record(st, "secret.scrub", RECEIPT_INFO, "secrets.scrub", sj,
			       "a compressed answer from a bound host was relayed as it is, "
			       "not scrubbed");
		}
		/* its bytes as they are, but re-framed all the same: chunk
		 * extensions and trailers are never relayed */
		st->passthrough = true;
		tf->enabled = true;
		tf->keeps_length = true;
		return FILTER_CONTINUE;
	}
	st->body = scrub_new(values(st));
	tf->enabled = true;
	tf->keeps_length = scrub_set_keeps_length(values(st));
	return FILTER_CONTINUE;
}

static int sf_response_body(void *vst, const char *data, size_t len, bool last,
			    struct buf *out)
{
	struct sf_state *st = vst;
	struct scrub_buf sb = { 0 };

	if (st->passthrough && out) {
		buf_append(out, data, len);
		return 0;
	}
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

/* secret.scrub for each value replaced: @a and @b counted apart (head and
 * body, or head and frames). */
static void record_counts(struct secretfilter *f, const struct registry_set *set,
			  const char *host, uint16_t port, const char *method, const char *path,
			  const uint64_t *a, const char *aname, const uint64_t *b,
			  const char *bname)
{
	size_t k, n = scrub_set_count(registry_scrub(set));

	for (k = 0; k < n; k++) {
		uint64_t x = a ? a[k] : 0, y = b ? b[k] : 0;
		const char *name = registry_name(set, k);
		char rule[VERDICT_RULE_MAX];
		json_t *sj;

		if (!x && !y)
			continue;
		sj = json_pack("{s:s, s:s, s:i, s:s, s:s}", "secret", name, "host", host, "port",
			       port, "method", method, "path", path ? path : "/");
		json_object_set_new(sj, aname, json_integer((json_int_t)x));
		json_object_set_new(sj, bname, json_integer((json_int_t)y));
		snprintf(rule, sizeof(rule), "secrets.%s", name);
		if (f->record)
			(void)f->record(f->record_arg, "secret.scrub", RECEIPT_ALLOW,
					RECEIPT_POINT_BROKER, rule, sj,
					"the value in a response was replaced by its placeholder");
		json_decref(sj);
	}
}

/* --- WebSocket frames after a 101 ------------------------------------------------ */

struct sf_ws {
	struct filter_stream fs;     /* first: the exchange's handle */
	struct secretfilter *f;
	struct registry_set *set;
	struct wsscrub *ws;
	struct scrub_buf tmp;
	char host[HOSTNAME_MAX + 1];
	uint16_t port;
	char method[24];
	char *path;
	bool failed;
};

static int ws_feed(struct filter_stream *fs, const char *in, size_t len, struct buf *out)
{
	struct sf_ws *w = (struct sf_ws *)fs;

	if (w->failed)
		return -1;
	w->tmp.len = 0;
	if (wsscrub_feed(w->ws, in, len, &w->tmp) < 0) {
		json_t *sj = json_pack("{s:s, s:i, s:s, s:s, s:b}", "host", w->host, "port",
				       w->port, "method", w->method, "path", w->path, "scrubbed", 0);

		w->failed = true;
		if (w->f->record)
			(void)w->f->record(w->f->record_arg, "secret.scrub", RECEIPT_BLOCK,
					   RECEIPT_POINT_BROKER, "secrets.scrub", sj,
					   wsscrub_error(w->ws));
		json_decref(sj);
		return -1;
	}
	if (w->tmp.len) {
		buf_append(out, w->tmp.data, w->tmp.len);
		explicit_bzero(w->tmp.data, w->tmp.len);
	}
	return 0;
}

static void ws_free(struct filter_stream *fs)
{
	struct sf_ws *w = (struct sf_ws *)fs;

	record_counts(w->f, w->set, w->host, w->port, w->method, w->path, NULL, "in_head",
		      wsscrub_counts(w->ws), "in_frames");
	wsscrub_free(w->ws);
	registry_release(w->set);
	scrub_buf_free(&w->tmp);
	free(w->path);
	free(w);
}

static struct filter_stream *sf_upgraded(void *vst)
{
	struct sf_state *st = vst;
	struct sf_ws *w;

	if (!values(st))
		return NULL;
	w = util_xcalloc(1, sizeof(*w));
	w->fs.feed = ws_feed;
	w->fs.free = ws_free;
	w->f = st->f;
	w->set = registry_acquire(st->f->reg);
	w->ws = wsscrub_new(registry_scrub(w->set));
	memcpy(w->host, st->host, sizeof(w->host));
	w->port = st->port;
	memcpy(w->method, st->method, sizeof(w->method));
	w->path = util_xstrdup(st->path ? st->path : "/");
	return &w->fs;
}

static void sf_done(void *vst, enum filter_outcome outcome,
		    const struct filter_stats *stats)
{
	struct sf_state *st = vst;

	(void)outcome;
	(void)stats;
	if (st->set)
		record_counts(st->f, st->set, st->host, st->port, st->method, st->path,
			      st->head_counts, "in_head",
			      st->body ? scrub_counts(st->body) : NULL, "in_body");
	scrub_free(st->body);
	registry_release(st->set);
	free(st->head_counts);
	json_decref(st->injected); /* never left: nothing was injected */
	free(st->path);
	free(st);
}

/* A secret's hosts, on the port egress.allow reads. */
static bool secret_needs_cleartext(const struct policy *p, const struct host_target *t,
				   uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++)
		if (filter_host_ruled(p->secrets[i].hosts, p->secrets[i].nhosts, p, t, port,
				      any_port))
			return true;
	return false;
}

const struct filter_ops secretfilter_ops = {
	.name = "secrets",
	.attach = sf_attach,
	.request_head = sf_request_head,
	.request_body = NULL,
	.response_head = sf_response_head,
	.response_body = sf_response_body,
	.request_sent = sf_request_sent,
	.response_interim = sf_response_interim,
	.upgraded = sf_upgraded,
	.done = sf_done,
	.needs_cleartext = secret_needs_cleartext,
};
