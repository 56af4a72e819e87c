#!/bin/sh
# 71-spend-cap.t - the spend cap inside `airlock run` (docs/SPEND.md): the
# agent calls the stand-in Anthropic and OpenAI APIs over HTTPS through
# the proxy, which intercepts their hosts (and once over plain HTTP);
# each metered call is reserved before anything is forwarded and charged
# from the provider's answer, at costs computed here by hand; calls past
# the cap get 429 and never reach the provider, however many run at once;
# a cap raised live lets blocked work resume; on_exhausted "stop" ends the
# session; shadow mode records what enforce would refuse.
#
# Prices (n$ = nano-dollars, per token): claude-sonnet-4-5* input 3000,
# output 15000, cache_write 3750 (1.25 x input), cache_read 300;
# gpt-4o input 2500, output 10000, cache_read 250.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/spendlib.sh"

WS="$T/ws"
mkdir "$WS"
sl_start '{
  "cache": {"usage": {"input": 25, "output": 15, "cache_write": 100, "cache_read": 200}, "deltas": 3},
  "chat": {"usage": {"input": 600, "output": 50, "cache_read": 400}},
  "resp": {"usage": {"input": 300, "output": 120}},
  "cut": {"usage": {"input": 25, "output": 15}, "cut_after": 5},
  "slow": {"usage": {"input": 10, "output": 4}, "delay_ms": 150, "chunks": 4},
  "slowcut": {"usage": {"input": 25, "output": 15}, "delay_ms": 400, "cut_after": 3},
  "overloaded": {"status": 529},
  "nousage": {"omit_usage": true}
}'

# The bodies the agent sends (their sizes enter the reservations).
printf '{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}' >"$WS/a.json"
printf '{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WS/as.json"
printf '{"model":"gpt-4o","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WS/cs.json"
printf '{"model":"gpt-4o","max_output_tokens":200,"input":"hi"}' >"$WS/r.json"
printf '{"model":"gpt-4o","max_output_tokens":200,"stream":true,"input":"hi"}' >"$WS/rs.json"
printf '{"model":"gpt-4o","max_tokens":64,"prompt":"hi"}' >"$WS/cmp.json"
printf '{"model":"mystery-1","max_tokens":10,"messages":[]}' >"$WS/unpriced.json"
printf '{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}' >"$WS/count.json"
B_AS=$(wc -c <"$WS/as.json")
B_A=$(wc -c <"$WS/a.json")
# reservation of a claude-sonnet call: body x 3750 + max_tokens x 15000
RES_AS=$((B_AS * 3750 + 100 * 15000))
RES_A=$((B_A * 3750 + 100 * 15000))

# call NAME SCRIPT FILE URL: one call from inside; writes NAME.code,
# NAME.h (headers) and NAME.b (body) in the workspace.
cat >"$WS/call.sh" <<'EOF'
#!/bin/sh
# call NAME SCRIPT FILE URL
curl -sS --max-time 30 -o "$1.b" -D "$1.h" -w '%{http_code}' -H "X-Llm-Script: $2" \
	-H 'content-type: application/json' --data-binary @"$3" "$4" >"$1.code" 2>"$1.err"
exit 0
EOF
chmod +x "$WS/call.sh"
A=https://api.anthropic.com
O=https://api.openai.com

# charge_of FILTER FIELD: a member of the one budget.charge matching FILTER
charge_of() {
	jsel "$EV" "[e['subject'].get('$2') for e in L if e['type'] == 'budget.charge' and ($1)]"
}

# --- 1. exact costs, every shape ------------------------------------------------
EV="$T/ev1.jsonl"
LEDGER="sqlite:$T/spend.db"
sl_policy "$T/p1.json" enforce "\"cap_usd\": 1, \"ledger\": \"$LEDGER\""
"$AIRLOCK" check "$T/p1.json" >/dev/null
ok $? "the policy is valid"
sl_run costs "$T/p1.json" "$EV" '
cd "$0"
./call.sh j cache a.json '"$A"'/v1/messages
./call.sh s cache as.json '"$A"'/v1/messages
./call.sh c chat cs.json '"$O"'/v1/chat/completions
./call.sh r resp r.json '"$O"'/v1/responses
./call.sh rs resp rs.json '"$O"'/v1/responses
./call.sh cmp chat cmp.json '"$O"'/v1/completions
./call.sh slow slow as.json '"$A"'/v1/messages
./call.sh cut cut as.json '"$A"'/v1/messages
./call.sh err overloaded a.json '"$A"'/v1/messages
./call.sh nou nousage a.json '"$A"'/v1/messages
./call.sh unp cache unpriced.json '"$A"'/v1/messages
./call.sh cnt cache count.json '"$A"'/v1/messages/count_tokens
./call.sh plain cache a.json http://api.anthropic.com/v1/messages
' "$WS"
is $? 0 "airlock run: the agent's calls ran (exit 0)"
is "$(cat "$WS/j.code") $(cat "$WS/s.code") $(cat "$WS/c.code") $(cat "$WS/r.code")" "200 200 200 200" \
	"JSON and streaming calls of both APIs are answered through the proxy"
is "$(charge_of "e['subject']['outcome'] == 'usage' and e['subject']['endpoint'] == '/v1/messages' and e['subject']['input_tokens'] == 25" cost_nano)" \
	"[735000, 735000, 735000]" \
	"anthropic JSON and SSE, and JSON over plain http: 25 x 3000 + 100 x 3750 + 200 x 300 + 15 x 15000 = 735000 n$ each"
is "$(charge_of "e['subject']['outcome'] == 'usage' and e['subject']['endpoint'] == '/v1/messages' and e['subject']['input_tokens'] == 25" output_tokens)" \
	"[15, 15, 15]" "the stream's three cumulative message_delta counts are not summed: the last one (15) is"
is "$(charge_of "e['subject']['endpoint'] == '/v1/messages' and e['subject'].get('input_tokens') == 25" cache_write_tokens)" "[100, 100, 100]" \
	"cache writes are read and priced"
is "$(charge_of "e['subject']['endpoint'] == '/v1/chat/completions'" cost_nano)" "[2100000]" \
	"openai chat stream: (1000 - 400) x 2500 + 400 x 250 + 50 x 10000 = 2100000 n$"
is "$(jsel "$SL_LOG" "[(e['body'] if isinstance(e['body'], dict) else json.loads(e['body'])).get('stream_options') for e in L if e['event'] == 'request' and e['path'] == '/v1/chat/completions']")" \
	"[{'include_usage': True}]" "the proxy set stream_options.include_usage on the openai stream"
is "$(charge_of "e['subject']['endpoint'] == '/v1/responses'" cost_nano)" "[1950000, 1950000]" \
	"openai responses, JSON and stream (response.completed): 300 x 2500 + 120 x 10000 = 1950000 n$"
is "$(charge_of "e['subject']['endpoint'] == '/v1/completions'" cost_nano)" "[2100000]" \
	"openai completions: (1000 - 400) x 2500 + 400 x 250 + 50 x 10000 = 2100000 n$"
is "$(cat "$WS/slow.code") $(charge_of "e['subject'].get('input_tokens') == 10" cost_nano)" "200 [90000]" \
	"a slow stream (150 ms between events) is relayed and charged: 10 x 3000 + 4 x 15000 = 90000 n$"
is "$(charge_of "e['subject']['outcome'] == 'cut'" cost_nano)" "[$RES_AS]" \
	"a cut stream is charged its whole reservation ($B_AS x 3750 + 100 x 15000)"
is "$(charge_of "e['subject']['outcome'] == 'error'" cost_nano)" "[0]" \
	"an error answer without usage (529) is charged nothing"
is "$(charge_of "e['subject']['outcome'] == 'no_usage'" cost_nano)" "[$RES_A]" \
	"a 2xx answer without usage is charged its reservation"
is "$(cat "$WS/unp.code")" 403 "an unpriced model is refused (403)"
is "$(jsel "$EV" "[(e['rule'], e['decision']) for e in L if e['type'] == 'budget.block']")" \
	"[('spend.prices', 'block')]" "with a budget.block receipt, rule spend.prices"
is "$(sl_requests /v1/messages)" 6 "the unpriced call never reached the provider (the 6 others did)"
is "$(cat "$WS/cnt.code") $(charge_of "e['subject']['endpoint'] == '/v1/messages/count_tokens'" cost_nano)" "200 []" \
	"count_tokens passes unmetered"
is "$(cat "$WS/plain.code") $(sl_requests /v1/messages "$SL_LOG80")" "200 1" \
	"plain http:// to a provider host is metered the same way"
total=$((735000 * 3 + 2100000 * 2 + 1950000 * 2 + 90000 + RES_AS + RES_A))
is "$(jsel "$EV" "[e['subject']['total_nano'] for e in L if e['type'] == 'budget.charge'][-1]")" "$total" \
	"the last charge's session total is the sum of the charges"
is "$(jsel "$EV" "round([e for e in L if e['type'] == 'session.end'][0]['subject']['spend_usd'] * 1e9)")" "$total" \
	"session.end's spend_usd is the session's spend"
is "$("$AIRLOCK" spend show --ledger "$LEDGER" --json costs | python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["own_spent_nano"], s["reserved_nano"])')" \
	"$total 0" "the ledger holds the same spend, nothing left reserved"
"$AIRLOCK" verify "$EV" >/dev/null 2>&1
ok $? "the stream verifies"

# --- the ledger process: its own, confined --------------------------------------
rm -f "$WS/up" "$WS/go"
sl_run confined "$T/p1.json" "$T/evc.jsonl" 'cd "$0"; touch up; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done' "$WS" &
cp=$!
wait_file "$WS/up" 60
# the ledger process of this session: a child of its supervisor
lpid=""
for l in $(pgrep -x airlock-ledger); do
	pp=$(ps -o ppid= "$l" | tr -d ' ')
	tr '\0' ' ' <"/proc/$pp/cmdline" 2>/dev/null | grep -q -- "--policy $T/p1.json --session confined" && lpid=$l
done
st=$(grep -E '^(Seccomp|NoNewPrivs|CapEff):' "/proc/$lpid/status" 2>/dev/null | tr -s '\t ' ' ' | sort | tr '\n' ' ')
is "$st" "CapEff: 0000000000000000 NoNewPrivs: 1 Seccomp: 2 " "the session has a ledger process (airlock-ledger): no privileges, under its seccomp filter"
# /proc/PID/environ is the environment block it inherited: wiped in place
envs=$(tr '\0' '\n' <"/proc/$lpid/environ" 2>/dev/null | grep -v '^$' | cut -d= -f1 | grep -v '^PG' | grep -cv '^HOME$')
is "$envs" 0 "the environment it inherited is wiped (but PG* and HOME)"
touch "$WS/go"
wait $cp

# --- 2. refusal: 429 before any byte is forwarded --------------------------------
EV="$T/ev2.jsonl"
before=$(sl_requests)
sl_policy "$T/p2.json" enforce "\"cap_usd\": 0.001, \"ledger\": \"$LEDGER\""
sl_run tiny "$T/p2.json" "$EV" 'cd "$0"; ./call.sh t cache a.json '"$A"'/v1/messages' "$WS"
is "$(cat "$WS/t.code")" 429 "a call whose reservation passes the cap gets 429"
seq=$(sed -n 's/^X-Airlock-Receipt: *\([0-9]*\).*/\1/ip' "$WS/t.h" | tr -d '\r')
is "$(jsel "$EV" "[(e['type'], e['rule'], e['subject']['reservation_nano'], e['subject']['cap_session']) for e in L if e['seq'] == ${seq:-999999}]")" \
	"[('budget.block', 'spend.cap_usd', $RES_A, 'tiny')]" \
	"X-Airlock-Receipt names its budget.block receipt: the reservation and whose cap"
is "$(sed -n 2p "$WS/t.b")" "rule: spend.cap_usd; receipt: $seq" \
	"the 429's body names the rule and the receipt"
like "$(sed -n 3p "$WS/t.b")" '^Other routes .* are refused too' "and that other routes are refused too"
is "$(sl_requests)" "$before" "and nothing reached the provider"

# --- 3. many calls at once against a cap -----------------------------------------
# Each call is a stream cut after a while, so each is charged its whole
# reservation: exactly 4 of 12 fit under a cap of 4.5 reservations,
# whatever the order in which they are answered.
EV="$T/ev3.jsonl"
before=$(sl_requests)
cap=$((RES_AS * 9 / 2))
sl_policy "$T/p3.json" enforce "\"cap_usd\": $(python3 -c "print('%.9f' % ($cap / 1e9))"), \"ledger\": \"$LEDGER\""
sl_run para "$T/p3.json" "$EV" '
cd "$0"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do ./call.sh p$i slowcut as.json '"$A"'/v1/messages & done
wait
' "$WS"
n200=0
n429=0
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	case $(cat "$WS/p$i.code") in 200) n200=$((n200 + 1)) ;; 429) n429=$((n429 + 1)) ;; esac
done
is "$n200 $n429" "4 8" "12 parallel calls under a cap of 4.5 reservations: 4 forwarded, 8 refused with 429"
is "$(($(sl_requests) - before))" 4 "the provider saw exactly the 4 reserved calls"
spent=$("$AIRLOCK" spend show --ledger "$LEDGER" --json para | python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["spent_nano"], s["reserved_nano"])')
is "$spent" "$((4 * RES_AS)) 0" "the session spent 4 reservations, never more than its cap"

# --- 4. a cap raised live: blocked work resumes ---------------------------------
EV="$T/ev4.jsonl"
sl_policy "$T/p4.json" enforce "\"cap_usd\": 0.001, \"ledger\": \"$LEDGER\""
rm -f "$WS/raised"
sl_run live "$T/p4.json" "$EV" '
cd "$0"
./call.sh l1 cache a.json '"$A"'/v1/messages
touch blocked
i=0; while [ ! -e raised ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
./call.sh l2 cache a.json '"$A"'/v1/messages
' "$WS" &
lp=$!
wait_file "$WS/blocked" 60
out=$("$AIRLOCK" spend set --ledger "$LEDGER" live --cap 0.01)
is "$out" "live: cap 0.01 (was 0.001)" "the owner raises the cap of the running session"
touch "$WS/raised"
wait $lp
is "$(cat "$WS/l1.code") $(cat "$WS/l2.code")" "429 200" "refused at 0.001, the same call goes through after the raise"

# --- 5. on_exhausted stop ----------------------------------------------------------
EV="$T/ev5.jsonl"
sl_policy "$T/p5.json" enforce "\"cap_usd\": 0.001, \"ledger\": \"$LEDGER\", \"on_exhausted\": \"stop\""
start=$(date +%s)
sl_run stop "$T/p5.json" "$EV" 'cd "$0"; ./call.sh x cache a.json '"$A"'/v1/messages; sleep 60; touch survived' "$WS"
st=$?
is "$st" 125 "a refusal under on_exhausted stop ends the session: exit 125"
[ $(($(date +%s) - start)) -lt 40 ]
ok $? "at once (the agent's sleep was ended)"
[ ! -e "$WS/survived" ]; ok $? "the agent did not go on"
is "$(cat "$WS/x.code")" 429 "the call itself got 429"
is "$(jsel "$EV" "[e['type'] for e in L if e['type'].startswith('budget.')]")" "['budget.block', 'budget.exhausted']" \
	"budget.block, then budget.exhausted"
like "$(cat "$T/stop.out")" "spend cap is exhausted" "airlock says why it ended the session"

# --- 6. shadow: what enforce would refuse is recorded, forwarded and charged ------
EV="$T/ev6.jsonl"
before=$(sl_requests)
sl_policy "$T/p6.json" shadow "\"cap_usd\": 0.001, \"ledger\": \"$LEDGER\""
sl_run shadow "$T/p6.json" "$EV" 'cd "$0"; ./call.sh sh cache a.json '"$A"'/v1/messages' "$WS"
is "$(cat "$WS/sh.code")" 200 "shadow: the call past the cap goes through"
is "$(jsel "$EV" "[(e['type'], e['decision']) for e in L if e['type'].startswith('budget.')]")" \
	"[('budget.block', 'would_block'), ('budget.charge', 'info')]" "recorded as would_block, then charged"
is "$(($(sl_requests) - before))" 1 "the provider saw it"

# --- 7. a missing parent refuses the session ---------------------------------------
EV="$T/ev7.jsonl"
SL_RUN_OPTS="--parent no-such-team"
sl_run orphan "$T/p1.json" "$EV" 'touch "$0/ran"' "$WS"
st=$?
SL_RUN_OPTS=""
is "$st" 125 "a session whose parent is not in the ledger is refused (125)"
like "$(cat "$T/orphan.out")" "no-such-team.*not in the ledger" "naming the parent"
[ ! -e "$WS/ran" ]; ok $? "the command never ran"
is "$(jsel "$EV" "[(e['type'], e['rule']) for e in L]")" "[('session.refused', 'spend.parent'), ('session.end', 'session')]" \
	"session.refused, rule spend.parent"
sl_policy "$T/p7.json" enforce '"cap_usd": 1'
SL_RUN_OPTS="--parent costs"
sl_run memparent "$T/p7.json" "$T/ev7b.jsonl" 'touch "$0/ran"' "$WS"
st=$?
SL_RUN_OPTS=""
is "$st" 125 "--parent with the session's own memory ledger is refused (125)"
like "$(cat "$T/memparent.out")" "needs a spend.ledger" "saying a parent needs a shared ledger"

# --- 8. what is refused before reserving, and what is released --------------------
EV="$T/ev8.jsonl"
before=$(sl_requests)
before80=$(sl_requests "" "$SL_LOG80")
sl_policy "$T/p8.json" enforce "\"cap_usd\": 1, \"ledger\": \"$LEDGER\", \"max_body_bytes\": 120"
sed -i 's/"hosts": \["api.anthropic.com"\]/"hosts": ["api.anthropic.com", "down.anthropic.com"]/; s/"allow": \[/"allow": ["down.anthropic.com", /' "$T/p8.json"
printf '{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"%0100d"}]}' 0 >"$WS/big.json"
sl_run edges "$T/p8.json" "$EV" '
cd "$0"
c() { curl -sS --max-time 20 -o /dev/null -w "%{http_code}" "$@"; }
c -X POST -H "content-length: 0" '"$A"'/v1/messages > nobody.code 2>/dev/null
c -H "content-type: application/json" --data-binary @a.json '"$A"'//v1/messages > slash.code 2>/dev/null
c -H "content-type: application/json" --data-binary @a.json '"$A"'/v1/Messages > case.code 2>/dev/null
c -H "content-type: application/json" --data-binary @big.json '"$A"'/v1/messages > big.code 2>/dev/null
c -H "content-type: application/json" -H "Transfer-Encoding: chunked" --data-binary @big.json '"$A"'/v1/messages > bigch.code 2>/dev/null
c -H "content-type: application/json" --data-binary "{\"model\":" '"$A"'/v1/messages > bad.code 2>/dev/null
c -H "X-Llm-Script: cache" -H "Accept-Encoding: gzip" -H "content-type: application/json" --data-binary @a.json '"$A"'/v1/messages > gz.code 2>/dev/null
c -H "content-type: application/json" --data-binary @a.json http://down.anthropic.com/v1/messages > down.code 2>/dev/null
' "$WS"
is "$(cat "$WS/nobody.code")" 400 "a metered request without a body is refused (400)"
is "$(cat "$WS/slash.code") $(cat "$WS/case.code")" "400 400" "disguised spellings of the metered path are refused (400)"
is "$(cat "$WS/big.code") $(cat "$WS/bigch.code")" "413 413" "a body over spend.max_body_bytes is refused (413), Content-Length or chunked"
is "$(cat "$WS/bad.code")" 400 "a body that is not JSON is refused (400)"
is "$(jsel "$EV" "sorted(e['rule'] for e in L if e['type'] == 'budget.block')")" \
	"['spend.body', 'spend.body', 'spend.max_body_bytes', 'spend.path', 'spend.path']" \
	"each with a budget.block receipt naming its rule"
is "$(($(sl_requests) - before))" 1 "of them all, only the well-formed call reached the provider"
is "$(jsel "$SL_LOG" "[e['headers'].get('accept-encoding', e['headers'].get('Accept-Encoding')) for e in L if e['event'] == 'request'][-1]")" \
	"identity" "the metered call asked for an uncompressed answer, whatever the agent asked"
is "$(cat "$WS/down.code") $(($(sl_requests "" "$SL_LOG80") - before80))" "502 0" \
	"a provider host that cannot be reached: 502"
is "$("$AIRLOCK" spend show --ledger "$LEDGER" --json edges | python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["own_spent_nano"], s["reserved_nano"])')" \
	"735000 0" "its reservation was released: the session paid for the one answered call only"

# --- 9. the standalone proxy meters the sessions it serves ------------------------
EV="$T/ev9.jsonl"
sl_policy "$T/p9.json" enforce "\"cap_usd\": 1, \"ledger\": \"$LEDGER\""
"$AIRLOCK" proxy --policy "$T/p9.json" --listen 127.0.0.1:18090 --events "$EV" \
	--session standalone --ca-out "$T/proxy-ca.pem" >"$T/proxy.out" 2>&1 </dev/null &
pp=$!
SL_EXTRA_CLEANUP="kill -TERM $pp 2>/dev/null"
i=0
while ! grep -qs listening "$T/proxy.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
code1=$(curl -sS --max-time 20 --proxy http://127.0.0.1:18090 --cacert "$T/proxy-ca.pem" \
	-o /dev/null -w '%{http_code}' -H 'content-type: application/json' -H 'X-Llm-Script: cache' \
	--data-binary @"$WS/a.json" https://api.anthropic.com/v1/messages 2>/dev/null)
# 100 metered calls on one kept-alive intercepted connection: each is a
# reservation and a settlement, and no write of the proxy's may wait for
# the peer's delayed ACK (40 ms: with Nagle's algorithm a fifth of the
# calls took 40 ms or more). After the first call, while the connection is
# open, nodelay.py asks every connected TCP socket of the proxy's workers
# (the client's and the provider's side) whether TCP_NODELAY is set.
python3 - "$T/proxy-ca.pem" "$WS/a.json" "$T/nd" <<'PY' > "$T/calls.out" &
import http.client, os, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
c = http.client.HTTPSConnection("127.0.0.1", 18090, context=ctx, timeout=20)
c.set_tunnel("api.anthropic.com", 443)
body = open(sys.argv[2], "rb").read()
h = {"content-type": "application/json", "X-Llm-Script": "cache"}
c.request("POST", "/v1/messages", body, h); c.getresponse().read()
open(sys.argv[3] + ".ready", "w").close()
for i in range(200):
    if os.path.exists(sys.argv[3] + ".go"):
        break
    time.sleep(0.05)
ok = 0
for i in range(100):
    c.request("POST", "/v1/messages", body, h)
    r = c.getresponse(); r.read()
    ok += r.status == 200
print(ok)
PY
callpid=$!
i=0; while [ ! -e "$T/nd.ready" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
nd=$(python3 "$AIRLOCK_SRC/tests/helpers/nodelay.py" $(pgrep -P "$pp" -x airlock-proxy) 2>&1)
touch "$T/nd.go"
wait "$callpid"
ms=$(cat "$T/calls.out")
is "$ms" 100 "100 metered calls on one kept-alive intercepted connection: each answered 200"
like "$nd" '^([2-9]|[1-9][0-9]+) ' "the open connection's sockets are found in the proxy's workers ($nd)"
[ "${nd% *}" = "${nd#* }" ]
ok $? "every connected TCP socket of the proxy has TCP_NODELAY: no write waits for a delayed ACK (connected, with it: $nd)"
kill -TERM $pp
wait $pp
is "$? $code1" "0 200" "airlock proxy: a metered call through the standalone proxy"
is "$(jsel "$EV" "len([e for e in L if e['type'] == 'budget.charge' and e['subject']['cost_nano'] == 735000])")" 102 \
	"each is charged from the answer"
is "$(jsel "$EV" "round(L[-1]['subject']['spend_usd'] * 1e9)")" $((102 * 735000)) "and its session.end carries spend_usd"

! cat "$T"/*.out | grep -q 'Sanitizer\|runtime error:'
ok $? "no sanitizer report from airlock's processes"

done_testing
