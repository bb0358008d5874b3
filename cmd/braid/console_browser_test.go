package main

import (
	"context"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/internal/testenv"
)

// consoleRow is what the console shows of one path (console/assets/app.js
// writes these data attributes on each row of a peer's path table).
type consoleRow struct {
	Path   string `json:"path"`
	Device string `json:"device"`
	State  string `json:"state"`
	Rate   string `json:"rate"` // Mbit/s now, received + sent; "" before the first rate
}

const consoleRowsJS = `Array.from(document.querySelectorAll("tr[data-path]")).map(r => ({path: r.dataset.path, device: r.dataset.device, state: r.dataset.state, rate: r.dataset.rate}))`

// TestConsoleBrowser opens client a's console in headless Chromium during a
// download over both paths: the charts come up, both paths show up with a
// rate, and when path 2 is cut the page shows it down within 2 s (braid takes
// a busy path down within 350 ms, docs/schedulers.md; the page polls every
// second). Then the server's console lists its clients, finds client a by
// address and shows its paths. BRAID_CONSOLE_SCREENSHOTS=dir keeps the
// screenshots of both pages there (docs/console.png, docs/console-server.png).
func TestConsoleBrowser(t *testing.T) {
	testenv.SkipIfEmulated(t, testenv.NoNetns)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs and TUN devices")
	}
	chrome := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		t.Skip("needs a headless Chromium: apt-get install chromium (.ci/run installs it)")
	}
	r := newE2ERigWith(t, true, func(r *e2eRig) {
		// [control] is the files' last table.
		for _, c := range []struct{ file, addr string }{{r.cliCfg, "127.0.0.1:9911"}, {r.srvCfg, "127.0.0.1:9912"}} {
			f, err := os.OpenFile(c.file, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("console = \"" + c.addr + "\"\n")
				f.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	// The console listens on loopback inside the client's namespace; the
	// browser reaches it through a forwarder on this namespace's loopback,
	// so it still sends a loopback Host.
	url := "http://" + forwardInto(t, dialIn(r.cli, ""), "127.0.0.1:9911") + "/"

	// A download long enough for the whole test (2 × 10 Mbit/s).
	dctx, stopDownload := context.WithCancel(context.Background())
	defer stopDownload()
	go httpbench.Fetch(dctx, httpbench.URL("100.64.0.1:8080", 200*httpbench.MB), httpbench.Options{Dial: dialIn(r.cli, e2eCC())})

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 640))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// Start the browser and let it draw a first page (on a fresh machine
	// that builds its font cache) before timing the console.
	if err := chromedp.Do(bctx, chromedp.Navigate("data:text/html,<p>braid</p>"), chromedp.WaitVisible(chromedp.CSS("p"))); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}

	// Three loads: the first is cold (the browser has not seen the page);
	// on this shared 2-core machine other work can stretch any one of them,
	// so the target is held to the best and every load is logged.
	best := math.Inf(1)
	for i := range 3 {
		start := time.Now()
		if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-charts-ready] .uplot`))); err != nil {
			t.Fatalf("loading the console: %v", err)
		}
		firstChart, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.braidFirstChart`))
		if err != nil {
			t.Fatal(err)
		}
		// Bytes of the page and its assets as the browser fetched them (the
		// polls left out).
		weight, err := chromedp.Run(bctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").concat(performance.getEntriesByType("navigation")).filter(e => !e.name.includes("/api/")).reduce((n, e) => n + e.transferSize, 0)`))
		if err != nil {
			t.Fatal(err)
		}
		timing, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify(performance.getEntries().filter(e => e.name.startsWith("http")).map(e => [e.name.replace(/^.*\//, "").slice(0, 20), Math.round(e.startTime), Math.round(e.responseEnd)]))`))
		t.Logf("load %d: first chart %.0f ms after navigation start (%v with the request), page weight %d bytes; fetches (name, start, end ms): %s",
			i+1, firstChart, time.Since(start).Round(time.Millisecond), weight, timing)
		best = min(best, firstChart)
	}
	if best > 1000 {
		t.Errorf("first chart at best %.0f ms after navigation, want ≤ 1 s", best)
	}

	rows := func() []consoleRow {
		rs, err := chromedp.Run(bctx, chromedp.Evaluate[[]consoleRow](consoleRowsJS))
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// Both paths up and carrying the download (the rate is the last second's).
	var rs []consoleRow
	deadline := time.Now().Add(10 * time.Second)
	for ; ; time.Sleep(200 * time.Millisecond) {
		rs = rows()
		// Each link (c1, c2) carries two paths, one to each of the server's
		// addresses; a link is up when one of its paths is active with a rate.
		up := map[string]bool{}
		for _, row := range rs {
			if rate, err := strconv.ParseFloat(row.Rate, 64); err == nil && rate > 0 && row.State == "active" {
				up[row.Device] = true
			}
		}
		if up["c1"] && up["c2"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page does not show two active paths with a rate: %+v", rs)
		}
	}
	t.Logf("both paths up: %+v", rs)
	time.Sleep(4 * time.Second) // a few seconds of both paths on the charts

	// Cut path 2 at the server's end, as TestE2ETunnel's path-cut does.
	if err := r.srv.SetDown("s2"); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	for ; ; time.Sleep(50 * time.Millisecond) {
		rs = rows()
		// Every path over c2 down. (The engine can take c1's paths down
		// too for a moment as the traffic moves onto them; the page shows
		// that as it is, and the log says so.)
		down, c2 := 0, 0
		for _, row := range rs {
			if row.Device == "c2" {
				c2++
				if row.State == "down" {
					down++
				}
			} else if row.State == "down" {
				t.Logf("path %s over %s shown down too, %v after the cut", row.Path, row.Device, time.Since(cut).Round(10*time.Millisecond))
			}
		}
		if c2 > 0 && down == c2 {
			break
		}
		if time.Since(cut) > 5*time.Second {
			t.Fatalf("5 s after the cut the page shows %+v", rs)
		}
	}
	took := time.Since(cut)
	t.Logf("link c2 cut: its paths shown down after %v", took.Round(10*time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("link c2 shown down %v after the cut, want ≤ 2 s", took)
	}

	// The server's console: the client list, searched by address; watching
	// client a brings up its paths (those over c1 active) and charts.
	srvURL := "http://" + forwardInto(t, dialIn(r.srv, ""), "127.0.0.1:9912") + "/"
	sctx, cancelTab := chromedp.NewContext(bctx) // a second tab
	defer cancelTab()
	if err := chromedp.Do(sctx, chromedp.Navigate(srvURL), chromedp.WaitVisible(chromedp.CSS(`#client-table tbody tr`)),
		chromedp.SendKeys(chromedp.CSS(`#search`), "100.64.0.2"),
		chromedp.Click(chromedp.CSS(`#client-table tbody tr input`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-charts-ready] section.peer .uplot`))); err != nil {
		t.Fatalf("the server's console: %v", err)
	}
	listed, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#client-table tbody tr")).map(r => r.cells[1].textContent)`))
	if err != nil || len(listed) != 1 || listed[0] != "a" {
		t.Fatalf("searching the server's clients for 100.64.0.2 lists %q (%v), want a alone", listed, err)
	}
	// The cut path's neighbour over the same address can be probing a while
	// after the cut: wait for one path of a's to be shown active.
	var srvRows []consoleRow
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if srvRows, err = chromedp.Run(sctx, chromedp.Evaluate[[]consoleRow](consoleRowsJS)); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(srvRows, func(r consoleRow) bool { return r.State == "active" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's console shows client a's paths as %+v", srvRows)
		}
	}
	t.Logf("server console, client a: %+v", srvRows)

	time.Sleep(4 * time.Second) // the client's charts show the cut, the server's a few seconds of client a
	dir := os.Getenv("BRAID_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, shot := range []struct {
		ctx  context.Context
		file string
	}{{bctx, "console.png"}, {sctx, "console-server.png"}} {
		png, err := chromedp.Run(shot.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, shot.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", filepath.Join(dir, shot.file), len(png))
	}
}

// forwardInto listens on this namespace's loopback and joins each connection
// to addr dialled with dial (inside another namespace) until the test ends;
// it returns the address it listens on.
func forwardInto(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				d, err := dial(ctx, "tcp", addr)
				cancel()
				if err != nil {
					return
				}
				defer d.Close()
				go func() { io.Copy(d, c); d.Close() }()
				io.Copy(c, d)
			}()
		}
	}()
	return ln.Addr().String()
}
