package main

import (
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// truthStats compares the prober's read times with the simulator's flush
// times, as test/integration/accuracy_test.go does: for the first token
// and for every token, Start + Chunk.At − the flush's wall-clock time.
type truthStats struct {
	compared, missing, mismatched, failed int
	first, token                          []float64 // seconds
}

func (h *harness) compareTruth(runs []probeRun) truthStats {
	var ts truthStats
	var ok []probeRun
	for _, r := range runs {
		if r.res.Outcome == probe.OutcomeSuccess {
			ok = append(ok, r)
		} else {
			ts.failed++
		}
	}
	sample := ok
	if n := h.o.truthSample; n > 0 && len(ok) > n {
		sample = make([]probeRun, 0, n)
		for i := range n {
			sample = append(sample, ok[i*len(ok)/n])
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan probeRun)
	for range 8 {
		wg.Go(func() {
			for r := range work {
				rec, err := h.sim.groundTruth(r.res.RequestID)
				mu.Lock()
				switch {
				case errors.Is(err, errNoTruth) || (err == nil && !rec.Done):
					ts.missing++
				case err != nil:
					ts.missing++
				default:
					var flushes []int64
					for _, c := range rec.Chunks {
						if c.Content {
							flushes = append(flushes, c.UnixNano)
						}
					}
					start := r.res.Start.UnixNano()
					if len(flushes) != len(r.res.Chunks) || len(flushes) == 0 {
						ts.mismatched++
						break
					}
					ts.compared++
					ts.first = append(ts.first, float64(start+int64(r.res.TTFT)-rec.FirstTokenUnixNano)/1e9)
					for i, c := range r.res.Chunks {
						ts.token = append(ts.token, float64(start+int64(c.At)-flushes[i])/1e9)
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, r := range sample {
		work <- r
	}
	close(work)
	wg.Wait()
	return ts
}

// quantile of xs (unsorted), NaN when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func durQuantile(ds []time.Duration, q float64) float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = d.Seconds()
	}
	return quantile(xs, q)
}
