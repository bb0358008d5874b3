#!/bin/sh
# Reproduces the tunnel comparison committed under docs/results/tunnels-*: the
# paper's Figures 4, 6, 7, 9, 10 and 11 with braid's and OpenVPN's tunnels, on
# a subset of each committed scenario's points (--only), REPS (default 3)
# repetitions and 8 MiB downloads (4 MiB under loss), so that it fits in
# about an hour on a 2-core machine. Needs root, openvpn and mptcpize.
#
# OpenVPN cannot choose its TCP congestion control; in a namespace it gets the
# namespace default, which may only be one of the host's
# net.ipv4.tcp_allowed_congestion_control. To give it the paper's cubic this
# script adds cubic to that list for the campaign and restores the list on
# exit (a host-wide change, hence done here and not by the lab).
#
#   go build -o braid ./cmd/braid && go build -o braid-lab ./cmd/braid-lab && sudo scripts/results-tunnels.sh [./braid]
set -eu
BRAID=${1:-./braid}
OUT=${OUT:-docs/results}
REPS=${REPS:-3}

allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
trap 'sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed"' EXIT INT TERM
case " $allowed " in
*" cubic "*) ;;
*) sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed cubic" ;;
esac

run() { # name scenario [flags…]
	name=$1 file=$2
	shift 2
	echo "== $name" >&2
	"$BRAID" lab run "lab/scenarios/$file" --reps "$REPS" --out "$OUT/$name" "$@" >"$OUT/$name.txt"
	mv "$OUT/$name.txt" "$OUT/$name/table.txt"
}

RTTS="rtt=10ms,40ms,100ms"
# Figure 7 (no loss) and Figure 9 (1% uniform, Gilbert-Elliott "3%").
run tunnels-multi-noloss tunnels-multi.toml --size 8MiB --only "$RTTS" --only loss=none
run tunnels-multi-loss tunnels-multi.toml --size 4MiB --only "$RTTS" --only "loss=random 1%,gemodel 1% 75% 50% 1%"
# Figure 6: UDP vs TCP single-path tunnels.
run tunnels-single tunnels-single.toml --size 4MiB --only "$RTTS" --only "loss=none,random 1%"
# Figure 4: MPTCP tunnels, full mesh and ndiffports-like, under 1% loss.
run tunnels-mptcp tunnels-mptcp.toml --size 4MiB --only "$RTTS" --only "loss=random 1%"
# Figures 10 and 11: splits and the path-aware scheduler vs MPTCP tunnels.
run tunnels-ratio tunnels-ratio.toml --size 8MiB --only "loss=gemodel 1% 75% 50% 0%"
