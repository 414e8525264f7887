package discovery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"

	"github.com/llm-prober/llm-prober/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseGroups(t *testing.T) {
	for _, tc := range []struct {
		in      string
		yaml    bool
		want    []string
		wantErr string
	}{
		{in: `[{"targets": ["a:1", "b:2"], "labels": {"x": "y"}}, {"targets": ["a:1"]}]`, want: []string{"a:1", "b:2"}},
		{in: `[{"targets": ["a:1"], "labels": {"__scheme__": "https"}}]`, want: []string{"https://a:1"}},
		{in: "- targets: [a:1]\n  labels: {x: y}\n", yaml: true, want: []string{"a:1"}},
		{in: `[]`, want: nil},
		{in: `{"targets": []}`, wantErr: "invalid JSON"},
		{in: `[{"targetz": []}]`, wantErr: "unknown field"},
		{in: `[{"targets": [""]}]`, wantErr: "empty target"},
		{in: `[{"targets": ["a b"]}]`, wantErr: "spaces"},
		{in: `[{"targets": ["a"], "labels": {"__scheme__": "ftp"}}]`, wantErr: "__scheme__"},
	} {
		g, err := ParseGroups([]byte(tc.in), tc.yaml)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := Endpoints(g); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Files and http_sd answers are untrusted: nothing panics, and what is
// accepted is bounded.
func FuzzParseGroups(f *testing.F) {
	f.Add([]byte(`[{"targets": ["a:1"], "labels": {"__scheme__": "https"}}]`), false)
	f.Add([]byte("- targets: [a:1]\n"), true)
	f.Add([]byte(`[{"targets": ["\u0000"]}]`), false)
	f.Fuzz(func(t *testing.T, b []byte, isYAML bool) {
		g, err := ParseGroups(b, isYAML)
		if err != nil {
			return
		}
		eps := Endpoints(g)
		if len(eps) > MaxSourceTargets {
			t.Fatalf("%d endpoints accepted", len(eps))
		}
		for _, e := range eps {
			if e == "" || len(e) > maxEndpointLen+len("https://") {
				t.Fatalf("endpoint %q accepted", e)
			}
		}
	})
}

func loadConfig(t *testing.T, dir, text string) *config.Config {
	t.Helper()
	p := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// An http_sd source that starts failing keeps its last good list, and
// says so in its metrics; refused endpoints are left out of Expand.
func TestHTTPSDKeepsLastGood(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"targets": ["10.0.0.1:8000", "10.0.0.2:8000", "192.168.0.1:8000"]}]`))
	}))
	defer srv.Close()
	cfg := loadConfig(t, t.TempDir(), `
targets:
  - {name: static, protocol: openai_chat, url: 'http://s:1', model: m, probes: [{name: p, schedule: {every: 15s}}]}
modules:
  chat: {protocol: openai_chat, model: m, allowed_targets: 'http://10\.0\.0\.[0-9]+:8000'}
target_discovery:
  - module: chat
    http_sd_configs: [{url: '`+srv.URL+`', refresh_interval: 1s}]
`)
	reg := prometheus.NewRegistry()
	var changes atomic.Int32
	m := NewManager(promslog.NewNopLogger(), reg, func() { changes.Add(1) })
	defer m.Stop()
	m.Apply(cfg)
	names := func() []string {
		var n []string
		for _, tg := range m.Expand(cfg).Targets {
			n = append(n, tg.Name+"="+tg.Endpoint())
		}
		return n
	}
	want := []string{"static=http://s:1", "chat_10.0.0.1:8000=http://10.0.0.1:8000", "chat_10.0.0.2:8000=http://10.0.0.2:8000"}
	if got := names(); !slices.Equal(got, want) {
		t.Fatalf("Expand: %q, want %q", got, want)
	}
	if len(cfg.Targets) != 1 {
		t.Fatal("Expand changed the shared config")
	}

	fail.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.up.WithLabelValues("target_discovery[0].http_sd_configs[0]", "http")) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("source never reported down")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("after failure: %q, want the last good %q", got, want)
	}
	if n := testutil.ToFloat64(m.failures.WithLabelValues("target_discovery[0].http_sd_configs[0]", "http")); n < 1 {
		t.Errorf("failures = %v", n)
	}
	if changes.Load() != 0 {
		t.Errorf("%d changes reported for an unchanged list", changes.Load())
	}

	// A reload with the same discovery keeps the source; one without
	// removes it and its series.
	m.Apply(cfg)
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("after an unchanged reload: %q", got)
	}
	cfg2 := *cfg
	cfg2.TargetDiscovery = nil
	m.Apply(&cfg2)
	if n := testutil.CollectAndCount(m.up); n != 0 {
		t.Errorf("%d up series after the source went", n)
	}
}

// llm_prober_discovered_target_info has a series for every target Expand
// created, with its module, and loses it when the target goes: its
// endpoint leaves the source's list, or the source leaves the config. A
// configured target of the same name is not a discovered one.
func TestDiscoveredTargetInfo(t *testing.T) {
	dir := t.TempDir()
	sd := filepath.Join(dir, "targets.json")
	write := func(body string) {
		if err := os.WriteFile(sd, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"targets": ["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]}]`)
	cfg := loadConfig(t, dir, `
targets:
  - {name: chat_10.0.0.3:8000, protocol: openai_chat, url: 'http://s:1', model: m, probes: [{name: p, schedule: {every: 15s}}]}
modules:
  chat: {protocol: openai_chat, model: m, allowed_targets: '.*'}
target_discovery:
  - module: chat
    file_sd_configs: [{files: ['`+sd+`'], refresh_interval: 1h}]
`)
	reg := prometheus.NewPedanticRegistry()
	m := NewManager(promslog.NewNopLogger(), reg, func() {})
	defer m.Stop()
	m.Apply(cfg)

	const head = `
# HELP llm_prober_discovered_target_info A target that target discovery created, probed with the module's probes; always 1, gone with the target.
# TYPE llm_prober_discovered_target_info gauge
`
	check := func(when, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_prober_discovered_target_info"); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	m.Expand(cfg)
	check("first expansion", head+`llm_prober_discovered_target_info{module="chat",target="chat_10.0.0.1:8000"} 1
llm_prober_discovered_target_info{module="chat",target="chat_10.0.0.2:8000"} 1
`)

	write(`[{"targets": ["10.0.0.2:8000"]}]`)
	m.mu.Lock()
	src := m.sources[0]
	m.mu.Unlock()
	if !m.refresh(context.Background(), src, time.Second) {
		t.Fatal("the source's list did not change")
	}
	m.Expand(cfg)
	check("after 10.0.0.1 left the list", head+`llm_prober_discovered_target_info{module="chat",target="chat_10.0.0.2:8000"} 1
`)

	cfg2 := *cfg
	cfg2.TargetDiscovery = nil
	m.Apply(&cfg2)
	m.Expand(&cfg2)
	check("after the source left the config", "")
}
