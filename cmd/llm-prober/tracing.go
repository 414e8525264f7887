package main

import (
	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/tracing"
)

// spanSink hands every result to the OTLP span exporter; the exporter's
// targets follow the configuration (SetTargets), not the probes.
type spanSink struct{ *tracing.Exporter }

func (spanSink) Add(engine.Info)       {}
func (spanSink) Remove(string, string) {}
