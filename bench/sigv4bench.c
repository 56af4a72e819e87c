/* SPDX-License-Identifier: Apache-2.0
 * sigv4bench.c - the CPU the broker adds to one AWS request of a secret of
 * kind aws (bench/sigv4): sigv4_resign_head() (verify with the placeholder
 * secret, sign with the real one) on an S3 PUT with UNSIGNED-PAYLOAD, an
 * STS call whose body's hash is signed, and the chunk signatures of a
 * signed aws-chunked upload (per 64 KiB chunk), beside what signing the
 * request once costs a client and hashing 64 KiB, each timed in CPU time
 * (CLOCK_PROCESS_CPUTIME_ID) over many rounds. Prints one line per case:
 * "NAME ROUNDS us_per_op".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigv4.h"
#include "util.h"

#define PH_KEY "ASIAPLACEHOLDER12345"
#define PH_SECRET "placeholderSecret/0123456789+abcdefghijK"
#define DATE "20260101"
#define AMZ "20260101T000000Z"

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char token_ph[801], token_re[801];

static struct sigv4_creds ph = { PH_KEY, PH_SECRET, sizeof(PH_SECRET) - 1, token_ph };
static struct sigv4_creds re = { "ASIAREALKEY000000001", "realSecretAccessKey/0123456789+abcdefghi",
				 40, token_re };

/* Signs @m (Authorization at @ai) with the placeholder, as a client would. */
static void client_sign(struct sigv4_msg *m, struct sigv4_field *f, size_t ai, const char *svc,
			const char *sh, const char *payload, char *auth, size_t len, char *seed)
{
	struct buf c = { 0 };
	uint8_t key[32];
	char sig[SIGV4_HEX_LEN + 1], scope[96];

	(void)sigv4_canonical_request(m, sh, payload, strcmp(svc, "s3") == 0, &c);
	sigv4_signing_key(PH_SECRET, strlen(PH_SECRET), DATE, "us-east-1", svc, key);
	snprintf(scope, sizeof(scope), DATE "/us-east-1/%s/aws4_request", svc);
	sigv4_sign(key, AMZ, scope, c.data, c.len, sig);
	snprintf(auth, len, "AWS4-HMAC-SHA256 Credential=" PH_KEY "/%s, SignedHeaders=%s, "
		 "Signature=%s", scope, sh, sig);
	f[ai].value = auth;
	if (seed)
		memcpy(seed, sig, SIGV4_HEX_LEN + 1);
	buf_free(&c);
}

static void run(const char *name, struct sigv4_msg *m, const char *hash, long rounds)
{
	struct sigv4_resign rs;
	double t0 = cpu_now(), t;
	long i;

	for (i = 0; i < rounds; i++) {
		if (sigv4_resign_head(m, hash, &ph, &re, &rs) != SIGV4_OK) {
			fprintf(stderr, "%s: does not verify\n", name);
			exit(1);
		}
		sigv4_resign_free(&rs);
	}
	t = cpu_now() - t0;
	printf("%s %ld %.2f\n", name, rounds, t / (double)rounds * 1e6);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 20000;
	char auth[2048], auth2[2048], seed[SIGV4_HEX_LEN + 1], hash[SIGV4_HEX_LEN + 1];
	const char *body = "Action=GetCallerIdentity&Version=2011-06-15";
	struct sigv4_field put[] = {
		{ "Host", "bkt.s3.us-east-1.amazonaws.com" },
		{ "User-Agent", "aws-cli/2.9.19 Python/3.11.2 Linux source/x86_64 command/s3.cp" },
		{ "Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==" },
		{ "Expect", "100-continue" },
		{ "X-Amz-Date", AMZ },
		{ "X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD" },
		{ "X-Amz-Security-Token", token_ph },
		{ "Content-Length", "1048576" },
		{ "Authorization", "" },
	};
	struct sigv4_field sts[] = {
		{ "Host", "sts.us-east-1.amazonaws.com" },
		{ "Content-Type", "application/x-www-form-urlencoded; charset=utf-8" },
		{ "X-Amz-Date", AMZ },
		{ "X-Amz-Security-Token", token_ph },
		{ "Content-Length", "43" },
		{ "Authorization", "" },
	};
	struct sigv4_msg mput = { "PUT", "/up.bin", NULL, put, 9 };
	struct sigv4_msg msts = { "POST", "/", NULL, sts, 6 };
	struct sigv4_resign rs;
	struct buf chunked = { 0 };
	char *data;
	double t0, t;
	long i, nchunks = 16;

	memset(token_ph, 'P', sizeof(token_ph) - 1);
	memset(token_re, 'R', sizeof(token_re) - 1);
	/* the floor: signing it once, what the client itself does */
	t0 = cpu_now();
	for (i = 0; i < rounds; i++)
		client_sign(&mput, put, 8, "s3",
			    "content-md5;host;x-amz-content-sha256;x-amz-date;x-amz-security-token",
			    "UNSIGNED-PAYLOAD", auth, sizeof(auth), NULL);
	t = cpu_now() - t0;
	printf("client-signs-s3-put %ld %.2f\n", rounds, t / (double)rounds * 1e6);
	run("s3-put-unsigned-payload", &mput, NULL, rounds);
	sigv4_sha256_hex(body, strlen(body), hash);
	client_sign(&msts, sts, 5, "sts", "content-type;host;x-amz-date;x-amz-security-token",
		    hash, auth2, sizeof(auth2), NULL);
	run("sts-body-hash", &msts, hash, rounds);

	/* aws-chunked: 16 chunks of 64 KiB re-signed, per chunk */
	put[5].value = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
	client_sign(&mput, put, 8, "s3",
		    "content-md5;host;x-amz-content-sha256;x-amz-date;x-amz-security-token",
		    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", auth, sizeof(auth), seed);
	data = util_xmalloc(65536);
	memset(data, 'a', 65536);
	{
		uint8_t key[32];
		char prev[SIGV4_HEX_LEN + 1];

		sigv4_signing_key(PH_SECRET, strlen(PH_SECRET), DATE, "us-east-1", "s3", key);
		memcpy(prev, seed, sizeof(prev));
		for (i = 0; i <= nchunks; i++) {
			size_t n = i < nchunks ? 65536 : 0;

			sigv4_chunk_sign(key, AMZ, DATE "/us-east-1/s3/aws4_request", prev, data, n,
					 prev);
			buf_printf(&chunked, "%zx;chunk-signature=%s\r\n", n, prev);
			buf_append(&chunked, data, n);
			buf_puts(&chunked, "\r\n");
		}
	}
	rounds = rounds / 100 > 10 ? rounds / 100 : 10;
	t0 = cpu_now();
	for (i = 0; i < rounds; i++) {
		char *copy = util_xmalloc(chunked.len);

		memcpy(copy, chunked.data, chunked.len);
		if (sigv4_resign_head(&mput, NULL, &ph, &re, &rs) != SIGV4_OK ||
		    sigv4_resign_chunks(&rs, copy, chunked.len) != SIGV4_OK) {
			fprintf(stderr, "chunks: do not verify\n");
			return 1;
		}
		sigv4_resign_free(&rs);
		free(copy);
	}
	t = cpu_now() - t0;
	printf("aws-chunked-per-64KiB-chunk %ld %.2f\n", rounds * (nchunks + 1),
	       t / (double)(rounds * (nchunks + 1)) * 1e6);
	/* the floor: SHA-256 of the 64 KiB a client hashes anyway */
	t0 = cpu_now();
	for (i = 0; i < rounds * (nchunks + 1); i++)
		sigv4_sha256_hex(data, 65536, hash);
	t = cpu_now() - t0;
	printf("sha256-of-64KiB %ld %.2f\n", rounds * (nchunks + 1),
	       t / (double)(rounds * (nchunks + 1)) * 1e6);
	free(data);
	buf_free(&chunked);
	return 0;
}
