/* SPDX-License-Identifier: Apache-2.0
 * test_publish.c - the pure parts of publish.c: --publish arguments, the
 * auth value a request carries, the auth cookie stripped.
 */
#include <string.h>

#include "publish.h"
#include "tap.h"
#include "util.h"

static void test_args(void)
{
	static const struct {
		const char *arg, *listen;
		unsigned int port;
	} good[] = {
		{ "8080:3000", "127.0.0.1:8080", 3000 },
		{ "127.0.0.2:80:80", "127.0.0.2:80", 80 },
		{ "0.0.0.0:8443:443", "0.0.0.0:8443", 443 },
		{ "[::1]:8080:8080", "[::1]:8080", 8080 },
		{ "[::]:1:65535", "[::]:1", 65535 },
	};
	static const char *const bad[] = {
		"", "8080", ":8080", "8080:", "0:80", "80:0", "65536:80", "80:65536",
		"localhost:80:80", "::1:80:80", "[127.0.0.1]:80:80", "1.2.3:80:80",
		"[::1:80:80", "08:80", "80:08", "a:b:c", "1.2.3.4:80:80:80",
	};
	char listen[80], why[160];
	uint16_t port;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		bool ok = publish_parse_arg(good[i].arg, listen, sizeof(listen), &port, why,
					    sizeof(why));

		tap_ok(ok && strcmp(listen, good[i].listen) == 0 && port == good[i].port,
		       "--publish %s: listen %s, port %u", good[i].arg, good[i].listen,
		       good[i].port);
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		tap_ok(!publish_parse_arg(bad[i], listen, sizeof(listen), &port, why, sizeof(why)) &&
			       why[0],
		       "--publish '%s' is refused", bad[i]);
}

static void test_auth_value(void)
{
	static const struct {
		const char *authz, *cookies, *cookie, *want; /* want NULL: none */
	} cases[] = {
		{ "Bearer tok", NULL, NULL, "tok" },
		{ "bearer   tok", NULL, NULL, "tok" },
		{ "Basic dXNlcjpwYXNz", NULL, NULL, NULL },
		{ "Bearer", NULL, NULL, NULL },
		{ "Bearer ", NULL, NULL, NULL },
		{ NULL, "a=1; airlock_auth=tok; b=2", "airlock_auth", "tok" },
		{ NULL, "airlock_auth=\"tok\"", "airlock_auth", "tok" },
		{ NULL, "xairlock_auth=tok", "airlock_auth", NULL },
		{ NULL, "airlock_authx=tok", "airlock_auth", NULL },
		{ NULL, "airlock_auth", "airlock_auth", NULL },
		{ NULL, "airlock_auth=", "airlock_auth", "" },
		{ NULL, "a=1;airlock_auth=tok ;b", "airlock_auth", "tok" },
		{ NULL, "airlock_auth=tok", NULL, NULL },
		{ "Basic x", "airlock_auth=tok", "airlock_auth", "tok" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t n = 0;
		const char *a = cases[i].authz, *c = cases[i].cookies;
		const char *v = publish_auth_value(a, a ? strlen(a) : 0, c, c ? strlen(c) : 0,
						   cases[i].cookie, &n);
		bool ok = cases[i].want ? v && n == strlen(cases[i].want) &&
						  memcmp(v, cases[i].want, n) == 0
					: v == NULL;

		tap_ok(ok, "auth value of [%s] [%s] cookie %s: %s", a ? a : "-", c ? c : "-",
		       cases[i].cookie ? cases[i].cookie : "-",
		       cases[i].want ? cases[i].want : "none");
	}
}

static void test_strip(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "a=1; airlock_auth=tok; b=2", "a=1; b=2" },
		{ "airlock_auth=tok", "" },
		{ "airlock_auth=tok;airlock_auth=other", "" },
		{ "a=1;b=2", "a=1; b=2" },
		{ "xairlock_auth=1; airlock_authx=2", "xairlock_auth=1; airlock_authx=2" },
		{ " ; ;a=1 ; ", "a=1" },
		{ "airlock_auth", "" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char out[128];
		size_t n = publish_strip_cookie(cases[i].in, strlen(cases[i].in), "airlock_auth",
						out);

		tap_ok(n == strlen(cases[i].want) && strcmp(out, cases[i].want) == 0,
		       "strip [%s] -> [%s] (got [%s])", cases[i].in, cases[i].want, out);
	}
}

int main(void)
{
	test_args();
	test_auth_value();
	test_strip();
	return tap_done();
}
