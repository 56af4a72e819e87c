/* SPDX-License-Identifier: Apache-2.0
 * receipt.h - the signed, hash-chained event stream (docs/RECEIPTS.md):
 * lines (receipt_line.c), keys (receipt_key.c), the writer
 * (receipt_writer.c) and the verifier (receipt_verify.c).
 */
#ifndef AIRLOCK_RECEIPT_H
#define AIRLOCK_RECEIPT_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The longest line a writer produces and a verifier accepts (bytes, without
 * the newline). */
#define RECEIPT_LINE_MAX ((size_t)1024 * 1024)

/* `reason` and `rule` longer than this are cut (on a UTF-8 boundary). */
#define RECEIPT_TEXT_MAX 4096

enum receipt_decision {
	RECEIPT_ALLOW = 0,
	RECEIPT_BLOCK,
	RECEIPT_WOULD_BLOCK,
	RECEIPT_INFO,
	RECEIPT_DECISION_COUNT
};

enum receipt_point {
	RECEIPT_POINT_SUPERVISOR = 0,
	RECEIPT_POINT_SANDBOX,
	RECEIPT_POINT_EGRESS_PROXY,
	RECEIPT_POINT_BROKER,
	RECEIPT_POINT_GIT,
	RECEIPT_POINT_COUNT
};

const char *receipt_decision_to_string(enum receipt_decision d);

/* A stream opens with session.start, or with session.refused when the
 * session could not start (followed only by session.end); both carry the
 * signing public key in subject.pubkey. */
bool receipt_type_opens_stream(const char *type);
const char *receipt_point_to_string(enum receipt_point p);

/* Writes one receipt; returns its seq, or -1 when there is no stream.
 * The proxy's recording call (proxy_opts.record), which filters are
 * handed too: they need nothing of the proxy for it. */
typedef int64_t (*receipt_record_fn)(void *arg, const char *type,
				     enum receipt_decision d,
				     enum receipt_point point, const char *rule,
				     json_t *subject, const char *reason);

/* Signing keys. receipt_key_load() reads a PKCS#8 PEM Ed25519 private key and
 * refuses any other type or an encrypted key (it never prompts); it warns on
 * stderr when the file is accessible by group or others. receipt_key_generate()
 * makes a fresh one. Both return NULL on failure with a reason in @err (NULL
 * from receipt_key_generate() means OpenSSL failed). Free with
 * EVP_PKEY_free(). */
EVP_PKEY *receipt_key_generate(void);
EVP_PKEY *receipt_key_load(const char *path, char *err, size_t errlen);

/* Base64 of the 32 raw public key bytes, as in session.start's "pubkey".
 * @out holds at least 45 bytes. */
bool receipt_pubkey_b64(EVP_PKEY *key, char *out, size_t len);

/* `airlock keygen`: writes a fresh private key to @path (PKCS#8 PEM, mode
 * 0600) and then its public key (SPKI PEM) to @pub_out. Without @force an
 * existing @path (even a dangling symlink) is refused with -EEXIST; with
 * @force it is replaced atomically (temporary file in the same directory,
 * then rename). Returns 0 or -errno with a reason in @err. */
int receipt_keygen(const char *path, bool force, FILE *pub_out, char *err,
		   size_t errlen);

struct receipt_writer;

/* Opens an event stream. @dest is "-" (stdout), "fd:N" (a descriptor
 * inherited from the caller; set close-on-exec when N > 2, never closed by
 * the writer), or a path (opened O_APPEND|O_CREAT, mode 0600). @session is a
 * non-empty UTF-8 string, @policy_digest "sha256:" and 64 lowercase hex
 * digits. The writer takes a reference on @key. Returns NULL with a reason in
 * @err. One writer per stream: the chain allows no other writer. */
struct receipt_writer *receipt_open(const char *dest, EVP_PKEY *key,
				    const char *session, const char *policy_digest,
				    char *err, size_t errlen);

/* Appends one receipt with a single write(). @subject is borrowed (may be
 * NULL: an empty object). The first append must be "session.start" with
 * subject "pubkey" equal to the writer's key, and later appends must not be
 * session.start or session.end (receipt_close() writes it); @type is 1-64
 * bytes of [a-z0-9._-]: these are ASSERTed. @rule and @reason (NULL: "")
 * may hold untrusted bytes: invalid UTF-8 is replaced by U+FFFD and each is
 * cut to RECEIPT_TEXT_MAX bytes. Returns the seq written, or -1 when the line
 * would exceed RECEIPT_LINE_MAX (nothing written, the stream stays usable)
 * or on an I/O failure (the stream is then marked broken and later appends
 * fail too). Counts types for session.end. */
int64_t receipt_append(struct receipt_writer *w, const char *type,
		       enum receipt_decision decision, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason);

/* receipt_append() of a line after the first with the subject given as
 * @subject_len bytes of JSON text that receipt_json_canonical() accepted
 * (the caller checks: they go into the line as they are, saving the
 * parse and print of the object). */
int64_t receipt_append_canonical(struct receipt_writer *w, const char *type,
				 enum receipt_decision decision,
				 enum receipt_point point, const char *rule,
				 const char *subject, size_t subject_len,
				 const char *reason);

/* Changes the policy digest of the lines appended from now on. The caller
 * appends a policy.reload receipt (decision info) right after: `airlock
 * verify` accepts a new digest only on such a line. Returns 0, or -1 for a
 * malformed digest. */
int receipt_set_policy(struct receipt_writer *w, const char *policy_digest);

/* session.end will carry "spend_usd": @nano nano-dollars as dollars (a
 * session whose spend was metered). */
void receipt_set_spend(struct receipt_writer *w, int64_t nano);

/* Writes session.end with {"exit": @exit_status, "counts": {...}} (counts
 * include session.start and this line, keys sorted), fsyncs the stream
 * (EINVAL/EROFS/ENOTSUP from a pipe or tty are not errors), closes it if
 * the writer opened it, and frees @w. Returns 0, or -1 with errno set on
 * an I/O failure (also when an earlier append had broken the stream). */
int receipt_close(struct receipt_writer *w, int exit_status);

/* 0 while the stream is intact; the errno of the write that broke it (and
 * made every later append fail) otherwise. Tells a line that was too long
 * (append returned -1, the stream goes on) from a stream that is over. */
int receipt_error(const struct receipt_writer *w);

/* Hands what is written to the stream, whole lines with their newlines,
 * to @fn too, once written (the live feed, feed.h): @fn must not block. */
typedef void (*receipt_tap_fn)(void *arg, const char *buf, size_t len);
void receipt_set_tap(struct receipt_writer *w, receipt_tap_fn fn, void *arg);

/* Frees @w without writing session.end (for a stream that is abandoned). */
void receipt_abort(struct receipt_writer *w);

/* How lines are signed (receipts.sign): each line, or only checkpoints
 * (receipt.checkpoint lines, whose subject holds a signed C2SP checkpoint
 * of the Merkle tree over the lines before it) and session.end. */
enum receipt_sign {
	RECEIPT_SIGN_LINE = 0,
	RECEIPT_SIGN_CHECKPOINT,
};

#define RECEIPT_CHECKPOINT_TYPE "receipt.checkpoint"
/* run --witness: a witness's cosignature of an earlier checkpoint, as the
 * session went (subject: size, witness, cosignatures) */
#define RECEIPT_COSIGNATURE_TYPE "receipt.cosignature"

/* Before the first append: the signing mode. Checkpoint mode needs a
 * session id that is a note key name (no spaces, no '+'); -1 otherwise. */
int receipt_set_sign_mode(struct receipt_writer *w, enum receipt_sign mode);

/* Checkpoint mode keeps unsigned lines in memory (up to 64 KiB) until a
 * signed line or this call writes them, in one write(): the caller flushes
 * soon after (the key holder within KEEPER_WRITE_MS), and before it tells
 * anyone a seq. Returns 0, or -1 on
 * an I/O failure (see receipt_error()). */
int receipt_flush(struct receipt_writer *w);

/* Are lines waiting in memory for receipt_flush()? */
bool receipt_unflushed(const struct receipt_writer *w);

/* Has a line without "sig" been written since the last signed one? */
bool receipt_unsigned_pending(const struct receipt_writer *w);

/* Writes a receipt.checkpoint line (signed) for the lines before it:
 * subject {"size": N, "root": base64, "note": the checkpoint as a signed
 * note by the session key, key name and origin "airlock/SESSION"}.
 * receipt_close() writes one before session.end in checkpoint mode.
 * Returns its seq, or -1 (see receipt_append()). */
int64_t receipt_checkpoint(struct receipt_writer *w);

/* For a witness (run --witness): writes a checkpoint unless the last line
 * is one, in either mode, and returns a copy of its note (the caller
 * frees it); NULL on an I/O failure. */
char *receipt_final_checkpoint(struct receipt_writer *w);

/* session.end will carry "cosignatures": the C2SP cosignature lines of
 * @lines (each with its newline) on the checkpoint just before it. */
void receipt_set_cosignatures(struct receipt_writer *w, const char *lines);

/* Result of verifying one stream file. */
struct receipt_verify_result {
	bool ok;
	size_t lines;          /* lines read (up to the failing one) */
	size_t sessions;       /* complete session streams */
	size_t bad_line;       /* 1-based line of the first failure, 0 if none */
	char reason[256];      /* why it failed (printable ASCII only) */
	json_t *counts;        /* type -> number over all complete sessions,
				  keys sorted (owned) */
};

/* `verify --witness`: from now on (until called with NULL) each stream's
 * session.end must carry a cosignature by @witness on the checkpoint just
 * before it. The key is borrowed. */
void receipt_verify_set_witness(EVP_PKEY *witness);

/* Verifies a stream (docs/RECEIPTS.md). A file may hold several session streams one
 * after the other (the events path is appended to); each must be complete:
 * a new stream starts with a seq 0 session.start right after a session.end.
 * @pubkey (NULL: trust each stream's session.start pubkey) must have signed
 * every line and equal every session.start pubkey. @text is @len bytes, not
 * necessarily NUL-terminated. A last line without its newline is accepted
 * when it is otherwise intact. An empty input fails at line 1. A truncated
 * stream (no session.end) fails at its last line. The caller frees @res with
 * receipt_verify_result_free(). */
void receipt_verify_buffer(const char *text, size_t len, EVP_PKEY *pubkey,
			   struct receipt_verify_result *res);

/* The same, reading @in to its end in bounded memory. Returns 0 when @res
 * holds the verdict, or -errno when @in could not be read (@res then says
 * nothing and still must be freed). */
int receipt_verify_file(FILE *in, EVP_PKEY *pubkey,
			struct receipt_verify_result *res);

/* Reads an SPKI PEM Ed25519 public key (`airlock keygen` output); refuses
 * other types. NULL with a reason in @err. */
EVP_PKEY *receipt_pubkey_load(const char *path, char *err, size_t errlen);

void receipt_verify_result_free(struct receipt_verify_result *res);

#endif /* AIRLOCK_RECEIPT_H */
