package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/alertmodel"
	"github.com/llm-prober/llm-prober/internal/redact"
)

// checkConfig validates each file and prints every problem found, so a CI
// job can gate config changes on its exit code. For a valid file it also
// prints what the shipped alert rules can do for each probe, and warns
// (on stderr, without changing the exit code) for each probe whose rate
// and SLO cannot alert as fast as the rules aim to.
func checkConfig(files []string, print bool, stdout, stderr io.Writer) int {
	code := 0
	for _, f := range files {
		cfg, err := config.Load(f)
		if err != nil {
			// Messages quote values from the file; one that escaped
			// the validators' own redaction must not print a secret.
			fmt.Fprintf(stderr, "%s: FAILED\n%v\n", f, redact.Default().Error(err))
			code = 1
			continue
		}
		if print {
			b, err := cfg.Marshal()
			if err != nil {
				fmt.Fprintf(stderr, "%s: cannot print: %v\n", f, err)
				code = 1
				continue
			}
			fmt.Fprintf(stdout, "# %s (effective configuration)\n%s", f, b)
			continue
		}
		fmt.Fprintf(stdout, "%s: OK, %d targets, %d probes\n", f, len(cfg.Targets), cfg.ProbeCount())
		if w := cfg.HistogramMixWarning(); w != "" {
			fmt.Fprintf(stderr, "%s: WARNING: %s\n", f, w)
		}
		printAlerting(f, cfg, stdout, stderr)
	}
	return code
}

// printAlerting prints an alerting line per probe, of the configured
// targets and of the modules target discovery runs on every target it
// finds, and a WARNING on stderr for every target of the alerts a probe
// misses.
func printAlerting(file string, cfg *config.Config, stdout, stderr io.Writer) {
	rules := alertmodel.DefaultRules()
	header := false
	line := func(who string, pc *config.Probe) {
		if !header {
			fmt.Fprintf(stdout, "  alerting, %s:\n", rules.Assumptions())
			header = true
		}
		v := pc.AlertVerdict()
		fmt.Fprintf(stdout, "  %s %s: %s\n", who, pc.Schedule.Summary(), v.Summary())
		for _, w := range v.Warnings {
			fmt.Fprintf(stderr, "%s: WARNING: %s %s: %s\n", file, who, pc.Schedule.Summary(), w)
		}
	}
	for _, t := range cfg.Targets {
		for _, pc := range t.Probes {
			line("probe "+t.Name+"/"+pc.Name, pc)
		}
	}
	var modules []string
	for _, td := range cfg.TargetDiscovery {
		if td != nil && cfg.Modules[td.Module] != nil && !slices.Contains(modules, td.Module) {
			modules = append(modules, td.Module)
		}
	}
	slices.Sort(modules)
	for _, name := range modules {
		for _, pc := range cfg.Modules[name].Probes {
			line("module "+name+" probe "+pc.Name+" (each discovered target)", pc)
		}
	}
}
