#!/bin/sh
# 68-git-api-admin.t - the REST binding (git.api_hosts) in the proxy over
# intercepted TLS, with a static token (git.credential), against hostile
# spellings and the API requests that mint credentials (docs/GIT.md, "The
# REST API"; SPEC 3.5):
#  - paths that one normaliser (src/pathnorm.c) refuses: ';' parameters
#    ("..;" is ".." to Java servers), encoded and dots-only segments,
#    double encoding, encoded separators: 403 git.path, nothing reaches the
#    upstream, the token goes nowhere;
#  - within the session repository, deploy keys, webhooks, collaborators,
#    Actions secrets, variables and runner tokens, environment secrets,
#    transfers and a PATCH of the repository: 403 git.api_admin with a
#    git.block receipt, nothing forwarded;
#  - git.api_allow lets the one it lists through, with the token;
#  - shadow mode forwards a refused admin request without the token;
#  - a brokered secret's `paths` reads paths through the same normaliser.
#
# Addresses (proxylib.sh): api.airlock.test is 198.18.0.10 (tls :443, the
# test network's TLS origin, which logs every request it reads).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_HTTP="198.18.0.10:80"
pl_start_net

TOKEN="ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
export GIT_TOKEN_VALUE="$TOKEN"
LLM_KEY="sk-llm-0123456789abcdefghijklmnopqrstuvwxyz"
export LLM_KEY_VALUE="$LLM_KEY"

policy() { # MODE
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "$1",
  "session": {"id": "sess-api-admin", "repo": "git.airlock.test/acme/api"},
  "egress": {
    "allow": ["www.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {"gh": {"from_env": "GIT_TOKEN_VALUE", "env": "GITHUB_TOKEN",
                     "hosts": ["api.airlock.test"]},
              "llm": {"from_env": "LLM_KEY_VALUE", "env": "LLM_KEY",
                      "hosts": ["www.airlock.test"], "paths": ["/v1/"]}},
  "git": {
    "hosts": ["git.airlock.test"],
    "api_hosts": ["api.airlock.test"],
    "repos": {"acme/lib": ["fetch"]},
    "credential": "gh",
    "api_allow": ["/graphql", "/repos/acme/api/hooks"]
  }
}
EOF
}

STREAMS=""
start() { # MODE
	policy "$1"
	EV="$T/events-$1.jsonl"
	STREAMS="$STREAMS $EV"
	pl_start_proxy_ok --ca-out "$T/session-ca-$1.pem" --placeholders "$T/ph-$1.env"
	cat "$T/session-ca-$1.pem" "$CA" > "$T/bundle.pem"
	ph=$(sed -n 's/^GITHUB_TOKEN=//p' "$T/ph-$1.env")
	llm_ph=$(sed -n 's/^LLM_KEY=//p' "$T/ph-$1.env")
}

# upstream: requests the TLS origin read so far.
upstream() { net_count srv=tls event=request; }
# with_token: requests that reached the TLS origin with the real token.
with_token() {
	python3 - "$NETLOG" "$TOKEN" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("srv") == "tls" and e.get("event") == "request" and \
            any(k.lower() == "authorization" and sys.argv[2] in v for k, v in e.get("headers", [])):
        n += 1
print(n)
PY
}
# api METHOD PATH [CURL ARGS]: one API request with the placeholder.
api() {
	_m=$1 _p=$2
	shift 2
	req "https://api.airlock.test$_p" --cacert "$T/bundle.pem" --path-as-is -X "$_m" \
		-H "Authorization: Bearer $ph" "$@"
}

start enforce
like "$ph" '^airlock-ph-gh-' "the agent holds a placeholder for the token"

# --- control: the binding works -----------------------------------------------------------

api GET /repos/acme/api/pulls
is "$CODE/$(with_token)" "200/1" "GET /repos/acme/api/pulls: allowed, the placeholder became the token"
like "$(cat "$T/b")" "path=/repos/acme/api/pulls " "  and the upstream read that path"

# --- one normaliser: ambiguous spellings never reach the upstream ------------------------

n0=$(upstream)
for p in \
	"/repos/acme/api/..;/secret-repo" \
	"/repos/acme/api/..;/..;/acme/secret-repo/keys" \
	"/repos/acme/api/.;/secret-repo" \
	"/repos/acme/api/..%3b/secret-repo" \
	"/repos/acme/api/..%3B/secret-repo" \
	"/repos/acme/api/pulls;x=1" \
	"/repos/acme/api/%2e%2e/secret-repo" \
	"/repos/acme/api/.%2e/secret-repo" \
	"/repos/acme/api/%2E./secret-repo" \
	"/repos/acme/api/.../secret-repo" \
	"/repos/acme/api/..%20/secret-repo" \
	"/repos/acme/api/%252e%252e/secret-repo" \
	"/repos/acme/api/..%2fsecret-repo" \
	"/repos/acme/api/..%5csecret-repo" \
	"/repos/acme/api/%c0%ae%c0%ae/secret-repo" \
	"/graphql/..;/repos/acme/secret-repo"; do
	api GET "$p"
	is "$(verdict)" "403 git.path git.block/block/git.path" "refused: $p"
done
r=$(last_receipt git.block)
is "$(jf "$r" point)/$(jf "$r" subject.request_method)" "git/GET" "  recorded as git.block at point git"
is "$(upstream)" "$n0" "none of them reached the upstream"
is "$(net_count srv=tls event=request 'line~secret-repo')" 0 "  the sibling was never requested"
is "$(with_token)" 1 "  and the token went nowhere"

# --- git.api_admin: credentials, access, moves ------------------------------------------

n0=$(upstream)
admin() { # DESC METHOD PATH [CURL ARGS]
	_d=$1
	shift
	api "$@"
	is "$(verdict)" "403 git.api_admin git.block/block/git.api_admin" "$_d: 403 git.api_admin"
}
admin "a deploy key (POST /repos/acme/api/keys)" POST /repos/acme/api/keys \
	-H "Content-Type: application/json" --data-binary '{"title":"x","key":"ssh-ed25519 AAAA","read_only":false}'
r=$(receipt_of "$(hdr X-Airlock-Receipt)")
is "$(jf "$r" type)/$(jf "$r" decision)/$(jf "$r" subject.repo)/$(jf "$r" subject.operation)/$(jf "$r" subject.path)" \
	"git.block/block/acme/api/push//repos/acme/api/keys" "  its receipt names the repository, the operation and the path"
like "$(jf "$r" reason)" "deploy keys" "  and says what it was"
admin "listing deploy keys" GET /repos/acme/api/keys
admin "an escaped deploy key path (%6beys)" POST /repos/acme/api/%6beys --data-binary '{}'
admin "upper case (KEYS)" POST /repos/acme/api/KEYS --data-binary '{}'
admin "a collaborator" PUT /repos/acme/api/collaborators/mallory --data-binary '{"permission":"admin"}'
admin "an invitation" PATCH /repos/acme/api/invitations/1 --data-binary '{}'
admin "an Actions secret" PUT /repos/acme/api/actions/secrets/DEPLOY --data-binary '{}'
admin "an Actions variable" POST /repos/acme/api/actions/variables --data-binary '{}'
admin "a runner registration token" POST /repos/acme/api/actions/runners/registration-token
admin "a runner remove token" POST /repos/acme/api/actions/runners/remove-token
admin "an environment secret" PUT /repos/acme/api/environments/prod/secrets/K --data-binary '{}'
admin "a transfer" POST /repos/acme/api/transfer --data-binary '{"new_owner":"mallory"}'
admin "a visibility change (PATCH /repos/acme/api)" PATCH /repos/acme/api --data-binary '{"private":false}'
admin "the same under /api/v3" POST /api/v3/repos/acme/api/keys --data-binary '{}'
admin "a fetch-only sibling's webhooks" GET /repos/acme/lib/hooks
is "$(upstream)" "$n0" "none of them reached the upstream"
is "$(with_token)" 1 "  and the token went nowhere"

# --- git.api_allow lets the listed one through ------------------------------------------

api POST /repos/acme/api/hooks -H "Content-Type: application/json" --data-binary '{"config":{"url":"https://x.test"}}'
is "$CODE/$(with_token)" "200/2" "POST /repos/acme/api/hooks, listed in git.api_allow: forwarded with the token"
r=$(last_receipt git.allow)
is "$(jf "$r" rule)/$(jf "$r" subject.repo)/$(jf "$r" subject.operation)" "git.api_allow/acme/api/api" \
	"  recorded as git.allow by git.api_allow"
api GET /repos/acme/api/hooks/1
is "$CODE" 200 "  and what is under it"
api GET '/repos/acme/api/hooks/..;/keys'
is "$(verdict)" "403 git.path git.block/block/git.path" "  but not a '..;' out of it"
api POST /repos/acme/api/keys --data-binary '{}'
is "$(verdict)" "403 git.api_admin git.block/block/git.api_admin" "the unlisted ones stay refused"
api PATCH /repos/acme/api/pulls/1 --data-binary '{}'
is "$CODE" 200 "other writes of the session repository go on (PATCH of a pull request)"

# --- the secrets' paths: the same normaliser -------------------------------------------

llm() { # PATH: a request to the secret's host with its placeholder
	req "https://www.airlock.test$1" --cacert "$T/bundle.pem" --path-as-is \
		-H "x-api-key: $llm_ph" --data-binary '{}'
}
with_key() { net_count srv=tls event=request "headers~$LLM_KEY"; }
llm /v1/messages
is "$CODE/$(with_key)" "200/1" "a secret bound to /v1/: substituted on /v1/messages"
n0=$(upstream)
for p in "/v1/..;/admin" "/v1/..%3b/admin" "/v1/a;b/messages" "/v1/.../admin" "/v1/..%20/admin" \
	"/v1/%2e%2e/admin" "/v1//messages"; do
	llm "$p"
	is "$(verdict)" "403 secrets.llm.paths secret.block/block/secrets.llm.paths" "secret paths: $p is under no prefix"
done
is "$(upstream)/$(with_key)" "$n0/1" "  nothing reached the upstream, the value went nowhere else"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

# --- shadow mode: a would-be refusal goes on without the token ----------------------------

start shadow
n0=$(upstream)
t0=$(with_token)
api POST /repos/acme/api/actions/runners/registration-token
is "$CODE" 200 "shadow: a runner token request goes on"
r=$(last_receipt git.block)
is "$(jf "$r" decision)/$(jf "$r" rule)" "would_block/git.api_admin" "  recorded as a would_block git.api_admin"
is "$(upstream)/$(with_token)" "$((n0 + 1))/$t0" "  and reached the upstream without the token"
api GET '/repos/acme/api/..;/secret-repo'
is "$(jf "$(last_receipt git.block)" decision)/$(jf "$(last_receipt git.block)" rule)/$(with_token)" \
	"would_block/git.path/$t0" "shadow: '..;' is a would_block git.path, without the token"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

for e in $STREAMS; do
	st=$("$AIRLOCK" verify "$e" >/dev/null 2>&1; echo $?)
	is "$st" 0 "the stream verifies: $(basename "$e")"
done
done_testing
