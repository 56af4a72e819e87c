# lib.sh - TAP helpers for the shell integration tests. Source it; it sets
# up $T (a scratch directory removed at exit) and checks $AIRLOCK.
#   ok COND-EXIT-STATUS "description"   (use: cmd; ok $? "...")
#   is GOT WANT "description"
#   like GOT REGEX "description"
#   done_testing
set -u
: "${AIRLOCK:?AIRLOCK must name the airlock binary (make check sets it)}"
: "${AIRLOCK_SRC:=$(cd "$(dirname "$0")/../.." && pwd)}"
T=$(mktemp -d "${TMPDIR:-/tmp}/airlock-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
tap_n=0
tap_failed=0

ok() {
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_failed=$((tap_failed + 1))
	fi
}

is() {
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want: %s\n' "$1" "$2"
	fi
}

like() {
	if printf '%s' "$1" | grep -Eq -- "$2"; then
		ok 0 "$3"
	else
		ok 1 "$3"
		printf '#   got:  %s\n#   want match: %s\n' "$1" "$2"
	fi
}

done_testing() {
	echo "1..$tap_n"
	[ "$tap_failed" -eq 0 ]
	exit $?
}
