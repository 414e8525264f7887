package discovery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/redact"
)

// Manager runs the discovery sources of the current configuration and
// keeps each one's last good list of endpoints. A source that fails keeps
// that list (a flapping discovery service must not stop every probe) and
// says so in llm_prober_discovery_source_up.
type Manager struct {
	logger *slog.Logger
	// changed is called, from a source's goroutine, after a source's list
	// changed; the daemon recomputes the probes (Expand) and applies them.
	changed func()

	up       *prometheus.GaugeVec
	targets  *prometheus.GaugeVec
	failures *prometheus.CounterVec
	lastOK   *prometheus.GaugeVec
	// info is llm_prober_discovered_target_info, one series per target
	// the last Expand created.
	info *prometheus.GaugeVec

	mu      sync.Mutex
	sources []*source
	// refused logs once per endpoint that a module's allowed_targets
	// refused, rather than at every refresh.
	refused map[string]bool
	// created is what the last Expand created: target name → module.
	created map[string]string

	// kubeClient makes the clients of kubernetes_sd_configs;
	// namespaceFile is where the prober's own namespace is read.
	kubeClient    KubeClientFunc
	namespaceFile string
}

type source struct {
	// name is where it is in the configuration, e.g.
	// target_discovery[0].file_sd_configs[1]: the source label.
	name, mechanism, module string
	cfg                     any // *config.FileSDConfig, *config.HTTPSDConfig or *config.KubernetesSDConfig
	// A source is read every `every` with fetch, or tells its changes
	// itself: watch runs until ctx ends, calling report with every new
	// list or error.
	fetch func(context.Context) ([]Group, error)
	every time.Duration
	watch func(ctx context.Context, report func([]Group, error))

	mu        sync.Mutex
	endpoints []string
	good      bool // a list was ever read
	state     int  // stateUnknown until the first refresh
	// applied is set once Apply has stopped waiting for a watching
	// source's first report; later reports apply themselves (changed).
	applied bool
	first   chan struct{} // closed at a watching source's first report

	cancel context.CancelFunc
	done   chan struct{}
}

// firstReadTimeout bounds a new source's first read, made while its
// configuration is being applied.
const firstReadTimeout = 10 * time.Second

const (
	stateUnknown = iota
	stateUp
	stateDown
)

// NewManager is a manager with no sources; its metrics go to reg.
func NewManager(logger *slog.Logger, reg prometheus.Registerer, changed func()) *Manager {
	labels := []string{"source", "mechanism"}
	m := &Manager{
		logger:  logger,
		changed: changed,
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_discovery_source_up",
			Help: "Whether the last refresh of the discovery source succeeded (1) or failed (0, its last good targets are kept).",
		}, labels),
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_discovery_targets",
			Help: "Endpoints the discovery source lists now (its last good list).",
		}, labels),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_prober_discovery_refresh_failures_total",
			Help: "Refreshes of the discovery source that failed.",
		}, labels),
		lastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_discovery_last_success_timestamp_seconds",
			Help: "Unix time of the discovery source's last successful refresh.",
		}, labels),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_discovered_target_info",
			Help: "A target that target discovery created, probed with the module's probes; always 1, gone with the target.",
		}, []string{"target", "module"}),
		refused:       map[string]bool{},
		created:       map[string]string{},
		kubeClient:    NewKubeClient,
		namespaceFile: ServiceAccountNamespaceFile,
	}
	if reg != nil {
		reg.MustRegister(m.up, m.targets, m.failures, m.lastOK, m.info)
	}
	return m
}

// SetKubeClient replaces how the clients of kubernetes_sd_configs are
// made (NewKubeClient); for tests, before the first Apply.
func (m *Manager) SetKubeClient(f KubeClientFunc) { m.kubeClient = f }

// Apply starts the sources of cfg's target_discovery and stops the
// others. A source whose configuration did not change keeps running and
// keeps its list, so a reload does not restart discovered probes. New
// sources make their first read before Apply returns, so that the first
// load already runs their probes.
func (m *Manager) Apply(cfg *config.Config) {
	var want []*source
	for i, td := range cfg.TargetDiscovery {
		for j, f := range td.FileSDConfigs {
			want = append(want, m.fileSource(fmt.Sprintf("target_discovery[%d].file_sd_configs[%d]", i, j), td.Module, f))
		}
		for j, h := range td.HTTPSDConfigs {
			s, err := m.httpSource(fmt.Sprintf("target_discovery[%d].http_sd_configs[%d]", i, j), td.Module, h)
			if err != nil {
				m.logger.Error("Cannot set up http_sd; its targets will not be probed", "source", s.name, "err", redact.Default().Error(err))
				continue
			}
			want = append(want, s)
		}
		for j, k := range td.KubernetesSDConfigs {
			want = append(want, m.kubeSource(fmt.Sprintf("target_discovery[%d].kubernetes_sd_configs[%d]", i, j), td.Module, k))
		}
	}

	m.mu.Lock()
	old := m.sources
	var keep, start []*source
	for _, w := range want {
		if i := slices.IndexFunc(old, func(o *source) bool { return o.same(w) }); i >= 0 {
			keep = append(keep, old[i])
			old = slices.Delete(old, i, i+1)
			continue
		}
		start = append(start, w)
	}
	m.sources = append(keep, start...)
	m.mu.Unlock()

	for _, o := range old {
		o.stop()
		m.up.DeleteLabelValues(o.name, o.mechanism)
		m.targets.DeleteLabelValues(o.name, o.mechanism)
		m.failures.DeleteLabelValues(o.name, o.mechanism)
		m.lastOK.DeleteLabelValues(o.name, o.mechanism)
	}
	for _, s := range start {
		m.failures.WithLabelValues(s.name, s.mechanism)
		if s.watch != nil {
			m.startWatch(s)
			continue
		}
		// The first read holds up the load it belongs to, so it gets
		// less time than later ones; a source that misses it is read
		// again at its interval.
		m.refresh(context.Background(), s, min(s.every, firstReadTimeout))
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.done = cancel, make(chan struct{})
		go m.loop(ctx, s)
	}
}

func (s *source) same(o *source) bool {
	return s.name == o.name && s.module == o.module && reflect.DeepEqual(s.cfg, o.cfg)
}

func (s *source) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// Stop ends every source; their lists are forgotten.
func (m *Manager) Stop() {
	m.mu.Lock()
	srcs := m.sources
	m.sources = nil
	m.mu.Unlock()
	for _, s := range srcs {
		s.stop()
	}
}

func (m *Manager) loop(ctx context.Context, s *source) {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.refresh(ctx, s, min(s.every, time.Minute)) {
			m.changed()
		}
	}
}

// startWatch starts a source that reports its own changes and waits, as
// long as a polled source's first read may take, for its first report, so
// that the first load already runs its probes. A later report applies
// itself.
func (m *Manager) startWatch(s *source) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done, s.first = cancel, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		var once sync.Once
		s.watch(ctx, func(groups []Group, err error) {
			if ctx.Err() != nil {
				return
			}
			changed, applied := m.record(s, groups, err)
			once.Do(func() { close(s.first) })
			if changed && applied {
				m.changed()
			}
		})
	}()
	t := time.NewTimer(firstReadTimeout)
	defer t.Stop()
	select {
	case <-s.first:
	case <-t.C:
		m.logger.Warn("Discovery source has not listed its targets yet; its probes start when it does", "source", s.name, "mechanism", s.mechanism)
	}
	s.mu.Lock()
	s.applied = true
	s.mu.Unlock()
}

// refresh reads s once, within limit, and reports whether its list
// changed. ctx ends when the source stops.
func (m *Manager) refresh(ctx context.Context, s *source, limit time.Duration) bool {
	fctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	groups, err := s.fetch(fctx)
	if ctx.Err() != nil {
		return false // stopping: not a failure of the source
	}
	changed, _ := m.record(s, groups, err)
	return changed
}

// record takes a read of s: its list, or the error that keeps its last
// good list. It reports whether the list changed, and whether Apply is
// done with s (so a change must be applied by the caller).
func (m *Manager) record(s *source, groups []Group, err error) (changed, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		m.failures.WithLabelValues(s.name, s.mechanism).Inc()
		if s.state != stateDown {
			// Logged when it starts failing, not at every refresh.
			m.logger.Error("Discovery failed; keeping its last good targets", "source", s.name, "mechanism", s.mechanism, "targets", len(s.endpoints), "err", redact.Default().Error(err))
		}
		s.state = stateDown
		m.up.WithLabelValues(s.name, s.mechanism).Set(0)
		return false, s.applied
	}
	if s.state == stateDown {
		m.logger.Info("Discovery succeeding again", "source", s.name, "mechanism", s.mechanism)
	}
	s.state = stateUp
	m.up.WithLabelValues(s.name, s.mechanism).Set(1)
	m.lastOK.WithLabelValues(s.name, s.mechanism).SetToCurrentTime()
	eps := Endpoints(groups)
	m.targets.WithLabelValues(s.name, s.mechanism).Set(float64(len(eps)))
	changed = !s.good || !slices.Equal(eps, s.endpoints)
	s.endpoints, s.good = eps, true
	if changed {
		m.logger.Info("Discovered targets changed", "source", s.name, "targets", len(eps))
	}
	return changed, s.applied
}

func (m *Manager) fileSource(name, module string, f *config.FileSDConfig) *source {
	s := &source{name: name, mechanism: "file", module: module, cfg: f, every: time.Duration(f.RefreshInterval)}
	s.fetch = func(context.Context) ([]Group, error) { return readFiles(f.Files) }
	return s
}

// readFiles reads every file the patterns match, as Prometheus' file_sd
// does: .json as JSON, .yml and .yaml as YAML. One bad file fails the
// whole read, so a half-written file cannot remove its targets.
func readFiles(patterns []string) ([]Group, error) {
	var all []Group
	n := 0
	for _, pat := range patterns {
		files, err := filepath.Glob(pat)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			groups, err := readFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, g := range groups {
				n += len(g.Targets)
			}
			if n > MaxSourceTargets {
				return nil, fmt.Errorf("more than %d targets in %s", MaxSourceTargets, strings.Join(patterns, ", "))
			}
			all = append(all, groups...)
		}
	}
	return all, nil
}

func readFile(name string) ([]Group, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSourceBytes+1))
	if err != nil {
		return nil, err
	}
	ext := filepath.Ext(name)
	return ParseGroups(b, ext == ".yml" || ext == ".yaml")
}

func (m *Manager) httpSource(name, module string, h *config.HTTPSDConfig) (*source, error) {
	s := &source{name: name, mechanism: "http", module: module, cfg: h, every: time.Duration(h.RefreshInterval)}
	client, err := promconfig.NewClientFromConfig(h.HTTPClientConfig, "http_sd")
	if err != nil {
		return s, err
	}
	s.fetch = func(ctx context.Context) ([]Group, error) { return fetchHTTP(ctx, client, h.URL) }
	return s, nil
}

func fetchHTTP(ctx context.Context, client *http.Client, url string) ([]Group, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "llm-prober")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("HTTP %s from %s", resp.Status, url)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxSourceBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseGroups(b, false)
}

// Expand is cfg with a target for every discovered endpoint, probed with
// its source's module. cfg is not changed. A configured target of the same
// name wins; an endpoint the module's allowed_targets refuses is logged
// once and left out. The targets it creates are the series of
// llm_prober_discovered_target_info from then on, so that rules can tell
// discovered targets, and their module, from configured ones.
func (m *Manager) Expand(cfg *config.Config) *config.Config {
	m.mu.Lock()
	srcs := slices.Clone(m.sources)
	m.mu.Unlock()
	created := map[string]string{}
	defer m.setCreated(created)
	if len(srcs) == 0 {
		return cfg
	}
	out := *cfg
	out.Targets = slices.Clone(cfg.Targets)
	names := map[string]bool{}
	for _, t := range cfg.Targets {
		names[t.Name] = true
	}
	for _, s := range srcs {
		mod := cfg.Modules[s.module]
		if mod == nil {
			continue
		}
		s.mu.Lock()
		eps := s.endpoints
		s.mu.Unlock()
		for _, ep := range eps {
			name := config.DiscoveredName(s.module, ep)
			if names[name] {
				continue
			}
			t, err := mod.Instantiate(name, ep)
			if err != nil {
				m.mu.Lock()
				if !m.refused[ep] && len(m.refused) < MaxSourceTargets {
					m.refused[ep] = true
					m.logger.Warn("Discovered target not probed", "source", s.name, "module", s.module, "err", redact.Default().Error(err))
				}
				m.mu.Unlock()
				continue
			}
			names[name] = true
			created[name] = s.module
			out.Targets = append(out.Targets, t)
		}
	}
	return &out
}

// setCreated makes created the discovered targets of the info series:
// new ones appear, gone ones (or ones now of another module) lose theirs.
func (m *Manager) setCreated(created map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, module := range m.created {
		if created[name] != module {
			m.info.DeleteLabelValues(name, module)
		}
	}
	for name, module := range created {
		m.info.WithLabelValues(name, module).Set(1)
	}
	m.created = created
}
