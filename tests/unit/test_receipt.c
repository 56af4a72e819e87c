/* SPDX-License-Identifier: Apache-2.0
 * test_receipt.c - the receipt stream: writing real streams, then tampering
 * with them every way the format rules out and checking that verification
 * fails at the right line. Lines are re-sealed (re-chained and re-signed)
 * by an implementation independent of the receipt modules, so the checks
 * behind the signature (formats, counts, session binding) are exercised
 * too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>

#include "receipt.h"
#include "receipt_line.h"
#include "tap.h"
#include "util.h"

#define POLICY "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

static char tmpdir[] = "/tmp/airlock-test-receipt.XXXXXX";
static EVP_PKEY *key_a, *key_b;

struct lines {
	char **v;
	size_t n;
};

static char *tmp_path(const char *name)
{
	return util_xasprintf("%s/%s", tmpdir, name);
}

static void remove_tmpdir(void)
{
	struct dirent *e;
	DIR *d = opendir(tmpdir);

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *p;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = tmp_path(e->d_name);
		unlink(p);
		free(p);
	}
	closedir(d);
	rmdir(tmpdir);
}

struct event {
	const char *type;
	enum receipt_decision decision;
	enum receipt_point point;
	const char *rule;
	const char *subject;
	const char *reason;
};

/* Line 2 is an allow, so that "allow" -> "block" is a one-word forgery. */
static const struct event events[] = {
	{"egress.allow", RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]",
	 "{\"host\":\"api.example.com\",\"port\":443,\"address\":\"192.0.2.10\"}",
	 "allowed by api.example.com"},
	{"egress.block", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY, "egress.default",
	 "{\"host\":\"evil.example\",\"port\":443}", "no rule matched"},
	{"env.drop", RECEIPT_WOULD_BLOCK, RECEIPT_POINT_SANDBOX, "env.pass",
	 "{\"name\":\"AWS_SECRET_ACCESS_KEY\"}", "not in env.pass"},
	{"git.block", RECEIPT_BLOCK, RECEIPT_POINT_GIT, "git.repos",
	 "{\"repo\":\"github.com/other/repo\",\"operation\":\"push\"}",
	 "repository not allowed"},
	{"egress.allow", RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY, "egress.allow[1]",
	 "{\"host\":\"registry.npmjs.org\",\"port\":443}", "allowed"},
	{"egress.block", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY, "egress.deny[0]",
	 "{\"host\":\"gist.github.com\",\"port\":443}", "denied \"quoted\" \\ \xc3\xa9"},
};

#define STREAM_LINES (ARRAY_SIZE(events) + 2)

static json_t *start_subject(EVP_PKEY *key)
{
	char pub[64];

	ASSERT(receipt_pubkey_b64(key, pub, sizeof(pub)));
	return json_pack("{s:s, s:{s:b}, s:s, s:s}", "mode", "shadow",
			 "capabilities", "userns", 1, "pubkey", pub, "argv0", "agent");
}

/* Writes one complete stream of STREAM_LINES lines to @dest. */
static bool write_stream(const char *dest, EVP_PKEY *key, const char *session,
			 int exit_status)
{
	struct receipt_writer *w;
	char err[256];
	json_t *subject;
	size_t i;
	bool ok;

	w = receipt_open(dest, key, session, POLICY, err, sizeof(err));
	if (!w) {
		tap_diag("receipt_open %s: %s", dest, err);
		return false;
	}
	subject = start_subject(key);
	ok = receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
			    "session", subject, "session started") == 0;
	json_decref(subject);
	for (i = 0; i < ARRAY_SIZE(events); i++) {
		const struct event *e = &events[i];

		subject = json_loads(e->subject, 0, NULL);
		ASSERT(subject);
		ok = ok && receipt_append(w, e->type, e->decision, e->point, e->rule,
					  subject, e->reason) == (int64_t)i + 1;
		json_decref(subject);
	}
	return receipt_close(w, exit_status) == 0 && ok;
}

static char *slurp(const char *path, size_t *len)
{
	char *s = util_read_file(path, 1 << 26, len);

	ASSERT(s);
	return s;
}

static struct lines split(const char *text)
{
	struct lines l = {NULL, 0};
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		l.v = util_xrealloc(l.v, (l.n + 1) * sizeof(*l.v));
		l.v[l.n++] = util_xstrndup(p, n);
		p += n + (nl ? 1 : 0);
	}
	return l;
}

static struct lines load_lines(const char *path)
{
	size_t len;
	char *s = slurp(path, &len);
	struct lines l = split(s);

	free(s);
	return l;
}

static struct lines copy_lines(const struct lines *src)
{
	struct lines l = {util_xcalloc(src->n + 1, sizeof(char *)), src->n};
	size_t i;

	for (i = 0; i < src->n; i++)
		l.v[i] = util_xstrdup(src->v[i]);
	return l;
}

static void free_lines(struct lines *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static char *join(const struct lines *l, bool final_newline)
{
	size_t i, len = 0;
	char *s, *p;

	for (i = 0; i < l->n; i++)
		len += strlen(l->v[i]) + 1;
	s = p = util_xmalloc(len + 1);
	for (i = 0; i < l->n; i++) {
		size_t n = strlen(l->v[i]);

		memcpy(p, l->v[i], n);
		p += n;
		*p++ = '\n';
	}
	if (!final_newline && p > s)
		p--;
	*p = '\0';
	return s;
}

static void remove_line(struct lines *l, size_t idx)
{
	free(l->v[idx]);
	memmove(&l->v[idx], &l->v[idx + 1], (l->n - idx - 1) * sizeof(char *));
	l->n--;
}

static void insert_line(struct lines *l, size_t idx, const char *s)
{
	l->v = util_xrealloc(l->v, (l->n + 1) * sizeof(char *));
	memmove(&l->v[idx + 1], &l->v[idx], (l->n - idx) * sizeof(char *));
	l->v[idx] = util_xstrdup(s);
	l->n++;
}

static void append_lines(struct lines *l, const struct lines *more)
{
	size_t i;

	for (i = 0; i < more->n; i++)
		insert_line(l, l->n, more->v[i]);
}

/* Replaces the first @from in line @idx by @to; false if absent. */
static bool edit(struct lines *l, size_t idx, const char *from, const char *to)
{
	char *line = l->v[idx], *at = strstr(line, from), *out;

	if (!at)
		return false;
	out = util_xasprintf("%.*s%s%s", (int)(at - line), line, to, at + strlen(from));
	free(line);
	l->v[idx] = out;
	return true;
}

static char *last_strstr(const char *hay, const char *needle)
{
	char *p = strstr(hay, needle), *last = NULL;

	while (p) {
		last = p;
		p = strstr(p + 1, needle);
	}
	return last;
}

static void sha256_hex_of(const char *s, char out[65])
{
	uint8_t md[32];

	ASSERT(EVP_Digest(s, strlen(s), md, NULL, EVP_sha256(), NULL) == 1);
	util_hex(md, sizeof(md), out);
}

enum {
	RESEAL_RECHAIN = 1,     /* prev = SHA-256 of the line before, zeros at seq 0 */
	RESEAL_RENUMBER = 2,    /* seq follows the line before, 0 for session.start */
};

/* Re-seals line @idx as a forger holding @key would: optionally renumbered
 * and re-chained (@how), then freshly signed. */
static void reseal_line(struct lines *l, size_t idx, EVP_PKEY *key, int how)
{
	char *line = l->v[idx], *cut, *prev, *body, *out;
	char b64[89];
	bool start = strstr(line, "\"type\":\"session.start\"") != NULL;
	uint8_t sig[64];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *ctx;

	if (how & RESEAL_RENUMBER) {
		long long seq = 0;
		char num[32], *seqp;

		if (!start && idx > 0) {
			seqp = strstr(l->v[idx - 1], "\"seq\":");
			ASSERT(seqp);
			seq = strtoll(seqp + 6, NULL, 10) + 1;
		}
		seqp = strstr(line, "\"seq\":") + 6;
		snprintf(num, sizeof(num), "%lld", seq);
		out = util_xasprintf("%.*s%s%s", (int)(seqp - line), line, num,
				     seqp + strspn(seqp, "0123456789"));
		free(line);
		line = l->v[idx] = out;
	}
	cut = last_strstr(line, ",\"sig\":\"");
	prev = last_strstr(line, "\"prev\":\"");
	ASSERT(cut && prev);
	if (how & RESEAL_RECHAIN) {
		char hex[65];

		if (strstr(line, "\"seq\":0,") || idx == 0)
			memcpy(hex, ZEROS, sizeof(hex));
		else
			sha256_hex_of(l->v[idx - 1], hex);
		memcpy(prev + 8, hex, 64);
	}
	body = util_xasprintf("%.*s}", (int)(cut - line), line);
	ctx = EVP_MD_CTX_new();
	ASSERT(ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) == 1);
	ASSERT(EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)body,
			      strlen(body)) == 1);
	EVP_MD_CTX_free(ctx);
	EVP_EncodeBlock((unsigned char *)b64, sig, 64);
	out = util_xasprintf("%.*s,\"sig\":\"%s\"}", (int)(cut - line), line, b64);
	free(body);
	free(line);
	l->v[idx] = out;
}

/* Replaces the end @from of line @idx by @to. */
static void edit_tail(struct lines *l, size_t idx, const char *from, const char *to)
{
	char *line = l->v[idx];
	size_t n = strlen(line), k = strlen(from);

	ASSERT(n >= k && !strcmp(line + n - k, from));
	l->v[idx] = util_xasprintf("%.*s%s", (int)(n - k), line, to);
	free(line);
}

/* Changes the first base64 character of line @idx's sig: still base64 of 64
 * bytes, but not the signature. */
static void flip_sig_char(struct lines *l, size_t idx)
{
	char *at = last_strstr(l->v[idx], ",\"sig\":\"");

	ASSERT(at);
	at[8] = at[8] == 'A' ? 'B' : 'A';
}

static void reseal(struct lines *l, size_t from, EVP_PKEY *key, int how)
{
	size_t i;

	for (i = from; i < l->n; i++)
		reseal_line(l, i, key, how);
}

static void verify_both(const char *text, size_t len, EVP_PKEY *pin,
			struct receipt_verify_result *res)
{
	struct receipt_verify_result fres;
	char *path = tmp_path("verify-input");
	FILE *f;
	int rc;

	receipt_verify_buffer(text, len, pin, res);
	f = fopen(path, "w+");
	ASSERT(f && fwrite(text, 1, len, f) == len && fseek(f, 0, SEEK_SET) == 0);
	rc = receipt_verify_file(f, pin, &fres);
	fclose(f);
	free(path);
	if (rc != 0 || fres.ok != res->ok || fres.bad_line != res->bad_line ||
	    strcmp(fres.reason, res->reason) != 0 || fres.lines != res->lines ||
	    fres.sessions != res->sessions || !json_equal(fres.counts, res->counts)) {
		res->ok = false;
		res->bad_line = (size_t)-1;
		snprintf(res->reason, sizeof(res->reason),
			 "file reader disagrees: rc %d ok %d line %zu: %.180s", rc,
			 fres.ok, fres.bad_line, fres.reason);
	}
	receipt_verify_result_free(&fres);
}

static void expect_fail_text(const char *text, size_t len, EVP_PKEY *pin,
			     size_t want_line, const char *want, const char *what)
{
	struct receipt_verify_result res;

	verify_both(text, len, pin, &res);
	if (!tap_ok(!res.ok && res.bad_line == want_line && strstr(res.reason, want),
		    "%s: fails at line %zu (%s)", what, want_line, want))
		tap_diag("got ok=%d line %zu: %s", res.ok, res.bad_line, res.reason);
	receipt_verify_result_free(&res);
}

static void expect_fail(const struct lines *l, EVP_PKEY *pin, size_t want_line,
			const char *want, const char *what)
{
	char *text = join(l, true);

	expect_fail_text(text, strlen(text), pin, want_line, want, what);
	free(text);
}

static void expect_ok_text(const char *text, size_t len, EVP_PKEY *pin,
			   size_t lines, size_t sessions, const char *what)
{
	struct receipt_verify_result res;

	verify_both(text, len, pin, &res);
	if (!tap_ok(res.ok && res.bad_line == 0 && res.lines == lines &&
		    res.sessions == sessions,
		    "%s: verifies (%zu lines, %zu sessions)", what, lines, sessions))
		tap_diag("got ok=%d lines %zu sessions %zu line %zu: %s", res.ok,
			 res.lines, res.sessions, res.bad_line, res.reason);
	receipt_verify_result_free(&res);
}

static void expect_ok(const struct lines *l, EVP_PKEY *pin, size_t sessions,
		      const char *what)
{
	char *text = join(l, true);

	expect_ok_text(text, strlen(text), pin, l->n, sessions, what);
	free(text);
}

/* A copy of @base with line @idx (0-based) edited and the stream resealed
 * from there with key_a. */
static void expect_resealed_fail(const struct lines *base, size_t idx,
				 const char *from, const char *to,
				 const char *want, const char *what)
{
	struct lines l = copy_lines(base);

	if (!edit(&l, idx, from, to)) {
		tap_ok(false, "%s: the edit applies", what);
		free_lines(&l);
		return;
	}
	reseal(&l, idx, key_a, RESEAL_RECHAIN);
	expect_fail(&l, NULL, idx + 1, want, what);
	free_lines(&l);
}

static void test_names(void)
{
	tap_is_str(receipt_decision_to_string(RECEIPT_WOULD_BLOCK), "would_block",
		   "decision names");
	tap_is_str(receipt_point_to_string(RECEIPT_POINT_EGRESS_PROXY),
		   "egress-proxy", "point names");
}

static void test_written_format(const struct lines *l)
{
	static const char *const names[] = {"v", "seq", "ts", "session", "type",
					    "decision", "point", "rule", "policy",
					    "subject", "reason", "prev", "sig"};
	const size_t nnames = ARRAY_SIZE(names);
	bool order = true, chain = true, sigs = true, compact = true;
	EVP_PKEY *pub;
	uint8_t raw[32];
	size_t i, rawlen = sizeof(raw);

	tap_is_int(l->n, STREAM_LINES, "the stream has session.start, %zu events "
		   "and session.end", ARRAY_SIZE(events));
	ASSERT(EVP_PKEY_get_raw_public_key(key_a, raw, &rawlen) == 1);
	pub = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, rawlen);
	for (i = 0; i < l->n; i++) {
		json_t *obj = json_loads(l->v[i], JSON_REJECT_DUPLICATES, NULL);
		char *cut = last_strstr(l->v[i], ",\"sig\":\""), *body, hex[65];
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();
		uint8_t sig[66];
		size_t k = 0;
		void *it;

		for (it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
			if (k < nnames && strcmp(json_object_iter_key(it), names[k]) != 0)
				order = false;
			k++;
		}
		order = order && k == nnames;
		if (strstr(l->v[i], "\": ") || strstr(l->v[i], ", \"") ||
		    strstr(l->v[i], "{ "))
			compact = false;
		if (i == 0)
			memcpy(hex, ZEROS, sizeof(hex));
		else
			sha256_hex_of(l->v[i - 1], hex);
		if (strcmp(json_string_value(json_object_get(obj, "prev")), hex) != 0)
			chain = false;
		body = util_xasprintf("%.*s}", (int)(cut - l->v[i]), l->v[i]);
		if (EVP_DecodeBlock(sig, (const unsigned char *)cut + 8, 88) != 66 ||
		    EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pub) != 1 ||
		    EVP_DigestVerify(ctx, sig, 64, (const unsigned char *)body,
				     strlen(body)) != 1)
			sigs = false;
		if (json_integer_value(json_object_get(obj, "seq")) != (json_int_t)i)
			chain = false;
		EVP_MD_CTX_free(ctx);
		free(body);
		json_decref(obj);
	}
	EVP_PKEY_free(pub);
	tap_ok(order, "every line has the 13 members in the format's order");
	tap_ok(compact, "lines are compact JSON");
	tap_ok(!strncmp(l->v[0], "{\"v\":1,\"seq\":0,\"ts\":\"", 21),
	       "line 1 starts {\"v\":1,\"seq\":0,\"ts\":\"");
	tap_ok(chain, "seq counts from 0 and prev is the SHA-256 of the previous "
	       "line (zeros first), recomputed independently");
	tap_ok(sigs, "each sig is Ed25519 over the line without its sig member, "
	       "checked independently");
	tap_ok(strstr(l->v[0], "\"type\":\"session.start\"") &&
	       strstr(l->v[0], "\"decision\":\"info\",\"point\":\"supervisor\""),
	       "line 1 is session.start");
	tap_ok(strstr(l->v[l->n - 1],
		      "\"type\":\"session.end\",\"decision\":\"info\",\"point\":"
		      "\"supervisor\",\"rule\":\"session\"") &&
	       strstr(l->v[l->n - 1],
		      "\"subject\":{\"exit\":3,\"counts\":{\"egress.allow\":2,"
		      "\"egress.block\":2,\"env.drop\":1,\"git.block\":1,"
		      "\"session.end\":1,\"session.start\":1}}"),
	       "session.end carries exit and sorted counts including start and end");
	tap_ok(strstr(l->v[2], "\"subject\":{\"host\":\"evil.example\",\"port\":443}") &&
	       strstr(l->v[3], "\"decision\":\"would_block\",\"point\":\"sandbox\""),
	       "subject, decision and point are written as given");
}

static void test_tamper(const struct lines *base)
{
	struct lines l;
	char *text;

	expect_ok(base, NULL, 1, "an untouched stream");
	expect_ok(base, key_a, 1, "with --pubkey of the signer");

	l = copy_lines(base);
	ASSERT(edit(&l, 1, "\"decision\":\"allow\"", "\"decision\":\"block\""));
	expect_fail(&l, NULL, 2, "bad signature", "allow changed to block in line 2");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 2, "evil.example", "evil.exampla"));
	expect_fail(&l, NULL, 3, "bad signature", "subject altered in line 3");
	free_lines(&l);

	l = copy_lines(base);
	flip_sig_char(&l, 3);
	expect_fail(&l, NULL, 4, "bad signature", "a signature character altered in line 4");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 5, "\"session\":\"sess-1\"", "\"session\":\"sess-2\""));
	expect_fail(&l, NULL, 6, "session differs from the session.start at line 1",
		    "session altered in line 6");
	free_lines(&l);

	l = copy_lines(base);
	text = l.v[1];
	l.v[1] = l.v[2];
	l.v[2] = text;
	expect_fail(&l, NULL, 2, "seq 2, expected 1", "lines 2 and 3 swapped");
	free_lines(&l);

	l = copy_lines(base);
	insert_line(&l, 2, l.v[1]);
	expect_fail(&l, NULL, 3, "seq 1, expected 2", "a copy of line 2 inserted");
	free_lines(&l);

	l = copy_lines(base);
	insert_line(&l, 3, l.v[3]);
	reseal_line(&l, 3, key_b, RESEAL_RECHAIN | RESEAL_RENUMBER);
	reseal(&l, 4, key_a, RESEAL_RECHAIN | RESEAL_RENUMBER);
	expect_fail(&l, NULL, 4, "bad signature",
		    "a line signed by another key inserted as line 4, the rest "
		    "re-chained");
	free_lines(&l);

	l = copy_lines(base);
	remove_line(&l, 3);
	expect_fail(&l, NULL, 4, "seq 4, expected 3", "line 4 removed");
	free_lines(&l);

	l = copy_lines(base);
	remove_line(&l, 3);
	reseal(&l, 3, key_a, RESEAL_RECHAIN | RESEAL_RENUMBER);
	expect_fail(&l, NULL, l.n, "counts 1 \"env.drop\" lines, the stream has none",
		    "line 4 removed and the rest re-signed with the real key: "
		    "session.end counts");
	free_lines(&l);

	l = copy_lines(base);
	remove_line(&l, 3);
	reseal(&l, 3, key_a, RESEAL_RENUMBER);
	expect_fail(&l, NULL, 4, "prev is not the SHA-256 of line 3",
		    "line 4 removed, the rest renumbered and re-signed but not "
		    "re-chained");
	free_lines(&l);

	l = copy_lines(base);
	last_strstr(l.v[2], "\"prev\":\"")[8] = 'G';
	reseal_line(&l, 2, key_a, 0);
	expect_fail(&l, NULL, 3, "\"prev\" is not 64 lowercase hex digits",
		    "a prev that is not hex");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 0, "\"prev\":\"00000000", "\"prev\":\"10000000"));
	reseal_line(&l, 0, key_a, 0);
	reseal(&l, 1, key_a, RESEAL_RECHAIN);
	expect_fail(&l, NULL, 1, "prev of a seq 0 line is not 64 zeros",
		    "a session.start whose prev is not zeros");
	free_lines(&l);

	l = copy_lines(base);
	remove_line(&l, l.n - 1);
	expect_fail(&l, NULL, l.n, "ends without session.end (truncated)",
		    "last line removed");
	free_lines(&l);

	l = copy_lines(base);
	remove_line(&l, 0);
	expect_fail(&l, NULL, 1, "first line is not a session.start with seq 0",
		    "first line removed");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, l.n - 1, "\"egress.allow\":2", "\"egress.allow\":3"));
	reseal(&l, l.n - 1, key_a, RESEAL_RECHAIN);
	expect_fail(&l, NULL, l.n, "counts 3 \"egress.allow\" lines, the stream has 2",
		    "session.end counts altered and re-signed");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 2, "no rule matched", "no rule matched at all"));
	reseal(&l, 2, key_a, RESEAL_RECHAIN);
	expect_ok(&l, NULL, 1, "control: a reason altered and the rest re-signed "
		  "with the real key");
	expect_fail(&l, key_b, 1, "session.start pubkey is not the --pubkey key",
		    "control again with the wrong --pubkey");
	free_lines(&l);

	expect_fail(base, key_b, 1, "session.start pubkey is not the --pubkey key",
		    "the wrong --pubkey");

	l = copy_lines(base);
	reseal(&l, 0, key_b, RESEAL_RECHAIN);
	expect_fail(&l, NULL, 1, "bad signature",
		    "every line re-signed by another key but session.start names "
		    "the first");
	free_lines(&l);

	l = copy_lines(base);
	insert_line(&l, 4, "");
	expect_fail(&l, NULL, 5, "empty line", "an empty line inserted");
	free_lines(&l);

	l = copy_lines(base);
	insert_line(&l, l.n, base->v[1]);
	expect_fail(&l, NULL, l.n, "does not start a new stream",
		    "a line appended after session.end");
	free_lines(&l);

	l = copy_lines(base);
	edit_tail(&l, 4, "}", "}\r");
	expect_fail(&l, NULL, 5, "does not end with the \"sig\" member",
		    "a carriage return after line 5");
	free_lines(&l);

	l = copy_lines(base);
	edit_tail(&l, 4, "}", ",\"x\":1}");
	expect_fail(&l, NULL, 5, "extra member after \"sig\"",
		    "a member after sig in line 5");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 1, "{\"v\":1,", "{\"v\":1,\"v\":1,"));
	expect_fail(&l, NULL, 2, "not valid JSON", "a duplicate member in line 2");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 1, ",\"sig\":\"", ",\"zig\":\""));
	expect_fail(&l, NULL, 2, "member 13 is not \"sig\"", "sig renamed in line 2");
	free_lines(&l);

	l = copy_lines(base);
	free(l.v[1]);
	l.v[1] = util_xstrdup("{\"v\":1,\"seq\":1");
	expect_fail(&l, NULL, 2, "not valid JSON", "line 2 cut short");
	free_lines(&l);

	l = copy_lines(base);
	free(l.v[1]);
	l.v[1] = util_xstrdup("[1,2]");
	expect_fail(&l, NULL, 2, "not a JSON object", "line 2 is an array");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 1, "\"sig\":\"", "\"sig\":\"AAAA"));
	expect_fail(&l, NULL, 2, "\"sig\" is not base64 of 64 bytes",
		    "a sig of the wrong length");
	free_lines(&l);

	l = copy_lines(base);
	ASSERT(edit(&l, 1, "==\"}", "=A\"}"));
	expect_fail(&l, NULL, 2, "\"sig\" is not base64 of 64 bytes",
		    "a sig with bad padding");
	free_lines(&l);

	text = util_xmalloc(RECEIPT_LINE_MAX + 3);
	memset(text, 'x', RECEIPT_LINE_MAX + 1);
	text[RECEIPT_LINE_MAX + 1] = '\n';
	expect_fail_text(text, RECEIPT_LINE_MAX + 2, NULL, 1, "line longer than",
			 "a line over RECEIPT_LINE_MAX");
	free(text);
	expect_fail_text("", 0, NULL, 1, "empty stream", "an empty file");
	expect_fail_text("\n", 1, NULL, 1, "empty line", "a file of one newline");
	expect_fail_text("hello\n", 6, NULL, 1, "not valid JSON", "a text file");
}

/* Checks behind the signature: the line is edited and re-signed with the
 * real key, so only the format or binding check can catch it. */
static void test_resealed(const struct lines *base)
{
	char ts[64];
	const char *at = strstr(base->v[2], "\"ts\":\"");

	ASSERT(at);
	snprintf(ts, sizeof(ts), "%.30s", at);
	expect_resealed_fail(base, 2, ts, "\"ts\":\"2026-02-30T12:00:00.000",
			     "\"ts\" is not RFC 3339", "an impossible date");
	expect_resealed_fail(base, 2, ts, "\"ts\":\"2026-11-30 12:00:00.000",
			     "\"ts\" is not RFC 3339", "a ts without T");
	expect_resealed_fail(base, 2, "Z\",\"session\"", "\",\"session\"",
			     "\"ts\" is not RFC 3339", "a ts without Z");
	expect_resealed_fail(base, 2, "{\"v\":1,", "{\"v\":2,", "\"v\" is not 1",
			     "v 2");
	expect_resealed_fail(base, 2, "{\"v\":1,", "{\"v\":1.0,", "\"v\" is not 1",
			     "v 1.0");
	expect_resealed_fail(base, 2, "\"seq\":2,", "\"seq\":\"2\",",
			     "\"seq\" is not a non-negative integer", "seq a string");
	expect_resealed_fail(base, 2, "\"decision\":\"block\"",
			     "\"decision\":\"deny\"", "unknown \"decision\"",
			     "an unknown decision");
	expect_resealed_fail(base, 2, "\"point\":\"egress-proxy\"",
			     "\"point\":\"proxy\"", "unknown \"point\"",
			     "an unknown point");
	expect_resealed_fail(base, 2, "\"type\":\"egress.block\"",
			     "\"type\":\"Egress block\"", "\"type\" is not",
			     "a type outside [a-z0-9._-]");
	expect_resealed_fail(base, 2, "\"rule\":\"egress.default\",", "",
			     "member 8 is not \"rule\"", "a missing member");
	expect_resealed_fail(base, 2,
			     "\"decision\":\"block\",\"point\":\"egress-proxy\"",
			     "\"point\":\"egress-proxy\",\"decision\":\"block\"",
			     "member 6 is not \"decision\"", "two members swapped");
	expect_resealed_fail(base, 2, "\"reason\":", "\"extra\":0,\"reason\":",
			     "member 11 is not \"reason\"", "an extra member");
	expect_resealed_fail(base, 2, "\"subject\":{\"host\":\"evil.example\",\"port\":443}",
			     "\"subject\":\"evil.example\"",
			     "\"subject\" is not an object", "a string subject");
	expect_resealed_fail(base, 2, "\"rule\":\"egress.default\"", "\"rule\":7",
			     "\"rule\" is not a string", "a number rule");
	expect_resealed_fail(base, 2, "\"session\":\"sess-1\"", "\"session\":\"sess-9\"",
			     "session differs from the session.start at line 1",
			     "a line of another session");
	expect_resealed_fail(base, 2, "\"session\":\"sess-1\"", "\"session\":\"\"",
			     "\"session\" is empty", "an empty session");
	expect_resealed_fail(base, 2, "\"policy\":\"sha256:0123", "\"policy\":\"sha256:f123",
			     "policy differs from the session.start at line 1",
			     "a line under another policy");
	expect_resealed_fail(base, 2, "\"policy\":\"sha256:0123", "\"policy\":\"sha256:0",
			     "\"policy\" is not sha256:", "a short policy digest");
	expect_resealed_fail(base, 0, "\"pubkey\":", "\"pubkez\":",
			     "session.start subject has no \"pubkey\"",
			     "session.start without pubkey");
	expect_resealed_fail(base, 0, "\"pubkey\":\"", "\"pubkey\":\"AAAA",
			     "session.start subject has no \"pubkey\"",
			     "session.start with a pubkey of the wrong size");
	expect_resealed_fail(base, 0, "\"seq\":0,", "\"seq\":1,",
			     "first line is not a session.start with seq 0",
			     "a stream starting at seq 1");
	expect_resealed_fail(base, 2, "\"type\":\"egress.block\"",
			     "\"type\":\"session.start\"",
			     "session.start inside a stream", "a second session.start");
	expect_resealed_fail(base, base->n - 1, "{\"exit\":3,", "{\"exit\":\"3\",",
			     "needs an integer \"exit\"", "a session.end exit string");
	expect_resealed_fail(base, base->n - 1, "\"git.block\":1,", "\"git.block\":1.0,",
			     "\"git.block\" is not an integer",
			     "a session.end count that is not an integer");
	expect_resealed_fail(base, base->n - 1, "\"env.drop\":1,", "",
			     "counts 0 \"env.drop\" lines, the stream has 1",
			     "a type missing from the session.end counts");
}

static void test_multi(const struct lines *base)
{
	char *path = tmp_path("multi.jsonl"), *text;
	struct receipt_verify_result res;
	struct lines l, two;
	size_t len;

	ASSERT(write_stream(path, key_a, "sess-1", 0));
	ASSERT(write_stream(path, key_b, "sess-2", 1));
	ASSERT(write_stream(path, key_a, "sess-3", 2));
	text = slurp(path, &len);
	verify_both(text, len, NULL, &res);
	tap_ok(res.ok && res.lines == 3 * STREAM_LINES && res.sessions == 3,
	       "three streams appended to one path verify (two keys, no --pubkey)");
	tap_is_int(json_integer_value(json_object_get(res.counts, "egress.allow")), 6,
		   "counts add up over the sessions");
	tap_is_int(json_integer_value(json_object_get(res.counts, "session.end")), 3,
		   "one session.end per session");
	receipt_verify_result_free(&res);
	expect_fail_text(text, len, key_a, STREAM_LINES + 1,
			 "session.start pubkey is not the --pubkey key",
			 "--pubkey of the first key names the second stream");

	l = split(text);
	remove_line(&l, STREAM_LINES - 1);
	expect_fail(&l, NULL, STREAM_LINES, "session.start before the session.end",
		    "the first stream's session.end removed");
	free_lines(&l);

	l = split(text);
	remove_line(&l, STREAM_LINES);
	expect_fail(&l, NULL, STREAM_LINES + 1, "does not start a new stream",
		    "the second stream's session.start removed");
	free_lines(&l);

	free(text);
	text = join(base, false);
	expect_ok_text(text, strlen(text), NULL, STREAM_LINES, 1,
		       "a stream whose last line lacks its newline");
	free(text);

	l = copy_lines(base);
	two = copy_lines(base);
	append_lines(&l, &two);
	text = join(&l, false);
	expect_ok_text(text, strlen(text), NULL, 2 * STREAM_LINES, 2,
		       "two concatenated streams, the last without newline");
	text[strlen(text) - 1] = '\0';
	expect_fail_text(text, strlen(text), NULL, 2 * STREAM_LINES,
			 "not valid JSON", "a last line without newline, cut short");
	free(text);
	free_lines(&l);
	free_lines(&two);
	free(path);
}

static void test_destinations(void)
{
	char *path = tmp_path("mode.jsonl"), *text, err[256], dest[32];
	struct receipt_writer *w;
	json_t *subject;
	struct stat st;
	mode_t old;
	size_t len;
	int fd, saved, pipefd[2];

	old = umask(0);
	ASSERT(write_stream(path, key_a, "sess-1", 0));
	umask(old);
	tap_ok(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600,
	       "a new events file is created 0600 even under umask 0");
	free(path);

	path = tmp_path("fd.jsonl");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	ASSERT(fd > 2);
	snprintf(dest, sizeof(dest), "fd:%d", fd);
	tap_ok(write_stream(dest, key_a, "sess-1", 0), "fd:N is written");
	tap_ok(fcntl(fd, F_GETFD) == FD_CLOEXEC,
	       "fd:N stays open and is made close-on-exec");
	close(fd);
	text = slurp(path, &len);
	expect_ok_text(text, len, key_a, STREAM_LINES, 1, "the fd:N stream");
	free(text);
	free(path);

	tap_ok(!receipt_open("fd:987", key_a, "s", POLICY, err, sizeof(err)) &&
	       strstr(err, "not open"), "fd:N of a closed descriptor is refused");
	tap_ok(!receipt_open("fd:x", key_a, "s", POLICY, err, sizeof(err)),
	       "fd:x is refused");
	fd = open("/dev/null", O_RDONLY);
	snprintf(dest, sizeof(dest), "fd:%d", fd);
	tap_ok(!receipt_open(dest, key_a, "s", POLICY, err, sizeof(err)) &&
	       strstr(err, "not open for writing"),
	       "fd:N of a read-only descriptor is refused");
	close(fd);
	tap_ok(!receipt_open("/nonexistent/dir/ev", key_a, "s", POLICY, err,
			     sizeof(err)), "an unwritable path is refused");
	tap_ok(!receipt_open("-", key_a, "s", "sha256:00", err, sizeof(err)),
	       "a malformed policy digest is refused");
	tap_ok(!receipt_open("-", key_a, "", POLICY, err, sizeof(err)) &&
	       !receipt_open("-", key_a, "a\xff", POLICY, err, sizeof(err)),
	       "an empty or non-UTF-8 session is refused");

	path = tmp_path("stdout.jsonl");
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT(saved >= 0 && fd >= 0 && dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
	close(fd);
	ASSERT(write_stream("-", key_a, "sess-1", 0));
	ASSERT(dup2(saved, STDOUT_FILENO) == STDOUT_FILENO);
	close(saved);
	text = slurp(path, &len);
	expect_ok_text(text, len, NULL, STREAM_LINES, 1, "\"-\" writes to stdout");
	free(text);
	free(path);

	signal(SIGPIPE, SIG_IGN);
	ASSERT(pipe(pipefd) == 0);
	close(pipefd[0]);
	snprintf(dest, sizeof(dest), "fd:%d", pipefd[1]);
	w = receipt_open(dest, key_a, "s", POLICY, err, sizeof(err));
	ASSERT(w);
	subject = start_subject(key_a);
	tap_ok(receipt_append(w, "session.start", RECEIPT_INFO,
			      RECEIPT_POINT_SUPERVISOR, "session", subject, "x") == -1,
	       "a write error is reported");
	json_decref(subject);
	path = tmp_path("after-break.jsonl");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	ASSERT(fd >= 0 && dup2(fd, pipefd[1]) == pipefd[1]);
	close(fd);
	subject = start_subject(key_a);
	tap_ok(receipt_append(w, "session.start", RECEIPT_INFO,
			      RECEIPT_POINT_SUPERVISOR, "session", subject, "x") == -1,
	       "and the stream stays broken, even once the descriptor would work");
	json_decref(subject);
	tap_ok(receipt_close(w, 0) == -1, "and close reports it");
	text = slurp(path, &len);
	tap_is_int(len, 0, "nothing is written after the break");
	free(text);
	free(path);
	close(pipefd[1]);
	signal(SIGPIPE, SIG_DFL);
}

static void test_untrusted_text(void)
{
	char *path = tmp_path("text.jsonl"), *text, err[256], *big;
	struct receipt_writer *w;
	json_t *subject;
	struct lines l;
	size_t len;
	int64_t seq;

	w = receipt_open(path, key_a, "sess-\xc3\xa9", POLICY, err, sizeof(err));
	ASSERT(w);
	subject = start_subject(key_a);
	receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		       "session", subject, NULL);
	json_decref(subject);
	receipt_append(w, "proxy.error", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY,
		       "http.\xff", NULL, "bad byte \xc0\xaf and ctl \x01 here");
	big = util_xmalloc(3 * RECEIPT_TEXT_MAX);
	memset(big, 'r', 3 * RECEIPT_TEXT_MAX - 1);
	big[3 * RECEIPT_TEXT_MAX - 1] = '\0';
	seq = receipt_append(w, "proxy.error", RECEIPT_BLOCK,
			     RECEIPT_POINT_EGRESS_PROXY, NULL, NULL, big);
	tap_is_int(seq, 2, "an over-long reason is still written");
	free(big);
	big = util_xmalloc(RECEIPT_LINE_MAX + 16);
	memset(big, 's', RECEIPT_LINE_MAX + 15);
	big[RECEIPT_LINE_MAX + 15] = '\0';
	subject = json_pack("{s:s}", "blob", big);
	free(big);
	tap_is_int(receipt_append(w, "proxy.error", RECEIPT_BLOCK,
				  RECEIPT_POINT_EGRESS_PROXY, "r", subject, "x"),
		   -1, "a line over RECEIPT_LINE_MAX is refused");
	json_decref(subject);
	tap_is_int(receipt_append(w, "proxy.error", RECEIPT_BLOCK,
				  RECEIPT_POINT_EGRESS_PROXY, "r", NULL, "x"),
		   3, "and the stream goes on without a gap");
	tap_is_int(receipt_close(w, 0), 0, "close");
	text = slurp(path, &len);
	expect_ok_text(text, len, key_a, 5, 1,
		       "a stream with non-UTF-8 input, cut text and a refused line");
	l = split(text);
	tap_ok(l.n == 5 && strstr(l.v[1], "\"rule\":\"http.\xef\xbf\xbd\"") &&
	       strstr(l.v[1], "bad byte \xef\xbf\xbd\xef\xbf\xbd and ctl \\u0001"),
	       "invalid UTF-8 becomes U+FFFD, control characters are escaped");
	tap_ok(l.n == 5 && strlen(l.v[2]) < RECEIPT_TEXT_MAX + 600,
	       "the reason is cut to RECEIPT_TEXT_MAX bytes");
	free_lines(&l);
	free(text);
	free(path);
}

static bool file_is(const char *path, const char *prefix, mode_t mode)
{
	struct stat st;
	size_t len;
	char *s = util_read_file(path, 65536, &len);
	bool ok = s && !strncmp(s, prefix, strlen(prefix)) &&
		  stat(path, &st) == 0 && (!mode || (st.st_mode & 07777) == mode);

	free(s);
	return ok;
}

static size_t dir_entries(void)
{
	struct dirent *e;
	DIR *d = opendir(tmpdir);
	size_t n = 0;

	while ((e = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static bool write_pem(const char *path, EVP_PKEY *key, bool public,
		      const EVP_CIPHER *cipher)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = public ? PEM_write_PUBKEY(f, key) == 1
		    : PEM_write_PrivateKey(f, key, cipher,
					   (unsigned char *)(cipher ? "secret" : NULL),
					   cipher ? 6 : 0, NULL, NULL) == 1;
	return fclose(f) == 0 && ok;
}

/* receipt_key_load() with what it printed on stderr in *@printed. */
static EVP_PKEY *load_key_stderr(const char *path, char **printed)
{
	char *capture = tmp_path("stderr"), err[256];
	int saved = dup(STDERR_FILENO), fd;
	EVP_PKEY *k;
	size_t len;

	fd = open(capture, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT(saved >= 0 && fd >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);
	close(fd);
	k = receipt_key_load(path, err, sizeof(err));
	ASSERT(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
	close(saved);
	*printed = slurp(capture, &len);
	free(capture);
	return k;
}

static void test_keys(void)
{
	char *priv = tmp_path("k.pem"), *pub = tmp_path("k.pub"), err[256];
	char *before, *after, b64a[64], b64b[64], *link = tmp_path("dangling");
	char *warning;
	EVP_PKEY *k = NULL, *p = NULL, *ec;
	size_t len, entries;
	mode_t old;
	FILE *f;

	old = umask(0);
	f = fopen(pub, "w");
	tap_is_int(receipt_keygen(priv, false, f, err, sizeof(err)), 0, "keygen");
	fclose(f);
	umask(old);
	tap_ok(file_is(priv, "-----BEGIN PRIVATE KEY-----\n", 0600),
	       "the private key is PKCS#8 PEM, mode 0600 even under umask 0");
	tap_ok(file_is(pub, "-----BEGIN PUBLIC KEY-----\n", 0),
	       "the public key is printed as SPKI PEM");
	before = util_read_file(priv, 65536, &len);
	tap_is_int(receipt_keygen(priv, false, stdout, err, sizeof(err)), -EEXIST,
		   "keygen refuses to overwrite");
	tap_ok(strstr(err, "--force") != NULL, "and says how to replace it");
	after = util_read_file(priv, 65536, &len);
	tap_ok(before && after && !strcmp(before, after), "the key is unchanged");
	free(after);
	entries = dir_entries();
	f = fopen(pub, "w");
	old = umask(0277);
	tap_is_int(receipt_keygen(priv, true, f, err, sizeof(err)), 0,
		   "keygen --force replaces it");
	umask(old);
	fclose(f);
	after = util_read_file(priv, 65536, &len);
	tap_ok(after && strcmp(before, after) != 0 &&
	       file_is(priv, "-----BEGIN PRIVATE KEY-----\n", 0600),
	       "with a new key, mode 0600 even under umask 0277");
	tap_is_int(dir_entries(), entries, "and no temporary file is left behind");
	free(before);
	free(after);
	ASSERT(symlink("/nonexistent/airlock-target", link) == 0);
	tap_is_int(receipt_keygen(link, false, stdout, err, sizeof(err)), -EEXIST,
		   "keygen refuses a dangling symlink");

	k = load_key_stderr(priv, &warning);
	tap_ok(k && !*warning, "a 0600 key loads without a warning");
	EVP_PKEY_free(k);
	free(warning);
	ASSERT(chmod(priv, 0640) == 0);
	k = load_key_stderr(priv, &warning);
	tap_ok(k && strstr(warning, "accessible by group or others (mode 640); "
			   "chmod 600 it"),
	       "a 0640 key loads with a warning on stderr");
	free(warning);
	ASSERT(chmod(priv, 0600) == 0);
	p = receipt_pubkey_load(pub, err, sizeof(err));
	tap_ok(k && p && receipt_pubkey_b64(k, b64a, sizeof(b64a)) &&
	       receipt_pubkey_b64(p, b64b, sizeof(b64b)) && !strcmp(b64a, b64b) &&
	       strlen(b64a) == 44,
	       "the printed public key belongs to the written private key");
	tap_ok(!receipt_pubkey_b64(k, b64a, 44), "receipt_pubkey_b64 needs 45 bytes");
	if (k && p) {
		char *path = tmp_path("loaded.jsonl"), *text;

		ASSERT(write_stream(path, k, "sess-1", 0));
		text = slurp(path, &len);
		expect_ok_text(text, len, p, STREAM_LINES, 1,
			       "a stream signed by the loaded key with --pubkey");
		free(text);
		free(path);
	}
	EVP_PKEY_free(k);
	EVP_PKEY_free(p);

	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ASSERT(ec && write_pem(priv, ec, false, NULL) && write_pem(pub, ec, true, NULL));
	tap_ok(!receipt_key_load(priv, err, sizeof(err)) && strstr(err, "Ed25519"),
	       "a P-256 private key is refused");
	tap_ok(!receipt_pubkey_load(pub, err, sizeof(err)) && strstr(err, "Ed25519"),
	       "a P-256 public key is refused");
	EVP_PKEY_free(ec);
	ASSERT(write_pem(priv, key_a, false, EVP_aes_256_cbc()));
	tap_ok(!receipt_key_load(priv, err, sizeof(err)) && strstr(err, "encrypted"),
	       "an encrypted key is refused without a prompt");
	ASSERT(write_pem(priv, key_a, true, NULL));
	tap_ok(!receipt_key_load(priv, err, sizeof(err)) &&
	       strstr(err, "not a PEM private key"), "a public key is not a private key");
	tap_ok(!receipt_key_load("/nonexistent/k.pem", err, sizeof(err)) &&
	       strstr(err, "No such file"), "a missing key file");
	ASSERT(write_pem(priv, key_a, false, NULL));
	tap_ok(!receipt_pubkey_load(priv, err, sizeof(err)),
	       "a private key is not a public key");
	free(priv);
	free(pub);
	free(link);
}

/* A session that could not start: session.refused, then session.end. */
static void test_refused(void)
{
	struct receipt_writer *w;
	struct lines l, bad;
	char err[256], *path = tmp_path("refused.jsonl");
	json_t *subject = start_subject(key_a);

	w = receipt_open(path, key_a, "sess-r", POLICY, err, sizeof(err));
	ASSERT(w);
	tap_is_int(receipt_append(w, "session.refused", RECEIPT_BLOCK,
				  RECEIPT_POINT_SUPERVISOR, "capabilities", subject,
				  "userns missing"),
		   0, "session.refused opens a stream at seq 0");
	tap_ok(receipt_close(w, 125) == 0, "and session.end closes it");
	json_decref(subject);
	l = load_lines(path);
	tap_is_int(l.n, 2, "a refused stream has two lines");
	expect_ok(&l, key_a, 1, "a refused stream");
	expect_ok(&l, NULL, 1, "a refused stream without --pubkey");

	/* Anything but session.end after session.refused is refused, even
	 * correctly chained and signed. */
	bad = copy_lines(&l);
	insert_line(&bad, 1, l.v[1]);
	edit(&bad, 1, "\"type\":\"session.end\"", "\"type\":\"egress.allow\"");
	reseal(&bad, 1, key_a, RESEAL_RENUMBER | RESEAL_RECHAIN);
	expect_fail(&bad, key_a, 2, "only session.end may follow session.refused",
		    "a line after session.refused");
	free_lines(&bad);
	free_lines(&l);
	free(path);
}

/* A reload (airlock proxy, SIGHUP): the digest may change at a
 * policy.reload line, and only there. */
static void test_reload(void)
{
	static const char other[] =
		"sha256:1111111111111111111111111111111111111111111111111111111111111111";
	struct receipt_writer *w;
	struct lines l, bad;
	char err[256], *path = tmp_path("reload.jsonl");
	json_t *subject = start_subject(key_a);

	w = receipt_open(path, key_a, "sess-p", POLICY, err, sizeof(err));
	ASSERT(w);
	ASSERT(receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
			      "session", subject, "started") == 0);
	json_decref(subject);
	tap_is_int(receipt_set_policy(w, "sha256:nothex"), -1,
		   "a malformed digest is refused");
	tap_is_int(receipt_set_policy(w, other), 0, "the digest can be switched");
	ASSERT(receipt_append(w, "policy.reload", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
			      "policy", NULL, "policy reloaded") == 1);
	ASSERT(receipt_append(w, "egress.allow", RECEIPT_ALLOW, RECEIPT_POINT_EGRESS_PROXY,
			      "egress.allow[0]", NULL, "allowed") == 2);
	ASSERT(receipt_close(w, 0) == 0);
	l = load_lines(path);
	tap_ok(strstr(l.v[1], other) && strstr(l.v[3], other),
	       "the reload line and every later line carry the new digest");
	expect_ok(&l, key_a, 1, "a stream with a policy reload");

	/* The same digest change on a line that is not a policy.reload. */
	bad = copy_lines(&l);
	edit(&bad, 1, "\"type\":\"policy.reload\"", "\"type\":\"egress.allow\"");
	reseal(&bad, 1, key_a, RESEAL_RECHAIN);
	expect_fail(&bad, key_a, 2, "policy differs", "a digest change outside policy.reload");
	free_lines(&bad);
	/* A reload recorded as blocked keeps the old digest. */
	bad = copy_lines(&l);
	edit(&bad, 1, "\"decision\":\"info\"", "\"decision\":\"block\"");
	reseal(&bad, 1, key_a, RESEAL_RECHAIN);
	expect_fail(&bad, key_a, 2, "policy differs", "a digest change on a refused reload");
	free_lines(&bad);
	free_lines(&l);
	free(path);
}

/* receipt_json_canonical(): what it accepts goes into a line as it is, so
 * it must be exactly what jansson prints of what it reads from it; the
 * usual worker subjects are accepted (the key holder's fast path), and
 * everything jansson would print otherwise, or refuse, is not. Besides
 * fixed cases, every one-byte change of a few subjects is checked
 * against jansson's own round trip. */
static bool jansson_canonical(const char *s, size_t len)
{
	json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL);
	char *d = json_is_object(o) ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15))
				    : NULL;
	bool same = d && strlen(d) == len && memcmp(d, s, len) == 0;

	free(d);
	json_decref(o);
	return same;
}

static void test_canonical(void)
{
	static const char *const yes[] = {
		"{}",
		"{\"host\":\"api.example.com\",\"port\":443,\"address\":\"192.0.2.7\","
		"\"method\":\"GET\",\"path\":\"/v1/items?q=a%20b\",\"n\":-12}",
		"{\"a\":[1,true,false,null,\"x\",{},[]],\"b\":{\"c\":{\"d\":0}}}",
		"{\"q\":\"\\\"\\\\\\n\\t\\r\\b\\f/\"}",
		"{\"a\":\"x\",\"A\":\"y\",\"a \":1}",
		"{\"big\":999999999999999999}",
	};
	static const char *const no[] = {
		"", "[]", "\"x\"", "1", "{", "{}}", "{} ", " {}", "{\"a\": 1}", "{\"a\":1 }",
		"{\"a\":1,}", "{\"a\":1.5}", "{\"a\":1e3}", "{\"a\":-0}", "{\"a\":01}",
		"{\"a\":1000000000000000000}", "{\"a\":\"\\u0041\"}", "{\"a\":\"\\/\"}",
		"{\"a\":\"\\x\"}", "{\"a\":\"caf\xc3\xa9\"}", "{\"a\":\"\x01\"}",
		"{\"a\":1,\"a\":2}", "{\"a\":{\"b\":1,\"b\":1}}", "{\"a\":tru}",
		"{\"a\":True}", "{a:1}", "{\"a\":[1,]}", "{\"a\":\"x}",
		"{\"a\":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}",
	};
	const char *seeds[] = { yes[1], yes[2], yes[3] };
	static const char alphabet[] = "{}[]\":,\\ 0-9.eEtfnul\x01\x7f\xc3" "aA/";
	size_t i, j, k, wrong = 0, accepted = 0, tried = 0;
	char buf[512], keys[512];

	for (i = 0; i < ARRAY_SIZE(yes); i++)
		tap_ok(receipt_json_canonical(yes[i], strlen(yes[i])) &&
		       jansson_canonical(yes[i], strlen(yes[i])),
		       "canonical, as jansson agrees: %.50s", yes[i]);
	for (i = 0; i < ARRAY_SIZE(no); i++)
		tap_ok(!receipt_json_canonical(no[i], strlen(no[i])),
		       "left to jansson: %s", no[i]);
	/* 33 keys: more than the fast path compares */
	strcpy(keys, "{");
	for (i = 0; i < 33; i++)
		sprintf(keys + strlen(keys), "%s\"k%zu\":1", i ? "," : "", i);
	strcat(keys, "}");
	tap_ok(!receipt_json_canonical(keys, strlen(keys)) &&
	       jansson_canonical(keys, strlen(keys)),
	       "an object of 33 keys is left to jansson");
	for (i = 0; i < ARRAY_SIZE(seeds); i++) {
		size_t n = strlen(seeds[i]);

		ASSERT(n < sizeof(buf));
		for (j = 0; j < n; j++) {
			for (k = 0; k + 1 < sizeof(alphabet); k++) {
				memcpy(buf, seeds[i], n);
				buf[j] = alphabet[k];
				tried++;
				if (!receipt_json_canonical(buf, n))
					continue;
				accepted++;
				if (!jansson_canonical(buf, n)) {
					if (wrong++ < 5)
						tap_diag("accepted, not jansson's: %.*s", (int)n, buf);
				}
			}
			/* and the seed cut here */
			tried++;
			if (receipt_json_canonical(seeds[i], j) &&
			    !jansson_canonical(seeds[i], j) && wrong++ < 5)
				tap_diag("accepted, not jansson's: %.*s", (int)j, seeds[i]);
		}
	}
	tap_ok(wrong == 0 && accepted > 0,
	       "of %zu changed subjects, the %zu accepted are each jansson's own print",
	       tried, accepted);
}

/* The writer builds lines by hand: each must be byte for byte what
 * jansson's json_dumps() makes of the same members (the format every line
 * had when jansson made it), for every byte a string may hold. */
static void test_hand_built(void)
{
	char *path = tmp_path("hand.jsonl"), err[256], *text, s[8], *buf = NULL;
	struct receipt_writer *w;
	json_t *subject;
	size_t len, cap = 0, i, bad = 0, n = 0;
	struct lines l;

	for (i = 1; i < 256; i++) {
		json_t *js;
		char *dump;

		s[0] = 'a';
		s[1] = (char)i;
		s[2] = i >= 0x80 ? '\x80' : 'z';
		s[3] = '\0';
		len = 0;
		receipt_json_str(&buf, &len, &cap, s);
		js = json_string(s);
		if (!js)
			continue; /* not UTF-8: the writer cleans such text first */
		dump = json_dumps(js, JSON_ENCODE_ANY);
		if (strcmp(dump, buf) != 0) {
			tap_diag("byte 0x%02zx: %s, jansson %s", i, buf, dump);
			bad++;
		}
		free(dump);
		json_decref(js);
	}
	free(buf);
	tap_ok(bad == 0, "JSON strings escaped as jansson escapes them, for every byte");
	w = receipt_open(path, key_a, "sess-\"q\"\t\xc3\xa9\x7f/", POLICY, err, sizeof(err));
	ASSERT(w);
	subject = start_subject(key_a);
	receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		       "session", subject, "\x01\x1f\\\"\b\f\n\r\t \xe2\x80\xa8 </script>");
	json_decref(subject);
	subject = json_pack("{s:f, s:s, s:[i, b, n], s:{}}", "usd", 0.000735, "q",
			    "\"\n\x02", "a", 3, 1, "o");
	receipt_append(w, "budget.charge", RECEIPT_ALLOW, RECEIPT_POINT_BROKER,
		       "spend[\"x\"]", subject, "");
	json_decref(subject);
	receipt_append(w, "proxy.error", RECEIPT_BLOCK, RECEIPT_POINT_EGRESS_PROXY,
		       NULL, NULL, NULL);
	ASSERT(receipt_close(w, 3) == 0);
	text = slurp(path, &len);
	l = split(text);
	for (i = 0; i < l.n; i++) {
		const char *line = l.v[i];
		char *cut = strstr(line, ",\"sig\":\""), *dump;
		json_t *obj;

		obj = json_loadb(line, cut ? (size_t)(cut - line) : strlen(line), 0, NULL);
		if (cut) {
			/* the signed body: the line without its sig member */
			char *body = util_xasprintf("%.*s}", (int)(cut - line), line);

			json_decref(obj);
			obj = json_loads(body, 0, NULL);
			dump = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(15));
			if (!dump || strcmp(dump, body) != 0)
				bad++;
			free(body);
		} else {
			bad++;
			dump = NULL;
		}
		n++;
		free(dump);
		json_decref(obj);
	}
	tap_ok(bad == 0 && n == 4, "every line (%zu) is what json_dumps makes of it", n);
	free_lines(&l);
	free(text);
	free(path);
}

int main(void)
{
	char *path;
	struct lines base;

	ASSERT(mkdtemp(tmpdir));
	key_a = receipt_key_generate();
	key_b = receipt_key_generate();
	ASSERT(key_a && key_b);

	test_names();
	path = tmp_path("base.jsonl");
	tap_ok(write_stream(path, key_a, "sess-1", 3), "a stream is written");
	base = load_lines(path);
	free(path);
	test_written_format(&base);
	test_tamper(&base);
	test_resealed(&base);
	test_multi(&base);
	test_refused();
	test_reload();
	test_destinations();
	test_untrusted_text();
	test_hand_built();
	test_canonical();
	test_keys();

	free_lines(&base);
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	remove_tmpdir();
	return tap_done();
}
