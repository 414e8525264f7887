package multitarget

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/simulator"
)

// More parallel /probe calls than slots against a slow server: each is
// answered either with a probe that ran in full (and, the server being
// healthy, succeeded) or with 503 at once. Time spent waiting for a slot
// never turns into a timeout blamed on the target.
func TestProbeUnderLoad(t *testing.T) {
	const slots, calls = 4, 16
	reg := prometheus.NewPedanticRegistry()
	h := newHandlerWith(t, slots, reg)
	slow := sim(t, func(c *simulator.Config) {
		c.Latency.TTFTBase = 700 * time.Millisecond
		c.Latency.Jitter = 0
	})
	query := "module=chat&target=" + url.QueryEscape(slow)
	// 2 s of scrape timeout: 1.5 s for a probe that takes 0.7 s.
	header := http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {"2"}}
	type answer struct {
		code int
		body string
		took time.Duration
	}
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			start := time.Now()
			w := get(h, query, header)
			answers[i] = answer{w.Code, w.Body.String(), time.Since(start)}
		})
	}
	wg.Wait()
	ok, busy := 0, 0
	for _, a := range answers {
		switch {
		case a.code == http.StatusOK && strings.Contains(a.body, `llm_probe_success{model="sim",probe="short"} 1`):
			ok++
		case a.code == http.StatusServiceUnavailable && strings.Contains(a.body, "too many /probe requests in flight"):
			busy++
			if a.took > time.Second {
				t.Errorf("a 503 took %s; it must come at once, not after a probe's worth of waiting", a.took)
			}
		default:
			t.Errorf("HTTP %d after %s, want a successful probe or 503:\n%s", a.code, a.took, a.body)
		}
	}
	t.Logf("%d calls, %d slots: %d probes succeeded, %d answered 503", calls, slots, ok, busy)
	if ok < slots {
		t.Errorf("only %d probes ran with %d slots", ok, slots)
	}
	if busy == 0 {
		t.Errorf("%d calls at once with %d slots and no 503", calls, slots)
	}
	want := fmt.Sprintf(`# HELP llm_prober_probe_endpoint_rejected_total %s
# TYPE llm_prober_probe_endpoint_rejected_total counter
llm_prober_probe_endpoint_rejected_total{reason="bad_request"} 0
llm_prober_probe_endpoint_rejected_total{reason="no_config"} 0
llm_prober_probe_endpoint_rejected_total{reason="no_slot"} %d
llm_prober_probe_endpoint_rejected_total{reason="not_allowed"} 0
`, rejectedHelp, busy)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_prober_probe_endpoint_rejected_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
