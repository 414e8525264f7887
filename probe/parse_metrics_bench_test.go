package probe_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// simulatorStream is a 100-token chat stream exactly as the simulator (and
// vLLM) sends it: a role chunk, one content chunk per token with the
// finish_reason on the last, a usage chunk and [DONE].
func simulatorStream(tokens int) []byte {
	var b strings.Builder
	chunk := func(choices string) {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1795309185,"model":"sim-llm","choices":[%s]}`+"\n\n", choices)
	}
	chunk(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`)
	for i := range tokens {
		fr := "null"
		if i == tokens-1 {
			fr = `"length"`
		}
		chunk(fmt.Sprintf(`{"index":0,"delta":{"content":"garden "},"logprobs":null,"finish_reason":%s}`, fr))
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1795309185,"model":"sim-llm","choices":[],"usage":{"prompt_tokens":9,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n", 9+tokens, tokens)
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// BenchmarkParseToMetrics is the prober's own per-request work on a
// 100-token stream, without the network: SSE parsing, chunk decoding,
// building the Result, and ProbeMetrics.Observe (TTFT, TPOT, ITL per token,
// SLO counters). It reports the cost per output token, the unit the
// performance goals use (docs/performance.md).
func BenchmarkParseToMetrics(b *testing.B) {
	const tokens = 100
	body := simulatorStream(tokens)
	m := collector.NewProbeMetrics()
	m.Add(collector.ProbeSeries{Target: "sim", Probe: "p", Model: "sim-llm",
		SLO: collector.SLO{TTFT: 250 * time.Millisecond, TPOT: 20 * time.Millisecond, Objective: 0.99}})
	rd := bytes.NewReader(body)
	var ms0, ms1 runtime.MemStats
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	for b.Loop() {
		rd.Reset(body)
		// As a driver starts it (the Result is sized for the tokens asked
		// for), but with a fixed id.
		r := probe.BeginResult(&probe.Request{ID: "0123456789abcdef0123456789abcdef", Stream: true, MaxTokens: tokens})
		r.Start, r.StatusCode = time.Now(), 200
		probe.DecodeOpenAIStream(rd, r)
		if r.Outcome != probe.OutcomeSuccess || r.OutputTokens != tokens {
			b.Fatalf("outcome %s, %d tokens: %v", r.Outcome, r.OutputTokens, r.Err)
		}
		m.Observe("sim", "p", r)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	n := float64(b.N * tokens)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/token")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/token")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/token")
}
