package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/workload"
)

// probeOnce sends one probe now and prints its breakdown: the first thing
// to run when a number on a dashboard looks wrong. Exit 0 on success.
func probeOnce(ctx context.Context, configFile, targetName, probeName string, logger *slog.Logger, stdout, stderr io.Writer) int {
	cfg, target, pc, err := loadProbe(configFile, targetName, probeName)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v\n", err)
		return 1
	}
	d, err := probe.NewDriver(target.Protocol, target.DriverOptions(), logger)
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: target %s (%s): %v\n", target.Name, target.Endpoint(), err)
		return 1
	}
	defer d.Close()
	req := workload.New(cfg.Workloads[pc.Workload]).Next(target.Model)
	req.Stream = pc.Streaming()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(pc.Timeout))
	defer cancel()
	res := d.Probe(ctx, req)
	if err := probe.WriteReport(stdout, target.Name, pc.Name, res); err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v\n", err)
		return 1
	}
	if res.Outcome != probe.OutcomeSuccess {
		return 1
	}
	return 0
}

// loadProbe loads configFile and finds the named target and probe (the
// target's first when probeName is empty): the one-shot commands, probe
// and bench, address what they send the same way.
func loadProbe(configFile, targetName, probeName string) (*config.Config, *config.Target, *config.Probe, error) {
	cfg, err := config.Load(configFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	var target *config.Target
	for _, t := range cfg.Targets {
		if t.Name == targetName {
			target = t
		}
	}
	if target == nil {
		return nil, nil, nil, fmt.Errorf("no target %q in %s", targetName, configFile)
	}
	pc := target.Probes[0]
	if probeName != "" {
		pc = nil
		for _, p := range target.Probes {
			if p.Name == probeName {
				pc = p
			}
		}
		if pc == nil {
			return nil, nil, nil, fmt.Errorf("target %q has no probe %q", targetName, probeName)
		}
	}
	return cfg, target, pc, nil
}
