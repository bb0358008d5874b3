package budget

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for s, want := range map[string]Limit{
		"10GiB/month": {10 << 30, Month},
		"500MB/day":   {500e6, Day},
		"1.5 GB/week": {1.5e9, Week},
		"2TiB/Month":  {2 << 40, Month},
	} {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "10GiB", "10/month", "10XB/month", "-1GB/day", "1GB/year", "0GB/day"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if s := (Limit{10 << 30, Month}).String(); s != "10GiB/month" {
		t.Errorf("String = %q", s)
	}
}

func TestPeriodStart(t *testing.T) {
	at := time.Date(2026, 11, 26, 15, 4, 5, 0, time.UTC) // a Thursday
	for p, want := range map[Period]time.Time{
		Day:   time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC),
		Week:  time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), // Monday
		Month: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := p.Start(at); !got.Equal(want) {
			t.Errorf("%v.Start = %v, want %v", p, got, want)
		}
	}
}

func TestMeter(t *testing.T) {
	m := Meter{Limit: Limit{1000, Month}}
	t0 := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	m.Add(600, t0)
	if m.Exceeded(t0) {
		t.Fatal("600 of 1000 exceeded")
	}
	m.Add(400, t0.Add(time.Minute))
	if !m.Exceeded(t0.Add(time.Minute)) {
		t.Fatal("1000 of 1000 not exceeded")
	}
	// A new month starts afresh.
	dec := time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC)
	if m.Exceeded(dec) || m.Used != 0 {
		t.Fatalf("new month: exceeded %v, used %d", m.Exceeded(dec), m.Used)
	}
	// No limit: never exceeded.
	var free Meter
	free.Add(1<<40, t0)
	if free.Exceeded(t0) {
		t.Fatal("unmetered path exceeded")
	}
}
