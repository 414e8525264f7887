package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

const safeTestConfig = `
targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    api_key_file: key
    probes: [{name: p, schedule: {every: 15s}}]
`

func TestSafeConfigReload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yml")
	keyPath := filepath.Join(dir, "key")
	testutil.WriteFile(t, cfgPath, safeTestConfig)
	testutil.WriteFile(t, keyPath, "sk-first\n")

	var logs strings.Builder
	reg := prometheus.NewRegistry()
	sc := NewSafeConfig(cfgPath, promslog.New(&promslog.Config{Writer: &logs}), reg)
	var notified []*Config
	sc.OnChange(func(c *Config) { notified = append(notified, c) })

	if err := sc.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := string(sc.Get().Targets[0].APIKey); got != "sk-first" {
		t.Fatalf("key %q", got)
	}
	if promtestutil.ToFloat64(sc.reloadSuccess) != 1 || promtestutil.ToFloat64(sc.reloadTimestamp) == 0 {
		t.Error("reload gauges not set after success")
	}

	// Unchanged file: no notification.
	if err := sc.Reload(); err != nil || len(notified) != 1 {
		t.Fatalf("unchanged reload: err %v, notifications %d", err, len(notified))
	}

	// Rotated key file: the same config file yields a new key.
	testutil.WriteFile(t, keyPath, "sk-rotated\n")
	if err := sc.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := string(sc.Get().Targets[0].APIKey); got != "sk-rotated" {
		t.Errorf("rotated key not re-read: %q", got)
	}
	if len(notified) != 2 {
		t.Errorf("rotation should notify listeners; got %d notifications", len(notified))
	}

	// Broken file: the running config stays, gauge drops to 0.
	before := sc.Get()
	testutil.WriteFile(t, cfgPath, "targets: [{name: a, protocol: nope}]")
	if err := sc.Reload(); err == nil {
		t.Fatal("broken reload succeeded")
	}
	if sc.Get() != before {
		t.Error("running config replaced by a broken one")
	}
	if promtestutil.ToFloat64(sc.reloadSuccess) != 0 {
		t.Error("reload_successful not 0 after failure")
	}
	for _, secret := range []string{"sk-first", "sk-rotated"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("secret %q in logs:\n%s", secret, logs.String())
		}
	}
}
