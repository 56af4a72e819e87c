#!/bin/bash
# 65-git-servers.t - the git binding's test servers on their own, and the
# GitHub App mint of ghapp.c against the stand-in API:
#  - gitserver.py: stock git clones and pushes through it with the exact
#    token, and is refused (nothing reaches git http-backend) with a wrong
#    one, another user name or none;
#  - github_api.py verifies the JWT that ghapp.c signs, records the scope
#    asked, and its scripted answers (over-grants, failures, slowness) are
#    each refused by ghapp.c with a reason that never holds the token;
#  - the mint resolves through the policy's resolver, refuses
#    special-purpose answers before connecting, verifies TLS against
#    git.github_app.ca or the system store plus egress.upstream_ca;
#  - a token minted by ghapp.c is one the git server accepts.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.20:443   github_api.py        api.git.test, other.git.test
#   198.18.0.21:443   gitserver.py         git.test
#   169.254.169.254:443  a sink            meta.git.test (must never be reached)
#   127.0.0.1:5353    DNS (testnet.py)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gitlib.sh"

HELPERS=${AIRLOCK_HELPERS:-$AIRLOCK_SRC/build/release/tests/helpers}
GHMINT=$HELPERS/ghmint
[ -x "$GHMINT" ] || { echo "Bail out! $GHMINT is not built (make check builds it)"; exit 1; }

lo_addrs 198.18.0.20 198.18.0.21 169.254.169.254

# --- servers ---------------------------------------------------------------

cat > "$T/net.json" <<EOF
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"], "zone": {
   "api.git.test": ["198.18.0.20"],
   "other.git.test": ["198.18.0.20"],
   "meta.git.test": ["169.254.169.254"],
   "mixed.git.test": ["198.18.0.20", "10.0.0.1"],
   "git.test": ["198.18.0.21"]}},
 "sink": ["169.254.169.254:443"]}
EOF
"$PY" "$H/testnet.py" --config "$T/net.json" > "$T/net.out" 2>&1 &
PIDS="$PIDS $!"

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/app.pem" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/other.pem" 2>/dev/null
chmod 600 "$T/app.pem" "$T/other.pem"
openssl pkey -in "$T/app.pem" -pubout -out "$T/app.pub.pem"

# api.json is rewritten (atomically) to script the next answer.
api_config() {
	"$PY" - "$T/api.json" "$T" "$1" <<'PY'
import json, os, sys
path, t, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cfg = {"log": t + "/api.log", "ready": t + "/api.ready", "lifetime": 600,
       "listen": ["198.18.0.20:443"],
       "tls": {"dir": t + "/api-tls", "names": ["api.git.test"]},
       "apps": {"12345": {"public_key": t + "/app.pub.pem", "installation_id": 4242}},
       "mode": "exact"}
cfg.update(extra)
with open(path + ".tmp", "w") as f:
    json.dump(cfg, f)
os.rename(path + ".tmp", path)
PY
}
api_config '{}'
"$PY" "$H/github_api.py" --config "$T/api.json" > "$T/api.out" 2>&1 &
PIDS="$PIDS $!"

TOKEN_A="ghs_$(head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 120)"
git_config() {
	cat > "$T/git.json.tmp" <<EOF
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 600,
 "listen": ["198.18.0.21:443"], "tls": {"dir": "$T/git-tls", "names": ["git.test"]},
 "root": "$T/repos", "tokens": $1}
EOF
	mv "$T/git.json.tmp" "$T/git.json"
}
git_config "[\"$TOKEN_A\"]"
mkdir -p "$T/repos/acme"
git init -q --bare -b main "$T/repos/acme/api.git"
git init -q -b main "$T/seed"
echo "hello from acme/api" > "$T/seed/README"
git -C "$T/seed" add README
git -C "$T/seed" -c user.name=t -c user.email=t@test commit -qm init
git -C "$T/seed" push -q "$T/repos/acme/api.git" main
"$PY" "$H/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PIDS="$PIDS $!"

i=0
while { [ ! -f "$T/net.ready" ] || [ ! -f "$T/api.ready" ] || [ ! -f "$T/git.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ ! -f "$T/net.ready" ] || [ ! -f "$T/api.ready" ] || [ ! -f "$T/git.ready" ]; then
	echo "Bail out! the servers did not start: $(cat "$T/net.out" "$T/api.out" "$T/git.out")"
	exit 1
fi
ok 0 "testnet, github_api.py and gitserver.py are listening"

# --- gitserver.py ----------------------------------------------------------------

export GIT_SSL_CAINFO="$T/git-tls/ca.pem" GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1
export HOME="$T/home"
mkdir -p "$HOME"
basic() { printf 'Basic %s' "$(printf '%s' "$1" | base64 -w0)"; }
g() {
	git -c http.curloptResolve=git.test:443:198.18.0.21 -c user.name=t -c user.email=t@test "$@"
}
glog_count() { "$PY" - "$T/git.log" "$@" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if all(str(e.get(k)) == v for k, _, v in (a.partition("=") for a in sys.argv[2:])):
        n += 1
print(n)
PY
}
glog_lines() { wc -l < "$T/git.log"; }

g -c http.extraHeader="Authorization: $(basic "x-access-token:$TOKEN_A")" \
	clone -q https://git.test/acme/api.git "$T/c1" 2>"$T/err"
ok $? "stock git clones through gitserver.py with the exact token"
is "$(cat "$T/c1/README" 2>/dev/null)" "hello from acme/api" "the clone holds the repository's content"
is "$(glog_count method=GET path=/acme/api.git/info/refs query=service=git-upload-pack authorised=True)" 1 \
	"git.log: the clone's info/refs, with its query, authorised"
is "$(glog_count method=POST path=/acme/api.git/git-upload-pack authorised=True status=200)" \
	"$(glog_count method=POST path=/acme/api.git/git-upload-pack)" "git.log: every upload-pack authorised and answered"

echo more >> "$T/c1/README"
g -C "$T/c1" commit -qam second
g -C "$T/c1" -c http.extraHeader="Authorization: $(basic "x-access-token:$TOKEN_A")" \
	push -q origin main 2>"$T/err"
ok $? "stock git pushes through gitserver.py with the exact token"
is "$(git --git-dir="$T/repos/acme/api.git" rev-parse main)" "$(git -C "$T/c1" rev-parse HEAD)" \
	"the bare repository has the pushed commit"
is "$(glog_count method=POST path=/acme/api.git/git-receive-pack authorised=True status=200)" 1 \
	"git.log: receive-pack authorised"

before=$(glog_lines)
for cred in "x-access-token:ghs_wrong" "x-access-token:${TOKEN_A}x" "git:$TOKEN_A" "x-access-token:"; do
	rm -rf "$T/c2"
	g -c http.extraHeader="Authorization: $(basic "$cred")" clone -q https://git.test/acme/api.git "$T/c2" 2>"$T/err"
	st=$?
	like "$st $(cat "$T/err")" '^128 .*(Authentication failed|could not read Username|401)' \
		"a clone with the credential ${cred%%:*}:$(printf '%.12s' "${cred#*:}")... is refused"
done
g clone -q https://git.test/acme/api.git "$T/c3" 2>"$T/err"
like "$? $(cat "$T/err")" '^128 ' "a clone without a credential is refused"
is "$(tail -n +$((before + 1)) "$T/git.log" | grep -c '"authorised": true')" 0 \
	"git.log: none of the refused clones' requests was authorised"
is "$(tail -n +$((before + 1)) "$T/git.log" | grep -c '"status": 401')" \
	"$(tail -n +$((before + 1)) "$T/git.log" | wc -l)" "git.log: each was answered 401 without the backend"
is "$(tail -n +$((before + 1)) "$T/git.log" | grep -c '"auth": "none"')" 1 "git.log: the last one carried no credential"

# --- github_api.py and ghapp.c ---------------------------------------------------

# policy [JSON PATCH]: writes $T/policy.json, the base policy with the
# patch merged in (objects merged, other values replaced; null deletes).
policy() {
	_patch=${1:-'{}'}
	"$PY" - "$T/policy.json" "$T" "$_patch" <<'PY'
import json, sys
path, t, patch = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
base = {"version": 1, "session": {"repo": "git.test/acme/api"},
        "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"]},
        "git": {"hosts": ["git.test"],
                "repos": {"acme/shared-lib": ["fetch"], "other/lib": ["fetch"],
                          "acme/tools": ["fetch", "push"]},
                "github_app": {"app_id": 12345, "installation_id": 4242,
                               "private_key_file": t + "/app.pem",
                               "api": "https://api.git.test",
                               "ca": t + "/api-tls/ca.pem",
                               "permissions": {"issues": "read"}}}}
def merge(a, b):
    for k, v in b.items():
        if v is None:
            a.pop(k, None)
        elif isinstance(v, dict) and isinstance(a.get(k), dict):
            merge(a[k], v)
        else:
            a[k] = v
merge(base, patch)
json.dump(base, open(path, "w"))
PY
}
# mint [TIMEOUT_MS]: runs ghmint on $T/policy.json; a sanitizer report
# (make SAN=1) is kept in $T/san.log.
mint() {
	"$GHMINT" "$T/policy.json" "$@" > "$T/mint.out" 2> "$T/mint.err"
	MINT_RC=$?
	grep -A20 'Sanitizer\|runtime error' "$T/mint.err" >> "$T/san.log"
}
last_mint() { grep '"event": "mint"' "$T/api.log" | tail -n 1; }
mints() { grep -c '"event": "mint"' "$T/api.log"; }

policy
mint
ok $MINT_RC "ghapp.c mints a token from the stand-in API: $(cat "$T/mint.err")"
M=$(last_mint)
is "$(jf "$M" jwt_ok jwt_error)" "true null" "the stand-in verified the JWT (RS256, the App's key)"
is "$(jf "$M" claims.iss)" "12345" "JWT iss is the App id"
is "$("$PY" -c 'import json,sys; c=json.loads(sys.argv[1])["claims"]; n=json.loads(sys.argv[1])["now"]; print(c["exp"]-c["iat"], 0 < c["exp"]-n <= 600, c["iat"] <= n)' "$M")" \
	"600 True True" "JWT: iat in the past, exp at most 10 minutes ahead, 600 s in all"
is "$(jf "$M" path)" "/app/installations/4242/access_tokens" "POST /app/installations/{id}/access_tokens"
is "$(jf "$M" repositories)" '["api","shared-lib","tools"]' \
	"asked for exactly the session repository and the owner's siblings, bare (not other/lib)"
is "$(jf "$M" permissions)" '{"contents":"write","issues":"read","metadata":"read"}' \
	"asked for contents write, metadata read and the policy's permissions"
is "$(jf "$M" accept api_version user_agent content_type)" \
	"application/vnd.github+json 2022-11-28 airlock application/json" "the request's headers"
O=$(cat "$T/mint.out")
is "$(jf "$O" token_sha256)" "$(jf "$M" token_sha256)" "the token ghapp.c holds is the one the stand-in issued"
is "$(jf "$O" token_length)" 100 "a token of 100 characters (no length is assumed)"
is "$(jf "$O" subject.repositories subject.permissions)" \
	'["api","shared-lib","tools"] {"contents":"write","issues":"read","metadata":"read"}' \
	"the git.token subject: what was granted"
like "$(jf "$O" subject.expires_at)" '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]{8}Z$' "the subject: its expiry"
is "$(jf "$O" refresh_before)" 600 "an hour's token is refreshed 10 minutes before it expires"
is "$(jf "$O" subject.installation_id subject.host)" "4242 api.git.test" "the subject: installation and API host"
like "$(grep -c '"name": "api.git.test"' "$T/net.log")" '^[1-9]' "the API name was resolved through the policy's resolver"

# A token minted by ghapp.c opens the git server.
TOKEN_M="ghs_$(head -c 3000 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 2000)"
api_config "{\"token\": \"$TOKEN_M\"}"
git_config "[\"$TOKEN_M\"]"
mint
ok $MINT_RC "a mint answering a token of $((${#TOKEN_M})) characters"
is "$(jf "$(cat "$T/mint.out")" token_length)" "${#TOKEN_M}" "the whole long token is kept"
g -c http.extraHeader="Authorization: $(basic "x-access-token:$TOKEN_M")" \
	clone -q https://git.test/acme/api.git "$T/c4" 2>"$T/err"
ok $? "the minted token clones through gitserver.py; the old token no longer does:"
g -c http.extraHeader="Authorization: $(basic "x-access-token:$TOKEN_A")" \
	clone -q https://git.test/acme/api.git "$T/c5" 2>/dev/null
ok $((! $?)) "  a clone with the previous token is refused"
if grep -qF "$TOKEN_M" "$T/mint.out" "$T/mint.err"; then ok 1 "the token is never printed"; else ok 0 "the token is never printed"; fi

# Every scripted failure is refused, with a reason, never the token.
refused() { # DESC REGEX
	like "$MINT_RC $(cat "$T/mint.err")" "^1 ghmint: token mint at [^:]+: .*$2" "$1"
	if grep -qF "$TOKEN_M" "$T/mint.out" "$T/mint.err"; then
		ok 1 "$1: the token is not printed"
	fi
}
for m in "over-repos|granted more than asked: repository \"everything\"" \
	 "over-perms|granted more than asked: permission \"administration\"" \
	 "over-level|metadata \"write\" \\(asked \"read\"\\)" \
	 "all|repository_selection is not \"selected\" but \"all\"" \
	 "missing-repo|did not grant repository \"api\"" \
	 "other-owner|of another owner" \
	 "expired|expires in -" \
	 "no-token|\"token\" is missing" \
	 "malformed|not a JSON object"; do
	api_config "{\"token\": \"$TOKEN_M\", \"mode\": \"${m%%|*}\"}"
	mint
	refused "mode ${m%%|*}: refused" "${m#*|}"
done
api_config '{"mode": "status", "status": 500, "message": "Server Error"}'
mint
refused "HTTP 500: refused" "the mint answered HTTP 500: Server Error"
api_config '{"mode": "status", "status": 422, "message": "There is at least one repository that does not exist"}'
mint
refused "HTTP 422: refused with GitHub's message" "HTTP 422: There is at least one repository"
api_config '{"mode": "slow", "delay": 20}'
t0=$(date +%s)
mint 2000
refused "a slow API: refused at the timeout" "timed out"
like "$(($(date +%s) - t0))" '^[0-5]$' "  within the timeout (2 s), not the API's 20 s"
api_config '{}'

policy "{\"git\": {\"github_app\": {\"private_key_file\": \"$T/other.pem\"}}}"
mint
refused "a JWT signed by another key: refused by the API" "HTTP 401"
is "$(jf "$(last_mint)" jwt_error)" "bad signature" "  the stand-in saw a bad signature"
policy '{"git": {"github_app": {"installation_id": 9}}}'
mint
refused "another installation: refused" "HTTP 404"
policy '{"git": {"github_app": {"app_id": "Iv23liOther"}}}'
mint
refused "another App id: refused" "HTTP 401"
is "$(jf "$(last_mint)" jwt_error)" "unknown iss" "  the stand-in saw the iss"

# Resolving and addresses: nothing unchecked is connected to.
n0=$(mints)
policy '{"git": {"github_app": {"api": "https://meta.git.test"}}}'
mint
refused "an API name resolving to 169.254.169.254: refused" "meta.git.test resolves to 169.254.169.254, a special-purpose address"
policy '{"git": {"github_app": {"api": "https://mixed.git.test"}}}'
mint
refused "an API name with one special-purpose answer among good ones: refused" "resolves to 10.0.0.1"
policy '{"egress": {"allow_ranges": []}}'
mint
refused "198.18.0.20 outside egress.allow_ranges: refused, naming the fix" "resolves to 198.18.0.20, a special-purpose address; add its range to egress.allow_ranges"
policy '{"git": {"github_app": {"api": "https://198.18.0.30"}}, "egress": {"allow_ranges": []}}'
mint
refused "an IP literal outside egress.allow_ranges: refused, naming the fix" "198.18.0.30 is a special-purpose address; add its range to egress.allow_ranges"
policy '{"git": {"github_app": {"api": "https://nx.git.test"}}}'
mint
refused "a name that does not exist: refused, saying /etc/hosts is not read" "cannot resolve nx.git.test: NXDOMAIN.*not /etc/hosts"
policy '{"egress": {"resolver": ["127.0.0.1:5354"]}}'
mint 3000
refused "a resolver that does not answer: refused" "cannot resolve api.git.test"
is "$(grep -c '"listen": "169.254.169.254:443"' "$T/net.log")" 0 "the sink at 169.254.169.254:443 was never reached"
is "$(mints)" "$n0" "the API saw none of these mints"
"$PY" "$H/testnet.py" send 169.254.169.254:443 --data x --idle 0.2 --timeout 3 > /dev/null
i=0
while [ "$(grep -c '"listen": "169.254.169.254:443"' "$T/net.log")" -eq 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
like "$(grep -c '"listen": "169.254.169.254:443"' "$T/net.log")" '^[1-9]' "control: the sink logs a direct connection"

# TLS.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$T/rogue.key" \
	-out "$T/rogue.pem" -days 1 -subj "/CN=rogue CA" 2>/dev/null
policy "{\"git\": {\"github_app\": {\"ca\": \"$T/rogue.pem\"}}}"
mint
refused "git.github_app.ca of another CA: refused" "TLS: certificate verify failed"
policy "{\"git\": {\"github_app\": {\"ca\": null}}, \"egress\": {\"upstream_ca\": \"$T/api-tls/ca.pem\"}}"
mint
ok $MINT_RC "without git.github_app.ca, egress.upstream_ca is trusted: $(cat "$T/mint.err")"
policy "{\"git\": {\"github_app\": {\"ca\": \"$T/rogue.pem\"}}, \"egress\": {\"upstream_ca\": \"$T/api-tls/ca.pem\"}}"
mint
refused "git.github_app.ca replaces egress.upstream_ca" "certificate verify failed"
policy '{"git": {"github_app": {"ca": null}}}'
mint
refused "the system store alone does not trust the test CA" "certificate verify failed"
policy '{"git": {"github_app": {"api": "https://other.git.test"}}}'
mint
refused "a certificate for another name: refused" "certificate verify failed: [Hh]ostname mismatch"
policy '{"git": {"github_app": {"api": "https://198.18.0.20"}}}'
mint
refused "an IP literal the certificate does not name: refused" "certificate verify failed: IP address mismatch"
policy '{"git": {"github_app": {"api": "https://api.git.test:8443"}}}'
mint
refused "nothing listening: refused" "cannot connect to api.git.test \\(198.18.0.20 port 8443\\)"
policy "{\"git\": {\"github_app\": {\"ca\": \"$T/missing.pem\"}}}"
mint
refused "an unreadable CA file: refused" "git.github_app.ca .*missing.pem"

# The stand-in's REST endpoints record what reached them.
capi() {
	curl -sS --max-time 10 --cacert "$T/api-tls/ca.pem" --resolve api.git.test:443:198.18.0.20 \
		-o /dev/null -w '%{http_code}' "$@"
}
last_api() { grep '"event": "api"' "$T/api.log" | tail -n 1; }
is "$(capi -H "Authorization: token $TOKEN_M" https://api.git.test/repos/acme/api/pulls?state=open)" 200 \
	"REST: /repos/OWNER/REPO/... answers 200"
A=$(last_api)
is "$(jf "$A" method path query token_ok)" \
	"GET /repos/acme/api/pulls state=open true" "REST: logged with its query and an issued token"
is "$(jf "$A" authorization)" "token $TOKEN_M" "REST: the Authorization as received"
is "$(capi -X POST -d '{"query":"{viewer{login}}"}' -H 'Authorization: bearer nope' https://api.git.test/graphql)" 200 \
	"REST: /graphql answers 200"
is "$(jf "$(last_api)" path token_ok)" "/graphql false" "REST: a token it did not issue is logged as such"
is "$(capi https://api.git.test/users/x)" 404 "REST: another path is 404, logged too"
is "$(jf "$(last_api)" authorization)" "null" "REST: no Authorization is logged as null"

is "$(cat "$T/san.log" 2>/dev/null | head -n 20)" "" "no sanitizer report from any mint"

done_testing
