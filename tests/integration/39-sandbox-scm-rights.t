#!/bin/sh
# Descriptor passing through the unix-socket gate (docs/UNIX-SOCKETS.md,
# issue 27): whatever layout of control messages the kernel accepts, the
# gate accepts and delivers - SCM_RIGHTS with msg_controllen = CMSG_LEN(n)
# (the last message unpadded, as Chromium sends its GPU process's
# descriptors), with and without the sender's own SCM_CREDENTIALS, several
# messages, by sendmsg() and sendmmsg(), on socketpairs and pathname
# sockets, to receivers with and without SO_PASSCRED - and still refuses
# what the kernel refuses an unprivileged sender. Then headless Chromium, which aborted with "GPU
# process isn't usable" before, renders a workspace page inside.
. "$(dirname "$0")/lib.sh"
: "${AIRLOCK_HELPERS:?AIRLOCK_HELPERS must name the directory of the built test helpers}"

WS="$T/ws"
mkdir "$WS"
chmod 0755 "$T" "$WS"
HELPERS=$(helpers_in "$WS") || exit 1
SCM="$HELPERS/scm_rights"

# sandbox MODE ARGS...: runs ARGS in the sandbox, output in $T/out.
sandbox() {
	mode=$1
	shift
	(cd "$WS" && "$AIRLOCK" run --mode "$mode" --workspace "$WS" --events "$T/$mode.jsonl" -- "$@") \
		>"$T/out" 2>&1 </dev/null
}

mkdir "$T/outside"
"$SCM" "$T/outside" >"$T/out" 2>&1
ok $? "outside: the kernel accepts every layout the test sends"
diag_failed() {
	grep -v '^ok ' "$T/out" | head -n 20 | while IFS= read -r l; do diag "$l"; done
}

for mode in enforce shadow; do
	sandbox "$mode" "$SCM" "$WS"
	st=$?
	ok "$st" "$mode: every descriptor passed arrives, every layout (CMSG_LEN and CMSG_SPACE)"
	[ "$st" -eq 0 ] || diag_failed
	is "$(grep -c '^ok ' "$T/out")" 240 "$mode: all 240 cases ran"
	is "$(grep -F 'pair stream: rights CMSG_LEN k=1 passcred=1' "$T/out")" \
		"ok pair stream: rights CMSG_LEN k=1 passcred=1" \
		"$mode: one descriptor, msg_controllen = CMSG_LEN(sizeof(int)), credentials added"
done

sandbox enforce "$SCM" refuse
is "$(cat "$T/out")" "EINVAL EPERM" \
	"a header longer than the buffer is EINVAL, credentials naming another pid EPERM"

# Headless Chromium, on a page in the workspace (file:// only; the
# sandbox's network namespace has nothing but its own loopback).
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP chromium is not installed (scripts/install-deps --test)"
else
	cat >"$WS/page.html" <<'EOF'
<html><body><p id="m">airlock-page</p>
<script>document.getElementById("m").textContent += "-rendered";</script>
</body></html>
EOF
	(cd "$WS" && timeout 120 "$AIRLOCK" run --enforce --workspace "$WS" \
		--events "$T/chromium.jsonl" -- "$CHROMIUM" --headless --no-sandbox --disable-gpu \
		--disable-background-networking --disable-component-update --no-first-run \
		--disable-sync --dump-dom "file://$WS/page.html") >"$T/dom" 2>"$T/chromium.err" </dev/null
	st=$?
	is "$st" 0 "chromium --headless starts and exits inside airlock run --enforce"
	[ "$st" -eq 0 ] || diag_file "$T/chromium.err"
	like "$(cat "$T/dom")" "airlock-page-rendered" "it renders the workspace page (scripts run)"
	grep -q "GPU process isn't usable" "$T/chromium.err"
	ok $((!$?)) "no \"GPU process isn't usable\""
fi

done_testing
