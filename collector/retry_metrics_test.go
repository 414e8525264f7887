package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llm-prober/llm-prober/probe"
)

func TestConnectionRetriesCounted(t *testing.T) {
	if numRetryReasons != len(probe.RetryReasons()) {
		t.Fatalf("numRetryReasons %d, probe has %d reasons", numRetryReasons, len(probe.RetryReasons()))
	}
	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	if n, err := testutil.GatherAndCount(reg, "llm_probe_connection_retries_total"); err != nil || n != 0 {
		t.Fatalf("%d retry series before any retry (err %v), want none", n, err)
	}
	for _, reason := range []string{probe.RetryReset, probe.RetryReset, probe.RetryEOF, "made-up"} {
		pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess, Retry: &probe.Retry{Reason: reason}})
	}
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess})
	want := `
# HELP llm_probe_connection_retries_total Requests sent a second time, on a new connection, because the pooled connection they were first written to failed before the answer's first byte (the server had closed it), by how the first attempt failed. The retry's timings are the ones measured.
# TYPE llm_probe_connection_retries_total counter
llm_probe_connection_retries_total{model="m",probe="p",reason="eof",target="t"} 1
llm_probe_connection_retries_total{model="m",probe="p",reason="other",target="t"} 1
llm_probe_connection_retries_total{model="m",probe="p",reason="reset",target="t"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_probe_connection_retries_total"); err != nil {
		t.Error(err)
	}
	pm.Remove("t", "p")
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_connection_retries_total"); n != 0 {
		t.Errorf("%d retry series after the probe was removed", n)
	}
}

func TestTLSCertExpiryGauge(t *testing.T) {
	pm := NewProbeMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pm)
	pm.Add(ProbeSeries{Target: "t", Probe: "p", Model: "m"})
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeSuccess})
	if n, _ := testutil.GatherAndCount(reg, "llm_probe_tls_cert_expiry_timestamp_seconds"); n != 0 {
		t.Fatalf("%d expiry series before any TLS probe, want none", n)
	}
	expiry := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	pm.Observe("t", "p", &probe.Result{Outcome: probe.OutcomeHTTP5xx, TLSCertExpiry: expiry})
	want := `
# HELP llm_probe_tls_cert_expiry_timestamp_seconds Unix time of the earliest expiry among the certificates the server presented on the connection of the probe's latest request over TLS.
# TYPE llm_probe_tls_cert_expiry_timestamp_seconds gauge
llm_probe_tls_cert_expiry_timestamp_seconds{model="m",probe="p",target="t"} 1.798859045e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_probe_tls_cert_expiry_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}
