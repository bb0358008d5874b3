#!/usr/bin/env bash
# quickstart.sh — braid in two minutes, on one Linux machine.
#
# Builds braid, wires a client and a server network namespace together with two
# veth links shaped to 10 Mbit/s each, brings a braid tunnel up over both, and
# downloads the same 16 MB file once directly over one link and once through the
# tunnel. The tunnel should reach nearly twice the single-link goodput.
#
#   client ns  c1 198.18.1.1 ── 10 Mbit/s ── s1 198.18.1.2  server ns
#              c2 198.18.2.1 ── 10 Mbit/s ── s2 198.18.2.2
#              braid0 100.64.0.2 ═══ tunnel ═══ braid0 100.64.0.1
#
# Usage: sudo ./scripts/quickstart.sh
# Everything it creates (namespaces, processes, temp dir) is removed on exit,
# on error and on Ctrl-C. All network changes stay inside its own namespaces.
set -euo pipefail

prefix=bqs                   # namespace prefix; names are bqs-<PID>-<role>
size_mb=16                   # download size
port=8080                    # HTTP port in the server namespace

die() { echo "quickstart: $*" >&2; exit 1; }
step() { printf '\n==> %s\n' "$*"; }

# --- Preconditions --------------------------------------------------------

[ "$(id -u)" -eq 0 ] || die "must run as root (namespaces, veths and TUN devices need it): sudo $0"

# sudo's secure_path usually lacks the official Go install location.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	PATH=$PATH:/usr/local/go/bin
fi
need() { # need TOOL DEBIAN-PACKAGE
	command -v "$1" >/dev/null || die "'$1' not found: apt-get install $2${3:+ $3}"
}
need ip iproute2
need tc iproute2
need go golang-go "(or, if Go is installed for your user: sudo env PATH=\"\$PATH\" $0)"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
srv_ns=$prefix-$$-server
cli_ns=$prefix-$$-client
tmp=""

# --- Cleanup --------------------------------------------------------------

# killns NS: stop every process inside namespace NS (TERM, then KILL after 5 s).
killns() {
	local pids i
	pids=$(ip netns pids "$1" 2>/dev/null) || return 0
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086 # word splitting of the PID list is intended
	kill -TERM $pids 2>/dev/null || true
	for i in $(seq 50); do
		sleep 0.1
		pids=$(ip netns pids "$1" 2>/dev/null) || return 0
		[ -n "$pids" ] || return 0
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
}

# cleanup runs once, on any exit. Killing the processes first matters: a
# namespace whose name is deleted lives on while a process is still inside it.
cleanup() {
	local rc=$? f
	trap - EXIT INT TERM
	set +e
	# On a failure (not on Ctrl-C/TERM) show the logs before they are deleted.
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] && [ "$rc" -ne 143 ] && [ -n "$tmp" ]; then
		for f in "$tmp"/*.log; do
			[ -s "$f" ] || continue
			echo "--- last lines of $(basename "$f") ---" >&2
			tail -n 15 "$f" >&2
		done
	fi
	killns "$cli_ns"
	killns "$srv_ns"
	# A job caught between fork and entering its namespace would escape killns.
	f=$(jobs -p)
	# shellcheck disable=SC2086
	[ -z "$f" ] || kill -KILL $f 2>/dev/null
	wait 2>/dev/null
	# Deleting a namespace also deletes its veth ends and braid0.
	ip netns del "$cli_ns" 2>/dev/null
	ip netns del "$srv_ns" 2>/dev/null
	[ -n "$tmp" ] && rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT  # the EXIT trap does the work
trap 'exit 143' TERM

# stale NAME REGEX: NAME matches REGEX, whose first group is a PID that is
# neither this script nor any live process.
stale() {
	[[ $1 =~ $2 ]] || return 1
	[ "${BASH_REMATCH[1]}" != $$ ] && ! kill -0 "${BASH_REMATCH[1]}" 2>/dev/null
}

# What a killed run (kill -9, power loss) left behind: namespaces and temp
# dirs of our prefix whose creating PID is gone.
for ns in $(ip netns list | awk '{print $1}'); do
	stale "$ns" "^$prefix-([0-9]+)-(client|server)\$" || continue
	echo "removing stale namespace $ns"
	killns "$ns"
	ip netns del "$ns" || true
done
for d in "${TMPDIR:-/tmp}/$prefix"-*; do
	stale "${d##*/}" "^$prefix-([0-9]+)\\.[A-Za-z0-9]{6}\$" || continue
	[ -d "$d" ] || continue
	echo "removing stale directory $d"
	rm -rf "$d"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$prefix-$$.XXXXXX")
braid=$tmp/braid

# --- Build ----------------------------------------------------------------

step "building braid"
(cd "$repo" && go build -o "$braid" ./cmd/braid && go build -o "$tmp/braid-lab" ./cmd/braid-lab) # braid lab serve runs the braid-lab next to braid
"$braid" version

# --- Topology -------------------------------------------------------------

step "creating namespaces $cli_ns and $srv_ns with two 10 Mbit/s links"
ip netns add "$srv_ns"
ip netns add "$cli_ns"
ip -n "$srv_ns" link set lo up
ip -n "$cli_ns" link set lo up
for i in 1 2; do
	ip link add "c$i" netns "$cli_ns" type veth peer name "s$i" netns "$srv_ns"
	ip -n "$cli_ns" addr add "198.18.$i.1/24" dev "c$i"
	ip -n "$srv_ns" addr add "198.18.$i.2/24" dev "s$i"
	ip -n "$cli_ns" link set "c$i" up
	ip -n "$srv_ns" link set "s$i" up
	# tbf shapes egress only, so both ends get one: 10 Mbit/s each way.
	tc -n "$cli_ns" qdisc add dev "c$i" root tbf rate 10mbit burst 32kbit latency 50ms
	tc -n "$srv_ns" qdisc add dev "s$i" root tbf rate 10mbit burst 32kbit latency 50ms
done
# Linux answers ARP for any of its addresses on any interface, so without this
# c1 would also reach 198.18.2.2 (over link 1) and c2 198.18.1.2 (over link 2):
# four subflows, two per wire, each looking like an independent path. With
# arp_ignore=1 the server answers only for the address of the receiving
# interface, so each client interface reaches only its own server address and
# braid sees the two real paths.
ip netns exec "$srv_ns" sysctl -qw net.ipv4.conf.all.arp_ignore=1

# --- Keys and configs -----------------------------------------------------

step "generating keys and configs in $tmp"
(umask 077 && "$braid" genkey >"$tmp/server.key" && "$braid" genkey >"$tmp/client.key")
srv_pub=$("$braid" pubkey <"$tmp/server.key")
cli_pub=$("$braid" pubkey <"$tmp/client.key")
srv_sock=$tmp/server.sock
cli_sock=$tmp/client.sock

cat >"$tmp/server.toml" <<EOF
role = "server"
private_key_file = "server.key"

[tun]
address = ["100.64.0.1/24"]

[server]
listen = ["0.0.0.0:7000"]

[[server.clients]]
name = "quickstart"
public_key = "$cli_pub"
allowed_ips = ["100.64.0.2/32"]

[control]
socket = "$srv_sock"
EOF

cat >"$tmp/client.toml" <<EOF
role = "client"
private_key_file = "client.key"

[tun]
address = ["100.64.0.2/24"]

[client]
server_public_key = "$srv_pub"
servers = ["198.18.1.2:7000", "198.18.2.2:7000"]
paths = ["c1", "c2"]

[control]
socket = "$cli_sock"
EOF

# --- Tunnel ---------------------------------------------------------------

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local limit=$1 what=$2
	shift 2
	local deadline=$((SECONDS + limit))
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || die "timed out after ${limit}s waiting for $what"
		sleep 0.2
	done
}
# alive PID NAME: fail early, with the logs, if a daemon has exited.
alive() { kill -0 "$1" 2>/dev/null || die "$2 exited (see its log below)"; }

step "starting braid (logs: $tmp/server.log, $tmp/client.log)"
ip netns exec "$srv_ns" "$braid" up -c "$tmp/server.toml" >"$tmp/server.log" 2>&1 &
srv_pid=$!
server_ready() { alive "$srv_pid" "braid server" && [ -S "$srv_sock" ]; }
wait_for 10 "the server's control socket" server_ready
ip netns exec "$cli_ns" "$braid" up -c "$tmp/client.toml" >"$tmp/client.log" 2>&1 &
cli_pid=$!

# The session counts as up once the client reports it established with both
# paths usable. The status is captured before grepping it: grep -q stopping
# early could otherwise fail braid status with a broken pipe.
established() {
	local st
	alive "$cli_pid" "braid client"
	alive "$srv_pid" "braid server"
	st=$("$braid" status --socket "$cli_sock" --json 2>/dev/null) || return 1
	grep -q '"established": true' <<<"$st" &&
		[ "$(grep -cE '"state": "(active|degraded)"' <<<"$st")" -ge 2 ]
}
wait_for 10 "the client's session to be established on two paths" established
"$braid" status --socket "$cli_sock"

# mem PID: resident and peak resident memory of a daemon, in MiB (docs/install.md
# quotes these as braid's footprint).
mem() {
	awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "RSS %.1f MiB (peak %.1f MiB)", r / 1024, h / 1024 }' "/proc/$1/status"
}
sleep 2
idle_mem="server $(mem "$srv_pid"), client $(mem "$cli_pid")"

# --- Downloads ------------------------------------------------------------

step "serving $size_mb MB from the server namespace on port $port"
# braid's own HTTP workload sets TCP congestion control per socket: cubic, as in
# the papers (a namespace cannot switch its default to cubic when the host does
# not allow it, and this host's default may well be bbr).
ip netns exec "$srv_ns" "$braid" lab serve --addr "0.0.0.0:$port" --cc cubic >"$tmp/http.log" 2>&1 &
http_pid=$!
url_path="/bytes/$((size_mb * 1024 * 1024))"
http_ready() {
	alive "$http_pid" "the HTTP server"
	ip netns exec "$cli_ns" "$braid" lab fetch --timeout 1s "http://198.18.1.2:$port/bytes/1" >/dev/null 2>&1
}
wait_for 10 "the HTTP server" http_ready

# fetch URL: download from the client namespace and set mbps to the goodput
# (size ÷ time). It runs in the background because bash runs a TERM trap only
# after a foreground command ends, but interrupts `wait` at once.
fetch() {
	ip netns exec "$cli_ns" "$braid" lab fetch --cc cubic --timeout 60s "$1" >"$tmp/speed" &
	wait "$!" || die "download of $1 failed"
	mbps=$(awk '{ printf "%.2f", $1 }' "$tmp/speed")
}

step "downloading directly over one path (198.18.1.2)"
fetch "http://198.18.1.2:$port$url_path"
direct=$mbps
echo "direct, one path:      $direct Mbit/s"

step "downloading through the braid tunnel (100.64.0.1)"
fetch "http://100.64.0.1:$port$url_path"
tunnel=$mbps
echo "braid, two paths:      $tunnel Mbit/s"

step "result"
echo "memory idle:           $idle_mem"
echo "memory after download: server $(mem "$srv_pid"), client $(mem "$cli_pid")"
awk -v d="$direct" -v t="$tunnel" -v s="$size_mb" 'BEGIN {
	printf "%d MB download: direct %.2f Mbit/s, braid %.2f Mbit/s, ratio %.2fx\n", s, d, t, t / d
}'

# The client mostly sent ACKs: RX shows how the download was split over the
# paths, SHARE and TX the client's own sending.
step "client status after the download (RX: each path's part of the download)"
"$braid" status --socket "$cli_sock"

step "cleaning up"
