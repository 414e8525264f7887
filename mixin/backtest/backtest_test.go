package backtest

import (
	"maps"
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

// TestFleetCell: a fleet scenario's case is one of Siblings targets of one
// module of its own, the fault on the case's target only, each target with
// its own seed.
func TestFleetCell(t *testing.T) {
	sc, ok := ScenarioByName("fleet-outlier")
	if !ok {
		t.Fatal("no fleet-outlier scenario")
	}
	rs, err := LoadRules("testdata/equivalence-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	c := Cell{Scenario: sc, Rates: []time.Duration{30 * time.Second, time.Minute}, Seeds: 1}
	w, cases := c.world(rs, DefaultServer(), nil, "w", 1, []float64{0.99})
	if len(cases) != 2 || len(w.Probes) != 2*sc.Siblings {
		t.Fatalf("%d cases, %d probes; want 2 cases of %d targets", len(cases), len(w.Probes), sc.Siblings)
	}
	seeds := map[uint64]bool{}
	for _, cs := range cases {
		if len(cs.Siblings) != sc.Siblings-1 || slices.Contains(cs.Siblings, cs.Target) {
			t.Errorf("case %s: siblings %v", cs.Target, cs.Siblings)
		}
		for _, p := range w.Probes {
			mine := p.Target == cs.Target || slices.Contains(cs.Siblings, p.Target)
			if mine != (p.Module == cs.Target) {
				t.Errorf("probe of %s has module %q (case %s)", p.Target, p.Module, cs.Target)
			}
			if mine && (len(p.Faults) > 0) != (p.Target == cs.Target) {
				t.Errorf("probe of %s: faults %v, want them on %s only", p.Target, p.Faults, cs.Target)
			}
		}
	}
	for _, p := range w.Probes {
		seeds[p.Seed] = true
	}
	if len(seeds) != len(w.Probes) {
		t.Errorf("%d seeds for %d probes", len(seeds), len(w.Probes))
	}
	// Scenarios without siblings keep one target per case, no module.
	hd, _ := ScenarioByName("hard-down")
	w, cases = Cell{Scenario: hd, Rates: []time.Duration{time.Minute}, Seeds: 1}.world(rs, DefaultServer(), nil, "w", 1, []float64{0.99})
	if len(w.Probes) != 1 || w.Probes[0].Module != "" || cases[0].Siblings != nil {
		t.Errorf("hard-down: %+v, %+v", w.Probes, cases)
	}
}

// TestFleetTargets checks the fleet targets on made-up results: only
// LLMProbeFleetOutlier counts, on the case for detection and resolution
// and on the siblings for false alerts.
func TestFleetTargets(t *testing.T) {
	m := time.Minute
	ep := func(alert, target string, fired, resolved time.Duration, open bool) Episode {
		return Episode{Alert: alert, Severity: SeverityTicket, Target: target, Fired: fired, Resolved: resolved, Open: open}
	}
	check := func(scenario string, r CaseResult) map[string]bool {
		r.Scenario = scenario
		out := map[string]bool{}
		for _, v := range Check([]CaseResult{r}) {
			out[v.Target[:strings.Index(v.Target, " ")+1]+strings.Fields(v.Target)[1]] = v.Met
		}
		return out
	}
	base := CaseResult{Case: Case{Interval: 30 * time.Second, Target: "a", Siblings: []string{"b", "c"}}, RunEnd: 3 * time.Hour}
	fleet, _ := ScenarioByName("fleet-outlier")
	rec := fleet.Recover

	r := base
	r.Episodes = []Episode{
		ep("LLMProbeSLOErrorBudgetBurnFast", "a", 5*m, rec+2*m, false),
		ep(FleetOutlierAlert, "a", 21*m, rec+10*m, false),
	}
	r.SiblingEpisodes = []Episode{ep("LLMProbeSLOErrorBudgetBurnSlow", "b", 30*m, 40*m, false)}
	got := check("fleet-outlier", r)
	want := map[string]bool{"LLMProbeFleetOutlier ≤": true, "LLMProbeFleetOutlier resolved": true, "no LLMProbeFleetOutlier": true}
	if !maps.Equal(got, want) {
		t.Errorf("in time, other alerts elsewhere: %v, want %v", got, want)
	}

	r = base
	r.Episodes = []Episode{
		ep("LLMProbeSLOErrorBudgetBurnFast", "a", 5*m, rec, false),
		ep(FleetOutlierAlert, "a", 23*m, rec+12*m, false),
	}
	r.SiblingEpisodes = []Episode{ep(FleetOutlierAlert, "c", time.Hour, time.Hour+m, false)}
	got = check("fleet-outlier", r)
	want = map[string]bool{"LLMProbeFleetOutlier ≤": false, "LLMProbeFleetOutlier resolved": false, "no LLMProbeFleetOutlier": false}
	if !maps.Equal(got, want) {
		t.Errorf("late, on a sibling: %v, want %v", got, want)
	}

	r = base
	r.Episodes = []Episode{ep(FleetOutlierAlert, "a", 11*m, 3*time.Hour, true)}
	if got := check("fleet-outlier", r); got["LLMProbeFleetOutlier resolved"] {
		t.Error("an episode still firing at the end counts as resolved")
	}
	r = base
	if got := check("fleet-outlier", r); got["LLMProbeFleetOutlier ≤"] {
		t.Error("no LLMProbeFleetOutlier at all meets the detection target")
	}

	// The healthy fleet: a firing on the case's own target counts too.
	r = base
	r.RunEnd = 24 * time.Hour
	r.Episodes = []Episode{ep(FleetOutlierAlert, "a", 5*time.Hour, 5*time.Hour+m, false)}
	if got := check("fleet-healthy", r); got["no LLMProbeFleetOutlier"] {
		t.Error("fleet-healthy: a false ticket on the case's target is missed")
	}
	r.Episodes = []Episode{ep("LLMProbeSLOErrorBudgetBurnSlow", "a", 5*time.Hour, 5*time.Hour+m, false)}
	if got := check("fleet-healthy", r); !got["no LLMProbeFleetOutlier"] {
		t.Error("fleet-healthy: another alert counted as LLMProbeFleetOutlier")
	}
}

func TestFleetBounds(t *testing.T) {
	if got := FleetOutlierBound(30 * time.Second); got != 22*time.Minute {
		t.Errorf("FleetOutlierBound(30s) = %v", got)
	}
	if got := FleetOutlierBound(5 * time.Minute); got != 31*time.Minute {
		t.Errorf("FleetOutlierBound(5m) = %v", got)
	}
	if got := FleetResolveBound(time.Minute); got != 11*time.Minute {
		t.Errorf("FleetResolveBound = %v", got)
	}
}

// TestRunRejectsUnknownAlert: a scenario narrowed to an alert the rules
// do not define would evaluate nothing and meet every "no alert" target.
func TestRunRejectsUnknownAlert(t *testing.T) {
	rs, err := LoadRules("testdata/equivalence-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := ScenarioByName("fleet-healthy")
	_, err = Run(t.Context(), []Cell{{Scenario: sc, Rates: []time.Duration{time.Minute}, Seeds: 1}}, Options{Rules: rs, Server: DefaultServer(), TmpDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), FleetOutlierAlert) {
		t.Errorf("got %v, want an error naming %s", err, FleetOutlierAlert)
	}
}
