#!/bin/sh
# Published ports (SPEC §5.6): a small HTTP + WebSocket server and a TCP
# server inside `airlock run --enforce`, reached from this test's network
# namespace through the policy's publish listeners: auth (bearer and
# cookie) checked, refused with 401 and a receipt without it, stripped
# before the agent's server; strict parsing (400); a WebSocket upgrade
# relayed; a long answer cut at max_response_bytes and recorded; max_conns;
# an unlisted port of the sandbox unreachable; a wildcard listen refused in
# enforce; the relay holds no secret and lives in the sandbox's network
# namespace.
. "$(dirname "$0")/lib.sh"

WS="$T/ws"
EV="$T/events.jsonl"
mkdir "$WS"

# --- the agent's servers ------------------------------------------------------

cat > "$WS/servers.py" <<'PY'
import base64, hashlib, os, socket, sys, threading, time
ready, stop = sys.argv[1], sys.argv[2]
env_has_value = any("pub-s3cret-value" in v for v in os.environ.values())

def http_conn(c):
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        method, target, _ = line.decode().split(" ", 2)
        hdrs = {}
        raw = []
        while True:
            h = f.readline().decode()
            if h in ("\r\n", ""):
                break
            raw.append(h.rstrip("\r\n"))
            k, v = h.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        if target == "/early":
            # An answer before the body is read (a 413, say), then the body.
            c.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
            f.read(n)
            continue
        body = f.read(n) if n else b""
        if hdrs.get("upgrade", "").lower() == "websocket":
            key = hdrs["sec-websocket-key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % acc).encode())
            hdr = f.read(2)
            ln = hdr[1] & 0x7f
            mask = f.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(f.read(ln)))
            out = b"echo:" + data
            c.sendall(bytes([0x81, len(out)]) + out)
            time.sleep(0.2)
            return
        if target.startswith("/big"):
            out = b"x" * 1000000
        else:
            out = ("method=%s target=%s authorization=%s cookie=%s body=%d env_has_value=%s\n" % (
                method, target, hdrs.get("authorization"), hdrs.get("cookie"), len(body),
                env_has_value)).encode()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)

def tcp_conn(c):
    c.sendall(b"y" * 20000)
    time.sleep(0.5)
    c.close()

def serve(port, fn):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=fn, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()

serve(8000, http_conn)
serve(8001, tcp_conn)
serve(9999, tcp_conn)   # listening, but not published
open(ready, "w").write("ready\n")
deadline = time.time() + 90
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY

# A free port of this namespace.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
P1=$(free_port)
P2=$(free_port)
P3=$(free_port)
P4=$(free_port)
while [ "$P2" = "$P1" ]; do P2=$(free_port); done
while [ "$P3" = "$P1" ] || [ "$P3" = "$P2" ]; do P3=$(free_port); done
while [ "$P4" = "$P1" ] || [ "$P4" = "$P2" ] || [ "$P4" = "$P3" ]; do P4=$(free_port); done
P5=$(free_port)
while [ "$P5" = "$P1" ] || [ "$P5" = "$P2" ] || [ "$P5" = "$P3" ] || [ "$P5" = "$P4" ]; do
	P5=$(free_port)
done

cat > "$T/policy.json" <<EOF
{"version": 1, "mode": "enforce",
 "secrets": {"pubauth": {"from_env": "PUB_TOKEN", "hosts": []}},
 "publish": [
  {"listen": "127.0.0.1:$P1", "port": 8000, "auth": "pubauth", "auth_cookie": "airlock_auth",
   "max_response_bytes": 100000},
  {"listen": "127.0.0.1:$P2", "port": 8001, "protocol": "tcp", "max_response_bytes": 5000},
  {"listen": "127.0.0.1:$P3", "port": 8000, "max_conns": 1},
  {"listen": "127.0.0.1:$P5", "port": 8002}
 ]}
EOF

PUB_TOKEN=pub-s3cret-value AIRLOCK_TEST_TIMEOUTS=head=1500 "$AIRLOCK" run --policy "$T/policy.json" --events "$EV" \
	--workspace "$WS" --publish "127.0.0.1:$P4:8000" -- \
	python3 servers.py "$WS/ready" "$WS/stop" > "$T/run.out" 2> "$T/run.err" &
rpid=$!
trap 'touch "$WS/stop"; kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null; rm -rf "$T"' EXIT
wait_grep "$WS/ready" ready 30
ok $? "the agent's servers are up in the sandbox"
[ -f "$WS/ready" ] || diag_file "$T/run.err"

# One raw exchange: prints everything the listener answers.
raw() {
	python3 - "$@" <<'PY'
import socket, sys
port, data = int(sys.argv[1]), sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(data)
out = b""
while True:
    try:
        b = s.recv(65536)
    except socket.timeout:
        break
    if not b:
        break
    out += b
sys.stdout.write(out.decode("latin-1"))
PY
}

# --- auth -------------------------------------------------------------------------

out=$(curl -s -m 10 -o "$T/body" -w '%{http_code}' "http://127.0.0.1:$P1/hello?q=secretquery")
is "$out" 401 "without the auth value: 401"
like "$(cat "$T/body")" 'no credential.*receipt [0-9]+' "the 401 names why and its receipt"
wait_grep "$EV" '"type":"http.inbound","decision":"block".*"rule":"publish.auth".*"path":"/hello"'
ok $? "the refusal is an http.inbound block receipt (rule publish.auth)"

out=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong-value' \
	"http://127.0.0.1:$P1/hello")
is "$out" 401 "with a wrong bearer token: 401"
out=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -b 'airlock_auth=pub-s3cret-valuX' \
	"http://127.0.0.1:$P1/hello")
is "$out" 401 "with a wrong cookie: 401"
out=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -b 'other=pub-s3cret-value' \
	"http://127.0.0.1:$P1/hello")
is "$out" 401 "the value in another cookie than auth_cookie: 401"

out=$(curl -s -m 10 -H 'Authorization: Bearer pub-s3cret-value' "http://127.0.0.1:$P1/hello?q=1")
like "$out" '^method=GET target=/hello\?q=1 authorization=None cookie=None body=0' \
	"with the bearer token: relayed, and the Authorization header never reaches the agent's server"
like "$out" 'env_has_value=False' "the auth value is nowhere in the sandbox's environment"

out=$(curl -s -m 10 -b 'a=1; airlock_auth=pub-s3cret-value; b=2' -d 'hello' \
	"http://127.0.0.1:$P1/form")
like "$out" "^method=POST target=/form authorization=None cookie=a=1; b=2 body=5" \
	"with the auth cookie: relayed with its body, the auth cookie stripped, the others kept"

wait_grep "$EV" '"type":"http.inbound","decision":"allow".*"method":"POST","path":"/form","status":200,"bytes_in":[0-9]+,"bytes_out":[0-9]+'
ok $? "an exchange is recorded: method, path, status, bytes each way"
if grep -q 'secretquery\|q=1' "$EV"; then ok 1 "no query string in the receipts"; else ok 0 "no query string in the receipts"; fi
if grep -q 'pub-s3cret-value' "$EV"; then ok 1 "the auth value is in no receipt"; else ok 0 "the auth value is in no receipt"; fi

# --- strict parsing -----------------------------------------------------------------

out=$(raw "$P1" 'GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\nAuthorization: Bearer pub-s3cret-value\r\n\r\n')
like "$out" '^HTTP/1.1 400 ' "a duplicate Host: 400"
wait_grep "$EV" '"type":"http.inbound","decision":"block".*"rule":"publish.http"'
ok $? "the 400 is an http.inbound block receipt (rule publish.http)"
out=$(raw "$P1" 'GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer pub-s3cret-value\r\n\r\n')
like "$out" '^HTTP/1.1 400 ' "an absolute-form request (a proxy request) to a published port: 400"
out=$(raw "$P1" 'CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\nAuthorization: Bearer pub-s3cret-value\r\n\r\n')
like "$out" '^HTTP/1.1 400 ' "CONNECT to a published port: 400"

# A head that never ends (slowloris): 408 after the head time-out (1.5 s
# here, AIRLOCK_TEST_TIMEOUTS), a receipt, the connection closed.
out=$(raw "$P1" 'GET /slow HTTP/1.1\r\nHost: a\r\nX-Slow: 1\r\n')
like "$out" '^HTTP/1.1 408 ' "a request head that does not end in time: 408"
wait_grep "$EV" '"type":"http.inbound","decision":"block".*"status":408'
ok $? "the 408 is an http.inbound block receipt"

# Two requests on one connection, pipelined: both answered, in order.
out=$(raw "$P1" 'GET /one HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer pub-s3cret-value\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer pub-s3cret-value\r\nConnection: close\r\n\r\n')
like "$(printf '%s' "$out" | tr -d '\r' | grep '^method=' | tr '\n' ' ')" \
	'target=/one .*target=/two ' "pipelined requests are answered in order on one connection"

# An answer that comes before the request's body has gone: the body still
# goes, and the next request on the connection is answered.
out=$(python3 - "$P1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
auth = b"Authorization: Bearer pub-s3cret-value\r\n"
s.sendall(b"POST /early HTTP/1.1\r\nHost: a\r\n" + auth + b"Content-Length: 5\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
s.sendall(b"hello" + b"GET /after HTTP/1.1\r\nHost: a\r\n" + auth + b"Connection: close\r\n\r\n")
while True:
    try:
        b = s.recv(65536)
    except socket.timeout:
        break
    if not b:
        break
    got += b
sys.stdout.write(got.decode("latin-1"))
PY
)
like "$(printf '%s' "$out" | tr -d '\r' | tr '\n' ' ')" '^HTTP/1.1 413 .*method=GET target=/after ' \
	"an answer before the request body: the body goes on, the next request is answered"

# --- WebSocket ------------------------------------------------------------------------

out=$(python3 - "$P1" <<'PY'
import base64, os, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Cookie: airlock_auth=pub-s3cret-value\r\n\r\n" % key).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, rest = buf.split(b"\r\n\r\n", 1)
msg = b"ping-frame"
mask = os.urandom(4)
s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
while len(rest) < 2 or len(rest) < 2 + rest[1]:
    rest += s.recv(4096)
print(head.split(b"\r\n")[0].decode(), rest[2:2 + rest[1]].decode())
PY
)
like "$out" '^HTTP/1.1 101 .* echo:ping-frame$' "a WebSocket upgrade is relayed, frames both ways"
wait_grep "$EV" '"type":"http.inbound","decision":"allow".*"path":"/ws","status":101'
ok $? "the upgrade is recorded (status 101)"

# --- limits -------------------------------------------------------------------------

curl -s -m 10 -H 'Authorization: Bearer pub-s3cret-value' -o "$T/big" "http://127.0.0.1:$P1/big"
rc=$?
is "$(wc -c < "$T/big" | tr -d ' ')" 100000 "a 1 MB answer through a listener of max_response_bytes 100000: 100000 bytes reach the client"
ok $([ "$rc" -ne 0 ]; echo $?) "the client sees the answer cut short (curl $rc)"
wait_grep "$EV" '"type":"http.inbound","decision":"block".*"rule":"publish.max_response_bytes".*"path":"/big".*"cut":true'
ok $? "the cut is recorded (http.inbound block, cut: true)"

python3 - "$P2" > "$T/tcp" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(str(len(out)))
PY
is "$(cat "$T/tcp")" 5000 "a tcp listener with max_response_bytes 5000: the 20000 bytes the server sends are cut at 5000"
wait_grep "$EV" '"type":"inbound.cut","decision":"block".*"rule":"publish.max_response_bytes"'
ok $? "the tcp cut is recorded (inbound.cut)"

# max_conns 1: a second connection while one is open is closed at once.
python3 - "$P3" > "$T/conns" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port), timeout=5)
a.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
a.recv(4096)
b = socket.create_connection(("127.0.0.1", port), timeout=5)
b.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
try:
    got = b.recv(4096)
except OSError:
    got = b""
print("second:%d" % len(got))
PY
is "$(cat "$T/conns")" "second:0" "max_conns 1: a second connection is closed without an answer"
wait_grep "$EV" '"type":"inbound.accept","decision":"block".*"rule":"publish.max_conns"'
ok $? "the refused connection is recorded (inbound.accept block, publish.max_conns)"

# --publish on the command line: an entry like the file's (protocol http).
out=$(curl -s -m 10 "http://127.0.0.1:$P4/cli")
like "$out" '^method=GET target=/cli ' "--publish 127.0.0.1:$P4:8000 reaches the agent's server"

out=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P5/")
is "$out" 502 "a published port nothing listens on in the sandbox: 502"
wait_grep "$EV" '"type":"http.inbound","decision":"block".*"rule":"publish.connect"'
ok $? "and a receipt (publish.connect)"

# --- what is not published ---------------------------------------------------------------

python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", 9999), timeout=3)' 2>/dev/null
ok $([ $? -ne 0 ]; echo $?) "the sandbox's unlisted port 9999 is unreachable from the host"
python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", 8000), timeout=3)' 2>/dev/null
ok $([ $? -ne 0 ]; echo $?) "the sandbox's port 8000 itself is not on the host's loopback"

wait_grep "$EV" '"type":"inbound.accept","decision":"allow".*"listener":"127.0.0.1:'"$P1"'","port":8000,"protocol":"http"'
ok $? "inbound.accept names the peer, the listener and the sandbox port"

# --- the relay process -----------------------------------------------------------------------

relay=$(pgrep -x airlock-publish | head -n 1)
like "$relay" '^[0-9]+$' "the relay runs as its own process (airlock-publish)"
if [ -n "$relay" ]; then
	is "$(tr -d '\0' < "/proc/$relay/environ" | wc -c | tr -d ' ')" 0 \
		"the relay's environment is wiped (the supervisor's held PUB_TOKEN)"
	ok $([ "$(readlink "/proc/$relay/ns/net")" != "$(readlink /proc/self/ns/net)" ]; echo $?) \
		"the relay lives in the sandbox's network namespace, not the host's"
	is "$(awk '/^CapEff/ {print $2}' "/proc/$relay/status")" 0000000000000000 \
		"the relay has no capabilities"
	is "$(awk '/^Seccomp:/ {print $2}' "/proc/$relay/status")" 2 "the relay is under seccomp"
fi

# The auth value's bytes: in the supervisor (the control: it read the
# secret), in no byte of the relay's memory, though requests carrying it
# went through it. Each count is "ALL:ENV": ENV of the ALL copies are the
# whole environment string PUB_TOKEN=pub-s3cret-value.
#
# Under make SAN=1 one such ENV copy is not the relay's doing: before main,
# the ASan runtime reads /proc/self/environ of the supervisor into a buffer
# of its own (an anonymous mmap that __sanitizer::GetEnv's static `environ`
# in libasan points to) and never frees it; the relay, forked from the
# supervisor, inherits it. confine_wipe_environment() wipes the strings
# environ points to, which are not that buffer, and nothing in airlock knows
# where it is. So under the sanitizer the relay's check counts only the
# copies not in the environment string: a copy the relay made of a request's
# Authorization header or cookie ("Bearer pub-s3cret-value",
# "...=pub-s3cret-value") is still counted. The release build counts all.
printf '%s' pub-s3cret-value > "$T/value.raw"
printf 'PUB_TOKEN=%s' pub-s3cret-value > "$T/value.env"
read -r sup_n _ <<EOF
$(mem_count "$rpid" "$T/value.raw" "$T/value.env")
EOF
read -r relay_all relay_env <<EOF
$(mem_count "$relay" "$T/value.raw" "$T/value.env")
EOF
relay_n=$relay_all
if ldd "$AIRLOCK" 2>/dev/null | grep -q libasan; then
	diag "sanitizer build: $relay_env of the relay's $relay_all copies are ASan's environment buffer, not counted"
	relay_n=$((relay_all - relay_env))
fi
ok $([ "${sup_n:-0}" -gt 0 ]; echo $?) "control: the supervisor's memory holds the auth value ($sup_n times)"
is "$relay_n" 0 "the relay's memory holds no copy of the auth value"

touch "$WS/stop"
wait "$rpid"
is "$?" 0 "the session ends with the agent's status"

# rate_bytes: a second session whose listener passes 100000 bytes a second.
cat > "$T/rate.json" <<EOF
{"version": 1, "mode": "enforce",
 "publish": [{"listen": "127.0.0.1:$P3", "port": 8000, "rate_bytes": 100000}]}
EOF
rm -f "$WS/ready" "$WS/stop"
"$AIRLOCK" run --policy "$T/rate.json" --events "$T/rate.jsonl" --workspace "$WS" -- \
	python3 servers.py "$WS/ready" "$WS/stop" > /dev/null 2>&1 &
rate_pid=$!
wait_grep "$WS/ready" ready 30
start=$(date +%s%N)
curl -s -m 30 -o "$T/rated" "http://127.0.0.1:$P3/big"
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
is "$(wc -c < "$T/rated" | tr -d ' ')" 1000000 "rate_bytes: the whole 1 MB answer arrives"
ok $([ "$elapsed" -ge 7000 ]; echo $?) "rate_bytes 100000: 1 MB takes at least 7 s ($elapsed ms)"
touch "$WS/stop"
wait "$rate_pid"
is "$?" 0 "the rate-limited session ends with the agent's status"
"$AIRLOCK" verify "$EV" > /dev/null
ok $? "the stream verifies"

# --- refusals at start -------------------------------------------------------------------------

cat > "$T/wild.json" <<EOF
{"version": 1, "mode": "enforce", "publish": [{"listen": "0.0.0.0:$P1", "port": 8000}]}
EOF
"$AIRLOCK" run --policy "$T/wild.json" --events "$T/wild.jsonl" --workspace "$WS" -- true \
	2> "$T/wild.err"
is "$?" 125 "enforce: a wildcard listen without exposed is refused (125)"
like "$(cat "$T/wild.err")" 'publish\[0\]\.listen 0\.0\.0\.0:[0-9]+ is not a loopback address.*exposed' \
	"the refusal names the entry and exposed"
grep -q '"type":"session.refused".*"rule":"publish"' "$T/wild.jsonl"
ok $? "the refusal is a session.refused receipt (rule publish)"
"$AIRLOCK" run --enforce --events "$T/cli.jsonl" --workspace "$WS" --publish "0.0.0.0:$P1:8000" \
	-- true 2> /dev/null
is "$?" 125 "enforce: --publish 0.0.0.0:PORT:PORT is refused too"

cat > "$T/exposed.json" <<EOF
{"version": 1, "mode": "enforce", "publish": [{"listen": "0.0.0.0:$P1", "port": 8000, "exposed": true}]}
EOF
"$AIRLOCK" run --policy "$T/exposed.json" --events "$T/exp.jsonl" --workspace "$WS" -- true
is "$?" 0 "with exposed: true the same listen is accepted"

cat > "$T/shadow.json" <<EOF
{"version": 1, "mode": "shadow", "publish": [{"listen": "0.0.0.0:$P1", "port": 8000}]}
EOF
"$AIRLOCK" run --policy "$T/shadow.json" --events "$T/shadow.jsonl" --workspace "$WS" --quiet \
	-- true 2> "$T/shadow.err"
is "$?" 0 "shadow: the wildcard listen runs"
like "$(cat "$T/shadow.err")" 'publish\[0\]\.listen 0\.0\.0\.0:[0-9]+ is not a loopback address: enforce mode refuses it' \
	"shadow: with a warning that enforce refuses it"

cat > "$T/proxyport.json" <<EOF
{"version": 1, "mode": "enforce", "publish": [{"listen": "127.0.0.1:$P1", "port": 3128}]}
EOF
"$AIRLOCK" run --policy "$T/proxyport.json" --events "$T/pp.jsonl" --workspace "$WS" -- true \
	2> "$T/pp.err"
is "$?" 125 "publishing the sandbox's proxy port 3128 is refused"
like "$(cat "$T/pp.err")" "publish\[0\]\.port 3128 is airlock's own proxy port" "and says why"

"$AIRLOCK" run --enforce --events "$T/bad.jsonl" --workspace "$WS" --publish "x:1:2" -- true \
	2> "$T/bad.err"
is "$?" 125 "a malformed --publish is refused"
like "$(cat "$T/bad.err")" '--publish x:1:2: ADDR must be' "with a clear line"

# Taken listen address: the session is refused, nothing runs.
python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",'"$P1"')); s.listen(); open("'"$T"'/held","w").write("1"); time.sleep(20)' &
hpid=$!
wait_grep "$T/held" 1 10
"$AIRLOCK" run --enforce --events "$T/busy.jsonl" --workspace "$WS" --publish "127.0.0.1:$P1:8000" \
	-- sh -c 'echo ran' > "$T/busy.out" 2> "$T/busy.err"
is "$?" 125 "a listen address in use refuses the session"
is "$(cat "$T/busy.out")" "" "and the agent never ran"
kill "$hpid" 2>/dev/null

done_testing
