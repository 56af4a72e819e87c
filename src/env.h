/* SPDX-License-Identifier: Apache-2.0
 * env.h - the agent's environment.
 */
#ifndef AIRLOCK_ENV_H
#define AIRLOCK_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "policy.h"

struct env_result {
	char **envp;     /* NULL-terminated "NAME=VALUE" strings */
	size_t n;
	char **dropped;  /* names (not values) enforce drops */
	size_t ndropped;
};

/* True for the variables airlock itself sets in the sandbox. */
bool env_is_airlock_var(const char *name, size_t len);

/* Builds the agent's environment from the caller's @environ:
 * variables passing env.pass, then env.set, the placeholders of @b and
 * airlock's proxy variables (pointing at 127.0.0.1:@proxy_port). A secret's
 * from_env variable never passes. Any other variable is listed in
 * `dropped`, and passed too when @pass_dropped (shadow mode). */
void env_build(const struct policy *p, const struct broker *b, char **environ_in,
	       uint16_t proxy_port, bool pass_dropped, struct env_result *out);

/* Sets @name to @value in @r: replaces the variable when it is there,
 * else adds it. */
void env_result_set(struct env_result *r, const char *name, const char *value);

void env_result_free(struct env_result *r);

#endif /* AIRLOCK_ENV_H */
