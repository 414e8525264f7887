package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// This file is what lets one configuration serve a fleet: modules (probe
// templates without an endpoint, as blackbox_exporter's are), the discovery
// of targets probed with them, and remote write with external labels.

// Module is a target without its endpoint: the endpoint comes from a
// /probe request's target parameter or from discovery.
type Module struct {
	Target `yaml:",inline"`
	// AllowedTargets is a regular expression (anchored at both ends) that
	// every endpoint given to this module must match; /probe answers 400
	// for one that does not, so the prober cannot be made to send probes
	// (and their API keys) anywhere a caller likes.
	AllowedTargets string `yaml:"allowed_targets"`

	allowed *regexp.Regexp
}

// TargetDiscovery finds targets, each probed with Module's probes.
type TargetDiscovery struct {
	Module        string          `yaml:"module"`
	FileSDConfigs []*FileSDConfig `yaml:"file_sd_configs,omitempty"`
	HTTPSDConfigs []*HTTPSDConfig `yaml:"http_sd_configs,omitempty"`
	// KubernetesSDConfigs watch Services' EndpointSlices (kubernetes.go).
	KubernetesSDConfigs []*KubernetesSDConfig `yaml:"kubernetes_sd_configs,omitempty"`
}

// FileSDConfig is Prometheus' file_sd_config: JSON or YAML files of target
// groups, read again when they change and every refresh_interval.
type FileSDConfig struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval"`
}

// HTTPSDConfig is Prometheus' http_sd_config: a URL answering a JSON list
// of target groups, fetched every refresh_interval.
type HTTPSDConfig struct {
	URL              string                      `yaml:"url"`
	RefreshInterval  model.Duration              `yaml:"refresh_interval"`
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:",inline"`
}

// RemoteWrite is one receiver of the prober's own samples, in Prometheus'
// remote_write shape (a subset).
type RemoteWrite struct {
	URL string `yaml:"url"`
	// RemoteTimeout bounds one send.
	RemoteTimeout model.Duration `yaml:"remote_timeout"`
	// Interval is how often the registry is gathered and queued.
	Interval         model.Duration              `yaml:"interval"`
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:",inline"`
	QueueConfig      QueueConfig                 `yaml:"queue_config"`
}

// QueueConfig bounds what a remote write holds while its receiver is slow
// or down.
type QueueConfig struct {
	// Capacity is how many samples wait at most; older ones are dropped
	// (and counted) to make room, so memory stays bounded.
	Capacity          int            `yaml:"capacity"`
	MaxSamplesPerSend int            `yaml:"max_samples_per_send"`
	MinBackoff        model.Duration `yaml:"min_backoff"`
	MaxBackoff        model.Duration `yaml:"max_backoff"`
}

const moduleEndpointHint = "a module has no endpoint of its own: it comes from /probe's target parameter or from target_discovery"

// Defaults of the fleet sections.
const (
	DefaultSDRefresh            = time.Minute
	DefaultRemoteTimeout        = 30 * time.Second
	DefaultRemoteWriteInterval  = 15 * time.Second
	DefaultQueueCapacity        = 100_000
	DefaultMaxSamplesPerSend    = 2_000
	DefaultRemoteMinBackoff     = 30 * time.Millisecond
	DefaultRemoteMaxBackoff     = 5 * time.Second
	maxModuleProbesOnEachTarget = 16
)

// sortedModules is the module names in order, so errors come in the same
// order at every load.
func sortedModules(m map[string]*Module) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (c *Config) applyFleetDefaults() {
	for _, name := range sortedModules(c.Modules) {
		m := c.Modules[name]
		if m == nil {
			continue
		}
		m.Name = name
		if len(m.Probes) == 0 {
			// /probe runs one probe; a module that names none has one
			// with the defaults, every 15 s when discovered targets run it.
			m.Probes = []*Probe{{Name: "default", Schedule: Schedule{Every: model.Duration(15 * time.Second)}}}
		}
		c.applyTargetDefaults(&m.Target)
	}
	for _, td := range c.TargetDiscovery {
		if td == nil {
			continue
		}
		for _, f := range td.FileSDConfigs {
			if f != nil && f.RefreshInterval == 0 {
				f.RefreshInterval = model.Duration(DefaultSDRefresh)
			}
		}
		for _, h := range td.HTTPSDConfigs {
			if h != nil && h.RefreshInterval == 0 {
				h.RefreshInterval = model.Duration(DefaultSDRefresh)
			}
		}
	}
	for _, rw := range c.RemoteWrite {
		if rw == nil {
			continue
		}
		if rw.RemoteTimeout == 0 {
			rw.RemoteTimeout = model.Duration(DefaultRemoteTimeout)
		}
		if rw.Interval == 0 {
			rw.Interval = model.Duration(DefaultRemoteWriteInterval)
		}
		q := &rw.QueueConfig
		if q.Capacity == 0 {
			q.Capacity = DefaultQueueCapacity
		}
		if q.MaxSamplesPerSend == 0 {
			q.MaxSamplesPerSend = min(DefaultMaxSamplesPerSend, q.Capacity)
		}
		if q.MinBackoff == 0 {
			q.MinBackoff = model.Duration(DefaultRemoteMinBackoff)
		}
		if q.MaxBackoff == 0 {
			q.MaxBackoff = model.Duration(DefaultRemoteMaxBackoff)
		}
	}
}

// placeholderEndpoint gives a module's template an endpoint of the right
// form, so the target checks apply to it unchanged.
func placeholderEndpoint(t *Target) {
	if p, ok := probe.LookupProtocol(t.Protocol); ok && p.Endpoint == probe.EndpointAddress {
		t.Address = "module.invalid:1"
		return
	}
	t.URL = "http://module.invalid"
}

func (c *Config) validateFleet(d *decoder) {
	for _, name := range sortedModules(c.Modules) {
		path := join("modules", name)
		m := c.Modules[name]
		if m == nil {
			d.at(path, "empty module")
			continue
		}
		if !nameRE.MatchString(name) {
			d.at(path, "invalid module name %q; %s", name, nameRule)
		}
		placeholderEndpoint(&m.Target)
		c.validateTarget(d, path, &m.Target)
		m.URL, m.Address = "", ""
		if len(m.Probes) > maxModuleProbesOnEachTarget {
			d.at(path+".probes", "at most %d probes per module; every discovered target runs each of them", maxModuleProbesOnEachTarget)
		}
		if m.AllowedTargets == "" {
			d.at(path+".allowed_targets", "missing allowed_targets; set a regular expression every target must match (e.g. 'http://10\\.0\\..*'), so /probe cannot be pointed anywhere")
			continue
		}
		re, err := regexp.Compile("^(?:" + m.AllowedTargets + ")$")
		if err != nil {
			d.at(path+".allowed_targets", "invalid regular expression: %v", err)
			continue
		}
		m.allowed = re
	}
	for i, td := range c.TargetDiscovery {
		path := fmt.Sprintf("target_discovery[%d]", i)
		if td == nil {
			d.at(path, "empty target_discovery entry")
			continue
		}
		if _, ok := c.Modules[td.Module]; !ok {
			d.at(path+".module", "unknown module %q; define it under modules: (have: %s)", td.Module, strings.Join(sortedModules(c.Modules), ", "))
		}
		if len(td.FileSDConfigs)+len(td.HTTPSDConfigs)+len(td.KubernetesSDConfigs) == 0 {
			d.at(path, "no discovery configured; add file_sd_configs:, http_sd_configs: or kubernetes_sd_configs:")
		}
		for j, f := range td.FileSDConfigs {
			fp := fmt.Sprintf("%s.file_sd_configs[%d]", path, j)
			if f == nil || len(f.Files) == 0 {
				d.at(fp, "no files; list files: (globs allowed in the last path element, as Prometheus' file_sd)")
				continue
			}
			for k, pat := range f.Files {
				if _, err := filepath.Match(filepath.Base(pat), ""); err != nil {
					d.at(fmt.Sprintf("%s.files[%d]", fp, k), "invalid file pattern %q: %v", pat, err)
				}
			}
			minimum(d, fp+".refresh_interval", f.RefreshInterval, time.Second)
		}
		for j, h := range td.HTTPSDConfigs {
			hp := fmt.Sprintf("%s.http_sd_configs[%d]", path, j)
			if h == nil {
				d.at(hp, "empty http_sd_config")
				continue
			}
			validateHTTPURL(d, hp+".url", h.URL)
			// Inline, so the walker never ran its Validate (which also
			// moves bearer_token into authorization).
			if err := h.HTTPClientConfig.Validate(); err != nil {
				d.at(hp, "%v", err)
			}
			minimum(d, hp+".refresh_interval", h.RefreshInterval, time.Second)
		}
		for j, k := range td.KubernetesSDConfigs {
			validateKubernetesSD(d, fmt.Sprintf("%s.kubernetes_sd_configs[%d]", path, j), k)
		}
	}
	for i, rw := range c.RemoteWrite {
		path := fmt.Sprintf("remote_write[%d]", i)
		if rw == nil {
			d.at(path, "empty remote_write entry")
			continue
		}
		validateHTTPURL(d, path+".url", rw.URL)
		if err := rw.HTTPClientConfig.Validate(); err != nil {
			d.at(path, "%v", err)
		}
		minimum(d, path+".remote_timeout", rw.RemoteTimeout, 100*time.Millisecond)
		minimum(d, path+".interval", rw.Interval, time.Second)
		q := rw.QueueConfig
		if q.Capacity < 1 || q.Capacity > 10_000_000 {
			d.at(path+".queue_config.capacity", "want 1 to 10000000 samples, got %d", q.Capacity)
		}
		if q.MaxSamplesPerSend < 1 || q.MaxSamplesPerSend > q.Capacity {
			d.at(path+".queue_config.max_samples_per_send", "want 1 to capacity (%d), got %d", q.Capacity, q.MaxSamplesPerSend)
		}
		if q.MinBackoff <= 0 || q.MaxBackoff < q.MinBackoff {
			d.at(path+".queue_config.max_backoff", "want 0 < min_backoff (%s) <= max_backoff (%s)", q.MinBackoff, q.MaxBackoff)
		}
	}
	for name, v := range c.ExternalLabels {
		if !model.LegacyValidation.IsValidLabelName(name) || strings.HasPrefix(name, "__") {
			d.at(join("external_labels", name), "invalid label name %q; use letters, digits and '_', not starting with a digit or '__'", name)
		}
		if !validLabelValue(v) {
			d.at(join("external_labels", name), "invalid label value %q; use 1-256 printable UTF-8 characters", v)
		}
	}
}

func minimum(d *decoder, path string, v model.Duration, least time.Duration) {
	if time.Duration(v) < least {
		d.at(path, "want at least %s, got %s", model.Duration(least), v)
	}
}

func (c *Config) resolveFleet(d *decoder, dir string, getenv func(string) string) {
	for _, name := range sortedModules(c.Modules) {
		resolveTargetSecrets(d, join("modules", name), dir, &c.Modules[name].Target, getenv)
	}
	for i, td := range c.TargetDiscovery {
		for _, f := range td.FileSDConfigs {
			for k, pat := range f.Files {
				f.Files[k] = promconfig.JoinDir(dir, pat)
			}
		}
		for j, h := range td.HTTPSDConfigs {
			h.HTTPClientConfig.SetDirectory(dir)
			checkSecretFiles(d, fmt.Sprintf("target_discovery[%d].http_sd_configs[%d]", i, j), &h.HTTPClientConfig)
		}
		for j, k := range td.KubernetesSDConfigs {
			resolveKubernetesSD(d, fmt.Sprintf("target_discovery[%d].kubernetes_sd_configs[%d]", i, j), dir, k)
		}
	}
	for i, rw := range c.RemoteWrite {
		rw.HTTPClientConfig.SetDirectory(dir)
		checkSecretFiles(d, fmt.Sprintf("remote_write[%d]", i), &rw.HTTPClientConfig)
	}
}

// checkSecretFiles reports, at load rather than at the first request, a
// secret file of an inline HTTP client configuration that cannot be read
// or is empty. The files are read again at every request, so a rotated
// one needs no reload.
func checkSecretFiles(d *decoder, path string, h *promconfig.HTTPClientConfig) {
	type secretFile struct{ key, file string }
	var files []secretFile
	if b := h.BasicAuth; b != nil {
		files = append(files, secretFile{path + ".basic_auth.username_file", b.UsernameFile}, secretFile{path + ".basic_auth.password_file", b.PasswordFile})
	}
	if a := h.Authorization; a != nil {
		files = append(files, secretFile{path + ".authorization.credentials_file", a.CredentialsFile})
	}
	if o := h.OAuth2; o != nil {
		files = append(files, secretFile{path + ".oauth2.client_secret_file", o.ClientSecretFile})
	}
	for _, f := range files {
		if f.file == "" {
			continue
		}
		b, err := os.ReadFile(f.file)
		switch {
		case err != nil:
			d.at(f.key, "cannot read %s: %v", f.key[strings.LastIndex(f.key, ".")+1:], err)
		case len(bytes.TrimSpace(b)) == 0:
			d.at(f.key, "%s is empty", f.file)
		}
	}
}

// Allowed reports whether endpoint may be probed with the module.
func (m *Module) Allowed(endpoint string) bool {
	return m.allowed != nil && m.allowed.MatchString(endpoint)
}

// Instantiate is the module's template pointed at endpoint, named name: a
// target like a configured one. For HTTP protocols an endpoint without a
// scheme gets http://, as Prometheus' __scheme__ default does; a gRPC
// endpoint must be host:port.
//
// allowed_targets is matched against the endpoint so completed, so that
// "10.0.0.1:8000" and "http://10.0.0.1:8000" are the same to it.
func (m *Module) Instantiate(name, endpoint string) (*Target, error) {
	t := m.Target // the resolved Triton options and secrets come along
	t.Name = name
	t.Probes = slices.Clone(m.Probes)
	if p, ok := probe.LookupProtocol(t.Protocol); ok && p.Endpoint == probe.EndpointAddress {
		if _, port, err := net.SplitHostPort(endpoint); err != nil || port == "" {
			return nil, fmt.Errorf("target %q: protocol %s wants host:port", endpoint, t.Protocol)
		}
		if !m.Allowed(endpoint) {
			return nil, m.refused(endpoint)
		}
		t.Address = endpoint
		return &t, nil
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	if !m.Allowed(endpoint) {
		return nil, m.refused(endpoint)
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return nil, fmt.Errorf("target %q: %w", redact.Default().URL(endpoint), redact.Default().Error(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("target %q must use http or https", redact.Default().URL(endpoint))
	case u.Host == "":
		return nil, fmt.Errorf("target %q has no host", redact.Default().URL(endpoint))
	case u.User != nil:
		return nil, fmt.Errorf("target %q carries credentials; give them to the module instead", redact.Default().URL(endpoint))
	}
	t.URL = endpoint
	return &t, nil
}

// RefusedError is an endpoint that a module's allowed_targets refuses.
type RefusedError struct{ Endpoint, Module string }

func (e *RefusedError) Error() string {
	// The endpoint comes from discovery and may carry a password.
	return fmt.Sprintf("target %q does not match module %s's allowed_targets", redact.Default().URL(e.Endpoint), e.Module)
}

func (m *Module) refused(endpoint string) error {
	return &RefusedError{Endpoint: endpoint, Module: m.Name}
}

// DiscoveredName is the target name of endpoint found for module: readable
// where the endpoint makes a valid name, a digest otherwise, and the same
// at every discovery so a target keeps its series across refreshes.
func DiscoveredName(module, endpoint string) string {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
		if u.Path != "" && u.Path != "/" {
			host = ""
		}
	}
	if name := module + "/" + host; host != "" && nameRE.MatchString(strings.ReplaceAll(name, "/", "_")) {
		return strings.ReplaceAll(name, "/", "_")
	}
	sum := sha256.Sum256([]byte(endpoint))
	return module + "_" + hex.EncodeToString(sum[:6])
}
