/* SPDX-License-Identifier: Apache-2.0
 * witness.c - `airlock witness`: cosigns receipt checkpoints it finds
 * consistent with the last one it cosigned for the same origin, speaking
 * the C2SP tlog-witness protocol (docs/RECEIPTS.md, "Witnesses").
 *
 * DOC: Theory of Operation
 *
 * A witness makes a log's split views detectable: it remembers, per
 * origin, the size and root of the last checkpoint it cosigned, and
 * cosigns a new one only when a consistency proof (RFC 9162 §2.1.4) shows
 * the new tree extends that one. A key holder that rewrote its stream
 * (a fork) cannot get the rewritten checkpoint cosigned.
 *
 * Protocol (c2sp.org/tlog-witness): POST /add-checkpoint with the body
 *   old SIZE\n  CONSISTENCY-HASH-BASE64\n ...  \n  CHECKPOINT-NOTE
 * Answers: 200 with the cosignature line (C2SP tlog-cosignature,
 * cosignature/v1, with the time); 409 with the size the witness has
 * (text/x.tlog.size) when SIZE is not it; 422 when the proof does not
 * prove consistency; 404 for an origin that is not a receipt stream's
 * (airlock/...); 403 when no --log-key signed the checkpoint; 400 for a
 * malformed request. The log's keys are given (--log-key, the public keys
 * of `airlock run --signing-key`): a note names its key by a 4-byte ID,
 * so the witness cannot learn it from the note.
 *
 * State: a JSON file {ORIGIN: {"size": N, "root": B64}}, replaced
 * atomically (temporary file, fsync, rename) before the cosignature is
 * sent, so a cosigned checkpoint is never forgotten. One request at a
 * time: a witness sees little traffic, and serial handling keeps
 * check-then-update atomic.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "commands.h"
#include "merkle.h"
#include "receipt.h"
#include "receipt_line.h"
#include "tlog.h"
#include "util.h"

#define WITNESS_BODY_MAX ((size_t)64 * 1024)
#define WITNESS_LOG_KEYS_MAX 64

const char cmd_witness_help[] =
	"usage: airlock witness --listen ADDR:PORT --key FILE --name NAME --state FILE\n"
	"                       --log-key FILE [--log-key FILE...]\n"
	"\n"
	"A C2SP tlog-witness for receipt streams: answers POST /add-checkpoint\n"
	"(\"old SIZE\", consistency proof hashes, an empty line, a checkpoint\n"
	"note of origin airlock/SESSION). It cosigns (C2SP tlog-cosignature,\n"
	"cosignature/v1) only a checkpoint signed by a --log-key whose tree\n"
	"extends the last one it cosigned for that origin, as the RFC 9162\n"
	"consistency proof shows; SIZE must be that one's size (409 with the\n"
	"size otherwise), and a proof that fails (a forked log) gets 422.\n"
	"\n"
	"  --listen ADDR:PORT  where to listen (IPv4, or [IPv6]:PORT)\n"
	"  --key FILE          the witness's Ed25519 private key (airlock keygen)\n"
	"  --name NAME         its key name in cosignatures (e.g. witness.example/w1)\n"
	"  --state FILE        the last cosigned size and root per origin (JSON;\n"
	"                      made if missing)\n"
	"  --log-key FILE      a public key (SPKI PEM) that signs the checkpoints to\n"
	"                      witness: `airlock run --signing-key`'s; repeatable\n"
	"  -h, --help          print this help\n"
	"\n"
	"Runs until SIGTERM or SIGINT. Exit status: 0 stopped, 1 a failure, 2 usage.\n";

struct witness {
	EVP_PKEY *key;
	const char *name;
	const char *state_path;
	json_t *state;
	uint8_t log_keys[WITNESS_LOG_KEYS_MAX][32];
	size_t nlog_keys;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static int save_state(const struct witness *w)
{
	char *tmp = util_xasprintf("%s.tmp", w->state_path);
	char *text = json_dumps(w->state, JSON_COMPACT | JSON_SORT_KEYS);
	int fd, rc = -1;

	ASSERT(text);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0 && util_write_all(fd, text, strlen(text)) == 0 &&
	    util_write_all(fd, "\n", 1) == 0 && fsync(fd) == 0 && close(fd) == 0) {
		fd = -1;
		rc = rename(tmp, w->state_path);
	}
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(text);
	return rc;
}

/* An answer: @status and @body (malloc'd). */
struct answer {
	int status;
	char *body;
	const char *type;
};

static void answer(struct answer *a, int status, const char *type, char *body)
{
	a->status = status;
	a->type = type;
	a->body = body;
}

/* The request body of add-checkpoint: "old N", proof lines, "", note. */
void witness_add_checkpoint(struct witness *w, const char *body, size_t len,
			    uint64_t now, struct answer *a);
void witness_add_checkpoint(struct witness *w, const char *body, size_t len,
			    uint64_t now, struct answer *a)
{
	merkle_hash proof[MERKLE_PROOF_MAX], old_root;
	const char *p = body, *end = body + len, *nl;
	struct tlog_checkpoint c;
	uint64_t old, have = 0;
	size_t n = 0, i;
	char why[128], *cosig, *b64;
	json_t *entry;
	bool signed_ok = false;

	nl = memchr(p, '\n', len);
	if (!nl || (size_t)(nl - p) < 5 || strncmp(p, "old ", 4) != 0) {
		answer(a, 400, "text/plain", util_xstrdup("expected \"old SIZE\"\n"));
		return;
	}
	{
		char num[24];
		size_t nlen = (size_t)(nl - p - 4);
		unsigned long long v;
		char *e;

		if (nlen == 0 || nlen >= sizeof(num) || (p[4] == '0' && nlen > 1)) {
			answer(a, 400, "text/plain", util_xstrdup("bad old size\n"));
			return;
		}
		memcpy(num, p + 4, nlen);
		num[nlen] = '\0';
		errno = 0;
		v = strtoull(num, &e, 10);
		if (*e || errno || num[0] < '0' || num[0] > '9') {
			answer(a, 400, "text/plain", util_xstrdup("bad old size\n"));
			return;
		}
		old = v;
	}
	p = nl + 1;
	while (p < end && *p != '\n') {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || n == MERKLE_PROOF_MAX ||
		    tlog_unb64(p, (size_t)(nl - p), proof[n], MERKLE_HASH_LEN) !=
			    MERKLE_HASH_LEN) {
			answer(a, 400, "text/plain", util_xstrdup("bad consistency proof line\n"));
			return;
		}
		n++;
		p = nl + 1;
	}
	if (p >= end) {
		answer(a, 400, "text/plain", util_xstrdup("no checkpoint\n"));
		return;
	}
	p++;
	if (!tlog_checkpoint_parse(p, (size_t)(end - p), &c, why, sizeof(why))) {
		answer(a, 400, "text/plain", util_xasprintf("checkpoint: %s\n", why));
		return;
	}
	if (strncmp(c.origin, TLOG_ORIGIN_PREFIX, strlen(TLOG_ORIGIN_PREFIX)) != 0 ||
	    !tlog_key_name_valid(c.origin)) {
		answer(a, 404, "text/plain", util_xstrdup("unknown log (not airlock/SESSION)\n"));
		goto out;
	}
	for (i = 0; i < w->nlog_keys && !signed_ok; i++)
		signed_ok = tlog_note_verify(&c, c.origin, w->log_keys[i]);
	if (!signed_ok) {
		answer(a, 403, "text/plain", util_xstrdup("not signed by a --log-key\n"));
		goto out;
	}
	entry = json_object_get(w->state, c.origin);
	if (entry) {
		json_t *r = json_object_get(entry, "root");

		have = (uint64_t)json_integer_value(json_object_get(entry, "size"));
		if (!json_is_string(r) ||
		    tlog_unb64(json_string_value(r), json_string_length(r), old_root,
			       MERKLE_HASH_LEN) != MERKLE_HASH_LEN) {
			answer(a, 500, "text/plain", util_xstrdup("corrupt state\n"));
			goto out;
		}
	}
	if (old != have) {
		answer(a, 409, "text/x.tlog.size", util_xasprintf("%" PRIu64 "\n", have));
		goto out;
	}
	if (c.size < old) {
		answer(a, 400, "text/plain", util_xstrdup("the checkpoint is older than old\n"));
		goto out;
	}
	if (old > 0 && !merkle_verify_consistency(old, c.size, old_root, c.root, proof, n)) {
		answer(a, 422, "text/plain",
		       util_xstrdup("the consistency proof fails: not an extension of the "
				    "checkpoint cosigned before\n"));
		goto out;
	}
	if (old == 0 && n != 0) {
		answer(a, 422, "text/plain", util_xstrdup("a proof from size 0 is empty\n"));
		goto out;
	}
	b64 = tlog_b64(c.root, MERKLE_HASH_LEN);
	json_object_set_new(w->state, c.origin,
			    json_pack("{s:I, s:s}", "size", (json_int_t)c.size, "root", b64));
	free(b64);
	if (save_state(w) < 0) {
		answer(a, 500, "text/plain", util_xasprintf("state: %s\n", strerror(errno)));
		goto out;
	}
	cosig = tlog_cosign(w->key, w->name, c.body, now);
	if (!cosig)
		answer(a, 500, "text/plain", util_xstrdup("cannot sign\n"));
	else
		answer(a, 200, "text/x.tlog.signature", cosig);
out:
	tlog_checkpoint_free(&c);
}

static const char *status_text(int s)
{
	switch (s) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 422: return "Unprocessable Content";
	default: return "Internal Server Error";
	}
}

static void serve_one(struct witness *w, int fd)
{
	char *buf = util_xmalloc(WITNESS_BODY_MAX + 8192 + 1), *hend = NULL, *out;
	size_t have = 0, cap = WITNESS_BODY_MAX + 8192, clen = 0;
	struct answer a = { 0, NULL, NULL };
	struct timeval tv = { 10, 0 };
	ssize_t r;

	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		r = read(fd, buf + have, cap - have);
		if (r <= 0)
			goto done;
		have += (size_t)r;
		buf[have] = '\0';
		if (!hend && (hend = strstr(buf, "\r\n\r\n"))) {
			char *cl = strcasestr(buf, "\r\ncontent-length:");

			/* no Content-Length: no body */
			clen = cl && cl < hend ? strtoul(cl + 17, NULL, 10) : 0;
			if (clen > WITNESS_BODY_MAX) {
				answer(&a, 413, "text/plain", util_xstrdup("too large\n"));
				goto reply;
			}
		}
		if (hend && have >= (size_t)(hend + 4 - buf) + clen)
			break;
		if (have == cap)
			goto done;
	}
	if (strncmp(buf, "POST /add-checkpoint HTTP/1.", 28) != 0)
		answer(&a, strncmp(buf, "POST ", 5) == 0 ? 404 : 405, "text/plain",
		       util_xstrdup("POST /add-checkpoint only\n"));
	else
		witness_add_checkpoint(w, hend + 4, clen, (uint64_t)time(NULL), &a);
reply:
	out = util_xasprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			     "Connection: close\r\n\r\n%s",
			     a.status, status_text(a.status), a.type, strlen(a.body), a.body);
	(void)util_write_all(fd, out, strlen(out));
	free(out);
	free(a.body);
done:
	free(buf);
}

static int listen_on(const char *spec, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	const char *colon = strrchr(spec, ':');
	char host[64];
	unsigned long port;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (!colon || (size_t)(colon - spec) >= sizeof(host) ||
	    !util_parse_uint(colon + 1, 1, 65535, &port)) {
		snprintf(err, errlen, "--listen %s: expected ADDR:PORT", spec);
		return -1;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		host[strlen(host) - 1] = '\0';
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			goto bad;
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto bad;
		sl = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 16) < 0) {
		snprintf(err, errlen, "--listen %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
bad:
	snprintf(err, errlen, "--listen %s: not an IP address", spec);
	return -1;
}

__attribute__((format(printf, 1, 2))) static int wusage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "airlock: witness: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see airlock witness --help)\n");
	return 2;
}

int cmd_witness(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"key", required_argument, NULL, 'k'},
		{"name", required_argument, NULL, 'n'},
		{"state", required_argument, NULL, 's'},
		{"log-key", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct witness w;
	const char *listen_spec = NULL, *key_path = NULL;
	char err[512];
	struct sigaction sa;
	int c, lfd, rc = 2;

	memset(&w, 0, sizeof(w));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': listen_spec = optarg; break;
		case 'k': key_path = optarg; break;
		case 'n': w.name = optarg; break;
		case 's': w.state_path = optarg; break;
		case 'L': {
			EVP_PKEY *pk = receipt_pubkey_load(optarg, err, sizeof(err));

			if (!pk) {
				fprintf(stderr, "airlock: witness: --log-key %s: %s\n", optarg, err);
				goto out;
			}
			if (w.nlog_keys == WITNESS_LOG_KEYS_MAX) {
				EVP_PKEY_free(pk);
				rc = wusage("too many --log-key (at most %d)", WITNESS_LOG_KEYS_MAX);
				goto out;
			}
			ASSERT(receipt_key_raw_public(pk, w.log_keys[w.nlog_keys++]));
			EVP_PKEY_free(pk);
			break;
		}
		case 'h':
			fputs(cmd_witness_help, stdout);
			rc = 0;
			goto out;
		case ':':
			rc = wusage("%s needs an argument", argv[optind - 1]);
			goto out;
		default:
			rc = wusage("unknown option '%s'", argv[optind - 1]);
			goto out;
		}
	}
	if (optind != argc) {
		rc = wusage("unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (!listen_spec || !key_path || !w.name || !w.state_path || !w.nlog_keys) {
		rc = wusage("%s", "--listen, --key, --name, --state and --log-key are required");
		goto out;
	}
	if (!tlog_key_name_valid(w.name)) {
		rc = wusage("--name %s: a key name is printable ASCII without spaces or '+'",
			    w.name);
		goto out;
	}
	w.key = receipt_key_load(key_path, err, sizeof(err));
	if (!w.key) {
		fprintf(stderr, "airlock: witness: --key %s: %s\n", key_path, err);
		goto out;
	}
	{
		json_error_t jerr;
		FILE *f = fopen(w.state_path, "re");

		if (f) {
			w.state = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
			fclose(f);
			if (!json_is_object(w.state)) {
				fprintf(stderr, "airlock: witness: --state %s: not a JSON object\n",
					w.state_path);
				rc = 1;
				goto out;
			}
		} else if (errno == ENOENT) {
			w.state = json_object();
		} else {
			fprintf(stderr, "airlock: witness: --state %s: %s\n", w.state_path,
				strerror(errno));
			rc = 1;
			goto out;
		}
	}
	lfd = listen_on(listen_spec, err, sizeof(err));
	if (lfd < 0) {
		fprintf(stderr, "airlock: witness: %s\n", err);
		rc = 1;
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "airlock witness: listening on %s\n", listen_spec);
	while (!stopping) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0)
			continue;
		serve_one(&w, cfd);
		close(cfd);
	}
	close(lfd);
	rc = 0;
out:
	json_decref(w.state);
	EVP_PKEY_free(w.key);
	return rc;
}
