package config

import (
	"strings"

	promconfig "github.com/prometheus/common/config"

	"github.com/llm-prober/llm-prober/tracing"
)

// OTLPTraces exports the target's probes as OpenTelemetry client spans
// (docs/configuration.md#otlp_traces); off unless set.
type OTLPTraces struct {
	// Endpoint is the OTLP/HTTP base URL; spans go to {endpoint}/v1/traces.
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with each export, printed as <secret>.
	Headers map[string]promconfig.Secret `yaml:"headers,omitempty"`
}

// validateOTLP checks a target's otlp_traces at path.
func (o *OTLPTraces) validate(d *decoder, path string) {
	if o == nil {
		return
	}
	validateHTTPURL(d, path+".endpoint", o.Endpoint)
	if strings.HasSuffix(strings.TrimRight(o.Endpoint, "/"), "/v1/traces") {
		d.at(path+".endpoint", "give the collector's base URL (e.g. http://otel-collector:4318); /v1/traces is added")
	}
	for name := range o.Headers {
		if !headerRE.MatchString(name) {
			d.at(join(path+".headers", name), "invalid HTTP header name %q", name)
		}
	}
}

// TracingTargets are the targets that export their probes' spans, for
// tracing.Exporter.SetTargets.
func (c *Config) TracingTargets() []tracing.Target {
	var ts []tracing.Target
	for _, t := range c.Targets {
		if t == nil || t.OTLPTraces == nil {
			continue
		}
		h := make(map[string]string, len(t.OTLPTraces.Headers))
		for k, v := range t.OTLPTraces.Headers {
			h[k] = string(v)
		}
		ts = append(ts, tracing.Target{Name: t.Name, Endpoint: strings.TrimRight(t.OTLPTraces.Endpoint, "/"), Headers: h})
	}
	return ts
}
