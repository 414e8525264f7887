package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Embedding and rerank endpoints: OpenAI-style /v1/embeddings (vLLM,
// llama.cpp), Ollama's /api/embed, text-embeddings-inference's /embed,
// /v1/rerank (vLLM, llama.cpp) and TEI's /rerank. They do not go through
// the generation engine: an embedding is one forward pass, so the answer
// comes after latency.ttft_base + latency.prefill_per_token × input words,
// with the same jitter as everything else. Vectors are a deterministic
// function of the text, and rerank scores the share of a document's
// words found in the query, so tests know the right answer.

// HeaderPooledFault makes one embedding or rerank answer wrong on
// purpose: nan (a NaN element, written as each server writes it: bare
// NaN by the Python servers, null by TEI, llama.cpp and Ollama), empty
// (an empty vector or no results), short (one dimension less), count
// (one vector or result less), dup (an index twice), zero (an all-zero
// vector) or error (HTTP 500).
const HeaderPooledFault = "X-Sim-Pooled-Fault"

// DefaultEmbeddingDimension is the simulated embedding model's dimension.
const DefaultEmbeddingDimension = 384

func (s *Server) registerPooled(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/embeddings", s.handlePooled("openai_embeddings"))
	mux.HandleFunc("POST /api/embed", s.handlePooled("ollama_embed"))
	mux.HandleFunc("POST /embed", s.handlePooled("tei_embed"))
	mux.HandleFunc("POST /v1/rerank", s.handlePooled("openai_rerank"))
	// vLLM serves /rerank too, TEI only /rerank: the body tells them apart.
	mux.HandleFunc("POST /rerank", s.handlePooled("tei_rerank"))
}

// pooledRequest is the union of the request shapes.
type pooledRequest struct {
	Model     string          `json:"model"`
	Input     json.RawMessage `json:"input"`  // OpenAI, Ollama
	Inputs    json.RawMessage `json:"inputs"` // TEI /embed
	Query     *string         `json:"query"`
	Documents []string        `json:"documents"` // /v1/rerank
	Texts     []string        `json:"texts"`     // TEI /rerank
	TopN      *int            `json:"top_n"`
}

// texts reads a string-or-list input.
func texts(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("input is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, fmt.Errorf("input must be a string or a non-empty list of strings")
	}
	return list, nil
}

func (s *Server) handlePooled(protocol string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		errBody := func(status int, msg string) []byte {
			if strings.HasPrefix(protocol, "tei_") || protocol == "ollama_embed" {
				b, _ := json.Marshal(map[string]string{"error": msg, "error_type": "validation"})
				return b
			}
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "BadRequestError", "code": status}})
			return b
		}
		st, ok := s.startNative(w, r, protocol, errBody)
		if !ok {
			return
		}
		var req pooledRequest
		if err := json.Unmarshal(st.body, &req); err != nil {
			st.reject(s, w, http.StatusBadRequest, "application/json", errBody(400, "invalid JSON body"), err.Error())
			return
		}
		if protocol == "tei_rerank" && req.Texts == nil && req.Documents != nil {
			protocol = "openai_rerank"
		}
		rerank := strings.HasSuffix(protocol, "_rerank")
		model := req.Model
		if model == "" || strings.HasPrefix(protocol, "tei_") {
			model = s.cfg.ServedModelNames[0]
		}
		if !strings.HasPrefix(protocol, "tei_") && !s.servesModel(model) {
			if _, ok := s.ollamaModel(model); !ok {
				st.reject(s, w, http.StatusNotFound, "application/json", errBody(404, fmt.Sprintf("The model `%s` does not exist.", model)), "unknown model")
				return
			}
		}
		var inputs []string
		var err error
		query := ""
		switch {
		case rerank:
			docs := req.Documents
			if protocol == "tei_rerank" {
				docs = req.Texts
			}
			if req.Query == nil || len(docs) == 0 {
				err = fmt.Errorf("query and documents are required")
			}
			if req.Query != nil {
				query = *req.Query
			}
			inputs = docs
		case protocol == "tei_embed":
			inputs, err = texts(req.Inputs)
		default:
			inputs, err = texts(req.Input)
		}
		if err != nil {
			st.reject(s, w, http.StatusBadRequest, "application/json", errBody(400, err.Error()), err.Error())
			return
		}
		words := countWords(query)
		for _, t := range inputs {
			words += countWords(t)
		}
		fault := r.Header.Get(HeaderPooledFault)
		st.entry.update(func(rec *RequestRecord) {
			rec.Model = model
			rec.PromptTokens = words
			if fault != "" {
				rec.Faults = []string{"pooled:" + fault}
			}
		})
		seq := s.seq.Add(1)
		lat := s.cfg.Latency
		d := lat.TTFTBase + time.Duration(words)*lat.PrefillPerToken
		if lat.Jitter > 0 {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%d", s.cfg.Seed, seq)
			u := float64(h.Sum64()%10001)/10000*2 - 1
			d = time.Duration(float64(d) * (1 + lat.Jitter*u))
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			st.entry.finish(outcomeClientGone)
			return
		}
		if fault == "error" {
			st.reject(s, w, http.StatusInternalServerError, "application/json", errBody(500, "simulated engine failure"), "pooled fault error")
			return
		}
		var body []byte
		if rerank {
			body = rerankAnswer(protocol, model, query, inputs, req.TopN, words, fault)
		} else {
			body = embedAnswer(protocol, model, inputs, words, fault)
		}
		if protocol == "tei_embed" || protocol == "tei_rerank" {
			w.Header().Set("X-Compute-Tokens", strconv.Itoa(words))
		}
		writeBody(w, http.StatusOK, "application/json", body)
		st.entry.update(func(rec *RequestRecord) {
			rec.Status = http.StatusOK
			rec.FinishedUnixNano = time.Now().UnixNano()
		})
		st.entry.finish(outcomeCompleted)
	}
}

// Embedding is the simulator's vector for text: deterministic, unit
// length, DefaultEmbeddingDimension elements.
func Embedding(text string) []float64 {
	v := make([]float64, DefaultEmbeddingDimension)
	h := fnv.New64a()
	h.Write([]byte(text))
	x := h.Sum64() | 1
	var norm float64
	for i := range v {
		// xorshift64: cheap, deterministic, no shared state.
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[i] = float64(x%20001)/10000 - 1
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] /= norm
	}
	return v
}

// RerankScore is the simulator's relevance of doc to query: the share of
// the document's distinct words that occur in the query.
func RerankScore(query, doc string) float64 {
	q := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(query), notWordRune) {
		q[w] = true
	}
	seen := map[string]bool{}
	hits := 0
	for _, w := range strings.FieldsFunc(strings.ToLower(doc), notWordRune) {
		if seen[w] {
			continue
		}
		seen[w] = true
		if q[w] {
			hits++
		}
	}
	if len(seen) == 0 {
		return 0
	}
	return float64(hits) / float64(len(seen))
}

func notWordRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
}

// writeFloats appends a JSON array of v; nanAt ≥ 0 writes that element as
// nan (the server's spelling of a NaN).
func writeFloats(b *bytes.Buffer, v []float64, nanAt int, nan string) {
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == nanAt {
			b.WriteString(nan)
			continue
		}
		b.WriteString(strconv.FormatFloat(x, 'g', 8, 64))
	}
	b.WriteByte(']')
}

func embedAnswer(protocol, model string, inputs []string, words int, fault string) []byte {
	nan := "null" // serde_json (TEI), llama.cpp, Ollama
	if protocol == "openai_embeddings" {
		nan = "NaN" // Python's json (vLLM)
	}
	vecs := make([][]float64, len(inputs))
	for i, t := range inputs {
		vecs[i] = Embedding(t)
	}
	nanAt := -1
	idx := make([]int, len(vecs))
	for i := range idx {
		idx[i] = i
	}
	switch fault {
	case "nan":
		nanAt = 1
	case "empty":
		vecs[0] = nil
	case "short":
		vecs[len(vecs)-1] = vecs[len(vecs)-1][:len(vecs[len(vecs)-1])-1]
	case "count":
		vecs, idx = vecs[:len(vecs)-1], idx[:len(idx)-1]
	case "dup":
		if len(idx) > 1 {
			idx[1] = 0
		}
	case "zero":
		vecs[0] = make([]float64, len(vecs[0]))
	}
	var b bytes.Buffer
	switch protocol {
	case "openai_embeddings":
		b.WriteString(`{"id":"embd-sim","object":"list","created":0,"model":`)
		writeJSONString(&b, model)
		b.WriteString(`,"data":[`)
		for i, v := range vecs {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"index":%d,"object":"embedding","embedding":`, idx[i])
			writeFloats(&b, v, nanAt, nan)
			b.WriteByte('}')
		}
		fmt.Fprintf(&b, `],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":0}}`, words, words)
	case "ollama_embed":
		b.WriteString(`{"model":`)
		writeJSONString(&b, model)
		b.WriteString(`,"embeddings":[`)
		for i, v := range vecs {
			if i > 0 {
				b.WriteByte(',')
			}
			writeFloats(&b, v, nanAt, nan)
		}
		fmt.Fprintf(&b, `],"total_duration":1000000,"load_duration":0,"prompt_eval_count":%d}`, words)
	default: // tei_embed
		b.WriteByte('[')
		for i, v := range vecs {
			if i > 0 {
				b.WriteByte(',')
			}
			writeFloats(&b, v, nanAt, nan)
		}
		b.WriteByte(']')
	}
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

func rerankAnswer(protocol, model, query string, docs []string, topN *int, words int, fault string) []byte {
	type result struct {
		index int
		score float64
	}
	res := make([]result, len(docs))
	for i, d := range docs {
		res[i] = result{i, RerankScore(query, d)}
	}
	// Best first, as every rerank server answers; ties by index.
	slices.SortStableFunc(res, func(a, b result) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return a.index - b.index
	})
	if topN != nil && *topN > 0 && *topN < len(res) {
		res = res[:*topN]
	}
	nan := "null"
	if protocol == "openai_rerank" {
		nan = "NaN"
	}
	nanAt := -1
	switch fault {
	case "nan":
		nanAt = 0
	case "empty":
		res = nil
	case "count":
		if len(res) > 0 {
			res = res[:len(res)-1]
		}
	case "dup":
		if len(res) > 1 {
			res[1].index = res[0].index
		}
	}
	var b bytes.Buffer
	scoreKey := "relevance_score"
	if protocol == "openai_rerank" {
		b.WriteString(`{"id":"rerank-sim","model":`)
		writeJSONString(&b, model)
		fmt.Fprintf(&b, `,"usage":{"prompt_tokens":%d,"total_tokens":%d},"results":[`, words, words)
	} else {
		scoreKey = "score"
		b.WriteByte('[')
	}
	for i, r := range res {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d,"%s":`, r.index, scoreKey)
		if i == nanAt {
			b.WriteString(nan)
		} else {
			b.WriteString(strconv.FormatFloat(r.score, 'g', 8, 64))
		}
		if protocol == "openai_rerank" {
			b.WriteString(`,"document":{"text":`)
			writeJSONString(&b, docs[r.index])
			b.WriteByte('}')
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if protocol == "openai_rerank" {
		b.WriteByte('}')
	}
	return b.Bytes()
}
