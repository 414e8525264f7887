package main

import (
	"context"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

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
