/* SPDX-License-Identifier: Apache-2.0
 * view.h - the agent's filesystem view: what the sandbox shows of the
 * host, what it hides, what it makes writable or keeps read-only, and in
 * which order init mounts it.
 */
#ifndef AIRLOCK_VIEW_H
#define AIRLOCK_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "sandbox.h"

/* What one step of the view does at its path. Steps run in the order of
 * their paths' lengths (a directory before what lies below it), and at
 * the same path in this order, the later one winning. */
enum view_kind {
	VIEW_CONCEAL = 0, /* hidden by default (credentials, daemons' sockets) */
	VIEW_PRIVATE,     /* an empty private writable tmpfs, mode 01777 */
	VIEW_HOME,        /* the private $HOME: empty, writable, mode 0700 */
	VIEW_RW,          /* fs.rw: the host path, writable */
	VIEW_WORKSPACE,   /* the workspace: the host path, writable */
	VIEW_PIN,         /* bound over itself, writable: cannot be renamed */
	VIEW_RO,          /* fs.ro: the host path, read-only */
	VIEW_PROTECT,     /* .git/config, hooks, info, fs.protect: read-only */
	VIEW_HIDE,        /* fs.hide */
	VIEW_MASK,        /* airlock's own files */
	VIEW_KIND_COUNT
};

const char *view_kind_to_string(enum view_kind k);

struct view_step {
	enum view_kind kind;
	char *path;  /* absolute, resolved */
	bool dir;    /* a directory on the host (or a tmpfs of ours) */
};

struct view_plan {
	struct view_step *steps; /* in the order they are applied */
	size_t n;
};

/* Supervisor side, before the sandbox exists: lists and orders the steps
 * for @cfg, resolving the default hidden paths and $HOME on this host.
 * An existing repository's missing .git/hooks and .git/info are created
 * empty in the workspace, and a missing .git/config as an empty file.
 * Returns 0, or -1 with one line in @err (an fs.ro or fs.protect path that
 * does not exist, a protected path that is a symbolic link). Free the plan
 * with view_plan_free() either way. */
int view_plan_build(const struct sandbox_config *cfg, struct view_plan *plan,
		    char *err, size_t errlen);

void view_plan_free(struct view_plan *plan);

/* Init side: applies @plan to the view being built at @new_root, taking
 * host paths from @old_root, and /mask (an empty file of mode 0) for
 * masking files. Returns 0, or -errno with what failed in @err. */
int view_apply(const struct view_plan *plan, const char *new_root,
	       const char *old_root, const char *mask_file, char *err, size_t errlen);

/* The paths the agent may write below (for Landlock): the workspace, the
 * fs.rw paths, the private tmpfs and $HOME. Fills at most @max entries of
 * @out (pointers into @plan) and returns how many there are. */
size_t view_writable(const struct view_plan *plan, const char **out, size_t max);

#endif /* AIRLOCK_VIEW_H */
