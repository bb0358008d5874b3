#!/usr/bin/env bash
# The real-path campaign (docs/results/paths): the lab scenarios of the issue
# "Real paths" (paths-*.toml: an MTU black hole, an interface down and up, a
# path cut and restored, an address change, a backup path), one at a time on a
# quiet machine, every baseline in the same run, 16 MiB downloads, n = 5,
# seed 20261126. About 20 minutes.
# Usage: sudo scripts/results-paths.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/results/paths}
seed=20261126
go build -o /tmp/braid-lab-campaign ./cmd/braid-lab
# settle waits (up to 3 minutes) until the 1-minute load average is below 1 on
# this 2-core machine, so that no run starts flagged as busy by the last.
settle() {
	for _ in $(seq 36); do
		awk '{exit !($1 < 1.0)}' /proc/loadavg && return
		sleep 5
	done
}
for name in mtu down cut readdress backup; do
	settle
	echo "== $name: braid lab run lab/scenarios/paths-$name.toml --seed $seed" >&2
	/tmp/braid-lab-campaign lab run "lab/scenarios/paths-$name.toml" --out "$out/$name" --seed $seed
done
