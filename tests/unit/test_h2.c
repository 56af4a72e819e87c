/* SPDX-License-Identifier: Apache-2.0
 * test_h2.c - HTTP/2 inside interception, the parts without a network:
 * ALPN chosen per connection (tls.c: h2 only where the upstream chose it)
 * in in-memory handshakes, and the gRPC message framing h2.c re-frames a
 * scrubbed answer with.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "h2.h"
#include "tap.h"
#include "tls.h"
#include "tls_ca.h"
#include "util.h"

static SSL_CTX *srv, *cli;
static struct tls_cert *cert;

/* A handshake in memory: the client offers @offer (length-prefixed
 * names), the server may give h2 when @h2_allowed. Returns the protocol
 * chosen ("" for none) or NULL when the handshake failed. */
static const char *handshake(const char *offer, size_t offer_len, bool h2_allowed)
{
	static char chosen[32];
	SSL *s = SSL_new(srv), *c = SSL_new(cli);
	BIO *bs, *bc;
	char err[256];
	int i, rs = 0, rc = 0;
	const unsigned char *p;
	unsigned int n;
	const char *result = NULL;

	ASSERT(s && c);
	ASSERT(tls_server_use_cert(s, cert, err, sizeof(err)) == 0);
	if (h2_allowed)
		tls_server_offer_h2(s);
	ASSERT(SSL_set_alpn_protos(c, (const unsigned char *)offer, (unsigned int)offer_len) == 0);
	SSL_set_tlsext_host_name(c, "h2.test");
	ASSERT(BIO_new_bio_pair(&bs, 0, &bc, 0) == 1);
	SSL_set_bio(s, bs, bs);
	SSL_set_bio(c, bc, bc);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	for (i = 0; i < 20 && (rs != 1 || rc != 1); i++) {
		if (rc != 1)
			rc = SSL_do_handshake(c);
		if (rs != 1)
			rs = SSL_do_handshake(s);
		if ((rc <= 0 && SSL_get_error(c, rc) != SSL_ERROR_WANT_READ) ||
		    (rs <= 0 && SSL_get_error(s, rs) != SSL_ERROR_WANT_READ))
			break;
	}
	if (rs == 1 && rc == 1) {
		SSL_get0_alpn_selected(c, &p, &n);
		memcpy(chosen, p, n < sizeof(chosen) - 1 ? n : sizeof(chosen) - 1);
		chosen[n < sizeof(chosen) - 1 ? n : sizeof(chosen) - 1] = '\0';
		result = chosen;
		/* both sides agree, and tls.c reads it the same way */
		tap_ok(tls_alpn_is_h2(s) == (strcmp(chosen, "h2") == 0) && tls_alpn_ok(s),
		       "  (the server side reads the same choice: %s)", chosen[0] ? chosen : "none");
	}
	ERR_clear_error();
	SSL_free(s);
	SSL_free(c);
	return result;
}

static void test_alpn(void)
{
	char err[512];
	struct tls_ca *ca = tls_ca_new("sess-h2-test", TLS_CA_LIFETIME, err, sizeof(err));
	struct tls_leaf leaf;
	const char *r;

	ASSERT(ca);
	ASSERT(tls_ca_issue(ca, "h2.test", &leaf, err, sizeof(err)) == 0);
	cert = tls_cert_from_pem(leaf.cert_pem, leaf.cert_len, leaf.key_pem, leaf.key_len, err,
				 sizeof(err));
	ASSERT(cert);
	tls_leaf_free(&leaf);
	srv = tls_server_ctx_new(err, sizeof(err));
	ASSERT(srv);
	cli = SSL_CTX_new(TLS_client_method());
	ASSERT(cli);
	SSL_CTX_set_verify(cli, SSL_VERIFY_NONE, NULL);

#define OFFER_BOTH "\x02h2\x08http/1.1"
#define OFFER_H2 "\x02h2"
#define OFFER_H11 "\x08http/1.1"
	r = handshake(OFFER_BOTH, sizeof(OFFER_BOTH) - 1, true);
	tap_is_str(r, "h2", "h2 and http/1.1 offered, the upstream chose h2: h2");
	r = handshake(OFFER_BOTH, sizeof(OFFER_BOTH) - 1, false);
	tap_is_str(r, "http/1.1", "... the upstream chose http/1.1: http/1.1");
	r = handshake(OFFER_H11, sizeof(OFFER_H11) - 1, true);
	tap_is_str(r, "http/1.1", "only http/1.1 offered: http/1.1, whatever the upstream");
	r = handshake(OFFER_H2, sizeof(OFFER_H2) - 1, true);
	tap_is_str(r, "h2", "only h2 offered (gRPC), the upstream chose h2: h2");
	r = handshake(OFFER_H2, sizeof(OFFER_H2) - 1, false);
	tap_ok(r == NULL, "only h2 offered, the upstream speaks HTTP/1.1: the handshake fails");
	r = handshake("\x03" "foo", 4, true);
	tap_ok(r == NULL, "neither offered: the handshake fails");

	SSL_CTX_free(srv);
	SSL_CTX_free(cli);
	tls_cert_free(cert);
	tls_ca_free(ca);
}

static void test_grpc(void)
{
	struct buf b = { 0 };
	const char *payload = NULL;
	uint32_t plen = 0;
	size_t used = 0;
	char big[5] = { 0, 0x7f, 0, 0, 0 };

	h2_grpc_frame(&b, "hello", 5);
	tap_is_int(b.len, 10, "a message frame is 5 bytes and the payload");
	tap_ok(memcmp(b.data, "\0\0\0\0\5hello", 10) == 0, "... flag 0, length big-endian");
	tap_is_int(h2_grpc_parse(b.data, 4, &payload, &plen, &used), H2_GRPC_MORE,
		   "a partial prefix: more");
	tap_is_int(h2_grpc_parse(b.data, 9, &payload, &plen, &used), H2_GRPC_MORE,
		   "a partial payload: more");
	tap_is_int(h2_grpc_parse(b.data, b.len, &payload, &plen, &used), H2_GRPC_MESSAGE,
		   "a whole message");
	tap_ok(plen == 5 && used == 10 && memcmp(payload, "hello", 5) == 0,
	       "... its payload and size");
	b.data[0] = 1;
	tap_is_int(h2_grpc_parse(b.data, b.len, &payload, &plen, &used), H2_GRPC_COMPRESSED,
		   "the compressed flag: refused (cannot be scrubbed)");
	tap_is_int(h2_grpc_parse(big, 5, &payload, &plen, &used), H2_GRPC_TOO_LARGE,
		   "a length over the bound: refused before it is held");
	buf_free(&b);
	h2_grpc_frame(&b, "", 0);
	tap_is_int(h2_grpc_parse(b.data, b.len, &payload, &plen, &used), H2_GRPC_MESSAGE,
		   "an empty message");
	tap_ok(plen == 0 && used == 5, "... takes its 5 bytes");
	buf_free(&b);
}

int main(void)
{
	test_alpn();
	test_grpc();
	return tap_done();
}
