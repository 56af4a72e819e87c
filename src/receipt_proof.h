/* SPDX-License-Identifier: Apache-2.0
 * receipt_proof.h - inclusion proofs of receipt lines against a stream's
 * last checkpoint (receipt_proof.c, docs/RECEIPTS.md).
 */
#ifndef AIRLOCK_RECEIPT_PROOF_H
#define AIRLOCK_RECEIPT_PROOF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "receipt.h"

/* Verifies the stream of @len bytes at @text, then prints to @out the
 * proof (one JSON line) of the line with seq @seq of its last session
 * against that session's last receipt.checkpoint; @seq -1: the proofs of
 * every line that checkpoint covers, one a line. Returns 0, or -1 with
 * the reason in @err (a stream that does not verify, no checkpoint, a
 * seq the checkpoint does not cover). */
int receipt_proof_make(const char *text, size_t len, int64_t seq, FILE *out,
		       char *err, size_t errlen);

/* Checks every proof (one JSON object a line) of @text; @pin (or NULL)
 * must be the signer. Returns 0 and prints "ok: ..." to @out, or -1 with
 * the 1-based line of the first bad proof in *@bad_line and why in @why. */
int receipt_proof_check(const char *text, size_t len, EVP_PKEY *pin, FILE *out,
			size_t *bad_line, char *why, size_t whylen);

#endif /* AIRLOCK_RECEIPT_PROOF_H */
