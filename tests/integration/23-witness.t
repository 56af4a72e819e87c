#!/bin/sh
# airlock witness (C2SP tlog-witness, docs/RECEIPTS.md "Witnesses"): it
# cosigns a receipt checkpoint only when a consistency proof shows the
# tree extends the last one it cosigned for that origin; a forked log is
# refused with 422, a wrong old size with 409 and the size it has, an
# unknown signer with 403, another origin with 404; its state survives a
# restart. The client here is Python (hashlib, cryptography), which
# computes trees and proofs from the RFC's definitions and acts as a key
# holder that forks its own stream.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the built test helpers}"

"$AIRLOCK" keygen --out k.pem >k.pub 2>/dev/null
"$AIRLOCK" keygen --out other.pem >other.pub 2>/dev/null
"$AIRLOCK" keygen --out w.pem >w.pub 2>/dev/null
"$AIRLOCK_HELPERS/tlog_tool" stream checkpoint s-w 300 w.jsonl k.pem
ok $? "a checkpoint-mode stream signed by k.pem"

start_witness() {
	"$AIRLOCK" witness --listen 127.0.0.1:18472 --key w.pem --name witness.test/w1 \
		--state "$T/state.json" --log-key k.pub 2>>witness.err &
	wpid=$!
	wait_grep witness.err "listening on 127.0.0.1:18472" 10
}
: >witness.err
start_witness
ok $? "the witness listens"

cat >client.py <<'PY'
import base64, hashlib, http.client, json, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

def H(b): return hashlib.sha256(b).digest()
def k_of(n):
    k = 1
    while k * 2 < n: k *= 2
    return k
def mth(D):
    if not D: return H(b"")
    if len(D) == 1: return H(b"\x00" + D[0])
    k = k_of(len(D)); return H(b"\x01" + mth(D[:k]) + mth(D[k:]))
def subproof(m, D, b):
    n = len(D)
    if m == n: return [] if b else [mth(D)]
    k = k_of(n)
    if m <= k: return subproof(m, D[:k], b) + [mth(D[k:])]
    return subproof(m - k, D[k:], False) + [mth(D[:k])]
def proof(m, D): return [] if m == 0 else subproof(m, D, True)
def key(path): return serialization.load_pem_private_key(open(path, "rb").read(), None)
def raw(k): return k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
def note(D, n, k=None, origin="airlock/s-w"):
    k = k or key("k.pem")
    body = "%s\n%d\n%s\n" % (origin, n, base64.b64encode(mth(D[:n])).decode())
    kid = H(origin.encode() + b"\n\x01" + raw(k))[:4]
    return body + "\n\u2014 %s %s\n" % (origin, base64.b64encode(kid + k.sign(body.encode())).decode())
def post(old, prf, nt, method="POST", path="/add-checkpoint"):
    body = ("old %d\n" % old + "".join(base64.b64encode(h).decode() + "\n" for h in prf) + "\n" + nt).encode()
    c = http.client.HTTPConnection("127.0.0.1", 18472, timeout=10)
    c.request(method, path, body=body)
    r = c.getresponse()
    return r.status, r.read().decode()
def cosig_ok(text, nt):
    # one line: "— witness.test/w1 BASE64(keyid || time || sig)"
    name, b64 = text.rstrip("\n")[2:].split(" ")
    blob = base64.b64decode(b64)
    wpub = raw(key("w.pem"))
    assert name == "witness.test/w1" and len(blob) == 76, text
    assert blob[:4] == H(b"witness.test/w1\n\x04" + wpub)[:4]
    t = int.from_bytes(blob[4:12], "big")
    body = nt.partition("\n\n")[0] + "\n"
    Ed25519PublicKey.from_public_bytes(wpub).verify(blob[12:], b"cosignature/v1\ntime %d\n" % t + body.encode())
    return True
L = open("w.jsonl", "rb").read().split(b"\n")[:-1]
F = list(L)
F[10] = F[10].replace(b"allowed", b"ALLOWED")   # the forked history
def expect(got, status, body=None):
    assert got[0] == status, got
    if body is not None: assert got[1] == body, got
step = sys.argv[1]
if step == "first":
    n = note(L, 50); got = post(0, [], n); expect(got, 200); cosig_ok(got[1], n)
elif step == "stale-old":
    expect(post(0, [], note(L, 100)), 409, "50\n")
elif step == "extend":
    n = note(L, 100); got = post(50, proof(50, L[:100]), n); expect(got, 200); cosig_ok(got[1], n)
elif step == "fork":
    expect(post(100, proof(100, F[:200]), note(F, 200)), 422)
elif step == "fork-real-proof":
    expect(post(100, proof(100, L[:200]), note(F, 200)), 422)
elif step == "shrink":
    expect(post(100, [], note(L, 60)), 400)
elif step == "same-size-other-root":
    expect(post(100, [], note(F, 100)), 422)
elif step == "other-key":
    expect(post(100, proof(100, L[:200]), note(L, 200, key("other.pem"))), 403)
elif step == "other-origin":
    expect(post(0, [], note(L, 5, None, "example.com/log")), 404)
elif step == "malformed":
    expect(post(0, [], "not a note"), 400)
    c = http.client.HTTPConnection("127.0.0.1", 18472, timeout=10)
    c.request("GET", "/add-checkpoint"); assert c.getresponse().status == 405
elif step == "extend-200":
    n = note(L, 200); got = post(100, proof(100, L[:200]), n); expect(got, 200); cosig_ok(got[1], n)
elif step == "after-restart":
    expect(post(0, [], note(L, 250)), 409, "200\n")
elif step == "airlock-note":
    # the stream's own last checkpoint, as the key holder wrote it
    cps = [json.loads(l) for l in L if json.loads(l)["type"] == "receipt.checkpoint"]
    last = cps[-1]["subject"]
    got = post(200, proof(200, L[:last["size"]]), last["note"]); expect(got, 200)
    cosig_ok(got[1], last["note"])
    print(last["size"])
PY

w() { python3 client.py "$1" >/dev/null 2>client.err; r=$?; [ $r -eq 0 ] || diag_file client.err; return $r; }
w first; ok $? "the first checkpoint of an origin (old 0) is cosigned (cosignature/v1 by the witness key)"
w stale-old; ok $? "a request with a stale old size gets 409 and the size the witness has"
w extend; ok $? "a checkpoint with a valid consistency proof is cosigned"
w fork; ok $? "a forked log (one line rewritten, proof from the fork) is refused with 422"
w fork-real-proof; ok $? "a forked root with the real tree's proof is refused with 422"
w same-size-other-root; ok $? "another root at the same size is refused with 422"
w shrink; ok $? "a smaller tree is refused"
w other-key; ok $? "a checkpoint signed by another key gets 403"
w other-origin; ok $? "an origin that is not airlock/SESSION gets 404"
w malformed; ok $? "malformed requests get 400, other methods 405"
w extend-200; ok $? "after the refusals the real log still extends (the state did not move)"
python3 -c 'import json; d = json.load(open("state.json")); assert d["airlock/s-w"]["size"] == 200, d'
ok $? "the state file holds the last cosigned size per origin"
kill "$wpid"; wait "$wpid"
start_witness
ok $? "the witness restarts"
w after-restart; ok $? "and remembers what it cosigned (409 with size 200)"
size=$(python3 client.py airlock-note 2>client.err)
ok $? "a receipt.checkpoint as the key holder wrote it is cosigned (size $size)"
kill "$wpid"; wait "$wpid"
is "$?" 0 "the witness stops on SIGTERM with 0"

# --- airlock run --witness, airlock verify --witness ---
: >witness.err
start_witness
ok $? "the witness runs again"
mkdir ws
echo '{"version": 1, "receipts": {"sign": "checkpoint"}}' >cp.json
echo '{"version": 1}' >line.json
for m in cp line; do
	"$AIRLOCK" run --policy $m.json --mode shadow --signing-key k.pem --session "run-$m" \
		--witness "http://127.0.0.1:18472=$T/w.pub" --events "$T/run-$m.jsonl" \
		--workspace "$T/ws" -- true 2>run.err
	is "$?" 0 "$m mode: a session with --witness"
	out=$("$AIRLOCK" verify --pubkey k.pub --witness w.pub run-$m.jsonl)
	is "$?" 0 "$m mode: verify --witness accepts its stream"
	like "$out" "witnessed: each session.end carries a cosignature by the key of w.pub" \
		"$m mode: and says so"
	python3 - run-$m.jsonl <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
assert L[-2]["type"] == "receipt.checkpoint" and L[-1]["subject"]["cosignatures"][0].startswith("\u2014 witness.test/w1 ")
PY
	ok $? "$m mode: session.end carries the cosignature of the checkpoint before it"
	out=$("$AIRLOCK" verify --witness other.pub run-$m.jsonl)
	is "$?" 1 "$m mode: verify --witness with another key fails"
	like "$out" "session.end has no cosignature by the --witness key" "$m mode: and says why"
done
# the same session again (a rewritten history): the witness refuses it
"$AIRLOCK" run --policy cp.json --mode shadow --signing-key k.pem --session run-cp \
	--witness "http://127.0.0.1:18472=$T/w.pub" --events "$T/again.jsonl" \
	--workspace "$T/ws" -- true 2>run.err
is "$?" 0 "a second stream of the same session still runs"
like "$(cat run.err)" "witness answered (409|422)" \
	"but the witness refuses to cosign it (409, or 422 for the proof from the size it has)"
out=$("$AIRLOCK" verify --witness w.pub again.jsonl)
is "$?" 1 "and verify --witness fails it"
"$AIRLOCK" verify again.jsonl >/dev/null
is "$?" 0 "while it verifies without --witness"
"$AIRLOCK" verify --witness w.pub "$T/w.jsonl" >/dev/null
is "$?" 1 "a stream without cosignatures fails verify --witness"
# --- cosigned as the session goes, not only at its end ---
# The agent waits for the witness to hold a mid-session checkpoint of its
# session (state.json), and for that cosignature to be in the stream (a
# receipt.cosignature line), before it exits: without cosigning as the
# session goes, that never happens and the agent gives up.
cat >ws/agent.sh <<'SH'
i=0
while [ $i -lt 300 ]; do
	[ -e live.go ] && exit 0
	sleep 0.1
	i=$((i + 1))
done
exit 3
SH
python3 - <<'PY' &
import json, os, time
for _ in range(300):
    try:
        if json.load(open("state.json")).get("airlock/run-live", {}).get("size", 0) > 0:
            open("live.size", "w").write(str(json.load(open("state.json"))["airlock/run-live"]["size"]))
            break
    except (OSError, ValueError):
        pass
    time.sleep(0.05)
for _ in range(300):
    try:
        if any(json.loads(l)["type"] == "receipt.cosignature" for l in open("live.jsonl")):
            open("live.cosig", "w").write("")
            break
    except (OSError, ValueError):
        pass
    time.sleep(0.05)
PY
watcher=$!
cat >live.json <<'JSON'
{"version": 1, "receipts": {"sign": "checkpoint", "checkpoint_ms": 100},
 "env": {"pass": ["PATH"]}}
JSON
"$AIRLOCK" run --policy live.json --mode shadow --signing-key k.pem --session run-live \
	--witness "http://127.0.0.1:18472=$T/w.pub" --events "$T/live.jsonl" \
	--workspace "$T/ws" -- sh agent.sh 2>run.err &
runpid=$!
wait "$watcher"
[ -s live.size ] && kill -0 "$runpid" 2>/dev/null
ok $? "the witness cosigned a checkpoint of the session while it ran"
[ -e live.cosig ] && kill -0 "$runpid" 2>/dev/null
ok $? "and its cosignature is in the stream while the session runs (receipt.cosignature)"
touch ws/live.go
wait "$runpid"
is "$?" 0 "the session ends normally"
"$AIRLOCK" verify --pubkey k.pub --witness w.pub live.jsonl >/dev/null
ok $? "verify --witness accepts its stream (the last checkpoint cosigned at the end)"
python3 - live.jsonl "$(cat live.size)" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
mid = int(sys.argv[2])
sizes = [l["subject"]["size"] for l in L if l["type"] == "receipt.checkpoint"]
assert mid in sizes, (mid, sizes)
assert json.load(open("state.json"))["airlock/run-live"]["size"] == sizes[-1] >= mid
assert L[-2]["type"] == "receipt.checkpoint" and L[-1]["subject"]["cosignatures"]
PY
ok $? "the mid-session cosignature was of a checkpoint of the stream; the witness holds the last"
python3 - live.jsonl <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
cps = {l["subject"]["size"]: i for i, l in enumerate(L) if l["type"] == "receipt.checkpoint"}
cs = [(i, l) for i, l in enumerate(L) if l["type"] == "receipt.cosignature"]
assert cs
for i, l in cs:
    s = l["subject"]
    assert s["witness"] == "witness.test/w1" and s["size"] in cps and cps[s["size"]] < i, l
    assert s["cosignatures"][0].startswith("\u2014 witness.test/w1 "), l
# the checkpoint the first one cosigns, for the forger below
open("live.note", "w").write(L[cps[cs[0][1]["subject"]["size"]]]["subject"]["note"])
open("live.at", "w").write(str(cs[0][0]))
PY
ok $? "each receipt.cosignature names the witness and cosigns a checkpoint before it"
# a cosignature by another key in its place: verify --witness checks each
"$AIRLOCK_HELPERS/tlog_tool" cosign other.pem witness.test/w1 1700000000 <live.note |
	tail -n 1 >other.cosig
python3 - live.jsonl "$(cat live.at)" <<'PY'
import json, sys
L = open(sys.argv[1], "rb").read().split(b"\n")
i = int(sys.argv[2])
d = json.loads(L[i])
old = json.dumps(d["subject"]["cosignatures"][0], ensure_ascii=False)[1:-1].encode()
new = json.dumps(open("other.cosig").read().rstrip("\n") + "\n", ensure_ascii=False)[1:-1].encode()
assert old in L[i]
L[i] = L[i].replace(old, new)
open("live-forged.jsonl", "wb").write(b"\n".join(L))
PY
out=$("$AIRLOCK" verify --witness w.pub live-forged.jsonl)
is "$?" 1 "a receipt.cosignature by another key fails verify --witness"
like "$out" "receipt.cosignature of size [0-9]+ is not a cosignature by the --witness key" \
	"and says which line and why"

kill "$wpid"; wait "$wpid"
"$AIRLOCK" run --policy cp.json --mode shadow --signing-key k.pem --session run-down \
	--witness "http://127.0.0.1:18472=$T/w.pub" --events "$T/down.jsonl" \
	--workspace "$T/ws" -- true 2>run.err
is "$?" 0 "with the witness down the session still ends normally"
like "$(cat run.err)" "--witness .*127.0.0.1" "with a warning naming the witness"
"$AIRLOCK" verify --witness w.pub down.jsonl >/dev/null
is "$?" 1 "and verify --witness reports the missing cosignature"
"$AIRLOCK" run --witness "http://127.0.0.1:18472=$T/nope.pub" -- true 2>run.err
is "$?" 125 "run --witness with an unreadable key file: 125"

"$AIRLOCK" witness --listen 127.0.0.1:18472 --key w.pem --name 'bad name' --state s \
	--log-key k.pub 2>err
is "$?" 2 "a key name with a space is refused"
"$AIRLOCK" witness --listen 127.0.0.1:18472 --key w.pem --name w --state s 2>err
is "$?" 2 "--log-key is required"
like "$(cat err)" "required" "and it says so"

done_testing
