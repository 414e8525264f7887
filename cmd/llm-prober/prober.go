package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
	"github.com/llm-prober/llm-prober/workload"
)

// prober turns each loaded config into running schedules: one driver per
// target, one job per probe, results into the probe metrics.
type prober struct {
	logger  *slog.Logger
	metrics *collector.ProbeMetrics
	runner  *schedule.Runner

	mu      sync.Mutex
	targets map[string]*targetState
	series  map[[2]string]bool
}

type targetState struct {
	fingerprint string
	driver      probe.Driver
}

func newProber(logger *slog.Logger, metrics *collector.ProbeMetrics) *prober {
	return &prober{
		logger:  logger,
		metrics: metrics,
		runner:  schedule.NewRunner(logger, schedule.Options{}),
		targets: map[string]*targetState{},
		series:  map[[2]string]bool{},
	}
}

// driverOptions maps a configured target to what a driver needs.
func driverOptions(t *config.Target) probe.TargetOptions {
	return probe.TargetOptions{
		Name:                  t.Name,
		URL:                   t.URL,
		Model:                 t.Model,
		Headers:               t.Headers,
		BearerToken:           string(t.APIKey),
		TLS:                   t.TLSConfig,
		NewConnectionPerProbe: t.NewConnectionPerProbe,
		StreamIdleTimeout:     time.Duration(t.StreamIdleTimeout),
		MaxResponseBytes:      t.MaxResponseBytes,
	}
}

// fingerprint identifies everything that shapes a target's or probe's
// behaviour, the API key included (hashed), so that a reload restarts
// exactly what changed.
func fingerprint(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			b = fmt.Appendf(nil, "%v", err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func targetFingerprint(t *config.Target) string {
	shallow := *t
	shallow.Probes = nil
	key := sha256.Sum256([]byte(t.APIKey))
	return fingerprint(shallow, key)
}

// apply is called with every loaded config. Unchanged targets keep their
// driver (and its pooled connections); unchanged probes keep their timers.
func (p *prober) apply(cfg *config.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()

	newTargets := map[string]*targetState{}
	for _, t := range cfg.Targets {
		fp := targetFingerprint(t)
		if cur, ok := p.targets[t.Name]; ok && cur.fingerprint == fp {
			newTargets[t.Name] = cur
			continue
		}
		d, err := probe.NewDriver(t.Protocol, driverOptions(t), p.logger.With("target", t.Name))
		if err != nil {
			// Config validation accepts only protocols with drivers, so
			// this is a TLS file that vanished or similar.
			p.logger.Error("Cannot set up target; its probes will not run", "target", t.Name, "url", t.URL, "err", err)
			continue
		}
		newTargets[t.Name] = &targetState{fingerprint: fp, driver: d}
	}

	var jobs []schedule.Job
	newSeries := map[[2]string]bool{}
	for _, t := range cfg.Targets {
		ts, ok := newTargets[t.Name]
		if !ok {
			continue
		}
		for _, pc := range t.Probes {
			w := cfg.Workloads[pc.Workload]
			p.metrics.Add(collector.ProbeSeries{Target: t.Name, Probe: pc.Name, Model: t.Model, SLO: sloOf(pc)})
			newSeries[[2]string{t.Name, pc.Name}] = true
			jobs = append(jobs, p.job(t, pc, w, ts))
		}
	}
	p.runner.Apply(jobs)

	for key := range p.series {
		if !newSeries[key] {
			p.metrics.Remove(key[0], key[1])
		}
	}
	p.series = newSeries
	for name, old := range p.targets {
		if cur, ok := newTargets[name]; !ok || cur != old {
			// In-flight probes of a removed job still hold the old driver;
			// Close only drops idle connections, so they finish normally.
			old.driver.Close()
		}
	}
	p.targets = newTargets
}

func sloOf(pc *config.Probe) collector.SLO {
	if pc.SLO == nil {
		return collector.SLO{}
	}
	return collector.SLO{TTFT: time.Duration(pc.SLO.TTFT), TPOT: time.Duration(pc.SLO.TPOT), Objective: pc.SLO.Objective}
}

func (p *prober) job(t *config.Target, pc *config.Probe, w *config.Workload, ts *targetState) schedule.Job {
	gen := workload.New(w)
	logger := p.logger.With("target", t.Name, "probe", pc.Name)
	timeout := time.Duration(pc.Timeout)
	stream := pc.Streaming()
	var lastOK sync.Mutex
	wasOK := true
	return schedule.Job{
		Key:         t.Name + "/" + pc.Name,
		Fingerprint: ts.fingerprint + fingerprint(pc, w),
		Spec: schedule.Spec{
			Every:       time.Duration(pc.Schedule.Every),
			Jitter:      time.Duration(pc.Schedule.Jitter),
			MaxInFlight: 1,
		},
		Skipped: func(reason string) { p.metrics.Skipped(t.Name, pc.Name, reason) },
		Run: func(ctx context.Context, tk schedule.Ticket) bool {
			req := gen.Next(t.Model)
			req.Stream = stream
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res := ts.driver.Probe(ctx, req)
			p.metrics.ObserveScheduleLag(t.Name, pc.Name, max(res.Start.Sub(tk.Planned), 0))
			p.metrics.Observe(t.Name, pc.Name, res)
			ok := res.Outcome == probe.OutcomeSuccess
			// Log transitions, not every failure: a probe failing every
			// 15 s for a day would otherwise bury everything else.
			lastOK.Lock()
			changed := ok != wasOK
			wasOK = ok
			lastOK.Unlock()
			switch {
			case !ok && changed:
				logger.Warn("Probe failing", "outcome", res.Outcome, "request_id", res.RequestID, "url", t.URL, "err", res.Err)
			case ok && changed:
				logger.Info("Probe succeeding again", "request_id", res.RequestID)
			default:
				logger.Debug("Probe done", "outcome", res.Outcome, "request_id", res.RequestID, "ttft", res.TTFT, "e2e", res.EndToEnd, "output_tokens", res.OutputTokens, "err", res.Err)
			}
			return ok
		},
	}
}

// stop drains in-flight probes until ctx ends, then closes connections.
func (p *prober) stop(ctx context.Context) {
	p.runner.Stop(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ts := range p.targets {
		ts.driver.Close()
	}
}
