package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// Bad inputs of the capacity search, gamma arrivals and trace replay are
// usage errors: a clear message, exit 2, nothing sent.
func TestBenchCapacityAndArrivalUsageErrors(t *testing.T) {
	url, conns := countingListener(t)
	dir := benchDir(t, url)
	cfg := filepath.Join(dir, "c.yml")
	empty := filepath.Join(dir, "empty.jsonl")
	unordered := filepath.Join(dir, "unordered.jsonl")
	testutil.WriteFile(t, empty, "\n")
	testutil.WriteFile(t, unordered, `{"timestamp": 10, "input_length": 5, "output_length": 2}`+"\n"+`{"timestamp": 3, "input_length": 5, "output_length": 2}`+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "1", "--burstiness", "0"}, "--burstiness 0: want a number > 0"},
		{[]string{"--rate", "1", "--burstiness=-2"}, "--burstiness -2: want a number > 0"},
		{[]string{"--burstiness", "0.5"}, "--burstiness shapes open-loop arrivals; use it with --rate"},
		{[]string{"--rate", "1", "--burstiness", "0.5", "--poisson"}, "--burstiness 1 is Poisson"},
		{[]string{"--trace", empty}, "empty.jsonl: the trace is empty"},
		{[]string{"--trace", unordered}, "unordered.jsonl:2: timestamp 3 is before the previous line's 10; a trace must be in time order"},
		{[]string{"--trace", filepath.Join(dir, "missing.jsonl")}, "no such file"},
		{[]string{"--trace", unordered, "--rate", "1"}, "does not combine with --concurrency or --rate"},
		{[]string{"--trace", unordered, "--trace-speed", "0"}, "trace speed \"0\" must be > 0"},
		{[]string{"--capacity", "rate"}, "--capacity needs an SLO"},
		{[]string{"--capacity", "rate", "--slo", "ttft<500"}, "needs a unit"},
		{[]string{"--capacity", "rate", "--slo", "ttft_p99<500ms"}, "an SLO is ttft, tpot or latency"},
		{[]string{"--capacity", "rate", "--slo", "ttft<1s", "--rate", "1"}, "--capacity chooses its own levels"},
		{[]string{"--capacity", "rate", "--slo", "ttft<1s", "--objective", "150%"}, "--objective \"150%\""},
		{[]string{"--capacity", "trace", "--slo", "ttft<1s"}, "--capacity trace searches the replay speed of --trace"},
		{[]string{"--capacity", "concurrency", "--slo", "ttft<1s", "--search-start", "1.5"}, "whole number"},
		{[]string{"--capacity", "rate", "--slo", "ttft<1s", "--search-start", "10", "--search-max", "5"}, "--search-min ≤ --search-start ≤ --search-max"},
		{[]string{"--capacity", "rate", "--slo", "ttft<1s", "--trials", "0"}, "--trials must be 1 to 100"},
		{[]string{"--quick-sweep", "3", "--capacity", "rate", "--slo", "ttft<1s"}, "does not combine with --capacity"},
	} {
		args := append([]string{"--config.file", cfg, "--target", "sim"}, tc.args...)
		code, _, stderr := runBenchArgs(context.Background(), t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("usage errors opened %d connections to the target", n)
	}
}

// A cancellation probe's streams end where it cuts them, so bench refuses
// it (exit 2) before sending anything.
func TestBenchRefusesCancellationProbe(t *testing.T) {
	url, conns := countingListener(t)
	cfg := filepath.Join(t.TempDir(), "c.yml")
	testutil.WriteFile(t, cfg, `targets:
  - name: sim
    protocol: openai_chat
    url: `+url+`
    model: sim-llm
    server_metrics: {url: `+url+`/metrics}
    probes:
      - name: cut
        schedule: {every: 1m}
        cancel: {after_tokens: 4}
`)
	code, _, stderr := runBenchArgs(context.Background(), t, "--config.file", cfg, "--target", "sim", "--concurrency", "1")
	if want := "probe sim/cut has cancel: (cut after 4 tokens), so its latencies would describe cut streams; bench a probe without cancel:"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, want)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("opened %d connections to the target", n)
	}
}

// An SLO no level can meet ends the search at its floor with the reason
// and exit 1, in seconds: each step stops as soon as its goodput is
// clearly below the objective.
func TestBenchCapacityUnmeetableSLO(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	start := time.Now()
	code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
		"--capacity", "concurrency", "--slo", "ttft<1us", "--search-start", "2", "--duration", "2s", "--warmup", "0s")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "no level met the goodput objective 99% for SLO ttft<1us; at concurrency 1, the lowest level tried, goodput was 0.0%") ||
		!strings.Contains(stderr, "loosen the SLO") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if !strings.Contains(stdout, "STOPPED EARLY (goodput)") {
		t.Errorf("no step stopped early:\n%s", stdout)
	}
	t.Logf("gave up after %s", time.Since(start).Round(time.Millisecond))
}

// --min-capacity is a CI gate: a capacity below it fails the run with
// the reason, one at or above it passes. The search here climbs to its
// ceiling (every level meets a loose SLO), so the capacity is known: 2.
func TestBenchMinCapacityExitStatus(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	for _, tc := range []struct {
		min  string
		code int
	}{{"3", 1}, {"2", 0}} {
		code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
			"--capacity", "concurrency", "--slo", "latency<30s", "--search-start", "1", "--search-max", "2",
			"--duration", "1s", "--warmup", "0s", "--min-capacity", tc.min)
		if code != tc.code {
			t.Fatalf("--min-capacity %s: exit %d, want %d\n%s\n%s", tc.min, code, tc.code, stdout, stderr)
		}
		const msg = "llm-prober bench: capacity 2 is below --min-capacity 3"
		if got := strings.Contains(stderr, msg); got != (tc.code == 1) {
			t.Errorf("--min-capacity %s: %q in stderr is %v:\n%s", tc.min, msg, got, stderr)
		}
	}
}

// Two runs merged on the command line: levels add, the merged JSON names
// its inputs, and the HTML report is written.
func TestBenchMergeCommand(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	var files []string
	for _, name := range []string{"a.json", "b.json"} {
		path := filepath.Join(dir, name)
		code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
			"--rate", "4,8", "--duration", "1s", "--warmup", "0s", "--output", path)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		files = append(files, path)
	}
	merged := filepath.Join(dir, "m.json")
	var out, errOut testutil.SyncBuffer
	code := run(context.Background(), append([]string{"bench-merge", "--output", merged, "--html", filepath.Join(dir, "m.html")}, files...), &out, &errOut)
	if code != 0 {
		t.Fatalf("bench-merge: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	b, err := os.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Merged []string `json:"merged"`
		Steps  []struct {
			Level    float64 `json:"level"`
			Requests int     `json:"requests"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Merged) != 2 || len(rep.Steps) != 2 || rep.Steps[0].Level != 8 || rep.Steps[1].Level != 16 {
		t.Errorf("merged report: %+v", rep)
	}
	if !strings.Contains(out.String(), "Rate (req/s)") {
		t.Errorf("no summary:\n%s", out.String())
	}
	code = run(context.Background(), []string{"bench-merge", files[0], filepath.Join(dir, "c.yml")}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "c.yml: not a bench --output JSON file") {
		t.Errorf("merging a non-result: exit %d, %s", code, errOut.String())
	}
}

// TestBenchReportInBrowser opens a sweep's HTML report from disk in
// headless Chromium, with and without JavaScript (it needs none), and
// checks the DOM the browser built: the three latency-throughput curves
// with their p50/p90/p99 lines and the SLO line, a distribution per
// statistic and step, a timeline per step; and that every chart is laid
// out with a size.
func TestBenchReportInBrowser(t *testing.T) {
	bin := chromiumPath(t)
	url := startSimulator(t)
	dir := benchDir(t, url)
	report := filepath.Join(dir, "report.html")
	code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
		"--rate", "5,10,20", "--duration", "1s", "--warmup", "0s", "--slo", "ttft<250ms", "--html", report)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	page := "file://" + report
	dom := dumpDOM(t, bin, page, nil)
	mustMatch(t, dom,
		`<title>llm-prober bench: sim / steady</title>`,
		`<svg class="curve" width="480" height="280" viewBox="0 0 480 280" role="img"><title>Time to first token p50, p90 and p99 \(ms\) against achieved requests per second over 3 steps; SLO 250\.00 ms dashed</title>`,
		`<svg class="curve"[^>]*><title>Time per output token p50`, `<svg class="curve"[^>]*><title>End-to-end latency p50`,
		`<path class="slo" d="M60 [0-9][0-9.]*H468">`,
		`<path class="line p50" d="M[0-9.]+ [0-9.]+L[0-9.]+ [0-9.]+L[0-9.]+ [0-9.]+">`,
		`<path class="line p99" d="M`,
		`<svg class="dist"[^>]*><title>TTFT distribution at rate 5/s: \d+ observations`,
		`<svg class="timeline"[^>]*><title>Timeline of rate 20/s: \d+ requests`,
		`<path class="req" stroke-width="[0-9.]+" d="M[0-9.]+ [0-9.]+H`,
		`<td>Step 3: rate 20/s</td>`,
	)
	if n := strings.Count(dom, `<svg class="dist"`); n != 9 {
		t.Errorf("%d distributions, want 3 statistics × 3 steps", n)
	}
	if n := strings.Count(dom, `<svg class="timeline"`); n != 3 {
		t.Errorf("%d timelines, want 3", n)
	}
	if strings.Contains(dom, "http://") && !strings.Contains(dom, url) {
		t.Error("the report refers to a network resource")
	}
	assertNoSecrets(t, "report in Chromium", dom)
	noScript := startDevtools(t, bin, false)
	// Charts are laid out at most at their own size, whatever the
	// window: stretched to the page, their axis text grew to 30 px.
	for _, c := range []struct {
		sel  string
		maxW float64
	}{{"svg.curve", 480}, {"svg.dist", 480}, {"svg.timeline", 960}, {"path.line", 480}} {
		boxes := noScript.boxes(page, c.sel)
		if len(boxes) == 0 {
			t.Errorf("no %s laid out", c.sel)
		}
		for _, b := range boxes {
			if !(b[0] > 0 && b[1] > 0) || b[0] > c.maxW+1 {
				t.Errorf("%s laid out at %v; want a size up to %g wide", c.sel, b, c.maxW)
			}
		}
	}
	screenshot(t, bin, page, t.TempDir(), "bench-report.png")
}
