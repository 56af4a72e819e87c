/* SPDX-License-Identifier: Apache-2.0
 * keeper.h - the key holder: the one process of a session that holds the
 * signing key and writes the receipt stream, and the client side that the
 * supervisor and the proxy workers use to ask it.
 */
#ifndef AIRLOCK_KEEPER_H
#define AIRLOCK_KEEPER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "msg.h"
#include "receipt.h"

/* What the key holder opens when it starts. */
struct keeper_config {
	const char *events;        /* --events DEST: "-", "fd:N" or a path */
	const char *signing_key;   /* --signing-key FILE, or NULL: a fresh key */
	const char *session;       /* the session id */
	const char *policy_digest; /* the digest of the first lines */
	/* git.github_app: the App's private key file, loaded before the key
	 * holder confines itself, and the App id its JWTs name; NULL: none. */
	const char *github_app_key;
	const char *github_app_id;
	/* The session CA of TLS interception (tls_ca.h): with @ca the key
	 * holder makes one (or loads @ca_cert and @ca_key, both given) before
	 * it confines itself, and issues leaves for the hosts @ca_policy
	 * intercepts (intercept.h) to the workers that ask. */
	bool ca;
	const char *ca_cert;       /* --ca-cert FILE, or NULL */
	const char *ca_key;        /* --ca-key FILE, or NULL */
	long ca_lifetime;          /* a fresh CA's validity; 0: TLS_CA_LIFETIME */
	const struct policy *ca_policy;
	/* receipts.sign "checkpoint": lines go unsigned, and a signed
	 * receipt.checkpoint follows within @checkpoint_ms, after every
	 * block, and before session.end. */
	bool sign_checkpoint;
	unsigned checkpoint_ms;
	/* run --witness: the last checkpoint (written before session.end in
	 * either mode) is cosigned by the witness at @witness_url, whose
	 * public key is @witness_key; its cosignature goes into session.end.
	 * NULL: none. */
	const char *witness_url;
	EVP_PKEY *witness_key;
	/* --events otlp+http://...: the live feed (feed.h), a process the key
	 * holder forks before it loads its key, holding at most @feed_queue
	 * lines (0: FEED_QUEUE_DEFAULT); NULL: none. */
	const char *feed_url;
	unsigned feed_queue;
};

/* One end of a channel to the key holder. */
struct keeper_link {
	int fd;
	struct msg out;
	bool batching;             /* records without a seq wait in batch for
				      keeper_link_flush() (a worker's loop) */
	struct msg batch;          /* MSG_RECORD_BATCH being filled */
	unsigned int nbatch;       /* records in it */
	unsigned int hold_ms;      /* with batching: how long a batch may wait
				      across turns (keeper_link_turn()); 0:
				      sent every turn */
	uint64_t batch_t0;         /* monotonic ms of the batch's first record */
	uint8_t *in;               /* MSG_MAX bytes for answers, made on first use */
	char fatal[256];           /* the key holder's last words (MSG_FATAL), or "" */
};

/* The supervisor's handle on its key holder. */
struct keeper {
	pid_t pid;                 /* -1 once it has been reaped */
	int wstatus;               /* its wait status, once reaped */
	struct keeper_link link;   /* the supervisor's channel */
	char pubkey[64];           /* base64 of the 32 raw public key bytes */
};

/* Forks the key holder, which loads (or makes) the signing key and opens
 * the stream while the caller goes on; keeper_wait_ready() collects the
 * outcome. The key holder keeps no other descriptor of ours than its
 * channel (and the stream's), wipes the environment it inherited (which
 * may hold secret values), ignores the signals a terminal sends, and
 * confines itself (confine.c) once the stream is open. Returns 0, or -1
 * with a reason in @err (nothing was started). */
int keeper_start(const struct keeper_config *cfg, struct keeper *k, char *err,
		 size_t errlen);

/* Waits for the key holder to be ready: 0 with k->pubkey filled, or -1
 * with its reason in @err (e.g. "--signing-key FILE: not an Ed25519
 * key"); it has then exited and been reaped. */
int keeper_wait_ready(struct keeper *k, char *err, size_t errlen);

/* Makes a channel for a proxy worker: a socket pair whose one end goes to
 * the key holder, the other to *@worker_end (close-on-exec; the caller
 * hands it to the worker and closes its copy). Returns 0 or -errno. */
int keeper_new_channel(struct keeper *k, int *worker_end);

/* Asks for one receipt on @l. With @want_seq it waits for the answer and
 * stores the seq in *@seq (-1 when the line was not written: longer than
 * a line may be); without, it returns once the request is sent (requests
 * of one channel are written in the order they were sent) and *@seq is
 * -1. @subject is borrowed (NULL: {}); one whose JSON is over
 * KEEPER_SUBJECT_MAX bytes is recorded as {"error": "...", "subject_bytes":
 * N} instead, so the decision still leaves its line; @rule and @reason
 * are cut to KEEPER_TEXT_MAX. Returns 0, or -errno when the channel
 * failed (the key holder is gone, or refused this channel). */
int keeper_record(struct keeper_link *l, bool want_seq, const char *type,
		  enum receipt_decision d, enum receipt_point point,
		  const char *rule, json_t *subject, const char *reason,
		  int64_t *seq);

/* Supervisor only: the GitHub App's JWT, signed now by the key holder
 * with the key of keeper_config.github_app_key (ghapp_jwt()). Returns a
 * JWT (a credential for ten minutes: the caller wipes it before free()),
 * or NULL with one line in @err. */
char *keeper_sign_jwt(struct keeper *k, char *err, size_t errlen);

/* Supervisor only: from now on lines carry @digest, starting with the
 * policy.reload line (decision info, rule "policy", @subject borrowed)
 * that this writes. Returns 0 or -errno. */
int keeper_set_policy(struct keeper *k, const char *digest, json_t *subject,
		      const char *reason);

/* session.end will carry spend_usd = @nano nano-dollars. Returns 0 or
 * -errno. */
int keeper_set_spend(struct keeper *k, int64_t nano);

/* Ends the session: session.end with @exit_status, then the key holder
 * exits; waits for that. Returns 0 when session.end was written and
 * synced, else -1 with the reason in @err. */
int keeper_end(struct keeper *k, int exit_status, char *err, size_t errlen);

/* The caller reaped the key holder (pid @k->pid) with @wstatus: picks up
 * its last words, if any. */
void keeper_reaped(struct keeper *k, int wstatus);

/* One line saying why the key holder stopped (its last words, else its
 * wait status), for a key holder that has been reaped. */
void keeper_describe_exit(const struct keeper *k, char *out, size_t len);

/* Kills and reaps the key holder if it still runs; frees @k's memory. */
void keeper_release(struct keeper *k);

/* Asks the key holder for a leaf certificate for @host (normalised, IPv6
 * without brackets) on a worker's channel @l, and waits for it. Returns
 * 0 with @out filled (free it with tls_leaf_free()), -1 with the key
 * holder's reason in @err (no CA, a host the policy does not intercept),
 * or -errno when the channel failed. */
struct tls_leaf;
int keeper_leaf(struct keeper_link *l, const char *host, struct tls_leaf *out,
		char *err, size_t errlen);

/* Supervisor only: the session CA's certificate (PEM, malloc'd, in *@pem;
 * NULL without a CA). Returns 0, or -1 with a reason in @err. */
int keeper_ca_cert(struct keeper *k, char **pem, char *err, size_t errlen);

/* Sends the records waiting in @l's batch, if any: 0 or -errno. A
 * worker calls it once a turn of its loop, before it waits; every other
 * request on @l sends them first, so requests keep their order. */
int keeper_link_flush(struct keeper_link *l);

/* A worker's turn of its loop, before it waits: sends the batch once it
 * has waited @l->hold_ms since its first record (at once with hold_ms
 * 0), else leaves it and stores in *@wait_ms the milliseconds until it
 * is due (-1: nothing waits). Returns 0 or -errno. Holding a batch
 * across turns makes one message of the records of several turns: the
 * key holder's cost is per message. */
int keeper_link_turn(struct keeper_link *l, int *wait_ms);

/* Sends what waits in @l's batch, frees its buffers and closes it. */
void keeper_link_close(struct keeper_link *l);

/* --- the key holder's side: request checking, shared with the tests --- */

/* Who is asking: the supervisor, or a proxy worker (less trusted: it
 * parses hostile input and may have been taken over). */
enum keeper_peer {
	KEEPER_PEER_SUPERVISOR = 0,
	KEEPER_PEER_WORKER,
	KEEPER_PEER_FEED,          /* the live feed: reports only its gaps */
	KEEPER_PEER_COUNT
};

const char *keeper_peer_to_string(enum keeper_peer p);

/* Longest rule and reason a request may carry (the line cuts them to
 * RECEIPT_TEXT_MAX), and the longest subject: with them a request always
 * fits in one message. */
#define KEEPER_TEXT_MAX ((size_t)16 * 1024)
#define KEEPER_SUBJECT_MAX ((size_t)64 * 1024)

/* A RECORD request, as checked. */
struct keeper_record_req {
	bool want_seq;
	const char *type;          /* point into the message */
	enum receipt_decision decision;
	enum receipt_point point;
	const char *rule;
	const char *reason;
	json_t *subject;           /* owned: json_decref it; never NULL from
				      keeper_parse_record() */
	const char *subject_text;  /* with subject NULL: canonical JSON text
				      (receipt_json_canonical()) in the message */
	size_t subject_len;
};

/* Reads the fields of a MSG_RECORD that @peer sent (@r positioned after
 * the header) and checks each: flags known, type of the type grammar,
 * decision and point within their enums, rule and reason within
 * KEEPER_TEXT_MAX, subject a JSON object (UTF-8, no duplicate keys) of
 * at most KEEPER_SUBJECT_MAX bytes,
 * nothing after; and what @peer may ask: a worker records only at the
 * points egress-proxy, broker and git, never a type that opens or closes
 * a stream or a policy.reload. Returns true with @out filled, or false
 * with the reason in @why (and nothing to free). */
bool keeper_parse_record(struct msg_reader *r, enum keeper_peer peer,
			 struct keeper_record_req *out, char *why, size_t whylen);

/* The most records one MSG_RECORD_BATCH may carry, and the size at which
 * a worker's link sends the batch it is filling (a record is at most
 * about 97 KiB: a batch stays within MSG_MAX). */
#define KEEPER_BATCH_RECORDS 64
#define KEEPER_BATCH_BYTES ((size_t)16 * 1024)

/* Checks a MSG_RECORD_BATCH's framing (@r positioned after the header;
 * left there): 1 to KEEPER_BATCH_RECORDS records of MSG_RECORD's fields,
 * none with flags, nothing after. Returns the number of records, or -1
 * with the reason in @why. */
int keeper_parse_batch(struct msg_reader *r, char *why, size_t whylen);

/* The next record of a batch keeper_parse_batch() accepted, checked as
 * keeper_parse_record() checks one (with @lazy, a canonical subject is
 * left as text: out->subject NULL). */
bool keeper_batch_next(struct msg_reader *r, enum keeper_peer peer, bool lazy,
		       struct keeper_record_req *out, char *why, size_t whylen);

#endif /* AIRLOCK_KEEPER_H */
