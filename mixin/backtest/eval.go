package backtest

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
)

// rangeCache is the rules' QueryFunc in chunked evaluation. A rule asks
// for its expression at one evaluation time after another; the first ask
// within a chunk runs the expression once as a range query over all of the
// chunk's evaluation times, and every ask is answered from that result.
// PromQL defines a range query as the instant queries at each of its steps,
// so the answers are the instant queries' (TestChunkedEqualsExact checks
// it on whole runs); the engine, though, reads each series' window once per
// chunk and then slides it, instead of reading a 3-day window again every
// 30 seconds. An expression whose range query fails is answered by
// instant queries, so an error surfaces at the evaluation that has it.
type rangeCache struct {
	engine *promql.Engine
	q      storage.Queryable
	// The evaluation times of the group being evaluated in this chunk:
	// start, start+step, ..., end.
	start, end time.Time
	step       time.Duration
	m          map[rangeKey]*rangeResult
	// tick: the rule being evaluated reads its own or a later rule's
	// output (Rules.feedbackSpans), so it is evaluation by evaluation,
	// with instant queries.
	tick bool
	// open are the chunk's range queries: Close hands their points back
	// to the engine's pools, so they stay open while m refers to them.
	open []promql.Query
}

type rangeKey struct {
	qs          string
	start, step int64
}

type rangeResult struct {
	series  []promql.Series
	fpos    []int
	hpos    []int
	instant bool
}

// group sets the evaluation times of the group about to be evaluated.
func (c *rangeCache) group(start, end time.Time, step time.Duration) {
	c.start, c.end, c.step = start, end, step
}

// close closes the chunk's queries; the next chunk starts afresh.
func (c *rangeCache) close() {
	for _, q := range c.open {
		q.Close()
	}
	c.open = c.open[:0]
	clear(c.m)
}

func (c *rangeCache) instant(ctx context.Context, qs string, t time.Time) (promql.Vector, error) {
	return rules.EngineQueryFunc(c.engine, c.q)(ctx, qs, t)
}

func (c *rangeCache) query(ctx context.Context, qs string, t time.Time) (promql.Vector, error) {
	if c.tick || t.Before(c.start) || t.After(c.end) || t.Sub(c.start)%c.step != 0 {
		return c.instant(ctx, qs, t)
	}
	key := rangeKey{qs, c.start.UnixMilli(), c.step.Milliseconds()}
	r, ok := c.m[key]
	if !ok {
		r = c.run(ctx, qs)
		c.m[key] = r
	}
	if r.instant {
		return c.instant(ctx, qs, t)
	}
	ms := t.UnixMilli()
	var vec promql.Vector
	for i := range r.series {
		s := &r.series[i]
		for r.fpos[i] < len(s.Floats) && s.Floats[r.fpos[i]].T < ms {
			r.fpos[i]++
		}
		if r.fpos[i] < len(s.Floats) && s.Floats[r.fpos[i]].T == ms {
			vec = append(vec, promql.Sample{Metric: s.Metric, T: ms, F: s.Floats[r.fpos[i]].F, DropName: s.DropName})
			continue
		}
		for r.hpos[i] < len(s.Histograms) && s.Histograms[r.hpos[i]].T < ms {
			r.hpos[i]++
		}
		if r.hpos[i] < len(s.Histograms) && s.Histograms[r.hpos[i]].T == ms {
			vec = append(vec, promql.Sample{Metric: s.Metric, T: ms, H: s.Histograms[r.hpos[i]].H, DropName: s.DropName})
		}
	}
	return vec, nil
}

func (c *rangeCache) run(ctx context.Context, qs string) *rangeResult {
	q, err := c.engine.NewRangeQuery(ctx, c.q, nil, qs, c.start, c.end, c.step)
	if err != nil {
		return &rangeResult{instant: true}
	}
	res := q.Exec(ctx)
	m, ok := res.Value.(promql.Matrix)
	if res.Err != nil || !ok {
		q.Close()
		return &rangeResult{instant: true}
	}
	c.open = append(c.open, q)
	return &rangeResult{series: m, fpos: make([]int, len(m)), hpos: make([]int, len(m))}
}
