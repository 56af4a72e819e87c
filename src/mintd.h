/* SPDX-License-Identifier: Apache-2.0
 * mintd.h - the GitHub App token's mint as a process of its own
 * ("airlock-mint"): it holds no key and no secret value, is handed a
 * signed JWT and a scope for each mint, makes the HTTPS request and
 * parses the answer; the supervisor checks what it says back.
 *
 * Usage (supervisor.c, gitcred.c):
 *
 *	mintd_start(&m, p, err, len);     before the secrets are read
 *	mintd_mint(&m, jwt, id, &asked, &tok, err, len);   each mint
 *	mintd_reaped(&m, wstatus);        when the supervisor reaps it
 *	mintd_stop(&m);                   at the end: it exits
 */
#ifndef AIRLOCK_MINTD_H
#define AIRLOCK_MINTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ghapp.h"
#include "policy.h"

#define MINTD_PROC_NAME "airlock-mint"

/* The longest error the supervisor takes from the mint (longer: cut). */
#define MINTD_ERROR_MAX 512
/* How long the supervisor waits for an answer: the mint's own bound, and
 * some. */
#define MINTD_WAIT_MS (GHAPP_TIMEOUT_MS + 5000)

struct mintd {
	pid_t pid;          /* -1: not running (never started, or reaped) */
	int ctl;            /* the supervisor's end of its channel, or -1 */
	int wstatus;        /* once reaped */
	bool reaped;
	uint32_t last_id;   /* of the last request */
	char fatal[256];    /* its last words (MSG_FATAL), or "" */
};

/* Forks the mint process for @p's git.github_app: child_start() (not
 * dumpable, dies with the supervisor, only stderr and its channel kept,
 * the environment wiped but for OpenSSL's and c-ares' variables), then
 * confined (CONFINE_MINT: no capabilities, a TCP/UDP client's calls, no
 * exec; Landlock: only the trust store, resolv.conf and the like, and
 * the policy's CA files readable). Call it before any secret value is in
 * the caller's memory. Returns 0, or -1 with @err. */
int mintd_start(struct mintd *m, const struct policy *p, char *err, size_t errlen);

/* One mint (blocking, at most MINTD_WAIT_MS): sends @jwt (borrowed; the
 * copy in the message buffer is wiped), @installation_id and @asked to
 * the mint process and reads its answer as untrusted bytes: every length
 * bounded, the token's bytes checked (ghapp_token_ok()), the expiry in
 * the future, the granted repositories exactly @asked's and the granted
 * permissions among @asked's at no higher level (the granted scope in
 * @out is built from @asked's names). Returns 0 with @out filled (the
 * caller ghapp_token_clear()s it), or -1 with one line in @err: the
 * mint's own error (non-printable bytes shown as '?'), or why the mint
 * process could not answer (it has ended, it did not answer in time, it
 * answered nonsense). */
int mintd_mint(struct mintd *m, const char *jwt, uint64_t installation_id,
	       const struct ghapp_scope *asked, struct ghapp_token *out, char *err,
	       size_t errlen);

/* Closes the channel: the mint exits. */
void mintd_stop(struct mintd *m);

/* The supervisor reaped it: its status and last words are kept for the
 * next mintd_mint()'s error. */
void mintd_reaped(struct mintd *m, int wstatus);

void mintd_describe_exit(const struct mintd *m, char *out, size_t len);

#endif /* AIRLOCK_MINTD_H */
