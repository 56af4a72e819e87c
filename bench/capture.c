/* SPDX-License-Identifier: Apache-2.0
 * bench/capture.c - the CPU a captured answer adds in the proxy worker
 * (docs/SECRETS.md "Captured values"): for one control-plane answer
 * ({"token": "ghs_...", "expires_at": ...}), the work of an ordinary
 * scrubbed answer (scrub_oneshot over the registry) beside the work of a
 * captured one (JSON read, placeholder drawn, value registered with a new
 * scrub set, the answer scrubbed with it). The hand-off to the other
 * workers is a message each (its wall time is the receipt's
 * propagated_us). Built and run by bench/capture.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "registry.h"
#include "scrub.h"

static double cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, i;
	char *json[] = { "/token" };
	struct policy_capture rule = { .json = json, .njson = 1, .expires = "/expires_at" };
	const char *body = "{\"token\":\"ghs_0123456789abcdefghijABCDEFGHIJklmnopqrst\","
			   "\"expires_at\":\"2099-01-01T00:00:00Z\",\"permissions\":"
			   "{\"contents\":\"write\",\"metadata\":\"read\"},"
			   "\"repository_selection\":\"selected\"}";
	size_t len = strlen(body);
	double t0, base, cap;
	volatile uint64_t sink = 0;

	/* baseline: the registry holds two brokered values */
	{
		struct registry *r = registry_new();
		struct registry_set *s;

		registry_add(r, "a", "sk-live-0123456789abcdefghijklmnopqrstuv", 40,
			     "sk-live-PPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPP", 40);
		registry_add(r, "b", "xoxb-0123456789abcdefghijklmnopqrstuvwx", 39,
			     "xoxb-QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", 39);
		s = registry_acquire(r);
		t0 = cpu_ns();
		for (i = 0; i < n; i++) {
			struct scrub_buf out = { 0 };

			sink += scrub_oneshot(registry_scrub(s), body, len, &out, NULL);
			scrub_buf_free(&out);
		}
		base = (cpu_ns() - t0) / (double)n;
		registry_release(s);
		registry_free(r);
	}
	/* captured: read, placeholder, register (new scrub set), scrub */
	{
		struct registry *r = NULL;

		t0 = cpu_ns();
		for (i = 0; i < n; i++) {
			struct capture_value v[CAPTURE_VALUES_MAX];
			struct scrub_buf out = { 0 };
			struct registry_set *s;
			time_t exp;
			char err[128], *ph;
			size_t phlen;
			int k;

			if (i % 8 == 0) {
				/* a session captures a few values, not thousands:
				 * the registry starts again with the two values */
				registry_free(r);
				r = registry_new();
				registry_add(r, "a", "sk-live-0123456789abcdefghijklmnopqrstuv", 40,
					     "sk-live-PPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPP", 40);
				registry_add(r, "b", "xoxb-0123456789abcdefghijklmnopqrstuvwx", 39,
					     "xoxb-QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", 39);
			}
			k = capture_json(&rule, body, len, time(NULL), v, &exp, err, sizeof(err));
			if (k != 1)
				return 1;
			ph = capture_placeholder(v[0].value, v[0].len, &phlen);
			/* each iteration a new value, as a new token would be */
			v[0].value[v[0].len - 1 - (i % 8)] = (char)('a' + (i / 8) % 26);
			v[0].value[v[0].len - 9 - (i % 16)] = (char)('A' + (i / 128) % 26);
			(void)registry_add(r, "scm", v[0].value, v[0].len, ph, phlen);
			s = registry_acquire(r);
			sink += scrub_oneshot(registry_scrub(s), body, len, &out, NULL);
			registry_release(s);
			scrub_buf_free(&out);
			free(ph);
			capture_values_free(v, 1);
		}
		cap = (cpu_ns() - t0) / (double)n;
		registry_free(r);
	}
	printf("| answer (%zu bytes) | CPU ns per answer |\n|---|---:|\n", len);
	printf("| scrubbed (2 values registered) | %.0f |\n", base);
	printf("| captured (read, placeholder, registered, scrubbed) | %.0f |\n", cap);
	printf("| added by the capture | %.0f |\n", cap - base);
	return sink == (uint64_t)-1;
}
