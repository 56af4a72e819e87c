#!/bin/sh
# Body fields (docs/SECRETS.md "Body fields"): a secret's `body` lists the
# form fields and JSON members where its placeholder is substituted, on
# the hosts, paths and methods it is bound to; the origin gets the value,
# the body re-framed; a placeholder anywhere else in a body to such a host
# is refused with 403 and secret.block, nothing sent.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

WS="$T/ws"
mkdir "$WS"
pl_start_net

VALUE="rt-live-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "git.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "intercept": ["git.airlock.test"]
  },
  "secrets": {
    "refresh": {
      "from_env": "REFRESH_TOKEN",
      "hosts": ["api.airlock.test"],
      "headers": ["authorization"],
      "paths": ["/oauth/"],
      "methods": ["POST"],
      "body": ["form:refresh_token", "json:/auth/refresh_token"]
    }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "a policy with body fields is valid"
pl_policy_refused 's/"form:refresh_token"/"form:"/' 'secrets\.refresh\.body\[[01]\].*form:NAME' \
	"a body field without a name is refused, naming its JSON path"
pl_policy_refused 's|"json:/auth/refresh_token"|"json:/a~2"|' 'secrets\.refresh\.body\[[01]\].*RFC 6901' \
	"a JSON pointer with a bad escape is refused"

REFRESH_TOKEN=$VALUE timeout 120 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" \
	--events "$EV" -- sh -c '
cd "$0"
printf "%s" "$REFRESH_TOKEN" > ph
c() { n=$1; shift; curl -sS --max-time 20 -o "$n.out" -w "%{http_code}" -D "$n.h" "$@" > "$n.code" 2>&1; }
c form --data "grant_type=refresh_token&refresh_token=$REFRESH_TOKEN&client_id=app" https://api.airlock.test/oauth/token
c json -H "Content-Type: application/json" --data "{\"grant\":\"r\",\"auth\":{\"refresh_token\":\"$REFRESH_TOKEN\"},\"n\":[1,2]}" https://api.airlock.test/oauth/json
c other --data "grant_type=refresh_token&other=$REFRESH_TOKEN" https://api.airlock.test/oauth/other
c jother -H "Content-Type: application/json" --data "{\"auth\":{\"x\":\"$REFRESH_TOKEN\"}}" https://api.airlock.test/oauth/jother
c text -H "Content-Type: text/plain" --data "refresh_token=$REFRESH_TOKEN" https://api.airlock.test/oauth/text
c path --data "refresh_token=$REFRESH_TOKEN" https://api.airlock.test/v1/path
c method -X PUT --data "refresh_token=$REFRESH_TOKEN" https://api.airlock.test/oauth/method
c host --data "refresh_token=$REFRESH_TOKEN" https://git.airlock.test/oauth/host
c escaped -H "Content-Type: application/json" --data "{\"auth\":{\"x\":\"\\u0072${REFRESH_TOKEN#r}\"}}" https://api.airlock.test/oauth/escaped
exit 0
' "$WS" > "$T/out" 2>&1 </dev/null
is $? 0 "airlock run: the script ran"
PH=$(cat "$WS/ph")
like "$PH" '^airlock-ph-refresh-' "the agent holds the placeholder"

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
is "$(cat "$WS/form.code")" 200 "form: answered"
r=$(net_last line~/oauth/token)
is "$(jf "$r" body_sha256)" "$(sha "grant_type=refresh_token&refresh_token=$VALUE&client_id=app")" \
	"form: the origin got the value in the listed field, every other field as sent"
is "$(jf "$r" framing)" "$(jf "$(net_last line~/oauth/token)" framing)" "form: re-framed"
like "$(cat "$WS/form.out")" "body-length=$(printf 'grant_type=refresh_token&refresh_token=%s&client_id=app' "$VALUE" | wc -c)" \
	"form: the body's new length was sent"
like "$(cat "$WS/form.out")" "refresh_token=$PH&" "form: the value echoed back is scrubbed"
! grep -q "$VALUE" "$WS"/*.out "$WS"/*.h
ok $? "the value never reached the sandbox"
r=$(grep '"type":"secret.inject"' "$EV" | grep /oauth/token | head -1)
is "$(jf "$r" subject.secret) $(jf "$r" subject.field)" "refresh form:refresh_token" \
	"secret.inject names the field"

is "$(cat "$WS/json.code")" 200 "json: answered"
r=$(net_last line~/oauth/json)
is "$(jf "$r" body_sha256)" "$(sha "{\"grant\":\"r\",\"auth\":{\"refresh_token\":\"$VALUE\"},\"n\":[1,2]}")" \
	"json: the origin got the value at the listed pointer (compact, members in order)"

refused() { # NAME WHY RULE
	is "$(cat "$WS/$1.code")" 403 "$1: refused with 403"
	like "$(grep -i '^x-airlock-rule' "$WS/$1.h")" "$3" "$1: X-Airlock-Rule $3"
	r=$(grep '"type":"secret.block"' "$EV" | grep "/$1\"" | tail -1)
	is "$(jf "$r" subject.where) $(jf "$r" subject.why)" "body $2" "$1: secret.block where body, why $2"
	is "$(net_count "line~/$1")" 0 "$1: no origin saw the request"
}
refused other body 'secrets\.refresh\.body'
refused jother body 'secrets\.refresh\.body'
refused text body 'secrets\.refresh\.body'
refused path path 'secrets\.refresh\.paths'
refused method method 'secrets\.refresh\.methods'
# a host no body-field secret is bound to: its bodies are not read (as
# before); the placeholder goes as it is, worthless there
is "$(cat "$WS/host.code")" 200 "host: a body to a host without body fields is not read"
is "$(jf "$(net_last line~/oauth/host)" body_sha256)" "$(sha "refresh_token=$PH")" \
	"host: ... and carries the placeholder, never the value"
refused escaped body 'secrets\.refresh\.body'
r=$(grep '"type":"secret.block"' "$EV" | grep '/oauth/other"')
is "$(jf "$r" subject.field)" "form:other" "the refusal names the field the placeholder was in"
! grep -q "$VALUE" "$EV"
ok $? "no receipt holds the value"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"
done_testing
