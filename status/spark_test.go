package status

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// points makes one success a second with TTFT ttfts[i] and TPOT ttfts[i]/10
// (0 marks a failure).
func points(ttfts ...time.Duration) []PlotPoint {
	pts := make([]PlotPoint, len(ttfts))
	for i, d := range ttfts {
		pts[i] = PlotPoint{At: now.Add(time.Duration(i) * time.Second).UnixNano(), OK: d > 0,
			TTFT: d, HasTTFT: d > 0, TPOT: d / 10, HasTPOT: d > 0, EndToEnd: 2 * d}
	}
	return pts
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// svgNode is an element of a parsed chart.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []svgNode  `xml:",any"`
}

func parseSVG(t *testing.T, markup string) svgNode {
	t.Helper()
	var n svgNode
	if err := xml.Unmarshal([]byte(markup), &n); err != nil {
		t.Fatalf("chart is not well-formed XML: %v\n%s", err, markup)
	}
	return n
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// find returns the descendants named elem (with class, when given).
func (n svgNode) find(elem, class string) []svgNode {
	var out []svgNode
	for _, c := range n.Nodes {
		if c.XMLName.Local == elem && (class == "" || c.attr("class") == class) {
			out = append(out, c)
		}
		out = append(out, c.find(elem, class)...)
	}
	return out
}

// path returns the d of the chart's only path of class; "" when absent.
func (n svgNode) path(t *testing.T, class string) string {
	t.Helper()
	ps := n.find("path", class)
	switch len(ps) {
	case 0:
		return ""
	case 1:
		return ps[0].attr("d")
	}
	t.Fatalf("%d paths of class %s", len(ps), class)
	return ""
}

// linePoints decodes a sparkline's line: "Mx y", then relative steps
// after "l", and "h0" for a lone point.
func linePoints(t *testing.T, d string) [][2]int {
	t.Helper()
	if d == "" {
		return nil
	}
	m := regexp.MustCompile(`^M(\d+) (\d+)(?:l((?:\s?\d+(?:-\d+| \d+))+)|h0)?$`).FindStringSubmatch(d)
	if m == nil {
		t.Fatalf("line path %q is not M then relative steps", d)
	}
	x, _ := strconv.Atoi(m[1])
	y, _ := strconv.Atoi(m[2])
	pts := [][2]int{{x, y}}
	for _, s := range regexp.MustCompile(`(\d+)(-?)\s?(\d+)`).FindAllStringSubmatch(m[3], -1) {
		dx, _ := strconv.Atoi(s[1])
		dy, _ := strconv.Atoi(s[3])
		if s[2] == "-" {
			dy = -dy
		}
		x, y = x+dx, y+dy
		pts = append(pts, [2]int{x, y})
	}
	return pts
}

func countMoves(d string) int { return strings.Count(d, "M") }

func TestSparklineScalesIntoTheBox(t *testing.T) {
	var sc chartScratch
	// 20..29 ms: the scale is 0 to niceCeil(29 × 1.05) = 40 ms.
	var ttfts []time.Duration
	for i := range 10 {
		ttfts = append(ttfts, time.Duration(20+i)*ms)
	}
	v := sparkline(metricTTFT, points(ttfts...), 0, &sc)
	if v.top != 40*ms || v.values != 10 || v.fails != 0 || v.clamped != 0 {
		t.Fatalf("top %v values %d fails %d clamped %d", v.top, v.values, v.fails, v.clamped)
	}
	svg := parseSVG(t, string(v.SVG))
	pts := linePoints(t, svg.path(t, "line"))
	if len(pts) != 10 {
		t.Fatalf("%d points drawn, want 10", len(pts))
	}
	// The oldest at the left edge, the newest at the right, evenly
	// spaced in time (one a second).
	if pts[0][0] != sparkX0 || pts[9][0] != sparkX1 {
		t.Errorf("x from %d to %d, want %d to %d", pts[0][0], pts[9][0], sparkX0, sparkX1)
	}
	for i, p := range pts {
		wantX := sparkX0 + float64(i)*(sparkX1-sparkX0)/9
		wantY := sparkY1 - float64(20+i)/40*(sparkY1-sparkY0)
		if abs(float64(p[0])-wantX) > 0.5 || abs(float64(p[1])-wantY) > 0.5 {
			t.Errorf("point %d at %v, want (%.1f, %.1f)", i, p, wantX, wantY)
		}
		if p[1] < sparkY0 || p[1] > sparkY1 {
			t.Errorf("point %d outside the plot area: %v", i, p)
		}
	}
	if svg.path(t, "slo") != "" || svg.path(t, "fails") != "" || svg.path(t, "clamp") != "" {
		t.Error("an SLO line, failure ticks or carets drawn where there are none")
	}
	// What the chart shows, in words: the title (the accessible name).
	if got := svg.find("title", "")[0].Text; got != v.Desc ||
		got != "TTFT of the last 10 results (over 9s): 10 successful, min 20.00 ms, max 29.00 ms; 0 failures. Scale 0–40 ms." {
		t.Errorf("title %q", got)
	}
	if texts := svg.find("text", ""); len(texts) != 2 || texts[0].Text != "TTFT" || texts[1].Text != "0–40 ms" {
		t.Errorf("label and scale: %+v", texts)
	}
}

func TestSparklineSLOLine(t *testing.T) {
	var sc chartScratch
	// The SLO above every value sets the scale: niceCeil(250 × 1.05) = 300 ms,
	// and the line is 250/300 of the way up.
	v := sparkline(metricTTFT, points(20*ms, 26*ms, 22*ms), 250*ms, &sc)
	wantY := sparkY1 - 250*(sparkY1-sparkY0)/300
	if v.top != 300*ms || v.sloY != wantY {
		t.Errorf("top %v, SLO at %d; want 300ms at %d", v.top, v.sloY, wantY)
	}
	svg := parseSVG(t, string(v.SVG))
	if d := svg.path(t, "slo"); d != fmt.Sprintf("M0 %dH%d", wantY, sparkW) {
		t.Errorf("SLO path %q", d)
	}
	if !strings.Contains(v.Desc, "SLO 250.0 ms (dashed line)") {
		t.Errorf("title does not name the SLO: %s", v.Desc)
	}
	// An SLO below the values: the values set the scale, the line is
	// lower.
	v = sparkline(metricTPOT, points(200*ms, 300*ms), 5*ms, &sc)
	if v.top != 40*ms || v.sloY != sparkY1-5*(sparkY1-sparkY0)/40 {
		t.Errorf("TPOT 20..30 ms, SLO 5 ms: top %v, SLO at %d", v.top, v.sloY)
	}
}

func TestSparklineMarksFailures(t *testing.T) {
	var sc chartScratch
	ttfts := repeat(20, 30*ms)
	for _, i := range []int{3, 9, 10, 19} {
		ttfts[i] = 0
	}
	v := sparkline(metricTTFT, points(ttfts...), 0, &sc)
	if v.fails != 4 || v.values != 16 {
		t.Fatalf("fails %d values %d, want 4 and 16", v.fails, v.values)
	}
	svg := parseSVG(t, string(v.SVG))
	d := svg.path(t, "fails")
	if n := countMoves(d); n != 4 {
		t.Errorf("%d failure ticks, want 4: %s", n, d)
	}
	// Each tick at its failure's time, below the zero line.
	for _, i := range []int{3, 9, 10, 19} {
		x := sparkX0 + (i*(sparkX1-sparkX0)+19/2)/19
		if want := fmt.Sprintf("M%d %dV%d", x, sparkTickY0, sparkTickY1); !strings.Contains(d, want) {
			t.Errorf("no tick %s for failure %d in %s", want, i, d)
		}
	}
	if !strings.Contains(v.Desc, "16 successful") || !strings.Contains(v.Desc, "4 failures (red ticks)") {
		t.Errorf("title %s", v.Desc)
	}
	// Failures at one instant (a burst) draw one tick but all count.
	pts := points(0, 0, 0, 30*ms)
	pts[1].At, pts[2].At = pts[0].At, pts[0].At
	v = sparkline(metricTTFT, pts, 0, &sc)
	if d := parseSVG(t, string(v.SVG)).path(t, "fails"); v.fails != 3 || countMoves(d) != 1 {
		t.Errorf("a burst of 3 failures: %d counted, ticks %q", v.fails, d)
	}
}

func TestSparklineEmptyAndSinglePoint(t *testing.T) {
	var sc chartScratch
	v := sparkline(metricTTFT, nil, 250*ms, &sc)
	svg := parseSVG(t, string(v.SVG))
	if svg.path(t, "line") != "" || svg.path(t, "fails") != "" || v.Desc != "TTFT: no results kept yet." {
		t.Errorf("empty history: %s", v.SVG)
	}
	if texts := svg.find("text", ""); texts[1].Text != "no results" {
		t.Errorf("empty history's scale %q", texts[1].Text)
	}

	// One point: in the middle, drawn as a dot (a zero-length segment
	// with round caps).
	v = sparkline(metricTTFT, points(40*ms), 0, &sc)
	d := parseSVG(t, string(v.SVG)).path(t, "line")
	pts := linePoints(t, d)
	if len(pts) != 1 || pts[0][0] != (sparkX0+sparkX1)/2 || !strings.HasSuffix(d, "h0") {
		t.Errorf("single point: %q", d)
	}
	if !strings.Contains(v.Desc, "1 successful, min 40.00 ms, max 40.00 ms") {
		t.Errorf("single point's title: %s", v.Desc)
	}
}

func TestSparklineAllFailures(t *testing.T) {
	var sc chartScratch
	v := sparkline(metricTTFT, points(repeat(5, 0)...), 0, &sc)
	svg := parseSVG(t, string(v.SVG))
	if svg.path(t, "line") != "" || v.fails != 5 || countMoves(svg.path(t, "fails")) != 5 {
		t.Errorf("all failures: %s", v.SVG)
	}
	if texts := svg.find("text", ""); texts[1].Text != "no values" {
		t.Errorf("scale %q, want no values", texts[1].Text)
	}
	if want := "TTFT of the last 5 results (over 4s): no successful streamed result with a first token; 5 failures (red ticks)."; v.Desc != want {
		t.Errorf("title %q\nwant  %q", v.Desc, want)
	}
	// With an SLO, its line still shows where the threshold is.
	v = sparkline(metricTPOT, points(repeat(5, 0)...), 50*ms, &sc)
	if v.top != 60*ms || parseSVG(t, string(v.SVG)).path(t, "slo") == "" {
		t.Errorf("all failures with an SLO: top %v\n%s", v.top, v.SVG)
	}
}

func TestSparklineClampsOutliers(t *testing.T) {
	var sc chartScratch
	// 99 results of 20 ms and one cold start of 30 s: the scale stops at
	// 2 × p95 (40 ms, with headroom 50 ms) and the outlier sits on the
	// top edge under a caret; the others keep their detail.
	ttfts := repeat(100, 20*ms)
	ttfts[60] = 30 * time.Second
	v := sparkline(metricTTFT, points(ttfts...), 0, &sc)
	if v.top != 50*ms || v.clamped != 1 {
		t.Fatalf("top %v, %d clamped; want 50ms and 1", v.top, v.clamped)
	}
	svg := parseSVG(t, string(v.SVG))
	pts := linePoints(t, svg.path(t, "line"))
	if pts[60][1] != sparkY0 {
		t.Errorf("the outlier is at y %d, want the top edge %d", pts[60][1], sparkY0)
	}
	if y, _ := v.yOfForTest(20 * ms); pts[0][1] != y {
		t.Errorf("a 20 ms value at y %d, want %d", pts[0][1], y)
	}
	carets := svg.path(t, "clamp")
	if countMoves(carets) != 1 || !strings.HasPrefix(carets, fmt.Sprintf("M%d ", pts[60][0]-5)) {
		t.Errorf("carets %q over x %d", carets, pts[60][0])
	}
	if !strings.Contains(v.Desc, "max 30.00 s") || !strings.Contains(v.Desc, "1 above 50 ms drawn on the top edge (carets)") {
		t.Errorf("title %s", v.Desc)
	}
	// Below the SLO nothing is an outlier: the SLO sets the scale.
	v = sparkline(metricTTFT, points(ttfts...), 60*time.Second, &sc)
	if v.clamped != 0 || v.top != 80*time.Second {
		t.Errorf("with a 60 s SLO: %d clamped, top %v", v.clamped, v.top)
	}
	// Many high values are not outliers: the p95 moves with them.
	for i := range 10 {
		ttfts[i*10+1] = time.Second
	}
	if v = sparkline(metricTTFT, points(ttfts...), 0, &sc); v.clamped != 1 || v.top != 2500*ms {
		t.Errorf("10%% at 1 s: %d clamped, top %v; want only the 30 s one, 2.5 s", v.clamped, v.top)
	}
}

func TestSparklineThinsDenseColumns(t *testing.T) {
	var sc chartScratch
	// 20 000 results, far more than columns: at most the first, lowest,
	// highest and last value of each column are drawn, and every
	// column's extremes survive.
	ttfts := make([]time.Duration, 20_000)
	for i := range ttfts {
		ttfts[i] = time.Duration(10+i%37) * ms
	}
	ttfts[12_345] = 100 * ms
	v := sparkline(metricTTFT, points(ttfts...), 0, &sc)
	pts := linePoints(t, parseSVG(t, string(v.SVG)).path(t, "line"))
	if len(pts) > sparkMaxPoints || v.values != 20_000 {
		t.Fatalf("%d points drawn for %d values, at most %d", len(pts), v.values, sparkMaxPoints)
	}
	top, bottom := sparkY1, sparkY0
	for _, p := range pts {
		top, bottom = min(top, p[1]), max(bottom, p[1])
	}
	if want, _ := v.yOfForTest(100 * ms); top != want {
		t.Errorf("the 100 ms peak was thinned away: highest point at y %d, want %d", top, want)
	}
	if want, _ := v.yOfForTest(10 * ms); bottom != want {
		t.Errorf("the 10 ms floor was thinned away: lowest point at y %d, want %d", bottom, want)
	}
}

// yOfForTest is the height of d on v's scale.
func (v sparkView) yOfForTest(d time.Duration) (int, bool) {
	if d >= v.top {
		return sparkY0, d > v.top
	}
	return sparkY1 - int(float64(d)/float64(v.top)*(sparkY1-sparkY0)+0.5), false
}

func TestSparklineOfProbesThatDoNotStream(t *testing.T) {
	var sc chartScratch
	pts := points(100*ms, 0, 300*ms)
	for i := range pts {
		pts[i].HasTTFT, pts[i].HasTPOT = false, false
	}
	v := sparkline(metricEndToEnd, pts, 0, &sc)
	if v.values != 2 || v.fails != 1 || !strings.HasPrefix(v.Desc, "end-to-end of the last 3 results") {
		t.Errorf("end-to-end: %d values, %d fails, %s", v.values, v.fails, v.Desc)
	}
}

// TestSparkMarkupIsNumbers checks the sparklines written outside
// html/template keep to its rules: well-formed, every attribute from a
// fixed set of names with a value that is a number, path data or one of
// a few fixed words, and text escaped.
func TestSparkMarkupIsNumbers(t *testing.T) {
	var sc chartScratch
	ttfts := repeat(50, 20*ms)
	ttfts[7], ttfts[30] = 0, 9*time.Second
	charts := []sparkView{
		sparkline(metricTTFT, points(ttfts...), 250*ms, &sc),
		sparkline(metricTPOT, points(ttfts...), 2*ms, &sc),
		sparkline(metricEndToEnd, points(ttfts...), 0, &sc),
		sparkline(metricTTFT, nil, 0, &sc),
		sparkline(metricTTFT, points(0, 0), 0, &sc),
	}
	allowed := map[string]*regexp.Regexp{
		"class":       regexp.MustCompile(`^(spark|bg|scale|axis|slo|line|clamp|fails)$`),
		"role":        regexp.MustCompile(`^img$`),
		"text-anchor": regexp.MustCompile(`^end$`),
		"viewBox":     regexp.MustCompile(`^\d+ \d+ \d+ \d+$`),
		"d":           regexp.MustCompile(`^[MLlHVhvz0-9 -]+$`),
	}
	number := regexp.MustCompile(`^\d+$`)
	for _, name := range []string{"width", "height", "x", "y"} {
		allowed[name] = number
	}
	var walk func(n svgNode)
	walk = func(n svgNode) {
		if !map[string]bool{"svg": true, "title": true, "rect": true, "text": true, "path": true}[n.XMLName.Local] {
			t.Errorf("element %s", n.XMLName.Local)
		}
		for _, a := range n.Attrs {
			if re := allowed[a.Name.Local]; re == nil || !re.MatchString(a.Value) {
				t.Errorf("attribute %s=%q", a.Name.Local, a.Value)
			}
		}
		for _, c := range n.Nodes {
			walk(c)
		}
	}
	for _, c := range charts {
		svg := parseSVG(t, string(c.SVG))
		walk(svg)
		if svg.attr("viewBox") != fmt.Sprintf("0 0 %d %d", sparkW, sparkH) ||
			svg.attr("width") != strconv.Itoa(sparkW/2) || svg.attr("height") != strconv.Itoa(sparkH/2) {
			t.Errorf("drawn at %s×%s of %s", svg.attr("width"), svg.attr("height"), svg.attr("viewBox"))
		}
	}
	// The texts are escaped, whatever they are.
	m := string(sparkMarkup(&sc, `<script>alert(1)</script>`, `"&'`, `</title><img src=x>`, 0, nil, nil, nil))
	if strings.Contains(m, "<script>") || strings.Contains(m, "<img") || strings.Contains(m, `"&'`) {
		t.Errorf("texts not escaped: %s", m)
	}
	svg := parseSVG(t, m)
	if svg.find("title", "")[0].Text != `</title><img src=x>` || svg.find("text", "")[0].Text != `<script>alert(1)</script>` {
		t.Errorf("escaped texts do not read back: %s", m)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, time.Microsecond}, {time.Microsecond, time.Microsecond},
		{21 * ms, 25 * ms}, {26 * ms, 30 * ms}, {31 * ms, 40 * ms}, {41 * ms, 50 * ms}, {51 * ms, 60 * ms}, {61 * ms, 80 * ms}, {81 * ms, 100 * ms},
		{100 * ms, 100 * ms}, {101 * ms, 150 * ms}, {262 * ms, 300 * ms}, {9 * time.Second, 10 * time.Second}, {31 * time.Second, 40 * time.Second},
	} {
		if got := niceCeil(c.in); got != c.want {
			t.Errorf("niceCeil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   time.Duration
		want string
	}{{300 * ms, "300 ms"}, {1500 * time.Microsecond, "1.5 ms"}, {15 * time.Second, "15 s"}} {
		if got := roundDur(c.in); got != c.want {
			t.Errorf("roundDur(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
