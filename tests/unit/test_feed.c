/* SPDX-License-Identifier: Apache-2.0
 * test_feed.c - the live feed's destination: otlp+http://HOST[:PORT][/PATH]
 * parsed into host, port and path (defaults 4318 and /v1/logs, IPv6 in
 * brackets), and every malformed form refused with a reason; and
 * events_line_parse(), which the feed uses to read one line alone.
 */
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "feed.h"
#include "tap.h"

static void good(const char *spec, const char *host, const char *port, const char *path)
{
	struct feed_url u;
	char err[512] = "";

	tap_ok(feed_url_parse(spec, &u, err, sizeof(err)) == 0, "%s parses %s", spec, err);
	tap_is_str(u.host, host, "%s: host", spec);
	tap_is_str(u.port, port, "%s: port", spec);
	tap_is_str(u.path, path, "%s: path", spec);
}

static void bad(const char *spec, const char *why)
{
	struct feed_url u;
	char err[512] = "";

	tap_ok(feed_url_parse(spec, &u, err, sizeof(err)) < 0, "%s is refused", spec);
	tap_ok(strstr(err, why) != NULL, "%s: the reason says '%s' (%s)", spec, why, err);
}

static void test_urls(void)
{
	char longpath[700];

	good("otlp+http://127.0.0.1:4318/v1/logs", "127.0.0.1", "4318", "/v1/logs");
	good("otlp+http://collector", "collector", "4318", "/v1/logs");
	good("otlp+http://collector:9000", "collector", "9000", "/v1/logs");
	good("otlp+http://[::1]:4318/otlp/v1/logs", "::1", "4318", "/otlp/v1/logs");
	good("otlp+http://[fd00::1]", "fd00::1", "4318", "/v1/logs");
	bad("otlp+https://c/v1/logs", "https is not supported");
	bad("otlp+grpc://c:4317", "otlp+http://HOST");
	bad("otlp+http://", "no host");
	bad("otlp+http://:4318/v1/logs", "no host");
	bad("otlp+http://c:0/", "port");
	bad("otlp+http://c:65536/", "port");
	bad("otlp+http://c:/", "port");
	bad("otlp+http://c:43x8/", "port");
	bad("otlp+http://[::1/", "unclosed");
	bad("otlp+http://[::1]x/", "port");
	bad("otlp+http://c/v1/logs?x=1", "query");
	bad("otlp+http://u@c/v1/logs", "user");
	bad("otlp+http://c/v1/lo gs", "space");
	memset(longpath, 'a', sizeof(longpath));
	memcpy(longpath, "otlp+http://c/", 14);
	longpath[sizeof(longpath) - 1] = '\0';
	bad(longpath, "too long");
	tap_ok(feed_is_url("otlp+http://c") && !feed_is_url("/var/log/x.jsonl") &&
		       !feed_is_url("-") && !feed_is_url("fd:3") && !feed_is_url(NULL),
	       "feed_is_url tells a feed from the stream's destinations");
}

static void test_line_alone(void)
{
	static const char line[] =
		"{\"v\":1,\"seq\":7,\"ts\":\"2026-01-02T03:04:05.006Z\",\"session\":\"s\","
		"\"type\":\"receipt.gap\",\"decision\":\"info\",\"point\":\"supervisor\","
		"\"rule\":\"feed\",\"policy\":\"p\",\"subject\":{\"from\":1,\"to\":3},"
		"\"reason\":\"r\",\"prev\":\"00\"}";
	struct events_line ln;
	json_t *obj = events_line_parse(&ln, line, strlen(line));

	tap_ok(obj != NULL && ln.obj == obj, "a line alone parses");
	tap_is_int(ln.seq, 7, "its seq");
	tap_is_str(ln.type, "receipt.gap", "its type");
	tap_is_str(ln.ti->label, "Feed gap", "receipt.gap has its entry in the type table");
	tap_ok(ln.subject_raw && strncmp(ln.subject_raw, "{\"from\":1,\"to\":3}",
					 ln.subject_raw_len) == 0, "its subject's bytes");
	tap_ok(ln.lineno == 0 && !ln.verified, "no line number, not verified");
	json_decref(obj);
	tap_ok(events_line_parse(&ln, "[1]", 3) == NULL && ln.seq == -1,
	       "a line that is not an object gives NULL");
}

int main(void)
{
	test_urls();
	test_line_alone();
	return tap_done();
}
