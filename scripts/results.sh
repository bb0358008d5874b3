#!/bin/sh
# Reproduces the lab campaign committed under docs/results/: the paper's
# scenarios with fewer repetitions (REPS, default 3; 5 for the zero-loss
# sweep), an 8 MiB download (the paper: 16 MB, 20 repetitions) and a subset
# of the loss settings, so that it fits in about two hours on a 2-core
# machine. Every run is one `braid lab run` of a committed scenario file; the
# --only flags say which of its points were run. Needs root.
#
#   go build -o braid ./cmd/braid && go build -o braid-lab ./cmd/braid-lab && sudo scripts/results.sh [./braid]
#
# The committed run took about 100 minutes.
set -eu
BRAID=${1:-./braid}
OUT=${OUT:-docs/results}
REPS=${REPS:-3}
SIZE=${SIZE:-8MiB}
GE0="loss=gemodel 1% 75% 50% 0%"
GE1="loss=gemodel 1% 75% 50% 1%"

run() { # name scenario [flags…]
	name=$1 file=$2
	shift 2
	echo "== $name" >&2
	"$BRAID" lab run "lab/scenarios/$file" --size "$SIZE" --out "$OUT/$name" "$@" >"$OUT/$name.txt"
	mv "$OUT/$name.txt" "$OUT/$name/table.txt"
}

# Figure 7: zero loss, symmetric RTT sweep.
run rtt-noloss rtt-uniform.toml --reps 5 --only loss=none
# Figures 10 and 11 and the path-aware schedulers: RTT ratios 1:1–1:5 under
# the lightest and a heavier Gilbert-Elliott setting of Table 1.
run rtt-ratio rtt-ratio.toml --reps "$REPS" --only "$GE0,gemodel 1% 75% 50% 1%"
# Figure 9: 1% uniform and Gilbert-Elliott "3%" (1-k = 1%), three RTTs.
run rtt-loss-uniform rtt-uniform.toml --reps "$REPS" --only "loss=random 1%" --only rtt=10ms,40ms,100ms
run rtt-loss-ge rtt-ge.toml --reps "$REPS" --only "$GE1" --only rtt=10ms,40ms,100ms
# Figure 11's other splits, and the other path-aware schedulers (the lightest
# Gilbert-Elliott setting only).
run splits splits.toml --reps "$REPS" --only "$GE0" --only "transport=braid 75/25,braid 90/10"
run schedulers schedulers.toml --reps "$REPS" --only "$GE0" --only transport=braid --only scheduler=rtt-aware,minrtt
# Beyond the paper, unequal rates (not in the committed results: it did not
# fit the session's time).
# run rate-ratio rate-ratio.toml --reps "$REPS"
