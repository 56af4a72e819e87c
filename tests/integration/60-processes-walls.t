#!/bin/bash
# Every process of a session, in `airlock run` (shadow, enforce,
# transparent) and `airlock proxy` (docs/ARCHITECTURE.md, "Trust domains
# are processes"): none is dumpable; each helper runs under its own seccomp
# filter with no capabilities; a scan of every process's memory finds the
# receipt signing key's bytes in the key holder alone, and the secret value
# only where the docs say it is (the supervisor, the proxy workers); the
# relays, the ledger process and the DNS stub of transparent mode hold
# neither, and the stub survives bad datagrams. Then one process of a session
# is killed, and the session ends cleanly: nothing of it is left, and its
# stream verifies (or, when the key holder or the supervisor was killed,
# verify says it is truncated, which is the truth).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

PL_SINK=""
pl_start_net
WS="$T/ws"
mkdir "$WS"
VALUE="sk-live-WallsTest0123456789abcdefghijklmnopqrstuv"

"$AIRLOCK" keygen --out "$T/k.pem" > "$T/k.pub" 2>/dev/null
ok $? "a signing key"
openssl pkey -in "$T/k.pem" -outform DER 2>/dev/null | tail -c 32 > "$T/k.raw"
is "$(wc -c < "$T/k.raw")" 32 "its 32 raw private bytes"

# policy MODE TRANSPARENT [SPEND]: SPEND "spend" meters a provider (the
# ledger process then runs).
policy() {
	_spend=""
	[ "${3:-}" = spend ] && _spend=',
  "spend": {"cap_usd": 1, "ledger": "sqlite:'"$T"'/spend.db",
    "providers": [{"api": "anthropic", "hosts": ["llm.airlock.test"]}],
    "prices": {"m": {"input": 1, "output": 1}}}'
	cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "$1",
  "egress": {
    "allow": ["api.airlock.test", "llm.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "transparent": $2
  },
  "secrets": {
    "api": { "from_env": "API_KEY", "hosts": ["api.airlock.test"], "prefix": "sk-live-" }
  }$_spend
}
EOF
}

wait_for() { # FILE: up to 20 s
	_i=0
	while [ ! -e "$1" ] && [ $_i -lt 200 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	[ -e "$1" ]
}

wait_gone() { # PID...: up to 20 s for all to end; returns 0 if they did
	_i=0
	while [ $_i -lt 200 ]; do
		_left=0
		for _p in "$@"; do
			kill -0 "$_p" 2>/dev/null && _left=1
		done
		[ $_left = 0 ] && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

field() { # PID NAME: a field of /proc/PID/status
	sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"
}

# dumpable PID: 1 or 0, PR_GET_DUMPABLE as the process itself would say.
# A process without capabilities in our user namespace is checked from
# outside: a reader with no capability at all (root's uid, every set
# emptied) may open /proc/PID/environ of a process of its uid exactly when
# that process is dumpable. The others (the supervisor and the relays keep
# root's capabilities; init is in its own user namespace) are asked
# through gdb.
dumpable() {
	if [ "$(field "$1" CapPrm)" = 0000000000000000 ] &&
		[ "$(readlink "/proc/$1/ns/user")" = "$(readlink /proc/self/ns/user)" ]; then
		if setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- \
			head -c 0 "/proc/$1/environ" 2>/dev/null; then
			echo 1
		else
			echo 0
		fi
	else
		# gdb can fail to attach on a loaded machine: up to 3 tries.
		# The executable by /proc/PID/exe: a process in the sandbox's
		# mount namespace (its init) does not see a checkout under
		# /tmp by its path, and gdb would find no symbols.
		for _try in 1 2 3; do
			_d=$(timeout 120 gdb -nx -q -batch "/proc/$1/exe" -p "$1" -ex 'set debuginfod enabled off' \
				-ex 'print (int)prctl(3, 0, 0, 0, 0)' 2>/dev/null |
				sed -n 's/^\$[0-9]* = //p')
			[ -n "$_d" ] && break
			sleep 0.5
		done
		echo "$_d"
	fi
}

# scan PID...: "PID:K:S:C" per process: how many times the key's raw bytes
# (K), the secret value (S) and the CA's private key (C: any of its forms,
# key_forms in lib.sh; 0 when no CA was given: CA_FORMS empty) are in its
# readable memory (mem_count in lib.sh).
#
# Under make SAN=1 (a binary that links libasan) one copy of the value is
# not airlock's: before main the ASan runtime reads /proc/self/environ into
# a buffer of its own (__sanitizer::GetEnv) that it never frees and that
# every forked process inherits; it holds "API_KEY=VALUE" as the test set
# it. Those copies, and only those, are not counted there (77-publish.t
# does the same); a copy anywhere else still is. The release build counts
# every copy.
ASAN_ENV=0
if ldd "$AIRLOCK" 2>/dev/null | grep -q libasan; then ASAN_ENV=1; fi
printf '%s' "$VALUE" > "$T/value.raw"
printf 'API_KEY=%s' "$VALUE" > "$T/value.env"
CA_FORMS=""
scan() {
	_out=""
	for _sp in "$@"; do
		# shellcheck disable=SC2086
		read -r _sk _ss _se _sc1 _sc2 _sc3 <<EOF_SCAN
$(mem_count "$_sp" "$T/k.raw" "$T/value.raw" "$T/value.env" $CA_FORMS)
EOF_SCAN
		[ "$ASAN_ENV" = 1 ] && _ss=$((_ss - _se))
		_out="$_out $_sp:$_sk:$_ss:$((${_sc1:-0} + ${_sc2:-0} + ${_sc3:-0}))"
	done
	echo "${_out# }"
}

# The controls of dumpable(): a capless process and a root one, both
# dumpable, and a capless one that made itself not dumpable.
setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- sleep 60 &
c1=$!
sleep 60 &
c2=$!
setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- \
	python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(60)' &
c3=$!
sleep 0.5
is "$(dumpable $c1) $(dumpable $c2) $(dumpable $c3)" "1 1 0" \
	"control: dumpable() tells a dumpable process (capless, or root through gdb) from one that is not"
kill $c1 $c2 $c3 2>/dev/null
wait $c1 $c2 $c3 2>/dev/null

# survey LABEL SUP: checks every process of the session under SUP (SUP
# itself and its children; the agent, under init, is not airlock's).
# Sets PIDS (all of them), and KEEPER, WORKERS, INIT, RELAYS, STUB, LEDGER.
survey() {
	_label=$1
	_sup=$2
	PIDS="$_sup"
	KEEPER="" WORKERS="" INIT="" RELAYS="" STUB="" LEDGER=""
	for _p in $(pgrep -P "$_sup"); do
		PIDS="$PIDS $_p"
		case "$(cat "/proc/$_p/comm")" in
		airlock-keeper) KEEPER=$_p ;;
		airlock-proxy) WORKERS="$WORKERS $_p" ;;
		airlock-relay) RELAYS="$RELAYS $_p" ;;
		airlock-dns) STUB=$_p ;;
		airlock-ledger) LEDGER=$_p ;;
		airlock) INIT=$_p ;;
		*) diag "$_label: unexpected child $_p $(cat "/proc/$_p/comm")" ;;
		esac
	done
	like "$KEEPER" '^[0-9]+$' "$_label: a key holder"
	like "$WORKERS" '^ [0-9]+ [0-9]+$' "$_label: two workers"
	_nd=""
	for _p in $PIDS; do
		[ "$(dumpable "$_p")" = 0 ] || _nd="$_nd $_p:$(cat "/proc/$_p/comm")"
	done
	is "$_nd" "" "$_label: no process of the session is dumpable ($(echo $PIDS | wc -w) checked)"
	for _p in $KEEPER $WORKERS $STUB $LEDGER; do
		is "$(field "$_p" Seccomp) $(field "$_p" NoNewPrivs) $(field "$_p" CapEff)" \
			"2 1 0000000000000000" \
			"$_label: $(cat "/proc/$_p/comm") $_p: its own seccomp filter, no_new_privs, no capabilities"
	done
	# The supervisor, once the session runs: its own filter, which
	# refuses exec, fork and ptrace (EPERM), while it may still signal.
	is "$(field "$_sup" Seccomp) $(field "$_sup" NoNewPrivs)" "2 1" \
		"$_label: the supervisor runs under its own seccomp filter"
	_w=${WORKERS##* }
	is "$(timeout 120 gdb -nx -q -batch -p "$_sup" -ex 'set debuginfod enabled off' \
		-ex 'print (int)execve("/bin/sh", (char **)0, (char **)0)' \
		-ex 'print *(int *)__errno_location()' \
		-ex 'print (int)fork()' -ex 'print *(int *)__errno_location()' \
		-ex "print (long)ptrace(16, $_w, 0, 0)" -ex 'print *(int *)__errno_location()' \
		-ex "print (int)kill($_w, 0)" 2>/dev/null | sed -n 's/^\$[0-9]* = //p' | tr '\n' ' ')" \
		"-1 1 -1 1 -1 1 0 " \
		"$_label: in the supervisor, execve, fork and ptrace(a worker) fail (EPERM); kill(a worker, 0) works"
	for _p in $RELAYS; do
		is "$(field "$_p" CapEff) $(field "$_p" CapPrm)" "0000000000000000 0000000000000000" \
			"$_label: relay $_p: no capabilities"
	done
	_counts=$(scan $PIDS)
	_k=""
	_s=""
	_ca=""
	for _c in $_counts; do
		IFS=: read -r _p _nk _ns _nc <<EOF_COUNTS
$_c
EOF_COUNTS
		[ "$_nk" = 0 ] || _k="$_k $(cat "/proc/$_p/comm")"
		[ "$_ns" = 0 ] || _s="$_s $(cat "/proc/$_p/comm")"
		[ "$_nc" = 0 ] || _ca="$_ca $(cat "/proc/$_p/comm")"
	done
	is "$_k" " airlock-keeper" "$_label: the key's bytes are in the key holder's memory and no other's ($_counts)"
	if [ -n "$CA_FORMS" ]; then
		is "$_ca" " airlock-keeper" \
			"$_label: the CA's private key is in the key holder's memory and no other's"
	fi
	# The value is loaded by the supervisor; the workers substitute it.
	# The key holder, init, the relays, the ledger process and the DNS stub
	# never hold it.
	_s=$(echo "$_s" | tr ' ' '\n' | sort -u | tr '\n' ' ')
	is "$_s" " airlock airlock-proxy " \
		"$_label: the secret value is in the supervisor's and the workers' memory only"
	if [ -n "$INIT" ]; then
		is "$(scan "$INIT")" "$INIT:0:0:0" "$_label: the sandbox's init holds neither"
	fi
}

# start_run LABEL MODE TRANSPARENT [SCRIPT [SPEND]]: airlock run with an agent
# that makes one request, runs SCRIPT, says it is ready and waits (300 s at
# most). Its standard
# descriptors are files (so both relays run: the input one blocks on the
# agent's full stdin pipe).
start_run() {
	policy "$2" "$3" "${5:-}"
	EV="$T/$1.jsonl"
	rm -f "$WS/ready" "$WS/go"
	API_KEY=$VALUE timeout 400 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" \
		--events "$EV" --signing-key "$T/k.pem" --workers 2 -- sh -c '
curl -sS --max-time 20 -o /dev/null -w "%{http_code}\n" http://api.airlock.test/first > first.out 2>&1
'"${4:-}"'
touch ready
i=0
while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
' > "$T/$1.out" 2> "$T/$1.err" < /dev/zero &
	TPID=$!
	wait_for "$WS/ready"
	ok $? "$1: the agent runs"
	is "$(cat "$WS/first.out")" 200 "$1: its request through the proxy succeeded"
	SUP=$(pgrep -P "$TPID" -x airlock)
}

# --- shadow: then the relay is killed, and the session goes on ----------------

start_run shadow shadow false
survey shadow "$SUP"
like "$RELAYS" '^ [0-9]+ [0-9]+$' "shadow: the two relays (the caller's descriptors are files)"
kill -KILL $RELAYS
sleep 0.5
kill -0 "$SUP" 2>/dev/null
ok $? "shadow: after SIGKILL of the relay, the session goes on"
touch "$WS/go"
wait "$TPID"
is "$?" 0 "shadow: and ends with the agent's status (0)"
wait_gone $PIDS
ok $? "shadow: nothing of the session is left"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "shadow: the stream verifies"

# --- enforce: then init is killed ---------------------------------------------

start_run enforce enforce false "" spend
survey enforce "$SUP"
like "$LEDGER" '^[0-9]+$' "enforce: spend is metered: the ledger process runs"
kill -KILL "$INIT"
wait "$TPID"
is "$?" 137 "enforce: after SIGKILL of the sandbox's init, airlock run ends as the agent did (137)"
wait_gone $PIDS
ok $? "enforce: nothing of the session is left"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
is "$?" 0 "enforce: the stream verifies"
is "$(jf "$(tail -n 1 "$EV")" type)" session.end "enforce: session.end is its last line"

# --- transparent: the DNS stub is a process of its own; then the supervisor is killed

if "$AIRLOCK" doctor | grep -q '"transparent":true'; then
	# The agent throws 1500 datagrams at the stub first: random bytes of
	# every length around the header's and the limit's, and a valid query
	# with random bytes changed. The stub answers a good query after.
	start_run transparent enforce true "python3 -c '
import random, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r = random.Random(21)
q = bytes.fromhex(\"12340100000100000000000003617069076169726c6f636b04746573740000010001\")
for i in range(1500):
    if i % 2:
        n = r.choice([0, 1, 11, 12, 13, 17, 30, 200, 511, 512, 513, 1400])
        d = bytes(r.getrandbits(8) for _ in range(n))
    else:
        d = bytearray(q)
        for _ in range(r.randint(1, 4)):
            d[r.randrange(len(d))] = r.getrandbits(8)
        d = bytes(d)
    s.sendto(d, (\"127.0.0.53\", 53))
' > fuzz.out 2>&1
getent hosts api.airlock.test > after-fuzz.out 2>&1"
	survey transparent "$SUP"
	like "$STUB" '^[0-9]+$' "transparent: the DNS stub is a process of its own (airlock-dns)"
	is "$(cat "$WS/fuzz.out")" "" "transparent: the agent sent its 1500 datagrams to the stub"
	like "$(head -n 1 "$WS/after-fuzz.out")" '^240\.0\.0\.[0-9]+ ' \
		"transparent: after them the stub, the same process, answers a good query with a synthetic address"
	kill -KILL "$SUP"
	wait "$TPID"
	is "$?" 137 "transparent: SIGKILL of the supervisor"
	wait_gone $PIDS
	ok $? "transparent: every process of the session ends with it (key holder, workers, stub, init)"
	is "$(pgrep -f "$WS" | wc -l)" 0 "transparent: the agent too"
	"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
	like "$?:$(cat "$T/verify.out")" '^1:.*truncated' \
		"transparent: the stream has no session.end: verify says it is truncated"
else
	ok 0 "# skip this host cannot run transparent mode (airlock doctor)"
fi

# --- transparent: a killed DNS stub ends the session, recorded ---------------------

if "$AIRLOCK" doctor | grep -q '"transparent":true'; then
	start_run stub-kill enforce true
	STUB=$(pgrep -P "$SUP" -x airlock-dns)
	like "$STUB" '^[0-9]+$' "stub-kill: the DNS stub runs"
	PIDS="$SUP $(pgrep -P "$SUP" | tr '\n' ' ')"
	kill -KILL "$STUB"
	wait "$TPID"
	is "$?" 125 "stub-kill: after SIGKILL of the DNS stub, airlock run ends with 125"
	like "$(cat "$T/stub-kill.err")" "the DNS stub ended \(killed by signal 9\): the agent lost its names" \
		"stub-kill: saying which process ended and why the session did"
	wait_gone $PIDS
	ok $? "stub-kill: nothing of the session is left"
	r=$(last_receipt proxy.error)
	is "$(jf "$r" point) $(jf "$r" rule)" "supervisor dns.stub" "stub-kill: proxy.error records it"
	is "$(jf "$(tail -n 1 "$EV")" type) $(jf "$(tail -n 1 "$EV")" subject.exit)" "session.end 125" \
		"stub-kill: session.end (125) is the last line"
	"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
	is "$?" 0 "stub-kill: the stream verifies"
else
	ok 0 "# skip this host cannot run transparent mode (airlock doctor)"
fi

# --- airlock proxy: then the key holder is killed -------------------------------

# With a platform's CA (--ca-cert/--ca-key): its private key, which the key
# holder loads to sign the leaves, is scanned for too.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=walls CA" -addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign \
	-keyout "$T/ca.key" -out "$T/ca.crt" 2>/dev/null
ok $? "a platform CA for the proxy"
key_forms "$T/ca.key" "$T/ca-forms"
CA_FORMS="$T/ca-forms.be $T/ca-forms.le $T/ca-forms.b64"
policy enforce false
EV="$T/proxy.jsonl"
API_KEY=$VALUE pl_start_proxy_ok --workers 2 --signing-key "$T/k.pem" \
	--ca-cert "$T/ca.crt" --ca-key "$T/ca.key"
req "http://api.airlock.test/proxy"
is "$CODE" 200 "proxy: a request through it succeeds"
survey proxy "$PL_PROXY_PID"
kill -KILL "$KEEPER"
wait_gone $PIDS
ok $? "proxy: after SIGKILL of the key holder, the proxy and its workers end"
wait "$PL_PROXY_PID"
is "$?" 125 "proxy: with 125"
PL_PROXY_PID=""
like "$(cat "$T/proxy.err")" 'the key holder was killed by signal 9' "proxy: saying why"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$EV" > "$T/verify.out" 2>&1
like "$?:$(cat "$T/verify.out")" '^1:.*truncated' "proxy: verify says the stream is truncated"

# --- the live feed: airlock-feed, the key holder's child, is confined too -------

# (no collector listens: the feed retries, and the session does not wait)
policy shadow false
rm -f "$WS/ready" "$WS/go"
API_KEY=$VALUE timeout 400 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" --events "$T/feed.jsonl" \
	--events "otlp+http://127.0.0.1:9/v1/logs" --signing-key "$T/k.pem" -- sh -c '
touch ready
i=0
while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
' > "$T/feed.out" 2> "$T/feed.err" < /dev/null &
TPID=$!
wait_for "$WS/ready"
ok $? "feed: the agent runs"
SUP=$(pgrep -P "$TPID" -x airlock)
KEEPER=$(pgrep -P "$SUP" -x airlock-keeper)
FEEDP=$(pgrep -P "$KEEPER" -x airlock-feed)
like "$FEEDP" '^[0-9]+$' "feed: the key holder has one child, airlock-feed"
is "$(dumpable "$FEEDP")" 0 "feed: it is not dumpable"
is "$(field "$FEEDP" Seccomp) $(field "$FEEDP" NoNewPrivs) $(field "$FEEDP" CapEff)" \
	"2 1 0000000000000000" "feed: its own seccomp filter, no_new_privs, no capabilities"
is "$(timeout 120 gdb -nx -q -batch -p "$FEEDP" -ex 'set debuginfod enabled off' \
	-ex 'print (int)open("/etc/hostname", 0)' -ex 'print *(int *)__errno_location()' \
	-ex 'print (int)execve("/bin/sh", (char **)0, (char **)0)' \
	-ex 'print *(int *)__errno_location()' \
	-ex 'print (int)fork()' -ex 'print *(int *)__errno_location()' \
	-ex 'print (int)getppid()' 2>/dev/null | sed -n 's/^\$[0-9]* = //p' | tr '\n' ' ')" \
	"-1 1 -1 1 -1 1 $KEEPER " \
	"feed: in it, open (even read-only), execve and fork fail (EPERM); getppid works"
is "$(scan "$FEEDP")" "$FEEDP:0:0:0" "feed: it holds neither the key nor the secret value"
touch "$WS/go"
wait "$TPID"
is "$?" 0 "feed: the session ends with the agent's status"
"$AIRLOCK" verify --pubkey "$T/k.pub" "$T/feed.jsonl" > "$T/verify.out" 2>&1
is "$?" 0 "feed: its local stream verifies"

done_testing
