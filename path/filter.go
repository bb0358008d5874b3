package path

// winFilter tracks the best (largest or smallest) value seen over a sliding
// time window in constant space. It keeps the best sample plus the best
// samples of the later sub-windows (window/4 and window/2), so when the best
// one ages out a good successor is already at hand; this is the
// Nichols/Kern windowed min-max estimator also used by BBR. Without new
// samples nothing expires: the last estimate stands, which is what an idle
// path should report.
type winFilter struct {
	max bool
	set bool
	s   [3]wfSample
}

type wfSample struct {
	t int64 // ns
	v float64
}

func (f *winFilter) better(a, b float64) bool {
	if f.max {
		return a >= b
	}
	return a <= b
}

func (f *winFilter) reset(t int64, v float64) {
	f.set = true
	f.s[0] = wfSample{t, v}
	f.s[1] = f.s[0]
	f.s[2] = f.s[0]
}

// get returns the current best value (0 when empty).
func (f *winFilter) get() float64 {
	if !f.set {
		return 0
	}
	return f.s[0].v
}

// clear empties the filter but keeps its direction.
func (f *winFilter) clear() { f.set = false }

func (f *winFilter) update(t int64, v float64, win int64) {
	x := wfSample{t, v}
	if !f.set || f.better(v, f.s[0].v) || t-f.s[2].t > win {
		f.reset(t, v)
		return
	}
	if f.better(v, f.s[1].v) {
		f.s[1], f.s[2] = x, x
	} else if f.better(v, f.s[2].v) {
		f.s[2] = x
	}
	age := t - f.s[0].t
	switch {
	case age > win:
		// The best sample expired: promote the sub-window bests.
		f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], x
		if t-f.s[0].t > win {
			f.s[0], f.s[1] = f.s[1], f.s[2]
		}
	case f.s[1].t == f.s[0].t && age > win/4:
		// A quarter window passed with nothing in the 2nd slot: start
		// tracking the best of the rest of the window.
		f.s[1], f.s[2] = x, x
	case f.s[2].t == f.s[1].t && age > win/2:
		f.s[2] = x
	}
}
