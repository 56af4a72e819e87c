/* SPDX-License-Identifier: Apache-2.0
 * clienthello.c - a strict, incremental, read-only ClientHello parser.
 *
 * DOC: Theory of Operation
 *
 * A CONNECT tunnel names a host, but what the client then sends is up to
 * the client, and the client is hostile. Before splicing a tunnel
 * the proxy reads the TLS ClientHello and denies the tunnel unless its
 * server_name is the CONNECT host: otherwise an agent allowed
 * to reach a shared front end (a CDN, a cloud load balancer) could CONNECT
 * to an allowed name and ask that front end for any other one. A
 * ClientHello without an SNI is denied for the same reason: the front end
 * would pick a default we never checked. So this parser answers exactly
 * two questions, "is this a ClientHello?" and "which name does it ask
 * for?", and refuses everything it cannot answer with certainty.
 *
 * The reader never trusts a length. Every length on the wire is checked
 * against the bytes that enclose it before anything is read through it:
 * the record layer walk checks each record header against the buffer, and
 * the ClientHello body is read through a cursor whose only readers
 * (get_u8, get_u16, get_u24, get_vector, get_bytes) fail instead of
 * reading past the end of their window; get_vector() hands out a
 * sub-window, and each vector must be consumed exactly (trailing bytes are
 * MALFORMED, never skipped). Nothing is repaired: a second server_name
 * entry, a name_type other than host_name, a trailing dot (RFC 6066 §3),
 * an IP literal, a duplicate extension (RFC 8446 §4.2) are all MALFORMED,
 * because a server or middlebox that read them differently from us would
 * make our check meaningless.
 *
 * Nothing is consumed or copied: the proxy forwards the same bytes
 * upstream. A ClientHello may be split across records (reassembled here:
 * only handshake records, each 1..2^14 bytes, at most
 * CLIENTHELLO_MAX_RECORDS of them, the message at most 64 KiB and ending on
 * a record boundary) and across TCP reads (INCOMPLETE: call again with the
 * longer buffer). The fragments are not copied together; the cursor reads
 * the logical message through a table of (pointer, length) fragments.
 *
 * Checks run in wire order and each looks only at bytes before the point
 * where it is made, so the answer is prefix-stable: a non-INCOMPLETE answer
 * for a prefix is the answer for every extension of it, and the proxy may
 * decide as soon as it has one. A first byte other than 0x16 (HTTP, SSH,
 * an SSLv2 hello, an alert) is NOT_TLS after one byte. The body is parsed
 * once the whole message has arrived.
 */
#include "clienthello.h"

#include <assert.h>
#include <string.h>

#include "util.h"

#define TLS_RECORD_HANDSHAKE 22
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_VERSION_1_3 0x0304
#define RECORD_HEADER 5
#define HANDSHAKE_HEADER 4

static const char *const result_names[] = {
	[CLIENTHELLO_OK] = "ok",
	[CLIENTHELLO_INCOMPLETE] = "incomplete",
	[CLIENTHELLO_NOT_TLS] = "not TLS",
	[CLIENTHELLO_MALFORMED] = "malformed ClientHello",
};
static_assert(ARRAY_SIZE(result_names) == CLIENTHELLO_RESULT_COUNT,
	      "result_names out of sync with enum clienthello_result");

const char *clienthello_result_to_string(enum clienthello_result r)
{
	if ((unsigned int)r >= CLIENTHELLO_RESULT_COUNT || !result_names[r])
		return "unknown result";
	return result_names[r];
}

/* ------------------------------------------------------------------ */
/* The handshake message as its records carry it, read as one string.   */

struct frags {
	size_t count;
	size_t total; /* sum of len[] */
	const uint8_t *ptr[CLIENTHELLO_MAX_RECORDS];
	size_t len[CLIENTHELLO_MAX_RECORDS];
};

/* Byte @pos of the reassembled message; the caller has checked
 * pos < f->total (the cursor's windows never exceed it). */
static uint8_t frag_byte(const struct frags *f, size_t pos)
{
	size_t i = 0;

	ASSERT(pos < f->total);
	while (pos >= f->len[i]) {
		pos -= f->len[i];
		i++;
		ASSERT(i < f->count);
	}
	return f->ptr[i][pos];
}

/* A window [pos, end) of the message. end <= f->total always holds. */
struct cursor {
	const struct frags *f;
	size_t pos, end;
};

static size_t left(const struct cursor *c)
{
	ASSERT(c->pos <= c->end);
	return c->end - c->pos;
}

static bool at_end(const struct cursor *c)
{
	return c->pos == c->end;
}

static bool get_uint(struct cursor *c, size_t width, uint32_t *v)
{
	size_t i;

	if (left(c) < width)
		return false;
	*v = 0;
	for (i = 0; i < width; i++)
		*v = (*v << 8) | frag_byte(c->f, c->pos + i);
	c->pos += width;
	return true;
}

static bool get_u8(struct cursor *c, uint8_t *v)
{
	uint32_t x;

	if (!get_uint(c, 1, &x))
		return false;
	*v = (uint8_t)x;
	return true;
}

static bool get_u16(struct cursor *c, uint16_t *v)
{
	uint32_t x;

	if (!get_uint(c, 2, &x))
		return false;
	*v = (uint16_t)x;
	return true;
}

static bool get_u24(struct cursor *c, uint32_t *v)
{
	return get_uint(c, 3, v);
}

static bool skip(struct cursor *c, size_t n)
{
	if (left(c) < n)
		return false;
	c->pos += n;
	return true;
}

/* Copies the next @n bytes into @dst (which holds at least @n). */
static bool get_bytes(struct cursor *c, void *dst, size_t n)
{
	uint8_t *d = dst;
	size_t i;

	if (left(c) < n)
		return false;
	for (i = 0; i < n; i++)
		d[i] = frag_byte(c->f, c->pos + i);
	c->pos += n;
	return true;
}

/* Reads a vector with a @width-byte length prefix (TLS's opaque
 * x<min..max>): the length must be in [min, max] and fit in @c. @sub
 * receives the vector's window and @c moves past it. */
static bool get_vector(struct cursor *c, size_t width, size_t min, size_t max,
		       struct cursor *sub)
{
	uint32_t n;

	if (!get_uint(c, width, &n) || n < min || n > max || n > left(c))
		return false;
	sub->f = c->f;
	sub->pos = c->pos;
	sub->end = c->pos + n;
	c->pos += n;
	return true;
}

/* ------------------------------------------------------------------ */
/* Extensions.                                                          */

/* server_name (RFC 6066 §3): exactly one host_name entry whose name is a
 * DNS name as hostname_normalise() accepts it, not an IP literal, without
 * a trailing dot. */
static const char *parse_sni(struct cursor *ext, struct clienthello *out)
{
	struct cursor list, name;
	struct host_target t;
	char raw[HOSTNAME_MAX + 1];
	enum hostname_error e;
	uint8_t type;
	size_t n;

	if (!get_vector(ext, 2, 1, 0xffff, &list) || !at_end(ext))
		return "malformed server_name extension";
	if (!get_u8(&list, &type))
		return "malformed server_name extension";
	if (type != 0)
		return "server_name type is not host_name";
	if (!get_vector(&list, 2, 0, 0xffff, &name))
		return "malformed server_name extension";
	if (!at_end(&list))
		return "more than one server_name entry";
	n = left(&name);
	if (n == 0)
		return "empty SNI host name";
	if (n > HOSTNAME_MAX) {
		out->sni_error = HOSTNAME_TOO_LONG;
		return "SNI is not a valid DNS name";
	}
	if (!get_bytes(&name, raw, n))
		return "malformed server_name extension";
	if (raw[n - 1] == '.')
		return "SNI ends with a dot";
	e = hostname_normalise(raw, n, &t);
	if (e != HOSTNAME_OK) {
		out->sni_error = e;
		return "SNI is not a valid DNS name";
	}
	if (t.is_addr)
		return "SNI is an IP literal";
	ASSERT(util_strlcpy(out->sni, t.name, sizeof(out->sni)));
	out->has_sni = true;
	return NULL;
}

/* application_layer_protocol_negotiation (RFC 7301 §3.1). */
static const char *parse_alpn(struct cursor *ext, struct clienthello *out)
{
	struct cursor list;

	if (!get_vector(ext, 2, 2, 0xffff, &list) || !at_end(ext))
		return "malformed ALPN extension";
	while (!at_end(&list)) {
		struct cursor name;
		size_t n;

		if (!get_vector(&list, 1, 0, 255, &name))
			return "malformed ALPN extension";
		n = left(&name);
		if (n == 0)
			return "empty ALPN protocol name";
		if (out->alpn_count < CLIENTHELLO_ALPN_MAX) {
			struct clienthello_alpn *a =
				&out->alpn[out->alpn_count];

			if (!get_bytes(&name, a->name, n))
				return "malformed ALPN extension";
			a->name[n] = '\0';
			a->len = (uint8_t)n;
		}
		out->alpn_count++;
	}
	return NULL;
}

/* supported_versions, ClientHello form (RFC 8446 §4.2.1). */
static const char *parse_versions(struct cursor *ext, struct clienthello *out)
{
	struct cursor list;

	if (!get_vector(ext, 1, 2, 254, &list) || !at_end(ext) ||
	    left(&list) % 2 != 0)
		return "malformed supported_versions extension";
	while (!at_end(&list)) {
		uint16_t v;

		if (!get_u16(&list, &v))
			return "malformed supported_versions extension";
		if (v == TLS_VERSION_1_3)
			out->offers_tls13 = true;
	}
	return NULL;
}

static const char *parse_extensions(struct cursor *c, struct clienthello *out)
{
	/* One bit per extension type: duplicates are refused (RFC 8446
	 * §4.2), whatever their number. */
	uint64_t seen[65536 / 64];

	memset(seen, 0, sizeof(seen));
	while (!at_end(c)) {
		struct cursor data;
		const char *err = NULL;
		uint16_t type;

		if (!get_u16(c, &type) || !get_vector(c, 2, 0, 0xffff, &data))
			return "truncated extension";
		if (seen[type / 64] & (UINT64_C(1) << (type % 64)))
			return "duplicate extension";
		seen[type / 64] |= UINT64_C(1) << (type % 64);
		switch (type) {
		case CLIENTHELLO_EXT_SERVER_NAME:
			err = parse_sni(&data, out);
			break;
		case CLIENTHELLO_EXT_ALPN:
			err = parse_alpn(&data, out);
			break;
		case CLIENTHELLO_EXT_SUPPORTED_VERSIONS:
			err = parse_versions(&data, out);
			break;
		case CLIENTHELLO_EXT_ECH:
			/* Only the outer, public name is visible to us; the
			 * caller decides what ECH means for the tunnel. */
			out->has_ech = true;
			break;
		default:
			break;
		}
		if (err)
			return err;
	}
	return NULL;
}

/* The ClientHello body (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2). Returns NULL
 * or why it is malformed. */
static const char *parse_body(struct cursor *c, struct clienthello *out)
{
	struct cursor v;

	if (!get_u16(c, &out->legacy_version))
		return "truncated ClientHello";
	if (out->legacy_version >> 8 != 3)
		return "ClientHello legacy_version is not 3.x";
	if (!skip(c, 32))
		return "truncated ClientHello";
	if (!get_vector(c, 1, 0, 32, &v))
		return "malformed legacy_session_id";
	if (!get_vector(c, 2, 2, 0xfffe, &v) || left(&v) % 2 != 0)
		return "malformed cipher_suites";
	if (!get_vector(c, 1, 1, 255, &v))
		return "malformed legacy_compression_methods";
	/* Before TLS 1.3 the extensions block is optional. */
	if (at_end(c))
		return NULL;
	if (!get_vector(c, 2, 0, 0xffff, &v))
		return "extensions overrun the ClientHello";
	if (!at_end(c))
		return "trailing data after the extensions";
	return parse_extensions(&v, out);
}

/* ------------------------------------------------------------------ */
/* The record layer.                                                    */

/* Every answer but OK: @out is all zero but for these. */
static enum clienthello_result answer(struct clienthello *out,
				      enum clienthello_result r,
				      const char *reason, size_t need,
				      enum hostname_error sni_error)
{
	memset(out, 0, sizeof(*out));
	out->reason = reason ? reason : clienthello_result_to_string(r);
	out->need = need;
	out->sni_error = sni_error;
	return r;
}

static enum clienthello_result malformed(struct clienthello *out,
					 const char *reason)
{
	return answer(out, CLIENTHELLO_MALFORMED, reason, 0, HOSTNAME_OK);
}

static enum clienthello_result incomplete(struct clienthello *out,
					  size_t need)
{
	ASSERT(need >= 1);
	return answer(out, CLIENTHELLO_INCOMPLETE, NULL, need, HOSTNAME_OK);
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Walks the records from the start of @buf and collects the handshake
 * message's fragments into @f. Returns OK once the whole message is in
 * (with out->length, out->records, out->record_version set), or the
 * answer that ends the parse. */
static enum clienthello_result walk_records(const uint8_t *buf, size_t len,
					    struct frags *f,
					    struct clienthello *out)
{
	size_t pos = 0;      /* in @buf */
	size_t declared = 0; /* handshake bytes the records so far declare */
	size_t msg = 0;      /* header + body length once known, else 0 */
	uint16_t first_version = 0;
	unsigned int n;

	for (n = 0;; n++) {
		size_t avail = len - pos, rec_len, take, have;
		bool first = n == 0;
		struct cursor hs;
		uint32_t body_len;
		uint8_t hs_type;

		if (msg != 0 && declared == msg) {
			out->length = pos;
			out->records = n;
			out->record_version = first_version;
			return CLIENTHELLO_OK;
		}
		if (n == CLIENTHELLO_MAX_RECORDS)
			return malformed(out, "ClientHello spans too many "
					      "records");

		/* Record header: type, legacy_record_version, length; each
		 * field is judged as soon as it is there. */
		if (avail < 1)
			return incomplete(out, 1);
		if (buf[pos] != TLS_RECORD_HANDSHAKE)
			return first ? answer(out, CLIENTHELLO_NOT_TLS,
					      "not a TLS handshake record", 0,
					      HOSTNAME_OK)
				     : malformed(out, "non-handshake record "
						      "inside the ClientHello");
		if (avail < 3)
			return incomplete(out, 3 - avail);
		if (buf[pos + 1] != 3 || buf[pos + 2] > 4)
			return first ? answer(out, CLIENTHELLO_NOT_TLS,
					      "record version is not TLS", 0,
					      HOSTNAME_OK)
				     : malformed(out, "bad record version "
						      "inside the ClientHello");
		if (avail < RECORD_HEADER)
			return incomplete(out, RECORD_HEADER - avail);
		if (first)
			first_version = (uint16_t)(buf[pos + 1] << 8 |
						   buf[pos + 2]);
		rec_len = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (rec_len == 0)
			return malformed(out, "empty handshake record");
		if (rec_len > CLIENTHELLO_MAX_RECORD)
			return malformed(out, "record longer than 2^14 bytes");
		pos += RECORD_HEADER;
		declared += rec_len;
		if (msg != 0 && declared > msg)
			return malformed(out, "data after the ClientHello in "
					      "its record");

		/* Payload: what has arrived of it joins the message. */
		have = f->total;
		take = min_size(rec_len, len - pos);
		if (take > 0) {
			ASSERT(f->count < CLIENTHELLO_MAX_RECORDS);
			f->ptr[f->count] = buf + pos;
			f->len[f->count] = take;
			f->count++;
			f->total += take;
		}
		/* Handshake header: msg_type, then a 24-bit length, judged
		 * by the record that completes each. */
		hs.f = f;
		hs.end = f->total;
		if (have < 1 && f->total >= 1) {
			hs.pos = 0;
			ASSERT(get_u8(&hs, &hs_type));
			if (hs_type != TLS_HANDSHAKE_CLIENT_HELLO)
				return answer(out, CLIENTHELLO_NOT_TLS,
					      "first handshake message is "
					      "not a ClientHello",
					      0, HOSTNAME_OK);
		}
		if (have < HANDSHAKE_HEADER && f->total >= HANDSHAKE_HEADER) {
			hs.pos = 1;
			ASSERT(get_u24(&hs, &body_len));
			msg = HANDSHAKE_HEADER + (size_t)body_len;
			if (msg > CLIENTHELLO_MAX_MESSAGE)
				return malformed(out, "ClientHello larger than "
						      "64 KiB");
			if (declared > msg)
				return malformed(out, "data after the "
						      "ClientHello in its "
						      "record");
		}
		if (take < rec_len) {
			/* The next decision: the handshake type, its
			 * length, or the end of this record (plus the next
			 * record's type byte when the message goes on and
			 * may still take another record). */
			size_t need = rec_len - take;

			if (msg != 0 && declared < msg &&
			    n + 1 < CLIENTHELLO_MAX_RECORDS)
				need++;
			if (f->total < 1)
				need = min_size(need, 1 - f->total);
			else if (f->total < HANDSHAKE_HEADER)
				need = min_size(need,
						HANDSHAKE_HEADER - f->total);
			return incomplete(out, need);
		}
		pos += rec_len;
	}
}

enum clienthello_result clienthello_parse(const uint8_t *buf, size_t len,
					  struct clienthello *out)
{
	struct frags f;
	struct cursor c;
	enum clienthello_result r;
	const char *err;

	memset(&f, 0, sizeof(f));
	memset(out, 0, sizeof(*out));
	r = walk_records(buf, len, &f, out);
	if (r != CLIENTHELLO_OK)
		return r;
	ASSERT(f.total >= HANDSHAKE_HEADER);
	c.f = &f;
	c.pos = HANDSHAKE_HEADER;
	c.end = f.total;
	err = parse_body(&c, out);
	if (err)
		return answer(out, CLIENTHELLO_MALFORMED, err, 0,
			      out->sni_error);
	out->reason = clienthello_result_to_string(CLIENTHELLO_OK);
	return CLIENTHELLO_OK;
}

/* ------------------------------------------------------------------ */
/* The server's first handshake message                               */
/* ------------------------------------------------------------------ */

static const char *const serverhello_names[] = {
	[SERVERHELLO_MORE] = "more",
	[SERVERHELLO_RETRY] = "hello-retry-request",
	[SERVERHELLO_OTHER] = "other",
};
static_assert(ARRAY_SIZE(serverhello_names) == SERVERHELLO_KIND_COUNT,
	      "serverhello_names out of sync with enum serverhello_kind");

const char *serverhello_kind_to_string(enum serverhello_kind k)
{
	return (unsigned int)k < SERVERHELLO_KIND_COUNT ? serverhello_names[k]
							 : "unknown";
}

/* SHA-256("HelloRetryRequest"): the random of a HelloRetryRequest. */
static const uint8_t hrr_random[32] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c,
	0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb,
	0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

void serverhello_watch_init(struct serverhello_watch *w)
{
	memset(w, 0, sizeof(*w));
	w->kind = SERVERHELLO_MORE;
}

enum serverhello_kind serverhello_watch_feed(struct serverhello_watch *w,
					     const uint8_t *d, size_t n)
{
	size_t i = 0;

	while (i < n && w->kind == SERVERHELLO_MORE) {
		if (w->rec_left == 0) {
			w->hdr[w->nhdr++] = d[i++];
			if (w->nhdr < 5)
				continue;
			w->nhdr = 0;
			w->rec_left = ((size_t)w->hdr[3] << 8) | w->hdr[4];
			/* an alert, or anything but a handshake first: no
			 * retry can follow */
			if (w->hdr[0] != 22 || ++w->records > SERVERHELLO_RECORDS_MAX)
				w->kind = SERVERHELLO_OTHER;
			continue;
		}
		while (i < n && w->rec_left > 0 && w->nhs < SERVERHELLO_PREFIX) {
			w->hs[w->nhs++] = d[i++];
			w->rec_left--;
		}
		if (w->nhs == SERVERHELLO_PREFIX)
			w->kind = w->hs[0] == 2 && memcmp(w->hs + 6, hrr_random, 32) == 0
					  ? SERVERHELLO_RETRY
					  : SERVERHELLO_OTHER;
	}
	return w->kind;
}

int clienthello_next_hello(const uint8_t *buf, size_t len, size_t *off)
{
	size_t o = 0;

	while (o + 5 <= len && (buf[o] == 20 || buf[o] == 23))
		o += 5 + (((size_t)buf[o + 3] << 8) | buf[o + 4]);
	*off = o;
	if (o + 5 > len)
		return 0;
	return buf[o] == 22 ? 1 : -1;
}
