/* SPDX-License-Identifier: Apache-2.0
 * fuzz_clienthello.c - libFuzzer target for clienthello_parse().
 *
 * Each input is tried three ways: as a whole first flight (the committed
 * corpus holds real ones), as a ClientHello body that the target frames
 * into 1..4 records itself, and as an extensions block after a fixed
 * minimal body; the last two let mutations reach the extension parsers
 * without first having to repair every enclosing length.
 *
 * Every invariant is checked with abort(), so libFuzzer reports it:
 *  - nothing is read past the buffer (each parse gets a private copy of
 *    exactly that many bytes, and ASan watches);
 *  - the result is in range and the struct holds only what the result
 *    allows (INCOMPLETE: need >= 1 and no fields; errors: a reason);
 *  - prefix stability: a prefix answers INCOMPLETE or exactly what the
 *    whole buffer answers, and a prefix answering INCOMPLETE with need k
 *    is still INCOMPLETE k - 1 bytes later; feeding the buffer in chunks
 *    (as the proxy does, read by read) ends with the whole buffer's answer;
 *  - a buffer of CLIENTHELLO_FLIGHT_MAX bytes is never INCOMPLETE;
 *  - OK: the hello ends at out->length on a record boundary (parsing just
 *    those bytes answers the same), records is 1..16, the SNI is what
 *    hostname_normalise() makes of it, a DNS name and not an address, and
 *    the stored ALPN names are well-formed;
 *  - differential: when OpenSSL's server also accepts the same bytes far
 *    enough to run its servername callback, it sees the same SNI (or none);
 *  - the same bytes as a server's first flight (serverhello_watch): the
 *    same kind whole, in two pieces and one byte at a time, final once
 *    known; as the client's bytes after a HelloRetryRequest
 *    (clienthello_next_hello): prefix consistent, the offset of an answer
 *    inside the buffer.
 */
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clienthello.h"
#include "hostname.h"
#include "fuzz.h"

static bool same_answer(enum clienthello_result ra,
			const struct clienthello *a,
			enum clienthello_result rb,
			const struct clienthello *b)
{
	size_t i;

	if (ra != rb || strcmp(a->reason, b->reason) != 0 ||
	    a->need != b->need || a->sni_error != b->sni_error ||
	    a->length != b->length || a->records != b->records ||
	    a->record_version != b->record_version ||
	    a->legacy_version != b->legacy_version ||
	    a->offers_tls13 != b->offers_tls13 || a->has_ech != b->has_ech ||
	    a->has_sni != b->has_sni || strcmp(a->sni, b->sni) != 0 ||
	    a->alpn_count != b->alpn_count)
		return false;
	for (i = 0; i < a->alpn_count && i < CLIENTHELLO_ALPN_MAX; i++) {
		if (a->alpn[i].len != b->alpn[i].len ||
		    memcmp(a->alpn[i].name, b->alpn[i].name,
			   a->alpn[i].len + 1u) != 0)
			return false;
	}
	return true;
}

/* Parses a private heap copy of exactly @len bytes. */
static enum clienthello_result parse(const uint8_t *buf, size_t len,
				     struct clienthello *h)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum clienthello_result r;

	CHECK(copy);
	if (len)
		memcpy(copy, buf, len);
	r = clienthello_parse(len ? copy : NULL, len, h);
	free(copy);
	return r;
}

/* Only what @r allows is set. */
static void check_fields(enum clienthello_result r,
			 const struct clienthello *h, size_t len)
{
	size_t i;

	CHECK((unsigned int)r < CLIENTHELLO_RESULT_COUNT);
	CHECK(clienthello_result_to_string(r) != NULL);
	CHECK(h->reason != NULL && h->reason[0] != '\0');
	if (r != CLIENTHELLO_OK) {
		CHECK(h->length == 0 && h->records == 0 &&
		      h->record_version == 0 && h->legacy_version == 0);
		CHECK(!h->offers_tls13 && !h->has_ech && !h->has_sni &&
		      h->sni[0] == '\0' && h->alpn_count == 0);
		for (i = 0; i < CLIENTHELLO_ALPN_MAX; i++)
			CHECK(h->alpn[i].len == 0 && h->alpn[i].name[0] == 0);
	}
	switch (r) {
	case CLIENTHELLO_INCOMPLETE:
		CHECK(h->need >= 1 && h->sni_error == HOSTNAME_OK);
		CHECK(len < CLIENTHELLO_FLIGHT_MAX);
		return;
	case CLIENTHELLO_NOT_TLS:
		CHECK(h->need == 0 && h->sni_error == HOSTNAME_OK);
		return;
	case CLIENTHELLO_MALFORMED:
		CHECK(h->need == 0);
		CHECK(h->sni_error == HOSTNAME_OK ||
		      strcmp(h->reason, "SNI is not a valid DNS name") == 0);
		return;
	case CLIENTHELLO_OK:
		break;
	default:
		CHECK(!"unknown result");
	}
	CHECK(h->need == 0 && h->sni_error == HOSTNAME_OK);
	CHECK(h->length >= 5 + 4 + 41 && h->length <= len);
	CHECK(h->records >= 1 && h->records <= CLIENTHELLO_MAX_RECORDS);
	CHECK(h->legacy_version >> 8 == 3 && h->record_version >> 8 == 3);
	if (h->has_sni) {
		struct host_target t;
		size_t n = strlen(h->sni);

		CHECK(n >= 1 && n <= HOSTNAME_MAX && h->sni[n - 1] != '.');
		CHECK(hostname_normalise(h->sni, n, &t) == HOSTNAME_OK);
		CHECK(!t.is_addr && strcmp(t.name, h->sni) == 0);
	} else {
		CHECK(h->sni[0] == '\0');
	}
	for (i = 0; i < h->alpn_count && i < CLIENTHELLO_ALPN_MAX; i++)
		CHECK(h->alpn[i].len >= 1 && h->alpn[i].name[h->alpn[i].len] ==
						     '\0');
	for (; i < CLIENTHELLO_ALPN_MAX; i++)
		CHECK(h->alpn[i].len == 0);
}

/* ------------------------------------------------------------------ */
/* OpenSSL as a second opinion on the SNI.                             */

struct ossl_seen {
	bool called;
	bool has_name;
	char name[300];
};

static int servername_cb(SSL *s, int *alert, void *arg)
{
	struct ossl_seen *seen = SSL_get_app_data(s);
	const char *name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);

	(void)alert;
	(void)arg;
	seen->called = true;
	if (name) {
		seen->has_name = true;
		snprintf(seen->name, sizeof(seen->name), "%s", name);
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL; /* stop here */
}

static SSL_CTX *server_ctx(void)
{
	static SSL_CTX *ctx;

	if (!ctx) {
		ctx = SSL_CTX_new(TLS_server_method());
		CHECK(ctx);
		SSL_CTX_set_min_proto_version(ctx, 0);
		SSL_CTX_set_security_level(ctx, 0);
		SSL_CTX_set_tlsext_servername_callback(ctx, servername_cb);
	}
	return ctx;
}

static void check_openssl(const uint8_t *buf, size_t len,
			  const struct clienthello *h)
{
	struct ossl_seen seen = { 0 };
	BIO *rbio, *wbio;
	SSL *ssl;

	rbio = BIO_new_mem_buf(buf, (int)len);
	wbio = BIO_new(BIO_s_mem());
	ssl = SSL_new(server_ctx());
	CHECK(rbio && wbio && ssl);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_app_data(ssl, &seen);
	SSL_set_accept_state(ssl);
	(void)SSL_do_handshake(ssl);
	SSL_free(ssl);
	if (!seen.called)
		return;
	CHECK(seen.has_name == h->has_sni);
	if (seen.has_name)
		CHECK(strcasecmp(seen.name, h->sni) == 0);
}

/* ------------------------------------------------------------------ */

static void check_buffer(const uint8_t *buf, size_t len, uint32_t seed)
{
	struct clienthello whole, h;
	enum clienthello_result rw = parse(buf, len, &whole), r;
	size_t step = len <= 256 ? 1 : len / 128, l, have;

	check_fields(rw, &whole, len);
	for (l = 0; l < len; l += step) {
		r = parse(buf, l, &h);
		check_fields(r, &h, l);
		if (r != CLIENTHELLO_INCOMPLETE) {
			CHECK(same_answer(r, &h, rw, &whole));
			continue;
		}
		/* Nothing can be decided before l + need bytes. */
		if (l + h.need - 1 <= len) {
			enum clienthello_result r2;
			struct clienthello h2;

			r2 = parse(buf, l + h.need - 1, &h2);
			CHECK(r2 == CLIENTHELLO_INCOMPLETE);
		} else {
			CHECK(rw == CLIENTHELLO_INCOMPLETE);
		}
	}
	/* The proxy's loop: whatever each read brings, parse again. */
	for (have = 0;;) {
		seed = seed * 1103515245u + 12345u;
		have += 1 + (seed >> 16) % 97;
		if (have > len)
			have = len;
		r = parse(buf, have, &h);
		if (r != CLIENTHELLO_INCOMPLETE || have == len)
			break;
	}
	CHECK(same_answer(r, &h, rw, &whole));

	if (rw == CLIENTHELLO_OK) {
		r = parse(buf, whole.length, &h);
		CHECK(same_answer(r, &h, rw, &whole));
	}
	if (rw == CLIENTHELLO_OK && len <= 0x7fffffff)
		check_openssl(buf, len, &whole);
}

static uint8_t framed[CLIENTHELLO_FLIGHT_MAX + 64];

/* @msg (@n bytes) as records cut at pseudo-random points from @seed. */
static size_t frame(const uint8_t *msg, size_t n, uint32_t seed)
{
	size_t nrec = 1 + seed % 4, o = 0, from = 0, i;

	for (i = 0; i < nrec && from < n; i++) {
		size_t len = i + 1 == nrec ? n - from
					   : 1 + (seed >> (8 + 4 * i)) % 64;

		if (len > n - from)
			len = n - from;
		if (len > CLIENTHELLO_MAX_RECORD)
			len = CLIENTHELLO_MAX_RECORD;
		if (i + 1 == nrec && len < n - from)
			return 0; /* too big to frame this way */
		framed[o++] = 0x16;
		framed[o++] = 0x03;
		framed[o++] = i == 0 ? 0x01 : 0x03;
		framed[o++] = (uint8_t)(len >> 8);
		framed[o++] = (uint8_t)len;
		memcpy(framed + o, msg + from, len);
		o += len;
		from += len;
	}
	return o;
}

static void check_after_hello(const uint8_t *data, size_t size, uint32_t seed)
{
	struct serverhello_watch a, b, c;
	enum serverhello_kind ka, kb = SERVERHELLO_MORE, kc = SERVERHELLO_MORE;
	size_t cut = size ? seed % size : 0, i, off = 0, poff = 0;
	int r, rp;

	serverhello_watch_init(&a);
	serverhello_watch_init(&b);
	serverhello_watch_init(&c);
	ka = serverhello_watch_feed(&a, data, size);
	CHECK((unsigned int)ka < SERVERHELLO_KIND_COUNT);
	kb = serverhello_watch_feed(&b, data, cut);
	CHECK((unsigned int)kb < SERVERHELLO_KIND_COUNT);
	kb = serverhello_watch_feed(&b, data + cut, size - cut);
	for (i = 0; i < size; i++)
		kc = serverhello_watch_feed(&c, data + i, 1);
	CHECK(ka == kb && ka == kc);
	if (ka != SERVERHELLO_MORE)
		CHECK(serverhello_watch_feed(&a, data, size) == ka);

	r = clienthello_next_hello(data, size, &off);
	CHECK(r >= -1 && r <= 1);
	if (r != 0)
		CHECK(off + 5 <= size);
	rp = clienthello_next_hello(data, cut, &poff);
	CHECK(rp == 0 || (rp == r && poff == off));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[CLIENTHELLO_MAX_RECORD * 2];
	static const uint8_t pre[] = {
		0x03, 0x03, [34] = 0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00,
	};
	static uint8_t flight[CLIENTHELLO_FLIGHT_MAX];
	struct clienthello h;
	uint32_t seed = 2166136261u;
	size_t i, n;

	/* Leaves room for mode 3's 16-bit extensions length. */
	if (size > 20000)
		return 0;
	for (i = 0; i < size && i < 64; i++)
		seed = (seed ^ data[i]) * 16777619u;

	/* 1. The whole first flight. */
	check_buffer(data, size, seed);
	check_after_hello(data, size, seed);

	/* A CLIENTHELLO_FLIGHT_MAX buffer always gets a final answer. */
	memset(flight, 0, sizeof(flight));
	memcpy(flight, data, size);
	CHECK(clienthello_parse(flight, sizeof(flight), &h) !=
	      CLIENTHELLO_INCOMPLETE);

	/* 2. A ClientHello body, framed here. */
	msg[0] = 1;
	msg[1] = (uint8_t)(size >> 16);
	msg[2] = (uint8_t)(size >> 8);
	msg[3] = (uint8_t)size;
	memcpy(msg + 4, data, size);
	n = frame(msg, size + 4, seed);
	if (n)
		check_buffer(framed, n, seed);

	/* 3. An extensions block after a minimal body. */
	n = sizeof(pre) + 2 + size;
	msg[0] = 1;
	msg[1] = (uint8_t)(n >> 16);
	msg[2] = (uint8_t)(n >> 8);
	msg[3] = (uint8_t)n;
	memcpy(msg + 4, pre, sizeof(pre));
	msg[4 + sizeof(pre)] = (uint8_t)(size >> 8);
	msg[4 + sizeof(pre) + 1] = (uint8_t)size;
	memcpy(msg + 4 + sizeof(pre) + 2, data, size);
	n = frame(msg, n + 4, seed >> 3);
	if (n)
		check_buffer(framed, n, seed);
	return 0;
}
