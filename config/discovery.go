package config

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/probe"
)

// DiscoverModels makes a target probe every model its server serves:
//
//	discover_models:
//	  api: openai               # openai (/v1/models) | ollama (/api/tags) | triton (repository index)
//	  filter: "llama-.*|.*-lora" # matched against the whole name
//	  max_models: 20
//	  refresh_interval: 1m
//
// The target's probes are then templates: each runs once per discovered
// model, as probe "<name>@<model>" with label model="<model>".
type DiscoverModels struct {
	// API is the model-list endpoint; by default the protocol's server's
	// (probe.DefaultModelsAPI).
	API string `yaml:"api"`
	// URL is the base URL the list is fetched from; the target's url by
	// default. triton_grpc targets need it (Triton's HTTP port).
	URL string `yaml:"url,omitempty"`
	// Filter keeps the models whose whole name matches (RE2).
	Filter string `yaml:"filter,omitempty"`
	// MaxModels bounds the models probed (and so the series); models
	// beyond it, in the server's order, are left out and logged.
	MaxModels int `yaml:"max_models"`
	// RefreshInterval is how often the list is fetched again.
	RefreshInterval model.Duration `yaml:"refresh_interval"`
	// Timeout bounds one fetch of the list.
	Timeout model.Duration `yaml:"timeout"`
}

// Model discovery defaults and bounds.
const (
	DefaultMaxModels         = 20
	MaxDiscoveredModels      = 1000
	DefaultDiscoveryRefresh  = time.Minute
	MinDiscoveryRefresh      = 5 * time.Second
	DefaultDiscoveryTimeout  = 10 * time.Second
	discoveredProbeSeparator = "@"
	maxDiscoveryFilterLength = 1024
)

func (m *DiscoverModels) applyDefaults() {
	if m == nil {
		return
	}
	if m.MaxModels == 0 {
		m.MaxModels = DefaultMaxModels
	}
	if m.RefreshInterval == 0 {
		m.RefreshInterval = model.Duration(DefaultDiscoveryRefresh)
	}
	if m.Timeout == 0 {
		m.Timeout = model.Duration(DefaultDiscoveryTimeout)
	}
}

// FilterRegexp is the compiled filter, anchored at both ends; nil without
// a filter. The filter was checked at load.
func (m *DiscoverModels) FilterRegexp() *regexp.Regexp {
	if m == nil || m.Filter == "" {
		return nil
	}
	re, err := regexp.Compile("^(?:" + m.Filter + ")$")
	if err != nil {
		return nil
	}
	return re
}

// EffectiveAPI is API, or the protocol's default.
func (t *Target) EffectiveAPI() string {
	if t.DiscoverModels == nil || t.DiscoverModels.API == "" {
		return probe.DefaultModelsAPI(t.Protocol)
	}
	return t.DiscoverModels.API
}

// ModelListOptions are the target's driver options aimed at the server
// that lists its models: the same client (TLS, proxy, authentication),
// discover_models.url as the base URL when set.
func (t *Target) ModelListOptions() probe.TargetOptions {
	o := t.DriverOptions()
	if t.DiscoverModels != nil && t.DiscoverModels.URL != "" {
		o.URL = t.DiscoverModels.URL
	}
	return o
}

func validateDiscovery(d *decoder, path string, t *Target, proto probe.Protocol, known bool) {
	m := t.DiscoverModels
	if m == nil {
		return
	}
	mp := path + ".discover_models"
	if t.Model != "" {
		d.at(path+".model", "discover_models chooses the models; remove model: (or filter: the discovered ones)")
	}
	if m.API != "" && !slices.Contains(probe.ModelsAPIs(), m.API) {
		d.at(mp+".api", "unknown model-list api %q; want one of %s", m.API, strings.Join(probe.ModelsAPIs(), ", "))
	}
	switch {
	case m.URL != "":
		validateHTTPURL(d, mp+".url", m.URL)
	case known && proto.Endpoint != probe.EndpointURL:
		d.at(mp, "protocol %s has no HTTP url to list models from; set discover_models.url: http://host:port (Triton's HTTP port, e.g. %d)", t.Protocol, 8000)
	}
	if len(m.Filter) > maxDiscoveryFilterLength {
		d.at(mp+".filter", "filter is longer than %d bytes", maxDiscoveryFilterLength)
	} else if _, err := regexp.Compile(m.Filter); err != nil {
		// The unanchored form, so the message quotes what was written.
		d.at(mp+".filter", "invalid regular expression: %v", err)
	}
	if m.MaxModels < 1 || m.MaxModels > MaxDiscoveredModels {
		d.at(mp+".max_models", "want 1 to %d, got %d", MaxDiscoveredModels, m.MaxModels)
	}
	if time.Duration(m.RefreshInterval) < MinDiscoveryRefresh {
		d.at(mp+".refresh_interval", "want at least %s, got %s", model.Duration(MinDiscoveryRefresh), m.RefreshInterval)
	}
	if m.Timeout <= 0 {
		d.at(mp+".timeout", "must be positive, got %s", m.Timeout)
	} else if m.Timeout > m.RefreshInterval {
		d.at(mp+".timeout", "timeout %s is longer than refresh_interval %s", m.Timeout, m.RefreshInterval)
	}
}

// DiscoveredProbeName is the name of template's probe for model m.
func DiscoveredProbeName(template, m string) string {
	return template + discoveredProbeSeparator + m
}

// ModelFor is the model the probe asks for: its own (a discovered
// probe's), else the target's.
func (p *Probe) ModelFor(t *Target) string {
	if p.Model != "" {
		return p.Model
	}
	return t.Model
}

// WithModels is c with the probes of every target that discovers its
// models replaced by one per template and model, models(target) giving
// the target's current list (nil: none yet, so no probes). Other
// targets are shared with c; nothing of c is modified.
func (c *Config) WithModels(models func(target string) []string) *Config {
	out := *c
	out.Targets = make([]*Target, len(c.Targets))
	for i, t := range c.Targets {
		if t == nil || t.DiscoverModels == nil {
			out.Targets[i] = t
			continue
		}
		ct := *t
		list := models(t.Name)
		ct.Probes = make([]*Probe, 0, len(list)*len(t.Probes))
		for _, m := range list {
			for _, tmpl := range t.Probes {
				p := *tmpl
				p.Name = DiscoveredProbeName(tmpl.Name, m)
				p.Model = m
				ct.Probes = append(ct.Probes, &p)
			}
		}
		out.Targets[i] = &ct
	}
	return &out
}

// discoveredProbe is the probe "<template>@<model>" of a discovering
// target, whether or not the server lists the model now: the one-shot
// commands send it as the daemon would.
func (t *Target) discoveredProbe(name string) (*Probe, bool) {
	if t.DiscoverModels == nil {
		return nil, false
	}
	for _, tmpl := range t.Probes {
		m, ok := strings.CutPrefix(name, tmpl.Name+discoveredProbeSeparator)
		if ok && m != "" && tmpl.Model == "" {
			p := *tmpl
			p.Name, p.Model = name, m
			return &p, true
		}
	}
	return nil, false
}
