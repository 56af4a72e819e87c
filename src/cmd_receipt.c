/* SPDX-License-Identifier: Apache-2.0
 * cmd_receipt.c - `airlock verify` and `airlock keygen`, thin command-line
 * front ends to receipt.c.
 *
 * Exit statuses: 0 success; 1 the stream is not intact (verify) or the key
 * could not be written (keygen); 2 a usage error, or a stream or key file
 * that cannot be read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "receipt.h"
#include "receipt_proof.h"
#include "runfiles.h"
#include "util.h"

#define EXIT_NOT_INTACT 1
#define EXIT_USAGE 2

const char cmd_verify_help[] =
	"usage: airlock verify [--pubkey FILE] [--witness FILE] [--json] EVENTS\n"
	"       airlock verify --line SEQ|all EVENTS\n"
	"       airlock verify [--pubkey FILE] --proof FILE\n"
	"\n"
	"Verifies a receipt stream: each line's members and formats, the seq\n"
	"numbers, the SHA-256 chain (prev), every Ed25519 signature, and that\n"
	"each session starts with session.start (or session.refused, for one\n"
	"that could not start) and ends with a session.end whose counts match\n"
	"the lines; the policy digest changes only at a policy.reload line.\n"
	"EVENTS is a file, which may hold several\n"
	"sessions one after the other, or - for standard input.\n"
	"\n"
	"  --pubkey FILE  the signer's public key (PEM SubjectPublicKeyInfo, as\n"
	"                 `airlock keygen` prints it): every line must be signed\n"
	"                 by it (the key is pinned). Without --pubkey each session\n"
	"                 is checked against the key named in its own\n"
	"                 session.start, which proves integrity but not who wrote\n"
	"                 it; verify then says so and prints the fingerprint of\n"
	"                 each such key, to compare with the one `airlock run`\n"
	"                 printed.\n"
	"  --json         print one JSON object instead of text:\n"
	"                 {\"ok\":true,\"lines\":N,\"sessions\":N,\"counts\":{...}} or\n"
	"                 {\"ok\":false,\"line\":N,\"reason\":\"...\"}\n"
	"  --witness FILE a witness's public key (SPKI PEM): each session.end must\n"
	"                 carry its cosignature (C2SP cosignature/v1) on the\n"
	"                 checkpoint just before it (airlock run --witness)\n"
	"  --line SEQ     print the inclusion proof (one JSON line) of the line with\n"
	"                 seq SEQ of the last session in EVENTS against its last\n"
	"                 receipt.checkpoint (receipts.sign \"checkpoint\"); \"all\":\n"
	"                 the proofs of every line that checkpoint covers, one a\n"
	"                 line. EVENTS must verify first.\n"
	"  --proof FILE   check proofs (as --line prints them) without the stream:\n"
	"                 the checkpoint's signature, the line's seq and session,\n"
	"                 and the Merkle path from the line to the checkpoint's root\n"
	"  -h, --help     print this help\n"
	"\n"
	"Intact: prints \"ok: ...\", the number of lines of each type and whether\n"
	"the key was pinned, exit 0.\n"
	"Not intact: prints \"EVENTS:LINE: reason\" for the first bad line, exit 1.\n"
	"A usage error, or a file or key that cannot be read: exit 2.\n";

const char cmd_keygen_help[] =
	"usage: airlock keygen --out FILE [--force]\n"
	"\n"
	"Makes an Ed25519 signing key for `airlock run --signing-key` and\n"
	"`airlock proxy --signing-key`. Writes the private key to FILE (PKCS#8\n"
	"PEM, mode 0600) and prints the public key on standard output (PEM\n"
	"SubjectPublicKeyInfo), the form `airlock verify --pubkey` reads.\n"
	"\n"
	"  --out FILE  where to write the private key; an existing FILE is\n"
	"              refused\n"
	"  --force     replace an existing FILE (atomically, by rename)\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 written, 1 the key could not be written, 2 usage error.\n";

__attribute__((format(printf, 2, 3))) static int usage(const char *cmd,
							 const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "airlock: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see airlock %s --help)\n", cmd);
	return EXIT_USAGE;
}

/* The argument that getopt_long() just rejected, for the message. */
static const char *bad_option(char **argv, char *buf, size_t len)
{
	if (optopt) {
		snprintf(buf, len, "-%c", optopt);
		return buf;
	}
	return argv[optind - 1];
}

static bool has_string(json_t *array, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach(array, i, v)
		if (strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/* The fingerprints of the keys the session.start (or session.refused)
 * lines of @in name, in order, without repeats; NULL when @in cannot be
 * read again from its start (standard input). Only called on a stream
 * that verified. */
static json_t *stream_keys(FILE *in)
{
	json_t *keys = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (fseek(in, 0, SEEK_SET) != 0)
		return NULL;
	keys = json_array();
	ASSERT(keys);
	while ((n = getline(&line, &cap, in)) > 0) {
		char fp[RUNFILES_FINGERPRINT_LEN];
		const char *b64;
		json_t *j;

		if ((size_t)n > RECEIPT_LINE_MAX + 1 || !strstr(line, "\"seq\":0,"))
			continue;
		j = json_loadb(line, (size_t)n, 0, NULL);
		b64 = json_string_value(json_object_get(json_object_get(j, "subject"), "pubkey"));
		if (b64 && runfiles_fingerprint(b64, fp) && !has_string(keys, fp))
			json_array_append_new(keys, json_string(fp));
		json_decref(j);
	}
	free(line);
	return keys;
}

/* Says whether the key was pinned: without --pubkey the stream proves only
 * that it was not altered after it was written, not who wrote it. */
static void print_key(FILE *in, const char *pubkey_path)
{
	json_t *keys, *k;
	size_t i;

	if (pubkey_path) {
		printf("key pinned: every line is signed by the key of %s\n", pubkey_path);
		return;
	}
	printf("integrity only: the key was not pinned (give --pubkey): the stream "
	       "is intact, but not proven to be written by a key you trust\n");
	keys = stream_keys(in);
	json_array_foreach(keys, i, k) {
		if (i == 8) {
			printf("  and %zu more keys\n", json_array_size(keys) - i);
			break;
		}
		printf("  key %s\n", json_string_value(k));
	}
	json_decref(keys);
}

static void print_text(const struct receipt_verify_result *res,
		       const char *pubkey_path)
{
	const char *type;
	size_t width = 0;
	json_t *val;

	printf("ok: %zu line%s, %zu session%s, chain and signatures intact "
	       "(key: %s%s)\n",
	       res->lines, res->lines == 1 ? "" : "s", res->sessions,
	       res->sessions == 1 ? "" : "s",
	       pubkey_path ? "--pubkey " : "from session.start",
	       pubkey_path ? pubkey_path : "");
	json_object_foreach(res->counts, type, val)
		if (strlen(type) > width)
			width = strlen(type);
	json_object_foreach(res->counts, type, val)
		printf("  %-*s %lld\n", (int)width + 2, type,
		       (long long)json_integer_value(val));
}

static void print_json(const struct receipt_verify_result *res)
{
	json_t *out;
	char *s;

	if (res->ok)
		out = json_pack("{s:b, s:I, s:I, s:O}", "ok", 1, "lines",
				(json_int_t)res->lines, "sessions",
				(json_int_t)res->sessions, "counts", res->counts);
	else
		out = json_pack("{s:b, s:I, s:s}", "ok", 0, "line",
				(json_int_t)res->bad_line, "reason", res->reason);
	ASSERT(out);
	s = json_dumps(out, JSON_COMPACT);
	ASSERT(s);
	puts(s);
	free(s);
	json_decref(out);
}

/* --line SEQ|all EVENTS, or --proof FILE (@line NULL). */
static int proofs(const char *path, const char *line, EVP_PKEY *pin)
{
	char err[512], *text;
	unsigned long seq = 0;
	size_t len, bad_line;
	int rc;

	if (line && strcmp(line, "all") != 0 &&
	    !util_parse_uint(line, 0, (unsigned long)INT64_MAX, &seq))
		return usage("verify", "--line needs a seq number or \"all\"");
	text = util_read_file(path, (size_t)1 << 34, &len);
	if (!text) {
		fprintf(stderr, "airlock: verify: %s: %s\n", path, strerror(errno));
		return EXIT_USAGE;
	}
	if (line) {
		rc = receipt_proof_make(text, len, strcmp(line, "all") == 0 ? -1 : (int64_t)seq,
					stdout, err, sizeof(err));
		if (rc < 0)
			printf("%s: %s\n", path, err);
	} else {
		rc = receipt_proof_check(text, len, pin, stdout, &bad_line, err, sizeof(err));
		if (rc < 0)
			printf("%s:%zu: %s\n", path, bad_line, err);
	}
	free(text);
	if (fflush(stdout) != 0)
		return EXIT_USAGE;
	return rc < 0 ? EXIT_NOT_INTACT : 0;
}

int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pubkey", required_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'j'},
		{"line", required_argument, NULL, 'l'},
		{"witness", required_argument, NULL, 'w'},
		{"proof", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct receipt_verify_result res = {0};
	const char *pubkey_path = NULL, *events, *line_arg = NULL, *proof_path = NULL;
	const char *witness_path = NULL;
	EVP_PKEY *witness = NULL;
	char err[256], opt[3];
	EVP_PKEY *pin = NULL;
	bool json = false;
	FILE *in = NULL;
	int c, r, rc = EXIT_USAGE;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			pubkey_path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'l':
			line_arg = optarg;
			break;
		case 'w':
			witness_path = optarg;
			break;
		case 'p':
			proof_path = optarg;
			break;
		case 'h':
			fputs(cmd_verify_help, stdout);
			rc = 0;
			goto out;
		case ':':
			rc = usage("verify", "%s needs an argument", argv[optind - 1]);
			goto out;
		default:
			rc = usage("verify", "unknown option '%s'",
				   bad_option(argv, opt, sizeof(opt)));
			goto out;
		}
	}
	if (proof_path) {
		if (argc != optind || line_arg || json) {
			rc = usage("verify", "--proof FILE takes no EVENTS, --line or --json");
			goto out;
		}
	} else if (argc - optind != 1) {
		rc = usage("verify", "expected one EVENTS file (or - for stdin)");
		goto out;
	}
	if (line_arg && (json || pubkey_path)) {
		rc = usage("verify", "--line takes no --json or --pubkey");
		goto out;
	}
	events = proof_path ? proof_path : argv[optind];
	if (pubkey_path) {
		pin = receipt_pubkey_load(pubkey_path, err, sizeof(err));
		if (!pin) {
			fprintf(stderr, "airlock: verify: --pubkey %s: %s\n",
				pubkey_path, err);
			goto out;
		}
	}
	if (line_arg || proof_path) {
		rc = proofs(events, line_arg, pin);
		goto out;
	}
	if (witness_path) {
		witness = receipt_pubkey_load(witness_path, err, sizeof(err));
		if (!witness) {
			fprintf(stderr, "airlock: verify: --witness %s: %s\n", witness_path, err);
			goto out;
		}
		receipt_verify_set_witness(witness);
	}
	in = strcmp(events, "-") == 0 ? stdin : fopen(events, "re");
	if (!in) {
		fprintf(stderr, "airlock: verify: %s: %s\n", events, strerror(errno));
		goto out;
	}
	r = receipt_verify_file(in, pin, &res);
	if (r < 0) {
		fprintf(stderr, "airlock: verify: %s: %s\n", events, strerror(-r));
		goto out;
	}
	if (json)
		print_json(&res);
	else if (res.ok) {
		print_text(&res, pubkey_path);
		if (witness_path)
			printf("witnessed: each session.end carries a cosignature by the "
			       "key of %s\n", witness_path);
		print_key(in, pubkey_path);
	} else
		printf("%s:%zu: %s\n", events, res.bad_line, res.reason);
	rc = res.ok ? 0 : EXIT_NOT_INTACT;
	if (fflush(stdout) != 0) {
		fprintf(stderr, "airlock: verify: standard output: %s\n",
			strerror(errno));
		rc = EXIT_USAGE;
	}
out:
	if (in && in != stdin)
		fclose(in);
	receipt_verify_result_free(&res);
	receipt_verify_set_witness(NULL);
	EVP_PKEY_free(witness);
	EVP_PKEY_free(pin);
	return rc;
}

int cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
		{"out", required_argument, NULL, 'o'},
		{"force", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *out_path = NULL;
	char err[256], opt[3];
	bool force = false;
	int c, rc = EXIT_USAGE;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out_path = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			fputs(cmd_keygen_help, stdout);
			rc = 0;
			goto out;
		case ':':
			rc = usage("keygen", "--out needs a FILE");
			goto out;
		default:
			rc = usage("keygen", "unknown option '%s'",
				   bad_option(argv, opt, sizeof(opt)));
			goto out;
		}
	}
	if (optind != argc) {
		rc = usage("keygen", "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (!out_path || !*out_path) {
		rc = usage("keygen", "--out FILE is required");
		goto out;
	}
	if (receipt_keygen(out_path, force, stdout, err, sizeof(err)) < 0) {
		fprintf(stderr, "airlock: keygen: %s: %s\n", out_path, err);
		rc = EXIT_NOT_INTACT;
		goto out;
	}
	rc = 0;
out:
	return rc;
}
