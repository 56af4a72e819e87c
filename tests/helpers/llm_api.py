#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""llm_api - a stand-in for the Anthropic and OpenAI APIs, for the spend
tests: scripted usage, JSON and SSE answers in the providers' own event
names and field shapes, slow and cut streams, and a log of every request.

Run it inside the test's network namespace (tests/netns-exec). Python 3
standard library only; TLS certificates are made by testnet.py's helper
(the openssl command).

  llm_api.py --config FILE      serve until SIGTERM/SIGINT or the lifetime

The config is a JSON object; every key is optional except "log":

  {
    "log": "/tmp/x/llm.log",        one JSON object a line: each request
                                    ("event": "request": method, path,
                                    query, headers, body, script) when its
                                    body is read, and its answer
                                    ("event": "response": status, events,
                                    bytes, cut) when sent
    "ready": "/tmp/x/ready",        written once every socket is bound
    "lifetime": 300,                seconds before it exits by itself
    "listen": ["127.0.0.1:8443"],   TLS on each (plain HTTP with "tls": null)
    "tls": {"dir": "/tmp/x/tls", "names": ["api.anthropic.com"]},
    "scripts": {"NAME": {SCRIPT}, ...},
    "models": {"MODEL": "NAME"},    the script for a request's model
    "default": {SCRIPT}
  }

A request's script is the one named by its X-Llm-Script header, else the
one its model names in "models", else "default". A SCRIPT (every key
optional):

  "status": 200             another status answers the API's error shape
                            (anthropic {"type":"error","error":{...}};
                            openai {"error":{...}}), never with usage
  "error_type": "..."       the error's type (default by status)
  "usage": {"input": N, "output": N, "cache_write": N, "cache_read": N}
                            what the answer reports, in each API's terms:
                            anthropic input_tokens, output_tokens,
                            cache_creation_input_tokens,
                            cache_read_input_tokens; openai prompt_tokens
                            (or input_tokens) = input + cache_read, with
                            cached_tokens = cache_read (cache_write is not
                            an openai count). Default: input = body
                            bytes / 4, output = min(bound, 12).
  "wants": N                the output the model would generate: the
                            answer reports min(bound, N) output tokens,
                            and N when the request names no bound (as a
                            provider does: a call without max_tokens
                            runs long)
  "ignore_bound": false     with "wants": report it whatever the
                            request's bound (an overrun; an explicit
                            "usage.output" is always reported as given)
  "text": "Hello"           the answer's text, sent in "chunks" deltas
  "chunks": 3
  "deltas": 1               anthropic streams: message_delta events, each
                            with the cumulative output so far (the last
                            one the total)
  "delay_ms": 0             between stream events (a slow stream)
  "first_delay_ms": 0       before the answer's head
  "cut_after": N            close the connection abruptly after N events
                            of a stream, or N bytes of a JSON body (no
                            last chunk, no close_notify)
  "omit_usage": false       a 2xx answer without usage
  "error_after": N          a stream: an error event after N events,
                            then the stream ends
  "stream": null            true/false overrides the request's "stream"

Streams follow the APIs: anthropic message_start (input and cache counts,
output 1), content_block_start, ping, content_block_delta..., 
content_block_stop, message_delta (cumulative output), message_stop;
openai chat and completions chunks, with a final usage chunk (empty
choices) only when the request set stream_options.include_usage (then
every earlier chunk carries "usage": null), then data: [DONE]; openai
responses response.created, response.in_progress,
response.output_item.added, response.content_part.added,
response.output_text.delta..., response.output_text.done,
response.content_part.done, response.output_item.done,
response.completed (with usage). Streams are sent chunked, JSON with a
Content-Length. Also: POST /v1/messages/count_tokens, GET /v1/models,
POST /v1/embeddings (usage: prompt_tokens = input), and 200 with a small
JSON object for the costly endpoints the meter does not price (batches,
images, audio, files, realtime sessions); anything else is a 404 in the
API's error shape. Each "response" log line carries the usage the answer
reported ("usage": {"input", "output", "cache_write", "cache_read"} in
the script's terms, null for none), so that a test can add up what was
really served.
"""
import argparse
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testnet import Reader, bind, make_certs, read_body  # noqa: E402

MAX_HEAD = 64 * 1024
LOGGED_BODY = 1024 * 1024

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


class Cut(Exception):
    """The script cut the connection."""


class Conn:
    """One client connection; knows how to send a chunked stream."""

    def __init__(self, sock):
        self.sock = sock
        self.sent = 0

    def send(self, data):
        self.sock.sendall(data)
        self.sent += len(data)

    def cut(self):
        # An abrupt end: no last chunk, no TLS close_notify.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise Cut()


def http_head(status, headers):
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized",
              403: "Forbidden", 404: "Not Found", 413: "Payload Too Large",
              429: "Too Many Requests", 500: "Internal Server Error",
              503: "Service Unavailable", 529: "Overloaded"}.get(status, "Status")
    lines = ["HTTP/1.1 %d %s" % (status, reason)]
    lines += ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def rid(prefix, n):
    return prefix + hashlib.sha256(str(n).encode()).hexdigest()[:24]


# --- usage in each API's terms -------------------------------------------------

def usage_of(script, req_body, bound):
    u = dict(script.get("usage") or {})
    u.setdefault("input", max(1, len(req_body) // 4))
    if "wants" in script:
        wants = int(script["wants"])
        if script.get("ignore_bound") or bound is None:
            u.setdefault("output", wants)
        else:
            u.setdefault("output", min(bound, wants))
    u.setdefault("output", min(bound if bound is not None else 1024, 12))
    u.setdefault("cache_write", 0)
    u.setdefault("cache_read", 0)
    return u


def anthropic_usage(u, output=None):
    return {"input_tokens": u["input"],
            "cache_creation_input_tokens": u["cache_write"],
            "cache_read_input_tokens": u["cache_read"],
            "output_tokens": u["output"] if output is None else output}


def chat_usage(u):
    return {"prompt_tokens": u["input"] + u["cache_read"],
            "completion_tokens": u["output"],
            "total_tokens": u["input"] + u["cache_read"] + u["output"],
            "prompt_tokens_details": {"cached_tokens": u["cache_read"],
                                      "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0,
                                          "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def responses_usage(u):
    return {"input_tokens": u["input"] + u["cache_read"],
            "input_tokens_details": {"cached_tokens": u["cache_read"]},
            "output_tokens": u["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["input"] + u["cache_read"] + u["output"]}


def pieces(text, n):
    n = max(1, n)
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# --- answers ---------------------------------------------------------------

class Answer:
    """Sends one answer per the script: JSON or a stream of events."""

    def __init__(self, conn, script, api, kind, req, body, n):
        self.c = conn
        self.s = script
        self.api = api
        self.kind = kind
        self.req = req
        self.body = body
        self.events = 0
        self.n = n
        self.model = req.get("model", "unknown") if isinstance(req, dict) else "unknown"

    def headers(self, ctype):
        h = [("Date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())),
             ("Content-Type", ctype)]
        if self.api == "anthropic":
            h += [("request-id", rid("req_011C", self.n)),
                  ("anthropic-organization-id", "00000000-0000-0000-0000-000000000000"),
                  ("anthropic-ratelimit-requests-limit", "4000"),
                  ("anthropic-ratelimit-requests-remaining", "3999")]
        else:
            h += [("openai-organization", "org-test"),
                  ("openai-processing-ms", "42"),
                  ("openai-version", "2020-10-01"),
                  ("x-request-id", rid("req_", self.n))]
        return h

    def json(self, status, obj):
        data = json.dumps(obj, separators=(",", ":")).encode()
        h = self.headers("application/json")
        h.append(("Content-Length", str(len(data))))
        self.c.send(http_head(status, h))
        cut = self.s.get("cut_after")
        if cut is not None and cut < len(data):
            self.c.send(data[:cut])
            self.c.cut()
        self.c.send(data)

    def stream_begin(self):
        h = self.headers("text/event-stream; charset=utf-8")
        h += [("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked")]
        self.c.send(http_head(200, h))

    def event(self, name, data):
        """One SSE event in one HTTP chunk; may cut or delay per script."""
        cut = self.s.get("cut_after")
        if cut is not None and self.events >= cut:
            self.c.cut()
        if self.events and self.s.get("delay_ms"):
            time.sleep(self.s["delay_ms"] / 1000.0)
        text = ""
        if name is not None:
            text += "event: %s\n" % name
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        text += "data: %s\n\n" % payload
        raw = text.encode()
        self.c.send(b"%x\r\n%s\r\n" % (len(raw), raw))
        self.events += 1

    def stream_end(self):
        self.c.send(b"0\r\n\r\n")

    def error_due(self):
        e = self.s.get("error_after")
        return e is not None and self.events >= e

    # anthropic ---------------------------------------------------------------
    def anthropic_error(self, status):
        types = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 429: "rate_limit_error",
                 500: "api_error", 529: "overloaded_error"}
        etype = self.s.get("error_type") or types.get(status, "api_error")
        self.json(status, {"type": "error", "error": {"type": etype, "message": etype.replace("_", " ")}})

    def messages(self, stream, u):
        msg_id = rid("msg_01", self.n)
        text = self.s.get("text", "Hello from the stand-in API.")
        if not stream:
            obj = {"id": msg_id, "type": "message", "role": "assistant",
                   "model": self.model,
                   "content": [{"type": "text", "text": text}],
                   "stop_reason": "end_turn", "stop_sequence": None}
            if not self.s.get("omit_usage"):
                obj["usage"] = anthropic_usage(u)
            return self.json(200, obj)
        self.stream_begin()
        start = {"type": "message_start",
                 "message": {"id": msg_id, "type": "message", "role": "assistant",
                             "model": self.model, "content": [],
                             "stop_reason": None, "stop_sequence": None}}
        if not self.s.get("omit_usage"):
            start["message"]["usage"] = anthropic_usage(u, output=1)
        self.event("message_start", start)
        self.event("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        self.event("ping", {"type": "ping"})
        for p in pieces(text, self.s.get("chunks", 3)):
            if self.error_due():
                self.event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                return self.stream_end()
            self.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": p}})
        self.event("content_block_stop", {"type": "content_block_stop", "index": 0})
        k = max(1, int(self.s.get("deltas", 1)))
        for i in range(1, k + 1):
            out = u["output"] * i // k
            delta = {"type": "message_delta",
                     "delta": {"stop_reason": "end_turn" if i == k else None,
                               "stop_sequence": None}}
            if not self.s.get("omit_usage"):
                delta["usage"] = {"output_tokens": out}
            self.event("message_delta", delta)
        self.event("message_stop", {"type": "message_stop"})
        self.stream_end()

    # openai ------------------------------------------------------------------
    def openai_error(self, status):
        types = {400: "invalid_request_error", 401: "invalid_request_error",
                 404: "invalid_request_error", 429: "requests",
                 500: "server_error", 503: "server_error"}
        etype = self.s.get("error_type") or types.get(status, "server_error")
        self.json(status, {"error": {"message": "stand-in error %d" % status,
                                     "type": etype, "param": None, "code": None}})

    def chat(self, stream, u, legacy):
        cid = rid("cmpl-" if legacy else "chatcmpl-", self.n)
        obj_name = "text_completion" if legacy else "chat.completion"
        created = int(time.time())
        text = self.s.get("text", "Hello from the stand-in API.")
        if not stream:
            if legacy:
                choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}
            else:
                choice = {"index": 0, "message": {"role": "assistant", "content": text,
                                                  "refusal": None, "annotations": []},
                          "logprobs": None, "finish_reason": "stop"}
            obj = {"id": cid, "object": obj_name, "created": created, "model": self.model,
                   "choices": [choice], "service_tier": "default",
                   "system_fingerprint": "fp_standin"}
            if not self.s.get("omit_usage"):
                obj["usage"] = chat_usage(u) if not legacy else {
                    k: v for k, v in chat_usage(u).items() if k != "completion_tokens_details"}
            return self.json(200, obj)
        opts = self.req.get("stream_options") if isinstance(self.req, dict) else None
        include = isinstance(opts, dict) and opts.get("include_usage") is True
        self.stream_begin()

        def chunk(choices, usage=None, last=False):
            c = {"id": cid, "object": obj_name if legacy else "chat.completion.chunk",
                 "created": created, "model": self.model,
                 "system_fingerprint": "fp_standin", "choices": choices}
            if include:
                c["usage"] = usage if last else None
            self.event(None, c)

        if not legacy:
            chunk([{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": None},
                    "logprobs": None, "finish_reason": None}])
        for p in pieces(text, self.s.get("chunks", 3)):
            if self.error_due():
                self.event(None, {"error": {"message": "The server had an error while "
                                            "processing your request.", "type": "server_error",
                                            "param": None, "code": None}})
                return self.stream_end()
            if legacy:
                chunk([{"text": p, "index": 0, "logprobs": None, "finish_reason": None}])
            else:
                chunk([{"index": 0, "delta": {"content": p}, "logprobs": None,
                        "finish_reason": None}])
        if legacy:
            chunk([{"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}])
        else:
            chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}])
        if include and not self.s.get("omit_usage"):
            usage = chat_usage(u)
            if legacy:
                usage.pop("completion_tokens_details")
            chunk([], usage, last=True)
        self.event(None, "[DONE]")
        self.stream_end()

    def responses(self, stream, u):
        resp_id = rid("resp_", self.n)
        msg_id = rid("msg_", self.n)
        created = int(time.time())
        text = self.s.get("text", "Hello from the stand-in API.")
        item = {"type": "message", "id": msg_id, "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

        def response(status, output, usage):
            return {"id": resp_id, "object": "response", "created_at": created,
                    "status": status, "error": None, "incomplete_details": None,
                    "model": self.model, "output": output, "usage": usage}

        usage = None if self.s.get("omit_usage") else responses_usage(u)
        if not stream:
            return self.json(200, response("completed", [item], usage))
        self.stream_begin()
        seq = [0]

        def ev(name, data):
            data = dict(type=name, sequence_number=seq[0], **data)
            seq[0] += 1
            self.event(name, data)

        ev("response.created", {"response": response("in_progress", [], None)})
        ev("response.in_progress", {"response": response("in_progress", [], None)})
        ev("response.output_item.added", {"output_index": 0, "item": dict(
            item, status="in_progress", content=[])})
        ev("response.content_part.added", {"item_id": msg_id, "output_index": 0,
                                           "content_index": 0, "part": {
                                               "type": "output_text", "text": "",
                                               "annotations": []}})
        for p in pieces(text, self.s.get("chunks", 3)):
            if self.error_due():
                ev("error", {"code": "server_error", "message": "stand-in failure",
                             "param": None})
                return self.stream_end()
            ev("response.output_text.delta", {"item_id": msg_id, "output_index": 0,
                                              "content_index": 0, "delta": p})
        ev("response.output_text.done", {"item_id": msg_id, "output_index": 0,
                                         "content_index": 0, "text": text})
        ev("response.content_part.done", {"item_id": msg_id, "output_index": 0,
                                          "content_index": 0, "part": item["content"][0]})
        ev("response.output_item.done", {"output_index": 0, "item": item})
        ev("response.completed", {"response": response("completed", [item], usage)})
        self.stream_end()


# --- routing -------------------------------------------------------------------

ROUTES = {
    ("POST", "/v1/messages"): ("anthropic", "messages"),
    ("POST", "/v1/messages/count_tokens"): ("anthropic", "count_tokens"),
    ("POST", "/v1/chat/completions"): ("openai", "chat"),
    ("POST", "/v1/completions"): ("openai", "completions"),
    ("POST", "/v1/responses"): ("openai", "responses"),
    ("GET", "/v1/models"): (None, "models"),
    ("POST", "/v1/embeddings"): ("openai", "embeddings"),
    ("POST", "/v1/messages/batches"): ("anthropic", "costly"),
    ("POST", "/v1/batches"): ("openai", "costly"),
    ("POST", "/v1/images/generations"): ("openai", "costly"),
    ("POST", "/v1/audio/speech"): ("openai", "costly"),
    ("POST", "/v1/files"): ("openai", "costly"),
    ("POST", "/v1/realtime/sessions"): ("openai", "costly"),
    ("GET", "/v1/realtime"): ("openai", "costly"),
}


def pick_script(cfg, headers, req):
    name = headers.get("x-llm-script")
    scripts = cfg.get("scripts", {})
    if name is None and isinstance(req, dict):
        name = cfg.get("models", {}).get(req.get("model"))
    if name is not None and name in scripts:
        return name, scripts[name]
    return "default", cfg.get("default", {})


def output_bound(api, req):
    keys = ["max_tokens"] if api == "anthropic" else \
        ["max_tokens", "max_completion_tokens", "max_output_tokens"]
    vals = [req.get(k) for k in keys if isinstance(req.get(k), int)]
    return max(vals) if vals else None


def handle(cfg, conn, method, target, headers, body):
    path, _, query = target.partition("?")
    route = ROUTES.get((method, path))
    try:
        req = json.loads(body) if body else {}
    except ValueError:
        req = None
    name, script = pick_script(cfg, headers, req)
    n = next_id()
    logged = body[:LOGGED_BODY].decode("utf-8", "replace")
    log(event="request", id=n, method=method, path=path, query=query,
        headers=headers, body_length=len(body),
        body_sha256=hashlib.sha256(body).hexdigest(),
        body=req if isinstance(req, dict) and len(body) <= LOGGED_BODY else logged,
        script=name)
    api, kind = route if route else (None, None)
    if api is None and kind != "models":
        api = "anthropic" if path.startswith("/v1/messages") else "openai"
    a = Answer(conn, script, api or "openai", kind, req if isinstance(req, dict) else {},
               body, n)
    cut = False
    status = 200
    a.usage = None
    try:
        if script.get("first_delay_ms"):
            time.sleep(script["first_delay_ms"] / 1000.0)
        if kind == "models":
            a.json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "stand-in"}
                for m in sorted(cfg.get("models", {}))]})
        elif kind is None:
            status = 404
            (a.anthropic_error if api == "anthropic" else a.openai_error)(404)
        elif kind == "costly":
            a.json(200, {"id": "costly_%d" % n, "object": "stand-in", "status": "accepted"})
        elif req is None or not isinstance(req, dict) or "model" not in req:
            status = 400
            (a.anthropic_error if api == "anthropic" else a.openai_error)(400)
        elif int(script.get("status", 200)) != 200:
            status = int(script["status"])
            (a.anthropic_error if api == "anthropic" else a.openai_error)(status)
        elif kind == "count_tokens":
            a.json(200, {"input_tokens": max(1, len(body) // 4)})
        elif kind == "embeddings":
            u = usage_of(script, body, 0)
            a.usage = dict(u, output=0)
            obj = {"object": "list", "model": a.model,
                   "data": [{"object": "embedding", "index": 0, "embedding": [0.0, 0.5]}]}
            if not script.get("omit_usage"):
                obj["usage"] = {"prompt_tokens": u["input"], "total_tokens": u["input"]}
            a.json(200, obj)
        else:
            stream = script.get("stream")
            if stream is None:
                stream = req.get("stream") is True
            u = usage_of(script, body, output_bound(api, req))
            if not script.get("omit_usage"):
                a.usage = u
            if kind == "messages":
                a.messages(stream, u)
            elif kind == "responses":
                a.responses(stream, u)
            else:
                a.chat(stream, u, kind == "completions")
    except Cut:
        cut = True
    log(event="response", id=n, status=status, events=a.events, bytes=conn.sent,
        cut=cut, script=name, path=path, model=a.model,
        usage=None if cut or status != 200 else a.usage)
    return not cut


def serve_conn(cfg, sock, ctx):
    try:
        if ctx is not None:
            sock.settimeout(15)
            sock = ctx.wrap_socket(sock, server_side=True)
        sock.settimeout(60)
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
    ctx = None
    tls = cfg.get("tls")
    if tls:
        leaf, key = make_certs(tls["dir"], tls["names"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(leaf, key)
        ctx.set_alpn_protocols(["http/1.1"])
    sel = selectors.DefaultSelector()
    for ep in cfg.get("listen", []):
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
    print("ready", flush=True)
    deadline = time.time() + float(cfg.get("lifetime", 300))
    while not stop["now"] and time.time() < deadline:
        for key, _ in sel.select(timeout=0.5):
            try:
                s, _addr = key.fileobj.accept()
            except OSError:
                continue
            # as the providers' servers do: no Nagle delay on the answers
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=serve_conn, args=(cfg, s, ctx), daemon=True)
            t.start()
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
