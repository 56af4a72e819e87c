/* SPDX-License-Identifier: Apache-2.0
 * h2.c - HTTP/2 inside an intercepted tunnel, stream to stream.
 *
 * DOC: Theory of Operation
 *
 * An intercepted connection speaks h2 to every client that offers it,
 * whatever the upstream chose (h2 or HTTP/1.1): intercept.c, tls.c. Any
 * other client is served HTTP/1.1 by exchange.c.
 *
 * Two nghttp2 sessions share the connection: a server session facing the
 * client and a client session facing an h2 upstream. With an HTTP/1.1
 * upstream (h1_*) the client session is unused: the streams that passed
 * the filters wait in order, and one at a time is written upstream as an
 * HTTP/1.1 request (Host from :authority; Content-Length, else chunked
 * with the request trailers), its answer parsed (http.c) into the same
 * response path as an h2 answer; an answer that ends the connection (by
 * close, malformed, or abandoned mid-way by a reset) fails the streams
 * still waiting (502) and the client gets GOAWAY. Each client stream is
 * one exchange, through the same filter table as an HTTP/1.1 request
 * (filter.h), in the same order: the request head (HPACK-decoded, copied
 * into a struct filter_request; :authority must name the intercepted host
 * and port, else egress.host_mismatch), the body (streamed slices, or the
 * whole body once when a filter asks), request_sent as the stream is
 * opened upstream, the request trailers (request_trailers), interim
 * answers (response_interim: 103's fields scrubbed), the response head,
 * each DATA slice (decoded first when the answer has a content coding:
 * decode.h, one decoder per stream, the head held until its first
 * decoded byte) through the filters' transform (the scrubber), the
 * trailers (response_trailers: gRPC's grpc-status and grpc-message
 * scrubbed as headers are), and done
 * with the stream's outcome. A filter may pend (a spend reservation): that
 * stream waits, the others go on. A refused stream gets its status and
 * the refusal text (or RST_STREAM once its answer has started), nothing
 * of it is sent upstream, and the connection goes on; the rest of its
 * body is drained (drain_bound). A filter may hold the answer's head
 * until its transform's first output (a 502 if it refuses first), or ask
 * for the request again (a 401 refreshed: resend). Each relayed stream
 * is recorded as http.request.
 *
 * Flow control never buffers a whole stream: neither session updates its
 * windows by itself; the bytes of a stream are acknowledged to the side
 * that sent them only once the other side's session has taken them
 * (request bytes) or the client's queue is below a low mark (response
 * bytes), so what waits here is bounded by H2_STREAM_WINDOW per stream and
 * H2_CONN_WINDOW per connection, each way. Output is produced only while
 * the socket's queue is below BUF_HIGH. No total time limit applies: the
 * connection is idle (and closed) only when no byte moves either way.
 *
 * A hostile peer is bounded by nghttp2's limits, set here: concurrent
 * streams (H2_MAX_STREAMS; more are refused), the rate of client resets
 * (rapid reset), CONTINUATION frames per header block, SETTINGS entries,
 * queued SETTINGS/PING acknowledgements (floods), and the decoded size of
 * a header block (H2_MAX_HEADER_LIST: an HPACK bomb resets its stream).
 * A connection-level violation is recorded as proxy.error and ends that
 * connection only; the per-client connection count bounds one address.
 * Extended CONNECT (RFC 8441) is not advertised: a client opens HTTP/1.1
 * for WebSocket (exchange.c's Upgrade path and its scrubber); a CONNECT
 * stream is refused (400 http.form). No decision rests on an Upgrade
 * header alone (h2 drops it): the spend meter tells the Realtime
 * WebSocket by its path.
 *
 * Should: run every stream through every filter, bound every buffer.
 * Mustn't: send a refused stream's bytes upstream, relay a response byte,
 * header or trailer that did not pass the filters.
 */
#include "answer.h"
#include "conn.h"
#include "h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include "decode.h"
#include "http.h"
#include "util.h"

#define BUF_HIGH ((size_t)64 * 1024)  /* stop producing output above this */
#define LOW_MARK ((size_t)16 * 1024)  /* acknowledge response bytes below */
#define READ_ROUNDS 32                /* reads of one side per event */

struct h2;

struct h2_stream {
	struct h2 *h;
	struct h2_stream *next, *prev;
	int32_t cid;                 /* the client's stream id */
	int32_t uid;                 /* the upstream's, 0 until opened */
	uint32_t seq;                /* its filter_ref */
	/* the request as the client sent it */
	char *method, *path, *query, *authority, *host_header;
	uint64_t cl;
	size_t head_bytes;
	struct filter_request rq;
	struct host_target conn_host, named;
	/* filters */
	struct filter_chain ch;
	void (*on_resume)(struct h2_stream *s, enum filter_result r,
			  struct verdict *v);
	uint64_t whole_max;
	struct buf whole;
	struct buf up;               /* request bytes for the upstream */
	uint64_t up_owed;            /* of them, not yet acknowledged */
	/* the response */
	unsigned int status_in;
	struct filter_response rs;
	uint64_t rcl;
	struct filter_headers trailers;
	struct filter_headers rq_trailers; /* the client's, once filtered */
	size_t resp_head_bytes;
	struct buf gin;              /* the gRPC message coming in */
	struct buf down;             /* response bytes for the client */
	uint64_t down_owed;          /* upstream bytes not yet acknowledged */
	uint64_t bytes_up, bytes_down;
	enum filter_outcome outcome;
	/* flags */
	bool has_cl;
	bool head_bad;               /* the head broke a limit: reset */
	bool req_end;                /* the client ended its side */
	bool active;                 /* filters attached */
	bool collecting;
	bool sent;                   /* opened upstream */
	bool slice_end;              /* the filters saw the body's end */
	bool final_seen;             /* the final head came */
	bool has_rcl;
	bool transform;
	bool grpc;                   /* gRPC messages through the transform:
					each re-framed (h2_grpc_*) */
	bool keeps;                  /* the transforms keep the length */
	bool head_held;              /* a decoded answer's head waits for its
					first byte (a failure is still a 502) */
	bool hold;                   /* ... or a filter's transform asked it
					to wait for its first output
					(filter_transform.hold_head) */
	const char *hold_rule, *hold_reason; /* the 502 if it fails first */
	bool coded_end;              /* all of the coded body is in @coded */
	struct decode *dec;          /* the answer's content coding undone */
	struct decode_codings codings;
	struct buf coded;            /* coded bytes not yet in @dec */
	bool resp_started;           /* its head went to the client */
	bool resp_end;               /* all of it is in @down */
	bool resp_done;              /* all of it is sent */
	bool answered;               /* our own answer (a refusal) */
	bool answer_out;             /* ... all of it sent */
	bool drain_reset;            /* ... and the rest of the request reset */
	uint64_t drained;            /* request bytes discarded after it */
	bool up_closed;              /* the upstream stream is closed */
	bool up_ended;               /* ... with END_STREAM */
	bool outcome_set;
	/* a filter asked for the request again (filter_transform.retry) */
	bool discard;                /* the answer is read and dropped */
	bool retried;                /* it went again once */
	bool kept_body;              /* @replay holds the whole body */
	struct buf replay;           /* a body read whole, to send again */
	/* an HTTP/1.1 upstream (h1_*) */
	struct h2_stream *qnext;     /* waiting for the upstream connection */
	bool queued;
	bool h1_chunked;             /* its request body goes up chunked */
	bool h1_req_done;            /* all of its request is in c->uout */
};

struct h2 {
	struct conn *c;
	nghttp2_session *cs;         /* facing the client (server) */
	nghttp2_session *us;         /* facing the upstream (client) */
	struct h2_stream *streams;
	uint32_t seq;
	const struct h2_stream *cur; /* the stream a receipt is about */
	bool up_gone;                /* no more streams can go upstream */
	bool goaway_sent;            /* ... and the client was told */
	bool error_recorded;         /* the connection's proxy.error */
	/* An HTTP/1.1 upstream: one exchange at a time on it, the streams
	 * that passed the filters wait in order (h1_*); us is unused. */
	bool up_h1;
	bool h1_close;               /* the exchange on it was abandoned */
	struct h2_stream *h1cur;     /* the exchange on the upstream */
	struct h2_stream *qhead, *qtail;
	bool h1_head_done;           /* h1cur's final head was read */
	enum http_body h1_body;
	uint64_t h1_left;
	struct http_chunked h1_ch;
	bool h1_keep;
};

static void set_outcome(struct h2_stream *s, enum filter_outcome o)
{
	if (!s->outcome_set) {
		s->outcome = o;
		s->outcome_set = true;
	}
}

/* --- receipts ------------------------------------------------------------- */

const char *h2_request(const struct conn *c, const char **path)
{
	const struct h2_stream *s = c->h2 ? c->h2->cur : NULL;

	*path = NULL;
	if (!s || !s->method)
		return NULL;
	*path = s->path;
	return s->method;
}

/* The connection broke HTTP/2 (either side): one proxy.error. */
static void record_error(struct h2 *h, bool upstream, const char *why)
{
	struct verdict v;
	int64_t seq;

	if (h->error_recorded)
		return;
	h->error_recorded = true;
	h->cur = NULL;
	verdict_setf(&v, VERDICT_FAIL, 0, upstream ? "upstream.h2" : "h2.client", "%s%s",
		     upstream ? "the upstream broke HTTP/2: " : "the client broke HTTP/2: ",
		     why);
	v.always = true;
	v.extra = json_pack("{s:s}", "protocol", "h2");
	(void)answer_record(h->c, &v, &seq);
}

static void record_request(struct h2_stream *s)
{
	struct conn *c = s->h->c;
	json_t *j;

	s->h->cur = s;
	j = conn_subject(c);
	s->h->cur = NULL;
	json_object_set_new(j, "status", json_integer(s->rs.status));
	json_object_set_new(j, "bytes_up", json_integer((json_int_t)s->bytes_up));
	json_object_set_new(j, "bytes_down", json_integer((json_int_t)s->bytes_down));
	json_object_set_new(j, "protocol", json_string("h2"));
	conn_record(c, "http.request", RECEIPT_ALLOW, c->rule_id, j, "relayed");
}

/* --- streams ------------------------------------------------------------- */

static struct h2_stream *stream_new(struct h2 *h, int32_t cid)
{
	struct h2_stream *s = util_xcalloc(1, sizeof(*s));

	s->h = h;
	s->cid = cid;
	s->seq = ++h->seq;
	s->next = h->streams;
	if (h->streams)
		h->streams->prev = s;
	h->streams = s;
	return s;
}

static void h1_unqueue(struct h2_stream *s);

/* The upstream stream no longer reaches @s. */
static void detach_upstream(struct h2_stream *s, uint32_t code)
{
	struct h2 *h = s->h;

	if (h->up_h1) {
		h1_unqueue(s);
		if (h->h1cur == s) {
			/* an HTTP/1.1 exchange cannot be cancelled: its
			 * connection goes (h2_step) */
			h->h1cur = NULL;
			h->h1_close = true;
		}
		s->up_closed = true;
		return;
	}
	if (s->uid > 0 && !s->up_closed) {
		(void)nghttp2_session_set_stream_user_data(h->us, s->uid, NULL);
		(void)nghttp2_submit_rst_stream(h->us, NGHTTP2_FLAG_NONE, s->uid, code);
		if (s->down_owed)
			(void)nghttp2_session_consume_connection(h->us, s->down_owed);
		s->down_owed = 0;
		s->up_closed = true;
	}
}

/* The client stream is closed: the filters hear the outcome, the
 * stream is recorded (when an upstream answer was relayed) and freed. */
static void stream_free(struct h2_stream *s, enum filter_outcome outcome)
{
	struct h2 *h = s->h;
	struct filter_stats st;
	size_t i;

	detach_upstream(s, NGHTTP2_CANCEL);
	set_outcome(s, outcome);
	if (s->final_seen && !s->answered)
		record_request(s);
	st.status = s->rs.status;
	st.bytes_up = s->bytes_up;
	st.bytes_down = s->bytes_down;
	for (i = 0; i < s->ch.n; i++)
		if (s->ch.f[i].ops->done)
			s->ch.f[i].ops->done(s->ch.f[i].st, s->outcome, &st);
	if (s->prev)
		s->prev->next = s->next;
	else
		h->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	if (h->cur == s)
		h->cur = NULL;
	free(s->method);
	free(s->path);
	free(s->query);
	free(s->authority);
	free(s->host_header);
	free(s->rq.target);
	free(s->rs.reason);
	filter_headers_free(&s->rq.headers);
	filter_headers_free(&s->rs.headers);
	filter_headers_free(&s->trailers);
	filter_headers_free(&s->rq_trailers);
	buf_free(&s->whole);
	buf_free(&s->up);
	buf_free(&s->down);
	buf_free(&s->gin);
	buf_free(&s->coded);
	buf_free(&s->replay);
	if (s->dec)
		decode_free(s->dec);
	free(s);
}

static struct h2_stream *client_stream(struct h2 *h, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h->cs, id);
}

static struct h2_stream *upstream_stream(struct h2 *h, int32_t id)
{
	return nghttp2_session_get_stream_user_data(h->us, id);
}

/* Acknowledges request bytes taken from @s->up (the client may send as
 * many more). */
static void credit_client(struct h2_stream *s, size_t n)
{
	if (n > s->up_owed)
		n = (size_t)s->up_owed;
	if (!n)
		return;
	s->up_owed -= n;
	(void)nghttp2_session_consume(s->h->cs, s->cid, n);
}

/* Acknowledges the upstream's response bytes once the client's queue of
 * this stream is low. */
static void credit_upstream(struct h2_stream *s)
{
	if (!s->down_owed || s->down.len >= LOW_MARK || s->coded.len)
		return;
	if (s->uid > 0 && !s->up_closed)
		(void)nghttp2_session_consume(s->h->us, s->uid, s->down_owed);
	else
		(void)nghttp2_session_consume_connection(s->h->us, s->down_owed);
	s->down_owed = 0;
}

/* --- answering the client ------------------------------------------------------ */

static ssize_t down_read(nghttp2_session *session, int32_t id, uint8_t *out, size_t len,
			 uint32_t *flags, nghttp2_data_source *src, void *user);

static void add_nv(nghttp2_nv *nv, size_t *n, const char *name, const char *value)
{
	nv[*n].name = (uint8_t *)(uintptr_t)name;
	nv[*n].namelen = strlen(name);
	nv[*n].value = (uint8_t *)(uintptr_t)value;
	nv[*n].valuelen = strlen(value);
	nv[*n].flags = NGHTTP2_NV_FLAG_NONE;
	(*n)++;
}

/* Header fields an h2 message never carries (RFC 9113 8.2.2). */
static bool connection_specific(const char *name)
{
	static const char *const names[] = { "connection",    "keep-alive",
					     "proxy-connection", "transfer-encoding",
					     "upgrade",       "content-length",
					     "host" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (strcasecmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Lowercase copies of @hs's names (h2 has no uppercase), as nghttp2_nv
 * after @nv[*n]; the copies go to @names (freed by the caller). */
static void add_headers(nghttp2_nv *nv, size_t *n, const struct filter_headers *hs,
			char **names, size_t *nnames, bool keep_te)
{
	size_t i, j;

	for (i = 0; i < hs->count; i++) {
		char *lc;

		if (connection_specific(hs->h[i].name) || hs->h[i].name[0] == ':')
			continue;
		if (strcasecmp(hs->h[i].name, "te") == 0 &&
		    (!keep_te || strcasecmp(hs->h[i].value, "trailers") != 0))
			continue;
		lc = util_xstrdup(hs->h[i].name);
		for (j = 0; lc[j]; j++)
			if (lc[j] >= 'A' && lc[j] <= 'Z')
				lc[j] = (char)(lc[j] - 'A' + 'a');
		names[(*nnames)++] = lc;
		add_nv(nv, n, lc, hs->h[i].value);
	}
}

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void reset_client(struct h2_stream *s, uint32_t code)
{
	(void)nghttp2_submit_rst_stream(s->h->cs, NGHTTP2_FLAG_NONE, s->cid, code);
}

/* Our own answer on @s: @status with the refusal's text. */
static void answer(struct h2_stream *s, const struct verdict *v, int64_t seq)
{
	struct h2 *h = s->h;
	nghttp2_nv nv[5];
	nghttp2_data_provider prd;
	char status[8], receipt[24], length[24];
	size_t n = 0;

	detach_upstream(s, NGHTTP2_CANCEL);
	buf_free(&s->down);
	h->cur = s;
	answer_text(h->c, v, seq, &s->down);
	h->cur = NULL;
	snprintf(status, sizeof(status), "%d", v->status);
	if (seq >= 0)
		snprintf(receipt, sizeof(receipt), "%lld", (long long)seq);
	else
		snprintf(receipt, sizeof(receipt), "none");
	snprintf(length, sizeof(length), "%zu", s->down.len);
	add_nv(nv, &n, ":status", status);
	add_nv(nv, &n, "x-airlock-rule", v->rule);
	add_nv(nv, &n, "x-airlock-receipt", receipt);
	add_nv(nv, &n, "content-type", "text/plain; charset=utf-8");
	add_nv(nv, &n, "content-length", length);
	s->answered = true;
	s->resp_end = true;
	s->resp_started = true;
	s->rs.status = (unsigned int)v->status;
	prd.source.ptr = NULL;
	prd.read_callback = down_read;
	if (nghttp2_submit_response(h->cs, s->cid, nv, n, &prd) != 0)
		reset_client(s, NGHTTP2_INTERNAL_ERROR);
}

/* A verdict on @s: recorded; true when the stream goes on (shadow
 * mode), else it is answered (or reset) and false. */
static bool refuse(struct h2_stream *s, struct verdict *v)
{
	struct h2 *h = s->h;
	int64_t seq;
	bool on;

	set_outcome(s, FILTER_OUTCOME_REFUSED);
	h->cur = s;
	on = answer_record(h->c, v, &seq);
	h->cur = NULL;
	if (on) {
		s->outcome_set = false;
		return true;
	}
	if (v->status && !s->resp_started)
		answer(s, v, seq);
	else {
		detach_upstream(s, NGHTTP2_CANCEL);
		reset_client(s, NGHTTP2_INTERNAL_ERROR);
	}
	return false;
}

static bool fail(struct h2_stream *s, int status, const char *rule, const char *why)
{
	struct verdict v;

	verdict_set(&v, VERDICT_FAIL, status, rule, why);
	v.extra = json_pack("{s:s}", "protocol", "h2");
	return refuse(s, &v);
}

/* --- the request ---------------------------------------------------------- */

static struct filter_ref ref_of(const struct h2_stream *s)
{
	struct filter_ref r = { s->h->c->index, s->h->c->gen, s->seq };

	return r;
}

static void proceed(struct h2_stream *s);
static void run_whole(struct h2_stream *s);

/* A streamed request body slice (read-only for the filters). */
static bool request_slice(struct h2_stream *s, const char *d, size_t n, bool last)
{
	struct verdict v;
	enum filter_result r;
	size_t i = 0;

	if (last) {
		if (s->slice_end)
			return true;
		s->slice_end = true;
	}
	while ((r = filter_chain_slice(&s->ch, &i, d, n, last, ref_of(s), &v)) !=
	       FILTER_CONTINUE) {
		if (r == FILTER_PENDING)
			return fail(s, 502, "proxy.filter",
				    "a filter cannot wait in the middle of a body");
		if (!refuse(s, &v))
			return false;
		verdict_clear(&v);
		i++;
	}
	return true;
}

static void run_filters(struct h2_stream *s);

static void resume_head(struct h2_stream *s, enum filter_result r, struct verdict *v)
{
	if (r == FILTER_VERDICT && v->action != VERDICT_ALLOW && !refuse(s, v))
		return;
	verdict_clear(v);
	s->ch.next++;
	run_filters(s);
}

/* The whole body is collected: it replaces what is queued. */
static void collect(struct h2_stream *s, const char *d, size_t n)
{
	if (n > s->whole_max - s->whole.len) {
		(void)fail(s, 413, "http.body-too-large",
			   "the request body is larger than a filter reads");
		return;
	}
	buf_append(&s->whole, d, n);
	/* held here, bounded by whole_max: the client may send the rest */
	(void)nghttp2_session_consume(s->h->cs, s->cid, n);
}

/* What the filters asked of the request (filter_chain_request). */
static void take_asks(struct h2_stream *s, const struct filter_asks *a)
{
	if (!a->whole_body || s->rq.body == HTTP_BODY_NONE)
		return;
	s->collecting = true;
	if (!s->whole_max || a->max_body < s->whole_max)
		s->whole_max = a->max_body;
}

static void run_filters(struct h2_stream *s)
{
	struct conn *c = s->h->c;
	struct proxy *p = c->p;
	struct filter_asks asks = { false, 0 };
	struct verdict v;
	enum filter_result r;

	if (!s->active) {
		s->active = true;
		s->rq.policy = c->policy ? c->policy : p->policy;
		filter_chain_attach(&s->ch, p->filters, p->nfilters, &s->rq);
	}
	while ((r = filter_chain_request(&s->ch, &s->rq, NULL, ref_of(s), &asks, &v)) !=
	       FILTER_CONTINUE) {
		take_asks(s, &asks);
		if (r == FILTER_PENDING) {
			s->on_resume = resume_head;
			return;
		}
		if (!refuse(s, &v))
			return;
		verdict_clear(&v);
		s->ch.next++;
	}
	take_asks(s, &asks);
	if (s->collecting) {
		if (s->has_cl && s->cl > s->whole_max) {
			(void)fail(s, 413, "http.body-too-large",
				   "the request body is larger than a filter reads");
			return;
		}
		if (s->up.len) {
			struct buf held = s->up;

			memset(&s->up, 0, sizeof(s->up));
			s->up_owed = 0;
			collect(s, held.data, held.len);
			buf_free(&held);
			if (s->answered)
				return;
		}
		if (s->req_end)
			run_whole(s);
		return;
	}
	proceed(s);
}

static void resume_whole(struct h2_stream *s, enum filter_result r, struct verdict *v)
{
	if (r == FILTER_VERDICT && v->action != VERDICT_ALLOW && !refuse(s, v))
		return;
	verdict_clear(v);
	s->ch.next++;
	run_whole(s);
}

static void run_whole(struct h2_stream *s)
{
	struct verdict v;
	enum filter_result r;

	while ((r = filter_chain_request(&s->ch, &s->rq, &s->whole, ref_of(s), NULL, &v)) !=
	       FILTER_CONTINUE) {
		if (r == FILTER_PENDING) {
			s->on_resume = resume_whole;
			return;
		}
		if (!refuse(s, &v))
			return;
		verdict_clear(&v);
		s->ch.next++;
	}
	s->slice_end = true; /* the filters saw it whole */
	/* kept, should a filter ask for the request again */
	buf_free(&s->replay);
	buf_append(&s->replay, s->whole.data ? s->whole.data : "", s->whole.len);
	s->kept_body = true;
	/* the (possibly rewritten) body is what goes up; its bytes are
	 * acknowledged already */
	buf_free(&s->up);
	s->up = s->whole;
	memset(&s->whole, 0, sizeof(s->whole));
	s->has_cl = true;
	s->cl = s->up.len;
	proceed(s);
}

static ssize_t up_read(nghttp2_session *session, int32_t id, uint8_t *out, size_t len,
		       uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = upstream_stream(h, id);
	size_t n;

	(void)session;
	(void)src;
	if (!s)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	n = s->up.len < len ? s->up.len : len;
	if (n) {
		memcpy(out, s->up.data, n);
		buf_consume(&s->up, n);
	}
	s->bytes_up += n;
	credit_client(s, n);
	if (s->up.len == 0 && s->req_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (s->rq_trailers.count) {
			nghttp2_nv *nv = util_xcalloc(s->rq_trailers.count, sizeof(*nv));
			char **names = util_xcalloc(s->rq_trailers.count + 1, sizeof(*names));
			size_t k = 0, nn = 0;

			add_headers(nv, &k, &s->rq_trailers, names, &nn, false);
			if (k && nghttp2_submit_trailer(h->us, id, nv, k) == 0)
				*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			free(nv);
			free_names(names, nn);
		}
		return (ssize_t)n;
	}
	if (n == 0)
		return NGHTTP2_ERR_DEFERRED;
	return (ssize_t)n;
}

static void h1_enqueue(struct h2_stream *s);
static bool open_upstream(struct h2_stream *s);

/* Every filter let the request go: it is opened upstream. */
static void proceed(struct h2_stream *s)
{
	struct h2 *h = s->h;
	size_t i;

	if (h->up_gone) {
		(void)fail(s, 502, "upstream.closed",
			   "the upstream closed the intercepted connection");
		return;
	}
	for (i = 0; i < s->ch.n; i++)
		if (s->ch.f[i].ops->request_sent)
			s->ch.f[i].ops->request_sent(s->ch.f[i].st);
	if (!open_upstream(s))
		return;
	s->sent = true;
	/* what came while the filters decided */
	if (s->up.len && !s->slice_end && !request_slice(s, s->up.data, s->up.len, false))
		return;
	if (s->req_end && !request_slice(s, NULL, 0, true))
		return;
}

/* The request goes upstream: a new h2 stream, or in line for the
 * HTTP/1.1 upstream. False when the stream was refused. */
static bool open_upstream(struct h2_stream *s)
{
	struct h2 *h = s->h;
	nghttp2_nv *nv;
	nghttp2_data_provider prd;
	char **names;
	size_t n = 0, nnames = 0;
	/* cppcheck-suppress variableScope ; nv points into it until submitted */
	char *target, length[24];
	int32_t id;

	if (h->up_h1) {
		h1_enqueue(s);
		return true;
	}
	target = s->rq.target ? util_xstrdup(s->rq.target)
			      : util_xasprintf("%s%s%s", s->path, s->query ? "?" : "",
					       s->query ? s->query : "");
	nv = util_xcalloc(s->rq.headers.count + 6, sizeof(*nv));
	names = util_xcalloc(s->rq.headers.count + 1, sizeof(*names));
	add_nv(nv, &n, ":method", s->method);
	add_nv(nv, &n, ":scheme", "https");
	add_nv(nv, &n, ":authority", s->authority ? s->authority : s->host_header);
	add_nv(nv, &n, ":path", target);
	add_headers(nv, &n, &s->rq.headers, names, &nnames, true);
	if (s->has_cl) {
		snprintf(length, sizeof(length), "%llu", (unsigned long long)s->cl);
		add_nv(nv, &n, "content-length", length);
	}
	prd.source.ptr = NULL;
	prd.read_callback = up_read;
	id = nghttp2_submit_request(h->us, NULL, nv, n,
				    s->req_end && s->up.len == 0 ? NULL : &prd, s);
	free(nv);
	free_names(names, nnames);
	free(target);
	if (id < 0)
		return fail(s, 502, "upstream.h2", nghttp2_strerror(id));
	s->uid = id;
	return true;
}

/* Parses @s's :authority (or Host) and checks it names the tunnel's
 * host and port. Returns false when the stream was refused. */
static bool check_authority(struct h2_stream *s)
{
	struct conn *c = s->h->c;
	const char *a = s->authority ? s->authority : s->host_header;
	struct host_target t;
	uint16_t port = c->port;
	bool explicit_port = false;
	enum hostname_error e;
	const char *colon, *rb;

	if (!a || !*a)
		return fail(s, 400, "http.malformed", "the request names no :authority");
	colon = strrchr(a, ':');
	rb = strrchr(a, ']');
	if (colon && (!rb || colon > rb)) {
		e = hostname_parse_authority(a, strlen(a), &t, &port);
		explicit_port = true;
	} else {
		e = hostname_normalise(a, strlen(a), &t);
	}
	s->named = t;
	s->rq.named_host = &s->named;
	s->rq.named_port = port;
	if (e == HOSTNAME_OK && t.is_addr == c->target.is_addr &&
	    strcmp(t.name, c->target.name) == 0 && (!explicit_port || port == c->port))
		return true;
	{
		struct verdict v;

		verdict_set(&v, VERDICT_DENY, 403, "egress.host_mismatch",
			    "the request's :authority is not the tunnel's host");
		v.extra = json_pack("{s:s, s:s?, s:s}", "request_method", s->method,
				    "request_host", e == HOSTNAME_OK ? t.name : NULL,
				    "protocol", "h2");
		return refuse(s, &v);
	}
}

/* The request head is complete. */
static void request_head(struct h2_stream *s, bool end)
{
	struct h2 *h = s->h;
	struct conn *c = h->c;

	s->req_end = end;
	if (s->head_bad) {
		/* an HPACK bomb, or just too much: decoded up to the bound */
		s->head_bad = false;
		(void)fail(s, 431, "http.too-large", "request header list too large");
		s->head_bad = true;
		return;
	}
	if (!s->method || !s->path) {
		if (s->method && strcmp(s->method, "CONNECT") == 0)
			(void)fail(s, 400, "http.form",
				   "CONNECT inside a tunnel is not accepted");
		else
			(void)fail(s, 400, "http.malformed", "the request has no :method or :path");
		return;
	}
	c->requests++;
	s->conn_host = c->target;
	s->rq.method = s->method;
	s->rq.host = &s->conn_host;
	s->rq.port = c->port;
	s->rq.path = s->path;
	s->rq.query = s->query;
	s->rq.inner = true;
	s->rq.client_tls = true;
	s->rq.body = end ? HTTP_BODY_NONE : s->has_cl ? HTTP_BODY_LENGTH : HTTP_BODY_CHUNKED;
	s->rq.content_length = s->cl;
	/* an intercepted answer is read (scrubbed, metered): no content
	 * coding, no gRPC message compression */
	filter_headers_set(&s->rq.headers, "Accept-Encoding", "identity");
	(void)filter_headers_remove(&s->rq.headers, "grpc-accept-encoding");
	if (!check_authority(s))
		return;
	run_filters(s);
}

/* A refused stream whose answer is out: what the client still sends of
 * its body is read and dropped, so that a client still uploading ends
 * its request cleanly (curl 7.88 fails a stream reset under an upload
 * it has not finished, even with NO_ERROR), up to H2_DRAIN_MAX; past it
 * the stream is reset with NO_ERROR (RFC 9113 8.1: a complete answer,
 * the rest of the request not wanted). */
static void drain_bound(struct h2_stream *s)
{
	if (!s->answer_out || s->req_end || s->drain_reset || s->drained <= H2_DRAIN_MAX)
		return;
	s->drain_reset = true;
	(void)nghttp2_submit_rst_stream(s->h->cs, NGHTTP2_FLAG_NONE, s->cid, NGHTTP2_NO_ERROR);
}

/* A request DATA slice. */
static void request_data(struct h2_stream *s, const uint8_t *d, size_t n)
{
	if (s->answered || s->head_bad) {
		(void)nghttp2_session_consume(s->h->cs, s->cid, n);
		s->drained += n;
		drain_bound(s);
		return;
	}
	if (s->collecting && s->ch.next == 0 && !s->on_resume && !s->sent) {
		collect(s, (const char *)d, n);
		return;
	}
	if (s->sent && !request_slice(s, (const char *)d, n, false))
		return;
	buf_append(&s->up, d, n);
	s->up_owed += n;
	if (s->sent && !s->h->up_h1)
		(void)nghttp2_session_resume_data(s->h->us, s->uid);
}

/* The client's trailers through the filters. False when the stream was
 * refused (reset: its body has gone up already). */
static bool request_trailers(struct h2_stream *s)
{
	size_t i;

	for (i = 0; i < s->ch.n && s->rq_trailers.count; i++) {
		struct verdict v;
		enum filter_result r;

		if (!s->ch.f[i].ops->request_trailers)
			continue;
		verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
		r = s->ch.f[i].ops->request_trailers(s->ch.f[i].st, &s->rq, &s->rq_trailers, &v);
		if (r == FILTER_VERDICT && v.action != VERDICT_ALLOW && !refuse(s, &v))
			return false;
		verdict_clear(&v);
	}
	return true;
}

static void request_end(struct h2_stream *s)
{
	s->req_end = true;
	if (s->answered || s->head_bad)
		return;
	if (s->rq_trailers.count && !request_trailers(s))
		return;
	if (s->collecting && s->ch.next == 0 && !s->on_resume && !s->sent) {
		run_whole(s);
		return;
	}
	if (s->sent) {
		if (!request_slice(s, NULL, 0, true))
			return;
		if (!s->h->up_h1)
			(void)nghttp2_session_resume_data(s->h->us, s->uid);
	}
}

/* --- the response -------------------------------------------------------------- */

static ssize_t down_read(nghttp2_session *session, int32_t id, uint8_t *out, size_t len,
			 uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = client_stream(h, id);
	size_t n;

	(void)session;
	(void)src;
	if (!s)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	n = s->down.len < len ? s->down.len : len;
	if (n) {
		memcpy(out, s->down.data, n);
		buf_consume(&s->down, n);
	}
	s->bytes_down += n;
	credit_upstream(s);
	if (s->down.len == 0 && s->resp_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (s->trailers.count) {
			nghttp2_nv *nv = util_xcalloc(s->trailers.count, sizeof(*nv));
			char **names = util_xcalloc(s->trailers.count + 1, sizeof(*names));
			size_t k = 0, nn = 0;

			add_headers(nv, &k, &s->trailers, names, &nn, false);
			if (k && nghttp2_submit_trailer(h->cs, id, nv, k) == 0)
				*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			free(nv);
			free_names(names, nn);
		}
		s->resp_done = true;
		return (ssize_t)n;
	}
	if (n == 0)
		return NGHTTP2_ERR_DEFERRED;
	return (ssize_t)n;
}

static void send_head(struct h2_stream *s, bool end);

/* One response slice through the filters into @s->down; false when a
 * filter cut the stream. */
static bool response_slice(struct h2_stream *s, const char *d, size_t n, bool last)
{
	struct buf out = { 0 };
	size_t i;
	bool ok = true;

	for (i = 0; i < s->ch.n && ok; i++) {
		if (!s->ch.f[i].ops->response_body)
			continue;
		if (s->ch.f[i].ops->response_body(s->ch.f[i].st, d, n, last,
					       s->transform ? &out : NULL) < 0)
			ok = false;
	}
	if (ok && s->hold && s->head_held && (out.len || last))
		send_head(s, false);
	if (ok && !s->transform && n)
		buf_append(&s->down, d, n);
	else if (ok && out.len)
		buf_append(&s->down, out.data, out.len);
	buf_free(&out);
	if (!ok && s->hold && s->head_held) {
		/* refused while its head was held: 502 */
		set_outcome(s, FILTER_OUTCOME_UPSTREAM_ERROR);
		(void)fail(s, 502, s->hold_rule ? s->hold_rule : "proxy.filter",
			   s->hold_reason ? s->hold_reason : "a filter refused the answer");
		return false;
	}
	if (!ok) {
		set_outcome(s, FILTER_OUTCOME_CUT);
		detach_upstream(s, NGHTTP2_CANCEL);
		reset_client(s, NGHTTP2_INTERNAL_ERROR);
	}
	return ok;
}

/* gRPC: the messages complete in s->gin, each through the filters as a
 * whole (its end is a slice's end, so that a transform holds nothing
 * back past it) and re-framed with its new length. False when the
 * stream was cut (a compressed message cannot be scrubbed, one over the
 * bound is not held). */
enum h2_grpc h2_grpc_parse(const char *in, size_t len, const char **payload, uint32_t *plen,
			   size_t *used)
{
	const unsigned char *g = (const unsigned char *)in;
	uint32_t n;

	if (len < 5)
		return H2_GRPC_MORE;
	n = (uint32_t)g[1] << 24 | (uint32_t)g[2] << 16 | (uint32_t)g[3] << 8 | g[4];
	if (g[0] != 0)
		return H2_GRPC_COMPRESSED;
	if (n > H2_GRPC_MAX_MESSAGE)
		return H2_GRPC_TOO_LARGE;
	if (len - 5 < n)
		return H2_GRPC_MORE;
	*payload = in + 5;
	*plen = n;
	*used = 5 + (size_t)n;
	return H2_GRPC_MESSAGE;
}

void h2_grpc_frame(struct buf *out, const char *payload, size_t len)
{
	unsigned char head[5];

	ASSERT(len <= UINT32_MAX);
	head[0] = 0;
	head[1] = (unsigned char)(len >> 24);
	head[2] = (unsigned char)(len >> 16);
	head[3] = (unsigned char)(len >> 8);
	head[4] = (unsigned char)len;
	buf_append(out, head, 5);
	buf_append(out, payload, len);
}

static bool grpc_messages(struct h2_stream *s)
{
	for (;;) {
		const char *payload = NULL;
		uint32_t len = 0;
		size_t used = 0, i;
		struct buf out = { 0 };
		bool ok = true;
		enum h2_grpc r = h2_grpc_parse(s->gin.data, s->gin.len, &payload, &len, &used);

		if (r == H2_GRPC_MORE)
			return true;
		if (r != H2_GRPC_MESSAGE) {
			set_outcome(s, FILTER_OUTCOME_CUT);
			(void)fail(s, 0, "upstream.grpc",
				   r == H2_GRPC_COMPRESSED
					   ? "a compressed gRPC message cannot be scrubbed"
					   : "a gRPC message over the bound");
			return false;
		}
		for (i = 0; i < s->ch.n && ok; i++)
			if (s->ch.f[i].ops->response_body &&
			    s->ch.f[i].ops->response_body(s->ch.f[i].st, payload, len, true, &out) < 0)
				ok = false;
		if (!ok) {
			buf_free(&out);
			set_outcome(s, FILTER_OUTCOME_CUT);
			detach_upstream(s, NGHTTP2_CANCEL);
			reset_client(s, NGHTTP2_INTERNAL_ERROR);
			return false;
		}
		if (s->hold && s->head_held)
			send_head(s, false);
		h2_grpc_frame(&s->down, out.data ? out.data : "", out.len);
		buf_free(&out);
		buf_consume(&s->gin, used);
	}
}

/* --- coded answers ------------------------------------------------------------------ */

/* A coding the proxy cannot undo (502 while the head is held, else the
 * stream is cut), with its receipt. */
static void coding_fail(struct h2_stream *s, const char *coding, const char *codings,
			const char *why)
{
	struct verdict v;

	verdict_setf(&v, VERDICT_FAIL, s->resp_started ? 0 : 502, "upstream.coding",
		     "the answer's %s coding: %s", coding, why);
	v.extra = json_pack("{s:s, s:s, s:s, s:s, s:s}", "request_method", s->method,
			    "request_path", s->path, "coding", coding, "codings", codings,
			    "protocol", "h2");
	set_outcome(s, s->resp_started ? FILTER_OUTCOME_CUT : FILTER_OUTCOME_UPSTREAM_ERROR);
	(void)refuse(s, &v);
}

/* The content codings of the answer's head (the decoder exchange.c uses):
 * with one, the body is decoded before the filters see it and the head
 * says no coding. False when the stream was answered (a coding the proxy
 * cannot decode, or more than it undoes). */
static bool decode_setup(struct h2_stream *s)
{
	struct decode_codings cs = { .n = 0 };
	enum decode_codings_result r;
	char bad[64], listed[256];
	size_t content;

	r = decode_codings_head(&s->rs.headers, true, NULL, &cs, &content, bad, sizeof(bad),
				listed, sizeof(listed));
	if (r != DECODE_CODINGS_OK) {
		coding_fail(s, bad, listed,
			    r == DECODE_CODINGS_TOO_MANY
				    ? "more codings than the proxy undoes (2): not relayed unread"
				    : "the proxy cannot decode it: not relayed unread");
		return false;
	}
	if (!content)
		return true;
	decode_strip_head(&s->rs.headers);
	s->codings = cs;
	s->dec = decode_new(&cs, DECODE_MAX_OUT_DEFAULT);
	s->has_rcl = false;
	s->rs.body = HTTP_BODY_CHUNKED;
	s->rs.content_length = 0;
	return true;
}

/* One piece of the (decoded) body: through the filters into @s->down.
 * False when the stream was cut. */
static bool body_piece(struct h2_stream *s, const char *d, size_t n)
{
	if (s->grpc) {
		buf_append(&s->gin, d, n);
		return grpc_messages(s);
	}
	return response_slice(s, d, n, false);
}

static void response_done(struct h2_stream *s);

/* Coded bytes from @s->coded through the decoder, the decoded ones
 * through the filters, while the client takes them (the decoder holds
 * the rest: memory stays bounded whatever the ratio). */
static void decode_pump(struct h2_stream *s)
{
	char piece[16384];

	/* (an outcome is set once the stream was cut or answered) */
	while (s->dec && !s->answered && !s->outcome_set && s->down.len < BUF_HIGH) {
		size_t got = 0;
		enum decode_result r = decode_get(s->dec, piece, sizeof(piece), &got);

		if (r == DECODE_OUTPUT) {
			if (s->head_held && !s->hold)
				send_head(s, false);
			if (!body_piece(s, piece, got))
				return;
			continue;
		}
		if (r == DECODE_DONE) {
			decode_free(s->dec);
			s->dec = NULL;
			if (s->head_held && !s->hold)
				send_head(s, false);
			response_done(s);
			return;
		}
		if (r == DECODE_ERROR) {
			char codings[64];

			decode_codings_format(&s->codings, codings, sizeof(codings));
			coding_fail(s, decode_coding_name(decode_error_coding(s->dec)), codings,
				    decode_error(s->dec));
			return;
		}
		if (s->coded.len) {
			size_t put = decode_put(s->dec, s->coded.data, s->coded.len);

			buf_consume(&s->coded, put);
			if (put)
				continue;
		} else if (s->coded_end) {
			s->coded_end = false;
			decode_end(s->dec);
			continue;
		}
		break;
	}
	credit_upstream(s);
	if (s->resp_started)
		(void)nghttp2_session_resume_data(s->h->cs, s->cid);
}

/* A slice of the answer's body as it came from the upstream. False when
 * the stream was cut or answered. */
static bool response_data(struct h2_stream *s, const char *d, size_t n)
{
	if (s->discard)
		return true;
	if (!s->dec)
		return body_piece(s, d, n);
	buf_append(&s->coded, d, n);
	decode_pump(s);
	return !s->answered && !s->outcome_set;
}

/* An interim head (1xx; its fields collected in s->rs.headers, taken
 * from there): shown to the filters (which scrub its fields), then to
 * the client. */
static void relay_interim(struct h2_stream *s)
{
	struct filter_response rs;
	nghttp2_nv *nv;
	char **names, status[8];
	size_t i, n = 0, nnames = 0;

	memset(&rs, 0, sizeof(rs));
	rs.status = s->status_in;
	rs.reason = util_xstrdup("");
	rs.body = HTTP_BODY_NONE;
	rs.headers = s->rs.headers;
	memset(&s->rs.headers, 0, sizeof(s->rs.headers));
	s->has_rcl = false;
	s->resp_head_bytes = 0;
	for (i = 0; i < s->ch.n; i++)
		if (s->ch.f[i].ops->response_interim)
			s->ch.f[i].ops->response_interim(s->ch.f[i].st, &rs);
	nv = util_xcalloc(rs.headers.count + 1, sizeof(*nv));
	names = util_xcalloc(rs.headers.count + 1, sizeof(*names));
	snprintf(status, sizeof(status), "%u", rs.status);
	add_nv(nv, &n, ":status", status);
	add_headers(nv, &n, &rs.headers, names, &nnames, false);
	if (rs.status > 100 && rs.status < 200)
		(void)nghttp2_submit_headers(s->h->cs, NGHTTP2_FLAG_NONE, s->cid, NULL, nv, n, NULL);
	free(nv);
	free_names(names, nnames);
	free(rs.reason);
	filter_headers_free(&rs.headers);
}

/* The upstream's final head, copied into s->rs: through the filters,
 * then to the client. @end: it has no body. */

static void response_head(struct h2_stream *s, bool end)
{
	size_t i;
	bool keeps = true;

	s->final_seen = true;
	s->rs.status = s->status_in;
	s->rs.body = end ? HTTP_BODY_NONE : s->has_rcl ? HTTP_BODY_LENGTH : HTTP_BODY_CHUNKED;
	s->rs.content_length = s->rcl;
	if (!s->rs.reason)
		s->rs.reason = util_xstrdup("");
	if (!end && !decode_setup(s))
		return;
	/* sent again (once) when all of it went, its body none or kept
	 * whole, its answer not decoded, over an upstream that goes on */
	s->rs.replayable = !s->retried && !s->dec && s->req_end && s->up.len == 0 &&
			   (s->rq.body == HTTP_BODY_NONE || s->kept_body) &&
			   !s->h->up_gone &&
			   (!s->h->up_h1 || (s->h->h1_keep && s->h1_req_done));
	for (i = 0; i < s->ch.n; i++) {
		struct filter_transform tf = { .enabled = false };
		struct verdict v;
		enum filter_result r;

		if (!s->ch.f[i].ops->response_head)
			continue;
		verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
		r = s->ch.f[i].ops->response_head(s->ch.f[i].st, &s->rs, &tf, &v);
		if (r == FILTER_VERDICT && v.action != VERDICT_ALLOW && !refuse(s, &v))
			return;
		verdict_clear(&v);
		if (tf.retry && s->rs.replayable) {
			/* this answer is dropped; the request goes again
			 * once it is read (resend) */
			s->discard = true;
			return;
		}
		if (tf.enabled && s->rs.body != HTTP_BODY_NONE) {
			s->transform = true;
			if (!tf.keeps_length)
				keeps = false;
			if (tf.hold_head && !s->hold) {
				s->hold = true;
				s->hold_rule = tf.hold_rule;
				s->hold_reason = tf.hold_reason;
			}
		}
	}
	s->keeps = keeps;
	if (s->transform) {
		const char *ct = filter_headers_get(&s->rs.headers, "content-type");

		s->grpc = ct && strncasecmp(ct, "application/grpc", 16) == 0;
	}
	if (end) {
		s->up_ended = true;
		if (!response_slice(s, NULL, 0, true))
			return;
		s->resp_end = true;
	}
	if (s->dec || s->hold)
		s->head_held = true; /* sent with the first (decoded, or
					transformed) byte */
	else
		send_head(s, end);
}

/* The answer's head goes to the client. */
static void send_head(struct h2_stream *s, bool end)
{
	struct h2 *h = s->h;
	nghttp2_nv *nv;
	nghttp2_data_provider prd;
	/* cppcheck-suppress variableScope ; nv points into it until submitted */
	char **names, status[8], length[24];
	size_t n = 0, nnames = 0;

	s->head_held = false;
	nv = util_xcalloc(s->rs.headers.count + 2, sizeof(*nv));
	names = util_xcalloc(s->rs.headers.count + 1, sizeof(*names));
	snprintf(status, sizeof(status), "%u", s->rs.status);
	add_nv(nv, &n, ":status", status);
	add_headers(nv, &n, &s->rs.headers, names, &nnames, false);
	if (s->has_rcl && (!s->transform || s->keeps)) {
		snprintf(length, sizeof(length), "%llu", (unsigned long long)s->rcl);
		add_nv(nv, &n, "content-length", length);
	}
	prd.source.ptr = NULL;
	prd.read_callback = down_read;
	s->resp_started = true;
	if (end && s->down.len == 0) {
		s->resp_done = true;
		if (nghttp2_submit_response(h->cs, s->cid, nv, n, NULL) != 0)
			reset_client(s, NGHTTP2_INTERNAL_ERROR);
	} else if (nghttp2_submit_response(h->cs, s->cid, nv, n, &prd) != 0) {
		reset_client(s, NGHTTP2_INTERNAL_ERROR);
	}
	free(nv);
	free_names(names, nnames);
}

static void response_done(struct h2_stream *s);

/* The dropped answer is read: the request goes again, its head as the
 * filters left it, its body the one kept (filter_transform.retry). */
static void resend(struct h2_stream *s)
{
	struct h2 *h = s->h;

	if (!h->up_h1 && s->uid > 0 && !s->up_closed)
		(void)nghttp2_session_set_stream_user_data(h->us, s->uid, NULL);
	s->discard = false;
	s->retried = true;
	free(s->rs.reason);
	filter_headers_free(&s->rs.headers);
	filter_headers_free(&s->trailers);
	memset(&s->rs, 0, sizeof(s->rs));
	s->status_in = 0;
	s->final_seen = false;
	s->has_rcl = false;
	s->rcl = 0;
	s->resp_head_bytes = 0;
	s->transform = s->keeps = s->hold = s->grpc = false;
	s->hold_rule = s->hold_reason = NULL;
	s->uid = 0;
	s->up_closed = false;
	s->up_ended = false;
	s->h1_req_done = false;
	buf_free(&s->up);
	buf_append(&s->up, s->replay.data ? s->replay.data : "", s->replay.len);
	(void)open_upstream(s);
}

/* The upstream ended the stream after its head (with or without
 * trailers). */
static void response_end(struct h2_stream *s)
{
	if (s->discard) {
		resend(s);
		return;
	}
	s->up_ended = true;
	if (s->dec) {
		s->coded_end = true;
		decode_pump(s);
		return;
	}
	response_done(s);
}

/* All of the answer's body went through the filters. */
static void response_done(struct h2_stream *s)
{
	if (s->grpc && s->gin.len) {
		set_outcome(s, FILTER_OUTCOME_CUT);
		(void)fail(s, 0, "upstream.grpc", "the upstream ended in a gRPC message");
		return;
	}
	if (!s->grpc && !response_slice(s, NULL, 0, true))
		return;
	if (s->hold && s->head_held)
		send_head(s, false); /* (a gRPC answer without a message) */
	if (s->trailers.count)
		for (size_t i = 0; i < s->ch.n; i++)
			if (s->ch.f[i].ops->response_trailers)
				s->ch.f[i].ops->response_trailers(s->ch.f[i].st, &s->trailers);
	s->resp_end = true;
	(void)nghttp2_session_resume_data(s->h->cs, s->cid);
}

/* --- an HTTP/1.1 upstream --------------------------------------------------------- */

static void take_header(struct h2_stream *s, bool response, bool trailer, const char *name,
			size_t namelen, const char *value, size_t valuelen);

#define H1_IN_MAX ((size_t)64 * 1024) /* upstream bytes read ahead */

static void h1_enqueue(struct h2_stream *s)
{
	struct h2 *h = s->h;

	s->queued = true;
	s->qnext = NULL;
	if (h->qtail)
		h->qtail->qnext = s;
	else
		h->qhead = s;
	h->qtail = s;
}

static void h1_unqueue(struct h2_stream *s)
{
	struct h2 *h = s->h;
	struct h2_stream **pp, *prev = NULL;

	if (!s->queued)
		return;
	for (pp = &h->qhead; *pp; prev = *pp, pp = &(*pp)->qnext) {
		if (*pp != s)
			continue;
		*pp = s->qnext;
		if (h->qtail == s)
			h->qtail = prev;
		break;
	}
	s->queued = false;
	s->qnext = NULL;
}

/* The next stream in line becomes the exchange on the upstream: its
 * head, written as HTTP/1.1 from the filtered request. */
static void h1_start(struct h2 *h)
{
	struct buf *b = &h->c->uout;
	struct h2_stream *s = h->qhead;
	size_t i;

	if (h->h1cur || !s || h->up_gone || h->h1_close)
		return;
	h1_unqueue(s);
	h->h1cur = s;
	h->h1_head_done = false;
	if (s->rq.target)
		buf_printf(b, "%s %s HTTP/1.1\r\n", s->method, s->rq.target);
	else
		buf_printf(b, "%s %s%s%s HTTP/1.1\r\n", s->method, s->path,
			   s->query ? "?" : "", s->query ? s->query : "");
	buf_printf(b, "Host: %s\r\n", s->authority ? s->authority : s->host_header);
	for (i = 0; i < s->rq.headers.count; i++) {
		const struct filter_header *f = &s->rq.headers.h[i];

		size_t k, at = b->len;

		if (connection_specific(f->name) || f->name[0] == ':' ||
		    strcasecmp(f->name, "te") == 0)
			continue;
		buf_printf(b, "%s: %s\r\n", f->name, f->value);
		/* HTTP/1.1's customary case (h2 has only lowercase):
		 * "x-api-key" goes up as "X-Api-Key" */
		for (k = 0; f->name[k]; k++)
			if ((k == 0 || f->name[k - 1] == '-') && f->name[k] >= 'a' &&
			    f->name[k] <= 'z')
				b->data[at + k] = (char)(f->name[k] - 'a' + 'A');
	}
	s->h1_chunked = false;
	if (s->has_cl) {
		buf_printf(b, "Content-Length: %llu\r\n", (unsigned long long)s->cl);
	} else if (!s->req_end || s->up.len) {
		buf_puts(b, "Transfer-Encoding: chunked\r\n");
		s->h1_chunked = true;
	}
	buf_puts(b, "\r\n");
}

/* Request body bytes of the current exchange, as the upstream's queue
 * takes them (the client is credited for what left). */
static void h1_pump_request(struct h2 *h)
{
	struct h2_stream *s = h->h1cur;
	struct buf *b = &h->c->uout;

	if (!s || s->h1_req_done)
		return;
	while (s->up.len && b->len < BUF_HIGH) {
		size_t n = s->up.len < 16384 ? s->up.len : 16384;

		if (s->h1_chunked)
			buf_printf(b, "%zx\r\n", n);
		buf_append(b, s->up.data, n);
		if (s->h1_chunked)
			buf_puts(b, "\r\n");
		buf_consume(&s->up, n);
		s->bytes_up += n;
		credit_client(s, n);
	}
	if (s->req_end && !s->up.len) {
		if (s->h1_chunked) {
			size_t i;

			/* trailers only where chunks carry them: a body by
			 * length has none */
			buf_puts(b, "0\r\n");
			for (i = 0; i < s->rq_trailers.count; i++)
				if (!connection_specific(s->rq_trailers.h[i].name))
					buf_printf(b, "%s: %s\r\n", s->rq_trailers.h[i].name,
						   s->rq_trailers.h[i].value);
			buf_puts(b, "\r\n");
		}
		s->h1_req_done = true;
	}
}

/* The current exchange's answer is complete (@ended: its stream already
 * knows): the next one may start, unless the connection cannot carry it. */
static void h1_finish(struct h2 *h, struct h2_stream *s, bool ended)
{
	h->h1cur = NULL;
	h->h1_head_done = false;
	s->up_closed = true;
	if (!h->h1_keep || !s->h1_req_done)
		h->h1_close = true;
	if (!ended || s->discard)
		response_end(s);
}

/* A body slice of the current exchange, as u_data does for h2. False
 * when the stream was cut. */
static bool h1_deliver(struct h2 *h, struct h2_stream *s, const char *d, size_t n)
{
	if (!response_data(s, d, n))
		return false;
	(void)nghttp2_session_resume_data(h->cs, s->cid);
	return h->h1cur == s;
}

/* The upstream broke HTTP/1.1 on the current exchange. */
static void h1_broken(struct h2 *h, struct h2_stream *s, const char *why)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "the upstream's HTTP/1.1 answer: %s",
		 why ? why : "malformed");
	set_outcome(s, s->resp_started ? FILTER_OUTCOME_CUT : FILTER_OUTCOME_UPSTREAM_ERROR);
	(void)fail(s, s->resp_started ? 0 : 502, "upstream.malformed", reason);
	h->h1cur = NULL;
	h->h1_close = true;
}

/* The head of the current exchange's answer (interim ones skipped);
 * false when it is not complete yet or the exchange ended. */
static bool h1_head(struct h2 *h, struct h2_stream *s)
{
	struct conn *c = h->c;
	struct http_response resp;
	size_t i;
	bool empty;

	for (;;) {
		enum http_result r = http_parse_response(c->uin.data, c->uin.len, &resp, NULL,
							 strcmp(s->method, "HEAD") == 0);

		if (r == HTTP_INCOMPLETE)
			return false;
		if (r != HTTP_OK || resp.status == 101) {
			h1_broken(h, s, r == HTTP_OK ? "a 101 nobody asked for" : resp.error);
			return false;
		}
		s->status_in = resp.status;
		filter_headers_free(&s->rs.headers);
		for (i = 0; i < resp.headers.count; i++) {
			const struct http_header *f = &resp.headers.h[i];

			if (!http_is_hop_by_hop(&resp.headers, f->name) &&
			    !http_slice_eq_ci(f->name, "transfer-encoding"))
				take_header(s, true, false, f->name.ptr, f->name.len,
					    f->value.ptr, f->value.len);
		}
		if (resp.status >= 200)
			break;
		buf_consume(&c->uin, resp.head_len);
		relay_interim(s);
	}
	s->has_rcl = resp.body == HTTP_BODY_LENGTH;
	s->rcl = resp.content_length;
	h->h1_body = resp.body;
	h->h1_left = resp.content_length;
	h->h1_keep = resp.keep_alive;
	if (resp.body == HTTP_BODY_CHUNKED)
		http_chunked_init(&h->h1_ch, NULL);
	buf_consume(&c->uin, resp.head_len);
	h->h1_head_done = true;
	/* an empty body by its length ends with the head: no byte is
	 * awaited */
	empty = resp.body == HTTP_BODY_NONE ||
		(resp.body == HTTP_BODY_LENGTH && resp.content_length == 0);
	response_head(s, empty);
	if (h->h1cur != s)
		return false;
	if (empty) {
		h1_finish(h, s, true);
		return false;
	}
	return true;
}

/* Moves the upstream's answer from c->uin to the current stream while
 * the client takes it (@eof: the upstream closed). */
static void h1_response(struct h2 *h, bool eof)
{
	struct conn *c = h->c;
	struct h2_stream *s;

	while ((s = h->h1cur) != NULL) {
		struct http_slice data = { NULL, 0 };
		size_t used = 0;
		bool done = false;

		if (!h->h1_head_done && !h1_head(h, s))
			return;
		if (s->down.len >= BUF_HIGH || s->coded.len >= H1_IN_MAX)
			return; /* the client takes it first */
		if (!c->uin.len) {
			if (!eof)
				return;
			if (h->h1_body != HTTP_BODY_UNTIL_CLOSE)
				return; /* truncated: upstream_gone cuts it */
			h->h1_keep = false;
			h1_finish(h, s, false);
			return;
		}
		if (h->h1_body == HTTP_BODY_CHUNKED) {
			enum http_chunked_result r = http_chunked_feed(
				&h->h1_ch, c->uin.data, c->uin.len, &used, &data);

			if (r == HTTP_CHUNKED_BAD) {
				h1_broken(h, s, h->h1_ch.error);
				return;
			}
			done = r == HTTP_CHUNKED_DONE;
		} else {
			used = c->uin.len;
			if (h->h1_body == HTTP_BODY_LENGTH && used > h->h1_left)
				used = (size_t)h->h1_left;
			data.ptr = c->uin.data;
			data.len = used;
			if (h->h1_body == HTTP_BODY_LENGTH) {
				h->h1_left -= used;
				done = h->h1_left == 0;
			}
		}
		if (data.len && !h1_deliver(h, s, data.ptr, data.len))
			return;
		buf_consume(&c->uin, used);
		if (done)
			h1_finish(h, s, false);
	}
	if (c->uin.len && !h->h1cur) {
		/* bytes nobody asked for */
		buf_free(&c->uin);
		h->h1_close = true;
	}
}

/* --- nghttp2 callbacks: the client's side ---------------------------------------- */

/* One decoded header field of @s, into its place: the request's head
 * (pseudo-headers, Host and Content-Length apart) or trailers, or the
 * answer's head (:status, Content-Length apart) or trailers. An
 * answer's names are lowercased (an HTTP/1.1 upstream's may not be), a
 * request's written "Content-Type" (h2 lowercases them all on the way
 * out). */
static void take_header(struct h2_stream *s, bool response, bool trailer, const char *name,
			size_t namelen, const char *value, size_t valuelen)
{
	char *n = util_xstrndup(name, namelen), *v = util_xstrndup(value, valuelen);
	char *p;

	for (p = n; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	/* the filters (and their receipts) see a request's names in
	 * HTTP/1.1's customary case, whichever protocol brought them */
	for (p = n; !response && n[0] != ':' && *p; p++)
		if ((p == n || p[-1] == '-') && *p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	if (trailer) {
		if (n[0] != ':')
			filter_headers_add(response ? &s->trailers : &s->rq_trailers, n, v);
	} else if (response) {
		if (strcmp(n, ":status") == 0) {
			s->status_in = (unsigned int)strtoul(v, NULL, 10);
		} else if (strcmp(n, "content-length") == 0) {
			s->has_rcl = true;
			s->rcl = strtoull(v, NULL, 10);
		} else if (n[0] != ':') {
			filter_headers_add(&s->rs.headers, n, v);
		}
	} else if (strcmp(n, ":method") == 0 && !s->method) {
		s->method = v;
		v = NULL;
	} else if (strcmp(n, ":path") == 0 && !s->path) {
		char *q = strchr(v, '?');

		if (q) {
			s->query = util_xstrdup(q + 1);
			*q = '\0';
		}
		s->path = v;
		v = NULL;
	} else if (strcmp(n, ":authority") == 0 && !s->authority) {
		s->authority = v;
		v = NULL;
	} else if (n[0] == ':') {
		/* :scheme (always https here), :protocol (never advertised) */
	} else if (strcasecmp(n, "host") == 0) {
		if (!s->host_header) {
			s->host_header = v;
			v = NULL;
		}
	} else if (strcasecmp(n, "content-length") == 0) {
		s->has_cl = true;
		s->cl = strtoull(v, NULL, 10); /* nghttp2 checked it */
	} else {
		filter_headers_add(&s->rq.headers, n, v);
	}
	if (v)
		explicit_bzero(v, strlen(v));
	free(n);
	free(v);
}

static int c_begin_headers(nghttp2_session *session, const nghttp2_frame *frame,
			   void *user)
{
	struct h2 *h = user;
	struct h2_stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = stream_new(h, frame->hd.stream_id);
	if (nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s) != 0)
		stream_free(s, FILTER_OUTCOME_CLIENT_GONE);
	return 0;
}

static int c_header(nghttp2_session *session, const nghttp2_frame *frame,
		    const uint8_t *name, size_t namelen, const uint8_t *value,
		    size_t valuelen, uint8_t flags, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = client_stream(h, frame->hd.stream_id);

	(void)session;
	(void)flags;
	if (!s || frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	s->head_bytes += namelen + valuelen + 32;
	if (s->head_bytes > H2_MAX_HEADER_LIST) {
		s->head_bad = true; /* answered at its end (request_head) */
		return 0;
	}
	take_header(s, false, frame->headers.cat != NGHTTP2_HCAT_REQUEST, (const char *)name,
		    namelen, (const char *)value, valuelen);
	return 0;
}

static int c_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s;
	bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

	(void)session;
	if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
		return 0;
	s = client_stream(h, frame->hd.stream_id);
	if (!s)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
		request_head(s, end);
		return 0;
	}
	if (end && !s->req_end)
		request_end(s);
	return 0;
}

static int c_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
		  size_t len, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = client_stream(h, id);

	(void)flags;
	if (!s) {
		(void)nghttp2_session_consume(session, id, len);
		return 0;
	}
	request_data(s, data, len);
	return 0;
}

static int c_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = client_stream(h, id);

	if (!s)
		return 0;
	(void)nghttp2_session_set_stream_user_data(session, id, NULL);
	if (s->up_owed)
		(void)nghttp2_session_consume_connection(session, s->up_owed);
	s->up_owed = 0;
	stream_free(s, s->resp_done && code == NGHTTP2_NO_ERROR ? FILTER_OUTCOME_COMPLETE
			: s->resp_started ? FILTER_OUTCOME_CUT
					  : FILTER_OUTCOME_CLIENT_GONE);
	return 0;
}

static int c_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2 *h = user;

	(void)session;
	if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
		record_error(h, false, nghttp2_http2_strerror(frame->goaway.error_code));
	/* a refused stream's answer is out: the rest of its request is
	 * drained, within a bound (drain_bound) */
	if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS)) {
		struct h2_stream *s = client_stream(h, frame->hd.stream_id);

		if (s && s->answered) {
			s->answer_out = true;
			drain_bound(s);
		}
	}
	return 0;
}

/* --- nghttp2 callbacks: the upstream's side ------------------------------------- */

static int u_header(nghttp2_session *session, const nghttp2_frame *frame,
		    const uint8_t *name, size_t namelen, const uint8_t *value,
		    size_t valuelen, uint8_t flags, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = upstream_stream(h, frame->hd.stream_id);

	(void)session;
	(void)flags;
	if (!s || frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	s->resp_head_bytes += namelen + valuelen + 32;
	if (s->resp_head_bytes > H2_MAX_HEADER_LIST)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* reset: a 502 */
	take_header(s, true, s->final_seen, (const char *)name, namelen, (const char *)value,
		    valuelen);
	return 0;
}

static int u_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s;
	bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

	(void)session;
	if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
		return 0;
	s = upstream_stream(h, frame->hd.stream_id);
	if (!s || s->answered)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS && !s->final_seen) {
		if (s->status_in < 200) {
			relay_interim(s);
			return 0;
		}
		response_head(s, end);
		if (end && s->discard)
			response_end(s);
		return 0;
	}
	if (end)
		response_end(s);
	return 0;
}

static int u_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
		  size_t len, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = upstream_stream(h, id);

	(void)flags;
	if (!s || s->answered || !s->final_seen) {
		(void)nghttp2_session_consume(session, id, len);
		return 0;
	}
	s->down_owed += len;
	if (!response_data(s, (const char *)data, len))
		return 0;
	credit_upstream(s);
	(void)nghttp2_session_resume_data(h->cs, s->cid);
	return 0;
}

static int u_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = upstream_stream(h, id);

	if (!s)
		return 0;
	(void)nghttp2_session_set_stream_user_data(session, id, NULL);
	s->up_closed = true;
	if (s->down_owed)
		(void)nghttp2_session_consume_connection(session, s->down_owed);
	s->down_owed = 0;
	if (s->up_ended || s->answered)
		return 0;
	if (!s->resp_started) {
		char why[128];

		set_outcome(s, FILTER_OUTCOME_UPSTREAM_ERROR);
		snprintf(why, sizeof(why), "the upstream reset the stream: %s",
			 nghttp2_http2_strerror(code));
		(void)fail(s, 502, "upstream.reset", why);
		return 0;
	}
	set_outcome(s, FILTER_OUTCOME_CUT);
	reset_client(s, code == NGHTTP2_NO_ERROR ? NGHTTP2_INTERNAL_ERROR : code);
	return 0;
}

static int u_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	(void)session;
	if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
		record_error(user, true, nghttp2_http2_strerror(frame->goaway.error_code));
	return 0;
}

/* --- the connection -------------------------------------------------------------- */

static nghttp2_option *options(void)
{
	nghttp2_option *o;

	ASSERT(nghttp2_option_new(&o) == 0);
	nghttp2_option_set_no_auto_window_update(o, 1);
	nghttp2_option_set_max_outbound_ack(o, H2_MAX_OUTBOUND_ACK);
	nghttp2_option_set_max_settings(o, H2_MAX_SETTINGS);
	nghttp2_option_set_stream_reset_rate_limit(o, H2_RESET_BURST, H2_RESET_RATE);
	nghttp2_option_set_max_continuations(o, H2_MAX_CONTINUATIONS);
	nghttp2_option_set_max_send_header_block_length(o, (size_t)H2_MAX_HEADER_LIST * 2);
	return o;
}

static void settings(nghttp2_session *s, bool server)
{
	nghttp2_settings_entry iv[4] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_MAX_HEADER_LIST },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
	};

	/* a server never sends ENABLE_PUSH */
	ASSERT(nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, server ? 3 : 4) == 0);
	ASSERT(nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0,
						     H2_CONN_WINDOW) == 0);
}

void h2_begin(struct conn *c, bool upstream_h2)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *o = options();
	struct h2 *h = util_xcalloc(1, sizeof(*h));

	h->c = c;
	h->up_h1 = !upstream_h2;
	c->h2 = h;
	c->inner = true; /* requests inside a tunnel: the target is fixed */
	ASSERT(nghttp2_session_callbacks_new(&cb) == 0);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, c_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, c_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, c_frame_send);
	ASSERT(nghttp2_session_server_new2(&h->cs, cb, h, o) == 0);
	nghttp2_session_callbacks_del(cb);
	ASSERT(nghttp2_session_callbacks_new(&cb) == 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, u_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, u_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, u_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, u_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, u_frame_send);
	ASSERT(nghttp2_session_client_new2(&h->us, cb, h, o) == 0);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(o);
	settings(h->cs, true);
	if (upstream_h2)
		settings(h->us, false);
	conn_enter(c, CONN_H2);
	h2_step(c, false, 0);
}

void h2_free(struct conn *c)
{
	struct h2 *h = c->h2;

	if (!h)
		return;
	for (struct h2_stream *s = h->streams, *next; s; s = next) {
		next = s->next;
		s->up_closed = true; /* the session goes with it */
		stream_free(s, s->resp_started ? FILTER_OUTCOME_CUT
					       : FILTER_OUTCOME_CLIENT_GONE);
	}
	nghttp2_session_del(h->cs);
	nghttp2_session_del(h->us);
	c->h2 = NULL;
	free(h);
}

int h2_resume(struct conn *c, uint32_t seq, enum filter_result r, struct verdict *v)
{
	struct h2_stream *s;

	for (s = c->h2->streams; s; s = s->next)
		if (s->seq == seq && s->on_resume)
			break;
	if (!s || c->state != CONN_H2) {
		verdict_clear(v);
		return -ESTALE;
	}
	{
		void (*fn)(struct h2_stream *, enum filter_result, struct verdict *) =
			s->on_resume;

		s->on_resume = NULL;
		fn(s, r, v);
	}
	h2_step(c, false, 0);
	return 0;
}

/* The upstream is gone: streams without an answer get a 502, the others
 * are cut; the client is told to open a new connection for more. */
static void upstream_gone(struct h2 *h)
{
	struct h2_stream *s, *next;

	if (h->up_gone)
		return;
	h->up_gone = true;
	h->h1cur = NULL;
	while (h->qhead)
		h1_unqueue(h->qhead);
	for (s = h->streams; s; s = next) {
		next = s->next;
		if (s->answered || s->resp_end)
			continue;
		s->up_closed = true;
		if (!s->resp_started)
			(void)fail(s, 502, "upstream.closed",
				   "the upstream closed the intercepted connection");
		else {
			set_outcome(s, FILTER_OUTCOME_CUT);
			reset_client(s, NGHTTP2_INTERNAL_ERROR);
		}
	}
	/* the client is told once the answers under way are out
	 * (h2_step): some clients drop a stream's DATA after GOAWAY */
}

/* The HTTP/1.1 upstream is gone (closed, broken or abandoned). */
static void h1_drop(struct h2 *h)
{
	struct conn *c = h->c;

	h->h1_close = false;
	if (endpoint_open(&c->upstream)) {
		conn_unwatch(c, true);
		endpoint_close(&c->upstream);
	}
	buf_free(&c->uout);
	buf_free(&c->uin);
	upstream_gone(h);
}

/* Reads the HTTP/1.1 upstream while its answer is taken. Returns
 * whether bytes moved. */
static int h1_pump_in(struct h2 *h)
{
	struct conn *c = h->c;
	int moved = 0, i;
	bool eof = false;

	for (i = 0; i < READ_ROUNDS && endpoint_open(&c->upstream) && c->uin.len < H1_IN_MAX;
	     i++) {
		ssize_t n = endpoint_read_buf(&c->upstream, &c->uin, H1_IN_MAX);

		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			eof = true;
			break;
		}
		moved = 1;
	}
	h1_response(h, eof);
	if (eof) {
		h1_drop(h);
		moved = 1;
	}
	return moved;
}

/* Reads one side into its session. Returns -1 when @c was closed, else
 * whether bytes moved. */
static int pump_in(struct h2 *h, bool upstream)
{
	struct conn *c = h->c;
	struct endpoint *e = upstream ? &c->upstream : &c->client;
	nghttp2_session *sess = upstream ? h->us : h->cs;
	char tmp[16384];
	int moved = 0, i;

	if (upstream && h->up_h1)
		return h1_pump_in(h);
	for (i = 0; i < READ_ROUNDS && endpoint_open(e); i++) {
		ssize_t n = endpoint_read(e, tmp, sizeof(tmp));
		ssize_t rv;

		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			if (!upstream) {
				conn_close(c);
				return -1;
			}
			conn_unwatch(c, true);
			endpoint_close(&c->upstream);
			upstream_gone(h);
			return 1;
		}
		moved = 1;
		rv = nghttp2_session_mem_recv(sess, (const uint8_t *)tmp, (size_t)n);
		if (rv < 0) {
			record_error(h, upstream, nghttp2_strerror((int)rv));
			if (!upstream) {
				/* its GOAWAY, if it can still go */
				const uint8_t *d;
				ssize_t k;

				while ((k = nghttp2_session_mem_send(h->cs, &d)) > 0 &&
				       c->cout.len < BUF_HIGH)
					buf_append(&c->cout, d, (size_t)k);
				h2_free(c);
				conn_finish(c);
				return -1;
			}
			conn_unwatch(c, true);
			endpoint_close(&c->upstream);
			upstream_gone(h);
			return 1;
		}
	}
	return moved;
}

/* Produces one side's output while its queue has room, and writes it.
 * Returns -1 when @c was closed, else whether bytes moved. */
static int pump_out(struct h2 *h, bool upstream)
{
	struct conn *c = h->c;
	struct endpoint *e = upstream ? &c->upstream : &c->client;
	nghttp2_session *sess = upstream ? h->us : h->cs;
	struct buf *b = upstream ? &c->uout : &c->cout;
	int moved = 0;

	if (upstream && !endpoint_open(e)) {
		buf_free(b);
		return 0;
	}
	if (upstream && h->up_h1) {
		size_t before = b->len;

		h1_response(h, false);
		h1_start(h);
		h1_pump_request(h);
		if (h->h1_close) {
			h1_drop(h);
			return 1;
		}
		/* cppcheck-suppress knownConditionTrueFalse ; h1_* append to it */
		moved = b->len != before;
	}
	while (!(upstream && h->up_h1) && b->len < BUF_HIGH) {
		const uint8_t *d;
		ssize_t n = nghttp2_session_mem_send(sess, &d);

		if (n < 0) {
			record_error(h, upstream, nghttp2_strerror((int)n));
			conn_close(c);
			return -1;
		}
		if (n == 0)
			break;
		buf_append(b, d, (size_t)n);
	}
	if (b->len) {
		size_t before = b->len;
		int r = endpoint_flush(e, b);

		if (r < 0 && r != -EAGAIN) {
			if (!upstream) {
				conn_close(c);
				return -1;
			}
			conn_unwatch(c, true);
			endpoint_close(&c->upstream);
			buf_free(b);
			upstream_gone(h);
			return 1;
		}
		moved = moved || b->len < before;
	}
	return moved;
}

void h2_step(struct conn *c, bool upstream, uint32_t events)
{
	struct h2 *h = c->h2;
	bool moved = false;
	int r, round;

	if (!h || c->state != CONN_H2)
		return;
	if (!upstream || events == 0 || endpoint_pending(&c->client)) {
		r = pump_in(h, false);
		if (r < 0)
			return;
		moved = moved || r;
	}
	if (upstream || events == 0 || endpoint_pending(&c->upstream)) {
		r = pump_in(h, true);
		if (r < 0)
			return;
		moved = moved || r;
	}
	for (round = 0; round < 4; round++) {
		int a, b;

		for (struct h2_stream *s = h->streams, *next; s; s = next) {
			next = s->next;
			if (s->dec)
				decode_pump(s);
		}
		a = pump_out(h, true);
		if (a < 0)
			return;
		b = pump_out(h, false);
		if (b < 0)
			return;
		if (!a && !b)
			break;
		moved = true;
	}
	if (moved)
		conn_touch(c);
	if (!nghttp2_session_want_read(h->cs) && !nghttp2_session_want_write(h->cs) &&
	    c->cout.len == 0) {
		conn_close(c);
		return;
	}
	if (h->up_gone && !h->streams && !h->goaway_sent) {
		h->goaway_sent = true;
		(void)nghttp2_submit_goaway(h->cs, NGHTTP2_FLAG_NONE,
					    nghttp2_session_get_last_proc_stream_id(h->cs),
					    NGHTTP2_NO_ERROR, NULL, 0);
		if (pump_out(h, false) < 0)
			return;
	}
	if (h->up_gone && !h->streams && !nghttp2_session_want_write(h->cs)) {
		/* the GOAWAY is queued: the client gets it and our FIN */
		h2_free(c);
		conn_drop_upstream(c);
		conn_finish(c);
		return;
	}
	conn_watch(c, false,
		   endpoint_events(&c->client, true, c->cout.len > 0) | EPOLLRDHUP);
	if (endpoint_open(&c->upstream)) {
		bool rd = !h->up_h1 || (c->uin.len < H1_IN_MAX &&
					(!h->h1cur || h->h1cur->down.len < BUF_HIGH));

		conn_watch(c, true, endpoint_events(&c->upstream, rd, c->uout.len > 0) |
					    (rd ? EPOLLRDHUP : 0));
	}
}
