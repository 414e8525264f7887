package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Embedding and rerank ("pooling", vLLM's word for both) protocols. They
// do not stream and produce no tokens: a probe measures the round trip and
// its phases, takes the server's input-token count where the answer has
// one, and checks that the answer is usable — finite, non-empty vectors
// of the expected dimension, one per input; one score per document, each
// index once. An answer that is well-formed but fails these checks is
// OutcomeWrongAnswer: a server that answers fast with NaN vectors is down
// for its users.

// Protocol names of the pooling drivers.
const (
	ProtocolOpenAIEmbeddings = "openai_embeddings"
	ProtocolOllamaEmbed      = "ollama_embed"
	ProtocolTEIEmbed         = "tei_embed"
	ProtocolOpenAIRerank     = "openai_rerank"
	ProtocolTEIRerank        = "tei_rerank"
)

// Settings of the pooling protocols (Protocol.Settings).
const (
	SettingsEmbedding = "embedding"
	SettingsRerank    = "rerank"
)

// Limits of PoolingOptions, checked by config.
const (
	MaxEmbeddingInputs = 256
	MaxEmbeddingDim    = 1 << 16
	MaxRerankDocuments = 1000
)

// DefaultRerankDocuments are sent when a rerank target lists none. The
// first is about the default prompt's subject (a lighthouse keeper), so a
// working reranker ranks it first.
func DefaultRerankDocuments() []string {
	return []string{
		"A lighthouse keeper tends the lamp and writes the log each night on the rocky island.",
		"The bakery on the corner sells rye bread and almond pastries every morning.",
		"Quarterly revenue grew by four percent, driven by subscriptions.",
	}
}

// PoolingOptions configures the embedding and rerank drivers
// (TargetOptions.Pooling).
type PoolingOptions struct {
	// Dimension is the vector dimension an embedding must have; 0 accepts
	// any, as long as every vector of an answer has the same one.
	Dimension int
	// Inputs is how many texts one embedding request carries (the drawn
	// prompt, numbered); 0 means 1.
	Inputs int
	// Documents are the texts a rerank request scores against the drawn
	// prompt (the query); empty means DefaultRerankDocuments.
	Documents []string
	// ExpectTop, when set, is the index into Documents that must get the
	// highest score; another winner is a wrong answer.
	ExpectTop *int
}

// PooledAnswer is what an embedding or rerank answer held.
type PooledAnswer struct {
	// Items is the number of vectors (embeddings) or results (rerank).
	Items int
	// Dimension is the vectors' dimension; 0 for rerank.
	Dimension int
	// Top is the index of the best-scored document (rerank); -1 otherwise.
	Top int
}

// pooledKind is what one pooling protocol differs in: the path, the
// request body and the answer's shape.
type pooledKind struct {
	rerank bool
	path   string
	known  []string
	// openAI paths take the /v1 prefix (endpointURL).
	openAI bool
	build  func(model string, inputs []string, query string, docs []string) ([]byte, error)
	parse  func(body []byte, hdr http.Header) (pooledParsed, error)
}

// pooledParsed is a decoded answer, not yet checked.
type pooledParsed struct {
	vectors [][]float64 // embeddings, NaN for null elements
	indexes []int       // per vector or result; nil when the shape has none
	scores  []float64   // rerank
	tokens  int
	hasTok  bool
	// nonJSON marks an answer that is JSON but for bare NaN/Infinity
	// tokens, as Python's json writes non-finite floats.
	nonJSON bool
}

type pooledDriver struct {
	t    *httpTarget
	kind pooledKind
	url  string
	opts PoolingOptions
}

func newPooledDriver(kind pooledKind) func(TargetOptions, *slog.Logger) (Driver, error) {
	return func(opts TargetOptions, logger *slog.Logger) (Driver, error) {
		t, err := newHTTPTarget(opts, logger)
		if err != nil {
			return nil, err
		}
		u := nativeEndpoint(t.base, kind.path, kind.known...)
		if kind.openAI {
			u = endpointURL(t.base, kind.path)
		}
		po := opts.Pooling
		if po.Inputs <= 0 {
			po.Inputs = 1
		}
		if kind.rerank && len(po.Documents) == 0 {
			po.Documents = DefaultRerankDocuments()
		}
		return &pooledDriver{t: t, kind: kind, url: u, opts: po}, nil
	}
}

func (d *pooledDriver) Close() { d.t.close() }

// Probe implements Driver. The request's prompt is the text embedded (or
// the rerank query); a request asking for a stream is answered whole, as
// these APIs cannot stream.
func (d *pooledDriver) Probe(ctx context.Context, req *Request) *Result {
	if req != nil && req.Stream {
		cp := *req
		cp.Stream = false
		req = &cp
	}
	req, r := begin(req)
	defer d.t.done(r)
	text := req.promptText()
	var inputs []string
	if !d.kind.rerank {
		inputs = make([]string, d.opts.Inputs)
		for i := range inputs {
			inputs[i] = text
			if len(inputs) > 1 {
				// Distinct texts, so a server that caches by text still
				// computes each.
				inputs[i] = strconv.Itoa(i+1) + ". " + text
			}
		}
	}
	body, err := d.kind.build(req.modelOr(d.t.opts.Model), inputs, text, d.opts.Documents)
	if err == nil && len(req.Extra) > 0 {
		body, err = mergeExtra(body, req.Extra)
	}
	d.t.roundTrip(ctx, r, d.url, body, err, false, false, d)
	return r
}

// mergeExtra applies a workload's extra_body to a built body.
func mergeExtra(body []byte, extra map[string]any) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		// TEI's bodies are objects too; a non-object cannot take fields.
		return nil, fmt.Errorf("extra_body needs an object body: %w", err)
	}
	setFields(m, extra)
	return json.Marshal(m)
}

func (d *pooledDriver) readStream(ex *exchange, r *Result) { d.readBody(ex, r, false) }

func (d *pooledDriver) readBody(ex *exchange, r *Result, _ bool) {
	data, ok := ex.readAll(r)
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if msg := inBandError(data); msg != "" {
		r.Outcome, r.Err = OutcomeHTTP5xx, fmt.Errorf("server error in a 200 answer: %s", msg)
		return
	}
	p, err := d.kind.parse(data, ex.resp.Header)
	if err != nil {
		if p.nonJSON {
			r.Outcome, r.Err = OutcomeWrongAnswer, fmt.Errorf("answer holds a non-finite number (bare NaN or Infinity, not JSON): %s", sanitize(data))
			return
		}
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("answer is not a valid %s answer (%v): %s", d.what(), err, sanitize(data))
		return
	}
	if p.hasTok {
		r.InputTokens, r.InputTokensSource = max(p.tokens, 0), TokenSourceServer
	}
	if d.kind.rerank {
		r.Pooled, err = checkRerank(p, len(d.opts.Documents), d.opts.ExpectTop)
	} else {
		r.Pooled, err = checkEmbeddings(p, d.opts.Inputs, d.opts.Dimension)
	}
	if err != nil {
		r.Outcome, r.Err = OutcomeWrongAnswer, err
		return
	}
	r.Outcome = OutcomeSuccess
}

func (d *pooledDriver) what() string {
	if d.kind.rerank {
		return "rerank"
	}
	return "embedding"
}

// inBandError finds an error object in a 200 answer ({"error": …}).
func inBandError(data []byte) string {
	if len(data) == 0 || data[0] != '{' {
		return ""
	}
	var f errorFields
	if decodeJSON(data, &f) != nil {
		return ""
	}
	if e, ok := f.apiError(); ok {
		return e.Error()
	}
	return ""
}

// checkEmbeddings checks one answer's vectors against what was asked.
func checkEmbeddings(p pooledParsed, inputs, dim int) (*PooledAnswer, error) {
	if len(p.vectors) != inputs {
		return nil, fmt.Errorf("answer has %d vectors for %d inputs", len(p.vectors), inputs)
	}
	if err := checkIndexes(p.indexes, inputs, "vector"); err != nil {
		return nil, err
	}
	a := &PooledAnswer{Items: len(p.vectors), Top: -1}
	for i, v := range p.vectors {
		if len(v) == 0 {
			return nil, fmt.Errorf("vector %d is empty", i)
		}
		if i == 0 {
			a.Dimension = len(v)
		} else if len(v) != a.Dimension {
			return nil, fmt.Errorf("vector %d has dimension %d, vector 0 has %d", i, len(v), a.Dimension)
		}
		var norm float64
		for j, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("vector %d element %d is not a finite number (NaN, Inf or null)", i, j)
			}
			norm += x * x
		}
		if norm == 0 {
			return nil, fmt.Errorf("vector %d is all zeros (no direction: similarity with it is undefined)", i)
		}
	}
	if dim > 0 && a.Dimension != dim {
		return nil, fmt.Errorf("vectors have dimension %d, the target's embedding.dimension is %d (wrong model behind the name?)", a.Dimension, dim)
	}
	return a, nil
}

// checkIndexes: when the answer numbers its items, each of 0..n-1 once.
func checkIndexes(idx []int, n int, what string) error {
	if idx == nil {
		return nil
	}
	seen := make([]bool, n)
	for _, i := range idx {
		if i < 0 || i >= n {
			return fmt.Errorf("%s index %d is outside 0..%d", what, i, n-1)
		}
		if seen[i] {
			return fmt.Errorf("%s index %d appears twice", what, i)
		}
		seen[i] = true
	}
	return nil
}

// checkRerank checks one rerank answer against the documents sent.
func checkRerank(p pooledParsed, docs int, expectTop *int) (*PooledAnswer, error) {
	if len(p.scores) != docs {
		return nil, fmt.Errorf("answer has %d results for %d documents", len(p.scores), docs)
	}
	if len(p.indexes) != len(p.scores) {
		return nil, fmt.Errorf("answer has %d indexes for %d scores", len(p.indexes), len(p.scores))
	}
	if err := checkIndexes(p.indexes, docs, "result"); err != nil {
		return nil, err
	}
	a := &PooledAnswer{Items: len(p.scores), Top: -1}
	best := math.Inf(-1)
	for i, s := range p.scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("result %d (document %d) has a score that is not a finite number", i, p.indexes[i])
		}
		if s > best {
			best, a.Top = s, p.indexes[i]
		}
	}
	if expectTop != nil && a.Top != *expectTop {
		return nil, fmt.Errorf("document %d ranked first, expected document %d (rerank.expect_top)", a.Top, *expectTop)
	}
	return a, nil
}

// number is a JSON number that may be null (llama.cpp and serde_json
// write non-finite floats as null); null decodes as NaN.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = number(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("not a number: %.20s", b)
	}
	*n = number(f)
	return nil
}

// score is a number that must be present; null reads as NaN.
type score struct {
	set bool
	v   number
}

func (s *score) UnmarshalJSON(b []byte) error {
	s.set = true
	return s.v.UnmarshalJSON(b)
}

func floats(v []number) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// decodePooled is decodeJSON that also recognises bare NaN/Infinity.
func decodePooled(b []byte, v any, p *pooledParsed) error {
	err := decodeJSON(b, v)
	if err != nil && hasBareNonFinite(b) {
		p.nonJSON = true
	}
	return err
}

// hasBareNonFinite reports whether b, outside strings, holds NaN,
// Infinity or -Infinity: what Python's json.dumps writes for non-finite
// floats by default, and so what a Python server sends for a NaN vector.
func hasBareNonFinite(b []byte) bool {
	in, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == 'N' && hasPrefixAt(b, i, "NaN") || c == 'I' && hasPrefixAt(b, i, "Infinity")):
			return true
		}
	}
	return false
}

func hasPrefixAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// usage is the OpenAI-style usage object of embedding and rerank answers.
type usage struct {
	PromptTokens *int `json:"prompt_tokens"`
	TotalTokens  *int `json:"total_tokens"`
}

// inputTokens: prompt_tokens, else total_tokens (vLLM's rerank gives only
// that; with no output, total is the input).
func (u *usage) inputTokens(p *pooledParsed) {
	if u == nil {
		return
	}
	switch {
	case u.PromptTokens != nil:
		p.tokens, p.hasTok = *u.PromptTokens, true
	case u.TotalTokens != nil:
		p.tokens, p.hasTok = *u.TotalTokens, true
	}
}

// OpenAI /v1/embeddings (vLLM, llama.cpp, SGLang): {model, input: [...],
// encoding_format: "float"} → {data: [{index, embedding: [...]}], usage}.
var openAIEmbeddingsKind = pooledKind{
	path: "/embeddings", openAI: true,
	build: func(model string, inputs []string, _ string, _ []string) ([]byte, error) {
		m := map[string]any{"input": inputs, "encoding_format": "float"}
		if model != "" {
			m["model"] = model
		}
		return json.Marshal(m)
	},
	parse: func(body []byte, _ http.Header) (pooledParsed, error) {
		var p pooledParsed
		var a struct {
			Data []struct {
				Index     *int     `json:"index"`
				Embedding []number `json:"embedding"`
			} `json:"data"`
			Usage *usage `json:"usage"`
		}
		if err := decodePooled(body, &a, &p); err != nil {
			return p, err
		}
		if a.Data == nil {
			return p, fmt.Errorf("no data array")
		}
		p.indexes = make([]int, 0, len(a.Data))
		for _, d := range a.Data {
			if d.Index == nil {
				p.indexes = nil
			} else if p.indexes != nil {
				p.indexes = append(p.indexes, *d.Index)
			}
			p.vectors = append(p.vectors, floats(d.Embedding))
		}
		a.Usage.inputTokens(&p)
		return p, nil
	},
}

// Ollama /api/embed: {model, input: [...]} → {embeddings: [[...]],
// prompt_eval_count}.
var ollamaEmbedKind = pooledKind{
	path: "/api/embed", known: []string{"/api/embed"},
	build: func(model string, inputs []string, _ string, _ []string) ([]byte, error) {
		return json.Marshal(map[string]any{"model": model, "input": inputs})
	},
	parse: func(body []byte, _ http.Header) (pooledParsed, error) {
		var p pooledParsed
		var a struct {
			Embeddings      [][]number `json:"embeddings"`
			PromptEvalCount *int       `json:"prompt_eval_count"`
		}
		if err := decodePooled(body, &a, &p); err != nil {
			return p, err
		}
		if a.Embeddings == nil {
			return p, fmt.Errorf("no embeddings array")
		}
		for _, v := range a.Embeddings {
			p.vectors = append(p.vectors, floats(v))
		}
		if a.PromptEvalCount != nil {
			p.tokens, p.hasTok = *a.PromptEvalCount, true
		}
		return p, nil
	},
}

// teiTokens reads TEI's x-compute-tokens header (the tokens the request
// computed), when present.
func teiTokens(h http.Header, p *pooledParsed) {
	if v := h.Get("X-Compute-Tokens"); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			p.tokens, p.hasTok = n, true
		}
	}
}

// text-embeddings-inference /embed: {inputs: [...]} → [[...], ...].
var teiEmbedKind = pooledKind{
	path: "/embed", known: []string{"/embed"},
	build: func(_ string, inputs []string, _ string, _ []string) ([]byte, error) {
		return json.Marshal(map[string]any{"inputs": inputs})
	},
	parse: func(body []byte, h http.Header) (pooledParsed, error) {
		var p pooledParsed
		var a [][]number
		if err := decodePooled(body, &a, &p); err != nil {
			return p, err
		}
		if a == nil {
			return p, fmt.Errorf("null instead of an array of vectors")
		}
		for _, v := range a {
			p.vectors = append(p.vectors, floats(v))
		}
		teiTokens(h, &p)
		return p, nil
	},
}

// /v1/rerank as vLLM and llama.cpp serve it (Jina/Cohere style): {model,
// query, documents, top_n} → {results: [{index, relevance_score}], usage}.
var openAIRerankKind = pooledKind{
	rerank: true, path: "/rerank", openAI: true,
	build: func(model string, _ []string, query string, docs []string) ([]byte, error) {
		m := map[string]any{"query": query, "documents": docs, "top_n": len(docs)}
		if model != "" {
			m["model"] = model
		}
		return json.Marshal(m)
	},
	parse: func(body []byte, _ http.Header) (pooledParsed, error) {
		var p pooledParsed
		var a struct {
			Results []struct {
				Index *int  `json:"index"`
				Score score `json:"relevance_score"`
			} `json:"results"`
			Usage *usage `json:"usage"`
		}
		if err := decodePooled(body, &a, &p); err != nil {
			return p, err
		}
		if a.Results == nil {
			return p, fmt.Errorf("no results array")
		}
		for i, r := range a.Results {
			if r.Index == nil || !r.Score.set {
				return p, fmt.Errorf("result %d lacks index or relevance_score", i)
			}
			p.indexes = append(p.indexes, *r.Index)
			p.scores = append(p.scores, float64(r.Score.v))
		}
		a.Usage.inputTokens(&p)
		return p, nil
	},
}

// text-embeddings-inference /rerank: {query, texts} → [{index, score}].
var teiRerankKind = pooledKind{
	rerank: true, path: "/rerank", known: []string{"/rerank"},
	build: func(_ string, _ []string, query string, docs []string) ([]byte, error) {
		return json.Marshal(map[string]any{"query": query, "texts": docs})
	},
	parse: func(body []byte, h http.Header) (pooledParsed, error) {
		var p pooledParsed
		var a []struct {
			Index *int  `json:"index"`
			Score score `json:"score"`
		}
		if err := decodePooled(body, &a, &p); err != nil {
			return p, err
		}
		if a == nil {
			return p, fmt.Errorf("null instead of an array of results")
		}
		for i, r := range a {
			if r.Index == nil || !r.Score.set {
				return p, fmt.Errorf("result %d lacks index or score", i)
			}
			p.indexes = append(p.indexes, *r.Index)
			p.scores = append(p.scores, float64(r.Score.v))
		}
		teiTokens(h, &p)
		return p, nil
	},
}
