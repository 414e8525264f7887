package collector

import (
	"slices"
	"strings"
	"time"

	"github.com/llm-prober/llm-prober/internal/display"
	"github.com/prometheus/client_golang/prometheus"
)

// maxSnapshotModels bounds the models one server's snapshot keeps for the
// status page; the exported series keep up to maxServerModels.
const maxSnapshotModels = 32

// ServerSnapshot is the last scrape of one model server's metrics, as plain
// values for the status page.
type ServerSnapshot struct {
	Target string
	// URL is the server_metrics URL without userinfo, query or fragment.
	URL string
	// Kind is the configured kind, or the detected one for auto once a
	// scrape succeeded.
	Kind string
	// CollectedAt is when the last scrape ended; zero before the first.
	CollectedAt time.Time
	Duration    time.Duration
	// Up is llm_server_up of that scrape; Err says why it is 0.
	Up  bool
	Err string
	// Models holds the queue and KV-cache gauges per model label value
	// ("" for servers without one), sorted by model.
	Models        []ServerModelSnapshot
	DroppedModels int
}

// ServerModelSnapshot is one model's normalised gauges; Has* tells which
// the server exposes.
type ServerModelSnapshot struct {
	Model string
	// Waiting and Running are llm_server_requests_waiting and
	// llm_server_requests_running.
	Waiting, Running       float64
	HasWaiting, HasRunning bool
	// KVCacheUsage is llm_server_kv_cache_usage_ratio (0..1).
	KVCacheUsage float64
	HasKVCache   bool
	// BatchSize is llm_server_batch_size.
	BatchSize float64
	HasBatch  bool
}

// snapshotOf turns one scrape into a snapshot.
func snapshotOf(r serverScrape, at time.Time) *ServerSnapshot {
	s := &ServerSnapshot{
		Target:      r.t.Name,
		URL:         display.Endpoint(r.t.URL),
		Kind:        r.t.Kind,
		CollectedAt: at,
		Duration:    r.duration,
		Up:          r.err == nil,
	}
	if r.err != nil {
		s.Err = display.Cut(r.err.Error(), display.MaxErrorBytes)
		return s
	}
	s.Kind = r.res.kind
	byModel := map[string]*ServerModelSnapshot{}
	for _, smp := range r.res.samples {
		switch smp.out {
		case serverRequestsWaiting, serverRequestsRunning, serverKVCacheUsage, serverBatchSize:
		default:
			continue
		}
		m := byModel[smp.model]
		if m == nil {
			if len(byModel) >= maxSnapshotModels {
				s.DroppedModels++
				continue
			}
			m = &ServerModelSnapshot{Model: strings.Clone(smp.model)}
			byModel[smp.model] = m
		}
		switch smp.out {
		case serverRequestsWaiting:
			m.Waiting, m.HasWaiting = smp.value, true
		case serverRequestsRunning:
			m.Running, m.HasRunning = smp.value, true
		case serverKVCacheUsage:
			m.KVCacheUsage, m.HasKVCache = smp.value, true
		case serverBatchSize:
			m.BatchSize, m.HasBatch = smp.value, true
		}
	}
	for _, m := range byModel {
		s.Models = append(s.Models, *m)
	}
	slices.SortFunc(s.Models, func(a, b ServerModelSnapshot) int { return strings.Compare(a.Model, b.Model) })
	return s
}

// remember keeps a scrape's snapshot on its target.
func (t *serverTarget) remember(r serverScrape, at time.Time) {
	s := snapshotOf(r, at)
	t.mu.Lock()
	t.last = s
	t.mu.Unlock()
}

// Snapshot returns the last scrape of every configured server, in config
// order; a server not scraped yet has a zero CollectedAt. It never
// scrapes: see Refresh.
func (c *ServerMetrics) Snapshot() []ServerSnapshot {
	c.mu.RLock()
	targets := c.targets
	c.mu.RUnlock()
	out := make([]ServerSnapshot, 0, len(targets))
	for _, t := range targets {
		t.mu.Lock()
		last := t.last
		t.mu.Unlock()
		if last != nil {
			out = append(out, *last)
			continue
		}
		out = append(out, ServerSnapshot{Target: t.Name, URL: display.Endpoint(t.URL), Kind: t.Kind})
	}
	return out
}

// Refresh scrapes every server now, as a Prometheus scrape would (same
// timeouts, same logging), for a status page loaded while nothing scrapes
// the prober. The samples themselves are discarded.
func (c *ServerMetrics) Refresh() {
	discardCollect(c)
}

func discardCollect(c prometheus.Collector) {
	ch := make(chan prometheus.Metric, 64)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	c.Collect(ch)
	close(ch)
	<-done
}

// GPUSnapshot is the last NVML collection, as plain values for the status
// page.
type GPUSnapshot struct {
	// Enabled is the applied gpus.enabled (auto, true or false; "" before
	// the first config).
	Enabled string
	// Loaded is whether NVML is loaded; ApplyErr why not, when enabled is
	// true.
	Loaded   bool
	ApplyErr string
	// CollectedAt is when the last collection ended; zero before the
	// first.
	CollectedAt time.Time
	Duration    time.Duration
	// OK is llm_prober_collector_success{collector="gpu"} of that
	// collection.
	OK      bool
	Devices []GPUDeviceSnapshot
}

// GPUDeviceSnapshot is one device's readings in base units; Has* tells
// which NVML answered.
type GPUDeviceSnapshot struct {
	Index      int
	UUID, Name string
	// Utilization is llm_gpu_utilization_ratio (0..1).
	Utilization    float64
	HasUtilization bool
	// MemoryUsed and MemoryTotal are bytes.
	MemoryUsed, MemoryTotal float64
	HasMemory               bool
	// Temperature is degrees Celsius.
	Temperature    float64
	HasTemperature bool
	// Power and PowerLimit are watts.
	Power, PowerLimit     float64
	HasPower, HasPowerLim bool
}

// Snapshot returns the last collection. It never talks to NVML: see
// Refresh.
func (c *GPUCollector) Snapshot() GPUSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := GPUSnapshot{Loaded: c.lib != nil}
	if c.applied != nil {
		s.Enabled = c.applied.Mode.String()
	}
	if c.applyErr != nil {
		s.ApplyErr = display.Cut(c.applyErr.Error(), display.MaxErrorBytes)
	}
	if s.Loaded && c.last != nil {
		s.CollectedAt, s.Duration, s.OK = c.last.at, c.last.duration, c.last.ok
		s.Devices = slices.Clone(c.last.devices)
	}
	return s
}

// Refresh collects from NVML now (joining a collection in progress),
// bounded by the collector's timeout, for a status page loaded while
// nothing scrapes the prober.
func (c *GPUCollector) Refresh() {
	discardCollect(c)
}

// gpuLast is what the last finished collection read.
type gpuLast struct {
	at       time.Time
	duration time.Duration
	ok       bool
	devices  []GPUDeviceSnapshot
}
