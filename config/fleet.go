package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/internal/display"
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
			d.at(path+".allowed_targets", "missing allowed_targets; set a regular expression every target must match whole, naming its scheme, address and port (e.g. 'http://10\\.0\\.[0-9]+\\.[0-9]+:8000'), so /probe cannot send the module's probes and API key anywhere else")
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

// refuseWrittenZeros runs before the defaults: where a zero left out
// means the default, a zero written in the file would silently become
// it. remote_write's interval: 0s is refused (as Prometheus refuses a zero
// scrape_interval) rather than taken as 15s, and an embedding's inputs: 0
// rather than taken as 1.
func (c *Config) refuseWrittenZeros(d *decoder) {
	for i, t := range c.Targets {
		path := fmt.Sprintf("targets[%d].embedding.inputs", i)
		if t != nil && t.Embedding != nil && t.Embedding.Inputs == 0 && d.has(path) {
			d.at(path, "want 1 to %d texts per request, got 0", probe.MaxEmbeddingInputs)
		}
	}
	for _, name := range sortedModules(c.Modules) {
		path := join("modules", name) + ".embedding.inputs"
		if m := c.Modules[name]; m != nil && m.Embedding != nil && m.Embedding.Inputs == 0 && d.has(path) {
			d.at(path, "want 1 to %d texts per request, got 0", probe.MaxEmbeddingInputs)
		}
	}
	for i, rw := range c.RemoteWrite {
		path := fmt.Sprintf("remote_write[%d].interval", i)
		if rw != nil && rw.Interval == 0 && d.has(path) {
			d.at(path, "want at least 1s, got 0s; leave interval out for the default %s", model.Duration(DefaultRemoteWriteInterval))
		}
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
		key := f.key[strings.LastIndex(f.key, ".")+1:]
		b, err := readSecretFile(f.file, key)
		switch {
		case err != nil:
			d.at(f.key, "cannot read %s: %v", key, err)
		case len(bytes.TrimSpace(b)) == 0:
			d.at(f.key, "%s is empty", f.file)
		}
	}
}

// Allowed reports whether endpoint, as Instantiate completes it, matches
// the module's allowed_targets. Instantiate also refuses what no pattern
// can allow; ask it, not Allowed, before probing an endpoint.
func (m *Module) Allowed(endpoint string) bool {
	return m.allowed != nil && m.allowed.MatchString(endpoint)
}

// Instantiate is the module's template pointed at endpoint, named name: a
// target like a configured one. For HTTP protocols an endpoint without a
// scheme gets http://, as Prometheus' __scheme__ default does; a gRPC
// endpoint must be host:port.
//
// The endpoint comes from whoever can call /probe or feed a discovery
// source, and the module's API key goes with every probe, so what a
// caller may choose is narrowed twice. First, whatever allowed_targets
// says, an endpoint is refused that carries credentials, a query or a
// fragment, a path with dot segments, or a host that is a DNS name
// starting like an IP address (10.0.evil.example, 10.0.0.010): that last
// one is what lets 'http://10\.0\..*' or '10\.0\.[0-9.]+' be bypassed by
// anyone who owns a DNS zone. Then allowed_targets is matched, whole,
// against the URL as it will be requested (scheme://host:port/path, host
// lowered), so that "10.0.0.1:8000" and "http://10.0.0.1:8000" are the
// same to it and nothing it did not see is sent.
func (m *Module) Instantiate(name, endpoint string) (*Target, error) {
	t := m.Target // the resolved Triton options and secrets come along
	t.Name = name
	t.Probes = slices.Clone(m.Probes)
	if p, ok := probe.LookupProtocol(t.Protocol); ok && p.Endpoint == probe.EndpointAddress {
		host, port, err := net.SplitHostPort(endpoint)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("target %q: protocol %s wants host:port", clip(endpoint), t.Protocol)
		}
		if posesAsAddress(host) {
			return nil, m.refusedFor(endpoint, posingReason(host))
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
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		// Not err itself: url.Error repeats the whole URL, credentials
		// and all.
		return nil, fmt.Errorf("target %q is not a valid URL; want scheme://host:port[/path]", clip(redact.Default().String(endpoint)))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, m.refusedFor(redact.Default().URL(endpoint), "it must use http or https")
	case u.Host == "":
		return nil, fmt.Errorf("target %q has no host", clip(redact.Default().URL(endpoint)))
	case u.User != nil:
		return nil, m.refusedFor(redact.Default().URL(endpoint), "it carries credentials; give them to the module instead")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, m.refusedFor(endpoint, "it carries a query, which would let a caller add parameters to the module's requests; a server that needs one is a configured target")
	case u.Fragment != "":
		return nil, m.refusedFor(endpoint, "it carries a fragment")
	case posesAsAddress(u.Hostname()):
		return nil, m.refusedFor(endpoint, posingReason(u.Hostname()))
	case hasDotSegment(u.Path):
		return nil, m.refusedFor(endpoint, `its path has "." or ".." segments`)
	}
	requested := (&url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}).String()
	if !m.Allowed(requested) {
		return nil, m.refused(requested)
	}
	t.URL = requested
	return &t, nil
}

// posesAsAddress reports whether host is not an IP address but starts
// like one: a first label of digits (or hex, 0x…). Resolvers hand such a
// name to DNS, where whoever owns a zone (or a wildcard service such as
// nip.io) answers for it, and some C resolvers read 10.0.0.010 as octal;
// a pattern written for addresses must not match it.
func posesAsAddress(host string) bool {
	if net.ParseIP(host) != nil {
		return false
	}
	label, _, _ := strings.Cut(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		label = rest
		return strings.Trim(label, "0123456789abcdef") == ""
	}
	return label != "" && strings.Trim(label, "0123456789") == ""
}

func posingReason(host string) string {
	return fmt.Sprintf("its host %q is a DNS name that starts like an IP address; give the address itself", clip(host))
}

// hasDotSegment reports a "." or ".." path segment, which a server may
// resolve to a path the pattern never saw.
func hasDotSegment(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// clip is s as an error may echo it (display.Cut to display.MaxEchoBytes).
func clip(s string) string { return display.Cut(s, display.MaxEchoBytes) }

// RefusedError is an endpoint that a module refuses: one its
// allowed_targets does not match (Reason empty), or one no pattern can
// allow (Reason says why). Endpoint is redacted and clipped for echoing.
type RefusedError struct{ Endpoint, Module, Reason string }

func (e *RefusedError) Error() string {
	// Endpoint was redacted (it comes from discovery or a /probe caller
	// and may carry a password) and then clipped when the error was made:
	// redacting after the clip could grow it again.
	ep := e.Endpoint
	if e.Reason != "" {
		return fmt.Sprintf("target %q refused by module %s whatever its allowed_targets: %s", ep, e.Module, e.Reason)
	}
	return fmt.Sprintf("target %q does not match module %s's allowed_targets", ep, e.Module)
}

func (m *Module) refused(endpoint string) error {
	return &RefusedError{Endpoint: clip(redact.Default().URL(endpoint)), Module: m.Name}
}

func (m *Module) refusedFor(endpoint, reason string) error {
	return &RefusedError{Endpoint: clip(redact.Default().URL(endpoint)), Module: m.Name, Reason: reason}
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

// MarshalYAML prints a module without the keys a module cannot have (its
// name is its key under modules:, and it has no endpoint), and with
// follow_redirects in one place, so that check-config --print's output
// loads again.
func (m *Module) MarshalYAML() (any, error) {
	type plain Module
	c := *m
	c.Target = printableHTTPClient(c.Target)
	var n yaml.Node
	if err := n.Encode((*plain)(&c)); err != nil {
		return nil, err
	}
	refused := refusedKeys[reflect.TypeFor[Module]()]
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if _, ok := refused[n.Content[i].Value]; !ok {
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = kept
	return &n, nil
}
