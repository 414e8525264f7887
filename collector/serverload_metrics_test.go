package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

// TestServerLoadGauges: no series before a report, then the last value
// of each gauge a report carried (vLLM's never carry running).
func TestServerLoadGauges(t *testing.T) {
	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	names := []string{"llm_probe_server_load_requests_waiting", "llm_probe_server_load_requests_running", "llm_probe_server_load_kv_cache_usage_ratio"}
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess})
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("%d load series before any report (err %v), want none", n, err)
	}
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess,
		ServerLoad: &probe.ServerLoad{Waiting: 5, HasWaiting: true, KVCacheUsage: 0.9, HasKVCache: true}})
	// A failed request's report counts too; a report without KV keeps
	// the last KV value.
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeHTTP5xx,
		ServerLoad: &probe.ServerLoad{Waiting: 3, HasWaiting: true}})
	// A probe without a report changes nothing.
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess})
	want := `
# HELP llm_probe_server_load_kv_cache_usage_ratio Fraction of the server's KV cache in use (0 to 1), as it reported it in its answer to the probe's latest request that carried a load report (endpoint-load-metrics).
# TYPE llm_probe_server_load_kv_cache_usage_ratio gauge
llm_probe_server_load_kv_cache_usage_ratio{model="m",probe="p",target="t"} 0.9
# HELP llm_probe_server_load_requests_waiting Requests waiting in the server's queue, as the server reported them in its answer to the probe's latest request that carried a load report (endpoint-load-metrics).
# TYPE llm_probe_server_load_requests_waiting gauge
llm_probe_server_load_requests_waiting{model="m",probe="p",target="t"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg, names...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	pm.Remove("t", "p")
	if n, _ := testutil.GatherAndCount(reg, names...); n != 0 {
		t.Errorf("%d load series after the probe was removed", n)
	}
}
