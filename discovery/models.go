// Package discovery turns what servers say they serve into probes: a
// target with discover_models gets its probe templates applied to every
// model its server lists, and the configuration, expanded with the
// current lists, goes to the engine exactly as a reload does. It sits
// between config.SafeConfig's OnChange and engine.Engine.Apply.
package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// Models keeps the model list of every discovering target fresh and
// applies the configuration expanded with them. Every list is refreshed
// by a goroutine of its own; a refresh that fails keeps the last good
// list. Models is a prometheus.Collector of its own state.
type Models struct {
	logger *slog.Logger
	apply  func(*config.Config)
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	// expanded is the configuration last applied, discovered probes
	// included, for pages that show the running probes.
	expanded atomic.Pointer[config.Config]

	mu    sync.Mutex
	cfg   *config.Config
	loops map[string]*loop
	d     descs
}

// loop is one target's list and its refresher. Fields below cancel are
// guarded by Models.mu.
type loop struct {
	target      string
	fingerprint string
	cancel      context.CancelFunc

	// models is the list in use: filtered, limited, sorted; nil until
	// the first good list.
	models   []string
	leftOut  int
	failing  bool
	failures float64
	lastOK   time.Time
}

// New is a Models that hands every expanded configuration to apply
// (engine.Engine.Apply). Call Stop when done.
func New(logger *slog.Logger, apply func(*config.Config)) *Models {
	ctx, cancel := context.WithCancel(context.Background())
	return &Models{logger: logger, apply: apply, base: ctx, stop: cancel, loops: map[string]*loop{}, d: newDescs()}
}

// Apply takes a loaded configuration (config.SafeConfig's OnChange):
// targets whose discovery settings are unchanged keep their list, new
// ones start fetching theirs at once (and have no probes until the first
// list arrives), removed ones stop; then the expanded configuration is
// applied.
func (m *Models) Apply(cfg *config.Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	seen := map[string]bool{}
	for _, t := range cfg.Targets {
		if t == nil || t.DiscoverModels == nil {
			continue
		}
		seen[t.Name] = true
		fp := discoveryFingerprint(t)
		if cur, ok := m.loops[t.Name]; ok {
			if cur.fingerprint == fp {
				continue
			}
			cur.cancel()
		}
		ctx, cancel := context.WithCancel(m.base)
		l := &loop{target: t.Name, fingerprint: fp, cancel: cancel}
		m.loops[t.Name] = l
		m.wg.Add(1)
		go m.run(ctx, l, t)
	}
	for name, l := range m.loops {
		if !seen[name] {
			l.cancel()
			delete(m.loops, name)
		}
	}
	m.applyLocked()
}

// applyLocked hands the configuration with the current lists to apply.
// Holding m.mu keeps the applied states in the order they were decided.
func (m *Models) applyLocked() {
	if m.cfg == nil {
		return
	}
	cfg := m.cfg.WithModels(func(target string) []string {
		if l, ok := m.loops[target]; ok {
			return l.models
		}
		return nil
	})
	m.expanded.Store(cfg)
	m.apply(cfg)
}

// Config is the configuration last applied, with every discovered probe
// (nil before the first Apply): what the engine runs.
func (m *Models) Config() *config.Config { return m.expanded.Load() }

// Stop ends every refresh and waits for them.
func (m *Models) Stop() {
	m.stop()
	m.wg.Wait()
}

// discoveryFingerprint changes when anything that shapes the list does:
// the discovery settings, the protocol (its default API) and the client.
func discoveryFingerprint(t *config.Target) string {
	b, err := json.Marshal(struct {
		D        *config.DiscoverModels
		API      string
		Protocol string
		Opts     probe.TargetOptions
		// Inline secrets marshal as <secret>; their digest changes.
		Secrets string
	}{t.DiscoverModels, t.EffectiveAPI(), t.Protocol, t.ModelListOptions(), t.SecretsDigest})
	if err != nil {
		return err.Error()
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (m *Models) run(ctx context.Context, l *loop, t *config.Target) {
	defer m.wg.Done()
	dm := t.DiscoverModels
	logger := m.logger.With("target", t.Name)
	lister, err := probe.NewModelLister(t.EffectiveAPI(), t.ModelListOptions(), logger)
	if err != nil {
		// Config validation accepts only usable URLs and APIs, so this is
		// a TLS file that vanished or similar.
		logger.Error("Cannot list the target's models; it has no probes", "err", err)
		m.mu.Lock()
		l.failing, l.failures = true, l.failures+1
		m.mu.Unlock()
		return
	}
	defer lister.Close()
	filter := dm.FilterRegexp()
	tick := time.NewTicker(time.Duration(dm.RefreshInterval))
	defer tick.Stop()
	for {
		m.refresh(ctx, l, lister, filter, dm, logger)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refresh fetches the list once and applies it if it changed.
func (m *Models) refresh(ctx context.Context, l *loop, lister *probe.ModelLister, filter *regexp.Regexp,
	dm *config.DiscoverModels, logger *slog.Logger) {
	fctx, cancel := context.WithTimeout(ctx, time.Duration(dm.Timeout))
	names, err := lister.List(fctx)
	cancel()
	if ctx.Err() != nil {
		return // stopped or replaced: not a failure of the server
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loops[l.target] != l {
		return
	}
	if err != nil {
		l.failures++
		if !l.failing {
			logger.Warn("Cannot refresh the model list; keeping the last good list",
				"url", redact.Default().URL(lister.URL()), "models_kept", len(l.models), "err", redact.Default().Error(err))
		} else {
			logger.Debug("Model list still failing", "url", redact.Default().URL(lister.URL()), "err", redact.Default().Error(err))
		}
		l.failing = true
		return
	}
	if l.failing {
		logger.Info("Model list refreshed again", "url", redact.Default().URL(lister.URL()), "models", len(names))
	}
	l.failing, l.lastOK = false, time.Now()
	var kept []string
	for _, n := range names {
		if filter == nil || filter.MatchString(n) {
			kept = append(kept, n)
		}
	}
	leftOut := 0
	if len(kept) > dm.MaxModels {
		leftOut = len(kept) - dm.MaxModels
		if leftOut != l.leftOut {
			logger.Warn("The server lists more models than discover_models.max_models; probing the first ones in its order",
				"max_models", dm.MaxModels, "matching", len(kept), "left_out", kept[dm.MaxModels:min(len(kept), dm.MaxModels+10)])
		}
		kept = kept[:dm.MaxModels]
	}
	l.leftOut = leftOut
	slices.Sort(kept)
	if kept == nil {
		kept = []string{} // a good list that the filter emptied
	}
	if l.models != nil && slices.Equal(kept, l.models) {
		return
	}
	added, removed := diff(l.models, kept)
	logger.Info("Discovered models changed", "models", len(kept), "added", added, "removed", removed)
	l.models = kept
	m.applyLocked()
}

// diff lists what b has that a lacks, and the reverse.
func diff(a, b []string) (added, removed []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	return added, removed
}

type descs struct {
	count, info, leftOut, failures, lastOK, stale *prometheus.Desc
}

func newDescs() descs {
	t := []string{"target"}
	return descs{
		count: prometheus.NewDesc("llm_prober_discovered_models",
			"Models of the target being probed after discover_models' filter and max_models.", t, nil),
		info: prometheus.NewDesc("llm_prober_discovered_model_info",
			"1 for every model of the target being probed through model discovery.", []string{"target", "model"}, nil),
		leftOut: prometheus.NewDesc("llm_prober_model_discovery_left_out",
			"Models the server lists that match the filter but exceed discover_models.max_models, so are not probed.", t, nil),
		failures: prometheus.NewDesc("llm_prober_model_discovery_failures_total",
			"Model-list refreshes that failed (no answer, an error status, garbage, or no model).", t, nil),
		lastOK: prometheus.NewDesc("llm_prober_model_discovery_last_success_timestamp_seconds",
			"Unix time of the target's last good model list.", t, nil),
		stale: prometheus.NewDesc("llm_prober_model_discovery_stale",
			"1 while the target's last model-list refresh failed and the last good list (if any) is still probed.", t, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Models) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.d.count, m.d.info, m.d.leftOut, m.d.failures, m.d.lastOK, m.d.stale} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Models) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	var out []prometheus.Metric
	for name, l := range m.loops {
		g := func(d *prometheus.Desc, v float64, labels ...string) {
			out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...))
		}
		g(m.d.count, float64(len(l.models)))
		for _, model := range l.models {
			g(m.d.info, 1, model)
		}
		g(m.d.leftOut, float64(l.leftOut))
		out = append(out, prometheus.MustNewConstMetric(m.d.failures, prometheus.CounterValue, l.failures, name))
		if !l.lastOK.IsZero() {
			g(m.d.lastOK, float64(l.lastOK.UnixNano())/1e9)
		}
		stale := 0.0
		if l.failing {
			stale = 1
		}
		g(m.d.stale, stale)
	}
	m.mu.Unlock()
	for _, metric := range out {
		ch <- metric
	}
}
