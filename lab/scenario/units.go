package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/braid-vpn/braid/lab/linktrace"
	"github.com/braid-vpn/braid/lab/table"
)

// Rate is a link rate in bits per second; 0 means unshaped.
type Rate uint64

// Rate units, decimal as in tc and on network equipment.
const (
	Kbit Rate = 1000
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
)

// MinRate and MaxRate bound a shaped link: below 8 kbit/s a 1500-byte frame
// takes 1.5 s to serialize, which is a mistake, not an experiment; above
// 100 Gbit/s no emulator here keeps up.
const (
	MinRate = 8 * Kbit
	MaxRate = 100 * Gbit
)

// ParseRate reads tc-style rates: "10mbit", "1gbit", "500kbit", "2.5Mbit/s",
// case-insensitive, decimal units. "unlimited" is 0 (unshaped). tc's "mbps"
// means megabytes per second, which almost nobody intends, so the byte
// units are refused rather than guessed.
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	if t == "unlimited" {
		return 0, nil
	}
	t = strings.TrimSuffix(t, "/s")
	if num, unit := splitNumber(t); num != "" && slices.Contains([]string{"bps", "kbps", "mbps", "gbps", "b", "kb", "mb", "gb"}, unit) {
		return 0, fmt.Errorf("%q is ambiguous (tc reads %q as bytes per second); write bits, e.g. \"%smbit\"", s, unit, num)
	}
	r, err := amount(s, t, "rate", `"10mbit", "1gbit", "500kbit"`, map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9},
		"bit, kbit, mbit, gbit", `"%smbit"`)
	switch {
	case err != nil:
		return 0, err
	case r < float64(MinRate) || r > float64(MaxRate):
		return 0, fmt.Errorf("%q out of range (%v..%v; omit the key or write \"unlimited\" for an unshaped link)", s, MinRate, MaxRate)
	}
	return Rate(math.Round(r)), nil
}

// String writes the rate in the largest unit that keeps it short:
// "10Mbit/s", "1Gbit/s", "2.5Mbit/s", "unlimited".
func (r Rate) String() string {
	for _, u := range []struct {
		r    Rate
		name string
	}{{Gbit, "Gbit/s"}, {Mbit, "Mbit/s"}, {Kbit, "kbit/s"}, {1, "bit/s"}} {
		if r >= u.r {
			return fmtFloat(float64(r)/float64(u.r)) + u.name
		}
	}
	return "unlimited"
}

func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r *Rate) UnmarshalText(b []byte) error { return unmarshalWith(r, b, ParseRate) }

// MaxSize bounds the download size: larger files only make a campaign longer.
const MaxSize = 64 << 30

// ParseSize reads a byte count: "16MiB", "16MB", "500kB", "1GiB", "4096B".
// Units are case-insensitive; "k", "M", "G" are decimal and "Ki", "Mi", "Gi"
// binary, so the file says which one the paper's "16 MB" was taken to be.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	n, err := amount(s, t, "size", `"16MiB", "500kB"`, map[string]float64{"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30},
		"B, kB, MB, GB, KiB, MiB, GiB", `"%sMiB" or "%[1]sB"`)
	switch n = math.Round(n); {
	case err != nil:
		return 0, err
	case n < 1 || n > MaxSize:
		return 0, fmt.Errorf("%q out of range (1B..64GiB)", s)
	}
	return int64(n), nil
}

// FormatSize writes a byte count with a binary unit when it is a whole
// number of them ("16MiB"), else in bytes.
func FormatSize(n int64) string { return table.Size(n, "") }

// splitNumber splits "10.5mbit" into "10.5" and "mbit".
func splitNumber(s string) (num, unit string) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], s[i:]
}

// amount reads t, s lower-cased and without spaces, as a number times one
// of units; what names the value, eg shows some and unitEg (a format of the
// number) what a unit would look like, valid lists the units.
func amount(s, t, what, eg string, units map[string]float64, valid, unitEg string) (float64, error) {
	num, unit := splitNumber(t)
	mult, ok := units[unit]
	switch {
	case num == "":
		return 0, fmt.Errorf("%q is not a %s (e.g. %s)", s, what, eg)
	case unit == "":
		return 0, fmt.Errorf("%q has no unit (e.g. %s)", s, fmt.Sprintf(unitEg, num))
	case !ok:
		return 0, fmt.Errorf("%q has unknown unit %q (valid: %s)", s, unit, valid)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a %s", s, what)
	}
	return v * mult, nil
}

// LossModel says how a direction of a link drops packets.
type LossModel uint8

const (
	LossNone LossModel = iota
	// LossUniform drops each packet independently (netem "loss random").
	LossUniform
	// LossGE is the Gilbert-Elliott chain of netem's "loss gemodel".
	LossGE
)

// Loss is a loss model with its parameters in percent, exactly as netem
// takes them, so that the netem backend passes them on unchanged and the
// userspace emulator matches it (docs/lab.md, "Loss models", says what the
// Gilbert-Elliott chain does with them).
type Loss struct {
	Model LossModel
	// Percent is the drop probability of LossUniform.
	Percent float64
	// P, R, OneMinusH and OneMinusK are the gemodel parameters.
	P, R, OneMinusH, OneMinusK float64
}

// ParseLoss reads a loss model in netem's words: "none", "1%", "random 1%",
// "gemodel 1% 75% 50% 0.5%" (p r 1-h 1-k; docs/lab.md has the defaults of
// the ones left out, netem's).
func ParseLoss(s string) (Loss, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) == 0 || (len(f) == 1 && f[0] == "none") {
		return Loss{}, nil
	}
	// A bare number is random's; its errors then name only the number.
	if len(f) == 1 && (f[0][0] == '.' || f[0][0] == '-' || f[0][0] >= '0' && f[0][0] <= '9') {
		f = []string{"random", f[0]}
	}
	switch f[0] {
	case "random":
		if len(f) != 2 {
			return Loss{}, fmt.Errorf("%q: random takes one percentage (e.g. \"random 1%%\")", s)
		}
		x, err := percent(f[1])
		switch {
		case err != nil && strings.TrimSpace(s) == f[1]:
			return Loss{}, err
		case err != nil:
			return Loss{}, fmt.Errorf("%q: %v", s, err)
		case x == 0:
			return Loss{}, nil
		}
		return Loss{Model: LossUniform, Percent: x}, nil
	case "gemodel":
		args := f[1:]
		if len(args) < 1 || len(args) > 4 {
			return Loss{}, fmt.Errorf("%q: gemodel takes 1 to 4 percentages: p [r [1-h [1-k]]]", s)
		}
		l := Loss{Model: LossGE, OneMinusH: 100}
		for i, dst := range []*float64{&l.P, &l.R, &l.OneMinusH, &l.OneMinusK}[:len(args)] {
			x, err := percent(args[i])
			if err != nil {
				return Loss{}, fmt.Errorf("%q: gemodel %s: %v", s, [4]string{"p", "r", "1-h", "1-k"}[i], err)
			}
			*dst = x
		}
		if len(args) == 1 {
			l.R = 100 - l.P
		}
		return l, nil
	}
	return Loss{}, fmt.Errorf("%q is not a loss model (e.g. \"none\", \"1%%\", \"random 1%%\", \"gemodel 1%% 75%% 50%% 0.5%%\")", s)
}

// percent reads a netem percentage: "0.5%" or "0.5", both meaning 0.5%.
func percent(s string) (float64, error) {
	t := strings.TrimSuffix(s, "%")
	x, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(x) {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	if x < 0 || x > 100 {
		return 0, fmt.Errorf("%q is outside 0%%..100%%", s)
	}
	return x, nil
}

// String writes the model as netem's loss arguments, which ParseLoss reads
// back: "none", "random 1%", "gemodel 1% 75% 50% 0.5%".
func (l Loss) String() string {
	switch l.Model {
	case LossUniform:
		return "random " + pct(l.Percent)
	case LossGE:
		return "gemodel " + pct(l.P) + " " + pct(l.R) + " " + pct(l.OneMinusH) + " " + pct(l.OneMinusK)
	}
	return "none"
}

func pct(x float64) string { return fmtFloat(x) + "%" }

// MeanLoss is the long-run fraction (0..1) of packets dropped in one
// direction; for gemodel the stationary mix of the two states.
func (l Loss) MeanLoss() float64 {
	switch l.Model {
	case LossUniform:
		return l.Percent / 100
	case LossGE:
		p, r := l.P/100, l.R/100
		if p+r == 0 {
			// The chain never leaves the good state it starts in.
			return l.OneMinusK / 100
		}
		bad := p / (p + r)
		return (1-bad)*l.OneMinusK/100 + bad*l.OneMinusH/100
	}
	return 0
}

// IsZero reports whether the model never drops a packet.
func (l Loss) IsZero() bool { return l.MeanLoss() == 0 }

func (l Loss) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

func (l *Loss) UnmarshalText(b []byte) error { return unmarshalWith(l, b, ParseLoss) }

// unmarshalWith sets *dst to b as parse reads it, and leaves it alone on
// error.
func unmarshalWith[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	v, err := parse(string(b))
	if err == nil {
		*dst = v
	}
	return err
}

// Capacity is a direction's capacity over time ([links] trace), instead of a
// fixed rate: a profile of the lab's trace generator (package linktrace),
// which the testbed turns into a Mahimahi trace with a seed of the campaign,
// or a Mahimahi trace file read as it is. The zero Capacity is none.
type Capacity struct {
	Profile string // a linktrace profile name; "" with File
	Mean    Rate   // the profile's mean rate; 0 = the profile's own
	File    string // a Mahimahi trace file, relative to the working directory
}

// ParseCapacity reads "none", a profile with an optional mean rate
// ("fading", "steady 20mbit") or "file PATH". It checks the profile's name;
// the scenario parser checks that the file reads as a trace.
func ParseCapacity(s string) (Capacity, error) {
	f := strings.Fields(s)
	switch {
	case len(f) == 0 || len(f) == 1 && strings.EqualFold(f[0], "none"):
		return Capacity{}, nil
	case strings.EqualFold(f[0], "file"):
		if len(f) != 2 {
			return Capacity{}, fmt.Errorf("%q: file takes one path (a Mahimahi trace, e.g. \"file traces/lte.down\"; no spaces)", s)
		}
		return Capacity{File: f[1]}, nil
	case len(f) > 2:
		return Capacity{}, fmt.Errorf("%q: a trace is a profile and an optional mean rate (e.g. \"steady 20mbit\"), or \"file PATH\"", s)
	}
	name := strings.ToLower(f[0])
	if _, err := linktrace.ProfileByName(name); err != nil {
		return Capacity{}, fmt.Errorf("%q: %v", s, err)
	}
	c := Capacity{Profile: name}
	if len(f) == 2 {
		r, err := ParseRate(f[1])
		if err != nil {
			return Capacity{}, fmt.Errorf("%q: mean rate: %v", s, err)
		}
		c.Mean = r
	}
	return c, nil
}

// IsZero reports whether the direction has no trace.
func (c Capacity) IsZero() bool { return c == Capacity{} }

// String writes what ParseCapacity reads back.
func (c Capacity) String() string {
	switch {
	case c.File != "":
		return "file " + c.File
	case c.Profile == "":
		return "none"
	case c.Mean != 0:
		return c.Profile + " " + c.Mean.String()
	}
	return c.Profile
}

func (c Capacity) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c *Capacity) UnmarshalText(b []byte) error { return unmarshalWith(c, b, ParseCapacity) }
