#!/usr/bin/env bash
# 10-check.t - `airlock check`: the committed examples, the exact errors of
# the broken ones, digest stability, --json, --canonical, --mode and usage
# errors. Touches no network.
. "$(dirname "$0")/lib.sh"

EX="$AIRLOCK_SRC/examples"
HEX64='[0-9a-f]{64}'

# Runs airlock check, capturing stdout, stderr and the exit status.
run_check() {
	out=$("$AIRLOCK" check "$@" 2>"$T/stderr")
	rc=$?
	err=$(cat "$T/stderr")
}

# --- every example is valid --------------------------------------------------
n=0
for f in "$EX"/*.json; do
	n=$((n + 1))
	run_check "$f"
	like "$out" "^ok sha256:$HEX64\$" "$(basename "$f") is valid"
	is "$rc" 0 "$(basename "$f") exits 0"
done
[ "$n" -ge 4 ]
ok $? "found $n examples"

# --- every broken example prints exactly its .expected and exits 1 ---------
n=0
for f in "$EX"/invalid/*.json; do
	n=$((n + 1))
	name=$(basename "$f")
	out=$(cd "$EX/invalid" && "$AIRLOCK" check "$name" 2>"$T/stderr")
	rc=$?
	is "$out" "$(cat "${f%.json}.expected")" "invalid/$name: exactly the expected errors"
	is "$rc" 1 "invalid/$name exits 1"
	is "$(cat "$T/stderr")" "" "invalid/$name: nothing on stderr"
done
[ "$n" -ge 3 ]
ok $? "found $n broken examples"

# --- the digest ignores formatting and key order -----------------------------
for f in full.json demo-policy.json shadow-default.json secrets.json git-token.json git-app.json spend.json; do
	python3 - "$EX/$f" "$T/reformatted-$f" <<'EOF'
import json, random, sys

def shuffle(v, rnd):
    if isinstance(v, dict):
        items = [(k, shuffle(x, rnd)) for k, x in v.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(v, list):
        return [shuffle(x, rnd) for x in v]
    return v

doc = json.load(open(sys.argv[1]))
rnd = random.Random(42)
# Keep shuffling until the top-level order really changed.
for _ in range(100):
    new = shuffle(doc, rnd)
    if list(new) != list(doc) or len(doc) < 2:
        break
with open(sys.argv[2], "w") as out:
    json.dump(new, out, indent=7, ensure_ascii=True)
    out.write("\n\n")
EOF
	a=$("$AIRLOCK" check "$EX/$f")
	b=$("$AIRLOCK" check "$T/reformatted-$f")
	is "$b" "$a" "$f: reformatted and reordered, same digest"
	cmp -s "$EX/$f" "$T/reformatted-$f"
	[ $? -ne 0 ]
	ok $? "$f: the reformatted copy really differs"
done

# Spelling variants that mean the same: case, trailing dot, ".git", "//".
cat >"$T/a.json" <<'EOF'
{"version": 1, "session": {"repo": "github.com/acme/api"},
 "egress": {"allow": ["api.example.com"], "ports": [80, 443]},
 "fs": {"rw": ["/srv/cache"]}}
EOF
cat >"$T/b.json" <<'EOF'
{"fs": {"rw": ["//srv/cache/"]}, "version": 1,
 "egress": {"ports": [443, 80], "allow": ["API.Example.COM."]},
 "session": {"repo": "GitHub.com/Acme/API.git"}}
EOF
is "$("$AIRLOCK" check "$T/b.json")" "$("$AIRLOCK" check "$T/a.json")" \
	"spelling variants give the same digest"

# --- --canonical ---------------------------------------------------------------
run_check --canonical "$EX/full.json"
is "$rc" 0 "--canonical exits 0"
printf '%s' "$out" >"$T/canonical.json"
digest=$("$AIRLOCK" check "$EX/full.json" | sed 's/^ok //')
is "sha256:$(sha256sum <"$T/canonical.json" | cut -d' ' -f1)" "$digest" \
	"the digest is the SHA-256 of the canonical text"
is "$("$AIRLOCK" check "$T/canonical.json")" "ok $digest" \
	"the canonical form is a valid policy with the same digest"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"version", "mode", "session", "egress", "secrets", "git", "spend", "env", "fs",
                  "publish", "receipts"}, d
assert d["publish"] == [], d["publish"]
assert d["receipts"] == {"sign": "line", "checkpoint_ms": 250}, d["receipts"]
assert set(d["egress"]) == {"allow", "deny", "ports", "allow_ranges", "resolver", "upstream_ca",
                            "intercept", "transparent"}, d["egress"]
assert set(d["secrets"]["anthropic"]) == {"from_env", "from_file", "env", "prefix", "hosts",
                                          "headers", "paths", "methods"}, d["secrets"]
assert d["secrets"]["anthropic"]["from_file"] is None
assert d["secrets"]["anthropic"]["methods"] is None
assert set(d["git"]) == {"hosts", "api_hosts", "repos", "credential", "github_app", "token_env",
                         "api_allow", "ssh"}, d["git"]
assert set(d["git"]["github_app"]) == {"app_id", "installation_id", "private_key_file", "api",
                                       "ca", "permissions"}, d["git"]
assert d["git"]["token_env"] == ["GH_TOKEN", "GITHUB_TOKEN"]
assert set(d["spend"]) == {"cap_usd", "ledger", "providers", "prices", "parent", "on_exhausted",
                           "max_body_bytes", "default_max_output_tokens", "pass",
                           "server_state", "server_state_reserve_usd",
                           "ledger_timeout_ms"}, d["spend"]
assert d["spend"]["max_body_bytes"] == 32 << 20 and d["spend"]["on_exhausted"] == "block"
assert d["spend"]["pass"] == ["/v1/messages/count_tokens"] and d["spend"]["server_state"] == "refuse"
assert d["spend"]["server_state_reserve_usd"] is None and d["spend"]["ledger_timeout_ms"] == 5000
assert set(d["fs"]) == {"rw", "ro", "hide", "protect"}, d["fs"]
' "$T/canonical.json"
ok $? "--canonical has every key of the schema"

# --- --json ----------------------------------------------------------------------
run_check --json "$EX/full.json"
is "$rc" 0 "--json valid exits 0"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d == {"ok": True, "digest": sys.argv[2], "warnings": []}, d
' "$out" "$digest"
ok $? "--json on a valid policy: {ok: true, digest, warnings: []}"

run_check --json "$EX/invalid/secrets.json"
is "$rc" 1 "--json invalid exits 1"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["ok"] is False
lines = [l.split(": ", 2) for l in open(sys.argv[2]).read().splitlines()]
assert [[e["path"], e["message"]] for e in d["errors"]] == [l[1:] for l in lines], d
' "$out" "$EX/invalid/secrets.expected"
ok $? "--json on an invalid policy: the same errors as the text output"

# --- --mode -------------------------------------------------------------------------
shadow=$("$AIRLOCK" check "$EX/full.json")
enforce=$("$AIRLOCK" check --mode enforce "$EX/full.json")
like "$enforce" "^ok sha256:$HEX64\$" "--mode enforce: ok"
[ "$shadow" != "$enforce" ]
ok $? "--mode enforce changes the digest"
is "$("$AIRLOCK" check --mode shadow "$EX/full.json")" "$shadow" \
	"--mode shadow on a shadow policy keeps the digest"
is "$("$AIRLOCK" check --mode enforce "$EX/minimal.json")" \
	"$("$AIRLOCK" check --mode enforce "$EX/shadow-default.json")" \
	"minimal and the written-out default agree under --mode too"
is "$("$AIRLOCK" check "$EX/minimal.json")" "$("$AIRLOCK" check "$EX/shadow-default.json")" \
	"{\"version\": 1} is the embedded default"
is "$("$AIRLOCK" check --mode shadow "$EX/demo-policy.json")" \
	"$(sed 's/"enforce"/"shadow"/' "$EX/demo-policy.json" | "$AIRLOCK" check -)" \
	"--mode shadow == a document saying shadow"

# --- standard input, unreadable files -----------------------------------------
is "$("$AIRLOCK" check - <"$EX/full.json")" "$shadow" "POLICY - reads standard input"
out=$(echo '{"version": 1, "mode": "loud"}' | "$AIRLOCK" check -)
is "$out" '-: mode: expected "off", "shadow" or "enforce"' "errors on stdin name '-'"
run_check "$T/does-not-exist.json"
is "$out" "$T/does-not-exist.json: \$: cannot read: No such file or directory" \
	"missing file: one error at \$"
is "$rc" 1 "missing file exits 1"
run_check "$T"
is "$out" "$T: \$: cannot read: Is a directory" "a directory cannot be read"
head -c 1048577 /dev/zero | tr '\0' ' ' >"$T/big.json"
run_check "$T/big.json"
is "$out" "$T/big.json: \$: cannot read: File too large" "a policy over 1 MiB is refused"

# --- usage errors: exit 2, one line on stderr, nothing on stdout -----------------
usage() {
	local what=$1
	shift
	run_check "$@"
	is "$rc" 2 "usage: $what exits 2"
	is "$out" "" "usage: $what prints nothing on stdout"
	is "$(printf '%s\n' "$err" | wc -l)" 1 "usage: $what prints one line on stderr"
}
usage "no POLICY"
usage "two POLICYs" "$EX/full.json" "$EX/minimal.json"
usage "unknown option" --frobnicate "$EX/full.json"
usage "unknown short option" -x "$EX/full.json"
usage "bad --mode" --mode audit "$EX/full.json"
usage "--mode without value" --mode
usage "--json with --canonical" --json --canonical "$EX/full.json"

run_check --help
is "$rc" 0 "--help exits 0"
like "$out" "^usage: airlock check" "--help prints the usage on stdout"
run_check -h
is "$rc" 0 "-h exits 0"

done_testing
