package collector

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llm-prober/llm-prober/probe"
)

// filledProbeMetrics is 100 probes (10 targets × 10) with SLOs, each having
// observed 200 streamed requests of 100 tokens with spread-out latencies, so
// classic buckets, native histogram buckets and exemplars are all populated
// as in a long-running daemon.
func filledProbeMetrics() *ProbeMetrics {
	m := NewProbeMetrics()
	rng := rand.New(rand.NewPCG(1, 2))
	jitter := func(base time.Duration) time.Duration {
		return time.Duration(float64(base) * (0.5 + rng.ExpFloat64()))
	}
	for t := range 10 {
		for p := range 10 {
			target, name := fmt.Sprintf("sim-%02d", t), fmt.Sprintf("probe-%02d", p)
			m.Add(ProbeSeries{Target: target, Probe: name, Model: "sim-llm",
				SLO: SLO{TTFT: 250 * time.Millisecond, TPOT: 20 * time.Millisecond, Objective: 0.99}})
			for i := range 200 {
				r := &probe.Result{
					RequestID: fmt.Sprintf("%032x", i), Start: time.Now(), StatusCode: 200, Streamed: true,
					Phases: probe.Phases{Write: jitter(50 * time.Microsecond), HasWrite: true,
						FirstByte: jitter(time.Millisecond), HasFirstByte: true},
					TTFT:        jitter(30 * time.Millisecond),
					InputTokens: 9, InputTokensSource: probe.TokenSourceServer,
					OutputTokens: 100, OutputTokensSource: probe.TokenSourceServer,
					Outcome: probe.OutcomeSuccess,
				}
				at := r.TTFT
				for range 100 {
					r.Chunks = append(r.Chunks, probe.Chunk{At: at, Tokens: 1})
					at += jitter(3 * time.Millisecond)
				}
				r.EndToEnd = at
				m.Observe(target, name, r)
				m.ObserveScheduleLag(target, name, jitter(100*time.Microsecond))
			}
		}
	}
	return m
}

// BenchmarkExposition100Probes renders /metrics for 100 probes through
// promhttp, as the daemon serves it, in the text format (classic buckets
// only) and in protobuf (classic and native buckets, exemplars).
func BenchmarkExposition100Probes(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(filledProbeMetrics())
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	for _, f := range []struct{ name, accept string }{
		{"text", "text/plain;version=0.0.4"},
		{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"},
	} {
		b.Run(f.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept", f.accept)
			var size int
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d", w.Code)
				}
				size = w.Body.Len()
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/scrape")
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
