package main

import (
	"testing"

	"github.com/braid-vpn/braid/httpbench"
)

// BenchmarkThroughput compares, in one run over the same unshaped veth pairs, a bulk
// TCP download straight over one veth (the kernel alone) with the same download
// through braid over both veths. It reports Mbit/s of each and their ratio. Root
// only; run with
//
//	go test ./cmd/braid -run NONE -bench Throughput -benchtime 3x
func BenchmarkThroughput(b *testing.B) {
	r := newE2ERig(b, false)
	const size = 256 * httpbench.MB
	var direct, tunnel float64
	for i := 0; i < b.N; i++ {
		direct += r.fetch(b, "198.18.1.2:8080", size, nil).GoodputMbps()
		tunnel += r.fetch(b, "100.64.0.1:8080", size, nil).GoodputMbps()
	}
	n := float64(b.N)
	b.ReportMetric(direct/n, "kernel-Mbit/s")
	b.ReportMetric(tunnel/n, "braid-Mbit/s")
	b.ReportMetric(tunnel/direct, "braid/kernel")
	logPaths(b, "client", r.dCli.status(b))
}
