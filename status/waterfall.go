package status

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/internal/stats"
)

// Waterfall geometry, in CSS pixels (the viewBox is the drawn size); the
// template takes it from the view (waterfallView.Geom).
const (
	wfW = 760
	// Row names end at wfNameX; the time axis runs from wfX0 to wfX1,
	// leaving room right of the longest bar for its value.
	wfNameX  = 104
	wfX0     = 112
	wfX1     = 640
	wfTop    = 8
	wfRowH   = 22
	wfBarH   = 14
	wfAxisH  = 30
	wfMaxTks = 7
)

// waterfallView is one result's phases on a shared time axis, like a
// browser's network panel: the connection phases one after the other
// from the request's start, then TTFT and end-to-end, each from the start.
type waterfallView struct {
	RequestID, Time, Stamp, Outcome string
	OK                              bool
	// Notes explain what the picture cannot: a retry, a reused connection.
	Notes []string
	// Desc says in words what the chart shows: the SVG's title, its
	// accessible name.
	Desc string
	Geom wfGeom
	// H is the SVG's height; AxisY the axis line's, TickY the baseline
	// of the tick labels.
	H, AxisY, TickY int
	Rows            []wfRow
	Ticks           []wfTick
	// TTFTX marks the first token across all rows, when HasTTFT.
	TTFTX   int
	HasTTFT bool
}

// wfRow is one row: its name, its bar (none when W is 0) and its value.
type wfRow struct {
	Name  string
	Y     int // the bar's top
	TextY int // the baseline of the row's text
	X, W  int
	// SX, SW: the part of the end-to-end bar after the first token
	// (output streaming); SW 0 for none.
	SX, SW int
	// Class colours the bar: the phase's (dns, connect, tls, write,
	// firstbyte), ttft, e2e or fail.
	Class  string
	Value  string
	ValueX int
	// Missing: the value is "–" (the phase did not happen).
	Missing bool
}

// wfGeom is the fixed geometry, for the template.
type wfGeom struct{ W, NameX, X0, X1, Top, BarH int }

type wfTick struct {
	X     int
	Label string
}

// waterfall draws r's phases. The connection phases are placed by adding
// them in order from the start, as they follow each other on the wire (the
// debug log places them the same way); a phase that did not happen (no
// dns, connect or tls on a reused connection) has no bar and a "–".
func waterfall(r *Record, now time.Time) *waterfallView {
	p := r.Phases
	v := &waterfallView{
		RequestID: r.RequestID,
		Time:      shortTime(r.Start, now),
		Stamp:     r.Start.UTC().Format(timeLayout),
		Outcome:   string(r.Outcome),
		OK:        r.OK(),
		Geom:      wfGeom{W: wfW, NameX: wfNameX, X0: wfX0, X1: wfX1, Top: wfTop, BarH: wfBarH},
	}
	if r.Retry != "" {
		why := r.Retry
		if r.RetryErr != "" {
			why += ": " + r.RetryErr
		}
		v.Notes = append(v.Notes, "Sent twice: a pooled connection failed before any answer ("+why+
			"), and the request went again on a new connection. The times are the second attempt's, from its own start.")
	}
	if r.ServerLoad != "" {
		v.Notes = append(v.Notes, "Server load reported with the answer (endpoint-load-metrics): "+r.ServerLoad+".")
	}
	if p.ConnectionReused {
		v.Notes = append(v.Notes, "Reused a pooled connection: no dns, connect or tls.")
	}

	type seg struct {
		name, class string
		d           time.Duration
		ok          bool
	}
	phases := [...]seg{
		{"dns", "dns", p.DNS, p.HasDNS},
		{"connect", "connect", p.Connect, p.HasConnect},
		{"tls", "tls", p.TLS, p.HasTLS},
		{"write", "write", p.Write, p.HasWrite},
		{"first byte", "firstbyte", p.FirstByte, p.HasFirstByte},
	}
	hasTTFT := r.Streamed && r.TTFT > 0
	// The axis spans everything drawn.
	var end time.Duration
	for _, s := range phases {
		if s.ok {
			end += s.d
		}
	}
	span := max(end, r.EndToEnd)
	if hasTTFT {
		span = max(span, r.TTFT)
	}
	step, axisEnd, unit := axisStep(span)
	xOf := func(d time.Duration) int {
		return wfX0 + int(math.Round(float64(d)/float64(axisEnd)*(wfX1-wfX0)))
	}
	widthOf := func(from, d time.Duration) (int, int) {
		x := xOf(from)
		w := xOf(from+d) - x
		if d > 0 && w < 1 {
			// Every phase that took time is seen.
			w = 1
		}
		return x, w
	}

	var desc strings.Builder
	desc.WriteString("Phases of request ")
	desc.WriteString(r.RequestID)
	desc.WriteString(" (")
	desc.WriteString(v.Outcome)
	desc.WriteString("), from its start: ")
	y := wfTop
	addRow := func(row wfRow) {
		row.Y, row.TextY = y+(wfRowH-wfBarH)/2, y+wfRowH/2+4
		if row.W > 0 {
			row.ValueX = row.X + row.W + 5
		} else {
			row.ValueX = row.X + 5
		}
		if row.SW > 0 {
			row.ValueX = row.SX + row.SW + 5
		}
		if len(v.Rows) > 0 {
			desc.WriteString("; ")
		}
		v.Rows = append(v.Rows, row)
		y += wfRowH
		desc.WriteString(row.Name)
		desc.WriteString(" ")
		desc.WriteString(row.Value)
	}
	var at time.Duration
	for _, s := range phases {
		row := wfRow{Name: s.name, Class: s.class}
		if s.ok {
			row.X, row.W = widthOf(at, s.d)
			row.Value = msText(s.d)
			at += s.d
		} else {
			row.X, row.Value, row.Missing = xOf(at), "–", true
			if p.ConnectionReused && s.name != "write" && s.name != "first byte" {
				row.Value = "– (reused connection)"
			}
		}
		addRow(row)
	}
	ttft := wfRow{Name: "TTFT", Class: "ttft"}
	switch {
	case hasTTFT:
		ttft.X, ttft.W = widthOf(0, r.TTFT)
		ttft.Value = msText(r.TTFT)
		v.TTFTX, v.HasTTFT = xOf(r.TTFT), true
	case !r.Streamed:
		ttft.X, ttft.Value, ttft.Missing = wfX0, "– (not streamed)", true
	default:
		ttft.X, ttft.Value, ttft.Missing = wfX0, "– (no token)", true
	}
	addRow(ttft)
	e2e := wfRow{Name: "end-to-end", Class: "e2e"}
	if !v.OK {
		e2e.Class = "fail"
	}
	if r.EndToEnd > 0 {
		e2e.X, e2e.W = widthOf(0, r.EndToEnd)
		e2e.Value = msText(r.EndToEnd)
		if hasTTFT && r.EndToEnd > r.TTFT && v.OK {
			// The first token's part in the TTFT colour, the stream after
			// it in its own.
			e2e.SX = xOf(r.TTFT)
			e2e.SW = e2e.X + e2e.W - e2e.SX
			e2e.W = e2e.SX - e2e.X
		}
	} else {
		e2e.X, e2e.Value, e2e.Missing = wfX0, "–", true
	}
	addRow(e2e)
	v.AxisY = y + 4
	v.TickY = v.AxisY + 16
	v.H = v.AxisY + wfAxisH
	for i := 0; ; i++ {
		t := time.Duration(i) * step
		if t > axisEnd {
			break
		}
		v.Ticks = append(v.Ticks, wfTick{X: xOf(t), Label: tickLabel(t, step, unit)})
	}
	// The unit goes with the last tick, at the axis' end.
	v.Ticks[len(v.Ticks)-1].Label += " " + unit
	desc.WriteString(".")
	v.Desc = desc.String()
	return v
}

// msText is d in milliseconds with its unit.
func msText(d time.Duration) string { return stats.Millis(d) + " ms" }

// axisStep chooses the tick step for an axis from 0 to span: 1, 2 or 5
// times a power of ten, at most wfMaxTks intervals, the axis ending on a
// tick. Milliseconds unless the steps are whole seconds.
func axisStep(span time.Duration) (step, end time.Duration, unit string) {
	if span <= 0 {
		span = time.Millisecond
	}
	mag := time.Duration(1)
	for mag*10*wfMaxTks <= span {
		mag *= 10
	}
	// span/mag < 10*wfMaxTks: one of 1, 2, 5, 10 × mag gives ≤ wfMaxTks intervals.
	for _, m := range [...]time.Duration{1, 2, 5, 10} {
		if s := m * mag; span <= s*wfMaxTks {
			step = s
			break
		}
	}
	end = (span + step - 1) / step * step
	unit = "ms"
	if step >= time.Second {
		unit = "s"
	}
	return step, end, unit
}

// tickLabel writes t in unit, with the decimals step needs.
func tickLabel(t, step time.Duration, unit string) string {
	scale := float64(time.Millisecond)
	if unit == "s" {
		scale = float64(time.Second)
	}
	decimals := 0
	for s := float64(step) / scale; s < 1 && decimals < 6; s *= 10 {
		decimals++
	}
	return strconv.FormatFloat(float64(t)/scale, 'f', decimals, 64)
}
