package probe

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Hosted APIs and gateways say how much of their rate limit is left in
// response headers (OpenAI, Azure OpenAI, vLLM behind LiteLLM and most
// gateways use these names). Keeping the last values lets an alert fire
// before the probes, and the users, meet 429s.

// Rate-limit header names, canonical so lookups do not allocate.
const (
	HeaderLimitRequests     = "X-Ratelimit-Limit-Requests"
	HeaderRemainingRequests = "X-Ratelimit-Remaining-Requests"
	HeaderResetRequests     = "X-Ratelimit-Reset-Requests"
	HeaderLimitTokens       = "X-Ratelimit-Limit-Tokens"
	HeaderRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	HeaderResetTokens       = "X-Ratelimit-Reset-Tokens"
	HeaderRetryAfter        = "Retry-After"
)

// RateLimitHeaders lists the headers read, lower-case, as label values of
// the malformed-header counter.
func RateLimitHeaders() []string {
	return []string{
		strings.ToLower(HeaderLimitRequests), strings.ToLower(HeaderRemainingRequests), strings.ToLower(HeaderResetRequests),
		strings.ToLower(HeaderLimitTokens), strings.ToLower(HeaderRemainingTokens), strings.ToLower(HeaderResetTokens),
		strings.ToLower(HeaderRetryAfter),
	}
}

// RateLimit is what one answer's headers said about the target's rate
// limits.
type RateLimit struct {
	Requests, Tokens RateLimitWindow
	// RetryAfter is Retry-After of a 429 or 503 answer, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Malformed lists (lower-case) the headers present but unusable;
	// their values are ignored.
	Malformed []string
}

// RateLimitWindow is one limited resource (requests or tokens).
type RateLimitWindow struct {
	Limit, Remaining       float64
	HasLimit, HasRemaining bool
	// Reset is how long until the window resets, as the server said.
	Reset    time.Duration
	HasReset bool
}

// maxRateLimitValue bounds a believable limit or remainder.
const maxRateLimitValue = 1e15

// maxRateLimitWait bounds a believable reset or retry delay.
const maxRateLimitWait = 7 * 24 * time.Hour

// parseRateLimit reads the rate-limit headers of an answer with status
// code received at now; nil when it carried none (no allocation then).
func parseRateLimit(h http.Header, code int, now time.Time) *RateLimit {
	if h[HeaderLimitRequests] == nil && h[HeaderRemainingRequests] == nil && h[HeaderResetRequests] == nil &&
		h[HeaderLimitTokens] == nil && h[HeaderRemainingTokens] == nil && h[HeaderResetTokens] == nil &&
		h[HeaderRetryAfter] == nil {
		return nil
	}
	rl := &RateLimit{}
	count := func(w *RateLimitWindow, limitH, remainingH, resetH string) {
		if v, ok := first(h, limitH); ok {
			if w.Limit, w.HasLimit = ParseRateLimitCount(v); !w.HasLimit {
				rl.Malformed = append(rl.Malformed, strings.ToLower(limitH))
			}
		}
		if v, ok := first(h, remainingH); ok {
			if w.Remaining, w.HasRemaining = ParseRateLimitCount(v); !w.HasRemaining {
				rl.Malformed = append(rl.Malformed, strings.ToLower(remainingH))
			}
		}
		if v, ok := first(h, resetH); ok {
			if w.Reset, w.HasReset = ParseRateLimitReset(v, now); !w.HasReset {
				rl.Malformed = append(rl.Malformed, strings.ToLower(resetH))
			}
		}
	}
	count(&rl.Requests, HeaderLimitRequests, HeaderRemainingRequests, HeaderResetRequests)
	count(&rl.Tokens, HeaderLimitTokens, HeaderRemainingTokens, HeaderResetTokens)
	if v, ok := first(h, HeaderRetryAfter); ok && (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) {
		if rl.RetryAfter, rl.HasRetryAfter = ParseRetryAfter(v, now); !rl.HasRetryAfter {
			rl.Malformed = append(rl.Malformed, strings.ToLower(HeaderRetryAfter))
		}
	}
	return rl
}

func first(h http.Header, name string) (string, bool) {
	v := h[name]
	if len(v) == 0 {
		return "", false
	}
	return strings.TrimSpace(v[0]), true
}

// ParseRateLimitCount reads a limit or remainder: a non-negative number
// (integers in practice; some gateways send decimals).
func ParseRateLimitCount(v string) (float64, bool) {
	if v == "" || len(v) > 32 {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxRateLimitValue {
		return 0, false
	}
	return f, true
}

// ParseRateLimitReset reads x-ratelimit-reset-*: OpenAI's Go-style
// duration ("6m0s", "1s", "20ms", "1h2m3.5s"), a plain number of seconds
// (Azure and gateways), a Unix time in seconds, or an RFC 3339 time
// (both measured from now).
func ParseRateLimitReset(v string, now time.Time) (time.Duration, bool) {
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil {
		return boundedWait(d)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f < 1e10 {
		if f > 1e9 { // a Unix time: 1e9 s is 2001, and no window lasts 31 years
			return boundedWait(time.Unix(0, 0).Add(time.Duration(f * float64(time.Second))).Sub(now))
		}
		return boundedWait(time.Duration(f * float64(time.Second)))
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return boundedWait(max(t.Sub(now), 0))
	}
	return 0, false
}

// ParseRetryAfter reads Retry-After (RFC 9110): delay-seconds or an
// HTTP-date.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return boundedWait(time.Duration(n) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return boundedWait(max(t.Sub(now), 0))
	}
	return 0, false
}

func boundedWait(d time.Duration) (time.Duration, bool) {
	if d < 0 || d > maxRateLimitWait {
		return 0, false
	}
	return d, true
}
