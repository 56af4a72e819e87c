#!/bin/bash
# 72-spend-tree.t - a tree of sessions under one root cap (docs/SPEND.md):
# concurrent `airlock run --parent` sessions, each making parallel calls
# to the stand-in Anthropic API over HTTPS through the proxy, never spend
# more than their root's cap between them, on an SQLite ledger and on a
# real PostgreSQL server started here.
#
# Every call is a stream the provider cuts, so each is charged its whole
# reservation: exactly floor(cap / reservation) calls fit, whatever the
# order in which the sessions reserve.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/spendlib.sh"
. "$(dirname "$0")/pglib.sh"

WS="$T/ws"
mkdir "$WS"
sl_start '{"slowcut": {"usage": {"input": 25, "output": 15}, "delay_ms": 300, "cut_after": 3}}'
printf '{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WS/as.json"
B=$(wc -c <"$WS/as.json")
RES=$((B * 3750 + 100 * 15000))
cat >"$WS/calls.sh" <<'EOF'
#!/bin/sh
# calls.sh NAME N: N parallel calls; NAME.codes gets their statuses
cd "$(dirname "$0")"
i=0
while [ $i -lt "$2" ]; do
	i=$((i + 1))
	curl -sS --max-time 30 -o /dev/null -w '%{http_code}\n' -H 'X-Llm-Script: slowcut' \
		-H 'content-type: application/json' --data-binary @as.json \
		https://api.anthropic.com/v1/messages >"$1.$i.code" 2>/dev/null &
done
wait
cat "$1".*.code >"$1.codes"
env | grep -c '^PG' >"$1.pgenv"
exit 0
EOF
chmod +x "$WS/calls.sh"

# row LEDGER SESSION FIELD: a field of the session's row
row() {
	"$AIRLOCK" spend show --ledger "$1" --json "$2" |
		python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s[sys.argv[1]])' "$3"
}

# tree NAME LEDGER: four sessions under team (no cap) under org (a cap of
# 5.5 reservations), three calls each at once.
tree() {
	local name=$1 L=$2 k pids=() st n200 n429 before sum
	"$AIRLOCK" spend set --ledger "$L" "org$name" --cap \
		"$(python3 -c "print('%.9f' % ($RES * 11 / 2 / 1e9))")" >/dev/null &&
		"$AIRLOCK" spend set --ledger "$L" "team$name" --cap none --parent "org$name" >/dev/null
	ok $? "$name: the budgets org (5.5 reservations) > team (no cap)"
	sl_policy "$T/p$name.json" enforce "\"cap_usd\": null, \"ledger\": \"$L\""
	before=$(sl_requests)
	for k in 1 2 3 4; do
		timeout 120 "$AIRLOCK" run --policy "$T/p$name.json" --session "kid$name$k" \
			--parent "team$name" --events "$T/ev$name$k.jsonl" --workspace "$WS" \
			-- sh -c '"$0/calls.sh" "$1" 3' "$WS" "$name$k" >"$T/run$name$k.out" 2>&1 </dev/null &
		pids+=($!)
	done
	st=0
	for k in "${pids[@]}"; do wait "$k" || st=1; done
	is $st 0 "$name: four sessions ran at once under team"
	n200=$(cat "$WS/$name"?.codes | grep -c '^200$')
	n429=$(cat "$WS/$name"?.codes | grep -c '^429$')
	is "$n200 $n429" "5 7" "$name: of 12 parallel calls in 4 sessions, the 5 the root's cap allows went through"
	is "$(($(sl_requests) - before))" 5 "$name: and only those reached the provider"
	is "$(row "$L" "org$name" spent_nano) $(row "$L" "org$name" reserved_nano)" "$((5 * RES)) 0" \
		"$name: the root spent 5 reservations: never more than its cap"
	sum=0
	for k in 1 2 3 4; do
		sum=$((sum + $(row "$L" "kid$name$k" own_spent_nano)))
	done
	is "$sum $(row "$L" "team$name" spent_nano)" "$((5 * RES)) $((5 * RES))" \
		"$name: the team's row holds the sum of its children's spend"
	is "$(for k in 1 2 3 4; do jsel "$T/ev$name$k.jsonl" \
		"round([e for e in L if e['type'] == 'session.end'][0]['subject']['spend_usd'] * 1e9) == $(row "$L" "kid$name$k" own_spent_nano)"; done | sort -u)" \
		"True" "$name: each session.end's spend_usd is that session's own spend in the ledger"
	cat "$T/ev$name"?.jsonl >"$T/all$name.jsonl"
	is "$(jsel "$T/all$name.jsonl" "sorted(set(e['subject']['cap_session'] for e in L if e['type'] == 'budget.block'))")" \
		"['org$name']" "$name: the 7 refusals name the root's cap"
	is "$(cat "$WS/$name"?.pgenv | sort -u)" 0 "$name: the agent sees no PG* variable of the supervisor"
	out=$("$AIRLOCK" spend show --ledger "$L" "org$name")
	like "$out" "
    kid${name}1 +team$name " "$name: spend show prints the tree"
}

tree sqlite "sqlite:$T/tree.db"

# ------------------------------------------------------------ PostgreSQL
if ! pg_usable; then
	echo "ok $((tap_n + 1)) # SKIP PostgreSQL needs root, runuser and the postgresql package"
	tap_n=$((tap_n + 1))
else
	SL_EXTRA_CLEANUP='pg_stop'
	pg_start 40
	psql -q -h "$PGDIR" -U airlock -d postgres -c 'CREATE DATABASE spend' >/dev/null 2>&1
	ok $? "a database for the ledger"
	tree postgresql "postgresql:///spend?host=$PGDIR&user=airlock"
	unset PGPASSWORD
fi

! cat "$T"/run*.out | grep -q 'Sanitizer\|runtime error:'
ok $? "no sanitizer report from airlock's processes"

done_testing
