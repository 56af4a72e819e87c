/* SPDX-License-Identifier: Apache-2.0
 * fuzz_gitfilter.c - libFuzzer target for gitfilter_subst_auth(): an
 * Authorization value from the agent, in which the git token's
 * placeholder may become the token.
 *
 * Input layout: the Authorization value (up to the first NUL, as a header
 * value arrives: a NUL-terminated copy).
 *
 * Invariants (abort() on failure, so libFuzzer keeps the input):
 *  - a value is returned only when the input holds the placeholder in
 *    one of the three forms, and then it is that form with the token:
 *    "SCHEME TOKEN" for Bearer/token (the scheme as written), or
 *    "Basic " + base64(USER ":" TOKEN) with the input's USER;
 *  - the placeholder never survives into the output;
 *  - the answer is the same on a second call.
 */
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "gitfilter.h"
#include "util.h"

#define PH "airlock-ph-gh-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define TOK "ghs_0123456789012345678901234567890123456789012345678901234567"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = util_xstrndup((const char *)data, size);
	char *out = gitfilter_subst_auth(in, PH, strlen(PH), TOK, strlen(TOK));
	char *again = gitfilter_subst_auth(in, PH, strlen(PH), TOK, strlen(TOK));

	CHECK((out == NULL) == (again == NULL));
	if (out) {
		CHECK(strcmp(out, again) == 0);
		CHECK(strstr(out, PH) == NULL);
		if (strncasecmp(in, "Basic ", 6) == 0) {
			size_t n = strlen(out + 6);
			unsigned char *plain = util_xmalloc(n + 1);
			int dn = EVP_DecodeBlock(plain, (unsigned char *)out + 6, (int)n);
			size_t pl = (size_t)dn;
			const char *colon;

			CHECK(dn >= 0 && n % 4 == 0);
			if (n && out[6 + n - 1] == '=')
				pl--;
			if (n > 1 && out[6 + n - 2] == '=')
				pl--;
			colon = memchr(plain, ':', pl);
			CHECK(colon);
			CHECK(pl - (size_t)(colon - (char *)plain) - 1 == strlen(TOK));
			CHECK(memcmp(colon + 1, TOK, strlen(TOK)) == 0);
			free(plain);
		} else {
			const char *sp = strchr(in, ' ');

			CHECK(sp && strcmp(sp + 1, PH) == 0);
			CHECK(strncmp(out, in, (size_t)(sp - in) + 1) == 0);
			CHECK(strcmp(out + (sp - in) + 1, TOK) == 0);
		}
	}
	free(out);
	free(again);
	free(in);
	return 0;
}
