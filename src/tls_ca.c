/* SPDX-License-Identifier: Apache-2.0
 * tls_ca.c - the session CA, its leaves and the sandbox's CA bundle.
 *
 * DOC: Theory of Operation
 *
 * To read and rewrite requests to the hosts it intercepts, the proxy
 * terminates the sandbox's TLS with a certificate the sandbox trusts. That
 * trust is the most dangerous thing airlock hands out: whoever holds the
 * CA key can impersonate any site to the sandbox. So:
 *
 *  - a fresh CA per session: an EC P-256 key generated in memory, never
 *    written anywhere (no file, no argv, no environment), its secret
 *    number in OpenSSL's secure heap (locked: never swapped to disk; not
 *    in core dumps), released with EVP_PKEY_free(), which clears it; a CA
 *    that cannot lock that memory is not made; the only copy is inside
 *    the key holder, a process apart from the one that parses the
 *    sandbox's TLS (the proxy asks it for leaves over a narrow channel and
 *    receives PEM text, never the CA key);
 *  - a short life (TLS_CA_LIFETIME, from an hour before its creation, so
 *    that lagging clocks accept it), a random 159-bit serial and a name
 *    with the session in it ("airlock session CA <session>"), so that a
 *    certificate found later says which session made it;
 *  - basicConstraints CA:TRUE with pathlen 0 (it signs leaves, never
 *    another CA), keyUsage keyCertSign and cRLSign, a subject key id;
 *  - leaves only for one name or address each, exactly as the proxy's
 *    normaliser writes it (no wildcard, no second name): EC P-256,
 *    subjectAltName dNSName or iPAddress, serverAuth only, CA:FALSE,
 *    authority and subject key ids (Python's strict verification wants
 *    them), valid within the CA's own validity and for at most
 *    TLS_LEAF_LIFETIME;
 *  - a cache of TLS_CA_CACHE_MAX leaves, one per host, so that a busy
 *    host costs one key generation per TLS_LEAF_LIFETIME; a leaf is issued
 *    again when less than TLS_LEAF_REFRESH of it is left; the least
 *    recently used goes first.
 *
 * A platform may bring its own CA instead (tls_ca_load(): the standalone
 * proxy's --ca-cert/--ca-key), of any key type OpenSSL signs with; then
 * its certificate file may carry the chain above it, which leaves are
 * served with.
 *
 * The bundle the sandbox trusts is the system bundle as it is, then every
 * certificate of egress.upstream_ca (re-encoded from what OpenSSL parsed,
 * so that nothing else of that file travels), then the session CA: a
 * client that reads only this file (or the system bundle's path, where
 * the sandbox shows it) trusts the public web, the internal CAs the
 * policy names, and the proxy's leaves.
 *
 * Mustn't: write or print the CA key; issue for a name the normaliser
 * would change; issue past the CA's own end.
 */
#include "tls_ca.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "hostname.h"
#include "util.h"

/* Leaves and a fresh CA start this long before now. */
#define BACKDATE 3600
#define BUNDLE_FILE_MAX ((size_t)32 * 1024 * 1024)
/* The secure heap: the CA key and the leaf keys being made. */
#define SECURE_HEAP ((size_t)16 * 1024)
#define SECURE_MIN 32

struct cache_entry {
	char host[HOSTNAME_MAX + 1]; /* empty: unused */
	struct tls_leaf leaf;
	unsigned long long used;
};

struct tls_ca {
	EVP_PKEY *key;
	X509 *cert;
	char *pem;      /* the CA certificate and its chain */
	size_t pem_len;
	time_t not_before, not_after;
	struct cache_entry *cache; /* TLS_CA_CACHE_MAX */
	unsigned long long tick;
};

/* One line: @what and OpenSSL's first queued reason (queue cleared). */
static void ssl_error(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	snprintf(err, errlen, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
	ERR_clear_error();
}

static void leaf_wipe(struct tls_leaf *l)
{
	if (l->key_pem)
		explicit_bzero(l->key_pem, l->key_len);
	free(l->key_pem);
	free(l->cert_pem);
	memset(l, 0, sizeof(*l));
}

void tls_leaf_free(struct tls_leaf *leaf)
{
	if (leaf)
		leaf_wipe(leaf);
}

static void leaf_copy(struct tls_leaf *dst, const struct tls_leaf *src)
{
	*dst = *src;
	dst->cert_pem = util_xmalloc(src->cert_len + 1);
	memcpy(dst->cert_pem, src->cert_pem, src->cert_len + 1);
	dst->key_pem = util_xmalloc(src->key_len + 1);
	memcpy(dst->key_pem, src->key_pem, src->key_len + 1);
}

/* The contents of a memory BIO as a malloc'd NUL-terminated string. */
static char *bio_text(BIO *b, size_t *len)
{
	char *data = NULL, *out;
	long n = BIO_get_mem_data(b, &data);

	ASSERT(n >= 0);
	out = util_xmalloc((size_t)n + 1);
	if (n > 0)
		memcpy(out, data, (size_t)n);
	out[n] = '\0';
	*len = (size_t)n;
	return out;
}

static bool asn1_to_time(const ASN1_TIME *a, time_t *out)
{
	struct tm tm;

	if (!ASN1_TIME_to_tm(a, &tm))
		return false;
	*out = timegm(&tm);
	return true;
}

static bool set_serial(X509 *x)
{
	unsigned char raw[20];
	ASN1_INTEGER *ai = NULL;
	BIGNUM *bn = NULL;
	bool ok = false;

	/* 159 random bits, positive and not zero */
	do {
		util_random(raw, sizeof(raw));
		raw[0] &= 0x7f;
	} while (raw[0] == 0);
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	if (!bn)
		goto out;
	ai = BN_to_ASN1_INTEGER(bn, NULL);
	ok = ai && X509_set_serialNumber(x, ai);
out:
	ASN1_INTEGER_free(ai);
	BN_free(bn);
	return ok;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return false;
	ok = X509_add_ext(cert, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* The digest to sign with: none for the keys that sign the message
 * itself (Ed25519, Ed448), SHA-256 for the others. */
static const EVP_MD *sign_md(EVP_PKEY *key)
{
	if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448"))
		return NULL;
	return EVP_sha256();
}

static EVP_PKEY *new_p256(void)
{
	return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

static bool add_name(X509_NAME *n, const char *field, const char *value)
{
	return X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8,
					  (const unsigned char *)value, -1, -1, 0) == 1;
}

static struct tls_ca *ca_alloc(void)
{
	struct tls_ca *ca = util_xcalloc(1, sizeof(*ca));

	ca->cache = util_xcalloc(TLS_CA_CACHE_MAX, sizeof(*ca->cache));
	return ca;
}

static bool ca_pem(struct tls_ca *ca, STACK_OF(X509) *chain)
{
	BIO *b = BIO_new(BIO_s_mem());
	bool ok = b && PEM_write_bio_X509(b, ca->cert) == 1;
	int i;

	for (i = 0; ok && chain && i < sk_X509_num(chain); i++)
		ok = PEM_write_bio_X509(b, sk_X509_value(chain, i)) == 1;
	if (ok)
		ca->pem = bio_text(b, &ca->pem_len);
	BIO_free(b);
	return ok;
}

/* OpenSSL's secure heap: locked in memory (never swapped out, so never
 * on disk that way either) and left out of core dumps. Private keys made
 * or parsed afterwards keep their secret numbers there. */
static bool secure_heap(void)
{
	return CRYPTO_secure_malloc_initialized() ||
	       CRYPTO_secure_malloc_init(SECURE_HEAP, SECURE_MIN) != 0;
}

struct tls_ca *tls_ca_new(const char *session, long lifetime, char *err,
			  size_t errlen)
{
	struct tls_ca *ca = ca_alloc();
	time_t now = time(NULL);
	char cn[65];
	X509_NAME *name;

	ASSERT(lifetime > 0);
	if (!secure_heap()) {
		snprintf(err, errlen, "session CA: cannot lock memory for the key "
			 "(RLIMIT_MEMLOCK below %zu KiB?)", SECURE_HEAP / 1024);
		goto fail;
	}
	ca->key = new_p256();
	ca->cert = X509_new();
	if (!ca->key || !ca->cert) {
		ssl_error(err, errlen, "session CA: cannot make the key");
		goto fail;
	}
	ca->not_before = now - BACKDATE;
	ca->not_after = now + lifetime;
	snprintf(cn, sizeof(cn), "airlock session CA %s", session ? session : "");
	name = X509_get_subject_name(ca->cert);
	if (!X509_set_version(ca->cert, 2) || !set_serial(ca->cert) ||
	    !add_name(name, "O", "airlock") || !add_name(name, "CN", cn) ||
	    !X509_set_issuer_name(ca->cert, name) ||
	    !ASN1_TIME_set(X509_getm_notBefore(ca->cert), ca->not_before) ||
	    !ASN1_TIME_set(X509_getm_notAfter(ca->cert), ca->not_after) ||
	    !X509_set_pubkey(ca->cert, ca->key) ||
	    !add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") ||
	    !add_ext(ca->cert, ca->cert, NID_authority_key_identifier, "keyid:always") ||
	    !X509_sign(ca->cert, ca->key, sign_md(ca->key)) || !ca_pem(ca, NULL)) {
		ssl_error(err, errlen, "session CA: cannot make the certificate");
		goto fail;
	}
	return ca;
fail:
	tls_ca_free(ca);
	return NULL;
}

/* PEM passphrase callback: encrypted keys are refused, never prompted
 * for. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* Reads every certificate of @path; false with @err when the file cannot
 * be read, holds none, or holds something that is not one. */
static bool read_certs(const char *path, const char *what, STACK_OF(X509) **out,
		       char *err, size_t errlen)
{
	STACK_OF(X509) *certs = sk_X509_new_null();
	BIO *b = BIO_new_file(path, "r");
	unsigned long e;
	X509 *x;

	if (!b) {
		snprintf(err, errlen, "%s %s: cannot read: %s", what, path, strerror(errno));
		ERR_clear_error();
		goto fail;
	}
	ERR_clear_error();
	while ((x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL)
		ASSERT(sk_X509_push(certs, x) > 0);
	/* the loop ends at the end of the file, or at a block that does not
	 * parse */
	e = ERR_peek_last_error();
	if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM &&
			ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
		const char *reason = ERR_reason_error_string(e);

		snprintf(err, errlen, "%s %s: certificate %d does not parse: %s", what,
			 path, sk_X509_num(certs) + 1, reason ? reason : "unknown error");
		ERR_clear_error();
		goto fail;
	}
	ERR_clear_error();
	if (sk_X509_num(certs) == 0) {
		snprintf(err, errlen, "%s %s: no PEM certificate in the file", what, path);
		goto fail;
	}
	BIO_free(b);
	*out = certs;
	return true;
fail:
	BIO_free(b);
	sk_X509_pop_free(certs, X509_free);
	return false;
}

struct tls_ca *tls_ca_load(const char *cert_path, const char *key_path,
			   char *err, size_t errlen)
{
	struct tls_ca *ca = ca_alloc();
	STACK_OF(X509) *certs = NULL;
	BIO *kb = NULL;
	uint32_t ku;

	if (!secure_heap()) {
		snprintf(err, errlen, "CA key: cannot lock memory for it "
			 "(RLIMIT_MEMLOCK below %zu KiB?)", SECURE_HEAP / 1024);
		goto fail;
	}
	if (!read_certs(cert_path, "CA certificate", &certs, err, errlen))
		goto fail;
	ca->cert = sk_X509_shift(certs);
	kb = BIO_new_file(key_path, "r");
	if (!kb) {
		snprintf(err, errlen, "CA key %s: cannot read: %s", key_path, strerror(errno));
		ERR_clear_error();
		goto fail;
	}
	ca->key = PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL);
	if (!ca->key) {
		snprintf(err, errlen,
			 "CA key %s: not an unencrypted PEM private key", key_path);
		ERR_clear_error();
		goto fail;
	}
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		snprintf(err, errlen, "CA key %s: does not match the certificate in %s",
			 key_path, cert_path);
		ERR_clear_error();
		goto fail;
	}
	ku = X509_get_key_usage(ca->cert);
	if (X509_check_ca(ca->cert) != 1 || !(ku & KU_KEY_CERT_SIGN)) {
		snprintf(err, errlen,
			 "CA certificate %s: not a CA certificate (basicConstraints "
			 "CA:TRUE and keyUsage keyCertSign needed)", cert_path);
		goto fail;
	}
	if (!asn1_to_time(X509_get0_notBefore(ca->cert), &ca->not_before) ||
	    !asn1_to_time(X509_get0_notAfter(ca->cert), &ca->not_after)) {
		snprintf(err, errlen, "CA certificate %s: unreadable validity", cert_path);
		goto fail;
	}
	if (ca->not_after <= time(NULL) || ca->not_before > time(NULL)) {
		snprintf(err, errlen, "CA certificate %s: %s", cert_path,
			 ca->not_after <= time(NULL) ? "has expired" : "is not valid yet");
		goto fail;
	}
	if (!ca_pem(ca, certs)) {
		ssl_error(err, errlen, "CA certificate: cannot encode");
		goto fail;
	}
	BIO_free(kb);
	sk_X509_pop_free(certs, X509_free);
	return ca;
fail:
	BIO_free(kb);
	sk_X509_pop_free(certs, X509_free);
	tls_ca_free(ca);
	return NULL;
}

void tls_ca_free(struct tls_ca *ca)
{
	size_t i;

	if (!ca)
		return;
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca->pem);
	for (i = 0; i < TLS_CA_CACHE_MAX; i++)
		leaf_wipe(&ca->cache[i].leaf);
	free(ca->cache);
	free(ca);
}

const char *tls_ca_cert_pem(const struct tls_ca *ca, size_t *len)
{
	if (len)
		*len = ca->pem_len;
	return ca->pem;
}

size_t tls_ca_cache_count(const struct tls_ca *ca)
{
	size_t i, n = 0;

	for (i = 0; i < TLS_CA_CACHE_MAX; i++)
		n += ca->cache[i].host[0] != '\0';
	return n;
}

/* Makes a leaf for @t (checked) valid [nb, na]. */
static int make_leaf(struct tls_ca *ca, const struct host_target *t, time_t nb,
		     time_t na, struct tls_leaf *out, char *err, size_t errlen)
{
	EVP_PKEY *key = new_p256();
	X509 *x = X509_new();
	BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_secmem());
	char san[HOSTNAME_MAX + 8];
	X509_NAME *name;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!key || !x || !cb || !kb) {
		ssl_error(err, errlen, "leaf: out of resources");
		goto out;
	}
	snprintf(san, sizeof(san), "%s:%s", t->is_addr ? "IP" : "DNS", t->name);
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, 2) || !set_serial(x) || !add_name(name, "O", "airlock") ||
	    (strlen(t->name) <= 64 && !add_name(name, "CN", t->name)) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) ||
	    !ASN1_TIME_set(X509_getm_notBefore(x), nb) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), na) || !X509_set_pubkey(x, key) ||
	    !add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(x, ca->cert, NID_subject_alt_name, san) ||
	    !add_ext(x, ca->cert, NID_subject_key_identifier, "hash") ||
	    /* a platform's CA may lack a key id to point at */
	    (X509_get0_subject_key_id(ca->cert) &&
	     !add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always")) ||
	    !X509_sign(x, ca->key, sign_md(ca->key))) {
		ssl_error(err, errlen, "leaf: cannot make the certificate");
		goto out;
	}
	if (PEM_write_bio_X509(cb, x) != 1 || BIO_write(cb, ca->pem, (int)ca->pem_len) !=
						      (int)ca->pem_len ||
	    PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) != 1) {
		ssl_error(err, errlen, "leaf: cannot encode");
		goto out;
	}
	out->cert_pem = bio_text(cb, &out->cert_len);
	out->key_pem = bio_text(kb, &out->key_len);
	out->not_before = nb;
	out->not_after = na;
	rc = 0;
out:
	BIO_free(cb);
	BIO_free(kb); /* secure memory: cleared */
	X509_free(x);
	EVP_PKEY_free(key);
	return rc;
}

int tls_ca_issue_at(struct tls_ca *ca, const char *host, time_t now,
		    struct tls_leaf *out, char *err, size_t errlen)
{
	struct cache_entry *e = NULL, *victim = &ca->cache[0];
	char text[HOSTNAME_MAX + 3];
	struct host_target t;
	time_t nb, na;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!host || strlen(host) > HOSTNAME_MAX) {
		snprintf(err, errlen, "leaf: not a normalised host name or address");
		return -1;
	}
	/* the normaliser takes an IPv6 literal in brackets only */
	snprintf(text, sizeof(text), strchr(host, ':') ? "[%s]" : "%s", host);
	if (hostname_normalise(text, strlen(text), &t) != HOSTNAME_OK ||
	    strcmp(t.name, host) != 0) {
		snprintf(err, errlen, "leaf: not a normalised host name or address");
		return -1;
	}
	if (now < ca->not_before) {
		snprintf(err, errlen, "leaf: the CA is not valid yet");
		return -1;
	}
	if (now + TLS_LEAF_REFRESH >= ca->not_after) {
		snprintf(err, errlen, "leaf: the CA expires within %d s; nothing to issue",
			 TLS_LEAF_REFRESH);
		return -1;
	}
	ca->tick++;
	for (i = 0; i < TLS_CA_CACHE_MAX; i++) {
		struct cache_entry *c = &ca->cache[i];

		if (c->host[0] && strcmp(c->host, host) == 0)
			e = c;
		/* the first free slot, else the least recently used */
		if (!victim->host[0])
			continue;
		if (!c->host[0] || c->used < victim->used)
			victim = c;
	}
	if (e && e->leaf.not_after - now > TLS_LEAF_REFRESH && e->leaf.not_before <= now) {
		e->used = ca->tick;
		leaf_copy(out, &e->leaf);
		return 0;
	}
	if (!e)
		e = victim;
	leaf_wipe(&e->leaf);
	e->host[0] = '\0';
	nb = now - BACKDATE > ca->not_before ? now - BACKDATE : ca->not_before;
	na = now + TLS_LEAF_LIFETIME < ca->not_after ? now + TLS_LEAF_LIFETIME : ca->not_after;
	if (make_leaf(ca, &t, nb, na, &e->leaf, err, errlen) < 0)
		return -1;
	ASSERT(util_strlcpy(e->host, host, sizeof(e->host)));
	e->used = ca->tick;
	leaf_copy(out, &e->leaf);
	return 0;
}

int tls_ca_issue(struct tls_ca *ca, const char *host, struct tls_leaf *out,
		 char *err, size_t errlen)
{
	return tls_ca_issue_at(ca, host, time(NULL), out, err, errlen);
}

char *tls_ca_bundle(const struct tls_ca *ca, const char *system_bundle,
		    const char *upstream_ca, size_t *len, char *err, size_t errlen)
{
	return tls_bundle_make(ca->pem, ca->pem_len, system_bundle, upstream_ca, len, err,
			       errlen);
}

char *tls_bundle_make(const char *ca_pem, size_t ca_len, const char *system_bundle,
		      const char *upstream_ca, size_t *len, char *err, size_t errlen)
{
	STACK_OF(X509) *extra = NULL;
	BIO *b = BIO_new(BIO_s_mem());
	char *sys = NULL, *text = NULL;
	size_t syslen = 0;
	int i;

	ASSERT(b);
	if (system_bundle) {
		sys = util_read_file(system_bundle, BUNDLE_FILE_MAX, &syslen);
		if (!sys && errno != ENOENT) {
			snprintf(err, errlen, "system CA bundle %s: cannot read: %s",
				 system_bundle, strerror(errno));
			goto out;
		}
	}
	if (sys && syslen > 0) {
		ASSERT(BIO_write(b, sys, (int)syslen) == (int)syslen);
		if (sys[syslen - 1] != '\n')
			ASSERT(BIO_write(b, "\n", 1) == 1);
	}
	if (upstream_ca && !read_certs(upstream_ca, "egress.upstream_ca", &extra, err, errlen))
		goto out;
	for (i = 0; extra && i < sk_X509_num(extra); i++)
		ASSERT(PEM_write_bio_X509(b, sk_X509_value(extra, i)) == 1);
	ASSERT(BIO_write(b, ca_pem, (int)ca_len) == (int)ca_len);
	text = bio_text(b, len);
out:
	free(sys);
	sk_X509_pop_free(extra, X509_free);
	BIO_free(b);
	return text;
}
