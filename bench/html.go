package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// The HTML report is one file with everything inline: CSS, and charts as
// SVG drawn here, so it opens from a CI artefact or a mail attachment
// with no network and no script. As on the status page (status/spark.go),
// everything variable in the SVG is a number formatted here or text
// escaped with template.HTMLEscapeString, so a server's error message or
// a target name cannot become markup.

// Chart geometry in SVG user units, which are CSS pixels: every chart is
// drawn at its own size (width and height attributes) and only shrinks
// to fit a narrow page, never stretches, so its 11-12 px text stays that
// size; stretched to a 1,500 px page a 480-unit chart's ticks were 30 px.
const (
	chartW, chartH         = 480, 280
	chartL, chartR         = 60, 12
	chartT, chartB         = 26, 40
	timelineW              = 960
	timelineMaxRequests    = 600
	distBins               = 40
	timelineRowsMinHeight  = 120
	timelineRowsPerRequest = 1
)

// WriteHTML writes rep as a self-contained HTML page.
func WriteHTML(w io.Writer, rep *Report) error {
	return reportTemplate.Execute(w, newHTMLView(rep))
}

type htmlView struct {
	Title, Subtitle string
	Meta            []string
	Capacity        string
	Curves          []template.HTML
	Steps           []htmlStep
	Merged          bool
	// ShowGoodput and ShowVerdict keep the table's columns only when a
	// step has something in them (a run without --slo has neither).
	ShowGoodput, ShowVerdict bool
}

type htmlStep struct {
	Label, Verdict      string
	Rate, Goodput       string
	TTFT, TPOT, Latency string
	Requests            int
	Dists               []template.HTML
	Timeline            template.HTML
}

func newHTMLView(rep *Report) *htmlView {
	c := rep.Config
	v := &htmlView{
		Title:    fmt.Sprintf("llm-prober bench: %s / %s", c.Target, c.Probe),
		Subtitle: fmt.Sprintf("%s · %s · %s", c.Model, c.Protocol, c.Endpoint),
		Merged:   len(rep.Merged) > 0,
	}
	v.Meta = append(v.Meta, fmt.Sprintf("%s %s (%s)", rep.Tool.Name, rep.Tool.Version, rep.Tool.GoVersion),
		fmt.Sprintf("%s to %s", rep.StartedAt.UTC().Format(time.RFC3339), rep.EndedAt.UTC().Format(time.RFC3339)))
	if v.Merged {
		v.Meta = append(v.Meta, "merged from "+strings.Join(rep.Merged, ", "))
	}
	if rep.Interrupted {
		v.Meta = append(v.Meta, "interrupted: partial")
	}
	if cp := rep.Capacity; cp != nil {
		var b strings.Builder
		writeCapacity(&b, rep)
		v.Capacity = strings.TrimSpace(b.String())
	}
	var slo SLO
	for _, t := range capacitySLO(rep) {
		s, err := ParseSLO([]string{t})
		if err == nil {
			slo.TTFT, slo.TPOT, slo.Latency = max(slo.TTFT, s.TTFT), max(slo.TPOT, s.TPOT), max(slo.Latency, s.Latency)
		}
	}
	v.Curves = []template.HTML{
		curveChart(rep.Steps, "TTFT", "Time to first token", func(s *Step) Summary { return s.TTFT }, slo.TTFT),
		curveChart(rep.Steps, "TPOT", "Time per output token", func(s *Step) Summary { return s.TPOT }, slo.TPOT),
		curveChart(rep.Steps, "e2e", "End-to-end latency", func(s *Step) Summary { return s.Latency }, slo.Latency),
	}
	for _, s := range rep.Steps {
		hs := htmlStep{Label: fmt.Sprintf("Step %d: %s", s.Index, s.Label()), Requests: s.Requests,
			Rate: fmt.Sprintf("%.2f/s", s.RequestsPerSecond),
			TTFT: p3(s.TTFT), TPOT: p3(s.TPOT), Latency: p3(s.Latency)}
		switch {
		case s.Interrupted:
			hs.Verdict = "partial"
		case s.StoppedEarly != "":
			hs.Verdict = "stopped early: " + s.StoppedEarly
		case s.Goodput != nil && s.Goodput.Passed:
			hs.Verdict = "met"
		case s.Goodput != nil:
			hs.Verdict = "not met"
		}
		if s.Goodput != nil {
			hs.Goodput = fmt.Sprintf("%.2f%%", s.Goodput.Ratio*100)
		}
		v.ShowGoodput = v.ShowGoodput || hs.Goodput != ""
		v.ShowVerdict = v.ShowVerdict || hs.Verdict != ""
		if h := s.Histograms; h != nil {
			hs.Dists = []template.HTML{
				distChart(h.TTFT, "TTFT", s.Label()),
				distChart(h.TPOT, "TPOT", s.Label()),
				distChart(h.Latency, "e2e", s.Label()),
			}
		}
		if len(s.records) > 0 {
			hs.Timeline = timelineChart(s)
		}
		v.Steps = append(v.Steps, hs)
	}
	return v
}

func capacitySLO(rep *Report) []string {
	if rep.Capacity != nil {
		return rep.Capacity.SLO
	}
	return rep.Flags.SLO
}

func p3(s Summary) string {
	if s.Count == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", formatMS(s.P50), formatMS(s.P90), formatMS(s.P99))
}

// num formats an SVG coordinate: one decimal is a tenth of a unit, finer
// than any screen shows at these sizes.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceTicks returns about n round values from lo up to at least hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// The last tick is at or above hi, so the axis covers every value.
	var out []float64
	for k := math.Floor(lo / step); ; k++ {
		out = append(out, k*step)
		if k*step >= hi-step*1e-9 {
			return out
		}
	}
}

func tickLabel(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// svgOpen starts a chart of w×h units with its accessible title, the text
// a reader gets on hover and a screen reader reads.
func svgOpen(b *strings.Builder, class, title string, w, h int) {
	fmt.Fprintf(b, `<svg class="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>%s</title>`, class, w, h, w, h, template.HTMLEscapeString(title))
}

// axes draws the plot frame, ticks and labels of an x/y chart.
func axes(b *strings.Builder, xt, yt []float64, sx, sy func(float64) float64, xLabel, yLabel string) {
	x0, x1, y0, y1 := float64(chartL), float64(chartW-chartR), float64(chartH-chartB), float64(chartT)
	fmt.Fprintf(b, `<rect class="plot" x="%s" y="%s" width="%s" height="%s"/>`, num(x0), num(y1), num(x1-x0), num(y0-y1))
	for _, v := range yt {
		y := sy(v)
		fmt.Fprintf(b, `<path class="grid" d="M%s %sH%s"/><text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(x0), num(y), num(x1), num(x0-4), num(y+4), tickLabel(v))
	}
	for _, v := range xt {
		x := sx(v)
		fmt.Fprintf(b, `<path class="grid" d="M%s %sV%s"/><text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, num(x), num(y0), num(y1), num(x), num(y0+14), tickLabel(v))
	}
	fmt.Fprintf(b, `<text class="axis" x="%s" y="%d" text-anchor="middle">%s</text>`, num((x0+x1)/2), chartH-6, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(b, `<text class="axis" x="%s" y="14">%s</text>`, num(x0), template.HTMLEscapeString(yLabel))
}

// curveChart plots a statistic's p50, p90 and p99 (ms) against each
// step's achieved request rate: the latency-throughput curve whose knee
// is the capacity. Completed steps are joined in order of achieved rate,
// not in the order a search ran them. A step stopped early (or
// interrupted) measured only its first seconds, past the knee: joined, it
// drew a spike the curve never had, so it is a hollow marker off the line.
func curveChart(steps []*Step, short, long string, get func(*Step) Summary, slo float64) template.HTML {
	type pt struct {
		x, p50, p90, p99 float64
		early            bool
	}
	var pts []pt
	nEarly := 0
	for _, s := range steps {
		sm := get(s)
		if sm.Count == 0 || !(s.RequestsPerSecond > 0) {
			continue
		}
		early := s.StoppedEarly != "" || s.Interrupted
		if early {
			nEarly++
		}
		pts = append(pts, pt{s.RequestsPerSecond, sm.P50 * 1e3, sm.P90 * 1e3, sm.P99 * 1e3, early})
	}
	slices.SortStableFunc(pts, func(a, b pt) int { return cmpFloat(a.x, b.x) })
	var b strings.Builder
	title := fmt.Sprintf("%s p50, p90 and p99 (ms) against achieved requests per second over %d steps", long, len(pts))
	if nEarly > 0 {
		title += fmt.Sprintf(", %d of them stopped early or interrupted (hollow squares, not joined)", nEarly)
	}
	if slo > 0 {
		title += fmt.Sprintf("; SLO %s ms dashed", formatMS(slo))
	}
	svgOpen(&b, "curve", title, chartW, chartH)
	xmax, ymax := 0.0, slo*1e3
	for _, p := range pts {
		xmax, ymax = max(xmax, p.x), max(ymax, p.p99)
	}
	xt, yt := niceTicks(0, xmax*1.05, 5), niceTicks(0, ymax*1.1, 5)
	xhi, yhi := xt[len(xt)-1], yt[len(yt)-1]
	sx := func(v float64) float64 { return chartL + v/xhi*float64(chartW-chartL-chartR) }
	sy := func(v float64) float64 { return float64(chartH-chartB) - v/yhi*float64(chartH-chartB-chartT) }
	axes(&b, xt, yt, sx, sy, "achieved requests/s", short+" (ms)")
	if slo > 0 {
		fmt.Fprintf(&b, `<path class="slo" d="M%d %sH%d"/>`, chartL, num(sy(slo*1e3)), chartW-chartR)
	}
	for k, cls := range []string{"p50", "p90", "p99"} {
		var d strings.Builder
		for _, p := range pts {
			if p.early {
				continue
			}
			y := [3]float64{p.p50, p.p90, p.p99}[k]
			if d.Len() == 0 {
				d.WriteString("M")
			} else {
				d.WriteString("L")
			}
			d.WriteString(num(sx(p.x)) + " " + num(sy(y)))
		}
		if d.Len() > 0 {
			fmt.Fprintf(&b, `<path class="line %s" d="%s"/>`, cls, d.String())
		}
		for _, p := range pts {
			x, y := sx(p.x), sy([3]float64{p.p50, p.p90, p.p99}[k])
			if p.early {
				fmt.Fprintf(&b, `<rect class="early %s" x="%s" y="%s" width="7" height="7"/>`, cls, num(x-3.5), num(y-3.5))
			} else {
				fmt.Fprintf(&b, `<circle class="dot %s" cx="%s" cy="%s" r="3"/>`, cls, num(x), num(y))
			}
		}
		fmt.Fprintf(&b, `<text class="legend %s" x="%d" y="%d">%s</text>`, cls, chartW-chartR-120+k*40, chartT-8, cls)
	}
	if nEarly > 0 {
		fmt.Fprintf(&b, `<rect class="early key" x="%d" y="%d" width="7" height="7"/><text class="legend key" x="%d" y="%d">stopped early</text>`,
			chartW-chartR-215, chartT-15, chartW-chartR-204, chartT-8)
	}
	if len(pts) == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle">no step with a value</text>`, chartW/2, chartH/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// distChart draws a sketch as a histogram over a log time axis: the
// sketch's buckets regrouped into distBins bins between its min and max.
func distChart(sk *Sketch, short, step string) template.HTML {
	var b strings.Builder
	const h = 160
	if sk == nil || sk.Count == 0 {
		svgOpen(&b, "dist", fmt.Sprintf("%s distribution at %s: no observations", short, step), chartW, h)
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle">no %s observations</text></svg>`, chartW/2, h/2, template.HTMLEscapeString(short))
		return template.HTML(b.String())
	}
	lo, hi := max(sk.Min, 1e-6), max(sk.Max, 1e-6)
	if hi <= lo*1.0001 {
		hi = lo * 1.01
	}
	llo, lhi := math.Log(lo), math.Log(hi)
	bins := make([]int, distBins)
	bin := func(v float64) int {
		i := int((math.Log(max(v, lo)) - llo) / (lhi - llo) * distBins)
		return min(max(i, 0), distBins-1)
	}
	bins[0] += sk.Zero
	for _, bk := range sk.Buckets {
		v := 2 * math.Pow(sk.Gamma, float64(bk[0])) / (sk.Gamma + 1)
		bins[bin(v)] += bk[1]
	}
	top := slices.Max(bins)
	svgOpen(&b, "dist", fmt.Sprintf("%s distribution at %s: %d observations from %s to %s ms, p50 %s ms, p99 %s ms (log time axis)",
		short, step, sk.Count, formatMS(sk.Min), formatMS(sk.Max), formatMS(sk.quantile(0.5)), formatMS(sk.quantile(0.99))), chartW, h)
	x0, x1, y0, y1 := float64(chartL), float64(chartW-chartR), float64(h-30), 20.0
	fmt.Fprintf(&b, `<rect class="plot" x="%s" y="%s" width="%s" height="%s"/>`, num(x0), num(y1), num(x1-x0), num(y0-y1))
	bw := (x1 - x0) / distBins
	var d strings.Builder
	for i, n := range bins {
		if n == 0 {
			continue
		}
		bh := float64(n) / float64(top) * (y0 - y1)
		fmt.Fprintf(&d, "M%s %sh%sv%sh%sz", num(x0+float64(i)*bw), num(y0), num(bw*0.9), num(-bh), num(-bw*0.9))
	}
	fmt.Fprintf(&b, `<path class="bars" d="%s"/>`, d.String())
	for _, q := range []float64{0.5, 0.99} {
		v := sk.quantile(q)
		x := x0 + (math.Log(max(v, lo))-llo)/(lhi-llo)*(x1-x0)
		fmt.Fprintf(&b, `<path class="mark" d="M%s %sV%s"/><text class="tick" x="%s" y="%s" text-anchor="middle">p%d</text>`, num(x), num(y0), num(y1), num(x), num(y1-4), int(q*100))
	}
	fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s">%s ms</text><text class="tick" x="%s" y="%s" text-anchor="end">%s ms</text>`,
		num(x0), num(y0+14), formatMS(sk.Min), num(x1), num(y0+14), formatMS(sk.Max))
	fmt.Fprintf(&b, `<text class="axis" x="%s" y="%d" text-anchor="middle">%s (log scale)</text></svg>`, num((x0+x1)/2), h-4, template.HTMLEscapeString(short))
	return template.HTML(b.String())
}

// timelineChart draws a step's requests as bars from send to end, in
// send order, the wait for the first token darker; failures red. Long
// steps are thinned to timelineMaxRequests evenly spread requests.
func timelineChart(s *Step) template.HTML {
	recs := s.records
	stride := max(1, (len(recs)+timelineMaxRequests-1)/timelineMaxRequests)
	var shown []*record
	for i := 0; i < len(recs); i += stride {
		shown = append(shown, recs[i])
	}
	t0 := shown[0].start
	var end float64
	for _, r := range recs {
		end = max(end, r.start.Add(r.endToEnd).Sub(t0).Seconds())
	}
	rows := max(timelineRowsMinHeight, len(shown)*timelineRowsPerRequest)
	h := chartT + rows + chartB
	var b strings.Builder
	title := fmt.Sprintf("Timeline of %s: %d requests", s.Label(), len(recs))
	if stride > 1 {
		title += fmt.Sprintf(" (every %d-th drawn)", stride)
	}
	svgOpen(&b, "timeline", title+"; bars from send to end, darker until the first token, red for failures", timelineW, h)
	xt := niceTicks(0, max(end, 0.001), 6)
	xhi := xt[len(xt)-1]
	x0, x1 := float64(chartL), float64(timelineW-chartR)
	sx := func(v float64) float64 { return x0 + v/xhi*(x1-x0) }
	y0, y1 := float64(h-chartB), float64(chartT)
	fmt.Fprintf(&b, `<rect class="plot" x="%s" y="%s" width="%s" height="%s"/>`, num(x0), num(y1), num(x1-x0), num(y0-y1))
	for _, v := range xt {
		fmt.Fprintf(&b, `<path class="grid" d="M%s %sV%s"/><text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, num(sx(v)), num(y0), num(y1), num(sx(v)), num(y0+14), tickLabel(v))
	}
	step := (y0 - y1) / float64(len(shown))
	var ok, wait, fail strings.Builder
	for i, r := range shown {
		y := y1 + (float64(i)+0.5)*step
		a, e := sx(r.start.Sub(t0).Seconds()), sx(r.start.Add(r.endToEnd).Sub(t0).Seconds())
		seg := fmt.Sprintf("M%s %sH%s", num(a), num(y), num(max(e, a+0.5)))
		if r.outcome != probe.OutcomeSuccess {
			fail.WriteString(seg)
			continue
		}
		ok.WriteString(seg)
		if r.ttft > 0 {
			fmt.Fprintf(&wait, "M%s %sH%s", num(a), num(y), num(max(sx(r.start.Add(r.ttft).Sub(t0).Seconds()), a+0.5)))
		}
	}
	sw := num(max(0.6, min(step*0.8, 4)))
	fmt.Fprintf(&b, `<path class="req" stroke-width="%s" d="%s"/><path class="wait" stroke-width="%s" d="%s"/><path class="fail" stroke-width="%s" d="%s"/>`,
		sw, ok.String(), sw, wait.String(), sw, fail.String())
	fmt.Fprintf(&b, `<text class="axis" x="%s" y="%d" text-anchor="middle">seconds since the step's first measured request</text></svg>`, num((x0+x1)/2), h-6)
	return template.HTML(b.String())
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1500px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin:0}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.muted{color:#666}.capacity{background:#f3f7ff;border:1px solid #c9d8f5;padding:.6em 1em;white-space:pre-wrap;font-family:ui-monospace,monospace}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:1em}
svg{max-width:100%;height:auto;display:block;background:#fff}
table{border-collapse:collapse}td,th{padding:.2em .7em;text-align:right;border-bottom:1px solid #eee}th{background:#fafafa}td:first-child,th:first-child{text-align:left}
.plot{fill:#fcfcfc;stroke:#ccc}.grid{stroke:#eee}.tick{font-size:11px;fill:#666}.axis{font-size:12px;fill:#333}.empty{fill:#999}
.line{fill:none;stroke-width:2}.p50{stroke:#2a6fdb}.p90{stroke:#e08a00}.p99{stroke:#c2185b}
.dot.p50,.legend.p50{fill:#2a6fdb}.dot.p90,.legend.p90{fill:#e08a00}.dot.p99,.legend.p99{fill:#c2185b}
.legend{font-size:11px;stroke:none}.early{fill:#fff;stroke-width:1.5}.early.key{stroke:#555}.legend.key{fill:#555}.slo{stroke:#c00;stroke-dasharray:6 4;fill:none}
.bars{fill:#6b9ee8}.mark{stroke:#c2185b;stroke-dasharray:3 2}
.req{stroke:#8fb8ef}.wait{stroke:#1f4f9e}.fail{stroke:#d32f2f}
.verdict-met{color:#1b7f2a}.verdict-not{color:#c62828}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="muted">{{.Subtitle}}<br>{{range $i, $m := .Meta}}{{if $i}} · {{end}}{{$m}}{{end}}</p>
{{with .Capacity}}<div class="capacity">{{.}}</div>{{end}}
<h2>Latency against throughput</h2>
<div class="charts">{{range .Curves}}<figure>{{.}}</figure>{{end}}</div>
<h2>Steps</h2>
<table><thead><tr><th>Step</th><th>Requests</th><th>Achieved</th>{{if .ShowGoodput}}<th>Goodput</th>{{end}}{{if .ShowVerdict}}<th>Verdict</th>{{end}}<th>TTFT p50/p90/p99 ms</th><th>TPOT p50/p90/p99 ms</th><th>e2e p50/p90/p99 ms</th></tr></thead>
<tbody>{{$v := .}}{{range .Steps}}<tr><td>{{.Label}}</td><td>{{.Requests}}</td><td>{{.Rate}}</td>{{if $v.ShowGoodput}}<td>{{.Goodput}}</td>{{end}}{{if $v.ShowVerdict}}<td>{{.Verdict}}</td>{{end}}<td>{{.TTFT}}</td><td>{{.TPOT}}</td><td>{{.Latency}}</td></tr>{{end}}</tbody></table>
<h2>Distributions per step</h2>
{{range .Steps}}<h3>{{.Label}}</h3><div class="charts">{{range .Dists}}<figure>{{.}}</figure>{{end}}</div>{{end}}
<h2>Request timelines</h2>
{{if .Merged}}<p class="muted">A merged result carries each run's histograms but not its requests: open each run's own report for its timeline.</p>{{end}}
{{range .Steps}}{{if .Timeline}}<h3>{{.Label}}</h3><figure>{{.Timeline}}</figure>{{end}}{{end}}
</body></html>
`))
