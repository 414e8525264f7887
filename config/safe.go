package config

import (
	"log/slog"
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// SafeConfig holds the running configuration and swaps it atomically on
// reload. A reload that fails leaves the running configuration in place.
type SafeConfig struct {
	path   string
	logger *slog.Logger

	mu  sync.RWMutex
	cur *Config
	// reloadMu serialises reloads so two SIGHUPs cannot interleave their
	// load and notify steps.
	reloadMu  sync.Mutex
	listeners []func(*Config)
	checks    []func(*Config) error

	reloadSuccess   prometheus.Gauge
	reloadTimestamp prometheus.Gauge
}

// NewSafeConfig returns an empty holder for the file at path. Its reload
// metrics are registered on reg.
func NewSafeConfig(path string, logger *slog.Logger, reg prometheus.Registerer) *SafeConfig {
	sc := &SafeConfig{
		path:   path,
		logger: logger,
		reloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_prober_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful (1) or not (0).",
		}),
		reloadTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_prober_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration reload.",
		}),
	}
	if reg != nil {
		reg.MustRegister(sc.reloadSuccess, sc.reloadTimestamp)
	}
	return sc
}

// Path is the config file this holder loads.
func (sc *SafeConfig) Path() string { return sc.path }

// Get returns the running config, nil before the first successful load.
// Callers must treat it as read-only: it is shared.
func (sc *SafeConfig) Get() *Config {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.cur
}

// OnChange registers fn to run, in reload order, after every successful load
// that changed the config (including the first).
func (sc *SafeConfig) OnChange(fn func(*Config)) {
	sc.reloadMu.Lock()
	defer sc.reloadMu.Unlock()
	sc.listeners = append(sc.listeners, fn)
}

// Check registers fn to run on every loaded config, in registration
// order, before it replaces the running one: an error fails the reload as
// an invalid file does, and the running config stays. It is for what only
// the running process can check (a library that must load), so that a
// reload reported successful was applied in full.
func (sc *SafeConfig) Check(fn func(*Config) error) {
	sc.reloadMu.Lock()
	defer sc.reloadMu.Unlock()
	sc.checks = append(sc.checks, fn)
}

// Reload loads the file again. On failure the running config stays and the
// error is returned and logged. API key files are re-read every time, so a
// reload also picks up a rotated key.
func (sc *SafeConfig) Reload() error {
	sc.reloadMu.Lock()
	defer sc.reloadMu.Unlock()
	cfg, err := Load(sc.path)
	for _, check := range sc.checks {
		if err != nil {
			break
		}
		err = check(cfg)
	}
	if err != nil {
		sc.reloadSuccess.Set(0)
		sc.logger.Error("Error loading config; keeping the running config", "file", sc.path, "err", err)
		return err
	}
	sc.mu.Lock()
	old := sc.cur
	sc.cur = cfg
	sc.mu.Unlock()
	sc.reloadSuccess.Set(1)
	sc.reloadTimestamp.SetToCurrentTime()
	if old != nil && reflect.DeepEqual(old, cfg) {
		sc.logger.Info("Config reloaded, unchanged", "file", sc.path)
		return nil
	}
	sc.logger.Info("Loaded config", "file", sc.path, "targets", len(cfg.Targets))
	if w := cfg.HistogramMixWarning(); w != "" {
		sc.logger.Warn("Probe histograms in more than one form", "file", sc.path, "warning", w)
	}
	for _, fn := range sc.listeners {
		fn(cfg)
	}
	return nil
}
