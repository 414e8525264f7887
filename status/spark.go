package status

import (
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/internal/stats"
)

// The status page's pictures are inline SVG drawn on the server: no
// script, nothing loaded, readable with scripts off and in any browser.
// Everything variable in them is either a number computed here
// (coordinates; path data of digits, spaces and path letters) or escaped
// text (titles and labels: by html/template in the waterfall, by
// template.HTMLEscapeString in the sparklines), so nothing a server sent
// can become markup.

// Sparkline geometry, in viewBox units. The chart is drawn at half that
// size in CSS pixels (150 × 44), so integer coordinates place points to
// half a pixel and the path data stays short. The templates' "spark"
// definition repeats these numbers (TestSparkTemplateGeometry checks).
const (
	sparkW, sparkH = 300, 88
	// The plot area: x from sparkX0 (oldest result) to sparkX1 (newest),
	// y from sparkY1 (zero) up to sparkY0 (the top of the scale). Above
	// it, the label and the scale are written.
	sparkX0, sparkX1 = 6, 294
	sparkY0, sparkY1 = 26, 74
	// Failures are red ticks below the zero line, at their start time.
	sparkTickY0, sparkTickY1 = 76, 88
	// sparkOutlier: a value above sparkOutlier × the p95 of the plotted
	// values is an outlier when it is also above the SLO. The scale then
	// stops at that bound, and the outliers are drawn on the top edge with
	// a caret, so one 30 s cold start does not flatten 99 results of 20 ms
	// into the zero line.
	sparkOutlier = 2
	// sparkMaxPoints bounds the points of a line whatever
	// --history.results-per-probe says: per column of the viewBox, at most
	// the first, lowest, highest and last value are drawn.
	sparkMaxPoints = 4 * (sparkX1 - sparkX0 + 1)
)

// The ends of a failure tick's and an outlier caret's path, after "Mx".
var (
	sparkTickTail  = " " + strconv.Itoa(sparkTickY0) + "V" + strconv.Itoa(sparkTickY1)
	sparkCaretTail = " " + strconv.Itoa(sparkY0+6) + "l5-10 5 10z"
)

// metric is what a sparkline plots.
type metric uint8

const (
	metricTTFT metric = iota
	metricTPOT
	metricEndToEnd
)

func (m metric) String() string {
	switch m {
	case metricTTFT:
		return "TTFT"
	case metricTPOT:
		return "TPOT"
	}
	return "end-to-end"
}

// value is what the line plots of p: successful results only, as the
// percentiles on the page and the latency histograms count them.
func (m metric) value(p *PlotPoint) (time.Duration, bool) {
	if !p.OK {
		return 0, false
	}
	switch m {
	case metricTTFT:
		return p.TTFT, p.HasTTFT
	case metricTPOT:
		return p.TPOT, p.HasTPOT
	}
	return p.EndToEnd, p.EndToEnd > 0
}

// sparkView is one sparkline: a probe's metric over its kept results, on a
// time axis from the oldest result's start to the newest's.
type sparkView struct {
	// SVG is the chart's markup (see sparkMarkup).
	SVG template.HTML
	// Desc says in words what the chart shows: the SVG's title, which
	// gives an <svg role="img"> its accessible name and is the tooltip.
	Desc string

	// The geometry, for tests: how many values, outliers and failures
	// were drawn, the scale's top and the SLO line's height (0: none).
	values, clamped, fails int
	top                    time.Duration
	sloY                   int
}

// chartScratch is reused across the charts of one page.
type chartScratch struct {
	pts   []PlotPoint
	vals  []time.Duration
	xy    []sparkXY
	paths []byte
	buf   []byte
}

type sparkXY struct {
	x, y    int32
	clamped bool
}

// sparkline draws m over pts (oldest first by At, as History.Points
// returns them) with the SLO threshold as a line (slo 0: none).
func sparkline(m metric, pts []PlotPoint, slo time.Duration, sc *chartScratch) sparkView {
	var v sparkView
	if len(pts) == 0 {
		v.Desc = m.String() + ": no results kept yet."
		v.SVG = sparkMarkup(sc, m.String(), "no results", v.Desc, 0, nil, nil, nil)
		return v
	}
	t0, t1 := pts[0].At, pts[len(pts)-1].At
	vals := sc.vals[:0]
	for i := range pts {
		if d, ok := m.value(&pts[i]); ok {
			vals = append(vals, d)
		}
		if !pts[i].OK {
			v.fails++
		}
	}
	sc.vals = vals
	var lo, hi time.Duration
	top := slo
	if len(vals) > 0 {
		slices.Sort(vals)
		lo, hi = vals[0], vals[len(vals)-1]
		bound := hi
		if p95 := stats.Percentile(vals, 0.95); hi > sparkOutlier*p95 {
			bound = sparkOutlier * p95
		}
		top = max(top, bound)
	}
	// Headroom, so the highest value or the SLO does not sit on the edge,
	// and a round number to read.
	top = niceCeil(top + top/20)
	v.top = top

	xOf := func(at int64) int32 {
		if t1 == t0 {
			return (sparkX0 + sparkX1) / 2
		}
		// Non-negative: +0.5 and truncation round.
		return int32(sparkX0 + float64(at-t0)/float64(t1-t0)*(sparkX1-sparkX0) + 0.5)
	}
	yOf := func(d time.Duration) (int32, bool) {
		if d >= top {
			return sparkY0, d > top
		}
		return sparkY1 - int32(float64(d)/float64(top)*(sparkY1-sparkY0)+0.5), false
	}
	if slo > 0 {
		y, _ := yOf(slo)
		v.sloY = int(y)
	}

	xy := sc.xy[:0]
	for i := range pts {
		if d, ok := m.value(&pts[i]); ok {
			y, c := yOf(d)
			xy = append(xy, sparkXY{x: xOf(pts[i].At), y: y, clamped: c})
			if c {
				v.clamped++
			}
		}
	}
	sc.xy = xy
	v.values = len(xy)

	// The three paths, one after the other in one buffer.
	b := appendLine(sc.paths[:0], xy)
	nLine := len(b)
	b = appendCarets(b, xy)
	nCarets := len(b)
	if v.fails > 0 {
		last := int32(-1)
		for i := range pts {
			if pts[i].OK {
				continue
			}
			// Failures in one column draw one tick.
			if x := xOf(pts[i].At); x != last {
				b = append(b, 'M')
				b = appendCoord(b, x)
				b = append(b, sparkTickTail...)
				last = x
			}
		}
	}
	sc.paths = b
	v.Desc = sparkDesc(m, len(pts), len(vals), lo, hi, slo, v, time.Duration(t1-t0))
	scale := "0–" + roundDur(top)
	if len(vals) == 0 && slo == 0 {
		scale = "no values"
	}
	v.SVG = sparkMarkup(sc, m.String(), scale, v.Desc, v.sloY, b[:nLine], b[nLine:nCarets], b[nCarets:])
	return v
}

// The fixed parts of a sparkline's markup, made from the geometry's
// constants: the SVG drawn at half its viewBox, a background over the
// plot area, the label left and the scale right above it, the zero line.
var (
	sparkOpen = `<svg class="spark" width="` + strconv.Itoa(sparkW/2) + `" height="` + strconv.Itoa(sparkH/2) +
		`" viewBox="0 0 ` + strconv.Itoa(sparkW) + " " + strconv.Itoa(sparkH) + `" role="img"><title>`
	sparkLabel = `</title><rect class="bg" x="0" y="` + strconv.Itoa(sparkY0-4) + `" width="` + strconv.Itoa(sparkW) +
		`" height="` + strconv.Itoa(sparkY1-sparkY0+8) + `"/><text x="` + strconv.Itoa(sparkX0) + `" y="18">`
	sparkScale = `</text><text class="scale" x="` + strconv.Itoa(sparkX1) + `" y="18" text-anchor="end">`
	sparkAxis  = `</text><path class="axis" d="M` + strconv.Itoa(sparkX0) + " " + strconv.Itoa(sparkY1) + "H" + strconv.Itoa(sparkX1) + `"/>`
	sparkSLO   = `<path class="slo" d="M0 `
	sparkSLOW  = "H" + strconv.Itoa(sparkW) + `"/>`
)

// sparkMarkup writes a sparkline's SVG. It is built here rather than in a
// template because "/" draws two for every probe, and html/template's
// reflection costs several microseconds a chart; what goes in keeps to
// what html/template would allow: the three texts are HTML-escaped, and
// everything else is the fixed markup above, and coordinates and path
// data written by appendCoord from numbers this file computed, never a
// string from a server or the configuration (TestSparkMarkupIsNumbers
// parses every attribute).
func sparkMarkup(sc *chartScratch, label, scale, desc string, sloY int, line, carets, fails []byte) template.HTML {
	b := sc.buf[:0]
	b = append(b, sparkOpen...)
	b = append(b, template.HTMLEscapeString(desc)...)
	b = append(b, sparkLabel...)
	b = append(b, template.HTMLEscapeString(label)...)
	b = append(b, sparkScale...)
	b = append(b, template.HTMLEscapeString(scale)...)
	b = append(b, sparkAxis...)
	if sloY > 0 {
		b = append(b, sparkSLO...)
		b = appendCoord(b, int32(sloY))
		b = append(b, sparkSLOW...)
	}
	for _, p := range [...]struct {
		open string
		d    []byte
	}{{`<path class="line" d="`, line}, {`<path class="clamp" d="`, carets}, {`<path class="fails" d="`, fails}} {
		if len(p.d) > 0 {
			b = append(b, p.open...)
			b = append(b, p.d...)
			b = append(b, `"/>`...)
		}
	}
	b = append(b, "</svg>"...)
	sc.buf = b
	return template.HTML(b)
}

// appendLine writes the path of the line through xy. Runs of points in
// one column are thinned to their first, lowest, highest and last, which
// bounds the path at sparkMaxPoints. It is written in relative steps
// ("M6 42l4-2 3 1"), x never decreasing, about 5 bytes a point.
func appendLine(b []byte, xy []sparkXY) []byte {
	n := 0
	var px, py int32
	for i := 0; i < len(xy); {
		j := i + 1
		for j < len(xy) && xy[j].x == xy[i].x {
			j++
		}
		run := xy[i:j]
		keep := [4]int{0, 1, 2, 3}
		if len(run) > 4 {
			lo, hi := 0, 0
			for k, p := range run {
				if p.y < run[lo].y {
					lo = k
				}
				if p.y > run[hi].y {
					hi = k
				}
			}
			keep = [4]int{0, min(lo, hi), max(lo, hi), len(run) - 1}
		}
		for k, idx := range keep {
			if idx >= len(run) || (k > 0 && idx == keep[k-1]) {
				continue
			}
			p := run[idx]
			switch n {
			case 0:
				b = append(b, 'M')
				b = appendCoord(b, p.x)
				b = append(b, ' ')
				b = appendCoord(b, p.y)
			case 1:
				b = append(b, 'l')
				b = appendStep(b, p.x-px, p.y-py)
			default:
				b = append(b, ' ')
				b = appendStep(b, p.x-px, p.y-py)
			}
			px, py = p.x, p.y
			n++
		}
		i = j
	}
	if n == 1 {
		// A lone point: a zero-length segment, which round caps draw as
		// a dot.
		b = append(b, "h0"...)
	}
	return b
}

// appendCarets writes the path of an upward caret on the top edge over
// each column with an outlier.
func appendCarets(b []byte, xy []sparkXY) []byte {
	last := int32(-1)
	for _, p := range xy {
		if !p.clamped || p.x == last {
			continue
		}
		last = p.x
		b = append(b, 'M')
		b = appendCoord(b, p.x-5)
		b = append(b, sparkCaretTail...)
	}
	return b
}

// appendStep writes a relative step: dx (never negative: points are in
// time order), then dy, its sign separating the two when negative.
func appendStep(b []byte, dx, dy int32) []byte {
	b = appendCoord(b, dx)
	if dy < 0 {
		b = append(b, '-')
		return appendCoord(b, -dy)
	}
	b = append(b, ' ')
	return appendCoord(b, dy)
}

// appendCoord writes a coordinate; the viewBox keeps them small and
// non-negative, the common case written without strconv.
func appendCoord(b []byte, v int32) []byte {
	switch {
	case v >= 0 && v < 10:
		return append(b, byte('0'+v))
	case v >= 10 && v < 100:
		return append(b, byte('0'+v/10), byte('0'+v%10))
	case v >= 100 && v < 1000:
		return append(b, byte('0'+v/100), byte('0'+v/10%10), byte('0'+v%10))
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// sparkDesc says what a sparkline shows, for its title and aria-label.
func sparkDesc(m metric, kept, n int, lo, hi, slo time.Duration, v sparkView, span time.Duration) string {
	var s strings.Builder
	s.Grow(160)
	s.WriteString(m.String())
	s.WriteString(" of the last ")
	s.WriteString(strconv.Itoa(kept))
	s.WriteString(" results")
	if span > 0 {
		s.WriteString(" (over ")
		s.WriteString(span.Round(time.Second).String())
		s.WriteString(")")
	}
	switch {
	case n == 0 && m == metricTTFT:
		s.WriteString(": no successful streamed result with a first token")
	case n == 0:
		s.WriteString(": no successful result with a ")
		s.WriteString(m.String())
	default:
		s.WriteString(": ")
		s.WriteString(strconv.Itoa(n))
		s.WriteString(" successful, min ")
		s.WriteString(dur(lo))
		s.WriteString(", max ")
		s.WriteString(dur(hi))
	}
	if slo > 0 {
		s.WriteString("; SLO ")
		s.WriteString(dur(slo))
		s.WriteString(" (dashed line)")
	}
	if v.clamped > 0 {
		s.WriteString("; ")
		s.WriteString(strconv.Itoa(v.clamped))
		s.WriteString(" above ")
		s.WriteString(roundDur(v.top))
		s.WriteString(" drawn on the top edge (carets)")
	}
	s.WriteString("; ")
	s.WriteString(strconv.Itoa(v.fails))
	if v.fails == 1 {
		s.WriteString(" failure")
	} else {
		s.WriteString(" failures")
	}
	if v.fails > 0 {
		s.WriteString(" (red ticks)")
	}
	if n > 0 || slo > 0 {
		s.WriteString(". Scale 0–")
		s.WriteString(roundDur(v.top))
	}
	s.WriteString(".")
	return s.String()
}

// roundDur writes a round duration (niceCeil's) without trailing zeros:
// "300 ms", "1.5 ms", "15 s".
func roundDur(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// niceCeil rounds d up to 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of
// ten (of nanoseconds), so the scale reads "0–300 ms"; at least 1 µs.
func niceCeil(d time.Duration) time.Duration {
	if d <= time.Microsecond {
		return time.Microsecond
	}
	mag := time.Duration(1)
	for mag <= d/10 {
		mag *= 10
	}
	// d/mag is in [1, 10).
	for _, m := range [...]time.Duration{10, 15, 20, 25, 30, 40, 50, 60, 80, 100} {
		if c := m * mag / 10; c >= d {
			return c
		}
	}
	return 10 * mag
}
