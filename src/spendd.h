/* SPDX-License-Identifier: Apache-2.0
 * spendd.h - the ledger process: the one process of a session that holds
 * the spend ledger open, and the supervisor's handle on it
 * (docs/SPEND.md, docs/ARCHITECTURE.md).
 *
 * Ledger calls block (an SQLite lock, PostgreSQL round trips), so they
 * never run on a proxy worker's event loop: each worker sends its
 * reservations and settlements over a channel of its own to this process,
 * which runs them one after the other and answers the reservations. The
 * spend filter (spendfilter.h) waits for the answer with FILTER_PENDING.
 *
 * The supervisor's calling sequence:
 *
 *	if (spendd_wanted(p)) {
 *		spendd_start(&d, p, id, parent, err, ...);  -1: refuse (125)
 *		spendd_give_keeper(&d, session_worker_channel(s));
 *		for each worker: spendd_new_channel(&d, &fd);
 *		... the session runs; reap d.pid like the other children:
 *		    spendd_reaped() ...
 *		once the workers have exited:
 *		spendd_finish(&d, &own, err, ...);  session_set_spend(own)
 *	}
 *	spendd_release(&d);
 */
#ifndef AIRLOCK_SPENDD_H
#define AIRLOCK_SPENDD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

/* The name the ledger process gives itself (PR_SET_NAME). */
#define SPENDD_PROC_NAME "airlock-ledger"

struct spendd {
	pid_t pid;          /* -1: not running (never started, or reaped) */
	int ctl;            /* the supervisor's end of its channel, or -1 */
	int wstatus;        /* once reaped */
	bool finishing;     /* spendd_finish() was called */
	char fatal[256];    /* its last words (MSG_FATAL), or "" */
};

/* Does a session under @p meter spend: does it name a provider, or a
 * parent whose existence must be checked? */
bool spendd_wanted(const struct policy *p);

/* Forks the ledger process, which opens @p's ledger and session @id
 * under @parent (NULL: the policy's spend.parent) with the policy's cap,
 * and waits for it to say it has. Call before any secret is read (the
 * process keeps only the PG* variables and HOME of the environment, for
 * libpq) and with the session's signals blocked. Returns 0, or -1 with
 * one line in @err (a missing parent, a ledger that cannot be opened:
 * the session is refused) and the rule that refused in *rule. */
int spendd_start(struct spendd *d, const struct policy *p, const char *id,
		 const char *parent, const char **rule, char *err, size_t errlen);

/* Hands the ledger process its channel to the key holder (@fd, which is
 * closed here): it records every budget.charge. Returns 0 or -errno. */
int spendd_give_keeper(struct spendd *d, int fd);

/* A new channel for one proxy worker: *@worker_end (close-on-exec, the
 * caller owns it). Returns 0 or -errno. */
int spendd_new_channel(struct spendd *d, int *worker_end);

/* The caller reaped the ledger process with @wstatus: its last words are
 * read. */
void spendd_reaped(struct spendd *d, int wstatus);

/* One line saying how the ledger process ended. */
void spendd_describe_exit(const struct spendd *d, char *out, size_t len);

/* The workers have exited: the ledger process handles what they sent,
 * closes the session (reservations still held are charged) and exits;
 * *@own receives the session's own spent money (nano-dollars). Waits for
 * it and reaps it (unless the caller did). Returns 0, or -1 with a reason
 * in @err. */
int spendd_finish(struct spendd *d, int64_t *own, char *err, size_t errlen);

/* Kills and reaps the ledger process if it still runs; closes the
 * channel. */
void spendd_release(struct spendd *d);

#endif /* AIRLOCK_SPENDD_H */
