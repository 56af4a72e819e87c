#!/bin/sh
# An HTTP/1.1 client with an h2-only upstream (docs/PROXY.md "HTTP/2",
# SPEC 5.3: the upstream's protocol is chosen independently of the
# agent's), through the standalone proxy. The upstream (h2server.py)
# offers ALPN h2 alone; an HTTP/1.1 request sent to it once got a 502.
# Now the proxy asks the upstream for h2 and http/1.1 and, when it picks
# h2, carries each HTTP/1.1 request (after every filter) as one h2
# stream and the answer back as HTTP/1.1 (h2up.c): substitution in a
# header, a body by length, the value scrubbed from the echoed header,
# body and trailer, an answer of no announced length chunked, one of
# known length by its length, several requests on one client connection,
# and an http.request receipt naming both protocols.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import h2' 2>/dev/null; then
	echo "1..0 # SKIP python3-h2 missing"
	exit 0
fi
ip addr add 198.18.0.20/32 dev lo && ip addr add 198.18.0.21/32 dev lo ||
	{ echo "Bail out! ip addr add"; exit 1; }
PL_TLS_NAMES="$PL_TLS_NAMES h2.airlock.test ws.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | $PY -c '
import json, sys
z = json.load(sys.stdin)
z["h2.airlock.test"] = ["198.18.0.20"]
z["ws.airlock.test"] = ["198.18.0.21"]
print(json.dumps(z))')
pl_start_net
H2LOG="$T/h2.log"
: > "$H2LOG"
# ALPN h2 alone: an HTTP/1.1 upstream connection is not on offer
$PY "$AIRLOCK_SRC/tests/helpers/h2server.py" --listen 198.18.0.20:443 \
	--cert "$T/tls/leaf.pem" --key "$T/tls/leaf.key" --log "$H2LOG" --ready "$T/h2.ready" \
	--alpn h2 --lifetime 300 > "$T/h2server.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
# h2 when offered, else HTTP/1.1 for a WebSocket
$PY "$AIRLOCK_SRC/tests/helpers/h2server.py" --listen 198.18.0.21:443 \
	--cert "$T/tls/leaf.pem" --key "$T/tls/leaf.key" --log "$H2LOG" --ready "$T/ws.ready" \
	--alpn h2,http/1.1 --lifetime 300 > "$T/wsserver.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while { [ ! -f "$T/h2.ready" ] || [ ! -f "$T/ws.ready" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/h2.ready" ] || { echo "Bail out! h2server.py: $(cat "$T/h2server.out")"; exit 1; }

VALUE="tok_0123456789abcdefghijklmnopqrstuvwxyzABCD"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["h2.airlock.test", "ws.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN", "hosts": ["h2.airlock.test", "ws.airlock.test"],
             "headers": ["authorization", "x-api-key"] }
  }
}
EOF
TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")
SCA="$T/session-ca.pem"

# h1c URL [CURL ARGS...]: curl --http1.1 through the proxy ($CODE, $VER,
# $T/h, $T/b)
h1c() {
	_u=$1
	shift
	: > "$T/h"
	: > "$T/b"
	_o=$(curl -sS --http1.1 --max-time 20 --proxy "http://$PROXY" --cacert "$SCA" \
		-D "$T/h" -o "$T/b" -w '%{http_code} %{http_version}' "$@" "$_u" 2>"$T/curl.err")
	CODE=${_o% *}
	VER=${_o#* }
}

h1c https://h2.airlock.test/echo -H "Authorization: Bearer $PH"
is "$CODE $VER" "200 1.1" "curl --http1.1 to an h2-only upstream: answered over HTTP/1.1"
[ "$CODE" = 200 ] || { diag_file "$T/curl.err"; diag_file "$T/b"; tail -5 "$T/proxy.err" >&2; }
r=$(grep '"path": "/echo"' "$H2LOG" | tail -1)
like "$r" "\"authorization\", \"Bearer $VALUE\"" "the upstream got the real value in an h2 header"
like "$r" '":authority", "h2.airlock.test"' "... :authority from Host"
[ "$CODE" = 200 ] && ! grep -q "$VALUE" "$T/h" "$T/b"
ok $? "the value echoed in a header, the body and a trailer never reaches the client"
like "$(grep -i '^x-echo:' "$T/h")" "Bearer $PH" "... the header carries the placeholder instead"
is "$(grep -c "Bearer $PH" "$T/b")" 3 "... the body too, split across 7-byte DATA frames"
is "$(grep -ci '^transfer-encoding: *chunked' "$T/h") $(grep -ci '^x-trailer:' "$T/h")" "1 0" \
	"an answer of no announced length comes chunked, its trailer not relayed (HTTP/1.1 answer trailers never are)"
wait_grep "$EV" '"type":"http.request".*"path":"/echo"'
r=$(grep '"type":"http.request"' "$EV" | grep '"path":"/echo"' | tail -1)
is "$(jf "$r" subject.status) $(jf "$r" subject.protocol) $(jf "$r" subject.upstream_protocol)" \
	"200 http/1.1 h2" "http.request names both protocols"
r=$(grep '"type":"egress.allow"' "$EV" | grep '"intercepted":true' | tail -1)
is "$(jf "$r" subject.protocol) $(jf "$r" subject.upstream_protocol)" "http/1.1 h2" \
	"egress.allow names both sides' protocols"

h1c https://h2.airlock.test/len -H "x-api-key: $PH"
is "$CODE $(wc -l < "$T/b" | tr -d ' ') $(tail -1 "$T/b")" "200 3 $PH" \
	"an answer of known length (content-length upstream) relayed whole"
is "$(grep -c "$PH" "$T/b") $(grep -c "$VALUE" "$T/b")" "3 0" "... scrubbed"

head -c 200000 /dev/zero | tr '\0' 'x' > "$T/big"
h1c https://h2.airlock.test/post -H "x-api-key: $PH" --data-binary "@$T/big"
r=$(grep '"path": "/post"' "$H2LOG" | tail -1)
is "$CODE $(printf '%s' "$r" | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["body"]))')" \
	"200 200000" "a POST body of 200 KB (several stream windows) reaches the upstream whole"
like "$r" '"content-length", "200000"' "... with its length"
like "$r" "\"x-api-key\", \"$VALUE\"" "... and the real value"

printf 'chunk of a body of no announced length\n' > "$T/small"
h1c https://h2.airlock.test/chunked -H "x-api-key: $PH" -H "Transfer-Encoding: chunked" \
	--data-binary "@$T/small"
r=$(grep '"path": "/chunked"' "$H2LOG" | tail -1)
like "$r" '"body": "chunk of a body of no announced length\\n"' \
	"a chunked request body goes up as DATA, de-chunked"

# several requests on one client connection
_o=$(curl -sS --http1.1 --max-time 20 --proxy "http://$PROXY" --cacert "$SCA" \
	-H "x-api-key: $PH" -o /dev/null -o /dev/null -o /dev/null \
	-w '%{http_code} %{num_connects}\n' \
	https://h2.airlock.test/k1 "https://h2.airlock.test/len?k2" "https://h2.airlock.test/echo?k3" \
	2>"$T/curl.err")
is "$(printf '%s' "$_o" | tr '\n' ' ')" "200 1 200 0 200 0" \
	"three requests on one keep-alive client connection"
is "$(grep -c '"path": "/k1"\|"path": "/len?k2"\|"path": "/echo?k3"' "$H2LOG")" 3 \
	"... each one stream upstream"

# a WebSocket on a connection whose upstream chose h2: a request over h2,
# then the Upgrade, which goes on an upstream connection of its own asked
# for http/1.1 only
PROXY=$PROXY SCA=$SCA PH=$PH $PY - > "$T/ws.out" 2>&1 <<'PY'
import os, socket, ssl
host, port = os.environ["PROXY"].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
s.sendall(b"CONNECT ws.airlock.test:443 HTTP/1.1\r\nHost: ws.airlock.test:443\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
ctx = ssl.create_default_context(cafile=os.environ["SCA"])
ctx.set_alpn_protocols(["http/1.1"])
t = ctx.wrap_socket(s, server_hostname="ws.airlock.test")
ph = os.environ["PH"].encode()
def until(m):
    global buf
    while m not in buf:
        d = t.recv(65536)
        if not d:
            raise SystemExit("closed: %r" % buf[-200:])
        buf += d
    i = buf.index(m) + len(m)
    out, buf = buf[:i], buf[i:]
    return out
buf = b""
t.sendall(b"GET /len?first HTTP/1.1\r\nHost: ws.airlock.test\r\nx-api-key: " + ph + b"\r\n\r\n")
h = until(b"\r\n\r\n")
print("first", h.split(b" ")[1].decode())
if b"chunked" in h.lower():
    until(b"\r\n0\r\n\r\n")
t.sendall(b"GET /ws HTTP/1.1\r\nHost: ws.airlock.test\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Version: 13\r\nx-api-key: " + ph + b"\r\n\r\n")
h = until(b"\r\n\r\n")
frame = b"\x81\x05hello"
t.sendall(frame)
print("ws", h.split(b" ")[1].decode(), until(frame) == frame)
PY
is "$(sed -n 's/^first //p' "$T/ws.out") $(sed -n 's/^ws //p' "$T/ws.out")" "200 101 True" \
	"an Upgrade after a request over h2 on one client connection: 101, frames both ways" ||
	{ diag_file "$T/ws.out"; tail -5 "$T/proxy.err" >&2; }
r=$(grep '"ws": "/ws"' "$H2LOG" | tail -1)
# h2server.py logs "path" for an h2 stream, "ws" for the HTTP/1.1 upgrade
is "$(printf '%s' "$r" | grep -c '"alpn": "http/1.1"') $(grep -c '"path": "/len?first"' "$H2LOG")" "1 1" \
	"... the upgrade went on an upstream connection of HTTP/1.1, the request before it over h2"
like "$r" "\"x-api-key\", \"$VALUE\"" "... substituted as ever"

h1c https://h2.airlock.test/len -H "x-api-key: $PH"
kill -0 "$PL_PROXY_PID" 2>/dev/null && [ "$CODE" = 200 ]
ok $? "the proxy is still running and serving" || diag_file "$T/proxy.err"

done_testing
