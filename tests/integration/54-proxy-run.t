#!/bin/sh
# The egress proxy inside `airlock run` (docs/SANDBOX.md, docs/PROXY.md): the agent's tools
# (curl, git, Python's urllib) honour the proxy variables airlock sets and
# reach the allowed hosts through the proxy the supervisor serves; denied
# hosts get 403 with a receipt; a direct connection still has no route.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

WS="$T/ws"
mkdir "$WS"
# The helpers run inside, which sees the workspace but maybe not the checkout.
PROBE="$(helpers_in "$WS")/probe"
PL_SINK=$(printf '%s' "$PL_SINK" | sed 's/198\.18\.0\.13:80//')
PL_HTTP="$PL_HTTP 198.18.0.13:80"
pl_start_net
cp "$CA" "$WS/ca.pem"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "git.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the run policy is valid"

# sandbox MODE SCRIPT [ARG0 ARGS...]: runs sh -c SCRIPT ARG0 ARGS in the
# sandbox (workspace $WS, events $EV); output in $T/out; returns airlock's
# status.
sandbox() {
	_m=$1
	_s=$2
	shift 2
	timeout 120 "$AIRLOCK" run --mode "$_m" --policy "$POLICY" --workspace "$WS" \
		--events "$EV" -- sh -c "$_s" "$@" > "$T/out" 2>&1 </dev/null
}

# --- enforce: the tools go through the proxy ---------------------------------------

sandbox enforce '
cd "$0"
echo "proxy: $http_proxy $HTTPS_PROXY"
curl -sS --max-time 20 http://api.airlock.test/run-curl > curl.out 2> curl.err; echo $? > curl.rc
curl -sS --max-time 20 --cacert ca.pem https://api.airlock.test/run-tls > tls.out 2> tls.err; echo $? > tls.rc
python3 -c "
import urllib.request
print(urllib.request.urlopen(\"http://api.airlock.test/run-py\", timeout=20).read().decode(), end=\"\")
" > py.out 2> py.err; echo $? > py.rc
python3 -c "
import urllib.request, urllib.error
try:
    urllib.request.urlopen(\"http://other.airlock.test/run-py-denied\", timeout=20)
    print(\"no error\")
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get(\"X-Airlock-Rule\"), e.headers.get(\"X-Airlock-Receipt\"))
" > pydeny.out 2>&1
GIT_SSL_CAINFO="$0/ca.pem" GIT_TERMINAL_PROMPT=0 timeout 60 git ls-remote https://git.airlock.test/acme/api.git > git.out 2>&1; echo $? > git.rc
curl -sS -i --max-time 20 http://other.airlock.test/run-denied > deny.out 2>&1
curl -sS --max-time 20 http://meta.airlock.test/latest/meta-data/ -o /dev/null -w "%{http_code}\n" > meta.out 2>&1
"$1" tcp 198.18.0.10 80 > probe.out 2>&1
exit 0
' "$WS" "$PROBE"
st=$?
is "$st" 0 "airlock run --enforce: the script ran (exit 0)"
[ $st -eq 0 ] || sed 's/^/# /' "$T/out"
like "$(cat "$T/out")" 'proxy: http://127\.0\.0\.1:3128' "the proxy variables point at 127.0.0.1:3128"
! grep -q 'Sanitizer\|runtime error:' "$T/out"
ok $? "no sanitizer report from airlock run"

is "$(cat "$WS/curl.rc") $(cat "$WS/curl.out")" \
	"0 hello from 198.18.0.10:80 method=GET path=/run-curl host=$(jf "$(net_last line~run-curl)" host) body-length=0" \
	"curl http://api.airlock.test/: the upstream's answer, through the proxy"
like "$(jf "$(net_last line~run-curl)" host)" '^api\.airlock\.test(:80)?$' "the upstream saw Host api.airlock.test"
is "$(cat "$WS/tls.rc") $(cat "$WS/tls.out")" \
	"0 hello from tls 198.18.0.10:443 method=GET path=/run-tls host=api.airlock.test body-length=0" \
	"curl https://api.airlock.test/: through a CONNECT tunnel"
[ "$(cat "$WS/tls.rc")" = 0 ] || sed 's/^/# /' "$WS/tls.err"
is "$(cat "$WS/py.rc") $(cat "$WS/py.out")" \
	"0 hello from 198.18.0.10:80 method=GET path=/run-py host=$(jf "$(net_last line~run-py)" host) body-length=0" \
	"Python urllib.request.urlopen('http://api.airlock.test/'): through the proxy"
[ "$(cat "$WS/py.rc")" = 0 ] || sed 's/^/# /' "$WS/py.err"
pyd=$(cat "$WS/pydeny.out")
like "$pyd" '^403 egress\.default [0-9]+$' "urllib to a host not on the list: HTTPError 403 with the rule and receipt headers"

if command -v git > /dev/null 2>&1; then
	h=$(net_last srv=tls event=handshake sni=git.airlock.test)
	is "$(jf "$h" sni) $(jf "$h" ok)" "git.airlock.test true" "git ls-remote: the TLS upstream saw the SNI git.airlock.test"
	like "$(jf "$(net_last srv=tls line~/acme/api.git/)" line)" '^GET /acme/api\.git/info/refs\?service=git-upload-pack HTTP/1\.1$' \
		"and git's smart-HTTP request"
	r=$(grep '"type":"egress.allow"' "$EV" | grep '"host":"git.airlock.test"' | tail -n 1)
	is "$(jf "$r" rule) $(jf "$r" subject.method) $(jf "$r" subject.port) $(jf "$r" subject.address)" \
		"egress.allow[1] CONNECT 443 198.18.0.10" "an egress.allow receipt for the git CONNECT"
else
	ok 0 "# skip git is not installed"
fi

deny=$(tr -d '\r' < "$WS/deny.out")
like "$(printf '%s\n' "$deny" | head -n 1)" '^HTTP/1\.1 403' "curl http://other.airlock.test/: 403"
rseq=$(printf '%s\n' "$deny" | sed -n 's/^X-Airlock-Receipt: *\([0-9][0-9]*\)$/\1/p')
r=$(receipt_of "$rseq")
is "$(jf "$r" type) $(jf "$r" decision) $(jf "$r" rule) $(jf "$r" point) $(jf "$r" subject.host)" \
	"egress.block block egress.default egress-proxy other.airlock.test" "its receipt is in the session's stream"
is "$(net_count host~other.airlock.test)" 0 "198.18.0.13 never saw it"
is "$(cat "$WS/meta.out")" "403" "curl http://meta.airlock.test/ (not allowed, 169.254.169.254): 403"
is "$(cat "$WS/probe.out")" "denied: ENETUNREACH" "a direct connection to 198.18.0.10:80 from inside has no route"

r=$(tail -n 1 "$EV")
is "$(jf "$r" type) $(jf "$r" subject.exit)" "session.end 0" "the session's stream ends with session.end (exit 0)"
"$AIRLOCK" verify "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "the session's stream verifies"
sed 's/^/# /' "$T/verify.out"

# --- shadow: the denied host is reached and recorded would_block --------------------------

EV="$T/shadow.jsonl"
sandbox shadow 'curl -sS --max-time 20 http://other.airlock.test/run-shadow'
like "$(cat "$T/out")" '^hello from 198\.18\.0\.13:80 method=GET path=/run-shadow ' "shadow: curl to a host not on the list goes ahead"
r=$(last_receipt egress.block)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.host)" "would_block egress.default other.airlock.test" \
	"and is recorded would_block"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
is "$?" 0 "the shadow session's stream verifies"

# An agent that hangs up in the middle of a download: the proxy's splice
# into the closed socket must not take the session down (SIGPIPE).
EV="$T/hangup.jsonl"
sandbox enforce '
curl -sS -p --max-time 20 http://api.airlock.test/bytes/200000000 2>/dev/null | head -c 10 > /dev/null
sleep 0.3
curl -sS --max-time 20 http://api.airlock.test/after-hangup
'
is "$?" 0 "an agent that hangs up mid-tunnel: the session goes on and ends normally"
like "$(cat "$T/out")" 'path=/after-hangup' "the next request is served"
like "$(tail -n 1 "$EV")" '"type":"session.end".*"exit":0' "and session.end is written"

sleep 0.5
is "$(net_count srv=sink)" 0 "no sink saw any connection"
done_testing
