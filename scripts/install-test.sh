#!/usr/bin/env bash
# Install test of the .deb (CI runs it as root after the release build):
# install with dpkg, check the files and their modes, run the installed braid,
# verify the installed unit with systemd-analyze, purge, check nothing is left.
#   scripts/install-test.sh out/release/braid_*_amd64.deb
set -euo pipefail
deb="${1:?usage: $0 PACKAGE.deb}"
[ "$(id -u)" = 0 ] || { echo "install-test: needs root (dpkg -i)"; exit 1; }
if dpkg -s braid >/dev/null 2>&1; then
	echo "install-test: a braid package is already installed here; not touching it"; exit 1
fi
fail() { echo "install-test: $*"; dpkg --purge braid >/dev/null 2>&1 || :; exit 1; }

dpkg -i "$deb" >/dev/null
# path -> mode owner
while read -r path want; do
	got="$(stat -c '%a %U' "$path" 2>/dev/null)" || fail "$path missing"
	[ "$got" = "$want" ] || fail "$path: mode/owner $got, want $want"
done <<'LIST'
/usr/bin/braid 755 root
/etc/braid 700 root
/usr/lib/systemd/system/braid@.service 644 root
/usr/lib/systemd/system/braid-balance.service 644 root
/usr/share/man/man1/braid.1.gz 644 root
/usr/share/man/man1/braid-up.1.gz 644 root
/usr/share/bash-completion/completions/braid 644 root
/usr/share/doc/braid/LICENSE 644 root
/usr/share/doc/braid/THIRD_PARTY_NOTICES 644 root
/usr/share/doc/braid/examples/client.toml 644 root
LIST

out="$(/usr/bin/braid version)" || fail "braid version failed"
grep -q '^braid v.* (commit [0-9a-f]\{12\}' <<<"$out" || fail "braid version = $out: no commit"
# Read the whole listing before grepping: grep -q stops at the first match,
# and under pipefail braid's SIGPIPE on the rest would fail the check.
lic="$(/usr/bin/braid licenses)" || fail "braid licenses failed"
grep -q 'github.com/flynn/noise' <<<"$lic" || fail "braid licenses lacks the notice"

if command -v systemd-analyze >/dev/null; then
	# A template is verified through an instance of it, found where the
	# package put it.
	v="$(systemd-analyze verify braid@ci.service 2>&1)" || fail "systemd-analyze verify: $v"
	[ -z "$v" ] || fail "systemd-analyze verify: $v"
	grep -q '^ExecStart=/usr/bin/braid up' /usr/lib/systemd/system/braid@.service || fail "the unit does not run /usr/bin/braid"
	v="$(systemd-analyze verify braid-balance.service 2>&1)" || fail "systemd-analyze verify braid-balance: $v"
	[ -z "$v" ] || fail "systemd-analyze verify braid-balance: $v"
	grep -q '^ExecStart=/usr/bin/braid balance' /usr/lib/systemd/system/braid-balance.service || fail "the balancer's unit does not run /usr/bin/braid"
else
	echo "install-test: systemd-analyze not installed: unit not verified"
fi

dpkg --purge braid >/dev/null
for p in /usr/bin/braid /usr/lib/systemd/system/braid@.service /usr/lib/systemd/system/braid-balance.service /usr/share/doc/braid /etc/braid; do
	[ ! -e "$p" ] || fail "$p left after purge"
done
echo "install-test: $(basename "$deb") installed, checked ($out), purged"
