package simulator

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func prefixWords(prefix string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = prefix + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	return strings.Join(w, " ")
}

func TestPrefixCacheBlocks(t *testing.T) {
	c := newPrefixCache(PrefixCacheConfig{BlockTokens: 16, CapacityTokens: 1 << 16})
	system := prefixWords("s", 100) // 6 full blocks and 4 words
	a := system + " " + prefixWords("a", 20)
	b := system + " " + prefixWords("b", 20)
	if got := c.admit(c.blockHashes(a), 120); got != 0 {
		t.Fatalf("cold prompt: %d cached tokens, want 0", got)
	}
	// The shared 96 words are 6 blocks; block 7 mixes system and suffix.
	if got := c.admit(c.blockHashes(b), 120); got != 96 {
		t.Errorf("same system prompt, other suffix: %d cached tokens, want 96", got)
	}
	// The same prompt again: all 7 full blocks, the last token computed.
	if got := c.admit(c.blockHashes(a), 120); got != 112 {
		t.Errorf("repeated prompt: %d cached tokens, want 112", got)
	}
	// A prompt of exactly 2 blocks keeps its last block uncached.
	two := prefixWords("t", 32)
	c.admit(c.blockHashes(two), 32)
	if got := c.admit(c.blockHashes(two), 32); got != 16 {
		t.Errorf("exact 2-block prompt again: %d cached tokens, want 16", got)
	}
	// Chained hashes: the same block after another prefix is not a hit.
	if got := c.admit(c.blockHashes(prefixWords("x", 16)+" "+system), 116); got != 0 {
		t.Errorf("system prompt after another block: %d cached tokens, want 0", got)
	}
}

func TestPrefixCacheEviction(t *testing.T) {
	c := newPrefixCache(PrefixCacheConfig{BlockTokens: 16, CapacityTokens: 64}) // 4 blocks
	a, b := prefixWords("a", 48), prefixWords("b", 48)                          // 3 blocks each
	c.admit(c.blockHashes(a), 49)
	c.admit(c.blockHashes(b), 49) // evicts a's oldest blocks
	if n := c.cachedBlocks(); n != 4 {
		t.Fatalf("cache holds %d blocks, want 4", n)
	}
	// a's first block went first (least recently used), so a misses at
	// its first block although its third is still held.
	if got := c.admit(c.blockHashes(a), 49); got != 0 {
		t.Errorf("evicted prefix: %d cached tokens, want 0", got)
	}
	// a's blocks went back in as the most recent and pushed out b's
	// first two, so b misses at its first block too.
	if got := c.admit(c.blockHashes(b), 49); got != 0 {
		t.Errorf("b after a: %d cached tokens, want 0 (evicted)", got)
	}
	off := newPrefixCache(PrefixCacheConfig{BlockTokens: 16})
	off.admit(off.blockHashes(a), 49)
	if got := off.admit(off.blockHashes(a), 49); got != 0 || off.cachedBlocks() != 0 {
		t.Errorf("zero capacity: %d cached tokens, %d blocks; want none", got, off.cachedBlocks())
	}
}

// TestPrefixCachePrefill checks the ground truth over HTTP: the prefill
// skips cached tokens, so a warm request's server-side TTFT is far below
// the cold one's; usage reports cached_tokens; X-Sim-Options turns the
// cache off per request; /metrics counts queries and hits.
func TestPrefixCachePrefill(t *testing.T) {
	cfg := fastConfig()
	cfg.Latency.TTFTBase = 2 * time.Millisecond
	cfg.Latency.PrefillPerToken = 100 * time.Microsecond
	cfg.PrefixCache.Enabled = true
	ts := startServer(t, cfg)
	system := prefixWords("s", 800)
	send := func(id, user string, headers ...string) RequestRecord {
		body := chatBody(4, map[string]any{
			"messages":       []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
			"stream_options": map[string]any{"include_usage": true},
		})
		resp := ts.post(t, "/v1/chat/completions", body, append([]string{"X-Request-Id", id}, headers...)...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", id, resp.StatusCode, b)
		}
		// Usage reports cached_tokens only while the cache serves the request.
		if has, want := strings.Contains(string(b), `"prompt_tokens_details"`), len(headers) == 0; has != want {
			t.Errorf("%s: prompt_tokens_details present %v, want %v: %s", id, has, want, b)
		}
		return ts.truth(t, id)
	}
	prefill := func(r RequestRecord) time.Duration {
		return time.Duration(r.FirstTokenWriteUnixNano - r.AdmittedUnixNano)
	}
	cold := send("cold", prefixWords("u", 10))
	warm := send("warm", prefixWords("v", 10))
	off := send("off", prefixWords("w", 10), "X-Sim-Options", "prefix_cache=false")
	if cold.CachedPromptTokens != 0 || warm.CachedPromptTokens != 800 || off.CachedPromptTokens != 0 {
		t.Errorf("cached tokens cold %d, warm %d, off %d; want 0, 800, 0", cold.CachedPromptTokens, warm.CachedPromptTokens, off.CachedPromptTokens)
	}
	// cold and off prefill 810 tokens (≈ 83 ms), warm 10 (≈ 3 ms).
	if prefill(warm)*5 > prefill(cold) || prefill(warm)*5 > prefill(off) {
		t.Errorf("prefill cold %s, warm %s, off %s; want warm < cold/5", prefill(cold), prefill(warm), prefill(off))
	}
	t.Logf("prefill cold %s, warm %s, cache off %s", prefill(cold), prefill(warm), prefill(off))
	_, m := ts.get(t, "/metrics")
	for _, want := range []string{
		`vllm:prefix_cache_queries_total{engine="0",model_name="sim-llm"} 1620`,
		`vllm:prefix_cache_hits_total{engine="0",model_name="sim-llm"} 800`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
