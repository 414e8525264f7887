package fleet

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/discovery"
	"github.com/llm-prober/llm-prober/discovery/kubetest"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/shard"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// results counts results per target, as the status page's history would.
type results struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *results) Add(engine.Info)    {}
func (r *results) Remove(_, _ string) {}
func (r *results) Record(target, _ string, _ *probe.Request, _ *probe.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[target]++
}

func (r *results) since(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[target]
}

func writeSD(t *testing.T, path string, endpoints ...string) {
	t.Helper()
	var q []string
	for _, e := range endpoints {
		q = append(q, fmt.Sprintf("%q", e))
	}
	// Written aside and renamed, as a tool updating file_sd should, so a
	// refresh never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, `[{"targets": [%s], "labels": {"env": "test"}}]`, strings.Join(q, ",")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A file_sd file edited at run time starts probes of the endpoints added
// and stops those of the endpoints removed; a broken edit keeps the last
// good list.
func TestFileSDStartsAndStopsProbes(t *testing.T) {
	simA := fastSim(t)
	simB := fastSim(t)
	dir := t.TempDir()
	sd := filepath.Join(dir, "targets.json")
	writeSD(t, sd, simA.URL)
	res, reg := startFleet(t, dir, `modules:
  chat:
    protocol: openai_chat
    model: sim
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes: [{name: steady, schedule: {every: 100ms}}]
target_discovery:
  - module: chat
    file_sd_configs: [{files: [targets.json], refresh_interval: 1s}]
`, nil)

	nameA := config.DiscoveredName("chat", simA.URL)
	nameB := config.DiscoveredName("chat", simB.URL)
	waitFor(t, "probes of the first endpoint", func() bool { return res.since(nameA) >= 2 })

	// Add B, remove A.
	writeSD(t, sd, simB.URL)
	waitFor(t, "probes of the added endpoint", func() bool { return res.since(nameB) >= 2 })
	stoppedAt := res.since(nameA)
	time.Sleep(500 * time.Millisecond)
	if n := res.since(nameA); n > stoppedAt+1 {
		t.Errorf("removed endpoint still probed: %d results after removal, %d before", n, stoppedAt)
	}

	// A broken file keeps B probed and says so in the metric.
	if err := os.WriteFile(sd, []byte(`[{"targets": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the source reported down", func() bool { return gauge(t, reg, "llm_prober_discovery_source_up") == 0 })
	before := res.since(nameB)
	waitFor(t, "the last good list still probed", func() bool { return res.since(nameB) >= before+2 })
	if got := gauge(t, reg, "llm_prober_discovery_targets"); got != 1 {
		t.Errorf("llm_prober_discovery_targets = %v, want the last good list's 1", got)
	}
}

// Kubernetes EndpointSlices watched through the API: a ready endpoint's
// probes start, an endpoint that becomes not ready or whose slice is
// deleted stops being probed, and an unreachable API server keeps the
// last endpoints probed.
func TestKubernetesSDStartsAndStopsProbes(t *testing.T) {
	simA := fastSim(t)
	simB := fastSim(t)
	hostPort := func(s *simtest.Sim) (string, int32) {
		u, err := url.Parse(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(u.Port())
		if err != nil {
			t.Fatal(err)
		}
		return u.Hostname(), int32(p)
	}
	hostA, portA := hostPort(simA)
	hostB, portB := hostPort(simB)
	yes, no := new(true), new(false)
	api := kubetest.New(kubetest.Slice("llm", "vllm-a", "vllm", portA, "http", kubetest.Endpoint(hostA, "a", yes)))
	res, reg := startFleet(t, t.TempDir(), `modules:
  chat:
    protocol: openai_chat
    model: sim
    allowed_targets: 'http://127\.0\.0\.1:[0-9]+'
    probes: [{name: steady, schedule: {every: 100ms}}]
target_discovery:
  - module: chat
    kubernetes_sd_configs: [{role: endpointslice, namespaces: {names: [llm]}, service: vllm, port: http}]
`, func(o *Options) {
		o.KubeClient = func(*config.KubernetesSDConfig) (discovery.KubeClient, error) { return api, nil }
	})

	nameA := config.DiscoveredName("chat", fmt.Sprintf("http://%s:%d", hostA, portA))
	nameB := config.DiscoveredName("chat", fmt.Sprintf("http://%s:%d", hostB, portB))
	waitFor(t, "probes of the first endpoint", func() bool { return res.since(nameA) >= 2 })
	api.WaitWatching(t, 1)

	// B's slice appears; A becomes not ready.
	ctx := context.Background()
	es := api.DiscoveryV1().EndpointSlices("llm")
	if _, err := es.Create(ctx, kubetest.Slice("llm", "vllm-b", "vllm", portB, "http", kubetest.Endpoint(hostB, "b", yes)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.Update(ctx, kubetest.Slice("llm", "vllm-a", "vllm", portA, "http", kubetest.Endpoint(hostA, "a", no)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "probes of the added endpoint", func() bool { return res.since(nameB) >= 2 })
	waitStopped(t, res, nameA)

	// The API server goes away: B is still probed, the source is down.
	api.Down()
	waitFor(t, "the source reported down", func() bool { return gauge(t, reg, "llm_prober_discovery_source_up") == 0 })
	before := res.since(nameB)
	waitFor(t, "the last good list still probed", func() bool { return res.since(nameB) >= before+2 })

	// Back, and B's slice is deleted.
	api.Up()
	waitFor(t, "the source reported up", func() bool { return gauge(t, reg, "llm_prober_discovery_source_up") == 1 })
	api.WaitWatching(t, 1)
	if err := es.Delete(ctx, "vllm-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, res, nameB)
}

// startFleet writes cfgText as dir/c.yml, loads it and runs a Daemon on
// it with an engine and server metrics of its own, all stopped when the
// test ends; with, when set, adds to the daemon's options. It returns the
// probes' results and the daemon's registry.
func startFleet(t *testing.T, dir, cfgText string, with func(*Options)) (*results, *prometheus.Registry) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "c.yml"), []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	logger := promslog.NewNopLogger()
	reg := prometheus.NewRegistry()
	res := &results{n: map[string]int{}}
	eng := engine.New(logger, collector.NewProbeMetrics(), res)
	servers := collector.NewServerMetrics(logger)
	o := Options{Logger: logger, Registry: reg, Shard: shard.Shard{Count: 1}, Engine: eng, Servers: servers}
	if with != nil {
		with(&o)
	}
	d := NewDaemon(o)
	t.Cleanup(func() {
		d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Stop(ctx)
		servers.Close()
	})
	d.SetConfig(cfg)
	return res, reg
}

// waitStopped waits until target's results stop growing: its probe was
// stopped.
func waitStopped(t *testing.T, res *results, target string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := res.since(target)
		time.Sleep(500 * time.Millisecond)
		if res.since(target) <= n+1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still probed", target)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == name })
	if i < 0 || len(mfs[i].Metric) != 1 {
		return -1
	}
	return mfs[i].Metric[0].GetGauge().GetValue()
}

func fastSim(t *testing.T) *simtest.Sim {
	cfg := simulator.DefaultConfig()
	cfg.ServedModelNames = []string{"sim"}
	cfg.Output.MeanTokens = 4
	return simtest.Start(t, cfg)
}
