/* SPDX-License-Identifier: Apache-2.0
 * feed.c - the live feed (see feed.h).
 *
 * DOC: Theory of Operation
 *
 * The local stream is the source of truth; the feed is a copy that may
 * lose lines, and says which. It is a process of its own, forked by the
 * key holder before the key holder loads its key (so it never held it)
 * and after it wiped its environment: it holds nothing worth stealing,
 * and it is the only part of a session that talks to the collector.
 *
 * The key holder hands it every byte it writes to the stream (whole
 * lines) on a SOCK_SEQPACKET channel, with a non-blocking write: when the
 * channel is full the lines are lost to the feed, and the key holder
 * never waits. The feed reads the channel at once into a bounded queue
 * (its reader, the main thread) and sends from the queue (its sender
 * thread): batches of up to FEED_BATCH records, each one OTLP/HTTP JSON
 * POST on a fresh connection with short timeouts, retried with a backoff
 * (FEED_BACKOFF_MIN doubling to FEED_BACKOFF_MAX) while the collector is
 * down or answers 5xx, 408 or 429. Lines that come while the queue is
 * full are lost to the feed, like those the channel lost (a jump in
 * seq), and those of a batch the collector refuses (another 4xx).
 *
 * What was lost goes back to the key holder as MSG_FEED_GAP {from, to,
 * why} once the queue has room again, and the key holder writes it into
 * the stream as a receipt.gap line, which the feed then sends like any
 * other. When the key holder closes the channel (the stream is over),
 * the feed sends what it still holds for at most FEED_DRAIN_MS and
 * exits; what it could not send then cannot be recorded in a stream
 * that has ended, and is said on stderr.
 *
 * A record is one OCSF event of `airlock export` (export.h) for the line:
 * its body the event's JSON text, its attributes the line's seq and
 * SHA-256, its type and the OCSF class; a block or a would_block gives
 * two records (the activity and its Detection Finding), as export gives
 * two events.
 */
#include "feed.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "confine.h"
#include "events.h"
#include "export.h"
#include "merkle.h"
#include "msg.h"
#include "receipt.h"
#include "util.h"
#include "witness_client.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.1.0"
#endif

#define FEED_BATCH 256              /* records of one POST, at most */
#define FEED_BATCH_BYTES ((size_t)4 << 20)
#define FEED_BACKOFF_MIN 100        /* ms */
#define FEED_BACKOFF_MAX 2000
#define FEED_TIMEOUT_S 3            /* connect, send, and the answer */
#define FEED_DRAIN_MS 3000
#define FEED_CHANNEL_BUF ((int)8 << 20)
/* one message of the channel: a batch of the writer (64 KiB) and a line */
#define FEED_MSG_MAX ((size_t)2 << 20)

bool feed_is_url(const char *dest)
{
	return dest && strncmp(dest, "otlp+", 5) == 0;
}

int feed_url_parse(const char *spec, struct feed_url *u, char *err, size_t errlen)
{
	const char *h, *end, *hs, *he, *port = NULL;
	size_t hlen, plen;
	unsigned long n;

	memset(u, 0, sizeof(*u));
	if (strncmp(spec, "otlp+http://", 12) != 0) {
		snprintf(err, errlen, "--events %s: a feed is otlp+http://HOST[:PORT][/PATH]%s",
			 spec, strncmp(spec, "otlp+https://", 13) == 0
				       ? " (https is not supported: use a local collector)"
				       : "");
		return -1;
	}
	h = spec + 12;
	end = h + strcspn(h, "/");
	if (strpbrk(spec, "?#@ \t\r\n")) {
		snprintf(err, errlen, "--events %s: a feed URL has no user, query, fragment "
			 "or space", spec);
		return -1;
	}
	if (*h == '[') {
		he = memchr(h, ']', (size_t)(end - h));
		if (!he) {
			snprintf(err, errlen, "--events %s: unclosed '[' in the host", spec);
			return -1;
		}
		hs = h + 1;
		if (he + 1 < end) {
			if (he[1] != ':')
				goto bad_port;
			port = he + 2;
		}
	} else {
		hs = h;
		he = memchr(h, ':', (size_t)(end - h));
		if (he)
			port = he + 1;
		else
			he = end;
	}
	hlen = (size_t)(he - hs);
	if (hlen == 0 || hlen >= sizeof(u->host)) {
		snprintf(err, errlen, "--events %s: no host", spec);
		return -1;
	}
	memcpy(u->host, hs, hlen);
	if (port) {
		char num[8];

		plen = (size_t)(end - port);
		if (plen == 0 || plen >= sizeof(num))
			goto bad_port;
		memcpy(num, port, plen);
		num[plen] = '\0';
		if (!util_parse_uint(num, 1, 65535, &n))
			goto bad_port;
		snprintf(u->port, sizeof(u->port), "%lu", n);
	} else {
		snprintf(u->port, sizeof(u->port), "4318");
	}
	if (strlen(end) >= sizeof(u->path)) {
		snprintf(err, errlen, "--events %.12s...: the path is too long (%zu bytes at "
			 "most)", spec, sizeof(u->path) - 1);
		return -1;
	}
	snprintf(u->path, sizeof(u->path), "%s", *end ? end : "/v1/logs");
	return 0;
bad_port:
	snprintf(err, errlen, "--events %s: the port must be a number from 1 to 65535",
		 spec);
	return -1;
}

/* --- the feed process -------------------------------------------------------- */

struct feed {
	struct feed_url u;
	const char *spec, *events;
	int chan;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the queue (under mu): the reader appends, the sender removes from
	 * the head once a batch is delivered (the records of a batch in
	 * flight stay where they are: only the sender frees them) */
	struct feed_queue fq;
	bool closing;              /* the stream is over */
	uint64_t drain_until;
	struct export_session es;  /* the sender's */
	uint64_t delivered;
	/* the witness (run --witness): the tree of every line, under mu */
	const char *wurl;          /* NULL: none */
	EVP_PKEY *wkey;
	struct merkle_store tree;
	bool tree_broken;          /* a line did not reach the feed */
	uint64_t cp_size;          /* the last checkpoint seen, 0: none */
	char *cp_note;
	uint64_t cosigned;         /* the size the witness cosigned last */
	char *cosig;               /* and its cosignature lines */
	bool final;                /* the key holder asks for the last one */
};

void feed_queue_init(struct feed_queue *fq, size_t cap)
{
	memset(fq, 0, sizeof(*fq));
	fq->cap = cap;
	fq->q = util_xcalloc(cap, sizeof(*fq->q));
}

void feed_queue_gap(struct feed_queue *fq, int64_t from, int64_t to, const char *why)
{
	struct feed_gap *g = fq->ngaps ? &fq->gaps[fq->ngaps - 1] : NULL;

	if (g && (g->to + 1 == from || fq->ngaps == FEED_GAPS) &&
	    (strcmp(g->why, why) == 0 || fq->ngaps == FEED_GAPS)) {
		if (to > g->to)
			g->to = to;
		return;
	}
	g = &fq->gaps[fq->ngaps++];
	g->from = from;
	g->to = to;
	snprintf(g->why, sizeof(g->why), "%s", why);
}

void feed_queue_take(struct feed_queue *fq, int64_t seq, const char *line, size_t n)
{
	if (seq > fq->next_seq)
		feed_queue_gap(fq, fq->next_seq, seq - 1,
			       "the key holder's channel to the feed was full");
	if (seq >= fq->next_seq)
		fq->next_seq = seq + 1;
	if (fq->n == fq->cap || fq->bytes + n > FEED_QUEUE_BYTES) {
		char why[160];

		snprintf(why, sizeof(why), "the feed's queue (%zu lines) was "
			 "full: the collector was down or slow", fq->cap);
		feed_queue_gap(fq, seq, seq, why);
	} else {
		struct feed_rec *r = &fq->q[(fq->head + fq->n) % fq->cap];

		r->seq = seq;
		r->line = util_xstrndup(line, n);
		r->len = n;
		fq->n++;
		fq->bytes += n;
	}
}

void feed_queue_drop(struct feed_queue *fq, size_t k)
{
	while (k-- > 0 && fq->n) {
		struct feed_rec *r = &fq->q[fq->head];

		fq->bytes -= r->len;
		free(r->line);
		r->line = NULL;
		fq->head = (fq->head + 1) % fq->cap;
		fq->n--;
	}
}

void feed_queue_free(struct feed_queue *fq)
{
	feed_queue_drop(fq, fq->n);
	free(fq->q);
	fq->q = NULL;
}

/* The seq of a line the writer wrote: {"v":1,"seq":N,... */
static int64_t line_seq(const char *s, size_t len)
{
	static const char pre[] = "{\"v\":1,\"seq\":";
	int64_t v = 0;
	size_t i = sizeof(pre) - 1;

	if (len <= i || memcmp(s, pre, i) != 0 || !util_is_digit(s[i]))
		return -1;
	for (; i < len && util_is_digit(s[i]) && v < INT64_MAX / 10 - 9; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* The reader, for the witness (under mu): the line's leaf, and the note
 * of a checkpoint. */
static void witness_take(struct feed *f, int64_t seq, const char *line, size_t n)
{
	static const char cp[] = ",\"type\":\"" RECEIPT_CHECKPOINT_TYPE "\",";
	merkle_hash leaf;
	json_t *obj, *note;

	if ((uint64_t)seq != f->tree.size) {
		f->tree_broken = true;
		return;
	}
	merkle_leaf_hash(line, n, leaf);
	merkle_store_append(&f->tree, leaf);
	if (!memmem(line, n, cp, sizeof(cp) - 1))
		return;
	obj = json_loadb(line, n, 0, NULL);
	note = json_object_get(json_object_get(obj, "subject"), "note");
	if (json_is_string(note)) {
		free(f->cp_note);
		f->cp_note = util_xstrdup(json_string_value(note));
		f->cp_size = (uint64_t)seq; /* the lines before it */
	}
	json_decref(obj);
}

/* The reader: the lines of one message of the channel into the queue. */
static void take_lines(struct feed *f, const char *buf, size_t len)
{
	pthread_mutex_lock(&f->mu);
	while (len) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len;
		int64_t seq = line_seq(buf, n);

		if (seq >= 0 && f->wurl)
			witness_take(f, seq, buf, n);
		if (seq >= 0 && f->spec)
			feed_queue_take(&f->fq, seq, buf, n);
		buf += n + (nl ? 1 : 0);
		len -= n + (nl ? 1 : 0);
	}
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* The reader: the oldest lost range to the key holder once the queue has
 * room again (a range still growing waits). */
static void report_gaps(struct feed *f)
{
	struct msg m = { 0 };

	for (;;) {
		struct feed_gap g;

		pthread_mutex_lock(&f->mu);
		if (!f->fq.ngaps || f->fq.n == f->fq.cap) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		g = f->fq.gaps[0];
		pthread_mutex_unlock(&f->mu);
		msg_start(&m, MSG_FEED_GAP);
		msg_put_u64(&m, (uint64_t)g.from);
		msg_put_u64(&m, (uint64_t)g.to);
		msg_put_cstr(&m, g.why);
		if (msg_send(f->chan, &m, -1, MSG_DONTWAIT) < 0)
			break; /* the next round */
		pthread_mutex_lock(&f->mu);
		memmove(&f->fq.gaps[0], &f->fq.gaps[1], (f->fq.ngaps - 1) * sizeof(f->fq.gaps[0]));
		f->fq.ngaps--;
		pthread_mutex_unlock(&f->mu);
	}
	msg_free(&m);
}

static void add_attr(json_t *attrs, const char *key, const char *kind, json_t *v)
{
	json_array_append_new(attrs, json_pack("{s:s, s:{s:o}}", "key", key, "value", kind, v));
}

static json_t *str_i64(int64_t v)
{
	char s[32];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

/* The OTLP log records of one line (appended to @out). */
static void records_of(struct feed *f, const struct feed_rec *r, json_t *out, char *session,
		       size_t slen, uint64_t now_ns)
{
	struct events_line ln;
	json_t *obj = events_line_parse(&ln, r->line, r->len), *evs, *ev;
	size_t i;

	if (!obj)
		return;
	if (ln.seq == 0 || receipt_type_opens_stream(ln.type))
		memset(&f->es, 0, sizeof(f->es));
	if (!session[0])
		snprintf(session, slen, "%s", ln.session_id);
	evs = export_ocsf_events(&ln, &f->es, f->events);
	json_array_foreach(evs, i, ev) {
		bool warn = ln.decision == RECEIPT_BLOCK || ln.decision == RECEIPT_WOULD_BLOCK;
		char *body = json_dumps(ev, JSON_COMPACT);
		json_t *attrs = json_array(), *lr;

		ASSERT(body && attrs);
		add_attr(attrs, "airlock.seq", "intValue", str_i64(ln.seq));
		add_attr(attrs, "airlock.line_sha256", "stringValue", json_string(ln.sha256));
		add_attr(attrs, "airlock.type", "stringValue", json_string(ln.type));
		add_attr(attrs, "ocsf.class_uid", "intValue",
			 str_i64(json_integer_value(json_object_get(ev, "class_uid"))));
		lr = json_pack("{s:o, s:o, s:i, s:s, s:{s:s}, s:o}",
			       "timeUnixNano", str_i64(ln.ts_ms >= 0 ? ln.ts_ms * 1000000 : 0),
			       "observedTimeUnixNano", str_i64((int64_t)now_ns),
			       "severityNumber", warn ? 13 : 9, "severityText",
			       warn ? "WARN" : "INFO", "body", "stringValue", body,
			       "attributes", attrs);
		ASSERT(lr);
		json_array_append_new(out, lr);
		free(body);
	}
	json_decref(evs);
	json_decref(obj);
}

/* The OTLP/HTTP JSON request of @k records from the head. */
static char *batch_body(struct feed *f, size_t k, size_t *len)
{
	json_t *recs = json_array(), *req;
	char session[256] = "", *s;
	struct timespec ts;
	size_t i;

	clock_gettime(CLOCK_REALTIME, &ts);
	for (i = 0; i < k; i++)
		records_of(f, &f->fq.q[(f->fq.head + i) % f->fq.cap], recs, session, sizeof(session),
			   (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	req = json_pack("{s:[{s:{s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]},"
			" s:[{s:{s:s, s:s}, s:o}]}]}",
			"resourceLogs", "resource", "attributes",
			"key", "service.name", "value", "stringValue", "airlock",
			"key", "airlock.session", "value", "stringValue", session,
			"scopeLogs", "scope", "name", "airlock", "version", AIRLOCK_VERSION,
			"logRecords", recs);
	ASSERT(req);
	s = json_dumps(req, JSON_COMPACT);
	ASSERT(s);
	json_decref(req);
	*len = strlen(s);
	return s;
}

/* One POST. Returns the HTTP status, or -1 with a reason in @err (no
 * connection, no answer). */
static int post(const struct feed_url *u, const char *body, size_t len, char *err,
		size_t errlen)
{
	char head[1024], resp[1024];
	size_t have = 0;
	ssize_t n;
	int fd, status = -1;

	fd = util_tcp_connect(u->host, u->port, FEED_TIMEOUT_S, err, errlen);
	if (fd < 0)
		return -1;
	snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s%s%s:%s\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n", u->path, strchr(u->host, ':') ? "[" : "",
		 u->host, strchr(u->host, ':') ? "]" : "", u->port, len);
	if (util_write_all(fd, head, strlen(head)) < 0 || util_write_all(fd, body, len) < 0) {
		snprintf(err, errlen, "%s:%s: %s", u->host, u->port, strerror(errno));
		goto out;
	}
	while (have < sizeof(resp) - 1 && (n = read(fd, resp + have, sizeof(resp) - 1 - have)) > 0) {
		have += (size_t)n;
		if (memchr(resp, '\n', have))
			break;
	}
	resp[have] = '\0';
	if (have > 12 && strncmp(resp, "HTTP/1.", 7) == 0 && resp[8] == ' ' &&
	    util_is_digit(resp[9]) && util_is_digit(resp[10]) && util_is_digit(resp[11]))
		status = (resp[9] - '0') * 100 + (resp[10] - '0') * 10 + (resp[11] - '0');
	else
		snprintf(err, errlen, "%s:%s: %s", u->host, u->port,
			 have ? "not an HTTP answer" : "no answer");
out:
	close(fd);
	return status;
}

/* The sender thread. */
static void *sender(void *arg)
{
	struct feed *f = arg;
	unsigned backoff = 0;
	char err[1024], why[320];

	for (;;) {
		size_t k, bytes = 0;
		char *body;
		size_t blen;
		int status;

		pthread_mutex_lock(&f->mu);
		while (!f->fq.n && !f->closing)
			pthread_cond_wait(&f->cv, &f->mu);
		if (!f->fq.n || (f->closing && util_now_ms() >= f->drain_until)) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		for (k = 0; k < f->fq.n && k < FEED_BATCH && bytes < FEED_BATCH_BYTES; k++)
			bytes += f->fq.q[(f->fq.head + k) % f->fq.cap].len;
		pthread_mutex_unlock(&f->mu);

		body = batch_body(f, k, &blen);
		status = post(&f->u, body, blen, err, sizeof(err));
		free(body);
		if (status < 0 || (status >= 500) || status == 408 || status == 429) {
			uint64_t now = util_now_ms();
			struct timespec ts;

			if (!backoff) { /* once an outage */
				if (status >= 0)
					snprintf(err, sizeof(err), "the collector answered %d", status);
				util_warn("--events %s: %s; retrying (the local stream is whole)",
					  f->spec, err);
			}

			backoff = backoff ? backoff * 2 : FEED_BACKOFF_MIN;
			if (backoff > FEED_BACKOFF_MAX)
				backoff = FEED_BACKOFF_MAX;
			if (f->closing && now + backoff > f->drain_until)
				backoff = f->drain_until > now ? (unsigned)(f->drain_until - now) : 0;
			ts.tv_sec = backoff / 1000;
			ts.tv_nsec = (long)(backoff % 1000) * 1000000;
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			continue;
		}
		backoff = 0;
		pthread_mutex_lock(&f->mu);
		if (status < 200 || status > 299) {
			snprintf(why, sizeof(why), "the collector refused a batch with %d", status);
			feed_queue_gap(&f->fq, f->fq.q[f->fq.head].seq, f->fq.q[(f->fq.head + k - 1) % f->fq.cap].seq, why);
		} else {
			f->delivered += k;
		}
		feed_queue_drop(&f->fq, k);
		pthread_mutex_unlock(&f->mu);
	}
	return NULL;
}

/* One cosignature request for the last checkpoint seen (under mu on
 * entry and exit; not held while asking). Returns whether the witness
 * cosigned it. */
static bool cosign_once(struct feed *f)
{
	merkle_hash proof[MERKLE_PROOF_MAX];
	uint64_t size = f->cp_size, old = f->cosigned, has = UINT64_MAX;
	char *note = util_xstrdup(f->cp_note), *lines, err[512];
	int np = f->tree_broken && old ? -1 : merkle_store_consistency(&f->tree, old, size, proof);

	if (np < 0) {
		util_warn("--witness %s: lines did not reach the cosigner: no consistency "
			  "proof from size %llu", f->wurl, (unsigned long long)old);
		free(note);
		return false;
	}
	pthread_mutex_unlock(&f->mu);
	lines = witness_cosign_from(f->wurl, f->wkey, old, proof, (size_t)np, note, &has,
				    err, sizeof(err));
	free(note);
	pthread_mutex_lock(&f->mu);
	if (lines) {
		free(f->cosig);
		f->cosig = lines;
		f->cosigned = size;
		return true;
	}
	if (has != UINT64_MAX && has <= f->tree.size && has != old)
		f->cosigned = has; /* the witness has another size: prove from it */
	else if (f->final)
		util_warn("--witness %s", err);
	return false;
}

/* The cosigner thread: the witness cosigns the checkpoints as they come
 * (at most one request each FEED_WITNESS_EVERY_MS), each cosignature
 * going to the key holder for the stream (MSG_WITNESS_COSIGNED), and the
 * last one when the key holder asks, answered on the channel. */
static void *cosigner(void *arg)
{
	struct feed *f = arg;
	uint64_t next = 0;
	struct msg m = { 0 };

	pthread_mutex_lock(&f->mu);
	for (;;) {
		uint64_t now = util_now_ms();

		if (f->final) {
			uint64_t before = f->cosigned;

			if (f->cp_size && f->cosigned != f->cp_size && !cosign_once(f) &&
			    f->cosigned != before)
				(void)cosign_once(f); /* once more, from the size it has */
			msg_start(&m, MSG_WITNESS_COSIG);
			msg_put_cstr(&m, f->cp_size && f->cosigned == f->cp_size && f->cosig
						 ? f->cosig : "");
			(void)msg_send(f->chan, &m, -1, 0);
			msg_free(&m);
			break;
		}
		if (f->closing)
			break;
		if (f->cp_size > f->cosigned && now >= next) {
			next = now + FEED_WITNESS_EVERY_MS;
			if (cosign_once(f)) {
				/* into the stream, as receipt.cosignature */
				msg_start(&m, MSG_WITNESS_COSIGNED);
				msg_put_u64(&m, f->cosigned);
				msg_put_cstr(&m, f->cosig);
				(void)msg_send(f->chan, &m, -1, MSG_DONTWAIT);
				msg_free(&m);
			}
			continue;
		}
		pthread_mutex_unlock(&f->mu);
		(void)poll(NULL, 0, 100);
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* What could not be sent once the stream had ended: said, since no line
 * can record it any more. */
static void say_lost(struct feed *f)
{
	int64_t from = -1, to = -1;
	size_t i;

	for (i = 0; i < f->fq.ngaps; i++) {
		if (from < 0 || f->fq.gaps[i].from < from)
			from = f->fq.gaps[i].from;
		if (f->fq.gaps[i].to > to)
			to = f->fq.gaps[i].to;
	}
	for (i = 0; i < f->fq.n; i++) {
		int64_t s = f->fq.q[(f->fq.head + i) % f->fq.cap].seq;

		if (from < 0 || s < from)
			from = s;
		if (s > to)
			to = s;
	}
	if (from >= 0)
		util_warn("--events %s: lines of seq %lld to %lld did not reach the feed "
			  "after the session ended (the local stream has them)", f->spec,
			  (long long)from, (long long)to);
}

__attribute__((noreturn)) static void feed_main(struct feed *f)
{
	char *buf = util_xmalloc(FEED_MSG_MAX);
	pthread_t t = 0, w = 0;
	bool eof = false;
	char err[512];

	(void)prctl(PR_SET_NAME, "airlock-feed", 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	/* The collector's and the witness's addresses now: once confined,
	 * this process opens no file (the resolver's included). A name that
	 * does not resolve now is said; its sends fail, and what they lose
	 * is recorded as receipt.gap. */
	if (f->spec && util_tcp_pin(f->u.host, f->u.port, err, sizeof(err)) < 0)
		util_warn("--events %s: %s", f->spec, err);
	if (f->wurl && witness_url_pin(f->wurl, err, sizeof(err)) < 0)
		util_warn("--witness %s: %s", f->wurl, err);
	/* before its threads: the filter and Landlock are the calling
	 * thread's, which the threads it starts inherit */
	if (confine_self(CONFINE_FEED, NULL, 0, err, sizeof(err)) < 0) {
		util_warn("airlock-feed: %s", err);
		_exit(EXIT_FAILURE);
	}
	if ((f->spec && pthread_create(&t, NULL, sender, f) != 0) ||
	    (f->wurl && pthread_create(&w, NULL, cosigner, f) != 0)) {
		util_warn("airlock-feed: cannot start a thread");
		_exit(EXIT_FAILURE);
	}
	while (!eof) {
		struct pollfd p = { f->chan, POLLIN, 0 };

		/* a range waiting for room is looked at again soon */
		if (poll(&p, 1, f->fq.ngaps ? 100 : -1) < 0 && errno != EINTR)
			break;
		for (;;) {
			ssize_t n = recv(f->chan, buf, FEED_MSG_MAX, MSG_DONTWAIT);
			if (n > 0 && buf[0] == '{') {
				take_lines(f, buf, (size_t)n);
				continue;
			}
			if (n > 0) { /* a message of the key holder's: the last note */
				struct msg_reader r;

				if (msg_reader_init(&r, MSG_CHAN_WITNESS, buf, (size_t)n) &&
				    r.type == MSG_WITNESS_NOTE && f->wurl) {
					pthread_mutex_lock(&f->mu);
					f->final = true;
					pthread_cond_broadcast(&f->cv);
					pthread_mutex_unlock(&f->mu);
				}
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				eof = true;
			break;
		}
		report_gaps(f);
	}
	pthread_mutex_lock(&f->mu);
	f->closing = true;
	f->drain_until = util_now_ms() + FEED_DRAIN_MS;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	if (f->wurl)
		pthread_join(w, NULL);
	if (f->spec) {
		pthread_join(t, NULL);
		say_lost(f);
	}
	_exit(0);
}

/* The feed process keeps only its channel @chan and stderr. It may
 * outlive the session by FEED_DRAIN_MS: not on the caller's standard
 * input and output (a pipe someone waits on). */
static void child_fds(int chan)
{
	int null_fd;

	if (chan > STDERR_FILENO + 1)
		(void)close_range(STDERR_FILENO + 1, (unsigned)chan - 1, 0);
	(void)close_range((unsigned)chan + 1, ~0U, 0);
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd >= 0) {
		(void)dup2(null_fd, STDIN_FILENO);
		(void)dup2(null_fd, STDOUT_FILENO);
		if (null_fd > STDERR_FILENO)
			close(null_fd);
	}
}

int feed_start(const struct feed_config *cfg, char *err, size_t errlen)
{
	int sv[2], size = FEED_CHANNEL_BUF, fl;
	struct feed *f;
	pid_t pid;

	f = util_xcalloc(1, sizeof(*f));
	if (cfg->spec && feed_url_parse(cfg->spec, &f->u, err, errlen) < 0) {
		free(f);
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "the feed's channel: %s", strerror(errno));
		free(f);
		return -1;
	}
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "the feed: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		free(f);
		return -1;
	}
	if (pid == 0) {
		child_fds(sv[1]);
		f->chan = sv[1];
		f->spec = cfg->spec;
		f->events = cfg->events;
		f->wurl = cfg->witness_url;
		f->wkey = cfg->witness_key;
		merkle_store_init(&f->tree);
		feed_queue_init(&f->fq, cfg->queue ? cfg->queue : FEED_QUEUE_DEFAULT);
		pthread_mutex_init(&f->mu, NULL);
		pthread_cond_init(&f->cv, NULL);
		feed_main(f);
	}
	free(f);
	close(sv[1]);
	fl = fcntl(sv[0], F_GETFL);
	if (fl < 0 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "the feed's channel: %s", strerror(errno));
		close(sv[0]);
		return -1;
	}
	return sv[0];
}
