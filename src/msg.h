/* SPDX-License-Identifier: Apache-2.0
 * msg.h - typed messages between airlock's processes: writers, and readers
 * that check every byte they hand out.
 */
#ifndef AIRLOCK_MSG_H
#define AIRLOCK_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest message, header included. It fits one SOCK_SEQPACKET
 * datagram under Linux's default socket buffer (net.core.wmem_default,
 * 208 KiB): what is bigger travels in a file descriptor (a sealed memfd). */
#define MSG_MAX ((size_t)128 * 1024)

/* The channels between airlock's processes, and the messages of each.
 * A message type belongs to one channel (MSG_FATAL to every one); a
 * reader opened on a channel (msg_reader_init()) refuses the types of the
 * others. Each channel's types are one list below, MSG_TYPES_<CHANNEL>,
 * named once in MSG_CHANNELS: that list makes the channel's enum (enum
 * msg_<channel>_type, numbered from the channel's base), its names for
 * msg_type_to_string() and its membership. A new channel is a list and a
 * line of MSG_CHANNELS; a new type of a channel, a line of its list.
 *
 * The fields of each message, in order, are given beside it; a reader
 * takes exactly these and then calls msg_end(). "str" is text without
 * NUL bytes, "bytes" anything. Numbers are the same build's on both ends
 * (no versioning: both ends are this program). */

/* every channel */
#define MSG_TYPES_COMMON(T) \
	T(FATAL, "fatal")                   /* str reason: the sender stops */

/* the key holder's channels (keeper.c): to the supervisor, to each proxy
 * worker, to the ledger, to the feed */
#define MSG_TYPES_KEEPER(T) \
	T(KEEPER_READY, "keeper-ready")     /* -> supervisor: str pubkey \
					       (base64 of the 32 raw bytes) */ \
	T(RECORD, "record")                 /* supervisor or worker ->: u32 flags \
					       (MSG_RECORD_WANT_SEQ), str type, \
					       u32 decision, u32 point, str rule, \
					       str subject (a JSON object, "" for \
					       {}), str reason */ \
	T(SEQ, "seq")                       /* -> asker: u32 written (0/1), u64 seq */ \
	T(SET_POLICY, "set-policy")         /* supervisor ->: str digest, str \
					       subject (JSON), str reason: \
					       policy.reload with the new digest */ \
	T(ADD_CHANNEL, "add-channel")       /* supervisor ->: no fields; carries a \
					       descriptor: a proxy worker's channel */ \
	T(END, "end")                       /* supervisor ->: u32 exit status: \
					       session.end, then exit */ \
	T(JWT_SIGN, "jwt-sign")             /* supervisor ->: no fields: sign the \
					       GitHub App's JWT for now */ \
	T(JWT, "jwt")                       /* -> supervisor: str jwt ("" when it \
					       could not sign), str error, str \
					       warning about the key's file ("" \
					       for none) */ \
	T(LEAF, "leaf")                     /* worker ->: str host (normalised): a \
					       leaf certificate for an \
					       intercepted host */ \
	T(LEAF_ANSWER, "leaf-answer")       /* -> worker: u32 ok; ok: str cert_pem, \
					       str key_pem; else: str reason */ \
	T(CA_CERT, "ca-cert")               /* supervisor ->: no fields: the \
					       session CA's certificate */ \
	T(CA_CERT_ANSWER, "ca-cert-answer") /* -> supervisor: str cert_pem ("" \
					       without a CA) */ \
	T(SPEND_USD, "spend-usd")           /* supervisor ->: u64 nano-dollars: \
					       session.end's spend_usd */ \
	T(RECORD_BATCH, "record-batch")     /* worker ->: 1-64 records, each \
					       MSG_RECORD's fields with flags 0, \
					       until the message's end; written \
					       in order, no answer */ \
	T(FEED_GAP, "feed-gap")             /* the live feed (feed.c) ->: u64 \
					       from, u64 to, str why: seqs the \
					       feed lost; record receipt.gap (the \
					       other way the feed's channel \
					       carries the stream's bytes, whole \
					       lines, unframed) */ \
	T(WITNESS_COSIGNED, "witness-cosigned") /* the feed ->: u64 size, str \
					       cosignature lines: the witness \
					       cosigned the checkpoint of that \
					       size as the session went; record \
					       receipt.cosignature */

/* witness (run --witness): key holder <-> feed process (feed.h), at the
 * end */
#define MSG_TYPES_WITNESS(T) \
	T(WITNESS_NOTE, "witness-note")     /* str note: the last checkpoint, to \
					       cosign */ \
	T(WITNESS_COSIG, "witness-cosig")   /* str cosignature lines ("" none) */

/* supervisor <-> proxy worker (worker.c) */
#define MSG_TYPES_WORKER(T) \
	T(POLICY, "policy")                 /* -> worker: str digest; carries a \
					       descriptor: a memfd holding the \
					       policy's canonical text */ \
	T(FILTER_CONFIG, "filter-config")   /* -> worker: str filter (its name in \
					       filter_table), then bytes: the \
					       filter's own block (filter.h), or \
					       empty with a sealed memfd holding \
					       it; or a descriptor of the filter's \
					       own. One per filter, in the table's \
					       order, before go; again later when \
					       the filter's configuration changes \
					       (the git token's refresh) */ \
	T(GO, "go")                         /* -> worker: no fields: start serving */ \
	T(STOP, "stop")                     /* -> worker: u32 drain_ms: stop \
					       accepting, drain, exit */ \
	T(WORKER_READY, "worker-ready")     /* worker ->: no fields: listening, \
					       under its filter */ \
	T(CAPTURE, "capture")               /* worker -> supervisor -> every other \
					       worker: str secret, u64 expires_at \
					       (Unix time, 0: the session), str \
					       placeholder, bytes value (capture.c) */ \
	T(CAPTURE_ACK, "capture-ack")       /* -> the capturing worker: no fields: \
					       every other worker has it queued */ \
	T(OAUTH_401, "oauth-401")           /* worker ->: str secret, bytes the \
					       access token a bound host answered \
					       401 to (oauth.c refreshes), u32 \
					       wait (1: answer); -> that worker, \
					       when it waits: no fields, after \
					       the new token if there is one */ \
	T(SPEND_EXHAUSTED, "spend-exhausted") /* worker ->: str reason: a call was \
					       refused for a cap under \
					       on_exhausted "stop" */

/* supervisor <-> ledger process (spendd.h) */
#define MSG_TYPES_LEDGER(T) \
	T(SPEND_READY, "spend-ready")       /* ledger ->: no fields: the session \
					       is open in the ledger */ \
	T(SPEND_CHANNEL, "spend-channel")   /* -> ledger: u32 kind \
					       (MSG_SPEND_CHANNEL_*); carries a \
					       descriptor: a proxy worker's \
					       channel, or the ledger's own \
					       channel to the key holder */ \
	T(SPEND_CLOSE, "spend-close")       /* -> ledger: no fields: the workers \
					       have exited; close the session */ \
	T(SPEND_TOTAL, "spend-total")       /* ledger ->: u64 the session's own \
					       spent money (nano-dollars) */

/* proxy worker <-> ledger process */
#define MSG_TYPES_SPEND(T) \
	T(SPEND_RESERVE, "spend-reserve")   /* u32 tag, u64 amount (nano-dollars) */ \
	T(SPEND_RESERVED, "spend-reserved") /* u32 tag, u32 status (enum \
					       ledger_status), u64 reservation id \
					       (UINT64_MAX: none), u64 cap \
					       (UINT64_MAX: none), u64 spent, u64 \
					       reserved, str session whose cap */ \
	T(SPEND_SETTLE, "spend-settle")     /* u64 reservation id, u64 cost, u32 \
					       outcome (enum meter_outcome), u32 \
					       have_usage, u64 input, u64 output, \
					       u64 cache_write, u64 cache_read, \
					       str model, str host, str endpoint, \
					       str reason */

/* transparent mode's DNS stub (dnsd.h) -> supervisor */
#define MSG_TYPES_DNS(T) \
	T(DNS_BLOCK, "dns-block")           /* u32 would_block, str rule, str host \
					       (the name as displayed), u32 qtype, \
					       u32 outcome (enum dnsstub_outcome), \
					       str reason: record dns.block */

/* the sandbox's init -> supervisor, while the sandbox starts (sandbox.c);
 * failures are MSG_FATAL */
#define MSG_TYPES_SANDBOX(T) \
	T(SANDBOX_READY, "sandbox-ready")   /* no fields: init is dumpable, its id \
					       maps may be written */ \
	T(SANDBOX_SOCKET, "sandbox-socket") /* u32 role (MSG_SANDBOX_SOCK_*), u32 \
					       more (1: another socket of this \
					       hand-over follows); carries the \
					       socket */

/* the relay of published ports (publish.c) <-> supervisor; failures are
 * MSG_FATAL */
#define MSG_TYPES_PUBLISH(T) \
	T(PUBLISH_READY, "publish-ready")   /* relay ->: no fields: its ports are \
					       bound */ \
	T(PUBLISH_NS, "publish-ns")         /* -> relay: u32 role \
					       (MSG_PUBLISH_NS_*); carries the \
					       sandbox's namespace of that role */ \
	T(PUBLISH_AUTH, "publish-auth")     /* -> relay: bytes the SHA-256 of each \
					       publish entry's auth secret (32 \
					       bytes per entry, zeros: none), \
					       after both namespaces */ \
	T(PUBLISH_SERVING, "publish-serving") /* relay ->: no fields: in the \
					       sandbox's network, confined, \
					       serving */

/* supervisor <-> the GitHub App token's mint process (mintd.h) */
#define MSG_TYPES_MINT(T) \
	T(MINT, "mint")                     /* -> mint: u32 id, u64 \
					       installation_id, str owner, u32 \
					       nrepos, nrepos x str repo, u32 \
					       nperms, nperms x (str name, u32 \
					       level), str jwt */ \
	T(MINT_ANSWER, "mint-answer")       /* mint ->: u32 id, u32 ok; ok: u64 \
					       expires_at, u32 nrepos, nrepos x \
					       str repo, u32 nperms, nperms x \
					       (str name, u32 level) granted, \
					       bytes token; else: str error */

/* Every channel: C(ID, id) with its list MSG_TYPES_<ID>. */
#define MSG_CHANNELS(C) \
	C(COMMON, common) \
	C(KEEPER, keeper) \
	C(WITNESS, witness) \
	C(WORKER, worker) \
	C(LEDGER, ledger) \
	C(SPEND, spend) \
	C(DNS, dns) \
	C(SANDBOX, sandbox) \
	C(PUBLISH, publish) \
	C(MINT, mint)

#define MSG_CHAN_ID_(ID, id) MSG_CHAN_##ID,
enum msg_channel {
	MSG_CHANNELS(MSG_CHAN_ID_)
	MSG_CHAN_COUNT
};
#undef MSG_CHAN_ID_

/* A type is its channel's number above this shift, and its index in the
 * channel's list, plus one, below (0 is never a type). */
#define MSG_CHAN_SHIFT 8
#define MSG_TYPE_CHANNEL(t) ((uint32_t)(t) >> MSG_CHAN_SHIFT)

/* enum msg_<id>_type: MSG_<ID>_BASE_ (no type), then the channel's types,
 * then MSG_<ID>_END_ (no type). */
#define MSG_TYPE_ID_(NAME, str) MSG_##NAME,
#define MSG_CHAN_ENUM_(ID, id) \
	enum msg_##id##_type { \
		MSG_##ID##_BASE_ = (uint32_t)MSG_CHAN_##ID << MSG_CHAN_SHIFT, \
		MSG_TYPES_##ID(MSG_TYPE_ID_) \
		MSG_##ID##_END_ \
	};
MSG_CHANNELS(MSG_CHAN_ENUM_)
#undef MSG_CHAN_ENUM_
#undef MSG_TYPE_ID_

#define MSG_RECORD_WANT_SEQ 1u
#define MSG_SPEND_CHANNEL_KEEPER 0u
#define MSG_SPEND_CHANNEL_WORKER 1u
#define MSG_SANDBOX_SOCK_PROXY 0u     /* the proxy's listener, 127.0.0.1 */
#define MSG_SANDBOX_SOCK_TLISTEN4 1u  /* transparent listener, 127.0.0.1 */
#define MSG_SANDBOX_SOCK_STUB 2u      /* the DNS stub's UDP socket */
#define MSG_SANDBOX_SOCK_TLISTEN6 3u  /* transparent listener, [::1] */
#define MSG_PUBLISH_NS_USER 0u
#define MSG_PUBLISH_NS_NET 1u

/* Is @t a type of channel @ch (or of every channel)? */
bool msg_type_of(uint32_t t, enum msg_channel ch);

/* The name of type @t (a valid one: ASSERTed). */
const char *msg_type_to_string(uint32_t t);

/* A message being written. The buffer grows as fields are added, up to
 * MSG_MAX; a field that does not fit marks the message overflowed, and
 * msg_send() then refuses it. Reuse one with msg_start() to keep its
 * buffer. */
struct msg {
	uint8_t *buf;
	size_t len, cap;
	bool overflow;
	size_t max;             /* a block's bound (0: MSG_MAX) */
};

void msg_start(struct msg *m, uint32_t t);
/* Starts a block instead: fields without a type, up to @max bytes, that
 * travel inside a message (as bytes) or beside it (a memfd), and are read
 * with msg_reader_block(). */
void msg_start_block(struct msg *m, size_t max);
void msg_put_u32(struct msg *m, uint32_t v);
void msg_put_u64(struct msg *m, uint64_t v);
/* @len bytes of @s, which must hold no NUL byte (ASSERTed: the writer is
 * our own code). msg_put_cstr() takes a NUL-terminated string. */
void msg_put_str(struct msg *m, const char *s, size_t len);
void msg_put_cstr(struct msg *m, const char *s);
void msg_put_bytes(struct msg *m, const void *p, size_t len);
void msg_free(struct msg *m);

/* Sends @m as one datagram on a SOCK_SEQPACKET socket, with @pass_fd
 * attached when it is >= 0 (the caller keeps its copy). @flags are
 * send(2) flags (MSG_NOSIGNAL is always added). Returns 0, -EMSGSIZE for
 * an overflowed message, or -errno. */
int msg_send(int sock, const struct msg *m, int pass_fd, int flags);

/* Receives one datagram into @buf (@cap >= MSG_MAX). Returns its length,
 * 0 at end of file, or -errno: -EMSGSIZE when it was longer than @cap
 * (it is discarded), -EBADMSG when it carried anything but at most one
 * descriptor. A descriptor that came with it is stored in *@fd_out
 * (close-on-exec; the caller owns it), else *@fd_out is -1. @flags are
 * recvmsg(2) flags, e.g. MSG_DONTWAIT. */
ssize_t msg_recv(int sock, void *buf, size_t cap, int *fd_out, int flags);

/* Reads the fields of one received message. Every getter checks the
 * field's kind and length against what is left and fails (returning
 * false, changing nothing it was given) on the first mismatch; after a
 * failure every later getter and msg_end() fail too, and @error says
 * what was wrong. The strings and bytes handed out point into the
 * message's buffer and live as long as it. */
struct msg_reader {
	const uint8_t *buf;
	size_t len, off;
	uint32_t type;          /* a type of the reader's channel, or
				   MSG_FATAL */
	const char *error;      /* NULL, or a static description */
};

/* Starts reading @len bytes that came on a channel @ch: false (with
 * @error set) when they are not a message header of a type of @ch (or
 * MSG_FATAL, every channel's). */
bool msg_reader_init(struct msg_reader *r, enum msg_channel ch, const void *buf, size_t len);
/* Starts reading a block (msg_start_block()) of @len bytes: its type is
 * 0. */
void msg_reader_block(struct msg_reader *r, const void *buf, size_t len);
bool msg_get_u32(struct msg_reader *r, uint32_t *out);
bool msg_get_u64(struct msg_reader *r, uint64_t *out);
/* A string of at most @max bytes, NUL-terminated in the buffer, with no
 * NUL inside; *@len (when not NULL) receives its length. */
bool msg_get_str(struct msg_reader *r, size_t max, const char **out, size_t *len);
bool msg_get_bytes(struct msg_reader *r, size_t max, const void **out, size_t *len);
/* True when every byte was read and no getter failed: a message with
 * trailing bytes is as invalid as a short one. */
bool msg_end(struct msg_reader *r);

#endif /* AIRLOCK_MSG_H */
