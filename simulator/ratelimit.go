package simulator

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Hosted APIs answer with their rate limits in headers (OpenAI's names);
// with rate_limit configured the OpenAI-compatible routes do the same, so
// the prober's headroom gauges have a server to read, and, with enforce,
// answer 429 with Retry-After once a window is spent.

// RateLimitConfig is a fixed one-minute window of requests and tokens
// (prompt + max_tokens, as OpenAI counts a request against the limit).
type RateLimitConfig struct {
	// RequestsPerMinute and TokensPerMinute are the limits; 0 sends no
	// header for that resource.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute"`
	// Enforce answers 429 when a request does not fit in what is left.
	Enforce bool `yaml:"enforce"`
	// Window is the length of a window; 1m when zero.
	Window time.Duration `yaml:"window"`
}

func (c RateLimitConfig) enabled() bool { return c.RequestsPerMinute > 0 || c.TokensPerMinute > 0 }

// rateLimiter is the server's window state.
type rateLimiter struct {
	cfg RateLimitConfig

	mu          sync.Mutex
	windowStart time.Time
	requests    int
	tokens      int
}

// RateLimitRecord is what the rate-limit headers of an answer said, kept
// in its ground truth.
type RateLimitRecord struct {
	RemainingRequests int    `json:"remaining_requests"`
	RemainingTokens   int    `json:"remaining_tokens"`
	ResetRequests     string `json:"reset_requests"`
	Limited           bool   `json:"limited,omitempty"`
}

// admit counts a request of cost tokens at now against the window and
// sets the headers on h; false when it is refused (enforce, and it did not
// fit), with the Retry-After header set.
func (l *rateLimiter) admit(h http.Header, cost int, now time.Time) (RateLimitRecord, bool) {
	window := l.cfg.Window
	if window <= 0 {
		window = time.Minute
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.windowStart.IsZero() || now.Sub(l.windowStart) >= window {
		l.windowStart, l.requests, l.tokens = now, 0, 0
	}
	fits := (l.cfg.RequestsPerMinute == 0 || l.requests+1 <= l.cfg.RequestsPerMinute) &&
		(l.cfg.TokensPerMinute == 0 || l.tokens+cost <= l.cfg.TokensPerMinute)
	ok := fits || !l.cfg.Enforce
	if ok {
		l.requests++
		l.tokens += cost
	}
	reset := l.windowStart.Add(window).Sub(now).Round(time.Millisecond)
	rec := RateLimitRecord{ResetRequests: reset.String(), Limited: !ok}
	if n := l.cfg.RequestsPerMinute; n > 0 {
		rec.RemainingRequests = max(n-l.requests, 0)
		h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(n))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(rec.RemainingRequests))
		h.Set("X-Ratelimit-Reset-Requests", reset.String())
	}
	if n := l.cfg.TokensPerMinute; n > 0 {
		rec.RemainingTokens = max(n-l.tokens, 0)
		h.Set("X-Ratelimit-Limit-Tokens", strconv.Itoa(n))
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(rec.RemainingTokens))
		h.Set("X-Ratelimit-Reset-Tokens", reset.String())
	}
	if !ok {
		h.Set("Retry-After", strconv.Itoa(int((reset+time.Second-1)/time.Second)))
	}
	return rec, ok
}

// rateLimit applies the configured limits to a planned request; a refused
// one gets OpenAI's 429 error.
func (s *Server) rateLimit(w http.ResponseWriter, entry *truthEntry, p *plan) *apiError {
	if s.limits == nil {
		return nil
	}
	rec, ok := s.limits.admit(w.Header(), p.promptTokens+p.maxTokens, time.Now())
	entry.update(func(r *RequestRecord) { r.RateLimit = &rec })
	if ok {
		return nil
	}
	return &apiError{status: http.StatusTooManyRequests, msg: fmt.Sprintf("Rate limit reached for %s; please try again in %s.", p.model, rec.ResetRequests)}
}
