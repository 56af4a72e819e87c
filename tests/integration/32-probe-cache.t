#!/bin/sh
# The capability probe's answer, cached per boot: a cache is used only
# when it is this boot's, this binary's, this user's (in these namespaces,
# under these limits), owned by the user with mode 0600 and byte for byte
# what airlock wrote; anything else is ignored and the host probed again.
# A cache is told apart from a probe by a forged Landlock ABI (42), which
# only the session.start receipt shows (the sandbox asks the kernel again).
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "1..0 # SKIP needs root (owner changes of the cache file)"
	exit 0
fi
export AIRLOCK_PROBE_CACHE_DIR="$T/pc"
C="$T/pc/probe"
mkdir "$T/ws"
echo '{"version": 1, "mode": "enforce"}' > "$T/enforce.json"

# run: an enforce start of true; prints the Landlock ABI its session.start
# receipt names (from the probe or the cache), or "failed".
run() {
	rm -f "$T/ev.jsonl"
	"$AIRLOCK" run --policy "$T/enforce.json" --workspace "$T/ws" \
		--events "$T/ev.jsonl" -- true >"$T/run.out" 2>&1 || { echo failed; return; }
	python3 - "$T/ev.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "session.start":
        print(r["subject"]["capabilities"]["landlock"])
PY
}

# forge SED: applies SED to the cache's lines but the last, then writes
# a "sum" line that matches them (what a forger with write access does).
forge() {
	head -n -1 "$C" | sed "$1" > "$T/body"
	{ cat "$T/body"; printf 'sum %s\n' "$(sha256sum < "$T/body" | cut -d' ' -f1)"; } > "$C.new"
	chmod 0600 "$C.new"
	mv "$C.new" "$C"
}
forty_two='s/^\(caps .*\) [0-9][0-9]*$/\1 42/'

real=$(run)
like "$real" '^[0-9]+$' "an enforce start with no cache probes (Landlock ABI $real)"
ok "$([ -f "$C" ] && [ ! -L "$C" ]; echo $?)" "and caches the answer in AIRLOCK_PROBE_CACHE_DIR"
is "$(stat -c '%a %u' "$C" "$T/pc" | tr '\n' ' ')" "600 0 700 0 " \
	"the cache is root's, mode 0600, in a directory of mode 0700"
grep -q "^boot $(cat /proc/sys/kernel/random/boot_id)\$" "$C"
ok $? "it names this boot"

forge "$forty_two"
is "$(run)" 42 "a cache that matches is used: no probe"

# Each of these starts from the matching forged cache, changes one thing,
# and must be ignored: the host is probed and the cache rewritten.
ignored() {
	got=$(run)
	is "$got" "$real" "$1: ignored, the host probed"
	if [ "${2:-}" != kept ]; then
		grep -q " 42\$" "$C"
		is "$?" 1 "$1: and the cache rewritten with the probe's answer"
	fi
	forge "$forty_two"
}

forge 's/^boot .*/boot 00000000-0000-4000-8000-000000000000/'
forge "$forty_two"
ignored "a cache of another boot"

forge 's/^exe \([0-9]*\) [0-9]*/exe \1 1/'
forge "$forty_two"
ignored "a cache of another binary"

forge 's/^ids .*/ids 1000 1000 1000 1000/'
forge "$forty_two"
ignored "a cache of another user"

forge 's/^sysctl [^ ]*/sysctl 0/'
forge "$forty_two"
ignored "a cache made under other namespace limits"

chown 65534 "$C"
ignored "a cache owned by another user"

chmod 0644 "$C"
ignored "a cache of mode 0644"

# (a directory others may write is neither read nor written)
chmod 0777 "$T/pc"
ignored "a cache in a directory others may write" kept
chmod 0700 "$T/pc"

sed -i 's/^caps .* 42$/caps 1 1 1 1 1 1 1 43/' "$C"
ignored "a cache edited without its sum"

printf 'garbage\n' >> "$C"
ignored "a cache with bytes after its sum"

ln "$C" "$T/pc/link"
ignored "a cache with a second link"
rm -f "$T/pc/link"

mv "$C" "$T/elsewhere"
ln -s "$T/elsewhere" "$C"
ignored "a cache that is a symbolic link"

forge 's/^caps 1/caps 0/'
got=$(run)
is "$got" "$real" "a cache that says a namespace is missing is not trusted either: probed"

forge "$forty_two"
out=$("$AIRLOCK" doctor)
like "$out" "\"landlock\":$real," "doctor never reads the cache: it probes"
grep -q " 42\$" "$C"
is "$?" 1 "and rewrites the cache with what it found"

# Fail closed: a cache made before user namespaces were forbidden is not
# used after (the limit is part of what the answer was cached under).
out=$(unshare --user --map-root-user -- sh -c '
	"$0" run --policy "$1" --workspace "$2" --events "$3/ev1.jsonl" -- true || exit 9
	[ -f "$AIRLOCK_PROBE_CACHE_DIR/probe" ] || exit 8
	echo 0 > /proc/sys/user/max_user_namespaces
	exec "$0" run --policy "$1" --workspace "$2" --events "$3/ev2.jsonl" -- true' \
	"$AIRLOCK" "$T/enforce.json" "$T/ws" "$T" 2>&1)
status=$?
ok "$([ "$status" -ne 0 ] && [ "$status" -ne 9 ] && [ "$status" -ne 8 ]; echo $?)" \
	"enforce is refused once user namespaces are forbidden, cache or not (exit $status)"
like "$out" "needs userns" "the refusal names what the probe found missing"

done_testing
