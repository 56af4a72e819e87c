/* SPDX-License-Identifier: Apache-2.0
 * tls.h - the OpenSSL contexts of interception: the server side that
 * faces the sandbox (with a leaf from tls_ca.h) and the client side that
 * faces the real upstream (verified against the system store plus
 * egress.upstream_ca), and a one-line reason when the upstream does not
 * verify.
 *
 * Calling pattern in the proxy:
 *
 *	once:      srv = tls_server_ctx_new(err);
 *	           cli = tls_client_ctx_new(policy->upstream_ca, err);
 *	per host:  cert = tls_cert_from_pem(leaf.cert_pem, ..., leaf.key_pem, ...)
 *	           (keep it as long as the leaf is cached)
 *	per intercepted tunnel:
 *	  upstream: ssl = SSL_new(cli); tls_client_prepare(ssl, host, err);
 *	            SSL_set_fd(...); SSL_connect() until done; on failure
 *	            tls_handshake_error(ssl, ret, buf) is the 502 body's cause
 *	            and nothing of the request is sent;
 *	  sandbox:  ssl = SSL_new(srv); tls_server_use_cert(ssl, cert, err);
 *	            SSL_set_fd(...); SSL_accept() until done.
 */
#ifndef AIRLOCK_TLS_H
#define AIRLOCK_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

/* The protocols offered and accepted (h2 per connection, see tls.c). */
#define TLS_ALPN_HTTP11 "http/1.1"
#define TLS_ALPN_H2 "h2"

/* The sandbox's side of this connection may choose h2 (when the client
 * offers it): its upstream speaks h2. */
void tls_server_offer_h2(SSL *ssl);
/* The upstream side of this connection offers h2 and http/1.1. Returns
 * 0, or -1. */
int tls_client_offer_h2(SSL *ssl);
/* The handshake on @ssl chose h2. */
bool tls_alpn_is_h2(const SSL *ssl);

/* A leaf parsed once: certificate, chain and key. Opaque. */
struct tls_cert;

/* Parses a leaf as tls_ca_issue() returns it: @cert_pem holds the leaf
 * certificate first, then its chain; @key_pem its private key. Checks that
 * key and certificate match. Returns NULL with one line in @err. Free with
 * tls_cert_free() (the key is cleared). */
struct tls_cert *tls_cert_from_pem(const char *cert_pem, size_t cert_len,
				   const char *key_pem, size_t key_len,
				   char *err, size_t errlen);
void tls_cert_free(struct tls_cert *c);

/* The context for the sandbox's side: TLS 1.2 and 1.3 only, ALPN
 * http/1.1 only (a client that offers ALPN without it gets the
 * no_application_protocol alert; one that offers none is served), no
 * renegotiation, no compression, no certificate of its own (each
 * connection gets its host's leaf with tls_server_use_cert()). NULL with
 * one line in @err on failure. */
SSL_CTX *tls_server_ctx_new(char *err, size_t errlen);

/* Sets @c as @ssl's certificate, chain and key (references taken: @c may
 * be freed while @ssl lives). Returns 0, or -1 with one line in @err. */
int tls_server_use_cert(SSL *ssl, const struct tls_cert *c, char *err,
			size_t errlen);

/* The context for the upstream side: TLS 1.2 and 1.3 only, ALPN offers
 * http/1.1 only, peer verification on, trusting the system store (OpenSSL's
 * default paths) and every certificate of @upstream_ca (a PEM file; NULL:
 * none). NULL with one line in @err naming the file when it cannot be
 * loaded. */
SSL_CTX *tls_client_ctx_new(const char *upstream_ca, char *err, size_t errlen);

/* The same, but the system store is loaded only by
 * tls_client_trust_system(), which must be called before the first
 * handshake (until then only @upstream_ca is trusted). */
SSL_CTX *tls_client_ctx_new_deferred(const char *upstream_ca, char *err,
				     size_t errlen);

/* Loads the system store into a context from tls_client_ctx_new_deferred()
 * if it is not yet loaded; nothing for other contexts. Returns 0, or -1
 * when OpenSSL fails to (the handshake must then not be tried). */
int tls_client_trust_system(SSL_CTX *ctx);

/* Prepares an upstream @ssl for @host (a normalised name or IP literal,
 * IPv6 without brackets): SNI for a name (never for an address, which
 * SNI cannot carry), and the name or address the certificate must match
 * (no partial wildcards). Returns 0, or -1 with one line in @err. */
int tls_client_prepare(SSL *ssl, const char *host, char *err, size_t errlen);

/* Why a handshake on @ssl failed, after SSL_connect() or SSL_accept()
 * returned @ret <= 0: "certificate verify failed: <OpenSSL's reason>" (the
 * chain, "hostname mismatch", "IP address mismatch", an expired
 * certificate...), else the TLS alert or error ("tlsv1 alert protocol
 * version", "no application protocol"...), else "connection closed during
 * the handshake". One line, no newline; OpenSSL's error queue is cleared.
 * Writes into @buf (@len > 0) and returns it. */
const char *tls_handshake_error(SSL *ssl, int ret, char *buf, size_t len);

/* The ALPN the handshake on @ssl selected is http/1.1 or none (either
 * means HTTP/1.1), or h2 (chosen only where offered). */
bool tls_alpn_ok(const SSL *ssl);

#endif /* AIRLOCK_TLS_H */
