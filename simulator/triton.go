package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// This file is Triton's side of the simulator: the inputs a simulated
// Triton model accepts (the union of the TensorRT-LLM ensemble's, the vLLM
// backend's and the FasterTransformer-era ensemble's), the planning shared
// by the HTTP generate extension and gRPC (triton_grpc.go), and the HTTP
// front-end: POST /v2/models/{m}[/versions/{v}]/generate[_stream], health,
// readiness and metadata.

// tritonVersion is the model version every simulated model reports.
const tritonVersion = "1"

// tritonInputs are the model inputs a request set, whatever the protocol.
type tritonInputs struct {
	text         string
	hasText      bool
	maxTokens    *int
	minTokens    int
	ignoreEOS    bool
	seed         *int64
	stream       *bool
	sampling     string
	returnNum    bool
	returnInput  bool
	returnFinish bool
}

// set applies one input by name; unknown names are ignored, as Triton
// turns unknown generate keys into request parameters.
func (in *tritonInputs) set(name string, v any) error {
	str := func() (string, error) {
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
		return "", fmt.Errorf("input %q: want a string", name)
	}
	integer := func() (int64, error) {
		switch x := v.(type) {
		case int64:
			return x, nil
		case uint64:
			if x > 1<<62 {
				return 0, fmt.Errorf("input %q: out of range", name)
			}
			return int64(x), nil
		case float64:
			if x != float64(int64(x)) {
				return 0, fmt.Errorf("input %q: want a whole number", name)
			}
			return int64(x), nil
		}
		return 0, fmt.Errorf("input %q: want a number", name)
	}
	boolean := func() (bool, error) {
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("input %q: want a boolean", name)
	}
	var err error
	switch name {
	case "text_input", "prompt":
		in.text, err = str()
		in.hasText = err == nil
	case "max_tokens", "request_output_len":
		var n int64
		if n, err = integer(); err == nil {
			if n < 0 || n > 1<<30 {
				return fmt.Errorf("input %q: %d out of range", name, n)
			}
			m := int(n)
			in.maxTokens = &m
		}
	case "min_length", "min_tokens":
		var n int64
		if n, err = integer(); err == nil {
			in.minTokens = int(min(max(n, 0), 1<<30))
		}
	case "random_seed", "seed":
		var n int64
		if n, err = integer(); err == nil {
			in.seed = &n
		}
	case "stream", "streaming":
		var b bool
		if b, err = boolean(); err == nil {
			in.stream = &b
		}
	case "ignore_eos":
		in.ignoreEOS, err = boolean()
	case "sampling_parameters":
		in.sampling, err = str()
	case "return_num_output_tokens":
		in.returnNum, err = boolean()
	case "return_num_input_tokens":
		in.returnInput, err = boolean()
	case "return_finish_reason":
		in.returnFinish, err = boolean()
	}
	return err
}

// tritonError maps an HTTP-like status onto Triton's error classes: the
// generate endpoint answers with the status (HttpCodeFromError), gRPC with
// the code (grpc_utils.cc CodeToStatus).
type tritonError struct {
	status int
	msg    string
}

func (e *tritonError) Error() string { return e.msg }

// planTriton validates the inputs like a Triton LLM model would and
// decides the answer. stream is whether the client asked for a stream
// (generate_stream, ModelStreamInfer).
func (s *Server) planTriton(id, model string, in *tritonInputs, stream bool, faultHeader []string, optsHeader string, seq uint64) (*plan, *tritonError) {
	if !s.servesModel(model) {
		return nil, &tritonError{http.StatusNotFound, fmt.Sprintf("Request for unknown model: '%s' is not found", model)}
	}
	if !in.hasText {
		return nil, &tritonError{http.StatusBadRequest, fmt.Sprintf("[request id: %s] expected 1 inputs but got 0 inputs for model '%s'. Got input(s) [], but missing required input(s) ['text_input']", id, model)}
	}
	maxTokens := 0
	var samp struct {
		MaxTokens *int   `json:"max_tokens"`
		MinTokens int    `json:"min_tokens"`
		IgnoreEOS bool   `json:"ignore_eos"`
		Seed      *int64 `json:"seed"`
	}
	switch {
	case in.sampling != "":
		if err := json.Unmarshal([]byte(in.sampling), &samp); err != nil {
			return nil, &tritonError{http.StatusBadRequest, "sampling_parameters is not valid JSON: " + err.Error()}
		}
		// vLLM's SamplingParams default.
		maxTokens = 16
		if samp.MaxTokens != nil {
			maxTokens = *samp.MaxTokens
		}
		in.minTokens = max(in.minTokens, samp.MinTokens)
		in.ignoreEOS = in.ignoreEOS || samp.IgnoreEOS
		if samp.Seed != nil {
			in.seed = samp.Seed
		}
	case in.maxTokens != nil:
		maxTokens = *in.maxTokens
	default:
		return nil, &tritonError{http.StatusBadRequest, fmt.Sprintf("[request id: %s] expected input 'max_tokens' (or sampling_parameters) for model '%s'", id, model)}
	}
	if in.maxTokens != nil && in.sampling != "" {
		maxTokens = *in.maxTokens
	}
	prompt := max(countWords(in.text), 1)
	if maxTokens < 1 {
		return nil, &tritonError{http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d", maxTokens)}
	}
	if prompt+maxTokens > s.cfg.MaxModelLen {
		return nil, &tritonError{http.StatusBadRequest, fmt.Sprintf("prompt (%d tokens) plus max_tokens (%d) exceeds the maximum sequence length %d", prompt, maxTokens, s.cfg.MaxModelLen)}
	}
	if in.minTokens > maxTokens {
		in.minTokens = maxTokens
	}
	if in.stream != nil && *in.stream && !stream {
		return nil, &tritonError{http.StatusBadRequest, "streaming is only supported over generate_stream or ModelStreamInfer"}
	}
	opts := defaultOptions(s.cfg.Output)
	opts.reasoningTokens = 0 // Triton has no reasoning channel
	if optsHeader != "" {
		var err error
		if opts, err = parseOptionsHeader(optsHeader, opts); err != nil {
			return nil, &tritonError{http.StatusBadRequest, err.Error()}
		}
		opts.reasoningTokens = 0
	}
	textRNG := textRNG(s.cfg.Seed, in.seed, in.text, seq)
	n, reason := planLength(s.cfg.Output, maxTokens, in.minTokens, in.ignoreEOS, textRNG)
	seqRNG := sequenceRNG(s.cfg.Seed, seq)
	var faults faultSet
	switch len(faultHeader) {
	case 0:
		faults = drawFaults(s.cfg.Faults, n, seqRNG)
	case 1:
		var err error
		if faults, err = parseFaultHeader(faultHeader[0], s.cfg.Faults); err != nil {
			return nil, &tritonError{http.StatusBadRequest, err.Error()}
		}
	default:
		return nil, &tritonError{http.StatusBadRequest, fmt.Sprintf("%s given %d times", HeaderFault, len(faultHeader))}
	}
	return &plan{
		id:           id,
		model:        model,
		stream:       stream,
		promptTokens: prompt,
		maxTokens:    maxTokens,
		outputTokens: n,
		finishReason: reason,
		opts:         opts,
		faults:       faults,
		created:      time.Now().Unix(),
		text:         textRNG,
		timing:       seqRNG,
		// includeUsage carries "return the vLLM backend's extra outputs".
		includeUsage: in.returnNum || in.returnInput || in.returnFinish,
		triton:       tritonExtras{num: in.returnNum, input: in.returnInput, finish: in.returnFinish},
	}, nil
}

// tritonExtras are the vLLM backend's optional outputs a request asked for.
type tritonExtras struct {
	num, input, finish bool
}

// finalHidden reports whether the final response must go out without its
// final mark: a truncate fault due at or after the last token stands for a
// stream whose final response (or flag) never comes.
func (p *plan) finalHidden() bool {
	_, ok := p.faults.get(faultTruncate)
	return ok
}

// tritonGenerateFrontEnd encodes the generate extension's answers.
type tritonGenerateFrontEnd struct{}

func (tritonGenerateFrontEnd) streamContentType() string { return "text/event-stream; charset=utf-8" }

func (tritonGenerateFrontEnd) response(p *plan, text string, tokens int, final bool) map[string]any {
	m := map[string]any{"model_name": p.model, "model_version": tritonVersion, "id": p.id, "text_output": text}
	if p.triton.num {
		m["num_output_tokens"] = tokens
	}
	if p.triton.input {
		// As the vLLM backend: the prompt's length in every response.
		m["num_input_tokens"] = p.promptTokens
	}
	if p.triton.finish {
		m["finish_reason"] = "None"
		if final {
			m["finish_reason"] = p.finishReason
		}
	}
	return m
}

func (f tritonGenerateFrontEnd) encodeEvent(ev event, p *plan) []byte {
	final := ev.final && !p.finalHidden()
	switch ev.kind {
	case kindContent, kindReasoning:
		return sse(f.response(p, ev.text, ev.tokens, final))
	case kindFinish:
		return sse(f.response(p, "", 0, final))
	case kindError:
		return sse(map[string]string{"error": "Injected fault: inference failed during generation"})
	case kindMalformed:
		return []byte(`data: {"model_name":"` + p.model + `","text_output":"unterminated` + "\n\n")
	}
	// No role chunk, usage chunk or [DONE]: the stream ends when the body does.
	return nil
}

func (f tritonGenerateFrontEnd) body(p *plan, text, _ string) []byte {
	m := f.response(p, text, p.outputTokens, true)
	if p.triton.num {
		m["num_output_tokens"] = p.outputTokens
	}
	b, err := json.Marshal(m)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// tritonQueueFull is what Triton says when a model's scheduler queue is at
// max_queue_size: UNAVAILABLE, HTTP 503 / gRPC UNAVAILABLE (core
// src/scheduler_utils.cc, PriorityQueue::PolicyQueue::Enqueue).
const tritonQueueFull = "Exceeds maximum queue size"

func (tritonGenerateFrontEnd) overload(*plan) (int, string, bool) {
	return http.StatusServiceUnavailable, tritonQueueFull, false
}

func (tritonGenerateFrontEnd) errorBody(_ int, msg string) []byte {
	b, err := json.Marshal(map[string]string{"error": msg})
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// tritonJSONInputs reads a generate body: every top-level key and every
// key of "parameters" that names an input (scalars or one-element lists).
func tritonJSONInputs(body []byte) (*tritonInputs, string, *tritonError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, "", &tritonError{http.StatusBadRequest, "failed to parse the request JSON buffer: not a JSON object"}
	}
	in := &tritonInputs{}
	apply := func(m map[string]any) *tritonError {
		for k, v := range m {
			if l, ok := v.([]any); ok {
				if len(l) != 1 {
					continue
				}
				v = l[0]
			}
			if n, ok := v.(json.Number); ok {
				if i, err := n.Int64(); err == nil {
					v = i
				} else if f, err := n.Float64(); err == nil {
					v = f
				}
			}
			if err := in.set(k, v); err != nil {
				return &tritonError{http.StatusBadRequest, err.Error()}
			}
		}
		return nil
	}
	if p, ok := obj["parameters"].(map[string]any); ok {
		if e := apply(p); e != nil {
			return nil, "", e
		}
	}
	delete(obj, "parameters")
	id, _ := obj["id"].(string)
	delete(obj, "id")
	if e := apply(obj); e != nil {
		return nil, "", e
	}
	return in, id, nil
}

// handleTritonGenerate serves generate (stream=false) and generate_stream.
func (s *Server) handleTritonGenerate(stream bool) http.HandlerFunc {
	fe := tritonGenerateFrontEnd{}
	return func(w http.ResponseWriter, r *http.Request) {
		model := r.PathValue("model")
		if v := r.PathValue("version"); v != "" && v != tritonVersion {
			writeBody(w, http.StatusNotFound, "application/json",
				fe.errorBody(0, fmt.Sprintf("Request for unknown model: '%s' version %s is not found", model, v)))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
		if err != nil {
			status := http.StatusBadRequest
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				status = http.StatusRequestEntityTooLarge
			}
			writeBody(w, status, "application/json", fe.errorBody(status, "reading request body: "+err.Error()))
			return
		}
		in, bodyID, terr := tritonJSONInputs(body)
		id, ok := s.requestID(w, r)
		if !ok {
			writeBody(w, http.StatusBadRequest, "application/json", fe.errorBody(0, HeaderRequestID+" must be 1..128 printable ASCII characters"))
			return
		}
		if len(r.Header.Values(HeaderRequestID)) == 0 && bodyID != "" && validRequestID(bodyID) {
			id = bodyID
			w.Header().Set(HeaderRequestID, id)
		}
		received := time.Now()
		entry := s.truth.add(withArrival(r.Context(), RequestRecord{
			ID: id, TraceID: traceIDOf(r.Header.Get(headerTraceParent)),
			Protocol: "triton_generate", Path: r.URL.Path, ReceivedUnixNano: received.UnixNano(),
			Faults: []string{}, Chunks: []ChunkRecord{},
		}))
		fail := func(e *tritonError) {
			writeBody(w, e.status, "application/json", fe.errorBody(e.status, e.msg))
			entry.update(func(rec *RequestRecord) { rec.Status, rec.Error = e.status, e.msg })
			entry.finish(outcomeHTTPError)
		}
		if terr != nil {
			fail(terr)
			return
		}
		p, terr := s.planTriton(id, model, in, stream, r.Header.Values(HeaderFault), r.Header.Get(HeaderOptions), s.seq.Add(1))
		if terr != nil {
			fail(terr)
			return
		}
		entry.update(func(rec *RequestRecord) {
			rec.Model, rec.Stream, rec.PromptTokens, rec.MaxTokens = p.model, p.stream, p.promptTokens, p.maxTokens
			rec.PlannedOutputTokens, rec.Faults = p.outputTokens, p.faults.strings()
		})
		j := &job{s: s, w: w, rc: http.NewResponseController(w), fe: fe, entry: entry, p: p, received: received, fired: map[string]bool{}}
		j.run(r.Context())
	}
}

// registerTriton adds Triton's HTTP routes (KServe v2 subset).
func (s *Server) registerTriton(mux *http.ServeMux) {
	for _, prefix := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		mux.HandleFunc("POST "+prefix+"/generate", s.handleTritonGenerate(false))
		mux.HandleFunc("POST "+prefix+"/generate_stream", s.handleTritonGenerate(true))
		mux.HandleFunc("GET "+prefix+"/ready", s.handleTritonModelReady)
		mux.HandleFunc("GET "+prefix, s.handleTritonModelMetadata)
	}
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("GET /v2/health/ready", ok)
	mux.HandleFunc("POST /v2/repository/index", s.handleTritonIndex)
	mux.HandleFunc("GET /v2/health/live", ok)
	mux.HandleFunc("GET /v2", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(map[string]any{"name": "triton", "version": "2.60.0-sim",
			"extensions": []string{"classification", "sequence", "model_repository", "statistics", "generate"}})
		writeBody(w, http.StatusOK, "application/json", b)
	})
}

func (s *Server) tritonModelKnown(r *http.Request) bool {
	v := r.PathValue("version")
	return s.servesModel(r.PathValue("model")) && (v == "" || v == tritonVersion)
}

func (s *Server) handleTritonModelReady(w http.ResponseWriter, r *http.Request) {
	if !s.tritonModelKnown(r) {
		writeBody(w, http.StatusBadRequest, "application/json", []byte(`{"error":"Model version not ready"}`))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// tritonModelInputs lists the simulated model's inputs: the union the
// simulator understands, all optional except text_input.
var tritonModelInputs = []struct{ name, datatype string }{
	{"text_input", "BYTES"}, {"max_tokens", "INT32"}, {"stream", "BOOL"}, {"sampling_parameters", "BYTES"},
	{"exclude_input_in_output", "BOOL"}, {"ignore_eos", "BOOL"}, {"min_length", "INT32"}, {"random_seed", "UINT64"},
	{"return_num_input_tokens", "BOOL"}, {"return_num_output_tokens", "BOOL"}, {"return_finish_reason", "BOOL"},
}

// tritonModelOutputs lists the simulated model's outputs; the last three
// only when the request asks for them.
var tritonModelOutputs = []struct{ name, datatype string }{
	{"text_output", "BYTES"}, {"num_input_tokens", "UINT32"}, {"num_output_tokens", "UINT32"}, {"finish_reason", "BYTES"},
}

func (s *Server) handleTritonModelMetadata(w http.ResponseWriter, r *http.Request) {
	if !s.tritonModelKnown(r) {
		writeBody(w, http.StatusNotFound, "application/json",
			[]byte(`{"error":"Request for unknown model: '`+jsonEscape(r.PathValue("model"))+`' is not found"}`))
		return
	}
	type tensor struct {
		Name     string  `json:"name"`
		Datatype string  `json:"datatype"`
		Shape    []int64 `json:"shape"`
	}
	md := struct {
		Name     string   `json:"name"`
		Versions []string `json:"versions"`
		Platform string   `json:"platform"`
		Inputs   []tensor `json:"inputs"`
		Outputs  []tensor `json:"outputs"`
	}{Name: r.PathValue("model"), Versions: []string{tritonVersion}, Platform: "ensemble"}
	for _, in := range tritonModelInputs {
		md.Inputs = append(md.Inputs, tensor{in.name, in.datatype, []int64{-1, 1}})
	}
	for _, out := range tritonModelOutputs {
		md.Outputs = append(md.Outputs, tensor{out.name, out.datatype, tritonOutputShape(out.datatype)})
	}
	b, _ := json.Marshal(md)
	writeBody(w, http.StatusOK, "application/json", b)
}

// tritonOutputShape is an output's metadata shape: counts are one element
// per batch entry, text a list.
func tritonOutputShape(datatype string) []int64 {
	if datatype == "BYTES" {
		return []int64{-1, -1}
	}
	return []int64{-1, 1}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
