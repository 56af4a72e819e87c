#!/bin/sh
# 11-check-git-api.t - `airlock check` on git.api_allow: each prefix is a
# path that the proxy's one normaliser (src/pathnorm.c) could match; one it
# would refuse in a request (a ';' parameter, a segment of dots, an
# escape, "//", "..") is an error with its JSON path, never a rule that
# silently does nothing. Prefixes of git.api_admin's paths are valid: that
# is how a policy lets one through. Touches no network.
. "$(dirname "$0")/lib.sh"

cat > "$T/bad.json" <<'JSON'
{"version": 1, "session": {"repo": "github.com/acme/api"},
 "git": {"hosts": ["github.com"], "api_hosts": ["api.github.com"],
         "api_allow": ["/repos/acme/api/..;/keys", "/repos/acme/api/.../hooks",
                       "/repos/acme/api/keys;x", "/repos/acme/api/%6beys",
                       "/repos/acme/api/../other", "/repos//acme", "repos/acme/api/keys",
                       "/repos/acme/api/k\\eys", "/", "/repos/acme/api/hooks", 7]}}
JSON
out=$(cd "$T" && "$AIRLOCK" check bad.json 2>"$T/err")
rc=$?
is "$rc" 1 "a policy with bad git.api_allow prefixes: exit 1"
is "$(cat "$T/err")" "" "  nothing on stderr"
is "$out" 'bad.json: git.api_allow[0]: the path holds a '"'"';'"'"' parameter ("..;" is ".." to some servers): no request path can match it
bad.json: git.api_allow[1]: the path has a "." or ".." segment (or one of dots only): no request path can match it
bad.json: git.api_allow[2]: the path holds a '"'"';'"'"' parameter ("..;" is ".." to some servers): no request path can match it
bad.json: git.api_allow[3]: percent-escapes are not allowed
bad.json: git.api_allow[4]: "." and ".." segments are not allowed
bad.json: git.api_allow[5]: empty path segment ("//")
bad.json: git.api_allow[6]: expected a path starting with "/"
bad.json: git.api_allow[7]: expected only A-Z a-z 0-9 and - . _ ~ ! $ & '"'"' ( ) * + , ; = : @ / in a path
bad.json: git.api_allow[8]: "/" would allow every path: list the prefixes the agent needs (e.g. "/graphql")
bad.json: git.api_allow[10]: expected a string' "  every error, with its JSON path"

out=$("$AIRLOCK" check --json "$T/bad.json")
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["ok"] is False
paths = [e["path"] for e in d["errors"]]
assert paths == ["git.api_allow[%d]" % i for i in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10)], paths
' "$out"
ok $? "--json: the same errors, by JSON path"

cat > "$T/good.json" <<'JSON'
{"version": 1, "session": {"repo": "github.com/acme/api"},
 "git": {"hosts": ["github.com"], "api_hosts": ["api.github.com"],
         "api_allow": ["/graphql", "/repos/acme/api/keys", "/repos/acme/api/hooks/",
                       "/repos/acme/api/actions/runners/registration-token",
                       "/repos/acme/api/environments/prod/secrets"]}}
JSON
out=$("$AIRLOCK" check "$T/good.json" 2>"$T/err")
rc=$?
is "$rc" 0 "prefixes of git.api_admin paths are valid"
like "$out" '^ok sha256:[0-9a-f]{64}$' "  ok and a digest"
out=$("$AIRLOCK" check --canonical "$T/good.json")
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["git"]["api_allow"] == ["/graphql", "/repos/acme/api/actions/runners/registration-token",
    "/repos/acme/api/environments/prod/secrets", "/repos/acme/api/hooks",
    "/repos/acme/api/keys"], d["git"]["api_allow"]
' "$out"
ok $? "  --canonical: sorted, without a trailing '/'"
done_testing
