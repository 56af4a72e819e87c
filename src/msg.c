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
 * Every type belongs to one channel (msg.h: the key holder's, the
 * workers', the ledger's, ...; "fatal" to all), numbered from the
 * channel's base, and a reader is opened on the channel its bytes came
 * on: a type of another channel is refused before any field is read, as
 * an unknown one is. A block (msg_start_block()) is fields without a type,
 * bounded by its writer rather than by MSG_MAX: a filter's configuration,
 * carried inside a message or in a memfd beside it.
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

/* Each channel's names, in its list's order (msg.h). */
#define TYPE_NAME(NAME, str) str,
#define CHAN_NAMES(ID, id) static const char *const id##_names[] = { MSG_TYPES_##ID(TYPE_NAME) };
MSG_CHANNELS(CHAN_NAMES)
#undef CHAN_NAMES
#undef TYPE_NAME

static const struct {
	const char *const *names;
	uint32_t count;
} channels[] = {
#define CHAN_ROW(ID, id) [MSG_CHAN_##ID] = { id##_names, ARRAY_SIZE(id##_names) },
	MSG_CHANNELS(CHAN_ROW)
#undef CHAN_ROW
};
static_assert(ARRAY_SIZE(channels) == MSG_CHAN_COUNT, "a row per channel");

#define CHAN_FITS(ID, id) \
	static_assert(MSG_##ID##_END_ - MSG_##ID##_BASE_ <= (1u << MSG_CHAN_SHIFT), \
		      "the " #id " channel's types fit below its shift");
MSG_CHANNELS(CHAN_FITS)
#undef CHAN_FITS

/* Is @t a type (of some channel)? */
static bool known(uint32_t t)
{
	uint32_t ch = MSG_TYPE_CHANNEL(t), i = t & ((1u << MSG_CHAN_SHIFT) - 1);

	return ch < MSG_CHAN_COUNT && i >= 1 && i <= channels[ch].count;
}

bool msg_type_of(uint32_t t, enum msg_channel ch)
{
	return known(t) && (MSG_TYPE_CHANNEL(t) == (uint32_t)ch ||
			    MSG_TYPE_CHANNEL(t) == MSG_CHAN_COMMON);
}

const char *msg_type_to_string(uint32_t t)
{
	ASSERT(known(t));
	return channels[MSG_TYPE_CHANNEL(t)].names[(t & ((1u << MSG_CHAN_SHIFT) - 1)) - 1];
}

/* --- writing ------------------------------------------------------------- */

/* Room for @n more bytes, or the message overflows. */
static bool reserve(struct msg *m, size_t n)
{
	size_t cap, max = m->max ? m->max : MSG_MAX;

	if (m->overflow)
		return false;
	if (n > max - m->len) {
		m->overflow = true;
		return false;
	}
	if (m->len + n <= m->cap)
		return true;
	cap = m->cap ? m->cap : 256;
	while (cap < m->len + n)
		cap *= 2;
	if (cap > max)
		cap = max;
	m->buf = util_xrealloc(m->buf, cap);
	m->cap = cap;
	return true;
}

static void put(struct msg *m, const void *p, size_t n)
{
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

void msg_start(struct msg *m, uint32_t t)
{
	uint32_t v = t;

	ASSERT(known(t));
	m->len = 0;
	m->overflow = false;
	m->max = 0;
	ASSERT(reserve(m, sizeof(v)));
	put(m, &v, sizeof(v));
}

void msg_start_block(struct msg *m, size_t max)
{
	m->len = 0;
	m->overflow = false;
	m->max = max;
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

	if (len > UINT32_MAX || !reserve(m, 1 + sizeof(n32) + len + (nul ? 1 : 0))) {
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

	if (m->overflow || m->len > MSG_MAX)
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

bool msg_reader_init(struct msg_reader *r, enum msg_channel ch, const void *buf, size_t len)
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
	if (!known(t))
		return bad(r, "unknown message type");
	if (!msg_type_of(t, ch))
		return bad(r, "a message of another channel");
	r->type = t;
	r->off = sizeof(t);
	return true;
}

void msg_reader_block(struct msg_reader *r, const void *buf, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->len = len;
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
