#!/bin/bash
# The origin platform's SCM flow end to end, with curl and git as the
# in-sandbox clients (docs/integration/background-agents.md, "Without a
# platform change"): the sandbox token (a brokered secret) calls the stand-in
# control plane's /sessions/ID/scm-credentials, whose answer {"token": ...}
# is captured; the agent holds only placeholders; git clone and push to the
# session repository on a real git http-backend (which accepts only the
# exact token) work with the captured token; the token is refused toward
# another repository and another host, and never enters the sandbox. The
# provider access token that /sessions/ID/provider-auth/PROVIDER/access-token
# answers ({"accessToken": ...}) is captured the same way: used toward the
# provider's host, refused elsewhere. `make e2e` runs this file too.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

H=$AIRLOCK_SRC/tests/helpers
WS="$T/ws"
mkdir -p "$WS" "$T/repos/acme"
ip addr add 198.18.0.21/32 dev lo
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["git.test"] = ["198.18.0.21"]
print(json.dumps(z))')
TOKEN="ghs_SessionInstallationToken0123456789abcdefgh"
SANDBOX="sbx-0123456789abcdefghijklmnopqrstuvwxyzABCD"
PTOKEN="sk-ProviderAccessToken0123456789abcdefghijKLMNOP"
PL_ANSWERS=$(python3 -c '
import json, sys
print(json.dumps({"/sessions/s1/scm-credentials": [{"body": json.dumps({"token": sys.argv[1]})}],
                  "/sessions/s1/provider-auth/openai/access-token": [{"body": json.dumps(
                      {"accessToken": sys.argv[2], "expiresAt": "2099-01-01T00:00:00Z"})}]}))' \
	"$TOKEN" "$PTOKEN")
pl_start_net

for r in api other; do
	git init -q --bare "$T/repos/acme/$r.git"
done
git clone -q "$T/repos/acme/api.git" "$T/seed" 2>/dev/null
(cd "$T/seed" && echo hello > README && git add README &&
	git -c user.name=t -c user.email=t@t commit -qm first && git push -q origin HEAD:main) 2>/dev/null
git --git-dir="$T/repos/acme/api.git" symbolic-ref HEAD refs/heads/main
(cd "$T/seed" && git push -q "$T/repos/acme/other.git" HEAD:main) 2>/dev/null
git --git-dir="$T/repos/acme/other.git" symbolic-ref HEAD refs/heads/main
cat > "$T/git.json" <<EOF
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 300, "listen": ["198.18.0.21:443"],
 "tls": {"dir": "$T/git-tls", "names": ["git.test"]}, "root": "$T/repos", "tokens": ["$TOKEN"]}
EOF
python3 "$H/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/git.ready" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/git.ready" ]
ok $? "the git server is listening"
cat "$CA" "$T/git-tls/ca.pem" > "$T/upstream-ca.pem"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["www.airlock.test", "api.airlock.test", "git.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$T/upstream-ca.pem",
    "intercept": ["api.airlock.test"]
  },
  "env": { "pass": ["PATH", "LANG", "HOME"] },
  "secrets": {
    "sandbox_token": {
      "from_env": "SANDBOX_SECRET", "env": "SANDBOX_AUTH_TOKEN",
      "hosts": ["www.airlock.test"], "headers": ["authorization"],
      "paths": ["/sessions/s1/scm-credentials", "/sessions/s1/provider-auth/"]
    },
    "scm_token": {
      "hosts": ["git.test"], "headers": ["authorization"], "paths": ["/acme/api.git/"],
      "capture": [{"hosts": ["www.airlock.test"], "methods": ["POST"],
                   "paths": ["/sessions/*/scm-credentials"], "json": ["/token"],
                   "expires": "/expires_at"}]
    },
    "provider_access": {
      "hosts": ["api.airlock.test"], "headers": ["authorization"],
      "capture": [{"hosts": ["www.airlock.test"], "methods": ["POST"],
                   "paths": ["/sessions/*/provider-auth/*/access-token"],
                   "json": ["/accessToken", "/access_token", "/token"], "expires": "/expiresAt"}]
    }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the policy is valid"

SANDBOX_SECRET=$SANDBOX timeout 240 "$AIRLOCK" run --workers 2 --policy "$POLICY" --workspace "$WS" \
	--events "$EV" -- bash -c '
cd "$0"
export PATH=/usr/bin:/bin
printf "%s" "$SANDBOX_AUTH_TOKEN" > sph
# what the platform'"'"'s git credential helper does
curl -sS --max-time 20 -X POST -H "Authorization: Bearer $SANDBOX_AUTH_TOKEN" \
	https://www.airlock.test/sessions/s1/scm-credentials > cred.out 2>&1
tok=$(python3 -c "import json; print(json.load(open(\"cred.out\"))[\"token\"])")
printf "%s" "$tok" > ph
G="git -c user.name=agent -c user.email=agent@t"
export GIT_TERMINAL_PROMPT=0
timeout 60 git clone -q "https://x-access-token:$tok@git.test/acme/api.git" clone > clone.out 2>&1
echo $? > clone.rc
cd clone && echo change >> README && $G commit -qam "from the agent" &&
	timeout 60 git push -q origin HEAD:main > ../push.out 2>&1
echo $? > ../push.rc
cd ..
timeout 60 git clone -q "https://x-access-token:$tok@git.test/acme/other.git" other > other.out 2>&1
echo $? > other.rc
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $tok" \
	https://api.airlock.test/repos/acme/api > elsewhere.code 2>&1
# what the platform'"'"'s provider token broker does
curl -sS --max-time 20 -X POST -H "Authorization: Bearer $SANDBOX_AUTH_TOKEN" \
	https://www.airlock.test/sessions/s1/provider-auth/openai/access-token > pcred.out 2>&1
ptok=$(python3 -c "import json; print(json.load(open(\"pcred.out\"))[\"accessToken\"])")
printf "%s" "$ptok" > pph
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $ptok" \
	https://api.airlock.test/v1/models > provider.code 2>&1
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $ptok" \
	https://www.airlock.test/v1/models > pelsewhere.code 2>&1
env > env.txt
exit 0
' "$WS" > "$T/out" 2>&1 </dev/null
is $? 0 "airlock run: the script ran"
PH=$(cat "$WS/ph")
like "$PH" '^ghs_[0-9A-Za-z]+$' "the agent got a placeholder for the SCM token"
is "${#PH}" "${#TOKEN}" "... as long as the token"
like "$(net_last line~scm-credentials)" "\"Bearer $SANDBOX\"" \
	"the control plane got the real sandbox token"
is "$(cat "$WS/clone.rc")" 0 "git clone of the session repository with the captured token"
is "$(cat "$WS/push.rc")" 0 "git push to the session repository"
is "$(git --git-dir="$T/repos/acme/api.git" log -1 --format=%s main)" "from the agent" \
	"... the commit reached the repository"
ok "$(grep -q '"auth": "ok"' "$T/git.log" && echo 0 || echo 1)" "the git server got the exact token"
ok "$([ "$(cat "$WS/other.rc")" != 0 ] && echo 0 || echo 1)" "another repository: refused"
r=$(grep '"type":"secret.block"' "$EV" | grep '/acme/other.git' | tail -1)
is "$(jf "$r" subject.secret) $(jf "$r" subject.why)" "scm_token path" \
	"... secret.block: the token is not bound there"
ok "$(grep '"path": "/acme/other.git' "$T/git.log" | grep -q '"auth": "ok"' && echo 1 || echo 0)" \
	"... the git server never got the token for it"
is "$(cat "$WS/elsewhere.code")" 403 "another host: refused"
is "$(net_count line~/repos/acme/api)" 0 "... nothing sent"
PPH=$(cat "$WS/pph")
like "$PPH" '^sk-[0-9A-Za-z]+$' "the agent got a placeholder for the provider access token (/provider-auth/...)"
ok "$([ "$PPH" != "$PTOKEN" ] && [ "${#PPH}" = "${#PTOKEN}" ] && echo 0 || echo 1)" \
	"... shaped like it, not it"
is "$(cat "$WS/provider.code")" 200 "the provider's host answered the request with the placeholder"
like "$(net_last line~/v1/models)" "\"Bearer $PTOKEN\"" "... and got the real access token"
is "$(cat "$WS/pelsewhere.code")" 403 "the access token toward another host: refused"
r=$(grep '"type":"secret.block"' "$EV" | grep '"secret":"provider_access"' | tail -1)
is "$(jf "$r" subject.host) $(jf "$r" rule)" "www.airlock.test secrets.provider_access.hosts" \
	"... secret.block: the token is not bound there"
! grep -rq -e "$TOKEN" -e "$SANDBOX" -e "$PTOKEN" "$WS"
ok $? "neither the SCM token, the provider token nor the sandbox token entered the sandbox"
! grep -q -e "$TOKEN" -e "$PTOKEN" "$EV"
ok $? "no receipt holds a captured token"
r=$(grep '"type":"secret.capture"' "$EV" | grep provider_access | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.path) $(jf "$r" subject.where) $(jf "$r" subject.expires_at)" \
	"allow /sessions/s1/provider-auth/openai/access-token /accessToken 2099-01-01T00:00:00Z" \
	"secret.capture recorded the provider token (member, expiry)"
r=$(grep '"type":"secret.capture"' "$EV" | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.secret) $(jf "$r" subject.path)" \
	"allow scm_token /sessions/s1/scm-credentials" "secret.capture recorded"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"
done_testing
