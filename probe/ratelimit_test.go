package probe

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestParseRateLimitReset(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"6m0s":                 6 * time.Minute,
		"1s":                   time.Second,
		"20ms":                 20 * time.Millisecond,
		"1h2m3.5s":             time.Hour + 2*time.Minute + 3500*time.Millisecond,
		"30":                   30 * time.Second,
		"0.5":                  500 * time.Millisecond,
		"1795521630":           30 * time.Second, // Unix time
		"2026-11-24T12:01:00Z": time.Minute,
		"2026-11-24T11:59:00Z": 0, // already past: resets now
	} {
		if got, ok := ParseRateLimitReset(v, now); !ok || got != want {
			t.Errorf("ParseRateLimitReset(%q) = %v %t, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "soon", "-1s", "-5", "NaN", "Inf", "9999h", "1e300"} {
		if got, ok := ParseRateLimitReset(v, now); ok {
			t.Errorf("ParseRateLimitReset(%q) = %v, want refused", v, got)
		}
	}
}

func TestParseRateLimitHeaders(t *testing.T) {
	now := time.Now()
	if parseRateLimit(http.Header{"Content-Type": {"text/event-stream"}}, 200, now) != nil {
		t.Fatal("headers without rate limits gave a RateLimit")
	}
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-remaining-requests", "59")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-tokens", "lots")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
	h.Set("retry-after", "20")
	rl := parseRateLimit(h, 200, now)
	if rl.Requests != (RateLimitWindow{Limit: 60, Remaining: 59, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true}) {
		t.Errorf("requests %+v", rl.Requests)
	}
	if rl.Tokens.HasRemaining || rl.Tokens.Limit != 150000 || rl.Tokens.Reset != 6*time.Minute {
		t.Errorf("tokens %+v", rl.Tokens)
	}
	if rl.HasRetryAfter { // only on 429 and 503
		t.Errorf("retry-after on a 200: %v", rl.RetryAfter)
	}
	if !slices.Equal(rl.Malformed, []string{"x-ratelimit-remaining-tokens"}) {
		t.Errorf("malformed %v", rl.Malformed)
	}
	h.Set("retry-after", now.Add(90*time.Second).UTC().Format(http.TimeFormat))
	if rl := parseRateLimit(h, 429, now); !rl.HasRetryAfter || rl.RetryAfter < 88*time.Second || rl.RetryAfter > 90*time.Second {
		t.Errorf("retry-after HTTP-date: %v %t", rl.RetryAfter, rl.HasRetryAfter)
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{"6m0s", "1s", "20ms", "30", "1795521630", "2026-11-24T12:01:00Z", "Wed, 21 Oct 2015 07:28:00 GMT",
		"-1", "1e400", "NaN", "0x10", "", "\x00"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d, ok := ParseRateLimitReset(v, now); ok && (d < 0 || d > maxRateLimitWait) {
			t.Fatalf("reset %q = %v", v, d)
		}
		if d, ok := ParseRetryAfter(v, now); ok && (d < 0 || d > maxRateLimitWait) {
			t.Fatalf("retry-after %q = %v", v, d)
		}
		if n, ok := ParseRateLimitCount(v); ok && (n < 0 || n > maxRateLimitValue || n != n) {
			t.Fatalf("count %q = %v", v, n)
		}
		h := http.Header{}
		for _, name := range []string{HeaderLimitRequests, HeaderRemainingRequests, HeaderResetRequests, HeaderLimitTokens,
			HeaderRemainingTokens, HeaderResetTokens, HeaderRetryAfter} {
			h[name] = []string{v}
		}
		if rl := parseRateLimit(h, 429, now); rl == nil || len(rl.Malformed) > len(RateLimitHeaders()) {
			t.Fatalf("parseRateLimit: %+v", rl)
		}
	})
}
