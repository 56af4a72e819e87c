#!/bin/sh
# Transparent mode end to end (docs/TRANSPARENT.md): inside `airlock run`
# with "transparent": true, clients that ignore proxy variables and resolve
# names themselves (Node's fetch and https.get, curl --noproxy '*', Python
# with proxies disabled, a C program with getaddrinfo + connect) reach an
# allowed origin through the proxy and are refused for a denied one; the
# test's DNS server sees no query for a denied name; UDP never leaves; a
# rebinding name stays pinned; an SNI or Host other than the name behind
# the synthetic address is refused; a server that speaks first (SMTP on
# 2525) is heard though the client says nothing; the receipts verify. The control runs
# the same Node program with "transparent": false, where it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

if ! "$AIRLOCK" doctor | grep -q '"transparent":true'; then
	echo "1..0 # SKIP this host cannot run transparent mode (airlock doctor)"
	exit 0
fi

WS="$T/ws"
mkdir "$WS"
H="$(helpers_in "$WS")"
pl_start_net
cp "$CA" "$WS/ca.pem"

# A UDP listener of the test's own: any datagram the sandbox manages to
# send to 198.18.0.12 (port 53 or 5300) is logged here. Bounded: it ends
# by itself after 120 s.
UDPLOG="$T/udp.log"
: > "$UDPLOG"
python3 - "$UDPLOG" <<'PY' &
import select, socket, sys, time
socks = []
for port in (53, 5300):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("198.18.0.12", port))
    socks.append(s)
end = time.time() + 120
with open(sys.argv[1], "a") as log:
    while time.time() < end:
        r, _, _ = select.select(socks, [], [], 0.5)
        for s in r:
            data, peer = s.recvfrom(2048)
            log.write("udp %s %d bytes\n" % (peer[0], len(data)))
            log.flush()
PY
PL_EXTRA_PIDS="$!"

# A server that speaks first (SMTP) on 198.18.0.10:2525: reached
# transparently, its banner arrives while the client says nothing (SPEC
# 5.1, tests/helpers/framing_server.py).
python3 "$AIRLOCK_SRC/tests/helpers/framing_server.py" --log "$T/fr.log" --ready "$T/fr.ready" \
	--lifetime 300 --banner 198.18.0.10:2525 > "$T/fr.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/fr.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done

policy() { # MODE TRANSPARENT
	cat > "$POLICY" <<P
{
  "version": 1,
  "mode": "$1",
  "egress": {
    "allow": ["api.airlock.test", "api.airlock.test:2525", "rebind.airlock.test"],
    "ports": [80, 443],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "transparent": $2
  }
}
P
}

# inside MODE: runs $T/inside.sh in the sandbox; results in $WS/r.
inside() {
	rm -rf "$WS/r"
	mkdir "$WS/r"
	timeout 180 "$AIRLOCK" run --mode "$1" --policy "$POLICY" --workspace "$WS" \
		--events "$EV" -- sh "$WS/inside.sh" "$WS/r" "$H" > "$T/out" 2>&1 </dev/null
}
r() { cat "$WS/r/$1" 2>/dev/null; }

cat > "$WS/inside.sh" <<'SH'
# No proxy configuration at all.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy
R=$1 H=$2
cd "$R/.." || exit 1
run() { # NAME CMD...: output in $R/NAME, status in $R/NAME.rc
	n=$1; shift
	"$@" > "$R/$n" 2>&1; echo $? > "$R/$n.rc"
}
NODE_FETCH='
fetch(process.argv[1], { signal: AbortSignal.timeout(10000) })
  .then(r => r.text()).then(t => process.stdout.write(t))
  .catch(e => { console.log("ERR " + ((e.cause && e.cause.code) || e.message)); process.exit(1); });'
NODE_HTTPS='
require("https").get(process.argv[1], { timeout: 10000 }, r => {
  r.setEncoding("utf8"); r.on("data", d => process.stdout.write(d)); })
  .on("error", e => { console.log("ERR " + e.code); process.exit(1); });'
PY_GET='
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile="ca.pem")
o = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                urllib.request.HTTPSHandler(context=ctx))
try:
    print(o.open(sys.argv[1], timeout=10).read().decode(), end="")
except Exception as e:
    print("ERR", type(e).__name__, getattr(e, "reason", e)); sys.exit(1)'
export NODE_EXTRA_CA_CERTS="$PWD/ca.pem"
run resolv cat /etc/resolv.conf
run getent getent hosts api.airlock.test
run getent-denied getent hosts other.airlock.test
run node-fetch node -e "$NODE_FETCH" http://api.airlock.test/node-fetch
run node-https node -e "$NODE_HTTPS" https://api.airlock.test/node-https
run node-denied node -e "$NODE_FETCH" http://other.airlock.test/node-denied
run node-https-denied node -e "$NODE_HTTPS" https://other.airlock.test/node-https-denied
run curl curl --noproxy '*' -sS -m 10 http://api.airlock.test/curl
run curl-tls curl --noproxy '*' -sS -m 10 --cacert ca.pem https://api.airlock.test/curl-tls
run curl-denied curl --noproxy '*' -sS -m 10 http://other.airlock.test/curl-denied
run curl-literal curl --noproxy '*' -sS -m 10 http://198.18.0.13/curl-literal
run python python3 -c "$PY_GET" https://api.airlock.test/python
run python-denied python3 -c "$PY_GET" http://other.airlock.test/python-denied
run c "$H/gaiget" api.airlock.test 80 /c
run c-denied "$H/gaiget" other.airlock.test 80 /c-denied
# The SNI, or the Host, names another host than the synthetic address.
run sni curl --noproxy '*' -sS -m 10 --cacert ca.pem \
	--connect-to www.airlock.test:443:api.airlock.test:443 https://www.airlock.test/sni
run host curl --noproxy '*' -sS -m 10 -D "$R/host.h" -H 'Host: www.airlock.test' \
	http://api.airlock.test/host
# The proxy resolves the name for each connection: 198.18.0.10 first,
# then 127.0.0.1.
run rebind1 curl --noproxy '*' -sS -m 10 http://rebind.airlock.test/rebind1
run rebind2 curl --noproxy '*' -sS -m 10 http://rebind.airlock.test/rebind2
# A server that speaks first: its banner, the client silent.
run banner python3 -c '
import socket
s = socket.create_connection(("api.airlock.test", 2525), timeout=5)
d = b""
try:
    while b"\n" not in d:
        c = s.recv(4096)
        if not c:
            break
        d += c
except OSError as e:
    print("ERR", e)
print(d.decode("latin-1").strip())'
# UDP: DNS to another server, and any other datagram.
run udp python3 -c '
import socket
for port in (53, 5300):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x" * 40, ("198.18.0.12", port)); print("sent", port)
    except OSError as e:
        print("ERR", port, e.errno)'
SH

# --- enforce, transparent ----------------------------------------------------------

policy enforce true
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the policy is valid"
inside enforce
is "$?" 0 "the session ends with the agent's status 0"

is "$(grep -v '^#' "$WS/r/resolv")" "nameserver 127.0.0.53" "/etc/resolv.conf names only the stub"
like "$(r getent)" '^240\.0\.0\.[0-9]+ +api\.airlock\.test$' "getent shows a synthetic address"
is "$(r getent-denied.rc)" 2 "getent: a denied name does not exist"

like "$(r node-fetch)" '^hello from 198\.18\.0\.10:80 .*path=/node-fetch host=api\.airlock\.test' \
	"Node's fetch reaches the allowed origin"
like "$(r node-https)" '^hello from tls 198\.18\.0\.10:443 .*path=/node-https host=api\.airlock\.test' \
	"Node's https.get reaches the allowed origin over TLS"
is "$(r node-denied)" "ERR ENOTFOUND" "Node's fetch to a denied name: ENOTFOUND"
is "$(r node-https-denied)" "ERR ENOTFOUND" "Node's https.get to a denied name: ENOTFOUND"
like "$(r curl)" '^hello from 198\.18\.0\.10:80 .*path=/curl ' "curl --noproxy '*' reaches the origin"
like "$(r curl-tls)" '^hello from tls 198\.18\.0\.10:443 .*path=/curl-tls ' "and over TLS"
like "$(r curl-denied)" 'Could not resolve host' "curl: a denied name does not resolve"
like "$(r curl-literal.rc)" '^(52|56)$' "curl to a denied IP literal: closed, no reply"
like "$(r python)" '^hello from tls 198\.18\.0\.10:443 .*path=/python ' \
	"Python with proxies disabled reaches the origin over TLS"
like "$(r python-denied)" '^ERR URLError .*(Name or service not known|not known)' \
	"Python: a denied name does not resolve"
like "$(r c)" '^addr 240\.0\.0\.[0-9]+
HTTP/1\.1 200 ' "getaddrinfo + connect: a synthetic address, then the origin's answer"
like "$(r c)" 'hello from 198\.18\.0\.10:80 .*path=/c ' "from the allowed origin"
like "$(r c-denied)" '^ERR getaddrinfo: ' "getaddrinfo of a denied name fails"

is "$(net_count srv=dns name=other.airlock.test)" 0 \
	"the test's DNS server saw no query for the denied name"
is "$(net_count srv=sink listen=198.18.0.13:80) $(net_count srv=sink listen=198.18.0.13:443)" "0 0" \
	"the denied origin was never reached"
like "$(python3 - "$NETLOG" <<'PY'
import json, sys
names = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("srv") == "dns": names.add(e.get("name", "").lower().rstrip("."))
print(" ".join(sorted(names)))
PY
)" '^(api\.airlock\.test|rebind\.airlock\.test| )*$' \
	"the DNS server saw only the proxy's own queries, for allowed names"

is "$(r banner)" "220 banner.airlock.test ESMTP ready" \
	"a server that speaks first (port 2525): its banner arrives though the client sent nothing"

like "$(r udp)" '^ERR 53 1
ERR 5300 1$' "UDP to another DNS server and to any port: EPERM at once"
sleep 0.5
is "$(wc -l < "$UDPLOG" | tr -d ' ')" 0 "no datagram arrived"

is "$(r sni.rc)" 35 "an SNI other than the name behind the address: the TLS handshake is cut ($(r sni | head -n 1))"
is "$(net_count srv=tls listen=198.18.0.11:443)" 0 "and www.airlock.test was never reached"
like "$(head -n 1 "$WS/r/host.h" 2>/dev/null)" '^HTTP/1\.1 403' "a Host other than the name: 403"
like "$(tr -d '\r' < "$WS/r/host.h" 2>/dev/null)" 'X-Airlock-Rule: egress\.host_mismatch' \
	"with the rule egress.host_mismatch"

like "$(r rebind1)" '^hello from 198\.18\.0\.10:80 .*path=/rebind1 ' "a rebinding name: the first answer is used"
like "$(r rebind2.rc)" '^(52|56)$' "the second answer (127.0.0.1) is refused: closed"
is "$(net_count srv=sink listen=127.0.0.1:80)" 0 "127.0.0.1 was never connected to"

python3 - "$EV" > "$T/rc.txt" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
def find(**kw):
    out = []
    for d in lines:
        s = d.get("subject", {})
        if all((d.get(k) if k in ("type", "decision", "rule") else s.get(k)) == v
               for k, v in kw.items()):
            out.append(d)
    return out
dns = find(type="dns.block", host="other.airlock.test")
print("dns.block other: %d %s %s" % (len(dns), dns and dns[0]["decision"], dns and dns[0]["rule"]))
a = find(type="egress.allow", host="api.airlock.test", port=443)
print("allow api 443: %s %s %s" % (bool(a), a and a[0]["subject"].get("transparent"),
      a and a[0]["subject"].get("sni")))
b = find(type="egress.block", host="198.18.0.13")
print("block literal: %s" % (b and b[0]["rule"]))
sni = find(type="egress.block", rule="egress.sni_mismatch")
print("sni: %s" % (sni and sni[0]["subject"].get("sni")))
rb = [d["subject"].get("address") for d in find(type="egress.allow", host="rebind.airlock.test")]
print("rebind allow: %s" % " ".join(rb))
rbb = find(type="egress.block", host="rebind.airlock.test")
print("rebind block: %s" % (rbb and rbb[0]["rule"]))
sf = find(type="egress.allow", host="api.airlock.test", port=2525)
print("server first: %s %s" % (sf and sf[0]["subject"].get("transparent"),
      sf and sf[0]["subject"].get("tls")))
PY
like "$(cat "$T/rc.txt")" 'dns.block other: 1 block egress.default' "one dns.block for the denied name"
like "$(cat "$T/rc.txt")" 'allow api 443: True True api.airlock.test' \
	"egress.allow records the transparent connection and its SNI"
like "$(cat "$T/rc.txt")" 'block literal: egress.default' "the IP literal is judged as a literal"
like "$(cat "$T/rc.txt")" 'sni: www.airlock.test' "egress.sni_mismatch names the SNI"
like "$(cat "$T/rc.txt")" 'rebind allow: 198\.18\.0\.10$' "the rebinding name is pinned to the address checked"
like "$(cat "$T/rc.txt")" 'rebind block: egress.special-address' "its loopback answer is refused"
like "$(cat "$T/rc.txt")" 'server first: True False' \
	"the server-first connection is recorded: egress.allow, transparent, tls false"
"$AIRLOCK" verify "$EV" > "$T/verify.out" 2>&1
ok $? "the receipts verify"

# --- interception: a secret's host, reached transparently ---------------------------
# The proxy terminates TLS for the bound host exactly as in a CONNECT
# tunnel: the agent's placeholder becomes the real value at the origin.
# The clients trust the session CA through what airlock gives them (the
# system bundle's path, NODE_EXTRA_CA_CERTS), nothing of the test's.

VALUE="sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
cat > "$POLICY" <<P
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "transparent": true
  },
  "secrets": {
    "api": {"from_env": "API_KEY", "hosts": ["api.airlock.test"],
            "headers": ["authorization"], "prefix": "sk-live-", "paths": ["/v1/"]}
  }
}
P
cat > "$WS/inside.sh" <<'SH'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy
R=$1
printf '%s' "$API_KEY" > "$R/ph"
node -e '
fetch("https://api.airlock.test/v1/tnode", { headers: { authorization: "Bearer " + process.env.API_KEY },
      signal: AbortSignal.timeout(10000) })
  .then(r => r.text()).then(t => process.stdout.write(t))
  .catch(e => { console.log("ERR " + ((e.cause && e.cause.code) || e.message)); process.exit(1); });' \
	> "$R/node" 2>&1
curl --noproxy '*' -sS -m 10 -H "Authorization: Bearer $API_KEY" \
	https://api.airlock.test/v1/tcurl > "$R/curl" 2>&1
SH
rm -f "$EV"
API_KEY=$VALUE inside enforce
is "$?" 0 "interception: the session ran"
like "$(r ph)" '^sk-live-' "the agent holds a placeholder"
like "$(r node)" '^hello from tls 198\.18\.0\.10:443 .*path=/v1/tnode ' \
	"Node's fetch, no proxy configuration, reaches the bound host through interception"
like "$(r curl)" '^hello from tls 198\.18\.0\.10:443 .*path=/v1/tcurl ' "and curl --noproxy '*'"
for n in tnode tcurl; do
	like "$(net_last srv=tls "line~/v1/$n")" "Bearer $VALUE" "the origin got the real value ($n)"
done
like "$(grep '"type":"secret.inject"' "$EV" | head -n 1)" '"host":"api.airlock.test"' \
	"secret.inject recorded"
like "$(grep '"type":"http.request"' "$EV" | grep '/v1/tnode')" '"transparent":true' \
	"the intercepted request's receipt says transparent"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the receipts verify"

# --- shadow: every name resolves, a would-be refusal is recorded ----------------

cat > "$WS/inside.sh" <<'SH'
R=$1
getent hosts other.airlock.test > "$R/getent" 2>&1
SH
rm -f "$EV"
policy shadow true
inside shadow
like "$(r getent)" '^240\.0\.0\.[0-9]+ +other\.airlock\.test$' "shadow: a denied name gets a synthetic address"
like "$(grep '"type":"dns.block"' "$EV")" '"decision":"would_block"' "and a dns.block would_block"

# --- /etc/resolv.conf as a symbolic link (systemd-resolved hosts) ----------------
# In a mount namespace of this test's own, /etc is a copy whose
# resolv.conf is a relative link into $T/dns, a directory that the
# sandbox hides (under the host's /tmp) unless fs.ro lists it.

mkdir "$T/dns"
echo "nameserver 198.18.0.12" > "$T/dns/resolv.conf"
cat > "$WS/inside.sh" <<'SH'
grep -v '^#' /etc/resolv.conf > "$1/resolv"
SH
link_run() { # FS_RO
	cat > "$POLICY" <<P
{"version": 1, "mode": "enforce",
 "egress": {"allow": ["api.airlock.test"], "transparent": true},
 "fs": {"ro": [$1]}}
P
	rm -rf "$WS/r"
	mkdir "$WS/r"
	# A copy of /etc (other files may create and remove entries there
	# meanwhile, as 47 does: one that vanishes mid-copy is no matter).
	# shellcheck disable=SC2016
	timeout 60 unshare --mount sh -c '
		{ cp -a /etc "$0/etc" 2>/dev/null; [ -f "$0/etc/passwd" ]; } &&
		rm -f "$0/etc/resolv.conf" &&
		ln -s "../..$0/dns/./resolv.conf" "$0/etc/resolv.conf" &&
		mount --bind "$0/etc" /etc &&
		exec "$@"' "$T" "$AIRLOCK" run --policy "$POLICY" --workspace "$WS" \
		--events "$EV" -- sh "$WS/inside.sh" "$WS/r" > "$T/out" 2>&1 </dev/null
}
link_run ""
st=$?
is "$st" 125 "a resolv.conf link into a hidden directory: refused (125)"
[ "$st" = 125 ] || sed 's/^/# out: /' "$T/out"
like "$(cat "$T/out")" "/etc/resolv.conf is $T/dns/resolv.conf, which the sandbox does not show" \
	"naming the file behind the link"
link_run "\"$T/dns\""
is "$?" 0 "with its directory in fs.ro the session runs"
is "$(r resolv)" "nameserver 127.0.0.53" "and the file behind the link names the stub"
is "$(cat "$T/dns/resolv.conf")" "nameserver 198.18.0.12" "the host's file is unchanged"
rm -rf "$T/etc"

# --- a host where transparent mode cannot run ---------------------------------------
# nonft makes the kernel refuse nftables' netlink socket to airlock and
# everything it starts.

NONFT="$AIRLOCK_HELPERS/nonft"
out=$("$NONFT" "$AIRLOCK" doctor)
is "$?" 0 "without nftables, doctor still says enforce can run"
like "$out" '"transparent":false,"enforce_ready":true,"missing":\[\]' \
	"and reports transparent false, not missing"
cat > "$WS/inside.sh" <<'SH'
echo ran > "$1/ran"
SH
rm -f "$EV"
policy enforce true
inside_nonft() {
	rm -rf "$WS/r"
	mkdir "$WS/r"
	timeout 60 "$NONFT" "$AIRLOCK" run --mode "$1" --policy "$POLICY" --workspace "$WS" \
		--events "$EV" -- sh "$WS/inside.sh" "$WS/r" > "$T/out" 2>&1 </dev/null
}
inside_nonft enforce
is "$?" 125 "enforce with transparent: true where it cannot run refuses to start (125)"
like "$(cat "$T/out")" 'mode enforce needs transparent, which this host does not provide' \
	"with one line saying why"
is "$(r ran)" "" "the agent never ran"
like "$(head -n 1 "$EV")" '"type":"session.refused".*"missing":\["transparent"\]' \
	"session.refused names transparent in missing"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "and the stream verifies"
rm -f "$EV"
policy shadow true
inside_nonft shadow
is "$?" 0 "shadow runs without it"
is "$(r ran)" ran "the agent ran"
like "$(cat "$T/out")" 'transparent mode cannot run on this host' "and airlock says so"

# --- control: transparent false -----------------------------------------------------

cat > "$WS/inside.sh" <<'SH'
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy
R=$1
node -e '
fetch("http://api.airlock.test/control", { signal: AbortSignal.timeout(10000) })
  .then(r => r.text()).then(t => process.stdout.write(t))
  .catch(e => { console.log("ERR " + ((e.cause && e.cause.code) || e.message)); process.exit(1); });' \
	> "$R/node" 2>&1
SH
rm -f "$EV"
policy enforce false
inside enforce
like "$(r node)" '^ERR (EAI_AGAIN|ENOTFOUND)' "control: without transparent mode Node's fetch fails ($(r node))"
is "$(net_count srv=http "line~/control")" 0 "and nothing reached the origin"

done_testing
