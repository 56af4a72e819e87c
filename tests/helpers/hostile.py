#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hostile - a scripted hostile upstream for the scrubber tests, and the
agent-side client that checks what came through.

Run it inside the test's network namespace (tests/netns-exec). Python 3
standard library only.

  hostile.py serve --listen ADDR:PORT... --cert PEM --key PEM --ready FILE
                   [--log FILE]
      A TLS HTTP/1.1 server. Each request's credential V is what it
      received in Authorization (after "Bearer "/"token ", or the password
      of Basic) or X-Api-Key. The last path segment names the case, the
      query "k=K" the split offset: V is echoed in the place the case names
      and the bytes are written in two TLS records split K bytes into V,
      with a short pause between them so that the proxy reads them apart.
      Every answer ends with Connection: close. A request without a
      credential gets the --fixed value as V (a value an unbound host
      learnt elsewhere), or the content of --fixed-file when it exists.

        reason     the final status line's reason phrase
        early      a 103 Early Hints with a Link header, then 200
        processing a 102 whose reason phrase is V, then 200
        header     an X-Echo header and a Location header
        length     a Content-Length body
        chunked    a chunked body, V split across two chunks at K
        ext        a chunk extension holding V
        trailer    a trailer field holding V
        ztrailer   a gzip'd chunked body with a chunk extension and a trailer
                   field holding V
        close      a body delimited by the close
        ws         a 101 (reason and a header hold V), then frames: V in
                   one text frame split across records at K; V split
                   across two frames of one message at K; a masked frame
                   holding V; a ping holding V; a close

  hostile.py client --proxy ADDR:PORT --ca PEM --host NAME --port N
                    --path PREFIX --placeholder PH --value V
                    [--header NAME] [--cases LIST] [--every]
      For each case (and each K from 0 to len(V) with --every, else a few)
      opens a CONNECT tunnel, TLS with the session CA, sends one request
      carrying PH in the header (Authorization: Bearer PH by default), and
      reads the whole answer (interim heads, chunked bodies and trailers
      decoded, WebSocket frames parsed). Prints one line per case:
      "CASE ok N" when V appeared nowhere in the bytes received nor in the
      decoded body or frame payloads, and PH did where V was echoed (N:
      the connections), else "CASE LEAK K where" or "CASE ERROR K why".
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import socket
import ssl
import struct
import threading
import time

GAP = 0.03
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CASES = ["reason", "early", "processing", "header", "length", "chunked", "ext",
         "trailer", "ztrailer", "close", "ws"]

FIXED = b""
FIXED_FILE = None
_log_lock = threading.Lock()
_log_path = None


def log(**ev):
    if not _log_path:
        return
    line = json.dumps(dict(t=round(time.time(), 3), **ev), sort_keys=True) + "\n"
    with _log_lock:
        with open(_log_path, "a") as f:
            f.write(line)


def parse_endpoint(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


# --- the server ---------------------------------------------------------------

def read_head(s):
    b = b""
    while b"\r\n\r\n" not in b:
        d = s.recv(4096)
        if not d:
            return None, b""
        b += d
        if len(b) > 65536:
            return None, b""
    i = b.index(b"\r\n\r\n") + 4
    return b[:i], b[i:]


def credential(headers):
    for name, value in headers:
        n = name.lower()
        if n == "authorization":
            scheme, _, rest = value.partition(" ")
            if scheme.lower() == "basic":
                try:
                    return base64.b64decode(rest).decode().partition(":")[2].encode()
                except ValueError:
                    return b""
            return rest.encode()
        if n == "x-api-key":
            return value.encode()
    return b""


def send_parts(s, parts):
    """Each part its own TLS record, apart in time."""
    first = True
    for p in parts:
        if not p:
            continue
        if not first:
            time.sleep(GAP)
        s.sendall(p)
        first = False


def fixed():
    if FIXED_FILE and os.path.exists(FIXED_FILE):
        with open(FIXED_FILE, "rb") as f:
            return f.read().strip()
    return FIXED


def split(v, k):
    return v[:k], v[k:]


def ws_frame(opcode, payload, fin=True, mask=None):
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        h = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        h = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    if mask:
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        h += mask
    return h + payload


def answer(s, case, v, k, headers):
    a, b = split(v, k)
    ok = b"Content-Length: 2\r\nConnection: close\r\n\r\nok"
    if case == "reason":
        send_parts(s, [b"HTTP/1.1 200 ok " + a, b + b"\r\n" + ok])
    elif case == "early":
        send_parts(s, [b"HTTP/1.1 103 Early Hints\r\nLink: </style-" + a,
                       b + b".css>; rel=preload\r\n\r\n", b"HTTP/1.1 200 OK\r\n" + ok])
    elif case == "processing":
        send_parts(s, [b"HTTP/1.1 102 " + a, b + b"\r\n\r\n", b"HTTP/1.1 200 OK\r\n" + ok])
    elif case == "header":
        send_parts(s, [b"HTTP/1.1 302 Found\r\nX-Echo: " + a,
                       b + b"\r\nLocation: https://elsewhere.test/?t=" + v + b"\r\n" + ok])
    elif case == "length":
        body = b"echo " + v + b" end"
        send_parts(s, [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\necho "
                       % len(body) + a, b + b" end"])
    elif case == "chunked":
        c1, c2 = b"<" + a, b + b">"
        send_parts(s, [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                       + b"%x\r\n" % len(c1) + c1 + b"\r\n", b"%x\r\n" % len(c2) + c2 + b"\r\n0\r\n\r\n"])
    elif case == "ext":
        send_parts(s, [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                       + b"5;x=" + a, b + b"\r\nhello\r\n0\r\n\r\n"])
    elif case == "trailer":
        send_parts(s, [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n"
                       b"Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-T: " + a, b + b"\r\n\r\n"])
    elif case == "ztrailer":
        z = gzip.compress(b"hello")
        send_parts(s, [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
                       b"Connection: close\r\n\r\n%x;x=" % len(z) + v + b"\r\n" + z +
                       b"\r\n0\r\nX-T: " + a, b + b"\r\n\r\n"])
    elif case == "close":
        send_parts(s, [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody " + a, b + b" end"])
    elif case == "ws":
        key = dict((n.lower(), x) for n, x in headers).get("sec-websocket-key", "")
        acc = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest())
        ext = dict((n.lower(), x) for n, x in headers).get("sec-websocket-extensions", "")
        log(event="ws", extensions=ext)
        f1 = ws_frame(1, b"one " + v + b" end")
        cut = 2 + 4 + k  # inside the frame, k bytes into V
        f2a = ws_frame(1, b"two " + a, fin=False)
        f2b = ws_frame(0, b + b" end")
        send_parts(s, [b"HTTP/1.1 101 Switching " + v + b"\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc +
                       b"\r\nX-Echo: " + v + b"\r\n\r\n" + f1[:cut], f1[cut:],
                       f2a, f2b, ws_frame(1, b"three " + v, mask=b"\x01\x02\x03\x04"),
                       ws_frame(9, v[:120]), ws_frame(8, b"\x03\xe8" + v[:100])])
        # wait for the client's close before closing
        s.settimeout(5)
        try:
            s.recv(4096)
        except OSError:
            pass
    else:
        s.sendall(b"HTTP/1.1 200 OK\r\n" + ok)


def serve_conn(conn, ctx):
    try:
        conn.settimeout(15)
        s = ctx.wrap_socket(conn, server_side=True)
        head, _ = read_head(s)
        if head is None:
            s.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [tuple(x.split(": ", 1)) for x in lines[1:] if ": " in x]
        path, _, query = target.partition("?")
        case = path.rstrip("/").rsplit("/", 1)[-1]
        k = 0
        for kv in query.split("&"):
            if kv.startswith("k="):
                k = int(kv[2:])
        v = credential(headers) or fixed()
        log(event="request", method=method, path=path, k=k, case=case, headers=headers)
        answer(s, case, v, min(k, len(v)), headers)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
    except (OSError, ssl.SSLError, ValueError) as e:
        log(event="error", error=str(e))
        conn.close()


def serve(args):
    global _log_path, FIXED, FIXED_FILE
    _log_path = args.log
    FIXED = (args.fixed or "").encode()
    FIXED_FILE = args.fixed_file
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.set_alpn_protocols(["http/1.1"])
    socks = []
    for ep in args.listen:
        host, port = parse_endpoint(ep)
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, port))
        ls.listen(64)
        socks.append(ls)

    def accept_loop(ls):
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve_conn, args=(c, ctx), daemon=True).start()

    for ls in socks:
        threading.Thread(target=accept_loop, args=(ls,), daemon=True).start()
    with open(args.ready + ".tmp", "w") as f:
        f.write("ready\n")
    os.rename(args.ready + ".tmp", args.ready)
    end = time.time() + args.lifetime
    while time.time() < end:
        time.sleep(0.5)


# --- the client -----------------------------------------------------------------

class Reader:
    def __init__(self, s):
        self.s, self.b, self.raw, self.eof = s, b"", b"", False

    def fill(self):
        if self.eof:
            raise EOFError
        try:
            d = self.s.recv(65536)
        except (ssl.SSLError, OSError):
            d = b""
        if not d:
            self.eof = True
            raise EOFError
        self.b += d
        self.raw += d

    def until(self, sep):
        while sep not in self.b:
            self.fill()
        i = self.b.index(sep) + len(sep)
        out, self.b = self.b[:i], self.b[i:]
        return out

    def take(self, n):
        while len(self.b) < n:
            self.fill()
        out, self.b = self.b[:n], self.b[n:]
        return out

    def rest(self):
        try:
            while True:
                self.fill()
        except EOFError:
            pass
        out, self.b = self.b, b""
        return out


def tunnel(args):
    host, port = parse_endpoint(args.proxy)
    s = socket.create_connection((host, port), timeout=20)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
              % (args.host.encode(), args.port, args.host.encode(), args.port))
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            raise EOFError("the proxy closed after CONNECT")
        head += d
    if not head.startswith(b"HTTP/1.1 200"):
        raise EOFError("CONNECT: " + head.decode("latin-1").split("\r\n")[0])
    ctx = ssl.create_default_context(cafile=args.ca)
    return ctx.wrap_socket(s, server_hostname=args.host)


def read_http(r):
    """Interim heads, the final head, the decoded body and trailers."""
    heads = []
    while True:
        head = r.until(b"\r\n\r\n")
        heads.append(head)
        status = int(head.split(b" ", 2)[1])
        if status >= 200 or status == 101:
            break
    low = head.lower()
    body, trailers = b"", b""
    if status == 101:
        return heads, status, body, trailers
    if b"transfer-encoding: chunked" in low:
        while True:
            line = r.until(b"\r\n")
            n = int(line.split(b";")[0].strip(), 16)
            if n == 0:
                break
            body += r.take(n)
            r.take(2)
        while True:
            line = r.until(b"\r\n")
            if line == b"\r\n":
                break
            trailers += line
    elif b"content-length:" in low:
        i = low.index(b"content-length:") + 15
        n = int(low[i:].split(b"\r\n")[0].strip())
        body = r.take(n)
    else:
        body = r.rest()
    return heads, status, body, trailers


def read_ws(r, s):
    """Frames until a close: the payloads of every frame, unmasked."""
    payloads = []
    for _ in range(64):
        b0, b1 = r.take(2)
        n = b1 & 0x7f
        if n == 126:
            n = struct.unpack("!H", r.take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", r.take(8))[0]
        mask = r.take(4) if b1 & 0x80 else None
        p = r.take(n)
        if mask:
            p = bytes(c ^ mask[i % 4] for i, c in enumerate(p))
        payloads.append(p)
        if b0 & 0x0f == 8:
            m = os.urandom(4)
            s.sendall(ws_frame(8, b"\x03\xe8", mask=m))
            break
    return payloads


def one(args, case, k):
    s = tunnel(args)
    hdr = args.header
    val = ("Bearer " + args.placeholder) if hdr.lower() == "authorization" else args.placeholder
    req = "GET %s/%s?k=%d HTTP/1.1\r\nHost: %s\r\n" % (args.path, case, k, args.host)
    if not args.no_credential:
        req += "%s: %s\r\n" % (hdr, val)
    if case == "ws":
        req += ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n")
    else:
        req += "Connection: close\r\n"
    s.sendall((req + "\r\n").encode())
    r = Reader(s)
    heads, status, body, trailers = read_http(r)
    decoded = [body, trailers]
    if status == 101:
        decoded += read_ws(r, s)
        r.rest()
    s.close()
    v, ph = args.value.encode(), args.placeholder.encode()
    if v in r.raw:
        return "LEAK %d bytes" % k
    for d in decoded:
        if v in d:
            return "LEAK %d decoded" % k
    if case == "ws" and v in b"".join(decoded[2:]):
        return "LEAK %d frames" % k
    everything = r.raw + b"".join(decoded)
    if case not in ("ext", "trailer", "ztrailer") and ph not in everything:
        return "ERROR %d the placeholder is not in the answer (%s)" % (
            k, heads[0].split(b"\r\n")[0].decode("latin-1"))
    if case == "ws" and b"two " + ph + b" end" not in b"".join(decoded[2:]):
        return "ERROR %d the fragmented message is not whole: %r" % (k, decoded[2:])
    return None


def client(args):
    cases = args.cases.split(",") if args.cases else CASES
    n = len(args.value)
    ks = range(0, n + 1) if args.every else sorted({0, 1, n // 2, n - 1, n})
    for case in cases:
        bad, count = None, 0
        for k in ks:
            try:
                bad = one(args, case, k)
            except (OSError, EOFError, ValueError, IndexError, ssl.SSLError) as e:
                bad = "ERROR %d %s" % (k, e)
            count += 1
            if bad:
                break
        print("%s %s" % (case, bad if bad else "ok %d" % count), flush=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--listen", action="append", required=True)
    sv.add_argument("--cert", required=True)
    sv.add_argument("--key", required=True)
    sv.add_argument("--ready", required=True)
    sv.add_argument("--log")
    sv.add_argument("--lifetime", type=float, default=600)
    sv.add_argument("--fixed", help="V for a request that carries no credential")
    sv.add_argument("--fixed-file", help="a file whose content, when it exists, is --fixed")
    cl = sub.add_parser("client")
    cl.add_argument("--proxy", required=True)
    cl.add_argument("--ca", required=True)
    cl.add_argument("--host", required=True)
    cl.add_argument("--port", type=int, default=443)
    cl.add_argument("--path", default="")
    cl.add_argument("--placeholder", required=True)
    cl.add_argument("--value", required=True)
    cl.add_argument("--header", default="Authorization")
    cl.add_argument("--cases")
    cl.add_argument("--every", action="store_true")
    cl.add_argument("--no-credential", action="store_true")
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args)
    else:
        client(args)


if __name__ == "__main__":
    main()
