/* SPDX-License-Identifier: Apache-2.0
 * supervisor.c - see supervisor.h.
 *
 * DOC: Theory of Operation
 *
 * `airlock run` and `airlock proxy` are one supervisor with two plans. The
 * command parses its options, opens the session (session.c starts the key
 * holder, before anything secret is in memory) and then lets this module
 * start the rest in one order:
 *
 *   1. the ledger process (spendd.c), when spend is metered, the
 *      command's other forks that must hold no secret (publish.c's relay)
 *      and the GitHub App token's mint process (mintd.c), when the git
 *      credential is minted;
 *   2. the secrets (broker.c), the git credential (gitcred.c) and the
 *      OAuth tokens (oauth.c): only now, so that none of the copies above
 *      holds a value;
 *   3. whatever the command adds (the sandbox's init, the DNS stub), each
 *      a row of the table;
 *   4. session.start and the receipts that follow it;
 *   5. the proxy workers (worker.c), one row each;
 *   6. the supervisor's own seccomp filter (confine.c).
 *
 * Then one loop: the signalfd (SIGCHLD reaps through the table, every other
 * signal is the command's), each row's channel (its message handler), the
 * git credential's and the OAuth tokens' refresh times, the deadline by
 * which stopped processes are killed, and the command's own deadlines. It
 * returns once every row marked awaited has ended. A row that ends calls
 * its exit handler: a worker or the ledger or the DNS stub that ends
 * unasked makes the session end itself (supervisor_fail()); the key holder
 * that ends means nothing more can be recorded (session_lost(), 125).
 *
 * Should: keep the two commands' behaviour in one place. Mustn't: read a
 * secret before the forks that must not hold one, block in the loop.
 */
#include "supervisor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "filter.h"
#include "util.h"

/* How long stopped processes get after their drain before they are
 * killed. */
#define STOP_GRACE_MS 5000

void supervisor_init(struct supervisor *sv, struct session *s,
		     const struct supervisor_ops *ops, void *arg,
		     const struct supervisor_words *words)
{
	memset(sv, 0, sizeof(*sv));
	sv->s = s;
	sv->ops = ops;
	sv->arg = arg;
	sv->words = words;
	sv->sfd = -1;
	sv->spend.pid = -1;
	sv->spend.ctl = -1;
	sv->mint.pid = -1;
	sv->mint.ctl = -1;
}

void supervisor_signals(struct supervisor *sv, const sigset_t *mask)
{
	/* Blocked before the children are forked, so that no SIGCHLD or
	 * forwarded signal is lost before the loop reads them. */
	if (sigprocmask(SIG_BLOCK, mask, NULL) < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "sigprocmask");
	sv->sfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sv->sfd < 0)
		util_die_errno(EXIT_AIRLOCK_FAILURE, "signalfd");
}

struct sv_proc *supervisor_add(struct supervisor *sv, const struct sv_proc *pr)
{
	sv->proc = util_xrealloc(sv->proc, (sv->nproc + 1) * sizeof(*sv->proc));
	sv->proc[sv->nproc] = *pr;
	return &sv->proc[sv->nproc++];
}

/* --- the rows the supervisor knows itself ---------------------------------- */

/* The key holder only speaks before it exits: its last words are read
 * when it is reaped. */
static bool keeper_msg(struct supervisor *sv, struct sv_proc *pr)
{
	(void)sv;
	(void)pr;
	return false;
}

static void keeper_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	size_t i;

	(void)pr;
	(void)pid;
	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].kill_on_fail && sv->proc[i].pid > 0)
			kill(sv->proc[i].pid, SIGKILL);
	if (sv->workers)
		worker_pool_release(&sv->wp);
	session_lost(sv->s, wstatus);
}

static void spend_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	char how[256];

	(void)pr;
	(void)pid;
	spendd_reaped(&sv->spend, wstatus);
	spendd_describe_exit(&sv->spend, how, sizeof(how));
	supervisor_fail(sv, "proxy.error", "spend.ledger", json_object(),
			"the spend ledger process ended (%s): spend can no longer be "
			"metered%s", how, sv->words->ends);
}

/* Keeps a worker's row in step with the pool. */
static void worker_sync(struct supervisor *sv, struct sv_proc *pr)
{
	const struct worker *w = &sv->wp.w[pr->index];

	pr->pid = w->pid;
	pr->ctl = w->ctl;
}

static bool worker_msg(struct supervisor *sv, struct sv_proc *pr)
{
	struct worker *w = &sv->wp.w[pr->index];
	bool more = worker_pool_read(&sv->wp, pr->index);

	if (!more && w->ctl >= 0) {
		close(w->ctl);
		w->ctl = -1;
	}
	worker_sync(sv, pr);
	return more;
}

static void worker_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	struct worker *w = &sv->wp.w[pr->index];
	char how[256];

	worker_pool_reaped(&sv->wp, w, wstatus);
	worker_sync(sv, pr);
	if (worker_exited_cleanly(&sv->wp, w))
		return;
	worker_describe_exit(w, how, sizeof(how));
	if (!w->go && w->fatal[0]) {
		/* It never served: the proxy could not start. */
		supervisor_fail(sv, sv->words->start_error, "proxy", json_object(),
				"egress proxy: %s", how);
		return;
	}
	supervisor_fail(sv, "proxy.error", "proxy.worker",
			WIFSIGNALED(wstatus)
				? json_pack("{s:i, s:i}", "pid", (int)pid, "signal",
					    WTERMSIG(wstatus))
				: json_pack("{s:i, s:i}", "pid", (int)pid, "status",
					    WEXITSTATUS(wstatus)),
			"egress proxy worker %d ended (%s): %s", (int)pid, how,
			sv->words->worker_lost);
}

/* The DNS stub refused a name (once per name): dns.block, as the stub
 * says, from the fields dnsd_read() checked. */
static void on_dns_block(void *arg, const struct dnsd_block *b)
{
	struct supervisor *sv = arg;

	session_record(sv->s, "dns.block", b->would_block ? RECEIPT_WOULD_BLOCK : RECEIPT_BLOCK,
		       RECEIPT_POINT_SUPERVISOR, b->rule,
		       json_pack("{s:s, s:i, s:s}", "host", b->host, "qtype", (int)b->qtype,
				 "answer", dnsstub_outcome_to_string(b->outcome)),
		       b->reason);
}

static bool dnsd_msg(struct supervisor *sv, struct sv_proc *pr)
{
	return dnsd_read(pr->arg, on_dns_block, sv);
}

static void dnsd_stop_row(struct supervisor *sv, struct sv_proc *pr)
{
	(void)sv;
	dnsd_stop(pr->arg); /* closes its channel */
	pr->ctl = -1;
	pr->stopping = true;
}

/* The DNS stub ended: unasked, the sandbox has lost its names, so the
 * session is ended as for a lost worker. */
static void dnsd_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	struct dnsd *d = pr->arg;
	bool asked = d->stopping;
	char how[256];

	(void)pid;
	dnsd_reaped(d, wstatus);
	pr->ctl = -1;
	if (asked)
		return;
	dnsd_describe_exit(d, how, sizeof(how));
	supervisor_fail(sv, "proxy.error", "dns.stub", json_object(),
			"the DNS stub ended (%s): the agent lost its names%s", how,
			sv->words->ends);
}

void supervisor_add_dnsd(struct supervisor *sv, struct dnsd *d)
{
	(void)supervisor_add(sv, &(struct sv_proc){
		.name = "DNS stub", .pid = d->pid, .ctl = d->ctl, .awaited = true,
		.on_msg = dnsd_msg, .on_exit = dnsd_exit, .stop = dnsd_stop_row, .arg = d });
}

/* The mint process ended: nothing more can be minted. The session goes
 * on: the next mint fails (git.token block, or the session refused at
 * start) saying so, and the token in force serves until it expires. */
static void mint_exit(struct supervisor *sv, struct sv_proc *pr, pid_t pid, int wstatus)
{
	(void)pr;
	(void)pid;
	mintd_reaped(&sv->mint, wstatus);
}

static void mint_stop_row(struct supervisor *sv, struct sv_proc *pr)
{
	mintd_stop(&sv->mint); /* it exits when its channel closes */
	pr->stopping = true;
}

/* --- the start sequence ----------------------------------------------------- */

void supervisor_forget(void *arg)
{
	struct supervisor *sv = arg;
	struct broker *b = &sv->broker;
	size_t i;
	char **e;

	session_forget(sv->s);
	mintd_stop(&sv->mint); /* this copy's end of the mint's channel */
	if (!sv->loaded)
		return;
	for (i = 0; i < b->count; i++) {
		const char *name = b->secrets[i].def->from_env;
		size_t n = name ? strlen(name) : 0;

		for (e = environ; name && e && *e; e++)
			if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
				explicit_bzero(*e + n + 1, strlen(*e + n + 1));
	}
	broker_free(b);
	gitcred_free(&sv->git); /* a minted token */
	oauth_scrub_environ(sv->s->p);
	oauth_free(&sv->oauth);
	sv->loaded = false;
}

void supervisor_open(struct supervisor *sv, const struct supervisor_plan *plan)
{
	const struct policy *p = sv->s->p;
	const char *rule;
	char err[512];

	if (sv->s->open)
		(void)supervisor_add(sv, &(struct sv_proc){
			.name = "key holder", .pid = sv->s->k.pid, .ctl = session_fd(sv->s),
			.on_msg = keeper_msg, .on_exit = keeper_exit });
	sv->metered = plan->metered;
	if (plan->metered) {
		/* Before any secret is read: the ledger process is forked. */
		if (plan->parent && p->spend_ledger_kind == POLICY_LEDGER_MEMORY)
			session_refuse(sv->s, "spend.parent",
				       "--parent needs a spend.ledger that the parent "
				       "is in (sqlite: or postgresql:), not the "
				       "session's own memory");
		if (plan->parent && strcmp(plan->parent, sv->s->id) == 0)
			session_refuse(sv->s, "spend.parent",
				       "--parent names this session itself");
		if (spendd_start(&sv->spend, p, sv->s->id, plan->parent, &rule, err,
				 sizeof(err)) < 0)
			session_refuse(sv->s, rule, err);
		(void)supervisor_add(sv, &(struct sv_proc){
			.name = "spend ledger", .pid = sv->spend.pid, .ctl = -1,
			.on_exit = spend_exit });
	}
	if (plan->forks && plan->forks(plan->forks_arg, &rule, err, sizeof(err)) < 0)
		session_refuse(sv->s, rule, err);
	if (gitcred_needs_mint(p)) {
		if (mintd_start(&sv->mint, p, err, sizeof(err)) < 0)
			session_refuse(sv->s, "git.github_app", err);
		(void)supervisor_add(sv, &(struct sv_proc){
			.name = "token mint", .pid = sv->mint.pid, .ctl = -1,
			.on_exit = mint_exit, .stop = mint_stop_row });
	}
	/* Secrets only now: the key holder, the ledger, the relays and the
	 * mint, forks of ours, never held one. */
	if (broker_load(&sv->broker, p, err, sizeof(err)) < 0)
		session_refuse(sv->s, "secrets", err);
	gitcred_start(sv->s, p, &sv->broker, &sv->mint, &sv->git);
	oauth_start(sv->s, p, &sv->oauth);
	sv->loaded = true;
}

int supervisor_begin(struct supervisor *sv, const char *text, char *err, size_t errlen)
{
	session_begin(sv->s, "session.start", RECEIPT_INFO, "session", text);
	gitcred_record(sv->s, sv->s->p, &sv->git);
	oauth_record(sv->s, &sv->oauth);
	sv->begun = true;
	if (sv->metered && spendd_give_keeper(&sv->spend, session_worker_channel(sv->s)) < 0) {
		snprintf(err, errlen, "cannot give the spend ledger its channel to the "
			 "key holder");
		return -1;
	}
	return 0;
}

int supervisor_start_workers(struct supervisor *sv, unsigned int n,
			     const struct supervisor_listen *l, char *err, size_t errlen)
{
	struct filter_source src;
	struct worker_config wc;
	unsigned int i;

	memset(&wc, 0, sizeof(wc));
	wc.listen_fd = l->fd;
	wc.tlisten_fds = l->tlisten;
	wc.ntlisten = l->ntlisten;
	wc.names = l->names;
	wc.max_conns = l->max_conns;
	wc.client_limit = l->client_limit;
	wc.policy = sv->s->p;
	wc.intercept = l->intercept;
	src = (struct filter_source){ .policy = sv->s->p, .broker = &sv->broker,
				      .git = &sv->git,
				      .spend = sv->metered ? &sv->spend : NULL };
	wc.filters = &src;
	wc.forget = oauth_forget;
	wc.forget_arg = &sv->oauth;
	if (worker_pool_start(&sv->wp, n, &wc, sv->s, err, errlen) < 0)
		return -1;
	sv->workers = true;
	for (i = 0; i < sv->wp.n; i++)
		(void)supervisor_add(sv, &(struct sv_proc){
			.name = "proxy worker", .pid = sv->wp.w[i].pid, .ctl = sv->wp.w[i].ctl,
			.awaited = true, .on_msg = worker_msg, .on_exit = worker_exit,
			.index = i });
	/* OAuth tokens: every worker has them before go; a 401 refreshes */
	sv->oc = (struct oauth_ctx){ sv->s, sv->s->p, &sv->oauth, &sv->wp };
	sv->wp.oauth401 = oauth_on_401;
	sv->wp.oauth_arg = &sv->oc;
	if (oauth_send(&sv->oauth, &sv->wp) < 0)
		util_warn("the OAuth tokens could not reach every proxy worker");
	return 0;
}

static void sync_workers(struct supervisor *sv)
{
	size_t i;

	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].on_msg == worker_msg)
			worker_sync(sv, &sv->proc[i]);
}

bool supervisor_wait_ready(struct supervisor *sv, char *err, size_t errlen)
{
	struct worker_pool *wp = &sv->wp;
	struct pollfd *pfd = util_xcalloc(wp->n, sizeof(*pfd));
	unsigned int i, ready = 0;
	bool ok = true;

	while (ok && ready < wp->n) {
		for (i = 0; i < wp->n; i++)
			pfd[i] = (struct pollfd){ .fd = wp->w[i].ready ? -1 : wp->w[i].ctl,
						  .events = POLLIN };
		if (poll(pfd, wp->n, -1) < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			ok = false;
		}
		for (i = 0; ok && i < wp->n; i++) {
			struct worker *w = &wp->w[i];
			int ws;

			if (!pfd[i].revents)
				continue;
			if (worker_pool_read(wp, i) && !w->fatal[0]) {
				ready += w->ready;
				continue;
			}
			while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR)
				;
			worker_pool_reaped(wp, w, ws);
			worker_describe_exit(w, err, errlen);
			ok = false;
		}
	}
	free(pfd);
	sync_workers(sv);
	return ok;
}

int supervisor_confine(struct supervisor *sv, char *err, size_t errlen)
{
	(void)sv;
	return confine_supervisor(err, errlen);
}

/* --- ending ----------------------------------------------------------------- */

void supervisor_stop(struct supervisor *sv, unsigned int drain_ms)
{
	if (!sv->workers || sv->wp.stopping)
		return;
	worker_pool_stop(&sv->wp, drain_ms);
	sync_workers(sv);
	sv->kill_at = util_now_ms() + drain_ms + STOP_GRACE_MS;
}

void supervisor_stop_procs(struct supervisor *sv)
{
	size_t i;

	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].stop && sv->proc[i].pid > 0 && !sv->proc[i].stopping)
			sv->proc[i].stop(sv, &sv->proc[i]);
}

static void kill_on_fail(struct supervisor *sv)
{
	size_t i;

	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].kill_on_fail && sv->proc[i].pid > 0)
			kill(sv->proc[i].pid, SIGKILL);
}

void supervisor_fail(struct supervisor *sv, const char *type, const char *rule,
		     json_t *subject, const char *fmt, ...)
{
	if (!sv->failure[0]) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(sv->failure, sizeof(sv->failure), fmt, ap);
		va_end(ap);
		session_record(sv->s, type, RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR, rule,
			       subject, sv->failure);
		subject = NULL;
		kill_on_fail(sv);
	}
	json_decref(subject);
	supervisor_stop(sv, 0);
}

void supervisor_abort(struct supervisor *sv, const char *type, const char *rule,
		      const char *msg, const char *prefix)
{
	kill_on_fail(sv);
	if (sv->workers) {
		worker_pool_stop(&sv->wp, 0);
		sync_workers(sv);
	}
	session_record(sv->s, type, RECEIPT_BLOCK, RECEIPT_POINT_SUPERVISOR, rule,
		       json_object(), msg);
	if (sv->loaded)
		gitcred_finish(sv->s, sv->s->p, &sv->git);
	session_end(sv->s, EXIT_AIRLOCK_FAILURE);
	if (prefix)
		util_die(EXIT_AIRLOCK_FAILURE, "%s: %s", prefix, msg);
	util_die(EXIT_AIRLOCK_FAILURE, "%s", msg);
}

void supervisor_finish(struct supervisor *sv)
{
	if (sv->workers) {
		worker_pool_release(&sv->wp);
		sv->workers = false;
	}
	if (sv->metered) {
		char err[256];
		int64_t own;

		/* The workers have exited: every settlement is sent. */
		if (spendd_finish(&sv->spend, &own, err, sizeof(err)) == 0)
			session_set_spend(sv->s, own);
		else
			util_warn("spend ledger: %s", err);
		spendd_release(&sv->spend);
	}
	if (sv->loaded)
		gitcred_finish(sv->s, sv->s->p, &sv->git); /* revoke a minted token */
	mintd_stop(&sv->mint);
}

void supervisor_free(struct supervisor *sv)
{
	if (sv->loaded) {
		gitcred_free(&sv->git);
		oauth_free(&sv->oauth);
		broker_free(&sv->broker);
	}
	free(sv->proc);
	sv->proc = NULL;
	sv->nproc = 0;
	if (sv->sfd >= 0)
		close(sv->sfd);
	sv->sfd = -1;
}

/* --- the loop ----------------------------------------------------------------- */

static void reap(struct supervisor *sv)
{
	pid_t pid;
	int ws;

	while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
		size_t i;

		for (i = 0; i < sv->nproc; i++) {
			struct sv_proc *pr = &sv->proc[i];

			if (pr->pid != pid)
				continue;
			pr->pid = -1;
			if (pr->on_exit)
				pr->on_exit(sv, pr, pid, ws);
			break;
		}
	}
}

static void read_signals(struct supervisor *sv)
{
	struct signalfd_siginfo si;

	while (read(sv->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			reap(sv);
		else if (sv->ops->signal)
			sv->ops->signal(sv, &si);
	}
}

static bool awaiting(const struct supervisor *sv)
{
	size_t i;

	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].awaited && sv->proc[i].pid > 0)
			return true;
	return false;
}

/* @timeout lowered to @ms when that is sooner (-1: none yet). */
static int sooner(int timeout, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	if (ms > INT32_MAX)
		ms = INT32_MAX;
	return timeout < 0 || ms < timeout ? (int)ms : timeout;
}

/* Stopped processes that do not exit are killed; the next SIGCHLD reaps
 * them. */
static void kill_stopped(struct supervisor *sv)
{
	size_t i;

	for (i = 0; i < sv->nproc; i++)
		if (sv->proc[i].pid > 0 &&
		    (sv->proc[i].stopping || sv->proc[i].on_msg == worker_msg))
			kill(sv->proc[i].pid, SIGKILL);
}

/* The stop deadline, and the git credential's and OAuth tokens' refresh
 * times. Returns false when a refresh ran (the caller looks again). */
static bool timers(struct supervisor *sv, int *timeout)
{
	if (sv->workers && sv->wp.stopping) {
		uint64_t ms = util_now_ms();

		if (ms >= sv->kill_at) {
			kill_stopped(sv);
			sv->kill_at = ms + STOP_GRACE_MS;
		}
		*timeout = sooner(*timeout, (int64_t)(sv->kill_at - ms));
		return true;
	}
	if (util_timer_due(gitcred_next(&sv->git), timeout)) {
		gitcred_refresh(sv->s, sv->s->p, &sv->git, &sv->wp);
		return false;
	}
	if (util_timer_due(oauth_next(&sv->oauth), timeout)) {
		oauth_refresh_due(sv->s, sv->s->p, &sv->oauth, &sv->wp);
		return false;
	}
	return true;
}

void supervisor_run(struct supervisor *sv)
{
	struct pollfd *pfd = NULL;

	/* A write to a peer that has gone must be an error, not our death.
	 * Only now: an ignored SIGPIPE would outlive the agent's exec had the
	 * sandbox's init been cloned with it. */
	signal(SIGPIPE, SIG_IGN);
	while (awaiting(sv)) {
		int timeout = -1;
		size_t i, n = 0;

		pfd = util_xrealloc(pfd, (1 + sv->nproc) * sizeof(*pfd));
		pfd[n++] = (struct pollfd){ .fd = sv->sfd, .events = POLLIN };
		for (i = 0; i < sv->nproc; i++)
			pfd[n++] = (struct pollfd){ .fd = sv->proc[i].on_msg ? sv->proc[i].ctl : -1,
						    .events = POLLIN };
		if (!timers(sv, &timeout))
			continue;
		if (sv->ops->tick) {
			int t = sv->ops->tick(sv, util_now_ms());

			if (t >= 0)
				timeout = sooner(timeout, t);
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			util_die_errno(EXIT_AIRLOCK_FAILURE, "poll");
		}
		for (i = 0; i < sv->nproc; i++) {
			struct sv_proc *pr = &sv->proc[i];

			if (pfd[1 + i].revents && pr->ctl >= 0 && pr->on_msg &&
			    !pr->on_msg(sv, pr))
				pr->ctl = -1;
		}
		for (i = 0; sv->workers && i < sv->wp.n && !sv->exhausted; i++) {
			if (!sv->wp.w[i].exhausted)
				continue;
			sv->exhausted = true;
			if (sv->ops->exhausted)
				sv->ops->exhausted(sv);
		}
		/* The session has begun: a ready worker serves at once. */
		if (sv->begun && sv->workers)
			(void)worker_pool_go(&sv->wp);
		if (pfd[0].revents)
			read_signals(sv);
	}
	free(pfd);
}
