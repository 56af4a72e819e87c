#!/bin/sh
# The sandbox as an unprivileged user (where user namespaces are allowed):
# the same isolation, built without any privilege of the caller.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
	echo "1..0 # SKIP needs root to become an unprivileged user (setpriv)"
	exit 0
fi
chmod 0755 "$T"
mkdir "$T/ws"
chown 65534:65534 "$T/ws"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

out=$(cd "$T/ws" && as_nobody "$AIRLOCK" doctor)
is "$?" 0 "doctor: enforce mode can run as nobody"

out=$(cd "$T/ws" && UNPRIV_SECRET=s3cret-unpriv as_nobody "$AIRLOCK" run --enforce \
	--events "$T/ws/ev.jsonl" -- sh -c '
		id -u
		touch "$PWD/written" && echo ws-writable
		touch /etc/airlock-unpriv 2>/dev/null || echo etc-read-only
		ls /proc | grep -c "^[0-9]"
		grep -c s3cret-unpriv /proc/self/environ /proc/1/environ 2>/dev/null | grep -v ":0" || echo no-secret
		"$1" tcp 127.0.0.1 9 || true
		"$1" unshare-user || true
	' sh "$AIRLOCK_HELPERS/probe" 2>&1)
is "$?" 0 "run --enforce as nobody succeeds"
like "$out" "^65534" "the agent runs as the caller's uid"
like "$out" "ws-writable" "the workspace is writable"
like "$out" "etc-read-only" "the host is read-only"
like "$out" "no-secret" "an unlisted variable's value is nowhere in /proc"
like "$out" "denied: ECONNREFUSED" "no network but loopback of its own"
like "$out" "denied: EPERM" "no new user namespace"
[ -f "$T/ws/written" ]
ok $? "the file written inside is there outside"
is "$(stat -c %u "$T/ws/written")" 65534 "and belongs to the caller"
"$AIRLOCK" verify "$T/ws/ev.jsonl" >/dev/null
is "$?" 0 "the receipts verify"
like "$(head -n 1 "$T/ws/ev.jsonl")" '"enforce_ready":true' "session.start lists the capabilities in force"

done_testing
