package schedule

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is a Friday; the minute is odd on purpose, so nothing lines up by luck.
var t0 = time.Date(2025, 3, 7, 10, 17, 23, 0, time.UTC)

// recorder collects what a job was asked to do.
type recorder struct {
	mu      sync.Mutex
	planned []time.Time
	skips   map[string]int
	spreads []time.Duration
}

func newRecorder() *recorder { return &recorder{skips: map[string]int{}} }

func (r *recorder) run(_ context.Context, tk Ticket) bool {
	r.mu.Lock()
	r.planned = append(r.planned, tk.Planned)
	r.mu.Unlock()
	return true
}

func (r *recorder) skipped(reason string) {
	r.mu.Lock()
	r.skips[reason]++
	r.mu.Unlock()
}

func (r *recorder) spread(d time.Duration) {
	r.mu.Lock()
	r.spreads = append(r.spreads, d)
	r.mu.Unlock()
}

func (r *recorder) job(key string, spec Spec) Job {
	return Job{Key: key, Fingerprint: "1", Spec: spec, Run: r.run, Skipped: r.skipped, BurstSpread: r.spread}
}

func (r *recorder) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.planned)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func (r *recorder) skipCount(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skips[reason]
}

func fakeRunner(t *testing.T) (*Runner, *FakeClock) {
	clk := NewFakeClock(t0)
	r := NewRunner(promslog.NewNopLogger(), Options{Clock: clk, Seed: 42})
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r, clk
}

// runFor steps the fake clock until d has passed. Before each step it
// waits until the jobs under test have settled: want timers set and busy
// runs still going (runs that block on something else than the clock), so
// no arrival is stepped over.
func runFor(t *testing.T, r *Runner, clk *FakeClock, d time.Duration, want, busy int) {
	t.Helper()
	end := clk.Now().Add(d)
	for clk.Now().Before(end) {
		settle(t, r, clk, want, busy)
		if next, ok := clk.NextTimer(); !ok || next.After(end) {
			clk.Advance(end.Sub(clk.Now()))
			return
		}
		clk.Step()
	}
}

func settle(t *testing.T, r *Runner, clk *FakeClock, want, busy int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Timers() < want || r.running.Load() > int64(busy) {
		if time.Now().After(deadline) {
			t.Fatalf("at %s: %d timers pending (want %d), %d runs going (want %d)", clk.Now(), clk.Timers(), want, r.running.Load(), busy)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func countIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, x := range ts {
		if !x.Before(from) && x.Before(to) {
			n++
		}
	}
	return n
}

func TestConstantRateOverAnHour(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	r.Apply([]Job{rec.job("k", Spec{Rate: 2, MaxInFlight: 100})})
	runFor(t, r, clk, time.Hour+time.Second, 1, 0)
	r.Stop(context.Background())
	got := countIn(rec.times(), t0, t0.Add(time.Hour))
	if math.Abs(float64(got)-7200)/7200 > 0.01 {
		t.Errorf("%d arrivals in an hour at 2/s, want 7200 ± 1%%", got)
	}
	ts := rec.times()
	for i := 1; i < len(ts); i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < 499*time.Millisecond || gap > 501*time.Millisecond {
			t.Fatalf("gap %d is %s, want 500ms", i, gap)
		}
	}
}

// TestPoissonKolmogorovSmirnov checks the inter-arrival times of a seeded
// Poisson run against the exponential distribution.
func TestPoissonKolmogorovSmirnov(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	const rate = 5.0
	r.Apply([]Job{rec.job("k", Spec{Rate: rate, Poisson: true, MaxInFlight: 100})})
	runFor(t, r, clk, 10*time.Minute, 1, 0)
	r.Stop(context.Background())
	ts := rec.times()
	if len(ts) < 2500 {
		t.Fatalf("only %d arrivals", len(ts))
	}
	gaps := make([]float64, len(ts)-1)
	for i := range gaps {
		gaps[i] = ts[i+1].Sub(ts[i]).Seconds()
	}
	sort.Float64s(gaps)
	n := float64(len(gaps))
	var d float64
	for i, x := range gaps {
		cdf := 1 - math.Exp(-rate*x)
		d = max(d, math.Abs(float64(i+1)/n-cdf), math.Abs(cdf-float64(i)/n))
	}
	// Critical value at α = 0.01.
	if crit := 1.628 / math.Sqrt(n); d > crit {
		t.Errorf("KS statistic %.4f exceeds %.4f over %d gaps", d, crit, len(gaps))
	}
	if mean := (ts[len(ts)-1].Sub(ts[0]).Seconds()) / n; math.Abs(mean-1/rate) > 0.01 {
		t.Errorf("mean gap %.4fs, want %.4fs", mean, 1/rate)
	}
}

func TestEveryWithJitter(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	r.Apply([]Job{rec.job("k", Spec{Every: 15 * time.Second, Jitter: 5 * time.Second, MaxInFlight: 1})})
	runFor(t, r, clk, 10*time.Minute, 1, 0)
	r.Stop(context.Background())
	ts := rec.times()
	if len(ts) < 39 || len(ts) > 41 {
		t.Fatalf("%d sends in 10m every 15s", len(ts))
	}
	for i := 1; i < len(ts); i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < 10*time.Second || gap > 20*time.Second {
			t.Errorf("gap %s outside 15s ± 5s", gap)
		}
	}
}

func TestBurstReleasesAll(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	job := rec.job("k", Spec{Burst: 8, Period: time.Minute, MaxInFlight: 8})
	job.Run = func(ctx context.Context, tk Ticket) bool {
		tk.Sent(clk.Now())
		return rec.run(ctx, tk)
	}
	r.Apply([]Job{job})
	runFor(t, r, clk, 5*time.Minute, 1, 0)
	r.Stop(context.Background())
	ts := rec.times()
	if len(ts) != 40 {
		t.Fatalf("%d sends in 5 bursts of 8", len(ts))
	}
	for i := 0; i < len(ts); i += 8 {
		if !ts[i].Equal(ts[i+7]) {
			t.Errorf("burst %d not released together: %s … %s", i/8, ts[i], ts[i+7])
		}
		if i > 0 && ts[i].Sub(ts[i-8]) != time.Minute {
			t.Errorf("bursts %s apart", ts[i].Sub(ts[i-8]))
		}
	}
	if len(rec.spreads) != 5 {
		t.Errorf("%d burst spreads reported, want 5", len(rec.spreads))
	}
}

func TestCronBurstsLandOnTheMinute(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	r.Apply([]Job{rec.job("k", Spec{Burst: 3, Cron: mustCron(t, "*/5 * * * *"), MaxInFlight: 3})})
	runFor(t, r, clk, 30*time.Minute, 1, 0)
	r.Stop(context.Background())
	ts := rec.times()
	// 10:17:23 + 30m: 10:20 … 10:45 is six bursts.
	if len(ts) != 18 {
		t.Fatalf("%d sends, want 6 bursts of 3", len(ts))
	}
	for _, x := range ts {
		if x.Second() != 0 || x.Nanosecond() != 0 || x.Minute()%5 != 0 {
			t.Errorf("burst at %s, not on a 5-minute mark", x)
		}
	}
}

func TestStagesSwitchOnTime(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	r.Apply([]Job{rec.job("k", Spec{
		Stages:      []Stage{{Rate: 1, Duration: 10 * time.Minute}, {Rate: 5, Duration: 10 * time.Minute}},
		MaxInFlight: 100,
	})})
	runFor(t, r, clk, 20*time.Minute, 1, 0)
	// After the last stage the job is idle: no timer at all.
	clk.Advance(5 * time.Minute)
	if n := clk.Timers(); n != 0 {
		t.Errorf("%d timers after the last stage", n)
	}
	r.Stop(context.Background())
	ts := rec.times()
	first := countIn(ts, t0, t0.Add(10*time.Minute))
	second := countIn(ts, t0.Add(10*time.Minute), t0.Add(20*time.Minute))
	after := countIn(ts, t0.Add(20*time.Minute), t0.Add(time.Hour))
	if first < 599 || first > 601 || second < 2999 || second > 3001 || after != 0 {
		t.Errorf("stage arrivals %d, %d, then %d; want 600, 3000, 0 (no repeat)", first, second, after)
	}
}

func TestStagesRepeatAndConcurrency(t *testing.T) {
	s := Spec{Stages: []Stage{{Concurrency: 2, Duration: time.Minute}, {Rate: 3, Duration: 2 * time.Minute}}, Repeat: true}
	for _, tc := range []struct {
		at   time.Duration
		mode string
		left time.Duration
	}{
		{0, "concurrency=2", time.Minute},
		{59 * time.Second, "concurrency=2", time.Second},
		{time.Minute, "rate=3/s distribution=constant", 2 * time.Minute},
		{3*time.Minute + 10*time.Second, "concurrency=2", 50 * time.Second},
	} {
		seg := s.segmentAt(t0, t0.Add(tc.at))
		if seg.done || seg.mode.String() != tc.mode || seg.end.Sub(t0.Add(tc.at)) != tc.left {
			t.Errorf("at %s: %s for %s (done %t); want %s for %s", tc.at, seg.mode, seg.end.Sub(t0.Add(tc.at)), seg.done, tc.mode, tc.left)
		}
	}
	s.Repeat = false
	if !s.segmentAt(t0, t0.Add(3*time.Minute)).done {
		t.Error("a non-repeating schedule goes on after its last stage")
	}
}

func TestActiveWindows(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	w := Window{mustCron(t, "* 9-16 * * mon-fri")}
	r.Apply([]Job{rec.job("k", Spec{Every: time.Minute, Active: w, MaxInFlight: 1})})
	// Friday 10:17 to Monday 10:17.
	runFor(t, r, clk, 72*time.Hour, 1, 0)
	r.Stop(context.Background())
	ts := rec.times()
	for _, x := range ts {
		if !w.Active(x) {
			t.Fatalf("sent at %s, outside the window", x)
		}
	}
	// Friday 10:17–17:00 and Monday 09:00–10:17: 403 + 77 minutes.
	if len(ts) < 478 || len(ts) > 481 {
		t.Errorf("%d sends, want about 480", len(ts))
	}
}

// TestClosedLoop: each of the workers sends when its previous answer (2s
// on the fake clock) ended, so the planned time is the previous end.
func TestClosedLoop(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	job := rec.job("k", Spec{Concurrency: 3, MaxInFlight: 3})
	job.Run = func(ctx context.Context, tk Ticket) bool {
		rec.run(ctx, tk)
		tm := clk.NewTimer(2 * time.Second)
		defer tm.Stop()
		select {
		case <-tm.C():
		case <-ctx.Done():
		}
		return true
	}
	r.Apply([]Job{job})
	runFor(t, r, clk, time.Minute, 3, 3)
	clk.WaitForTimers(3, 10*time.Second)
	r.Apply(nil)
	clk.Advance(2 * time.Second)
	r.Stop(context.Background())
	ts := rec.times()
	// 0, 2, …, 60 s: 31 rounds of 3.
	if len(ts) != 93 {
		t.Fatalf("%d sends, want 93", len(ts))
	}
	for i, x := range ts {
		if want := t0.Add(time.Duration(i/3) * 2 * time.Second); !x.Equal(want) {
			t.Fatalf("send %d planned at %s, want %s", i, x, want)
		}
	}
}

func TestClosedLoopPausesAfterFailure(t *testing.T) {
	r, clk := fakeRunner(t)
	var runs atomic.Int64
	r.Apply([]Job{{Key: "k", Fingerprint: "1", Spec: Spec{Concurrency: 1, MaxInFlight: 1},
		Run: func(context.Context, Ticket) bool { runs.Add(1); return false }}})
	runFor(t, r, clk, 10*time.Second, 1, 0)
	if n := runs.Load(); n < 10 || n > 12 {
		t.Errorf("%d failing runs in 10s, want about 10 (one per failure pause)", n)
	}
}

func TestSkipsAtMaxInFlight(t *testing.T) {
	r, clk := fakeRunner(t)
	release := make(chan struct{})
	var started atomic.Int64
	rec := newRecorder()
	job := rec.job("k", Spec{Rate: 10, MaxInFlight: 2})
	job.Run = func(ctx context.Context, _ Ticket) bool {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true
	}
	r.Apply([]Job{job})
	runFor(t, r, clk, 10*time.Second, 1, 2)
	if started.Load() != 2 {
		t.Errorf("started %d with max_in_flight 2", started.Load())
	}
	if got := rec.skipCount(SkipReasonInFlight); got < 97 || got > 99 {
		t.Errorf("%d skips, want 98 of 100 arrivals", got)
	}
	close(release)
}

func TestTargetLimiterSharedAcrossJobs(t *testing.T) {
	r, clk := fakeRunner(t)
	release := make(chan struct{})
	lim := NewLimiter(3)
	a, b := newRecorder(), newRecorder()
	block := func(rec *recorder) func(context.Context, Ticket) bool {
		return func(ctx context.Context, tk Ticket) bool {
			rec.run(ctx, tk)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return true
		}
	}
	ja := a.job("a", Spec{Burst: 5, Period: time.Minute, MaxInFlight: 10})
	jb := b.job("b", Spec{Every: 10 * time.Second, MaxInFlight: 10})
	ja.Run, jb.Run, ja.Limiter, jb.Limiter = block(a), block(b), lim, lim
	r.Apply([]Job{ja, jb})
	runFor(t, r, clk, 2*time.Minute, 2, 3)
	if lim.InFlight() != 3 {
		t.Errorf("%d in flight on a target bounded to 3", lim.InFlight())
	}
	if a.skipCount(SkipReasonTargetInFlight)+b.skipCount(SkipReasonTargetInFlight) == 0 {
		t.Error("no arrival was skipped for the target bound")
	}
	close(release)
}

func TestOverdueArrivalsAreSkipped(t *testing.T) {
	r, clk := fakeRunner(t)
	rec := newRecorder()
	r.Apply([]Job{rec.job("k", Spec{Rate: 1, MaxInFlight: 10})})
	runFor(t, r, clk, 5*time.Second, 1, 0)
	before := len(rec.times())
	// The process was suspended for a minute.
	clk.Advance(time.Minute)
	clk.WaitForTimers(1, 10*time.Second)
	if got := rec.skipCount(SkipReasonOverdue); got < 58 || got > 60 {
		t.Errorf("%d overdue skips after a 1-minute stall at 1/s, want about 59", got)
	}
	if sent := len(rec.times()) - before; sent > 2 {
		t.Errorf("%d stale arrivals sent after the stall", sent)
	}
}

func TestReloadKeepsUnchangedTimers(t *testing.T) {
	r, clk := fakeRunner(t)
	a, b := newRecorder(), newRecorder()
	ja := a.job("a", Spec{Every: 10 * time.Second, MaxInFlight: 1})
	r.Apply([]Job{ja})
	runFor(t, r, clk, time.Minute, 1, 0)
	r.mu.Lock()
	before := r.jobs["a"]
	r.mu.Unlock()

	// Reload with a unchanged and b new, several times: a must keep its
	// phase and send no extra probe.
	for range 3 {
		r.Apply([]Job{ja, b.job("b", Spec{Every: 10 * time.Second, MaxInFlight: 1})})
	}
	runFor(t, r, clk, time.Minute, 2, 0)
	r.mu.Lock()
	after := r.jobs["a"]
	r.mu.Unlock()
	if before != after {
		t.Error("unchanged job was restarted")
	}
	r.Stop(context.Background())
	ts := a.times()
	for i := 1; i < len(ts); i++ {
		if ts[i].Sub(ts[i-1]) != 10*time.Second {
			t.Fatalf("unchanged job's rhythm broke at a reload: gap %s", ts[i].Sub(ts[i-1]))
		}
	}

}

func TestReloadRestartsChangedAndStopsRemoved(t *testing.T) {
	r, _ := fakeRunner(t)
	rec := newRecorder()
	ja, jb := rec.job("a", Spec{Every: time.Second}), rec.job("b", Spec{Every: time.Second})
	r.Apply([]Job{ja, jb})
	r.mu.Lock()
	before := r.jobs["a"]
	r.mu.Unlock()
	ja.Fingerprint = "2"
	r.Apply([]Job{ja})
	r.mu.Lock()
	changed, n := r.jobs["a"], len(r.jobs)
	r.mu.Unlock()
	if changed == before || n != 1 {
		t.Errorf("changed job kept its schedule (%t) or removed job stayed (%d jobs)", changed == before, n)
	}
}

func TestRemovedJobFinishesInFlight(t *testing.T) {
	r, clk := fakeRunner(t)
	release := make(chan struct{})
	var finished atomic.Int64
	r.Apply([]Job{{Key: "k", Fingerprint: "1", Spec: Spec{Every: time.Second, MaxInFlight: 1},
		Run: func(ctx context.Context, _ Ticket) bool {
			select {
			case <-release:
				finished.Add(1)
			case <-ctx.Done():
			}
			return true
		}}})
	runFor(t, r, clk, 2*time.Second, 1, 1)
	r.Apply(nil)
	close(release)
	r.Stop(context.Background())
	if finished.Load() != 1 {
		t.Errorf("in-flight run of a removed job: finished %d, want 1", finished.Load())
	}
}

func TestStopDrainsThenCancels(t *testing.T) {
	r := NewRunner(promslog.NewNopLogger(), Options{})
	var started, finished, cancelled atomic.Int64
	r.Apply([]Job{{Key: "k", Fingerprint: "1", Spec: Spec{Every: time.Millisecond, MaxInFlight: 4},
		Run: func(ctx context.Context, _ Ticket) bool {
			started.Add(1)
			select {
			case <-time.After(time.Hour):
				finished.Add(1)
			case <-ctx.Done():
				cancelled.Add(1)
			}
			return true
		}}})
	deadline := time.Now().Add(10 * time.Second)
	for started.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	n := r.Stop(ctx)
	if time.Since(start) > 5*time.Second {
		t.Error("Stop did not honour its deadline")
	}
	if cancelled.Load() == 0 || finished.Load() != 0 {
		t.Errorf("finished %d cancelled %d: in-flight runs must be cancelled at the deadline and still return", finished.Load(), cancelled.Load())
	}
	if int64(n) != cancelled.Load() {
		t.Errorf("Stop says it cancelled %d runs; %d were", n, cancelled.Load())
	}
	// Apply after Stop is ignored rather than starting goroutines nobody stops.
	r.Apply([]Job{{Key: "late", Fingerprint: "1", Spec: Spec{Every: time.Millisecond}, Run: func(context.Context, Ticket) bool { return true }}})
}
