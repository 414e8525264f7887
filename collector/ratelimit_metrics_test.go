package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

func TestRateLimitMetrics(t *testing.T) {
	m := NewRateLimitMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Add("hosted", "a")
	m.Add("hosted", "b")
	m.Add("local", "a")
	m.Observe("local", &probe.Result{}) // no headers: no series
	m.Observe("hosted", &probe.Result{RateLimit: &probe.RateLimit{
		Requests: probe.RateLimitWindow{Limit: 60, Remaining: 6, HasLimit: true, HasRemaining: true, Reset: 1500 * time.Millisecond, HasReset: true},
		Tokens:   probe.RateLimitWindow{Limit: 150000, HasLimit: true},
	}})
	m.Observe("hosted", &probe.Result{RateLimit: &probe.RateLimit{
		Tokens:        probe.RateLimitWindow{Remaining: 30000, HasRemaining: true},
		RetryAfter:    20 * time.Second,
		HasRetryAfter: true,
		Malformed:     []string{"x-ratelimit-reset-tokens", "not-a-header"},
	}})
	if err := testutil.CollectAndCompare(m, strings.NewReader(`
# HELP llm_probe_rate_limit_limit Last x-ratelimit-limit-{requests,tokens} the target sent.
# TYPE llm_probe_rate_limit_limit gauge
llm_probe_rate_limit_limit{resource="requests",target="hosted"} 60
llm_probe_rate_limit_limit{resource="tokens",target="hosted"} 150000
# HELP llm_probe_rate_limit_remaining Last x-ratelimit-remaining-{requests,tokens} the target sent.
# TYPE llm_probe_rate_limit_remaining gauge
llm_probe_rate_limit_remaining{resource="requests",target="hosted"} 6
llm_probe_rate_limit_remaining{resource="tokens",target="hosted"} 30000
# HELP llm_probe_rate_limit_remaining_ratio Last remaining / limit of the target's rate limit (headroom; 0 means the next request is refused).
# TYPE llm_probe_rate_limit_remaining_ratio gauge
llm_probe_rate_limit_remaining_ratio{resource="requests",target="hosted"} 0.1
llm_probe_rate_limit_remaining_ratio{resource="tokens",target="hosted"} 0.2
# HELP llm_probe_rate_limit_reset_seconds Seconds until the target's rate-limit window resets, as of its last answer (x-ratelimit-reset-*).
# TYPE llm_probe_rate_limit_reset_seconds gauge
llm_probe_rate_limit_reset_seconds{resource="requests",target="hosted"} 1.5
# HELP llm_probe_rate_limit_retry_after_seconds Retry-After of the target's last 429 or 503 answer that carried one.
# TYPE llm_probe_rate_limit_retry_after_seconds gauge
llm_probe_rate_limit_retry_after_seconds{target="hosted"} 20
# HELP llm_probe_rate_limit_malformed_headers_total Rate-limit headers the target sent that could not be read, and were ignored.
# TYPE llm_probe_rate_limit_malformed_headers_total counter
llm_probe_rate_limit_malformed_headers_total{header="retry-after",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-limit-requests",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-limit-tokens",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-remaining-requests",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-remaining-tokens",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-reset-requests",target="hosted"} 0
llm_probe_rate_limit_malformed_headers_total{header="x-ratelimit-reset-tokens",target="hosted"} 1
`), "llm_probe_rate_limit_limit", "llm_probe_rate_limit_remaining", "llm_probe_rate_limit_remaining_ratio",
		"llm_probe_rate_limit_reset_seconds", "llm_probe_rate_limit_retry_after_seconds", "llm_probe_rate_limit_malformed_headers_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	m.Remove("hosted", "a")
	if n := testutil.CollectAndCount(m, "llm_probe_rate_limit_limit"); n != 2 {
		t.Errorf("after removing one of two probes: %d series, want 2", n)
	}
	m.Remove("hosted", "b")
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("after removing the target's last probe: %d series", n)
	}
}

// A target name that is not valid UTF-8 (which the config refuses) is
// repaired as every label value is, never a failed scrape.
func TestRateLimitInvalidUTF8Target(t *testing.T) {
	m := NewRateLimitMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Add("bad\xff", "a")
	m.Observe("bad\xff", &probe.Result{RateLimit: &probe.RateLimit{
		Requests: probe.RateLimitWindow{Limit: 60, HasLimit: true}, Malformed: []string{"retry-after"}}})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP llm_probe_rate_limit_limit Last x-ratelimit-limit-{requests,tokens} the target sent.
# TYPE llm_probe_rate_limit_limit gauge
llm_probe_rate_limit_limit{resource="requests",target="bad`+"\uFFFD"+`"} 60
`), "llm_probe_rate_limit_limit"); err != nil {
		t.Error(err)
	}
	m.Remove("bad\xff", "a")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("after the last probe's removal: %d series, err %v; want none", n, err)
	}
}
