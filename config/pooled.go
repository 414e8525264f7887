package config

import (
	"fmt"
	"slices"

	"github.com/llm-prober/llm-prober/probe"
)

// Embedding is what an embedding target's answers must be:
//
//	embedding: {dimension: 1024, inputs: 4}
type Embedding struct {
	// Dimension is the vectors' expected dimension (0: any, consistent).
	Dimension int `yaml:"dimension"`
	// Inputs is how many texts one request embeds (default 1).
	Inputs int `yaml:"inputs"`
}

// Rerank is what a rerank target scores:
//
//	rerank:
//	  documents: ["…", "…"]
//	  expect_top: 0
type Rerank struct {
	// Documents are scored against the workload's prompt (the query);
	// the built-in three when empty.
	Documents []string `yaml:"documents,omitempty"`
	// ExpectTop is the index of the document that must rank first.
	ExpectTop *int `yaml:"expect_top,omitempty"`
}

// maxDocumentBytes bounds one rerank document, so a config cannot make
// every request megabytes long by accident.
const maxDocumentBytes = 64 << 10

func isEmbedding(p probe.Protocol) bool { return p.Settings == probe.SettingsEmbedding }
func isRerank(p probe.Protocol) bool    { return p.Settings == probe.SettingsRerank }

// validatePooling checks the embedding: and rerank: blocks.
func validatePooling(d *decoder, path string, t *Target) {
	if e := t.Embedding; e != nil {
		ep := path + ".embedding"
		if !protocolIs(t.Protocol, isEmbedding) {
			d.at(ep, "embedding settings apply to %s only, not %s", protocolNames(isEmbedding), t.Protocol)
		}
		if e.Dimension < 0 || e.Dimension > probe.MaxEmbeddingDim {
			d.at(ep+".dimension", "want 0 (any) to %d, got %d", probe.MaxEmbeddingDim, e.Dimension)
		}
		if e.Inputs < 1 || e.Inputs > probe.MaxEmbeddingInputs {
			d.at(ep+".inputs", "want 1 to %d texts per request, got %d", probe.MaxEmbeddingInputs, e.Inputs)
		}
	}
	r := t.Rerank
	if r == nil {
		return
	}
	rp := path + ".rerank"
	if !protocolIs(t.Protocol, isRerank) {
		d.at(rp, "rerank settings apply to %s only, not %s", protocolNames(isRerank), t.Protocol)
	}
	if len(r.Documents) > probe.MaxRerankDocuments {
		d.at(rp+".documents", "at most %d documents, got %d", probe.MaxRerankDocuments, len(r.Documents))
	}
	for i, doc := range r.Documents {
		if doc == "" || len(doc) > maxDocumentBytes {
			d.at(fmt.Sprintf("%s.documents[%d]", rp, i), "a document must be 1 to %d bytes of text", maxDocumentBytes)
		}
	}
	if k := r.ExpectTop; k != nil {
		n := len(r.Documents)
		if n == 0 {
			n = len(probe.DefaultRerankDocuments())
		}
		if *k < 0 || *k >= n {
			d.at(rp+".expect_top", "document index %d is not among the %d documents (0 to %d)", *k, n, n-1)
		}
	}
}

// poolingOptions is the embedding: or rerank: block in the driver's terms.
func (t *Target) poolingOptions() probe.PoolingOptions {
	var o probe.PoolingOptions
	if e := t.Embedding; e != nil {
		o.Dimension, o.Inputs = e.Dimension, e.Inputs
	}
	if r := t.Rerank; r != nil {
		o.Documents = slices.Clone(r.Documents)
		if r.ExpectTop != nil {
			o.ExpectTop = new(*r.ExpectTop)
		}
	}
	return o
}
