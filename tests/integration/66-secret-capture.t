#!/bin/sh
# Captured credentials (docs/SECRETS.md "Captured values"): a control
# plane's answer carrying a token is rewritten before the agent sees it
# (a placeholder shaped like the token in its place), the token is
# registered and bound as the secret says, every worker learns it before
# the answer is relayed, it is scrubbed from echoes, refused elsewhere,
# and refused once expired. secret.capture records it, never the value.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

WS="$T/ws"
mkdir "$WS"
TOKEN="ghs_CapturedToken0123456789abcdefghijABCDEFGHIJ"
SHORT="ghs_ShortLivedToken0123456789abcdefghijABCDEFGH"
HDR="hdr-0123456789abcdefghijklmnopqrstuvwxyzABCD"
PL_ANSWERS=$(python3 -c '
import json, sys
t, s, h = sys.argv[1:4]
print(json.dumps({
  "/sessions/s1/scm-credentials": [{"body": json.dumps({"token": t, "expires_in": 3600,
                                                        "expires_at": "2099-01-01T00:00:00Z"})}],
  "/sessions/s1/short-credentials": [{"body": json.dumps({"token": s, "expires_in": 3})}],
  "/sessions/s1/header-credentials": [{"body": "{}", "headers": [["X-Token", h]]}],
  "/oauth/token": [{"body": json.dumps({"access_token": "at-" + "A1b2C3d4" * 6, "expires_in": 3600,
                                        "token_type": "Bearer"})}],
  "/sessions/s1/escaped-credentials": [{"body": "{\"token\": \"ghs_\\u0041bcdefghijklmnopqrstuvwxyz0123456789AB\"}"}],
}))' "$TOKEN" "$SHORT" "$HDR")
pl_start_net

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "www.airlock.test", "git.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "intercept": ["git.airlock.test"]
  },
  "secrets": {
    "refresh": {
      "from_env": "REFRESH_TOKEN", "hosts": ["www.airlock.test"], "paths": ["/oauth/token"],
      "methods": ["POST"], "headers": ["x-unused"], "body": ["form:refresh_token"]
    },
    "access": {
      "hosts": ["api.airlock.test"], "headers": ["authorization"], "paths": ["/v1/"],
      "capture": [{"hosts": ["www.airlock.test"], "methods": ["POST"], "paths": ["/oauth/token"],
                   "json": ["/access_token"], "expires": "/expires_in"}]
    },
    "scm": {
      "hosts": ["api.airlock.test"],
      "headers": ["authorization"],
      "paths": ["/repos/", "/echo"],
      "capture": [
        {"hosts": ["www.airlock.test"], "methods": ["GET"],
         "paths": ["/sessions/*/scm-credentials", "/sessions/*/escaped-credentials"],
         "json": ["/token"], "expires": "/expires_at"},
        {"hosts": ["www.airlock.test"], "paths": ["/sessions/*/short-credentials"],
         "json": ["/token"], "expires": "/expires_in"},
        {"hosts": ["www.airlock.test"], "paths": ["/sessions/*/header-credentials"],
         "headers": ["x-token"]}
      ]
    }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "a policy with capture rules is valid"
pl_policy_refused 's|"json": \["/token"\], "expires": "/expires_at"|"expires": "/expires_at"|' \
	'secrets\.scm\.capture\[0\].*"json" or "headers"' \
	"a capture rule without json or headers is refused, naming its JSON path"
pl_policy_refused 's|"hosts": \["api.airlock.test"\],|"hosts": ["api.airlock.test"], "from_env": "X",|' \
	'secrets\.scm.*no from_env or from_file' "a captured secret with from_env is refused"
pl_policy_refused 's|/sessions/\*/scm-credentials|sessions/x|' \
	'secrets\.scm\.capture\[0\]\.paths\[[0-9]\]' "a capture path that is not a path is refused"

REFRESH=rt-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH
REFRESH_TOKEN=$REFRESH timeout 120 "$AIRLOCK" run --workers 2 --policy "$POLICY" --workspace "$WS" --events "$EV" -- sh -c '
cd "$0"
c() { n=$1; shift; curl -sS --max-time 20 -o "$n.out" -w "%{http_code}" -D "$n.h" "$@" > "$n.code" 2>&1; }
c cred https://www.airlock.test/sessions/s1/scm-credentials
tok=$(sed -n "s/.*\"token\": *\"\\([^\"]*\\)\".*/\\1/p" cred.out)
printf "%s" "$tok" > ph
i=0
while [ $i -lt 8 ]; do
	c use$i -H "Authorization: Bearer $tok" https://api.airlock.test/repos/acme/web/$i
	i=$((i + 1))
done
c echo -H "Authorization: token $tok" https://api.airlock.test/echo
c elsewhere -H "Authorization: Bearer $tok" https://git.airlock.test/repos/acme/web
c path -H "Authorization: Bearer $tok" https://api.airlock.test/admin/x
c query "https://api.airlock.test/repos/x?t=$tok"
c plain -H "Authorization: Bearer $tok" http://api.airlock.test/repos/plain
c hcred https://www.airlock.test/sessions/s1/header-credentials
htok=$(sed -n "s/^[Xx]-[Tt]oken: *//p" hcred.h | tr -d "\r")
printf "%s" "$htok" > hph
c huse -H "Authorization: $htok" https://api.airlock.test/repos/header
c esc https://www.airlock.test/sessions/s1/escaped-credentials
c short https://www.airlock.test/sessions/s1/short-credentials
stok=$(sed -n "s/.*\"token\": *\"\\([^\"]*\\)\".*/\\1/p" short.out)
printf "%s" "$stok" > sph
c sfresh -H "Authorization: Bearer $stok" https://api.airlock.test/repos/fresh
sleep 4
c sold -H "Authorization: Bearer $stok" https://api.airlock.test/repos/old
printf "%s" "$REFRESH_TOKEN" > rph
c refresh --data "grant_type=refresh_token&refresh_token=$REFRESH_TOKEN&client_id=cli" https://www.airlock.test/oauth/token
at=$(sed -n "s/.*\"access_token\": *\"\([^\"]*\)\".*/\1/p" refresh.out)
printf "%s" "$at" > aph
c atuse -H "Authorization: Bearer $at" https://api.airlock.test/v1/models
exit 0
' "$WS" > "$T/out" 2>&1 </dev/null
is $? 0 "airlock run: the script ran"
PH=$(cat "$WS/ph")
is "$(cat "$WS/cred.code")" 200 "the control plane's answer reached the agent"
like "$PH" '^ghs_[0-9A-Za-z]+$' "... with a placeholder keeping the token's prefix and alphabet"
is "${#PH}" "${#TOKEN}" "... and its length"
ok "$([ "$PH" != "$TOKEN" ] && echo 0 || echo 1)" "... not the token"
like "$(cat "$WS/cred.out")" '"expires_in": 3600' "the rest of the answer is as sent"
! grep -rq "$TOKEN" "$WS"
ok $? "the token never reached the sandbox"

r=$(grep '"type":"secret.capture"' "$EV" | grep scm-credentials | head -1)
is "$(jf "$r" decision) $(jf "$r" rule) $(jf "$r" subject.secret) $(jf "$r" subject.host) $(jf "$r" subject.path) $(jf "$r" subject.where)" \
	"allow secrets.scm.capture[0] scm www.airlock.test /sessions/s1/scm-credentials /token" \
	"secret.capture names the rule, secret, host, path and member"
like "$(jf "$r" subject.propagated_us)" '^[0-9]+$' "... and how long telling the other workers took"
diag "capture to every worker: $(jf "$r" subject.propagated_us) us"
! grep -q "$TOKEN" "$EV"
ok $? "no receipt holds the token"

good=0
i=0
while [ $i -lt 8 ]; do
	[ "$(cat "$WS/use$i.code")" = 200 ] &&
		net_last "line~/repos/acme/web/$i" | grep -q "\"Bearer $TOKEN\"" && good=$((good + 1))
	i=$((i + 1))
done
is "$good" 8 "8 requests on new connections (2 workers): each origin request carried the token"
n=$(grep '"type":"secret.inject"' "$EV" | grep -c '"secret":"scm"')
ok "$([ "$n" -ge 8 ] && echo 0 || echo 1)" "secret.inject for each ($n)"
like "$(cat "$WS/echo.out")" "^echo token $PH" "the token echoed back is scrubbed to the placeholder"
like "$(net_last line~/echo)" "token $TOKEN" "... the origin got the token"

refused() { # NAME WHY
	is "$(cat "$WS/$1.code")" 403 "$1: refused with 403"
	r=$(grep '"type":"secret.block"' "$EV" | grep "\"secret\":\"scm\"" | grep "$3" | tail -1)
	is "$(jf "$r" subject.why)" "$2" "$1: secret.block why $2"
}
refused elsewhere host '"host":"git.airlock.test"'
is "$(net_count line~/repos/acme/web host~git)" 0 "elsewhere: nothing reached the other host"
refused path path /admin/x
refused query not-a-header '/repos/x'
refused plain plain-http /repos/plain

HPH=$(cat "$WS/hph")
like "$HPH" '^hdr-' "a header value is captured too (prefix kept)"
ok "$([ "$HPH" != "$HDR" ] && echo 0 || echo 1)" "... the agent got a placeholder"
like "$(net_last line~/repos/header)" "\"Authorization\", \"$HDR\"" "... and using it sends the value"

is "$(cat "$WS/esc.code")" 502 "an escaped token that cannot be replaced: the agent gets a 502, not the answer"
r=$(grep '"type":"proxy.error"' "$EV" | grep escaped | tail -1)
is "$(jf "$r" decision) $(jf "$r" rule)" "block secrets.scm.capture[0]" "... with a receipt naming the capture rule"
! grep -q 'bcdefghijklmnopqrstuvwxyz0123456789AB' "$WS/esc.out" 2>/dev/null
ok $? "... none of it reached the agent"
r=$(grep '"type":"secret.capture"' "$EV" | grep escaped | tail -1)
is "$(jf "$r" decision)" block "... recorded as a secret.capture block"

is "$(cat "$WS/sfresh.code")" 200 "a token before its expires_at is used"
like "$(net_last line~/repos/fresh)" "Bearer $SHORT" "... with its value"
r=$(grep '"type":"secret.capture"' "$EV" | grep scm-credentials | head -1)
is "$(jf "$r" subject.expires_at)" "2099-01-01T00:00:00Z" "secret.capture records the expiry read from the answer (RFC 3339)"
r=$(grep '"type":"secret.capture"' "$EV" | grep short-credentials | head -1)
like "$(jf "$r" subject.expires_at)" '^20[0-9-]+T[0-9:]+Z$' "... or from a number of seconds"
is "$(cat "$WS/sold.code")" 403 "after expires_at its placeholder is refused"
r=$(grep '"type":"secret.block"' "$EV" | grep /repos/old | tail -1)
is "$(jf "$r" subject.why) $(jf "$r" rule)" "expired secrets.scm.capture" "... secret.block why expired"
is "$(net_count line~/repos/old)" 0 "... nothing sent"
# an OAuth refresh the agent sends itself: the refresh token substituted in
# its form field, the access token in the answer captured
AT="at-$(printf 'A1b2C3d4%.0s' 1 2 3 4 5 6)"
is "$(cat "$WS/refresh.code")" 200 "refresh: the token endpoint answered"
is "$(jf "$(net_last line~/oauth/token)" body_sha256)" \
	"$(printf '%s' "grant_type=refresh_token&refresh_token=$REFRESH&client_id=cli" | sha256sum | cut -d' ' -f1)" \
	"refresh: the endpoint got the real refresh token in the form field"
APH=$(cat "$WS/aph")
like "$APH" '^at-[0-9A-Za-z]+$' "refresh: the agent got an access-token placeholder shaped like it"
is "${#APH}" "${#AT}" "... as long"
like "$(net_last line~/v1/models)" "\"Bearer $AT\"" "refresh: the captured access token is used on its bound host"
! grep -rq -e "$REFRESH" -e "$AT" "$WS"
ok $? "refresh: neither the refresh token nor the access token reached the sandbox"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"
done_testing
