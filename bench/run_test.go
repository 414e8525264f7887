package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/workload"
)

// requests is a workload drawing whatever the function builds.
type requests func() *probe.Request

func (f requests) Draw(string) workload.Draw { return workload.Draw{Request: f()} }

// fakeOptions runs d with settings s; the progress goroutine writes the
// returned stdout and stderr while the test reads them.
func fakeOptions(d probe.Driver, s Settings) (Options, *testutil.SyncBuffer, *testutil.SyncBuffer) {
	var stdout, stderr testutil.SyncBuffer
	if s.Mode == "" {
		s.Mode = ModeConcurrency
	}
	if s.MaxWindows == 0 {
		s.MaxWindows = DefaultMaxWindows
	}
	if s.MaxInFlight == 0 {
		s.MaxInFlight = DefaultMaxInFlight
	}
	return Options{
		Settings: s,
		Probe: &engine.Probe{
			Target: "fake", Name: "p", Model: "m", Stream: true, Timeout: 10 * time.Second, Driver: d,
			Workload: requests(func() *probe.Request { return &probe.Request{MaxTokens: 4} }),
		},
		Config: ConfigInfo{Target: "fake", Probe: "p", Model: "m"},
		Stdout: &stdout,
		Stderr: &stderr,
	}, &stdout, &stderr
}

// With --requests a step measures exactly that many requests, however
// many workers are still going when the last one is sent.
func TestRequestsEndsStepAtExactCount(t *testing.T) {
	o, stdout, _ := fakeOptions(&fakeDriver{delay: 20 * time.Millisecond, tokens: 4}, Settings{Levels: []float64{3, 5}, Requests: 10, Warmup: 50 * time.Millisecond})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	for _, s := range rep.Steps {
		if s.Requests != 10 || s.Successes != 10 || len(s.records) != 10 {
			t.Errorf("%s: %d requests (%d records), want 10", s.Label(), s.Requests, len(s.records))
		}
		if s.WarmupRequests < int(s.Level) {
			t.Errorf("%s: %d warm-up requests, want at least one per worker", s.Label(), s.WarmupRequests)
		}
	}
	if !strings.Contains(stdout.String(), "Step 2/2: concurrency 5") || !strings.Contains(stdout.String(), "Summary: fake / p (m)") {
		t.Errorf("stdout lacks step table or summary:\n%s", stdout)
	}
}

func TestProgressLines(t *testing.T) {
	d := &fakeDriver{delay: 10 * time.Millisecond, tokens: 4}
	o, _, stderr := fakeOptions(d, Settings{Levels: []float64{2}, Duration: 600 * time.Millisecond})
	o.ProgressEvery = 200 * time.Millisecond
	if _, code := Run(context.Background(), o); code != ExitPass {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "step 1/1 concurrency 2  0.") || !strings.Contains(lines[0], "s/0.6s  requests ") || !strings.Contains(lines[len(lines)-1], "req/s  TTFT p50 5.000 ms  errors 0") {
		t.Errorf("plain progress lines:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "\r") {
		t.Error("plain progress redraws with \\r")
	}

	o, _, stderr = fakeOptions(d, Settings{Levels: []float64{2}, Duration: 700 * time.Millisecond, Warmup: 300 * time.Millisecond})
	o.Live = true
	if _, code := Run(context.Background(), o); code != ExitPass {
		t.Fatalf("exit %d", code)
	}
	out := stderr.String()
	redraws := strings.Count(out, "\r")
	// 1 s at 4 redraws per second, plus the final blanking.
	if redraws < 3 || redraws > 7 || !strings.Contains(out, "warming up") || !strings.Contains(out, "TTFT p50") || !strings.Contains(out, "█") || !strings.Contains(out, "%") || strings.Contains(out, "\n") {
		t.Errorf("live progress (%d redraws): %q", redraws, out)
	}
}

// Ctrl-C stops sending, waits InterruptDrain for in-flight requests, then
// cancels them: they are counted as cancelled, not as timeouts.
func TestInterruptCancelsAfterDrain(t *testing.T) {
	o, stdout, stderr := fakeOptions(&fakeDriver{delay: time.Hour, tokens: 4}, Settings{Levels: []float64{2, 4}, Duration: time.Minute})
	o.InterruptDrain = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	rep, code := Run(ctx, o)
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want %d", code, ExitInterrupted)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("interrupt took %s", took)
	}
	if len(rep.Steps) != 1 || !rep.Interrupted || !rep.Steps[0].Interrupted {
		t.Fatalf("steps %d interrupted %v", len(rep.Steps), rep.Interrupted)
	}
	s := rep.Steps[0]
	if s.CancelledRequests != 2 || s.Requests != 0 {
		t.Errorf("cancelled %d requests %d, want 2 and 0", s.CancelledRequests, s.Requests)
	}
	if !strings.Contains(stdout.String(), "INTERRUPTED") || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupt not reported:\n%s\n%s", stdout, stderr)
	}
}

// Requests in flight at Ctrl-C that end within the drain time are measured.
func TestInterruptDrainsInFlight(t *testing.T) {
	o, stdout, _ := fakeOptions(&fakeDriver{delay: 300 * time.Millisecond, tokens: 4}, Settings{Levels: []float64{2}, Duration: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(450*time.Millisecond, cancel)
	rep, code := Run(ctx, o)
	if code != ExitInterrupted {
		t.Fatalf("exit %d", code)
	}
	s := rep.Steps[0]
	if s.Requests != 4 || s.Successes != 4 || s.CancelledRequests != 0 {
		t.Errorf("requests %d successes %d cancelled %d, want 4, 4, 0\n%s", s.Requests, s.Successes, s.CancelledRequests, stdout)
	}
	if !strings.Contains(stdout.String(), "2 (partial)") {
		t.Errorf("summary does not mark the partial step:\n%s", stdout)
	}
}

func TestThresholdExitCodes(t *testing.T) {
	for _, tc := range []struct {
		th   string
		code int
		mark string
	}{
		{"ttft_p95<1s", ExitPass, "✓ ttft_p95<1s"},
		{"ttft_p50<1ms", ExitFail, "✗ ttft_p50<1ms"},
		{"error_rate<1%", ExitPass, "✓ error_rate<1%"},
	} {
		th, err := ParseThreshold(tc.th)
		if err != nil {
			t.Fatal(err)
		}
		o, stdout, _ := fakeOptions(&fakeDriver{delay: 10 * time.Millisecond, tokens: 2}, Settings{Levels: []float64{1}, Requests: 3, Thresholds: []Threshold{th}})
		rep, code := Run(context.Background(), o)
		if code != tc.code || !strings.Contains(stdout.String(), tc.mark) {
			t.Errorf("%s: exit %d, want %d; stdout:\n%s", tc.th, code, tc.code, stdout)
		}
		if rep.Passed != (tc.code == ExitPass) {
			t.Errorf("%s: passed %v", tc.th, rep.Passed)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Mode: "x", Levels: []float64{1}, Duration: time.Second}, "want concurrency, rate or trace"},
		{Settings{Mode: ModeConcurrency, Duration: time.Second}, "no levels"},
		{Settings{Mode: ModeConcurrency, Levels: []float64{1}, Duration: time.Second, Poisson: true}, "use it with --rate"},
		{Settings{Mode: ModeConcurrency, Levels: []float64{1}}, "--duration must be positive"},
		{Settings{Mode: ModeConcurrency, Levels: []float64{1}, Requests: -1}, "--requests"},
		{Settings{Mode: ModeConcurrency, Levels: []float64{1}, Duration: time.Second, Warmup: -1}, "--warmup"},
		{Settings{Mode: ModeConcurrency, Levels: []float64{1}, Duration: time.Second, Stability: 0.1, MaxWindows: 2}, "at least 3"},
		{Settings{Mode: ModeRate, Levels: []float64{1}, Duration: time.Second}, "--max-in-flight"},
	} {
		err := tc.s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
		o, _, stderr := fakeOptions(&fakeDriver{}, tc.s)
		o.Settings = tc.s
		if _, code := Run(context.Background(), o); code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%+v: exit %d, stderr %q", tc.s, code, stderr)
		}
	}
}

func TestBar(t *testing.T) {
	for _, c := range []struct {
		done float64
		want string
	}{
		{0, "[░░░░░░░░░░░░░░░░░░░░]   0%"},
		{0.5, "[██████████░░░░░░░░░░]  50%"},
		{1.7, "[████████████████████] 100%"},
		{-1, "[░░░░░░░░░░░░░░░░░░░░]   0%"},
	} {
		if got := bar(c.done); got != c.want {
			t.Errorf("bar(%g) = %q, want %q", c.done, got, c.want)
		}
	}
}
