package bench

import (
	"math"
	"os"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// rejects checks that parse refuses every one of the bad inputs.
func rejects(t *testing.T, parse func([]byte) error, bad map[string]string) {
	t.Helper()
	for name, b := range bad {
		if parse([]byte(b)) == nil {
			t.Errorf("%s: accepted %q", name, b)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	data := []byte("cpu  100 20 30 400 50 6 7 8 9 10\n" +
		"cpu0 50 10 15 200 25 3 3 4 4 5\n" +
		"cpu1 50 10 15 200 25 3 4 4 5 5\n" +
		"intr 12345 0 0\nctxt 999\n")
	busy, cpus, err := ParseProcStat(data)
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system+irq+softirq = 100+20+30+6+7 = 163 ticks;
	// idle, iowait, steal and guest do not count.
	if !near(busy, 1.63) || cpus != 2 {
		t.Errorf("got busy %v cpus %d, want busy 1.63 cpus 2", busy, cpus)
	}
	// Old kernels have no steal/guest columns: seven fields suffice.
	busy, _, err = ParseProcStat([]byte("cpu 1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n"))
	if err != nil || !near(busy, 0.19) {
		t.Errorf("7-field line: %v, %v; want busy 0.19", busy, err)
	}
	rejects(t, func(b []byte) error { _, _, err := ParseProcStat(b); return err }, map[string]string{
		"no aggregate": "cpu0 1 2 3 4 5 6 7\n",
		"short":        "cpu 1 2 3 4 5 6\n",
		"not a number": "cpu 1 2 x 4 5 6 7\n",
		"bad idle":     "cpu 1 2 3 x 5 6 7\n",
	})
}

func TestParsePidStat(t *testing.T) {
	// A command name with spaces and parentheses; utime (field 14) = 250,
	// stime (15) = 125, cutime/cstime (16, 17) = 99 must not count.
	line := "1234 (braid up) (x) S 1 2 3 4 5 6 7 8 9 10 250 125 99 99 20 0 8 0 100 1000 10\n"
	got, err := ParsePidStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if !near(got, 3.75) {
		t.Errorf("got %v s, want 3.75", got)
	}
	rejects(t, func(b []byte) error { _, err := ParsePidStat(b); return err }, map[string]string{
		"no paren":  "1234 braid S 1 2 3 4 5 6 7 8 9 10 250 125",
		"truncated": "1234 (braid) S 1 2 3 4 5 6 7 8 9 10 250",
		"garbage":   "1234 (braid) S 1 2 3 4 5 6 7 8 9 10 x 125",
		"bad stime": "1234 (braid) S 1 2 3 4 5 6 7 8 9 10 250 x",
	})
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tbraid\nVmPeak:\t 1250000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n"
	if got, err := ParseVmHWM([]byte(status)); err != nil || got != 20480*1024 {
		t.Errorf("got %v, %v; want %d bytes (kB in status are KiB)", got, err, 20480*1024)
	}
	rejects(t, func(b []byte) error { _, err := ParseVmHWM(b); return err }, map[string]string{
		"kernel thread": "Name:\tkthreadd\nState:\tS (sleeping)\n",
		"no unit":       "VmHWM:\t20480\n",
		"other unit":    "VmHWM:\t20480 MB\n",
		"garbage":       "VmHWM:\tx kB\n",
	})
}

// The live files parse: this is Linux and the bench reads them as above.
func TestReadLiveProc(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc here")
	}
	busy, cpus, err := ReadSystemCPU()
	if err != nil {
		t.Fatal(err)
	}
	if cpus < 1 || busy <= 0 {
		t.Errorf("system busy %v, %d CPUs", busy, cpus)
	}
	self, err := perProcess(os.Getpid(), "bench process", "CPU time", "stat", ParsePidStat)
	if err != nil || self < 0 {
		t.Errorf("own CPU %v, %v", self, err)
	}
	if _, err := perProcess(1<<30, "nothing", "CPU time", "stat", ParsePidStat); err == nil || !strings.Contains(err.Error(), "CPU time of the nothing") {
		t.Errorf("CPU of a nonexistent process: %v", err)
	}
	if rss, err := perProcess(os.Getpid(), "bench process", "peak RSS", "status", ParseVmHWM); err != nil || rss < 1<<20 {
		t.Errorf("own peak RSS %v bytes, %v", rss, err)
	}
	if v, err := perProcess(0, "client daemon", "peak RSS", "status", ParseVmHWM); err != nil || v.Valid() {
		t.Errorf("no process: %v, %v; want NaN", v, err)
	}
}

func TestReadPidCPU(t *testing.T) {
	// Burn a little CPU so that this process has some to report.
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	v, err := ReadPidCPU(os.Getpid())
	if err != nil || v <= 0 {
		t.Fatalf("ReadPidCPU(self) = %v, %v (x %d)", v, err, x)
	}
	if _, err := ReadPidCPU(-1); err == nil {
		t.Error("no error for a process that cannot exist")
	}
}
