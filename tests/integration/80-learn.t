#!/bin/sh
# airlock learn: a policy drafted from what a shadow run needed. First on
# hand-made signed streams (every receipt type, credential-like names,
# --ranges, --wildcards, --policy BASE, a tampered stream), then end to
# end: a small agent reaches three test hosts and reads two variables
# under `airlock run` in shadow mode with the default policy; learn drafts
# a policy; the same agent under `airlock run --enforce --policy` that
# draft is blocked nothing it reached, and the credential, never seen
# injected anywhere, is left unbound and withheld. Names resolve only through the test's own DNS server: the runs see
# a resolv.conf naming it, bound over /etc/resolv.conf in a mount
# namespace of their own.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/proxylib.sh"
# resolv.conf names no port: the test's DNS server listens on 53.
PL_RESOLVER="127.0.0.1:53"
MKSTREAM="$AIRLOCK_SRC/tests/helpers/mkstream.py"
cd "$T" || exit 1

# pj FILE EXPR: a Python expression over the JSON document d in FILE.
pj() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$1" "$2"
}

# stream NAME SESSIONS-JSON: a signed stream NAME.jsonl from a mkstream spec.
stream() {
	printf '%s' "$2" > "$1.spec.json"
	python3 "$MKSTREAM" "$1.spec.json" > "$1.jsonl"
}

# drop NAME: an env.drop would_block event; block HOST PORT RULE [ADDRS]: an
# egress.block would_block event.
drop() {
	printf '{"type":"env.drop","decision":"would_block","point":"supervisor","rule":"env.pass","subject":{"name":"%s"}}' "$1"
}
block() {
	printf '{"type":"egress.block","decision":"would_block","rule":"%s","subject":{"method":"CONNECT","host":"%s","port":%s%s}}' \
		"$3" "$1" "$2" "${4:+,\"addresses\":$4}"
}

# --- usage ---------------------------------------------------------------------------
like "$("$AIRLOCK" learn --help)" "^usage: airlock learn \[--policy BASE\] \[--wildcards\] \[--ranges\]" "learn --help"
"$AIRLOCK" learn > out 2> err
is "$?" 2 "learn without EVENTS: usage error"
like "$(cat err)" "^airlock: learn: expected one or more EVENTS" "saying what is missing"
"$AIRLOCK" learn --bogus x > out 2> err
is "$?" 2 "an unknown option: usage error"
"$AIRLOCK" learn missing.jsonl > out 2> err
is "$? $(wc -c < out)" "2 0" "an unreadable EVENTS file: exit 2, nothing printed"

# --- every receipt type ---------------------------------------------------------------
python3 "$MKSTREAM" "$AIRLOCK_SRC/tests/helpers/all-types.json" > all.jsonl
"$AIRLOCK" learn all.jsonl > draft.json 2> draft.err
is "$?" 0 "learn from a stream with every receipt type: exit 0"
like "$("$AIRLOCK" check draft.json)" "^ok sha256:[0-9a-f]{64}$" "the draft passes airlock check"
"$AIRLOCK" learn all.jsonl > draft2.json 2> draft2.err
cmp -s draft.json draft2.json && cmp -s draft.err draft2.err
ok $? "the same input gives the same draft and the same explanation"
"$AIRLOCK" learn - < all.jsonl > draft3.json 2> /dev/null
cmp -s draft.json draft3.json
ok $? "- reads standard input"
is "$(pj draft.json 'd["egress"]["allow"]')" \
	'["exfil.example.net","mirror.example.org:8080","registry.npmjs.org","telemetry.example.com"]' \
	"hosts: exact names, sorted, :PORT outside egress.ports, a dns.block name included"
is "$(pj draft.json '[k for k in d["env"]["pass"]]')" '["PATH","HOME","LANG","TERM","NPM_CONFIG_REGISTRY"]' \
	"variables: appended to env.pass"
is "$(pj draft.json '"secrets" in d')" "false" \
	"GITHUB_TOKEN: never seen injected anywhere, so no secrets entry (not bound to hosts merely reached)"
is "$(pj draft.json 'list(d)')" '["version","egress","env"]' \
	"only what differs from the default policy: no copy of its defaults"
is "$(pj draft.json '"GITHUB_TOKEN" in d["env"]["pass"] or "AWS_SECRET_ACCESS_KEY" in d["env"]["pass"]')" "false" \
	"no credential is proposed for env.pass"
like "$(grep 'GITHUB_TOKEN' draft.err)" "^  ! not drafted, left unbound: GITHUB_TOKEN looks like a credential.*\(sess-shadow-1 seq 1\)$" \
	"stderr: the credential is flagged, left unbound, from receipt seq 1"
like "$(grep 'GITHUB_TOKEN' draft.err)" "its session reached \(never evidence\): api.anthropic.com, gist.github.com, metadata.example.org, mirror.example.org" \
	"and names the hosts merely reached as no evidence"
like "$(grep '"registry.npmjs.org"' draft.err)" '^  \+ egress.allow "registry.npmjs.org": .*\(sess-shadow-1 seq 7\)$' \
	"each addition is explained with its receipt seq"
like "$(cat draft.err)" "not drafted: gist.github.com:443 \(egress.deny\[0\]\): the recorded policy denies it on purpose.*seq 10" \
	"a host the recorded policy denied is not drafted, and stderr says why"
like "$(cat draft.err)" "not drafted: 169.254.169.254 \(link-local, for metadata.example.org\)" \
	"the metadata address is never drafted"
like "$(cat draft.err)" "not drafted: secret.block .*paste.example.net.*exfiltration" "a placeholder sent elsewhere: explained, not drafted"
like "$(cat draft.err)" "not drafted: git.block git.repos \(fetch acme/secrets\)" "another repository: explained, not drafted"
like "$(tail -n 1 draft.err)" "^airlock: learn: 5 additions; the draft passes airlock check \(sha256:[0-9a-f]{64}\)$" \
	"stderr ends with the count and the draft's digest"

# --- credential-like names --------------------------------------------------------------
creds="MY_API_KEY db_password X_AUTH_HEADER AWS_CREDENTIALS SERVICE_SECRET gh_token Passwd_File"
plain="EDITOR NPM_CONFIG_CACHE"
ev='{"type":"egress.allow","decision":"allow","rule":"egress.allow[0]","subject":{"method":"CONNECT","host":"api.example.com","port":443}}'
for n in $creds $plain; do ev="$ev,$(drop "$n")"; done
stream creds "{\"sessions\":[{\"session\":\"s-creds\",\"events\":[$ev]}]}"
printf '{"version": 1, "egress": {"allow": ["api.example.com"]}}' > creds-base.json
"$AIRLOCK" learn --policy creds-base.json creds.jsonl > creds.json 2> creds.err
is "$?" 0 "learn with credential-like names: exit 0"
is "$(pj creds.json 'd["env"]["pass"]')" '["PATH","HOME","LANG","TERM","EDITOR","NPM_CONFIG_CACHE"]' \
	"*TOKEN* *KEY* *SECRET* *PASSWORD* *PASSWD* *CREDENTIAL* *AUTH*, any case: never env.pass; the others go there"
is "$(pj creds.json '"secrets" in d')" "false" \
	"a credential only reached with, never seen injected: no secrets entry bound to the host reached"
is "$(grep -c '^  ! not drafted, left unbound: .* looks like a credential' creds.err)" 7 \
	"each credential is flagged, left unbound, on stderr"
stream lonely "{\"sessions\":[{\"session\":\"s-lonely\",\"events\":[$(drop DEPLOY_TOKEN)]}]}"
"$AIRLOCK" learn lonely.jsonl > lonely.json 2> lonely.err
is "$? $(pj lonely.json '"DEPLOY_TOKEN" in json.dumps(d)')" "0 false" \
	"a credential whose session reached no host: not drafted at all"
like "$(cat lonely.err)" "not drafted, left unbound: DEPLOY_TOKEN looks like a credential, so it is never passed" "and stderr says so"

# --- --ranges ---------------------------------------------------------------------------
ev="$(block cdn.example.com 443 egress.special-address '[{"address":"198.18.0.10","class":"benchmarking"},{"address":"203.0.113.9","class":"documentation"}]')"
ev="$ev,$(block int.example.com 443 egress.special-address '[{"address":"10.1.2.3","class":"private"}]')"
ev="$ev,$(block meta.example.com 80 egress.special-address '[{"address":"169.254.169.254","class":"link-local"}]')"
ev="$ev,$(block loop.example.com 80 egress.special-address '[{"address":"127.0.0.1","class":"loopback"}]')"
stream ranges "{\"sessions\":[{\"session\":\"s-ranges\",\"events\":[$ev]}]}"
"$AIRLOCK" learn ranges.jsonl > r0.json 2> r0.err
is "$(pj r0.json 'd.get("egress", {}).get("allow_ranges", [])')" '[]' "without --ranges: no allow_ranges"
like "$(cat r0.err)" "not drafted \(--ranges would add it\): 198.18.0.10 \(benchmarking, for cdn.example.com\)" \
	"stderr names what --ranges would add"
"$AIRLOCK" learn --ranges ranges.jsonl > r1.json 2> r1.err
is "$(pj r1.json 'd["egress"]["allow_ranges"]')" '["10.1.2.3/32","198.18.0.10/32","203.0.113.9/32"]' \
	"--ranges: each special-purpose answer, one address wide"
like "$(cat r1.err)" "not drafted: 127.0.0.1 \(loopback, for loop.example.com\)" "never loopback"
like "$(cat r1.err)" "not drafted: 169.254.169.254 \(link-local" "never link-local (cloud metadata)"
"$AIRLOCK" check r1.json > /dev/null
ok $? "the --ranges draft passes airlock check"

# --- --wildcards ------------------------------------------------------------------------
ev="$(block a.cdn.example.com 443 egress.default),$(block b.cdn.example.com 443 egress.default)"
ev="$ev,$(block c.cdn.example.com 8443 egress.default),$(block solo.example.net 443 egress.default)"
ev="$ev,$(block x.com 443 egress.default),$(block y.com 443 egress.default)"
stream wild "{\"sessions\":[{\"session\":\"s-wild\",\"events\":[$ev]}]}"
"$AIRLOCK" learn wild.jsonl > w0.json 2> /dev/null
is "$(pj w0.json 'd["egress"]["allow"]')" \
	'["a.cdn.example.com","b.cdn.example.com","c.cdn.example.com:8443","solo.example.net","x.com","y.com"]' \
	"without --wildcards: exact names only"
"$AIRLOCK" learn --wildcards wild.jsonl > w1.json 2> w1.err
is "$(pj w1.json 'd["egress"]["allow"]')" \
	'["*.cdn.example.com","c.cdn.example.com:8443","solo.example.net","x.com","y.com"]' \
	"--wildcards: several names below one parent (same ports) become *.parent; never *.com"
like "$(cat w1.err)" 'egress.allow "\*.cdn.example.com" \(--wildcards\), for a.cdn.example.com, b.cdn.example.com' \
	"stderr names the names it covers"

# --- --policy BASE ------------------------------------------------------------------------
cat > base.json <<'EOF'
{
  "version": 1,
  "mode": "enforce",
  "env": {"pass": ["PATH", "HOME", "NPM_CONFIG_REGISTRY"]},
  "egress": {
    "allow": ["registry.npmjs.org", "*.example.org", "exfil.example.net:443"],
    "deny": ["telemetry.example.com"]
  }
}
EOF
"$AIRLOCK" learn --policy base.json all.jsonl > b.json 2> b.err
is "$?" 0 "learn --policy BASE: exit 0"
is "$(pj b.json 'list(d)')" '["version","mode","env","egress"]' "the base's keys stay in order (nothing new: no credential was seen injected)"
is "$(pj b.json 'd["mode"]')" "enforce" "and its values"
is "$(pj b.json 'd["egress"]["allow"]')" '["registry.npmjs.org","*.example.org","exfil.example.net:443","mirror.example.org:8080"]' \
	"its rules first, in order; only what they do not allow is appended"
is "$(pj b.json 'd["egress"]["deny"]')" '["telemetry.example.com"]' "its deny rules kept"
like "$(cat b.err)" "not drafted: telemetry.example.com: the base policy denies it \(egress.deny\[0\]\)" \
	"a host the base denies is not drafted"
like "$(cat b.err)" "nothing to add: registry.npmjs.org:443 is already allowed by the base policy's egress.allow\[0\]" \
	"a host the base allows adds nothing"
is "$(pj b.json 'd["env"]["pass"]')" '["PATH","HOME","NPM_CONFIG_REGISTRY"]' "no duplicate variable"
printf '{"version": 1, "egress": {"allow": ["*"], "ports": [99999]}}' > bad-base.json
"$AIRLOCK" learn --policy bad-base.json all.jsonl > out 2> err
is "$? $(wc -c < out)" "1 0" "an invalid BASE: exit 1, nothing printed"
like "$(cat err)" "bad-base.json: egress.ports\[0\]: " "with the errors as airlock check gives them"

# --- a stream that does not verify -------------------------------------------------------
sed '8s/registry.npmjs.org/registry.npmjs.org.evil.example/' all.jsonl > tampered.jsonl
"$AIRLOCK" learn tampered.jsonl > out 2> err
is "$? $(wc -c < out)" "1 0" "a tampered stream: exit 1, nothing drafted"
like "$(cat err)" "^airlock: learn: tampered.jsonl:8: bad signature" "naming the line and why"
like "$(cat err)" "--unverified drafts from it anyway" "and the option that drafts anyway"
"$AIRLOCK" learn --unverified tampered.jsonl > out 2> err
is "$?" 0 "--unverified: drafted"
like "$(pj out 'd["egress"]["allow"]')" "registry.npmjs.org.evil.example" "from the lines that do not verify too"

# --- end to end: shadow run, learn, enforce run -----------------------------------------
WS="$T/ws"
mkdir -p "$WS" "$T/home"
printf 'nameserver 127.0.0.1\n' > "$T/resolv.conf"
pl_start_net
REAL_TOKEN="ghp_learnE2Ereal0123456789abcdefghijABCD"
cat > "$WS/agent.sh" <<'EOF'
#!/bin/sh
# The agent: three hosts, two variables.
cd "$(dirname "$0")" || exit 1
curl -sS --max-time 20 http://api.airlock.test/learn-a > a.out 2>&1; echo $? > a.rc
curl -sS --max-time 20 http://www.airlock.test:8081/learn-b > b.out 2>&1; echo $? > b.rc
curl -sS --max-time 20 http://198.18.0.12/learn-c > c.out 2>&1; echo $? > c.rc
echo "mode=${AGENT_MODE:-unset}" > env.out
echo "token=${GITHUB_TOKEN:-unset}" >> env.out
exit 0
EOF

# agent EVENTS [RUN OPTIONS]: runs the agent under airlock run, in a mount
# namespace whose /etc/resolv.conf names the test's DNS server, with a
# small known environment.
agent() {
	_ev=$1
	shift
	rm -f "$WS"/*.out "$WS"/*.rc
	timeout 120 unshare -m --propagation private sh -c \
		'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$T/resolv.conf" \
		env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$T/home" AGENT_MODE=fast \
		GITHUB_TOKEN="$REAL_TOKEN" "$AIRLOCK" run --workspace "$WS" --events "$_ev" "$@" \
		-- sh "$WS/agent.sh" > "$T/run.out" 2>&1 < /dev/null
}
# refused EVENTS: the lines of decision block or would_block.
refused() {
	grep -c '"decision":"\(would_block\|block\)"' "$1"
}

agent "$T/shadow.jsonl"
is "$?" 0 "the agent runs under airlock run (shadow, the default policy)"
[ -s "$T/shadow.jsonl" ] || sed 's/^/# /' "$T/run.out"
"$AIRLOCK" verify "$T/shadow.jsonl" > /dev/null
ok $? "its stream verifies"
like "$(refused "$T/shadow.jsonl")" "^[1-9]" "and records what enforce would refuse"

"$AIRLOCK" learn --ranges "$T/shadow.jsonl" > "$T/learned.json" 2> "$T/learned.err"
is "$?" 0 "learn --ranges drafts a policy from it"
sed 's/^/# learn: /' "$T/learned.err"
like "$("$AIRLOCK" check "$T/learned.json")" "^ok sha256:" "which passes airlock check"
is "$(pj "$T/learned.json" 'd["egress"]["allow"]')" '["198.18.0.12","api.airlock.test","www.airlock.test:8081"]' \
	"the hosts: two names (one with its port) and an IP literal"
is "$(pj "$T/learned.json" 'd["egress"]["allow_ranges"]')" '["198.18.0.10/32","198.18.0.11/32","198.18.0.12/32"]' \
	"their special-purpose addresses (--ranges)"
is "$(pj "$T/learned.json" '"AGENT_MODE" in d["env"]["pass"] and "GITHUB_TOKEN" not in d["env"]["pass"]')" "true" \
	"AGENT_MODE passes; GITHUB_TOKEN does not"
is "$(pj "$T/learned.json" '"secrets" in d')" "false" \
	"GITHUB_TOKEN is not bound to the hosts the session merely reached"
like "$(cat "$T/learned.err")" "! not drafted, left unbound: GITHUB_TOKEN .*reached \(never evidence\): api.airlock.test, www.airlock.test" \
	"it is flagged for a person, naming those hosts as no evidence"
if grep -q "$REAL_TOKEN" "$T/learned.json" "$T/learned.err" "$T/shadow.jsonl"; then
	ok 1 "the token's value appears nowhere (draft, explanation, receipts)"
else
	ok 0 "the token's value appears nowhere (draft, explanation, receipts)"
fi

agent "$T/enforce.jsonl" --enforce --policy "$T/learned.json"
is "$?" 0 "the same agent under airlock run --enforce --policy learned.json"
[ -s "$T/enforce.jsonl" ] || sed 's/^/# /' "$T/run.out"
"$AIRLOCK" verify "$T/enforce.jsonl" > /dev/null
ok $? "its stream verifies"
is "$(grep -v '"type":"env.drop"' "$T/enforce.jsonl" | grep -c '"decision":"\(would_block\|block\)"')" 0 \
	"nothing it reached in the shadow run is blocked"
is "$(grep '"decision":"block"' "$T/enforce.jsonl" | grep -c '"type":"env.drop".*"name":"GITHUB_TOKEN"')" 1 \
	"the unbound credential is withheld (env.drop)"
grep '"decision":"\(would_block\|block\)"' "$T/enforce.jsonl" | cut -c1-300 | sed 's/^/# /'
is "$(cat "$WS/a.rc" "$WS/b.rc" "$WS/c.rc" | tr '\n' ' ')" "0 0 0 " "its three requests succeed"
like "$(cat "$WS/a.out")" "^hello from 198.18.0.10:80 method=GET path=/learn-a " "api.airlock.test answers"
like "$(cat "$WS/b.out")" "^hello from 198.18.0.11:8081 method=GET path=/learn-b " "www.airlock.test:8081 answers"
like "$(cat "$WS/c.out")" "^hello from 198.18.0.12:80 method=GET path=/learn-c " "198.18.0.12 answers"
is "$(sed -n 1p "$WS/env.out")" "mode=fast" "AGENT_MODE reaches the agent"
is "$(sed -n 2p "$WS/env.out")" "token=unset" "GITHUB_TOKEN does not reach it at all"

# Control: without --ranges the draft leaves the test hosts' addresses out,
# and enforce blocks them -- the check above can fail.
"$AIRLOCK" learn "$T/shadow.jsonl" > "$T/noranges.json" 2> /dev/null
agent "$T/control.jsonl" --enforce --policy "$T/noranges.json"
like "$(refused "$T/control.jsonl")" "^[1-9]" "control: a draft without --ranges is blocked for the addresses"
like "$(grep '"type":"egress.block".*"decision":"block"' "$T/control.jsonl" | head -n 1)" '"rule":"egress.special-address"' \
	"by the special-address check"
sleep 0.3
is "$(net_count srv=sink)" 0 "no sink saw any connection"
done_testing
