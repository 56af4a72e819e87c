#!/bin/sh
# Brokered secrets in the sandbox: the real value of a
# from_env or from_file secret never enters the sandbox — not its
# environment, /proc, the policy file, the secret file or the events file —
# and the agent holds a per-session placeholder instead.
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

# airlock's files in a directory the sandbox shows (read-only, fs.ro): the
# private /tmp and /var/tmp would hide them for free, and the workspace and
# fs.rw paths may not hold them (48-sandbox-files.t), so here they must be
# masked by airlock itself.
V=$(mktemp -d /var/tmp/airlock-test40.XXXXXX)
trap 'rm -rf "$T" "$V"' EXIT

WS="$T/ws"
mkdir "$WS"
# Each value is split in two halves so that no command line of this test
# (which the agent can read in /proc) ever holds a whole value.
VA="s3cr3t-VAL"
VB="UE-$$"
VALUE="$VA$VB"
WA="s3cr3t-OTH"
WB="ER-$$"
VALUE2="$WA$WB"
FA="f1le-s3cr3t-VAL"
FB="UE-$$"
FVALUE="$FA$FB"
printf '%s\n' "$FVALUE" > "$V/secret.txt"
chmod 600 "$V/secret.txt"

POL="$V/policy.json"
EV="$V/events.jsonl"
write_policy() {
	cat > "$POL" <<EOF
{"version": 1, "mode": "enforce", "fs": {"ro": ["$V"]},
 "secrets": {
   "tok":  {"from_env": "MY_TOKEN",  "env": "MY_TOKEN",    "hosts": ["api.example.test"]},
   "alt":  {"from_env": "SRC_TOKEN", "env": "AGENT_TOKEN", "hosts": ["api.example.test"]},
   "file": {"from_file": "$V/secret.txt", "env": "FILE_TOKEN", "hosts": ["api.example.test"]}
 }}
EOF
}
write_policy
"$AIRLOCK" check "$POL" >/dev/null
ok $? "the test policy is valid"

# sandbox ARGS...: runs ARGS in the sandbox (enforce, unless MODE is set),
# stdout and stderr in $T/out; returns airlock's status.
sandbox() {
	MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy "$POL" \
		--mode "${MODE:-enforce}" --workspace "$WS" --events "$EV" -- "$@" \
		>"$T/out" 2>&1 </dev/null
}

# no_secret WHAT: $T/out holds none of the three values.
no_secret() {
	if grep -qF -e "$VALUE" -e "$VALUE2" -e "$FVALUE" "$T/out"; then
		ok 1 "$1: no secret value"
		sed 's/^/#   /' "$T/out" | head -n 20
	else
		ok 0 "$1: no secret value"
	fi
}

# fails STATUS DESC: passes when STATUS is not 0.
fails() {
	if [ "$1" -ne 0 ]; then ok 0 "$2"; else ok 1 "$2"; fi
}

out_has() {
	like "$(cat "$T/out")" "$1" "$2"
}

# --- the environment -------------------------------------------------------

sandbox python3 -c 'import os; print(os.environ)'
is "$?" 0 "python3 runs in the sandbox"
no_secret "os.environ"
out_has "'MY_TOKEN': 'airlock-ph-tok-[A-Za-z0-9_-]{32}'" "os.environ holds the placeholder of tok"
out_has "'AGENT_TOKEN': 'airlock-ph-alt-[A-Za-z0-9_-]{32}'" "os.environ holds the placeholder of alt"
out_has "'FILE_TOKEN': 'airlock-ph-file-[A-Za-z0-9_-]{32}'" "os.environ holds the placeholder of file"
if grep -q "SRC_TOKEN" "$T/out"; then ok 1 "a from_env source variable is not passed"; else ok 0 "a from_env source variable is not passed"; fi

sandbox sh -c 'cat /proc/self/environ | tr "\0" "\n"'
is "$?" 0 "/proc/self/environ is readable"
no_secret "/proc/self/environ"
out_has "^MY_TOKEN=airlock-ph-tok-" "/proc/self/environ holds the placeholder"

sandbox sh -c 'cat /proc/1/environ | tr "\0" "\n"; echo "done-1"'
no_secret "/proc/1/environ (airlock's init)"
out_has "done-1" "the /proc/1/environ check ran"

sandbox sh -c 'for f in /proc/1/fd/* /proc/1/mem /proc/1/cmdline /proc/1/maps; do cat "$f"; done; echo "done-fd"'
no_secret "init's descriptors, memory and command line"
out_has "done-fd" "the /proc/1 check ran"

# 'x': stdin is not a terminal, and ps e alone lists only its terminal's.
sandbox ps exww
is "$?" 0 "ps exww runs"
no_secret "ps exww"
out_has "MY_TOKEN=airlock-ph-tok-" "ps exww shows the environment (placeholder)"

sandbox ps auxeww
is "$?" 0 "ps auxeww runs"
no_secret "ps auxeww"
out_has "AGENT_TOKEN=airlock-ph-alt-" "ps auxeww shows the environment (placeholder)"

# Every readable file under /proc. The needles come in halves and are
# joined by the shell, so no argv holds them. pagemap files are left out:
# they hold page frame numbers only, and reading one through takes hours.
# grep exits 1 (no match) or 2 (no match, some files unreadable); 0 would
# be a match, 124 the time limit.
sandbox sh -c 'printf "%s%s\n%s%s\n%s%s\n" "$1" "$2" "$3" "$4" "$5" "$6" |
	timeout 20 grep -rasFl --exclude=pagemap -f - /proc 2>/dev/null
	echo "grep-status $?"' \
	sh "$VA" "$VB" "$WA" "$WB" "$FA" "$FB"
like "$(grep '^grep-status' "$T/out")" "^grep-status [12]$" "grep -r over /proc finds no secret value and finishes"
is "$(grep -v '^grep-status' "$T/out")" "" "grep -r over /proc names no file"
no_secret "grep -r over /proc"

# --- airlock's own files ----------------------------------------------------

sandbox cat "$POL"
fails $? "the policy file is unreadable in the sandbox"
if grep -q "from_env" "$T/out"; then ok 1 "no policy content shows"; else ok 0 "no policy content shows"; fi

sandbox cat "$V/secret.txt"
fails $? "the from_file secret file is unreadable in the sandbox"
no_secret "the from_file secret file"
sandbox ls -la "$V"
out_has "secret.txt" "the secret file's directory is still listed (the view is intact)"

sandbox cat "$EV"
fails $? "the events file is unreadable in the sandbox"
if grep -q "session.start" "$T/out"; then ok 1 "no receipt shows"; else ok 0 "no receipt shows"; fi

sandbox sh -c 'echo tampered >> "$1"' sh "$EV"
fails $? "the events file cannot be written in the sandbox"
sandbox sh -c 'rm -f "$1" && echo removed' sh "$EV"
if grep -q removed "$T/out"; then ok 1 "the events file cannot be removed"; else ok 0 "the events file cannot be removed"; fi
sandbox sh -c 'echo "{}" > "$1" && echo replaced' sh "$POL"
if grep -q replaced "$T/out"; then ok 1 "the policy file cannot be overwritten"; else ok 0 "the policy file cannot be overwritten"; fi
like "$(cat "$POL")" '"from_file"' "the policy file is intact outside"
is "$(cat "$V/secret.txt")" "$FVALUE" "the secret file is intact outside"
write_policy # should the checks above have failed, the rest still runs

# --- the signing key ---------------------------------------------------------

"$AIRLOCK" keygen --out "$V/key.pem" >/dev/null
ok $? "keygen writes a signing key"
MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy "$POL" --workspace "$WS" \
	--signing-key "$V/key.pem" --events "$T/signed.jsonl" -- cat "$V/key.pem" \
	>"$T/out" 2>&1 </dev/null
fails $? "the --signing-key file is unreadable in the sandbox"
if grep -q "PRIVATE KEY" "$T/out"; then ok 1 "no key material shows"; else ok 0 "no key material shows"; fi
like "$(tail -n 1 "$T/signed.jsonl")" '"type":"session.end"' "the session with --signing-key ran to its end"

# --- the same files given as paths relative to the caller's directory ------------
# (the caller's directory is not the workspace here: airlock changes into
# the workspace, but must still find and hide what the caller named)

cp "$POL" "$V/rel-policy.json"
"$AIRLOCK" keygen --out "$V/rel-key.pem" >/dev/null
(cd "$V" && MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy rel-policy.json \
	--workspace "$WS" -- cat "$V/rel-policy.json" >"$T/out" 2>&1 </dev/null)
fails $? "a relative --policy: the policy file is unreadable in the sandbox"
if grep -q "from_env" "$T/out"; then ok 1 "a relative --policy: no policy content shows"; else ok 0 "a relative --policy: no policy content shows"; fi

(cd "$V" && MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy "$POL" \
	--workspace "$WS" --events rel-events.jsonl -- cat "$V/rel-events.jsonl" >"$T/out" 2>&1 </dev/null)
fails $? "a relative --events: the events file is unreadable in the sandbox"
[ -s "$V/rel-events.jsonl" ] && [ ! -e "$WS/rel-events.jsonl" ]
ok $? "a relative --events is written in the caller's directory, not the workspace"

(cd "$V" && MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy "$POL" \
	--workspace "$WS" --signing-key rel-key.pem -- sh -c 'cat "$1" || echo unreadable' sh "$V/rel-key.pem" \
	>"$T/out" 2>&1 </dev/null)
is "$?" 0 "a relative --signing-key: the session runs"
like "$(cat "$T/out")" "unreadable" "a relative --signing-key: the key file is unreadable in the sandbox"
(cd "$V" && MY_TOKEN="$VALUE" SRC_TOKEN="$VALUE2" "$AIRLOCK" run --policy "$POL" \
	--workspace "$WS" --signing-key rel-key.pem --events "$T/relkey.jsonl" -- true \
	>"$T/out" 2>&1 </dev/null)
is "$?" 0 "a relative --signing-key with --events: the key is found and the session runs"

# --- the placeholder ----------------------------------------------------------

sandbox printenv MY_TOKEN
p1=$(cat "$T/out")
sandbox printenv MY_TOKEN
p2=$(cat "$T/out")
like "$p1" '^airlock-ph-tok-[A-Za-z0-9_-]{32}$' "the placeholder: airlock-ph-<name>- and 32 characters of the value's class (base64url)"
like "$p2" '^airlock-ph-tok-[A-Za-z0-9_-]{32}$' "in the second session too"
[ "$p1" != "$p2" ]
ok $? "the placeholder differs between two sessions"

sandbox sh -c 'printf "%s\n" "$MY_TOKEN" "$AGENT_TOKEN" "$FILE_TOKEN"'
is "$(sort -u "$T/out" | wc -l)" 3 "each secret has its own placeholder"

# --- the events file outside --------------------------------------------------

[ -s "$EV" ]
ok $? "the events file was written"
if grep -qF -e "$VALUE" -e "$VALUE2" -e "$FVALUE" "$EV"; then
	ok 1 "the events file holds no secret value"
else
	ok 0 "the events file holds no secret value"
fi
"$AIRLOCK" verify "$EV" >/dev/null
is "$?" 0 "the events file verifies"

# --- shadow mode: the real value stays out as well ----------------------------

MODE=shadow sandbox sh -c 'env && cat /proc/self/environ && ps auxeww'
is "$?" 0 "shadow mode runs"
no_secret "shadow mode: env, /proc/self/environ, ps auxeww"
out_has "MY_TOKEN=airlock-ph-tok-" "shadow mode: the placeholder is there"
if grep -q "^SRC_TOKEN=" "$T/out"; then ok 1 "shadow mode: a from_env source variable is not passed"; else ok 0 "shadow mode: a from_env source variable is not passed"; fi
MODE=shadow sandbox cat "$V/secret.txt"
fails $? "shadow mode: the from_file secret file is unreadable"
no_secret "shadow mode: the from_file secret file"
if grep -qF -e "$VALUE" -e "$VALUE2" -e "$FVALUE" "$EV"; then
	ok 1 "shadow mode: the events file holds no secret value"
else
	ok 0 "shadow mode: the events file holds no secret value"
fi

# --- a secret that cannot be read stops the session --------------------------

env -u MY_TOKEN -u SRC_TOKEN "$AIRLOCK" run --policy "$POL" --enforce --workspace "$WS" -- true 2>"$T/err" </dev/null
is "$?" 125 "a missing from_env variable gives 125"
is "$(wc -l < "$T/err")" 1 "with one line on stderr"

done_testing
