#!/bin/sh
# The egress proxy's protocol handling (docs/PROXY.md):
# the TLS ClientHello of a CONNECT must carry an SNI equal to the CONNECT
# host; requests are parsed strictly (400 and a proxy.error receipt, and
# the proxy goes on serving); hop-by-hop headers are dropped and bodies
# relayed byte for byte; one slow client cannot stall the others.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "git.airlock.test", "www.airlock.test",
              "port.airlock.test:8081", "closed.airlock.test", "198.18.0.12"],
    "deny": ["private.cdn.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
pl_start_net
pl_start_proxy_ok

# still_serving DESC: an allowed request right after is answered.
still_serving() {
	req "http://api.airlock.test/ok"
	allowed_http "$1: the proxy still serves" 198.18.0.10:80 /ok 'api\.airlock\.test(:80)?'
}

# sclient CONNECT-HOST:PORT [OPENSSL ARGS...]: a TLS client through the
# proxy that sends one GET (Connection: close); output in $T/sc.
sclient() {
	_t=$1
	shift
	printf 'GET /tls HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "${_t%:*}" |
		timeout 20 openssl s_client -quiet -proxy "$PROXY" -connect "$_t" \
			-CAfile "$CA" "$@" > "$T/sc" 2>&1
}

# --- TLS: the SNI must be the CONNECT host ----------------------------------------

sclient api.airlock.test:443 -servername api.airlock.test
like "$(grep -a 'hello from' "$T/sc")" '^hello from tls 198\.18\.0\.10:443 method=GET path=/tls host=api\.airlock\.test ' \
	"CONNECT api.airlock.test:443 with SNI api.airlock.test: tunnelled"
is "$(jf "$(net_last srv=tls event=handshake)" sni)" "api.airlock.test" "the upstream saw that SNI"
r=$(last_receipt egress.allow)
is "$(jf "$r" rule) $(jf "$r" subject.method) $(jf "$r" subject.host) $(jf "$r" subject.port)" \
	"egress.allow[0] CONNECT api.airlock.test 443" "egress.allow receipt for the tunnel"
ntls=$(net_count srv=tls event=connect)

nblock=$(count_receipts egress.block)
sclient api.airlock.test:443 -servername git.airlock.test
wait_receipts egress.block $((nblock + 1))
r=$(last_receipt egress.block)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.host)" "block egress.sni_mismatch api.airlock.test" \
	"CONNECT api.airlock.test:443 with SNI git.airlock.test (also allowed): egress.sni_mismatch"
! grep -aq 'hello from' "$T/sc"
ok $? "the client got no answer through the tunnel"
is "$(net_count srv=tls event=connect)" "$ntls" "the upstream saw no connection"

sclient api.airlock.test:443 -servername private.cdn.airlock.test
wait_receipts egress.block $((nblock + 2))
is "$(jf "$(last_receipt egress.block)" rule)" "egress.sni_mismatch" "SNI naming a denied host: egress.sni_mismatch"
sclient api.airlock.test:443 -noservername
wait_receipts egress.block $((nblock + 3))
is "$(jf "$(last_receipt egress.block)" rule)" "egress.sni_mismatch" "a ClientHello without SNI: egress.sni_mismatch"
sclient api.airlock.test:443 -servername api.airlock.test.evil.test
wait_receipts egress.block $((nblock + 4))
is "$(jf "$(last_receipt egress.block)" rule)" "egress.sni_mismatch" "SNI api.airlock.test.evil.test: egress.sni_mismatch"
sclient 198.18.0.12:443
wait_receipts egress.block $((nblock + 5))
is "$(jf "$(last_receipt egress.block)" rule)" "egress.sni_mismatch" "TLS to an IP literal on 443 (no SNI possible): egress.sni_mismatch"
is "$(net_count listen=198.18.0.12:443)" 0 "198.18.0.12:443 saw no connection"

raw "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\n\r\nGET / HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
is "$CODE" 200 "CONNECT then plain HTTP to 443: the CONNECT is answered 200"
wait_receipts egress.block $((nblock + 6))
r=$(last_receipt egress.block)
is "$(jf "$r" rule) $(jf "$r" subject.host)" "egress.sni_mismatch api.airlock.test" "a first flight that is not TLS on 443: egress.sni_mismatch"
is "$(grep -c 'hello from' "$T/b")" 0 "and nothing came back through the tunnel"
is "$(net_count srv=tls event=connect)" "$ntls" "the TLS upstream saw none of these tunnels"

# --- ClientHello tricks: split, pipelined, two names ------------------------------

# hello_via DESC HOST SEND-ARGS -- HELLO-ARGS: CONNECT HOST:443, then the
# ClientHello testnet.py hello HELLO-ARGS writes, in the same write (no
# waiting for the 200) or as SEND-ARGS say. Sets TLSNEW to the number of
# new connections the TLS upstreams saw and R to the newest egress
# receipt.
hello_via() {
	_h=$1
	shift
	_sa=""
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		_sa="$_sa $1"
		shift
	done
	shift
	python3 "$TESTNET" hello "$@" > "$T/hello.bin"
	{ printf 'CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n' "$_h" "$_h"; cat "$T/hello.bin"; } > "$T/hello.req"
	_n0=$(net_count srv=tls event=connect)
	_e0=$(grep -c '"type":"egress\.' "$EV")
	# shellcheck disable=SC2086
	raw_file "$T/hello.req" --idle 1 $_sa
	wait_receipts 'egress\.[a-z]*' $((_e0 + 1))
	sleep 0.3
	TLSNEW=$(($(net_count srv=tls event=connect) - _n0))
	R=$(grep '"type":"egress\.' "$EV" | tail -n 1)
}
hello_via api.airlock.test -- --sni api.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.allow egress.allow[0] 1" \
	"a ClientHello sent in the same write as the CONNECT: checked and forwarded"
hello_via api.airlock.test -- --sni git.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"the same with SNI git.airlock.test: egress.sni_mismatch, no upstream connection"
hello_via api.airlock.test --trickle 0.002 -- --sni api.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.allow egress.allow[0] 1" \
	"a ClientHello sent one byte per write: reassembled and forwarded"
hello_via api.airlock.test --trickle 0.002 -- --sni git.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"one byte per write with SNI git.airlock.test: egress.sni_mismatch"
hello_via api.airlock.test -- --sni api.airlock.test --records 4
is "$(jf "$R" type) $TLSNEW" "egress.allow 1" "a ClientHello split over 4 TLS records: forwarded"
is "$(jf "$(net_last srv=tls event=handshake)" sni)" "api.airlock.test" "and the upstream reads the SNI from those records"
hello_via api.airlock.test -- --sni git.airlock.test --records 4
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"split over 4 records with SNI git.airlock.test: egress.sni_mismatch"
hello_via api.airlock.test -- --names api.airlock.test
is "$(jf "$R" type) $TLSNEW" "egress.allow 1" "control: a crafted ClientHello with SNI api.airlock.test is forwarded"
hello_via api.airlock.test -- --names api.airlock.test,git.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"a server_name list with two names (the first the CONNECT host): denied"
hello_via api.airlock.test -- --names git.airlock.test,api.airlock.test
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"a server_name list with two names (the second the CONNECT host): denied"
hello_via api.airlock.test -- --names api.airlock.test,git.airlock.test --dup
is "$(jf "$R" type) $(jf "$R" rule) $TLSNEW" "egress.block egress.sni_mismatch 0" \
	"two server_name extensions: denied"

sclient API.Airlock.Test:443 -servername api.airlock.test
like "$(grep -a 'hello from' "$T/sc")" '^hello from tls 198\.18\.0\.10:443 ' \
	"CONNECT API.Airlock.Test:443 with SNI api.airlock.test: equal after normalisation"

# Not 443, not TLS (plain HTTP inside a tunnel): allowed, "tls": false.
raw "CONNECT port.airlock.test:8081 HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\nGET /in-tunnel HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\n"
is "$CODE" 200 "CONNECT port.airlock.test:8081: 200"
like "$(grep -a 'hello from' "$T/b")" '^hello from 198\.18\.0\.11:8081 method=GET path=/in-tunnel ' \
	"a non-TLS first flight on another port goes through unchanged"
r=$(last_receipt egress.allow)
is "$(jf "$r" rule) $(jf "$r" subject.port) $(jf "$r" subject.tls)" "egress.allow[3] 8081 false" \
	"its egress.allow receipt says tls: false"

# Upstream refused.
n=$(grep -c '"rule":"upstream.connect"' "$EV")
sclient closed.airlock.test:443 -servername closed.airlock.test
i=0
while [ "$(grep -c '"rule":"upstream.connect"' "$EV")" -le "$n" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
r=$(grep '"rule":"upstream.connect"' "$EV" | tail -n 1)
like "$(jf "$r" type)/$(jf "$r" decision)/$(jf "$r" subject.host)" '^(proxy\.error|egress\.block)/block/closed\.airlock\.test$' \
	"CONNECT closed.airlock.test:443 (nothing listens): the tunnel is closed, receipt upstream.connect"
req http://closed.airlock.test/
like "$(verdict)" '^502 upstream\.connect (egress\.block|proxy\.error)/block/upstream\.connect$' \
	"nothing listens at closed.airlock.test:80: 502 upstream.connect"
like "$(cat "$T/b")" 'closed\.airlock\.test' "the body names the target"

# --- strict parsing: 400, a proxy.error receipt, and the proxy goes on -------------

# bad DESC DATA / bad_file DESC FILE: the request is answered 400 with a
# proxy.error receipt, and an allowed request right after is served.
bad() {
	raw "$2"
	malformed "$1"
	cp "$T/h" "$T/bad.h"
	cp "$T/raw.report" "$T/bad.report"
	req "http://api.airlock.test/after-bad"
	is "$CODE" 200 "$1: the next request is served"
	cp "$T/bad.h" "$T/h"
}
bad_file() {
	raw_file "$2"
	malformed "$1"
	cp "$T/h" "$T/bad.h"
	cp "$T/raw.report" "$T/bad.report"
	req "http://api.airlock.test/after-bad"
	is "$CODE" 200 "$1: the next request is served"
	cp "$T/bad.h" "$T/h"
}

nup=$(net_count srv=http event=request)
bad "absolute-URI with a Host header naming another host" "GET http://api.airlock.test/ HTTP/1.1\r\nHost: private.cdn.airlock.test\r\n\r\n"
bad "absolute-URI with a Host header naming another port" "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test:8080\r\n\r\n"
bad "CONNECT with a Host header naming another host" "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: git.airlock.test:443\r\n\r\n"
bad "duplicate Host (even equal)" "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nHost: api.airlock.test\r\n\r\n"
bad "Content-Length with Transfer-Encoding (smuggling attempt)" "POST http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://private.cdn.airlock.test/ HTTP/1.1\r\nHost: private.cdn.airlock.test\r\n\r\n"
bad "two Content-Length headers" "POST http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"
bad "Transfer-Encoding other than chunked" "POST http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
bad "obs-fold" "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nX-A: one\r\n two\r\n\r\n"
bad "bare LF line endings" "GET http://api.airlock.test/ HTTP/1.1\nHost: api.airlock.test\n\n"
bad "a NUL in a header" "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nX-A: a\x00b\r\n\r\n"
bad "https:// in absolute form" "GET https://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
bad "origin-form outside a tunnel" "GET / HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
bad "HTTP/2.0 in the request line" "GET http://api.airlock.test/ HTTP/2.0\r\nHost: api.airlock.test\r\n\r\n"
bad "two spaces in the request line" "GET  http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
python3 -c 'import sys
sys.stdout.write("GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\n")
sys.stdout.write("X-Big: " + "a" * 33000 + "\r\n\r\n")' > "$T/big"
bad_file "a header block over 32 KiB" "$T/big"
python3 -c 'import sys
sys.stdout.write("GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\n")
sys.stdout.write("".join("X-F%d: v\r\n" % i for i in range(101)) + "\r\n")' > "$T/many"
bad_file "more than 100 header fields" "$T/many"
python3 -c 'import sys
sys.stdout.write("GET http://api.airlock.test/" + "a" * 8300 + " HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")' > "$T/long"
bad_file "a request line over 8 KiB" "$T/long"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" subject.error)" '.' "a proxy.error receipt says what was wrong ($(jf "$r" subject.error))"
is "$(jf "$(cat "$T/bad.report")" closed_by_peer)" true "the proxy closed the connection after the 400"
is "$(($(net_count srv=http event=request) - $(net_count srv=http event=request line~after-bad)))" "$nup" \
	"no malformed request reached an upstream"
still_serving "after the malformed requests"

# A valid request pipelined after a malformed one is never served: the
# connection is closed after the 400.
raw "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nHost: x\r\n\r\nGET http://api.airlock.test/smuggled HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
is "$CODE $(grep -ac 'HTTP/1.1' "$T/raw")" "400 1" "a request pipelined after a malformed one gets no answer"
is "$(net_count line~smuggled)" 0 "and never reaches the upstream"

# --- forwarding ---------------------------------------------------------------------

raw "GET http://api.airlock.test/hop HTTP/1.1\r\nHost: api.airlock.test\r\nConnection: X-Hop, Upgrade\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nTE: trailers\r\nUpgrade: h2c\r\nX-Keep: yes\r\n\r\n" --idle 1
is "$CODE" 200 "a request with hop-by-hop headers: 200"
up=$(net_last srv=http line~/hop)
is "$(jf "$up" line)" "GET /hop HTTP/1.1" "forwarded in origin-form"
hop=$(python3 -c 'import json, sys
h = [k.lower() for k, v in json.loads(sys.argv[1])["headers"]]
print(" ".join(sorted(set(h) & {"x-hop", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade", "trailer"})))' "$up")
is "$hop" "" "Connection-listed, Keep-Alive, Proxy-*, TE and Upgrade headers were not forwarded"
like "$(python3 -c 'import json, sys; print([v for k, v in json.loads(sys.argv[1])["headers"] if k.lower() == "x-keep"])' "$up")" "\['yes'\]" \
	"an end-to-end header was forwarded"
like "$(jf "$up" host)" '^api\.airlock\.test(:80)?$' "Host is the target"

printf 'bin\000ary\r\n\r\nbody\377' > "$T/bin"
req http://api.airlock.test/post --data-binary "@$T/bin" -H 'Content-Type: application/octet-stream'
{ printf 'hello from 198.18.0.10:80 method=POST path=/post host=api.airlock.test body-length=16\n'; cat "$T/bin"; } > "$T/want"
sed -i '1s/host=api.airlock.test:80 /host=api.airlock.test /' "$T/b"
cmp -s "$T/b" "$T/want"
ok $? "a Content-Length body (binary) reaches the upstream and its echo comes back byte for byte"
req http://api.airlock.test/chunked-in --data-binary "@$T/bin" -H 'Transfer-Encoding: chunked'
like "$(head -n 1 "$T/b")" 'method=POST path=/chunked-in .*body-length=16$' "a chunked request body is relayed (16 bytes)"
is "$(jf "$(net_last srv=http line~chunked-in)" body_sha256)" "$(sha256sum < "$T/bin" | cut -d' ' -f1)" "the upstream got exactly those bytes"
req http://api.airlock.test/expect --data-binary "@$T/bin" -H 'Expect: 100-continue'
is "$CODE $(head -n 1 "$T/b")" "200 hello from 198.18.0.10:80 method=POST path=/expect host=$(jf "$(net_last line~/expect)" host) body-length=16" \
	"Expect: 100-continue: the upstream's 100 and then its final answer are relayed"
head -c 2000000 /dev/urandom > "$T/big.bin"
req http://api.airlock.test/bigpost --data-binary "@$T/big.bin"
is "$(jf "$(net_last srv=http line~bigpost)" body_sha256)" "$(sha256sum < "$T/big.bin" | cut -d' ' -f1)" "a 2 MB body reaches the upstream intact"
tail -c 2000000 "$T/b" | cmp -s - "$T/big.bin"
ok $? "and its 2 MB echo comes back intact"
req http://api.airlock.test/chunked
is "$CODE $(head -n 1 "$T/b")" "200 hello from 198.18.0.10:80 method=GET path=/chunked host=$(jf "$(net_last srv=http line~/chunked)" host) body-length=0" \
	"a chunked response is relayed"

# --- what strict parsing still accepts ------------------------------------------------

raw "GET http://api.airlock.test/hp HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n" --idle 1
is "$CODE $(head -n 1 "$T/b" | cut -d' ' -f1-5)" "200 hello from 198.18.0.10:80 method=GET path=/hp" \
	"Host api.airlock.test:80 for http://api.airlock.test/: the same target, accepted"
raw "GET http://api.airlock.test/http10 HTTP/1.0\r\n\r\n" --idle 3
is "$CODE $(head -n 1 "$T/b" | cut -d' ' -f1-5)" "200 hello from 198.18.0.10:80 method=GET path=/http10" \
	"HTTP/1.0 without Host: accepted"
is "$(jf "$(cat "$T/raw.report")" closed_by_peer)" true "and the connection is closed after the answer (HTTP/1.0)"
raw "GET http://api.airlock.test/close HTTP/1.1\r\nHost: api.airlock.test\r\nConnection: close\r\n\r\n" --idle 3
is "$CODE $(jf "$(cat "$T/raw.report")" closed_by_peer)" "200 true" "Connection: close: answered, then the connection is closed"
raw "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n" --idle 1
is "$CODE" 200 "CONNECT api.airlock.test:443 with Host api.airlock.test (no port: 443): accepted"

# --- smuggling: bytes after a body are the next request, decided on their own -------

# answers: the status lines and X-Airlock-Rule values of everything in $T/raw.
answers() {
	python3 - "$T/raw" <<'PY'
import re, sys
d = open(sys.argv[1], "rb").read().decode("latin-1")
out = []
for m in re.finditer(r"HTTP/1\.1 (\d{3})|X-Airlock-Rule: ([^\r\n]*)|hello from (\S+)", d):
    out.append(m.group(0) if not m.group(1) else "HTTP/1.1 " + m.group(1))
print("|".join(out) + "|")
PY
}
raw "POST http://api.airlock.test/cl-smuggle HTTP/1.1\r\nHost: api.airlock.test\r\nContent-Length: 5\r\n\r\nhelloGET http://private.cdn.airlock.test/ HTTP/1.1\r\nHost: private.cdn.airlock.test\r\n\r\n" --idle 2
is "$(answers)" "HTTP/1.1 200|hello from 198.18.0.10:80|HTTP/1.1 403|X-Airlock-Rule: egress.deny[0]|" \
	"a request after a Content-Length body is decided on its own (200, then 403 egress.deny[0])"
is "$(jf "$(net_last line~cl-smuggle)" body_len)" 5 "the upstream got exactly the 5 body bytes"
raw "POST http://api.airlock.test/te-smuggle HTTP/1.1\r\nHost: api.airlock.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET http://private.cdn.airlock.test/ HTTP/1.1\r\nHost: private.cdn.airlock.test\r\n\r\n" --idle 2
is "$(answers)" "HTTP/1.1 200|hello from 198.18.0.10:80|HTTP/1.1 403|X-Airlock-Rule: egress.deny[0]|" \
	"a request after a chunked body is decided on its own (200, then 403)"
is "$(jf "$(net_last line~te-smuggle)" body_len)" 5 "the upstream got exactly the 5 chunked bytes"
raw "GET http://api.airlock.test/p1 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\nGET http://other.airlock.test/p2 HTTP/1.1\r\nHost: other.airlock.test\r\n\r\n" --idle 2
is "$(answers)" "HTTP/1.1 200|hello from 198.18.0.10:80|HTTP/1.1 403|X-Airlock-Rule: egress.default|" \
	"an allowed request then a denied one on one connection: 200, then 403 egress.default"
is "$(net_count host~private.cdn) $(net_count line~private.cdn) $(net_count host~other.airlock.test)" "0 0 0" \
	"no upstream ever saw the denied requests"
bad "CONNECT with a body" "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\nContent-Length: 5\r\n\r\nhello"

# --- what the upstream answers -----------------------------------------------------

for k in clte twocl badstatus; do
	req "http://api.airlock.test/evil/$k"
	like "$(verdict)" '^502 ([^ ]+) proxy\.error/block/\1$' "an upstream answer that is not valid HTTP ($k): 502 with a proxy.error receipt"
	! grep -aq 'smuggled\|hello' "$T/b"
	ok $? "$k: none of the upstream's body reached the client"
done
s=$(date +%s)
req http://api.airlock.test/evil/close
e=$(date +%s)
is "$CODE $(cat "$T/b")" "200 until close from 198.18.0.10:80" "an answer delimited by the upstream closing is relayed"
is "$CURL_RC" 0 "and ends when the upstream closes (curl exit 0, not 28: timeout; took $((e - s)) s)"
req http://api.airlock.test/evil/interim
is "$CODE $(cat "$T/b")" "200 after interim" "100 and 102 interim answers, then the final one: relayed"
still_serving "after the bad upstream answers"

# HEAD then GET pipelined on one connection: the HEAD answer has no body,
# and the GET's answer follows it intact.
raw "HEAD http://api.airlock.test/head HTTP/1.1\r\nHost: api.airlock.test\r\n\r\nGET http://api.airlock.test/after-head HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n" --idle 2
like "$(tr -d '\r' < "$T/raw" | grep -E '^(HTTP/1\.1 [0-9]+|hello from)' | tr '\n' '|')" \
	'^HTTP/1\.1 200 [^|]*\|HTTP/1\.1 200 [^|]*\|hello from 198\.18\.0\.10:80 method=GET path=/after-head [^|]*\|$' \
	"HEAD then GET on one connection: two answers, the HEAD's without a body"

# 20 clients at once, each a 200 kB answer.
python3 -c 'import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(200000)))' > "$T/want200k"
pids=""
for i in $(seq 1 20); do
	curl -sS --max-time 30 -x "http://$PROXY" -o "$T/par.$i" "http://api.airlock.test/bytes/200000?c=$i" 2>/dev/null &
	pids="$pids $!"
done
good=0
for p in $pids; do
	wait "$p"
done
for i in $(seq 1 20); do
	cmp -s "$T/par.$i" "$T/want200k" && good=$((good + 1))
done
is "$good" 20 "20 clients at once: every answer is complete and intact"

# keep-alive: two requests on one client connection, to two hosts.
out=$(curl -sS --max-time 20 -x "http://$PROXY" -w '[%{http_code} %{num_connects}]\n' \
	http://api.airlock.test/k1 http://www.airlock.test/k2 2>&1)
like "$(printf '%s' "$out" | tr '\n' ' ')" \
	'^hello from 198\.18\.0\.10:80 method=GET path=/k1 .*\[200 1\] hello from 198\.18\.0\.11:80 method=GET path=/k2 .*\[200 0\]$' \
	"two requests for two hosts on one kept-alive client connection"

# --- slowloris: one client sends a byte a second ------------------------------------
#
# A proxy of its own for these checks, whose head and first-flight timeouts
# (10 s in production) are 4 s (AIRLOCK_TEST_TIMEOUTS, test-only), so that
# the checks wait 4 s for them instead of 10; its drain after SIGTERM is
# 1 s instead of 5.
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0 (before the timeout checks)"
EV="$T/events-timeouts.jsonl"
export AIRLOCK_TEST_TIMEOUTS=head=4000,first_flight=4000,drain=1000
pl_start_proxy_ok
unset AIRLOCK_TEST_TIMEOUTS

slow0=$(date +%s%N)
python3 "$TESTNET" send "$PROXY" --trickle 0.2 --timeout 40 --report "$T/slow.report" \
	--data "GET http://api.airlock.test/slow HTTP/1.1\r\nHost: api.airlock.test\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n" > "$T/slow.out" &
slowpid=$!
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $slowpid"
# and 50 clients that connect and say nothing, and one CONNECT that never
# sends its first flight
python3 - "$PL_PORT" "$T/idle.ready" <<'PY' &
import socket, sys, time
s = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(50)]
open(sys.argv[2], "w").close()
time.sleep(3)
PY
idlepid=$!
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $idlepid"
ntls2=$(net_count srv=tls event=connect)
python3 "$TESTNET" send "$PROXY" --idle 30 --timeout 30 --report "$T/ff.report" \
	--data "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\n\r\n" > "$T/ff.out" &
ffpid=$!
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $ffpid"
# the idle clients are connected before the fast requests start
i=0
while [ ! -e "$T/idle.ready" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
fast=0
for i in 1 2 3; do
	s=$(date +%s%N)
	req "http://api.airlock.test/fast$i"
	e=$(date +%s%N)
	[ "$CODE" = 200 ] && [ $(((e - s) / 1000000)) -lt 2000 ] && fast=$((fast + 1))
done
fast_end=$(date +%s%N)
is "$fast" 3 "while a slow client trickles and 50 idle ones wait, 3 requests are each served in under 2 s"
i=0
while kill -0 "$slowpid" 2>/dev/null && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
wait "$slowpid" 2>/dev/null
rep=$(cat "$T/slow.report" 2>/dev/null)
is "$(jf "$rep" closed_by_peer)" "true" "the proxy closed the slow client"
el=$(jf "$rep" elapsed)
python3 -c 'import sys; sys.exit(0 if int(sys.argv[1]) + float(sys.argv[2] or 0) * 1e9 > int(sys.argv[3]) else 1)' \
	"$slow0" "$el" "$fast_end"
ok $? "the slow client was still connected when the fast requests had been served"
python3 -c 'import sys; sys.exit(0 if 3.9 <= float(sys.argv[1] or 0) <= 10 else 1)' "$el"
ok $? "after about the head timeout (4 s here, 10 s in production) for the whole head, not a byte's gap (${el} s)"
is "$(net_count line~/slow)" 0 "the slow request never reached the upstream"

i=0
while kill -0 "$ffpid" 2>/dev/null && [ $i -lt 250 ]; do
	sleep 0.1
	i=$((i + 1))
done
wait "$ffpid" 2>/dev/null
rep=$(cat "$T/ff.report" 2>/dev/null)
is "$(jf "$rep" closed_by_peer)" "true" "a CONNECT whose client never speaks is closed"
python3 -c 'import sys; sys.exit(0 if 3.9 <= float(sys.argv[1] or 0) <= 10 else 1)' "$(jf "$rep" elapsed)"
ok $? "after about the first-flight timeout (4 s here, 10 s in production; $(jf "$rep" elapsed) s)"
r=$(grep '"rule":"timeout.first-flight"' "$EV" | tail -n 1)
is "$(jf "$r" type) $(jf "$r" decision)" "proxy.error block" "with a proxy.error receipt, rule timeout.first-flight"
is "$(net_count srv=tls event=connect)" "$ntls2" "the upstream of the silent CONNECT saw no connection"
wait "$idlepid" 2>/dev/null
still_serving "after the slow clients"

sleep 0.5
is "$(net_count srv=sink)" 0 "no sink saw any connection"
pl_control_sinks

# SIGTERM with an open tunnel: the proxy stops within its drain time (+ slack),
# exits 0 and ends its stream.
python3 "$TESTNET" send "$PROXY" --idle 30 --timeout 30 \
	--data "CONNECT port.airlock.test:8081 HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\nGET /open HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\n" > /dev/null &
openpid=$!
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $openpid"
i=0
while [ "$(net_count line~/open)" -lt 1 ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
is "$(net_count line~/open)" 1 "a tunnel is open and has carried a request"
s=$(date +%s)
pl_stop_proxy
st=$?
e=$(date +%s)
is "$st" 0 "SIGTERM with a tunnel open: exit 0"
[ $((e - s)) -le 4 ]
ok $? "within its drain time (1 s here, 5 s in production) and some slack ($((e - s)) s)"
"$AIRLOCK" verify "$EV" >/dev/null 2>&1
is "$?" 0 "the stream verifies"

# --- more clients than descriptors: the proxy neither runs out, spins nor dies -------
#
# With 48 descriptors the proxy holds (48 - 32) / 2 = 8 connections (two
# descriptors each, 32 kept for itself); 80 idle clients, each from an
# address of its own (so that the per-client share does not decide it),
# get 8 slots and the others are closed at once.

EV="$T/events-emfile.jsonl"
PL_ULIMIT_N=48
pl_start_proxy_ok --workers 1
PL_ULIMIT_N=""
# cpu: the proxy's user+system time in clock ticks.
cpu() {
	pl_proxy_cpu_ticks
}
worker=$(pgrep -P "$PL_PROXY_PID" -x airlock-proxy)
python3 - "$PL_PORT" "$T/hold.report" <<'PY' &
import select, socket, sys, time
s = []
for i in range(80):
    try:
        c = socket.socket()
        c.bind(("127.0.0.%d" % (i + 2), 0))
        c.settimeout(2)
        c.connect(("127.0.0.1", int(sys.argv[1])))
        s.append(c)
    except OSError:
        break
time.sleep(1)
closed = 0
for c in s:
    r, _, _ = select.select([c], [], [], 0)
    if r:
        try:
            closed += c.recv(1) == b""
        except OSError:
            closed += 1
open(sys.argv[2], "w").write("%d %d\n" % (len(s), closed))
time.sleep(5)
PY
holdpid=$!
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $holdpid"
sleep 1.5
nfd=$(ls "/proc/$worker/fd" | wc -l)
[ "$nfd" -lt 48 ]
ok $? "80 idle clients against 48 descriptors: the proxy never runs out ($nfd open)"
i=0
while [ ! -s "$T/hold.report" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
is "$(cat "$T/hold.report")" "80 72" "it holds 8 of them and closes the other 72 at once"
c0=$(cpu)
sleep 3
c1=$(cpu)
tick=$(getconf CLK_TCK)
[ $((c1 - c0)) -lt $((tick / 2)) ]
ok $? "at its connection limit, with 80 idle clients, the proxy does not spin ($((c1 - c0)) ticks in 3 s)"
wait "$holdpid" 2>/dev/null
i=0
while [ $i -lt 50 ]; do
	req "http://api.airlock.test/after-emfile"
	[ "$CODE" = 200 ] && break
	sleep 0.2
	i=$((i + 1))
done
allowed_http "when they are gone, it serves again" 198.18.0.10:80 /after-emfile 'api\.airlock\.test(:80)?'
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
done_testing
