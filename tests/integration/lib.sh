# lib.sh - TAP helpers for the shell integration tests. Source it; it sets
# up $T (a scratch directory removed at exit), checks $AIRLOCK, and gives
# the test a home of its own: HOME=$T/home and no XDG_STATE_HOME, so that a
# session run without --events records into $T/home/.local/state/airlock/
# and never into the home of whoever runs the tests.
#   ok COND-EXIT-STATUS "description"   (use: cmd; ok $? "...")
#   is GOT WANT "description"
#   like GOT REGEX "description"
#   diag TEXT...           a diagnostic line on stderr, which prove shows
#                          (a failed ok/is/like says why there too)
#   diag_file FILE         the first lines of FILE as diagnostics
#   wait_grep FILE ERE [S] waits (at most S seconds, default 10) until a
#                          line of FILE matches ERE: for a receipt or a log
#                          line that another process writes a moment after
#                          the thing the test did; returns 1 on time-out
#   helpers_in DIR         copies the test helpers ($AIRLOCK_HELPERS) to
#                          DIR/.airlock-helpers and prints that directory:
#                          the sandbox hides /root, /srv, /home and the
#                          host's /tmp, where a checkout may be, so what a
#                          test runs inside must lie in a path it shows
#                          (the workspace)
#   mem_count PID FILE...  how many times each FILE's bytes are in PID's
#                          memory (the scans for keys and secret values)
#   key_forms KEY PREFIX   the forms of a private key to scan memory for
#   done_testing
set -u
: "${AIRLOCK:?AIRLOCK must name the airlock binary (make check sets it)}"
: "${AIRLOCK_SRC:=$(cd "$(dirname "$0")/../.." && pwd)}"
T=$(mktemp -d "${TMPDIR:-/tmp}/airlock-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir "$T/home"
HOME="$T/home"
export HOME
unset XDG_STATE_HOME
tap_n=0
tap_failed=0

diag() {
	printf '# %s\n' "$*" >&2
}

diag_file() {
	if [ -f "$1" ]; then
		head -n 20 "$1" | sed 's/^/#   /' >&2
	else
		diag "  ($1 does not exist)"
	fi
}

ok() {
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		diag "Failed test $tap_n in $(basename "$0"): $2"
		tap_failed=$((tap_failed + 1))
	fi
}

is() {
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want: %s\n' "$1" "$2" >&2
	fi
}

like() {
	if printf '%s' "$1" | grep -Eq -- "$2"; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want match: %s\n' "$1" "$2" >&2
	fi
}

wait_grep() {
	_wg_n=$(( ${3:-10} * 20 ))
	_wg_i=0
	while ! grep -Eq -- "$2" "$1" 2>/dev/null; do
		[ $_wg_i -ge $_wg_n ] && return 1
		sleep 0.05
		_wg_i=$((_wg_i + 1))
	done
	return 0
}

# mem_count PID FILE...: how many times the bytes of each FILE are in the
# readable memory of process PID: one count per FILE, in their order,
# space-separated. Regions over 1 GiB (ASan's shadow under make SAN=1) are
# reserved space and skipped, as are [vvar] and [vsyscall] and a region
# that cannot be read. Used by the scans for keys and secret values
# (60-processes-walls.t, 67-git-mint.t, 77-publish.t).
mem_count() {
	python3 - "$@" <<'PY'
import sys
pid = sys.argv[1]
needles = [open(f, "rb").read() for f in sys.argv[2:]]
counts = [0] * len(needles)
with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in maps:
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if f[1][0] != "r" or hi - lo > (1 << 30) or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
            continue
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, ValueError):
            continue
        for i, n in enumerate(needles):
            if n:
                counts[i] += data.count(n)
print(" ".join(str(c) for c in counts))
PY
}

# key_forms KEYFILE OUTPREFIX: writes the forms in which the private key
# of KEYFILE (PEM; EC or RSA) may lie in a process's memory, one file each:
# OUTPREFIX.be (its private scalar or exponent, big-endian, as in the file's
# DER), OUTPREFIX.le (the same reversed: OpenSSL's BIGNUM words on a
# little-endian machine) and OUTPREFIX.b64 (the first base64 line of the
# file, as a process that read it holds it).
key_forms() {
	python3 - "$1" "$2" <<'PY'
import re, subprocess, sys
key, out = sys.argv[1], sys.argv[2]
text = subprocess.run(["openssl", "pkey", "-in", key, "-text", "-noout"],
                      capture_output=True, text=True, check=True).stdout
m = re.search(r"^(?:priv|privateExponent):\s*\n((?:\s+[0-9a-f:]+\n)+)", text, re.M)
hexs = re.sub(r"[^0-9a-f]", "", m.group(1))
b = bytes.fromhex(hexs).lstrip(b"\0")
if len(b) <= 32:
    b = b.rjust(32, b"\0")
open(out + ".be", "wb").write(b)
open(out + ".le", "wb").write(b[::-1])
lines = [l for l in open(key) if not l.startswith("-----")]
open(out + ".b64", "w").write(lines[0].strip())
PY
}

helpers_in() {
	: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"
	mkdir -p "$1/.airlock-helpers" &&
		cp "$AIRLOCK_HELPERS"/* "$1/.airlock-helpers/" &&
		chmod -R a+rX "$1/.airlock-helpers" &&
		printf '%s\n' "$1/.airlock-helpers"
}

done_testing() {
	echo "1..$tap_n"
	[ "$tap_failed" -eq 0 ]
	exit $?
}
