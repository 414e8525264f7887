package collector

import (
	"net/http"
	"testing"
	"time"
)

func TestServerFetchLimit(t *testing.T) {
	for header, want := range map[string]time.Duration{
		"":       0,
		"abc":    0,
		"0":      0,
		"-1":     0,
		"NaN":    0,
		"+Inf":   0,
		"1e300":  0,
		"10":     9500 * time.Millisecond,
		"1":      500 * time.Millisecond,
		"2.5":    2 * time.Second,
		"0.8":    400 * time.Millisecond,
		"0.1":    50 * time.Millisecond,
		" 3 ":    0,
		"3s":     0,
		"1e-300": time.Nanosecond,
	} {
		h := http.Header{}
		if header != "" {
			h.Set(ScrapeTimeoutHeader, header)
		}
		if got := serverFetchLimit(h); got != want {
			t.Errorf("%s: %q: limit %s, want %s", ScrapeTimeoutHeader, header, got, want)
		}
	}
}
