package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
)

// Cancellation probes (docs/metrics.md, "Cancellation"): the driver cuts
// the stream after some tokens (probe.CancelAfter); just before the cut
// the target's llm_server_requests_running is read, and after it the
// gauge is read every poll interval until it is below that value (the
// slot was freed: released, after the time from the cut to that read),
// or the release timeout passes (leaked), or nothing could be read
// (unknown).

// RunningReader reads a target's normalised running requests now;
// collector.ServerMetrics.RequestsRunning is the real one.
type RunningReader interface {
	RequestsRunning(ctx context.Context, target string) (float64, error)
}

// Cancel makes a Probe a cancellation probe.
type Cancel struct {
	// AfterTokens is how many output tokens are read before the cut.
	AfterTokens int
	// ReleaseTimeout bounds the wait for the slot after the cut;
	// PollInterval is the time between two reads of the gauge.
	ReleaseTimeout, PollInterval time.Duration
	// Running reads the target's running requests.
	Running RunningReader
}

// newCancel is pc's cancel: read through running; nil without one.
func newCancel(pc *config.Probe, running RunningReader) *Cancel {
	c := pc.Cancel
	if c == nil {
		return nil
	}
	return &Cancel{AfterTokens: c.AfterTokens, ReleaseTimeout: time.Duration(c.ReleaseTimeout),
		PollInterval: time.Duration(c.PollInterval), Running: running}
}

// cancelServerTargets are the server_metrics of cfg's targets that have
// cancellation probes. The engine reads them through a collector of its
// own, apart from the /metrics one, so a replica reads the servers of its
// probes whichever replica exports their metrics (sharding).
func cancelServerTargets(cfg *config.Config) []collector.ServerTarget {
	has := map[string]bool{}
	for _, t := range cfg.Targets {
		for _, pc := range t.Probes {
			if pc != nil && pc.Cancel != nil {
				has[t.Name] = true
			}
		}
	}
	var ts []collector.ServerTarget
	for _, st := range cfg.ServerTargets() {
		if has[st.Name] {
			ts = append(ts, st)
		}
	}
	return ts
}

// reading is one read of the running gauge.
type reading struct {
	value float64
	err   error
	done  bool
}

// arm sets req up to be cut, with the reading before the cut into r.
func (c *Cancel) arm(ctx context.Context, target string, req *probe.Request, r *reading) {
	req.CancelAfter = &probe.CancelAfter{Tokens: c.AfterTokens, Before: func() {
		r.value, r.err = c.Running.RequestsRunning(ctx, target)
		r.done = true
	}}
}

// measure waits for the server to free the slot of res's cut request
// (closed at closed), with before the reading taken before the cut, and
// records the outcome in res.Cancel. ctx ending early makes it unknown.
func (c *Cancel) measure(ctx context.Context, target string, res *probe.Result, before *reading, closed time.Time) {
	cut := res.Cancel
	cut.Release = probe.CancelReleaseUnknown
	if !before.done || before.err != nil {
		cut.Err = before.err
		return
	}
	cut.RunningBefore = before.value
	wctx, cancel := context.WithDeadline(ctx, closed.Add(c.ReleaseTimeout))
	defer cancel()
	read := false
	for next := closed; ; {
		v, err := c.Running.RequestsRunning(wctx, target)
		if err != nil {
			cut.Err = err
		} else {
			read = true
			if v <= before.value-1 || v <= 0 {
				cut.Release, cut.ReleaseAfter = probe.CancelReleased, time.Since(closed)
				return
			}
		}
		// Reads every poll interval from the cut, not from the end of the
		// last read; a read slower than the interval is followed at once.
		next = next.Add(c.PollInterval)
		if waitFor(wctx, next) != nil {
			break
		}
	}
	switch {
	case read && ctx.Err() == nil:
		cut.Release, cut.Err = probe.CancelLeaked, nil
	case ctx.Err() != nil:
		cut.Err = fmt.Errorf("stopped while waiting for the release: %w", ctx.Err())
	}
}

// logCancel logs a cut's measurement at debug level; the counters carry
// it, and a leaking server would otherwise log at every run.
func logCancel(logger *slog.Logger, res *probe.Result) {
	if c := res.Cancel; c != nil {
		logger.Debug("Stream cut on purpose", "request_id", res.RequestID, "tokens", c.Tokens, "release", c.Release,
			"release_after", c.ReleaseAfter, "running_before", c.RunningBefore, "err", c.Err)
	}
}

// waitFor sleeps until at or until ctx ends (its error).
func waitFor(ctx context.Context, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CancelSink feeds the cancellation metrics (collector.CancelMetrics)
// as a sink: only probes with cancel: get series.
func CancelSink(m *collector.CancelMetrics) Sink { return cancelSink{m} }

type cancelSink struct{ m *collector.CancelMetrics }

func (s cancelSink) Add(i Info) {
	if !i.Cancel {
		s.m.Remove(i.Target, i.Probe)
		return
	}
	s.m.Add(collector.CancelSeries{Target: i.Target, Probe: i.Probe, Model: i.Model, Histograms: i.Histograms})
}

func (s cancelSink) Remove(target, probeName string) { s.m.Remove(target, probeName) }

func (s cancelSink) Record(target, probeName string, _ *probe.Request, res *probe.Result) {
	s.m.Observe(target, probeName, res)
}
