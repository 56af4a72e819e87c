/* SPDX-License-Identifier: Apache-2.0
 * supervisor.h - the supervisor of a session: one start sequence and one
 * table of processes, driven by both `airlock run` and `airlock proxy`.
 *
 * Usage (cmd_run.c, cmd_proxy.c):
 *
 *	supervisor_init(&sv, &s, &ops, arg, &words);
 *	supervisor_signals(&sv, &mask);  before the forks the loop watches
 *	supervisor_open(&sv, &plan);     ledger, other forks, secrets, git, OAuth
 *	... the command's own processes (sandbox), supervisor_add() each
 *	supervisor_begin(&sv, text);     session.start and what follows it
 *	supervisor_start_workers(&sv, n, &listen, err, len);
 *	supervisor_confine(&sv, err, len);
 *	supervisor_run(&sv);             until every awaited process ended
 *	supervisor_finish(&sv);          the ledger's total, revoke the token
 *	session_end(...);  supervisor_free(&sv);
 */
#ifndef AIRLOCK_SUPERVISOR_H
#define AIRLOCK_SUPERVISOR_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "broker.h"
#include "dnsd.h"
#include "gitcred.h"
#include "mintd.h"
#include "oauth.h"
#include "session.h"
#include "spendd.h"
#include "worker.h"

struct supervisor;

/* One process of the session, as the supervisor sees it: a row of its
 * table. */
struct sv_proc {
	const char *name;      /* "key holder", "proxy worker", ... */
	pid_t pid;             /* -1: not running (ended, or never started) */
	int ctl;               /* the channel polled, or -1 */
	bool awaited;          /* supervisor_run() returns once it ended */
	bool kill_on_fail;     /* SIGKILL when the session ends itself */
	bool stopping;         /* asked to end: SIGKILL when it has not in time */
	/* What it said on @ctl; false: the channel is not read any more. */
	bool (*on_msg)(struct supervisor *sv, struct sv_proc *pr);
	/* It was reaped (pid is -1 already; @pid was its pid). */
	void (*on_exit)(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus);
	/* Asks it to end (supervisor_stop_procs()), or NULL. */
	void (*stop)(struct supervisor *sv, struct sv_proc *pr);
	void *arg;
	unsigned int index;    /* a proxy worker's index in the pool */
};

/* What the command adds to the loop; each may be NULL. */
struct supervisor_ops {
	/* A signal other than SIGCHLD reached the supervisor. */
	void (*signal)(struct supervisor *sv, const struct signalfd_siginfo *si);
	/* A worker refused a call for the spend cap under on_exhausted
	 * "stop" (called once). */
	void (*exhausted)(struct supervisor *sv);
	/* Its own deadlines, at @now (ms): returns the ms until the next,
	 * or -1 for none. */
	int (*tick)(struct supervisor *sv, uint64_t now);
};

/* How the command words a failure (the end of each message). */
struct supervisor_words {
	const char *ends;          /* ", so the session was ended" */
	const char *worker_lost;   /* after "egress proxy worker N ended (how): " */
	const char *start_error;   /* receipt type of a worker that never served */
};

/* What supervisor_open() starts. */
struct supervisor_plan {
	bool metered;              /* the ledger process is started */
	const char *parent;        /* --parent, or NULL */
	/* Forks that must hold no secret (publish.c's relay), after the
	 * ledger and before the secrets are read: returns 0, or -1 with a
	 * reason in @err and the rule refused in @rule. */
	int (*forks)(void *arg, const char **rule, char *err, size_t errlen);
	void *forks_arg;
};

/* Where the proxy workers serve. */
struct supervisor_listen {
	int fd;                    /* the proxy socket */
	const int *tlisten;        /* transparent mode's sockets */
	size_t ntlisten;
	struct dnsstub_table *names; /* transparent mode's table, or NULL */
	unsigned int max_conns;    /* 0: the default */
	unsigned int client_limit; /* 0: the default */
	bool intercept;            /* the key holder has a session CA */
};

struct supervisor {
	struct session *s;
	const struct supervisor_ops *ops;
	const struct supervisor_words *words;
	void *arg;                 /* the command's */
	int sfd;                   /* the signalfd, or -1 */
	struct sv_proc *proc;      /* the table */
	size_t nproc;
	struct worker_pool wp;
	bool workers;              /* wp was started */
	struct broker broker;
	bool loaded;               /* broker, git and oauth were loaded */
	struct gitcred git;
	struct mintd mint;         /* the GitHub App token's mint process
				      (pid -1: none) */
	struct oauth oauth;
	struct oauth_ctx oc;
	struct spendd spend;       /* pid -1: none */
	bool metered;
	bool begun;                /* session.start written: workers go */
	bool exhausted;
	uint64_t kill_at;          /* ms: stopped processes are killed */
	char failure[512];         /* why the session ended itself, or "" */
};

/* Makes @sv for session @s (not opened yet, perhaps): @ops and @words are
 * the command's, @arg its own. */
void supervisor_init(struct supervisor *sv, struct session *s,
		     const struct supervisor_ops *ops, void *arg,
		     const struct supervisor_words *words);

/* Blocks @mask (SIGCHLD must be in it) and makes its signalfd. Call before the processes whose end the loop must see are
 * forked. Dies with 125 on failure. */
void supervisor_signals(struct supervisor *sv, const sigset_t *mask);

/* The start sequence after the key holder (session_open*()), in this order
 * and for the reasons docs/ARCHITECTURE.md gives: the ledger process,
 * @plan's other forks, the GitHub App token's mint process, then (only
 * now, so that none of those copies holds one) the secrets, the git
 * credential and the OAuth tokens. Refuses the
 * session (session_refuse()) on failure. */
void supervisor_open(struct supervisor *sv, const struct supervisor_plan *plan);

/* Runs first in a child that must not hold what the supervisor holds
 * (the sandbox's init, the DNS stub; @arg is the supervisor): wipes the
 * secret values and the environment strings they came from, the git
 * token, the OAuth credentials, and closes the channel to the key holder
 * (session_forget()) and its copy of the channel to the token mint. */
void supervisor_forget(void *arg);

/* Adds @pr to the table; returns the row (valid until the next add). */
struct sv_proc *supervisor_add(struct supervisor *sv, const struct sv_proc *pr);

/* Adds the DNS stub @d (dnsd.c): dns.block receipts for what it says, the
 * session ended when it ends unasked. */
void supervisor_add_dnsd(struct supervisor *sv, struct dnsd *d);

/* session.start (@text), the git credential's and the OAuth tokens'
 * receipts, and the ledger's channel to the key holder. From now on a
 * ready worker serves. Returns 0, or -1 with a reason in @err. */
int supervisor_begin(struct supervisor *sv, const char *text, char *err, size_t errlen);

/* Forks @n proxy workers on @l, with the secrets, the git credential, the
 * ledger and the OAuth tokens, and adds them to the table. Returns 0, or
 * -1 with a reason in @err. */
int supervisor_start_workers(struct supervisor *sv, unsigned int n,
			     const struct supervisor_listen *l, char *err, size_t errlen);

/* Waits until every worker says it is ready. Returns false with the first
 * failure in @err. */
bool supervisor_wait_ready(struct supervisor *sv, char *err, size_t errlen);

/* Every process is started: the supervisor's own seccomp filter. */
int supervisor_confine(struct supervisor *sv, char *err, size_t errlen);

/* Reads the channels, the signals and the timers until every awaited
 * process ended. Does not return when the key holder dies. */
void supervisor_run(struct supervisor *sv);

/* Tells the workers to stop (drain @drain_ms); those that have not ended
 * @drain_ms + 5 s later are killed. */
void supervisor_stop(struct supervisor *sv, unsigned int drain_ms);

/* Asks every process of the table that has a stop hook to end. */
void supervisor_stop_procs(struct supervisor *sv);

/* The session cannot go on as its stream says: records @type (rule
 * @rule, @subject, the message in sv->failure, unless a failure is
 * recorded already), kills the processes marked kill_on_fail and stops
 * the workers. */
__attribute__((format(printf, 5, 6))) void
supervisor_fail(struct supervisor *sv, const char *type, const char *rule, json_t *subject,
		const char *fmt, ...);

/* Before session_end(): the workers are reaped (every settlement is sent),
 * the ledger's total, the minted token revoked. */
void supervisor_finish(struct supervisor *sv);

/* A failure before the loop: kills the processes marked kill_on_fail and
 * the workers, records @type (rule @rule, @msg), revokes a minted token,
 * ends the session with 125 and exits 125 with "@prefix: @msg" (@prefix
 * NULL: @msg alone). */
__attribute__((noreturn)) void supervisor_abort(struct supervisor *sv, const char *type,
						const char *rule, const char *msg,
						const char *prefix);

/* Wipes and frees the secrets, the credential and the table. */
void supervisor_free(struct supervisor *sv);

#endif /* AIRLOCK_SUPERVISOR_H */
