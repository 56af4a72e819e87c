/* SPDX-License-Identifier: Apache-2.0
 * feed.h - the live feed: `--events otlp+http://HOST:PORT/PATH` sends each
 * receipt, as the key holder writes it, to an OpenTelemetry collector as
 * OTLP/HTTP JSON log records (docs/RECEIPTS.md "Live feed").
 */
#ifndef AIRLOCK_FEED_H
#define AIRLOCK_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

/* Lines the feed holds while the collector is slow or down (--feed-queue);
 * what comes while it is full is lost to the feed, and recorded in the
 * stream as receipt.gap. */
#define FEED_QUEUE_DEFAULT 10000u
#define FEED_QUEUE_MAX 1000000u

/* A feed's destination, parsed. */
struct feed_url {
	char host[256];            /* a name or an address (no brackets) */
	char port[8];              /* "4318" when not given */
	char path[512];            /* "/v1/logs" when not given */
};

/* Does --events @dest name a feed (otlp+...) rather than the stream? */
bool feed_is_url(const char *dest);

/* Parses otlp+http://HOST[:PORT][/PATH] (IPv6 in brackets). Returns 0, or
 * -1 with a one-line reason in @err (another scheme, no host, a bad
 * port, a query or fragment, a URL too long). */
int feed_url_parse(const char *spec, struct feed_url *u, char *err, size_t errlen);

/* What the feed process does: a live feed, a witness, or both. */
struct feed_config {
	const char *spec;          /* otlp+http://..., or NULL: no live feed */
	unsigned queue;            /* its queue in lines (0: the default) */
	const char *events;        /* the stream's --events, named in records */
	const char *witness_url;   /* run --witness, or NULL */
	EVP_PKEY *witness_key;     /* its public key */
};

/* In the key holder, before it holds anything secret: forks the feed
 * process and returns the key holder's end of its channel (non-blocking,
 * close-on-exec): the stream's bytes go to the feed on it, written whole
 * lines at a time, and MSG_FEED_GAP comes back. With a witness the feed
 * process keeps the Merkle tree of the lines too and asks the witness to
 * cosign each new receipt.checkpoint it sees (at most one request per
 * FEED_WITNESS_EVERY_MS), and answers the key holder's MSG_WITNESS_NOTE
 * at the end with MSG_WITNESS_COSIG. Returns -1 with a reason in @err. */
int feed_start(const struct feed_config *cfg, char *err, size_t errlen);

#define FEED_WITNESS_EVERY_MS 1000

/* --- the feed's bounded queue (the reader's side; its unit test's) --- */

#define FEED_QUEUE_BYTES ((size_t)64 << 20)
#define FEED_GAPS 16                /* lost ranges waiting to be reported */

struct feed_rec {
	int64_t seq;
	char *line;                /* without its newline */
	size_t len;
};

struct feed_gap {
	int64_t from, to;          /* seqs lost */
	char why[160];
};

/* A ring of @cap lines in seq order, and the ranges of seqs it lost. */
struct feed_queue {
	struct feed_rec *q;
	size_t head, n, cap, bytes;
	int64_t next_seq;          /* the seq the next line should have */
	struct feed_gap gaps[FEED_GAPS];
	size_t ngaps;
};

void feed_queue_init(struct feed_queue *fq, size_t cap);

/* Line @seq (@n bytes, copied) into the queue: a jump in seq is a gap
 * (the key holder's channel lost those lines), and a line that finds the
 * queue full (@cap lines, or FEED_QUEUE_BYTES) is one too. */
void feed_queue_take(struct feed_queue *fq, int64_t seq, const char *line, size_t n);

/* Notes seqs @from..@to as lost: adjacent ranges of the same cause merge;
 * once FEED_GAPS ranges wait, the last absorbs what does not fit. */
void feed_queue_gap(struct feed_queue *fq, int64_t from, int64_t to, const char *why);

/* Removes the @k oldest lines (delivered, or given up). */
void feed_queue_drop(struct feed_queue *fq, size_t k);
void feed_queue_free(struct feed_queue *fq);

#endif /* AIRLOCK_FEED_H */
