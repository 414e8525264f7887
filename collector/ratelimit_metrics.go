package collector

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// RateLimitMetrics exports, per target, the last rate-limit headers its
// answers carried (probe.RateLimit): how much of the limit is left and
// when it resets, so an alert fires before requests start getting 429s.
// The limit is the target's (its API key's), shared by its probes, so the
// series carry the target label only. A target whose answers never carried
// the headers has no series.
type RateLimitMetrics struct {
	limit, remaining, ratio, reset, retryAfter, updated, malformed *prometheus.Desc

	mu      sync.Mutex
	targets map[string]*rateLimitTarget
}

type rateLimitTarget struct {
	probes map[string]bool
	// last values per resource ("requests", "tokens"); nil until seen.
	windows    map[string]*probe.RateLimitWindow
	retryAfter *time.Duration
	updated    time.Time
	malformed  map[string]float64
}

// Rate-limited resources, the values of the resource label.
const (
	resourceRequests = "requests"
	resourceTokens   = "tokens"
)

// NewRateLimitMetrics is an empty collector.
func NewRateLimitMetrics() *RateLimitMetrics {
	lr := []string{"target", "resource"}
	return &RateLimitMetrics{
		limit:      prometheus.NewDesc("llm_probe_rate_limit_limit", "Last x-ratelimit-limit-{requests,tokens} the target sent.", lr, nil),
		remaining:  prometheus.NewDesc("llm_probe_rate_limit_remaining", "Last x-ratelimit-remaining-{requests,tokens} the target sent.", lr, nil),
		ratio:      prometheus.NewDesc("llm_probe_rate_limit_remaining_ratio", "Last remaining / limit of the target's rate limit (headroom; 0 means the next request is refused).", lr, nil),
		reset:      prometheus.NewDesc("llm_probe_rate_limit_reset_seconds", "Seconds until the target's rate-limit window resets, as of its last answer (x-ratelimit-reset-*).", lr, nil),
		retryAfter: prometheus.NewDesc("llm_probe_rate_limit_retry_after_seconds", "Retry-After of the target's last 429 or 503 answer that carried one.", []string{"target"}, nil),
		updated:    prometheus.NewDesc("llm_probe_rate_limit_last_update_timestamp_seconds", "When the target last sent rate-limit headers.", []string{"target"}, nil),
		malformed:  prometheus.NewDesc("llm_probe_rate_limit_malformed_headers_total", "Rate-limit headers the target sent that could not be read, and were ignored.", []string{"target", "header"}, nil),
		targets:    map[string]*rateLimitTarget{},
	}
}

// Add announces a probe of target; the target's series live while any of
// its probes does.
func (m *RateLimitMetrics) Add(target, probeName string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.targets[target]
	if t == nil {
		t = &rateLimitTarget{probes: map[string]bool{}, windows: map[string]*probe.RateLimitWindow{}, malformed: map[string]float64{}}
		m.targets[target] = t
	}
	t.probes[probeName] = true
}

// Remove drops a probe, and the target's series with its last probe.
func (m *RateLimitMetrics) Remove(target, probeName string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.targets[target]; t != nil {
		delete(t.probes, probeName)
		if len(t.probes) == 0 {
			delete(m.targets, target)
		}
	}
}

// Observe keeps the rate-limit headers of one result, if it had any.
// Each value replaces the last one seen for its header; a header the
// answer lacked keeps its older value.
func (m *RateLimitMetrics) Observe(target string, r *probe.Result) {
	if r == nil || r.RateLimit == nil {
		return
	}
	rl := r.RateLimit
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.targets[target]
	if t == nil {
		return
	}
	t.updated = time.Now()
	merge := func(resource string, w probe.RateLimitWindow) {
		if !w.HasLimit && !w.HasRemaining && !w.HasReset {
			return
		}
		cur := t.windows[resource]
		if cur == nil {
			cur = &probe.RateLimitWindow{}
			t.windows[resource] = cur
		}
		if w.HasLimit {
			cur.Limit, cur.HasLimit = w.Limit, true
		}
		if w.HasRemaining {
			cur.Remaining, cur.HasRemaining = w.Remaining, true
		}
		if w.HasReset {
			cur.Reset, cur.HasReset = w.Reset, true
		}
	}
	merge(resourceRequests, rl.Requests)
	merge(resourceTokens, rl.Tokens)
	if rl.HasRetryAfter {
		d := rl.RetryAfter
		t.retryAfter = &d
	}
	for _, h := range rl.Malformed {
		if slices.Contains(probe.RateLimitHeaders(), h) { // a closed set of label values
			t.malformed[h]++
		}
	}
}

// Describe implements prometheus.Collector.
func (m *RateLimitMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.limit, m.remaining, m.ratio, m.reset, m.retryAfter, m.updated, m.malformed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *RateLimitMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for name, t := range m.targets {
		// Nothing until the target first sends rate-limit headers: most
		// targets never do, and need no series for it.
		if t.updated.IsZero() {
			continue
		}
		for _, h := range probe.RateLimitHeaders() {
			ch <- prometheus.MustNewConstMetric(m.malformed, prometheus.CounterValue, t.malformed[h], name, h)
		}
		gauge(m.updated, float64(t.updated.UnixNano())/1e9, name)
		for resource, w := range t.windows {
			if w.HasLimit {
				gauge(m.limit, w.Limit, name, resource)
			}
			if w.HasRemaining {
				gauge(m.remaining, w.Remaining, name, resource)
			}
			if w.HasLimit && w.HasRemaining && w.Limit > 0 {
				gauge(m.ratio, min(w.Remaining/w.Limit, 1), name, resource)
			}
			if w.HasReset {
				gauge(m.reset, w.Reset.Seconds(), name, resource)
			}
		}
		if t.retryAfter != nil {
			gauge(m.retryAfter, t.retryAfter.Seconds(), name)
		}
	}
}
