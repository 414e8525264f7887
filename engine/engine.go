package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
	"github.com/llm-prober/llm-prober/schedule"
)

// Info is what a sink learns about a probe when a configuration brings it.
type Info struct {
	Target, Probe, Model string
	Protocol, Endpoint   string
	// Assertions names the probe's checks on the answer, if any.
	Assertions []string
	// Histograms is the target's histogram form.
	Histograms string
	// Cancel is set for a cancellation probe (cancel:).
	Cancel bool
	// Sequence is true for session and shared_prefix probes, whose runs
	// are sequences of requests (SequenceSink); SequenceMode says which
	// ("session" or "shared_prefix").
	Sequence     bool
	SequenceMode string
}

// Sink receives the probes of every applied configuration and each result
// of theirs, besides the Prometheus metrics (the status page's history is
// one). Its methods are called from many goroutines at once.
type Sink interface {
	// Add announces a probe, once per configuration that has it.
	Add(Info)
	// Remove drops a probe that the new configuration no longer has.
	Remove(target, probe string)
	// Record takes one finished request.
	Record(target, probe string, req *probe.Request, res *probe.Result)
}

// Engine runs the probes of the current configuration on their schedules:
// one driver per target (its pooled connections shared by its probes), one
// schedule job per probe, each result into the Prometheus metrics and the
// sinks. Apply reconciles it with a new configuration.
type Engine struct {
	logger  *slog.Logger
	metrics *collector.ProbeMetrics
	sinks   []Sink
	runner  *schedule.Runner
	// running reads the servers of cancellation probes (cancel.go).
	running *collector.ServerMetrics

	// cancelled counts the results recorded as cancelled, for the one
	// line Stop logs about them.
	cancelled atomic.Int64

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

// New is an engine with nothing to run until Apply.
func New(logger *slog.Logger, metrics *collector.ProbeMetrics, sinks ...Sink) *Engine {
	return &Engine{
		logger:  logger,
		metrics: metrics,
		sinks:   sinks,
		runner:  schedule.NewRunner(logger, schedule.Options{}),
		running: collector.NewServerMetrics(logger),
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

// Apply is called with every loaded configuration (config.SafeConfig's
// OnChange). Unchanged targets keep their driver and its pooled
// connections; unchanged probes keep their timers; probes that are gone
// stop, and their series and history go with them.
func (e *Engine) Apply(cfg *config.Config) {
	e.mu.Lock()
	defer e.mu.Unlock()

	e.running.SetTargets(cancelServerTargets(cfg))
	newTargets := map[string]*targetState{}
	for _, t := range cfg.Targets {
		fp := targetFingerprint(t)
		if cur, ok := e.targets[t.Name]; ok && cur.fingerprint == fp {
			newTargets[t.Name] = cur
			continue
		}
		d, err := probe.NewDriver(t.Protocol, t.DriverOptions(), e.logger.With("target", t.Name))
		if err != nil {
			// Config validation accepts only protocols with drivers, so
			// this is a TLS file that vanished or similar.
			e.logger.Error("Cannot set up target; its probes will not run", "target", t.Name, "endpoint", t.Endpoint(), "err", err)
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
			model := pc.ModelFor(t) // a discovered probe's own model
			spec := pc.Schedule.Spec()
			planned, ok := spec.PlannedInterval()
			if !ok {
				planned = 0 // no steady gap: not exported
			}
			e.metrics.Add(collector.ProbeSeries{Target: t.Name, Probe: pc.Name, Model: model, SLO: pc.CollectorSLO(), Protocol: t.Protocol, Histograms: t.Histograms,
				Asserts: len(pc.Assertions()) > 0, PlannedInterval: planned, Disabled: pc.DisabledMetrics()})
			info := Info{Target: t.Name, Probe: pc.Name, Model: model, Protocol: t.Protocol, Endpoint: t.Endpoint(),
				Assertions: pc.Assertions().Names(), Histograms: t.Histograms, Cancel: pc.Cancel != nil, Sequence: pc.Sequence(), SequenceMode: pc.SequenceMode()}
			for _, s := range e.sinks {
				s.Add(info)
			}
			newSeries[[2]string{t.Name, pc.Name}] = true
			p := newProbe(t, pc, w, ts.driver, e.running)
			jobs = append(jobs, e.job(p, spec, ts.fingerprint+fingerprint(pc, w), ts.limiter))
		}
	}
	e.runner.Apply(jobs)

	for key := range e.series {
		if !newSeries[key] {
			e.metrics.Remove(key[0], key[1])
			for _, s := range e.sinks {
				s.Remove(key[0], key[1])
			}
		}
	}
	e.series = newSeries
	for name, old := range e.targets {
		if cur, ok := newTargets[name]; !ok || cur != old {
			// In-flight probes of a removed job still hold the old driver;
			// Close only drops idle connections, so they finish normally.
			old.driver.Close()
		}
	}
	e.targets = newTargets
}

// BurstLead is how long before a burst's planned time its requests are
// prepared (built, connections made) to be released together at that
// time (schedule.Job.BurstLead). It bounds the connection setup a burst
// can do ahead: 64 TLS handshakes over a 50 ms path take about that long;
// requests not ready by then are written as soon as they are, which shows
// in the burst spread and the schedule lag. It is also how long a pooled
// connection is held unused before its request is written, well inside
// common keep-alive timeouts (5 s and more).
const BurstLead = 250 * time.Millisecond

// job is p on its schedule: each ticket sends one request and accounts
// for it. A burst's runs start BurstLead ahead, scheduled and in flight
// from then, and wait for the release inside SendAt.
func (e *Engine) job(p *Probe, spec schedule.Spec, fp string, limiter *schedule.Limiter) schedule.Job {
	logger := e.logger.With("target", p.Target, "probe", p.Name)
	health := &transitions{ok: true}
	lengths := &lengthCheck{metrics: e.metrics, target: p.Target, probe: p.Name, logger: logger}
	return schedule.Job{
		Key:         p.Target + "/" + p.Name,
		Fingerprint: fp,
		Spec:        spec,
		Limiter:     limiter,
		Skipped: func(reason string) {
			e.metrics.Scheduled(p.Target, p.Name)
			e.metrics.Skipped(p.Target, p.Name, reason)
		},
		BurstSpread: func(d time.Duration) { e.metrics.ObserveBurstSpread(p.Target, p.Name, d) },
		BurstLead:   BurstLead,
		Run: func(ctx context.Context, tk schedule.Ticket) bool {
			if p.Sequence() {
				return e.runSequence(ctx, tk, p, lengths, health, logger)
			}
			// Counted before anything can fail, and out of flight only once
			// the result is recorded: scheduled = requests + skipped + in
			// flight holds at every scrape after the last Run returned.
			e.metrics.Scheduled(p.Target, p.Name)
			e.metrics.InFlight(p.Target, p.Name, 1)
			defer e.metrics.InFlight(p.Target, p.Name, -1)
			sent := p.SendAt(ctx, tk.Release(), tk.Planned)
			res := sent.Result
			tk.Sent(res.Start)
			e.metrics.ObserveScheduleLag(p.Target, p.Name, max(res.Start.Sub(tk.Planned), 0))
			return e.record(p, sent, lengths, health, logger)
		},
	}
}

// record accounts for one finished request of p: metrics, sinks, length
// checks and the log of transitions. It reports whether it succeeded.
func (e *Engine) record(p *Probe, sent Sent, lengths *lengthCheck, health *transitions, logger *slog.Logger) bool {
	res := sent.Result
	e.metrics.Observe(p.Target, p.Name, res)
	for _, s := range e.sinks {
		s.Record(p.Target, p.Name, sent.Request(), res)
	}
	ok := res.Outcome == probe.OutcomeSuccess
	if ok {
		lengths.check(sent)
	}
	if res.Outcome == probe.OutcomeCancelled {
		e.cancelled.Add(1)
	}
	logCancel(logger, res)
	probe.LogDetails(logger, res)
	health.log(logger, p, res)
	return ok
}

// transitions logs a probe's changes between failing and succeeding, not
// every failure: a probe failing every 15 s for a day would otherwise bury
// everything else.
type transitions struct {
	mu sync.Mutex
	ok bool
}

func (t *transitions) log(logger *slog.Logger, p *Probe, res *probe.Result) {
	if res.Outcome == probe.OutcomeCancelled {
		// The prober's doing, not the server's: no transition. Stop
		// logs them all in one line.
		logger.Debug("Probe done", "outcome", res.Outcome, "request_id", res.RequestID, "e2e", res.EndToEnd, "err", res.Err)
		return
	}
	ok := res.Outcome == probe.OutcomeSuccess
	t.mu.Lock()
	changed := ok != t.ok
	t.ok = ok
	t.mu.Unlock()
	switch {
	case !ok && changed:
		logger.Warn("Probe failing", "outcome", res.Outcome, "request_id", res.RequestID, "endpoint", p.Endpoint, "err", res.Err)
	case ok && changed:
		logger.Info("Probe succeeding again", "request_id", res.RequestID)
	default:
		logger.Debug("Probe done", "outcome", res.Outcome, "request_id", res.RequestID, "ttft", res.TTFT, "e2e", res.EndToEnd, "output_tokens", res.OutputTokens, "err", res.Err)
	}
}

// Stop drains in-flight probes until ctx ends, then cancels those still
// going and waits for them to be recorded (outcome cancelled), then
// closes connections. The cancelled probes are logged in one line.
func (e *Engine) Stop(ctx context.Context) {
	before := e.cancelled.Load()
	if runs := e.runner.Stop(ctx); runs > 0 {
		e.logger.Warn("Cancelled in-flight probes: the shutdown's drain time passed; recorded with outcome cancelled",
			"runs", runs, "results", e.cancelled.Load()-before)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ts := range e.targets {
		ts.driver.Close()
	}
	e.running.Close()
}
