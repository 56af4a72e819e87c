#!/bin/sh
# Coded answers through interception (docs/SECRETS.md, "Compressed
# answers"), through the standalone proxy: a hostile TLS upstream of the
# test's own (coded.airlock.test) ignores Accept-Encoding: identity and
# echoes the injected value inside gzip, deflate (zlib and raw), br and
# zstd bodies, chains of two, "Transfer-Encoding: gzip, chunked", a
# Content-Encoding of identity then gzip in two fields, framed by length,
# by chunks of every small size and by close. The agent gets the decoded,
# scrubbed body without Content-Encoding, never the value; a coding the
# proxy cannot decode, too many codings, or a corrupt body are a 502 with
# a receipt naming the coding; a body that fails once relayed (truncated,
# a bomb over the bound) is cut, with its receipt. Over plain http:// a
# transfer coding is decoded, a content coding relayed as it came.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

# coded.airlock.test: the hostile upstream of this test, 198.18.0.15:443,
# with a leaf of the test CA.
ip addr add 198.18.0.15/32 dev lo || { echo "Bail out! ip addr add 198.18.0.15"; exit 1; }
PL_TLS_NAMES="$PL_TLS_NAMES coded.airlock.test"
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
z["coded.airlock.test"] = ["198.18.0.15"]
print(json.dumps(z))')
pl_start_net

HAVE_BR=no
HAVE_ZSTD=no
command -v brotli > /dev/null 2>&1 && HAVE_BR=yes
command -v zstd > /dev/null 2>&1 && HAVE_ZSTD=yes
diag "brotli: $HAVE_BR, zstd: $HAVE_ZSTD (scripts/install-deps --test installs both)"

VALUE="sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["coded.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA"
  },
  "secrets": {
    "api": { "from_env": "API_KEY", "env": "API_KEY", "hosts": ["coded.airlock.test"],
             "headers": ["x-api-key"], "prefix": "sk-live-" }
  }
}
EOF

# The upstream and the client share the body: a page with the value in
# it three times, far apart, and text between.
cat > "$T/coded.py" <<'PY'
import gzip, json, os, socket, ssl, subprocess, sys, threading, time, zlib

def body(value):
    parts = ["first %s\n" % value]
    parts += ["line %d of filler text that compresses well\n" % i for i in range(900)]
    parts.append("middle:%s;\n" % value)
    parts += ["more %d\n" % (i * 7919 % 10007) for i in range(1200)]
    parts.append("last=%s" % value)
    return "".join(parts).encode()

def tool(argv, data):
    return subprocess.run(argv, input=data, stdout=subprocess.PIPE, check=True).stdout

def encode(coding, data):
    if coding in ("gzip", "x-gzip"):
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "rawdeflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if coding == "br":
        return tool(["brotli", "-c"], data)
    if coding == "zstd":
        return tool(["zstd", "-q", "-c"], data)
    return data  # a coding nobody decodes: the label alone

def serve(addr, leaf, key, log, ready):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    listeners = []
    for port in (443, 80):
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port))
        ls.listen(64)
        listeners.append((ls, port == 443))
    lf = open(log, "a")
    lock = threading.Lock()
    with open(ready + ".tmp", "w") as f:
        f.write("ready\n")
    os.rename(ready + ".tmp", ready)

    def answer(path, headers):
        # what the upstream was sent, echoed coded in the body
        value = headers.get("x-api-key", "none")
        q = dict(p.split("=", 1) for p in path.partition("?")[2].split("&") if "=" in p)
        name = path.split("?")[0].strip("/")
        plain = body(value) * int(q.get("big", "1"))
        ce = q.get("ce", "").split("+") if q.get("ce") else []
        data = plain
        for c in ce:
            data = encode(c.replace("raw", "rawdeflate") if c == "raw" else c, data)
        labels = [("raw" == c and "deflate") or c for c in ce]
        head = ["HTTP/1.1 200 OK", "Content-Type: text/plain", "X-Case: %s" % name]
        if q.get("fields") == "split":
            # one Content-Encoding field per coding, identity first
            head.append("Content-Encoding: identity")
            head += ["Content-Encoding: %s" % l for l in labels]
        elif labels:
            head.append("Content-Encoding: %s" % ", ".join(labels))
        te = q.get("te")
        if te:
            data = encode(te, data)
        if q.get("empty"):
            data = b""
        if q.get("cut"):
            data = data[:len(data) // 2]
        if q.get("garbage"):
            data = data[:10] + b"\x00garbage, not what the header says" * 20
        if q.get("bomb"):
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            chunk = b"\0" * (1 << 20)
            data = b"".join(z.compress(chunk) for _ in range(int(q["bomb"]))) + z.flush()
        frame = q.get("frame", "length")
        close = (frame == "close" or q.get("uclose") == "1" or
                 headers.get("connection", "").lower() == "close")
        if te:
            head.append("Transfer-Encoding: %s, chunked" % te)
            frame = "chunked"
        if frame == "chunked":
            if not te:
                head.append("Transfer-Encoding: chunked")
            step = int(q.get("c", "4096"))
            out = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + step]), data[i:i + step])
                           for i in range(0, len(data), step)) + b"0\r\n\r\n"
        elif frame == "length":
            head.append("Content-Length: %d" % len(data))
            out = data
        else:
            out = data
        if close:
            head.append("Connection: close")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + out, close

    def conn(s, tls):
        try:
            t = ctx.wrap_socket(s, server_side=True) if tls else s
        except (OSError, ssl.SSLError):
            s.close()
            return
        buf = b""
        try:
            t.settimeout(30)
            while True:
                while b"\r\n\r\n" not in buf:
                    d = t.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                hs = {}
                for l in lines[1:]:
                    k, _, v = l.partition(":")
                    hs[k.strip().lower()] = v.strip()
                path = lines[0].split(" ")[1]
                with lock:
                    lf.write(json.dumps({"line": lines[0], "headers": hs}) + "\n")
                    lf.flush()
                out, close = answer(path, hs)
                t.sendall(out)
                if close:
                    return
        except (OSError, ssl.SSLError, ValueError):
            return
        finally:
            try:
                t.close()
            except OSError:
                pass

    def accept(ls, tls):
        while True:
            s, _ = ls.accept()
            threading.Thread(target=conn, args=(s, tls), daemon=True).start()

    for ls, tls in listeners[1:]:
        threading.Thread(target=accept, args=(ls, tls), daemon=True).start()
    accept(*listeners[0])

class R:
    """Reads answers; watches every byte for the value (across reads)."""
    def __init__(self, s, value):
        self.s, self.b, self.value = s, bytearray(), value
        self.tail, self.leak, self.keep = b"", False, True
    def fill(self):
        try:
            d = self.s.recv(65536)
        except (OSError, ssl.SSLError):
            d = b""
        if not d:
            raise EOFError
        w = self.tail + d
        self.leak = self.leak or self.value in w
        self.tail = w[-len(self.value):]
        self.b += d
    def until(self, sep):
        while sep not in self.b:
            self.fill()
        i = self.b.index(sep) + len(sep)
        out = bytes(self.b[:i])
        del self.b[:i]
        return out
    def exact(self, n):
        while len(self.b) < n:
            self.fill()
        out = bytes(self.b[:n])
        del self.b[:n]
        return out
    def rest(self):
        try:
            while True:
                self.fill()
        except EOFError:
            pass
        out = bytes(self.b)
        del self.b[:]
        return out
    def response(self):
        head = self.until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        status = int(lines[0].split()[1])
        h = []
        for l in lines[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                h.append((k.strip().lower(), v.strip()))
        hd = dict(h)
        body, complete, n_body = bytearray(), True, 0
        try:
            if "chunked" in hd.get("transfer-encoding", ""):
                while True:
                    n = int(self.until(b"\r\n").split(b";")[0], 16)
                    if n == 0:
                        self.until(b"\r\n")
                        break
                    d = self.exact(n)
                    n_body += len(d)
                    if self.keep:
                        body += d
                    self.exact(2)
            elif "content-length" in hd:
                body += self.exact(int(hd["content-length"]))
                n_body = len(body)
            else:
                body += self.rest()
                n_body = len(body)
        except EOFError:
            complete = False
        return status, h, bytes(body), complete, n_body

def ce_gunzip(b):
    try:
        return gzip.decompress(b)
    except (OSError, EOFError, zlib.error):
        return None

def client(proxy, ca, ph, value, out):
    host, port = proxy.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)

    def tunnel():
        s = socket.create_connection((host, int(port)), timeout=60)
        s.sendall(b"CONNECT coded.airlock.test:443 HTTP/1.1\r\nHost: coded.airlock.test:443\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert head.startswith(b"HTTP/1.1 200"), head
        t = ctx.wrap_socket(s, server_hostname="coded.airlock.test")
        return t, R(t, value.encode())

    want = body(ph)
    results = {}

    def one(name, query, version="1.1", t=None, keep=True, plain=False, mult=1):
        own = t is None
        if own and plain:
            s = socket.create_connection((host, int(port)), timeout=60)
            t = s, R(s, value.encode())
        elif own:
            t = tunnel()
        sock, r = t
        r.keep = keep
        if plain:
            # plain http: no placeholder (it would be refused there)
            sock.sendall(("GET http://coded.airlock.test/%s?%s HTTP/1.1\r\n"
                          "Host: coded.airlock.test\r\n\r\n" % (name, query)).encode())
        else:
            sock.sendall(("GET /%s?%s HTTP/%s\r\nHost: coded.airlock.test\r\n"
                          "X-Api-Key: %s\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n\r\n"
                          % (name, query, version, ph)).encode())
        try:
            st, h, b, complete, n_body = r.response()
        except (EOFError, ValueError):
            st, h, b, complete, n_body = 0, [], b"", False, 0
        res = {
            "status": st,
            "ce": ",".join(v for k, v in h if k == "content-encoding"),
            "te": ",".join(v for k, v in h if k == "transfer-encoding"),
            "cl": ",".join(v for k, v in h if k == "content-length"),
            "rule": ",".join(v for k, v in h if k == "x-airlock-rule"),
            "body_ok": b == (body("none") if plain else want) * mult,
            "gunzip_ok": ce_gunzip(b) == body("none"),
            "complete": complete,
            "body_len": n_body,
            "leak": r.leak,
        }
        results[name] = res
        if own:
            sock.close()
        return res

    t0 = time.monotonic()
    for c in ["gzip", "deflate", "raw", "br", "zstd"]:
        if c == "br" and not os.path.exists("/usr/bin/brotli"):
            continue
        if c == "zstd" and not os.path.exists("/usr/bin/zstd"):
            continue
        one("%s-length" % c, "ce=%s" % c)
        one("%s-chunked1" % c, "ce=%s&frame=chunked&c=1" % c)
        one("%s-chunked7" % c, "ce=%s&frame=chunked&c=7" % c)
        one("%s-close" % c, "ce=%s&frame=close" % c)
    print("the codings took %.1f s" % (time.monotonic() - t0))
    for n in (1, 2, 3, 5, 13, 1000):
        one("te-gzip-%d" % n, "te=gzip&c=%d" % n)
    one("identity-then-gzip", "ce=gzip&fields=split")
    one("x-gzip", "ce=x-gzip")
    if os.path.exists("/usr/bin/brotli"):
        one("chain-gzip-br", "ce=gzip+br")
        one("chain-split-fields", "ce=deflate+br&fields=split")
        one("te-and-ce", "ce=br&te=gzip&c=11")
    if os.path.exists("/usr/bin/zstd"):
        one("chain-zstd-gzip", "ce=zstd+gzip&frame=chunked&c=3")
    # keep-alive: a decoded answer, then a plain one, then a decoded one
    t = tunnel()
    one("ka1", "ce=gzip", t=t)
    one("ka2", "", t=t)
    one("ka3", "ce=deflate&frame=chunked&c=100", t=t)
    t[0].close()
    one("http10", "ce=gzip", version="1.0")
    # plain http://: the transfer coding is this hop's, decoded; the
    # content coding is relayed as it is
    one("plain-te-gzip", "te=gzip&c=9", plain=True)
    one("plain-ce-gzip", "ce=gzip", plain=True)
    one("plain-te-ce-gzip", "ce=gzip&te=gzip&c=5", plain=True)
    # 3 MB decoded from an upstream that closes at once: the rest is
    # decoded as the client takes it
    one("big-close", "ce=gzip&frame=close&big=60", mult=60)
    one("big-length-close", "ce=zstd&big=60&uclose=1", mult=60)
    one("big-chunked-close", "te=gzip&big=60&uclose=1&c=65536", mult=60)
    # an empty body labelled gzip, by length and chunked
    one("empty-length", "ce=gzip&empty=1")
    one("empty-chunked", "ce=br&empty=1&frame=chunked")
    # refused before anything is relayed
    one("compress", "ce=compress")
    one("triple", "ce=gzip+gzip+gzip")
    one("garbage", "ce=gzip&garbage=1")
    # failing once relayed: cut
    one("cut", "ce=gzip&cut=1")
    t0 = time.monotonic()
    one("bomb", "ce=gzip&bomb=300", keep=False)
    print("the bomb took %.1f s" % (time.monotonic() - t0))
    with open(out, "w") as f:
        for name, res in results.items():
            for k, v in res.items():
                f.write("%s.%s=%s\n" % (name, k, v))

if sys.argv[1] == "serve":
    serve(*sys.argv[2:])
else:
    client(*sys.argv[2:])
PY

python3 "$T/coded.py" serve 198.18.0.15 "$T/tls/leaf.pem" "$T/tls/leaf.key" "$T/coded.log" \
	"$T/coded.ready" > "$T/coded.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/coded.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/coded.ready" ] || { echo "Bail out! the coded upstream did not start: $(cat "$T/coded.out")"; exit 1; }

API_KEY=$VALUE pl_start_proxy_ok --ca-out "$T/session-ca.pem" --placeholders "$T/ph.env" --workers 1
PH=$(sed -n 's/^API_KEY=//p' "$T/ph.env")
like "$PH" '^sk-live-' "the agent's placeholder"

timeout 300 python3 "$T/coded.py" client "$PROXY" "$T/session-ca.pem" "$PH" "$VALUE" "$T/res.txt" \
	> "$T/client.out" 2>&1
is $? 0 "the client ran"
diag_file "$T/client.out"

res() { # CASE FIELD
	awk -v k="$1.$2=" 'index($0, k) == 1 { print substr($0, length(k) + 1); exit }' "$T/res.txt"
}

# decoded(CASE DESC): 200, the scrubbed body whole, no coding, no value
decoded() {
	if [ -z "$(res "$1" status)" ]; then
		tap_n=$((tap_n + 1))
		echo "ok $tap_n # SKIP $2: not run (its tool is missing)"
		return
	fi
	is "$(res "$1" status) $(res "$1" complete) $(res "$1" body_ok)" "200 True True" \
		"$2: decoded and scrubbed, whole"
	is "$(res "$1" ce)" "" "$2: no Content-Encoding"
	is "$(res "$1" leak)" False "$2: the value is nowhere in what the agent got"
}

for c in gzip deflate raw br zstd; do
	decoded "$c-length" "$c, Content-Length"
	is "$(res "$c-length" te)" "$([ -n "$(res "$c-length" status)" ] && echo chunked)" \
		"$c: re-framed chunked"
	decoded "$c-chunked1" "$c, chunks of 1 byte"
	decoded "$c-chunked7" "$c, chunks of 7 bytes"
	decoded "$c-close" "$c, delimited by close"
done
for n in 1 2 3 5 13 1000; do
	decoded "te-gzip-$n" "Transfer-Encoding: gzip, chunked (chunks of $n)"
	is "$(res "te-gzip-$n" te)" chunked "... relabelled chunked only once decoded"
done
decoded identity-then-gzip "Content-Encoding: identity, then a second field gzip"
decoded x-gzip "x-gzip"
decoded chain-gzip-br "gzip then br"
decoded chain-split-fields "deflate then br, one field each"
decoded te-and-ce "Content-Encoding br, Transfer-Encoding gzip, chunked"
decoded chain-zstd-gzip "zstd then gzip, chunks of 3"
decoded ka1 "keep-alive: a decoded answer"
decoded ka2 "keep-alive: then a plain one on the same connection"
decoded ka3 "keep-alive: then a decoded one again"
decoded http10 "an HTTP/1.0 request: the decoded answer delimited by close"
decoded big-close "3 MB decoded, delimited by the upstream's close"
decoded big-length-close "3 MB decoded, Content-Length, the upstream closes after it"
decoded big-chunked-close "3 MB decoded, gzip, chunked, the upstream closes after it"

is "$(res plain-te-gzip status) $(res plain-te-gzip body_ok) $(res plain-te-gzip te)" "200 True chunked" \
	"plain http://: Transfer-Encoding gzip, chunked decoded (a transfer coding is this hop's)"
is "$(res plain-ce-gzip status) $(res plain-ce-gzip ce) $(res plain-ce-gzip gunzip_ok)" "200 gzip True" \
	"plain http://: a Content-Encoding is relayed as it came (not intercepted)"
is "$(res plain-te-ce-gzip status) $(res plain-te-ce-gzip ce) $(res plain-te-ce-gzip te) $(res plain-te-ce-gzip gunzip_ok)" \
	"200 gzip chunked True" "plain http://: gzip in both: the transfer coding undone, the content coding kept with its label"

for c in length chunked; do
	is "$(res empty-$c status) $(res empty-$c complete) $(res empty-$c body_len) $(res empty-$c ce)" \
		"200 True 0 " "an empty body labelled with a coding ($c): an empty answer"
done

r=$(grep '"type":"http.request"' "$EV" | grep '"path":"/gzip-length"' | tail -1)
is "$(jf "$r" subject.decoded)" gzip "http.request records the coding it decoded"
r=$(grep '"type":"http.request"' "$EV" | grep '"path":"/ka2"' | tail -1)
is "$(jf "$r" subject.decoded)" "" "... and none on a plain answer"
is "$(python3 -c 'import json, sys
n = 0
for l in open(sys.argv[1]):
    n += json.loads(l)["headers"].get("accept-encoding") != "identity"
print(n)' "$T/coded.log")" 0 "every request reached the upstream asking for identity"
r=$(grep '"type":"secret.scrub"' "$EV" | grep '"path":"/gzip-length"' | tail -1)
is "$(jf "$r" subject.in_body)" 3 "secret.scrub counts the three values of the decoded body"

refused() { # CASE DESC CODING
	is "$(res "$1" status) $(res "$1" rule)" "502 upstream.coding" "$2: 502 upstream.coding"
	is "$(res "$1" leak)" False "$2: nothing of the value"
	r=$(grep '"type":"proxy.error"' "$EV" | grep '"rule":"upstream.coding"' |
		grep "\"request_path\":\"/$1\"" | tail -1)
	is "$(jf "$r" decision) $(jf "$r" subject.coding)" "block $3" \
		"$2: a receipt names the coding"
}
refused compress "an unknown coding (compress)" compress
refused triple "three codings (more than the two undone)" gzip
refused garbage "a corrupt gzip body" gzip
like "$(grep '"rule":"upstream.coding"' "$EV" | grep '/garbage' | tail -1)" 'corrupt|incorrect|invalid' \
	"... saying what was wrong"

# failing after the head went out: cut, never completed, recorded
is "$(res cut complete) $(res cut leak)" "False False" "a truncated gzip body: the answer is cut"
r=$(grep '"rule":"upstream.coding"' "$EV" | grep '/cut' | tail -1)
like "$(jf "$r" reason)" 'truncated' "... recorded as truncated"
is "$(res bomb complete) $(res bomb leak)" "False False" \
	"a gzip bomb (300 MiB of zeros): the answer is cut"
r=$(grep '"rule":"upstream.coding"' "$EV" | grep '/bomb' | tail -1)
like "$(jf "$r" reason)" 'bound' "... at the bound on the decoded size, recorded"
test "$(res bomb body_len)" -le $((256 * 1024 * 1024))
ok $? "... after at most the bound"

pl_stop_proxy
! grep -q "$VALUE" "$EV"
ok $? "no receipt holds the value"
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"

done_testing
