package config

import (
	"fmt"
	"slices"
	"testing"
)

// metrics: is set at the top level, per target or per probe; the nearest
// one set applies whole, and a module's probes inherit like a target's.
func TestMetricsInheritance(t *testing.T) {
	const yml = `%s
targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
%s
    probes:
      - {name: p, schedule: {every: 15s}}
      - {name: q, schedule: {every: 15s}%s}
modules:
  mod:
    protocol: openai_chat
    model: m
    allowed_targets: 'http://.*'
    probes: [{name: p, schedule: {every: 15s}}]
`
	for _, c := range []struct {
		top, target, probe  string
		wantP, wantQ, wantM []string
	}{
		{"", "", "", nil, nil, nil},
		{"metrics: {disable: [phases]}", "", "", []string{"phases"}, []string{"phases"}, []string{"phases"}},
		{"metrics: {disable: [phases]}", "    metrics: {disable: [schedule_lag, in_flight]}", "",
			[]string{"schedule_lag", "in_flight"}, []string{"schedule_lag", "in_flight"}, []string{"phases"}},
		{"metrics: {disable: [phases]}", "", ", metrics: {disable: []}", []string{"phases"}, []string{}, []string{"phases"}},
		{"", "", ", metrics: {disable: [tokens_per_second]}", nil, []string{"tokens_per_second"}, nil},
	} {
		cfg, err := Parse([]byte(fmt.Sprintf(yml, c.top, c.target, c.probe)), "cfg.yml", ".", noEnv)
		if err != nil {
			t.Fatalf("%q/%q/%q: %v", c.top, c.target, c.probe, err)
		}
		probes := cfg.Targets[0].Probes
		got := [][]string{probes[0].DisabledMetrics(), probes[1].DisabledMetrics(), cfg.Modules["mod"].Probes[0].DisabledMetrics()}
		for i, want := range [][]string{c.wantP, c.wantQ, c.wantM} {
			if !slices.Equal(got[i], want) {
				t.Errorf("%q/%q/%q: probe %d disables %q, want %q", c.top, c.target, c.probe, i, got[i], want)
			}
		}
	}
}
