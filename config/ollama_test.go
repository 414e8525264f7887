package config

import "testing"

// An ollama target without settings probes /api/chat; generate is opt-in.
func TestOllamaAPIDefault(t *testing.T) {
	const yml = `
targets:
  - name: chat
    protocol: ollama
    url: http://localhost:11434
    model: llama3.2
    probes: [{name: p, schedule: {every: 15s}}]
  - name: generate
    protocol: ollama
    url: http://localhost:11434
    model: llama3.2
    ollama: {api: generate}
    probes: [{name: p, schedule: {every: 15s}}]
  - name: tgi
    protocol: tgi
    url: http://localhost:3000
    model: mistral
    probes: [{name: p, schedule: {every: 15s}}]
`
	cfg, err := Parse([]byte(yml), "inline.yml", ".", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Targets[0].Ollama; o == nil || o.API != "chat" {
		t.Errorf("default ollama settings %+v", o)
	}
	if o := cfg.Targets[1].Ollama; o == nil || o.API != "generate" {
		t.Errorf("ollama settings %+v", o)
	}
	if cfg.Targets[2].Ollama != nil {
		t.Errorf("a tgi target got ollama settings")
	}
}
