#!/bin/sh
# Secrets of kind aws (SPEC §3.4, docs/SECRETS.md "AWS"): the agent holds
# placeholder credentials shaped like the real ones; the AWS CLI inside
# `airlock run --enforce` signs with them; the proxy verifies each request
# with the placeholder secret and re-signs it with the real one, against a
# stand-in S3 and STS (tests/helpers/aws_standin.py) that verifies SigV4
# with the REAL key and records what it got: `aws s3 cp` up and down, `aws
# sts get-caller-identity`, boto3 unmodified (put, get, STS), a signed
# aws-chunked upload (every chunk re-signed); refused with nothing
# forwarded: a request altered after signing, one signed with another
# secret, a tampered chunk, a presigned URL, the placeholder toward another
# host; the real values never inside (environment, files, answers: an
# answer that echoes them is scrubbed); shadow mode forwards what does not
# verify as it was sent, never re-signed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"

AWS=/usr/bin/aws
PY=/usr/bin/python3
if [ ! -x "$AWS" ] || [ ! -x "$PY" ]; then
	echo "1..0 # SKIP the AWS CLI (Debian awscli) is not installed"
	exit 0
fi

WS="$T/ws"
mkdir "$WS"
STANDIN=198.18.0.20
ip addr add "$STANDIN/32" dev lo || { echo "Bail out! ip addr add $STANDIN"; exit 1; }
AWS_NAMES="s3.amazonaws.com bkt.s3.amazonaws.com sts.amazonaws.com s3.us-east-1.amazonaws.com
bkt.s3.us-east-1.amazonaws.com sts.us-east-1.amazonaws.com"
PL_ZONE=$(printf '%s' "$PL_ZONE" | python3 -c '
import json, sys
z = json.load(sys.stdin)
for n in sys.argv[2].split():
    z[n] = [sys.argv[1]]
print(json.dumps(z))' "$STANDIN" "$AWS_NAMES")
PL_TLS_NAMES="$PL_TLS_NAMES $AWS_NAMES"
pl_start_net

# the real credentials (temporary: with a session token)
KEY_ID=ASIAREAL0KEY0ID12345
SECRET=$(python3 -c 'print("realSecret+Key/" + "x7Q" * 8 + "0")')
TOKEN=$(python3 -c 'print("FwoGZXIvYXdzEREAL" + "Tok3n+/" * 40 + "==")')
ST_LOG="$T/standin.log"
cat > "$T/standin.json" <<EOF
{"listen": "$STANDIN:443", "cert": "$T/tls/leaf.pem", "key": "$T/tls/leaf.key",
 "log": "$ST_LOG", "ready": "$T/standin.ready", "lifetime": 600,
 "access_key_id": "$KEY_ID", "secret_access_key": "$SECRET", "session_token": "$TOKEN"}
EOF
: > "$ST_LOG"
python3 "$AIRLOCK_SRC/tests/helpers/aws_standin.py" "$T/standin.json" > "$T/standin.out" 2>&1 &
PL_EXTRA_PIDS="$PL_EXTRA_PIDS $!"
i=0
while [ ! -f "$T/standin.ready" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -f "$T/standin.ready" ] || { echo "Bail out! aws_standin.py: $(cat "$T/standin.out")"; exit 1; }

cat > "$POLICY" <<EOF
{
  "version": 1,
  "mode": "enforce",
  "egress": {
    "allow": ["**.amazonaws.com", "api.airlock.test"],
    "allow_ranges": ["198.18.0.0/15"],
    "resolver": ["$PL_RESOLVER"],
    "upstream_ca": "$CA",
    "intercept": ["api.airlock.test"]
  },
  "secrets": {
    "aws": {
      "kind": "aws",
      "from_env": {"access_key_id": "AWS_ACCESS_KEY_ID",
                   "secret_access_key": "AWS_SECRET_ACCESS_KEY",
                   "session_token": "AWS_SESSION_TOKEN"}
    }
  }
}
EOF
"$AIRLOCK" check "$POLICY" > /dev/null
ok $? "the policy is valid (kind aws, hosts by default **.amazonaws.com)"
cp "$AIRLOCK_SRC/tests/helpers/awssig.py" "$AIRLOCK_SRC/tests/helpers/aws_client.py" "$WS/"

AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET AWS_SESSION_TOKEN=$TOKEN \
	timeout 300 "$AIRLOCK" run --mode enforce --policy "$POLICY" --workspace "$WS" \
	--events "$EV" -- sh -c '
cd "$0"
export HOME="$0" AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
	AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt AWS_PAGER= AWS=$1 PY=$2
env > env.txt
tr "\0" "\n" < /proc/self/environ > environ.txt
head -c 1048576 /dev/urandom > up.bin
$AWS s3 cp up.bin s3://bkt/up.bin > cp-up.out 2>&1; echo $? > cp-up.rc
$AWS s3 cp s3://bkt/up.bin down.bin > cp-down.out 2>&1; echo $? > cp-down.rc
$AWS sts get-caller-identity --output json > sts.out 2>&1; echo $? > sts.rc
$AWS s3 cp s3://bkt/echo echo.out > cp-echo.out 2>&1; echo $? > cp-echo.rc
$AWS s3 presign s3://bkt/up.bin > presign.url 2>&1
curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -D presign.h "$(cat presign.url)" \
	> presign.code 2>&1
$PY aws_client.py chunked bkt.s3.amazonaws.com /chunked.bin 200000 > chunked.out 2>&1
$PY aws_client.py chunk-tamper bkt.s3.amazonaws.com /chunk-tamper.bin 200000 > chunk-tamper.out 2>&1
$PY aws_client.py trailer bkt.s3.amazonaws.com /trailer.bin 200000 > trailer.out 2>&1
$PY aws_client.py trailer-tamper bkt.s3.amazonaws.com /trailer-tamper.bin 200000 > trailer-tamper.out 2>&1
$PY aws_client.py sigv4a bkt.s3.amazonaws.com /sigv4a.bin > sigv4a.out 2>&1
$PY aws_client.py sigv4a-tamper bkt.s3.amazonaws.com /sigv4a-tamper.bin > sigv4a-tamper.out 2>&1
$PY aws_client.py tamper bkt.s3.amazonaws.com /tamper.bin > tamper.out 2>&1
$PY aws_client.py wrong-secret bkt.s3.amazonaws.com /wrong.bin > wrong.out 2>&1
$AWS s3 ls s3://bkt/other/ --endpoint-url https://api.airlock.test > other.out 2>&1
echo $? > other.rc
$PY -c "import boto3
s3 = boto3.client(\"s3\")
s3.put_object(Bucket=\"bkt\", Key=\"boto.txt\", Body=b\"hello from boto3\")
print(s3.get_object(Bucket=\"bkt\", Key=\"boto.txt\")[\"Body\"].read().decode())
print(boto3.client(\"sts\").get_caller_identity()[\"Account\"])" > boto3.out 2>&1
exit 0
' "$WS" "$AWS" "$PY" > "$T/out" 2>&1 </dev/null
is $? 0 "airlock run --enforce: the script ran"

# the placeholders: shaped like the real values
PH_KEY=$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$WS/env.txt")
PH_SECRET=$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$WS/env.txt")
PH_TOKEN=$(sed -n 's/^AWS_SESSION_TOKEN=//p' "$WS/env.txt")
like "$PH_KEY" '^ASIA[0-9A-Z]{16}$' "the agent's key id is a placeholder: ASIA + 16, as the real one"
[ "$PH_KEY" != "$KEY_ID" ]
ok $? "... not the real key id"
is "${#PH_SECRET}" "${#SECRET}" "the placeholder secret is as long as the real one"
is "${#PH_TOKEN}" "${#TOKEN}" "the placeholder session token is as long as the real one"
for v in "$SECRET" "$TOKEN" "$KEY_ID"; do
	! grep -rqF -- "$v" "$WS"
	ok $? "a real value (${#v} characters) is in no file of the workspace: environment, answers, outputs"
done

# the AWS CLI, re-signed
is "$(cat "$WS/cp-up.rc")" 0 "aws s3 cp up: succeeds"
r=$(grep '"method": "PUT"' "$ST_LOG" | grep '"path": "/up.bin"' | tail -1)
is "$(jf "$r" verified) $(jf "$r" payload_len)" "true 1048576" \
	"the stand-in S3 verified the upload with the real key and got all 1 MiB"
is "$(cat "$WS/cp-down.rc")" 0 "aws s3 cp down: succeeds"
cmp -s "$WS/up.bin" "$WS/down.bin"
ok $? "... and the object came back byte for byte"
is "$(cat "$WS/sts.rc")" 0 "aws sts get-caller-identity: succeeds"
like "$(cat "$WS/sts.out")" 'arn:aws:iam::123456789012:user/standin' "... with the stand-in's answer"
r=$(grep '"host": "sts\.' "$ST_LOG" | tail -1)
is "$(jf "$r" verified) $(jf "$r" method)" "true POST" "the stand-in STS verified it (the body's hash signed)"
is "$(grep -c '"verified": false' "$ST_LOG")" 0 "no request the stand-ins got failed the real key's check"
! grep -qF -- "$PH_KEY" "$ST_LOG"
ok $? "no placeholder reached the stand-ins"
like "$(grep -F '"X-Amz-Security-Token"' "$ST_LOG" | head -1)" "$(printf '%s' "$TOKEN" | sed 's/[+/]/./g')" \
	"the stand-ins got the real session token"

if $PY -c 'import boto3' 2>/dev/null; then
	is "$(cat "$WS/boto3.out")" "$(printf 'hello from boto3\n123456789012')" \
		"boto3, unmodified: put_object, get_object, sts get_caller_identity"
	r=$(grep '"path": "/boto.txt"' "$ST_LOG" | grep PUT | tail -1)
	is "$(jf "$r" verified)" "true" "... the stand-in verified boto3's upload with the real key"
else
	for _ in 1 2; do
		tap_n=$((tap_n + 1))
		echo "ok $tap_n # SKIP boto3 (python3-boto3) is not installed"
	done
fi

# the streaming upload: every chunk verified and re-signed
like "$(head -1 "$WS/chunked.out")" '^200 -$' "a signed aws-chunked upload (64 KiB chunks): 200"
r=$(grep '"path": "/chunked.bin"' "$ST_LOG" | tail -1)
is "$(jf "$r" verified) $(jf "$r" payload_len)" "true 200000" \
	"the stand-in verified the seed and every chunk signature with the real key"
r=$(grep '"type":"secret.inject"' "$EV" | grep '/chunked.bin' | tail -1)
is "$(jf "$r" subject.resigned) $(jf "$r" subject.kind) $(jf "$r" subject.chunks)" "true aws 5" \
	"secret.inject: re-signed, kind aws, the chunks counted (4 and the final one)"

# refusals: 403 with the rule, secret.block saying why, nothing forwarded
refused() { # FILE PATH WHY DESC
	like "$(head -1 "$WS/$1")" '^403 secrets\.aws$' "$4: 403 naming secrets.aws"
	r=$(grep '"type":"secret.block"' "$EV" | grep "\"path\":\"$2\"" | tail -1)
	is "$(jf "$r" decision) $(jf "$r" subject.why)" "block $3" "$4: secret.block says why"
	is "$(grep -c "\"path\": \"$2\"" "$ST_LOG")" 0 "$4: the stand-in got nothing of it"
}
refused chunk-tamper.out /chunk-tamper.bin chunk "a data byte changed after the chunk was signed"

# signed trailers: the chunks and the trailer's signature re-signed
like "$(head -1 "$WS/trailer.out")" '^200 -$' "aws-chunked with a signed trailer (x-amz-checksum-crc32): 200"
r=$(grep '"path": "/trailer.bin"' "$ST_LOG" | tail -1)
is "$(jf "$r" verified) $(jf "$r" payload_len)" "true 200000" \
	"the stand-in verified every chunk and the trailer's signature with the real key"
r=$(grep '"type":"secret.inject"' "$EV" | grep '/trailer.bin' | tail -1)
is "$(jf "$r" subject.resigned) $(jf "$r" subject.chunks)" "true 5" "... recorded as re-signed"
refused trailer-tamper.out /trailer-tamper.bin trailer "the trailer's checksum changed after it was signed"
# SigV4a (ECDSA P-256, its key derived from the secret): verified with the
# placeholder's key, re-signed with the real one's (awssig.py signs and
# verifies with its own KDF and python3-cryptography)
r=$(grep '"path": "/sigv4a.bin"' "$ST_LOG" | tail -1)
is "$(head -1 "$WS/sigv4a.out") $(jf "$r" verified)" "404 - true" \
	"a SigV4a request re-signed: the stand-in verified it with the real credentials' key (404: no such object)"
r=$(grep '"type":"secret.inject"' "$EV" | grep '/sigv4a.bin' | tail -1)
is "$(jf "$r" subject.resigned)" true "... recorded as re-signed"
refused sigv4a-tamper.out /sigv4a-tamper.bin signature "a SigV4a request with a signed header changed after signing"
refused tamper.out /tamper.bin signature "a signed header changed after signing"
refused wrong.out /wrong.bin signature "signed with another secret than the placeholder"
is "$(cat "$WS/presign.code")" 403 "a presigned URL carrying the placeholder: 403"
r=$(grep '"type":"secret.block"' "$EV" | grep '"why":"presigned"' | tail -1)
is "$(jf "$r" decision) $(jf "$r" subject.secret)" "block aws" "... secret.block why presigned"
is "$(grep -c 'X-Amz-Credential' "$ST_LOG")" 0 "... and the stand-in never saw it"
[ "$(cat "$WS/other.rc")" != 0 ]
ok $? "the CLI toward an intercepted host the secret is not bound to fails"
r=$(grep '"type":"secret.block"' "$EV" | grep api.airlock.test | tail -1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "block host" "... refused there by the broker (why host)"
is "$(net_count line~/bkt)" 0 "... and that origin got nothing"

# scrubbing and receipts
is "$(cat "$WS/cp-echo.rc")" 0 "an object whose body is the real credentials downloads"
is "$(cat "$WS/echo.out")" "$PH_KEY $PH_SECRET $PH_TOKEN" \
	"... and the agent reads the placeholders in it, never the values"
r=$(grep '"type":"secret.inject"' "$EV" | grep '"path":"/up.bin"' | grep PUT | tail -1)
is "$(jf "$r" decision) $(jf "$r" point) $(jf "$r" subject.secret) $(jf "$r" subject.host) $(jf "$r" subject.header) $(jf "$r" subject.resigned)" \
	"allow broker aws bkt.s3.us-east-1.amazonaws.com authorization true" \
	"secret.inject names the secret, host and header, and says it was a re-sign"
for v in "$SECRET" "$TOKEN" "$PH_SECRET" "$PH_TOKEN"; do
	! grep -qF -- "$v" "$EV"
	ok $? "no receipt holds a secret value or its placeholder (${#v} characters)"
done
"$AIRLOCK" verify "$EV" > /dev/null 2>&1
ok $? "the stream verifies"

# shadow: a request that does not verify goes on as the agent sent it,
# signed with the placeholder, never re-signed with the real key
rm -f "$EV"
sed -i 's/"mode": "enforce"/"mode": "shadow"/' "$POLICY"
AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET AWS_SESSION_TOKEN=$TOKEN \
	timeout 120 "$AIRLOCK" run --mode shadow --policy "$POLICY" --workspace "$WS" \
	--events "$EV" -- sh -c '
cd "$0"
env > env-shadow.txt
$1 aws_client.py tamper bkt.s3.amazonaws.com /shadow-tamper.bin > shadow.out 2>&1
exit 0' "$WS" "$PY" > "$T/out" 2>&1 </dev/null
PH_KEY=$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$WS/env-shadow.txt")
r=$(grep '"path": "/shadow-tamper.bin"' "$ST_LOG" | tail -1)
is "$(jf "$r" verified) $(jf "$r" why)" "false not the real access key id" \
	"shadow: the request that does not verify reached the stand-in as sent"
like "$r" "Credential=$PH_KEY/" "... with the placeholder key id, not re-signed"
r=$(grep '"type":"secret.block"' "$EV" | grep '/shadow-tamper.bin' | head -1)
is "$(jf "$r" decision) $(jf "$r" subject.why)" "would_block signature" "... recorded as would_block"
! grep -q '"type":"secret.inject"' "$EV"
ok $? "... and nothing was injected"

done_testing
