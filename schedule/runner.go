// Package schedule decides when probes are sent. Each job fires on its own
// arrival process; the runner starts, keeps and stops jobs as the config
// changes, and drains in-flight runs on shutdown.
package schedule

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Spec is a job's arrival process. It is comparable, so a reload can tell
// whether a job's timing changed.
type Spec struct {
	// Every is the interval between planned sends.
	Every time.Duration
	// Jitter delays each planned send by a uniform random amount in
	// [0, Jitter), so many probers started together do not fire in step.
	Jitter time.Duration
	// MaxInFlight bounds concurrent runs of the job; an arrival that finds
	// the bound reached is skipped and reported, never queued, so a slow
	// server cannot build a backlog that hides its slowness.
	MaxInFlight int
}

// Ticket is one planned send.
type Ticket struct {
	// Planned is when the arrival process wanted the send to happen.
	Planned time.Time
}

// Job is one probe's schedule and what to do at each arrival.
type Job struct {
	// Key identifies the job across reloads (target/probe).
	Key string
	// Fingerprint changes whenever anything the job does changes; a job
	// whose fingerprint is unchanged keeps running untouched on reload.
	Fingerprint string
	Spec        Spec
	// Run performs one send. ctx is cancelled only when the runner stops
	// and the drain deadline passes; Run must bound itself otherwise.
	Run func(ctx context.Context, t Ticket)
	// Skipped is told about arrivals dropped because MaxInFlight runs were
	// still going.
	Skipped func(reason string)
}

// SkipReasonInFlight is reported when MaxInFlight runs were still going.
const SkipReasonInFlight = "concurrency_limit"

// Runner runs a set of jobs.
type Runner struct {
	logger *slog.Logger
	// runCtx is given to every Run; cancelling it aborts in-flight sends
	// once the shutdown drain time is over.
	runCtx    context.Context
	cancelRun context.CancelFunc

	mu       sync.Mutex
	jobs     map[string]*running
	inflight sync.WaitGroup
	stopped  bool
}

type running struct {
	job    Job
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRunner returns a runner with no jobs.
func NewRunner(logger *slog.Logger) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{logger: logger, runCtx: ctx, cancelRun: cancel, jobs: map[string]*running{}}
}

// Apply makes jobs the running set: new keys start, missing keys stop
// (their in-flight runs finish and are recorded), changed fingerprints
// restart, unchanged jobs keep their timers.
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
		r.logger.Debug("Started probe schedule", "probe", key, "every", j.Spec.Every)
	}
}

// Stop ends every schedule, waits for in-flight runs until ctx is done, then
// cancels the ones still going and waits for them to record their result.
func (r *Runner) Stop(ctx context.Context) {
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
		r.logger.Warn("Drain deadline passed; cancelling in-flight probes")
		r.cancelRun()
		<-drained
	}
	r.cancelRun()
}

func (r *Runner) start(j Job) *running {
	ctx, cancel := context.WithCancel(context.Background())
	rj := &running{job: j, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rj.done)
		r.loop(ctx, j)
	}()
	return rj
}

func (r *Runner) loop(ctx context.Context, j Job) {
	maxInFlight := max(j.Spec.MaxInFlight, 1)
	slots := make(chan struct{}, maxInFlight)
	// The first send happens after a random part of the interval, so a
	// restart does not fire every probe at once.
	next := time.Now().Add(rand.N(j.Spec.Every))
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		planned := next
		// Plan from the previous planned time, not from now, so the rate
		// does not drift by the timer's lateness.
		next = next.Add(j.Spec.Every)
		if now := time.Now(); next.Before(now) {
			// Fell behind (machine suspended, overloaded): skip the missed
			// arrivals rather than firing them in a burst.
			next = now.Add(j.Spec.Every)
		}
		var delay time.Duration
		if j.Spec.Jitter > 0 {
			delay = rand.N(j.Spec.Jitter)
		}
		timer.Reset(time.Until(next))
		select {
		case slots <- struct{}{}:
		default:
			if j.Skipped != nil {
				j.Skipped(SkipReasonInFlight)
			}
			continue
		}
		r.inflight.Add(1)
		go func() {
			defer r.inflight.Done()
			defer func() { <-slots }()
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
			j.Run(r.runCtx, Ticket{Planned: planned.Add(delay)})
		}()
	}
}
