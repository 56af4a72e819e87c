/* SPDX-License-Identifier: Apache-2.0
 * ledger.h - where spend lives: sessions in a tree, each with a cap, the
 * spent and reserved money of its subtree, and the reservations in flight
 * (docs/SPEND.md has the model and the schema).
 *
 * One API over three backends, chosen by the ledger string of the policy:
 *	"sqlite:PATH"               one file, for the sessions of one machine
 *	"postgresql://..." or
 *	"postgres://..."            a PostgreSQL server, for many machines
 *	NULL or ""                  in memory, for a lone session
 * Every operation that touches money is one transaction over the
 * session's row and every ancestor's, so that concurrent sessions, in one
 * process or many, on one machine or many, never overshoot a cap.
 *
 * Money is int64_t nano-dollars (meter.h); a cap is a non-negative amount
 * or LEDGER_NO_CAP.
 *
 * Calling pattern of a session (the supervisor or the proxy):
 *
 *	ledger_open(spec, &opts, &l, err, sizeof(err));
 *	ledger_session_open(l, id, parent, cap, &s);  NO_PARENT: exit 125
 *	per metered call:
 *		ledger_reserve(s, amount, &rid, &why);  REFUSED: 429
 *		... forward, read the answer ...
 *		ledger_settle(s, rid, cost, &totals);   or ledger_release()
 *		                                        when nothing was sent
 *	every LEDGER_HEARTBEAT_SECONDS while the session runs:
 *		ledger_heartbeat(s);
 *	at the end:
 *		ledger_session_close(s, &totals);       totals.own_spent is
 *		                                        session.end's spend_usd
 *		ledger_close(l);
 *
 * Calls block (SQLite waits for its lock up to busy_timeout_ms; PostgreSQL
 * makes a few round trips). A handle is used by one thread at a time, and
 * only in the process that opened it (never across fork()). Sessions of
 * one handle share its connection.
 */
#ifndef AIRLOCK_LEDGER_H
#define AIRLOCK_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEDGER_NO_CAP INT64_C(-1)

/* A session's lease: a holder that has not been heard from for this long
 * is taken for dead, its reservations charged (docs/SPEND.md). */
#define LEDGER_LEASE_SECONDS_DEFAULT 300
/* How often a running session should call ledger_heartbeat(). */
#define LEDGER_HEARTBEAT_SECONDS 60
#define LEDGER_BUSY_TIMEOUT_MS_DEFAULT 10000
/* Deepest session tree (a root is depth 0). */
#define LEDGER_MAX_DEPTH 32
/* The schema this code reads and writes (docs/SPEND.md: migrations). */
#define LEDGER_SCHEMA_VERSION 1

/* Keep ledger_status_to_string() in sync (static_assert on the table). */
enum ledger_status {
	LEDGER_OK = 0,
	LEDGER_REFUSED,    /* a cap would be exceeded: the refusal names it */
	LEDGER_NO_PARENT,  /* the parent session is not in the ledger */
	LEDGER_NOT_FOUND,  /* no such session, or no such reservation of this
			      session */
	LEDGER_CONFLICT,   /* the session exists under another parent */
	LEDGER_INVALID,    /* a bad argument: id, amount, depth */
	LEDGER_ERROR,      /* the backend failed: ledger_error() says why */
	LEDGER_STATUS_COUNT
};

const char *ledger_status_to_string(enum ledger_status s);

struct ledger_options {
	bool create;              /* create the SQLite file (mode 0600, and the
				     directories above it, 0700) and the
				     schema when absent; else a missing file
				     or schema is an error */
	unsigned lease_seconds;   /* 0: LEDGER_LEASE_SECONDS_DEFAULT */
	unsigned busy_timeout_ms; /* 0: LEDGER_BUSY_TIMEOUT_MS_DEFAULT */
};

struct ledger;
struct ledger_session;

/* Opens the ledger @spec (see above; @opts may be NULL: no create,
 * defaults). On failure returns LEDGER_INVALID (a spec that names no
 * backend) or LEDGER_ERROR and writes one line to @err, which never holds
 * a password. The caller closes *out with ledger_close(). */
enum ledger_status ledger_open(const char *spec, const struct ledger_options *opts,
			       struct ledger **out, char *err, size_t errlen);

/* Closes the connection. Sessions still open are closed first (their
 * reservations charged, as ledger_session_close() does). */
void ledger_close(struct ledger *l);

/* The last error of @l, one line (never a password); "" if none. */
const char *ledger_error(const struct ledger *l);

/* "sqlite", "postgresql" or "memory". */
const char *ledger_backend(const struct ledger *l);

/* The SQLite file of @spec ("sqlite:PATH" -> PATH), NULL for the other
 * backends: the supervisor keeps it (and PATH-wal, PATH-shm) out of the
 * agent's reach like the policy file. */
const char *ledger_sqlite_path(const char *spec);

/* The default ledger of the spend command:
 * "sqlite:$XDG_STATE_HOME/airlock/spend.db" (by default under
 * ~/.local/state). Malloc'd; NULL when neither XDG_STATE_HOME nor HOME is
 * set. */
char *ledger_default_spec(void);

/* @spec with a password in a PostgreSQL URI replaced by "***", for
 * messages. Malloc'd. */
char *ledger_redact(const char *spec);

struct policy;

/* The cap @p gives its session: LEDGER_NO_CAP for cap_usd null, else
 * its nano-dollars, a cap above the ledger's largest amount (a billion
 * dollars) held at it. */
int64_t ledger_cap_of_policy(const struct policy *p);

/* What one session's row says. */
struct ledger_totals {
	int64_t cap;        /* LEDGER_NO_CAP: none of its own */
	int64_t spent;      /* its subtree's */
	int64_t reserved;   /* its subtree's */
	int64_t own_spent;  /* its own */
};

/* The cap a reservation would pass. */
struct ledger_refusal {
	char session[129];  /* whose cap: this session or an ancestor */
	int64_t cap;
	int64_t spent;
	int64_t reserved;
	int64_t amount;     /* the reservation asked for */
};

/* Opens session @id as a holder (this process) in the tree. A new session
 * is created under @parent (NULL: a root), which must exist
 * (LEDGER_NO_PARENT). A session that exists already must have the same
 * parent (LEDGER_CONFLICT); it keeps its spent money, and takes @cap when
 * no other holder is running it (a new run applies its policy; a second
 * process joining a running session keeps the cap as it was set live).
 * Reservations of holders found dead anywhere in the tree are charged
 * first. The session is closed with ledger_session_close(). */
enum ledger_status ledger_session_open(struct ledger *l, const char *id,
				       const char *parent, int64_t cap,
				       struct ledger_session **out);

/* Reserves @amount (>= 0): refused (LEDGER_REFUSED, *why filled) when for
 * this session or any ancestor spent + reserved + amount would pass its
 * cap; the nearest such session is named. On LEDGER_OK *rid names the
 * reservation for ledger_settle()/ledger_release(). */
enum ledger_status ledger_reserve(struct ledger_session *s, int64_t amount,
				  int64_t *rid, struct ledger_refusal *why);

/* ledger_reserve() for shadow mode, where a cap is reported and not
 * enforced: the reservation is made even when it passes a cap, and then
 * *over is true and *why (may be NULL) names the nearest such cap. */
enum ledger_status ledger_reserve_over(struct ledger_session *s, int64_t amount,
				       int64_t *rid, struct ledger_refusal *why,
				       bool *over);

/* The most reservations ledger_reserve_batch() makes in one transaction. */
#define LEDGER_BATCH_MAX 16

/* @n (1 to LEDGER_BATCH_MAX) reservations in one transaction, in order:
 * each is checked as ledger_reserve() would, against the totals the ones
 * before it in the batch leave (so the batch can never pass a cap that
 * the same reservations made one by one would not). For each, @st[k] is
 * LEDGER_OK (@rids[k] names it), LEDGER_REFUSED (@whys[k] names the cap)
 * or LEDGER_INVALID / LEDGER_ERROR (an amount out of range, or sums that
 * would overflow). With @over (shadow mode) a reservation past a cap is
 * made anyway: @st[k] is LEDGER_OK and @overs[k] true. Returns LEDGER_OK
 * when the transaction ran (the per-reservation statuses say the rest),
 * else the failure, for all of them (none was made). Group commit: one
 * transaction's cost for all the reservations that queued while the one
 * before ran. */
enum ledger_status ledger_reserve_batch(struct ledger_session *s, size_t n,
					const int64_t *amounts, bool over,
					enum ledger_status *st, int64_t *rids,
					struct ledger_refusal *whys, bool *overs);

/* Ends reservation @rid of this session: its amount is released and @cost
 * (>= 0, may be above the amount) is added to the spent money of the
 * session and every ancestor. @after (may be NULL) receives the session's
 * row after it. */
enum ledger_status ledger_settle(struct ledger_session *s, int64_t rid,
				 int64_t cost, struct ledger_totals *after);

/* @n (1 to LEDGER_BATCH_MAX) settlements in one transaction, in order:
 * each as ledger_settle() would, @after[k] (may be NULL) the session's row
 * after the ones up to k. @st[k] is LEDGER_OK, LEDGER_NOT_FOUND (not a
 * reservation of this session, or one settled earlier in the batch),
 * LEDGER_INVALID (a cost out of range) or LEDGER_ERROR (sums that would
 * overflow). Returns LEDGER_OK when the transaction ran, else the
 * failure, for all of them (none was settled). Group commit, as
 * ledger_reserve_batch(). */
enum ledger_status ledger_settle_batch(struct ledger_session *s, size_t n,
				       const int64_t *rids, const int64_t *costs,
				       enum ledger_status *st, struct ledger_totals *after);

/* ledger_settle() with a cost of 0: the call was never forwarded. */
enum ledger_status ledger_release(struct ledger_session *s, int64_t rid);

/* Renews this holder's lease. */
enum ledger_status ledger_heartbeat(struct ledger_session *s);

/* The session's row now. */
enum ledger_status ledger_session_totals(struct ledger_session *s,
					 struct ledger_totals *out);

/* The session's id as opened. */
const char *ledger_session_id(const struct ledger_session *s);

/* Ends this holder: reservations it still holds are charged in full (a
 * call in flight when the session ends is a cut call), then @final (may
 * be NULL) receives the session's row. Frees @s whatever the result. */
enum ledger_status ledger_session_close(struct ledger_session *s,
					struct ledger_totals *final);

/* Creates session @id under @parent with @cap and no holder (a budget
 * that sessions run under: `airlock spend set --create`). An existing
 * session is LEDGER_CONFLICT. */
enum ledger_status ledger_create(struct ledger *l, const char *id,
				 const char *parent, int64_t cap);

/* Sets the cap of @id; running sessions honour it from their next
 * reservation. LEDGER_NOT_FOUND when there is no such session. */
enum ledger_status ledger_set_cap(struct ledger *l, const char *id, int64_t cap);

/* One row of ledger_show(), in tree order (a parent before its children,
 * siblings by id). */
struct ledger_row {
	char *id;
	char *parent;          /* NULL for a root */
	unsigned depth;        /* in the tree shown: its first row is 0 */
	struct ledger_totals t;
	unsigned holders;      /* processes running it (lease not expired) */
	unsigned reservations; /* calls in flight */
};

/* The tree under @id (NULL: every tree). The caller frees *rows with
 * ledger_rows_free(). LEDGER_NOT_FOUND when @id is not in the ledger. */
enum ledger_status ledger_show(struct ledger *l, const char *id,
			       struct ledger_row **rows, size_t *n);
void ledger_rows_free(struct ledger_row *rows, size_t n);

#endif /* AIRLOCK_LEDGER_H */
