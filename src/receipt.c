/* SPDX-License-Identifier: Apache-2.0
 * receipt.c - the signed, hash-chained event stream (SPEC §6).
 *
 * DOC: Theory of Operation
 *
 * Every decision an enforcement point makes becomes one line of JSON: a
 * compact object whose members come in a fixed order, the last two being
 * "prev" and "sig". The stream is made tamper-evident by two independent
 * mechanisms, both of which an auditor can recompute with stock tools
 * (sha256sum, openssl pkeyutl -rawin) without trusting this code:
 *
 * - the chain: "prev" is the SHA-256 of the previous line's exact bytes
 *   (without its newline), 64 zeros at seq 0. Removing, inserting or
 *   reordering lines breaks it, and so does "seq", which counts 0, 1, 2...
 * - the signature: "sig" is Ed25519 over the line's exact bytes with the
 *   final `,"sig":"..."` removed, i.e. the bytes `{...,"prev":"..."}`. The
 *   signed bytes are what the writer serialised, never a re-serialisation,
 *   so verification does not depend on how any JSON library formats.
 *
 * A stream begins with session.start, whose subject carries the signing
 * public key, and ends with session.end, whose subject counts the lines of
 * each type (including both of these) so that a stream cut short or with
 * lines dropped from the end is detected. A session that could not start
 * (enforce mode on a host without a capability) opens its stream with
 * session.refused instead, which carries the key too and may be followed
 * only by session.end. The events path is appended to
 * across sessions, so one file may hold several streams back to back: a
 * new one may begin (seq 0, session.start, prev all zeros) only right after
 * a session.end. Each stream is its own chain, so removing a whole session
 * from such a file is not detected by the chain: an auditor who needs that
 * keeps one file per session.
 *
 * Trust: without a pinned key, each stream is verified against the key its
 * own session.start names. That proves the stream was not altered after it
 * was written (integrity) but not who wrote it; `verify --pubkey` pins the
 * key that must have signed every line (authenticity).
 *
 * Writing: each line goes out in one write() on the stream descriptor; on an
 * O_APPEND file that is atomic with respect to other appenders, so lines
 * never interleave. The chain state lives in one writer, so a stream has
 * exactly one writer. An I/O failure marks the stream broken: nothing more
 * is written, because a line after a gap could never verify anyway.
 *
 * Verifying is strict and stops at the first bad line, naming it:
 * - the line must be a JSON object with exactly the thirteen members in
 *   order (parsed with duplicates rejected, order taken from iteration),
 *   each of its type and format, and it must end with the "sig" member in
 *   compact form, since the signed bytes are found by cutting it off;
 * - seq, prev and the signature are then checked against the stream state,
 *   and session and policy against the stream's session.start;
 * - session.end's counts must equal a recount of the stream.
 * A last line without its newline is accepted when it is otherwise intact:
 * the newline is framing, outside every signature, and a writer killed
 * mid-write leaves a line that fails anyway. An empty file fails at line 1;
 * a stream without session.end fails at its last line.
 */
#include "receipt.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "util.h"

#define ED25519_KEY_LEN 32
#define ED25519_SIG_LEN 64
#define PUBKEY_B64_LEN 44
#define SIG_B64_LEN 88
#define SHA256_HEX_LEN 64
#define TYPE_MAX 64
#define KEY_FILE_MAX 16384

static const char sig_open[] = ",\"sig\":\"";
#define SIG_TAIL_LEN (sizeof(sig_open) - 1 + SIG_B64_LEN + 2)

static const char zero_prev[SHA256_HEX_LEN + 1] =
	"0000000000000000000000000000000000000000000000000000000000000000";

static const char *const decision_names[] = {
	[RECEIPT_ALLOW] = "allow",
	[RECEIPT_BLOCK] = "block",
	[RECEIPT_WOULD_BLOCK] = "would_block",
	[RECEIPT_INFO] = "info",
};
static_assert(ARRAY_SIZE(decision_names) == RECEIPT_DECISION_COUNT,
	      "decision_names matches enum receipt_decision");

static const char *const point_names[] = {
	[RECEIPT_POINT_SUPERVISOR] = "supervisor",
	[RECEIPT_POINT_SANDBOX] = "sandbox",
	[RECEIPT_POINT_EGRESS_PROXY] = "egress-proxy",
	[RECEIPT_POINT_BROKER] = "broker",
	[RECEIPT_POINT_GIT] = "git",
};
static_assert(ARRAY_SIZE(point_names) == RECEIPT_POINT_COUNT,
	      "point_names matches enum receipt_point");

enum member {
	MEMBER_V = 0,
	MEMBER_SEQ,
	MEMBER_TS,
	MEMBER_SESSION,
	MEMBER_TYPE,
	MEMBER_DECISION,
	MEMBER_POINT,
	MEMBER_RULE,
	MEMBER_POLICY,
	MEMBER_SUBJECT,
	MEMBER_REASON,
	MEMBER_PREV,
	MEMBER_SIG,
	MEMBER_COUNT
};

static const char *const member_names[] = {
	[MEMBER_V] = "v",
	[MEMBER_SEQ] = "seq",
	[MEMBER_TS] = "ts",
	[MEMBER_SESSION] = "session",
	[MEMBER_TYPE] = "type",
	[MEMBER_DECISION] = "decision",
	[MEMBER_POINT] = "point",
	[MEMBER_RULE] = "rule",
	[MEMBER_POLICY] = "policy",
	[MEMBER_SUBJECT] = "subject",
	[MEMBER_REASON] = "reason",
	[MEMBER_PREV] = "prev",
	[MEMBER_SIG] = "sig",
};
static_assert(ARRAY_SIZE(member_names) == MEMBER_COUNT,
	      "member_names matches enum member");

const char *receipt_decision_to_string(enum receipt_decision d)
{
	ASSERT((unsigned)d < RECEIPT_DECISION_COUNT);
	return decision_names[d];
}

const char *receipt_point_to_string(enum receipt_point p)
{
	ASSERT((unsigned)p < RECEIPT_POINT_COUNT);
	return point_names[p];
}

static bool name_in(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

__attribute__((format(printf, 3, 4))) static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Length of the well-formed UTF-8 sequence at @s (@n bytes available), or 0
 * when it is not one (overlong forms and surrogates included). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t c;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)))
		return 0;
	if (len == 4 && (c < 0x10000 || c > 0x10ffff))
		return 0;
	return len;
}

static bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	while (n > 0) {
		size_t k = utf8_seq(p, n);

		if (k == 0)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

/* A malloc'd copy of @s with each byte that does not start a well-formed
 * UTF-8 sequence replaced by U+FFFD, cut on a character boundary to at most
 * @max bytes. */
static char *utf8_clean(const char *s, size_t max)
{
	static const char replacement[] = "\xef\xbf\xbd";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), used = 0;
	char *out = util_xmalloc(max + 1);

	while (n > 0) {
		size_t k = utf8_seq(p, n);
		const void *piece = k ? (const void *)p : replacement;
		size_t plen = k ? k : sizeof(replacement) - 1;

		if (used + plen > max)
			break;
		memcpy(out + used, piece, plen);
		used += plen;
		p += k ? k : 1;
		n -= k ? k : 1;
	}
	out[used] = '\0';
	return out;
}

static bool valid_type(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > TYPE_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static bool is_hex64(const char *s, size_t len)
{
	size_t i;

	if (len != SHA256_HEX_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool valid_policy_digest(const char *s, size_t len)
{
	return len == 7 + SHA256_HEX_LEN && memcmp(s, "sha256:", 7) == 0 &&
	       is_hex64(s + 7, SHA256_HEX_LEN);
}

static unsigned digits(const char *s, size_t n)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	return v;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ", as util_rfc3339_now() writes it. */
static bool valid_ts(const char *s, size_t len)
{
	static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	static const unsigned mdays[] = {31, 29, 31, 30, 31, 30,
					 31, 31, 30, 31, 30, 31};
	unsigned year, mon, day;
	size_t i;

	if (len != sizeof(pattern) - 1)
		return false;
	for (i = 0; i < len; i++) {
		if (pattern[i] == 'd' ? (s[i] < '0' || s[i] > '9')
				      : s[i] != pattern[i])
			return false;
	}
	year = digits(s, 4);
	mon = digits(s + 5, 2);
	day = digits(s + 8, 2);
	if (mon < 1 || mon > 12 || day < 1 || day > mdays[mon - 1])
		return false;
	if (mon == 2 && day == 29 &&
	    !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)))
		return false;
	return digits(s + 11, 2) <= 23 && digits(s + 14, 2) <= 59 &&
	       digits(s + 17, 2) <= 60;
}

/* Standard base64 with padding of exactly @outlen bytes, in canonical form
 * only (the one encoding EVP_EncodeBlock produces). */
static bool b64_decode_exact(const char *s, size_t slen, uint8_t *out,
			     size_t outlen)
{
	uint8_t tmp[3 * (SIG_B64_LEN / 4)];
	char again[SIG_B64_LEN + 1];
	bool ok = false;

	ASSERT(outlen <= ED25519_SIG_LEN);
	if (slen != 4 * ((outlen + 2) / 3))
		goto out;
	if (EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)slen) !=
	    (int)(3 * (slen / 4)))
		goto out;
	EVP_EncodeBlock((unsigned char *)again, tmp, (int)outlen);
	if (memcmp(again, s, slen) != 0)
		goto out;
	memcpy(out, tmp, outlen);
	ok = true;
out:
	return ok;
}

static void sha256_hex(const void *data, size_t len,
		       char out[SHA256_HEX_LEN + 1])
{
	/* Fetched once: an implicit fetch per line (EVP_sha256()) showed up
	 * in the proxy's profile. Never freed: it lives as long as the
	 * process, like OpenSSL's own tables. */
	static EVP_MD *sha256;
	uint8_t md[32];
	unsigned int mdlen = 0;

	if (!sha256)
		sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	ASSERT(sha256);
	ASSERT(EVP_Digest(data, len, md, &mdlen, sha256, NULL) == 1);
	ASSERT(mdlen == sizeof(md));
	util_hex(md, sizeof(md), out);
}

static bool is_ed25519(EVP_PKEY *key)
{
	return key && EVP_PKEY_is_a(key, "ED25519");
}

static bool raw_pubkey(EVP_PKEY *key, uint8_t out[ED25519_KEY_LEN])
{
	size_t len = ED25519_KEY_LEN;

	return is_ed25519(key) &&
	       EVP_PKEY_get_raw_public_key(key, out, &len) == 1 &&
	       len == ED25519_KEY_LEN;
}

/* Signs with a copy of @tpl, a context initialised once for the key:
 * initialising per line costs an algorithm lookup each time. */
static bool sign(EVP_MD_CTX *tpl, const void *msg, size_t len,
		 uint8_t sig[ED25519_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t siglen = ED25519_SIG_LEN;
	bool ok = false;

	if (!ctx || EVP_MD_CTX_copy_ex(ctx, tpl) != 1)
		goto out;
	if (EVP_DigestSign(ctx, sig, &siglen, msg, len) != 1 ||
	    siglen != ED25519_SIG_LEN)
		goto out;
	ok = true;
out:
	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	return ok;
}

static bool sig_valid(EVP_PKEY *key, const void *msg, size_t len,
		      const uint8_t sig[ED25519_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = false;

	if (!ctx || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1)
		goto out;
	ok = EVP_DigestVerify(ctx, sig, ED25519_SIG_LEN, msg, len) == 1;
out:
	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	return ok;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A new object holding @obj's members (referenced, not copied) with its
 * keys in strcmp order. */
static json_t *sorted_copy(json_t *obj)
{
	size_t n = json_object_size(obj), i = 0;
	const char **keys = util_xcalloc(n, sizeof(*keys));
	json_t *out = json_object(), *val;
	const char *key;

	ASSERT(out);
	json_object_foreach(obj, key, val)
		keys[i++] = key;
	qsort(keys, n, sizeof(*keys), cmp_key);
	for (i = 0; i < n; i++)
		ASSERT(json_object_set(out, keys[i], json_object_get(obj, keys[i])) == 0);
	free(keys);
	return out;
}

static json_int_t count_of(json_t *counts, const char *type)
{
	return json_integer_value(json_object_get(counts, type));
}

static void count_add(json_t *counts, const char *type, json_int_t n)
{
	ASSERT(json_object_set_new(counts, type,
				   json_integer(count_of(counts, type) + n)) == 0);
}

/* ---- keys ---- */

EVP_PKEY *receipt_key_generate(void)
{
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");

	if (!key)
		ERR_clear_error();
	return key;
}

static int refuse_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

EVP_PKEY *receipt_key_load(const char *path, char *err, size_t errlen)
{
	char buf[KEY_FILE_MAX];
	EVP_PKEY *key = NULL;
	struct stat st;
	size_t used = 0;
	BIO *bio = NULL;
	int fd = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "not a regular file");
		goto out;
	}
	if (st.st_mode & 077)
		util_warn("signing key %s is accessible by group or others "
			  "(mode %03o); chmod 600 it",
			  path, (unsigned)(st.st_mode & 0777));
	for (;;) {
		ssize_t r = read(fd, buf + used, sizeof(buf) - used);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			set_err(err, errlen, "%s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		used += (size_t)r;
		if (used == sizeof(buf)) {
			set_err(err, errlen, "too large for a PEM Ed25519 key");
			goto out;
		}
	}
	bio = BIO_new_mem_buf(buf, (int)used);
	if (!bio) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	key = PEM_read_bio_PrivateKey(bio, NULL, refuse_passphrase, NULL);
	if (!key) {
		if (memmem(buf, used, "ENCRYPTED PRIVATE KEY", 21))
			set_err(err, errlen, "encrypted keys are not supported "
				"(airlock runs unattended)");
		else
			set_err(err, errlen, "not a PEM private key "
				"(make one with `airlock keygen`)");
		goto out;
	}
	if (!is_ed25519(key)) {
		set_err(err, errlen, "not an Ed25519 key (make one with "
			"`airlock keygen`)");
		EVP_PKEY_free(key);
		key = NULL;
	}
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	BIO_free(bio);
	if (fd >= 0)
		close(fd);
	ERR_clear_error();
	return key;
}

EVP_PKEY *receipt_pubkey_load(const char *path, char *err, size_t errlen)
{
	EVP_PKEY *key = NULL;
	BIO *bio = NULL;
	size_t len = 0;
	char *pem;

	pem = util_read_file(path, KEY_FILE_MAX, &len);
	if (!pem) {
		set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	key = PEM_read_bio_PUBKEY(bio, NULL, refuse_passphrase, NULL);
	if (!key) {
		set_err(err, errlen, "not a PEM public key (SubjectPublicKeyInfo, "
			"as `airlock keygen` prints)");
		goto out;
	}
	if (!is_ed25519(key)) {
		set_err(err, errlen, "not an Ed25519 public key");
		EVP_PKEY_free(key);
		key = NULL;
	}
out:
	BIO_free(bio);
	free(pem);
	ERR_clear_error();
	return key;
}

bool receipt_pubkey_b64(EVP_PKEY *key, char *out, size_t len)
{
	uint8_t raw[ED25519_KEY_LEN];

	if (len < PUBKEY_B64_LEN + 1 || !raw_pubkey(key, raw))
		return false;
	EVP_EncodeBlock((unsigned char *)out, raw, ED25519_KEY_LEN);
	return true;
}

/* Makes a rename or creation in @path's directory durable; best effort. */
static void sync_parent(const char *path)
{
	char *dir = util_xstrdup(path), *slash = strrchr(dir, '/');
	int fd;

	if (slash)
		slash[slash == dir ? 1 : 0] = '\0';
	fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

int receipt_keygen(const char *path, bool force, FILE *pub_out, char *err,
		   size_t errlen)
{
	const char *created = NULL;
	EVP_PKEY *key = NULL;
	char *tmp = NULL, *pem;
	BIO *bio = NULL;
	int fd = -1, rc = -EIO;
	long pemlen;

	key = receipt_key_generate();
	bio = BIO_new(BIO_s_secmem());
	if (!key || !bio ||
	    !PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL)) {
		set_err(err, errlen, "cannot generate an Ed25519 key");
		goto out;
	}
	pemlen = BIO_get_mem_data(bio, &pem);
	if (force) {
		tmp = util_xasprintf("%s.tmp.XXXXXX", path);
		fd = mkostemp(tmp, O_CLOEXEC);
		created = tmp;
	} else {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			  0600);
		created = path;
	}
	if (fd < 0) {
		rc = -errno;
		created = NULL;
		if (rc == -EEXIST)
			set_err(err, errlen, "exists (use --force to replace it)");
		else
			set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	if (fchmod(fd, 0600) < 0) {
		rc = -errno;
		set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	rc = util_write_all(fd, pem, (size_t)pemlen);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	fd = -1;
	if (rc == 0 && force && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	created = NULL;
	sync_parent(path);
	if (PEM_write_PUBKEY(pub_out, key) != 1 || fflush(pub_out) != 0) {
		rc = -EIO;
		set_err(err, errlen, "key written, but the public key could not "
			"be printed");
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (created)
		unlink(created);
	free(tmp);
	BIO_free(bio);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return rc;
}

/* ---- writing ---- */

struct receipt_writer {
	EVP_MD_CTX *sign_tpl;  /* DigestSign initialised with key */
	int fd;
	bool owns_fd;
	bool broken;
	EVP_PKEY *key;
	char pubkey[PUBKEY_B64_LEN + 1];
	char *session;
	char *policy;
	int64_t seq;
	char prev[SHA256_HEX_LEN + 1];
	json_t *counts;
};

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
			set_err(err, errlen, "fd:N needs a descriptor number");
			return -1;
		}
		fd = (int)n;
		if (fcntl(fd, F_GETFD) < 0) {
			set_err(err, errlen, "descriptor %d is not open", fd);
			return -1;
		}
		if (fd > STDERR_FILENO && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			set_err(err, errlen, "descriptor %d: %s", fd, strerror(errno));
			return -1;
		}
	} else {
		fd = open(dest, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
			  0600);
		if (fd < 0) {
			set_err(err, errlen, "%s", strerror(errno));
			return -1;
		}
		*owns = true;
	}
	if (!fd_writable(fd)) {
		set_err(err, errlen, "descriptor %d is not open for writing", fd);
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
	json_decref(w->counts);
	free(w);
}

struct receipt_writer *receipt_open(const char *dest, EVP_PKEY *key,
				    const char *session, const char *policy_digest,
				    char *err, size_t errlen)
{
	struct receipt_writer *w = NULL;
	char pub[PUBKEY_B64_LEN + 1];
	bool owns;
	int fd;

	if (!session || !*session || strlen(session) > RECEIPT_TEXT_MAX ||
	    !utf8_valid(session)) {
		set_err(err, errlen, "the session id must be 1-%d bytes of UTF-8",
			RECEIPT_TEXT_MAX);
		goto out;
	}
	if (!policy_digest ||
	    !valid_policy_digest(policy_digest, strlen(policy_digest))) {
		set_err(err, errlen, "the policy digest is not sha256:<64 hex>");
		goto out;
	}
	if (!receipt_pubkey_b64(key, pub, sizeof(pub))) {
		set_err(err, errlen, "the signing key is not an Ed25519 key");
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
		set_err(err, errlen, "cannot initialise Ed25519 signing");
		writer_free(w);
		w = NULL;
		goto out;
	}
	memcpy(w->pubkey, pub, sizeof(pub));
	w->session = util_xstrdup(session);
	w->policy = util_xstrdup(policy_digest);
	memcpy(w->prev, zero_prev, sizeof(w->prev));
	w->counts = json_object();
	ASSERT(w->counts);
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

static void set_member(json_t *obj, const char *name, json_t *val)
{
	ASSERT(val);
	ASSERT(json_object_set_new(obj, name, val) == 0);
}

static int64_t emit(struct receipt_writer *w, const char *type,
		    enum receipt_decision decision, enum receipt_point point,
		    const char *rule, json_t *subject, const char *reason)
{
	char ts[25], sig_b64[SIG_B64_LEN + 1];
	char *rule_c = NULL, *reason_c = NULL, *body = NULL, *line = NULL;
	uint8_t sig[ED25519_SIG_LEN];
	size_t body_len, line_len;
	json_t *obj = NULL;
	int64_t rc = -1;

	rule_c = utf8_clean(rule ? rule : "", RECEIPT_TEXT_MAX);
	reason_c = utf8_clean(reason ? reason : "", RECEIPT_TEXT_MAX);
	util_rfc3339_now(ts);
	obj = json_object();
	ASSERT(obj);
	set_member(obj, "v", json_integer(1));
	set_member(obj, "seq", json_integer(w->seq));
	set_member(obj, "ts", json_string(ts));
	set_member(obj, "session", json_string(w->session));
	set_member(obj, "type", json_string(type));
	set_member(obj, "decision", json_string(receipt_decision_to_string(decision)));
	set_member(obj, "point", json_string(receipt_point_to_string(point)));
	set_member(obj, "rule", json_string(rule_c));
	set_member(obj, "policy", json_string(w->policy));
	set_member(obj, "subject", subject ? json_incref(subject) : json_object());
	set_member(obj, "reason", json_string(reason_c));
	set_member(obj, "prev", json_string(w->prev));
	body = json_dumps(obj, JSON_COMPACT);
	ASSERT(body);
	body_len = strlen(body);
	ASSERT(body_len > 2 && body[body_len - 1] == '}');
	line_len = body_len - 1 + SIG_TAIL_LEN;
	if (line_len > RECEIPT_LINE_MAX || !sign(w->sign_tpl, body, body_len, sig))
		goto out;
	EVP_EncodeBlock((unsigned char *)sig_b64, sig, ED25519_SIG_LEN);
	line = util_xmalloc(line_len + 1);
	memcpy(line, body, body_len - 1);
	memcpy(line + body_len - 1, sig_open, sizeof(sig_open) - 1);
	memcpy(line + line_len - 2 - SIG_B64_LEN, sig_b64, SIG_B64_LEN);
	memcpy(line + line_len - 2, "\"}\n", 3);
	if (write_line(w->fd, line, line_len + 1) < 0) {
		w->broken = true;
		goto out;
	}
	sha256_hex(line, line_len, w->prev);
	count_add(w->counts, type, 1);
	rc = w->seq++;
out:
	free(line);
	free(body);
	json_decref(obj);
	free(reason_c);
	free(rule_c);
	return rc;
}

int receipt_set_policy(struct receipt_writer *w, const char *policy_digest)
{
	if (!valid_policy_digest(policy_digest, strlen(policy_digest)))
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

	ASSERT(w && type && valid_type(type, strlen(type)));
	ASSERT(!subject || json_is_object(subject));
	if (w->broken)
		return -1;
	start = receipt_type_opens_stream(type);
	ASSERT(start == (w->seq == 0));
	ASSERT(strcmp(type, "session.end") != 0);
	if (start)
		ASSERT(subject && json_is_string(json_object_get(subject, "pubkey")) &&
		       strcmp(json_string_value(json_object_get(subject, "pubkey")),
			      w->pubkey) == 0);
	return emit(w, type, decision, point, rule, subject, reason);
}

/* fsync, where the descriptor supports it. */
static int sync_stream(int fd)
{
	if (fsync(fd) == 0 || errno == EINVAL || errno == EROFS ||
	    errno == ENOTSUP || errno == EOPNOTSUPP)
		return 0;
	return -errno;
}

int receipt_close(struct receipt_writer *w, int exit_status)
{
	json_t *recount = NULL, *counts = NULL, *subject = NULL;
	char *reason = NULL;
	int rc = -1;

	ASSERT(w);
	if (w->broken)
		goto out;
	ASSERT(w->seq > 0);
	recount = json_copy(w->counts);
	ASSERT(recount);
	count_add(recount, "session.end", 1);
	counts = sorted_copy(recount);
	subject = json_pack("{s:i, s:O}", "exit", exit_status, "counts", counts);
	ASSERT(subject);
	reason = util_xasprintf("session ended, exit status %d", exit_status);
	if (emit(w, "session.end", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR,
		 "session", subject, reason) < 0)
		goto out;
	if (sync_stream(w->fd) < 0)
		goto out;
	rc = 0;
out:
	if (w->owns_fd && close(w->fd) < 0)
		rc = -1;
	w->fd = -1;
	free(reason);
	json_decref(subject);
	json_decref(counts);
	json_decref(recount);
	writer_free(w);
	return rc;
}

void receipt_abort(struct receipt_writer *w)
{
	if (w)
		writer_free(w);
}

/* ---- verifying ---- */

struct verifier {
	struct receipt_verify_result *res;
	EVP_PKEY *pin;                  /* borrowed, or NULL */
	uint8_t pin_raw[ED25519_KEY_LEN];
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
	char prev[SHA256_HEX_LEN + 1];
	json_t *counts;
};

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
		ASSERT(raw_pubkey(pin, v->pin_raw));
}

static void verifier_finish(struct verifier *v)
{
	json_t *sorted;

	if (!v->failed) {
		if (v->lineno == 0) {
			v->lineno = 1;
			fail(v, "empty stream (no session.start)");
		} else if (v->in_stream) {
			fail(v, "the stream that began at line %zu ends without "
			     "session.end (truncated)", v->start_line);
		} else {
			v->res->ok = true;
		}
	}
	sorted = sorted_copy(v->res->counts);
	json_decref(v->res->counts);
	v->res->counts = sorted;
	stream_reset(v);
	free(v->msg);
}

/* A seq 0 session.start opens a stream: its key, session and policy bind
 * every later line of the stream. */
static bool stream_begin(struct verifier *v, json_t **val)
{
	const char *prev = json_string_value(val[MEMBER_PREV]);
	json_t *pub = json_object_get(val[MEMBER_SUBJECT], "pubkey");
	uint8_t raw[ED25519_KEY_LEN];

	if (strcmp(prev, zero_prev) != 0)
		return fail(v, "prev of a seq 0 line is not 64 zeros");
	if (!json_is_string(pub) ||
	    !b64_decode_exact(json_string_value(pub), json_string_length(pub), raw,
			      sizeof(raw)))
		return fail(v, "session.start subject has no \"pubkey\" "
			    "(base64 of 32 bytes)");
	if (v->pin && memcmp(raw, v->pin_raw, sizeof(raw)) != 0)
		return fail(v, "session.start pubkey is not the --pubkey key "
			    "(signed by another key)");
	v->key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, sizeof(raw));
	if (!v->key) {
		ERR_clear_error();
		return fail(v, "session.start pubkey is not an Ed25519 key");
	}
	v->in_stream = true;
	v->refused = strcmp(json_string_value(val[MEMBER_TYPE]), "session.refused") == 0;
	v->start_line = v->lineno;
	v->session = util_xstrdup(json_string_value(val[MEMBER_SESSION]));
	v->policy = util_xstrdup(json_string_value(val[MEMBER_POLICY]));
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
	if (v->refused && strcmp(json_string_value(val[MEMBER_TYPE]), "session.end") != 0)
		return fail(v, "only session.end may follow session.refused");
	if (strcmp(json_string_value(val[MEMBER_PREV]), v->prev) != 0)
		return fail(v, "prev is not the SHA-256 of line %zu (a line was "
			    "altered, removed, inserted or reordered)",
			    v->lineno - 1);
	if (strcmp(json_string_value(val[MEMBER_SESSION]), v->session) != 0)
		return fail(v, "session differs from the session.start at line %zu",
			    v->start_line);
	if (strcmp(json_string_value(val[MEMBER_POLICY]), v->policy) != 0) {
		/* The one place the digest may change: a successful reload
		 * (`airlock proxy`, SIGHUP) names the new policy, and every
		 * later line must carry it. */
		if (strcmp(json_string_value(val[MEMBER_TYPE]), "policy.reload") != 0 ||
		    strcmp(json_string_value(val[MEMBER_DECISION]), "info") != 0)
			return fail(v, "policy differs from the session.start at line %zu "
				    "(and this line is not a policy.reload)",
				    v->start_line);
		free(v->policy);
		v->policy = util_xstrdup(json_string_value(val[MEMBER_POLICY]));
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
					    (long long)count_of(counts, type), type,
					    (long long)json_integer_value(val));
		json_object_foreach(counts, type, val)
			if (!json_object_get(v->counts, type))
				return fail(v, "session.end counts %lld \"%.64s\" "
					    "lines, the stream has none",
					    (long long)json_integer_value(val), type);
	}
	json_object_foreach(v->counts, type, val)
		count_add(v->res->counts, type, json_integer_value(val));
	v->res->sessions++;
	stream_reset(v);
	return true;
}

/* Checks member order, types and formats; fills @val. */
static bool check_members(struct verifier *v, json_t *obj, json_t **val,
			  uint8_t sig[ED25519_SIG_LEN])
{
	static const enum member strings[] = {
		MEMBER_TS, MEMBER_SESSION, MEMBER_TYPE, MEMBER_DECISION,
		MEMBER_POINT, MEMBER_RULE, MEMBER_POLICY, MEMBER_REASON,
		MEMBER_PREV, MEMBER_SIG,
	};
	size_t i = 0;
	void *it;

	for (it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
		if (i == MEMBER_COUNT)
			return fail(v, "extra member after \"sig\"");
		if (strcmp(json_object_iter_key(it), member_names[i]) != 0)
			return fail(v, "member %zu is not \"%s\" (members missing, "
				    "extra or out of order)",
				    i + 1, member_names[i]);
		val[i++] = json_object_iter_value(it);
	}
	if (i != MEMBER_COUNT)
		return fail(v, "member \"%s\" is missing", member_names[i]);
	if (!json_is_integer(val[MEMBER_V]) || json_integer_value(val[MEMBER_V]) != 1)
		return fail(v, "\"v\" is not 1");
	if (!json_is_integer(val[MEMBER_SEQ]) || json_integer_value(val[MEMBER_SEQ]) < 0)
		return fail(v, "\"seq\" is not a non-negative integer");
	for (i = 0; i < ARRAY_SIZE(strings); i++)
		if (!json_is_string(val[strings[i]]))
			return fail(v, "\"%s\" is not a string", member_names[strings[i]]);
	if (!json_is_object(val[MEMBER_SUBJECT]))
		return fail(v, "\"subject\" is not an object");
#define STR(m) json_string_value(val[m]), json_string_length(val[m])
	if (!valid_ts(STR(MEMBER_TS)))
		return fail(v, "\"ts\" is not RFC 3339 UTC with milliseconds");
	if (json_string_length(val[MEMBER_SESSION]) == 0)
		return fail(v, "\"session\" is empty");
	if (!valid_type(STR(MEMBER_TYPE)))
		return fail(v, "\"type\" is not 1-%d characters of [a-z0-9._-]", TYPE_MAX);
	if (!name_in(json_string_value(val[MEMBER_DECISION]), decision_names,
		     ARRAY_SIZE(decision_names)))
		return fail(v, "unknown \"decision\"");
	if (!name_in(json_string_value(val[MEMBER_POINT]), point_names,
		     ARRAY_SIZE(point_names)))
		return fail(v, "unknown \"point\"");
	if (!valid_policy_digest(STR(MEMBER_POLICY)))
		return fail(v, "\"policy\" is not sha256:<64 hex digits>");
	if (!is_hex64(STR(MEMBER_PREV)))
		return fail(v, "\"prev\" is not 64 lowercase hex digits");
	if (!b64_decode_exact(STR(MEMBER_SIG), sig, ED25519_SIG_LEN))
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

	if (len <= SIG_TAIL_LEN)
		return 0;
	cut = len - SIG_TAIL_LEN;
	if (memcmp(line + cut, sig_open, sizeof(sig_open) - 1) != 0 ||
	    memcmp(line + cut + sizeof(sig_open) - 1, sig_b64, SIG_B64_LEN) != 0 ||
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

static bool verify_line(struct verifier *v, const char *line, size_t len)
{
	json_t *obj = NULL, *val[MEMBER_COUNT] = {NULL};
	uint8_t sig[ED25519_SIG_LEN];
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
	msg_len = signed_bytes(v, line, len, json_string_value(val[MEMBER_SIG]));
	if (msg_len == 0) {
		fail(v, "line does not end with the \"sig\" member in compact form");
		goto out;
	}
	seq = json_integer_value(val[MEMBER_SEQ]);
	type = json_string_value(val[MEMBER_TYPE]);
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
	if (!sig_valid(v->key, v->msg, msg_len, sig)) {
		fail(v, "bad signature (line altered, or signed by another key)");
		goto out;
	}
	count_add(v->counts, type, 1);
	v->next_seq = seq < INT64_MAX ? seq + 1 : -1;
	sha256_hex(line, len, v->prev);
	if (strcmp(type, "session.end") == 0 && !stream_end(v, val[MEMBER_SUBJECT]))
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
