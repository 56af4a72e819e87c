/* SPDX-License-Identifier: Apache-2.0
 * keeper.c - the key holder (see keeper.h).
 *
 * DOC: Theory of Operation
 *
 * A session's trust domains are processes, as in OpenBSD's relayd and
 * smtpd. The proxy workers parse the agent's HTTP and TLS, so they are
 * where an attacker gets in; they must hold nothing worth stealing. The
 * key holder holds the signing key (later the session CA's key and a
 * GitHub App key too) and does nothing but answer narrow requests, each
 * checked field by field: "record this receipt line" (later: "a leaf for
 * this bound host", "a token"). It also owns the receipt writer, so every
 * line of a session is built, chained, signed and written in this one
 * process: the chain has one writer, whatever the number of workers.
 *
 * Lineage. The supervisor forks the key holder before it reads any secret
 * and never reads the key file itself: the key is loaded here, after the
 * fork, so no process forked or cloned from the supervisor (the workers,
 * the sandbox's init) ever held it, not even as a copy-on-write page. The
 * key holder wipes the environment it inherited (the supervisor's may
 * hold secret values), closes every descriptor but its channel, the
 * standard ones and the stream's, and, once its stream is open, confines
 * itself: no capabilities, no file may be opened, no socket created,
 * nothing executed (confine.c).
 *
 * Channels. Each peer has a SOCK_SEQPACKET channel of its own: the
 * supervisor's, made at the fork, and one per proxy worker, made by the
 * supervisor and handed over with MSG_ADD_CHANNEL. A channel is bound to
 * its peer's kind, so what a message may ask depends on the channel it
 * came on, never on what it says. Requests are a table, one entry per
 * message type with the peers that may send it; a later request (a leaf,
 * a token) is one more entry.
 *
 * Checking. Every message goes through msg.c's bounded readers and
 * keeper_parse_record(); nothing from a channel is ASSERTed, since the
 * writer's ASSERTs are for our own bugs, not for a peer's lies. A bad
 * request from a worker is that worker's fault: its channel is closed and
 * the reason logged, and the worker, unable to record, stops (the
 * supervisor then ends the session). A bad request from the supervisor is
 * a bug: the key holder says so and exits.
 *
 * Order. Requests of one channel are handled in the order they were sent.
 * Before the stream has begun only the supervisor is read, and the
 * supervisor's channel is always drained before any worker's, so what the
 * supervisor recorded before starting the workers (session.start,
 * env.drop) precedes everything they record. On MSG_END every worker
 * channel is drained (the supervisor sends END once the workers have
 * exited), then session.end is written and synced, and the key holder
 * exits 0. If the supervisor's channel closes without END (it died), the
 * key holder writes what the workers still sent and exits without
 * session.end: nobody can say how the session ended, and `airlock verify`
 * reports the stream truncated, which is the truth. If the stream cannot
 * be written, it sends MSG_FATAL with the
 * reason and exits 125: a session that cannot be recorded must not go on.
 *
 * Answers. A RECORD asks for its seq only when the seq goes into an
 * answer to the agent (X-Airlock-Receipt): the key holder then answers on
 * the same channel, without blocking (a peer that does not read its
 * answers loses its channel). Other records are sent and forgotten, so a
 * worker never waits for a signature it does not need.
 *
 * Batches. A worker's link gathers the records that want no seq into one
 * MSG_RECORD_BATCH, sent once a turn of its event loop, or in checkpoint
 * mode once its first record has waited hold_ms across turns
 * (keeper_link_turn()), and before any other request of that link, so a
 * channel's order holds: the key holder's cost was per message (a
 * recvmsg, a wake-up). A batch's framing
 * is checked whole before any of it is written; its records are then
 * checked and written one by one as single requests are, and the first
 * refused one drops the channel. A subject that is already the JSON the
 * line would carry (receipt_json_canonical()) is copied into the line,
 * not parsed and printed again. write_record() is where every requested
 * line is written.
 */
#include "keeper.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "confine.h"
#include "feed.h"
#include "ghapp.h"
#include "hostname.h"
#include "intercept.h"
#include "receipt_line.h"
#include "tls_ca.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Channels, the supervisor's included: more are refused (each is a
 * descriptor; workers are at most WORKER_MAX). */
#define KEEPER_CHANNELS_MAX 1024
/* Messages read from one worker channel before looking at the others. */
#define KEEPER_BATCH 64
/* The longest a line kept in memory (checkpoint mode) waits for its
 * write() when no seq is asked for: one write for the lines of many
 * wake-ups. */
#define KEEPER_WRITE_MS 5

static const char *const peer_names[] = {
	[KEEPER_PEER_SUPERVISOR] = "supervisor",
	[KEEPER_PEER_WORKER] = "proxy worker",
	[KEEPER_PEER_FEED] = "live feed",
};
static_assert(ARRAY_SIZE(peer_names) == KEEPER_PEER_COUNT,
	      "peer_names matches enum keeper_peer");

const char *keeper_peer_to_string(enum keeper_peer p)
{
	ASSERT((unsigned)p < KEEPER_PEER_COUNT);
	return peer_names[p];
}

/* --- checking requests ----------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static bool
refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return false;
}

/* The points a worker may record at: what the proxy itself observes. */
static bool worker_point(enum receipt_point p)
{
	switch (p) {
	case RECEIPT_POINT_EGRESS_PROXY:
	case RECEIPT_POINT_BROKER:
	case RECEIPT_POINT_GIT:
		return true;
	case RECEIPT_POINT_SUPERVISOR:
	case RECEIPT_POINT_SANDBOX:
	case RECEIPT_POINT_COUNT:
		break;
	}
	return false;
}

/* One record's fields as they came, their framing checked only. */
struct record_fields {
	uint32_t flags, decision, point;
	const char *type, *rule, *subject, *reason;
	size_t type_len, subject_len;
};

/* Reads one record's fields (MSG_RECORD's, and each of a
 * MSG_RECORD_BATCH's): false, with r->error, when they are not there. */
static bool read_record(struct msg_reader *r, struct record_fields *f)
{
	memset(f, 0, sizeof(*f));
	msg_get_u32(r, &f->flags);
	msg_get_str(r, RECEIPT_TYPE_MAX, &f->type, &f->type_len);
	msg_get_u32(r, &f->decision);
	msg_get_u32(r, &f->point);
	msg_get_str(r, KEEPER_TEXT_MAX, &f->rule, NULL);
	msg_get_str(r, KEEPER_SUBJECT_MAX, &f->subject, &f->subject_len);
	msg_get_str(r, KEEPER_TEXT_MAX, &f->reason, NULL);
	return !r->error;
}

/* Checks one record's fields for what @peer may ask. With @lazy, a
 * subject that is canonical JSON (receipt_json_canonical()) is not
 * parsed: out->subject stays NULL and out->subject_text holds it. */
static bool check_record(const struct record_fields *f, enum keeper_peer peer,
			 bool lazy, struct keeper_record_req *out, char *why,
			 size_t whylen)
{
	json_error_t jerr;
	json_t *obj;

	memset(out, 0, sizeof(*out));
	if (f->flags & ~MSG_RECORD_WANT_SEQ)
		return refuse(why, whylen, "unknown record flags 0x%x", f->flags);
	if (!receipt_type_valid(f->type, f->type_len))
		return refuse(why, whylen, "receipt type is not 1-%d characters of "
			      "[a-z0-9._-]", RECEIPT_TYPE_MAX);
	if (f->decision >= RECEIPT_DECISION_COUNT)
		return refuse(why, whylen, "unknown decision %u", f->decision);
	if (f->point >= RECEIPT_POINT_COUNT)
		return refuse(why, whylen, "unknown enforcement point %u", f->point);
	if (strcmp(f->type, "session.end") == 0)
		return refuse(why, whylen, "session.end is written by ending the session");
	if (peer == KEEPER_PEER_WORKER) {
		if (receipt_type_opens_stream(f->type) ||
		    strcmp(f->type, "policy.reload") == 0)
			return refuse(why, whylen, "a proxy worker may not record %s", f->type);
		if (!worker_point((enum receipt_point)f->point))
			return refuse(why, whylen, "a proxy worker may not record at point %s",
				      receipt_point_to_string((enum receipt_point)f->point));
	}
	out->want_seq = f->flags & MSG_RECORD_WANT_SEQ;
	out->type = f->type;
	out->decision = (enum receipt_decision)f->decision;
	out->point = (enum receipt_point)f->point;
	out->rule = f->rule;
	out->reason = f->reason;
	if (lazy && f->subject_len == 0) {
		out->subject_text = "{}";
		out->subject_len = 2;
		return true;
	}
	if (lazy && receipt_json_canonical(f->subject, f->subject_len)) {
		out->subject_text = f->subject;
		out->subject_len = f->subject_len;
		return true;
	}
	if (f->subject_len == 0) {
		obj = json_object();
		ASSERT(obj);
	} else {
		obj = json_loadb(f->subject, f->subject_len, JSON_REJECT_DUPLICATES, &jerr);
		if (!obj)
			return refuse(why, whylen, "subject is not JSON: %s", jerr.text);
		if (!json_is_object(obj)) {
			json_decref(obj);
			return refuse(why, whylen, "subject is not a JSON object");
		}
	}
	out->subject = obj;
	return true;
}

bool keeper_parse_record(struct msg_reader *r, enum keeper_peer peer,
			 struct keeper_record_req *out, char *why, size_t whylen)
{
	struct record_fields f;

	memset(out, 0, sizeof(*out));
	if (r->type != MSG_RECORD)
		return refuse(why, whylen, "not a record request");
	read_record(r, &f);
	if (!msg_end(r))
		return refuse(why, whylen, "malformed record request: %s", r->error);
	return check_record(&f, peer, false, out, why, whylen);
}

int keeper_parse_batch(struct msg_reader *r, char *why, size_t whylen)
{
	struct msg_reader pre = *r;
	struct record_fields f;
	int n = 0;

	if (r->type != MSG_RECORD_BATCH) {
		refuse(why, whylen, "not a record batch");
		return -1;
	}
	while (pre.off < pre.len && n < KEEPER_BATCH_RECORDS && read_record(&pre, &f)) {
		if (f.flags) {
			refuse(why, whylen, "a batched record has flags 0x%x (one that "
			       "wants its seq is sent alone)", f.flags);
			return -1;
		}
		n++;
	}
	if (n == KEEPER_BATCH_RECORDS && pre.off < pre.len) {
		refuse(why, whylen, "more than %d records in a batch", KEEPER_BATCH_RECORDS);
		return -1;
	}
	if (!msg_end(&pre)) {
		refuse(why, whylen, "malformed record batch: %s", pre.error);
		return -1;
	}
	if (n == 0) {
		refuse(why, whylen, "an empty record batch");
		return -1;
	}
	return n;
}

bool keeper_batch_next(struct msg_reader *r, enum keeper_peer peer, bool lazy,
		       struct keeper_record_req *out, char *why, size_t whylen)
{
	struct record_fields f;

	memset(out, 0, sizeof(*out));
	if (!read_record(r, &f))
		return refuse(why, whylen, "malformed record batch: %s", r->error);
	return check_record(&f, peer, lazy, out, why, whylen);
}

/* --- the key holder's process ---------------------------------------------- */

struct chan {
	int fd;                    /* -1: closed */
	enum keeper_peer peer;
};

struct kstate {
	struct receipt_writer *w;
	const char *events;
	char pubkey[RECEIPT_PUBKEY_B64_LEN + 1];
	bool started;              /* session.start (or refused) is written */
	struct chan *chans;        /* [0]: the supervisor; KEEPER_CHANNELS_MAX,
				      never moved (handlers hold pointers) */
	size_t nchans;
	uint8_t *in;               /* MSG_MAX: the message being handled */
	struct msg reply;
	int end_status;            /* session.end's exit status */
	bool orphaned;             /* the supervisor's channel closed without END */
	EVP_PKEY *app_key;         /* git.github_app's key, or NULL */
	const char *app_id;
	char app_key_err[1024];    /* why it could not be loaded, or "" */
	char app_key_warn[PATH_MAX + 64]; /* a warning about its file, or "" */
	struct tls_ca *ca;         /* the session CA, or NULL */
	const struct policy *ca_policy; /* what a leaf may be issued for */
	bool sign_checkpoint;      /* receipts.sign "checkpoint" */
	int64_t checkpoint_ms;
	int64_t checkpoint_due;    /* monotonic ms by which the unsigned lines
				      get their checkpoint; 0: none pending */
	int64_t write_due;         /* monotonic ms by which the lines kept in
				      memory are written; 0: none kept */
	bool witness;              /* run --witness: ask the feed process for a
				      cosignature of the last checkpoint */
	struct chan *feed;         /* the live feed's channel, or NULL */
};

/* What a handler says about the request it was given (not verdict.h's
 * verdicts, which are the proxy's answers to requests). */
enum handled {
	HANDLED_OK = 0,            /* handled; go on */
	HANDLED_BAD,               /* invalid: drop the channel (or die) */
	HANDLED_END,               /* MSG_END: finish the session */
};

/* Last words to the supervisor, then exit 125. */
static void write_failed(struct kstate *ks)
{
	child_fatal("--events %s: cannot write a receipt: %s", ks->events,
		     strerror(receipt_error(ks->w)));
}

/* Checkpoint mode: signs the lines written unsigned so far. */
static void checkpoint_now(struct kstate *ks)
{
	if (!ks->sign_checkpoint || !receipt_unsigned_pending(ks->w))
		return;
	if (receipt_checkpoint(ks->w) < 0)
		write_failed(ks);
	ks->checkpoint_due = 0;
}

/* After requests were handled: lines kept in memory (checkpoint mode)
 * are written within KEEPER_WRITE_MS of the first of them, so that a
 * busy key holder writes once for many wake-ups; unsigned lines get a
 * deadline, the first time they are seen, and a checkpoint once it has
 * passed. Returns the poll timeout until the next of these (-1: none). */
static int checkpoint_timer(struct kstate *ks)
{
	int64_t now, wait = -1;

	if (!ks->started)
		return -1;
	now = (int64_t)util_now_ms();
	if (!receipt_unflushed(ks->w)) {
		ks->write_due = 0;
	} else {
		if (!ks->write_due)
			ks->write_due = now + KEEPER_WRITE_MS;
		if (now >= ks->write_due) {
			if (receipt_flush(ks->w) < 0)
				write_failed(ks);
			ks->write_due = 0;
		} else {
			wait = ks->write_due - now;
		}
	}
	if (!ks->sign_checkpoint || !receipt_unsigned_pending(ks->w)) {
		ks->checkpoint_due = 0;
		return (int)wait;
	}
	if (!ks->checkpoint_due)
		ks->checkpoint_due = now + ks->checkpoint_ms;
	if (now >= ks->checkpoint_due) {
		checkpoint_now(ks);
		ks->write_due = 0; /* the signed line wrote the others */
		return -1;
	}
	if (wait < 0 || ks->checkpoint_due - now < wait)
		wait = ks->checkpoint_due - now;
	return (int)wait;
}

/* Writes the line a checked request asks for (and frees its subject):
 * its seq, or -1 when it was too long to be a line. Every line a peer
 * asks for is written here. */
static int64_t write_record(struct kstate *ks, struct keeper_record_req *req)
{
	int64_t seq;

	if (req->subject) {
		seq = receipt_append(ks->w, req->type, req->decision, req->point,
				     req->rule, req->subject, req->reason);
		json_decref(req->subject);
		req->subject = NULL;
	} else {
		seq = receipt_append_canonical(ks->w, req->type, req->decision, req->point,
					       req->rule, req->subject_text,
					       req->subject_len, req->reason);
	}
	if (seq < 0 && receipt_error(ks->w))
		write_failed(ks);
	/* A block is covered at once: the agent may be handed its seq. */
	if (seq >= 0 && req->decision == RECEIPT_BLOCK)
		checkpoint_now(ks);
	if (seq >= 0)
		ks->started = true;
	return seq;
}

static enum handled on_record(struct kstate *ks, struct chan *c,
			      struct msg_reader *r, int fd)
{
	struct keeper_record_req req;
	struct record_fields f;
	char why[256];
	json_t *pub;
	int64_t seq;
	int sr;

	(void)fd;
	read_record(r, &f);
	if (!msg_end(r)) {
		snprintf(why, sizeof(why), "malformed record request: %s", r->error);
		goto refused;
	}
	/* The stream's first line is checked as an object (its pubkey);
	 * the others are taken as canonical text where they are. */
	if (!check_record(&f, c->peer, ks->started, &req, why, sizeof(why)))
		goto refused;
	if (receipt_type_opens_stream(req.type) == ks->started) {
		util_warn("key holder: refused a request of the %s: %s",
			  keeper_peer_to_string(c->peer),
			  ks->started ? "the stream has begun already"
				      : "the stream has not begun");
		json_decref(req.subject);
		return HANDLED_BAD;
	}
	pub = json_object_get(req.subject, "pubkey");
	if (!ks->started && (!json_is_string(pub) ||
			     strcmp(json_string_value(pub), ks->pubkey) != 0)) {
		util_warn("key holder: the stream's first line must carry its pubkey");
		json_decref(req.subject);
		return HANDLED_BAD;
	}
	seq = write_record(ks, &req);
	if (req.want_seq && receipt_flush(ks->w) < 0)
		write_failed(ks);
	if (!req.want_seq)
		return HANDLED_OK;
	msg_start(&ks->reply, MSG_SEQ);
	msg_put_u32(&ks->reply, seq >= 0);
	msg_put_u64(&ks->reply, seq >= 0 ? (uint64_t)seq : 0);
	sr = msg_send(c->fd, &ks->reply, -1, MSG_DONTWAIT);
	if (sr < 0) {
		util_warn("key holder: cannot answer the %s: %s",
			  keeper_peer_to_string(c->peer), strerror(-sr));
		return HANDLED_BAD;
	}
	return HANDLED_OK;
refused:
	util_warn("key holder: refused a request of the %s: %s",
		  keeper_peer_to_string(c->peer), why);
	return HANDLED_BAD;
}

/* Several records a worker sent together, none wanting its seq. The
 * batch's framing is checked whole first: a malformed one writes
 * nothing. Its records are then checked and written in order, as if each
 * had come alone: one refused drops the channel, and those before it
 * stay written. */
static enum handled on_record_batch(struct kstate *ks, struct chan *c,
				    struct msg_reader *r, int fd)
{
	struct keeper_record_req req;
	char why[256];
	int n;

	(void)fd;
	n = keeper_parse_batch(r, why, sizeof(why));
	if (n < 0 || !ks->started) {
		util_warn("key holder: refused a request of the %s: %s",
			  keeper_peer_to_string(c->peer),
			  n < 0 ? why : "the stream has not begun");
		return HANDLED_BAD;
	}
	while (n-- > 0) {
		if (!keeper_batch_next(r, c->peer, true, &req, why, sizeof(why))) {
			util_warn("key holder: refused a request of the %s: %s",
				  keeper_peer_to_string(c->peer), why);
			return HANDLED_BAD;
		}
		(void)write_record(ks, &req);
	}
	return HANDLED_OK;
}

static enum handled on_set_policy(struct kstate *ks, struct chan *c,
				  struct msg_reader *r, int fd)
{
	const char *digest, *subject, *reason;
	size_t dlen, slen;
	json_error_t jerr;
	json_t *obj;

	(void)c;
	(void)fd;
	msg_get_str(r, 128, &digest, &dlen);
	msg_get_str(r, MSG_MAX, &subject, &slen);
	msg_get_str(r, KEEPER_TEXT_MAX, &reason, NULL);
	if (!msg_end(r) || !ks->started || !receipt_digest_valid(digest, dlen))
		return HANDLED_BAD;
	obj = json_loadb(subject, slen, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(obj)) {
		json_decref(obj);
		return HANDLED_BAD;
	}
	ASSERT(receipt_set_policy(ks->w, digest) == 0);
	if (receipt_append(ks->w, "policy.reload", RECEIPT_INFO,
			   RECEIPT_POINT_SUPERVISOR, "policy", obj, reason) < 0 &&
	    receipt_error(ks->w))
		write_failed(ks);
	json_decref(obj);
	return HANDLED_OK;
}

/* The writer's tap: what was written goes to the live feed too, never
 * waiting. A full channel loses the lines to the feed, which sees the
 * jump in seq and reports it (MSG_FEED_GAP). */
static void feed_tap(void *arg, const char *buf, size_t len)
{
	struct kstate *ks = arg;

	if (ks->feed->fd >= 0 && write(ks->feed->fd, buf, len) < 0 && errno != EAGAIN &&
	    errno != EMSGSIZE && errno != ENOBUFS) {
		close(ks->feed->fd); /* the feed is gone */
		ks->feed->fd = -1;
	}
}

/* The feed lost seqs @from..@to (from the key holder's channel, its
 * queue, or the collector's refusal): a receipt.gap line says so. */
static enum handled on_feed_gap(struct kstate *ks, struct chan *c,
				struct msg_reader *r, int fd)
{
	const char *why;
	uint64_t from, to;
	json_t *subject;
	char reason[320];

	(void)c;
	(void)fd;
	msg_get_u64(r, &from);
	msg_get_u64(r, &to);
	msg_get_str(r, 256, &why, NULL);
	if (!msg_end(r) || !ks->started || from > to || to > INT64_MAX)
		return HANDLED_BAD;
	subject = json_pack("{s:I, s:I, s:I, s:s}", "from", (json_int_t)from, "to",
			    (json_int_t)to, "lines", (json_int_t)to - (json_int_t)from + 1, "why",
			    why);
	ASSERT(subject);
	snprintf(reason, sizeof(reason), "the live feed lost seq %llu to %llu: %s",
		 (unsigned long long)from, (unsigned long long)to, why);
	if (receipt_append(ks->w, "receipt.gap", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
			   "feed", subject, reason) < 0 && receipt_error(ks->w))
		write_failed(ks);
	json_decref(subject);
	return HANDLED_OK;
}

/* The witness cosigned the checkpoint of @size lines as the session
 * went: a receipt.cosignature line carries its cosignature, for verify
 * --witness to check against that checkpoint. The feed is believed for
 * nothing: verify checks the line. */
static enum handled on_witness_cosigned(struct kstate *ks, struct chan *c,
					struct msg_reader *r, int fd)
{
	const char *lines, *sp;
	char name[256] = "", reason[320];
	json_t *subject, *arr;
	size_t len;
	uint64_t size;

	(void)c;
	(void)fd;
	msg_get_u64(r, &size);
	msg_get_str(r, 16384, &lines, &len);
	if (!msg_end(r) || !ks->started || size == 0 || size > INT64_MAX || len == 0)
		return HANDLED_BAD;
	/* the first line's name: "— NAME BASE64\n" */
	if (strncmp(lines, "\xe2\x80\x94 ", 4) == 0 && (sp = strchr(lines + 4, ' ')) &&
	    (size_t)(sp - lines - 4) < sizeof(name))
		snprintf(name, sizeof(name), "%.*s", (int)(sp - lines - 4), lines + 4);
	arr = json_array();
	ASSERT(arr);
	for (const char *p = lines; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);

		json_array_append_new(arr, json_stringn(p, n));
		p += n;
	}
	subject = json_pack("{s:I, s:s, s:o}", "size", (json_int_t)size, "witness",
			    receipt_utf8_valid(name) ? name : "", "cosignatures", arr);
	ASSERT(subject);
	snprintf(reason, sizeof(reason), "the witness cosigned the checkpoint of the "
		 "first %llu lines", (unsigned long long)size);
	if (receipt_append(ks->w, RECEIPT_COSIGNATURE_TYPE, RECEIPT_INFO,
			   RECEIPT_POINT_SUPERVISOR, "witness", subject, reason) < 0 &&
	    receipt_error(ks->w))
		write_failed(ks);
	json_decref(subject);
	return HANDLED_OK;
}

static enum handled on_add_channel(struct kstate *ks, struct chan *c,
				   struct msg_reader *r, int fd)
{
	(void)c;
	if (!msg_end(r) || fd < 0 || ks->nchans >= KEEPER_CHANNELS_MAX)
		return HANDLED_BAD;
	ks->chans[ks->nchans].fd = fd;
	ks->chans[ks->nchans].peer = KEEPER_PEER_WORKER;
	ks->nchans++;
	return HANDLED_OK;
}

static enum handled on_end(struct kstate *ks, struct chan *c,
			   struct msg_reader *r, int fd)
{
	uint32_t status;

	(void)c;
	(void)fd;
	msg_get_u32(r, &status);
	if (!msg_end(r) || status > 255)
		return HANDLED_BAD;
	ks->end_status = (int)status;
	return HANDLED_END;
}

/* The App's JWT for the supervisor's mint: the key never leaves this
 * process, the JWT (valid ten minutes) does. */
static enum handled on_jwt_sign(struct kstate *ks, struct chan *c,
				struct msg_reader *r, int fd)
{
	char err[1024] = "";
	char *jwt = NULL;
	int sr;

	(void)fd;
	if (!msg_end(r) || (!ks->app_key && !ks->app_key_err[0]))
		return HANDLED_BAD;
	if (ks->app_key)
		jwt = ghapp_jwt(ks->app_key, ks->app_id, time(NULL), err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", ks->app_key_err);
	msg_start(&ks->reply, MSG_JWT);
	msg_put_cstr(&ks->reply, jwt ? jwt : "");
	msg_put_cstr(&ks->reply, jwt ? "" : err);
	msg_put_cstr(&ks->reply, ks->app_key_warn);
	ks->app_key_warn[0] = '\0'; /* said once */
	sr = msg_send(c->fd, &ks->reply, -1, 0);
	explicit_bzero(ks->reply.buf, ks->reply.len);
	if (jwt) {
		explicit_bzero(jwt, strlen(jwt));
		free(jwt);
	}
	return sr < 0 ? HANDLED_BAD : HANDLED_OK;
}

/* A leaf for a host the policy intercepts. A worker's lie (a host it
 * may not have, a name that is not normalised) is answered with a
 * refusal, not by dropping its channel: the request is well formed, and
 * the worker answers its client 502. */
static enum handled on_leaf(struct kstate *ks, struct chan *c,
			    struct msg_reader *r, int fd)
{
	struct host_target t;
	struct tls_leaf leaf = { 0 };
	char err[256] = "", bracketed[HOSTNAME_MAX + 3];
	const char *host;
	size_t hlen;
	int sr;

	(void)fd;
	msg_get_str(r, HOSTNAME_MAX, &host, &hlen);
	if (!msg_end(r))
		return HANDLED_BAD;
	if (strchr(host, ':'))
		snprintf(bracketed, sizeof(bracketed), "[%s]", host);
	else
		snprintf(bracketed, sizeof(bracketed), "%s", host);
	if (!ks->ca)
		snprintf(err, sizeof(err), "no session CA");
	else if (hostname_normalise(bracketed, strlen(bracketed), &t) != HOSTNAME_OK ||
		 strcmp(t.name, host) != 0)
		snprintf(err, sizeof(err), "not a normalised host name");
	else if (!ks->ca_policy || !intercept_host_named(ks->ca_policy, &t))
		snprintf(err, sizeof(err), "the policy does not intercept %s", host);
	else if (tls_ca_issue(ks->ca, host, &leaf, err, sizeof(err)) < 0 && !err[0])
		snprintf(err, sizeof(err), "the leaf could not be issued");
	msg_start(&ks->reply, MSG_LEAF_ANSWER);
	msg_put_u32(&ks->reply, err[0] ? 0 : 1);
	if (err[0]) {
		msg_put_cstr(&ks->reply, err);
	} else {
		msg_put_str(&ks->reply, leaf.cert_pem, leaf.cert_len);
		msg_put_str(&ks->reply, leaf.key_pem, leaf.key_len);
	}
	sr = msg_send(c->fd, &ks->reply, -1, MSG_DONTWAIT);
	/* the reply held the leaf's key: wipe it */
	explicit_bzero(ks->reply.buf, ks->reply.cap);
	tls_leaf_free(&leaf);
	if (sr < 0) {
		util_warn("key holder: cannot answer the %s: %s",
			  keeper_peer_to_string(c->peer), strerror(-sr));
		return HANDLED_BAD;
	}
	return HANDLED_OK;
}

static enum handled on_ca_cert(struct kstate *ks, struct chan *c,
			       struct msg_reader *r, int fd)
{
	size_t len = 0;
	const char *pem = ks->ca ? tls_ca_cert_pem(ks->ca, &len) : "";

	(void)fd;
	if (!msg_end(r))
		return HANDLED_BAD;
	msg_start(&ks->reply, MSG_CA_CERT_ANSWER);
	msg_put_str(&ks->reply, pem, ks->ca ? len : 0);
	return msg_send(c->fd, &ks->reply, -1, 0) < 0 ? HANDLED_BAD : HANDLED_OK;
}

static enum handled on_spend_usd(struct kstate *ks, struct chan *c,
				 struct msg_reader *r, int fd)
{
	uint64_t nano;

	(void)c;
	(void)fd;
	msg_get_u64(r, &nano);
	if (!msg_end(r) || !ks->started || nano > (uint64_t)INT64_MAX)
		return HANDLED_BAD;
	receipt_set_spend(ks->w, (int64_t)nano);
	return HANDLED_OK;
}

#define PEER_BIT(p) (1u << (p))

/* Every request the key holder answers, and who may ask it. A leaf for a
 * bound host (workers) and an installation token (supervisor) will be one
 * entry each. */
static const struct {
	uint32_t type;
	unsigned peers;
	enum handled (*fn)(struct kstate *ks, struct chan *c,
			   struct msg_reader *r, int fd);
} requests[] = {
	{ MSG_RECORD, PEER_BIT(KEEPER_PEER_SUPERVISOR) | PEER_BIT(KEEPER_PEER_WORKER),
	  on_record },
	{ MSG_RECORD_BATCH, PEER_BIT(KEEPER_PEER_WORKER), on_record_batch },
	{ MSG_SET_POLICY, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_set_policy },
	{ MSG_ADD_CHANNEL, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_add_channel },
	{ MSG_END, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_end },
	{ MSG_JWT_SIGN, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_jwt_sign },
	{ MSG_LEAF, PEER_BIT(KEEPER_PEER_WORKER), on_leaf },
	{ MSG_CA_CERT, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_ca_cert },
	{ MSG_SPEND_USD, PEER_BIT(KEEPER_PEER_SUPERVISOR), on_spend_usd },
	{ MSG_FEED_GAP, PEER_BIT(KEEPER_PEER_FEED), on_feed_gap },
	{ MSG_WITNESS_COSIGNED, PEER_BIT(KEEPER_PEER_FEED), on_witness_cosigned },
};

/* Handles one message of @c: @n bytes in ks->in, maybe with descriptor
 * @fd (owned here). */
static enum handled dispatch(struct kstate *ks, struct chan *c, size_t n, int fd)
{
	enum handled v = HANDLED_BAD;
	struct msg_reader r;
	size_t i;

	if (!msg_reader_init(&r, MSG_CHAN_KEEPER, ks->in, n)) {
		util_warn("key holder: refused a message of the %s: %s",
			  keeper_peer_to_string(c->peer), r.error);
		goto out;
	}
	for (i = 0; i < ARRAY_SIZE(requests); i++)
		if (requests[i].type == r.type)
			break;
	if (i == ARRAY_SIZE(requests) || !(requests[i].peers & PEER_BIT(c->peer))) {
		util_warn("key holder: the %s may not send %s",
			  keeper_peer_to_string(c->peer), msg_type_to_string(r.type));
		goto out;
	}
	v = requests[i].fn(ks, c, &r, fd);
	if (r.type == MSG_ADD_CHANNEL && v == HANDLED_OK)
		fd = -1; /* kept as the new channel */
out:
	if (fd >= 0)
		close(fd);
	return v;
}

static void drop(struct chan *c)
{
	close(c->fd);
	c->fd = -1;
}

/* Handles up to @max messages of @c (0: until none is waiting). Returns
 * HANDLED_END when the session is to end; a worker channel that failed
 * or closed is dropped, a failed supervisor channel is fatal. */
static enum handled serve(struct kstate *ks, struct chan *c, unsigned max)
{
	unsigned done;

	for (done = 0; c->fd >= 0 && (max == 0 || done < max); done++) {
		enum handled v;
		int fd = -1;
		ssize_t n = msg_recv(c->fd, ks->in, MSG_MAX, &fd, MSG_DONTWAIT);

		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			if (c->peer == KEEPER_PEER_SUPERVISOR) {
				ks->orphaned = true; /* it died */
				return HANDLED_END;
			}
			if (n < 0)
				util_warn("key holder: a proxy worker's channel: %s",
					  strerror((int)-n));
			drop(c);
			break;
		}
		v = dispatch(ks, c, (size_t)n, fd);
		if (v == HANDLED_END)
			return v;
		if (v == HANDLED_BAD) {
			if (c->peer == KEEPER_PEER_SUPERVISOR)
				child_fatal("the supervisor sent an invalid request");
			drop(c);
		}
	}
	return HANDLED_OK;
}

/* Reads until the supervisor ends the session or its channel closes. */
static void serve_until_end(struct kstate *ks)
{
	struct pollfd *pfd = util_xcalloc(1, sizeof(*pfd));
	size_t cap = 1, i;

	for (;;) {
		size_t n = ks->started ? ks->nchans : 1;
		int r;

		if (cap < n) {
			cap = n;
			pfd = util_xrealloc(pfd, cap * sizeof(*pfd));
		}
		for (i = 0; i < n; i++) {
			pfd[i].fd = ks->chans[i].fd;
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		r = poll(pfd, n, checkpoint_timer(ks));
		if (r < 0 && errno != EINTR)
			child_fatal("poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		/* The supervisor first, whole: its lines precede what the
		 * workers it started later record. */
		if (pfd[0].revents && serve(ks, &ks->chans[0], 0) == HANDLED_END)
			break;
		for (i = 1; i < n; i++)
			if (pfd[i].revents)
				(void)serve(ks, &ks->chans[i], KEEPER_BATCH);
		(void)checkpoint_timer(ks);
	}
	free(pfd);
}

/* run --witness: the last checkpoint's note goes to the feed process
 * (feed.h), which asks the witness (this process may not open sockets)
 * and answers with the cosignature lines ("" when the witness failed; it
 * said why). What else the feed says meanwhile (a gap) is not recorded:
 * the line before session.end must be the cosigned checkpoint. */
static void ask_witness(struct kstate *ks)
{
	struct msg_reader r;
	const char *lines;
	char *note = receipt_final_checkpoint(ks->w);
	struct pollfd p = { ks->feed->fd, POLLIN, 0 };
	ssize_t n = -1;
	int fd = -1, i;

	if (!note || receipt_flush(ks->w) < 0)
		write_failed(ks);
	msg_start(&ks->reply, MSG_WITNESS_NOTE);
	msg_put_cstr(&ks->reply, note);
	free(note);
	if (p.fd < 0 || msg_send(p.fd, &ks->reply, -1, 0) < 0)
		return;
	/* the witness client's timeouts are 10 s each: a bound, not a wait */
	for (i = 0; i < 100 && poll(&p, 1, 1000) >= 0; i++) {
		n = msg_recv(p.fd, ks->in, MSG_MAX, &fd, MSG_DONTWAIT);
		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN || n == -EINTR)
			continue;
		if (n <= 0 || !msg_reader_init(&r, MSG_CHAN_WITNESS, ks->in, (size_t)n))
			return;
		if (r.type == MSG_WITNESS_COSIG)
			break;
	}
	if (n > 0 && r.type == MSG_WITNESS_COSIG && msg_get_str(&r, 16384, &lines, NULL) &&
	    msg_end(&r))
		receipt_set_cosignatures(ks->w, lines);
}

/* Drains the workers' channels, writes session.end and exits. */
__attribute__((noreturn)) static void finish(struct kstate *ks)
{
	size_t i;

	/* The workers have exited (or been killed): what they sent is all
	 * queued, and comes before session.end. */
	for (i = 1; ks->started && i < ks->nchans; i++)
		(void)serve(ks, &ks->chans[i], 1u << 20);
	if (!ks->started)
		_exit(EXIT_AIRLOCK_FAILURE);
	if (ks->orphaned) {
		/* Nobody can say how the session ended: the stream stays
		 * without session.end, and verify calls it truncated. */
		receipt_abort(ks->w);
		_exit(EXIT_AIRLOCK_FAILURE);
	}
	tls_ca_free(ks->ca);
	ks->ca = NULL;
	if (ks->witness)
		ask_witness(ks);
	if (receipt_close(ks->w, ks->end_status) < 0)
		child_fatal("--events %s: cannot write session.end: %s", ks->events,
			     strerror(errno));
	_exit(0);
}

/* The session CA, before the filter (loading reads files). Its key lives
 * in OpenSSL's secure heap, which needs locked memory. */
static void make_ca(struct kstate *ks, const struct keeper_config *cfg)
{
	const rlim_t want = (rlim_t)256 * 1024;
	struct rlimit rl;
	char err[512];

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want
										  : rl.rlim_max;
		(void)setrlimit(RLIMIT_MEMLOCK, &rl);
	}
	if (cfg->ca_cert && cfg->ca_key)
		ks->ca = tls_ca_load(cfg->ca_cert, cfg->ca_key, err, sizeof(err));
	else
		ks->ca = tls_ca_new(cfg->session,
				    cfg->ca_lifetime ? cfg->ca_lifetime : TLS_CA_LIFETIME,
				    err, sizeof(err));
	if (!ks->ca)
		child_fatal("session CA: %s", err);
	ks->ca_policy = cfg->ca_policy;
}

__attribute__((noreturn)) static void keeper_main(const struct keeper_config *cfg,
						  int sup, int events_fd, pid_t parent)
{
	const int keep[] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, sup, events_fd };
	struct kstate ks;
	struct chan first = { sup, KEEPER_PEER_SUPERVISOR };
	char err[512], ts[25];
	EVP_PKEY *key;

	memset(&ks, 0, sizeof(ks));
	ks.events = cfg->events;
	ks.end_status = EXIT_AIRLOCK_FAILURE; /* unless END says otherwise */
	ks.chans = util_xcalloc(KEEPER_CHANNELS_MAX, sizeof(*ks.chans));
	ks.chans[0] = first;
	ks.nchans = 1;
	ks.in = util_xmalloc(MSG_MAX);
	child_start(&(struct child_spec){ .name = "airlock-keeper", .who = "key holder",
					  .parent = parent, .ctl = sup, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep),
					  .ignore_session_signals = true,
					  /* It writes what it was sent when its
					   * channels close, then exits. */
					  .outlives_parent = true });

	if (cfg->feed_url || cfg->witness_url) {
		/* before the key is loaded: the feed never holds it */
		struct feed_config fc = { cfg->feed_url, cfg->feed_queue, cfg->events,
					  cfg->witness_url, cfg->witness_key };
		int ffd = feed_start(&fc, err, sizeof(err));

		if (ffd < 0)
			child_fatal("%s", err);
		ks.feed = &ks.chans[ks.nchans++];
		*ks.feed = (struct chan){ ffd, KEEPER_PEER_FEED };
	}
	if (cfg->signing_key) {
		key = receipt_key_load(cfg->signing_key, err, sizeof(err));
		if (!key)
			child_fatal("--signing-key %s: %s", cfg->signing_key, err);
	} else {
		key = receipt_key_generate();
		if (!key)
			child_fatal("cannot generate a signing key");
	}
	if (cfg->github_app_key) {
		/* A key that cannot be used is the supervisor's to report, in
		 * its order (a key file the agent could write is refused
		 * first, for what it is): the first JWT request answers why. */
		ks.app_key = ghapp_key_load_quiet(cfg->github_app_key, ks.app_key_warn,
						  sizeof(ks.app_key_warn), err, sizeof(err));
		if (!ks.app_key)
			snprintf(ks.app_key_err, sizeof(ks.app_key_err),
				 "git.github_app.private_key_file %s: %s", cfg->github_app_key,
				 err);
		ks.app_id = cfg->github_app_id;
	}
	if (!receipt_pubkey_b64(key, ks.pubkey, sizeof(ks.pubkey)))
		child_fatal("cannot encode the signing public key");
	ks.w = receipt_open(cfg->events, key, cfg->session, cfg->policy_digest, err,
			    sizeof(err));
	EVP_PKEY_free(key);
	if (!ks.w)
		child_fatal("--events %s: %s", cfg->events, err);
	if (ks.feed)
		receipt_set_tap(ks.w, feed_tap, &ks);
	if (cfg->sign_checkpoint &&
	    receipt_set_sign_mode(ks.w, RECEIPT_SIGN_CHECKPOINT) < 0)
		child_fatal("receipts.sign checkpoint: the session id %s is not "
			     "a note key name (no spaces or '+')", cfg->session);
	ks.sign_checkpoint = cfg->sign_checkpoint;
	ks.witness = cfg->witness_url != NULL;
	ks.checkpoint_ms = cfg->checkpoint_ms ? cfg->checkpoint_ms : 250;
	if (cfg->ca)
		make_ca(&ks, cfg);
	/* gmtime_r loads the time zone once: before the filter, not after. */
	util_rfc3339_now(ts);
	if (confine_self(CONFINE_KEEPER, NULL, 0, err, sizeof(err)) < 0)
		child_fatal("key holder: %s", err);
	msg_start(&ks.reply, MSG_KEEPER_READY);
	msg_put_cstr(&ks.reply, ks.pubkey);
	if (msg_send(sup, &ks.reply, -1, 0) < 0)
		_exit(EXIT_AIRLOCK_FAILURE);
	serve_until_end(&ks);
	finish(&ks);
}

/* --- the supervisor's side ------------------------------------------------- */

int keeper_start(const struct keeper_config *cfg, struct keeper *k, char *err,
		 size_t errlen)
{
	int sv[2], events_fd = -1;
	unsigned long n;
	pid_t pid;

	memset(k, 0, sizeof(*k));
	k->pid = -1;
	k->link.fd = -1;
	/* fd:N must be the caller's descriptor: checked before the socket
	 * pair below could take that number. */
	if (strncmp(cfg->events, "fd:", 3) == 0) {
		if (!util_parse_uint(cfg->events + 3, 0, INT_MAX, &n)) {
			snprintf(err, errlen, "--events %s: fd:N needs a descriptor number",
				 cfg->events);
			return -1;
		}
		events_fd = (int)n;
		if (fcntl(events_fd, F_GETFD) < 0) {
			snprintf(err, errlen, "--events %s: descriptor %d is not open",
				 cfg->events, events_fd);
			return -1;
		}
		/* Our copy too: the command must not inherit the stream. */
		if (events_fd > STDERR_FILENO &&
		    fcntl(events_fd, F_SETFD, FD_CLOEXEC) < 0) {
			snprintf(err, errlen, "--events %s: %s", cfg->events,
				 strerror(errno));
			return -1;
		}
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "key holder: socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "key holder: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		keeper_main(cfg, sv[1], events_fd, getppid());
	}
	close(sv[1]);
	k->pid = pid;
	k->link.fd = sv[0];
	return 0;
}

void keeper_reaped(struct keeper *k, int wstatus)
{
	k->pid = -1;
	k->wstatus = wstatus;
	/* A MSG_FATAL waiting on the supervisor's channel, if any. */
	child_read_last_words(k->link.fd, k->link.fatal, sizeof(k->link.fatal));
}

void keeper_describe_exit(const struct keeper *k, char *out, size_t len)
{
	if (k->link.fatal[0])
		snprintf(out, len, "%s", k->link.fatal);
	else if (WIFSIGNALED(k->wstatus))
		snprintf(out, len, "the key holder was killed by signal %d",
			 WTERMSIG(k->wstatus));
	else
		snprintf(out, len, "the key holder exited with status %d",
			 WEXITSTATUS(k->wstatus));
}

static void reap(struct keeper *k)
{
	int ws = 0;

	while (waitpid(k->pid, &ws, 0) < 0 && errno == EINTR)
		;
	keeper_reaped(k, ws);
}

int keeper_wait_ready(struct keeper *k, char *err, size_t errlen)
{
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg_reader r;
	const char *text;
	ssize_t n;
	int fd, rc = -1;

	n = msg_recv(k->link.fd, buf, MSG_MAX, &fd, 0);
	if (fd >= 0)
		close(fd);
	if (n > 0 && msg_reader_init(&r, MSG_CHAN_KEEPER, buf, (size_t)n) &&
	    msg_get_str(&r, sizeof(k->link.fatal) - 1, &text, NULL) && msg_end(&r)) {
		if (r.type == MSG_KEEPER_READY &&
		    util_strlcpy(k->pubkey, text, sizeof(k->pubkey))) {
			rc = 0;
			goto out;
		}
		if (r.type == MSG_FATAL)
			(void)util_strlcpy(k->link.fatal, text, sizeof(k->link.fatal));
	}
	reap(k);
	keeper_describe_exit(k, err, errlen);
out:
	free(buf);
	return rc;
}

char *keeper_sign_jwt(struct keeper *k, char *err, size_t errlen)
{
	struct msg_reader r;
	const char *jwt = NULL, *why = NULL, *warn = NULL;
	size_t jlen = 0;
	char *out = NULL;
	ssize_t n = -1;
	int fd = -1;

	msg_start(&k->link.out, MSG_JWT_SIGN);
	if (msg_send(k->link.fd, &k->link.out, -1, 0) < 0) {
		snprintf(err, errlen, "the key holder cannot be asked for the App's JWT");
		return NULL;
	}
	if (!k->link.in)
		k->link.in = util_xmalloc(MSG_MAX);
	n = msg_recv(k->link.fd, k->link.in, MSG_MAX, &fd, 0);
	if (fd >= 0)
		close(fd);
	if (n > 0 && msg_reader_init(&r, MSG_CHAN_KEEPER, k->link.in, (size_t)n) && r.type == MSG_JWT &&
	    msg_get_str(&r, MSG_MAX, &jwt, &jlen) && msg_get_str(&r, 1024, &why, NULL) &&
	    msg_get_str(&r, PATH_MAX + 64, &warn, NULL) && msg_end(&r)) {
		if (warn[0])
			util_warn("%s", warn);
		if (jlen)
			out = util_xstrndup(jwt, jlen);
		else
			snprintf(err, errlen, "the App's JWT: %s", why);
	} else {
		snprintf(err, errlen, "the key holder did not sign the App's JWT");
	}
	if (n > 0)
		explicit_bzero(k->link.in, (size_t)n);
	return out;
}

int keeper_new_channel(struct keeper *k, int *worker_end)
{
	struct msg m = { 0 };
	int sv[2], r;

	*worker_end = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	msg_start(&m, MSG_ADD_CHANNEL);
	r = msg_send(k->link.fd, &m, sv[1], 0);
	msg_free(&m);
	close(sv[1]);
	if (r < 0) {
		close(sv[0]);
		return r;
	}
	*worker_end = sv[0];
	return 0;
}

/* @s, or "" for NULL, cut to @max bytes (the key holder refuses longer;
 * the line keeps less anyway). */
static void put_text(struct msg *m, const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	msg_put_str(m, s ? s : "", n < max ? n : max);
}

/* The subject as compact JSON ("" for none); one too large for a request
 * is replaced by a note of its size. */
static void put_subject(struct msg *m, json_t *subject)
{
	char *text;
	size_t n;

	if (!subject) {
		msg_put_cstr(m, "");
		return;
	}
	text = json_dumps(subject, JSON_COMPACT);
	ASSERT(text);
	n = strlen(text);
	if (n > KEEPER_SUBJECT_MAX) {
		free(text);
		text = util_xasprintf("{\"error\":\"subject too large to record\","
				      "\"subject_bytes\":%zu}", n);
	}
	msg_put_cstr(m, text);
	free(text);
}

/* One record's fields, as MSG_RECORD and MSG_RECORD_BATCH carry them. */
static void put_record(struct msg *m, uint32_t flags, const char *type,
		       enum receipt_decision d, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason)
{
	msg_put_u32(m, flags);
	msg_put_cstr(m, type);
	msg_put_u32(m, (uint32_t)d);
	msg_put_u32(m, (uint32_t)point);
	put_text(m, rule, KEEPER_TEXT_MAX);
	put_subject(m, subject);
	put_text(m, reason, KEEPER_TEXT_MAX);
}

int keeper_link_flush(struct keeper_link *l)
{
	int rc;

	if (!l->nbatch)
		return 0;
	rc = msg_send(l->fd, &l->batch, -1, 0);
	l->nbatch = 0;
	return rc;
}

int keeper_link_turn(struct keeper_link *l, int *wait_ms)
{
	uint64_t now;

	*wait_ms = -1;
	if (!l->nbatch)
		return 0;
	if (!l->hold_ms)
		return keeper_link_flush(l);
	now = util_now_ms();
	if (now - l->batch_t0 >= l->hold_ms)
		return keeper_link_flush(l);
	*wait_ms = (int)(l->batch_t0 + l->hold_ms - now);
	return 0;
}

int keeper_record(struct keeper_link *l, bool want_seq, const char *type,
		  enum receipt_decision d, enum receipt_point point,
		  const char *rule, json_t *subject, const char *reason,
		  int64_t *seq)
{
	struct msg_reader r;
	uint32_t written;
	uint64_t v;
	ssize_t n;
	int fd, rc;

	*seq = -1;
	if (l->batching && !want_seq) {
		/* One message for the records of a turn of the worker's
		 * loop: the key holder's cost is per message. */
		if (!l->nbatch) {
			msg_start(&l->batch, MSG_RECORD_BATCH);
			l->batch_t0 = l->hold_ms ? util_now_ms() : 0;
		}
		put_record(&l->batch, 0, type, d, point, rule, subject, reason);
		l->nbatch++;
		if (l->nbatch >= KEEPER_BATCH_RECORDS || l->batch.len >= KEEPER_BATCH_BYTES)
			return keeper_link_flush(l);
		return 0;
	}
	rc = keeper_link_flush(l);
	if (rc < 0)
		return rc;
	msg_start(&l->out, MSG_RECORD);
	put_record(&l->out, want_seq ? MSG_RECORD_WANT_SEQ : 0, type, d, point, rule,
		   subject, reason);
	rc = msg_send(l->fd, &l->out, -1, 0);
	if (rc < 0 || !want_seq)
		return rc;
	if (!l->in)
		l->in = util_xmalloc(MSG_MAX);
	n = msg_recv(l->fd, l->in, MSG_MAX, &fd, 0);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return n == 0 ? -EPIPE : (int)n;
	if (!msg_reader_init(&r, MSG_CHAN_KEEPER, l->in, (size_t)n))
		return -EPROTO;
	if (r.type == MSG_FATAL) {
		/* The key holder stops instead of answering. */
		const char *why;

		if (msg_get_str(&r, sizeof(l->fatal) - 1, &why, NULL) && msg_end(&r))
			(void)util_strlcpy(l->fatal, why, sizeof(l->fatal));
		return -EPIPE;
	}
	if (r.type != MSG_SEQ || !msg_get_u32(&r, &written) || !msg_get_u64(&r, &v) ||
	    !msg_end(&r) || written > 1 || v > INT64_MAX)
		return -EPROTO;
	*seq = written ? (int64_t)v : -1;
	return 0;
}

/* Waits for the answer to a request on @l: the message in l->in, or
 * -errno (the key holder's last words go to l->fatal). */
static int await_answer(struct keeper_link *l, struct msg_reader *r,
			uint32_t want)
{
	ssize_t n;
	int fd;

	if (!l->in)
		l->in = util_xmalloc(MSG_MAX);
	n = msg_recv(l->fd, l->in, MSG_MAX, &fd, 0);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return n == 0 ? -EPIPE : (int)n;
	if (!msg_reader_init(r, MSG_CHAN_KEEPER, l->in, (size_t)n))
		return -EPROTO;
	if (r->type == MSG_FATAL) {
		const char *why;

		if (msg_get_str(r, sizeof(l->fatal) - 1, &why, NULL) && msg_end(r))
			(void)util_strlcpy(l->fatal, why, sizeof(l->fatal));
		return -EPIPE;
	}
	return r->type == want ? 0 : -EPROTO;
}

int keeper_leaf(struct keeper_link *l, const char *host, struct tls_leaf *out,
		char *err, size_t errlen)
{
	struct msg_reader r;
	const char *cert, *key, *why;
	size_t clen, klen;
	uint32_t ok;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = keeper_link_flush(l);
	if (rc < 0) {
		snprintf(err, errlen, "the key holder's channel failed: %s", strerror(-rc));
		return rc;
	}
	msg_start(&l->out, MSG_LEAF);
	msg_put_cstr(&l->out, host);
	rc = msg_send(l->fd, &l->out, -1, 0);
	if (rc == 0)
		rc = await_answer(l, &r, MSG_LEAF_ANSWER);
	if (rc < 0) {
		snprintf(err, errlen, "the key holder's channel failed: %s", strerror(-rc));
		return rc;
	}
	if (!msg_get_u32(&r, &ok) || ok > 1)
		goto bad;
	if (!ok) {
		if (!msg_get_str(&r, 1024, &why, NULL) || !msg_end(&r))
			goto bad;
		snprintf(err, errlen, "the key holder refused a leaf for %s: %s", host, why);
		explicit_bzero(l->in, MSG_MAX);
		return -1;
	}
	if (!msg_get_str(&r, MSG_MAX, &cert, &clen) ||
	    !msg_get_str(&r, MSG_MAX, &key, &klen) || !msg_end(&r))
		goto bad;
	out->cert_pem = util_xstrndup(cert, clen);
	out->cert_len = clen;
	out->key_pem = util_xstrndup(key, klen);
	out->key_len = klen;
	explicit_bzero(l->in, MSG_MAX);
	return 0;
bad:
	explicit_bzero(l->in, MSG_MAX);
	snprintf(err, errlen, "the key holder's answer for a leaf is malformed");
	return -EPROTO;
}

int keeper_ca_cert(struct keeper *k, char **pem, char *err, size_t errlen)
{
	struct msg_reader r;
	const char *text = NULL;
	size_t len = 0;
	int rc;

	*pem = NULL;
	msg_start(&k->link.out, MSG_CA_CERT);
	rc = msg_send(k->link.fd, &k->link.out, -1, 0);
	if (rc == 0)
		rc = await_answer(&k->link, &r, MSG_CA_CERT_ANSWER);
	if (rc == 0 && (!msg_get_str(&r, MSG_MAX, &text, &len) || !msg_end(&r)))
		rc = -EPROTO;
	if (rc < 0) {
		snprintf(err, errlen, "key holder: %s", k->link.fatal[0] ? k->link.fatal
								   : strerror(-rc));
		return -1;
	}
	if (len)
		*pem = util_xstrndup(text, len);
	return 0;
}

int keeper_set_policy(struct keeper *k, const char *digest, json_t *subject,
		      const char *reason)
{
	msg_start(&k->link.out, MSG_SET_POLICY);
	msg_put_cstr(&k->link.out, digest);
	put_subject(&k->link.out, subject);
	put_text(&k->link.out, reason, KEEPER_TEXT_MAX);
	return msg_send(k->link.fd, &k->link.out, -1, 0);
}

int keeper_set_spend(struct keeper *k, int64_t nano)
{
	ASSERT(nano >= 0);
	msg_start(&k->link.out, MSG_SPEND_USD);
	msg_put_u64(&k->link.out, (uint64_t)nano);
	return msg_send(k->link.fd, &k->link.out, -1, 0);
}

int keeper_end(struct keeper *k, int exit_status, char *err, size_t errlen)
{
	int r;

	if (k->pid < 0) {
		keeper_describe_exit(k, err, errlen);
		return -1;
	}
	msg_start(&k->link.out, MSG_END);
	msg_put_u32(&k->link.out, (uint32_t)exit_status & 0xff);
	r = msg_send(k->link.fd, &k->link.out, -1, 0);
	reap(k);
	if (r == 0 && WIFEXITED(k->wstatus) && WEXITSTATUS(k->wstatus) == 0)
		return 0;
	keeper_describe_exit(k, err, errlen);
	return -1;
}

void keeper_link_close(struct keeper_link *l)
{
	if (l->fd >= 0) {
		(void)keeper_link_flush(l);
		close(l->fd);
	}
	l->nbatch = 0;
	msg_free(&l->batch);
	l->fd = -1;
	msg_free(&l->out);
	free(l->in);
	l->in = NULL;
}

void keeper_release(struct keeper *k)
{
	if (k->pid > 0) {
		kill(k->pid, SIGKILL);
		reap(k);
	}
	keeper_link_close(&k->link);
}
