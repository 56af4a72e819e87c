/* SPDX-License-Identifier: Apache-2.0
 * test_msg.c - the typed messages between airlock's processes (msg.c) and
 * the key holder's check of a record request (keeper_parse_record): every
 * field kind round trips; every cut, wrong kind, bad length, missing or
 * extra NUL, and trailing byte is refused; descriptors travel one at a
 * time and a datagram with more, or one cut short, is refused with its
 * descriptors closed; a request a worker may not make is refused.
 *
 * Every message is read from an exact-size heap copy, so that under
 * `make SAN=1` a read past its end is an ASan error, not a silent pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keeper.h"
#include "msg.h"
#include "tap.h"
#include "util.h"

static uint8_t *copy_exact(const void *p, size_t n)
{
	uint8_t *c = util_xmalloc(n ? n : 1);

	memcpy(c, p, n);
	return c;
}

/* --- round trips ---------------------------------------------------------- */

static void test_round_trip(void)
{
	static const uint8_t blob[] = { 0, 1, 2, 0, 255 };
	struct msg m = { 0 };
	struct msg_reader r;
	const char *s1, *s2;
	const void *b;
	uint32_t u32;
	uint64_t u64;
	size_t len, blen;
	uint8_t *c;

	msg_start(&m, MSG_RECORD);
	msg_put_u32(&m, 0xdeadbeef);
	msg_put_u64(&m, 0x0123456789abcdefull);
	msg_put_cstr(&m, "héllo");
	msg_put_str(&m, "", 0);
	msg_put_bytes(&m, blob, sizeof(blob));
	tap_ok(!m.overflow, "a message of each field kind is written");
	c = copy_exact(m.buf, m.len);
	tap_ok(msg_reader_init(&r, MSG_CHAN_KEEPER, c, m.len) && r.type == MSG_RECORD,
	       "its header is read back: record");
	tap_ok(msg_get_u32(&r, &u32) && u32 == 0xdeadbeef, "u32 round trips");
	tap_ok(msg_get_u64(&r, &u64) && u64 == 0x0123456789abcdefull, "u64 round trips");
	tap_ok(msg_get_str(&r, 64, &s1, &len) && len == 6 && strcmp(s1, "héllo") == 0,
	       "a UTF-8 string round trips, NUL-terminated in place");
	tap_ok(msg_get_str(&r, 64, &s2, NULL) && s2[0] == '\0', "an empty string too");
	tap_ok(msg_get_bytes(&r, 64, &b, &blen) && blen == sizeof(blob) &&
	       memcmp(b, blob, blen) == 0, "bytes with NULs in them round trip");
	tap_ok(msg_end(&r) && r.error == NULL, "and nothing is left: msg_end is true");
	free(c);
	msg_free(&m);
}

/* --- refusals --------------------------------------------------------------- */

/* What a reader of each case expects: the fields, in order. */
enum field { F_U32 = 1, F_U64, F_STR, F_BYTES, F_END };

struct bad_case {
	const char *name;
	const uint8_t *bytes;
	size_t len;
	const enum field *expect;   /* read in order until F_END */
	size_t max;                 /* bound given to str/bytes getters */
};

/* A header for type @t followed by @n raw bytes. */
#define HDR(t) (uint8_t)(t), (uint8_t)((uint32_t)(t) >> 8), 0, 0

static const uint8_t trunc_u32[] = { HDR(MSG_RECORD), 'i', 1, 2, 3 };
static const uint8_t wrong_kind[] = { HDR(MSG_RECORD), 'q', 1, 2, 3, 4, 5, 6, 7, 8 };
static const uint8_t str_no_nul[] = { HDR(MSG_RECORD), 's', 3, 0, 0, 0, 'a', 'b', 'c', 'd' };
static const uint8_t str_nul_in[] = { HDR(MSG_RECORD), 's', 3, 0, 0, 0, 'a', 0, 'c', 0 };
static const uint8_t str_cut[] = { HDR(MSG_RECORD), 's', 4, 0, 0, 0, 'a', 'b', 'c', 0 };
static const uint8_t str_huge_len[] = { HDR(MSG_RECORD), 's', 0xff, 0xff, 0xff, 0xff, 'a', 0 };
static const uint8_t str_over_max[] = { HDR(MSG_RECORD), 's', 5, 0, 0, 0, 'a', 'b', 'c', 'd', 'e', 0 };
static const uint8_t bytes_cut[] = { HDR(MSG_RECORD), 'b', 9, 0, 0, 0, 1, 2, 3 };
static const uint8_t trailing[] = { HDR(MSG_RECORD), 'i', 1, 0, 0, 0, 'x' };
static const uint8_t missing[] = { HDR(MSG_RECORD), 'i', 1, 0, 0, 0 };
static const uint8_t unknown_type[] = { 0xff, 0, 0, 0 };
static const uint8_t type_count[] = { HDR(MSG_KEEPER_END_) };
static const uint8_t type_base[] = { HDR(MSG_KEEPER_BASE_) };
static const uint8_t no_channel[] = { HDR(MSG_CHAN_COUNT << MSG_CHAN_SHIFT) };
static const uint8_t other_channel[] = { HDR(MSG_GO) };
static const uint8_t short_header[] = { 1, 0 };
static const uint8_t len_word_cut[] = { HDR(MSG_RECORD), 's', 1, 0 };

static const enum field want_u32[] = { F_U32, F_END };
static const enum field want_str[] = { F_STR, F_END };
static const enum field want_bytes[] = { F_BYTES, F_END };
static const enum field want_u32_u32[] = { F_U32, F_U32, F_END };
static const enum field want_nothing[] = { F_END };

#define CASE(n, b, e, m) { n, b, sizeof(b), e, m }
static const struct bad_case bad_cases[] = {
	CASE("a u32 cut short", trunc_u32, want_u32, 64),
	CASE("a u64 where a u32 is expected", wrong_kind, want_u32, 64),
	CASE("a string without its NUL", str_no_nul, want_str, 64),
	CASE("a string with a NUL inside", str_nul_in, want_str, 64),
	CASE("a string longer than the message", str_cut, want_str, 64),
	CASE("a string whose length word is 4 GiB", str_huge_len, want_str, 64),
	CASE("a string over the reader's bound", str_over_max, want_str, 4),
	CASE("bytes longer than the message", bytes_cut, want_bytes, 64),
	CASE("a byte after the last field", trailing, want_u32, 64),
	CASE("a field missing at the end", missing, want_u32_u32, 64),
	CASE("an unknown type", unknown_type, want_nothing, 64),
	CASE("the channel's end marker", type_count, want_nothing, 64),
	CASE("the channel's base", type_base, want_nothing, 64),
	CASE("a type of no channel", no_channel, want_nothing, 64),
	CASE("a type of another channel (go, the worker channel's)", other_channel,
	     want_nothing, 64),
	CASE("a header of two bytes", short_header, want_nothing, 64),
	CASE("a string's length word cut short", len_word_cut, want_str, 64),
};

/* Reads @c as its expect list says; true when every getter and msg_end
 * succeeded. *@changed is set when a getter that failed changed what it
 * was given to fill. */
static bool read_case(const struct bad_case *c, bool *changed)
{
	uint8_t *copy = copy_exact(c->bytes, c->len);
	struct msg_reader r;
	bool ok = msg_reader_init(&r, MSG_CHAN_KEEPER, copy, c->len);
	size_t i;

	*changed = false;
	for (i = 0; c->expect[i] != F_END; i++) {
		uint32_t u32 = 7;
		uint64_t u64 = 7;
		const char *s = NULL;
		const void *b = NULL;
		size_t len = 7;
		bool got = false;

		switch (c->expect[i]) {
		case F_U32:
			got = msg_get_u32(&r, &u32);
			*changed |= !got && u32 != 7;
			break;
		case F_U64:
			got = msg_get_u64(&r, &u64);
			*changed |= !got && u64 != 7;
			break;
		case F_STR:
			got = msg_get_str(&r, c->max, &s, &len);
			*changed |= !got && (s || len != 7);
			break;
		case F_BYTES:
			got = msg_get_bytes(&r, c->max, &b, &len);
			*changed |= !got && (b || len != 7);
			break;
		case F_END:
			break;
		}
		ok = ok && got;
	}
	ok = msg_end(&r) && ok;
	if (!ok && !r.error)
		*changed = true; /* refused without a reason */
	free(copy);
	return ok;
}

static void test_refusals(void)
{
	bool changed;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		bool accepted = read_case(&bad_cases[i], &changed);

		tap_ok(!accepted && !changed, "refused, with a reason and outputs "
		       "untouched: %s", bad_cases[i].name);
	}
}

/* Every prefix of a valid message is refused, and reading one never
 * touches a byte past it (ASan checks the exact-size copies). */
static void test_every_prefix(void)
{
	struct msg m = { 0 };
	size_t cut, refused = 0;

	msg_start(&m, MSG_SET_POLICY);
	msg_put_cstr(&m, "sha256:00");
	msg_put_u64(&m, 42);
	msg_put_bytes(&m, "xyz", 3);
	for (cut = 0; cut < m.len; cut++) {
		uint8_t *c = copy_exact(m.buf, cut);
		struct msg_reader r;
		const char *s;
		const void *b;
		uint64_t v;
		size_t n;

		(void)msg_reader_init(&r, MSG_CHAN_KEEPER, c, cut);
		(void)msg_get_str(&r, 64, &s, NULL);
		(void)msg_get_u64(&r, &v);
		(void)msg_get_bytes(&r, 64, &b, &n);
		refused += !msg_end(&r);
		free(c);
	}
	tap_is_int(refused, m.len, "each of the %zu shorter prefixes of a message is refused",
		   m.len);
	msg_free(&m);
}

static void test_sticky(void)
{
	static const uint8_t bytes[] = { HDR(MSG_END), 'q', 1, 2, 3, 4, 5, 6, 7, 8,
					 'i', 5, 0, 0, 0 };
	uint8_t *c = copy_exact(bytes, sizeof(bytes));
	struct msg_reader r;
	uint32_t v = 0;
	uint64_t q;

	msg_reader_init(&r, MSG_CHAN_KEEPER, c, sizeof(bytes));
	tap_ok(!msg_get_u32(&r, &v), "reading a u64 as a u32 fails");
	tap_ok(!msg_get_u64(&r, &q) && !msg_get_u32(&r, &v) && v == 0,
	       "and so does every getter after it, even one that would fit");
	tap_ok(!msg_end(&r) && r.error && strcmp(r.error, "field of the wrong kind") == 0,
	       "the first error is the one reported");
	free(c);
}

static void test_overflow(void)
{
	struct msg m = { 0 };
	char *big = util_xmalloc(MSG_MAX);
	int sv[2];

	memset(big, 'a', MSG_MAX);
	msg_start(&m, MSG_RECORD);
	msg_put_str(&m, big, MSG_MAX - 64);
	tap_ok(!m.overflow && m.len <= MSG_MAX, "a string just under MSG_MAX fits");
	msg_put_str(&m, big, 100);
	tap_ok(m.overflow, "one more that would pass MSG_MAX overflows the message");
	ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	tap_is_int(msg_send(sv[0], &m, -1, 0), -EMSGSIZE,
		   "and msg_send refuses it (-EMSGSIZE), sending nothing");
	msg_start(&m, MSG_GO);
	tap_ok(!m.overflow && msg_send(sv[0], &m, -1, 0) == 0,
	       "msg_start makes the message usable again");
	close(sv[0]);
	close(sv[1]);
	msg_free(&m);
	free(big);
}

/* --- datagrams and descriptors ----------------------------------------------- */

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int open_fds(void)
{
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++)
		n += fd_open(fd);
	return n;
}

/* Sends @n descriptors in one SCM_RIGHTS message, as a hostile peer would. */
static void send_fds(int sock, const int *fds, size_t n)
{
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct msghdr mh;
	struct cmsghdr *cm;
	struct iovec iov;
	uint8_t hdr[] = { HDR(MSG_GO) };

	memset(&mh, 0, sizeof(mh));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = hdr;
	iov.iov_len = sizeof(hdr);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	ASSERT(sendmsg(sock, &mh, 0) == (ssize_t)sizeof(hdr));
}

static void test_datagrams(void)
{
	uint8_t *buf = util_xmalloc(MSG_MAX), *big = util_xcalloc(1, MSG_MAX + 100);
	struct msg m = { 0 };
	int sv[2], p[2], two[2], got, before;
	ssize_t n;

	ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	/* One descriptor comes through. */
	ASSERT(pipe2(p, O_CLOEXEC) == 0);
	msg_start(&m, MSG_ADD_CHANNEL);
	tap_is_int(msg_send(sv[0], &m, p[0], 0), 0, "a message with a descriptor is sent");
	n = msg_recv(sv[1], buf, MSG_MAX, &got, 0);
	tap_ok(n == (ssize_t)m.len && got >= 0 && got != p[0] && fd_open(got) &&
	       (fcntl(got, F_GETFD) & FD_CLOEXEC),
	       "and received whole, with a new close-on-exec descriptor");
	if (got >= 0)
		close(got);
	/* Two descriptors: refused, both closed on our side. */
	ASSERT(pipe2(two, O_CLOEXEC) == 0);
	before = open_fds();
	send_fds(sv[0], two, 2);
	n = msg_recv(sv[1], buf, MSG_MAX, &got, 0);
	tap_ok(n == -EBADMSG && got == -1, "a datagram with two descriptors is refused (-EBADMSG)");
	tap_is_int(open_fds(), before, "and the descriptors it carried are closed, not leaked");
	close(two[0]);
	close(two[1]);
	/* Longer than the reader's buffer: refused, not cut. */
	ASSERT(send(sv[0], big, MSG_MAX + 100, 0) == (ssize_t)(MSG_MAX + 100));
	n = msg_recv(sv[1], buf, MSG_MAX, &got, 0);
	tap_is_int(n, -EMSGSIZE, "a datagram longer than MSG_MAX is refused (-EMSGSIZE)");
	/* The next message is intact: boundaries are kept. */
	msg_start(&m, MSG_END);
	msg_put_u32(&m, 3);
	ASSERT(msg_send(sv[0], &m, -1, 0) == 0);
	n = msg_recv(sv[1], buf, MSG_MAX, &got, MSG_DONTWAIT);
	tap_ok(n == (ssize_t)m.len && memcmp(buf, m.buf, m.len) == 0,
	       "the message after it arrives whole");
	tap_is_int(msg_recv(sv[1], buf, MSG_MAX, &got, MSG_DONTWAIT), -EAGAIN,
		   "nothing else is waiting (-EAGAIN)");
	close(sv[0]);
	tap_is_int(msg_recv(sv[1], buf, MSG_MAX, &got, 0), 0,
		   "a closed peer reads as end of file (0)");
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	msg_free(&m);
	free(buf);
	free(big);
}

/* --- the key holder's record request ------------------------------------------ */

struct record_case {
	const char *name;
	enum keeper_peer peer;
	uint32_t flags;
	const char *type;
	uint32_t decision, point;
	const char *subject;
	bool ok;
	const char *why;            /* a word of the refusal's reason */
};

static const struct record_case record_cases[] = {
	{ "an egress.allow from a worker", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "{\"host\":\"a.example\"}", true, NULL },
	{ "a block asking for its seq", KEEPER_PEER_WORKER, MSG_RECORD_WANT_SEQ,
	  "egress.block", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY, "", true, NULL },
	{ "a git.allow from a worker", KEEPER_PEER_WORKER, 0, "git.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_GIT, "{}", true, NULL },
	{ "a session.start from the supervisor", KEEPER_PEER_SUPERVISOR, 0,
	  "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR, "{\"pubkey\":\"x\"}",
	  true, NULL },
	{ "a session.start from a worker", KEEPER_PEER_WORKER, 0, "session.start",
	  RECEIPT_INFO, RECEIPT_POINT_EGRESS_PROXY, "{}", false, "may not record" },
	{ "a session.refused from a worker", KEEPER_PEER_WORKER, 0, "session.refused",
	  RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY, "{}", false, "may not record" },
	{ "a policy.reload from a worker", KEEPER_PEER_WORKER, 0, "policy.reload",
	  RECEIPT_INFO, RECEIPT_POINT_EGRESS_PROXY, "{}", false, "may not record" },
	{ "a session.end from anyone", KEEPER_PEER_SUPERVISOR, 0, "session.end",
	  RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR, "{}", false, "session.end" },
	{ "a worker speaking as the supervisor", KEEPER_PEER_WORKER, 0, "env.drop",
	  RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR, "{}", false, "point supervisor" },
	{ "a worker speaking as the sandbox", KEEPER_PEER_WORKER, 0, "env.drop",
	  RECEIPT_BLOCK, RECEIPT_POINT_SANDBOX, "{}", false, "point sandbox" },
	{ "a decision out of its enum", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_DECISION_COUNT, RECEIPT_POINT_EGRESS_PROXY, "{}", false, "decision" },
	{ "a point out of its enum", KEEPER_PEER_SUPERVISOR, 0, "egress.allow",
	  RECEIPT_ALLOW, 77, "{}", false, "point" },
	{ "unknown flags", KEEPER_PEER_WORKER, 6, "egress.allow", RECEIPT_ALLOW,
	  RECEIPT_POINT_EGRESS_PROXY, "{}", false, "flags" },
	{ "a type with capitals", KEEPER_PEER_WORKER, 0, "Egress.allow", RECEIPT_ALLOW,
	  RECEIPT_POINT_EGRESS_PROXY, "{}", false, "type" },
	{ "an empty type", KEEPER_PEER_WORKER, 0, "", RECEIPT_ALLOW,
	  RECEIPT_POINT_EGRESS_PROXY, "{}", false, "type" },
	{ "a subject that is an array", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "[1]", false, "object" },
	{ "a subject that is not JSON", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "{\"a\":", false, "JSON" },
	{ "a subject with a key twice", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "{\"host\":\"a\",\"host\":\"b\"}",
	  false, "JSON" },
	{ "a subject of invalid UTF-8", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "{\"host\":\"\xff\"}", false, "JSON" },
	{ "a subject with trailing text", KEEPER_PEER_WORKER, 0, "egress.allow",
	  RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "{} {}", false, "JSON" },
};

static void build_record(struct msg *m, const struct record_case *c)
{
	msg_start(m, MSG_RECORD);
	msg_put_u32(m, c->flags);
	msg_put_cstr(m, c->type);
	msg_put_u32(m, c->decision);
	msg_put_u32(m, c->point);
	msg_put_cstr(m, "rule");
	msg_put_cstr(m, c->subject);
	msg_put_cstr(m, "reason");
}

static bool parse(const struct msg *m, enum keeper_peer peer,
		  struct keeper_record_req *req, char *why, size_t whylen)
{
	uint8_t *c = copy_exact(m->buf, m->len);
	struct msg_reader r;
	bool ok = msg_reader_init(&r, MSG_CHAN_KEEPER, c, m->len) &&
		  keeper_parse_record(&r, peer, req, why, whylen);

	if (ok) {
		/* The strings point into the message: copy what we check. */
		ok = strlen(req->type) > 0;
		json_decref(req->subject);
		req->subject = NULL;
	}
	free(c);
	return ok;
}

static void test_record_requests(void)
{
	struct keeper_record_req req;
	struct msg m = { 0 };
	char why[256], *rule;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(record_cases); i++) {
		const struct record_case *c = &record_cases[i];
		bool ok;

		build_record(&m, c);
		why[0] = '\0';
		ok = parse(&m, c->peer, &req, why, sizeof(why));
		if (c->ok)
			tap_ok(ok, "accepted: %s", c->name);
		else
			tap_ok(!ok && strstr(why, c->why), "refused: %s (%s)", c->name, why);
	}
	/* A rule over the bound. */
	rule = util_xmalloc(KEEPER_TEXT_MAX + 2);
	memset(rule, 'r', KEEPER_TEXT_MAX + 1);
	rule[KEEPER_TEXT_MAX + 1] = '\0';
	msg_start(&m, MSG_RECORD);
	msg_put_u32(&m, 0);
	msg_put_cstr(&m, "egress.allow");
	msg_put_u32(&m, RECEIPT_ALLOW);
	msg_put_u32(&m, RECEIPT_POINT_EGRESS_PROXY);
	msg_put_cstr(&m, rule);
	msg_put_cstr(&m, "{}");
	msg_put_cstr(&m, "");
	tap_ok(!parse(&m, KEEPER_PEER_WORKER, &req, why, sizeof(why)) &&
	       strstr(why, "malformed"), "refused: a rule over KEEPER_TEXT_MAX bytes (%s)", why);
	free(rule);
	/* A subject over the bound. */
	rule = util_xmalloc(KEEPER_SUBJECT_MAX + 16);
	memset(rule, ' ', KEEPER_SUBJECT_MAX + 8);
	rule[0] = '{';
	rule[KEEPER_SUBJECT_MAX + 8] = '}';
	rule[KEEPER_SUBJECT_MAX + 9] = '\0';
	msg_start(&m, MSG_RECORD);
	msg_put_u32(&m, 0);
	msg_put_cstr(&m, "egress.allow");
	msg_put_u32(&m, RECEIPT_ALLOW);
	msg_put_u32(&m, RECEIPT_POINT_EGRESS_PROXY);
	msg_put_cstr(&m, "r");
	msg_put_cstr(&m, rule);
	msg_put_cstr(&m, "");
	tap_ok(!parse(&m, KEEPER_PEER_WORKER, &req, why, sizeof(why)) &&
	       strstr(why, "longer than allowed"),
	       "refused: a subject over KEEPER_SUBJECT_MAX bytes (%s)", why);
	free(rule);
	/* A field too many. */
	build_record(&m, &record_cases[0]);
	msg_put_u32(&m, 1);
	tap_ok(!parse(&m, KEEPER_PEER_WORKER, &req, why, sizeof(why)) &&
	       strstr(why, "trailing"), "refused: a record with a field too many (%s)", why);
	/* Not a record at all. */
	msg_start(&m, MSG_END);
	msg_put_u32(&m, 0);
	tap_ok(!parse(&m, KEEPER_PEER_SUPERVISOR, &req, why, sizeof(why)),
	       "refused: another message type given as a record");
	/* A valid one hands out exactly its fields. */
	build_record(&m, &record_cases[1]);
	{
		uint8_t *c = copy_exact(m.buf, m.len);
		struct msg_reader r;

		tap_ok(msg_reader_init(&r, MSG_CHAN_KEEPER, c, m.len) &&
		       keeper_parse_record(&r, KEEPER_PEER_WORKER, &req, why, sizeof(why)) &&
		       req.want_seq && strcmp(req.type, "egress.block") == 0 &&
		       req.decision == RECEIPT_BLOCK &&
		       req.point == RECEIPT_POINT_EGRESS_PROXY &&
		       strcmp(req.rule, "rule") == 0 && strcmp(req.reason, "reason") == 0 &&
		       json_is_object(req.subject) && json_object_size(req.subject) == 0,
		       "an accepted record hands out its fields (an empty subject is {})");
		json_decref(req.subject);
		free(c);
	}
	msg_free(&m);
}

static void test_names(void)
{
	tap_is_str(msg_type_to_string(MSG_RECORD), "record", "msg_type_to_string(MSG_RECORD)");
	tap_is_str(msg_type_to_string(MSG_WORKER_READY), "worker-ready",
		   "msg_type_to_string(MSG_WORKER_READY)");
	tap_is_str(msg_type_to_string(MSG_FATAL), "fatal", "msg_type_to_string(MSG_FATAL)");
	tap_is_str(msg_type_to_string(MSG_PUBLISH_END_ - 1), "publish-serving",
		   "msg_type_to_string of the last channel's last type");
	tap_is_str(keeper_peer_to_string(KEEPER_PEER_WORKER), "proxy worker",
		   "keeper_peer_to_string(KEEPER_PEER_WORKER)");
}

/* Each channel's reader takes its own types and MSG_FATAL, and refuses
 * every other channel's. */
static void test_channels(void)
{
	static const uint32_t firsts[] = { MSG_FATAL, MSG_KEEPER_READY, MSG_WITNESS_NOTE,
					   MSG_POLICY, MSG_SPEND_READY, MSG_SPEND_RESERVE,
					   MSG_DNS_BLOCK, MSG_SANDBOX_READY, MSG_PUBLISH_READY,
					   MSG_MINT };
	unsigned ch, t, wrong = 0, fatal = 0;

	tap_is_int(ARRAY_SIZE(firsts), MSG_CHAN_COUNT, "a first type for each channel");
	for (ch = 0; ch < MSG_CHAN_COUNT; ch++) {
		for (t = 0; t < ARRAY_SIZE(firsts); t++) {
			struct msg m = { 0 };
			struct msg_reader r;
			bool took, mine = MSG_TYPE_CHANNEL(firsts[t]) == ch;

			msg_start(&m, firsts[t]);
			took = msg_reader_init(&r, (enum msg_channel)ch, m.buf, m.len);
			if (firsts[t] == MSG_FATAL)
				fatal += took;
			else if (took != mine ||
				 (!took && strcmp(r.error, "a message of another channel") != 0))
				wrong++;
			msg_free(&m);
		}
	}
	tap_is_int(wrong, 0, "a reader takes its channel's types and refuses the others'");
	tap_is_int(fatal, MSG_CHAN_COUNT, "every channel's reader takes MSG_FATAL");
	tap_ok(msg_type_of(MSG_FILTER_CONFIG, MSG_CHAN_WORKER) &&
	       !msg_type_of(MSG_FILTER_CONFIG, MSG_CHAN_KEEPER) &&
	       !msg_type_of(MSG_SPEND_RESERVE, MSG_CHAN_LEDGER),
	       "msg_type_of: a worker's configuration is no key holder's; a reservation "
	       "is the worker-ledger channel's, not the supervisor's");
}

/* A block: fields without a type, bigger than a message may be. */
static void test_blocks(void)
{
	size_t big = MSG_MAX + 4096;
	char *val = util_xmalloc(big);
	struct msg b = { 0 }, m = { 0 };
	struct msg_reader r;
	const void *got;
	uint32_t u = 0;
	size_t len;

	memset(val, 'v', big);
	msg_start_block(&b, 2 * MSG_MAX);
	msg_put_u32(&b, 7);
	msg_put_bytes(&b, val, big);
	tap_ok(!b.overflow && b.len > MSG_MAX, "a block may be bigger than a message");
	tap_is_int(msg_send(-1, &b, -1, 0), -EMSGSIZE, "but is never sent as one");
	msg_reader_block(&r, b.buf, b.len);
	tap_ok(msg_get_u32(&r, &u) && u == 7 && msg_get_bytes(&r, big, &got, &len) &&
	       len == big && memcmp(got, val, big) == 0 && msg_end(&r),
	       "a block reads back field by field");
	msg_start_block(&b, 64);
	msg_put_bytes(&b, val, 100);
	tap_ok(b.overflow, "a block over its bound overflows");
	msg_start(&b, MSG_GO);
	msg_put_bytes(&b, val, big);
	tap_ok(b.overflow, "msg_start() makes it a message again, bound by MSG_MAX");
	free(val);
	msg_free(&b);
	msg_free(&m);
}

int main(void)
{
	test_round_trip();
	test_refusals();
	test_every_prefix();
	test_sticky();
	test_overflow();
	test_datagrams();
	test_record_requests();
	test_names();
	test_channels();
	test_blocks();
	return tap_done();
}
