#!/bin/sh
# The sandbox's filesystem view (SPEC §3.6, §4): the host read-only, the
# workspace and fs.rw writable, a private /tmp, fs.hide masked, a fresh
# /proc of its own PID namespace and a minimal /dev; no mounts.
#
# Nothing here modifies an existing host file: a broken sandbox would let
# the writes below through (we may be root), so they only ever create new,
# uniquely named files, which the exit trap removes.
. "$(dirname "$0")/lib.sh"

# Outside /tmp: the host root is visible (read-only) inside, so what is
# here is masked or made writable by airlock itself, not by the private /tmp.
V=$(mktemp -d /var/tmp/airlock-test43.XXXXXX)
TAG="airlock-t43-$$"
HOSTTMP="/tmp/$TAG-host"
trap 'rm -rf "$T" "$V" "$HOSTTMP" "/tmp/$TAG-inside" "/usr/$TAG" "/etc/$TAG" "$HOME/$TAG" "$AIRLOCK_SRC/$TAG" "/var/tmp/$TAG"' EXIT

WS="$T/ws"
mkdir "$WS" "$V/rw" "$V/ro" "$V/hidden-dir"
echo "hidden-content-$$" > "$V/hidden-dir/inner"
echo "hidden-file-content-$$" > "$V/hidden-file"
echo "victim" > "$V/ro/victim"
POL="$T/policy.json"
cat > "$POL" <<EOF
{"version": 1, "mode": "enforce",
 "fs": {"rw": ["$V/rw"], "hide": ["$V/hidden-dir", "$V/hidden-file"]}}
EOF
"$AIRLOCK" check "$POL" >/dev/null
ok $? "the test policy is valid"

# sandbox ARGS...: runs ARGS in the sandbox (enforce, the policy above),
# stdout and stderr in $T/out; returns airlock's status.
sandbox() {
	"$AIRLOCK" run --policy "$POL" --workspace "$WS" -- "$@" >"$T/out" 2>&1 </dev/null
}
out() {
	cat "$T/out"
}
# cannot_create PATH: creating PATH fails inside, and it does not exist
# outside afterwards.
cannot_create() {
	sandbox sh -c 'echo x > "$1"' sh "$1"
	st=$?
	if [ "$st" -ne 0 ] && [ ! -e "$1" ]; then
		ok 0 "writing $1 fails"
	else
		ok 1 "writing $1 fails"
		printf '#   status %s, exists outside: %s\n' "$st" "$([ -e "$1" ] && echo yes || echo no)"
	fi
}

# --- the host is read-only ------------------------------------------------------

cannot_create "/usr/$TAG"
cannot_create "/etc/$TAG"
cannot_create "$HOME/$TAG"
cannot_create "/var/tmp/$TAG"
case "$WS" in
"$AIRLOCK_SRC"/*) ok 0 "# skip the workspace is inside the repository" ;;
*) cannot_create "$AIRLOCK_SRC/$TAG" ;;
esac
sandbox mkdir "/etc/$TAG"
[ $? -ne 0 ] && [ ! -e "/etc/$TAG" ]
ok $? "mkdir under /etc fails"
sandbox rm -f "$V/ro/victim"
is "$(cat "$V/ro/victim" 2>/dev/null)" "victim" "a host file cannot be removed"
sandbox sh -c 'echo changed > "$1"' sh "$V/ro/victim"
is "$(cat "$V/ro/victim")" "victim" "a host file cannot be overwritten"
sandbox chmod 0777 "$V/ro/victim"
[ $? -ne 0 ]
ok $? "a host file cannot be chmod-ed"

# --- writable: the workspace, fs.rw -------------------------------------------------

sandbox sh -c 'pwd; echo "from-inside-$1" > written.txt' sh "$$"
is "$?" 0 "the workspace is writable"
is "$(out)" "$WS" "the command starts in the workspace, at the same path"
is "$(cat "$WS/written.txt" 2>/dev/null)" "from-inside-$$" "what is written there is visible outside afterwards"

mkdir "$WS/sub"
(cd "$WS/sub" && "$AIRLOCK" run --enforce -- sh -c 'echo cwd-default > default.txt' </dev/null >/dev/null 2>&1)
is "$(cat "$WS/sub/default.txt" 2>/dev/null)" "cwd-default" "without --workspace, the current directory is the workspace"

sandbox sh -c 'echo "rw-$1" > "$2/made.txt"' sh "$$" "$V/rw"
is "$?" 0 "an fs.rw directory is writable"
is "$(cat "$V/rw/made.txt" 2>/dev/null)" "rw-$$" "and the write is visible outside"
cannot_create "$V/ro/$TAG"

# --- a private /tmp -----------------------------------------------------------------

echo host > "$HOSTTMP"
sandbox sh -c 'test -e "$1" && echo visible; echo checked' sh "$HOSTTMP"
is "$(out)" "checked" "a file in the host's /tmp is not visible inside"
sandbox sh -c 'echo inside > "$1" && cat "$1"' sh "/tmp/$TAG-inside"
is "$(out)" "inside" "/tmp is writable inside"
[ ! -e "/tmp/$TAG-inside" ]
ok $? "a file written to /tmp inside does not appear outside"

# --- fs.hide -------------------------------------------------------------------------

sandbox cat "$V/hidden-dir/inner"
[ $? -ne 0 ] && ! grep -q "hidden-content" "$T/out"
ok $? "a file inside an fs.hide directory cannot be read"
sandbox sh -c 'ls -A "$1"; echo listed' sh "$V/hidden-dir"
is "$(out | grep -v '^ls:')" "listed" "an fs.hide directory shows nothing"
sandbox cat "$V/hidden-file"
[ $? -ne 0 ] && ! grep -q "hidden-file-content" "$T/out"
ok $? "an fs.hide file cannot be read"
sandbox sh -c 'echo x > "$1"' sh "$V/hidden-dir/$TAG"
[ $? -ne 0 ] && [ ! -e "$V/hidden-dir/$TAG" ]
ok $? "an fs.hide directory cannot be written"
is "$(cat "$V/hidden-dir/inner")" "hidden-content-$$" "the hidden directory is intact outside"
is "$(cat "$V/hidden-file")" "hidden-file-content-$$" "the hidden file is intact outside"

# --- mounts -----------------------------------------------------------------------------

sandbox mount -t tmpfs none /mnt
[ $? -ne 0 ]
ok $? "mount -t tmpfs none /mnt fails"
sandbox sh -c 'mount -t tmpfs none /mnt; grep -c " /mnt " /proc/self/mountinfo'
is "$(out | tail -n 1)" 0 "and nothing is mounted on /mnt"
sandbox umount -l /proc
[ $? -ne 0 ]
ok $? "umount /proc fails"

# --- /proc --------------------------------------------------------------------------------

sandbox sh -c 'cat /proc/1/comm; readlink /proc/self/ns/pid'
like "$(out | head -n 1)" '^airlock$' "/proc/1 is airlock's init"
[ "$(cat /proc/1/comm)" != airlock ]
ok $? "control: the host's pid 1 is not airlock"
inside_ns=$(out | sed -n 2p)
like "$inside_ns" '^pid:\[[0-9]+\]$' "the sandbox's /proc shows its PID namespace"
[ "$inside_ns" != "$(readlink /proc/self/ns/pid)" ]
ok $? "a PID namespace other than the host's"

# --- /dev ---------------------------------------------------------------------------------

sandbox sh -c 'for d in null zero full random urandom tty; do test -c "/dev/$d" && echo "$d"; done; test -d /dev/pts && echo pts'
is "$(out | tr '\n' ' ')" "null zero full random urandom tty pts " "/dev has null zero full random urandom tty and /dev/pts"
# (A loop, not find -type c: the nodes are bind mounts over files of the
# /dev tmpfs, whose directory entries say "regular file".)
sandbox sh -c 'for f in /dev/* /dev/pts/* /dev/shm/*; do [ -c "$f" ] && [ ! -L "$f" ] && echo "$f"; done | tr "\n" " "'
is "$(out)" "/dev/full /dev/null /dev/random /dev/tty /dev/urandom /dev/zero /dev/pts/ptmx " "and no other character device"
sandbox sh -c 'find /dev -exec test -b {} \; -print | wc -l'
is "$(out)" 0 "and no block device"
sandbox sh -c 'stat -f -c %T /dev/pts; ls -A /dev/pts | tr "\n" " "'
is "$(out | tr "\n" ";")" "devpts;ptmx " "/dev/pts is a devpts of its own (none of the host's ptys)"
sandbox sh -c 'echo x > /dev/null && head -c 4 /dev/zero | od -An -tx1 | tr -d " " && head -c 16 /dev/urandom | wc -c && head -c 1 /dev/zero > /dev/full'
is "$(out | head -n 2 | tr '\n' ' ')" "00000000 16 " "/dev/null, /dev/zero and /dev/urandom work"
like "$(out | tail -n 1)" "No space left on device" "/dev/full is full"

# --- what a review found: each of these once opened the host ------------------------

# A workspace of / would lay the host, writable, over the private /tmp,
# /proc and /dev: refused, with a receipt.
(cd / && "$AIRLOCK" run --policy "$POL" --events "$T/root-ws.jsonl" -- true) 2>"$T/err"
is "$?" 125 "a workspace of / is refused (125)"
is "$(wc -l < "$T/err")" 1 "with one line"
like "$(cat "$T/err")" "the workspace is /" "saying why"
like "$(head -n 1 "$T/root-ws.jsonl")" '"type":"session.refused","decision":"block".*"rule":"workspace"' "and a session.refused receipt"
printf '{"version": 1, "mode": "enforce", "fs": {"rw": ["/dev/shm"]}}\n' > "$T/rwdev.json"
"$AIRLOCK" run --policy "$T/rwdev.json" --workspace "$WS" -- true 2>"$T/err"
is "$?" 125 "an fs.rw path inside /dev is refused"

# The kernel knobs under /proc: read-only even for uid 0 inside, whatever
# Landlock does (opening for writing changes nothing, so nothing is risked).
sandbox python3 -c '
import errno, os
for p in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
    try:
        os.close(os.open(p, os.O_WRONLY))
        print(p, "WRITABLE")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
'
like "$(out)" "core_pattern EROFS" "/proc/sys is read-only"
if out | grep -q WRITABLE; then ok 1 "no /proc knob is writable"; else ok 0 "no /proc knob is writable"; fi

# Host daemons' pathname sockets under /run: masked (a read-only mount does
# not stop connect()).
mkdir -p /run/airlock-test
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(5); s.settimeout(15)
try:
    c, _ = s.accept(); open(sys.argv[2], "w").write("REACHED")
except OSError:
    pass
' /run/airlock-test/host-$$.sock "$T/unix.hit" &
upid=$!
i=0
while [ ! -S /run/airlock-test/host-$$.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
sandbox python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("CONNECTED")
except OSError as e:
    print("refused:", e.strerror)
' /run/airlock-test/host-$$.sock
like "$(out)" "refused: No such file or directory" "a host socket under /run cannot be reached"
sandbox sh -c 'ls -A /run | wc -l'
is "$(out)" 0 "/run is empty inside"
kill "$upid" 2>/dev/null
wait "$upid" 2>/dev/null
[ ! -f "$T/unix.hit" ]
ok $? "the host listener saw no connection"
rm -rf /run/airlock-test

# The workspace is writable but nosuid and nodev: a setuid file left there
# does not become a way in for anyone.
sandbox sh -c 'awk -v ws="$PWD" "\$5 == ws { print \$6 }" /proc/self/mountinfo | tail -n 1'
like "$(out)" "nosuid" "the workspace is mounted nosuid"
like "$(out)" "nodev" "and nodev"

done_testing
