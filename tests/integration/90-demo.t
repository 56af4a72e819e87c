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
like "$out" "secret\.inject +allow +broker +secrets\.api +api api\.airlock\.test x-api-key" "the injection is recorded"
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
done_testing
