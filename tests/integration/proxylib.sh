# proxylib.sh - shared setup of the egress proxy tests (50-54). Source it
# after lib.sh. It refuses to run outside tests/netns-exec: it adds
# addresses to lo and starts servers on them.
#
# The address plan (all on lo, inside the test's own network namespace;
# 198.18.0.0/15 is special-purpose, so policies list it in allow_ranges):
#
#   198.18.0.10  http :80, tls :443, sink :8080      api/git.airlock.test
#   198.18.0.11  http :80, http :8081, tls :443      www, cdn names, port.
#   198.18.0.12  http :80, sink :443                 the allowed IP literal
#   198.18.0.13  sink :80 :443                       names that must be denied
#   198.18.0.14  nothing listens                     closed.airlock.test
#   127.0.0.1, 169.254.169.254, 100.64.0.1           sink :80 :443
#   ::1, fd00::1, 64:ff9b::a9fe:a9fe,
#   2002:a9fe:a9fe::, ::a9fe:a9fe                    sink :80 :443 (if IPv6)
#   2001:db8:a::10                                   http :80 (allow_ranges)
#   127.0.0.1:5353                                   DNS (udp, tcp): $PL_ZONE
#
# A sink logs every connection: a test proves that a denied target was
# never reached by finding no sink line for it (net_count). 10.0.0.1
# appears in DNS answers only, and so does 10.1.2.3; they are never added
# anywhere and must never be connected to. PL_HRR lists "hrr" listeners
# (testnet.py: a server that answers a HelloRetryRequest).
#
# Functions (each bounded in time):
#   pl_start_net                  start testnet.py ($PL_HTTP, $PL_TLS, $PL_SINK)
#   pl_start_proxy [ARGS]         airlock proxy --policy $POLICY --listen $PROXY
#                                 --events $EV ARGS; waits for "listening"
#                                 (with ulimit -n $PL_ULIMIT_N if set)
#   pl_start_proxy_ok [ARGS]      the same as a test; bails out on failure
#   pl_stop_proxy                 SIGTERM, wait (10 s), returns its status
#   pl_proxy_pids                 the proxy's processes: the supervisor and
#                                 its workers (one event loop each)
#   pl_proxy_cpu_ticks            their user+system CPU time, in clock ticks
#   req URL [CURL ARGS]           curl through the proxy: $CODE, $T/h, $T/b
#   raw DATA [SEND ARGS]          raw bytes to the proxy: $CODE, $T/h, $T/b
#   raw_file FILE [SEND ARGS]     the same with the bytes of FILE
#   hdr NAME                      a header of the last answer ($T/h)
#   receipt_of SEQ                the receipt line with that seq ($EV)
#   last_receipt TYPE             the last receipt line of that type
#   count_receipts TYPE           how many receipts of that type
#   wait_receipts TYPE N          wait (10 s) until there are N of TYPE
#   jf JSON PATH                  a member (dotted path) of a JSON text
#   net_count K=V|K~V...          net.log lines with these members (~: the
#                                 member contains V)
#   net_last K=V...               the last such line
#   blocked DESC CODE RULE [LISTEN...]   the last answer was a block by RULE
#                                 with its receipt, and no LISTEN was reached
#   failed DESC CODE RULE         a 502-style failure by RULE (proxy.error or
#                                 egress.block receipt, decision block)
#   malformed DESC                the last answer was a 400 with a proxy.error
#                                 receipt
#   invalid_host DESC [LISTEN...] 403 host.invalid or 400 (not a valid name)
#   allowed_http DESC LISTEN PATH HOSTRE   a 200 from LISTEN for PATH
#   pl_control_sinks              control: every sink logs a direct connection
#   verdict                       "CODE RULE type/decision/rule" of the last
#                                 answer and the receipt it names

: "${T:?source lib.sh first}"
TESTNET="$AIRLOCK_SRC/tests/helpers/testnet.py"
PL_PORT=18080
PROXY="127.0.0.1:$PL_PORT"
PL_RESOLVER="127.0.0.1:5353"
NETLOG="$T/net.log"
EV="$T/events.jsonl"
POLICY="$T/policy.json"
CA="$T/tls/ca.pem"
PL_PROXY_PID=""
PL_NET_PID=""
CODE=""

if [ "${AIRLOCK_TEST_NETNS:-}" != 1 ] || [ "$(ip -o link show | wc -l)" -ne 1 ]; then
	echo "Bail out! run through tests/netns-exec (make check): this test adds addresses to lo"
	exit 1
fi

pl_cleanup() {
	if [ -n "$PL_PROXY_PID" ]; then
		kill -TERM "$PL_PROXY_PID" 2>/dev/null
		i=0
		while kill -0 "$PL_PROXY_PID" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$PL_PROXY_PID" 2>/dev/null
	fi
	[ -n "$PL_NET_PID" ] && kill -TERM "$PL_NET_PID" 2>/dev/null
	for p in $PL_EXTRA_PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	# testnet.py may still be logging: let it go before removing $T
	i=0
	while [ -n "$PL_NET_PID" ] && kill -0 "$PL_NET_PID" 2>/dev/null && [ $i -lt 30 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	rm -rf "$T"
}
PL_EXTRA_PIDS=""
trap pl_cleanup EXIT

# --- addresses ---------------------------------------------------------------

PL_V6=no
for a in 198.18.0.10 198.18.0.11 198.18.0.12 198.18.0.13 198.18.0.14 169.254.169.254 100.64.0.1; do
	ip addr add "$a/32" dev lo || { echo "Bail out! ip addr add $a"; exit 1; }
done
if ip -6 addr add fd00::1/128 dev lo nodad 2>/dev/null; then
	PL_V6=yes
	for a in 64:ff9b::a9fe:a9fe 2002:a9fe:a9fe:: ::a9fe:a9fe 2001:db8:a::10; do
		ip -6 addr add "$a/128" dev lo nodad || PL_V6=no
	done
fi

# --- servers -------------------------------------------------------------------

PL_HTTP="198.18.0.10:80 198.18.0.11:80 198.18.0.11:8081 198.18.0.12:80"
PL_TLS="198.18.0.10:443 198.18.0.11:443"
PL_SINK="198.18.0.10:8080 198.18.0.12:443 198.18.0.13:80 198.18.0.13:443
127.0.0.1:80 127.0.0.1:443 169.254.169.254:80 169.254.169.254:443
100.64.0.1:80 100.64.0.1:443"
if [ "$PL_V6" = yes ]; then
	PL_HTTP="$PL_HTTP [2001:db8:a::10]:80"
	PL_SINK="$PL_SINK [::1]:80 [::1]:443 [fd00::1]:80 [fd00::1]:443
[64:ff9b::a9fe:a9fe]:80 [64:ff9b::a9fe:a9fe]:443
[2002:a9fe:a9fe::]:80 [2002:a9fe:a9fe::]:443 [::a9fe:a9fe]:80 [::a9fe:a9fe]:443"
fi
PL_HRR=""
PL_TLS_NAMES="api.airlock.test git.airlock.test www.airlock.test other.airlock.test rebind443.airlock.test"

# The DNS zone (TTL 0 everywhere; unknown names are NXDOMAIN).
# big: 40 A records (over 512 bytes: TCP only), the first 198.18.0.11;
# bigmixed: the same with 10.0.0.1 last; bigmixed21: 10.0.0.1 21st of 41;
# bigv6: the 40 A records and an AAAA fd00::1.
PL_BIG=$(python3 -c 'print(", ".join(["\"198.18.0.11\""] + ["\"198.18.1.%d\"" % i for i in range(1, 40)]))')
PL_BIG21=$(python3 -c 'print(", ".join(["\"198.18.0.11\""] + ["\"198.18.1.%d\"" % i for i in range(1, 20)] + ["\"10.0.0.1\""] + ["\"198.18.1.%d\"" % i for i in range(20, 40)]))')
PL_ZONE='{
  "big.airlock.test": ['"$PL_BIG"'],
  "bigmixed.airlock.test": ['"$PL_BIG"', "10.0.0.1"],
  "bigmixed21.airlock.test": ['"$PL_BIG21"'],
  "bigv6.airlock.test": ['"$PL_BIG"', "fd00::1"],
  "api.airlock.test": ["198.18.0.10"],
  "git.airlock.test": ["198.18.0.10"],
  "www.airlock.test": ["198.18.0.11"],
  "new.airlock.test": ["198.18.0.11"],
  "port.airlock.test": ["198.18.0.11"],
  "both.airlock.test": ["198.18.0.11"],
  "blocked.both.airlock.test": ["198.18.0.13"],
  "a.b.both.airlock.test": ["198.18.0.11"],
  "x.cdn.airlock.test": ["198.18.0.11"],
  "deep.x.cdn.airlock.test": ["198.18.0.11"],
  "private.cdn.airlock.test": ["198.18.0.13"],
  "cdn.airlock.test": ["198.18.0.13"],
  "evilcdn.airlock.test": ["198.18.0.13"],
  "evilapi.airlock.test": ["198.18.0.13"],
  "api.airlock.test.evil.test": ["198.18.0.13"],
  "other.airlock.test": ["198.18.0.13"],
  "xn--pi-7ka.airlock.test": ["198.18.0.13"],
  "loop.airlock.test": ["127.0.0.1"],
  "self.airlock.test": ["127.0.0.1"],
  "meta.airlock.test": ["169.254.169.254"],
  "cgnat.airlock.test": ["100.64.0.1"],
  "mixed.airlock.test": ["198.18.0.10", "10.0.0.1"],
  "mixed2.airlock.test": ["10.0.0.1", "198.18.0.10"],
  "rebind.airlock.test": {"seq": [{"A": ["198.18.0.10"]}, {"A": ["127.0.0.1"]}]},
  "rebind443.airlock.test": {"seq": [{"A": ["198.18.0.10"]}, {"A": ["127.0.0.1"]}]},
  "v6loop.airlock.test": {"AAAA": ["::1"]},
  "v6ula.airlock.test": {"AAAA": ["fd00::1"]},
  "v6mapped.airlock.test": {"AAAA": ["::ffff:169.254.169.254"]},
  "dual.airlock.test": {"A": ["198.18.0.10"], "AAAA": ["fd00::1"]},
  "v6pub.airlock.test": {"AAAA": ["2001:db8:a::10"]},
  "dualpub.airlock.test": {"A": ["198.18.0.11"], "AAAA": ["2001:db8:a::10"]},
  "alias.airlock.test": {"CNAME": "api.airlock.test"},
  "badalias.airlock.test": {"CNAME": "loop.airlock.test"},
  "empty.airlock.test": {"A": [], "AAAA": []},
  "servfail.airlock.test": {"rcode": "SERVFAIL"},
  "slow.airlock.test": {"drop": true},
  "closed.airlock.test": ["198.18.0.14"],
  "rebindka.airlock.test": {"seq": [{"A": ["198.18.0.10"]}, {"A": ["127.0.0.1"]}]},
  "slowok.airlock.test": {"delay": 2, "A": ["198.18.0.10"]},
  "selfif.airlock.test": ["198.18.0.10"],
  "dnsdeny.airlock.test": ["10.1.2.3"],
  "dnsdenyport.airlock.test": ["198.18.0.11"]
}'

# `airlock check` refuses $POLICY edited by a sed script, saying REGEX.
pl_policy_refused() { # SED REGEX DESC
	sed "$1" "$POLICY" > "$T/bad.json"
	like "$("$AIRLOCK" check "$T/bad.json" 2>&1)" "$2" "$3"
}

# Lists of endpoints -> JSON arrays.
pl_json_list() {
	python3 -c 'import json, sys; print(json.dumps(sys.argv[1].split()))' "$1"
}

pl_start_net() {
	_pl_answers=${PL_ANSWERS:-'{}'}
	cat > "$T/net.json" <<EOF
{
  "log": "$NETLOG",
  "ready": "$T/net.ready",
  "lifetime": 600,
  "dns": {"listen": ["$PL_RESOLVER"], "zone": $PL_ZONE},
  "http": $(pl_json_list "$PL_HTTP"),
  "tls": {"dir": "$T/tls", "names": $(pl_json_list "$PL_TLS_NAMES"),
          "listen": $(pl_json_list "$PL_TLS")},
  "sink": $(pl_json_list "$PL_SINK"),
  "hrr": $(pl_json_list "$PL_HRR"),
  "answers": $_pl_answers
}
EOF
	python3 "$TESTNET" --config "$T/net.json" >"$T/net.out" 2>&1 &
	PL_NET_PID=$!
	i=0
	while [ ! -f "$T/net.ready" ] && [ $i -lt 200 ]; do
		kill -0 "$PL_NET_PID" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	if [ ! -f "$T/net.ready" ]; then
		echo "Bail out! testnet.py did not start: $(cat "$T/net.out")"
		exit 1
	fi
}

# --- the proxy -------------------------------------------------------------------

# pl_start_proxy [ARGS...]: starts airlock proxy; returns 1 (with the
# reason on stdout as a TAP comment) if it does not say it listens within
# 10 s.
pl_start_proxy() {
	: > "$T/proxy.err"
	PL_EV_MARK=0 # a new stream
	if [ -n "${PL_ULIMIT_N:-}" ]; then
		# shellcheck disable=SC2016
		sh -c 'ulimit -n "$0" && exec "$@"' "$PL_ULIMIT_N" \
			"$AIRLOCK" proxy --policy "$POLICY" --listen "$PROXY" --events "$EV" "$@" \
			>"$T/proxy.out" 2>"$T/proxy.err" </dev/null &
	else
		"$AIRLOCK" proxy --policy "$POLICY" --listen "$PROXY" --events "$EV" "$@" \
			>"$T/proxy.out" 2>"$T/proxy.err" </dev/null &
	fi
	PL_PROXY_PID=$!
	i=0
	while [ $i -lt 100 ]; do
		if grep -q "airlock proxy: listening on $PROXY" "$T/proxy.err"; then
			return 0
		fi
		kill -0 "$PL_PROXY_PID" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	sed 's/^/# proxy: /' "$T/proxy.err"
	return 1
}

# pl_start_proxy_ok [ARGS]: pl_start_proxy as a test; bails out when the
# proxy does not start (every later check would fail for that one reason).
pl_start_proxy_ok() {
	pl_start_proxy "$@"
	_st=$?
	ok $_st "airlock proxy $* starts and says it listens on $PROXY"
	if [ $_st -ne 0 ]; then
		echo "Bail out! airlock proxy did not start"
		exit 1
	fi
}

# pl_stop_proxy: SIGTERM; returns the proxy's exit status (124 if it was
# still running after 10 s, then killed; 99 if a sanitizer reported an
# error on its stderr).
pl_stop_proxy() {
	[ -n "$PL_PROXY_PID" ] || return 0
	kill -TERM "$PL_PROXY_PID" 2>/dev/null
	i=0
	while kill -0 "$PL_PROXY_PID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$PL_PROXY_PID" 2>/dev/null; then
		kill -KILL "$PL_PROXY_PID"
		wait "$PL_PROXY_PID" 2>/dev/null
		PL_PROXY_PID=""
		return 124
	fi
	wait "$PL_PROXY_PID"
	st=$?
	PL_PROXY_PID=""
	# Under make SAN=1 a sanitizer report fails the test even when the
	# proxy went on.
	if grep -q 'Sanitizer\|runtime error:' "$T/proxy.err"; then
		sed 's/^/# proxy: /' "$T/proxy.err" | head -n 40
		return 99
	fi
	return $st
}

# pl_proxy_pids: $PL_PROXY_PID and its proxy workers (named airlock-proxy),
# which serve the connections.
pl_proxy_pids() {
	echo "$PL_PROXY_PID"
	pgrep -P "$PL_PROXY_PID" -x airlock-proxy
}

pl_proxy_cpu_ticks() {
	_t=0
	for _p in $(pl_proxy_pids); do
		_t=$((_t + $(awk '{ print $14 + $15 }' "/proc/$_p/stat" 2>/dev/null || echo 0)))
	done
	echo "$_t"
}

# --- requests ---------------------------------------------------------------------

# req URL [CURL ARGS...]: one request through the proxy with curl. Sets
# CODE (the final status; for a refused CONNECT, the CONNECT's) and
# CURL_RC (curl's exit status; 28: it timed out after 20 s), writes
# the answer's head to $T/h and its body to $T/b.
req() {
	_u=$1
	shift
	pl_mark
	rm -f "$T/h" "$T/b"
	CODE=$(curl -sS --max-time 20 -x "http://$PROXY" -o "$T/b" -D "$T/h" \
		-w '%{http_code} %{http_connect}' "$@" "$_u" 2>"$T/curl.err")
	CURL_RC=$?
	_c=${CODE% *}
	_p=${CODE#* }
	if [ "$_c" = 000 ] && [ "$_p" != 000 ]; then
		CODE=$_p
	else
		CODE=$_c
	fi
	[ -f "$T/h" ] || : > "$T/h"
	[ -f "$T/b" ] || : > "$T/b"
}

# h2c URL [CURL ARGS]: curl --http2 through the proxy, trusting $SCA (the
# session CA); $CODE, $VER (the HTTP version), $CURL_RC, $T/h, $T/b
h2c() {
	_u=$1
	shift
	pl_mark
	: > "$T/h"
	: > "$T/b"
	_o=$(curl -sS --http2 --max-time 20 --proxy "http://$PROXY" --cacert "$SCA" \
		-D "$T/h" -o "$T/b" -w '%{http_code} %{http_version}' "$@" "$_u" 2>"$T/curl.err")
	CURL_RC=$?
	CODE=${_o% *}
	VER=${_o#* }
}

# raw DATA [SEND ARGS...]: sends DATA (\r \n \xHH escapes) to the proxy,
# reads until it closes or is idle 2 s; the first answer's head in $T/h,
# everything after it in $T/b, the whole answer in $T/raw, status in CODE.
raw() {
	_d=$1
	shift
	pl_mark
	python3 "$TESTNET" send "$PROXY" --data "$_d" --idle 2 --timeout 20 \
		--report "$T/raw.report" "$@" > "$T/raw"
	pl_split "$T/raw"
}

# raw_file FILE [SEND ARGS...]: as raw, with the bytes of FILE.
raw_file() {
	_f=$1
	shift
	pl_mark
	python3 "$TESTNET" send "$PROXY" --idle 2 --timeout 20 \
		--report "$T/raw.report" "$@" < "$_f" > "$T/raw"
	pl_split "$T/raw"
}

pl_split() {
	CURL_RC=0
	python3 - "$1" "$T/h" "$T/b" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"\r\n\r\n")
head, body = (d[:i + 4], d[i + 4:]) if i >= 0 else (d, b"")
open(sys.argv[2], "wb").write(head)
open(sys.argv[3], "wb").write(body)
PY
	CODE=$(head -n 1 "$T/h" | tr -d '\r' | sed -n 's/^HTTP\/1\.[01] \([0-9][0-9][0-9]\).*/\1/p')
	[ -n "$CODE" ] || CODE=none
}

# hdr NAME: the value of the last NAME header in $T/h.
hdr() {
	tr -d '\r' < "$T/h" | awk -v n="$1" 'BEGIN { n = tolower(n) }
		{ i = index($0, ":"); if (i && tolower(substr($0, 1, i - 1)) == n) { v = substr($0, i + 1); sub(/^[ \t]+/, "", v); r = v } }
		END { print r }'
}

# --- receipts ---------------------------------------------------------------------

receipt_of() {
	python3 - "$EV" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        if str(json.loads(line)["seq"]) == sys.argv[2]:
            print(line.rstrip("\n"))
    except (ValueError, KeyError):
        pass
PY
}

# pl_mark: the request helpers (req, h2c, raw, raw_file) note how many
# lines the stream held before their request, so that last_receipt can
# wait for the request's own receipt: a worker sends a receipt and goes
# on (only a block's seq is awaited), so the line may reach $EV a moment
# after the client has its answer.
pl_mark() {
	PL_EV_MARK=$({ wc -l < "$EV"; } 2>/dev/null || echo 0)
}

# last_receipt TYPE: the last TYPE line of $EV; when the last request
# helper's request has written none yet, waits for one (5 s at most: a
# test may ask for an older receipt, which it then gets).
last_receipt() {
	_i=0
	while [ $_i -lt 50 ] && ! tail -n "+$((${PL_EV_MARK:-0} + 1))" "$EV" 2>/dev/null |
		grep -q "\"type\":\"$1\""; do
		sleep 0.1
		_i=$((_i + 1))
	done
	grep "\"type\":\"$1\"" "$EV" 2>/dev/null | tail -n 1
}

count_receipts() {
	grep -c "\"type\":\"$1\"" "$EV" 2>/dev/null
}

wait_receipts() {
	i=0
	while [ "$(count_receipts "$1")" -lt "$2" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

# jf JSON PATH: a member by dotted path ("subject.host", "subject.addresses.0.class");
# strings raw, other values as compact JSON, absent: empty.
jf() {
	python3 - "$1" "$2" <<'PY'
import json, sys
try:
    v = json.loads(sys.argv[1])
    for k in sys.argv[2].split("."):
        v = v[int(k)] if isinstance(v, list) else v[k]
except (ValueError, KeyError, IndexError, TypeError):
    sys.exit(0)
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
PY
}

# --- the test network's log -------------------------------------------------------

net_query() {
	python3 - "$NETLOG" "$@" <<'PY'
import json, sys
mode, filt = sys.argv[2], sys.argv[3:]
out = []
for line in open(sys.argv[1]):
    e = json.loads(line)
    def m(f):
        if "~" in f and ("=" not in f or f.index("~") < f.index("=")):
            k, _, v = f.partition("~")
            return v in str(e.get(k, ""))
        k, _, v = f.partition("=")
        return str(e.get(k)) == v
    if all(m(f) for f in filt):
        out.append(line.rstrip("\n"))
if mode == "count":
    print(len(out))
elif out:
    print(out[-1])
PY
}
net_count() { net_query count "$@"; }
net_last() { net_query last "$@"; }

# pl_control_sinks: control for the "nothing reached" checks: connects
# straight to every sink (all at once, from one process) and checks that
# each one logged it.
pl_control_sinks() {
	_n0=$(net_count srv=sink event=connect)
	_want=0
	for _e in $PL_SINK; do
		_want=$((_want + 1))
	done
	# shellcheck disable=SC2086
	python3 - $PL_SINK <<'PY'
import socket, sys
socks = []
for e in sys.argv[1:]:
    host, _, port = e.rpartition(":")
    host = host.strip("[]")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        s.sendall(b"control")
    except OSError:
        pass
    socks.append(s)
for s in socks:
    s.close()
PY
	_i=0
	while [ "$(net_count srv=sink event=connect)" -lt $((_n0 + _want)) ] && [ $_i -lt 50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	is "$(($(net_count srv=sink event=connect) - _n0))" "$_want" "control: each of the $_want sinks logs a direct connection"
}

# --- assertions -------------------------------------------------------------------

# verdict: "CODE RULE type/decision/rule" for the last answer (one python3
# for the headers and the receipt: this runs after nearly every request).
verdict() {
	python3 - "$CODE" "$T/h" "$EV" <<'PY'
import json, sys
code, hfile, ev = sys.argv[1:4]
rule = seq = None
try:
    for line in open(hfile, "rb").read().decode("latin-1").split("\n"):
        name, sep, value = line.rstrip("\r").partition(":")
        if not sep:
            continue
        if name.lower() == "x-airlock-rule":
            rule = value.strip(" \t")
        elif name.lower() == "x-airlock-receipt":
            seq = value.strip(" \t")
except OSError:
    pass
r = {}
if seq:
    try:
        for line in open(ev):
            try:
                e = json.loads(line)
                if str(e["seq"]) == seq:
                    r = e
            except (ValueError, KeyError):
                pass
    except OSError:
        pass
def f(k):
    v = r.get(k)
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
sys.stdout.write("%s %s %s/%s/%s" % (code, rule or "no-rule-header", f("type"), f("decision"), f("rule")))
PY
}

# blocked DESC CODE RULE [LISTEN...]: the last answer is CODE with
# X-Airlock-Rule RULE, its X-Airlock-Receipt names an egress.block receipt
# (decision block) by RULE, and no listener LISTEN saw a connection.
blocked() {
	_desc=$1 _code=$2 _want=$3
	shift 3
	is "$(verdict)" "$_code $_want egress.block/block/$_want" "$_desc"
	net_none "$_desc" "$@"
}

# net_none DESC LISTEN...: one test a listener: none of them saw a
# connection (one python3 for them all).
net_none() {
	_desc=$1
	shift
	[ $# -gt 0 ] || return 0
	python3 - "$NETLOG" "$@" <<'PY' > "$T/net_none"
import json, sys
n = {l: 0 for l in sys.argv[2:]}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("listen") in n:
        n[e["listen"]] += 1
for l in sys.argv[2:]:
    print(n[l])
PY
	for _l in "$@"; do
		_c=$(sed -n 1p "$T/net_none")
		sed -i 1d "$T/net_none"
		is "${_c:-missing}" 0 "$_desc: nothing reached $_l"
	done
}

# failed DESC CODE RULE: the last answer is CODE by RULE, a failure rather
# than a policy decision (dns.failure, upstream.connect): its receipt is a
# proxy.error or an egress.block, decision block.
failed() {
	like "$(verdict)" "^$2 $3 (egress\.block|proxy\.error)/block/$3\$" "$1"
}

# malformed DESC: a 400 whose receipt is a proxy.error (block) with the
# rule the X-Airlock-Rule header names.
malformed() {
	_rule=$(hdr X-Airlock-Rule)
	like "$(verdict)" "^400 [^ ]+ proxy\.error/block/$(printf '%s' "$_rule" | sed 's/[].[*^$]/\\&/g')\$" "$1"
}

# invalid_host DESC [LISTEN...]: a target that is not a valid name: either
# 403 host.invalid (egress.block) or 400 (proxy.error: the strict parser
# refused the request line); never forwarded.
invalid_host() {
	_desc=$1
	shift
	like "$(verdict)" '^(403 host\.invalid egress\.block/block/host\.invalid|400 [^ ]+ proxy\.error/block/[^ ]+)$' "$_desc"
	net_none "$_desc" "$@"
}

# allowed_http DESC LISTEN PATH HOSTRE: the last answer is the upstream
# LISTEN's 200 for PATH (and curl, if it was req, ended without error).
allowed_http() {
	_first=$(head -n 1 "$T/b")
	like "$CODE ${CURL_RC:-0} $_first" "^200 0 hello from $2 method=[A-Z]+ path=$3 host=$4 body-length=[0-9]+\$" "$1"
}
