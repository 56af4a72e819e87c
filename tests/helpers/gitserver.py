#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gitserver - an HTTPS git server for the git binding's tests: the real
`git http-backend` (CGI) behind a TLS front that requires the exact token.

Run it inside the test's network namespace (tests/netns-exec). Python 3
standard library, git and the openssl command only (the certificates are
made as testnet.py makes them).

  gitserver.py --config FILE      serve until SIGTERM/SIGINT or the lifetime

The config is a JSON object, read again for every request (a test may
rotate the token by rewriting it: write a temporary file, rename it over
the config). Keys:

  {
    "log": "/tmp/x/git.log",        every request, one JSON object a line
    "ready": "/tmp/x/git.ready",    written (atomically) once listening
    "lifetime": 600,                seconds before it exits by itself
    "listen": ["198.18.0.21:443"],
    "tls": {"dir": "/tmp/x/git-tls", "names": ["git.test"]},
    "root": "/tmp/x/repos",         bare repositories: ROOT/OWNER/REPO.git
                                    (GitLab: ROOT/GROUP/SUB/PROJECT.git)
    "tokens": ["ghs_..."],          the tokens that authorise a request
    "user": "x-access-token",       the Basic user name the tokens come
                                    with (GitLab "oauth2", Bitbucket
                                    "x-token-auth")
    "api": "/api/",                 optional: paths under it are a
                                    stand-in REST API (below), not git
    "mint": {"admin_token": "...",  optional: GitLab's project access
             "projects": {"acme/platform/api": 123},   tokens (below);
             "extra_scopes": [], "access_level": 40}   an over-grant
  }

A request is authorised only when its Authorization header is exactly
"Basic " + base64(USER + ":" + TOKEN) for one of "tokens" (or a minted
token of the repository's project, below); otherwise it gets 401 with
WWW-Authenticate: Basic and never reaches the backend.

The stand-in REST API ("api"): a request is authorised by a token in
"Authorization: Bearer TOKEN", in "PRIVATE-TOKEN: TOKEN" (GitLab) or as
the Basic password; it is answered 200 with {"ok": true, "path": PATH}
when authorised, 401 otherwise, and logged as {"event": "api", "method",
"path", "query", "auth" ("none", "wrong", "ok"), "via" (which header),
"status"}. A minted token authorises only its project's paths (GitLab:
/api/v4/projects/ENCODED-PATH-OR-ID/...).

GitLab's project access tokens ("mint"): POST
/api/v4/projects/ID/access_tokens (ID the %2F-encoded path or the
number "projects" gives) with "PRIVATE-TOKEN: ADMIN_TOKEN" and a JSON body
{"name", "scopes", "access_level", "expires_at"} answers 201 with a new
token (id, name, scopes, access_level, expires_at, token, active) valid for
that project only, and logs {"event": "mint", "project", "scopes",
"access_level", "expires_at", "name", "admin" (bool), "token_id"}.
DELETE /api/v4/projects/ID/access_tokens/TOKEN_ID with the admin token
revokes it (204) and logs {"event": "revoke", "project", "token_id",
"admin", "status"}; a revoked token authorises nothing. Authorised requests run `git http-backend` with
GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL, REMOTE_USER=x-access-token (so
receive-pack, push, is enabled), the request's method, path (decoded, as a
web server gives PATH_INFO), query, Content-Type, Content-Encoding and
Git-Protocol; chunked request bodies are de-chunked first.

Every request is logged: {"event": "request", "method", "path" (as
received), "query" (null when there was no '?'), "authorised" (bool),
"auth" ("none", "wrong" or "ok"), "host", "status", "body_length"}.
"""
import argparse
import base64
import http.server
import json
import os
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testnet  # noqa: E402  (bind, make_certs)

MAX_BODY = 64 * 1024 * 1024
IO_TIMEOUT = 30
BACKEND_TIMEOUT = 60

_log_lock = threading.Lock()
CONFIG = None
HOME = None


def log(log_file, /, **ev):
    ev = dict(t=round(time.time(), 3), **ev)
    line = json.dumps(ev, sort_keys=True) + "\n"
    with _log_lock:
        with open(log_file, "a") as f:
            f.write(line)


def load_config():
    with open(CONFIG) as f:
        return json.load(f)


def basic(token, user="x-access-token"):
    return "Basic " + base64.b64encode((user + ":" + token).encode()).decode()


# Minted project tokens: token -> {"project", "id"}; revoked ones removed.
MINTED = {}
_minted_lock = threading.Lock()
_next_id = [100]


def minted_project(token):
    with _minted_lock:
        m = MINTED.get(token)
        return m["project"] if m else None


def git_project(path):
    """The project a smart-HTTP path names: everything before NAME.git."""
    i = path.find(".git/")
    return path[1:i].lower() if i > 0 else None


def api_project(cfg, path):
    """The project an /api/v4/projects/ID/... path names, lowercase."""
    pre = "/api/v4/projects/"
    if not path.startswith(pre):
        return None
    pid = path[len(pre):].split("/")[0]
    if pid.isdigit():
        for name, num in cfg.get("mint", {}).get("projects", {}).items():
            if str(num) == pid:
                return name.lower()
        return None
    return urllib.parse.unquote(pid).lower()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gitserver"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ValueError("truncated chunked body")
                n = int(line.split(b";")[0].strip(), 16)
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(n)
                self.rfile.readline(1024)
                if len(out) > MAX_BODY:
                    raise ValueError("body too large")
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n)

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def api(self, cfg, path, query):
        try:
            body = self.read_body()
        except ValueError:
            body = b""
        mint = cfg.get("mint")
        if mint and path.startswith("/api/v4/projects/") and "/access_tokens" in path:
            return self.mint(cfg, mint, path, body)
        auth = self.headers.get("Authorization")
        ptok = self.headers.get("PRIVATE-TOKEN")
        cands = []
        if ptok is not None:
            cands.append(("private-token", ptok))
        if auth is not None:
            if auth.startswith("Bearer "):
                cands.append(("bearer", auth[7:]))
            elif auth.startswith("Basic "):
                try:
                    cands.append(("basic", base64.b64decode(auth[6:]).decode().partition(":")[2]))
                except (ValueError, UnicodeDecodeError):
                    pass
        ok, via = False, None
        for how, tok in cands:
            proj = minted_project(tok)
            if tok in cfg.get("tokens", []) or (proj and proj == api_project(cfg, path)):
                ok, via = True, how
        status = 200 if ok else 401
        log(cfg["log"], event="api", method=self.command, path=path,
            query=query, auth="ok" if ok else ("wrong" if cands else "none"), via=via,
            status=status, host=self.headers.get("Host"))
        out = json.dumps({"ok": ok, "path": path}).encode()
        self.answer(status, [("Content-Type", "application/json")], out)

    def mint(self, cfg, mint, path, body):
        admin = self.headers.get("PRIVATE-TOKEN") == mint.get("admin_token")
        proj = api_project(cfg, path)
        rest = path.split("/access_tokens", 1)[1]
        if self.command == "POST" and rest == "":
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                req = {}
            ev = dict(event="mint", project=proj, admin=admin,
                      scopes=req.get("scopes"), access_level=req.get("access_level"),
                      expires_at=req.get("expires_at"), name=req.get("name"))
            if not admin or proj not in mint.get("projects", {}):
                ev["status"] = 401 if not admin else 404
                log(cfg["log"], **ev)
                self.answer(ev["status"], [("Content-Type", "application/json")],
                            b'{"message": "401 Unauthorized"}')
                return
            with _minted_lock:
                _next_id[0] += 1
                tid = _next_id[0]
                tok = "glpat-" + base64.b32encode(os.urandom(15)).decode().lower()
                MINTED[tok] = {"project": proj, "id": tid}
            ev.update(status=201, token_id=tid)
            log(cfg["log"], **ev)
            out = json.dumps({"id": tid, "name": req.get("name"),
                              "scopes": (req.get("scopes") or []) + mint.get("extra_scopes", []),
                              "access_level": mint.get("access_level", req.get("access_level")),
                              "expires_at": req.get("expires_at"), "token": tok,
                              "active": True, "revoked": False,
                              "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "user_id": 9000 + tid}).encode()
            self.answer(201, [("Content-Type", "application/json")], out)
            return
        if self.command == "DELETE" and rest[1:].isdigit():
            tid = int(rest[1:])
            status = 401
            if admin:
                status = 404
                with _minted_lock:
                    for k, m in list(MINTED.items()):
                        if m["id"] == tid and m["project"] == proj:
                            del MINTED[k]
                            status = 204
            log(cfg["log"], event="revoke", project=proj, token_id=tid, admin=admin, status=status)
            self.answer(status, [], b"")
            return
        log(cfg["log"], event="api", method=self.command, path=path, auth="none", status=404)
        self.answer(404, [("Content-Type", "application/json")], b'{"message": "404"}')

    def handle_any(self):
        cfg = load_config()
        path, q, query = self.path.partition("?")
        if cfg.get("api") and path.startswith(cfg["api"]):
            return self.api(cfg, path, query if q else None)
        auth = self.headers.get("Authorization")
        user = cfg.get("user", "x-access-token")
        ok = auth is not None and any(auth == basic(t, user) for t in cfg.get("tokens", []))
        if not ok and auth is not None and auth.startswith("Basic "):
            with _minted_lock:
                scoped = [(t, m["project"]) for t, m in MINTED.items()]
            ok = any(auth == basic(t, user) and pr == git_project(path) for t, pr in scoped)
        ev = dict(event="request", method=self.command, path=path,
                  query=query if q else None, authorised=ok,
                  auth="ok" if ok else ("none" if auth is None else "wrong"),
                  host=self.headers.get("Host"))
        try:
            body = self.read_body()
        except ValueError as e:
            ev.update(status=400, error=str(e))
            log(cfg["log"], **ev)
            self.answer(400, [("Content-Type", "text/plain")], b"bad body\n")
            self.close_connection = True
            return
        ev["body_length"] = len(body)
        if not ok:
            ev["status"] = 401
            log(cfg["log"], **ev)
            self.answer(401, [("WWW-Authenticate", 'Basic realm="gitserver"'),
                              ("Content-Type", "text/plain")], b"authentication required\n")
            return
        status, headers, out = self.backend(cfg, path, query, body)
        ev["status"] = status
        log(cfg["log"], **ev)
        self.answer(status, headers, out)

    def backend(self, cfg, path, query, body):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": HOME,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": cfg["root"],
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "SERVER_SOFTWARE": "gitserver",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(path),
            "QUERY_STRING": query,
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_LENGTH": str(len(body)),
        }
        for h, var in (("Content-Type", "CONTENT_TYPE"),
                       ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
                       ("Git-Protocol", "HTTP_GIT_PROTOCOL")):
            if self.headers.get(h) is not None:
                env[var] = self.headers.get(h)
        try:
            r = subprocess.run(["git", "http-backend"], input=body, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=BACKEND_TIMEOUT)
        except subprocess.TimeoutExpired:
            return 504, [("Content-Type", "text/plain")], b"backend timed out\n"
        out = r.stdout
        i = out.find(b"\r\n\r\n")
        sep = 4
        if i < 0:
            i, sep = out.find(b"\n\n"), 2
        if i < 0:
            return 502, [("Content-Type", "text/plain")], b"backend gave no head\n"
        status, headers = 200, []
        for line in out[:i].decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        return status, headers, out[i + sep:]

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any


class _Server:
    """What BaseHTTPRequestHandler needs of a server."""


def serve_conn(conn, addr, ctx):
    conn.settimeout(IO_TIMEOUT)
    try:
        tls = ctx.wrap_socket(conn, server_side=True)
    except (ssl.SSLError, OSError):
        conn.close()
        return
    try:
        Handler(tls, addr, _Server())
    except (OSError, ssl.SSLError):
        pass
    finally:
        try:
            tls.close()
        except OSError:
            pass


def main():
    global CONFIG, HOME
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    CONFIG = a.config
    cfg = load_config()
    open(cfg["log"], "a").close()
    home = tempfile.TemporaryDirectory(prefix="gitserver-home.")
    HOME = home.name
    leaf, key = testnet.make_certs(cfg["tls"]["dir"], cfg["tls"]["names"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    ctx.set_alpn_protocols(["http/1.1"])
    sel = selectors.DefaultSelector()
    for ep in cfg["listen"]:
        sel.register(testnet.bind(ep, socket.SOCK_STREAM), selectors.EVENT_READ)
    stop = {"now": False}

    def on_term(_sig, _frm):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if cfg.get("ready"):
        tmp = cfg["ready"] + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, cfg["ready"])
    deadline = time.time() + float(cfg.get("lifetime", 300))
    while not stop["now"] and time.time() < deadline:
        for k, _ in sel.select(timeout=0.5):
            try:
                conn, addr = k.fileobj.accept()
            except OSError:
                continue
            threading.Thread(target=serve_conn, args=(conn, addr, ctx), daemon=True).start()
    home.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
