package bench

import (
	"fmt"
	"math"
	"slices"

	"github.com/llm-prober/llm-prober/probe"
)

// sketchGamma is the ratio between consecutive bucket bounds. A value is
// represented by its bucket's midpoint, 2γ^i/(γ+1), within
// (γ−1)/(γ+1) ≈ 0.5% of itself (DDSketch's guarantee), whatever the
// number of observations. Buckets add, so merging sketches of two runs
// gives exactly the sketch of their union: percentiles of a merged run
// are computed, not averaged.
const sketchGamma = 1.01

// maxSketchCount bounds a sketch read from a file (2^40 observations).
const maxSketchCount = 1 << 40

// Sketch is a log-bucketed histogram of one statistic (seconds or
// tokens), as --output carries it for `llm-prober bench-merge`.
type Sketch struct {
	Gamma float64 `json:"gamma"`
	Count int     `json:"count"`
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	// Zero counts observations ≤ 0 (a zero-length gap between two
	// chunks read together), which no log bucket holds.
	Zero int `json:"zero,omitempty"`
	// Buckets are [index, count] pairs in increasing index; bucket i
	// holds values in (γ^(i−1), γ^i].
	Buckets [][2]int `json:"buckets"`
}

// Histograms are a step's sketches, one per summarised statistic.
type Histograms struct {
	TTFT         *Sketch `json:"time_to_first_token_seconds"`
	TPOT         *Sketch `json:"time_per_output_token_seconds"`
	ITL          *Sketch `json:"inter_token_latency_seconds"`
	Latency      *Sketch `json:"request_latency_seconds"`
	OutputTokens *Sketch `json:"output_tokens_per_request"`
	InputTokens  *Sketch `json:"input_tokens_per_request"`
}

// sketchBuilder counts by bucket index while observing.
type sketchBuilder struct {
	counts map[int]int
	s      Sketch
}

func newSketchBuilder() *sketchBuilder {
	return &sketchBuilder{counts: map[int]int{}, s: Sketch{Gamma: sketchGamma}}
}

func (b *sketchBuilder) observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	if b.s.Count == 0 || v < b.s.Min {
		b.s.Min = v
	}
	if b.s.Count == 0 || v > b.s.Max {
		b.s.Max = v
	}
	b.s.Count++
	b.s.Sum += v
	if v <= 0 {
		b.s.Zero++
		return
	}
	b.counts[int(math.Ceil(math.Log(v)/math.Log(sketchGamma)))]++
}

func (b *sketchBuilder) sketch() *Sketch {
	s := b.s
	s.Buckets = make([][2]int, 0, len(b.counts))
	for i, c := range b.counts {
		s.Buckets = append(s.Buckets, [2]int{i, c})
	}
	slices.SortFunc(s.Buckets, func(a, b [2]int) int { return a[0] - b[0] })
	return &s
}

// newHistograms sketches the statistics of computeStats over the same
// samples and with the same rules (successes only).
func newHistograms(samples []*sample) *Histograms {
	ttft, tpot, itl, lat, out, in := newSketchBuilder(), newSketchBuilder(), newSketchBuilder(), newSketchBuilder(), newSketchBuilder(), newSketchBuilder()
	for _, r := range samples {
		if r.outcome != probe.OutcomeSuccess {
			continue
		}
		if r.ttft > 0 {
			ttft.observe(r.ttft.Seconds())
		}
		if r.hasTPOT {
			tpot.observe(r.tpot.Seconds())
		}
		for _, ns := range r.itl {
			itl.observe(float64(ns) / 1e9)
		}
		lat.observe(r.endToEnd.Seconds())
		out.observe(float64(r.outputTokens))
		if r.inputKnown {
			in.observe(float64(r.inputTokens))
		}
	}
	return &Histograms{TTFT: ttft.sketch(), TPOT: tpot.sketch(), ITL: itl.sketch(), Latency: lat.sketch(), OutputTokens: out.sketch(), InputTokens: in.sketch()}
}

// check rejects a sketch that was not written by this code's rules: a
// merge must not turn a corrupt input into plausible numbers.
func (s *Sketch) check() error {
	if s == nil {
		return fmt.Errorf("missing")
	}
	if s.Gamma != sketchGamma {
		return fmt.Errorf("gamma %g, want %g (written by another version?)", s.Gamma, sketchGamma)
	}
	n := s.Zero
	if s.Zero < 0 {
		return fmt.Errorf("negative zero count")
	}
	for k, b := range s.Buckets {
		if b[1] <= 0 {
			return fmt.Errorf("bucket %d has count %d", b[0], b[1])
		}
		if k > 0 && b[0] <= s.Buckets[k-1][0] {
			return fmt.Errorf("buckets not in increasing order at %d", b[0])
		}
		if b[0] < -100000 || b[0] > 100000 {
			return fmt.Errorf("bucket index %d out of range", b[0])
		}
		n += b[1]
		if n < 0 {
			return fmt.Errorf("counts overflow")
		}
	}
	// A bound far above any real run keeps merged sums from overflowing.
	if n > maxSketchCount {
		return fmt.Errorf("%d observations: implausibly many", n)
	}
	if n != s.Count {
		return fmt.Errorf("buckets hold %d observations, count says %d", n, s.Count)
	}
	if s.Count > 0 && !(s.Min <= s.Max) {
		return fmt.Errorf("min %g above max %g", s.Min, s.Max)
	}
	return nil
}

// merge returns the sketch of both sketches' observations.
func (s *Sketch) merge(o *Sketch) *Sketch {
	switch {
	case o.Count == 0:
		c := *s
		return &c
	case s.Count == 0:
		c := *o
		return &c
	}
	m := &Sketch{Gamma: s.Gamma, Count: s.Count + o.Count, Sum: s.Sum + o.Sum, Min: min(s.Min, o.Min), Max: max(s.Max, o.Max), Zero: s.Zero + o.Zero}
	i, j := 0, 0
	for i < len(s.Buckets) || j < len(o.Buckets) {
		switch {
		case j == len(o.Buckets) || (i < len(s.Buckets) && s.Buckets[i][0] < o.Buckets[j][0]):
			m.Buckets = append(m.Buckets, s.Buckets[i])
			i++
		case i == len(s.Buckets) || o.Buckets[j][0] < s.Buckets[i][0]:
			m.Buckets = append(m.Buckets, o.Buckets[j])
			j++
		default:
			m.Buckets = append(m.Buckets, [2]int{s.Buckets[i][0], s.Buckets[i][1] + o.Buckets[j][1]})
			i++
			j++
		}
	}
	return m
}

// quantile is the nearest-rank quantile as the sketch knows it: the
// representative value of the bucket holding rank ⌈q·n⌉, kept within
// [Min, Max] so the extremes stay exact.
func (s *Sketch) quantile(q float64) float64 {
	if s.Count == 0 {
		return 0
	}
	rank := max(int(math.Ceil(q*float64(s.Count))), 1)
	if rank <= s.Zero {
		return s.Min
	}
	seen := s.Zero
	for _, b := range s.Buckets {
		seen += b[1]
		if seen >= rank {
			v := 2 * math.Pow(s.Gamma, float64(b[0])) / (s.Gamma + 1)
			return min(max(v, s.Min), s.Max)
		}
	}
	return s.Max
}

// summary is the sketch as a Summary: count, average, extremes exact,
// percentiles within the sketch's relative error.
func (s *Sketch) summary() Summary {
	if s.Count == 0 {
		return Summary{}
	}
	return Summary{Count: s.Count, Avg: s.Sum / float64(s.Count), Min: s.Min, Max: s.Max,
		P50: s.quantile(0.5), P75: s.quantile(0.75), P90: s.quantile(0.9), P95: s.quantile(0.95), P99: s.quantile(0.99)}
}
