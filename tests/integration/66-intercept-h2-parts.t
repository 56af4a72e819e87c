#!/bin/sh
# Parts of HTTP/2 streams beyond a plain exchange (docs/PROXY.md "HTTP/2"),
# through the standalone proxy, with an h2 upstream of the test's own
# (h2server.py): interim answers (103 Early Hints) relayed with their
# fields scrubbed; request trailers through the filters (the placeholder
# substituted in a trailer its secret binds, the stream refused for one
# elsewhere); and coded answers (docs/SECRETS.md "Compressed answers"): an
# h2 upstream of
# the test's own (h2server.py /coded) ignores accept-encoding: identity and
# echoes the injected value inside gzip, deflate, br and zstd bodies and a
# chain of two, in 100-byte DATA frames. The agent (curl --http2)
# gets the decoded, scrubbed body without content-encoding, never the
# value, with the scrubbed trailer; a coding the proxy cannot decode and a
# corrupt coded body are a 502 on their stream with a receipt naming the
# coding, a body truncated after its head went out is cut.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import h2, httpx' 2>/dev/null; then
	echo "1..0 # SKIP python3-h2 or python3-httpx missing"
	exit 0
fi
ip addr add 198.18.0.20/32 dev lo || { echo "Bail out! ip addr add"; exit 1; }
PL_TLS_NAMES="$PL_TLS_NAMES h2.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | $PY -c '
import json, sys
z = json.load(sys.stdin)
z["h2.airlock.test"] = ["198.18.0.20"]
print(json.dumps(z))')
pl_start_net
H2LOG="$T/h2.log"
: > "$H2LOG"
$PY "$AIRLOCK_SRC/tests/helpers/h2server.py" --listen 198.18.0.20:443 \
	--cert "$T/tls/leaf.pem" --key "$T/tls/leaf.key" --log "$H2LOG" --ready "$T/h2.ready" \
	--lifetime 300 > "$T/h2server.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/h2.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/h2.ready" ] || { echo "Bail out! h2server.py: $(cat "$T/h2server.out")"; exit 1; }

HAVE_BR=no
HAVE_ZSTD=no
command -v brotli > /dev/null 2>&1 && HAVE_BR=yes
command -v zstd > /dev/null 2>&1 && HAVE_ZSTD=yes
diag "brotli: $HAVE_BR, zstd: $HAVE_ZSTD (scripts/install-deps --test installs both)"

VALUE="tok_0123456789abcdefghijklmnopqrstuvwxyzABCD"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["h2.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN", "hosts": ["h2.airlock.test"],
             "headers": ["authorization", "x-api-key"] }
  }
}
EOF
TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")
SCA="$T/session-ca.pem"

for c in gzip deflate br zstd gzip,br; do
	case $c in
	*br*) [ $HAVE_BR = yes ] || { ok 0 "# SKIP $c: no brotli"; continue; } ;;
	esac
	case $c in
	*zstd*) [ $HAVE_ZSTD = yes ] || { ok 0 "# SKIP $c: no zstd"; continue; } ;;
	esac
	h2c "https://h2.airlock.test/coded?c=$c" -H "Authorization: Bearer $PH"
	is "$CODE $VER $(head -1 "$T/b") $(tail -1 "$T/b") $(wc -l < "$T/b")" \
		"200 2 first Bearer $PH last Bearer $PH 1502" \
		"$c on an h2 stream: decoded and scrubbed, whole" || diag_file "$T/curl.err"
	! grep -qi '^content-encoding' "$T/h"
	ok $? "$c: no content-encoding"
	! grep -q "$VALUE" "$T/h" "$T/b"
	ok $? "$c: the value is nowhere in what the agent got"
	like "$(grep -i '^x-trailer:' "$T/h")" "Bearer $PH" "$c: the trailer scrubbed"
done
like "$(grep '"path": "/coded' "$H2LOG" | tail -1)" '"accept-encoding", "identity"' \
	"... each asked for identity"

# failures: 502 on the stream, with a receipt naming the coding
h2c "https://h2.airlock.test/coded?c=compress" -H "Authorization: Bearer $PH"
is "$CODE $VER" "502 2" "a coding the proxy cannot decode (compress): 502 on the stream"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'upstream\.coding' "... X-Airlock-Rule upstream.coding"
! grep -q "filler" "$T/b"
ok $? "... nothing of the coded body relayed"
wait_grep "$EV" '"rule":"upstream.coding".*"coding":"compress"'
like "$(grep '"rule":"upstream.coding"' "$EV" | tail -1)" '"protocol":"h2"' "... proxy.error names the coding"

h2c "https://h2.airlock.test/coded?c=gzip&bad=1" -H "Authorization: Bearer $PH"
is "$CODE $VER" "502 2" "a corrupt gzip body (the head held until its first decoded byte): 502"
! grep -q "$VALUE" "$T/b"
ok $? "... the value not relayed"
wait_grep "$EV" '"rule":"upstream.coding".*"coding":"gzip"'
ok $? "... proxy.error names gzip"
n0=$(grep -c '"rule":"upstream.coding"' "$EV")
h2c "https://h2.airlock.test/coded?c=gzip&bad=2" -H "Authorization: Bearer $PH"
like "$(cat "$T/curl.err")" 'INTERNAL_ERROR|stream|HTTP/2' \
	"a gzip body truncated after its first half (its head already relayed): the stream is reset (cut)"
is "$(grep -c "$VALUE" "$T/b")" 0 "... the value not relayed"
wait_grep "$EV" '"rule":"upstream.coding".*"request_path":"/coded"' 5
[ "$(grep -c '"rule":"upstream.coding"' "$EV")" -gt "$n0" ]
ok $? "... with a receipt"

# --- interim answers ----------------------------------------------------------------
h2c https://h2.airlock.test/early -H "Authorization: Bearer $PH"
is "$CODE $VER $(cat "$T/b")" "200 2 ok" "an answer after a 103"
like "$(grep -i '^HTTP/2 103' "$T/h")" '103' "... the 103 (Early Hints) is relayed"
like "$(grep -i '^link:' "$T/h")" "k=Bearer $PH" "... its link field carries the placeholder"
like "$(grep -i '^x-echo:' "$T/h" | head -1)" "Bearer $PH" "... and so does its x-echo"
! grep -q "$VALUE" "$T/h"
ok $? "... the value is in none of the heads"

# --- request trailers ----------------------------------------------------------------
# h2trail PATH NAME VALUE: a request with a body and one trailer, from
# tests/helpers/h2client.py (python3-h2, ALPN h2 alone) through a CONNECT
# tunnel; prints the status and rule
printf 'body bytes' > "$T/trail-body"
h2trail() {
	_o=$($PY "$AIRLOCK_SRC/tests/helpers/h2client.py" "$PROXY" "$SCA" "$T" POST \
		"https://h2.airlock.test$1" --stream "$T/trail-body" --trailer "$2: $3" \
		"te: trailers" 2>&1)
	_r=$(sed -n 's/^x-airlock-rule: //p' "$T/h")
	echo "${_o% *} ${_r:--}"
}
out=$(h2trail /echo-trailer x-api-key "$PH")
is "$out" "200 -" "a request trailer that carries the placeholder where its secret is bound"
r=$(grep '"path": "/echo-trailer"' "$H2LOG" | tail -1)
like "$r" "\"trailers\": \[\[\"x-api-key\", \"$VALUE\"\]\]" "... reaches the upstream with the value"
wait_grep "$EV" '"type":"secret.inject".*"trailer":"X-Api-Key"'
ok $? "... recorded as secret.inject naming the trailer"
out=$(h2trail /refused-trailer x-other "$PH")
like "$out" '^403 secrets\.tok' "the placeholder in a trailer its secret does not bind: 403 on the stream"
is "$(grep -c '"path": "/refused-trailer"' "$H2LOG")" 0 "... the upstream never got the request whole"
like "$(grep '"type":"secret.block"' "$EV" | tail -1)" '"path":"/refused-trailer"' "... secret.block"

kill -0 "$PL_PROXY_PID" 2>/dev/null
ok $? "the proxy is still running" || diag_file "$T/proxy.err"

done_testing
