package backtest

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSLOForSpendsHalfTheBudget(t *testing.T) {
	srv := DefaultServer()
	for _, o := range Objectives() {
		slo := srv.SLOFor(o)
		ttft, tpot, goodput := srv.BadRatios(slo)
		budget := 1 - o
		if math.Abs(ttft/budget-srv.HealthySpend) > 0.02 {
			t.Errorf("objective %v: TTFT threshold %v spends %.3f of the budget, want %.2f", o, slo.TTFT, ttft/budget, srv.HealthySpend)
		}
		if tpot >= ttft || goodput < ttft || goodput > budget {
			t.Errorf("objective %v: bad ratios ttft %v tpot %v goodput %v, budget %v", o, ttft, tpot, goodput, budget)
		}
	}
}

// TestProbeSimHung follows a probe every 10s against a hung server: the
// request sent times out after 30s, the arrivals meanwhile are skipped,
// and every one of them is bad for every SLO and extends the streak.
func TestProbeSimHung(t *testing.T) {
	srv := DefaultServer()
	spec := &ProbeSpec{Interval: 10 * time.Second, SLO: srv.SLOFor(0.99), Seed: 1,
		Faults: []Fault{{Kind: FaultHung, From: 0, To: time.Hour}}}
	p := newProbeSim(spec, &srv, 0)
	p.start(0, 1) // first arrival at 0
	p.advance(59_999)
	// Arrivals 0 (sent, times out at 30.005), 10, 20, 30 (skipped),
	// 40 (sent, in flight), 50 (skipped).
	if p.scheduled != 6 || p.skipped[0] != 4 || p.requests[p.timeout] != 1 {
		t.Fatalf("scheduled %v skipped %v timeouts %v", p.scheduled, p.skipped, p.requests[p.timeout])
	}
	// The streak starts at the earliest arrival, the timed-out request's.
	if p.consecutive != 5 || p.failingAt != 0 {
		t.Errorf("streak %v since %v, want 5 since 0", p.consecutive, p.failingAt)
	}
	for i, s := range p.slo {
		if s[0] != 0 || s[1] != 5 {
			t.Errorf("slo %s: good %v bad %v, want 0, 5", sloNames[i], s[0], s[1])
		}
	}
	if p.success != 0 || p.lastRun != 0 || !p.ran {
		t.Errorf("success %v last run %v ran %v", p.success, p.lastRun, p.ran)
	}
}

// TestProbeSimRecovers: a success after a streak resets it.
func TestProbeSimRecovers(t *testing.T) {
	srv := DefaultServer()
	spec := &ProbeSpec{Interval: time.Minute, SLO: srv.SLOFor(0.99), Seed: 1,
		Faults: []Fault{{Kind: FaultDown, From: 0, To: 150 * time.Second}}}
	p := newProbeSim(spec, &srv, 0)
	p.start(1, 1)
	p.advance(121_000)
	if p.consecutive != 3 || p.failingAt != 0.001 || p.requests[p.connErr] != 3 {
		t.Fatalf("streak %v since %v, connect errors %v", p.consecutive, p.failingAt, p.requests[p.connErr])
	}
	p.advance(200_000)
	if p.consecutive != 0 || p.failingAt != 0 || p.success != 1 || p.lastRun != 180.001 || p.ttftCount != 1 {
		t.Errorf("after recovery: streak %v since %v success %v last run %v ttft count %v",
			p.consecutive, p.failingAt, p.success, p.lastRun, p.ttftCount)
	}
}

func TestFormatLe(t *testing.T) {
	for in, want := range map[float64]string{1: "1.0", 0.25: "0.25", 10: "10.0", 0.687: "0.687", math.Inf(1): "+Inf"} {
		if got := formatLe(in); got != want {
			t.Errorf("formatLe(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRulesAnalysis(t *testing.T) {
	rs, err := LoadRules("testdata/equivalence-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rs.GroupOrder, " "); got != "test.rules test.alerts" {
		t.Errorf("group order %s", got)
	}
	var names []string
	for _, i := range rs.PageClosure() {
		names = append(names, rs.Rules[i].Record+rs.Rules[i].Alert)
	}
	want := []string{"target:bad:rate5m", "target:bad:max10m", "TestBad", "TestStreak", "TestAbsent", "TestHold"}
	if !slices.Equal(names, want) {
		t.Errorf("page closure %v, want %v", names, want)
	}
	n, err := rs.needsOf(nil, rawNames())
	if err != nil {
		t.Fatal(err)
	}
	// up is read by avg_over_time(up[5m:1m]): 5 min of subquery plus the
	// lookback of its inner selector.
	if got := n.raw[mUp]; !slices.Contains(got, window{10 * time.Minute, 0}) {
		t.Errorf("up read in %v", got)
	}
	// for: 2m plus keep_firing_for: 3m against a 10m range over a
	// recorded series.
	if n.evalLead != 10*time.Minute {
		t.Errorf("eval lead %v, want 10m", n.evalLead)
	}
	// TestHold, the last rule, reads its own ALERTS.
	last := len(rs.Rules) - 1
	if got := rs.feedbackSpans(rs.keptOrder(nil)); !slices.Equal(got, [][2]int{{last, last}}) {
		t.Errorf("feedback spans %v, want [[%d %d]]", got, last, last)
	}
	if _, ok := n.raw[mSuccess]; ok {
		t.Error("llm_probe_success is read by no rule")
	}
}

func TestTargetBounds(t *testing.T) {
	for iv, want := range map[time.Duration]time.Duration{
		10 * time.Second: 3 * time.Minute, time.Minute: 4 * time.Minute, 5 * time.Minute: 12 * time.Minute,
	} {
		if got := OutageBound(iv); got != want {
			t.Errorf("OutageBound(%v) = %v, want %v", iv, got, want)
		}
	}
	if ResolveBound(2*time.Minute) != 5*time.Minute || ResolveBound(5*time.Minute) != 6*time.Minute {
		t.Error("ResolveBound")
	}
}

func TestReplaceRegion(t *testing.T) {
	doc := "# A\n\nprose\n" + BeginMarker + "\nold\n" + EndMarker + "\nmore prose\n"
	got, err := replaceRegion(doc, "| new |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# A\n\nprose\n" + BeginMarker + "\n| new |\n" + EndMarker + "\nmore prose\n"
	if got != want {
		t.Errorf("got %q", got)
	}
	if _, err := replaceRegion("no markers", "x"); err == nil {
		t.Error("no error without markers")
	}
}
