package probe

import (
	"strings"
	"testing"
)

func TestNoteCachedTokens(t *testing.T) {
	for _, c := range []struct {
		data string
		n    int
		has  bool
	}{
		{`{"usage":{"prompt_tokens":900,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":896}}}`, 896, true},
		{`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}}`, 0, true},
		{`{"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}`, 0, false},
		{`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":-1}}}`, 0, false},
		{`{"usage":{"prompt_tokens":9}}`, 0, false},
		{`{"usage":{"prompt_tokens_details":{"cached_tokens":"7"}}}`, 0, false},
	} {
		r := &Result{}
		noteCachedTokens(r, []byte(c.data))
		if r.CachedInputTokens != c.n || r.HasCachedInputTokens != c.has {
			t.Errorf("%s: got %d, %v; want %d, %v", c.data, r.CachedInputTokens, r.HasCachedInputTokens, c.n, c.has)
		}
	}
}

func TestReportCachedTokens(t *testing.T) {
	var with, without strings.Builder
	r := &Result{Outcome: OutcomeSuccess, InputTokens: 900, InputTokensSource: TokenSourceServer}
	if err := WriteReport(&without, "t", "p", r); err != nil {
		t.Fatal(err)
	}
	r.CachedInputTokens, r.HasCachedInputTokens = 896, true
	if err := WriteReport(&with, "t", "p", r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(without.String(), "cached") || !strings.Contains(with.String(), "  cached         896 (server's prefix cache") {
		t.Errorf("without:\n%s\nwith:\n%s", without.String(), with.String())
	}
}
