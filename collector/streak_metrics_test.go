package collector

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// gaugesOf is the value of every series of the gauge families names, by
// name and probe, from one scrape.
func gaugesOf(t *testing.T, reg prometheus.Gatherer, names ...string) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]map[string]float64{}
	for _, name := range names {
		out[name] = map[string]float64{}
	}
	for _, mf := range mfs {
		byProbe, ok := out[mf.GetName()]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "probe" {
					byProbe[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// gauges is the value of every series of the gauge family name, by probe.
func gauges(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	return gaugesOf(t, reg, name)[name]
}

func resultAt(o probe.Outcome, start time.Time) *probe.Result {
	return &probe.Result{Start: start, EndToEnd: 10 * time.Millisecond, Outcome: o}
}

// TestFailureStreak walks one probe through a streak: failures and the
// skips of a held server extend it, overdue skips do not, success and
// wrong answers end it, and since is the streak's first arrival.
func TestFailureStreak(t *testing.T) {
	m := NewProbeMetrics()
	now := testStart
	m.now = func() time.Time { return now }
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	reg := newTestRegistry(t, m)
	at := func(s int) time.Time { return testStart.Add(time.Duration(s) * time.Second) }
	unix := func(s int) float64 { return float64(at(s).Unix()) }

	for _, step := range []struct {
		what      string
		do        func()
		count     float64
		sinceUnix float64
	}{
		{"created", func() {}, 0, 0},
		{"success", func() { m.Observe("sim", "p", resultAt(probe.OutcomeSuccess, at(0))) }, 0, 0},
		{"timeout starts the streak", func() { m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, at(15))) }, 1, unix(15)},
		{"concurrency_limit skip", func() { now = at(30); m.Skipped("sim", "p", SkipReasonConcurrencyLimit) }, 2, unix(15)},
		{"overdue skip does not count", func() { now = at(45); m.Skipped("sim", "p", SkipReasonOverdue) }, 2, unix(15)},
		{"other skip does not count", func() { m.Skipped("sim", "p", "something_else") }, 2, unix(15)},
		{"target_concurrency_limit skip", func() { now = at(60); m.Skipped("sim", "p", SkipReasonTargetConcurrencyLimit) }, 3, unix(15)},
		{"5xx", func() { m.Observe("sim", "p", resultAt(probe.OutcomeHTTP5xx, at(75))) }, 4, unix(15)},
		{"wrong answer ends it", func() { m.Observe("sim", "p", resultAt(probe.OutcomeWrongAnswer, at(90))) }, 0, 0},
		{"skip starts a new one at the skip", func() { now = at(105); m.Skipped("sim", "p", SkipReasonConcurrencyLimit) }, 1, unix(105)},
		// The request held since 100 s times out after the skip it
		// caused: the streak started with it.
		{"an earlier arrival observed later", func() { m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, at(100))) }, 2, unix(100)},
		{"success ends it", func() { m.Observe("sim", "p", resultAt(probe.OutcomeSuccess, at(120))) }, 0, 0},
		{"connect error", func() { m.Observe("sim", "p", resultAt(probe.OutcomeConnectError, at(135))) }, 1, unix(135)},
	} {
		step.do()
		count := gauges(t, reg, "llm_probe_consecutive_failures")["p"]
		since := gauges(t, reg, "llm_probe_failing_since_timestamp_seconds")["p"]
		if count != step.count || since != step.sinceUnix {
			t.Errorf("%s: consecutive_failures %v, failing_since %v; want %v, %v", step.what, count, since, step.count, step.sinceUnix)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// Every outcome but success, wrong_answer and cancelled is a failure;
// success and wrong_answer end a streak; cancelled neither extends nor
// ends one.
func TestFailureStreakOutcomes(t *testing.T) {
	for _, o := range probe.Outcomes() {
		m := NewProbeMetrics()
		m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
		reg := newTestRegistry(t, m)
		m.Observe("sim", "p", resultAt(o, testStart))
		want := 1.0
		if o == probe.OutcomeSuccess || o == probe.OutcomeWrongAnswer || o == probe.OutcomeCancelled {
			want = 0
		}
		if got := gauges(t, reg, "llm_probe_consecutive_failures")["p"]; got != want {
			t.Errorf("%s: consecutive_failures %v, want %v", o, got, want)
		}
		// On top of a streak of two.
		m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, testStart.Add(time.Second)))
		m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, testStart.Add(2*time.Second)))
		before := gauges(t, reg, "llm_probe_failing_since_timestamp_seconds")["p"]
		m.Observe("sim", "p", resultAt(o, testStart.Add(3*time.Second)))
		count := gauges(t, reg, "llm_probe_consecutive_failures")["p"]
		since := gauges(t, reg, "llm_probe_failing_since_timestamp_seconds")["p"]
		switch o {
		case probe.OutcomeSuccess, probe.OutcomeWrongAnswer:
			if count != 0 || since != 0 {
				t.Errorf("%s after a streak of 2: %v since %v, want it ended", o, count, since)
			}
		case probe.OutcomeCancelled:
			if count != 2+want || since != before {
				t.Errorf("cancelled after a streak: %v since %v, want it unchanged (%v since %v)", count, since, 2+want, before)
			}
		default:
			if count != 2+want+1 || since != before {
				t.Errorf("%s after a streak: %v since %v, want %v since %v", o, count, since, 2+want+1, before)
			}
		}
	}
}

// The streak series exist from the probe's creation, at 0, and go with
// the probe; results of unknown probes are dropped.
func TestFailureStreakLifecycle(t *testing.T) {
	m := NewProbeMetrics()
	reg := newTestRegistry(t, m)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	m.Skipped("sim", "nope", SkipReasonConcurrencyLimit)
	for _, name := range []string{"llm_probe_consecutive_failures", "llm_probe_failing_since_timestamp_seconds"} {
		if g := gauges(t, reg, name); len(g) != 1 || g["p"] != 0 {
			t.Errorf("%s before any run: %v, want p at 0", name, g)
		}
	}
	m.Remove("sim", "p")
	if n, err := testutil.GatherAndCount(reg, "llm_probe_consecutive_failures", "llm_probe_failing_since_timestamp_seconds"); err != nil || n != 0 {
		t.Errorf("%d streak series after Remove (%v)", n, err)
	}
}

// Skips of a held server are bad for every declared SLO; overdue skips
// are judged against none; a probe without SLOs gets no SLO series.
func TestSkipsCountAsSLOBad(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "full", Model: "m", SLO: testSLO})
	m.Add(ProbeSeries{Target: "sim", Probe: "avail", Model: "m", SLO: SLO{Objective: 0.99}})
	m.Add(ProbeSeries{Target: "sim", Probe: "plain", Model: "m"})
	reg := newTestRegistry(t, m)
	for _, p := range []string{"full", "avail", "plain"} {
		m.Skipped("sim", p, SkipReasonConcurrencyLimit)
		m.Skipped("sim", p, SkipReasonTargetConcurrencyLimit)
		m.Skipped("sim", p, SkipReasonOverdue)
		m.Skipped("sim", p, "other")
	}
	m.Observe("sim", "full", streamedSuccess())

	const expected = `
# HELP llm_probe_slo_requests_total Probe requests judged against each SLO the probe declares; failed requests, and arrivals skipped because the probe's or its target's max_in_flight was reached, are bad for every SLO; cancelled requests are not judged.
# TYPE llm_probe_slo_requests_total counter
llm_probe_slo_requests_total{model="m",probe="avail",result="bad",slo="goodput",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="avail",result="good",slo="goodput",target="sim"} 0
llm_probe_slo_requests_total{model="m",probe="full",result="bad",slo="goodput",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="full",result="bad",slo="tpot",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="full",result="bad",slo="ttft",target="sim"} 2
llm_probe_slo_requests_total{model="m",probe="full",result="good",slo="goodput",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="full",result="good",slo="tpot",target="sim"} 1
llm_probe_slo_requests_total{model="m",probe="full",result="good",slo="ttft",target="sim"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "llm_probe_slo_requests_total"); err != nil {
		t.Error(err)
	}
}

// The planned interval is exported only when the schedule plans one, and
// a reload that changes only it keeps the probe's other series.
func TestPlannedIntervalSeries(t *testing.T) {
	m := NewProbeMetrics()
	reg := newTestRegistry(t, m)
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", PlannedInterval: 15 * time.Second})
	m.Add(ProbeSeries{Target: "sim", Probe: "loop", Model: "m"})
	if got := gauges(t, reg, "llm_probe_planned_interval_seconds"); len(got) != 1 || got["p"] != 15 {
		t.Fatalf("planned intervals %v, want p at 15 only", got)
	}
	m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, testStart))

	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", PlannedInterval: 90 * time.Second})
	if got := gauges(t, reg, "llm_probe_planned_interval_seconds")["p"]; got != 90 {
		t.Errorf("planned interval after the schedule changed: %v, want 90", got)
	}
	if got := gauges(t, reg, "llm_probe_consecutive_failures")["p"]; got != 1 {
		t.Errorf("consecutive_failures %v after a schedule change, want the streak kept (1)", got)
	}
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m"})
	if got := gauges(t, reg, "llm_probe_planned_interval_seconds"); len(got) != 0 {
		t.Errorf("planned intervals %v after the schedule stopped planning one, want none", got)
	}
}

// Scrapes racing with results and skips always see a consistent streak:
// a count with its start, or zero with zero.
func TestFailureStreakConcurrent(t *testing.T) {
	m := NewProbeMetrics()
	m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO, PlannedInterval: time.Second})
	reg := newTestRegistry(t, m)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch (w + i) % 4 {
				case 0:
					m.Observe("sim", "p", resultAt(probe.OutcomeSuccess, testStart))
				case 1:
					m.Observe("sim", "p", resultAt(probe.OutcomeTimeout, testStart))
				case 2:
					m.Skipped("sim", "p", SkipReasonConcurrencyLimit)
				default:
					m.Add(ProbeSeries{Target: "sim", Probe: "p", Model: "m", SLO: testSLO, PlannedInterval: time.Duration(1+i%3) * time.Second})
				}
			}
		})
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		g := gaugesOf(t, reg, "llm_probe_consecutive_failures", "llm_probe_failing_since_timestamp_seconds")
		count, since := g["llm_probe_consecutive_failures"]["p"], g["llm_probe_failing_since_timestamp_seconds"]["p"]
		if (count == 0) != (since == 0) {
			t.Errorf("inconsistent scrape: consecutive_failures %v, failing_since %v", count, since)
			break
		}
	}
	close(stop)
	wg.Wait()
}
