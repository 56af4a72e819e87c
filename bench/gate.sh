#!/bin/bash
# gate.sh - what the unix-socket gate (docs/UNIX-SOCKETS.md) costs per
# call: the same loops of TCP connect() and of send calls on a connected
# TCP socket, outside any sandbox and inside `airlock run --enforce`,
# where connect(), sendmsg() and sendto() with an address are performed
# by init and send() is not notified. A pipe round trip between two
# processes ("pipe") is the floor of any such hand-off. Prints a
# Markdown table of mean nanoseconds per call:
#   AIRLOCK=./airlock PROBE=build/release/tests/helpers/probe bench/gate.sh [N]
# Only loopback is used, in a network namespace of its own.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AIRLOCK=${AIRLOCK:-$ROOT/airlock}
PROBE=${PROBE:-$ROOT/build/release/tests/helpers/probe}
N=${1:-10000}
if [ "${AIRLOCK_BENCH_NETNS:-}" != 1 ]; then
	export AIRLOCK_BENCH_NETNS=1
	exec unshare --net -- sh -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi
[ -x "$PROBE" ] || { echo "gate.sh: build the probe first (make check or make $PROBE)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo '{"version": 1, "mode": "enforce"}' > "$T/enforce.json"

loops() {
	"$PROBE" connect-loop self 0 "$N"
	"$PROBE" connect-loop self 0 "$N" nonblock
	"$PROBE" send-loop sendmsg "$((N * 10))"
	"$PROBE" send-loop sendto "$((N * 10))"
	"$PROBE" send-loop send "$((N * 10))"
	"$PROBE" pipe-loop "$((N * 10))"
}
# ns NAME FILE: the ns/call figure of the line starting with NAME.
ns() {
	awk -v k="$1" '$1 == k { print $2 }' "$2"
}

loops > "$T/outside"
(cd "$T" && "$AIRLOCK" run --policy "$T/enforce.json" --workspace "$T" -- \
	bash -c "$(declare -f loops); PROBE='$PROBE' N='$N' loops") > "$T/inside" 2>/dev/null
echo "| call | outside ns | in the sandbox ns | added ns |"
echo "|---|---:|---:|---:|"
for k in connect connect-nonblocking sendmsg sendto send pipe; do
	o=$(ns "$k" "$T/outside")
	i=$(ns "$k" "$T/inside")
	echo "| \`$k\` | $o | $i | $((i - o)) |"
done
