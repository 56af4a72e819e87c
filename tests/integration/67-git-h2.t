#!/bin/bash
# 67-git-h2.t - stock git over HTTP/2 end to end (docs/PROXY.md "git
# (libcurl) offers h2"): the git server is git http-backend
# (gitserver.py) behind nghttpx, Debian's HTTP/2 reverse proxy, which
# chooses h2 upstream. Inside `airlock run --enforce`, git (libcurl offers
# h2 and http/1.1) gets h2 from the proxy and the proxy gets h2 from
# nghttpx: every smart-HTTP request is one stream through the git rules,
# the credential injected on the allowed ones. A clone, a push and a
# fetch of the session repository work; a push to a fetch-only sibling is
# refused on its stream (git.block) and never reaches the server; the
# receipts name h2 on both sides.
#
# Addresses (on lo, in this test's own network namespace):
#   198.18.0.21:443   nghttpx (h2, TLS)    git.test
#   198.18.0.22:8443  gitserver.py         its backend (git http-backend)
#   127.0.0.1:5353    DNS (testnet.py)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gitlib.sh"

if ! command -v nghttpx > /dev/null; then
	echo "1..0 # SKIP nghttpx (nghttp2-proxy) is needed"
	exit 0
fi
lo_addrs 198.18.0.21 198.18.0.22
cat > "$T/net.json" <<EOF
{"log": "$T/net.log", "ready": "$T/net.ready", "lifetime": 600,
 "dns": {"listen": ["127.0.0.1:5353"], "zone": {"git.test": ["198.18.0.21"]}}}
EOF
"$PY" "$H/testnet.py" --config "$T/net.json" > "$T/net.out" 2>&1 &
PIDS="$PIDS $!"
TOKEN="glpat-static-$(head -c 300 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 40)"
cat > "$T/git.json" <<EOF
{"log": "$T/git.log", "ready": "$T/git.ready", "lifetime": 600,
 "listen": ["198.18.0.22:8443"], "tls": {"dir": "$T/git-tls", "names": ["git.test"]},
 "root": "$T/repos", "tokens": ["$TOKEN"]}
EOF
mkdir -p "$T/repos/acme"
for r in api lib; do
	git init -q --bare -b main "$T/repos/acme/$r.git"
	git init -q -b main "$T/seed-$r"
	echo "hello from acme/$r" > "$T/seed-$r/README"
	git -C "$T/seed-$r" add README
	git -C "$T/seed-$r" -c user.name=t -c user.email=t@test commit -qm init
	git -C "$T/seed-$r" push -q "$T/repos/acme/$r.git" main
	git -C "$T/repos/acme/$r.git" config http.receivepack true
done
"$PY" "$H/gitserver.py" --config "$T/git.json" > "$T/git.out" 2>&1 &
PIDS="$PIDS $!"
i=0
while { [ ! -f "$T/net.ready" ] || [ ! -f "$T/git.ready" ]; } && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/net.ready" ] && [ -f "$T/git.ready" ] ||
	{ echo "Bail out! the servers did not start: $(cat "$T/net.out" "$T/git.out")"; exit 1; }
# nghttpx: TLS (the gitserver's own leaf for git.test) with ALPN h2 and
# http/1.1 in front, gitserver.py (TLS, verified) behind.
nghttpx --conf=/dev/null --frontend='198.18.0.21,443' \
	--backend='198.18.0.22,8443;;tls;sni=git.test' --cacert="$T/git-tls/ca.pem" \
	--workers=1 --no-ocsp --no-via --no-server-rewrite --errorlog-file="$T/nghttpx.err" \
	--accesslog-file="$T/nghttpx.log" \
	--accesslog-format='$alpn $method $path $status' \
	"$T/git-tls/leaf.key" "$T/git-tls/leaf.pem" > "$T/nghttpx.out" 2>&1 &
PIDS="$PIDS $!"
i=0
while ! curl -s -o /dev/null --cacert "$T/git-tls/ca.pem" --resolve git.test:443:198.18.0.21 \
	https://git.test/ && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
curl -sS -o /dev/null -w '%{http_version}' --http2 --cacert "$T/git-tls/ca.pem" \
	--resolve git.test:443:198.18.0.21 -u "x-access-token:$TOKEN" \
	'https://git.test/acme/api.git/info/refs?service=git-upload-pack' > "$T/direct.ver" 2>&1
is "$(cat "$T/direct.ver")" 2 "control: nghttpx serves the git server over HTTP/2"

cat > "$T/policy.json" <<EOF
{"version": 1, "mode": "enforce",
 "session": {"id": "sess-git-h2", "repo": "git.test/acme/api"},
 "egress": {"resolver": ["127.0.0.1:5353"], "allow_ranges": ["198.18.0.0/15"],
            "upstream_ca": "$T/git-tls/ca.pem"},
 "secrets": {"scm": {"from_env": "SCM_TOKEN", "env": "SCM_TOKEN", "hosts": ["git.test"]}},
 "git": {"hosts": ["git.test"], "repos": {"acme/lib": ["fetch"]}, "credential": "scm"}}
EOF
mkdir -p "$T/ws"
: > "$T/nghttpx.log"
( cd "$T/ws" && SCM_TOKEN=$TOKEN timeout 180 "$AIRLOCK" run --policy "$T/policy.json" \
	--events "$T/ev.jsonl" -- sh -c '
cd "$0"
export GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1
g() { git -c user.name=agent -c user.email=agent@test "$@"; }
g clone -q https://git.test/acme/api.git api 2> clone.err; echo $? > clone.rc
echo change >> api/README
g -C api commit -qam change-over-h2 2>/dev/null
g -C api push -q origin main 2> push.err; echo $? > push.rc
g -C api fetch -q origin 2> fetch.err; echo $? > fetch.rc
g clone -q https://git.test/acme/lib.git lib 2> lib.err; echo $? > lib.rc
echo change >> lib/README
g -C lib commit -qam change 2>/dev/null
g -C lib push -q origin main 2> libpush.err; echo $? > libpush.rc
exit 0' "$T/ws" > "$T/out" 2> "$T/err" )
is "$?" 0 "the session ran: $(head -c 300 "$T/err")"
rcs() { for f in "$@"; do printf '%s ' "$(cat "$T/ws/$f.rc" 2>/dev/null || echo none)"; done; }
is "$(rcs clone push fetch lib)" "0 0 0 0 " \
	"clone, push and fetch of the session repository, clone of the sibling: all work over h2"
[ "$(rcs clone push fetch lib)" = "0 0 0 0 " ] || diag_file "$T/ws/clone.err" "$T/ws/push.err"
is "$(git -C "$T/repos/acme/api.git" log -1 --format=%s main)" "change-over-h2" \
	"the pushed commit is in the server's repository"
[ "$(rcs libpush)" != "0 " ]
ok $? "a push to the fetch-only sibling is refused"
like "$(cat "$T/ws/libpush.err")" "403" "  with the proxy's 403"
is "$(git -C "$T/repos/acme/lib.git" log -1 --format=%s main)" "init" "  and the sibling is unchanged"
r=$(grep '"type":"egress.allow"' "$T/ev.jsonl" | grep '"intercepted":true' | head -1)
is "$(jf "$r" subject.protocol subject.upstream_protocol)" "h2 h2" \
	"egress.allow: h2 to git and h2 to the server"
n=$(grep -c '"type":"http.request".*"protocol":"h2"' "$T/ev.jsonl")
[ "$n" -ge 6 ]
ok $? "each smart-HTTP request is an http.request of protocol h2 ($n)"
r=$(grep '"type":"git.block"' "$T/ev.jsonl" | tail -1)
is "$(jf "$r" rule subject.repo subject.operation)" "git.operation acme/lib push" \
	"the sibling's push is a git.block on its stream"
is "$(grep -c 'receive-pack' "$T/nghttpx.log" | tr -d ' ')" \
	"$(grep 'receive-pack' "$T/nghttpx.log" | grep -c '/acme/api')" \
	"  nothing of it reached the server (every receive-pack there is the session repository's)"
is "$(grep -vc '^h2 ' "$T/nghttpx.log")" 0 "the server saw only HTTP/2 requests ($(wc -l < "$T/nghttpx.log") of them)"
! grep -q "$TOKEN" "$T/ws"/*.err "$T/out"
ok $? "the token never reached the sandbox"
"$AIRLOCK" verify "$T/ev.jsonl" > /dev/null
ok $? "the stream verifies"

done_testing
