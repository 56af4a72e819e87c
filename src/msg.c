/* SPDX-License-Identifier: Apache-2.0
 * msg.c - typed messages between airlock's processes (see msg.h).
 *
 * DOC: Theory of Operation
 *
 * The processes of a session (supervisor, key holder, proxy workers) talk
 * over SOCK_SEQPACKET socket pairs: the kernel keeps each message whole
 * and in order, so there is no framing to get wrong and a reader never
 * sees half a message or two glued together. A message is one datagram:
 *
 *   u32 type | field | field | ...
 *
 * and each field says what it is before its bytes:
 *
 *   'i' u32            'q' u64
 *   's' u32 len, len bytes, NUL     (text: no NUL inside)
 *   'b' u32 len, len bytes          (anything)
 *
 * Integers are in host order: both ends are the same program on the same
 * machine. The kind bytes make a reader that expects other fields than the
 * writer sent fail at once, instead of reading a string's length out of
 * an integer.
 *
 * The receiving side is the one that matters: a key holder takes messages
 * from proxy workers, which parse hostile HTTP and TLS and may have been
 * taken over. So a reader trusts nothing: every getter checks the kind,
 * that the length fits in what is left (without overflow), that a string
 * ends with its NUL and holds no other, that it is within the caller's
 * bound; msg_end() fails on trailing bytes. The first failure sticks, so a
 * handler may read every field and check once; what a failed getter was
 * given is left unchanged. msg_recv() refuses a datagram that was cut
 * (MSG_TRUNC) and one that carries more than one descriptor or any other
 * control message, closing whatever descriptors came with it.
 *
 * Should: hand out only bytes inside the message, NUL-terminated strings,
 * exact integers. Mustn't: read past a message, accept a message with
 * bytes left over, leak a descriptor sent along with a refused message.
 */
#include "msg.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

enum { KIND_U32 = 'i', KIND_U64 = 'q', KIND_STR = 's', KIND_BYTES = 'b' };

static const char *const type_names[] = {
	[MSG_KEEPER_READY] = "keeper-ready",
	[MSG_FATAL] = "fatal",
	[MSG_RECORD] = "record",
	[MSG_SEQ] = "seq",
	[MSG_SET_POLICY] = "set-policy",
	[MSG_ADD_CHANNEL] = "add-channel",
	[MSG_END] = "end",
	[MSG_POLICY] = "policy",
	[MSG_GO] = "go",
	[MSG_STOP] = "stop",
	[MSG_WORKER_READY] = "worker-ready",
	[MSG_JWT_SIGN] = "jwt-sign",
	[MSG_JWT] = "jwt",
	[MSG_GIT_TOKEN] = "git-token",
	[MSG_LEAF] = "leaf",
	[MSG_LEAF_ANSWER] = "leaf-answer",
	[MSG_CA_CERT] = "ca-cert",
	[MSG_CA_CERT_ANSWER] = "ca-cert-answer",
	[MSG_SPEND_READY] = "spend-ready",
	[MSG_SPEND_CHANNEL] = "spend-channel",
	[MSG_SPEND_CLOSE] = "spend-close",
	[MSG_SPEND_TOTAL] = "spend-total",
	[MSG_SPEND_RESERVE] = "spend-reserve",
	[MSG_SPEND_RESERVED] = "spend-reserved",
	[MSG_SPEND_SETTLE] = "spend-settle",
	[MSG_SPEND_EXHAUSTED] = "spend-exhausted",
	[MSG_SPEND_USD] = "spend-usd",
	[MSG_CAPTURE] = "capture",
	[MSG_CAPTURE_ACK] = "capture-ack",
	[MSG_WITNESS_NOTE] = "witness-note",
	[MSG_WITNESS_COSIG] = "witness-cosig",
	[MSG_OAUTH_401] = "oauth-401",
	[MSG_DNS_BLOCK] = "dns-block",
	[MSG_SANDBOX_READY] = "sandbox-ready",
	[MSG_SANDBOX_SOCKET] = "sandbox-socket",
	[MSG_RECORD_BATCH] = "record-batch",
	[MSG_FEED_GAP] = "feed-gap",
	[MSG_PUBLISH_READY] = "publish-ready",
	[MSG_PUBLISH_NS] = "publish-ns",
	[MSG_PUBLISH_AUTH] = "publish-auth",
	[MSG_PUBLISH_SERVING] = "publish-serving",
	[MSG_MINT] = "mint",
	[MSG_MINT_ANSWER] = "mint-answer",
};
static_assert(ARRAY_SIZE(type_names) == MSG_TYPE_COUNT,
	      "type_names matches enum msg_type");

const char *msg_type_to_string(enum msg_type t)
{
	ASSERT((unsigned)t < MSG_TYPE_COUNT);
	return type_names[t];
}

/* --- writing ------------------------------------------------------------- */

/* Room for @n more bytes, or the message overflows. */
static bool reserve(struct msg *m, size_t n)
{
	size_t cap;

	if (m->overflow)
		return false;
	if (n > MSG_MAX - m->len) {
		m->overflow = true;
		return false;
	}
	if (m->len + n <= m->cap)
		return true;
	cap = m->cap ? m->cap : 256;
	while (cap < m->len + n)
		cap *= 2;
	if (cap > MSG_MAX)
		cap = MSG_MAX;
	m->buf = util_xrealloc(m->buf, cap);
	m->cap = cap;
	return true;
}

static void put(struct msg *m, const void *p, size_t n)
{
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

void msg_start(struct msg *m, enum msg_type t)
{
	uint32_t v = (uint32_t)t;

	ASSERT((unsigned)t < MSG_TYPE_COUNT);
	m->len = 0;
	m->overflow = false;
	ASSERT(reserve(m, sizeof(v)));
	put(m, &v, sizeof(v));
}

void msg_put_u32(struct msg *m, uint32_t v)
{
	uint8_t k = KIND_U32;

	if (!reserve(m, 1 + sizeof(v)))
		return;
	put(m, &k, 1);
	put(m, &v, sizeof(v));
}

void msg_put_u64(struct msg *m, uint64_t v)
{
	uint8_t k = KIND_U64;

	if (!reserve(m, 1 + sizeof(v)))
		return;
	put(m, &k, 1);
	put(m, &v, sizeof(v));
}

static void put_counted(struct msg *m, uint8_t kind, const void *p, size_t len,
			bool nul)
{
	uint32_t n32 = (uint32_t)len;

	if (len > MSG_MAX || !reserve(m, 1 + sizeof(n32) + len + (nul ? 1 : 0))) {
		m->overflow = true;
		return;
	}
	put(m, &kind, 1);
	put(m, &n32, sizeof(n32));
	if (len)
		put(m, p, len);
	if (nul)
		put(m, "", 1);
}

void msg_put_str(struct msg *m, const char *s, size_t len)
{
	ASSERT(!memchr(s, '\0', len));
	put_counted(m, KIND_STR, s, len, true);
}

void msg_put_cstr(struct msg *m, const char *s)
{
	put_counted(m, KIND_STR, s, strlen(s), true);
}

void msg_put_bytes(struct msg *m, const void *p, size_t len)
{
	put_counted(m, KIND_BYTES, p, len, false);
}

void msg_free(struct msg *m)
{
	free(m->buf);
	m->buf = NULL;
	m->len = m->cap = 0;
}

int msg_send(int sock, const struct msg *m, int pass_fd, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh;
	struct iovec iov;
	ssize_t n;

	if (m->overflow)
		return -EMSGSIZE;
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = m->buf;
	iov.iov_len = m->len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == m->len ? 0 : -EIO;
}

/* Closes every descriptor in the control messages of @mh. */
static void close_passed(struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

ssize_t msg_recv(int sock, void *buf, size_t cap, int *fd_out, int flags)
{
	/* Room for a few descriptors, so that a sender attaching more than
	 * one is seen (and refused) rather than cut short. */
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct msghdr mh;
	struct cmsghdr *cm;
	struct iovec iov;
	ssize_t n;

	*fd_out = -1;
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = buf;
	iov.iov_len = cap;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.b;
	mh.msg_controllen = sizeof(cbuf.b);
	do
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_passed(&mh);
		return (mh.msg_flags & MSG_TRUNC) ? -EMSGSIZE : -EBADMSG;
	}
	cm = CMSG_FIRSTHDR(&mh);
	if (cm) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len != CMSG_LEN(sizeof(int)) || CMSG_NXTHDR(&mh, cm)) {
			close_passed(&mh);
			return -EBADMSG;
		}
		memcpy(fd_out, CMSG_DATA(cm), sizeof(int));
	}
	return n;
}

/* --- reading ------------------------------------------------------------- */

static bool bad(struct msg_reader *r, const char *why)
{
	if (!r->error)
		r->error = why;
	return false;
}

bool msg_reader_init(struct msg_reader *r, const void *buf, size_t len)
{
	uint32_t t;

	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->len = len;
	if (len > MSG_MAX)
		return bad(r, "message too long");
	if (len < sizeof(t))
		return bad(r, "message shorter than its header");
	memcpy(&t, buf, sizeof(t));
	if (t >= MSG_TYPE_COUNT)
		return bad(r, "unknown message type");
	r->type = (enum msg_type)t;
	r->off = sizeof(t);
	return true;
}

/* Consumes the kind byte @kind and then @n bytes, returning where they
 * start; NULL (and the reader failed) when they are not there. */
static const uint8_t *take(struct msg_reader *r, uint8_t kind, size_t n)
{
	const uint8_t *p;

	if (r->error)
		return NULL;
	if (r->off >= r->len) {
		bad(r, "field missing (message too short)");
		return NULL;
	}
	if (r->buf[r->off] != kind) {
		bad(r, "field of the wrong kind");
		return NULL;
	}
	if (n > r->len - r->off - 1) {
		bad(r, "field longer than the message");
		return NULL;
	}
	p = r->buf + r->off + 1;
	r->off += 1 + n;
	return p;
}

bool msg_get_u32(struct msg_reader *r, uint32_t *out)
{
	const uint8_t *p = take(r, KIND_U32, sizeof(*out));

	if (!p)
		return false;
	memcpy(out, p, sizeof(*out));
	return true;
}

bool msg_get_u64(struct msg_reader *r, uint64_t *out)
{
	const uint8_t *p = take(r, KIND_U64, sizeof(*out));

	if (!p)
		return false;
	memcpy(out, p, sizeof(*out));
	return true;
}

/* A counted field: its length word, checked against @max and what is
 * left, then its bytes (and NUL when @nul). */
static const uint8_t *take_counted(struct msg_reader *r, uint8_t kind, size_t max,
				   bool nul, size_t *len)
{
	size_t start = r->off, left;
	const uint8_t *p;
	uint32_t n;

	p = take(r, kind, sizeof(n));
	if (!p)
		return NULL;
	memcpy(&n, p, sizeof(n));
	left = r->len - r->off;
	if (n > max) {
		r->off = start;
		bad(r, "field longer than allowed");
		return NULL;
	}
	if ((size_t)n > left || (nul && (size_t)n + 1 > left)) {
		r->off = start;
		bad(r, "field longer than the message");
		return NULL;
	}
	p = r->buf + r->off;
	if (nul && (p[n] != '\0' || memchr(p, '\0', n))) {
		r->off = start;
		bad(r, "string not terminated, or with a NUL inside");
		return NULL;
	}
	r->off += n + (nul ? 1 : 0);
	*len = n;
	return p;
}

bool msg_get_str(struct msg_reader *r, size_t max, const char **out, size_t *len)
{
	size_t n;
	const uint8_t *p = take_counted(r, KIND_STR, max, true, &n);

	if (!p)
		return false;
	*out = (const char *)p;
	if (len)
		*len = n;
	return true;
}

bool msg_get_bytes(struct msg_reader *r, size_t max, const void **out, size_t *len)
{
	size_t n;
	const uint8_t *p = take_counted(r, KIND_BYTES, max, false, &n);

	if (!p)
		return false;
	*out = p;
	*len = n;
	return true;
}

bool msg_end(struct msg_reader *r)
{
	if (r->error)
		return false;
	if (r->off != r->len)
		return bad(r, "trailing bytes after the last field");
	return true;
}
