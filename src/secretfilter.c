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
 * OAuth: a 401 to a request the token in force was injected into asks
 * the supervisor for a refresh (oauth.c); when the exchange can replay
 * the request, it pends until the supervisor's answer, then swaps the
 * new token into the request's headers and asks for the request again,
 * once (secret.retry); otherwise the 401 is relayed and recorded.
 *
 * Waiting for the supervisor (a capture announced to the other workers,
 * a refresh) never blocks the worker: the exchange pends (FILTER_PENDING
 * from response_head, 1 from response_body at the last slice) and the
 * question joins a list the supervisor answers in order
 * (secretfilter_answered()); the tick resumes the exchanges answered and
 * answers 502 to those past their deadline, as the spend filter does
 * with its reservations. Over h2 (no response pend) a capture is
 * announced without waiting.
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
#include <time.h>

#include "bodysubst.h"
#include "capture.h"
#include "msg.h"
#include "registry.h"
#include "scrub.h"
#include "subst.h"
#include "util.h"
#include "wsscrub.h"

struct secretfilter {
	const struct broker *b;
	struct broker *own;          /* b, when made from a configuration
					block (a worker's): freed with it */
	const struct policy *p;
	struct subst_secret *ss;
	struct subst_set all;        /* every secret */
	struct subst_set nogit;      /* without git.credential's (git hosts) */
	struct subst_secret *ss_nogit;
	struct registry *reg;        /* every value the proxy injects */
	receipt_record_fn record;
	void *record_arg;
	/* values captured from answers (capture.h), this worker's and the
	 * others', in the order they came */
	struct sf_captured {
		const struct policy_secret *def;
		char *value;
		size_t len;
		char *ph;
		size_t phlen;
		time_t expires;      /* 0: the session */
		bool superseded;     /* an OAuth token a newer one replaced */
	} *cap;
	size_t ncap;
	void **retired;              /* older tables: an exchange may hold them */
	size_t nretired;
	bool has_capture;            /* the policy captures values */
	secretfilter_announce_fn announce;
	secretfilter_sync_fn sync;
	secretfilter_oauth401_fn oauth401;
	void *hook_arg;
	/* the questions to the supervisor that it answers, oldest first
	 * (secretfilter_answered()), and the exchanges they answered */
	struct sf_wait *waits, **waits_tail;
	struct filter_ref *ready;
	size_t nready;
	struct filter_loop loop;      /* the worker's (secretfilter_start()) */
	bool started;
	uint64_t capture_ms, oauth_ms;
};

/* One question to the supervisor (a capture announced, a refresh with an
 * answer asked for). The supervisor serves a worker's messages one at a
 * time, in the order they came (worker_pool_read()), and answers each
 * such one: answers match questions in order. One given up on (its
 * exchange gone, or past its deadline) stays until its answer comes. */
struct sf_wait {
	struct sf_wait *next;
	struct sf_state *st;         /* the exchange that waits, or NULL */
	json_t *receipt;             /* a capture's secret.capture subject,
					recorded with the answer, or NULL */
	char rule[VERDICT_RULE_MAX];
	uint64_t sent_us;            /* CLOCK_MONOTONIC */
};

struct sf_state {
	struct secretfilter *f;
	char *path;
	struct registry_set *set;    /* the values to scrub (a reference) */
	struct scrub *body;          /* the response body's stream, or NULL */
	uint64_t *head_counts;       /* replacements in the response heads */
	json_t *injected;            /* secret.inject receipts to write when
					the request leaves ([[rule, subject]]) */
	const struct subst_set *body_set; /* the body is read for
					placeholders (bodysubst.h), or NULL */
	struct filter_request *rq;   /* valid until done */
	/* capture: the rule that reads this answer, its secret and index */
	const struct policy_capture *cap_rule;
	const struct policy_secret *cap_secret;
	size_t cap_index;
	struct buf cap_buf;
	uint64_t *cap_counts;        /* replacements in that body */
	/* the OAuth token injected into the request (a 401 asks for a
	 * refresh), a copy wiped at the end, or NULL */
	const char *oauth_secret;
	char *oauth_value;
	size_t oauth_len;
	bool retried;                /* sent again after a 401 (once) */
	/* waiting for the supervisor (FILTER_PENDING): how many answers,
	 * until when (ms), and what for */
	struct filter_ref ref;
	unsigned int waits;
	uint64_t deadline;
	bool wait_oauth;             /* a refresh (else captures) */
	bool oauth_asked;            /* the refresh after this 401 was asked:
					the next response_head goes on */
	bool head_captured;          /* this answer's head was read */
	bool cap_ready;              /* its body's values are announced: the
					next call writes it */
	bool can_wait;               /* the exchange can pend on the answer */
	char hold_rule[VERDICT_RULE_MAX]; /* the 502 when a capture fails */
	uint16_t port;
	bool bound;                  /* a secret's host */
	bool passthrough;            /* a compressed body: relayed re-framed,
					not scrubbed */
	bool tls;
	bool cap_body;               /* the answer's body is read whole */
	bool cap_failed;
	char method[24];
	char host[HOSTNAME_MAX + 1];
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

/* The substitution tables from the brokered secrets and the captured
 * values. The old tables are kept (an exchange may be deciding its body
 * with them) until the filter is freed; entries keep their indexes. */
static void build_sets(struct secretfilter *f)
{
	const struct broker *b = f->b;
	const struct policy *p = f->p;
	size_t i, n = 0, total = b->count + f->ncap;

	if (f->ss) {
		f->retired = util_xrealloc(f->retired, (f->nretired + 2) * sizeof(void *));
		f->retired[f->nretired++] = f->ss;
		f->retired[f->nretired++] = f->ss_nogit;
	}
	f->ss = util_xcalloc(total ? total : 1, sizeof(*f->ss));
	f->ss_nogit = util_xcalloc(total ? total : 1, sizeof(*f->ss_nogit));
	broker_subst_secrets(b, f->ss);
	for (i = 0; i < f->ncap; i++) {
		const struct sf_captured *c = &f->cap[i];
		const struct policy_secret *d = c->def;

		if (c->superseded)
			continue;
		f->ss[b->count + n++] = (struct subst_secret){
			d->name, c->ph, c->phlen, c->value, c->len, d->hosts, d->nhosts,
			(const char *const *)d->headers, d->nheaders,
			(const char *const *)d->paths, d->npaths,
			(const char *const *)d->methods, d->nmethods,
			(const char *const *)d->body, d->nbody,
		};
	}
	total = b->count + n;
	n = 0;
	f->all = (struct subst_set){ f->ss, total, p->ports, p->nports };
	for (i = 0; i < total; i++)
		if (!p->git_credential || strcmp(f->ss[i].name, p->git_credential) != 0)
			f->ss_nogit[n++] = f->ss[i];
	f->nogit = (struct subst_set){ f->ss_nogit, n, p->ports, p->nports };
}

struct secretfilter *secretfilter_new(const struct broker *b, const struct policy *p,
				      receipt_record_fn record, void *record_arg)
{
	struct secretfilter *f = util_xcalloc(1, sizeof(*f));
	size_t i;

	f->b = b;
	f->p = p;
	f->record = record;
	f->record_arg = record_arg;
	f->waits_tail = &f->waits;
	for (i = 0; i < p->nsecrets; i++)
		f->has_capture |= p->secrets[i].capture != NULL || p->secrets[i].oauth != NULL;
	build_sets(f);
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
	size_t i;

	if (!f)
		return;
	while (f->waits) {
		struct sf_wait *w = f->waits;

		f->waits = w->next;
		json_decref(w->receipt);
		free(w);
	}
	if (f->started)
		f->loop.set_tick(f->loop.ctx, NULL, f);
	free(f->ready);
	registry_free(f->reg);
	broker_drop(f->own);
	free(f->ss);
	free(f->ss_nogit);
	for (i = 0; i < f->nretired; i++)
		free(f->retired[i]);
	free(f->retired);
	for (i = 0; i < f->ncap; i++) {
		explicit_bzero(f->cap[i].value, f->cap[i].len);
		free(f->cap[i].value);
		free(f->cap[i].ph);
	}
	free(f->cap);
	free(f);
}

void secretfilter_set_capture_hooks(struct secretfilter *f, secretfilter_announce_fn announce,
				    secretfilter_sync_fn sync, void *arg)
{
	f->announce = announce;
	f->sync = sync;
	f->hook_arg = arg;
}

void secretfilter_set_oauth_hook(struct secretfilter *f, secretfilter_oauth401_fn fn)
{
	f->oauth401 = fn;
}

/* Registers a captured value and binds it as its secret says. Returns 1
 * when new, 0 when it was known, -1 when it cannot be registered. */
static int add_captured(struct secretfilter *f, const struct policy_secret *def,
			const char *value, size_t len, const char *ph, size_t phlen,
			time_t expires)
{
	struct sf_captured *c;
	int r = registry_add(f->reg, def->name, value, len, ph, phlen);
	size_t i;

	if (r == 0 && def->oauth) {
		/* the current token again: a new expiry (a refresh that
		 * failed after a 401 ends it now) */
		for (i = f->ncap; i-- > 0;)
			if (f->cap[i].def == def && !f->cap[i].superseded &&
			    f->cap[i].len == len && memcmp(f->cap[i].value, value, len) == 0)
				f->cap[i].expires = expires;
		return 0;
	}
	if (r <= 0)
		return r;
	/* an OAuth secret has one value in force: the newest */
	for (i = 0; def->oauth && i < f->ncap; i++)
		if (f->cap[i].def == def)
			f->cap[i].superseded = true;
	f->cap = util_xrealloc(f->cap, (f->ncap + 1) * sizeof(*f->cap));
	c = &f->cap[f->ncap++];
	c->def = def;
	c->value = util_xstrndup(value, len);
	c->len = len;
	c->ph = util_xstrndup(ph, phlen);
	c->phlen = phlen;
	c->expires = expires;
	c->superseded = false;
	build_sets(f);
	return 1;
}

int secretfilter_add_captured(struct secretfilter *f, const char *secret, const char *value,
			      size_t len, const char *ph, size_t phlen, time_t expires)
{
	const struct policy_secret *def = policy_secret_by_name(f->p, secret);

	if (!def || (!def->capture && !def->oauth))
		return -1;
	return add_captured(f, def, value, len, ph, phlen, expires) < 0 ? -1 : 0;
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

static int64_t record_f(struct secretfilter *f, const char *type, enum receipt_decision d,
			const char *rule, json_t *subject, const char *reason)
{
	int64_t seq = -1;

	if (f->record)
		seq = f->record(f->record_arg, type, d, RECEIPT_POINT_BROKER, rule, subject,
				reason);
	json_decref(subject);
	return seq;
}

static int64_t record(struct sf_state *st, const char *type, enum receipt_decision d,
		      const char *rule, json_t *subject, const char *reason)
{
	return record_f(st->f, type, d, rule, subject, reason);
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
	if (f->p->mode == POLICY_MODE_OFF ||
	    (!f->b->count && !registry_count(f->reg) && !f->has_capture))
		return NULL;
	/* every value another worker captured is known before this
	 * request is decided */
	if (f->has_capture && f->sync)
		f->sync(f->hook_arg);
	st = util_xcalloc(1, sizeof(*st));
	st->f = f;
	(void)util_strlcpy(st->host, rq->host->name, sizeof(st->host));
	st->port = rq->port;
	(void)util_strlcpy(st->method, rq->method, sizeof(st->method));
	st->path = util_xstrdup(rq->path);
	if (f->has_capture)
		st->cap_rule = capture_match(f->p, rq->host, rq->port, rq->method, rq->path,
					     &st->cap_secret, &st->cap_index);
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

/* A captured value past its expiry whose placeholder is in @text: its
 * entry, else NULL. */
static const struct sf_captured *expired_in(const struct secretfilter *f, const char *text,
					    size_t len, time_t now)
{
	size_t i;

	for (i = 0; i < f->ncap; i++) {
		const struct sf_captured *c = &f->cap[i];

		if (c->expires && c->expires <= now && !c->superseded && c->phlen <= len &&
		    memmem(text, len, c->ph, c->phlen))
			return c;
	}
	return NULL;
}

/* The request line, a header or the body holds the placeholder of an
 * expired captured value: 403, secret.block why "expired". */
static bool refuse_expired(struct sf_state *st, const struct filter_request *rq,
			   const char *target, const struct buf *body, struct verdict *v)
{
	const struct sf_captured *c = NULL;
	time_t now;
	size_t i;
	char rule[VERDICT_RULE_MAX];

	if (!st->f->ncap)
		return false;
	now = time(NULL);
	if (body)
		c = expired_in(st->f, body->data ? body->data : "", body->len, now);
	if (!c && target)
		c = expired_in(st->f, target, strlen(target), now);
	for (i = 0; !c && !body && i < rq->headers.count; i++)
		c = expired_in(st->f, rq->headers.h[i].value, strlen(rq->headers.h[i].value), now);
	if (!c)
		return false;
	if (c->def->oauth) {
		/* fail closed: no token in force (its refresh failed) */
		snprintf(rule, sizeof(rule), "secrets.%s.oauth", c->def->name);
		verdict_setf(v, VERDICT_FAIL, 502, rule,
			     "a placeholder of secret %s: no access token is in force (the "
			     "refresh failed)", c->def->name);
	} else {
		snprintf(rule, sizeof(rule), "secrets.%s.capture", c->def->name);
		verdict_setf(v, VERDICT_DENY, 403, rule,
			     "a placeholder of secret %s: the value it stood for has expired",
			     c->def->name);
	}
	v->type = "secret.block";
	v->point = RECEIPT_POINT_BROKER;
	v->extra = json_pack("{s:s, s:s, s:s, s:s, s:s}", "request_method", st->method,
			     "secret", c->def->name, "where", body ? "body" : "request",
			     "why", "expired", "path", st->path);
	return true;
}

/* An OAuth token injected: kept to ask for a refresh on a 401. */
static void note_oauth(struct sf_state *st, const struct subst_secret *s)
{
	const struct policy_secret *d = policy_secret_by_name(st->f->p, s->name);

	if (!d || !d->oauth || st->oauth_value)
		return;
	st->oauth_secret = d->name;
	st->oauth_value = util_xstrndup(s->value, s->value_len);
	st->oauth_len = s->value_len;
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

	st->ref = ref; /* a response hook may wait (sf_wait) */
	target = util_xasprintf("%s%s%s", rq->path, rq->query ? "?" : "",
				rq->query ? rq->query : "");
	if (refuse_expired(st, rq, target, NULL, v)) {
		free(target);
		return FILTER_VERDICT;
	}
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
			note_oauth(st, s);
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
	/* a host where a secret with body fields is bound: the whole body is
	 * read before anything of it is forwarded */
	if (rq->body != HTTP_BODY_NONE && bodysubst_wanted(set, rq->host, rq->port)) {
		asks->whole_body = true;
		asks->max_body = BODYSUBST_MAX;
		st->body_set = set;
		st->tls = tls;
	}
	st->rq = rq; /* valid until done: a 401 may edit it (oauth_retry) */
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

/* --- values captured from answers (capture.h) ------------------------------ */

/* From now on the answer is scrubbed of what was just captured too. */
static void refresh_values(struct sf_state *st)
{
	size_t old, n;

	if (!st->set)
		return; /* values() takes the newest set */
	old = scrub_set_count(registry_scrub(st->set));
	registry_release(st->set);
	st->set = registry_acquire(st->f->reg);
	n = scrub_set_count(registry_scrub(st->set));
	st->head_counts = util_xrealloc(st->head_counts, n * sizeof(uint64_t));
	memset(st->head_counts + old, 0, (n - old) * sizeof(uint64_t));
}

static void capture_rule(const struct sf_state *st, char *rule, size_t len)
{
	snprintf(rule, len, "secrets.%s.capture[%zu]", st->cap_secret->name, st->cap_index);
}

static json_t *capture_subject(const struct sf_state *st, const char *where, time_t expires)
{
	char when[32] = "";
	json_t *sj = subject(st, st->cap_secret->name);
	struct tm tm;

	if (where)
		json_object_set_new(sj, "where", json_string(where));
	if (expires && gmtime_r(&expires, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(sj, "expires_at", when[0] ? json_string(when) : json_null());
	return sj;
}

static void capture_record(struct sf_state *st, enum receipt_decision d, const char *where,
			   time_t expires, const char *reason)
{
	char rule[VERDICT_RULE_MAX];

	capture_rule(st, rule, sizeof(rule));
	record(st, "secret.capture", d, rule, capture_subject(st, where, expires), reason);
}

#define CAPTURED_REASON "a credential in the answer was captured and replaced by a placeholder"
#define UNTOLD_REASON "the other workers could not be told of the captured value"

/* --- waiting for the supervisor ---------------------------------------------- */

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* A question was sent that the supervisor answers: @st (NULL: no
 * exchange) waits for the answer, at most @ms; @receipt (a capture's,
 * taken) is recorded with it under @rule. */
static void wait_push(struct secretfilter *f, struct sf_state *st, json_t *receipt,
		      const char *rule, uint64_t ms)
{
	struct sf_wait *w = util_xcalloc(1, sizeof(*w));

	w->st = st;
	w->receipt = receipt;
	if (rule)
		(void)util_strlcpy(w->rule, rule, sizeof(w->rule));
	w->sent_us = now_us();
	*f->waits_tail = w;
	f->waits_tail = &w->next;
	if (st && st->waits++ == 0)
		st->deadline = util_now_ms() + ms;
}

void secretfilter_answered(struct secretfilter *f)
{
	struct sf_wait *w = f->waits;

	if (!w)
		return; /* nothing asked: not ours */
	f->waits = w->next;
	if (!f->waits)
		f->waits_tail = &f->waits;
	if (w->receipt) {
		json_object_set_new(w->receipt, "propagated_us",
				    json_integer((json_int_t)(now_us() - w->sent_us)));
		record_f(f, "secret.capture", RECEIPT_ALLOW, w->rule, w->receipt,
			 CAPTURED_REASON);
	}
	if (w->st && --w->st->waits == 0) {
		/* resumed from the loop (sf_tick), not from here: this may run
		 * while another request is being decided */
		f->ready = util_xrealloc(f->ready, (f->nready + 1) * sizeof(*f->ready));
		f->ready[f->nready++] = w->st->ref;
	}
	free(w);
}

/* @st's answer did not come in time: its questions are given up on (a
 * capture's recorded as blocked) and the exchange is answered 502. */
static void give_up(struct secretfilter *f, struct sf_state *st)
{
	struct filter_ref ref = st->ref;
	struct sf_wait *w;
	struct verdict v;
	char rule[VERDICT_RULE_MAX];

	for (w = f->waits; w; w = w->next) {
		if (w->st != st)
			continue;
		w->st = NULL;
		if (w->receipt)
			record_f(f, "secret.capture", RECEIPT_BLOCK, w->rule, w->receipt,
				 UNTOLD_REASON " in time");
		w->receipt = NULL;
	}
	st->waits = 0;
	if (st->wait_oauth) {
		snprintf(rule, sizeof(rule), "secrets.%s.oauth", st->oauth_secret);
		verdict_setf(&v, VERDICT_FAIL, 502, rule,
			     "the refresh of secret %s after a 401 was not answered within "
			     "%llu ms", st->oauth_secret, (unsigned long long)f->oauth_ms);
	} else {
		capture_rule(st, rule, sizeof(rule));
		verdict_setf(&v, VERDICT_FAIL, 502, rule,
			     UNTOLD_REASON " within %llu ms: the answer is not relayed",
			     (unsigned long long)f->capture_ms);
	}
	v.point = RECEIPT_POINT_BROKER;
	v.always = true;
	if (f->loop.resume(f->loop.ctx, &ref, FILTER_VERDICT, &v) < 0)
		verdict_clear(&v);
}

/* Resumes the exchanges answered, gives up on the overdue ones. */
static int sf_tick(void *arg, uint64_t now)
{
	struct secretfilter *f = arg;
	uint64_t first = UINT64_MAX;
	struct sf_wait *w;

	while (f->nready) {
		struct filter_ref ref = f->ready[--f->nready];

		(void)f->loop.resume(f->loop.ctx, &ref, FILTER_CONTINUE, NULL);
	}
again:
	for (w = f->waits; w; w = w->next) {
		if (!w->st || !w->st->waits)
			continue;
		if (w->st->deadline <= now) {
			/* resuming may change the list: from its head again */
			give_up(f, w->st);
			goto again;
		}
		if (w->st->deadline < first)
			first = w->st->deadline;
	}
	if (f->nready)
		return 0;
	if (first == UINT64_MAX)
		return -1;
	return first - now > 1000 ? 1000 : (int)(first - now);
}

void secretfilter_start(struct secretfilter *f, const struct filter_loop *loop,
			uint64_t capture_ms, uint64_t oauth_ms)
{
	f->loop = *loop;
	f->started = true;
	f->capture_ms = capture_ms;
	f->oauth_ms = oauth_ms;
	loop->set_tick(loop->ctx, sf_tick, f);
}

/* Registers @value, captured at @where, tells the other workers and
 * records it; false (recorded) when it cannot be: the answer must not be
 * relayed then. */
static bool capture_one(struct sf_state *st, const char *value, size_t len, time_t expires,
			const char *where)
{
	struct secretfilter *f = st->f;
	size_t phlen = 0;
	char *ph = capture_placeholder(value, len, &phlen);
	int sent = 0;
	int r = ph ? add_captured(f, st->cap_secret, value, len, ph, phlen, expires) : -1;
	char rule[VERDICT_RULE_MAX];

	if (r > 0 && f->announce)
		sent = f->announce(f->hook_arg, st->cap_secret->name, expires, value, len, ph,
				   phlen);
	free(ph);
	if (r < 0 || sent < 0) {
		capture_record(st, RECEIPT_BLOCK, where, expires,
			       r < 0 ? "the captured value cannot be brokered (empty, too "
				       "long, or a control byte)"
				     : UNTOLD_REASON);
		return false;
	}
	if (r == 0)
		return true;
	refresh_values(st);
	if (!f->announce) {
		capture_record(st, RECEIPT_ALLOW, where, expires, CAPTURED_REASON);
		return true;
	}
	/* the supervisor answers once every other worker has it queued: the
	 * exchange waits for that before the agent sees the answer (h2.c
	 * cannot wait: there the receipt comes with the answer all the
	 * same) */
	capture_rule(st, rule, sizeof(rule));
	wait_push(f, st->can_wait ? st : NULL, capture_subject(st, where, expires), rule,
		  f->capture_ms);
	return true;
}

/* The answer's head: values in listed headers are captured (the scrubber
 * then replaces them); a JSON rule reads the body whole. */
static bool capture_head(struct sf_state *st, struct filter_response *rs)
{
	const struct policy_capture *k = st->cap_rule;
	size_t i;
	int h;

	if (!k || rs->status < 200 || rs->status > 299)
		return true;
	for (i = 0; i < k->nheaders; i++)
		for (h = filter_headers_find(&rs->headers, k->headers[i], 0); h >= 0;
		     h = filter_headers_find(&rs->headers, k->headers[i], (size_t)h + 1))
			if (rs->headers.h[h].value[0] &&
			    !capture_one(st, rs->headers.h[h].value, strlen(rs->headers.h[h].value),
					 0, k->headers[i]))
				return false;
	st->cap_body = k->njson && rs->body != HTTP_BODY_NONE;
	return true;
}

/* The whole answer body, scrubbed (with what was captured in it) into
 * @out, and wiped. */
static void capture_write(struct sf_state *st, struct buf *out)
{
	const char *body = st->cap_buf.data ? st->cap_buf.data : "";
	struct scrub_buf sb = { 0 };

	if (values(st)) {
		st->cap_counts = util_xcalloc(scrub_set_count(values(st)), sizeof(uint64_t));
		(void)scrub_oneshot(values(st), body, st->cap_buf.len, &sb, st->cap_counts);
		buf_append(out, sb.data, sb.len);
		explicit_bzero(sb.data, sb.len);
		scrub_buf_free(&sb);
	} else {
		buf_append(out, body, st->cap_buf.len);
	}
	if (st->cap_buf.data)
		explicit_bzero(st->cap_buf.data, st->cap_buf.cap);
	buf_free(&st->cap_buf);
}

/* The whole answer body of a JSON rule: its values captured (and
 * announced). Returns 0, or -1 to cut the answer. */
static int capture_body(struct sf_state *st)
{
	struct capture_value vals[CAPTURE_VALUES_MAX];
	const char *body = st->cap_buf.data ? st->cap_buf.data : "";
	time_t expires = 0;
	char err[256];
	int n, i, rc = 0;

	n = capture_json(st->cap_rule, body, st->cap_buf.len, time(NULL), vals, &expires, err,
			 sizeof(err));
	if (n < 0) {
		capture_record(st, RECEIPT_BLOCK, NULL, 0, err);
		return -1;
	}
	for (i = 0; i < n && rc == 0; i++) {
		/* the scrubber replaces the value where it is written as it
		 * is; one written escaped would pass: refused */
		if (!memmem(body, st->cap_buf.len, vals[i].value, vals[i].len)) {
			capture_record(st, RECEIPT_BLOCK, vals[i].where, expires,
				       "the captured value is escaped in the answer: it "
				       "cannot be replaced");
			rc = -1;
		} else if (!capture_one(st, vals[i].value, vals[i].len, expires, vals[i].where)) {
			rc = -1;
		}
	}
	capture_values_free(vals, (size_t)n);
	if (rc < 0) {
		if (st->cap_buf.data)
			explicit_bzero(st->cap_buf.data, st->cap_buf.cap);
		buf_free(&st->cap_buf);
	}
	return rc;
}

/* --- a 401 to an OAuth token ------------------------------------------------ */

/* The OAuth value of @def in force (the newest, unexpired), or NULL. */
static const struct sf_captured *oauth_in_force(const struct secretfilter *f,
						 const struct policy_secret *def, time_t now)
{
	size_t i;

	for (i = f->ncap; i-- > 0;)
		if (f->cap[i].def == def && !f->cap[i].superseded)
			return f->cap[i].expires > now ? &f->cap[i] : NULL;
	return NULL;
}

/* Replaces @old by @new in every header value of @hs; returns how many. */
static size_t swap_value(struct filter_headers *hs, const char *old, size_t olen,
			 const char *new, size_t nlen)
{
	size_t i, n = 0;

	for (i = 0; i < hs->count; i++) {
		char *v = hs->h[i].value, *at = memmem(v, strlen(v), old, olen);
		char *out;

		if (!at)
			continue;
		out = util_xasprintf("%.*s%.*s%s", (int)(at - v), v, (int)nlen, new,
				     at + olen);
		explicit_bzero(v, strlen(v));
		free(v);
		hs->h[i].value = out;
		n++;
	}
	return n;
}

static void retry_record(struct sf_state *st, enum receipt_decision d, const char *why,
			 const char *reason)
{
	char rule[VERDICT_RULE_MAX];
	json_t *sj = subject(st, st->oauth_secret);

	json_object_set_new(sj, "why", json_string(why));
	json_object_set_new(sj, "status", json_integer(401));
	snprintf(rule, sizeof(rule), "secrets.%s.oauth", st->oauth_secret);
	record(st, "secret.retry", d, rule, sj, reason);
}

/* A bound host answered 401 to the OAuth token injected: the supervisor
 * refreshes it (once per request). When the exchange can send the
 * request again, it waits for the supervisor's answer (true: pending;
 * then oauth_again()). Otherwise the 401 is relayed, and recorded
 * (secret.retry, info, why): false. */
static bool oauth_retry(struct sf_state *st, const struct filter_response *rs)
{
	struct secretfilter *f = st->f;
	bool wait = rs->replayable && rs->can_wait;

	if (st->retried) {
		retry_record(st, RECEIPT_INFO, "retried",
			     "the request sent again with the refreshed token was refused too: "
			     "its 401 is relayed");
		return false;
	}
	if (f->oauth401(f->hook_arg, st->oauth_secret, st->oauth_value, st->oauth_len,
			wait) < 0) {
		retry_record(st, RECEIPT_INFO, "no-refresh",
			     "the supervisor could not be asked for a refresh: the 401 is "
			     "relayed");
		return false;
	}
	if (!wait) {
		retry_record(st, RECEIPT_INFO, "not-replayable",
			     "the token was refreshed for the next request; this one cannot be "
			     "sent again (its body was streamed, or the connection ends): its "
			     "401 is relayed");
		return false;
	}
	st->wait_oauth = true;
	st->oauth_asked = true;
	wait_push(f, st, NULL, NULL, f->oauth_ms);
	return true;
}

/* The supervisor answered the refresh: when a new token is in force,
 * the request's headers get it: true, the request goes again. Otherwise
 * the 401 is relayed, and recorded. */
static bool oauth_again(struct sf_state *st)
{
	struct secretfilter *f = st->f;
	const struct policy_secret *def = policy_secret_by_name(f->p, st->oauth_secret);
	const struct sf_captured *c;

	st->oauth_asked = false;
	st->wait_oauth = false;
	c = def ? oauth_in_force(f, def, time(NULL)) : NULL;
	if (!c || (c->len == st->oauth_len && memcmp(c->value, st->oauth_value, c->len) == 0)) {
		retry_record(st, RECEIPT_INFO, "no-new-token",
			     "no new token is in force (the refresh failed): the 401 is relayed");
		return false;
	}
	if (!swap_value(&st->rq->headers, st->oauth_value, st->oauth_len, c->value, c->len)) {
		retry_record(st, RECEIPT_INFO, "not-in-a-header",
			     "the token was not in a header as it is: the 401 is relayed");
		return false;
	}
	explicit_bzero(st->oauth_value, st->oauth_len);
	free(st->oauth_value);
	st->oauth_value = util_xstrndup(c->value, c->len);
	st->oauth_len = c->len;
	st->retried = true;
	retry_record(st, RECEIPT_ALLOW, "refreshed",
		     "the request was sent again, once, with the refreshed token");
	return true;
}

static void sf_response_interim(void *vst, struct filter_response *rs)
{
	scrub_head(vst, rs);
}

/* HTTP/2 trailers: scrubbed as a head's headers are. */
static void sf_response_trailers(void *vst, struct filter_headers *trailers)
{
	struct filter_response rs = { .headers = *trailers };

	scrub_head(vst, &rs);
	*trailers = rs.headers;
}

/* HTTP/2 request trailers: decided as the head's fields are (the
 * placeholder substituted where its secret is bound, refused elsewhere),
 * with the request's method, path and host. */
static enum filter_result sf_request_trailers(void *vst, const struct filter_request *rq,
					      struct filter_headers *trailers,
					      struct verdict *v)
{
	struct sf_state *st = vst;
	struct secretfilter *f = st->f;
	const struct subst_set *set = is_git_host(f->p, st->host) ? &f->nogit : &f->all;
	struct filter_request t = *rq;
	struct http_request hr;
	struct subst_result r;
	char *target;
	size_t i;

	t.headers = *trailers;
	target = util_xasprintf("%s%s%s", rq->path, rq->query ? "?" : "",
				rq->query ? rq->query : "");
	if (!as_parsed(&t, target, &hr)) {
		free(target);
		verdict_set(v, VERDICT_FAIL, 502, "proxy.filter",
			    "too many trailer fields to decide on the secrets");
		return FILTER_VERDICT;
	}
	subst_decide(set, &hr, rq->host, rq->port, rq->inner && rq->client_tls, &r);
	free(target);
	if (r.verdict == SUBST_REFUSE) {
		refuse(st, set, &r, &t, v);
		subst_result_free(&r);
		return FILTER_VERDICT;
	}
	for (i = 0; r.verdict == SUBST_REWRITE && i < r.nrewrites; i++) {
		struct filter_header *h = &trailers->h[r.rewrites[i].header];

		explicit_bzero(h->value, strlen(h->value));
		free(h->value);
		h->value = util_xstrndup(r.rewrites[i].value, r.rewrites[i].len);
	}
	for (i = 0; r.verdict == SUBST_REWRITE && i < r.ninjections; i++) {
		const struct subst_secret *s = &set->secrets[r.injections[i].secret];
		json_t *sj = subject(st, s->name);
		char rule[VERDICT_RULE_MAX];

		json_object_set_new(sj, "trailer",
				    json_string(trailers->h[r.injections[i].header].name));
		snprintf(rule, sizeof(rule), "secrets.%s", s->name);
		(void)record(st, "secret.inject", RECEIPT_ALLOW, rule, sj, "injected");
	}
	subst_result_free(&r);
	return FILTER_CONTINUE;
}

static enum filter_result sf_response_head(void *vst, struct filter_response *rs,
					   struct filter_transform *tf, struct verdict *v)
{
	struct sf_state *st = vst;
	const char *ce = NULL;
	int i;

	st->can_wait = rs->can_wait;
	if (st->oauth_asked) {
		/* resumed: the supervisor answered the refresh */
		if (oauth_again(st)) {
			tf->retry = true;
			return FILTER_CONTINUE;
		}
	} else if (rs->status == 401 && st->oauth_value && st->f->oauth401 &&
		   oauth_retry(st, rs)) {
		return FILTER_PENDING;
	}
	if (!st->head_captured) {
		st->head_captured = true;
		if (!capture_head(st, rs)) {
			verdict_set(v, VERDICT_FAIL, 502, "secrets.capture",
				    "a credential in the answer could not be brokered");
			v->always = true;
			return FILTER_VERDICT;
		}
		/* the head waits until every worker has what it holds */
		if (st->waits)
			return FILTER_PENDING;
	}
	scrub_head(st, rs);
	if (st->cap_body) {
		/* read whole: captured, then scrubbed (capture_body); the
		 * head waits, so that a value that cannot be brokered is
		 * answered 502 */
		tf->enabled = true;
		tf->keeps_length = false;
		tf->hold_head = true;
		snprintf(st->hold_rule, sizeof(st->hold_rule), "secrets.%s.capture[%zu]",
			 st->cap_secret->name, st->cap_index);
		tf->hold_rule = st->hold_rule;
		tf->hold_reason = "a credential in the answer could not be brokered (see "
				  "its secret.capture receipt)";
		return FILTER_CONTINUE;
	}
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

	if (st->cap_body) {
		if (!out || st->cap_failed)
			return st->cap_failed ? -1 : 0;
		if (st->cap_ready) {
			/* resumed: every worker has what the body held */
			st->cap_ready = false;
			capture_write(st, out);
			return 0;
		}
		if (len > CAPTURE_BODY_MAX - st->cap_buf.len) {
			capture_record(st, RECEIPT_BLOCK, NULL, 0,
				       "the answer is larger than a capture reads");
			st->cap_failed = true;
			return -1;
		}
		buf_append(&st->cap_buf, data, len);
		if (!last)
			return 0;
		if (capture_body(st) < 0) {
			st->cap_failed = true;
			return -1;
		}
		if (st->waits) {
			/* the end waits until every worker has its values */
			st->cap_ready = true;
			return 1;
		}
		capture_write(st, out);
		return 0;
	}
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

/* The whole body of a request to a host where a secret with body fields
 * is bound: placeholders substituted in the listed fields, refused
 * anywhere else. */
static enum filter_result sf_request_body(void *vst, const char *data, size_t len,
					  bool last, struct buf *body, struct filter_ref ref,
					  struct verdict *v)
{
	struct sf_state *st = vst;
	const struct subst_set *set = st->body_set;
	struct bodysubst_request q;
	struct bodysubst_result r = { 0 };

	(void)data;
	(void)len;
	(void)ref;
	if (!set || !body || !last)
		return FILTER_CONTINUE;
	if (refuse_expired(st, st->rq, NULL, body, v))
		return FILTER_VERDICT;
	q = (struct bodysubst_request){ st->method, st->path,
					filter_headers_get(&st->rq->headers, "content-type"),
					st->rq->host, st->rq->port, st->tls };
	bodysubst_decide(set, &q, body->data ? body->data : "", body->len, &r);
	if (r.verdict == SUBST_REFUSE) {
		const char *name = set->secrets[r.secret].name;

		char rule[VERDICT_RULE_MAX];

		if (strcmp(r.why, "body") == 0 || strcmp(r.why, "unreadable") == 0)
			snprintf(rule, sizeof(rule), "secrets.%s.body", name);
		else if (strcmp(r.why, "plain-http") == 0)
			snprintf(rule, sizeof(rule), "secrets.%s", name);
		else
			snprintf(rule, sizeof(rule), "secrets.%s.%ss", name, r.why);
		verdict_setf(v, VERDICT_DENY, 403, rule,
			     "a placeholder of secret %s in the body: %s", name,
			     strcmp(r.why, "body") == 0 ? "not in a body field the secret lists"
			     : strcmp(r.why, "unreadable") == 0
				     ? "the body does not parse as its Content-Type says"
				     : "the secret is not bound to this request");
		v->type = "secret.block";
		v->point = RECEIPT_POINT_BROKER;
		v->extra = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s}", "request_method",
				     st->method, "secret", name, "where", "body", "field", r.field,
				     "why", r.why, "path", st->path);
		bodysubst_result_free(&r);
		return FILTER_VERDICT;
	}
	if (r.verdict == SUBST_REWRITE) {
		if (body->data)
			explicit_bzero(body->data, body->len);
		body->len = 0;
		if (r.body)
			buf_append(body, r.body, r.len);
		for (size_t i = 0; i < r.ninj; i++) {
			const char *name = set->secrets[r.inj[i].secret].name;
			json_t *sj = subject(st, name);
			char rule[VERDICT_RULE_MAX];

			json_object_set_new(sj, "field", json_string(r.inj[i].field));
			if (!st->injected)
				st->injected = json_array();
			snprintf(rule, sizeof(rule), "secrets.%s", name);
			json_array_append_new(st->injected, json_pack("[s, o]", rule, sj));
		}
	}
	bodysubst_result_free(&r);
	return FILTER_CONTINUE;
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
	struct sf_wait *w;

	(void)outcome;
	(void)stats;
	/* an answer still to come resumes nothing (a capture's receipt is
	 * still made with it) */
	for (w = st->f->waits; w; w = w->next)
		if (w->st == st)
			w->st = NULL;
	if (st->set)
		record_counts(st->f, st->set, st->host, st->port, st->method, st->path,
			      st->head_counts, "in_head",
			      st->cap_counts ? st->cap_counts
			      : st->body   ? scrub_counts(st->body)
					   : NULL,
			      "in_body");
	if (st->cap_buf.data)
		explicit_bzero(st->cap_buf.data, st->cap_buf.cap);
	buf_free(&st->cap_buf);
	free(st->cap_counts);
	scrub_free(st->body);
	registry_release(st->set);
	free(st->head_counts);
	json_decref(st->injected); /* never left: nothing was injected */
	free(st->path);
	if (st->oauth_value) {
		explicit_bzero(st->oauth_value, st->oauth_len);
		free(st->oauth_value);
	}
	free(st);
}

/* A secret's hosts, on the port egress.allow reads. */
static bool secret_needs_cleartext(const struct policy *p, const struct host_target *t,
				   uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++) {
		size_t j;

		if (filter_host_ruled(p->secrets[i].hosts, p->secrets[i].nhosts, p, t, port,
				      any_port))
			return true;
		/* the answers a capture rule reads */
		for (j = 0; j < p->secrets[i].ncapture; j++)
			if (filter_host_ruled(p->secrets[i].capture[j].hosts,
					      p->secrets[i].capture[j].nhosts, p, t, port,
					      any_port))
				return true;
	}
	return false;
}

const struct filter_ops secretfilter_ops = {
	.name = "secrets",
	.attach = sf_attach,
	.request_head = sf_request_head,
	.request_body = sf_request_body,
	.response_head = sf_response_head,
	.response_body = sf_response_body,
	.request_sent = sf_request_sent,
	.response_interim = sf_response_interim,
	.upgraded = sf_upgraded,
	.response_trailers = sf_response_trailers,
	.request_trailers = sf_request_trailers,
	.done = sf_done,
	.needs_cleartext = secret_needs_cleartext,
};

/* --- the registration ------------------------------------------------------- */

/* The block: every brokered secret (broker_put()). */
static int sf_config_put(const struct filter_source *src, struct msg *blk, int *fd, char *err,
			 size_t errlen)
{
	static const struct broker none = { 0 };

	(void)fd;
	(void)err;
	(void)errlen;
	broker_put(src->broker ? src->broker : &none, src->policy, NULL, blk);
	return 0;
}

static void *sf_make(struct filter_env *env, struct msg_reader *blk, int fd, char *err,
		     size_t errlen)
{
	struct broker *own = broker_get(env->policy, blk, fd, err, errlen);
	struct secretfilter *f;

	if (!own)
		return NULL;
	f = secretfilter_new(own, env->policy, env->record, env->arg);
	f->own = own;
	secretfilter_set_capture_hooks(f, env->announce, env->sync, env->arg);
	secretfilter_set_oauth_hook(f, env->oauth401);
	env->registry = f->reg;
	return f;
}

static int sf_start(void *f, const struct filter_loop *loop)
{
	secretfilter_start(f, loop, util_test_ms("capture_wait", SECRETFILTER_CAPTURE_WAIT_MS),
			   util_test_ms("oauth_wait", SECRETFILTER_OAUTH_WAIT_MS));
	return 0;
}

const struct filter_def secretfilter_def = {
	.name = "secrets",
	.ops = &secretfilter_ops,
	.config_put = sf_config_put,
	.make = sf_make,
	.configure = NULL,
	.start = sf_start,
};
