package probe

import (
	"bytes"
	"encoding/json"
	"time"
)

// Reasoning models (DeepSeek-R1, Qwen3, gpt-oss) stream their thinking
// before the answer, in delta fields of their own (reasoning_content:
// vLLM before 0.10, SGLang, llama.cpp, DeepSeek; reasoning: newer vLLM,
// Ollama). TTFT counts the first token of either; a user waits for the
// first answer token, which can come seconds later, so both are kept.

// Reasoning is what a stream told about a reasoning model's answer.
type Reasoning struct {
	// Seen is true when a chunk carried reasoning.
	Seen bool
	// FirstReasoning is the time from Result.Start to the first chunk
	// carrying reasoning; FirstAnswer to the first carrying answer
	// output (content, text or a tool-call fragment). Zero when no such
	// chunk arrived.
	FirstReasoning, FirstAnswer time.Duration
	// Tokens is the server's count of reasoning tokens (OpenAI usage's
	// completion_tokens_details.reasoning_tokens), when HasTokens.
	Tokens    int
	HasTokens bool
}

// noteOutput records, for a chunk that carried output, which kind it
// carried, and keeps its text when the probe captures the answer. It
// allocates only for the capture.
func noteOutput(r *Result, c *oaiChunk, data []byte, at time.Time) {
	var reasoning, answer bool
	for i := range c.Choices {
		ch := &c.Choices[i]
		for _, d := range [...]*oaiDelta{&ch.Delta.oaiDelta, &ch.Message.oaiDelta} {
			reasoning = reasoning || bool(d.ReasoningContent) || bool(d.Reasoning)
			answer = answer || bool(d.Content) || bool(d.ToolCalls) || bool(d.FunctionCall)
		}
		answer = answer || bool(ch.Text)
	}
	since := at.Sub(r.Start)
	if reasoning {
		r.Reasoning.Seen = true
		if r.Reasoning.FirstReasoning == 0 {
			r.Reasoning.FirstReasoning = since
		}
	}
	if answer && r.Reasoning.FirstAnswer == 0 {
		r.Reasoning.FirstAnswer = since
	}
	if r.answer != nil && answer {
		r.answer.addOpenAI(data)
	}
}

// noteReasoningTokens reads completion_tokens_details.reasoning_tokens
// from a chunk or answer that carried usage (once per stream); chunks
// without the key are not decoded again.
func noteReasoningTokens(r *Result, data []byte) {
	if !bytes.Contains(data, []byte(`"reasoning_tokens"`)) {
		return
	}
	var v struct {
		Usage struct {
			Details struct {
				ReasoningTokens *int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &v) != nil || v.Usage.Details.ReasoningTokens == nil || *v.Usage.Details.ReasoningTokens < 0 {
		return
	}
	r.Reasoning.Tokens, r.Reasoning.HasTokens = *v.Usage.Details.ReasoningTokens, true
}

// decodeAnswer decodes a whole (non-streamed) OpenAI answer and notes
// what the measurements beyond latency need: reasoning, its token count,
// and the text for assertions.
func (c *oaiChunk) decodeAnswer(b []byte, r *Result) error {
	if err := c.decode(b); err != nil {
		return err
	}
	for i := range c.Choices {
		if d := &c.Choices[i].Message.oaiDelta; bool(d.ReasoningContent) || bool(d.Reasoning) {
			r.Reasoning.Seen = true
		}
	}
	if c.Usage != nil {
		noteReasoningTokens(r, b)
		noteCachedTokens(r, b)
	}
	if r.answer != nil {
		r.answer.addOpenAI(b)
	}
	return nil
}

// SecondToken is the time from Start to the arrival of the second output
// token: the second chunk's, or the first's when it carried two or more.
// false when the stream had fewer than two tokens.
func (r *Result) SecondToken() (time.Duration, bool) {
	n := 0
	for _, c := range r.Chunks {
		n += c.Tokens
		if n >= 2 {
			return c.At, true
		}
	}
	return 0, false
}
