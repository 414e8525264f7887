package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/internal/stats"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
)

// Step is one level of the sweep and what it measured.
type Step struct {
	// Index is 1-based, in the order the steps ran.
	Index   int     `json:"index"`
	Mode    Mode    `json:"mode"`
	Level   float64 `json:"level"`
	Poisson bool    `json:"poisson,omitempty"`
	// Burstiness is the gamma shape of a rate step's gaps (0: not gamma).
	Burstiness float64 `json:"burstiness,omitempty"`
	// Phase says why a capacity search or quick sweep ran the step:
	// bracket or bisect (with Trial), synchronous, throughput or sweep.
	Phase string `json:"phase,omitempty"`
	Trial int    `json:"trial,omitempty"`

	StartedAt            time.Time `json:"started_at"`
	MeasurementStartedAt time.Time `json:"measurement_started_at"`
	EndedAt              time.Time `json:"ended_at"`
	// Interrupted: the run was stopped (Ctrl-C) during this step; its
	// statistics cover what was measured until then.
	Interrupted bool `json:"interrupted"`
	// Stable is set only in stability mode: whether three consecutive
	// windows agreed within the tolerance.
	Stable *bool `json:"stable,omitempty"`
	// Windows are every measurement window's throughput and mean latency
	// in stability mode; the statistics merge the last ReportedWindows.
	Windows         []WindowSummary `json:"windows,omitempty"`
	ReportedWindows int             `json:"reported_windows"`

	// WarmupRequests were sent during warm-up; their results are discarded.
	WarmupRequests int `json:"warmup_requests"`
	// UnmeasuredRequests were sent after the reported windows (the window
	// running while stability was judged) and are not in the statistics.
	UnmeasuredRequests int `json:"unmeasured_requests"`
	// CancelledRequests were still in flight when an interrupted step's
	// drain time ran out; they were cancelled and are not in the statistics.
	CancelledRequests int `json:"cancelled_requests"`
	// Skipped are open-loop arrivals not sent during the reported windows
	// because --max-in-flight requests were already in flight, by reason.
	Skipped        map[string]int `json:"skipped"`
	SkippedTotal   int            `json:"skipped_total"`
	WarmupSkipped  int            `json:"warmup_skipped"`
	ScheduleLagP99 float64        `json:"schedule_lag_p99_seconds"`

	// StoppedEarly says why a capacity-search step ended before its
	// windows did: "goodput" (clearly below the objective) or
	// "oversaturated" (TTFT and in-flight requests rising). Such a step
	// fails; its statistics cover what was measured until then.
	StoppedEarly string `json:"stopped_early,omitempty"`
	// Goodput is set when an SLO was given (--slo).
	Goodput *Goodput `json:"goodput,omitempty"`
	// Completions is set on a quick sweep's maximum-throughput step: what
	// completed during the reported windows, and the step's throughputs
	// are taken from it (see CompletionWindow).
	Completions *CompletionWindow `json:"completion_window,omitempty"`

	Stats
	// Histograms make the step mergeable (llm-prober bench-merge).
	Histograms *Histograms `json:"histograms,omitempty"`
	// FirstStart and LastEnd bound the measurement span exactly, so a
	// merge can compute the union's span.
	FirstStart time.Time `json:"first_request_start,omitzero"`
	LastEnd    time.Time `json:"last_response_end,omitzero"`

	records []*record
}

// Label is the step's level for people.
func (s *Step) Label() string { return Label(s.Mode, s.Level) }

// WindowSummary is one stability window.
type WindowSummary struct {
	Requests           int     `json:"requests"`
	RequestsPerSecond  float64 `json:"requests_per_second"`
	MeanLatencySeconds float64 `json:"mean_request_latency_seconds"`
}

// CompletionWindow is the throughput of the requests that completed
// during the measurement windows, whenever they were sent. At maximum
// throughput the queue is deep: requests sent late in the window end up to
// concurrency/throughput seconds after it, and dividing by the span up to
// the last of them (the drain included) reads T/(T+concurrency/X) of the
// real rate X — a third to two thirds of it at concurrency 64 — which
// would cut a quick sweep's range short of the knee.
type CompletionWindow struct {
	Seconds               float64 `json:"seconds"`
	Requests              int     `json:"successes"`
	OutputTokens          int     `json:"output_tokens_total"`
	InputTokens           int     `json:"input_tokens_total"`
	RequestsPerSecond     float64 `json:"requests_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	InputTokensPerSecond  float64 `json:"input_tokens_per_second"`
}

// rates fills the per-second figures from the counts.
func (c *CompletionWindow) rates() {
	if c.Seconds > 0 {
		c.RequestsPerSecond = float64(c.Requests) / c.Seconds
		c.OutputTokensPerSecond = float64(c.OutputTokens) / c.Seconds
		c.InputTokensPerSecond = float64(c.InputTokens) / c.Seconds
	}
}

// apply makes c the step's throughput.
func (c *CompletionWindow) apply(st *Stats) {
	st.RequestsPerSecond = c.RequestsPerSecond
	st.OutputTokensPerSecond = c.OutputTokensPerSecond
	st.InputTokensPerSecond = c.InputTokensPerSecond
}

// record is one measured request.
type record struct {
	window  int
	planned time.Time
	seq     int
	*sample
}

type window struct {
	records []*record
	pending int
	sends   int
	skipped map[string]int
	// completed, completedOut and completedIn count the successes that
	// ended during the window, wherever they were sent (warm-up included).
	completed, completedOut, completedIn int
}

// stepRun drives one step: one schedule.Runner with one job, windows
// assigned by send time (or by send count with --requests), and a
// controller deciding when the step is over.
type stepRun struct {
	o     *Options
	step  *Step
	count bool // windows of o.Requests sends rather than of dur
	// dur is a window's length: o.Duration, or for a trace its span at
	// the step's speed (one window holds the whole replay).
	dur        time.Duration
	maxWindows int
	measure    time.Time
	changed    chan struct{}

	mu      sync.Mutex
	closed  bool
	warmup  int
	wSkip   int
	windows []*window
	// inflight counts every send not yet ended, warm-up included, and
	// inflightAt samples it for the over-saturation check.
	inflight   int
	inflightAt [][2]float64
	// traceSeen counts a trace's arrivals sent or skipped, warm-up
	// included: the replay is over when it reaches the trace's length.
	traceSeen int
	// live progress
	liveTTFT   []float64
	liveDone   int
	liveErrors int
}

var errInterrupted = errors.New("interrupted")

func newStepRun(o *Options, index int, mode Mode, level float64) *stepRun {
	s := &stepRun{
		o:          o,
		count:      o.Requests > 0 && mode != ModeTrace,
		maxWindows: 1,
		changed:    make(chan struct{}, 1),
		step: &Step{
			Index: index, Mode: mode, Level: level, Poisson: mode == ModeRate && o.Poisson && o.Burstiness == 0,
			Skipped: map[string]int{},
		},
	}
	if mode == ModeRate {
		s.step.Burstiness = o.Burstiness
	}
	s.dur = o.Duration
	if mode == ModeTrace {
		// For the progress bar only: a trace step ends when every
		// arrival was sent or skipped (traceSeen), not on a clock.
		s.dur = time.Duration(float64(o.Trace.Span()) / level)
	}
	if o.Stability > 0 {
		s.maxWindows = o.MaxWindows
	}
	return s
}

func (s *stepRun) window(k int) *window {
	for len(s.windows) <= k {
		s.windows = append(s.windows, &window{skipped: map[string]int{}})
	}
	return s.windows[k]
}

// windowAt says which measurement window a send or skip at now falls in:
// -1 during warm-up; maxWindows and beyond when measurement is over.
// Callers hold mu.
func (s *stepRun) windowAt(now time.Time) int {
	if now.Before(s.measure) {
		return -1
	}
	if s.step.Mode == ModeTrace {
		// One window holds the whole replay, however late its last
		// arrival comes on a busy machine.
		return 0
	}
	if s.count {
		n := 0
		for _, w := range s.windows {
			n += w.sends
		}
		return n / s.o.Requests
	}
	return int(now.Sub(s.measure) / s.dur)
}

// admit decides whether a send goes out, and into which window.
func (s *stepRun) admit(now time.Time) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, false
	}
	if s.step.Mode == ModeTrace {
		s.traceSeen++
	}
	k := s.windowAt(now)
	switch {
	case k < 0:
		s.warmup++
	case k >= s.maxWindows:
		return 0, false
	default:
		w := s.window(k)
		w.sends++
		w.pending++
	}
	s.inflight++
	return k, true
}

func (s *stepRun) finish(rec *record) {
	s.mu.Lock()
	s.inflight--
	if rec.outcome == probe.OutcomeSuccess && !s.count && s.step.Mode != ModeTrace {
		if k := s.windowAt(rec.start.Add(rec.endToEnd)); k >= 0 && k < s.maxWindows {
			w := s.window(k)
			w.completed++
			w.completedOut += rec.outputTokens
			if rec.inputKnown {
				w.completedIn += rec.inputTokens
			}
		}
	}
	if rec.window >= 0 {
		w := s.window(rec.window)
		w.pending--
		w.records = append(w.records, rec)
		s.liveDone++
		if rec.outcome != probe.OutcomeSuccess {
			s.liveErrors++
		} else if rec.ttft > 0 {
			s.liveTTFT = append(s.liveTTFT, rec.ttft.Seconds())
		}
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *stepRun) skip(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.step.Mode == ModeTrace {
		s.traceSeen++
	}
	switch k := s.windowAt(time.Now()); {
	case k < 0:
		s.wSkip++
	case k < s.maxWindows:
		s.window(k).skipped[reason]++
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *stepRun) job() schedule.Job {
	spec := schedule.Spec{Concurrency: int(s.step.Level), MaxInFlight: int(s.step.Level)}
	switch s.step.Mode {
	case ModeRate:
		spec = schedule.Spec{Rate: s.step.Level, Poisson: s.o.Poisson, Burstiness: s.o.Burstiness, MaxInFlight: s.o.MaxInFlight}
	case ModeTrace:
		spec = schedule.Spec{Trace: s.o.Trace.Offsets(s.step.Level), MaxInFlight: s.o.MaxInFlight}
	}
	return schedule.Job{
		Key:         "bench/" + s.step.Label(),
		Fingerprint: s.step.Label(),
		Spec:        spec,
		Skipped:     s.skip,
		Run: func(ctx context.Context, tk schedule.Ticket) bool {
			k, ok := s.admit(time.Now())
			if !ok {
				// false, not true: a closed-loop worker then pauses instead
				// of asking again at once until the runner stops.
				return false
			}
			p := s.o.Probe
			if s.step.Mode == ModeTrace {
				p = s.o.Trace.probe(p, tk.Seq)
			}
			res := p.Send(ctx).Result
			tk.Sent(res.Start)
			rec := &record{window: k, planned: tk.Planned, seq: tk.Seq, sample: newSample(res)}
			if s.o.RequestsPath != "" {
				// Encoded now, so the Result and its chunk times can go.
				rec.export = encodeRequestRecord(s.step, rec, res)
			}
			s.finish(rec)
			return res.Outcome == probe.OutcomeSuccess
		},
	}
}

// run executes the step until it is measured or ctx is cancelled.
func (s *stepRun) run(ctx context.Context, progress *progress) *Step {
	step := s.step
	step.StartedAt = time.Now()
	s.measure = step.StartedAt.Add(s.o.Warmup)
	step.MeasurementStartedAt = s.measure
	runner := schedule.NewRunner(runnerLogger(s.o.Logger), schedule.Options{Seed: s.o.Seed})
	runner.Apply([]schedule.Job{s.job()})
	stopProgress := progress.start(s)

	reported, stableVerdict, err := s.control(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	drain := s.o.Probe.Timeout + time.Second
	var early *earlyStop
	switch {
	case errors.As(err, &early):
		// Past the knee the queue holds many requests; waiting for them
		// would turn seconds into minutes for a verdict already known.
		step.StoppedEarly = early.reason
		drain = min(s.o.InterruptDrain, earlyStopDrain)
	case err != nil:
		step.Interrupted = true
		drain = s.o.InterruptDrain
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	// Ctrl-C during a normal end-of-step drain (up to the probe timeout)
	// shortens it to the interrupt drain time as well.
	stopWatch := context.AfterFunc(ctx, func() { time.AfterFunc(s.o.InterruptDrain, cancel) })
	runner.Stop(dctx)
	stopWatch()
	cancel()
	stopProgress()
	step.EndedAt = time.Now()
	if ctx.Err() != nil {
		// The drain may have been cut short: what it cancelled is not
		// measured, so the step is partial.
		step.Interrupted = true
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if step.Interrupted || step.StoppedEarly != "" {
		// What was measured so far: the last (up to) three windows with
		// anything in them, the current partial one included.
		hi := len(s.windows)
		for hi > 0 && len(s.windows[hi-1].records) == 0 {
			hi--
		}
		reported = [2]int{max(0, hi-s.reportSpan()), hi}
	}
	if s.o.Stability > 0 && !step.Interrupted && step.StoppedEarly == "" {
		step.Stable = &stableVerdict
	}
	s.collect(reported)
	return step
}

// reportSpan is how many windows the statistics merge.
func (s *stepRun) reportSpan() int {
	if s.o.Stability > 0 {
		return stabilityWindows
	}
	return 1
}

// stabilityWindows is how many consecutive windows must agree.
const stabilityWindows = 3

// control waits for the step's windows to complete and judges stability;
// it returns the windows to report [lo, hi) and whether they were stable.
func (s *stepRun) control(ctx context.Context) ([2]int, bool, error) {
	for k := 0; ; k++ {
		if err := s.waitWindow(ctx, k); err != nil {
			return [2]int{}, false, err
		}
		if s.o.Stability <= 0 {
			return [2]int{0, 1}, false, nil
		}
		s.mu.Lock()
		sum := s.windowStats(k)
		s.step.Windows = append(s.step.Windows, WindowSummary{Requests: sum.Requests, RequestsPerSecond: sum.RequestsPerSecond, MeanLatencySeconds: sum.Latency.Avg})
		var ok bool
		if k+1 >= stabilityWindows {
			var last []Stats
			for i := k + 1 - stabilityWindows; i <= k; i++ {
				last = append(last, s.windowStats(i))
			}
			ok = stable(last, s.o.Stability)
		}
		s.mu.Unlock()
		if ok || k+1 >= s.maxWindows {
			return [2]int{max(0, k+1-stabilityWindows), k + 1}, ok, nil
		}
	}
}

// windowStats computes one window's statistics. Callers hold mu.
func (s *stepRun) windowStats(k int) Stats {
	w := s.window(k)
	samples := make([]*sample, len(w.records))
	for i, r := range w.records {
		samples[i] = r.sample
	}
	return computeStats(samples)
}

// waitWindow returns once window k is over (its time passed, or its
// --requests sends went out) and every request sent in it has ended.
func (s *stepRun) waitWindow(ctx context.Context, k int) error {
	// check is nil unless a capacity search may end the step early; it
	// then ticks, and each tick judges what was measured so far.
	var check <-chan time.Time
	if s.o.Search != nil {
		t := time.NewTicker(earlyCheckEvery)
		defer t.Stop()
		check = t.C
	}
	if !s.count && s.step.Mode != ModeTrace {
		end := s.measure.Add(time.Duration(k+1) * s.dur)
		t := time.NewTimer(time.Until(end))
		defer t.Stop()
	wait:
		for {
			select {
			case <-ctx.Done():
				return errInterrupted
			case <-t.C:
				break wait
			case now := <-check:
				if reason := s.earlyStop(now); reason != "" {
					return &earlyStop{reason}
				}
			}
		}
	}
	for {
		s.mu.Lock()
		w := s.window(k)
		done := w.pending == 0 && (!s.count || w.sends >= s.o.Requests)
		if s.step.Mode == ModeTrace {
			done = w.pending == 0 && s.traceSeen >= len(s.o.Trace.Records)
		}
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-s.changed:
		case now := <-check:
			if reason := s.earlyStop(now); reason != "" {
				return &earlyStop{reason}
			}
		}
	}
}

// collect fills the step's statistics from windows [lo, hi). Callers
// hold mu.
func (s *stepRun) collect(reported [2]int) {
	step := s.step
	step.WarmupRequests = s.warmup
	step.WarmupSkipped = s.wSkip
	step.ReportedWindows = reported[1] - reported[0]
	var samples []*sample
	var lags []float64
	for k, w := range s.windows {
		if k < reported[0] {
			continue
		}
		if k >= reported[1] {
			step.UnmeasuredRequests += w.sends
			continue
		}
		for reason, n := range w.skipped {
			step.Skipped[reason] += n
			step.SkippedTotal += n
		}
		for _, r := range w.records {
			if (step.Interrupted || step.StoppedEarly != "") && r.cancelled {
				step.CancelledRequests++
				continue
			}
			step.records = append(step.records, r)
			samples = append(samples, r.sample)
			if !r.planned.IsZero() {
				lags = append(lags, max(r.start.Sub(r.planned), 0).Seconds())
			}
		}
	}
	slices.SortFunc(step.records, func(a, b *record) int { return a.start.Compare(b.start) })
	slices.Sort(lags)
	step.ScheduleLagP99 = stats.Percentile(lags, 0.99)
	step.Stats = computeStats(samples)
	step.Histograms = newHistograms(samples)
	step.FirstStart, step.LastEnd = span(samples)
	if s.o.SLO.Set() {
		g := &Goodput{Offered: len(samples) + step.SkippedTotal, Objective: s.o.objective()}
		for _, sm := range samples {
			if s.o.SLO.good(sm) {
				g.Good++
			}
		}
		if g.Offered > 0 {
			g.Ratio = float64(g.Good) / float64(g.Offered)
		}
		if step.MeasurementSeconds > 0 {
			g.GoodPerSecond = float64(g.Good) / step.MeasurementSeconds
		}
		g.Passed = g.Offered > 0 && g.Ratio >= g.Objective && step.StoppedEarly == "" && !step.Interrupted
		step.Goodput = g
	}
	if step.Phase == phaseThroughput && !s.count && step.Mode != ModeTrace && !step.Interrupted && step.StoppedEarly == "" && reported[1] > reported[0] {
		c := &CompletionWindow{Seconds: (time.Duration(reported[1]-reported[0]) * s.dur).Seconds()}
		for k := reported[0]; k < reported[1] && k < len(s.windows); k++ {
			w := s.windows[k]
			c.Requests += w.completed
			c.OutputTokens += w.completedOut
			c.InputTokens += w.completedIn
		}
		c.rates()
		c.apply(&step.Stats)
		step.Completions = c
	}
}

// span is the measurement span's bounds: the first start and last end.
func span(samples []*sample) (first, last time.Time) {
	for _, r := range samples {
		end := r.start.Add(r.endToEnd)
		if first.IsZero() || r.start.Before(first) {
			first = r.start
		}
		if last.IsZero() || end.After(last) {
			last = end
		}
	}
	return first, last
}

// snapshot is what the progress line shows.
type snapshot struct {
	elapsed, total time.Duration
	measuring      bool
	measuredFor    time.Duration
	done, errors   int
	ttftP50        float64
	hasTTFT        bool
}

func (s *stepRun) snapshot(now time.Time) snapshot {
	s.mu.Lock()
	ttft := slices.Clone(s.liveTTFT)
	sn := snapshot{
		elapsed: now.Sub(s.step.StartedAt),
		done:    s.liveDone, errors: s.liveErrors,
		measuring: !now.Before(s.measure),
	}
	s.mu.Unlock()
	if !s.count {
		sn.total = s.o.Warmup + time.Duration(s.maxWindows)*s.dur
	}
	if sn.measuring {
		sn.measuredFor = now.Sub(s.measure)
	}
	if len(ttft) > 0 {
		slices.Sort(ttft)
		sn.ttftP50, sn.hasTTFT = stats.Percentile(ttft, 0.5), true
	}
	return sn
}
