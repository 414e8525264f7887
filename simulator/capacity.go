package simulator

import (
	"fmt"
	"time"
)

// Capacity is the analytic answer to "how much load can this simulated
// server take" for requests of one shape, derived from the latency model
// (docs/simulator.md#capacity). bench's capacity search is tested
// against it, so the formulas here must follow engine.go and gen.go.
type Capacity struct {
	// Service is one request's time in a slot with every slot busy:
	// prefill, then output−1 decode steps at a full batch.
	Service time.Duration
	// RequestsPerSecond is the saturation throughput, max_running /
	// Service: the knee. Offered load above it queues without bound, so
	// TTFT grows for as long as the load lasts.
	RequestsPerSecond float64
	// Running is the number of slots; a closed loop of at most this many
	// users never queues.
	Running int
}

// Capacity returns the knee for requests of promptTokens input and
// outputTokens output tokens (ignore_eos, so the length is exact),
// ignoring jitter, whose mean is zero. It fails when the KV cache would
// bind before the slots do, because the formula then does not hold.
func (c Config) Capacity(promptTokens, outputTokens int) (Capacity, error) {
	if promptTokens < 0 || outputTokens < 1 {
		return Capacity{}, fmt.Errorf("capacity needs prompt ≥ 0 and output ≥ 1 tokens, got %d and %d", promptTokens, outputTokens)
	}
	s := c.Scheduler.MaxRunning
	if s < 1 {
		return Capacity{}, fmt.Errorf("scheduler.max_running must be ≥ 1, got %d", s)
	}
	if kv := int64(s) * int64(promptTokens+outputTokens); kv > int64(c.Scheduler.KVCacheCapacityTokens) {
		return Capacity{}, fmt.Errorf("%d full sequences need %d KV tokens, more than kv_cache_capacity_tokens %d: the cache, not the slots, would set the knee", s, kv, c.Scheduler.KVCacheCapacityTokens)
	}
	prefill := c.Latency.TTFTBase + time.Duration(promptTokens)*c.Latency.PrefillPerToken
	step := c.Latency.DecodeBase + time.Duration(s-1)*c.Latency.DecodePerRunning
	service := prefill + time.Duration(outputTokens-1)*step
	return Capacity{Service: service, RequestsPerSecond: float64(s) / service.Seconds(), Running: s}, nil
}

// MaxRunningForTPOT is the largest batch whose decode step stays at or
// under tpot: with a TPOT objective tighter than the full-batch step, the
// knee is where the batch reaches this size, not where the slots run out.
// Zero means even one running sequence is too slow.
func (c Config) MaxRunningForTPOT(tpot time.Duration) int {
	if c.Latency.DecodeBase > tpot {
		return 0
	}
	if c.Latency.DecodePerRunning <= 0 {
		return c.Scheduler.MaxRunning
	}
	n := 1 + int((tpot-c.Latency.DecodeBase)/c.Latency.DecodePerRunning)
	return min(n, c.Scheduler.MaxRunning)
}
