/* SPDX-License-Identifier: Apache-2.0
 * awsfilter.c - secrets of kind "aws" in the HTTP exchange.
 *
 * DOC: Theory of Operation
 *
 * A secret of kind aws (SPEC §3.4) gives the agent a placeholder access
 * key id, secret access key and session token. The agent's AWS client
 * signs with them as usual; this filter, first in the chain, finds the
 * placeholder key id in a request's Authorization and, when the request
 * is inside intercepted TLS to one of the secret's hosts (and to what its
 * Host header names, which may only narrow), hands it to sigv4.c: the
 * signature must verify with the placeholder secret, and the request is
 * signed again with the real credentials. What leaves differs from what
 * the agent sent only in the Authorization's key id and signature, and
 * the X-Amz-Security-Token value (the real session token). Anything that
 * does not verify is refused with 403 and secret.block: nothing of it is
 * forwarded.
 *
 * The body: a request without x-amz-content-sha256 signs its body's hash
 * (STS, most services): the filter asks the exchange for the whole body,
 * then decides. A signed aws-chunked upload (STREAMING-AWS4-HMAC-SHA256-
 * PAYLOAD) is read whole too, every chunk signature verified with the
 * placeholder chain and replaced by the real chain's, of the same length
 * (sigv4_resign_chunks()). UNSIGNED-PAYLOAD and a payload hash in the
 * header pass the body as it is: AWS checks the hash.
 *
 * A presigned URL (X-Amz-Credential in the query) carrying the placeholder
 * key id is refused: to work it would have to leave the proxy. Every other
 * place an aws placeholder may turn up (another header, another host,
 * plain http, the query) is the secrets filter's: it never substitutes an
 * aws value (broker.c binds them to no host for substitution) and refuses
 * the request. The real values are in the scrubbing registry like every
 * other secret's (secretfilter.c).
 *
 * Receipts: secret.inject (secret, host, port, method, path, header
 * "authorization", kind "aws", resigned true, chunks) when the request
 * leaves; secret.block with "why" (sigv4_status_to_string(), or
 * "presigned") when refused. Never a value.
 */
#include "awsfilter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msg.h"
#include "policy.h"
#include "sigv4.h"
#include "util.h"

/* One secret of kind aws: its placeholder and real credentials. */
struct aws_secret {
	const struct policy_secret *def;   /* the key id's entry: name, hosts */
	struct sigv4_creds ph, real;
};

struct awsfilter {
	const struct policy *p;
	struct broker *own;          /* the secrets, when made from a
					configuration block: freed with it */
	struct aws_secret *s;
	size_t n;
	receipt_record_fn record;
	void *record_arg;
};

struct af_state {
	struct awsfilter *f;
	const struct aws_secret *s;
	char host[HOSTNAME_MAX + 1];
	uint16_t port;
	char method[24];
	char *path;
	bool need_hash;          /* the body's hash is signed: decide on it */
	bool chunked;            /* re-sign the aws-chunked body */
	bool resigned;           /* record secret.inject when it leaves */
	size_t chunks;
	struct sigv4_resign rs;
	struct filter_request *rq; /* valid until done (filter.h) */
	/* while the body is read: the Authorization and session token the
	 * agent sent, held back from the filters after this one */
	char *held[2];
};

static const char *const held_names[2] = { "authorization", "x-amz-security-token" };

/* Holds back (@hold) or puts back the fields that carry placeholders
 * while the body is read: the secrets filter decides on the head before
 * the body comes, and would refuse the placeholder key id. */
static void hold(struct af_state *st, struct filter_request *rq, bool hold)
{
	size_t i, k;

	for (i = 0; i < rq->headers.count; i++)
		for (k = 0; k < 2; k++) {
			struct filter_header *h = &rq->headers.h[i];

			if (strcasecmp(h->name, held_names[k]) != 0)
				continue;
			if (hold && !st->held[k]) {
				st->held[k] = h->value;
				h->value = util_xstrdup("airlock-held");
			} else if (!hold && st->held[k]) {
				free(h->value);
				h->value = st->held[k];
				st->held[k] = NULL;
			}
		}
}

struct awsfilter *awsfilter_new(const struct broker *b, const struct policy *p,
				receipt_record_fn record, void *record_arg)
{
	struct awsfilter *f;
	size_t i;

	for (i = 0; i < b->count; i++)
		if (b->secrets[i].def->aws == POLICY_AWS_KEY_ID)
			break;
	if (i == b->count)
		return NULL;
	f = util_xcalloc(1, sizeof(*f));
	f->p = p;
	f->record = record;
	f->record_arg = record_arg;
	f->s = util_xcalloc(b->count, sizeof(*f->s));
	for (i = 0; i < b->count; i++) {
		const struct broker_secret *bs = &b->secrets[i];
		struct aws_secret *a;

		switch (bs->def->aws) {
		case POLICY_AWS_KEY_ID:
			a = &f->s[f->n++];
			a->def = bs->def;
			a->ph.key_id = bs->placeholder;
			a->real.key_id = bs->value;
			break;
		case POLICY_AWS_SECRET:
			ASSERT(f->n > 0);
			a = &f->s[f->n - 1];
			a->ph.secret = bs->placeholder;
			a->ph.secret_len = bs->placeholder_len;
			a->real.secret = bs->value;
			a->real.secret_len = bs->value_len;
			break;
		case POLICY_AWS_TOKEN:
			ASSERT(f->n > 0);
			a = &f->s[f->n - 1];
			a->ph.token = bs->placeholder;
			a->real.token = bs->value;
			break;
		case POLICY_AWS_NONE:
		default:
			break;
		}
	}
	for (i = 0; i < f->n; i++)
		ASSERT(f->s[i].ph.secret && f->s[i].real.secret);
	return f;
}

void awsfilter_free(struct awsfilter *f)
{
	if (!f)
		return;
	broker_drop(f->own);
	free(f->s);
	free(f);
}

static bool holds(const char *s, const char *needle)
{
	return s && needle && *needle && strstr(s, needle);
}

static void *af_attach(void *arg, const struct filter_request *rq)
{
	struct awsfilter *f = arg;
	struct af_state *st;
	size_t i, k;

	if (!f || f->p->mode == POLICY_MODE_OFF)
		return NULL;
	for (k = 0; k < f->n; k++) {
		const struct aws_secret *a = &f->s[k];
		bool seen = holds(rq->query, a->ph.key_id);

		for (i = 0; !seen && i < rq->headers.count; i++)
			seen = strcasecmp(rq->headers.h[i].name, "authorization") == 0 &&
			       holds(rq->headers.h[i].value, a->ph.key_id);
		if (seen)
			break;
	}
	if (k == f->n)
		return NULL;
	st = util_xcalloc(1, sizeof(*st));
	st->f = f;
	st->s = &f->s[k];
	(void)util_strlcpy(st->host, rq->host->name, sizeof(st->host));
	st->port = rq->port;
	(void)util_strlcpy(st->method, rq->method, sizeof(st->method));
	st->path = util_xstrdup(rq->path);
	return st;
}

static json_t *subject(const struct af_state *st)
{
	return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "secret", st->s->def->name,
			 "host", st->host, "port", st->port, "method", st->method, "path",
			 st->path, "header", "authorization", "kind", "aws");
}

static enum filter_result refuse(struct af_state *st, struct verdict *v, const char *why,
				 const char *reason)
{
	char rule[VERDICT_RULE_MAX];

	snprintf(rule, sizeof(rule), "secrets.%s", st->s->def->name);
	verdict_setf(v, VERDICT_DENY, 403, rule, "a request signed with the placeholder "
		     "of secret %s: %s", st->s->def->name, reason);
	v->type = "secret.block";
	v->point = RECEIPT_POINT_BROKER;
	v->extra = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "request_method",
			     st->method, "secret", st->s->def->name, "where",
			     strcmp(why, "presigned") == 0 ? "query" : "header", "header",
			     "authorization", "why", why, "kind", "aws", "path", st->path);
	return FILTER_VERDICT;
}

static bool bound(const struct awsfilter *f, const struct aws_secret *a,
		  const struct host_target *host, uint16_t port)
{
	size_t i;

	for (i = 0; i < a->def->nhosts; i++)
		if (host_rule_matches(&a->def->hosts[i], host, port, f->p->ports, f->p->nports,
				      false))
			return true;
	return false;
}

/* The fields as sigv4.c reads them: the header list, and the framing the
 * exchange keeps apart: the Host field and Content-Length (signed by S3's
 * clients). Returns a malloc'd array of *n entries; @cl and @host hold
 * their text. */
static struct sigv4_field *fields_of(const struct filter_request *rq, char cl[24],
				     char host[HOSTNAME_MAX + 16], size_t *n)
{
	struct sigv4_field *fs = util_xcalloc(rq->headers.count + 2, sizeof(*fs));
	const struct host_target *h = rq->named_host ? rq->named_host : rq->host;
	bool v6 = h->is_addr && strchr(h->name, ':');
	size_t i;

	for (i = 0; i < rq->headers.count; i++)
		fs[i] = (struct sigv4_field){ rq->headers.h[i].name, rq->headers.h[i].value };
	*n = rq->headers.count;
	/* the Host field as the exchange writes it upstream (exchange.c) */
	snprintf(host, HOSTNAME_MAX + 16, "%s%s%s", v6 ? "[" : "", h->name, v6 ? "]" : "");
	if (rq->named_port_explicit)
		snprintf(host + strlen(host), HOSTNAME_MAX + 16 - strlen(host), ":%u",
			 rq->named_port);
	fs[(*n)++] = (struct sigv4_field){ "host", host };
	if (rq->body == HTTP_BODY_LENGTH) {
		snprintf(cl, 24, "%llu", (unsigned long long)rq->content_length);
		fs[(*n)++] = (struct sigv4_field){ "content-length", cl };
	}
	return fs;
}

/* Verifies and re-signs the head; @hash is the body's (or NULL). */
static enum filter_result decide(struct af_state *st, struct filter_request *rq,
				 struct filter_asks *asks, const char *hash, struct verdict *v)
{
	struct sigv4_msg m = { rq->method, rq->path, rq->query, NULL, 0 };
	struct sigv4_field *fs;
	enum sigv4_status s;
	char cl[24], host[HOSTNAME_MAX + 16];
	size_t i;

	fs = fields_of(rq, cl, host, &m.nfields);
	m.fields = fs;
	sigv4_resign_free(&st->rs);
	s = sigv4_resign_head(&m, hash, &st->s->ph, &st->s->real, &st->rs);
	if (s == SIGV4_NEED_BODY && (rq->body == HTTP_BODY_NONE ||
				     (rq->body == HTTP_BODY_LENGTH && rq->content_length == 0))) {
		char empty[SIGV4_HEX_LEN + 1];

		sigv4_sha256_hex("", 0, empty);
		sigv4_resign_free(&st->rs);
		s = sigv4_resign_head(&m, empty, &st->s->ph, &st->s->real, &st->rs);
	}
	free(fs);
	if (s == SIGV4_NEED_BODY && asks) {
		asks->whole_body = true;
		st->need_hash = true;
		hold(st, rq, true);
		return FILTER_CONTINUE;
	}
	if (s != SIGV4_OK)
		return refuse(st, v, sigv4_status_to_string(s), sigv4_status_reason(s));
	for (i = 0; i < rq->headers.count; i++) {
		struct filter_header *h = &rq->headers.h[i];
		const char *nv = NULL;

		if (strcasecmp(h->name, "authorization") == 0)
			nv = st->rs.authorization;
		else if (st->rs.token && strcasecmp(h->name, "x-amz-security-token") == 0)
			nv = st->rs.token;
		if (!nv)
			continue;
		explicit_bzero(h->value, strlen(h->value));
		free(h->value);
		h->value = util_xstrdup(nv);
	}
	if (st->rs.chunked && rq->body != HTTP_BODY_NONE) {
		if (!asks)
			return refuse(st, v, "chunk", sigv4_status_reason(SIGV4_CHUNK));
		asks->whole_body = true;
		st->chunked = true;
		return FILTER_CONTINUE;
	}
	st->resigned = true;
	return FILTER_CONTINUE;
}

static enum filter_result af_request_head(void *vst, struct filter_request *rq,
					  struct filter_asks *asks, struct filter_ref ref,
					  struct verdict *v)
{
	struct af_state *st = vst;
	const struct aws_secret *a = st->s;
	bool tls = rq->inner && rq->client_tls;

	(void)ref;
	st->rq = rq;
	if (holds(rq->query, a->ph.key_id))
		return refuse(st, v, "presigned",
			      "a presigned URL carrying the placeholder would have to "
			      "leave the proxy to work");
	/* outside verified TLS, or to a host it is not bound to (the Host
	 * header may narrow, never widen): the secrets filter refuses the
	 * placeholder where it is */
	if (!tls || !bound(st->f, a, rq->host, rq->port) ||
	    (rq->named_host && !bound(st->f, a, rq->named_host, rq->named_port)))
		return FILTER_CONTINUE;
	return decide(st, rq, asks, NULL, v);
}

/* The whole body, when asked for: its hash decides, or its chunks are
 * re-signed. */
static enum filter_result af_request_body(void *vst, const char *data, size_t len, bool last,
					  struct buf *body, struct filter_ref ref,
					  struct verdict *v)
{
	struct af_state *st = vst;
	enum sigv4_status s;

	(void)data;
	(void)len;
	(void)last;
	(void)ref;
	if (!body || !(st->need_hash || st->chunked))
		return FILTER_CONTINUE;
	if (st->need_hash) {
		char hash[SIGV4_HEX_LEN + 1];
		enum filter_result r;

		st->need_hash = false;
		hold(st, st->rq, false);
		sigv4_sha256_hex(body->data ? body->data : "", body->len, hash);
		r = decide(st, st->rq, NULL, hash, v);
		if (r != FILTER_CONTINUE || !st->chunked)
			return r;
	}
	st->chunked = false;
	s = sigv4_resign_chunks(&st->rs, body->data ? body->data : "", body->len);
	if (s != SIGV4_OK)
		return refuse(st, v, sigv4_status_to_string(s), sigv4_status_reason(s));
	st->chunks = st->rs.chunks;
	st->resigned = true;
	return FILTER_CONTINUE;
}

static void af_request_sent(void *vst)
{
	struct af_state *st = vst;
	char rule[VERDICT_RULE_MAX];
	json_t *sj;

	if (!st->resigned || !st->f->record)
		return;
	sj = subject(st);
	json_object_set_new(sj, "resigned", json_true());
	if (st->chunks)
		json_object_set_new(sj, "chunks", json_integer((json_int_t)st->chunks));
	snprintf(rule, sizeof(rule), "secrets.%s", st->s->def->name);
	st->f->record(st->f->record_arg, "secret.inject", RECEIPT_ALLOW, RECEIPT_POINT_BROKER,
		      rule, sj, "the request signed with the placeholder credentials was "
				"verified and re-signed with the real ones");
	json_decref(sj);
	st->resigned = false;
}

static void af_done(void *vst, enum filter_outcome outcome, const struct filter_stats *stats)
{
	struct af_state *st = vst;

	(void)outcome;
	(void)stats;
	sigv4_resign_free(&st->rs);
	free(st->held[0]);
	if (st->held[1])
		explicit_bzero(st->held[1], strlen(st->held[1]));
	free(st->held[1]);
	free(st->path);
	free(st);
}

/* The hosts of the secrets of kind aws: their requests are verified and
 * re-signed, so they are read in clear. */
static bool af_needs_cleartext(const struct policy *p, const struct host_target *t,
			       uint16_t port, bool any_port)
{
	size_t i;

	for (i = 0; i < p->nsecrets; i++)
		if (p->secrets[i].aws != POLICY_AWS_NONE &&
		    filter_host_ruled(p->secrets[i].hosts, p->secrets[i].nhosts, p, t, port,
				      any_port))
			return true;
	return false;
}

const struct filter_ops awsfilter_ops = {
	.name = "aws",
	.attach = af_attach,
	.request_head = af_request_head,
	.request_body = af_request_body,
	.response_head = NULL,
	.response_body = NULL,
	.request_sent = af_request_sent,
	.response_interim = NULL,
	.upgraded = NULL,
	.done = af_done,
	.needs_cleartext = af_needs_cleartext,
};

/* --- the registration ------------------------------------------------------- */

static bool is_aws(const struct policy_secret *def)
{
	return def->aws != POLICY_AWS_NONE;
}

/* The block: the brokered secrets of kind aws (broker_put()). */
static int af_config_put(const struct filter_source *src, struct msg *blk, int *fd, char *err,
			 size_t errlen)
{
	static const struct broker none = { 0 };

	(void)fd;
	(void)err;
	(void)errlen;
	broker_put(src->broker ? src->broker : &none, src->policy, is_aws, blk);
	return 0;
}

static void *af_make(struct filter_env *env, struct msg_reader *blk, int fd, char *err,
		     size_t errlen)
{
	struct broker *own = broker_get(env->policy, blk, fd, err, errlen);
	struct awsfilter *f = NULL;
	size_t i;

	if (!own)
		return NULL;
	for (i = 0; i < own->count && is_aws(own->secrets[i].def); i++)
		;
	if (i < own->count)
		snprintf(err, errlen, "the aws secrets' configuration holds another kind");
	else
		f = awsfilter_new(own, env->policy, env->record, env->arg);
	if (!f) {
		/* none of kind aws (err empty): nothing to do here */
		broker_drop(own);
		return NULL;
	}
	f->own = own;
	return f;
}

const struct filter_def awsfilter_def = {
	.name = "aws",
	.ops = &awsfilter_ops,
	.config_put = af_config_put,
	.make = af_make,
	.configure = NULL,
	.start = NULL,
};
