package main

import (
	"os"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/httpbench"
)

// TestE2EOffloadOnOff downloads through braid over the rig's two unshaped veths
// with the kernel's offloads on (the default) and forced off (offload = false at
// both ends), and checks that the bytes are the server's (SHA-256) and that the
// offloads were in effect, or not, as both daemons report them.
func TestE2EOffloadOnOff(t *testing.T) {
	const size = 64 * httpbench.MB
	want := httpbench.BodySum(size)
	for _, on := range []bool{true, false} {
		name := "on"
		if !on {
			name = "off"
		}
		t.Run(name, func(t *testing.T) {
			r := newE2ERigWith(t, false, func(r *e2eRig) {
				if on {
					return
				}
				for _, f := range []string{r.srvCfg, r.cliCfg} {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					// A top-level key: before the first table.
					s := strings.Replace(string(b), "\n[tun]", "\noffload = false\n[tun]", 1)
					if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			})
			res, err := httpbench.Fetch(t.Context(), httpbench.URL("100.64.0.1:8080", size), httpbench.Options{Dial: dialIn(r.cli, e2eCC()), Hash: true})
			if err != nil {
				t.Fatalf("download: %v", err)
			}
			if res.SHA256 != want {
				t.Fatalf("downloaded body's SHA-256 %x, want %x", res.SHA256, want)
			}
			cli, srv := r.dCli.status(t), r.dSrv.status(t)
			t.Logf("%.0f Mbit/s; client %+v %+v; server %+v %+v", res.GoodputMbps(), *cli.Offload, *cli.TUN, *srv.Offload, *srv.TUN)
			checkOffload(t, "client", cli, on, func(o control.OffloadStatus) uint64 { return o.GRORuns })
			checkOffload(t, "server", srv, on, func(o control.OffloadStatus) uint64 { return o.GSORuns })
			// The client writes the download into its TUN: in runs the device
			// coalesces, or one packet at a time.
			if runs := cli.TUN.WriteRuns; on != (runs > 0) {
				t.Errorf("client TUN: %d runs laid out to coalesce with offload %s", runs, name)
			}
		})
	}
}

// checkOffload checks a daemon's offload state: on, GSO and GRO "on" and the
// download coalesced (runs, the side's own counter); off, both off as asked
// and no run.
func checkOffload(t *testing.T, who string, st control.Status, on bool, runs func(control.OffloadStatus) uint64) {
	t.Helper()
	o := st.Offload
	if o == nil {
		t.Fatalf("%s: no offload status", who)
	}
	if on {
		if o.GSO != "on" || o.GRO != "on" || runs(*o) == 0 {
			t.Errorf("%s with offload on: %+v, want GSO and GRO on and coalesced runs", who, *o)
		}
		return
	}
	if o.GSO != "off (disabled)" || o.GRO != "off" || o.GSORuns+o.GRORuns != 0 {
		t.Errorf("%s with offload = false: %+v, want both off and no run", who, *o)
	}
}
