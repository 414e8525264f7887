package testutil

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// ReadyTimeout bounds WaitHTTP and WaitReady: generous, for a loaded
// machine running tests under the race detector.
const ReadyTimeout = time.Minute

// Poll calls check every interval until it reports done; once timeout has
// passed it fails the test, naming what it waited for and check's last
// explanation of why not.
func Poll(t testing.TB, what string, timeout, interval time.Duration, check func() (done bool, why string)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		done, why := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			if why != "" {
				why = ": " + why
			}
			t.Fatalf("waited %s for %s%s", time.Since(start).Round(time.Millisecond), what, why)
		}
		time.Sleep(min(interval, time.Until(deadline)+time.Millisecond))
	}
}

// WaitFor polls cond every 10 ms until it holds, failing the test with what
// once timeout has passed.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	Poll(t, what, timeout, 10*time.Millisecond, func() (bool, string) { return cond(), "" })
}

// client is for the helpers' own requests: bounded, and without idle
// connections left behind for goleak to find.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// WaitHTTP polls url until it answers 200 OK, for at most ReadyTimeout.
func WaitHTTP(t testing.TB, url string) {
	t.Helper()
	waitHTTP(t, url, nil)
}

// WaitReady waits for the daemon at baseURL (http://host:port) to say it
// is ready: 200 OK from /-/ready.
func WaitReady(t testing.TB, baseURL string) {
	t.Helper()
	waitHTTP(t, baseURL+"/-/ready", nil)
}

// waitHTTP is WaitHTTP that gives up early, with gone's explanation, when
// gone returns one (a process that exited).
func waitHTTP(t testing.TB, url string, gone func() string) {
	t.Helper()
	Poll(t, "200 OK from "+url, ReadyTimeout, 50*time.Millisecond, func() (bool, string) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, ""
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if gone != nil {
			if why := gone(); why != "" {
				t.Fatalf("waiting for 200 OK from %s: %s", url, why)
			}
		}
		return false, "last answer: " + err.Error()
	})
}
