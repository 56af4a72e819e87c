#!/bin/sh
# Receipts as a transparency log (docs/RECEIPTS.md, "Checkpoints"): streams
# in both signing modes (receipts.sign "line" and "checkpoint") against the
# attacks a forger can try: reorder, insert, drop, truncate, an unsigned
# tail, a checkpoint with a wrong root re-signed with the session key, two
# sessions spliced, an old checkpoint replayed. In checkpoint mode the
# unsigned lines can be re-chained by anyone; the next signature must catch
# it. Streams come from tests/helpers/tlog_tool (the writer the key holder
# uses) and a real session with receipts.sign "checkpoint".
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the built test helpers}"
TOOL=$AIRLOCK_HELPERS/tlog_tool

"$AIRLOCK" keygen --out k.pem >k.pub 2>/dev/null
ok $? "a signing key for the forger to hold too"

# tamper SRC DST CODE: python CODE on L (SRC's lines, bytes) -> DST.
# seq(i, n) renumbers, setprev(i) re-chains, resign(i) re-signs a signed
# line, unsign(i) drops a line's sig, renote(i, size=, root=, origin=)
# rewrites a checkpoint's note and signs it with k.pem, as a forger
# holding the session key would.
tamper() {
	python3 -c '
import base64, hashlib, json, re, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
src, dst, code = sys.argv[1:4]
L = open(src, "rb").read().split(b"\n")
if L and L[-1] == b"":
    L.pop()
key = serialization.load_pem_private_key(open("k.pem", "rb").read(), None)
pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
def seq(i, n):
    L[i] = re.sub(rb"^\{\"v\":1,\"seq\":\d+,", b"{\"v\":1,\"seq\":%d," % n, L[i])
def setprev(i):
    p = L[i].rindex(b"\"prev\":\"") + 8
    L[i] = L[i][:p] + hashlib.sha256(L[i - 1]).hexdigest().encode() + L[i][p + 64:]
def signed(i):
    return b",\"sig\":\"" in L[i]
def unsign(i):
    if signed(i):
        L[i] = L[i][:L[i].rindex(b",\"sig\":\"")] + b"}"
def resign(i):
    unsign(i)
    sig = base64.b64encode(key.sign(L[i]))
    L[i] = L[i][:-1] + b",\"sig\":\"" + sig + b"\"}"
def rechain(a, b, sign=False):
    # seq and prev of lines a..b-1 made right again, as anyone can; with
    # sign, signed ones re-signed too, as only the key holder can
    for i in range(a, b):
        seq(i, i)
        setprev(i)
        if sign and signed(i):
            resign(i)
def renote(i, size=None, root=None, origin=None):
    d = json.loads(L[i])
    o, s, r = d["subject"]["note"].split("\n")[:3]
    o = origin or o; s = str(size if size is not None else int(s)); r = root or r
    body = ("%s\n%s\n%s\n" % (o, s, r)).encode()
    kid = hashlib.sha256(o.encode() + b"\n\x01" + pub).digest()[:4]
    sig = base64.b64encode(kid + key.sign(body)).decode()
    d["subject"] = {"size": int(s), "root": r, "note": body.decode() + "\n\u2014 " + o + " " + sig + "\n"}
    L[i] = json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
def find(t, start=0):
    return next(i for i in range(start, len(L)) if b"\"type\":\"" + t.encode() + b"\"" in L[i])
exec(code)
open(dst, "wb").write(b"".join(l + b"\n" for l in L))
' "$@"
}

# fails FILE LINE REASON-REGEX DESCRIPTION
fails() {
	out=$("$AIRLOCK" verify "$1" 2>"$T/verify.err")
	is "$?" 1 "$4: exit 1"
	like "$out" "^$1:$2: $3" "$4: names line $2"
}

verifies() {
	out=$("$AIRLOCK" verify ${3:+--pubkey "$3"} "$1" 2>&1)
	is "$?" 0 "$2"
	[ "$?" -eq 0 ] || diag "$out"
}

# --- the streams ---
"$TOOL" stream checkpoint s-cp 60 cp.jsonl k.pem
ok $? "a checkpoint-mode stream of 60 lines"
"$TOOL" stream line s-ln 40 ln.jsonl k.pem
ok $? "a line-mode stream of 40 lines"
"$TOOL" stream checkpoint s-other 60 other.jsonl k.pem
ok $? "another session, same key"
verifies cp.jsonl "checkpoint mode verifies, key pinned" k.pub
verifies ln.jsonl "line mode verifies" k.pub
python3 - cp.jsonl ln.jsonl <<'PY'
import json, sys
cp = [json.loads(l) for l in open(sys.argv[1])]
ln = [json.loads(l) for l in open(sys.argv[2])]
un = [d for d in cp if "sig" not in d]
assert un and all(d["type"] not in ("session.end", "receipt.checkpoint") for d in un), "unsigned lines"
assert cp[-1]["type"] == "session.end" and "sig" in cp[-1], "session.end signed"
assert cp[-2]["type"] == "receipt.checkpoint", "a checkpoint just before session.end"
for i, d in enumerate(cp):
    if d["type"] == "egress.block":
        assert cp[i + 1]["type"] == "receipt.checkpoint", "a checkpoint right after each block"
        n = cp[i + 1]["subject"]
        assert n["size"] == i + 2 - 1 and n["note"].startswith("airlock/s-cp\n%d\n" % (i + 1)), n
assert all("sig" in d for d in ln) and not any(d["type"] == "receipt.checkpoint" for d in ln)
PY
ok $? "checkpoint mode: lines unsigned, a checkpoint after each block and before session.end; line mode unchanged"

# --- the same attacks on both modes ---
for m in cp ln; do
	f=$m.jsonl
	tamper $f a1 'L[3], L[4] = L[4], L[3]'
	fails a1 4 "seq 4, expected 3" "$m: two lines swapped"
	tamper $f a2 'L[3], L[4] = L[4], L[3]; rechain(3, len(L))'
	fails a2 '[0-9]*' "bad signature" "$m: two lines swapped, re-chained"
	tamper $f a3 'L.insert(5, L[4]); rechain(5, len(L))'
	fails a3 '[0-9]*' "bad signature" "$m: a line inserted, re-chained"
	tamper $f a4 'del L[5]; rechain(5, len(L))'
	fails a4 '[0-9]*' "bad signature" "$m: a line dropped, re-chained"
	tamper $f a5 'del L[5]'
	fails a5 6 "seq 6, expected 5" "$m: a line dropped"
	tamper $f a6 'del L[30:]'
	fails a6 30 "the stream that began at line 1 ends without session.end \(truncated\)" \
		"$m: truncated"
	tamper $f a7 'del L[-2:]'
	fails a7 '[0-9]*' "the stream that began at line 1 ends without session.end" \
		"$m: session.end (and the last checkpoint) cut off"
	tamper $f a11 'rechain(1, len(L), True)'
	verifies a11 "$m: re-chaining and re-signing an intact stream changes nothing (the tool is sound)" k.pub
	tamper $f a8 'unsign(len(L) - 1)'
	fails a8 '[0-9]*' "session.end without \"sig\"" "$m: session.end unsigned"
	tamper other.jsonl a9 "L[:] = L[:20] + open('$f', 'rb').read().split(b'\n')[20:-1]"
	fails a9 21 "(seq|prev|session differs)" "$m: two sessions spliced"
	tamper other.jsonl a10 "L[:] = L[:20] + open('$f', 'rb').read().split(b'\n')[20:-1]; rechain(20, len(L), True)"
	fails a10 21 "session differs" "$m: two sessions spliced, re-chained and re-signed"
done

# the last lines of a truncated checkpoint-mode stream are unsigned: said
tamper cp.jsonl t1 'del L[find("egress.block") + 3:]'
fails t1 '[0-9]*' ".*truncated\), and lines [0-9]*-[0-9]* are not covered by a signature" \
	"an unsigned tail is named"

# --- attacks on checkpoints ---
c=$(python3 -c 'import sys; print(next(i for i, l in enumerate(open(sys.argv[1])) if "receipt.checkpoint" in l))' cp.jsonl)
n=$((c + 1))
tamper cp.jsonl k1 "renote($c, root=base64.b64encode(b'x' * 32).decode()); resign($c); rechain($c + 1, len(L), True)"
fails k1 $n "receipt.checkpoint root is not the Merkle tree hash of the $c lines before it" \
	"a wrong root re-signed with the session key"
tamper cp.jsonl k2 "L[$c] = L[$c].replace(b'\"size\":$c', b'\"size\":3'); resign($c)"
fails k2 $n "receipt.checkpoint of $c lines at seq $c|receipt.checkpoint subject" \
	"the subject's size disagreeing with the note"
tamper cp.jsonl k3 "L.insert(len(L) - 2, L[$c]); rechain(len(L) - 3, len(L), True)"
fails k3 '[0-9]*' "receipt.checkpoint of $c lines at seq [0-9]* \(a replayed or moved checkpoint\)" \
	"an old checkpoint replayed later, re-chained and re-signed"
tamper cp.jsonl k4 "o = open('other.jsonl', 'rb').read().split(b'\n'); j = next(i for i, l in enumerate(o) if b'receipt.checkpoint' in l); L[j] = o[j].replace(b's-other', b's-cp', 1); rechain(j, len(L), True)"
fails k4 '[0-9]*' "receipt.checkpoint (origin is not airlock/s-cp|root is not)" \
	"another session's checkpoint spliced in, re-chained and re-signed"
tamper cp.jsonl k5 "renote($c, origin='airlock/s-other'); resign($c)"
fails k5 $n "receipt.checkpoint origin is not airlock/s-cp \(a checkpoint of another stream\)" \
	"a checkpoint naming another origin"
tamper cp.jsonl k6 "unsign($c)"
fails k6 $n "receipt.checkpoint without \"sig\"" "a checkpoint without its line signature"
tamper cp.jsonl k7 "L[$c] = L[$c].replace('\u2014 airlock/s-cp '.encode(), '\u2014 airlock/s-cp A'.encode()); resign($c)"
fails k7 $n "receipt.checkpoint note is not signed by the stream's key" "a checkpoint note with a broken signature"
"$AIRLOCK" keygen --out k2.pem >k2.pub 2>/dev/null
tamper cp.jsonl k8 "key = serialization.load_pem_private_key(open('k2.pem', 'rb').read(), None); renote($c); key = serialization.load_pem_private_key(open('k.pem', 'rb').read(), None); resign($c)"
fails k8 $n "receipt.checkpoint note is not signed by the stream's key" \
	"a checkpoint note signed by another key"

# --- a real session in checkpoint mode ---
mkdir ws
cat >cp-policy.json <<'JSON'
{"version": 1, "receipts": {"sign": "checkpoint", "checkpoint_ms": 100}}
JSON
"$AIRLOCK" run --policy cp-policy.json --mode shadow --events "$T/run.jsonl" \
	--workspace "$T/ws" -- sh -c 'sleep 0.5' >/dev/null 2>run.err
is "$?" 0 "a session with receipts.sign checkpoint runs"
verifies run.jsonl "and its stream verifies"
python3 - run.jsonl <<'PY'
import datetime, json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
t = lambda d: datetime.datetime.strptime(d["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
un = [i for i, d in enumerate(L) if "sig" not in d]
assert un, "unsigned lines"
cps = [i for i, d in enumerate(L) if d["type"] == "receipt.checkpoint"]
assert len(cps) >= 1 and L[-2]["type"] == "receipt.checkpoint"
first = cps[0]
# the first checkpoint follows the first unsigned line within checkpoint_ms
# (100 ms; 400 ms of slack for a loaded machine), not only at the end
assert (t(L[first]) - t(L[un[0]])).total_seconds() < 0.5, (L[un[0]]["ts"], L[first]["ts"])
# and it came from the timer, not from the session's end (0.5 s later)
assert (t(L[-1]) - t(L[first])).total_seconds() >= 0.3, (L[first]["ts"], L[-1]["ts"])
PY
ok $? "a checkpoint follows the unsigned lines within receipts.checkpoint_ms"

# --- the standalone proxy: a block is covered before the agent is answered ---
cat >px-policy.json <<'JSON'
{"version": 1, "mode": "enforce", "egress": {"allow": ["allowed.invalid"]},
 "receipts": {"sign": "checkpoint", "checkpoint_ms": 60000}}
JSON
"$AIRLOCK" proxy --policy px-policy.json --listen 127.0.0.1:18471 --events "$T/px.jsonl" \
	2>px.err &
px=$!
wait_grep px.err "listening on" 10
ok $? "airlock proxy runs with receipts.sign checkpoint"
hdr=$(curl -s -i -x http://127.0.0.1:18471 http://blocked.invalid/x | tr -d '\r' |
	sed -n 's/^X-Airlock-Receipt: //p')
cp px.jsonl px-at-answer.jsonl
kill "$px"
wait "$px"
python3 - px-at-answer.jsonl "$hdr" <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
seq = int(sys.argv[2])
assert L[seq]["type"] == "egress.block" and "sig" not in L[seq], L[seq]
c = L[seq + 1]
assert c["type"] == "receipt.checkpoint" and c["subject"]["size"] == seq + 1 and "sig" in c, c
PY
ok $? "the receipt the 403 names is in a checkpoint written before the answer"
verifies px.jsonl "the proxy's stream verifies"

done_testing
