// Package workload turns a configured workload into the requests probes
// send: which prompt, how long an answer to ask for, and the sampling
// options.
package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
)

// Generator hands out requests for one workload. It is safe for concurrent
// use: overlapping probes of one schedule share it.
type Generator struct {
	cfg     *config.Workload
	prompts []config.Prompt
	// items are the prompts as requests carry them, with the cache of
	// their encoded bodies: a prompt is encoded once per target, not per
	// request. Synthetic prompts differ per request and have none.
	items     []item
	synthetic *config.TokenCount
	random    bool
	next      atomic.Uint64

	mu sync.Mutex
	// promptRNG picks prompts and synthetic lengths and words; tokenRNG
	// draws max_tokens. They are separate so that each seed alone makes
	// its part reproducible.
	promptRNG, tokenRNG *rand.Rand
}

// Draw is one request and what it should come back with.
type Draw struct {
	Request *probe.Request
	// InputTokens is the prompt length a synthetic prompt aims at (system
	// prompt included, chat template not); zero for other prompts.
	InputTokens int
}

// New prepares the prompts of w once, so each request costs little.
func New(w *config.Workload) *Generator {
	g := &Generator{
		cfg:       w,
		random:    w.Prompts.Selection == "random",
		promptRNG: newRand(w.Prompts.Seed),
		tokenRNG:  newRand(w.MaxTokens.Seed),
	}
	switch {
	case w.Prompts.Synthetic != nil:
		g.synthetic = &w.Prompts.Synthetic.InputTokens
	case w.Prompts.File != "":
		g.prompts = w.Prompts.Loaded
	default:
		g.prompts = w.Prompts.Inline
	}
	if g.synthetic == nil && len(g.prompts) == 0 {
		// Only a hand-built config gets here; the loader never does.
		g.prompts = []config.Prompt{{Text: "Hello"}}
	}
	if g.synthetic == nil {
		g.items = make([]item, len(g.prompts))
		for i, p := range g.prompts {
			g.items[i] = newItem(p, w.Prompts.System)
			if len(g.prompts) <= maxCachedPrompts {
				g.items[i].bodies = &probe.BodyCache{}
			}
		}
	}
	return g
}

// maxCachedPrompts bounds the prompts whose encoded bodies a generator
// keeps. Every probe has a generator of its own, so a large prompt file
// cached whole would be copied once per probe; its requests are encoded
// per request instead, as before.
const maxCachedPrompts = 1024

// item is one prompt as every request drawn from it carries it. Requests
// share its slices and body cache; the slices are clipped so that a
// caller appending to a request's messages gets a copy.
type item struct {
	prompt   string
	messages []probe.Message
	bodies   *probe.BodyCache
}

func newItem(prompt config.Prompt, system string) item {
	var it item
	if prompt.Messages == nil {
		it.prompt = prompt.Text
		if system != "" {
			it.messages = append(it.messages, probe.Message{Role: "system", Content: system})
		}
		it.messages = append(it.messages, probe.Message{Role: "user", Content: prompt.Text})
	} else {
		// A conversation that brings its own system message keeps it.
		if r := prompt.Messages[0].Role; system != "" && r != "system" && r != "developer" {
			it.messages = append(it.messages, probe.Message{Role: "system", Content: system})
		}
		for _, m := range prompt.Messages {
			it.messages = append(it.messages, probe.Message{Role: m.Role, Content: m.Content})
		}
	}
	it.messages = slices.Clip(it.messages)
	return it
}

func newRand(seed *int64) *rand.Rand {
	if seed == nil {
		return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return rand.New(rand.NewPCG(uint64(*seed), 0x6c6c6d2d70726f62))
}

// Next returns the next request.
func (g *Generator) Next(model string) *probe.Request { return g.Draw(model).Request }

// Draw returns the next request with its expected lengths. Sequential
// selection takes prompts in order, round robin, so every prompt is probed
// equally often; random selection draws with replacement.
func (g *Generator) Draw(model string) Draw {
	w := g.cfg
	req := &probe.Request{
		Model:       model,
		Stream:      true,
		Temperature: w.Temperature,
		TopP:        w.TopP,
		Seed:        w.Seed,
		Stop:        w.Stop,
		IgnoreEOS:   w.IgnoreEOS,
		Extra:       w.ExtraBody,
	}
	var draw Draw
	var it item
	g.mu.Lock()
	req.MaxTokens = SampleMaxTokens(&w.MaxTokens, g.tokenRNG)
	switch {
	case g.synthetic != nil:
		n := SampleTokens(*g.synthetic, g.promptRNG)
		// A prompt of its own: no body cache, nothing to reuse.
		it = newItem(config.Prompt{Text: syntheticText(n, g.promptRNG)}, w.Prompts.System)
		draw.InputTokens = n + len(strings.Fields(w.Prompts.System))
	case g.random:
		it = g.items[g.promptRNG.IntN(len(g.items))]
	}
	g.mu.Unlock()
	if g.synthetic == nil && !g.random {
		i := g.next.Add(1) - 1
		it = g.items[i%uint64(len(g.items))]
	}
	req.MinTokens = min(w.MinTokens, req.MaxTokens)
	req.Prompt, req.Messages, req.Bodies = it.prompt, it.messages, it.bodies
	draw.Request = req
	return draw
}

// maxTokenCount is the largest length a draw may return.
const maxTokenCount = 1 << 20

// SampleMaxTokens draws one max_tokens value from m, as the Locust LLM load
// test does: uniform over mean·(1 ± range), normal with standard deviation
// mean·range, exponential with the given mean; then cut at cap and kept at
// least 1.
func SampleMaxTokens(m *config.MaxTokens, rng *rand.Rand) int {
	mean := float64(m.Mean)
	var v float64
	switch m.Distribution {
	case "uniform":
		v = mean * (1 - m.Range + 2*m.Range*rng.Float64())
	case "normal":
		v = mean + rng.NormFloat64()*mean*m.Range
	case "exponential":
		v = rng.ExpFloat64() * mean
	default:
		v = mean
	}
	n := clampTokens(v)
	if m.Cap > 0 {
		n = min(n, m.Cap)
	}
	return n
}

// SampleTokens draws a synthetic prompt length: normal around the mean,
// at least 1.
func SampleTokens(t config.TokenCount, rng *rand.Rand) int {
	if t.Stddev == 0 {
		return max(t.Mean, 1)
	}
	return clampTokens(float64(t.Mean) + rng.NormFloat64()*float64(t.Stddev))
}

func clampTokens(v float64) int {
	if math.IsNaN(v) {
		return 1
	}
	return int(min(max(math.Round(v), 1), maxTokenCount))
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
		// A stride coprime to the vocabulary size avoids short repeats.
		b.WriteString(commonWords[(i*37)%len(commonWords)])
	}
	return b.String()
}

// syntheticText returns n random words. Each request's prompt differs from
// the first word on, so a server's prefix cache cannot serve probes from
// cache and make TTFT look better than users' fresh prompts get.
func syntheticText(n int, rng *rand.Rand) string {
	var b strings.Builder
	b.Grow(n * 7)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(commonWords[rng.IntN(len(commonWords))])
	}
	return b.String()
}

// RandomText returns n random common words (about n tokens), text no
// server has cached: shared_prefix probes draw a system prompt of their
// own for every run with it, so the first request of a run finds the
// prefix cache cold.
func RandomText(n int, rng *rand.Rand) string { return syntheticText(n, rng) }
