#!/bin/sh
# airlock keygen and airlock verify (docs/RECEIPTS.md): keys, the events file
# mode, a clean verify, every kind of tampering failing with the line named,
# --json, and an independent check of the chain and signatures with
# sha256sum and openssl alone.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1

# tamper SRC DST CODE: runs python CODE on L, SRC's lines (bytes, without
# newlines), and writes L to DST. resign(i, key) re-signs line i with openssl
# and setprev(i) re-chains it, as a forger holding the key would.
tamper() {
	python3 -c '
import hashlib, subprocess, sys
src, dst, code = sys.argv[1:4]
L = open(src, "rb").read().split(b"\n")
if L and L[-1] == b"":
    L.pop()
def setprev(i):
    p = L[i].rindex(b"\"prev\":\"") + 8
    L[i] = L[i][:p] + hashlib.sha256(L[i - 1]).hexdigest().encode() + L[i][p + 64:]
def resign(i, key="k.pem"):
    cut = L[i].rindex(b",\"sig\":\"")
    body = L[i][:cut] + b"}"
    open("body.bin", "wb").write(body)
    subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", key, "-rawin",
                    "-in", "body.bin", "-out", "sig.bin"], check=True)
    sig = __import__("base64").b64encode(open("sig.bin", "rb").read())
    L[i] = L[i][:cut] + b",\"sig\":\"" + sig + b"\"}"
exec(code)
open(dst, "wb").write(b"".join(l + b"\n" for l in L))
' "$@"
}

# fails FILE LINE REASON-REGEX DESCRIPTION [VERIFY-OPTION...]
fails() {
	f=$1 line=$2 why=$3 desc=$4
	shift 4
	out=$("$AIRLOCK" verify "$@" "$f" 2>"$T/verify.err")
	is "$?" 1 "$desc: exit 1"
	like "$out" "^$f:$line: $why" "$desc: names line $line"
}

# --- keygen ---
"$AIRLOCK" keygen --out k.pem >k.pub
is "$?" 0 "keygen succeeds"
is "$(stat -c %a k.pem)" 600 "the private key is mode 0600"
is "$(head -n 1 k.pem)" "-----BEGIN PRIVATE KEY-----" "the private key is PKCS#8 PEM"
is "$(head -n 1 k.pub)" "-----BEGIN PUBLIC KEY-----" "the public key is printed as SPKI PEM"
like "$(openssl pkey -in k.pem -noout -text 2>&1)" "ED25519 Private-Key" \
	"openssl reads an Ed25519 key"
openssl pkey -in k.pem -pubout 2>/dev/null | cmp -s - k.pub
ok $? "the printed public key is the private key's (openssl)"
cp k.pem k.pem.orig
"$AIRLOCK" keygen --out k.pem >out 2>err
is "$?" 1 "keygen refuses to overwrite a key"
like "$(cat err)" "^airlock: keygen: k.pem: exists \(use --force to replace it\)$" \
	"and says how to replace it"
cmp -s k.pem k.pem.orig
ok $? "the key is unchanged"
is "$(cat out)" "" "and nothing is printed on stdout"
"$AIRLOCK" keygen --out other.pem >other.pub
cp other.pub other.pub.orig
"$AIRLOCK" keygen --out other.pem --force >other.pub
is "$?" 0 "keygen --force replaces a key"
cmp -s other.pub other.pub.orig
is "$?" 1 "with a new one"
is "$(stat -c %a other.pem)" 600 "mode 0600"
is "$(ls | grep -c '\.tmp\.')" 0 "no temporary file is left"
"$AIRLOCK" keygen >/dev/null 2>err
is "$?" 2 "keygen without --out is a usage error"
like "$(cat err)" "^airlock: keygen: " "with one line naming the command"
"$AIRLOCK" keygen --out x.pem extra >/dev/null 2>&1
is "$?" 2 "keygen with an extra argument is a usage error"
like "$("$AIRLOCK" keygen --help)" "^usage: airlock keygen --out FILE" "keygen --help"

# --- verify usage ---
like "$("$AIRLOCK" verify --help)" "^usage: airlock verify \[--pubkey FILE\]" "verify --help"
"$AIRLOCK" verify >/dev/null 2>err
is "$?" 2 "verify without EVENTS is a usage error"
like "$(cat err)" "^airlock: verify: " "with one line naming the command"
is "$(wc -l <err)" 1 "one line"
"$AIRLOCK" verify --bogus ev.jsonl >/dev/null 2>&1
is "$?" 2 "an unknown option is a usage error"
"$AIRLOCK" verify missing.jsonl >/dev/null 2>err
is "$?" 2 "an unreadable EVENTS gives 2"
like "$(cat err)" "^airlock: verify: missing.jsonl: No such file" "and says why"
"$AIRLOCK" verify --pubkey k.pem missing.jsonl >/dev/null 2>err
is "$?" 2 "a --pubkey that is not a public key gives 2"

# --- a real stream ---
"$AIRLOCK" run --mode off --events ev.jsonl --signing-key k.pem -- true
is "$?" 0 "run --mode off --events writes a stream"
is "$(stat -c %a ev.jsonl)" 600 "the events file is mode 0600"
is "$(wc -l <ev.jsonl)" 2 "session.start and session.end"
out=$("$AIRLOCK" verify --pubkey k.pub ev.jsonl)
is "$?" 0 "verify --pubkey accepts it"
like "$out" "^ok: 2 lines, 1 session, chain and signatures intact \(key: --pubkey k.pub\)" \
	"and says so"
like "$out" "session.start +1" "with the counts per type"
out=$("$AIRLOCK" verify ev.jsonl)
is "$?" 0 "verify without --pubkey accepts it"
like "$out" "key: from session.start" "naming where the key came from"
"$AIRLOCK" verify --pubkey k.pub - <ev.jsonl >/dev/null
is "$?" 0 "EVENTS - reads stdin"
"$AIRLOCK" verify --json --pubkey k.pub ev.jsonl | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d == {"ok": True, "lines": 2, "sessions": 1,
             "counts": {"session.end": 1, "session.start": 1}}, d'
ok $? "--json prints the summary as one JSON object"

for s in 0 3 7; do
	"$AIRLOCK" run --mode off --events multi.jsonl --signing-key k.pem -- sh -c "exit $s"
done
out=$("$AIRLOCK" verify --pubkey k.pub multi.jsonl)
is "$?" 0 "three sessions appended to one events file verify"
like "$out" "^ok: 6 lines, 3 sessions" "counted as three sessions"
like "$(tail -n 1 multi.jsonl)" '"subject":\{"exit":7,"counts":\{"session.end":1,"session.start":1\}\}' \
	"session.end records exit and counts"
head -c -1 multi.jsonl >nonl.jsonl
"$AIRLOCK" verify --pubkey k.pub nonl.jsonl >/dev/null
is "$?" 0 "a last line without its newline is accepted when intact"

# --- independent check: openssl and sha256sum only ---
n=0 bad=0 prevline=""
while IFS= read -r line; do
	n=$((n + 1))
	printf '%s' "$line" | sed 's/,"sig":"[^"]*"}$/}/' | tr -d '\n' >msg
	printf '%s' "$line" | sed 's/.*,"sig":"\([^"]*\)"}$/\1/' | base64 -d >sig.bin
	if ! openssl pkeyutl -verify -pubin -inkey k.pub -rawin -in msg \
		-sigfile sig.bin >/dev/null 2>&1; then
		echo "# line $n: openssl rejects the signature"
		bad=$((bad + 1))
	fi
	prev=$(printf '%s' "$line" | sed 's/.*"prev":"\([0-9a-f]*\)".*/\1/')
	case "$line" in
	*'"seq":0,'*) want=0000000000000000000000000000000000000000000000000000000000000000 ;;
	*) want=$(printf '%s' "$prevline" | sha256sum | cut -d ' ' -f 1) ;;
	esac
	if [ "$prev" != "$want" ]; then
		echo "# line $n: prev is not sha256sum of the line before"
		bad=$((bad + 1))
	fi
	prevline=$line
done <multi.jsonl
is "$n/$bad" "6/0" "openssl verifies every signature and sha256sum every prev"
printf '%s' "$(head -n 1 ev.jsonl)" | sed 's/,"sig":"[^"]*"}$/}/' | sed 's/"info"/"block"/' >msg
printf '%s' "$(head -n 1 ev.jsonl)" | sed 's/.*,"sig":"\([^"]*\)"}$/\1/' | base64 -d >sig.bin
openssl pkeyutl -verify -pubin -inkey k.pub -rawin -in msg -sigfile sig.bin >/dev/null 2>&1
is "$?" 1 "control: openssl rejects an altered line"

# --- tampering ---
tamper ev.jsonl t.jsonl 'L[1] = L[1].replace(b"\"decision\":\"info\"", b"\"decision\":\"block\"")'
fails t.jsonl 2 "bad signature" "info changed to block in line 2" --pubkey k.pub
tamper ev.jsonl t.jsonl 'L[1] = L[1].replace(b"\"exit\":0", b"\"exit\":1")'
fails t.jsonl 2 "bad signature" "exit status altered in line 2's subject" --pubkey k.pub
tamper ev.jsonl t.jsonl 'L[0] = L[0].replace(b"\"argv0\":\"true\"", b"\"argv0\":\"fals\"")'
fails t.jsonl 1 "bad signature" "argv0 altered in line 1" --pubkey k.pub
tamper ev.jsonl t.jsonl '
i = L[0].rindex(b"\"sig\":\"") + 7
L[0] = L[0][:i] + (b"B" if L[0][i:i + 1] == b"A" else b"A") + L[0][i + 1:]'
fails t.jsonl 1 "bad signature" "a signature character altered" --pubkey k.pub
tamper ev.jsonl t.jsonl 'L[0], L[1] = L[1], L[0]'
fails t.jsonl 1 "first line is not a session.start" "lines 1 and 2 swapped"
tamper multi.jsonl t.jsonl 'L[2], L[3] = L[3], L[2]'
fails t.jsonl 3 "line after session.end does not start a new stream" \
	"lines 3 and 4 swapped"
tamper ev.jsonl t.jsonl 'L.insert(1, L[0])'
fails t.jsonl 2 "session.start before the session.end" "a copy of line 1 inserted"
tamper ev.jsonl t.jsonl 'L.insert(1, L[1])'
fails t.jsonl 3 "line after session.end does not start" "a copy of line 2 inserted"
tamper ev.jsonl t.jsonl '
L.insert(1, L[1].replace(b"\"exit\":0", b"\"exit\":9"))
setprev(1)
resign(1, "other.pem")'
fails t.jsonl 2 "bad signature" "a line signed by another key inserted" --pubkey k.pub
tamper multi.jsonl t.jsonl 'del L[3]'
fails t.jsonl 4 "session.start before the session.end of the stream that began at line 3" \
	"line 4 removed"
tamper multi.jsonl t.jsonl 'del L[-1]'
fails t.jsonl 5 "the stream that began at line 5 ends without session.end \(truncated\)" \
	"the last line removed"
tamper ev.jsonl t.jsonl 'del L[0]'
fails t.jsonl 1 "first line is not a session.start" "the first line removed"
fails ev.jsonl 1 "session.start pubkey is not the --pubkey key" "the wrong --pubkey" \
	--pubkey other.pub
tamper ev.jsonl t.jsonl 'L[1] = L[1].replace(b"\"session.start\":1", b"\"session.start\":2"); resign(1)'
fails t.jsonl 2 "session.end counts 2 \"session.start\" lines, the stream has 1" \
	"session.end counts altered and re-signed with the real key" --pubkey k.pub
tamper ev.jsonl t.jsonl 'L[1] = L[1].replace(b"\"exit\":0", b"\"exit\":5"); resign(1)'
"$AIRLOCK" verify --pubkey k.pub t.jsonl >/dev/null
is "$?" 0 "control: the same re-signing without a counts change verifies"
tamper ev.jsonl t.jsonl 'L.insert(1, b"")'
fails t.jsonl 2 "empty line" "an empty line inserted"
: >empty.jsonl
fails empty.jsonl 1 "empty stream" "an empty file"
out=$("$AIRLOCK" verify --json --pubkey other.pub ev.jsonl)
is "$?" 1 "--json on a failure exits 1"
printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["ok"] is False and d["line"] == 1 and "--pubkey" in d["reason"], d'
ok $? "--json prints ok false, the line and the reason"

done_testing
