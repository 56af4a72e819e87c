/* SPDX-License-Identifier: Apache-2.0
 * spendfilter.c - the spend filter (see spendfilter.h).
 *
 * DOC: Theory of Operation
 *
 * A request to a host of spend.providers is classified by its method and
 * path (meter.c): reads (GET, HEAD) pass; anything else the meter cannot
 * price, any request asking to Upgrade, and the Realtime WebSocket's path
 * whatever the method (meter.c: told by its path, since h2 drops Upgrade), is
 * refused while a cap can be in force (403, spend.unmetered) unless
 * spend.pass lists its path; a disguised spelling of a metered endpoint
 * is refused (400, spend.path); a metered one is held:
 *
 *   request_head  asks the exchange for the whole body (at most
 *                 spend.max_body_bytes, else 413) and for an uncompressed
 *                 answer (Accept-Encoding: identity). A metered request
 *                 without a body is refused: there is nothing to price.
 *   request_body  parses the whole body (model, output bound; an unpriced
 *                 model, a malformed body or input from stored state is
 *                 refused), rewrites it to carry the bound reserved when
 *                 it has none and when an openai stream must report
 *                 usage, and sends RESERVE to the ledger process; the
 *                 exchange pends, at most spend.ledger_timeout_ms (the
 *                 proxy's tick fails it then: 502, spend.ledger, and a
 *                 reservation made for it later is released). Nothing of
 *                 the request has been forwarded.
 *   (answer)      the ledger's RESERVED resumes the exchange: forwarded
 *                 with the reservation id, or refused with 429 and a
 *                 budget.block receipt naming the cap (in shadow mode the
 *                 ledger reserved anyway: would_block, forwarded, and
 *                 settled like any other call). A failed ledger call is
 *                 a 502 (spend.ledger): what cannot be reserved is not
 *                 forwarded.
 *   response_*    the answer's head and every decoded slice feed the
 *                 meter's response parser.
 *   done          the outcome gives the charge (meter_response_finish,
 *                 or the whole reservation for a call forwarded and never
 *                 answered); SETTLE goes to the ledger process, which
 *                 settles and records budget.charge. A reservation whose
 *                 call was never forwarded (the upstream could not be
 *                 reached, a later filter refused it, the client left) is
 *                 released.
 *
 * An exchange whose client leaves while it waits for the ledger is freed
 * by the exchange at once; its state stays in the pending list, marked
 * gone, until the answer comes, and a reservation made for it is then
 * released. The channel closing (the ledger process is gone) fails every
 * pending and later metered request with 502: the session is ending.
 */
#include "spendfilter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ledger.h"
#include "meter.h"
#include "msg.h"
#include "spendd.h"
#include "util.h"
#include "verdict.h"

struct spend_state;

struct spendfilter {
	const struct policy *policy;
	struct meter_config mc;
	int fd;
	bool broken;                 /* the ledger channel failed */
	bool stopping;               /* a call was refused for the cap under
					on_exhausted "stop": the session is
					ending, no metered call goes on */
	bool capped;                 /* a cap may be in force: unmetered
					requests are refused */
	uint64_t timeout_ms;         /* spend.ledger_timeout_ms */
	struct filter_loop loop;     /* the proxy's (spendfilter_start); ctx
					NULL before */
	uint32_t next_tag;
	struct spend_state *pending; /* waiting for RESERVED */
	uint32_t *late;              /* tags given up on (timed out): a
					reservation made for one is released */
	size_t nlate;
	void (*exhausted)(void *arg, const char *reason);
	void *exhausted_arg;
	uint8_t *in;
	struct msg out;
};

struct spend_state {
	struct spendfilter *sf;
	struct spend_state *next;    /* in sf->pending */
	enum meter_api api;
	enum meter_endpoint ep;
	char host[HOSTNAME_MAX + 1];
	bool pending;                /* in sf->pending */
	bool gone;                   /* done() ran while pending */
	uint32_t tag;
	uint64_t deadline;           /* ms: 502 if RESERVED has not come */
	struct filter_ref ref;
	int64_t rid;                 /* -1: no reservation */
	struct meter_request req;
	struct meter_response *resp; /* once the answer's head came */
	char *unbounded;             /* shadow: the spend.unbounded reason of
					a request metered anyway */
};

struct spendfilter *spendfilter_new(const struct spendfilter_config *cfg, char *err,
				    size_t errlen)
{
	struct spendfilter *sf = util_xcalloc(1, sizeof(*sf));

	if (!meter_config_from_policy(&sf->mc, cfg->policy)) {
		snprintf(err, errlen, "spend.prices: a price is out of the meter's range");
		free(sf);
		return NULL;
	}
	sf->policy = cfg->policy;
	/* A cap can be in force for this session unless it has none, no
	 * parent, and a ledger no one else can give it one in. */
	sf->capped = cfg->policy->spend_has_cap || cfg->policy->spend_parent ||
		     cfg->policy->spend_ledger_kind != POLICY_LEDGER_MEMORY;
	sf->timeout_ms = cfg->policy->spend_ledger_timeout_ms;
	sf->fd = cfg->ledger_fd;
	sf->exhausted = cfg->exhausted;
	sf->exhausted_arg = cfg->exhausted_arg;
	sf->in = util_xmalloc(MSG_MAX);
	return sf;
}

static void state_free(struct spend_state *st)
{
	free(st->unbounded);
	free(st);
}

void spendfilter_free(struct spendfilter *sf)
{
	struct spend_state *st, *next;

	if (!sf)
		return;
	for (st = sf->pending; st; st = next) {
		next = st->next;
		if (st->gone)
			state_free(st);
	}
	if (sf->loop.ctx && sf->fd >= 0)
		sf->loop.unwatch(sf->loop.ctx, sf->fd);
	if (sf->fd >= 0)
		close(sf->fd);
	meter_config_free(&sf->mc);
	free(sf->late);
	msg_free(&sf->out);
	free(sf->in);
	free(sf);
}

/* --- money as text ---------------------------------------------------------- */

static json_t *usd_json(int64_t nano)
{
	return json_real((double)nano / (double)METER_NANO_PER_USD);
}

/* --- talking to the ledger process ------------------------------------------- */

static void unlink_pending(struct spendfilter *sf, struct spend_state *st)
{
	struct spend_state **pp;

	for (pp = &sf->pending; *pp; pp = &(*pp)->next)
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	st->next = NULL;
	st->pending = false;
}

/* Sends SETTLE for @rid: @outcome METER_OUTCOME_COUNT releases it (never
 * forwarded). A channel that fails leaves the reservation to the
 * session's close, which charges it in full. */
static void send_settle(struct spendfilter *sf, const struct spend_state *st,
			int64_t cost, enum meter_outcome outcome,
			const struct meter_charge *ch)
{
	static const struct meter_usage none;
	const struct meter_usage *u = ch && ch->have_usage ? &ch->usage : &none;

	if (sf->broken || st->rid < 0)
		return;
	msg_start(&sf->out, MSG_SPEND_SETTLE);
	msg_put_u64(&sf->out, (uint64_t)st->rid);
	msg_put_u64(&sf->out, (uint64_t)cost);
	msg_put_u32(&sf->out, (uint32_t)outcome);
	msg_put_u32(&sf->out, ch && ch->have_usage ? 1 : 0);
	msg_put_u64(&sf->out, u->input);
	msg_put_u64(&sf->out, u->output);
	msg_put_u64(&sf->out, u->cache_write);
	msg_put_u64(&sf->out, u->cache_read);
	msg_put_cstr(&sf->out, st->req.model);
	msg_put_cstr(&sf->out, st->host);
	msg_put_cstr(&sf->out, meter_endpoint_to_string(st->ep));
	msg_put_cstr(&sf->out, ch && ch->reason ? ch->reason : "released");
	/* what an auditor needs to recompute the cost */
	msg_put_u32(&sf->out, ch && ch->overrun ? 1 : 0);
	msg_put_u64(&sf->out, st->req.max_output);
	msg_put_cstr(&sf->out, st->req.price ? st->req.price->model : "");
	msg_put_u64(&sf->out, st->req.price ? (uint64_t)st->req.price->input : 0);
	msg_put_u64(&sf->out, st->req.price ? (uint64_t)st->req.price->output : 0);
	msg_put_u64(&sf->out, st->req.price ? (uint64_t)st->req.price->cache_write : 0);
	msg_put_u64(&sf->out, st->req.price ? (uint64_t)st->req.price->cache_read : 0);
	if (msg_send(sf->fd, &sf->out, -1, 0) < 0)
		sf->broken = true;
}

/* Releases reservation @rid of a request given up on. */
static void release_rid(struct spendfilter *sf, int64_t rid)
{
	struct spend_state *st = util_xcalloc(1, sizeof(*st));

	st->sf = sf;
	st->rid = rid;
	send_settle(sf, st, 0, METER_OUTCOME_COUNT, NULL);
	free(st);
}

/* Was @tag given up on? Forgets it. */
static bool late_take(struct spendfilter *sf, uint32_t tag)
{
	size_t i;

	for (i = 0; i < sf->nlate; i++)
		if (sf->late[i] == tag) {
			sf->late[i] = sf->late[--sf->nlate];
			return true;
		}
	return false;
}

/* Tags given up on that are remembered; beyond, the oldest is forgotten
 * and its reservation (if the ledger ever makes it) stays until the
 * session's close charges it: never less than was spent. */
#define SPEND_LATE_MAX 4096

static void late_add(struct spendfilter *sf, uint32_t tag)
{
	if (!sf->late)
		sf->late = util_xcalloc(SPEND_LATE_MAX, sizeof(*sf->late));
	if (sf->nlate == SPEND_LATE_MAX) {
		memmove(sf->late, sf->late + 1, (SPEND_LATE_MAX - 1) * sizeof(*sf->late));
		sf->nlate--;
	}
	sf->late[sf->nlate++] = tag;
}

/* The verdict of a RESERVED answer for @st. Returns the filter result. */
static enum filter_result reserved_verdict(struct spend_state *st, uint32_t status,
					   uint64_t rid, uint64_t cap, uint64_t spent,
					   uint64_t reserved, const char *who,
					   struct verdict *v, bool *exhausted)
{
	char a[METER_USD_LEN], c[METER_USD_LEN], s[METER_USD_LEN], r[METER_USD_LEN];

	*exhausted = false;
	st->rid = rid <= (uint64_t)INT64_MAX ? (int64_t)rid : -1;
	if (status == LEDGER_OK && st->rid >= 0)
		return FILTER_CONTINUE;
	if (status != LEDGER_REFUSED) {
		verdict_setf(v, VERDICT_FAIL, 502, "spend.ledger",
			     "the spend ledger could not reserve this call: %s", who);
		st->rid = -1;
		return FILTER_VERDICT;
	}
	meter_format_usd(st->req.reservation, a);
	meter_format_usd(cap <= (uint64_t)INT64_MAX ? (int64_t)cap : 0, c);
	meter_format_usd((int64_t)spent, s);
	meter_format_usd((int64_t)reserved, r);
	verdict_setf(v, VERDICT_DENY, 429, "spend.cap_usd",
		     "spend cap of session '%s' ($%s): spent $%s and reserved $%s, "
		     "so this call's reservation of $%s would pass it",
		     who, c, s, r, a);
	v->type = "budget.block";
	v->extra = json_pack("{s:s, s:s, s:o, s:I, s:s, s:o, s:o, s:o}", "model",
			     st->req.model, "endpoint", meter_endpoint_to_string(st->ep),
			     "reservation_usd", usd_json(st->req.reservation),
			     "reservation_nano", (json_int_t)st->req.reservation,
			     "cap_session", who, "cap_usd", usd_json((int64_t)cap),
			     "spent_usd", usd_json((int64_t)spent),
			     "reserved_usd", usd_json((int64_t)reserved));
	ASSERT(v->extra);
	/* shadow: reserved anyway (st->rid), the call goes on */
	*exhausted = st->rid < 0;
	return FILTER_VERDICT;
}

/* Resumes @st's exchange with the answer, or releases what it no longer
 * needs. */
static void on_reserved(struct spendfilter *sf, struct msg_reader *r)
{
	uint32_t tag, status;
	uint64_t rid, cap, spent, reserved;
	const char *who;
	struct spend_state *st;
	struct verdict v;
	enum filter_result fr;
	bool exhausted;

	msg_get_u32(r, &tag);
	msg_get_u32(r, &status);
	msg_get_u64(r, &rid);
	msg_get_u64(r, &cap);
	msg_get_u64(r, &spent);
	msg_get_u64(r, &reserved);
	msg_get_str(r, 512, &who, NULL);
	if (!msg_end(r) || spent > (uint64_t)METER_MONEY_MAX ||
	    reserved > (uint64_t)METER_MONEY_MAX * 64) {
		sf->broken = true;
		return;
	}
	for (st = sf->pending; st && st->tag != tag; st = st->next)
		;
	if (!st) {
		/* Given up on (502 already): release what was reserved.
		 * Otherwise not ours: a stale tag cannot resume anything. */
		if (late_take(sf, tag) && rid <= (uint64_t)INT64_MAX &&
		    (status == LEDGER_OK || status == LEDGER_REFUSED))
			release_rid(sf, (int64_t)rid);
		return;
	}
	unlink_pending(sf, st);
	verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
	fr = reserved_verdict(st, status, rid, cap, spent, reserved, who, &v, &exhausted);
	if (fr == FILTER_CONTINUE && st->unbounded) {
		/* shadow: what enforce would have refused, reserved and let go */
		verdict_set(&v, VERDICT_DENY, 403, "spend.unbounded", st->unbounded);
		v.type = "budget.block";
		fr = FILTER_VERDICT;
	}
	if (st->gone) {
		verdict_clear(&v);
		send_settle(sf, st, 0, METER_OUTCOME_COUNT, NULL);
		state_free(st);
		return;
	}
	if (sf->loop.resume(sf->loop.ctx, &st->ref, (int)fr, &v) < 0) {
		/* the exchange is gone without done(): nothing was sent */
		verdict_clear(&v);
	}
	if (exhausted && sf->policy->spend_on_exhausted == POLICY_EXHAUSTED_STOP &&
	    sf->policy->mode == POLICY_MODE_ENFORCE && !sf->stopping) {
		sf->stopping = true;
		if (sf->exhausted)
			sf->exhausted(sf->exhausted_arg, "a metered call was refused for "
				      "the spend cap and spend.on_exhausted is stop");
	}
}

/* Fails every pending request: the ledger is gone. */
static void fail_pending(struct spendfilter *sf)
{
	while (sf->pending) {
		struct spend_state *st = sf->pending;
		struct verdict v;

		unlink_pending(sf, st);
		if (st->gone) {
			state_free(st);
			continue;
		}
		verdict_set(&v, VERDICT_FAIL, 502, "spend.ledger",
			    "the spend ledger is gone: the call cannot be reserved");
		if (sf->loop.resume(sf->loop.ctx, &st->ref, FILTER_VERDICT, &v) < 0)
			verdict_clear(&v);
	}
}

static void on_channel(void *arg, int fd, uint32_t events)
{
	struct spendfilter *sf = arg;

	(void)events;
	while (!sf->broken) {
		struct msg_reader r;
		int pfd = -1;
		ssize_t n = msg_recv(fd, sf->in, MSG_MAX, &pfd, MSG_DONTWAIT);

		if (pfd >= 0)
			close(pfd);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0 || !msg_reader_init(&r, MSG_CHAN_SPEND, sf->in, (size_t)n) ||
		    r.type != MSG_SPEND_RESERVED) {
			sf->broken = true;
			break;
		}
		on_reserved(sf, &r);
	}
	sf->loop.unwatch(sf->loop.ctx, fd);
	fail_pending(sf);
}

/* Fails the requests whose reservation is overdue (a slow or
 * unreachable ledger): 502, nothing forwarded; a reservation the ledger
 * makes for one later is released. Returns the ms until the next
 * deadline. */
static int on_tick(void *arg, uint64_t now)
{
	struct spendfilter *sf = arg;
	struct spend_state *st, *next;
	uint64_t first = UINT64_MAX;

	for (st = sf->pending; st; st = next) {
		struct verdict v;

		next = st->next;
		if (st->deadline > now) {
			if (st->deadline < first)
				first = st->deadline;
			continue;
		}
		unlink_pending(sf, st);
		late_add(sf, st->tag);
		if (st->gone) {
			state_free(st);
			continue;
		}
		st->ep = METER_ENDPOINT_NONE;
		verdict_setf(&v, VERDICT_FAIL, 502, "spend.ledger",
			     "the spend ledger did not answer within %llu ms "
			     "(spend.ledger_timeout_ms): the call cannot be reserved",
			     (unsigned long long)sf->timeout_ms);
		if (sf->loop.resume(sf->loop.ctx, &st->ref, FILTER_VERDICT, &v) < 0)
			verdict_clear(&v);
	}
	if (first == UINT64_MAX)
		return -1;
	return first - now > 1000 ? 1000 : (int)(first - now);
}

int spendfilter_start(struct spendfilter *sf, const struct filter_loop *loop)
{
	sf->loop = *loop;
	sf->loop.set_tick(sf->loop.ctx, on_tick, sf);
	return sf->loop.watch(sf->loop.ctx, sf->fd, EPOLLIN, on_channel, sf);
}

/* --- the hooks ----------------------------------------------------------------- */

static void *sf_attach(void *arg, const struct filter_request *rq)
{
	struct spendfilter *sf = arg;
	const struct policy_spend_provider *prov;
	struct spend_state *st;

	if (rq->host->is_addr)
		return NULL;
	prov = policy_spend_provider_for_host(sf->policy, rq->host->name);
	if (!prov)
		return NULL;
	st = util_xcalloc(1, sizeof(*st));
	st->sf = sf;
	st->api = meter_api_of_policy((int)prov->api);
	st->rid = -1;
	(void)util_strlcpy(st->host, rq->host->name, sizeof(st->host));
	return st;
}

static enum filter_result sf_request_head(void *arg, struct filter_request *rq,
					  struct filter_asks *asks,
					  struct filter_ref ref, struct verdict *v)
{
	struct spend_state *st = arg;
	enum meter_route route;

	(void)ref;
	route = meter_classify(st->api, rq->method, strlen(rq->method), rq->path,
			       strlen(rq->path), &st->ep);
	/* A GET that asks to become another protocol (the Realtime API's
	 * WebSocket) is no read. */
	if (route == METER_ROUTE_PASS && rq->upgrade)
		route = METER_ROUTE_UNMETERED;
	switch (route) {
	case METER_ROUTE_PASS:
		st->ep = METER_ENDPOINT_NONE;
		return FILTER_CONTINUE;
	case METER_ROUTE_UNMETERED:
		st->ep = METER_ENDPOINT_NONE;
		if (!st->sf->capped ||
		    meter_pass_match(st->sf->policy->spend_pass,
				     st->sf->policy->nspend_pass, rq->path,
				     strlen(rq->path)))
			return FILTER_CONTINUE;
		verdict_setf(v, VERDICT_DENY, 403, "spend.unmetered",
			     "%s %s on a spend provider's host is not metered and "
			     "may cost money: refused under the spend cap (spend.pass "
			     "lists what may pass)", rq->method, rq->path);
		v->type = "budget.block";
		return FILTER_VERDICT;
	case METER_ROUTE_REFUSE:
		st->ep = METER_ENDPOINT_NONE;
		verdict_setf(v, VERDICT_DENY, 400, "spend.path",
			     "%s %s is a disguised spelling of a metered endpoint",
			     rq->method, rq->path);
		v->type = "budget.block";
		return FILTER_VERDICT;
	case METER_ROUTE_METER:
		break;
	case METER_ROUTE_COUNT:
		ASSERT(!"meter_classify returned no route");
	}
	if (rq->body == HTTP_BODY_NONE || (rq->body == HTTP_BODY_LENGTH &&
					   rq->content_length == 0)) {
		st->ep = METER_ENDPOINT_NONE;
		verdict_setf(v, VERDICT_DENY, 400, "spend.body",
			     "a metered request without a body cannot be priced");
		v->type = "budget.block";
		return FILTER_VERDICT;
	}
	if (rq->body == HTTP_BODY_LENGTH &&
	    rq->content_length > st->sf->mc.max_body_bytes) {
		st->ep = METER_ENDPOINT_NONE;
		verdict_setf(v, VERDICT_DENY, 413, "spend.max_body_bytes",
			     "the request body (%llu bytes) is larger than "
			     "spend.max_body_bytes (%llu)",
			     (unsigned long long)rq->content_length,
			     (unsigned long long)st->sf->mc.max_body_bytes);
		v->type = "budget.block";
		return FILTER_VERDICT;
	}
	asks->whole_body = true;
	asks->max_body = st->sf->mc.max_body_bytes;
	/* The usage must be readable in the answer. */
	filter_headers_set(&rq->headers, "Accept-Encoding", "identity");
	return FILTER_CONTINUE;
}

/* Shadow mode records what enforce would refuse and lets it go, metered
 * like any other call so that the ledger holds what was spent: a request
 * refused for input from stored state can be priced all the same. Parses
 * it as with server_state "allow" (nothing more reserved) and keeps the
 * refusal's reason for the receipt made once it is reserved. */
static bool shadow_unbounded(struct spend_state *st, const struct buf *body,
			     const struct meter_refusal *why)
{
	struct meter_config mc = st->sf->mc;
	struct meter_refusal again;

	if (st->sf->policy->mode != POLICY_MODE_SHADOW ||
	    strcmp(why->rule, "spend.unbounded") != 0)
		return false;
	mc.server_state_allow = true;
	mc.server_state_reserve = 0;
	if (!meter_request_parse(&mc, st->ep, body->data ? body->data : "", body->len,
				 &st->req, &again))
		return false;
	st->unbounded = util_xstrdup(why->reason);
	return true;
}

static enum filter_result sf_request_body(void *arg, const char *data, size_t len,
					  bool last, struct buf *body,
					  struct filter_ref ref, struct verdict *v)
{
	struct spend_state *st = arg;
	struct spendfilter *sf = st->sf;
	struct meter_refusal why;
	char *nb;
	size_t nlen;

	(void)data;
	(void)len;
	if (st->ep == METER_ENDPOINT_NONE || !body || !last)
		return FILTER_CONTINUE;
	if (!meter_request_parse(&sf->mc, st->ep, body->data ? body->data : "",
				 body->len, &st->req, &why) &&
	    !shadow_unbounded(st, body, &why)) {
		st->ep = METER_ENDPOINT_NONE; /* shadow: goes on unmetered */
		verdict_set(v, VERDICT_DENY, why.status, why.rule, why.reason);
		v->type = "budget.block";
		return FILTER_VERDICT;
	}
	if (sf->broken) {
		st->ep = METER_ENDPOINT_NONE;
		verdict_set(v, VERDICT_FAIL, 502, "spend.ledger",
			    "the spend ledger is gone: the call cannot be reserved");
		return FILTER_VERDICT;
	}
	if (sf->stopping) {
		st->ep = METER_ENDPOINT_NONE;
		verdict_set(v, VERDICT_DENY, 429, "spend.on_exhausted",
			    "the spend cap is exhausted and the session is ending "
			    "(spend.on_exhausted is stop)");
		v->type = "budget.block";
		return FILTER_VERDICT;
	}
	nb = meter_request_rewrite(&st->req, body->data, body->len, &nlen);
	if (nb) {
		body->len = 0;
		buf_append(body, nb, nlen);
		free(nb);
	}
	st->tag = ++sf->next_tag;
	st->ref = ref;
	st->deadline = util_now_ms() + sf->timeout_ms;
	msg_start(&sf->out, MSG_SPEND_RESERVE);
	msg_put_u32(&sf->out, st->tag);
	msg_put_u64(&sf->out, (uint64_t)st->req.reservation);
	if (msg_send(sf->fd, &sf->out, -1, 0) < 0) {
		sf->broken = true;
		st->ep = METER_ENDPOINT_NONE;
		verdict_set(v, VERDICT_FAIL, 502, "spend.ledger",
			    "the spend ledger is gone: the call cannot be reserved");
		return FILTER_VERDICT;
	}
	st->pending = true;
	st->next = sf->pending;
	sf->pending = st;
	return FILTER_PENDING;
}

static enum filter_result sf_response_head(void *arg, struct filter_response *rs,
					   struct filter_transform *tf, struct verdict *v)
{
	struct spend_state *st = arg;
	const char *ct;

	(void)tf;
	(void)v;
	if (st->rid < 0 || st->resp || rs->status < 200)
		return FILTER_CONTINUE;
	ct = filter_headers_get(&rs->headers, "content-type");
	st->resp = meter_response_new(&st->sf->mc, &st->req, (int)rs->status, ct,
				      ct ? strlen(ct) : 0);
	return FILTER_CONTINUE;
}

static int sf_response_body(void *arg, const char *data, size_t len, bool last,
			    struct buf *out)
{
	struct spend_state *st = arg;

	(void)last;
	(void)out;
	if (st->resp && len)
		meter_response_feed(st->resp, data, len);
	return 0;
}

static void sf_done(void *arg, enum filter_outcome outcome,
		    const struct filter_stats *stats)
{
	struct spend_state *st = arg;
	struct meter_charge ch;

	if (st->pending) {
		/* The answer is still to come: on_reserved() frees it. */
		st->gone = true;
		return;
	}
	if (st->rid >= 0) {
		if (st->resp) {
			meter_response_finish(st->resp, outcome == FILTER_OUTCOME_COMPLETE,
					      &ch);
			send_settle(st->sf, st, ch.cost, ch.outcome, &ch);
		} else if (stats->bytes_up > 0) {
			/* Forwarded, never answered: the provider may bill it. */
			meter_charge_unanswered(&st->req, &ch);
			send_settle(st->sf, st, ch.cost, ch.outcome, &ch);
		} else {
			send_settle(st->sf, st, 0, METER_OUTCOME_COUNT, NULL);
		}
	}
	meter_response_free(st->resp);
	state_free(st);
}

/* The spend providers' hosts, on 443. */
static bool spend_needs_cleartext(const struct policy *p, const struct host_target *t,
				  uint16_t port, bool any_port)
{
	size_t i;

	if (!any_port && port != 443)
		return false;
	for (i = 0; i < p->nspend_providers; i++)
		if (filter_host_named(p->spend_providers[i].hosts,
				      p->spend_providers[i].nhosts, t))
			return true;
	return false;
}

const struct filter_ops spendfilter_ops = {
	.name = "spend",
	.attach = sf_attach,
	.request_head = sf_request_head,
	.request_body = sf_request_body,
	.response_head = sf_response_head,
	.response_body = sf_response_body,
	.done = sf_done,
	.needs_cleartext = spend_needs_cleartext,
};

/* --- the registration ------------------------------------------------------- */

/* The block: u32 metered; when 1, the worker's own channel to the ledger
 * process travels beside it. */
static int spend_config_put(const struct filter_source *src, struct msg *blk, int *fd,
			    char *err, size_t errlen)
{
	msg_put_u32(blk, src->spend != NULL);
	if (src->spend && spendd_new_channel(src->spend, fd) < 0) {
		snprintf(err, errlen, "no channel to the spend ledger");
		return -1;
	}
	return 0;
}

static void *spend_make(struct filter_env *env, struct msg_reader *blk, int fd, char *err,
			size_t errlen)
{
	uint32_t metered = 0;

	if (!msg_get_u32(blk, &metered) || !msg_end(blk) || metered > 1 ||
	    (metered == 1) != (fd >= 0)) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "the spend configuration is not valid");
		return NULL;
	}
	if (!metered)
		return NULL; /* nothing is metered */
	return spendfilter_new(&(struct spendfilter_config){ env->policy, fd, env->exhausted,
							     env->arg },
			       err, errlen);
}

static int spend_start(void *f, const struct filter_loop *loop)
{
	return spendfilter_start(f, loop);
}

const struct filter_def spendfilter_def = {
	.name = "spend",
	.ops = &spendfilter_ops,
	.config_put = spend_config_put,
	.make = spend_make,
	.configure = NULL,
	.start = spend_start,
};
