/* SPDX-License-Identifier: Apache-2.0
 * witness_client.h - asks a C2SP tlog-witness (`airlock witness`) to
 * cosign a receipt checkpoint (`airlock run --witness URL=KEYFILE`).
 */
#ifndef AIRLOCK_WITNESS_CLIENT_H
#define AIRLOCK_WITNESS_CLIENT_H

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"

/* Splits "URL=KEYFILE" (at the last '=') and checks both: an http:// URL
 * and the witness's public key (SPKI PEM). Returns the key, *@url a
 * malloc'd copy of the URL; NULL with a reason in @err. */
EVP_PKEY *witness_spec_parse(const char *spec, char **url, char *err, size_t errlen);

/* POSTs @note (a checkpoint the witness has not seen: old size 0) to
 * URL/add-checkpoint and returns the cosignature line(s) of the answer
 * that verify with @pub (malloc'd), or NULL with a reason in @err. */
char *witness_cosign(const char *url, EVP_PKEY *pub, const char *note, char *err,
		     size_t errlen);

/* The same for a checkpoint that extends the one of @old leaves the
 * witness cosigned last, with the consistency proof @proof (@nproof
 * hashes). On a 409 (the witness has another size), *@has (when not NULL)
 * receives the size it has; UINT64_MAX otherwise. */
char *witness_cosign_from(const char *url, EVP_PKEY *pub, uint64_t old,
			  const merkle_hash *proof, size_t nproof, const char *note,
			  uint64_t *has, char *err, size_t errlen);

/* Resolves the witness's host now for the requests to come
 * (util_tcp_pin()): 0, or -1 with a reason in @err. */
int witness_url_pin(const char *url, char *err, size_t errlen);

#endif /* AIRLOCK_WITNESS_CLIENT_H */
