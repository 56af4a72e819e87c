#!/bin/sh
# OAuth brokered (docs/SECRETS.md "OAuth"): `oauth` on a secret makes the
# supervisor obtain the access token itself (refresh_token grant at the
# token endpoint, outside the sandbox), refresh it before it expires and
# once after a 401 from a bound host, and hand each token to the workers
# behind one stable placeholder. The refresh token and the client secret
# never enter the sandbox; a refresh that fails fails closed (502).
# Stand-ins: tests/helpers/oauth_standin.py (token endpoint and API, TLS).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

WS="$T/ws"
mkdir "$WS"
OS=198.18.0.20
ip addr add "$OS/32" dev lo || { echo "Bail out! ip addr add $OS"; exit 1; }
PL_TLS_NAMES="$PL_TLS_NAMES auth.airlock.test api.oauth.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | sed "1s|^{|{ \"auth.airlock.test\": [\"$OS\"], \"api.oauth.airlock.test\": [\"$OS\"],|")
pl_start_net

CS="cs-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
RT="rt-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# in the workspace, which the agent sees: the file is masked there
RTF="$WS/rt.secret"
printf '%s\n' "$RT" > "$RTF"
chmod 600 "$RTF"
OLOG="$T/oauth.log"
cat > "$T/oauth.json" <<EOF
{"log": "$OLOG", "ready": "$T/oauth.ready", "down": "$T/oauth.down",
 "client_id": "cli-1", "client_secret": "$CS", "refresh_token": "$RT",
 "lifetimes": [4, 4, 3600], "lifetime": 300,
 "hold": "$T/oauth.hold", "holding": "$T/oauth.holding", "release": "$T/oauth.release",
 "hold_max": 10}
EOF
python3 "$AIRLOCK_SRC/tests/helpers/oauth_standin.py" "$OS:443" "$T/tls/leaf.pem" \
	"$T/tls/leaf.key" "$T/oauth.json" > "$T/oauth.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/oauth.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$T/oauth.ready" ] || { echo "Bail out! oauth_standin.py did not start: $(cat "$T/oauth.out")"; exit 1; }

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "env": {"pass": ["PATH", "HOME", "OAUTH_CS"]},
  "egress": {
    "allow": ["api.oauth.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "api": {
      "env": "API_TOKEN", "hosts": ["api.oauth.airlock.test"], "headers": ["authorization"],
      "paths": ["/v1/"],
      "oauth": {"token_url": "https://auth.airlock.test/oauth/token", "client_id": "cli-1",
                "client_secret_from_env": "OAUTH_CS", "refresh_token_from_file": "$RTF",
                "scope": "read write"}
    }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "a policy with an oauth secret is valid"
pl_policy_refused 's|"token_url": "https://auth.airlock.test/oauth/token"|"token_url": "http://auth.airlock.test/t"|' \
	'secrets\.api\.oauth\.token_url.*https' "oauth.token_url over http:// is refused, naming its JSON path"
pl_policy_refused 's|"refresh_token_from_file": "[^"]*",||' \
	'secrets\.api\.oauth.*refresh_token_from_env and refresh_token_from_file' \
	"oauth without a refresh token is refused"
pl_policy_refused 's|"env": "API_TOKEN", ||' 'secrets\.api\.env.*oauth' "an oauth secret without env is refused"
pl_policy_refused 's|"env": "API_TOKEN",|"env": "API_TOKEN", "from_env": "X",|' \
	'secrets\.api.*OAuth secret.*no from_env' "an oauth secret with from_env is refused"
pl_policy_refused 's|"client_id": "cli-1"|"client_id": ""|' 'secrets\.api\.oauth\.client_id' \
	"an empty client_id is refused"
pl_policy_refused 's|"scope": "read write"|"scope": "read write", "grant": 1|' 'secrets\.api\.oauth\.grant' \
	"an unknown oauth member is refused"

OAUTH_CS=$CS timeout 120 "$AIRLOCK" run --workers 2 --policy "$POLICY" --workspace "$WS" --events "$EV" -- sh -c '
cd "$0"
# HTTP/1.1: an exchange parks while the refresh runs (over HTTP/2 a
# stream cannot, and its 401 is relayed: docs/SECRETS.md)
c() { n=$1; shift; curl -sS --http1.1 --max-time 20 -o "$n.out" -w "%{http_code}" "$@" > "$n.code" 2>&1; }
env > env.out
cat "$1" > rtfile.out 2>&1
printf "%s" "$API_TOKEN" > ph
c a1 -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/one
sleep 6
i=0
while [ $i -lt 6 ]; do
	c b$i -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/two/$i
	i=$((i + 1))
done
c echo -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/echo
c revoke -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/revoke
c r401 -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/after-revoke
c always -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/always401
c revoke3 -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/revoke
c post -d "x=1" -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/post-after-revoke
c apost -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/after-post
sleep 2
c a3 -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/three
c token -d "grant_type=refresh_token&refresh_token=x" https://auth.airlock.test/oauth/token
c down -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/down
c revoke2 -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/revoke
c r401b -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/after-down
sleep 2
c closed -H "Authorization: Bearer $API_TOKEN" https://api.oauth.airlock.test/v1/closed
exit 0
' "$WS" "$RTF" > "$T/out" 2>&1 </dev/null
is $? 0 "airlock run: the script ran"
diag_file "$T/out"
PH=$(cat "$WS/ph")
like "$PH" '^airlock-ph-api-' "the agent holds a placeholder (API_TOKEN)"

grant() { grep "\"grant\": $1," "$OLOG" | grep '"/oauth/token"' | head -1; }
tok() { jf "$(grant "$1")" token; }
g1=$(grant 1)
is "$(jf "$g1" status) $(jf "$g1" form.client_id) $(jf "$g1" form.scope) $(jf "$g1" form.grant_type)" \
	"200 cli-1 read write refresh_token" \
	"at start the supervisor made the refresh_token grant (client id, scope)"
ok "$([ "$(jf "$g1" form.refresh_token)" = "$RT" ] && [ "$(jf "$g1" form.client_secret)" = "$CS" ] && echo 0 || echo 1)" \
	"... with the real refresh token (from its file) and client secret (from its env)"

api() { grep "\"path\": \"$1\"" "$OLOG" | tail -1; }
r=$(api /v1/one)
is "$(cat "$WS/a1.code") $(jf "$r" status)" "200 200" \
	"the API received the real access token (grant $(jf "$r" grant))"

r=$(grep '"type":"secret.refresh"' "$EV" | head -1)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.secret) $(jf "$r" subject.why)" \
	"allow secrets.api.oauth api start" "secret.refresh records the first token (why start)"
like "$(jf "$r" subject.expires_at)" '^20[0-9-]+T[0-9:]+Z$' "... with its expiry"
n=$(grep '"type":"secret.refresh"' "$EV" | grep -c '"why":"expiry"')
ok "$([ "$n" -ge 2 ] && echo 0 || echo 1)" "tokens of 4 s were refreshed before expiry ($n secret.refresh why expiry)"
ok "$(grep '"/oauth/token"' "$OLOG" | grep '"grant": 2,' | grep -q '"status": 200' && echo 0 || echo 1)" \
	"... the token endpoint saw the refreshes"

good=0
i=0
while [ $i -lt 6 ]; do
	r=$(api "/v1/two/$i")
	[ "$(cat "$WS/b$i.code")" = 200 ] && [ "$(jf "$r" grant)" -ge 3 ] && good=$((good + 1))
	i=$((i + 1))
done
is "$good" 6 "after the refreshes, 6 requests (2 workers) through the same placeholder carried the newest token"
OLD=$(tok 1)
CODE_OLD=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --cacert "$CA" \
	--resolve "api.oauth.airlock.test:443:$OS" -H "Authorization: Bearer $OLD" \
	https://api.oauth.airlock.test/v1/old)
is "$CODE_OLD" 401 "control: the stand-in refuses the first (old) access token"
like "$(cat "$WS/echo.out")" "^got Bearer $PH" "a token echoed back is scrubbed to the placeholder"

at() { grep "\"path\": \"$1\"" "$OLOG" | sed -n "$2p"; }
r1=$(at /v1/after-revoke 1)
r2=$(at /v1/after-revoke 2)
is "$(jf "$r1" status) $(jf "$r2" status) $(grep -c '"path": "/v1/after-revoke"' "$OLOG")" "401 200 2" \
	"a revoked token: the API answered 401, the request went again once, with the refreshed token"
is "$(cat "$WS/r401.code")" 200 "... and the agent got the second answer (200), not the 401"
ok "$([ "$(jf "$r2" grant)" -gt "$(jf "$r1" grant)" ] && echo 0 || echo 1)" \
	"... the retry carried a newer grant ($(jf "$r1" grant) then $(jf "$r2" grant))"
r=$(grep '"type":"secret.retry"' "$EV" | grep '/v1/after-revoke' | head -1)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.why)" "allow secrets.api.oauth refreshed" \
	"... recorded as secret.retry (why refreshed)"
like "$(cat "$WS/r401.out")" '"ok": true' "... the body the agent got is the retry's"

r1=$(at /v1/always401 1)
r2=$(at /v1/always401 2)
is "$(cat "$WS/always.code") $(grep -c '"path": "/v1/always401"' "$OLOG")" "401 2" \
	"a 401 again after the retry reaches the agent: the request went twice, not more"
ok "$([ "$(jf "$r2" grant)" -eq "$(($(jf "$r1" grant) + 1))" ] && echo 0 || echo 1)" \
	"... one refresh between them (grant $(jf "$r1" grant) then $(jf "$r2" grant)), none after the second 401"
is "$(grep '"type":"secret.retry"' "$EV" | grep '/v1/always401' | sed 's/.*"why":"\([a-z-]*\)".*/\1/' | tr '\n' ' ')" \
	"refreshed retried " "... recorded: secret.retry refreshed, then retried (the second 401 relayed)"
is "$(grep '"type":"secret.refresh"' "$EV" | grep '"why":"401"' | grep -c '"decision":"allow"')" 3 \
	"... one secret.refresh (why 401) for each request refused (after-revoke, always401, the POST)"

r=$(at /v1/post-after-revoke 1)
is "$(cat "$WS/post.code") $(jf "$r" status) $(grep -c '"path": "/v1/post-after-revoke"' "$OLOG")" "401 401 1" \
	"a request whose body was streamed is not sent again: its 401 is relayed"
r=$(grep '"type":"secret.retry"' "$EV" | grep '/v1/post-after-revoke' | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "info not-replayable" "... and recorded (secret.retry info, not-replayable)"
r=$(api /v1/after-post)
is "$(cat "$WS/apost.code") $(jf "$r" status)" "200 200" "... the token was refreshed for the next request all the same"
r=$(grep '"type":"secret.refresh"' "$EV" | grep '"why":"401"' | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.secret)" "allow api" "... and the 401 made one refresh (secret.refresh why 401)"
diag "after a 401: the refresh recorded -> the request sent again: $(python3 -c '
import json, sys
from datetime import datetime
t = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    s = r.get("subject", {})
    k = "a" if r["type"] == "secret.refresh" and s.get("why") == "401" and r["decision"] == "allow" else \
        "b" if r["type"] == "secret.retry" and s.get("why") == "refreshed" else None
    if k and k not in t:
        t[k] = datetime.strptime(r["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
print("%d ms" % ((t["b"] - t["a"]).total_seconds() * 1000) if len(t) == 2 else "n/a")
' "$EV")"
r=$(api /v1/three)
G3=$(jf "$r" grant)
is "$(cat "$WS/a3.code") $(jf "$r" status)" "200 200" \
	"the next request through the same placeholder works with the refreshed token"
ok "$([ "$G3" -ge 4 ] && echo 0 || echo 1)" "... grant $G3, the one after the 401"

like "$(cat "$WS/token.code")" 'response 403' "the token endpoint is not reachable from the sandbox"

r=$(grep '"type":"secret.refresh"' "$EV" | grep '"decision":"block"' | head -1)
is "$(jf "$r" rule) $(jf "$r" subject.why)" "secrets.api.oauth 401" \
	"token endpoint down: the refresh after the 401 failed (secret.refresh block)"
like "$(jf "$r" reason)" "503" "... naming the endpoint's answer"
is "$(cat "$WS/closed.code")" 502 "... and a request needing the token fails closed with 502"
r=$(grep '"type":"secret.block"' "$EV" | grep /v1/closed | tail -1)
is "$(jf "$r" rule) $(jf "$r" decision)" "secrets.api.oauth block" "... with a secret.block receipt"
is "$(grep -c '"path": "/v1/closed"' "$OLOG")" 0 "... nothing reached the API"

! grep -rq --exclude=rt.secret -e "$RT" -e "$CS" "$WS"
ok $? "the refresh token and the client secret never reached the sandbox (files, env, answers)"
! grep -q -e OAUTH_CS "$WS/env.out"
ok $? "... the client secret's variable is not in the agent's environment, even listed in env.pass"
like "$(cat "$WS/rtfile.out")" '^cat: ' "... the refresh token's file cannot be read inside ($(cat "$WS/rtfile.out"))"
leaked=0
for k in $(grep '"token": "oat-' "$OLOG" | sed 's/.*"token": "\([^"]*\)".*/\1/'); do
	grep -rq --exclude=rt.secret "$k" "$WS" && leaked=$((leaked + 1))
	grep -q "$k" "$EV" && leaked=$((leaked + 1))
done
is "$leaked" 0 "no access token reached the sandbox or a receipt"
! grep -q -e "$RT" -e "$CS" "$EV"
ok $? "no receipt holds the refresh token or the client secret"

# airlock proxy (standalone): the same token behind the placeholder it writes
rm -f "$T/oauth.down" "$EV"
OAUTH_CS=$CS pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
like "$(cat "$T/ph.env")" '^API_TOKEN=airlock-ph-api-[0-9A-Za-z_-]+$' "airlock proxy --placeholders: the OAuth secret's line"
PPH=$(sed -n 's/^API_TOKEN=//p' "$T/ph.env")
req https://api.oauth.airlock.test/v1/proxy --cacert "$T/session-ca.pem" -H "Authorization: Bearer $PPH"
r=$(api /v1/proxy)
is "$CODE $(jf "$r" status)" "200 200" "... a request through the standalone proxy carries the token it obtained"
like "$(grep '"type":"secret.refresh"' "$EV" | head -1)" '"why":"start"' "... recorded as secret.refresh"

# The worker's loop never waits for the supervisor: while the refresh
# after a 401 is in flight (the token endpoint holds its answer until the
# test releases it, at most 10 s), the exchange that waits for it is
# parked and another connection to the same (only) worker is answered.
n401=$(grep -c '"path": "/v1/always401"' "$OLOG")
: > "$T/oauth.hold"
curl -sS --http1.1 --max-time 40 -x "http://$PROXY" --cacert "$T/session-ca.pem" -o "$T/pa.out" \
	-w '%{http_code}' -H "Authorization: Bearer $PPH" \
	https://api.oauth.airlock.test/v1/always401 > "$T/pa.code" 2>&1 &
PA=$!
i=0
while [ ! -f "$T/oauth.holding" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
ok "$([ -f "$T/oauth.holding" ] && echo 0 || echo 1)" \
	"a 401 made the supervisor ask the token endpoint, which holds its answer"
req https://api.oauth.airlock.test/v1/meanwhile --http1.1 --cacert "$T/session-ca.pem" \
	-H "Authorization: Bearer $PPH"
: > "$T/oauth.release"
wait $PA
r=$(grep '"held": "' "$OLOG" | tail -1)
is "$CODE $(jf "$r" held)" "200 released" \
	"another connection to the worker was answered while the refresh was in flight (the token endpoint released by the test, not by its deadline)"
is "$(jf "$(api /v1/meanwhile)" status)" 200 "... it reached the API with the token in force"
is "$(cat "$T/pa.code") $(($(grep -c '"path": "/v1/always401"' "$OLOG") - n401))" "401 2" \
	"... the parked request went again once the refresh was answered (its second 401 relayed)"
r=$(grep '"type":"secret.retry"' "$EV" | grep '/v1/always401' | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "allow refreshed" "... recorded (secret.retry refreshed)"
sup=0
wrk=0
for p in $(pl_proxy_pids); do
	if [ "$(cat /proc/$p/comm 2>/dev/null)" = airlock-proxy ]; then
		tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q "$CS" && wrk=$((wrk + 1))
	else
		tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q "$CS" && sup=$((sup + 1))
	fi
done
is "$sup $wrk" "1 0" "the client secret's variable is wiped in the proxy worker (control: the supervisor's has it)"
pl_stop_proxy

# A refresh that is not answered in time (the worker's bound shortened
# to 1 s for the test): the parked request fails closed, 502 and a
# receipt; the worker goes on.
rm -f "$T/oauth.release" "$T/oauth.holding" "$EV"
AIRLOCK_TEST_TIMEOUTS=oauth_wait=1000 OAUTH_CS=$CS pl_start_proxy_ok --ca-out "$T/session-ca.pem" \
	--placeholders "$T/ph.env" --workers 1
PPH=$(sed -n 's/^API_TOKEN=//p' "$T/ph.env")
: > "$T/oauth.hold"
req https://api.oauth.airlock.test/v1/always401 --http1.1 --cacert "$T/session-ca.pem" \
	-H "Authorization: Bearer $PPH"
: > "$T/oauth.release"
is "$CODE" 502 "a refresh not answered in time: the parked request is answered 502"
r=$(grep '"rule":"secrets.api.oauth"' "$EV" | grep 'not answered within' | tail -1)
is "$(jf "$r" type) $(jf "$r" decision) $(jf "$r" subject.path)" "proxy.error block /v1/always401" \
	"... with a receipt naming the secret (rule secrets.api.oauth) and the request"
req https://api.oauth.airlock.test/v1/after-timeout --http1.1 --cacert "$T/session-ca.pem" \
	-H "Authorization: Bearer $PPH"
is "$CODE" 200 "... and the next request works"
pl_stop_proxy

# the token endpoint down at start: the session is refused
: > "$T/oauth.down"
rm -f "$EV"
OAUTH_CS=$CS timeout 60 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" --events "$EV" -- true \
	> "$T/out2" 2>&1 </dev/null
is $? 125 "the token endpoint down at start: the session is refused (125)"
r=$(grep '"type":"session.refused"' "$EV" | tail -1)
is "$(jf "$r" decision) $(jf "$r" rule)" "block secrets.api.oauth" "... session.refused names secrets.api.oauth"
rm -f "$T/oauth.down" "$EV"
OAUTH_CS=wrong timeout 60 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" --events "$EV" -- true \
	> "$T/out3" 2>&1 </dev/null
is $? 125 "a client secret the endpoint refuses: the session is refused (125)"
like "$(grep '"type":"session.refused"' "$EV" | tail -1)" 'HTTP 400: invalid_grant' "... naming the endpoint's error"
done_testing
