package collector

import (
	"slices"
	"time"
)

// Classic bucket boundaries: coarse ladders, at most 12 boundaries per
// histogram with the probe's SLO threshold added (withThresholds), because
// the native histogram beside them carries the resolution and every
// classic line costs scrape time and bytes for every probe
// (docs/performance.md). Of the probe's own histograms only TTFT has
// classic buckets (families.go: the series budget); the TPOT ladder
// serves the server-reported time_per_token. The TTFT and TPOT ladders
// are subsets of the ExplicitBucketBoundaries advised by the OpenTelemetry
// GenAI semantic conventions (docs/gen-ai/gen-ai-metrics.md:
// gen_ai.server.time_to_first_token, gen_ai.server.time_per_output_token),
// so every le the prober exports is one an OTel-instrumented server
// exports too. Neighbouring boundaries are at most 2.5 apart (TTFT: 4
// between 10 and 40 ms, two boundaries fewer for the series budget),
// which bounds the error of histogram_quantile on classic buckets alone
// (docs/metrics.md, 1.6).
// They are functions returning fresh slices so that no caller can mutate a
// shared default.

func ttftBuckets() []float64 {
	return []float64{0.01, 0.04, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// tpotBuckets are the classic buckets of the server-reported time_per_token
// (server_timing_metrics.go), a per-token decode time like TPOT.
func tpotBuckets() []float64 {
	return []float64{0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5}
}

// withThresholds returns buckets plus every positive threshold, sorted and
// without duplicates, so an le-based SLO ratio at the threshold is exact. The
// threshold is converted with Duration.Seconds, the same conversion Observe
// uses, so a value equal to the threshold falls in its bucket.
func withThresholds(buckets []float64, thresholds ...time.Duration) []float64 {
	for _, t := range thresholds {
		if t > 0 {
			buckets = append(buckets, t.Seconds())
		}
	}
	slices.Sort(buckets)
	return slices.Compact(buckets)
}
