package collector

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// The TLS certificate expiry of an https (or gRPC TLS) target, as
// blackbox_exporter's probe_ssl_earliest_cert_expiry: exported once a
// probe has gone over TLS, so plain-HTTP targets have no such series.

func newTLSExpiryDesc(base []string) *prometheus.Desc {
	return prometheus.NewDesc("llm_probe_tls_cert_expiry_timestamp_seconds",
		"Unix time of the earliest expiry among the certificates the server presented on the connection of the probe's latest request over TLS.",
		base, nil)
}

type tlsSeries struct {
	expiry *gauge
	seen   atomic.Bool
}

func (ts *tlsSeries) init(s *series) {
	ts.expiry = newGauge(s.d.tlsExpiry, s.labels)
}

func (ts *tlsSeries) observe(r *probe.Result) {
	if r.TLSCertExpiry.IsZero() {
		return
	}
	ts.expiry.Set(float64(r.TLSCertExpiry.UnixNano()) / 1e9)
	ts.seen.Store(true)
}

func (ts *tlsSeries) collect(ch chan<- prometheus.Metric) {
	if ts.seen.Load() {
		ch <- ts.expiry
	}
}
