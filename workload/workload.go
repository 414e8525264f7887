// Package workload turns a configured workload into the requests probes send.
package workload

import (
	"strings"
	"sync/atomic"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
)

// Generator hands out requests for one workload. It is safe for concurrent
// use: overlapping probes of one schedule share it.
type Generator struct {
	cfg     *config.Workload
	prompts []string
	next    atomic.Uint64
}

// New prepares the prompts of w once, so each request costs no generation.
func New(w *config.Workload) *Generator {
	g := &Generator{cfg: w}
	switch {
	case w.Prompts.Synthetic != nil:
		g.prompts = []string{SyntheticText(w.Prompts.Synthetic.InputTokens)}
	default:
		g.prompts = w.Prompts.Inline
	}
	return g
}

// Next fills the protocol-independent fields of a request: prompts are taken
// in order, round robin, so every prompt is probed equally often.
func (g *Generator) Next(model string) *probe.Request {
	i := g.next.Add(1) - 1
	prompt := g.prompts[i%uint64(len(g.prompts))]
	w := g.cfg
	req := &probe.Request{
		Model:       model,
		Prompt:      prompt,
		MaxTokens:   w.MaxTokens.Mean,
		Stream:      true,
		Temperature: w.Temperature,
		TopP:        w.TopP,
		Seed:        w.Seed,
		Stop:        w.Stop,
		IgnoreEOS:   w.IgnoreEOS,
		MinTokens:   w.MinTokens,
		Extra:       w.ExtraBody,
	}
	if w.Prompts.System != "" {
		req.Messages = append(req.Messages, probe.Message{Role: "system", Content: w.Prompts.System})
	}
	req.Messages = append(req.Messages, probe.Message{Role: "user", Content: prompt})
	return req
}

// commonWords are frequent English words that common BPE tokenizers (GPT,
// Llama, Mistral families) encode as a single token when preceded by a
// space, so N words make a prompt of about N tokens.
var commonWords = [...]string{
	"the", "time", "people", "year", "way", "day", "man", "thing", "woman", "life",
	"child", "world", "school", "state", "family", "student", "group", "country", "problem", "hand",
	"part", "place", "case", "week", "company", "system", "program", "question", "work", "government",
	"number", "night", "point", "home", "water", "room", "mother", "area", "money", "story",
	"fact", "month", "lot", "right", "study", "book", "eye", "job", "word", "business",
	"issue", "side", "kind", "head", "house", "service", "friend", "father", "power", "hour",
	"game", "line", "end", "member", "law", "car", "city", "name", "team", "minute",
	"idea", "kid", "body", "information", "back", "parent", "face", "level", "office", "door",
	"health", "person", "art", "war", "history", "party", "result", "change", "morning", "reason",
	"research", "girl", "guy", "moment", "air", "teacher", "force", "education", "light", "music",
}

// SyntheticText returns n words of deterministic filler text.
func SyntheticText(n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		// A stride coprime to the vocabulary size avoids short repeats
		// that a prefix cache would fold together.
		b.WriteString(commonWords[(i*37)%len(commonWords)])
	}
	return b.String()
}
