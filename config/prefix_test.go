package config

import "testing"

func TestSequenceProbes(t *testing.T) {
	cfg, err := Parse([]byte(`targets:
  - name: chat
    protocol: openai_chat
    url: http://localhost:8000
    model: llama
    probes:
      - name: conversation
        schedule: {every: 1m}
        session: {turns: 4}
      - name: prefix
        schedule: {every: 1m}
        shared_prefix: {tokens: 2048, requests: 4}
      - name: plain
        schedule: {every: 1m}
`), "x.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Targets[0].Probes
	if s := ps[0].Session; s == nil || s.Turns != 4 || !ps[0].Sequence() {
		t.Errorf("session probe: %+v", s)
	}
	if s := ps[1].SharedPrefix; s == nil || s.Tokens != 2048 || s.Requests != 4 || !ps[1].Sequence() {
		t.Errorf("shared_prefix probe: %+v", s)
	}
	if ps[2].Sequence() {
		t.Errorf("plain probe is a sequence")
	}
}
