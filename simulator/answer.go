package simulator

import (
	"fmt"
	"net/http"
	"strings"
)

// A fixed answer makes the simulator a server whose correctness is known:
// a probe's assertions pass against the right answer and fail against
// another one, and the ground truth records the text that was sent.

// HeaderAnswer overrides output.answer for one request (chat and
// completions): the answer's content, at most maxHeaderValueLen bytes.
const HeaderAnswer = "X-Sim-Answer"

// maxTruthText bounds the answer text a ground-truth record keeps.
const maxTruthText = 4096

// answerWords is the fixed answer for a request as tokens (one word each;
// whitespace is normalised to single spaces), nil for random words.
func answerWords(h http.Header, configured string) ([]string, error) {
	text := configured
	if v, ok := h[http.CanonicalHeaderKey(HeaderAnswer)]; ok {
		if len(v) != 1 || len(v[0]) > maxHeaderValueLen {
			return nil, fmt.Errorf("%s: give it once, at most %d bytes", HeaderAnswer, maxHeaderValueLen)
		}
		text = v[0]
	}
	w := strings.Fields(text)
	if len(w) == 0 {
		return nil, nil
	}
	return w, nil
}

// planAnswer sets the answer's length to the fixed answer's (plus the
// reasoning before it): "stop" when it fits in max_tokens, else cut there
// with "length", as a real server does.
func planAnswer(answer []string, reasoning, maxTokens int) (n int, reason string) {
	n = reasoning + len(answer)
	if n > maxTokens {
		return maxTokens, "length"
	}
	return n, "stop"
}

// contentWords is n tokens of output of kind: the fixed answer's next
// words for content when there is one (recorded in the ground truth),
// random words otherwise.
func (j *job) contentWords(kind string, n int) string {
	if j.p.answer == nil || kind != kindContent {
		return words(j.p.text, n)
	}
	var b strings.Builder
	for range n {
		if j.p.answerAt < len(j.p.answer) {
			b.WriteString(j.p.answer[j.p.answerAt])
		}
		j.p.answerAt++
		b.WriteByte(' ')
	}
	s := b.String()
	j.entry.update(func(r *RequestRecord) {
		if room := maxTruthText - len(r.Text); room > 0 {
			r.Text += s[:min(len(s), room)]
		}
	})
	return s
}
