#!/bin/bash
# Trust domains as processes (docs/ARCHITECTURE.md): in `airlock run` the
# supervisor, the key holder, the proxy workers and the sandbox's init are
# separate processes. The signing key's bytes are in the key holder's
# memory and nowhere else; each worker is under its own seccomp filter,
# which refuses execve in the running process, and cannot even open the key
# file; two workers serve many concurrent requests into one chain; a killed
# worker ends the session (125) with its end recorded before session.end; a
# killed key holder stops the session at once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK=""
pl_start_net
WS="$T/ws"
mkdir "$WS"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"]
  }
}
EOF
"$AIRLOCK" keygen --out "$T/k.pem" > "$T/k.pub" 2>/dev/null
ok $? "a signing key"
# The 32 raw private bytes: the end of the PKCS#8 DER.
openssl pkey -in "$T/k.pem" -outform DER 2>/dev/null | tail -c 32 > "$T/k.raw"
is "$(wc -c < "$T/k.raw")" 32 "its 32 raw private bytes"

# wait_for FILE: up to 20 s for FILE to exist.
wait_for() {
	_i=0
	while [ ! -e "$1" ] && [ $_i -lt 200 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	[ -e "$1" ]
}

# wait_exit PID: up to 20 s for PID to end; returns 0 if it did.
wait_exit() {
	_i=0
	while kill -0 "$1" 2>/dev/null && [ $_i -lt 200 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	! kill -0 "$1" 2>/dev/null
}

# children PID NAME: the children of PID whose name is NAME.
children() {
	pgrep -P "$1" -x "$2" | tr '\n' ' ' | sed 's/ $//'
}

# key_count PID...: how many times the raw key bytes are in each process's
# readable memory ("PID:N" per process; mem_count in lib.sh).
key_count() {
	_kc=""
	for _kp in "$@"; do
		_kc="$_kc $_kp:$(mem_count "$_kp" "$T/k.raw")"
	done
	echo "${_kc# }"
}

# in_worker PID EXPR...: evaluates each C expression in the running
# process PID with gdb; prints the values, one per line.
in_worker() {
	_pid=$1
	shift
	_args=()
	for _e in "$@"; do
		_args+=(-ex "print $_e")
	done
	timeout 120 gdb -nx -q -batch -p "$_pid" -ex 'set debuginfod enabled off' \
		"${_args[@]}" 2>/dev/null | sed -n 's/^\$[0-9]* = //p'
}

# --- airlock run: the processes and what each holds ----------------------------------

timeout 400 "$AIRLOCK" run --enforce --policy "$POLICY" --workspace "$WS" \
	--events "$EV" --signing-key "$T/k.pem" --workers 2 -- sh -c '
curl -sS --max-time 20 -o /dev/null -w "%{http_code}\n" http://api.airlock.test/first > first.out 2>&1
touch ready
i=0
while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
curl -sS --max-time 20 -o /dev/null -w "%{http_code}\n" http://api.airlock.test/after-gdb > after.out 2>&1
touch done
sleep 60
' > "$T/run.out" 2> "$T/run.err" &
tpid=$!
wait_for "$WS/ready"
ok $? "the agent ran a request through the proxy"
apid=$(children "$tpid" airlock)
is "$(cat "$WS/first.out")" 200 "and it succeeded"

keeper=$(children "$apid" airlock-keeper)
workers=$(children "$apid" airlock-proxy)
init=$(children "$apid" airlock)
like "$keeper" '^[0-9]+$' "the supervisor has one key holder child (airlock-keeper)"
like "$workers" '^[0-9]+ [0-9]+$' "and two proxy workers (airlock-proxy), as --workers 2 asks"
like "$init" '^[0-9]+$' "and the sandbox's init"
w1=${workers%% *}
w2=${workers##* }

for p in $w1 $w2 $keeper; do
	st=$(grep -E '^(Seccomp|NoNewPrivs|CapEff):' "/proc/$p/status" | tr -s '\t ' ' ' | tr '\n' ';')
	is "$st" "CapEff: 0000000000000000;NoNewPrivs: 1;Seccomp: 2;" \
		"$(cat "/proc/$p/comm") $p: its own seccomp filter, no_new_privs, no capabilities"
done
# The supervisor loads its own filter only once every helper is started,
# so the helpers' filters above are theirs, not one inherited from it.
is "$(grep -E '^(Seccomp|NoNewPrivs):' "/proc/$apid/status" | tr -s '\t ' ' ' | tr '\n' ';')" \
	"NoNewPrivs: 1;Seccomp: 2;" "the supervisor runs under a filter of its own once the session runs"

# The key's bytes: in the key holder (the control: the scan finds them where
# they are), nowhere else.
counts=$(key_count "$keeper" "$w1" "$w2" "$apid" "$init")
like "$counts" "^$keeper:[1-9][0-9]* " "the key holder's memory holds the signing key ($counts)"
is "${counts#* }" "$w1:0 $w2:0 $apid:0 $init:0" \
	"the workers', the supervisor's and the sandbox init's memory hold no copy of it"

if command -v gdb >/dev/null 2>&1; then
	# In the running worker, through gdb: the calls really run there
	# (getpid), it is not dumpable (PR_GET_DUMPABLE), its filter refuses
	# execve, creating a file, a unix socket, signalling or tracing the
	# supervisor (-1, EPERM), the key file cannot be opened even read-only
	# (Landlock: EACCES), while a TCP socket can be made.
	out=$(in_worker "$w1" '(int)getpid()' '(int)prctl(3, 0, 0, 0, 0)' \
		'(int)execve("/bin/sh", (char **)0, (char **)0)' '*(int *)__errno_location()' \
		"(int)open(\"$T/k.pem\", 0)" '*(int *)__errno_location()' \
		"(int)open(\"$T/new\", 0101, 0600)" '*(int *)__errno_location()' \
		'(int)socket(1, 1, 0)' '*(int *)__errno_location()' \
		'(int)kill((int)getppid(), 0)' '*(int *)__errno_location()' \
		'(long)ptrace(16, (int)getppid(), 0, 0)' '*(int *)__errno_location()' \
		'(int)socket(2, 1, 0) >= 0' | tr '\n' ' ')
	is "$out" "$w1 0 -1 1 -1 13 -1 1 -1 1 -1 1 -1 1 1 " \
		"in the worker: getpid, not dumpable; execve, open(key), open(O_CREAT), socket(AF_UNIX), kill(supervisor), ptrace(supervisor) all fail (EPERM; EACCES for the key); socket(AF_INET) works"
	[ ! -e "$T/new" ]
	ok $? "and the file it tried to create does not exist"
	grep -q '^Seccomp:[[:space:]]*2' "/proc/$w1/status"
	ok $? "the worker still runs under its filter"
	out=$(in_worker "$keeper" '(int)socket(2, 1, 0)' '*(int *)__errno_location()' \
		'(int)execve("/bin/sh", (char **)0, (char **)0)' '*(int *)__errno_location()' | tr '\n' ' ')
	is "$out" "-1 1 -1 1 " "in the key holder: no socket at all, no execve (EPERM)"
else
	for _ in 1 2 3; do ok 0 "# skip gdb is not installed (scripts/install-deps --test)"; done
fi
touch "$WS/go"
wait_for "$WS/done"
is "$(cat "$WS/after.out")" 200 "the workers serve on after gdb has been and gone"

# --- a killed worker ends the session -------------------------------------------------

kill -KILL "$w1"
wait_exit "$apid"
ok $? "after SIGKILL of a worker, airlock run ends (within 20 s)"
wait "$tpid"
is "$?" 125 "with 125"
is "$(wc -l < "$T/run.err")" 1 "and one line on stderr"
like "$(cat "$T/run.err")" "^airlock: egress proxy worker $w1 ended \(killed by signal 9\): the agent lost its network path" \
	"saying which worker ended, how, and why the session ended"
is "$(pgrep -P "$apid" | wc -l)" 0 "no process of the session is left"
r=$(last_receipt proxy.error)
is "$(jf "$r" point) $(jf "$r" rule) $(jf "$r" subject.pid) $(jf "$r" subject.signal)" \
	"supervisor proxy.worker $w1 9" "proxy.error records it: point supervisor, the worker's pid and signal"
last=$(tail -n 1 "$EV")
is "$(jf "$last" type) $(jf "$last" subject.exit)" "session.end 125" "session.end (exit 125) is the last line"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "the stream verifies with the pinned key, one chain"
is "$(count_receipts egress.allow)" 2 "both of the agent's requests are in it"

# --- two workers, many concurrent requests, one chain ------------------------------------

EV="$T/many.jsonl"
pl_start_proxy_ok --workers 2 --signing-key "$T/k.pem"
is "$(children "$PL_PROXY_PID" airlock-proxy | wc -w)" 2 "airlock proxy --workers 2: two workers"
python3 - "$PROXY" > "$T/many.out" <<'PY'
import concurrent.futures, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
def one(i):
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(b"GET http://api.airlock.test/many-%d HTTP/1.1\r\nHost: api.airlock.test\r\nConnection: close\r\n\r\n" % i)
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return data.split(b" ", 2)[1]
with concurrent.futures.ThreadPoolExecutor(32) as ex:
    codes = list(ex.map(one, range(400)))
print(sum(1 for c in codes if c == b"200"))
PY
is "$(cat "$T/many.out")" 400 "400 requests, 32 at a time: all succeed"
# A denied one answers with its receipt's seq: the one round trip.
req "http://other.airlock.test/denied"
is "$CODE" 403 "a denied request gets 403"
seq=$(hdr X-Airlock-Receipt)
is "$(jf "$(receipt_of "$seq")" type)" "egress.block" "whose X-Airlock-Receipt names its egress.block line"
# A reload reaches every worker: new requests, whichever worker takes
# them, are decided under the new policy.
sed -i 's/"allow": \["api.airlock.test"\]/"allow": ["api.airlock.test", "www.airlock.test"]/' "$POLICY"
kill -HUP "$PL_PROXY_PID"
wait_receipts policy.reload 1
n=0
for i in $(seq 40); do
	req "http://www.airlock.test/reloaded-$i"
	[ "$CODE" = 200 ] && n=$((n + 1))
done
is "$n" 40 "after SIGHUP, 40 requests to a newly allowed host all succeed"
pl_stop_proxy
is "$?" 0 "SIGTERM: exit 0"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "the stream verifies: one chain, no gap, in order"
is "$(count_receipts egress.allow)" 440 "with one egress.allow per request"
is "$(tail -n 1 "$EV" | grep -c '"type":"session.end"')" 1 "and session.end last"

# --- airlock proxy: a killed worker stops it, recorded -------------------------------------

EV="$T/proxy-kill.jsonl"
pl_start_proxy_ok --workers 2
w=$(children "$PL_PROXY_PID" airlock-proxy)
kill -KILL "${w%% *}"
wait_exit "$PL_PROXY_PID"
ok $? "airlock proxy ends when one of its workers is killed"
wait "$PL_PROXY_PID"
is "$?" 125 "with 125"
PL_PROXY_PID=""
is "$(jf "$(last_receipt proxy.error)" subject.signal) $(jf "$(tail -n 1 "$EV")" type)" \
	"9 session.end" "the worker's end is recorded, then session.end"
"$AIRLOCK" verify "$EV" >/dev/null 2>&1
is "$?" 0 "the stream verifies"

# --- a killed key holder stops the session at once ----------------------------------------

EV="$T/keeper-kill.jsonl"
rm -f "$WS/ready"
timeout 120 "$AIRLOCK" run --enforce --policy "$POLICY" --workspace "$WS" \
	--events "$EV" -- sh -c 'touch ready; sleep 60' > "$T/run.out" 2> "$T/run.err" &
tpid=$!
wait_for "$WS/ready"
ok $? "a session runs"
apid=$(children "$tpid" airlock)
keeper=$(children "$apid" airlock-keeper)
kill -KILL "$keeper"
wait_exit "$apid"
ok $? "after SIGKILL of the key holder, airlock run ends (within 20 s)"
wait "$tpid"
is "$?" 125 "with 125"
is "$(wc -l < "$T/run.err")" 1 "and one line on stderr"
like "$(cat "$T/run.err")" '^airlock: the key holder was killed by signal 9: the session cannot be recorded, so it was stopped$' \
	"saying the session can no longer be recorded, and why"
is "$(pgrep -P "$apid" | wc -l)" 0 "no process of the session is left"
"$AIRLOCK" verify "$EV" > "$T/verify.out" 2>&1
like "$?:$(cat "$T/verify.out")" '^1:.*truncated' "the stream has no session.end: verify says it is truncated"

# --- fd:N: only the key holder writes it, the command never holds it --------------------

"$AIRLOCK" run --mode off --events fd:7 -- sh -c 'for f in /proc/$$/fd/*; do echo "${f##*/}"; done' \
	7>"$T/fd7.jsonl" > "$T/fds.out"
grep -qx 1 "$T/fds.out"
ok $? "control: the command lists its descriptors"
grep -qx 7 "$T/fds.out"
is "$?" 1 "--events fd:7 in mode off: the command does not hold descriptor 7"
"$AIRLOCK" verify "$T/fd7.jsonl" >/dev/null 2>&1
is "$?" 0 "and fd:7 received a stream that verifies"

# --- a stream that cannot be written: nothing runs ----------------------------------------

rm -f "$WS/ran"
timeout 60 "$AIRLOCK" run --enforce --policy "$POLICY" --workspace "$WS" \
	--events /dev/full -- touch "$WS/ran" > "$T/run.out" 2> "$T/run.err"
is "$?" 125 "--events /dev/full: 125"
is "$(cat "$T/run.err")" "airlock: --events /dev/full: cannot write a receipt: No space left on device: the session cannot be recorded, so it was stopped" \
	"with the key holder's reason on one line"
[ ! -e "$WS/ran" ]
ok $? "and the command never ran: session.start is written before anything starts"

done_testing
