package probe

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The answer's text is kept only for probes that check it (assertions):
// the fast path reads chunks without keeping, or allocating, any text.
// A Request with CaptureAnswer gets an answerText on its Result, which the
// drivers that support it fill as chunks arrive.

// MaxAnswerBytes bounds the answer text kept for assertions; an answer
// longer than this is cut and marked truncated, and equals and
// json_schema assertions fail on it rather than judge half an answer.
const MaxAnswerBytes = 64 << 10

// answerText accumulates the content of an answer up to MaxAnswerBytes.
type answerText struct {
	b         []byte
	truncated bool
}

func (a *answerText) add(s string) {
	if a.truncated || s == "" {
		return
	}
	room := MaxAnswerBytes - len(a.b)
	if len(s) > room {
		// Cut on a rune boundary so the kept text stays valid UTF-8.
		cut := room
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		a.b = append(a.b, s[:cut]...)
		a.truncated = true
		return
	}
	a.b = append(a.b, s...)
}

// settleAnswer moves the captured text into r.Answer once the probe is
// over. Safe without capture.
func (r *Result) settleAnswer() {
	if r.answer == nil {
		return
	}
	r.Answer, r.AnswerTruncated = string(r.answer.b), r.answer.truncated
	r.answer = nil
}

// oaiAnswerChunk is the text of an OpenAI chunk or answer: content only,
// not reasoning or tool calls, which the assertions do not judge.
type oaiAnswerChunk struct {
	Choices []struct {
		Index   int             `json:"index"`
		Text    json.RawMessage `json:"text"`
		Delta   oaiAnswerDelta  `json:"delta"`
		Message oaiAnswerDelta  `json:"message"`
	} `json:"choices"`
}

type oaiAnswerDelta struct {
	Content json.RawMessage `json:"content"`
}

// addOpenAI adds the text of the first choice of data, an OpenAI chunk
// or whole answer the driver has already decoded (so it is valid JSON
// within the depth bound). Content may be a string or, as some servers
// send it, a list of parts with "text"; anything else carries no text.
func (a *answerText) addOpenAI(data []byte) {
	var c oaiAnswerChunk
	if json.Unmarshal(data, &c) != nil {
		return
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n > 1: the first choice is the answer judged
		}
		a.addJSONText(ch.Text)
		a.addJSONText(ch.Delta.Content)
		a.addJSONText(ch.Message.Content)
	}
}

func (a *answerText) addJSONText(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			a.add(s)
		}
	case '[':
		var parts []struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) == nil {
			for _, p := range parts {
				if p.Text != nil {
					a.add(*p.Text)
				}
			}
		}
	}
}
