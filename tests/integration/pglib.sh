# pglib.sh - a PostgreSQL server of the test's own. Source it after lib.sh.
#
#   pg_start MAX_CONNECTIONS   makes PGDIR (a directory in /tmp only the
#                              server and the test use) with a data
#                              directory, starts the server there on a unix
#                              socket only (no TCP listener, SCRAM
#                              passwords), exports PGPASSWORD; two tests:
#                              "initdb" and "a PostgreSQL server ..."
#   pg_stop                    stops it (immediate) and removes PGDIR
#   pg_usable                  whether this machine can run one (root,
#                              runuser, the postgresql package)
#
# The data directory is a copy of the one `make check` makes once per run
# ($AIRLOCK_TEST_FIXTURES/pg: tests/make-fixtures), else one that
# tests/make-fixtures makes for the test alone. Each test's server is its own: the tests run in parallel.
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PGDIR=""

pg_usable() {
	[ "$(id -u)" -eq 0 ] && [ -x "$PG_BIN/initdb" ] && id postgres >/dev/null 2>&1 &&
		runuser -u postgres -- true 2>/dev/null
}

pg_start() {
	PGDIR=$(mktemp -d /tmp/airlock-pg.XXXXXX)
	chmod 0711 "$PGDIR"
	chown postgres "$PGDIR"
	_fx=${AIRLOCK_TEST_FIXTURES:-}/pg
	_what="a copy of this run's"
	if [ -z "${AIRLOCK_TEST_FIXTURES:-}" ] || [ ! -s "$_fx/pw" ] || [ ! -d "$_fx/data" ]; then
		# no run made one (the file run alone): one of the test's own
		_fx=$T/fixtures/pg
		_what="this test's own"
		"$AIRLOCK_SRC/tests/make-fixtures" "$T/fixtures" >"$T/initdb.log" 2>&1
	fi
	PW=$(cat "$_fx/pw" 2>/dev/null)
	cp -a "$_fx/data" "$PGDIR/data" && chown -R postgres "$PGDIR/data"
	ok $? "initdb ($_what data directory)"
	runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 30 \
		-o "-c listen_addresses= -k $PGDIR -c max_connections=$1" start >/dev/null 2>&1
	ok $? "a PostgreSQL server listening on a unix socket only"
	export PGPASSWORD=$PW
}

pg_stop() {
	if [ -n "$PGDIR" ] && [ -d "$PGDIR" ]; then
		runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m immediate \
			-w -t 20 stop >/dev/null 2>&1
		rm -rf "$PGDIR"
	fi
}
