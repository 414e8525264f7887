package probe

import (
	"bytes"
	"encoding/json"
)

// noteCachedTokens reads prompt_tokens_details.cached_tokens from a chunk
// or answer that carried usage (once per stream: vLLM with
// --enable-prompt-tokens-details, OpenAI, SGLang). Like the reasoning
// count it stays off the per-chunk fast path: only a chunk with usage
// that names the key is decoded again.
func noteCachedTokens(r *Result, data []byte) {
	if !bytes.Contains(data, []byte(`"cached_tokens"`)) {
		return
	}
	var v struct {
		Usage struct {
			Details struct {
				CachedTokens *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &v) != nil || v.Usage.Details.CachedTokens == nil || *v.Usage.Details.CachedTokens < 0 {
		return
	}
	r.CachedInputTokens, r.HasCachedInputTokens = *v.Usage.Details.CachedTokens, true
}
