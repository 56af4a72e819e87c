#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""mkstream - writes signed, chained receipt streams for the tests of
airlock learn, report and export, independently of airlock's own writer
(Ed25519 with python3-cryptography, SHA-256 with hashlib), following the
format of docs/RECEIPTS.md.

  mkstream.py SPEC.json [--key KEY.pem] [--pub-out PUB.pem] > events.jsonl
  mkstream.py --synthetic N [--key ...] [--unsigned] > events.jsonl

SPEC is a JSON object {"sessions": [SESSION, ...]}; each SESSION:

  {"session": "sess-1", "mode": "shadow", "argv0": "agent.sh",
   "policy": "sha256:<64 hex>"          (default: 64 "a"s)
   "start": "2026-03-01T09:00:00.000Z", (default)
   "open": "session.start",             (or "session.refused")
   "events": [{"type": ..., "decision": ..., "point": ..., "rule": ...,
               "subject": {...}, "reason": ..., "dt": MS}, ...],
   "exit": 0, "spend_usd": 1.25}        (spend_usd optional)

"dt" is the milliseconds since the previous line (default 250). Each
session gets session.start first and session.end last, with the counts
the verifier recounts. Without --key a fresh key is made per run.
--unsigned writes zero signatures (the chain is still right): for size
tests, where a stream need not verify.
"""
import argparse
import base64
import datetime
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ZERO = "0" * 64


def ts_of(ms):
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def ms_of(ts):
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


class Writer:
    def __init__(self, key, out, unsigned=False):
        self.key = key
        self.unsigned = unsigned
        self.out = out
        raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
        self.pub = base64.b64encode(raw).decode()

    def session(self, s):
        seq = 0
        prev = ZERO
        now = ms_of(s.get("start", "2026-03-01T09:00:00.000Z"))
        counts = {}
        sid = s.get("session", "sess-1")
        policy = s.get("policy", "sha256:" + "a" * 64)

        def line(typ, decision, point, rule, subject, reason):
            nonlocal seq, prev
            obj = {"v": 1, "seq": seq, "ts": ts_of(now), "session": sid,
                   "type": typ, "decision": decision, "point": point,
                   "rule": rule, "policy": policy, "subject": subject,
                   "reason": reason, "prev": prev}
            body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
            sig = base64.b64encode(bytes(64) if self.unsigned else self.key.sign(body)).decode()
            data = body[:-1] + b',"sig":"' + sig.encode() + b'"}'
            self.out.write(data + b"\n")
            prev = hashlib.sha256(data).hexdigest()
            seq += 1
            counts[typ] = counts.get(typ, 0) + 1

        opener = s.get("open", "session.start")
        line(opener, "block" if opener == "session.refused" else "info",
             "supervisor", "session",
             {"mode": s.get("mode", "shadow"), "capabilities": {"userns": True},
              "pubkey": self.pub, "argv0": s.get("argv0", "agent")},
             "session started in mode " + s.get("mode", "shadow"))
        for e in s.get("events", []):
            now += e.get("dt", 250)
            line(e["type"], e.get("decision", "info"), e.get("point", "egress-proxy"),
                 e.get("rule", ""), e.get("subject", {}), e.get("reason", ""))
        now += s.get("end_dt", 250)
        counts["session.end"] = counts.get("session.end", 0) + 1
        end = {"exit": s.get("exit", 0), "counts": dict(sorted(counts.items()))}
        if "spend_usd" in s:
            end["spend_usd"] = s["spend_usd"]
        line("session.end", "info", "supervisor", "session", end, "session ended")


def synthetic(n):
    """About @n lines: one shadow session with a realistic mix."""
    hosts = ["api.anthropic.com", "registry.npmjs.org", "pypi.org", "github.com",
             "files.pythonhosted.org", "objects.githubusercontent.com"]
    ev = []
    total = 0.0
    i = 0
    while len(ev) < n - 2:
        h = hosts[i % len(hosts)]
        k = i % 10
        if k < 4:
            ev.append({"type": "egress.allow", "decision": "allow", "rule": "egress.allow[%d]" % (i % 3),
                       "subject": {"method": "CONNECT", "host": h, "port": 443, "address": "203.0.113.%d" % (i % 200 + 1)},
                       "reason": "allowed", "dt": 20})
        elif k < 6:
            ev.append({"type": "http.request", "decision": "allow", "rule": "egress.intercept",
                       "subject": {"method": "GET", "host": h, "path": "/pkg/%d" % (i % 97), "status": 200,
                                   "bytes_in": 1200 + i % 5000, "bytes_out": 300},
                       "reason": "", "dt": 15})
        elif k == 6:
            ev.append({"type": "egress.block", "decision": "would_block", "rule": "egress.default",
                       "subject": {"method": "CONNECT", "host": "cdn%d.example.net" % (i % 13), "port": 443},
                       "reason": "no allow rule matches", "dt": 30})
        elif k == 7:
            cost = 0.0004 * (1 + i % 7)
            total += cost
            ev.append({"type": "budget.charge", "decision": "info", "rule": "spend", "point": "egress-proxy",
                       "subject": {"model": "claude-sonnet-4-5", "input_tokens": 900 + i % 300,
                                   "output_tokens": 40 + i % 90, "cache_write_tokens": 0,
                                   "cache_read_tokens": 0, "cost_usd": round(cost, 6),
                                   "total_usd": round(total, 6), "cap_usd": 50.0},
                       "reason": "charged", "dt": 40})
        elif k == 8:
            ev.append({"type": "secret.inject", "decision": "allow", "rule": "secrets.anthropic", "point": "broker",
                       "subject": {"secret": "anthropic", "host": "api.anthropic.com", "header": "x-api-key"},
                       "reason": "placeholder replaced", "dt": 5})
        else:
            ev.append({"type": "git.allow", "decision": "allow", "rule": "session.repo", "point": "git",
                       "subject": {"repo": "github.com/acme/api", "operation": "fetch"},
                       "reason": "session repository", "dt": 60})
        i += 1
    return {"sessions": [{"session": "sess-big", "mode": "shadow", "argv0": "claude",
                          "events": ev, "exit": 0, "spend_usd": round(total, 6)}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--synthetic", type=int)
    ap.add_argument("--key", help="PKCS#8 PEM Ed25519 private key to sign with")
    ap.add_argument("--pub-out", help="write the public key here (SPKI PEM)")
    ap.add_argument("--unsigned", action="store_true", help="zero signatures")
    a = ap.parse_args()
    if a.key:
        key = serialization.load_pem_private_key(open(a.key, "rb").read(), None)
    else:
        key = Ed25519PrivateKey.generate()
    if a.pub_out:
        open(a.pub_out, "wb").write(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    spec = synthetic(a.synthetic) if a.synthetic else json.load(open(a.spec))
    out = sys.stdout.buffer
    w = Writer(key, out, a.unsigned)
    for s in spec["sessions"]:
        w.session(s)
    out.flush()


if __name__ == "__main__":
    main()
