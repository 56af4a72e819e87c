#!/bin/sh
# Transparent mode's building blocks on their own (docs/TRANSPARENT.md):
# in a fresh user + network + mount namespace, as the sandbox's init
# would, tests/helpers/transparent-parts sets up the redirect, serves the
# DNS stub and accepts on the transparent listener, then runs real
# clients that know nothing of any proxy (curl --noproxy '*', Node's fetch
# and https.get, Python with proxies disabled, getent): every TCP
# connection to a non-loopback address lands on the listener, which reads
# its original destination; names resolve to synthetic addresses that
# stand for them; UDP other than DNS to the stub never arrives. A control
# run without the redirect shows what the checks would see otherwise.
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"
PARTS="$AIRLOCK_HELPERS/transparent-parts"

# --- airlock doctor --------------------------------------------------------

out=$("$AIRLOCK" doctor)
like "$out" '"landlock":[0-9]+,"transparent":true,"enforce_ready"' \
	"doctor reports transparent: true, after landlock"
like "$out" '"missing":\[\]' "doctor: transparent is not missing for enforce without a policy asking"
out=$(unshare --user --map-root-user sh -c \
	'echo 0 > /proc/sys/user/max_net_namespaces && exec "$0" doctor' "$AIRLOCK")
like "$out" '"netns":false,.*"transparent":false' \
	"doctor where no network namespace can be made: transparent false"

# --- the pieces used inside ------------------------------------------------

# An "origin" inside the namespace, on a non-loopback address of lo:
# without the redirect it is reachable (the control), with it nothing may
# arrive. Logs every TCP connection and UDP datagram; ends by itself.
cat > "$T/origin.py" <<'PY'
import os, select, socket, sys, time
log = sys.argv[1]
def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("198.18.0.9", 8080)); tcp.listen(8)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("198.18.0.9", 5353))
lo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); lo.bind(("127.0.0.1", 5353))
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write("ready\n")
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
deadline = time.time() + 60
while time.time() < deadline:
    r, _, _ = select.select([tcp, udp, lo], [], [], 0.5)
    for s in r:
        if s is tcp:
            c, a = tcp.accept(); note("origin tcp from %s" % a[0]); c.close()
        else:
            d, a = s.recvfrom(2048); note("origin udp %s %r" % (s.getsockname()[0], d))
PY

# A DNS client that reports exactly what the stub said.
cat > "$T/dnsq.py" <<'PY'
import random, socket, struct, sys
def query(name, qtype):
    qid = random.randrange(65536)
    qname = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".") if l) + b"\0"
    msg = struct.pack("!6H", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!2H", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(msg, ("127.0.0.53", 53))
    r = s.recv(1024)
    rid, flags, qd, an, ns, ar = struct.unpack("!6H", r[:12])
    pos = 12 + len(qname) + 4
    addrs = []
    for _ in range(an):
        t, c, ttl, rdlen = struct.unpack("!HHIH", r[pos + 2:pos + 12])
        rdata = r[pos + 12:pos + 12 + rdlen]
        addrs.append("%s/ttl=%d" % (socket.inet_ntoa(rdata) if t == 1 else rdata.hex(), ttl))
        pos += 12 + rdlen
    return "%s %d id=%s rcode=%d an=%d %s" % (name, qtype, "ok" if rid == qid else "bad",
                                            flags & 15, an, " ".join(addrs))
for arg in sys.argv[1:]:
    name, qtype = arg.split("/")
    print(query(name, int(qtype)))
PY

# UDP the agent might send: each line is "udp DEST errno-name".
cat > "$T/udp.py" <<'PY'
import errno, socket
for dst in [("198.18.0.9", 5353), ("127.0.0.1", 5353), ("203.0.113.9", 443)]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"exfil", dst)
        print("udp %s:%d sent" % dst)
    except OSError as e:
        print("udp %s:%d %s" % (dst[0], dst[1], errno.errorcode.get(e.errno, e.errno)))
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendto(b"exfil", ("2001:db8::9", 443))
    print("udp6 sent")
except OSError as e:
    print("udp6 %s" % errno.errorcode.get(e.errno, e.errno))
PY

# What runs inside, with no proxy variable at all.
cat > "$T/inside.sh" <<'SH'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy
R=$1
run() { # NAME CMD...: output in $R/NAME, status in $R/NAME.rc
	n=$1; shift
	"$@" > "$R/$n" 2>&1; echo $? > "$R/$n.rc"
}
run curl-literal curl --noproxy '*' -sS -m 5 http://203.0.113.9/
run curl-name curl --noproxy '*' -sS -m 5 http://allowed.test:8080/x
run curl-origin curl --noproxy '*' -sS -m 5 http://198.18.0.9:8080/
run curl-direct curl -sS -m 5 "http://127.0.0.1:$TRANSPARENT_PORT/"
run curl-v6 curl --noproxy '*' -sS -m 5 -g 'http://[2001:db8::9]/'
run curl-denied curl --noproxy '*' -sS -m 5 http://denied.test/
run getent-allowed getent hosts allowed.test
run getent-again getent hosts ALLOWED.test
run getent-wild getent hosts a.ok.test
run getent-denied getent hosts denied.test
run getent-denied2 getent hosts denied.test
run getent-badok getent hosts bad.ok.test
run dns python3 "$DIR/dnsq.py" allowed.test/1 allowed.test/28 allowed.test/16 \
	denied.test/1 denied.test/28 a.ok.test/1
run dns-tcp python3 -c 'import socket; socket.create_connection(("127.0.0.53", 53), timeout=3)'
run node-fetch node -e '
fetch("http://allowed.test:8080/node", { signal: AbortSignal.timeout(5000) })
  .then(r => r.text()).then(t => process.stdout.write(t))
  .catch(e => { console.log("ERR " + ((e.cause && e.cause.code) || e.message)); process.exit(1); });'
run node-https node -e '
require("https").get("https://allowed.test/", { timeout: 5000 }, r => r.resume())
  .on("error", e => { console.log("ERR " + e.code); process.exit(1); });'
run node-denied node -e '
fetch("http://denied.test/", { signal: AbortSignal.timeout(5000) })
  .then(r => r.text()).then(t => process.stdout.write(t))
  .catch(e => { console.log("ERR " + ((e.cause && e.cause.code) || e.message)); process.exit(1); });'
run python python3 -c '
import urllib.request
o = urllib.request.build_opener(urllib.request.ProxyHandler({}))
print(o.open("http://allowed.test:8080/py", timeout=5).read().decode(), end="")'
run udp python3 "$DIR/udp.py"
run loopback python3 -c '
import http.server, socket, threading
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
s = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=s.handle_request, daemon=True).start()
c = socket.create_connection(("127.0.0.1", s.server_port), timeout=3)
c.sendall(b"GET /nonexistent HTTP/1.0\r\n\r\n")
print(c.recv(64).split(b"\r\n")[0].decode())'
sleep 0.3
SH

# In a fresh user + network + mount namespace: 198.18.0.9 on lo, the
# origin, /etc/resolv.conf naming the stub, then the parts and CMD.
# $1: results directory, $2: policy, $3...: options of transparent-parts.
inside() {
	res=$1 pol=$2
	shift 2
	mkdir -p "$res"
	DIR=$T RES=$res POL=$pol PARTS=$PARTS OPTS="$*" \
	timeout 100 unshare --user --map-root-user --net --mount sh -c '
		set -e
		ip link set lo up
		ip addr add 198.18.0.9/32 dev lo
		printf "nameserver 127.0.0.53\n" > "$RES/resolv.conf"
		mount --bind "$RES/resolv.conf" /etc/resolv.conf
		python3 "$DIR/origin.py" "$RES/origin.log" "$RES/origin.ready" &
		opid=$!
		i=0
		while [ ! -e "$RES/origin.ready" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
		set +e
		"$PARTS" --policy "$POL" --log "$RES/parts.log" $OPTS -- sh "$DIR/inside.sh" "$RES"
		echo $? > "$RES/parts.rc"
		kill $opid 2>/dev/null
		wait $opid 2>/dev/null
		exit 0'
	touch "$res/origin.log" "$res/parts.log"
}

cat > "$T/enforce.json" <<'JSON'
{"version": 1, "mode": "enforce",
 "egress": {"allow": ["allowed.test", "*.ok.test"], "deny": ["bad.ok.test"],
            "transparent": true}}
JSON
sed 's/"enforce"/"shadow"/' "$T/enforce.json" > "$T/shadow.json"

# --- enforce, with the redirect ------------------------------------------

E=$T/enforce
inside "$E" "$T/enforce.json"
is "$(cat "$E/parts.rc" 2>/dev/null)" 0 "the parts ran and the inside script ended"
like "$(cat "$E/parts.log")" 'ready port=[0-9]+ ipv6=[01] setup=1' "the redirect was set up"
ipv6=$(sed -n 's/^ready .* ipv6=\([01]\) .*/\1/p' "$E/parts.log")

is "$(cat "$E/curl-literal")" "origdst=203.0.113.9:80 name=-" \
	"curl --noproxy '*' http://203.0.113.9/ lands on the listener, SO_ORIGINAL_DST 203.0.113.9:80"
is "$(cat "$E/curl-origin")" "origdst=198.18.0.9:8080 name=-" \
	"a local non-loopback address (198.18.0.9:8080) is redirected too"
is "$(grep -c 'origin tcp' "$E/origin.log")" 0 "the origin at 198.18.0.9:8080 never heard from curl"
if [ "$ipv6" = 1 ]; then
	is "$(cat "$E/curl-v6")" "origdst=[2001:db8::9]:80 name=-" \
		"IPv6: http://[2001:db8::9]/ lands on [::1], IP6T_SO_ORIGINAL_DST [2001:db8::9]:80"
else
	like "$(cat "$E/curl-v6.rc")" '^[1-9]' "no IPv6 here: an IPv6 connection fails"
fi

allowed_addr=$(awk '{print $1}' "$E/getent-allowed")
like "$allowed_addr" '^240\.0\.[0-9]+\.[0-9]+$' "getent hosts allowed.test: a synthetic address (got $allowed_addr)"
is "$(awk '{print $1}' "$E/getent-again")" "$allowed_addr" "ALLOWED.test is the same name: the same address"
like "$(cat "$E/getent-wild")" '^240\.0\.' "a name under an allowed wildcard gets one too"
is "$(cat "$E/curl-name")" "origdst=$allowed_addr:8080 name=allowed.test" \
	"curl http://allowed.test:8080/: the listener maps the address back to the name, port kept"
is "$(cat "$E/node-fetch")" "origdst=$allowed_addr:8080 name=allowed.test" \
	"Node's fetch with no proxy configuration reaches the listener, for allowed.test"
like "$(cat "$E/parts.log")" "tcp $allowed_addr 443 allowed.test" \
	"Node's https.get to allowed.test reaches the listener on port 443 (TLS then fails: no proxy here)"
is "$(cat "$E/python")" "origdst=$allowed_addr:8080 name=allowed.test" \
	"Python with proxies disabled reaches the listener, for allowed.test"

is "$(cat "$E/getent-denied.rc")" 2 "getent hosts denied.test: not found (NXDOMAIN in enforce)"
is "$(cat "$E/getent-badok.rc")" 2 "a name under a deny rule: not found"
like "$(cat "$E/curl-denied")" "Could not resolve host" "curl to a denied name fails to resolve"
like "$(cat "$E/node-denied")" "ERR ENOTFOUND" "Node's fetch to a denied name: ENOTFOUND"
is "$(grep -c '^dns denied.test .* record=1 rule=egress.default$' "$E/parts.log")" 1 \
	"denied.test is to be recorded once, though asked many times"
like "$(grep '^dns denied.test 1 ' "$E/parts.log" | head -n 1)" 'nxdomain-policy blocked=1' \
	"its outcome: NXDOMAIN by policy, blocked"
is "$(grep -c '^dns bad.ok.test .* record=1 rule=egress.deny\[0\]$' "$E/parts.log")" 1 \
	"bad.ok.test is refused by egress.deny[0], recorded once"

dns=$(cat "$E/dns")
like "$dns" "allowed.test 1 id=ok rcode=0 an=1 $allowed_addr/ttl=5" "A: the synthetic address, TTL 5"
like "$dns" "allowed.test 28 id=ok rcode=0 an=0" "AAAA: NOERROR, no answer"
like "$dns" "allowed.test 16 id=ok rcode=0 an=0" "TXT: NOERROR, no answer"
like "$dns" "denied.test 1 id=ok rcode=3 an=0" "A for a denied name: NXDOMAIN"
like "$dns" "denied.test 28 id=ok rcode=3 an=0" "AAAA for a denied name: NXDOMAIN"
like "$dns" "a.ok.test 1 id=ok rcode=0 an=1 240\.0\." "a.ok.test: a synthetic address"
like "$(cat "$E/dns-tcp")" "ConnectionRefused" "DNS over TCP to the stub: connection refused at once"

udp=$(cat "$E/udp")
like "$udp" "udp 198.18.0.9:5353 EPERM" "UDP to a non-loopback address fails at once (EPERM)"
like "$udp" "udp 127.0.0.1:5353 EPERM" "UDP to loopback other than the stub fails too"
like "$udp" "udp 203.0.113.9:443 EPERM" "UDP to an outside address (QUIC's port) fails"
if [ "$ipv6" = 1 ]; then
	like "$udp" "udp6 EPERM" "IPv6 UDP fails at once"
fi
is "$(grep -c 'origin udp' "$E/origin.log")" 0 "no UDP datagram reached the origin nor a loopback listener"
is "$(cat "$E/loopback")" "HTTP/1.0 404 File not found" "TCP on loopback is not redirected"
is "$(cat "$E/curl-direct")" "origdst=none" \
	"a client connecting to the listener directly has no original destination"
is "$(grep -c '^tcp none' "$E/parts.log")" 1 "every other connection on the listener had been redirected"

# --- shadow: every valid name resolves, would-blocks are recorded -------

S=$T/shadow
inside "$S" "$T/shadow.json"
is "$(cat "$S/parts.rc" 2>/dev/null)" 0 "shadow: the parts ran"
like "$(cat "$S/getent-denied")" '^240\.0\.' "shadow: denied.test resolves (a synthetic address)"
is "$(grep -c '^dns denied.test .*would_block=1 record=1 rule=egress.default$' "$S/parts.log")" 1 \
	"shadow: denied.test is recorded once as would_block"
denied_addr=$(awk '{print $1}' "$S/getent-denied")
like "$(cat "$S/curl-denied")" "^origdst=$denied_addr:80 name=denied.test$" \
	"shadow: the connection reaches the listener for the proxy to judge"

# --- control: no redirect ----------------------------------------------

C=$T/control
inside "$C" "$T/enforce.json" --no-setup
is "$(cat "$C/parts.rc" 2>/dev/null)" 0 "control: the parts ran without the redirect"
like "$(cat "$C/curl-literal")" "(Network is unreachable|Couldn't connect)" \
	"control: curl to 203.0.113.9 fails at once (no route)"
like "$(cat "$C/node-fetch")" "ERR (ENETUNREACH|EHOSTUNREACH)" \
	"control: Node's fetch to allowed.test fails, as without transparent mode"
like "$(cat "$C/origin.log")" "origin tcp from" "control: the origin is reachable, so the check above can fail"
like "$(cat "$C/origin.log")" "origin udp 198.18.0.9 b'exfil'" "control: UDP reaches the origin without the rules"
like "$(cat "$C/origin.log")" "origin udp 127.0.0.1 b'exfil'" "control: and the loopback listener"

done_testing
