package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
)

// probeOnce sends one probe now and prints its breakdown: the first thing
// to run when a number on a dashboard looks wrong. Exit 0 on success.
func probeOnce(ctx context.Context, configFile, targetName, probeName string, logger *slog.Logger, stdout, stderr io.Writer) int {
	p, err := engine.Load(configFile, targetName, probeName, logger)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v\n", err)
		return 1
	}
	defer p.Close()
	res := p.Send(ctx).Result
	if err := probe.WriteReport(stdout, p.Target, p.Name, res); err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v\n", err)
		return 1
	}
	if res.Outcome != probe.OutcomeSuccess {
		return 1
	}
	return 0
}
