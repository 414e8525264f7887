// Package schedule decides when probes are sent. Each job follows its own
// traffic shape (an interval, a rate, a closed loop, bursts, stages, active
// windows); the runner starts, keeps and stops jobs as the config changes,
// and drains in-flight runs on shutdown.
//
// Open-loop shapes never wait for answers: an arrival that finds the job's
// or the target's in-flight bound reached is skipped and reported, and
// every send carries its planned time so the caller can record the lag.
// Nothing hides coordinated omission.
package schedule

import (
	"context"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Skip reasons reported through Job.Skipped.
const (
	// SkipReasonInFlight: the job already had MaxInFlight runs going.
	SkipReasonInFlight = "concurrency_limit"
	// SkipReasonTargetInFlight: the job's target (its Limiter) was full.
	SkipReasonTargetInFlight = "target_concurrency_limit"
	// SkipReasonOverdue: the arrival fell due so long ago (the process was
	// suspended or starved) that sending it would distort the process.
	SkipReasonOverdue = "overdue"
)

// Ticket is one planned send.
type Ticket struct {
	// Planned is when the arrival process wanted the send to happen; for a
	// closed loop, when the worker's previous request ended.
	Planned time.Time
	// Seq is the arrival's position in its open-loop process, from 0 (a
	// trace's record index); zero for closed-loop tickets.
	Seq   int
	burst *burstGroup
}

// Release returns, for a ticket handed out ahead of its planned time (a
// burst of a job with a BurstLead), a channel closed at Planned: the run
// prepares its request and writes it only once the channel is closed, so
// the burst's requests go out together. It is nil for every other ticket,
// whose run starts at the planned time and sends at once.
func (t Ticket) Release() <-chan struct{} {
	if t.burst == nil {
		return nil
	}
	return t.burst.release
}

// Sent tells the scheduler when the request actually went out. Bursts use
// it to report the spread of their send times; for other tickets it does
// nothing.
func (t Ticket) Sent(at time.Time) {
	if t.burst != nil {
		t.burst.sent(at)
	}
}

// Job is one probe's schedule and what to do at each arrival.
type Job struct {
	// Key identifies the job across reloads (target/probe).
	Key string
	// Fingerprint changes whenever anything the job does changes; a job
	// whose fingerprint is unchanged keeps running untouched on reload.
	Fingerprint string
	Spec        Spec
	// Limiter is shared by the jobs of one target; nil means no bound.
	Limiter *Limiter
	// Run performs one send and says whether it succeeded. ctx is
	// cancelled only when the runner stops and the drain deadline passes;
	// Run must bound itself otherwise.
	Run func(ctx context.Context, t Ticket) (ok bool)
	// Skipped is told about arrivals that were not sent, with the reason.
	Skipped func(reason string)
	// BurstSpread receives, per burst, the time between the first and the
	// last actual send of its requests (from Ticket.Sent).
	BurstSpread func(time.Duration)
	// BurstLead, when positive, starts a burst's runs this long before
	// its planned time (at most half the time between bursts), with
	// tickets whose Release is closed at the planned time: the runs build
	// their requests and get their connections meanwhile and are released
	// together. Slots (MaxInFlight, Limiter) are taken when the runs
	// start, so an arrival that finds them taken is skipped then, as
	// without a lead. Zero starts the runs at the planned time. Other
	// schedule kinds ignore it.
	BurstLead time.Duration
}

// Options configure a Runner.
type Options struct {
	// Clock defaults to the real clock.
	Clock Clock
	// Seed makes random phases, jitter and Poisson gaps reproducible (each
	// job mixes in its key); zero picks a random seed.
	Seed uint64
}

// Runner runs a set of jobs.
type Runner struct {
	logger *slog.Logger
	clock  Clock
	seed   uint64
	// runCtx is given to every Run; cancelling it aborts in-flight sends
	// once the shutdown drain time is over.
	runCtx    context.Context
	cancelRun context.CancelFunc

	mu       sync.Mutex
	jobs     map[string]*running
	inflight sync.WaitGroup
	// running counts runs not yet returned; tests on the fake clock use it
	// to know when the goroutines they started have settled.
	running atomic.Int64
	stopped bool
}

type running struct {
	job    Job
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRunner returns a runner with no jobs.
func NewRunner(logger *slog.Logger, opts Options) *Runner {
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{logger: logger, clock: opts.Clock, seed: opts.Seed, runCtx: ctx, cancelRun: cancel, jobs: map[string]*running{}}
}

// Apply makes jobs the running set: new keys start, missing keys stop
// (their in-flight runs finish and are recorded), changed fingerprints
// restart, unchanged jobs keep their timers and in-flight runs.
func (r *Runner) Apply(jobs []Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	want := make(map[string]Job, len(jobs))
	for _, j := range jobs {
		want[j.Key] = j
	}
	for key, cur := range r.jobs {
		if j, ok := want[key]; ok && j.Fingerprint == cur.job.Fingerprint {
			continue
		}
		cur.cancel()
		<-cur.done
		delete(r.jobs, key)
		r.logger.Debug("Stopped probe schedule", "probe", key)
	}
	for key, j := range want {
		if _, ok := r.jobs[key]; ok {
			continue
		}
		r.jobs[key] = r.start(j)
		r.logger.Debug("Started probe schedule", "probe", key, "schedule", j.Spec.String())
	}
}

// Stop ends every schedule, waits for in-flight runs until ctx is done, then
// cancels the ones still going and waits for them to record their result.
// It returns how many runs were still going when it cancelled them.
func (r *Runner) Stop(ctx context.Context) (cancelled int) {
	r.mu.Lock()
	r.stopped = true
	for key, cur := range r.jobs {
		cur.cancel()
		<-cur.done
		delete(r.jobs, key)
	}
	r.mu.Unlock()

	drained := make(chan struct{})
	go func() { r.inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
		// The caller logs what came of it, once (engine.Stop).
		cancelled = int(r.running.Load())
		r.logger.Debug("Drain deadline passed; cancelling in-flight probes", "runs", cancelled)
		r.cancelRun()
		<-drained
	}
	r.cancelRun()
	return cancelled
}

func (r *Runner) start(j Job) *running {
	ctx, cancel := context.WithCancel(context.Background())
	rj := &running{job: j, cancel: cancel, done: make(chan struct{})}
	h := fnv.New64a()
	h.Write([]byte(j.Key))
	s := &jobState{
		r:     r,
		j:     j,
		ctx:   ctx,
		clock: r.clock,
		rng:   rand.New(rand.NewPCG(r.seed, h.Sum64())),
		wake:  make(chan struct{}, 1),
		max:   max(j.Spec.MaxInFlight, 1),
	}
	go func() {
		defer close(rj.done)
		s.loop()
	}()
	return rj
}

// jobState is one running job. Only the loop goroutine touches rng; runs
// report back through inflight, freed and wake.
type jobState struct {
	r     *Runner
	j     Job
	ctx   context.Context
	clock Clock
	rng   *rand.Rand
	max   int

	inflight atomic.Int64
	// wake is signalled (without blocking) whenever a run ends.
	wake chan struct{}

	mu sync.Mutex
	// freed holds, for the closed loop, when each finished worker became
	// free: the planned time of its next send.
	freed []time.Time
}

func (s *jobState) loop() {
	spec := s.j.Spec
	start := s.clock.Now()
	for s.ctx.Err() == nil {
		now := s.clock.Now()
		seg := spec.segmentAt(start, now)
		if seg.done {
			<-s.ctx.Done()
			return
		}
		if !spec.Active.Active(now) {
			next := spec.Active.NextActive(now)
			if next.IsZero() {
				s.r.logger.Warn("Active window never opens; probe will not send", "probe", s.j.Key)
				<-s.ctx.Done()
				return
			}
			s.sleepUntil(next)
			continue
		}
		if seg.mode.concurrency > 0 {
			until := seg.end
			if len(spec.Active) > 0 {
				if end := spec.Active.End(now); until.IsZero() || end.Before(until) {
					until = end
				}
			}
			s.closedLoop(seg.mode.concurrency, now, until)
		} else {
			s.openLoop(seg.mode, now, seg.end)
		}
	}
}

// sleepUntil waits for the clock to reach t; false when the job stopped.
func (s *jobState) sleepUntil(t time.Time) bool {
	d := t.Sub(s.clock.Now())
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	timer := s.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return true
	case <-s.ctx.Done():
		return false
	}
}

// openLoop sends m's arrivals from from until end (zero: until stopped) or
// until an arrival falls outside the active window.
func (s *jobState) openLoop(m mode, from, end time.Time) {
	arr := m.newArrivals(from, s.rng)
	overdue := s.j.Spec.overdueAfter(m)
	lead := s.burstLead(m)
	seq := 0
	for {
		planned, n := arr.next()
		if planned.IsZero() {
			<-s.ctx.Done()
			return
		}
		if !end.IsZero() && !planned.Before(end) {
			s.sleepUntil(end)
			return
		}
		if !s.sleepUntil(planned.Add(-lead)) {
			return
		}
		if !s.j.Spec.Active.Active(planned) {
			// The window closed: the outer loop waits for the next one and
			// starts the process afresh there.
			return
		}
		if s.clock.Now().Sub(planned) > overdue {
			for range n {
				s.skip(SkipReasonOverdue)
			}
			seq += n
			continue
		}
		var group *burstGroup
		if n > 1 || lead > 0 {
			group = &burstGroup{report: s.j.BurstSpread}
		}
		if lead > 0 {
			group.release = make(chan struct{})
		}
		sent := 0
		for range n {
			if s.dispatch(Ticket{Planned: planned, Seq: seq, burst: group}, false) {
				sent++
			}
			seq++
		}
		group.seal(sent)
		if lead > 0 && sent > 0 {
			s.releaseAt(group.release, planned)
		}
	}
}

// burstLead is how long before a burst of m its runs start: the job's
// BurstLead, at most half the mean time between bursts; zero for the
// other schedule kinds.
func (s *jobState) burstLead(m mode) time.Duration {
	if m.burst <= 0 || s.j.BurstLead <= 0 {
		return 0
	}
	return max(min(s.j.BurstLead, m.meanInterval()/2), 0)
}

// releaseAt closes release at t, or at once when the runner's runs are
// cancelled (their sends then fail at once instead of waiting). It is
// counted with the in-flight runs, so Stop waits for it. It does not
// depend on the job's own context: runs already started for a burst are
// released at its planned time even when the job stops meanwhile, and
// sent and recorded like any other in-flight run.
func (s *jobState) releaseAt(release chan struct{}, t time.Time) {
	s.r.inflight.Add(1)
	timer := s.clock.NewTimer(t.Sub(s.clock.Now()))
	go func() {
		defer s.r.inflight.Done()
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-s.r.runCtx.Done():
		}
		close(release)
	}()
}

func (s *jobState) skip(reason string) {
	if s.j.Skipped != nil {
		s.j.Skipped(reason)
	}
}

// tryAcquire takes a job slot and a target slot, or neither.
func (s *jobState) tryAcquire() (ok bool, reason string) {
	if s.inflight.Load() >= int64(s.max) {
		return false, SkipReasonInFlight
	}
	if !s.j.Limiter.TryAcquire() {
		return false, SkipReasonTargetInFlight
	}
	s.inflight.Add(1)
	return true, ""
}

// dispatch starts one run, or reports the skip. closed marks closed-loop
// runs, whose end frees a worker.
func (s *jobState) dispatch(t Ticket, closed bool) bool {
	if ok, reason := s.tryAcquire(); !ok {
		s.skip(reason)
		return false
	}
	s.start(t, closed)
	return true
}

func (s *jobState) start(t Ticket, closed bool) {
	s.r.inflight.Add(1)
	s.r.running.Add(1)
	go func() {
		defer s.r.inflight.Done()
		defer s.r.running.Add(-1)
		ok := s.j.Run(s.r.runCtx, t)
		s.j.Limiter.Release()
		if closed {
			ready := s.clock.Now()
			if !ok {
				ready = ready.Add(failurePause)
			}
			s.mu.Lock()
			s.freed = append(s.freed, ready)
			s.mu.Unlock()
		}
		s.inflight.Add(-1)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}()
}

// failurePause is how long a closed-loop worker waits after a failed
// request. Without it a dead target (connection refused in microseconds)
// would turn a concurrency probe into a busy loop hammering it.
const failurePause = time.Second

// closedLoop keeps n requests in flight until until (zero: until stopped):
// each worker sends again as soon as its previous request ended. Workers
// never skip; when the target is full they wait, and the wait shows up as
// schedule lag.
func (s *jobState) closedLoop(n int, from, until time.Time) {
	n = min(n, s.max)
	var deadline <-chan time.Time
	if !until.IsZero() {
		t := s.clock.NewTimer(until.Sub(from))
		defer t.Stop()
		deadline = t.C()
	}
	s.mu.Lock()
	s.freed = s.freed[:0]
	s.mu.Unlock()
	for {
		var targetFreed <-chan struct{}
		var pause Timer
		for s.inflight.Load() < int64(n) {
			now := s.clock.Now()
			planned, ok := s.popFreed(now, n-int(s.inflight.Load()))
			if !ok {
				// Every free worker is pausing after a failure.
				pause = s.clock.NewTimer(planned.Sub(now))
				break
			}
			// Taken before trying, so a release in between is not missed.
			released := s.j.Limiter.Released()
			if ok, reason := s.tryAcquire(); !ok {
				if reason == SkipReasonTargetInFlight {
					targetFreed = released
				}
				s.pushFreed(planned)
				break
			}
			s.start(Ticket{Planned: planned}, true)
		}
		s.retireFreed(n)
		var paused <-chan time.Time
		if pause != nil {
			paused = pause.C()
		}
		expired := false
		select {
		case <-s.ctx.Done():
		case <-deadline:
			expired = true
		case <-s.wake:
		case <-targetFreed:
		case <-paused:
		}
		if pause != nil {
			pause.Stop()
		}
		if expired || s.ctx.Err() != nil {
			return
		}
	}
}

// popFreed returns the planned time of the next send: the earliest time a
// worker became free, or now for a worker that never sent (fewer free
// times recorded than free workers). ok is false
// when the earliest worker is still pausing; planned is then when it may go.
func (s *jobState) popFreed(now time.Time, free int) (planned time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := -1
	for k, t := range s.freed {
		if i < 0 || t.Before(s.freed[i]) {
			i = k
		}
	}
	switch {
	case i >= 0 && !s.freed[i].After(now):
		t := s.freed[i]
		s.freed = append(s.freed[:i], s.freed[i+1:]...)
		return t, true
	case len(s.freed) < free:
		return now, true
	}
	return s.freed[i], false
}

// retireFreed drops the free times of workers beyond what n still needs:
// after a stage lowered the concurrency, their stale times would otherwise
// become the planned times of much later sends and inflate the lag.
func (s *jobState) retireFreed(n int) {
	keep := max(n-int(s.inflight.Load()), 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.freed) > keep {
		s.freed = append(s.freed[:0], s.freed[len(s.freed)-keep:]...)
	}
}

func (s *jobState) pushFreed(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freed = append([]time.Time{t}, s.freed...)
}

// burstGroup collects the actual send times of one burst's requests.
type burstGroup struct {
	report func(time.Duration)
	// release is closed at the burst's planned time when its runs were
	// started ahead of it (Job.BurstLead); nil otherwise.
	release chan struct{}

	mu                 sync.Mutex
	first, last        time.Time
	reported, expected int
	sealed             bool
}

func (g *burstGroup) sent(at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reported == 0 || at.Before(g.first) {
		g.first = at
	}
	if g.reported == 0 || at.After(g.last) {
		g.last = at
	}
	g.reported++
	g.maybeReport()
}

// seal says how many of the burst's requests were actually started.
func (g *burstGroup) seal(n int) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sealed, g.expected = true, n
	g.maybeReport()
}

func (g *burstGroup) maybeReport() {
	// A spread needs two sends; one alone (the rest skipped) says nothing.
	if g.sealed && g.reported == g.expected && g.expected >= 2 && g.report != nil {
		g.report(g.last.Sub(g.first))
		g.report = nil
	}
}
