/* SPDX-License-Identifier: Apache-2.0
 * tls_ca.h - the session CA of the key holder: a CA made in memory for
 * one session (or loaded from a platform's files), the leaf certificates
 * it issues for intercepted hosts, their cache, and the CA bundle the
 * sandbox trusts.
 *
 * Everything a leaf request returns is PEM text, so that it can cross the
 * process boundary between the key holder (which alone holds the CA key)
 * and the proxy (which parses TLS from the sandbox): tls.h turns it into
 * an OpenSSL certificate and key.
 *
 * Calling pattern:
 *
 *	key holder, at start:  ca = tls_ca_new(session, TLS_CA_LIFETIME, ...)
 *	                       or tls_ca_load(cert, key, ...);
 *	                       bundle = tls_ca_bundle(ca, system, upstream_ca);
 *	per proxy request:     tls_ca_issue(ca, host, &leaf, ...) -> send
 *	                       leaf.cert_pem and leaf.key_pem, tls_leaf_free();
 *	at exit:               tls_ca_free(ca).
 *
 * Not thread-safe: one caller at a time (the key holder's loop).
 */
#ifndef AIRLOCK_TLS_CA_H
#define AIRLOCK_TLS_CA_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* Validity of a fresh session CA, from one hour before its creation (for
 * clocks that lag). */
#define TLS_CA_LIFETIME ((long)7 * 24 * 3600)
/* Validity of a leaf, cut to the CA's own. */
#define TLS_LEAF_LIFETIME ((long)24 * 3600)
/* A cached leaf with less than this left is issued again. */
#define TLS_LEAF_REFRESH 3600
/* Leaves kept; the least recently used one goes first. */
#define TLS_CA_CACHE_MAX 256

/* Debian's bundle, what the sandbox sees at the same path. */
#define TLS_SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

struct tls_ca;

/* A leaf as it travels from the key holder to the proxy. */
struct tls_leaf {
	char *cert_pem;   /* the leaf's certificate, then the CA's certificate
			     and the chain above it (what a server sends);
			     NUL-terminated */
	size_t cert_len;
	char *key_pem;    /* the leaf's private key, PKCS#8 PEM; wiped by
			     tls_leaf_free() */
	size_t key_len;
	time_t not_before;
	time_t not_after;
};

void tls_leaf_free(struct tls_leaf *leaf);

/* Makes a fresh CA: an EC P-256 key that never leaves this process's
 * memory, a self-signed certificate with CN "airlock session CA
 * <session>" (cut to 64 characters), a random 159-bit serial, valid from
 * an hour ago for @lifetime seconds. Returns NULL with one line in @err on
 * failure. */
struct tls_ca *tls_ca_new(const char *session, long lifetime, char *err,
			  size_t errlen);

/* Loads a platform's CA (`airlock proxy --ca-cert FILE --ca-key FILE`):
 * @cert_path holds the CA certificate, PEM, optionally followed by the
 * chain above it; @key_path its private key, PEM (PKCS#8 or traditional;
 * any type OpenSSL signs with: EC, RSA, Ed25519...; not encrypted). The
 * certificate must be a CA allowed to sign certificates, currently valid,
 * and match the key. Returns NULL with one line in @err naming the file
 * and the reason. */
struct tls_ca *tls_ca_load(const char *cert_path, const char *key_path,
			   char *err, size_t errlen);

/* Frees the CA key (EVP_PKEY_free clears it) and wipes the cache. */
void tls_ca_free(struct tls_ca *ca);

/* The CA's certificate(s) as PEM: the one written by `--ca-out` and put in
 * the bundle. Owned by @ca. */
const char *tls_ca_cert_pem(const struct tls_ca *ca, size_t *len);

/* Issues (or takes from the cache) a leaf for @host, a normalised name or
 * IP literal as hostname_normalise() writes it (lowercase, no trailing dot,
 * IPv6 without brackets; no wildcard): EC P-256 key, subjectAltName
 * dNSName @host or iPAddress, serverAuth, valid from max(now - 1h, the
 * CA's start) to min(now + TLS_LEAF_LIFETIME, the CA's end). @out receives
 * a copy the caller frees with tls_leaf_free(). Returns 0, or -1 with one
 * line in @err (a host that is not normalised, an expired CA, an OpenSSL
 * failure). */
int tls_ca_issue(struct tls_ca *ca, const char *host, struct tls_leaf *out,
		 char *err, size_t errlen);

/* tls_ca_issue() at the time @now (tests). */
int tls_ca_issue_at(struct tls_ca *ca, const char *host, time_t now,
		    struct tls_leaf *out, char *err, size_t errlen);

/* Leaves in the cache now. */
size_t tls_ca_cache_count(const struct tls_ca *ca);

/* The sandbox's CA bundle: the text of @system_bundle (skipped when it does
 * not exist or is NULL), then every certificate of @upstream_ca (NULL:
 * none; it must hold at least one PEM certificate and nothing else that
 * fails to parse), then the CA's certificates. Returns a malloc'd
 * NUL-terminated string (length in *len), or NULL with one line in @err
 * naming the file. */
char *tls_ca_bundle(const struct tls_ca *ca, const char *system_bundle,
		    const char *upstream_ca, size_t *len, char *err, size_t errlen);

/* tls_ca_bundle() from the CA's certificate text @ca_pem (@ca_len bytes),
 * as the supervisor has it from the key holder. */
char *tls_bundle_make(const char *ca_pem, size_t ca_len, const char *system_bundle,
		      const char *upstream_ca, size_t *len, char *err, size_t errlen);

#endif /* AIRLOCK_TLS_CA_H */
