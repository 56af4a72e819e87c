/* SPDX-License-Identifier: Apache-2.0
 * fuzz_ghapp.c - libFuzzer target for the mint answer's validation in
 * ghapp.c (ghapp_check_answer and the RFC 3339 reader behind it).
 *
 * Input layout: the first byte picks the status (0-127: 201, else one of
 * 200, 401, 422, 500) and its low bit whether a JSON content type is
 * given; the rest is the answer's body. The scope asked for is fixed:
 * owner acme, repositories api and shared-lib, contents write and
 * metadata read.
 *
 * Invariants (abort() on failure, so libFuzzer keeps the input):
 *  - an accepted answer was a 201 with a JSON content type; its token is
 *    1..GHAPP_TOKEN_MAX visible ASCII bytes, NUL-terminated at len, and
 *    appears in the body; it expires at least GHAPP_MIN_LIFETIME_S after
 *    now; it grants exactly the asked repositories and no permission the
 *    scope did not ask, none at a higher level; the refresh comes before
 *    the expiry and not before the issue;
 *  - a refused answer leaves the token zeroed and a one-line printable
 *    reason;
 *  - jansson's allocator is restored either way.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ghapp.h"
#include "util.h"

#define NOW ((time_t)1800000000)

static struct ghapp_scope asked;

static void init(void)
{
	static struct ghapp_perm perms[2];
	static char *repos[2];

	if (asked.owner)
		return;
	repos[0] = util_xstrdup("api");
	repos[1] = util_xstrdup("shared-lib");
	perms[0].name = util_xstrdup("contents");
	perms[0].level = POLICY_GH_WRITE;
	perms[1].name = util_xstrdup("metadata");
	perms[1].level = POLICY_GH_READ;
	asked.owner = util_xstrdup("acme");
	asked.repos = repos;
	asked.nrepos = 2;
	asked.perms = perms;
	asked.nperms = 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int other[] = { 200, 401, 422, 500 };
	struct ghapp_token t;
	json_malloc_t m;
	json_free_t f;
	unsigned int status;
	const char *ctype;
	char err[512];
	size_t i, j;
	int rc;

	init();
	if (size == 0)
		return 0;
	status = data[0] < 128 ? 201 : other[data[0] & 3];
	ctype = (data[0] & 1) ? "text/plain" : "application/json; charset=utf-8";
	err[0] = '\0';
	rc = ghapp_check_answer(&asked, status, ctype, (const char *)data + 1, size - 1, NOW, &t,
				err, sizeof(err));
	json_get_alloc_funcs(&m, &f);
	CHECK(m == malloc && f == free);
	if (rc != 0) {
		CHECK(rc == -1 && !t.value && t.len == 0 && t.granted.nrepos == 0);
		CHECK(err[0]);
		for (i = 0; err[i]; i++)
			CHECK(err[i] >= 0x20 && err[i] < 0x7f);
		return 0;
	}
	CHECK(status == 201 && !(data[0] & 1));
	CHECK(t.value && t.len >= 1 && t.len <= GHAPP_TOKEN_MAX && t.value[t.len] == '\0');
	for (i = 0; i < t.len; i++)
		CHECK(t.value[i] > 0x20 && t.value[i] < 0x7f);
	{
		/* the token is the answer's "token" member as JSON decodes it
		 * (its bytes need not appear verbatim: "\\" is one byte) */
		json_t *root = json_loadb((const char *)data + 1, size - 1, 0, NULL);
		json_t *tok = json_object_get(root, "token");

		CHECK(json_is_string(tok) && json_string_length(tok) == t.len &&
		      memcmp(json_string_value(tok), t.value, t.len) == 0);
		json_decref(root);
	}
	CHECK(t.expires_at >= NOW + GHAPP_MIN_LIFETIME_S && t.issued_at == NOW);
	CHECK(ghapp_refresh_at(&t) <= t.expires_at && ghapp_refresh_at(&t) >= t.issued_at);
	CHECK(t.granted.nrepos == asked.nrepos);
	for (i = 0; i < asked.nrepos; i++)
		CHECK(strcmp(t.granted.repos[i], asked.repos[i]) == 0);
	for (i = 0; i < t.granted.nperms; i++) {
		for (j = 0; j < asked.nperms; j++)
			if (strcmp(t.granted.perms[i].name, asked.perms[j].name) == 0)
				break;
		CHECK(j < asked.nperms && t.granted.perms[i].level <= asked.perms[j].level);
	}
	ghapp_token_clear(&t);
	return 0;
}
