#!/bin/sh
# The sandbox's network: only loopback, with the proxy at
# 127.0.0.1:3128 served from outside. Listeners on the loopback OUTSIDE the
# sandbox (this test's own network namespace) must never hear from it,
# whatever protocol or socket family the agent tries.
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

WS="$T/ws"
EV="$T/events.jsonl"
LOG="$T/listener.log"
mkdir "$WS"
# The helpers run inside, which sees the workspace but maybe not the checkout.
PROBE="$(helpers_in "$WS")/probe"
: > "$LOG"

# --- listeners outside --------------------------------------------------------

# TCP on 127.0.0.1:PORT (and [::1]:PORT when IPv6 is up) and on
# 127.0.0.1:3128, the proxy's port inside; UDP on 127.0.0.1:5353. Every
# connection and datagram is logged. It ends by itself after 120 s.
cat > "$T/listen.py" <<'PY'
import os, select, socket, sys, time
log, portfile = sys.argv[1], sys.argv[2]

def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")

socks = []
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("127.0.0.1", 0))
tcp.listen(16)
port = tcp.getsockname()[1]
socks.append(tcp)
try:
    tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    tcp6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    tcp6.bind(("::1", port))
    tcp6.listen(16)
    socks.append(tcp6)
    v6 = "yes"
except OSError:
    v6 = "no"
p3128 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
p3128.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
p3128.bind(("127.0.0.1", 3128))
p3128.listen(16)
socks.append(p3128)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 5353))
socks.append(udp)
with open(portfile + ".tmp", "w") as f:
    f.write("%d %s\n" % (port, v6))
os.rename(portfile + ".tmp", portfile)

deadline = time.time() + 120
while time.time() < deadline:
    ready, _, _ = select.select(socks, [], [], 0.5)
    for s in ready:
        if s is udp:
            data, addr = s.recvfrom(65535)
            note("udp %r from %s" % (data, addr))
        else:
            c, addr = s.accept()
            note("tcp port %d from %s" % (s.getsockname()[1], addr))
            c.close()
PY
python3 "$T/listen.py" "$LOG" "$T/port" &
lpid=$!
trap 'kill "$lpid" 2>/dev/null; rm -rf "$T"' EXIT
i=0
while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
read -r PORT V6 < "$T/port"
like "$PORT" '^[0-9]+$' "the outside listener is up (port $PORT, IPv6 $V6)"

# Controls: from outside, the listeners do hear (so silence later means
# something).
"$PROBE" tcp 127.0.0.1 "$PORT" >/dev/null
is "$?" 0 "control: outside, 127.0.0.1:$PORT accepts"
python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"control", ("127.0.0.1", 5353))'
i=0
while [ "$(wc -l < "$LOG")" -lt 2 ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
is "$(grep -c '^tcp' "$LOG")" 1 "control: the TCP listener logged the outside connection"
is "$(grep -c "^udp b'control'" "$LOG")" 1 "control: the UDP listener logged the outside datagram"
: > "$LOG"

# sandbox ARGS...: runs ARGS in the sandbox (enforce), stdout and stderr
# in $T/out; returns airlock's status.
sandbox() {
	"$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- "$@" \
		>"$T/out" 2>&1 </dev/null
}
out() {
	cat "$T/out"
}

# --- direct connections from inside fail ---------------------------------------

sandbox "$PROBE" tcp 127.0.0.1 "$PORT"
is "$(out)" "denied: ECONNREFUSED" "probe tcp 127.0.0.1:$PORT: refused (the sandbox's own loopback)"

sandbox bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo connected' bash "$PORT"
[ $? -ne 0 ] && ! grep -q connected "$T/out"
ok $? "bash /dev/tcp/127.0.0.1/$PORT fails"

sandbox curl -sS --max-time 10 --noproxy '*' "http://127.0.0.1:$PORT/"
is "$?" 7 "curl --noproxy '*' http://127.0.0.1:$PORT/ cannot connect (curl exit 7)"

if [ "$V6" = yes ]; then
	sandbox python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(("::1", int(sys.argv[1])))
    print("connected")
except OSError as e:
    print("failed", e.errno)' "$PORT"
	like "$(out)" "^failed" "a connection to [::1]:$PORT fails"
else
	ok 0 "# skip IPv6 loopback is not up here"
fi

sandbox "$PROBE" tcp 192.0.2.1 80
is "$(out)" "denied: ENETUNREACH" "an address off the machine is unreachable (no route)"

sandbox python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"airlock-udp-probe", ("127.0.0.1", 5353))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.connect(("127.0.0.1", 5353))
c.send(b"airlock-udp-probe-connected")
print("sent")'
like "$(out)" "^sent" "UDP datagrams to 127.0.0.1:5353 are sent inside"

# --- forbidden socket families and io_uring -------------------------------------

for a in raw raw6 packet netlink-audit vsock iouring; do
	sandbox "$PROBE" "$a"
	is "$(out)" "denied: EPERM" "probe $a: denied with EPERM"
done
sandbox "$PROBE" netlink-route
is "$(out)" "allowed" "probe netlink-route: allowed"

sandbox "$PROBE" tcp 127.0.0.1 3128
is "$(out)" "allowed" "the proxy accepts connections at 127.0.0.1:3128 inside"

sandbox ip -o link show
is "$(out | wc -l)" 1 "ip link shows one interface"
like "$(out)" '^1: lo: ' "and it is lo"
sandbox ip route show
is "$(out)" "" "the main routing table is empty (no default route)"

# --- through the proxy -------------------------------------------------------

: > "$EV"
sandbox curl -sS -i --max-time 20 http://example.test/some/path
resp=$(out | tr -d '\r')
like "$(printf '%s\n' "$resp" | head -n 1)" '^HTTP/1\.1 403' "curl through the proxy variables gets 403"
like "$resp" '^X-Airlock-Rule: [a-z]' "with an X-Airlock-Rule header"
rseq=$(printf '%s\n' "$resp" | sed -n 's/^X-Airlock-Receipt: *\([0-9][0-9]*\) *$/\1/p')
like "$rseq" '^[0-9]+$' "and an X-Airlock-Receipt header naming a seq"
rule=$(printf '%s\n' "$resp" | sed -n 's/^X-Airlock-Rule: *\(.*\)$/\1/p')
block=$(grep '"type":"egress.block"' "$EV" | head -n 1)
like "$block" "^\{\"v\":1,\"seq\":$rseq,.*\"type\":\"egress.block\",\"decision\":\"block\",\"point\":\"egress-proxy\",\"rule\":\"$rule\"," \
	"the events file has the egress.block receipt the header names"
like "$block" 'example\.test' "the receipt names the target"
"$AIRLOCK" verify "$EV" >/dev/null
is "$?" 0 "the stream verifies"

: > "$EV"
sandbox curl -sS --max-time 20 https://example.test/
is "$?" 56 "curl https:// through the proxy: the CONNECT is refused (curl exit 56)"
like "$(out)" "403" "with 403"
like "$(grep '"type":"egress.block"' "$EV")" '"decision":"block".*"subject":\{"method":"CONNECT","host":"example\.test","port":443' "recorded as egress.block"

# --- after everything: the outside heard nothing --------------------------------

sleep 0.5
is "$(cat "$LOG")" "" "the outside listeners (TCP, 3128, UDP) recorded no connection and no datagram"

done_testing
