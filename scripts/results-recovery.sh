#!/usr/bin/env bash
# The loss-recovery campaign (docs/results/recovery): one scenario at a time, on a
# quiet machine, every baseline of a point in the same run, 16 MiB downloads, n = 5.
# Usage: sudo scripts/results-recovery.sh [OUTDIR [SET]]
#   SET main (default): the first campaign, into OUTDIR (default docs/results/recovery);
#   SET rate: the re-run after the rate model's fixes (docs/results/recovery/rate),
#   a subset that fits about 50 minutes.
#   SET contend: the re-run after contention and the queue's retuning
#   (docs/results/recovery/contend), about 75 minutes.
#   SET ordered: the re-run after the per-socket ordered send queue (no more
#   self-inflicted reordering, hence spurious losses) and UDP GSO/GRO
#   (docs/results/recovery/ordered), about 45 minutes, with the bulk
#   recovery overhead the lab now records.
#   SET bulk: the re-run after bulk FEC blocks of up to 25 ms, the overhead
#   cap for short ones, repairs past full windows and the queue's longer CoDel
#   target while repairs are sent (docs/results/recovery/bulk), about 50 minutes.
#   SET final: the same points after that longer target was reverted (it broke
#   the latency target), resends of non-TCP packets wait 10 ms, not 25, for
#   a REBUILT report, and a flow may keep 4 packets in the queue's sparse ring
#   (docs/results/recovery/final), about 20 minutes.
#   SET final2: the points the final set left out, at the same code: clean +
#   GE and GE on both, 1 % at 100 ms, no loss 1:1-1:5, Fig. 9's loss points at
#   40 ms against the MPTCP tunnels, and the shared bottleneck
#   (docs/results/recovery/final2), about 55 minutes.
#   SET acks: after pure TCP acks pass their flow's gaps and unrebuildable
#   blocks are resent at once (docs/results/recovery/acks): the targets'
#   points and a subset of Fig. 10 (GE 1 %, RTT ratios 1:1, 1:3, 1:5, braid's
#   default against the MPTCP tunnels), about 75 minutes.
#   SET lanes: after bulk and latency-sensitive packets fill FEC blocks of their
#   own, the repair cap is on payload bytes, and the rate model sizes its cap on
#   full-size RTT samples plus ack aggregation (docs/results/recovery/lanes):
#   every target's point but the mesh (by hand) and Fig. 10 at 1:3/1:5, about
#   70 minutes.
#   SET capjoint: after the repair cap holds for repairs plus the residual they
#   leave, short bulk blocks get repairs from a credit, real-time resends go at
#   once and repairs start after 100 outcomes (docs/results/recovery/capjoint):
#   the targets' points those change, and Fig. 10 at 1:1 with OpenVPN over MPTCP,
#   about 65 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/results/recovery}
set=${2:-main}
go build -o /tmp/braid-lab-campaign ./cmd/braid-lab
# settle waits (up to 3 minutes) until the 1-minute load average is below 1 on
# this 2-core machine: right after a scenario it still counts the last one's
# emulators and daemons, and the next run would start flagged as busy.
settle() {
	for _ in $(seq 36); do
		awk '{exit !($1 < 1.0)}' /proc/loadavg && return
		sleep 5
	done
}
run() { # name scenario [--only ...]
	local name=$1 file=$2
	shift 2
	settle
	echo "== $name: braid lab run $file $*" >&2
	/tmp/braid-lab-campaign lab run "lab/scenarios/$file" --out "$out/$name" "$@"
}
if [ "$set" = bulk ]; then
	seed=20261126 # the ordered set's: the same loss sequences
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run realtime recovery-realtime.toml --seed $seed
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid,braid no recovery" --seed $seed
	exit 0
fi
if [ "$set" = lanes ]; then
	seed=20261126
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid,braid no recovery" --seed $seed
	run shared recovery-shared.toml --seed $seed
	run realtime recovery-realtime.toml --only "transport=braid,braid no recovery" --reps 10 --seed $seed
	run noloss recovery-noloss.toml --only "transport=braid,braid no recovery" --seed $seed
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run tunnels-ratio tunnels-ratio.toml --only "rtt_ratio=1:1" --only "loss=gemodel 1% 75% 50% 1%" --only "transport=mptcp-tunnel,openvpn-mptcp,braid" --reps 5 --seed $seed
	exit 0
fi
if [ "$set" = capjoint ]; then
	seed=20261126
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run shared recovery-shared.toml --seed $seed
	run realtime recovery-realtime.toml --only "transport=braid,braid no recovery" --reps 10 --seed $seed
	run noloss recovery-noloss.toml --only "transport=braid,braid no recovery" --seed $seed
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run tunnels-ratio tunnels-ratio.toml --only "rtt_ratio=1:1" --only "loss=gemodel 1% 75% 50% 1%" --only "transport=mptcp-tunnel,openvpn-mptcp,braid" --reps 5 --seed $seed
	exit 0
fi
if [ "$set" = acks ]; then
	seed=20261126
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid,braid no recovery" --seed $seed
	run shared recovery-shared.toml --seed $seed
	run realtime recovery-realtime.toml --only "transport=braid,braid no recovery" --seed $seed
	run tunnels-ratio tunnels-ratio.toml --only "rtt_ratio=1:1,1:3,1:5" --only "loss=gemodel 1% 75% 50% 1%" --only "transport=mptcp-tunnel,openvpn-mptcp,braid" --reps 5 --seed $seed
	exit 0
fi
if [ "$set" = final2 ]; then
	seed=20261126
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run uniform-100 recovery-uniform.toml --only "rtt=100ms" --only "transport=mptcp-direct,braid" --seed $seed
	run noloss recovery-noloss.toml --only "transport=braid,braid no recovery" --seed $seed
	run tunnels-40 tunnels-multi.toml --only "rtt=40ms" --only "loss=random 1%,gemodel 1% 75% 50% 1%" --only "transport=udp-tunnel,braid,mptcp-tunnel,openvpn-mptcp" --reps 5 --seed $seed
	run shared recovery-shared.toml --seed $seed
	exit 0
fi
if [ "$set" = final ]; then
	seed=20261126
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --only "rtt=20ms,40ms" --seed $seed
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid" --seed $seed
	run realtime recovery-realtime.toml --only "transport=braid,braid no recovery" --seed $seed
	exit 0
fi
if [ "$set" = ordered ]; then
	seed=20261126 # the contend set's: the same loss sequences
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run noloss recovery-noloss.toml --seed $seed
	run realtime recovery-realtime.toml --seed $seed
	exit 0
fi
if [ "$set" = contend ]; then
	# After contention, re-probing and the queue's retuning (2026-11-26): the
	# starvation point first, then the targets' points; one seed for all.
	seed=20261126
	run shared recovery-shared.toml --seed $seed
	run uniform recovery-uniform.toml --only "transport=mptcp-direct,braid" --seed $seed
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid,braid no recovery" --seed $seed
	run noloss recovery-noloss.toml --seed $seed
	run ge recovery-ge.toml --only "transport=direct,braid" --seed $seed
	run realtime recovery-realtime.toml --seed $seed
	exit 0
fi
if [ "$set" = rate ]; then
	run latency recovery-latency.toml --only "transport=mptcp-direct,braid,braid no recovery"
	run noloss recovery-noloss.toml
	run ge recovery-ge.toml --only "transport=direct,braid"
	run shared recovery-shared.toml
	run uniform-100 recovery-uniform.toml --only rtt=100ms --only "transport=mptcp-direct,braid"
	run realtime recovery-realtime.toml
	exit 0
fi
run uniform-20-40 recovery-uniform.toml --only rtt=20ms,40ms
run uniform-100 recovery-uniform.toml --only rtt=100ms --only "transport=mptcp-direct,braid"
run ge recovery-ge.toml --only "transport=direct,mptcp-direct,braid"
run noloss recovery-noloss.toml
run latency recovery-latency.toml --only rtt=40ms --only "transport=mptcp-direct,braid,braid no recovery"
run realtime recovery-realtime.toml
run shared recovery-shared.toml
