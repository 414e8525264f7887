package workload

import (
	"strings"
	"testing"

	"github.com/llm-prober/llm-prober/config"
)

func TestSyntheticTextHasRequestedWords(t *testing.T) {
	for _, n := range []int{1, 7, 512, 4096} {
		if got := len(strings.Fields(SyntheticText(n))); got != n {
			t.Errorf("SyntheticText(%d) has %d words", n, got)
		}
	}
}

func TestGeneratorRoundRobinAndFields(t *testing.T) {
	temp := 0.0
	w := &config.Workload{
		Prompts:     config.Prompts{System: "be brief", Inline: []string{"a", "b"}},
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
