/* SPDX-License-Identifier: Apache-2.0
 * test_tls_ca.c - the session CA and its leaves (checked by `openssl
 * verify -x509_strict` and by real handshakes over a socketpair with the
 * contexts of tls.c), the leaf cache, platform CAs of several key types
 * and with a chain, and the CA bundle.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tap.h"
#include "tls.h"
#include "tls_ca.h"
#include "util.h"

static char dir[] = "/tmp/test_tls_ca.XXXXXX";

static const char *path_of(const char *name)
{
	static char buf[8][256];
	static int next;
	char *p = buf[next++ % 8];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

static void write_file(const char *name, const char *text, size_t len)
{
	FILE *f = fopen(path_of(name), "w");

	ASSERT(f);
	ASSERT(fwrite(text, 1, len, f) == len);
	ASSERT(fclose(f) == 0);
}

/* Runs a shell command (its output discarded); returns its exit status. */
__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
	char cmd[2048], full[2200];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	/* the openssl command uses the distribution's configuration */
	snprintf(full, sizeof(full), "cd %s && (unset OPENSSL_CONF; %s) </dev/null >/dev/null 2>&1",
		 dir, cmd);
	st = system(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

/* The first certificate of a PEM text, as its own file. */
static void write_first_cert(const char *name, const char *pem)
{
	const char *end = strstr(pem, "-----END CERTIFICATE-----\n");

	ASSERT(end);
	write_file(name, pem, (size_t)(end - pem) + strlen("-----END CERTIFICATE-----\n"));
}

static X509 *first_cert(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	ASSERT(x);
	return x;
}

static time_t asn1_time(const ASN1_TIME *a)
{
	struct tm tm;

	ASSERT(ASN1_TIME_to_tm(a, &tm));
	return timegm(&tm);
}

/* ------------------------------------------------------------------ */
/* The fresh CA                                                       */
/* ------------------------------------------------------------------ */

static void test_fresh_ca(struct tls_ca *ca)
{
	size_t len = 0;
	const char *pem = tls_ca_cert_pem(ca, &len);
	X509 *x = first_cert(pem);
	EVP_PKEY *pub = X509_get0_pubkey(x);
	char cn[128] = "", group[64] = "";
	time_t nb = asn1_time(X509_get0_notBefore(x)), na = asn1_time(X509_get0_notAfter(x));
	const ASN1_INTEGER *serial = X509_get0_serialNumber(x);

	tap_ok(len == strlen(pem) && strstr(pem, "-----BEGIN CERTIFICATE-----"),
	       "the CA certificate is PEM");
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	tap_is_str(cn, "airlock session CA sess-42", "its name says the session");
	tap_is_int(X509_check_ca(x), 1, "it is a CA (basicConstraints)");
	tap_ok(X509_get_key_usage(x) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN),
	       "it may sign certificates and CRLs, nothing else");
	tap_ok(X509_get_pathlen(x) == 0, "it may not sign another CA (pathlen 0)");
	tap_ok(X509_get0_subject_key_id(x) != NULL, "it has a subject key id");
	EVP_PKEY_get_utf8_string_param(pub, "group", group, sizeof(group), NULL);
	tap_ok(EVP_PKEY_is_a(pub, "EC") && strcmp(group, "prime256v1") == 0,
	       "its key is EC P-256 (%s)", group);
	tap_ok(X509_verify(x, pub) == 1, "it is self-signed");
	tap_ok(time(NULL) - nb >= 3600 - 5 && time(NULL) - nb <= 3600 + 60,
	       "it is valid from an hour ago");
	tap_is_int(na - nb, TLS_CA_LIFETIME + 3600, "  for the lifetime asked");
	tap_ok(ASN1_STRING_length(serial) >= 15, "a long random serial (%d bytes)",
	       ASN1_STRING_length(serial));
	tap_ok(strstr(pem, "PRIVATE") == NULL, "the PEM holds no key");
	tap_ok(CRYPTO_secure_malloc_initialized() && CRYPTO_secure_used() > 0,
	       "the CA key lives in OpenSSL's locked secure heap (%zu bytes used)",
	       CRYPTO_secure_used());
	write_file("ca.pem", pem, len);
	X509_free(x);
}

/* ------------------------------------------------------------------ */
/* Leaves                                                             */
/* ------------------------------------------------------------------ */

static void test_leaf_shape(struct tls_ca *ca)
{
	struct tls_leaf leaf;
	char err[256];
	X509 *x, *cax;
	STACK_OF(GENERAL_NAME) *san;
	const GENERAL_NAME *gn;

	tap_is_int(tls_ca_issue(ca, "api.example.test", &leaf, err, sizeof(err)), 0,
		   "a leaf for api.example.test");
	x = first_cert(leaf.cert_pem);
	cax = first_cert(tls_ca_cert_pem(ca, NULL));
	san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	gn = san && sk_GENERAL_NAME_num(san) == 1 ? sk_GENERAL_NAME_value(san, 0) : NULL;
	tap_ok(gn && gn->type == GEN_DNS &&
		       ASN1_STRING_length(gn->d.dNSName) == 16 &&
		       memcmp(ASN1_STRING_get0_data(gn->d.dNSName), "api.example.test", 16) == 0,
	       "  one subjectAltName: DNS api.example.test");
	tap_ok(X509_check_ca(x) == 0, "  not a CA");
	tap_ok((X509_get_extended_key_usage(x) & ~XKU_SSL_SERVER) == 0 &&
		       (X509_get_extended_key_usage(x) & XKU_SSL_SERVER),
	       "  serverAuth only");
	tap_ok(X509_get0_authority_key_id(x) && X509_get0_subject_key_id(x),
	       "  authority and subject key ids");
	tap_ok(X509_verify(x, X509_get0_pubkey(cax)) == 1, "  signed by the CA");
	tap_ok(EVP_PKEY_is_a(X509_get0_pubkey(x), "EC"), "  an EC key");
	tap_ok(asn1_time(X509_get0_notBefore(x)) >= asn1_time(X509_get0_notBefore(cax)) &&
		       asn1_time(X509_get0_notAfter(x)) <= asn1_time(X509_get0_notAfter(cax)),
	       "  valid within the CA's validity");
	tap_is_int(leaf.not_after - leaf.not_before, TLS_LEAF_LIFETIME + 3600,
		   "  for a day (and an hour back)");
	tap_ok(strstr(leaf.key_pem, "-----BEGIN PRIVATE KEY-----") != NULL, "  a PKCS#8 key");
	tap_ok(strstr(leaf.cert_pem, tls_ca_cert_pem(ca, NULL)) != NULL,
	       "  the certificate text carries the CA's after the leaf");
	sk_GENERAL_NAME_pop_free(san, GENERAL_NAME_free);
	X509_free(x);
	X509_free(cax);

	write_first_cert("leaf-api.pem", leaf.cert_pem);
	tap_is_int(sh("openssl verify -x509_strict -purpose sslserver -CAfile ca.pem "
		      "-verify_hostname api.example.test leaf-api.pem"), 0,
		   "openssl verify -x509_strict: the leaf verifies for api.example.test");
	tap_ok(sh("openssl verify -x509_strict -purpose sslserver -CAfile ca.pem "
		  "-verify_hostname other.example.test leaf-api.pem") != 0,
	       "  and not for other.example.test");
	tap_ok(sh("openssl verify -x509_strict -purpose sslserver -CAfile ca.pem "
		  "-verify_hostname x.api.example.test leaf-api.pem") != 0,
	       "  nor for a name below it");
	tap_ok(sh("openssl verify -purpose sslclient -CAfile ca.pem leaf-api.pem") != 0,
	       "  nor as a client certificate");
	tls_leaf_free(&leaf);

	tap_is_int(tls_ca_issue(ca, "203.0.113.7", &leaf, err, sizeof(err)), 0,
		   "a leaf for the address 203.0.113.7");
	write_first_cert("leaf-ip.pem", leaf.cert_pem);
	tap_is_int(sh("openssl verify -x509_strict -purpose sslserver -CAfile ca.pem "
		      "-verify_ip 203.0.113.7 leaf-ip.pem"), 0, "  verifies for that address");
	tap_ok(sh("openssl verify -CAfile ca.pem -verify_ip 203.0.113.8 leaf-ip.pem") != 0,
	       "  not for another");
	tls_leaf_free(&leaf);

	tap_is_int(tls_ca_issue(ca, "2001:db8::7", &leaf, err, sizeof(err)), 0,
		   "a leaf for the address 2001:db8::7");
	write_first_cert("leaf-ip6.pem", leaf.cert_pem);
	tap_is_int(sh("openssl verify -x509_strict -CAfile ca.pem -verify_ip 2001:db8::7 "
		      "leaf-ip6.pem"), 0, "  verifies for that address");
	tls_leaf_free(&leaf);
}

static const char *const bad_hosts[] = {
	"", "*.example.test", "API.example.test", "api.example.test.", "a..b",
	"x y", "api.example.test:443", "[2001:db8::7]", "2001:DB8::7", "a/b",
	"-a.test", "0x7f.1", "127.1",
};

static void test_bad_hosts(struct tls_ca *ca)
{
	struct tls_leaf leaf;
	char err[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_hosts); i++) {
		err[0] = '\0';
		tap_ok(tls_ca_issue(ca, bad_hosts[i], &leaf, err, sizeof(err)) == -1 &&
			       leaf.cert_pem == NULL && err[0],
		       "no leaf for '%s' (%s)", bad_hosts[i], err);
	}
	tap_ok(tls_ca_issue(ca, NULL, &leaf, err, sizeof(err)) == -1, "no leaf for NULL");
}

static void test_cache(void)
{
	char err[256], host[64];
	struct tls_ca *ca = tls_ca_new("cache", TLS_CA_LIFETIME, err, sizeof(err));
	struct tls_leaf a, b, c;
	time_t now = time(NULL);
	bool same = true;
	int i;

	ASSERT(ca);
	ASSERT(tls_ca_issue_at(ca, "a.example.test", now, &a, err, sizeof(err)) == 0);
	ASSERT(tls_ca_issue_at(ca, "a.example.test", now + 60, &b, err, sizeof(err)) == 0);
	tap_ok(strcmp(a.cert_pem, b.cert_pem) == 0 && strcmp(a.key_pem, b.key_pem) == 0,
	       "a second request for a host gets the cached leaf");
	tap_ok(a.cert_pem != b.cert_pem, "  as a copy of its own");
	tap_is_int(tls_ca_cache_count(ca), 1, "  one leaf cached");
	tls_leaf_free(&b);
	for (i = 0; i < 300; i++) {
		snprintf(host, sizeof(host), "h%d.example.test", i);
		ASSERT(tls_ca_issue_at(ca, host, now + 60, &b, err, sizeof(err)) == 0);
		tls_leaf_free(&b);
		/* a.example.test stays the most recently used */
		ASSERT(tls_ca_issue_at(ca, "a.example.test", now + 60, &b, err, sizeof(err)) == 0);
		same = same && strcmp(a.cert_pem, b.cert_pem) == 0;
		tls_leaf_free(&b);
	}
	tap_is_int(tls_ca_cache_count(ca), TLS_CA_CACHE_MAX, "the cache holds at most %d leaves",
		   TLS_CA_CACHE_MAX);
	tap_ok(same, "  the least recently used go first (a busy host stays)");
	ASSERT(tls_ca_issue_at(ca, "h0.example.test", now + 60, &c, err, sizeof(err)) == 0);
	tap_is_int(tls_ca_cache_count(ca), TLS_CA_CACHE_MAX, "  a host evicted is issued again");
	tls_leaf_free(&c);

	ASSERT(tls_ca_issue_at(ca, "a.example.test",
			       now + TLS_LEAF_LIFETIME - TLS_LEAF_REFRESH + 10, &b, err,
			       sizeof(err)) == 0);
	tap_ok(strcmp(a.cert_pem, b.cert_pem) != 0 && b.not_after > a.not_after,
	       "a leaf about to expire is issued again");
	tls_leaf_free(&b);
	tls_leaf_free(&a);
	tap_is_int(tls_ca_issue_at(ca, "a.example.test", now + TLS_CA_LIFETIME, &b, err,
				   sizeof(err)),
		   -1, "nothing is issued past the CA's end");
	tap_is_int(tls_ca_issue_at(ca, "a.example.test", now - 2 * 3600, &b, err, sizeof(err)),
		   -1, "nothing is issued before the CA's start");
	tls_ca_free(ca);

	ca = tls_ca_new("short", 7200, err, sizeof(err));
	ASSERT(ca);
	ASSERT(tls_ca_issue(ca, "a.example.test", &a, err, sizeof(err)) == 0);
	tap_ok(a.not_after <= time(NULL) + 7200, "a leaf ends when a short-lived CA does");
	tls_leaf_free(&a);
	tls_ca_free(ca);
}

/* ------------------------------------------------------------------ */
/* Handshakes                                                         */
/* ------------------------------------------------------------------ */

struct hs {
	bool ok;          /* both sides completed */
	char cerr[256];   /* the client's failure, else "" */
	char serr[256];   /* the server's failure, else "" */
	char version[16]; /* negotiated, when ok */
	char alpn[16];    /* the client's view of ALPN */
	bool server_alpn_ok;
	bool sni_seen;
	char echoed[8];
};

/* One handshake in this process over a socketpair, both sides
 * non-blocking, at most 2000 turns; then a byte each way. */
static void handshake(SSL_CTX *sctx, const struct tls_cert *cert, SSL_CTX *cctx,
		      const char *host, struct hs *out)
{
	int sv[2], turn, rc, rs;
	bool cdone = false, sdone = false, cfail = false, sfail = false;
	SSL *c, *s;
	char err[256];
	const unsigned char *p;
	unsigned int n;

	memset(out, 0, sizeof(*out));
	ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	ASSERT(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0 && fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	ASSERT(c && s);
	ASSERT(tls_server_use_cert(s, cert, err, sizeof(err)) == 0);
	ASSERT(tls_client_prepare(c, host, err, sizeof(err)) == 0);
	SSL_set_fd(c, sv[0]);
	SSL_set_fd(s, sv[1]);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (turn = 0; turn < 2000 && !((cdone || cfail) && (sdone || sfail)); turn++) {
		if (!cdone && !cfail) {
			rc = SSL_do_handshake(c);
			if (rc == 1) {
				cdone = true;
			} else if (SSL_get_error(c, rc) != SSL_ERROR_WANT_READ &&
				   SSL_get_error(c, rc) != SSL_ERROR_WANT_WRITE) {
				cfail = true;
				tls_handshake_error(c, rc, out->cerr, sizeof(out->cerr));
				shutdown(sv[0], SHUT_RDWR);
			}
		}
		if (!sdone && !sfail) {
			rs = SSL_do_handshake(s);
			if (rs == 1) {
				sdone = true;
			} else if (SSL_get_error(s, rs) != SSL_ERROR_WANT_READ &&
				   SSL_get_error(s, rs) != SSL_ERROR_WANT_WRITE) {
				sfail = true;
				tls_handshake_error(s, rs, out->serr, sizeof(out->serr));
				shutdown(sv[1], SHUT_RDWR);
			}
		}
	}
	out->ok = cdone && sdone;
	if (out->ok) {
		snprintf(out->version, sizeof(out->version), "%s", SSL_get_version(c));
		SSL_get0_alpn_selected(c, &p, &n);
		snprintf(out->alpn, sizeof(out->alpn), "%.*s", (int)n, (const char *)p);
		out->server_alpn_ok = tls_alpn_ok(s) && tls_alpn_ok(c);
		out->sni_seen = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name) != NULL;
		/* TLS 1.3 tickets arrive after the handshake: a few turns */
		for (turn = 0; turn < 200 && !out->echoed[0]; turn++) {
			if (turn == 0)
				ASSERT(SSL_write(c, "ping", 4) == 4);
			if (SSL_read(s, out->echoed, 4) == 4)
				break;
			memset(out->echoed, 0, sizeof(out->echoed));
			(void)SSL_read(c, err, sizeof(err));
		}
	}
	ERR_clear_error();
	SSL_free(c);
	SSL_free(s);
	close(sv[0]);
	close(sv[1]);
}

static SSL_CTX *client_ctx(const char *ca_file)
{
	char err[256];
	SSL_CTX *ctx = tls_client_ctx_new(ca_file, err, sizeof(err));

	if (!ctx)
		tap_diag("%s", err);
	ASSERT(ctx);
	return ctx;
}

static struct tls_cert *cert_for(struct tls_ca *ca, const char *host)
{
	struct tls_leaf leaf;
	struct tls_cert *c;
	char err[256];

	ASSERT(tls_ca_issue(ca, host, &leaf, err, sizeof(err)) == 0);
	c = tls_cert_from_pem(leaf.cert_pem, leaf.cert_len, leaf.key_pem, leaf.key_len, err,
			      sizeof(err));
	if (!c)
		tap_diag("%s", err);
	ASSERT(c);
	tls_leaf_free(&leaf);
	return c;
}

static void test_handshakes(struct tls_ca *ca, struct tls_ca *other)
{
	char err[256];
	SSL_CTX *sctx = tls_server_ctx_new(err, sizeof(err));
	SSL_CTX *cctx, *wrong, *bare;
	struct tls_cert *api = cert_for(ca, "api.example.test");
	struct tls_cert *ip = cert_for(ca, "203.0.113.7");
	struct tls_cert *foreign = cert_for(other, "api.example.test");
	static const unsigned char h2[] = "\x02h2";
	struct hs r;

	ASSERT(sctx);
	cctx = client_ctx(path_of("ca.pem"));
	wrong = client_ctx(path_of("other-ca.pem"));

	handshake(sctx, api, cctx, "api.example.test", &r);
	tap_ok(r.ok, "a client trusting the session CA completes a handshake with the "
		     "leaf (%s %s)", r.cerr, r.serr);
	tap_is_str(r.version, "TLSv1.3", "  TLS 1.3");
	tap_is_str(r.alpn, "http/1.1", "  ALPN http/1.1");
	tap_ok(r.server_alpn_ok && r.sni_seen, "  both sides agree, the server saw the SNI");
	tap_is_str(r.echoed, "ping", "  and bytes pass");

	handshake(sctx, api, cctx, "other.example.test", &r);
	tap_ok(!r.ok && strstr(r.cerr, "certificate verify failed: hostname mismatch"),
	       "a leaf for api.example.test fails for other.example.test (%s)", r.cerr);

	handshake(sctx, foreign, cctx, "api.example.test", &r);
	tap_ok(!r.ok && strstr(r.cerr, "certificate verify failed: self-signed certificate "
				       "in certificate chain"),
	       "a leaf of another CA fails: the reason names it (%s)", r.cerr);

	handshake(sctx, api, wrong, "api.example.test", &r);
	tap_ok(!r.ok && strstr(r.cerr, "certificate verify failed"),
	       "a client trusting another CA refuses the leaf (%s)", r.cerr);

	handshake(sctx, ip, cctx, "203.0.113.7", &r);
	tap_ok(r.ok && !r.sni_seen, "an address: verified by its iPAddress, no SNI sent");
	handshake(sctx, ip, cctx, "203.0.113.8", &r);
	tap_ok(!r.ok && strstr(r.cerr, "IP address mismatch"),
	       "  another address fails (%s)", r.cerr);

	/* Protocol versions and ALPN, with a plain OpenSSL client. */
	bare = SSL_CTX_new(TLS_client_method());
	ASSERT(bare && SSL_CTX_load_verify_file(bare, path_of("ca.pem")) == 1);
	SSL_CTX_set_verify(bare, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_max_proto_version(bare, TLS1_2_VERSION);
	handshake(sctx, api, bare, "api.example.test", &r);
	tap_ok(r.ok && strcmp(r.version, "TLSv1.2") == 0 && r.alpn[0] == '\0' && r.server_alpn_ok,
	       "a TLS 1.2 client without ALPN is served (%s)", r.version);
	/* Security level 0 on both sides, so that only the version bounds
	 * of tls.c stand in the way (OpenSSL's own configuration is out of
	 * play: OPENSSL_CONF is /dev/null). */
	SSL_CTX_set_security_level(bare, 0);
	SSL_CTX_set_min_proto_version(bare, TLS1_VERSION);
	SSL_CTX_set_max_proto_version(bare, TLS1_1_VERSION);
	SSL_CTX_set_cipher_list(bare, "DEFAULT:@SECLEVEL=0");
	{
		SSL_CTX *weak = tls_server_ctx_new(err, sizeof(err));

		ASSERT(weak);
		SSL_CTX_set_security_level(weak, 0);
		SSL_CTX_set_cipher_list(weak, "DEFAULT:@SECLEVEL=0");
		handshake(weak, api, bare, "api.example.test", &r);
		SSL_CTX_free(weak);
	}
	tap_ok(!r.ok && r.serr[0], "a TLS 1.1 client is refused (server: %s)", r.serr);
	SSL_CTX_set_min_proto_version(bare, TLS1_2_VERSION);
	SSL_CTX_set_max_proto_version(bare, 0);
	ASSERT(SSL_CTX_set_alpn_protos(bare, h2, sizeof(h2) - 1) == 0);
	handshake(sctx, api, bare, "api.example.test", &r);
	tap_ok(!r.ok && strstr(r.cerr, "no application protocol"),
	       "a client offering only h2 gets the no_application_protocol alert (%s)", r.cerr);
	SSL_CTX_free(bare);

	/* The client side against a server that speaks only TLS 1.1. */
	bare = SSL_CTX_new(TLS_server_method());
	ASSERT(bare);
	SSL_CTX_set_security_level(bare, 0);
	SSL_CTX_set_cipher_list(bare, "DEFAULT:@SECLEVEL=0");
	SSL_CTX_set_min_proto_version(bare, TLS1_VERSION);
	SSL_CTX_set_max_proto_version(bare, TLS1_1_VERSION);
	{
		SSL_CTX *weak = client_ctx(path_of("ca.pem"));

		SSL_CTX_set_security_level(weak, 0);
		SSL_CTX_set_cipher_list(weak, "DEFAULT:@SECLEVEL=0");
		handshake(bare, api, weak, "api.example.test", &r);
		SSL_CTX_free(weak);
	}
	tap_ok(!r.ok && r.cerr[0] && !strstr(r.cerr, "verify"),
	       "the upstream side refuses a TLS 1.1 server (%s)", r.cerr);
	SSL_CTX_free(bare);

	SSL_CTX_free(cctx);
	SSL_CTX_free(wrong);
	SSL_CTX_free(sctx);
	tls_cert_free(api);
	tls_cert_free(ip);
	tls_cert_free(foreign);

	tap_ok(tls_client_ctx_new(path_of("missing.pem"), err, sizeof(err)) == NULL &&
		       strstr(err, "egress.upstream_ca") && strstr(err, "missing.pem"),
	       "a missing upstream_ca: the client context names it (%s)", err);
	write_file("junk.pem", "not a certificate\n", 18);
	tap_ok(tls_client_ctx_new(path_of("junk.pem"), err, sizeof(err)) == NULL,
	       "an upstream_ca with no certificate is refused (%s)", err);
	tap_ok(tls_cert_from_pem("x", 1, "y", 1, err, sizeof(err)) == NULL,
	       "a leaf that is not PEM is refused (%s)", err);
}

/* ------------------------------------------------------------------ */
/* Platform CAs                                                       */
/* ------------------------------------------------------------------ */

struct platform_case {
	const char *name;
	const char *newkey;
};

static const struct platform_case platforms[] = {
	{ "rsa", "rsa:2048" },
	{ "ed25519", "ed25519" },
	{ "p384", "ec -pkeyopt ec_paramgen_curve:P-384" },
};

static void test_platform(void)
{
	char err[512];
	struct tls_ca *ca;
	struct tls_leaf leaf;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(platforms); i++) {
		const struct platform_case *c = &platforms[i];

		ASSERT(sh("openssl req -x509 -newkey %s -nodes -keyout %s-key.pem -out %s.pem "
			  "-subj /CN=platform-%s -days 2 -addext keyUsage=critical,keyCertSign,cRLSign",
			  c->newkey, c->name, c->name, c->name) == 0);
		ca = tls_ca_load(path_of(c->name), path_of("x"), err, sizeof(err));
		tap_ok(!ca, "a missing file: %s", err);
		{
			char cp[256], kp[256];

			snprintf(cp, sizeof(cp), "%s/%s.pem", dir, c->name);
			snprintf(kp, sizeof(kp), "%s/%s-key.pem", dir, c->name);
			ca = tls_ca_load(cp, kp, err, sizeof(err));
		}
		if (!tap_ok(ca != NULL, "a platform CA with a %s key loads", c->name)) {
			tap_diag("%s", err);
			continue;
		}
		tap_is_int(tls_ca_issue(ca, "api.example.test", &leaf, err, sizeof(err)), 0,
			   "  and issues a leaf");
		write_first_cert("leaf-platform.pem", leaf.cert_pem);
		tap_is_int(sh("openssl verify -x509_strict -purpose sslserver -CAfile %s.pem "
			      "-verify_hostname api.example.test leaf-platform.pem", c->name),
			   0, "  which openssl verify accepts");
		tls_leaf_free(&leaf);
		tls_ca_free(ca);
	}

	ca = tls_ca_load(path_of("rsa.pem"), path_of("ed25519-key.pem"), err, sizeof(err));
	tap_ok(!ca && strstr(err, "does not match"), "a key of another CA is refused (%s)", err);

	ASSERT(sh("openssl req -x509 -newkey ed25519 -nodes -keyout leafonly-key.pem "
		  "-out leafonly.pem -subj /CN=x -days 2 "
		  "-addext basicConstraints=critical,CA:FALSE") == 0);
	ca = tls_ca_load(path_of("leafonly.pem"), path_of("leafonly-key.pem"), err, sizeof(err));
	tap_ok(!ca && strstr(err, "not a CA"), "a certificate that is not a CA is refused (%s)",
	       err);

	ASSERT(sh("openssl genpkey -algorithm ed25519 -aes256 -pass pass:x -out enc-key.pem && "
		  "openssl req -x509 -key enc-key.pem -passin pass:x -out enc.pem "
		  "-subj /CN=enc -days 2") == 0);
	ca = tls_ca_load(path_of("enc.pem"), path_of("enc-key.pem"), err, sizeof(err));
	tap_ok(!ca && strstr(err, "unencrypted"),
	       "an encrypted key is refused without a prompt (%s)", err);

	write_file("empty.pem", "", 0);
	ca = tls_ca_load(path_of("empty.pem"), path_of("rsa-key.pem"), err, sizeof(err));
	tap_ok(!ca && strstr(err, "no PEM certificate"), "an empty certificate file (%s)", err);

	/* An intermediate CA whose file carries the root: leaves are sent
	 * with both, so a client that trusts only the root verifies. */
	ASSERT(sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		  "-keyout root-key.pem -out root.pem -subj /CN=root -days 3 && "
		  "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		  "-keyout inter-key.pem -out inter.csr -subj /CN=inter && "
		  "printf 'basicConstraints=critical,CA:TRUE,pathlen:0\\n"
		  "keyUsage=critical,keyCertSign\\nsubjectKeyIdentifier=hash\\n"
		  "authorityKeyIdentifier=keyid\\n' > inter.ext && "
		  "openssl x509 -req -in inter.csr -CA root.pem -CAkey root-key.pem "
		  "-CAcreateserial -days 2 -extfile inter.ext -out inter-only.pem && "
		  "cat inter-only.pem root.pem > inter.pem") == 0);
	ca = tls_ca_load(path_of("inter.pem"), path_of("inter-key.pem"), err, sizeof(err));
	if (tap_ok(ca != NULL, "an intermediate CA with its chain loads")) {
		char e2[256];
		SSL_CTX *sctx = tls_server_ctx_new(e2, sizeof(e2));
		SSL_CTX *cctx = client_ctx(path_of("root.pem"));
		struct tls_cert *cert = cert_for(ca, "api.example.test");
		struct hs r;

		handshake(sctx, cert, cctx, "api.example.test", &r);
		tap_ok(r.ok, "  a client trusting only the root verifies its leaves (%s)", r.cerr);
		SSL_CTX_free(sctx);
		SSL_CTX_free(cctx);
		tls_cert_free(cert);
		tls_ca_free(ca);
	} else {
		tap_diag("%s", err);
	}
}

/* ------------------------------------------------------------------ */
/* Real clients                                                       */
/* ------------------------------------------------------------------ */

/* Serves HTTPS on @fd with the session's server context and @cert, one
 * connection after another, answering "ok" to each request; exits when
 * killed, or after 60 s. */
static __attribute__((noreturn)) void serve(int fd, const struct tls_cert *cert)
{
	char err[256], buf[4096];
	SSL_CTX *ctx = tls_server_ctx_new(err, sizeof(err));
	struct timeval tv = { .tv_sec = 5 };

	alarm(60);
	ASSERT(ctx);
	for (;;) {
		int c = accept(fd, NULL, NULL);
		SSL *ssl;

		if (c < 0)
			continue;
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssl = SSL_new(ctx);
		ASSERT(ssl && tls_server_use_cert(ssl, cert, err, sizeof(err)) == 0);
		SSL_set_fd(ssl, c);
		if (SSL_accept(ssl) == 1) {
			size_t got = 0;

			while (got < sizeof(buf) - 1) {
				int n = SSL_read(ssl, buf + got, (int)(sizeof(buf) - 1 - got));

				if (n <= 0)
					break;
				got += (size_t)n;
				buf[got] = '\0';
				if (strstr(buf, "\r\n\r\n"))
					break;
			}
			static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
						     "Connection: close\r\n\r\nok";

			SSL_write(ssl, answer, (int)sizeof(answer) - 1);
			SSL_shutdown(ssl);
		}
		SSL_free(ssl);
		close(c);
		ERR_clear_error();
	}
}

static void test_real_clients(struct tls_ca *ca)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	struct tls_cert *cert = cert_for(ca, "api.example.test");
	char err[512], *bundle;
	int fd, port, st;
	size_t len;
	pid_t pid;

	bundle = tls_ca_bundle(ca, TLS_SYSTEM_BUNDLE, NULL, &len, err, sizeof(err));
	ASSERT(bundle);
	write_file("real-bundle.pem", bundle, len);
	free(bundle);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	       listen(fd, 16) == 0 && getsockname(fd, (struct sockaddr *)&sa, &salen) == 0);
	port = ntohs(sa.sin_port);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		serve(fd, cert);
	close(fd);

	tap_is_int(sh("test \"$(CURL_CA_BUNDLE=real-bundle.pem timeout 20 curl -sS "
		      "--resolve api.example.test:%d:127.0.0.1 https://api.example.test:%d/)\" "
		      "= ok", port, port), 0,
		   "curl with CURL_CA_BUNDLE=the bundle trusts a leaf");
	tap_ok(sh("timeout 20 curl -sS --cacert %s --resolve api.example.test:%d:127.0.0.1 "
		  "https://api.example.test:%d/", TLS_SYSTEM_BUNDLE, port, port) != 0,
	       "  and with the system bundle alone it does not");
	tap_is_int(sh("test \"$(timeout 20 curl -sS --http2 --cacert real-bundle.pem "
		      "--resolve api.example.test:%d:127.0.0.1 -w '%%{http_version}' "
		      "https://api.example.test:%d/)\" = ok1.1", port, port), 0,
		   "  curl asking for HTTP/2 gets HTTP/1.1");
	tap_is_int(sh("SSL_CERT_FILE=real-bundle.pem timeout 20 python3 -c '"
		      "import socket, ssl\n"
		      "ctx = ssl.create_default_context()\n"
		      "ctx.verify_flags |= ssl.VERIFY_X509_STRICT\n"
		      "s = ctx.wrap_socket(socket.create_connection((\"127.0.0.1\", %d)),"
		      " server_hostname=\"api.example.test\")\n"
		      "s.sendall(b\"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\")\n"
		      "assert s.recv(100).endswith(b\"ok\")'", port), 0,
		   "python3 with SSL_CERT_FILE=the bundle and VERIFY_X509_STRICT trusts it");
	tap_is_int(sh("NODE_EXTRA_CA_CERTS=ca.pem timeout 20 node -e '"
		      "require(\"https\").get({host: \"127.0.0.1\", port: %d, "
		      "servername: \"api.example.test\", path: \"/\"}, r => "
		      "r.on(\"data\", d => process.exit(d == \"ok\" ? 0 : 1)))"
		      ".on(\"error\", () => process.exit(2))'", port), 0,
		   "node with NODE_EXTRA_CA_CERTS=the CA trusts it");
	tap_ok(sh("timeout 20 node -e '"
		  "require(\"https\").get({host: \"127.0.0.1\", port: %d, "
		  "servername: \"api.example.test\", path: \"/\"}, r => process.exit(0))"
		  ".on(\"error\", () => process.exit(2))'", port) != 0,
	       "  and without it does not");
	st = kill(pid, SIGTERM);
	ASSERT(st == 0 && waitpid(pid, &st, 0) == pid);
	tls_cert_free(cert);
}

/* ------------------------------------------------------------------ */
/* The bundle                                                         */
/* ------------------------------------------------------------------ */

static void test_bundle(struct tls_ca *ca)
{
	char err[512], *b;
	size_t len = 0, clen = 0;
	const char *capem = tls_ca_cert_pem(ca, &clen);
	char *sys, *up;
	size_t syslen, uplen;

	/* The platform CAs of test_platform() stand in for the system's and
	 * the policy's. */
	sys = util_read_file(path_of("rsa.pem"), 1 << 20, &syslen);
	ASSERT(sys && syslen > 1);
	write_file("system.crt", sys, syslen - 1); /* no final newline */
	ASSERT(sh("cat ed25519.pem p384.pem > upstream.pem") == 0);
	up = util_read_file(path_of("upstream.pem"), 1 << 20, &uplen);
	ASSERT(up);

	b = tls_ca_bundle(ca, path_of("system.crt"), path_of("upstream.pem"), &len, err,
			  sizeof(err));
	if (!tap_ok(b != NULL, "a bundle of the system's, upstream_ca's and the session's CAs"))
		tap_diag("%s", err);
	tap_ok(b && len == strlen(b) && strncmp(b, sys, syslen - 1) == 0 &&
		       b[syslen - 1] == '\n',
	       "  the system bundle first, a newline added");
	tap_ok(b && strstr(b, up) == b + syslen, "  then every upstream_ca certificate");
	tap_ok(b && len >= clen && strcmp(b + len - clen, capem) == 0, "  the session CA last");
	write_file("bundle.pem", b, len);
	tap_is_int(sh("openssl verify -CAfile bundle.pem -verify_hostname api.example.test "
		      "leaf-api.pem"), 0, "  a session leaf verifies against it");
	tap_is_int(sh("openssl verify -CAfile bundle.pem p384.pem && "
		      "openssl verify -CAfile bundle.pem rsa.pem"), 0,
		   "  and so do the upstream and system CAs");
	free(b);

	b = tls_ca_bundle(ca, path_of("no-such.crt"), NULL, &len, err, sizeof(err));
	tap_ok(b && strcmp(b, capem) == 0,
	       "a host without a system bundle, no upstream_ca: the session CA alone");
	free(b);

	b = tls_ca_bundle(ca, NULL, path_of("junk.pem"), &len, err, sizeof(err));
	tap_ok(!b && strstr(err, "egress.upstream_ca") && strstr(err, "no PEM certificate"),
	       "an upstream_ca without a certificate is refused (%s)", err);
	write_file("broken.pem",
		   "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 58);
	b = tls_ca_bundle(ca, NULL, path_of("broken.pem"), &len, err, sizeof(err));
	tap_ok(!b && strstr(err, "does not parse"), "a broken certificate is refused (%s)", err);
	b = tls_ca_bundle(ca, dir, NULL, &len, err, sizeof(err));
	tap_ok(!b && strstr(err, "system CA bundle"), "an unreadable system bundle (%s)", err);
	free(sys);
	free(up);
}

int main(void)
{
	char err[256];
	struct tls_ca *ca, *other;
	size_t len;

	/* Only what tls.c sets: not the distribution's openssl.cnf (Debian's
	 * sets a minimum protocol of its own). */
	setenv("OPENSSL_CONF", "/dev/null", 1);
	ASSERT(mkdtemp(dir));
	ca = tls_ca_new("sess-42", TLS_CA_LIFETIME, err, sizeof(err));
	other = tls_ca_new("sess-other", TLS_CA_LIFETIME, err, sizeof(err));
	ASSERT(ca && other);
	{
		const char *pem = tls_ca_cert_pem(other, &len);

		write_file("other-ca.pem", pem, len);
	}

	test_fresh_ca(ca);
	test_leaf_shape(ca);
	test_bad_hosts(ca);
	test_cache();
	test_handshakes(ca, other);
	test_real_clients(ca);
	test_platform();
	test_bundle(ca);

	tls_ca_free(ca);
	tls_ca_free(other);
	if (!getenv("KEEP")) sh("rm -rf %s", dir);
	return tap_done();
}
