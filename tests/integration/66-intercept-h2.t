#!/bin/sh
# HTTP/2 inside interception (docs/PROXY.md, SPEC 5.3), through the
# standalone proxy: ALPN per connection (h2 to every client that offers
# it, whatever the upstream chose: h2 on both sides, or h2 to the client
# and HTTP/1.1 to an HTTP/1.1-only upstream, 66-intercept-h2-h1up.t for
# that path in detail); every stream one exchange
# through the filters: substitution in HPACK-decoded headers, the
# placeholder refused in :path, :authority equal to the intercepted host,
# the value scrubbed from headers, DATA and trailers; a refused stream
# answered while the others on the connection go on; http.request per
# stream; gRPC unary, server-streaming and bidirectional calls; a long
# stream; curl --http2, httpx, Node's http2 and grpcio as clients; hostile
# clients (PING and SETTINGS floods, rapid reset,
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
PL_TLS_NAMES="$PL_TLS_NAMES h2.airlock.test grpc.airlock.test api.anthropic.com"
PL_ZONE=$(printf '%s' "$PL_ZONE" | $PY -c '
import json, sys
z = json.load(sys.stdin)
z["h2.airlock.test"] = ["198.18.0.20"]
z["grpc.airlock.test"] = ["198.18.0.21"]
z["h2other.airlock.test"] = ["198.18.0.20"]
z["api.anthropic.com"] = ["198.18.0.20"]
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
    "allow": ["api.airlock.test", "h2.airlock.test", "grpc.airlock.test", "api.anthropic.com"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN",
             "hosts": ["api.airlock.test", "h2.airlock.test", "grpc.airlock.test"],
             "headers": ["authorization", "x-api-key"] }
  },
  "spend": {
    "providers": [{"api": "anthropic", "hosts": ["api.anthropic.com"]}],
    "prices": {"claude-haiku-4-5": {"input": 1, "output": 5}},
    "cap_usd": 1, "ledger": "sqlite:$T/spend.db"
  }
}
EOF
# an idle connection closes after 2 s (test-only; 300 s in production):
# streams that outlast it while bytes move must not be cut
AIRLOCK_TEST_TIMEOUTS=idle=2000 TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")
SCA="$T/session-ca.pem"

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
is "$CODE $VER" "200 2" "curl --http2 (offering http/1.1 too) to an HTTP/1.1-only upstream: h2 all the same"
like "$(net_last line~/v1/h1)" "\"Authorization\", \"Bearer $VALUE\"" "... substituted as before (HTTP/1.1 upstream)"
wait_grep "$EV" '"upstream_protocol":"http/1.1"'
r=$(grep '"type":"egress.allow"' "$EV" | grep '"upstream_protocol":"http/1.1"' | tail -1)
is "$(jf "$r" subject.protocol) $(jf "$r" subject.upstream_protocol)" "h2 http/1.1" \
	"... egress.allow names each side's protocol"

h2c https://h2.airlock.test/len -H "x-api-key: $PH" --http1.1
is "$CODE $VER" "200 1.1" \
	"a client that offers only http/1.1 to an h2-only upstream: HTTP/1.1 carried over h2 (66-intercept-h1-h2up.t)"
h2c https://h2.airlock.test/stream?n=4 -H "Authorization: Bearer $PH"
is "$CODE $(grep -c "^chunk .* Bearer $PH\$" "$T/b")" "200 4" "a streamed answer (chunks 100 ms apart) relayed and scrubbed"

h2c https://h2.airlock.test/stream?n=35 -H "Authorization: Bearer $PH"
is "$CODE $(grep -c "^chunk .* Bearer $PH\$" "$T/b")" "200 35" \
	"a stream of 3.5 s (over the 2 s idle bound) is not cut while bytes move"

# --- refusals, per stream ------------------------------------------------------------
n0=$(wc -l < "$H2LOG")
h2c "https://h2.airlock.test/echo?k=$PH" -H "Authorization: Bearer $PH"
is "$CODE $VER" "403 2" "the placeholder in :path: 403 on the stream"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'secrets\.tok' "... X-Airlock-Rule names the secret"
like "$(cat "$T/b")" 'rule: secrets.tok; receipt: [0-9]+' "... the refusal's text names rule and receipt"
h2c https://h2.airlock.test/echo -H "Host: h2other.airlock.test" -H "Authorization: Bearer $PH"
is "$CODE" 403 "an :authority other than the intercepted host: 403"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'egress\.host_mismatch' "... egress.host_mismatch"
is "$(wc -l < "$H2LOG")" "$n0" "... neither refused stream reached the upstream"

# many streams on one connection, two of them refused: the others go on
$PY - "$PROXY" "$SCA" "$PH" > "$T/httpx.out" 2>&1 <<'PY'
import asyncio, sys, httpx
proxy, ca, ph = sys.argv[1:4]
async def main():
    async with httpx.AsyncClient(http2=True, proxies="http://" + proxy, verify=ca,
                                 timeout=20) as c:
        urls = ["https://h2.airlock.test/echo?i=%d" % i for i in range(20)]
        urls[5] = "https://h2.airlock.test/echo?bad=" + ph
        urls[13] = "https://h2.airlock.test/echo?bad2=" + ph
        rs = await asyncio.gather(*[c.get(u, headers={"x-api-key": ph}) for u in urls])
        for u, r in zip(urls, rs):
            print(r.http_version, r.status_code, "bad" in u, ph in r.text, "tok_" in r.text)
asyncio.run(main())
PY
is "$(grep -c '^HTTP/2 200 False True False$' "$T/httpx.out")" 18 \
	"httpx (http2=True): 18 concurrent streams answered over h2, scrubbed" || diag_file "$T/httpx.out"
is "$(grep -c '^HTTP/2 403 True' "$T/httpx.out")" 2 "... the 2 with the placeholder in :path refused, the others went on"

# Node's http2 module (through the CONNECT tunnel it opens itself)
if command -v node > /dev/null; then
	node - "$PROXY" "$SCA" "$PH" > "$T/node.out" 2>&1 <<'JS'
const http2 = require('http2'), net = require('net'), tls = require('tls'), fs = require('fs');
const [proxy, caFile, ph] = process.argv.slice(2);
const [h, p] = proxy.split(':');
const raw = net.connect(+p, h, () => raw.write('CONNECT h2.airlock.test:443 HTTP/1.1\r\nHost: h2.airlock.test:443\r\n\r\n'));
let buf = '';
raw.on('data', function head(d) {
	buf += d;
	if (!buf.includes('\r\n\r\n')) return;
	raw.removeListener('data', head);
	const s = tls.connect({ socket: raw, servername: 'h2.airlock.test', ca: fs.readFileSync(caFile),
				ALPNProtocols: ['h2'] }, () => {
		const c = http2.connect('https://h2.airlock.test', { createConnection: () => s });
		const req = c.request({ ':path': '/echo', authorization: 'Bearer ' + ph });
		let status, echo, body = '', trailer;
		req.on('response', (hs) => { status = hs[':status']; echo = hs['x-echo']; });
		req.on('trailers', (t) => { trailer = t['x-trailer']; });
		req.on('data', (d) => { body += d; });
		req.on('end', () => {
			console.log(s.alpnProtocol, status, echo === 'Bearer ' + ph, trailer === 'Bearer ' + ph,
				    body.includes('Bearer ' + ph), /tok_/.test(body + echo + trailer));
			c.close();
			s.destroy();
		});
		req.end();
	});
});
JS
	is "$(cat "$T/node.out")" "h2 200 true true true false" \
		"Node's http2 module: h2, the value in header, body and trailer comes back as the placeholder"
else
	ok 0 "# SKIP node missing"
fi

# a body larger than the windows goes up in bounded pieces
head -c 1500000 /dev/zero | tr '\0' 'x' > "$T/big"
h2c https://h2.airlock.test/upload -H "Authorization: Bearer $PH" --data-binary @"$T/big"
r=$(grep '"path": "/upload"' "$H2LOG" | tail -1)
is "$CODE $(printf '%s' "$r" | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["body"]))')" \
	"200 1500000" "a 1.5 MB body (23 stream windows) reaches the upstream whole"

kill -0 "$PL_PROXY_PID" 2>/dev/null || diag_file "$T/proxy.err"

# --- gRPC -------------------------------------------------------------------------------
grpc_proxy="http://$PROXY" $PY - "$SCA" "$PH" > "$T/grpc.out" 2>&1 <<'PY'
import sys, grpc
ca, ph = sys.argv[1:3]
creds = grpc.ssl_channel_credentials(open(ca, "rb").read())
ch = grpc.secure_channel("grpc.airlock.test:443", creds)
md = (("authorization", "Bearer " + ph),)
def show(name, call, msgs):
    init = dict(call.initial_metadata()).get("x-echo")
    trail = dict(call.trailing_metadata()).get("x-trailer")
    print(name, call.code().name, init == "Bearer " + ph, trail == "Bearer " + ph,
          all(m.endswith(("Bearer " + ph).encode()) for m in msgs), len(msgs),
          any(b"tok_" in m for m in msgs) or "tok_" in str(init) + str(trail))
u = ch.unary_unary("/test.Echo/Unary")
r, call = u.with_call(b"hi", metadata=md, timeout=20)
show("unary", call, [r])
s = ch.unary_stream("/test.Echo/ServerStream")
it = s(b"hi", metadata=md, timeout=20)
show("server-stream", it, list(it))
b = ch.stream_stream("/test.Echo/Bidi")
it = b(iter([b"a", b"b", b"c", b"d"]), metadata=md, timeout=20)
show("bidi", it, list(it))
import time
def slow():
    for i in range(8):
        time.sleep(0.4)
        yield b"m%d" % i
it = b(slow(), metadata=md, timeout=30)
show("long-bidi", it, list(it))
PY
for m in unary server-stream bidi long-bidi; do
	case $m in unary) n=1 ;; server-stream) n=3 ;; bidi) n=4 ;; long-bidi) n=8 ;; esac
	is "$(grep "^$m " "$T/grpc.out")" "$m OK True True True $n False" \
		"gRPC $m: OK; the value echoed in initial metadata, trailers and messages comes back as the placeholder" ||
		diag_file "$T/grpc.out"
done
is "$(grep -c "\"authorization\": \"Bearer $VALUE\"" "$H2LOG")" 4 \
	"... the gRPC server received the real value in every call (the 3.2 s bidi call over the 2 s idle bound included)"
like "$(grep '"type":"http.request"' "$EV" | grep '/test.Echo/Bidi' | tail -1)" '"status":200' \
	"... each call recorded as http.request"

# --- spend metering per stream -------------------------------------------------------------
# each stream is reserved (the filter waits for the ledger), forwarded,
# settled; a stream the meter refuses is answered while the others go on
$PY - "$PROXY" "$SCA" > "$T/spend.out" 2>&1 <<'PY'
import asyncio, json, sys, httpx
proxy, ca = sys.argv[1:3]
body = json.dumps({"model": "claude-haiku-4-5", "max_tokens": 100,
                   "messages": [{"role": "user", "content": "hi"}]})
async def main():
    async with httpx.AsyncClient(http2=True, proxies="http://" + proxy, verify=ca,
                                 timeout=20) as c:
        urls = ["https://api.anthropic.com/v1/messages"] * 6 + ["https://api.anthropic.com/v1/other"]
        rs = await asyncio.gather(*[c.post(u, content=body, headers={"content-type": "application/json"})
                                    for u in urls])
        for u, r in zip(urls, rs):
            print(r.http_version, r.status_code, u.rsplit("/", 1)[1], r.headers.get("x-airlock-rule", "-"))
asyncio.run(main())
PY
is "$(grep -c '^HTTP/2 200 messages -$' "$T/spend.out")" 6 "spend: 6 concurrent metered streams answered over h2" ||
	diag_file "$T/spend.out"
like "$(grep ' other ' "$T/spend.out")" '^HTTP/2 403 other spend\.' "... a path the meter does not know refused on its stream"
wait_receipts budget.charge 6
is "$(count_receipts budget.charge)" 6 "... each metered stream settled as budget.charge"
is "$(grep -c '"path": "/v1/messages"' "$H2LOG") $(grep -c '"path": "/v1/other"' "$H2LOG")" "6 0" \
	"... the refused stream never reached the provider"
like "$(grep '"type":"budget.charge"' "$EV" | tail -1)" '"model":"claude-haiku-4-5"' "... with the model of the call"

# --- hostile clients ---------------------------------------------------------------------
hostile() { # CASE
	$PY "$AIRLOCK_SRC/tests/helpers/h2hostile.py" "$PROXY" "$SCA" h2.airlock.test "$1" \
		> "$T/hostile.out" 2>&1
	HO=$(cat "$T/hostile.out")
}
still_serves() { # WHAT
	h2c https://h2.airlock.test/echo -H "Authorization: Bearer $PH"
	is "$CODE $VER" "200 2" "$1: the proxy goes on serving others"
}
errs() { grep -c '"type":"proxy.error"' "$EV"; }

e0=$(errs)
hostile ping-flood
like "$HO" 'closed 1' "PING flood: the connection is ended" || diag "$HO"
wait_grep "$EV" '"rule":"h2.client"'
like "$(grep '"rule":"h2.client"' "$EV" | tail -1)" 'Flooding' "... proxy.error h2.client names the flood"
still_serves "PING flood"

e0=$(errs)
hostile settings-flood
like "$HO" 'closed 1' "SETTINGS flood: the connection is ended" || diag "$HO"
wait_grep "$EV" '"rule":"h2.client".*' && [ "$(errs)" -gt "$e0" ]
ok $? "... with a proxy.error"
still_serves "SETTINGS flood"

e0=$(errs)
hostile rapid-reset
like "$HO" 'goaway|closed 1' "rapid reset: the connection is ended after the burst" || diag "$HO"
[ "$(errs)" -gt "$e0" ]
ok $? "... with a proxy.error"
still_serves "rapid reset"

e0=$(errs)
hostile continuation
like "$HO" 'closed 1|goaway' "CONTINUATION flood: the connection is ended" || diag "$HO"
wait_grep "$EV" 'CONTINUATION|continuation' 5
[ "$(errs)" -gt "$e0" ]
ok $? "... with a proxy.error"
still_serves "CONTINUATION flood"

n0=$(wc -l < "$H2LOG")
hostile hpack-bomb
like "$HO" 'status:1 431' "HPACK bomb (4 KB indexed, 400 KB decoded): 431 on its stream" || diag "$HO"
like "$HO" 'status:3 200' "... the next stream on the same connection is served"
is "$(grep -c '"/bomb"' "$H2LOG")" 0 "... the bomb never reached the upstream"
like "$(grep '"type":"proxy.error"' "$EV" | grep http.too-large | tail -1)" '"path":"/bomb"' \
	"... proxy.error http.too-large for the stream"

hostile streams
like "$HO" 'refused (4[0-9]|50)' "150 streams held open: those over 100 are refused (REFUSED_STREAM)" || diag "$HO"
still_serves "stream exhaustion"

done_testing
