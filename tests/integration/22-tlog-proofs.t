#!/bin/sh
# Inclusion proofs (docs/RECEIPTS.md, "Inclusion proofs"): `airlock verify
# --line` and `--proof`, tampered proofs refused, proofs for every line of
# a 100,000-line stream, and the independent Python checker of
# docs/RECEIPTS.md (hashlib and cryptography only), extracted from the
# document and run on the same proofs and on a witness's cosignature.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the built test helpers}"
TOOL=$AIRLOCK_HELPERS/tlog_tool

# the script, as docs/RECEIPTS.md shows it
sed -n '/^<!-- check_proof.py -->$/,/^```$/p' "$AIRLOCK_SRC/docs/RECEIPTS.md" |
	sed '1,2d;$d' >check_proof.py
like "$(head -n 1 check_proof.py)" '^#!/usr/bin/env python3$' \
	"the checker is extracted from docs/RECEIPTS.md"

"$AIRLOCK" keygen --out k.pem >k.pub 2>/dev/null
"$AIRLOCK" keygen --out other.pem >other.pub 2>/dev/null
"$TOOL" stream checkpoint s-p 50 s.jsonl k.pem
ok $? "a checkpoint-mode stream"
"$TOOL" stream checkpoint s-q 50 q.jsonl k.pem
"$TOOL" stream line s-l 20 l.jsonl k.pem
pub=$(head -n 1 s.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["subject"]["pubkey"])')

"$AIRLOCK" verify --line 9 s.jsonl >p9.json
is "$?" 0 "--line 9 prints a proof"
python3 - p9.json s.jsonl <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
L = open(sys.argv[2], "rb").read().split(b"\n")
assert list(p) == ["v", "pubkey", "index", "line", "checkpoint", "path"], list(p)
assert p["index"] == 9 and p["line"].encode() == L[9]
last = [d for d in map(json.loads, filter(None, L)) if d["type"] == "receipt.checkpoint"][-1]
assert p["checkpoint"] == last["subject"]["note"], "against the last checkpoint"
assert len(p["path"]) >= 5
PY
ok $? "the proof names the line, the last checkpoint and a path"
out=$("$AIRLOCK" verify --proof p9.json)
is "$?" 0 "--proof checks it"
like "$out" "^ok: line 9 of session s-p is in its checkpoint of [0-9]+ lines$" "and says what it proved"
"$AIRLOCK" verify --pubkey k.pub --proof p9.json >/dev/null
is "$?" 0 "--proof with the pinned key"
out=$("$AIRLOCK" verify --pubkey other.pub --proof p9.json)
is "$?" 1 "--proof with another pinned key fails"
like "$out" "^p9.json:1: pubkey is not the --pubkey key" "and says so"
out=$(python3 check_proof.py p9.json --pubkey "$pub")
is "$?" 0 "the independent checker accepts it"

# forged proofs
forge() {
	python3 -c '
import base64, json, sys
p = json.load(open(sys.argv[1]))
exec(sys.argv[3])
open(sys.argv[2], "w").write(json.dumps(p) + "\n")
' p9.json "$1" "$2"
}
refused() {
	out=$("$AIRLOCK" verify --proof "$1")
	is "$?" 1 "$3: refused"
	like "$out" "^$1:1: $2" "$3: says why"
	python3 check_proof.py "$1" >/dev/null
	is "$?" 1 "$3: the independent checker refuses it too"
}
forge f1 'p["line"] = p["line"].replace("allowed", "alowed")'
refused f1 "the path does not lead from the line" "an altered line"
forge f2 'p["path"][2] = base64.b64encode(b"\0" * 32).decode()'
refused f2 "the path does not lead from the line" "an altered path"
forge f3 'p["path"].pop()'
refused f3 "the path does not lead from the line" "a shortened path"
forge f4 'p["checkpoint"] = p["checkpoint"].replace("\n50\n", "\n49\n", 1) if "\n50\n" in p["checkpoint"] else p["checkpoint"].replace("\n4", "\n3", 1)'
refused f4 "the checkpoint is not signed by the key the proof names" "a checkpoint of another size"
forge f5 'p["pubkey"] = base64.b64encode(b"\1" * 32).decode()'
refused f5 "the checkpoint is not signed by the key the proof names" "another public key"
forge f6 'p["line"] = p["line"].replace("\"seq\":9,", "\"seq\":8,"); p["index"] = 8'
refused f6 "the path does not lead" "another index"
"$AIRLOCK" verify --line 9 q.jsonl >q9.json
forge f7 'p["checkpoint"] = json.load(open("q9.json"))["checkpoint"]'
refused f7 "the line's session is not the checkpoint's origin" "another session's checkpoint"

out=$("$AIRLOCK" verify --line 49 s.jsonl)
is "$?" 1 "no proof for session.end (it is signed itself)"
like "$out" "^s.jsonl: line seq 49 is not in the last checkpoint" "and it says so"
out=$("$AIRLOCK" verify --line 3 l.jsonl)
is "$?" 1 "no proof in a line-mode stream"
like "$out" "no receipt.checkpoint" "and it says so"
tamper=$(sed '5s/allowed/alowed/' s.jsonl)
printf '%s\n' "$tamper" >bad.jsonl
out=$("$AIRLOCK" verify --line 9 bad.jsonl)
is "$?" 1 "no proof from a stream that does not verify"
like "$out" "the stream does not verify" "and it says so"
"$AIRLOCK" verify --line x s.jsonl >/dev/null 2>&1
is "$?" 2 "--line needs a number"

# a witness's cosignature (C2SP tlog-cosignature), made by airlock's
# tlog.c, checked by the independent script
python3 -c 'import json,sys; sys.stdout.write(json.load(open("p9.json"))["checkpoint"])' >note
"$TOOL" cosign other.pem witness.example/w1 1700000000 <note >cosigned
ok $? "a checkpoint cosigned"
wpub=$(openssl pkey -in other.pem -pubout -outform DER 2>/dev/null | tail -c 32 | base64)
forge c1 'p["checkpoint"] = open("cosigned").read()'
python3 check_proof.py c1 --pubkey "$pub" --witness "witness.example/w1=$wpub" >/dev/null
is "$?" 0 "the independent checker verifies the cosignature"
python3 check_proof.py p9.json --witness "witness.example/w1=$wpub" >/dev/null
is "$?" 1 "and refuses a checkpoint without it"
python3 check_proof.py c1 --witness "witness.example/w1=$pub" >/dev/null
is "$?" 1 "and a cosignature checked with another key"
"$AIRLOCK" verify --proof c1 >/dev/null
is "$?" 0 "a cosigned checkpoint's proof still verifies with airlock"

# every line of a 100,000-line stream
"$TOOL" stream checkpoint s-big 100000 big.jsonl
ok $? "a stream of 100,000 lines"
n=$(wc -l <big.jsonl)
ok "$([ "$n" -ge 100000 ]; echo $?)" "it has $n lines"
"$AIRLOCK" verify --line all big.jsonl >all.jsonl
is "$?" 0 "--line all (which verifies the stream first)"
is "$(wc -l <all.jsonl)" "$((n - 2))" "a proof for every line but the last checkpoint and session.end"
python3 - all.jsonl <<'PY'
import json, sys
seen = 0
for i, l in enumerate(open(sys.argv[1])):
    p = json.loads(l)
    assert p["index"] == i, (i, p["index"])
    seen += 1
assert seen > 0
PY
ok $? "one proof for each index, in order"
out=$("$AIRLOCK" verify --proof all.jsonl)
is "$?" 0 "airlock checks all of them"
like "$out" "^ok: $((n - 2)) proofs, each line is in its checkpoint$" "and counts them"
awk 'NR % 50 == 1' all.jsonl >sample.jsonl
out=$(python3 check_proof.py sample.jsonl)
is "$?" 0 "the independent checker agrees on every 50th ($out)"

done_testing
