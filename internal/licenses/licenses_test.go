package licenses

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mitText = `MIT License

Copyright (c) 2026 Someone

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`

// module writes a fake module directory with the given files.
func module(t *testing.T, files map[string]string) Module {
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Module{Path: "example.com/m", Version: "v1.0.0", Dir: dir}
}

func TestClassify(t *testing.T) {
	e, err := Classify(module(t, map[string]string{"LICENSE": mitText, "NOTICE": "Some notice.\n", "main.go": "package m\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if ids := e.IDs(); len(ids) != 1 || ids[0] != "MIT" {
		t.Errorf("IDs = %v, want [MIT]", ids)
	}
	if len(e.Files) != 2 {
		t.Errorf("files = %d, want the LICENSE and the NOTICE", len(e.Files))
	}

	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"none":         {map[string]string{"README": "hello\n"}, "no licence file"},
		"unrecognised": {map[string]string{"LICENSE": "You may do as you like, but only on Tuesdays.\n"}, "not recognised"},
	} {
		if _, err := Classify(module(t, tc.files)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

// A copyleft licence is refused by name; Debian's copy of the GPL is the text.
func TestClassifyIncompatible(t *testing.T) {
	gpl, err := os.ReadFile("/usr/share/common-licenses/GPL-2")
	if err != nil {
		t.Skip("no /usr/share/common-licenses/GPL-2 (Debian's base-files) to test with")
	}
	_, err = Classify(module(t, map[string]string{"COPYING": string(gpl)}))
	if err == nil || !strings.Contains(err.Error(), "GPL-2.0") || !strings.Contains(err.Error(), "not one braid may ship") {
		t.Errorf("err = %v, want GPL-2.0 refused", err)
	}
}

// An override classifies the licence the module keeps elsewhere and carries
// the root statement as text.
func TestClassifyOverride(t *testing.T) {
	m := module(t, map[string]string{"LICENSE": "Choose one of the licences in licenses/.\n", "licenses/mit.txt": mitText})
	m.Path = "example.com/override"
	Overrides[m.Path] = Override{Licence: "licenses/mit.txt", Statements: []string{"LICENSE"}}
	defer delete(Overrides, m.Path)
	e, err := Classify(m)
	if err != nil {
		t.Fatal(err)
	}
	if ids := e.IDs(); len(ids) != 1 || ids[0] != "MIT" || len(e.Files) != 2 {
		t.Errorf("IDs = %v, files = %d", ids, len(e.Files))
	}
}

func TestNoticeCollectsEveryError(t *testing.T) {
	a := module(t, map[string]string{"README": "x"})
	b := module(t, map[string]string{"LICENSE": "nonsense"})
	a.Path, b.Path = "example.com/a", "example.com/b"
	_, err := Notice("prog", []Module{a, b})
	if err == nil || !strings.Contains(err.Error(), "example.com/a") || !strings.Contains(err.Error(), "example.com/b") {
		t.Errorf("err = %v, want both modules named", err)
	}
}
