#!/bin/bash
# 67-git-mint.t - `airlock run` with git.github_app: the supervisor mints
# a down-scoped installation token before the session starts (the key
# holder signs the JWT; the supervisor, outside the sandbox and the proxy,
# makes the request), records it as git.token, gives the agent only a
# placeholder (GITHUB_TOKEN, GH_TOKEN), and refuses the session (125,
# session.refused) when the mint fails or grants more than it asked.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.20:443   github_api.py        api.git.test
#   127.0.0.1:5353    DNS (testnet.py)
. "$(dirname "$0")/lib.sh"

if [ "${AIRLOCK_TEST_NETNS:-}" != 1 ] || [ "$(ip -o link show | wc -l)" -ne 1 ]; then
	echo "Bail out! run through tests/netns-exec (make check): this test adds addresses to lo"
	exit 1
fi
H=$AIRLOCK_SRC/tests/helpers
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

PIDS=""
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

jf() {
	"$PY" - "$@" <<'PY'
import json, sys
out = []
for path in sys.argv[2:]:
    try:
        v = json.loads(sys.argv[1])
        for k in path.split("."):
            v = v[int(k)] if isinstance(v, list) else v[k]
        out.append(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
    except (ValueError, KeyError, IndexError, TypeError):
        out.append("")
print(" ".join(out))
PY
}

ip addr add 198.18.0.20/32 dev lo || { echo "Bail out! ip addr add"; exit 1; }
cat > "$T/net.json" <<EOF2
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"], "zone": {"api.git.test": ["198.18.0.20"]}}}
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
i=0
while { [ ! -f "$T/net.ready" ] || [ ! -f "$T/api.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/net.ready" ] && [ -f "$T/api.ready" ] || { echo "Bail out! servers: $(cat "$T/net.out" "$T/api.out")"; exit 1; }

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

done_testing
