#!/bin/sh
# The sandbox as an unprivileged user (where user namespaces are allowed):
# the same isolation, built without any privilege of the caller.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
	echo "1..0 # SKIP needs root to become an unprivileged user (setpriv)"
	exit 0
fi
chmod 0755 "$T"
mkdir "$T/ws" "$T/rec" "$T/bin"
chown 65534:65534 "$T/ws" "$T/rec" "$T/home"
# The checkout may be where nobody cannot reach it (/root is 0700): nobody
# runs a copy, and the sandbox runs the helpers from the workspace.
cp "$AIRLOCK" "$T/bin/airlock"
chmod 0755 "$T/bin" "$T/bin/airlock"
AIRLOCK="$T/bin/airlock"
PROBE="$(helpers_in "$T/ws")/probe"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

out=$(cd "$T/ws" && as_nobody "$AIRLOCK" doctor)
is "$?" 0 "doctor: enforce mode can run as nobody"

out=$(cd "$T/ws" && UNPRIV_SECRET=s3cret-unpriv as_nobody "$AIRLOCK" run --enforce \
	--events "$T/rec/ev.jsonl" -- sh -c '
		id -u
		touch "$PWD/written" && echo ws-writable
		touch /etc/airlock-unpriv 2>/dev/null || echo etc-read-only
		ls /proc | grep -c "^[0-9]"
		grep -c s3cret-unpriv /proc/self/environ /proc/1/environ 2>/dev/null | grep -v ":0" || echo no-secret
		[ -d /root ] && [ -z "$(ls -A /root)$(ls -A /home)" ] && echo homes-hidden
		touch "$HOME/cache" && echo home-writable
		"$1" tcp 127.0.0.1 9 || true
		"$1" unshare-user || true
	' sh "$PROBE" 2>&1)
is "$?" 0 "run --enforce as nobody succeeds"
like "$out" "^65534" "the agent runs as the caller's uid"
like "$out" "ws-writable" "the workspace is writable"
like "$out" "etc-read-only" "the host is read-only"
like "$out" "no-secret" "an unlisted variable's value is nowhere in /proc"
like "$out" "homes-hidden" "/root and /home are hidden"
like "$out" "home-writable" "a private \$HOME is writable"
like "$out" "denied: ECONNREFUSED" "no network but loopback of its own"
like "$out" "denied: EPERM" "no new user namespace"
[ -f "$T/ws/written" ]
ok $? "the file written inside is there outside"
is "$(stat -c %u "$T/ws/written")" 65534 "and belongs to the caller"
[ ! -e "$T/home/cache" ]
ok $? "what was written to \$HOME stayed inside"
"$AIRLOCK" verify "$T/rec/ev.jsonl" >/dev/null
is "$?" 0 "the receipts verify"
like "$(head -n 1 "$T/rec/ev.jsonl")" '"enforce_ready":true' "session.start lists the capabilities in force"

# Publishing as nobody: the relay joins the sandbox's user namespace (which
# nobody created) to join its network namespace, and relays into it.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$T/ws" && as_nobody "$AIRLOCK" run --enforce --events "$T/rec/pub.jsonl" \
	--publish "127.0.0.1:$PORT:8000" -- python3 -c '
import http.server, os, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"served-as-%d\n" % os.getuid()
        self.send_response(200); self.send_header("Content-Length", str(len(b)))
        self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 8000), H)
open("ready", "w").write("1")
threading.Thread(target=s.serve_forever, daemon=True).start()
t = time.time() + 30
while not os.path.exists("stop") and time.time() < t:
    time.sleep(0.05)
' > "$T/pub.out" 2>&1) &
ppid=$!
wait_grep "$T/ws/ready" 1 30
out=$(curl -s -m 10 "http://127.0.0.1:$PORT/")
is "$out" "served-as-65534" "run --enforce --publish as nobody: the published port reaches the agent's server"
[ -n "$out" ] || diag_file "$T/pub.out"
touch "$T/ws/stop"
wait "$ppid"
is "$?" 0 "and the session ends cleanly"
grep -q '"type":"http.inbound","decision":"allow".*"status":200' "$T/rec/pub.jsonl"
ok $? "the exchange is recorded"

done_testing
