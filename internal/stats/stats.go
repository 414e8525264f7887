// Package stats summarises a sample of measurements the way load-testing
// tools report them (average, extremes and nearest-rank percentiles), so the
// probe report, the status page and `llm-prober bench` print the same
// numbers for the same sample.
package stats

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Quantiles are the percentiles every Summary carries, in the order tools
// such as genai-perf and perf_analyzer print them.
var quantiles = [...]float64{0.50, 0.75, 0.90, 0.95, 0.99}

// Summary describes a sample. All fields are zero when Count is zero.
type Summary struct {
	Count                   int
	Avg, Min, Max           float64
	P50, P75, P90, P95, P99 float64
}

// Summarise sorts values in place and summarises them. float32 serves
// samples too large to hold as float64 (millions of inter-token gaps); the
// sum is taken in float64 either way.
func Summarise[T float32 | float64](values []T) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	slices.Sort(values)
	var sum float64
	for _, v := range values {
		sum += float64(v)
	}
	s := Summary{Count: len(values), Avg: sum / float64(len(values)), Min: float64(values[0]), Max: float64(values[len(values)-1])}
	dst := [...]*float64{&s.P50, &s.P75, &s.P90, &s.P95, &s.P99}
	for i, q := range quantiles {
		*dst[i] = float64(Percentile(values, q))
	}
	return s
}

// DividedBy is s with every value divided by d: a change of unit, such as
// nanoseconds to seconds (dividing by 1e9 rounds correctly where
// multiplying by 1e-9 would not).
func (s Summary) DividedBy(d float64) Summary {
	return Summary{Count: s.Count, Avg: s.Avg / d, Min: s.Min / d, Max: s.Max / d,
		P50: s.P50 / d, P75: s.P75 / d, P90: s.P90 / d, P95: s.P95 / d, P99: s.P99 / d}
}

// Percentile is the nearest-rank percentile (q in [0,1]) of sorted values:
// always a value that was measured, never an interpolation between two.
func Percentile[T float32 | float64 | time.Duration | int](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Millis prints d in milliseconds, without the unit, to the precision that
// suits its size: three decimals below 1 ms, two below 100 ms, one above.
func Millis(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}
