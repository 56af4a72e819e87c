/* SPDX-License-Identifier: Apache-2.0
 * ledger.c - the spend ledger over SQLite and PostgreSQL (ledger.h,
 * docs/SPEND.md).
 *
 * DOC: Theory of Operation
 *
 * Sessions form a tree; each row holds its cap and the spent and reserved
 * money of its whole subtree, so that the check of a reservation reads
 * one row per ancestor and never sums a subtree:
 *
 *	for the session and every ancestor A with a cap:
 *		A.spent + A.reserved + amount <= A.cap, else refused
 *	then add amount to reserved on every one of those rows.
 *
 * Settling a reservation moves its amount out of reserved and adds the
 * real cost to spent on the same rows. Both are single transactions, so
 * a tree never spends more than any of its caps however many sessions
 * reserve at once, except by what the meter could not bound in advance
 * (a cost above its reservation, docs/SPEND.md).
 *
 * Serialisation. SQLite: every writing transaction is BEGIN IMMEDIATE,
 * which takes the database's one write lock (WAL mode: readers never
 * wait), with a busy timeout. PostgreSQL: every transaction that touches
 * a tree first locks that tree's root row (SELECT ... FOR UPDATE) and only
 * then reads and writes the tree's rows, so transactions on one tree run
 * one after another and two trees never wait on each other: no deadlock,
 * no lost update, at READ COMMITTED. A cap change takes the same lock.
 *
 * Holders and crashes. A reservation belongs to a holder: one process
 * running one session (the standalone proxy may run one session in
 * several processes). A holder row records the machine's boot id, the PID
 * namespace, the PID and the process's start time, and a lease that
 * every operation and ledger_heartbeat() renew. When a session opens, the
 * holders of its tree are checked: one whose process is gone (same
 * machine and PID namespace, and no process with that PID and start
 * time) or whose lease ran out is dead, and its reservations are charged
 * in full, as a call cut short is (the provider may have billed it, and
 * the cap must hold). A lease that ran out on a holder that is only slow
 * leaves its reservations marked "orphaned"; if it settles them later,
 * the charge is corrected to the real cost. Nothing is ever released
 * unpaid, so a crash can neither hide spend nor leave it in "reserved"
 * for ever.
 *
 * The in-memory ledger is SQLite's ":memory:" database with the same
 * schema and code: one implementation of the rules, three places to keep
 * them.
 */
#include "ledger.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "dynlib.h"
#include "meter.h"
#include "policy.h"
#include "util.h"

/* libpq is loaded on first use (dynlib.h): a session without a
 * PostgreSQL ledger does not map it and the libraries it needs. */
#define PQ_FUNCS(X) \
	X(PQclear) \
	X(PQconnectdbParams) \
	X(PQenterPipelineMode) \
	X(PQerrorMessage) \
	X(PQexec) \
	X(PQexecPrepared) \
	X(PQexitPipelineMode) \
	X(PQfinish) \
	X(PQgetResult) \
	X(PQgetisnull) \
	X(PQgetvalue) \
	X(PQnfields) \
	X(PQntuples) \
	X(PQpipelineSync) \
	X(PQprepare) \
	X(PQreset) \
	X(PQresultErrorMessage) \
	X(PQresultStatus) \
	X(PQsendPrepare) \
	X(PQsendQueryParams) \
	X(PQsendQueryPrepared) \
	X(PQstatus)

DYNLIB_DEFINE(pq_lib, pq, "libpq.so.5", PQ_FUNCS);

static const char *const status_names[] = {
	[LEDGER_OK] = "ok",
	[LEDGER_REFUSED] = "refused: a cap would be exceeded",
	[LEDGER_NO_PARENT] = "the parent session is not in the ledger",
	[LEDGER_NOT_FOUND] = "not found",
	[LEDGER_CONFLICT] = "the session exists under another parent",
	[LEDGER_INVALID] = "invalid argument",
	[LEDGER_ERROR] = "ledger error",
};
static_assert(ARRAY_SIZE(status_names) == LEDGER_STATUS_COUNT,
	      "status_names out of sync with enum ledger_status");

const char *ledger_status_to_string(enum ledger_status s)
{
	if ((unsigned int)s >= LEDGER_STATUS_COUNT)
		return "unknown status";
	return status_names[s];
}

/* ------------------------------------------------------------------ */
/* Statements                                                         */
/* ------------------------------------------------------------------ */

/* SQL is written once with $N parameters and two tokens that differ by
 * dialect: @NOW@ (the database's clock, in whole seconds since the epoch)
 * and @LOCK@ (" FOR UPDATE" on PostgreSQL; SQLite's BEGIN IMMEDIATE has
 * locked everything already). */
enum stmt {
	S_GET_SESSION,
	S_LOCK,
	S_INSERT_SESSION,
	S_SET_CAP,
	S_ADD,
	S_ADD_OWN,
	S_INSERT_HOLDER,
	S_RENEW,
	S_DELETE_HOLDER,
	S_TREE_HOLDERS,
	S_LIVE_HOLDERS,
	S_INSERT_RESERVATION,
	S_GET_RESERVATION,
	S_HOLDER_RESERVATIONS,
	S_ORPHAN,
	S_DELETE_RESERVATION,
	S_SHOW,
	S_SCHEMA_VERSION,
	S_COUNT
};

#define SESSION_COLS "id, parent, root, path, depth, cap, spent, reserved, own_spent"
enum { C_ID, C_PARENT, C_ROOT, C_PATH, C_DEPTH, C_CAP, C_SPENT, C_RESERVED,
       C_OWN };

static const char *const stmt_sql[] = {
	[S_GET_SESSION] = "SELECT " SESSION_COLS " FROM airlock_sessions "
			  "WHERE id = $1",
	[S_LOCK] = "SELECT id FROM airlock_sessions WHERE id = $1@LOCK@",
	[S_INSERT_SESSION] =
		"INSERT INTO airlock_sessions (id, parent, root, path, depth, "
		"cap, spent, reserved, own_spent, created, updated) VALUES ($1, "
		"$2, $3, $4, $5, $6, 0, 0, 0, @NOW@, @NOW@) "
		"ON CONFLICT (id) DO NOTHING",
	[S_SET_CAP] = "UPDATE airlock_sessions SET cap = $2, updated = @NOW@ "
		      "WHERE id = $1",
	[S_ADD] = "UPDATE airlock_sessions SET spent = spent + $2, reserved = "
		  "reserved + $3, updated = @NOW@ WHERE id = $1",
	[S_ADD_OWN] = "UPDATE airlock_sessions SET own_spent = own_spent + $2 "
		      "WHERE id = $1",
	[S_INSERT_HOLDER] =
		"INSERT INTO airlock_holders (id, session, host, boot_id, pidns, "
		"pid, start_time, lease_until, created) VALUES ($1, $2, $3, $4, "
		"$5, $6, $7, @NOW@ + $8, @NOW@)",
	[S_RENEW] = "UPDATE airlock_holders SET lease_until = @NOW@ + $2 "
		    "WHERE id = $1",
	[S_DELETE_HOLDER] = "DELETE FROM airlock_holders WHERE id = $1",
	[S_TREE_HOLDERS] =
		"SELECT h.id, h.boot_id, h.pidns, h.pid, h.start_time, "
		"h.lease_until, @NOW@ FROM airlock_holders h JOIN "
		"airlock_sessions s ON s.id = h.session WHERE s.root = $1 "
		"ORDER BY h.id",
	[S_LIVE_HOLDERS] = "SELECT count(*) FROM airlock_holders WHERE "
			   "session = $1 AND lease_until >= @NOW@",
	[S_INSERT_RESERVATION] =
		"INSERT INTO airlock_reservations (session, holder, amount, "
		"orphaned, created) VALUES ($1, $2, $3, 0, @NOW@) RETURNING id",
	[S_GET_RESERVATION] = "SELECT session, holder, amount, orphaned FROM "
			      "airlock_reservations WHERE id = $1",
	[S_HOLDER_RESERVATIONS] = "SELECT id, session, amount, orphaned FROM "
				  "airlock_reservations WHERE holder = $1 "
				  "ORDER BY id",
	[S_ORPHAN] = "UPDATE airlock_reservations SET orphaned = 1 WHERE id = $1",
	[S_DELETE_RESERVATION] = "DELETE FROM airlock_reservations WHERE id = $1",
	[S_SHOW] =
		"SELECT s.id, s.parent, s.cap, s.spent, s.reserved, s.own_spent, "
		"(SELECT count(*) FROM airlock_holders h WHERE h.session = s.id "
		"AND h.lease_until >= @NOW@), (SELECT count(*) FROM "
		"airlock_reservations r WHERE r.session = s.id) FROM "
		"airlock_sessions s WHERE CAST($1 AS TEXT) IS NULL OR s.root = "
		"CAST($1 AS TEXT) ORDER BY s.id",
	[S_SCHEMA_VERSION] = "SELECT value FROM airlock_meta WHERE key = "
			     "'schema_version'",
};
static_assert(ARRAY_SIZE(stmt_sql) == S_COUNT, "stmt_sql out of sync with enum stmt");

/* The schema, version 1, per dialect: the same tables, columns and
 * constraints (docs/SPEND.md). */
static const char sqlite_schema[] =
	"CREATE TABLE IF NOT EXISTS airlock_meta (key TEXT PRIMARY KEY, value "
	"TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS airlock_sessions (id TEXT PRIMARY KEY, "
	"parent TEXT REFERENCES airlock_sessions (id), root TEXT NOT NULL, "
	"path TEXT NOT NULL, depth INTEGER NOT NULL, cap INTEGER CHECK (cap "
	">= 0), spent INTEGER NOT NULL, reserved INTEGER NOT NULL CHECK "
	"(reserved >= 0), own_spent INTEGER NOT NULL, created INTEGER NOT "
	"NULL, updated INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_sessions_root ON airlock_sessions "
	"(root);"
	"CREATE TABLE IF NOT EXISTS airlock_holders (id TEXT PRIMARY KEY, "
	"session TEXT NOT NULL REFERENCES airlock_sessions (id), host TEXT NOT "
	"NULL, boot_id TEXT NOT NULL, pidns TEXT NOT NULL, pid INTEGER NOT "
	"NULL, start_time INTEGER NOT NULL, lease_until INTEGER NOT NULL, "
	"created INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_holders_session ON airlock_holders "
	"(session);"
	"CREATE TABLE IF NOT EXISTS airlock_reservations (id INTEGER PRIMARY "
	"KEY AUTOINCREMENT, session TEXT NOT NULL REFERENCES airlock_sessions "
	"(id), holder TEXT NOT NULL, amount INTEGER NOT NULL CHECK (amount >= "
	"0), orphaned INTEGER NOT NULL, created INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_reservations_holder ON "
	"airlock_reservations (holder);"
	"CREATE INDEX IF NOT EXISTS airlock_reservations_session ON "
	"airlock_reservations (session);"
	"INSERT INTO airlock_meta (key, value) VALUES ('schema_version', '1') "
	"ON CONFLICT (key) DO NOTHING;";

static const char pg_schema[] =
	"CREATE TABLE IF NOT EXISTS airlock_meta (key TEXT PRIMARY KEY, value "
	"TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS airlock_sessions (id TEXT PRIMARY KEY, "
	"parent TEXT REFERENCES airlock_sessions (id), root TEXT NOT NULL, "
	"path TEXT NOT NULL, depth INTEGER NOT NULL, cap BIGINT CHECK (cap >= "
	"0), spent BIGINT NOT NULL, reserved BIGINT NOT NULL CHECK (reserved "
	">= 0), own_spent BIGINT NOT NULL, created BIGINT NOT NULL, updated "
	"BIGINT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_sessions_root ON airlock_sessions "
	"(root);"
	"CREATE TABLE IF NOT EXISTS airlock_holders (id TEXT PRIMARY KEY, "
	"session TEXT NOT NULL REFERENCES airlock_sessions (id), host TEXT NOT "
	"NULL, boot_id TEXT NOT NULL, pidns TEXT NOT NULL, pid BIGINT NOT "
	"NULL, start_time BIGINT NOT NULL, lease_until BIGINT NOT NULL, "
	"created BIGINT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_holders_session ON airlock_holders "
	"(session);"
	"CREATE TABLE IF NOT EXISTS airlock_reservations (id BIGINT GENERATED "
	"ALWAYS AS IDENTITY PRIMARY KEY, session TEXT NOT NULL REFERENCES "
	"airlock_sessions (id), holder TEXT NOT NULL, amount BIGINT NOT NULL "
	"CHECK (amount >= 0), orphaned INTEGER NOT NULL, created BIGINT NOT "
	"NULL);"
	"CREATE INDEX IF NOT EXISTS airlock_reservations_holder ON "
	"airlock_reservations (holder);"
	"CREATE INDEX IF NOT EXISTS airlock_reservations_session ON "
	"airlock_reservations (session);"
	"INSERT INTO airlock_meta (key, value) VALUES ('schema_version', '1') "
	"ON CONFLICT (key) DO NOTHING;";

/* Migrations: migrations[v - 1] takes a version-v schema to v + 1, per
 * dialect, run in the transaction that checks the version. Version 1 is
 * the first; none yet. */
struct migration {
	const char *sqlite;
	const char *pg;
};
static const struct migration migrations[] = {
	{ NULL, NULL }, /* placeholder: 1 -> 2 when there is a version 2 */
};
static_assert(ARRAY_SIZE(migrations) >= LEDGER_SCHEMA_VERSION,
	      "a migration per schema version");

/* ------------------------------------------------------------------ */
/* Values and results                                                 */
/* ------------------------------------------------------------------ */

enum vtype { V_NULL, V_INT, V_TEXT };

struct val {
	enum vtype t;
	int64_t i;
	const char *s;
};

static struct val vint(int64_t i)
{
	return (struct val){ V_INT, i, NULL };
}

static struct val vtext(const char *s)
{
	return (struct val){ s ? V_TEXT : V_NULL, 0, s };
}

static struct val vcap(int64_t cap)
{
	return cap == LEDGER_NO_CAP ? (struct val){ V_NULL, 0, NULL } : vint(cap);
}

/* A result: every cell as text (NULL for SQL NULL), row-major. */
struct rows {
	size_t n, cols;
	char **cell;
};

static void rows_free(struct rows *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->n * r->cols; i++)
		free(r->cell[i]);
	free(r->cell);
	memset(r, 0, sizeof(*r));
}

static const char *cell(const struct rows *r, size_t row, size_t col)
{
	ASSERT(row < r->n && col < r->cols);
	return r->cell[row * r->cols + col];
}

static bool cell_null(const struct rows *r, size_t row, size_t col)
{
	return cell(r, row, col) == NULL;
}

/* An integer cell; false for NULL or anything that is not one. */
static bool cell_int(const struct rows *r, size_t row, size_t col, int64_t *out)
{
	const char *s = cell(r, row, col);
	char *end;
	long long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* ------------------------------------------------------------------ */
/* The handle                                                         */
/* ------------------------------------------------------------------ */

enum backend { B_SQLITE, B_MEMORY, B_PG };

struct ledger_session {
	struct ledger *l;
	struct ledger_session *next;
	char id[129];
	char holder[33];
	char **chain;      /* root first; chain[nchain - 1] is id */
	size_t nchain;
};

struct ledger {
	enum backend kind;
	char err[320];
	unsigned lease;
	unsigned busy_ms;
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	PGconn *pg;
	bool prepared[S_COUNT];
	struct ledger_session *sessions;
	char boot_id[64];
	char pidns[64];
	char host[256];
	int64_t start_time;
};

__attribute__((format(printf, 2, 3))) static void set_err(struct ledger *l,
							  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->err, sizeof(l->err), fmt, ap);
	va_end(ap);
}

const char *ledger_error(const struct ledger *l)
{
	return l->err;
}

const char *ledger_backend(const struct ledger *l)
{
	return l->kind == B_PG ? "postgresql" : l->kind == B_SQLITE ? "sqlite"
								    : "memory";
}

/* The SQL of @s for @kind, malloc'd. */
static char *dialect_sql(enum backend kind, enum stmt s)
{
	const char *now = kind == B_PG
		? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT)"
		: "CAST(strftime('%s','now') AS INTEGER)";
	const char *lock = kind == B_PG ? " FOR UPDATE" : "";
	const char *p = stmt_sql[s];
	size_t cap = strlen(p) * 2 + 256, n = 0;
	char *out = util_xmalloc(cap);

	while (*p) {
		const char *rep = NULL;
		size_t skip = 0;

		if (strncmp(p, "@NOW@", 5) == 0) {
			rep = now;
			skip = 5;
		} else if (strncmp(p, "@LOCK@", 6) == 0) {
			rep = lock;
			skip = 6;
		}
		if (rep) {
			size_t rl = strlen(rep);

			if (n + rl + 1 > cap) {
				cap = (n + rl + 1) * 2;
				out = util_xrealloc(out, cap);
			}
			memcpy(out + n, rep, rl);
			n += rl;
			p += skip;
			continue;
		}
		if (n + 2 > cap) {
			cap *= 2;
			out = util_xrealloc(out, cap);
		}
		/* SQLite numbers parameters ?N; PostgreSQL $N. */
		out[n++] = (char)((*p == '$' && kind != B_PG) ? '?' : *p);
		p++;
	}
	out[n] = '\0';
	return out;
}

/* ------------------------------------------------------------------ */
/* SQLite                                                             */
/* ------------------------------------------------------------------ */

static bool sq_fail(struct ledger *l, const char *what)
{
	set_err(l, "sqlite: %s: %s", what, sqlite3_errmsg(l->db));
	return false;
}

static bool sq_exec(struct ledger *l, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(l->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		set_err(l, "sqlite: %s", msg ? msg : sqlite3_errmsg(l->db));
		sqlite3_free(msg);
		return false;
	}
	return true;
}

static bool sq_run(struct ledger *l, enum stmt s, const struct val *p, size_t np,
		   struct rows *out)
{
	sqlite3_stmt *st = l->st[s];
	size_t i, cols, cap = 0;
	bool ok = false;
	int rc;

	if (!st) {
		char *sql = dialect_sql(l->kind, s);

		rc = sqlite3_prepare_v3(l->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
					&st, NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return sq_fail(l, "prepare");
		l->st[s] = st;
	}
	for (i = 0; i < np; i++) {
		int bi = (int)i + 1;

		rc = p[i].t == V_INT ? sqlite3_bind_int64(st, bi, p[i].i)
		   : p[i].t == V_TEXT ? sqlite3_bind_text(st, bi, p[i].s, -1,
							  SQLITE_TRANSIENT)
		   : sqlite3_bind_null(st, bi);
		if (rc != SQLITE_OK) {
			sq_fail(l, "bind");
			goto out;
		}
	}
	cols = (size_t)sqlite3_column_count(st);
	if (out) {
		memset(out, 0, sizeof(*out));
		out->cols = cols;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!out || cols == 0)
			continue;
		if (out->n == cap) {
			cap = cap ? cap * 2 : 8;
			out->cell = util_xrealloc(out->cell, cap * cols * sizeof(char *));
		}
		for (i = 0; i < cols; i++) {
			const unsigned char *t = sqlite3_column_text(st, (int)i);

			out->cell[out->n * cols + i] =
				t ? util_xstrdup((const char *)t) : NULL;
		}
		out->n++;
	}
	if (rc != SQLITE_DONE) {
		sq_fail(l, rc == SQLITE_BUSY ? "the ledger is busy" : "step");
		if (out)
			rows_free(out);
		goto out;
	}
	ok = true;
out:
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ok;
}

/* ------------------------------------------------------------------ */
/* PostgreSQL                                                         */
/* ------------------------------------------------------------------ */

/* The first line of libpq's message, without "ERROR:  ". */
static void pg_err(struct ledger *l, const char *what, const char *msg)
{
	const char *m = msg ? msg : "";
	size_t n;

	if (strncmp(m, "ERROR:  ", 8) == 0)
		m += 8;
	n = strcspn(m, "\n");
	set_err(l, "postgresql: %s: %.*s", what, (int)(n > 200 ? 200 : n), m);
}

static bool pg_ensure(struct ledger *l)
{
	if (pq.PQstatus(l->pg) == CONNECTION_OK)
		return true;
	pq.PQreset(l->pg);
	memset(l->prepared, 0, sizeof(l->prepared));
	if (pq.PQstatus(l->pg) != CONNECTION_OK) {
		pg_err(l, "reconnect", pq.PQerrorMessage(l->pg));
		return false;
	}
	return true;
}

static bool pg_exec(struct ledger *l, const char *sql)
{
	PGresult *res = pq.PQexec(l->pg, sql);
	bool ok = pq.PQresultStatus(res) == PGRES_COMMAND_OK ||
		  pq.PQresultStatus(res) == PGRES_TUPLES_OK;

	if (!ok)
		pg_err(l, "exec", pq.PQresultErrorMessage(res));
	pq.PQclear(res);
	return ok;
}

/* Copies a result's rows into @out (every cell as text). */
static void copy_result(const PGresult *res, struct rows *out)
{
	size_t cols = (size_t)pq.PQnfields(res), n = (size_t)pq.PQntuples(res), r, i;

	memset(out, 0, sizeof(*out));
	out->cols = cols;
	out->n = n;
	out->cell = util_xcalloc(n * cols > 0 ? n * cols : 1, sizeof(char *));
	for (r = 0; r < n; r++)
		for (i = 0; i < cols; i++)
			if (!pq.PQgetisnull(res, (int)r, (int)i))
				out->cell[r * cols + i] =
					util_xstrdup(pq.PQgetvalue(res, (int)r, (int)i));
}

static bool pg_run(struct ledger *l, enum stmt s, const struct val *p, size_t np,
		   struct rows *out)
{
	char name[16], nums[8][24];
	const char *values[8];
	PGresult *res = NULL;
	ExecStatusType es;
	bool ok = false;
	size_t i;

	ASSERT(np <= ARRAY_SIZE(values));
	snprintf(name, sizeof(name), "airlock_%d", (int)s);
	if (!l->prepared[s]) {
		char *sql = dialect_sql(l->kind, s);

		res = pq.PQprepare(l->pg, name, sql, 0, NULL);
		free(sql);
		if (pq.PQresultStatus(res) != PGRES_COMMAND_OK) {
			pg_err(l, "prepare", pq.PQresultErrorMessage(res));
			goto out;
		}
		pq.PQclear(res);
		res = NULL;
		l->prepared[s] = true;
	}
	for (i = 0; i < np; i++) {
		if (p[i].t == V_INT) {
			snprintf(nums[i], sizeof(nums[i]), "%lld", (long long)p[i].i);
			values[i] = nums[i];
		} else {
			values[i] = p[i].t == V_TEXT ? p[i].s : NULL;
		}
	}
	res = pq.PQexecPrepared(l->pg, name, (int)np, values, NULL, NULL, 0);
	es = pq.PQresultStatus(res);
	if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
		pg_err(l, "query", pq.PQresultErrorMessage(res));
		goto out;
	}
	if (out)
		copy_result(res, out);
	ok = true;
out:
	pq.PQclear(res);
	return ok;
}

/* ------------------------------------------------------------------ */
/* Transactions, for both                                             */
/* ------------------------------------------------------------------ */

static bool run(struct ledger *l, enum stmt s, const struct val *p, size_t np,
		struct rows *out)
{
	return l->kind == B_PG ? pg_run(l, s, p, np, out) : sq_run(l, s, p, np, out);
}

/* One statement of a batch (run_steps). S_COUNT + STEP_BEGIN/COMMIT are
 * the transaction's ends. */
#define STEP_BEGIN ((enum stmt)(S_COUNT + 1))
#define STEP_COMMIT ((enum stmt)(S_COUNT + 2))
#define MAX_STEPS (2 * LEDGER_MAX_DEPTH + 16)

struct step {
	enum stmt s;
	struct val p[8];
	size_t np;
	struct rows *out;  /* NULL: the rows are not wanted */
};

static void step_add(struct step *v, size_t *n, enum stmt s, struct rows *out,
		     size_t np, const struct val *p)
{
	ASSERT(*n < MAX_STEPS && np <= ARRAY_SIZE(v[0].p));
	v[*n].s = s;
	v[*n].np = np;
	v[*n].out = out;
	if (np)
		memcpy(v[*n].p, p, np * sizeof(*p));
	(*n)++;
}

/* Sends @n steps in one pipeline and reads every answer: one round trip
 * to the server whatever n is. False at the first failing step (the
 * later ones are skipped by the server). */
static bool pg_steps(struct ledger *l, struct step *v, size_t n)
{
	bool sent_prepare[MAX_STEPS] = { false }, ok = true, broken = false;
	bool preparing[S_COUNT] = { false }; /* sent in this pipeline */
	char nums[MAX_STEPS][8][24];
	size_t i, k;

	if (pq.PQenterPipelineMode(l->pg) != 1) {
		pg_err(l, "pipeline", pq.PQerrorMessage(l->pg));
		return false;
	}
	for (i = 0; i < n && !broken; i++) {
		const char *values[8];
		char name[16];

		if (v[i].s == STEP_BEGIN || v[i].s == STEP_COMMIT) {
			broken = !pq.PQsendQueryParams(l->pg, v[i].s == STEP_BEGIN ? "BEGIN"
						    : "COMMIT", 0, NULL, NULL, NULL,
						    NULL, 0);
			continue;
		}
		snprintf(name, sizeof(name), "airlock_%d", (int)v[i].s);
		if (!l->prepared[v[i].s] && !preparing[v[i].s]) {
			char *sql = dialect_sql(l->kind, v[i].s);

			broken = !pq.PQsendPrepare(l->pg, name, sql, 0, NULL);
			free(sql);
			sent_prepare[i] = preparing[v[i].s] = true;
		}
		for (k = 0; k < v[i].np; k++) {
			if (v[i].p[k].t == V_INT) {
				snprintf(nums[i][k], sizeof(nums[i][k]), "%lld",
					 (long long)v[i].p[k].i);
				values[k] = nums[i][k];
			} else {
				values[k] = v[i].p[k].t == V_TEXT ? v[i].p[k].s : NULL;
			}
		}
		broken = broken || !pq.PQsendQueryPrepared(l->pg, name, (int)v[i].np,
							values, NULL, NULL, 0);
	}
	if (broken || !pq.PQpipelineSync(l->pg)) {
		pg_err(l, "send", pq.PQerrorMessage(l->pg));
		/* The connection is in an unknown state: start afresh. */
		pq.PQreset(l->pg);
		memset(l->prepared, 0, sizeof(l->prepared));
		return false;
	}
	for (i = 0; i < n; i++) {
		int round;

		for (round = sent_prepare[i] ? 0 : 1; round < 2; round++) {
			PGresult *res = pq.PQgetResult(l->pg);
			ExecStatusType es = pq.PQresultStatus(res);

			if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
				if (round == 0)
					l->prepared[v[i].s] = true;
				else if (v[i].out)
					copy_result(res, v[i].out);
			} else if (ok) {
				pg_err(l, "query", pq.PQresultErrorMessage(res));
				ok = false;
			}
			pq.PQclear(res);
			res = pq.PQgetResult(l->pg); /* the NULL that ends it */
			pq.PQclear(res);
		}
	}
	pq.PQclear(pq.PQgetResult(l->pg)); /* PGRES_PIPELINE_SYNC */
	if (pq.PQexitPipelineMode(l->pg) != 1) {
		pg_err(l, "pipeline", pq.PQerrorMessage(l->pg));
		pq.PQreset(l->pg);
		memset(l->prepared, 0, sizeof(l->prepared));
		return false;
	}
	return ok;
}

static bool tx_begin(struct ledger *l, bool write);
static bool tx_commit(struct ledger *l);

/* Runs the steps in order: SQLite one by one (in-process, nothing to
 * save), PostgreSQL in one pipeline. */
static bool run_steps(struct ledger *l, struct step *v, size_t n)
{
	size_t i;

	if (l->kind == B_PG)
		return pg_ensure(l) && pg_steps(l, v, n);
	for (i = 0; i < n; i++) {
		bool ok = v[i].s == STEP_BEGIN ? tx_begin(l, true)
			: v[i].s == STEP_COMMIT ? tx_commit(l)
			: run(l, v[i].s, v[i].p, v[i].np, v[i].out);

		if (!ok)
			return false;
	}
	return true;
}

/* Begins a transaction: @write takes SQLite's write lock at once. */
static bool tx_begin(struct ledger *l, bool write)
{
	if (l->kind == B_PG)
		return pg_ensure(l) && pg_exec(l, "BEGIN");
	return sq_exec(l, write ? "BEGIN IMMEDIATE" : "BEGIN");
}

static bool tx_commit(struct ledger *l)
{
	if (l->kind == B_PG)
		return pg_exec(l, "COMMIT");
	return sq_exec(l, "COMMIT");
}

static void tx_rollback(struct ledger *l)
{
	char keep[sizeof(l->err)];

	/* Keep the error that made us roll back. */
	memcpy(keep, l->err, sizeof(keep));
	if (l->kind == B_PG)
		(void)pg_exec(l, "ROLLBACK");
	else if (!sqlite3_get_autocommit(l->db))
		(void)sq_exec(l, "ROLLBACK");
	memcpy(l->err, keep, sizeof(keep));
}

/* Ends the transaction: commits on LEDGER_OK, rolls back otherwise.
 * Returns the final status (LEDGER_ERROR if the commit failed). */
static enum ledger_status tx_end(struct ledger *l, enum ledger_status st)
{
	if (st == LEDGER_OK) {
		if (tx_commit(l))
			return LEDGER_OK;
		st = LEDGER_ERROR;
	}
	tx_rollback(l);
	return st;
}

/* ------------------------------------------------------------------ */
/* Opening                                                            */
/* ------------------------------------------------------------------ */

static bool schema_version_ok(struct ledger *l, const struct rows *r)
{
	int64_t v = 0;

	if (r->n != 1 || !cell_int(r, 0, 0, &v) || v < 1) {
		set_err(l, "the ledger's schema version is unreadable");
		return false;
	}
	if (v > LEDGER_SCHEMA_VERSION) {
		set_err(l, "the ledger's schema is version %lld, newer than this "
			"airlock's (%d): upgrade airlock", (long long)v,
			LEDGER_SCHEMA_VERSION);
		return false;
	}
	for (; v < LEDGER_SCHEMA_VERSION; v++) {
		const char *sql = l->kind == B_PG ? migrations[v - 1].pg
						  : migrations[v - 1].sqlite;
		char bump[96];

		ASSERT(sql != NULL);
		snprintf(bump, sizeof(bump), "UPDATE airlock_meta SET value = '%lld' "
			 "WHERE key = 'schema_version'", (long long)v + 1);
		if (!(l->kind == B_PG ? pg_exec(l, sql) && pg_exec(l, bump)
				      : sq_exec(l, sql) && sq_exec(l, bump)))
			return false;
	}
	return true;
}

/* Checks (and with @create, makes or migrates) the schema, in one
 * transaction. */
static bool setup_schema(struct ledger *l, bool create)
{
	struct rows r = { 0 };
	bool ok = false, have;

	if (!tx_begin(l, true))
		return false;
	if (l->kind == B_PG) {
		/* Concurrent first opens must not race on CREATE TABLE. */
		if (!pg_exec(l, "SELECT pg_advisory_xact_lock(7244658112934707265)"))
			goto out;
		{
			PGresult *res = pq.PQexec(l->pg, "SELECT to_regclass('airlock_meta') "
						      "IS NOT NULL");

			have = pq.PQresultStatus(res) == PGRES_TUPLES_OK &&
			       pq.PQntuples(res) == 1 &&
			       strcmp(pq.PQgetvalue(res, 0, 0), "t") == 0;
			pq.PQclear(res);
		}
	} else {
		sqlite3_stmt *st = NULL;

		if (sqlite3_prepare_v2(l->db, "SELECT 1 FROM sqlite_master WHERE "
				       "type = 'table' AND name = 'airlock_meta'",
				       -1, &st, NULL) != SQLITE_OK) {
			sq_fail(l, "schema");
			goto out;
		}
		have = sqlite3_step(st) == SQLITE_ROW;
		sqlite3_finalize(st);
	}
	if (!have) {
		if (!create) {
			set_err(l, "this database holds no airlock ledger (a session "
				"creates it on first use)");
			goto out;
		}
		if (!(l->kind == B_PG ? pg_exec(l, pg_schema)
				      : sq_exec(l, sqlite_schema)))
			goto out;
	}
	if (!run(l, S_SCHEMA_VERSION, NULL, 0, &r) || !schema_version_ok(l, &r))
		goto out;
	ok = true;
out:
	rows_free(&r);
	if (tx_end(l, ok ? LEDGER_OK : LEDGER_ERROR) != LEDGER_OK)
		return false;
	return true;
}

/* This process, as a holder row describes it. */
static void identify(struct ledger *l)
{
	char buf[1024], *p;
	size_t len = 0;
	ssize_t n;
	int fd, field;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, l->boot_id, sizeof(l->boot_id) - 1);
		l->boot_id[n > 0 ? n : 0] = '\0';
		l->boot_id[strcspn(l->boot_id, "\n")] = '\0';
		close(fd);
	}
	n = readlink("/proc/self/ns/pid", l->pidns, sizeof(l->pidns) - 1);
	l->pidns[n > 0 ? n : 0] = '\0';
	if (gethostname(l->host, sizeof(l->host)) != 0)
		l->host[0] = '\0';
	l->host[sizeof(l->host) - 1] = '\0';

	/* Field 22 of /proc/self/stat, counted after the ')' that ends the
	 * command name (which may hold spaces and parentheses). */
	l->start_time = 0;
	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while (len < sizeof(buf) - 1 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		l->start_time = strtoll(p + 1, NULL, 10);
}

/* Is the process @pid that started at @start_time gone? Only for holders
 * of this machine and PID namespace; false when it cannot tell. */
static bool process_gone(const struct ledger *l, const char *boot_id,
			 const char *pidns, int64_t pid, int64_t start_time)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	size_t len = 0;
	int fd, field;

	if (!l->boot_id[0] || !l->pidns[0] || strcmp(boot_id, l->boot_id) != 0 ||
	    strcmp(pidns, l->pidns) != 0 || pid <= 0 || pid > INT32_MAX)
		return false;
	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	while (len < sizeof(buf) - 1 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	for (field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return false;
	/* Another process now has this PID: ours is gone. */
	return strtoll(p + 1, NULL, 10) != start_time;
}

/* Makes the directories above @path (mode 0700), as the events
 * directory is made. */
static bool make_parents(struct ledger *l, const char *path)
{
	char *dir = util_xstrdup(path), *p;
	bool ok = true;

	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			set_err(l, "sqlite: cannot make %s: %s", dir, strerror(errno));
			ok = false;
			break;
		}
		*p = '/';
	}
	free(dir);
	return ok;
}

static enum ledger_status open_sqlite(struct ledger *l, const char *path,
				      bool create)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;

	if (l->kind == B_SQLITE) {
		flags |= SQLITE_OPEN_NOFOLLOW;
		if (create) {
			/* Made here so that it is 0600 whatever the umask;
			 * SQLite gives its -wal and -shm files the same mode. */
			if (!make_parents(l, path))
				return LEDGER_ERROR;
			int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				      0600);

			if (fd < 0) {
				set_err(l, "sqlite: %s: %s", path, strerror(errno));
				return LEDGER_ERROR;
			}
			close(fd);
		} else if (access(path, F_OK) != 0) {
			set_err(l, "sqlite: %s: %s", path, strerror(errno));
			return LEDGER_ERROR;
		}
	}
	if (sqlite3_open_v2(path, &l->db, flags, NULL) != SQLITE_OK) {
		set_err(l, "sqlite: %s: %s", path,
			l->db ? sqlite3_errmsg(l->db) : "out of memory");
		return LEDGER_ERROR;
	}
	sqlite3_extended_result_codes(l->db, 1);
	sqlite3_busy_timeout(l->db, (int)l->busy_ms);
	/* WAL: readers never wait for the writer. synchronous NORMAL: a
	 * commit survives any crash of a process, and a power cut may lose
	 * the last few (the receipts are synced at close too); FULL would
	 * fsync every reservation, 4 ms each on the test machine's disk,
	 * inside the proxy's event loop (docs/SPEND.md). */
	if (!sq_exec(l, "PRAGMA foreign_keys = ON") ||
	    (l->kind == B_SQLITE && !sq_exec(l, "PRAGMA journal_mode = WAL")) ||
	    !sq_exec(l, "PRAGMA synchronous = NORMAL"))
		return LEDGER_ERROR;
	return setup_schema(l, create || l->kind == B_MEMORY) ? LEDGER_OK
							      : LEDGER_ERROR;
}

static enum ledger_status open_pg(struct ledger *l, const char *uri, bool create)
{
	char timeout[32], options[96];
	const char *keys[] = { "application_name", "connect_timeout", "options",
			       "dbname", NULL };
	const char *vals[] = { "airlock", timeout, options, uri, NULL };

	snprintf(timeout, sizeof(timeout), "%u", (l->busy_ms + 999) / 1000);
	/* A lock that cannot be had in time fails the call (and the
	 * caller refuses the request) instead of stalling it. Commits do
	 * not wait for the WAL flush, as SQLite's synchronous=NORMAL: a
	 * crash of the server may lose the last few, never corrupt the
	 * rows; an "options" parameter in the URI replaces these. */
	snprintf(options, sizeof(options),
		 "-c lock_timeout=%u -c synchronous_commit=off", l->busy_ms);
	if (!dynlib_load(&pq_lib)) {
		set_err(l, "postgresql: %s", pq_lib.err);
		return LEDGER_ERROR;
	}
	l->pg = pq.PQconnectdbParams(keys, vals, 1);
	if (!l->pg) {
		set_err(l, "postgresql: out of memory");
		return LEDGER_ERROR;
	}
	if (pq.PQstatus(l->pg) != CONNECTION_OK) {
		pg_err(l, "connect", pq.PQerrorMessage(l->pg));
		return LEDGER_ERROR;
	}
	return setup_schema(l, create) ? LEDGER_OK : LEDGER_ERROR;
}

const char *ledger_sqlite_path(const char *spec)
{
	if (spec && strncmp(spec, "sqlite:", 7) == 0)
		return spec + 7;
	return NULL;
}

static bool is_pg(const char *spec)
{
	return strncmp(spec, "postgresql://", 13) == 0 ||
	       strncmp(spec, "postgres://", 11) == 0;
}

enum ledger_status ledger_open(const char *spec, const struct ledger_options *opts,
			       struct ledger **out, char *err, size_t errlen)
{
	struct ledger_options none = { 0 };
	struct ledger *l = util_xcalloc(1, sizeof(*l));
	enum ledger_status st;
	char *shown = NULL;

	*out = NULL;
	if (!opts)
		opts = &none;
	l->lease = opts->lease_seconds ? opts->lease_seconds
				       : LEDGER_LEASE_SECONDS_DEFAULT;
	l->busy_ms = opts->busy_timeout_ms ? opts->busy_timeout_ms
					   : LEDGER_BUSY_TIMEOUT_MS_DEFAULT;
	identify(l);
	if (!spec || !*spec) {
		l->kind = B_MEMORY;
		st = open_sqlite(l, ":memory:", true);
	} else if (ledger_sqlite_path(spec)) {
		l->kind = B_SQLITE;
		if (!*ledger_sqlite_path(spec)) {
			set_err(l, "sqlite: the ledger names no file (sqlite:PATH)");
			st = LEDGER_INVALID;
		} else {
			st = open_sqlite(l, ledger_sqlite_path(spec), opts->create);
		}
	} else if (is_pg(spec)) {
		l->kind = B_PG;
		st = open_pg(l, spec, opts->create);
	} else {
		shown = ledger_redact(spec);
		set_err(l, "unknown ledger '%.100s': use sqlite:PATH, "
			"postgresql://... or null", shown);
		free(shown);
		st = LEDGER_INVALID;
	}
	if (st != LEDGER_OK) {
		if (err && errlen)
			snprintf(err, errlen, "%s", l->err);
		ledger_close(l);
		return st;
	}
	*out = l;
	return LEDGER_OK;
}

static void session_free(struct ledger_session *s)
{
	size_t i;

	for (i = 0; i < s->nchain; i++)
		free(s->chain[i]);
	free(s->chain);
	free(s);
}

static void unlink_session(struct ledger_session *s)
{
	struct ledger_session **pp;

	for (pp = &s->l->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			return;
		}
	}
}

void ledger_close(struct ledger *l)
{
	size_t i;

	if (!l)
		return;
	while (l->sessions)
		(void)ledger_session_close(l->sessions, NULL);
	for (i = 0; i < S_COUNT; i++)
		if (l->st[i])
			sqlite3_finalize(l->st[i]);
	if (l->db)
		sqlite3_close(l->db);
	if (l->pg)
		pq.PQfinish(l->pg);
	free(l);
}

char *ledger_default_spec(void)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");

	if (state && state[0] == '/')
		return util_xasprintf("sqlite:%s/airlock/spend.db", state);
	if (home && home[0] == '/')
		return util_xasprintf("sqlite:%s/.local/state/airlock/spend.db", home);
	return NULL;
}

char *ledger_redact(const char *spec)
{
	char *out = util_xstrdup(spec ? spec : ""), *p, *auth, *at, *colon, *q;
	size_t alen;

	if (!is_pg(out))
		return out;
	auth = strstr(out, "://") + 3;
	alen = strcspn(auth, "/?");
	at = memrchr(auth, '@', alen);
	colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (colon) {
		char *rest = util_xstrdup(at);

		colon[1] = '\0';
		p = util_xasprintf("%s***%s", out, rest);
		free(rest);
		free(out);
		out = p;
	}
	/* ?password=... or &password=... in the query */
	for (q = strchr(out, '?'); q; q = strchr(q + 1, '&')) {
		if (strncmp(q + 1, "password=", 9) == 0) {
			char *end = q + 10 + strcspn(q + 10, "&");
			char *rest = util_xstrdup(end);

			q[10] = '\0';
			p = util_xasprintf("%s***%s", out, rest);
			q = p + (q - out) + 10; /* at the ***: the next '&' follows */
			free(rest);
			free(out);
			out = p;
		}
	}
	return out;
}

int64_t ledger_cap_of_policy(const struct policy *p)
{
	int64_t cap;

	if (!p->spend_has_cap)
		return LEDGER_NO_CAP;
	if (!meter_usd_to_nano(p->spend_cap_usd, &cap))
		cap = METER_MONEY_MAX; /* a valid policy's cap is >= 0 */
	return cap;
}

/* ------------------------------------------------------------------ */
/* Rows                                                               */
/* ------------------------------------------------------------------ */

static bool valid_id(const char *id)
{
	return id && policy_session_id_valid(id);
}

static bool valid_money(int64_t v)
{
	return v >= 0 && v <= METER_MONEY_MAX;
}

static bool valid_cap(int64_t cap)
{
	return cap == LEDGER_NO_CAP || valid_money(cap);
}

/* Reads a session row; LEDGER_NOT_FOUND when there is none. */
static enum ledger_status get_session(struct ledger *l, const char *id,
				      struct rows *r)
{
	struct val p[] = { vtext(id) };

	if (!run(l, S_GET_SESSION, p, 1, r))
		return LEDGER_ERROR;
	if (r->n == 0) {
		rows_free(r);
		return LEDGER_NOT_FOUND;
	}
	return LEDGER_OK;
}

static bool totals_of(struct ledger *l, const struct rows *r,
		      struct ledger_totals *t)
{
	struct ledger_totals v;

	v.cap = LEDGER_NO_CAP;
	if ((!cell_null(r, 0, C_CAP) && !cell_int(r, 0, C_CAP, &v.cap)) ||
	    !cell_int(r, 0, C_SPENT, &v.spent) ||
	    !cell_int(r, 0, C_RESERVED, &v.reserved) ||
	    !cell_int(r, 0, C_OWN, &v.own_spent)) {
		set_err(l, "a session row holds a value that is not a number");
		return false;
	}
	if (t)
		*t = v;
	return true;
}

/* Locks the tree of @root for this transaction (PostgreSQL). */
static bool lock_tree(struct ledger *l, const char *root)
{
	struct val p[] = { vtext(root) };
	struct rows r = { 0 };
	bool ok;

	if (l->kind != B_PG)
		return true;
	ok = run(l, S_LOCK, p, 1, &r);
	rows_free(&r);
	return ok;
}

/* Splits a path ("root/a/b") into its ids. */
static char **split_path(const char *path, size_t *n)
{
	char **v = NULL, *copy = util_xstrdup(path), *tok, *save = NULL;
	size_t count = 0;

	for (tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		v = util_xrealloc(v, (count + 1) * sizeof(*v));
		v[count++] = util_xstrdup(tok);
	}
	free(copy);
	*n = count;
	return v;
}

static void free_ids(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Adds @dspent and @dreserved on every row of @chain, and @dspent to the
 * own_spent of its last one. */
static bool add_chain(struct ledger *l, char *const *chain, size_t n,
		      int64_t dspent, int64_t dreserved)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct val p[] = { vtext(chain[i]), vint(dspent), vint(dreserved) };

		if (!run(l, S_ADD, p, 3, NULL))
			return false;
	}
	if (dspent != 0) {
		struct val p[] = { vtext(chain[n - 1]), vint(dspent) };

		if (!run(l, S_ADD_OWN, p, 2, NULL))
			return false;
	}
	return true;
}

/* Charges reservation @rid (of @session, @amount) in full and marks it
 * orphaned, or deletes it with @drop. */
static bool charge_orphan(struct ledger *l, int64_t rid, const char *session,
			  int64_t amount, bool drop)
{
	struct rows r = { 0 };
	struct val p[] = { vint(rid) };
	char **chain = NULL;
	size_t n = 0;
	bool ok = false;

	if (get_session(l, session, &r) != LEDGER_OK)
		goto out;
	chain = split_path(cell(&r, 0, C_PATH), &n);
	if (n == 0 || !add_chain(l, chain, n, amount, -amount) ||
	    !run(l, drop ? S_DELETE_RESERVATION : S_ORPHAN, p, 1, NULL))
		goto out;
	ok = true;
out:
	free_ids(chain, n);
	rows_free(&r);
	return ok;
}

static bool is_ours(const struct ledger *l, const char *holder)
{
	const struct ledger_session *s;

	for (s = l->sessions; s; s = s->next)
		if (strcmp(s->holder, holder) == 0)
			return true;
	return false;
}

/* A holder whose lease ran out this long ago is forgotten. */
#define FORGET_AFTER_SECONDS (INT64_C(24) * 3600)

/* Charges the reservations of the dead holders of the tree @root (in a
 * transaction that holds its lock). */
static bool sweep(struct ledger *l, const char *root)
{
	struct rows h = { 0 }, res = { 0 };
	struct val p[] = { vtext(root) };
	bool ok = false;
	size_t i, j;

	if (!run(l, S_TREE_HOLDERS, p, 1, &h))
		goto out;
	for (i = 0; i < h.n; i++) {
		int64_t pid, start, lease, now, rid, amount, orphaned;
		bool gone, expired, forget;
		struct val hp[] = { vtext(cell(&h, i, 0)) };

		if (is_ours(l, cell(&h, i, 0)) || !cell_int(&h, i, 3, &pid) ||
		    !cell_int(&h, i, 4, &start) || !cell_int(&h, i, 5, &lease) ||
		    !cell_int(&h, i, 6, &now))
			continue;
		gone = process_gone(l, cell(&h, i, 1), cell(&h, i, 2), pid, start);
		expired = lease < now;
		if (!gone && !expired)
			continue;
		forget = gone || now - lease > FORGET_AFTER_SECONDS;
		if (!run(l, S_HOLDER_RESERVATIONS, hp, 1, &res))
			goto out;
		for (j = 0; j < res.n; j++) {
			if (!cell_int(&res, j, 0, &rid) ||
			    !cell_int(&res, j, 2, &amount) ||
			    !cell_int(&res, j, 3, &orphaned))
				continue;
			if (!orphaned) {
				if (!charge_orphan(l, rid, cell(&res, j, 1), amount,
						   forget))
					goto out;
			} else if (forget) {
				struct val rp[] = { vint(rid) };

				if (!run(l, S_DELETE_RESERVATION, rp, 1, NULL))
					goto out;
			}
		}
		rows_free(&res);
		if (forget && !run(l, S_DELETE_HOLDER, hp, 1, NULL))
			goto out;
	}
	ok = true;
out:
	rows_free(&res);
	rows_free(&h);
	return ok;
}

/* ------------------------------------------------------------------ */
/* Sessions                                                           */
/* ------------------------------------------------------------------ */

/* Makes session @id under @parent (in a transaction), or finds it. With
 * @must_be_new an existing one is LEDGER_CONFLICT. *root and *path are
 * malloc'd on success. */
static enum ledger_status find_or_create(struct ledger *l, const char *id,
					 const char *parent, int64_t cap,
					 bool must_be_new, char **root, char **path)
{
	struct rows r = { 0 }, pr = { 0 };
	enum ledger_status st;
	int64_t depth = 0;
	char *newpath = NULL;
	const char *newroot = id;

	*root = *path = NULL;
	st = get_session(l, id, &r);
	if (st == LEDGER_NOT_FOUND) {
		if (parent) {
			st = get_session(l, parent, &pr);
			if (st == LEDGER_NOT_FOUND) {
				set_err(l, "no session '%s' in the ledger to be the "
					"parent of '%s'", parent, id);
				st = LEDGER_NO_PARENT;
				goto out;
			}
			if (st != LEDGER_OK)
				goto out;
			if (!cell_int(&pr, 0, C_DEPTH, &depth) ||
			    depth + 1 > LEDGER_MAX_DEPTH) {
				set_err(l, "session '%s' would be deeper than %d "
					"levels", id, LEDGER_MAX_DEPTH);
				st = LEDGER_INVALID;
				goto out;
			}
			depth++;
			newroot = cell(&pr, 0, C_ROOT);
			newpath = util_xasprintf("%s/%s", cell(&pr, 0, C_PATH), id);
			if (!lock_tree(l, newroot)) {
				st = LEDGER_ERROR;
				goto out;
			}
		} else {
			newpath = util_xstrdup(id);
		}
		{
			struct val p[] = { vtext(id), vtext(parent), vtext(newroot),
					   vtext(newpath), vint(depth), vcap(cap) };

			if (!run(l, S_INSERT_SESSION, p, 6, NULL)) {
				st = LEDGER_ERROR;
				goto out;
			}
		}
		/* Read back: a concurrent open may have made it first. */
		st = get_session(l, id, &r);
		if (st != LEDGER_OK)
			goto out;
	} else if (st != LEDGER_OK) {
		goto out;
	} else if (must_be_new) {
		set_err(l, "session '%s' is already in the ledger", id);
		st = LEDGER_CONFLICT;
		goto out;
	}
	if ((parent == NULL) != cell_null(&r, 0, C_PARENT) ||
	    (parent && strcmp(parent, cell(&r, 0, C_PARENT)) != 0)) {
		set_err(l, "session '%s' is in the ledger under %s%s%s, not %s%s%s",
			id, cell_null(&r, 0, C_PARENT) ? "no parent" : "'",
			cell_null(&r, 0, C_PARENT) ? "" : cell(&r, 0, C_PARENT),
			cell_null(&r, 0, C_PARENT) ? "" : "'",
			parent ? "'" : "no parent", parent ? parent : "",
			parent ? "'" : "");
		st = LEDGER_CONFLICT;
		goto out;
	}
	if (!lock_tree(l, cell(&r, 0, C_ROOT))) {
		st = LEDGER_ERROR;
		goto out;
	}
	*root = util_xstrdup(cell(&r, 0, C_ROOT));
	*path = util_xstrdup(cell(&r, 0, C_PATH));
	st = LEDGER_OK;
out:
	free(newpath);
	rows_free(&r);
	rows_free(&pr);
	return st;
}

static enum ledger_status check_args(struct ledger *l, const char *id,
				     const char *parent, int64_t cap)
{
	if (!valid_id(id) || (parent && !valid_id(parent))) {
		set_err(l, "a session id is 1-128 characters of A-Z a-z 0-9 . _ : - "
			"starting with a letter or digit");
		return LEDGER_INVALID;
	}
	if (parent && strcmp(parent, id) == 0) {
		set_err(l, "session '%s' cannot be its own parent", id);
		return LEDGER_INVALID;
	}
	if (!valid_cap(cap)) {
		set_err(l, "a cap is from 0 to 1000000000 dollars");
		return LEDGER_INVALID;
	}
	return LEDGER_OK;
}

enum ledger_status ledger_session_open(struct ledger *l, const char *id,
				       const char *parent, int64_t cap,
				       struct ledger_session **out)
{
	struct ledger_session *s = NULL;
	struct rows r = { 0 };
	enum ledger_status st;
	char *root = NULL, *path = NULL;
	uint8_t rnd[16];
	int64_t live = 0;

	*out = NULL;
	st = check_args(l, id, parent, cap);
	if (st != LEDGER_OK)
		return st;
	if (!tx_begin(l, true))
		return LEDGER_ERROR;
	st = find_or_create(l, id, parent, cap, false, &root, &path);
	if (st != LEDGER_OK)
		goto out;
	st = LEDGER_ERROR;
	if (!sweep(l, root))
		goto out;
	{
		struct val p[] = { vtext(id) };

		if (!run(l, S_LIVE_HOLDERS, p, 1, &r) || r.n != 1 ||
		    !cell_int(&r, 0, 0, &live))
			goto out;
	}
	if (live == 0) {
		struct val p[] = { vtext(id), vcap(cap) };

		if (!run(l, S_SET_CAP, p, 2, NULL))
			goto out;
	}
	s = util_xcalloc(1, sizeof(*s));
	s->l = l;
	ASSERT(util_strlcpy(s->id, id, sizeof(s->id)));
	util_random(rnd, sizeof(rnd));
	util_hex(rnd, sizeof(rnd), s->holder);
	{
		struct val p[] = { vtext(s->holder), vtext(id), vtext(l->host),
				   vtext(l->boot_id), vtext(l->pidns),
				   vint((int64_t)getpid()), vint(l->start_time),
				   vint((int64_t)l->lease) };

		if (!run(l, S_INSERT_HOLDER, p, 8, NULL))
			goto out;
	}
	s->chain = split_path(path, &s->nchain);
	if (s->nchain == 0 || strcmp(s->chain[s->nchain - 1], id) != 0) {
		set_err(l, "session '%s' has a broken path in the ledger", id);
		goto out;
	}
	st = LEDGER_OK;
out:
	rows_free(&r);
	free(root);
	free(path);
	st = tx_end(l, st);
	if (st != LEDGER_OK) {
		if (s)
			session_free(s);
		return st;
	}
	s->next = l->sessions;
	l->sessions = s;
	*out = s;
	return LEDGER_OK;
}

const char *ledger_session_id(const struct ledger_session *s)
{
	return s->id;
}

/* Reads the rows of the session's chain, root first, into @t. */
static bool read_chain(struct ledger_session *s, struct ledger_totals *t)
{
	struct rows r = { 0 };
	size_t i;

	for (i = 0; i < s->nchain; i++) {
		if (get_session(s->l, s->chain[i], &r) != LEDGER_OK) {
			if (!s->l->err[0])
				set_err(s->l, "session '%s' is gone from the ledger",
					s->chain[i]);
			return false;
		}
		if (!totals_of(s->l, &r, &t[i])) {
			rows_free(&r);
			return false;
		}
		rows_free(&r);
	}
	return true;
}

static bool renew(struct ledger_session *s)
{
	struct val p[] = { vtext(s->holder), vint((int64_t)s->l->lease) };

	return run(s->l, S_RENEW, p, 2, NULL);
}

/* Step 1 of a money transaction: BEGIN, the tree's lock, and the rows
 * of the session's chain (root first) into @rows; the @nextra steps
 * @extra run before the chain. */
static size_t begin_chain_steps(struct ledger_session *s, struct step *v,
				struct rows *rows, const struct step *extra,
				size_t nextra)
{
	size_t n = 0, i;

	step_add(v, &n, STEP_BEGIN, NULL, 0, NULL);
	if (s->l->kind == B_PG) {
		struct val p[] = { vtext(s->chain[0]) };

		step_add(v, &n, S_LOCK, NULL, 1, p);
	}
	for (i = 0; i < nextra; i++)
		v[n++] = extra[i];
	for (i = 0; i < s->nchain; i++) {
		struct val p[] = { vtext(s->chain[i]) };

		step_add(v, &n, S_GET_SESSION, &rows[i], 1, p);
	}
	return n;
}

/* The chain's rows as totals; false (error set) when one is missing. */
static bool chain_totals(struct ledger_session *s, const struct rows *rows,
			 struct ledger_totals *t)
{
	size_t i;

	for (i = 0; i < s->nchain; i++) {
		if (rows[i].n != 1) {
			set_err(s->l, "session '%s' is gone from the ledger", s->chain[i]);
			return false;
		}
		if (!totals_of(s->l, &rows[i], &t[i]))
			return false;
	}
	return true;
}

static void free_chain_rows(struct rows *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		rows_free(&rows[i]);
}

/* Adds the steps of add_chain(). */
static void add_chain_steps(struct ledger_session *s, struct step *v, size_t *n,
			    int64_t dspent, int64_t dreserved)
{
	size_t i;

	for (i = 0; i < s->nchain; i++) {
		struct val p[] = { vtext(s->chain[i]), vint(dspent), vint(dreserved) };

		step_add(v, n, S_ADD, NULL, 3, p);
	}
	if (dspent != 0) {
		struct val p[] = { vtext(s->id), vint(dspent) };

		step_add(v, n, S_ADD_OWN, NULL, 2, p);
	}
}

static void renew_step(struct ledger_session *s, struct step *v, size_t *n)
{
	struct val p[] = { vtext(s->holder), vint((int64_t)s->l->lease) };

	step_add(v, n, S_RENEW, NULL, 2, p);
}

/* Reserve: two round trips on PostgreSQL (read the chain under the
 * tree's lock; write and commit), whatever the depth. */
/* ledger_reserve(), or with @over (shadow mode) a reservation that is made
 * even where it passes a cap: *over then says it did, *why names the cap. */
static enum ledger_status reserve(struct ledger_session *s, int64_t amount,
				  int64_t *rid, struct ledger_refusal *why,
				  bool *over)
{
	struct ledger *l = s->l;
	struct ledger_totals t[LEDGER_MAX_DEPTH + 1];
	struct rows rows[LEDGER_MAX_DEPTH + 1], ins = { 0 };
	struct step v[MAX_STEPS];
	enum ledger_status st = LEDGER_ERROR;
	size_t i, n;

	*rid = -1;
	l->err[0] = '\0';
	if (!valid_money(amount)) {
		set_err(l, "a reservation is from 0 to 1000000000 dollars");
		return LEDGER_INVALID;
	}
	ASSERT(s->nchain <= ARRAY_SIZE(t));
	memset(rows, 0, sizeof(rows));
	n = begin_chain_steps(s, v, rows, NULL, 0);
	if (!run_steps(l, v, n) || !chain_totals(s, rows, t))
		goto out;
	/* The nearest session whose cap this would pass. */
	for (i = s->nchain; i-- > 0;) {
		int64_t sum;

		if (t[i].cap == LEDGER_NO_CAP)
			continue;
		if (__builtin_add_overflow(t[i].spent, t[i].reserved, &sum) ||
		    __builtin_add_overflow(sum, amount, &sum) || sum > t[i].cap) {
			if (why) {
				memset(why, 0, sizeof(*why));
				ASSERT(util_strlcpy(why->session, s->chain[i],
						    sizeof(why->session)));
				why->cap = t[i].cap;
				why->spent = t[i].spent;
				why->reserved = t[i].reserved;
				why->amount = amount;
			}
			set_err(l, "the cap of session '%s' would be exceeded",
				s->chain[i]);
			if (over) {
				*over = true;
				break;
			}
			st = LEDGER_REFUSED;
			goto out;
		}
	}
	n = 0;
	add_chain_steps(s, v, &n, 0, amount);
	{
		struct val p[] = { vtext(s->id), vtext(s->holder), vint(amount) };

		step_add(v, &n, S_INSERT_RESERVATION, &ins, 3, p);
	}
	renew_step(s, v, &n);
	step_add(v, &n, STEP_COMMIT, NULL, 0, NULL);
	if (!run_steps(l, v, n) || ins.n != 1 || !cell_int(&ins, 0, 0, rid))
		goto out;
	st = LEDGER_OK;
out:
	free_chain_rows(rows, s->nchain);
	rows_free(&ins);
	if (st != LEDGER_OK) {
		*rid = -1;
		tx_rollback(l);
	}
	return st;
}

enum ledger_status ledger_reserve_batch(struct ledger_session *s, size_t n,
					const int64_t *amounts, bool over,
					enum ledger_status *st, int64_t *rids,
					struct ledger_refusal *whys, bool *overs)
{
	struct ledger *l = s->l;
	struct ledger_totals t[LEDGER_MAX_DEPTH + 1];
	struct rows rows[LEDGER_MAX_DEPTH + 1], ins[LEDGER_BATCH_MAX];
	struct step v[MAX_STEPS];
	enum ledger_status ret = LEDGER_ERROR;
	size_t made[LEDGER_BATCH_MAX], m = 0, i, k, ns;
	int64_t add = 0;

	ASSERT(n >= 1 && n <= LEDGER_BATCH_MAX);
	ASSERT(s->nchain <= ARRAY_SIZE(t));
	/* one S_ADD per row of the chain, an insert per reservation, the
	 * lease and the commit */
	static_assert(LEDGER_BATCH_MAX + LEDGER_MAX_DEPTH + 1 + 2 <= MAX_STEPS,
		      "a batch fits in one pipeline");
	l->err[0] = '\0';
	memset(rows, 0, sizeof(rows));
	memset(ins, 0, sizeof(ins));
	for (k = 0; k < n; k++) {
		st[k] = LEDGER_ERROR;
		rids[k] = -1;
		overs[k] = false;
		memset(&whys[k], 0, sizeof(whys[k]));
	}
	ns = begin_chain_steps(s, v, rows, NULL, 0);
	if (!run_steps(l, v, ns) || !chain_totals(s, rows, t))
		goto out;
	for (k = 0; k < n; k++) {
		int64_t amount = amounts[k], next;
		bool passes = false;

		if (!valid_money(amount)) {
			st[k] = LEDGER_INVALID;
			continue;
		}
		if (__builtin_add_overflow(add, amount, &next)) {
			st[k] = LEDGER_ERROR;
			continue;
		}
		/* The nearest session whose cap this one would pass, with the
		 * batch's reservations before it counted. */
		for (i = s->nchain; i-- > 0 && !passes;) {
			int64_t sum;

			if (t[i].cap == LEDGER_NO_CAP)
				continue;
			if (__builtin_add_overflow(t[i].spent, t[i].reserved, &sum) ||
			    __builtin_add_overflow(sum, next, &sum) || sum > t[i].cap) {
				ASSERT(util_strlcpy(whys[k].session, s->chain[i],
						    sizeof(whys[k].session)));
				whys[k].cap = t[i].cap;
				whys[k].spent = t[i].spent;
				whys[k].reserved = t[i].reserved + add;
				whys[k].amount = amount;
				passes = true;
			}
		}
		if (passes && !over) {
			st[k] = LEDGER_REFUSED;
			continue;
		}
		overs[k] = passes;
		add = next;
		made[m++] = k;
	}
	if (m == 0) {
		/* nothing to write: the statuses say why */
		tx_rollback(l);
		ret = LEDGER_OK;
		goto out;
	}
	ns = 0;
	add_chain_steps(s, v, &ns, 0, add);
	for (i = 0; i < m; i++) {
		struct val p[] = { vtext(s->id), vtext(s->holder), vint(amounts[made[i]]) };

		step_add(v, &ns, S_INSERT_RESERVATION, &ins[i], 3, p);
	}
	renew_step(s, v, &ns);
	step_add(v, &ns, STEP_COMMIT, NULL, 0, NULL);
	if (!run_steps(l, v, ns))
		goto out;
	for (i = 0; i < m; i++) {
		if (ins[i].n != 1 || !cell_int(&ins[i], 0, 0, &rids[made[i]])) {
			/* committed, but an id is unreadable: the session's
			 * close charges that reservation in full */
			rids[made[i]] = -1;
			st[made[i]] = LEDGER_ERROR;
			continue;
		}
		st[made[i]] = LEDGER_OK;
	}
	ret = LEDGER_OK;
out:
	free_chain_rows(rows, s->nchain);
	for (i = 0; i < LEDGER_BATCH_MAX; i++)
		rows_free(&ins[i]);
	if (ret != LEDGER_OK) {
		for (k = 0; k < n; k++) {
			st[k] = ret;
			rids[k] = -1;
			overs[k] = false;
		}
		tx_rollback(l);
	}
	return ret;
}

enum ledger_status ledger_reserve(struct ledger_session *s, int64_t amount,
				  int64_t *rid, struct ledger_refusal *why)
{
	return reserve(s, amount, rid, why, NULL);
}

enum ledger_status ledger_reserve_over(struct ledger_session *s, int64_t amount,
				       int64_t *rid, struct ledger_refusal *why,
				       bool *over)
{
	*over = false;
	return reserve(s, amount, rid, why, over);
}

/* Settle: two round trips on PostgreSQL, as reserve, for the whole
 * batch: the reservations and the chain under the tree's lock, then one
 * write of the chain's sums, the deletes and the commit. */
enum ledger_status ledger_settle_batch(struct ledger_session *s, size_t n,
				       const int64_t *rids, const int64_t *costs,
				       enum ledger_status *st, struct ledger_totals *after)
{
	struct ledger *l = s->l;
	struct ledger_totals t[LEDGER_MAX_DEPTH + 1], own;
	struct rows rows[LEDGER_MAX_DEPTH + 1], r[LEDGER_BATCH_MAX];
	struct step v[MAX_STEPS], gets[LEDGER_BATCH_MAX];
	enum ledger_status ret = LEDGER_ERROR;
	int64_t dspent = 0, dres = 0;
	size_t made[LEDGER_BATCH_MAX], m = 0, i, k, ns;

	ASSERT(n >= 1 && n <= LEDGER_BATCH_MAX);
	ASSERT(s->nchain >= 1 && s->nchain <= ARRAY_SIZE(t));
	/* the chain, a read per reservation, the lock and the ends; then
	 * the chain's sums, a delete per reservation, the lease, the end */
	static_assert(LEDGER_BATCH_MAX + LEDGER_MAX_DEPTH + 1 + 4 <= MAX_STEPS,
		      "a settle batch fits in one pipeline");
	l->err[0] = '\0';
	memset(rows, 0, sizeof(rows));
	memset(r, 0, sizeof(r));
	memset(gets, 0, sizeof(gets));
	for (k = 0; k < n; k++) {
		st[k] = valid_money(costs[k]) ? LEDGER_ERROR : LEDGER_INVALID;
		gets[k].s = S_GET_RESERVATION;
		gets[k].p[0] = vint(rids[k]);
		gets[k].np = 1;
		gets[k].out = &r[k];
	}
	ns = begin_chain_steps(s, v, rows, gets, n);
	if (!run_steps(l, v, ns) || !chain_totals(s, rows, t))
		goto out;
	own = t[s->nchain - 1];
	for (k = 0; k < n; k++) {
		int64_t amount, orphaned, ds, dr, next_s, next_r, sum;
		bool dup = false, ovf;

		if (st[k] == LEDGER_INVALID) {
			set_err(l, "a cost is from 0 to 1000000000 dollars");
			continue;
		}
		for (i = 0; i < m && !dup; i++)
			dup = rids[made[i]] == rids[k];
		if (dup || r[k].n != 1 || cell_null(&r[k], 0, 1) ||
		    strcmp(cell(&r[k], 0, 1), s->holder) != 0) {
			set_err(l, "session '%s' holds no reservation %lld", s->id,
				(long long)rids[k]);
			st[k] = LEDGER_NOT_FOUND;
			continue;
		}
		if (!cell_int(&r[k], 0, 2, &amount) || !cell_int(&r[k], 0, 3, &orphaned))
			goto out;
		/* An orphaned reservation was charged in full already:
		 * correct it to the cost. */
		ds = orphaned ? costs[k] - amount : costs[k];
		dr = orphaned ? 0 : -amount;
		ovf = __builtin_add_overflow(dspent, ds, &next_s) ||
		      __builtin_add_overflow(dres, dr, &next_r) ||
		      __builtin_add_overflow(own.own_spent, next_s, &sum);
		for (i = 0; i < s->nchain && !ovf; i++) {
			ovf = __builtin_add_overflow(t[i].spent, next_s, &sum);
			if (ovf)
				set_err(l, "the spent money of '%s' would overflow",
					s->chain[i]);
		}
		if (ovf) {
			st[k] = LEDGER_ERROR;
			continue;
		}
		dspent = next_s;
		dres = next_r;
		if (after)
			after[k] = (struct ledger_totals){
				.cap = own.cap, .spent = own.spent + dspent,
				.reserved = own.reserved + dres,
				.own_spent = own.own_spent + dspent };
		made[m++] = k;
	}
	if (m == 0) {
		/* nothing to write: the statuses say why */
		tx_rollback(l);
		ret = LEDGER_OK;
		goto out;
	}
	ns = 0;
	add_chain_steps(s, v, &ns, dspent, dres);
	for (i = 0; i < m; i++) {
		struct val p[] = { vint(rids[made[i]]) };

		step_add(v, &ns, S_DELETE_RESERVATION, NULL, 1, p);
	}
	renew_step(s, v, &ns);
	step_add(v, &ns, STEP_COMMIT, NULL, 0, NULL);
	if (!run_steps(l, v, ns))
		goto out;
	for (i = 0; i < m; i++)
		st[made[i]] = LEDGER_OK;
	ret = LEDGER_OK;
out:
	free_chain_rows(rows, s->nchain);
	for (k = 0; k < n; k++)
		rows_free(&r[k]);
	if (ret != LEDGER_OK) {
		for (k = 0; k < n; k++)
			st[k] = ret;
		tx_rollback(l);
	}
	return ret;
}

enum ledger_status ledger_settle(struct ledger_session *s, int64_t rid,
				 int64_t cost, struct ledger_totals *after)
{
	struct ledger_totals t;
	enum ledger_status st, ret;

	ret = ledger_settle_batch(s, 1, &rid, &cost, &st, &t);
	if (ret != LEDGER_OK)
		return ret;
	if (st == LEDGER_OK && after)
		*after = t;
	return st;
}

enum ledger_status ledger_release(struct ledger_session *s, int64_t rid)
{
	return ledger_settle(s, rid, 0, NULL);
}

enum ledger_status ledger_heartbeat(struct ledger_session *s)
{
	s->l->err[0] = '\0';
	if (!tx_begin(s->l, true))
		return LEDGER_ERROR;
	return tx_end(s->l, renew(s) ? LEDGER_OK : LEDGER_ERROR);
}

enum ledger_status ledger_session_totals(struct ledger_session *s,
					 struct ledger_totals *out)
{
	struct rows r = { 0 };
	enum ledger_status st;

	s->l->err[0] = '\0';
	if (!tx_begin(s->l, false))
		return LEDGER_ERROR;
	st = get_session(s->l, s->id, &r);
	if (st == LEDGER_OK && !totals_of(s->l, &r, out))
		st = LEDGER_ERROR;
	rows_free(&r);
	return tx_end(s->l, st);
}

enum ledger_status ledger_session_close(struct ledger_session *s,
					struct ledger_totals *final)
{
	struct ledger *l = s->l;
	struct ledger_totals t[LEDGER_MAX_DEPTH + 1];
	struct rows r = { 0 };
	enum ledger_status st = LEDGER_ERROR;
	struct val hp[] = { vtext(s->holder) };
	int64_t rid, amount, orphaned;
	size_t i;

	l->err[0] = '\0';
	if (!tx_begin(l, true))
		goto done;
	if (!lock_tree(l, s->chain[0]) || !run(l, S_HOLDER_RESERVATIONS, hp, 1, &r))
		goto out;
	for (i = 0; i < r.n; i++) {
		struct val rp[2];

		if (!cell_int(&r, i, 0, &rid) || !cell_int(&r, i, 2, &amount) ||
		    !cell_int(&r, i, 3, &orphaned))
			goto out;
		/* A call still in flight is a call cut short. */
		if (!orphaned && !add_chain(l, s->chain, s->nchain, amount, -amount))
			goto out;
		rp[0] = vint(rid);
		if (!run(l, S_DELETE_RESERVATION, rp, 1, NULL))
			goto out;
	}
	if (!run(l, S_DELETE_HOLDER, hp, 1, NULL))
		goto out;
	if (final) {
		if (!read_chain(s, t))
			goto out;
		*final = t[s->nchain - 1];
	}
	st = LEDGER_OK;
out:
	rows_free(&r);
	st = tx_end(l, st);
done:
	unlink_session(s);
	session_free(s);
	return st;
}

enum ledger_status ledger_create(struct ledger *l, const char *id,
				 const char *parent, int64_t cap)
{
	enum ledger_status st;
	char *root = NULL, *path = NULL;

	l->err[0] = '\0';
	st = check_args(l, id, parent, cap);
	if (st != LEDGER_OK)
		return st;
	if (!tx_begin(l, true))
		return LEDGER_ERROR;
	st = find_or_create(l, id, parent, cap, true, &root, &path);
	free(root);
	free(path);
	return tx_end(l, st);
}

enum ledger_status ledger_set_cap(struct ledger *l, const char *id, int64_t cap)
{
	struct rows r = { 0 };
	enum ledger_status st;

	l->err[0] = '\0';
	st = check_args(l, id, NULL, cap);
	if (st != LEDGER_OK)
		return st;
	if (!tx_begin(l, true))
		return LEDGER_ERROR;
	st = get_session(l, id, &r);
	if (st == LEDGER_NOT_FOUND)
		set_err(l, "no session '%s' in the ledger", id);
	if (st == LEDGER_OK) {
		struct val p[] = { vtext(id), vcap(cap) };

		st = lock_tree(l, cell(&r, 0, C_ROOT)) && run(l, S_SET_CAP, p, 2, NULL)
		     ? LEDGER_OK : LEDGER_ERROR;
	}
	rows_free(&r);
	return tx_end(l, st);
}

/* ------------------------------------------------------------------ */
/* Show                                                               */
/* ------------------------------------------------------------------ */

/* The rows of @r (id, parent, cap, spent, reserved, own_spent, holders,
 * reservations) as a forest: kids[kid_at[i] .. kid_at[i + 1]) are the
 * children of row i, and roots those without a parent in @r, each in id
 * order (strcmp, whatever the database's collation). */
struct forest {
	size_t *order;   /* rows by id */
	size_t *kid_at;  /* n + 1 offsets into kids */
	size_t *kids;
	size_t *parent;  /* row index, or n: none in @r */
};

static int cmp_ids(const void *a, const void *b, void *arg)
{
	const struct rows *r = arg;

	return strcmp(cell(r, *(const size_t *)a, 0), cell(r, *(const size_t *)b, 0));
}

static size_t find_row(const struct rows *r, const size_t *order, const char *id)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(cell(r, order[mid], 0), id);

		if (c == 0)
			return order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return r->n;
}

static void forest_build(const struct rows *r, struct forest *f)
{
	size_t n = r->n, i, *fill;

	f->order = util_xmalloc((n + 1) * sizeof(size_t));
	f->kid_at = util_xcalloc(n + 2, sizeof(size_t));
	f->kids = util_xmalloc((n + 1) * sizeof(size_t));
	f->parent = util_xmalloc((n + 1) * sizeof(size_t));
	fill = util_xcalloc(n + 1, sizeof(size_t));
	for (i = 0; i < n; i++)
		f->order[i] = i;
	qsort_r(f->order, n, sizeof(size_t), cmp_ids, (void *)r);
	for (i = 0; i < n; i++) {
		f->parent[i] = cell_null(r, i, 1) ? n : find_row(r, f->order, cell(r, i, 1));
		if (f->parent[i] != n)
			f->kid_at[f->parent[i] + 1]++;
	}
	for (i = 0; i < n; i++)
		f->kid_at[i + 1] += f->kid_at[i];
	for (i = 0; i < n; i++) {
		size_t row = f->order[i], p = f->parent[row];

		if (p != n)
			f->kids[f->kid_at[p] + fill[p]++] = row;
	}
	free(fill);
}

static void forest_free(struct forest *f)
{
	free(f->order);
	free(f->kid_at);
	free(f->kids);
	free(f->parent);
}

static void fill_row(const struct rows *r, size_t i, unsigned depth,
		     struct ledger_row *row)
{
	int64_t v;

	memset(row, 0, sizeof(*row));
	row->id = util_xstrdup(cell(r, i, 0));
	row->parent = cell_null(r, i, 1) ? NULL : util_xstrdup(cell(r, i, 1));
	row->depth = depth;
	row->t.cap = LEDGER_NO_CAP;
	if (!cell_null(r, i, 2))
		(void)cell_int(r, i, 2, &row->t.cap);
	(void)cell_int(r, i, 3, &row->t.spent);
	(void)cell_int(r, i, 4, &row->t.reserved);
	(void)cell_int(r, i, 5, &row->t.own_spent);
	if (cell_int(r, i, 6, &v))
		row->holders = (unsigned)v;
	if (cell_int(r, i, 7, &v))
		row->reservations = (unsigned)v;
}

/* Appends row @start and its subtree to @out, parents first. Iterative,
 * and it stops after r->n rows even if the rows were to form a cycle. */
static void emit_tree(const struct rows *r, const struct forest *f, size_t start,
		      struct ledger_row *out, size_t *n)
{
	size_t *stack = util_xmalloc((r->n + 1) * sizeof(size_t));
	unsigned *depth = util_xmalloc((r->n + 1) * sizeof(unsigned));
	size_t sp = 0, k;

	stack[sp] = start;
	depth[sp++] = 0;
	while (sp > 0 && *n < r->n) {
		size_t cur = stack[--sp];
		unsigned d = depth[sp];

		fill_row(r, cur, d, &out[(*n)++]);
		/* Children pushed in reverse pop in id order. */
		for (k = f->kid_at[cur + 1]; k-- > f->kid_at[cur] && sp < r->n;) {
			stack[sp] = f->kids[k];
			depth[sp++] = d + 1;
		}
	}
	free(stack);
	free(depth);
}

enum ledger_status ledger_show(struct ledger *l, const char *id,
			       struct ledger_row **rows, size_t *n)
{
	struct rows r = { 0 }, all = { 0 };
	struct forest f = { 0 };
	enum ledger_status st;
	size_t i, start;

	*rows = NULL;
	*n = 0;
	l->err[0] = '\0';
	if (id && !valid_id(id)) {
		set_err(l, "'%.130s' is not a session id", id);
		return LEDGER_INVALID;
	}
	if (!tx_begin(l, false))
		return LEDGER_ERROR;
	if (id) {
		st = get_session(l, id, &r);
		if (st == LEDGER_NOT_FOUND)
			set_err(l, "no session '%s' in the ledger", id);
		if (st != LEDGER_OK)
			goto out;
	}
	{
		struct val p[] = { vtext(id ? cell(&r, 0, C_ROOT) : NULL) };

		st = run(l, S_SHOW, p, 1, &all) ? LEDGER_OK : LEDGER_ERROR;
		if (st != LEDGER_OK)
			goto out;
	}
	forest_build(&all, &f);
	*rows = util_xcalloc(all.n ? all.n : 1, sizeof(**rows));
	if (id) {
		start = find_row(&all, f.order, id);
		if (start < all.n)
			emit_tree(&all, &f, start, *rows, n);
	} else {
		for (i = 0; i < all.n; i++)
			if (f.parent[f.order[i]] == all.n)
				emit_tree(&all, &f, f.order[i], *rows, n);
	}
	st = LEDGER_OK;
out:
	forest_free(&f);
	rows_free(&r);
	rows_free(&all);
	st = tx_end(l, st);
	if (st != LEDGER_OK) {
		ledger_rows_free(*rows, *n);
		*rows = NULL;
		*n = 0;
	}
	return st;
}

void ledger_rows_free(struct ledger_row *rows, size_t n)
{
	size_t i;

	if (!rows)
		return;
	for (i = 0; i < n; i++) {
		free(rows[i].id);
		free(rows[i].parent);
	}
	free(rows);
}
