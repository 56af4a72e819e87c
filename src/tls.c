/* SPDX-License-Identifier: Apache-2.0
 * tls.c - OpenSSL contexts for interception.
 *
 * DOC: Theory of Operation
 *
 * An intercepted tunnel is two TLS connections with the proxy between
 * them. Each side is built here with exactly the settings interception
 * needs and nothing left to OpenSSL's defaults that matters:
 *
 *  - both: TLS 1.2 and 1.3 only; ALPN http/1.1, and h2 per connection:
 *    the upstream is offered h2 only when the client's ClientHello
 *    offered it, and the client is given h2 whenever it offers it and
 *    the upstream verified, whatever the upstream chose (h2.c relays
 *    stream to stream, or to an HTTP/1.1 upstream); a client without h2
 *    is HTTP/1.1 on both sides. No renegotiation (a renegotiated session
 *    could change what was checked), no compression.
 *  - sandbox side (server): the leaf of the CONNECT host, from the key
 *    holder, set per connection; a client offering ALPN without http/1.1
 *    gets the fatal no_application_protocol alert (RFC 7301), one offering
 *    no ALPN at all is served HTTP/1.1.
 *  - upstream side (client): the chain must verify against the system
 *    trust store plus egress.upstream_ca, and the certificate must name
 *    the host (dNSName, no partial wildcards such as "f*.example.com") or,
 *    for an IP literal, carry that address; SNI is the host (never for an
 *    address). A handshake that fails for any reason ends the attempt: the
 *    caller answers 502 with tls_handshake_error()'s line and sends
 *    nothing of the request, and there is no fallback to a tunnel.
 *
 * A worker makes its upstream context with tls_client_ctx_new_deferred():
 * the system store (OpenSSL's default file, parsed whole: every
 * certificate's key goes through OpenSSL 3's decoders, tens of
 * milliseconds of CPU) is loaded by tls_client_trust_system() before the
 * first upstream handshake, not at the worker's start, which most
 * sessions' workers then never pay (a session that intercepts nothing,
 * or ends at once). egress.upstream_ca is still loaded at once, so that
 * a bad file is reported at start as before. The worker's Landlock rules
 * let it read the store's paths once confined (worker.c).
 *
 * Mustn't: verify with a callback that overrides OpenSSL's verdict; accept
 * an upstream that selected a protocol other than http/1.1.
 */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "util.h"

struct tls_cert {
	X509 *cert;
	STACK_OF(X509) *chain;
	EVP_PKEY *key;
};

/* One line from @what and OpenSSL's first queued reason; queue cleared. */
static void ssl_error(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	snprintf(err, errlen, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
	ERR_clear_error();
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

void tls_cert_free(struct tls_cert *c)
{
	if (!c)
		return;
	X509_free(c->cert);
	sk_X509_pop_free(c->chain, X509_free);
	EVP_PKEY_free(c->key);
	free(c);
}

struct tls_cert *tls_cert_from_pem(const char *cert_pem, size_t cert_len,
				   const char *key_pem, size_t key_len,
				   char *err, size_t errlen)
{
	struct tls_cert *c = util_xcalloc(1, sizeof(*c));
	BIO *cb = NULL, *kb = NULL;
	X509 *x;

	if (cert_len > INT32_MAX || key_len > INT32_MAX) {
		snprintf(err, errlen, "leaf: too large");
		goto fail;
	}
	cb = BIO_new_mem_buf(cert_pem, (int)cert_len);
	kb = BIO_new_mem_buf(key_pem, (int)key_len);
	c->chain = sk_X509_new_null();
	if (!cb || !kb || !c->chain) {
		ssl_error(err, errlen, "leaf: out of resources");
		goto fail;
	}
	c->cert = PEM_read_bio_X509(cb, NULL, no_passphrase, NULL);
	if (!c->cert) {
		ssl_error(err, errlen, "leaf: no certificate");
		goto fail;
	}
	while ((x = PEM_read_bio_X509(cb, NULL, no_passphrase, NULL)) != NULL)
		ASSERT(sk_X509_push(c->chain, x) > 0);
	ERR_clear_error();
	c->key = PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL);
	if (!c->key) {
		ssl_error(err, errlen, "leaf: no private key");
		goto fail;
	}
	if (X509_check_private_key(c->cert, c->key) != 1) {
		ssl_error(err, errlen, "leaf: the key does not match the certificate");
		goto fail;
	}
	BIO_free(cb);
	BIO_free(kb);
	return c;
fail:
	BIO_free(cb);
	BIO_free(kb);
	tls_cert_free(c);
	return NULL;
}

static bool common_settings(SSL_CTX *ctx)
{
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
	       SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1;
}

/* Per connection: h2 may be chosen (tls_server_offer_h2). */
static int h2_index = -1;
static pthread_once_t h2_once = PTHREAD_ONCE_INIT;

static void h2_index_init(void)
{
	h2_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* Is @name (@n bytes) in the length-prefixed list @in? */
static bool alpn_listed(const unsigned char *in, unsigned int inlen, const char *name,
			size_t n)
{
	unsigned int i = 0;

	while (i < inlen) {
		unsigned int len = in[i];

		if (len == 0 || len > inlen - i - 1)
			return false; /* malformed list: no match */
		if (len == n && memcmp(in + i + 1, name, n) == 0)
			return true;
		i += len + 1;
	}
	return false;
}

/* ALPN on the sandbox's side: h2 when the connection may speak it (its
 * upstream verified) and the client offers it, else http/1.1 if offered,
 * else a fatal alert. @in is the client's list, length-prefixed names. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = TLS_ALPN_HTTP11;
	static const unsigned char h2[] = TLS_ALPN_H2;

	(void)arg;
	if (h2_index >= 0 && SSL_get_ex_data(ssl, h2_index) &&
	    alpn_listed(in, inlen, TLS_ALPN_H2, sizeof(h2) - 1)) {
		*out = h2;
		*outlen = (unsigned char)(sizeof(h2) - 1);
		return SSL_TLSEXT_ERR_OK;
	}
	if (alpn_listed(in, inlen, TLS_ALPN_HTTP11, sizeof(h11) - 1)) {
		*out = h11;
		*outlen = (unsigned char)(sizeof(h11) - 1);
		return SSL_TLSEXT_ERR_OK;
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void tls_server_offer_h2(SSL *ssl)
{
	static char yes = 1;

	ASSERT(h2_index >= 0);
	(void)SSL_set_ex_data(ssl, h2_index, &yes);
}

int tls_client_offer_h2(SSL *ssl)
{
	static const unsigned char alpn[] = "\x02" TLS_ALPN_H2 "\x08" TLS_ALPN_HTTP11;

	return SSL_set_alpn_protos(ssl, alpn, sizeof(alpn) - 1) == 0 ? 0 : -1;
}

bool tls_alpn_is_h2(const SSL *ssl)
{
	const unsigned char *p;
	unsigned int n;

	SSL_get0_alpn_selected(ssl, &p, &n);
	return n == sizeof(TLS_ALPN_H2) - 1 && memcmp(p, TLS_ALPN_H2, n) == 0;
}

SSL_CTX *tls_server_ctx_new(char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx || !common_settings(ctx)) {
		ssl_error(err, errlen, "TLS server context");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
	(void)pthread_once(&h2_once, h2_index_init);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return ctx;
}

int tls_server_use_cert(SSL *ssl, const struct tls_cert *c, char *err, size_t errlen)
{
	if (SSL_use_cert_and_key(ssl, c->cert, c->key, c->chain, 1) != 1) {
		ssl_error(err, errlen, "leaf: cannot use it");
		return -1;
	}
	return 0;
}

/* A client context whose system store is still to be loaded
 * (tls_client_ctx_new_deferred) carries this mark until it is. */
static int deferred_index = -1;
static pthread_once_t deferred_once = PTHREAD_ONCE_INIT;
static int deferred_mark;

static void deferred_index_init(void)
{
	deferred_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

int tls_client_trust_system(SSL_CTX *ctx)
{
	if (deferred_index < 0 || SSL_CTX_get_ex_data(ctx, deferred_index) != &deferred_mark)
		return 0;
	if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ERR_clear_error();
		return -1;
	}
	(void)SSL_CTX_set_ex_data(ctx, deferred_index, NULL);
	return 0;
}

static SSL_CTX *client_ctx_new(const char *upstream_ca, bool defer_system, char *err,
			       size_t errlen)
{
	static const unsigned char alpn[] = "\x08" TLS_ALPN_HTTP11;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (defer_system)
		(void)pthread_once(&deferred_once, deferred_index_init);
	if (!ctx || !common_settings(ctx) ||
	    /* returns 0 on success */
	    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0 ||
	    (defer_system ? deferred_index < 0 ||
				    SSL_CTX_set_ex_data(ctx, deferred_index, &deferred_mark) != 1
			  : SSL_CTX_set_default_verify_paths(ctx) != 1)) {
		ssl_error(err, errlen, "TLS client context");
		goto fail;
	}
	if (upstream_ca && access(upstream_ca, R_OK) != 0) {
		snprintf(err, errlen, "egress.upstream_ca %s: cannot read: %s", upstream_ca,
			 strerror(errno));
		goto fail;
	}
	if (upstream_ca && SSL_CTX_load_verify_file(ctx, upstream_ca) != 1) {
		char what[512];

		snprintf(what, sizeof(what), "egress.upstream_ca %s: cannot load", upstream_ca);
		ssl_error(err, errlen, what);
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *tls_client_ctx_new(const char *upstream_ca, char *err, size_t errlen)
{
	return client_ctx_new(upstream_ca, false, err, errlen);
}

SSL_CTX *tls_client_ctx_new_deferred(const char *upstream_ca, char *err, size_t errlen)
{
	return client_ctx_new(upstream_ca, true, err, errlen);
}

int tls_client_prepare(SSL *ssl, const char *host, char *err, size_t errlen)
{
	unsigned char addr[16];
	bool is_addr = inet_pton(AF_INET, host, addr) == 1 ||
		       inet_pton(AF_INET6, host, addr) == 1;

	if (is_addr) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1) {
			ssl_error(err, errlen, "upstream TLS: bad address");
			return -1;
		}
		return 0;
	}
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1) {
		ssl_error(err, errlen, "upstream TLS: bad host name");
		return -1;
	}
	return 0;
}

const char *tls_handshake_error(SSL *ssl, int ret, char *buf, size_t len)
{
	long vr = SSL_get_verify_result(ssl);
	unsigned long e = ERR_peek_error();
	int se = SSL_get_error(ssl, ret);

	ASSERT(len > 0);
	if (vr != X509_V_OK) {
		snprintf(buf, len, "certificate verify failed: %s",
			 X509_verify_cert_error_string(vr));
	} else if (e != 0) {
		const char *r = ERR_reason_error_string(e);

		snprintf(buf, len, "%s", r ? r : "TLS error");
	} else if (se == SSL_ERROR_SYSCALL && errno != 0) {
		snprintf(buf, len, "connection failed during the handshake: %s",
			 strerror(errno));
	} else {
		snprintf(buf, len, "connection closed during the handshake");
	}
	ERR_clear_error();
	return buf;
}

bool tls_alpn_ok(const SSL *ssl)
{
	const unsigned char *p = NULL;
	unsigned int n = 0;

	SSL_get0_alpn_selected(ssl, &p, &n);
	if (tls_alpn_is_h2(ssl))
		return true; /* only ever chosen when offered */
	return n == 0 || (n == sizeof(TLS_ALPN_HTTP11) - 1 &&
			  memcmp(p, TLS_ALPN_HTTP11, n) == 0);
}
