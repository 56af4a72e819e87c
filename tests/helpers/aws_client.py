#!/usr/bin/env python3
"""aws_client.py MODE HOST PATH - SigV4 requests signed inside the sandbox
with the credentials in its environment (the placeholders), sent through
HTTPS_PROXY, for what the AWS CLI does not send
(tests/integration/77-aws-sigv4.t). Prints "STATUS RULE" (RULE: the
X-Airlock-Rule of a refusal, or "-") and the body on a second line.

MODE:
  chunked N      PUT N bytes as a signed aws-chunked upload (64 KiB chunks)
  chunk-tamper N the same with one data byte changed after signing
  trailer N      PUT N bytes as aws-chunked with a signed trailer (a CRC32
                 checksum: STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)
  trailer-tamper N  the same with the trailer's checksum changed after signing
  sigv4a         GET signed with SigV4a (AWS4-ECDSA-P256-SHA256)
  sigv4a-tamper  the same, then a signed header changed
  tamper         GET signed, then a signed header changed
  wrong-secret   GET signed with a secret that is not the placeholder's
"""
import base64
import binascii
import datetime
import http.client
import os
import ssl
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import awssig  # noqa: E402


def main():
    mode, host, path = sys.argv[1], sys.argv[2], sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    key_id = os.environ["AWS_ACCESS_KEY_ID"]
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    token = os.environ.get("AWS_SESSION_TOKEN")
    if mode == "wrong-secret":
        secret = "W" * len(secret)
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = "%s/us-east-1/s3/aws4_request" % date
    key = awssig.signing_key(secret, date, "us-east-1", "s3")
    method, body, size = "GET", b"", 65536
    headers = [("Host", host), ("X-Amz-Date", amz_date)]
    trailer = None
    if mode in ("chunked", "chunk-tamper", "trailer", "trailer-tamper"):
        method = "PUT"
        data = bytes((i * 7) & 0xff for i in range(n))
        length = awssig.chunked_length(n, size)
        sha = awssig.STREAMING
        if mode.startswith("trailer"):
            crc = base64.b64encode(binascii.crc32(data).to_bytes(4, "big")).decode()
            trailer = [("x-amz-checksum-crc32", crc)]
            sha = awssig.TRAILER
            length += len(awssig.trailer_block(trailer, "0" * 64)) - 2
            headers.append(("x-amz-trailer", "x-amz-checksum-crc32"))
        headers += [("Content-Encoding", "aws-chunked"),
                    ("Content-Length", str(length)),
                    ("x-amz-content-sha256", sha),
                    ("x-amz-decoded-content-length", str(n))]
    else:
        headers += [("x-amz-content-sha256", awssig.EMPTY), ("Range", "bytes=0-9")]
    if token:
        headers.append(("X-Amz-Security-Token", token))
    signed = ";".join(sorted(k.lower() for k, _ in headers))
    canon = awssig.canonical(method, path, "", headers, signed,
                             dict((k.lower(), v) for k, v in headers)["x-amz-content-sha256"],
                             True)
    sig = awssig.sign(key, amz_date, scope, canon)
    if mode.startswith("sigv4a"):
        # SigV4a (awssig.py's own ECDSA signer): the region set signed too
        headers.append(("X-Amz-Region-Set", "*"))
        signed = ";".join(sorted(k.lower() for k, _ in headers))
        canon = awssig.canonical(method, path, "", headers, signed,
                                 dict((k.lower(), v) for k, v in headers)["x-amz-content-sha256"],
                                 True)
        sig = awssig.v4a_sign(key_id, secret, amz_date, "%s/s3/aws4_request" % date, canon)
        headers.append(("Authorization", "AWS4-ECDSA-P256-SHA256 Credential=%s/%s/s3/"
                        "aws4_request, SignedHeaders=%s, Signature=%s" %
                        (key_id, date, signed, sig)))
    else:
        headers.append(("Authorization", "AWS4-HMAC-SHA256 Credential=%s/%s, "
                        "SignedHeaders=%s, Signature=%s" % (key_id, scope, signed, sig)))
    if method == "PUT":
        body = awssig.chunked_body(key, amz_date, scope, sig, data, size, trailer)
        if mode == "chunk-tamper":
            i = body.index(b"\r\n") + 2 + 100
            body = body[:i] + bytes([body[i] ^ 1]) + body[i + 1:]
        if mode == "trailer-tamper":
            i = body.index(b"x-amz-checksum-crc32:") + len("x-amz-checksum-crc32:")
            body = body[:i] + (b"B" if body[i:i + 1] != b"B" else b"C") + body[i + 1:]
    if mode in ("tamper", "sigv4a-tamper"):
        headers = [(k, "bytes=0-99") if k == "Range" else (k, v) for k, v in headers]
    proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=ctx, timeout=60)
    conn.set_tunnel(host, 443)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in headers:
        conn.putheader(k, v)
    conn.endheaders()
    if body:
        conn.send(body)
    r = conn.getresponse()
    text = r.read()
    print(r.status, r.getheader("X-Airlock-Rule") or "-")
    print(text.decode(errors="replace").replace("\n", " ")[:300])


if __name__ == "__main__":
    main()
