#!/bin/sh
# HTTP/1.1 inside intercepted TLS, through the standalone proxy
# (`airlock proxy --ca-out FILE --placeholders FILE`, docs/PROXY.md):
# keep-alive and pipelining, chunked bodies both ways, 100-continue,
# websocket frames both ways after the 101, server-sent events streamed
# as they come, a long download, Host equal to the intercepted host; the
# placeholders file; substitution with curl; refusals with nothing sent.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

pl_start_net
VALUE="tok_0123456789abcdefghijklmnopqrstuvwxyzABCD"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["api.airlock.test", "www.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "tok": { "from_env": "TOK", "env": "SERVICE_TOKEN", "hosts": ["api.airlock.test"],
             "headers": ["authorization"] }
  }
}
EOF
TOK=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1

like "$(head -1 "$T/session-ca.pem")" '^-----BEGIN CERTIFICATE-----' "--ca-out: the CA's certificate"
is "$(stat -c %a "$T/ph.env")" 600 "--placeholders: written mode 0600"
like "$(cat "$T/ph.env")" '^SERVICE_TOKEN=airlock-ph-tok-[0-9A-Za-z_-]+$' "... one ENV=PLACEHOLDER line"
! grep -q "$VALUE" "$T/ph.env"
ok $? "... without the value"
PH=$(sed -n 's/^SERVICE_TOKEN=//p' "$T/ph.env")

req https://api.airlock.test/sub --cacert "$T/session-ca.pem" -H "Authorization: token $PH"
is "$CODE" 200 "curl through the standalone proxy trusts the --ca-out CA"
like "$(net_last line~/sub)" "\"Authorization\", \"token $VALUE\"" "the placeholder after 'token ' became the value"
req https://api.airlock.test/distrust --cacert "$CA"
is "$CURL_RC" 60 "a client that does not trust the session CA fails its handshake"
# the worker records the failed handshake a moment after curl gives up
wait_grep "$EV" '"type":"proxy.error".*"rule":"tls.client"|"rule":"tls.client".*"type":"proxy.error"'
r=$(grep '"type":"proxy.error"' "$EV" | grep '"rule":"tls.client"' | tail -1)
like "$(jf "$r" subject.error)" 'unknown ca|alert' "... recorded as proxy.error tls.client with the client's alert"
is "$(net_count line~/distrust)" 0 "... nothing was sent upstream"
req https://www.airlock.test/elsewhere --cacert "$CA" -H "Authorization: token $PH"
is "$CODE" 200 "a host nobody binds passes through (the placeholder is worthless there)"
like "$(net_last line~/elsewhere)" "token $PH" "... and reaches it unchanged, since the proxy cannot see it"

# The rest speaks HTTP/1.1 inside the tunnel itself.
python3 - "$PROXY" "$T/session-ca.pem" "$PH" > "$T/py.out" 2>&1 <<'PY'
import socket, ssl, sys, time
proxy, ca, ph = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = proxy.rsplit(":", 1)

def tunnel(name="api.airlock.test"):
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name.encode(), name.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context(cafile=ca)
    t = ctx.wrap_socket(s, server_hostname=name)
    return t

class R:
    def __init__(self, s):
        self.s, self.b = s, b""
    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.b += d
    def until(self, sep):
        while sep not in self.b:
            self.fill()
        i = self.b.index(sep) + len(sep)
        out, self.b = self.b[:i], self.b[i:]
        return out
    def exact(self, n):
        while len(self.b) < n:
            self.fill()
        out, self.b = self.b[:n], self.b[n:]
        return out
    def response(self):
        head = self.until(b"\r\n\r\n").decode()
        lines = head.split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for l in lines[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                h[k.strip().lower()] = v.strip()
        if status < 200:
            return status, h, b""
        body = b""
        if h.get("transfer-encoding", "").endswith("chunked"):
            while True:
                n = int(self.until(b"\r\n").split(b";")[0], 16)
                if n == 0:
                    self.until(b"\r\n")
                    break
                body += self.exact(n)
                self.exact(2)
        elif "content-length" in h:
            body = self.exact(int(h["content-length"]))
        return status, h, body

def out(name, v):
    print("%s=%s" % (name, v))

# keep-alive and pipelining: three requests in one write
t = tunnel(); r = R(t)
t.sendall(b"".join(b"GET /pipe%d HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n" % i for i in range(3)))
got = [r.response() for _ in range(3)]
out("pipeline", ",".join("%d:%s" % (st, b.split(b" ")[5].decode()) for st, h, b in got))
# a head of nearly 40 KB (several TLS records) and a pipelined request
# after it in the same write
big = b"GET /big" + b"b" * 7000 + b" HTTP/1.1\r\nHost: api.airlock.test\r\n" + \
      b"".join(b"X-Pad-%02d: %s\r\n" % (i, b"p" * 1900) for i in range(16)) + b"\r\n"
t.sendall(big + b"GET /after-big HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
got = [r.response() for _ in range(2)]
out("held", ",".join("%d:%s" % (st, b.split(b" ")[5].decode()[:12]) for st, h, b in got))
# chunked upload on the same connection, then Content-Length
t.sendall(b"POST /up HTTP/1.1\r\nHost: api.airlock.test\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
st, h, b = r.response()
out("chunked_up", "%d %s" % (st, b.split(b"\n", 1)[1].decode()))
# chunked download
t.sendall(b"GET /chunked HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
st, h, b = r.response()
out("chunked_down", "%d %s %s" % (st, h.get("transfer-encoding"), b.split(b" ")[0].decode()))
# 100-continue: the interim answer comes before the body is sent
t.sendall(b"POST /cont HTTP/1.1\r\nHost: api.airlock.test\r\nExpect: 100-continue\r\n"
          b"Content-Length: 4\r\n\r\n")
st, h, b = r.response()
out("continue_interim", st)
t.sendall(b"body")
st, h, b = r.response()
out("continue_final", "%d %s" % (st, b.split(b"\n", 1)[1].decode()))
# a Host that is not the intercepted host
t.sendall(b"GET /fronted HTTP/1.1\r\nHost: www.airlock.test\r\n\r\n")
st, h, b = r.response()
out("host_mismatch", "%d %s" % (st, h.get("x-airlock-rule")))
t.close()

# websocket: frames both ways after the 101
t = tunnel(); r = R(t)
t.sendall(b"GET /ws HTTP/1.1\r\nHost: api.airlock.test\r\nUpgrade: websocket\r\n"
          b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Version: 13\r\n\r\n")
st, h, b = r.response()
echoed = []
for frame in (b"\x81\x05hello", b"\x81\x03abc", b"\x82\x7f" + (70000).to_bytes(8, "big") + b"x" * 70000):
    t.sendall(frame)
    echoed.append(r.exact(len(frame)) == frame)
out("websocket", "%d %s" % (st, ",".join(map(str, echoed))))
t.close()

# server-sent events arrive as they are sent
t = tunnel(); r = R(t)
start = time.monotonic()
t.sendall(b"GET /sse?n=3&gap=1 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
head = r.until(b"\r\n\r\n")
first = r.until(b"data: 0\n\n")
t_first = time.monotonic() - start
r.until(b"data: 2\n\n")
t_all = time.monotonic() - start
out("sse", "first<2:%s all>=2.5:%s" % (t_first < 2.0, t_all >= 2.5))
t.close()

# a long download
t = tunnel(); r = R(t)
t.sendall(b"GET /bytes/8000000 HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
st, h, b = r.response()
out("download", "%d %d %s" % (st, len(b), b == bytes(i % 251 for i in range(8000000))))
t.close()

# the placeholder in the query: refused inside TLS
t = tunnel(); r = R(t)
t.sendall(b"GET /q?x=" + ph.encode() + b" HTTP/1.1\r\nHost: api.airlock.test\r\n\r\n")
st, h, b = r.response()
out("query", "%d %s" % (st, h.get("x-airlock-rule")))
t.close()
PY
diag_file "$T/py.out"
o() { sed -n "s/^$1=//p" "$T/py.out"; }
is "$(o pipeline)" "200:path=/pipe0,200:path=/pipe1,200:path=/pipe2" "pipelined requests, answered in order on one connection"
is "$(net_count line~/pipe)" 3 "... each reached the origin once"
is "$(o held)" "200:path=/bigbbb,200:path=/after-" "a request after a 40 KB head, pipelined, is served"
is "$(o chunked_up)" "200 hello world" "a chunked request body, relayed whole"
is "$(o chunked_down)" "200 chunked hello" "a chunked response, relayed chunked"
is "$(o continue_interim)" 100 "Expect: 100-continue: the 100 arrives before the body"
is "$(o continue_final)" "200 body" "... then the answer to the whole request"
is "$(o host_mismatch)" "403 egress.host_mismatch" "a Host other than the intercepted host: 403"
is "$(net_count line~/fronted)" 0 "... never forwarded"
is "$(o websocket)" "101 True,True,True" "websocket: frames relayed untouched both ways after the 101"
is "$(o sse)" "first<2:True all>=2.5:True" "server-sent events are relayed as they arrive"
is "$(o download)" "200 8000000 True" "an 8 MB download arrives whole"
is "$(o query)" "403 secrets.tok" "the placeholder in the query: 403"
is "$(net_count line~/q?x)" 0 "... nothing sent"
r=$(grep '"type":"egress.allow"' "$EV" | grep '"intercepted":true' | head -1)
is "$(jf "$r" subject.host) $(jf "$r" subject.tls)" "api.airlock.test true" "the tunnel is recorded as intercepted"
pl_stop_proxy
is $? 0 "the proxy stops on SIGTERM"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "its stream verifies"

# --ca-cert/--ca-key: a platform's CA
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=platform CA" -addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign \
	-keyout "$T/pca.key" -out "$T/pca.pem" 2>/dev/null
ok $? "a platform CA is made"
rm -f "$EV"
TOK=$VALUE pl_start_proxy_ok --ca-cert "$T/pca.pem" --ca-key "$T/pca.key" --workers 1
req https://api.airlock.test/platform --cacert "$T/pca.pem" -H "Authorization: token whatever"
is "$CODE" 200 "--ca-cert/--ca-key: the leaf chains to the platform's CA"
pl_stop_proxy
"$AIRLOCK" proxy --policy "$POLICY" --listen 127.0.0.1:0 --ca-out "$T/x.pem" > /dev/null 2>"$T/err"
is $? 125 "--ca-out without --events: refused"
like "$(cat "$T/err")" 'needs --events' "... saying why"
"$AIRLOCK" proxy --policy "$POLICY" --listen 127.0.0.1:0 --events "$T/e2" --ca-cert "$T/pca.pem" > /dev/null 2>"$T/err"
is $? 125 "--ca-cert without --ca-key: refused"

done_testing
