#!/bin/bash
# 73-spend-holds.t - the spend cap holds against a hostile agent
# (docs/SPEND.md, "What holds the cap"): calls without an output bound
# to a stand-in provider that would generate far more than the default
# bound, input pulled from state stored at the provider, costly endpoints
# the meter cannot price, and an answer that reports more output than the
# bound sent. Alone and four sessions at once, on SQLite and on a real
# PostgreSQL started here; then a PostgreSQL that stops answering in the
# middle of a session.
#
# What the provider really served is measured at the stand-in, from the
# usage of every answer it sent (its log), never from airlock's receipts:
# it never exceeds the cap, and every refused request never reached it.
#
# Prices (n$ per token): gpt-4o input 2500, output 10000 (cache_write
# 3125, cache_read 250); claude-sonnet-4-5* input 3000, output 15000,
# cache_write 3750.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/spendlib.sh"
. "$(dirname "$0")/pglib.sh"

WS="$T/ws"
mkdir "$WS"
sl_start '{
  "greedy": {"wants": 200000},
  "over": {"usage": {"input": 10, "output": 5000}, "ignore_bound": true},
  "emb": {"usage": {"input": 400}}
}'

# Bodies without an output bound, and bodies that pull stored input.
printf '{"model":"gpt-4o","messages":[{"role":"user","content":"write forever"}]}' >"$WS/chat.json"
printf '{"model":"gpt-4o","input":"write forever"}' >"$WS/resp.json"
printf '{"model":"gpt-4o","prompt":"write forever"}' >"$WS/cmp.json"
printf '{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}' >"$WS/a.json"
printf '{"model":"gpt-4o","input":"and then?","previous_response_id":"resp_0123"}' >"$WS/prev.json"
printf '{"model":"gpt-4o","input":"and then?","conversation":"conv_0123"}' >"$WS/conv.json"
printf '{"model":"gpt-4o","prompt":{"id":"pmpt_0123","version":"2"}}' >"$WS/prompt.json"
printf '{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-0123"}}]}]}' >"$WS/file.json"
printf '{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_0123"}}]}]}' >"$WS/afile.json"
printf '{"model":"gpt-4o","input":"hello world"}' >"$WS/emb.json"
printf '{"requests":[]}' >"$WS/batch.json"

cat >"$WS/call.sh" <<'EOF'
#!/bin/sh
# call NAME SCRIPT FILE URL [CURL ARGS]: NAME.code, NAME.h
n=$1 s=$2 f=$3 u=$4
shift 4
curl -sS --max-time 30 -o "$n.b" -D "$n.h" -w '%{http_code}' -H "X-Llm-Script: $s" \
	-H 'content-type: application/json' --data-binary @"$f" "$@" "$u" >"$n.code" 2>"$n.err"
exit 0
EOF
chmod +x "$WS/call.sh"
A=https://api.anthropic.com
O=https://api.openai.com

# served [SINCE_ID]: n$ the stand-in really served (every answer's usage at
# the policy's prices, rounded up per answer) for request ids > SINCE_ID
served() {
	python3 - "$SL_LOG" "${1:-0}" <<'PY'
import json, sys
P = {"gpt-4o": (2500, 10000, 3125, 250), "claude-sonnet-4-5": (3000, 15000, 3750, 300)}
tot = 0
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") != "response" or e["id"] <= int(sys.argv[2]) or not e.get("usage"):
        continue
    u, p = e["usage"], P[e["model"]]
    tot += -(-(u["input"] * p[0] + u["output"] * p[1] + u["cache_write"] * p[2] +
               u["cache_read"] * p[3]) * 1000 // 1000)
print(tot)
PY
}
# last_id: the id of the stand-in's last request
last_id() {
	jsel "$SL_LOG" "max([e['id'] for e in L if e['event'] == 'request'] or [0])"
}
# reached PATH SINCE_ID: requests to PATH the stand-in read after SINCE_ID
reached() {
	jsel "$SL_LOG" "len([e for e in L if e['event'] == 'request' and e['path'] == '$1' and e['id'] > $2])"
}
rule_of() {
	sed -n 's/^X-Airlock-Rule: *\([^ ]*\).*/\1/ip' "$1" | tr -d '\r'
}
codes() {
	for n in "$@"; do printf '%s ' "$(cat "$WS/$n.code")"; done | sed 's/ $//'
}
CAP=100000000 # $0.10

# --- 1. no output bound: the bound reserved is the bound sent -----------------
# default_max_output_tokens 2000: a call reserves about $0.0202 and the
# stand-in would generate 200000 tokens ($2.00) when left unbounded.
greedy() {
	local name=$1 L=$2 since ev=$T/g$1.jsonl
	since=$(last_id)
	sl_policy "$T/g$name.json" enforce "\"cap_usd\": 0.1, \"ledger\": \"$L\", \"default_max_output_tokens\": 2000"
	sl_run "g$name" "$T/g$name.json" "$ev" '
cd "$0"
for i in 1 2 3; do ./call.sh gc$i greedy chat.json '"$O"'/v1/chat/completions; done
./call.sh gr greedy resp.json '"$O"'/v1/responses
./call.sh gp greedy cmp.json '"$O"'/v1/completions
./call.sh gx greedy chat.json '"$O"'/v1/chat/completions
' "$WS"
	is "$(codes gc1 gc2 gc3 gr gp gx)" "200 200 200 200 429 429" \
		"$name: unbounded calls go through while their reservations fit, then 429"
	is "$(jsel "$SL_LOG" "sorted(set((e['path'], e['body'].get('max_completion_tokens'), e['body'].get('max_output_tokens'), e['body'].get('max_tokens')) for e in L if e['event'] == 'request' and e['id'] > $since))")" \
		"[('/v1/chat/completions', 2000, None, None), ('/v1/responses', None, 2000, None)]" \
		"$name: each reached the provider with the bound reserved in its body"
	s=$(served "$since")
	[ "$s" -le $CAP ] && [ "$s" -gt $((CAP * 3 / 4)) ]
	ok $? "$name: the provider served $s n\$ in all: within the cap of $CAP"
	is "$(jsel "$ev" "sum(e['subject']['cost_nano'] for e in L if e['type'] == 'budget.charge')")" "$s" \
		"$name: the charges are what the provider served"
	is "$(jsel "$ev" "sorted(set((e['subject']['price_key'], e['subject']['price_nano_per_million']['output'], e['subject']['output_bound'], e['subject']['overrun']) for e in L if e['type'] == 'budget.charge'))")" \
		"[('gpt-4o', 10000000000, 2000, False)]" \
		"$name: each budget.charge names its price and the bound it was sent with"
	"$AIRLOCK" verify "$ev" >/dev/null 2>&1
	ok $? "$name: the stream verifies"
	out=$("$AIRLOCK" spend audit --ledger "$L" "$ev" 2>&1)
	is "$?" 0 "$name: spend audit: every charge recomputes from its receipt"
	like "$out" "g$name: 4 charges, .*4 recomputed from their receipts, 0 differ.*the ledger agrees" \
		"$name: and the ledger agrees"
	python3 - "$ev" "$T/g$name.bad.jsonl" <<'PY'
import json, sys
out, done = [], False
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "budget.charge" and not done:
        e["subject"]["output_tokens"] -= 1
        done = True
    out.append(json.dumps(e))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
	out=$("$AIRLOCK" spend audit --ledger "$L" "$T/g$name.bad.jsonl" 2>&1)
	is "$?" 1 "$name: spend audit of an altered stream fails"
	like "$out" "charged \\\$[0-9.]+, the receipt's counts and prices make" "$name: naming the charge that does not add up"
}
greedy sqlite "sqlite:$T/spend.db"

# --- 2. input from stored state: refused, nothing forwarded ---------------------
EV="$T/ev2.jsonl"
since=$(last_id)
sl_policy "$T/p2.json" enforce "\"cap_usd\": 1, \"ledger\": \"sqlite:$T/spend.db\""
sl_run state "$T/p2.json" "$EV" '
cd "$0"
./call.sh sprev greedy prev.json '"$O"'/v1/responses
./call.sh sconv greedy conv.json '"$O"'/v1/responses
./call.sh sprompt greedy prompt.json '"$O"'/v1/responses
./call.sh sfile greedy file.json '"$O"'/v1/chat/completions
./call.sh safile greedy afile.json '"$A"'/v1/messages
' "$WS"
is "$(codes sprev sconv sprompt sfile safile)" "403 403 403 403 403" \
	"previous_response_id, conversation, a stored prompt, file ids: 403"
is "$(for n in sprev sconv sprompt sfile safile; do rule_of "$WS/$n.h"; done | sort -u)" "spend.unbounded" \
	"each with X-Airlock-Rule spend.unbounded"
is "$(jsel "$EV" "[(e['type'], e['rule']) for e in L if e['type'].startswith('budget.')]")" \
	"$(python3 -c "print([('budget.block', 'spend.unbounded')] * 5)")" "and a budget.block receipt each"
is "$(jsel "$SL_LOG" "len([e for e in L if e['event'] == 'request' and e['id'] > $since])")" 0 \
	"none of them reached the provider"

# server_state "allow": the reserve is on top of the reservation
EV="$T/ev2b.jsonl"
since=$(last_id)
B=$(wc -c <"$WS/prev.json")
RES=$((B * 3125 + 2000 * 10000 + 50000000))
sl_policy "$T/p2b.json" enforce "\"cap_usd\": 0.08, \"ledger\": \"sqlite:$T/spend.db\", \"default_max_output_tokens\": 2000, \"server_state\": \"allow\", \"server_state_reserve_usd\": 0.05"
"$AIRLOCK" check "$T/p2b.json" >/dev/null
ok $? "server_state allow with server_state_reserve_usd is a valid policy"
sl_run stateok "$T/p2b.json" "$EV" '
cd "$0"
./call.sh aprev greedy prev.json '"$O"'/v1/responses
./call.sh aprev2 greedy prev.json '"$O"'/v1/responses
' "$WS"
is "$(codes aprev aprev2)" "200 429" "allowed: the first goes through, the second passes the cap with its reserve"
is "$(jsel "$EV" "[e['subject']['reservation_nano'] for e in L if e['type'] == 'budget.block']")" "[$RES]" \
	"the reservation is body x 3125 + 2000 x 10000 + server_state_reserve_usd"
is "$(reached /v1/responses "$since")" 1 "only the first reached the provider"

# --- 3. costly endpoints the meter cannot price ----------------------------------
EV="$T/ev3.jsonl"
since=$(last_id)
sl_policy "$T/p3.json" enforce "\"cap_usd\": 1, \"ledger\": \"sqlite:$T/spend.db\""
sl_run unmetered "$T/p3.json" "$EV" '
cd "$0"
./call.sh ubatch x batch.json '"$A"'/v1/messages/batches
./call.sh uobatch x batch.json '"$O"'/v1/batches
./call.sh uimg x batch.json '"$O"'/v1/images/generations
./call.sh uaudio x batch.json '"$O"'/v1/audio/speech
./call.sh urts x batch.json '"$O"'/v1/realtime/sessions
curl -sS --max-time 20 -o /dev/null -D urt.h -w "%{http_code}" -H "Connection: Upgrade" -H "Upgrade: websocket" \
	-H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" '"$O"'/v1/realtime >urt.code 2>/dev/null
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" '"$O"'/v1/models >umodels.code 2>/dev/null
./call.sh ucount x a.json '"$A"'/v1/messages/count_tokens
./call.sh uemb emb emb.json '"$O"'/v1/embeddings
' "$WS"
is "$(codes ubatch uobatch uimg uaudio urts urt)" "403 403 403 403 403 403" \
	"batches (both APIs), images, audio, realtime (and its WebSocket): 403"
is "$(for n in ubatch uobatch uimg uaudio urts urt; do rule_of "$WS/$n.h"; done | sort -u)" "spend.unmetered" \
	"each with X-Airlock-Rule spend.unmetered"
is "$(jsel "$SL_LOG" "sorted(e['path'] for e in L if e['event'] == 'request' and e['id'] > $since)")" \
	"['/v1/embeddings', '/v1/messages/count_tokens', '/v1/models']" \
	"none of them reached the provider; GET, count_tokens (spend.pass) and embeddings did"
is "$(codes umodels ucount uemb)" "200 200 200" "GET /v1/models, count_tokens and embeddings answered"
is "$(jsel "$EV" "[(e['subject']['endpoint'], e['subject']['input_tokens'], e['subject']['output_tokens'], e['subject']['cost_nano']) for e in L if e['type'] == 'budget.charge']")" \
	"[('/v1/embeddings', 400, 0, 1000000)]" "embeddings are metered from their usage: 400 x 2500 n$"
sl_policy "$T/p3b.json" enforce "\"cap_usd\": 1, \"ledger\": \"sqlite:$T/spend.db\", \"pass\": [\"/v1/batches\"]"
since=$(last_id)
sl_run passed "$T/p3b.json" "$T/ev3b.jsonl" '
cd "$0"
./call.sh pobatch x batch.json '"$O"'/v1/batches
./call.sh pcount x a.json '"$A"'/v1/messages/count_tokens
' "$WS"
is "$(codes pobatch pcount) $(reached /v1/batches "$since")" "200 403 1" \
	"spend.pass lists what the policy author accepts unmetered (and only that)"

# --- 4. an answer past the bound sent: an overrun, charged in full -------------
EV="$T/ev4.jsonl"
sl_policy "$T/p4.json" enforce "\"cap_usd\": 0.076, \"ledger\": \"sqlite:$T/spend.db\""
sl_run overrun "$T/p4.json" "$EV" '
cd "$0"
./call.sh o1 over a.json '"$A"'/v1/messages
./call.sh o2 over a.json '"$A"'/v1/messages
' "$WS"
is "$(codes o1 o2)" "200 429" "the overrun is charged, and the next call sees it (429)"
is "$(jsel "$EV" "[(e['subject']['output_tokens'], e['subject']['output_bound'], e['subject']['overrun'], e['subject']['cost_nano']) for e in L if e['type'] == 'budget.charge']")" \
	"[(5000, 100, True, 75030000)]" \
	"budget.charge: 5000 output tokens past a bound of 100, overrun, 10 x 3000 + 5000 x 15000 n$"

# --- 4b. receipts: nothing injected for a request that never left; the
# request's own method and path inside the tunnel --------------------------
EV="$T/ev4b.jsonl"
sl_policy "$T/p4b.json" enforce "\"cap_usd\": 1, \"ledger\": \"sqlite:$T/spend.db\""
python3 - "$T/p4b.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["secrets"] = {"openai": {"from_env": "OPENAI_KEY", "hosts": ["api.openai.com"],
                           "headers": ["authorization"], "prefix": "sk-test-"}}
json.dump(p, open(sys.argv[1], "w"))
PY
since=$(last_id)
OPENAI_KEY=sk-test-0123456789abcdef sl_run receipts "$T/p4b.json" "$EV" '
cd "$0"
./call.sh rblock greedy prev.json '"$O"'/v1/responses -H "Authorization: Bearer $OPENAI_KEY"
./call.sh rok greedy file.json '"$O"'/v1/chat/completions -H "Authorization: Bearer $OPENAI_KEY"
./call.sh rchat x a.json '"$O"'/v1/chat/completions -H "Authorization: Bearer $OPENAI_KEY"
' "$WS"
is "$(codes rblock rok rchat)" "403 403 200" "with a secret to inject: the refused calls get 403, the other goes through"
is "$(jsel "$EV" "[(e['subject']['method'], e['subject']['path']) for e in L if e['type'] == 'secret.inject']")" \
	"[('POST', '/v1/chat/completions')]" \
	"secret.inject is recorded for the request that left, not for the two refused before it"
is "$(jsel "$EV" "[(e['subject']['method'], e['subject']['path'], e['subject']['tunnel']) for e in L if e['type'] == 'budget.block']")" \
	"[('POST', '/v1/responses', 'CONNECT'), ('POST', '/v1/chat/completions', 'CONNECT')]" \
	"a refusal inside the tunnel names the request's method and path; the tunnel's CONNECT is subject.tunnel"
is "$(jsel "$SL_LOG" "[e['headers'].get('authorization') for e in L if e['event'] == 'request' and e['id'] > $since]")" \
	"['Bearer sk-test-0123456789abcdef']" "the one request that left carried the secret"

# --- 4c. shadow: each would_block is written before the call it lets go on
# (the ledger process records the call's budget.charge on a channel of
# its own; the key holder could serve that one first)
EV="$T/ev4c.jsonl"
sl_policy "$T/p4c.json" shadow "\"cap_usd\": 0.000001, \"ledger\": \"sqlite:$T/spend.db\""
sl_run shadoworder "$T/p4c.json" "$EV" '
cd "$0"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do ./call.sh sh$i x a.json '"$A"'/v1/messages; done
' "$WS"
is "$(jsel "$EV" "''.join('b' if e['type'] == 'budget.block' else 'c' for e in L if e['type'] in ('budget.block', 'budget.charge'))")" \
	"bcbcbcbcbcbcbcbcbcbcbcbc" "shadow: 12 calls past the cap, each would_block before its charge"

# shadow: input from stored state and an unmetered call are recorded as
# enforce would refuse them and let go; the stored-state call is metered
EV="$T/ev4d.jsonl"
since=$(last_id)
sl_policy "$T/p4d.json" shadow "\"cap_usd\": 1, \"ledger\": \"sqlite:$T/spend.db\", \"default_max_output_tokens\": 100"
sl_run shadowstate "$T/p4d.json" "$EV" '
cd "$0"
./call.sh shp greedy prev.json '"$O"'/v1/responses
./call.sh shb x batch.json '"$O"'/v1/batches
' "$WS"
is "$(codes shp shb) $(reached /v1/responses "$since") $(reached /v1/batches "$since")" "200 200 1 1" \
	"shadow: both go through"
is "$(jsel "$EV" "[(e['type'], e['decision'], e['rule']) for e in L if e['type'].startswith('budget.')]")" \
	"[('budget.block', 'would_block', 'spend.unbounded'), ('budget.charge', 'info', 'spend.prices'), ('budget.block', 'would_block', 'spend.unmetered')]" \
	"recorded as would_block (spend.unbounded, spend.unmetered); the stored-state call is charged"

# --- 5. four sessions at once under one root cap ------------------------------------
# Each session: three unbounded calls at once, a stored-state call and an
# unmetered one. The root's cap of $0.10 holds for the whole tree.
cat >"$WS/mix.sh" <<'EOF'
#!/bin/sh
cd "$(dirname "$0")"
k=$1
./call.sh m$k.1 greedy chat.json https://api.openai.com/v1/chat/completions &
./call.sh m$k.2 greedy resp.json https://api.openai.com/v1/responses &
./call.sh m$k.3 greedy chat.json https://api.openai.com/v1/chat/completions &
./call.sh m$k.4 greedy prev.json https://api.openai.com/v1/responses &
./call.sh m$k.5 x batch.json https://api.openai.com/v1/batches &
wait
exit 0
EOF
chmod +x "$WS/mix.sh"
four() {
	local name=$1 L=$2 since k pids=() st n200 s
	since=$(last_id)
	"$AIRLOCK" spend set --ledger "$L" "root$name" --cap 0.1 >/dev/null
	ok $? "$name: a root budget of \$0.10"
	sl_policy "$T/f$name.json" enforce "\"cap_usd\": null, \"ledger\": \"$L\", \"default_max_output_tokens\": 2000"
	for k in 1 2 3 4; do
		timeout 120 "$AIRLOCK" run --policy "$T/f$name.json" --session "f$name$k" \
			--parent "root$name" --events "$T/f$name$k.jsonl" --workspace "$WS" \
			-- sh -c '"$0/mix.sh" "$1"' "$WS" "$name$k" >"$T/f$name$k.out" 2>&1 </dev/null &
		pids+=($!)
	done
	st=0
	for k in "${pids[@]}"; do wait "$k" || st=1; done
	is $st 0 "$name: four sessions ran at once"
	n200=$(for f in "$WS/m$name"?.[123].code; do cat "$f"; echo; done | grep -c '^200')
	s=$(served "$since")
	[ "$s" -le $CAP ] && [ "$n200" -ge 1 ] && [ "$n200" -le 4 ]
	ok $? "$name: of 12 unbounded calls $n200 went through; the provider served $s n\$ (cap $CAP)"
	is "$(for f in "$WS/m$name"?.[45].code; do cat "$f"; echo; done | sort | uniq -c | tr -s ' ')" " 8 403" \
		"$name: the stored-state and unmetered calls were all refused"
	is "$(reached /v1/batches "$since") $(jsel "$SL_LOG" "len([e for e in L if e['event'] == 'request' and e['id'] > $since and isinstance(e['body'], dict) and 'previous_response_id' in e['body']])")" \
		"0 0" "$name: none of those reached the provider"
	is "$("$AIRLOCK" spend show --ledger "$L" --json "root$name" | python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["spent_nano"], s["reserved_nano"])')" \
		"$s 0" "$name: the root's ledger row holds what the provider served, nothing reserved"
	for k in 1 2 3 4; do "$AIRLOCK" verify "$T/f$name$k.jsonl" >/dev/null 2>&1 || st=1; done
	ok $st "$name: the four streams verify"
}
four sqlite "sqlite:$T/spend.db"

# --- 6. PostgreSQL ------------------------------------------------------------------------
if ! pg_usable; then
	echo "ok $((tap_n + 1)) # SKIP PostgreSQL needs root, runuser and the postgresql package"
	tap_n=$((tap_n + 1))
else
	SL_EXTRA_CLEANUP='[ -n "${PGPID:-}" ] && kill -CONT "$PGPID" 2>/dev/null; pg_stop'
	pg_start 40
	psql -q -h "$PGDIR" -U airlock -d postgres -c 'CREATE DATABASE spend' >/dev/null 2>&1
	ok $? "a database for the ledger"
	PGL="postgresql:///spend?host=$PGDIR&user=airlock"
	greedy postgresql "$PGL"
	four postgresql "$PGL"

	# The server stops answering in the middle of a session: a metered
	# call waits ledger_timeout_ms, then 502 spend.ledger; nothing is
	# forwarded; once it answers again the session ends cleanly.
	PGPID=$(head -1 "$PGDIR/data/postmaster.pid")
	EV="$T/ev6.jsonl"
	since=$(last_id)
	sl_policy "$T/p6.json" enforce "\"cap_usd\": 1, \"ledger\": \"$PGL\", \"ledger_timeout_ms\": 1500"
	rm -f "$WS/frozen" "$WS/thawed"
	sl_run stalled "$T/p6.json" "$EV" '
cd "$0"
./call.sh st1 x a.json https://api.anthropic.com/v1/messages
touch ready
i=0; while [ ! -e frozen ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
s=$(date +%s%N)
./call.sh st2 x a.json https://api.anthropic.com/v1/messages
echo $(( ($(date +%s%N) - s) / 1000000 )) >st2.ms
touch called
i=0; while [ ! -e thawed ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
./call.sh st3 x a.json https://api.anthropic.com/v1/messages
' "$WS" &
sp=$!
	wait_file "$WS/ready" 60
	pkill -STOP -P "$PGPID"
	kill -STOP "$PGPID"
	touch "$WS/frozen"
	wait_file "$WS/called" 60
	kill -CONT "$PGPID"
	pkill -CONT -P "$PGPID"
	touch "$WS/thawed"
	wait $sp
	is "$? $(codes st1 st2 st3)" "0 200 502 200" \
		"a ledger that does not answer: 502, and calls go on once it answers again"
	ms=$(cat "$WS/st2.ms")
	[ "$ms" -ge 1400 ] && [ "$ms" -lt 6000 ]
	ok $? "the call failed after the bound (ledger_timeout_ms 1500): ${ms} ms"
	is "$(rule_of "$WS/st2.h")" "spend.ledger" "rule spend.ledger"
	is "$(reached /v1/messages "$since")" 2 "the failed call was not forwarded"
	"$AIRLOCK" verify "$EV" >/dev/null 2>&1
	ok $? "the session ended cleanly and its stream verifies"
	is "$("$AIRLOCK" spend show --ledger "$PGL" --json stalled | python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["reserved_nano"])')" \
		0 "the reservation made late was released"

	# The server stops (a clean shutdown) in the middle of a session:
	# calls fail closed at once, the session ends with the agent's
	# status, and its stream verifies.
	EV="$T/ev7.jsonl"
	since=$(last_id)
	rm -f "$WS/ready" "$WS/frozen" "$WS/called"
	sl_run stopped "$T/p6.json" "$EV" '
cd "$0"
./call.sh sp1 x a.json https://api.anthropic.com/v1/messages
touch ready
i=0; while [ ! -e frozen ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
s=$(date +%s%N)
./call.sh sp2 x a.json https://api.anthropic.com/v1/messages
echo $(( ($(date +%s%N) - s) / 1000000 )) >sp2.ms
' "$WS" &
sp=$!
	wait_file "$WS/ready" 60
	runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m fast -w -t 20 stop >/dev/null 2>&1
	touch "$WS/frozen"
	wait $sp
	is "$? $(codes sp1 sp2)" "0 200 502" "PostgreSQL stopped: the next call gets 502, the session ends with the agent's status"
	ms=$(cat "$WS/sp2.ms")
	[ "$ms" -lt 2500 ]
	ok $? "within the bound (${ms} ms)"
	is "$(rule_of "$WS/sp2.h") $(reached /v1/messages "$since")" "spend.ledger 1" \
		"rule spend.ledger, and it was not forwarded"
	"$AIRLOCK" verify "$EV" >/dev/null 2>&1
	ok $? "the stream verifies"
	unset PGPASSWORD
fi

! cat "$T"/*.out | grep -q 'Sanitizer\|runtime error:'
ok $? "no sanitizer report from airlock's processes"

done_testing
