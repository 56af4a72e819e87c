#!/usr/bin/env python3
"""aws_standin.py CONFIG - a stand-in S3 and STS over TLS for the SigV4
re-signing tests (tests/integration/77-aws-sigv4.t).

CONFIG (JSON): listen "ADDR:PORT", cert, key (PEM), log (JSON lines, one
per request), ready (a file made once listening), access_key_id,
secret_access_key, session_token (or null): the REAL credentials. Every
request must carry a SigV4 signature by the real key (the header's, the
payload hash or the body's, and for STREAMING-AWS4-HMAC-SHA256-PAYLOAD
every chunk's); one that does not verify gets 403 SignatureDoesNotMatch.
Each request is logged with what it got: method, host, path, query,
headers, body length, verified or why not.

S3 (any host but sts.*): PUT stores the object (decoded from aws-chunked),
GET and HEAD return it; GET of the key "echo" answers the real credentials
(the proxy must scrub them). STS: POST Action=GetCallerIdentity.
"""
import http.server
import json
import os
import socketserver
import ssl
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import awssig  # noqa: E402

CFG = json.load(open(sys.argv[1]))
OBJECTS = {}
LOCK = threading.Lock()


def log(**kw):
    with LOCK, open(CFG["log"], "a") as f:
        f.write(json.dumps(kw) + "\n")


def dechunk_plain(raw):
    data, off = b"", 0
    while True:
        eol = raw.index(b"\r\n", off)
        size = int(raw[off:eol].split(b";")[0], 16)
        if size == 0:
            return data
        data += raw[eol + 2:eol + 2 + size]
        off = eol + 4 + size


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return dechunk_plain_stream(self.rfile)
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def verify(self, raw, path, query):
        """(why or None, payload)"""
        m4a = awssig.V4A_RE.match(self.headers.get("Authorization", ""))
        if m4a:
            return self.verify_v4a(m4a, raw, path, query), raw
        m = awssig.AUTH_RE.match(self.headers.get("Authorization", ""))
        if not m:
            return "no SigV4 Authorization", raw
        key_id, date, region, service, signed, sig = m.groups()
        if key_id != CFG["access_key_id"]:
            return "not the real access key id", raw
        tok = self.headers.get("X-Amz-Security-Token")
        if tok != CFG.get("session_token"):
            return "not the real session token", raw
        amz_date = self.headers.get("X-Amz-Date", "")
        sha = self.headers.get("x-amz-content-sha256")
        payload_hash = sha if sha else awssig.sha(raw)
        try:
            canon = awssig.canonical(self.command, path, query, list(self.headers.items()),
                                     signed, payload_hash, service == "s3")
        except KeyError as e:
            return "signed header absent: %s" % e, raw
        key = awssig.signing_key(CFG["secret_access_key"], date, region, service)
        scope = "%s/%s/%s/aws4_request" % (date, region, service)
        want = awssig.sign(key, amz_date, scope, canon)
        if want != sig:
            return "signature", raw
        if sha in (awssig.STREAMING, awssig.TRAILER):
            try:
                return None, awssig.dechunk_signed(raw, key, amz_date, scope, sig,
                                                   sha == awssig.TRAILER)
            except ValueError as e:
                return str(e), raw
        if sha == "STREAMING-UNSIGNED-PAYLOAD-TRAILER":
            return None, dechunk_plain(raw)
        if sha and sha != "UNSIGNED-PAYLOAD" and sha != awssig.sha(raw):
            return "payload hash", raw
        return None, raw

    def verify_v4a(self, m, raw, path, query):
        """SigV4a, with the key derived from the real credentials: why or None."""
        key_id, date, service, signed, sig = m.groups()
        if key_id != CFG["access_key_id"]:
            return "not the real access key id"
        if self.headers.get("X-Amz-Security-Token") != CFG.get("session_token"):
            return "not the real session token"
        sha = self.headers.get("x-amz-content-sha256") or awssig.sha(raw)
        try:
            canon = awssig.canonical(self.command, path, query, list(self.headers.items()),
                                     signed, sha, service == "s3")
        except KeyError as e:
            return "signed header absent: %s" % e
        if not awssig.v4a_verify(key_id, CFG["secret_access_key"],
                                 self.headers.get("X-Amz-Date", ""),
                                 "%s/%s/aws4_request" % (date, service), canon, sig):
            return "signature (SigV4a)"
        return None

    def reply(self, code, body=b"", ctype="application/xml", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        raw = self.read_body()
        path, _, query = self.path.partition("?")
        host = self.headers.get("Host", "").split(":")[0]
        why, payload = self.verify(raw, path, query)
        log(method=self.command, host=host, path=path, query=query,
            headers=list(self.headers.items()), body_len=len(raw), payload_len=len(payload),
            verified=why is None, why=why)
        if why:
            self.reply(403, b"<Error><Code>SignatureDoesNotMatch</Code><Message>"
                       + why.encode() + b"</Message></Error>")
            return
        if host.startswith("sts."):
            self.reply(200, (
                '<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                "<GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/standin</Arn>"
                "<UserId>AIDASTANDINUSER</UserId><Account>123456789012</Account>"
                "</GetCallerIdentityResult><ResponseMetadata><RequestId>"
                "0123-standin</RequestId></ResponseMetadata></GetCallerIdentityResponse>"
            ).encode(), "text/xml")
            return
        bucket = None if host.startswith("s3.") else host.split(".")[0]
        key = path.lstrip("/") if bucket else path.lstrip("/").partition("/")[2]
        bucket = bucket or path.lstrip("/").partition("/")[0]
        if self.command == "PUT":
            OBJECTS[(bucket, key)] = payload
            self.reply(200, b"", extra=[("ETag", '"%s"' % awssig.sha(payload)[:32])])
        elif key == "echo" or (bucket, key) in OBJECTS:
            body = OBJECTS.get((bucket, key)) or ("%s %s %s" % (
                CFG["access_key_id"], CFG["secret_access_key"], CFG.get("session_token"))).encode()
            self.reply(200, body, "application/octet-stream",
                       [("ETag", '"%s"' % awssig.sha(body)[:32]),
                        ("Last-Modified", "Mon, 07 Dec 2026 12:00:00 GMT")])
        else:
            self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


def dechunk_plain_stream(f):
    data = b""
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            while f.readline() not in (b"\r\n", b"\n", b""):
                pass
            return data
        data += f.read(size)
        f.read(2)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    addr, port = CFG["listen"].rsplit(":", 1)
    srv = Server((addr, int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CFG["cert"], CFG["key"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Timer(CFG.get("lifetime", 600), srv.shutdown).start()
    open(CFG["ready"], "w").close()
    srv.serve_forever()


if __name__ == "__main__":
    main()
