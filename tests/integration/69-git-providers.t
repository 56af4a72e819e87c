#!/bin/bash
# 69-git-providers.t - git.provider "gitlab" and "bitbucket" (SPEC 3.5,
# docs/GIT.md): `airlock run` with stock git and curl inside the sandbox,
# no credential inside, against a real `git http-backend` served at
# GitLab-shaped paths (nested groups) and Bitbucket-shaped ones, and
# stand-in REST APIs (tests/helpers/gitserver.py) that check the
# credential they receive and record every request. The session's project
# clones and pushes (the proxy injects oauth2:TOKEN / x-token-auth:TOKEN);
# a fetch-only sibling clones and is refused its push; every other
# spelling of another project -- a shorter or longer path, case, dots,
# encoded slashes, double encoding, numeric ids that the policy does not
# map, /-/ routes, GraphQL, admin endpoints -- is refused and never
# reaches the server. The API placeholder becomes the token only in
# scope (PRIVATE-TOKEN and Bearer on GitLab). With git.gitlab_mint the
# supervisor mints a project access token for the session's project
# with the group token it holds, the server sees only that token, and
# the token is revoked when the session ends.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.30:443   gitserver.py   gitlab.test (git and /api/)
#   198.18.0.31:443   gitserver.py   bitbucket.test (git)
#   198.18.0.32:443   gitserver.py   api.bitbucket.test (/2.0/)
#   127.0.0.1:5353    DNS (testnet.py)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gitlib.sh"

# nlog LOG KEY=VALUE|KEY~SUBSTRING...: how many log lines match all
nlog() { "$PY" - "$@" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    ok = True
    for a in sys.argv[2:]:
        if "~" in a:
            k, v = a.split("~", 1)
            ok = ok and v in str(e.get(k))
        else:
            k, v = a.split("=", 1)
            ok = ok and str(e.get(k)) == v
    n += ok
print(n)
PY
}

lo_addrs 198.18.0.30 198.18.0.31 198.18.0.32
cat > "$T/net.json" <<EOF
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 900,
 "dns": {"listen": ["127.0.0.1:5353"], "zone": {"gitlab.test": ["198.18.0.30"],
  "bitbucket.test": ["198.18.0.31"], "api.bitbucket.test": ["198.18.0.32"]}}}
EOF
"$PY" "$H/testnet.py" --config "$T/net.json" > "$T/net.out" 2>&1 &
PIDS="$PIDS $!"

rnd() { head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c "$1"; }
GLTOKEN="glpat-$(rnd 20)"
GLADMIN="glpat-group-$(rnd 24)"
BBTOKEN="ATCTT3x$(rnd 40)"

seed() { # ROOT PATH...
	root=$1
	shift
	for r in "$@"; do
		mkdir -p "$(dirname "$root/$r.git")"
		git init -q --bare -b main "$root/$r.git"
		rm -rf "$T/seed"
		git init -q -b main "$T/seed"
		echo "hello from $r" > "$T/seed/README"
		git -C "$T/seed" add README
		git -C "$T/seed" -c user.name=t -c user.email=t@test commit -qm init
		git -C "$T/seed" push -q "$root/$r.git" main
	done
}
seed "$T/gl" acme/platform/api acme/platform/lib acme/platform/secret acme/api
seed "$T/bb" ws/api ws/lib ws/secret

cat > "$T/gl.json" <<EOF
{"log": "$T/gl.log", "ready": "$T/gl.ready", "lifetime": 900,
 "listen": ["198.18.0.30:443"], "tls": {"dir": "$T/gl-tls", "names": ["gitlab.test"]},
 "root": "$T/gl", "tokens": ["$GLTOKEN"], "user": "oauth2", "api": "/api/",
 "mint": {"admin_token": "$GLADMIN", "projects": {"acme/platform/api": 123, "acme/platform/lib": 77}}}
EOF
cat > "$T/bb.json" <<EOF
{"log": "$T/bb.log", "ready": "$T/bb.ready", "lifetime": 900,
 "listen": ["198.18.0.31:443"], "tls": {"dir": "$T/bb-tls", "names": ["bitbucket.test"]},
 "root": "$T/bb", "tokens": ["$BBTOKEN"], "user": "x-token-auth"}
EOF
cat > "$T/bba.json" <<EOF
{"log": "$T/bba.log", "ready": "$T/bba.ready", "lifetime": 900,
 "listen": ["198.18.0.32:443"], "tls": {"dir": "$T/bba-tls", "names": ["api.bitbucket.test"]},
 "root": "$T/bb", "tokens": ["$BBTOKEN"], "user": "x-token-auth", "api": "/2.0/"}
EOF
for s in gl bb bba; do
	"$PY" "$H/gitserver.py" --config "$T/$s.json" > "$T/$s.out" 2>&1 &
	PIDS="$PIDS $!"
done
i=0
while { [ ! -f "$T/net.ready" ] || [ ! -f "$T/gl.ready" ] || [ ! -f "$T/bb.ready" ] ||
	[ ! -f "$T/bba.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/net.ready" ] && [ -f "$T/gl.ready" ] && [ -f "$T/bb.ready" ] && [ -f "$T/bba.ready" ] ||
	{ echo "Bail out! servers: $(cat "$T/net.out" "$T/gl.out" "$T/bb.out" "$T/bba.out")"; exit 1; }
mkdir -p "$T/keys"
cat "$T/gl-tls/ca.pem" "$T/bb-tls/ca.pem" "$T/bba-tls/ca.pem" > "$T/keys/upstream.pem"

# arun: airlock run under $T/keys/policy.json; the agent runs $1 (sh) in $T/ws.
arun() {
	rm -rf "$T/ws" && mkdir -p "$T/ws"
	rm -f "$T/ev.jsonl"
	( cd "$T/ws" && GL_TOKEN=$GLTOKEN BB_TOKEN=$BBTOKEN timeout 240 "$AIRLOCK" run \
		--policy "$T/keys/policy.json" --events "$T/ev.jsonl" -- sh -c "
cd \"\$0\"
export GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1
g() { git -c user.name=agent -c user.email=agent@test \"\$@\"; }
# c NAME ARGS...: curl, the status code in NAME.code
c() { n=\$1; shift; curl -sS --path-as-is -o \$n.out -w '%{http_code}' \"\$@\" > \$n.code 2> \$n.err; }
$1
exit 0" "$T/ws" > "$T/out" 2> "$T/err" )
	RC=$?
	cat "$T/err" >> "$T/all.err"
}
rcs() { for f in "$@"; do printf '%s ' "$(cat "$T/ws/$f.rc" 2>/dev/null || echo none)"; done; }
codes() { for f in "$@"; do printf '%s ' "$(cat "$T/ws/$f.code" 2>/dev/null || echo none)"; done; }
block_rule() { # PATH-SUBSTRING: the rule of the first git.block with that path
	grep '"type":"git.block"' "$T/ev.jsonl" | grep -F "\"path\":\"$1" | head -n 1 |
		{ read -r l; jf "${l:-{\}}" rule; }
}

# --- GitLab ----------------------------------------------------------------------------

glpolicy() { # CRED-JSON [SECRETS-JSON]
	glsecrets=${2:-'{"gl": {"from_env": "GL_TOKEN", "env": "GITLAB_TOKEN", "hosts": ["gitlab.test"]}}'}
	cat > "$T/keys/policy.json" <<EOF
{"version": 1, "mode": "enforce",
 "session": {"id": "sess-gl", "repo": "gitlab.test/acme/platform/api"},
 "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"],
            "upstream_ca": "$T/keys/upstream.pem"},
 "secrets": $glsecrets,
 "git": {"provider": "gitlab", "hosts": ["gitlab.test"], "api_hosts": ["gitlab.test"],
         "repos": {"acme/platform/lib": ["fetch"]},
         "project_ids": {"123": "acme/platform/api", "77": "acme/platform/lib"},
         $1}}
EOF
}
GLAPI=https://gitlab.test/api/v4/projects
GL_AGENT='
printf "%s" "$GITLAB_TOKEN" > ph
g clone -q https://gitlab.test/acme/platform/api.git api 2> clone.err; echo $? > clone.rc
echo change >> api/README
g -C api commit -qam change 2>/dev/null
g -C api push -q origin main 2> push.err; echo $? > push.rc
g clone -q https://gitlab.test/Acme/Platform/API upper 2> upper.err; echo $? > upper.rc
g clone -q https://gitlab.test/acme/platform/lib.git lib 2> lib.err; echo $? > lib.rc
echo change >> lib/README
g -C lib commit -qam change 2>/dev/null
g -C lib push -q origin main 2> libpush.err; echo $? > libpush.rc
g clone -q https://gitlab.test/acme/platform/secret.git secret 2> secret.err; echo $? > secret.rc
g clone -q https://gitlab.test/acme/api.git short 2> short.err; echo $? > short.rc
g clone -q https://gitlab.test/acme/platform/api/-/snippets/1.git snip 2> snip.err; echo $? > snip.rc
H1="PRIVATE-TOKEN: $GITLAB_TOKEN"
H2="Authorization: Bearer $GITLAB_TOKEN"
c a_in -H "$H1" '$GLAPI'/acme%2Fplatform%2Fapi/merge_requests
c a_id -H "$H2" '$GLAPI'/123/repository/tree
c a_lib -H "$H1" '$GLAPI'/77/repository/tree
c r_secret -H "$H1" '$GLAPI'/acme%2Fplatform%2Fsecret
c r_case -H "$H1" '$GLAPI'/ACME%2FPLATFORM%2FSECRET/repository/tree
c r_double -H "$H1" '$GLAPI'/acme%252Fplatform%252Fsecret
c r_dots -H "$H1" '$GLAPI'/acme%2Fplatform%2F..%2Fplatform%2Fsecret
c r_dotseg -H "$H1" '$GLAPI'/acme%2Fplatform%2Fapi/../../acme%2Fplatform%2Fsecret
c r_raw -H "$H1" '$GLAPI'/acme/platform/secret
c r_short -H "$H1" '$GLAPI'/acme%2Fapi
c r_unmapped -H "$H2" '$GLAPI'/999
c r_libpush -H "$H1" -X POST '$GLAPI'/77/merge_requests
c r_graphql -H "$H2" -X POST -d "{}" https://gitlab.test/api/v4/graphql
c r_graphql2 -H "$H2" -X POST -d "{}" https://gitlab.test/api/graphql
c r_tokens -H "$H1" -X POST '$GLAPI'/acme%2Fplatform%2Fapi/access_tokens
c r_vars -H "$H1" '$GLAPI'/123/variables
c r_members -H "$H1" -X POST '$GLAPI'/123/MEMBERS
c r_visibility -H "$H1" -X PUT '$GLAPI'/123
c r_web -H "$H1" https://gitlab.test/acme/platform/api/-/raw/main/README
c r_user -H "$H1" https://gitlab.test/api/v4/user
'
R_GL="r_secret r_case r_double r_dots r_dotseg r_raw r_short r_unmapped r_libpush r_graphql r_graphql2 r_tokens r_vars r_members r_visibility r_web r_user"

glpolicy '"credential": "gl"'
: > "$T/gl.log"
arun "$GL_AGENT"
is "$RC" 0 "[gitlab] the session ran: $(head -c 300 "$T/err")"
is "$(rcs clone push upper)" "0 0 0 " \
	"[gitlab] stock git clones and pushes GROUP/SUB/PROJECT with no credential inside, any case, .git optional: $(cat "$T/ws/clone.err" "$T/ws/push.err" 2>/dev/null | head -c 300)"
is "$(git --git-dir="$T/gl/acme/platform/api.git" log -1 --format=%an main)" "agent" "[gitlab] the push reached the project"
is "$(rcs lib)" "0 " "[gitlab] the fetch-only sibling clones"
like "$(rcs libpush)" '^(1|128) $' "[gitlab] its push is refused"
is "$(nlog "$T/gl.log" "path~lib.git/git-receive-pack")" 0 "[gitlab]   and the server never saw its receive-pack"
is "$(rcs secret short snip)" "128 128 128 " \
	"[gitlab] another project of the group, a shorter path with the same name, a /-/ snippet: none clones"
is "$(nlog "$T/gl.log" "path~secret") $(nlog "$T/gl.log" "path~/acme/api") $(nlog "$T/gl.log" "path~snippets")" \
	"0 0 0" "[gitlab]   and the server saw none of them"
is "$(nlog "$T/gl.log" "path~Acme") $(nlog "$T/gl.log" "path~platform/api/info") $(nlog "$T/gl.log" event=request authorised=False)" \
	"0 0 0" "[gitlab] the server read only the normal form (lowercase, .git) and every git request carried the token (Basic oauth2:TOKEN)"
is "$(codes a_in a_id a_lib)" "200 200 200 " \
	"[gitlab] API: PRIVATE-TOKEN and Bearer placeholders work on the project by encoded path and by mapped id, and on the sibling"
is "$(nlog "$T/gl.log" event=api auth=ok via=private-token) $(nlog "$T/gl.log" event=api auth=ok via=bearer)" \
	"2 1" "[gitlab]   the server received the real token in each header"
want=""
for n in $R_GL; do want="${want}403 "; done
is "$(codes $R_GL)" "$want" "[gitlab] refused: another project by path, case, double encoding, dots, raw slashes, a shorter path, an unmapped id, the sibling's write, GraphQL, access_tokens, variables, members, a visibility change, a /-/ route, /user"
is "$(nlog "$T/gl.log" event=api)" 3 "[gitlab]   the API server saw only the three requests in scope"
is "$(nlog "$T/gl.log" "path~secret") $(nlog "$T/gl.log" "path~999") $(nlog "$T/gl.log" "path~graphql") $(nlog "$T/gl.log" "path~access_tokens") $(nlog "$T/gl.log" "path~/-/")" \
	"0 0 0 0 0" "[gitlab]   nothing refused was forwarded"
is "$(block_rule /api/v4/projects/acme%252F) $(block_rule /api/v4/projects/999) $(block_rule /api/v4/graphql) $(block_rule /api/v4/projects/acme%2Fplatform%2Fapi/access_tokens)" \
	"git.path git.repo git.api git.api_admin" "[gitlab] git.block rules: double encoding git.path, unmapped id git.repo, GraphQL git.api, access_tokens git.api_admin"
r=$(grep '"type":"git.allow"' "$T/ev.jsonl" | head -n 1)
is "$(jf "$r" subject.provider) $(jf "$r" subject.repo)" "gitlab acme/platform/api" "[gitlab] git.allow carries the provider and the nested repository"
r=$(grep '"type":"git.block"' "$T/ev.jsonl" | grep '"repo":"acme/platform/secret"' | head -n 1)
is "$(jf "$r" decision rule subject.provider)" "block git.repo gitlab" "[gitlab] git.block carries the provider"
if grep -qF "$GLTOKEN" "$T/ws"/* "$T/out" "$T/ev.jsonl" 2>/dev/null; then ok 1 "[gitlab] no token in the agent's files or the receipts"; else ok 0 "[gitlab] no token in the agent's files or the receipts"; fi
is "$("$AIRLOCK" verify "$T/ev.jsonl" >/dev/null 2>&1; echo $?)" 0 "[gitlab] the stream verifies"

# --- GitLab: a project access token minted for the session -----------------------------

# gl_config JSON: rewrites gitlab.test's config with JSON merged in
gl_config() {
	"$PY" - "$T/gl.json" "$1" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])); c.update(json.loads(sys.argv[2]))
if "mint" in json.loads(sys.argv[2]):
    pass
json.dump(c, open(sys.argv[1] + ".tmp", "w")); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
PY
}
MINTCRED='"gitlab_mint": {"api": "https://gitlab.test", "token_env": "GL_ADMIN", "expires_minutes": 90,
                         "ca": "'"$T/gl-tls/ca.pem"'"}, "token_env": ["GITLAB_TOKEN"]'
MINT_AGENT='
printf "%s" "$GITLAB_TOKEN" > ph
env > env.out
g clone -q https://gitlab.test/acme/platform/api.git api 2> clone.err; echo $? > clone.rc
echo change2 >> api/README
g -C api commit -qam change2 2>/dev/null
g -C api push -q origin main 2> push.err; echo $? > push.rc
g clone -q https://gitlab.test/acme/platform/lib.git lib 2> lib.err; echo $? > lib.rc
c a_in -H "PRIVATE-TOKEN: $GITLAB_TOKEN" '$GLAPI'/acme%2Fplatform%2Fapi/merge_requests
c r_secret -H "PRIVATE-TOKEN: $GITLAB_TOKEN" '$GLAPI'/acme%2Fplatform%2Fsecret
'
# from now on gitlab.test accepts no static token: only what it mints
gl_config '{"tokens": []}'
glpolicy "$MINTCRED" '{}'
: > "$T/gl.log"
export GL_ADMIN="$GLADMIN"
arun "$MINT_AGENT"
is "$RC" 0 "[gitlab mint] the session ran: $(head -c 300 "$T/err")"
m=$(grep '"event": "mint"' "$T/gl.log" | head -n 1)
is "$(grep -c '"event": "mint"' "$T/gl.log") $(jf "$m" admin project scopes access_level status)" \
	'1 true acme/platform/api ["read_repository","write_repository","api"] 30 201' \
	"[gitlab mint] one mint, with the group token, for the session's project alone: read/write_repository, api (an API host is bound), Developer"
like "$(jf "$m" expires_at)" '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]$' "[gitlab mint]   expiring at a date ($(jf "$m" expires_at))"
is "$(rcs clone push)" "0 0 " "[gitlab mint] stock git clones and pushes with the minted token: $(cat "$T/ws/clone.err" "$T/ws/push.err" 2>/dev/null | head -c 300)"
is "$(nlog "$T/gl.log" event=request authorised=True "path~platform/api.git")" \
	"$(nlog "$T/gl.log" event=request "path~platform/api.git")" "[gitlab mint]   every request of the project carried the minted token"
is "$(rcs lib)$(nlog "$T/gl.log" event=request authorised=False "path~platform/lib.git")" "128 1" \
	"[gitlab mint] the sibling: the proxy allows its fetch, GitLab refuses the project token (401): the token is the project's only"
is "$(codes a_in r_secret)" "200 403 " "[gitlab mint] API: the placeholder becomes the minted token in scope, elsewhere refused"
is "$(nlog "$T/gl.log" event=api auth=ok via=private-token)" 1 "[gitlab mint]   the API server received the minted token"
r=$(grep '"event": "revoke"' "$T/gl.log" | head -n 1)
is "$(grep -c '"event": "revoke"' "$T/gl.log") $(jf "$r" admin project token_id status)" \
	"1 true acme/platform/api $(jf "$m" token_id) 204" "[gitlab mint] the token was revoked at the session's end, with the group token"
t1=$(grep '"type":"git.token"' "$T/ev.jsonl" | head -n 1)
t2=$(grep '"type":"git.token"' "$T/ev.jsonl" | sed -n 2p)
is "$(jf "$t1" decision rule subject.project subject.access_level subject.token_id)" \
	"allow git.gitlab_mint acme/platform/api 30 $(jf "$m" token_id)" "[gitlab mint] git.token records the mint"
is "$(jf "$t2" decision reason)" "allow project access token revoked at the session's end" "[gitlab mint] and the revocation"
is "$(grep -c '"type":"session.end"' "$T/ev.jsonl") $(tail -n 1 "$T/ev.jsonl" | grep -c '"type":"session.end"')" "1 1" "[gitlab mint]   before session.end"
like "$(cat "$T/ws/ph")" '^glpat-' "[gitlab mint] the agent holds a placeholder shaped like a GitLab token"
if grep -qF "$GLADMIN" "$T/ws"/* "$T/out" "$T/err" "$T/ev.jsonl" 2>/dev/null; then ok 1 "[gitlab mint] the group token is nowhere the agent or the receipts can read"; else ok 0 "[gitlab mint] the group token is nowhere the agent or the receipts can read"; fi
is "$("$AIRLOCK" verify "$T/ev.jsonl" >/dev/null 2>&1; echo $?)" 0 "[gitlab mint] the stream verifies"

# mints that refuse the session
gl_config '{"mint": {"admin_token": "'"$GLADMIN"'", "projects": {"acme/platform/api": 123}, "extra_scopes": ["sudo"]}}'
arun 'echo ran > ran'
is "$RC $(head -n 1 "$T/ev.jsonl" | { read -r l; jf "$l" type rule; })" "125 session.refused git.gitlab_mint" \
	"[gitlab mint] a grant of a scope not asked (sudo) refuses the session"
like "$(cat "$T/err")" 'granted more than asked: scope "sudo"' "[gitlab mint]   saying why"
gl_config '{"mint": {"admin_token": "'"$GLADMIN"'", "projects": {"acme/platform/api": 123}, "access_level": 40}}'
arun 'echo ran > ran'
is "$RC" 125 "[gitlab mint] a higher role (Maintainer) refuses the session"
gl_config '{"mint": {"admin_token": "wrong", "projects": {"acme/platform/api": 123}}}'
arun 'echo ran > ran'
like "$RC $(cat "$T/err")" '^125 .*HTTP 401' "[gitlab mint] a group token GitLab refuses: 125, HTTP 401"
gl_config '{"mint": {"admin_token": "'"$GLADMIN"'", "projects": {"acme/platform/api": 123}}}'
unset GL_ADMIN
arun 'echo ran > ran'
like "$RC $(cat "$T/err")" '^125 .*GL_ADMIN is not set' "[gitlab mint] no group token in the supervisor's environment: 125"
is "$(ls "$T/ws/ran" 2>/dev/null | wc -l)" 0 "[gitlab mint]   the agent never ran"
gl_config '{"tokens": ["'"$GLTOKEN"'"]}'

# --- Bitbucket --------------------------------------------------------------------------

cat > "$T/keys/policy.json" <<EOF
{"version": 1, "mode": "enforce",
 "session": {"id": "sess-bb", "repo": "bitbucket.test/ws/api"},
 "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"],
            "upstream_ca": "$T/keys/upstream.pem"},
 "secrets": {"bb": {"from_env": "BB_TOKEN", "env": "BITBUCKET_TOKEN", "hosts": ["bitbucket.test"]}},
 "git": {"provider": "bitbucket", "hosts": ["bitbucket.test"], "api_hosts": ["api.bitbucket.test"],
         "repos": {"ws/lib": ["fetch"]}, "credential": "bb"}}
EOF
BBAPI=https://api.bitbucket.test/2.0/repositories
BB_AGENT='
g clone -q https://bitbucket.test/ws/api.git api 2> clone.err; echo $? > clone.rc
echo change >> api/README
g -C api commit -qam change 2>/dev/null
g -C api push -q origin main 2> push.err; echo $? > push.rc
g clone -q https://bitbucket.test/ws/lib.git lib 2> lib.err; echo $? > lib.rc
echo change >> lib/README
g -C lib commit -qam change 2>/dev/null
g -C lib push -q origin main 2> libpush.err; echo $? > libpush.rc
g clone -q https://bitbucket.test/ws/secret.git secret 2> secret.err; echo $? > secret.rc
g clone -q https://bitbucket.test/ws/sub/api.git nested 2> nested.err; echo $? > nested.rc
H="Authorization: Bearer $BITBUCKET_TOKEN"
c a_in -H "$H" '$BBAPI'/ws/api/pullrequests
c a_case -H "$H" '$BBAPI'/WS/Api/src
c a_lib -u "x-token-auth:$BITBUCKET_TOKEN" '$BBAPI'/ws/lib/src
c r_secret -H "$H" '$BBAPI'/ws/secret
c r_upper -H "$H" '$BBAPI'/WS/SECRET/src
c r_uuid -H "$H" '$BBAPI'/%7Bws-uuid%7D/api
c r_enc -H "$H" '$BBAPI'/ws/api%2F..%2Fsecret
c r_dots -H "$H" '$BBAPI'/ws/api/../secret
c r_keys -H "$H" -X POST '$BBAPI'/ws/api/deploy-keys
c r_hooks -H "$H" '$BBAPI'/ws/api/hooks
c r_perms -H "$H" -X PUT '$BBAPI'/ws/api/permissions-config/users/x
c r_vars -H "$H" '$BBAPI'/ws/api/pipelines_config/variables
c r_libpush -H "$H" -X POST '$BBAPI'/ws/lib/pullrequests
c r_user -H "$H" https://api.bitbucket.test/2.0/user
'
R_BB="r_secret r_upper r_uuid r_enc r_dots r_keys r_hooks r_perms r_vars r_libpush r_user"
arun "$BB_AGENT"
is "$RC" 0 "[bitbucket] the session ran: $(head -c 300 "$T/err")"
is "$(rcs clone push lib)" "0 0 0 " \
	"[bitbucket] WORKSPACE/REPO clones and pushes, the sibling clones: $(cat "$T/ws/clone.err" "$T/ws/push.err" 2>/dev/null | head -c 300)"
is "$(git --git-dir="$T/bb/ws/api.git" log -1 --format=%an main)" "agent" "[bitbucket] the push reached the repository"
like "$(rcs libpush secret nested)" '^(1|128) 128 128 $' "[bitbucket] the sibling's push, another repository and a nested path are refused"
is "$(nlog "$T/bb.log" "path~secret") $(nlog "$T/bb.log" "path~sub") $(nlog "$T/bb.log" "path~lib.git/git-receive-pack") $(nlog "$T/bb.log" event=request authorised=False)" \
	"0 0 0 0" "[bitbucket]   the server saw none of them, and every request it saw carried x-token-auth:TOKEN"
is "$(codes a_in a_case a_lib)" "200 200 200 " "[bitbucket] API: Bearer and Basic placeholders work in scope"
want=""
for n in $R_BB; do want="${want}403 "; done
is "$(codes $R_BB)" "$want" "[bitbucket] refused: another repository, case, a UUID, an encoded slash, dots, deploy-keys, hooks, permissions-config, pipelines variables, the sibling's write, /user"
is "$(nlog "$T/bba.log" event=api) $(nlog "$T/bba.log" event=api auth=ok)" "3 3" "[bitbucket]   the API server saw only the three in scope, each with the real token"
r=$(grep '"type":"git.block"' "$T/ev.jsonl" | grep -F '"path":"/2.0/repositories/ws/api/deploy-keys"' | head -n 1)
is "$(jf "$r" rule subject.provider)" "git.api_admin bitbucket" "[bitbucket] deploy-keys: git.api_admin, provider bitbucket"
if grep -qF "$BBTOKEN" "$T/ws"/* "$T/out" "$T/ev.jsonl" 2>/dev/null; then ok 1 "[bitbucket] no token in the agent's files or the receipts"; else ok 0 "[bitbucket] no token in the agent's files or the receipts"; fi

is "$(grep -c 'Sanitizer\|runtime error:' "$T/all.err")" 0 "no sanitizer report in any session (SAN=1)"

done_testing
