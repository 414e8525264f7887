package config

import (
	"errors"
	"strings"
	"testing"
)

const fleetBase = `
modules:
  chat:
    protocol: openai_chat
    model: m
    allowed_targets: 'http://10\.0\.0\.[0-9]+:8000'
`

func parseFleet(t testing.TB, text string) (*Config, error) {
	t.Helper()
	return Parse([]byte(text), "f.yml", t.TempDir(), func(string) string { return "" })
}

func TestFleetSections(t *testing.T) {
	cfg, err := parseFleet(t, fleetBase+`
target_discovery:
  - module: chat
    file_sd_configs: [{files: [sd/*.json]}]
    http_sd_configs: [{url: 'http://sd:8080/targets', authorization: {credentials: s3cr3t-tok}}]
remote_write:
  - url: http://rw:9090/api/v1/write
    bearer_token: s3cr3t-xyz
    queue_config: {capacity: 500}
external_labels: {location: eu}
`)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Modules["chat"]
	if len(m.Probes) != 1 || m.Probes[0].Name != "default" || m.Timeout == 0 {
		t.Errorf("module defaults not applied: %+v", m.Probes)
	}
	rw := cfg.RemoteWrite[0]
	if rw.QueueConfig.MaxSamplesPerSend != 500 || rw.HTTPClientConfig.Authorization == nil {
		t.Errorf("remote_write: %+v", rw)
	}
	if got := cfg.TargetDiscovery[0].FileSDConfigs[0].Files[0]; !strings.HasSuffix(got, "/sd/*.json") || !strings.HasPrefix(got, "/") {
		t.Errorf("file_sd path not made absolute: %s", got)
	}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cr3t") {
		t.Errorf("secrets printed:\n%s", out)
	}

	for _, tc := range []struct{ endpoint, want string }{
		{"10.0.0.1:8000", "http://10.0.0.1:8000"},
		{"http://10.0.0.2:8000", "http://10.0.0.2:8000"},
	} {
		tg, err := m.Instantiate(DiscoveredName("chat", tc.endpoint), tc.endpoint)
		if err != nil || tg.URL != tc.want || tg.Model != "m" {
			t.Errorf("Instantiate(%s): %+v, %v", tc.endpoint, tg, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:9000", "http://evil:8000", "http://10.0.0.1:8000/../x", "http://u:p@10.0.0.1:8000"} {
		if _, err := m.Instantiate("x", bad); err == nil {
			t.Errorf("Instantiate(%s) accepted", bad)
		}
	}
	var re *RefusedError
	if _, err := m.Instantiate("x", "http://evil:8000"); !errors.As(err, &re) {
		t.Errorf("want a RefusedError, got %v", err)
	}
}

func TestFleetErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"modules:\n  chat: {protocol: openai_chat, model: m}\n", "f.yml:2:3: modules.chat.allowed_targets: missing allowed_targets"},
		{"modules:\n  chat: {protocol: openai_chat, model: m, allowed_targets: '('}\n", "modules.chat.allowed_targets: invalid regular expression"},
		{"modules:\n  chat: {protocol: openai_chat, model: m, url: 'http://x', allowed_targets: x}\n", `f.yml:2:43: modules.chat.url: "url" is not supported`},
		{"modules:\n  chat: {protocol: nope, model: m, allowed_targets: x}\n", `modules.chat.protocol: unknown protocol "nope"`},
		{fleetBase + "target_discovery:\n  - module: other\n    file_sd_configs: [{files: [a.json]}]\n", `f.yml:8:5: target_discovery[0].module: unknown module "other"`},
		{fleetBase + "target_discovery:\n  - module: chat\n", "target_discovery[0]: no discovery configured"},
		{fleetBase + "target_discovery:\n  - module: chat\n    file_sd_configs: [{files: [a.json], refresh_interval: 10ms}]\n", "refresh_interval: want at least 1s"},
		{fleetBase + "remote_write:\n  - url: 'ftp://x'\n", "remote_write[0].url: URL \"ftp://x\" must use http or https"},
		{fleetBase + "remote_write:\n  - {url: 'http://x', queue_config: {capacity: 10, max_samples_per_send: 50}}\n", "max_samples_per_send: want 1 to capacity"},
		{fleetBase + "external_labels: {__x: y}\n", "external_labels.__x: invalid label name"},
		// 0s would otherwise become the 15s default without a word.
		{fleetBase + "remote_write:\n  - url: 'http://x'\n    interval: 0s\n", "f.yml:9:5: remote_write[0].interval: want at least 1s, got 0s; leave interval out for the default 15s"},
		{"targets: []\n", "no targets configured"},
	} {
		_, err := parseFleet(t, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\ngot  %v\nwant %s", tc.text, err, tc.want)
		}
	}
}

func TestKubernetesSD(t *testing.T) {
	cfg, err := parseFleet(t, fleetBase+`
target_discovery:
  - module: chat
    kubernetes_sd_configs:
      - {role: endpointslice, namespaces: {names: [llm, llm-canary]}, service: vllm, label_selector: 'app=vllm,tier!=canary', port: http}
      - {role: endpointslice, label_selector: app=tgi, port: 8080, scheme: https}
`)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.TargetDiscovery[0].KubernetesSDConfigs
	if got, want := k[0].Selector().String(), "app=vllm,kubernetes.io/service-name=vllm,tier!=canary"; got != want {
		t.Errorf("selector %q, want %q", got, want)
	}
	if n, ok := k[0].PortNumber(); ok {
		t.Errorf("port name http read as number %d", n)
	}
	if n, ok := k[1].PortNumber(); !ok || n != 8080 {
		t.Errorf("port 8080 read as %d, %v", n, ok)
	}
	if got := k[1].Selector().String(); got != "app=tgi" {
		t.Errorf("selector %q", got)
	}

	_, err = parseFleet(t, fleetBase+`
target_discovery:
  - module: chat
    kubernetes_sd_configs: [{role: endpointslice, service: vllm, port: http, kubeconfig_file: missing.yaml}]
`)
	if want := "f.yml:10:78: target_discovery[0].kubernetes_sd_configs[0].kubeconfig_file: cannot read kubeconfig_file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %s", err, want)
	}
}
