#!/bin/sh
# The sandbox cannot reach the supervisor or the host's processes: own PID
# namespace, no signals, ptrace or process_vm_* across it, no
# abstract unix sockets of the host, no terminal injection, and the seccomp
# filter refuses namespace, mount, keyring, bpf, perf and userfaultfd calls.
#
# Never run these probes outside the sandbox: here (as root, without a
# mount namespace of our own) 'probe mount' would mount over the host's
# /tmp. Only the harmless TIOCSTI on /dev/null is tried outside.
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

WS="$T/ws"
mkdir "$WS"
# The helpers run inside, which sees the workspace but maybe not the checkout.
PROBE="$(helpers_in "$WS")/probe"

# sandbox ARGS...: runs ARGS in the sandbox (enforce), stdout and stderr
# in $T/out, stdin from /dev/null; returns airlock's status.
sandbox() {
	"$AIRLOCK" run --enforce --workspace "$WS" --events "$T/ev.jsonl" -- "$@" \
		>"$T/out" 2>&1 </dev/null
}
out() {
	cat "$T/out"
}

# --- host processes ---------------------------------------------------------

sleep 300 &
spid=$!
# The abstract socket listener ends by itself after 60 s.
python3 - "$T/abstract.log" "airlock-test-$$" <<'PY' &
import socket, sys, time, select
log, name = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + name)
s.listen(8)
open(log + ".ready", "w").close()
deadline = time.time() + 60
while time.time() < deadline:
    if select.select([s], [], [], 0.5)[0]:
        c, _ = s.accept()
        with open(log, "a") as f:
            f.write("connection\n")
        c.close()
PY
apid=$!
trap 'kill "$spid" "$apid" 2>/dev/null; rm -rf "$T"' EXIT

kill -0 "$spid"
ok $? "control: the host's sleep ($spid) is there"

sandbox "$PROBE" kill "$spid"
like "$(out)" '^denied: (ESRCH|EPERM)$' "kill(host pid, 0) fails"
sandbox "$PROBE" ptrace "$spid"
like "$(out)" '^denied: (ESRCH|EPERM)$' "ptrace(PTRACE_ATTACH, host pid) fails"
sandbox "$PROBE" vmread "$spid"
like "$(out)" '^denied: (ESRCH|EPERM)$' "process_vm_readv(host pid) fails"
kill -0 "$spid"
ok $? "the host's sleep is still alive"

# The supervisor: airlock's own pid (the shell's $$ before it execs).
sup() {
	sh -c 'exec "$0" run --enforce --workspace "$1" --events "$4" -- "$2" "$3" $$' \
		"$AIRLOCK" "$WS" "$PROBE" "$1" "$T/ev.jsonl" >"$T/out" 2>&1 </dev/null
}
sup kill
like "$(out)" '^denied: (ESRCH|EPERM)$' "kill(supervisor, 0) fails"
sup ptrace
like "$(out)" '^denied: (ESRCH|EPERM)$' "ptrace(PTRACE_ATTACH, supervisor) fails"
sup vmread
like "$(out)" '^denied: (ESRCH|EPERM)$' "process_vm_readv(supervisor) fails"

sandbox sh -c 'test -e "/proc/$1" && echo visible; echo checked' sh "$spid"
is "$(out)" "checked" "the host's pid is not in the sandbox's /proc"

# --- the sandbox's own PID namespace -------------------------------------------

sandbox sh -c 'echo "pid $$"; echo "init $(cat /proc/1/comm)"; ls /proc | grep -E "^[0-9]+$" | tr "\n" " "; echo'
like "$(out)" '^pid 2$' "the command is pid 2"
like "$(out)" '^init airlock$' "pid 1 is airlock's init"
pids=$(out | sed -n 3p)
like "$pids" '^1 2 [0-9 ]*$' "/proc lists pids 1 and 2 first"
n=0
for p in $pids; do
	[ "$p" -le 10 ] || n=$((n + 1))
done
is "$n" 0 "/proc lists only the sandbox's few pids (got: $pids)"

sandbox ps -eo pid=,comm=
is "$(out | wc -l)" 2 "ps -e shows two processes (init and ps itself)"
like "$(out | head -n 1)" '^ *1 airlock$' "the first is airlock's init"

# --- privileges ----------------------------------------------------------------

sandbox grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
st=$(out | tr -s '\t ' ' ' | tr '\n' ';')
is "$st" "CapInh: 0000000000000000;CapPrm: 0000000000000000;CapEff: 0000000000000000;CapBnd: 0000000000000000;CapAmb: 0000000000000000;NoNewPrivs: 1;Seccomp: 2;" \
	"no capabilities at all, no_new_privs, a seccomp filter"

# Descriptors the caller (or airlock) holds do not reach the agent.
exec 7</etc/hostname 8>"$T/fd8"
# (No pipeline: ls would race with sh closing the pipeline's own pipes;
# "; true" keeps sh from exec-ing ls, which would list its own.)
sandbox sh -c 'ls "/proc/$$/fd"; true'
exec 7<&- 8>&-
is "$(out | tr '\n' ' ')" "0 1 2 " "the agent holds descriptors 0-2 only"

# --- abstract unix sockets -----------------------------------------------------

i=0
while [ ! -e "$T/abstract.log.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
"$PROBE" abstract "airlock-test-$$" >/dev/null
is "$?" 0 "control: outside, the abstract socket accepts"
sandbox "$PROBE" abstract "airlock-test-$$"
is "$(out)" "denied: ECONNREFUSED" "inside, the host's abstract socket cannot be reached"
sleep 0.3
is "$(cat "$T/abstract.log" 2>/dev/null | wc -l)" 1 "the listener saw only the control connection"

# --- terminal injection ----------------------------------------------------------

# On /dev/null TIOCSTI fails with ENOTTY; the seccomp filter answers EPERM
# before the kernel even looks at the descriptor.
"$PROBE" tiocsti </dev/null >"$T/out" 2>&1
is "$(out)" "denied: ENOTTY" "control: outside, TIOCSTI on /dev/null gives ENOTTY"
sandbox "$PROBE" tiocsti
is "$(out)" "denied: EPERM" "TIOCSTI: EPERM from the filter"
sandbox "$PROBE" tiocsti-high
is "$(out)" "denied: EPERM" "TIOCSTI with junk in the upper 32 bits: EPERM"
if command -v script >/dev/null 2>&1; then
	# On a pty as well (the agent's setsid took its controlling terminal).
	script -qec "\"$AIRLOCK\" run --enforce --workspace \"$WS\" -- \"$PROBE\" tiocsti" /dev/null \
		</dev/null >"$T/out" 2>&1
	like "$(out | tr -d '\r')" "denied: EPERM" "TIOCSTI on a pty (under script): EPERM"
	script -qec "\"$AIRLOCK\" run --enforce --workspace \"$WS\" -- \"$PROBE\" tiocsti-high" /dev/null \
		</dev/null >"$T/out" 2>&1
	like "$(out | tr -d '\r')" "denied: EPERM" "TIOCSTI (high bits) on a pty (under script): EPERM"
	script -qec "\"$AIRLOCK\" run --enforce --workspace \"$WS\" --events \"$T/ev.jsonl\" -- sh -c 'tty; ps -o sid=,tty= -p \$\$'" /dev/null \
		</dev/null >"$T/out" 2>&1
	like "$(out | tr -d '\r' | tail -n 1)" '^ *2 +\?$' "on a pty, the agent leads its own session without a controlling terminal"
else
	ok 0 "# skip script(1) is not installed"
	ok 0 "# skip script(1) is not installed"
	ok 0 "# skip script(1) is not installed"
fi

# --- the seccomp filter ----------------------------------------------------------

for a in keyctl bpf perf userfaultfd mount unshare-user unshare-net clone-netns; do
	sandbox "$PROBE" "$a"
	is "$(out)" "denied: EPERM" "probe $a: denied with EPERM"
done

sandbox unshare -m true
[ $? -ne 0 ]
ok $? "unshare -m true fails"
sandbox unshare -r true
[ $? -ne 0 ]
ok $? "unshare -r true fails"
sandbox unshare -n true
[ $? -ne 0 ]
ok $? "unshare -n true fails"

kill -0 "$spid"
ok $? "the host's sleep survived every attempt"

# --- signal dispositions ---------------------------------------------------
# The supervisor ignores SIGPIPE (a write to a worker that has gone is an
# error, not its death), but only once the sandbox runs: an ignored signal
# survives exec, and the agent must get SIGPIPE as any command does
# (`yes | head -n 1` ends yes by it). SigIgn's bit 12 is signal 13.
sandbox sh -c 'sed -n "s/^SigIgn:[[:space:]]*//p" /proc/self/status'
is "$?" 0 "the agent reads its signal dispositions"
ign=$(out)
is "$(( (0x$ign >> 12) & 1 ))" 0 "the agent does not inherit an ignored SIGPIPE (SigIgn $ign)"

done_testing
