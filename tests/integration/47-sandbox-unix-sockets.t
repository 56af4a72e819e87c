#!/bin/bash
# No pathname unix socket of the host can be reached from the sandbox,
# wherever it lies (docs/UNIX-SOCKETS.md): host listeners in /var/tmp,
# /srv, /opt, /etc, $HOME, a directory beside the workspace and the
# workspace itself never see a connection or a datagram from the agent -
# by connect, sendto, sendmsg, sendmmsg, through a symbolic link, a
# relative path, /proc/self/..., a rename race, rewritten memory or a
# swapped descriptor - in enforce and in shadow mode. The agent's own unix
# sockets work, and so do sockets under an fs.rw path.
#
# Needs root: the listeners live in system directories (removed at exit).
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"
PY=/usr/bin/python3

if [ "$(id -u)" -ne 0 ]; then
	echo "1..0 # SKIP needs root to place host sockets in /srv, /opt and /etc"
	exit 0
fi
[ -x "$PY" ] || { echo "1..0 # SKIP needs $PY (inside the sandbox too)"; exit 0; }

TAG="airlock-t47-$$"
# Outside /tmp, so that the sandbox's view shows them (read-only): the
# workspace, a directory beside it, an fs.rw directory.
BASE="/opt/$TAG"
WS="$BASE/ws"
BESIDE="$BASE/beside"
RW="$BASE/rw"
HOMEDIR="${HOME:-/root}/$TAG"
DIRS="/var/tmp/$TAG /srv/$TAG /etc/$TAG $HOMEDIR $BESIDE $WS"
LOG="$T/listener.log"
listener_pid=
cleanup() {
	[ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T" "$BASE" /var/tmp/"$TAG" /srv/"$TAG" /etc/"$TAG" "$HOMEDIR"
}
trap cleanup EXIT
mkdir -p $DIRS "$RW" || exit 1
# The helpers run inside, from a path the sandbox's view shows whatever the
# checkout's (a checkout under /root, /srv or /tmp is hidden there).
HELPERS=$(helpers_in "$BASE") || exit 1
cp "$AIRLOCK_SRC/tests/helpers/own_sockets.py" "$HELPERS/" || exit 1
chmod 0755 "$BASE"
PROBE="$HELPERS/probe"

# The host's listeners: a stream and a datagram socket in each directory,
# and two in the workspace for the rename race. Every connection and
# datagram is logged; the listener ends by itself after 300 s.
"$PY" - "$LOG" $DIRS <<'PY' &
import os, select, socket, sys, time
log, dirs = sys.argv[1], sys.argv[2:]
socks = {}
def listen(path, kind):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(path)
    os.chmod(path, 0o777)
    if kind != socket.SOCK_DGRAM:
        s.listen(64)
    socks[s] = path
for d in dirs:
    listen(os.path.join(d, "host.sock"), socket.SOCK_STREAM)
    listen(os.path.join(d, "host.dgram"), socket.SOCK_DGRAM)
    listen(os.path.join(d, "host.seqpacket"), socket.SOCK_SEQPACKET)
    if os.path.basename(d) == "ws":
        listen(os.path.join(d, "race-host.sock"), socket.SOCK_STREAM)
open(log + ".ready", "w").close()
deadline = time.time() + 300
while time.time() < deadline:
    for s in select.select(list(socks), [], [], 0.5)[0]:
        with open(log, "a") as f:
            if s.type == socket.SOCK_DGRAM:
                f.write("datagram %s %r\n" % (socks[s], s.recv(65536)))
            else:
                c, _ = s.accept()
                f.write("connection %s\n" % socks[s])
                c.close()
PY
listener_pid=$!
i=0
while [ ! -e "$LOG.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -e "$LOG.ready" ]
ok $? "the host's listeners are up"

# An fs.rw socket, bound by the host: the one exception.
"$PY" - "$RW/rw.sock" "$T/rw.log" <<'PY' &
import os, socket, sys, time, select
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2] + ".ready", "w").close()
deadline = time.time() + 300
while time.time() < deadline:
    if select.select([s], [], [], 0.5)[0]:
        c, _ = s.accept()
        with open(sys.argv[2], "a") as f:
            f.write("connection\n")
        c.close()
PY
rw_pid=$!
trap 'kill "$rw_pid" 2>/dev/null; cleanup' EXIT
i=0
while [ ! -e "$T/rw.log.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done

for mode in enforce shadow; do
	cat > "$T/$mode.json" <<EOF
{"version": 1, "mode": "$mode", "fs": {"rw": ["$RW"]}}
EOF
done
"$AIRLOCK" check "$T/enforce.json" >/dev/null && "$AIRLOCK" check "$T/shadow.json" >/dev/null
ok $? "the test policies are valid"

# sandbox MODE ARGS...: runs ARGS in the sandbox, output in $T/out.
sandbox() {
	mode=$1
	shift
	"$AIRLOCK" run --policy "$T/$mode.json" --workspace "$WS" --events "$T/events.jsonl" -- "$@" >"$T/out" 2>&1 </dev/null
}
out() {
	cat "$T/out"
}
log_is_empty() {
	if ! kill -0 "$listener_pid" 2>/dev/null; then
		ok 1 "$1 (the host listener is gone)"
	elif [ -s "$LOG" ]; then
		ok 1 "$1"
		sed 's/^/#   /' "$LOG"
		: > "$LOG"
	else
		ok 0 "$1"
	fi
}

# Control: the listeners were there all along, and receive from outside.
control() {
	: > "$LOG"
	for d in $DIRS; do
		"$PROBE" unix-connect "$d/host.sock" >/dev/null
		"$PROBE" unix-seqpacket "$d/host.seqpacket" >/dev/null
		"$PROBE" unix-sendto "$d/host.dgram" >/dev/null
	done
	i=0
	while [ "$(grep -c . "$LOG")" -lt $(( $(echo $DIRS | wc -w) * 3 )) ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	is "$(grep -c . "$LOG")" $(( $(echo $DIRS | wc -w) * 3 )) "$1"
	: > "$LOG"
}
control "control: from outside, every host listener receives"

for mode in enforce shadow; do
	# --- every way of naming a host socket, in every place -----------------
	for d in $DIRS; do
		for action in unix-connect:host.sock unix-seqpacket:host.seqpacket \
			unix-dgram-connect:host.dgram unix-sendto:host.dgram \
			unix-sendmsg:host.dgram unix-sendmmsg:host.dgram; do
			a=${action%%:*}
			f=$d/${action#*:}
			# Where the view shows the socket, it is the gate that
			# refuses (EACCES); where the view hides it, ENOENT.
			sandbox "$mode" sh -c 'test -S "$2" && echo visible; "$1" "$3" "$2"' \
				sh "$PROBE" "$f" "$a"
			case "$(out)" in
			visible*) want='^visible denied: EACCES$' ;;
			*) want='^denied: (EACCES|ENOENT)$' ;;
			esac
			like "$(out | tr '\n' ' ' | sed 's/ $//')" "$want" "$mode: $a $f is refused"
		done
	done
	log_is_empty "$mode: no host listener saw a connection or a datagram"

	# --- indirections ----------------------------------------------------------
	sandbox "$mode" sh -c 'ln -s "$2" link.sock && "$1" unix-connect link.sock; rm -f link.sock' \
		sh "$PROBE" "$BESIDE/host.sock"
	is "$(out)" "denied: EACCES" "$mode: a symbolic link in the workspace to a host socket"
	sandbox "$mode" sh -c 'cd "$2" && "$1" unix-connect host.sock && "$1" unix-sendto host.dgram' \
		sh "$PROBE" "$BESIDE"
	is "$(out | tr '\n' ' ')" "denied: EACCES " "$mode: a relative path after chdir"
	sandbox "$mode" sh -c 'cd "$2" && "$1" unix-connect /proc/self/cwd/host.sock' \
		sh "$PROBE" "$BESIDE"
	is "$(out)" "denied: EACCES" "$mode: /proc/self/cwd/... names the agent's directory"
	sandbox "$mode" "$PY" -c '
import os, socket, sys
fd = os.open(sys.argv[1], os.O_PATH)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/proc/self/fd/%d" % fd)
    print("connected")
except OSError as e:
    print(e.strerror)
' "$WS/host.sock"
	is "$(out)" "Permission denied" "$mode: an O_PATH descriptor of a host socket, through /proc/self/fd"
	log_is_empty "$mode: no host listener saw the indirections"

	# --- races -----------------------------------------------------------------
	sandbox "$mode" "$PROBE" race-rename "$WS/race-own.sock" "$WS/race-host.sock" 2000
	like "$(out)" 'host 0$' "$mode: a rename race between the agent's socket and a host one"
	like "$(out)" 'own [1-9]' "$mode: and the agent's own socket was reached meanwhile"
	sandbox "$mode" "$PROBE" race-memory "$WS/mem-own.sock" "$BESIDE/host.sock" 2000
	like "$(out)" 'host 0$' "$mode: an address rewritten by another thread during connect()"
	sandbox "$mode" "$PROBE" race-fd stream "$BESIDE/host.sock" 3128 2000
	like "$(out)" '^calls 2000 ' "$mode: a descriptor swapped between TCP and unix during connect()"
	sandbox "$mode" "$PROBE" race-fd dgram "$BESIDE/host.dgram" 9 2000
	like "$(out)" '^calls 2000 ' "$mode: a descriptor swapped between UDP and unix during sendto()"
	# A filter of the agent's own that would answer "continue" to its
	# connect() before the sandbox's does: the kernel allows one
	# listener per filter stack, and the sandbox's holds it.
	sandbox "$mode" "$PROBE" own-listener "$BESIDE/host.sock"
	like "$(out)" '^denied: (EBUSY|EPERM)$' "$mode: the agent cannot stack a listener of its own"
	log_is_empty "$mode: no host listener saw the races"

	# --- what works ------------------------------------------------------------
	want=$(printf 'ok %s ' stream seqpacket dgram-sendto dgram-sendmsg dgram-sendmmsg \
		dgram-connect o_path socketpair scm-rights scm-credentials spoofed-pid-refused \
		passcred-pid abstract big-sendmsg tcp udp)
	for dir in "$WS" /tmp home; do
		# home: the agent's $HOME, where the view makes it writable.
		sandbox "$mode" sh -c '
			if [ "$2" = home ]; then
				[ -w "$HOME" ] || { echo "not-writable $HOME"; exit 0; }
				cd "$HOME"
			else
				cd "$2"
			fi && exec "$1" "$3"' sh "$PY" "$dir" "$HELPERS/own_sockets.py"
		case "$(out)" in
		not-writable*) ok 0 "# skip $mode: the agent's \$HOME is not writable in this view" ;;
		*) is "$(out | tr '\n' ' ')" "$want" "$mode: the agent's own unix sockets work in $dir" ;;
		esac
	done
	sandbox "$mode" "$PROBE" unix-connect "$RW/rw.sock"
	is "$(out)" "allowed" "$mode: a host socket under an fs.rw path may be reached"
done
# The same gate for an unprivileged caller (where user namespaces allow).
if command -v setpriv >/dev/null; then
	mkdir "$T/nobody" "$T/nobody-state"
	chown 65534:65534 "$T/nobody" "$T/nobody-state"
	chmod 0755 "$T"
	(cd "$T/nobody" && setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$AIRLOCK" run --enforce --events "$T/nobody-state/events.jsonl" -- sh -c '"$1" unix-connect "$2"; cd /tmp && "$3" "$4"' \
		sh "$PROBE" "$BESIDE/host.sock" "$PY" "$HELPERS/own_sockets.py" \
		>"$T/out" 2>&1 </dev/null)
	is "$(out | tr '\n' ' ')" "denied: EACCES $want" \
		"as nobody: a host socket is refused, the agent's own work"
else
	ok 0 "# skip no setpriv to run as nobody"
fi
log_is_empty "no host listener saw the unprivileged agent"

# The filter (built at build time) kills a call through another ABI,
# whose numbers it would not recognise: the i386 int 0x80 and x32 ones.
if [ "$(uname -m)" = x86_64 ]; then
	for abi in int80 x32; do
		# A kernel without that ABI (ia32 emulation off) faults the
		# call outside any sandbox: nothing for the filter to show.
		sh -c '"$0" "$1"' "$PROBE" "$abi" >/dev/null 2>&1
		if [ $? -eq 139 ]; then
			ok 0 "# skip this kernel has no $abi entry (SIGSEGV outside the sandbox too)"
			continue
		fi
		sandbox enforce sh -c '"$1" "$2"; echo "status $?"' sh "$PROBE" "$abi"
		like "$(out)" 'status 159' "a getpid() through $abi kills the process (SIGSYS)"
	done
else
	ok 0 "# skip the other-ABI checks are for x86-64"
	ok 0 "# skip the other-ABI checks are for x86-64"
fi

# The gate needs seccomp user notifications: where they are refused,
# doctor says seccomp is missing and enforce and shadow refuse to start.
out=$("$PROBE" deny-listener "$AIRLOCK" doctor)
is "$?" 1 "doctor exits 1 where seccomp cannot create a listener"
like "$out" '"seccomp":false.*"missing":\["seccomp"\]' "and names seccomp missing"
for mode in enforce shadow; do
	"$PROBE" deny-listener "$AIRLOCK" run --policy "$T/$mode.json" --workspace "$WS" --events "$T/events.jsonl" -- true \
		>"$T/out" 2>&1 </dev/null
	is "$?" 125 "$mode: a session refuses to start there (125)"
	like "$(out)" 'needs seccomp' "$mode: naming seccomp"
done

# Landlock (ABI 6) scopes the agent: it may not signal init, which serves
# the gate (nor its workers), but signals its own processes.
if [ "$("$AIRLOCK" doctor | sed -n 's/.*"landlock":\([0-9]*\).*/\1/p')" -ge 6 ]; then
	sandbox enforce sh -c '"$1" kill 1; sleep 5 & "$1" kill $!; kill $!' sh "$PROBE"
	is "$(out | tr '\n' ' ')" "denied: EPERM allowed " "the agent cannot signal init, but can its own child"
else
	ok 0 "# skip Landlock below ABI 6 cannot scope signals"
fi
is "$(cat "$T/rw.log" 2>/dev/null | wc -l)" 2 "the fs.rw listener saw both modes' connections"
log_is_empty "no host listener saw anything, in either mode"

control "control, at the end: from outside, every host listener still receives"

done_testing
