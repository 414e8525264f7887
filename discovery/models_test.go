package discovery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// discoveringConfig is one target that discovers its models from url, a
// probe template every 50 ms, and a static target beside it.
func discoveringConfig(t *testing.T, url, filter string, maxModels int) *config.Config {
	t.Helper()
	text := fmt.Sprintf(`targets:
  - name: fleet
    protocol: openai_chat
    url: %[1]s
    discover_models: {filter: %[2]q, max_models: %[3]d}
    probes:
      - {name: steady, schedule: {every: 50ms}}
  - name: static
    protocol: openai_chat
    url: %[1]s
    model: sim-llm
    probes:
      - {name: steady, schedule: {every: 1s}}
`, url, filter, maxModels)
	cfg, err := config.Parse([]byte(text), "test.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// Faster than a configuration may ask for, so the test runs in
	// seconds.
	cfg.Targets[0].DiscoverModels.RefreshInterval = model.Duration(100 * time.Millisecond)
	cfg.Targets[0].DiscoverModels.Timeout = model.Duration(time.Second)
	return cfg
}

type harness struct {
	reg    *prometheus.Registry
	eng    *engine.Engine
	models *Models
	logs   *testutil.SyncBuffer
}

func start(t *testing.T, cfg *config.Config) *harness {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	logger := promslog.New(&promslog.Config{Writer: logs})
	pm := collector.NewProbeMetrics()
	h := &harness{reg: prometheus.NewRegistry(), eng: engine.New(logger, pm), logs: logs}
	h.models = New(logger, h.eng.Apply)
	h.reg.MustRegister(pm, h.models)
	h.models.Apply(cfg)
	t.Cleanup(func() {
		h.models.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.eng.Stop(ctx)
	})
	return h
}

// successes is the probe's count of successful requests; -1 when the
// probe has no series.
func (h *harness) successes(t *testing.T, probeName string) float64 {
	f := testutil.Gather(t, h.reg)
	s := f.Series("llm_probe_requests_total", "target", "fleet", "probe", probeName, "outcome", "success")
	if len(s) == 0 {
		return -1
	}
	return s[0].GetCounter().GetValue()
}

func (h *harness) gauge(t *testing.T, name string, labels ...string) float64 {
	return testutil.Gather(t, h.reg).Sum(name, append([]string{"target", "fleet"}, labels...)...)
}

// TestModelsAppearAndDisappear: the ground truth is the simulator's model
// list. Each listed model, LoRA adapters included, gets a probe that
// succeeds against it with its own model label; a model added at run
// time gets a probe and series; a removed one loses them; garbage keeps
// the last good list and says so; the static target is never touched.
func TestModelsAppearAndDisappear(t *testing.T) {
	sim := simtest.Start(t, simulator.DefaultConfig())
	sim.Server.SetModels(simulator.ServedModel{Name: "sim-llm"}, simulator.ServedModel{Name: "sql-lora", Parent: "sim-llm"})
	h := start(t, discoveringConfig(t, sim.URL, ".*", 20))

	wait := func(what string, cond func() bool) {
		t.Helper()
		testutil.WaitFor(t, what, 10*time.Second, cond)
	}
	wait("both listed models probed successfully", func() bool {
		return h.successes(t, "steady@sim-llm") > 0 && h.successes(t, "steady@sql-lora") > 0
	})
	f := testutil.Gather(t, h.reg)
	if s := f.Series("llm_probe_requests_total", "probe", "steady@sql-lora", "model", "sql-lora"); len(s) == 0 {
		t.Error("the adapter's series do not carry model=sql-lora")
	}
	if v := h.gauge(t, "llm_prober_discovered_models"); v != 2 {
		t.Errorf("discovered models %v, want 2", v)
	}

	sim.Server.SetModels(simulator.ServedModel{Name: "sim-llm"}, simulator.ServedModel{Name: "sql-lora", Parent: "sim-llm"},
		simulator.ServedModel{Name: "new-model"})
	wait("the added model probed", func() bool { return h.successes(t, "steady@new-model") > 0 })

	sim.Server.SetModels(simulator.ServedModel{Name: "sim-llm"}, simulator.ServedModel{Name: "new-model"})
	wait("the removed adapter's series gone", func() bool { return h.successes(t, "steady@sql-lora") == -1 })
	if v := h.gauge(t, "llm_prober_discovered_model_info", "model", "sql-lora"); v != 0 {
		t.Error("the removed adapter still has its info series")
	}

	before := h.successes(t, "steady@new-model")
	sim.Server.SetModelListFault(simulator.ModelListGarbage)
	wait("the garbage answer counted as stale", func() bool {
		return h.gauge(t, "llm_prober_model_discovery_stale") == 1 && h.gauge(t, "llm_prober_model_discovery_failures_total") > 0
	})
	wait("the last good list still probed", func() bool { return h.successes(t, "steady@new-model") > before+2 })
	if v := h.gauge(t, "llm_prober_discovered_models"); v != 2 {
		t.Errorf("after garbage: discovered models %v, want the last good 2", v)
	}
	sim.Server.SetModelListFault(simulator.ModelListOK)
	wait("fresh again", func() bool { return h.gauge(t, "llm_prober_model_discovery_stale") == 0 })
	if len(testutil.Gather(t, h.reg).Series("llm_probe_requests_total", "target", "static", "probe", "steady")) == 0 {
		t.Error("the static target lost its probe")
	}
}

// TestFilterAndLimit: the filter keeps matching names, max_models the
// first of them in the server's order, and the rest is counted.
func TestFilterAndLimit(t *testing.T) {
	sim := simtest.Start(t, simulator.DefaultConfig())
	var list []simulator.ServedModel
	for _, n := range []string{"llama-a", "llama-b", "llama-c", "mistral", "llama-d"} {
		list = append(list, simulator.ServedModel{Name: n})
	}
	sim.Server.SetModels(list...)
	h := start(t, discoveringConfig(t, sim.URL, "llama-.*", 2))
	testutil.WaitFor(t, "the list applied", 10*time.Second, func() bool { return h.gauge(t, "llm_prober_discovered_models") == 2 })
	if v := h.gauge(t, "llm_prober_model_discovery_left_out"); v != 2 {
		t.Errorf("left out %v, want 2 (llama-c, llama-d)", v)
	}
	for _, m := range []string{"llama-a", "llama-b"} {
		if h.gauge(t, "llm_prober_discovered_model_info", "model", m) != 1 {
			t.Errorf("model %s not probed", m)
		}
	}
	// The limit is said once, with the names left out, not at every refresh.
	warn := "The server lists more models than discover_models.max_models"
	testutil.WaitFor(t, "the limit logged", 5*time.Second, func() bool { return strings.Contains(h.logs.String(), warn) })
	line := h.logs.String()[strings.Index(h.logs.String(), warn):]
	line = line[:strings.IndexByte(line, '\n')]
	for _, want := range []string{"max_models=2", "matching=4", "llama-c", "llama-d"} {
		if !strings.Contains(line, want) {
			t.Errorf("the limit's log line lacks %q: %s", want, line)
		}
	}
	time.Sleep(500 * time.Millisecond) // five more refreshes of the same list
	if n := strings.Count(h.logs.String(), warn); n != 1 {
		t.Errorf("the limit was logged %d times, want once", n)
	}
}

// TestReloadStopsDiscovery: a reload without the target stops its
// refreshes and drops its series.
func TestReloadStopsDiscovery(t *testing.T) {
	sim := simtest.Start(t, simulator.DefaultConfig())
	cfg := discoveringConfig(t, sim.URL, ".*", 20)
	h := start(t, cfg)
	testutil.WaitFor(t, "the model probed", 10*time.Second, func() bool { return h.successes(t, "steady@sim-llm") >= 2 })
	// A reload that leaves discovery alone keeps the list: the probe goes
	// on with its series, not restarted from zero or dropped for a while.
	before := h.successes(t, "steady@sim-llm")
	h.models.Apply(discoveringConfig(t, sim.URL, ".*", 20))
	if got := h.successes(t, "steady@sim-llm"); got < before {
		t.Errorf("an unchanged reload reset the probe: %v after %v", got, before)
	}
	static := *cfg
	static.Targets = cfg.Targets[1:]
	h.models.Apply(&static)
	if h.successes(t, "steady@sim-llm") != -1 || len(testutil.Gather(t, h.reg).Series("llm_prober_discovered_models")) != 0 {
		t.Error("the removed target kept its series")
	}
}
