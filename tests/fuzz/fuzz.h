/* SPDX-License-Identifier: Apache-2.0
 * fuzz.h - shared by the libFuzzer targets: the entry point's prototype and
 * CHECK(), an invariant that aborts (so libFuzzer saves the input).
 */
#ifndef AIRLOCK_FUZZ_H
#define AIRLOCK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                          \
			abort();                                           \
		}                                                          \
	} while (0)

#endif /* AIRLOCK_FUZZ_H */
