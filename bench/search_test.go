package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// GuideLLM's sweep: a synchronous step, a maximum-throughput step, then
// rates evenly spaced between their throughputs; with an SLO the highest
// sweep rate that met it is the capacity.
func TestQuickSweep(t *testing.T) {
	slo, _ := ParseSLO([]string{"latency<1s"})
	o, stdout, _ := fakeOptions(&fakeDriver{delay: 20 * time.Millisecond, tokens: 2},
		Settings{Mode: ModeRate, QuickSweep: 3, SweepConcurrency: 4, Duration: 500 * time.Millisecond, SLO: slo})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	if len(rep.Steps) != 5 {
		t.Fatalf("%d steps, want 5\n%s", len(rep.Steps), stdout)
	}
	sync, top := rep.Steps[0], rep.Steps[1]
	if sync.Mode != ModeConcurrency || sync.Level != 1 || sync.Phase != "synchronous" || top.Level != 4 || top.Phase != "throughput" {
		t.Errorf("first steps: %s %s, %s %s", sync.Label(), sync.Phase, top.Label(), top.Phase)
	}
	lo, hi := sync.RequestsPerSecond, top.RequestsPerSecond
	for i, s := range rep.Steps[2:] {
		want := lo + (hi-lo)*float64(i+1)/4
		if s.Mode != ModeRate || s.Phase != "sweep" || math.Abs(s.Level-want) > 1e-6*want {
			t.Errorf("sweep step %d: %s (%s), want rate %g", i+1, s.Label(), s.Phase, want)
		}
	}
	c := rep.Capacity
	if c == nil || c.Method != "quick_sweep" || c.Capacity != rep.Steps[4].Level {
		t.Errorf("capacity %+v, want the highest sweep rate %g", c, rep.Steps[4].Level)
	}
	if !strings.Contains(stdout.String(), "Step 3/5: rate") || !strings.Contains(stdout.String(), "— sweep") {
		t.Errorf("step titles:\n%s", stdout)
	}
}

func TestCapacityTrialsMedianAndSpread(t *testing.T) {
	r := &CapacityResult{Trials: []TrialResult{
		{Capacity: 10, Upper: new(11.0)}, {Capacity: 12, Upper: new(13.0)}, {Capacity: 11, Upper: new(12.0)},
	}, MinCapacity: 11.5}
	r.summarise()
	if r.Capacity != 11 || r.Lower != 10 || r.Upper == nil || *r.Upper != 13 || math.Abs(r.Spread-2.0/11) > 1e-12 {
		t.Errorf("%+v", r)
	}
	if r.Passed {
		t.Error("capacity 11 passed --min-capacity 11.5")
	}
	r = &CapacityResult{Trials: []TrialResult{{Capacity: 10}, {Capacity: 14, Upper: new(15.0)}}}
	r.summarise()
	if r.Capacity != 12 || r.Upper != nil || !r.Passed {
		t.Errorf("%+v: want median 12, no upper bound (a trial reached the ceiling)", r)
	}
}

func TestBracket(t *testing.T) {
	b := bracket{lo: 10, hi: 10.4}
	if !b.narrow(ModeRate, 0.05) || (bracket{lo: 10, hi: 11}).narrow(ModeRate, 0.05) {
		t.Error("rate precision")
	}
	if !(bracket{lo: 7, hi: 8}).narrow(ModeConcurrency, 0.05) || (bracket{lo: 6, hi: 8}).narrow(ModeConcurrency, 0.05) {
		t.Error("concurrency brackets narrow to adjacent numbers")
	}
	if m := (bracket{lo: 6, hi: 9}).mid(ModeConcurrency); m != 7 {
		t.Errorf("mid %g", m)
	}
	if m := (bracket{lo: 13, hi: 13.796875}).mid(ModeRate); m != 13.4 {
		t.Errorf("mid %g, want 13.4", m)
	}
	if m := (bracket{lo: 10, hi: 10.02}).mid(ModeRate); m != 10.01 {
		t.Errorf("mid %g, want 10.01", m)
	}
	if (bracket{hi: math.Inf(1)}).narrow(ModeRate, 0.5) {
		t.Error("an open bracket is not narrow")
	}
}

func TestSlopeAndWilson(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5}
	if b, tt := slope(xs, []float64{1, 3, 5, 7, 9, 11}); b != 2 || !math.IsInf(tt, 1) {
		t.Errorf("perfect line: slope %g t %g", b, tt)
	}
	if _, tt := slope(xs, []float64{5, 4, 6, 5, 4, 6}); math.Abs(tt) > 2 {
		t.Errorf("flat noise: t %g", tt)
	}
	if lo := wilsonLower(20, 20, 4); lo < 0.5 || lo > 0.6 {
		t.Errorf("20 of 20: lower bound %g", lo)
	}
	if lo := wilsonLower(1, 10, 4); lo > 0.01 {
		t.Errorf("1 of 10 at 4 sigmas: lower bound %g, want below 1%%", lo)
	}
}

// --capacity trace searches the replay speed: every speed passes against
// a fast server, so the search climbs to its ceiling and says so.
func TestCapacitySearchOverTraceSpeed(t *testing.T) {
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 3, "output_length": 2}`+"\n", i*40)
	}
	tr, err := ParseTrace(strings.NewReader(b.String()), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	slo, _ := ParseSLO([]string{"latency<1s"})
	o, stdout, _ := fakeOptions(&fakeDriver{delay: 5 * time.Millisecond, tokens: 2},
		Settings{Mode: ModeTrace, Trace: tr, SLO: slo, Search: &Search{Start: 1, Min: 0.5, Max: 4, Precision: 0.05, Trials: 1}})
	rep, code := Run(context.Background(), o)
	if code != ExitPass {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	var speeds []float64
	for _, s := range rep.Steps {
		speeds = append(speeds, s.Level)
		if s.Requests != 30 {
			t.Errorf("%s: %d requests, want the whole trace of 30", s.Label(), s.Requests)
		}
	}
	if !slices.Equal(speeds, []float64{1, 2, 4}) || rep.Capacity.Capacity != 4 || rep.Capacity.Upper != nil {
		t.Errorf("speeds %v, capacity %+v", speeds, rep.Capacity)
	}
	if !strings.Contains(stdout.String(), "≥ trace ×4: every level up to the highest tried met it") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// A budget shorter than one step: nothing is sent, and the message says
// what to change.
func TestCapacitySearchBudgetTooShort(t *testing.T) {
	slo, _ := ParseSLO([]string{"ttft<1s"})
	o, stdout, stderr := fakeOptions(&fakeDriver{delay: time.Millisecond, tokens: 2},
		Settings{Mode: ModeRate, SLO: slo, Duration: time.Second, Search: &Search{Start: 1, Min: 1, Max: 8, Precision: 0.05, Trials: 1, Budget: time.Millisecond}})
	rep, code := Run(context.Background(), o)
	if code != ExitFail || len(rep.Steps) != 0 || !rep.Capacity.BudgetExhausted {
		t.Fatalf("exit %d, %d steps\n%s", code, len(rep.Steps), stdout)
	}
	if !strings.Contains(stderr.String(), "--budget 1ms ended the search after 0 steps, before any level met the objective") {
		t.Errorf("stderr: %s", stderr)
	}
}

// A sweep whose maximum-throughput step is no faster than the
// synchronous one (here: every request fails) has no rates to sweep; it
// says so and fails rather than exiting 0 after two steps.
func TestQuickSweepWithoutRange(t *testing.T) {
	o, stdout, stderr := fakeOptions(&fakeDriver{delay: time.Millisecond, tokens: 2, fail: func() bool { return true }},
		Settings{Mode: ModeRate, QuickSweep: 3, SweepConcurrency: 4, Duration: 300 * time.Millisecond})
	rep, code := Run(context.Background(), o)
	if code != ExitFail || len(rep.Steps) != 2 {
		t.Fatalf("exit %d after %d steps\n%s", code, len(rep.Steps), stdout)
	}
	if !strings.Contains(stderr.String(), "no rates between them to sweep") {
		t.Errorf("stderr: %s", stderr)
	}
}
