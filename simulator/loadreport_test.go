package simulator

import "testing"

// TestORCAHeader: the values are vLLM's create_orca_header output
// (orca_metrics.py @08408b8) for the same gauges: Python float reprs,
// ", "-joined text, json.dumps' separators.
func TestORCAHeader(t *testing.T) {
	st := engineState{running: 3, waiting: 2, kvUsage: 0.015625}
	for format, want := range map[string]string{
		"text": "TEXT named_metrics.num_requests_waiting=2.0, named_metrics.kv_cache_usage_perc=0.015625",
		"TEXT": "TEXT named_metrics.num_requests_waiting=2.0, named_metrics.kv_cache_usage_perc=0.015625",
		"Json": `JSON {"named_metrics": {"num_requests_waiting": 2.0, "kv_cache_usage_perc": 0.015625}}`,
	} {
		if got, ok := orcaHeader(format, st); !ok || got != want {
			t.Errorf("%s: %q %t, want %q", format, got, ok, want)
		}
	}
	if got, ok := orcaHeader("binary", st); ok {
		t.Errorf("binary: %q, want no header", got)
	}
}

func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.0", 3: "3.0", 0.42: "0.42", 1e-5: "1e-05", 0.0001: "0.0001", 1e16: "1e+16", 123456789: "123456789.0",
	} {
		if got := pyFloat(v); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", v, got, want)
		}
	}
}
