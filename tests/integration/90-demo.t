#!/bin/sh
# make demo: the story it tells must stay true.
. "$(dirname "$0")/lib.sh"

out=$("$AIRLOCK_SRC/scripts/demo" 2>&1)
is "$?" 0 "the demo runs to the end"
printf '%s\n' "$out" > "$T/demo.out"
like "$out" "DEMO_API_KEY=airlock-ph-api-[A-Za-z0-9_-]{32}" "the agent sees a placeholder"
if grep -q "sk-demo-REAL" "$T/demo.out"; then ok 1 "the real key never shows"; else ok 0 "the real key never shows"; fi
if grep -q "AWS_SECRET_ACCESS_KEY=" "$T/demo.out"; then ok 1 "an unclassified secret is dropped"; else ok 0 "an unclassified secret is dropped"; fi
like "$out" "HTTP 200 over TLS \(the proxy's session CA" "the agent calls the API with its placeholder, through interception"
like "$out" "the API received x-api-key: sk-demo-\.\.\. \(31 characters\), the caller's real key: yes" \
	"the API received the real key"
like "$out" "echo airlock-ph-api-[A-Za-z0-9_-]{32} again:airlock-ph-api-" "the key the API echoes is scrubbed to the placeholder"
like "$out" "HTTP 403  secrets\.api\.hosts" "the placeholder toward another host is refused"
like "$out" "secret\.block +block +broker +secrets\.api +api img\.cdn\.airlock\.test x-api-key plain-http" \
	"... and over plain http, with a secret.block receipt"
like "$out" "secret\.inject +allow +broker +secrets\.api +api api\.airlock\.test [Xx]-[Aa]pi-[Kk]ey" "the injection is recorded (the header as the filters see it: over h2, HTTP/1.1's customary case)"
like "$out" "secret\.scrub +allow +broker" "the scrub is recorded"
like "$out" "HTTP 403  egress.default" "exfiltration is denied by the default rule"
like "$out" "HTTP 403  egress.deny\[0\]" "a deny rule denies"
like "$out" "HTTP 403  egress.special-address" "the metadata name is denied by its address"
like "$out" "egress.allow +allow +egress-proxy egress.allow\[1\] +GET rebind.cdn.airlock.test:80 -> 198.18.0.11" "the rebinding name first connects to its checked address"
like "$out" "egress.special-address +GET rebind.cdn.airlock.test:80 -> 127.0.0.1 \(loopback\)" "and is denied when it rebinds"
like "$out" "egress.sni_mismatch +CONNECT api.airlock.test:443 sni=exfil.example" "a lying SNI is denied"
like "$out" "connections to 127.0.0.1:80 or 169.254.169.254:80: 0" "nothing reached loopback or the metadata address"
like "$out" "Operation not permitted" "raw sockets are refused"
like "$out" "Read-only file system" "the host is read-only"
like "$out" "ok: [0-9]+ lines, 1 session, chain and signatures intact" "the receipts verify"
like "$out" "tampered.jsonl:[0-9]+: bad signature" "and tampering is caught"
like "$out" "no secret value appears anywhere in the receipts" "no secret value in the receipts"
like "$out" "GITHUB_TOKEN=airlock-ph-scm-" "git: the agent's token is a placeholder"
like "$out" "acme/api's last commit: agent: agent change" "git: the agent cloned and pushed the session repository with no credential"
like "$out" "acme/shared-lib may not be pushed" "git: the push to the fetch-only sibling is refused"
like "$out" "acme/shared-lib's last commit: seed: init" "git: and the sibling is unchanged"
like "$out" "git\.block block  git\.repo +acme/payroll" "git: the unlisted repository is refused, with a receipt"
if grep -q "payroll.*auth=" "$T/demo.out"; then ok 1 "git: the server never saw the unlisted repository"; else ok 0 "git: the server never saw the unlisted repository"; fi
like "$out" "the git token appears nowhere in the receipts or the agent's workspace" "git: the token never reaches the agent"
like "$out" "DEMO_KEEP=1 \(make demo DEMO_KEEP=1" "without DEMO_KEEP the demo says how to keep its receipts"

# --- make demo as a stranger meets it: an unprivileged user, a copy of the
# checkout under /tmp, no sudo ------------------------------------------------
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null || ! command -v make >/dev/null; then
	ok 0 "# SKIP make demo as nobody: needs root to become nobody (setpriv) and make"
	done_testing
	exit 0
fi
# The tracked files of this checkout (its working tree: what is under test)
# and the airlock under test, in a copy nobody owns. `make -o airlock`
# takes that binary as built (the copy has no objects to be newer than).
C=$(mktemp -d /tmp/airlock-demo-clone.XXXXXX)
trap 'rm -rf "$T" "$C"' EXIT
(cd "$AIRLOCK_SRC" && git ls-files -z | xargs -0 cp -a --parents -t "$C") 2>"$T/cp.err"
ok $? "a copy of the checkout under /tmp"
cp "$AIRLOCK" "$C/airlock"
chmod 0755 "$C"
chown -R 65534:65534 "$C"
# nobody, with nothing of the test run's environment that would bypass what a
# stranger meets: no netns already made (AIRLOCK_TEST_NETNS), no AIRLOCK.
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		env -i PATH="$PATH" HOME="$C" LANG=C.UTF-8 TERM=dumb "$@"
}
# A missing package, as dpkg-query tells it to install-deps: make demo stops
# before the demo and names the package and the command.
mkdir "$C/fake-bin"
cat > "$C/fake-bin/dpkg-query" <<'SH'
#!/bin/sh
case "$*" in *" curl"*) exit 1 ;; esac
exec /usr/bin/dpkg-query "$@"
SH
chmod 0755 "$C/fake-bin" "$C/fake-bin/dpkg-query"
miss=$(cd "$C" && as_nobody PATH="$C/fake-bin:$PATH" make -s -o airlock demo </dev/null 2>&1)
st=$?
[ "$st" -ne 0 ]
ok $? "make demo as nobody with a package missing and no sudo fails (exit $st)"
like "$miss" "needed and missing: curl" "... naming the missing package"
like "$miss" "apt-get install -y --no-install-recommends curl" "... and the command that installs it"
case "$miss" in *"airlock: an unattended"*) ok 1 "... before the demo starts" ;; *) ok 0 "... before the demo starts" ;; esac
case "$miss" in *chromium*|*postgresql*) ok 1 "... and asks for nothing the demo does not need" ;;
*) ok 0 "... and asks for nothing the demo does not need" ;; esac

# Then with every package there: the demo runs as nobody and keeps its
# receipts.
out=$(cd "$C" && as_nobody DEMO_KEEP=1 make -s -o airlock demo </dev/null 2>&1)
st=$?
printf '%s\n' "$out" > "$T/demo-nobody.out"
is "$st" 0 "make demo DEMO_KEEP=1 runs to the end as nobody"
[ "$st" -eq 0 ] || diag_file "$T/demo-nobody.out"
like "$out" "ok: [0-9]+ lines, 1 session, chain and signatures intact" "... and its receipts verify"
K=$C/build/demo-receipts
like "$out" "The receipts are kept in $K/" "... and it says where it keeps the receipts"
for f in events.jsonl git-events.jsonl tampered.jsonl; do
	[ -s "$K/$f" ] && [ "$(stat -c %u "$K/$f")" = 65534 ]
	ok $? "... $f is kept there, nobody's"
done
like "$out" "cd $K" "... and prints the commands to run on them:"
like "$out" "$C/airlock verify events.jsonl" "... airlock verify"
like "$out" "$C/airlock report events.jsonl git-events.jsonl -o report.html" "... airlock report"
like "$out" "$C/airlock learn events.jsonl > learnt-policy.json" "... airlock learn"
# The commands work as printed.
(cd "$K" && as_nobody "$C/airlock" verify events.jsonl) > "$T/v.out" 2>&1
is "$?" 0 "the printed verify command verifies the kept receipts"
(cd "$K" && as_nobody "$C/airlock" verify tampered.jsonl) > "$T/vt.out" 2>&1
[ "$?" -ne 0 ] && grep -q "bad signature" "$T/vt.out"
ok $? "the printed verify command names the tampered line"
(cd "$K" && as_nobody "$C/airlock" report events.jsonl git-events.jsonl -o report.html) > "$T/r.out" 2>&1
[ "$?" -eq 0 ] && grep -q "<html" "$K/report.html"
ok $? "the printed report command writes the page"
(cd "$K" && as_nobody sh -c "'$C/airlock' learn events.jsonl > learnt-policy.json") > "$T/l.out" 2>&1
[ "$?" -eq 0 ] && "$AIRLOCK" check "$K/learnt-policy.json" >/dev/null 2>&1
ok $? "the printed learn command drafts a policy that passes airlock check"
done_testing
