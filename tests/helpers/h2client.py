#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""h2client - a python3-h2 client offering ALPN h2 alone (as gRPC clients
do; stock h2 clients such as httpx also offer http/1.1), through the
proxy's CONNECT tunnel to the URL's host. For the h2 tests
(66-intercept-h2*.t); python3-h2 and the standard library only.

  h2client.py PROXY CA TDIR METHOD URL [--data FILE | --stream FILE]
              [--trailer NAME:VALUE] [HEADER...]
      one request (--data sends content-length, --stream does not; a
      trailer follows the body). Writes TDIR/h (an "HTTP/2 STATUS" line,
      then the answer's fields, and "x-h2client-reset: CODE" if the stream
      was reset rather than ended) and TDIR/b (its body); prints
      "STATUS 2".
  h2client.py PROXY CA TDIR late URL BYTES [HEADER...]
      a POST whose body (BYTES) is sent only once its answer has ended;
      prints "STATUS ended", or "STATUS reset:CODE" when the proxy reset
      the stream.
  h2client.py PROXY CA TDIR many PLACEHOLDER
      a first stream, then 20 at once on the same connection, two with
      the placeholder in :path; one line each: "HTTP/2 STATUS BAD
      PLACEHOLDER-IN-BODY VALUE-PREFIX-IN-BODY".
"""
import socket, ssl, sys, urllib.parse
import h2.config, h2.connection, h2.events, h2.exceptions
proxy, ca, t = sys.argv[1:4]
def connect(target="api.airlock.test"):
    host, port = proxy.rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=20)
    raw.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (target, target)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += raw.recv(1)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(raw, server_hostname=target)
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c
def pump(s, c, st):
    d = s.recv(65536)
    if not d:  # the connection ended: every stream with it
        for v in st.values():
            v["done"] = True
        return
    for ev in c.receive_data(d):
        sid = getattr(ev, "stream_id", None)
        if isinstance(ev, h2.events.ResponseReceived):
            st[sid]["head"] = [(k.decode(), v.decode()) for k, v in ev.headers]
        elif isinstance(ev, h2.events.DataReceived):
            st[sid]["body"] += ev.data
            c.acknowledge_received_data(ev.flow_controlled_length, sid)
        elif isinstance(ev, h2.events.StreamReset):
            st[sid]["done"] = True
            st[sid]["reset"] = int(ev.error_code)
        elif isinstance(ev, h2.events.StreamEnded):
            st[sid]["done"] = True
    try:
        s.sendall(c.data_to_send())
    except OSError:
        pass
def request(s, c, st, method, url, headers, body=None, length=True, trailers=()):
    u = urllib.parse.urlsplit(url)
    auth = dict((k.lower(), v) for k, v in headers).get("host", u.netloc)
    hs = [(":method", method), (":scheme", "https"), (":authority", auth),
          (":path", u.path + ("?" + u.query if u.query else ""))]
    hs += [(k.lower(), v) for k, v in headers if k.lower() != "host"]
    if body is not None and length:
        hs.append(("content-length", str(len(body))))
    sid = c.get_next_available_stream_id()
    st[sid] = {"head": None, "body": b"", "done": False}
    c.send_headers(sid, hs, end_stream=body is None and not trailers)
    s.sendall(c.data_to_send())
    while body:
        n = min(len(body), c.local_flow_control_window(sid), c.max_outbound_frame_size)
        if n <= 0:
            pump(s, c, st)
            continue
        c.send_data(sid, body[:n])
        body = body[n:]
        s.sendall(c.data_to_send())
    if trailers:
        c.send_headers(sid, list(trailers), end_stream=True)
        s.sendall(c.data_to_send())
    elif body is not None:
        c.end_stream(sid)
        s.sendall(c.data_to_send())
    return sid
if sys.argv[4] == "late":
    # a POST whose head goes first; once its answer has ended, BYTES of
    # body and the end of the request, then a PING: its ACK comes after
    # any reset the proxy sent before it
    url, left = sys.argv[5], int(sys.argv[6])
    headers = [tuple(x.strip() for x in a.partition(":")[::2]) for a in sys.argv[7:]]
    s, c = connect(urllib.parse.urlsplit(url).hostname)
    st = {}
    u = urllib.parse.urlsplit(url)
    sid = c.get_next_available_stream_id()
    st[sid] = {"head": None, "body": b"", "done": False}
    c.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":authority", u.netloc),
                         (":path", u.path + ("?" + u.query if u.query else ""))] +
                   [(k.lower(), v) for k, v in headers])
    s.sendall(c.data_to_send())
    while not st[sid]["done"]:
        pump(s, c, st)
    try:
        while left > 0 and "reset" not in st[sid]:
            n = min(left, c.local_flow_control_window(sid), c.max_outbound_frame_size)
            if n <= 0:
                pump(s, c, st)
                continue
            c.send_data(sid, b"x" * n)
            left -= n
            s.sendall(c.data_to_send())
        if "reset" not in st[sid]:
            c.end_stream(sid)
    except h2.exceptions.StreamClosedError:
        pass
    c.ping(b"h2client")
    s.sendall(c.data_to_send())
    acked = False
    while not acked:
        d = s.recv(65536)
        if not d:
            break
        for ev in c.receive_data(d):
            if isinstance(ev, h2.events.PingAckReceived):
                acked = True
            elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                st[sid]["reset"] = int(ev.error_code)
        s.sendall(c.data_to_send())
    status = dict(st[sid]["head"] or []).get(":status")
    print(status, "reset:%d" % st[sid]["reset"] if "reset" in st[sid] else "ended")
    sys.exit(0)
if sys.argv[4] == "many":
    ph = sys.argv[5]
    s, c = connect()
    st = {}
    first = request(s, c, st, "GET", "https://api.airlock.test/echo?w=1", [("x-api-key", ph)])
    while not st[first]["done"]:
        pump(s, c, st)
    urls = ["https://api.airlock.test/echo?i=%d" % i for i in range(20)]
    urls[5] = "https://api.airlock.test/echo?bad=" + ph
    urls[13] = "https://api.airlock.test/echo?bad2=" + ph
    ids = [request(s, c, st, "GET", u, [("x-api-key", ph)]) for u in urls]
    while not all(st[i]["done"] for i in ids):
        pump(s, c, st)
    for u, i in zip(urls, ids):
        text = st[i]["body"].decode("utf-8", "replace")
        status = dict(st[i]["head"] or []).get(":status")
        print("HTTP/2", status, "bad" in u, ph in text, "tok_" in text)
    sys.exit(0)
method, url, rest = sys.argv[4], sys.argv[5], sys.argv[6:]
headers, body, length, trailers = [], None, True, []
while rest:
    a = rest.pop(0)
    if a in ("--data", "--stream"):
        body, length = open(rest.pop(0), "rb").read(), a == "--data"
    elif a == "--trailer":
        k, _, v = rest.pop(0).partition(":")
        trailers.append((k.strip().lower(), v.strip()))
    else:
        k, _, v = a.partition(":")
        headers.append((k.strip(), v.strip()))
s, c = connect(urllib.parse.urlsplit(url).hostname)
st = {}
sid = request(s, c, st, method, url, headers, body, length, trailers)
while not st[sid]["done"]:
    pump(s, c, st)
head = st[sid]["head"] or []
with open(t + "/h", "w") as f:
    f.write("HTTP/2 %s\n" % dict(head).get(":status"))
    if "reset" in st[sid]:  # the stream was reset, not ended
        f.write("x-h2client-reset: %d\n" % st[sid]["reset"])
    for k, v in head:
        if not k.startswith(":"):
            f.write("%s: %s\n" % (k, v))
open(t + "/b", "wb").write(st[sid]["body"])
print(dict(head).get(":status"), 2)
