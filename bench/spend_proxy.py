#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""spend_proxy - what metering adds to a call through the proxy: latency and
CPU per call of `airlock proxy` intercepting a stand-in Anthropic API, with
and without a spend section (docs/SPEND.md, "Cost"), and whether the ledger
serialises concurrent calls (issue 20).

Run through tests/netns-exec (bench/spend proxy does): it adds 198.18.0.20
to lo of the namespace it is given and talks only to it and to 127.0.0.1.
The stand-in API and the clients are bench/tlsload (C, one thread per
connection; built by bench/spend): the origin answers every call with the
same Anthropic JSON answer or 100-event SSE stream, with usage.

Configurations (one `airlock proxy --workers 1` each):

  intercepted   the provider host intercepted (egress.intercept), no spend
  metered       spend.providers with a memory ledger
  metered-sqlite  the same with an SQLite ledger (in BENCH_WORK)
  metered-postgresql  the same with a PostgreSQL ledger (SPEND_PG_URL, a
                libpq URI bench/spend sets when it started a server)

1. Latency, interleaved: every configuration of this build, and of the
   build SPEND_BASE_AIRLOCK (the round's start) when given, runs at once;
   one client keeps one tunnel through each and makes SPEND_PROXY_CALLS
   rounds of one call through each, the order rotated every round, so
   that the machine's load falls on all of them alike. Per configuration:
   the median latency and its quartiles, and the proxy's CPU per call
   (all its processes: supervisor, key holder, worker, ledger process;
   from /proc), which the load moves much less than the latency.
2. Concurrency: CONC_CLIENTS (64) tlsload clients, each on a kept-alive
   connection of its own, for CONC_SECONDS, against --workers 1 and
   --workers 4, with the SQLite and PostgreSQL ledgers and with a slow
   PostgreSQL ledger (every transaction that writes a session's row
   sleeps SLOW_MS, 5 ms, in the server: a trigger). With the slow ledger,
   a ledger that makes one transaction per call caps the rate at
   1000 / SLOW_MS calls/s per transaction a call needs; more than that
   means transactions serve several calls at once.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.environ.get("AIRLOCK", os.path.join(ROOT, "airlock"))
CALLS = int(os.environ.get("SPEND_PROXY_CALLS", "1000"))
FAILED = []  # what went wrong without stopping the run


def wait_file(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def tree_cpu(root):
    """CPU time (seconds) of @root and its descendants: the sum of their
    threads' /proc/PID/task/TID/schedstat (nanoseconds; utime + stime
    would count in clock ticks, 10 ms)."""
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                s = f.read()
        except OSError:
            continue
        kids.setdefault(int(s[s.rindex(")") + 2:].split()[1]), []).append(int(p))
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/schedstat" % (p, t)) as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def policy(tmp, kind, tag):
    spend = {}
    egress = {"allow": ["api.anthropic.com"], "allow_ranges": ["198.18.0.0/15"],
              "resolver": ["127.0.0.1:5353"],
              "upstream_ca": os.path.join(tmp, "origin-ca.pem")}
    if kind == "intercepted":
        egress["intercept"] = ["api.anthropic.com"]
    else:
        spend = {"providers": [{"api": "anthropic", "hosts": ["api.anthropic.com"]}],
                 "prices": {"claude-sonnet-4-5*": {"input": 3, "output": 15}},
                 "cap_usd": 1000000}
        if kind == "metered-sqlite":
            spend["ledger"] = "sqlite:" + os.path.join(tmp, "bench-%s.db" % tag)
        if kind == "metered-postgresql":
            spend["ledger"] = os.environ["SPEND_PG_URL"]
        if kind == "metered-pg-slow":
            spend["ledger"] = os.environ["SPEND_PG_SLOW_URL"]
    p = {"version": 1, "mode": "enforce", "egress": egress}
    if spend:
        p["spend"] = spend
    path = os.path.join(tmp, "policy-%s.json" % tag)
    with open(path, "w") as f:
        json.dump(p, f)
    return path


class Proxy:
    """One `airlock proxy` of binary @airlock on 127.0.0.1:@port."""

    def __init__(self, tmp, airlock, kind, port, workers=1):
        tag = "%d" % port
        self.kind, self.port, self.addr = kind, port, "127.0.0.1:%d" % port
        self.ca = os.path.join(tmp, "proxy-ca-%d.pem" % port)
        err = open(os.path.join(tmp, "proxy-%d.err" % port), "w+")
        self.px = subprocess.Popen(
            [airlock, "proxy", "--policy", policy(tmp, kind, tag),
             "--listen", self.addr, "--events", os.path.join(tmp, "ev-%d.jsonl" % port),
             "--workers", str(workers), "--ca-out", self.ca, "--client-limit", "100000"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        end = time.time() + 30
        while time.time() < end:
            err.seek(0)
            if "listening" in err.read():
                break
            if self.px.poll() is not None:
                break
            time.sleep(0.05)
        else:
            self.px.kill()
        if self.px.poll() is not None:
            err.seek(0)
            sys.exit("bench/spend_proxy: airlock proxy (%s, %s) did not start: %s" %
                     (airlock, kind, err.read()[-500:]))

    def cpu(self):
        return tree_cpu(self.px.pid)

    def stop(self):
        self.px.send_signal(signal.SIGTERM)
        try:
            self.px.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.px.kill()


def tlsload(tmp, args):
    out = subprocess.run([os.environ["TLSLOAD"], "run", "--host", "api.anthropic.com",
                          "--post", os.path.join(tmp, "req-%s.json" % args["answer"]),
                          "--header", "X-Llm-Script: " + args["answer"]] +
                         [str(x) for x in args["argv"]],
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit("bench/spend_proxy: tlsload: %s%s" % (out.stdout, out.stderr))
    return out.stdout


def kv(line):
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def latency(tmp, builds, kinds, answer, rounds, port):
    """Every (build, kind) proxy at once; tlsload --mode interleave over
    all of them. One line per (build, kind)."""
    proxies = []
    for bname, binary in builds:
        for kind in kinds:
            port += 1
            proxies.append((bname, Proxy(tmp, binary, kind, port)))
    # one CA per proxy: tlsload takes one, so the proxies share a CA file
    # (each made its own); verify against all of them
    bundle = os.path.join(tmp, "cas-%d.pem" % port)
    with open(bundle, "w") as f:
        for _, px in proxies:
            f.write(open(px.ca).read())
    cpu0 = [px.cpu() for _, px in proxies]
    out = tlsload(tmp, {"answer": answer, "argv": [
        "--mode", "interleave", "--ca", bundle, "--rounds", rounds,
        "--proxy", ",".join(px.addr for _, px in proxies)]})
    cpu1 = [px.cpu() for _, px in proxies]
    for _, px in proxies:
        px.stop()
    lines = {kv(l)["proxy"]: kv(l) for l in out.splitlines() if l.startswith("proxy=")}
    res = []
    for (bname, px), c0, c1 in zip(proxies, cpu0, cpu1):
        r = lines[px.addr]
        calls = int(r["calls"])
        res.append({"build": bname, "kind": px.kind, "median": float(r["median_ms"]),
                    "q1": float(r["q1_ms"]), "q3": float(r["q3_ms"]),
                    "cpu_us": (c1 - c0) / (calls + 5) * 1e6})
    return res, port


def concurrent(tmp, binary, kind, workers, port, clients, seconds):
    """@clients tlsload clients, each on a kept-alive connection of its
    own, for @seconds: calls per second and errors."""
    px = Proxy(tmp, binary, kind, port, workers)
    out = subprocess.run([os.environ["TLSLOAD"], "run", "--host", "api.anthropic.com",
                          "--post", os.path.join(tmp, "req-json.json"),
                          "--header", "X-Llm-Script: json", "--mode", "keepalive",
                          "--ca", px.ca, "--proxy", px.addr, "--conns", str(clients),
                          "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=3600)
    px.stop()
    r = kv(out.stdout)
    if r.get("errors", "0") != "0":
        FAILED.append("%s --workers %d: %s calls not answered 200" % (kind, workers, r["errors"]))
    if "rps" not in r:
        sys.exit("bench/spend_proxy: tlsload: %s%s" % (out.stdout, out.stderr))
    return float(r["rps"]), int(r["errors"])


def make_files(tmp):
    """The origin's certificate, its two answers, the two requests."""
    d = tmp

    def sh(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-days", "2", "-subj", "/CN=bench origin CA",
       "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign",
       "-keyout", d + "/origin-ca.key", "-out", d + "/origin-ca.pem")
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-subj", "/CN=api.anthropic.com", "-keyout", d + "/leaf.key",
       "-out", d + "/leaf.csr")
    with open(d + "/leaf.ext", "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:api.anthropic.com\n")
    sh("openssl", "x509", "-req", "-in", d + "/leaf.csr", "-CA", d + "/origin-ca.pem",
       "-CAkey", d + "/origin-ca.key", "-CAcreateserial", "-days", "2",
       "-extfile", d + "/leaf.ext", "-out", d + "/leaf.pem")
    for answer, stream in (("json", False), ("stream", True)):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
                "messages": [{"role": "user", "content": "x" * 2000}]}
        with open(os.path.join(d, "req-%s.json" % answer), "w") as f:
            json.dump(body, f)
    usage = {"input_tokens": 500, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    with open(d + "/answer.json", "w") as f:
        json.dump({"id": "msg_1", "type": "message", "role": "assistant",
                   "model": "claude-sonnet-4-5",
                   "content": [{"type": "text", "text": "bench " * 40}],
                   "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": dict(usage, output_tokens=40)}, f)
    ev = [("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
        "usage": dict(usage, output_tokens=1)}}),
          ("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}})]
    for i in range(96):
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta",
                                                     "text": "token %d " % i}}))
    ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    ev.append(("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": 40}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    with open(d + "/answer.sse", "w") as f:
        for name, data in ev:
            f.write("event: %s\ndata: %s\n\n" % (name, json.dumps(data, separators=(",", ":"))))


def fmt_lat(r):
    return "%-10s %-19s %-6s %9.3f %7.3f %7.3f %9.0f" % (
        r["build"], r["kind"], r["answer"], r["median"], r["q1"], r["q3"], r["cpu_us"])


def main():
    if os.environ.get("AIRLOCK_TEST_NETNS") != "1":
        sys.exit("bench/spend_proxy: run through tests/netns-exec (bench/spend proxy)")
    subprocess.run(["ip", "addr", "add", "198.18.0.20/32", "dev", "lo"], check=True)
    tmp = tempfile.mkdtemp(prefix="airlock-spend-proxy.",
                           dir=os.environ.get("BENCH_WORK", "/dev/shm"))
    os.chmod(tmp, 0o755)
    procs = []
    try:
        make_files(tmp)
        with open(os.path.join(tmp, "net.json"), "w") as f:
            json.dump({"log": os.path.join(tmp, "net.log"), "ready": os.path.join(tmp, "net.ready"),
                       "lifetime": 3600, "dns": {"listen": ["127.0.0.1:5353"],
                                                 "zone": {"api.anthropic.com": ["198.18.0.20"]}}}, f)
        procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/helpers/testnet.py"),
                                       "--config", os.path.join(tmp, "net.json")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([os.environ["TLSLOAD"], "serve", "--listen", "198.18.0.20:443",
                                       "--cert", tmp + "/leaf.pem", "--key", tmp + "/leaf.key",
                                       "--json", tmp + "/answer.json",
                                       "--sse", tmp + "/answer.sse"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if not wait_file(os.path.join(tmp, "net.ready"), 30):
            sys.exit("bench/spend_proxy: the stand-in network did not start")
        builds = [("this", AIRLOCK)]
        if os.environ.get("SPEND_BASE_AIRLOCK"):
            builds.insert(0, ("base", os.environ["SPEND_BASE_AIRLOCK"]))
        kinds = ["intercepted", "metered", "metered-sqlite"]
        if os.environ.get("SPEND_PG_URL"):
            kinds.append("metered-postgresql")
        port = 18190
        print("## latency: %d rounds, one call through each proxy per round (interleaved);"
              " load %s" % (CALLS, open("/proc/loadavg").read().split()[0]))
        print("%-10s %-19s %-6s %9s %7s %7s %9s   %s" % (
            "build", "proxy", "answer", "median_ms", "q1_ms", "q3_ms", "cpu_us", "added vs intercepted"))
        for answer in ("json", "stream"):
            res, port = latency(tmp, builds, kinds, answer, CALLS, port)
            base = {r["build"]: r for r in res if r["kind"] == "intercepted"}
            for r in res:
                r["answer"] = "json" if answer == "json" else "sse"
                extra = ""
                if r["kind"] != "intercepted":
                    b = base[r["build"]]
                    extra = "   %+.3f ms, %+.0f us CPU" % (r["median"] - b["median"],
                                                         r["cpu_us"] - b["cpu_us"])
                print(fmt_lat(r) + extra, flush=True)
        clients = int(os.environ.get("CONC_CLIENTS", "64"))
        seconds = float(os.environ.get("CONC_SECONDS", "10"))
        slow = os.environ.get("SLOW_MS", "5")
        print("\n## concurrency: %d tlsload clients, %gs each; load %s; "
              "metered-pg-slow: %s ms per transaction" % (
                  clients, seconds, open("/proc/loadavg").read().split()[0], slow))
        print("%-10s %-19s %8s %8s %10s %8s" % ("build", "ledger (concurrent)", "workers",
                                                "clients", "calls/s", "errors"))
        kinds = ["metered-sqlite"]
        if os.environ.get("SPEND_PG_URL"):
            kinds.append("metered-postgresql")
        if os.environ.get("SPEND_PG_SLOW_URL"):
            kinds.append("metered-pg-slow")
        for kind in kinds:
            for bname, binary in builds:
                rate = {}
                for workers in (1, 4):
                    port += 1
                    rate[workers], errs = concurrent(tmp, binary, kind, workers, port,
                                                     clients, seconds)
                    print("%-10s %-19s %8d %8d %10.1f %8d%s" % (
                        bname, kind, workers, clients, rate[workers], errs,
                        "   scaling x%.2f" % (rate[4] / rate[1]) if workers == 4 and rate[1]
                        else ""), flush=True)
        if FAILED:
            sys.exit("bench/spend_proxy: " + "; ".join(FAILED))
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
