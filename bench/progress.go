package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress reports a running step on stderr: a line redrawn in place on a
// terminal, a plain line every ProgressEvery otherwise (CI logs).
type progress struct {
	w     io.Writer
	live  bool
	every time.Duration
	steps int
	// width is the length of the last live line, so a shorter one can
	// blank out its tail.
	width int
}

// liveRedraw is the terminal redraw interval: at most 4 times a second.
const liveRedraw = 250 * time.Millisecond

// start reports s until the returned function is called.
func (p *progress) start(s *stepRun) (stop func()) {
	if p == nil || p.w == nil {
		return func() {}
	}
	interval := p.every
	if p.live {
		interval = liveRedraw
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p.print(s, now)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if p.live && p.width > 0 {
			fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
			p.width = 0
		}
	}
}

func (p *progress) print(s *stepRun, now time.Time) {
	line := p.line(s, s.snapshot(now))
	if !p.live {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := ""
	if n := len([]rune(line)); n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	} else {
		p.width = n
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
}

func (p *progress) line(s *stepRun, sn snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %s %s", stepOf(s.step.Index, p.steps), s.step.Label())
	if p.live {
		switch {
		case sn.total > 0:
			b.WriteString("  " + bar(sn.elapsed.Seconds()/sn.total.Seconds()))
		case s.count && s.o.Stability == 0:
			b.WriteString("  " + bar(float64(sn.done)/float64(s.o.Requests)))
		}
	}
	if sn.total > 0 {
		fmt.Fprintf(&b, "  %s/%s", seconds(sn.elapsed, sn.total), seconds(sn.total, sn.total))
	} else {
		fmt.Fprintf(&b, "  %s", seconds(sn.elapsed, sn.elapsed))
	}
	if !sn.measuring {
		b.WriteString("  warming up")
		return b.String()
	}
	ok := sn.done - sn.errors
	rps := 0.0
	if sn.measuredFor > 0 {
		rps = float64(ok) / sn.measuredFor.Seconds()
	}
	if s.count {
		fmt.Fprintf(&b, "  requests %d/%d", sn.done, s.o.Requests*s.maxWindows)
	} else {
		fmt.Fprintf(&b, "  requests %d", sn.done)
	}
	fmt.Fprintf(&b, "  %.1f req/s", rps)
	if sn.hasTTFT {
		fmt.Fprintf(&b, "  TTFT p50 %s ms", formatMS(sn.ttftP50))
	} else {
		b.WriteString("  TTFT p50 -")
	}
	fmt.Fprintf(&b, "  errors %d", sn.errors)
	return b.String()
}

// barWidth is the number of cells of the live progress bar.
const barWidth = 20

// bar draws the fraction done (clamped to [0, 1]) as a bar and a percentage.
func bar(done float64) string {
	done = min(max(done, 0), 1)
	full := int(done * barWidth)
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", barWidth-full) + fmt.Sprintf("] %3.0f%%", done*100)
}

// seconds prints d with a decimal while the scale (the step's length) is
// short enough for tenths to matter.
func seconds(d, scale time.Duration) string {
	if scale < 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}

// stepOf is "3/5", or "3" when the number of steps is not known in
// advance (a capacity search).
func stepOf(i, n int) string {
	if n <= 0 {
		return fmt.Sprint(i)
	}
	return fmt.Sprintf("%d/%d", i, n)
}
