#!/bin/sh
# Reproduces the congestion-control campaign committed under docs/results/cc-*:
# the committed cc-*.toml scenarios with fewer repetitions than the files
# declare (REPS, default 3) and, for seed 003's diamond, 4 MiB downloads, so
# the campaign fits in about 45 minutes on a 2-core machine. Needs root.
#
#   go build -o braid ./cmd/braid && go build -o braid-lab ./cmd/braid-lab && sudo scripts/results-cc.sh [./braid]
set -eu
BRAID=${1:-./braid}
OUT=${OUT:-docs/results}
REPS=${REPS:-3}

run() { # name [flags…]
	name=$1
	shift
	echo "== $name" >&2
	"$BRAID" lab run "lab/scenarios/$name.toml" --out "$OUT/$name" "$@" >"$OUT/$name.txt"
	mv "$OUT/$name.txt" "$OUT/$name/table.txt"
}

run cc-nornet --reps "$REPS"
run cc-shared --reps "$REPS"
for f in cc-diamond-2ch-both cc-diamond-1ch-both cc-diamond-2ch-one cc-diamond-1ch-one; do
	run "$f" --reps "$REPS" --size 4MiB
done
