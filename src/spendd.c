/* SPDX-License-Identifier: Apache-2.0
 * spendd.c - the ledger process (see spendd.h).
 *
 * DOC: Theory of Operation
 *
 * A session's spend lives in its ledger (ledger.h): a file, a PostgreSQL
 * server, or memory. Every reservation and settlement is one blocking
 * transaction. The proxy workers must never block (one slow PostgreSQL
 * round trip would stall every connection of a worker), and they are
 * confined so that they can open no file and no new socket. So the ledger
 * has a process of its own, forked from the supervisor before any secret
 * is read:
 *
 *   1. it keeps only its channel to the supervisor and stderr, and of the
 *      environment only what libpq reads (PG* and HOME, for PGPASSWORD
 *      and ~/.pgpass); everything else is wiped (the supervisor's
 *      environment may hold the values of brokered secrets);
 *   2. it names itself "airlock-ledger", is not dumpable and dies with
 *      the supervisor; once its ledger is open it confines itself
 *      (confine.c, CONFINE_LEDGER): no capabilities, no exec, files
 *      written only below an SQLite ledger's directory;
 *   3. it opens the ledger and the session's row (creating it under its
 *      parent, which must exist) and says READY, or its reason (FATAL),
 *      which refuses the session before session.start;
 *   4. it then receives, as descriptors over its control channel, its own
 *      channel to the key holder (to record budget.charge) and one
 *      channel per proxy worker, and serves them in one poll loop:
 *      the SETTLEs read in one turn of the loop are settled (or
 *      released) together (ledger_settle_batch: group commit) and each
 *      recorded; then RESERVE is answered with RESERVED (the reservation
 *      id, or the cap it would pass) once the reservations read in the
 *      same turn are made together (ledger_reserve_batch, each checked
 *      after the ones before it); every
 *      LEDGER_HEARTBEAT_SECONDS the holder's lease is renewed;
 *   5. on CLOSE (the workers have exited) it reads what they still sent,
 *      closes the session (reservations still held are charged in full,
 *      as cut calls) and answers TOTAL with the session's own spent money,
 *      which becomes session.end's spend_usd. If the supervisor's channel
 *      closes first, it closes the session the same way and exits.
 *
 * A worker is less trusted than the supervisor: each of its messages is
 * read with the checked readers of msg.h; one that does not parse closes
 * that worker's channel (its requests then fail closed in the worker).
 * A ledger call that fails is answered as a failure: the worker refuses
 * the request (502, spend.ledger) rather than forward what it could not
 * reserve. In shadow mode a reservation that passes a cap is made anyway
 * (ledger_reserve_over) and answered as refused with its id: the worker
 * records would_block, forwards, and settles it like any other.
 *
 * Should: open the ledger, reserve, settle, renew, close. Mustn't: hold
 * a secret or a key, parse the agent's bytes, outlive the supervisor.
 */
#include "spendd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "confine.h"
#include "keeper.h"
#include "ledger.h"
#include "meter.h"
#include "msg.h"
#include "util.h"
#include "worker.h"

extern char **environ;

/* Workers a ledger process serves: one channel each. */
#define SPENDD_MAX_CHANNELS WORKER_MAX
/* How long the supervisor waits for READY and for TOTAL. A PostgreSQL
 * server that does not answer is given libpq's own connect timeout
 * first; a lock is given the ledger's busy timeout (10 s). */
#define SPENDD_WAIT_MS 60000
/* What the ledger process may still read once confined (libpq's
 * resolver, passwd lookup for ~, TLS trust; the PG* files are added). */
static const char *const ledger_reads[] = {
	"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
	"/etc/gai.conf", "/etc/passwd", "/etc/group", "/etc/ssl", "/usr/lib/ssl",
	"/usr/share/ca-certificates", "/etc/ca-certificates", "/etc/postgresql-common",
	"/dev/urandom",
};

/* The environment libpq may read. */
static const char *const keep_env_prefix[] = { "PG" };
static const char *const keep_env_names[] = { "HOME" };

bool spendd_wanted(const struct policy *p)
{
	return p->nspend_providers > 0 || p->spend_parent != NULL;
}

/* --- inside the ledger process ---------------------------------------------- */

/* A RESERVE read and not answered yet: the reservations that queue while
 * a transaction runs are made together in the next one. */
struct queued_reserve {
	int fd;
	uint32_t tag;
	int64_t amount;
};

#define SPENDD_QUEUE_MAX 256

/* What a worker says of a settled call beyond its cost. */
struct settled {
	enum meter_outcome outcome;
	bool have_usage;
	uint64_t tokens[4];        /* input, output, cache_write, cache_read */
	const char *model, *host, *endpoint, *reason;
	bool overrun;
	uint64_t output_bound;     /* all choices */
	const char *price_key;     /* "" when none */
	uint64_t price[4];         /* n$ per million: input, output,
				      cache_write, cache_read */
};

/* A SETTLE read and not made yet: the settlements read in one turn of
 * the loop are made together (ledger_settle_batch), LEDGER_BATCH_MAX at
 * most; its strings are copied out of the message. */
struct queued_settle {
	int64_t rid, cost;
	bool release;              /* never forwarded: nothing to record */
	struct settled z;
	char model[METER_MODEL_MAX + 1], host[256], endpoint[65], reason[161],
		price_key[METER_MODEL_MAX + 2];
};

struct dctx {
	int ctl;
	struct queued_reserve queue[SPENDD_QUEUE_MAX];
	size_t nqueue;
	struct queued_settle settles[LEDGER_BATCH_MAX];
	size_t nsettles;
	struct ledger *l;
	struct ledger_session *s;
	const struct policy *p;
	bool shadow;
	struct keeper_link keeper;     /* fd -1 until given */
	int chans[SPENDD_MAX_CHANNELS];
	size_t nchans;
	uint8_t *in;
	struct msg out;
};

static bool env_kept(const char *entry)
{
	size_t i, n = strcspn(entry, "=");

	for (i = 0; i < ARRAY_SIZE(keep_env_prefix); i++)
		if (strncmp(entry, keep_env_prefix[i], strlen(keep_env_prefix[i])) == 0)
			return true;
	for (i = 0; i < ARRAY_SIZE(keep_env_names); i++)
		if (strlen(keep_env_names[i]) == n &&
		    strncmp(entry, keep_env_names[i], n) == 0)
			return true;
	return false;
}

/* Wipes the inherited environment but the variables libpq reads, which
 * are copied first and set again. */
static json_t *usd_json(int64_t nano)
{
	return json_real((double)nano / (double)METER_NANO_PER_USD);
}

static json_t *cap_json(int64_t cap)
{
	return cap == LEDGER_NO_CAP ? json_null() : usd_json(cap);
}

static void reply_reserved(struct dctx *x, int fd, uint32_t tag,
			   enum ledger_status st, int64_t rid,
			   const struct ledger_refusal *why)
{
	bool refused = st == LEDGER_REFUSED;

	msg_start(&x->out, MSG_SPEND_RESERVED);
	msg_put_u32(&x->out, tag);
	msg_put_u32(&x->out, (uint32_t)st);
	msg_put_u64(&x->out, rid >= 0 ? (uint64_t)rid : UINT64_MAX);
	msg_put_u64(&x->out, refused && why->cap != LEDGER_NO_CAP ? (uint64_t)why->cap
								  : UINT64_MAX);
	msg_put_u64(&x->out, refused ? (uint64_t)why->spent : 0);
	msg_put_u64(&x->out, refused ? (uint64_t)why->reserved : 0);
	msg_put_cstr(&x->out, refused ? why->session
				      : st == LEDGER_OK ? "" : ledger_error(x->l));
	/* A worker that does not read its answers loses its channel. */
	(void)msg_send(fd, &x->out, -1, MSG_DONTWAIT);
}

/* Makes the queued reservations, LEDGER_BATCH_MAX per transaction, in
 * the order they came, and answers each. */
static void flush_reserves(struct dctx *x)
{
	size_t done = 0;

	while (done < x->nqueue) {
		struct ledger_refusal whys[LEDGER_BATCH_MAX];
		enum ledger_status st[LEDGER_BATCH_MAX];
		int64_t amounts[LEDGER_BATCH_MAX], rids[LEDGER_BATCH_MAX];
		bool overs[LEDGER_BATCH_MAX];
		size_t n = x->nqueue - done, k;

		if (n > LEDGER_BATCH_MAX)
			n = LEDGER_BATCH_MAX;
		for (k = 0; k < n; k++)
			amounts[k] = x->queue[done + k].amount;
		(void)ledger_reserve_batch(x->s, n, amounts, x->shadow, st, rids, whys,
					   overs);
		for (k = 0; k < n; k++) {
			/* shadow: past a cap, made anyway and answered as
			 * refused with its id: the call goes on */
			if (st[k] == LEDGER_OK && overs[k])
				st[k] = LEDGER_REFUSED;
			reply_reserved(x, x->queue[done + k].fd, x->queue[done + k].tag,
				       st[k], rids[k], &whys[k]);
		}
		done += n;
	}
	x->nqueue = 0;
}

static bool on_reserve(struct dctx *x, int fd, struct msg_reader *r)
{
	uint32_t tag;
	uint64_t amount;

	msg_get_u32(r, &tag);
	msg_get_u64(r, &amount);
	if (!msg_end(r) || amount > (uint64_t)METER_MONEY_MAX)
		return false;
	if (x->nqueue == SPENDD_QUEUE_MAX)
		flush_reserves(x);
	x->queue[x->nqueue++] = (struct queued_reserve){ .fd = fd, .tag = tag,
							 .amount = (int64_t)amount };
	return true;
}

/* Dollars per million tokens from n$ per million, for the receipt (the
 * _nano figures are the exact ones). */
static json_t *price_json(const uint64_t price[4], bool nano)
{
	static const char *const names[] = { "input", "output", "cache_write",
					     "cache_read" };
	json_t *o = json_object();
	size_t i;

	ASSERT(o);
	for (i = 0; i < 4; i++)
		json_object_set_new(o, names[i], nano ? json_integer((json_int_t)price[i])
						      : usd_json((int64_t)price[i]));
	return o;
}

/* budget.charge for one settled call. */
static void record_charge(struct dctx *x, const struct ledger_totals *t,
			  const struct settled *z, int64_t cost)
{
	enum meter_outcome outcome = z->outcome;
	bool have_usage = z->have_usage;
	const uint64_t *tokens = z->tokens;
	const char *model = z->model, *host = z->host, *endpoint = z->endpoint,
		   *reason = z->reason;
	char cost_s[METER_USD_LEN], total_s[METER_USD_LEN], line[256];
	json_t *subj;
	int64_t seq;
	int r;

	if (x->keeper.fd < 0)
		return;
	subj = json_pack("{s:s, s:s, s:s, s:s}", "host", host, "endpoint", endpoint,
			 "model", model, "outcome", meter_outcome_to_string(outcome));
	ASSERT(subj);
	if (have_usage) {
		json_object_set_new(subj, "input_tokens", json_integer((json_int_t)tokens[0]));
		json_object_set_new(subj, "output_tokens", json_integer((json_int_t)tokens[1]));
		json_object_set_new(subj, "cache_write_tokens",
				    json_integer((json_int_t)tokens[2]));
		json_object_set_new(subj, "cache_read_tokens",
				    json_integer((json_int_t)tokens[3]));
	}
	if (z->price_key[0]) {
		json_object_set_new(subj, "price_key", json_string(z->price_key));
		json_object_set_new(subj, "price_usd_per_million", price_json(z->price, false));
		json_object_set_new(subj, "price_nano_per_million", price_json(z->price, true));
	}
	json_object_set_new(subj, "output_bound", json_integer((json_int_t)z->output_bound));
	if (have_usage)
		json_object_set_new(subj, "overrun", json_boolean(z->overrun));
	json_object_set_new(subj, "cost_usd", usd_json(cost));
	json_object_set_new(subj, "cost_nano", json_integer(cost));
	json_object_set_new(subj, "total_usd", usd_json(t->own_spent));
	json_object_set_new(subj, "total_nano", json_integer(t->own_spent));
	json_object_set_new(subj, "tree_spent_usd", usd_json(t->spent));
	json_object_set_new(subj, "cap_usd", cap_json(t->cap));
	meter_format_usd(cost, cost_s);
	meter_format_usd(t->own_spent, total_s);
	snprintf(line, sizeof(line), "%s %s: $%s (%s); the session has spent $%s",
		 host, endpoint, cost_s, reason, total_s);
	r = keeper_record(&x->keeper, false, "budget.charge", RECEIPT_INFO,
			  RECEIPT_POINT_EGRESS_PROXY, "spend.prices", subj, line, &seq);
	json_decref(subj);
	if (r < 0)
		child_fatal("cannot record a charge: the key holder's channel "
			     "failed (%s)", strerror(-r));
}

/* Makes the queued settlements (releases) in one transaction, in the
 * order they came, and records each one's charge. */
static void flush_settles(struct dctx *x)
{
	int64_t rids[LEDGER_BATCH_MAX], costs[LEDGER_BATCH_MAX];
	struct ledger_totals after[LEDGER_BATCH_MAX];
	enum ledger_status st[LEDGER_BATCH_MAX];
	size_t k, n = x->nsettles;

	if (n == 0)
		return;
	for (k = 0; k < n; k++) {
		rids[k] = x->settles[k].rid;
		costs[k] = x->settles[k].release ? 0 : x->settles[k].cost;
	}
	(void)ledger_settle_batch(x->s, n, rids, costs, st, after);
	for (k = 0; k < n; k++) {
		const struct queued_settle *q = &x->settles[k];

		if (q->release) {
			if (st[k] != LEDGER_OK)
				util_warn("spend ledger: releasing reservation %lld: %s",
					  (long long)q->rid, ledger_error(x->l));
			continue;
		}
		if (st[k] != LEDGER_OK) {
			/* The money is not lost: the reservation stays, and
			 * the session's close charges it in full. */
			util_warn("spend ledger: settling reservation %lld: %s",
				  (long long)q->rid, ledger_error(x->l));
			if (ledger_session_totals(x->s, &after[k]) != LEDGER_OK)
				memset(&after[k], 0, sizeof(after[k]));
		}
		record_charge(x, &after[k], &q->z, q->cost);
	}
	x->nsettles = 0;
}

static bool on_settle(struct dctx *x, struct msg_reader *r)
{
	struct queued_settle *q;
	struct settled z;
	uint64_t rid, cost;
	uint32_t outcome, have_usage, overrun;
	size_t i;

	memset(&z, 0, sizeof(z));
	msg_get_u64(r, &rid);
	msg_get_u64(r, &cost);
	msg_get_u32(r, &outcome);
	msg_get_u32(r, &have_usage);
	for (i = 0; i < 4; i++)
		msg_get_u64(r, &z.tokens[i]);
	msg_get_str(r, METER_MODEL_MAX, &z.model, NULL);
	msg_get_str(r, 255, &z.host, NULL);
	msg_get_str(r, 64, &z.endpoint, NULL);
	msg_get_str(r, 160, &z.reason, NULL);
	msg_get_u32(r, &overrun);
	msg_get_u64(r, &z.output_bound);
	msg_get_str(r, METER_MODEL_MAX + 1, &z.price_key, NULL);
	for (i = 0; i < 4; i++)
		msg_get_u64(r, &z.price[i]);
	if (!msg_end(r) || rid > (uint64_t)INT64_MAX || cost > (uint64_t)METER_MONEY_MAX ||
	    outcome > METER_OUTCOME_COUNT || have_usage > 1 || overrun > 1)
		return false;
	for (i = 0; i < 4; i++)
		if (z.price[i] > (uint64_t)METER_PRICE_MAX)
			return false;
	z.outcome = (enum meter_outcome)outcome;
	z.have_usage = have_usage != 0;
	z.overrun = overrun != 0;
	if (x->nsettles == LEDGER_BATCH_MAX)
		flush_settles(x);
	q = &x->settles[x->nsettles++];
	*q = (struct queued_settle){ .rid = (int64_t)rid, .cost = (int64_t)cost,
				     .release = outcome == METER_OUTCOME_COUNT, .z = z };
	(void)util_strlcpy(q->model, z.model, sizeof(q->model));
	(void)util_strlcpy(q->host, z.host, sizeof(q->host));
	(void)util_strlcpy(q->endpoint, z.endpoint, sizeof(q->endpoint));
	(void)util_strlcpy(q->reason, z.reason, sizeof(q->reason));
	(void)util_strlcpy(q->price_key, z.price_key, sizeof(q->price_key));
	q->z.model = q->model;
	q->z.host = q->host;
	q->z.endpoint = q->endpoint;
	q->z.reason = q->reason;
	q->z.price_key = q->price_key;
	return true;
}

/* Serves what worker channel @i has; false when it closed (or spoke
 * nonsense, which closes it). */
static bool serve_worker(struct dctx *x, size_t i)
{
	for (;;) {
		struct msg_reader r;
		int fd = -1;
		bool ok = false;
		ssize_t n = msg_recv(x->chans[i], x->in, MSG_MAX, &fd, MSG_DONTWAIT);

		if (fd >= 0)
			close(fd);
		if (n == -EAGAIN || n == -EINTR)
			return true;
		if (n <= 0)
			return false;
		if (msg_reader_init(&r, MSG_CHAN_SPEND, x->in, (size_t)n)) {
			if (r.type == MSG_SPEND_RESERVE)
				ok = on_reserve(x, x->chans[i], &r);
			else if (r.type == MSG_SPEND_SETTLE)
				ok = on_settle(x, &r);
		}
		if (!ok) {
			util_warn("spend ledger: a proxy worker sent a bad message "
				  "(%s): its channel is closed",
				  r.error ? r.error : msg_type_to_string(r.type));
			return false;
		}
	}
}

static void drop_channel(struct dctx *x, size_t i)
{
	close(x->chans[i]);
	x->chans[i] = x->chans[--x->nchans];
}

/* Closes the session and exits: TOTAL first when @answer. */
__attribute__((noreturn)) static void finish(struct dctx *x, bool answer)
{
	struct ledger_totals t;
	size_t i;

	/* The workers have exited: everything they sent is queued. */
	for (i = x->nchans; i-- > 0;)
		(void)serve_worker(x, i);
	flush_settles(x);
	flush_reserves(x); /* no one reads the answers: charged in full below */
	if (ledger_session_close(x->s, &t) != LEDGER_OK)
		child_fatal("closing the session in the ledger: %s", ledger_error(x->l));
	ledger_close(x->l);
	if (answer) {
		msg_start(&x->out, MSG_SPEND_TOTAL);
		msg_put_u64(&x->out, (uint64_t)t.own_spent);
		if (msg_send(x->ctl, &x->out, -1, 0) < 0)
			_exit(EXIT_AIRLOCK_FAILURE);
	}
	_exit(0);
}

/* Handles what the supervisor sent. */
static void serve_ctl(struct dctx *x)
{
	for (;;) {
		struct msg_reader r;
		uint32_t kind;
		int fd = -1;
		ssize_t n = msg_recv(x->ctl, x->in, MSG_MAX, &fd, MSG_DONTWAIT);

		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0)
			finish(x, false); /* the supervisor is gone */
		if (!msg_reader_init(&r, MSG_CHAN_LEDGER, x->in, (size_t)n))
			child_fatal("the supervisor sent a bad message: %s", r.error);
		if (r.type == MSG_SPEND_CHANNEL && msg_get_u32(&r, &kind) && msg_end(&r) &&
		    fd >= 0 && kind <= MSG_SPEND_CHANNEL_WORKER) {
			if (kind == MSG_SPEND_CHANNEL_KEEPER) {
				if (x->keeper.fd >= 0)
					close(x->keeper.fd);
				x->keeper.fd = fd;
			} else if (x->nchans < SPENDD_MAX_CHANNELS) {
				(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
				x->chans[x->nchans++] = fd;
			} else {
				close(fd);
			}
			continue;
		}
		if (fd >= 0)
			close(fd);
		if (r.type == MSG_SPEND_CLOSE && msg_end(&r))
			finish(x, true);
		child_fatal("the supervisor sent %s", msg_type_to_string(r.type));
	}
}

/* Confines the process once its ledger is open: no exec, no new
 * privileges or capabilities, files written only in an SQLite ledger's
 * directory, read only where libpq and OpenSSL look. */
static void confine_ledger(const struct policy *p)
{
	const char *reads[ARRAY_SIZE(ledger_reads) + 5], *rw[1];
	char *home_files[3] = { NULL, NULL, NULL }, *dir = NULL, err[256];
	const char *home = getenv("HOME"), *v, *path;
	size_t nr = 0, nrw = 0, i;
	int rc;

	for (i = 0; i < ARRAY_SIZE(ledger_reads); i++)
		reads[nr++] = ledger_reads[i];
	if (home && home[0] == '/') {
		home_files[0] = util_xasprintf("%s/.pgpass", home);
		home_files[1] = util_xasprintf("%s/.pg_service.conf", home);
		home_files[2] = util_xasprintf("%s/.postgresql", home);
		for (i = 0; i < 3; i++)
			reads[nr++] = home_files[i];
	}
	if ((v = getenv("PGPASSFILE")) && v[0] == '/')
		reads[nr++] = v;
	if ((v = getenv("PGSERVICEFILE")) && v[0] == '/')
		reads[nr++] = v;
	path = p->spend_ledger_kind == POLICY_LEDGER_SQLITE ? p->spend_ledger_target : NULL;
	if (path && path[0] == '/') {
		char *slash;

		dir = util_xstrdup(path);
		slash = strrchr(dir, '/');
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		rw[nrw++] = dir;
	}
	rc = confine_self_rw(CONFINE_LEDGER, reads, nr, rw, nrw, err, sizeof(err));
	for (i = 0; i < 3; i++)
		free(home_files[i]);
	free(dir);
	if (rc < 0)
		child_fatal("cannot confine the spend ledger process: %s", err);
}

__attribute__((noreturn)) static void spendd_main(const struct policy *p, const char *id,
						  const char *parent, int ctl, pid_t sup)
{
	const int keep[] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, ctl };
	struct ledger_options lo = { .create = true };
	struct pollfd pfd[1 + SPENDD_MAX_CHANNELS];
	struct dctx x;
	enum ledger_status st;
	char err[512], *shown;
	time_t beat;

	memset(&x, 0, sizeof(x));
	x.ctl = ctl;
	x.p = p;
	x.shadow = p->mode == POLICY_MODE_SHADOW;
	x.keeper.fd = -1;
	x.in = util_xmalloc(MSG_MAX);
	child_start(&(struct child_spec){ .name = SPENDD_PROC_NAME, .who = "spend ledger",
					  .parent = sup, .ctl = ctl, .keep = keep,
					  .nkeep = ARRAY_SIZE(keep), .null_stdio = true,
					  .ignore_session_signals = true,
					  .keep_env = env_kept });

	shown = ledger_redact(p->spend_ledger ? p->spend_ledger : "null");
	st = ledger_open(p->spend_ledger, &lo, &x.l, err, sizeof(err));
	if (st != LEDGER_OK)
		child_fatal("spend.ledger %s: %s", shown, err);
	st = ledger_session_open(x.l, id, parent, ledger_cap_of_policy(p), &x.s);
	if (st == LEDGER_NO_PARENT)
		child_fatal("spend.parent: the parent session '%s' is not in the "
			     "ledger %s (create it with 'airlock spend set')", parent, shown);
	if (st == LEDGER_CONFLICT)
		child_fatal("spend.parent: session '%s' is already in the ledger %s "
			     "under another parent than %s%s%s", id, shown,
			     parent ? "'" : "", parent ? parent : "none",
			     parent ? "'" : "");
	if (st != LEDGER_OK)
		child_fatal("spend.ledger %s: cannot open session '%s' (%s): %s",
			     shown, id, ledger_status_to_string(st), ledger_error(x.l));
	free(shown);
	confine_ledger(p);
	msg_start(&x.out, MSG_SPEND_READY);
	if (msg_send(ctl, &x.out, -1, 0) < 0)
		_exit(EXIT_AIRLOCK_FAILURE);

	beat = time(NULL);
	for (;;) {
		time_t now = time(NULL);
		int timeout;
		size_t i, n = 0;

		if (now - beat >= LEDGER_HEARTBEAT_SECONDS) {
			if (ledger_heartbeat(x.s) != LEDGER_OK)
				util_warn("spend ledger: renewing the lease: %s",
					  ledger_error(x.l));
			beat = now;
		}
		timeout = (int)(LEDGER_HEARTBEAT_SECONDS - (now - beat)) * 1000;
		pfd[n++] = (struct pollfd){ .fd = ctl, .events = POLLIN };
		for (i = 0; i < x.nchans; i++)
			pfd[n++] = (struct pollfd){ .fd = x.chans[i], .events = POLLIN };
		if (poll(pfd, (nfds_t)n, timeout < 0 ? 0 : timeout) < 0) {
			if (errno == EINTR)
				continue;
			child_fatal("poll: %s", strerror(errno));
		}
		/* Workers first: what they sent before the supervisor said
		 * CLOSE is handled before the session closes. Their
		 * reservations are made together once every channel is read
		 * (group commit), before a closed channel's descriptor goes. */
		{
			bool gone[SPENDD_MAX_CHANNELS] = { false };

			for (i = x.nchans; i-- > 0;)
				if (pfd[1 + i].revents)
					gone[i] = !serve_worker(&x, i);
			flush_settles(&x);
			flush_reserves(&x);
			for (i = x.nchans; i-- > 0;)
				if (gone[i])
					drop_channel(&x, i);
		}
		if (pfd[0].revents)
			serve_ctl(&x);
	}
}

/* --- the supervisor's side -------------------------------------------------- */

/* Waits up to SPENDD_WAIT_MS for one message of type @want on d->ctl. */
static int wait_for(struct spendd *d, uint32_t want, uint8_t *buf,
		    struct msg_reader *r, char *err, size_t errlen)
{
	struct pollfd pfd = { .fd = d->ctl, .events = POLLIN };
	const char *reason;
	ssize_t n;
	int fd = -1, pr;

	do
		pr = poll(&pfd, 1, SPENDD_WAIT_MS);
	while (pr < 0 && errno == EINTR);
	if (pr == 0) {
		snprintf(err, errlen, "the spend ledger did not answer within %d s",
			 SPENDD_WAIT_MS / 1000);
		return -1;
	}
	n = msg_recv(d->ctl, buf, MSG_MAX, &fd, 0);
	if (fd >= 0)
		close(fd);
	if (n <= 0 || !msg_reader_init(r, MSG_CHAN_LEDGER, buf, (size_t)n)) {
		snprintf(err, errlen, "the spend ledger process ended without a word");
		return -1;
	}
	if (r->type == MSG_FATAL && msg_get_str(r, sizeof(d->fatal) - 1, &reason, NULL) &&
	    msg_end(r)) {
		(void)util_strlcpy(d->fatal, reason, sizeof(d->fatal));
		snprintf(err, errlen, "%s", reason);
		return -1;
	}
	if (r->type != want) {
		snprintf(err, errlen, "the spend ledger sent %s instead of %s",
			 msg_type_to_string(r->type), msg_type_to_string(want));
		return -1;
	}
	return 0;
}

static void reap_now(struct spendd *d)
{
	if (d->pid <= 0)
		return;
	while (waitpid(d->pid, &d->wstatus, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
}

int spendd_start(struct spendd *d, const struct policy *p, const char *id,
		 const char *parent, const char **rule, char *err, size_t errlen)
{
	struct msg_reader r;
	uint8_t *buf;
	pid_t sup = getpid();
	int sv[2], rc = -1;

	memset(d, 0, sizeof(*d));
	d->pid = -1;
	d->ctl = -1;
	*rule = "spend.ledger";
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "spend ledger: socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0) {
		snprintf(err, errlen, "spend ledger: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (d->pid == 0) {
		close(sv[0]);
		spendd_main(p, id, parent ? parent : p->spend_parent, sv[1], sup);
	}
	close(sv[1]);
	d->ctl = sv[0];
	buf = util_xmalloc(MSG_MAX);
	if (wait_for(d, MSG_SPEND_READY, buf, &r, err, errlen) < 0 || !msg_end(&r)) {
		if (strncmp(err, "spend.parent", 12) == 0)
			*rule = "spend.parent";
		spendd_release(d);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static int send_fd(struct spendd *d, int fd, uint32_t kind)
{
	struct msg m = { 0 };
	int r;

	msg_start(&m, MSG_SPEND_CHANNEL);
	msg_put_u32(&m, kind);
	r = msg_send(d->ctl, &m, fd, 0);
	msg_free(&m);
	return r;
}

int spendd_give_keeper(struct spendd *d, int fd)
{
	int r = fd >= 0 ? send_fd(d, fd, MSG_SPEND_CHANNEL_KEEPER) : -EBADF;

	if (fd >= 0)
		close(fd);
	return r;
}

int spendd_new_channel(struct spendd *d, int *worker_end)
{
	int sv[2], r;

	*worker_end = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	r = send_fd(d, sv[1], MSG_SPEND_CHANNEL_WORKER);
	close(sv[1]);
	if (r < 0) {
		close(sv[0]);
		return r;
	}
	*worker_end = sv[0];
	return 0;
}

void spendd_reaped(struct spendd *d, int wstatus)
{
	d->pid = -1;
	d->wstatus = wstatus;
	child_read_last_words(d->ctl, d->fatal, sizeof(d->fatal));
}

void spendd_describe_exit(const struct spendd *d, char *out, size_t len)
{
	child_describe_exit(d->wstatus, d->fatal, out, len);
}

int spendd_finish(struct spendd *d, int64_t *own, char *err, size_t errlen)
{
	struct msg_reader r;
	struct msg m = { 0 };
	uint8_t *buf;
	uint64_t v;
	int rc = -1;

	*own = 0;
	d->finishing = true;
	if (d->pid < 0 || d->ctl < 0) {
		spendd_describe_exit(d, err, errlen);
		return -1;
	}
	buf = util_xmalloc(MSG_MAX);
	msg_start(&m, MSG_SPEND_CLOSE);
	if (msg_send(d->ctl, &m, -1, 0) < 0) {
		snprintf(err, errlen, "the spend ledger's channel: %s", strerror(errno));
		goto out;
	}
	if (wait_for(d, MSG_SPEND_TOTAL, buf, &r, err, errlen) < 0)
		goto out;
	if (!msg_get_u64(&r, &v) || !msg_end(&r) || v > (uint64_t)METER_MONEY_MAX) {
		snprintf(err, errlen, "the spend ledger sent a bad total");
		goto out;
	}
	*own = (int64_t)v;
	rc = 0;
out:
	msg_free(&m);
	free(buf);
	reap_now(d);
	return rc;
}

void spendd_release(struct spendd *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		reap_now(d);
	}
	if (d->ctl >= 0)
		close(d->ctl);
	d->ctl = -1;
}
