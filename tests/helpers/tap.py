# SPDX-License-Identifier: Apache-2.0
"""tap - TAP helpers for the Python integration tests (the counterpart of
tests/integration/lib.sh). Import it; it sets up T (a scratch directory
removed at exit) and reads AIRLOCK, AIRLOCK_SRC.

  ok(cond, desc) is_(got, want, desc) like(got, regex, desc)
  run(*args, stdin=None, timeout=60) -> (status, stdout, stderr)  (bytes)
  mkstream(spec_or_path, out, *args)  signed stream with tests/helpers/mkstream.py
  done_testing()
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

AIRLOCK = os.environ.get("AIRLOCK")
if not AIRLOCK:
    print("Bail out! AIRLOCK must name the airlock binary (make check sets it)")
    sys.exit(1)
SRC = os.environ.get("AIRLOCK_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
HELPERS = os.path.join(SRC, "tests", "helpers")
T = tempfile.mkdtemp(prefix="airlock-test.")
atexit.register(shutil.rmtree, T, True)

_n = 0
_failed = 0


def ok(cond, desc):
    global _n, _failed
    _n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (_n, desc), flush=True)
    if not cond:
        _failed += 1
    return bool(cond)


def is_(got, want, desc):
    r = ok(got == want, desc)
    if not r:
        print("#   got:  %r\n#   want: %r" % (got, want))
    return r


def like(got, regex, desc):
    r = ok(re.search(regex, got or "") is not None, desc)
    if not r:
        print("#   got:  %r\n#   want match: %r" % (got, regex))
    return r


def diag(msg):
    for line in str(msg).splitlines():
        print("# " + line, flush=True)


def run(*args, stdin=None, timeout=120, env=None, cwd=None):
    p = subprocess.run([str(a) for a in args], input=stdin, capture_output=True,
                       timeout=timeout, env=env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def mkstream(spec, out, *args):
    """Writes a signed stream for @spec (a dict, or a path) to @out."""
    if isinstance(spec, dict):
        path = os.path.join(T, "spec-%d.json" % abs(hash(out)))
        with open(path, "w") as f:
            json.dump(spec, f)
        spec = path
    with open(out, "wb") as f:
        subprocess.run([sys.executable, os.path.join(HELPERS, "mkstream.py"), spec] +
                       [str(a) for a in args], stdout=f, check=True, timeout=600)
    return out


def lines_of(path):
    with open(path, "rb") as f:
        return [l for l in f.read().split(b"\n") if l]


def done_testing():
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)
