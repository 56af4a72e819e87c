/* SPDX-License-Identifier: Apache-2.0
 * export.h - the OCSF mapping of `airlock export` (cmd_export.c), one
 * receipt at a time: shared with the live feed (feed.c), so that a
 * record a collector receives is the event `airlock export` writes for
 * the same line.
 */
#ifndef AIRLOCK_EXPORT_H
#define AIRLOCK_EXPORT_H

#include <jansson.h>

#include "events.h"

/* What a session's later lines need from its first. Zero it at the start
 * of each stream. */
struct export_session {
	char argv0[256];
};

/* The OCSF events of the receipt @ln (ln->obj not NULL): an array of its
 * activity event and, for a block or a would_block, its Detection
 * Finding. @path names the stream in metadata.log_name and
 * unmapped.airlock.source (with ln->lineno when not 0). Notes in @s
 * what a stream's first line tells the later ones. */
json_t *export_ocsf_events(const struct events_line *ln, struct export_session *s,
			   const char *path);

#endif /* AIRLOCK_EXPORT_H */
