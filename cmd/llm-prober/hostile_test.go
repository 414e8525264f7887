package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestHostileServersThroughTheDaemon probes hostile servers from the
// running daemon (the driver-level cases are in probe/hostile_servers_test.go)
// and checks each ends in its outcome, counted in /metrics, while /metrics
// keeps answering.
func TestHostileServersThroughTheDaemon(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.URL.Path {
		case "/gzip/v1/chat/completions":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff})
		case "/big/v1/chat/completions":
			w.Header().Set("Content-Length", fmt.Sprint(1<<30))
			_, _ = w.Write(make([]byte, 64<<10))
		case "/redirect/v1/chat/completions":
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		}
	}))
	t.Cleanup(huge.Close)
	// A head that never finishes.
	l := testutil.Listen(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := io.WriteString(c, "X-Slow: x\r\n"); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { close(stop); l.Close(); wg.Wait() })

	var cfg strings.Builder
	cfg.WriteString("targets:\n")
	for _, tg := range []struct{ name, url string }{
		{"gzip", huge.URL + "/gzip"}, {"big", huge.URL + "/big"}, {"redirect", huge.URL + "/redirect"}, {"slow-head", "http://" + l.Addr().String()},
	} {
		fmt.Fprintf(&cfg, "  - {name: %s, protocol: openai_chat, url: %s, model: m, timeout: 500ms, probes: [{name: p, schedule: {every: 200ms}}]}\n", tg.name, tg.url)
	}
	td := startDaemon(t, cfg.String())
	want := map[string]string{"gzip": "protocol_error", "big": "protocol_error", "redirect": "protocol_error", "slow-head": "timeout"}
	testutil.WaitFor(t, "two requests of each target ended in its outcome", waitTimeout, func() bool {
		mfs := testutil.Scrape(t, td.url)
		for target, outcome := range want {
			if mfs.Sum("llm_probe_requests_total", "target", target, "outcome", outcome) < 2 {
				return false
			}
		}
		return true
	})
	mfs := testutil.Scrape(t, td.url)
	for target, outcome := range want {
		all := mfs.Sum("llm_probe_requests_total", "target", target)
		if got := mfs.Sum("llm_probe_requests_total", "target", target, "outcome", outcome); got != all {
			t.Errorf("%s: %v of %v requests ended as %s", target, got, all, outcome)
		}
	}
}
