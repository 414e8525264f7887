package bench

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"

	"github.com/llm-prober/llm-prober/config"
)

// Describe names what was probed without any value that may be a
// credential: the API key, header values, extra_body values.
func TestDescribeHasNoSecrets(t *testing.T) {
	w := &config.Workload{MaxTokens: config.MaxTokens{Distribution: "constant", Mean: 16}, ExtraBody: map[string]any{"vendor_token": "xb-secret-1"}}
	w.Prompts.Inline = []config.Prompt{{Text: "hello"}}
	cfg := &config.Config{Workloads: map[string]*config.Workload{"w": w}}
	stream := true
	pc := &config.Probe{Name: "p", Workload: "w", Stream: &stream}
	tg := &config.Target{Name: "t", Protocol: "openai_chat", URL: "https://api.example.com/v1", Model: "m",
		APIKey: promconfig.Secret("sk-key-secret-2"), Headers: map[string]string{"X-Api-Key": "hdr-secret-3", "Accept": "x"}, Probes: []*config.Probe{pc}}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as --output writes it
	if err := enc.Encode(Describe("c.yml", cfg, tg, pc)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, secret := range []string{"xb-secret-1", "sk-key-secret-2", "hdr-secret-3"} {
		if strings.Contains(out, secret) {
			t.Errorf("description leaks %s: %s", secret, out)
		}
	}
	for _, want := range []string{`"api_key_set":true`, `"header_names":["Accept","X-Api-Key"]`, `"vendor_token":"<set>"`, `"hello"`, `"endpoint":"https://api.example.com/v1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("description lacks %s: %s", want, out)
		}
	}
}

// An http_client_config says how it authenticates and that it proxies,
// never with what.
func TestDescribeHTTPClientConfig(t *testing.T) {
	w := &config.Workload{MaxTokens: config.MaxTokens{Distribution: "constant", Mean: 16}}
	cfg := &config.Config{Workloads: map[string]*config.Workload{"w": w}}
	pc := &config.Probe{Name: "p", Workload: "w"}
	proxy, err := url.Parse("http://user:proxy-secret-4@proxy:3128")
	if err != nil {
		t.Fatal(err)
	}
	hc := &promconfig.HTTPClientConfig{
		OAuth2:      &promconfig.OAuth2{ClientID: "id", ClientSecret: "oauth-secret-5", TokenURL: "https://auth/token"},
		ProxyConfig: promconfig.ProxyConfig{ProxyURL: promconfig.URL{URL: proxy}},
	}
	tg := &config.Target{Name: "t", Protocol: "openai_chat", URL: "https://api.example.com", Model: "m", HTTPClientConfig: hc, Probes: []*config.Probe{pc}}
	b, err := json.Marshal(Describe("c.yml", cfg, tg, pc))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, secret := range []string{"proxy-secret-4", "oauth-secret-5", "proxy:3128"} {
		if strings.Contains(out, secret) {
			t.Errorf("description leaks %s: %s", secret, out)
		}
	}
	for _, want := range []string{`"http_auth":"oauth2"`, `"proxied":true`, `"api_key_set":false`} {
		if !strings.Contains(out, want) {
			t.Errorf("description lacks %s: %s", want, out)
		}
	}
}
