package probe

import (
	"strings"

	"github.com/llm-prober/llm-prober/internal/display"
)

// maxReportAnswerBytes bounds the answer text the one-shot report prints.
const maxReportAnswerBytes = 1024

// writeAnswerReport adds what the report knows beyond latency: the
// answer's checks, a reasoning model's timings, the rate-limit headroom
// and the trace id. Lines appear only when there is something to say, so
// reports of ordinary probes do not change.
func writeAnswerReport(line func(label, format string, args ...any), r *Result) {
	if r.TraceID != "" {
		line("trace id", "%s", r.TraceID)
	}
	if rs := r.Reasoning; rs.Seen {
		if rs.FirstReasoning > 0 {
			line("first reasoning", "%s", ms(rs.FirstReasoning))
		}
		if rs.FirstAnswer > 0 {
			line("first answer", "%s", ms(rs.FirstAnswer))
		}
		if rs.HasTokens {
			line("reasoning tokens", "%d (server)", rs.Tokens)
		}
	}
	if d, ok := r.SecondToken(); ok && r.Reasoning.Seen {
		line("second token", "%s", ms(d))
	}
	if rl := r.RateLimit; rl != nil {
		for _, w := range []struct {
			name string
			w    RateLimitWindow
		}{{"requests", rl.Requests}, {"tokens", rl.Tokens}} {
			if w.w.HasRemaining && w.w.HasLimit {
				line("rate limit "+w.name, "%.0f of %.0f left, resets in %s", w.w.Remaining, w.w.Limit, w.w.Reset)
			}
		}
		if rl.HasRetryAfter {
			line("retry after", "%s", rl.RetryAfter)
		}
		if len(rl.Malformed) > 0 {
			line("malformed headers", "%s (ignored)", strings.Join(rl.Malformed, ", "))
		}
	}
	if r.Answer != "" || len(r.AssertionFailures) > 0 {
		line("answer", "%q", display.Cut(r.Answer, maxReportAnswerBytes))
	}
	for _, f := range r.AssertionFailures {
		line("  failed "+f.Name, "%s %q: %v", f.Kind, display.Cut(f.Expected, maxReportAnswerBytes), f.Err)
	}
}
