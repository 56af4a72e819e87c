#!/bin/bash
# 70-spend-ledger.t - the spend ledger through `airlock spend` and
# processes that reserve and settle at once (tests/helpers/spend_tool),
# on SQLite and on a real PostgreSQL server started here; then the meter
# against the stand-in Anthropic and OpenAI APIs (tests/helpers/llm_api.py)
# over HTTPS, with exact costs computed by hand.
#
# Amounts given to spend_tool are nano-dollars (1e-9 USD).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pglib.sh"

TOOL=${AIRLOCK_HELPERS:?}/spend_tool
LLM="$AIRLOCK_SRC/tests/helpers/llm_api.py"
[ -x "$TOOL" ] || { echo "1..0 # SKIP spend_tool not built (make check builds it)"; exit 0; }

# jget JSON EXPR: a Python expression over j, the parsed JSON.
jget() {
	python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"
}
# row LEDGER SESSION FIELD: a field of the session's row in spend show --json
row() {
	local out
	out=$("$AIRLOCK" spend show --ledger "$1" --json "$2") || { echo "show-failed"; return; }
	jget "$out" "[s['$3'] for s in j['sessions'] if s['session']=='$2'][0]"
}

PIDS=()
PGDIR=""
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null
	done
	pg_stop
	rm -rf "$T"
}
trap cleanup EXIT

# wait_file PATH SECONDS
wait_file() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

USD=1000000000

# --------------------------------------------------------------- the CLI
"$AIRLOCK" spend --help | grep -q 'spend show' ; ok $? "spend --help"
"$AIRLOCK" spend show --help >/dev/null; ok $? "spend show --help"
"$AIRLOCK" spend set -h >/dev/null; ok $? "spend set -h"
"$AIRLOCK" help spend | grep -q 'spend set' ; ok $? "airlock help spend"
"$AIRLOCK" spend >/dev/null 2>&1; is $? 2 "spend without a subcommand is a usage error"
"$AIRLOCK" spend set --ledger "sqlite:$T/x.db" s >/dev/null 2>&1; is $? 2 "set without --cap"
for bad in 1e3 -1 5. .5 0.1234567891 1000000001 '$5' 5,0; do
	"$AIRLOCK" spend set --ledger "sqlite:$T/x.db" s --cap "$bad" >/dev/null 2>&1
	is $? 2 "--cap '$bad' is refused"
done
err=$("$AIRLOCK" spend show --ledger "sqlite:$T/none.db" 2>&1 >/dev/null); st=$?
is $st 1 "show of a ledger that does not exist fails"
like "$err" "none.db" "and names the file"
[ ! -e "$T/none.db" ]; ok $? "show creates nothing"
err=$("$AIRLOCK" spend show --ledger "mysql://x" 2>&1 >/dev/null); st=$?
is $st 1 "an unknown ledger kind fails"
like "$err" "sqlite:PATH" "naming the kinds there are"
HOME=$T/home XDG_STATE_HOME= "$AIRLOCK" spend set def --cap 1 >/dev/null
ok $? "without --ledger: the default ledger"
[ -f "$T/home/.local/state/airlock/spend.db" ]; ok $? "is ~/.local/state/airlock/spend.db"
out=$(HOME=$T/home XDG_STATE_HOME= "$AIRLOCK" spend show)
like "$out" "^SESSION .*CAP" "show prints a header"
like "$out" "def +- +1 " "and the session"
C="sqlite:$T/cli.db"
out=$("$AIRLOCK" spend set --ledger "$C" budget --cap 2.5)
is "$out" "budget: created, cap 2.5" "set creates a session that is not there, and the ledger"
out=$("$AIRLOCK" spend set --ledger "$C" team --cap none --parent budget)
is "$out" "team: created under budget, cap none" "under --parent"
out=$("$AIRLOCK" spend set --ledger "$C" budget --cap 3)
is "$out" "budget: cap 3 (was 2.5)" "set changes the cap of one that is there, saying what it was"
out=$("$AIRLOCK" spend set --ledger "$C" team --cap 0.000000001 --parent budget)
is "$out" "team: cap 0.000000001 (was none)" "a nano-dollar cap, exactly"
"$AIRLOCK" spend set --ledger "$C" team --cap 1 --parent other 2>/dev/null
is $? 1 "a --parent that is not the session's parent fails"
"$AIRLOCK" spend set --ledger "$C" kid --cap 1 --parent missing 2>/dev/null
is $? 1 "creating under a missing parent fails"
out=$("$AIRLOCK" spend show --ledger "$C" --json)
is "$(jget "$out" "[(s['session'], s['parent'], s['depth'], s['cap_nano'], s['cap_usd']) for s in j['sessions']]")" \
	"[('budget', None, 0, 3000000000, 3.0), ('team', 'budget', 1, 1, 1e-09)]" "show --json: the tree, its caps"

# ------------------------------------------------- the scenarios, per ledger

# scenario NAME LEDGER: everything below against one ledger.
scenario() {
	local name=$1 L=$2 i n out st amount cap

	# 1. Many processes at once against a cap that allows 13 reservations.
	amount=100000007
	cap=$((13 * amount + amount / 2))
	"$AIRLOCK" spend set --ledger "$L" pool --cap "$(python3 -c "print('%.9f' % ($cap / 1e9))")" >/dev/null
	ok $? "$name: a pool of 13.5 reservations"
	rm -f "$T/go" "$T/release" "$T"/done-* "$T"/w-*.out
	local wp=()
	for i in $(seq 1 12); do
		timeout 90 "$TOOL" ledger "$L" "w$name-$i" pool none touch:"$T/ready-$i" \
			wait:"$T/go" reserve:$amount reserve:$amount reserve:$amount \
			touch:"$T/done-$i" wait:"$T/release" settle-all:$amount \
			>"$T/w-$i.out" 2>&1 &
		wp+=($!)
	done
	for i in $(seq 1 12); do wait_file "$T/ready-$i" 30 || break; done
	touch "$T/go"
	for i in $(seq 1 12); do wait_file "$T/done-$i" 60 || break; done
	n=$(cat "$T"/w-*.out | grep -c '^reserve ok')
	is "$n" 13 "$name: 12 processes x 3 tries: exactly the 13 the cap allows succeed"
	n=$(cat "$T"/w-*.out | grep -c '^reserve refused pool$')
	is "$n" 23 "$name: the 23 others are refused, naming the pool"
	is "$(row "$L" pool reserved_nano)" $((13 * amount)) "$name: the pool holds 13 reservations"
	is "$(row "$L" pool reservations)" 0 "$name: held by the workers' rows"
	touch "$T/release"
	st=0
	for p in "${wp[@]}"; do wait "$p" || st=1; done
	is $st 0 "$name: every worker settled and closed"
	is "$(row "$L" pool spent_nano)" $((13 * amount)) "$name: spent is 13 reservations"
	is "$(row "$L" pool reserved_nano)" 0 "$name: nothing left reserved"
	rm -f "$T"/ready-*

	# 2. A tree of concurrent sessions under one root cap: org (10 USD)
	# > teams (t1: 6 USD, t2: none) > sessions (s1-s3 under t1, s1 and s2
	# with 2 USD; s4-s6 under t2). Each charges what it reserved, so any
	# lost update or race would show as spent above a cap.
	"$AIRLOCK" spend set --ledger "$L" org --cap 10 >/dev/null &&
	"$AIRLOCK" spend set --ledger "$L" t1 --cap 6 --parent org >/dev/null &&
	"$AIRLOCK" spend set --ledger "$L" t2 --cap none --parent org >/dev/null
	ok $? "$name: the tree org > t1, t2"
	rm -f "$T/go" "$T"/s-*.out
	wp=()
	for i in 1 2 3 4 5 6; do
		local parent=t1 scap=none steps=()
		[ "$i" -gt 3 ] && parent=t2
		[ "$i" -le 2 ] && scap=$((2 * USD))
		for n in $(seq 1 25); do
			amount=$(( (RANDOM % 40 + 10) * 10000000 ))  # 0.10 - 0.49 USD
			steps+=(reserve:$amount settle-all:$amount)
		done
		timeout 120 "$TOOL" ledger "$L" "s$name-$i" $parent $scap \
			touch:"$T/ready-$i" wait:"$T/go" "${steps[@]}" >"$T/s-$i.out" 2>&1 &
		wp+=($!)
	done
	for i in $(seq 1 6); do wait_file "$T/ready-$i" 30 || break; done
	touch "$T/go"
	st=0
	for p in "${wp[@]}"; do wait "$p" || st=1; done
	is $st 0 "$name: six sessions reserved and settled at once"
	out=$("$AIRLOCK" spend show --ledger "$L" --json org)
	jget "$out" "1 if (lambda r: r['org']['spent_nano'] <= 10*$USD and r['t1']['spent_nano'] <= 6*$USD
		and r['s$name-1']['spent_nano'] <= 2*$USD and r['s$name-2']['spent_nano'] <= 2*$USD
		and r['org']['reserved_nano'] == 0)({s['session']: s for s in j['sessions']}) else 0" \
		| grep -qx 1
	ok $? "$name: no cap of the tree was passed, nothing left reserved"
	jget "$out" "1 if (lambda r: r['org']['spent_nano'] == r['t1']['spent_nano'] + r['t2']['spent_nano']
		and r['t1']['spent_nano'] == sum(r['s$name-%d' % k]['own_spent_nano'] for k in (1,2,3))
		and r['t2']['spent_nano'] == sum(r['s$name-%d' % k]['own_spent_nano'] for k in (4,5,6)))(
		{s['session']: s for s in j['sessions']}) else 0" | grep -qx 1
	ok $? "$name: every row holds the sum of its subtree"
	n=$(cat "$T"/s-*.out | grep -c '^reserve refused')
	[ "$n" -gt 0 ]; ok $? "$name: the caps were reached ($n refusals)"
	is "$(cat "$T"/s-*.out | grep -c '^reserve ok')" "$(cat "$T"/s-*.out | grep -o '^settle-all ok [1-9]' | wc -l)" \
		"$name: each successful reservation was settled"
	out=$("$AIRLOCK" spend show --ledger "$L" org)
	like "$out" "
  t1 +org " "$name: show indents a child under its parent"
	like "$out" "
    s$name-1 +t1 +2 " "$name: and a grandchild under it, with its cap"
	rm -f "$T"/ready-*

	# 3. A cap changed live: blocked work resumes when it is raised.
	rm -f "$T/blocked" "$T/raised"
	timeout 60 "$TOOL" ledger "$L" "live$name" - $USD reserve:$((6 * USD / 10)) \
		settle-all:$((6 * USD / 10)) reserve:$((6 * USD / 10)) touch:"$T/blocked" \
		wait:"$T/raised" reserve:$((6 * USD / 10)) >"$T/live.out" 2>&1 &
	local lp=$!
	wait_file "$T/blocked" 30
	"$AIRLOCK" spend set --ledger "$L" "live$name" --cap 1.5 >/dev/null
	ok $? "$name: the owner raises the cap of a running session"
	touch "$T/raised"
	wait $lp; ok $? "$name: the running session went on"
	is "$(grep '^reserve' "$T/live.out" | cut -d' ' -f2 | tr '\n' ' ')" "ok refused ok " \
		"$name: refused at 1 USD, accepted after the raise to 1.5"
	is "$(row "$L" "live$name" cap_nano)" $((3 * USD / 2)) "$name: the ledger has the new cap"

	# 4. A missing parent refuses the session.
	out=$(timeout 30 "$TOOL" ledger "$L" "orphan$name" "no-such-parent" none 2>/dev/null)
	is "$out" "open no-parent" "$name: a session whose parent is not in the ledger is refused"
	out=$(timeout 30 "$TOOL" ledger "$L" "t1" "t2" none 2>/dev/null)
	is "$out" "open conflict" "$name: an existing session under another parent is refused"

	# 5. A session that dies holding a reservation.
	"$AIRLOCK" spend set --ledger "$L" "ct$name" --cap 1 >/dev/null
	out=$(timeout 30 "$TOOL" ledger "$L" "crash$name" "ct$name" none reserve:$((USD / 4)) crash)
	like "$out" "^reserve ok" "$name: a session reserved 0.25 and died"
	is "$(row "$L" "crash$name" reserved_nano)" $((USD / 4)) "$name: its reservation is still held"
	timeout 30 "$TOOL" ledger "$L" "next$name" "ct$name" none >/dev/null
	is "$(row "$L" "crash$name" reserved_nano)" 0 "$name: the next session of the tree released it"
	is "$(row "$L" "crash$name" own_spent_nano)" $((USD / 4)) "$name: by charging it in full"
	is "$(row "$L" "crash$name" holders)" 0 "$name: and forgot the dead holder"
}

scenario sqlite "sqlite:$T/spend.db"
mode=$(stat -c %a "$T/spend.db"); is "$mode" 600 "the SQLite ledger is 0600"

# ------------------------------------------------------------ PostgreSQL
if ! pg_usable; then
	echo "ok $((tap_n + 1)) # SKIP PostgreSQL needs root, runuser and the postgresql package"
	tap_n=$((tap_n + 1))
else
	# A server of our own: its data and socket in a directory only it
	# and we use, no TCP listener, password (SCRAM) authentication.
	pg_start 60
	psql -q -h "$PGDIR" -U airlock -d postgres -c 'CREATE DATABASE spend' >/dev/null 2>&1
	ok $? "a database for the ledger"
	PGL="postgresql:///spend?host=$PGDIR&user=airlock"

	# No password: a clear error, and no ledger.
	err=$(PGPASSWORD= "$AIRLOCK" spend show --ledger "$PGL" 2>&1 >/dev/null); st=$?
	is $st 1 "PostgreSQL without a password fails"
	like "$err" "password" "saying so"
	err=$("$AIRLOCK" spend show --ledger "$PGL" 2>&1 >/dev/null); st=$?
	is $st 1 "show before any session: no schema yet"
	like "$err" "no airlock ledger" "saying so"
	err=$("$AIRLOCK" spend show --ledger "postgresql://airlock:$PW@/spend?host=$PGDIR" 2>&1 >/dev/null)
	like "$err" "visible to other users" "a password in --ledger is warned about"
	case "$err" in *"$PW"*) ok 1 "and never printed" ;; *) ok 0 "and never printed" ;; esac

	scenario postgresql "$PGL"
	n=$(psql -qtA -h "$PGDIR" -U airlock -d spend -c \
		"SELECT value FROM airlock_meta WHERE key = 'schema_version'")
	is "$n" 1 "PostgreSQL: the schema is version 1"
	n=$(psql -qtA -h "$PGDIR" -U airlock -d spend -c "SELECT count(*) FROM airlock_reservations")
	is "$n" 0 "PostgreSQL: no reservation left behind"
	unset PGPASSWORD
fi

# -------------------------------------- the meter against the stand-in APIs
cat >"$T/llm.json" <<EOF
{"log": "$T/llm.log", "ready": "$T/llm.ready", "lifetime": 200,
 "listen": ["127.0.0.1:18443"],
 "tls": {"dir": "$T/tls", "names": ["api.anthropic.com", "api.openai.com"]},
 "scripts": {
   "cache": {"usage": {"input": 25, "output": 15, "cache_write": 100, "cache_read": 200},
             "deltas": 3},
   "slow": {"usage": {"input": 10, "output": 4}, "delay_ms": 150, "chunks": 4},
   "cut": {"usage": {"input": 25, "output": 15}, "cut_after": 5},
   "cutjson": {"cut_after": 40},
   "overloaded": {"status": 529},
   "midstream": {"error_after": 4},
   "chat": {"usage": {"input": 600, "output": 50, "cache_read": 400}},
   "resp": {"usage": {"input": 300, "output": 120}},
   "nousage": {"omit_usage": true}
 }}
EOF
python3 "$LLM" --config "$T/llm.json" >/dev/null 2>"$T/llm.err" &
PIDS+=($!)
wait_file "$T/llm.ready" 60; ok $? "the stand-in APIs are up"

CURL=(curl -sS --max-time 30 --cacert "$T/tls/ca.pem"
      --resolve api.anthropic.com:18443:127.0.0.1 --resolve api.openai.com:18443:127.0.0.1)
PRICES=(--price 'claude-sonnet-4-5*=3,15' --price 'gpt-4o=2.5,10,3.125,1.25')

# call API PATH SCRIPT BODY: sends BODY (rewritten by the meter as the
# proxy would) and meters the answer; prints the meter's JSON.
call() {
	local api=$1 path=$2 script=$3 host rc status ctype
	printf '%s' "$4" >"$T/req"
	"$TOOL" meter --api "$api" --path "$path" --request "$T/req" --rewrite "$T/fwd" \
		"${PRICES[@]}" >/dev/null
	[ "$api" = anthropic ] && host=api.anthropic.com || host=api.openai.com
	"${CURL[@]}" -D "$T/h" -o "$T/b" -H "X-Llm-Script: $script" \
		-H 'content-type: application/json' --data-binary @"$T/fwd" \
		"https://$host:18443$path" 2>/dev/null
	rc=$?
	status=$(head -1 "$T/h" | cut -d' ' -f2)
	ctype=$(grep -i '^content-type:' "$T/h" | head -1 | cut -d' ' -f2- | tr -d '\r')
	"$TOOL" meter --api "$api" --path "$path" --request "$T/req" --status "$status" \
		--ctype "$ctype" --response "$T/b" --complete $([ $rc -eq 0 ] && echo 1 || echo 0) \
		--seed $RANDOM "${PRICES[@]}"
}

A_STREAM='{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hi"}]}'
# its reservation: 105 bytes x 3750 + 1024 x 15000 = 393750 + 15360000
A_RES=15753750
out=$(call anthropic /v1/messages cache "$A_STREAM")
is "$(jget "$out" "j['reservation']")" $A_RES "anthropic: the reservation (105 x 3750 + 1024 x 15000)"
# 25 x 3000 + 100 x 3750 + 200 x 300 + 15 x 15000 (three cumulative deltas: 5, 10, 15)
is "$(jget "$out" "(j['outcome'], j['cost'], j['input'], j['output'], j['cache_write'], j['cache_read'])")" \
	"('usage', 735000, 25, 15, 100, 200)" "anthropic stream: cache writes and reads, the last delta"
out=$(call anthropic /v1/messages slow "$A_STREAM")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('usage', 90000)" \
	"anthropic slow stream: 10 x 3000 + 4 x 15000"
out=$(call anthropic /v1/messages cut "$A_STREAM")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('cut', $A_RES)" \
	"anthropic stream cut after 5 events: the whole reservation"
out=$(call anthropic /v1/messages midstream "$A_STREAM")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('cut', $A_RES)" \
	"anthropic stream with an error event: the whole reservation"
out=$(call anthropic /v1/messages overloaded "$A_STREAM")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('error', 0)" "anthropic 529: nothing"
A_JSON='{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}'
out=$(call anthropic /v1/messages cache "$A_JSON")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('usage', 735000)" "anthropic JSON answer"
out=$(call anthropic /v1/messages cutjson "$A_JSON")
# 90 x 3750 + 100 x 15000
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('cut', 1837500)" \
	"anthropic JSON cut after 40 bytes: the reservation (90 x 3750 + 100 x 15000)"
out=$(call anthropic /v1/messages nousage "$A_JSON")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('no_usage', 1837500)" \
	"anthropic 200 without usage: the reservation"
out=$(call anthropic /v1/messages/count_tokens cache "$A_JSON")
is "$(jget "$out" "j['route']")" "unmetered" \
	"count_tokens is not metered (unmetered: the default spend.pass lets it through)"

O_STREAM='{"model":"gpt-4o","stream":true,"max_completion_tokens":64,"messages":[{"role":"user","content":"Hi"}]}'
out=$(call openai /v1/chat/completions chat "$O_STREAM")
is "$(jget "$out" "j['rewritten']")" True "openai chat stream: the body asks for usage"
# (1000 - 400) x 2500 + 400 x 1250 + 50 x 10000
is "$(jget "$out" "(j['outcome'], j['cost'], j['input'], j['cache_read'])")" \
	"('usage', 2500000, 600, 400)" "openai chat stream: its usage chunk, cached tokens as reads"
python3 - "$T/llm.log" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if '"request"' in l]
last = [r for r in reqs if r.get("path") == "/v1/chat/completions"][-1]
sys.exit(0 if last["body"]["stream_options"] == {"include_usage": True} else 1)
EOF
ok $? "the stand-in received stream_options.include_usage: true"
# Without the rewrite the API sends no usage: such a stream is charged
# its reservation (103 x 3125 + 64 x 10000).
printf '%s' "$O_STREAM" >"$T/fwd"
"${CURL[@]}" -o "$T/b" -H "X-Llm-Script: chat" --data-binary @"$T/fwd" \
	https://api.openai.com:18443/v1/chat/completions
out=$("$TOOL" meter --api openai --path /v1/chat/completions --request "$T/fwd" --status 200 \
	--ctype text/event-stream --response "$T/b" "${PRICES[@]}")
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('cut', 961875)" \
	"an openai stream that reports no usage: the reservation"
out=$(call openai /v1/responses resp '{"model":"gpt-4o","stream":true,"input":"Hi","max_output_tokens":64}')
is "$(jget "$out" "(j['outcome'], j['cost'], j['rewritten'])")" "('usage', 1950000, False)" \
	"openai responses stream: response.completed (300 x 2500 + 120 x 10000)"
out=$(call openai /v1/chat/completions chat '{"model":"gpt-4o","messages":[],"max_tokens":64}')
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('usage', 2500000)" "openai chat JSON"
out=$(call openai /v1/completions chat '{"model":"gpt-4o","prompt":"x","max_tokens":64,"stream":true}')
is "$(jget "$out" "(j['outcome'], j['cost'])")" "('usage', 2500000)" "openai completions stream"
printf '%s' '{"model":"gpt-5","messages":[]}' >"$T/req"
out=$("$TOOL" meter --api openai --path /v1/chat/completions --request "$T/req" "${PRICES[@]}")
is "$(jget "$out" "(j.get('refused'), j.get('rule'))")" "(403, 'spend.prices')" \
	"an unpriced model is refused before anything is sent"
python3 - "$T/llm.log" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
reqs = [l for l in lines if l.get("event") == "request"]
resps = {l["id"]: l for l in lines if l.get("event") == "response"}
last = reqs[-1]
ok = (len(reqs) == 14 and all(r["id"] in resps for r in reqs)
      and last["path"] == "/v1/completions" and last["headers"]["x-llm-script"] == "chat"
      and last["body"]["model"] == "gpt-4o" and resps[last["id"]]["cut"] is False
      and sum(1 for r in resps.values() if r["cut"]) == 2)
if not ok:
    print("# %d requests, last %s" % (len(reqs), json.dumps(last)[:300]))
    print("# cut: %s" % [r["id"] for r in resps.values() if r["cut"]])
sys.exit(0 if ok else 1)
EOF
ok $? "the stand-in logged every request (headers, body) and how it answered"

done_testing
