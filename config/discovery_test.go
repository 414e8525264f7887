package config

import (
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// TestWithModels: a discovering target's templates become one probe per
// model, named <template>@<model> with the model set; other targets and
// the original configuration are untouched.
func TestWithModels(t *testing.T) {
	cfg, err := Parse([]byte(`targets:
  - name: fleet
    protocol: ollama
    url: http://127.0.0.1:11434
    discover_models: {filter: "llama.*"}
    probes:
      - {name: a, schedule: {every: 15s}}
      - {name: b, schedule: {every: 1m}}
  - name: static
    protocol: openai_chat
    url: http://127.0.0.1:8000
    model: m
    probes: [{name: a, schedule: {every: 15s}}]
`), "x.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	dm := cfg.Targets[0].DiscoverModels
	if dm.MaxModels != DefaultMaxModels || time.Duration(dm.RefreshInterval) != DefaultDiscoveryRefresh ||
		time.Duration(dm.Timeout) != DefaultDiscoveryTimeout || cfg.Targets[0].EffectiveAPI() != probe.ModelsAPIOllama {
		t.Errorf("defaults: %+v, api %s", dm, cfg.Targets[0].EffectiveAPI())
	}
	re := dm.FilterRegexp()
	if !re.MatchString("llama3:latest") || re.MatchString("my-llama") {
		t.Error("the filter is not anchored at both ends")
	}
	out := cfg.WithModels(func(target string) []string {
		if target == "fleet" {
			return []string{"llama3:latest", "llama2:7b"}
		}
		return []string{"never"}
	})
	var got []string
	for _, p := range out.Targets[0].Probes {
		got = append(got, p.Name+" "+p.ModelFor(out.Targets[0]))
	}
	want := []string{"a@llama3:latest llama3:latest", "b@llama3:latest llama3:latest", "a@llama2:7b llama2:7b", "b@llama2:7b llama2:7b"}
	if len(got) != len(want) {
		t.Fatalf("probes %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("probe %d: %q, want %q", i, got[i], want[i])
		}
	}
	if len(cfg.Targets[0].Probes) != 2 || cfg.Targets[0].Probes[0].Model != "" || cfg.Targets[0].Probes[0].Name != "a" {
		t.Error("WithModels modified the original configuration")
	}
	if out.Targets[1] != cfg.Targets[1] || out.Targets[1].Probes[0].ModelFor(out.Targets[1]) != "m" {
		t.Error("the static target changed")
	}
	if none := cfg.WithModels(func(string) []string { return nil }); len(none.Targets[0].Probes) != 0 {
		t.Error("a target without a list yet has probes")
	}
	if o := cfg.Targets[0].ModelListOptions(); o.URL != "http://127.0.0.1:11434" {
		t.Errorf("list URL %s", o.URL)
	}
}

// TestLookupDiscoveredProbe: the one-shot commands name a discovered probe
// as <template>@<model>; the bare template is refused with that hint.
func TestLookupDiscoveredProbe(t *testing.T) {
	cfg, err := Parse([]byte(`targets:
  - name: fleet
    protocol: openai_chat
    url: http://127.0.0.1:8000
    discover_models: {}
    probes: [{name: steady, schedule: {every: 15s}}]
`), "x.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tg, p, err := cfg.Lookup("fleet", "steady@org/model:v1")
	if err != nil || p.Name != "steady@org/model:v1" || p.ModelFor(tg) != "org/model:v1" || cfg.Targets[0].Probes[0].Model != "" {
		t.Fatalf("lookup: %v %+v", err, p)
	}
	for _, name := range []string{"steady", "", "steady@", "other@m"} {
		if _, _, err := cfg.Lookup("fleet", name); err == nil || !strings.Contains(err.Error(), "steady@<model>") {
			t.Errorf("%q: %v", name, err)
		}
	}
	// In the expanded configuration the probe is found as it is.
	out := cfg.WithModels(func(string) []string { return []string{"m"} })
	if _, p, err := out.Lookup("fleet", "steady@m"); err != nil || p.Model != "m" {
		t.Errorf("expanded: %v", err)
	}
}
