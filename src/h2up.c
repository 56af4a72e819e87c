/* SPDX-License-Identifier: Apache-2.0
 * h2up.c - an HTTP/1.1 agent's exchanges over an h2 upstream.
 *
 * DOC: Theory of Operation
 *
 * When the agent of an intercepted connection speaks HTTP/1.1 and the
 * upstream chose h2 (intercept.c asks for both), the exchange (exchange.c)
 * runs unchanged: it writes the request it serialised, after every
 * filter, to the upstream endpoint and reads the answer from it as
 * HTTP/1.1 bytes, so the answer filters (scrubbing, metering, decoding)
 * see what they always see. The endpoint translates (endpoint.c hands
 * its calls here):
 *
 *  - writes: the request head is parsed (http.c, strictly) and submitted
 *    as one h2 stream on an nghttp2 client session (:method, :scheme
 *    https, :authority from Host, :path, the other fields but the
 *    hop-by-hop ones, content-length when known); its body, de-chunked
 *    when chunked (chunked request trailers are dropped), goes as DATA
 *    under the upstream's flow control. The bytes wait in a bounded
 *    buffer: past H2UP_BODY_MAX a write returns -EAGAIN until the
 *    upstream opens its window, so a slow upstream holds the agent back
 *    as an HTTP/1.1 one does;
 *  - reads: the answer's HEADERS become a status line and fields (1xx
 *    answers each their own head), DATA the body, framed with the
 *    upstream's content-length when it sent one, else chunked, with its
 *    trailers as chunked trailers. A stream reset or a connection that
 *    ends before the stream does is a truncation (-ECONNRESET), never an
 *    end of file: a cut answer must not look complete. Socket bytes are
 *    read only when the answer buffer is empty, and nghttp2 acknowledges
 *    DATA as it is read, so memory stays bounded by one read.
 *
 * One request at a time, as the exchange sends them. An HTTP/1.1 request
 * asking for Upgrade (WebSocket) cannot go over h2 (RFC 8441 is not
 * offered): it gets a 502 answer naming why, and the connection ends.
 * intercept.c avoids that case where it can: an agent whose ClientHello
 * offers no ALPN at all (most WebSocket libraries) has the upstream asked
 * for http/1.1 only.
 */
#include "h2up.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "buf.h"
#include "endpoint.h"
#include "h2limits.h"
#include "http.h"
#include "util.h"

#define H2UP_BODY_MAX ((size_t)64 * 1024)
#define H2UP_READ 16384

enum req_state { REQ_HEAD, REQ_LENGTH, REQ_CHUNKED, REQ_DONE };

struct h2up {
	nghttp2_session *s;
	struct buf in;      /* request bytes not parsed yet */
	struct buf body;    /* request body for the data provider */
	struct buf wire;    /* frames not written yet */
	struct buf out;     /* the answer as HTTP/1.1 */
	struct buf head;    /* the answer head (or trailers) being built */
	enum req_state rq;
	uint64_t left;
	struct http_chunked ch;
	bool body_end;
	int32_t sid;        /* the current stream, -1 none */
	bool head_req;
	bool final;         /* the final head was written */
	bool chunked;       /* the answer goes chunked */
	bool has_cl;
	bool ended;         /* the answer is complete */
	unsigned int status;
	int error;          /* a -errno read/write report once broken */
	bool eof;           /* no more answers: end of file once out drains */
};

static const char *reason(unsigned int st)
{
	switch (st) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

/* --- the answer ------------------------------------------------------------ */

static void answer_end(struct h2up *h)
{
	if (h->ended)
		return;
	h->ended = true;
	if (h->chunked) {
		buf_puts(&h->out, "0\r\n");
		buf_append(&h->out, h->head.data, h->head.len);
		buf_puts(&h->out, "\r\n");
	}
	h->head.len = 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *u)
{
	struct h2up *h = u;

	(void)s;
	(void)flags;
	if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != h->sid)
		return 0;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		h->status = vlen == 3 ? (unsigned int)strtoul((const char *)value, NULL, 10) : 0;
		return 0;
	}
	if (nlen && name[0] == ':')
		return 0;
	/* h2 forbids connection-specific fields; never relay one */
	if ((nlen == 17 && memcmp(name, "transfer-encoding", 17) == 0) ||
	    (nlen == 10 && memcmp(name, "connection", 10) == 0) ||
	    (nlen == 10 && memcmp(name, "keep-alive", 10) == 0))
		return 0;
	if (!h->final && nlen == 14 && memcmp(name, "content-length", 14) == 0)
		h->has_cl = true;
	buf_append(&h->head, name, nlen);
	buf_puts(&h->head, ": ");
	buf_append(&h->head, value, vlen);
	buf_puts(&h->head, "\r\n");
	return 0;
}

static void head_done(struct h2up *h)
{
	if (h->status < 100 || h->status > 599) {
		h->error = -EPROTO;
		return;
	}
	if (h->status < 200) {
		buf_printf(&h->out, "HTTP/1.1 %u %s\r\n", h->status, reason(h->status));
		buf_append(&h->out, h->head.data, h->head.len);
		buf_puts(&h->out, "\r\n");
		h->head.len = 0;
		h->has_cl = false;
		return;
	}
	h->final = true;
	h->chunked = !h->has_cl && !h->head_req && h->status != 204 && h->status != 304;
	buf_printf(&h->out, "HTTP/1.1 %u %s\r\n", h->status, reason(h->status));
	buf_append(&h->out, h->head.data, h->head.len);
	if (h->chunked)
		buf_puts(&h->out, "Transfer-Encoding: chunked\r\n");
	buf_puts(&h->out, "\r\n");
	h->head.len = 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *u)
{
	struct h2up *h = u;

	(void)s;
	if (f->hd.stream_id != h->sid || h->sid < 0)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && !h->final)
		head_done(h);
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		if (!h->final)
			h->error = -EPROTO;
		else
			answer_end(h);
	}
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d,
		   size_t n, void *u)
{
	struct h2up *h = u;

	(void)s;
	(void)flags;
	if (id != h->sid || !h->final || n == 0)
		return 0;
	if (h->chunked)
		buf_printf(&h->out, "%zx\r\n", n);
	buf_append(&h->out, d, n);
	if (h->chunked)
		buf_puts(&h->out, "\r\n");
	return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *u)
{
	struct h2up *h = u;

	(void)s;
	if (id != h->sid)
		return 0;
	(void)code;
	if (!h->ended)
		h->error = -ECONNRESET;
	h->sid = -1;
	h->body.len = 0;
	if (h->rq == REQ_DONE)
		h->rq = REQ_HEAD;
	return 0;
}

/* --- the request ----------------------------------------------------------- */

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *to, size_t len,
			 uint32_t *flags, nghttp2_data_source *src, void *u)
{
	struct h2up *h = u;
	size_t n = h->body.len < len ? h->body.len : len;

	(void)s;
	(void)id;
	(void)src;
	if (n == 0 && !h->body_end)
		return NGHTTP2_ERR_DEFERRED;
	memcpy(to, h->body.data, n);
	buf_consume(&h->body, n);
	if (h->body_end && h->body.len == 0)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static char *lower(struct http_slice s)
{
	char *p = util_xcalloc(1, s.len + 1);
	size_t i;

	for (i = 0; i < s.len; i++)
		p[i] = (char)(s.ptr[i] >= 'A' && s.ptr[i] <= 'Z' ? s.ptr[i] + 32 : s.ptr[i]);
	return p;
}

static void nv_set(nghttp2_nv *nv, const char *name, const char *v, size_t vlen)
{
	nv->name = (uint8_t *)(uintptr_t)name;
	nv->namelen = strlen(name);
	nv->value = (uint8_t *)(uintptr_t)v;
	nv->valuelen = vlen;
	nv->flags = NGHTTP2_NV_FLAG_NONE;
}

/* A WebSocket (or any other) upgrade cannot go over h2. */
static void refuse_upgrade(struct h2up *h)
{
	static const char msg[] = "the upstream speaks only h2 on this connection: "
				  "an HTTP/1.1 Upgrade (WebSocket) cannot be relayed over it\n";

	buf_printf(&h->out,
		   "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
		   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		   sizeof(msg) - 1, msg);
	h->eof = true;
}

/* Submits the request whose head is at the start of h->in. */
static int submit(struct h2up *h, const struct http_request *rq)
{
	size_t i, n = 0, cnt = rq->headers.count;
	nghttp2_nv *nv = util_xcalloc(cnt + 5, sizeof(*nv));
	char **names = util_xcalloc(cnt + 1, sizeof(*names));
	/* cppcheck-suppress variableScope ; nv points into it until submitted */
	char length[24];
	nghttp2_data_provider prd;
	int host = http_header_find(&rq->headers, "host", 0);
	int32_t id;
	bool body = rq->body == HTTP_BODY_CHUNKED ||
		    (rq->body == HTTP_BODY_LENGTH && rq->content_length > 0);

	nv_set(&nv[n++], ":method", rq->method.ptr, rq->method.len);
	nv_set(&nv[n++], ":scheme", "https", 5);
	if (host >= 0)
		nv_set(&nv[n++], ":authority", rq->headers.h[host].value.ptr,
		       rq->headers.h[host].value.len);
	nv_set(&nv[n++], ":path", rq->target.ptr, rq->target.len);
	for (i = 0; i < cnt; i++) {
		const struct http_header *f = &rq->headers.h[i];

		if ((int)i == host || http_is_hop_by_hop(&rq->headers, f->name) ||
		    http_slice_eq_ci(f->name, "content-length"))
			continue;
		names[i] = lower(f->name);
		nv_set(&nv[n++], names[i], f->value.ptr, f->value.len);
	}
	if (rq->body == HTTP_BODY_LENGTH) {
		snprintf(length, sizeof(length), "%llu", (unsigned long long)rq->content_length);
		nv_set(&nv[n++], "content-length", length, strlen(length));
	}
	prd.source.ptr = NULL;
	prd.read_callback = body_read;
	id = nghttp2_submit_request(h->s, NULL, nv, n, body ? &prd : NULL, NULL);
	for (i = 0; i < cnt; i++)
		free(names[i]);
	free(names);
	free(nv);
	if (id < 0)
		return -EPROTO;
	h->sid = id;
	h->head_req = rq->method.len == 4 && memcmp(rq->method.ptr, "HEAD", 4) == 0;
	h->final = h->chunked = h->has_cl = h->ended = false;
	h->status = 0;
	h->head.len = 0;
	h->body_end = !body;
	h->rq = !body ? REQ_DONE : rq->body == HTTP_BODY_CHUNKED ? REQ_CHUNKED : REQ_LENGTH;
	h->left = rq->content_length;
	if (h->rq == REQ_CHUNKED)
		http_chunked_init(&h->ch, NULL);
	return 0;
}

/* Moves what h->in holds into streams and their bodies. */
static int parse(struct h2up *h)
{
	for (;;) {
		if (h->rq == REQ_HEAD) {
			struct http_request rq;
			enum http_result r;
			int e;

			if (h->sid >= 0 || h->in.len == 0 || h->eof)
				return 0;
			r = http_parse_request(h->in.data, h->in.len, &rq, NULL);
			if (r == HTTP_INCOMPLETE)
				return 0;
			if (r != HTTP_OK)
				return -EPROTO;
			if (http_header_find(&rq.headers, "upgrade", 0) >= 0) {
				refuse_upgrade(h);
				h->in.len = 0;
				return 0;
			}
			e = submit(h, &rq);
			if (e < 0)
				return e;
			buf_consume(&h->in, rq.head_len);
			continue;
		}
		if (h->rq == REQ_LENGTH) {
			size_t n = h->left < h->in.len ? (size_t)h->left : h->in.len;

			if (h->sid >= 0) /* else answered and closed early */
				buf_append(&h->body, h->in.data, n);
			buf_consume(&h->in, n);
			h->left -= n;
			if (h->left == 0) {
				h->body_end = true;
				h->rq = REQ_DONE;
			}
		} else if (h->rq == REQ_CHUNKED) {
			while (h->in.len) {
				size_t used = 0;
				struct http_slice d;
				enum http_chunked_result r =
					http_chunked_feed(&h->ch, h->in.data, h->in.len, &used, &d);

				if (r == HTTP_CHUNKED_BAD)
					return -EPROTO;
				if (r == HTTP_CHUNKED_DATA && h->sid >= 0)
					buf_append(&h->body, d.ptr, d.len);
				buf_consume(&h->in, used);
				if (r == HTTP_CHUNKED_DONE) {
					h->body_end = true;
					h->rq = REQ_DONE;
					break;
				}
				if (r == HTTP_CHUNKED_MORE)
					break;
			}
		}
		if (h->sid >= 0)
			(void)nghttp2_session_resume_data(h->s, h->sid);
		if (h->rq != REQ_DONE || h->sid >= 0)
			return 0;
		h->rq = REQ_HEAD;
	}
}

/* --- I/O ------------------------------------------------------------------- */

/* Queues what the session has to say and writes what the socket takes. */
int h2up_flush(struct endpoint *e)
{
	struct h2up *h = e->h2up;

	for (;;) {
		const uint8_t *d;
		ssize_t n;

		if (h->wire.len < H2UP_READ) {
			n = nghttp2_session_mem_send(h->s, &d);
			if (n < 0)
				return -EPROTO;
			if (n > 0) {
				buf_append(&h->wire, d, (size_t)n);
				continue;
			}
		}
		if (h->wire.len == 0)
			return 0;
		n = endpoint_write_raw(e, h->wire.data, h->wire.len);
		if (n <= 0)
			return n == 0 ? -EAGAIN : (int)n;
		buf_consume(&h->wire, (size_t)n);
	}
}

ssize_t h2up_read(struct endpoint *e, void *buf, size_t len)
{
	struct h2up *h = e->h2up;

	for (;;) {
		uint8_t tmp[H2UP_READ];
		ssize_t n;
		int r;

		if (h->out.len) {
			n = (ssize_t)(h->out.len < len ? h->out.len : len);
			memcpy(buf, h->out.data, (size_t)n);
			buf_consume(&h->out, (size_t)n);
			return n;
		}
		if (h->error)
			return h->error;
		if (h->eof)
			return 0;
		r = h2up_flush(e);
		if (r < 0 && r != -EAGAIN)
			return r;
		if (!nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s))
			return h->sid >= 0 ? -ECONNRESET : 0;
		n = endpoint_read_raw(e, tmp, sizeof(tmp));
		if (n == -EAGAIN)
			return n;
		if (n <= 0)
			return h->sid >= 0 ? -ECONNRESET : n;
		if (nghttp2_session_mem_recv(h->s, tmp, (size_t)n) < 0)
			h->error = -EPROTO;
		if (parse(h) < 0)
			h->error = -EPROTO;
		r = h2up_flush(e);
		if (r < 0 && r != -EAGAIN && !h->error)
			h->error = r;
	}
}

ssize_t h2up_write(struct endpoint *e, const void *buf, size_t len)
{
	struct h2up *h = e->h2up;
	int r;

	if (h->error)
		return h->error;
	if (h->eof)
		return (ssize_t)len; /* the answer is ours: nothing goes up */
	if (h->body.len >= H2UP_BODY_MAX || h->in.len >= H2UP_BODY_MAX) {
		(void)h2up_flush(e);
		if (h->body.len >= H2UP_BODY_MAX || h->in.len >= H2UP_BODY_MAX) {
			e->wr_need = EPOLLIN; /* a WINDOW_UPDATE */
			return -EAGAIN;
		}
	}
	buf_append(&h->in, buf, len);
	if (parse(h) < 0) {
		h->error = -EPROTO;
		return h->error;
	}
	r = h2up_flush(e);
	if (r < 0 && r != -EAGAIN) {
		h->error = r;
		return r;
	}
	return (ssize_t)len;
}

bool h2up_pending(const struct h2up *h)
{
	return h->out.len > 0 || h->error || h->eof;
}

uint32_t h2up_events(const struct endpoint *e, bool want_read, bool want_write)
{
	const struct h2up *h = e->h2up;
	uint32_t ev = want_read ? e->rd_need : 0;

	if (h->wire.len)
		ev |= EPOLLOUT;
	if (want_write)
		ev |= h->body.len >= H2UP_BODY_MAX || h->in.len >= H2UP_BODY_MAX ? EPOLLIN
										: EPOLLOUT;
	return ev;
}

void h2up_attach(struct endpoint *e)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *o;
	struct h2up *h = util_xcalloc(1, sizeof(*h));
	nghttp2_settings_entry set[] = {
		{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
		{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
	};

	h->sid = -1;
	ASSERT(nghttp2_session_callbacks_new(&cb) == 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	ASSERT(nghttp2_option_new(&o) == 0);
	nghttp2_option_set_max_outbound_ack(o, H2_MAX_OUTBOUND_ACK);
	nghttp2_option_set_max_settings(o, H2_MAX_SETTINGS);
	nghttp2_option_set_max_continuations(o, H2_MAX_CONTINUATIONS);
	ASSERT(nghttp2_session_client_new2(&h->s, cb, h, o) == 0);
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(o);
	ASSERT(nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, set,
				       sizeof(set) / sizeof(set[0])) == 0);
	e->h2up = h;
}

void h2up_free(struct h2up *h)
{
	if (!h)
		return;
	nghttp2_session_del(h->s);
	buf_free(&h->in);
	buf_free(&h->body);
	buf_free(&h->wire);
	buf_free(&h->out);
	buf_free(&h->head);
	free(h);
}
