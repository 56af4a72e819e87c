#!/bin/bash
# 84-agent-examples.t - the policies of examples/agents/ (Claude Code,
# Codex CLI, OpenCode) as a user takes them: each passes `airlock check`
# unchanged, and a session under each reaches stand-ins at the real host
# names (api.anthropic.com, api.openai.com, github.com), served inside this
# test's network namespace with names from its own DNS server: the API key
# is injected into the call to the provider and never seen inside, the
# call is metered at the example's own prices, the session's repository is
# cloned with a credential airlock adds, and a repository the example does
# not name is refused before it reaches the git host.
#
# The only change made to an example is what a test must change: the
# resolver, the address range and the CA of the stand-ins (egress.resolver,
# allow_ranges, upstream_ca).
#
#   198.18.0.40:443  api.anthropic.com  tests/helpers/llm_api.py
#   198.18.0.41:443  api.openai.com     tests/helpers/llm_api.py
#   198.18.0.42:443  github.com         tests/helpers/gitserver.py
#   127.0.0.1:5353   DNS for those names (tests/helpers/testnet.py)
. "$(dirname "$0")/lib.sh"

if [ "${AIRLOCK_TEST_NETNS:-}" != 1 ] || [ "$(ip -o link show | wc -l)" -ne 1 ]; then
	echo "Bail out! run through tests/netns-exec (make check): this test adds addresses to lo"
	exit 1
fi
HELPERS="$AIRLOCK_SRC/tests/helpers"
EXAMPLES="$AIRLOCK_SRC/examples/agents"
PIDS=""
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do
		timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

wait_file() { # FILE SECONDS
	i=0
	while [ $i -lt $(($2 * 20)) ]; do
		[ -e "$1" ] && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

for a in 198.18.0.40 198.18.0.41 198.18.0.42; do
	ip addr add "$a/32" dev lo || { echo "Bail out! ip addr add $a"; exit 1; }
done

ANTHROPIC_KEY="sk-ant-api03-T84$(openssl rand -hex 40)-realAA"
OPENAI_KEY="sk-proj-T84$(openssl rand -hex 40)"
GIT_TOKEN="ghs_T84$(openssl rand -hex 30)"

cat > "$T/net.json" <<EOF
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"],
         "zone": {"api.anthropic.com": ["198.18.0.40"], "api.openai.com": ["198.18.0.41"],
                  "github.com": ["198.18.0.42"]}}}
EOF
python3 "$HELPERS/testnet.py" --config "$T/net.json" > "$T/net.out" 2>&1 &
PIDS="$PIDS $!"

USAGE_IN=1000 USAGE_OUT=100
cat > "$T/llm.json" <<EOF
{"log": "$T/llm.log", "ready": "$T/llm.ready", "lifetime": 600,
 "listen": ["198.18.0.40:443", "198.18.0.41:443"],
 "tls": {"dir": "$T/llm-tls", "names": ["api.anthropic.com", "api.openai.com"]},
 "default": {"usage": {"input": $USAGE_IN, "output": $USAGE_OUT}}}
EOF
python3 "$HELPERS/llm_api.py" --config "$T/llm.json" > "$T/llm.out" 2>&1 &
PIDS="$PIDS $!"

mkrepo() { # OWNER/REPO
	seed=$T/seed/$1
	git init -q -b main "$seed" &&
		printf '# %s\n' "$1" > "$seed/README.md" &&
		git -C "$seed" add -A &&
		git -C "$seed" -c user.name=seed -c user.email=seed@t84.test commit -q -m init &&
		git clone -q --bare "$seed" "$T/repos/$1.git"
}
mkrepo acme/api && mkrepo acme/secret-infra || { echo "Bail out! git init"; exit 1; }
cat > "$T/git.json" <<EOF
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 600,
 "listen": ["198.18.0.42:443"],
 "tls": {"dir": "$T/git-tls", "names": ["github.com"]},
 "root": "$T/repos", "tokens": ["$GIT_TOKEN"]}
EOF
python3 "$HELPERS/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PIDS="$PIDS $!"

for f in net llm git; do
	wait_file "$T/$f.ready" 30 || { echo "Bail out! $f stand-in did not start: $(cat "$T/$f.out")"; exit 1; }
done
cat "$T/llm-tls/ca.pem" "$T/git-tls/ca.pem" > "$T/cas.pem"

# The calls an agent makes, as its CLI makes them (curl stands in for it).
cat > "$T/agent.sh" <<'EOF'
#!/bin/sh
cd "$1" || exit 1
env > env.txt
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
	curl -sS --max-time 30 -o anthropic.b -w '%{http_code}' https://api.anthropic.com/v1/messages \
		-H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' \
		-H 'content-type: application/json' \
		--data '{"model":"claude-sonnet-4-5-20250929","max_tokens":256,"messages":[{"role":"user","content":"hi"}]}' \
		> anthropic.code 2> anthropic.err
fi
if [ -n "${OPENAI_API_KEY:-}" ]; then
	curl -sS --max-time 30 -o openai.b -w '%{http_code}' https://api.openai.com/v1/responses \
		-H "Authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' \
		--data '{"model":"gpt-5-codex","max_output_tokens":256,"input":"hi"}' \
		> openai.code 2> openai.err
fi
git clone -q https://github.com/acme/api repo > clone.err 2>&1; echo $? > clone.rc
git clone -q https://github.com/acme/secret-infra unlisted > unlisted.err 2>&1; echo $? > unlisted.rc
exit 0
EOF
chmod 0755 "$T/agent.sh"

# the requests the LLM stand-in got for PATH, and how many carried KEY in
# HEADER (with PREFIX)
llm_seen() { # PATH HEADER VALUE
	python3 - "$T/llm.log" "$@" <<'PY'
import json, sys
log, path, header, value = sys.argv[1:]
n = real = 0
for l in open(log):
    e = json.loads(l)
    if e.get("event") == "request" and e.get("path") == path:
        n += 1
        h = e.get("headers")
        items = h.items() if isinstance(h, dict) else h
        real += any(k.lower() == header and v == value for k, v in items)
print(n, real)
PY
}
git_seen() { # REPO [authorised]: requests for REPO that reached the git host
	python3 - "$T/git.log" "$1" "${2:-}" <<'PY'
import json, sys
log, repo, auth = sys.argv[1:]
print(sum(1 for l in open(log) if json.loads(l).get("event") == "request"
          and repo in json.loads(l).get("path", "") and (not auth or json.loads(l).get("authorised"))))
PY
}
# the expected cost in nano-dollars of a call of MODEL, from the example's
# own prices (the longest pattern that matches, as docs/SPEND.md says)
want_nano() { # POLICY MODEL
	python3 - "$1" "$2" "$USAGE_IN" "$USAGE_OUT" <<'PY'
import fnmatch, json, sys
pol, model, i, o = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prices = json.load(open(pol))["spend"]["prices"]
pat = max((p for p in prices if fnmatch.fnmatchcase(model, p)), key=len)
print(round(i * prices[pat]["input"] * 1000 + o * prices[pat]["output"] * 1000))
PY
}
charges() { # EVENTS ENDPOINT: cost_nano of each budget.charge for ENDPOINT
	python3 - "$1" "$2" <<'PY'
import json, sys
print(" ".join(str(json.loads(l)["subject"].get("cost_nano")) for l in open(sys.argv[1])
      if json.loads(l)["type"] == "budget.charge" and json.loads(l)["subject"].get("endpoint") == sys.argv[2]))
PY
}

for name in claude-code codex opencode; do
	ex="$EXAMPLES/$name.json"
	out=$("$AIRLOCK" check "$ex" 2>&1)
	like "$out" '^ok sha256:' "$name: examples/agents/$name.json passes airlock check as it is" || diag "$out"

	pol="$T/$name.policy.json"
	python3 - "$ex" "$pol" "$T/cas.pem" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["egress"].update({"allow_ranges": ["198.18.0.0/15"], "resolver": ["127.0.0.1:5353"],
                    "upstream_ca": sys.argv[3]})
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
	WS="$T/ws-$name"
	EV="$T/$name.events.jsonl"
	mkdir "$WS"
	cp "$T/agent.sh" "$WS/agent.sh" # the sandbox has a /tmp of its own: $T is not there
	: > "$T/llm.log"
	: > "$T/git.log"
	ANTHROPIC_API_KEY=$ANTHROPIC_KEY OPENAI_API_KEY=$OPENAI_KEY GITHUB_TOKEN=$GIT_TOKEN \
		timeout 120 "$AIRLOCK" run --enforce --policy "$pol" --workspace "$WS" --events "$EV" \
		-- "$WS/agent.sh" "$WS" > "$T/$name.out" 2> "$T/$name.err" < /dev/null
	is $? 0 "$name: the session under the example's policy ran" || diag_file "$T/$name.err"

	hits=$(grep -laF -e "$ANTHROPIC_KEY" -e "$OPENAI_KEY" -e "$GIT_TOKEN" "$WS/env.txt" "$EV" "$T/$name.out" "$T/$name.err")
	is "$hits" "" "$name: no key or token inside the session, in its output or in its receipts"

	providers=$(python3 -c 'import json,sys; print(" ".join(p["api"] for p in json.load(open(sys.argv[1]))["spend"]["providers"]))' "$ex")
	for api in $providers; do
		case $api in
		anthropic) var=ANTHROPIC_API_KEY path=/v1/messages header=x-api-key value=$ANTHROPIC_KEY
			model=claude-sonnet-4-5-20250929 code=anthropic ;;
		openai) var=OPENAI_API_KEY path=/v1/responses header=authorization value="Bearer $OPENAI_KEY"
			model=gpt-5-codex code=openai ;;
		esac
		ph=$(sed -n "s/^$var=//p" "$WS/env.txt")
		[ -n "$ph" ] && [ "$ph" != "${value#Bearer }" ]
		ok $? "$name: the agent holds a placeholder for $var"
		is "$(cat "$WS/$code.code" 2>/dev/null)" 200 "$name: the call to the real $api host name is answered" ||
			diag_file "$WS/$code.err"
		is "$(llm_seen "$path" "$header" "$value")" "1 1" "$name: the $api stand-in got the call once, with the real key"
		grep '"type":"secret.inject"' "$EV" | grep -q "\"host\":\"api.$api.com\""
		ok $? "$name: a secret.inject receipt for api.$api.com"
		is "$(charges "$EV" "$path")" "$(want_nano "$ex" "$model")" \
			"$name: the call is metered at the example's price for $model (budget.charge)"
	done

	is "$(cat "$WS/clone.rc" 2>/dev/null)" 0 "$name: the session's repository is cloned from github.com" ||
		diag_file "$WS/clone.err"
	[ "$(git_seen acme/api authorised)" -ge 1 ]
	ok $? "$name: the git host got the real token, which airlock added"
	grep '"type":"git.allow"' "$EV" | grep -q 'acme/api'
	ok $? "$name: git.allow for acme/api"
	like "$(cat "$WS/unlisted.rc" 2>/dev/null)" '^[1-9]' "$name: the clone of a repository the example does not name fails"
	grep '"type":"git.block"' "$EV" | grep -q 'secret-infra'
	ok $? "$name: ... refused with a git.block receipt"
	is "$(git_seen acme/secret-infra)" 0 "$name: ... and never reached the git host"
	out=$("$AIRLOCK" verify "$EV" 2>&1)
	ok $? "$name: the stream verifies" || diag "$out"
done

done_testing
