package schedule

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunnerFiresAndKeepsUnchangedJobs(t *testing.T) {
	r := NewRunner(promslog.NewNopLogger())
	var runs atomic.Int64
	var lastPlanned atomic.Int64
	job := Job{Key: "t/p", Fingerprint: "v1", Spec: Spec{Every: 10 * time.Millisecond},
		Run: func(_ context.Context, tk Ticket) {
			runs.Add(1)
			lastPlanned.Store(tk.Planned.UnixNano())
		}}
	r.Apply([]Job{job})
	waitUntil(t, "5 runs", func() bool { return runs.Load() >= 5 })

	r.mu.Lock()
	before := r.jobs["t/p"]
	r.mu.Unlock()
	r.Apply([]Job{job})
	r.mu.Lock()
	after := r.jobs["t/p"]
	r.mu.Unlock()
	if before != after {
		t.Error("unchanged job was restarted on Apply")
	}

	job.Fingerprint = "v2"
	r.Apply([]Job{job})
	r.mu.Lock()
	changed := r.jobs["t/p"]
	r.mu.Unlock()
	if changed == after {
		t.Error("changed job kept its old schedule")
	}

	r.Apply(nil)
	r.mu.Lock()
	n := len(r.jobs)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d jobs still scheduled after removing all", n)
	}
	stopped := runs.Load()
	time.Sleep(50 * time.Millisecond)
	if runs.Load() > stopped+1 {
		t.Errorf("removed job kept firing: %d → %d", stopped, runs.Load())
	}
	r.Stop(context.Background())
	if lastPlanned.Load() == 0 {
		t.Error("tickets carry no planned time")
	}
}

func TestRunnerSkipsWhenInFlight(t *testing.T) {
	r := NewRunner(promslog.NewNopLogger())
	release := make(chan struct{})
	var skipped, started atomic.Int64
	r.Apply([]Job{{Key: "slow", Fingerprint: "1", Spec: Spec{Every: 5 * time.Millisecond, MaxInFlight: 1},
		Run: func(ctx context.Context, _ Ticket) {
			started.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
		},
		Skipped: func(reason string) {
			if reason == SkipReasonInFlight {
				skipped.Add(1)
			}
		}}})
	waitUntil(t, "skips", func() bool { return skipped.Load() >= 3 })
	if started.Load() != 1 {
		t.Errorf("started %d runs with MaxInFlight 1", started.Load())
	}
	close(release)
	r.Stop(context.Background())
}

func TestStopDrainsThenCancels(t *testing.T) {
	r := NewRunner(promslog.NewNopLogger())
	var finished, cancelled atomic.Int64
	r.Apply([]Job{{Key: "k", Fingerprint: "1", Spec: Spec{Every: time.Millisecond, MaxInFlight: 4},
		Run: func(ctx context.Context, _ Ticket) {
			select {
			case <-time.After(time.Hour):
				finished.Add(1)
			case <-ctx.Done():
				cancelled.Add(1)
			}
		}}})
	time.Sleep(30 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.Stop(ctx)
	if time.Since(start) > 5*time.Second {
		t.Error("Stop did not honour its deadline")
	}
	if cancelled.Load() == 0 || finished.Load() != 0 {
		t.Errorf("finished %d cancelled %d: in-flight runs must be cancelled at the deadline and still return", finished.Load(), cancelled.Load())
	}
	// Apply after Stop is ignored rather than starting goroutines nobody stops.
	r.Apply([]Job{{Key: "late", Fingerprint: "1", Spec: Spec{Every: time.Millisecond}, Run: func(context.Context, Ticket) {}}})
}
