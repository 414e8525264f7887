package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
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
	// history keeps recent results for the status page; nil keeps none.
	history *collector.History
	runner  *schedule.Runner

	mu      sync.Mutex
	targets map[string]*targetState
	series  map[[2]string]bool
}

type targetState struct {
	fingerprint string
	driver      probe.Driver
	// limiter bounds the target's requests in flight across its probes.
	limiter *schedule.Limiter
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
		d, err := probe.NewDriver(t.Protocol, t.DriverOptions(), p.logger.With("target", t.Name))
		if err != nil {
			// Config validation accepts only protocols with drivers, so
			// this is a TLS file that vanished or similar.
			p.logger.Error("Cannot set up target; its probes will not run", "target", t.Name, "endpoint", t.Endpoint(), "err", err)
			continue
		}
		newTargets[t.Name] = &targetState{fingerprint: fp, driver: d, limiter: schedule.NewLimiter(t.MaxInFlight)}
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
			p.history.Add(collector.HistoryProbe{Target: t.Name, Probe: pc.Name, Protocol: t.Protocol, Endpoint: collector.DisplayEndpoint(t.Endpoint())})
			newSeries[[2]string{t.Name, pc.Name}] = true
			jobs = append(jobs, p.job(t, pc, w, ts))
		}
	}
	p.runner.Apply(jobs)

	for key := range p.series {
		if !newSeries[key] {
			p.metrics.Remove(key[0], key[1])
			p.history.Remove(key[0], key[1])
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
	// Length mismatches are logged once per probe (they repeat with every
	// request when the server cannot force lengths) and counted always.
	var warnedOutput, warnedInput sync.Once
	return schedule.Job{
		Key:         t.Name + "/" + pc.Name,
		Fingerprint: ts.fingerprint + fingerprint(pc, w),
		Spec:        pc.Schedule.Spec(),
		Limiter:     ts.limiter,
		Skipped: func(reason string) {
			p.metrics.Scheduled(t.Name, pc.Name)
			p.metrics.Skipped(t.Name, pc.Name, reason)
		},
		BurstSpread: func(d time.Duration) { p.metrics.ObserveBurstSpread(t.Name, pc.Name, d) },
		Run: func(ctx context.Context, tk schedule.Ticket) bool {
			// Counted before anything can fail, and out of flight only once
			// the result is recorded: scheduled = requests + skipped + in
			// flight holds at every scrape after the last Run returned.
			p.metrics.Scheduled(t.Name, pc.Name)
			p.metrics.InFlight(t.Name, pc.Name, 1)
			defer p.metrics.InFlight(t.Name, pc.Name, -1)
			draw := gen.Draw(t.Model)
			req := draw.Request
			req.Stream = stream
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res := ts.driver.Probe(ctx, req)
			tk.Sent(res.Start)
			p.metrics.ObserveScheduleLag(t.Name, pc.Name, max(res.Start.Sub(tk.Planned), 0))
			p.metrics.Observe(t.Name, pc.Name, res)
			p.history.Record(t.Name, pc.Name, req, res)
			ok := res.Outcome == probe.OutcomeSuccess
			if ok {
				p.checkLengths(t.Name, pc.Name, logger, draw, res, &warnedOutput, &warnedInput)
			}
			// Log transitions, not every failure: a probe failing every
			// 15 s for a day would otherwise bury everything else.
			lastOK.Lock()
			changed := ok != wasOK
			wasOK = ok
			lastOK.Unlock()
			switch {
			case !ok && changed:
				logger.Warn("Probe failing", "outcome", res.Outcome, "request_id", res.RequestID, "endpoint", t.Endpoint(), "err", res.Err)
			case ok && changed:
				logger.Info("Probe succeeding again", "request_id", res.RequestID)
			default:
				logger.Debug("Probe done", "outcome", res.Outcome, "request_id", res.RequestID, "ttft", res.TTFT, "e2e", res.EndToEnd, "output_tokens", res.OutputTokens, "err", res.Err)
			}
			return ok
		},
	}
}

// Length tolerances: beyond them a probe does not measure the shape it was
// configured for. Prompts get extra room for the chat template the server
// wraps around them (role headers, a default system prompt), which the
// prober cannot know.
const (
	lengthTolerance       = 0.10
	chatTemplateAllowance = 32
)

// checkLengths compares what a successful request got with what it asked
// for: output tokens against max_tokens, and for synthetic prompts the
// server's prompt token count against the target length.
func (p *prober) checkLengths(target, probeName string, logger *slog.Logger, draw workload.Draw, res *probe.Result, warnedOutput, warnedInput *sync.Once) {
	want := draw.Request.MaxTokens
	if got := res.OutputTokens; math.Abs(float64(got-want)) > lengthTolerance*float64(want) {
		p.metrics.OutputLengthMismatch(target, probeName)
		warnedOutput.Do(func() {
			logger.Warn("Output length differs from max_tokens by more than 10%; latency per request is not comparable across requests. Set ignore_eos: true (vLLM, SGLang) or min_tokens where the server supports them",
				"max_tokens", want, "output_tokens", got, "output_tokens_source", res.OutputTokensSource, "finish_reason", res.FinishReason, "request_id", res.RequestID)
		})
	}
	if want := draw.InputTokens; want > 0 && res.InputTokensSource == probe.TokenSourceServer {
		if got := res.InputTokens; math.Abs(float64(got-want)) > lengthTolerance*float64(want)+chatTemplateAllowance {
			p.metrics.InputLengthMismatch(target, probeName)
			warnedInput.Do(func() {
				logger.Warn("Server counts a different prompt length than the synthetic target (more than 10% off, beyond chat-template overhead); this tokenizer does not map common English words to one token each",
					"target_input_tokens", want, "prompt_tokens", got, "request_id", res.RequestID)
			})
		}
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
