#!/bin/sh
# 66-git-binding.t - the git binding in the proxy (docs/GIT.md), over
# plain http through `airlock proxy`: every request to a git host is
# decided by repository and operation, recorded (git.allow, git.block at
# point git), sent upstream in its normalised form, and refused spellings
# never reach the server; plain http never carries the credential; shadow
# mode records would-be blocks and still gives nothing; API paths are
# bound to the repositories in scope; port 22 follows git.ssh.
#
# Addresses (proxylib.sh): git.airlock.test and api.airlock.test are
# 198.18.0.10 (http :80, tls :443, sink :8080); other.airlock.test is
# 198.18.0.13 (sinks: must never be reached).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_HTTP="198.18.0.10:80"
PL_SINK="198.18.0.13:22 198.18.0.10:22"
pl_start_net

TOKEN="ghs_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_2026_long_stateless"

policy() { # MODE SSH
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "$1",
  "session": {"id": "sess-git", "repo": "git.airlock.test/acme/api"},
  "egress": {
    "allow": ["git.airlock.test:80", "api.airlock.test:80"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {"gh": {"from_env": "GIT_TOKEN_VALUE", "env": "GITHUB_TOKEN",
                     "hosts": ["api.airlock.test"]}},
  "git": {
    "hosts": ["git.airlock.test"],
    "api_hosts": ["api.airlock.test"],
    "repos": {"acme/lib": ["fetch"], "acme/tools": ["fetch", "push"]},
    "credential": "gh",
    "api_allow": ["/graphql"],
    "ssh": $2
  }
}
EOF
}

# n_path PATH: how many requests for PATH (request line) the server saw.
n_path() { net_count srv=http event=request "line~ $1 "; }
# auth_seen: how many requests reached the server with an Authorization.
auth_seen() {
	python3 - "$NETLOG" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "request" and any(k.lower() == "authorization" for k, _ in e.get("headers", [])):
        n += 1
print(n)
PY
}

export GIT_TOKEN_VALUE="$TOKEN"
STREAMS=""
# start MODE SSH: a proxy under that policy, with a stream of its own.
start() {
	policy "$1" "$2"
	EV="$T/events-$1-$2.jsonl"
	STREAMS="$STREAMS $EV"
	pl_start_proxy_ok
}
start enforce false

# --- allowed: the session repository, normalised --------------------------------------

req "http://git.airlock.test/ACME/API.git/info/refs?service=git-upload-pack"
is "$CODE" 200 "fetch of the session repository (info/refs) is allowed"
like "$(cat "$T/b")" "path=/acme/api.git/info/refs\\?service=git-upload-pack " \
	"the server reads the normalised target (lowercase, .git)"
r=$(last_receipt git.allow)
is "$(jf "$r" point)/$(jf "$r" rule)/$(jf "$r" subject.repo)/$(jf "$r" subject.operation)" \
	"git/session.repo/acme/api/fetch" "git.allow at point git names the repository and the operation"
req "http://git.airlock.test//acme//api/info/refs?service=git-receive-pack"
is "$CODE" 200 "push of the session repository: duplicate slashes normalise"
like "$(cat "$T/b")" "path=/acme/api.git/info/refs\\?service=git-receive-pack " \
	"//acme//api is sent as /acme/api.git"
req "http://git.airlock.test/acme/lib/git-upload-pack" --data-binary x -H "Content-Type: application/x-git-upload-pack-request"
is "$CODE" 200 "fetch of a fetch-only sibling (acme/lib) is allowed"
is "$(jf "$(last_receipt git.allow)" rule)" "git.repos" "its git.allow names git.repos"
is "$(auth_seen)" 0 "over plain http no request carries a credential"
req "http://git.airlock.test/acme/api.git/info/refs?service=git-upload-pack" -H "Authorization: Basic eDp5"
is "$(auth_seen)" 1 "(an Authorization of the agent's own over plain http is forwarded: it is not ours)"

# --- refused: scope, operation, spellings -----------------------------------------------

before=$(net_count srv=http event=request)
req "http://git.airlock.test/acme/lib/git-receive-pack" --data-binary x
is "$(verdict)" "403 git.operation git.block/block/git.operation" "push to a fetch-only sibling: 403 git.operation"
r=$(last_receipt git.block)
is "$(jf "$r" point)/$(jf "$r" subject.repo)/$(jf "$r" subject.operation)" "git/acme/lib/push" \
	"git.block names the repository and the operation"
req "http://git.airlock.test/acme/lib/info/refs?service=git-receive-pack"
is "$(verdict)" "403 git.operation git.block/block/git.operation" "its receive-pack advertisement too"
req "http://git.airlock.test/acme/secret.git/info/refs?service=git-upload-pack"
is "$(verdict)" "403 git.repo git.block/block/git.repo" "clone of an unlisted repository: 403 git.repo"
req "http://git.airlock.test/other/api.git/info/refs?service=git-upload-pack"
is "$(verdict)" "403 git.repo git.block/block/git.repo" "same name under another owner: 403 git.repo"
for p in "/acme/api.git/../other/info/refs" "/acme/api/../../other/info/refs" \
	"/acme/%2e%2e/other/info/refs" "/acme%2Fapi/info/refs" "/acme/api%2finfo/refs" \
	"/acme/./api/info/refs" "/acme/api.git.git/info/refs" "/acme/%61pi/info/refs"; do
	req "http://git.airlock.test$p?service=git-upload-pack" --path-as-is
	is "$(jf "$(receipt_of "$(hdr X-Airlock-Receipt)")" type)/$CODE" "git.block/403" "refused: $p"
done
raw 'GET http://git.airlock.test/acme\\api/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.airlock.test\r\n\r\n'
ok "$([ "$CODE" = 403 ] || [ "$CODE" = 400 ]; echo $?)" "refused: a backslash in the path ($CODE)"
req "http://git.airlock.test/acme/api"
is "$(verdict)" "403 git.endpoint git.block/block/git.endpoint" "the web page of the repository: not a git endpoint"
req "http://git.airlock.test/acme/api.git/HEAD"
is "$(verdict)" "403 git.endpoint git.block/block/git.endpoint" "dumb HTTP: refused"
n=$(count_receipts git.allow)
req "http://git.airlock.test/acme/api.git/info/lfs/objects/batch" \
	-H "Content-Type: application/vnd.git-lfs+json" --data-binary '{"operation":"upload","objects":[]}'
is "$CODE" 200 "LFS batch upload on the session repository: allowed (body read first)"
# an allow is recorded without the answer waiting for its line
wait_receipts git.allow $((n + 1))
is "$(jf "$(last_receipt git.allow)" subject.operation)" "lfs-upload" "recorded as lfs-upload"
req "http://git.airlock.test/acme/lib/info/lfs/objects/batch" \
	-H "Content-Type: application/vnd.git-lfs+json" --data-binary '{"operation":"upload","objects":[]}'
is "$(verdict)" "403 git.operation git.block/block/git.operation" "LFS upload to a fetch-only sibling: 403"
req "http://git.airlock.test/acme/lib/info/lfs/objects/batch" \
	-H "Content-Type: application/vnd.git-lfs+json" --data-binary '{"operation":"download","objects":[]}'
is "$CODE" 200 "LFS download from it: allowed"
after=$(net_count srv=http event=request)
is "$after" "$((before + 2))" "of all the refused requests nothing reached the server (only the two LFS batches allowed did)"
is "$(n_path /acme/lib/git-receive-pack)" 0 "the sibling's receive-pack was never requested upstream"
is "$(net_count srv=http event=request 'line~secret')" 0 "nor the unlisted repository"

# --- the API binding ---------------------------------------------------------------------

n=$(count_receipts git.allow)
req "http://api.airlock.test/repos/acme/api/pulls"
is "$CODE" 200 "API: GET under /repos/ of the session repository is allowed"
wait_receipts git.allow $((n + 1))
is "$(jf "$(last_receipt git.allow)" subject.operation)" "fetch" "recorded as fetch"
req "http://api.airlock.test/repos/acme/lib/issues" --data-binary '{}'
is "$(verdict)" "403 git.operation git.block/block/git.operation" "API: POST on a fetch-only sibling: 403"
req "http://api.airlock.test/repos/acme/secret/contents/x"
is "$(verdict)" "403 git.repo git.block/block/git.repo" "API: an unlisted repository: 403"
req "http://api.airlock.test/user/repos"
is "$(verdict)" "403 git.api git.block/block/git.api" "API: a path outside the binding: 403 git.api"
req "http://api.airlock.test/graphql" --data-binary '{}'
is "$CODE" 200 "API: a git.api_allow prefix is allowed"
req "http://api.airlock.test/graphqlx"
is "$(verdict)" "403 git.api git.block/block/git.api" "API: a prefix covers whole segments only"

# --- SSH --------------------------------------------------------------------------------------

raw "CONNECT git.airlock.test:22 HTTP/1.1\r\nHost: git.airlock.test:22\r\n\r\n" --idle 1
is "$(verdict)" "403 git.ssh git.block/block/git.ssh" "git.ssh false: port 22 refused, even to a git host"
is "$(net_count listen=198.18.0.10:22)" 0 "and nothing reached port 22"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

start enforce true
raw "CONNECT git.airlock.test:22 HTTP/1.1\r\nHost: git.airlock.test:22\r\n\r\nSSH-2.0-test\r\n" --idle 1
is "$CODE" 200 "git.ssh true: port 22 to a git host is allowed"
is "$(jf "$(last_receipt egress.allow)" rule)" "git.ssh" "and recorded (egress.allow, rule git.ssh)"
raw "CONNECT other.airlock.test:22 HTTP/1.1\r\nHost: other.airlock.test:22\r\n\r\n" --idle 1
is "$(verdict)" "403 git.ssh git.block/block/git.ssh" "git.ssh true: port 22 elsewhere is refused"
is "$(net_count listen=198.18.0.13:22)" 0 "and nothing reached it"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

# --- shadow mode ---------------------------------------------------------------------------

start shadow false
before=$(net_count srv=http event=request)
req "http://git.airlock.test/acme/secret.git/info/refs?service=git-upload-pack"
is "$CODE" 200 "shadow: a clone of an unlisted repository goes on"
r=$(last_receipt git.block)
is "$(jf "$r" decision)/$(jf "$r" rule)/$(jf "$r" subject.repo)" "would_block/git.repo/acme/secret" \
	"and is recorded as a would_block git.block"
is "$(auth_seen)" 1 "and carries no credential (still only the agent's own, above)"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

# --- the standalone proxy intercepts git hosts and injects the credential ------------------

policy enforce false
EV="$T/events-tls.jsonl"
STREAMS="$STREAMS $EV"
pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env"
cat "$T/session-ca.pem" "$CA" > "$T/bundle.pem"
ph=$(sed -n 's/^GITHUB_TOKEN=//p' "$T/ph.env")
like "$ph" '^airlock-ph-gh-' "--placeholders: GITHUB_TOKEN holds the git credential's placeholder"
is "$(sed -n 's/^GH_TOKEN=//p' "$T/ph.env")" "$ph" "  and so does GH_TOKEN"
basic_tok="Basic $(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)"
n_auth() { # VALUE: requests that reached the TLS origin with that Authorization
	python3 - "$NETLOG" "$1" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("srv") == "tls" and e.get("event") == "request" and \
            any(k.lower() == "authorization" and v == sys.argv[2] for k, v in e.get("headers", [])):
        n += 1
print(n)
PY
}
req "https://git.airlock.test/Acme/Api/info/refs?service=git-upload-pack" --cacert "$T/bundle.pem"
is "$CODE" 200 "over intercepted TLS the session repository's info/refs is allowed"
is "$(n_auth "$basic_tok")" 1 "  and carries Basic x-access-token:TOKEN, injected by the proxy"
like "$(cat "$T/b")" "path=/acme/api.git/info/refs" "  at the normalised path"
req "https://git.airlock.test/acme/api.git/info/refs?service=git-upload-pack" --cacert "$T/bundle.pem" \
	-H "Authorization: Basic $(printf 'agent:guess' | base64 -w0)"
is "$(n_auth "$basic_tok")" 2 "the agent's own Authorization is replaced on an allowed SCM request"
req "https://git.airlock.test/acme/secret.git/info/refs?service=git-upload-pack" --cacert "$T/bundle.pem"
is "$(verdict)" "403 git.repo git.block/block/git.repo" "an unlisted repository over TLS: 403"
is "$(n_auth "$basic_tok")" 2 "  and no credential went anywhere"
req "https://api.airlock.test/repos/acme/api/pulls" --cacert "$T/bundle.pem" -H "Authorization: Bearer $ph"
is "$CODE/$(n_auth "Bearer $TOKEN")" "200/1" "API in scope: the placeholder becomes the token"
req "https://api.airlock.test/repos/acme/secret/pulls" --cacert "$T/bundle.pem" -H "Authorization: Bearer $ph"
is "$(verdict)/$(n_auth "Bearer $TOKEN")" "403 git.repo git.block/block/git.repo/1" "API out of scope: 403, nothing sent"
pl_stop_proxy
is "$?" 0 "the proxy stops cleanly (and no sanitizer spoke)"

for e in $STREAMS; do
	st=$("$AIRLOCK" verify "$e" >/dev/null 2>&1; echo $?)
	is "$st" 0 "the stream verifies: $(basename "$e")"
done
done_testing
