package simulator

import (
	"io"
	"strings"
	"testing"
)

// TestSpecDecodeMetrics: with draft tokens configured, each decode step
// after the first token counts one draft of that many tokens and the
// configured share of them accepted; without, vLLM registers no
// spec-decode counters. The preemption counter is always there, at 0.
func TestSpecDecodeMetrics(t *testing.T) {
	cfg := fastConfig()
	cfg.Metrics.SpecDecodeTokens = 3
	cfg.Metrics.SpecDecodeAcceptance = 0.5
	ts := startServer(t, cfg)
	resp := ts.post(t, "/v1/chat/completions", chatBody(5, map[string]any{"ignore_eos": true}), "X-Request-Id", "s-1")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = ts.truth(t, "s-1")
	_, body := ts.get(t, "/metrics")
	text := string(body)
	// 5 tokens one per step: 4 decode steps after the first, 12 draft
	// tokens, 1.5 accepted per step carried as whole tokens: 6.
	for _, want := range []string{
		`vllm:inter_token_latency_seconds_count{engine="0",model_name="sim-llm"} 4`,
		`vllm:spec_decode_num_drafts_total{engine="0",model_name="sim-llm"} 4`,
		`vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="sim-llm"} 12`,
		`vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="sim-llm"} 6`,
		`vllm:num_preemptions_total{engine="0",model_name="sim-llm"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	plain := startServer(t, fastConfig())
	_, body = plain.get(t, "/metrics")
	if strings.Contains(string(body), "spec_decode") || !strings.Contains(string(body), "vllm:num_preemptions_total") {
		t.Errorf("without spec_decode_tokens: want no spec-decode counters and a preemption counter:\n%s", body)
	}

	cfg = fastConfig()
	cfg.Metrics.Naming = NamingSGLang
	sg := startServer(t, cfg)
	_, body = sg.get(t, "/metrics")
	if want := `sglang:num_retracted_requests_total{engine_type="unified",model_name="sim-llm",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0`; !strings.Contains(string(body), want) {
		t.Errorf("SGLang naming lacks %s", want)
	}
}

func TestSpecDecodeConfig(t *testing.T) {
	for _, c := range []struct {
		tokens     int
		acceptance float64
		field      string
	}{{-1, 0.5, "metrics.spec_decode_tokens"}, {65, 0.5, "metrics.spec_decode_tokens"}, {3, 1.5, "metrics.spec_decode_acceptance"}} {
		cfg := DefaultConfig()
		cfg.Metrics.SpecDecodeTokens, cfg.Metrics.SpecDecodeAcceptance = c.tokens, c.acceptance
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c, err, c.field)
		}
	}
}
