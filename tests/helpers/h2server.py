#!/usr/bin/python3
"""h2server.py - a TLS HTTP/2 origin for the interception tests (66).

    h2server.py --listen ADDR:PORT --cert LEAF --key KEY --log FILE
                [--alpn h2,http/1.1] [--grpc ADDR:PORT] [--lifetime S]

Serves h2 (the python3-h2 state machine). Every request is logged to FILE
as one JSON line {"path", "headers": [[name, value]...], "trailers", "body"} when it
ends. Answers:

  /echo...   200; header x-echo and trailer x-trailer carry the request's
             authorization (or x-api-key) value; the body is that value,
             the headers as JSON, and the value again, sent in 7-byte DATA
             frames (a value is split across frames); content-length none
  /len...    the same body with a content-length
  /stream?n=N  N chunks 100 ms apart, each holding the value
  /v1/messages  an Anthropic-shaped JSON answer: usage 1000 in, 100 out
  /early     a 103 (Early Hints) whose link and x-echo carry the value, then
             200 "ok"
  /coded?c=CODINGS[&bad=1]  ignores accept-encoding: the value, 1500
             lines of filler and the value again, coded with CODINGS
             (gzip, deflate, br, zstd, comma-separated in the order
             applied; any other name is sent as it is, uncoded), with
             content-encoding CODINGS, in 100-byte DATA frames, then
             trailer x-trailer with the value; bad=1 breaks the gzip
             header (its third byte), bad=2 cuts the coded body short
             after its first half
  else       200 "ok"

A connection whose ALPN is http/1.1 (--alpn h2,http/1.1: only when the
client offers no h2) serves one HTTP/1.1 WebSocket handshake: the
request is logged {"ws": PATH, "alpn": "http/1.1", "headers": [...]},
answered 101, and every byte after it echoed back until the close.

--grpc also starts a gRPC server (python3-grpcio, generic handlers, no
codegen) on ADDR:PORT with the same leaf: /test.Echo/Unary,
/test.Echo/ServerStream (3 messages), /test.Echo/Bidi (one answer per
message). Each echoes the metadata's authorization value in its initial
metadata (x-echo), its trailing metadata (x-trailer) and every message,
and logs {"grpc": METHOD, "authorization": VALUE} to FILE.
"""
import argparse
import gzip
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import zlib

import h2.config
import h2.connection
import h2.events

LOCK = threading.Lock()


def log(path, obj):
    with LOCK, open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")


def secret_of(headers):
    for k, v in headers:
        if k.lower() in ("authorization", "x-api-key"):
            return v
    return ""


def send_all(sock, conn):
    data = conn.data_to_send()
    if data:
        sock.sendall(data)


def serve_conn(sock, a):
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    send_all(sock, conn)
    streams = {}
    pending = []  # (stream, chunks left, value) of /stream
    sock.settimeout(0.1)
    deadline = time.time() + a.lifetime
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
            if not data:
                return
        except socket.timeout:
            data = None
        except OSError:
            return
        events = conn.receive_data(data) if data else []
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                streams[ev.stream_id] = {"headers": ev.headers, "body": b""}
            elif isinstance(ev, h2.events.DataReceived):
                if ev.stream_id in streams:
                    streams[ev.stream_id]["body"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                if ev.stream_id in streams:
                    streams[ev.stream_id]["trailers"] = ev.headers
            elif isinstance(ev, h2.events.StreamEnded):
                st = streams.pop(ev.stream_id, None)
                if st:
                    respond(conn, ev.stream_id, st, a, pending)
            elif isinstance(ev, h2.events.StreamReset):
                streams.pop(ev.stream_id, None)
        for p in list(pending):
            sid, left, value, due = p
            if time.time() < due:
                continue
            pending.remove(p)
            try:
                if left == 0:
                    conn.end_stream(sid)
                else:
                    conn.send_data(sid, ("chunk %d %s\n" % (left, value)).encode())
                    pending.append((sid, left - 1, value, time.time() + 0.1))
            except Exception:
                pass
        try:
            send_all(sock, conn)
        except OSError:
            return


def serve_ws(sock, a):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        d = sock.recv(4096)
        if not d:
            return
        head += d
    head, _, rest = head.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [tuple(x.strip() for x in l.split(":", 1)) for l in lines[1:] if ":" in l]
    log(a.log, {"ws": lines[0].split(" ")[1], "alpn": "http/1.1", "headers": headers})
    key = dict((k.lower(), v) for k, v in headers).get("sec-websocket-key", "")
    import base64
    import hashlib
    acc = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % acc).encode())
    if rest:
        sock.sendall(rest)
    while True:
        d = sock.recv(65536)
        if not d:
            return
        sock.sendall(d)


def encode(coding, data):
    if coding == "gzip":
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding in ("br", "zstd"):
        tool = ["brotli", "-c"] if coding == "br" else ["zstd", "-q", "-c"]
        return subprocess.run(tool, input=data, stdout=subprocess.PIPE, check=True).stdout
    return data


def respond(conn, sid, st, a, pending):
    hs = dict(st["headers"])
    path = hs.get(":path", "/")
    log(a.log, {"path": path, "headers": st["headers"], "trailers": st.get("trailers", []),
                "body": st["body"].decode("utf-8", "replace")})
    value = secret_of(st["headers"])
    if path.startswith("/echo") or path.startswith("/len"):
        body = (value + "\n" + json.dumps(st["headers"]) + "\n" + value + "\n").encode()
        head = [(":status", "200"), ("content-type", "text/plain"), ("x-echo", value)]
        if path.startswith("/len"):
            head.append(("content-length", str(len(body))))
        conn.send_headers(sid, head)
        for i in range(0, len(body), 7):
            conn.send_data(sid, body[i:i + 7])
        conn.send_headers(sid, [("x-trailer", value)], end_stream=True)
    elif path.startswith("/early"):
        conn.send_headers(sid, [(":status", "103"), ("link", "</s.css?k=%s>; rel=preload" % value),
                                ("x-echo", value)])
        conn.send_headers(sid, [(":status", "200"), ("content-length", "2")])
        conn.send_data(sid, b"ok", end_stream=True)
    elif path.startswith("/coded"):
        q = dict(p.split("=", 1) for p in path.partition("?")[2].split("&") if "=" in p)
        codings = q.get("c", "gzip")
        body = ("first %s\n" % value).encode()
        body += b"".join(b"filler line %d that compresses well\n" % i for i in range(1500))
        body += ("last %s\n" % value).encode()
        for c in codings.split(","):
            body = encode(c, body)
        if q.get("bad") == "1":  # a gzip header with an unknown method
            body = body[:2] + b"\x09" + body[3:]
        elif q.get("bad") == "2":
            body = body[:len(body) // 2]
        conn.send_headers(sid, [(":status", "200"), ("content-type", "text/plain"),
                                ("content-encoding", codings),
                                ("content-length", str(len(body)))])
        try:
            for i in range(0, len(body), 100):
                conn.send_data(sid, body[i:i + 100])
            conn.send_headers(sid, [("x-trailer", value)], end_stream=True)
        except Exception:  # the proxy reset the stream
            pass
    elif path.startswith("/v1/messages"):  # an Anthropic-shaped answer
        body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                           "model": "claude-haiku-4-5", "stop_reason": "end_turn",
                           "content": [{"type": "text", "text": "hi " + value}],
                           "usage": {"input_tokens": 1000, "output_tokens": 100}}).encode()
        conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"),
                                ("content-length", str(len(body)))])
        conn.send_data(sid, body, end_stream=True)
    elif path.startswith("/stream"):
        n = int(path.split("n=")[1]) if "n=" in path else 3
        conn.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
        pending.append((sid, n, value, time.time()))
    else:
        conn.send_headers(sid, [(":status", "200"), ("content-length", "2")])
        conn.send_data(sid, b"ok", end_stream=True)


def grpc_server(a, listen):
    import grpc
    from concurrent import futures

    def md(ctx):
        return dict(ctx.invocation_metadata()).get("authorization", "")

    def unary(req, ctx):
        v = md(ctx)
        log(a.log, {"grpc": "Unary", "authorization": v})
        ctx.send_initial_metadata((("x-echo", v),))
        ctx.set_trailing_metadata((("x-trailer", v),))
        return req + b" " + v.encode()

    def server_stream(req, ctx):
        v = md(ctx)
        log(a.log, {"grpc": "ServerStream", "authorization": v})
        ctx.send_initial_metadata((("x-echo", v),))
        ctx.set_trailing_metadata((("x-trailer", v),))
        for i in range(3):
            yield b"%d %s" % (i, v.encode())

    def bidi(it, ctx):
        v = md(ctx)
        log(a.log, {"grpc": "Bidi", "authorization": v})
        ctx.send_initial_metadata((("x-echo", v),))
        ctx.set_trailing_metadata((("x-trailer", v),))
        for m in it:
            yield m + b" " + v.encode()

    handler = grpc.method_handlers_generic_handler("test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    with open(a.key, "rb") as k, open(a.cert, "rb") as c:
        creds = grpc.ssl_server_credentials([(k.read(), c.read())])
    server.add_secure_port(listen, creds)
    server.start()
    return server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--alpn", default="h2")
    ap.add_argument("--grpc")
    ap.add_argument("--ready")
    ap.add_argument("--lifetime", type=float, default=600)
    a = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.set_alpn_protocols(a.alpn.split(","))
    host, port = a.listen.rsplit(":", 1)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(64)
    server = grpc_server(a, a.grpc) if a.grpc else None
    if a.ready:
        open(a.ready, "w").close()
    ls.settimeout(1)
    end = time.time() + a.lifetime
    while time.time() < end:
        try:
            s, _ = ls.accept()
        except socket.timeout:
            continue

        def run(s=s):
            try:
                t = ctx.wrap_socket(s, server_side=True)
            except (OSError, ssl.SSLError):
                s.close()
                return
            try:
                if t.selected_alpn_protocol() == "http/1.1":
                    serve_ws(t, a)
                else:
                    serve_conn(t, a)
            except Exception as e:  # a broken client: this connection only
                sys.stderr.write("h2server: %r\n" % e)
            finally:
                t.close()
        threading.Thread(target=run, daemon=True).start()
    if server:
        server.stop(0)


if __name__ == "__main__":
    main()
