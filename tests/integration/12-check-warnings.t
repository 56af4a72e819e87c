#!/usr/bin/env bash
# 12-check-warnings.t - `airlock check` warns (standard error, "warnings" in
# --json, exit status still 0) about a valid policy that does less than it
# seems to: a secret's host no egress rule admits, an egress.allow rule for
# a special-purpose address outside egress.allow_ranges. Touches no network.
. "$(dirname "$0")/lib.sh"

run_check() {
	out=$("$AIRLOCK" check "$@" 2>"$T/stderr")
	rc=$?
	err=$(cat "$T/stderr")
}

cat >"$T/p.json" <<'JSON'
{"version": 1,
 "egress": {"allow": ["api.example.com", "127.0.0.1:8080", "10.0.0.0/8", "0.0.0.0/0:9999"],
	    "deny": ["blocked.example.com"]},
 "secrets": {"TOK": {"from_env": "TOK",
		     "hosts": ["api.other.com", "api.example.com", "blocked.example.com"]}}}
JSON

run_check "$T/p.json"
is "$rc" 0 "warnings leave the exit status 0"
like "$out" '^ok sha256:[0-9a-f]{64}$' "stdout is still the digest"
like "$err" "^airlock: check: warning: $T/p.json: secrets.TOK.hosts\[0\]: no egress.allow rule admits api.other.com on port 443: .*add \"api.other.com\" to egress.allow" \
	"a secret's host no allow rule admits: warned, with the fix"
like "$err" "secrets.TOK.hosts\[2\]: egress.deny\[0\] denies blocked.example.com" \
	"a secret's host a deny rule refuses: warned"
if printf '%s\n' "$err" | grep -q 'hosts\[1\]'; then ok 1 "an allowed secret host: no warning"; else ok 0 "an allowed secret host: no warning"; fi
like "$err" 'egress.allow\[1\]: 127.0.0.1:8080 can never match: it is a special-purpose address \(loopback\).*add its range to egress.allow_ranges' \
	"an allow rule for loopback without allow_ranges: warned"
like "$err" 'egress.allow\[2\]: 10.0.0.0/8 can never match: .*\(private\)' \
	"an allow rule for a private range: warned"
if printf '%s\n' "$err" | grep -q 'egress.allow\[3\]'; then ok 1 "0.0.0.0/0 also covers global addresses: no warning"; else ok 0 "0.0.0.0/0 also covers global addresses: no warning"; fi
is "$(printf '%s\n' "$err" | wc -l)" 4 "four warnings, one line each"

# --- --json: the same warnings, with their JSON path ---------------------------
run_check --json "$T/p.json"
is "$rc" 0 "--json: exit status 0"
is "$err" "" "--json: nothing on stderr"
is "$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ok"], " ".join(w["path"] for w in d["warnings"]))')" \
	"True secrets.TOK.hosts[0] secrets.TOK.hosts[2] egress.allow[1] egress.allow[2]" \
	"--json: ok, and the warnings' paths"
like "$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["warnings"][2]["message"])')" \
	'special-purpose address.*egress.allow_ranges' "--json: each warning has its message"

# --- fixed: allow_ranges and the host allowed -> no warning --------------------
cat >"$T/fixed.json" <<'JSON'
{"version": 1,
 "egress": {"allow": ["api.example.com", "api.other.com", "127.0.0.1:8080", "10.0.0.0/8"],
	    "allow_ranges": ["127.0.0.1/32", "10.0.0.0/8"]},
 "secrets": {"TOK": {"from_env": "TOK", "hosts": ["api.other.com", "*.example.com"]}}}
JSON
run_check "$T/fixed.json"
is "$rc" 0 "the fixed policy: exit 0"
like "$err" 'secrets.TOK.hosts\[1\]: no egress.allow rule admits \*.example.com' \
	"a wildcard secret host wider than the allow rule: warned"
is "$(printf '%s\n' "$err" | grep -c 'egress.allow\[')" 0 "allow_ranges cover the rules: no rule warning"
run_check --json "$T/fixed.json"
is "$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["warnings"]))')" 1 "--json: one warning"

# --- git hosts need no egress rule; mode off warns about nothing --------------
cat >"$T/git.json" <<'JSON'
{"version": 1, "git": {"hosts": ["github.com"], "credential": "GH"},
 "secrets": {"GH": {"from_env": "GH", "hosts": ["github.com"]}}}
JSON
run_check "$T/git.json"
is "$err" "" "a secret bound to a git host: no warning"
run_check --mode off "$T/p.json"
is "$err" "" "mode off checks no rule: no warning"

# --- every committed example is free of warnings -------------------------------
for f in "$AIRLOCK_SRC"/examples/*.json; do
	run_check "$f"
	is "$err" "" "$(basename "$f"): no warning"
done

done_testing
