#!/usr/bin/env bash
# crosstest.sh — the daemon's unit tests on another architecture, under qemu
# user-mode emulation: arm64, and big-endian 32-bit mips (softfloat, as OpenWrt
# builds it), where byte-order, alignment and 32-bit bugs show.
#
# Usage: scripts/crosstest.sh arm64|mips
#
# The packages are those `braid` is built from (go list -deps ./cmd/braid, less
# internal/notice), with the test doubles beside them (conn/..., tundev/...) and
# internal/testenv. Their test binaries are compiled in one go (go test -c: the
# compiler uses every core), then run one at a time in their package's directory,
# as go test would, with -test.short and BRAID_EMULATED=1: tests that cannot work
# under qemu-user (network namespaces, a few socket options it does not emulate)
# or that time wall-clock behaviour an emulated CPU cannot keep to skip and say
# why (internal/testenv). Exits non-zero if a package fails or qemu is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
arm64)
	export GOARCH=arm64
	qemu=qemu-aarch64
	;;
mips)
	export GOARCH=mips GOMIPS=softfloat
	qemu=qemu-mips
	;;
*)
	echo "usage: $0 arm64|mips" >&2
	exit 2
	;;
esac
arch=$1
if ! command -v "$qemu" >/dev/null; then
	echo "crosstest $arch: $qemu not found: install qemu-user (apt-get install qemu-user)" >&2
	exit 1
fi
export GOOS=linux CGO_ENABLED=0

start=$SECONDS
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

# The import paths and directories of the packages, host-independent: go list
# answers for GOOS/GOARCH as exported above.
mapfile -t pkgs < <({
	go list -deps ./cmd/braid
	go list ./conn/... ./tundev/... ./internal/testenv
} | grep '^github.com/braid-vpn/braid/' |
	# internal/notice's test compares the licence notices with go.mod and the
	# module cache: text, the same on every target, and 9 s under qemu.
	grep -vx 'github.com/braid-vpn/braid/internal/notice' | sort -u)
declare -A dirs
while read -r pkg dir; do dirs[$pkg]=$dir; done < <(go list -f '{{.ImportPath}} {{.Dir}}' "${pkgs[@]}")

# One build for all: go test -c -o DIR/ writes DIR/<last path element>.test for
# each package with tests (and fails if two share a name).
go test -c -o "$bin/" "${pkgs[@]}" | { grep -v 'no test files' || true; }
built=$((SECONDS - start))

passed=0
skipped=0
failed=()
for pkg in "${pkgs[@]}"; do
	test=$bin/${pkg##*/}.test
	[ -e "$test" ] || continue # no test files
	t0=$SECONDS
	# -test.v so that the skips can be counted: a package that passes says how
	# many of its tests skipped here (each skip's reason is in the -v output).
	if out=$(cd "${dirs[$pkg]}" && BRAID_EMULATED=1 "$qemu" "$test" -test.short -test.timeout=5m -test.v 2>&1); then
		n=$(grep -c -- '--- SKIP' <<<"$out" || true)
		printf 'ok  \t%s\t%ds%s\n' "$pkg" $((SECONDS - t0)) "$([ "$n" -gt 0 ] && echo " ($n skipped)")"
		passed=$((passed + 1))
		skipped=$((skipped + n))
	else
		printf '%s\nFAIL\t%s\t%ds\n' "$out" "$pkg" $((SECONDS - t0))
		failed+=("$pkg")
	fi
done
echo "crosstest $arch: ${passed} packages passed (${skipped} tests skipped: -short, or not possible under emulation), ${#failed[@]} failed, under $qemu in $((SECONDS - start))s (build ${built}s)"
if [ ${#failed[@]} -gt 0 ]; then
	echo "crosstest $arch: FAIL ${failed[*]}"
	exit 1
fi
