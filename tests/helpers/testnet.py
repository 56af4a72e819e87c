#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""testnet - an "internet in a box" for the egress proxy tests.

Run it inside the test's network namespace (tests/netns-exec), after the
test addresses have been added to lo. Python 3 standard library only; the
TLS certificates are made with the openssl command.

  testnet.py --config FILE      serve until SIGTERM/SIGINT or the lifetime
  testnet.py send ADDR:PORT ... a raw TCP client (see send --help)
  testnet.py hello ...          writes a TLS ClientHello (see hello --help)
  testnet.py hrr-client ...     a second ClientHello after a HelloRetryRequest

The config is a JSON object; every key is optional except "log":

  {
    "log": "/tmp/x/net.log",       every event, one JSON object a line
    "ready": "/tmp/x/ready",       written (atomically) once every socket
                                   is bound; "ready" is also printed
    "lifetime": 300,               seconds before it exits by itself
    "dns": {
      "listen": ["127.0.0.1:5353"],  UDP and TCP on each
      "zone": {
        "a.test":   ["198.18.0.10", "fd00::1"],   A/AAAA by family
        "b.test":   {"A": ["198.18.0.10"], "AAAA": []},
        "c.test":   {"CNAME": "a.test"},
        "r.test":   {"seq": [{"A": ["198.18.0.10"]}, {"A": ["127.0.0.1"]}]},
        "f.test":   {"rcode": "SERVFAIL"},
        "d.test":   {"drop": true},
        "s.test":   {"delay": 2, "A": ["198.18.0.10"]}
      }
    },
    "http": ["198.18.0.10:80", "[fd00::1]:80"],
    "tls": {"dir": "/tmp/x/tls", "names": ["a.test"],
            "listen": ["198.18.0.10:443"]},
    "sink": ["127.0.0.1:80", "169.254.169.254:80"]
  }

DNS: answers are authoritative with TTL 0. An unknown name is NXDOMAIN; a
known name without records of the asked type is NOERROR with no answer. A
"seq" entry answers its first element to the first query of a (name, type),
its second to the second, and the last one to every later query (so
[{X}, {Y}] is "X first, Y afterwards": DNS rebinding). "delay" answers
(over UDP) that many seconds late. CNAMEs are followed
within the zone. An answer over 512 bytes is sent over UDP truncated (TC
set, no records; EDNS is ignored), so the client must ask over TCP. Every
query is logged with the answer given.

HTTP: keep-alive HTTP/1.1. Each answer is 200 with a body whose first line
names the server, e.g.
  hello from 198.18.0.10:80 method=POST path=/x host=a.test body-length=5
followed by the request body as received (Content-Length or chunked,
de-chunked). GET /bytes/N answers N bytes (byte i is i % 251),
GET /chunked answers "hello from ..." in chunked encoding, GET
/sse?n=N&gap=S streams N events ("data: I") S seconds apart (chunked),
GET /echo[?c=N] reflects the Authorization and x-api-key it got in an X-Echo
header and twice in the body (in chunks of N bytes when c is given),
a PATH listed in the configuration's "answers" gets those answers (the
nth request the nth, then the last again: status, type, headers, body),
GET /ws with "Upgrade: websocket" answers 101 and then echoes every byte
it gets, and GET /evil/KEY answers one of the canned answers of EVIL and
closes. Each connection and each request (line, headers, body length) is
logged.

TLS: on first start it makes a CA (DIR/ca.pem) and a leaf for the names
(DIR/leaf.pem, DIR/leaf.key) with the openssl command, then serves the
same HTTP over TLS; it logs each connection, the SNI the client sent
(null when none) and whether the handshake succeeded.

sink: accepts, logs the connection and its first bytes, closes. A test
proves that a target was never reached by finding no sink line for it.

hrr: a TLS 1.3 server's first move only: reads a ClientHello (logs its
SNI, event "hello"), answers a HelloRetryRequest, then reads the next
ClientHello (after change_cipher_spec records) and logs its SNI (event
"hello2"; sni null and eof true when none came), and closes.
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
import struct
import subprocess
import sys
import threading
import time

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
IO_TIMEOUT = 15

_log_lock = threading.Lock()
_log_path = None


def log(**ev):
    ev = dict(t=round(time.time(), 3), **ev)
    line = json.dumps(ev, sort_keys=True) + "\n"
    with _log_lock:
        with open(_log_path, "a") as f:
            f.write(line)
            f.flush()


def parse_endpoint(s):
    """'1.2.3.4:80' or '[::1]:80' -> (family, host, port)."""
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
        return socket.AF_INET6, host, int(port)
    host, _, port = s.rpartition(":")
    return socket.AF_INET, host, int(port)


def fmt_peer(addr):
    if len(addr) == 4 or ":" in addr[0]:
        return "[%s]:%d" % (addr[0], addr[1])
    return "%s:%d" % (addr[0], addr[1])


def bind(endpoint, kind):
    fam, host, port = parse_endpoint(endpoint)
    s = socket.socket(fam, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    if kind == socket.SOCK_STREAM:
        s.listen(128)
    return s


# --- DNS ---------------------------------------------------------------------

QTYPES = {1: "A", 28: "AAAA", 5: "CNAME", 255: "ANY"}
RCODES = {"NOERROR": 0, "SERVFAIL": 2, "NXDOMAIN": 3, "REFUSED": 5}


def norm_name(n):
    n = n.lower()
    return n[:-1] if n.endswith(".") else n


class Zone:
    def __init__(self, zone):
        self.zone = {}
        for name, spec in (zone or {}).items():
            if isinstance(spec, list):
                spec = {"A": [a for a in spec if ":" not in a],
                        "AAAA": [a for a in spec if ":" in a]}
            self.zone[norm_name(name)] = spec
        self.counts = {}
        self.lock = threading.Lock()

    def delay(self, name):
        spec = self.zone.get(norm_name(name))
        return float(spec.get("delay", 0)) if isinstance(spec, dict) else 0.0

    def records(self, name, qtype):
        """(rcode, drop, [(owner, type, rdata-text)]) for one query."""
        name = norm_name(name)
        with self.lock:
            key = (name, qtype)
            n = self.counts.get(key, 0)
            self.counts[key] = n + 1
        out = []
        seen = set()
        while True:
            spec = self.zone.get(name)
            if spec is None:
                return (3 if not out else 0), False, out, n
            if spec.get("drop"):
                return 0, True, [], n
            if "rcode" in spec:
                return RCODES[spec["rcode"]], False, out, n
            if "seq" in spec:
                seq = spec["seq"]
                spec = seq[min(n, len(seq) - 1)]
            if "CNAME" in spec and name not in seen:
                seen.add(name)
                out.append((name, "CNAME", norm_name(spec["CNAME"])))
                if qtype == "CNAME":
                    return 0, False, out, n
                name = norm_name(spec["CNAME"])
                continue
            types = ["A", "AAAA"] if qtype == "ANY" else [qtype]
            for t in types:
                for a in spec.get(t, []):
                    out.append((name, t, a))
            return 0, False, out, n


def encode_name(name):
    b = b""
    for label in name.split(".") if name else []:
        raw = label.encode("ascii")
        b += bytes([len(raw)]) + raw
    return b + b"\0"


def query_name(msg):
    """The first question's name of a DNS message ("" if unreadable)."""
    pos, labels = 12, []
    while pos < len(msg) and msg[pos] != 0 and not msg[pos] & 0xC0:
        labels.append(msg[pos + 1:pos + 1 + msg[pos]].decode("latin-1"))
        pos += 1 + msg[pos]
    return ".".join(labels)


def dns_answer(zone, msg, proto, peer):
    """The response to one query message, or None to stay silent."""
    if len(msg) < 12:
        return None
    qid, flags, qd, _an, _ns, _ar = struct.unpack("!HHHHHH", msg[:12])
    if flags & 0x8000 or qd != 1:
        return None
    pos = 12
    labels = []
    while True:
        if pos >= len(msg):
            return None
        ln = msg[pos]
        if ln == 0:
            pos += 1
            break
        if ln & 0xC0 or pos + 1 + ln > len(msg):
            return None
        labels.append(msg[pos + 1:pos + 1 + ln].decode("latin-1"))
        pos += 1 + ln
    if pos + 4 > len(msg):
        return None
    qtype_n, _qclass = struct.unpack("!HH", msg[pos:pos + 4])
    question = msg[12:pos + 4]
    qname = ".".join(labels)
    qtype = QTYPES.get(qtype_n, str(qtype_n))
    rcode, drop, recs, n = zone.records(qname, qtype)
    log(srv="dns", proto=proto, peer=fmt_peer(peer), name=qname, type=qtype,
        n=n + 1, rcode=[k for k, v in RCODES.items() if v == rcode][0],
        drop=drop, answers=["%s %s %s" % r for r in recs])
    if drop:
        return None
    rd = flags & 0x0100
    rflags = 0x8000 | 0x0400 | rd | rcode  # QR, AA, RD copied
    body = b""
    for owner, t, data in recs:
        if t == "A":
            tn, rdata = 1, socket.inet_pton(socket.AF_INET, data)
        elif t == "AAAA":
            tn, rdata = 28, socket.inet_pton(socket.AF_INET6, data)
        else:
            tn, rdata = 5, encode_name(data)
        body += encode_name(owner) + struct.pack("!HHIH", tn, 1, 0, len(rdata)) + rdata
    hdr = struct.pack("!HHHHHH", qid, rflags, 1, len(recs), 0, 0)
    return hdr + question + body


def udp_fit(resp):
    """Over 512 bytes (EDNS is ignored): the header with TC set and the
    question only, so that the client asks again over TCP."""
    if len(resp) <= 512:
        return resp
    qid, flags, qd = struct.unpack("!HHH", resp[:6])
    pos = 12
    while resp[pos] != 0:
        pos += 1 + resp[pos]
    return struct.pack("!HHHHHH", qid, flags | 0x0200, qd, 0, 0, 0) + resp[12:pos + 5]


def serve_dns_tcp(conn, peer, zone):
    try:
        conn.settimeout(IO_TIMEOUT)
        while True:
            ln = recv_exact(conn, 2)
            if ln is None:
                return
            msg = recv_exact(conn, struct.unpack("!H", ln)[0])
            if msg is None:
                return
            resp = dns_answer(zone, msg, "tcp", peer)
            if resp is None:
                return
            conn.sendall(struct.pack("!H", len(resp)) + resp)
    except OSError:
        pass
    finally:
        conn.close()


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        d = conn.recv(n - len(buf))
        if not d:
            return None
        buf += d
    return buf


# --- HTTP --------------------------------------------------------------------

class Reader:
    """Buffered reads from a socket (plain or TLS)."""

    def __init__(self, conn):
        self.conn = conn
        self.buf = b""

    def fill(self):
        d = self.conn.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def until(self, sep, limit):
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("over limit")
            self.fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_body(rd, headers, conn):
    te = [v for k, v in headers if k.lower() == "transfer-encoding"]
    cl = [v for k, v in headers if k.lower() == "content-length"]
    exp = [v for k, v in headers if k.lower() == "expect"]
    if exp and exp[0].lower() == "100-continue":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if te and te[-1].strip().lower().endswith("chunked"):
        body = b""
        while True:
            line = rd.until(b"\r\n", 4096)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while rd.until(b"\r\n", MAX_HEAD) != b"\r\n":
                    pass  # trailers
                return body, "chunked"
            if len(body) + size > MAX_BODY:
                raise ValueError("body too big")
            body += rd.exact(size)
            rd.exact(2)
    if cl:
        n = int(cl[0].strip())
        if n > MAX_BODY:
            raise ValueError("body too big")
        return rd.exact(n), "content-length"
    return b"", "none"


def serve_http(conn, peer, name, kind):
    rd = Reader(conn)
    nreq = 0
    while True:
        try:
            head = rd.until(b"\r\n\r\n", MAX_HEAD)
        except (EOFError, ValueError, OSError, ssl.SSLError):
            return
        lines = head[:-4].split(b"\r\n")
        reqline = lines[0].decode("latin-1")
        headers = []
        for h in lines[1:]:
            k, _, v = h.decode("latin-1").partition(":")
            headers.append([k, v.strip()])
        parts = reqline.split(" ")
        method = parts[0]
        target = parts[1] if len(parts) > 1 else ""
        try:
            body, framing = read_body(rd, headers, conn)
        except (EOFError, ValueError, OSError, ssl.SSLError) as e:
            log(srv=kind, listen=name, event="request", peer=peer, line=reqline,
                headers=headers, error=str(e) or type(e).__name__)
            return
        nreq += 1
        host = ",".join(v for k, v in headers if k.lower() == "host")
        log(srv=kind, listen=name, event="request", peer=peer, n=nreq,
            host=host, line=reqline, headers=headers, framing=framing,
            body_len=len(body), body_sha256=hashlib.sha256(body).hexdigest())
        close = any(k.lower() == "connection" and "close" in v.lower()
                    for k, v in headers)
        first = ("hello from %s method=%s path=%s host=%s body-length=%d\n"
                 % (name, method, target, host, len(body))).encode()
        if target.startswith("/ws") and any(
                k.lower() == "upgrade" and v.lower() == "websocket" for k, v in headers):
            key = ",".join(v for k, v in headers if k.lower() == "sec-websocket-key")
            acc = base64.b64encode(hashlib.sha1(
                (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            try:
                conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                              % acc).encode())
                echoed = 0
                if rd.buf:
                    conn.sendall(rd.buf)
                    echoed += len(rd.buf)
                while True:
                    d = conn.recv(65536)
                    if not d:
                        break
                    conn.sendall(d)
                    echoed += len(d)
            except OSError:
                pass
            log(srv=kind, listen=name, event="upgrade", peer=peer, echoed=echoed)
            return
        if target.startswith("/sse"):
            q = dict(p.split("=", 1) for p in target.partition("?")[2].split("&") if "=" in p)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                for i in range(int(q.get("n", "3"))):
                    time.sleep(float(q.get("gap", "0.5")))
                    ev = b"data: %d\n\n" % i
                    conn.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                conn.sendall(b"0\r\n\r\n")
            except OSError:
                return
            if close:
                return
            continue
        canned = ANSWERS.get(target.partition("?")[0])
        if canned is not None:
            # configured answers ("answers": {PATH: [ANSWER...]}): the nth
            # request to PATH gets the nth, the last one repeats
            k = ANSWER_COUNT.get(target, 0)
            ANSWER_COUNT[target] = k + 1
            a = canned[min(k, len(canned) - 1)]
            out = a.get("body", "").replace("@NOW@", str(int(time.time()))).encode()
            hdrs = ["HTTP/1.1 %d OK" % a.get("status", 200),
                    "Content-Type: %s" % a.get("type", "application/json"),
                    "Content-Length: %d" % len(out)]
            hdrs += ["%s: %s" % (k2, v2) for k2, v2 in a.get("headers", [])]
            try:
                conn.sendall(("\r\n".join(hdrs) + "\r\n\r\n").encode() + out)
            except OSError:
                return
            continue
        if target.startswith("/evil/"):
            canned = EVIL.get(target[6:])
            if canned is not None:
                try:
                    conn.sendall(canned.replace(b"NAME", name.encode()))
                except OSError:
                    pass
                return
        extra = b""
        chunked = False
        echo = None
        if target.startswith("/echo"):
            # reflects the credentials it got: in a header, and in the
            # body (chunks of c bytes when c is given, else Content-Length)
            q = dict(p.split("=", 1) for p in target.partition("?")[2].split("&") if "=" in p)
            cred = ",".join(v for k, v in headers
                            if k.lower() in ("authorization", "x-api-key"))
            echo = cred
            out = ("echo %s\nagain:%s;\n" % (cred, cred)).encode()
            if "c" in q:
                chunked = True
                step = max(1, int(q["c"]))
        elif target.startswith("/bytes/"):
            n = min(int(target[7:].split("?")[0]), MAX_BODY)
            out = bytes(i % 251 for i in range(n))
        elif target.startswith("/chunked"):
            out = first + body
            chunked = True
        else:
            out = first + body
        hdrs = ["HTTP/1.1 200 OK", "Content-Type: application/octet-stream",
                "X-Testnet-Server: %s" % name]
        if echo is not None:
            hdrs.append("X-Echo: %s" % echo)
        if chunked:
            hdrs.append("Transfer-Encoding: chunked")
            step = step if echo is not None else 7
            for i in range(0, len(out), step):
                c = out[i:i + step]
                extra += b"%x\r\n%s\r\n" % (len(c), c)
            extra += b"0\r\n\r\n"
        else:
            hdrs.append("Content-Length: %d" % len(out))
            extra = out
        if close:
            hdrs.append("Connection: close")
        if method == "HEAD":
            extra = b""
        try:
            conn.sendall(("\r\n".join(hdrs) + "\r\n\r\n").encode() + extra)
        except OSError:
            return
        if close:
            return


# Configured answers by path ("answers" in the configuration).
ANSWERS = {}
ANSWER_COUNT = {}

# Answers that test how the proxy reads responses (GET /evil/KEY); the
# connection is closed after each.
EVIL = {
    # both framings: a proxy that reads one and a client the other disagree
    "clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
    "twocl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "badstatus": b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nhi",
    # no length: the body runs until the server closes
    "close": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close from NAME\n",
    # interim answers before the final one
    "interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
               b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\n"
               b"after interim\n",
    # big interim answers (4 x 20 KB), then a final head that is not HTTP
    "bigearly": b"".join(b"HTTP/1.1 103 Early Hints\r\n" +
                         b"".join(b"Link: <https://h.test/%02d/%s>\r\n" % (i, b"x" * 960)
                                  for i in range(20)) + b"\r\n" for _ in range(4)) +
                b"HTTP/1.1 2000 Bad\r\nContent-Length: 2\r\n\r\nhi",
}


def http_conn(conn, addr, name):
    peer = fmt_peer(addr)
    log(srv="http", listen=name, event="connect", peer=peer)
    try:
        conn.settimeout(IO_TIMEOUT)
        serve_http(conn, peer, name, "http")
    finally:
        conn.close()


_tls_local = threading.local()


def _sni_cb(_sock, server_name, _ctx):
    # Runs in the thread doing the handshake.
    _tls_local.sni = server_name


def tls_conn(conn, addr, name, ctx):
    peer = fmt_peer(addr)
    log(srv="tls", listen=name, event="connect", peer=peer)
    _tls_local.sni = None
    try:
        conn.settimeout(IO_TIMEOUT)
        # Log the first bytes the client sent, without consuming them.
        try:
            first = conn.recv(16, socket.MSG_PEEK)
        except OSError:
            first = b""
        try:
            s = ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as e:
            log(srv="tls", listen=name, event="handshake", peer=peer, ok=False,
                sni=_tls_local.sni, first=first.hex(), error=str(e))
            return
        log(srv="tls", listen=name, event="handshake", peer=peer, ok=True,
            sni=_tls_local.sni, first=first.hex(), version=s.version())
        serve_http(s, peer, "tls " + name, "tls")
        try:
            s.close()
        except OSError:
            pass
    finally:
        conn.close()


def sink_conn(conn, addr, name):
    peer = fmt_peer(addr)
    log(srv="sink", listen=name, event="connect", peer=peer)
    data = b""
    try:
        conn.settimeout(2)
        try:
            data = conn.recv(1024)
        except OSError:
            pass
    finally:
        conn.close()
    log(srv="sink", listen=name, event="data", peer=peer,
        data=data.decode("latin-1"))


HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891"
                           "c2a211167abb8c5e079e09e2c8a8339c")


def hello_sni(hs):
    """The server_name of a ClientHello handshake message (bytes from its
    type byte), or None."""
    try:
        p = 4 + 2 + 32
        p += 1 + hs[p]
        p += 2 + int.from_bytes(hs[p:p + 2], "big")
        p += 1 + hs[p]
        end = p + 2 + int.from_bytes(hs[p:p + 2], "big")
        p += 2
        while p + 4 <= end:
            t, ln = int.from_bytes(hs[p:p + 2], "big"), int.from_bytes(hs[p + 2:p + 4], "big")
            if t == 0:
                n = int.from_bytes(hs[p + 7:p + 9], "big")
                return hs[p + 9:p + 9 + n].decode("latin-1")
            p += 4 + ln
    except IndexError:
        pass
    return None


def read_handshake(conn):
    """The next handshake record's payload (skipping change_cipher_spec),
    or None at EOF."""
    while True:
        hdr = recv_exact(conn, 5)
        if hdr is None:
            return None
        body = recv_exact(conn, int.from_bytes(hdr[3:5], "big"))
        if body is None:
            return None
        if hdr[0] == 22:
            return body


def hrr_record():
    body = (b"\x03\x03" + HRR_RANDOM + b"\x00" + b"\x13\x01" + b"\x00" +
            b"\x00\x0c" + b"\x00\x2b\x00\x02\x03\x04" + b"\x00\x33\x00\x02\x00\x17")
    hs = b"\x02" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x03" + len(hs).to_bytes(2, "big") + hs


def hrr_conn(conn, addr, name):
    peer = fmt_peer(addr)
    log(srv="hrr", listen=name, event="connect", peer=peer)
    try:
        conn.settimeout(IO_TIMEOUT)
        hs = read_handshake(conn)
        log(srv="hrr", listen=name, event="hello", peer=peer,
            sni=hello_sni(hs) if hs else None)
        if hs is None:
            return
        conn.sendall(hrr_record())
        hs = read_handshake(conn)
        log(srv="hrr", listen=name, event="hello2", peer=peer,
            sni=hello_sni(hs) if hs else None, eof=hs is None)
    except OSError as e:
        log(srv="hrr", listen=name, event="error", peer=peer, error=str(e))
    finally:
        conn.close()


def make_certs(d, names):
    os.makedirs(d, exist_ok=True)
    ca, cakey = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    leaf, leafkey = os.path.join(d, "leaf.pem"), os.path.join(d, "leaf.key")
    if os.path.exists(leaf) and os.path.exists(leafkey):
        return leaf, leafkey
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, timeout=60)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("openssl", "req", "-x509", *ec, "-keyout", cakey, "-out", ca,
        "-days", "3", "-subj", "/CN=airlock test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    csr = os.path.join(d, "leaf.csr")
    run("openssl", "req", "-new", *ec, "-keyout", leafkey, "-out", csr,
        "-subj", "/CN=" + names[0])
    ext = os.path.join(d, "leaf.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectAltName=" + ",".join("DNS:" + n for n in names) + "\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
        "-CAcreateserial", "-out", leaf, "-days", "3", "-extfile", ext)
    return leaf, leafkey


def serve(cfg):
    global _log_path
    _log_path = cfg["log"]
    ANSWERS.update(cfg.get("answers", {}))
    open(_log_path, "a").close()
    sel = selectors.DefaultSelector()
    dns = cfg.get("dns")
    zone = Zone(dns.get("zone") if dns else {})
    for ep in (dns or {}).get("listen", []):
        sel.register(bind(ep, socket.SOCK_DGRAM), selectors.EVENT_READ, ("dnsu", ep))
        sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ("dnst", ep))
    for ep in cfg.get("http", []):
        sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ("http", ep))
    tls = cfg.get("tls")
    ctx = None
    if tls:
        leaf, key = make_certs(tls["dir"], tls["names"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(leaf, key)
        ctx.sni_callback = _sni_cb
        for ep in tls.get("listen", []):
            sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ("tls", ep))
    for ep in cfg.get("sink", []):
        sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ("sink", ep))
    for ep in cfg.get("hrr", []):
        sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ("hrr", ep))

    stop = {"now": False}

    def on_term(_sig, _frm):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log(srv="testnet", event="ready", pid=os.getpid())
    if cfg.get("ready"):
        tmp = cfg["ready"] + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, cfg["ready"])
    print("ready", flush=True)

    deadline = time.time() + float(cfg.get("lifetime", 300))
    while not stop["now"] and time.time() < deadline:
        for key, _ in sel.select(timeout=0.5):
            kind, ep = key.data
            s = key.fileobj
            try:
                if kind == "dnsu":
                    msg, peer = s.recvfrom(65535)
                    resp = dns_answer(zone, msg, "udp", peer)
                    delay = zone.delay(query_name(msg)) if len(msg) > 12 else 0
                    if resp is not None and delay > 0:
                        t = threading.Timer(delay, s.sendto, args=(udp_fit(resp), peer))
                        t.daemon = True
                        t.start()
                    elif resp is not None:
                        s.sendto(udp_fit(resp), peer)
                    continue
                conn, addr = s.accept()
            except OSError:
                continue
            if kind == "dnst":
                t = threading.Thread(target=serve_dns_tcp, args=(conn, addr, zone))
            elif kind == "http":
                t = threading.Thread(target=http_conn, args=(conn, addr, ep))
            elif kind == "tls":
                t = threading.Thread(target=tls_conn, args=(conn, addr, ep, ctx))
            elif kind == "hrr":
                t = threading.Thread(target=hrr_conn, args=(conn, addr, ep))
            else:
                t = threading.Thread(target=sink_conn, args=(conn, addr, ep))
            t.daemon = True
            t.start()
    log(srv="testnet", event="exit")
    return 0


# --- the raw client ------------------------------------------------------------

def complete_answers(got, sent):
    """How many whole HTTP answers `got` holds, in order. A 1xx other than
    101 is not an answer; a 101, and a 2xx to a CONNECT, end with their
    head; 204 and 304 have no body; else a chunked body to its last chunk
    and trailers, or Content-Length bytes. An answer whose body ends only
    when the connection closes is never complete here."""
    n = 0
    connect = sent.startswith(b"CONNECT ")
    i = 0
    while True:
        e = got.find(b"\r\n\r\n", i)
        if e < 0:
            return n
        head = got[i:e].decode("latin-1").split("\r\n")
        i = e + 4
        try:
            status = int(head[0].split(" ")[1])
        except (IndexError, ValueError):
            return n
        if 100 <= status < 200 and status != 101:
            continue
        fields = {}
        for h in head[1:]:
            k, _, v = h.partition(":")
            fields[k.strip().lower()] = v.strip().lower()
        if status == 101 or (connect and n == 0 and 200 <= status < 300):
            return n + 1  # what follows is the tunnel's, not HTTP
        if status in (204, 304):
            n += 1
            continue
        if fields.get("transfer-encoding", "").endswith("chunked"):
            while True:
                le = got.find(b"\r\n", i)
                if le < 0:
                    return n
                try:
                    size = int(got[i:le].split(b";")[0], 16)
                except ValueError:
                    return n
                i = le + 2
                if size == 0:
                    te = got.find(b"\r\n\r\n", i - 2)
                    if te < 0:
                        return n
                    i = te + 4
                    break
                if len(got) < i + size + 2:
                    return n
                i += size + 2
            n += 1
            continue
        if "content-length" in fields:
            try:
                cl = int(fields["content-length"])
            except ValueError:
                return n
            if len(got) < i + cl:
                return n
            i += cl
            n += 1
            continue
        return n


def send(argv):
    ap = argparse.ArgumentParser(prog="testnet.py send", description=(
        "Connects to ADDR:PORT, sends standard input (or --data), prints "
        "what comes back on standard output until the peer closes or is "
        "idle for --idle seconds (at most --timeout in all)."))
    ap.add_argument("endpoint")
    ap.add_argument("--data", help="bytes to send, with \\r \\n \\t \\xHH escapes")
    ap.add_argument("--trickle", type=float, default=0,
                    help="send one byte every TRICKLE seconds")
    ap.add_argument("--idle", type=float, default=3)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--shut", action="store_true", help="half-close after sending")
    ap.add_argument("--report", help="write a JSON summary here")
    ap.add_argument("--answers", type=int, default=0,
                    help="stop once this many complete HTTP answers have "
                         "come (a 1xx other than 101 does not count), "
                         "instead of waiting --idle seconds for more")
    a = ap.parse_args(argv)
    if a.data is not None:
        data = a.data.encode("latin-1").decode("unicode_escape").encode("latin-1")
    else:
        data = sys.stdin.buffer.read()
    fam, host, port = parse_endpoint(a.endpoint)
    rep = {"sent": 0, "closed_by_peer": False, "error": None}
    start = time.time()
    got = b""
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(min(a.timeout, 10))
    try:
        s.connect((host, port))
        if a.trickle:
            for i in range(len(data)):
                if time.time() - start > a.timeout:
                    break
                s.sendall(data[i:i + 1])
                rep["sent"] += 1
                time.sleep(a.trickle)
                # notice an early close or answer without blocking
                s.setblocking(False)
                try:
                    d = s.recv(65536)
                    if not d:
                        rep["closed_by_peer"] = True
                        break
                    got += d
                except BlockingIOError:
                    pass
                finally:
                    s.setblocking(True)
                    s.settimeout(min(a.timeout, 10))
        else:
            s.sendall(data)
            rep["sent"] = len(data)
        if a.shut:
            s.shutdown(socket.SHUT_WR)
        while not rep["closed_by_peer"] and time.time() - start < a.timeout:
            if a.answers and complete_answers(got, data) >= a.answers:
                break
            s.settimeout(max(0.05, min(a.idle, a.timeout - (time.time() - start))))
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                rep["closed_by_peer"] = True
                break
            got += d
    except OSError as e:
        rep["error"] = "%s" % (e.strerror or e)
        if isinstance(e, (ConnectionResetError, BrokenPipeError)):
            rep["closed_by_peer"] = True
    finally:
        s.close()
    rep["elapsed"] = round(time.time() - start, 3)
    rep["received"] = len(got)
    sys.stdout.buffer.write(got)
    sys.stdout.flush()
    if a.report:
        with open(a.report, "w") as f:
            json.dump(rep, f)
    return 0


# --- ClientHellos ---------------------------------------------------------------

def real_hello(sni):
    """The ClientHello Python's ssl (OpenSSL) sends for this SNI (or none)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def crafted_hello(names, dup, tls13=False):
    """A minimal TLS 1.2 ClientHello with a server_name list of NAMES (in
    one extension, or DUP extensions of one name each); TLS13 adds
    supported_versions offering TLS 1.3."""
    def vec(n, b):
        return len(b).to_bytes(n, "big") + b

    def sni_ext(ns):
        lst = b"".join(b"\x00" + vec(2, x.encode()) for x in ns)
        return b"\x00\x00" + vec(2, vec(2, lst))

    if dup:
        exts = b"".join(sni_ext([n]) for n in names)
    else:
        exts = sni_ext(names) if names else b""
    if tls13:
        exts += b"\x00\x2b" + vec(2, vec(1, b"\x03\x04\x03\x03"))
    body = (b"\x03\x03" + os.urandom(32) + vec(1, b"") +
            vec(2, b"\x13\x01\x13\x02\xc0\x2f\x00\x2f") + vec(1, b"\x00") +
            vec(2, exts))
    hs = b"\x01" + vec(3, body)
    return b"\x16\x03\x01" + vec(2, hs)


def split_records(rec, n):
    """Re-frames one handshake record as N records (same bytes inside)."""
    payload = rec[5:]
    size = -(-len(payload) // n)
    out = b""
    for i in range(0, len(payload), size):
        part = payload[i:i + size]
        out += rec[:3] + len(part).to_bytes(2, "big") + part
    return out


def hello(argv):
    ap = argparse.ArgumentParser(prog="testnet.py hello", description=(
        "Writes a TLS ClientHello record to standard output: the one "
        "Python's ssl sends (--sni NAME, or none), or a crafted one "
        "(--names A,B: one server_name list; --dup: one extension per name)."))
    ap.add_argument("--sni")
    ap.add_argument("--names")
    ap.add_argument("--dup", action="store_true")
    ap.add_argument("--records", type=int, default=1,
                    help="split the handshake message over this many records")
    a = ap.parse_args(argv)
    if a.names:
        rec = crafted_hello(a.names.split(","), a.dup)
    else:
        rec = real_hello(a.sni)
    if a.records > 1:
        rec = split_records(rec, a.records)
    sys.stdout.buffer.write(rec)
    return 0


def hrr_client(argv):
    ap = argparse.ArgumentParser(prog="testnet.py hrr-client", description=(
        "Through the proxy PROXY: CONNECT TARGET, a TLS 1.3 ClientHello with "
        "SNI --sni1, then (after the server's HelloRetryRequest) a second "
        "one with SNI --sni2 (none: --sni2 ''). Writes a JSON report."))
    ap.add_argument("proxy")
    ap.add_argument("target")
    ap.add_argument("--sni1", required=True)
    ap.add_argument("--sni2", required=True)
    ap.add_argument("--ccs", action="store_true",
                    help="send change_cipher_spec before the second hello")
    ap.add_argument("--report", required=True)
    a = ap.parse_args(argv)
    fam, host, port = parse_endpoint(a.proxy)
    rep = {"status": None, "got_hrr": False, "closed_by_peer": False, "error": None}
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.target, a.target)).encode())
        rd = Reader(s)
        head = rd.until(b"\r\n\r\n", 4096)
        rep["status"] = int(head.split(b" ")[1])
        s.sendall(crafted_hello([a.sni1], False, tls13=True))
        while len(rd.buf) < 5:
            rd.fill()
        rec = rd.exact(5 + int.from_bytes(rd.buf[3:5], "big"))
        rep["got_hrr"] = rec[0] == 22 and rec[5] == 2 and rec[11:43] == HRR_RANDOM
        if a.ccs:
            s.sendall(b"\x14\x03\x03\x00\x01\x01")
        s.sendall(crafted_hello([a.sni2] if a.sni2 else [], False, tls13=True))
        s.settimeout(2)
        try:
            rep["closed_by_peer"] = s.recv(100) == b""
        except socket.timeout:
            pass
    except (OSError, EOFError, ValueError, IndexError) as e:
        rep["error"] = str(e) or type(e).__name__
        if isinstance(e, (ConnectionResetError, BrokenPipeError, EOFError)):
            rep["closed_by_peer"] = True
    finally:
        s.close()
    with open(a.report, "w") as f:
        json.dump(rep, f)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "send":
        return send(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "hrr-client":
        return hrr_client(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "hello":
        return hello(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    return serve(cfg)


if __name__ == "__main__":
    sys.exit(main())
