package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Search is how --capacity looks for the highest level that meets the
// goodput objective.
type Search struct {
	// Start is the first level tried; Min and Max bound the bracketing.
	Start float64 `json:"start"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	// Precision ends bisection of rates (and trace speeds) once the
	// bracket is this narrow relative to its low end; concurrency
	// bisects down to adjacent whole numbers.
	Precision float64 `json:"precision"`
	// Trials repeats the search; the capacity is their median.
	Trials int `json:"trials"`
	// Budget bounds the search's wall time; zero is none. A step is not
	// started when it could not end within the budget.
	Budget time.Duration `json:"-"`
	// MinCapacity fails the run (exit 1) when the capacity is below it.
	MinCapacity float64 `json:"min_capacity,omitempty"`
}

// Search defaults.
const (
	DefaultSearchPrecision = 0.05
	// searchGrowth is the bracketing factor of the first trial; later
	// trials start at the previous capacity and bracket more tightly.
	searchGrowth      = 2.0
	searchGrowthLater = 1.25
	// maxSearchSteps bounds one trial whatever the flags say.
	maxSearchSteps = 60
)

func (s *Search) validate(st *Settings) error {
	if s == nil {
		return nil
	}
	if st.Mode == ModeConcurrency && st.Poisson {
		return fmt.Errorf("--poisson shapes open-loop arrivals; search --capacity rate")
	}
	if !st.SLO.Set() {
		return fmt.Errorf("--capacity needs an SLO that defines a good request, e.g. --slo 'ttft<500ms' --slo 'tpot<50ms'")
	}
	if len(st.Levels) > 0 {
		return fmt.Errorf("--capacity chooses its own levels; give --search-start/--search-max instead of --concurrency or --rate")
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"--search-start", s.Start}, {"--search-min", s.Min}, {"--search-max", s.Max}} {
		if !(v.v > 0) || math.IsInf(v.v, 0) {
			return fmt.Errorf("%s must be > 0, got %g", v.name, v.v)
		}
		if st.Mode == ModeConcurrency && v.v != math.Trunc(v.v) {
			return fmt.Errorf("%s must be a whole number for a concurrency search, got %g", v.name, v.v)
		}
	}
	if s.Min > s.Start || s.Start > s.Max {
		return fmt.Errorf("want --search-min ≤ --search-start ≤ --search-max, got %g, %g, %g", s.Min, s.Start, s.Max)
	}
	if !(s.Precision > 0 && s.Precision < 1) {
		return fmt.Errorf("--search-precision must be between 0%% and 100%%, got %g%%", s.Precision*100)
	}
	if s.Trials < 1 || s.Trials > 100 {
		return fmt.Errorf("--trials must be 1 to 100, got %d", s.Trials)
	}
	if s.Budget < 0 {
		return fmt.Errorf("--budget must not be negative, got %s", s.Budget)
	}
	if s.MinCapacity < 0 {
		return fmt.Errorf("--min-capacity must not be negative, got %g", s.MinCapacity)
	}
	return nil
}

// CapacityResult is the answer to "how much load meets the SLO".
type CapacityResult struct {
	Method    string   `json:"method"` // search or quick_sweep
	Mode      Mode     `json:"mode"`
	SLO       []string `json:"slo"`
	Objective float64  `json:"objective"`
	// Capacity is the median of the trials' capacities: the highest level
	// whose step met the objective. Zero when none did.
	Capacity float64 `json:"capacity"`
	// Lower and Upper bound the capacity over all trials: the lowest
	// passing level of any trial's final bracket and the highest failing
	// one (null when no level failed up to --search-max).
	Lower float64  `json:"lower"`
	Upper *float64 `json:"upper"`
	// Spread is (max − min) / median of the trials' capacities.
	Spread float64       `json:"spread"`
	Trials []TrialResult `json:"trials,omitempty"`
	// BudgetExhausted: the time budget ended the search before the
	// bracket was as narrow as --search-precision asks.
	BudgetExhausted bool    `json:"budget_exhausted,omitempty"`
	MinCapacity     float64 `json:"min_capacity,omitempty"`
	Passed          bool    `json:"passed"`
}

// TrialResult is one search: its bracket and the steps it ran.
type TrialResult struct {
	Capacity float64  `json:"capacity"`
	Upper    *float64 `json:"upper"`
	Steps    []int    `json:"steps"`
}

// bracket is one trial's state: the highest level that passed and the
// lowest that failed (0 and +Inf before there is one).
type bracket struct{ lo, hi float64 }

func (b bracket) narrow(mode Mode, precision float64) bool {
	if b.lo == 0 || math.IsInf(b.hi, 1) {
		return false
	}
	if mode == ModeConcurrency {
		return b.hi-b.lo <= 1
	}
	return (b.hi-b.lo)/b.lo <= precision
}

func (b bracket) mid(mode Mode) float64 {
	if mode == ModeConcurrency {
		return math.Floor((b.lo + b.hi) / 2)
	}
	// The fewest significant digits that still fall strictly inside the
	// bracket: levels print as people write them (13.4, not 13.3984375).
	m := (b.lo + b.hi) / 2
	for digits := 2; digits < 12; digits++ {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(m, 'g', digits, 64), 64)
		if v > b.lo && v < b.hi {
			return v
		}
	}
	return roundLevel(m)
}

// search brackets the capacity by growing (or shrinking) the level by a
// factor until one step passes and another fails, then bisects until the
// bracket is narrow enough, the budget ends, or the run is interrupted.
// It returns an error, after the steps it ran, when no level down to
// --search-min met the objective.
func (ss *session) search(ctx context.Context) (*CapacityResult, error) {
	o := ss.o
	sr := o.Search
	res := &CapacityResult{Method: "search", Mode: o.Mode, SLO: o.SLO.Texts, Objective: o.objective(), MinCapacity: sr.MinCapacity}
	began := time.Now()
	longest := ss.stepBound()
	start, growth := sr.Start, searchGrowth
	var lowest *Step // the failing step at the lowest level, for the message
	for trial := 1; trial <= sr.Trials; trial++ {
		b := bracket{hi: math.Inf(1)}
		tr := TrialResult{}
		level := start
	steps:
		for range maxSearchSteps {
			if sr.Budget > 0 && time.Since(began)+longest > sr.Budget {
				res.BudgetExhausted = true
				break steps
			}
			phase := "bracket"
			if b.lo > 0 && !math.IsInf(b.hi, 1) {
				phase = "bisect"
			}
			step := ss.step(ctx, o.Mode, level, phase, trial)
			if step == nil {
				break steps
			}
			tr.Steps = append(tr.Steps, step.Index)
			if step.Goodput != nil && step.Goodput.Passed {
				b.lo = max(b.lo, level)
			} else {
				b.hi = min(b.hi, level)
				if lowest == nil || level <= lowest.Level {
					lowest = step
				}
			}
			switch {
			case b.narrow(o.Mode, sr.Precision):
				break steps
			case b.lo == 0 && level <= sr.Min:
				// Nothing down to the floor passed: no level meets the SLO.
				break steps
			case b.lo == 0:
				level = max(ss.round(level/growth), sr.Min)
			case math.IsInf(b.hi, 1) && level >= sr.Max:
				// Everything up to the ceiling passed.
				break steps
			case math.IsInf(b.hi, 1):
				level = min(ss.round(level*growth), sr.Max)
			default:
				level = b.mid(o.Mode)
				if level <= b.lo || level >= b.hi {
					break steps
				}
			}
		}
		if res.BudgetExhausted && b.lo == 0 && len(res.Trials) > 0 {
			// A trial the budget cut before anything passed says nothing
			// about the capacity; counting it as 0 would drag the median.
			break
		}
		tr.Capacity = b.lo
		if !math.IsInf(b.hi, 1) {
			tr.Upper = new(b.hi)
		}
		res.Trials = append(res.Trials, tr)
		if b.lo == 0 || ctx.Err() != nil || res.BudgetExhausted {
			break
		}
		start, growth = b.lo, searchGrowthLater
	}
	res.summarise()
	switch {
	case res.Capacity > 0 || ctx.Err() != nil:
		return res, nil
	case res.BudgetExhausted:
		return res, fmt.Errorf("--budget %s ended the search after %d steps, before any level met the objective (a step can take %s); raise --budget, or shorten steps with --duration, --warmup or --max-windows",
			sr.Budget, len(ss.rep.Steps), longest)
	}
	return res, noLevelMet(o, lowest)
}

// stepBound is the longest a step can take, for the budget: warm-up,
// every window, and the drain.
func (ss *session) stepBound() time.Duration {
	o := ss.o
	windows := 1
	if o.Stability > 0 {
		windows = o.MaxWindows
	}
	if o.Requests > 0 {
		// Unknown in advance; a window of requests is judged like one
		// of time for the budget's sake.
		return o.Warmup + time.Duration(windows)*DefaultStabilityWindow
	}
	return o.Warmup + time.Duration(windows)*o.Duration + earlyStopDrain
}

func (ss *session) round(v float64) float64 {
	if ss.o.Mode == ModeConcurrency {
		return math.Max(1, math.Round(v))
	}
	return roundLevel(v)
}

// summarise fills the capacity, its bounds and the spread from the trials.
func (r *CapacityResult) summarise() {
	var caps []float64
	r.Lower = math.Inf(1)
	upper, bounded := 0.0, true
	for _, t := range r.Trials {
		caps = append(caps, t.Capacity)
		r.Lower = min(r.Lower, t.Capacity)
		if t.Upper == nil {
			bounded = false
		} else {
			upper = max(upper, *t.Upper)
		}
	}
	if bounded && len(caps) > 0 {
		r.Upper = new(upper)
	}
	if len(caps) == 0 {
		r.Lower = 0
		return
	}
	slices.Sort(caps)
	r.Capacity = caps[len(caps)/2]
	if len(caps)%2 == 0 {
		r.Capacity = roundLevel((caps[len(caps)/2-1] + caps[len(caps)/2]) / 2)
	}
	if r.Capacity > 0 {
		r.Spread = (caps[len(caps)-1] - caps[0]) / r.Capacity
	}
	r.Passed = r.Capacity > 0 && r.Capacity >= r.MinCapacity
}

// noLevelMet explains a search that found nothing: the SLO, the lowest
// level's goodput, and what the requests there looked like, so the user
// sees whether the SLO is below what an idle server can do.
func noLevelMet(o *Options, st *Step) error {
	var b strings.Builder
	fmt.Fprintf(&b, "no level met the goodput objective %g%% for SLO %s", o.objective()*100, strings.Join(o.SLO.Texts, ", "))
	if st != nil && st.Goodput != nil {
		fmt.Fprintf(&b, "; at %s, the lowest level tried, goodput was %.1f%% (%d of %d requests good", st.Label(), st.Goodput.Ratio*100, st.Goodput.Good, st.Goodput.Offered)
		if st.TTFT.Count > 0 {
			fmt.Fprintf(&b, ", TTFT p50 %s ms", formatMS(st.TTFT.P50))
		}
		if st.TPOT.Count > 0 {
			fmt.Fprintf(&b, ", TPOT p50 %s ms", formatMS(st.TPOT.P50))
		}
		if st.Requests > st.Successes {
			fmt.Fprintf(&b, ", %d failed", st.Requests-st.Successes)
		}
		b.WriteString(")")
	}
	b.WriteString("; loosen the SLO or --objective, or lower --search-min")
	return fmt.Errorf("%s", b.String())
}

// phaseThroughput names the quick sweep's maximum-throughput step, whose
// throughput is measured over its completion window (CompletionWindow).
const phaseThroughput = "throughput"

// quickSweep is GuideLLM's sweep: a synchronous step (concurrency 1)
// gives the lowest useful rate, a step at SweepConcurrency the highest
// throughput, and QuickSweep constant rates evenly spaced between them
// draw the curve. With an SLO, the highest sweep rate that met it is
// reported as a coarse capacity.
func (ss *session) quickSweep(ctx context.Context) (*CapacityResult, error) {
	o := ss.o
	sync := ss.step(ctx, ModeConcurrency, 1, "synchronous", 0)
	if sync == nil {
		return nil, nil
	}
	top := ss.step(ctx, ModeConcurrency, float64(o.SweepConcurrency), phaseThroughput, 0)
	if top == nil {
		return nil, nil
	}
	lo, hi := sync.RequestsPerSecond, top.RequestsPerSecond
	if !(lo > 0) || !(hi > lo) {
		return nil, fmt.Errorf("quick sweep: throughput at concurrency %d (%.3g/s) is not above the synchronous %.3g/s, so there are no rates between them to sweep; see the steps' errors, or raise --sweep-concurrency", o.SweepConcurrency, hi, lo)
	}
	var res *CapacityResult
	if o.SLO.Set() {
		res = &CapacityResult{Method: "quick_sweep", Mode: ModeRate, SLO: o.SLO.Texts, Objective: o.objective(), Passed: true}
	}
	for i := 1; i <= o.QuickSweep; i++ {
		rate := roundLevel(lo + (hi-lo)*float64(i)/float64(o.QuickSweep+1))
		step := ss.step(ctx, ModeRate, rate, "sweep", 0)
		if step == nil {
			return res, nil
		}
		if res == nil {
			continue
		}
		if step.Goodput.Passed && (res.Upper == nil || rate < *res.Upper) {
			res.Capacity = max(res.Capacity, rate)
		} else if !step.Goodput.Passed && res.Upper == nil {
			res.Upper = new(rate)
		}
	}
	if res != nil {
		res.Lower = res.Capacity
		res.Passed = res.Capacity > 0
	}
	return res, nil
}

// writeCapacity prints the search's answer after the summary.
func writeCapacity(w io.Writer, rep *Report) {
	c := rep.Capacity
	if c == nil {
		return
	}
	unit := func(v float64) string { return Label(c.Mode, v) }
	fmt.Fprintf(w, "\nCapacity (goodput ≥ %g%% with %s)\n", c.Objective*100, strings.Join(c.SLO, ", "))
	switch {
	case c.Capacity == 0:
		fmt.Fprintln(w, "  no level met the objective")
	case c.Upper == nil:
		fmt.Fprintf(w, "  ≥ %s: every level up to the highest tried met it\n", unit(c.Capacity))
	default:
		fmt.Fprintf(w, "  %s  (between %s and %s)\n", unit(c.Capacity), unit(c.Lower), unit(*c.Upper))
	}
	if len(c.Trials) > 1 {
		var caps []string
		for _, t := range c.Trials {
			caps = append(caps, FormatLevel(t.Capacity))
		}
		fmt.Fprintf(w, "  trials: %s; spread %.1f%% of the median\n", strings.Join(caps, ", "), c.Spread*100)
	}
	if c.BudgetExhausted {
		fmt.Fprintln(w, "  the time budget ended the search before the bracket was narrow enough")
	}
	if c.MinCapacity > 0 {
		mark := "✓"
		if !c.Passed {
			mark = "✗"
		}
		fmt.Fprintf(w, "%s capacity ≥ %s\n", mark, FormatLevel(c.MinCapacity))
	}
}
