#!/usr/bin/env python3
"""oauth_standin.py - a stand-in OAuth token endpoint and the API it guards,
for tests/integration/68-secret-oauth.t. One HTTPS listener; the Host header
picks the part:

  auth.*  POST /oauth/token   the refresh_token grant: checks client_id,
          client_secret and refresh_token against the configuration and
          issues a new access token (the nth grant's expires_in is
          lifetimes[n], then the last again). While the file DOWN exists it
          answers 503. When the file HOLD exists, one grant (HOLD is
          removed) first writes HOLDING, then waits until RELEASE exists,
          at most hold_max seconds, and logs which ended the wait
          (held: "released" or "timeout").
  api.*   GET /v1/...         200 only for the newest token issued (every
          older one, and a revoked one, gets 401). /v1/echo answers the
          Authorization header it got; /v1/revoke revokes the newest token;
          /v1/down creates DOWN (the token endpoint fails from then on);
          /v1/always401 answers 401 whatever the token.
  api.*   POST /v1/...        as GET (the body is read and dropped).

Every request is a JSON line in LOG: host, path, what it got (the form, the
Authorization), which grant the token was (0: none of them), the status.

    oauth_standin.py LISTEN CERT KEY CONFIG.json
CONFIG: {"log", "ready", "down", "client_id", "client_secret",
         "refresh_token", "lifetimes": [s, ...], "lifetime": s (whole run),
         optional "hold", "holding", "release" (files), "hold_max": s}
"""
import json
import os
import secrets
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LISTEN, CERT, KEY, CONF = sys.argv[1:5]
with open(CONF) as f:
    C = json.load(f)
LOCK = threading.Lock()
TOKENS = []          # issued, in order
REVOKED = set()


def log(**ev):
    with LOCK, open(C["log"], "a") as f:
        f.write(json.dumps(ev) + "\n")


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, obj, ctype="application/json"):
        body = json.dumps(obj).encode() if ctype == "application/json" else obj
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def host(self):
        return (self.headers.get("Host") or "").split(":")[0]

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n).decode("latin-1")
        form = {k: v[0] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        if self.host().startswith("api."):
            return self.do_GET()
        if not self.host().startswith("auth.") or self.path != "/oauth/token":
            log(host=self.host(), path=self.path, status=404)
            return self.answer(404, {"error": "not_found"})
        if os.path.exists(C["down"]):
            log(host=self.host(), path=self.path, form=form, status=503)
            return self.answer(503, {"error": "temporarily_unavailable"})
        ok = (form.get("grant_type") == "refresh_token" and
              form.get("client_id") == C["client_id"] and
              form.get("client_secret") == C["client_secret"] and
              form.get("refresh_token") == C["refresh_token"] and
              self.headers.get("Content-Type", "").startswith(
                  "application/x-www-form-urlencoded"))
        if not ok:
            log(host=self.host(), path=self.path, form=form, status=400)
            return self.answer(400, {"error": "invalid_grant"})
        held = None
        if C.get("hold") and os.path.exists(C["hold"]):
            os.unlink(C["hold"])
            open(C["holding"], "w").close()
            end = time.monotonic() + C.get("hold_max", 10)
            while not os.path.exists(C["release"]) and time.monotonic() < end:
                time.sleep(0.05)
            held = "released" if os.path.exists(C["release"]) else "timeout"
        with LOCK:
            tok = "oat-%d-%s" % (len(TOKENS) + 1, secrets.token_urlsafe(30))
            TOKENS.append(tok)
            k = len(TOKENS)
        lt = C["lifetimes"][min(k - 1, len(C["lifetimes"]) - 1)]
        log(host=self.host(), path=self.path, form=form, status=200, grant=k, token=tok,
            expires_in=lt, scope=form.get("scope"), held=held)
        return self.answer(200, {"access_token": tok, "token_type": "Bearer",
                                 "expires_in": lt})

    def do_GET(self):
        auth = self.headers.get("Authorization") or ""
        tok = auth[7:] if auth.startswith("Bearer ") else ""
        with LOCK:
            k = TOKENS.index(tok) + 1 if tok in TOKENS else 0
            newest = k and k == len(TOKENS) and tok not in REVOKED
        if not self.host().startswith("api.") or not newest or self.path == "/v1/always401":
            log(host=self.host(), path=self.path, auth=auth, grant=k, status=401)
            return self.answer(401, {"error": "invalid_token"})
        if self.path == "/v1/revoke":
            with LOCK:
                REVOKED.add(tok)
        if self.path == "/v1/down":
            open(C["down"], "w").close()
        log(host=self.host(), path=self.path, auth=auth, grant=k, status=200)
        if self.path == "/v1/echo":
            return self.answer(200, ("got " + auth + "\n").encode(), "text/plain")
        return self.answer(200, {"ok": True, "grant": k})

    def log_message(self, *a):
        pass


def main():
    host, port = LISTEN.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), H)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Timer(C.get("lifetime", 300), lambda: os._exit(0)).start()
    open(C["ready"], "w").close()
    srv.serve_forever()


if __name__ == "__main__":
    main()
