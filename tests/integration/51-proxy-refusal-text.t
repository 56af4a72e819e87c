#!/bin/sh
# The text of the proxy's refusals (docs/PROXY.md): a short plain-text
# body an agent's model can act on - what was refused and why, the rule and
# the receipt (the same as X-Airlock-Rule and X-Airlock-Receipt), and that
# other routes are refused too - and the messages that name the fix: a
# literal special-purpose address (egress.allow_ranges), a name that
# resolves to one, a name the resolver does not know (the proxy resolves
# through egress.resolver or resolv.conf only, never /etc/hosts).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["**.airlock.test", "127.0.0.1", "169.254.169.254"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
pl_start_net
pl_start_proxy_ok

rget() {
	raw "GET http://$1${2:-/} HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}
rconnect() {
	raw "CONNECT $1 HTTP/1.1\r\nHost: $1\r\n\r\n" --idle 1
}
body() { tr -d '\r' < "$T/b"; }
line() { body | sed -n "${1}p"; }

# shape CODE RULE DESC: the body of the last answer is three lines: what,
# "rule: RULE; receipt: N" (the headers' values), and the other routes.
shape() {
	_seq=$(hdr X-Airlock-Receipt)
	is "$CODE $(hdr X-Airlock-Rule)" "$1 $2" "$3: $1 $2"
	is "$(body | wc -l | tr -d ' ')" 3 "$3: a three-line body"
	like "$(line 1)" '^airlock: ' "$3: the first line says what was refused"
	is "$(line 2)" "rule: $2; receipt: $_seq" "$3: the second names the rule and the receipt"
	like "$(line 3)" '^Other routes \(--noproxy, direct sockets, other ports\) are refused too' \
		"$3: the third says other routes are refused too"
	[ "$(body | wc -c)" -le 512 ]
	ok $? "$3: short ($(body | wc -c) bytes)"
}

# --- a host no rule allows -----------------------------------------------------
req http://other.example.test/x
shape 403 egress.default "a host no rule allows"
like "$(line 1)" '^airlock: denied GET other\.example\.test:80: no egress\.allow rule matches' \
	"the first line names the request and the reason"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
is "$(jf "$r" type) $(jf "$r" subject.host)" "egress.block other.example.test" "the receipt the body names is the refusal's"

rconnect other.example.test:443
shape 403 egress.default "CONNECT to a host no rule allows"
like "$(line 1)" '^airlock: denied CONNECT other\.example\.test:443: ' "the CONNECT's first line"

# --- a literal special-purpose address: the fix is allow_ranges ----------------
rget 127.0.0.1
shape 403 egress.special-address "GET http://127.0.0.1/"
like "$(line 1)" '127\.0\.0\.1 is a special-purpose address \(loopback\); add its range to egress\.allow_ranges' \
	"a literal: it IS a special-purpose address, and the fix is egress.allow_ranges"
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
like "$(jf "$r" reason)" 'is a special-purpose address.*egress\.allow_ranges' "the receipt's reason says the same"
rconnect 169.254.169.254:443
shape 403 egress.special-address "CONNECT 169.254.169.254:443"
like "$(line 1)" '169\.254\.169\.254 is a special-purpose address \(link-local\); add its range to egress\.allow_ranges' \
	"the metadata address: link-local, allow_ranges"

rget 10.1.2.3
shape 403 egress.default "GET http://10.1.2.3/ (no rule)"
like "$(line 1)" 'no egress\.allow rule matches this host and port; it is also a special-purpose address \(private\), which needs its range in egress\.allow_ranges too' \
	"a special literal no rule allows: both fixes are named"

# --- a name that resolves to one ---------------------------------------------------
req http://loop.airlock.test/
shape 403 egress.special-address "a name resolving to 127.0.0.1"
like "$(line 1)" 'resolves to 127\.0\.0\.1, a special-purpose address \(loopback\); add its range to egress\.allow_ranges' \
	"a name: the address it resolves to, and the fix"

# --- DNS failures: the proxy does not read /etc/hosts ---------------------------
req http://nx.airlock.test/
shape 502 dns.failure "NXDOMAIN"
like "$(line 1)" '^airlock: GET nx\.airlock\.test:80: .*the proxy resolves through egress\.resolver \(or resolv\.conf\) only, not /etc/hosts' \
	"a DNS failure says the proxy resolves through egress.resolver only, not /etc/hosts"
rconnect servfail.airlock.test:443
shape 502 dns.failure "CONNECT to a SERVFAIL name"
like "$(line 1)" 'not /etc/hosts' "SERVFAIL: the same hint"

# --- a malformed request: 400, same shape ---------------------------------------
raw "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"
_rule=$(hdr X-Airlock-Rule)
shape 400 "$_rule" "a malformed request ($_rule)"

done_testing
