// Package config loads, validates and holds llm-prober's YAML configuration.
// Every error names the file, line, column and key path of the problem.
package config

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// Config is the whole configuration file after defaults were applied and
// secrets resolved.
type Config struct {
	Targets   []*Target            `yaml:"targets"`
	Workloads map[string]*Workload `yaml:"workloads,omitempty"`
	GPUs      GPUs                 `yaml:"gpus"`
	// Histograms is the form of every probe histogram (classic, native or
	// both); a target's own histograms: overrides it.
	Histograms string `yaml:"histograms"`
	// Metrics switches families of the probe metrics off (metrics.go);
	// a target's or a probe's own metrics: replaces it.
	Metrics *Metrics `yaml:"metrics,omitempty"`

	// Modules are probe templates without an endpoint, for /probe and for
	// discovered targets (fleet.go).
	Modules map[string]*Module `yaml:"modules,omitempty"`
	// TargetDiscovery finds targets at run time, each probed with a module.
	TargetDiscovery []*TargetDiscovery `yaml:"target_discovery,omitempty"`
	// RemoteWrite pushes the prober's own samples to these receivers.
	RemoteWrite []*RemoteWrite `yaml:"remote_write,omitempty"`
	// ExternalLabels are added to every remote-written series.
	ExternalLabels map[string]string `yaml:"external_labels,omitempty"`
	// SecretQueryParams name query parameters whose values are secret in
	// every output, besides redact.DefaultQueryParams (api_key, key,
	// token, sig, …).
	SecretQueryParams []string `yaml:"secret_query_params,omitempty"`
}

// Target is one inference endpoint and the probes sent to it.
type Target struct {
	Name     string `yaml:"name"`
	Protocol string `yaml:"protocol"`
	// URL is the base URL of HTTP protocols; Address is host:port for gRPC.
	URL     string `yaml:"url,omitempty"`
	Address string `yaml:"address,omitempty"`
	Model   string `yaml:"model"`

	APIKeyFile string `yaml:"api_key_file,omitempty"`
	APIKeyEnv  string `yaml:"api_key_env,omitempty"`
	// APIKey is resolved from api_key_file or api_key_env at every load, so
	// a rotated key is picked up by a reload. It is never read from the file
	// itself: inline secrets end up in version control.
	APIKey promconfig.Secret `yaml:"api_key,omitempty" config:"output-only" hint:"put the key in a file and use api_key_file, or in the environment and use api_key_env"`

	Headers               map[string]string    `yaml:"headers,omitempty"`
	TLSConfig             promconfig.TLSConfig `yaml:"tls_config,omitempty"`
	NewConnectionPerProbe bool                 `yaml:"new_connection_per_probe"`
	// FollowRedirects follows HTTP redirects (at most
	// probe.DefaultMaxRedirects); by default a redirect fails the probe.
	FollowRedirects bool `yaml:"follow_redirects,omitempty"`
	// FollowRedirectsTrustedOrigins are origins (scheme://host[:port]) a
	// followed redirect may reach with the target's credentials; any
	// other origin gets the request without them.
	FollowRedirectsTrustedOrigins []string `yaml:"follow_redirects_trusted_origins,omitempty"`
	// ServerLoadReport asks the server for its load with every probe
	// (endpoint-load-metrics-format): auto (the default) on the OpenAI
	// protocols, whose vLLM servers answer it; on for any other HTTP
	// protocol; off never. Servers that do not know the header ignore it.
	ServerLoadReport string `yaml:"server_load_report,omitempty"`
	// secretParams is the configuration's secret_query_params, set at
	// load for DriverOptions.
	secretParams []string
	// HTTPClientConfig is Prometheus' HTTP client configuration (proxy,
	// basic_auth, authorization, oauth2, tls_config, …) for HTTP
	// protocols, with the prober's defaults: see httpclient.go.
	HTTPClientConfig *promconfig.HTTPClientConfig `yaml:"http_client_config,omitempty"`
	// SecretsDigest is a hash of http_client_config's inline secrets, set
	// at load. It is never printed; it is here so that the JSON of a
	// target, which engine fingerprints, changes when only a secret did.
	SecretsDigest string `yaml:"-" json:"secrets_digest,omitempty"`
	// Timeout bounds one probe from start to the final event.
	Timeout model.Duration `yaml:"timeout"`
	// StreamIdleTimeout ends a stream that sends nothing for this long as
	// stalled, well before Timeout.
	StreamIdleTimeout model.Duration `yaml:"stream_idle_timeout"`
	// MaxResponseBytes bounds what one probe reads from the server.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxInFlight bounds the requests in flight to this target across all
	// its probes, so a burst on one probe cannot exhaust the prober.
	MaxInFlight int `yaml:"max_in_flight"`
	// Histograms is the form of the target's probe histograms: classic,
	// native or both; the top-level histograms: when unset.
	Histograms string `yaml:"histograms"`
	// Metrics is the metrics: of the target's probes; the top-level one
	// when unset.
	Metrics *Metrics `yaml:"metrics,omitempty"`

	// Triton is the tensor mapping and gRPC settings of triton_* targets.
	Triton *Triton `yaml:"triton,omitempty"`
	// Ollama holds settings of ollama targets.
	Ollama *Ollama `yaml:"ollama,omitempty"`
	// Embedding and Rerank check the answers of embedding and rerank
	// targets (pooled.go).
	Embedding *Embedding `yaml:"embedding,omitempty"`
	Rerank    *Rerank    `yaml:"rerank,omitempty"`
	// DiscoverModels probes every model the server lists (discovery.go).
	DiscoverModels *DiscoverModels `yaml:"discover_models,omitempty"`

	ServerMetrics *ServerMetrics `yaml:"server_metrics,omitempty"`
	// OTLPTraces exports the probes as client spans (tracing.go).
	OTLPTraces *OTLPTraces `yaml:"otlp_traces,omitempty"`
	Probes     []*Probe    `yaml:"probes"`

	// triton is Triton's probe-side options, preset applied at load.
	triton probe.TritonOptions
}

// Ollama selects how an ollama target is probed.
type Ollama struct {
	// API is chat (POST /api/chat, the default: workloads are chat-shaped
	// and the model's chat template applies) or generate (POST
	// /api/generate with the messages flattened into one prompt).
	API string `yaml:"api"`
}

// ServerMetrics says where the model server's own /metrics are.
type ServerMetrics struct {
	URL     string         `yaml:"url"`
	Kind    string         `yaml:"kind"`
	Timeout model.Duration `yaml:"timeout"`
}

// Endpoint is where the target is reached, for messages: its URL, or its
// gRPC address.
func (t *Target) Endpoint() string {
	if t.URL != "" {
		return t.URL
	}
	return t.Address
}

// Probe is one kind of request sent to a target on a schedule.
type Probe struct {
	Name     string `yaml:"name"`
	Workload string `yaml:"workload"`
	// Stream selects streaming answers; only they have TTFT and ITL.
	Stream *bool `yaml:"stream"`
	// Metrics is the probe's metrics: (metrics.go); the target's when
	// unset.
	Metrics  *Metrics `yaml:"metrics,omitempty"`
	Schedule Schedule `yaml:"schedule"`
	SLO      *SLO     `yaml:"slo,omitempty"`
	// Timeout overrides the target's timeout for this probe.
	Timeout model.Duration `yaml:"timeout"`
	// Assert checks the answer's text (assert.go).
	Assert     []*Assert `yaml:"assert,omitempty"`
	assertions probe.Assertions
	// Cancel cuts each stream after some tokens and measures the server
	// freeing the slot (cancel.go).
	Cancel *Cancel `yaml:"cancel,omitempty"`
	// Session and SharedPrefix send several requests per run (prefix.go).
	Session      *Session      `yaml:"session,omitempty"`
	SharedPrefix *SharedPrefix `yaml:"shared_prefix,omitempty"`
	// Model is set on the probes model discovery makes from this one
	// (Config.WithModels); never read from the file.
	Model string `yaml:"-" json:"model,omitempty"`
}

// Streaming reports whether the probe asks for a streamed answer.
func (p *Probe) Streaming() bool { return p.Stream == nil || *p.Stream }

// SLO is a probe's latency objective.
type SLO struct {
	TTFT      model.Duration `yaml:"ttft,omitempty"`
	TPOT      model.Duration `yaml:"tpot,omitempty"`
	Objective float64        `yaml:"objective"`
}

// Workload is what a probe asks: prompts and output length.
type Workload struct {
	Prompts     Prompts        `yaml:"prompts"`
	MaxTokens   MaxTokens      `yaml:"max_tokens"`
	IgnoreEOS   bool           `yaml:"ignore_eos,omitempty"`
	MinTokens   int            `yaml:"min_tokens,omitempty"`
	Temperature *float64       `yaml:"temperature,omitempty"`
	TopP        *float64       `yaml:"top_p,omitempty"`
	Seed        *int64         `yaml:"seed,omitempty"`
	Stop        []string       `yaml:"stop,omitempty"`
	ExtraBody   map[string]any `yaml:"extra_body,omitempty"`
}

// GPUs configures NVML collection.
type GPUs struct {
	Enabled GPUMode `yaml:"enabled"`
	Library string  `yaml:"library,omitempty"`
	Devices []int   `yaml:"devices,omitempty"`
}

// GPUMode is auto, true or false; YAML booleans and strings both work.
type GPUMode string

// UnmarshalYAML accepts `enabled: true` as well as `enabled: "true"`.
func (m *GPUMode) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want auto, true or false, got %s", describe(n))
	}
	switch strings.ToLower(n.Value) {
	case "auto", "":
		*m = "auto"
	case "true", "yes", "on":
		*m = "true"
	case "false", "no", "off":
		*m = "false"
	default:
		return fmt.Errorf("invalid value %q; want one of auto, true, false", n.Value)
	}
	return nil
}

// Protocols the prober can speak: exactly those with a driver.
func Protocols() []string { return probe.SupportedProtocols() }

// ServerKinds are the model servers whose metrics can be normalised, auto
// first: collector's server-kind table.
func ServerKinds() []string { return collector.ServerKinds() }

// Defaults, in one place so `check-config --print` and docs agree. Config
// applies every one of them at load, so no downstream package needs its own
// default for a configured value: DriverOptions, ServerTargets and
// Settings always carry the effective values.
const (
	DefaultTimeout = 60 * time.Second
	// DefaultStreamIdleTimeout and DefaultMaxResponseBytes take the value
	// probe.NewDriver gives options that leave them unset (drivers built
	// without a config: tests, benchmark harnesses), so that the number
	// is written once and both ways of building a driver agree.
	DefaultStreamIdleTimeout = probe.DefaultStreamIdleTimeout
	DefaultMaxResponseBytes  = probe.DefaultMaxResponseBytes
	DefaultServerMetricsTime = 5 * time.Second
	DefaultObjective         = 0.99
	DefaultMaxTokens         = 128
	DefaultTargetMaxInFlight = 256
	defaultWorkloadName      = "default"
	defaultPrompt            = "Write a short story about a lighthouse keeper."
)

func (c *Config) applyDefaults() {
	if c.GPUs.Enabled == "" {
		c.GPUs.Enabled = "auto"
	}
	if c.Histograms == "" {
		c.Histograms = collector.HistogramsBoth
	}
	if c.Workloads == nil {
		c.Workloads = map[string]*Workload{}
	}
	for _, w := range c.Workloads {
		w.applyDefaults()
	}
	for _, t := range c.Targets {
		c.applyTargetDefaults(t)
	}
	c.applyFleetDefaults()
}

// applyTargetDefaults fills in t (a target or a module's template).
func (c *Config) applyTargetDefaults(t *Target) {
	if t == nil {
		return
	}
	if t.Timeout == 0 {
		t.Timeout = model.Duration(DefaultTimeout)
	}
	if t.StreamIdleTimeout == 0 {
		t.StreamIdleTimeout = model.Duration(DefaultStreamIdleTimeout)
	}
	if t.MaxResponseBytes == 0 {
		t.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if t.MaxInFlight == 0 {
		t.MaxInFlight = DefaultTargetMaxInFlight
	}
	if t.Histograms == "" {
		t.Histograms = c.Histograms
	}
	if t.Metrics == nil {
		t.Metrics = c.Metrics
	}
	if t.ServerLoadReport == "" {
		t.ServerLoadReport = ServerLoadReportAuto
	}
	if protocolIs(t.Protocol, isOllama) {
		if t.Ollama == nil {
			t.Ollama = &Ollama{}
		}
		if t.Ollama.API == "" {
			t.Ollama.API = probe.OllamaAPIChat
		}
	}
	if t.Embedding != nil && t.Embedding.Inputs == 0 {
		t.Embedding.Inputs = 1
	}
	t.DiscoverModels.applyDefaults()
	if sm := t.ServerMetrics; sm != nil {
		if sm.Kind == "" {
			sm.Kind = collector.KindAuto
		}
		if sm.Timeout == 0 {
			sm.Timeout = model.Duration(DefaultServerMetricsTime)
		}
	}
	for _, p := range t.Probes {
		if p == nil {
			continue
		}
		if p.Stream == nil {
			// Streamed where the protocol can stream: only streams
			// have TTFT and ITL.
			proto, known := probe.LookupProtocol(t.Protocol)
			p.Stream = new(proto.Streams || !known)
		}
		if p.Timeout == 0 {
			p.Timeout = t.Timeout
		}
		if p.Metrics == nil {
			p.Metrics = t.Metrics
		}
		if p.Workload == "" {
			p.Workload = defaultWorkloadName
			if _, ok := c.Workloads[defaultWorkloadName]; !ok {
				w := &Workload{}
				w.applyDefaults()
				c.Workloads[defaultWorkloadName] = w
			}
		}
		if p.SLO != nil && p.SLO.Objective == 0 {
			p.SLO.Objective = DefaultObjective
		}
		p.Schedule.applyDefaults(time.Duration(p.Timeout))
		p.Cancel.applyDefaults()
	}
}

func (w *Workload) applyDefaults() {
	if w == nil {
		return
	}
	w.Prompts.applyDefaults()
	w.MaxTokens.applyDefaults()
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	headerRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

const nameRule = "use 1-64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"

func (c *Config) validate(d *decoder) {
	if len(c.Targets) == 0 && len(c.Modules) == 0 {
		d.at("targets", "no targets configured; add at least one under targets:, or modules: for /probe and target_discovery:")
	}
	validateHistograms(d, "histograms", c.Histograms)
	validateMetrics(d, "metrics", c.Metrics)
	targetNames := map[string]int{}
	for i, t := range c.Targets {
		path := fmt.Sprintf("targets[%d]", i)
		if t == nil {
			d.at(path, "empty target")
			continue
		}
		if !nameRE.MatchString(t.Name) {
			d.at(path+".name", "invalid target name %q; %s", t.Name, nameRule)
		} else if prev, dup := targetNames[t.Name]; dup {
			d.at(path+".name", "duplicate target name %q (also targets[%d]); target names must be unique", t.Name, prev)
		} else {
			targetNames[t.Name] = i
		}
		c.validateTarget(d, path, t)
	}
	// Sorted, so errors come in the same order at every load.
	for _, name := range sortedNames(c.Workloads) {
		c.Workloads[name].validate(d, join("workloads", name))
	}
	for i, dev := range c.GPUs.Devices {
		if dev < 0 {
			d.at(fmt.Sprintf("gpus.devices[%d]", i), "GPU index %d is negative", dev)
		}
	}
	c.validateFleet(d)
}

func (c *Config) validateTarget(d *decoder, path string, t *Target) {
	proto, known := probe.LookupProtocol(t.Protocol)
	if !known {
		if t.Protocol == "" {
			d.at(path+".protocol", "missing protocol; want one of %s", strings.Join(Protocols(), ", "))
		} else {
			d.at(path+".protocol", "unknown protocol %q; want one of %s", t.Protocol, strings.Join(Protocols(), ", "))
		}
	}
	validateEndpoint(d, path, t, proto, known)
	if t.DiscoverModels != nil {
		// validateDiscovery: the models come from the server.
	} else if !validLabelValue(t.Model) {
		if t.Model == "" {
			d.at(path+".model", "missing model; set the model name the server serves (see its /v1/models)")
		} else {
			d.at(path+".model", "invalid model %q; use at most 256 printable UTF-8 characters", t.Model)
		}
	}
	if t.APIKeyFile != "" && t.APIKeyEnv != "" {
		d.at(path+".api_key_env", "set either api_key_file or api_key_env, not both")
	}
	for name := range t.Headers {
		if !headerRE.MatchString(name) {
			d.at(join(path+".headers", name), "invalid HTTP header name %q", name)
		} else if http.CanonicalHeaderKey(name) == "Authorization" && (t.APIKeyFile != "" || t.APIKeyEnv != "") {
			d.at(join(path+".headers", name), "Authorization is set from the API key; remove this header or the api_key_* setting")
		}
	}
	if t.FollowRedirects && known && proto.Endpoint != probe.EndpointURL {
		d.at(path+".follow_redirects", "applies to HTTP protocols only; gRPC has no redirects")
	}
	validateTrustedOrigins(d, path+".follow_redirects_trusted_origins", t.FollowRedirectsTrustedOrigins)
	validateServerLoadReport(d, path, t, proto, known)
	validateHTTPClient(d, path, t, proto, known)
	positive(d, path+".timeout", t.Timeout)
	positive(d, path+".stream_idle_timeout", t.StreamIdleTimeout)
	if t.MaxResponseBytes < 0 {
		d.at(path+".max_response_bytes", "must be positive, got %d", t.MaxResponseBytes)
	}
	if t.MaxInFlight < 1 || t.MaxInFlight > maxInFlightLimit {
		d.at(path+".max_in_flight", "want 1 to %d, got %d", maxInFlightLimit, t.MaxInFlight)
	}
	if t.Histograms != c.Histograms { // an inherited value was checked at the top level
		validateHistograms(d, path+".histograms", t.Histograms)
	}
	if t.Metrics != c.Metrics { // likewise
		validateMetrics(d, path+".metrics", t.Metrics)
	}
	validateTriton(d, path, t)
	validatePooling(d, path, t)
	validateDiscovery(d, path, t, proto, known)
	if o := t.Ollama; o != nil {
		if !protocolIs(t.Protocol, isOllama) {
			d.at(path+".ollama", "ollama settings apply to %s only, not %s", protocolNames(isOllama), t.Protocol)
		} else if !slices.Contains(probe.OllamaAPIs(), o.API) {
			d.at(path+".ollama.api", "unknown ollama api %q; want one of %s", o.API, strings.Join(probe.OllamaAPIs(), ", "))
		}
	}
	t.OTLPTraces.validate(d, path+".otlp_traces")
	if sm := t.ServerMetrics; sm != nil {
		validateHTTPURL(d, path+".server_metrics.url", sm.URL)
		if !slices.Contains(ServerKinds(), sm.Kind) {
			d.at(path+".server_metrics.kind", "unknown server kind %q; want one of %s", sm.Kind, strings.Join(ServerKinds(), ", "))
		}
		positive(d, path+".server_metrics.timeout", sm.Timeout)
	}
	if len(t.Probes) == 0 {
		d.at(path+".probes", "target %q has no probes; add at least one under probes:", t.Name)
	}
	probeNames := map[string]int{}
	for j, p := range t.Probes {
		pp := fmt.Sprintf("%s.probes[%d]", path, j)
		if p == nil {
			d.at(pp, "empty probe")
			continue
		}
		if !nameRE.MatchString(p.Name) {
			d.at(pp+".name", "invalid probe name %q; %s", p.Name, nameRule)
		} else if prev, dup := probeNames[p.Name]; dup {
			d.at(pp+".name", "duplicate probe name %q (also %s.probes[%d]); probe names must be unique within a target", p.Name, path, prev)
		} else {
			probeNames[p.Name] = j
		}
		if _, ok := c.Workloads[p.Workload]; !ok {
			d.at(pp+".workload", "unknown workload %q; define it under workloads: (have: %s)", p.Workload, strings.Join(sortedNames(c.Workloads), ", "))
		}
		if known && !proto.Streams && p.Streaming() {
			d.at(pp+".stream", "protocol %s cannot stream; set stream: false", t.Protocol)
		}
		p.Schedule.validate(d, pp+".schedule", t.MaxInFlight)
		positive(d, pp+".timeout", p.Timeout)
		if p.Metrics != t.Metrics { // an inherited value was checked with the target
			validateMetrics(d, pp+".metrics", p.Metrics)
		}
		p.validateAssert(d, pp, t.Protocol)
		p.validateCancel(d, pp, t, c.Workloads[p.Workload])
		p.validateSequence(d, pp, t.Protocol)
		if s := p.SLO; s != nil {
			if s.TTFT == 0 && s.TPOT == 0 {
				d.at(pp+".slo", "an SLO needs a ttft or tpot threshold")
			}
			if s.TTFT < 0 {
				d.at(pp+".slo.ttft", "must be positive")
			}
			if s.TPOT < 0 {
				d.at(pp+".slo.tpot", "must be positive")
			}
			if !(s.Objective > 0 && s.Objective < 1) || math.IsNaN(s.Objective) {
				d.at(pp+".slo.objective", "objective %v must be a ratio between 0 and 1 exclusive, e.g. 0.99", s.Objective)
			}
		}
	}
}

func isOllama(p probe.Protocol) bool { return p.Settings == probe.SettingsOllama }

// protocolIs reports whether name is a protocol of the table whose row
// passes keep.
func protocolIs(name string, keep func(probe.Protocol) bool) bool {
	p, ok := probe.LookupProtocol(name)
	return ok && keep(p)
}

// protocolsWhere lists the protocols of the table whose rows pass keep.
func protocolsWhere(keep func(probe.Protocol) bool) []string {
	var names []string
	for _, p := range probe.Protocols() {
		if keep(p) {
			names = append(names, p.Name)
		}
	}
	return names
}

// protocolNames is protocolsWhere for messages: "protocol ollama",
// "protocols triton_generate and triton_grpc".
func protocolNames(keep func(probe.Protocol) bool) string {
	names := protocolsWhere(keep)
	if len(names) == 1 {
		return "protocol " + names[0]
	}
	return "protocols " + joinAnd(names)
}

// joinAnd joins words as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// validateEndpoint checks that the target gives the endpoint its protocol
// takes (the protocol table's url or address) and that it is well formed.
// An unknown protocol is reported on its own; then only the form is checked.
func validateEndpoint(d *decoder, path string, t *Target, proto probe.Protocol, known bool) {
	want := probe.EndpointURL
	if known {
		want = proto.Endpoint
	}
	switch {
	case t.URL != "" && t.Address != "":
		d.at(path+".address", "set either url (HTTP protocols) or address (gRPC host:port), not both")
	case t.URL != "" && want == probe.EndpointAddress:
		d.at(path+".url", "protocol %s talks %s; set address: host:port (e.g. localhost:%d) instead of url",
			t.Protocol, proto.Endpoint.Transport(), proto.DefaultPort)
	case t.URL != "":
		validateHTTPURL(d, path+".url", t.URL)
	case t.Address != "" && known && want == probe.EndpointURL:
		// Suggest the host and port given, when there are both.
		hostPort := t.Address
		if _, port, err := net.SplitHostPort(hostPort); err != nil || port == "" {
			host := "localhost"
			if !strings.ContainsAny(t.Address, ":/ \t") {
				host = t.Address
			}
			hostPort = net.JoinHostPort(host, strconv.Itoa(proto.DefaultPort))
		}
		d.at(path+".address", "protocol %s talks %s; set url: http://%s instead of address", t.Protocol, proto.Endpoint.Transport(), hostPort)
	case t.Address != "":
		if _, port, err := net.SplitHostPort(t.Address); err != nil || port == "" {
			d.at(path+".address", "invalid address %q; want host:port", t.Address)
		}
	case want == probe.EndpointAddress:
		d.at(path, "missing address; set address: host:port of %s's %s port (e.g. localhost:%d)",
			proto.Server, proto.Endpoint.Transport(), proto.DefaultPort)
	default:
		d.at(path, "missing url; set url: http://host:port of the server")
	}
}

func (w *Workload) validate(d *decoder, path string) {
	if w == nil {
		d.at(path, "empty workload")
		return
	}
	w.Prompts.validate(d, path+".prompts")
	w.MaxTokens.validate(d, path+".max_tokens")
	if w.MinTokens < 0 || w.MinTokens > w.MaxTokens.Mean {
		d.at(path+".min_tokens", "min_tokens %d must be between 0 and max_tokens (%d)", w.MinTokens, w.MaxTokens.Mean)
	}
	if t := w.Temperature; t != nil && (*t < 0 || *t > 2 || math.IsNaN(*t)) {
		d.at(path+".temperature", "want 0 to 2, got %v", *t)
	}
	if p := w.TopP; p != nil && (*p <= 0 || *p > 1 || math.IsNaN(*p)) {
		d.at(path+".top_p", "want more than 0 and at most 1, got %v", *p)
	}
}

func validateHTTPURL(d *decoder, path, raw string) {
	if raw == "" {
		d.at(path, "missing url")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		d.at(path, "invalid URL %q: %v", redact.Default().URL(raw), redact.Default().Error(err))
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		d.at(path, "URL %q must use http or https", redact.Default().URL(raw))
		return
	}
	if u.Host == "" {
		d.at(path, "URL %q has no host", redact.Default().URL(raw))
	}
	if u.User != nil {
		d.at(path, "URL %q carries credentials, which would show in logs and pages; %s", redact.Default().URL(raw), credentialAdvice(path))
	}
}

// credentialAdvice says where credentials go instead of the URL at path:
// each kind of URL has its own way.
func credentialAdvice(path string) string {
	switch {
	case strings.HasPrefix(path, "remote_write"), strings.Contains(path, "http_sd_configs"):
		return "use basic_auth with password_file, or authorization with credentials_file, in the same entry"
	case strings.HasSuffix(path, ".oauth2.token_url"):
		return "use client_id and client_secret_file instead"
	case strings.HasSuffix(path, ".otlp_traces.endpoint"):
		return "send them with otlp_traces.headers instead"
	case strings.HasSuffix(path, ".server_metrics.url"):
		return "server_metrics sends no credentials; expose the metrics without authentication, or on a network only the prober reaches"
	case strings.HasSuffix(path, ".discover_models.url"):
		return "the target's api_key_file (or api_key_env) and headers are sent with the model list request"
	default:
		return "use api_key_file (or api_key_env) instead"
	}
}

// validateTrustedOrigins checks follow_redirects_trusted_origins: each
// an http(s) origin, nothing more, so the trust given is no wider than
// what the user wrote.
func validateTrustedOrigins(d *decoder, path string, origins []string) {
	for i, o := range origins {
		p := fmt.Sprintf("%s[%d]", path, i)
		u, err := url.Parse(o)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			d.at(p, "origin %q must be scheme://host[:port] with http or https", redact.Default().URL(o))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
			d.at(p, "origin %q must be scheme://host[:port] only: no credentials, path, query or fragment", redact.Default().URL(o))
		}
	}
}

func positive(d *decoder, path string, v model.Duration) {
	if v < 0 {
		d.at(path, "must be positive, got %s", v)
	}
}

// validLabelValue keeps label values printable and bounded: they end up in
// every series of the target and in dashboards.
func validLabelValue(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func sortedNames(m map[string]*Workload) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// resolveSecrets reads API keys; paths are relative to the config file.
func (c *Config) resolveSecrets(d *decoder, dir string, getenv func(string) string) {
	c.shareSecretParams()
	for i, t := range c.Targets {
		resolveTargetSecrets(d, fmt.Sprintf("targets[%d]", i), dir, t, getenv)
	}
	c.resolveFleet(d, dir, getenv)
}

// resolveTargetSecrets reads t's API key and resolves its relative paths.
func resolveTargetSecrets(d *decoder, path, dir string, t *Target, getenv func(string) string) {
	if t == nil {
		return
	}
	switch {
	case t.APIKeyFile != "":
		f := t.APIKeyFile
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		b, err := readSecretFile(f, "API key file")
		if err != nil {
			d.at(path+".api_key_file", "cannot read API key: %v", err)
			return
		}
		key := string(bytes.TrimSpace(b))
		if key == "" {
			d.at(path+".api_key_file", "API key file %s is empty", f)
			return
		}
		t.APIKey = promconfig.Secret(key)
	case t.APIKeyEnv != "":
		key := strings.TrimSpace(getenv(t.APIKeyEnv))
		if key == "" {
			d.at(path+".api_key_env", "environment variable %s is not set or empty", t.APIKeyEnv)
			return
		}
		t.APIKey = promconfig.Secret(key)
	}
	if t.TLSConfig.CAFile != "" || t.TLSConfig.CertFile != "" || t.TLSConfig.KeyFile != "" {
		t.TLSConfig.SetDirectory(dir)
	}
	resolveHTTPClient(d, path, dir, t)
}

// shareSecretParams gives every target and module secret_query_params,
// which the drivers need to redact their errors.
func (c *Config) shareSecretParams() {
	for _, t := range c.Targets {
		if t != nil {
			t.secretParams = c.SecretQueryParams
		}
	}
	for _, m := range c.Modules {
		if m != nil {
			m.secretParams = c.SecretQueryParams
		}
	}
}

// Load reads, decodes, defaults, validates and resolves the config file.
func Load(path string) (*Config, error) {
	b, err := readConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(b, path, filepath.Dir(path), os.Getenv)
}

// Parse is Load without the file system access for the config itself. name
// is used in error messages; dir resolves relative paths in the config.
func Parse(b []byte, name, dir string, getenv func(string) string) (*Config, error) {
	d := &decoder{file: name, positions: map[string]*yaml.Node{}}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &Error{File: name, Line: yamlErrorLine(err), Msg: "invalid YAML: " + cleanYAMLError(err)}
	}
	cfg := &Config{}
	if root.Kind == 0 || len(root.Content) == 0 {
		d.errorf(nil, "", "the file is empty; it needs at least a targets: list")
		return nil, d.err()
	}
	d.decode(&root, reflectValue(cfg), "")
	if err := d.err(); err != nil {
		return nil, err
	}
	cfg.refuseWrittenZeros(d)
	cfg.applyDefaults()
	cfg.validate(d)
	if err := d.err(); err != nil {
		return nil, err
	}
	cfg.resolveTriton(d)
	cfg.resolveSecrets(d, dir, getenv)
	cfg.loadPromptFiles(d, dir)
	if err := d.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlErrorLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// Marshal renders the effective config; secrets show as <secret>.
func (c *Config) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c.redacted()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// The structure masked what it knows to be secret; the policy masks
	// what hides in free text: a URL's userinfo or secret query
	// parameters, in any URL of any section.
	return []byte(c.Policy().String(buf.String())), nil
}

// Policy is what is secret in outputs about this configuration: the
// default patterns and query parameters plus secret_query_params.
func (c *Config) Policy() *redact.Policy {
	return redact.New(c.SecretQueryParams)
}

// redacted is a copy of c for printing: every configured header value
// becomes <secret>, as API keys do (a header is how a credential is sent
// when the server wants its own).
func (c *Config) redacted() *Config {
	out := *c
	out.Targets = make([]*Target, len(c.Targets))
	for i, t := range c.Targets {
		ct := *t
		if len(t.Headers) > 0 {
			ct.Headers = make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				if v != "" {
					v = redact.Mask
				}
				ct.Headers[k] = v
			}
		}
		ct = printableHTTPClient(ct)
		out.Targets[i] = &ct
	}
	return &out
}

// redactedMarker is what a printed configuration shows in place of a
// secret: promconfig.Secret's own marshalled form.
const redactedMarker = "<secret>"

// printableHTTPClient returns t with follow_redirects in one place: with
// an http_client_config the target's short form is merged into the
// block's (httpClientOptions), and printing both would make the output
// conflict with itself when it is loaded again.
func printableHTTPClient(t Target) Target {
	if t.HTTPClientConfig == nil {
		return t
	}
	h := *t.HTTPClientConfig
	h.FollowRedirects = h.FollowRedirects || t.FollowRedirects
	t.HTTPClientConfig = &h
	t.FollowRedirects = false
	return t
}

// DriverOptions is what a probe driver needs to know about the target: the
// one conversion from configuration to the probe package's terms. It copies
// what the load resolved (defaults, secrets, the Triton preset), so it
// cannot fail; call it on targets of a loaded Config.
func (t *Target) DriverOptions() probe.TargetOptions {
	var ollamaAPI string
	if t.Ollama != nil {
		ollamaAPI = t.Ollama.API
	}
	o := probe.TargetOptions{
		OllamaAPI:             ollamaAPI,
		Name:                  t.Name,
		URL:                   t.URL,
		Address:               t.Address,
		Model:                 t.Model,
		Headers:               t.Headers,
		BearerToken:           string(t.APIKey),
		SecretQueryParams:     slices.Clone(t.secretParams),
		NewConnectionPerProbe: t.NewConnectionPerProbe,
		ServerLoadReport:      t.serverLoadReport(),
		StreamIdleTimeout:     time.Duration(t.StreamIdleTimeout),
		MaxResponseBytes:      t.MaxResponseBytes,
		Triton:                t.tritonOptions(),
		Pooling:               t.poolingOptions(),
	}
	// TLS, redirects, proxy and authentication, merged from the target's
	// short forms and http_client_config.
	t.httpClientOptions(&o)
	return o
}

// server_load_report values.
const (
	ServerLoadReportAuto = "auto"
	ServerLoadReportOn   = "on"
	ServerLoadReportOff  = "off"
)

// ServerLoadReports lists the server_load_report values.
func ServerLoadReports() []string {
	return []string{ServerLoadReportAuto, ServerLoadReportOn, ServerLoadReportOff}
}

// validateServerLoadReport checks server_load_report: a known value, and
// on only where the request is HTTP (the report is an HTTP header).
func validateServerLoadReport(d *decoder, path string, t *Target, proto probe.Protocol, known bool) {
	switch t.ServerLoadReport {
	case ServerLoadReportAuto, ServerLoadReportOff, "":
	case ServerLoadReportOn:
		if known && proto.Endpoint != probe.EndpointURL {
			d.at(path+".server_load_report", "applies to HTTP protocols only; the load report is an HTTP header; remove it or set off")
		}
	default:
		d.at(path+".server_load_report", "unknown value %q; want one of %s", t.ServerLoadReport, strings.Join(ServerLoadReports(), ", "))
	}
}

// serverLoadReport is whether probes of t ask for the server's load:
// auto asks on the OpenAI protocols, which vLLM serves.
func (t *Target) serverLoadReport() bool {
	switch t.ServerLoadReport {
	case ServerLoadReportOn:
		return true
	case ServerLoadReportOff:
		return false
	}
	return t.Protocol == probe.ProtocolOpenAIChat || t.Protocol == probe.ProtocolOpenAICompletions
}

// tritonOptions is a copy of the resolved Triton options, so that every
// driver gets its own input and output lists, as when they were built per
// call.
func (t *Target) tritonOptions() probe.TritonOptions {
	o := t.triton
	o.Inputs = slices.Clone(o.Inputs)
	o.Outputs = slices.Clone(o.Outputs)
	return o
}

// ServerTargets is what the model-server collector scrapes: the
// server_metrics of every target that has them, in target order. Meant for
// SafeConfig.OnChange with collector.ServerMetrics.SetTargets.
func (c *Config) ServerTargets() []collector.ServerTarget {
	var ts []collector.ServerTarget
	for _, t := range c.Targets {
		if t == nil || t.ServerMetrics == nil {
			continue
		}
		ts = append(ts, collector.ServerTarget{
			Name:      t.Name,
			URL:       t.ServerMetrics.URL,
			Kind:      t.ServerMetrics.Kind,
			Timeout:   time.Duration(t.ServerMetrics.Timeout),
			TLSConfig: t.effectiveTLS(),
		})
	}
	return ts
}

// Settings is the gpus section in the GPU collector's terms, for
// collector.GPUCollector.Apply.
func (g GPUs) Settings() collector.GPUSettings {
	mode := collector.GPUAuto
	switch g.Enabled {
	case "true":
		mode = collector.GPUOn
	case "false":
		mode = collector.GPUOff
	}
	return collector.GPUSettings{Mode: mode, Library: g.Library, Devices: slices.Clone(g.Devices)}
}

// validateHistograms checks a histograms: value (defaults applied).
func validateHistograms(d *decoder, path, form string) {
	if !slices.Contains(collector.HistogramForms(), form) {
		d.at(path, "unknown histogram form %q; want one of %s", form, strings.Join(collector.HistogramForms(), ", "))
	}
}

// CollectorSLO is the probe's SLO in the probe metrics' terms (the zero
// SLO when the probe declares none), for collector.ProbeSeries.
func (p *Probe) CollectorSLO() collector.SLO {
	if p.SLO == nil {
		return collector.SLO{}
	}
	return collector.SLO{TTFT: time.Duration(p.SLO.TTFT), TPOT: time.Duration(p.SLO.TPOT), Objective: p.SLO.Objective}
}
