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

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.exceptions import InvalidSignature

STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
TRAILER = STREAMING + "-TRAILER"
EMPTY = hashlib.sha256(b"").hexdigest()
V4A = "AWS4-ECDSA-P256-SHA256"
V4A_RE = re.compile(r"AWS4-ECDSA-P256-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/"
                    r"aws4_request, ?SignedHeaders=([^, ]+), ?Signature=([0-9a-f]+)$")
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
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


def trailer_sign(key, amz_date, scope, prev, fields):
    """The signature of the trailer fields [(name, value)], chained on prev
    (the final chunk's): over each "name:value\\n"."""
    canon = "".join("%s:%s\n" % nv for nv in fields)
    sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev, sha(canon.encode())])
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def trailer_block(fields, sig):
    return b"".join(b"%s:%s\r\n" % (n.encode(), v.encode()) for n, v in fields) + \
        b"x-amz-trailer-signature:%s\r\n\r\n" % sig.encode()


def chunked_body(key, amz_date, scope, seed, data, size, trailer=None):
    """The aws-chunked body of data in chunks of size, signed on seed; with
    trailer fields [(name, value)], the signed trailer after the final
    chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)."""
    out, prev = b"", seed
    pieces = [data[i:i + size] for i in range(0, len(data), size)] + [b""]
    for piece in pieces:
        prev = chunk_sign(key, amz_date, scope, prev, piece)
        out += b"%x;chunk-signature=%s\r\n" % (len(piece), prev.encode())
        if trailer is not None and not piece:
            return out + trailer_block(trailer, trailer_sign(key, amz_date, scope, prev,
                                                             trailer))
        out += piece + b"\r\n"
    return out


def dechunk_signed(raw, key, amz_date, scope, seed, trailer=False):
    """The payload of a signed aws-chunked body, every signature checked
    (ValueError otherwise); with trailer, the signed trailer too."""
    data, prev, off = b"", seed, 0
    while True:
        eol = raw.index(b"\r\n", off)
        size_s, _, sig = raw[off:eol].partition(b";chunk-signature=")
        size = int(size_s, 16)
        piece = raw[eol + 2:eol + 2 + size]
        want = chunk_sign(key, amz_date, scope, prev, piece)
        if sig.decode() != want:
            raise ValueError("chunk signature")
        if size == 0 and trailer:
            fields, off = [], eol + 2
            while True:
                eol = raw.index(b"\r\n", off)
                name, _, value = raw[off:eol].decode().partition(":")
                off = eol + 2
                if name == "x-amz-trailer-signature":
                    if raw[off:] != b"\r\n" or not fields or \
                            value != trailer_sign(key, amz_date, scope, want, fields):
                        raise ValueError("trailer signature")
                    return data
                fields.append((name, value))
        if raw[eol + 2 + size:eol + 4 + size] != b"\r\n":
            raise ValueError("chunk signature")
        data, prev, off = data + piece, want, eol + 4 + size
        if size == 0:
            return data


def chunked_length(n, size):
    total, left = 0, n
    while True:
        piece = min(size, left)
        total += len(b"%x" % piece) + len(";chunk-signature=") + 64 + 2 + piece + 2
        if piece == 0:
            return total
        left -= piece


def v4a_private_key(key_id, secret):
    """SigV4a's P-256 key: NIST SP 800-108 counter-mode KDF, HMAC-SHA256
    keyed with "AWS4A" + secret; the first candidate c <= n - 2 gives
    c + 1 (AWS's published vector: AKISORANDOMAASORANDOM gives 7fd3bd01...)."""
    for counter in range(1, 255):
        fixed = (b"\0\0\0\1" + V4A.encode() + b"\0" + key_id.encode() + bytes([counter]) +
                 b"\0\0\1\0")
        c = int.from_bytes(hmac.new(b"AWS4A" + secret.encode(), fixed, hashlib.sha256).digest(),
                           "big")
        if c <= P256_N - 2:
            return ec.derive_private_key(c + 1, ec.SECP256R1())
    raise ValueError("no key")


def v4a_sts(amz_date, scope, canon):
    return "\n".join([V4A, amz_date, scope, sha(canon.encode())])


def v4a_sign(key_id, secret, amz_date, scope, canon):
    k = v4a_private_key(key_id, secret)
    return k.sign(v4a_sts(amz_date, scope, canon).encode(), ec.ECDSA(hashes.SHA256())).hex()


def v4a_verify(key_id, secret, amz_date, scope, canon, sig_hex):
    k = v4a_private_key(key_id, secret).public_key()
    try:
        k.verify(bytes.fromhex(sig_hex), v4a_sts(amz_date, scope, canon).encode(),
                 ec.ECDSA(hashes.SHA256()))
        return True
    except (InvalidSignature, ValueError):
        return False
