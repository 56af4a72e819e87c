#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""agent_api - a stand-in Anthropic Messages API that drives a real coding
agent through a scripted session, for the end-to-end test (tests/e2e/run).

Run it inside the test's network namespace. Python 3 standard library
only; the TLS certificate is made by testnet.py's helper (the openssl
command).

  agent_api.py --config FILE      serve until SIGTERM/SIGINT or the lifetime

The config is a JSON object:

  {
    "log": "/tmp/x/api.log",        one JSON object a line (below)
    "ready": "/tmp/x/api.ready",    written once every socket is bound
    "lifetime": 600,                seconds before it exits by itself
    "listen": ["198.18.0.30:443"],
    "tls": {"dir": "/tmp/x/api-tls", "names": ["api.anthropic.com"]},
    "key": "sk-ant-api03-...",      the real API key the caller must send
    "tool": "bash",                 the tool the steps call
    "steps": [{"command": "...", "description": "..."}, ...],
    "final": "Done.",               the text of the last answer
    "usage": {"input": 1200, "output": 150,
              "cache_write": 0, "cache_read": 0}
  }

The script is stateless, read from the conversation each request carries:
a POST /v1/messages whose "tools" list offers the tool is answered with
step N, N being the number of tool_result blocks in its messages (the
agent has run N steps so far); past the last step it gets the "final"
text with stop_reason end_turn. A request without that tool (the agent's
title or summary side calls) gets a short text answer. Every answer is an
SSE stream when the request asks for one (message_start with the input
and cache counts, content blocks — text, then tool_use with its input as
input_json_delta pieces —, message_delta with the cumulative output
tokens and the stop reason, message_stop), else one JSON message, and
reports "usage" exactly (the test multiplies it by the policy's prices).

The key is compared (constant time) with x-api-key, or with the Bearer
token of Authorization when there is no x-api-key. A call without the
real key is still answered, so that the agent's run can go on where the
proxy cannot substitute; the log says which it was, and the test decides.

Log lines: {"event": "request", "id", "method", "path", "key": "real" |
"other" | "none", "key_sha256" (of what was received), "kind": "step" |
"final" | "aux" | "other", "step", "tools", "model", "max_tokens",
"stream", "body_length", "usage" (what the answer reports, null when
none)}; {"event": "ready"} and {"event": "exit"}.
"""
import argparse
import hashlib
import hmac
import json
import os
import selectors
import signal
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testnet import Reader, bind, make_certs, read_body  # noqa: E402
from llm_api import Conn, Cut, http_head, rid, pieces  # noqa: E402

MAX_HEAD = 64 * 1024

_log_lock = threading.Lock()
_log_path = None
_seq = [0]


def log(**ev):
    ev = dict(t=round(time.time(), 3), **ev)
    line = json.dumps(ev, sort_keys=True) + "\n"
    with _log_lock:
        with open(_log_path, "a") as f:
            f.write(line)


def next_id():
    with _log_lock:
        _seq[0] += 1
        return _seq[0]


def received_key(headers):
    k = headers.get("x-api-key")
    if k is None:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            k = auth[7:].strip()
    return k


def tool_results(messages):
    n = 0
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            n += sum(1 for b in content
                     if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def tool_names(req):
    tools = req.get("tools")
    if not isinstance(tools, list):
        return []
    return [t.get("name") for t in tools if isinstance(t, dict)]


class Answer:
    def __init__(self, conn, n, model):
        self.c = conn
        self.n = n
        self.model = model

    def headers(self, ctype):
        return [("Date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())),
                ("Content-Type", ctype),
                ("request-id", rid("req_011C", self.n)),
                ("anthropic-organization-id", "00000000-0000-0000-0000-000000000000")]

    def json(self, status, obj):
        data = json.dumps(obj, separators=(",", ":")).encode()
        h = self.headers("application/json")
        h.append(("Content-Length", str(len(data))))
        self.c.send(http_head(status, h) + data)

    def event(self, name, data):
        raw = ("event: %s\ndata: %s\n\n" % (
            name, json.dumps(data, separators=(",", ":")))).encode()
        self.c.send(b"%x\r\n%s\r\n" % (len(raw), raw))

    def message(self, stream, blocks, stop, usage):
        """blocks: [("text", str)] or [("tool_use", id, name, input)]."""
        msg_id = rid("msg_01", self.n)
        u = {"input_tokens": usage["input"],
             "cache_creation_input_tokens": usage["cache_write"],
             "cache_read_input_tokens": usage["cache_read"],
             "output_tokens": usage["output"]}
        if not stream:
            content = []
            for b in blocks:
                if b[0] == "text":
                    content.append({"type": "text", "text": b[1]})
                else:
                    content.append({"type": "tool_use", "id": b[1], "name": b[2],
                                    "input": b[3]})
            return self.json(200, {"id": msg_id, "type": "message", "role": "assistant",
                                   "model": self.model, "content": content,
                                   "stop_reason": stop, "stop_sequence": None,
                                   "usage": u})
        h = self.headers("text/event-stream; charset=utf-8")
        h += [("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked")]
        self.c.send(http_head(200, h))
        self.event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(u, output_tokens=1)}})
        self.event("ping", {"type": "ping"})
        for i, b in enumerate(blocks):
            if b[0] == "text":
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}})
                for p in pieces(b[1], 3):
                    self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": p}})
            else:
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": b[1],
                                                                     "name": b[2], "input": {}}})
                for p in pieces(json.dumps(b[3]), 4):
                    self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": p}})
            self.event("content_block_stop", {"type": "content_block_stop", "index": i})
        self.event("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output"]}})
        self.event("message_stop", {"type": "message_stop"})
        self.c.send(b"0\r\n\r\n")


def usage_of(cfg):
    u = dict(cfg.get("usage") or {})
    for k, d in (("input", 1000), ("output", 100), ("cache_write", 0), ("cache_read", 0)):
        u.setdefault(k, d)
    return u


def handle(cfg, conn, method, target, headers, body):
    path = target.partition("?")[0]
    n = next_id()
    key = received_key(headers)
    want = cfg.get("key", "")
    if key is None:
        key_state = "none"
    elif want and hmac.compare_digest(key.encode(), want.encode()):
        key_state = "real"
    else:
        key_state = "other"
    ev = dict(event="request", id=n, method=method, path=path, key=key_state,
              key_sha256=hashlib.sha256(key.encode()).hexdigest() if key else None,
              body_length=len(body), usage=None)
    a = Answer(conn, n, "unknown")
    try:
        req = json.loads(body) if body else {}
    except ValueError:
        req = None
    if method != "POST" or path != "/v1/messages" or not isinstance(req, dict) \
            or "model" not in req:
        ev.update(kind="other", status=404 if path != "/v1/messages" else 400)
        log(**ev)
        a.json(ev["status"], {"type": "error", "error": {
            "type": "not_found_error" if ev["status"] == 404 else "invalid_request_error",
            "message": "not served by the stand-in"}})
        return True
    a.model = req["model"]
    tool = cfg.get("tool", "bash")
    names = tool_names(req)
    stream = req.get("stream") is True
    u = usage_of(cfg)
    steps = cfg.get("steps", [])
    ev.update(model=req["model"], max_tokens=req.get("max_tokens"), stream=stream,
              tools=names, status=200, usage=u)
    if tool not in names:
        ev.update(kind="aux", step=None)
        blocks, stop = [("text", "Scripted session")], "end_turn"
    else:
        done = tool_results(req.get("messages"))
        ev["step"] = done
        if done < len(steps):
            s = steps[done]
            ev["kind"] = "step"
            call = {"command": s["command"], "description": s.get("description", "step")}
            blocks = [("text", s.get("say", "Running step %d." % (done + 1))),
                      ("tool_use", "toolu_01" + hashlib.sha256(
                          b"%d-%d" % (n, done)).hexdigest()[:22], tool, call)]
            stop = "tool_use"
        else:
            ev["kind"] = "final"
            blocks, stop = [("text", cfg.get("final", "Done."))], "end_turn"
    log(**ev)
    try:
        a.message(stream, blocks, stop, u)
    except Cut:
        return False
    return True


def serve_conn(cfg, sock, ctx):
    try:
        sock.settimeout(15)
        sock = ctx.wrap_socket(sock, server_side=True)
        sock.settimeout(120)
        rd = Reader(sock)
        conn = Conn(sock)
        while True:
            try:
                head = rd.until(b"\r\n\r\n", MAX_HEAD).decode("latin-1")
            except (EOFError, ValueError):
                return
            lines = head.split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            hdrs = []
            for ln in lines[1:]:
                if ln:
                    k, _, v = ln.partition(":")
                    hdrs.append((k.strip(), v.strip()))
            body, _ = read_body(rd, hdrs, sock)
            headers = {k.lower(): v for k, v in hdrs}
            if not handle(cfg, conn, method, target, headers, body):
                return
            if headers.get("connection", "").lower() == "close":
                return
    except (OSError, ssl.SSLError, ValueError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def serve(cfg):
    global _log_path
    _log_path = cfg["log"]
    open(_log_path, "a").close()
    leaf, key = make_certs(cfg["tls"]["dir"], cfg["tls"]["names"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    ctx.set_alpn_protocols(["http/1.1"])
    sel = selectors.DefaultSelector()
    for ep in cfg["listen"]:
        sel.register(bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ, ep)
    stop = {"now": False}

    def on_term(_sig, _frm):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log(event="ready", pid=os.getpid())
    if cfg.get("ready"):
        tmp = cfg["ready"] + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, cfg["ready"])
    deadline = time.time() + float(cfg.get("lifetime", 600))
    while not stop["now"] and time.time() < deadline:
        for k, _ in sel.select(timeout=0.5):
            try:
                s, _addr = k.fileobj.accept()
            except OSError:
                continue
            threading.Thread(target=serve_conn, args=(cfg, s, ctx), daemon=True).start()
    log(event="exit")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    return serve(cfg)


if __name__ == "__main__":
    sys.exit(main())
