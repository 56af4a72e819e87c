#!/bin/sh
# The egress proxy's host rules (docs/PROXY.md): what a
# policy allows goes through byte for byte; everything else is answered
# 403 with the rule that decided, the receipt that names it, and no
# connection (and no DNS query) for the denied target. SIGHUP reloads the
# policy; SIGTERM ends a stream that verifies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

write_policy() {
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "*.cdn.airlock.test", "**.both.airlock.test",
              "port.airlock.test:8081", "198.18.0.12", "0.0.0.0/0", "::/0",
              "git.airlock.test"$1],
    "deny": ["private.cdn.airlock.test", "blocked.both.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15", "2001:db8:a::/48"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
}
write_policy ""
pl_start_net
pl_start_proxy_ok

# rget HOST[:PORT] [PATH]: a raw absolute-form GET with a matching Host.
rget() {
	raw "GET http://$1${2:-/} HTTP/1.1\r\nHost: $1\r\nUser-Agent: t\r\n\r\n" --idle 1
}
# rconnect HOST:PORT: a raw CONNECT (nothing sent after it).
rconnect() {
	raw "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}

# --- the stream opens with session.start --------------------------------------

first=$(head -n 1 "$EV")
is "$(jf "$first" type)/$(jf "$first" seq)/$(jf "$first" point)" "session.start/0/$(jf "$first" point)" "the stream opens with session.start (seq 0)"
is "$(jf "$first" subject.argv0)" "airlock-proxy" "session.start names argv0 airlock-proxy"
digest=$("$AIRLOCK" check "$POLICY" | sed -n 's/^ok //p')
is "$(jf "$first" policy)" "$digest" "its policy digest is the one airlock check prints"

# --- allowed: relayed byte for byte --------------------------------------------

req http://api.airlock.test/x
allowed_http "http://api.airlock.test/x: 200 from 198.18.0.10:80" 198.18.0.10:80 /x 'api\.airlock\.test(:80)?'
is "$(wc -c < "$T/b" | tr -d ' ')" "$(head -n 1 "$T/b" | wc -c | tr -d ' ')" "the body is exactly the upstream's one line"
r=$(last_receipt egress.allow)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" point)" "allow egress.allow[0] egress-proxy" "an egress.allow receipt by egress.allow[0]"
is "$(jf "$r" subject.host) $(jf "$r" subject.port) $(jf "$r" subject.address) $(jf "$r" subject.method)" \
	"api.airlock.test 80 198.18.0.10 GET" "its subject: host, port, the address connected to, method"
is "$(jf "$r" subject.rule)" "api.airlock.test" "and the rule's text"
last=$(net_last srv=http listen=198.18.0.10:80 event=request)
is "$(jf "$last" line)" "GET /x HTTP/1.1" "the upstream got the request in origin-form"
is "$(net_count srv=dns name=api.airlock.test type=A)" 1 "the proxy asked the test DNS server (egress.resolver) once for A"

req http://api.airlock.test/bytes/1000000
python3 -c 'import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(1000000)))' > "$T/want"
cmp -s "$T/b" "$T/want"
ok $? "a 1 MB response is relayed byte for byte"

req https://api.airlock.test/tls --cacert "$CA"
is "$CODE $(head -n 1 "$T/b")" \
	"200 hello from tls 198.18.0.10:443 method=GET path=/tls host=api.airlock.test body-length=0" \
	"https://api.airlock.test/ through CONNECT: the upstream's answer, byte for byte"
is "$(jf "$(net_last srv=tls event=handshake)" sni)" "api.airlock.test" "the TLS upstream saw the SNI api.airlock.test"
r=$(last_receipt egress.allow)
is "$(jf "$r" rule) $(jf "$r" subject.method) $(jf "$r" subject.port) $(jf "$r" subject.address)" \
	"egress.allow[0] CONNECT 443 198.18.0.10" "the CONNECT's egress.allow receipt"

req http://x.cdn.airlock.test/
allowed_http "*.cdn.airlock.test allows x.cdn.airlock.test" 198.18.0.11:80 / 'x\.cdn\.airlock\.test(:80)?'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[1]" "by egress.allow[1]"
req http://deep.x.cdn.airlock.test/
allowed_http "*.cdn.airlock.test allows deep.x.cdn.airlock.test (any depth)" 198.18.0.11:80 / 'deep\.x\.cdn\.airlock\.test(:80)?'
req http://both.airlock.test/
allowed_http "**.both.airlock.test allows both.airlock.test itself" 198.18.0.11:80 / 'both\.airlock\.test(:80)?'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[2]" "by egress.allow[2]"
req http://a.b.both.airlock.test/
allowed_http "**.both.airlock.test allows a.b.both.airlock.test" 198.18.0.11:80 / 'a\.b\.both\.airlock\.test(:80)?'
req http://port.airlock.test:8081/p
allowed_http "port.airlock.test:8081 allows port 8081" 198.18.0.11:8081 /p 'port\.airlock\.test:8081'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[3]" "by egress.allow[3]"
req http://198.18.0.12/lit
allowed_http "the IP literal 198.18.0.12 (a rule, in allow_ranges)" 198.18.0.12:80 /lit '198\.18\.0\.12(:80)?'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[4]" "by egress.allow[4]"

if [ "$PL_V6" = yes ]; then
	rget '[::ffff:198.18.0.12]' /mapped
	allowed_http "[::ffff:198.18.0.12] is 198.18.0.12 (the rule and allow_ranges cover the mapped form)" 198.18.0.12:80 /mapped '\[::ffff:198\.18\.0\.12\](:80)?'
	is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[4]" "by egress.allow[4]"
fi
rget API.AIRLOCK.TEST /upper
allowed_http "an uppercase name is the name (API.AIRLOCK.TEST)" 198.18.0.10:80 /upper '[Aa][Pp][Ii]\.[Aa][Ii][Rr][Ll][Oo][Cc][Kk]\.[Tt][Ee][Ss][Tt](:80)?'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[0]" "by egress.allow[0]"
rget api.airlock.test. /dot
allowed_http "one trailing dot is the name (api.airlock.test.)" 198.18.0.10:80 /dot 'api\.airlock\.test\.?(:80)?'
is "$(jf "$(last_receipt egress.allow)" rule)" "egress.allow[0]" "by egress.allow[0]"

# --- denied by the rules -----------------------------------------------------------

ndns_before=$(net_count srv=dns)

req http://other.airlock.test/
blocked "a host not on the list: 403 egress.default" 403 egress.default 198.18.0.13:80
like "$(hdr Content-Type)" '^text/plain' "the answer is text/plain"
is "$(tr -d '\r' < "$T/b" | wc -l | tr -d ' ')" 3 "with a three-line body (what, rule and receipt, no other route)"
like "$(cat "$T/b")" '^airlock: denied .*other\.airlock\.test' "that says what was denied"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
is "$(jf "$r" subject.host) $(jf "$r" subject.port) $(jf "$r" subject.method) $(jf "$r" point)" \
	"other.airlock.test 80 GET egress-proxy" "the egress.block receipt names host, port, method"

rconnect other.airlock.test:443
blocked "CONNECT other.airlock.test:443: 403 egress.default" 403 egress.default 198.18.0.13:443
req http://private.cdn.airlock.test/
blocked "deny beats allow: private.cdn.airlock.test" 403 'egress.deny[0]' 198.18.0.13:80
is "$(jf "$(receipt_of "$(hdr X-Airlock-Receipt)")" subject.rule)" "private.cdn.airlock.test" "the receipt has the deny rule's text"
rconnect private.cdn.airlock.test:443
blocked "CONNECT private.cdn.airlock.test:443: egress.deny[0]" 403 'egress.deny[0]' 198.18.0.13:443
rget private.cdn.airlock.test:8081
blocked "a deny rule without a port denies every port (private.cdn.airlock.test:8081)" 403 'egress.deny[0]'
rget blocked.both.airlock.test
blocked "deny beats a ** allow: blocked.both.airlock.test" 403 'egress.deny[1]' 198.18.0.13:80
rget cdn.airlock.test
blocked "*.cdn.airlock.test does not match cdn.airlock.test" 403 egress.default 198.18.0.13:80
rget evilcdn.airlock.test
blocked "*.cdn.airlock.test does not match evilcdn.airlock.test" 403 egress.default 198.18.0.13:80
rget evilapi.airlock.test
blocked "api.airlock.test does not match evilapi.airlock.test" 403 egress.default 198.18.0.13:80
rget api.airlock.test.evil.test
blocked "api.airlock.test does not match api.airlock.test.evil.test" 403 egress.default 198.18.0.13:80
rconnect api.airlock.test.evil.test:443
blocked "CONNECT api.airlock.test.evil.test:443" 403 egress.default 198.18.0.13:443
rget PRIVATE.CDN.AIRLOCK.TEST
blocked "uppercase does not escape a deny (PRIVATE.CDN.AIRLOCK.TEST)" 403 'egress.deny[0]' 198.18.0.13:80
rconnect Private.Cdn.Airlock.Test.:443
blocked "mixed case and a trailing dot do not escape a deny (CONNECT)" 403 'egress.deny[0]' 198.18.0.13:443
rget private.cdn.airlock.test.
blocked "a trailing dot does not escape a deny" 403 'egress.deny[0]' 198.18.0.13:80
rget xn--pi-7ka.airlock.test
blocked "a punycode name not on the list" 403 egress.default 198.18.0.13:80

req http://api.airlock.test:8080/
blocked "api.airlock.test:8080: a port not in egress.ports" 403 egress.default 198.18.0.10:8080
rconnect api.airlock.test:23
blocked "CONNECT api.airlock.test:23: a port not in egress.ports" 403 egress.default
rget port.airlock.test:80
blocked "port.airlock.test:80: its rule allows 8081 only" 403 egress.default
is "$(net_count listen=198.18.0.11:80 host~port.airlock.test)" 0 "nothing reached 198.18.0.11:80 for port.airlock.test"
rconnect api.airlock.test:0
like "$(verdict)" '^(400 [^ ]+ proxy\.error/block/[^ ]+|403 (egress\.default|host\.invalid) egress\.block/block/(egress\.default|host\.invalid))$' "CONNECT to port 0 is refused"

is "$(net_count srv=dns)" "$ndns_before" "no denied name was looked up in DNS (nothing leaks through queries)"

# --- not a valid name --------------------------------------------------------

rget api.airlock.test..
invalid_host "two trailing dots: not a name"
is "$(net_count host~airlock.test..)" 0 "nothing reached an upstream for api.airlock.test.."
raw "GET http://[api.airlock.test]/ HTTP/1.1\r\nHost: [api.airlock.test]\r\n\r\n"
malformed "GET http://[api.airlock.test]/: 400"
raw "CONNECT [api.airlock.test]:443 HTTP/1.1\r\nHost: [api.airlock.test]:443\r\n\r\n"
malformed "CONNECT [api.airlock.test]:443: 400"
raw "CONNECT [[private.cdn.airlock.test]]:443 HTTP/1.1\r\n\r\n"
malformed "CONNECT [[private.cdn.airlock.test]]:443: 400"
raw "GET http://[[api.airlock.test]]/ HTTP/1.1\r\nHost: [[api.airlock.test]]\r\n\r\n"
malformed "GET http://[[api.airlock.test]]/: 400"
raw "GET http://\xc3\xa1pi.airlock.test/ HTTP/1.1\r\nHost: \xc3\xa1pi.airlock.test\r\n\r\n"
invalid_host "a non-ASCII name (UTF-8 ápi.airlock.test)" 198.18.0.13:80
raw "CONNECT \xc3\xa1pi.airlock.test:443 HTTP/1.1\r\n\r\n"
invalid_host "CONNECT to a non-ASCII name"
raw "GET http://api%2eairlock.test/ HTTP/1.1\r\nHost: api%2eairlock.test\r\n\r\n"
invalid_host "a percent-escaped name"
raw "GET http://user@api.airlock.test/ HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n"
invalid_host "user-info in the target"
raw "CONNECT -api.airlock.test:443 HTTP/1.1\r\n\r\n"
invalid_host "a label with a leading hyphen"
raw "GET http://a_b.airlock..test/ HTTP/1.1\r\nHost: a_b.airlock..test\r\n\r\n"
invalid_host "an empty label"
raw "GET http://1.2.3.4.5/ HTTP/1.1\r\nHost: 1.2.3.4.5\r\n\r\n"
invalid_host "a numeric last label that is no address (1.2.3.4.5)"
raw "CONNECT 4294967296:443 HTTP/1.1\r\n\r\n"
invalid_host "an IPv4 number that overflows (4294967296)"

long=$(python3 -c 'print("a" * 64)')
rget "$long.airlock.test"
invalid_host "a 64-byte label"
long=$(python3 -c 'n = ".".join(["a" * 63] * 3 + ["a" * 57, "test"]); assert len(n) == 254; print(n)')
rget "$long"
invalid_host "a name of 254 bytes"
long=$(python3 -c 'n = ".".join(["a" * 63] * 3 + ["a" * 56, "test"]); assert len(n) == 253; print(n)')
rget "$long"
blocked "a name of 253 bytes is a name (not on the list)" 403 egress.default
raw "GET http://[fe80::1%25lo]/ HTTP/1.1\r\nHost: [fe80::1%25lo]\r\n\r\n"
invalid_host "an IPv6 literal with a zone id"
raw "CONNECT api.airlock.test:443:443 HTTP/1.1\r\n\r\n"
invalid_host "CONNECT with two ports"

# --- IP literals: special-purpose addresses, in every notation ------------------

# literal, listener it would reach (port 80 / 443 appended), or "-".
while read -r lit sink; do
	[ -n "$lit" ] || continue
	case "$lit" in
	\[*) [ "$PL_V6" = yes ] || { ok 0 "# skip $lit: no IPv6 here"; continue; } ;;
	esac
	ls80="" ls443=""
	[ "$sink" != - ] && ls80="$sink:80" ls443="$sink:443"
	rget "$lit"
	# shellcheck disable=SC2086
	blocked "GET http://$lit/: 403 egress.special-address" 403 egress.special-address $ls80
	rconnect "$lit:443"
	# shellcheck disable=SC2086
	blocked "CONNECT $lit:443: 403 egress.special-address" 403 egress.special-address $ls443
done <<'EOF'
127.1 127.0.0.1
2130706433 127.0.0.1
0x7f.0.0.1 127.0.0.1
0177.0.0.1 127.0.0.1
0x7f.1 127.0.0.1
017700000001 127.0.0.1
127.0.0.1 127.0.0.1
0.0.0.0 127.0.0.1
100.64.0.1 100.64.0.1
169.254.169.254 169.254.169.254
0xa9.0xfe.0xa9.0xfe 169.254.169.254
2852039166 169.254.169.254
[::] [::1]
[::1] [::1]
[::ffff:127.0.0.1] 127.0.0.1
[::ffff:169.254.169.254] 169.254.169.254
[::169.254.169.254] [::a9fe:a9fe]
[64:ff9b::a9fe:a9fe] [64:ff9b::a9fe:a9fe]
[2002:a9fe:a9fe::] [2002:a9fe:a9fe::]
[fd00::1] [fd00::1]
[fe80::1] -
EOF
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" subject.addresses)" '"class"' "an egress.block receipt lists the address with its class"

rget 169.254.169.254:8080
blocked "GET http://169.254.169.254:8080/: a port no rule allows" 403 egress.default
rget 198.18.0.12:8080
blocked "GET http://198.18.0.12:8080/: a port no rule allows" 403 egress.default

for q in 127.1 2130706433 0x7f.0.0.1 0177.0.0.1 0.0.0.0 017700000001; do
	is "$(net_count srv=dns name=$q)" 0 "the IP literal $q was never looked up as a name"
done

# --- the proxy's own address ------------------------------------------------------

rconnect "127.0.0.1:$PL_PORT"
blocked "CONNECT to the proxy itself: egress.self" 403 egress.self
rget "127.0.0.1:$PL_PORT"
blocked "GET http://127.0.0.1:$PL_PORT/: egress.self" 403 egress.self
rconnect "127.1:$PL_PORT"
blocked "CONNECT 127.1:$PL_PORT (the proxy in another notation): egress.self" 403 egress.self

# --- the proxy kept serving ---------------------------------------------------------

req http://api.airlock.test/still
allowed_http "after all of that, an allowed request is still served" 198.18.0.10:80 /still 'api\.airlock\.test(:80)?'

# --- SIGHUP -------------------------------------------------------------------------

req http://new.airlock.test/
blocked "before the reload: new.airlock.test is not allowed" 403 egress.default
is "$(net_count listen=198.18.0.11:80 host~new.airlock.test)" 0 "nothing reached 198.18.0.11:80 for new.airlock.test"
old=$digest
write_policy ', "new.airlock.test"'
new=$("$AIRLOCK" check "$POLICY" | sed -n 's/^ok //p')
kill -HUP "$PL_PROXY_PID"
wait_receipts policy.reload 1
r=$(last_receipt policy.reload)
is "$(jf "$r" decision) $(jf "$r" policy) $(jf "$r" subject.previous)" "info $new $old" \
	"SIGHUP with a valid policy: policy.reload (info), the new digest, the old one as previous"
req http://new.airlock.test/reloaded
allowed_http "after the reload new.airlock.test is allowed" 198.18.0.11:80 /reloaded 'new\.airlock\.test(:80)?'
r=$(last_receipt egress.allow)
is "$(jf "$r" rule) $(jf "$r" policy)" "egress.allow[8] $new" "by the new rule, under the new digest"

printf '{"version": 1, "egress": {"allow": ["*.*.bad"], "ports": [0]}}\n' > "$POLICY"
kill -HUP "$PL_PROXY_PID"
wait_receipts policy.reload 2
r=$(last_receipt policy.reload)
is "$(jf "$r" decision) $(jf "$r" policy)" "block $new" "SIGHUP with an invalid policy: policy.reload (block), the old digest kept"
like "$(jf "$r" reason) $(jf "$r" subject.errors)" 'egress\.(allow|ports)' "the receipt names the errors"
req http://new.airlock.test/kept
allowed_http "the old policy is still in force" 198.18.0.11:80 /kept 'new\.airlock\.test(:80)?'
req http://other.airlock.test/
blocked "and still denies what it denied" 403 egress.default 198.18.0.13:80

# --- nothing reached a sink; SIGTERM ends the stream --------------------------------

sleep 0.5
is "$(net_count srv=sink)" 0 "no sink (denied target, special address) saw any connection"
is "$(net_count listen=198.18.0.10:8080)" 0 "nothing reached 198.18.0.10:8080"
pl_control_sinks

pl_stop_proxy
is "$?" 0 "SIGTERM: the proxy exits 0"
r=$(tail -n 1 "$EV")
is "$(jf "$r" type) $(jf "$r" subject.exit)" "session.end 0" "the stream ends with session.end (exit 0)"
"$AIRLOCK" verify "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "the stream verifies (airlock verify)"
sed 's/^/# /' "$T/verify.out"

# Usage errors: one line, exit 125, nothing listens.
"$AIRLOCK" proxy --policy "$POLICY" --listen 127.0.0.1:18081 --session 'bad id' 2>"$T/usage.err"
is "$?" 125 "proxy --session with a bad id: 125"
is "$(wc -l < "$T/usage.err")" 1 "with one line on stderr"
"$AIRLOCK" proxy --policy "$POLICY" --listen localhost:18081 2>"$T/usage.err"
is "$?" 125 "proxy --listen with a name instead of an address: 125"
like "$(cat "$T/usage.err")" "--listen must be IPV4:PORT or \\[IPV6\\]:PORT" "and says what it takes"
"$AIRLOCK" proxy --listen 127.0.0.1:18081 2>"$T/usage.err"
is "$?" 125 "proxy without --policy: 125"
done_testing
