package main

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/simulator"
)

// The overhead of a client on one request is its TTFT minus the
// simulator's own share of it: from having read the whole request
// (received, taken after the handler read the body) to beginning the
// write of the first chunk carrying output (first_token_write, taken
// before the chunk is handed to the connection). Both processes read the
// same wall clock.
//
// The client's interval [Start, first read] contains the server's:
// Start is taken before the request is written and the server has read
// it only after that; the chunk is written only after first_token_write
// and read after it was written. A stamp taken late (the goroutine
// descheduled just before time.Now) only shrinks the server's interval.
// So the reference is a lower bound of TTFT and the overhead cannot go
// negative. What the overhead contains: the client's work from Start to
// its write syscall, both loopback transits, the server's HTTP layer
// before the handler has the body and its own write and flush of the
// chunk, and the client's wake-up, reading and parsing up to the first
// content chunk. It is an upper bound on the client's own cost; the raw
// client's, measured the same way, is what any net/http client pays here.
//
// The ground truth's first_token time (taken after the write and flush
// returned) is not such a bound: a client can read the chunk before the
// server's goroutine, back from the write, takes it. The overhead against
// it is printed as well (flush_based_min) to show how negative it goes.

// overheadStats are one client's overheads at one load.
type overheadStats struct {
	compared, missing, failed int
	// overhead, ttft and reference (server read → first token write),
	// seconds; flushBased is TTFT − (first token flushed − read).
	overhead, ttft, ref, flushBased []float64
}

type overheadRow struct {
	streams       int
	prober, raw   overheadStats
	proberRequest int
	rawRequest    int
}

// overhead measures both clients at each stream count: the prober through
// the engine, then the raw client, each after a warm-up; ground truth is
// fetched outside the measured windows and before the next window could
// evict it.
func (h *harness) overhead(ctx context.Context, streams []int) ([]overheadRow, error) {
	var rows []overheadRow
	for _, n := range streams {
		sh := shape{kind: closedLoop, n: n}
		if _, err := h.runProber(ctx, sh, h.o.warmup, false); err != nil {
			return nil, err
		}
		stopProfile, err := h.startProfile("prober-c" + itoa(n))
		if err != nil {
			return nil, err
		}
		ps, err := h.runProber(ctx, sh, h.o.stepDuration, true)
		stopProfile()
		if err != nil {
			return nil, err
		}
		row := overheadRow{streams: n, proberRequest: ps.requests}
		var ids []truthQuery
		for _, r := range ps.runs {
			if r.res.Outcome != probe.OutcomeSuccess || r.res.TTFT <= 0 {
				row.prober.failed++
				continue
			}
			ids = append(ids, truthQuery{id: r.res.RequestID, ttft: r.res.TTFT})
		}
		row.prober.fill(h.sim.truths(sample(ids, h.o.truthSample)))

		h.runRaw(ctx, sh, h.o.warmup, false)
		rs := h.runRaw(ctx, sh, h.o.stepDuration, true)
		row.rawRequest = rs.requests
		row.raw.failed = rs.failed
		ids = ids[:0]
		for _, t := range rs.ttfts {
			ids = append(ids, truthQuery(t))
		}
		row.raw.fill(h.sim.truths(sample(ids, h.o.truthSample)))
		rows = append(rows, row)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return rows, nil
}

func (h *harness) startProfile(name string) (stop func(), err error) {
	if h.o.profileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(h.o.profileDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(h.o.profileDir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// truthQuery is one request to look up and the client's TTFT of it.
type truthQuery struct {
	id   string
	ttft time.Duration
}

type truthAnswer struct {
	q   truthQuery
	rec simulator.RequestRecord
	err error
}

// sample takes n evenly spaced elements of xs (all when n ≤ 0 or fewer).
func sample[T any](xs []T, n int) []T {
	if n <= 0 || len(xs) <= n {
		return xs
	}
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, xs[i*len(xs)/n])
	}
	return out
}

// truths fetches the ground truth of every query, 8 at a time.
func (s *simProcess) truths(qs []truthQuery) []truthAnswer {
	out := make([]truthAnswer, len(qs))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				rec, err := s.groundTruth(qs[i].id)
				out[i] = truthAnswer{q: qs[i], rec: rec, err: err}
			}
		})
	}
	for i := range qs {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// fill adds the answers' overheads; records missing, unfinished or
// without both times count as missing.
func (st *overheadStats) fill(answers []truthAnswer) {
	for _, a := range answers {
		ref, ok := reference(a.rec)
		if a.err != nil || !ok {
			st.missing++
			continue
		}
		st.compared++
		st.ttft = append(st.ttft, a.q.ttft.Seconds())
		st.ref = append(st.ref, ref.Seconds())
		st.overhead = append(st.overhead, (a.q.ttft - ref).Seconds())
		st.flushBased = append(st.flushBased, (a.q.ttft - time.Duration(a.rec.FirstTokenUnixNano-a.rec.ReceivedUnixNano)).Seconds())
	}
}

// reference is the server's time from having read the request to
// beginning to write its first output chunk.
func reference(rec simulator.RequestRecord) (time.Duration, bool) {
	if !rec.Done || rec.ReceivedUnixNano == 0 || rec.FirstTokenWriteUnixNano == 0 || rec.FirstTokenUnixNano == 0 {
		return 0, false
	}
	return time.Duration(rec.FirstTokenWriteUnixNano - rec.ReceivedUnixNano), true
}

var errNoTruth = errors.New("no ground truth (evicted or unknown)")

// quantile of xs (unsorted) by nearest rank on the sorted copy; NaN when
// empty.
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
