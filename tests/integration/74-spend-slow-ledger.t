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
           "cap_usd": 100, "ledger": "%s", "ledger_timeout_ms": 60000}}\n' \
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
printf '{"model":"claude-sonnet-4-5","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WS/a.json"

# call NAME: one metered call on a connection of its own: NAME.code
call() {
	curl -sS --max-time 120 -o "$T/$1.body" -w '%{http_code}' --proxy "http://127.0.0.1:$PORT" \
		--cacert "$T/proxy-ca.pem" -H 'X-Llm-Script: slow' -H 'content-type: application/json' \
		--data-binary @"$WS/a.json" https://api.anthropic.com/v1/messages \
		>"$T/$1.code" 2>"$T/$1.err"
}
# queued: bytes the ledger process has not read yet from its channels
queued() {
	ss -xpH 2>/dev/null | awk '/"airlock-ledger"/ { s += $3 } END { print s + 0 }'
}
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

# 1. Reservations: the ledger is locked, N calls start on connections of
# their own (the four workers take them) and queue behind it.
lock reserve-lock
ok $? "another process holds the ledger locked"
cpids=()
for i in $(seq 1 $N); do
	call "c$i" &
	cpids+=($!)
done
# the first reservation is in the locked transaction; the others wait
# (a RESERVE is 16 bytes)
want=$(((N - 1) * 16))
for ((i = 0; i < 600; i++)); do
	[ "$(queued)" -ge "$want" ] && break
	sleep 0.05
done
q=$(queued)
[ "$q" -ge "$want" ]; ok $? "the other $((N - 1)) reservations queue at the ledger ($q bytes)"
[ ! -s "$T/c1.code" ] && [ "$(sl_requests)" -eq 0 ]
ok $? "no call went out while nothing could be reserved"
unlock
for ((i = 0; i < 600; i++)); do
	[ "$(reservations)" = "$N" ] && break
	sleep 0.05
done
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
# a new metered call waits for its reservation
call late &
late=$!
# the settlements (over 100 bytes each: the model, the host, the reason)
# and the new reservation
want=$(((N - 1) * 100 + 16))
for ((i = 0; i < 600; i++)); do
	[ "$(queued)" -ge "$want" ] && break
	sleep 0.05
done
q=$(queued)
[ "$q" -ge "$want" ]; ok $? "the settlements and the new reservation queue ($q bytes)"
[ ! -s "$T/late.code" ]; ok $? "the new call waits for the ledger"
unlock
wait "$late"
is "$(cat "$T/late.code")" 200 "released: the new call is answered"
for ((i = 0; i < 600; i++)); do
	[ "$(reservations)" = 0 ] && break
	sleep 0.05
done
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
