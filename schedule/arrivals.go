package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Spec is a job's traffic shape. Exactly one of Every, Rate, Concurrency,
// Burst or Stages is set; config validation makes sure of it.
type Spec struct {
	// Every is the interval between planned sends; Jitter delays each by a
	// uniform random amount in [0, Jitter), so many probers started
	// together do not send in lockstep.
	Every, Jitter time.Duration
	// Rate is open-loop arrivals per second, evenly spaced or, with
	// Poisson, with exponentially distributed gaps.
	Rate    float64
	Poisson bool
	// Burstiness, when positive, draws Rate's gaps from a gamma
	// distribution of shape Burstiness and mean 1/Rate (vLLM's and
	// AIPerf's burstiness): 1 is Poisson, below 1 burstier, above 1 more
	// regular. It takes precedence over Poisson.
	Burstiness float64
	// Trace replays arrivals at these offsets from the job's start
	// (sorted, already scaled); each ticket's Seq is its index, so the
	// run can look up what the trace says about it. After the last
	// arrival the job sends nothing.
	Trace []time.Duration
	// Concurrency is a closed loop: that many requests are kept in flight,
	// each sent when the previous one of its worker ended.
	Concurrency int
	// Burst sends that many requests at once, every Period or at the
	// minutes Cron matches.
	Burst  int
	Period time.Duration
	Cron   *Cron
	// Stages run in turn from the moment the job starts; with Repeat they
	// start over after the last, otherwise the job then sends nothing.
	// Stages use Poisson for their rates too.
	Stages []Stage
	Repeat bool
	// Active limits sending to the minutes it matches; empty is always.
	Active Window
	// MaxInFlight bounds concurrent sends of the job. An open-loop arrival
	// that finds it reached is skipped and counted, never queued, so a
	// slow server cannot build a backlog that hides its slowness.
	MaxInFlight int
	// Overdue is how late an open-loop arrival may be sent; later ones
	// (the process was suspended or starved of CPU) are skipped and
	// counted. Zero means one mean interval, at least 1s and at most 10s.
	Overdue time.Duration
}

// Stage is one step of a staged schedule: a rate or a concurrency held for
// Duration.
type Stage struct {
	Rate        float64
	Concurrency int
	Duration    time.Duration
}

// String describes the spec for logs.
func (s Spec) String() string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	m := s.mode()
	switch {
	case len(s.Stages) > 0:
		add("stages=%d repeat=%t", len(s.Stages), s.Repeat)
	default:
		parts = append(parts, m.String())
	}
	if len(s.Active) > 0 {
		exprs := make([]string, len(s.Active))
		for i, c := range s.Active {
			exprs[i] = c.String()
		}
		add("active=%q", strings.Join(exprs, "|"))
	}
	add("max_in_flight=%d", s.MaxInFlight)
	return strings.Join(parts, " ")
}

// mode is what the job does during one stretch of time: one arrival
// process, or a closed loop.
type mode struct {
	every, jitter time.Duration
	rate          float64
	poisson       bool
	burstiness    float64
	trace         []time.Duration
	concurrency   int
	burst         int
	period        time.Duration
	cron          *Cron
}

func (s Spec) mode() mode {
	return mode{every: s.Every, jitter: s.Jitter, rate: s.Rate, poisson: s.Poisson, burstiness: s.Burstiness,
		trace: s.Trace, concurrency: s.Concurrency, burst: s.Burst, period: s.Period, cron: s.Cron}
}

func (s Spec) stageMode(st Stage) mode {
	return mode{rate: st.Rate, poisson: s.Poisson, burstiness: s.Burstiness, concurrency: st.Concurrency}
}

func (m mode) String() string {
	switch {
	case m.concurrency > 0:
		return fmt.Sprintf("concurrency=%d", m.concurrency)
	case m.burst > 0 && m.cron != nil:
		return fmt.Sprintf("burst=%d cron=%q", m.burst, m.cron)
	case m.burst > 0:
		return fmt.Sprintf("burst=%d period=%s", m.burst, m.period)
	case len(m.trace) > 0:
		return fmt.Sprintf("trace=%d arrivals over %s", len(m.trace), m.trace[len(m.trace)-1])
	case m.rate > 0 && m.burstiness > 0:
		return fmt.Sprintf("rate=%g/s distribution=gamma burstiness=%g", m.rate, m.burstiness)
	case m.rate > 0:
		dist := "constant"
		if m.poisson {
			dist = "poisson"
		}
		return fmt.Sprintf("rate=%g/s distribution=%s", m.rate, dist)
	case m.every > 0:
		return fmt.Sprintf("every=%s jitter=%s", m.every, m.jitter)
	}
	return "idle"
}

// meanInterval is the average time between arrivals (between bursts).
func (m mode) meanInterval() time.Duration {
	switch {
	case m.burst > 0 && m.cron != nil:
		return time.Minute
	case m.burst > 0:
		return m.period
	case len(m.trace) > 0:
		return m.trace[len(m.trace)-1] / time.Duration(len(m.trace))
	case m.rate > 0:
		return time.Duration(float64(time.Second) / m.rate)
	}
	return m.every
}

// arrivals yields planned send times in order, each with how many requests
// to send then (more than one for bursts). A zero time means no more.
type arrivals interface {
	next() (time.Time, int)
}

// newArrivals starts m's process at from. Periodic processes start at a
// random phase, so a restart or reload does not fire every probe at once.
func (m mode) newArrivals(from time.Time, rng *rand.Rand) arrivals {
	switch {
	case m.burst > 0 && m.cron != nil:
		// Back off a nanosecond so a process started exactly on a
		// matching minute (an active window opening) still fires then.
		return &cronArrivals{c: m.cron, t: from.Add(-time.Nanosecond), n: m.burst}
	case m.burst > 0:
		return &periodic{base: from.Add(randDuration(rng, m.period)), every: m.period, n: m.burst}
	case len(m.trace) > 0:
		return &traceArrivals{t0: from, offsets: m.trace}
	case m.rate > 0 && m.burstiness > 0:
		return &gammaArrivals{t: from, rate: m.rate, shape: m.burstiness, rng: rng}
	case m.rate > 0 && m.poisson:
		return &poisson{t: from, rate: m.rate, rng: rng}
	case m.rate > 0:
		interval := float64(time.Second) / m.rate
		return &constantRate{t0: from.Add(time.Duration(rng.Float64() * interval)), interval: interval}
	case m.every > 0:
		return &periodic{base: from.Add(randDuration(rng, m.every)), every: m.every, jitter: m.jitter, rng: rng, n: 1}
	}
	return never{}
}

func randDuration(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

type never struct{}

func (never) next() (time.Time, int) { return time.Time{}, 0 }

// periodic is `every` (with jitter) and `burst` with a period. Each planned
// time is base + k·every (+ jitter): adding to the previous plan rather
// than to the time of sending keeps the rate from drifting.
type periodic struct {
	base   time.Time
	every  time.Duration
	jitter time.Duration
	rng    *rand.Rand
	n      int
}

func (p *periodic) next() (time.Time, int) {
	t := p.base
	if p.jitter > 0 {
		t = t.Add(randDuration(p.rng, p.jitter))
	}
	p.base = p.base.Add(p.every)
	return t, p.n
}

// constantRate spaces arrivals exactly 1/rate apart; the k-th is computed
// from the start rather than summed, so rounding does not accumulate.
type constantRate struct {
	t0       time.Time
	k        float64
	interval float64 // nanoseconds
}

func (c *constantRate) next() (time.Time, int) {
	t := c.t0.Add(time.Duration(c.k * c.interval))
	c.k++
	return t, 1
}

// poisson has independent exponential gaps of mean 1/rate: the arrivals of
// many independent users, the open-loop model of genai-perf's and Locust's
// request-rate modes.
type poisson struct {
	t    time.Time
	rate float64
	rng  *rand.Rand
}

func (p *poisson) next() (time.Time, int) {
	gap := p.rng.ExpFloat64() / p.rate * float64(time.Second)
	p.t = p.t.Add(time.Duration(math.Min(gap, float64(math.MaxInt64/2))))
	return p.t, 1
}

// gammaArrivals has independent gamma-distributed gaps of mean 1/rate.
// The shape sets the burstiness: the gaps' coefficient of variation is
// 1/√shape, so small shapes cluster arrivals into bursts separated by
// long pauses, while the long-run rate stays exactly the same.
type gammaArrivals struct {
	t     time.Time
	rate  float64
	shape float64
	rng   *rand.Rand
}

func (g *gammaArrivals) next() (time.Time, int) {
	gap := Gamma(g.rng, g.shape) / (g.shape * g.rate) * float64(time.Second)
	g.t = g.t.Add(time.Duration(math.Min(gap, float64(math.MaxInt64/2))))
	return g.t, 1
}

// Gamma draws from the gamma distribution of the given shape and scale 1
// (Marsaglia and Tsang's method; shapes below 1 are boosted by U^(1/shape)).
func Gamma(rng *rand.Rand, shape float64) float64 {
	boost := 1.0
	if shape < 1 {
		// Float64 can return 0; 1−U is in (0, 1], so the power is finite.
		boost = math.Pow(1-rng.Float64(), 1/shape)
		shape++
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * boost
		}
	}
}

// traceArrivals replays recorded offsets from t0, then ends.
type traceArrivals struct {
	t0      time.Time
	offsets []time.Duration
	k       int
}

func (a *traceArrivals) next() (time.Time, int) {
	if a.k >= len(a.offsets) {
		return time.Time{}, 0
	}
	t := a.t0.Add(a.offsets[a.k])
	a.k++
	return t, 1
}

type cronArrivals struct {
	c *Cron
	t time.Time
	n int
}

func (c *cronArrivals) next() (time.Time, int) {
	c.t = c.c.Next(c.t)
	return c.t, c.n
}

// segment is the mode in force from a moment on, until end (zero: for
// ever); done means a non-repeating staged schedule has finished.
type segment struct {
	mode mode
	end  time.Time
	done bool
}

// segmentAt returns what the job does at now, for a job started at start.
func (s Spec) segmentAt(start, now time.Time) segment {
	if len(s.Stages) == 0 {
		return segment{mode: s.mode()}
	}
	var total time.Duration
	for _, st := range s.Stages {
		total += st.Duration
	}
	elapsed := now.Sub(start)
	if total <= 0 || (!s.Repeat && elapsed >= total) {
		return segment{done: true}
	}
	e := elapsed % total
	for _, st := range s.Stages {
		if e < st.Duration {
			return segment{mode: s.stageMode(st), end: now.Add(st.Duration - e)}
		}
		e -= st.Duration
	}
	return segment{done: true}
}

// overdueAfter is how late an arrival of m may still be sent.
func (s Spec) overdueAfter(m mode) time.Duration {
	if s.Overdue > 0 {
		return s.Overdue
	}
	return min(max(m.meanInterval(), time.Second), 10*time.Second)
}
