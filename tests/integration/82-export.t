#!/usr/bin/env python3
# airlock export --format ocsf: every receipt type of a hand-made signed
# stream maps to its OCSF 1.1.0 class with the attributes that class
# requires, every block and would_block is followed by a Detection Finding,
# and each event is traced to its signed line (seq, the line's SHA-256 that
# the next line's prev holds, the policy digest). A stream that does not
# verify is refused and nothing is written, unless --unverified.
import datetime
import hashlib
import json
import os
import stat
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import AIRLOCK, HELPERS, SRC, T, diag, done_testing, is_, like, lines_of, mkstream, ok, run  # noqa: E402

# The mapping docs/AUDIT.md gives, restated here so that a change to the
# table in src/events.c is a deliberate one.
CLASS = {
    "session.start": 1007, "session.refused": 1007, "session.end": 1007,
    "egress.allow": 4001, "egress.block": 4001, "proxy.error": 4001,
    "http.request": 4002, "git.allow": 4002, "git.block": 4002, "git.token": 4002,
    "secret.inject": 4002, "secret.block": 4002, "secret.scrub": 4002,
    "budget.block": 4002, "dns.block": 4003,
    "env.drop": 0, "policy.reload": 0, "budget.charge": 0, "budget.exhausted": 0,
    "sandbox.error": 0, "vendor.future": 0,
}
CATEGORY = {0: 0, 1007: 1, 4001: 4, 4002: 4, 4003: 4, 2004: 2}
# OCSF 1.1.0: the attributes each class requires beyond the base event's
# (events/network/network.json, http.json, dns.json, system/process.json,
# findings/finding.json; profiles/security_control.json when applied).
REQUIRED = {
    4001: ["src_endpoint", "dst_endpoint"],
    4002: ["src_endpoint", "dst_endpoint", "http_request", "http_response"],
    4003: ["src_endpoint", "dst_endpoint"],
    1007: ["process", "actor", "device"],
    2004: ["finding_info"],
    0: [],
}
BASE_REQUIRED = ["activity_id", "category_uid", "class_uid", "type_uid", "time",
                 "severity_id", "metadata"]



def ms_of(ts):
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    return round(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


ev = mkstream(os.path.join(HELPERS, "all-types.json"), os.path.join(T, "all.jsonl"),
              "--pub-out", os.path.join(T, "k.pub"))
raw = lines_of(ev)
recs = [json.loads(l) for l in raw]

# --- usage --------------------------------------------------------------------------------
st, out, err = run(AIRLOCK, "export", "--help")
is_(st, 0, "export --help: exit 0")
like(out.decode(), r"^usage: airlock export --format ocsf", "export --help: the usage line")
st, out, err = run(AIRLOCK, "export", ev)
is_((st, out), (2, b""), "export without --format: usage error, nothing written")
like(err.decode(), r"^airlock: export: --format ocsf is required", "and says what is missing")
st, out, err = run(AIRLOCK, "export", "--format", "cef", ev)
is_(st, 2, "export --format cef: usage error")
like(err.decode(), r"unknown format 'cef'", "naming the format")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf")
is_(st, 2, "export without EVENTS: usage error")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", os.path.join(T, "missing.jsonl"))
is_((st, out), (2, b""), "a missing file: exit 2, nothing written")
like(err.decode(), r"missing\.jsonl: No such file", "and names the file")

# --- the mapping --------------------------------------------------------------------------
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", ev)
is_(st, 0, "export of an intact stream: exit 0")
if st:
    diag(err.decode())
events = [json.loads(l) for l in out.decode().splitlines()]
blocks = sum(1 for r in recs if r["decision"] in ("block", "would_block"))
is_(len(events), len(recs) + blocks, "one event per receipt and one finding per block or would_block")

by_uid = {}
for e in events:
    by_uid[e["metadata"]["uid"]] = e
bad = []
for i, r in enumerate(recs):
    uid = "%s:%d" % (r["session"], r["seq"])
    e = by_uid.get(uid)
    if not e:
        bad.append("%s: no event" % uid)
        continue
    want = CLASS[r["type"]]
    u = e.get("unmapped", {}).get("airlock", {})
    sha = hashlib.sha256(raw[i]).hexdigest()
    checks = [
        ("class_uid", e["class_uid"] == want),
        ("category_uid", e["category_uid"] == CATEGORY[want]),
        ("type_uid", e["type_uid"] == e["class_uid"] * 100 + e["activity_id"]),
        ("base attributes", all(k in e for k in BASE_REQUIRED)),
        ("class attributes", all(k in e for k in REQUIRED[want])),
        ("metadata", e["metadata"].get("version", "").startswith("1.1") and
         e["metadata"]["product"].get("name") == "airlock" and
         e["metadata"]["product"].get("vendor_name") == "airlock"),
        ("sequence", e["metadata"].get("sequence") == r["seq"] and u.get("seq") == r["seq"]),
        ("correlation", e["metadata"].get("correlation_uid") == r["session"]),
        ("line sha256", u.get("line_sha256") == sha),
        ("next prev", i + 1 >= len(recs) or recs[i + 1]["seq"] == 0 or
         recs[i + 1]["prev"] == u.get("line_sha256")),
        ("policy", u.get("policy") == r["policy"]),
        ("time", e["time"] == ms_of(r["ts"])),
        ("severity", e["severity_id"] in range(0, 7)),
        ("subject kept", u.get("subject") == r["subject"]),
        ("verified", u.get("verified") is True),
        ("action", r["decision"] == "info" or e.get("action_id") ==
         {"allow": 1, "would_block": 1, "block": 2}[r["decision"]]),
        ("disposition", r["decision"] != "would_block" or e.get("disposition_id") == 15),
    ]
    if want == 4002:
        checks.append(("http_response.code", isinstance(e["http_response"].get("code"), int)))
    if want == 1007:
        checks.append(("device.type_id", "type_id" in e["device"]))
    for name, good in checks:
        if not good:
            bad.append("%s %s: %s" % (uid, r["type"], name))
ok(not bad, "each receipt: its class, category, type_uid, required attributes, seq, "
   "line SHA-256 (= the next prev), policy digest, time, action")
for b in bad[:20]:
    diag(b)

findings = [e for e in events if e["class_uid"] == 2004]
is_(len(findings), blocks, "a Detection Finding for each block and would_block")
order_ok = True
for k, e in enumerate(events):
    if e["class_uid"] == 2004:
        prev_ev = events[k - 1]
        rel = e["finding_info"]["related_events"][0]
        if not (rel["uid"] == prev_ev["metadata"]["uid"] and
                rel["type_uid"] == prev_ev["type_uid"] and
                e["finding_info"].get("uid") and e["finding_info"].get("title") and
                e["type_uid"] == 200401 and e.get("action_id") in (1, 2) and
                e["unmapped"]["airlock"]["line_sha256"] ==
                prev_ev["unmapped"]["airlock"]["line_sha256"]):
            order_ok = False
            diag("finding %s" % e["metadata"]["uid"])
ok(order_ok, "each finding follows its activity event and names it (related_events, line SHA-256)")
allowed = [r for r in recs if r["decision"] in ("allow", "info")]
ok(not any(by_uid.get("%s:%d:finding" % (r["session"], r["seq"])) for r in allowed),
   "no finding for an allow or info receipt")

e = by_uid["sess-shadow-1:7"]
is_((e["activity_id"], e["dst_endpoint"].get("hostname"), e["dst_endpoint"].get("port"),
     e["action_id"], e["status_id"]),
    (1, "registry.npmjs.org", 443, 1, 1),
    "egress.block would_block: Network Activity Open, the destination, action Allowed (it went ahead)")
e = by_uid["sess-enforce-2:2"]
is_((e["activity_id"], e["action_id"], e["disposition_id"], e["status_id"], e["severity_id"]),
    (5, 2, 2, 2, 3), "egress.block block: Refuse, Denied, Blocked, Failure, Medium")
f = by_uid["sess-enforce-2:2:finding"]
is_((f["finding_info"]["analytic"]["uid"], f["severity_id"]), ("egress.default", 3),
    "its finding names the rule and the same severity")
e = by_uid["sess-shadow-1:5"]
is_((e["class_uid"], e["activity_id"], e["http_request"]["http_method"],
     e["http_request"]["url"]["path"], e["http_response"]["code"], e["traffic"]["bytes_in"]),
    (4002, 6, "POST", "/v1/messages", 200, 5120), "http.request: HTTP Activity Post, path, status, bytes")
e = by_uid["sess-shadow-1:11"]
is_((e["class_uid"], e["severity_id"], by_uid["sess-shadow-1:11:finding"]["severity_id"]),
    (4002, 3, 3), "secret.block would_block: HTTP Activity, graded High less one")
e = by_uid["sess-shadow-1:18"]
is_((e["http_response"]["code"], e["status_id"]), (429, 2), "budget.block: answered 429, Failure")
e = by_uid["sess-shadow-1:20"]
is_((e["class_uid"], e["query"]["hostname"], e["rcode_id"]), (4003, "telemetry.example.com", 3),
    "dns.block: DNS Activity with the name and NXDomain")
e = by_uid["sess-enforce-2:5"]
is_((e["class_uid"], e["activity_id"], e["exit_code"], e["status_id"], e["process"]["name"]),
    (1007, 2, 1, 2, "codex"), "session.end: Process Activity Terminate, exit code, argv0 of its session")
e = by_uid["sess-shadow-1:0"]
is_((e["activity_id"], e["process"]["name"], e["status_id"]), (1, "claude", 1),
    "session.start: Process Activity Launch")
e = by_uid["sess-shadow-1:22"]
is_((e["class_uid"], e["unmapped"]["airlock"]["type"]), (0, "vendor.future"),
    "a type this version does not know: a Base Event, nothing dropped")

# --- output and input forms -------------------------------------------------------------
dest = os.path.join(T, "out.ocsf.jsonl")
st, out2, err = run(AIRLOCK, "export", "--format", "ocsf", "-o", dest, ev)
is_((st, out2), (0, b""), "-o FILE: exit 0, nothing on stdout")
ok(open(dest, "rb").read() == out, "FILE holds the same events as standard output")
is_(stat.S_IMODE(os.stat(dest).st_mode), 0o600, "FILE is mode 0600")
ok(not [n for n in os.listdir(T) if ".tmp." in n], "no temporary file is left")


def without_file(text):
    """The events with the file name (which differs for stdin) left out."""
    evs = [json.loads(l) for l in text.decode().splitlines()]
    for e in evs:
        e["metadata"].pop("log_name")
        e["unmapped"]["airlock"].pop("source")
    return evs


with open(ev, "rb") as f:
    st, out3, err = run(AIRLOCK, "export", "--format", "ocsf", "-", stdin=f.read())
ok(st == 0 and without_file(out3) == without_file(out), "- reads standard input")
st, out4, err = run(AIRLOCK, "export", "--format", "ocsf", "--pubkey", os.path.join(T, "k.pub"), ev)
ok(st == 0 and out4 == out, "--pubkey with the signer's key: the same export")
other = mkstream(os.path.join(HELPERS, "all-types.json"), os.path.join(T, "other.jsonl"),
                 "--pub-out", os.path.join(T, "other.pub"))
st, out5, err = run(AIRLOCK, "export", "--format", "ocsf", "--pubkey", os.path.join(T, "other.pub"), ev)
is_((st, out5), (1, b""), "--pubkey with another key: refused, nothing written")
st, out6, err = run(AIRLOCK, "export", "--format", "ocsf", ev, other)
two = [json.loads(l) for l in out6.decode().splitlines()]
is_((st, len(two)), (0, 2 * len(events)), "two files: the events of both")
is_(sorted({e["metadata"]["log_name"] for e in two}), sorted([ev, other]),
    "each event names its file (metadata.log_name)")

# --- a stream that does not verify ------------------------------------------------------
tampered = os.path.join(T, "tampered.jsonl")
bad_raw = list(raw)
bad_raw[7] = bad_raw[7].replace(b"registry.npmjs.org", b"registry.npmjs.org.evil.example")
open(tampered, "wb").write(b"".join(l + b"\n" for l in bad_raw))
dest2 = os.path.join(T, "refused.ocsf.jsonl")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", tampered)
is_((st, out), (1, b""), "a tampered stream: exit 1, nothing written")
like(err.decode(), r"tampered\.jsonl:8: bad signature", "the message names the line and why")
like(err.decode(), r"--unverified", "and the option that exports it anyway")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", "-o", dest2, tampered)
ok(st == 1 and not os.path.exists(dest2), "with -o FILE: no FILE is created")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", "--unverified", tampered)
ev_u = [json.loads(l) for l in out.decode().splitlines()]
ver = {e["unmapped"]["airlock"]["source"]["line"]: e["unmapped"]["airlock"]["verified"] for e in ev_u}
is_((st, ver[7], ver[8], ver[9]), (0, True, False, False),
    "--unverified: exported, lines before the bad one verified, it and later ones not")
truncated = os.path.join(T, "truncated.jsonl")
open(truncated, "wb").write(b"".join(l + b"\n" for l in raw[:10]))
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", truncated)
is_((st, out), (1, b""), "a truncated stream (no session.end): refused")
like(err.decode(), r"truncated\.jsonl:10:", "at its last line")

# --- the check without airlock that docs/AUDIT.md gives ----------------------------------
doc = open(os.path.join(SRC, "docs", "AUDIT.md")).read()
script = doc.split("<!-- verify.sh -->\n```sh\n", 1)[1].split("\n```\n", 1)[0]
vsh = os.path.join(T, "verify.sh")
open(vsh, "w").write(script + "\n")
one = os.path.join(T, "one.jsonl")
open(one, "wb").write(b"".join(l + b"\n" for l in raw[:24]))
st, out, err = run("sh", vsh, one, cwd=T)
is_((st, out.decode()), (0, "ok: 24 lines\n"), "docs/AUDIT.md's verify.sh (coreutils, xxd, openssl): a session verifies")
bad_one = os.path.join(T, "bad-one.jsonl")
open(bad_one, "wb").write(b"".join(l + b"\n" for l in bad_raw[:24]))
st, out, err = run("sh", vsh, bad_one, cwd=T)
is_((st, out.decode()), (1, "line 8: bad signature\n"), "and finds the tampered line")
st, out, err = run("sh", vsh, truncated, cwd=T)
is_((st, out.decode()), (1, "truncated: no session.end\n"), "and a truncated session")

# --- a stream airlock itself wrote --------------------------------------------------------
real = os.path.join(T, "real.jsonl")
ws = os.path.join(T, "ws")
os.mkdir(ws)
env = dict(os.environ, AIRLOCK_LEARN_DEMO="1", PATH=os.environ.get("PATH", "/usr/bin:/bin"))
st, out, err = run(AIRLOCK, "run", "--mode", "shadow", "--workspace", ws, "--events", real,
                   "--", "sh", "-c", "exit 3", env=env)
is_(st, 3, "airlock run (shadow) writes a stream")
st, out, err = run(AIRLOCK, "export", "--format", "ocsf", real)
rev = [json.loads(l) for l in out.decode().splitlines()]
drops = [e for e in rev if e["unmapped"]["airlock"]["type"] == "env.drop" and e["class_uid"] != 2004]
end = [e for e in rev if e["metadata"]["event_code"] == "session.end"]
ok(st == 0 and drops and all(e["class_uid"] == 0 for e in drops) and
   any(e["unmapped"]["airlock"]["subject"].get("name") == "AIRLOCK_LEARN_DEMO" for e in drops),
   "its env.drop receipts export, naming the variable")
is_([(e["class_uid"], e["exit_code"], e["process"]["name"]) for e in end], [(1007, 3, "sh")],
    "its session.end: Process Activity with exit code 3 and the command")
done_testing()
