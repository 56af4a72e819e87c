/* SPDX-License-Identifier: Apache-2.0
 * test_keeper.c - the key holder as a real process: the supervisor's and a
 * worker's records become one chain, in order, that verifies; a worker
 * that asks what it may not loses its channel while the session goes on;
 * a worker's records batched are written in order before what it asks
 * next, and a malformed or forged batch costs its sender the channel and
 * nothing else; a stream that ends without END is left truncated; the
 * cost of a receipt
 * sent and forgotten, and of one whose seq is awaited, is measured and
 * printed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "ghapp.h"
#include "keeper.h"
#include "msg.h"
#include "receipt.h"
#include "tap.h"
#include "util.h"

#define POLICY "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char tmpdir[] = "/tmp/airlock-test-keeper.XXXXXX";

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void start(struct keeper *k, const char *events)
{
	struct keeper_config kc = { .events = events, .session = "sess-keeper-test",
				    .policy_digest = POLICY };
	char err[256];

	ASSERT(keeper_start(&kc, k, err, sizeof(err)) == 0);
	if (keeper_wait_ready(k, err, sizeof(err)) < 0) {
		tap_diag("key holder: %s", err);
		exit(1);
	}
}

static int record(struct keeper_link *l, bool want, const char *type,
		  enum receipt_decision d, enum receipt_point p, json_t *subject,
		  int64_t *seq)
{
	int64_t s;
	int r = keeper_record(l, want, type, d, p, "rule", subject, "reason", seq ? seq : &s);

	json_decref(subject);
	return r;
}

static void begin(struct keeper *k)
{
	json_t *sub = json_pack("{s:s}", "pubkey", k->pubkey);

	ASSERT(record(&k->link, false, "session.start", RECEIPT_INFO,
		      RECEIPT_POINT_SUPERVISOR, sub, NULL) == 0);
}

/* The stream at @path verifies; its lines' types in order into @types. */
static bool verifies(const char *path, char *types, size_t len)
{
	struct receipt_verify_result res;
	FILE *f = fopen(path, "r");
	char line[4096];
	bool ok;

	ASSERT(f);
	ASSERT(receipt_verify_file(f, NULL, &res) == 0);
	ok = res.ok;
	if (!ok)
		tap_diag("verify: line %zu: %s", res.bad_line, res.reason);
	receipt_verify_result_free(&res);
	rewind(f);
	types[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *t = strstr(line, "\"type\":\""), *e;

		if (!t)
			continue;
		t += 8;
		e = strchr(t, '"');
		if (e && strlen(types) + (size_t)(e - t) + 2 < len) {
			strncat(types, t, (size_t)(e - t));
			strcat(types, " ");
		}
	}
	fclose(f);
	return ok;
}

static void test_one_chain(void)
{
	char *events = util_xasprintf("%s/one.jsonl", tmpdir), types[1024], err[256];
	struct keeper_link w = { .fd = -1 };
	struct keeper k;
	int64_t seq = -7;

	start(&k, events);
	begin(&k);
	ASSERT(record(&k.link, false, "env.drop", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		      json_pack("{s:s}", "name", "X"), NULL) == 0);
	tap_is_int(keeper_new_channel(&k, &w.fd), 0, "a worker channel is made");
	tap_is_int(record(&w, false, "egress.allow", RECEIPT_ALLOW,
			  RECEIPT_POINT_EGRESS_PROXY, json_pack("{s:s}", "host", "a"), NULL),
		   0, "a worker's allow is sent without waiting");
	tap_is_int(record(&w, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, json_pack("{s:s}", "host", "b"), &seq),
		   0, "a worker's block waits for its seq");
	tap_is_int(seq, 3, "which is 3: after session.start, env.drop and the allow");
	tap_is_int(record(&w, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, NULL, &seq), 0, "another block");
	tap_is_int(seq, 4, "seq 4: no gap");
	{
		char *big = util_xmalloc(KEEPER_SUBJECT_MAX + 1);

		memset(big, 'x', KEEPER_SUBJECT_MAX);
		big[KEEPER_SUBJECT_MAX] = '\0';
		tap_is_int(record(&w, true, "http.request", RECEIPT_ALLOW,
				  RECEIPT_POINT_EGRESS_PROXY, json_pack("{s:s}", "path", big),
				  &seq), 0, "a record whose subject is too large for a request");
		tap_is_int(seq, 5, "is written all the same (seq 5)");
		free(big);
	}
	tap_is_int(keeper_end(&k, 7, err, sizeof(err)), 0, "END: session.end is written");
	keeper_link_close(&w);
	keeper_release(&k);
	{
		char *text = util_read_file(events, 1 << 20, NULL);

		tap_ok(text && strstr(text, "\"subject\":{\"error\":\"subject too large to "
					    "record\",\"subject_bytes\":65547}"),
		       "with its subject replaced by a note of its size");
		free(text);
	}
	tap_ok(verifies(events, types, sizeof(types)) &&
	       strcmp(types, "session.start env.drop egress.allow egress.block "
			     "egress.block http.request session.end ") == 0,
	       "one chain, in the order asked, that verifies (%s)", types);
	free(events);
}

static void test_bad_worker(void)
{
	char *events = util_xasprintf("%s/bad.jsonl", tmpdir), types[1024], err[256];
	struct keeper_link w = { .fd = -1 }, w2 = { .fd = -1 };
	struct keeper k;
	int64_t seq = -7;
	int r;

	start(&k, events);
	begin(&k);
	ASSERT(keeper_new_channel(&k, &w.fd) == 0);
	ASSERT(keeper_new_channel(&k, &w2.fd) == 0);
	/* A worker that speaks for the supervisor. */
	r = record(&w, true, "env.drop", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		   json_pack("{s:s}", "name", "FORGED"), &seq);
	tap_ok(r < 0 && seq == -1, "a worker recording at point supervisor gets no seq: "
	       "its channel is closed (%s)", strerror(-r));
	r = record(&w, false, "egress.allow", RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY,
		   NULL, NULL);
	tap_ok(r == -EPIPE || r == -ECONNRESET, "and stays closed (%s)", strerror(-r));
	tap_is_int(record(&w2, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, NULL, &seq), 0,
		   "another worker goes on");
	tap_is_int(seq, 1, "its block is seq 1: the refused request took none");
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "the session ends normally");
	keeper_link_close(&w);
	keeper_link_close(&w2);
	keeper_release(&k);
	tap_ok(verifies(events, types, sizeof(types)) && !strstr(types, "env.drop"),
	       "the stream verifies, without the forged line (%s)", types);
	free(events);
}

/* One record's fields into @m, as a worker's link puts them. */
static void put_rec(struct msg *m, uint32_t flags, const char *type, uint32_t point,
		    const char *subject)
{
	msg_put_u32(m, flags);
	msg_put_cstr(m, type);
	msg_put_u32(m, RECEIPT_ALLOW);
	msg_put_u32(m, point);
	msg_put_cstr(m, "rule");
	msg_put_cstr(m, subject);
	msg_put_cstr(m, "reason");
}

/* keeper_parse_batch() on the @len bytes of @m: the count, or -1. */
static int parse_batch(const struct msg *m, char *why, size_t whylen)
{
	struct msg_reader r;

	if (!msg_reader_init(&r, MSG_CHAN_KEEPER, m->buf, m->len)) {
		snprintf(why, whylen, "%s", r.error);
		return -1;
	}
	return keeper_parse_batch(&r, why, whylen);
}

/* A batch's framing is checked whole, in this process: what a hostile
 * worker may send instead of a batch is refused before any record. */
static void test_batch_framing(void)
{
	struct keeper_record_req req;
	struct msg_reader r;
	struct msg m = { 0 };
	char why[256] = "";
	int i;

	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"host\":\"a\"}");
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "");
	put_rec(&m, 0, "http.request", RECEIPT_POINT_EGRESS_PROXY, "{ \"n\": 1.5 }");
	ASSERT(msg_reader_init(&r, MSG_CHAN_KEEPER, m.buf, m.len));
	tap_is_int(keeper_parse_batch(&r, why, sizeof(why)), 3, "a batch of 3 records");
	tap_ok(keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       !req.subject && req.subject_len == 12 &&
	       memcmp(req.subject_text, "{\"host\":\"a\"}", 12) == 0,
	       "its canonical subject is taken as text, not parsed");
	tap_ok(keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       !req.subject && strcmp(req.subject_text, "{}") == 0,
	       "an empty subject is {}");
	tap_ok(keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       req.subject && json_is_object(req.subject),
	       "one that is not canonical is parsed by jansson");
	json_decref(req.subject);
	tap_ok(msg_end(&r), "and the batch is read to its end");

	msg_start(&m, MSG_RECORD_BATCH);
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0 && strstr(why, "empty"),
	       "an empty batch is refused (%s)", why);

	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{}");
	msg_put_u32(&m, 0);
	msg_put_cstr(&m, "egress.allow"); /* a record cut short */
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0 && strstr(why, "malformed"),
	       "a batch whose last record is cut short is refused whole (%s)", why);

	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{}");
	msg_put_u64(&m, 42); /* a field of another kind */
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0,
	       "a batch with a stray field after a record is refused (%s)", why);

	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, MSG_RECORD_WANT_SEQ, "egress.block", RECEIPT_POINT_EGRESS_PROXY, "{}");
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0 && strstr(why, "flags"),
	       "a batched record that wants its seq is refused (%s)", why);

	msg_start(&m, MSG_RECORD_BATCH);
	for (i = 0; i <= KEEPER_BATCH_RECORDS; i++)
		put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{}");
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0 && strstr(why, "more than"),
	       "a batch of %d records is refused (%s)", KEEPER_BATCH_RECORDS + 1, why);

	msg_start(&m, MSG_RECORD);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{}");
	tap_ok(parse_batch(&m, why, sizeof(why)) < 0, "a single record is not a batch");

	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"a\":1,\"a\":2}");
	put_rec(&m, 0, "env.drop", RECEIPT_POINT_SUPERVISOR, "{}");
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "[1]");
	put_rec(&m, 0, "Egress", RECEIPT_POINT_EGRESS_PROXY, "{}");
	put_rec(&m, 0, "session.start", RECEIPT_POINT_EGRESS_PROXY, "{}");
	ASSERT(msg_reader_init(&r, MSG_CHAN_KEEPER, m.buf, m.len));
	tap_is_int(keeper_parse_batch(&r, why, sizeof(why)), 5,
		   "a well-framed batch of records that are not");
	tap_ok(!keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       strstr(why, "not JSON"), "a duplicate key is refused (%s)", why);
	tap_ok(!keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       strstr(why, "point"), "a worker's record at point supervisor (%s)", why);
	tap_ok(!keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       strstr(why, "object"), "a subject that is no object (%s)", why);
	tap_ok(!keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       strstr(why, "type"), "a type outside the grammar (%s)", why);
	tap_ok(!keeper_batch_next(&r, KEEPER_PEER_WORKER, true, &req, why, sizeof(why)) &&
	       strstr(why, "may not record session.start"), "a worker's session.start (%s)",
	       why);
	msg_free(&m);
}

/* Sends @m raw on @l and asks for a block's seq after it: the seq, or -1
 * when the channel was dropped. */
static int64_t raw_then_block(struct keeper_link *l, const struct msg *m)
{
	int64_t seq = -7;

	if (msg_send(l->fd, m, -1, 0) < 0)
		return -1;
	if (record(l, true, "egress.block", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY,
		   NULL, &seq) < 0)
		return -1;
	return seq;
}

/* A worker's link batches the records that want no seq; they are written
 * in order before anything it asks later, and a hostile worker's bad
 * batch costs it its channel while the key holder goes on serving. */
static void test_batches(void)
{
	char *events = util_xasprintf("%s/batch.jsonl", tmpdir), types[1024], err[256];
	struct keeper_link w = { .fd = -1, .batching = true }, bad = { .fd = -1 };
	struct keeper k;
	struct msg m = { 0 };
	int64_t seq = -7;
	char *text;
	int i;

	start(&k, events);
	begin(&k);
	ASSERT(keeper_new_channel(&k, &w.fd) == 0);
	for (i = 0; i < 3; i++)
		ASSERT(record(&w, false, "egress.allow", RECEIPT_ALLOW,
			      RECEIPT_POINT_EGRESS_PROXY,
			      json_pack("{s:s, s:i}", "host", "a.example", "i", i), NULL) == 0);
	tap_is_int((int)w.nbatch, 3, "three records wait in the worker's batch");
	ASSERT(record(&w, false, "http.request", RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY,
		      json_pack("{s:f, s:s}", "usd", 0.25, "name", "caf\xc3\xa9"), NULL) == 0);
	tap_is_int(record(&w, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, NULL, &seq), 0,
		   "a block waits for its seq");
	tap_is_int(seq, 5, "seq 5: the batch went first, in one message");
	tap_is_int((int)w.nbatch, 0, "and the batch is empty");
	for (i = 0; i < KEEPER_BATCH_RECORDS + 2; i++)
		ASSERT(record(&w, false, "egress.allow", RECEIPT_ALLOW,
			      RECEIPT_POINT_EGRESS_PROXY, NULL, NULL) == 0);
	tap_is_int((int)w.nbatch, 2, "a full batch is sent without waiting for a flush");
	tap_is_int(keeper_link_flush(&w), 0, "the flush sends the rest");

	/* hostile: framing broken: none of the batch is written */
	ASSERT(keeper_new_channel(&k, &bad.fd) == 0);
	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"forged\":1}");
	msg_put_u32(&m, 0);
	tap_is_int(raw_then_block(&bad, &m), -1,
		   "a worker sending a malformed batch loses its channel");
	keeper_link_close(&bad);
	tap_is_int(record(&w, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, NULL, &seq), 0,
		   "the key holder goes on serving the others");
	tap_is_int(seq, 5 + 1 + KEEPER_BATCH_RECORDS + 2, "with no line taken (seq %lld)",
		   (long long)seq);
	/* hostile: a good record, then a forged one */
	ASSERT(keeper_new_channel(&k, &bad.fd) == 0);
	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"good\":1}");
	put_rec(&m, 0, "env.drop", RECEIPT_POINT_SUPERVISOR, "{\"forged\":2}");
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"after\":3}");
	tap_is_int(raw_then_block(&bad, &m), -1,
		   "a batch with a forged record costs the channel");
	keeper_link_close(&bad);
	/* hostile: a subject jansson refuses */
	ASSERT(keeper_new_channel(&k, &bad.fd) == 0);
	msg_start(&m, MSG_RECORD_BATCH);
	put_rec(&m, 0, "egress.allow", RECEIPT_POINT_EGRESS_PROXY, "{\"x\":1e400}");
	tap_is_int(raw_then_block(&bad, &m), -1, "so does a subject jansson refuses");
	keeper_link_close(&bad);
	tap_is_int(record(&w, true, "egress.block", RECEIPT_BLOCK,
			  RECEIPT_POINT_EGRESS_PROXY, NULL, &seq), 0, "the good worker goes on");
	tap_is_int(seq, 5 + 1 + KEEPER_BATCH_RECORDS + 2 + 2,
		   "after the good record before the forged one (seq %lld)", (long long)seq);
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "the session ends normally");
	keeper_link_close(&w);
	keeper_release(&k);
	tap_ok(verifies(events, types, sizeof(types)),
	       "the stream verifies (%.60s...)", types);
	text = util_read_file(events, 1 << 20, NULL);
	tap_ok(text && strstr(text, "\"subject\":{\"host\":\"a.example\",\"i\":2}") &&
	       strstr(text, "\"subject\":{\"usd\":0.25,\"name\":\"caf\xc3\xa9\"}"),
	       "canonical subjects as sent, the others as jansson prints them");
	tap_ok(text && strstr(text, "{\"good\":1}") && !strstr(text, "forged") &&
	       !strstr(text, "{\"after\":3}"),
	       "the record before the forged one is written, nothing from it on");
	free(text);
	msg_free(&m);
	free(events);
}

static void test_orphaned(void)
{
	char *events = util_xasprintf("%s/orphan.jsonl", tmpdir), types[1024];
	struct keeper k;
	int ws = 0;

	start(&k, events);
	begin(&k);
	ASSERT(record(&k.link, false, "env.drop", RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR,
		      NULL, NULL) == 0);
	/* The supervisor "dies": its channel closes without END. */
	close(k.link.fd);
	k.link.fd = -1;
	ASSERT(waitpid(k.pid, &ws, 0) == k.pid);
	k.pid = -1;
	tap_ok(WIFEXITED(ws) && WEXITSTATUS(ws) == 125,
	       "without END, the key holder exits 125 once the supervisor is gone");
	tap_ok(!verifies(events, types, sizeof(types)) &&
	       strcmp(types, "session.start env.drop ") == 0,
	       "and leaves the stream without session.end: truncated (%s)", types);
	keeper_release(&k);
	free(events);
}

/* base64url (no padding) to bytes; returns the length or -1. */
static int b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
	char *std = util_xmalloc(n + 4);
	size_t i, m = n;
	int r;

	for (i = 0; i < n; i++)
		std[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
	while (m % 4)
		std[m++] = '=';
	std[m] = '\0';
	if (3 * (m / 4) > cap) {
		free(std);
		return -1;
	}
	r = EVP_DecodeBlock(out, (unsigned char *)std, (int)m);
	if (r >= 0)
		r -= (int)(m - n); /* the padding decoded as zeros */
	free(std);
	return r;
}

/* The key holder signs the GitHub App's JWT with the key it loaded (the
 * signature verifies with the App's public key); a worker may not ask;
 * an unusable key is reported with the first request, not at start. */
static void test_jwt(void)
{
	char *events = util_xasprintf("%s/jwt.jsonl", tmpdir), err[512] = "";
	char *keyfile = util_xasprintf("%s/app.pem", tmpdir);
	char *badfile = util_xasprintf("%s/bad.pem", tmpdir);
	struct keeper_config kc = { .events = events, .session = "sess-jwt",
				    .policy_digest = POLICY, .github_app_key = keyfile,
				    .github_app_id = "Iv23liTest" };
	struct keeper_link w = { .fd = -1 };
	EVP_PKEY *key = EVP_RSA_gen(2048);
	unsigned char sig[1024];
	struct keeper k;
	FILE *f;
	char *jwt, *dot2;
	int sl, r;
	EVP_MD_CTX *md;

	ASSERT(key);
	f = fopen(keyfile, "w");
	ASSERT(f && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1);
	fclose(f);
	ASSERT(chmod(keyfile, 0600) == 0);
	ASSERT(keeper_start(&kc, &k, err, sizeof(err)) == 0);
	ASSERT(keeper_wait_ready(&k, err, sizeof(err)) == 0);
	begin(&k);
	jwt = keeper_sign_jwt(&k, err, sizeof(err));
	tap_ok(jwt != NULL, "the key holder signs the App's JWT (%s)", jwt ? "" : err);
	dot2 = jwt ? strrchr(jwt, '.') : NULL;
	sl = dot2 ? b64url_decode(dot2 + 1, strlen(dot2 + 1), sig, sizeof(sig)) : -1;
	md = EVP_MD_CTX_new();
	r = sl > 0 && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
	    EVP_DigestVerify(md, sig, (size_t)sl, (unsigned char *)jwt,
			     (size_t)(dot2 - jwt)) == 1;
	EVP_MD_CTX_free(md);
	tap_ok(r, "its RS256 signature verifies with the App's public key");
	if (jwt) {
		explicit_bzero(jwt, strlen(jwt));
		free(jwt);
	}
	ASSERT(keeper_new_channel(&k, &w.fd) == 0);
	msg_start(&w.out, MSG_JWT_SIGN);
	r = msg_send(w.fd, &w.out, -1, 0);
	{
		uint8_t buf[256];
		int fd = -1;
		ssize_t n = r == 0 ? msg_recv(w.fd, buf, sizeof(buf), &fd, 0) : -1;

		tap_ok(n <= 0, "a worker asking for the JWT gets nothing: its channel is closed");
	}
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "the session ends normally");
	keeper_link_close(&w);
	keeper_release(&k);

	f = fopen(badfile, "w");
	ASSERT(f && fputs("not a key\n", f) >= 0);
	fclose(f);
	kc.github_app_key = badfile;
	ASSERT(keeper_start(&kc, &k, err, sizeof(err)) == 0);
	tap_is_int(keeper_wait_ready(&k, err, sizeof(err)), 0,
		   "an unusable App key does not stop the key holder at start");
	begin(&k);
	jwt = keeper_sign_jwt(&k, err, sizeof(err));
	tap_ok(!jwt && strstr(err, "git.github_app.private_key_file") &&
	       strstr(err, "not a PEM private key"),
	       "the first JWT request says why: %s", err);
	free(jwt);
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "and the session can still end");
	keeper_release(&k);
	EVP_PKEY_free(key);
	unlink(keyfile);
	unlink(badfile);
	free(keyfile);
	free(badfile);
	free(events);
}

/* The cost of a receipt through the key holder, both ways, beside writing
 * it in this process. "Sent": what the sender spends per record, in
 * batches of BATCH that fit in the channel's buffer (each batch then
 * awaits one record, which is not counted), so the sender is not held back
 * by the key holder's signing; "throughput": the same records from the
 * first sent to the last written; "awaited": a round trip per record. */
#define BATCH 100

static void test_cost(void)
{
	const int n = 20000;
	char *events = util_xasprintf("%s/cost.jsonl", tmpdir), err[256];
	struct keeper_link w = { .fd = -1 };
	struct receipt_writer *rw;
	json_t *sub = json_pack("{s:s, s:i, s:s}", "host", "api.example.com", "port", 443,
				"method", "CONNECT");
	EVP_PKEY *key = receipt_key_generate();
	double t0, sent = 0, t_through, t_sync, t_local;
	struct keeper k;
	int64_t seq = 0, last = -1;
	int i, j, fails = 0;

	start(&k, events);
	begin(&k);
	ASSERT(keeper_new_channel(&k, &w.fd) == 0);
	t0 = now_us();
	for (i = 0; i < n; i += BATCH) {
		double t1 = now_us();

		for (j = 0; j < BATCH; j++)
			fails += keeper_record(&w, false, "egress.allow", RECEIPT_ALLOW,
					       RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]",
					       sub, "allowed", &seq) != 0;
		sent += now_us() - t1;
		/* Every record sent before is written before this one. */
		fails += keeper_record(&w, true, "egress.allow", RECEIPT_ALLOW,
				       RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]", sub,
				       "allowed", &last) != 0;
	}
	t_through = (now_us() - t0) / (n + n / BATCH);
	sent /= n;
	t0 = now_us();
	for (i = 0; i < n; i++)
		fails += keeper_record(&w, true, "egress.block", RECEIPT_BLOCK,
				       RECEIPT_POINT_EGRESS_PROXY, "egress.default", sub,
				       "denied", &seq) != 0;
	t_sync = (now_us() - t0) / n;
	tap_is_int(fails, 0, "%d records sent and forgotten, %d awaited: none failed",
		   n, n + n / BATCH);
	tap_is_int(last, n + n / BATCH, "the last awaited one after them has seq %d: "
		   "each batch was written before it", n + n / BATCH);
	tap_is_int(seq, 2 * n + n / BATCH, "and the last one seq %d: no gap",
		   2 * n + n / BATCH);
	tap_is_int(keeper_end(&k, 0, err, sizeof(err)), 0, "session.end");
	keeper_link_close(&w);
	keeper_release(&k);

	free(events);
	events = util_xasprintf("%s/local.jsonl", tmpdir);
	rw = receipt_open(events, key, "sess-local", POLICY, err, sizeof(err));
	ASSERT(rw);
	{
		char pub[64];
		json_t *s0;

		ASSERT(receipt_pubkey_b64(key, pub, sizeof(pub)));
		s0 = json_pack("{s:s}", "pubkey", pub);
		ASSERT(receipt_append(rw, "session.start", RECEIPT_INFO,
				      RECEIPT_POINT_SUPERVISOR, "s", s0, "") == 0);
		json_decref(s0);
	}
	t0 = now_us();
	for (i = 0; i < n; i++)
		ASSERT(receipt_append(rw, "egress.allow", RECEIPT_ALLOW,
				      RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]", sub,
				      "allowed") > 0);
	t_local = (now_us() - t0) / n;
	ASSERT(receipt_close(rw, 0) == 0);
	tap_diag("per receipt: written in this process %.1f us; through the key holder: "
		 "sent %.1f us, throughput %.1f us, awaited %.1f us", t_local, sent,
		 t_through, t_sync);
	json_decref(sub);
	EVP_PKEY_free(key);
	free(events);
}

static void cleanup(void)
{
	static const char *const names[] = { "one.jsonl", "bad.jsonl", "orphan.jsonl",
					      "cost.jsonl", "local.jsonl", "jwt.jsonl",
					      "batch.jsonl" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		char *p = util_xasprintf("%s/%s", tmpdir, names[i]);

		unlink(p);
		free(p);
	}
	rmdir(tmpdir);
}

int main(void)
{
	ASSERT(mkdtemp(tmpdir));
	signal(SIGPIPE, SIG_IGN);
	test_one_chain();
	test_bad_worker();
	test_batch_framing();
	test_batches();
	test_orphaned();
	test_jwt();
	test_cost();
	cleanup();
	return tap_done();
}
