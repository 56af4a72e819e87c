/* SPDX-License-Identifier: Apache-2.0
 * receipt_writer.c - one stream's writer: builds, chains, signs and
 * writes each line.
 *
 * DOC: Theory of Operation
 *
 * The chain state (seq, the previous line's hash, the counts for
 * session.end) lives in one writer, so a stream has exactly one writer:
 * in a session that is the key holder (keeper.c), which every other
 * process asks to record a line. Each line goes out in one write() on the
 * stream descriptor; on an O_APPEND file that is atomic with respect to
 * other appenders, so lines never interleave. An I/O failure marks the
 * stream broken: nothing more is written, because a line after a gap
 * could never verify anyway. A line that would exceed RECEIPT_LINE_MAX is
 * not written and takes no seq, so the chain has no gap.
 *
 * The line is serialised once (compact, members in the order of
 * receipt_line.h, built by hand with jansson's escaping; only the subject
 * goes through json_dumps()), signed over exactly those bytes, and the
 * signature appended as the last member: the signed bytes are never
 * re-serialised. Signing copies a context initialised once per stream
 * with the key.
 *
 * Beside prev, the writer keeps the RFC 6962 Merkle tree's frontier over
 * the lines (merkle.c). In checkpoint mode (receipts.sign) a line is
 * signed only when it is a receipt.checkpoint (whose subject is a C2SP
 * checkpoint of the tree, signed as a note: tlog.c) or session.end; the
 * unsigned lines wait in memory (64 KiB at most) until a signed line or
 * receipt_flush() writes them in one write(), whole lines, so a batch the
 * key holder handles costs one system call.
 */
#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "merkle.h"
#include "receipt_line.h"
#include "tlog.h"
#include "util.h"

struct receipt_writer {
	EVP_MD_CTX *sign_tpl;  /* DigestSign initialised with key */
	EVP_PKEY *key;
	char *session;
	char *policy;
	int64_t seq;
	json_t *counts;
	int64_t spend_nano;    /* session.end's spend_usd; -1: not metered */
	struct merkle_tree tree; /* over every line written, beside prev */
	char *origin;          /* "airlock/SESSION": the checkpoints' origin */
	char *last_note;       /* the last checkpoint's note, or NULL */
	json_t *cosignatures;  /* session.end's, or NULL */
	/* checkpoint mode: unsigned lines wait here for receipt_flush() (or
	 * the next signed line), so that lines handled together go out in
	 * one write() */
	char *pend;
	size_t pend_len, pend_cap;
	char *body;            /* the line being built, kept between lines */
	size_t body_cap;
	char *session_json;    /* the session id as a JSON string */
	size_t session_json_len;
	time_t ts_sec;         /* the second ts_text's date and time are of */
	int fd;
	int error;             /* errno of the write that broke the stream, or 0 */
	enum receipt_sign mode;
	char pubkey[RECEIPT_PUBKEY_B64_LEN + 1];
	char prev[RECEIPT_SHA256_HEX_LEN + 1];
	char ts_text[25];
	bool owns_fd;
	bool unsigned_pending; /* a line without sig since the last signed one */
	bool last_checkpoint;  /* the last line written is a checkpoint */
	receipt_tap_fn tap;    /* the live feed's hook, or NULL */
	void *tap_arg;
};

/* Lines kept before a write even without a flush. */
#define PENDING_MAX ((size_t)64 * 1024)

static bool fd_writable(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
}

/* Resolves @dest to a descriptor; *owns says whether the writer closes it. */
static int open_dest(const char *dest, bool *owns, char *err, size_t errlen)
{
	unsigned long n;
	int fd = -1;

	*owns = false;
	if (strcmp(dest, "-") == 0) {
		fd = STDOUT_FILENO;
	} else if (strncmp(dest, "fd:", 3) == 0) {
		if (!util_parse_uint(dest + 3, 0, INT_MAX, &n)) {
			receipt_set_err(err, errlen, "fd:N needs a descriptor number");
			return -1;
		}
		fd = (int)n;
		if (fcntl(fd, F_GETFD) < 0) {
			receipt_set_err(err, errlen, "descriptor %d is not open", fd);
			return -1;
		}
		if (fd > STDERR_FILENO && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			receipt_set_err(err, errlen, "descriptor %d: %s", fd, strerror(errno));
			return -1;
		}
	} else {
		fd = open(dest, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
			  0600);
		if (fd < 0) {
			receipt_set_err(err, errlen, "%s", strerror(errno));
			return -1;
		}
		*owns = true;
	}
	if (!fd_writable(fd)) {
		receipt_set_err(err, errlen, "descriptor %d is not open for writing", fd);
		if (*owns)
			close(fd);
		return -1;
	}
	return fd;
}

static void writer_free(struct receipt_writer *w)
{
	if (w->owns_fd && w->fd >= 0)
		close(w->fd);
	EVP_MD_CTX_free(w->sign_tpl);
	EVP_PKEY_free(w->key);
	free(w->session);
	free(w->policy);
	free(w->origin);
	free(w->pend);
	free(w->body);
	free(w->session_json);
	free(w->last_note);
	json_decref(w->cosignatures);
	json_decref(w->counts);
	free(w);
}

struct receipt_writer *receipt_open(const char *dest, EVP_PKEY *key,
				    const char *session, const char *policy_digest,
				    char *err, size_t errlen)
{
	struct receipt_writer *w = NULL;
	char pub[RECEIPT_PUBKEY_B64_LEN + 1];
	size_t json_cap = 0;
	bool owns;
	int fd;

	if (!session || !*session || strlen(session) > RECEIPT_TEXT_MAX ||
	    !receipt_utf8_valid(session)) {
		receipt_set_err(err, errlen, "the session id must be 1-%d bytes of UTF-8",
			RECEIPT_TEXT_MAX);
		goto out;
	}
	if (!policy_digest ||
	    !receipt_digest_valid(policy_digest, strlen(policy_digest))) {
		receipt_set_err(err, errlen, "the policy digest is not sha256:<64 hex>");
		goto out;
	}
	if (!receipt_pubkey_b64(key, pub, sizeof(pub))) {
		receipt_set_err(err, errlen, "the signing key is not an Ed25519 key");
		goto out;
	}
	fd = open_dest(dest, &owns, err, errlen);
	if (fd < 0)
		goto out;
	w = util_xcalloc(1, sizeof(*w));
	w->fd = fd;
	w->owns_fd = owns;
	ASSERT(EVP_PKEY_up_ref(key) == 1);
	w->key = key;
	w->sign_tpl = EVP_MD_CTX_new();
	if (!w->sign_tpl ||
	    EVP_DigestSignInit(w->sign_tpl, NULL, NULL, NULL, key) != 1) {
		ERR_clear_error();
		receipt_set_err(err, errlen, "cannot initialise Ed25519 signing");
		writer_free(w);
		w = NULL;
		goto out;
	}
	memcpy(w->pubkey, pub, sizeof(pub));
	w->session = util_xstrdup(session);
	receipt_json_str(&w->session_json, &w->session_json_len, &json_cap, session);
	w->policy = util_xstrdup(policy_digest);
	memcpy(w->prev, receipt_zero_prev, sizeof(w->prev));
	w->counts = json_object();
	w->spend_nano = -1;
	ASSERT(w->counts);
	w->mode = RECEIPT_SIGN_LINE;
	merkle_init(&w->tree);
	w->origin = util_xasprintf(TLOG_ORIGIN_PREFIX "%s", session);
out:
	return w;
}

/* One write() puts the line out whole on an O_APPEND file or a pipe (up to
 * PIPE_BUF); only if the kernel takes less (a full disk, a signal, a long
 * line on a pipe) is the rest written after it. */
static int write_line(int fd, const char *buf, size_t len)
{
	ssize_t n;

	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n == len)
		return 0;
	if (n == 0)
		return -EIO;
	return util_write_all(fd, buf + n, len - (size_t)n);
}

/* Signs with a copy of @tpl, a context initialised once for the key:
 * initialising per line costs an algorithm lookup each time. */
static bool sign(EVP_MD_CTX *tpl, const void *msg, size_t len,
		 uint8_t sig[RECEIPT_ED25519_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t siglen = RECEIPT_ED25519_SIG_LEN;
	bool ok = false;

	if (!ctx || EVP_MD_CTX_copy_ex(ctx, tpl) != 1)
		goto out;
	if (EVP_DigestSign(ctx, sig, &siglen, msg, len) != 1 ||
	    siglen != RECEIPT_ED25519_SIG_LEN)
		goto out;
	ok = true;
out:
	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	return ok;
}

static void set_member(json_t *obj, const char *name, json_t *val)
{
	ASSERT(val);
	ASSERT(json_object_set_new(obj, name, val) == 0);
}

/* Appends the @n bytes at @s to the line being built, NUL-terminated. */
static void append_n(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		*cap = *len + n + 1 > 2 * *cap ? *len + n + 1 : 2 * *cap;
		*buf = util_xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n);
	(*buf)[*len + n] = '\0';
	*len += n;
}

/* Appends the C string @s to the line being built. */
static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
	append_n(buf, len, cap, s, strlen(s));
}

/* @s as it may stand in a line: itself when it is well-formed UTF-8 of at
 * most RECEIPT_TEXT_MAX bytes (the usual case, no copy), else a cleaned
 * copy left in *@copy for the caller to free. */
static const char *clean_text(const char *s, char **copy)
{
	*copy = NULL;
	if (!s)
		return "";
	if (strnlen(s, RECEIPT_TEXT_MAX + 1) <= RECEIPT_TEXT_MAX && receipt_utf8_valid(s))
		return s;
	*copy = receipt_utf8_clean(s, RECEIPT_TEXT_MAX);
	return *copy;
}

/* The line's ts, as util_rfc3339_now() writes it, with the date and time
 * of day formatted again only when the second changed. */
static void line_ts(struct receipt_writer *w, char ts[25])
{
	struct timespec now;
	unsigned int ms;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	if (now.tv_sec != w->ts_sec || !w->ts_text[0]) {
		gmtime_r(&now.tv_sec, &tm);
		/* Years past 9999 would not fit; RFC 3339 has four digits. */
		if (strftime(w->ts_text, 20, "%Y-%m-%dT%H:%M:%S", &tm) != 19)
			memcpy(w->ts_text, "9999-12-31T23:59:59", 20);
		w->ts_sec = now.tv_sec;
	}
	ms = (unsigned int)(now.tv_nsec / 1000000) % 1000u;
	memcpy(ts, w->ts_text, 19);
	ts[19] = '.';
	ts[20] = (char)('0' + ms / 100);
	ts[21] = (char)('0' + ms / 10 % 10);
	ts[22] = (char)('0' + ms % 10);
	ts[23] = 'Z';
	ts[24] = '\0';
}

/* The decimal digits of @v in @out (at least 21 bytes, not
 * NUL-terminated); returns their number. */
static size_t fmt_uint(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

#define APPEND_LIT(lit) append_n(&w->body, &body_len, &w->body_cap, lit, sizeof(lit) - 1)

/* Writes one line; it carries "sig" in mode line, and always when it is
 * a checkpoint or session.end. @subj is the subject's JSON text as the
 * line carries it (json_dumps() of the object, or bytes that
 * receipt_json_canonical() accepted). */
static int64_t emit(struct receipt_writer *w, const char *type,
		    enum receipt_decision decision, enum receipt_point point,
		    const char *rule, const char *subj, size_t subj_len,
		    const char *reason)
{
	bool sign_it = w->mode == RECEIPT_SIGN_LINE ||
		       strcmp(type, "session.end") == 0 ||
		       strcmp(type, RECEIPT_CHECKPOINT_TYPE) == 0;
	/* The signature's closing quote and the object's brace, then the
	 * newline; not a C string. */
	static const char line_end[3] = { '"', '}', '\n' };
	char ts[25], sig_b64[RECEIPT_SIG_B64_LEN + 1];
	char *rule_copy, *reason_copy, *line = NULL;
	const char *rule_c, *reason_c;
	uint8_t sig[RECEIPT_ED25519_SIG_LEN];
	size_t body_len = 0, line_len;
	int64_t rc = -1;
	char num[24];
	size_t nn;

	rule_c = clean_text(rule, &rule_copy);
	reason_c = clean_text(reason, &reason_copy);
	line_ts(w, ts);
	/* Built by hand in the one order of receipt_line.h, compact, with
	 * jansson's escaping (receipt_json_str()): the bytes json_dumps()
	 * of the object made of these members would give, without making
	 * the object. Only the subject comes from jansson (or was proven to
	 * be what it would print). The buffer is the writer's, kept. */
	if (!w->body) {
		w->body_cap = 1024;
		w->body = util_xmalloc(w->body_cap);
	}
	body_len = 0;
	APPEND_LIT("{\"v\":1,\"seq\":");
	nn = fmt_uint(num, (uint64_t)w->seq);
	append_n(&w->body, &body_len, &w->body_cap, num, nn);
	APPEND_LIT(",\"ts\":\"");
	append_n(&w->body, &body_len, &w->body_cap, ts, 24);
	APPEND_LIT("\",\"session\":");
	append_n(&w->body, &body_len, &w->body_cap, w->session_json, w->session_json_len);
	/* a type is of [a-z0-9._-]: nothing to escape */
	APPEND_LIT(",\"type\":\"");
	append(&w->body, &body_len, &w->body_cap, type);
	APPEND_LIT("\",\"decision\":\"");
	append(&w->body, &body_len, &w->body_cap, receipt_decision_to_string(decision));
	APPEND_LIT("\",\"point\":\"");
	append(&w->body, &body_len, &w->body_cap, receipt_point_to_string(point));
	APPEND_LIT("\",\"rule\":");
	receipt_json_str(&w->body, &body_len, &w->body_cap, rule_c);
	APPEND_LIT(",\"policy\":\"");
	/* sha256:<64 hex>: nothing to escape */
	append(&w->body, &body_len, &w->body_cap, w->policy);
	APPEND_LIT("\",\"subject\":");
	append_n(&w->body, &body_len, &w->body_cap, subj, subj_len);
	APPEND_LIT(",\"reason\":");
	receipt_json_str(&w->body, &body_len, &w->body_cap, reason_c);
	APPEND_LIT(",\"prev\":\"");
	append_n(&w->body, &body_len, &w->body_cap, w->prev, RECEIPT_SHA256_HEX_LEN);
	APPEND_LIT("\"}");
	ASSERT(body_len > 2 && w->body[body_len - 1] == '}');
	if (!sign_it) {
		/* the body as it is, and the newline in its NUL's place */
		if (body_len > RECEIPT_LINE_MAX)
			goto out;
		line_len = body_len;
		line = w->body;
		line[line_len] = '\n';
	} else {
		line_len = body_len - 1 + RECEIPT_SIG_TAIL_LEN;
		if (line_len > RECEIPT_LINE_MAX || !sign(w->sign_tpl, w->body, body_len, sig))
			goto out;
		EVP_EncodeBlock((unsigned char *)sig_b64, sig, RECEIPT_ED25519_SIG_LEN);
		line = util_xmalloc(line_len + 1);
		memcpy(line, w->body, body_len - 1);
		memcpy(line + body_len - 1, receipt_sig_open, RECEIPT_SIG_OPEN_LEN);
		memcpy(line + line_len - 2 - RECEIPT_SIG_B64_LEN, sig_b64,
		       RECEIPT_SIG_B64_LEN);
		memcpy(line + line_len - 2, line_end, sizeof(line_end));
	}
	if (w->mode == RECEIPT_SIGN_CHECKPOINT) {
		if (w->pend_len + line_len + 1 > w->pend_cap) {
			w->pend_cap = w->pend_len + line_len + 1 > 2 * w->pend_cap
					      ? w->pend_len + line_len + 1 : 2 * w->pend_cap;
			w->pend = util_xrealloc(w->pend, w->pend_cap);
		}
		memcpy(w->pend + w->pend_len, line, line_len + 1);
		w->pend_len += line_len + 1;
		if ((sign_it || w->pend_len >= PENDING_MAX) && receipt_flush(w) < 0)
			goto out;
	} else {
		w->error = -write_line(w->fd, line, line_len + 1);
		if (w->error)
			goto out;
		if (w->tap)
			w->tap(w->tap_arg, line, line_len + 1);
	}
	receipt_sha256_hex(line, line_len, w->prev);
	merkle_append(&w->tree, line, line_len);
	w->unsigned_pending = !sign_it;
	w->last_checkpoint = strcmp(type, RECEIPT_CHECKPOINT_TYPE) == 0;
	receipt_count_add(w->counts, type, 1);
	rc = w->seq++;
out:
	if (line != w->body)
		free(line);
	free(reason_copy);
	free(rule_copy);
	return rc;
}

/* emit() with the subject an object (NULL: {}), printed by jansson. */
static int64_t emit_json(struct receipt_writer *w, const char *type,
			 enum receipt_decision decision, enum receipt_point point,
			 const char *rule, json_t *subject, const char *reason)
{
	/* 15 significant digits: dollar amounts of whole nano-dollars
	 * (below a million dollars) print exactly, 0.000735 and not
	 * 0.00073499999999999998. */
	char *subj = subject ? json_dumps(subject, JSON_COMPACT | JSON_REAL_PRECISION(15))
			     : NULL;
	int64_t rc;

	ASSERT(!subject || subj);
	rc = emit(w, type, decision, point, rule, subj ? subj : "{}",
		  subj ? strlen(subj) : 2, reason);
	free(subj);
	return rc;
}

int receipt_set_policy(struct receipt_writer *w, const char *policy_digest)
{
	if (!receipt_digest_valid(policy_digest, strlen(policy_digest)))
		return -1;
	free(w->policy);
	w->policy = util_xstrdup(policy_digest);
	return 0;
}

bool receipt_type_opens_stream(const char *type)
{
	return strcmp(type, "session.start") == 0 ||
	       strcmp(type, "session.refused") == 0;
}

int64_t receipt_append(struct receipt_writer *w, const char *type,
		       enum receipt_decision decision, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason)
{
	bool start;

	ASSERT(w && type && receipt_type_valid(type, strlen(type)));
	ASSERT(!subject || json_is_object(subject));
	if (w->error)
		return -1;
	start = receipt_type_opens_stream(type);
	ASSERT(start == (w->seq == 0));
	ASSERT(strcmp(type, "session.end") != 0);
	if (start)
		ASSERT(subject && json_is_string(json_object_get(subject, "pubkey")) &&
		       strcmp(json_string_value(json_object_get(subject, "pubkey")),
			      w->pubkey) == 0);
	return emit_json(w, type, decision, point, rule, subject, reason);
}

int64_t receipt_append_canonical(struct receipt_writer *w, const char *type,
				 enum receipt_decision decision,
				 enum receipt_point point, const char *rule,
				 const char *subject, size_t subject_len,
				 const char *reason)
{
	ASSERT(w && type && receipt_type_valid(type, strlen(type)));
	ASSERT(!receipt_type_opens_stream(type) && w->seq > 0);
	ASSERT(strcmp(type, "session.end") != 0);
	if (w->error)
		return -1;
	return emit(w, type, decision, point, rule, subject, subject_len, reason);
}

/* fsync, where the descriptor supports it. */
static int sync_stream(int fd)
{
	if (fsync(fd) == 0 || errno == EINVAL || errno == EROFS ||
	    errno == ENOTSUP || errno == EOPNOTSUPP)
		return 0;
	return -errno;
}

void receipt_set_spend(struct receipt_writer *w, int64_t nano)
{
	ASSERT(w && nano >= 0);
	w->spend_nano = nano;
}

int receipt_close(struct receipt_writer *w, int exit_status)
{
	json_t *recount = NULL, *counts = NULL, *subject = NULL;
	char *reason = NULL;
	int rc;

	ASSERT(w);
	if (w->error) {
		rc = -w->error;
		goto out;
	}
	ASSERT(w->seq > 0);
	/* checkpoint mode: the line before session.end is a checkpoint */
	if (w->mode == RECEIPT_SIGN_CHECKPOINT && !w->last_checkpoint &&
	    receipt_checkpoint(w) < 0) {
		rc = w->error ? -w->error : -EIO;
		goto out;
	}
	recount = json_copy(w->counts);
	ASSERT(recount);
	receipt_count_add(recount, "session.end", 1);
	counts = receipt_sorted_copy(recount);
	subject = json_pack("{s:i, s:O}", "exit", exit_status, "counts", counts);
	ASSERT(subject);
	if (w->spend_nano >= 0)
		set_member(subject, "spend_usd",
			   json_real((double)w->spend_nano / 1e9));
	if (w->cosignatures)
		set_member(subject, "cosignatures", json_incref(w->cosignatures));
	reason = util_xasprintf("session ended, exit status %d", exit_status);
	if (emit_json(w, "session.end", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		      "session", subject, reason) < 0) {
		rc = w->error ? -w->error : -EIO;
		goto out;
	}
	rc = sync_stream(w->fd);
out:
	if (w->owns_fd && close(w->fd) < 0 && rc == 0)
		rc = -errno;
	w->fd = -1;
	free(reason);
	json_decref(subject);
	json_decref(counts);
	json_decref(recount);
	writer_free(w);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

int receipt_set_sign_mode(struct receipt_writer *w, enum receipt_sign mode)
{
	ASSERT(w && w->seq == 0);
	if (mode == RECEIPT_SIGN_CHECKPOINT && !tlog_key_name_valid(w->origin))
		return -1;
	w->mode = mode;
	return 0;
}

bool receipt_unflushed(const struct receipt_writer *w)
{
	return w->pend_len > 0;
}

bool receipt_unsigned_pending(const struct receipt_writer *w)
{
	return w->unsigned_pending;
}

int64_t receipt_checkpoint(struct receipt_writer *w)
{
	merkle_hash root;
	char *body, *note, *b64, *reason;
	json_t *subject;
	int64_t rc;

	ASSERT(w && w->seq > 0 && (uint64_t)w->seq == w->tree.size);
	if (w->error)
		return -1;
	merkle_root(&w->tree, root);
	body = tlog_checkpoint_body(w->origin, w->tree.size, root);
	note = tlog_note_sign(w->key, w->origin, body);
	free(body);
	if (!note) {
		w->error = EIO;
		return -1;
	}
	b64 = tlog_b64(root, MERKLE_HASH_LEN);
	subject = json_pack("{s:I, s:s, s:s}", "size", (json_int_t)w->tree.size, "root",
			    b64, "note", note);
	ASSERT(subject);
	reason = util_xasprintf("checkpoint of the first %lld lines", (long long)w->seq);
	rc = emit_json(w, RECEIPT_CHECKPOINT_TYPE, RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		       "receipts.sign", subject, reason);
	if (rc >= 0) {
		free(w->last_note);
		w->last_note = util_xstrdup(note);
	}
	free(reason);
	json_decref(subject);
	free(b64);
	free(note);
	return rc;
}

int receipt_flush(struct receipt_writer *w)
{
	if (w->error)
		return -1;
	if (!w->pend_len)
		return 0;
	w->error = -write_line(w->fd, w->pend, w->pend_len);
	if (!w->error && w->tap)
		w->tap(w->tap_arg, w->pend, w->pend_len);
	w->pend_len = 0;
	return w->error ? -1 : 0;
}

char *receipt_final_checkpoint(struct receipt_writer *w)
{
	ASSERT(w && w->seq > 0);
	if (!w->last_checkpoint && receipt_checkpoint(w) < 0)
		return NULL;
	return util_xstrdup(w->last_note);
}

void receipt_set_cosignatures(struct receipt_writer *w, const char *lines)
{
	const char *p = lines;

	json_decref(w->cosignatures);
	w->cosignatures = NULL;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);

		if (!w->cosignatures)
			w->cosignatures = json_array();
		json_array_append_new(w->cosignatures, json_stringn(p, n));
		p += n;
	}
}

void receipt_set_tap(struct receipt_writer *w, receipt_tap_fn fn, void *arg)
{
	w->tap = fn;
	w->tap_arg = arg;
}

int receipt_error(const struct receipt_writer *w)
{
	return w->error;
}

void receipt_abort(struct receipt_writer *w)
{
	if (w) {
		(void)receipt_flush(w); /* what was recorded stays recorded */
		writer_free(w);
	}
}
