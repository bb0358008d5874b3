package path

// owdTracker follows the one-way delay carried back in acks. Raw values are
// microseconds mod 2^32 with an unknown clock offset, so each sample is
// unwrapped against the previous one (consecutive samples differ by far less
// than 2^31 µs ≈ 36 min) into a continuous int64 series. Only differences of
// that series matter, and they are exact.
type owdTracker struct {
	have   bool
	last   uint32 // last raw sample
	u      int64  // unwrapped last sample, µs
	smooth int64  // EWMA (gain 1/8) of u, µs
	min    winFilter

	// Trend: samples are averaged into buckets of at least `spacing`, and
	// a least-squares line is fitted through the last trendPoints buckets.
	// Averaging first keeps per-packet jitter from dominating the slope.
	bN     int64
	bStart int64 // ns, time of the bucket's first sample
	bY0    int64 // µs, first sample of the bucket
	bSumDT int64 // Σ (t - bStart), ns
	bSumDY int64 // Σ (u - bY0), µs
	pts    [trendPoints]trendPt
	ptN    int
	ptNext int
	slope  float64 // s/s
}

type trendPt struct {
	t float64 // ns since the Sender's epoch
	y float64 // µs, unwrapped
}

func (o *owdTracker) reset() { *o = owdTracker{} }

// unwrap extends raw into the continuous series.
func unwrap(have bool, last uint32, u int64, raw uint32) int64 {
	if !have {
		return int64(raw)
	}
	return u + int64(int32(raw-last))
}

func (o *owdTracker) add(t int64, raw uint32, window, spacing int64) {
	o.u = unwrap(o.have, o.last, o.u, raw)
	o.last = raw
	if !o.have {
		o.have = true
		o.smooth = o.u
		o.min.reset(t, float64(o.u))
	} else {
		o.smooth += (o.u - o.smooth) / 8
		o.min.update(t, float64(o.u), window)
	}

	if o.bN > 0 && t-o.bStart >= spacing {
		n := float64(o.bN)
		o.push(float64(o.bStart)+float64(o.bSumDT)/n, float64(o.bY0)+float64(o.bSumDY)/n)
		o.bN = 0
	}
	if o.bN == 0 {
		o.bStart, o.bY0, o.bSumDT, o.bSumDY = t, o.u, 0, 0
	}
	o.bN++
	o.bSumDT += t - o.bStart
	o.bSumDY += o.u - o.bY0
}

func (o *owdTracker) push(t, y float64) {
	o.pts[o.ptNext] = trendPt{t, y}
	o.ptNext = (o.ptNext + 1) % trendPoints
	if o.ptN < trendPoints {
		o.ptN++
	}
	if o.ptN < 3 {
		return
	}
	// Fit relative to the oldest point so float64 keeps full precision.
	first := (o.ptNext - o.ptN + trendPoints) % trendPoints
	x0, y0 := o.pts[first].t, o.pts[first].y
	var sx, sy float64
	for i := 0; i < o.ptN; i++ {
		p := o.pts[(first+i)%trendPoints]
		sx += p.t - x0
		sy += p.y - y0
	}
	n := float64(o.ptN)
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := 0; i < o.ptN; i++ {
		p := o.pts[(first+i)%trendPoints]
		dx := p.t - x0 - mx
		sxy += dx * (p.y - y0 - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return
	}
	// µs per ns → s per s is a factor 1e3.
	o.slope = sxy / sxx * 1e3
}

// queueDelayUs is the smoothed OWD above its windowed minimum.
func (o *owdTracker) queueDelayUs() int64 {
	if !o.have {
		return 0
	}
	q := o.smooth - int64(o.min.get())
	if q < 0 {
		return 0
	}
	return q
}
