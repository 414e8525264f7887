package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/probe"
)

func TestSyntheticTextHasRequestedWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 512, 4096} {
		if got := len(strings.Fields(SyntheticText(n))); got != n {
			t.Errorf("SyntheticText(%d) has %d words", n, got)
		}
		if got := len(strings.Fields(syntheticText(n, rng))); got != n {
			t.Errorf("syntheticText(%d) has %d words", n, got)
		}
	}
}

func TestGeneratorRoundRobinAndFields(t *testing.T) {
	temp := 0.0
	w := &config.Workload{
		Prompts:     config.Prompts{System: "be brief", Inline: []config.Prompt{{Text: "a"}, {Text: "b"}}, Selection: "sequential"},
		MaxTokens:   config.MaxTokens{Distribution: "constant", Mean: 32},
		IgnoreEOS:   true,
		MinTokens:   4,
		Temperature: &temp,
	}
	g := New(w)
	var got []string
	for range 4 {
		r := g.Next("m")
		got = append(got, r.Prompt)
		if r.Model != "m" || r.MaxTokens != 32 || !r.IgnoreEOS || r.MinTokens != 4 || r.Temperature == nil || !r.Stream {
			t.Fatalf("request fields: %+v", r)
		}
		if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Content != r.Prompt {
			t.Fatalf("messages: %+v", r.Messages)
		}
	}
	if strings.Join(got, ",") != "a,b,a,b" {
		t.Errorf("prompts not round robin: %v", got)
	}
}

func TestChatPromptsAndSystem(t *testing.T) {
	conv := config.Prompt{Messages: []config.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: "joke?"}}}
	own := config.Prompt{Messages: []config.Message{{Role: "system", Content: "terse"}, {Role: "user", Content: "2+2?"}}}
	g := New(&config.Workload{
		Prompts:   config.Prompts{System: "be brief", Inline: []config.Prompt{conv, own}, Selection: "sequential"},
		MaxTokens: config.MaxTokens{Distribution: "constant", Mean: 8},
	})
	r := g.Next("m")
	if len(r.Messages) != 4 || r.Messages[0].Content != "be brief" || r.Messages[3].Content != "joke?" || r.Prompt != "" {
		t.Errorf("conversation: %+v", r.Messages)
	}
	r = g.Next("m")
	if len(r.Messages) != 2 || r.Messages[0].Content != "terse" {
		t.Errorf("a conversation's own system message must win: %+v", r.Messages)
	}
}

func TestRandomSelectionIsSeeded(t *testing.T) {
	seed := int64(7)
	w := &config.Workload{
		Prompts:   config.Prompts{Inline: []config.Prompt{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Text: "d"}}, Selection: "random", Seed: &seed},
		MaxTokens: config.MaxTokens{Distribution: "constant", Mean: 8},
	}
	seq := func() (string, map[string]int) {
		g := New(w)
		var b strings.Builder
		counts := map[string]int{}
		for range 4000 {
			p := g.Next("m").Prompt
			b.WriteString(p)
			counts[p]++
		}
		return b.String(), counts
	}
	s1, counts := seq()
	s2, _ := seq()
	if s1 != s2 {
		t.Error("same seed, different order")
	}
	for p, n := range counts {
		if n < 850 || n > 1150 {
			t.Errorf("prompt %s drawn %d of 4000 times", p, n)
		}
	}
}

func TestSyntheticLengths(t *testing.T) {
	seed := int64(3)
	g := New(&config.Workload{
		Prompts:   config.Prompts{System: "two words", Synthetic: &config.Synthetic{InputTokens: config.TokenCount{Mean: 200, Stddev: 20}}, Seed: &seed},
		MaxTokens: config.MaxTokens{Distribution: "constant", Mean: 8},
	})
	var sum, sq float64
	const n = 4000
	for range n {
		d := g.Draw("m")
		words := len(strings.Fields(d.Request.Prompt))
		if d.InputTokens != words+2 {
			t.Fatalf("expected input %d for %d words + system", d.InputTokens, words)
		}
		sum += float64(words)
		sq += float64(words) * float64(words)
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-200) > 2 || math.Abs(sd-20) > 2 {
		t.Errorf("synthetic lengths mean %.1f sd %.1f, want 200 and 20", mean, sd)
	}
}

func TestMaxTokensDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 20000
	for _, tc := range []struct {
		m              config.MaxTokens
		mean, sd       float64
		lo, hi         int
		meanTol, sdTol float64
	}{
		{m: config.MaxTokens{Distribution: "constant", Mean: 128}, mean: 128, sd: 0, lo: 128, hi: 128},
		// Uniform over 128·(1 ± 0.5): sd = 128·0.5/√3.
		{m: config.MaxTokens{Distribution: "uniform", Mean: 128, Range: 0.5}, mean: 128, sd: 36.95, lo: 64, hi: 192, meanTol: 1, sdTol: 1},
		{m: config.MaxTokens{Distribution: "normal", Mean: 128, Range: 0.2}, mean: 128, sd: 25.6, lo: 1, hi: 1 << 20, meanTol: 1, sdTol: 1},
		{m: config.MaxTokens{Distribution: "exponential", Mean: 100}, mean: 100, sd: 100, lo: 1, hi: 1 << 20, meanTol: 3, sdTol: 4},
		// The cap cuts the tail; the lower bound keeps every draw ≥ 1.
		{m: config.MaxTokens{Distribution: "exponential", Mean: 100, Cap: 150}, lo: 1, hi: 150, mean: 100 * (1 - math.Exp(-1.5)), meanTol: 3, sd: -1},
		{m: config.MaxTokens{Distribution: "normal", Mean: 4, Range: 1}, lo: 1, hi: 1 << 20, sd: -1, mean: -1},
	} {
		var sum, sq float64
		for range n {
			v := SampleMaxTokens(&tc.m, rng)
			if v < tc.lo || v > tc.hi {
				t.Fatalf("%+v: draw %d outside [%d, %d]", tc.m, v, tc.lo, tc.hi)
			}
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		mean := sum / n
		sd := math.Sqrt(max(sq/n-mean*mean, 0))
		if tc.mean >= 0 && math.Abs(mean-tc.mean) > tc.meanTol+1e-9 {
			t.Errorf("%+v: mean %.2f, want %.2f ± %.1f", tc.m, mean, tc.mean, tc.meanTol)
		}
		if tc.sd >= 0 && math.Abs(sd-tc.sd) > tc.sdTol+1e-9 {
			t.Errorf("%+v: sd %.2f, want %.2f ± %.1f", tc.m, sd, tc.sd, tc.sdTol)
		}
	}
}

func TestMinTokensFollowsDraw(t *testing.T) {
	seed := int64(1)
	g := New(&config.Workload{
		Prompts:   config.Prompts{Inline: []config.Prompt{{Text: "x"}}},
		MaxTokens: config.MaxTokens{Distribution: "uniform", Mean: 20, Range: 0.5, Seed: &seed},
		MinTokens: 20,
	})
	for range 200 {
		r := g.Next("m")
		if r.MinTokens > r.MaxTokens {
			t.Fatalf("min_tokens %d above max_tokens %d: the server would refuse it", r.MinTokens, r.MaxTokens)
		}
	}
}

func TestFilePrompts(t *testing.T) {
	cfg, err := config.Load("../config/testdata/good/schedules.yml")
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Workloads["from-file"]
	if len(w.Prompts.Loaded) != 3 {
		t.Fatalf("%d prompts loaded from the file, want 3", len(w.Prompts.Loaded))
	}
	g := New(w)
	seen := map[string]bool{}
	for range 100 {
		r := g.Next("m")
		seen[r.Messages[len(r.Messages)-1].Content] = true
	}
	if len(seen) != 3 {
		t.Errorf("random selection reached %d of 3 prompts", len(seen))
	}
}

// Requests of one prompt share its body cache, so a driver encodes the
// prompt once; each prompt has its own, synthetic prompts none, and a
// request's messages can be extended without touching the next draw's.
func TestGeneratorBodyCachePerPrompt(t *testing.T) {
	w := &config.Workload{
		Prompts:   config.Prompts{System: "s", Inline: []config.Prompt{{Text: "a"}, {Text: "b"}}, Selection: "sequential"},
		MaxTokens: config.MaxTokens{Distribution: "uniform", Mean: 32, Range: 0.5},
	}
	g := New(w)
	a1, b1, a2 := g.Next("m"), g.Next("m"), g.Next("m")
	if a1.Bodies == nil || a1.Bodies != a2.Bodies || a1.Bodies == b1.Bodies {
		t.Fatalf("caches: a %p, b %p, a again %p", a1.Bodies, b1.Bodies, a2.Bodies)
	}
	a1.Messages = append(a1.Messages, probe.Message{Role: "assistant", Content: "x"})
	if a3 := g.Next("m"); len(a3.Messages) != 2 || len(a2.Messages) != 2 {
		t.Errorf("appending to a drawn request changed the prompt's messages: %+v", a3.Messages)
	}
	syn := New(&config.Workload{Prompts: config.Prompts{Synthetic: &config.Synthetic{InputTokens: config.TokenCount{Mean: 8}}}})
	if r := syn.Next("m"); r.Bodies != nil {
		t.Errorf("a synthetic prompt has a body cache")
	}
}

// A workload of more prompts than maxCachedPrompts keeps no bodies: each
// probe would hold a copy of the whole file.
func TestGeneratorNoBodyCacheForManyPrompts(t *testing.T) {
	prompts := make([]config.Prompt, maxCachedPrompts+1)
	for i := range prompts {
		prompts[i].Text = "p"
	}
	g := New(&config.Workload{Prompts: config.Prompts{Inline: prompts}, MaxTokens: config.MaxTokens{Mean: 8}})
	if r := g.Next("m"); r.Bodies != nil {
		t.Error("a request of a large prompt set has a body cache")
	}
}
