/* SPDX-License-Identifier: Apache-2.0
 * doctor.h - probes what isolation this host can really provide (SPEC §7).
 */
#ifndef AIRLOCK_DOCTOR_H
#define AIRLOCK_DOCTOR_H

#include <jansson.h>
#include <stdbool.h>

struct doctor_caps {
	bool userns;
	bool netns;
	bool pidns;
	bool mountns;
	bool ipcns;
	bool utsns;
	bool seccomp;
	int landlock; /* Landlock ABI version, 0 when absent */
	/* Transparent mode works: in a fresh user and network namespace
	 * the redirect loads and a redirected connection reports its
	 * original destination (transparent_selftest). */
	bool transparent;
	/* Set by the caller, not probed: the policy needs transparent mode
	 * in enforce mode, so without it enforce is not ready and
	 * "missing" names it. */
	bool need_transparent;
};

/* Probes by really creating each namespace and loading a seccomp filter in
 * short-lived children; never reads configuration files to guess. */
void doctor_probe(struct doctor_caps *caps);

/* True when enforce mode can hold its claims with @caps. */
bool doctor_enforce_ready(const struct doctor_caps *caps);

/* The object of SPEC §7 (new reference): the probed values,
 * "enforce_ready" and "missing". */
json_t *doctor_caps_json(const struct doctor_caps *caps);

#endif /* AIRLOCK_DOCTOR_H */
