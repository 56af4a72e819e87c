#!/bin/bash
# startup.sh - how long `airlock run -- true` takes, beside bubblewrap and a
# bare `true`, on this machine (target: enforce within 1.5x bubblewrap's
# --unshare-all). Prints a Markdown table of medians and 10th and 99th
# percentiles; run by bench/run, or alone:
#   AIRLOCK=./airlock bench/startup.sh [RUNS]
# The commands take turns, run after run, so that other work on the
# machine weighs on all of them alike. No network is used; it runs in a
# network namespace of its own anyway.
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
mkdir "$T/ws"
command -v bwrap >/dev/null || { echo "bwrap missing (scripts/install-deps --bench)" >&2; exit 1; }

python3 - "$RUNS" "$AIRLOCK" "$T" "${STARTUP_TSV:-}" <<'PY'
import os, resource, statistics, subprocess, sys, time
runs, airlock, t, tsv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
cmds = [
    ("`airlock run --enforce -- true`", [airlock, "run", "--policy", t + "/enforce.json", "--workspace", t + "/ws",
      "--events", t + "/events.jsonl", "--", "true"]),
    ("`airlock run --mode shadow -- true`", [airlock, "run", "--policy", t + "/shadow.json", "--workspace", t + "/ws",
      "--events", t + "/events.jsonl", "--", "true"]),
    ("`bwrap --unshare-all --ro-bind / / true`", ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"]),
    ("`true`", ["true"]),
]
ms = {name: [] for name, _ in cmds}
cpu = {name: [] for name, _ in cmds}
for _ in range(5):
    for _, c in cmds:
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
for _ in range(runs):
    for name, c in cmds:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        a = time.perf_counter()
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
        ms[name].append((time.perf_counter() - a) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU of the command and every process it waited for (user+system)
        cpu[name].append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]
print("| command | median ms | p10 ms | p99 ms | median CPU ms |")
print("|---|---|---|---|---|")
for name, _ in cmds:
    v = ms[name]
    print("| %s | %.2f | %.2f | %.2f | %.2f |" % (name, statistics.median(v), pct(v, 0.1),
                                              pct(v, 0.99), statistics.median(cpu[name])))
a = statistics.median(ms[cmds[0][0]])
b = statistics.median(ms[cmds[2][0]])
ca, cb = statistics.median(cpu[cmds[0][0]]), statistics.median(cpu[cmds[2][0]])
print("\nenforce / bubblewrap (medians): %.2f wall, %.2f CPU" % (a / b, ca / cb if cb else float("nan")))
if tsv:
    with open(tsv, "w") as f:
        f.write("target\tmetric\tvalue\n")
        for key, (name, _) in zip(("enforce", "shadow", "bwrap", "true"), cmds):
            f.write("%s\tmedian_ms\t%.3f\n" % (key, statistics.median(ms[name])))
            f.write("%s\tcpu_ms\t%.3f\n" % (key, statistics.median(cpu[name])))
PY
