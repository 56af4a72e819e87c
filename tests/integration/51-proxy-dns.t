#!/bin/sh
# The egress proxy and DNS (docs/PROXY.md): the proxy resolves
# names itself with egress.resolver, classifies every answer (one
# special-purpose answer denies the name), connects only to an address it
# checked and never looks the name up a second time (DNS rebinding), and
# answers 502 dns.failure when a name does not resolve.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

write_policy() {
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["**.airlock.test", "localhost", "self.airlock.test:$PL_PORT"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15", "2001:db8:a::/48"],
    "resolver": $1
  }
}
EOF
}
write_policy "[\"$PL_RESOLVER\"]"
pl_start_net
pl_start_proxy_ok

# rget HOST [PATH]: a raw absolute-form GET.
rget() {
	raw "GET http://$1${2:-/} HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}
rconnect() {
	raw "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}
# addrs: the addresses of the receipt the last answer names, sorted.
addrs() {
	r=$(receipt_of "$(hdr X-Airlock-Receipt)")
	python3 -c 'import json, sys
a = json.loads(sys.argv[1] or "{}").get("subject", {}).get("addresses") or []
print(" ".join(sorted(x.get("address", "?") for x in a)))' "$r"
}

# --- names that resolve to public (allowed-range) addresses ---------------------

req http://api.airlock.test/a
allowed_http "api.airlock.test: 200 from 198.18.0.10" 198.18.0.10:80 /a 'api\.airlock\.test(:80)?'
is "$(net_count srv=dns name=api.airlock.test type=A) $(net_count srv=dns name=api.airlock.test type=AAAA)" \
	"1 1" "the proxy asked the test DNS server for A and AAAA, once each"
req http://alias.airlock.test/cname
allowed_http "alias.airlock.test (a CNAME to api.airlock.test)" 198.18.0.10:80 /cname 'alias\.airlock\.test(:80)?'
is "$(jf "$(last_receipt egress.allow)" subject.address)" "198.18.0.10" "connected to the CNAME target's address"

if [ "$PL_V6" = yes ]; then
	req http://v6pub.airlock.test/six
	allowed_http "an AAAA-only name in allow_ranges: 200 over IPv6" '\[2001:db8:a::10\]:80' /six 'v6pub\.airlock\.test(:80)?'
	is "$(jf "$(last_receipt egress.allow)" subject.address)" "2001:db8:a::10" "the receipt names the IPv6 address"
	req http://dualpub.airlock.test/dual
	allowed_http "A and AAAA both public: the first IPv4 answer is used" 198.18.0.11:80 /dual 'dualpub\.airlock\.test(:80)?'
	is "$(jf "$(last_receipt egress.allow)" subject.address)" "198.18.0.11" "the receipt names the IPv4 address"
else
	ok 0 "# skip IPv6 is not up here"
fi

# --- special-purpose answers ----------------------------------------------------

req http://loop.airlock.test/
blocked "a name resolving to 127.0.0.1: egress.special-address" 403 egress.special-address 127.0.0.1:80
is "$(addrs)" "127.0.0.1" "the receipt lists the answer"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" subject.addresses.0.class)" '.' "with its class ($(jf "$r" subject.addresses.0.class))"
is "$(jf "$r" subject.host)" "loop.airlock.test" "and the host"
rconnect loop.airlock.test:443
blocked "CONNECT loop.airlock.test:443" 403 egress.special-address 127.0.0.1:443
req http://meta.airlock.test/latest/meta-data/
blocked "a name resolving to 169.254.169.254 (the metadata service)" 403 egress.special-address 169.254.169.254:80
rconnect meta.airlock.test:443
blocked "CONNECT meta.airlock.test:443" 403 egress.special-address 169.254.169.254:443
req http://cgnat.airlock.test/
blocked "a name resolving to 100.64.0.1 (CGNAT)" 403 egress.special-address 100.64.0.1:80
req http://badalias.airlock.test/
blocked "a CNAME to a name resolving to 127.0.0.1" 403 egress.special-address 127.0.0.1:80

req http://mixed.airlock.test/
blocked "198.18.0.10 and 10.0.0.1: one private answer denies the name" 403 egress.special-address
is "$(addrs)" "10.0.0.1 198.18.0.10" "the receipt lists every answer"
req http://mixed2.airlock.test/
blocked "10.0.0.1 and 198.18.0.10 (private first)" 403 egress.special-address
rconnect mixed.airlock.test:443
blocked "CONNECT mixed.airlock.test:443" 403 egress.special-address
is "$(net_count host~mixed)" 0 "no upstream saw a request for the mixed names"
is "$(net_count listen=198.18.0.10:443)" 0 "nothing reached 198.18.0.10:443"

if [ "$PL_V6" = yes ]; then
	req http://v6loop.airlock.test/
	blocked "an AAAA-only answer ::1" 403 egress.special-address '[::1]:80'
	rconnect v6loop.airlock.test:443
	blocked "CONNECT to an AAAA-only ::1 name" 403 egress.special-address '[::1]:443'
	req http://v6ula.airlock.test/
	blocked "an AAAA-only answer fd00::1 (ULA)" 403 egress.special-address '[fd00::1]:80'
	req http://v6mapped.airlock.test/
	blocked "an AAAA ::ffff:169.254.169.254 (IPv4-mapped)" 403 egress.special-address 169.254.169.254:80
	req http://dual.airlock.test/
	blocked "A 198.18.0.10 with AAAA fd00::1: the AAAA denies the name" 403 egress.special-address '[fd00::1]:80'
	is "$(addrs)" "198.18.0.10 fd00::1" "the receipt lists both answers"
	is "$(net_count host~dual.airlock.test)" 0 "198.18.0.10 saw no request for dual.airlock.test"
else
	ok 0 "# skip IPv6 is not up here"
fi

rget "self.airlock.test:$PL_PORT"
blocked "a name resolving to the proxy's own address and port: egress.self" 403 egress.self

# --- answers only TCP can carry -------------------------------------------------

req http://big.airlock.test/big
allowed_http "40 A records (truncated over UDP, complete over TCP): 200 from the first" 198.18.0.11:80 /big 'big\.airlock\.test(:80)?'
is "$(net_count srv=dns proto=tcp name=big.airlock.test type=A)" 1 "the proxy asked again over TCP"
req http://bigmixed21.airlock.test/
blocked "41 A records (TCP only), the 21st 10.0.0.1: denied" 403 egress.special-address
req http://bigmixed.airlock.test/
blocked "40 public A records and 10.0.0.1 last (only in the TCP answer): denied" 403 egress.special-address
like "$(addrs)" '10\.0\.0\.1' "the receipt lists 10.0.0.1"
is "$(net_count host~bigmixed)" 0 "no upstream saw a request for bigmixed.airlock.test"
req http://bigv6.airlock.test/
blocked "40 public A records and an AAAA fd00::1: denied" 403 egress.special-address
is "$(net_count host~bigv6)" 0 "no upstream saw a request for bigv6.airlock.test"

# --- DNS rebinding: first 198.18.0.10, then 127.0.0.1 (TTL 0) ---------------------

req http://rebind.airlock.test/first
allowed_http "rebinding name, first request: 200 from 198.18.0.10" 198.18.0.10:80 /first 'rebind\.airlock\.test(:80)?'
is "$(jf "$(last_receipt egress.allow)" subject.address)" "198.18.0.10" "connected to the first answer"
is "$(net_count srv=dns name=rebind.airlock.test type=A)" 1 "after one request, one A query (no second lookup)"
req http://rebind.airlock.test/second
blocked "rebinding name, second request (now 127.0.0.1): 403" 403 egress.special-address 127.0.0.1:80
req http://rebind.airlock.test/third
blocked "and the third" 403 egress.special-address 127.0.0.1:80

req https://rebind443.airlock.test/first --cacert "$CA"
is "$CODE $(head -n 1 "$T/b")" \
	"200 hello from tls 198.18.0.10:443 method=GET path=/first host=rebind443.airlock.test body-length=0" \
	"rebinding name over CONNECT: first request tunnelled to 198.18.0.10:443"
is "$(net_count srv=dns name=rebind443.airlock.test type=A)" 1 "one A query for it"
rconnect rebind443.airlock.test:443
blocked "rebinding name over CONNECT, second request: 403" 403 egress.special-address 127.0.0.1:443

# Two requests on one client connection: each is decided on its own, and
# whatever the proxy does with the second, it never reaches 127.0.0.1.
raw "GET http://rebindka.airlock.test/1 HTTP/1.1\r\nHost: rebindka.airlock.test\r\n\r\nGET http://rebindka.airlock.test/2 HTTP/1.1\r\nHost: rebindka.airlock.test\r\n\r\n" --idle 2
like "$(head -n 1 "$T/b")" '^hello from 198\.18\.0\.10:80 method=GET path=/1 ' "keep-alive rebinding: the first answer is 198.18.0.10's"
second=$(tr -d '\r' < "$T/b" | sed -n '2,$p' | grep -E '^(HTTP/1\.1 [0-9]+|hello from)' | head -n 2 | tr '\n' ' ')
like "$second" '^(HTTP/1\.1 200 hello from 198\.18\.0\.10:80 method=GET path=/2 |HTTP/1\.1 403 )' \
	"the second is 198.18.0.10's answer or a 403"
is "$(net_count listen=127.0.0.1:80)" 0 "127.0.0.1:80 never heard from the proxy"

# --- DNS failures: 502 with the cause ------------------------------------------------

req http://nx.airlock.test/
failed "NXDOMAIN: 502 dns.failure" 502 dns.failure
like "$(cat "$T/b")" 'nx\.airlock\.test' "the body names the host"
like "$(tr 'A-Z' 'a-z' < "$T/b")" '(nxdomain|not found|no such|does not exist|no address|no answer)' "and the cause ($(cat "$T/b"))"
rconnect nx.airlock.test:443
failed "CONNECT to an NXDOMAIN name: 502 dns.failure" 502 dns.failure
req http://empty.airlock.test/
failed "no A and no AAAA record: 502 dns.failure" 502 dns.failure
req http://servfail.airlock.test/
failed "SERVFAIL: 502 dns.failure" 502 dns.failure
start=$(date +%s)
req http://slow.airlock.test/
end=$(date +%s)
failed "a DNS server that never answers: 502 dns.failure" 502 dns.failure
[ $((end - start)) -le 15 ]
ok $? "within the DNS timeout (took $((end - start)) s, limit 5 s + slack)"
req http://api.airlock.test/during
allowed_http "the proxy still serves" 198.18.0.10:80 /during 'api\.airlock\.test(:80)?'

# "localhost" goes to DNS too (not /etc/hosts); whatever the answer, it is
# never reached.
rget localhost
like "$(verdict)" '^(502 dns\.failure (egress\.block|proxy\.error)/block/dns\.failure|403 egress\.special-address egress\.block/block/egress\.special-address)$' \
	"http://localhost/ (allowed by a rule): refused"
is "$(net_count listen=127.0.0.1:80)" 0 "127.0.0.1:80 was not reached"

# --- resolvers in order: a dead one first ----------------------------------------------

pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
"$AIRLOCK" verify "$EV" >/dev/null 2>&1
is "$?" 0 "the stream verifies"
EV="$T/events2.jsonl"
write_policy '["127.0.0.1:5354", "127.0.0.1:5353"]'
pl_start_proxy_ok
req http://www.airlock.test/second-resolver
allowed_http "egress.resolver: the second server answers when the first is dead" 198.18.0.11:80 /second-resolver 'www\.airlock\.test(:80)?'

sleep 0.5
is "$(net_count srv=sink)" 0 "no sink saw any connection"
pl_control_sinks
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
"$AIRLOCK" verify "$EV" >/dev/null 2>&1
is "$?" 0 "the second stream verifies"
done_testing
