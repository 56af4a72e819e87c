#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/summary.py - the issue's table from one `make bench` run
(docs/PERFORMANCE.md): every row as a ratio against its peer, measured in
the same run, beside its target; the machine's busy figure; and the
correctness checks, which alone decide the exit status (never a ratio).

    bench/summary.py RESULTS_DIR [DOCS_PNG]

Reads what bench/all's parts wrote in RESULTS_DIR: results.tsv (bench/run:
tunnels beside tinyproxy and the splice relay), intercept/raw.txt
(bench/intercept: squid ssl_bump and mitmproxy), startup.tsv
(bench/startup.sh: bwrap), spend.txt (bench/spend proxy) and busy.txt.
Writes summary.md and performance.png there (and to DOCS_PNG when given).
Exit 1 when a correctness check failed, 0 otherwise.
"""
import os
import re
import sys
import textwrap

res = sys.argv[1]
docs_png = sys.argv[2] if len(sys.argv) > 2 else None


def read_tsv(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 3 and f[0] != "target":
            out[(f[0], f[1])] = f[2]
    return out


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def ratio(a, b):
    a, b = num(a), num(b)
    return a / b if a is not None and b not in (None, 0.0) else None


tunnel = read_tsv(os.path.join(res, "results.tsv"))
startup = read_tsv(os.path.join(res, "startup.tsv"))
ic = {}
icp = os.path.join(res, "intercept", "raw.txt")
if os.path.exists(icp):
    for line in open(icp):
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "target" in kv and "test" in kv:
            ic[(kv["target"], kv["test"])] = kv


def ic_cpu_ms(t, test):
    r = ic.get((t, test))
    if not r or not num(r.get("requests")):
        return None
    return float(r["cpu_ticks"]) * 1000.0 / float(r["hz"]) / float(r["requests"])


def ic_val(t, test, k):
    r = ic.get((t, test))
    return r.get(k) if r else None


T = lambda t, m: tunnel.get((t, m))  # noqa: E731

# (measure, value, peer's value, ratio, target text, met?)
rows = []


def row(name, ours, peer, r, target, ok):
    rows.append((name, ours, peer, r, target, ok))


def ge(x, k):
    return None if x is None else x >= k


def le(x, k):
    return None if x is None else x <= k


r = ratio(T("airlock", "rr_req_per_s"), T("tinyproxy", "rr_req_per_s"))
row("new-tunnel req/s vs tinyproxy", T("airlock", "rr_req_per_s"), T("tinyproxy", "rr_req_per_s"),
    r, "≥ 1.5×", ge(r, 1.5))
r = ratio(T("airlock", "rr_cpu_us_per_req"), T("tinyproxy", "rr_cpu_us_per_req"))
row("proxy CPU µs per request vs tinyproxy", T("airlock", "rr_cpu_us_per_req"),
    T("tinyproxy", "rr_cpu_us_per_req"), r, "≤ 1.0×", le(r, 1.0))
r = ratio(T("airlock", "bulk_mb_per_s"), T("splice", "bulk_mb_per_s"))
row("bulk MB/s through one tunnel vs the splice relay", T("airlock", "bulk_mb_per_s"),
    T("splice", "bulk_mb_per_s"), r, "≥ 0.95×", ge(r, 0.95))
r = ratio(T("airlock", "bulk_cpu_s_per_gb"), T("splice", "bulk_cpu_s_per_gb"))
row("bulk proxy CPU s/GB vs the splice relay", T("airlock", "bulk_cpu_s_per_gb"),
    T("splice", "bulk_cpu_s_per_gb"), r, "(≤ 1.0×)", le(r, 1.0))
m = num(T("airlock", "mem_anon_kib_per_tunnel"))
row("KiB of user space per idle tunnel", T("airlock", "mem_anon_kib_per_tunnel"),
    T("tinyproxy", "mem_anon_kib_per_tunnel"), ratio(m, T("tinyproxy", "mem_anon_kib_per_tunnel")),
    "≤ 4 KiB", le(m, 4.0))
r = ratio(startup.get(("enforce", "median_ms")), startup.get(("bwrap", "median_ms")))
row("`airlock run --enforce -- true` wall vs bwrap", startup.get(("enforce", "median_ms")),
    startup.get(("bwrap", "median_ms")), r, "≤ 1.5×", le(r, 1.5))
r = ratio(startup.get(("enforce", "cpu_ms")), startup.get(("bwrap", "cpu_ms")))
row("`airlock run --enforce -- true` CPU vs bwrap", startup.get(("enforce", "cpu_ms")),
    startup.get(("bwrap", "cpu_ms")), r, "≤ 3×", le(r, 3.0))
# (name, test, key, peer, target, want at least?, bound)
IC_ROWS = [
    ("intercepted keep-alive req/s vs squid-bump", "keepalive", "rps", "squid", "≥ 1.5×", True, 1.5),
    ("intercepted keep-alive req/s vs mitmproxy", "keepalive", "rps", "mitmproxy", "≥ 5×", True, 5.0),
    ("intercepted CPU ms per keep-alive request vs squid-bump", "keepalive", "cpu", "squid",
     "≤ 0.8×", False, 0.8),
    ("intercepted new connections/s vs squid-bump", "newconn", "rps", "squid", "≥ 1.5×", True, 1.5),
    ("intercepted bulk MB/s vs squid-bump", "bulk", "mbps", "squid", "≥ 1.5×", True, 1.5),
]
for name, test, key, peer, target, at_least, bound in IC_ROWS:
    if key == "cpu":
        a, b = ic_cpu_ms("airlock", test), ic_cpu_ms(peer, test)
        a, b = ("%.3f" % a if a else None), ("%.3f" % b if b else None)
    else:
        a, b = ic_val("airlock", test, key), ic_val(peer, test, key)
    r = ratio(a, b)
    row(name, a, b, r, target, ge(r, bound) if at_least else le(r, bound))

def ic_idle_kib(t):
    r = ic.get((t, "idle"))
    if not r or not num(r.get("conns")) or r.get("errors") != "0":
        return None
    return "%.1f" % ((float(r["mem_idle_kib"]) - float(r["mem_before_kib"])) / float(r["conns"]))


a, b = ic_idle_kib("airlock"), ic_idle_kib("squid")
r = ratio(a, b)
row("KiB per idle intercepted connection (anonymous memory) vs squid-bump", a, b, r,
    "(stated)", None)

# spend: per metered call against the intercepted call of the same build,
# interleaved (median and quartiles of the latency, CPU per call), and the
# concurrent ledger rows
spend_rows, conc_rows = [], []
sp = os.path.join(res, "spend.txt")
if os.path.exists(sp):
    for line in open(sp):
        m_ = re.match(r"^(base|this)\s+(metered\S*)\s+(json|sse)\s+([\d.]+)\s+([\d.]+)\s+"
                      r"([\d.]+)\s+(\d+)\s+([-+][\d.]+) ms, ([-+]\d+) us CPU", line)
        if m_:
            spend_rows.append(m_.groups())
        m_ = re.match(r"^(base|this)\s+(metered\S*)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)"
                      r"(?:\s+scaling x([\d.]+))?", line)
        if m_:
            conc_rows.append(m_.groups())

# ---------------------------------------------------------------- checks
checks = []


def check(name, ok, detail=""):
    checks.append((name, ok, detail))


for t in ("tinyproxy", "squid", "airlock"):
    v = T(t, "deny_check")
    if v is not None:
        check("%s denies a CONNECT to another port" % t, v == "denied", v)
if T("airlock", "bulk_mb_per_s") is not None or T("airlock", "bulk_failed_runs") is not None:
    check("airlock bulk: every byte verified by the client",
          T("airlock", "bulk_failed_runs") in (None, "0"), T("airlock", "bulk_failed_runs") or "")
if T("airlock", "rr_errors") is not None:
    check("airlock new tunnels: no error", T("airlock", "rr_errors") == "0", T("airlock", "rr_errors"))
for test in ("keepalive", "newconn", "bulk", "bulktext", "idle"):
    e = ic_val("airlock", test, "errors")
    if e is not None:
        # the origin answers 401 unless the value was substituted
        check("intercepted %s: the substituted value reached the origin (no error)" % test,
              e == "0", e)
inj = ic_val("airlock", "receipts", "inject_receipts")
if inj is not None:
    check("interception really happened (secret.inject receipts written)", int(inj) > 0, inj)
for name, ok in (("spend", os.path.join(res, "spend.ok")),):
    if os.path.exists(os.path.join(res, "spend.txt")):
        check("metered calls: every call answered 200", os.path.exists(ok))

busy = open(os.path.join(res, "busy.txt")).read().strip() if os.path.exists(
    os.path.join(res, "busy.txt")) else "not recorded"


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.2f" % v
    return str(v)


lines = ["| measure | airlock | peer | ratio | target | met |", "|---|---:|---:|---:|---|---|"]
for name, ours, peer, r, target, ok in rows:
    lines.append("| %s | %s | %s | %s | %s | %s |" % (
        name, fmt(ours), fmt(peer), "%.2f×" % r if r is not None else "-", target,
        "-" if ok is None else ("yes" if ok else "**no**")))
if spend_rows:
    lines += ["", "| metered call (issue 20) | build | answer | median ms (IQR) | added ms | "
              "added CPU us |", "|---|---|---|---:|---:|---:|"]
    for b, k, a_, med, q1, q3, cpu, plus, pcpu in spend_rows:
        lines.append("| %s | %s | %s | %s (%s-%s) | %+.3f | %+d |" % (
            k, b, a_, med, q1, q3, float(plus), int(pcpu)))
if conc_rows:
    lines += ["", "| ledger under load | build | workers | clients | calls/s | errors | "
              "4 vs 1 worker |", "|---|---|---:|---:|---:|---:|---:|"]
    for b, k, w, c, rate, err, sc in conc_rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (k, b, w, c, rate, err,
                                                              "%s×" % sc if sc else ""))
lines += ["", "Machine busy: " + busy, "", "| correctness check | result |", "|---|---|"]
for name, ok, detail in checks:
    lines.append("| %s | %s%s |" % (name, "ok" if ok else "**FAILED**",
                                    " (%s)" % detail if detail and not ok else ""))
text = "\n".join(lines) + "\n"
open(os.path.join(res, "summary.md"), "w").write(text)
print(text)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pr = [(n, r, t) for n, _, _, r, t, _ in rows if r is not None]
    if pr:
        fig, ax = plt.subplots(figsize=(9, 0.45 * len(pr) + 1.2))
        ys = range(len(pr))
        ax.barh(list(ys), [r for _, r, _ in pr],
                color=["#4c72b0" if rows_ok else "#c44e52"
                       for rows_ok in [next(o for n2, _, _, _, _, o in rows if n2 == n) in (True, None)
                                       for n, _, _ in pr]])
        for y, (n, r, t) in zip(ys, pr):
            m_ = re.search(r"([\d.]+)", t)
            if m_ and "KiB" not in t:
                ax.plot([float(m_.group(1))] * 2, [y - 0.4, y + 0.4], color="black", lw=2)
            ax.text(r, y, " %.2f× (%s)" % (r, t), va="center", fontsize=8)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([n for n, _, _ in pr], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("airlock / peer, same run (black mark: target; red: target not met)")
        ax.set_title("\n".join(textwrap.wrap("make bench: " + busy, 110)), fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(res, "performance.png"), dpi=110)
        if docs_png:
            fig.savefig(docs_png, dpi=110)
except ImportError:
    print("bench/summary: python3-matplotlib missing: no plot", file=sys.stderr)

failed = [c for c in checks if not c[1]]
if failed:
    print("bench: %d correctness check(s) FAILED" % len(failed), file=sys.stderr)
    sys.exit(1)
