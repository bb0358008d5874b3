package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/results"
)

// lossyScenario: two 10 Mbit/s paths of 20 ms RTT, without loss and with 2 %
// random loss in each direction of both; one path alone (direct) and braid.
const lossyScenario = `name = "lossy"
description = "braid's loss recovery against one lossless path"
[experiment]
size = "4MiB"
reps = 2
[[transports]]
name = "direct"
[[transports]]
name = "braid"
[sweep]
rtt = ["20ms"]
loss = ["none", "random 2%"]
`

// TestLabLossyPathsBeatOneCleanPath: with 2 % loss on both of its paths, a
// download through braid (default recovery) is faster than the same download
// over one lossless path of the same rate. Without recovery the inner TCP is
// loss-bound far below that (about 4 Mbit/s here).
func TestLabLossyPathsBeatOneCleanPath(t *testing.T) {
	labTestBraid(t, "needs root: builds the lab's network namespaces and starts braid daemons")
	dir := t.TempDir()
	file := filepath.Join(dir, "lossy.toml")
	if err := os.WriteFile(file, []byte(lossyScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"lab", "run", file, "--json", "--out", filepath.Join(dir, "out")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res results.Run
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not a results.Run: %v", err)
	}
	var cleanDirect, lossyBraid float64
	for _, p := range res.Points {
		if p.Error != "" || len(p.Samples) != 2 {
			t.Fatalf("%s: %d samples, error %q", p.Label, len(p.Samples), p.Error)
		}
		loss := ""
		for _, pa := range p.Params {
			if pa.Axis == "loss" {
				loss = pa.Text
			}
		}
		t.Logf("%-8s loss %-10s %6.2f Mbit/s", p.Label, loss, p.Goodput.Mean)
		checkBulkRecovery(t, p)
		if r := p.BulkRecovery; r != nil && loss != "none" && !(r.PathLossRate.Mean > 0) {
			t.Errorf("%s with %s loss: the server counted no path loss", p.Label, loss)
		}
		switch {
		case p.Transport == "direct" && loss == "none":
			cleanDirect = p.Goodput.Mean
		case p.Transport == "braid" && loss != "none":
			lossyBraid = p.Goodput.Mean
		}
	}
	if cleanDirect == 0 || lossyBraid == 0 {
		t.Fatalf("missing points: direct without loss %.2f, braid with loss %.2f", cleanDirect, lossyBraid)
	}
	if lossyBraid <= cleanDirect {
		t.Errorf("braid over two lossy paths %.2f Mbit/s, one lossless path %.2f: recovery did not pay", lossyBraid, cleanDirect)
	}
}
