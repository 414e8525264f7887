package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/simulator"
)

// costPair is one prober window and one raw-client window run back to
// back under the same load; which ran first alternates between pairs, so
// a drift in the machine's load does not favour one client.
type costPair struct {
	// order is the order its windows ran in: P prober (the harness's
	// direct path), D the daemon's path (engine.Engine with its sinks),
	// R the raw client.
	order                string
	prober, raw          usage
	proberTok, rawTok    int
	proberReqs, rawReqs  int
	proberFail, rawFails int
	daemon               usage
	daemonTok, daemonReq int
	daemonFail           int
	daemonGaps           []time.Duration
	// proberGaps and rawGaps are the gaps between consecutive content
	// chunks that the simulator actually produced for a sample of each
	// window's requests (its ground truth): the requested gap is only a
	// timer's wish, and Go timers on a VM wake up to a millisecond late.
	proberGaps, rawGaps []time.Duration
}

// usPerToken is CPU µs per output token.
func usPerToken(u usage, tokens int) float64 {
	if tokens == 0 {
		return math.NaN()
	}
	return float64(u.cpu.Microseconds()) / float64(tokens)
}

func (p costPair) ratio() float64 {
	return usPerToken(p.prober, p.proberTok) / usPerToken(p.raw, p.rawTok)
}

// daemonRatio is the daemon's path per token over the raw client's.
func (p costPair) daemonRatio() float64 {
	return usPerToken(p.daemon, p.daemonTok) / usPerToken(p.raw, p.rawTok)
}

type costRow struct {
	gap     time.Duration
	streams int
	pairs   []costPair
}

// summary is the median and the range of xs.
type summary struct{ median, min, max float64 }

func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{m, s[0], s[len(s)-1]}
}

func (r costRow) ratios() summary {
	var xs []float64
	for _, p := range r.pairs {
		xs = append(xs, p.ratio())
	}
	return summarize(xs)
}

func (r costRow) daemonRatios() summary {
	var xs []float64
	for _, p := range r.pairs {
		xs = append(xs, p.daemonRatio())
	}
	return summarize(xs)
}

func (r costRow) daemonPerToken() summary {
	var xs []float64
	for _, p := range r.pairs {
		xs = append(xs, usPerToken(p.daemon, p.daemonTok))
	}
	return summarize(xs)
}

func (r costRow) perToken(prober bool) summary {
	var xs []float64
	for _, p := range r.pairs {
		if prober {
			xs = append(xs, usPerToken(p.prober, p.proberTok))
		} else {
			xs = append(xs, usPerToken(p.raw, p.rawTok))
		}
	}
	return summarize(xs)
}

func (r costRow) tokensPerSecond(prober bool) summary {
	var xs []float64
	for _, p := range r.pairs {
		if prober {
			xs = append(xs, float64(p.proberTok)/p.prober.wall.Seconds())
		} else {
			xs = append(xs, float64(p.rawTok)/p.raw.wall.Seconds())
		}
	}
	return summarize(xs)
}

// gaps is the median, p90 and mean of the chunk gaps the simulator
// produced for one client's sampled requests across the row's pairs: P
// prober, D daemon's path, R raw. The mean matters as much as the median:
// late timer wake-ups make the distribution long-tailed, and the tokens
// per second follow the mean.
func (r costRow) gaps(client byte) (p50, p90, mean float64) {
	var all []time.Duration
	for _, p := range r.pairs {
		switch client {
		case 'P':
			all = append(all, p.proberGaps...)
		case 'D':
			all = append(all, p.daemonGaps...)
		default:
			all = append(all, p.rawGaps...)
		}
	}
	var sum time.Duration
	for _, g := range all {
		sum += g
	}
	mean = math.NaN()
	if len(all) > 0 {
		mean = (sum / time.Duration(len(all))).Seconds()
	}
	return durQuantile(all, 0.5), durQuantile(all, 0.9), mean
}

// chunkGaps fetches the ground truth of ids (outside any measured
// window) and returns the time between consecutive content chunks of
// each, as the simulator flushed them.
func (s *simProcess) chunkGaps(ids []string) []time.Duration {
	var qs []truthQuery
	for _, id := range ids {
		qs = append(qs, truthQuery{id: id})
	}
	var out []time.Duration
	for _, a := range s.truths(qs) {
		if a.err == nil {
			out = append(out, contentGaps(a.rec.Chunks)...)
		}
	}
	return out
}

// contentGaps is the time between consecutive content chunks.
func contentGaps(chunks []simulator.ChunkRecord) []time.Duration {
	var out []time.Duration
	var prev int64
	for _, c := range chunks {
		if !c.Content {
			continue
		}
		if prev != 0 {
			out = append(out, time.Duration(c.UnixNano-prev))
		}
		prev = c.UnixNano
	}
	return out
}

// measureCost runs, for each chunk gap (the simulator's decode time per
// token, in a simulator of its own) and each stream count, a warm-up of
// both clients and then o.pairs interleaved pairs of closed-loop windows.
func measureCost(ctx context.Context, o options, gaps []time.Duration, streams []int) ([]costRow, error) {
	var rows []costRow
	for _, gap := range gaps {
		sim, err := startSimulator(ctx, o, gap)
		if err != nil {
			return nil, err
		}
		h, err := newHarness(sim, o)
		if err != nil {
			sim.stop()
			return nil, err
		}
		for _, n := range streams {
			row, err := h.costRow(ctx, gap, n)
			if err != nil {
				h.close()
				sim.stop()
				return nil, err
			}
			rows = append(rows, row)
		}
		h.close()
		sim.stop()
	}
	return rows, nil
}

func (h *harness) costRow(ctx context.Context, gap time.Duration, n int) (costRow, error) {
	row := costRow{gap: gap, streams: n}
	sh := shape{kind: closedLoop, n: n}
	if _, err := h.runProber(ctx, sh, h.o.warmup, false); err != nil {
		return row, err
	}
	h.runRaw(ctx, sh, h.o.warmup, false)
	if _, _, err := h.runDaemonPath(ctx, n, h.o.warmup); err != nil {
		return row, err
	}
	// The three windows of a pair rotate, so that each client runs first,
	// second and third equally often.
	orders := []string{"PDR", "DRP", "RPD"}
	for i := range h.o.pairs {
		p := costPair{order: orders[i%len(orders)]}
		prober := func() error {
			ps, err := h.runProber(ctx, sh, h.o.pairWindow, false)
			if err != nil {
				return err
			}
			p.prober, p.proberTok, p.proberReqs, p.proberFail = ps.use, ps.tokens, ps.requests, ps.requests-ps.success
			p.proberGaps = h.sim.chunkGaps(ps.last.ids)
			return nil
		}
		raw := func() {
			rs := h.runRaw(ctx, sh, h.o.pairWindow, false)
			p.raw, p.rawTok, p.rawReqs, p.rawFails = rs.use, rs.tokens, rs.requests, rs.failed
			p.rawGaps = h.sim.chunkGaps(rs.last.ids)
		}
		daemon := func() error {
			use, c, err := h.runDaemonPath(ctx, n, h.o.pairWindow)
			if err != nil {
				return err
			}
			p.daemon, p.daemonTok, p.daemonReq, p.daemonFail = use, c.tokens, c.requests, c.requests-c.success
			p.daemonGaps = h.sim.chunkGaps(c.last.ids)
			return nil
		}
		for _, w := range p.order {
			var err error
			switch w {
			case 'P':
				err = prober()
			case 'D':
				err = daemon()
			case 'R':
				raw()
			}
			if err != nil {
				return row, err
			}
		}
		row.pairs = append(row.pairs, p)
	}
	return row, h.profileCost(ctx, sh, gap)
}

// profileCost writes, with -profile-dir, a CPU profile of one more window
// of each client after the pairs: outside the measured pairs, because
// profiling costs CPU of its own, and of every client, so that what the
// prober pays on top of the raw client can be read off the two, and
// what the daemon's path pays on top of the prober's.
func (h *harness) profileCost(ctx context.Context, sh shape, gap time.Duration) error {
	if h.o.profileDir == "" || ctx.Err() != nil {
		return ctx.Err()
	}
	name := fmt.Sprintf("cost-%s-%s", strings.ReplaceAll(gap.String(), "µ", "u"), sh)
	stop, err := h.startProfile("prober-" + name)
	if err != nil {
		return err
	}
	_, err = h.runProber(ctx, sh, h.o.pairWindow, false)
	stop()
	if err != nil {
		return err
	}
	if stop, err = h.startProfile("raw-" + name); err != nil {
		return err
	}
	h.runRaw(ctx, sh, h.o.pairWindow, false)
	stop()
	if stop, err = h.startProfile("daemon-" + name); err != nil {
		return err
	}
	_, _, err = h.runDaemonPath(ctx, sh.n, h.o.pairWindow)
	stop()
	if err != nil {
		return err
	}
	return ctx.Err()
}
