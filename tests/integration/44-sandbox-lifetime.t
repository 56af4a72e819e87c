#!/bin/sh
# Session lifetime: no agent process outlives the session
# — not a daemonised one, not when the supervisor is SIGKILLed —, signals
# reach the command, exit statuses pass through, and the receipt stream
# records how it ended.
. "$(dirname "$0")/lib.sh"

WS="$T/ws"
mkdir "$WS"
# Unique sleep durations: pgrep -f '^sleep N$' finds only our own.
N1="7771$$"
N2="7772$$"
N3="7773$$"
N4="7774$$"
N5="7775$$"
N6="7776$$"
cleanup() {
	for n in "$N1" "$N2" "$N3" "$N4" "$N5" "$N6"; do
		for p in $(pgrep -f "^sleep $n\$"); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	rm -rf "$T" "/tmp/airlock-t44-$$.sh"
}
trap cleanup EXIT

# alive N: is a 'sleep N' running anywhere (in any PID namespace)?
alive() {
	pgrep -f "^sleep $1\$" >/dev/null
}
# wait_alive N: waits (at most 5 s) for 'sleep N' to show up.
wait_alive() {
	i=0
	while ! alive "$1" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	alive "$1"
}
# wait_gone N: waits (at most 5 s) for 'sleep N' to disappear.
wait_gone() {
	i=0
	while alive "$1" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	! alive "$1"
}

# --- a daemonised process does not outlive the session -------------------------

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/d.jsonl" -- \
	sh -c 'setsid sleep "$1" </dev/null >/dev/null 2>&1 &
	       i=0; while ! pgrep -x sleep >/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
	       pgrep -x sleep >/dev/null && echo running' sh "$N1" >"$T/out" 2>&1 </dev/null
is "$?" 0 "the session with a daemonised sleep ends"
is "$(cat "$T/out")" "running" "the daemonised sleep was running inside"
alive "$N1"
is "$?" 1 "it is gone when airlock run returns"

# A background child that keeps stdout open must not keep the caller
# waiting either.
start=$(date +%s)
out=$(timeout 30 "$AIRLOCK" run --enforce --workspace "$WS" --events "$T/misc.jsonl" -- \
	sh -c 'sleep "$1" & echo bye' sh "$N6" </dev/null)
st=$?
end=$(date +%s)
is "$st" 0 "a command that leaves a child holding stdout exits 0"
is "$out" "bye" "its output arrives"
[ $((end - start)) -lt 10 ]
ok $? "and the caller is not kept waiting for the child ($((end - start)) s)"
alive "$N6"
is "$?" 1 "the child is gone"

# --- SIGKILL of the supervisor takes the sandbox down -----------------------------

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/k.jsonl" -- \
	sh -c 'setsid sleep "$1" </dev/null >/dev/null 2>&1 & exec sleep "$2"' sh "$N2" "$N3" \
	</dev/null >/dev/null 2>&1 &
apid=$!
wait_alive "$N2" && wait_alive "$N3"
ok $? "the sandbox's sleeps are running"
kill -KILL "$apid"
wait "$apid" 2>/dev/null
is "$?" 137 "airlock was SIGKILLed"
wait_gone "$N3"
ok $? "after SIGKILL of the supervisor, the command dies (within 5 s)"
wait_gone "$N2"
ok $? "and so does a daemonised process of the sandbox"
pgrep -f "run --enforce --workspace $WS --events $T/k.jsonl" >/dev/null
is "$?" 1 "no copy of airlock (the sandbox's init) is left"
"$AIRLOCK" verify "$T/k.jsonl" >/dev/null 2>&1
[ $? -ne 0 ]
ok $? "the stream of a killed supervisor has no session.end: verify says it is truncated"

# --- SIGTERM to airlock reaches the command -----------------------------------------

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/t.jsonl" -- sleep "$N4" \
	</dev/null >/dev/null 2>&1 &
apid=$!
wait_alive "$N4"
ok $? "the command is running"
kill -TERM "$apid"
wait "$apid"
is "$?" 143 "SIGTERM to airlock ends the command with 143"
like "$(tail -n 1 "$T/t.jsonl")" '"type":"session.end",.*"subject":\{"exit":143,' "session.end records 143"
"$AIRLOCK" verify "$T/t.jsonl" >/dev/null
is "$?" 0 "the stream verifies"
alive "$N4"
is "$?" 1 "the command is gone"

# A command that handles SIGTERM decides its own exit status.
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/trap.jsonl" -- \
	sh -c 'trap "echo got-term; exit 3" TERM; sleep "$1" & wait' sh "$N5" \
	</dev/null >"$T/out" 2>&1 &
apid=$!
wait_alive "$N5"
kill -TERM "$apid"
wait "$apid"
is "$?" 3 "a command that traps SIGTERM gets it and exits 3"
is "$(cat "$T/out")" "got-term" "its trap ran"
wait_gone "$N5"
ok $? "its background sleep is gone too"

# --- exit statuses -------------------------------------------------------------------

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/misc.jsonl" -- sh -c 'exit 7' </dev/null
is "$?" 7 "exit status passes through"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/misc.jsonl" -- true </dev/null
is "$?" 0 "exit 0 passes through"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/misc.jsonl" -- sh -c 'kill -TERM $$' </dev/null
is "$?" 143 "a command killed by SIGTERM gives 143"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/misc.jsonl" -- sh -c 'kill -KILL $$' </dev/null
is "$?" 137 "a command killed by SIGKILL gives 137"

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/nf.jsonl" -- \
	/nonexistent/airlock-no-such-cmd </dev/null 2>"$T/err"
is "$?" 127 "a missing command inside the sandbox gives 127"
like "$(cat "$T/err")" "airlock-no-such-cmd: command not found" "and says so"
like "$(tail -n 1 "$T/nf.jsonl")" '"type":"session.end",.*"exit":127' "session.end records 127"
"$AIRLOCK" run --enforce --workspace "$WS" -- airlock-no-such-cmd-in-path </dev/null 2>/dev/null
is "$?" 127 "a command missing from PATH gives 127"
HOSTSCRIPT="/tmp/airlock-t44-$$.sh"
printf '#!/bin/sh\necho ran\n' > "$HOSTSCRIPT"
chmod 0755 "$HOSTSCRIPT"
"$AIRLOCK" run --enforce --workspace "$WS" -- "$HOSTSCRIPT" </dev/null >"$T/out" 2>/dev/null
is "$?" 127 "a command that exists only in the host's /tmp is not found inside (127)"
is "$(cat "$T/out")" "" "and did not run"
printf '#!/bin/sh\nexit 0\n' > "$WS/noexec"
chmod 0644 "$WS/noexec"
"$AIRLOCK" run --enforce --workspace "$WS" -- "$WS/noexec" </dev/null 2>"$T/err"
is "$?" 126 "a non-executable command gives 126"
like "$(cat "$T/err")" "cannot execute: Permission denied" "and says why"
"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/own127.jsonl" -- sh -c 'exit 127' \
	</dev/null 2>"$T/err"
is "$?" 127 "a command's own 127 passes through"
is "$(cat "$T/err")" "" "without a 'not found' message"

# --- the events stream ----------------------------------------------------------------

"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/ok.jsonl" -- sh -c 'exit 5' </dev/null
is "$?" 5 "exit 5 with --events"
like "$(head -n 1 "$T/ok.jsonl")" '"seq":0,.*"type":"session.start","decision":"info","point":"supervisor",.*"subject":\{"mode":"enforce",' "session.start says mode enforce"
like "$(tail -n 1 "$T/ok.jsonl")" '"type":"session.end",.*"subject":\{"exit":5,' "session.end records 5"
"$AIRLOCK" verify "$T/ok.jsonl" >/dev/null
is "$?" 0 "the events stream verifies"
"$AIRLOCK" verify "$T/d.jsonl" >/dev/null
is "$?" 0 "the daemonised session's stream verifies"
sed 's/"exit":5/"exit":0/' "$T/ok.jsonl" > "$T/bad.jsonl"
"$AIRLOCK" verify "$T/bad.jsonl" >/dev/null 2>&1
[ $? -ne 0 ]
ok $? "control: an altered stream does not verify"

done_testing
