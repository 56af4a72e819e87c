#!/bin/sh
# TLS interception and the secret broker inside `airlock run --enforce`
# (docs/SECRETS.md, docs/PROXY.md): the agent holds a placeholder; an
# intercepted request to the bound host carries the real value to the
# origin; the placeholder anywhere else is refused with nothing sent; the
# value echoed back is scrubbed from headers and bodies, split at every
# offset; upstreams that do not verify get a 502 naming the reason; hosts
# that are not intercepted pass through.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

WS="$T/ws"
mkdir "$WS"
# wrong.airlock.test: the origin's certificate does not name it
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["wrong.airlock.test"] = ["198.18.0.10"]
print(json.dumps(z))')
pl_start_net

VALUE="sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
write_policy() { # MODE UPSTREAM_CA
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "$1",
  "egress": {
    "allow": ["api.airlock.test", "www.airlock.test", "git.airlock.test", "wrong.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": $2,
    "intercept": ["git.airlock.test", "wrong.airlock.test"]
  },
  "secrets": {
    "api": {
      "from_env": "API_KEY",
      "hosts": ["api.airlock.test"],
      "headers": ["authorization", "x-api-key"],
      "prefix": "sk-live-",
      "paths": ["/v1/", "/echo"]
    }
  }
}
EOF
}
write_policy enforce "\"$CA\""
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the policy is valid"

# run MODE SCRIPT: the script in the sandbox, in $WS; output in $T/out.
run() {
	API_KEY=$VALUE timeout 120 "$AIRLOCK" run --mode "$1" --policy "$POLICY" \
		--workspace "$WS" --events "$EV" -- sh -c "$2" "$WS" > "$T/out" 2>&1 </dev/null
}

run enforce '
cd "$0"
printf "%s" "$API_KEY" > ph
env > env.txt
c() { curl -sS --max-time 20 "$@"; }
c -H "Authorization: Bearer $API_KEY" https://api.airlock.test/v1/ok > ok.out 2>&1
c -u "user:$API_KEY" https://api.airlock.test/v1/basic > basic.out 2>&1
c -H "Authorization: Bearer own-token" https://api.airlock.test/v1/own > own.out 2>&1
c -o /dev/null -w "%{http_code} " -D q.h "https://api.airlock.test/v1/q?key=$API_KEY" > q.code 2>&1
c -o /dev/null -w "%{http_code} " -D h.h -H "X-Other: $API_KEY" https://api.airlock.test/v1/h > h.code 2>&1
c -o /dev/null -w "%{http_code} " -D p.h -H "X-Api-Key: $API_KEY" https://api.airlock.test/v2/p > p.code 2>&1
c -o /dev/null -w "%{http_code} " -D w.h -H "X-Api-Key: $API_KEY" https://git.airlock.test/v1/w > w.code 2>&1
c -o /dev/null -w "%{http_code} " -D plain.h -H "X-Api-Key: $API_KEY" http://api.airlock.test/v1/plain > plain.code 2>&1
c -D echo.h -H "X-Api-Key: $API_KEY" https://api.airlock.test/echo > echo.out 2>&1
for n in 1 2 3 5 7 11 13; do
	c -H "X-Api-Key: $API_KEY" "https://api.airlock.test/echo?c=$n" > "echo$n.out" 2>&1
done
c https://www.airlock.test/pass > pass.out 2>&1; echo $? > pass.rc
c -sS -i https://wrong.airlock.test/v1/wrong > wrong.out 2>&1
exit 0
'
is $? 0 "airlock run --enforce: the script ran"
PH=$(cat "$WS/ph")
like "$PH" '^sk-live-[0-9A-Za-z]+$' "the agent holds a placeholder with the value's prefix and alphabet"
is "${#PH}" "${#VALUE}" "... and its length"
! grep -q "$VALUE" "$WS/env.txt"
ok $? "the value is not in the agent's environment"
for v in SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO NPM_CONFIG_CAFILE PIP_CERT \
	DENO_CERT NODE_EXTRA_CA_CERTS; do
	is "$(sed -n "s/^$v=//p" "$WS/env.txt")" /etc/ssl/certs/ca-certificates.crt "$v names the bundle"
done

# substitution
like "$(cat "$WS/ok.out")" '^hello from tls 198\.18\.0\.10:443 method=GET path=/v1/ok' \
	"an intercepted request to the bound host is answered (curl trusts the session CA)"
r=$(net_last line~/v1/ok)
like "$r" "\"Authorization\", \"Bearer $VALUE\"" "the origin got the real value after Bearer"
! printf '%s' "$r" | grep -q "$PH"
ok $? "... and not the placeholder"
like "$r" '"Accept-Encoding", "identity"' "a bound host is asked for identity encoding"
r=$(net_last line~/v1/basic)
auth=$(jf "$r" headers | python3 -c '
import base64, json, sys
h = dict((k.lower(), v) for k, v in json.load(sys.stdin))
print(base64.b64decode(h["authorization"].split()[1]).decode())')
is "$auth" "user:$VALUE" "HTTP Basic: decoded, substituted, re-encoded"
like "$(net_last line~/v1/own)" '"Authorization", "Bearer own-token"' \
	"an Authorization without a placeholder is forwarded unchanged"
r=$(grep '"type":"secret.inject"' "$EV" | head -1)
is "$(jf "$r" decision) $(jf "$r" point) $(jf "$r" subject.secret) $(jf "$r" subject.host) $(jf "$r" subject.header)" \
	"allow broker api api.airlock.test Authorization" "secret.inject names the secret, host and header"
! grep -q "$VALUE" "$EV"
ok $? "no receipt holds the value"
like "$(grep '"type":"http.request"' "$EV" | grep /v1/ok)" '"status":200' "http.request records the status"

# refusals: 403, secret.block, nothing reached any origin
refused() { # NAME WHERE WHY PATH
	is "$(cat "$WS/$1.code")" "403 " "$1: refused with 403"
	like "$(grep -i '^x-airlock-rule' "$WS/$1.h")" 'secrets\.api' "$1: X-Airlock-Rule names the secret"
	r=$(grep '"type":"secret.block"' "$EV" | grep "\"path\":\"$4\"" | tail -1)
	is "$(jf "$r" decision) $(jf "$r" point) $(jf "$r" subject.where) $(jf "$r" subject.why)" \
		"block broker $2 $3" "$1: secret.block says where and why"
	is "$(net_count "line~$4")" 0 "$1: no origin saw the request"
}
refused q query not-a-header /v1/q
refused h header header /v1/h
refused p header path /v2/p
refused w header host /v1/w
refused plain header plain-http /v1/plain

# scrubbing
like "$(cat "$WS/echo.out")" "^echo $PH" "the echoed value comes back as the placeholder (body)"
like "$(grep -i '^x-echo' "$WS/echo.h")" "$PH" "... and in a header"
like "$(cat "$WS/echo.h")" '[Cc]ontent-[Ll]ength: [0-9]+' \
	"a placeholder as long as its value: the scrubbed body keeps its Content-Length"
! grep -q "$VALUE" "$WS/echo.out" "$WS/echo.h"
ok $? "the value never reaches the sandbox in a response"
for n in 1 2 3 5 7 11 13; do
	is "$(cat "$WS/echo$n.out")" "$(printf 'echo %s\nagain:%s;' "$PH" "$PH")" \
		"chunks of $n bytes: scrubbed across every split"
done
r=$(grep '"type":"secret.scrub"' "$EV" | head -1)
is "$(jf "$r" decision) $(jf "$r" point) $(jf "$r" subject.secret) $(jf "$r" subject.in_head) $(jf "$r" subject.in_body)" \
	"allow broker api 1 2" "secret.scrub counts the replacements"

# pass-through and verification
is "$(cat "$WS/pass.rc")" 0 "a host nobody binds passes through (the client verifies the origin: upstream_ca is in the bundle)"
r=$(grep '"type":"egress.allow"' "$EV" | grep www.airlock.test | tail -1)
is "$(jf "$r" subject.intercepted)" "" "... not intercepted"
r=$(grep '"type":"egress.allow"' "$EV" | grep '"api.airlock.test"' | tail -1)
is "$(jf "$r" subject.intercepted)" "true" "the bound host is intercepted"
like "$(grep '^HTTP/1.1 5' "$WS/wrong.out")" '502' "an upstream whose certificate names another host: 502"
like "$(cat "$WS/wrong.out")" 'certificate' "... naming the reason"
is "$(net_count line~/v1/wrong)" 0 "... and nothing of the request was sent"
r=$(grep '"type":"proxy.error"' "$EV" | grep wrong.airlock.test | tail -1)
is "$(jf "$r" rule) $(jf "$r" decision)" "upstream.tls block" "recorded as proxy.error upstream.tls"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"

# without upstream_ca the origin's CA is not trusted: 502, nothing sent
rm -f "$EV"
write_policy enforce null
run enforce '
curl -sS -i --max-time 20 -H "X-Api-Key: $API_KEY" https://api.airlock.test/v1/untrusted > "$0/untrusted.out" 2>&1
exit 0'
like "$(grep '^HTTP/1.1 5' "$WS/untrusted.out")" '502' "an untrusted upstream certificate: 502"
like "$(cat "$WS/untrusted.out")" 'certificate verify failed' "... naming the reason"
is "$(net_count line~/v1/untrusted)" 0 "... and nothing was sent"

# The system store counts too: here SSL_CERT_FILE, a file outside
# OpenSSL's default paths, in airlock's environment. A worker loads the
# store on its first upstream handshake, once confined: its Landlock
# rules must let it read that file.
rm -f "$EV"
cp "$CA" "$T/system-ca.pem"
export SSL_CERT_FILE="$T/system-ca.pem"
run enforce '
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "X-Api-Key: $API_KEY" https://api.airlock.test/v1/system > "$0/system.code" 2>&1
exit 0'
unset SSL_CERT_FILE
is "$(cat "$WS/system.code")" 200 "an upstream trusted only by the system store (SSL_CERT_FILE): 200"
is "$(net_count line~/v1/system)" 1 "... and the request reached it"

# shadow: a would-be block is forwarded with the placeholder, never the value
rm -f "$EV"
write_policy shadow "\"$CA\""
run shadow '
printf "%s" "$API_KEY" > "$0/ph"
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "X-Other: $API_KEY" https://api.airlock.test/v1/shadow > "$0/shadow.code" 2>&1
exit 0'
is "$(cat "$WS/shadow.code")" 200 "shadow: a would-be block goes ahead"
PH=$(cat "$WS/ph")
r=$(net_last line~/v1/shadow)
like "$r" "\"X-Other\", \"$PH\"" "... with the placeholder"
! printf '%s' "$r" | grep -q "$VALUE"
ok $? "... never the value"
r=$(grep '"type":"secret.block"' "$EV" | tail -1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "would_block header" "... recorded as would_block"

# a secrets' configuration too big for one message (three values of 25000
# bytes, and their placeholders): it reaches each worker in a sealed
# memfd, and the last secret of it is substituted like any other
rm -f "$EV"
BIG1=$(python3 -c 'print("a" * 25000)')
BIG2=$(python3 -c 'print("b" * 25000)')
BIG3=$(python3 -c 'print("c" * 24990 + "0123456789")')
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "big1": { "from_env": "BIG1", "hosts": ["api.airlock.test"], "headers": ["x-big"] },
    "big2": { "from_env": "BIG2", "hosts": ["api.airlock.test"], "headers": ["x-big"] },
    "big3": { "from_env": "BIG3", "hosts": ["api.airlock.test"], "headers": ["x-big"] }
  }
}
EOF
BIG1=$BIG1 BIG2=$BIG2 BIG3=$BIG3 timeout 120 "$AIRLOCK" run --mode enforce --policy "$POLICY" \
	--workspace "$WS" --events "$EV" --workers 2 -- sh -c '
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "X-Big: $BIG3" https://api.airlock.test/v1/big > "$0/big.code" 2>&1
exit 0' "$WS" > "$T/out" 2>&1 </dev/null
is $? 0 "a session with 150 KB of secrets runs"
is "$(cat "$WS/big.code")" 200 "... and its last secret's placeholder is substituted"
net_last line~/v1/big | grep -qF "$BIG3"
ok $? "... the origin got the value"

done_testing
