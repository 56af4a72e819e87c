/* SPDX-License-Identifier: Apache-2.0
 * receipt_key.c - the receipts' signing keys: loading, generating, the
 * public key's forms, and `airlock keygen`.
 *
 * DOC: Theory of Operation
 *
 * A signing key is an unencrypted Ed25519 private key in PKCS#8 PEM: the
 * one form `airlock keygen` writes and `--signing-key` reads. Loading
 * refuses every other type and never prompts for a passphrase (airlock
 * runs unattended); the file's bytes are wiped from our buffer once
 * parsed. Only the key holder (keeper.c) calls receipt_key_load() or
 * receipt_key_generate() during a session: no other process of a session
 * ever holds a private key. The public key travels as base64 of its 32
 * raw bytes (session.start's "pubkey") or as SPKI PEM (`verify
 * --pubkey`).
 *
 * keygen writes the private key with mode 0600 and O_EXCL (a dangling
 * symlink counts as existing), or with --force to a temporary file in the
 * same directory that is then renamed over the old one, so a key file is
 * never seen half-written.
 */
#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "receipt_line.h"
#include "util.h"

#define KEY_FILE_MAX 16384

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
		receipt_set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		receipt_set_err(err, errlen, "not a regular file");
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
			receipt_set_err(err, errlen, "%s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		used += (size_t)r;
		if (used == sizeof(buf)) {
			receipt_set_err(err, errlen, "too large for a PEM Ed25519 key");
			goto out;
		}
	}
	bio = BIO_new_mem_buf(buf, (int)used);
	if (!bio) {
		receipt_set_err(err, errlen, "out of memory");
		goto out;
	}
	key = PEM_read_bio_PrivateKey(bio, NULL, refuse_passphrase, NULL);
	if (!key) {
		if (memmem(buf, used, "ENCRYPTED PRIVATE KEY", 21))
			receipt_set_err(err, errlen, "encrypted keys are not supported "
				"(airlock runs unattended)");
		else
			receipt_set_err(err, errlen, "not a PEM private key "
				"(make one with `airlock keygen`)");
		goto out;
	}
	if (!receipt_key_is_ed25519(key)) {
		receipt_set_err(err, errlen, "not an Ed25519 key (make one with "
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
		receipt_set_err(err, errlen, "%s", strerror(errno));
		goto out;
	}
	bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio) {
		receipt_set_err(err, errlen, "out of memory");
		goto out;
	}
	key = PEM_read_bio_PUBKEY(bio, NULL, refuse_passphrase, NULL);
	if (!key) {
		receipt_set_err(err, errlen, "not a PEM public key (SubjectPublicKeyInfo, "
			"as `airlock keygen` prints)");
		goto out;
	}
	if (!receipt_key_is_ed25519(key)) {
		receipt_set_err(err, errlen, "not an Ed25519 public key");
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
	uint8_t raw[RECEIPT_ED25519_KEY_LEN];

	if (len < RECEIPT_PUBKEY_B64_LEN + 1 || !receipt_key_raw_public(key, raw))
		return false;
	EVP_EncodeBlock((unsigned char *)out, raw, RECEIPT_ED25519_KEY_LEN);
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
		receipt_set_err(err, errlen, "cannot generate an Ed25519 key");
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
			receipt_set_err(err, errlen, "exists (use --force to replace it)");
		else
			receipt_set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	if (fchmod(fd, 0600) < 0) {
		rc = -errno;
		receipt_set_err(err, errlen, "%s", strerror(-rc));
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
		receipt_set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	created = NULL;
	sync_parent(path);
	if (PEM_write_PUBKEY(pub_out, key) != 1 || fflush(pub_out) != 0) {
		rc = -EIO;
		receipt_set_err(err, errlen, "key written, but the public key could not "
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
