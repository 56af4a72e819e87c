#!/bin/sh
# The live feed (docs/RECEIPTS.md "Live feed"): --events otlp+http://...
# given besides the stream's --events sends each receipt to an OTLP/HTTP
# collector as JSON log records whose bodies are the OCSF events of
# `airlock export` for the line, with its seq and SHA-256 as attributes.
# The collector here is a stand-in (Python http.server on 127.0.0.1) that
# records what it is sent. Killed mid-session and restarted, the local
# stream stays whole, the feed resumes, and what it lost is a receipt.gap
# line; a collector that never answers slows nothing; a malformed URL is
# a clear error.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

PX=18480
CP=18481
FEED="otlp+http://127.0.0.1:$CP/v1/logs"

cat >collector.py <<'PY'
import http.server, json, socket, sys, time
port, out, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if mode == "hang":
    # accepts connections (the kernel does) and never answers
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(64)
    print("listening", file=sys.stderr, flush=True)
    time.sleep(600); sys.exit(0)
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "ab") as f:
            f.write(json.dumps({"path": self.path, "type": self.headers.get("Content-Type"),
                                "body": json.loads(body)}).encode() + b"\n")
        self.send_response(200)
        self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer): allow_reuse_address = True
srv = S(("127.0.0.1", port), H)
print("listening", file=sys.stderr, flush=True)
srv.serve_forever()
PY

# records.py REC: the records a collector got, one per line: seq, sha256,
# type, class_uid, then the body
cat >records.py <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    assert r["path"] == "/v1/logs" and r["type"] == "application/json", r
    for rl in r["body"]["resourceLogs"]:
        res = {a["key"]: a["value"] for a in rl["resource"]["attributes"]}
        assert res["service.name"] == {"stringValue": "airlock"}, res
        for sl in rl["scopeLogs"]:
            for lr in sl["logRecords"]:
                a = {x["key"]: x["value"] for x in lr["attributes"]}
                print(json.dumps([int(a["airlock.seq"]["intValue"]),
                                  a["airlock.line_sha256"]["stringValue"],
                                  a["airlock.type"]["stringValue"],
                                  int(a["ocsf.class_uid"]["intValue"]),
                                  json.loads(lr["body"]["stringValue"])]))
PY

start_collector() { # MODE REC
	: >coll.err
	python3 collector.py "$CP" "$2" "$1" 2>coll.err &
	cpid=$!
	wait_grep coll.err "listening" 20
}
stop_collector() { kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null; }
start_proxy() { # EVENTS [ARGS]
	ev=$1
	shift
	: >px.err
	"$AIRLOCK" proxy --policy policy.json --listen "127.0.0.1:$PX" --events "$T/$ev" \
		"$@" 2>px.err &
	px=$!
	wait_grep px.err "listening on" 20
}
stop_proxy() { kill "$px"; wait "$px"; }
# blocks N: N requests the policy refuses (one egress.block line each)
blocks() {
	i=0
	while [ "$i" -lt "$1" ]; do
		curl -s -o /dev/null -x "http://127.0.0.1:$PX" "http://b$i.blocked.invalid/" || return 1
		i=$((i + 1))
	done
}
# wait_records REC SEQ: until the collector has a record of SEQ (20 s)
wait_records() {
	n=0
	while [ "$n" -lt 200 ]; do
		[ -s "$1" ] && python3 records.py "$1" 2>/dev/null | grep -q "^\[$2," && return 0
		sleep 0.1
		n=$((n + 1))
	done
	return 1
}
last_seq() { tail -n 1 "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }

echo '{"version": 1, "mode": "enforce", "egress": {"allow": ["allowed.invalid"]}}' >policy.json

# --- malformed feeds are clear errors ---
for bad in "otlp+http://" "otlp+http://127.0.0.1:99999/v1/logs" "otlp+https://127.0.0.1/v1/logs" \
	"otlp+http://127.0.0.1:4318/v1/logs?x=1" "otlp+ftp://h/"; do
	"$AIRLOCK" run --events "$T/bad.jsonl" --events "$bad" -- true 2>err
	is "$?" 125 "run --events $bad: exit 125"
	like "$(cat err)" "--events otlp" "and the error names the feed"
done
[ ! -e bad.jsonl ]
ok $? "nothing was recorded for the malformed feeds"
"$AIRLOCK" run --events "$FEED" -- true 2>err
is "$?" 125 "a feed without a local stream is refused"
like "$(cat err)" "needs the local stream too" "and says the stream is needed"
"$AIRLOCK" proxy --policy policy.json --listen "127.0.0.1:$PX" --events "$FEED" 2>err
is "$?" 125 "airlock proxy: the same"
"$AIRLOCK" run --events "$T/x.jsonl" --feed-queue 10 -- true 2>err
is "$?" 125 "--feed-queue without a feed is refused"
"$AIRLOCK" run --events "$T/x.jsonl" --events "$FEED" --feed-queue 0 -- true 2>err
is "$?" 125 "--feed-queue 0 is refused"

# --- a session's receipts reach the collector as the OCSF events of export ---
start_collector ok rec1.jsonl
ok $? "the collector stand-in listens"
start_proxy s1.jsonl --events "$FEED"
ok $? "airlock proxy runs with a feed"
blocks 5
ok $? "five refused requests"
stop_proxy
"$AIRLOCK" verify s1.jsonl >/dev/null
ok $? "the local stream verifies"
wait_records rec1.jsonl "$(last_seq s1.jsonl)"
ok $? "the collector got session.end"
stop_collector
"$AIRLOCK" export --format ocsf "$T/s1.jsonl" >export1.jsonl
ok $? "airlock export of the same stream"
python3 records.py rec1.jsonl >recs1.jsonl
python3 - s1.jsonl export1.jsonl recs1.jsonl <<'PY'
import hashlib, json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
exp = [json.loads(l) for l in open(sys.argv[2])]
recs = [json.loads(l) for l in open(sys.argv[3])]
def norm(e):
    e = json.loads(json.dumps(e))
    u = e["unmapped"]["airlock"]
    del u["source"]["line"]           # the feed has no line number
    del u["verified"]                 # and does not verify a line alone
    return e
want = [(e["metadata"]["sequence"], norm(e)) for e in exp]
got = []
for seq, sha, typ, cls, body in recs:
    line = lines[seq]
    assert sha == hashlib.sha256(line).hexdigest(), (seq, sha)
    assert typ == json.loads(line)["type"] and cls == body["class_uid"], (seq, typ, cls)
    assert "line" not in body["unmapped"]["airlock"]["source"]
    e = json.loads(json.dumps(body))
    e["unmapped"]["airlock"]["source"]["line"] = 0
    got.append((seq, norm(e)))
assert sorted(s for s, _ in got) == sorted(s for s, _ in want), "not the same events"
assert sorted(json.dumps(x, sort_keys=True) for x in got) == \
       sorted(json.dumps(x, sort_keys=True) for x in want), "bodies differ from export"
assert {s for s, _ in got} == set(range(len(lines))), "a line is missing"
PY
ok $? "one record per OCSF event of export, same bodies, seq and SHA-256 of each line"
grep -q '"egress.block"' s1.jsonl && grep -q "Detection Finding" recs1.jsonl
ok $? "a block gives its activity and its Detection Finding"

# --- the collector killed mid-session and restarted ---
start_collector ok rec2.jsonl
start_proxy s2.jsonl --events "$FEED" --feed-queue 4
ok $? "a feed with a queue of 4 lines"
blocks 3
wait_records rec2.jsonl "$(last_seq s2.jsonl)"
ok $? "the feed delivers while the collector is up"
stop_collector
blocks 30
ok $? "requests are answered while the collector is down"
start_collector ok rec2.jsonl
ok $? "the collector restarts"
wait_grep s2.jsonl '"type":"receipt.gap"' 20
ok $? "the lost range is recorded as a receipt.gap line"
blocks 3
before_end=$(last_seq s2.jsonl)
wait_records rec2.jsonl "$before_end"
ok $? "the feed resumes after the restart"
stop_proxy
"$AIRLOCK" verify s2.jsonl >/dev/null
ok $? "the local stream verifies (it is whole)"
wait_records rec2.jsonl "$(last_seq s2.jsonl)"
ok $? "and the feed delivers up to session.end"
stop_collector
python3 records.py rec2.jsonl >recs2.jsonl
python3 - s2.jsonl recs2.jsonl <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
assert [l["seq"] for l in L] == list(range(len(L))), "the local stream has every seq"
assert sum(1 for l in L if l["type"] == "egress.block") == 36, "every block is local"
got = {r[0] for r in map(json.loads, open(sys.argv[2]))}
gaps = [l for l in L if l["type"] == "receipt.gap"]
lost = set()
for g in gaps:
    s = g["subject"]
    assert g["decision"] == "info" and g["rule"] == "feed" and s["lines"] == s["to"] - s["from"] + 1, g
    assert "queue" in s["why"], s
    assert s["to"] < g["seq"], "a gap names lines before it"
    lost |= set(range(s["from"], s["to"] + 1))
assert lost, "something was lost"
assert not (lost & got), "a line named lost was delivered"
assert got | lost == set(range(len(L))), ("every line delivered or named lost",
                                          sorted(set(range(len(L))) - got - lost))
assert max(got) == len(L) - 1 and any(s > max(lost) for s in got), "the feed resumed"
PY
ok $? "every seq is delivered or named in a receipt.gap, never both; the feed resumed"

# --- a collector that accepts and never answers slows nothing ---
start_collector hang rec3.jsonl
ok $? "a collector that never answers"
start_proxy s3.jsonl --events "$FEED" --feed-queue 2
blocks 40
ok $? "every request is answered"
stop_proxy
is "$?" 0 "the proxy stops normally"
"$AIRLOCK" verify s3.jsonl >/dev/null
ok $? "the local stream verifies"
is "$(grep -c '"type":"egress.block"' s3.jsonl)" 40 "all 40 blocks are in the local stream"
mkdir ws
"$AIRLOCK" run --mode shadow --events "$T/s4.jsonl" --events "$FEED" --workspace "$T/ws" \
	-- true 2>run.err
is "$?" 0 "airlock run with that feed finishes"
"$AIRLOCK" verify s4.jsonl >/dev/null
ok $? "and its stream verifies"
stop_collector

done_testing
