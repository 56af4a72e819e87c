/* SPDX-License-Identifier: Apache-2.0
 * clienthello.h - a strict, incremental, read-only parser of the TLS
 * ClientHello that opens a CONNECT tunnel (docs/PROXY.md).
 *
 * A pure function over the bytes the client has sent so far: no I/O, no
 * allocation, nothing is consumed (the proxy forwards the same bytes
 * upstream unchanged). Table-tested in tests/unit/test_clienthello.c and
 * fuzzed by tests/fuzz/fuzz_clienthello.c.
 */
#ifndef AIRLOCK_CLIENTHELLO_H
#define AIRLOCK_CLIENTHELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostname.h"

/* Limits; anything beyond them is CLIENTHELLO_MALFORMED. */
#define CLIENTHELLO_MAX_RECORD 16384   /* TLSPlaintext.length, RFC 8446 §5.1 */
#define CLIENTHELLO_MAX_RECORDS 16     /* records one ClientHello may span */
#define CLIENTHELLO_MAX_MESSAGE 65536  /* handshake header + body */
/* A buffer this large always gets an answer other than INCOMPLETE: the
 * most a ClientHello we accept can take on the wire. */
#define CLIENTHELLO_FLIGHT_MAX \
	(CLIENTHELLO_MAX_MESSAGE + 5 * CLIENTHELLO_MAX_RECORDS)
/* ALPN protocol names kept in struct clienthello (all are counted). */
#define CLIENTHELLO_ALPN_MAX 4

#define CLIENTHELLO_EXT_SERVER_NAME 0x0000
#define CLIENTHELLO_EXT_ALPN 0x0010
#define CLIENTHELLO_EXT_SUPPORTED_VERSIONS 0x002b
#define CLIENTHELLO_EXT_ECH 0xfe0d /* encrypted_client_hello */

/* Keep clienthello_result_to_string() in sync (a static_assert checks the
 * table size). */
enum clienthello_result {
	CLIENTHELLO_OK = 0,     /* a well-formed ClientHello, fields filled */
	CLIENTHELLO_INCOMPLETE, /* a valid prefix: call again with more */
	CLIENTHELLO_NOT_TLS,    /* not a TLS handshake opening with a
				   ClientHello (HTTP, SSH, an alert, SSLv2) */
	CLIENTHELLO_MALFORMED,  /* TLS-shaped but broken or beyond a limit */
	CLIENTHELLO_RESULT_COUNT
};

const char *clienthello_result_to_string(enum clienthello_result r);

struct clienthello_alpn {
	uint8_t len;    /* 1..255; the name may contain any byte */
	char name[256]; /* @len bytes, then a NUL */
};

/* What clienthello_parse() reports. Every member is written on every call;
 * those not listed for a result are zero. */
struct clienthello {
	/* Every result. */
	const char *reason; /* static text: why NOT_TLS / MALFORMED (for the
			       receipt); the result's name otherwise */
	/* CLIENTHELLO_INCOMPLETE: a lower bound (>= 1) on the number of
	 * bytes to append before the answer can change. */
	size_t need;
	/* CLIENTHELLO_MALFORMED by an invalid SNI: hostname_normalise()'s
	 * reason (HOSTNAME_OK for every other reason). */
	enum hostname_error sni_error;

	/* CLIENTHELLO_OK only. */
	size_t length;            /* bytes of the buffer the ClientHello's
				     records take; it always ends on a record
				     boundary. Bytes after it (0-RTT data, the
				     next read) are not looked at. */
	unsigned int records;     /* 1..CLIENTHELLO_MAX_RECORDS */
	uint16_t record_version;  /* of the first record (0x0301, 0x0303) */
	uint16_t legacy_version;  /* ClientHello.legacy_version */
	bool offers_tls13;        /* supported_versions lists 0x0304 */
	bool has_ech;             /* encrypted_client_hello present: @sni is
				     the outer (public) name */
	bool has_sni;
	char sni[HOSTNAME_MAX + 1]; /* when has_sni: a DNS name as
				       hostname_normalise() gives it
				       (lowercase, never an IP literal, no
				       trailing dot); "" otherwise */
	size_t alpn_count;        /* ALPN protocols offered (0: no ALPN) */
	struct clienthello_alpn alpn[CLIENTHELLO_ALPN_MAX]; /* the first
				     min(alpn_count, ALPN_MAX), in order */
};

/* Parses the client's first flight @buf (@len bytes, the whole stream from
 * its first byte; @buf may be NULL when @len is 0). Reads at most @len
 * bytes and never past the ClientHello's last record. Deterministic and
 * prefix-stable: once a prefix gives a result other than INCOMPLETE, every
 * longer buffer starting with that prefix gives the same result, reason
 * and fields. @out must not be NULL. */
enum clienthello_result clienthello_parse(const uint8_t *buf, size_t len,
					  struct clienthello *out);

/* ------------------------------------------------------------------ */
/* After the ClientHello: the server's answer, a second ClientHello   */
/* ------------------------------------------------------------------ */

/* What the server's first handshake message is. Keep
 * serverhello_kind_to_string() in sync. */
enum serverhello_kind {
	SERVERHELLO_MORE = 0, /* not known yet: feed more bytes */
	SERVERHELLO_RETRY,    /* a HelloRetryRequest (RFC 8446 §4.1.3): a
				 second ClientHello follows */
	SERVERHELLO_OTHER,    /* a ServerHello, an alert, anything else: no
				 second ClientHello can follow */
	SERVERHELLO_KIND_COUNT
};

const char *serverhello_kind_to_string(enum serverhello_kind k);

/* The bytes of the server's first handshake message that tell a
 * HelloRetryRequest: type, length, legacy_version, random. */
#define SERVERHELLO_PREFIX 38
#define SERVERHELLO_RECORDS_MAX 64

/* Reads the server's stream from its first byte, across any record and
 * read boundaries. Fields are private. */
struct serverhello_watch {
	enum serverhello_kind kind;
	uint8_t hdr[5];
	size_t nhdr;
	size_t rec_left;
	unsigned int records;
	uint8_t hs[SERVERHELLO_PREFIX];
	size_t nhs;
};

void serverhello_watch_init(struct serverhello_watch *w);

/* Feeds the next @n bytes of the server's stream (@d may be NULL when @n
 * is 0). Returns the kind once known; it is final (later feeds return it
 * and read nothing). Any split of the stream gives the same answer. A
 * first record that is not a handshake, a first handshake message that
 * is not a ServerHello, or more than SERVERHELLO_RECORDS_MAX records
 * before SERVERHELLO_PREFIX handshake bytes: SERVERHELLO_OTHER. */
enum serverhello_kind serverhello_watch_feed(struct serverhello_watch *w,
					     const uint8_t *d, size_t n);

/* The client's bytes after a HelloRetryRequest: skips whole
 * change_cipher_spec (20) and application_data (23, early data sent
 * before the retry) records and stores in *off where the next record
 * starts. Returns 1 when that record is a handshake record (parse the
 * second ClientHello from there with clienthello_parse()), 0 when more
 * bytes are needed, -1 when it is anything else (an alert: no second
 * ClientHello comes). */
int clienthello_next_hello(const uint8_t *buf, size_t len, size_t *off);

#endif /* AIRLOCK_CLIENTHELLO_H */
