#!/bin/sh
# The second ClientHello of a TLS 1.3 handshake (docs/PROXY.md, "CONNECT
# and the first flight"): after the server's HelloRetryRequest the client
# sends another ClientHello, and it must carry the SNI the first one was
# checked for; otherwise the tunnel is closed before any of it reaches the
# server. testnet.py's "hrr" server answers every ClientHello with a
# HelloRetryRequest and logs the SNI of the next one it gets.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK=""
PL_HRR="198.18.0.10:8443"
pl_start_net
for mode in enforce shadow; do
	cat > "$T/policy-$mode.json" <<EOF
{
  "version": 1,
  "mode": "$mode",
  "egress": {
    "allow": ["api.airlock.test:8443"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
done
POLICY="$T/policy-enforce.json"
pl_start_proxy_ok

# hrr SNI2 [ARGS]: CONNECT api.airlock.test:8443, a first hello for
# api.airlock.test, the HelloRetryRequest, a second hello for SNI2. Sets
# REP (the client's report) and H2 (the server's hello2 log line).
hrr() {
	_n=$(net_count srv=hrr event=hello2)
	python3 "$TESTNET" hrr-client "$PROXY" api.airlock.test:8443 --sni1 api.airlock.test \
		--sni2 "$1" --report "$T/hrr.json" ${2:+"$2"}
	REP=$(cat "$T/hrr.json")
	_i=0
	while [ "$(net_count srv=hrr event=hello2)" -le "$_n" ] && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	H2=$(net_last srv=hrr event=hello2)
}

hrr api.airlock.test --ccs
is "$(jf "$REP" status) $(jf "$REP" got_hrr)" "200 true" "control: the tunnel is open and the HelloRetryRequest reaches the client"
is "$(jf "$H2" sni) $(jf "$H2" eof)" "api.airlock.test false" \
	"a second ClientHello with the same SNI (after change_cipher_spec) reaches the server"
is "$(jf "$(last_receipt egress.allow)" subject.sni)" "api.airlock.test" "the tunnel is recorded as allowed"

nb=$(count_receipts egress.block)
hrr git.airlock.test
is "$(jf "$H2" sni) $(jf "$H2" eof)" "null true" \
	"a second ClientHello naming another host never reaches the server"
is "$(jf "$REP" closed_by_peer)" "true" "the proxy closes the tunnel"
r=$(last_receipt egress.block)
is "$(count_receipts egress.block) $(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.sni) $(jf "$r" subject.hello_retry)" \
	"$((nb + 1)) block egress.sni_mismatch git.airlock.test true" "recorded: egress.sni_mismatch, the second SNI, hello_retry"

hrr git.airlock.test --ccs
is "$(jf "$H2" eof)" "true" "the same after a change_cipher_spec record"
hrr ""
is "$(jf "$H2" eof) $(jf "$(last_receipt egress.block)" rule)" "true egress.sni_mismatch" \
	"a second ClientHello without SNI: closed, egress.sni_mismatch"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"

# shadow: recorded would_block, the handshake goes on
POLICY="$T/policy-shadow.json"
EV="$T/events-shadow.jsonl"
pl_start_proxy_ok
hrr git.airlock.test
is "$(jf "$H2" sni)" "git.airlock.test" "shadow: the second ClientHello goes ahead"
r=$(last_receipt egress.block)
is "$(jf "$r" decision) $(jf "$r" rule)" "would_block egress.sni_mismatch" "and is recorded would_block"
pl_stop_proxy
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
is "$?" 0 "the stream verifies"
done_testing
