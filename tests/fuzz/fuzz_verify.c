/* SPDX-License-Identifier: Apache-2.0
 * fuzz_verify.c - libFuzzer target for receipt_verify_buffer(): arbitrary
 * bytes as an events file, verified without and with a pinned key, and
 * through the chunked file reader, which must reach the same verdict.
 *
 * The committed corpus was signed with the key derived from fuzz_seed, so
 * mutations of it get past the signature with the pinned key too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "receipt.h"
#include "util.h"

static const uint8_t fuzz_seed[32] = {
	1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};

static EVP_PKEY *pinned_key(void)
{
	static EVP_PKEY *pin;
	uint8_t raw[32];
	size_t len = sizeof(raw);
	EVP_PKEY *priv;

	if (pin)
		return pin;
	priv = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, fuzz_seed,
					    sizeof(fuzz_seed));
	ASSERT(priv && EVP_PKEY_get_raw_public_key(priv, raw, &len) == 1);
	pin = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, len);
	ASSERT(pin);
	EVP_PKEY_free(priv);
	return pin;
}

static void check_result(const struct receipt_verify_result *r, size_t size)
{
	ASSERT(r->ok == (r->bad_line == 0));
	ASSERT(r->ok || (r->bad_line >= 1 && r->reason[0] != '\0'));
	ASSERT(!r->ok || (r->sessions >= 1 && r->lines >= 2 * r->sessions));
	ASSERT(r->lines <= size + 1);
	ASSERT(json_is_object(r->counts));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct receipt_verify_result open_res, pin_res, file_res;

	receipt_verify_buffer((const char *)data, size, NULL, &open_res);
	check_result(&open_res, size);
	receipt_verify_buffer((const char *)data, size, pinned_key(), &pin_res);
	check_result(&pin_res, size);
	ASSERT(!pin_res.ok || open_res.ok);
	if (size > 0) {
		FILE *f = fmemopen((void *)data, size, "r");

		ASSERT(f);
		ASSERT(receipt_verify_file(f, NULL, &file_res) == 0);
		fclose(f);
		ASSERT(file_res.ok == open_res.ok &&
		       file_res.bad_line == open_res.bad_line &&
		       file_res.lines == open_res.lines &&
		       strcmp(file_res.reason, open_res.reason) == 0);
		receipt_verify_result_free(&file_res);
	}
	receipt_verify_result_free(&pin_res);
	receipt_verify_result_free(&open_res);
	return 0;
}
