package engine

import (
	"log/slog"
	"math"
	"sync"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/probe"
)

// Length tolerances: beyond them a probe does not measure the shape it was
// configured for. Prompts get extra room for the chat template the server
// wraps around them (role headers, a default system prompt), which the
// prober cannot know.
const (
	lengthTolerance       = 0.10
	chatTemplateAllowance = 32
)

// lengthCheck compares what a probe's successful requests got with what
// they asked for: output tokens against max_tokens, and for synthetic
// prompts the server's prompt token count against the target length.
// Mismatches are counted always and logged once per probe: they repeat
// with every request when the server cannot force lengths.
type lengthCheck struct {
	metrics       *collector.ProbeMetrics
	target, probe string
	logger        *slog.Logger

	warnedOutput, warnedInput sync.Once
}

func (c *lengthCheck) check(sent Sent) {
	res := sent.Result
	want := sent.Draw.Request.MaxTokens
	// A cancellation probe cuts its stream after cancel.after_tokens on
	// purpose: its short answer is the point, not a server that stopped
	// early, and ignore_eos would not change it.
	if got := res.OutputTokens; !res.Cut() && math.Abs(float64(got-want)) > lengthTolerance*float64(want) {
		c.metrics.OutputLengthMismatch(c.target, c.probe)
		c.warnedOutput.Do(func() {
			c.logger.Warn("Output length differs from max_tokens by more than 10%; latency per request is not comparable across requests. Set ignore_eos: true (vLLM, SGLang) or min_tokens where the server supports them",
				"max_tokens", want, "output_tokens", got, "output_tokens_source", res.OutputTokensSource, "finish_reason", res.FinishReason, "request_id", res.RequestID)
		})
	}
	if want := sent.Draw.InputTokens; want > 0 && res.InputTokensSource == probe.TokenSourceServer {
		if got := res.InputTokens; math.Abs(float64(got-want)) > lengthTolerance*float64(want)+chatTemplateAllowance {
			c.metrics.InputLengthMismatch(c.target, c.probe)
			c.warnedInput.Do(func() {
				c.logger.Warn("Server counts a different prompt length than the synthetic target (more than 10% off, beyond chat-template overhead); this tokenizer does not map common English words to one token each",
					"target_input_tokens", want, "prompt_tokens", got, "request_id", res.RequestID)
			})
		}
	}
}
