// Package integration drives the real probe drivers against the real
// simulator over loopback and checks the prober's numbers against the
// simulator's ground truth.
package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sim struct {
	url string
}

// startSimulator serves cfg on a loopback port until the test ends.
func startSimulator(t *testing.T, cfg simulator.Config) *sim {
	t.Helper()
	return &sim{url: simtest.Start(t, cfg).URL}
}

func newDriver(t *testing.T, protocol string, opts probe.TargetOptions) probe.Driver {
	t.Helper()
	d, err := probe.NewDriver(protocol, opts, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// groundTruth fetches the simulator's record of one request, waiting for it
// to be complete.
func (s *sim) groundTruth(t *testing.T, id string) simulator.RequestRecord {
	t.Helper()
	return simtest.GroundTruth(t, s.url, id)
}

// probeOnce sends a short streamed probe with a bounded deadline.
func probeOnce(d probe.Driver, maxTokens int, timeout time.Duration) *probe.Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.Probe(ctx, &probe.Request{
		Prompt:    "tell me about lighthouses",
		MaxTokens: maxTokens,
		IgnoreEOS: true,
		Stream:    true,
	})
}

// groundTruthRun is what one accuracy run measured, in seconds: prober
// TTFT minus server TTFT, the first token's read time minus its flush, and
// every token's read time minus its flush.
type groundTruthRun struct {
	ttft, first, token []float64
	tokens             int
	failures           int
}

// compareWithGroundTruth sends requests probes, concurrency at a time, and
// compares every successful one with the simulator's record of it. check,
// when set, runs under the run's lock for each result with its record and
// the flush times of its output chunks, for protocol-specific assertions.
func (s *sim) compareWithGroundTruth(t *testing.T, requests, concurrency int, send func() *probe.Result,
	check func(res *probe.Result, rec simulator.RequestRecord, flushes []int64)) *groundTruthRun {
	t.Helper()
	var (
		mu  sync.Mutex
		run groundTruthRun
		wg  sync.WaitGroup
	)
	work := make(chan struct{}, requests)
	for range requests {
		work <- struct{}{}
	}
	close(work)
	for range concurrency {
		wg.Go(func() {
			for range work {
				res := send()
				if res.Outcome != probe.OutcomeSuccess {
					mu.Lock()
					run.failures++
					mu.Unlock()
					t.Errorf("probe %s: %s %v", res.RequestID, res.Outcome, res.Err)
					continue
				}
				rec := s.groundTruth(t, res.RequestID)
				var flushes []int64
				for _, c := range rec.Chunks {
					if c.Content {
						flushes = append(flushes, c.UnixNano)
					}
				}
				start := res.Start.UnixNano()
				mu.Lock()
				if len(flushes) != len(res.Chunks) {
					t.Errorf("%s: prober saw %d output chunks, simulator flushed %d", res.RequestID, len(res.Chunks), len(flushes))
				} else {
					for i, c := range res.Chunks {
						run.token = append(run.token, float64(start+int64(c.At)-flushes[i])/1e9)
					}
					run.tokens += len(flushes)
				}
				run.ttft = append(run.ttft, (res.TTFT - time.Duration(rec.FirstTokenUnixNano-rec.ReceivedUnixNano)).Seconds())
				run.first = append(run.first, float64(start+int64(res.TTFT)-rec.FirstTokenUnixNano)/1e9)
				if check != nil {
					check(res, rec, flushes)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return &run
}

// medianWithin logs the median and p99 of errs (seconds) and fails the test
// when the median lies outside [lo, hi].
func medianWithin(t *testing.T, name string, errs []float64, lo, hi float64) {
	t.Helper()
	med, p99 := quantile(errs, 0.5), quantile(errs, 0.99)
	t.Logf("%-26s n=%5d  median %+8.3f ms  p99 %+8.3f ms", name, len(errs), med*1e3, p99*1e3)
	if med < lo || med > hi {
		t.Errorf("%s: median error %.3f ms outside [%.0f, %.0f] ms", name, med*1e3, lo*1e3, hi*1e3)
	}
}
