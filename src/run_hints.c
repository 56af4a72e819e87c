/* SPDX-License-Identifier: Apache-2.0
 * run_hints.c - what `airlock run` tells the person at the end.
 *
 * DOC: Theory of Operation
 *
 * A command not found (127) in the sandbox is often one the host has,
 * installed under a path the sandbox hides: npm, nvm and pipx put agent
 * CLIs under $HOME, which the agent sees private and empty. The view plan
 * (view.c) says what hides a host path; when the command (a path, or a
 * name on the agent's PATH) exists on the host under such a path, one
 * line names the path and fs.ro, which shows a host path read-only even
 * where the view hides it.
 *
 * The summary of blocks is read back from the events file at the end of
 * the session (the receipts are its only record of them): the count by
 * rule, the first few targets and the path to give `airlock report`. It
 * counts every receipt of the session with decision block or would_block,
 * except env.drop (one per dropped variable: the session.start line says
 * so already) and the session's own lines.
 */
#include "run_hints.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "util.h"

#define SUMMARY_TARGETS 3
#define SUMMARY_RULES 8

static bool path_contains(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(dir, path, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static bool hides(enum view_kind k)
{
	switch (k) {
	case VIEW_CONCEAL:
	case VIEW_PRIVATE:
	case VIEW_HOME:
	case VIEW_HIDE:
	case VIEW_MASK:
		return true;
	case VIEW_RW:
	case VIEW_WORKSPACE:
	case VIEW_PIN:
	case VIEW_RO:
	case VIEW_PROTECT:
	case VIEW_KIND_COUNT:
	default:
		return false;
	}
}

const struct view_step *run_hint_hidden_by(const struct view_plan *plan,
					   const char *path)
{
	const struct view_step *best = NULL;
	size_t i, best_len = 0;

	for (i = 0; i < plan->n; i++) {
		const struct view_step *s = &plan->steps[i];
		size_t len = strlen(s->path);

		if (!path_contains(s->path, path))
			continue;
		if (!best || len >= best_len) {
			best = s;
			best_len = len;
		}
	}
	return best && hides(best->kind) ? best : NULL;
}

/* What the hint says: the command found on the host (@path), and the
 * host path the sandbox hides (@hidden: @path itself, where its symbolic
 * links lead, or its #! interpreter), by @step. */
struct found {
	char *path;
	char *hidden;
	const char *how; /* "", "whose target ", "whose interpreter " */
	const struct view_step *step;
};

static void found_free(struct found *f)
{
	free(f->path);
	free(f->hidden);
	memset(f, 0, sizeof(*f));
}

static bool is_executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static bool find_hidden(const struct view_plan *plan, const char *agent_path,
			const char *cmd, const char *workspace, int depth,
			struct found *f);

/* The #! interpreter of @path, when it is hidden ("#!/usr/bin/env NAME"
 * looks NAME up on the agent's PATH). */
static bool interpreter_hidden(const struct view_plan *plan, const char *agent_path,
			       const char *path, const char *workspace, int depth,
			       struct found *f)
{
	char head[256], *p, *e;
	struct found sub = { 0 };
	ssize_t n;
	int fd;

	if (depth > 1)
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, head, sizeof(head) - 1);
	close(fd);
	if (n < 3 || head[0] != '#' || head[1] != '!')
		return false;
	head[n] = '\0';
	p = head + 2;
	p += strspn(p, " \t");
	e = p + strcspn(p, " \t\r\n");
	if (strncmp(p, "/usr/bin/env", (size_t)(e - p)) == 0 && e - p == 12) {
		p = e + strspn(e, " \t");
		e = p + strcspn(p, " \t\r\n");
	}
	*e = '\0';
	if (!*p || !find_hidden(plan, agent_path, p, workspace, depth + 1, &sub))
		return false;
	f->hidden = sub.hidden;
	sub.hidden = NULL;
	f->how = "whose interpreter ";
	f->step = sub.step;
	found_free(&sub);
	return true;
}

/* Is @path an executable on the host that the agent cannot run because
 * of a hidden path? */
static bool check_candidate(const struct view_plan *plan, const char *agent_path,
			    const char *path, const char *workspace, int depth,
			    struct found *f)
{
	const struct view_step *s;
	char *real;

	if (!is_executable(path))
		return false;
	s = run_hint_hidden_by(plan, path);
	if (s) {
		f->path = util_xstrdup(path);
		f->hidden = util_xstrdup(path);
		f->how = "";
		f->step = s;
		return true;
	}
	real = realpath(path, NULL);
	s = real ? run_hint_hidden_by(plan, real) : NULL;
	if (s) {
		f->path = util_xstrdup(path);
		f->hidden = real;
		f->how = "whose target ";
		f->step = s;
		return true;
	}
	free(real);
	if (interpreter_hidden(plan, agent_path, path, workspace, depth, f)) {
		f->path = util_xstrdup(path);
		return true;
	}
	return false;
}

static bool find_hidden(const struct view_plan *plan, const char *agent_path,
			const char *cmd, const char *workspace, int depth,
			struct found *f)
{
	const char *p, *end;
	bool r = false;

	if (strchr(cmd, '/')) {
		char *path = cmd[0] == '/' ? util_xstrdup(cmd)
					   : util_xasprintf("%s/%s", workspace, cmd);

		r = check_candidate(plan, agent_path, path, workspace, depth, f);
		free(path);
		return r;
	}
	for (p = agent_path; !r; p = end + 1) {
		size_t n;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		n = (size_t)(end - p);
		if (n > 0 && p[0] == '/') {
			char *path = util_xasprintf("%.*s/%s", (int)n, p, cmd);

			r = check_candidate(plan, agent_path, path, workspace, depth, f);
			free(path);
		}
		if (!*end)
			break;
	}
	return r;
}

static const char *agent_path(const struct sandbox_config *cfg)
{
	size_t i;

	for (i = 0; cfg->envp && cfg->envp[i]; i++)
		if (strncmp(cfg->envp[i], "PATH=", 5) == 0)
			return cfg->envp[i] + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

int run_hint_not_found(const struct sandbox_config *cfg, const char *cmd, FILE *out)
{
	struct view_plan plan = { 0 };
	struct found f = { 0 };
	char err[512];
	int r = 0;

	if (!cmd || !*cmd)
		return 0;
	if (view_plan_build(cfg, &plan, err, sizeof(err)) < 0) {
		view_plan_free(&plan);
		return 0;
	}
	if (find_hidden(&plan, agent_path(cfg), cmd, cfg->workspace, 0, &f)) {
		char *dir = util_xstrdup(f.hidden), *slash = strrchr(dir, '/');

		if (slash && slash != dir)
			*slash = '\0';
		fprintf(out,
			"airlock: run: %s: not found in the sandbox, but the host has %s",
			cmd, f.path);
		if (*f.how)
			fprintf(out, ", %s%s is under", f.how, f.hidden);
		else
			fputs(", under", out);
		fprintf(out,
			" %s, which the sandbox hides%s; show it read-only with fs.ro, "
			"e.g. \"fs\": {\"ro\": [\"%s\"]} (and what it needs, such as its "
			"runtime)\n",
			f.step->path,
			f.step->kind == VIEW_HOME ? " (the agent's $HOME is private and empty)" : "",
			dir);
		free(dir);
		r = 1;
	}
	found_free(&f);
	view_plan_free(&plan);
	return r;
}

/* ---- the summary of blocks ------------------------------------------- */

struct rule_count {
	char *rule;
	int n;
};

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* What a receipt refused, for a person: "GET host:80/path", a secret's
 * name and host, a variable's name, else its type. */
static char *target_text(json_t *r)
{
	json_t *s = json_object_get(r, "subject");
	const char *host = str(s, "host"), *method = str(s, "method"), *path = str(s, "path");
	json_int_t port = json_integer_value(json_object_get(s, "port"));

	if (*host) {
		char portbuf[24] = "";

		if (port > 0)
			snprintf(portbuf, sizeof(portbuf), ":%lld", (long long)port);
		if (*str(s, "secret"))
			return util_xasprintf("secret %s to %s%s", str(s, "secret"), host, portbuf);
		return util_xasprintf("%s%s%s%s%.80s", method, *method ? " " : "", host,
				      portbuf, path);
	}
	if (*str(s, "name"))
		return util_xasprintf("%s %s", str(r, "type"), str(s, "name"));
	return util_xstrdup(str(r, "type"));
}

static bool counted(json_t *r, const char *id)
{
	const char *type = str(r, "type"), *d = str(r, "decision");

	if (strcmp(str(r, "session"), id) != 0)
		return false;
	if (strcmp(d, "block") != 0 && strcmp(d, "would_block") != 0)
		return false;
	return strcmp(type, "env.drop") != 0 && strncmp(type, "session.", 8) != 0;
}

static int by_count(const void *a, const void *b)
{
	const struct rule_count *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->rule, y->rule);
}

int run_summary(const char *events, const char *id, FILE *out)
{
	struct rule_count *rules = NULL;
	char *targets[SUMMARY_TARGETS];
	size_t nrules = 0, ntargets = 0, i, cap = 0;
	int blocked = 0, would = 0;
	char *line = NULL;
	size_t linecap = 0;
	bool plain = true;
	const char *c;
	FILE *f;

	for (c = id; *c; c++)
		if (*c == '"' || *c == '\\' || *c == '/' || (unsigned char)*c < 0x20 ||
		    (unsigned char)*c >= 0x7f)
			plain = false;
	f = fopen(events, "re");
	if (!f)
		return -1;
	while (getline(&line, &linecap, f) > 0) {
		json_t *r;
		const char *rule;

		/* A stream that many sessions appended to is read to its end
		 * after every session: only a line that names this session
		 * and says "block" is parsed (the id and "block" appear in
		 * it as they are: an id with a byte that JSON escapes skips
		 * this shortcut). */
		if (plain && (!strstr(line, id) || !strstr(line, "block")))
			continue;
		r = json_loads(line, 0, NULL);
		if (!r)
			continue;
		if (!counted(r, id)) {
			json_decref(r);
			continue;
		}
		if (strcmp(str(r, "decision"), "block") == 0)
			blocked++;
		else
			would++;
		rule = *str(r, "rule") ? str(r, "rule") : str(r, "type");
		for (i = 0; i < nrules; i++)
			if (strcmp(rules[i].rule, rule) == 0)
				break;
		if (i == nrules) {
			if (nrules == cap) {
				cap = cap ? 2 * cap : 8;
				rules = util_xrealloc(rules, cap * sizeof(*rules));
			}
			rules[nrules].rule = util_xstrdup(rule);
			rules[nrules].n = 0;
			nrules++;
		}
		rules[i].n++;
		if (ntargets < SUMMARY_TARGETS) {
			char *t = target_text(r), *u = util_xasprintf("%s (%s)", t, rule);

			/* The first few distinct ones. */
			for (i = 0; i < ntargets; i++)
				if (strcmp(targets[i], u) == 0)
					break;
			if (i == ntargets)
				targets[ntargets++] = u;
			else
				free(u);
			free(t);
		}
		json_decref(r);
	}
	free(line);
	fclose(f);
	if (blocked + would == 0) {
		free(rules);
		return 0;
	}
	qsort(rules, nrules, sizeof(*rules), by_count);
	fputs("airlock: run: ", out);
	if (blocked)
		fprintf(out, "blocked %d", blocked);
	if (blocked && would)
		fputs(", ", out);
	if (would)
		fprintf(out, "would have blocked %d (shadow mode)", would);
	fputs(": ", out);
	for (i = 0; i < nrules; i++) {
		if (i == SUMMARY_RULES) {
			fprintf(out, ", %zu more rules", nrules - i);
			break;
		}
		fprintf(out, "%s%s %d", i ? ", " : "", rules[i].rule, rules[i].n);
	}
	fputc('\n', out);
	for (i = 0; i < ntargets; i++) {
		fprintf(out, "airlock: run:   %s\n", targets[i]);
		free(targets[i]);
	}
	if (blocked + would > (int)ntargets)
		fprintf(out, "airlock: run:   ... %d more (repeats included)\n",
			blocked + would - (int)ntargets);
	fprintf(out, "airlock: run: every receipt: %s ('airlock report' renders it; "
		     "--quiet omits this summary)\n", events);
	for (i = 0; i < nrules; i++)
		free(rules[i].rule);
	free(rules);
	return blocked + would;
}
