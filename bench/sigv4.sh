#!/bin/bash
# sigv4.sh - the CPU airlock adds to an AWS request of a secret of kind
# aws (docs/SECRETS.md "AWS"): the re-signing (verify with the placeholder
# secret, sign with the real one) of an S3 PUT, of an STS call whose body's
# hash is signed, and per 64 KiB chunk of a signed aws-chunked upload,
# beside what the client spends signing the same request once and hashing
# 64 KiB. The re-signing is added to the interception's own cost
# (bench/intercept). Prints a Markdown table (microseconds of CPU per
# operation, median of ROUNDS runs); run by bench/run, or alone:
#   bench/sigv4.sh [ROUNDS] [OPS]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
ROUNDS=${1:-5}
OPS=${2:-20000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I"$ROOT/src" -o "$T/sigv4bench" \
	"$HERE/sigv4bench.c" "$ROOT/src/sigv4.c" "$ROOT/src/buf.c" "$ROOT/src/util.c" -lcrypto
for ((r = 1; r <= ROUNDS; r++)); do
	"$T/sigv4bench" "$OPS"
done > "$T/raw.txt"
python3 - "$T/raw.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, n, us = line.split()
    rows.setdefault(name, []).append(float(us))
label = {
    "client-signs-s3-put": "a client signs an S3 PUT once (the floor)",
    "s3-put-unsigned-payload": "airlock re-signs an S3 PUT (UNSIGNED-PAYLOAD, session token)",
    "sts-body-hash": "airlock re-signs an STS call (the body's hash signed)",
    "aws-chunked-per-64KiB-chunk": "airlock re-signs one 64 KiB aws-chunked chunk",
    "sha256-of-64KiB": "SHA-256 of 64 KiB (the floor of a chunk)",
}
print("| operation | CPU µs (median) | min | max |")
print("|---|---:|---:|---:|")
for name, v in rows.items():
    print("| %s | %.1f | %.1f | %.1f |" % (label.get(name, name), statistics.median(v), min(v), max(v)))
PY
