#!/bin/sh
# airlock doctor: the probe reports what the kernel really allows.
. "$(dirname "$0")/lib.sh"

out=$("$AIRLOCK" doctor)
status=$?
printf '%s\n' "$out" > "$T/doctor.json"
python3 - "$T/doctor.json" "$status" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
status = int(sys.argv[2])
n = 0
def ok(c, msg):
    global n
    n += 1
    print(("ok" if c else "not ok"), n, "-", msg)
keys = ["userns", "netns", "pidns", "mountns", "ipcns", "utsns", "seccomp", "landlock", "transparent", "enforce_ready", "missing"]
ok(list(d.keys()) == keys, "doctor prints its keys in the documented order: %s" % list(d.keys()))
ok(all(isinstance(d[k], bool) for k in keys[:7] + ["transparent", "enforce_ready"]), "capabilities are booleans")
ok(isinstance(d["landlock"], int) and not isinstance(d["landlock"], bool) and d["landlock"] >= 0, "landlock is an ABI number")
ok(d["missing"] == [k for k in keys[:7] if not d[k]], "missing lists exactly the absent capabilities")
ok(d["enforce_ready"] == (d["missing"] == []), "enforce_ready iff nothing is missing")
ok((status == 0) == d["enforce_ready"], "exit status 0 iff enforce_ready")
print("# this host:", json.dumps(d))
PY
tap_n=6

# This test runs as root or in a user namespace, where all of them work.
like "$out" '"userns":true,"netns":true,"pidns":true,"mountns":true' "namespaces are available here"
like "$out" '"seccomp":true' "seccomp is available here"

# Forbid new user namespaces in a throwaway user namespace: the probe must
# see that (it really tries), report it missing and exit 1.
out=$(unshare --user --map-root-user -- sh -c \
	'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" doctor' "$AIRLOCK")
is "$?" 1 "doctor exits 1 when user namespaces are refused"
like "$out" '"userns":false' "userns reported false"
like "$out" '"enforce_ready":false,"missing":\["userns"\]' "and named in missing"

out=$(unshare --user --map-root-user -- sh -c \
	'echo 0 > /proc/sys/user/max_net_namespaces && exec "$0" doctor' "$AIRLOCK")
is "$?" 1 "doctor exits 1 when network namespaces are refused"
like "$out" '"netns":false' "netns reported false"

"$AIRLOCK" doctor --pretty | python3 -c 'import json,sys; json.load(sys.stdin)'
is "$?" 0 "--pretty prints valid JSON"

"$AIRLOCK" doctor --bogus 2>/dev/null
is "$?" 2 "an unknown option exits 2"

done_testing
