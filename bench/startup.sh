#!/bin/bash
# startup.sh - how long `airlock run -- true` takes, beside bubblewrap and a
# bare `true`, on this machine (issue: "well under 50 ms"). Prints a
# Markdown table of medians; run by bench/run, or alone:
#   AIRLOCK=./airlock bench/startup.sh [RUNS]
# No network is used; it runs in a network namespace of its own anyway.
set -euo pipefail
AIRLOCK=${AIRLOCK:-$(cd "$(dirname "$0")/.." && pwd)/airlock}
RUNS=${1:-200}
if [ "${AIRLOCK_BENCH_NETNS:-}" != 1 ]; then
	export AIRLOCK_BENCH_NETNS=1
	exec unshare --net -- "$0" "$@"
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo '{"version": 1, "mode": "enforce"}' > "$T/enforce.json"
echo '{"version": 1, "mode": "shadow"}' > "$T/shadow.json"
command -v bwrap >/dev/null || { echo "bwrap missing (scripts/install-deps --bench)" >&2; exit 1; }

# median_ms CMD...: the median wall time of RUNS runs, in milliseconds.
median_ms() {
	python3 - "$RUNS" "$@" <<'PY'
import statistics, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
for _ in range(5):
    subprocess.run(cmd, check=True)
t = []
for _ in range(runs):
    a = time.perf_counter()
    subprocess.run(cmd, check=True)
    t.append((time.perf_counter() - a) * 1000)
t.sort()
print("%.2f %.2f" % (statistics.median(t), t[int(len(t) * 0.99) - 1]))
PY
}

read -r a_med a_p99 < <(median_ms "$AIRLOCK" run --policy "$T/enforce.json" -- true)
read -r s_med s_p99 < <(median_ms "$AIRLOCK" run --policy "$T/shadow.json" -- true)
read -r b_med b_p99 < <(median_ms bwrap --unshare-all --ro-bind / / true)
read -r t_med t_p99 < <(median_ms true)
echo "| command | median ms | p99 ms |"
echo "|---|---|---|"
echo "| \`airlock run --enforce -- true\` | $a_med | $a_p99 |"
echo "| \`airlock run --mode shadow -- true\` | $s_med | $s_p99 |"
echo "| \`bwrap --unshare-all --ro-bind / / true\` | $b_med | $b_p99 |"
echo "| \`true\` | $t_med | $t_p99 |"
