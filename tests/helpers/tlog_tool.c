/* SPDX-License-Identifier: Apache-2.0
 * tlog_tool - drives the receipt writer and the key holder directly, for
 * the transparency-log tests (tests/integration/21-tlog.t) and the
 * key holder's benchmark (bench/tlog):
 *
 *   tlog_tool stream MODE SESSION N OUT [KEYFILE]
 *       writes a stream of N lines (session.start, N-2 egress lines,
 *       session.end; MODE line or checkpoint, a checkpoint after every
 *       1000 unsigned lines and after each block: every 7th line is one)
 *       to OUT with the writer of the key holder (a fresh key, or KEYFILE)
 *   tlog_tool bench MODE N OUT [PER_TURN]
 *       starts a real key holder (keeper.c) writing to OUT, sends it N
 *       egress.allow records as a proxy worker does (PER_TURN > 0: its
 *       link batching them, flushed every PER_TURN records as a worker
 *       flushes once a turn of its loop; 0 or none: one message each),
 *       ends the session and
 *       prints the key holder's CPU time: "cpu_us_per_receipt X user_us U
 *       sys_us S receipts N"
 *   tlog_tool cosign KEYFILE NAME TIME
 *       reads a checkpoint note on stdin and prints it with a C2SP
 *       cosignature/v1 line by witness NAME (key KEYFILE) at TIME added
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper.h"
#include "tlog.h"
#include "policy.h"
#include "receipt.h"
#include "util.h"

#define POLICY_DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static enum receipt_sign mode_of(const char *s)
{
	if (strcmp(s, "line") == 0)
		return RECEIPT_SIGN_LINE;
	if (strcmp(s, "checkpoint") == 0)
		return RECEIPT_SIGN_CHECKPOINT;
	fprintf(stderr, "tlog_tool: MODE is line or checkpoint\n");
	exit(2);
}

static json_t *egress_subject(long i)
{
	json_t *s = json_pack("{s:s, s:i, s:s, s:s, s:s}", "host", "api.example.com",
			      "port", 443, "address", "192.0.2.7", "method", "GET",
			      "path", "/v1/items");

	json_object_set_new(s, "n", json_integer(i));
	return s;
}

static int stream(int argc, char **argv)
{
	char err[256], pub[64];
	struct receipt_writer *w;
	long n, i, unsigned_run = 0;
	EVP_PKEY *key;
	json_t *subj;

	if (argc < 6)
		return 2;
	n = strtol(argv[4], NULL, 10);
	key = argc > 6 ? receipt_key_load(argv[6], err, sizeof(err)) : receipt_key_generate();
	if (!key || !receipt_pubkey_b64(key, pub, sizeof(pub))) {
		fprintf(stderr, "tlog_tool: key: %s\n", err);
		return 1;
	}
	w = receipt_open(argv[5], key, argv[3], POLICY_DIGEST, err, sizeof(err));
	if (!w || receipt_set_sign_mode(w, mode_of(argv[2])) < 0) {
		fprintf(stderr, "tlog_tool: %s: %s\n", argv[5], w ? "bad mode" : err);
		return 1;
	}
	subj = json_pack("{s:s, s:s}", "mode", "enforce", "pubkey", pub);
	receipt_append(w, "session.start", RECEIPT_INFO, RECEIPT_POINT_SUPERVISOR, "session",
		       subj, "session started");
	json_decref(subj);
	for (i = 1; i + 1 < n; i++) {
		bool block = i % 7 == 0;

		subj = egress_subject(i);
		if (receipt_append(w, block ? "egress.block" : "egress.allow",
				   block ? RECEIPT_BLOCK : RECEIPT_ALLOW,
				   RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]", subj,
				   block ? "not allowed" : "allowed") < 0)
			return 1;
		json_decref(subj);
		if (receipt_unsigned_pending(w) && (block || ++unsigned_run >= 1000)) {
			if (receipt_checkpoint(w) < 0)
				return 1;
			unsigned_run = 0;
			i++; /* the checkpoint is a line of the N */
		}
	}
	if (receipt_close(w, 0) < 0) {
		perror("tlog_tool: close");
		return 1;
	}
	EVP_PKEY_free(key);
	return 0;
}

static int bench(int argc, char **argv)
{
	struct keeper_config kc = { 0 };
	struct keeper k;
	struct keeper_link *l;
	struct rusage ru;
	char err[256];
	long n, i, per_turn;
	int64_t seq;
	json_t *subj;
	double user, sys;
	int wfd;

	if (argc < 5)
		return 2;
	n = strtol(argv[3], NULL, 10);
	kc.events = argv[4];
	per_turn = argc > 5 ? strtol(argv[5], NULL, 10) : 0;
	kc.session = "bench-session";
	kc.policy_digest = POLICY_DIGEST;
	kc.sign_checkpoint = mode_of(argv[2]) == RECEIPT_SIGN_CHECKPOINT;
	kc.checkpoint_ms = 250;
	if (keeper_start(&kc, &k, err, sizeof(err)) < 0 ||
	    keeper_wait_ready(&k, err, sizeof(err)) < 0) {
		fprintf(stderr, "tlog_tool: %s\n", err);
		return 1;
	}
	subj = json_pack("{s:s, s:s}", "mode", "enforce", "pubkey", k.pubkey);
	if (keeper_record(&k.link, true, "session.start", RECEIPT_INFO,
			  RECEIPT_POINT_SUPERVISOR, "session", subj, "started", &seq) < 0)
		return 1;
	json_decref(subj);
	if (keeper_new_channel(&k, &wfd) < 0)
		return 1;
	l = util_xcalloc(1, sizeof(*l));
	l->fd = wfd;
	/* as a worker's link: the records of a turn of its loop in one
	 * message, @per_turn records a turn */
	l->batching = per_turn > 0;
	for (i = 0; i < n; i++) {
		subj = egress_subject(i);
		if (keeper_record(l, false, "egress.allow", RECEIPT_ALLOW,
				  RECEIPT_POINT_EGRESS_PROXY, "egress.allow[0]", subj,
				  "allowed", &seq) < 0 ||
		    (per_turn > 0 && (i + 1) % per_turn == 0 && keeper_link_flush(l) < 0)) {
			fprintf(stderr, "tlog_tool: record failed\n");
			return 1;
		}
		json_decref(subj);
	}
	keeper_link_close(l);
	free(l);
	if (keeper_end(&k, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "tlog_tool: %s\n", err);
		return 1;
	}
	keeper_release(&k);
	getrusage(RUSAGE_CHILDREN, &ru);
	user = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec;
	sys = (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
	printf("cpu_us_per_receipt %.2f user_us %.0f sys_us %.0f receipts %ld\n",
	       (user + sys) / (double)n, user, sys, n);
	return 0;
}

static int cosign(int argc, char **argv)
{
	char err[256], note[8192], *line;
	struct tlog_checkpoint c;
	EVP_PKEY *key;
	size_t n;

	if (argc < 5)
		return 2;
	key = receipt_key_load(argv[2], err, sizeof(err));
	n = fread(note, 1, sizeof(note) - 1, stdin);
	note[n] = '\0';
	if (!key || !tlog_checkpoint_parse(note, n, &c, err, sizeof(err))) {
		fprintf(stderr, "tlog_tool: %s\n", err);
		return 1;
	}
	line = tlog_cosign(key, argv[3], c.body, strtoull(argv[4], NULL, 10));
	if (!line)
		return 1;
	printf("%s%s", note, line);
	free(line);
	tlog_checkpoint_free(&c);
	EVP_PKEY_free(key);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "cosign") == 0)
		return cosign(argc, argv);
	if (argc > 1 && strcmp(argv[1], "stream") == 0)
		return stream(argc, argv);
	if (argc > 1 && strcmp(argv[1], "bench") == 0)
		return bench(argc, argv);
	fprintf(stderr, "usage: tlog_tool stream MODE SESSION N OUT [KEYFILE] | "
		"bench MODE N OUT [PER_TURN]\n");
	return 2;
}
