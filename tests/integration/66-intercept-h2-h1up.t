#!/bin/sh
# An h2-only client with an HTTP/1.1-only upstream (docs/PROXY.md
# "HTTP/2", SPEC 5.3: the upstream's protocol is chosen independently of
# the agent's), through the standalone proxy. The client (python3-h2
# offering ALPN h2 alone, as gRPC clients do) once got the
# no_application_protocol alert; the upstream is the test network's TLS
# server (api.airlock.test), which offers no ALPN. The client is given
# h2 all the same, and each of its streams is one
# exchange through the filters, relayed to the upstream as an HTTP/1.1
# request one after another on one connection: substitution in headers,
# the placeholder refused in :path and :authority checked (nothing of a
# refused stream reaches the upstream, the others go on), bodies by
# length and by chunks both ways, answers by length, chunks and close,
# interim answers, HEAD, the value scrubbed from headers and body, and a
# malformed HTTP/1.1 answer a 502 on its stream with a receipt.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import h2' 2>/dev/null; then
	echo "1..0 # SKIP python3-h2 missing"
	exit 0
fi
pl_start_net

VALUE="tok_0123456789abcdefghijklmnopqrstuvwxyzABCD"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN", "hosts": ["api.airlock.test"],
             "headers": ["authorization", "x-api-key"] }
  }
}
EOF
TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")
SCA="$T/session-ca.pem"

# h2o: tests/helpers/h2client.py, a python3-h2 client offering ALPN h2
# alone, through a CONNECT tunnel. One request: h2o METHOD URL
# [--data FILE | --stream FILE] [HEADER...] ($CODE, $VER, $T/h, $T/b); or
# "many PH": a first stream, then 20 at once, two with the placeholder
# in :path.
h2o() {
	: > "$T/h"
	: > "$T/b"
	_o=$($PY "$AIRLOCK_SRC/tests/helpers/h2client.py" "$PROXY" "$SCA" "$T" "$@" 2>"$T/curl.err")
	CODE=${_o% *}
	VER=${_o#* }
}

h2o GET https://api.airlock.test/echo "Authorization: Bearer $PH"
is "$CODE $VER" "200 2" "an h2-only client to an HTTP/1.1-only upstream: h2 on the client's side"
[ "$VER" = 2 ] || { diag_file "$T/curl.err"; grep -h "proxy.error\|egress.allow" "$EV" | tail -3 >&2; tail -5 "$T/proxy.err" >&2; }
r=$(net_last line~/echo)
like "$r" "\"Authorization\", \"Bearer $VALUE\"" \
	"the upstream got an HTTP/1.1 request with the real value (names in HTTP/1.1's customary case)"
like "$(jf "$r" line)" '^GET /echo HTTP/1.1$' "... its request line"
is "$(jf "$r" host)" "api.airlock.test" "... and Host from :authority"
! grep -q "$VALUE" "$T/h" "$T/b"
ok $? "the value echoed in a header and the body never reaches the client"
like "$(grep -i '^x-echo:' "$T/h")" "Bearer $PH" "... the header carries the placeholder instead"
is "$(grep -c "Bearer $PH" "$T/b")" 2 "... the body too"
wait_grep "$EV" '"type":"http.request".*"path":"/echo"'
r=$(grep '"type":"http.request"' "$EV" | grep '"path":"/echo"' | tail -1)
is "$(jf "$r" subject.status) $(jf "$r" subject.protocol) $(jf "$r" subject.method)" "200 h2 GET" \
	"http.request for the stream"
r=$(grep '"type":"egress.allow"' "$EV" | grep '"intercepted":true' | tail -1)
is "$(jf "$r" subject.protocol) $(jf "$r" subject.upstream_protocol)" "h2 http/1.1" \
	"egress.allow names both sides' protocols"

h2o GET "https://api.airlock.test/echo?c=5" "x-api-key: $PH"
is "$CODE $VER $(grep -c "$PH" "$T/b") $(grep -c "$VALUE" "$T/b")" "200 2 2 0" \
	"a chunked answer (5-byte chunks) relayed as DATA, the value scrubbed across chunks"

h2o HEAD https://api.airlock.test/echo "x-api-key: $PH"
is "$CODE $VER $(grep -c '^echo ' "$T/b")" "200 2 0" "HEAD: the head only"
like "$(jf "$(net_last line~/echo)" line)" '^HEAD /echo HTTP/1.1$' "... asked upstream as HEAD"
h2o GET https://api.airlock.test/bytes/0 "x-api-key: $PH"
is "$CODE $VER $(wc -c < "$T/b" | tr -d ' ') $(grep -c x-h2client-reset "$T/h")" "200 2 0 0" \
	"an empty body by its length (Content-Length: 0) ends with its head (not left waiting, then reset)"

# a refused stream whose client sends its body only after the answer
# (curl 7.88 fails a stream reset under its upload): drained, it ends
# cleanly; past H2_DRAIN_MAX (256 KiB) it is reset with NO_ERROR
late() { $PY "$AIRLOCK_SRC/tests/helpers/h2client.py" "$PROXY" "$SCA" "$T" late "$@" 2>&1; }
is "$(late "https://api.airlock.test/echo?late=$PH" 1000 "x-api-key: $PH")" "403 ended" \
	"a refused stream's body sent after its answer is drained: the request ends cleanly, no reset"
is "$(late "https://api.airlock.test/echo?late2=$PH" 400000 "x-api-key: $PH")" "403 reset:0" \
	"... past 256 KiB of it the stream is reset (NO_ERROR)"
is "$(net_count "line~late")" 0 "... and neither reached the upstream"

# request bodies: by length, and without one (chunked upstream)
head -c 300000 /dev/zero | tr '\0' 'x' > "$T/big"
h2o POST https://api.airlock.test/upload-cl --data "$T/big" "x-api-key: $PH"
r=$(net_last line~/upload-cl)
is "$CODE $(jf "$r" framing) $(jf "$r" body_len)" "200 content-length 300000" \
	"a 300 KB body by length (several stream windows) reaches the upstream whole"
h2o PUT https://api.airlock.test/upload-ch --stream "$T/big" "x-api-key: $PH"
r=$(net_last line~/upload-ch)
is "$CODE $(jf "$r" framing) $(jf "$r" body_len)" "200 chunked 300000" \
	"a body of no announced length goes up chunked"
like "$(cat "$T/b")" 'body-length=300000' "... and the answer says so"

h2o GET https://api.airlock.test/evil/interim
is "$CODE $VER $(cat "$T/b")" "200 2 after interim" "interim answers (100, 102) before the final one"
h2o GET https://api.airlock.test/evil/close
is "$CODE $VER $(cat "$T/b")" "200 2 until close from tls 198.18.0.10:443" \
	"an answer delimited by the upstream's close ends the stream"
h2o GET "https://api.airlock.test/sse?n=3&gap=0.2"
is "$CODE $(grep -c '^data: ' "$T/b")" "200 3" "a streamed answer relayed as it comes"

# a malformed HTTP/1.1 answer: 502 on the stream, with a receipt
e0=$(grep -c '"rule":"upstream.malformed"' "$EV")
h2o GET https://api.airlock.test/evil/clte
is "$CODE $VER" "502 2" "an answer with both Content-Length and chunked: 502 on the stream"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'upstream\.malformed' "... X-Airlock-Rule upstream.malformed"
! grep -q smuggled "$T/b"
ok $? "... nothing of it reaches the client"
[ "$(grep -c '"rule":"upstream.malformed"' "$EV")" -gt "$e0" ]
ok $? "... with a proxy.error receipt"

# refusals, per stream
n0=$(net_count line~/echo)
h2o GET "https://api.airlock.test/echo?k=$PH" "Authorization: Bearer $PH"
is "$CODE $VER" "403 2" "the placeholder in :path: 403 on the stream"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'secrets\.tok' "... X-Airlock-Rule names the secret"
h2o GET https://api.airlock.test/echo "Host: other.airlock.test" "Authorization: Bearer $PH"
is "$CODE" 403 "an :authority other than the intercepted host: 403"
like "$(grep -i '^x-airlock-rule:' "$T/h")" 'egress\.host_mismatch' "... egress.host_mismatch"
is "$(net_count line~/echo)" "$n0" "... neither refused stream reached the upstream"

# many concurrent streams on one h2 connection (after a first one): each
# goes up in turn on the HTTP/1.1 connection; two are refused, the others
# go on
$PY "$AIRLOCK_SRC/tests/helpers/h2client.py" "$PROXY" "$SCA" "$T" many "$PH" > "$T/httpx.out" 2>&1
is "$(grep -c '^HTTP/2 200 False True False$' "$T/httpx.out")" 18 \
	"an h2-only client: 18 concurrent streams answered over h2, scrubbed" || diag_file "$T/httpx.out"
is "$(grep -c '^HTTP/2 403 True' "$T/httpx.out")" 2 "... the 2 with the placeholder in :path refused"
is "$(net_count line~/echo?i=)" 18 "... the upstream got the 18 others"
like "$(net_last line~/echo?i=)" '"n": 19,' \
	"... one after another on the connection that carried the first stream"
is "$(net_count line~bad)" 0 "... and neither refused one"

kill -0 "$PL_PROXY_PID" 2>/dev/null
ok $? "the proxy is still running" || diag_file "$T/proxy.err"

done_testing
