package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func lines(s string) []string            { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// newAt is New on the clock now.
func newAt(w *bytes.Buffer, total int, isTerminal bool, now func() time.Time) *Bar {
	b := New(w, total, isTerminal)
	b.now, b.start = now, now()
	return b
}

func TestPlainLines(t *testing.T) {
	c := newClock()
	var buf bytes.Buffer
	b := newAt(&buf, 4, false, c.now)
	c.add(10 * time.Second)
	b.Step("rtt=20ms transport=direct")
	// Steps of 10 s and 30 s: mean 20 s, 2 left → ETA 40 s.
	c.add(30 * time.Second)
	b.Step("rtt=20ms transport=braid")
	c.add(80 * time.Second)
	b.Step("")
	c.add(40 * time.Second)
	b.Step("last")
	b.Done()
	want := []string{
		"[1/4]  25%  elapsed 0:10  ETA 0:30  rtt=20ms transport=direct",
		"[2/4]  50%  elapsed 0:40  ETA 0:40  rtt=20ms transport=braid",
		"[3/4]  75%  elapsed 2:00  ETA 0:40",
		"[4/4] 100%  elapsed 2:40  ETA 0:00  last",
		"done: 4 steps in 2:40",
	}
	got := lines(buf.String())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("carriage return written to a non-terminal")
	}
}

func TestTerminalRedraw(t *testing.T) {
	c := newClock()
	var buf bytes.Buffer
	b := newAt(&buf, 200, true, c.now)
	c.add(90 * time.Second)
	b.Step("a long label here")
	c.add(90 * time.Second)
	b.Step("x")
	// Two steps in 3:00: 1:30 each, 198 left → 4:57:00.
	first := "[  1/200]   0%  elapsed 1:30  ETA 4:58:30  a long label here"
	second := "[  2/200]   1%  elapsed 3:00  ETA 4:57:00  x"
	pad := strings.Repeat(" ", len(first)-len(second))
	want := "\r" + first + "\r" + second + pad
	if buf.String() != want {
		t.Errorf("got  %q\nwant %q", buf.String(), want)
	}
	buf.Reset()
	c.add(30 * time.Second)
	b.Done()
	done := "stopped: 2/200 steps in 3:30"
	if want := "\r" + done + strings.Repeat(" ", len(second)-len(done)) + "\n"; buf.String() != want {
		t.Errorf("Done wrote %q, want %q", buf.String(), want)
	}
	if strings.Contains(buf.String()[:len(buf.String())-1], "\n") {
		t.Error("terminal output has a newline before Done")
	}
	buf.Reset()
	b.Step("after")
	b.Done()
	if buf.Len() != 0 {
		t.Errorf("wrote %q after Done", buf.String())
	}
}

func TestUnknownAndExceededTotal(t *testing.T) {
	c := newClock()
	var buf bytes.Buffer
	b := newAt(&buf, 0, false, c.now)
	c.add(61 * time.Second)
	b.Step("p")
	if got := buf.String(); got != "[1] elapsed 1:01  p\n" {
		t.Errorf("unknown total: %q", got)
	}
	buf.Reset()
	b = newAt(&buf, 1, false, c.now)
	b.Step("")
	b.Step("")
	if got := lines(buf.String()); got[1] != "[2/2] 100%  elapsed 0:00  ETA 0:00" {
		t.Errorf("exceeded total: %q", got[1])
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                               "0:00",
		1499 * time.Millisecond:         "0:01",
		59*time.Minute + 59*time.Second: "59:59",
		time.Hour + 2*time.Minute + 3*time.Second: "1:02:03",
		-time.Second: "0:00",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestConcurrentSteps(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, 100, false)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				b.Step("s")
			}
		}()
	}
	wg.Wait()
	b.Done()
	got := lines(buf.String())
	if len(got) != 101 || !strings.HasPrefix(got[99], "[100/100] 100%") {
		t.Errorf("%d lines, 100th %q", len(got), got[99])
	}
}
