/* SPDX-License-Identifier: Apache-2.0
 * receipt_proof.c - inclusion proofs of receipt lines: `airlock verify
 * --line SEQ EVENTS` makes them, `airlock verify --proof FILE` checks them
 * without the stream (docs/RECEIPTS.md, "Inclusion proofs").
 *
 * DOC: Theory of Operation
 *
 * A proof is one JSON object on one line, self-contained:
 *   {"v":1,"pubkey":B64,"index":SEQ,"line":TEXT,"checkpoint":NOTE,
 *    "path":[B64,...]}
 * "line" is the receipt's bytes (without the newline), "checkpoint" the
 * signed note of the stream's last receipt.checkpoint, "path" the RFC 9162
 * inclusion path of leaf SEQ in the tree of the checkpoint's size. Making
 * one verifies the whole stream first and then keeps every leaf hash of
 * the stream's last session (32 bytes a line, 64 with the inner nodes), so
 * that proofs for every line cost O(log^2 n) each. Checking one needs the
 * proof alone: the note's signature by "pubkey" (or the pinned key) under
 * the key name of its origin, the line's seq and session against the index
 * and the origin, and the path from the line's leaf hash to the root.
 */
#include "receipt_proof.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "merkle.h"
#include "receipt_line.h"
#include "tlog.h"
#include "util.h"

struct stream_scan {
	struct merkle_store store;
	size_t *off, *len;          /* each line of the last session */
	size_t n, cap;
	char *note;                 /* the last checkpoint's, or NULL */
	uint64_t note_size;
	char *pubkey;
};

static void scan_free(struct stream_scan *s)
{
	merkle_store_free(&s->store);
	free(s->off);
	free(s->len);
	free(s->note);
	free(s->pubkey);
}

static void scan_line(struct stream_scan *s, const char *text, const char *line,
		      size_t len)
{
	json_t *obj = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(obj, "type"));
	json_t *subject = json_object_get(obj, "subject");
	merkle_hash h;

	ASSERT(type); /* the stream verified */
	if (receipt_type_opens_stream(type)) {
		merkle_store_free(&s->store);
		merkle_store_init(&s->store);
		s->n = 0;
		free(s->note);
		s->note = NULL;
		free(s->pubkey);
		s->pubkey = util_xstrdup(json_string_value(json_object_get(subject, "pubkey")));
	}
	if (strcmp(type, RECEIPT_CHECKPOINT_TYPE) == 0) {
		free(s->note);
		s->note = util_xstrdup(json_string_value(json_object_get(subject, "note")));
		s->note_size = (uint64_t)json_integer_value(json_object_get(subject, "size"));
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->off = util_xrealloc(s->off, s->cap * sizeof(*s->off));
		s->len = util_xrealloc(s->len, s->cap * sizeof(*s->len));
	}
	s->off[s->n] = (size_t)(line - text);
	s->len[s->n] = len;
	s->n++;
	merkle_leaf_hash(line, len, h);
	merkle_store_append(&s->store, h);
	json_decref(obj);
}

static void print_proof(const struct stream_scan *s, const char *text, uint64_t seq,
			FILE *out)
{
	merkle_hash path[MERKLE_PROOF_MAX];
	json_t *j, *arr = json_array();
	char *dump;
	int n, i;

	n = merkle_store_inclusion(&s->store, seq, s->note_size, path);
	ASSERT(n >= 0 && arr);
	for (i = 0; i < n; i++) {
		char *b64 = tlog_b64(path[i], MERKLE_HASH_LEN);

		json_array_append_new(arr, json_string(b64));
		free(b64);
	}
	j = json_pack("{s:i, s:s, s:I, s:s%, s:s, s:o}", "v", 1, "pubkey", s->pubkey,
		      "index", (json_int_t)seq, "line", text + s->off[seq],
		      s->len[seq], "checkpoint", s->note, "path", arr);
	ASSERT(j);
	dump = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	ASSERT(dump);
	fputs(dump, out);
	fputc('\n', out);
	free(dump);
	json_decref(j);
}

int receipt_proof_make(const char *text, size_t len, int64_t seq, FILE *out,
		       char *err, size_t errlen)
{
	struct receipt_verify_result res;
	struct stream_scan s;
	const char *p = text, *end = text + len;
	uint64_t i;
	int rc = -1;

	receipt_verify_buffer(text, len, NULL, &res);
	if (!res.ok) {
		snprintf(err, errlen, "the stream does not verify: line %zu: %s",
			 res.bad_line, res.reason);
		receipt_verify_result_free(&res);
		return -1;
	}
	receipt_verify_result_free(&res);
	memset(&s, 0, sizeof(s));
	merkle_store_init(&s.store);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		scan_line(&s, text, p, n);
		p += n + (nl ? 1 : 0);
	}
	if (!s.note) {
		snprintf(err, errlen, "the stream has no receipt.checkpoint (it was "
			 "written with receipts.sign \"line\")");
		goto out;
	}
	if (seq >= 0 && (uint64_t)seq >= s.note_size) {
		snprintf(err, errlen, "line seq %lld is not in the last checkpoint (of "
			 "the %" PRIu64 " lines before it): it is signed itself",
			 (long long)seq, s.note_size);
		goto out;
	}
	if (seq >= 0)
		print_proof(&s, text, (uint64_t)seq, out);
	else
		for (i = 0; i < s.note_size; i++)
			print_proof(&s, text, i, out);
	rc = 0;
out:
	scan_free(&s);
	return rc;
}

__attribute__((format(printf, 3, 4))) static bool
bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return false;
}

/* The last note whose signature verified, and by which key: proofs of
 * one stream share their checkpoint, which is verified once. */
struct note_cache {
	char *note;
	uint8_t pub[32];
};

/* Checks one proof object; its session and seq into @summary. */
static bool check_one(json_t *j, const uint8_t *pin, struct note_cache *nc,
		      char *why, size_t whylen, char *summary, size_t slen)
{
	json_t *pk = json_object_get(j, "pubkey"), *idx = json_object_get(j, "index");
	json_t *line = json_object_get(j, "line"), *note = json_object_get(j, "checkpoint");
	json_t *path = json_object_get(j, "path"), *v = json_object_get(j, "v"), *el;
	merkle_hash hashes[MERKLE_PROOF_MAX], leaf;
	struct tlog_checkpoint c;
	uint8_t pub[32];
	json_t *obj = NULL;
	const char *session;
	char *origin = NULL;
	bool ok = false;
	size_t i;

	if (!json_is_object(j) || !json_is_integer(v) || json_integer_value(v) != 1 ||
	    !json_is_string(pk) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
	    !json_is_string(line) || !json_is_string(note) || !json_is_array(path))
		return bad(why, whylen, "not a proof object {v: 1, pubkey, index, line, "
			   "checkpoint, path}");
	if (tlog_unb64(json_string_value(pk), json_string_length(pk), pub, 32) != 32)
		return bad(why, whylen, "pubkey is not base64 of 32 bytes");
	if (pin && memcmp(pin, pub, 32) != 0)
		return bad(why, whylen, "pubkey is not the --pubkey key");
	if (json_array_size(path) > MERKLE_PROOF_MAX)
		return bad(why, whylen, "path is too long");
	json_array_foreach(path, i, el)
		if (!json_is_string(el) ||
		    tlog_unb64(json_string_value(el), json_string_length(el), hashes[i],
			       MERKLE_HASH_LEN) != MERKLE_HASH_LEN)
			return bad(why, whylen, "path[%zu] is not base64 of 32 bytes", i);
	if (!tlog_checkpoint_parse(json_string_value(note), json_string_length(note), &c,
				   why, whylen))
		return false;
	if (strncmp(c.origin, TLOG_ORIGIN_PREFIX, strlen(TLOG_ORIGIN_PREFIX)) != 0) {
		bad(why, whylen, "the checkpoint's origin is not airlock/SESSION");
		goto out;
	}
	if (!nc->note || strcmp(nc->note, json_string_value(note)) != 0 ||
	    memcmp(nc->pub, pub, 32) != 0) {
		if (!tlog_note_verify(&c, c.origin, pub)) {
			bad(why, whylen, "the checkpoint is not signed by the key %s",
			    pin ? "of --pubkey" : "the proof names");
			goto out;
		}
		free(nc->note);
		nc->note = util_xstrdup(json_string_value(note));
		memcpy(nc->pub, pub, 32);
	}
	obj = json_loadb(json_string_value(line), json_string_length(line),
			 JSON_REJECT_DUPLICATES, NULL);
	session = json_string_value(json_object_get(obj, "session"));
	if (!json_is_object(obj) || !session ||
	    !json_is_integer(json_object_get(obj, "seq"))) {
		bad(why, whylen, "line is not a receipt (seq, session)");
		goto out;
	}
	origin = util_xasprintf(TLOG_ORIGIN_PREFIX "%s", session);
	if (strcmp(origin, c.origin) != 0) {
		bad(why, whylen, "the line's session is not the checkpoint's origin");
		goto out;
	}
	if (json_integer_value(json_object_get(obj, "seq")) != json_integer_value(idx)) {
		bad(why, whylen, "the line's seq is not the proof's index");
		goto out;
	}
	merkle_leaf_hash(json_string_value(line), json_string_length(line), leaf);
	if (!merkle_verify_inclusion((uint64_t)json_integer_value(idx), c.size, leaf,
				     (const merkle_hash *)hashes, json_array_size(path),
				     c.root)) {
		bad(why, whylen, "the path does not lead from the line to the "
		    "checkpoint's root (line %lld of %" PRIu64 ")",
		    (long long)json_integer_value(idx), c.size);
		goto out;
	}
	snprintf(summary, slen, "line %lld of session %.128s is in its checkpoint of "
		 "%" PRIu64 " lines", (long long)json_integer_value(idx), session, c.size);
	ok = true;
out:
	free(origin);
	json_decref(obj);
	tlog_checkpoint_free(&c);
	return ok;
}

int receipt_proof_check(const char *text, size_t len, EVP_PKEY *pin, FILE *out,
			size_t *bad_line, char *why, size_t whylen)
{
	const char *p = text, *end = text + len;
	uint8_t pin_raw[32];
	struct note_cache nc = { NULL, { 0 } };
	char summary[256] = "";
	size_t lineno = 0, count = 0;
	int rc = -1;

	*bad_line = 0;
	if (pin && !receipt_key_raw_public(pin, pin_raw)) {
		snprintf(why, whylen, "--pubkey is not an Ed25519 key");
		return -1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *j;
		bool ok;

		lineno++;
		*bad_line = lineno;
		j = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
		ok = j && check_one(j, pin ? pin_raw : NULL, &nc, why, whylen, summary,
				    sizeof(summary));
		if (!j)
			snprintf(why, whylen, "not a JSON proof object");
		json_decref(j);
		if (!ok)
			goto out;
		count++;
		p += n + (nl ? 1 : 0);
	}
	if (count == 0) {
		*bad_line = 1;
		snprintf(why, whylen, "no proof");
		goto out;
	}
	*bad_line = 0;
	if (count == 1)
		fprintf(out, "ok: %s\n", summary);
	else
		fprintf(out, "ok: %zu proofs, each line is in its checkpoint\n", count);
	rc = 0;
out:
	free(nc.note);
	return rc;
}
