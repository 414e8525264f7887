package bench

import (
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// earlyStep is a step whose requests and in-flight counts are made up: at
// request i (every 100 ms of send time) TTFT is ttft(i) and inflight(i)
// requests are open, and the step is judged after each, as the controller
// does every earlyCheckEvery. It returns the first verdict, or "".
func earlyStep(mode Mode, slo SLO, n int, ttft func(i int) time.Duration, inflight func(i int) int) string {
	measure := time.Unix(1_000_000, 0)
	s := &stepRun{
		o:       &Options{Settings: Settings{SLO: slo}},
		step:    &Step{Mode: mode},
		measure: measure,
		windows: []*window{{}},
	}
	for i := range n {
		at := measure.Add(time.Duration(i) * 100 * time.Millisecond)
		s.windows[0].records = append(s.windows[0].records, &record{sample: &sample{
			start: at, ttft: ttft(i), endToEnd: ttft(i) + time.Second, outcome: probe.OutcomeSuccess,
		}})
		s.inflight = inflight(i)
		if v := s.earlyStop(at.Add(50 * time.Millisecond)); v != "" {
			return v
		}
	}
	return ""
}

// The over-saturation verdict of a capacity-search step, on made-up
// steps whose answer is known: past the knee (TTFT and requests in
// flight climbing together) it stops, and only there.
func TestEarlyStopOversaturation(t *testing.T) {
	climbing := func(i int) time.Duration { return 50*time.Millisecond + time.Duration(i)*20*time.Millisecond }
	queueing := func(i int) int { return 2 + i/2 }
	// A stable step: TTFT and in flight wobble around a level.
	wobble := func(i int) time.Duration { return 50*time.Millisecond + time.Duration(i%3)*5*time.Millisecond }
	steady := func(i int) int { return 3 + i%2 }

	if got := earlyStep(ModeRate, SLO{}, 60, climbing, queueing); got != StoppedOversaturated {
		t.Errorf("TTFT and in flight climbing at a fixed rate: %q, want %q", got, StoppedOversaturated)
	}
	if got := earlyStep(ModeRate, SLO{}, 200, wobble, steady); got != "" {
		t.Errorf("a stable step stopped: %q", got)
	}
	// Both signals must rise: a TTFT trend with a flat queue is a slower
	// server, not a backlog.
	if got := earlyStep(ModeRate, SLO{}, 200, climbing, steady); got != "" {
		t.Errorf("TTFT rising with in flight flat stopped the step: %q", got)
	}
	// A closed loop bounds its own queue: it cannot over-saturate.
	if got := earlyStep(ModeConcurrency, SLO{}, 200, climbing, queueing); got != "" {
		t.Errorf("a closed-loop step stopped as over-saturated: %q", got)
	}
	// Before earlyMinRequests nothing is judged.
	if got := earlyStep(ModeRate, SLO{}, earlyMinRequests-1, climbing, queueing); got != "" {
		t.Errorf("stopped on %d requests: %q", earlyMinRequests-1, got)
	}
}

func TestEarlyStopGoodput(t *testing.T) {
	slo := SLO{TTFT: 0.1}
	slow := func(int) time.Duration { return 300 * time.Millisecond }
	fast := func(int) time.Duration { return 30 * time.Millisecond }
	steady := func(int) int { return 3 }
	if got := earlyStep(ModeConcurrency, slo, 100, slow, steady); got != StoppedGoodput {
		t.Errorf("every request over the TTFT bound: %q, want %q", got, StoppedGoodput)
	}
	if got := earlyStep(ModeConcurrency, slo, 200, fast, steady); got != "" {
		t.Errorf("every request within the bound: %q", got)
	}
}
