#!/bin/sh
# airlock run in mode off: CMD runs unchanged, exit statuses,
# receipts when --events is given.
. "$(dirname "$0")/lib.sh"

"$AIRLOCK" run --mode off -- sh -c 'exit 7'
is "$?" 7 "exit status passes through"

"$AIRLOCK" run --mode off -- sh -c 'kill -TERM $$'
is "$?" 143 "killed by SIGTERM gives 128+15"

err=$("$AIRLOCK" run --mode off -- /nonexistent/airlock-no-such-cmd 2>&1)
is "$?" 127 "a missing command gives 127"
like "$err" "airlock: run: /nonexistent/airlock-no-such-cmd: command not found" "and says so"

"$AIRLOCK" run --mode off -- airlock-no-such-cmd-in-path 2>/dev/null
is "$?" 127 "a command missing from PATH gives 127"

printf '#!/bin/sh\nexit 0\n' > "$T/noexec"
chmod 0644 "$T/noexec"
err=$("$AIRLOCK" run --mode off -- "$T/noexec" 2>&1)
is "$?" 126 "a non-executable command gives 126"
like "$err" "cannot execute: Permission denied" "and says why"

"$AIRLOCK" run --mode off --events "$T/ev126.jsonl" -- "$T/noexec" 2>/dev/null
is "$?" 126 "126 with --events too"
like "$(tail -n 1 "$T/ev126.jsonl")" '"type":"session.end".*"exit":126' "session.end records 126"

"$AIRLOCK" run --mode off --events "$T/ev127.jsonl" -- airlock-no-such-cmd 2>/dev/null
is "$?" 127 "127 with --events too"

"$AIRLOCK" run --mode off --events "$T/ev7.jsonl" -- sh -c 'exit 3'
is "$?" 3 "a command that exits 3 with --events gives 3"

out=$(AIRLOCK_T_VAR=kept-value "$AIRLOCK" run --mode off -- printenv AIRLOCK_T_VAR)
is "$out" "kept-value" "mode off keeps the environment"

out=$(AIRLOCK_T_VAR=kept-value "$AIRLOCK" run --mode off --events "$T/env.jsonl" -- printenv AIRLOCK_T_VAR)
is "$out" "kept-value" "mode off keeps the environment with --events"

out=$(env -i PATH="$PATH" "$AIRLOCK" run --mode off -- env | sort)
want=$(env -i PATH="$PATH" env | sort)
is "$out" "$want" "mode off passes exactly the caller's environment"

out=$(sh -c 'echo $$; exec "$0" run --mode off -- sh -c "echo \$\$"' "$AIRLOCK" | sort -u | wc -l)
is "$out" 1 "mode off without --events execs in place (same pid)"

mkdir "$T/ws"
out=$("$AIRLOCK" run --mode off --workspace "$T/ws" -- pwd)
is "$out" "$T/ws" "--workspace sets the working directory"

"$AIRLOCK" run --mode off --workspace "$T/missing" -- true 2>"$T/err"
is "$?" 125 "a missing workspace gives 125"
like "$(cat "$T/err")" "^airlock: --workspace $T/missing: No such file or directory$" "with one clear line"

"$AIRLOCK" run --mode off --events "$T/ev.jsonl" -- true
is "$?" 0 "run with --events succeeds"
is "$(stat -c %a "$T/ev.jsonl")" 600 "events file is created 0600"
is "$(wc -l < "$T/ev.jsonl")" 2 "two receipts: session.start and session.end"
first=$(head -n 1 "$T/ev.jsonl")
like "$first" '^\{"v":1,"seq":0,"ts":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z","session":"sess-[0-9a-f]{16}","type":"session.start","decision":"info","point":"supervisor",' "session.start comes first, members in order"
like "$first" '"subject":\{"mode":"off","capabilities":\{"userns":(true|false),.*"enforce_ready":(true|false),"missing":\[.*\]\},"pubkey":"[A-Za-z0-9+/]{43}=","argv0":"true"\}' "session.start subject: mode, capabilities, pubkey, argv0"
like "$first" '"policy":"sha256:[0-9a-f]{64}"' "session.start carries the policy digest"
like "$(tail -n 1 "$T/ev.jsonl")" '"seq":1,.*"type":"session.end",.*"subject":\{"exit":0,"counts":\{"session.end":1,"session.start":1\}\}' "session.end carries exit and counts"
"$AIRLOCK" verify "$T/ev.jsonl" >/dev/null
is "$?" 0 "the stream verifies"

"$AIRLOCK" run --mode off --events "$T/ev.jsonl" --session my-session.1 -- true
is "$(wc -l < "$T/ev.jsonl")" 4 "a second session is appended"
like "$(sed -n 3p "$T/ev.jsonl")" '"seq":0,.*"session":"my-session.1"' "--session names the session"
"$AIRLOCK" verify "$T/ev.jsonl" >/dev/null
is "$?" 0 "both appended sessions verify"

"$AIRLOCK" run --mode off --events fd:3 -- true 3>"$T/fd.jsonl"
is "$?" 0 "--events fd:3"
is "$(wc -l < "$T/fd.jsonl")" 2 "fd:3 received the stream"

out=$("$AIRLOCK" run --mode off --events - -- true)
like "$out" '"type":"session.start"' "--events - writes to stdout"

"$AIRLOCK" run --mode off --events "$T/nodir/ev.jsonl" -- true 2>"$T/err"
is "$?" 125 "an unwritable events path gives 125"
is "$(wc -l < "$T/err")" 1 "with one line on stderr"

"$AIRLOCK" run --mode off --session 'bad id' -- true 2>"$T/err"
is "$?" 125 "a bad --session gives 125"

"$AIRLOCK" run --mode off 2>"$T/err"
is "$?" 125 "no command gives 125"
like "$(cat "$T/err")" "no command given" "and says so"

"$AIRLOCK" run --mode sideways -- true 2>"$T/err"
is "$?" 125 "a bad --mode gives 125"

"$AIRLOCK" run --mode off --bogus -- true 2>"$T/err"
is "$?" 125 "an unknown option gives 125"

printf '{"version": 2, "mode": "off", "extra": 1}\n' > "$T/bad.json"
"$AIRLOCK" run --policy "$T/bad.json" -- true 2>"$T/err"
is "$?" 125 "an invalid policy gives 125"
is "$(wc -l < "$T/err")" 1 "with one line on stderr"
like "$(cat "$T/err")" "^airlock: policy $T/bad.json is invalid: version: .* \\(and 1 more: 'airlock check $T/bad.json' lists them all\\)$" "naming the first error and how to see them all"

printf '{"version": 1, "mode": "off"}\n' > "$T/off.json"
"$AIRLOCK" run --policy "$T/off.json" -- sh -c 'exit 4'
is "$?" 4 "mode off from the policy file"

"$AIRLOCK" run --policy "$T/off.json" --mode shadow --events "$T/shadow.jsonl" -- sh -c 'exit 5'
is "$?" 5 "--mode shadow overrides the policy's off"
like "$(head -n 1 "$T/shadow.jsonl")" '"subject":\{"mode":"shadow"' "and session.start says shadow"

# Signal forwarding: a TERM sent to airlock reaches the command.
"$AIRLOCK" run --mode off --events "$T/sig.jsonl" -- sleep 30 &
pid=$!
i=0
while ! [ -s "$T/sig.jsonl" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
sleep 0.2
kill -TERM "$pid"
wait "$pid"
is "$?" 143 "SIGTERM to airlock is forwarded to the command"
like "$(tail -n 1 "$T/sig.jsonl")" '"exit":143' "session.end records 143"

out=$("$AIRLOCK" run --help)
is "$?" 0 "run --help exits 0"
like "$out" "--signing-key FILE" "run --help lists the options"

out=$("$AIRLOCK" run --mode off -- sh -c 'echo "$@"' sh --help)
is "$out" "--help" "arguments after -- belong to the command"

done_testing
