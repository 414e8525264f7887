package collector

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llm-prober/llm-prober/probe"
)

// RateLimitMetrics exports, per target, the last rate-limit headers its
// answers carried (probe.RateLimit): how much of the limit is left and
// when it resets, so an alert fires before requests start getting 429s.
// The limit is the target's (its API key's), shared by its probes, so the
// series carry the target label only. A target whose answers never carried
// the headers has no series.
type RateLimitMetrics struct {
	d       rateLimitDescs
	targets store[string, *rateLimitTarget]
}

type rateLimitDescs struct {
	limit, remaining, ratio, reset, retryAfter, updated, malformed *prometheus.Desc
}

type rateLimitTarget struct {
	d *rateLimitDescs
	// probes are the target's probes, touched only by Add and Remove
	// under the store's lock.
	probes map[string]bool
	// The label pairs of the target's series, built once: target alone,
	// and resource with target.
	labels     []*dto.LabelPair
	byResource map[string][]*dto.LabelPair
	// malformed counts, per probe.RateLimitHeaders(), the headers that
	// could not be read; without a created timestamp, as before they
	// were counters of their own.
	malformed []*counter

	mu sync.Mutex
	// last values per resource ("requests", "tokens"); nil until seen.
	windows    map[string]*probe.RateLimitWindow
	retryAfter *time.Duration
	updated    time.Time
}

// Rate-limited resources, the values of the resource label.
const (
	resourceRequests = "requests"
	resourceTokens   = "tokens"
)

// NewRateLimitMetrics is an empty collector.
func NewRateLimitMetrics() *RateLimitMetrics {
	lr := []string{"target", "resource"}
	return &RateLimitMetrics{d: rateLimitDescs{
		limit:      prometheus.NewDesc("llm_probe_rate_limit_limit", "Last x-ratelimit-limit-{requests,tokens} the target sent.", lr, nil),
		remaining:  prometheus.NewDesc("llm_probe_rate_limit_remaining", "Last x-ratelimit-remaining-{requests,tokens} the target sent.", lr, nil),
		ratio:      prometheus.NewDesc("llm_probe_rate_limit_remaining_ratio", "Last remaining / limit of the target's rate limit (headroom; 0 means the next request is refused).", lr, nil),
		reset:      prometheus.NewDesc("llm_probe_rate_limit_reset_seconds", "Seconds until the target's rate-limit window resets, as of its last answer (x-ratelimit-reset-*).", lr, nil),
		retryAfter: prometheus.NewDesc("llm_probe_rate_limit_retry_after_seconds", "Retry-After of the target's last 429 or 503 answer that carried one.", []string{"target"}, nil),
		updated:    prometheus.NewDesc("llm_probe_rate_limit_last_update_timestamp_seconds", "When the target last sent rate-limit headers.", []string{"target"}, nil),
		malformed:  prometheus.NewDesc("llm_probe_rate_limit_malformed_headers_total", "Rate-limit headers the target sent that could not be read, and were ignored.", []string{"target", "header"}, nil),
	}}
}

func (m *RateLimitMetrics) newTarget(target string) *rateLimitTarget {
	tl := newLabelPair("target", validUTF8(target)[0])
	t := &rateLimitTarget{
		d:          &m.d,
		probes:     map[string]bool{},
		labels:     []*dto.LabelPair{tl},
		byResource: map[string][]*dto.LabelPair{},
		windows:    map[string]*probe.RateLimitWindow{},
	}
	// Sorted by name, as the exposition requires: resource, target.
	for _, r := range []string{resourceRequests, resourceTokens} {
		t.byResource[r] = []*dto.LabelPair{newLabelPair("resource", r), tl}
	}
	for _, h := range probe.RateLimitHeaders() {
		t.malformed = append(t.malformed, newCounter(m.d.malformed, []*dto.LabelPair{newLabelPair("header", h), tl}, nil))
	}
	return t
}

// Add announces a probe of target; the target's series live while any of
// its probes does.
func (m *RateLimitMetrics) Add(target, probeName string) {
	m.targets.put(target, func(t *rateLimitTarget) bool {
		t.probes[probeName] = true
		return true
	}, func() *rateLimitTarget {
		t := m.newTarget(target)
		t.probes[probeName] = true
		return t
	})
}

// Remove drops a probe, and the target's series with its last probe.
func (m *RateLimitMetrics) Remove(target, probeName string) {
	m.targets.removeIf(target, func(t *rateLimitTarget) bool {
		delete(t.probes, probeName)
		return len(t.probes) == 0
	})
}

// Observe keeps the rate-limit headers of one result, if it had any.
// Each value replaces the last one seen for its header; a header the
// answer lacked keeps its older value.
func (m *RateLimitMetrics) Observe(target string, r *probe.Result) {
	if r == nil || r.RateLimit == nil {
		return
	}
	t, ok := m.targets.get(target)
	if !ok {
		return
	}
	rl := r.RateLimit
	for _, h := range rl.Malformed {
		// A closed set of label values: another header is not counted.
		if i := slices.Index(probe.RateLimitHeaders(), h); i >= 0 {
			t.malformed[i].Inc()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
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
}

// Describe implements prometheus.Collector.
func (m *RateLimitMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.d.limit, m.d.remaining, m.d.ratio, m.d.reset, m.d.retryAfter, m.d.updated, m.d.malformed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *RateLimitMetrics) Collect(ch chan<- prometheus.Metric) {
	m.targets.collect(ch)
}

func (t *rateLimitTarget) collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Nothing until the target first sends rate-limit headers: most
	// targets never do, and need no series for it.
	if t.updated.IsZero() {
		return
	}
	for _, c := range t.malformed {
		ch <- c
	}
	d := t.d
	ch <- newConstGauge(d.updated, t.labels, float64(t.updated.UnixNano())/1e9)
	for resource, w := range t.windows {
		labels := t.byResource[resource]
		if w.HasLimit {
			ch <- newConstGauge(d.limit, labels, w.Limit)
		}
		if w.HasRemaining {
			ch <- newConstGauge(d.remaining, labels, w.Remaining)
		}
		if w.HasLimit && w.HasRemaining && w.Limit > 0 {
			ch <- newConstGauge(d.ratio, labels, min(w.Remaining/w.Limit, 1))
		}
		if w.HasReset {
			ch <- newConstGauge(d.reset, labels, w.Reset.Seconds())
		}
	}
	if t.retryAfter != nil {
		ch <- newConstGauge(d.retryAfter, t.labels, t.retryAfter.Seconds())
	}
}
