package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadConfigsNeverQuoteSecrets: the invalid files plant passwords and
// query tokens named planted-…; no error message may repeat one.
func TestBadConfigsNeverQuoteSecrets(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yml")
	planted := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "planted-") {
			continue
		}
		planted++
		_, err := Load(f)
		if err == nil {
			t.Fatalf("%s loaded", f)
		}
		if strings.Contains(err.Error(), "planted-") {
			t.Errorf("%s: error quotes a planted secret:\n%v", f, err)
		}
	}
	if planted < 2 {
		t.Fatalf("only %d testdata files plant secrets", planted)
	}
}

// TestMarshalRedacts: the printed configuration masks every header value
// (not only those named like credentials), the default and configured
// secret query parameters in every URL, and keeps the rest readable.
func TestMarshalRedacts(t *testing.T) {
	cfg, err := Parse([]byte(`
secret_query_params: [deployment_sig]
targets:
  - name: t
    protocol: openai_chat
    url: http://localhost:8000/v1?api_key=planted-q1&deployment_sig=planted-q2&api-version=2024-06-01
    model: m
    headers: {X-Tenant: planted-h1, X-Auth-Token: planted-h2}
    follow_redirects: true
    follow_redirects_trusted_origins: [https://auth.example:8443]
    server_metrics: {url: "http://localhost:8000/metrics?token=planted-q3", kind: vllm}
    probes: [{name: p, schedule: {every: 1m}}]
`), "inline.yml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, "planted-") {
		t.Errorf("printed configuration leaks:\n%s", out)
	}
	for _, want := range []string{"api-version=2024-06-01", "X-Tenant: <secret>", "https://auth.example:8443"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, out)
		}
	}
	o := cfg.Targets[0].DriverOptions()
	if len(o.TrustedRedirectOrigins) != 1 || len(o.SecretQueryParams) != 1 || o.SecretQueryParams[0] != "deployment_sig" {
		t.Errorf("driver options: trusted %v, secret params %v", o.TrustedRedirectOrigins, o.SecretQueryParams)
	}
}
