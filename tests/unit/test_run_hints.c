/* SPDX-License-Identifier: Apache-2.0
 * test_run_hints.c - what hides a host path from the agent, and the
 * summary of blocks `airlock run` prints from the events file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_hints.h"
#include "tap.h"
#include "util.h"

static void test_hidden_by(void)
{
	struct view_step steps[] = {
		{ VIEW_CONCEAL, "/home", true },
		{ VIEW_PRIVATE, "/tmp", true },
		{ VIEW_HOME, "/home/u", true },
		{ VIEW_WORKSPACE, "/home/u/ws", true },
		{ VIEW_RO, "/home/u/.local/bin", true },
		{ VIEW_HIDE, "/opt/secret", true },
	};
	struct view_plan plan = { steps, sizeof(steps) / sizeof(steps[0]) };
	const struct view_step *s;

	s = run_hint_hidden_by(&plan, "/home/u/.npm/bin/claude");
	tap_ok(s && s->kind == VIEW_HOME, "under $HOME: hidden by the private $HOME");
	s = run_hint_hidden_by(&plan, "/home/other/bin/x");
	tap_ok(s && strcmp(s->path, "/home") == 0, "another home: hidden by /home");
	tap_ok(!run_hint_hidden_by(&plan, "/home/u/ws/bin/x"), "the workspace is shown");
	tap_ok(!run_hint_hidden_by(&plan, "/home/u/.local/bin/x"), "an fs.ro path is shown");
	tap_ok(!run_hint_hidden_by(&plan, "/usr/bin/env"), "/usr is shown");
	tap_ok(!run_hint_hidden_by(&plan, "/homework/x"), "a path prefix is not a parent (/homework)");
	s = run_hint_hidden_by(&plan, "/tmp/x");
	tap_ok(s && s->kind == VIEW_PRIVATE, "the host's /tmp: a private tmpfs");
	s = run_hint_hidden_by(&plan, "/opt/secret");
	tap_ok(s && s->kind == VIEW_HIDE, "an fs.hide path itself");
}

static char *write_events(const char *text)
{
	char *path = util_xstrdup("/tmp/airlock-test-run-hints.XXXXXX");
	int fd = mkstemp(path);

	ASSERT(fd >= 0);
	ASSERT(util_write_all(fd, text, strlen(text)) == 0);
	close(fd);
	return path;
}

static char *summary_of(const char *events, const char *id, int *n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ASSERT(out);
	*n = run_summary(events, id, out);
	fclose(out);
	return text;
}

static void test_summary(void)
{
	char *path, *text;
	int n;

	path = write_events(
		"{\"seq\":0,\"session\":\"s1\",\"type\":\"session.start\",\"decision\":\"info\"}\n"
		"{\"seq\":1,\"session\":\"s1\",\"type\":\"env.drop\",\"decision\":\"block\",\"rule\":\"env.pass\",\"subject\":{\"name\":\"X\"}}\n"
		"{\"seq\":2,\"session\":\"s1\",\"type\":\"egress.block\",\"decision\":\"block\",\"rule\":\"egress.default\",\"subject\":{\"method\":\"CONNECT\",\"host\":\"a.test\",\"port\":443}}\n"
		"{\"seq\":3,\"session\":\"s1\",\"type\":\"egress.block\",\"decision\":\"block\",\"rule\":\"egress.default\",\"subject\":{\"method\":\"CONNECT\",\"host\":\"a.test\",\"port\":443}}\n"
		"{\"seq\":4,\"session\":\"other\",\"type\":\"egress.block\",\"decision\":\"block\",\"rule\":\"egress.default\",\"subject\":{\"host\":\"o.test\"}}\n"
		"{\"seq\":5,\"session\":\"s1\",\"type\":\"secret.block\",\"decision\":\"block\",\"rule\":\"secrets.tok\",\"subject\":{\"secret\":\"tok\",\"host\":\"b.test\",\"port\":443}}\n"
		"{\"seq\":6,\"session\":\"s1\",\"type\":\"egress.allow\",\"decision\":\"allow\",\"rule\":\"egress.allow[0]\",\"subject\":{\"host\":\"c.test\"}}\n"
		"not json\n"
		"{\"seq\":7,\"session\":\"s1\",\"type\":\"egress.block\",\"decision\":\"would_block\",\"rule\":\"egress.default\",\"subject\":{\"method\":\"GET\",\"host\":\"d.test\",\"port\":80,\"path\":\"/x\"}}\n"
		"{\"seq\":8,\"session\":\"s1\",\"type\":\"egress.block\",\"decision\":\"block\",\"rule\":\"egress.special-address\",\"subject\":{\"method\":\"GET\",\"host\":\"127.0.0.1\",\"port\":80}}\n"
		"{\"seq\":9,\"session\":\"s1\",\"type\":\"session.end\",\"decision\":\"info\"}\n");
	text = summary_of(path, "s1", &n);
	tap_is_int(n, 5, "five counted: env.drop, allows and another session's lines aside");
	tap_ok(strstr(text, "airlock: run: blocked 4, would have blocked 1 (shadow mode): "
			    "egress.default 3, egress.special-address 1, secrets.tok 1\n") != NULL,
	       "the count by rule, most first");
	tap_ok(strstr(text, "airlock: run:   CONNECT a.test:443 (egress.default)\n") != NULL,
	       "the first target");
	tap_ok(strstr(text, "airlock: run:   secret tok to b.test:443 (secrets.tok)\n") != NULL,
	       "a secret's block names the secret and the host");
	tap_ok(strstr(text, "airlock: run:   GET d.test:80/x (egress.default)\n") != NULL,
	       "a request's path");
	tap_ok(strstr(text, "127.0.0.1") == NULL, "three distinct targets at most");
	tap_ok(strstr(text, "... 2 more") != NULL, "then how many more");
	tap_ok(strstr(text, path) != NULL, "and the events file");
	free(text);

	text = summary_of(path, "nobody", &n);
	tap_is_int(n, 0, "a session with nothing blocked: 0");
	tap_is_str(text, "", "and nothing written");
	free(text);
	unlink(path);
	free(path);

	text = summary_of("/nonexistent/airlock-events.jsonl", "s1", &n);
	tap_is_int(n, -1, "an unreadable file: -1");
	tap_is_str(text, "", "and nothing written");
	free(text);
}

int main(void)
{
	test_hidden_by();
	test_summary();
	return tap_done();
}
