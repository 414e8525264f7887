package config

import (
	"slices"
	"testing"

	"github.com/llm-prober/llm-prober/probe"
)

// TestAssertions: each kind compiles, a schema written as YAML works like
// its JSON, names default to the kind, and probes without assert: have
// none.
func TestAssertions(t *testing.T) {
	_, err := Parse([]byte(`targets:
  - name: chat
    protocol: openai_chat
    url: http://localhost:8000
    model: llama
    probes:
      - name: canary
        schedule: {every: 1m}
        assert:
          - contains: Paris
          - {name: no-refusal, regex: "^(?i:(?!sorry))"}
          - {name: exact, equals: "Paris"}
          - json_schema:
              type: object
              required: [capital]
              properties: {capital: {type: string, enum: [Paris]}}
      - name: plain
        schedule: {every: 1m}
workloads:
  default: {temperature: 0, seed: 7}
`), "x.yml", ".", noEnv)
	if err == nil {
		t.Fatal("a regex with a lookahead (not RE2) loaded")
	}
	if want := "x.yml:11:32: targets[0].probes[0].assert[1].regex: invalid regex"; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("got %v\nwant %s…", err, want)
	}
	c, err := Parse([]byte(`targets:
  - name: chat
    protocol: openai_chat
    url: http://localhost:8000
    model: llama
    probes:
      - name: canary
        schedule: {every: 1m}
        assert:
          - contains: Paris
          - {name: capital-word, regex: "(?i)\\bparis\\b"}
          - {name: exact, equals: "Paris"}
          - json_schema:
              type: object
              required: [capital]
              properties: {capital: {type: string, enum: [Paris]}}
      - name: plain
        schedule: {every: 1m}
`), "x.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	canary, plain := c.Targets[0].Probes[0], c.Targets[0].Probes[1]
	if got := canary.Assertions().Names(); !slices.Equal(got, []string{"contains", "capital-word", "exact", "json_schema"}) {
		t.Fatalf("names %v", got)
	}
	if plain.Assertions() != nil {
		t.Fatalf("a probe without assert: has %v", plain.Assertions())
	}
	r := &probe.Result{Outcome: probe.OutcomeSuccess, Answer: `{"capital": "Paris"}`}
	canary.Assertions().Check(r)
	if len(r.AssertionFailures) != 1 || r.AssertionFailures[0].Name != "exact" {
		t.Fatalf("failures %+v", r.AssertionFailures)
	}
	r = &probe.Result{Outcome: probe.OutcomeSuccess, Answer: `{"capital": "Lyon"}`}
	canary.Assertions().Check(r)
	if len(r.AssertionFailures) != 4 || r.Outcome != probe.OutcomeWrongAnswer {
		t.Fatalf("failures %+v", r.AssertionFailures)
	}
}
