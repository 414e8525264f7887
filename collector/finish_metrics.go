package collector

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llm-prober/llm-prober/probe"
)

// Why answers ended, by the server's finish_reason (probe.Result.FinishReason),
// folded into a fixed set so that a server's own vocabulary (TGI's
// eos_token, Ollama's load) cannot grow the series. A counter per reason,
// created when that reason is first seen: a healthy probe costs one series
// (stop, or length for a probe that asks for a fixed number of tokens),
// and a vLLM answer cut short by its repetition detector shows up as
// reason="repetition" rather than hiding among the successes.

func newFinishDesc(base []string) *prometheus.Desc {
	return prometheus.NewDesc("llm_probe_finish_reasons_total",
		"Probe answers by the finish reason the server gave (stop, length, tool_calls, content_filter, repetition, other), whatever the outcome; answers that gave none are not counted.",
		append(slices.Clone(base), "reason"), nil)
}

// finishReasons is the label set, "other" last.
var finishReasons = [...]string{"stop", "length", "tool_calls", "content_filter", "repetition", "other"}

// finishReasonIndex folds a server's finish reason into finishReasons:
// TGI's eos_token and stop_sequence are stops, the legacy function_call
// a tool call; anything else (vLLM's abort or error, Ollama's load or
// unload, a reason a server adds) is other.
func finishReasonIndex(reason string) int {
	switch reason {
	case "eos_token", "stop_sequence":
		reason = "stop"
	case "function_call":
		reason = "tool_calls"
	}
	if i := slices.Index(finishReasons[:], reason); i >= 0 {
		return i
	}
	return len(finishReasons) - 1
}

// countFinish counts the finish reason of r, if it gave one.
func (s *series) countFinish(r *probe.Result) {
	if r.FinishReason == "" {
		return
	}
	i := finishReasonIndex(r.FinishReason)
	s.countReason(&s.finishes[i], s.d.finish, "reason", finishReasons[i])
}
