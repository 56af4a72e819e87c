# spendlib.sh - shared setup of the spend tests (71, 72): the stand-in
# Anthropic and OpenAI APIs (tests/helpers/llm_api.py) behind their real
# names, resolved only by a DNS server of the test (testnet.py), and
# `airlock run` sessions whose agent calls them through the proxy. Source
# it after lib.sh; it refuses to run outside tests/netns-exec (it adds
# addresses to lo).
#
#   198.18.0.20  api.anthropic.com   llm_api.py: HTTPS :443, plain HTTP :80
#   198.18.0.21  api.openai.com      llm_api.py: HTTPS :443, plain HTTP :80
#   198.18.0.22  down.anthropic.com  nothing listens (connections refused)
#   127.0.0.1:5353                   DNS (testnet.py)
#
# The HTTPS servers' certificates are issued by $SL_CA, which policies
# name in egress.upstream_ca: the proxy intercepts the provider hosts,
# verifies them against it, and the agent trusts the session CA.
# $SL_LOG logs the HTTPS servers' requests, $SL_LOG80 the plain ones'.
#
# Functions (each bounded in time):
#   sl_start SCRIPTS_JSON        start DNS and the stand-in APIs
#   sl_policy FILE MODE SPEND    write a policy whose spend section is the
#                                JSON members SPEND
#   sl_run ID POLICY EV SCRIPT [ARGS]  airlock run --session ID (more
#                                options in $SL_RUN_OPTS) -- sh -c SCRIPT;
#                                output in $T/ID.out; returns its status
#   sl_requests [PATH]           requests the stand-in received (to PATH)
#   jsel FILE EXPR               a Python expression over L, the list of
#                                the JSON lines of FILE
#   jget JSON EXPR               a Python expression over j
#   wait_file PATH SECONDS

: "${T:?source lib.sh first}"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"
TESTNET="$AIRLOCK_SRC/tests/helpers/testnet.py"
LLM="$AIRLOCK_SRC/tests/helpers/llm_api.py"
SL_LOG="$T/llm.log"
SL_LOG80="$T/llm80.log"
SL_CA="$T/tls/ca.pem"
SL_PIDS=""
SL_RUN_OPTS=""
USD=1000000000

if [ "${AIRLOCK_TEST_NETNS:-}" != 1 ] || [ "$(ip -o link show | wc -l)" -ne 1 ]; then
	echo "Bail out! run through tests/netns-exec (make check): this test adds addresses to lo"
	exit 1
fi

sl_cleanup() {
	for p in $SL_PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $SL_PIDS; do
		timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null
	done
	[ -n "${SL_EXTRA_CLEANUP:-}" ] && eval "$SL_EXTRA_CLEANUP"
	rm -rf "$T"
}
trap sl_cleanup EXIT

for a in 198.18.0.20 198.18.0.21 198.18.0.22; do
	ip addr add "$a/32" dev lo || { echo "Bail out! ip addr add $a"; exit 1; }
done

wait_file() {
	_i=0
	while [ $_i -lt $(($2 * 20)) ]; do
		[ -e "$1" ] && return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	return 1
}

jget() {
	python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"
}

jsel() {
	python3 -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(eval(sys.argv[2]))' "$1" "$2"
}

# sl_start SCRIPTS: SCRIPTS is the llm_api "scripts" object.
sl_start() {
	cat >"$T/net.json" <<EOF
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"],
         "zone": {"api.anthropic.com": ["198.18.0.20"], "api.openai.com": ["198.18.0.21"],
                  "down.anthropic.com": ["198.18.0.22"]}}}
EOF
	python3 "$TESTNET" --config "$T/net.json" >"$T/net.out" 2>&1 &
	SL_PIDS="$SL_PIDS $!"
	cat >"$T/llm.json" <<EOF
{"log": "$SL_LOG", "ready": "$T/llm.ready", "lifetime": 600,
 "listen": ["198.18.0.20:443", "198.18.0.21:443"],
 "tls": {"dir": "$T/tls", "names": ["api.anthropic.com", "api.openai.com"]},
 "scripts": $1}
EOF
	cat >"$T/llm80.json" <<EOF
{"log": "$SL_LOG80", "ready": "$T/llm80.ready", "lifetime": 600,
 "listen": ["198.18.0.20:80", "198.18.0.21:80"], "tls": null,
 "scripts": $1}
EOF
	python3 "$LLM" --config "$T/llm.json" >/dev/null 2>"$T/llm.err" &
	SL_PIDS="$SL_PIDS $!"
	python3 "$LLM" --config "$T/llm80.json" >/dev/null 2>"$T/llm80.err" &
	SL_PIDS="$SL_PIDS $!"
	wait_file "$T/net.ready" 30 && wait_file "$T/llm.ready" 30 &&
		wait_file "$T/llm80.ready" 30 || {
		echo "Bail out! the stand-in network did not start: $(cat "$T/net.out" "$T/llm.err" "$T/llm80.err")"
		exit 1
	}
}

# sl_policy FILE MODE SPEND_MEMBERS
sl_policy() {
	cat >"$1" <<EOF
{
  "version": 1,
  "mode": "$2",
  "egress": {
    "allow": ["api.anthropic.com", "api.openai.com"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["127.0.0.1:5353"],
    "upstream_ca": "$SL_CA"
  },
  "spend": {
    "providers": [{"api": "anthropic", "hosts": ["api.anthropic.com"]},
                  {"api": "openai", "hosts": ["api.openai.com"]}],
    "prices": {"claude-sonnet-4-5*": {"input": 3, "output": 15},
               "claude-haiku-4-5": {"input": 1, "output": 5, "cache_write": 1.25, "cache_read": 0.1},
               "gpt-4o": {"input": 2.5, "output": 10}},
    $3
  }
}
EOF
}

# sl_run ID POLICY EVENTS SCRIPT [ARG...]
sl_run() {
	_id=$1
	_pol=$2
	_ev=$3
	_s=$4
	shift 4
	# shellcheck disable=SC2086
	timeout 120 "$AIRLOCK" run --policy "$_pol" --session "$_id" --events "$_ev" \
		--workspace "$WS" $SL_RUN_OPTS -- sh -c "$_s" "$@" >"$T/$_id.out" 2>&1 </dev/null
}

# sl_requests [PATH [LOG]]: how many requests the stand-in APIs read (to
# PATH; "" for any), by default over HTTPS.
sl_requests() {
	_log=${2:-$SL_LOG}
	[ -f "$_log" ] || { echo 0; return; }
	jsel "$_log" "len([e for e in L if e['event'] == 'request' and ('${1:-}' == '' or e['path'] == '${1:-}')])"
}
