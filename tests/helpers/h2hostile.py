#!/usr/bin/python3
"""h2hostile.py - scripted hostile HTTP/2 clients through the proxy (66).

    h2hostile.py PROXY CAFILE HOST CASE

Opens a CONNECT tunnel to HOST:443 through PROXY, TLS with ALPN h2 only
(trusting CAFILE), and plays CASE:

  ping-flood      20000 PINGs in one burst, never reading
  settings-flood  20000 empty SETTINGS in one burst
  rapid-reset     1000 requests, each reset at once (CVE-2023-44487)
  continuation    a header block in one HEADERS and 200 CONTINUATIONs
  hpack-bomb      one 4000-byte header indexed once, referenced 100 times,
                  then a plain request on the same connection
  streams         150 requests left open (no END_STREAM)

Prints what it saw, one "key value" a line: alpn, goaway (error code),
closed (1 when the connection ended), status:SID, reset:SID (code),
refused (count of REFUSED_STREAM resets).
"""
import socket
import ssl
import struct
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def tunnel(proxy, cafile, host):
    ph, pp = proxy.rsplit(":", 1)
    s = socket.create_connection((ph, int(pp)), timeout=20)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise SystemExit("tunnel refused")
        buf += d
    if b" 200" not in buf.split(b"\r\n")[0]:
        raise SystemExit("tunnel refused: %r" % buf)
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname=host)
    print("alpn", t.selected_alpn_protocol())
    return t


def drain(t, conn=None, seconds=10, until=None):
    """Reads until EOF or @seconds; feeds @conn; prints events."""
    end = time.time() + seconds
    t.settimeout(0.5)
    refused = 0
    raw = b""
    while time.time() < end:
        try:
            d = t.recv(65536)
        except socket.timeout:
            if until and until():
                break
            continue
        except (OSError, ssl.SSLError):
            print("closed 1")
            break
        if not d:
            print("closed 1")
            break
        if conn is None:
            raw += d
            continue
        try:
            events = conn.receive_data(d)
        except Exception as e:  # the proxy's GOAWAY may make h2 unhappy
            print("h2error", type(e).__name__)
            events = []
        for ev in events:
            if isinstance(ev, h2.events.ResponseReceived):
                print("status:%d %s" % (ev.stream_id, dict(ev.headers).get(b":status", b"").decode()))
            elif isinstance(ev, h2.events.StreamReset):
                if ev.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                    refused += 1
                else:
                    print("reset:%d %d" % (ev.stream_id, ev.error_code))
            elif isinstance(ev, h2.events.ConnectionTerminated):
                print("goaway", int(ev.error_code))
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        try:
            out = conn.data_to_send()
            if out:
                t.sendall(out)
        except (OSError, ssl.SSLError):
            pass
        if until and until():
            break
    if conn is None:
        # find a GOAWAY in the raw frames
        i = 0
        while i + 9 <= len(raw):
            ln = int.from_bytes(raw[i:i + 3], "big")
            if raw[i + 3] == 7 and i + 9 + 8 <= len(raw):
                print("goaway", int.from_bytes(raw[i + 13:i + 17], "big"))
            i += 9 + ln
    if refused:
        print("refused", refused)


def headers(host, path="/ok", method="GET"):
    return [(":method", method), (":scheme", "https"), (":authority", host), (":path", path)]


def client(t):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    t.sendall(conn.data_to_send())
    return conn


def main():
    proxy, cafile, host, case = sys.argv[1:5]
    t = tunnel(proxy, cafile, host)
    if case in ("ping-flood", "settings-flood"):
        one = frame(6, 0, 0, b"12345678") if case == "ping-flood" else frame(4, 0, 0)
        try:
            t.sendall(PREFACE + frame(4, 0, 0) + one * 20000)
        except (OSError, ssl.SSLError):
            pass
        drain(t)
    elif case == "rapid-reset":
        conn = client(t)
        try:
            for i in range(1000):
                sid = conn.get_next_available_stream_id()
                conn.send_headers(sid, headers(host, "/rr"), end_stream=True)
                conn.reset_stream(sid)
                if i % 50 == 49:
                    t.sendall(conn.data_to_send())
            t.sendall(conn.data_to_send())
        except (OSError, ssl.SSLError):
            pass
        except Exception as e:
            print("h2error", type(e).__name__)
        drain(t, conn)
    elif case == "continuation":
        enc = hpack.Encoder()
        block = enc.encode(headers(host, "/cont") + [("x-pad", "a" * 4000)])
        n = 200
        step = max(1, len(block) // (n + 1))
        parts = [block[i * step:(i + 1) * step] for i in range(n)] + [block[n * step:]]
        out = PREFACE + frame(4, 0, 0) + frame(1, 0x1, 1, parts[0])  # END_STREAM, no END_HEADERS
        for i, p in enumerate(parts[1:]):
            out += frame(9, 0x4 if i == len(parts) - 2 else 0, 1, p)
        try:
            t.sendall(out)
        except (OSError, ssl.SSLError):
            pass
        drain(t)
    elif case == "hpack-bomb":
        conn = client(t)
        big = "A" * 4000
        conn.send_headers(1, headers(host, "/bomb") + [("x-bomb", big)] * 100, end_stream=True)
        t.sendall(conn.data_to_send())
        conn.send_headers(3, headers(host, "/after"), end_stream=True)
        t.sendall(conn.data_to_send())
        drain(t, conn, seconds=10)
    elif case == "streams":
        conn = client(t)
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
        # h2 itself would stop at the proxy's limit: lie to it
        conn.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 1000
        conn.remote_settings.acknowledge()
        for i in range(150):
            sid = conn.get_next_available_stream_id()
            try:
                conn.send_headers(sid, headers(host, "/open", "POST"), end_stream=False)
            except Exception as e:
                print("h2error", type(e).__name__)
                break
        t.sendall(conn.data_to_send())
        drain(t, conn, seconds=5)
    else:
        raise SystemExit("unknown case " + case)


if __name__ == "__main__":
    main()
