package backtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// Fixed parts of every run.
const (
	Job            = "llm-prober"
	Instance       = "prober:9847"
	ScrapeInterval = 15 * time.Second
	// RestartDowntime: a restarting prober answers no scrape for this long.
	RestartDowntime = 30 * time.Second
)

// epoch is the incident time of every run; only differences matter.
var epoch = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// Span is [From, To) relative to a run's incident time.
type Span struct{ From, To time.Duration }

// World is one simulated prober scraped by one Prometheus, which evaluates
// the rules over what it scraped. Times are relative to the incident time.
type World struct {
	Name   string
	Rules  *Rules
	Keep   []int // indexes into Rules.Rules evaluated; nil for all
	Server Server
	Probes []ProbeSpec
	// Restarts: the prober process restarts at each (down RestartDowntime).
	Restarts []time.Duration
	// Vanish: the prober is out of service discovery (not scraped) over
	// each span.
	Vanish []Span
	// End is when the run stops.
	End  time.Duration
	Seed uint64
	// Exact evaluates as promtool does: at each evaluation time every
	// group in order, each rule by an instant query. Otherwise rules are
	// evaluated chunk by chunk (see rangeCache), with the same results.
	Exact bool
	// Chunk is the chunk length when not Exact; 0 means 2h.
	Chunk time.Duration
}

// Episode is one alert instance's stretch of firing.
type Episode struct {
	Alert, Severity, Target string
	Labels                  labels.Labels
	// Fired and Resolved are the evaluations at which it was first seen
	// firing and first seen not firing; Open when still firing at the end.
	Fired, Resolved time.Duration
	Open            bool
}

// RunResult is what one world's run produced.
type RunResult struct {
	World    *World
	Episodes []Episode
	// EvalStart is when rule evaluation started (relative to the incident).
	EvalStart time.Duration
	Evals     int
	Samples   int
	Elapsed   time.Duration
}

type seriesRef struct {
	lset labels.Labels
	ref  storage.SeriesRef
	name int // index into rawNames
	last bool
}

type probeRun struct {
	sim     *probeSim
	spec    *ProbeSpec
	series  []seriesRef
	values  []float64
	removed bool
}

// need is the time intervals (absolute ms) in which a raw name is scraped
// at all: rules read it nowhere else, so writing it elsewhere only costs.
type need struct{ from, to []int64 }

func (n *need) has(t int64) bool {
	for i := range n.from {
		if t >= n.from[i] && t <= n.to[i] {
			return true
		}
	}
	return false
}

// Run simulates w and returns the alert episodes.
func (w *World) Run(ctx context.Context, tmpDir string) (_ *RunResult, err error) {
	began := time.Now()
	names := rawNames()
	nd, err := w.Rules.needsOf(w.Keep, names)
	if err != nil {
		return nil, err
	}
	t0 := epoch.UnixMilli()
	evalLead := max(nd.evalLead+30*time.Minute, time.Hour)
	// Rules are evaluated on a grid that starts evalLead before the
	// incident, each group every its interval (tick, below, divides them
	// all).
	evalStart := t0 - evalLead.Milliseconds()
	end := t0 + w.End.Milliseconds()

	needs := make([]need, len(names))
	simStart := evalStart - lookbackDelta.Milliseconds()
	for i, name := range names {
		var iv [][2]int64
		for _, win := range nd.raw[name] {
			from := evalStart - win.from.Milliseconds() - ScrapeInterval.Milliseconds()
			iv = append(iv, [2]int64{from, end - win.to.Milliseconds()})
			simStart = min(simStart, from)
		}
		slices.SortFunc(iv, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		for _, v := range iv {
			k := len(needs[i].from)
			if k > 0 && v[0] <= needs[i].to[k-1] {
				needs[i].to[k-1] = max(needs[i].to[k-1], v[1])
				continue
			}
			needs[i].from = append(needs[i].from, v[0])
			needs[i].to = append(needs[i].to, v[1])
		}
	}

	dir, err := os.MkdirTemp(tmpDir, "backtest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	opts := tsdb.DefaultOptions()
	opts.WALSegmentSize = -1
	opts.IsolationDisabled = true
	opts.RetentionDuration = 0
	// The head is compacted into blocks after every chunk of evaluation,
	// as Prometheus compacts it every 2 hours: queries cost by how many
	// chunks of a series the head holds, so a head holding weeks makes
	// every 5-minute lookup slow. Rules may still write half the head's
	// chunk range behind the newest scrape, which bounds the chunk.
	chunk := w.Chunk
	if chunk <= 0 {
		chunk = 2 * time.Hour
	}
	opts.MinBlockDuration = 2 * chunk.Milliseconds()
	opts.MaxBlockDuration = opts.MinBlockDuration
	logger := promslog.NewNopLogger()
	db, err := tsdb.Open(dir, logger, nil, opts, nil)
	if err != nil {
		return nil, err
	}
	db.DisableCompactions()
	defer func() { err = errors.Join(err, db.Close()) }()

	engine := promql.NewEngine(promql.EngineOpts{
		Logger:        logger,
		MaxSamples:    math.MaxInt32,
		Timeout:       time.Hour,
		LookbackDelta: lookbackDelta,
	})
	defer engine.Close()
	cache := &rangeCache{engine: engine, q: db, m: make(map[rangeKey]*rangeResult)}
	defer cache.close()
	exact := w.Exact
	order := w.Rules.keptOrder(w.Keep)
	spans := w.Rules.feedbackSpans(order)
	queryFunc := cache.query
	if exact {
		queryFunc = cache.instant
	}
	mopts := &rules.ManagerOptions{
		QueryFunc:  queryFunc,
		Appendable: db,
		Queryable:  db,
		Context:    ctx,
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     logger,
	}
	mgr := rules.NewManager(mopts)
	groups, err := w.Rules.loadGroups(mgr, mopts, w.Keep, !exact)
	if err != nil {
		return nil, err
	}
	if !exact && len(groups) != len(order) {
		return nil, fmt.Errorf("%d rules loaded, %d kept", len(groups), len(order))
	}
	tick := DefaultEvalInterval.Milliseconds()
	for _, g := range groups {
		tick = gcd(tick, g.Interval().Milliseconds())
	}

	rng := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	scrapePhase := rng.Int64N(ScrapeInterval.Milliseconds())

	// The probes, their series and lifecycle.
	srv := w.Server
	probes := make([]*probeRun, len(w.Probes))
	outs := outcomes()
	for i := range w.Probes {
		spec := &w.Probes[i]
		pr := &probeRun{spec: spec, sim: newProbeSim(spec, &srv, t0)}
		base := []string{"job", Job, "instance", Instance, "target", spec.Target, "probe", spec.Probe, "model", spec.Model}
		add := func(name string, kv ...string) {
			l := append(append([]string{model.MetricNameLabel, name}, base...), kv...)
			pr.series = append(pr.series, seriesRef{lset: labels.FromStrings(l...), name: slices.Index(names, name)})
		}
		for _, o := range outs {
			add(mRequests, "outcome", o)
		}
		for _, s := range sloNames {
			add(mSLORequests, "slo", s, "result", "good")
			add(mSLORequests, "slo", s, "result", "bad")
		}
		for _, s := range sloNames {
			add(mObjective, "slo", s)
		}
		add(mScheduled)
		for _, r := range skipReasons() {
			add(mSkipped, "reason", r)
		}
		add(mInFlight)
		add(mConsecutive)
		add(mFailingSince)
		add(mPlannedInterval)
		for _, b := range pr.sim.bounds {
			add(mTTFTBucket, "le", formatLe(b))
		}
		add(mTTFTBucket, "le", formatLe(math.Inf(1)))
		add(mTTFTSum)
		add(mTTFTCount)
		add(mSuccess)
		add(mLastRun)
		pr.values = make([]float64, len(pr.series))
		probes[i] = pr
	}
	up := seriesRef{lset: labels.FromStrings(model.MetricNameLabel, mUp, "job", Job, "instance", Instance), name: slices.Index(names, mUp)}
	// The discovery info series, one per discovered target, exported
	// while a probe of the target exists: discovery's Expand creates the
	// target with its probes and drops it with them.
	type infoRun struct {
		series seriesRef
		probes []*probeRun
	}
	var infos []*infoRun
	for _, pr := range probes {
		if pr.spec.Module == "" {
			continue
		}
		i := slices.IndexFunc(infos, func(in *infoRun) bool { return in.series.lset.Get("target") == pr.spec.Target })
		if i < 0 {
			l := labels.FromStrings(model.MetricNameLabel, mDiscoveredInfo, "job", Job, "instance", Instance,
				"target", pr.spec.Target, "module", pr.spec.Module)
			infos = append(infos, &infoRun{series: seriesRef{lset: l, name: slices.Index(names, mDiscoveredInfo)}})
			i = len(infos) - 1
		}
		infos[i].probes = append(infos[i].probes, pr)
	}

	// Lifecycle events in time order: creations, removals, restarts.
	type event struct {
		at   int64
		kind int // 0 create, 1 remove, 2 restart down, 3 restart up
		p    *probeRun
	}
	var events []event
	for _, pr := range probes {
		if pr.spec.New {
			events = append(events, event{at: t0, kind: 0, p: pr})
		} else {
			pr.sim.start(simStart, pr.sim.interval)
		}
		if pr.spec.Removed {
			events = append(events, event{at: t0 + pr.spec.RemovedAt.Milliseconds(), kind: 1, p: pr})
		}
	}
	for _, r := range w.Restarts {
		at := t0 + r.Milliseconds()
		events = append(events, event{at: at, kind: 2}, event{at: at + RestartDowntime.Milliseconds(), kind: 3})
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
	down := func(t int64) bool {
		for _, r := range w.Restarts {
			at := t0 + r.Milliseconds()
			if t >= at && t < at+RestartDowntime.Milliseconds() {
				return true
			}
		}
		return false
	}
	vanished := func(t int64) bool {
		for _, s := range w.Vanish {
			if t >= t0+s.From.Milliseconds() && t < t0+s.To.Milliseconds() {
				return true
			}
		}
		return false
	}

	res := &RunResult{World: w, EvalStart: time.Duration(evalStart-t0) * time.Millisecond}
	stale := math.Float64frombits(value.StaleNaN)
	var appErr error
	appendOne := func(app storage.Appender, s *seriesRef, t int64, v float64) {
		ref, err := app.Append(s.ref, s.lset, t, v)
		if err != nil {
			appErr = errors.Join(appErr, fmt.Errorf("%s at %d: %w", s.lset, t, err))
			return
		}
		s.ref = ref
		res.Samples++
	}
	markStale := func(app storage.Appender, s *seriesRef, t int64) {
		if s.last {
			appendOne(app, s, t, stale)
			s.last = false
		}
	}

	scrape := func(t int64) error {
		app := db.Appender(ctx)
		switch {
		case vanished(t):
			// Out of discovery: Prometheus stops the scrape loop and marks
			// everything it last scraped stale, up included.
			markStale(app, &up, t)
			for _, pr := range probes {
				for j := range pr.series {
					markStale(app, &pr.series[j], t)
				}
			}
			for _, in := range infos {
				markStale(app, &in.series, t)
			}
		case down(t):
			// A failed scrape: up 0, the previous scrape's series stale.
			appendOne(app, &up, t, 0)
			up.last = true
			for _, pr := range probes {
				for j := range pr.series {
					markStale(app, &pr.series[j], t)
				}
			}
			for _, in := range infos {
				markStale(app, &in.series, t)
			}
		default:
			if needs[up.name].has(t) {
				appendOne(app, &up, t, 1)
				up.last = true
			} else {
				markStale(app, &up, t)
			}
			for _, pr := range probes {
				if !pr.sim.active {
					for j := range pr.series {
						markStale(app, &pr.series[j], t)
					}
					continue
				}
				pr.fill()
				for j := range pr.series {
					s := &pr.series[j]
					v := pr.values[j]
					if math.IsNaN(v) || !needs[s.name].has(t) {
						markStale(app, s, t)
						continue
					}
					appendOne(app, s, t, v)
					s.last = true
				}
			}
			for _, in := range infos {
				s := &in.series
				if !slices.ContainsFunc(in.probes, func(pr *probeRun) bool { return pr.sim.active }) || !needs[s.name].has(t) {
					markStale(app, s, t)
					continue
				}
				appendOne(app, s, t, 1)
				s.last = true
			}
		}
		return errors.Join(app.Commit(), appErr)
	}

	tracker := newAlertTracker(t0)
	ev := 0
	nextScrape := simStart - simStart%ScrapeInterval.Milliseconds() + scrapePhase
	for nextScrape < simStart {
		nextScrape += ScrapeInterval.Milliseconds()
	}
	// scrapeUntil scrapes every scrape time up to and including t.
	scrapeUntil := func(t int64) error {
		for ; nextScrape <= t && nextScrape <= end; nextScrape += ScrapeInterval.Milliseconds() {
			s := nextScrape
			for ev < len(events) && events[ev].at <= s {
				e := events[ev]
				ev++
				switch e.kind {
				case 0:
					e.p.sim.start(e.at, time.Second.Milliseconds())
				case 1:
					e.p.sim.advance(e.at)
					e.p.sim.stop()
					e.p.removed = true
				case 2:
					for _, pr := range probes {
						pr.sim.advance(e.at)
						pr.sim.stop()
					}
				case 3:
					for _, pr := range probes {
						if !pr.removed && (!pr.spec.New || e.at >= t0) {
							pr.sim.start(e.at, pr.sim.interval)
						}
					}
				}
			}
			for _, pr := range probes {
				pr.sim.advance(s)
			}
			if err := scrape(s); err != nil {
				return err
			}
		}
		return nil
	}
	// evalAt evaluates g at t if t is one of its evaluation times.
	evalAt := func(g *rules.Group, t int64) error {
		if (t-evalStart)%g.Interval().Milliseconds() != 0 {
			return nil
		}
		ts := time.UnixMilli(t).UTC()
		g.Eval(ctx, ts)
		for _, r := range g.Rules() {
			if err := r.LastError(); err != nil {
				return fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(epoch), err)
			}
		}
		tracker.observe(g, t)
		return nil
	}
	steps := max(chunk.Milliseconds()/tick, 1)
	if exact {
		steps = 1
	}
	for from := evalStart; from <= end; from += steps * tick {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		to := min(from+(steps-1)*tick, end)
		if err := scrapeUntil(to); err != nil {
			return nil, err
		}
		if exact {
			for _, g := range groups {
				if err := evalAt(g, from); err != nil {
					return nil, err
				}
			}
		} else {
			cache.close()
			for pos := 0; pos < len(groups); pos++ {
				if i := slices.IndexFunc(spans, func(s [2]int) bool { return s[0] == pos }); i >= 0 {
					// A feedback span: its rules together, evaluation by
					// evaluation, as Prometheus orders them.
					cache.tick = true
					for t := from; t <= to; t += tick {
						for _, g := range groups[pos : spans[i][1]+1] {
							if err := evalAt(g, t); err != nil {
								return nil, err
							}
						}
					}
					cache.tick = false
					pos = spans[i][1]
					continue
				}
				g := groups[pos]
				// The group's evaluation times within [from, to].
				iv := g.Interval().Milliseconds()
				first := from + (iv-(from-evalStart)%iv)%iv
				if first > to {
					continue
				}
				last := first + (to-first)/iv*iv
				cache.group(time.UnixMilli(first), time.UnixMilli(last), time.Duration(iv)*time.Millisecond)
				for t := first; t <= last; t += iv {
					if err := evalAt(g, t); err != nil {
						return nil, err
					}
				}
			}
		}
		res.Evals += int((to-from)/tick) + 1
		if err := db.Compact(ctx); err != nil {
			return nil, err
		}
	}
	res.Episodes = tracker.finish(end)
	res.Elapsed = time.Since(began)
	return res, nil
}

// fill computes the probe's exported values in its series' order; NaN for
// a series not exported now (the last-run gauges before the first run).
func (pr *probeRun) fill() {
	p := pr.sim
	v := pr.values[:0]
	v = append(v, p.requests...)
	for _, s := range p.slo {
		v = append(v, s[0], s[1])
	}
	obj := pr.spec.SLO.Objective
	v = append(v, obj, obj, obj)
	v = append(v, p.scheduled)
	v = append(v, p.skipped[:]...)
	inflight := 0.0
	if p.inflight {
		inflight = 1
	}
	v = append(v, inflight, p.consecutive, p.failingAt, pr.spec.Interval.Seconds())
	cum := 0.0
	for _, b := range p.buckets {
		cum += b
		v = append(v, cum)
	}
	v = append(v, p.ttftSum, p.ttftCount)
	if p.ran {
		v = append(v, p.success, p.lastRun)
	} else {
		v = append(v, math.NaN(), math.NaN())
	}
	pr.values = v
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// alertTracker turns the rules' alert states after each evaluation into
// firing episodes.
type alertTracker struct {
	t0       int64
	open     map[*rules.AlertingRule]map[uint64]*Episode
	episodes []*Episode
	seen     map[uint64]bool
}

func newAlertTracker(t0 int64) *alertTracker {
	return &alertTracker{t0: t0, open: make(map[*rules.AlertingRule]map[uint64]*Episode), seen: make(map[uint64]bool)}
}

func (a *alertTracker) rel(t int64) time.Duration { return time.Duration(t-a.t0) * time.Millisecond }

func (a *alertTracker) observe(g *rules.Group, t int64) {
	for _, r := range g.Rules() {
		ar, ok := r.(*rules.AlertingRule)
		if !ok {
			continue
		}
		open := a.open[ar]
		if open == nil {
			open = make(map[uint64]*Episode)
			a.open[ar] = open
		}
		clear(a.seen)
		ar.ForEachActiveAlert(func(al *rules.Alert) {
			if al.State != rules.StateFiring {
				return
			}
			h := al.Labels.Hash()
			a.seen[h] = true
			if _, ok := open[h]; ok {
				return
			}
			e := &Episode{
				Alert:    al.Labels.Get(labels.AlertName),
				Severity: al.Labels.Get("severity"),
				Target:   al.Labels.Get("target"),
				Labels:   al.Labels.Copy(),
				Fired:    a.rel(t),
				Open:     true,
			}
			open[h] = e
			a.episodes = append(a.episodes, e)
		})
		for h, e := range open {
			if !a.seen[h] {
				e.Resolved, e.Open = a.rel(t), false
				delete(open, h)
			}
		}
	}
}

func (a *alertTracker) finish(end int64) []Episode {
	out := make([]Episode, len(a.episodes))
	for i, e := range a.episodes {
		if e.Open {
			e.Resolved = a.rel(end)
		}
		out[i] = *e
	}
	slices.SortStableFunc(out, func(x, y Episode) int {
		if x.Fired != y.Fired {
			return int(x.Fired - y.Fired)
		}
		return labels.Compare(x.Labels, y.Labels)
	})
	return out
}

// String names the episode for logs.
func (e Episode) String() string {
	s := e.Alert + "{" + e.Target + "} fired " + fmtDur(e.Fired)
	if e.Open {
		return s + ", still firing"
	}
	return s + ", resolved " + fmtDur(e.Resolved)
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		b.WriteString(strconv.Itoa(h) + "h")
	}
	if m > 0 {
		b.WriteString(strconv.Itoa(m) + "m")
	}
	if sec > 0 || d == 0 {
		b.WriteString(strconv.Itoa(sec) + "s")
	}
	return b.String()
}
