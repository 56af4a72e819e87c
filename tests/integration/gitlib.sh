# gitlib.sh - what the git binding's tests that run their own servers on lo
# share (65-git-servers, 67-git-mint, 69-git-providers). Source it after
# lib.sh. It bails out unless the test runs in a network namespace of its
# own (tests/netns-exec: the test adds addresses to lo), and gives:
#   PY                  Debian's python3 (it starts in a fraction of the time
#                       of a pyenv shim; the servers need the standard
#                       library only)
#   H                   tests/helpers
#   PIDS, cleanup       the servers to stop at exit (TERM, then KILL after
#                       3 s), then $T removed (the EXIT trap)
#   jf JSON PATH...     members by dotted path, joined by spaces; strings
#                       raw, other values as compact JSON, absent: empty
#   lo_addrs ADDR...    adds each ADDR/32 to lo (Bail out! when it cannot)
if [ "${AIRLOCK_TEST_NETNS:-}" != 1 ] || [ "$(ip -o link show | wc -l)" -ne 1 ]; then
	echo "Bail out! run through tests/netns-exec (make check): this test adds addresses to lo"
	exit 1
fi
H=$AIRLOCK_SRC/tests/helpers
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

PIDS=""
cleanup() {
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

jf() {
	"$PY" - "$@" <<'PY'
import json, sys
out = []
for path in sys.argv[2:]:
    try:
        v = json.loads(sys.argv[1])
        for k in path.split("."):
            v = v[int(k)] if isinstance(v, list) else v[k]
        out.append(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
    except (ValueError, KeyError, IndexError, TypeError):
        out.append("")
print(" ".join(out))
PY
}

lo_addrs() {
	for a in "$@"; do
		ip addr add "$a/32" dev lo || { echo "Bail out! ip addr add $a"; exit 1; }
	done
}
