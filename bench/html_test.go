package bench

import (
	"bytes"
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
