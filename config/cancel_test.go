package config

import (
	"testing"
	"time"
)

// TestCancelDefaults: a cancel: with only after_tokens gets the documented
// release timeout and poll interval, and a probe without cancel: none.
func TestCancelDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`
targets:
  - name: chat
    protocol: openai_chat
    url: http://localhost:8000
    model: llama
    server_metrics: {url: http://localhost:8000/metrics}
    probes:
      - {name: cut, schedule: {every: 1m}, cancel: {after_tokens: 16}}
      - {name: tuned, schedule: {every: 1m}, cancel: {after_tokens: 1, release_timeout: 5s, poll_interval: 100ms}}
      - {name: plain, schedule: {every: 1m}}
`), "cancel.yml", ".", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Targets[0].Probes
	if c := ps[0].Cancel; c == nil || c.AfterTokens != 16 || time.Duration(c.ReleaseTimeout) != DefaultCancelReleaseTimeout ||
		time.Duration(c.PollInterval) != DefaultCancelPollInterval {
		t.Errorf("defaults: %+v", c)
	}
	if c := ps[1].Cancel; c == nil || c.AfterTokens != 1 || time.Duration(c.ReleaseTimeout) != 5*time.Second || time.Duration(c.PollInterval) != 100*time.Millisecond {
		t.Errorf("tuned: %+v", c)
	}
	if ps[2].Cancel != nil {
		t.Errorf("plain probe has cancel %+v", ps[2].Cancel)
	}
}
