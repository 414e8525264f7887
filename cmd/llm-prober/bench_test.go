package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// benchConfig is a target on url whose API key (from a file) and a
// credential header are planted secrets no bench output may contain.
func benchConfig(url string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    api_key_file: key
    headers: {X-Api-Key: %s}
    probes:
      - {name: steady, schedule: {every: 1h}, timeout: 5s}
      - {name: long, workload: long, schedule: {every: 1h}}
workloads:
  default: {max_tokens: 8, ignore_eos: true}
  long: {max_tokens: 64, ignore_eos: true}
`, url, plantedHeader)
}

// benchDir writes benchConfig(url) as c.yml, with its key file, into a
// new directory and returns the directory.
func benchDir(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(dir, "key"), plantedAPIKey+"\n")
	testutil.WriteFile(t, filepath.Join(dir, "c.yml"), benchConfig(url))
	return dir
}

func runBenchArgs(ctx context.Context, t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut testutil.SyncBuffer
	code = run(ctx, append([]string{"bench"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestBenchOutputs runs a two-step sweep twice into the same files: the
// JSON report, the CSV (header once), the per-request JSONL all parse and
// agree, thresholds pass (exit 0), and no planted secret appears anywhere.
func TestBenchOutputs(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	jsonPath, csvPath, reqPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.jsonl")
	var all strings.Builder
	for range 2 {
		code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
			"--concurrency", "1,2", "--duration", "500ms", "--warmup", "100ms",
			"--threshold", "ttft_p95<5s", "--threshold", "error_rate<1%", "--threshold", "output_tokens_per_second>1",
			"--output", jsonPath, "--csv", csvPath, "--export-requests", reqPath)
		all.WriteString(stdout + stderr)
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"Step 2/2: concurrency 2", "Summary: sim / steady (sim-llm)", "✓ ttft_p95<5s", "✓ error_rate<1%", "✓ output_tokens_per_second>1"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	all.Write(b)
	var rep struct {
		Tool      struct{ Version string }
		StartedAt time.Time `json:"started_at"`
		EndedAt   time.Time `json:"ended_at"`
		Config    struct {
			Target, Protocol, Endpoint, Model, Probe string
			APIKeySet                                bool     `json:"api_key_set"`
			HeaderNames                              []string `json:"header_names"`
			Workload                                 map[string]any
		}
		Flags struct {
			Levels     []float64
			Thresholds []string
		}
		Steps []struct {
			Level    float64
			Requests int
			TTFT     struct{ Count int } `json:"time_to_first_token_seconds"`
		}
		Thresholds []struct{ Passed bool }
		Passed     bool
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("--output is not JSON: %v", err)
	}
	c := rep.Config
	if c.Target != "sim" || c.Protocol != "openai_chat" || c.Endpoint != url || c.Model != "sim-llm" || c.Probe != "steady" ||
		!c.APIKeySet || len(c.HeaderNames) != 1 || c.HeaderNames[0] != "X-Api-Key" || c.Workload["ignore_eos"] != true {
		t.Errorf("config %+v", c)
	}
	if len(rep.Steps) != 2 || rep.Steps[1].Level != 2 || rep.Steps[0].Requests == 0 || rep.Steps[0].TTFT.Count != rep.Steps[0].Requests ||
		len(rep.Thresholds) != 3 || !rep.Passed || rep.Tool.Version == "" || !rep.EndedAt.After(rep.StartedAt) || len(rep.Flags.Thresholds) != 3 {
		t.Errorf("report %+v", rep)
	}

	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatalf("--csv: %v", err)
	}
	if len(rows) != 5 || rows[0][0] != "timestamp" || rows[1][0] == "timestamp" || rows[3][0] == "timestamp" {
		t.Fatalf("CSV after two runs of two steps: %d rows, want a header and 4 rows: %v", len(rows), rows)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, name := range []string{"timestamp", "version", "target", "probe", "mode", "level", "ttft_seconds_p99", "requests_per_second"} {
		if _, ok := col[name]; !ok {
			t.Errorf("CSV lacks column %s", name)
		}
	}
	if r := rows[4]; r[col["target"]] != "sim" || r[col["probe"]] != "steady" || r[col["mode"]] != "concurrency" || r[col["level"]] != "2" {
		t.Errorf("CSV row %v", r)
	}

	b, err = os.ReadFile(reqPath)
	if err != nil {
		t.Fatal(err)
	}
	all.Write(b)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != rep.Steps[0].Requests+rep.Steps[1].Requests {
		t.Errorf("--export-requests has %d lines, the steps measured %d", len(lines), rep.Steps[0].Requests+rep.Steps[1].Requests)
	}
	for i, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		for _, k := range []string{"step", "request_id", "start", "outcome", "status", "ttft_seconds", "tpot_seconds", "e2e_seconds", "chunk_offsets_seconds", "input_tokens", "input_tokens_source", "output_tokens", "output_tokens_source", "finish_reason", "phases"} {
			if _, ok := r[k]; !ok {
				t.Errorf("line %d lacks %s: %s", i+1, k, l)
			}
		}
	}
	assertNoSecrets(t, "bench outputs", all.String())
}

func TestBenchThresholdFails(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	code, stdout, stderr := runBenchArgs(context.Background(), t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim", "--probe", "long",
		"--requests", "4", "--warmup", "0s", "--threshold", "ttft_p50<1us", "--threshold", "requests>=4", "--threshold", "output_tokens_min>=64")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"✗ ttft_p50<1us", "✓ requests>=4", "✓ output_tokens_min>=64", "Step 1/1: concurrency 1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	assertNoSecrets(t, "bench stdout/stderr", stdout+stderr)
}

// countingListener counts the connections a command opens, to show that
// usage errors are reported before any request is sent.
func countingListener(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	l := testutil.Listen(t)
	conns = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return "http://" + l.Addr().String(), conns
}

func TestBenchUsageAndSetupErrors(t *testing.T) {
	url, conns := countingListener(t)
	dir := benchDir(t, url)
	cfg := filepath.Join(dir, "c.yml")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--concurrency", "1", "--rate", "2"}, 2, "mutually exclusive"},
		{[]string{"--concurrency", "0:4"}, 2, "whole number ≥ 1"},
		{[]string{"--concurrency", "1:64:x1"}, 2, "factor"},
		{[]string{"--rate=-1"}, 2, "want requests per second"},
		{[]string{"--poisson"}, 2, "use it with --rate"},
		{[]string{"--threshold", "ttft_p95<500"}, 2, "needs a unit"},
		{[]string{"--threshold", "error_rate<5"}, 2, "write a percentage"},
		{[]string{"--threshold", "tokens_per_second>5"}, 2, "unknown metric"},
		{[]string{"--threshold", "output_tokens_per_second>200ms"}, 2, "plain number"},
		{[]string{"--stability", "150%"}, 2, "between 0 and 100"},
		{[]string{"--stability", "10%", "--max-windows", "2"}, 2, "at least 3"},
		{[]string{"--duration", "0s"}, 2, "--duration must be positive"},
		{[]string{"--bogus"}, 2, "unknown long flag"},
		{[]string{"--target", "nope"}, 1, `no target "nope"`},
		{[]string{"--probe", "nope"}, 1, `has no probe "nope"`},
		{[]string{"--output", filepath.Join(dir, "missing", "r.json")}, 1, "--output"},
	} {
		args := append([]string{"--config.file", cfg}, tc.args...)
		if !strings.Contains(strings.Join(tc.args, " "), "--target") {
			args = append(args, "--target", "sim")
		}
		code, _, stderr := runBenchArgs(context.Background(), t, args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("usage and setup errors opened %d connections to the target", n)
	}
}

// Ctrl-C (the context main cancels on SIGINT) mid-step: partial statistics
// on stdout, the JSON report marked interrupted, exit 130.
func TestBenchInterrupted(t *testing.T) {
	url := startSimulator(t)
	dir := benchDir(t, url)
	jsonPath := filepath.Join(dir, "r.json")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(800*time.Millisecond, cancel)
	start := time.Now()
	code, stdout, stderr := runBenchArgs(ctx, t, "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
		"--concurrency", "2,4", "--duration", "20s", "--warmup", "200ms", "--output", jsonPath)
	if code != 130 {
		t.Fatalf("exit %d, want 130\n%s\n%s", code, stdout, stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("interrupted bench took %s", took)
	}
	for _, want := range []string{"Step 1/2: concurrency 2 — INTERRUPTED, partial", "2 (partial)", "Time to first token (ms)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "Step 2/2") {
		t.Error("bench went on to the next step after Ctrl-C")
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Interrupted bool
		Steps       []struct {
			Interrupted bool
			Requests    int
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || len(rep.Steps) != 1 || !rep.Steps[0].Interrupted || rep.Steps[0].Requests == 0 {
		t.Errorf("report %+v", rep)
	}
}

// TestBenchProcessCtrlC sends a real SIGINT to the built binary mid-step,
// as a terminal's Ctrl-C does: it prints the partial step and the summary
// of what was measured, writes the report, and exits 130.
func TestBenchProcessCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	url := startSimulator(t)
	dir := benchDir(t, url)
	bin := testutil.BuildBinary(t)
	jsonPath := filepath.Join(dir, "r.json")
	var stdout, stderr testutil.SyncBuffer
	cmd := exec.Command(bin, "bench", "--config.file", filepath.Join(dir, "c.yml"), "--target", "sim",
		"--concurrency", "2", "--duration", "30s", "--warmup", "0s", "--output", jsonPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	p := testutil.StartProcess(t, "llm-prober bench", cmd)
	// Interrupt once a few requests were measured (the plain progress line
	// comes every 10 s, so wait on the simulator's own count instead).
	testutil.WaitFor(t, "4 requests finished by the simulator", waitTimeout, func() bool { return simulatorRequests(url) >= 4 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Wait(15 * time.Second); !exited {
		t.Fatalf("no exit within 15 s of SIGINT\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"INTERRUPTED, partial", "Time to first token (ms)", "Summary: sim / steady"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "interrupted; statistics cover what was measured") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	var rep struct {
		Interrupted bool
		Steps       []struct{ Successes int }
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || len(rep.Steps) != 1 || rep.Steps[0].Successes < 1 {
		t.Errorf("report after SIGINT: %+v", rep)
	}
}

// simulatorRequests reads how many requests the simulator has finished
// from its vLLM-named /metrics (0 while it cannot).
func simulatorRequests(url string) float64 {
	mfs, err := testutil.GetMetrics(nil, url)
	if err != nil {
		return 0
	}
	return mfs.Sum("vllm:request_success_total")
}
