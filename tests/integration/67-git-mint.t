#!/bin/bash
# 67-git-mint.t - `airlock run` with git.github_app: the supervisor mints
# a down-scoped installation token before the session starts (the key
# holder signs the JWT; the supervisor, outside the sandbox and the proxy,
# makes the request), records it as git.token, gives the agent only a
# placeholder (GITHUB_TOKEN, GH_TOKEN), and refuses the session (125,
# session.refused) when the mint fails or grants more than it asked. Then
# stock git inside the sandbox, with no credential of its own, clones,
# fetches and pushes the session repository through interception (the
# proxy injects the token), fetches a fetch-only sibling, and is refused a
# push to that sibling and a clone of an unlisted repository, which the
# git server never sees; a credential helper inside has nothing to give;
# the same with a static git.credential; the API placeholder is
# substituted only on paths in scope.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.20:443   github_api.py        api.git.test
#   198.18.0.21:443   gitserver.py         git.test (real git http-backend)
#   127.0.0.1:5353    DNS (testnet.py)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gitlib.sh"

lo_addrs 198.18.0.20 198.18.0.21
cat > "$T/net.json" <<EOF2
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"], "zone": {"api.git.test": ["198.18.0.20"], "git.test": ["198.18.0.21"]}}}
EOF2
"$PY" "$H/testnet.py" --config "$T/net.json" > "$T/net.out" 2>&1 &
PIDS="$PIDS $!"
mkdir -p "$T/keys" "$T/ws"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/keys/app.pem" 2>/dev/null
chmod 600 "$T/keys/app.pem"
openssl pkey -in "$T/keys/app.pem" -pubout -out "$T/keys/app.pub.pem"
TOKEN="ghs_$(head -c 600 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 160)"
api_config() {
	"$PY" - "$T/api.json" "$T" "$TOKEN" "$1" <<'PY'
import json, os, sys
path, t, token, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
cfg = {"log": t + "/api.log", "ready": t + "/api.ready", "lifetime": 600,
       "listen": ["198.18.0.20:443"],
       "tls": {"dir": t + "/api-tls", "names": ["api.git.test"]},
       "apps": {"12345": {"public_key": t + "/keys/app.pub.pem", "installation_id": 4242}},
       "mode": "exact", "token": token}
cfg.update(extra)
with open(path + ".tmp", "w") as f:
    json.dump(cfg, f)
os.rename(path + ".tmp", path)
PY
}
api_config '{}'
"$PY" "$H/github_api.py" --config "$T/api.json" > "$T/api.out" 2>&1 &
PIDS="$PIDS $!"
STATIC="glpat-static-$(head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 40)"
cat > "$T/git.json" <<EOF2
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 600,
 "listen": ["198.18.0.21:443"], "tls": {"dir": "$T/git-tls", "names": ["git.test"]},
 "root": "$T/repos", "tokens": ["$TOKEN", "$STATIC"]}
EOF2
mkdir -p "$T/repos/acme"
for r in api lib secret; do
	git init -q --bare -b main "$T/repos/acme/$r.git"
	git init -q -b main "$T/seed-$r"
	echo "hello from acme/$r" > "$T/seed-$r/README"
	git -C "$T/seed-$r" add README
	git -C "$T/seed-$r" -c user.name=t -c user.email=t@test commit -qm init
	git -C "$T/seed-$r" push -q "$T/repos/acme/$r.git" main
done
"$PY" "$H/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PIDS="$PIDS $!"
i=0
while { [ ! -f "$T/net.ready" ] || [ ! -f "$T/api.ready" ] || [ ! -f "$T/git.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/net.ready" ] && [ -f "$T/api.ready" ] && [ -f "$T/git.ready" ] ||
	{ echo "Bail out! servers: $(cat "$T/net.out" "$T/api.out" "$T/git.out")"; exit 1; }

policy() { # REPOS-JSON
	cat > "$T/keys/policy.json" <<EOF2
{"version": 1, "mode": "enforce",
 "session": {"id": "sess-mint", "repo": "git.test/acme/api"},
 "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"]},
 "git": {"hosts": ["git.test"], "api_hosts": ["api.git.test"], "repos": $1,
         "github_app": {"app_id": 12345, "installation_id": 4242,
                        "private_key_file": "$T/keys/app.pem",
                        "api": "https://api.git.test", "ca": "$T/api-tls/ca.pem"}}}
EOF2
}
# run: airlock run under the policy; the agent prints its token variables.
run() {
	rm -f "$T/ev.jsonl"
	( cd "$T/ws" && GITHUB_TOKEN=ghp_callers_own timeout 120 "$AIRLOCK" run --policy "$T/keys/policy.json" \
		--events "$T/ev.jsonl" -- sh -c 'echo "GITHUB_TOKEN=$GITHUB_TOKEN"; echo "GH_TOKEN=$GH_TOKEN"' \
		> "$T/out" 2> "$T/err" )
	RC=$?
}
receipt() { grep "\"type\":\"$1\"" "$T/ev.jsonl" | tail -n 1; }
mints() { grep -c '"event": "mint"' "$T/api.log" 2>/dev/null || echo 0; }
last_mint() { grep '"event": "mint"' "$T/api.log" | tail -n 1; }

# --- a session with a minted token --------------------------------------------------

policy '{"acme/lib": ["fetch"], "acme/tools": ["fetch", "push"], "other/x": ["fetch"]}'
run
is "$RC" 0 "the session starts with a minted token and the agent runs: $(head -c 300 "$T/err")"
M=$(last_mint)
is "$(jf "$M" jwt_ok)" "true" "the stand-in API verified the JWT the key holder signed"
is "$(jf "$M" repositories)" '["api","lib","tools"]' \
	"the mint asks for exactly the session repository and the owner's siblings, bare"
is "$(jf "$M" permissions)" '{"contents":"write","metadata":"read"}' \
	"and contents write (acme/tools may be pushed), metadata read, nothing more"
r=$(receipt git.token)
is "$(jf "$r" decision point rule)" "allow git git.github_app" "git.token is recorded (allow, point git)"
is "$(jf "$r" subject.repositories subject.permissions)" \
	'["api","lib","tools"] {"contents":"write","metadata":"read"}' "with the repositories and permissions granted"
like "$(jf "$r" subject.expires_at)" '^20[0-9][0-9]-' "and the expiry"
seq_start=$(jf "$(receipt session.start)" seq)
is "$seq_start" 0 "session.start comes first"
if grep -qF "$TOKEN" "$T/ev.jsonl" "$T/out" "$T/err"; then ok 1 "the token is in no receipt, nor in the agent's output"; else ok 0 "the token is in no receipt, nor in the agent's output"; fi
ph=$(sed -n 's/^GITHUB_TOKEN=//p' "$T/out")
like "$ph" '^ghs_[A-Za-z0-9]{32,}$' "the agent's GITHUB_TOKEN is a placeholder shaped like the token"
is "$(sed -n 's/^GH_TOKEN=//p' "$T/out")" "$ph" "GH_TOKEN holds the same placeholder"
ok "$([ "$ph" != "$TOKEN" ] && [ "$ph" != ghp_callers_own ]; echo $?)" "neither the token nor the caller's own GITHUB_TOKEN"
is "$("$AIRLOCK" verify "$T/ev.jsonl" >/dev/null 2>&1; echo $?)" 0 "the stream verifies"

# --- the processes: the App's private key in the key holder alone; the mint's own -------
# The key holder loads the App key and signs the JWT; the mint process
# (airlock-mint) is handed the JWT and the scope, makes the request and
# parses the answer; the supervisor checks what it says back. A scan of
# every process of a running session (mem_count, key_forms in lib.sh)
# finds the key's private exponent (either byte order) or its file's text
# in the key holder alone. The mint process: not dumpable, its own seccomp
# filter, no capabilities; no secret value in its memory (it was forked
# before they were read) and, once it has answered, no copy of the token
# it minted (it wipes its buffers: the token is there only while a mint
# runs). The supervisor holds both (the controls: the scan finds them
# where they are).
key_forms "$T/keys/app.pem" "$T/app-forms"
SCAN_SECRET="sk-scan-$(head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 40)"
printf '%s' "$SCAN_SECRET" > "$T/secret.raw"
printf '%s' "$TOKEN" > "$T/token.raw"
"$PY" - "$T/keys/policy.json" "$T/keys/policy-scan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["secrets"] = {"scan": {"from_env": "SCAN_SECRET", "hosts": ["api.git.test"]}}
json.dump(p, open(sys.argv[2], "w"))
PY
rm -f "$T/ws/ready" "$T/ws/go"
( cd "$T/ws" && SCAN_SECRET=$SCAN_SECRET exec timeout 400 "$AIRLOCK" run --policy "$T/keys/policy-scan.json" \
	--events "$T/ev-scan.jsonl" -- sh -c 'touch ready; i=0
while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done' > /dev/null 2>&1 ) &
spid=$!
i=0
while [ ! -e "$T/ws/ready" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
ok "$([ -e "$T/ws/ready" ]; echo $?)" "a session with a minted token runs, for the scan"
sup=$(pgrep -P "$spid" -x airlock)
held=""
for p in $sup $(pgrep -P "$sup"); do
	n=$(( $(mem_count "$p" "$T/app-forms.be" "$T/app-forms.le" "$T/app-forms.b64" 2>/dev/null | tr ' ' '+') + 0 ))
	[ "$n" = 0 ] || held="$held $(cat "/proc/$p/comm")"
done
is "$held" " airlock-keeper" "the App's private key is in the key holder's memory and no other process's"
mint=$(pgrep -P "$sup" -x airlock-mint)
like "$mint" '^[0-9]+$' "the supervisor has one mint process (airlock-mint)"
is "$(grep -E '^(Seccomp|NoNewPrivs|CapEff|CapPrm):' "/proc/$mint/status" | tr -s '\t ' ' ' | tr '\n' ';')" \
	"CapPrm: 0000000000000000;CapEff: 0000000000000000;NoNewPrivs: 1;Seccomp: 2;" \
	"the mint process: its own seccomp filter, no_new_privs, no capabilities"
# Not dumpable, seen from outside: a reader with no capability at all
# (root's uid, every set emptied) may open /proc/PID/environ of a process
# of its uid exactly when that process is dumpable (the control: a
# capless sleep, dumpable).
setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- sleep 60 &
ctl_pid=$!
i=0
while [ "$(cat "/proc/$ctl_pid/comm" 2>/dev/null)" != sleep ] && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
d_ctl=1 d_mint=1
setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- head -c 0 "/proc/$ctl_pid/environ" 2>/dev/null || d_ctl=0
setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- head -c 0 "/proc/$mint/environ" 2>/dev/null || d_mint=0
kill "$ctl_pid" 2>/dev/null
wait "$ctl_pid" 2>/dev/null
is "$d_ctl $d_mint" "1 0" "the mint process is not dumpable (a capless control process is)"
is "$(mem_count "$sup" "$T/secret.raw" "$T/token.raw" | awk '{print ($1 > 0) " " ($2 > 0)}')" "1 1" \
	"control: the supervisor's memory holds the secret value and the minted token"
# Under make SAN=1 the ASan runtime keeps its own copy of the
# supervisor's environment from before main (SCAN_SECRET=... among it),
# which every forked child inherits and nothing in airlock can wipe (see
# 77-publish.t): there, the copies that are that whole environment string
# are not counted; a copy the mint made of the value would still be.
printf 'SCAN_SECRET=%s' "$SCAN_SECRET" > "$T/secret.env"
read -r m_secret m_token m_env <<EOF
$(mem_count "$mint" "$T/secret.raw" "$T/token.raw" "$T/secret.env")
EOF
if ldd "$AIRLOCK" 2>/dev/null | grep -q libasan; then
	diag "sanitizer build: $m_env of the mint's $m_secret copies of the secret are ASan's environment buffer, not counted"
	m_secret=$((m_secret - m_env))
fi
is "$m_secret $m_token" "0 0" \
	"the mint process's memory holds neither the secret value nor, once it has answered, the token"
touch "$T/ws/go"
wait "$spid"
is "$?" 0 "and the session ends with the agent's status"
rm -f "$T/ws/ready" "$T/ws/go"

# --- mints that refuse the session -----------------------------------------------------

refused() { # DESC REGEX
	is "$RC" 125 "$1: the session is refused (125)"
	like "$(cat "$T/err")" "$2" "  one line says why"
	r=$(head -n 1 "$T/ev.jsonl")
	is "$(jf "$r" type decision rule)" "session.refused block git.github_app" "  session.refused, rule git.github_app"
	ok "$(grep -q '^GITHUB_TOKEN=' "$T/out"; [ $? -ne 0 ]; echo $?)" "  the agent never ran"
	if grep -qF "$TOKEN" "$T/ev.jsonl" "$T/out" "$T/err"; then ok 1 "  the token is not printed"; fi
}
for m in "over-repos|granted more than asked: repository \"everything\"" \
	 "over-perms|granted more than asked: permission \"administration\"" \
	 "over-level|metadata \"write\"" \
	 "all|repository_selection is not \"selected\" but \"all\"" \
	 "expired|expires in -"; do
	api_config "{\"mode\": \"${m%%|*}\"}"
	run
	refused "a mint that answers ${m%%|*}" "${m#*|}"
done
api_config '{"mode": "status", "status": 500, "message": "Server Error"}'
run
refused "a mint that fails (HTTP 500)" "HTTP 500: Server Error"
api_config '{}'
n0=$(mints)
cp "$T/keys/app.pem" "$T/keys/good.pem"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$T/keys/app.pem" 2>/dev/null
run
is "$RC" 125 "an App key too small to sign: the session is refused (125)"
like "$(cat "$T/err")" "git.github_app.private_key_file" "  naming the key file"
is "$(mints)" "$n0" "  and nothing was asked of the API"
cp "$T/keys/good.pem" "$T/keys/app.pem"

# --- stock git through interception ----------------------------------------------------

# gpolicy MODE CRED: the policy of the git sessions; CRED "app" (minted)
# or "static" (git.credential).
gpolicy() {
	if [ "$2" = app ]; then
		_cred="\"github_app\": {\"app_id\": 12345, \"installation_id\": 4242,
			\"private_key_file\": \"$T/keys/app.pem\",
			\"api\": \"https://api.git.test\", \"ca\": \"$T/api-tls/ca.pem\"}"
		secrets='{}'
	else
		_cred='"credential": "scm"'
		secrets='{"scm": {"from_env": "SCM_TOKEN", "env": "SCM_TOKEN", "hosts": ["git.test"]}}'
	fi
	cat > "$T/keys/policy.json" <<EOF2
{"version": 1, "mode": "$1",
 "session": {"id": "sess-git", "repo": "git.test/acme/api"},
 "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"],
            "upstream_ca": "$T/keys/upstream.pem"},
 "secrets": $secrets,
 "git": {"hosts": ["git.test"], "api_hosts": ["api.git.test"],
         "repos": {"acme/lib": ["fetch"]}, $_cred}}
EOF2
}
cat "$T/git-tls/ca.pem" "$T/api-tls/ca.pem" > "$T/keys/upstream.pem"

# grun MODE: the agent's git work, in $T/ws; each step's status in ws/*.rc
grun() {
	rm -rf "$T/ws" && mkdir -p "$T/ws"
	rm -f "$T/ev.jsonl"
	( cd "$T/ws" && SCM_TOKEN=$STATIC timeout 180 "$AIRLOCK" run --mode "$1" --policy "$T/keys/policy.json" \
		--events "$T/ev.jsonl" -- sh -c '
cd "$0"
export GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1
g() { git -c user.name=agent -c user.email=agent@test "$@"; }
printf "%s" "$GITHUB_TOKEN" > ph
g clone -q https://git.test/acme/api.git api 2> clone.err; echo $? > clone.rc
echo change >> api/README
g -C api commit -qam change 2>/dev/null
g -C api push -q origin main 2> push.err; echo $? > push.rc
g -C api fetch -q origin 2> fetch.err; echo $? > fetch.rc
g clone -q https://git.test/acme/lib.git lib 2> lib.err; echo $? > lib.rc
echo change >> lib/README
g -C lib commit -qam change 2>/dev/null
g -C lib push -q origin main 2> libpush.err; echo $? > libpush.rc
g clone -q https://git.test/acme/secret.git secret 2> secret.err; echo $? > secret.rc
g clone -q https://git.test/ACME/API.git/ upper 2> upper.err; echo $? > upper.rc
printf "protocol=https\nhost=git.test\npath=acme/lib.git\n\n" | git credential fill > cred.out 2> cred.err; echo $? > cred.rc
curl -sS -o api1.out -w "%{http_code}" -H "Authorization: Bearer $GITHUB_TOKEN" https://api.git.test/repos/acme/api/pulls > api1.code 2>&1
curl -sS -o api2.out -w "%{http_code}" -H "Authorization: Bearer $GITHUB_TOKEN" https://api.git.test/repos/acme/secret/pulls > api2.code 2>&1
curl -sS -o api3.out -w "%{http_code}" -H "Authorization: Bearer $GITHUB_TOKEN" https://api.git.test/user/repos > api3.code 2>&1
exit 0' "$T/ws" > "$T/out" 2> "$T/err" )
	RC=$?
}
rcs() { for f in "$@"; do printf '%s ' "$(cat "$T/ws/$f.rc" 2>/dev/null || echo none)"; done; }
glog() { "$PY" - "$T/git.log" "$@" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if all((v in str(e.get(k))) if op == "~" else (str(e.get(k)) == v)
           for k, op, v in ((a.split("~", 1)[0], "~", a.split("~", 1)[1]) if "~" in a else (a.partition("=")[0], "=", a.partition("=")[2]) for a in sys.argv[2:])):
        n += 1
print(n)
PY
}

for cred in app static; do
	api_config '{}'
	gpolicy enforce "$cred"
	: > "$T/git.log"
	grun enforce
	is "$RC" 0 "[$cred] the session ran: $(head -c 300 "$T/err")"
	is "$(grep -c 'Sanitizer\|runtime error:' "$T/err")" 0 "[$cred] no sanitizer report"
	is "$(rcs clone push fetch)" "0 0 0 " "[$cred] stock git clones, pushes and fetches the session repository with no credential inside: $(cat "$T/ws/clone.err" "$T/ws/push.err" 2>/dev/null | head -c 200)"
	is "$(git --git-dir="$T/repos/acme/api.git" log -1 --format=%an main)" "agent" "[$cred] the push reached the repository"
	is "$(rcs lib)" "0 " "[$cred] the fetch-only sibling clones"
	like "$(rcs libpush)" '^(1|128) $' "[$cred] its push is refused"
	is "$(glog path~lib.git/git-receive-pack)" 0 "[$cred]   and the server never saw its receive-pack"
	like "$(rcs secret)" '^128 $' "[$cred] an unlisted repository does not clone"
	is "$(glog path~secret)" 0 "[$cred]   and the server never saw a request for it"
	is "$(rcs upper)" "0 " "[$cred] /ACME/API.git/ is the session repository, normalised"
	is "$(glog path~ACME)" 0 "[$cred]   the server only ever read the normalised path"
	is "$(glog authorised=False)" 0 "[$cred] every request the server saw was authorised by the injected token (no 401 round trip)"
	if grep -qF "$TOKEN" "$T/ws"/* "$T/out" "$T/ev.jsonl" 2>/dev/null || grep -qF "$STATIC" "$T/ws"/* "$T/out" "$T/ev.jsonl" 2>/dev/null; then
		ok 1 "[$cred] no token in the agent's files or the receipts"
	else
		ok 0 "[$cred] no token in the agent's files or the receipts"
	fi
	if grep -qF "$TOKEN" "$T/ws/cred.out" || grep -qF "$STATIC" "$T/ws/cred.out" || grep -q '^password=' "$T/ws/cred.out"; then
		ok 1 "[$cred] a credential helper inside has nothing for a sibling"
	else
		ok 0 "[$cred] a credential helper inside has nothing for a sibling"
	fi
	n_allow=$(grep -c '"type":"git.allow"' "$T/ev.jsonl")
	like "$n_allow" '^[1-9][0-9]*$' "[$cred] git.allow receipts ($n_allow)"
	r=$(grep '"type":"git.block"' "$T/ev.jsonl" | grep '"repo":"acme/lib"' | head -n 1)
	is "$(jf "$r" decision rule subject.operation)" "block git.operation push" "[$cred] git.block for the sibling's push"
	r=$(grep '"type":"git.block"' "$T/ev.jsonl" | grep '"repo":"acme/secret"' | head -n 1)
	is "$(jf "$r" decision rule)" "block git.repo" "[$cred] git.block for the unlisted clone"
	is "$(cat "$T/ws/api1.code") $(cat "$T/ws/api2.code") $(cat "$T/ws/api3.code")" "200 403 403" \
		"[$cred] API: the placeholder works under /repos/ of the session repository only"
	want=$TOKEN
	[ "$cred" = static ] && want=$STATIC
	is "$(grep -c "\"authorization\": \"Bearer $want\"" "$T/api.log")" 1 \
		"[$cred]   the API received the real token once: on the path in scope"
	is "$(grep -c "\"authorization\": \"Bearer $(cat "$T/ws/ph" 2>/dev/null || echo none)" "$T/api.log")" 0 \
		"[$cred]   and never the placeholder (the refused paths were not forwarded)"
	: > "$T/api.log"
	is "$("$AIRLOCK" verify "$T/ev.jsonl" >/dev/null 2>&1; echo $?)" 0 "[$cred] the stream verifies"
done

# shadow: would-be blocks go on, recorded, without the credential
gpolicy shadow app
: > "$T/git.log"
grun shadow
is "$(rcs clone secret)" "0 128 " "shadow: the session repository clones; the unlisted one reaches the server without a credential (401)"
is "$(glog path~secret authorised=True)" 0 "shadow: the server never saw the unlisted repository with a credential"
r=$(grep '"type":"git.block"' "$T/ev.jsonl" | grep '"repo":"acme/secret"' | head -n 1)
is "$(jf "$r" decision rule)" "would_block git.repo" "shadow: recorded as would_block"

# --- refresh before expiry ----------------------------------------------------------------
#
# The first token lives 125 s; the test-only git_refresh_margin setting
# (123 s) has the proxy mint again 2 s after the first mint instead of half
# way (62 s). The API answers TOKEN first, then TOKEN2 for an hour. Once the clone is
# done and the refresh recorded, the git server accepts only TOKEN2: the
# agent's later fetch works only if the proxy injects the refreshed token.
TOKEN2="ghs_$(head -c 600 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 90)"
gpolicy enforce app
api_config '{"expires_in": [125, 3600], "tokens": ["'"$TOKEN"'", "'"$TOKEN2"'"]}'
"$PY" - "$T/git.json" "$TOKEN" "$TOKEN2" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])); c["tokens"] = [sys.argv[2], sys.argv[3]]
json.dump(c, open(sys.argv[1] + ".tmp", "w")); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
PY
# refresh_run: a session whose agent clones, waits for ws/go, then
# fetches, in the background (RUN_PID); the logs and the stream anew.
refresh_run() {
	: > "$T/git.log"
	: > "$T/api.log"
	rm -rf "$T/ws" && mkdir -p "$T/ws"
	rm -f "$T/ev.jsonl"
	( cd "$T/ws" && AIRLOCK_TEST_TIMEOUTS=git_refresh_margin=123000 exec timeout 240 "$AIRLOCK" run --policy "$T/keys/policy.json" --events "$T/ev.jsonl" -- sh -c '
cd "$0"
export GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1
git clone -q https://git.test/acme/api.git api 2> clone.err; echo $? > clone.rc
i=0; while [ ! -e go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
git -C api fetch -q origin 2> fetch.err; echo $? > fetch.rc' "$T/ws" > "$T/out" 2> "$T/err" ) &
	RUN_PID=$!
}
refresh_run
i=0
while { [ ! -e "$T/ws/clone.rc" ] || [ "$(grep -c '"type":"git.token"' "$T/ev.jsonl" 2>/dev/null)" -lt 2 ]; } &&
	[ $i -lt 1200 ]; do
	sleep 0.05
	i=$((i + 1))
done
# from now on the git server accepts only TOKEN2
"$PY" - "$T/git.json" "$TOKEN2" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])); c["tokens"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1] + ".tmp", "w")); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
PY
touch "$T/ws/go"
wait "$RUN_PID"
is "$(rcs clone fetch)" "0 0 " "refresh: the clone works, and the fetch after the refresh works with only the refreshed token accepted: $(cat "$T/ws/fetch.err" 2>/dev/null | head -c 200)"
is "$(mints)" 2 "refresh: the API was asked twice"
r=$(grep '"type":"git.token"' "$T/ev.jsonl" | tail -n 1)
is "$(grep -c '"type":"git.token"' "$T/ev.jsonl") $(jf "$r" decision reason)" \
	"2 allow installation token refreshed before expiry" "refresh: recorded as a second git.token"
if grep -qF "$TOKEN2" "$T/ev.jsonl" "$T/ws"/* 2>/dev/null; then ok 1 "refresh: the new token is in no receipt nor file of the agent"; else ok 0 "refresh: the new token is in no receipt nor file of the agent"; fi
api_config '{}'

# --- the mint process killed: later mints fail closed -----------------------------------
#
# The first token lives 125 s and the refresh comes 2 s after it was
# minted (as above). The stand-in answers the first mint of its new
# "tokens" list at once and holds the next one (mode "slow" from the
# list's second mint on), saying so in its log; the test kills the mint
# process then. That refresh fails closed (git.token block: the mint
# process has ended), and so does the next try GHAPP_RETRY_S (30 s)
# later, which says how the process ended and asks nothing of the API.
# The old token stays in force until it expires (the agent's fetch after
# the kill works) and the session ends with the agent's status and a
# stream that verifies.
TOKEN3="ghs_$(head -c 600 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 90)"
api_config '{"expires_in": [125, 3600], "tokens": ["'"$TOKEN3"'", "'"$TOKEN2"'"], "mode": "slow", "slow_from": 1, "delay": 100}'
"$PY" - "$T/git.json" "$TOKEN3" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1])); c["tokens"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1] + ".tmp", "w")); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
PY
refresh_run
wait_grep "$T/api.log" '"event": "mint-held"' 60
ok $? "the refresh's request reached the API, which holds it"
sup=$(pgrep -P "$RUN_PID" -x airlock)
mint=$(pgrep -P "$sup" -x airlock-mint)
like "$mint" '^[0-9]+$' "the mint process runs"
kill -KILL "$mint"
# git.token lines: the first mint, the refresh that failed, the next try
# (the one that names how the process ended)
wait_grep "$T/ev.jsonl" '"type":"git.token".*has ended \(killed by signal 9\)' 90
is "$(grep -c '"type":"git.token"' "$T/ev.jsonl")" 3 "the first mint, the refresh during which the mint process was killed, the next try: three git.token lines"
r=$(grep '"type":"git.token"' "$T/ev.jsonl" | sed -n 2p)
is "$(jf "$r" decision rule)" "block git.github_app" "the refresh fails closed: git.token block"
like "$(jf "$r" reason)" '^the token mint process \(airlock-mint\) has ended' "  saying the mint process has ended"
r=$(grep '"type":"git.token"' "$T/ev.jsonl" | sed -n 3p)
is "$(jf "$r" decision rule)" "block git.github_app" "the next try fails closed too"
like "$(jf "$r" reason)" '^the token mint process \(airlock-mint\) has ended \(killed by signal 9\)' \
	"  saying how it ended"
is "$(grep -c '"event": "mint-held"' "$T/api.log") $(grep -c '"event": "mint"' "$T/api.log")" "1 1" \
	"the API saw the first mint answered and the held refresh, and nothing after the kill"
if grep -qF "$TOKEN3" "$T/ev.jsonl" "$T/err" 2>/dev/null; then ok 1 "no token in the receipts or on stderr"; else ok 0 "no token in the receipts or on stderr"; fi
touch "$T/ws/go"
wait "$RUN_PID"
is "$?" 0 "the session goes on and ends with the agent's status"
is "$(rcs clone fetch)" "0 0 " "the agent's fetch after the kill works: the first token is in force until it expires: $(cat "$T/ws/fetch.err" 2>/dev/null | head -c 200)"
is "$("$AIRLOCK" verify "$T/ev.jsonl" >/dev/null 2>&1; echo $?)" 0 "the stream verifies"
api_config '{}'

done_testing
