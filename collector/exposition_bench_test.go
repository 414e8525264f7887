package collector

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-prober/llm-prober/probe"
)

// filledProbeMetricsN is targets × 10 openai_chat probes with SLOs, each
// having observed 200 streamed requests of 100 tokens with spread-out
// latencies, so classic buckets, native histogram buckets and exemplars are
// all populated as in a long-running daemon.
func filledProbeMetricsN(targets int, form string) *ProbeMetrics {
	return filledProbeMetricsReqs(targets, form, 200)
}

// filledProbeMetricsReqs is filledProbeMetricsN with requests results per
// probe instead of 200: the scale benchmark's 5,000 probes would take
// minutes to fill with 200 each, and the text exposition does not depend
// on how many observations a histogram holds.
func filledProbeMetricsReqs(targets int, form string, requests int) *ProbeMetrics {
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
			for i := range requests {
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

// BenchmarkExpositionScale renders /metrics for 100, 1,000 and 5,000
// default probes (histograms: both, SLOs set, 20 results each) in text and
// gzipped text, the same probes with histograms: classic, and beside
// them, in the same run, the same series encoded
// the way node_exporter encodes its own: a plain collector that builds
// every series with prometheus.MustNewConstMetric or MustNewConstHistogram
// from descriptors made by prometheus.NewDesc, on every scrape, served by
// promhttp.HandlerFor over its registry. The reference has the prober's
// names, labels, values and classic buckets, so both pages have the same
// series and nearly the same bytes; the ratio of their ns/series is the
// prober's cost per series against the library's usual floor. Run it with
// -benchtime 5x or so; the 5,000-probe fixture takes a while to fill.
func BenchmarkExpositionScale(b *testing.B) {
	for _, probes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprint(probes), func(b *testing.B) { benchScale(b, probes) })
	}
}

// benchScale is BenchmarkExpositionScale for one number of probes, filled
// only when a sub-benchmark of it is selected.
func benchScale(b *testing.B, probes int) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(filledProbeMetricsReqs(probes/10, HistogramsBoth, 20))
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	ref := prometheus.NewRegistry()
	ref.MustRegister(newConstMirror(mfs))
	classic := prometheus.NewRegistry()
	classic.MustRegister(filledProbeMetricsReqs(probes/10, HistogramsClassic, 20))
	nseries := textSeries(mfs)
	for _, side := range []struct {
		name string
		h    http.Handler
	}{
		// The prober's page as the daemon serves it: NewHandler, with
		// no model-server metrics configured.
		{"prober", NewHandler(reg, NewServerMetrics(nil), promhttp.HandlerOpts{})},
		// The same probes with histograms: classic, whose text is the
		// same to the byte: what the native buckets cost a text scrape.
		{"prober-classic", NewHandler(classic, NewServerMetrics(nil), promhttp.HandlerOpts{})},
		{"nodeexporter-style", promhttp.HandlerFor(ref, promhttp.HandlerOpts{})},
	} {
		h := side.h
		for _, f := range []struct{ name, encoding string }{{"text", ""}, {"text-gzip", "gzip"}} {
			b.Run(side.name+"/"+f.name, func(b *testing.B) {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept", "text/plain;version=0.0.4")
				if f.encoding != "" {
					req.Header.Set("Accept-Encoding", f.encoding)
				}
				var size int
				b.ReportAllocs()
				start, cpu0 := time.Now(), processCPU(b)
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("HTTP %d: %s", w.Code, w.Body)
					}
					size = w.Body.Len()
				}
				elapsed, cpu := time.Since(start), processCPU(b)-cpu0
				b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/scrape")
				// CPU time, the garbage collector's included, varies less
				// than wall time on a shared machine.
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/scrape")
				b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N)/float64(nseries), "ns/series")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(nseries), "cpu-ns/series")
				b.ReportMetric(float64(nseries), "series")
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// textSeries is the number of series in mfs as the text format has them:
// a histogram is its buckets, +Inf, _sum and _count.
func textSeries(mfs []*dto.MetricFamily) int {
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				n += len(h.GetBucket()) + 3
				continue
			}
			n++
		}
	}
	return n
}

// constMirror is node_exporter's collector shape (collector/*.go there):
// descriptors built once with prometheus.NewDesc and variable labels,
// and every series built again on every scrape with MustNewConstMetric or
// MustNewConstHistogram. Its values are taken once from a gather of the
// prober, standing in for what node_exporter reads from /proc.
type constMirror struct {
	descs  []*prometheus.Desc
	series []mirrored
}

type mirrored struct {
	desc    int
	kind    prometheus.ValueType
	hist    bool
	value   float64
	count   uint64
	sum     float64
	buckets map[float64]uint64
	labels  []string
}

func newConstMirror(mfs []*dto.MetricFamily) *constMirror {
	c := &constMirror{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		var names []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			names = append(names, lp.GetName())
		}
		c.descs = append(c.descs, prometheus.NewDesc(mf.GetName(), mf.GetHelp(), names, nil))
		for _, m := range mf.GetMetric() {
			s := mirrored{desc: len(c.descs) - 1}
			for _, lp := range m.GetLabel() {
				s.labels = append(s.labels, lp.GetValue())
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.kind, s.value = prometheus.CounterValue, m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.kind, s.value = prometheus.GaugeValue, m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				s.hist, s.count, s.sum = true, h.GetSampleCount(), h.GetSampleSum()
				s.buckets = map[float64]uint64{}
				for _, bk := range h.GetBucket() {
					s.buckets[bk.GetUpperBound()] = bk.GetCumulativeCount()
				}
			default:
				s.kind, s.value = prometheus.UntypedValue, m.GetUntyped().GetValue()
			}
			c.series = append(c.series, s)
		}
	}
	return c
}

func (c *constMirror) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *constMirror) Collect(ch chan<- prometheus.Metric) {
	for i := range c.series {
		s := &c.series[i]
		if s.hist {
			ch <- prometheus.MustNewConstHistogram(c.descs[s.desc], s.count, s.sum, s.buckets, s.labels...)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[s.desc], s.kind, s.value, s.labels...)
	}
}
