#!/bin/sh
# The broker holds at every byte (docs/SECRETS.md, SPEC §3.4): a value is
# injected only where the connection goes (the CONNECT target's host and
# port, never the Host header's), and a scripted hostile upstream
# (tests/helpers/hostile.py) that echoes the value in every place of an
# answer -- the reason phrase, a 103 Early Hints Link, a 102 reason, a
# header and a Location, a Content-Length, chunked or close-delimited body,
# a chunk extension, a trailer, the 101 head and WebSocket frames after it
# (split across records, across the frames of a message, masked, in a
# ping) -- at every split offset of the value never gets it to the agent,
# on a bound host and on an intercepted host that is not bound alike.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.15:443, :8443   hostile.py   api.bound.test, echo.bound.test
#   198.18.0.16:443          github_api.py  mint.git.test (GitHub App mints)
#   (and proxylib.sh's testnet.py: DNS on 127.0.0.1:5353)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

HOSTILE="$AIRLOCK_SRC/tests/helpers/hostile.py"
for a in 198.18.0.15 198.18.0.16; do
	ip addr add "$a/32" dev lo || { echo "Bail out! ip addr add $a"; exit 1; }
done
PL_TLS_NAMES="$PL_TLS_NAMES api.bound.test echo.bound.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["api.bound.test"] = ["198.18.0.15"]
z["echo.bound.test"] = ["198.18.0.15"]
z["mint.git.test"] = ["198.18.0.16"]
print(json.dumps(z))')
pl_start_net

VALUE="sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCD"
# a value an unbound host learnt elsewhere (the bound host leaked it)
"python3" "$HOSTILE" serve --listen 198.18.0.15:443 --listen 198.18.0.15:8443 \
	--cert "$T/tls/leaf.pem" --key "$T/tls/leaf.key" --ready "$T/hostile.ready" \
	--log "$T/hostile.log" --fixed "$VALUE" --fixed-file "$T/fixed" > "$T/hostile.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/hostile.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/hostile.ready" ] || { echo "Bail out! hostile.py: $(cat "$T/hostile.out")"; exit 1; }

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.bound.test", "api.bound.test:8443", "echo.bound.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "intercept": ["api.bound.test:8443", "echo.bound.test"]
  },
  "secrets": {
    "api": { "from_env": "API_KEY", "hosts": ["api.bound.test"],
             "headers": ["authorization", "x-api-key"], "prefix": "sk-live-" }
  }
}
EOF
API_KEY=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^API_KEY=//p' "$T/ph.env")
like "$PH" '^sk-live-' "the placeholder"

# --- binding by the connection ---------------------------------------------------

seen_value() { grep -c "$VALUE" "$T/hostile.log" 2>/dev/null || echo 0; }

# a Host without a port, on a tunnel to 8443: the tunnel's port decides
req https://api.bound.test:8443/v1/port --cacert "$T/session-ca.pem" \
	-H "Host: api.bound.test" -H "Authorization: Bearer $PH"
is "$CODE" 403 "a tunnel to api.bound.test:8443, Host without a port: the placeholder is refused"
r=$(last_receipt secret.block)
is "$(jf "$r" subject.why) $(jf "$r" rule) $(jf "$r" subject.port)" "host secrets.api.hosts 8443" \
	"... secret.block: not bound there, on port 8443"
is "$(seen_value)" 0 "... the upstream on 8443 never saw the value"
is "$(count_receipts secret.inject)" 0 "... and no secret.inject was written"
req https://api.bound.test:8443/v1/port2 --cacert "$T/session-ca.pem" \
	-H "Host: api.bound.test:443" -H "Authorization: Bearer $PH"
is "$CODE $(hdr X-Airlock-Rule)" "403 egress.host_mismatch" \
	"a Host naming port 443 on a tunnel to 8443: refused (the Host cannot widen)"
is "$(seen_value)" 0 "... the upstream on 8443 never saw the value"
req https://api.bound.test/v1/ok --cacert "$T/session-ca.pem" -H "Authorization: Bearer $PH"
is "$CODE" 200 "on the bound port (443) the request goes through"
r=$(last_receipt secret.inject)
is "$(jf "$r" subject.host):$(jf "$r" subject.port)" "api.bound.test:443" \
	"... secret.inject names the real host and port"
r=$(grep '"type":"http.request"' "$EV" | grep '/v1/ok' | tail -n 1)
is "$(jf "$r" subject.port)" 443 "... and so does http.request"

# --- the hostile upstream: every place, every split offset --------------------------

check_cases() { # DESC CLIENT-ARGS...
	_d=$1
	shift
	python3 "$HOSTILE" client --proxy "$PROXY" --ca "$T/session-ca.pem" --value "$VALUE" \
		--placeholder "$PH" --every "$@" > "$T/client.out" 2>&1
	for c in reason early processing header length chunked ext trailer ztrailer close ws; do
		like "$(grep "^$c " "$T/client.out")" "^$c ok [0-9]+\$" "$_d: $c"
	done
}
check_cases "bound host, every split offset" --host api.bound.test --port 443 --path /v1
r=$(last_receipt secret.scrub)
is "$(jf "$r" subject.secret) $(jf "$r" subject.host) $(jf "$r" subject.port)" \
	"api api.bound.test 443" "secret.scrub names the secret, the host and the port"
like "$(grep '"event": "ws"' "$T/hostile.log" | tail -n 1)" '"extensions": ""' \
	"permessage-deflate is not offered upstream where a value is bound"
check_cases "intercepted host that is not bound" --host echo.bound.test --port 443 \
	--path /v1 --no-credential
r=$(grep '"type":"secret.scrub"' "$EV" | grep echo.bound.test | tail -n 1)
is "$(jf "$r" subject.secret) $(jf "$r" subject.host)" "api echo.bound.test" \
	"... secret.scrub names the unbound host too"
! grep -q "$VALUE" "$EV"
ok $? "no receipt holds the value"

pl_stop_proxy
is $? 0 "the proxy stops cleanly"

# --- shadow mode: a Host that names another host narrows, never widens -------------
# A request that goes on after a Host mismatch (would_block) is decided on
# the connection's host: a tunnel to echo.bound.test (not bound) with
# "Host: api.bound.test" (bound) gets no value, and a tunnel to the bound
# host with another Host gets none either.
sed 's/"mode": "enforce"/"mode": "shadow"/' "$POLICY" > "$T/shadow.json"
mv "$T/shadow.json" "$POLICY"
API_KEY=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^API_KEY=//p' "$T/ph.env")
n0=$(seen_value)
req https://echo.bound.test/v1/widen --cacert "$T/session-ca.pem" \
	-H "Host: api.bound.test" -H "Authorization: Bearer $PH"
is "$(seen_value)" "$n0" "shadow: a tunnel to an unbound host with the bound host's Host: the value is not sent"
r=$(grep '"type":"secret.block"' "$EV" | grep '/v1/widen' | tail -n 1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "would_block host" \
	"... secret.block would_block: not bound to the connection's host"
n0=$(seen_value)
req https://api.bound.test/v1/narrow --cacert "$T/session-ca.pem" \
	-H "Host: echo.bound.test" -H "Authorization: Bearer $PH"
is "$(seen_value)" "$n0" "shadow: a tunnel to the bound host with another Host: the value is not sent"
r=$(grep '"type":"secret.block"' "$EV" | grep '/v1/narrow' | tail -n 1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "would_block host" \
	"... secret.block would_block: the Host narrows"
pl_stop_proxy
is $? 0 "the proxy stops cleanly"

# --- a minted GitHub App token, echoed by the API host -------------------------------
# No brokered secret at all: the token the supervisor mints is in the one
# registry of injected values, and scrubbed like any other.
mkdir -p "$T/keys"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/keys/app.pem" 2>/dev/null
chmod 600 "$T/keys/app.pem"
openssl pkey -in "$T/keys/app.pem" -pubout -out "$T/keys/app.pub.pem"
TOKEN="ghs_$(head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 36)"
cat > "$T/mint.json" <<EOF
{"log": "$T/mint.log", "ready": "$T/mint.ready", "lifetime": 600,
 "listen": ["198.18.0.16:443"], "tls": {"dir": "$T/mint-tls", "names": ["mint.git.test"]},
 "apps": {"12345": {"public_key": "$T/keys/app.pub.pem", "installation_id": 4242}},
 "mode": "exact", "token": "$TOKEN"}
EOF
python3 "$AIRLOCK_SRC/tests/helpers/github_api.py" --config "$T/mint.json" > "$T/mint.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/mint.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/mint.ready" ] || { echo "Bail out! github_api.py: $(cat "$T/mint.out")"; exit 1; }
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "session": {"id": "sess-scrub", "repo": "git.bound.test/acme/api"},
  "egress": {
    "allow": ["echo.bound.test", "api.bound.test:8443"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "intercept": ["echo.bound.test", "api.bound.test:8443"]
  },
  "git": {"hosts": ["git.bound.test"], "api_hosts": ["api.bound.test"],
          "github_app": {"app_id": 12345, "installation_id": 4242,
                         "private_key_file": "$T/keys/app.pem",
                         "api": "https://mint.git.test", "ca": "$T/mint-tls/ca.pem"}}
}
EOF
: > "$EV"
pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
GPH=$(sed -n 's/^GITHUB_TOKEN=//p' "$T/ph.env")
like "$GPH" '.' "the agent holds a placeholder for the minted token"
is "$(grep -c '"event": "mint"' "$T/mint.log")" 1 "the supervisor minted a token"
python3 "$HOSTILE" client --proxy "$PROXY" --ca "$T/session-ca.pem" --value "$TOKEN" \
	--placeholder "$GPH" --host api.bound.test --port 443 --path /repos/acme/api \
	--cases reason,early,header,length,chunked,close,ws > "$T/client.out" 2>&1
for c in reason early header length chunked close ws; do
	like "$(grep "^$c " "$T/client.out")" "^$c ok [0-9]+\$" "the minted token echoed by the API host: $c"
done
is "$(grep -c "Bearer $TOKEN" "$T/hostile.log")" "$(grep -c '"/repos/acme/api/' "$T/hostile.log")" \
	"... every request reached the API host with the token (the echo was real)"
r=$(grep '"type":"secret.scrub"' "$EV" | grep api.bound.test | tail -n 1)
is "$(jf "$r" subject.secret) $(jf "$r" subject.port)" "git.token 443" \
	"secret.scrub names the git token and the real port"
# the API host on another port (intercepted for audit): the rules apply,
# the token is not given (git hosts are bound on 443, by the connection)
req https://api.bound.test:8443/repos/acme/api/port8443 --cacert "$T/session-ca.pem" \
	-H "Host: api.bound.test" -H "Authorization: Bearer $GPH"
is "$CODE $(grep port8443 "$T/hostile.log" | grep -c "Bearer $GPH")" "200 1" \
	"the git API host on port 8443: the request goes on with the placeholder"
is "$(grep port8443 "$T/hostile.log" | grep -c "$TOKEN")" 0 "... never with the token"
printf '%s\n' "$TOKEN" > "$T/fixed"
python3 "$HOSTILE" client --proxy "$PROXY" --ca "$T/session-ca.pem" --value "$TOKEN" \
	--placeholder "$GPH" --host echo.bound.test --port 443 --path /v1 --no-credential \
	--cases header,length > "$T/client.out" 2>&1
is "$(grep -c ' ok ' "$T/client.out")" 2 "the token, echoed by another intercepted host: scrubbed too"
! grep -q "$TOKEN" "$EV"
ok $? "no receipt holds the token"
pl_stop_proxy
is $? 0 "the proxy stops cleanly"
done_testing
