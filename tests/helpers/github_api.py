#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""github_api - a stand-in GitHub API over HTTPS for the git binding's tests.

Run it inside the test's network namespace (tests/netns-exec). Python 3
standard library and the openssl command only (RS256 is verified with
`openssl dgst -verify`; the certificates are made as testnet.py makes
them).

  github_api.py --config FILE     serve until SIGTERM/SIGINT or the lifetime

The config is a JSON object, read again for every request, so that a test
scripts the next answer by rewriting it (write a temporary file and rename
it over the config). Every key is optional except "log" and "listen":

  {
    "log": "/tmp/x/api.log",        every request, one JSON object a line
    "ready": "/tmp/x/api.ready",    written (atomically) once listening
    "lifetime": 600,                seconds before it exits by itself
    "listen": ["198.18.0.20:443"],
    "tls": {"dir": "/tmp/x/api-tls", "names": ["api.git.test"]},
    "apps": {"12345": {"public_key": "/tmp/x/app.pub.pem",
                       "installation_id": 4242}},
    "mode": "exact",
    "status": 500, "message": "...",   for mode "status"
    "delay": 10,                       for mode "slow" (seconds)
    "slow_from": 1,                    mode "slow" only from this mint of
                                       the "tokens" list on (0: its
                                       first); the earlier ones exact
    "token": "ghs_...",                the token to answer (else random)
    "tokens": ["ghs_1", "ghs_2"],      the tokens to answer, one a mint in
                                       order (the last one from then on;
                                       counted anew for another list)
    "token_length": 100,               a random token's length
    "expires_in": 3600                 seconds (a list: one a token of
                                       "tokens", in the same order)
  }

POST /app/installations/ID/access_tokens verifies the JWT of its
"Authorization: Bearer" against the public key of the App its "iss" names
(RS256, header alg RS256, iat no later than now + 60, exp after now and at
most 600 s ahead, exp after iat), and ID against that App's
installation_id; a bad JWT is 401, another ID 404, as GitHub answers. It
records the requested "repositories" and "permissions", then answers by
"mode":

  exact        201 with exactly what was asked (a request without
               "repositories" gets repository_selection "all", as GitHub
               does)
  over-repos   one more repository ("everything")
  over-perms   one more permission ("administration": "write")
  over-level   "metadata": "write"
  all          repository_selection "all"
  missing-repo one asked repository left out
  other-owner  full_name of another owner
  expired      expires_at in the past
  no-token     no "token" member
  status       "status" (default 500) with {"message": "message"}
  malformed    201 with a body that is not JSON
  slow         the exact answer after "delay" seconds (logged first
               with event "mint-held")

The answer carries "token", "expires_at", "permissions", "repositories"
(objects with id, name, full_name, owner.login, private) and
"repository_selection", as GitHub's does. Each mint is logged with
event "mint": the JWT's verdict and claims, the requested scope, the
headers Accept, X-GitHub-Api-Version, User-Agent and Content-Type, the
status answered and the token's SHA-256 (never the token).

Every other request is logged with event "api": method, path, query, the
Authorization header as received and whether it carries a token this
server issued ("token_ok"). /repos/OWNER/REPO[/...], /graphql and /user
answer 200 {"ok": true, "path": ...}; any other path 404.
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import secrets
import selectors
import signal
import socket
import ssl
import string
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testnet  # noqa: E402  (bind, make_certs, fmt_peer)

MAX_BODY = 1024 * 1024
IO_TIMEOUT = 15

_log_lock = threading.Lock()
_issued = set()
_issued_lock = threading.Lock()
CONFIG = None


def log(log_file, /, **ev):
    ev = dict(t=round(time.time(), 3), **ev)
    line = json.dumps(ev, sort_keys=True) + "\n"
    with _log_lock:
        with open(log_file, "a") as f:
            f.write(line)


def load_config():
    with open(CONFIG) as f:
        return json.load(f)


def b64url_decode(s):
    s += "=" * (-len(s) % 4)
    return base64.urlsafe_b64decode(s.encode("ascii"))


def verify_rs256(pubkey, signed, sig):
    with tempfile.TemporaryDirectory() as d:
        data, sigf = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(data, "wb") as f:
            f.write(signed)
        with open(sigf, "wb") as f:
            f.write(sig)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pubkey,
                            "-signature", sigf, data],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        return r.returncode == 0


def check_jwt(cfg, auth, now):
    """(app id, claims, error): error is None when the JWT is good."""
    if not auth or not auth.startswith("Bearer "):
        return None, None, "no Bearer token"
    parts = auth[len("Bearer "):].split(".")
    if len(parts) != 3:
        return None, None, "not a JWT"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
    except (ValueError, UnicodeError):
        return None, None, "not base64url JSON"
    if "=" in "".join(parts):
        return None, claims, "padding in a JWT part"
    if header.get("alg") != "RS256":
        return None, claims, "alg is not RS256"
    iss, iat, exp = claims.get("iss"), claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        return None, claims, "iat and exp must be integers"
    app = (cfg.get("apps") or {}).get(str(iss))
    if app is None:
        return None, claims, "unknown iss"
    if iat > now + 60:
        return None, claims, "iat is in the future"
    if exp <= now:
        return None, claims, "expired"
    if exp > now + 600:
        return None, claims, "exp is more than 10 minutes ahead"
    if exp <= iat:
        return None, claims, "exp is not after iat"
    signed = (parts[0] + "." + parts[1]).encode("ascii")
    if not verify_rs256(app["public_key"], signed, sig):
        return None, claims, "bad signature"
    return str(iss), claims, None


def repo_obj(i, owner, name):
    return {"id": 1000 + i, "node_id": "R_%d" % i, "name": name,
            "full_name": "%s/%s" % (owner, name), "private": True,
            "owner": {"login": owner, "type": "Organization"}}


_minted = {}  # mints so far of each "tokens" list


def make_token(cfg):
    if cfg.get("tokens"):
        key = tuple(cfg["tokens"])
        i = min(_minted.get(key, 0), len(key) - 1)
        _minted[key] = _minted.get(key, 0) + 1
        return key[i], i
    if cfg.get("token"):
        return cfg["token"], 0
    n = int(cfg.get("token_length", 100))
    alphabet = string.ascii_letters + string.digits
    return "ghs_" + "".join(secrets.choice(alphabet) for _ in range(max(1, n - 4))), 0


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def mint_answer(cfg, req, now):
    """(status, body bytes, token or None)."""
    mode = cfg.get("mode", "exact")
    if mode == "status":
        st = int(cfg.get("status", 500))
        return st, json.dumps({"message": cfg.get("message", "Server Error"),
                               "documentation_url": "https://docs.example/"}).encode(), None
    if mode == "malformed":
        return 201, b'{"token": "ghs_x", "expires_at": ', None
    owner = cfg.get("owner", "acme")
    asked = req.get("repositories")
    perms = dict(req.get("permissions") or {})
    selection = "selected" if isinstance(asked, list) else "all"
    names = list(asked) if isinstance(asked, list) else ["everything", "else"]
    if mode == "over-repos":
        names.append("everything")
    elif mode == "over-perms":
        perms["administration"] = "write"
    elif mode == "over-level":
        perms["metadata"] = "write"
    elif mode == "all":
        selection = "all"
    elif mode == "missing-repo" and names:
        names = names[1:]
    repos = [repo_obj(i, owner, n) for i, n in enumerate(names)]
    if mode == "other-owner" and repos:
        repos[0]["full_name"] = "mallory/" + repos[0]["name"]
    token, i = make_token(cfg)
    life = cfg.get("expires_in", 3600)
    if isinstance(life, list):
        life = life[min(i, len(life) - 1)]
    expires = now + int(life)
    if mode == "expired":
        expires = now - 60
    body = {"token": token, "expires_at": rfc3339(expires), "permissions": perms,
            "repository_selection": selection, "repositories": repos}
    if mode == "no-token":
        del body["token"]
        token = None
    return 201, json.dumps(body).encode(), token


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "github-api-standin"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            out = b""
            while True:
                line = self.rfile.readline(1024)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(n)
                self.rfile.readline(1024)
                if len(out) > MAX_BODY:
                    raise ValueError("body too large")
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n)

    def answer(self, status, body, ctype="application/json; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        cfg = load_config()
        path, _, query = self.path.partition("?")
        try:
            body = self.read_body()
        except ValueError:
            self.answer(413, b'{"message":"too large"}')
            return
        parts = path.split("/")
        if (self.command == "POST" and len(parts) == 5 and parts[1] == "app"
                and parts[2] == "installations" and parts[4] == "access_tokens"):
            self.mint(cfg, parts[3], body)
            return
        auth = self.headers.get("Authorization")
        with _issued_lock:
            token_ok = any(auth in ("token " + t, "Bearer " + t) for t in _issued) if auth else False
        known = (path.startswith("/repos/") and len(parts) >= 4) or path in (
            "/graphql", "/user") or path.startswith("/graphql/")
        status = 200 if known else 404
        log(cfg["log"], event="api", method=self.command, path=path,
            query=query if "?" in self.path else None, authorization=auth,
            token_ok=token_ok, status=status, body_length=len(body))
        if known:
            self.answer(200, json.dumps({"ok": True, "path": path}).encode())
        else:
            self.answer(404, b'{"message":"Not Found"}')

    def mint(self, cfg, inst, body):
        now = int(time.time())
        app_id, claims, jwt_err = check_jwt(cfg, self.headers.get("Authorization"), now)
        ev = dict(event="mint", path=self.path, installation=inst, jwt_ok=jwt_err is None,
                  jwt_error=jwt_err, claims=claims, now=now, mode=cfg.get("mode", "exact"),
                  accept=self.headers.get("Accept"),
                  api_version=self.headers.get("X-GitHub-Api-Version"),
                  user_agent=self.headers.get("User-Agent"),
                  content_type=self.headers.get("Content-Type"))
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = None
        ev["body_json"] = isinstance(req, dict)
        ev["repositories"] = req.get("repositories") if isinstance(req, dict) else None
        ev["permissions"] = req.get("permissions") if isinstance(req, dict) else None
        if jwt_err is not None:
            status, out, token = 401, json.dumps(
                {"message": "A JSON web token could not be decoded"}).encode(), None
        elif not inst.isdigit() or int(inst) != int(cfg["apps"][app_id].get("installation_id", -1)):
            status, out, token = 404, b'{"message":"Not Found"}', None
        elif not isinstance(req, dict):
            status, out, token = 400, b'{"message":"Problems parsing JSON"}', None
        else:
            index = _minted.get(tuple(cfg.get("tokens") or ()), 0)
            if cfg.get("mode") == "slow" and index >= int(cfg.get("slow_from", 0)):
                log(cfg["log"], event="mint-held", index=index)
                time.sleep(float(cfg.get("delay", 10)))
            status, out, token = mint_answer(cfg, req, now)
        if token:
            with _issued_lock:
                _issued.add(token)
        ev["status"] = status
        ev["token_sha256"] = hashlib.sha256(token.encode()).hexdigest() if token else None
        ev["token_length"] = len(token) if token else None
        log(cfg["log"], **ev)
        self.answer(status, out)

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
    global CONFIG
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    CONFIG = a.config
    cfg = load_config()
    open(cfg["log"], "a").close()
    tls = cfg["tls"]
    leaf, key = testnet.make_certs(tls["dir"], tls["names"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    ctx.set_alpn_protocols(["http/1.1"])
    socks = [testnet.bind(ep, socket.SOCK_STREAM) for ep in cfg["listen"]]
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
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    while not stop["now"] and time.time() < deadline:
        for k, _ in sel.select(timeout=0.5):
            try:
                conn, addr = k.fileobj.accept()
            except OSError:
                continue
            t = threading.Thread(target=serve_conn, args=(conn, addr, ctx), daemon=True)
            t.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
