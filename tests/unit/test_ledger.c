/* SPDX-License-Identifier: Apache-2.0
 * test_ledger.c - the spend ledger on its in-memory and SQLite backends:
 * reservations against a cap, a tree of sessions under caps, live cap
 * changes, missing parents and conflicts, what a session's close and a
 * crashed or silent holder leave, the schema version check, and
 * processes reserving at once against one cap (exactly the reservations
 * the cap allows succeed; spent never passes it). The PostgreSQL backend
 * runs the same rules in tests/integration/70-spend-ledger.t against a
 * real server.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "ledger.h"
#include "meter.h"
#include "tap.h"
#include "util.h"

#define USD(x) ((int64_t)(x) * METER_NANO_PER_USD)

static char dir[] = "/tmp/airlock-ledger-test.XXXXXX";

static struct ledger *open_or_die(const char *spec, const struct ledger_options *o)
{
	struct ledger *l = NULL;
	char err[256];

	if (ledger_open(spec, o, &l, err, sizeof(err)) != LEDGER_OK) {
		tap_diag("ledger_open(%s): %s", spec ? spec : "memory", err);
		ASSERT(0);
	}
	return l;
}

static struct ledger_session *sess(struct ledger *l, const char *id,
				   const char *parent, int64_t cap)
{
	struct ledger_session *s = NULL;
	enum ledger_status st = ledger_session_open(l, id, parent, cap, &s);

	if (st != LEDGER_OK) {
		tap_diag("session_open(%s): %s: %s", id, ledger_status_to_string(st),
			 ledger_error(l));
		ASSERT(0);
	}
	return s;
}

static struct ledger_row *find(struct ledger_row *rows, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(rows[i].id, id) == 0)
			return &rows[i];
	return NULL;
}

/* The row of @id now (a copy of its numbers). */
static struct ledger_row row_of(struct ledger *l, const char *id)
{
	struct ledger_row *rows = NULL, *r, out;
	size_t n = 0;

	memset(&out, 0, sizeof(out));
	out.t.cap = -2;
	if (ledger_show(l, id, &rows, &n) == LEDGER_OK && (r = find(rows, n, id)))
		out = *r;
	out.id = out.parent = NULL;
	ledger_rows_free(rows, n);
	return out;
}

/* ------------------------------------------------------------------ */

static void test_basics(const char *spec, const char *what)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	struct ledger_session *s = sess(l, "basic", NULL, USD(100));
	struct ledger_refusal why;
	struct ledger_totals t;
	int64_t r1, r2, r3;

	tap_is_int(ledger_reserve(s, USD(60), &r1, &why), LEDGER_OK,
		   "%s: 60 of a 100 cap is reserved", what);
	tap_is_int(ledger_reserve(s, USD(50), &r2, &why), LEDGER_REFUSED,
		   "%s: 50 more is refused", what);
	tap_ok(strcmp(why.session, "basic") == 0 && why.cap == USD(100) &&
	       why.spent == 0 && why.reserved == USD(60) && why.amount == USD(50),
	       "%s: the refusal names the session, its cap, spent and reserved", what);
	tap_is_int(r2, -1, "%s: a refused reservation has no id", what);
	tap_is_int(ledger_settle(s, r1, USD(30), &t), LEDGER_OK,
		   "%s: settled at 30", what);
	tap_ok(t.spent == USD(30) && t.reserved == 0 && t.own_spent == USD(30) &&
	       t.cap == USD(100), "%s: the row after the settle", what);
	tap_is_int(ledger_settle(s, r1, USD(30), NULL), LEDGER_NOT_FOUND,
		   "%s: a reservation settles once", what);
	tap_is_int(ledger_settle(s, 424242, 0, NULL), LEDGER_NOT_FOUND,
		   "%s: an unknown reservation is not found", what);
	tap_is_int(ledger_reserve(s, USD(70), &r2, &why), LEDGER_OK,
		   "%s: up to the cap exactly (30 + 70)", what);
	tap_is_int(ledger_reserve(s, 1, &r3, &why), LEDGER_REFUSED,
		   "%s: one nano-dollar over is refused", what);
	tap_is_int(ledger_reserve(s, 0, &r3, &why), LEDGER_OK,
		   "%s: a zero reservation at the cap is not over it", what);
	tap_is_int(ledger_release(s, r3), LEDGER_OK, "%s: released", what);
	tap_is_int(ledger_release(s, r2), LEDGER_OK, "%s: released (nothing sent)",
		   what);
	/* A cost above its reservation is charged as it is. */
	tap_is_int(ledger_reserve(s, USD(10), &r1, &why), LEDGER_OK,
		   "%s: reserved 10", what);
	tap_is_int(ledger_settle(s, r1, USD(25), &t), LEDGER_OK,
		   "%s: settled at 25", what);
	tap_is_int(t.spent, USD(55), "%s: spent 55", what);
	tap_is_int(ledger_reserve(s, -1, &r1, &why), LEDGER_INVALID,
		   "%s: a negative amount is invalid", what);
	tap_is_int(ledger_reserve(s, METER_MONEY_MAX + 1, &r1, &why), LEDGER_INVALID,
		   "%s: an amount above the ledger's largest is invalid", what);
	tap_is_int(ledger_settle(s, r1, -5, NULL), LEDGER_INVALID,
		   "%s: a negative cost is invalid", what);

	/* Closing charges what is still reserved: a call in flight. */
	tap_is_int(ledger_reserve(s, USD(5), &r1, &why), LEDGER_OK,
		   "%s: reserved 5", what);
	tap_is_int(ledger_session_close(s, &t), LEDGER_OK, "%s: closed", what);
	tap_ok(t.spent == USD(60) && t.reserved == 0 && t.own_spent == USD(60),
	       "%s: the reservation left at close is charged", what);
	ledger_close(l);
}

static void test_tree(const char *spec, const char *what)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	struct ledger_session *root = sess(l, "R", NULL, USD(100));
	struct ledger_session *a = sess(l, "A", "R", USD(50));
	struct ledger_session *b = sess(l, "B", "R", LEDGER_NO_CAP);
	struct ledger_session *a1 = sess(l, "A1", "A", LEDGER_NO_CAP);
	struct ledger_session *x = NULL;
	struct ledger_refusal why;
	struct ledger_row *rows = NULL;
	struct ledger_totals t;
	size_t n = 0;
	int64_t r1, r2, r3, r4;

	tap_is_int(ledger_reserve(a1, USD(40), &r1, &why), LEDGER_OK,
		   "%s: a grandchild reserves 40", what);
	tap_is_int(ledger_reserve(a1, USD(20), &r2, &why), LEDGER_REFUSED,
		   "%s: 20 more passes its parent's cap", what);
	tap_is_str(why.session, "A", "%s: the refusal names the parent", what);
	tap_is_int(ledger_reserve(b, USD(61), &r2, &why), LEDGER_REFUSED,
		   "%s: a sibling's 61 passes the root's cap (40 reserved)", what);
	tap_is_str(why.session, "R", "%s: the refusal names the root", what);
	tap_is_int(ledger_reserve(b, USD(60), &r2, &why), LEDGER_OK,
		   "%s: the sibling's 60 fills the root", what);
	tap_is_int(ledger_reserve(root, 1, &r3, &why), LEDGER_REFUSED,
		   "%s: the root itself is full", what);
	tap_is_int(ledger_settle(a1, r1, USD(10), &t), LEDGER_OK,
		   "%s: the grandchild settles at 10", what);
	tap_ok(t.own_spent == USD(10) && t.spent == USD(10) && t.reserved == 0,
	       "%s: the grandchild's row", what);
	tap_is_int(ledger_reserve(a, USD(40), &r3, &why), LEDGER_REFUSED,
		   "%s: A's 40 passes the root (10 spent + 60 reserved)", what);
	tap_is_str(why.session, "R", "%s: by the root's cap", what);
	tap_is_int(ledger_release(b, r2), LEDGER_OK, "%s: B releases its 60", what);
	tap_is_int(ledger_reserve(a, USD(40), &r3, &why), LEDGER_OK,
		   "%s: A reserves up to its own cap (10 spent + 40)", what);
	tap_is_int(ledger_reserve(a1, 1, &r4, &why), LEDGER_REFUSED,
		   "%s: then its child cannot add a nano-dollar", what);
	tap_is_str(why.session, "A", "%s: by A's cap", what);
	tap_is_int(ledger_reserve(root, USD(51), &r4, &why), LEDGER_REFUSED,
		   "%s: the root has 10 + 40 + 51 against 100", what);
	tap_is_int(ledger_reserve(root, USD(50), &r4, &why), LEDGER_OK,
		   "%s: and 10 + 40 + 50 fits", what);

	tap_is_int(ledger_show(l, NULL, &rows, &n), LEDGER_OK, "%s: show", what);
	tap_is_int(n, 4, "%s: four sessions", what);
	if (n == 4) {
		tap_ok(strcmp(rows[0].id, "R") == 0 && rows[0].depth == 0 &&
		       strcmp(rows[1].id, "A") == 0 && rows[1].depth == 1 &&
		       strcmp(rows[2].id, "A1") == 0 && rows[2].depth == 2 &&
		       strcmp(rows[3].id, "B") == 0 && rows[3].depth == 1,
		       "%s: tree order", what);
		tap_ok(rows[0].t.spent == USD(10) && rows[0].t.reserved == USD(90) &&
		       rows[0].t.own_spent == 0 && rows[0].t.cap == USD(100),
		       "%s: the root holds its subtree's spent and reserved", what);
		tap_ok(rows[1].t.spent == USD(10) && rows[1].t.reserved == USD(40) &&
		       rows[1].t.own_spent == 0 && rows[1].reservations == 1 &&
		       rows[1].holders == 1, "%s: A's row", what);
		tap_ok(rows[3].t.cap == LEDGER_NO_CAP && rows[3].t.reserved == 0 &&
		       rows[3].parent && strcmp(rows[3].parent, "R") == 0,
		       "%s: B's row", what);
	}
	ledger_rows_free(rows, n);
	tap_is_int(ledger_show(l, "A", &rows, &n), LEDGER_OK, "%s: show A", what);
	tap_ok(n == 2 && strcmp(rows[0].id, "A") == 0 && rows[0].depth == 0 &&
	       strcmp(rows[1].id, "A1") == 0 && rows[1].depth == 1,
	       "%s: A's subtree", what);
	ledger_rows_free(rows, n);
	tap_is_int(ledger_show(l, "nope", &rows, &n), LEDGER_NOT_FOUND,
		   "%s: show of an unknown session", what);

	/* Opening: parents, conflicts, re-opening. */
	tap_is_int(ledger_session_open(l, "orphan", "no-such", USD(1), &x),
		   LEDGER_NO_PARENT, "%s: a missing parent refuses the session", what);
	tap_ok(x == NULL, "%s: no handle for it", what);
	tap_is_int(ledger_session_open(l, "A", "B", USD(1), &x), LEDGER_CONFLICT,
		   "%s: an existing session under another parent", what);
	tap_is_int(ledger_session_open(l, "A", NULL, USD(1), &x), LEDGER_CONFLICT,
		   "%s: an existing child opened as a root", what);
	tap_is_int(ledger_session_open(l, "bad/id", NULL, USD(1), &x), LEDGER_INVALID,
		   "%s: an invalid id", what);
	tap_is_int(ledger_session_open(l, "self", "self", USD(1), &x), LEDGER_INVALID,
		   "%s: its own parent", what);
	tap_is_int(ledger_session_open(l, "neg", NULL, -5, &x), LEDGER_INVALID,
		   "%s: a negative cap", what);
	/* A second holder of a running session keeps the live cap. */
	tap_is_int(ledger_session_open(l, "A", "R", USD(7), &x), LEDGER_OK,
		   "%s: a second holder joins A", what);
	tap_is_int(row_of(l, "A").t.cap, USD(50), "%s: A keeps its cap while run", what);
	tap_is_int(row_of(l, "A").holders, 2, "%s: A has two holders", what);
	tap_is_int(ledger_session_close(x, NULL), LEDGER_OK, "%s: the second closes", what);

	tap_is_int(ledger_create(l, "budget", NULL, USD(3)), LEDGER_OK,
		   "%s: a budget without a holder", what);
	tap_is_int(ledger_create(l, "budget", NULL, USD(3)), LEDGER_CONFLICT,
		   "%s: created once", what);
	tap_is_int(ledger_create(l, "kid", "missing", USD(3)), LEDGER_NO_PARENT,
		   "%s: create needs the parent too", what);
	x = sess(l, "under-budget", "budget", LEDGER_NO_CAP);
	tap_is_int(ledger_reserve(x, USD(4), &r1, &why), LEDGER_REFUSED,
		   "%s: a session under the budget is held to it", what);
	tap_is_str(why.session, "budget", "%s: by the budget's cap", what);

	ledger_close(l); /* closes the sessions still open */
	l = open_or_die(spec, &o);
	if (spec) {
		/* A file keeps what was spent; re-opening applies the cap. */
		a = sess(l, "A", "R", USD(45));
		tap_is_int(ledger_session_totals(a, &t), LEDGER_OK, "%s: totals", what);
		tap_ok(t.spent == USD(50) && t.reserved == 0 && t.cap == USD(45),
		       "%s: A re-opened: spent kept, its reservation charged at "
		       "close, the new run's cap", what);
		tap_is_int(row_of(l, "R").t.spent, USD(100),
			   "%s: the root counts everything charged", what);
		tap_is_int(row_of(l, "R").t.reserved, 0, "%s: nothing reserved", what);
		tap_is_int(row_of(l, "A").holders, 1, "%s: one holder again", what);
	} else {
		tap_is_int(ledger_show(l, NULL, &rows, &n), LEDGER_OK, "%s: show", what);
		tap_is_int(n, 0, "%s: memory forgets", what);
		ledger_rows_free(rows, n);
	}
	ledger_close(l);
}

static void test_set_cap(const char *spec, const char *what)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o), *admin = NULL;
	struct ledger_session *s = sess(l, "capped", NULL, USD(1));
	struct ledger_refusal why;
	int64_t r1, r2;

	/* The memory ledger is one process's: the admin is the same handle. */
	admin = spec ? open_or_die(spec, &o) : l;
	tap_is_int(ledger_reserve(s, USD(1), &r1, &why), LEDGER_OK, "%s: at the cap", what);
	tap_is_int(ledger_reserve(s, USD(1), &r2, &why), LEDGER_REFUSED,
		   "%s: exhausted", what);
	tap_is_int(ledger_set_cap(admin, "capped", USD(2)), LEDGER_OK,
		   "%s: the owner raises the cap", what);
	tap_is_int(ledger_reserve(s, USD(1), &r2, &why), LEDGER_OK,
		   "%s: the next reservation sees it", what);
	tap_is_int(ledger_set_cap(admin, "capped", USD(1)), LEDGER_OK,
		   "%s: lowered below what is reserved", what);
	tap_is_int(ledger_reserve(s, 0, &r2, &why), LEDGER_REFUSED,
		   "%s: then even nothing more fits", what);
	tap_is_int(ledger_set_cap(admin, "capped", LEDGER_NO_CAP), LEDGER_OK,
		   "%s: no cap", what);
	tap_is_int(ledger_reserve(s, USD(1000), &r2, &why), LEDGER_OK,
		   "%s: anything fits without a cap", what);
	tap_is_int(ledger_set_cap(admin, "no-such", USD(1)), LEDGER_NOT_FOUND,
		   "%s: the cap of an unknown session", what);
	tap_is_int(ledger_set_cap(admin, "capped", -7), LEDGER_INVALID,
		   "%s: a negative cap", what);
	if (admin != l)
		ledger_close(admin);
	ledger_close(l);
}

/* ------------------------------------------------------------------ */
/* SQLite specifics                                                   */
/* ------------------------------------------------------------------ */

static void test_sqlite_open(void)
{
	struct ledger_options create = { .create = true };
	struct ledger *l = NULL;
	char err[256], *spec, *path;
	struct stat st;
	sqlite3 *db = NULL;

	spec = util_xasprintf("sqlite:%s/new.db", dir);
	path = spec + 7;
	tap_is_int(ledger_open(spec, NULL, &l, err, sizeof(err)), LEDGER_ERROR,
		   "a missing file is not created without create");
	tap_ok(strstr(err, "new.db") != NULL, "the error names the file: %s", err);
	tap_ok(stat(path, &st) != 0, "and nothing was created");
	tap_is_int(ledger_open(spec, &create, &l, err, sizeof(err)), LEDGER_OK,
		   "created with create");
	tap_is_str(ledger_backend(l), "sqlite", "the sqlite backend");
	ledger_close(l);
	tap_ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
	       "the file is 0600 (mode %o)", (unsigned)(st.st_mode & 0777));
	tap_is_int(ledger_open(spec, NULL, &l, err, sizeof(err)), LEDGER_OK,
		   "it opens without create now");
	ledger_close(l);

	/* A newer schema is refused, not guessed at. */
	ASSERT(sqlite3_open(path, &db) == SQLITE_OK);
	ASSERT(sqlite3_exec(db, "UPDATE airlock_meta SET value = '99' WHERE key = "
			    "'schema_version'", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	tap_is_int(ledger_open(spec, &create, &l, err, sizeof(err)), LEDGER_ERROR,
		   "a schema newer than this airlock is refused");
	tap_ok(strstr(err, "version 99") && strstr(err, "upgrade airlock"),
	       "and says so: %s", err);
	free(spec);

	spec = util_xasprintf("sqlite:%s/empty.db", dir);
	ASSERT(sqlite3_open(spec + 7, &db) == SQLITE_OK);
	ASSERT(sqlite3_exec(db, "CREATE TABLE other (x)", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	tap_is_int(ledger_open(spec, NULL, &l, err, sizeof(err)), LEDGER_ERROR,
		   "a database without the schema is not a ledger without create");
	free(spec);

	tap_is_int(ledger_open("sqlite:", &create, &l, err, sizeof(err)),
		   LEDGER_INVALID, "sqlite: without a path");
	tap_is_int(ledger_open("mysql://x", &create, &l, err, sizeof(err)),
		   LEDGER_INVALID, "an unknown backend");
	tap_ok(strstr(err, "sqlite:PATH") != NULL, "the error lists the backends: %s", err);
	tap_is_int(ledger_open("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
			       &create, &l, err, sizeof(err)), LEDGER_ERROR,
		   "an unreachable PostgreSQL is an error");
	tap_ok(strstr(err, "hunter2") == NULL, "the error holds no password: %s", err);
	tap_ok(ledger_sqlite_path("sqlite:/a/b") && strcmp(ledger_sqlite_path("sqlite:/a/b"),
							   "/a/b") == 0 &&
	       ledger_sqlite_path("postgresql://x") == NULL &&
	       ledger_sqlite_path(NULL) == NULL, "ledger_sqlite_path");
}

static void test_redact(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "postgresql://u:secret@db.example/spend",
		  "postgresql://u:***@db.example/spend" },
		{ "postgres://u:p%40ss@db/x?sslmode=require",
		  "postgres://u:***@db/x?sslmode=require" },
		{ "postgresql://u@db/x?password=pw&sslmode=require",
		  "postgresql://u@db/x?password=***&sslmode=require" },
		{ "postgresql://db/x?sslmode=require&password=pw",
		  "postgresql://db/x?sslmode=require&password=***" },
		{ "postgresql:///x?host=/tmp/s", "postgresql:///x?host=/tmp/s" },
		{ "sqlite:/var/lib/a:b@c", "sqlite:/var/lib/a:b@c" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char *r = ledger_redact(cases[i].in);

		tap_is_str(r, cases[i].out, "redact %s", cases[i].in);
		free(r);
	}
}

static void test_default_spec(void)
{
	char *s;

	setenv("XDG_STATE_HOME", "/state", 1);
	s = ledger_default_spec();
	tap_is_str(s, "sqlite:/state/airlock/spend.db", "the default under XDG_STATE_HOME");
	free(s);
	unsetenv("XDG_STATE_HOME");
	setenv("HOME", "/home/u", 1);
	s = ledger_default_spec();
	tap_is_str(s, "sqlite:/home/u/.local/state/airlock/spend.db",
		   "the default under HOME");
	free(s);
}

/* ------------------------------------------------------------------ */
/* Processes                                                          */
/* ------------------------------------------------------------------ */

#define WORKERS 8
#define TRIES 5

/* A worker: opens its own session under @root, waits for the start,
 * tries TRIES reservations of @amount and holds the successful ones,
 * reports how many on @out, waits again, settles each at @amount and
 * closes. Exits 0 when every call answered as a ledger should. */
static void worker(const char *spec, int n, int64_t amount, int go, int out, int go2)
{
	struct ledger *l = NULL;
	struct ledger_session *s = NULL;
	struct ledger_refusal why;
	int64_t rid[TRIES];
	char id[32], c;
	int got = 0, i, bad = 0;
	unsigned char msg;

	snprintf(id, sizeof(id), "worker-%d", n);
	if (ledger_open(spec, NULL, &l, NULL, 0) != LEDGER_OK ||
	    ledger_session_open(l, id, "pool", LEDGER_NO_CAP, &s) != LEDGER_OK) {
		/* Both messages, so that the parent never waits for them. */
		msg = 0xff;
		(void)!write(out, &msg, 1);
		(void)!write(out, &msg, 1);
		_exit(2);
	}
	msg = 0;
	if (write(out, &msg, 1) != 1 || read(go, &c, 1) != 0)
		_exit(3);
	for (i = 0; i < TRIES; i++) {
		enum ledger_status st = ledger_reserve(s, amount, &rid[got], &why);

		if (st == LEDGER_OK)
			got++;
		else if (st != LEDGER_REFUSED || strcmp(why.session, "pool") != 0)
			bad++;
	}
	msg = (unsigned char)got;
	if (write(out, &msg, 1) != 1 || read(go2, &c, 1) != 0)
		_exit(3);
	for (i = 0; i < got; i++)
		bad += ledger_settle(s, rid[i], amount, NULL) != LEDGER_OK;
	bad += ledger_session_close(s, NULL) != LEDGER_OK;
	ledger_close(l);
	_exit(bad ? 1 : 0);
}

static void test_processes(void)
{
	char *spec = util_xasprintf("sqlite:%s/procs.db", dir);
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	int64_t amount = 1000003, cap = 13 * amount + amount / 2;
	int go[2], go2[2], res[2], i, total = 0, ok_exits = 0, status;
	pid_t pids[WORKERS];
	unsigned char msg;
	struct ledger_row r;

	tap_is_int(ledger_create(l, "pool", NULL, cap), LEDGER_OK, "a pool of 13.5 amounts");
	ASSERT(pipe(go) == 0 && pipe(go2) == 0 && pipe(res) == 0);
	for (i = 0; i < WORKERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0) {
			close(go[1]);
			close(go2[1]);
			close(res[0]);
			worker(spec, i, amount, go[0], res[1], go2[0]);
		}
	}
	close(go[0]);
	close(go2[0]);
	close(res[1]);
	for (i = 0; i < WORKERS; i++)
		ASSERT(read(res[0], &msg, 1) == 1);
	close(go[1]); /* everyone at once */
	for (i = 0; i < WORKERS; i++) {
		ASSERT(read(res[0], &msg, 1) == 1);
		total += msg == 0xff ? 100 : msg;
	}
	tap_is_int(total, 13, "%d processes x %d tries: exactly the 13 reservations "
		   "the cap allows succeed", WORKERS, TRIES);
	r = row_of(l, "pool");
	tap_ok(r.t.reserved == 13 * amount && r.t.spent == 0 &&
	       r.t.reserved <= cap, "the pool holds 13 reservations, within its cap");
	tap_is_int(r.reservations, 0, "the reservations belong to the workers' sessions");
	close(go2[1]);
	for (i = 0; i < WORKERS; i++) {
		ASSERT(waitpid(pids[i], &status, 0) == pids[i]);
		ok_exits += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	tap_is_int(ok_exits, WORKERS, "every worker got only ok and refused-by-pool");
	r = row_of(l, "pool");
	tap_ok(r.t.spent == 13 * amount && r.t.reserved == 0 && r.t.spent <= cap,
	       "settled: spent is 13 amounts, never above the cap");
	ledger_close(l);
	free(spec);
}

/* A reservation that has to wait for another writer decides on the rows
 * as that writer left them: it takes the write lock before it reads
 * (BEGIN IMMEDIATE), where a read first would see the rows from before
 * and then fail to write. */
static void test_waits_for_writer(void)
{
	char *spec = util_xasprintf("sqlite:%s/wait.db", dir);
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	int ready[2], go[2], status;
	sqlite3 *db = NULL;
	pid_t pid;
	char c = 0;

	tap_is_int(ledger_create(l, "w", NULL, USD(10)), LEDGER_OK, "a 10 USD tree");
	ledger_close(l);
	ASSERT(pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct ledger *cl = NULL;
		struct ledger_session *cs = NULL;
		enum ledger_status st;
		int64_t rid;

		close(ready[0]);
		close(go[1]);
		if (ledger_open(spec, &o, &cl, NULL, 0) != LEDGER_OK ||
		    ledger_session_open(cl, "waiter", "w", LEDGER_NO_CAP, &cs) != LEDGER_OK ||
		    write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		st = ledger_reserve(cs, USD(5), &rid, NULL);
		_exit(st == LEDGER_REFUSED ? 0 : st == LEDGER_OK ? 1 : 2);
	}
	close(ready[1]);
	close(go[0]);
	ASSERT(read(ready[0], &c, 1) == 1);
	/* Another writer holds the lock while it reserves 8 of the 10. */
	ASSERT(sqlite3_open(spec + 7, &db) == SQLITE_OK);
	ASSERT(sqlite3_exec(db, "BEGIN IMMEDIATE; UPDATE airlock_sessions SET reserved "
			    "= reserved + 8000000000 WHERE id = 'w'", NULL, NULL,
			    NULL) == SQLITE_OK);
	ASSERT(write(go[1], &c, 1) == 1);
	{
		struct timespec ts = { 0, 300000000 };

		nanosleep(&ts, NULL);
	}
	ASSERT(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
	ASSERT(waitpid(pid, &status, 0) == pid);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "a reservation waiting for the writer sees its 8 and refuses 5 "
	       "(status %d: 1 overshot, 2 failed)", WEXITSTATUS(status));
	ASSERT(sqlite3_exec(db, "UPDATE airlock_sessions SET reserved = reserved - "
			    "8000000000 WHERE id = 'w'", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	close(ready[0]);
	close(go[1]);
	free(spec);
}

/* A holder that dies with a reservation, and one that goes silent. */
static void test_crash_and_lease(void)
{
	char *spec = util_xasprintf("sqlite:%s/crash.db", dir);
	struct ledger_options o = { .create = true, .lease_seconds = 1 };
	struct ledger *l = open_or_die(spec, &o);
	struct ledger_session *s = NULL;
	struct ledger_row r;
	int status, sync[2];
	pid_t pid;
	char c;

	tap_is_int(ledger_create(l, "tree", NULL, USD(10)), LEDGER_OK, "a tree");

	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct ledger *cl = NULL;
		struct ledger_session *cs = NULL;
		int64_t rid;

		if (ledger_open(spec, &o, &cl, NULL, 0) != LEDGER_OK ||
		    ledger_session_open(cl, "crasher", "tree", LEDGER_NO_CAP, &cs) != LEDGER_OK ||
		    ledger_reserve(cs, USD(7), &rid, NULL) != LEDGER_OK)
			_exit(2);
		_exit(0); /* no settle, no close: a crash */
	}
	ASSERT(waitpid(pid, &status, 0) == pid);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a holder reserved 7 and died");
	r = row_of(l, "crasher");
	tap_ok(r.t.reserved == USD(7) && r.holders == 1,
	       "its reservation is still there (lease %u s)", o.lease_seconds);
	s = sess(l, "after-crash", "tree", LEDGER_NO_CAP);
	r = row_of(l, "crasher");
	tap_ok(r.t.reserved == 0 && r.t.own_spent == USD(7) && r.holders == 0 &&
	       r.reservations == 0,
	       "the next open in the tree charged it in full and forgot the holder");
	r = row_of(l, "tree");
	tap_ok(r.t.spent == USD(7) && r.t.reserved == 0, "the tree's row agrees");
	tap_is_int(ledger_session_close(s, NULL), LEDGER_OK, "closed");

	/* A holder that stops (alive, silent past its lease): its
	 * reservation is charged, and corrected when it settles after all. */
	ASSERT(pipe(sync) == 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct ledger *cl = NULL;
		struct ledger_session *cs = NULL;
		int64_t rid;
		struct ledger_totals t;

		close(sync[0]);
		if (ledger_open(spec, &o, &cl, NULL, 0) != LEDGER_OK ||
		    ledger_session_open(cl, "sleeper", "tree", LEDGER_NO_CAP, &cs) != LEDGER_OK ||
		    ledger_reserve(cs, USD(2), &rid, NULL) != LEDGER_OK)
			_exit(2);
		c = 'r';
		if (write(sync[1], &c, 1) != 1)
			_exit(3);
		kill(getpid(), SIGSTOP);
		if (ledger_settle(cs, rid, USD(1), &t) != LEDGER_OK)
			_exit(4);
		_exit(t.own_spent == USD(1) && t.reserved == 0 ? 0 : 5);
	}
	close(sync[1]);
	ASSERT(read(sync[0], &c, 1) == 1);
	close(sync[0]);
	ASSERT(waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status));
	{
		struct timespec ts = { 2, 500000000 };

		nanosleep(&ts, NULL); /* past the 1 s lease, in whole seconds */
	}
	s = sess(l, "after-lease", "tree", LEDGER_NO_CAP);
	tap_ok(s != NULL, "a session opens in the tree");
	r = row_of(l, "sleeper");
	tap_ok(r.t.reserved == 0 && r.t.own_spent == USD(2) && r.reservations == 1,
	       "a holder silent past its lease has its reservation charged in full");
	kill(pid, SIGCONT);
	ASSERT(waitpid(pid, &status, 0) == pid);
	tap_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "the silent holder settles after all (status %d)", WEXITSTATUS(status));
	r = row_of(l, "sleeper");
	tap_ok(r.t.own_spent == USD(1) && r.t.reserved == 0 && r.reservations == 0,
	       "and its charge is corrected to the real cost");
	r = row_of(l, "tree");
	tap_ok(r.t.spent == USD(8) && r.t.reserved == 0, "the tree: 7 + 1");
	ledger_close(l);
	free(spec);
}

/* Group commit: reservations made together are checked one after the
 * other, as if made one by one. */
static void test_batch(const char *spec, const char *what)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	struct ledger_session *root = sess(l, "broot", NULL, USD(100));
	struct ledger_session *s = sess(l, "bkid", "broot", USD(80));
	struct ledger_refusal whys[LEDGER_BATCH_MAX];
	enum ledger_status st[LEDGER_BATCH_MAX];
	int64_t rids[LEDGER_BATCH_MAX];
	bool overs[LEDGER_BATCH_MAX];
	int64_t a[] = { USD(30), USD(40), USD(20), USD(10), -1, USD(10), 0 };
	struct ledger_row r;
	size_t k;

	tap_is_int(ledger_reserve_batch(s, ARRAY_SIZE(a), a, false, st, rids, whys,
					overs), LEDGER_OK, "%s: a batch of 7 runs", what);
	tap_ok(st[0] == LEDGER_OK && st[1] == LEDGER_OK && st[2] == LEDGER_REFUSED &&
	       st[3] == LEDGER_OK && st[4] == LEDGER_INVALID && st[5] == LEDGER_REFUSED &&
	       st[6] == LEDGER_OK,
	       "%s: 30 + 40 fit the kid's 80, 20 more does not, 10 does, then the cap "
	       "(%d %d %d %d %d %d %d)", what, st[0], st[1], st[2], st[3], st[4], st[5],
	       st[6]);
	tap_ok(strcmp(whys[2].session, "bkid") == 0 && whys[2].cap == USD(80) &&
	       whys[2].reserved == USD(70) && whys[2].amount == USD(20),
	       "%s: a refusal counts the batch's reservations before it", what);
	tap_ok(rids[0] > 0 && rids[1] > rids[0] && rids[3] > rids[1] && rids[6] > rids[3] &&
	       rids[2] == -1, "%s: the ones made have ids, in order", what);
	r = row_of(l, "broot");
	tap_ok(r.t.reserved == USD(80), "%s: the root holds the 80 reserved", what);
	r = row_of(l, "bkid");
	tap_ok(r.t.reserved == USD(80) && r.reservations == 4,
	       "%s: the kid too, in 4 reservations (%u)", what, r.reservations);
	for (k = 0; k < ARRAY_SIZE(a); k++)
		if (st[k] == LEDGER_OK)
			ASSERT(ledger_settle(s, rids[k], a[k], NULL) == LEDGER_OK);
	/* spent 80 of the kid's 80: in shadow mode the batch is made anyway */
	tap_is_int(ledger_reserve_batch(s, 2, a, true, st, rids, whys, overs),
		   LEDGER_OK, "%s: shadow: a batch past the cap", what);
	tap_ok(st[0] == LEDGER_OK && overs[0] && st[1] == LEDGER_OK && overs[1] &&
	       rids[0] > 0 && rids[1] > 0, "%s: made, and said to be over", what);
	ASSERT(ledger_release(s, rids[0]) == LEDGER_OK &&
	       ledger_release(s, rids[1]) == LEDGER_OK);
	tap_is_int(ledger_reserve_batch(s, 1, a, false, st, rids, whys, overs),
		   LEDGER_OK, "%s: a batch where nothing fits runs", what);
	tap_ok(st[0] == LEDGER_REFUSED && rids[0] == -1, "%s: and makes nothing", what);
	r = row_of(l, "bkid");
	tap_ok(r.t.spent == USD(80) && r.t.reserved == 0 && r.reservations == 0,
	       "%s: the tree's rows as made one by one", what);
	(void)root;
	ledger_close(l);
}

/* Group commit of settlements: made together, each as if made one by
 * one, a reservation settled twice in a batch or not this session's
 * refused, the totals after each one given. */
static void test_settle_batch(const char *spec, const char *what)
{
	struct ledger_options o = { .create = true };
	struct ledger *l = open_or_die(spec, &o);
	struct ledger_session *root = sess(l, "sroot", NULL, USD(100));
	struct ledger_session *s = sess(l, "skid", "sroot", USD(80));
	struct ledger_refusal whys[3];
	enum ledger_status st[5];
	struct ledger_totals after[5];
	int64_t a[] = { USD(30), USD(20), USD(10) }, rids[3], settle[5], costs[5];
	bool overs[3];
	struct ledger_row r;

	ASSERT(ledger_reserve_batch(s, 3, a, false, st, rids, whys, overs) == LEDGER_OK &&
	       st[0] == LEDGER_OK && st[1] == LEDGER_OK && st[2] == LEDGER_OK);
	settle[0] = rids[0], costs[0] = USD(25);
	settle[1] = rids[1], costs[1] = USD(35); /* an overrun */
	settle[2] = rids[0], costs[2] = USD(1);  /* settled already, in this batch */
	settle[3] = rids[2] + 1000, costs[3] = USD(1);
	settle[4] = rids[2], costs[4] = -1;
	tap_is_int(ledger_settle_batch(s, 5, settle, costs, st, after), LEDGER_OK,
		   "%s: a batch of 5 settlements runs", what);
	tap_ok(st[0] == LEDGER_OK && st[1] == LEDGER_OK && st[2] == LEDGER_NOT_FOUND &&
	       st[3] == LEDGER_NOT_FOUND && st[4] == LEDGER_INVALID,
	       "%s: two made; a second settlement of one, another's id and a bad cost "
	       "refused (%d %d %d %d %d)", what, st[0], st[1], st[2], st[3], st[4]);
	tap_ok(after[0].own_spent == USD(25) && after[0].spent == USD(25) &&
	       after[0].reserved == USD(30) && after[0].cap == USD(80) &&
	       after[1].own_spent == USD(60) && after[1].spent == USD(60) &&
	       after[1].reserved == USD(10),
	       "%s: the totals after each one, in order", what);
	r = row_of(l, "skid");
	tap_ok(r.t.spent == USD(60) && r.t.own_spent == USD(60) && r.t.reserved == USD(10) &&
	       r.reservations == 1, "%s: the session's row as settled one by one", what);
	r = row_of(l, "sroot");
	tap_ok(r.t.spent == USD(60) && r.t.reserved == USD(10),
	       "%s: and the root's", what);
	tap_is_int(ledger_settle(s, rids[0], USD(1), NULL), LEDGER_NOT_FOUND,
		   "%s: a settled reservation stays settled", what);
	settle[0] = rids[0], costs[0] = USD(1);
	tap_is_int(ledger_settle_batch(s, 1, settle, costs, st, NULL), LEDGER_OK,
		   "%s: a batch with nothing to settle runs", what);
	r = row_of(l, "skid");
	tap_ok(st[0] == LEDGER_NOT_FOUND && r.t.spent == USD(60) && r.reservations == 1,
	       "%s: and changes nothing", what);
	tap_is_int(ledger_settle(s, rids[2], USD(10), NULL), LEDGER_OK,
		   "%s: the last one settles alone", what);
	r = row_of(l, "sroot");
	tap_ok(r.t.spent == USD(70) && r.t.reserved == 0, "%s: 25 + 35 + 10", what);
	(void)root;
	ledger_close(l);
}

int main(void)
{
	char *spec;

	/* Every wait below is bounded by the pipes and timeouts it uses;
	 * this bounds the whole run too, should a child hang. */
	alarm(300);
	ASSERT(mkdtemp(dir) != NULL);
	test_basics(NULL, "memory");
	test_tree(NULL, "memory");
	test_set_cap(NULL, "memory");
	test_batch(NULL, "memory");
	spec = util_xasprintf("sqlite:%s/batch.db", dir);
	test_batch(spec, "sqlite");
	free(spec);
	test_settle_batch(NULL, "memory");
	spec = util_xasprintf("sqlite:%s/settle.db", dir);
	test_settle_batch(spec, "sqlite");
	free(spec);
	spec = util_xasprintf("sqlite:%s/a.db", dir);
	test_basics(spec, "sqlite");
	free(spec);
	spec = util_xasprintf("sqlite:%s/tree.db", dir);
	test_tree(spec, "sqlite");
	free(spec);
	spec = util_xasprintf("sqlite:%s/cap.db", dir);
	test_set_cap(spec, "sqlite");
	free(spec);
	test_sqlite_open();
	test_redact();
	test_default_spec();
	test_processes();
	test_waits_for_writer();
	test_crash_and_lease();
	{
		char *cmd = util_xasprintf("rm -rf '%s'", dir);

		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
		free(cmd);
	}
	return tap_done();
}
