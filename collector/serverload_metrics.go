package collector

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// The server's load as it reported it in the answer to the probe's
// latest request (probe.ServerLoad: vLLM's endpoint-load-metrics). Named
// like the scraped llm_server_* gauges they sit beside, under the probe's
// labels: the server sampled them while answering this request, so they
// are the load this request met, not the load at scrape time. Each gauge
// is exported once a report carried its value, so targets whose server
// sends none (or never sends running, as vLLM) have no such series.

type serverLoadDescs struct {
	waiting, running, kvCache *prometheus.Desc
}

func newServerLoadDescs(base []string) serverLoadDescs {
	return serverLoadDescs{
		waiting: prometheus.NewDesc("llm_probe_server_load_requests_waiting",
			"Requests waiting in the server's queue, as the server reported them in its answer to the probe's latest request that carried a load report (endpoint-load-metrics).",
			base, nil),
		running: prometheus.NewDesc("llm_probe_server_load_requests_running",
			"Requests the server was processing, as it reported them in its answer to the probe's latest request that carried this value (endpoint-load-metrics).",
			base, nil),
		kvCache: prometheus.NewDesc("llm_probe_server_load_kv_cache_usage_ratio",
			"Fraction of the server's KV cache in use (0 to 1), as it reported it in its answer to the probe's latest request that carried a load report (endpoint-load-metrics).",
			base, nil),
	}
}

func (d serverLoadDescs) list() []*prometheus.Desc {
	return []*prometheus.Desc{d.waiting, d.running, d.kvCache}
}

// loadGauge is one of the gauges, exported once it was set.
type loadGauge struct {
	g    *gauge
	seen atomic.Bool
}

func (l *loadGauge) set(v float64) {
	l.g.Set(v)
	l.seen.Store(true)
}

func (l *loadGauge) collect(ch chan<- prometheus.Metric) {
	if l.seen.Load() {
		ch <- l.g
	}
}

type serverLoadSeries struct {
	waiting, running, kvCache loadGauge
}

func (ls *serverLoadSeries) init(s *series) {
	d := s.d.load
	ls.waiting.g = newGauge(d.waiting, s.labels)
	ls.running.g = newGauge(d.running, s.labels)
	ls.kvCache.g = newGauge(d.kvCache, s.labels)
}

// observe keeps the values of r's report; a value the report lacks keeps
// its previous one (vLLM omits a gauge only when it has no sample).
func (ls *serverLoadSeries) observe(r *probe.Result) {
	l := r.ServerLoad
	if l == nil {
		return
	}
	if l.HasWaiting {
		ls.waiting.set(l.Waiting)
	}
	if l.HasRunning {
		ls.running.set(l.Running)
	}
	if l.HasKVCache {
		ls.kvCache.set(l.KVCacheUsage)
	}
}

func (ls *serverLoadSeries) collect(ch chan<- prometheus.Metric) {
	ls.waiting.collect(ch)
	ls.running.collect(ch)
	ls.kvCache.collect(ch)
}
