package config

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"
)

func loadHTTPClient(t *testing.T) (*Config, map[string]*Target) {
	t.Helper()
	cfg, err := Load("testdata/good/http-client.yml")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Target{}
	for _, tg := range cfg.Targets {
		byName[tg.Name] = tg
	}
	return cfg, byName
}

// TestHTTPClientConfigDefaults: the prober's defaults, not Prometheus':
// no proxy and no redirects without the block or with an empty one, HTTP/2
// attempted unless enable_http2: false.
func TestHTTPClientConfigDefaults(t *testing.T) {
	_, ts := loadHTTPClient(t)
	for _, name := range []string{"empty-block", "no-block"} {
		o := ts[name].DriverOptions()
		if o.FollowRedirects || o.DisableHTTP2 || o.Proxy.Proxy() != nil || o.Proxy.GetProxyConnectHeader() != nil ||
			o.BasicAuth != nil || o.Authorization != nil || o.OAuth2 != nil {
			t.Errorf("%s: want direct, no redirects, HTTP/2 allowed, no auth: %+v", name, o)
		}
	}
	if h := ts["empty-block"].HTTPClientConfig; h == nil || h.FollowRedirects || !h.EnableHTTP2 {
		t.Errorf("empty block: want follow_redirects false, enable_http2 true: %+v", h)
	}
	if o := ts["no-block"].DriverOptions(); o.BearerToken != "sk-test-abcdef0123456789" {
		t.Errorf("api_key_file no longer the short form: %q", o.BearerToken)
	}
	if o := ts["basic"].DriverOptions(); !o.DisableHTTP2 || !o.FollowRedirects {
		t.Errorf("basic: enable_http2: false and the target's follow_redirects: %+v", o)
	}
	if o := ts["token-file"].DriverOptions(); !o.FollowRedirects || !o.TLS.InsecureSkipVerify {
		t.Errorf("token-file: the block's follow_redirects and the target's tls_config: %+v", o)
	}
}

// TestHTTPClientConfigConversion: DriverOptions carries the block in the
// probe's terms, its files relative to the config file.
func TestHTTPClientConfigConversion(t *testing.T) {
	_, ts := loadHTTPClient(t)
	dir := "testdata/good" // Load resolves against the config file's directory as given
	o := ts["hosted"].DriverOptions()
	proxy := o.Proxy.Proxy()
	if proxy == nil {
		t.Fatal("no proxy function")
	}
	for target, want := range map[string]string{
		"https://api.example.com/v1/chat/completions": "proxy.internal:3128",
		"http://localhost:8000/":                      "",
		"https://tgi.internal/":                       "",
	} {
		req, _ := http.NewRequest("POST", target, nil)
		u, err := proxy(req)
		got := ""
		if u != nil {
			got = u.Host
		}
		if err != nil || got != want {
			t.Errorf("proxy for %s = %q, %v; want %q", target, got, err, want)
		}
	}
	if got := o.Proxy.GetProxyConnectHeader().Get("Proxy-Authorization"); got != "Bearer connect-secret-456" {
		t.Errorf("proxy_connect_header: %q", got)
	}
	if o.OAuth2 == nil || o.OAuth2.ClientSecretFile != filepath.Join(dir, "key.txt") || o.OAuth2.TokenURL != "https://auth.example.com/oauth2/token" ||
		o.OAuth2.EndpointParams["audience"] != "llm" || len(o.OAuth2.Scopes) != 1 {
		t.Errorf("oauth2 not converted, or its file not relative to the config: %+v", o.OAuth2)
	}
	if o.TLS.CAFile != filepath.Join(dir, "ca.pem") || o.TLS.ServerName != "api.example.com" {
		t.Errorf("the block's tls_config is the driver's TLS, files relative to the config: %+v", o.TLS)
	}
	if got := ts["hosted"].effectiveTLS(); got != o.TLS {
		t.Errorf("server_metrics TLS differs from the probes': %+v", got)
	}
	if o.FollowRedirects || o.DisableHTTP2 {
		t.Errorf("hosted: defaults changed: %+v", o)
	}
	a := ts["token-file"].DriverOptions().Authorization
	if a == nil || a.Type != "Token" || a.CredentialsFile != filepath.Join(dir, "key.txt") {
		t.Errorf("authorization: %+v", a)
	}
	if b := ts["basic"].DriverOptions().BasicAuth; b == nil || b.Username != "prober" || b.Password != "inline-password-789" {
		t.Errorf("basic_auth: %+v", b)
	}
	// Each call gets its own copies.
	o.OAuth2.Scopes[0] = "changed"
	if ts["hosted"].HTTPClientConfig.OAuth2.Scopes[0] != "inference" {
		t.Error("DriverOptions shares oauth2 scopes with the config")
	}
}

// TestHTTPClientSecretsPrintRedacted: every secret of the block prints as
// <secret> (or xxxxx inside the proxy URL).
func TestHTTPClientSecretsPrintRedacted(t *testing.T) {
	cfg, _ := loadHTTPClient(t)
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"proxy-pass-123", "connect-secret-456", "inline-password-789", "sk-test-abcdef0123456789", "secrets_digest", "SecretsDigest"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("printed config contains %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"password: <secret>", "- <secret>", "proxy_url: http://prober:xxxxx@proxy.internal:3128", "follow_redirects: false", "enable_http2: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("printed config lacks %q:\n%s", want, out)
		}
	}
}

// TestHTTPClientSecretsChangeFingerprint: an inline secret prints as
// <secret> in JSON too, so the digest is what tells a reload that it
// changed.
func TestHTTPClientSecretsChangeFingerprint(t *testing.T) {
	src := `targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    http_client_config:
      basic_auth: {username: u, password: PASSWORD}
      proxy_url: http://proxy:3128
      proxy_connect_header: {X-Auth: [HEADER]}
    probes: [{name: p, schedule: {every: 1s}}]
`
	jsonOf := func(password, header string) string {
		t.Helper()
		cfg, err := Parse([]byte(strings.NewReplacer("PASSWORD", password, "HEADER", header).Replace(src)), "x.yml", ".", noEnv)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(cfg.Targets[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), password) || strings.Contains(string(b), header) {
			t.Errorf("target JSON carries a secret: %s", b)
		}
		return string(b)
	}
	base := jsonOf("first-password", "first-header")
	if base != jsonOf("first-password", "first-header") {
		t.Error("the same config gives different JSON")
	}
	if base == jsonOf("other-password", "first-header") || base == jsonOf("first-password", "other-header") {
		t.Error("changing an inline secret does not change the target's JSON")
	}
}

// TestInlineFields: the walker decodes HTTPClientConfig's embedded
// ProxyConfig keys at the block's level, and the keys of a library struct
// stay strict.
func TestInlineFields(t *testing.T) {
	var c promconfig.HTTPClientConfig
	fields := yamlFields(reflectValue(&c).Type())
	for _, k := range []string{"proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header", "basic_auth", "tls_config"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("key %s missing: %v", k, fields)
		}
	}
	if _, ok := fields["proxyconfig"]; ok {
		t.Error("the inline struct is a key of its own")
	}
	if idx := fields["proxy_url"]; len(idx) != 2 {
		t.Errorf("proxy_url should be reached through the embedded struct: %v", idx)
	}
}
