#!/bin/sh
# What `airlock run` tells the person at the end: a command not found
# (127) that the host has under a path the sandbox hides names that path
# and fs.ro; a session that blocked something prints a summary on stderr
# (count by rule, the first targets, the events file), which --quiet
# silences. The blocked requests are refused by the egress rules before
# any DNS: nothing leaves the host.
. "$(dirname "$0")/lib.sh"

WS="$T/ws"
mkdir -p "$WS" "$HOME/.local/bin"
printf '#!/bin/sh\necho agent ran\n' > "$HOME/.local/bin/fake-agent"
chmod 0755 "$HOME/.local/bin/fake-agent"

# --- a command under the hidden $HOME ------------------------------------------
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e1.jsonl" -- \
	"$HOME/.local/bin/fake-agent" </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "a command under \$HOME: 127"
like "$(cat "$T/err")" "^airlock: run: $HOME/.local/bin/fake-agent: command not found" \
	"says command not found, with the run: prefix"
like "$(cat "$T/err")" "the host has $HOME/.local/bin/fake-agent, under $HOME, which the sandbox hides \(the agent's \\\$HOME is private and empty\)" \
	"names the hidden path (\$HOME)"
like "$(cat "$T/err")" "show it read-only with fs.ro, e.g. \"fs\": \{\"ro\": \[\"$HOME/.local/bin\"\]\}" \
	"names fs.ro as the fix, with the directory"

# --- a name found on the agent's PATH under $HOME -------------------------------
PATH="$HOME/.local/bin:$PATH" "$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e2.jsonl" -- \
	fake-agent </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "a name on PATH under \$HOME: 127"
like "$(cat "$T/err")" "^airlock: run: fake-agent: not found in the sandbox, but the host has $HOME/.local/bin/fake-agent" \
	"a name: the hint names where the host has it"

# --- the fix works: fs.ro shows it -------------------------------------------------
cat > "$T/ro.json" <<EOF
{"version": 1, "mode": "enforce", "fs": {"ro": ["$HOME/.local/bin"]}}
EOF
"$AIRLOCK" run --policy "$T/ro.json" --workspace "$WS" --events "$T/e3.jsonl" -- \
	"$HOME/.local/bin/fake-agent" </dev/null >"$T/out" 2>"$T/err"
is "$?" 0 "with fs.ro the command runs"
is "$(cat "$T/out")" "agent ran" "and prints its output"

# --- shown, but its target or its interpreter is hidden ---------------------------
mkdir -p "$WS/bin" "$HOME/.nvm/bin" "$HOME/.npm/lib"
printf '#!/bin/sh\necho npm agent\n' > "$HOME/.npm/lib/cli.sh"
chmod 0755 "$HOME/.npm/lib/cli.sh"
ln -s "$HOME/.npm/lib/cli.sh" "$WS/bin/linked-agent"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e6.jsonl" -- \
	"$WS/bin/linked-agent" </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "a link in the workspace to a file under \$HOME: 127"
like "$(cat "$T/err")" "the host has $WS/bin/linked-agent, whose target $HOME/.npm/lib/cli.sh is under $HOME, which the sandbox hides.*\"ro\": \[\"$HOME/.npm/lib\"\]" \
	"names the link's hidden target and its directory for fs.ro"
printf '#!/bin/sh\necho node\n' > "$HOME/.nvm/bin/fakenode"
chmod 0755 "$HOME/.nvm/bin/fakenode"
printf '#!%s\nconsole.log(1)\n' "$HOME/.nvm/bin/fakenode" > "$WS/bin/js-agent"
chmod 0755 "$WS/bin/js-agent"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e7.jsonl" -- \
	"$WS/bin/js-agent" </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "a script whose interpreter lies under \$HOME: 127"
like "$(cat "$T/err")" "the host has $WS/bin/js-agent, whose interpreter $HOME/.nvm/bin/fakenode is under $HOME, which the sandbox hides.*\"ro\": \[\"$HOME/.nvm/bin\"\]" \
	"names the hidden interpreter"
printf '#!/usr/bin/env fakenode\nconsole.log(1)\n' > "$WS/bin/env-agent"
chmod 0755 "$WS/bin/env-agent"
PATH="$HOME/.nvm/bin:$PATH" "$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e8.jsonl" -- \
	"$WS/bin/env-agent" </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "#!/usr/bin/env NAME, NAME on PATH under \$HOME: 127"
like "$(cat "$T/err")" "whose interpreter $HOME/.nvm/bin/fakenode is under $HOME" \
	"names the interpreter found on the agent's PATH"

# --- the host's /tmp is hidden too --------------------------------------------------
HOSTSCRIPT=$(mktemp /tmp/airlock-t39.XXXXXX)
printf '#!/bin/sh\necho ran\n' > "$HOSTSCRIPT"
chmod 0755 "$HOSTSCRIPT"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e4.jsonl" -- "$HOSTSCRIPT" \
	</dev/null >"$T/out" 2>"$T/err"
rc=$?
rm -f "$HOSTSCRIPT"
is "$rc" 127 "a command in the host's /tmp: 127"
like "$(cat "$T/err")" "under /tmp, which the sandbox hides; show it read-only with fs.ro" \
	"names /tmp and fs.ro"

# --- not on the host either: no hint ---------------------------------------------------
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/e5.jsonl" -- \
	airlock-t39-no-such-cmd </dev/null >"$T/out" 2>"$T/err"
is "$?" 127 "a command nowhere: 127"
is "$(cat "$T/err")" "airlock: run: airlock-t39-no-such-cmd: command not found" \
	"one line, no hint"

# --- the summary of blocks ----------------------------------------------------------
if command -v curl >/dev/null 2>&1; then
	agent='curl -s -o /dev/null http://blocked.airlock.test/a; curl -s -o /dev/null http://blocked.airlock.test/b; curl -s -o /dev/null https://other.airlock.test/; curl -s -o /dev/null http://127.0.0.1:9/; true'
	"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/s.jsonl" -- sh -c "$agent" \
		</dev/null >"$T/out" 2>"$T/err"
	is "$?" 0 "a session with refused requests: the command's own status"
	is "$(grep -c '"type":"egress.block"' "$T/s.jsonl")" 4 "four egress.block receipts"
	like "$(cat "$T/err")" '^airlock: run: blocked 4: egress.default 4$' "the summary counts them by rule"
	like "$(cat "$T/err")" '^airlock: run:   GET blocked\.airlock\.test:80 \(egress\.default\)$' "the first target"
	like "$(cat "$T/err")" '^airlock: run:   CONNECT other\.airlock\.test:443 \(egress\.default\)$' "the second (distinct) target"
	like "$(cat "$T/err")" '^airlock: run:   GET 127\.0\.0\.1:9 \(egress\.default\)$' "the third"
	like "$(cat "$T/err")" '^airlock: run:   \.\.\. 1 more' "then how many more"
	like "$(cat "$T/err")" "^airlock: run: every receipt: $T/s.jsonl " "and the events file"
	is "$(grep -c 'blocked.airlock.test' "$T/err")" 1 "each target once"

	"$AIRLOCK" run --enforce --quiet --workspace "$WS" --events "$T/q.jsonl" -- sh -c "$agent" \
		</dev/null >"$T/out" 2>"$T/err"
	is "$?" 0 "--quiet: the command's status"
	is "$(cat "$T/err")" "" "--quiet: no summary"
	is "$(grep -c '"type":"egress.block"' "$T/q.jsonl")" 4 "--quiet: the receipts are the same"

	"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/n.jsonl" -- true \
		</dev/null >"$T/out" 2>"$T/err"
	is "$(cat "$T/err")" "" "nothing blocked: no summary"
else
	ok 0 "# skip no curl here"
fi

"$AIRLOCK" run --help | grep -q -- '--quiet'
ok $? "--quiet is in run --help"
grep -q -- 'quiet' "$AIRLOCK_SRC/man/airlock.1"
ok $? "and in the man page"

done_testing
