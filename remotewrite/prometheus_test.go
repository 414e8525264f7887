//go:build unix

package remotewrite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// outage is how long the receiver is down: the 30 s issue 21 names, about
// 30 gathers of a few samples each, which the test's queue of 1000 holds.
// Sends fail, back off to max_backoff and drain in order on return.
const outage = 30 * time.Second

// countingGatherer counts the gathers, so the test knows how many
// samples of each series were made.
type countingGatherer struct {
	prometheus.Gatherer
	n atomic.Int64
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.n.Add(1)
	return g.Gatherer.Gather()
}

func startPrometheus(t *testing.T, bin, addr, dir string) *testutil.Process {
	t.Helper()
	p := testutil.StartProcess(t, "prometheus", exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr,
		"--web.enable-remote-write-receiver",
	))
	p.WaitHTTP(t, "http://"+addr+"/-/ready")
	return p
}

// Series pushed to a real Prometheus (Debian's 2.42, its remote-write
// receiver enabled) arrive with the external labels, and a receiver
// outage loses nothing that fits in the queue.
func TestRemoteWriteToPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real Prometheus and about 35 s")
	}
	bin := testutil.RequireTool(t, "prometheus", "LLM_PROBER_REQUIRE_PROMTOOL",
		"the remote-write test needs a real Prometheus; make test installs Debian's prometheus package (scripts/ensure-promtool.sh)")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte("global: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	prom := startPrometheus(t, bin, addr, dir)

	reg := prometheus.NewRegistry()
	ticks := prometheus.NewCounter(prometheus.CounterOpts{Name: "rw_test_ticks_total", Help: "Ticks."})
	reg.MustRegister(ticks)
	g := &countingGatherer{Gatherer: reg}
	cfg := loadConfig(t, moduleOnly+fmt.Sprintf(`
external_labels: {location: ci-east}
remote_write:
  - url: http://%s/api/v1/write
    interval: 1s
    remote_timeout: 2s
    # A gather here is a few samples: 1000 holds the whole outage.
    queue_config: {capacity: 1000, max_samples_per_send: 100, min_backoff: 50ms, max_backoff: 1s}
`, addr))
	m := NewManager(promslog.NewNopLogger(), g, reg)
	m.Apply(cfg)
	stopped := false
	defer func() {
		if !stopped {
			m.Stop(context.Background())
		}
	}()

	query := func(q string) (float64, bool) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data.Result) != 1 {
			return 0, false
		}
		s, _ := body.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	testutil.WaitFor(t, "the series with its external label in Prometheus", 15*time.Second, func() bool {
		_, ok := query(`rw_test_ticks_total{location="ci-east"}`)
		return ok
	})

	prom.Stop()
	ticks.Inc()
	time.Sleep(outage)
	ticks.Inc()
	startPrometheus(t, bin, addr, dir)
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	m.Stop(ctx)
	cancel()
	stopped = true

	gathers := g.n.Load()
	testutil.Poll(t, "every gather's sample in Prometheus", 10*time.Second, 200*time.Millisecond, func() (bool, string) {
		n, _ := query(`count_over_time(rw_test_ticks_total{location="ci-east"}[10m])`)
		return n == float64(gathers), fmt.Sprintf("%v samples stored, %d gathered", n, gathers)
	})
	if v, _ := query(`max_over_time(rw_test_ticks_total{location="ci-east"}[10m])`); v != 2 {
		t.Errorf("last value %v, want 2", v)
	}
	if n, _ := query(`llm_prober_remote_write_samples_dropped_total{reason="queue_full"}`); n != 0 {
		t.Errorf("%v samples dropped for room", n)
	}
	if n, _ := query(`max_over_time(llm_prober_remote_write_failed_sends_total[10m])`); n < 1 {
		t.Errorf("failed sends during the outage: %v, want some", n)
	}
}
