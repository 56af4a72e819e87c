/* SPDX-License-Identifier: Apache-2.0
 * test_feed.c - the live feed's destination: otlp+http://HOST[:PORT][/PATH]
 * parsed into host, port and path (defaults 4318 and /v1/logs, IPv6 in
 * brackets), and every malformed form refused with a reason;
 * events_line_parse(), which the feed uses to read one line alone; and
 * the feed's bounded queue: lines kept in seq order, what comes while it
 * is full and what the channel skipped counted as lost ranges (the
 * receipt.gap lines), never more ranges than it has room for.
 */
#include <stdio.h>
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

static void take(struct feed_queue *fq, int64_t seq)
{
	char line[32];

	snprintf(line, sizeof(line), "{\"v\":1,\"seq\":%lld}", (long long)seq);
	feed_queue_take(fq, seq, line, strlen(line));
}

/* The seqs queued, oldest first, as "a,b,c". */
static const char *queued(const struct feed_queue *fq)
{
	static char out[256];
	size_t i, off = 0;

	out[0] = '\0';
	for (i = 0; i < fq->n && off < sizeof(out) - 24; i++)
		off += (size_t)snprintf(out + off, sizeof(out) - off, "%s%lld", i ? "," : "",
					(long long)fq->q[(fq->head + i) % fq->cap].seq);
	return out;
}

static void test_queue(void)
{
	struct feed_queue fq;
	int64_t s;

	feed_queue_init(&fq, 4);
	for (s = 0; s < 4; s++)
		take(&fq, s);
	tap_is_str(queued(&fq), "0,1,2,3", "four lines fill a queue of four, in order");
	tap_ok(fq.ngaps == 0, "nothing lost yet");
	take(&fq, 4);
	take(&fq, 5);
	tap_is_str(queued(&fq), "0,1,2,3", "a full queue keeps what it has");
	tap_ok(fq.ngaps == 1 && fq.gaps[0].from == 4 && fq.gaps[0].to == 5,
	       "the two lines that found it full are one lost range, 4 to 5");
	tap_ok(strstr(fq.gaps[0].why, "queue (4 lines) was full") != NULL,
	       "which says why (%s)", fq.gaps[0].why);
	feed_queue_drop(&fq, 2);
	take(&fq, 6);
	take(&fq, 9);
	tap_is_str(queued(&fq), "2,3,6,9", "once two are delivered, the next lines queue, in order");
	tap_ok(fq.ngaps == 2 && fq.gaps[1].from == 7 && fq.gaps[1].to == 8 &&
	       strstr(fq.gaps[1].why, "channel") != NULL,
	       "a jump in seq (7, 8 never came) is a range of its own, of another cause");
	tap_ok(fq.next_seq == 10, "the next seq expected is 10");
	feed_queue_drop(&fq, 4);
	tap_ok(fq.n == 0 && fq.bytes == 0, "all delivered: empty, no bytes held");
	/* many separate losses: never more than FEED_GAPS ranges, the last
	 * absorbing the rest, so no seq is forgotten */
	for (s = 0; s < 3 * FEED_GAPS; s++)
		take(&fq, 12 + 2 * s);
	tap_ok(fq.ngaps == FEED_GAPS, "at most %d ranges wait (%zu)", FEED_GAPS, fq.ngaps);
	tap_ok(fq.gaps[FEED_GAPS - 1].to == 12 + 2 * (3 * FEED_GAPS - 1),
	       "the last range reaches the last seq lost (%lld)",
	       (long long)fq.gaps[FEED_GAPS - 1].to);
	feed_queue_free(&fq);
}

int main(void)
{
	test_urls();
	test_line_alone();
	test_queue();
	return tap_done();
}
