package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// runJSON runs o with its JSON written to a file, and reads it back as
// bench-merge would.
func runJSON(t *testing.T, o Options, name string) *Report {
	t.Helper()
	o.JSONPath = filepath.Join(t.TempDir(), name)
	if _, code := Run(context.Background(), o); code != ExitPass {
		t.Errorf("%s: exit %d\n%s", name, code, o.Stderr.(interface{ String() string }).String())
	}
	f, err := os.Open(o.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ReadReport(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Two runs at half the rate, at the same time against one server, merge
// into the result of one run at the full rate, within sampling error:
// the same requests per second, the same latency percentiles. The
// full-rate run loads an identical server at the same time, so a busy
// machine slows both sides alike; the load is kept below the knee.
func TestMergeTwoHalfRateRunsEqualsOneFullRateRun(t *testing.T) {
	const rate = 6.0 // the knee is about 13.9/s
	settings := func(r float64) Settings {
		return Settings{Mode: ModeRate, Levels: []float64{r}, Duration: 6 * time.Second, Warmup: time.Second}
	}
	halfURL, fullURL := simtest.Start(t, kneeConfig()).URL, simtest.Start(t, kneeConfig()).URL

	var whole *Report
	var halves [2]*Report
	var wg sync.WaitGroup
	full := kneeOptionsAt(t, fullURL, settings(rate))
	wg.Go(func() { whole = runJSON(t, full, "full.json") })
	for i := range halves {
		o := kneeOptionsAt(t, halfURL, settings(rate/2))
		wg.Go(func() { halves[i] = runJSON(t, o, "half.json") })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	merged, err := Merge(halves[:], []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	m, w := merged.Steps[0], whole.Steps[0]
	if m.Level != rate || len(merged.Flags.Levels) != 1 || merged.Flags.Levels[0] != rate {
		t.Errorf("merged level %g (flags %v), want %g", m.Level, merged.Flags.Levels, rate)
	}
	if m.Requests != halves[0].Steps[0].Requests+halves[1].Steps[0].Requests {
		t.Errorf("merged requests %d are not the sum", m.Requests)
	}
	close := func(name string, got, want, rel, abs float64) {
		t.Helper()
		if d := math.Abs(got - want); d > rel*want && d > abs {
			t.Errorf("%s: merged %.4g, full-rate run %.4g (off by %.1f%%)", name, got, want, d/want*100)
		}
	}
	// Evenly spaced arrivals: counts differ by the random phases only.
	close("requests", float64(m.Requests), float64(w.Requests), 0.1, 2)
	close("requests/s", m.RequestsPerSecond, w.RequestsPerSecond, 0.1, 0)
	close("output tokens/s", m.OutputTokensPerSecond, w.OutputTokensPerSecond, 0.1, 0)
	// Latencies: the prefill and decode steps are the same for both; a
	// few ms of slack absorbs a loaded CI machine.
	close("TTFT p50", m.TTFT.P50, w.TTFT.P50, 0.1, 0.01)
	// p75, not p90 or p99: with 36 requests a side, one request stalled by
	// a starved CI machine moves a p90 by half; a p75 needs nine.
	close("TTFT p75", m.TTFT.P75, w.TTFT.P75, 0.25, 0.03)
	close("latency p50", m.Latency.P50, w.Latency.P50, 0.1, 0.03)
	close("latency p75", m.Latency.P75, w.Latency.P75, 0.25, 0.05)
	close("TPOT p50", m.TPOT.P50, w.TPOT.P50, 0.1, 0.005)
	if m.OutputTokensPerRequest.Min != kneeOutput || m.OutputTokensPerRequest.Max != kneeOutput {
		t.Errorf("output tokens per request %+v", m.OutputTokensPerRequest)
	}
	// Percentiles come from the merged sketch, not from the parts.
	if want := m.Histograms.TTFT.quantile(0.5); m.TTFT.P50 != want {
		t.Errorf("merged TTFT p50 %g is not the merged sketch's %g", m.TTFT.P50, want)
	}
	t.Logf("merged %d req, %.2f/s, TTFT p50 %.1f ms; full %d req, %.2f/s, TTFT p50 %.1f ms",
		m.Requests, m.RequestsPerSecond, m.TTFT.P50*1e3, w.Requests, w.RequestsPerSecond, w.TTFT.P50*1e3)
}

func TestMergeRefusesMismatchedRuns(t *testing.T) {
	mk := func(target string, levels ...float64) *Report {
		r := &Report{Tool: Tool{Name: "llm-prober"}, Config: ConfigInfo{Target: target, Probe: "p"}}
		for i, l := range levels {
			r.Steps = append(r.Steps, &Step{Index: i + 1, Mode: ModeRate, Level: l, Histograms: newHistograms(nil)})
		}
		return r
	}
	for _, tc := range []struct {
		reports []*Report
		want    string
	}{
		{[]*Report{mk("a", 1)}, "at least two"},
		{[]*Report{mk("a", 1), mk("b", 1)}, "merge runs of one target and probe"},
		{[]*Report{mk("a", 1), mk("a", 1, 2)}, "has 2 steps"},
		{[]*Report{mk("a", 1), func() *Report { r := mk("a", 1); r.Capacity = &CapacityResult{Method: "search"}; return r }()}, "capacity search"},
	} {
		names := []string{"x.json", "y.json"}[:len(tc.reports)]
		if _, err := Merge(tc.reports, names); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
}

func TestReadReportRejectsBadFiles(t *testing.T) {
	noHist, _ := json.Marshal(&Report{Tool: Tool{Name: "llm-prober"}, Steps: []*Step{{Index: 1, Mode: ModeRate, Level: 1}}})
	for _, tc := range []struct{ in, want string }{
		{"", "not a bench --output JSON file"},
		{"{} {}", "more than one JSON document"},
		{`{"tool":{"name":"other"}}`, "not written by llm-prober bench"},
		{`{"tool":{"name":"llm-prober"},"steps":[]}`, "has no steps"},
		{`{"tool":{"name":"llm-prober"},"steps":[null]}`, "step 1 is null"},
		{string(noHist), "has no histograms"},
	} {
		if _, err := ReadReport(strings.NewReader(tc.in), "r.json"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzReadReport: whatever a result file holds, reading and merging it
// with itself returns an error or a report, never a panic.
func FuzzReadReport(f *testing.F) {
	good, _ := json.Marshal(&Report{Tool: Tool{Name: "llm-prober"}, Steps: []*Step{{Index: 1, Mode: ModeRate, Level: 1, Histograms: newHistograms([]*sample{})}}})
	f.Add(good)
	f.Add([]byte(`{"tool":{"name":"llm-prober"},"steps":[{"histograms":{"time_to_first_token_seconds":{"gamma":1.01,"count":1,"buckets":[[3,1]]}}}]}`))
	f.Add([]byte(`{"tool":{"name":"llm-prober"},"steps":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ReadReport(bytes.NewReader(b), "f.json")
		if err != nil {
			return
		}
		m, err := Merge([]*Report{rep, rep}, []string{"a", "b"})
		if err != nil {
			return
		}
		for k, s := range m.Steps {
			if s.Requests != 2*rep.Steps[k].Requests {
				t.Fatalf("step %d: merged %d requests from twice %d", k+1, s.Requests, rep.Steps[k].Requests)
			}
			_ = s.TTFT.P99
		}
	})
}

// Quick sweeps' maximum-throughput steps on two machines at once merge
// their completion windows: the union completed both parts' requests in
// the window, so its throughput is their sum, not the span's.
func TestMergeCompletionWindows(t *testing.T) {
	part := func(requests, out int, secs float64) *Step {
		start := time.Unix(1000, 0)
		s := &Step{Index: 2, Mode: ModeConcurrency, Level: 64, Phase: phaseThroughput, Skipped: map[string]int{},
			Stats:      Stats{Requests: requests, Successes: requests, Outcomes: map[string]int{}, OutputTokens: out},
			Histograms: newHistograms(nil), FirstStart: start, LastEnd: start.Add(10 * time.Second),
			Completions: &CompletionWindow{Seconds: secs, Requests: requests, OutputTokens: out}}
		s.Completions.rates()
		return s
	}
	m := mergeSteps([]*Step{part(60, 480, 6), part(66, 528, 6)})
	if m.Completions == nil || m.Completions.Requests != 126 || m.Completions.Seconds != 6 {
		t.Fatalf("merged completion window %+v, want 126 requests in 6 s", m.Completions)
	}
	if m.RequestsPerSecond != 21 || m.OutputTokensPerSecond != 168 {
		t.Errorf("merged throughput %g req/s, %g tok/s; want 21 and 168 (the windows' sum), not the span's 12.6", m.RequestsPerSecond, m.OutputTokensPerSecond)
	}
	plain := part(60, 480, 6)
	plain.Completions = nil
	if m := mergeSteps([]*Step{part(60, 480, 6), plain}); m.Completions != nil || math.Abs(m.RequestsPerSecond-12) > 1e-9 {
		t.Errorf("a part without a completion window: merged %+v at %g/s, want none and the span's 12/s", m.Completions, m.RequestsPerSecond)
	}
}
