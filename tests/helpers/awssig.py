"""awssig.py - AWS Signature Version 4 in Python, for the stand-in S3/STS
(aws_standin.py, which verifies with the real key) and the in-sandbox
client (aws_client.py, which signs with the placeholders). Written from
AWS's SigV4 documentation, apart from src/sigv4.c, so that each checks
the other.
"""
import hashlib
import hmac
import re
import urllib.parse

STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
EMPTY = hashlib.sha256(b"").hexdigest()
AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/([^/,]+)/"
                     r"aws4_request, ?SignedHeaders=([^, ]+), ?Signature=([0-9a-f]{64})$")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def _mac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region, service):
    k = _mac(("AWS4" + secret).encode(), date)
    return _mac(_mac(_mac(k, region), service), "aws4_request")


def _enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def canonical_query(query):
    params = []
    for p in (query or "").split("&"):
        if p:
            n, _, v = p.partition("=")
            params.append((_enc(urllib.parse.unquote(n)), _enc(urllib.parse.unquote(v))))
    return "&".join("%s=%s" % nv for nv in sorted(params))


def canonical(method, path, query, headers, signed, payload_hash, s3):
    """headers: a list of (name, value) as sent."""
    cpath = path or "/"
    if not s3:
        cpath = urllib.parse.quote(cpath, safe="/-_.~")
    block = ""
    for name in signed.split(";"):
        vals = [" ".join(v.split()) for k, v in headers if k.lower() == name]
        if not vals:
            raise KeyError(name)
        block += "%s:%s\n" % (name, ",".join(vals))
    return "\n".join([method, cpath, canonical_query(query), block, signed, payload_hash])


def sign(key, amz_date, scope, canon):
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, sha(canon.encode())])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def chunk_sign(key, amz_date, scope, prev, data):
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY, sha(data)])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def chunked_body(key, amz_date, scope, seed, data, size):
    """The aws-chunked body of data in chunks of size, signed on seed."""
    out, prev = b"", seed
    pieces = [data[i:i + size] for i in range(0, len(data), size)] + [b""]
    for piece in pieces:
        prev = chunk_sign(key, amz_date, scope, prev, piece)
        out += b"%x;chunk-signature=%s\r\n" % (len(piece), prev.encode()) + piece + b"\r\n"
    return out


def chunked_length(n, size):
    total, left = 0, n
    while True:
        piece = min(size, left)
        total += len(b"%x" % piece) + len(";chunk-signature=") + 64 + 2 + piece + 2
        if piece == 0:
            return total
        left -= piece
