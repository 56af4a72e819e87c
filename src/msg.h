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

/* Every message of every channel. The fields of each, in order, are
 * listed here; a reader takes exactly these and then calls msg_end().
 * "str" is text without NUL bytes, "bytes" anything. */
enum msg_type {
	/* key holder -> supervisor */
	MSG_KEEPER_READY = 0, /* str pubkey (base64 of the 32 raw bytes) */
	MSG_FATAL,            /* str reason: the sender stops (any channel) */
	/* supervisor or proxy worker -> key holder */
	MSG_RECORD,           /* u32 flags (MSG_RECORD_WANT_SEQ), str type,
				 u32 decision, u32 point, str rule,
				 str subject (a JSON object, "" for {}),
				 str reason */
	MSG_SEQ,              /* key holder -> asker: u32 written (0/1), u64 seq */
	/* supervisor -> key holder */
	MSG_SET_POLICY,       /* str digest, str subject (JSON), str reason:
				 policy.reload with the new digest */
	MSG_ADD_CHANNEL,      /* no fields; carries a descriptor: a proxy
				 worker's channel */
	MSG_END,              /* u32 exit status: session.end, then exit */
	/* supervisor -> proxy worker */
	MSG_POLICY,           /* str digest; carries a descriptor: a memfd
				 holding the policy's canonical text */
	MSG_GO,               /* no fields: start serving */
	MSG_STOP,             /* u32 drain_ms: stop accepting, drain, exit */
	/* proxy worker -> supervisor */
	MSG_WORKER_READY,     /* no fields: listening, under its filter */
	/* the git binding's GitHub App token */
	MSG_JWT_SIGN,         /* supervisor -> key holder: no fields: sign the
				 App's JWT for now */
	MSG_JWT,              /* key holder -> supervisor: str jwt ("" when
				 it could not sign), str error, str warning
				 about the key's file ("" for none) */
	MSG_GIT_TOKEN,        /* supervisor -> proxy worker: u64 expires_at
				 (Unix time), bytes token: the git
				 credential from now on */
	/* proxy worker -> key holder, and its answer */
	MSG_LEAF,             /* str host (normalised): a leaf certificate for
				 an intercepted host */
	MSG_LEAF_ANSWER,      /* u32 ok; ok: str cert_pem, str key_pem;
				 else: str reason */
	/* supervisor -> key holder, and its answer */
	MSG_CA_CERT,          /* no fields: the session CA's certificate */
	MSG_CA_CERT_ANSWER,   /* str cert_pem ("" without a CA) */
	/* spend (spendd.h): ledger process <-> supervisor */
	MSG_SPEND_READY,      /* ledger -> supervisor: no fields: the session
				 is open in the ledger */
	MSG_SPEND_CHANNEL,    /* supervisor -> ledger: u32 kind
				 (MSG_SPEND_CHANNEL_*); carries a descriptor:
				 a proxy worker's channel, or the ledger's own
				 channel to the key holder */
	MSG_SPEND_CLOSE,      /* supervisor -> ledger: no fields: the workers
				 have exited; close the session */
	MSG_SPEND_TOTAL,      /* ledger -> supervisor: u64 the session's own
				 spent money (nano-dollars) */
	/* spend: proxy worker <-> ledger process */
	MSG_SPEND_RESERVE,    /* u32 tag, u64 amount (nano-dollars) */
	MSG_SPEND_RESERVED,   /* u32 tag, u32 status (enum ledger_status),
				 u64 reservation id (UINT64_MAX: none),
				 u64 cap (UINT64_MAX: none), u64 spent,
				 u64 reserved, str session whose cap */
	MSG_SPEND_SETTLE,     /* u64 reservation id, u64 cost, u32 outcome
				 (enum meter_outcome), u32 have_usage,
				 u64 input, u64 output, u64 cache_write,
				 u64 cache_read, str model, str host,
				 str endpoint, str reason */
	/* spend: proxy worker -> supervisor */
	MSG_SPEND_EXHAUSTED,  /* str reason: a call was refused for a cap
				 under on_exhausted "stop" */
	/* spend: supervisor -> key holder */
	MSG_SPEND_USD,        /* u64 nano-dollars: session.end's spend_usd */
	/* a value captured from an answer (capture.c) */
	MSG_CAPTURE,          /* proxy worker -> supervisor -> every other
				 worker: str secret, u64 expires_at (Unix
				 time, 0: the session), str placeholder,
				 bytes value */
	MSG_CAPTURE_ACK,      /* supervisor -> the capturing worker: no
				 fields: every other worker has it queued */
	/* witness (run --witness): key holder <-> feed process (feed.h), at the end */
	MSG_WITNESS_NOTE,     /* str note: the last checkpoint, to cosign */
	MSG_WITNESS_COSIG,    /* str cosignature lines ("" none) */
	MSG_OAUTH_401,        /* proxy worker -> supervisor: str secret,
				 bytes the access token a bound host
				 answered 401 to (oauth.c refreshes), u32
				 wait (1: answer); supervisor -> that
				 worker, when it waits: no fields, after
				 the new token if there is one */
	/* transparent mode's DNS stub (dnsd.h) -> supervisor */
	MSG_DNS_BLOCK,        /* u32 would_block, str rule, str host (the
				 name as displayed), u32 qtype, u32 outcome
				 (enum dnsstub_outcome), str reason: record
				 dns.block */
	/* the sandbox's init -> supervisor, while the sandbox starts
	 * (sandbox.c); failures are MSG_FATAL */
	MSG_SANDBOX_READY,    /* no fields: init is dumpable, its id maps
				 may be written */
	MSG_SANDBOX_SOCKET,   /* u32 role (MSG_SANDBOX_SOCK_*), u32 more (1:
				 another socket of this hand-over follows);
				 carries the socket */
	/* proxy worker -> key holder */
	MSG_RECORD_BATCH,     /* 1-64 records, each MSG_RECORD's fields with
				 flags 0, until the message's end; written
				 in order, no answer */
	/* the live feed (feed.c) -> key holder; the other way the channel
	 * carries the stream's bytes, whole lines, unframed */
	MSG_FEED_GAP,         /* u64 from, u64 to, str why: seqs the feed
				 lost; record receipt.gap */
	/* the relay of published ports (publish.c) <-> supervisor;
	 * failures are MSG_FATAL */
	MSG_PUBLISH_READY,    /* relay -> supervisor: no fields: its ports
				 are bound */
	MSG_PUBLISH_NS,       /* supervisor -> relay: u32 role
				 (MSG_PUBLISH_NS_*); carries the sandbox's
				 namespace of that role */
	MSG_PUBLISH_AUTH,     /* supervisor -> relay: bytes the SHA-256 of
				 each publish entry's auth secret (32 bytes
				 per entry, zeros: none), after both
				 namespaces */
	MSG_PUBLISH_SERVING,  /* relay -> supervisor: no fields: in the
				 sandbox's network, confined, serving */
	/* the GitHub App token's mint process (mintd.h) <-> supervisor */
	MSG_MINT,             /* supervisor -> mint: u32 id, u64
				 installation_id, str owner, u32 nrepos,
				 nrepos x str repo, u32 nperms, nperms x
				 (str name, u32 level), str jwt */
	MSG_MINT_ANSWER,      /* mint -> supervisor: u32 id, u32 ok; ok:
				 u64 expires_at, u32 nrepos, nrepos x str
				 repo, u32 nperms, nperms x (str name, u32
				 level) granted, bytes token; else: str
				 error */
	MSG_TYPE_COUNT
};

#define MSG_RECORD_WANT_SEQ 1u
#define MSG_SPEND_CHANNEL_KEEPER 0u
#define MSG_SPEND_CHANNEL_WORKER 1u
#define MSG_SANDBOX_SOCK_PROXY 0u     /* the proxy's listener, 127.0.0.1 */
#define MSG_SANDBOX_SOCK_TLISTEN4 1u  /* transparent listener, 127.0.0.1 */
#define MSG_SANDBOX_SOCK_STUB 2u      /* the DNS stub's UDP socket */
#define MSG_SANDBOX_SOCK_TLISTEN6 3u  /* transparent listener, [::1] */
#define MSG_PUBLISH_NS_USER 0u
#define MSG_PUBLISH_NS_NET 1u

const char *msg_type_to_string(enum msg_type t);

/* A message being written. The buffer grows as fields are added, up to
 * MSG_MAX; a field that does not fit marks the message overflowed, and
 * msg_send() then refuses it. Reuse one with msg_start() to keep its
 * buffer. */
struct msg {
	uint8_t *buf;
	size_t len, cap;
	bool overflow;
};

void msg_start(struct msg *m, enum msg_type t);
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
	enum msg_type type;
	const char *error;      /* NULL, or a static description */
};

/* Starts reading @len bytes: false (with @error set) when they are not a
 * message header of a known type. */
bool msg_reader_init(struct msg_reader *r, const void *buf, size_t len);
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
