#!/bin/sh
# Decisions made at the right moment on the right data (docs/PROXY.md):
# deny rules that name addresses apply to every DNS answer; a request is
# judged by the policy it arrived under even when a reload lands while its
# name is resolving; and an error answer never splits a message already on
# its way to the client.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK="198.18.0.11:80"
PL_HTTP="198.18.0.10:80"
pl_start_net

# --- deny rules on DNS answers --------------------------------------------------------------

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["dnsdeny.airlock.test", "dnsdenyport.airlock.test:*", "api.airlock.test"],
    "deny": ["10.1.0.0/16", "198.18.0.11:80"],
    "allow_ranges": ["10.0.0.0/8", "198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
pl_start_proxy_ok
req http://dnsdeny.airlock.test/x
is "$(verdict)" "403 egress.deny[0] egress.block/block/egress.deny[0]" \
	"a name resolving into a deny CIDR (10.1/16 inside allow_ranges 10/8): 403 egress.deny[0]"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" subject.addresses)" '10\.1\.2\.3' "the receipt lists the answer"
req http://dnsdenyport.airlock.test/y
is "$(verdict)" "403 egress.deny[1] egress.block/block/egress.deny[1]" \
	"a name resolving to an address a deny rule names on that port: 403"
is "$(net_count listen=198.18.0.11:80)" 0 "and nothing reached it"
raw "CONNECT dnsdenyport.airlock.test:8081 HTTP/1.1\r\nHost: dnsdenyport.airlock.test:8081\r\n\r\n" --idle 1
is "$(verdict)" "502 upstream.connect proxy.error/block/upstream.connect" \
	"the same address on another port is not denied by that rule: it is connected to (nothing listens there: 502)"
pl_stop_proxy

# --- a reload while the name is resolving ------------------------------------------------------
#
# slowok.airlock.test answers after 2 s. The request arrives under a
# policy whose allow_ranges cover its answer; the reload drops them.

for v in a b; do
	ranges='"198.18.0.0/15"'
	[ "$v" = b ] && ranges=''
	cat > "$T/reload-$v.json" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["slowok.airlock.test", "api.airlock.test"],
    "allow_ranges": [$ranges],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
done
cp "$T/reload-a.json" "$POLICY"
EV="$T/events-reload.jsonl"
pl_start_proxy_ok
curl -sS --max-time 20 -x "http://$PROXY" -o /dev/null -w '%{http_code}' \
	http://slowok.airlock.test/slow > "$T/slow.code" 2>/dev/null &
cpid=$!
sleep 0.7
cp "$T/reload-b.json" "$POLICY"
kill -HUP "$PL_PROXY_PID"
wait_receipts policy.reload 1
wait "$cpid"
is "$(cat "$T/slow.code")" 200 "a request resolving across a reload is judged by the policy it arrived under"
req http://slowok.airlock.test/after
is "$(verdict)" "403 egress.special-address egress.block/block/egress.special-address" \
	"the next request is judged by the new one"
pl_stop_proxy

# shadow -> enforce: the mode is the one the request arrived under too
for v in a b; do
	mode=shadow
	[ "$v" = b ] && mode=enforce
	cat > "$T/mode-$v.json" <<EOF
{
  "version": 1,
  "mode": "$mode",
  "egress": {
    "allow": ["api.airlock.test"],
    "deny": ["198.18.0.10"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
done
cp "$T/mode-a.json" "$POLICY"
EV="$T/events-mode.jsonl"
pl_start_proxy_ok
curl -sS --max-time 20 -x "http://$PROXY" -o /dev/null -w '%{http_code}' \
	http://slowok.airlock.test/slow-mode > "$T/slow.code" 2>/dev/null &
cpid=$!
sleep 0.7
cp "$T/mode-b.json" "$POLICY"
kill -HUP "$PL_PROXY_PID"
wait_receipts policy.reload 1
wait "$cpid"
is "$(cat "$T/slow.code")" 200 "shadow when it arrived: its answer's deny rule is would_block, though enforce is in force when DNS answers"
r=$(grep '"rule":"egress.deny\[0\]"' "$EV" | tail -n 1)
is "$(jf "$r" decision)" "would_block" "recorded would_block"
pl_stop_proxy

# --- an answer after output already queued --------------------------------------------------
#
# /evil/bigearly: four 20 KB 103 answers, then a final head that is not
# HTTP. The client reads slowly, so part of the 103s is still queued in
# the proxy when the bad head arrives: the 502 must come after them, not
# in the middle of one.

cp "$T/reload-a.json" "$POLICY"
EV="$T/events-queued.jsonl"
pl_start_proxy_ok
python3 - "$PROXY" "$T/queued.bin" <<'PY'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.settimeout(10)
s.connect((host, int(port)))
s.sendall(b"GET http://api.airlock.test/evil/bigearly HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
time.sleep(0.5)
got = b""
while True:
    try:
        d = s.recv(1024)
    except (socket.timeout, ConnectionResetError):
        break
    if not d:
        break
    got += d
    time.sleep(0.002)
open(sys.argv[2], "wb").write(got)
PY
heads=$(python3 - "$T/queued.bin" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
heads = []
while d:
    i = d.find(b"\r\n\r\n")
    if i < 0:
        print("a partial head at the end: %r" % d[:60])
        sys.exit(1)
    head, d = d[:i], d[i + 4:]
    status = head.split(b"\r\n")[0]
    if not status.startswith(b"HTTP/1.1 "):
        print("not a status line: %r" % status[:60])
        sys.exit(1)
    heads.append(status.split(b" ")[1].decode())
    if heads[-1] == "502":
        n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
        d = d[n:]
print(" ".join(heads))
PY
)
is "$heads" "103 103 103 103 502" "the client gets the four interim answers whole, then the 502"

pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
done_testing
