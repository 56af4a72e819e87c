/* SPDX-License-Identifier: Apache-2.0
 * run_hints.h - what `airlock run` tells the person at the end: why a
 * command was not found (a path the sandbox hides, and fs.ro as the fix),
 * and a summary of what the session blocked.
 */
#ifndef AIRLOCK_RUN_HINTS_H
#define AIRLOCK_RUN_HINTS_H

#include <stdio.h>

#include "sandbox.h"
#include "view.h"

/* The step of @plan that hides the host path @path from the agent (the
 * longest step path containing it, the later at equal length, when it is
 * a hiding kind: concealed, private, $HOME, fs.hide, masked), or NULL when
 * the agent sees @path. */
const struct view_step *run_hint_hidden_by(const struct view_plan *plan,
					   const char *path);

/* For a command not found (127) in the sandbox: when the host has @cmd
 * (a path, or a name on the agent's PATH from @cfg->envp) under a path
 * the sandbox hides, writes to @out one line naming it and fs.ro as the
 * fix, and returns 1; else writes nothing and returns 0. */
int run_hint_not_found(const struct sandbox_config *cfg, const char *cmd, FILE *out);

/* Reads the receipts of session @id in the events file @events and, when
 * some were blocked (decision block or would_block; env.drop and the
 * session's own receipts aside), writes to @out a summary: the count by
 * rule, the first few targets and the events path. Returns how many were
 * blocked, or -1 when @events cannot be read (nothing written). */
int run_summary(const char *events, const char *id, FILE *out);

#endif /* AIRLOCK_RUN_HINTS_H */
