package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

var update = flag.Bool("update", false, "rewrite the golden .err files of testdata/bad")

func noEnv(string) string { return "" }

// TestBadConfigs checks every testdata/bad/*.yml against the exact error
// text in its .err twin, so a change in wording or position is a visible diff.
func TestBadConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if err == nil {
				t.Fatalf("Load(%s) succeeded; want an error", f)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden file (run go test ./config -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("error text differs\n got: %s\nwant: %s", got, want)
			}
			for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
				// Errors inside a prompt file name that file instead.
				if !strings.HasPrefix(line, f+":") && !strings.HasPrefix(line, "testdata/bad/prompts.jsonl:") {
					t.Errorf("error line does not start with the file name: %q", line)
				}
			}
		})
	}
}

func TestErrorsCarryLineAndColumn(t *testing.T) {
	_, err := Load("testdata/bad/unknown-protocol.yml")
	want := `testdata/bad/unknown-protocol.yml:13:5: targets[2].protocol: unknown protocol "openia_chat"; want one of openai_chat, openai_completions, openai_responses, tgi, ollama, triton_generate, triton_grpc, openai_embeddings, ollama_embed, tei_embed, openai_rerank, tei_rerank`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	_, err = Load("testdata/bad/unknown-key.yml")
	if err == nil || !strings.Contains(err.Error(), `:9:9: targets[0].probes[0].shedule: unknown key "shedule"`) {
		t.Fatalf("unknown key not located: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Load("testdata/good/minimal.yml")
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Targets[0]
	if time.Duration(tg.Timeout) != DefaultTimeout || time.Duration(tg.StreamIdleTimeout) != DefaultStreamIdleTimeout || tg.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Errorf("target defaults not applied: %+v", tg)
	}
	p := tg.Probes[0]
	if !p.Streaming() || p.Timeout != tg.Timeout || p.Workload != "default" {
		t.Errorf("probe defaults not applied: %+v", p)
	}
	w := cfg.Workloads["default"]
	if w == nil || w.MaxTokens.Mean != DefaultMaxTokens || len(w.Prompts.Inline) != 1 {
		t.Errorf("default workload missing or incomplete: %+v", w)
	}
	if cfg.GPUs.Enabled != "auto" {
		t.Errorf("gpus.enabled = %q, want auto", cfg.GPUs.Enabled)
	}
}

func TestFullConfig(t *testing.T) {
	cfg, err := Load("testdata/good/full.yml")
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Targets[0]
	if string(tg.APIKey) != "sk-test-abcdef0123456789" {
		t.Errorf("API key not read from file (relative to the config file)")
	}
	if tg.Probes[1].Streaming() || time.Duration(tg.Probes[1].Timeout) != 10*time.Second {
		t.Errorf("probe overrides lost: %+v", tg.Probes[1])
	}
	if tg.Probes[0].SLO.Objective != 0.995 || time.Duration(tg.Probes[0].SLO.TTFT) != 500*time.Millisecond {
		t.Errorf("slo: %+v", tg.Probes[0].SLO)
	}
	if cfg.GPUs.Enabled != "false" {
		t.Errorf("gpus.enabled: %q", cfg.GPUs.Enabled)
	}
	w := cfg.Workloads["chat"]
	if w.MaxTokens.Mean != 32 || *w.Seed != 42 || w.ExtraBody["repetition_penalty"] != 1.1 {
		t.Errorf("workload: %+v", w)
	}
	if tg.ServerMetrics.Timeout == 0 || tg.ServerMetrics.Kind != "vllm" {
		t.Errorf("server_metrics: %+v", tg.ServerMetrics)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	cfg, err := Load("testdata/good/full.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sk-test") {
		t.Fatalf("secret leaked into printed config:\n%s", out)
	}
	if !strings.Contains(string(out), "api_key: <secret>") {
		t.Errorf("printed config should show the key as <secret>:\n%s", out)
	}
	// The printed config is itself valid input once the output-only key is
	// dropped: defaults are explicit, nothing is lost.
	var kept []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, "api_key: <secret>") {
			kept = append(kept, l)
		}
	}
	again, err := Parse([]byte(strings.Join(kept, "\n")), "printed.yml", "testdata/good", noEnv)
	if err != nil {
		t.Fatalf("printed config does not load again: %v", err)
	}
	if string(again.Targets[0].APIKey) != string(cfg.Targets[0].APIKey) {
		t.Error("re-loaded config lost the key")
	}
}

func TestAPIKeyFromEnv(t *testing.T) {
	src := `
targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    api_key_env: MY_KEY
    probes: [{name: p, schedule: {every: 1s}}]
`
	env := func(k string) string {
		if k == "MY_KEY" {
			return " sk-env-key\n"
		}
		return ""
	}
	cfg, err := Parse([]byte(src), "env.yml", ".", env)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Targets[0].APIKey) != "sk-env-key" {
		t.Errorf("got %q", cfg.Targets[0].APIKey)
	}
}

func TestScalarOrMappingMaxTokens(t *testing.T) {
	src := `
targets:
  - name: a
    protocol: openai_completions
    url: http://localhost:8000
    model: m
    probes: [{name: p, workload: w, schedule: {every: 1s}}, {name: q, workload: v, schedule: {every: 1s}}]
workloads:
  w: {max_tokens: 16}
  v: {max_tokens: {mean: 20}}
`
	cfg, err := Parse([]byte(src), "mt.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Workloads["w"].MaxTokens; m.Mean != 16 || m.Distribution != "constant" {
		t.Errorf("scalar form: %+v", m)
	}
	if m := cfg.Workloads["v"].MaxTokens; m.Mean != 20 || m.Distribution != "constant" {
		t.Errorf("mapping form: %+v", m)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("targets: &a [*a]"))
	f.Add([]byte("targets:\n  - probes:\n      - slo: {objective: .nan}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b, "fuzz.yml", t.TempDir(), noEnv)
		if err == nil && cfg == nil {
			t.Fatal("nil config without error")
		}
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.yml") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// histograms: is set at the top level, per target, or neither (both); a
// bad value is reported at its key with the allowed ones.
func TestHistograms(t *testing.T) {
	const yml = `%s
targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    probes: [{name: p, schedule: {every: 15s}}]
  - name: b
    protocol: openai_chat
    url: http://localhost:8000
    model: m
%s
    probes: [{name: p, schedule: {every: 15s}}]
`
	for _, c := range []struct {
		top, target string
		wantA       string
		wantB       string
		wantErr     string
	}{
		{"", "", "both", "both", ""},
		{"histograms: native", "", "native", "native", ""},
		{"histograms: native", "    histograms: classic", "native", "classic", ""},
		{"", "    histograms: classic", "both", "classic", ""},
		{"histograms: sparse", "", "", "", `cfg.yml:1:1: histograms: unknown histogram form "sparse"; want one of both, classic, native`},
		{"", "    histograms: Classic", "", "", `cfg.yml:12:5: targets[1].histograms: unknown histogram form "Classic"; want one of both, classic, native`},
	} {
		cfg, err := Parse([]byte(fmt.Sprintf(yml, c.top, c.target)), "cfg.yml", ".", noEnv)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("%q/%q: error %v, want %s", c.top, c.target, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q/%q: %v", c.top, c.target, err)
		}
		if a, b := cfg.Targets[0].Histograms, cfg.Targets[1].Histograms; a != c.wantA || b != c.wantB {
			t.Errorf("%q/%q: histograms %s, %s; want %s, %s", c.top, c.target, a, b, c.wantA, c.wantB)
		}
	}
}

// TestServerLoadReport: auto asks on the OpenAI protocols only, on asks
// on any HTTP protocol, off never.
func TestServerLoadReport(t *testing.T) {
	for _, tc := range []struct {
		protocol, setting string
		want              bool
	}{
		{probe.ProtocolOpenAIChat, "", true},
		{probe.ProtocolOpenAICompletions, "auto", true},
		{probe.ProtocolOpenAIChat, "off", false},
		{probe.ProtocolTGI, "", false},
		{probe.ProtocolTritonGenerate, "on", true},
	} {
		yml := "targets:\n  - name: t\n    protocol: " + tc.protocol + "\n    url: http://localhost:8000\n    model: m\n"
		if tc.setting != "" {
			yml += "    server_load_report: " + tc.setting + "\n"
		}
		yml += "    probes: [{name: p, schedule: {every: 1m}}]\n"
		path := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.protocol, tc.setting, err)
		}
		if got := c.Targets[0].DriverOptions().ServerLoadReport; got != tc.want {
			t.Errorf("%s server_load_report %q: asks %t, want %t", tc.protocol, tc.setting, got, tc.want)
		}
	}
}
