package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/testutil"
)

// slowConfig has a probe too slow for a 10-minute page (in time for its
// rate, so no warning) and one whose objective no rate pages in time for.
const slowConfig = `
targets:
  - name: vllm
    protocol: openai_chat
    url: http://127.0.0.1:8000
    model: m
    timeout: 60s
    probes:
      - {name: slow-check, schedule: {every: 5m}, slo: {ttft: 1s, objective: 0.999}}
      - {name: lax, schedule: {every: 15s}, slo: {ttft: 1s, objective: 0.8}}
`

// TestCheckConfigAlerting: check-config prints an alerting line per probe
// and warns on stderr, exit status 0, for a probe that misses a target;
// docs/configuration.md shows that output as it is.
func TestCheckConfigAlerting(t *testing.T) {
	docs, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "../../examples/llm-prober.yml"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("examples/llm-prober.yml: exit %d, stderr:\n%s", code, stderr.String())
	}
	// The docs run it from the repository root.
	out := strings.TrimPrefix(stdout.String(), "../../")
	if !strings.Contains(string(docs), "$ llm-prober check-config examples/llm-prober.yml\n"+out+"```") {
		t.Errorf("docs/configuration.md does not show check-config's output for examples/llm-prober.yml:\n%s", out)
	}

	dir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(dir, "slow.yml"), slowConfig)
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"check-config", filepath.Join(dir, "slow.yml")}, &stdout, &stderr); code != 0 {
		t.Fatalf("slow.yml: exit %d, stderr:\n%s", code, stderr.String())
	}
	wantOut := []string{
		"  probe vllm/slow-check every 5m: a hard outage pages after ~11m (a hung server ~12m); a 2× regression of its 99.9% objective pages after ~16m; a page within 10m needs ≥ 20 requests/hour (has 12)",
		"  probe vllm/lax every 15s: a hard outage pages after ~2m30s (a hung server ~3m30s); a 2× regression of its 80% objective pages after ~19m; no probe rate pages within 10m at this objective",
	}
	wantErr := "slow.yml: WARNING: probe vllm/lax every 15s: a 2× regression of the 80% objective pages after ~19m, not within 10m; no probe rate gets a page within 10m at this objective\n"
	for _, w := range wantOut {
		if !strings.Contains(stdout.String(), w+"\n") {
			t.Errorf("stdout lacks\n%s\nin\n%s", w, stdout.String())
		}
		if !strings.Contains(string(docs), "\n"+strings.TrimSpace(w)+"\n") {
			t.Errorf("docs/configuration.md lacks\n%s", strings.TrimSpace(w))
		}
	}
	if got := strings.TrimPrefix(stderr.String(), dir+string(filepath.Separator)); got != wantErr {
		t.Errorf("stderr\n%s\nwant\n%s", got, wantErr)
	}
	if !strings.Contains(string(docs), "\n"+wantErr) {
		t.Errorf("docs/configuration.md lacks\n%s", wantErr)
	}
}

// TestExamplesCanAlert: every example config passes check-config with an
// alerting line per probe (and per probe of each discovered module) and
// no warning: the examples are what users copy.
func TestExamplesCanAlert(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check-config", f}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("%s: exit %d, stderr:\n%s", f, code, stderr.String())
			continue
		}
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		want := cfg.ProbeCount()
		seen := map[string]bool{}
		for _, td := range cfg.TargetDiscovery {
			if m := cfg.Modules[td.Module]; m != nil && !seen[td.Module] {
				seen[td.Module] = true
				want += len(m.Probes)
			}
		}
		got := strings.Count(stdout.String(), "\n  probe ") + strings.Count(stdout.String(), "\n  module ")
		if got != want || !strings.Contains(stdout.String(), "\n  alerting, assuming ") {
			t.Errorf("%s: %d alerting lines, want %d:\n%s", f, got, want, stdout.String())
		}
	}
}

// TestCheckConfigWarnsOnHistogramMix: targets whose histograms differ pass
// check-config (exit 0) with a WARNING naming the Prometheus 2.x rule.
func TestCheckConfigWarnsOnHistogramMix(t *testing.T) {
	cfg := `targets:
  - {name: a, protocol: openai_chat, url: http://127.0.0.1:8000, model: m, histograms: classic, probes: [{name: p, schedule: {every: 15s}}]}
  - {name: b, protocol: openai_chat, url: http://127.0.0.1:8001, model: m, histograms: native, probes: [{name: p, schedule: {every: 15s}}]}
`
	path := filepath.Join(t.TempDir(), "mix.yml")
	testutil.WriteFile(t, path, cfg)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check-config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	want := path + ": WARNING: probe histograms in 2 forms (classic: target a; native: target b): Prometheus 2.x with --enable-feature=native-histograms stores a metric family in the form of its first series"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks\n%s\nin\n%s", want, stderr.String())
	}
}
