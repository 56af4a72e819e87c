/* SPDX-License-Identifier: Apache-2.0
 * witness_client.c - the client side of C2SP tlog-witness (see
 * witness_client.h).
 *
 * DOC: Theory of Operation
 *
 * A session's origin (airlock/SESSION) is new to every witness, so the
 * session's last checkpoint, written just before session.end, is sent
 * with old size 0 and no proof; the witness then pins it, and a rewritten
 * stream of that session can never be cosigned (409 or 422). The answer's
 * cosignature lines are kept only when one verifies, appended to the
 * note, with the witness key given on the command line: the key's name
 * is the line's, bound to the key by the key ID. Plain HTTP, one request
 * with a ten-second timeout; a witness that fails costs a warning, never
 * the session.
 */
#include "witness_client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "receipt.h"
#include "receipt_line.h"
#include "tlog.h"
#include "util.h"

EVP_PKEY *witness_spec_parse(const char *spec, char **url, char *err, size_t errlen)
{
	const char *eq = strrchr(spec, '=');
	char kerr[256];
	EVP_PKEY *k;

	*url = NULL;
	if (!eq || strncmp(spec, "http://", 7) != 0 || eq == spec + 7 || !eq[1]) {
		snprintf(err, errlen, "--witness %s: expected http://HOST:PORT[/PATH]=KEYFILE",
			 spec);
		return NULL;
	}
	k = receipt_pubkey_load(eq + 1, kerr, sizeof(kerr));
	if (!k) {
		snprintf(err, errlen, "--witness %s: %s", eq + 1, kerr);
		return NULL;
	}
	*url = util_xstrndup(spec, (size_t)(eq - spec));
	return k;
}

char *witness_cosign(const char *url, EVP_PKEY *pub, const char *note, char *err,
		     size_t errlen)
{
	return witness_cosign_from(url, pub, 0, NULL, 0, note, NULL, err, errlen);
}

/* http://HOST[:PORT][/PATH] into its host, port (80 when not given) and
 * path (without trailing slashes). */
static bool split_url(const char *url, char host[256], char port[8], char path[512],
		      char *err, size_t errlen)
{
	const char *h = url + 7, *slash = strchr(h, '/'), *colon;
	size_t hlen = slash ? (size_t)(slash - h) : strlen(h);

	colon = memchr(h, ':', hlen);
	if (hlen == 0 || hlen >= 256 || (colon && (size_t)(h + hlen - colon - 1) >= 8)) {
		snprintf(err, errlen, "%s: bad URL", url);
		return false;
	}
	memcpy(host, h, colon ? (size_t)(colon - h) : hlen);
	host[colon ? (size_t)(colon - h) : hlen] = '\0';
	if (colon) {
		memcpy(port, colon + 1, (size_t)(h + hlen - colon - 1));
		port[h + hlen - colon - 1] = '\0';
	} else {
		snprintf(port, 8, "80");
	}
	snprintf(path, 512, "%s", slash ? slash : "");
	while (path[0] && path[strlen(path) - 1] == '/')
		path[strlen(path) - 1] = '\0';
	return true;
}

int witness_url_pin(const char *url, char *err, size_t errlen)
{
	char host[256], port[8], path[512];

	if (!split_url(url, host, port, path, err, errlen))
		return -1;
	return util_tcp_pin(host, port, err, errlen);
}

char *witness_cosign_from(const char *url, EVP_PKEY *pub, uint64_t old,
			  const merkle_hash *proof, size_t nproof, const char *note,
			  uint64_t *has, char *err, size_t errlen)
{
	char host[256], port[8], *req = NULL, *resp = NULL, *out = NULL;
	const char *body, *p;
	size_t have = 0, cap = 65536;
	char path[512], why[128], *prefix;
	struct tlog_checkpoint c;
	uint8_t raw[32];
	int fd, status;
	ssize_t n;

	if (!split_url(url, host, port, path, err, errlen))
		return NULL;
	fd = util_tcp_connect(host, port, 10, err, errlen);
	if (fd < 0)
		return NULL;
	if (has)
		*has = UINT64_MAX;
	prefix = util_xasprintf("old %llu\n", (unsigned long long)old);
	for (size_t i = 0; i < nproof; i++) {
		char *b64 = tlog_b64(proof[i], MERKLE_HASH_LEN), *more;

		more = util_xasprintf("%s%s\n", prefix, b64);
		free(b64);
		free(prefix);
		prefix = more;
	}
	req = util_xasprintf("POST %s/add-checkpoint HTTP/1.1\r\nHost: %s\r\n"
			     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n%s",
			     path, host, strlen(prefix) + 1 + strlen(note), prefix, note);
	free(prefix);
	if (util_write_all(fd, req, strlen(req)) < 0) {
		snprintf(err, errlen, "%s: %s", url, strerror(errno));
		goto out;
	}
	resp = util_xmalloc(cap + 1);
	while (have < cap && (n = read(fd, resp + have, cap - have)) > 0)
		have += (size_t)n;
	resp[have] = '\0';
	status = -1;
	if (have > 12 && strncmp(resp, "HTTP/1.", 7) == 0 && resp[8] == ' ') {
		char *e;
		long st = strtol(resp + 9, &e, 10);

		if (e == resp + 12 && st >= 100 && st <= 599)
			status = (int)st;
	}
	if (status < 0 || !(body = strstr(resp, "\r\n\r\n"))) {
		snprintf(err, errlen, "%s: not an HTTP answer", url);
		goto out;
	}
	body += 4;
	if (status == 409 && has) {
		/* the size the witness has for this origin */
		char *e;
		unsigned long long v = strtoull(body, &e, 10);

		if (e != body && *e == '\n')
			*has = v;
	}
	if (status != 200) {
		snprintf(err, errlen, "%s: the witness answered %d: %.*s", url, status,
			 (int)strcspn(body, "\n"), body);
		goto out;
	}
	/* keep the answer only if it verifies with the key we were given */
	{
		char *cosigned = util_xasprintf("%s%s", note, body);
		char name[256];
		size_t nl;

		ASSERT(receipt_key_raw_public(pub, raw));
		p = body;
		if (strncmp(p, "\xe2\x80\x94 ", 4) != 0 || (nl = strcspn(p + 4, " ")) >= sizeof(name)) {
			snprintf(err, errlen, "%s: the answer is not a cosignature line", url);
			free(cosigned);
			goto out;
		}
		memcpy(name, p + 4, nl);
		name[nl] = '\0';
		if (!tlog_checkpoint_parse(cosigned, strlen(cosigned), &c, why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", url, why);
			free(cosigned);
			goto out;
		}
		if (tlog_cosig_verify(&c, name, raw, NULL))
			out = util_xstrdup(body);
		else
			snprintf(err, errlen, "%s: the cosignature does not verify with the "
				 "witness key", url);
		tlog_checkpoint_free(&c);
		free(cosigned);
	}
out:
	close(fd);
	free(req);
	free(resp);
	return out;
}
