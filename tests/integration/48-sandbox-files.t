#!/bin/sh
# The files that decide or record a session: the policy, the
# signing key, the events file, from_file secrets and CA files may not lie
# where the agent can write (the workspace, an fs.rw path, below them) --
# in shadow and enforce mode that is refused with 125 and a line naming
# the file; off refuses nothing. Without --events the receipts go to
# $XDG_STATE_HOME/airlock/SESSION.jsonl (~/.local/state by default), named
# on stderr at the end with the key's fingerprint; verify says whether the
# key was pinned.
. "$(dirname "$0")/lib.sh"

WS="$T/ws"
mkdir -p "$WS/.airlock" "$T/rw" "$T/elsewhere"
echo '{"version": 1, "mode": "shadow"}' > "$WS/.airlock/policy.json"
echo '{"version": 1, "mode": "shadow"}' > "$T/elsewhere/policy.json"

# refused WHAT NEEDLE ARGS...: airlock run ARGS (workspace $WS) gives 125,
# one line on stderr that names NEEDLE, and the command did not run.
refused() {
	what=$1
	needle=$2
	shift 2
	rm -f "$T/ran"
	"$AIRLOCK" run --workspace "$WS" "$@" -- sh -c 'echo ran > "$0"' "$T/ran" \
		>"$T/out" 2>"$T/err" </dev/null
	st=$?
	if [ "$st" -eq 125 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
	   grep -qF -- "$needle" "$T/err" && [ ! -e "$T/ran" ]; then
		ok 0 "$what: refused with 125 and one line naming it"
	else
		ok 1 "$what: refused with 125 and one line naming it"
		diag "status $st, ran: $([ -e "$T/ran" ] && echo yes || echo no), stderr:"
		diag_file "$T/err"
	fi
}

# --- the policy ---------------------------------------------------------------

for mode in shadow enforce; do
	refused "a policy in the workspace, mode $mode" "$WS/.airlock/policy.json" \
		--policy "$WS/.airlock/policy.json" --mode "$mode" --events "$T/ev-$mode.jsonl"
	like "$(cat "$T/err")" "is in the workspace $WS, which the agent can write: move it out" \
		"mode $mode: the line says where it is and what to do"
	like "$(head -n 1 "$T/ev-$mode.jsonl")" '"type":"session.refused","decision":"block".*"rule":"files"' \
		"mode $mode: a session.refused receipt"
	"$AIRLOCK" verify "$T/ev-$mode.jsonl" >/dev/null
	is "$?" 0 "mode $mode: the refused stream verifies"
done
"$AIRLOCK" run --policy "$T/elsewhere/policy.json" --workspace "$WS" --events "$T/ev-ok.jsonl" -- true
is "$?" 0 "control: the same policy outside the workspace runs"
"$AIRLOCK" run --policy "$WS/.airlock/policy.json" --mode off --workspace "$WS" -- true 2>"$T/err"
is "$?" 0 "mode off refuses nothing (it changes nothing)"
is "$(cat "$T/err")" "" "and says nothing"

ln -s "$WS/.airlock/policy.json" "$T/elsewhere/link.json"
refused "a symbolic link to a policy in the workspace" "$WS/.airlock/policy.json" \
	--policy "$T/elsewhere/link.json" --events "$T/ev.jsonl"
ln -s "$WS" "$T/ws-link"
refused "a policy reached through a link to the workspace" "$WS/.airlock/policy.json" \
	--policy "$T/ws-link/.airlock/policy.json" --events "$T/ev.jsonl"
(cd "$WS" && "$AIRLOCK" run --policy .airlock/policy.json --events "$T/ev.jsonl" -- true \
	2>"$T/err" </dev/null)
is "$?" 125 "a relative --policy in the workspace is refused"
ln "$WS/.airlock/policy.json" "$T/elsewhere/hard.json"
refused "a hard link to a policy whose other name is in the workspace" "hard links" \
	--policy "$T/elsewhere/hard.json" --events "$T/ev.jsonl"

printf '{"version": 1, "mode": "enforce", "fs": {"rw": ["%s"]}}\n' "$T/rw" > "$T/rw/policy.json"
refused "a policy in an fs.rw path" "is in the fs.rw path $T/rw" \
	--policy "$T/rw/policy.json" --events "$T/ev.jsonl"

# --- the events file and the signing key: checked before they are opened ------

refused "--events in the workspace" "$WS/ev.jsonl" --events "$WS/ev.jsonl"
[ ! -e "$WS/ev.jsonl" ]
ok $? "and it was not created"
refused "--events in a directory of the workspace that does not exist yet" \
	"$WS/new/ev.jsonl" --events "$WS/new/ev.jsonl"
ln -s "$WS/planted.jsonl" "$T/dangling.jsonl"
refused "--events, a dangling link into the workspace" "$WS/planted.jsonl" \
	--events "$T/dangling.jsonl"
[ ! -e "$WS/planted.jsonl" ]
ok $? "and nothing was created where it points"
"$AIRLOCK" run --workspace "$WS" --events - -- true >"$WS/stdout.jsonl" 2>"$T/err" </dev/null
is "$?" 125 "--events - with stdout a file in the workspace is refused"
like "$(cat "$T/err")" "$WS/stdout.jsonl" "naming the file"
"$AIRLOCK" run --workspace "$WS" --events fd:3 -- true 3>>"$WS/fd3.jsonl" 2>"$T/err" </dev/null
is "$?" 125 "--events fd:3 open on a file in the workspace is refused"
"$AIRLOCK" keygen --out "$WS/key.pem" >/dev/null
refused "--signing-key in the workspace" "$WS/key.pem" \
	--signing-key "$WS/key.pem" --events "$T/ev.jsonl"

# --- the files the policy names ---------------------------------------------------

echo "file-secret-$$" > "$WS/secret.txt"
printf '{"version": 1, "mode": "enforce", "secrets": {"s": {"from_file": "%s", "env": "S", "hosts": ["x.example"]}}}\n' \
	"$WS/secret.txt" > "$T/fromfile.json"
refused "a from_file secret in the workspace" "secrets.s.from_file $WS/secret.txt" \
	--policy "$T/fromfile.json" --events "$T/ev-ff.jsonl"
like "$(head -n 1 "$T/ev-ff.jsonl")" '"type":"session.refused".*"rule":"files"' "with a session.refused receipt"
if grep -q "file-secret-$$" "$T/ev-ff.jsonl"; then ok 1 "the secret was not read"; else ok 0 "the secret was not read"; fi
printf '{"version": 1, "mode": "enforce", "egress": {"upstream_ca": "%s"}}\n' "$WS/ca.pem" > "$T/ca.json"
: > "$WS/ca.pem"
refused "egress.upstream_ca in the workspace" "egress.upstream_ca $WS/ca.pem" \
	--policy "$T/ca.json" --events "$T/ev.jsonl"

: > "$WS/app.pem"
printf '{"version": 1, "mode": "enforce", "session": {"repo": "github.com/acme/api"}, "git": {"hosts": ["github.com"], "github_app": {"app_id": "Iv23liX", "installation_id": 1, "private_key_file": "%s"}}}\n' \
	"$WS/app.pem" > "$T/app.json"
"$AIRLOCK" check "$T/app.json" >/dev/null
ok $? "the GitHub App policy is valid"
refused "git.github_app.private_key_file in the workspace" "git.github_app.private_key_file $WS/app.pem" \
	--policy "$T/app.json" --events "$T/ev.jsonl"
printf '{"version": 1, "mode": "enforce", "session": {"repo": "github.com/acme/api"}, "git": {"hosts": ["github.com"], "github_app": {"app_id": "Iv23liX", "installation_id": 1, "private_key_file": "%s", "ca": "%s"}}}\n' \
	"$T/elsewhere/app.pem" "$WS/app.pem" > "$T/appca.json"
: > "$T/elsewhere/app.pem"
refused "git.github_app.ca in the workspace" "git.github_app.ca $WS/app.pem" \
	--policy "$T/appca.json" --events "$T/ev.jsonl"
printf '{"version": 1, "mode": "enforce", "spend": {"cap_usd": 1, "ledger": "sqlite:%s"}}\n' \
	"$WS/spend.db" > "$T/spend.json"
"$AIRLOCK" check "$T/spend.json" >/dev/null
ok $? "the spend policy is valid"
refused "a spend ledger in the workspace (the agent could reset its spend)" "spend.ledger $WS/spend.db" \
	--policy "$T/spend.json" --events "$T/ev.jsonl"

# --- the default events file --------------------------------------------------------

"$AIRLOCK" run --workspace "$WS" --session dflt-1 -- sh -c 'echo out' >"$T/out" 2>"$T/err" </dev/null
is "$?" 0 "without --events the session runs"
is "$(cat "$T/out")" "out" "its output is the command's own"
DEF="$HOME/.local/state/airlock/dflt-1.jsonl"
[ -f "$DEF" ]
ok $? "the receipts are in ~/.local/state/airlock/SESSION.jsonl"
is "$(stat -c %a "$DEF") $(stat -c %a "$HOME/.local/state/airlock") $(stat -c %a "$HOME/.local/state")" \
	"600 700 700" "the file is 0600, the directories made for it 0700"
"$AIRLOCK" verify "$DEF" >"$T/verify"
is "$?" 0 "they verify"
is "$(wc -l < "$T/err")" 1 "one line on stderr at the end"
fp=$(sed -n 's/^airlock: receipts: .* (key \(SHA256:[A-Za-z0-9+\/]*\), made for this session)$/\1/p' "$T/err")
like "$(cat "$T/err")" "^airlock: receipts: $DEF \(key SHA256:" "naming the file and the key"
want=$(head -n 1 "$DEF" | python3 -c '
import base64, hashlib, json, sys
k = base64.b64decode(json.load(sys.stdin)["subject"]["pubkey"])
print("SHA256:" + base64.b64encode(hashlib.sha256(k).digest()).decode().rstrip("="))')
is "$fp" "$want" "the fingerprint is SHA-256 of session.start's pubkey, base64 without padding"
like "$(cat "$T/verify")" "integrity only: the key was not pinned" "verify without --pubkey says it checked integrity only"
grep -qF "key $fp" "$T/verify"
ok $? "and prints the same fingerprint"

XDG_STATE_HOME="$T/state" "$AIRLOCK" run --workspace "$WS" --session dflt-2 -- true 2>"$T/err" </dev/null
[ -f "$T/state/airlock/dflt-2.jsonl" ]
ok $? "XDG_STATE_HOME chooses the directory"
XDG_STATE_HOME="relative" "$AIRLOCK" run --workspace "$WS" --session dflt-3 -- true 2>"$T/err" </dev/null
[ -f "$HOME/.local/state/airlock/dflt-3.jsonl" ] && [ ! -e "$WS/relative" ]
ok $? "a relative XDG_STATE_HOME is ignored"

# With a key: its fingerprint is computed from `airlock keygen`'s output alone.
"$AIRLOCK" keygen --out "$T/elsewhere/k.pem" >"$T/elsewhere/k.pub"
"$AIRLOCK" run --workspace "$WS" --session dflt-4 --signing-key "$T/elsewhere/k.pem" -- true 2>"$T/err" </dev/null
want=$(openssl pkey -pubin -in "$T/elsewhere/k.pub" -outform DER | tail -c 32 |
	openssl dgst -sha256 -binary | base64 | tr -d '=')
is "$(cat "$T/err")" "airlock: receipts: $HOME/.local/state/airlock/dflt-4.jsonl (key SHA256:$want)" \
	"with --signing-key: the fingerprint of keygen's public key (openssl, sha256, base64)"
"$AIRLOCK" verify --pubkey "$T/elsewhere/k.pub" "$HOME/.local/state/airlock/dflt-4.jsonl" >"$T/verify"
like "$(cat "$T/verify")" "key pinned: every line is signed by the key of $T/elsewhere/k.pub" \
	"verify --pubkey says the key is pinned"

# The agent can neither read nor change it, even in a directory it is shown.
mkdir "$T/shown"
printf '{"version": 1, "mode": "enforce", "fs": {"ro": ["%s"]}}\n' "$T/shown" > "$T/elsewhere/shown.json"
XDG_STATE_HOME="$T/shown" "$AIRLOCK" run --policy "$T/elsewhere/shown.json" --workspace "$WS" --session dflt-5 -- \
	sh -c 'ls "$0"; cat "$0/dflt-5.jsonl" 2>/dev/null || echo unreadable' "$T/shown/airlock" >"$T/out" 2>/dev/null </dev/null
is "$(cat "$T/out" | tr '\n' ' ')" "dflt-5.jsonl unreadable " "the agent cannot read the default events file"

XDG_STATE_HOME="$WS/state" "$AIRLOCK" run --workspace "$WS" --session dflt-6 -- true 2>"$T/err" </dev/null
is "$?" 125 "a default events file that would be in the workspace is refused"
like "$(cat "$T/err")" "the default events file $WS/state/airlock/dflt-6.jsonl" "naming it"
[ ! -e "$WS/state" ]
ok $? "and nothing was created there"

# Mode off: session.start, session.exec, session.end, then CMD in place.
out=$(sh -c 'echo $$; exec "$0" run --mode off --session off-1 -- sh -c "echo \$\$"' "$AIRLOCK" 2>"$T/err")
is "$(printf '%s\n' "$out" | sort -u | wc -l)" 1 "mode off without --events still execs in place (same pid)"
is "$(cat "$T/err")" "" "and prints nothing"
OFF="$HOME/.local/state/airlock/off-1.jsonl"
is "$(sed 's/.*"type":"\([^"]*\)".*/\1/' "$OFF" 2>/dev/null | tr '\n' ' ')" "session.start session.exec session.end " \
	"and records session.start, session.exec and session.end first"
"$AIRLOCK" verify "$OFF" >/dev/null
is "$?" 0 "which verify"
XDG_STATE_HOME=/proc/airlock-none "$AIRLOCK" run --mode off -- sh -c 'exit 6' 2>"$T/err"
is "$?" 6 "mode off where the default events file cannot be made: CMD runs, its status passes"
is "$(cat "$T/err")" "" "silently"

# --- -h, and what a checkout ignores ---------------------------------------------

for c in run verify keygen check doctor proxy; do
	"$AIRLOCK" "$c" -h >"$T/out" 2>&1
	st=$?
	if [ "$st" -eq 0 ] && grep -q "^usage: airlock $c" "$T/out"; then
		ok 0 "airlock $c -h prints its usage"
	else
		ok 1 "airlock $c -h prints its usage"
		diag_file "$T/out"
	fi
done
if git -C "$AIRLOCK_SRC" rev-parse --git-dir >/dev/null 2>&1; then
	for f in session.key session.pub events.jsonl; do
		git -C "$AIRLOCK_SRC" check-ignore -q "$f"
		ok $? "a checkout ignores $f"
	done
else
	ok 0 "# skip the sources are not a git checkout"
fi

done_testing
