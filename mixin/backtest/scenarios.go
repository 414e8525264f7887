package backtest

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rates are the probe intervals of the matrix: 1/10 s to 1/5 min.
func Rates() []time.Duration {
	return []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute}
}

// Objectives are the SLO objectives of the matrix.
func Objectives() []float64 { return []float64{0.95, 0.99, 0.999} }

// Scenario is one thing that happens to a probe (or to the prober) in a
// healthy background, at time 0 of its run. Every scenario runs at every
// rate; SLO scenarios at every objective, the others at 0.99.
type Scenario struct {
	Name, Title string
	// SLO: the scenario is about latency, so it runs at every objective.
	SLO bool
	// End of the run, after time 0.
	End time.Duration
	// Recover: the incident ends then (resolution is measured from it).
	Recover time.Duration
	// Remove: the probe is removed by a reload then (resolution is
	// measured from it).
	Remove time.Duration
	// New: the probe is created at time 0.
	New bool
	// Restarts and Vanish are the prober's (see World).
	Restarts []time.Duration
	Vanish   []Span
	// Healthy: nothing goes wrong; every alert is false (counted per 30
	// days).
	Healthy bool
	// PagesOnly: evaluate only page alerts and what they depend on.
	PagesOnly bool
	// Alerts: evaluate only these alerts and what they depend on (the
	// one alert a scenario is about, when others would only cost).
	Alerts []string
	// Probes on the case's target (default 1), all alike: a server
	// probed several ways.
	Probes int
	// Siblings: the case's target is one of this many endpoints that one
	// module's fleet discovery made (llm_prober_discovered_target_info),
	// each its own target with the same probes, the others healthy; what
	// fires on them is the case's SiblingEpisodes. 0 or 1: a configured
	// target, no discovery.
	Siblings int
	// Faults of the probe under srv and slo (the case's target only).
	Faults func(srv Server, slo SLO) []Fault
}

// Scenarios returns every scenario of the matrix.
func Scenarios() []Scenario {
	h := time.Hour
	m := time.Minute
	return []Scenario{
		{Name: "hard-down", Title: "Hard down (connection refused) 1h, then up", End: 2 * h, Recover: h,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultDown, To: h}} }},
		{Name: "hung", Title: "Hung (every request times out, arrivals meanwhile skipped) 1h, then up", End: 2 * h, Recover: h,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultHung, To: h}} }},
		{Name: "ttft-2x", Title: "TTFT regression: the typical request takes 2x the threshold, 2h", SLO: true, End: 3 * h, Recover: 2 * h,
			Faults: func(srv Server, slo SLO) []Fault {
				return []Fault{{Kind: FaultSlow, To: 2 * h, Factor: srv.RegressionFactor(slo, 2)}}
			}},
		{Name: "outlier", Title: "One slow request (10x the threshold)", SLO: true, End: 2 * h,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultOutliers, To: h, Count: 1}} }},
		{Name: "two-slow", Title: "Two slow requests in a row (within a minute at 1/30s and faster)", SLO: true, End: 2 * h,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultOutliers, To: h, Count: 2}} }},
		{Name: "trickle", Title: "Slow trickle: TTFT bad ratio ~3x the budget for a day", SLO: true, End: 26 * h, Recover: 24 * h,
			Faults: func(srv Server, slo SLO) []Fault {
				bad, _, _ := srv.BadRatios(slo)
				p := (3*(1-slo.Objective) - bad) / (1 - bad)
				return []Fault{{Kind: FaultTrickle, To: 24 * h, Prob: p}}
			}},
		{Name: "storm", Title: "Hard down 1h, a target with 5 probes (pages before Alertmanager's grouping and inhibition)", End: 2 * h, Recover: h, Probes: 5,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultDown, To: h}} }},
		{Name: "removed", Title: "Hard down, probe removed by a reload 30m in", End: 90 * m, Remove: 30 * m,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultDown, To: 2 * h}} }},
		{Name: "fleet-outlier", Title: "One of 5 endpoints of a discovered fleet slow (typical TTFT 3x the threshold) 2h, the others healthy; then as fast as they are", End: 3 * h, Recover: 2 * h, Siblings: 5,
			Faults: func(srv Server, slo SLO) []Fault {
				return []Fault{{Kind: FaultSlow, To: 2 * h, Factor: srv.RegressionFactor(slo, 3)}}
			}},
		{Name: "fleet-healthy", Title: "A discovered fleet of 5 healthy endpoints, a day (LLMProbeFleetOutlier only)", End: 24 * h, Siblings: 5, Healthy: true,
			Alerts: []string{FleetOutlierAlert}},
		{Name: "restart", Title: "Prober restart (30s down, counters reset)", End: h, Restarts: []time.Duration{0}},
		{Name: "vanished", Title: "Prober gone from service discovery 30m, then back", End: 90 * m, Recover: 30 * m,
			Vanish: []Span{{0, 30 * m}}},
		{Name: "new-down", Title: "New probe against a dead server (1h), then up", End: 2 * h, Recover: h, New: true,
			Faults: func(Server, SLO) []Fault { return []Fault{{Kind: FaultDown, To: h}} }},
		{Name: "new-healthy", Title: "New probe, healthy, its first day", SLO: true, End: 24 * h, New: true, Healthy: true},
		{Name: "noise-30d", Title: "Healthy server, 30 days", SLO: true, End: 30 * 24 * h, Healthy: true, PagesOnly: true},
	}
}

// ScenarioByName returns the scenario called name.
func ScenarioByName(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios(), func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios()[i], true
}

// Cell is one run of a scenario: rates and objectives, with Seeds worlds
// (random phases of probes and scrapes, random latencies) each.
type Cell struct {
	Scenario   Scenario
	Rates      []time.Duration
	Objectives []float64 // for SLO scenarios; others run at 0.99
	Seeds      int
	// Tickets: evaluate ticket alerts too in PagesOnly scenarios.
	Tickets bool
	// Alerts, when set, replaces the scenario's Alerts: the subset
	// evaluates only the alert its targets are about where the others
	// would cost most of the time.
	Alerts []string
}

// alerts are the alerts the cell evaluates alone, or nil for the
// scenario's default.
func (c Cell) alerts() []string {
	if len(c.Alerts) > 0 {
		return c.Alerts
	}
	return c.Scenario.Alerts
}

// Case is one probe of a run: the unit results are reported per.
type Case struct {
	Scenario  string
	Interval  time.Duration
	Objective float64
	Seed      int
	Target    string
	// Siblings are the other targets of the case's module (Scenario.Siblings).
	Siblings []string
}

func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func objName(o float64) string { return strconv.FormatFloat(o*100, 'f', -1, 64) }

// worlds builds the cell's worlds, one per seed, and their cases.
func (c Cell) worlds(rs *Rules, srv Server) ([]*World, [][]Case) {
	sc := c.Scenario
	objs := []float64{0.99}
	if sc.SLO {
		objs = c.Objectives
	}
	keep := rs.AlertClosure()
	if sc.PagesOnly && !c.Tickets {
		keep = rs.PageClosure()
	}
	if a := c.alerts(); len(a) > 0 {
		keep = rs.AlertsClosure(a)
	}
	// Runs of a week or more take one world per objective, so that they
	// spread over the parallel workers.
	groups := [][]float64{objs}
	if sc.End >= 7*24*time.Hour && len(objs) > 1 && len(sc.Restarts)+len(sc.Vanish) == 0 {
		groups = nil
		for _, o := range objs {
			groups = append(groups, []float64{o})
		}
	}
	var worlds []*World
	var cases [][]Case
	for seed := 1; seed <= c.Seeds; seed++ {
		for _, objs := range groups {
			name := fmt.Sprintf("%s/seed%d", sc.Name, seed)
			if len(groups) > 1 {
				name += "/o" + objName(objs[0])
			}
			w, cs := c.world(rs, srv, keep, name, seed, objs)
			worlds = append(worlds, w)
			cases = append(cases, cs)
		}
	}
	return worlds, cases
}

// world builds one world of the cell: every rate at objectives objs.
func (c Cell) world(rs *Rules, srv Server, keep []int, name string, seed int, objs []float64) (*World, []Case) {
	sc := c.Scenario
	w := &World{
		Name: name, Rules: rs, Keep: keep, Server: srv,
		Restarts: sc.Restarts, Vanish: sc.Vanish, End: sc.End,
		Seed: seedOf(name),
	}
	var cs []Case
	for _, iv := range c.Rates {
		for _, o := range objs {
			slo := srv.SLOFor(o)
			target := fmt.Sprintf("%s-%s-o%s", sc.Name, fmtDur(iv), objName(o))
			one := Case{Scenario: sc.Name, Interval: iv, Objective: o, Seed: seed, Target: target}
			module := ""
			if sc.Siblings > 1 {
				// One module per case: the rules compare the endpoints
				// of a module, and the cases of a world must not mix.
				module = target
				for r := 2; r <= sc.Siblings; r++ {
					one.Siblings = append(one.Siblings, fmt.Sprintf("%s-%d", target, r))
				}
			}
			for _, tg := range append([]string{target}, one.Siblings...) {
				for i := range max(sc.Probes, 1) {
					probe := "chat"
					if sc.Probes > 1 {
						probe = fmt.Sprintf("chat-%d", i+1)
					}
					// Each target its own seed: its own phase and draws.
					spec := ProbeSpec{
						Target: tg, Probe: probe, Model: "llama", Interval: iv, SLO: slo,
						Seed: seedOf(sc.Name, strconv.Itoa(seed), tg, probe),
						New:  sc.New, Removed: sc.Remove > 0, RemovedAt: sc.Remove,
						Module: module,
					}
					if sc.Faults != nil && tg == target {
						spec.Faults = sc.Faults(srv, slo)
					}
					w.Probes = append(w.Probes, spec)
				}
			}
			cs = append(cs, one)
		}
	}
	return w, cs
}

// Options of a matrix run.
type Options struct {
	Rules  *Rules
	Server Server
	// Parallel worlds at once; 0 means GOMAXPROCS.
	Parallel int
	TmpDir   string
	// Log, when set, gets one line per finished world.
	Log func(string)
}

// Report is the outcome of a matrix run.
type Report struct {
	Cells   []Cell
	Results []CaseResult
	Elapsed time.Duration
}

// Run runs every cell's worlds, Parallel at a time.
func Run(ctx context.Context, cells []Cell, o Options) (*Report, error) {
	began := time.Now()
	type job struct {
		w     *World
		sc    Scenario
		cases []Case
	}
	var jobs []job
	for _, c := range cells {
		for _, a := range c.alerts() {
			// Else the scenario would evaluate nothing and see no alert.
			if !slices.ContainsFunc(o.Rules.Rules, func(ri RuleInfo) bool { return ri.Alert == a }) {
				return nil, fmt.Errorf("scenario %s evaluates alert %s, which %s does not define: rename it in the scenario (mixin/backtest/scenarios.go)", c.Scenario.Name, a, o.Rules.Path)
			}
		}
		ws, cs := c.worlds(o.Rules, o.Server)
		for i := range ws {
			jobs = append(jobs, job{ws[i], c.Scenario, cs[i]})
		}
	}
	// Longest first, so the pool ends together.
	slices.SortStableFunc(jobs, func(a, b job) int {
		return int(b.w.End/time.Second)*len(b.w.Probes) - int(a.w.End/time.Second)*len(a.w.Probes)
	})
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	tmp := o.TmpDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		results []CaseResult
		errs    []error
		wg      sync.WaitGroup
		next    int
	)
	for range min(par, len(jobs)) {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= len(jobs) || len(errs) > 0 {
					mu.Unlock()
					return
				}
				j := jobs[next]
				next++
				mu.Unlock()
				r, err := j.w.Run(ctx, tmp)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", j.w.Name, err))
					cancel()
				} else {
					for _, c := range j.cases {
						results = append(results, evaluateCase(j.sc, c, r))
					}
					if o.Log != nil {
						o.Log(fmt.Sprintf("%s: %d probes, %d evaluations, %d samples, %v", j.w.Name, len(j.w.Probes), r.Evals, r.Samples, r.Elapsed.Round(time.Millisecond)))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	order := make(map[string]int)
	for i, c := range cells {
		order[c.Scenario.Name] = i
	}
	slices.SortFunc(results, func(a, b CaseResult) int {
		if d := order[a.Scenario] - order[b.Scenario]; d != 0 {
			return d
		}
		if a.Interval != b.Interval {
			return int(a.Interval - b.Interval)
		}
		if a.Objective != b.Objective {
			if a.Objective < b.Objective {
				return -1
			}
			return 1
		}
		return a.Seed - b.Seed
	})
	return &Report{Cells: cells, Results: results, Elapsed: time.Since(began)}, nil
}

// FullMatrix is every scenario at every rate and objective.
func FullMatrix(seeds int) []Cell {
	var cells []Cell
	for _, s := range Scenarios() {
		n := seeds
		if s.Healthy && s.End > 7*24*time.Hour {
			// 30-day runs: seeds matter less than days.
			n = max(1, seeds/2)
		}
		cells = append(cells, Cell{Scenario: s, Rates: Rates(), Objectives: Objectives(), Seeds: n})
	}
	return cells
}

// SubsetMatrix is what make test runs: the targets of issue 26 at
// objective 0.99, one seed, and 30 days of noise at one fast and one slow
// rate.
func SubsetMatrix() []Cell {
	var cells []Cell
	for _, name := range []string{"hard-down", "hung", "ttft-2x", "removed", "restart", "vanished", "fleet-outlier", "fleet-healthy", "noise-30d"} {
		s, _ := ScenarioByName(name)
		c := Cell{Scenario: s, Rates: Rates(), Objectives: []float64{0.99}, Seeds: 1}
		switch name {
		case "noise-30d":
			c.Rates = []time.Duration{10 * time.Second, 5 * time.Minute}
		case "fleet-outlier":
			// Only the fleet alert: the slow endpoint's SLO alerts are
			// ttft-2x's, and would cost ten times as much here.
			c.Rates = []time.Duration{30 * time.Second}
			c.Alerts = []string{FleetOutlierAlert}
		case "fleet-healthy":
			// The rates where a p95 over 10 minutes ticketed a healthy
			// fleet (it holds 20 requests or fewer there, which one
			// slow request moves); the shipped median must stay quiet.
			c.Rates = []time.Duration{30 * time.Second, 5 * time.Minute}
		}
		cells = append(cells, c)
	}
	return cells
}

// String is a one-line description of a case.
func (c Case) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s every %s", c.Scenario, fmtDur(c.Interval))
	fmt.Fprintf(&b, " at %s%%, seed %d", objName(c.Objective), c.Seed)
	return b.String()
}
