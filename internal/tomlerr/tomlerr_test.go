package tomlerr

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type item struct {
	Name string `toml:"name"`
	Size int64  `toml:"size"`
}

type opts struct {
	Rate string `toml:"rate"`
}

type schema struct {
	Title   string          `toml:"title"`
	Ratios  []float64       `toml:"ratios"`
	Items   []item          `toml:"items"`
	PerNode map[string]opts `toml:"per_node"`
	Nested  *struct {
		Flag bool `toml:"flag"`
	} `toml:"nested"`
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"title = \"x\"\ntitel = 1\n", `f.toml: line 2: unknown key "titel" (did you mean "title"?)`},
		{"[[items]]\nname = \"a\"\n[[items]]\nnmae = \"b\"\n", `f.toml: line 4: unknown key "items.nmae" (did you mean "name"?)`},
		{"[per_node.client]\nrate = \"1\"\nrats = \"2\"\n", `f.toml: line 3: unknown key "per_node.client.rats" (did you mean "rate"?)`},
		{"[nested]\nflag = true\n[nestd]\n", `f.toml: line 3: unknown table "nestd" (did you mean "nested"?)`},
		{"zzz = 1\nyyy = 2\n", `f.toml: line 1: unknown key "zzz" (and 1 more unknown key)`},
		{"title = 3\n", `f.toml: line 1: title: expected a string, found an integer`},
		{"ratios = [\"a\"]\n", `f.toml: line 1: ratios: expected an array of numbers, found an array containing a string`},
		{"[[items]]\nsize = \"big\"\n", `f.toml: line 2: items.size: expected an integer, found a string`},
		{"[per_node.a]\nrate = 5\n", `f.toml: line 2: per_node.a.rate: expected a string, found an integer`},
		{"title = \n", "f.toml: line 1: "},
	} {
		var v schema
		err := Decode("f.toml", []byte(tc.doc), &v)
		if err == nil {
			t.Errorf("%q: no error, want %s", tc.doc, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) || (!strings.HasSuffix(tc.want, ": ") && err.Error() != tc.want) {
			t.Errorf("%q:\n got %s\nwant %s", tc.doc, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans several lines: %q", tc.doc, err)
		}
		var te *Error
		if !errors.As(err, &te) || te.File != "f.toml" || te.Line == 0 {
			t.Errorf("%q: error %#v lacks file or line", tc.doc, err)
		}
	}
}

func TestDecodeOK(t *testing.T) {
	var v schema
	doc := "title = \"t\"\nratios = [1, 2.5]\n[[items]]\nname = \"a\"\nsize = 3\n[per_node.x]\nrate = \"r\"\n"
	if err := Decode("f.toml", []byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	if v.Title != "t" || len(v.Ratios) != 2 || v.Ratios[1] != 2.5 || v.Items[0].Size != 3 || v.PerNode["x"].Rate != "r" {
		t.Errorf("decoded %+v", v)
	}
}

func TestErrorRendering(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.toml", Msg: "boom"}, "a.toml: boom"},
		{Error{File: "a.toml", Line: 3, Msg: "boom"}, "a.toml: line 3: boom"},
		{Error{File: "a.toml", Key: "k[1].x", Msg: "boom"}, "a.toml: k[1].x: boom"},
		{Error{File: "a.toml", Line: 9, Key: "k", Msg: "boom"}, "a.toml: line 9: k: boom"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestFileError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.toml")
	_, err := os.ReadFile(missing)
	fe := FileError(missing, err)
	if fe.Error() != missing+": no such file or directory" {
		t.Errorf("got %q", fe.Error())
	}
	if !errors.Is(fe, fs.ErrNotExist) {
		t.Errorf("FileError does not unwrap to fs.ErrNotExist")
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"shceduler", "scheduler", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"mtu", "mtu", 0}, {"alowed_ips", "allowed_ips", 1}} {
		if got := EditDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestClosest(t *testing.T) {
	c := []string{"rtt", "rate", "loss", "scheduler"}
	for _, tc := range []struct{ in, want string }{{"rats", "rate"}, {"shceduler", "scheduler"}, {"bandwidth", ""}, {"los", "loss"}} {
		if got := Closest(tc.in, c); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestKeyLines(t *testing.T) {
	doc := `name = "x"            # 1
[[links]]                    # 2
name = "a"                   # 3
[links.a_to_b]               # 4
delay = "5ms"                # 5
[[links]]                    # 6
name = "b"                   # 7
rtt = "20ms"                 # 8
[sweep]                      # 9
rtt = [                      # 10
  "1ms",                     # 11
  # a comment                # 12
  "10ms",                    # 13
]                            # 14
opt = { a = 1, b.c = 2 }     # 15
[[transports]]               # 16
weights = [1, 2]             # 17
`
	l := KeyLines([]byte(doc))
	for key, want := range map[string]int{
		"name":                  1,
		"links":                 2,
		"links[0]":              2,
		"links[0].name":         3,
		"links[0].a_to_b":       4,
		"links[0].a_to_b.delay": 5,
		"links[1]":              6,
		"links[1].rtt":          8,
		"sweep":                 9,
		"sweep.rtt":             10,
		"sweep.rtt[0]":          11,
		"sweep.rtt[1]":          13,
		"sweep.opt.b.c":         15,
		"transports[0].weights": 17,
	} {
		if got := l[key]; got != want {
			t.Errorf("line of %s = %d, want %d", key, got, want)
		}
	}
	// Missing keys fall back to their table; array elements of a key
	// without per-element positions to the key.
	for key, want := range map[string]int{
		"links[1].b_to_a.loss":     6,
		"links[0].a_to_b.jitter":   4,
		"transports[0].weights[1]": 17,
		"experiment.reps":          0,
	} {
		if got := l.Line(key); got != want {
			t.Errorf("Line(%s) = %d, want %d", key, got, want)
		}
	}
}
