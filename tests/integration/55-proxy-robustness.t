#!/bin/sh
# What a review of the proxy found, each kept as a test: clients that hang
# up at awkward moments must not make the proxy spin (one client must not
# stall the others), 0.0.0.0 on the listening port is the proxy itself,
# and mode off checks nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK=""
pl_start_net

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
pl_start_proxy_ok

# cpu_ms: the proxy's user+system CPU time so far, in ms.
cpu_ms() {
	echo $(($(pl_proxy_cpu_ticks) * 1000 / $(getconf CLK_TCK)))
}

# Clients that vanish: reset mid-tunnel, reset while an answer is awaited,
# and a ClientHello whose first byte comes with the CONNECT and no more.
python3 - "$PROXY" <<'PY' &
import socket, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
def conn():
    return socket.create_connection((host, int(port)))
def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
keep = []
s = conn(); s.sendall(b"CONNECT api.airlock.test:80 HTTP/1.1\r\nHost: api.airlock.test:80\r\n\r\n")
s.recv(100); s.sendall(b"GET / HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"); time.sleep(0.3); reset(s)
s = conn(); s.sendall(b"GET http://api.airlock.test/x HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"); reset(s)
s = conn(); s.sendall(b"CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\n\r\n\x16"); keep.append(s)
time.sleep(8)
PY
cpid=$!
sleep 1.5
before=$(cpu_ms)
sleep 3
after=$(cpu_ms)
spent=$((after - before))
[ "$spent" -lt 300 ]
ok $? "the proxy stays idle after clients hang up mid-way ($spent ms of CPU in 3 s)"
req http://api.airlock.test/after
is "$CODE" 200 "and serves the next client"
kill "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null

# 0.0.0.0 (and its short form 0) on the listening port reach the proxy
# itself: always denied, as its own address is.
port=${PROXY##*:}
n0=$(count_receipts egress.block)
for t in "0.0.0.0:$port" "0:$port"; do
	raw "CONNECT $t HTTP/1.1\r\nHost: $t\r\n\r\n" --idle 1
done
r=$(last_receipt egress.block)
is "$(jf "$r" rule)" "egress.self" "CONNECT 0.0.0.0 and 0 on the listening port: egress.self"
is "$(count_receipts egress.block)" "$((n0 + 2))" "both denied"
pl_stop_proxy

# Mode off checks nothing, the SNI included.
sed -i 's/"mode": "enforce"/"mode": "off"/' "$POLICY"
pl_start_proxy_ok
raw "CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n" --idle 1
r=$(last_receipt egress.allow)
is "$(jf "$r" rule)" "mode.off" "off: a non-TLS first flight to 443 goes through (mode.off)"
if grep -q '"egress.sni_mismatch"' "$EV"; then ok 1 "off: no SNI check"; else ok 0 "off: no SNI check"; fi
pl_stop_proxy
done_testing
