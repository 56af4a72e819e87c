#!/bin/sh
# make deb: the package's metadata, changelog, maintainer scripts, the
# hardened unit and its documented drop-in, the docs' links where they are
# installed, and lintian (docs/PACKAGE.md).
. "$(dirname "$0")/lib.sh"

for c in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog; do
	if ! command -v "$c" >/dev/null; then
		echo "1..0 # SKIP $c is missing (scripts/install-deps --deb)"
		exit 0
	fi
done
S=$AIRLOCK_SRC
version=$(sed -n 's/^VERSION := //p' "$S/Makefile")
arch=$(dpkg --print-architecture)

# What `make deb` runs, with the binary under test (make itself would
# rebuild or install packages; this directory has no network).
grep -q '^	@scripts/mkdeb $(BIN) $(VERSION) build$' "$S/Makefile"
ok $? "make deb runs scripts/mkdeb on the binary and the Makefile's VERSION"
grep -q '^	@scripts/install-deps --deb$' "$S/Makefile" && grep -q '^deb=.*lintian' "$S/scripts/install-deps"
ok $? "make deb installs its packages, lintian among them (install-deps --deb)"
deb=$("$S/scripts/mkdeb" "$AIRLOCK" "$version" "$T/out" 2>"$T/mkdeb.err")
is "$?" 0 "mkdeb builds the package"
diag_file "$T/mkdeb.err"
is "$deb" "$T/out/airlock_${version}-1_${arch}.deb" "named VERSION-REVISION (a Debian revision: changelog.Debian)"
[ -f "$deb" ] || { done_testing; exit 1; }

# --- metadata ------------------------------------------------------------
f() { dpkg-deb -f "$deb" "$1"; }
is "$(f Package)" airlock "Package"
is "$(f Version)" "${version}-1" "Version"
is "$(f Maintainer)" "airlock developers <airlock@example.org>" "Maintainer: the project's name, a reserved example domain (docs/PACKAGE.md)"
case "$(dpkg-deb -f "$deb")" in *localhost*) ok 1 "no localhost placeholder left in the control file" ;;
*) ok 0 "no localhost placeholder left in the control file" ;; esac
is "$(f Homepage)" "" "no invented Homepage"
like "$(f Depends)" "libc6 \(>= " "Depends computed from the binary's libraries"
like "$(f Recommends)" "libpq5, libnftables1" "the libraries loaded only when used are recommended (dynlib.c)"
case "$(f Depends)" in *libpq*|*libnftables*) ok 1 "Depends needs neither libpq nor libnftables" ;;
*) ok 0 "Depends needs neither libpq nor libnftables" ;; esac
is "$(f Section)" admin "Section"
like "$(f Description)" "^guardrails for unattended AI-agent sessions" "Description"
m=$(DEB_MAINTAINER="Some One <some@one.test>" DEB_HOMEPAGE=https://airlock.test/ \
	"$S/scripts/mkdeb" "$AIRLOCK" "$version" "$T/out2" 2>/dev/null)
is "$(dpkg-deb -f "$m" Maintainer)|$(dpkg-deb -f "$m" Homepage)" "Some One <some@one.test>|https://airlock.test/" \
	"DEB_MAINTAINER and DEB_HOMEPAGE set them for whoever publishes it"
"$S/scripts/mkdeb" "$AIRLOCK" 9.9.9 "$T/out3" >/dev/null 2>"$T/wrong.err"
st=$?
[ "$st" -ne 0 ] && grep -q "packaging/changelog's top entry is ${version}-1, not 9.9.9-REVISION" "$T/wrong.err"
ok $? "a VERSION the changelog does not name is refused"

# --- contents ------------------------------------------------------------
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#' > "$T/list"
for p in /usr/bin/airlock /usr/share/man/man1/airlock.1.gz \
	/usr/share/doc/airlock/changelog.Debian.gz /usr/share/doc/airlock/copyright \
	/usr/share/doc/airlock/README.md /usr/share/doc/airlock/docs/PROXY.md \
	/usr/share/doc/airlock/docs/PACKAGE.md \
	/usr/share/doc/airlock/docs/integration/background-agents.md \
	/usr/share/doc/airlock/examples/quickstart.json \
	/lib/systemd/system/airlock-proxy.service /etc/airlock/proxy.json; do
	grep -qx "$p" "$T/list"
	ok $? "ships $p"
done
grep -q "^/usr/share/doc/airlock/examples/invalid" "$T/list"
ok $((!$?)) "the tests' broken policies are not shipped"
R=$T/root
dpkg-deb -x "$deb" "$R"
dpkg-deb -e "$deb" "$T/ctrl"
is "$(cat "$T/ctrl/conffiles")" /etc/airlock/proxy.json "the service's policy is a conffile"
(cd "$R" && md5sum --quiet -c "$T/ctrl/md5sums") > "$T/md5.out" 2>&1
ok $? "md5sums match every file"

# --- changelog.Debian ----------------------------------------------------
zcat "$R/usr/share/doc/airlock/changelog.Debian.gz" > "$T/changelog"
ok $? "changelog.Debian.gz is gzip'd"
is "$(dpkg-parsechangelog -l "$T/changelog" -S Version)" "${version}-1" "its top entry is the package's version"
is "$(dpkg-parsechangelog -l "$T/changelog" -S Maintainer)" "airlock developers <airlock@example.org>" \
	"... signed by the package's maintainer"
cmp -s "$T/changelog" "$S/packaging/changelog"
ok $? "... and is packaging/changelog"
grep -q "^Copyright: .*airlock developers" "$R/usr/share/doc/airlock/copyright"
ok $? "copyright has a Copyright line"

# --- maintainer scripts --------------------------------------------------
for s in postinst prerm postrm; do
	[ -x "$T/ctrl/$s" ] && sh -n "$T/ctrl/$s"
	ok $? "$s is an executable shell script"
done
# Run them as dpkg would, where systemd seems to run: in a mount namespace
# of their own, with /run a tmpfs holding /run/systemd/system, /etc an
# overlay whose writes land in $T, and systemctl and deb-systemd-invoke
# stand-ins that record their arguments.
mkdir -p "$T/fake" "$T/up" "$T/work"
for c in systemctl deb-systemd-invoke; do
	printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\n' "$c" "$T" > "$T/fake/$c"
	chmod 0755 "$T/fake/$c"
done
ln -s "$AIRLOCK" "$T/fake/airlock"
cat > "$T/maint.sh" <<'SH'
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$T/up,workdir=$T/work" /etc
step() { echo "== $*" >> "$T/calls"; PATH="$T/fake:$PATH" "$T/ctrl/$@"; }
step postinst configure
ls -l /etc/airlock >> "$T/calls"
step postinst configure 0.1.0-1
step prerm upgrade "$VERSION-2"
step prerm remove
step postrm remove
step postrm purge
[ ! -e /etc/airlock/signing.key ] && echo "key gone" >> "$T/calls"
SH
if command -v unshare >/dev/null && [ "$(id -u)" -eq 0 ] &&
	VERSION=$version && export T VERSION &&
	unshare --mount --propagation private sh "$T/maint.sh" > "$T/maint.out" 2>&1; then
	calls=$(cat "$T/calls")
	section() { printf '%s\n' "$calls" | awk -v s="== $1" '$0 == s {p=1; next} /^== / {p=0} p'; }
	like "$(section "postinst configure")" "^systemctl --system daemon-reload$" "postinst (install): systemd re-reads the unit"
	case "$(section "postinst configure")" in *start*) ok 1 "... and the service is neither started nor restarted" ;;
	*) ok 0 "... and the service is neither started nor restarted" ;; esac
	like "$(section "postinst configure")" "-rw------- .* signing.key" "... the signing key is made, mode 0600"
	like "$(section "postinst configure")" "-rw-r--r-- .* signing.pub" "... its public half readable"
	like "$(section "postinst configure 0.1.0-1")" "systemctl --system daemon-reload" "postinst (upgrade): systemd re-reads the unit"
	like "$(section "postinst configure 0.1.0-1")" "deb-systemd-invoke try-restart airlock-proxy.service" \
		"... and a running service restarts with the new binary"
	is "$(section "prerm upgrade ${version}-2")" "" "prerm (upgrade): the service keeps running"
	is "$(section "prerm remove")" "deb-systemd-invoke stop airlock-proxy.service" "prerm (remove): the service stops"
	like "$(section "postrm remove")" "systemctl --system daemon-reload" "postrm: systemd forgets the unit"
	like "$calls" "key gone" "postrm purge: the signing key goes"
else
	ok 0 "# SKIP the maintainer scripts' run: needs root, unshare and overlayfs"
	diag_file "$T/maint.out"
fi

# --- the unit --------------------------------------------------------------
U=$R/lib/systemd/system/airlock-proxy.service
for l in SystemCallArchitectures=native ProtectProc=invisible ProcSubset=pid UMask=0077 \
	PrivateMounts=yes NoNewPrivileges=yes DynamicUser=yes ProtectSystem=strict CapabilityBoundingSet= \
	"SystemCallFilter=@system-service seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self pidfd_getfd"; do
	grep -qx "$l" "$U"
	ok $? "the unit has $l"
done
like "$(grep '^Documentation=' "$U")" "/usr/share/doc/airlock/docs/PROXY.md" "the unit points at its documentation"
[ -f "$R$(sed -n 's#^Documentation=.*file:\(/[^ ]*\).*#\1#p' "$U")" ]
ok $? "... which the package installs"
grep -q '^## The packaged service (`airlock-proxy.service`)' "$S/docs/PROXY.md"
ok $? "docs/PROXY.md documents the service"
# The documented drop-in, as an administrator would save it.
V=$T/units
mkdir -p "$V/airlock-proxy.service.d"
awk '/^```ini$/ {p=1; next} /^```$/ {p=0} p' "$S/docs/PROXY.md" > "$V/airlock-proxy.service.d/listen.conf"
like "$(cat "$V/airlock-proxy.service.d/listen.conf")" "^ExecStart=\$" "the drop-in clears ExecStart"
like "$(cat "$V/airlock-proxy.service.d/listen.conf")" "--listen 10\.88\.0\.1:3128" "... and listens on a sandbox-facing address"
if command -v systemd-analyze >/dev/null; then
	# verify wants the commands to exist: the binary under test stands in
	# for /usr/bin/airlock
	sed "s#/usr/bin/airlock#$AIRLOCK#" "$U" > "$V/airlock-proxy.service"
	sed -i "s#/usr/bin/airlock#$AIRLOCK#" "$V/airlock-proxy.service.d/listen.conf"
	SYSTEMD_UNIT_PATH="$V:" systemd-analyze verify --man=no "$V/airlock-proxy.service" > "$T/verify.out" 2>&1
	st=$?
	[ "$st" -eq 0 ] && [ ! -s "$T/verify.out" ]
	ok $? "systemd-analyze verify: the unit and the documented drop-in are clean"
	diag_file "$T/verify.out"
	score=$(systemd-analyze security --offline=yes "$V/airlock-proxy.service" 2>/dev/null |
		sed -n 's/.*Overall exposure level for airlock-proxy.service: \([0-9.]*\).*/\1/p')
	awk -v s="$score" 'BEGIN { exit !(s != "" && s + 0 <= 2.0) }'
	ok $? "systemd-analyze security rates it 2.0 or better (got ${score:-nothing})"
else
	ok 0 "# SKIP systemd-analyze is missing"
fi
if [ -d /run/systemd/system ]; then
	ok 0 "# SKIP the proxy under the unit's filter: not run by this test (run it with systemctl start airlock-proxy)"
else
	ok 0 "# SKIP the proxy under the unit's filter: systemd is not running here"
fi

# --- the docs' links where they are installed ----------------------------
D=$R/usr/share/doc/airlock
find "$D" -name '*.md' > "$T/mds"
broken=$(while read -r md; do
	grep -o '](\([^)]*\))' "$md" | sed 's/^](\(.*\))$/\1/' | while read -r l; do
		case "$l" in http:*|https:*|mailto:*|\#*) continue ;; esac
		t=${l%%#*}
		[ -e "$(dirname "$md")/$t" ] || echo "${md#"$D"/}: $l"
	done
done < "$T/mds")
is "$broken" "" "every relative link of the installed README and docs resolves"
grep -q '](docs/PROXY.md)' "$D/README.md"
ok $? "... README's docs/ links among them"

# --- lintian -------------------------------------------------------------
if command -v lintian >/dev/null; then
	# one run (lintian takes seconds): errors and warnings, and the
	# informational and pedantic tags
	lintian --display-info --pedantic "$deb" > "$T/lintian.out" 2>&1
	st=$?
	grep -E '^[EW]: ' "$T/lintian.out" > "$T/lintian.ew"
	[ "$st" -eq 0 ] && [ ! -s "$T/lintian.ew" ]
	ok $? "lintian: no error and no warning"
	diag_file "$T/lintian.ew"
	sed -n 's/^[IP]: airlock[^:]*: \([^ ]*\).*/\1/p' "$T/lintian.out" | sort -u > "$T/tags"
	left=$(while read -r tag; do grep -q "$tag" "$S/docs/PACKAGE.md" || echo "$tag"; done < "$T/tags")
	is "$left" "" "every informational or pedantic tag left is explained in docs/PACKAGE.md"
	[ -s "$T/tags" ] || diag "(lintian reported no informational tag)"
else
	ok 0 "# SKIP lintian is missing (scripts/install-deps --deb)"
fi
done_testing
