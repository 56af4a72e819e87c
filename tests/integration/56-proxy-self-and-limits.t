#!/bin/sh
# The proxy never tunnels into itself, and no client takes every slot
# (docs/PROXY.md, "Decision" and "Limits"): listening on a wildcard, every
# interface address on its port is the proxy itself, kept current when an
# address is added; and a client address may hold only its share of the
# proxy's connections, so that idle tunnels or slowloris heads from one
# client cannot starve another.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK=""
pl_start_net
SELF_PORT=18081
for mode in enforce shadow; do
	cat > "$T/policy-$mode.json" <<EOF
{
  "version": 1,
  "mode": "$mode",
  "egress": {
    "allow": ["198.18.0.0/15:*", "[::ffff:198.18.0.0/111]:*", "selfif.airlock.test:*",
              "api.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
done

# --- a wildcard listener is every interface address ---------------------------------

POLICY="$T/policy-enforce.json"
PROXY="0.0.0.0:$SELF_PORT"
pl_start_proxy_ok
PROXY="127.0.0.1:$SELF_PORT"

# (its answer is whole with its head and body: no need to wait for more)
self_connect() {
	raw "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1 --answers 1
}
self_connect "198.18.0.10:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" \
	"CONNECT 198.18.0.10 (an address of lo) on the listening port: egress.self"
self_connect "[::ffff:198.18.0.10]:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "the same IPv4-mapped"
self_connect "selfif.airlock.test:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "a name resolving there"
self_connect "127.0.0.2:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "another loopback address"
ip addr add 198.18.0.20/32 dev lo
self_connect "198.18.0.20:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" \
	"an address added to lo after the proxy started: egress.self at once"
i=0
while [ $i -lt 20 ]; do
	self_connect "198.18.0.20:$SELF_PORT"
	[ "$CODE" = 403 ] || break
	i=$((i + 1))
done
is "$i" 20 "and on every later try"
ip addr del 198.18.0.20/32 dev lo
sleep 0.3
self_connect "198.18.0.20:$SELF_PORT"
is "$(verdict)" "502 upstream.connect proxy.error/block/upstream.connect" \
	"once the address is gone it is not the proxy any more (it is connected to; nothing listens there: 502)"
self_connect "198.18.0.10:80"
is "$CODE" "200" "control: the same address on another port is a destination"
is "$(count_receipts egress.allow)" 0 "no tunnel into the proxy was ever allowed"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"

POLICY="$T/policy-shadow.json"
EV="$T/events-shadow.jsonl"
PROXY="0.0.0.0:$SELF_PORT"
pl_start_proxy_ok
PROXY="127.0.0.1:$SELF_PORT"
self_connect "198.18.0.10:$SELF_PORT"
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "shadow: still egress.self, decision block"
pl_stop_proxy
PROXY="127.0.0.1:$PL_PORT"
POLICY="$T/policy-enforce.json"
EV="$T/events-limits.jsonl"

# --- one client's share -----------------------------------------------------------------
#
# One worker with 256 descriptors: (256 - 32) / 2 = 112 connections, a
# quarter of them (28) per client address.

PL_ULIMIT_N=256
pl_start_proxy_ok --workers 1
PL_ULIMIT_N=""
# hog N KIND: from 127.0.0.1, N connections that hold on (KIND heads:
# an unfinished request head each; tunnels: CONNECT with a TLS hello, then
# idle); writes "opened kept" to $T/hog.report after 2 s, holds 8 s.
hog() {
	rm -f "$T/hog.report"
	python3 "$TESTNET" hello --sni api.airlock.test > "$T/hog.hello"
	python3 - "$PL_PORT" "$1" "$2" "$T/hog.report" "$T/hog.hello" <<'PY' &
import select, socket, sys, time
port, n, kind, report = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
hello = open(sys.argv[5], "rb").read()
s = []
for i in range(n):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        if kind == "heads":
            c.sendall(b"GET http://api.airlock.test/slow HTTP/1.1\r\nHost: api.airl")
        else:
            c.sendall(b"CONNECT api.airlock.test:443 HTTP/1.1\r\nHost: api.airlock.test:443\r\n\r\n" + hello)
        s.append(c)
    except OSError:
        break
time.sleep(2)
kept = 0
for c in s:
    r, _, _ = select.select([c], [], [], 0)
    if not r:
        kept += 1
        continue
    try:
        d = c.recv(4096)
        kept += d != b""
    except OSError:
        pass
open(report, "w").write("%d %d\n" % (len(s), kept))
time.sleep(6)
PY
	HOGPID=$!
	PL_EXTRA_PIDS="$PL_EXTRA_PIDS $HOGPID"
	i=0
	while [ ! -s "$T/hog.report" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
# good DESC: a request from 127.0.0.2 is served within 2 s.
good() {
	s=$(date +%s%N)
	CODE=$(curl -sS --max-time 5 --interface 127.0.0.2 -x "http://$PROXY" -o /dev/null \
		-w '%{http_code}' "http://api.airlock.test/good" 2>/dev/null)
	e=$(date +%s%N)
	is "$CODE" 200 "$1: a client from another address is served"
	[ $(((e - s) / 1000000)) -lt 2000 ]
	ok $? "$1: within 2 s ($(((e - s) / 1000000)) ms)"
}

hog 300 heads
is "$(cat "$T/hog.report")" "300 28" "300 slowloris heads from one address: 28 kept, the rest closed at once"
good "while they wait"
r=$(grep '"rule":"proxy.client-limit"' "$EV")
is "$(printf '%s\n' "$r" | grep -c .) $(jf "$r" decision) $(jf "$r" subject.client) $(jf "$r" subject.limit)" \
	"1 block 127.0.0.1 28" "one proxy.error receipt names the client and its limit, not one per refusal"
wait "$HOGPID" 2>/dev/null
sleep 0.5
hog 124 tunnels
is "$(cat "$T/hog.report")" "124 28" "124 idle tunnels from one address: 28 kept"
good "while they are open"
is "$(grep -c '"rule":"proxy.client-limit"' "$EV")" 2 \
	"a second receipt once it came back over its share after falling below"
wait "$HOGPID" 2>/dev/null
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"

EV="$T/events-limit3.jsonl"
pl_start_proxy_ok --client-limit 3 --workers 2
hog 5 heads
is "$(cat "$T/hog.report")" "5 3" "--client-limit 3: 3 of 5 kept"
good "--client-limit 3"
wait "$HOGPID" 2>/dev/null
pl_stop_proxy
"$AIRLOCK" proxy --policy "$POLICY" --listen "$PROXY" --client-limit 0 > /dev/null 2>&1
is "$?" 125 "--client-limit 0 is refused (exit 125)"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
is "$?" 0 "the stream verifies"
done_testing
