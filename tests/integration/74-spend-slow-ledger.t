#!/bin/bash
# 74-spend-slow-ledger.t - a slow ledger serves the metered calls of every
# worker together (docs/SPEND.md, "Cost"): `airlock proxy --workers 4`
# with an SQLite ledger that another process holds locked (the slowest
# ledger there is: one that does not answer). The reservations, and the
# settlements, that queue behind the locked transaction are made
# together once it is released: not one transaction per call. Meanwhile
# the calls already reserved are answered and a call the ledger has
# nothing to do with goes through.
#
# Nothing here depends on how fast the machine is: the ledger reads every
# message that has arrived before it starts a transaction, so a message
# counts as queued behind the lock only once the ledger is seen waiting
# for the lock (in SQLite's busy sleep); every wait is bounded by a
# deadline well inside the ledger's own timeout.
#
# The ledger's transactions are counted in the ledger itself: triggers
# log every reservation made or settled and every lease renewal, which
# each money transaction does once, last (src/ledger.c); a transaction
# is a run of entries ending in a renewal. Nothing here is timed: each
# step waits (bounded) for the state the next one needs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/spendlib.sh"

WS="$T/ws"
mkdir "$WS"
N=8
PORT=18480
# each stream lasts 20 x 0.25 s: the lock is taken while they run
sl_start '{"slow": {"usage": {"input": 100, "output": 20}, "chunks": 20, "delay_ms": 250}}'
DB="$T/ledger.db"
L="sqlite:$DB"

"$AIRLOCK" spend set --ledger "$L" other --cap 1 >/dev/null
ok $? "the ledger is created"
sqlite3 "$DB" "CREATE TABLE t_log (id INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT);
CREATE TRIGGER t_res AFTER INSERT ON airlock_reservations
	BEGIN INSERT INTO t_log (what) VALUES ('reserve'); END;
CREATE TRIGGER t_set AFTER DELETE ON airlock_reservations
	BEGIN INSERT INTO t_log (what) VALUES ('settle'); END;
CREATE TRIGGER t_renew AFTER UPDATE ON airlock_holders
	BEGIN INSERT INTO t_log (what) VALUES ('renew'); END;"
ok $? "the counting triggers are in"

printf '{"version": 1, "mode": "enforce",
 "egress": {"allow": ["api.anthropic.com", "api.openai.com"],
            "allow_ranges": ["198.18.0.0/15"], "resolver": ["127.0.0.1:5353"],
            "upstream_ca": "%s"},
 "spend": {"providers": [{"api": "anthropic", "hosts": ["api.anthropic.com"]}],
           "prices": {"claude-sonnet-4-5*": {"input": 3, "output": 15}},
           "cap_usd": 100, "ledger": "%s", "ledger_timeout_ms": 240000}}\n' \
	"$SL_CA" "$L" >"$T/policy.json"
"$AIRLOCK" proxy --policy "$T/policy.json" --listen 127.0.0.1:$PORT --workers 4 \
	--session slowtest --events "$T/ev.jsonl" --ca-out "$T/proxy-ca.pem" \
	>/dev/null 2>"$T/proxy.err" &
PX=$!
SL_PIDS="$SL_PIDS $PX"
for ((i = 0; i < 300; i++)); do
	grep -q listening "$T/proxy.err" 2>/dev/null && break
	sleep 0.1
done
like "$(cat "$T/proxy.err")" "listening" "the proxy runs, four workers"
LPID=$(pgrep -P "$PX" -x airlock-ledger | head -1)
printf '{"model":"claude-sonnet-4-5","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WS/a.json"

# call NAME: one metered call on a connection of its own: NAME.code
call() {
	curl -sS --max-time 300 -o "$T/$1.body" -w '%{http_code}' --proxy "http://127.0.0.1:$PORT" \
		--cacert "$T/proxy-ca.pem" -H 'X-Llm-Script: slow' -H 'content-type: application/json' \
		--data-binary @"$WS/a.json" https://api.anthropic.com/v1/messages \
		>"$T/$1.code" 2>"$T/$1.err"
}
# queued: bytes this proxy's ledger process has not read yet from its
# channels
queued() {
	ss -xpH 2>/dev/null | awk -v p="pid=$LPID," 'index($0, p) { s += $3 } END { print s + 0 }'
}
# until SECONDS CMD...: runs CMD until it succeeds, for SECONDS at most
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.05
	done
}
# ledger_waits: the ledger is inside a transaction waiting for the lock
# (SQLite's busy handler sleeps: nanosleep or clock_nanosleep), not in
# its poll loop
ledger_waits() {
	local nr
	read -r nr _ <"/proc/$LPID/syscall" 2>/dev/null || return 1
	[ "$nr" = 35 ] || [ "$nr" = 230 ]
}
queued_ge() { [ "$(queued)" -ge "$1" ]; }
reservations_are() { [ "$(reservations)" = "$1" ]; }
# answered: how many metered calls the proxy recorded as answered (it
# records http.request in the same turn that sends the call's SETTLE)
answered() {
	[ -s "$T/ev.jsonl" ] || { echo 0; return; }
	jsel "$T/ev.jsonl" "len([e for e in L if e['type'] == 'http.request' and e['subject'].get('path') == '/v1/messages'])"
}
answered_ge() { [ "$(answered)" -ge "$1" ]; }
# reservations: how many the session holds
reservations() {
	"$AIRLOCK" spend show --ledger "$L" --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
print([s["reservations"] for s in j["sessions"] if s["session"] == "slowtest"][0])' 2>/dev/null
}
# lock MARKER / unlock: another process holds the ledger's write lock. The
# MARKER row it writes orders the log: the entries after it were made
# after the lock.
mkfifo "$T/lock.fifo"
lock() {
	sqlite3 "$DB" <"$T/lock.fifo" >"$T/lock.out" 2>&1 &
	LOCKPID=$!
	SL_PIDS="$SL_PIDS $LOCKPID"
	exec 7>"$T/lock.fifo"
	printf ".timeout 20000\nBEGIN IMMEDIATE;\nINSERT INTO t_log (what) VALUES ('%s');\nSELECT 'locked';\n" \
		"$1" >&7
	for ((i = 0; i < 300; i++)); do
		grep -q '^locked' "$T/lock.out" && return 0
		sleep 0.1
	done
	return 1
}
unlock() {
	printf 'COMMIT;\n.quit\n' >&7
	exec 7>&-
	wait "$LOCKPID"
}
# txns KIND MARKER: "TRANSACTIONS ENTRIES": the transactions after MARKER
# that made entries of KIND, and those entries
txns() {
	sqlite3 "$DB" "SELECT what FROM t_log WHERE id > (SELECT id FROM t_log WHERE what = '$2') ORDER BY id" |
		awk -v k="$1" '$1 == k { n++; seen = 1 } $1 == "renew" { if (seen) t++; seen = 0 }
			END { print t + 0, n + 0 }'
}

# 1. Reservations: the ledger is locked; a first call's reservation
# takes the ledger into a transaction that waits for the lock; N - 1 more
# calls start on connections of their own (the four workers take them)
# and their reservations queue behind it.
lock reserve-lock
ok $? "another process holds the ledger locked"
[ -n "$LPID" ] && [ -r "/proc/$LPID/syscall" ]
ok $? "the proxy's ledger process is found ($LPID)"
cpids=()
call c1 &
cpids+=($!)
until_ok 60 ledger_waits
ok $? "the first reservation waits for the lock"
for i in $(seq 2 $N); do
	call "c$i" &
	cpids+=($!)
done
# a RESERVE is 16 bytes
want=$(((N - 1) * 16))
until_ok 60 queued_ge "$want"
ok $? "the other $((N - 1)) reservations queue at the ledger ($(queued) bytes)"
[ ! -s "$T/c1.code" ] && [ "$(sl_requests)" -eq 0 ]
ok $? "no call went out while nothing could be reserved"
unlock
until_ok 60 reservations_are "$N"
is "$(reservations)" "$N" "released: all $N reserved, their streams running"
read -r t n <<<"$(txns reserve reserve-lock)"
is "$n" "$N" "the $N reservations were made after the lock"
[ "$t" -ge 1 ] && [ "$t" -le 2 ]; ok $? "in at most two transactions ($t): the locked one, then the rest together"

# 2. Settlements: the ledger is locked again while the streams run; each
# call ends (its client has its answer: a settlement does not hold it
# back) and its settlement queues.
lock settle-lock
ok $? "the ledger is locked again"
for p in "${cpids[@]}"; do wait "$p"; done
codes=$(cat "$T"/c*.code | tr -d '\n')
is "$codes" "$(printf '200%.0s' $(seq 1 $N))" "every call answered 200 while the ledger is locked"
is "$(sl_requests)" "$N" "and reached the provider"
# a call the ledger has nothing to do with goes through meanwhile
code=$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' --proxy "http://127.0.0.1:$PORT" \
	--cacert "$SL_CA" https://api.openai.com/v1/models 2>"$T/o.err")
like "$code" '^[1-5][0-9][0-9]$' "an unmetered call through the same proxy is answered ($code)"
# every call's SETTLE is sent (each call is recorded as answered), and
# the ledger is inside the transaction of the first, waiting for the lock
until_ok 60 answered_ge "$N"
ok $? "the proxy recorded the $N calls answered: their settlements are sent"
until_ok 60 ledger_waits
ok $? "the first settlement waits for the lock"
# a new metered call waits for its reservation, which queues behind it
call late &
late=$!
until_ok 60 queued_ge 16
ok $? "the new reservation queues behind the settlements ($(queued) bytes)"
[ ! -s "$T/late.code" ]; ok $? "the new call waits for the ledger"
unlock
wait "$late"
is "$(cat "$T/late.code")" 200 "released: the new call is answered"
until_ok 60 reservations_are 0
is "$(reservations)" 0 "every reservation settled"
read -r t n <<<"$(txns settle settle-lock)"
is "$n" "$((N + 1))" "the $((N + 1)) settlements were made after the lock"
[ "$t" -ge 1 ] && [ "$t" -le 3 ]; ok $? "in at most three transactions ($t), not one per call"
out=$("$AIRLOCK" spend show --ledger "$L" --json)
is "$(jget "$out" "[s['spent_nano'] for s in j['sessions'] if s['session']=='slowtest'][0]")" \
	"$(((N + 1) * 600000))" "spent: $((N + 1)) calls of 100 input and 20 output tokens"

kill -TERM "$PX"
wait "$PX"
is $? 0 "the proxy stops cleanly"
done_testing
