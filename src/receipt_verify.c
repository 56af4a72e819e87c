/* SPDX-License-Identifier: Apache-2.0
 * receipt_verify.c - `airlock verify`: checks a stream line by line.
 *
 * DOC: Theory of Operation
 *
 * Verifying trusts nothing but the bytes and, when given, the pinned
 * public key. It is strict and stops at the first bad line, naming it:
 * - the line must be a JSON object with exactly the thirteen members in
 *   order (parsed with duplicates rejected, order taken from iteration),
 *   each of its type and format, and it must end with the "sig" member in
 *   compact form, since the signed bytes are found by cutting it off;
 * - seq, prev and the signature are then checked against the stream state,
 *   and session and policy against the stream's session.start (the digest
 *   may change only on a policy.reload info line);
 * - session.end's counts must equal a recount of the stream.
 * A last line without its newline is accepted when it is otherwise intact:
 * the newline is framing, outside every signature, and a writer killed
 * mid-write leaves a line that fails anyway. An empty file fails at line 1;
 * a stream without session.end fails at its last line. The file reader
 * holds at most one line (RECEIPT_LINE_MAX) and a read's worth at a time.
 */
#include "receipt.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "merkle.h"
#include "receipt_line.h"
#include "tlog.h"
#include "util.h"

static bool sig_valid(EVP_PKEY *key, const void *msg, size_t len,
		      const uint8_t sig[RECEIPT_ED25519_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = false;

	if (!ctx || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1)
		goto out;
	ok = EVP_DigestVerify(ctx, sig, RECEIPT_ED25519_SIG_LEN, msg, len) == 1;
out:
	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	return ok;
}

struct verifier {
	struct receipt_verify_result *res;
	EVP_PKEY *pin;                  /* borrowed, or NULL */
	uint8_t pin_raw[RECEIPT_ED25519_KEY_LEN];
	size_t lineno;
	bool failed;
	char *msg;                      /* scratch: the signed bytes */
	size_t msg_cap;
	/* the current stream, valid while in_stream */
	bool in_stream;
	bool refused;                   /* opened by session.refused */
	size_t start_line;
	EVP_PKEY *key;
	char *session;
	char *policy;
	int64_t next_seq;
	char prev[RECEIPT_SHA256_HEX_LEN + 1];
	json_t *counts;
	uint8_t key_raw[RECEIPT_ED25519_KEY_LEN];
	struct merkle_tree tree;        /* over the stream's lines so far */
	size_t uncovered;               /* first line without sig not yet
					   covered by a later signature, or 0 */
	bool have_witness;              /* --witness: session.end must carry */
	uint8_t witness_raw[32];        /* a cosignature by this key */
	char *cp_body;                  /* the last checkpoint's body */
	size_t cp_line;                 /* and its line */
	struct {                        /* every checkpoint of the stream, */
		uint64_t size;          /* for its receipt.cosignature lines */
		char *body;
	} *cps;
	size_t ncps, cps_cap;
};

static EVP_PKEY *verify_witness; /* receipt_verify_set_witness() */

__attribute__((format(printf, 2, 3))) static bool
fail(struct verifier *v, const char *fmt, ...)
{
	char *p;
	va_list ap;

	v->failed = true;
	v->res->ok = false;
	v->res->bad_line = v->lineno;
	va_start(ap, fmt);
	vsnprintf(v->res->reason, sizeof(v->res->reason), fmt, ap);
	va_end(ap);
	for (p = v->res->reason; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	return false;
}

static void stream_reset(struct verifier *v)
{
	while (v->ncps)
		free(v->cps[--v->ncps].body);
	v->in_stream = false;
	EVP_PKEY_free(v->key);
	v->key = NULL;
	free(v->session);
	v->session = NULL;
	free(v->policy);
	v->policy = NULL;
	json_decref(v->counts);
	v->counts = NULL;
}

static void verifier_init(struct verifier *v, EVP_PKEY *pin,
			  struct receipt_verify_result *res)
{
	memset(v, 0, sizeof(*v));
	memset(res, 0, sizeof(*res));
	res->counts = json_object();
	ASSERT(res->counts);
	v->res = res;
	v->pin = pin;
	if (pin)
		ASSERT(receipt_key_raw_public(pin, v->pin_raw));
	if (verify_witness)
		v->have_witness = receipt_key_raw_public(verify_witness, v->witness_raw);
}

static void verifier_finish(struct verifier *v)
{
	json_t *sorted;

	if (!v->failed) {
		if (v->lineno == 0) {
			v->lineno = 1;
			fail(v, "empty stream (no session.start)");
		} else if (v->in_stream && v->uncovered) {
			fail(v, "the stream that began at line %zu ends without "
			     "session.end (truncated), and lines %zu-%zu are not "
			     "covered by a signature", v->start_line, v->uncovered,
			     v->lineno);
		} else if (v->in_stream) {
			fail(v, "the stream that began at line %zu ends without "
			     "session.end (truncated)", v->start_line);
		} else {
			v->res->ok = true;
		}
	}
	sorted = receipt_sorted_copy(v->res->counts);
	json_decref(v->res->counts);
	v->res->counts = sorted;
	stream_reset(v);
	free(v->msg);
	free(v->cp_body);
	free(v->cps);
}

/* A seq 0 session.start opens a stream: its key, session and policy bind
 * every later line of the stream. */
static bool stream_begin(struct verifier *v, json_t **val)
{
	const char *prev = json_string_value(val[RECEIPT_MEMBER_PREV]);
	json_t *pub = json_object_get(val[RECEIPT_MEMBER_SUBJECT], "pubkey");
	uint8_t raw[RECEIPT_ED25519_KEY_LEN];

	if (strcmp(prev, receipt_zero_prev) != 0)
		return fail(v, "prev of a seq 0 line is not 64 zeros");
	if (!json_is_string(pub) ||
	    !receipt_b64_decode_exact(json_string_value(pub), json_string_length(pub), raw,
			      sizeof(raw)))
		return fail(v, "session.start subject has no \"pubkey\" "
			    "(base64 of 32 bytes)");
	if (v->pin && memcmp(raw, v->pin_raw, sizeof(raw)) != 0)
		return fail(v, "session.start pubkey is not the --pubkey key "
			    "(signed by another key)");
	memcpy(v->key_raw, raw, sizeof(raw));
	merkle_init(&v->tree);
	v->uncovered = 0;
	v->key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, sizeof(raw));
	if (!v->key) {
		ERR_clear_error();
		return fail(v, "session.start pubkey is not an Ed25519 key");
	}
	v->in_stream = true;
	v->refused = strcmp(json_string_value(val[RECEIPT_MEMBER_TYPE]), "session.refused") == 0;
	v->start_line = v->lineno;
	v->session = util_xstrdup(json_string_value(val[RECEIPT_MEMBER_SESSION]));
	v->policy = util_xstrdup(json_string_value(val[RECEIPT_MEMBER_POLICY]));
	v->next_seq = 0;
	v->counts = json_object();
	ASSERT(v->counts);
	return true;
}

static bool stream_continue(struct verifier *v, json_t **val, int64_t seq,
			    bool start)
{
	if (start && seq == 0)
		return fail(v, "session.start before the session.end of the stream "
			    "that began at line %zu (truncated stream)",
			    v->start_line);
	if (seq != v->next_seq)
		return fail(v, "seq %lld, expected %lld (a line was removed, "
			    "inserted or reordered)",
			    (long long)seq, (long long)v->next_seq);
	if (start)
		return fail(v, "session.start inside a stream");
	if (v->refused && strcmp(json_string_value(val[RECEIPT_MEMBER_TYPE]), "session.end") != 0)
		return fail(v, "only session.end may follow session.refused");
	if (strcmp(json_string_value(val[RECEIPT_MEMBER_PREV]), v->prev) != 0)
		return fail(v, "prev is not the SHA-256 of line %zu (a line was "
			    "altered, removed, inserted or reordered)",
			    v->lineno - 1);
	if (strcmp(json_string_value(val[RECEIPT_MEMBER_SESSION]), v->session) != 0)
		return fail(v, "session differs from the session.start at line %zu",
			    v->start_line);
	if (strcmp(json_string_value(val[RECEIPT_MEMBER_POLICY]), v->policy) != 0) {
		/* The one place the digest may change: a successful reload
		 * (`airlock proxy`, SIGHUP) names the new policy, and every
		 * later line must carry it. */
		if (strcmp(json_string_value(val[RECEIPT_MEMBER_TYPE]), "policy.reload") != 0 ||
		    strcmp(json_string_value(val[RECEIPT_MEMBER_DECISION]), "info") != 0)
			return fail(v, "policy differs from the session.start at line %zu "
				    "(and this line is not a policy.reload)",
				    v->start_line);
		free(v->policy);
		v->policy = util_xstrdup(json_string_value(val[RECEIPT_MEMBER_POLICY]));
	}
	return true;
}

static bool stream_end(struct verifier *v, json_t *subject)
{
	json_t *ex = json_object_get(subject, "exit");
	json_t *counts = json_object_get(subject, "counts"), *val;
	const char *type;

	if (!json_is_integer(ex) || !json_is_object(counts))
		return fail(v, "session.end subject needs an integer \"exit\" and "
			    "an object \"counts\"");
	json_object_foreach(counts, type, val)
		if (!json_is_integer(val))
			return fail(v, "session.end counts: \"%.64s\" is not an "
				    "integer", type);
	if (!json_equal(counts, v->counts)) {
		json_object_foreach(v->counts, type, val)
			if (!json_equal(val, json_object_get(counts, type)))
				return fail(v, "session.end counts %lld \"%.64s\" "
					    "lines, the stream has %lld",
					    (long long)receipt_count_of(counts, type), type,
					    (long long)json_integer_value(val));
		json_object_foreach(counts, type, val)
			if (!json_object_get(v->counts, type))
				return fail(v, "session.end counts %lld \"%.64s\" "
					    "lines, the stream has none",
					    (long long)json_integer_value(val), type);
	}
	json_object_foreach(v->counts, type, val)
		receipt_count_add(v->res->counts, type, json_integer_value(val));
	v->res->sessions++;
	stream_reset(v);
	return true;
}

/* Checks member order, types and formats; fills @val. A line without
 * "sig" (receipts.sign "checkpoint") leaves val[RECEIPT_MEMBER_SIG] NULL. */
static bool check_members(struct verifier *v, json_t *obj, json_t **val,
			  uint8_t sig[RECEIPT_ED25519_SIG_LEN])
{
	static const enum receipt_member strings[] = {
		RECEIPT_MEMBER_TS, RECEIPT_MEMBER_SESSION, RECEIPT_MEMBER_TYPE,
		RECEIPT_MEMBER_DECISION, RECEIPT_MEMBER_POINT, RECEIPT_MEMBER_RULE,
		RECEIPT_MEMBER_POLICY, RECEIPT_MEMBER_REASON, RECEIPT_MEMBER_PREV,
		RECEIPT_MEMBER_SIG,
	};
	enum receipt_decision decision;
	enum receipt_point point;
	size_t i = 0;
	void *it;

	for (it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
		if (i == RECEIPT_MEMBER_COUNT)
			return fail(v, "extra member after \"sig\"");
		if (strcmp(json_object_iter_key(it), receipt_member_to_string((enum receipt_member)i)) != 0)
			return fail(v, "member %zu is not \"%s\" (members missing, "
				    "extra or out of order)",
				    i + 1, receipt_member_to_string((enum receipt_member)i));
		val[i++] = json_object_iter_value(it);
	}
	if (i == RECEIPT_MEMBER_SIG)
		val[RECEIPT_MEMBER_SIG] = NULL; /* unsigned: covered by a later line */
	else if (i != RECEIPT_MEMBER_COUNT)
		return fail(v, "member \"%s\" is missing", receipt_member_to_string((enum receipt_member)i));
	if (!json_is_integer(val[RECEIPT_MEMBER_V]) || json_integer_value(val[RECEIPT_MEMBER_V]) != 1)
		return fail(v, "\"v\" is not 1");
	if (!json_is_integer(val[RECEIPT_MEMBER_SEQ]) || json_integer_value(val[RECEIPT_MEMBER_SEQ]) < 0)
		return fail(v, "\"seq\" is not a non-negative integer");
	for (i = 0; i < ARRAY_SIZE(strings); i++)
		if (val[strings[i]] && !json_is_string(val[strings[i]]))
			return fail(v, "\"%s\" is not a string", receipt_member_to_string(strings[i]));
	if (!json_is_object(val[RECEIPT_MEMBER_SUBJECT]))
		return fail(v, "\"subject\" is not an object");
#define STR(m) json_string_value(val[m]), json_string_length(val[m])
	if (!receipt_ts_valid(STR(RECEIPT_MEMBER_TS)))
		return fail(v, "\"ts\" is not RFC 3339 UTC with milliseconds");
	if (json_string_length(val[RECEIPT_MEMBER_SESSION]) == 0)
		return fail(v, "\"session\" is empty");
	if (!receipt_type_valid(STR(RECEIPT_MEMBER_TYPE)))
		return fail(v, "\"type\" is not 1-%d characters of [a-z0-9._-]", RECEIPT_TYPE_MAX);
	if (!receipt_decision_from_string(json_string_value(val[RECEIPT_MEMBER_DECISION]),
					  &decision))
		return fail(v, "unknown \"decision\"");
	if (!receipt_point_from_string(json_string_value(val[RECEIPT_MEMBER_POINT]),
				       &point))
		return fail(v, "unknown \"point\"");
	if (!receipt_digest_valid(STR(RECEIPT_MEMBER_POLICY)))
		return fail(v, "\"policy\" is not sha256:<64 hex digits>");
	if (!receipt_hex64_valid(STR(RECEIPT_MEMBER_PREV)))
		return fail(v, "\"prev\" is not 64 lowercase hex digits");
	if (val[RECEIPT_MEMBER_SIG] &&
	    !receipt_b64_decode_exact(STR(RECEIPT_MEMBER_SIG), sig, RECEIPT_ED25519_SIG_LEN))
		return fail(v, "\"sig\" is not base64 of 64 bytes");
#undef STR
	return true;
}

/* The signed bytes: the line up to its final ,"sig":"..." plus the closing
 * brace. Returns their length, 0 when the line does not end that way. */
static size_t signed_bytes(struct verifier *v, const char *line, size_t len,
			   const char *sig_b64)
{
	size_t cut;

	if (len <= RECEIPT_SIG_TAIL_LEN)
		return 0;
	cut = len - RECEIPT_SIG_TAIL_LEN;
	if (memcmp(line + cut, receipt_sig_open, RECEIPT_SIG_OPEN_LEN) != 0 ||
	    memcmp(line + cut + RECEIPT_SIG_OPEN_LEN, sig_b64, RECEIPT_SIG_B64_LEN) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0)
		return 0;
	if (v->msg_cap < cut + 1) {
		v->msg_cap = cut + 1;
		v->msg = util_xrealloc(v->msg, v->msg_cap);
	}
	memcpy(v->msg, line, cut);
	v->msg[cut] = '}';
	return cut + 1;
}

/* A receipt.checkpoint's subject: {"size", "root", "note"}, the note a
 * C2SP checkpoint of origin "airlock/SESSION" and of exactly the lines
 * before this one (size = seq, root = the Merkle tree's), signed by the
 * stream's key under the origin's name. */
static bool check_checkpoint(struct verifier *v, json_t *subject, int64_t seq)
{
	json_t *size = json_object_get(subject, "size");
	json_t *root = json_object_get(subject, "root");
	json_t *note = json_object_get(subject, "note");
	struct tlog_checkpoint c;
	merkle_hash want;
	char why[128], *origin, *b64;
	bool ok = false;

	if (!json_is_integer(size) || !json_is_string(root) || !json_is_string(note) ||
	    json_object_size(subject) != 3)
		return fail(v, "receipt.checkpoint subject is not {\"size\", \"root\", "
			    "\"note\"}");
	if (!tlog_checkpoint_parse(json_string_value(note), json_string_length(note), &c,
				   why, sizeof(why)))
		return fail(v, "receipt.checkpoint note: %s", why);
	origin = util_xasprintf(TLOG_ORIGIN_PREFIX "%s", v->session);
	merkle_root(&v->tree, want);
	b64 = tlog_b64(c.root, MERKLE_HASH_LEN);
	if (strcmp(c.origin, origin) != 0)
		fail(v, "receipt.checkpoint origin is not %.64s (a checkpoint of "
		     "another stream)", origin);
	else if (c.size != (uint64_t)seq || json_integer_value(size) != seq)
		fail(v, "receipt.checkpoint of %llu lines at seq %lld (a replayed or "
		     "moved checkpoint)", (unsigned long long)c.size, (long long)seq);
	else if (strcmp(b64, json_string_value(root)) != 0)
		fail(v, "receipt.checkpoint root differs from its note's");
	else if (memcmp(c.root, want, MERKLE_HASH_LEN) != 0)
		fail(v, "receipt.checkpoint root is not the Merkle tree hash of the "
		     "%lld lines before it", (long long)seq);
	else if (!tlog_note_verify(&c, origin, v->key_raw))
		fail(v, "receipt.checkpoint note is not signed by the stream's key");
	else
		ok = true;
	if (ok) {
		free(v->cp_body);
		v->cp_body = util_xstrdup(c.body);
		v->cp_line = v->lineno;
		if (v->ncps == v->cps_cap) {
			v->cps_cap = v->cps_cap ? 2 * v->cps_cap : 16;
			v->cps = util_xrealloc(v->cps, v->cps_cap * sizeof(*v->cps));
		}
		v->cps[v->ncps].size = c.size;
		v->cps[v->ncps++].body = util_xstrdup(c.body);
	}
	free(b64);
	free(origin);
	tlog_checkpoint_free(&c);
	return ok;
}

/* Does @arr (cosignature lines) hold a C2SP cosignature/v1 by the
 * --witness key over checkpoint @body? */
static bool cosigned(const struct verifier *v, const char *body, json_t *arr)
{
	struct tlog_checkpoint c;
	json_t *el;
	size_t i;

	json_array_foreach(arr, i, el) {
		const char *s = json_string_value(el), *sp;
		char name[256];

		if (!s || strncmp(s, "\xe2\x80\x94 ", 4) != 0 || !(sp = strchr(s + 4, ' ')) ||
		    (size_t)(sp - s - 4) >= sizeof(name))
			continue;
		memcpy(name, s + 4, (size_t)(sp - s - 4));
		name[sp - s - 4] = '\0';
		memset(&c, 0, sizeof(c));
		c.body = (char *)body;
		c.body_len = strlen(body);
		c.sigs = (char *)s;
		if (tlog_cosig_verify(&c, name, v->witness_raw, NULL))
			return true;
	}
	return false;
}

/* --witness: session.end's "cosignatures" hold a C2SP cosignature/v1 by
 * the witness key on the checkpoint of the line just before it. */
static bool check_cosignature(struct verifier *v, json_t *subject)
{
	if (!v->cp_body || v->cp_line + 1 != v->lineno)
		return fail(v, "--witness: the line before session.end is not a "
			    "receipt.checkpoint to be cosigned");
	if (!cosigned(v, v->cp_body, json_object_get(subject, "cosignatures")))
		return fail(v, "session.end has no cosignature by the --witness key on "
			    "the checkpoint before it");
	return true;
}

/* A receipt.cosignature line (a cosignature the witness gave as the
 * session went) names a checkpoint before it by its size; with --witness
 * its cosignature must verify over that checkpoint. */
static bool check_cosignature_line(struct verifier *v, json_t *subject)
{
	json_t *size = json_object_get(subject, "size");
	size_t i;

	if (!json_is_integer(size) || json_integer_value(size) <= 0 ||
	    !json_is_array(json_object_get(subject, "cosignatures")))
		return fail(v, "receipt.cosignature subject lacks its size or cosignatures");
	for (i = v->ncps; i-- > 0;)
		if (v->cps[i].size == (uint64_t)json_integer_value(size))
			break;
	if (i == SIZE_MAX)
		return fail(v, "receipt.cosignature of size %lld names no receipt.checkpoint "
			    "before it", (long long)json_integer_value(size));
	if (v->have_witness &&
	    !cosigned(v, v->cps[i].body, json_object_get(subject, "cosignatures")))
		return fail(v, "receipt.cosignature of size %lld is not a cosignature by the "
			    "--witness key of that checkpoint",
			    (long long)json_integer_value(size));
	return true;
}

static bool verify_line(struct verifier *v, const char *line, size_t len)
{
	json_t *obj = NULL, *val[RECEIPT_MEMBER_COUNT] = {NULL};
	uint8_t sig[RECEIPT_ED25519_SIG_LEN];
	const char *type;
	bool start, ok = false;
	json_error_t jerr;
	size_t msg_len;
	int64_t seq;

	v->lineno++;
	v->res->lines = v->lineno;
	if (len == 0) {
		fail(v, "empty line");
		goto out;
	}
	if (len > RECEIPT_LINE_MAX) {
		fail(v, "line longer than %zu bytes", RECEIPT_LINE_MAX);
		goto out;
	}
	obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj) {
		fail(v, "not valid JSON: %s", jerr.text);
		goto out;
	}
	if (!json_is_object(obj)) {
		fail(v, "not a JSON object");
		goto out;
	}
	if (!check_members(v, obj, val, sig))
		goto out;
	seq = json_integer_value(val[RECEIPT_MEMBER_SEQ]);
	type = json_string_value(val[RECEIPT_MEMBER_TYPE]);
	if (!val[RECEIPT_MEMBER_SIG]) {
		msg_len = 0;
		if (strcmp(type, "session.end") == 0 ||
		    strcmp(type, RECEIPT_CHECKPOINT_TYPE) == 0) {
			fail(v, "%s without \"sig\" (it is always signed)", type);
			goto out;
		}
	} else {
		msg_len = signed_bytes(v, line, len,
				       json_string_value(val[RECEIPT_MEMBER_SIG]));
		if (msg_len == 0) {
			fail(v, "line does not end with the \"sig\" member in compact form");
			goto out;
		}
	}
	start = receipt_type_opens_stream(type);
	if (!v->in_stream) {
		if (seq != 0 || !start) {
			fail(v, v->res->sessions == 0
				? "first line is not a session.start with seq 0"
				: "line after session.end does not start a new stream "
				  "(a session.start with seq 0)");
			goto out;
		}
		if (!stream_begin(v, val))
			goto out;
	} else if (!stream_continue(v, val, seq, start)) {
		goto out;
	}
	if (msg_len && !sig_valid(v->key, v->msg, msg_len, sig)) {
		fail(v, "bad signature (line altered, or signed by another key)");
		goto out;
	}
	if (strcmp(type, RECEIPT_CHECKPOINT_TYPE) == 0 &&
	    !check_checkpoint(v, val[RECEIPT_MEMBER_SUBJECT], seq))
		goto out;
	if (strcmp(type, RECEIPT_COSIGNATURE_TYPE) == 0 &&
	    !check_cosignature_line(v, val[RECEIPT_MEMBER_SUBJECT]))
		goto out;
	/* A signature covers its line and, through prev, every line before. */
	if (msg_len)
		v->uncovered = 0;
	else if (!v->uncovered)
		v->uncovered = v->lineno;
	receipt_count_add(v->counts, type, 1);
	v->next_seq = seq < INT64_MAX ? seq + 1 : -1;
	receipt_sha256_hex(line, len, v->prev);
	merkle_append(&v->tree, line, len);
	if (strcmp(type, "session.end") == 0 && v->have_witness &&
	    !check_cosignature(v, val[RECEIPT_MEMBER_SUBJECT]))
		goto out;
	if (strcmp(type, "session.end") == 0 && !stream_end(v, val[RECEIPT_MEMBER_SUBJECT]))
		goto out;
	ok = true;
out:
	json_decref(obj);
	return ok;
}

void receipt_verify_buffer(const char *text, size_t len, EVP_PKEY *pubkey,
			   struct receipt_verify_result *res)
{
	const char *p = text, *end = text + len;
	struct verifier v;

	verifier_init(&v, pubkey, res);
	while (p < end && !v.failed) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		verify_line(&v, p, n);
		p += n + (nl ? 1 : 0);
	}
	verifier_finish(&v);
}

void receipt_verify_set_witness(EVP_PKEY *witness)
{
	verify_witness = witness;
}

int receipt_verify_file(FILE *in, EVP_PKEY *pubkey,
			struct receipt_verify_result *res)
{
	const size_t cap = RECEIPT_LINE_MAX + 65536;
	char *buf = util_xmalloc(cap);
	size_t have = 0;
	struct verifier v;
	int rc = 0;

	verifier_init(&v, pubkey, res);
	while (!v.failed) {
		size_t n, start = 0;
		char *nl;

		errno = 0;
		n = fread(buf + have, 1, cap - have, in);

		if (n == 0 && ferror(in)) {
			rc = errno ? -errno : -EIO;
			break;
		}
		have += n;
		while (!v.failed && (nl = memchr(buf + start, '\n', have - start))) {
			verify_line(&v, buf + start, (size_t)(nl - buf) - start);
			start = (size_t)(nl - buf) + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (!v.failed && (n == 0 || have > RECEIPT_LINE_MAX)) {
			if (have > 0)
				verify_line(&v, buf, have);
			break;
		}
	}
	verifier_finish(&v);
	free(buf);
	return rc;
}

void receipt_verify_result_free(struct receipt_verify_result *res)
{
	json_decref(res->counts);
	res->counts = NULL;
}
