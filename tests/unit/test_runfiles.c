/* SPDX-License-Identifier: Apache-2.0
 * test_runfiles.c - where the files of a session really are, whether the
 * agent could write them, the default events path, key fingerprints.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runfiles.h"
#include "tap.h"
#include "util.h"

static char root[PATH_MAX]; /* a scratch tree, resolved */

static char *at(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	ASSERT((size_t)snprintf(buf[i], sizeof(buf[i]), "%s/%s", root, rel) < sizeof(buf[i]));
	return buf[i];
}

static void mkfile(const char *rel)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ASSERT(fd >= 0);
	close(fd);
}

/* The scratch tree:
 *   ws/                the workspace        ws/inside, ws/sub/
 *   rw/                an fs.rw path
 *   out/               elsewhere            out/file, out/linked (2 links)
 *   link-ws -> ws      link-in -> ws/inside   dangling -> ws/new-file
 *   rel-dangling -> ../../x (relative, outside)   loop -> loop */
static void make_tree(void)
{
	char tmpl[] = "/tmp/airlock-runfiles.XXXXXX";
	char *r;

	ASSERT(mkdtemp(tmpl));
	r = realpath(tmpl, NULL);
	ASSERT(r && util_strlcpy(root, r, sizeof(root)));
	free(r);
	ASSERT(mkdir(at("ws"), 0700) == 0 && mkdir(at("ws/sub"), 0700) == 0 &&
	       mkdir(at("rw"), 0700) == 0 && mkdir(at("out"), 0700) == 0);
	mkfile("ws/inside");
	mkfile("rw/inside");
	mkfile("out/file");
	mkfile("out/linked");
	ASSERT(link(at("out/linked"), at("out/linked2")) == 0);
	ASSERT(symlink(at("ws"), at("link-ws")) == 0);
	ASSERT(symlink(at("ws/inside"), at("link-in")) == 0);
	ASSERT(symlink(at("ws/new-file"), at("dangling")) == 0);
	ASSERT(symlink("../ws/sub/new", at("out/rel-dangling")) == 0);
	ASSERT(symlink("loop", at("loop")) == 0);
}

static void remove_tree(void)
{
	char cmd[PATH_MAX + 16];

	ASSERT((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root) < sizeof(cmd));
	ASSERT(system(cmd) == 0);
}

struct resolve_case {
	const char *rel;   /* below the scratch tree */
	const char *want;  /* below the scratch tree, or NULL: fails */
	int err;           /* errno when it fails */
};

static void test_resolve(void)
{
	static const struct resolve_case cases[] = {
		{ "ws/inside", "ws/inside", 0 },
		{ "ws//sub/", "ws/sub", 0 },
		{ "link-ws/inside", "ws/inside", 0 },
		{ "link-in", "ws/inside", 0 },
		{ "ws/missing", "ws/missing", 0 },
		{ "ws/missing/deeper/file.jsonl", "ws/missing/deeper/file.jsonl", 0 },
		{ "link-ws/missing", "ws/missing", 0 },
		{ "dangling", "ws/new-file", 0 },
		{ "out/rel-dangling", "ws/sub/new", 0 },
		{ "ws/missing/..", NULL, EINVAL },
		{ "ws/inside/x", NULL, ENOTDIR },
		{ "loop", NULL, ELOOP },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got;

		errno = 0;
		got = runfiles_resolve(at(cases[i].rel));
		if (cases[i].want) {
			tap_is_str(got, at(cases[i].want), "resolve %s", cases[i].rel);
		} else {
			tap_ok(!got && errno == cases[i].err, "resolve %s fails with %s (got %s)",
			       cases[i].rel, strerror(cases[i].err), strerror(errno));
		}
		free(got);
	}
	/* Relative to the current directory. */
	ASSERT(chdir(at("out")) == 0);
	{
		char *got = runfiles_resolve("../link-ws/sub/x.jsonl");

		tap_is_str(got, at("ws/sub/x.jsonl"), "a relative path, through a link");
		free(got);
	}
	ASSERT(chdir("/") == 0);
}

struct under_case {
	const char *path, *dir;
	bool want;
};

static void test_under(void)
{
	static const struct under_case cases[] = {
		{ "/a/b", "/a", true },
		{ "/a", "/a", true },
		{ "/ab", "/a", false },
		{ "/a/b/c", "/a/b", true },
		{ "/x", "/", true },
		{ "/", "/a", false },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++)
		tap_ok(runfiles_under(cases[i].path, cases[i].dir) == cases[i].want,
		       "%s %s below %s", cases[i].path, cases[i].want ? "is" : "is not",
		       cases[i].dir);
}

struct check_case {
	const char *rel;    /* the file, below the scratch tree */
	const char *match;  /* NULL: accepted; else a piece of the refusal */
};

static void test_check(void)
{
	static const struct check_case cases[] = {
		{ "out/file", NULL },
		{ "out/new-events.jsonl", NULL },
		{ "ws/inside", "is in the workspace" },
		{ "ws/sub/new.jsonl", "is in the workspace" },
		{ "rw/inside", "is in the fs.rw path" },
		{ "link-in", "is in the workspace" },
		{ "link-ws/x", "is in the workspace" },
		{ "dangling", "is in the workspace" },
		{ "out/rel-dangling", "is in the workspace" },
		{ "out/linked", "hard links" },
		{ "loop", "cannot tell where it is" },
	};
	const char *writable[2];
	char err[PATH_MAX * 2];
	size_t i;

	writable[0] = util_xstrdup(at("ws"));
	writable[1] = util_xstrdup(at("rw"));
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct runfiles_entry e = { "--policy", at(cases[i].rel), -1 };
		bool ok;

		err[0] = '\0';
		ok = runfiles_check(&e, writable, 2, err, sizeof(err));
		if (!cases[i].match)
			tap_ok(ok, "%s is accepted (%s)", cases[i].rel, err);
		else
			tap_ok(!ok && strstr(err, cases[i].match) && strstr(err, "--policy"),
			       "%s is refused: %s", cases[i].rel, err);
	}
	/* A hard-linked file on another filesystem than the writable paths:
	 * no other name of it can be inside them. */
	{
		const char *proc[1] = { "/proc" };
		struct runfiles_entry e = { "--policy", at("out/linked"), -1 };

		tap_ok(runfiles_check(&e, proc, 1, err, sizeof(err)),
		       "a hard-linked file is accepted when no writable path is on its filesystem");
	}
	/* Descriptors: judged by the file they have open. */
	{
		int in = open(at("ws/inside"), O_WRONLY | O_APPEND);
		int out = open(at("out/file"), O_WRONLY | O_APPEND);
		struct runfiles_entry e = { "--events", NULL, in };

		ASSERT(in >= 0 && out >= 0);
		tap_ok(!runfiles_check(&e, writable, 2, err, sizeof(err)) &&
		       strstr(err, at("ws/inside")),
		       "a descriptor open on a workspace file is refused: %s", err);
		e.fd = out;
		tap_ok(runfiles_check(&e, writable, 2, err, sizeof(err)),
		       "a descriptor open on a file elsewhere is accepted");
		close(in);
		close(out);
		{
			int p[2];

			ASSERT(pipe(p) == 0);
			e.fd = p[1];
			tap_ok(runfiles_check(&e, writable, 2, err, sizeof(err)),
			       "a descriptor open on a pipe is accepted (there is no file)");
			close(p[0]);
			close(p[1]);
		}
	}
	free((void *)writable[0]);
	free((void *)writable[1]);
}

struct events_case {
	const char *xdg, *home; /* NULL: unset */
	const char *want;
};

static void test_default_events(void)
{
	static const struct events_case cases[] = {
		{ "/state", "/h", "/state/airlock/s1.jsonl" },
		{ NULL, "/h", "/h/.local/state/airlock/s1.jsonl" },
		{ "", "/h", "/h/.local/state/airlock/s1.jsonl" },
		{ "relative", "/h", "/h/.local/state/airlock/s1.jsonl" },
	};
	char err[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got;

		if (cases[i].xdg)
			setenv("XDG_STATE_HOME", cases[i].xdg, 1);
		else
			unsetenv("XDG_STATE_HOME");
		setenv("HOME", cases[i].home, 1);
		got = runfiles_default_events("s1", err, sizeof(err));
		tap_is_str(got, cases[i].want, "XDG_STATE_HOME=%s HOME=%s",
			   cases[i].xdg ? cases[i].xdg : "(unset)", cases[i].home);
		free(got);
	}
	/* Directories made 0700, existing ones left alone. */
	{
		char *file = at("state/a/b/s1.jsonl");
		struct stat st;

		tap_ok(runfiles_make_parents(file, err, sizeof(err)) == 0 &&
		       stat(at("state/a/b"), &st) == 0 && (st.st_mode & 0777) == 0700,
		       "runfiles_make_parents makes the directories, mode 0700");
		tap_ok(runfiles_make_parents(file, err, sizeof(err)) == 0,
		       "and accepts them when they exist");
		tap_ok(runfiles_make_parents(at("out/file/x/y.jsonl"), err, sizeof(err)) < 0 &&
		       strstr(err, "out/file"), "a file in the way is an error: %s", err);
	}
}

struct fp_case {
	const char *pubkey, *want;
};

static void test_fingerprint(void)
{
	/* Expected values: SHA-256 of the base64-decoded key, base64 without
	 * padding (computed with Python's hashlib). */
	static const struct fp_case cases[] = {
		{ "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=",
		  "SHA256:ZbYGc9btiEvwHCwiLYKtoHQPKawzVdapJcgfF/R6J7g" },
		{ "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		  "SHA256:Zmh6rfhivXdsj8GLjp+OIAiXFIVu4jOzkCpZHQ1fKSU" },
		{ "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ", NULL },
		{ "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60Elm==", NULL },
		{ "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60E!mQ=", NULL },
		{ "", NULL },
	};
	char fp[RUNFILES_FINGERPRINT_LEN];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		bool ok = runfiles_fingerprint(cases[i].pubkey, fp);

		if (cases[i].want)
			tap_ok(ok && strcmp(fp, cases[i].want) == 0, "fingerprint of %s: %s",
			       cases[i].pubkey, ok ? fp : "(refused)");
		else
			tap_ok(!ok, "'%s' is not a key", cases[i].pubkey);
	}
}

int main(void)
{
	make_tree();
	test_resolve();
	test_under();
	test_check();
	test_default_events();
	test_fingerprint();
	remove_tree();
	return tap_done();
}
