/* SPDX-License-Identifier: Apache-2.0
 * sandbox_filter.h - the agent's seccomp filter, compiled at build time by
 * src/gen/mkseccomp.c into build/gen/sandbox_filter.c (what it does is
 * described there and in docs/SANDBOX.md).
 */
#ifndef AIRLOCK_SANDBOX_FILTER_H
#define AIRLOCK_SANDBOX_FILTER_H

#include <linux/filter.h>

/* The BPF program, sandbox_filter_len instructions; load it with
 * seccomp(SECCOMP_SET_MODE_FILTER) after no_new_privs. Its user
 * notifications go to whoever holds the listener it returns. */
extern const struct sock_filter sandbox_filter[];
extern const unsigned short sandbox_filter_len;

/* Loads sandbox_filter on the calling thread (no_new_privs must be set)
 * with a listener for its user notifications. Returns the listener
 * (close-on-exec) or -errno. Defined in sandbox.c. */
int sandbox_filter_load(void);

#endif /* AIRLOCK_SANDBOX_FILTER_H */
