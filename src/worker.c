/* SPDX-License-Identifier: Apache-2.0
 * worker.c - proxy workers (see worker.h).
 *
 * DOC: Theory of Operation
 *
 * The egress proxy (proxy.c) parses what the agent sends: HTTP heads,
 * TLS ClientHellos, later whole intercepted requests. It is the part of
 * airlock an attacker talks to, so it runs in processes of its own, the
 * workers, each one event loop on one core, all accepting on the same
 * listening socket (the kernel hands each connection to one of them).
 *
 * A worker is forked from the supervisor after the key holder, so its
 * memory never held a key (the supervisor never loads one). It:
 *
 *   1. keeps only its descriptors: the listening socket, its channel to
 *      the key holder, its channel to the supervisor, stderr; standard
 *      input and output become /dev/null (a worker never writes into a
 *      stream on stdout);
 *   2. names itself "airlock-proxy", is not dumpable, and dies with the
 *      supervisor (PR_SET_PDEATHSIG, checked against a race);
 *   3. makes its filters, each of filter_table in its order from the
 *      configuration the supervisor sends it first (one MSG_FILTER_CONFIG
 *      per filter: the filter's own block, read by the filter's make;
 *      the worker names no filter but the secrets one, whose captured
 *      values it relays), then
 *      builds its proxy (epoll, resolver: resolv.conf is read here), then
 *      confines itself for good (confine.c): no capabilities, Landlock
 *      reading only resolv.conf and the like, a seccomp allowlist with no
 *      exec, no files opened for writing, no sockets but TCP/UDP over IP;
 *   4. says it is ready, waits for "go" when asked to (the standalone
 *      proxy writes session.start first), and serves.
 *
 * Receipts. The proxy's record callback sends each receipt to the key
 * holder, which builds, chains, signs and writes the line. Only a block's
 * seq is awaited, because only a block names its receipt in the answer
 * (X-Airlock-Receipt); every other receipt is sent and the worker goes on
 * at once, its order kept by the channel. A worker that cannot record
 * (the key holder is gone, or refused it) stops: it must not decide what
 * it cannot record.
 *
 * Control. The supervisor writes a message on the worker's channel, then
 * rings with SIGUSR1 (the proxy's loop watches a signalfd); the worker
 * then reads every message waiting: a new policy (a sealed memfd with its
 * canonical text, which the worker parses itself and checks against the
 * digest the supervisor sent before putting it in force), or stop (drain,
 * then exit 0). A policy the worker cannot put in force makes it stop with
 * the reason, rather than serve under a policy the stream does not name.
 *
 * Should: accept, resolve, connect, relay, record. Mustn't: hold or read
 * a key (the signing key file is outside what Landlock lets it read), exec,
 * create files, reach a unix socket, signal or trace another process,
 * outlive the supervisor.
 */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/x509.h>

#include "child.h"
#include "confine.h"
#include "dnsstub.h"
#include "filter.h"
#include "ghapp.h"
#include "intercept.h"
#include "keeper.h"
#include "secretfilter.h"
#include "tls.h"
#include "msg.h"
#include "proxy.h"
#include "registry.h"
#include "util.h"

/* The largest canonical policy a worker takes (the file is at most 1 MiB;
 * its canonical form adds the defaults). */
#define WORKER_POLICY_MAX ((size_t)8 * 1024 * 1024)

unsigned int worker_default_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > WORKER_MAX ? WORKER_MAX : (unsigned int)n;
}

unsigned int worker_parse_count(const char *cmd, const char *text)
{
	unsigned long n;

	if (!util_parse_uint(text, 1, WORKER_MAX, &n))
		util_die(EXIT_AIRLOCK_FAILURE, "%s: --workers must be a number from 1 to %d, "
			 "not '%s'", cmd, WORKER_MAX, text);
	return (unsigned int)n;
}

/* --- inside a worker -------------------------------------------------------- */

/* The longest a record that no one waits for stays in a worker before it
 * goes to the key holder (a block, a would_block and every other request
 * to the key holder send it at once). */
#define WORKER_RECORD_HOLD_MS 3

struct wctx {
	struct proxy *px;
	struct keeper_link link;   /* fd -1 without a stream */
	int ctl;
	pid_t parent;
	unsigned int index;
	uint8_t *in;               /* MSG_MAX */
	struct msg out;
	struct policy **policies;  /* reloaded ones: rules may be pointed at
				      until exit */
	size_t npolicies;
	void *made[FILTER_MAX];    /* each filter of filter_table as made
				      here (NULL: not running here) */
};

static int64_t worker_record(void *arg, const char *type, enum receipt_decision d,
			     enum receipt_point point, const char *rule,
			     json_t *subject, const char *reason)
{
	struct wctx *x = arg;
	/* A block is answered with its seq. A would_block lets the request
	 * go on: it waits for its line too, so that the line is written
	 * before anything the request leads to (the ledger process records
	 * a call's budget.charge on a channel of its own, which the key
	 * holder may otherwise serve first). */
	bool want = d == RECEIPT_BLOCK || d == RECEIPT_WOULD_BLOCK;
	int64_t seq = -1;
	int r;

	r = keeper_record(&x->link, want, type, d, point, rule, subject, reason, &seq);
	if (r < 0)
		child_fatal("cannot record a receipt: the key holder's channel "
			     "failed (%s)", strerror(-r));
	return seq;
}

/* Before the loop waits: the records held go to the key holder, one
 * message for all of them, once the first has waited WORKER_RECORD_HOLD_MS
 * (keeper_link_turn()). Returns the ms until they are due (-1: none). */
static int worker_record_turn(void *arg)
{
	struct wctx *x = arg;
	int wait_ms, r = keeper_link_turn(&x->link, &wait_ms);

	if (r < 0)
		child_fatal("cannot record a receipt: the key holder's channel "
			     "failed (%s)", strerror(-r));
	return wait_ms;
}

/* The worker stops: the records it holds still go, if they can. */
static void worker_fatal_flush(void *arg)
{
	struct wctx *x = arg;

	(void)keeper_link_flush(&x->link);
}

/* The spend filter refused a call for the cap under on_exhausted "stop":
 * the supervisor ends the session. */
static void worker_exhausted(void *arg, const char *reason)
{
	struct wctx *x = arg;

	msg_start(&x->out, MSG_SPEND_EXHAUSTED);
	msg_put_cstr(&x->out, reason);
	if (msg_send(x->ctl, &x->out, -1, 0) < 0)
		child_fatal("cannot tell the supervisor the spend cap is exhausted");
}

static int worker_leaf(void *arg, const char *host, struct tls_leaf *out, char *err,
		       size_t errlen)
{
	struct wctx *x = arg;
	int r = keeper_leaf(&x->link, host, out, err, errlen);

	if (r < -1)
		child_fatal("cannot ask for a leaf: %s", err);
	return r < 0 ? -1 : 0;
}

static void worker_sync(void *arg);
static int worker_oauth401(void *arg, const char *secret, const char *value, size_t len,
			   bool wait);
static int worker_announce(void *arg, const char *secret, time_t expires, const char *value,
			   size_t len, const char *ph, size_t phlen);

/* The block of a MSG_FILTER_CONFIG @r (its name read): in the message,
 * or in the sealed memfd *@fd (then read into *@copy, and *@fd closed and
 * -1: a descriptor left in *@fd is the filter's). */
static void config_block(struct msg_reader *r, int *fd, uint8_t **copy, struct msg_reader *blk)
{
	const void *inl = NULL;
	uint32_t in_memfd = 0;
	size_t len = 0, done;
	struct stat st;
	ssize_t got;

	*copy = NULL;
	msg_get_u32(r, &in_memfd);
	msg_get_bytes(r, FILTER_CONFIG_MAX, &inl, &len);
	if (!msg_end(r) || in_memfd > 1 || (in_memfd && (*fd < 0 || len)))
		child_fatal("the supervisor sent a bad filter configuration: %s",
			    r->error ? r->error : "its block is not where it says");
	if (!in_memfd) {
		msg_reader_block(blk, inl, len);
		return;
	}
	if (fstat(*fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > FILTER_CONFIG_MAX)
		child_fatal("a filter's configuration cannot be read");
	len = (size_t)st.st_size;
	*copy = util_xmalloc(len);
	for (done = 0; done < len; done += (size_t)got) {
		got = pread(*fd, *copy + done, len - done, (off_t)done);
		if (got < 0 && errno == EINTR)
			got = 0;
		else if (got <= 0)
			child_fatal("a filter's configuration cannot be read");
	}
	close(*fd);
	*fd = -1;
	msg_reader_block(blk, *copy, len);
}

/* Wipes what a filter's configuration was read from (it may hold
 * secret values). */
static void config_wipe(struct wctx *x, uint8_t *copy, size_t len)
{
	if (copy) {
		explicit_bzero(copy, len);
		free(copy);
	}
	explicit_bzero(x->in, MSG_MAX);
}

/* A MSG_FILTER_CONFIG @r (with descriptor @fd, or -1) after the first
 * ones: a later configuration of a filter (the git token's refresh), for
 * its configure hook. */
static void reconfigure(struct wctx *x, struct msg_reader *r, int fd)
{
	const char *name = NULL;
	const struct filter_def *d;
	struct msg_reader blk;
	uint8_t *copy;
	char err[256];
	size_t len = 0, i;

	msg_get_str(r, 64, &name, &len);
	d = r->error ? NULL : filter_table_find(name, len);
	if (!d)
		child_fatal("the supervisor sent the configuration of no filter");
	config_block(r, &fd, &copy, &blk);
	for (i = 0; filter_table[i] != d; i++)
		;
	if (!x->made[i]) {
		/* it has nothing to do here */
		if (fd >= 0)
			close(fd);
	} else if (!d->configure) {
		child_fatal("the supervisor configured the %s filter again", d->name);
	} else if (d->configure(x->made[i], &blk, fd, err, sizeof(err)) < 0) {
		child_fatal("the %s filter: %s", d->name, err);
	}
	config_wipe(x, copy, blk.len);
}

/* The worker's filters: each of filter_table, in its order, made from the
 * configuration the supervisor sends first (one MSG_FILTER_CONFIG per
 * filter, in the same order); the ones that run here go into @reg. */
static size_t build_filters(const struct policy *p, struct wctx *x, struct filter_reg *reg)
{
	struct filter_env env = { .policy = p, .record = worker_record, .arg = x,
				  .announce = worker_announce, .sync = worker_sync,
				  .oauth401 = worker_oauth401, .exhausted = worker_exhausted };
	size_t i, n = 0;

	for (i = 0; i < filter_table_len; i++) {
		const struct filter_def *d = filter_table[i];
		struct msg_reader r, blk;
		const char *name = NULL;
		uint8_t *copy;
		char err[256] = "";
		int fd = -1;
		ssize_t got = msg_recv(x->ctl, x->in, MSG_MAX, &fd, 0);

		if (got <= 0)
			child_fatal("the supervisor sent no configuration for the %s filter",
				    d->name);
		if (!msg_reader_init(&r, MSG_CHAN_WORKER, x->in, (size_t)got) ||
		    r.type != MSG_FILTER_CONFIG || !msg_get_str(&r, 64, &name, NULL) ||
		    strcmp(name, d->name) != 0)
			child_fatal("the supervisor sent %s where the %s filter's "
				    "configuration was due", r.error ? r.error
				    : msg_type_to_string(r.type), d->name);
		config_block(&r, &fd, &copy, &blk);
		x->made[i] = d->make(&env, &blk, fd, err, sizeof(err));
		config_wipe(x, copy, blk.len);
		if (!x->made[i] && err[0])
			child_fatal("the %s filter: %s", d->name, err);
		if (!x->made[i])
			continue;
		reg[n].ops = d->ops;
		reg[n].arg = x->made[i];
		n++;
	}
	return n;
}

/* The argument filter @d was made with here, or NULL. */
static void *made(const struct wctx *x, const struct filter_def *d)
{
	size_t i;

	for (i = 0; i < filter_table_len; i++)
		if (filter_table[i] == d)
			return x->made[i];
	return NULL;
}

/* Reads the policy in @fd, checks it is @digest and puts it in force. */
static void apply_policy(struct wctx *x, const char *digest, int fd)
{
	struct policy_errors errs = { 0 };
	struct policy *np;
	char err[256], *text;
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) < 0 || st.st_size < 0 ||
	    (uint64_t)st.st_size > WORKER_POLICY_MAX)
		child_fatal("the reloaded policy cannot be read");
	text = util_xmalloc((size_t)st.st_size + 1);
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, text + done, (size_t)st.st_size - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			child_fatal("the reloaded policy cannot be read");
		done += (size_t)n;
	}
	np = policy_parse(text, done, NULL, &errs);
	free(text);
	if (!np)
		child_fatal("the reloaded policy does not parse in the worker "
			     "(%zu errors)", errs.count);
	if (strcmp(np->digest, digest) != 0)
		child_fatal("the reloaded policy is not the one the supervisor "
			     "named (%s)", np->digest);
	if (proxy_set_policy(x->px, np, err, sizeof(err)) < 0)
		child_fatal("cannot put the reloaded policy in force: %s", err);
	x->policies = util_xrealloc(x->policies,
				    (x->npolicies + 1) * sizeof(struct policy *));
	x->policies[x->npolicies++] = np;
}

/* MSG_CAPTURE from the supervisor: a value another worker captured. */
static void learn_capture(struct wctx *x, struct msg_reader *r, int fd)
{
	const char *secret = NULL, *ph = NULL;
	const void *val = NULL;
	size_t phlen = 0, len = 0;
	uint64_t expires = 0;

	msg_get_str(r, REGISTRY_NAME_MAX, &secret, NULL);
	msg_get_u64(r, &expires);
	msg_get_str(r, REGISTRY_VALUE_MAX, &ph, &phlen);
	msg_get_bytes(r, REGISTRY_VALUE_MAX, &val, &len);
	if (!msg_end(r) || fd >= 0 || expires > (uint64_t)INT64_MAX ||
	    !made(x, &secretfilter_def) ||
	    secretfilter_add_captured(made(x, &secretfilter_def), secret, val, len, ph, phlen,
				      (time_t)expires) < 0)
		child_fatal("the supervisor sent a bad capture message");
	explicit_bzero(x->in, MSG_MAX);
}

/* One message from the supervisor. Returns false when the channel is done. */
static bool serve_one(struct wctx *x, ssize_t n, int fd)
{
	struct msg_reader r;
	const char *digest;
	uint32_t drain;

	if (n <= 0) {
		/* The supervisor is gone (PDEATHSIG follows). */
		proxy_unwatch(x->px, x->ctl);
		proxy_stop(x->px, 0);
		return false;
	}
	if (!msg_reader_init(&r, MSG_CHAN_WORKER, x->in, (size_t)n))
		child_fatal("the supervisor sent a bad message: %s", r.error);
	if (r.type == MSG_FATAL)
		child_fatal("the supervisor sent %s", msg_type_to_string(r.type));
	switch ((enum msg_worker_type)r.type) {
	case MSG_POLICY:
		msg_get_str(&r, 128, &digest, NULL);
		if (!msg_end(&r) || fd < 0)
			child_fatal("the supervisor sent a bad policy message");
		apply_policy(x, digest, fd);
		break;
	case MSG_STOP:
		msg_get_u32(&r, &drain);
		if (!msg_end(&r) || fd >= 0)
			child_fatal("the supervisor sent a bad stop message");
		proxy_stop(x->px, drain);
		break;
	case MSG_FILTER_CONFIG:
		reconfigure(x, &r, fd);
		fd = -1;
		break;
	case MSG_CAPTURE:
		learn_capture(x, &r, fd);
		break;
	case MSG_OAUTH_401:
	case MSG_CAPTURE_ACK:
		/* the answer to the oldest question asked (a late one given
		 * up on included) */
		if (!msg_end(&r) || fd >= 0)
			child_fatal("the supervisor sent a bad answer");
		secretfilter_answered(made(x, &secretfilter_def));
		break;
	case MSG_GO:
	case MSG_WORKER_READY:
	case MSG_SPEND_EXHAUSTED:
	case MSG_WORKER_BASE_:
	case MSG_WORKER_END_:
		child_fatal("the supervisor sent %s", msg_type_to_string(r.type));
	}
	if (fd >= 0)
		close(fd);
	return true;
}

/* Handles every message the supervisor left on the channel. */
static void serve_ctl(struct wctx *x)
{
	for (;;) {
		int fd = -1;
		ssize_t n = msg_recv(x->ctl, x->in, MSG_MAX, &fd, MSG_DONTWAIT);

		if (n == -EAGAIN || !serve_one(x, n, fd))
			return;
	}
}

/* Before a request is decided: what the supervisor queued (a value
 * another worker captured) is read first. */
static void worker_sync(void *arg)
{
	serve_ctl(arg);
}

/* A bound host answered 401 to an OAuth token: the supervisor refreshes
 * it (oauth.c) and hands the new one to every worker. With @wait, the
 * supervisor answers (MSG_OAUTH_401 without fields, after the new token,
 * if any: secretfilter_answered()), so that the request can be sent
 * again with it; the exchange waits for that, never this loop. */
static int worker_oauth401(void *arg, const char *secret, const char *value, size_t len,
			   bool wait)
{
	struct wctx *x = arg;
	int r;

	msg_start(&x->out, MSG_OAUTH_401);
	msg_put_cstr(&x->out, secret);
	msg_put_bytes(&x->out, value, len);
	msg_put_u32(&x->out, wait);
	r = msg_send(x->ctl, &x->out, -1, 0);
	explicit_bzero(x->out.buf, x->out.cap);
	return r < 0 ? -1 : 0;
}

/* A value this worker captured: to the supervisor, which queues it for
 * every other worker and answers (MSG_CAPTURE_ACK:
 * secretfilter_answered()); the exchange waits for the answer, so that
 * no worker decides a request with the placeholder before it knows it. */
static int worker_announce(void *arg, const char *secret, time_t expires, const char *value,
			   size_t len, const char *ph, size_t phlen)
{
	struct wctx *x = arg;
	int r;

	msg_start(&x->out, MSG_CAPTURE);
	msg_put_cstr(&x->out, secret);
	msg_put_u64(&x->out, (uint64_t)expires);
	msg_put_str(&x->out, ph, phlen);
	msg_put_bytes(&x->out, value, len);
	r = msg_send(x->ctl, &x->out, -1, 0);
	explicit_bzero(x->out.buf, x->out.cap);
	return r < 0 ? -1 : 0;
}

/* The supervisor's channel is read as soon as it holds something (the
 * answers to a capture or a refresh come without a signal). */
static void worker_ctl_ready(void *arg, int fd, uint32_t events)
{
	(void)fd;
	(void)events;
	serve_ctl(arg);
}

static bool worker_signal(void *arg, const struct signalfd_siginfo *si)
{
	struct wctx *x = arg;

	if (si->ssi_signo == SIGUSR1 && (pid_t)si->ssi_pid == x->parent)
		serve_ctl(x);
	return true;
}

/* Blocks until the supervisor says go (true) or stop (false). */
static bool wait_go(struct wctx *x)
{
	struct msg_reader r;
	int fd = -1;
	ssize_t n = msg_recv(x->ctl, x->in, MSG_MAX, &fd, 0);

	if (n > 0 && msg_reader_init(&r, MSG_CHAN_WORKER, x->in, (size_t)n) &&
	    r.type == MSG_FILTER_CONFIG) { /* a refresh before go */
		reconfigure(x, &r, fd);
		return wait_go(x);
	}
	if (n > 0 && !r.error && r.type == MSG_CAPTURE) { /* another worker served first */
		learn_capture(x, &r, fd);
		return wait_go(x);
	}
	if (fd >= 0)
		close(fd);
	if (n <= 0 || r.error)
		return false;
	if (r.type == MSG_GO && msg_end(&r))
		return true;
	if (r.type == MSG_STOP)
		return false;
	child_fatal("the supervisor sent %s before go", msg_type_to_string(r.type));
}

/* The paths a worker reads after its filter: a TLS client's
 * (confine_client_reads(): the trust store too, which the upstream context
 * loads on the first handshake, once confined) and the policy's upstream
 * CA file. */
static size_t read_paths(const struct policy *p, const char **out, char **own,
			 size_t *nown)
{
	size_t n = confine_client_reads(out, own, nown);

	if (p->upstream_ca)
		out[n++] = p->upstream_ca;
	return n;
}


__attribute__((noreturn)) static void worker_main(const struct worker_config *cfg,
						  struct proxy_shared *shared,
						  unsigned int index, int ctl, int kfd,
						  pid_t parent)
{
	const int keep[] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO,
			     cfg->listen_fd, ctl, kfd,
			     cfg->ntlisten > 0 ? cfg->tlisten_fds[0] : -1,
			     cfg->ntlisten > 1 ? cfg->tlisten_fds[1] : -1 };
	const char *paths[CONFINE_CLIENT_READS_MAX + 1];
	char *owned[CONFINE_CLIENT_OWNED_MAX];
	size_t nowned, k;
	struct proxy_opts po;
	struct intercept_opts io;
	struct filter_reg reg[FILTER_MAX];
	struct filter_loop loop;
	struct wctx x;
	char err[512], who[64];
	sigset_t set;
	size_t i;
	int sfd, rc;

	memset(&x, 0, sizeof(x));
	x.ctl = ctl;
	x.parent = parent;
	x.index = index;
	x.link.fd = kfd;
	x.link.batching = true;
	child_on_fatal(worker_fatal_flush, &x);
	x.in = util_xmalloc(MSG_MAX);
	/* Before any descriptor is closed: the table's memfd is dropped
	 * here, and the only mapping left cannot be made writable. */
	snprintf(who, sizeof(who), "egress proxy worker %u", index);
	child_set_channel(ctl);
	rc = cfg->names ? dnsstub_table_make_reader(cfg->names) : 0;
	if (rc < 0)
		child_fatal("the table of synthetic addresses: %s", strerror(-rc));
	child_start(&(struct child_spec){ .name = WORKER_PROC_NAME, .who = who,
					  .parent = parent, .ctl = ctl, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep), .null_stdio = true,
					  .keep_env = confine_client_env });
	if (cfg->forget)
		cfg->forget(cfg->forget_arg);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		child_fatal("sigprocmask: %s", strerror(errno));
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		child_fatal("signalfd: %s", strerror(errno));
	/* splice() into a socket the peer has closed raises SIGPIPE (it has
	 * no MSG_NOSIGNAL): a peer must only ever close its own connection. */
	signal(SIGPIPE, SIG_IGN);

	memset(&po, 0, sizeof(po));
	po.listen_fd = cfg->listen_fd;
	po.policy = cfg->policy;
	po.record = kfd >= 0 ? worker_record : NULL;
	po.record_arg = &x;
	po.record_flush = kfd >= 0 ? worker_record_turn : NULL;
	po.signal_fd = sfd;
	po.on_signal = worker_signal;
	po.signal_arg = &x;
	po.tlisten_fds = cfg->tlisten_fds;
	po.ntlisten = cfg->ntlisten;
	po.names = cfg->names;
	po.max_conns = cfg->max_conns;
	po.client_limit = cfg->client_limit;
	po.shared = shared;
	po.worker = index;
	if (cfg->intercept) {
		/* Before the filter: the client side reads the trust store. */
		memset(&io, 0, sizeof(io));
		io.server = tls_server_ctx_new(err, sizeof(err));
		if (!io.server)
			child_fatal("%s", err);
		/* The system store is read on the first upstream handshake,
		 * once confined (confine_client_reads() lets it): most of a worker's
		 * start otherwise. */
		io.client = tls_client_ctx_new_deferred(cfg->policy->upstream_ca, err,
							sizeof(err));
		if (!io.client)
			child_fatal("%s", err);
		io.leaf = kfd >= 0 ? worker_leaf : NULL;
		io.leaf_arg = &x;
		po.intercept = &io;
	}
	po.nfilters = build_filters(cfg->policy, &x, reg);
	/* With receipts.sign "checkpoint" (whose lines the key holder keeps
	 * a few ms anyway), records wait for the key holder across turns,
	 * for a bounded time; not where spend is metered: the ledger records
	 * a call's budget.charge on a channel of its own, which must not
	 * overtake the call's lines. */
	x.link.hold_ms = cfg->policy->nspend_providers > 0 ||
				 !cfg->policy->receipts_checkpoint
				 ? 0 : util_test_ms("record_hold", WORKER_RECORD_HOLD_MS);
	po.filters = reg;
	x.px = proxy_new(&po, err, sizeof(err));
	if (!x.px)
		child_fatal("%s", err);
	proxy_filter_loop(x.px, &loop);
	for (i = 0; i < filter_table_len; i++)
		if (x.made[i] && filter_table[i]->start &&
		    filter_table[i]->start(x.made[i], &loop) < 0)
			child_fatal("the %s filter cannot start", filter_table[i]->name);
	if (proxy_watch(x.px, ctl, EPOLLIN, worker_ctl_ready, &x) < 0)
		child_fatal("cannot watch the supervisor's channel");
	if (confine_self(CONFINE_WORKER, paths,
			 read_paths(cfg->policy, paths, owned, &nowned), err,
			 sizeof(err)) < 0)
		child_fatal("%s", err);
	for (k = 0; k < nowned; k++)
		free(owned[k]);
	msg_start(&x.out, MSG_WORKER_READY);
	if (msg_send(ctl, &x.out, -1, 0) < 0)
		_exit(EXIT_AIRLOCK_FAILURE);
	if (!wait_go(&x))
		_exit(0);
	rc = proxy_run(x.px);
	if (kfd >= 0)
		worker_fatal_flush(&x);
	/* Not proxy_free(): exiting closes every connection, and freeing
	 * the tables first only costs the session's end time. */
	_exit(rc < 0 ? EXIT_AIRLOCK_FAILURE : 0);
}

/* --- the supervisor's side -------------------------------------------------- */

/* A memfd holding the @len bytes at @data, sealed, or -1 with errno. */
static int sealed_memfd(const char *name, const void *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (util_write_all(fd, data, len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void wipe_msg(struct msg *m)
{
	if (m->buf)
		explicit_bzero(m->buf, m->cap);
	msg_free(m);
}

/* Sends worker @w the configuration of filter @d, made from @src (and
 * rings it when @ring: it is serving). Returns 0, or -1 with a reason in
 * @err; a worker that is gone is no error (its exit says why). */
static int send_config(struct worker *w, const struct filter_def *d,
		       const struct filter_source *src, bool ring, char *err, size_t errlen)
{
	struct msg blk = { 0 }, m = { 0 };
	int fd = -1, r, rc = -1;

	msg_start_block(&blk, FILTER_CONFIG_MAX);
	if (d->config_put && d->config_put(src, &blk, &fd, err, errlen) < 0)
		goto out;
	if (blk.overflow) {
		snprintf(err, errlen, "the %s filter's configuration is too large", d->name);
		goto out;
	}
	msg_start(&m, MSG_FILTER_CONFIG);
	msg_put_cstr(&m, d->name);
	msg_put_u32(&m, 0);
	msg_put_bytes(&m, blk.len ? blk.buf : (const uint8_t *)"", blk.len);
	if (m.overflow) {
		/* too big for a message: beside it, in a sealed memfd */
		if (fd >= 0) {
			snprintf(err, errlen, "the %s filter's configuration is too large to "
				 "travel with a descriptor", d->name);
			goto out;
		}
		fd = sealed_memfd("airlock-filter-config", blk.buf, blk.len);
		if (fd < 0) {
			snprintf(err, errlen, "the %s filter's configuration: memfd: %s", d->name,
				 strerror(errno));
			goto out;
		}
		msg_start(&m, MSG_FILTER_CONFIG);
		msg_put_cstr(&m, d->name);
		msg_put_u32(&m, 1);
		msg_put_bytes(&m, "", 0);
	}
	r = msg_send(w->ctl, &m, fd, 0);
	if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
		snprintf(err, errlen, "sending the %s filter's configuration to a worker: %s",
			 d->name, strerror(-r));
		goto out;
	}
	if (r == 0 && ring)
		kill(w->pid, SIGUSR1);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	wipe_msg(&blk);
	wipe_msg(&m);
	return rc;
}

int worker_pool_start(struct worker_pool *wp, unsigned int n,
		      const struct worker_config *cfg, struct session *s,
		      char *err, size_t errlen)
{
	pid_t parent = getpid();
	sigset_t ring, old;
	unsigned int i;
	size_t j;

	ASSERT(n >= 1 && n <= WORKER_MAX);
	memset(wp, 0, sizeof(*wp));
	/* The connection counts every worker shares, mapped before the
	 * fork (limits: proxy.c). */
	wp->shared = proxy_shared_new(n, cfg->max_conns, cfg->client_limit, err, errlen);
	if (!wp->shared)
		return -1;
	wp->w = util_xcalloc(n, sizeof(*wp->w));
	for (i = 0; i < n; i++) {
		struct worker *w = &wp->w[i];
		int sv[2], kfd;
		pid_t pid;

		w->pid = -1;
		w->ctl = -1;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
			snprintf(err, errlen, "egress proxy worker: socketpair: %s",
				 strerror(errno));
			goto fail;
		}
		kfd = session_worker_channel(s);
		fflush(NULL);
		/* The worker is born with SIGUSR1 blocked: the supervisor may
		 * ring it (a message on its channel) before it reaches its
		 * loop's signalfd, and the default action would kill it. */
		sigemptyset(&ring);
		sigaddset(&ring, SIGUSR1);
		sigprocmask(SIG_BLOCK, &ring, &old);
		pid = fork();
		if (pid != 0)
			sigprocmask(SIG_SETMASK, &old, NULL);
		if (pid < 0) {
			snprintf(err, errlen, "egress proxy worker: fork: %s",
				 strerror(errno));
			close(sv[0]);
			close(sv[1]);
			if (kfd >= 0)
				close(kfd);
			goto fail;
		}
		if (pid == 0)
			worker_main(cfg, wp->shared, i, sv[1], kfd, parent);
		close(sv[1]);
		if (kfd >= 0)
			close(kfd);
		w->pid = pid;
		w->ctl = sv[0];
		wp->n++;
		wp->alive++;
		/* its filters' configurations, one message each, in the
		 * table's order: what it makes them from */
		for (j = 0; j < filter_table_len; j++)
			if (send_config(w, filter_table[j], cfg->filters, false, err, errlen) < 0)
				goto fail;
	}
	return 0;
fail:
	worker_pool_release(wp);
	return -1;
}

static int send_all(struct worker_pool *wp, struct msg *m, int fd, bool ring)
{
	unsigned int i;
	int r, rc = 0;

	for (i = 0; i < wp->n; i++) {
		struct worker *w = &wp->w[i];

		if (w->pid < 0)
			continue;
		r = msg_send(w->ctl, m, fd, 0);
		if (r < 0)
			rc = r;
		else if (ring)
			kill(w->pid, SIGUSR1);
	}
	return rc;
}

int worker_pool_go(struct worker_pool *wp)
{
	struct msg m = { 0 };
	unsigned int i;
	int r, rc = 0;

	msg_start(&m, MSG_GO);
	for (i = 0; i < wp->n; i++) {
		struct worker *w = &wp->w[i];

		if (w->pid < 0 || !w->ready || w->go || wp->stopping)
			continue;
		r = msg_send(w->ctl, &m, -1, 0);
		if (r < 0)
			rc = r;
		else
			w->go = true;
	}
	msg_free(&m);
	return rc;
}

/* Is @buf a well-formed MSG_CAPTURE? */
static bool capture_message(const uint8_t *buf, size_t n)
{
	struct msg_reader r;
	const char *str;
	const void *val;
	uint64_t u;
	size_t len;

	return msg_reader_init(&r, MSG_CHAN_WORKER, buf, n) && r.type == MSG_CAPTURE &&
	       msg_get_str(&r, REGISTRY_NAME_MAX, &str, NULL) && msg_get_u64(&r, &u) &&
	       msg_get_str(&r, REGISTRY_VALUE_MAX, &str, NULL) &&
	       msg_get_bytes(&r, REGISTRY_VALUE_MAX, &val, &len) && msg_end(&r);
}

bool worker_pool_read(struct worker_pool *wp, unsigned int i)
{
	struct worker *w = &wp->w[i];
	uint8_t *buf = util_xmalloc(MSG_MAX);
	struct msg_reader r;
	const char *reason;
	const void *val;
	size_t vlen;
	uint32_t wait;
	bool open = true;
	int fd;

	while (w->ctl >= 0) {
		ssize_t n = msg_recv(w->ctl, buf, MSG_MAX, &fd, MSG_DONTWAIT);
		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			open = false;
			break;
		}
		if (msg_reader_init(&r, MSG_CHAN_WORKER, buf, (size_t)n) && r.type == MSG_WORKER_READY &&
		    msg_end(&r)) {
			w->ready = true;
		} else if (r.type == MSG_SPEND_EXHAUSTED &&
			   msg_get_str(&r, sizeof(w->fatal) - 1, &reason, NULL) &&
			   msg_end(&r)) {
			w->exhausted = true;
		} else if (capture_message(buf, (size_t)n)) {
			/* to every other worker, then the answer: each has it
			 * queued before the capturing one relays the answer */
			struct msg ack = { 0 };
			unsigned int j;

			for (j = 0; j < wp->n; j++)
				if (j != i && wp->w[j].pid > 0 && wp->w[j].ctl >= 0 &&
				    msg_send(wp->w[j].ctl, &(struct msg){ .buf = buf,
									   .len = (size_t)n,
									   .cap = (size_t)n },
					     -1, 0) == 0)
					kill(wp->w[j].pid, SIGUSR1);
			explicit_bzero(buf, (size_t)n);
			msg_start(&ack, MSG_CAPTURE_ACK);
			(void)msg_send(w->ctl, &ack, -1, 0);
			msg_free(&ack);
		} else if (msg_reader_init(&r, MSG_CHAN_WORKER, buf, (size_t)n) && r.type == MSG_OAUTH_401 &&
			   msg_get_str(&r, REGISTRY_NAME_MAX, &reason, NULL) &&
			   msg_get_bytes(&r, REGISTRY_VALUE_MAX, &val, &vlen) &&
			   msg_get_u32(&r, &wait) && msg_end(&r)) {
			if (wp->oauth401)
				wp->oauth401(wp->oauth_arg, reason, val, vlen);
			explicit_bzero(buf, (size_t)n);
			if (wait) {
				/* after the new token (sent to every worker,
				 * this one too): the worker sends the request
				 * again with it */
				struct msg done = { 0 };

				msg_start(&done, MSG_OAUTH_401);
				(void)msg_send(w->ctl, &done, -1, 0);
				msg_free(&done);
			}
		} else if (r.type == MSG_FATAL &&
			   msg_get_str(&r, sizeof(w->fatal) - 1, &reason, NULL) &&
			   msg_end(&r)) {
			(void)util_strlcpy(w->fatal, reason, sizeof(w->fatal));
		} else {
			/* A worker that speaks nonsense is not trusted on. */
			util_warn("egress proxy worker %d sent a bad message: stopped",
				  (int)w->pid);
			if (w->pid > 0)
				kill(w->pid, SIGKILL);
			open = false;
			break;
		}
	}
	free(buf);
	return open;
}

int worker_pool_reload(struct worker_pool *wp, const struct policy *p, char *err,
		       size_t errlen)
{
	size_t len = strlen(p->canonical);
	struct msg m = { 0 };
	int fd, r = -1;

	fd = sealed_memfd("airlock-policy", p->canonical, len);
	if (fd < 0) {
		snprintf(err, errlen, "the policy's memfd: %s", strerror(errno));
		return -1;
	}
	msg_start(&m, MSG_POLICY);
	msg_put_cstr(&m, p->digest);
	r = send_all(wp, &m, fd, true);
	if (r < 0)
		snprintf(err, errlen, "sending the policy to a worker: %s", strerror(-r));
	msg_free(&m);
	close(fd);
	return r < 0 ? -1 : 0;
}

int worker_pool_configure(struct worker_pool *wp, const struct filter_def *d,
			  const struct filter_source *src)
{
	char err[256];
	unsigned int i;
	int rc = 0;

	if (!d)
		return -1;
	for (i = 0; i < wp->n; i++)
		if (wp->w[i].pid >= 0 && send_config(&wp->w[i], d, src, true, err, sizeof(err)) < 0)
			rc = -1;
	return rc;
}

int worker_pool_value(struct worker_pool *wp, const char *secret, time_t expires_at,
		      const char *ph, size_t phlen, const char *value, size_t len)
{
	struct msg m = { 0 };
	int r;

	msg_start(&m, MSG_CAPTURE);
	msg_put_cstr(&m, secret);
	msg_put_u64(&m, (uint64_t)expires_at);
	msg_put_str(&m, ph, phlen);
	msg_put_bytes(&m, value, len);
	r = send_all(wp, &m, -1, true);
	explicit_bzero(m.buf, m.cap);
	msg_free(&m);
	return r;
}

void worker_pool_stop(struct worker_pool *wp, unsigned int drain_ms)
{
	struct msg m = { 0 };
	unsigned int i;

	wp->stopping = true;
	msg_start(&m, MSG_STOP);
	msg_put_u32(&m, drain_ms);
	for (i = 0; i < wp->n; i++) {
		struct worker *w = &wp->w[i];

		if (w->pid < 0)
			continue;
		if (!w->go) {
			/* It never accepted a connection: nothing to drain,
			 * nothing to record. */
			kill(w->pid, SIGKILL);
			w->killed = true;
		} else if (msg_send(w->ctl, &m, -1, 0) == 0) {
			kill(w->pid, SIGUSR1);
		}
	}
	msg_free(&m);
}

struct worker *worker_pool_find(struct worker_pool *wp, pid_t pid)
{
	unsigned int i;

	for (i = 0; i < wp->n; i++)
		if (wp->w[i].pid == pid && pid > 0)
			return &wp->w[i];
	return NULL;
}

void worker_pool_reaped(struct worker_pool *wp, struct worker *w, int wstatus)
{
	(void)worker_pool_read(wp, (unsigned int)(w - wp->w));
	w->pid = -1;
	w->wstatus = wstatus;
	wp->alive--;
	/* its connections died with it */
	proxy_shared_worker_gone(wp->shared, (unsigned int)(w - wp->w));
	if (w->ctl >= 0)
		close(w->ctl);
	w->ctl = -1;
}

bool worker_exited_cleanly(const struct worker_pool *wp, const struct worker *w)
{
	return wp->stopping &&
	       (w->killed || (WIFEXITED(w->wstatus) && WEXITSTATUS(w->wstatus) == 0));
}

void worker_describe_exit(const struct worker *w, char *out, size_t len)
{
	child_describe_exit(w->wstatus, w->fatal, out, len);
}

void worker_pool_release(struct worker_pool *wp)
{
	unsigned int i;

	for (i = 0; i < wp->n; i++) {
		struct worker *w = &wp->w[i];

		if (w->pid > 0) {
			kill(w->pid, SIGKILL);
			while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
				;
			w->pid = -1;
		}
		if (w->ctl >= 0)
			close(w->ctl);
		w->ctl = -1;
	}
	free(wp->w);
	proxy_shared_free(wp->shared);
	memset(wp, 0, sizeof(*wp));
}
