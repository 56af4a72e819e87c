#!/bin/sh
# The agent never holds the caller's descriptors to files: when
# the caller's stdin, stdout or stderr is anything but a terminal or a pipe,
# the agent gets a pipe and airlock copies. ftruncate, lseek, reading back
# and rewriting act on the pipe; the caller's file keeps what it had and
# gets all the output, in order; exit statuses and signals are unchanged;
# a terminal stays a terminal and a pipe stays the caller's pipe.
. "$(dirname "$0")/lib.sh"

WS="$T/ws"
mkdir "$WS"
EV="$T/ev.jsonl"

# run ARGS...: airlock run (enforce, workspace $WS, events $EV) ARGS.
run() {
	"$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- "$@"
}

# --- a regular file as stdout ------------------------------------------------------

echo "earlier content" > "$T/f"
run python3 -c '
import os, stat
for name, f in (("ftruncate", lambda: os.ftruncate(1, 0)), ("lseek", lambda: os.lseek(1, 0, 0)),
                ("read back", lambda: os.read(1, 10))):
    try:
        f()
        print(name, "WORKED", flush=True)
    except OSError as e:
        print(name, "failed", flush=True)
print("stdout is a pipe" if stat.S_ISFIFO(os.fstat(1).st_mode) else "stdout is NOT a pipe", flush=True)
' >>"$T/f" 2>&1 </dev/null
is "$?" 0 "the session with stdout appended to a file runs"
is "$(cat "$T/f" | tr '\n' ';')" "earlier content;ftruncate failed;lseek failed;read back failed;stdout is a pipe;" \
	"ftruncate, lseek and reading back fail; the file keeps its content and gets the output"

echo "earlier content" > "$T/f"
run sh -c 'truncate -s 0 /dev/stdout 2>/dev/null || echo cannot-truncate; : > /dev/stdout; echo after' \
	>>"$T/f" 2>/dev/null </dev/null
is "$(cat "$T/f" | tr '\n' ';')" "earlier content;cannot-truncate;after;" \
	"truncating or reopening /dev/stdout does not touch the caller's file"

# Opened read-write: the agent cannot read what the file held.
printf 'caller-secret-%s\n' "$$" > "$T/rw"
timeout 60 "$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- python3 -c '
import os, sys
try:
    os.write(1, os.read(1, 100))
    print("read WORKED", file=sys.stderr)
except OSError:
    print("read failed", file=sys.stderr)' 1<>"$T/rw" 2>"$T/rw.err" </dev/null
is "$(cat "$T/rw.err")" "read failed" "with stdout opened read-write, the agent cannot read from it"
is "$(grep -c "secret-$$" "$T/rw")" 1 "nor copy the file's content"

# stdout and stderr into one file: one pipe, so the order is kept.
run sh -c 'for i in 1 2 3 4 5; do echo "out $i"; echo "err $i" >&2; done' >"$T/both" 2>&1 </dev/null
is "$(tr '\n' ' ' < "$T/both")" "out 1 err 1 out 2 err 2 out 3 err 3 out 4 err 4 out 5 err 5 " \
	"stdout and stderr into one file keep their order"
run sh -c 'echo to-out; echo to-err >&2' >"$T/o" 2>"$T/e" </dev/null
is "$(cat "$T/o")|$(cat "$T/e")" "to-out|to-err" "stdout and stderr into two files each get theirs"

# Large output, fully copied before airlock returns.
run sh -c 'head -c 50000000 /dev/zero' >"$T/big" 2>/dev/null </dev/null
is "$?" 0 "50 MB of output"
is "$(stat -c %s "$T/big")" 50000000 "all of it is in the file when airlock returns"
run sh -c 'head -c 3000000 /dev/urandom | od -An -tx1 -v | head -c 5000000; exit 9' >"$T/mixed" 2>&1 </dev/null
is "$?" 9 "5 MB written just before exit 9: the status passes"
is "$(stat -c %s "$T/mixed")" 5000000 "and every byte reaches the file"

# A slow reader on a socket: the agent has long exited while its output
# still waits in the relay; airlock returns only once all of it is read.
python3 - "$AIRLOCK" "$WS" "$EV" >"$T/out" 2>&1 <<'PY'
import socket, subprocess, sys, time
airlock, ws, ev = sys.argv[1:4]
a, b = socket.socketpair()
for s in (a, b):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
p = subprocess.Popen([airlock, "run", "--enforce", "--workspace", ws, "--events", ev, "--",
                      "head", "-c", "100000", "/dev/zero"],
                     stdin=subprocess.DEVNULL, stdout=b, stderr=subprocess.DEVNULL)
b.close()
time.sleep(2)
early = p.poll()
n = 0
while True:
    d = a.recv(65536)
    if not d:
        break
    n += len(d)
print("bytes", n, "exited before the output was read:", early is not None, "status", p.wait())
PY
is "$(cat "$T/out")" "bytes 100000 exited before the output was read: False status 0" \
	"a socket as stdout with a slow reader gets all the output before airlock exits"

# --- --events - and a shared file: earlier sessions' receipts survive ------------

: > "$T/shared.jsonl"
"$AIRLOCK" run --enforce --workspace "$WS" --events - -- true >>"$T/shared.jsonl" 2>/dev/null </dev/null
first=$(wc -l < "$T/shared.jsonl")
cp "$T/shared.jsonl" "$T/first.jsonl"
"$AIRLOCK" run --enforce --workspace "$WS" --events - -- python3 -c '
import os
try:
    os.ftruncate(1, 0)
except OSError:
    pass
try:
    os.lseek(1, 0, 0)
except OSError:
    pass
os.write(1, b"{\"forged\": true}\n")
' >>"$T/shared.jsonl" 2>/dev/null </dev/null
head -n "$first" "$T/shared.jsonl" | cmp -s - "$T/first.jsonl"
ok $? "the earlier session's receipts are intact after an agent's ftruncate and lseek"
head -n "$first" "$T/shared.jsonl" | "$AIRLOCK" verify - >/dev/null
is "$?" 0 "and verify"
like "$(tail -n 1 "$T/shared.jsonl")" '"type":"session.end"' "the second session's receipts follow"

# --- stdin -----------------------------------------------------------------------

head -c 2000000 /dev/urandom > "$T/in"
run sh -c 'cat; test -p /dev/stdin && echo stdin-pipe >&2' <"$T/in" >"$T/copy" 2>"$T/err"
cmp -s "$T/in" "$T/copy"
ok $? "a regular file as stdin reaches the agent whole (2 MB)"
is "$(cat "$T/err")" "stdin-pipe" "through a pipe"
run python3 -c '
import os
try:
    os.lseek(0, 0, 2); print("seek WORKED")
except OSError:
    print("seek failed")
os.read(0, 10)' <"$T/in" >"$T/out" 2>&1
is "$(cat "$T/out")" "seek failed" "the agent cannot seek in the caller's input file"
head -c 60000000 /dev/zero > "$T/bigin"
start=$(date +%s)
timeout 60 "$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- head -c 5 <"$T/bigin" >"$T/out" 2>/dev/null
st=$?
is "$st $(stat -c %s "$T/out")" "0 5" "an agent that reads 5 bytes of a 60 MB input ends, and so does airlock"
[ $(($(date +%s) - start)) -lt 30 ]
ok $? "without waiting for the rest of the input"

# --- exit statuses and signals -------------------------------------------------------

run sh -c 'echo before; exit 7' >"$T/out" 2>&1 </dev/null
is "$? $(cat "$T/out")" "7 before" "exit 7 with stdout a file"
run sh -c 'echo before; kill -TERM $$' >"$T/out" 2>&1 </dev/null
is "$? $(cat "$T/out")" "143 before" "killed by SIGTERM: 143, and the output is there"
run sh -c 'kill -KILL $$' >"$T/out" 2>&1 </dev/null
is "$?" 137 "killed by SIGKILL: 137"

# SIGINT to the whole process group (as ^C does) reaches the agent; the
# relay survives it and copies what the agent printed. (Started through
# python: sh starts a background command with SIGINT ignored.)
setsid python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- \
	sh -c "echo started; exec sleep 30" >"$T/out" 2>&1 </dev/null &
spid=$!
i=0
while ! grep -q started "$T/out" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
python3 -c 'import os, signal, sys; os.killpg(int(sys.argv[1]), signal.SIGINT)' "$spid"
wait "$spid"
is "$? $(cat "$T/out")" "130 started" "SIGINT to the process group: 130, and the output is there"

# --- what stays as it is: terminals and pipes --------------------------------------

out=$(sh -c 'readlink /proc/$$/fd/1; exec "$0" run --enforce --workspace "$1" --events "$2" -- readlink /proc/self/fd/1' \
	"$AIRLOCK" "$WS" "$EV" </dev/null 2>/dev/null | cat)
is "$(printf '%s\n' "$out" | sort -u | wc -l) $(printf '%s\n' "$out" | head -n 1 | cut -c 1-5)" "1 pipe:" \
	"a pipe as stdout is the caller's own pipe inside"
if command -v script >/dev/null 2>&1; then
	script -qec "\"$AIRLOCK\" run --enforce --workspace \"$WS\" --events \"$EV\" -- sh -c 'test -t 0 && test -t 1 && echo tty'" \
		/dev/null </dev/null >"$T/out" 2>&1
	like "$(tr -d '\r' < "$T/out")" "^tty$" "a terminal stays a terminal"
else
	ok 0 "# skip script(1) is not installed"
fi
run sh -c 'readlink /proc/self/fd/0' </dev/null >"$T/out" 2>&1
like "$(cat "$T/out")" "^pipe:" "/dev/null as stdin is a pipe inside too (anything but a terminal or a pipe)"
run python3 -c 'import os; open("fd1", "w").write(os.readlink("/proc/self/fd/1"))' >&- 2>/dev/null </dev/null
is "$?" 0 "a closed stdout: the session runs"
like "$(cat "$WS/fd1" 2>/dev/null)" "^pipe:" "and the agent's stdout is a pipe (to /dev/null), nothing of airlock's"

# The relay does not outlive a SIGKILLed supervisor.
"$AIRLOCK" run --enforce --workspace "$WS" --events "$EV" -- sleep 30 >"$T/out" 2>&1 </dev/null &
apid=$!
i=0
while [ "$(pgrep -P "$apid" -x airlock-relay | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
is "$(pgrep -P "$apid" -x airlock-relay | wc -l)" 2 "airlock runs two relays (stdin /dev/null, stdout a file)"
kids=$(pgrep -P "$apid")
kill -KILL "$apid"
wait "$apid" 2>/dev/null
i=0
while [ -n "$(for k in $kids; do [ -d "/proc/$k" ] && echo "$k"; done)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
is "$(for k in $kids; do [ -d "/proc/$k" ] && echo "$k"; done)" "" "they and the sandbox are gone after airlock is SIGKILLed"

done_testing
