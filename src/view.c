/* SPDX-License-Identifier: Apache-2.0
 * view.c - see view.h.
 *
 * DOC: Theory of Operation
 *
 * The agent sees the host read-only (sandbox.c binds the host root so and
 * adds /proc and /dev); this module lays the rest over it, as a list of
 * steps, each at one path:
 *
 *   conceal    where the caller's credentials and the host's daemons live
 *              (/root, /home, /run, /var/lib, ..., /etc/shadow, the SSH host
 *              keys, the caller's home directory): an empty read-only
 *              directory (tmpfs) or an empty unreadable file in its place;
 *   private    /tmp and /var/tmp: empty writable tmpfs of the session's own;
 *   home       the caller's $HOME: an empty writable tmpfs, mode 0700, at the
 *              same path, so that tools that keep caches there (npm, pip)
 *              work and find nothing of the caller's;
 *   rw, workspace   the host paths, writable (nosuid, nodev);
 *   pin        the workspace's .git bound over itself: still writable, but
 *              a mount point, which cannot be renamed, removed or replaced;
 *   ro, protect     host paths read-only: fs.ro shows one the view would
 *              hide; protect keeps .git/config, .git/hooks, .git/info and
 *              fs.protect in the workspace read-only (the host runs what is
 *              there later: hooks, core.fsmonitor) -- and, being mount
 *              points, they cannot be renamed or replaced either;
 *   hide, mask fs.hide and airlock's own files (policy, key, events, secret
 *              files): masked like conceal, but after everything else.
 *
 * Order: by the length of the path, so that a directory is dealt with
 * before anything below it, and at equal paths in the order of enum
 * view_kind (the later wins). So a workspace, fs.rw or fs.ro path below a
 * concealed one is bound into the view all the same (a project in
 * /root/src), while fs.hide and airlock's files are masked even inside a
 * path shown on purpose.
 *
 * A concealed or hidden directory that has paths to show below it is
 * mounted writable first, the mount points of those paths are made in it,
 * and then it is made read-only, before anything is shown in it.
 *
 * The plan is made by the supervisor, before the sandbox exists (paths are
 * resolved there, and errors reach the caller as one line); init applies
 * it in its copy of the supervisor's memory.
 *
 * Should: hide the caller's credentials, show what the policy lists, keep
 * the repository's configuration and hooks read-only. Mustn't: follow a
 * symbolic link into place, leave a concealed directory writable, let a
 * shown path uncover airlock's own files.
 */
#include "view.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/mount.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runfiles.h"
#include "util.h"

static const char *const kind_names[] = {
	[VIEW_CONCEAL] = "hidden path",
	[VIEW_PRIVATE] = "private directory",
	[VIEW_HOME] = "private home",
	[VIEW_RW] = "fs.rw path",
	[VIEW_WORKSPACE] = "workspace",
	[VIEW_PIN] = "pinned directory",
	[VIEW_RO] = "fs.ro path",
	[VIEW_PROTECT] = "protected path",
	[VIEW_HIDE] = "fs.hide path",
	[VIEW_MASK] = "airlock file",
};
_Static_assert(ARRAY_SIZE(kind_names) == VIEW_KIND_COUNT, "one name per view kind");

const char *view_kind_to_string(enum view_kind k)
{
	return (unsigned)k < VIEW_KIND_COUNT ? kind_names[k] : "?";
}

/* Hidden by default: the caller's credentials (home directories, the
 * shadow files, sudo's rules, the SSH host keys) and the host's daemons
 * (their sockets and state under /run and /var). */
static const char *const concealed[] = {
	"/root", "/home", "/run", "/var/run", "/var/lib", "/var/spool",
	"/var/mail", "/srv", "/mnt", "/media", "/etc/shadow", "/etc/shadow-",
	"/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
};
#define SSH_HOST_KEYS "/etc/ssh/ssh_host_*_key"

static const char *const private_dirs[] = { "/tmp", "/var/tmp" };

/* A $HOME here (or /) is not replaced: no one keeps credentials in the
 * system's own trees, and an empty one would take the programs away. */
static const char *const system_trees[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc", "/boot", "/proc", "/sys", "/dev",
};

/* The repository files the host acts on later, below the workspace's .git. */
static const struct {
	const char *name;
	bool dir;
} git_protected[] = {
	{ "config", false },
	{ "hooks", true },
	{ "info", true },
};

static void add(struct view_plan *plan, enum view_kind kind, char *path, bool dir)
{
	struct view_step *s;

	plan->steps = util_xrealloc(plan->steps, (plan->n + 1) * sizeof(*plan->steps));
	s = &plan->steps[plan->n++];
	s->kind = kind;
	s->path = path;
	s->dir = dir;
}

static char *join(const char *dir, const char *name)
{
	return util_xasprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
}

/* Adds @path, resolved, as @kind, if it exists on this host. */
static void add_existing(struct view_plan *plan, enum view_kind kind, const char *path)
{
	char *real = realpath(path, NULL);
	struct stat st;

	if (!real)
		return;
	if (strcmp(real, "/") == 0 || stat(real, &st) < 0) {
		free(real);
		return;
	}
	add(plan, kind, real, S_ISDIR(st.st_mode));
}

static bool in_system_tree(const char *path)
{
	size_t i;

	if (strcmp(path, "/") == 0)
		return true;
	for (i = 0; i < ARRAY_SIZE(system_trees); i++)
		if (runfiles_under(path, system_trees[i]))
			return true;
	return false;
}

/* The caller's home directory, as $HOME names it (else the password
 * database), becomes a private one; the password database's, when it is
 * another, is concealed as well. */
static void plan_home(struct view_plan *plan, const char *home)
{
	const struct passwd *pw = getpwuid(getuid());
	const char *pwdir = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
	char *real;
	struct stat st;

	if (!home || home[0] != '/')
		home = pwdir;
	if (home) {
		real = realpath(home, NULL);
		if (real && !in_system_tree(real) && stat(real, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			add(plan, VIEW_HOME, real, true);
		else
			free(real);
	}
	if (pwdir && (!home || strcmp(pwdir, home) != 0)) {
		real = realpath(pwdir, NULL);
		if (real && !in_system_tree(real))
			add_existing(plan, VIEW_CONCEAL, real);
		free(real);
	}
}

/* .git/config, hooks and info, and .git itself, in the workspace @ws. */
static int plan_git(struct view_plan *plan, const char *ws, char *err, size_t errlen)
{
	char *git = join(ws, ".git"), *p = NULL;
	struct stat st;
	size_t i;
	int ret = -1;

	if (lstat(git, &st) < 0) {
		ret = errno == ENOENT ? 0 : -1;
		if (ret < 0)
			snprintf(err, errlen, "%s: %s", git, strerror(errno));
		goto out;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "the workspace's .git is a symbolic link: the agent "
			 "could replace it; make it a directory or a gitdir file");
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		/* A gitdir file (a linked worktree, a submodule): it may not
		 * be pointed elsewhere. */
		add(plan, VIEW_PROTECT, git, false);
		git = NULL;
		ret = 0;
		goto out;
	}
	for (i = 0; i < ARRAY_SIZE(git_protected); i++) {
		free(p);
		p = join(git, git_protected[i].name);
		if (lstat(p, &st) == 0) {
			if (S_ISLNK(st.st_mode)) {
				snprintf(err, errlen, "%s is a symbolic link: the agent could "
					 "replace it; make it a %s of its own", p,
					 git_protected[i].dir ? "directory" : "file");
				goto out;
			}
			add(plan, VIEW_PROTECT, p, S_ISDIR(st.st_mode));
			p = NULL;
			continue;
		}
		/* Missing: made empty, or the agent could make it. */
		if (errno == ENOENT) {
			int fd = -1;

			if (git_protected[i].dir ? mkdir(p, 0755) == 0
			    : (fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					 O_CLOEXEC, 0644)) >= 0) {
				if (fd >= 0)
					close(fd);
				add(plan, VIEW_PROTECT, p, git_protected[i].dir);
				p = NULL;
				continue;
			}
		}
		snprintf(err, errlen, "cannot keep %s read-only: %s", p, strerror(errno));
		goto out;
	}
	add(plan, VIEW_PIN, git, true);
	git = NULL;
	ret = 0;
out:
	free(git);
	free(p);
	return ret;
}

/* fs.protect path @rel: read-only, and every directory between it and the
 * workspace pinned, so that none can be renamed away and replaced. */
static int plan_protect(struct view_plan *plan, const char *ws, const char *rel,
			char *err, size_t errlen)
{
	char *full = join(ws, rel);
	size_t wslen = strlen(full) - strlen(rel);
	char *p;
	struct stat st;
	int ret = -1;

	for (p = full + wslen;; p++) {
		bool last = *p == '\0';

		if (!last && *p != '/')
			continue;
		*p = '\0';
		if (lstat(full, &st) < 0) {
			if (errno == ENOENT)
				snprintf(err, errlen, "fs.protect path %s does not exist in the "
					 "workspace %s: create it (an empty file or directory "
					 "will do), or the agent could", rel, ws);
			else
				snprintf(err, errlen, "fs.protect path %s: %s", full,
					 strerror(errno));
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			snprintf(err, errlen, "fs.protect path %s: %s is a symbolic link, which "
				 "the agent could replace; protect what it points to", rel, full);
			goto out;
		}
		if (last) {
			add(plan, VIEW_PROTECT, util_xstrdup(full), S_ISDIR(st.st_mode));
			break;
		}
		add(plan, VIEW_PIN, util_xstrdup(full), true);
		*p = '/';
	}
	ret = 0;
out:
	free(full);
	return ret;
}

static int step_cmp(const void *a, const void *b)
{
	const struct view_step *x = a, *y = b;
	size_t lx = strlen(x->path), ly = strlen(y->path);

	if (lx != ly)
		return lx < ly ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->path, y->path);
}

int view_plan_build(const struct sandbox_config *cfg, struct view_plan *plan,
		    char *err, size_t errlen)
{
	struct stat st;
	glob_t g;
	size_t i, o;

	memset(plan, 0, sizeof(*plan));
	for (i = 0; i < ARRAY_SIZE(concealed); i++)
		add_existing(plan, VIEW_CONCEAL, concealed[i]);
	memset(&g, 0, sizeof(g));
	if (glob(SSH_HOST_KEYS, GLOB_NOSORT, NULL, &g) == 0)
		for (i = 0; i < g.gl_pathc; i++)
			add_existing(plan, VIEW_CONCEAL, g.gl_pathv[i]);
	globfree(&g);
	for (i = 0; i < ARRAY_SIZE(private_dirs); i++) {
		char *real = realpath(private_dirs[i], NULL);

		if (real && strcmp(real, "/") != 0 && stat(real, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			add(plan, VIEW_PRIVATE, real, true);
		else
			free(real);
	}
	plan_home(plan, cfg->home);

	add(plan, VIEW_WORKSPACE, util_xstrdup(cfg->workspace), true);
	for (i = 0; i < cfg->nrw; i++) {
		if (stat(cfg->rw[i], &st) < 0) {
			snprintf(err, errlen, "fs.rw path %s: %s", cfg->rw[i], strerror(errno));
			return -1;
		}
		add(plan, VIEW_RW, util_xstrdup(cfg->rw[i]), S_ISDIR(st.st_mode));
	}
	for (i = 0; i < cfg->nro; i++) {
		if (stat(cfg->ro[i], &st) < 0) {
			snprintf(err, errlen, "fs.ro path %s: %s", cfg->ro[i], strerror(errno));
			return -1;
		}
		add(plan, VIEW_RO, util_xstrdup(cfg->ro[i]), S_ISDIR(st.st_mode));
	}
	if (plan_git(plan, cfg->workspace, err, errlen) < 0)
		return -1;
	for (i = 0; i < cfg->nprotect; i++)
		if (plan_protect(plan, cfg->workspace, cfg->protect[i], err, errlen) < 0)
			return -1;
	for (i = 0; i < cfg->nhide; i++)
		add(plan, VIEW_HIDE, util_xstrdup(cfg->hide[i]), false);
	for (i = 0; i < cfg->nmask; i++)
		add(plan, VIEW_MASK, util_xstrdup(cfg->mask[i]), false);

	qsort(plan->steps, plan->n, sizeof(*plan->steps), step_cmp);
	/* The same step twice (a pin of two fs.protect paths) is done once. */
	for (i = 0, o = 0; i < plan->n; i++) {
		if (o > 0 && plan->steps[o - 1].kind == plan->steps[i].kind &&
		    strcmp(plan->steps[o - 1].path, plan->steps[i].path) == 0) {
			free(plan->steps[i].path);
			continue;
		}
		plan->steps[o++] = plan->steps[i];
	}
	plan->n = o;
	return 0;
}

void view_plan_free(struct view_plan *plan)
{
	size_t i;

	for (i = 0; i < plan->n; i++)
		free(plan->steps[i].path);
	free(plan->steps);
	memset(plan, 0, sizeof(*plan));
}

/* --- init side ------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *what, const char *path)
{
	int e = errno ? errno : EINVAL;

	snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
	return -e;
}

/* mkdir -p; existing components are fine. */
static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	if (!util_strlcpy(buf, path, sizeof(buf))) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* A mount point at @dst: a directory, or an (empty) file. Existing ones
 * are used as they are. */
static int mount_point(const char *dst, bool dir)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;

	if (dir)
		return mkdir_p(dst, 0755);
	if (access(dst, F_OK) == 0)
		return 0;
	if (!util_strlcpy(parent, dst, sizeof(parent))) {
		errno = ENAMETOOLONG;
		return -1;
	}
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (mkdir_p(parent, 0755) < 0)
			return -1;
	}
	fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static bool shows(enum view_kind k)
{
	switch (k) {
	case VIEW_PRIVATE:
	case VIEW_HOME:
	case VIEW_RW:
	case VIEW_WORKSPACE:
	case VIEW_PIN:
	case VIEW_RO:
	case VIEW_PROTECT:
		return true;
	case VIEW_CONCEAL:
	case VIEW_HIDE:
	case VIEW_MASK:
	case VIEW_KIND_COUNT:
		break;
	}
	return false;
}

static int join_into(char *out, size_t len, const char *root, const char *path)
{
	if ((size_t)snprintf(out, len, "%s%s", root, path) >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Masks step @i: an empty directory, read-only once the mount points of
 * the paths shown below it are made in it, or an empty unreadable file.
 * A path the view does not show (under a private tmpfs, or concealed
 * already) needs no mask. */
static int hide(const struct view_plan *plan, size_t i, const char *new_root,
		const char *mask_file, char *err, size_t errlen)
{
	const struct view_step *s = &plan->steps[i];
	char dst[PATH_MAX], below[PATH_MAX];
	struct stat st;
	size_t j;

	if (join_into(dst, sizeof(dst), new_root, s->path) < 0)
		return fail(err, errlen, "hiding", s->path);
	if (lstat(dst, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return fail(err, errlen, "hiding", s->path);
	}
	if (S_ISLNK(st.st_mode)) {
		errno = ELOOP;
		return fail(err, errlen, "hiding (a symbolic link in the sandbox view)",
			    s->path);
	}
	if (!S_ISDIR(st.st_mode)) {
		if (mount(mask_file, dst, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
			return fail(err, errlen, "hiding file", s->path);
		return 0;
	}
	if (mount("airlock-hidden", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=4k") < 0)
		return fail(err, errlen, "hiding directory", s->path);
	for (j = i + 1; j < plan->n; j++) {
		const struct view_step *t = &plan->steps[j];

		if (!shows(t->kind) || strcmp(t->path, s->path) == 0 ||
		    !runfiles_under(t->path, s->path))
			continue;
		if (join_into(below, sizeof(below), new_root, t->path) < 0 ||
		    mount_point(below, t->dir) < 0)
			return fail(err, errlen, "making a mount point for", t->path);
	}
	if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID |
		  MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail(err, errlen, "making read-only the hidden directory", s->path);
	return 0;
}

static int private_tmpfs(const struct view_step *s, const char *new_root,
			 char *err, size_t errlen)
{
	char dst[PATH_MAX];
	const char *opts = s->kind == VIEW_HOME ? "mode=0700" : "mode=01777";

	if (join_into(dst, sizeof(dst), new_root, s->path) < 0 || mount_point(dst, true) < 0)
		return fail(err, errlen, "making a mount point for", s->path);
	if (mount("airlock-private", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return fail(err, errlen, s->kind == VIEW_HOME ? "mounting the private home at"
			    : "mounting the private", s->path);
	return 0;
}

/* Binds host @s->path at the same path in the view, writable or not; never
 * with setuid files or device nodes that work. */
static int bind(const struct view_step *s, bool writable, const char *new_root,
		const char *old_root, char *err, size_t errlen)
{
	const char *what = view_kind_to_string(s->kind);
	char src[PATH_MAX], dst[PATH_MAX];
	struct mount_attr attr;
	struct stat st;

	if (join_into(src, sizeof(src), old_root, s->path) < 0 ||
	    join_into(dst, sizeof(dst), new_root, s->path) < 0 || stat(src, &st) < 0)
		return fail(err, errlen, what, s->path);
	if (mount_point(dst, S_ISDIR(st.st_mode)) < 0)
		return fail(err, errlen, "making a mount point for", s->path);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(err, errlen, "binding", s->path);
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (!writable)
		attr.attr_set |= MOUNT_ATTR_RDONLY;
	if (mount_setattr(AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) < 0)
		return fail(err, errlen, writable ? "making nosuid and nodev" :
			    "making read-only", s->path);
	return 0;
}

int view_apply(const struct view_plan *plan, const char *new_root,
	       const char *old_root, const char *mask_file, char *err, size_t errlen)
{
	size_t i;
	int r = 0;

	for (i = 0; i < plan->n && r == 0; i++) {
		const struct view_step *s = &plan->steps[i];

		errno = 0;
		switch (s->kind) {
		case VIEW_CONCEAL:
		case VIEW_HIDE:
		case VIEW_MASK:
			r = hide(plan, i, new_root, mask_file, err, errlen);
			break;
		case VIEW_PRIVATE:
		case VIEW_HOME:
			r = private_tmpfs(s, new_root, err, errlen);
			break;
		case VIEW_RW:
		case VIEW_WORKSPACE:
		case VIEW_PIN:
			r = bind(s, true, new_root, old_root, err, errlen);
			break;
		case VIEW_RO:
		case VIEW_PROTECT:
			r = bind(s, false, new_root, old_root, err, errlen);
			break;
		case VIEW_KIND_COUNT:
			ASSERT(!"a view step of no kind");
		}
	}
	return r;
}

size_t view_writable(const struct view_plan *plan, const char **out, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < plan->n; i++) {
		switch (plan->steps[i].kind) {
		case VIEW_PRIVATE:
		case VIEW_HOME:
		case VIEW_RW:
		case VIEW_WORKSPACE:
			if (n < max)
				out[n] = plan->steps[i].path;
			n++;
			break;
		case VIEW_CONCEAL:
		case VIEW_PIN:
		case VIEW_RO:
		case VIEW_PROTECT:
		case VIEW_HIDE:
		case VIEW_MASK:
		case VIEW_KIND_COUNT:
			break;
		}
	}
	return n;
}
