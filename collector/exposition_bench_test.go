package collector

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llm-prober/llm-prober/probe"
)

// filledProbeMetricsN is targets × 10 openai_chat probes with SLOs, each
// having observed 200 streamed requests of 100 tokens with spread-out
// latencies, so classic buckets, native histogram buckets and exemplars are
// all populated as in a long-running daemon.
func filledProbeMetricsN(targets int, form string) *ProbeMetrics {
	m := NewProbeMetrics()
	rng := rand.New(rand.NewPCG(1, 2))
	jitter := func(base time.Duration) time.Duration {
		return time.Duration(float64(base) * (0.5 + rng.ExpFloat64()))
	}
	for t := range targets {
		for p := range 10 {
			target, name := fmt.Sprintf("sim-%02d", t), fmt.Sprintf("probe-%02d", p)
			m.Add(ProbeSeries{Target: target, Probe: name, Model: "sim-llm", Protocol: probe.ProtocolOpenAIChat, Histograms: form,
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
func BenchmarkExposition100Probes(b *testing.B) { benchExposition(b, 10) }

// BenchmarkExposition1000Probes: the same for 1,000 probes (100 targets).
func BenchmarkExposition1000Probes(b *testing.B) { benchExposition(b, 100) }

// benchExposition renders /metrics for targets × 10 probes in each
// histogram form (sub-benchmark form/format).
func benchExposition(b *testing.B, targets int) {
	for _, form := range HistogramForms() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(filledProbeMetricsN(targets, form))
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
		for _, f := range []struct{ name, accept, encoding string }{
			{"text", "text/plain;version=0.0.4", ""},
			{"text-gzip", "text/plain;version=0.0.4", "gzip"},
			{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", ""},
		} {
			b.Run(form+"/"+f.name, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept", f.accept)
				if f.encoding != "" {
					req.Header.Set("Accept-Encoding", f.encoding)
				}
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
}

// BenchmarkIdleProbeHeap reports the heap one configured probe holds before
// it has run (series at zero, histograms empty), per probe over 1,000.
func BenchmarkIdleProbeHeap(b *testing.B) {
	for _, form := range HistogramForms() {
		b.Run(form, func(b *testing.B) {
			var per float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				m := NewProbeMetrics()
				for i := range 1000 {
					m.Add(ProbeSeries{Target: fmt.Sprintf("t-%02d", i/10), Probe: fmt.Sprintf("p-%02d", i%10), Model: "sim-llm",
						Protocol: probe.ProtocolOpenAIChat, Histograms: form,
						SLO: SLO{TTFT: 250 * time.Millisecond, TPOT: 20 * time.Millisecond, Objective: 0.99}})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = float64(after.HeapAlloc-before.HeapAlloc) / 1000
				runtime.KeepAlive(m)
			}
			b.ReportMetric(per, "heapB/probe")
		})
	}
}

// BenchmarkGatherAllFamilies gathers every per-probe collector as the
// golden exposition test fills them (every protocol, SLOs, assertions,
// sessions, cancellation, pooled answers, rate limits): what a scrape
// costs before encoding, for the families beside ProbeMetrics too.
func BenchmarkGatherAllFamilies(b *testing.B) {
	_, reg, _ := filledGoldenCollectors()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
