/* SPDX-License-Identifier: Apache-2.0
 * test_events.c - the stream reader of learn, report and export: the type
 * table's lookups, timestamps, how a buffer splits into lines and
 * sessions, each line's SHA-256, and the raw bytes of its subject (what
 * the report shows as signed), on hand-written lines that need not verify.
 */
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "tap.h"
#include "util.h"

struct type_case {
	const char *type;
	const char *entry; /* the table entry's name */
	enum events_ocsf ocsf;
	enum events_learn learn;
	enum events_group group;
};

static const struct type_case type_cases[] = {
	{ "session.start", "session.start", EVENTS_OCSF_PROCESS, EVENTS_LEARN_NONE, EVENTS_GROUP_SESSION },
	{ "session.end", "session.end", EVENTS_OCSF_PROCESS, EVENTS_LEARN_NONE, EVENTS_GROUP_SESSION },
	{ "egress.block", "egress.block", EVENTS_OCSF_NETWORK, EVENTS_LEARN_EGRESS, EVENTS_GROUP_EGRESS },
	{ "egress.allow", "egress.allow", EVENTS_OCSF_NETWORK, EVENTS_LEARN_SEEN, EVENTS_GROUP_EGRESS },
	{ "egress.host_mismatch", "egress.", EVENTS_OCSF_NETWORK, EVENTS_LEARN_NONE, EVENTS_GROUP_EGRESS },
	{ "env.drop", "env.drop", EVENTS_OCSF_BASE, EVENTS_LEARN_ENV, EVENTS_GROUP_ENV },
	{ "http.request", "http.request", EVENTS_OCSF_HTTP, EVENTS_LEARN_SEEN, EVENTS_GROUP_HTTP },
	{ "git.allow", "git.allow", EVENTS_OCSF_HTTP, EVENTS_LEARN_NONE, EVENTS_GROUP_GIT },
	{ "git.lfs", "git.", EVENTS_OCSF_HTTP, EVENTS_LEARN_NONE, EVENTS_GROUP_GIT },
	{ "secret.block", "secret.block", EVENTS_OCSF_HTTP, EVENTS_LEARN_REVIEW, EVENTS_GROUP_SECRET },
	{ "budget.charge", "budget.charge", EVENTS_OCSF_BASE, EVENTS_LEARN_NONE, EVENTS_GROUP_SPEND },
	{ "budget.block", "budget.block", EVENTS_OCSF_HTTP, EVENTS_LEARN_REVIEW, EVENTS_GROUP_SPEND },
	{ "dns.block", "dns.block", EVENTS_OCSF_DNS, EVENTS_LEARN_NAME, EVENTS_GROUP_EGRESS },
	{ "vendor.future", "", EVENTS_OCSF_BASE, EVENTS_LEARN_NONE, EVENTS_GROUP_OTHER },
	{ "egress.", "", EVENTS_OCSF_BASE, EVENTS_LEARN_NONE, EVENTS_GROUP_OTHER },
	{ "egress", "", EVENTS_OCSF_BASE, EVENTS_LEARN_NONE, EVENTS_GROUP_OTHER },
	{ "", "", EVENTS_OCSF_BASE, EVENTS_LEARN_NONE, EVENTS_GROUP_OTHER },
};

struct ts_case {
	const char *ts;
	long long ms;
};

static const struct ts_case ts_cases[] = {
	{ "1970-01-01T00:00:00.000Z", 0 },
	{ "2026-03-01T09:00:00.250Z", 1772355600250LL },
	{ "2024-02-29T23:59:59.999Z", 1709251199999LL },
	{ "2026-02-29T00:00:00.000Z", -1 },  /* not a leap year */
	{ "2000-02-29T00:00:00.000Z", 951782400000LL },
	{ "1900-02-29T00:00:00.000Z", -1 },
	{ "2026-13-01T00:00:00.000Z", -1 },
	{ "2026-04-31T00:00:00.000Z", -1 },
	{ "2026-03-01T24:00:00.000Z", -1 },
	{ "2026-03-01T09:00:00Z", -1 },      /* no milliseconds */
	{ "2026-03-01T09:00:00.000+00:00", -1 },
	{ "2026-03-01 09:00:00.000Z", -1 },
	{ "2026-03-01T09:00:00.00aZ", -1 },
	{ "", -1 },
};

/* A set holding @text as its one file, verified without a key (the lines
 * here are not signed, so nothing verifies: that is not what is tested). */
static void set_of(struct events_set *set, const char *text)
{
	memset(set, 0, sizeof(*set));
	set->files = util_xcalloc(1, sizeof(*set->files));
	set->nfiles = 1;
	set->files[0].path = util_xstrdup("test");
	set->files[0].len = strlen(text);
	set->files[0].text = util_xstrndup(text, set->files[0].len);
	receipt_verify_buffer(set->files[0].text, set->files[0].len, NULL, &set->files[0].vr);
}

struct raw_case {
	const char *line;
	const char *raw; /* the subject's bytes, or NULL: none found */
};

static const struct raw_case raw_cases[] = {
	{ "{\"v\":1,\"subject\":{\"host\":\"a\"},\"reason\":\"x\"}", "{\"host\":\"a\"}" },
	{ "{\"reason\":\"\\\"subject\\\":{}\",\"subject\":{\"r\":\"},\\\"reason\\\":\"}}",
	  "{\"r\":\"},\\\"reason\\\":\"}" },
	{ "{\"subject\":{\"n\":[1,{\"x\":[2,3]},\"]\"],\"m\":0.0393},\"seq\":2}",
	  "{\"n\":[1,{\"x\":[2,3]},\"]\"],\"m\":0.0393}" },
	{ " { \"a\" : true , \"subject\" :  {\"k\" : null}  , \"z\":1 } ", "{\"k\" : null}" },
	{ "{\"subjects\":{},\"subject\":{\"ok\":1}}", "{\"ok\":1}" },
	{ "{\"sub\\u006aect\":{\"k\":1}}", NULL },   /* the same key, escaped */
	{ "{\"subject\":\"not an object\"}", NULL },
	{ "{\"subject\":{}}", "{}" },
};

static void test_raw(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(raw_cases); i++) {
		struct events_set set;
		struct events_iter it;
		struct events_line ln;
		char *got = NULL;

		set_of(&set, raw_cases[i].line);
		events_iter_init(&it, &set);
		tap_ok(events_next(&it, &ln) && ln.obj, "raw case %zu parses", i);
		if (ln.subject_raw) {
			json_t *again = json_loadb(ln.subject_raw, ln.subject_raw_len, 0, NULL);

			got = util_xstrndup(ln.subject_raw, ln.subject_raw_len);
			tap_ok(again && json_equal(again, ln.subject),
			       "raw case %zu: the bytes parse to the subject", i);
			json_decref(again);
		}
		tap_is_str(got, raw_cases[i].raw, "raw case %zu: the subject's bytes", i);
		free(got);
		events_iter_done(&it);
		events_set_free(&set);
	}
}

/* A NUL inside the line (jansson accepted the text before it): the raw
 * scan gives up instead of spinning on the NUL (a libFuzzer timeout). */
static void test_raw_nul(void)
{
	static const char text[] = "{\"subject\":{\"a\":true\0},\"z\":1}";
	struct events_set set;
	struct events_iter it;
	struct events_line ln;
	bool got;

	set_of(&set, "");
	free(set.files[0].text);
	set.files[0].len = sizeof(text) - 1;
	set.files[0].text = util_xmalloc(sizeof(text));
	memcpy(set.files[0].text, text, sizeof(text));
	events_iter_init(&it, &set);
	got = events_next(&it, &ln);
	tap_ok(got, "a line with a NUL is read (and the read ends)");
	tap_ok(!got || !ln.subject_raw ||
	       memchr(ln.subject_raw, '\0', ln.subject_raw_len) == NULL,
	       "no raw subject spans the NUL");
	events_iter_done(&it);
	events_set_free(&set);
}

static void test_lines(void)
{
	static const char text[] =
		"{\"seq\":0,\"type\":\"session.start\",\"decision\":\"info\"}\n"
		"{\"seq\":1,\"type\":\"egress.block\",\"decision\":\"would_block\",\"subject\":{\"host\":\"h\"}}\n"
		"\n"
		"not json\n"
		"{\"seq\":4,\"type\":\"session.end\",\"decision\":\"info\"}\n"
		"{\"seq\":0,\"type\":\"session.start\",\"decision\":\"bogus\"}\n"
		"{\"seq\":1,\"type\":\"x\"}\n"
		"{\"seq\":0,\"type\":\"session.start\"}";
	static const struct {
		size_t session;
		long long seq;
		int decision;
		bool first, obj;
	} want[] = {
		{ 0, 0, RECEIPT_INFO, true, true },
		{ 0, 1, RECEIPT_WOULD_BLOCK, false, true },
		{ 0, -1, RECEIPT_DECISION_COUNT, false, false },
		{ 0, -1, RECEIPT_DECISION_COUNT, false, false },
		{ 0, 4, RECEIPT_INFO, false, true },
		{ 1, 0, RECEIPT_DECISION_COUNT, true, true },
		{ 1, 1, RECEIPT_DECISION_COUNT, false, true },
		{ 2, 0, RECEIPT_DECISION_COUNT, true, true },
	};
	struct events_set set;
	struct events_iter it;
	struct events_line ln;
	size_t n = 0;

	set_of(&set, text);
	events_iter_init(&it, &set);
	while (events_next(&it, &ln)) {
		if (n < ARRAY_SIZE(want)) {
			tap_ok(ln.lineno == n + 1 && ln.session == want[n].session &&
				       ln.new_session == want[n].first &&
				       (ln.obj != NULL) == want[n].obj && ln.seq == want[n].seq &&
				       (int)ln.decision == want[n].decision,
			       "line %zu: session %zu%s, seq %lld", n + 1, want[n].session,
			       want[n].first ? " (first)" : "", want[n].seq);
			tap_ok(!ln.verified, "line %zu: unsigned, so not verified", n + 1);
		}
		n++;
	}
	tap_is_int(n, ARRAY_SIZE(want), "every line, the last without its newline, and no empty one after it");
	events_iter_done(&it);
	events_set_free(&set);

	/* The SHA-256 of the line's bytes, without the newline. */
	set_of(&set, "abc\n");
	events_iter_init(&it, &set);
	tap_ok(events_next(&it, &ln), "a one-line buffer");
	tap_is_str(ln.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		   "its SHA-256 is that of \"abc\"");
	tap_ok(!events_next(&it, &ln), "and nothing after it");
	events_iter_done(&it);
	events_set_free(&set);
}

int main(void)
{
	size_t i, n;
	const struct events_type *all = events_types(&n);

	for (i = 0; i < ARRAY_SIZE(type_cases); i++) {
		const struct type_case *c = &type_cases[i];
		const struct events_type *t = events_type_find(c->type);

		tap_ok(strcmp(t->name, c->entry) == 0 && t->ocsf == c->ocsf &&
			       t->learn == c->learn && t->group == c->group,
		       "type '%s' -> entry '%s' (%s, learn %s, group %s)", c->type, c->entry,
		       events_ocsf_to_string(c->ocsf), events_learn_to_string(c->learn),
		       events_group_to_string(c->group));
	}
	tap_ok(n > 0 && strcmp(all[n - 1].name, "") == 0, "the catch-all entry is last");
	for (i = 0; i < n; i++)
		tap_ok(all[i].label && all[i].label[0] && (unsigned)all[i].ocsf < EVENTS_OCSF_FINDING &&
			       all[i].block_severity >= 0 && all[i].block_severity <= 6,
		       "entry '%s': a label, an activity class, a severity", all[i].name);
	tap_is_int(events_ocsf_class_uid(EVENTS_OCSF_FINDING), 2004, "Detection Finding is 2004");
	tap_is_int(events_ocsf_category_uid(EVENTS_OCSF_HTTP), 4, "HTTP Activity is in category 4");
	for (i = 0; i < ARRAY_SIZE(ts_cases); i++)
		tap_is_int(events_parse_ts(ts_cases[i].ts), ts_cases[i].ms, "ts '%s'", ts_cases[i].ts);
	tap_is_int(events_decision_from_string("would_block"), RECEIPT_WOULD_BLOCK, "would_block");
	tap_is_int(events_decision_from_string("Allow"), RECEIPT_DECISION_COUNT, "decisions are exact");
	test_raw();
	test_raw_nul();
	test_lines();
	return tap_done();
}
