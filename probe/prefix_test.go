package probe

import "testing"

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
