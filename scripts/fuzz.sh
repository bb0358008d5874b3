#!/usr/bin/env bash
# fuzz.sh — run every fuzz target of the module, one after the other.
#
#   scripts/fuzz.sh 2m          # every target for 2 minutes
#   scripts/fuzz.sh 2m 10m      # … and the wire-facing parsers for 10 minutes
#
# The wire-facing parsers (datagram frames, handshake messages, repair frames,
# stream frames, path parameters) read what anyone on the network sends; they
# get the second duration. An input that fails is saved by go test under the
# package's testdata/fuzz/<Target>/ (commit it: it becomes a regression seed
# that `go test` runs every time); the script goes on with the next target and
# exits non-zero at the end. FUZZ_PARALLEL (default 1) sets the workers per
# target, so that the machine stays usable.
set -uo pipefail
short="${1:?usage: $0 DURATION [DURATION_FOR_WIRE_PARSERS]}"
long="${2:-$short}"
cd "$(dirname "$0")/.."

wire_facing='^(FuzzNextFrame|FuzzConsumeInitiation|FuzzConsumeResponse|FuzzParseRepair|FuzzFrameReader|FuzzParseParams)$'
failed=()
summary=()
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz'); do
		d="$short"
		[[ $target =~ $wire_facing ]] && d="$long"
		echo "== $pkg $target for $d"
		out="$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$d" -parallel="${FUZZ_PARALLEL:-1}" "$pkg" 2>&1)"
		rc=$?
		# The last progress line holds the total executions.
		execs="$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2)"
		if [ $rc = 0 ]; then
			echo "$out" | tail -2
		else
			# Everything but the progress lines: the failure and its input.
			grep -v '^fuzz: elapsed' <<<"$out"
		fi
		summary+=("$(printf '%-45s %-28s %6s %12s execs' "${pkg#github.com/braid-vpn/braid/}" "$target" "$d" "${execs:-?}")")
		[ $rc = 0 ] || failed+=("$pkg $target")
	done
done
echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
