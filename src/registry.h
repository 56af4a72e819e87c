/* SPDX-License-Identifier: Apache-2.0
 * registry.h - the one registry of every value the proxy injects
 * (brokered secrets, the git token configured or minted, and any kind
 * added later), each with the placeholder the agent holds for it. The
 * response scrubber works from it, so that a value the proxy injects
 * never reaches the agent, whatever its kind.
 *
 * One registry per worker process (single-threaded: no locks). Values
 * are only ever added (a refreshed token joins the old ones, which an
 * upstream may still echo): registry_add() builds a new scrubber set; a
 * stream that holds a reference to an older set (registry_acquire())
 * keeps it alive until it releases it.
 *
 *	r = registry_new();
 *	registry_add(r, "api", value, len, placeholder, phlen);
 *	s = registry_acquire(r);          NULL while the registry is empty
 *	scrub_new(registry_scrub(s)) ...  registry_name(s, k) for receipts
 *	registry_release(s);
 *	registry_free(r);                 after every release
 *
 * Copies of values are wiped when freed.
 */
#ifndef AIRLOCK_REGISTRY_H
#define AIRLOCK_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "scrub.h"

#define REGISTRY_MAX 1024          /* distinct values per process */
#define REGISTRY_VALUE_MAX 65536   /* bytes of one value */
#define REGISTRY_NAME_MAX 128

struct registry;
struct registry_set;

struct registry *registry_new(void);
void registry_free(struct registry *r);

/* Registers @value (copied) with @placeholder under @name (a secret's
 * name, "git.token"). Returns 1 when added, 0 when the value was already
 * registered (its first placeholder stays), -1 when it cannot be: empty,
 * too long, a control byte (< 0x20, 0x7f) in it, an empty placeholder, a
 * name too long, or the registry full. A value that cannot be registered
 * must not be injected: the caller fails closed. */
int registry_add(struct registry *r, const char *name, const char *value, size_t len,
		 const char *placeholder, size_t phlen);

size_t registry_count(const struct registry *r);

/* A reference to the scrubber set of every value registered so far, or
 * NULL when there is none. */
struct registry_set *registry_acquire(struct registry *r);
void registry_release(struct registry_set *s);

const struct scrub_set *registry_scrub(const struct registry_set *s);
/* The name needle @k of the set was registered under. */
const char *registry_name(const struct registry_set *s, size_t k);

#endif /* AIRLOCK_REGISTRY_H */
