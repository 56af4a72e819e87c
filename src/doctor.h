/* SPDX-License-Identifier: Apache-2.0
 * doctor.h - probes what isolation this host can really provide (airlock doctor).
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

/* Starts the probe in a child (cloned into the sandbox's namespaces), so
 * that it runs while the caller goes on; doctor_probe() collects it. Call
 * it while the process has a single thread (the child does not go through
 * fork()'s handlers). Without it, doctor_probe() runs the probe itself,
 * as doctor_probe_begin(true). With @use_cache, an answer cached earlier
 * in this boot for this binary, user, namespaces and limits is taken
 * instead (no child); without, the host is probed. Either way a probe
 * that runs replaces the cache with its answer (or removes it when
 * enforce mode cannot run). */
void doctor_probe_begin(bool use_cache);

/* Starts the transparent mode's probe (loads nftables rules in a fresh
 * network namespace: costly), which doctor_probe() then collects into
 * caps->transparent; without it caps->transparent is false. Call it only
 * when transparent mode is wanted, while the process has one thread. */
void doctor_transparent_begin(void);

/* Ends a probe doctor_probe_begin() started and nobody will collect
 * (the caller is about to exec): kills and reaps its child. */
void doctor_probe_cancel(void);

/* Probes by really creating the namespaces and loading the sandbox's
 * seccomp filter in short-lived children; never reads configuration files
 * to guess. */
void doctor_probe(struct doctor_caps *caps);

/* True when enforce mode can hold its claims with @caps. */
bool doctor_enforce_ready(const struct doctor_caps *caps);

/* The object `airlock doctor` prints: the probed values,
 * "enforce_ready" and "missing". */
json_t *doctor_caps_json(const struct doctor_caps *caps);

#endif /* AIRLOCK_DOCTOR_H */
