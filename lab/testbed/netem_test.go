package testbed

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/braid-vpn/braid/lab/scenario"
)

func TestNetemArgs(t *testing.T) {
	ge, err := scenario.ParseLoss("gemodel 1% 75% 50% 0.5%")
	if err != nil {
		t.Fatal(err)
	}
	uni, _ := scenario.ParseLoss("random 0.1%")
	cases := []struct {
		s    scenario.Shaping
		want string
	}{
		{scenario.Shaping{}, "qdisc replace dev lb-x root netem limit 1000"},
		// 10 Mbit/s × 20 ms = 25000 B in flight = 16.5 full frames → 17 + 1
		// on top of the 100 waiting.
		{scenario.Shaping{Rate: 10e6, Delay: 20 * time.Millisecond, QueueLimit: 100, Loss: ge},
			"qdisc replace dev lb-x root netem limit 118 delay 20000us loss gemodel 1% 75% 50% 0.5% rate 10000000bit"},
		{scenario.Shaping{Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Loss: uni, QueueLimit: 50},
			"qdisc replace dev lb-x root netem limit 50 delay 5000us 1000us loss random 0.1%"},
	}
	for _, c := range cases {
		if got := strings.Join(NetemArgs("lb-x", c.s), " "); got != c.want {
			t.Errorf("NetemArgs(%+v)\n got %s\nwant %s", c.s, got, c.want)
		}
	}
}

func TestResolveEmulator(t *testing.T) {
	if _, err := ResolveEmulator("ns-3"); err == nil || !strings.Contains(err.Error(), "valid: auto, userspace, netem") {
		t.Errorf("unknown emulator: %v", err)
	}
	if got, err := ResolveEmulator("userspace"); got != EmulatorUserspace || err != nil {
		t.Errorf("userspace: %q, %v", got, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: probes netem in a namespace")
	}
	have := NetemAvailable()
	auto, err := ResolveEmulator("auto")
	if err != nil {
		t.Fatal(err)
	}
	netem, nerr := ResolveEmulator("netem")
	if have == nil {
		if auto != EmulatorNetem || netem != EmulatorNetem || nerr != nil {
			t.Errorf("kernel has netem: auto → %q, netem → %q, %v", auto, netem, nerr)
		}
		return
	}
	t.Logf("no netem here: %v", have)
	if auto != EmulatorUserspace {
		t.Errorf("no netem: auto → %q, want userspace", auto)
	}
	if nerr == nil || !strings.Contains(nerr.Error(), "sch_netem") || !strings.Contains(nerr.Error(), "--emulator userspace") {
		t.Errorf("no netem: --emulator netem gave %v, want an error naming sch_netem and the way out", nerr)
	}
}
