#!/bin/sh
# HTTP inside a CONNECT tunnel (docs/PROXY.md, "HTTP inside a tunnel"): a
# tunnel whose first flight is HTTP/1.x is served request by request, and
# every request must name the CONNECT host, so that a tunnel approved for
# one name never reaches another virtual host behind the same address
# (domain fronting). Keep-alive, pipelining, bodies both ways, 100-continue,
# websocket and streamed answers work as they do without the proxy. An
# error in a request body that is already being forwarded closes both
# sides with a proxy.error receipt.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK="198.18.0.13:80"
pl_start_net
for mode in enforce shadow; do
	cat > "$T/policy-$mode.json" <<EOF
{
  "version": 1,
  "mode": "$mode",
  "egress": {
    "allow": ["api.airlock.test", "port.airlock.test:8081", "198.18.0.13"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
done
POLICY="$T/policy-enforce.json"
pl_start_proxy_ok

CON='CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n'
# answers: the status lines, X-Airlock-Rule values and upstream greetings
# in $T/raw, in order.
answers() {
	python3 - "$T/raw" <<'PY'
import re, sys
d = open(sys.argv[1], "rb").read().decode("latin-1")
out = []
for m in re.finditer(r"HTTP/1\.1 (\d{3})|X-Airlock-Rule: ([^\r\n]*)|hello from (\S+) method=\S+ path=(\S+)", d):
    if m.group(1):
        out.append(m.group(1))
    elif m.group(2):
        out.append(m.group(2))
    else:
        out.append(m.group(4))
print(" ".join(out))
PY
}

# --- domain fronting ------------------------------------------------------------------

raw "${CON}GET /front HTTP/1.1\r\nHost: evil.airlock.test\r\n\r\n"
is "$(answers)" "200 403 egress.host_mismatch" \
	"CONNECT api.airlock.test:80, then Host: evil.airlock.test: 403 inside the tunnel"
is "$(net_count line~/front)" 0 "the upstream never saw that request"
r=$(receipt_of "$(grep -a 'X-Airlock-Receipt' "$T/raw" | tr -d '\r' | sed 's/.*: //')")
is "$(jf "$r" type) $(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.host) $(jf "$r" subject.request_host)" \
	"egress.block block egress.host_mismatch api.airlock.test evil.airlock.test" \
	"recorded: egress.block by egress.host_mismatch, both hosts named"
is "$(jf "$(cat "$T/raw.report")" closed_by_peer)" "true" "and the tunnel is closed"

raw "${CON}GET /front-port HTTP/1.1\r\nHost: api.airlock.test:8080\r\n\r\n"
is "$(answers)" "200 403 egress.host_mismatch" "Host naming another port: 403"
raw "${CON}GET http://evil.airlock.test/front-abs HTTP/1.1\r\nHost: evil.airlock.test\r\n\r\n"
is "$(answers)" "200 403 egress.host_mismatch" "absolute-form naming another host inside the tunnel: 403"
raw "${CON}GET /front-10 HTTP/1.0\r\n\r\n"
is "$(answers)" "200 403 egress.host_mismatch" "HTTP/1.0 without Host (the default virtual host): 403"
raw "${CON}CONNECT www.airlock.test:80 HTTP/1.1\r\nHost: www.airlock.test:80\r\n\r\n"
is "$(answers)" "200 400 http.form" "a CONNECT inside the tunnel: 400"
raw "${CON}GET /ok HTTP/1.1\r\nHost: api.airlock.test\r\n\r\nGET /front2 HTTP/1.1\r\nHost: evil.airlock.test\r\n\r\n"
is "$(answers)" "200 200 /ok 403 egress.host_mismatch" \
	"a good request, then one for another host on the same tunnel: 200, then 403"
is "$(net_count line~/front)" 0 "no fronted request ever reached the upstream"

# --- what a client gets through an HTTP tunnel ----------------------------------------

na=$(count_receipts egress.allow)
raw "${CON}GET /a1 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n" --idle 1
is "$(answers)" "200 200 /a1" "Host equal to the CONNECT host: the upstream's answer"
r=$(last_receipt egress.allow)
is "$(($(count_receipts egress.allow) - na)) $(jf "$r" subject.method) $(jf "$r" subject.tls)" "1 CONNECT false" \
	"the tunnel is recorded once, tls false"
r=$(last_receipt http.request)
is "$(jf "$r" decision) $(jf "$r" subject.method) $(jf "$r" subject.host) $(jf "$r" subject.path) $(jf "$r" subject.status)" \
	"allow GET api.airlock.test /a1 200" "and the request as http.request"
raw "${CON}GET /a2?secret=1 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n" --idle 1
is "$(answers) $(jf "$(last_receipt http.request)" subject.path)" "200 200 /a2?secret=1 /a2" \
	"Host with the CONNECT port: accepted; the receipt's path has no query"

raw "${CON}GET /p1 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\nGET /p2 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n" --idle 1
is "$(answers)" "200 200 /p1 200 /p2" "two pipelined requests: two answers, in order"
p1=$(jf "$(net_last line~/p1)" peer)
is "$(jf "$(net_last line~/p2)" peer) $(jf "$(net_last line~/p2)" n)" "$p1 2" \
	"over one upstream connection (kept alive)"

python3 -c 'import sys; sys.stdout.buffer.write(b"x" * 70000)' > "$T/body"
{ printf 'CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n'
  printf 'POST /up-chunked HTTP/1.1\r\nHost: api.airlock.test\r\nTransfer-Encoding: chunked\r\n\r\n'
  printf '5\r\nhello\r\n'; printf '%x\r\n' 70000; cat "$T/body"; printf '\r\n0\r\n\r\n'
  printf 'GET /chunked HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n'; } > "$T/chunked.req"
raw_file "$T/chunked.req" --idle 1
is "$(jf "$(net_last line~up-chunked)" body_len) $(jf "$(net_last line~up-chunked)" framing)" "70005 chunked" \
	"a chunked request body reaches the upstream whole, still chunked"
is "$(answers)" "200 200 /up-chunked 200" "then the echo, and a chunked answer"
python3 - "$T/raw" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
# the echo (Content-Length) holds every byte; the last answer is chunked
ok = (b"body-length=70005\nhello" + b"x" * 70000) in d and \
     d.count(b"Transfer-Encoding: chunked") == 1 and d.endswith(b"\r\n0\r\n\r\n")
sys.exit(0 if ok else 1)
PY
ok $? "the echo holds all 70005 bytes, the chunked answer is relayed as chunked to its last chunk"

python3 - "$PROXY" > "$T/expect.out" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n")
d = b""
while b"\r\n\r\n" not in d:
    d += s.recv(4096)
s.sendall(b"POST /expect HTTP/1.1\r\nHost: api.airlock.test\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
d = b""
while b"\r\n\r\n" not in d:
    d += s.recv(4096)
print(d.split(b"\r\n")[0].decode())
s.sendall(b"body")
d = b""
while b"body-length=4" not in d:
    d += s.recv(4096)
print([l for l in d.decode("latin-1").split("\r\n") if l.startswith("HTTP/")][-1])
PY
is "$(tr '\n' '|' < "$T/expect.out")" "HTTP/1.1 100 Continue|HTTP/1.1 200 OK|" \
	"Expect: 100-continue: the 100 comes through before the body is sent, then the answer"

python3 - "$PROXY" > "$T/ws.out" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n")
d = b""
while b"\r\n\r\n" not in d:
    d += s.recv(4096)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: api.airlock.test\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Version: 13\r\n\r\n")
d = b""
while b"\r\n\r\n" not in d:
    d += s.recv(4096)
head, _, rest = d.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
print([l for l in head.decode().split("\r\n") if l.startswith("Sec-WebSocket-Accept")][0])
frame = b"\x81\x05hello" + bytes(range(256)) + b"HTTP/1.1 200 not a head\r\n\r\n"
s.sendall(frame)
while len(rest) < len(frame):
    rest += s.recv(4096)
print("echo", rest == frame)
PY
is "$(tr '\n' '|' < "$T/ws.out")" "HTTP/1.1 101 Switching Protocols|Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=|echo True|" \
	"Upgrade: websocket: the 101 comes through, then bytes are relayed untouched both ways"
is "$(jf "$(net_last event=upgrade)" echoed)" 290 "the upstream echoed exactly the bytes sent"

python3 - "$PROXY" > "$T/sse.out" <<'PY'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n"
          b"GET /sse?n=4&gap=0.5 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
t0 = time.time()
d, first = b"", None
while b"0\r\n\r\n" not in d:
    c = s.recv(4096)
    if not c:
        break
    d += c
    if first is None and b"data: 0" in d:
        first = time.time() - t0
print("first %.1f total %.1f events %d" % (first, time.time() - t0, d.count(b"data: ")))
PY
ev=$(cat "$T/sse.out")
python3 -c 'import sys; f = sys.argv[1].split(); sys.exit(0 if float(f[1]) < 1.2 and float(f[3]) >= 1.8 and f[5] == "4" else 1)' "$ev"
ok $? "a streamed answer (server-sent events) arrives as it is sent, not at its end ($ev)"

# --- an error in a body already being forwarded -------------------------------------------

# bad_body DESC CONNECT-HEAD TARGET: a chunked POST whose second chunk is
# malformed, sent half a second after the head and first chunk (so that
# they are already forwarded).
bad_body() {
	_n=$(count_receipts proxy.error)
	python3 - "$PROXY" "$2" "$3" > "$T/bad.report" <<'PY'
import json, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
if sys.argv[2]:
    s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
    d = b""
    while b"\r\n\r\n" not in d:
        d += s.recv(4096)
s.sendall(("POST %s HTTP/1.1\r\nHost: api.airlock.test\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nhello\r\n" % sys.argv[3]).encode())
time.sleep(0.5)
s.sendall(b"zz\r\n\r\n")
s.settimeout(3)
got = b""
try:
    while True:
        c = s.recv(4096)
        if not c:
            break
        got += c
    closed = True
except socket.timeout:
    closed = False
except ConnectionResetError:
    closed = True
print(json.dumps({"received": len(got), "closed_by_peer": closed}))
PY
	wait_receipts proxy.error $((_n + 1))
	r=$(last_receipt proxy.error)
	is "$(jf "$r" rule) $(jf "$(cat "$T/bad.report")" closed_by_peer) $(jf "$(cat "$T/bad.report")" received)" \
		"http.malformed true 0" \
		"$1: a malformed chunk after the head was forwarded: closed, no answer, proxy.error http.malformed"
	_i=0
	while [ "$(net_count line~badchunk error~Error)" -lt "$4" ] && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	is "$(net_count line~badchunk error~Error)" "$4" "$1: the upstream had the head, and its connection was closed mid-body"
}
bad_body "plain http://" "" "http://api.airlock.test/badchunk" 1
bad_body "inside a tunnel" "CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n" "/badchunk2" 2

# --- other protocols -------------------------------------------------------------------

nb=$(count_receipts egress.block)
raw 'CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\nSSH-2.0-OpenSSH_9.2\r\n'
wait_receipts egress.block $((nb + 1))
r=$(last_receipt egress.block)
is "$(jf "$r" rule) $(jf "$(cat "$T/raw.report")" closed_by_peer)" "egress.protocol true" \
	"port 80, a first flight that is neither HTTP nor TLS: closed, egress.protocol"
raw 'CONNECT port.airlock.test:8081 HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\nGET /on-8081 HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\n' --idle 1
is "$(answers)" "200 200 /on-8081" "HTTP on another port is served the same way"
raw 'CONNECT port.airlock.test:8081 HTTP/1.1\r\nHost: port.airlock.test:8081\r\n\r\nGET /front-8081 HTTP/1.1\r\nHost: api.airlock.test:8081\r\n\r\n' --idle 1
is "$(answers)" "200 403 egress.host_mismatch" "and checked the same way"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"

# --- shadow ----------------------------------------------------------------------------

POLICY="$T/policy-shadow.json"
EV="$T/events-shadow.jsonl"
pl_start_proxy_ok
raw 'CONNECT 198.18.0.13:80 HTTP/1.1\r\nHost: 198.18.0.13:80\r\n\r\nGET /shadow-front HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n' --idle 1
r=$(last_receipt egress.block)
is "$(jf "$r" decision) $(jf "$r" rule)" "would_block egress.host_mismatch" "shadow: a fronted request is recorded would_block"
is "$(net_count listen=198.18.0.13:80 event=data data~shadow-front)" 1 "and goes ahead"
pl_stop_proxy
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
is "$?" 0 "the shadow stream verifies"
done_testing
