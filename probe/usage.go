package probe

// The token counts a server reports about an answer (OpenAI usage, TGI
// details, Ollama eval_count, Triton's num_input_tokens, …) go into
// counters that live as long as the process. A float64 counter that was
// once given 2^63 never moves again (later increments vanish below its
// precision), so rate() reads 0 for the rest of the process's life. Each
// count is therefore checked against what actually arrived before it is
// kept; an implausible one is dropped, named in Result.UsageInvalid
// (llm_probe_server_usage_invalid_total{field}) and, for output tokens,
// replaced by the chunks counted. The bounds are in docs/metrics.md and
// docs/security.md.

// Usage fields: the label values of llm_probe_server_usage_invalid_total.
const (
	UsageInputTokens       = "input_tokens"
	UsageCachedInputTokens = "cached_input_tokens"
	UsageOutputTokens      = "output_tokens"
	UsageReasoningTokens   = "reasoning_tokens"
)

// UsageFields lists every usage field, in the order Result.UsageInvalid
// names them.
func UsageFields() []string {
	return []string{UsageInputTokens, UsageCachedInputTokens, UsageOutputTokens, UsageReasoningTokens}
}

// maxReportedTokens bounds any one count for one request: 2^24
// (16,777,216) is above the longest context window served today, and a
// counter given that much per probe keeps whole-number precision for
// decades.
const maxReportedTokens = 1 << 24

// outputTokensSlack is how far past the request's max_tokens (per choice)
// an output count may go before it is implausible: servers stop at
// max_tokens, but some count a stop sequence or an end-of-sequence token
// beyond it, so a wide margin keeps honest servers clear of the rule.
const outputTokensSlack = 4

// maxChoices bounds the n (or best_of) taken from a request's extra body
// fields when widening the output bound.
const maxChoices = 128

// maxTokensPerSecond bounds the output count by the time the answer took:
// 10^8 tokens per second is a token every 10 ns, far beyond any server
// (an HTTP exchange alone takes microseconds), and it keeps
// llm_probe_output_tokens_per_second's sum growing by at most that much
// per request.
const maxTokensPerSecond = 1e8

// outputBound is the most output tokens a plausible answer to req can
// carry: maxReportedTokens, and with a max_tokens that many per choice
// times outputTokensSlack.
func outputBound(req *Request) int {
	if req.MaxTokens <= 0 {
		return maxReportedTokens
	}
	n := choices(req.Extra)
	if req.MaxTokens > maxReportedTokens/(outputTokensSlack*n) {
		return maxReportedTokens
	}
	return req.MaxTokens * outputTokensSlack * n
}

// choices is the number of answers req's extra fields ask for (OpenAI's
// n, TGI's best_of), 1 when none: each carries up to max_tokens.
func choices(extra map[string]any) int {
	n := 1
	for _, k := range [...]string{"n", "best_of"} {
		var v float64
		switch x := extra[k].(type) {
		case int:
			v = float64(x)
		case int64:
			v = float64(x)
		case float64:
			v = x
		default:
			continue
		}
		if v > float64(n) {
			n = int(min(v, maxChoices))
		}
	}
	return n
}

// plausibleOutput reports whether n output tokens are possible for r: at
// most its bound (outputBound), at most maxTokensPerChunk per chunk that
// arrived for a stream (at least one: a stream's tokens may all be
// special tokens that carry no text), and at most maxTokensPerSecond over
// the answer's time.
func (r *Result) plausibleOutput(n int) bool {
	bound := r.outputBound
	if bound <= 0 {
		bound = maxReportedTokens
	}
	switch {
	case n < 0 || n > bound:
		return false
	case r.Streamed && n > max(len(r.Chunks), 1)*maxTokensPerChunk:
		return false
	case r.EndToEnd > 0 && float64(n)/r.EndToEnd.Seconds() > maxTokensPerSecond:
		return false
	}
	return true
}

// checkCounts drops the server's counts that are implausible for what
// arrived, naming each in UsageInvalid. An output count the chunks do not
// explain (more tokens than chunks) must pass plausibleOutput, else the
// chunks are counted instead, one token each, so that ITL is not observed
// per token of a count that was not believed. Every driver runs it once,
// when the probe is done.
func (r *Result) checkCounts() {
	if r.InputTokens < 0 || r.InputTokens > maxReportedTokens {
		r.invalidUsage(UsageInputTokens)
		r.InputTokens, r.InputTokensSource = 0, TokenSourceNone
	}
	if r.HasCachedInputTokens {
		c := r.CachedInputTokens
		// Cached tokens are part of the prompt.
		if c < 0 || c > maxReportedTokens || (r.InputTokensSource == TokenSourceServer && c > r.InputTokens) {
			r.invalidUsage(UsageCachedInputTokens)
			r.CachedInputTokens, r.HasCachedInputTokens = 0, false
		}
	}
	if n := r.OutputTokens; n < 0 || (n > len(r.Chunks) && !r.plausibleOutput(n)) {
		r.invalidUsage(UsageOutputTokens)
		for i := range r.Chunks {
			r.Chunks[i].Tokens = 1
		}
		r.OutputTokens, r.OutputTokensSource = len(r.Chunks), TokenSourceCounted
		if len(r.Chunks) == 0 {
			r.OutputTokensSource = TokenSourceNone
		}
	}
	if r.Reasoning.HasTokens && !r.plausibleOutput(r.Reasoning.Tokens) {
		r.invalidUsage(UsageReasoningTokens)
		r.Reasoning.Tokens, r.Reasoning.HasTokens = 0, false
	}
}

func (r *Result) invalidUsage(field string) {
	r.UsageInvalid = append(r.UsageInvalid, field)
}
