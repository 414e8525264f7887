package bench

import (
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/config"
)

// ConfigInfo is the sanitised configuration a run measured: what was
// probed and with what, never a credential. Header values and the API key
// are left out entirely (only whether they were set), because any of them
// may be one.
type ConfigInfo struct {
	ConfigFile     string  `json:"config_file"`
	Target         string  `json:"target"`
	Protocol       string  `json:"protocol"`
	Endpoint       string  `json:"endpoint"`
	Model          string  `json:"model"`
	Probe          string  `json:"probe"`
	Streaming      bool    `json:"streaming"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
	APIKeySet      bool    `json:"api_key_set"`
	// HTTPAuth names how http_client_config authenticates (basic_auth,
	// authorization, oauth2), never with what; empty without.
	HTTPAuth string `json:"http_auth,omitempty"`
	// Proxied is true when http_client_config sends through a proxy.
	Proxied      bool     `json:"proxied,omitempty"`
	HeaderNames  []string `json:"header_names,omitempty"`
	WorkloadName string   `json:"workload_name"`
	// Workload is the workload's effective configuration (as
	// `check-config --print` shows it), with extra_body values replaced
	// by their keys.
	Workload any `json:"workload"`
}

// Describe builds the ConfigInfo of probe pc of target t.
func Describe(configFile string, cfg *config.Config, t *config.Target, pc *config.Probe) ConfigInfo {
	ci := ConfigInfo{
		ConfigFile:     configFile,
		Target:         t.Name,
		Protocol:       t.Protocol,
		Endpoint:       cfg.Policy().URL(t.Endpoint()),
		Model:          t.Model,
		Probe:          pc.Name,
		Streaming:      pc.Streaming(),
		TimeoutSeconds: time.Duration(pc.Timeout).Seconds(),
		APIKeySet:      t.APIKey != "",
		HTTPAuth:       httpAuthKind(t),
		Proxied:        t.HTTPClientConfig != nil && (t.HTTPClientConfig.ProxyURL.URL != nil || t.HTTPClientConfig.ProxyFromEnvironment),
		WorkloadName:   pc.Workload,
	}
	for name := range t.Headers {
		ci.HeaderNames = append(ci.HeaderNames, name)
	}
	slices.Sort(ci.HeaderNames)
	if w := cfg.Workloads[pc.Workload]; w != nil {
		ci.Workload = describeWorkload(w)
	}
	return ci
}

func describeWorkload(w *config.Workload) any {
	shallow := *w
	if len(w.ExtraBody) > 0 {
		keys := map[string]any{}
		for k := range w.ExtraBody {
			keys[k] = "<set>"
		}
		shallow.ExtraBody = keys
	}
	b, err := yaml.Marshal(&shallow)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	var generic map[string]any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return map[string]string{"error": err.Error()}
	}
	return generic
}

// httpAuthKind is which http_client_config authentication t uses.
func httpAuthKind(t *config.Target) string {
	c := t.HTTPClientConfig
	switch {
	case c == nil:
		return ""
	case c.OAuth2 != nil:
		return "oauth2"
	case c.BasicAuth != nil:
		return "basic_auth"
	case c.Authorization != nil || c.BearerToken != "" || c.BearerTokenFile != "":
		return "authorization"
	}
	return ""
}
