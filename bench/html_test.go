package bench

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// Text from the configuration or a server never becomes markup, and the
// page loads nothing: no script, no external reference.
func TestHTMLReportEscapesAndIsSelfContained(t *testing.T) {
	start := time.Now()
	var samples []*sample
	for i := range 20 {
		samples = append(samples, &sample{start: start.Add(time.Duration(i) * 50 * time.Millisecond), endToEnd: 300 * time.Millisecond,
			ttft: 40 * time.Millisecond, tpot: 10 * time.Millisecond, hasTPOT: true, outcome: probe.OutcomeSuccess, outputTokens: 8})
	}
	samples = append(samples, &sample{start: start, endToEnd: time.Millisecond, outcome: probe.OutcomeHTTP5xx, err: `<img src=x onerror=alert(1)>`})
	st := &Step{Index: 1, Mode: ModeRate, Level: 2, Stats: computeStats(samples), Histograms: newHistograms(samples)}
	for _, sm := range samples {
		st.records = append(st.records, &record{sample: sm})
	}
	rep := &Report{Tool: toolInfo(), Config: ConfigInfo{Target: `<script>alert("t")</script>`, Probe: "p&q", Endpoint: "http://h"},
		Steps: []*Step{st}, Flags: FlagsInfo{SLO: []string{"ttft<50ms"}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<img", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "p&amp;q", `<svg class="curve"`, `<svg class="dist"`, `<svg class="timeline"`, `<path class="slo"`, `<path class="fail"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// htmlPage renders rep, failing the test on an error.
func htmlPage(t *testing.T, rep *Report) string {
	t.Helper()
	rep.Tool = toolInfo()
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// curveStep is a step with one TTFT value at an achieved rate.
func curveStep(index int, level, achieved, ttft float64, early string) *Step {
	v := Summary{Count: 10, Avg: ttft, Min: ttft, Max: ttft, P50: ttft, P75: ttft, P90: ttft, P95: ttft, P99: ttft}
	return &Step{Index: index, Mode: ModeRate, Level: level, StoppedEarly: early, Goodput: &Goodput{Ratio: 1, Passed: early == ""},
		Stats: Stats{Requests: 10, Successes: 10, RequestsPerSecond: achieved, TTFT: v, TPOT: v, Latency: v}}
}

// A capacity search runs levels out of order and stops over-saturated
// steps after a few seconds. The curve joins the completed steps by
// achieved rate; the early-stopped ones are hollow squares off the line,
// with a legend, instead of a spike the server never showed.
func TestHTMLCurveJoinsCompletedStepsByThroughput(t *testing.T) {
	rep := &Report{Steps: []*Step{
		curveStep(1, 4, 3.90, 0.100, ""),
		curveStep(2, 16, 11.39, 0.442, "oversaturated"),
		curveStep(3, 12, 11.18, 0.101, ""),
		curveStep(4, 14, 11.84, 0.183, "oversaturated"),
		curveStep(5, 13, 11.96, 0.181, ""),
	}}
	page := htmlPage(t, rep)
	curve := regexp.MustCompile(`<svg class="curve"[^>]*><title>Time to first token[^<]*</title>.*?</svg>`).FindString(page)
	if curve == "" {
		t.Fatalf("no TTFT curve in\n%s", page)
	}
	line := regexp.MustCompile(`<path class="line p50" d="([^"]*)"/>`).FindStringSubmatch(curve)
	if line == nil {
		t.Fatalf("no p50 line in\n%s", curve)
	}
	var xs []float64
	for _, m := range regexp.MustCompile(`[ML]([0-9.]+) `).FindAllStringSubmatch(line[1], -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		xs = append(xs, x)
	}
	if len(xs) != 3 || !slices.IsSorted(xs) || xs[0] == xs[1] || xs[1] == xs[2] {
		t.Errorf("p50 line %q joins x %v; want the 3 completed steps in increasing achieved rate", line[1], xs)
	}
	if n := strings.Count(curve, `<rect class="early p50"`); n != 2 {
		t.Errorf("%d hollow p50 markers for early-stopped steps, want 2\n%s", n, curve)
	}
	if n := strings.Count(curve, `<circle class="dot p50"`); n != 3 {
		t.Errorf("%d p50 dots, want 3", n)
	}
	if !strings.Contains(curve, ">stopped early</text>") || !strings.Contains(curve, "2 of them stopped early") {
		t.Errorf("no legend or title for the early-stopped steps\n%s", curve)
	}
	// Without early stops there is no such legend.
	if page := htmlPage(t, &Report{Steps: []*Step{curveStep(1, 4, 3.9, 0.1, ""), curveStep(2, 8, 7.4, 0.1, "")}}); strings.Contains(page, "stopped early") {
		t.Error("a run without early stops has an early-stop legend")
	}
}

// Every chart is drawn at its own size and may shrink but never stretch:
// scaled to a wide page, a 480-unit chart's 10-unit ticks were 30 px.
func TestHTMLChartsSizedToTheirData(t *testing.T) {
	start := time.Now()
	var samples []*sample
	for i := range 50 {
		samples = append(samples, &sample{start: start.Add(time.Duration(i) * 20 * time.Millisecond), endToEnd: 300 * time.Millisecond,
			ttft: 40 * time.Millisecond, tpot: 10 * time.Millisecond, hasTPOT: true, outcome: probe.OutcomeSuccess, outputTokens: 8})
	}
	st := &Step{Index: 1, Mode: ModeConcurrency, Level: 4, Stats: computeStats(samples), Histograms: newHistograms(samples)}
	for _, sm := range samples {
		st.records = append(st.records, &record{sample: sm})
	}
	page := htmlPage(t, &Report{Steps: []*Step{st}})
	svgs := regexp.MustCompile(`<svg class="(\w+)"([^>]*)>`).FindAllStringSubmatch(page, -1)
	if len(svgs) != 7 { // 3 curves, 3 distributions, 1 timeline
		t.Fatalf("%d charts, want 7", len(svgs))
	}
	attrs := regexp.MustCompile(`^ width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"`)
	for _, s := range svgs {
		m := attrs.FindStringSubmatch(s[2])
		if m == nil || m[1] != m[3] || m[2] != m[4] {
			t.Errorf("%s chart %q: want width and height equal to its viewBox", s[1], s[2])
			continue
		}
		if w, _ := strconv.Atoi(m[1]); w > 1000 {
			t.Errorf("%s chart %d units wide", s[1], w)
		}
	}
	css := regexp.MustCompile(`(?s)<style>(.*)</style>`).FindStringSubmatch(page)[1]
	if regexp.MustCompile(`(^|\})svg\{[^}]*[^-]width:100%`).MatchString(css) {
		t.Errorf("charts stretch to the page width: %s", css)
	}
	for _, cls := range []string{"tick", "axis", "legend"} {
		m := regexp.MustCompile(`\.` + cls + `\{font-size:(\d+)px`).FindStringSubmatch(css)
		if m == nil {
			t.Errorf("no font size for .%s", cls)
			continue
		}
		if px, _ := strconv.Atoi(m[1]); px < 11 || px > 12 {
			t.Errorf(".%s text is %d px, want 11-12", cls, px)
		}
	}
}

// The steps table has Goodput and Verdict columns only when some step
// has a value there: without --slo they were two empty columns.
func TestHTMLHidesEmptyColumns(t *testing.T) {
	plain := curveStep(1, 4, 3.9, 0.1, "")
	plain.Goodput = nil
	page := htmlPage(t, &Report{Steps: []*Step{plain}})
	for _, th := range []string{"<th>Goodput</th>", "<th>Verdict</th>"} {
		if strings.Contains(page, th) {
			t.Errorf("a run without an SLO has %s", th)
		}
	}
	if row := regexp.MustCompile(`<tbody><tr>(.*?)</tr>`).FindStringSubmatch(page); row == nil || strings.Count(row[1], "<td>") != 6 {
		t.Errorf("row %v, want 6 cells", row)
	}
	page = htmlPage(t, &Report{Steps: []*Step{curveStep(1, 4, 3.9, 0.1, "")}})
	if !strings.Contains(page, "<th>Goodput</th><th>Verdict</th>") || !strings.Contains(page, "<td>100.00%</td><td>met</td>") {
		t.Errorf("a run with an SLO lacks its goodput and verdict columns")
	}
	interrupted := curveStep(1, 4, 3.9, 0.1, "")
	interrupted.Goodput, interrupted.Interrupted = nil, true
	if page := htmlPage(t, &Report{Steps: []*Step{interrupted}}); strings.Contains(page, "<th>Goodput</th>") || !strings.Contains(page, "<td>partial</td>") {
		t.Errorf("an interrupted run without an SLO: want a verdict column and no goodput column")
	}
}
