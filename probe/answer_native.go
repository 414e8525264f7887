package probe

import (
	"encoding/json"
	"time"
)

// The native APIs of TGI and Ollama carry the answer's text too; these are
// their sides of answer.go and reasoning.go.

// noteKinds records, for a chunk read at at, whether it carried reasoning
// and whether it carried answer output (reasoning.go's timings).
func noteKinds(r *Result, reasoning, answer bool, at time.Time) {
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
}

// noteOllama handles an Ollama line (streamed at at, or a whole answer
// with a zero at) that decoded into l from data: its thinking (Ollama's
// reasoning field, for thinking models) and answer, and their text when
// the probe keeps it.
func noteOllama(r *Result, l *ollamaLine, data []byte, at time.Time) {
	answer := bool(l.Response || l.Message.Content)
	if !at.IsZero() {
		// A tool call is the answer arriving, as on the OpenAI routes.
		noteKinds(r, bool(l.Thinking || l.Message.Thinking), answer || bool(l.Message.ToolCalls), at)
	} else if l.Thinking || l.Message.Thinking {
		r.Reasoning.Seen = true
	}
	if r.answer == nil || !answer {
		return
	}
	var v struct {
		Response json.RawMessage `json:"response"`
		Message  struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &v) == nil {
		r.answer.addJSONText(v.Response)
		r.answer.addJSONText(v.Message.Content)
	}
}

// noteTGIAnswer keeps the answer TGI sends whole in generated_text (the
// final stream event, or the /generate body), when the probe keeps it.
func noteTGIAnswer(r *Result, e *tgiEvent) {
	if r.answer != nil {
		r.answer.addJSONText(e.GeneratedText)
	}
}
