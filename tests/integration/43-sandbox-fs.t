#!/bin/sh
# The sandbox's filesystem view: the host read-only, the
# workspace and fs.rw writable, a private /tmp, /var/tmp and $HOME, the
# caller's credentials hidden (/root, /home, /etc/shadow, ...), fs.ro shown
# and fs.hide masked, the workspace's repository configuration and hooks
# and fs.protect read-only, a fresh /proc of its own PID namespace and a
# minimal /dev; no mounts.
#
# Nothing here modifies an existing host file: a broken sandbox would let
# the writes below through (we may be root), so they only ever create new,
# uniquely named files, which the exit trap removes.
. "$(dirname "$0")/lib.sh"

# $V is under the private /var/tmp, shown on purpose (fs.ro): what is there
# is masked or made writable by airlock itself, not hidden by the view.
V=$(mktemp -d /var/tmp/airlock-test43.XXXXXX)
TAG="airlock-t43-$$"
HOSTTMP="/tmp/$TAG-host"
SSHKEY="/etc/ssh/ssh_host_airlock$$_key"
trap 'rm -rf "$T" "$V" "$HOSTTMP" "/tmp/$TAG-inside" "/usr/$TAG" "/etc/$TAG" "$AIRLOCK_SRC/$TAG" "/var/tmp/$TAG" "/var/tmp/$TAG-host" "/root/$TAG" "/srv/$TAG" "$SSHKEY"' EXIT

WS="$T/ws"
mkdir "$WS" "$V/rw" "$V/ro" "$V/hidden-dir"
echo "hidden-content-$$" > "$V/hidden-dir/inner"
echo "hidden-file-content-$$" > "$V/hidden-file"
echo "victim" > "$V/ro/victim"
POL="$T/policy.json"
cat > "$POL" <<EOF
{"version": 1, "mode": "enforce",
 "fs": {"ro": ["$V"], "rw": ["$V/rw"], "hide": ["$V/hidden-dir", "$V/hidden-file"]}}
EOF
"$AIRLOCK" check "$POL" >/dev/null
ok $? "the test policy is valid"

# sandbox ARGS...: runs ARGS in the sandbox (enforce, the policy above),
# stdout and stderr in $T/out; returns airlock's status.
sandbox() {
	"$AIRLOCK" run --policy "$POL" --workspace "$WS" --events "$T/ev.jsonl" -- "$@" \
		>"$T/out" 2>&1 </dev/null
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
(cd "$WS/sub" && "$AIRLOCK" run --enforce --events "$T/ev.jsonl" -- \
	sh -c 'echo cwd-default > default.txt' </dev/null >/dev/null 2>&1)
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
sandbox sh -c 'grep -c " /mnt " /proc/self/mountinfo; mount -t tmpfs none /mnt 2>/dev/null; grep -c " /mnt " /proc/self/mountinfo'
is "$(out | sort -u | wc -l)" 1 "and nothing more is mounted on /mnt"
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

# --- what the view hides: the caller's credentials, the host's daemons -------

# Each of these, where the host has it, is an empty directory inside (the
# control: /var/lib is not empty outside).
like "$(ls -A /var/lib | wc -l)" '^[1-9]' "control: /var/lib is not empty outside"
sandbox sh -c 'for d in /root /home /run /var/run /var/lib /var/spool /var/mail /srv /mnt /media; do
	[ -e "$d" ] || continue; echo "$d $(ls -A "$d" 2>/dev/null | wc -l)"; done'
if out | grep -qv ' 0$'; then
	ok 1 "/root /home /run /var/lib /var/spool /var/mail /srv /mnt /media are empty inside"
	diag_file "$T/out"
else
	ok 0 "/root /home /run /var/lib /var/spool /var/mail /srv /mnt /media are empty inside"
fi
sandbox sh -c 'touch /var/lib/x 2>/dev/null && echo WRITTEN; ls -A /var/lib | wc -l'
is "$(out)" 0 "a hidden directory cannot be written either"
# Read-only as a mount, not only by Landlock (which a kernel may lack).
sandbox sh -c 'awk "\$5 == \"/var/lib\" || \$5 == \"/root\" { print \$6 }" /proc/self/mountinfo | cut -d, -f1 | sort -u'
is "$(out)" "ro" "hidden directories are read-only mounts"

if [ -w /root ] && [ -w /srv ]; then
	echo "root-secret-$$" > "/root/$TAG"
	mkdir -p "/srv/$TAG"
	echo "srv-secret-$$" > "/srv/$TAG/f"
	sandbox sh -c 'cat "$1" "$2"; echo read' sh "/root/$TAG" "/srv/$TAG/f"
	is "$(out | grep -v ': No such file')" "read" "a file in /root and one in /srv are not there inside"
else
	ok 0 "# skip /root and /srv are not writable here"
fi

# /etc/shadow: uid 0 inside (a root caller) owns it, so only the mask keeps
# it unreadable.
if [ -r /etc/shadow ]; then
	like "$(head -c 5 /etc/shadow)" '.' "control: /etc/shadow is readable outside"
fi
sandbox sh -c 'for f in /etc/shadow /etc/gshadow /etc/sudoers; do [ -e "$f" ] && { cat "$f" 2>/dev/null | wc -c; }; done | sort -u'
is "$(out)" "0" "/etc/shadow, /etc/gshadow and /etc/sudoers show nothing inside"
if [ -d /etc/ssh ] && [ -w /etc/ssh ]; then
	echo "ssh-host-key-$$" > "$SSHKEY"
	sandbox sh -c 'cat "$1"; ls /etc/ssh >/dev/null && echo listed' sh "$SSHKEY"
	is "$(out | grep -v 'Permission denied')" "listed" "an SSH host private key is unreadable inside, /etc/ssh is still there"
	rm -f "$SSHKEY"
else
	ok 0 "# skip /etc/ssh is not writable here"
fi

# The caller's $HOME, wherever it is (here below $V, which fs.ro shows):
# private, empty and writable inside, at the same path, owned by the caller;
# what is written there stays there.
H="$V/home"
mkdir -p "$H/.config/gh"
echo "oauth_token: gho_secret$$" > "$H/.config/gh/hosts.yml"
echo "https://u:secret$$@example.test" > "$H/.git-credentials"
HOME="$H" sandbox sh -c 'echo "home $HOME"; ls -A "$HOME" | wc -l; stat -c "%u %a" "$HOME"
	cat "$HOME/.git-credentials" "$HOME/.config/gh/hosts.yml" 2>/dev/null
	mkdir -p "$HOME/.npm/_cacache" "$HOME/.cache/pip" && echo cached > "$HOME/.cache/pip/x" && cat "$HOME/.cache/pip/x"'
is "$(out | tr '\n' ';')" "home $H;0;$(id -u) 700;cached;" \
	"\$HOME is private: empty, mode 0700, the caller's, writable (caches work), no credential shows"
[ ! -e "$H/.cache" ] && [ ! -e "$H/.npm" ]
ok $? "what was written to \$HOME inside is not in the real one"
is "$(cat "$H/.git-credentials")" "https://u:secret$$@example.test" "the real \$HOME is intact"

# A workspace below a hidden path (a project in the home directory) is
# shown all the same, writable, and only it.
mkdir -p "$H/src/proj"
HOME="$H" "$AIRLOCK" run --policy "$POL" --workspace "$H/src/proj" --events "$T/ev.jsonl" -- \
	sh -c 'pwd; echo made > made.txt; ls -A "$HOME"; ls -A "$HOME/src"' >"$T/out" 2>&1 </dev/null
is "$(out | tr '\n' ' ')" "$H/src/proj src proj " "a workspace inside the hidden \$HOME is there, alone"
is "$(cat "$H/src/proj/made.txt" 2>/dev/null)" "made" "and writable"

# A private /var/tmp.
echo host > "/var/tmp/$TAG-host"
sandbox sh -c 'test -e "$1" && echo visible; echo inside > "$2" && cat "$2"' sh "/var/tmp/$TAG-host" "/var/tmp/$TAG"
is "$(out)" "inside" "/var/tmp is private and writable inside"
[ ! -e "/var/tmp/$TAG" ]
ok $? "a file written to /var/tmp inside does not appear outside"

# fs.ro shows a hidden path read-only: here a directory of the host's /tmp
# (hidden by the private /tmp) and one below /var/lib.
LIBDIR=$(find /var/lib -mindepth 1 -maxdepth 1 -type d -readable | sort | head -n 1)
mkdir "$T/shown"
echo "shown-$$" > "$T/shown/f"
printf '{"version": 1, "mode": "enforce", "fs": {"ro": ["%s", "%s"]}}\n' "$T/shown" "$LIBDIR" > "$T/ro.json"
"$AIRLOCK" run --policy "$T/ro.json" --workspace "$WS" --events "$T/ev.jsonl" -- \
	sh -c 'exec 2>/dev/null; cat "$1/f"; echo x > "$1/g" || echo read-only; ls -A /var/lib; ls "$2" | wc -l' \
	sh "$T/shown" "$LIBDIR" >"$T/out" 2>&1 </dev/null
is "$(out | sed -n 1,3p | tr '\n' ' ')" "shown-$$ read-only $(basename "$LIBDIR") " \
	"fs.ro shows a path of the host's /tmp and one below /var/lib, read-only, and nothing else there"
is "$(out | sed -n 4p)" "$(ls "$LIBDIR" | wc -l)" "with its content"
printf '{"version": 1, "mode": "enforce", "fs": {"ro": ["/"]}}\n' > "$T/ro-root.json"
"$AIRLOCK" run --policy "$T/ro-root.json" --workspace "$WS" --events "$T/ev.jsonl" -- true 2>"$T/err"
is "$?" 125 "fs.ro of / is refused"
printf '{"version": 1, "mode": "enforce", "fs": {"ro": ["/proc/1"]}}\n' > "$T/ro-proc.json"
"$AIRLOCK" run --policy "$T/ro-proc.json" --workspace "$WS" --events "$T/ev.jsonl" -- true 2>"$T/err"
is "$?" 125 "an fs.ro path in /proc is refused (it would show the host's)"

# --- the workspace's repository: output the host acts on later -------------

if command -v git >/dev/null 2>&1; then
	export GIT_CONFIG_NOSYSTEM=1
	g() { git -c user.name=T -c user.email=t@example.test "$@"; }
	R="$T/repo"
	g init -q "$T/upstream"
	g -C "$T/upstream" commit -q --allow-empty -m up
	g clone -q "$T/upstream" "$R" 2>/dev/null
	g -C "$R" commit -q --allow-empty -m first
	mkdir -p "$R/.github/workflows"
	echo "on: push" > "$R/.github/workflows/ci.yml"
	echo "all:" > "$R/Makefile"
	cp "$R/.git/config" "$T/config.before"
	ls -A "$R/.git/hooks" > "$T/hooks.before"
	cat > "$T/git.json" <<EOF
{"version": 1, "mode": "enforce",
 "env": {"pass": ["PATH", "HOME"],
         "set": {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.test",
                 "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.test"}},
 "fs": {"ro": ["$T/upstream"], "protect": ["Makefile", ".github/workflows"]}}
EOF
	"$AIRLOCK" check "$T/git.json" >/dev/null
	ok $? "the repository policy is valid"
	# gitrun MODE SCRIPT: runs sh -c SCRIPT in the repository, its
	# stderr dropped (the script says what worked).
	gitrun() {
		"$AIRLOCK" run --mode "$1" --policy "$T/git.json" --workspace "$R" \
			--events "$T/git.jsonl" -- sh -c "exec 2>/dev/null; $2" "$T" >"$T/out" 2>&1 </dev/null
	}
	gitrun enforce 'echo a > a.txt && git add a.txt && git commit -qm inside && echo commit
		git branch inside-branch && echo branch
		git fetch -q origin && echo fetch
		git config core.fsmonitor "touch $0/fsmonitor-ran" 2>/dev/null && echo CONFIG
		echo "#!/bin/sh" > .git/hooks/pre-commit 2>/dev/null && echo HOOK
		echo x >> .git/info/exclude 2>/dev/null && echo EXCLUDE
		echo "[core] fsmonitor = x" >> .git/config && echo CONFIG-APPENDED
		mv .git/config .git/config.x 2>/dev/null && echo CONFIG-MOVED
		mv .git gone 2>/dev/null && echo GIT-MOVED
		rm -rf .git/hooks 2>/dev/null; [ -d .git/hooks ] || echo HOOKS-REMOVED
		echo x >> Makefile 2>/dev/null && echo MAKEFILE
		rm -f .github/workflows/ci.yml 2>/dev/null; [ -f .github/workflows/ci.yml ] || echo CI-REMOVED
		mv .github gh 2>/dev/null && echo GITHUB-MOVED
		echo fine > other.txt && echo other'
	is "$(out | tr '\n' ' ')" "commit branch fetch other " \
		"inside: commit, branch, fetch and other files work; config, hooks, info, .git, fs.protect paths do not change"
	cmp -s "$R/.git/config" "$T/config.before"
	ok $? "outside afterwards: .git/config is unchanged"
	ls -A "$R/.git/hooks" | cmp -s - "$T/hooks.before"
	ok $? "the hooks are unchanged"
	is "$(g -C "$R" log -1 --format=%s)" "inside" "the commit made inside is there"
	g -C "$R" rev-parse -q --verify inside-branch >/dev/null
	ok $? "so is the branch"
	is "$(cat "$R/Makefile")" "all:" "the protected Makefile is unchanged"
	(cd "$R" && git status --short >/dev/null 2>&1)
	[ ! -e "$T/fsmonitor-ran" ]
	ok $? "the host's git status afterwards runs nothing the agent planted"

	gitrun shadow 'git config core.fsmonitor "touch /tmp/x" 2>/dev/null && echo CONFIG; echo "#!/bin/sh" > .git/hooks/post-checkout 2>/dev/null && echo HOOK; echo ran'
	is "$(out)" "ran" "shadow mode keeps them read-only too"

	# Missing hooks and info directories are made (empty), so that the
	# agent cannot make them.
	rm -rf "$R/.git/hooks" "$R/.git/info"
	gitrun enforce 'mkdir -p .git/hooks 2>/dev/null; echo "#!/bin/sh" > .git/hooks/pre-commit 2>/dev/null && echo HOOK; echo ran'
	is "$(out)" "ran" "a repository without .git/hooks: no hook can be made"
	is "$(ls -A "$R/.git/hooks" 2>/dev/null | wc -l)" 0 "an empty .git/hooks is there afterwards"

	printf '{"version": 1, "mode": "enforce", "fs": {"protect": ["missing/file"]}}\n' > "$T/missing.json"
	"$AIRLOCK" run --policy "$T/missing.json" --workspace "$R" --events "$T/missing.jsonl" -- true 2>"$T/err"
	is "$?" 125 "an fs.protect path that does not exist is refused (the agent could create it)"
	like "$(cat "$T/err")" "fs.protect path missing/file does not exist" "naming it"

	mkdir "$T/linked"
	ln -s "$R/.git" "$T/linked/.git"
	"$AIRLOCK" run --enforce --workspace "$T/linked" --events "$T/linked.jsonl" -- true 2>"$T/err"
	is "$?" 125 "a workspace whose .git is a symbolic link is refused"
else
	ok 0 "# skip git is not installed"
fi

done_testing
