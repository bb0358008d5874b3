// Package progress reports how far a lab campaign has got and when it will
// end. A full evaluation is hundreds of points of twenty downloads each;
// whoever started it wants to know whether to wait or come back tomorrow,
// and a log file wants one line per finished step it can be grepped for.
//
// The estimate is the mean time per finished step times the steps left:
// the points of one campaign are alike (same file size, similar links), so
// the mean is a fair guess and, unlike a rate over the last few steps, does
// not swing when one slow point (100 ms RTT, 3% loss) finishes.
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bar writes progress lines to one writer. Its methods are safe for
// concurrent use.
type Bar struct {
	mu          sync.Mutex
	w           io.Writer
	total, done int
	terminal    bool
	start       time.Time
	now         func() time.Time // time.Now outside tests
	// width is the length of the last line drawn on a terminal, so that
	// a shorter one can blank out what it does not cover.
	width    int
	finished bool
}

// New starts a bar for total steps at the current time. On a terminal
// (isTerminal) it redraws one line in place; otherwise, for logs and
// pipes, it writes one line per step. A total of 0 or less means unknown:
// no percentage or ETA is shown.
func New(w io.Writer, total int, isTerminal bool) *Bar {
	return &Bar{w: w, total: total, terminal: isTerminal, now: time.Now, start: time.Now()}
}

// Step records that one step, described by label (such as the point's
// parameters), has finished, and reports it. Steps beyond total raise the
// total rather than showing more than 100%.
func (b *Bar) Step(label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.done++
	if b.total > 0 {
		b.total = max(b.total, b.done)
	}
	b.draw(b.line(label))
}

// Done ends the bar: on a terminal it finishes the line in place with the
// total time and moves to the next line; otherwise it writes a summary
// line. Later calls to Step and Done do nothing.
func (b *Bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	elapsed := clock(b.now().Sub(b.start))
	line := fmt.Sprintf("done: %d steps in %s", b.done, elapsed)
	if b.total > 0 && b.done < b.total {
		line = fmt.Sprintf("stopped: %d/%d steps in %s", b.done, b.total, elapsed)
	}
	b.draw(line)
	if b.terminal {
		io.WriteString(b.w, "\n")
	}
}

// line is "[  3/10]  30%  elapsed 0:45  ETA 1:45  label", after a step.
func (b *Bar) line(label string) string {
	elapsed := b.now().Sub(b.start)
	s := fmt.Sprintf("[%d] elapsed %s", b.done, clock(elapsed))
	if b.total > 0 {
		eta := elapsed / time.Duration(b.done) * time.Duration(b.total-b.done)
		s = fmt.Sprintf("[%*d/%d] %3d%%  elapsed %s  ETA %s",
			len(fmt.Sprint(b.total)), b.done, b.total, 100*b.done/b.total, clock(elapsed), clock(eta))
	}
	if label != "" {
		s += "  " + label
	}
	return s
}

// draw writes line: in place on a terminal (carriage return, the line,
// spaces over the rest of a longer previous line), else as a line of its
// own. Write errors are ignored: progress must never stop a campaign.
func (b *Bar) draw(line string) {
	if !b.terminal {
		io.WriteString(b.w, line+"\n")
		return
	}
	n := utf8.RuneCountInString(line)
	io.WriteString(b.w, "\r"+line+strings.Repeat(" ", max(b.width-n, 0)))
	b.width = n
}

// clock formats a duration as m:ss or h:mm:ss, rounded to the second.
func clock(d time.Duration) string {
	s := int64(max(d, 0).Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
