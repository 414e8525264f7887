package schedule

import (
	"context"
	"sync"
	"testing"
	"time"
)

// heldRuns records, for a job with a BurstLead, when each run started,
// what it was planned for and when its release came.
type heldRuns struct {
	clk *FakeClock

	mu                          sync.Mutex
	started, planned, released  []time.Time
	noRelease, cancelled, total int
}

func (h *heldRuns) run(ctx context.Context, tk Ticket) bool {
	h.mu.Lock()
	h.total++
	h.started = append(h.started, h.clk.Now())
	h.planned = append(h.planned, tk.Planned)
	h.mu.Unlock()
	rel := tk.Release()
	if rel == nil {
		h.mu.Lock()
		h.noRelease++
		h.mu.Unlock()
		tk.Sent(h.clk.Now())
		return true
	}
	<-rel
	now := h.clk.Now()
	h.mu.Lock()
	h.released = append(h.released, now)
	if ctx.Err() != nil {
		h.cancelled++
	}
	h.mu.Unlock()
	tk.Sent(now)
	return true
}

func (h *heldRuns) snapshot() (started, planned, released []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.started...), append([]time.Time(nil), h.planned...), append([]time.Time(nil), h.released...)
}

func (h *heldRuns) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// holdNext steps the fake clock until total runs have started and n are
// running (held for their release), then returns with the release timer
// and the loop's next sleep pending.
func holdNext(t *testing.T, r *Runner, clk *FakeClock, h *heldRuns, n, total int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.count() < total || r.running.Load() < int64(n) || clk.Timers() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("at %s: %d runs started (want %d), %d running (want %d), %d timers", clk.Now(), h.count(), total, r.running.Load(), n, clk.Timers())
		}
		// Only the loop's sleep is pending: step to it.
		if r.running.Load() == 0 && clk.Timers() == 1 {
			clk.Step()
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// releaseHeld fires the release timer and waits for the runs to end.
func releaseHeld(t *testing.T, r *Runner, clk *FakeClock) {
	t.Helper()
	clk.Step()
	settle(t, r, clk, 1, 0)
}

// TestBurstLeadPreparesThenReleasesTogether: a burst's runs all start
// BurstLead before the planned time, none is released before it, all are
// released at it, and each burst reports one spread.
func TestBurstLeadPreparesThenReleasesTogether(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	h := &heldRuns{clk: clk}
	job := rec.job("k", Spec{Burst: 8, Period: time.Minute, MaxInFlight: 8})
	job.BurstLead = 5 * time.Second
	job.Run = h.run
	r.Apply([]Job{job})
	for burst := range 3 {
		holdNext(t, r, clk, h, 8, 8*(burst+1))
		started, planned, released := h.snapshot()
		if len(released) != 8*burst {
			t.Fatalf("burst %d: %d released before the planned time", burst, len(released)-8*burst)
		}
		for i := 8 * burst; i < len(started); i++ {
			lead := planned[i].Sub(started[i])
			// The first burst may fall due less than the lead after the
			// job started.
			if lead != 5*time.Second && (burst > 0 || lead < 0 || lead > 5*time.Second) {
				t.Errorf("burst %d: run started %v before its planned time, want 5s", burst, lead)
			}
		}
		releaseHeld(t, r, clk)
		_, planned, released = h.snapshot()
		if len(released) != 8*(burst+1) {
			t.Fatalf("burst %d: %d of 8 released", burst, len(released)-8*burst)
		}
		for i := 8 * burst; i < len(released); i++ {
			if !released[i].Equal(planned[i]) {
				t.Errorf("burst %d: released at %s, planned %s", burst, released[i], planned[i])
			}
		}
	}
	r.Stop(context.Background())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.spreads) != 3 {
		t.Errorf("%d spreads for 3 bursts", len(rec.spreads))
	}
	for _, s := range rec.spreads {
		if s != 0 {
			t.Errorf("spread %v on a fake clock", s)
		}
	}
	if h.noRelease != 0 {
		t.Errorf("%d burst tickets without a release", h.noRelease)
	}
}

// TestBurstLeadSkipsAsWithout: a burst larger than the job's or the
// target's bound runs and skips exactly as many with a lead as without.
func TestBurstLeadSkipsAsWithout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		limiter int
		reason  string
	}{
		{"job max_in_flight", 3, 0, SkipReasonInFlight},
		{"target max_in_flight", 8, 2, SkipReasonTargetInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type counts struct{ runs, skips, spreads int }
			var got []counts
			for _, lead := range []time.Duration{0, 5 * time.Second} {
				r, clk := fakeRunner(t)
				rec := newRecorder()
				var mu sync.Mutex
				runs, gate := 0, make(chan struct{})
				job := rec.job("k", Spec{Burst: 8, Period: time.Minute, MaxInFlight: tc.max})
				job.BurstLead, job.Limiter = lead, NewLimiter(tc.limiter)
				// Every run lasts until the burst is over: at its release,
				// or (without a lead) until the test lets it go.
				job.Run = func(_ context.Context, tk Ticket) bool {
					mu.Lock()
					runs++
					g := gate
					mu.Unlock()
					if rel := tk.Release(); rel != nil {
						<-rel
					} else {
						<-g
					}
					tk.Sent(clk.Now())
					return true
				}
				r.Apply([]Job{job})
				for range 3 {
					settle(t, r, clk, 1, 0)
					clk.Step() // the burst, or its lead
					if lead > 0 {
						settle(t, r, clk, 2, 8) // release timer and next sleep
						clk.Step()
					} else {
						settle(t, r, clk, 1, 8)
						mu.Lock()
						close(gate)
						mu.Unlock()
						settle(t, r, clk, 1, 0)
						mu.Lock()
						gate = make(chan struct{})
						mu.Unlock()
					}
				}
				settle(t, r, clk, 1, 0)
				r.Stop(context.Background())
				mu.Lock()
				rec.mu.Lock()
				got = append(got, counts{runs, rec.skips[tc.reason], len(rec.spreads)})
				rec.mu.Unlock()
				mu.Unlock()
			}
			sent := min(tc.max, max(tc.limiter, 0))
			if tc.limiter == 0 {
				sent = tc.max
			}
			want := counts{runs: 3 * sent, skips: 3 * (8 - sent), spreads: 3}
			if got[0] != want || got[1] != want {
				t.Errorf("without lead %+v, with lead %+v, want both %+v", got[0], got[1], want)
			}
		})
	}
}

// TestBurstLeadCappedAndBurstsOnly: the lead is at most half the period,
// and tickets of other schedule kinds carry no release.
func TestBurstLeadCappedAndBurstsOnly(t *testing.T) {
	t.Run("capped", func(t *testing.T) {
		r, clk := fakeRunner(t)
		h := &heldRuns{clk: clk}
		job := newRecorder().job("k", Spec{Burst: 2, Period: 2 * time.Second, MaxInFlight: 2})
		job.BurstLead, job.Run = time.Minute, h.run
		r.Apply([]Job{job})
		for burst := range 3 {
			holdNext(t, r, clk, h, 2, 2*(burst+1))
			next, _ := clk.NextTimer()
			if d := next.Sub(clk.Now()); burst > 0 && d != time.Second {
				t.Errorf("burst %d held %v before its release, want 1s (half the period)", burst, d)
			}
			releaseHeld(t, r, clk)
		}
		r.Stop(context.Background())
	})
	t.Run("bursts only", func(t *testing.T) {
		r, clk := fakeRunner(t)
		h := &heldRuns{clk: clk}
		rate := newRecorder().job("rate", Spec{Rate: 1, MaxInFlight: 2})
		every := newRecorder().job("every", Spec{Every: time.Second, MaxInFlight: 2})
		rate.BurstLead, rate.Run = time.Minute, h.run
		every.BurstLead, every.Run = time.Minute, h.run
		r.Apply([]Job{rate, every})
		runFor(t, r, clk, 10*time.Second, 2, 0)
		r.Stop(context.Background())
		started, planned, _ := h.snapshot()
		if h.noRelease != len(started) || len(started) < 18 {
			t.Errorf("%d of %d tickets without a release", h.noRelease, len(started))
		}
		for i := range started {
			if !started[i].Equal(planned[i]) {
				t.Errorf("run started %v before its planned time", planned[i].Sub(started[i]))
			}
		}
	})
}

// TestHeldRunsOnStop: held runs of a removed job are still released at
// their planned time; when the drain deadline passes they are released at
// once with their context cancelled. Either way every run returns.
func TestHeldRunsOnStop(t *testing.T) {
	start := func(t *testing.T) (*Runner, *FakeClock, *heldRuns) {
		r, clk := fakeRunner(t)
		h := &heldRuns{clk: clk}
		job := newRecorder().job("k", Spec{Burst: 4, Period: time.Minute, MaxInFlight: 4})
		job.BurstLead, job.Run = time.Second, h.run
		r.Apply([]Job{job})
		holdNext(t, r, clk, h, 4, 4)
		return r, clk, h
	}
	t.Run("removed", func(t *testing.T) {
		r, clk, h := start(t)
		r.Apply(nil)
		clk.Step()
		r.Stop(context.Background())
		_, planned, released := h.snapshot()
		if len(released) != 4 || h.cancelled != 0 {
			t.Fatalf("%d of 4 released, %d cancelled", len(released), h.cancelled)
		}
		for i := range released {
			if !released[i].Equal(planned[i]) {
				t.Errorf("released at %s, planned %s", released[i], planned[i])
			}
		}
	})
	t.Run("drain deadline", func(t *testing.T) {
		r, _, h := start(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r.Stop(ctx)
		if _, _, released := h.snapshot(); len(released) != 4 || h.cancelled != 4 {
			t.Errorf("%d of 4 released, %d with their context cancelled", len(released), h.cancelled)
		}
	})
}
