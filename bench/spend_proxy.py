#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""spend_proxy - what metering adds to a call through the proxy: latency and
CPU per call of `airlock proxy` intercepting a stand-in Anthropic API, with
and without a spend section (docs/SPEND.md, "Cost").

Run through tests/netns-exec (bench/spend proxy does): it adds 198.18.0.20
to lo of the namespace it is given and talks only to it and to 127.0.0.1.

Each configuration starts one `airlock proxy --workers 1`, makes WARM calls,
then CALLS sequential calls over one kept-alive TLS connection (CONNECT,
then requests in the intercepted tunnel), and reads the CPU time of the
proxy's processes (the supervisor, the key holder, the worker and, when
metering, the ledger process) from /proc before and after:

  intercepted   the provider host intercepted (egress.intercept), no spend
  metered       spend.providers with a memory ledger
  metered-sqlite  the same with an SQLite ledger (in BENCH_WORK)

  metered-postgresql  the same with a PostgreSQL ledger (SPEND_PG_URL, a
                libpq URI bench/spend sets when it started a server)

for a JSON answer and for a 100-event SSE stream. Then the ledger under
load (issue 20): CONC_THREADS clients (64) each making calls on a
kept-alive connection of its own for CONC_SECONDS, against
`--workers 1` and `--workers 4` with the SQLite ledger (and PostgreSQL):
calls/s, and how it scales with the workers.
"""
import http.client
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK", os.path.join(ROOT, "airlock"))
CALLS = int(os.environ.get("SPEND_PROXY_CALLS", "300"))
WARM = 20
TICK = os.sysconf("SC_CLK_TCK")


def wait_file(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def tree_cpu(root):
    """utime + stime (seconds) of @root and its descendants."""
    kids = {}
    stats = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        ppid = int(rest[1])
        kids.setdefault(ppid, []).append(int(p))
        stats[int(p)] = (int(rest[11]) + int(rest[12])) / TICK
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0.0)
        todo.extend(kids.get(p, []))
    return total


def policy(tmp, kind):
    spend = {}
    egress = {"allow": ["api.anthropic.com"], "allow_ranges": ["198.18.0.0/15"],
              "resolver": ["127.0.0.1:5353"],
              "upstream_ca": os.path.join(tmp, "tls", "ca.pem")}
    if kind == "intercepted":
        egress["intercept"] = ["api.anthropic.com"]
    else:
        spend = {"providers": [{"api": "anthropic", "hosts": ["api.anthropic.com"]}],
                 "prices": {"claude-sonnet-4-5*": {"input": 3, "output": 15}},
                 "cap_usd": 1000000}
        if kind == "metered-sqlite":
            spend["ledger"] = "sqlite:" + os.path.join(tmp, "bench-%d.db" % time.time_ns())
        if kind == "metered-postgresql":
            spend["ledger"] = os.environ["SPEND_PG_URL"]
    p = {"version": 1, "mode": "enforce", "egress": egress}
    if spend:
        p["spend"] = spend
    path = os.path.join(tmp, "policy-%s.json" % kind)
    with open(path, "w") as f:
        json.dump(p, f)
    return path


def start_proxy(tmp, kind, port, workers=1):
    pol = policy(tmp, kind)
    ca = os.path.join(tmp, "proxy-ca-%d.pem" % port)
    err = open(os.path.join(tmp, "proxy-%d.err" % port), "w+")
    px = subprocess.Popen([AIRLOCK, "proxy", "--policy", pol, "--listen", "127.0.0.1:%d" % port,
                           "--events", os.path.join(tmp, "ev-%d.jsonl" % port),
                           "--workers", str(workers), "--ca-out", ca,
                           "--client-limit", "100000"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    end = time.time() + 20
    while time.time() < end:
        err.seek(0)
        if "listening" in err.read():
            break
        time.sleep(0.05)
    else:
        px.kill()
        sys.exit("bench/spend_proxy: airlock proxy did not start")
    return px, ssl.create_default_context(cafile=ca)


def request_of(stream):
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "user", "content": "x" * 2000}]}).encode()
    hdrs = {"content-type": "application/json",
            "X-Llm-Script": "stream" if stream else "json"}
    return body, hdrs


def run(tmp, kind, stream, port):
    px, ctx = start_proxy(tmp, kind, port)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    conn.set_tunnel("api.anthropic.com", 443)
    body, hdrs = request_of(stream)
    lat = []
    cpu0 = 0.0
    for i in range(WARM + CALLS):
        if i == WARM:
            cpu0 = tree_cpu(px.pid)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/messages", body, hdrs)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit("bench/spend_proxy: %s: status %d" % (kind, r.status))
        if i >= WARM:
            lat.append(time.perf_counter() - t0)
    cpu = tree_cpu(px.pid) - cpu0
    conn.close()
    px.send_signal(signal.SIGTERM)
    px.wait(timeout=30)
    lat.sort()
    return {"median_ms": statistics.median(lat) * 1e3,
            "p90_ms": lat[int(len(lat) * 0.9)] * 1e3,
            "cpu_us": cpu / CALLS * 1e6}


def concurrent(tmp, kind, workers, port, threads, seconds):
    """@threads clients, each on a kept-alive connection of its own, for
    @seconds: calls per second (and errors: any status but 200)."""
    px, ctx = start_proxy(tmp, kind, port, workers)
    body, hdrs = request_of(False)
    done, errors = [0] * threads, [0] * threads
    start = threading.Event()
    stop = [0.0]

    def client(i):
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
        conn.set_tunnel("api.anthropic.com", 443)
        start.wait()
        while time.time() < stop[0]:
            try:
                conn.request("POST", "/v1/messages", body, hdrs)
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    done[i] += 1
                else:
                    errors[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
                conn.set_tunnel("api.anthropic.com", 443)
        conn.close()

    ts = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    t0 = time.time()
    stop[0] = t0 + seconds
    start.set()
    for t in ts:
        t.join()
    wall = time.time() - t0
    px.send_signal(signal.SIGTERM)
    px.wait(timeout=30)
    return sum(done) / wall, sum(errors)


def main():
    if os.environ.get("AIRLOCK_TEST_NETNS") != "1":
        sys.exit("bench/spend_proxy: run through tests/netns-exec (bench/spend proxy)")
    subprocess.run(["ip", "addr", "add", "198.18.0.20/32", "dev", "lo"], check=True)
    tmp = tempfile.mkdtemp(prefix="airlock-spend-proxy.",
                           dir=os.environ.get("BENCH_WORK", "/dev/shm"))
    procs = []
    try:
        with open(os.path.join(tmp, "net.json"), "w") as f:
            json.dump({"log": os.path.join(tmp, "net.log"), "ready": os.path.join(tmp, "net.ready"),
                       "lifetime": 900, "dns": {"listen": ["127.0.0.1:5353"],
                                                "zone": {"api.anthropic.com": ["198.18.0.20"]}}}, f)
        with open(os.path.join(tmp, "llm.json"), "w") as f:
            json.dump({"log": "/dev/null", "ready": os.path.join(tmp, "llm.ready"),
                       "lifetime": 900, "listen": ["198.18.0.20:443"],
                       "tls": {"dir": os.path.join(tmp, "tls"), "names": ["api.anthropic.com"]},
                       "scripts": {"json": {"usage": {"input": 500, "output": 40}},
                                   "stream": {"usage": {"input": 500, "output": 40},
                                              "chunks": 100, "deltas": 1}}}, f)
        procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/helpers/testnet.py"),
                                       "--config", os.path.join(tmp, "net.json")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/helpers/llm_api.py"),
                                       "--config", os.path.join(tmp, "llm.json")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if not (wait_file(os.path.join(tmp, "net.ready"), 30) and
                wait_file(os.path.join(tmp, "llm.ready"), 30)):
            sys.exit("bench/spend_proxy: the stand-in network did not start")
        print("%-16s %-7s %10s %10s %14s" % ("proxy", "answer", "median ms", "p90 ms",
                                             "CPU us/call"))
        port = 18190
        for stream in (False, True):
            base = None
            kinds = ["intercepted", "metered", "metered-sqlite"]
            if os.environ.get("SPEND_PG_URL"):
                kinds.append("metered-postgresql")
            for kind in kinds:
                port += 1
                r = run(tmp, kind, stream, port)
                extra = ""
                if base:
                    extra = "   +%.2f ms, +%.0f us CPU" % (r["median_ms"] - base["median_ms"],
                                                         r["cpu_us"] - base["cpu_us"])
                else:
                    base = r
                print("%-16s %-7s %10.2f %10.2f %14.0f%s" % (
                    kind, "sse" if stream else "json", r["median_ms"], r["p90_ms"],
                    r["cpu_us"], extra), flush=True)
        threads = int(os.environ.get("CONC_THREADS", "64"))
        seconds = float(os.environ.get("CONC_SECONDS", "10"))
        print("\n%-18s %8s %8s %10s %8s" % ("ledger (concurrent)", "workers", "clients",
                                             "calls/s", "errors"))
        kinds = ["metered-sqlite"]
        if os.environ.get("SPEND_PG_URL"):
            kinds.append("metered-postgresql")
        for kind in kinds:
            rate = {}
            for workers in (1, 4):
                port += 1
                rate[workers], errs = concurrent(tmp, kind, workers, port, threads, seconds)
                print("%-18s %8d %8d %10.1f %8d%s" % (
                    kind, workers, threads, rate[workers], errs,
                    "   scaling x%.2f" % (rate[4] / rate[1]) if workers == 4 and rate[1] else ""),
                    flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
