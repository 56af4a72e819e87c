#!/bin/sh
# The egress proxy in shadow and off mode (docs/PROXY.md): in shadow,
# what enforce would deny by a rule goes ahead and is recorded
# would_block; the address checks (special-purpose addresses) and the
# proxy's own address are enforced (decision block), and what cannot be
# forwarded (an invalid name, a DNS failure, a malformed request) is still
# blocked.
# In off, nothing is checked and everything is recorded as mode.off.
# Both streams verify after SIGTERM.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

# Here the would-be-denied targets are real servers, so that "goes ahead"
# can be seen: http on 198.18.0.13, 127.0.0.1, 169.254.169.254, 100.64.0.1,
# 198.18.0.10:8080; TLS on 198.18.0.13.
PL_SINK=""
PL_HTTP="$PL_HTTP 198.18.0.13:80 127.0.0.1:80 169.254.169.254:80 100.64.0.1:80 198.18.0.10:8080"
PL_TLS="$PL_TLS 198.18.0.13:443"
pl_start_net

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "shadow",
  "egress": {
    "allow": ["api.airlock.test", "git.airlock.test", "*.cdn.airlock.test",
              "loop.airlock.test", "meta.airlock.test", "mixed.airlock.test",
              "cgnat.airlock.test", "169.254.169.254", "127.0.0.1",
              "nx.airlock.test"],
    "deny": ["private.cdn.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
pl_start_proxy_ok

rget() {
	raw "GET http://$1${2:-/} HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}
# shadowed DESC RULE LISTEN PATH: the last answer is LISTEN's 200 for PATH
# and the newest egress.block receipt is would_block by RULE.
shadowed() {
	like "$CODE $(head -n 1 "$T/b")" "^200 hello from $3 method=[A-Z]+ path=$4 " "$1: goes ahead"
	r=$(last_receipt egress.block)
	is "$(jf "$r" decision) $(jf "$r" rule)" "would_block $2" "$1: recorded would_block by $2"
}

# --- denies that go ahead -------------------------------------------------------------

req http://api.airlock.test/allowed
allowed_http "an allowed host is served" 198.18.0.10:80 /allowed 'api\.airlock\.test(:80)?'
is "$(jf "$(last_receipt egress.allow)" decision)" "allow" "as egress.allow"

req http://other.airlock.test/default
shadowed "a host no rule allows" egress.default 198.18.0.13:80 /default
r=$(last_receipt egress.block)
is "$(jf "$r" subject.host) $(jf "$r" subject.port) $(jf "$r" point)" "other.airlock.test 80 egress-proxy" "the would_block receipt names the target"
is "$(hdr X-Airlock-Rule)" "" "a shadowed request gets the upstream's answer, not an airlock one"
req http://private.cdn.airlock.test/deny
shadowed "a host a deny rule matches" 'egress.deny[0]' 198.18.0.13:80 /deny
req http://api.airlock.test:8080/port
shadowed "a port no rule allows" egress.default 198.18.0.10:8080 /port
# --- the address checks hold in shadow mode too ---------------------------------------
#
# A special-purpose address outside allow_ranges (the host's loopback, a
# metadata service, CGNAT, RFC 1918) is never connected to: a shadow run
# learns nothing a policy could use from reaching it, and it could hand the
# agent the host. Recorded with decision block.

# special DESC RULE LISTEN PATH: the last answer is 403 by RULE with a
# block receipt, and LISTEN never saw PATH.
special() {
	is "$(verdict)" "403 $2 egress.block/block/$2" "$1: blocked, decision block"
	is "$(net_count listen="$3" line~"$4")" 0 "$1: $3 never saw it"
}
req http://loop.airlock.test/loop
special "a name resolving to 127.0.0.1" egress.special-address 127.0.0.1:80 /loop
req http://meta.airlock.test/latest/meta-data/
special "a name resolving to 169.254.169.254" egress.special-address 169.254.169.254:80 /latest/meta-data/
req http://cgnat.airlock.test/c
special "a name resolving to 100.64.0.1" egress.special-address 100.64.0.1:80 /c
rget 169.254.169.254 /lit
special "the IP literal 169.254.169.254" egress.special-address 169.254.169.254:80 /lit
rget 2130706433 /dec
special "the IP literal 2130706433 (127.0.0.1)" egress.special-address 127.0.0.1:80 /dec
req http://mixed.airlock.test/mixed
special "198.18.0.10 and 10.0.0.1" egress.special-address 198.18.0.10:80 /mixed
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" subject.addresses)" '10\.0\.0\.1' "the receipt lists 10.0.0.1"
python3 - "$PROXY" <<'PY' > "$T/redis.out"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(b"CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\nPING\r\n")
print(s.recv(200).split(b"\r\n")[0].decode())
PY
is "$(cat "$T/redis.out")" "HTTP/1.1 403 Forbidden" "CONNECT 127.0.0.1:6379 (a host redis): 403 before a byte reaches it"
is "$(jf "$(last_receipt egress.block)" decision)" "block" "recorded as block"

ntls=$(net_count srv=tls event=handshake sni=git.airlock.test)
printf 'GET /sni HTTP/1.1\r\nHost: api.airlock.test\r\nConnection: close\r\n\r\n' |
	timeout 20 openssl s_client -quiet -proxy "$PROXY" -connect api.airlock.test:443 \
		-servername git.airlock.test -CAfile "$CA" > "$T/sc" 2>&1
like "$(grep -a 'hello from' "$T/sc")" '^hello from tls 198\.18\.0\.10:443 method=GET path=/sni ' \
	"SNI git.airlock.test in a CONNECT to api.airlock.test: goes ahead"
is "$(net_count srv=tls event=handshake sni=git.airlock.test)" "$((ntls + 1))" "the upstream saw the ClientHello unchanged (SNI git.airlock.test)"
r=$(grep '"rule":"egress.sni_mismatch"' "$EV" | tail -n 1)
is "$(jf "$r" type) $(jf "$r" decision)" "egress.block would_block" "recorded would_block by egress.sni_mismatch"

req https://other.airlock.test/tls --cacert "$CA"
is "$CODE $(head -n 1 "$T/b")" "200 hello from tls 198.18.0.13:443 method=GET path=/tls host=other.airlock.test body-length=0" \
	"CONNECT other.airlock.test:443 (no rule): goes ahead"
r=$(last_receipt egress.block)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.port)" "would_block egress.default 443" "recorded would_block"

# --- what cannot go ahead is still blocked ---------------------------------------------

nup=$(net_count event=request)
rget api.airlock.test..
like "$(verdict)" '^(403 host\.invalid egress\.block/block/host\.invalid|400 [^ ]+ proxy\.error/block/[^ ]+)$' \
	"an invalid name: still blocked (decision block)"
req http://nx.airlock.test/
failed "NXDOMAIN: still 502 dns.failure (decision block)" 502 dns.failure
raw "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
malformed "a malformed request: still 400 (decision block)"
raw "GET http://[api.airlock.test]/ HTTP/1.1\r\nHost: [api.airlock.test]\r\n\r\n"
malformed "a bracketed name: still 400"
is "$(net_count event=request)" "$nup" "none of these reached an upstream"
# The proxy's own address is ALWAYS denied (a loop, not a
# destination).
rget "127.0.0.1:$PL_PORT" /self
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "the proxy's own address: blocked even in shadow"

# --- the stream ----------------------------------------------------------------------

wb=$(grep -c '"decision":"would_block"' "$EV")
[ "$wb" -ge 5 ]
ok $? "the stream holds the would_block receipts ($wb)"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
r=$(tail -n 1 "$EV")
is "$(jf "$r" type)" "session.end" "the stream ends with session.end"
python3 - "$EV" <<'PY'
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
c = collections.Counter(l["type"] for l in lines)
sys.exit(0 if lines[-1]["subject"]["counts"] == dict(c) else 1)
PY
ok $? "session.end's counts match the stream"
"$AIRLOCK" verify "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "the shadow stream verifies"
sed 's/^/# /' "$T/verify.out"

# --- off -------------------------------------------------------------------------------

sed 's/"mode": "shadow"/"mode": "off"/' "$POLICY" > "$T/off.json"
POLICY="$T/off.json"
EV="$T/events-off.jsonl"
pl_start_proxy_ok
req http://other.airlock.test/off
like "$CODE $(head -n 1 "$T/b")" '^200 hello from 198\.18\.0\.13:80 method=GET path=/off ' "off: a host no rule allows is forwarded"
r=$(last_receipt egress.allow)
is "$(jf "$r" decision) $(jf "$r" rule)" "allow mode.off" "recorded egress.allow by mode.off"
rget 169.254.169.254 /off-meta
like "$CODE $(head -n 1 "$T/b")" '^200 hello from 169\.254\.169\.254:80 method=GET path=/off-meta ' "off: 169.254.169.254 is forwarded"
is "$(jf "$(last_receipt egress.allow)" rule)" "mode.off" "recorded by mode.off"
is "$(count_receipts egress.block)" 0 "off writes no egress.block"
raw "GET http://api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\nHost: api.airlock.test\r\n\r\n"
malformed "off: a malformed request is still 400"
rget "127.0.0.1:$PL_PORT" /self
is "$(verdict)" "403 egress.self egress.block/block/egress.self" "off: the proxy's own address is still denied (always)"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
is "$?" 0 "the off stream verifies"
done_testing
