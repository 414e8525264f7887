package main

import (
	"context"
	"time"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
)

// burstRow is bursts of one variant: without a lead (each run starts at
// the planned time, builds its request and sends it: the path before the
// release barrier) or with the engine's lead (prepared, then released
// together).
type burstRow struct {
	name string
	// conns says whether the server keeps connections (pooled) or closes
	// each after its answer (new).
	conns string
	lead  time.Duration
	runs  []probeRun
	// spreads are the job's BurstSpread reports: first to last Start,
	// what llm_probe_burst_spread_seconds records.
	spreads []time.Duration
	// serverSpreads are, per burst whose every request has a record,
	// first to last request fully read by the simulator.
	serverSpreads []time.Duration
	skipped       int64
	missing       int
}

// bursts alternates the two variants in rounds, so both see the same
// drift in the machine's load, after an unmeasured round of each.
func (h *harness) bursts(ctx context.Context, n int, conns string) ([]burstRow, error) {
	rows := []burstRow{{name: "no lead (before)", conns: conns}, {name: "lead (after)", conns: conns, lead: engine.BurstLead}}
	const rounds = 2
	for i := range rows {
		if _, err := h.runProber(ctx, shape{kind: burstEvery, n: n, lead: rows[i].lead}, h.o.warmup, false); err != nil {
			return nil, err
		}
	}
	for range rounds {
		for i := range rows {
			ps, err := h.runProber(ctx, shape{kind: burstEvery, n: n, lead: rows[i].lead}, h.o.burstDuration/rounds, true)
			if err != nil {
				return nil, err
			}
			rows[i].runs = append(rows[i].runs, ps.runs...)
			rows[i].spreads = append(rows[i].spreads, ps.spreads...)
			rows[i].skipped += ps.skipped.Load()
		}
	}
	for i := range rows {
		r := &rows[i]
		var qs []truthQuery
		for _, run := range r.runs {
			qs = append(qs, truthQuery{id: run.res.RequestID})
		}
		received := map[string]int64{}
		for _, a := range h.sim.truths(qs) {
			if a.err != nil || a.rec.ReceivedUnixNano == 0 {
				r.missing++
				continue
			}
			received[a.q.id] = a.rec.ReceivedUnixNano
		}
		r.serverSpreads = serverSpreads(r.runs, received)
	}
	return rows, nil
}

// serverSpreads groups runs by planned time and returns, for each group
// with a received time for every run, the last minus the first.
func serverSpreads(runs []probeRun, received map[string]int64) []time.Duration {
	type span struct {
		first, last int64
		complete    bool
		n           int
	}
	groups := map[time.Time]*span{}
	var order []time.Time
	for _, r := range runs {
		g, ok := groups[r.planned]
		if !ok {
			g = &span{complete: true}
			groups[r.planned] = g
			order = append(order, r.planned)
		}
		at, ok := received[r.res.RequestID]
		if !ok {
			g.complete = false
			continue
		}
		if g.n == 0 || at < g.first {
			g.first = at
		}
		if g.n == 0 || at > g.last {
			g.last = at
		}
		g.n++
	}
	var out []time.Duration
	for _, t := range order {
		if g := groups[t]; g.complete && g.n >= 2 {
			out = append(out, time.Duration(g.last-g.first))
		}
	}
	return out
}

// scheduleRow is one open-loop rate step.
type scheduleRow struct {
	name  string
	rate  float64
	stats *proberStats
}

// schedules runs rate/s evenly spaced and Poisson, each after a warm-up.
func (h *harness) schedules(ctx context.Context, rate float64) ([]scheduleRow, error) {
	var rows []scheduleRow
	for _, sh := range []shape{{kind: constantRate, rate: rate}, {kind: poissonRate, rate: rate}} {
		if _, err := h.runProber(ctx, sh, h.o.warmup, false); err != nil {
			return nil, err
		}
		ps, err := h.runProber(ctx, sh, h.o.stepDuration, true)
		if err != nil {
			return nil, err
		}
		rows = append(rows, scheduleRow{name: sh.String(), rate: rate, stats: ps})
	}
	return rows, nil
}

// lagsOf returns Start − planned of each run, and how many failed and
// dialled a new connection.
func lagsOf(runs []probeRun) (lags []time.Duration, failed, dials int) {
	for _, r := range runs {
		lags = append(lags, max(r.res.Start.Sub(r.planned), 0))
		if r.res.Outcome != probe.OutcomeSuccess {
			failed++
		}
		if r.res.Phases.HasConnect {
			dials++
		}
	}
	return lags, failed, dials
}
