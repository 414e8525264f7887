package config

import (
	"strings"
	"testing"
)

// TestEmbeddingInputs: inputs left out is 1 text per request; written, it
// must be 1 to 256, and 0 is refused at its line rather than taken as 1.
func TestEmbeddingInputs(t *testing.T) {
	const base = `targets:
  - name: emb
    protocol: openai_embeddings
    url: http://127.0.0.1:8000
    model: m
    embedding: {dimension: 8%s}
    probes: [{name: p, schedule: {every: 15s}}]
`
	for _, tc := range []struct{ inputs, want string }{
		{"", ""},
		{", inputs: 1", ""},
		{", inputs: 256", ""},
		{", inputs: 0", "f.yml:6:31: targets[0].embedding.inputs: want 1 to 256 texts per request, got 0"},
		{", inputs: 257", "targets[0].embedding.inputs: want 1 to 256 texts per request, got 257"},
	} {
		_, err := Parse([]byte(strings.Replace(base, "%s", tc.inputs, 1)), "f.yml", t.TempDir(), func(string) string { return "" })
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("inputs %q: %v", tc.inputs, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("inputs %q: got %v, want %s", tc.inputs, err, tc.want)
		}
	}
}

// TestModuleEmbeddingInputsZero: a module's inputs: 0 is refused as a
// target's is.
func TestModuleEmbeddingInputsZero(t *testing.T) {
	const text = `modules:
  emb:
    protocol: openai_embeddings
    model: m
    allowed_targets: x
    embedding: {inputs: 0}
`
	_, err := Parse([]byte(text), "f.yml", t.TempDir(), func(string) string { return "" })
	if want := "f.yml:6:17: modules.emb.embedding.inputs: want 1 to 256 texts per request, got 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %s", err, want)
	}
}
