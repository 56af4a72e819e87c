#!/bin/bash
# Stock clients through interception inside `airlock run --enforce`, with
# no option of their own (docs/SECRETS.md): curl, git (clone over https
# from a real git http-backend, the credential a placeholder in the URL),
# Python's urllib and requests, pip (download from a local simple index),
# Node's https module (over a CONNECT it makes itself, naming the target
# in Host: Node has no proxy support of its own), npm (view against a local registry), gh (api
# against a stand-in GitHub Enterprise host). Each trusts the session CA
# through the bundle airlock puts in the sandbox; the origins receive the
# real value; what the clients print holds only the placeholder.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

H=$AIRLOCK_SRC/tests/helpers
WS="$T/ws"
mkdir -p "$WS" "$T/www" "$T/repos/acme"
ip addr add 198.18.0.15/32 dev lo
ip addr add 198.18.0.21/32 dev lo
PL_TLS_NAMES="$PL_TLS_NAMES registry.airlock.test ghe.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["registry.airlock.test"] = ["198.18.0.15"]
z["ghe.airlock.test"] = ["198.18.0.15"]
z["git.test"] = ["198.18.0.21"]
print(json.dumps(z))')
pl_start_net

VALUE="ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"

# --- the origins: a static registry (npm, pip, gh) and a git server ------------
python3 - "$T/www" <<'PY'
import base64, hashlib, io, json, os, sys, zipfile
d = sys.argv[1]
os.makedirs(d + "/simple/demo-pkg", exist_ok=True)
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("demo_pkg/__init__.py", "")
    z.writestr("demo_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    z.writestr("demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("demo_pkg-1.0.dist-info/RECORD", "")
whl = buf.getvalue()
open(d + "/demo_pkg-1.0-py3-none-any.whl", "wb").write(whl)
open(d + "/simple/demo-pkg/index.html", "w").write(
    '<html><body><a href="/demo_pkg-1.0-py3-none-any.whl#sha256=%s">demo_pkg-1.0-py3-none-any.whl</a></body></html>'
    % hashlib.sha256(whl).hexdigest())
tgz = b"not really a tarball"
open(d + "/demo-npm.json", "w").write(json.dumps({
    "name": "demo-npm", "dist-tags": {"latest": "2.3.4"},
    "versions": {"2.3.4": {"name": "demo-npm", "version": "2.3.4",
                            "dist": {"tarball": "https://registry.airlock.test/demo-npm-2.3.4.tgz",
                                     "shasum": hashlib.sha1(tgz).hexdigest()}}}}))
PY
cat > "$T/origin.py" <<'PY'
import http.server, json, ssl, sys, os
root, log, leaf, key = sys.argv[1:5]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers)}) + "\n")
        p = self.path.split("?")[0]
        auth = self.headers.get("Authorization", "")
        if p.startswith("/api/v3/"):
            body = json.dumps({"login": "octocat", "seen": auth}).encode()
            ctype = "application/json"
        elif p == "/demo-npm":
            body = open(root + "/demo-npm.json", "rb").read()
            ctype = "application/json"
        elif os.path.isfile(root + p) or os.path.isfile(root + p + "index.html"):
            f = root + p if os.path.isfile(root + p) else root + p + "index.html"
            body = open(f, "rb").read()
            ctype = "text/html" if f.endswith(".html") else "application/octet-stream"
        else:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(leaf, key)
s = http.server.ThreadingHTTPServer(("198.18.0.15", 443), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
open(log + ".ready", "w").close()
s.timeout = 1
import time
end = time.time() + 300
while time.time() < end:
    s.handle_request()
PY
python3 "$T/origin.py" "$T/www" "$T/origin.log" "$T/tls/leaf.pem" "$T/tls/leaf.key" > "$T/origin.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
git init -q --bare "$T/repos/acme/api.git"
git clone -q "$T/repos/acme/api.git" "$T/seed" 2>/dev/null
(cd "$T/seed" && echo hello > README && git add README &&
	git -c user.name=t -c user.email=t@t commit -qm first && git push -q origin HEAD:main) 2>/dev/null
git --git-dir="$T/repos/acme/api.git" symbolic-ref HEAD refs/heads/main
cat > "$T/git.json" <<EOF
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 300, "listen": ["198.18.0.21:443"],
 "tls": {"dir": "$T/git-tls", "names": ["git.test"]}, "root": "$T/repos", "tokens": ["$VALUE"]}
EOF
python3 "$H/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while { [ ! -f "$T/git.ready" ] || [ ! -f "$T/origin.log.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/git.ready" ] && [ -f "$T/origin.log.ready" ]
ok $? "the registry and the git server are listening"
cat "$CA" "$T/git-tls/ca.pem" > "$T/upstream-ca.pem"

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "registry.airlock.test", "ghe.airlock.test", "git.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$T/upstream-ca.pem",
    "intercept": ["registry.airlock.test"]
  },
  "env": { "pass": ["PATH", "LANG", "HOME"] },
  "secrets": {
    "gh": { "from_env": "GH_SECRET", "env": "GH_ENTERPRISE_TOKEN",
            "hosts": ["api.airlock.test", "ghe.airlock.test", "git.test"],
            "headers": ["authorization", "x-api-key"] }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the policy is valid"

GH_SECRET=$VALUE timeout 240 "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" --events "$EV" -- \
	bash -c '
cd "$0"
export PATH=/usr/bin:/bin
printf "%s" "$GH_ENTERPRISE_TOKEN" > ph
T=$GH_ENTERPRISE_TOKEN
curl -sS --max-time 20 -H "X-Api-Key: $T" https://api.airlock.test/echo > curl.out 2>&1
GIT_TERMINAL_PROMPT=0 timeout 60 git clone -q "https://x-access-token:$T@git.test/acme/api.git" clone > git.out 2>&1
echo $? > git.rc
python3 -c "
import os, urllib.request
r = urllib.request.Request(\"https://api.airlock.test/echo\", headers={\"Authorization\": \"Bearer \" + os.environ[\"GH_ENTERPRISE_TOKEN\"]})
print(urllib.request.urlopen(r, timeout=20).read().decode().splitlines()[0])
" > urllib.out 2>&1
python3 -c "
import os, requests
r = requests.get(\"https://api.airlock.test/echo\", headers={\"X-Api-Key\": os.environ[\"GH_ENTERPRISE_TOKEN\"]}, timeout=20)
print(r.status_code, r.text.splitlines()[0], r.headers[\"X-Echo\"])
" > requests.out 2>&1
timeout 60 python3 -m pip download --no-deps --disable-pip-version-check -q -d dl \
	--index-url https://registry.airlock.test/simple/ demo-pkg > pip.out 2>&1
echo $? > pip.rc
node -e "
const http = require(\"http\"), https = require(\"https\"), tls = require(\"tls\");
const p = new URL(process.env.HTTPS_PROXY);
const c = http.request({host: p.hostname, port: p.port, method: \"CONNECT\", path: \"api.airlock.test:443\",
                        headers: {host: \"api.airlock.test:443\"}});
c.on(\"connect\", (res, sock) => {
  https.get({host: \"api.airlock.test\", port: 443, path: \"/echo\", headers: {\"x-api-key\": process.env.GH_ENTERPRISE_TOKEN},
             createConnection: () => tls.connect({socket: sock, servername: \"api.airlock.test\"})}, (r) => {
    let b = \"\"; r.on(\"data\", (d) => b += d);
    r.on(\"end\", () => { console.log(r.statusCode + \" \" + b.split(\"\\n\")[0]); process.exit(0); });
  }).on(\"error\", (e) => { console.log(\"error \" + e.message); process.exit(1); });
});
c.end();
" > node.out 2>&1
timeout 60 npm view demo-npm version --registry https://registry.airlock.test/ > npm.out 2>&1
echo $? > npm.rc
GH_NO_UPDATE_NOTIFIER=1 GH_HOST=ghe.airlock.test GH_CONFIG_DIR=$PWD/ghcfg timeout 60 \
	gh api /user --hostname ghe.airlock.test > gh.out 2>&1
echo $? > gh.rc
exit 0
' "$WS" > "$T/out" 2>&1
is $? 0 "the clients ran in the sandbox"
[ -s "$WS/ph" ] || diag_file "$T/out"
PH=$(cat "$WS/ph")
like "$PH" '^airlock-ph-gh-' "the agent holds a placeholder"

no_value() { # DESC FILE...
	! grep -q "$VALUE" "$@" 2>/dev/null
	ok $? "$1: the value never reaches the sandbox"
}
like "$(cat "$WS/curl.out")" "^echo $PH" "curl: the echoed credential is the placeholder"
no_value curl "$WS/curl.out"

is "$(cat "$WS/git.rc")" 0 "git clone over https through interception (the placeholder in the URL)"
is "$(cat "$WS/clone/README" 2>/dev/null)" hello "... the repository arrived"
[ "$(cat "$WS/git.rc")" = 0 ] || diag_file "$WS/git.out"
like "$(grep '"auth": "ok"' "$T/git.log" | head -1)" 'git-upload-pack|info/refs' \
	"the git server got the real token (HTTP Basic, substituted)"
no_value git "$WS/git.out" "$WS/clone/.git/config"

like "$(cat "$WS/urllib.out")" "^echo Bearer $PH" "Python urllib: through the proxy, trusting the bundle"
like "$(cat "$WS/requests.out")" "^200 echo $PH $PH" "Python requests: REQUESTS_CA_BUNDLE, header and body scrubbed"
no_value python "$WS/urllib.out" "$WS/requests.out"

is "$(cat "$WS/pip.rc")" 0 "pip download from an HTTPS simple index (PIP_CERT)"
[ "$(cat "$WS/pip.rc")" = 0 ] || diag_file "$WS/pip.out"
ok "$([ -f "$WS/dl/demo_pkg-1.0-py3-none-any.whl" ]; echo $?)" "... the wheel arrived"

like "$(cat "$WS/node.out")" "^200 echo $PH" "Node https through a CONNECT (NODE_EXTRA_CA_CERTS)"
no_value node "$WS/node.out"

is "$(cat "$WS/npm.rc") $(cat "$WS/npm.out")" "0 2.3.4" "npm view against an HTTPS registry (NPM_CONFIG_CAFILE)"
[ "$(cat "$WS/npm.rc")" = 0 ] || diag_file "$WS/npm.out"

is "$(cat "$WS/gh.rc")" 0 "gh api against a stand-in GitHub Enterprise host (Go: SSL_CERT_FILE)"
[ "$(cat "$WS/gh.rc")" = 0 ] || diag_file "$WS/gh.out"
like "$(cat "$WS/gh.out")" "\"seen\": \"token $PH\"" "gh: the echoed token is the placeholder"
like "$(grep /api/v3/user "$T/origin.log" | tail -1)" "\"Authorization\": \"token $VALUE\"" \
	"gh: the origin got the real token"
no_value gh "$WS/gh.out"

is "$(grep '"type":"secret.inject"' "$EV" | grep -c '"secret":"gh"')" \
	"$(grep '"type":"secret.inject"' "$EV" | wc -l)" "every injection is recorded by name"
ok "$([ "$(grep -c '"type":"secret.inject"' "$EV")" -ge 6 ]; echo $?)" "... at least one per credentialed client"
! grep -q "$VALUE" "$EV"
ok $? "no receipt holds the value"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"

done_testing
