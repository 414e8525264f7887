package collector

import (
	"slices"
	"time"
)

// Classic bucket boundaries: coarse ladders, at most 12 boundaries per
// histogram with the probe's SLO threshold added (withThresholds), because
// the native histogram beside them carries the resolution and every
// classic line costs scrape time and bytes for every probe
// (docs/performance.md). The TTFT, TPOT and request-duration ladders are
// subsets of the ExplicitBucketBoundaries advised by the OpenTelemetry
// GenAI semantic conventions (docs/gen-ai/gen-ai-metrics.md:
// gen_ai.server.time_to_first_token, gen_ai.server.time_per_output_token,
// gen_ai.server.request.duration), so every le the prober exports is one
// an OTel-instrumented server exports too. Neighbouring boundaries are at
// most 2.5 apart (phases and schedule lag: 5), which bounds the error of
// histogram_quantile on classic buckets alone (docs/metrics.md, 1.6).
// They are functions returning fresh slices so that no caller can mutate a
// shared default.

func ttftBuckets() []float64 {
	return []float64{0.005, 0.01, 0.02, 0.04, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// tpotBuckets also serves ITL: an inter-token gap is a per-token decode time
// just like TPOT, and one layout lets the two be compared bucket by bucket.
func tpotBuckets() []float64 {
	return []float64{0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5}
}

// requestDurationBuckets: OTel's doubling ladder from 40 ms; a whole LLM
// answer shorter than that is rare.
func requestDurationBuckets() []float64 {
	return []float64{0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
}

// tokensPerSecondBuckets spans a CPU-bound llama.cpp (a few tokens/s) to a
// small model on a fast GPU (thousands); OTel advises nothing for this.
func tokensPerSecondBuckets() []float64 {
	return []float64{1, 2.5, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
}

// phaseBuckets start at 100µs because DNS from a cache, a loopback connect or
// a request write take well under a millisecond; first_byte can take as long
// as a TTFT, hence the 10 s top.
func phaseBuckets() []float64 {
	return []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
}

// scheduleLagBuckets: a healthy scheduler is late by micro- to milliseconds;
// seconds mean the prober is overloaded or the machine was paused.
func scheduleLagBuckets() []float64 {
	return []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60}
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
