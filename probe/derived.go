package probe

import "time"

// TPOT is the mean time per output token after the first:
// (end-to-end − TTFT) / (output tokens − 1). It is undefined (ok=false) for
// answers with fewer than two tokens or without a first token, and for a
// stream the probe cut (Cut): its end is the cut, not the answer's.
func (r *Result) TPOT() (tpot time.Duration, ok bool) {
	if r.TTFT <= 0 || r.OutputTokens < 2 || r.EndToEnd < r.TTFT || r.Cut() {
		return 0, false
	}
	return (r.EndToEnd - r.TTFT) / time.Duration(r.OutputTokens-1), true
}

// InterTokenLatencies calls observe once per output token after the first
// chunk: each gap between consecutive output chunks is divided by the tokens
// the later chunk carried and observed that many times, as genai-perf does.
// A stall therefore shows up as one long gap, never averaged away.
//
// A chunk that carried no tokens (possible with per-chunk server counts) is
// skipped, and the next gap is measured from the last chunk before it that
// did (or from the first chunk, the TTFT reference), so no time is lost: the
// observations always sum to the span from the first chunk to the last
// token-carrying one.
func (r *Result) InterTokenLatencies(observe func(time.Duration)) {
	prev := 0
	for i := 1; i < len(r.Chunks); i++ {
		n := r.Chunks[i].Tokens
		if n <= 0 {
			continue
		}
		gap := (r.Chunks[i].At - r.Chunks[prev].At) / time.Duration(n)
		for range n {
			observe(gap)
		}
		prev = i
	}
}

// OutputTokensPerSecond is output tokens / end-to-end latency for one
// request; undefined for a stream the probe cut (Cut).
func (r *Result) OutputTokensPerSecond() (float64, bool) {
	if r.OutputTokens <= 0 || r.EndToEnd <= 0 || r.Cut() {
		return 0, false
	}
	tps := float64(r.OutputTokens) / r.EndToEnd.Seconds()
	if tps > maxTokensPerSecond {
		// checkCounts drops such a server count; chunks counted that fast
		// are as impossible, and must not swell the histogram's sum.
		return 0, false
	}
	return tps, true
}
