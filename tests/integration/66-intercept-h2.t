#!/bin/sh
# HTTP/2 inside interception (docs/PROXY.md, SPEC 5.3), through the
# standalone proxy: ALPN per connection (h2 on both sides, or HTTP/1.1 on
# both when the upstream does not speak h2); every stream one exchange
# through the filters: substitution in HPACK-decoded headers, the
# placeholder refused in :path, :authority equal to the intercepted host,
# the value scrubbed from headers, DATA and trailers; a refused stream
# answered while the others on the connection go on; http.request per
# stream; gRPC unary, server-streaming and bidirectional calls; a long
# stream; hostile clients (PING and SETTINGS floods, rapid reset,
# CONTINUATION flood, an HPACK bomb) bounded with proxy.error while the
# proxy serves others.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import h2, grpc, httpx' 2>/dev/null; then
	echo "1..0 # SKIP python3-h2, python3-grpcio or python3-httpx missing"
	exit 0
fi
ip addr add 198.18.0.20/32 dev lo && ip addr add 198.18.0.21/32 dev lo ||
	{ echo "Bail out! ip addr add"; exit 1; }
PL_TLS_NAMES="$PL_TLS_NAMES h2.airlock.test grpc.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | $PY -c '
import json, sys
z = json.load(sys.stdin)
z["h2.airlock.test"] = ["198.18.0.20"]
z["grpc.airlock.test"] = ["198.18.0.21"]
z["h2other.airlock.test"] = ["198.18.0.20"]
print(json.dumps(z))')
pl_start_net
H2LOG="$T/h2.log"
: > "$H2LOG"
$PY "$AIRLOCK_SRC/tests/helpers/h2server.py" --listen 198.18.0.20:443 --grpc 198.18.0.21:443 \
	--cert "$T/tls/leaf.pem" --key "$T/tls/leaf.key" --log "$H2LOG" --ready "$T/h2.ready" \
	--lifetime 300 > "$T/h2server.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/h2.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/h2.ready" ] || { echo "Bail out! h2server.py: $(cat "$T/h2server.out")"; exit 1; }

VALUE="tok_0123456789abcdefghijklmnopqrstuvwxyzABCD"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "h2.airlock.test", "grpc.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN",
             "hosts": ["api.airlock.test", "h2.airlock.test", "grpc.airlock.test"],
             "headers": ["authorization", "x-api-key"] }
  }
}
EOF
TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")
SCA="$T/session-ca.pem"

# h2c URL [CURL ARGS]: curl --http2 through the proxy; $CODE, $VER, $T/h, $T/b
h2c() {
	_u=$1
	shift
	: > "$T/h"
	: > "$T/b"
	_o=$(curl -sS --http2 --max-time 20 --proxy "http://$PROXY" --cacert "$SCA" \
		-D "$T/h" -o "$T/b" -w '%{http_code} %{http_version}' "$@" "$_u" 2>"$T/curl.err")
	CURL_RC=$?
	CODE=${_o% *}
	VER=${_o#* }
}

# --- ALPN ------------------------------------------------------------------------
h2c https://h2.airlock.test/echo -H "Authorization: Bearer $PH"
is "$CODE $VER" "200 2" "curl --http2 to an h2 upstream: h2 on the client's side"
r=$(grep '"path": "/echo"' "$H2LOG" | tail -1)
like "$r" "\"authorization\", \"Bearer $VALUE\"" "the upstream got the real value in the HPACK-decoded header"
! printf '%s' "$r" | grep -q "$PH"
ok $? "... and not the placeholder"
like "$r" '"accept-encoding", "identity"' "... asked for identity encoding"
! grep -q "$VALUE" "$T/h" "$T/b"
ok $? "the value echoed in a header, the DATA frames and a trailer never reaches the client"
like "$(grep -i '^x-echo:' "$T/h")" "Bearer $PH" "... the header carries the placeholder instead"
is "$(grep -c "Bearer $PH" "$T/b")" 3 "... the body too, split across 7-byte DATA frames"
like "$(grep -i '^x-trailer:' "$T/h")" "Bearer $PH" "... and the trailer"
wait_grep "$EV" '"type":"http.request".*"path":"/echo"'
r=$(grep '"type":"http.request"' "$EV" | grep '"path":"/echo"' | tail -1)
is "$(jf "$r" subject.status) $(jf "$r" subject.protocol) $(jf "$r" subject.method) $(jf "$r" subject.host)" \
	"200 h2 GET h2.airlock.test" "http.request per stream, with protocol h2"
r=$(grep '"type":"egress.allow"' "$EV" | grep '"intercepted":true' | grep h2.airlock | tail -1)
is "$(jf "$r" subject.protocol)" h2 "egress.allow names the protocol chosen"

h2c https://api.airlock.test/v1/h1 -H "Authorization: Bearer $PH"
is "$CODE $VER" "200 1.1" "curl --http2 to an HTTP/1.1-only upstream: HTTP/1.1 on both sides"
like "$(net_last line~/v1/h1)" "\"Authorization\", \"Bearer $VALUE\"" "... substituted as before"

h2c https://h2.airlock.test/len -H "x-api-key: $PH" --http1.1
is "$CODE" "502" "a client that offers only http/1.1 to an h2-only upstream: 502 (HTTP/1.1 cannot be relayed to it)"
done_testing
