package testenv

import "testing"

func TestEmulated(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Setenv(EmulatedVar, c.v)
		if got := Emulated(); got != c.want {
			t.Errorf("%s=%q: Emulated() = %v, want %v", EmulatedVar, c.v, got, c.want)
		}
	}
}

// SkipIfEmulated skips exactly when Emulated: run it in subtests and see which
// ones went on past it.
func TestSkipIfEmulated(t *testing.T) {
	for _, c := range []struct {
		v        string
		wantSkip bool
	}{{"", false}, {"1", true}} {
		t.Setenv(EmulatedVar, c.v)
		reached := false
		t.Run("v="+c.v, func(t *testing.T) {
			SkipIfEmulated(t, "testing the skip")
			reached = true
		})
		if reached == c.wantSkip {
			t.Errorf("%s=%q: went on past SkipIfEmulated = %v, want %v", EmulatedVar, c.v, reached, !c.wantSkip)
		}
	}
}
