#!/bin/bash
# capture.sh - CPU added per captured answer (docs/SECRETS.md "Captured
# values"): builds bench/capture.c against the release objects and prints
# a Markdown table (mean CPU ns per answer over N answers):
#   make && bench/capture.sh [N]
# No network, no sandbox: the filter's own work. The hand-off to the
# other workers is measured end to end by the secret.capture receipt's
# propagated_us (tests/integration/66-secret-capture.t prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OBJ=$ROOT/build/release/src
[ -f "$OBJ/capture.o" ] || { echo "capture.sh: run make first" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PKGS="openssl jansson libcares libseccomp sqlite3 libpq libnftables zlib libbrotlidec libzstd"
# shellcheck disable=SC2046,SC2086
cc -O2 -std=c11 -D_GNU_SOURCE -I"$ROOT/src" $(pkg-config --cflags $PKGS 2>/dev/null) \
	-o "$T/capture" "$ROOT/bench/capture.c" $(ls "$OBJ"/*.o | grep -v '/main\.o$') \
	"$ROOT/build/release/gen/sandbox_filter.o" $(pkg-config --libs $PKGS)
"$T/capture" "${1:-20000}"
