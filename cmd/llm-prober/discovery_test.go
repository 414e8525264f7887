package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/simulator"
	"github.com/llm-prober/llm-prober/simulator/simtest"
)

// TestDaemonDiscoversModelsAndProbesEmbeddings: the daemon wires model
// discovery between the configuration and the engine (a model the
// simulator starts serving gets series, on /metrics and on the status
// page) and exports embedding answers and wrong answers; /metrics stays
// valid for promtool.
func TestDaemonDiscoversModelsAndProbesEmbeddings(t *testing.T) {
	cfg := simulator.DefaultConfig()
	cfg.Latency.TTFTBase = 5 * time.Millisecond
	cfg.Latency.DecodeBase = time.Millisecond
	sim := simtest.Start(t, cfg)
	sim.Server.SetModels(simulator.ServedModel{Name: "sim-llm"})
	td := startDaemon(t, fmt.Sprintf(`targets:
  - name: fleet
    protocol: openai_chat
    url: %[1]s
    discover_models: {refresh_interval: 5s, timeout: 2s}
    probes: [{name: steady, schedule: {every: 100ms}}]
  - name: embed
    protocol: openai_embeddings
    url: %[1]s
    model: sim-llm
    embedding: {dimension: %[2]d}
    probes: [{name: e, schedule: {every: 100ms}}]
  - name: nan
    protocol: ollama_embed
    url: %[1]s
    model: sim-llm
    headers: {%[3]s: nan}
    probes: [{name: e, schedule: {every: 100ms}}]
workloads:
  default: {max_tokens: 4, ignore_eos: true}
`, sim.URL, simulator.DefaultEmbeddingDimension, simulator.HeaderPooledFault))
	has := func(series string) bool {
		_, _, body := get(t, "GET", td.url+"/metrics")
		v, ok := seriesValue(body, series)
		return ok && v > 0
	}
	testutil.WaitFor(t, "the listed model probed", waitTimeout, func() bool {
		return has(`llm_probe_requests_total{model="sim-llm",outcome="success",probe="steady@sim-llm",target="fleet"}`)
	})
	sim.Server.SetModels(simulator.ServedModel{Name: "sim-llm"}, simulator.ServedModel{Name: "sql-lora", Parent: "sim-llm"})
	testutil.WaitFor(t, "the adapter loaded at run time probed", 3*waitTimeout, func() bool {
		return has(`llm_probe_requests_total{model="sql-lora",outcome="success",probe="steady@sql-lora",target="fleet"}`)
	})
	testutil.WaitFor(t, "embedding answers", waitTimeout, func() bool {
		return has(`llm_probe_requests_total{model="sim-llm",outcome="wrong_answer",probe="e",target="nan"}`) &&
			has(`llm_probe_embedding_dimension{model="sim-llm",probe="e",target="embed"}`)
	})
	_, _, body := get(t, "GET", td.url+"/metrics")
	for _, want := range []string{
		`llm_prober_discovered_models{target="fleet"} 2`,
		`llm_prober_discovered_model_info{model="sql-lora",target="fleet"} 1`,
		`llm_prober_model_discovery_stale{target="fleet"} 0`,
		fmt.Sprintf(`llm_probe_embedding_dimension{model="sim-llm",probe="e",target="embed"} %d`, simulator.DefaultEmbeddingDimension),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtoolCheckMetrics(t, body)
	if status, _, page := get(t, "GET", td.url+"/probes/fleet/"+url.PathEscape("steady@sql-lora")); status != 200 || !strings.Contains(page, "sql-lora") {
		t.Errorf("status page of the discovered probe: %d", status)
	}
}
