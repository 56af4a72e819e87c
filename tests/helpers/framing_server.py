#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""framing_server - upstreams for the framing and first-flight tests
(tests/integration/64-proxy-framing.t). Python 3 standard library only.
Run it inside the test's network namespace (tests/netns-exec).

  framing_server.py --log FILE --ready FILE [--lifetime S]
      [--http ADDR:PORT]... [--tls ADDR:PORT]... [--cert PEM --key PEM]
      [--banner ADDR:PORT]... [--echo ADDR:PORT]...
  framing_server.py client ...  the test's client (see client --help)

http / tls: HTTP/1.1 answers whose framing the path chooses, on a
connection kept alive or closed right after the answer:

  /cl0/STATUS?close=0|1    STATUS (200, 302...) with Content-Length: 0
  /eof?close=1             200 with no framing header and no body: the
                           body is delimited by the close (always closed)
  /nobody/STATUS?close=... 204 or 304 (no body by their status)
  /ws-first?n=N            101 Switching Protocols, and in the same write
                           two binary websocket frames of N bytes each;
                           then closed (TLS: without close_notify)

Nothing announces the close ("close=1" answers carry no "Connection:
close"), so that the proxy learns it only from the end of the stream.
Every answer is logged (event "answer", the path, "sent" bytes).

banner: says "220 banner.airlock.test ESMTP ready\\r\\n" as soon as a
client connects (a server that speaks first: SMTP, SSH, databases), then
echoes every byte it gets, prefixed "echo:" per read.
echo: says nothing first; echoes every byte it gets, and logs them.
"""
import argparse
import base64
import hashlib
import json
import os
import selectors
import signal
import socket
import ssl
import sys
import threading
import time

_lock = threading.Lock()
_log = None


def log(**ev):
    ev = dict(t=round(time.time(), 3), **ev)
    with _lock:
        with open(_log, "a") as f:
            f.write(json.dumps(ev, sort_keys=True) + "\n")


def endpoint(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def listen(ep):
    host, port = endpoint(ep)
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(128)
    return s


def read_head(conn, buf):
    while b"\r\n\r\n" not in buf:
        d = conn.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def ws_frame(n, fill):
    if n < 126:
        h = bytes([0x82, n])
    elif n < 65536:
        h = bytes([0x82, 126]) + n.to_bytes(2, "big")
    else:
        h = bytes([0x82, 127]) + n.to_bytes(8, "big")
    return h + bytes([fill]) * n


def http_conn(conn, where):
    buf = b""
    conn.settimeout(15)
    try:
        while True:
            head, buf = read_head(conn, buf)
            if head is None:
                return
            line = head.split(b"\r\n")[0].decode("latin-1")
            target = line.split(" ")[1]
            path, _, query = target.partition("?")
            q = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
            close = q.get("close", "0") == "1"
            parts = path.strip("/").split("/")
            if parts[0] == "cl0":
                st = int(parts[1])
                out = b"HTTP/1.1 %d Answer\r\nContent-Length: 0\r\n" % st
                if st in (301, 302, 303, 307, 308):
                    out += b"Location: /elsewhere\r\n"
                out += b"\r\n"
            elif parts[0] == "eof":
                out = b"HTTP/1.1 200 OK\r\nX-Framing: close\r\n\r\n"
                close = True
            elif parts[0] == "nobody":
                out = b"HTTP/1.1 %d Nothing\r\nETag: \"x\"\r\n\r\n" % int(parts[1])
            elif parts[0] == "ws-first":
                key = b""
                for h in head.split(b"\r\n"):
                    if h.lower().startswith(b"sec-websocket-key:"):
                        key = h.split(b":", 1)[1].strip()
                acc = base64.b64encode(hashlib.sha1(
                    key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
                n = int(q.get("n", "90000"))
                out = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc +
                       b"\r\n\r\n")
                frames = ws_frame(n, 0x61) + ws_frame(n - 1000, 0x62)
                conn.sendall(out + frames)
                log(srv=where, event="answer", path=path, sent=len(frames))
                return
            else:
                out = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
            conn.sendall(out)
            log(srv=where, event="answer", path=path, close=close, sent=len(out))
            if close:
                return
    except (OSError, ValueError, IndexError):
        return
    finally:
        try:
            conn.close()
        except OSError:
            pass


def stream_conn(conn, where, banner):
    conn.settimeout(30)
    got = 0
    try:
        if banner:
            conn.sendall(b"220 banner.airlock.test ESMTP ready\r\n")
            log(srv=where, event="banner")
        while True:
            d = conn.recv(65536)
            if not d:
                break
            got += len(d)
            log(srv=where, event="data", data=d.decode("latin-1"))
            conn.sendall((b"echo:" if banner else b"") + d)
    except OSError:
        pass
    finally:
        log(srv=where, event="close", received=got)
        conn.close()


def serve(args):
    global _log
    _log = args.log
    ctx = None
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
    socks = []
    for ep in args.http:
        socks.append((listen(ep), "http", ep))
    for ep in args.tls:
        socks.append((listen(ep), "tls", ep))
    for ep in args.banner:
        socks.append((listen(ep), "banner", ep))
    for ep in args.echo:
        socks.append((listen(ep), "echo", ep))
    sel = selectors.DefaultSelector()
    for s, kind, ep in socks:
        sel.register(s, selectors.EVENT_READ, (kind, ep))
    tmp = args.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("ready\n")
    os.rename(tmp, args.ready)
    stop = [False]

    def on_term(_s, _f):
        stop[0] = True
    signal.signal(signal.SIGTERM, on_term)
    end = time.time() + args.lifetime
    while not stop[0] and time.time() < end:
        for key, _ in sel.select(timeout=0.5):
            kind, ep = key.data
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            if kind == "tls":
                def run(c=conn, ep=ep):
                    try:
                        c.settimeout(15)
                        t = ctx.wrap_socket(c, server_side=True)
                    except (OSError, ssl.SSLError):
                        c.close()
                        return
                    http_conn(t, "tls " + ep)
            elif kind == "http":
                def run(c=conn, ep=ep):
                    http_conn(c, "http " + ep)
            else:
                def run(c=conn, ep=ep, b=kind == "banner"):
                    stream_conn(c, kind + " " + ep, b)
            threading.Thread(target=run, daemon=True).start()


# --- the client ------------------------------------------------------------


class Conn:
    """One connection through the proxy, with a read buffer."""

    def __init__(self, proxy, mode, host, port, ca, timeout):
        ph, pp = endpoint(proxy)
        self.s = socket.create_connection((ph, pp), timeout=timeout)
        self.b = b""
        self.mode = mode
        self.closing = False
        if mode in ("connect", "intercept"):
            self.s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
                           (host.encode(), port, host.encode(), port))
            head = self.until(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise ValueError("CONNECT: %r" % head[:40])
        if mode == "intercept":
            c = ssl.create_default_context(cafile=ca)
            self.s = c.wrap_socket(self.s, server_hostname=host)
            self.b = b""

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

    def eof(self):
        """True when the stream ends with nothing more (or a reset)."""
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    return not self.b
                self.b += d
        except (ConnectionResetError, ssl.SSLError):
            return not self.b
        except socket.timeout:
            return False

    def response(self):
        """(status, framing, body) of one answer."""
        head = self.until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for l in lines[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                h[k.strip().lower()] = v.strip()
        body = b""
        self.closing = h.get("connection", "").lower() == "close"
        if status in (204, 304) or 100 <= status < 200:
            return status, "none", body
        if h.get("transfer-encoding", "").lower().endswith("chunked"):
            while True:
                n = int(self.until(b"\r\n").split(b";")[0], 16)
                if n == 0:
                    self.until(b"\r\n")
                    return status, "chunked", body
                body += self.exact(n)
                self.exact(2)
        if "content-length" in h:
            return status, "length", self.exact(int(h["content-length"]))
        while True:
            try:
                self.fill()
            except EOFError:
                break
        body, self.b = self.b, b""
        return status, "close", body


def client(argv):
    ap = argparse.ArgumentParser(prog="framing_server.py client")
    ap.add_argument("proxy")
    ap.add_argument("mode", choices=["plain", "connect", "intercept"])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("path", help="e.g. /cl0/302")
    ap.add_argument("--close", action="store_true", help="the upstream closes after")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--ca")
    ap.add_argument("--timeout", type=float, default=5)
    a = ap.parse_args(argv)
    ok = 0
    fails = []
    for i in range(a.runs):
        what = "%s?close=%d&run=%d" % (a.path, 1 if a.close else 0, i)
        try:
            c = Conn(a.proxy, a.mode, a.host, a.port, a.ca, a.timeout)
            if a.mode == "plain":
                target = "http://%s:%d%s" % (a.host, a.port, what)
            else:
                target = what
            req = b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), a.host.encode())
            c.s.sendall(req)
            st, framing, body = c.response()
            if body:
                raise ValueError("a body of %d bytes" % len(body))
            if framing == "close" or c.closing or (a.close and a.mode != "plain"):
                # the answer is whole; then the connection ends (a
                # tunnel ends with its upstream)
                if not c.eof():
                    raise ValueError("the connection did not end after the answer")
            else:
                # kept alive (the proxy's own requests: a new upstream
                # connection serves the next one)
                # kept alive: a second answer on the same connection
                c.s.sendall(req.replace(b"run=", b"again="))
                st2, _, body2 = c.response()
                if st2 != st or body2:
                    raise ValueError("second answer %d" % st2)
            ok += 1
            c.s.close()
        except (OSError, EOFError, ValueError, ssl.SSLError) as e:
            fails.append("%d: %s %s" % (i, type(e).__name__, e))
    print(json.dumps({"ok": ok, "runs": a.runs, "fails": fails[:3]}))
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        sys.exit(client(sys.argv[2:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--lifetime", type=float, default=600)
    ap.add_argument("--http", action="append", default=[])
    ap.add_argument("--tls", action="append", default=[])
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--banner", action="append", default=[])
    ap.add_argument("--echo", action="append", default=[])
    serve(ap.parse_args())


if __name__ == "__main__":
    main()
