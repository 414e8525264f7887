package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// This file is the OpenAI-compatible front-end, shaped like vLLM's
// /v1/chat/completions and /v1/completions, or (openai_server: llamacpp)
// like llama.cpp's llama-server: its timings object, usage on the finish
// chunk, context check and error shapes.

type openAIRequest struct {
	Model               string            `json:"model"`
	Messages            []chatMessage     `json:"messages"`
	Prompt              json.RawMessage   `json:"prompt"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	MinTokens           int               `json:"min_tokens"`
	IgnoreEOS           bool              `json:"ignore_eos"`
	Seed                *int64            `json:"seed"`
	Stream              bool              `json:"stream"`
	StreamOptions       *openAIStreamOpts `json:"stream_options"`
}

type openAIStreamOpts struct {
	// IncludeUsage defaults to true on vLLM when stream_options is given.
	IncludeUsage *bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// apiError is a client error with vLLM's status and error type.
type apiError struct {
	status int
	msg    string
	param  string
	// llama.cpp's context overflow names its own type and carries the
	// numbers (n_prompt_tokens, n_ctx) beside the message.
	llamaType     string
	nPrompt, nCtx int
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// promptWords counts input tokens of a completions prompt: a string, a
// one-element list of strings, or token ids (counted one per id).
func promptWords(raw json.RawMessage) (int, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "", badRequest("prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return countWords(s), s, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		if len(list) != 1 {
			return 0, "", badRequest("the simulator accepts exactly one prompt, got %d", len(list))
		}
		return countWords(list[0]), list[0], nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return len(ids), string(raw), nil
	}
	var idLists [][]int64
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) == 1 {
		return len(idLists[0]), string(raw), nil
	}
	return 0, "", badRequest("prompt must be a string, a list with one string, or token ids")
}

// messageWords counts input tokens of chat messages: the words of every
// text content (string, or the text parts of a parts array).
func messageWords(msgs []chatMessage) (int, string, error) {
	if len(msgs) == 0 {
		return 0, "", badRequest("messages must not be empty")
	}
	var all strings.Builder
	n := 0
	for i, m := range msgs {
		if len(m.Content) == 0 || string(m.Content) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n += countWords(s)
			all.WriteString(s)
			all.WriteByte('\n')
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return 0, "", badRequest("messages[%d].content must be a string or an array of parts", i)
		}
		for _, p := range parts {
			if p.Type == "text" {
				n += countWords(p.Text)
				all.WriteString(p.Text)
				all.WriteByte('\n')
			}
		}
	}
	return n, all.String(), nil
}

// openAIFrontEnd encodes answers for one of the two endpoints; it is per
// request because llama.cpp's timings report the job's own clock.
type openAIFrontEnd struct {
	chat     bool
	llamacpp bool // answer as llama.cpp's llama-server
	tgi      bool // answer as TGI's OpenAI routes
	ollama   bool // answer as Ollama's /v1 routes
	j        *job
	// loadFormat is the request's endpoint-load-metrics-format
	// (loadreport.go); empty when it asked for no load report.
	loadFormat string
}

// newOpenAIFrontEnd is the front end of the server cfg.OpenAIServer names.
func newOpenAIFrontEnd(chat bool, server string) *openAIFrontEnd {
	return &openAIFrontEnd{chat: chat, llamacpp: server == OpenAIServerLlamaCpp,
		tgi: server == OpenAIServerTGI, ollama: server == OpenAIServerOllama}
}

func (f *openAIFrontEnd) protocol() string {
	if f.chat {
		return "openai_chat"
	}
	return "openai_completions"
}

// handleOpenAI serves /v1/chat/completions (chat) or /v1/completions.
func (s *Server) handleOpenAI(chat bool) http.HandlerFunc {
	return s.serveOpenAIStyle(func(r *http.Request) openAIStyle {
		fe := newOpenAIFrontEnd(chat, s.cfg.OpenAIServer)
		fe.loadFormat = r.Header.Get(headerLoadMetricsFormat)
		return openAIStyle{
			protocol: fe.protocol(), fe: fe, oa: fe,
			plan: func(id string, body []byte, h http.Header, seq uint64) (*plan, *apiError) {
				return s.planOpenAI(fe, id, body, h, seq)
			},
			bind: func(j *job) { fe.j = j },
		}
	})
}

// openAIStyle is what differs between the routes that share the OpenAI
// request handling (request id, body limit, ground truth, rate limit):
// the protocol's name in ground truth, its front end, how a request is
// planned, and how the front end learns its job. One is made per request,
// as front ends keep the request's state.
type openAIStyle struct {
	protocol string
	fe       frontEnd
	oa       *openAIFrontEnd // error bodies
	plan     func(id string, body []byte, h http.Header, seq uint64) (*plan, *apiError)
	bind     func(*job)
}

// serveOpenAIStyle is the handler of an OpenAI-style route; newStyle
// makes each request's front end from the request's headers.
func (s *Server) serveOpenAIStyle(newStyle func(*http.Request) openAIStyle) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st := newStyle(r)
		fe := st.oa
		id, ok := s.requestID(w, r)
		if !ok {
			writeBody(w, http.StatusBadRequest, "application/json",
				fe.errorBody(http.StatusBadRequest, HeaderRequestID+" must be 1..128 printable ASCII characters"))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
		received := time.Now()
		entry := s.truth.add(withArrival(r.Context(), RequestRecord{
			ID:               id,
			TraceID:          traceIDOf(r.Header.Get(headerTraceParent)),
			Protocol:         st.protocol,
			Path:             r.URL.Path,
			ReceivedUnixNano: received.UnixNano(),
			Faults:           []string{},
			Chunks:           []ChunkRecord{},
		}))
		fail := func(e *apiError) {
			writeBody(w, e.status, "application/json", fe.apiErrorBody(e))
			entry.update(func(rec *RequestRecord) {
				rec.Status = e.status
				rec.Error = e.msg
			})
			entry.finish(outcomeHTTPError)
			s.logger.Debug("rejected request", "request_id", id, "status", e.status, "err", e.msg)
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				fail(&apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)})
				return
			}
			fail(badRequest("reading request body: %v", err))
			return
		}
		seq := s.seq.Add(1)
		p, apiErr := st.plan(id, body, r.Header, seq)
		if apiErr == nil {
			apiErr = s.rateLimit(w, entry, p)
		}
		if apiErr != nil {
			fail(apiErr)
			return
		}
		entry.update(func(rec *RequestRecord) {
			rec.Model = p.model
			rec.Stream = p.stream
			rec.PromptTokens = p.promptTokens
			rec.MaxTokens = p.maxTokens
			rec.PlannedOutputTokens = p.outputTokens
			rec.Faults = p.faults.strings()
		})
		j := &job{s: s, w: w, rc: http.NewResponseController(w), fe: st.fe, entry: entry, p: p, received: received, fired: map[string]bool{}}
		st.bind(j)
		j.run(r.Context())
	}
}

// planOpenAI validates the request like vLLM and decides its answer.
func (s *Server) planOpenAI(fe *openAIFrontEnd, id string, body []byte, h http.Header, seq uint64) (*plan, *apiError) {
	var req openAIRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	if dec.More() {
		return nil, badRequest("invalid JSON body: trailing data after the request object")
	}
	model := req.Model
	if model == "" {
		model = s.cfg.ServedModelNames[0]
	}
	// llama.cpp's llama-server (one model, or the router's) and TGI
	// answer whatever model is named; vLLM and Ollama refuse a name they
	// do not serve.
	if !fe.llamacpp && !fe.tgi && !s.servesModel(model) {
		return nil, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("The model `%s` does not exist.", req.Model), param: "model"}
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, badRequest("Stream options can only be defined when `stream=True`.")
	}

	var prompt int
	var promptText string
	var err error
	if fe.chat {
		prompt, promptText, err = messageWords(req.Messages)
	} else {
		prompt, promptText, err = promptWords(req.Prompt)
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, badRequest("%v", err)
	}
	// Templates and BOS add tokens; at least one makes the prefill real.
	prompt = max(prompt, 1)
	if prompt >= s.cfg.MaxModelLen {
		if fe.llamacpp {
			// llama.cpp checks the prompt alone, when a slot takes the
			// task (tools/server/server-context.cpp; ERROR_TYPE_EXCEED_CONTEXT_SIZE).
			return nil, &apiError{status: http.StatusBadRequest,
				msg:       fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", prompt, s.cfg.MaxModelLen),
				llamaType: "exceed_context_size_error", nPrompt: prompt, nCtx: s.cfg.MaxModelLen}
		}
		// vLLM's _validate_input (vllm/entrypoints/openai/engine/serving.py).
		return nil, &apiError{status: http.StatusBadRequest, param: "input_tokens",
			msg: fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", s.cfg.MaxModelLen, prompt)}
	}

	maxTokens := 0
	switch {
	case fe.chat && req.MaxCompletionTokens != nil:
		maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	case fe.chat:
		maxTokens = s.cfg.MaxModelLen - prompt
	default:
		maxTokens = s.cfg.Output.CompletionsDefaultMaxTokens
	}
	if maxTokens < 1 {
		return nil, badRequest("max_tokens must be at least 1, got %d.", maxTokens)
	}
	if prompt+maxTokens > s.cfg.MaxModelLen {
		if !fe.llamacpp {
			return nil, &apiError{status: http.StatusBadRequest, param: "max_tokens",
				msg: fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
					maxTokens, s.cfg.MaxModelLen, prompt, maxTokens, s.cfg.MaxModelLen, prompt)}
		}
		// llama.cpp accepts it and stops when the context is full
		// (STOP_TYPE_LIMIT: finish_reason "length").
		maxTokens = s.cfg.MaxModelLen - prompt
		if req.MinTokens > maxTokens {
			req.MinTokens = maxTokens
		}
	}
	if req.MinTokens < 0 || req.MinTokens > maxTokens {
		return nil, badRequest("min_tokens must be between 0 and max_tokens=%d, got %d.", maxTokens, req.MinTokens)
	}

	opts := defaultOptions(s.cfg.Output)
	if v := h.Get(HeaderOptions); v != "" {
		if opts, err = parseOptionsHeader(v, opts); err != nil {
			return nil, badRequest("%v", err)
		}
	}
	if fe.llamacpp {
		// llama.cpp ends a stream with a chunk of its own, delta {},
		// that carries finish_reason, usage and timings (update_chat_msg
		// / to_json_oaicompat_chat_stream in tools/server/server-task.cpp).
		opts.separateFinishChunk = true
	}

	textRNG := textRNG(s.cfg.Seed, req.Seed, promptText, seq)
	n, reason := planLength(s.cfg.Output, maxTokens, req.MinTokens, req.IgnoreEOS, textRNG)
	answer, err := answerWords(h, s.cfg.Output.Answer)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if answer != nil {
		wantReasoning := 0
		if fe.chat {
			wantReasoning = opts.reasoningTokens
		}
		n, reason = planAnswer(answer, wantReasoning, maxTokens)
	}
	reasoning := 0
	if fe.chat {
		reasoning = min(opts.reasoningTokens, n)
	}

	seqRNG := sequenceRNG(s.cfg.Seed, seq)
	var faults faultSet
	if v, ok := h[http.CanonicalHeaderKey(HeaderFault)]; ok {
		if len(v) != 1 {
			return nil, badRequest("%s given %d times", HeaderFault, len(v))
		}
		if faults, err = parseFaultHeader(v[0], s.cfg.Faults); err != nil {
			return nil, badRequest("%v", err)
		}
	} else {
		faults = drawFaults(s.cfg.Faults, n, seqRNG)
	}

	prefix := s.planPrefix(promptText, opts)
	includeUsage := false
	if req.StreamOptions != nil {
		includeUsage = req.StreamOptions.IncludeUsage == nil || *req.StreamOptions.IncludeUsage
	}
	return &plan{
		id:              id,
		model:           model,
		stream:          req.Stream,
		includeUsage:    includeUsage,
		promptTokens:    prompt,
		maxTokens:       maxTokens,
		outputTokens:    n,
		reasoningTokens: reasoning,
		answer:          answer,
		finishReason:    reason,
		opts:            opts,
		faults:          faults,
		created:         time.Now().Unix(),
		text:            textRNG,
		timing:          seqRNG,
		prefix:          prefix,
	}, nil
}

// Wire shapes. Field order follows vLLM's output.

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// Details carries reasoning_tokens, as OpenAI's API does for
	// reasoning models; only when the answer had reasoning.
	Details *completionDetails `json:"completion_tokens_details,omitempty"`
	// PromptDetails carries cached_tokens, as vLLM does with
	// --enable-prompt-tokens-details; only with the prefix cache on.
	PromptDetails *promptDetails `json:"prompt_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type chatDelta struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

type chatStreamChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type completionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

type openAIChunk struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int64            `json:"created"`
	Model   string           `json:"model"`
	Choices any              `json:"choices"`
	Usage   *openAIUsage     `json:"usage,omitempty"`
	Timings *llamaCppTimings `json:"timings,omitempty"`
}

// llamaCppTimings is llama.cpp's non-standard timings object, in the field
// order of the fixture (shared/fixtures/llamacpp/chat-stream.sse, a
// 2025-02 build): server_slot::get_timings in tools/server/server-context.cpp.
type llamaCppTimings struct {
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

// llamaCppError is llama.cpp's error object (format_error_response):
// {"code","message","type"}, and n_prompt_tokens, n_ctx for a context
// overflow.
type llamaCppError struct {
	Code          int    `json:"code"`
	Message       string `json:"message"`
	Type          string `json:"type"`
	NPromptTokens int    `json:"n_prompt_tokens,omitempty"`
	NCtx          int    `json:"n_ctx,omitempty"`
}

type llamaCppErrorBody struct {
	Error llamaCppError `json:"error"`
}

type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func (f *openAIFrontEnd) idPrefix() string {
	if f.chat {
		return "chatcmpl-"
	}
	return "cmpl-"
}

func (f *openAIFrontEnd) streamContentType() string { return "text/event-stream; charset=utf-8" }

func usageOf(p *plan) *openAIUsage {
	u := &openAIUsage{PromptTokens: p.promptTokens, TotalTokens: p.promptTokens + p.outputTokens, CompletionTokens: p.outputTokens}
	if p.reasoningTokens > 0 {
		u.Details = &completionDetails{ReasoningTokens: p.reasoningTokens}
	}
	if p.prefix.on {
		u.PromptDetails = &promptDetails{CachedTokens: p.prefix.cached}
	}
	return u
}

func sse(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are marshalled; they cannot fail.
		b = []byte(`{}`)
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

func (f *openAIFrontEnd) encodeEvent(ev event, p *plan) []byte {
	b := f.encodeEventSpaced(ev, p)
	if f.tgi && bytes.HasPrefix(b, []byte("data: ")) {
		// axum's Event writes `data:` without a space.
		b = append(b[:len("data:")], b[len("data: "):]...)
	}
	return b
}

func (f *openAIFrontEnd) encodeEventSpaced(ev event, p *plan) []byte {
	chunk := openAIChunk{ID: f.idPrefix() + p.id, Created: p.created, Model: p.model, Object: "text_completion"}
	if f.chat {
		chunk.Object = "chat.completion.chunk"
	}
	var finish *string
	if ev.final {
		r := p.finishReason
		finish = &r
	}
	switch ev.kind {
	case kindDone:
		return []byte("data: [DONE]\n\n")
	case kindPing:
		// sse-starlette's ping: a comment with the UTC time as Python
		// prints a datetime, and its default \r\n separator.
		return []byte(": ping - " + time.Now().UTC().Format("2006-01-02 15:04:05.000000-07:00") + "\r\n\r\n")
	case kindError:
		if f.ollama {
			// Ollama's /v1 middleware decodes the {"error"} line of the
			// native stream as an empty ChatResponse: the error is lost,
			// a chunk with empty content goes out in its place, and the
			// stream ends without [DONE] (middleware/openai.go
			// ChatWriter.writeResponse, openai/openai.go toChunk @fb30760).
			empty := ""
			if !f.chat {
				chunk.Choices = []completionChoice{{}}
			} else {
				chunk.Choices = []chatStreamChoice{{Delta: chatDelta{Content: &empty}}}
			}
			return sse(chunk)
		}
		if f.tgi {
			return sse(tgiOpenAIErrorEvent(ev.status, ev.msg))
		}
		msg := ev.msg
		switch {
		case msg != "":
		case f.llamacpp:
			msg = "Injected fault: error during generation"
		case ev.status >= 500:
			// vLLM's GenerationError (finish_reason "error").
			msg = "Internal server error"
		default:
			msg = "Injected fault: invalid request found during generation"
		}
		return append(append([]byte("data: "), marshalText(f.errorObject(ev.status, msg, ""))...), '\n', '\n')
	case kindMalformed:
		return []byte(`data: {"id":"` + chunk.ID + `","object":"` + chunk.Object + `","choices":[{"index":0,"delta":{"content":"unterminated` + "\n\n")
	case kindUsage:
		if f.llamacpp {
			return nil // on the finish chunk instead
		}
		chunk.Choices = []struct{}{}
		chunk.Usage = usageOf(p)
		return sse(chunk)
	}
	if ev.final && f.llamacpp {
		// llama.cpp puts usage (when asked for) and its timings on the
		// chunk that carries finish_reason.
		if p.includeUsage {
			chunk.Usage = usageOf(p)
		}
		chunk.Timings = f.timings(p)
	}
	if !f.chat {
		switch ev.kind {
		case kindRole, kindReasoning:
			return nil
		}
		if finish == nil && f.tgi {
			// TGI's non-final completions chunks carry finish_reason ""
			// (router/src/server.rs, CompletionComplete{finish_reason:
			// String::new()}).
			empty := ""
			finish = &empty
		}
		chunk.Choices = []completionChoice{{Text: ev.text, FinishReason: finish}}
		return sse(chunk)
	}
	c := chatStreamChoice{FinishReason: finish}
	text := ev.text
	switch ev.kind {
	case kindRole:
		empty := ""
		c.Delta = chatDelta{Role: "assistant", Content: &empty}
	case kindReasoning:
		c.Delta = chatDelta{ReasoningContent: &text}
	case kindContent:
		c.Delta = chatDelta{Content: &text}
	case kindFinish:
		// Empty delta, finish_reason only.
	}
	chunk.Choices = []chatStreamChoice{c}
	return sse(chunk)
}

func (f *openAIFrontEnd) body(p *plan, text, reasoning string) []byte {
	finish := p.finishReason
	var timings *llamaCppTimings
	if f.llamacpp {
		timings = f.timings(p)
	}
	var v any
	if f.chat {
		type message struct {
			Role             string   `json:"role"`
			Content          string   `json:"content"`
			ReasoningContent *string  `json:"reasoning_content"`
			ToolCalls        []string `json:"tool_calls"`
		}
		type choice struct {
			Index        int       `json:"index"`
			Message      message   `json:"message"`
			Logprobs     *struct{} `json:"logprobs"`
			FinishReason string    `json:"finish_reason"`
			StopReason   *string   `json:"stop_reason"`
		}
		m := message{Role: "assistant", Content: text, ToolCalls: []string{}}
		if reasoning != "" {
			m.ReasoningContent = &reasoning
		}
		v = struct {
			ID             string           `json:"id"`
			Object         string           `json:"object"`
			Created        int64            `json:"created"`
			Model          string           `json:"model"`
			Choices        []choice         `json:"choices"`
			Usage          *openAIUsage     `json:"usage"`
			PromptLogprobs *struct{}        `json:"prompt_logprobs"`
			Timings        *llamaCppTimings `json:"timings,omitempty"`
		}{f.idPrefix() + p.id, "chat.completion", p.created, p.model,
			[]choice{{Message: m, FinishReason: finish}}, usageOf(p), nil, timings}
	} else {
		v = struct {
			ID      string             `json:"id"`
			Object  string             `json:"object"`
			Created int64              `json:"created"`
			Model   string             `json:"model"`
			Choices []completionChoice `json:"choices"`
			Usage   *openAIUsage       `json:"usage"`
			Timings *llamaCppTimings   `json:"timings,omitempty"`
		}{f.idPrefix() + p.id, "text_completion", p.created, p.model,
			[]completionChoice{{Text: text, FinishReason: &finish}}, usageOf(p), timings}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

func (f *openAIFrontEnd) errorObject(status int, msg, param string) any {
	if f.tgi {
		// Errors before the stream are TGI's own shape on every route
		// (router/src/server.rs, From<InferError> for (StatusCode, Json<ErrorResponse>)).
		return tgiErrorBody{Error: msg, ErrorType: tgiErrorType(status)}
	}
	if f.llamacpp {
		return llamaCppErrorBody{Error: llamaCppError{Code: status, Message: msg, Type: llamaCppErrorType(status)}}
	}
	e := openAIError{Message: msg, Type: errorType(status), Code: status}
	if param != "" {
		e.Param = &param
	}
	return openAIErrorBody{Error: e}
}

// apiErrorBody is the body of a request error.
func (f *openAIFrontEnd) apiErrorBody(e *apiError) []byte {
	if f.llamacpp && e.llamaType != "" {
		return marshalText(llamaCppErrorBody{Error: llamaCppError{Code: e.status, Message: e.msg, Type: e.llamaType,
			NPromptTokens: e.nPrompt, NCtx: e.nCtx}})
	}
	return f.errorBodyParam(e.status, e.msg, e.param)
}

// keepAlive: the OpenAI-compatible servers built on sse-starlette send
// SSE comments to keep a stream open (faults.sse_ping_interval).
func (f *openAIFrontEnd) keepAlive() {}

// doneAfterError: vLLM sends [DONE] after a mid-stream error event
// (serving_chat.py chat_completion_stream_generator); newer llama.cpp
// builds end the stream after the error without it.
func (f *openAIFrontEnd) doneAfterError() bool { return !f.llamacpp && !f.ollama }

// overload is the answer to a full waiting queue: vLLM's 503; TGI's
// "Model is overloaded", in a 200 stream when streaming (then [DONE]),
// else a 429; Ollama's 503 "server busy".
func (f *openAIFrontEnd) overload(p *plan) (int, string, bool) {
	switch {
	case f.tgi:
		return http.StatusTooManyRequests, "Model is overloaded", p.stream
	case f.ollama:
		return http.StatusServiceUnavailable, ollamaServerBusy, false
	}
	return http.StatusServiceUnavailable, vllmOverloaded, false
}

// tgiOpenAIEvent is what TGI's OpenAI routes send for every error inside
// a stream, followed by [DONE]: the error's Display text and a fixed
// 422 (InferError::into_openai_event, router/src/infer/mod.rs @db931fc).
type tgiOpenAIEvent struct {
	Error struct {
		Message        string `json:"message"`
		HTTPStatusCode int    `json:"http_status_code"`
	} `json:"error"`
}

// tgiOpenAIErrorEvent is the event for an error of status: the InferError
// variant TGI answers that status with, by its Display text, since the
// event itself always says 422.
func tgiOpenAIErrorEvent(status int, msg string) tgiOpenAIEvent {
	var e tgiOpenAIEvent
	e.Error.HTTPStatusCode = http.StatusUnprocessableEntity
	switch {
	case msg != "":
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		msg = "Model is overloaded"
	case status == http.StatusFailedDependency:
		msg = "Request failed during generation: Injected fault: error during generation"
	case status >= 500:
		msg = "Incomplete generation stream"
	default:
		msg = "Input validation error: Injected fault: invalid request found during generation"
	}
	e.Error.Message = msg
	return e
}

// llamaCppErrorType names an error class as llama.cpp's error_type does
// (tools/server/server-common.cpp format_error_response).
func llamaCppErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusNotImplemented:
		return "not_supported_error"
	case status == http.StatusServiceUnavailable:
		return "unavailable_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// timings is llama.cpp's timings object for the answer so far, from the
// job's own clock (see LlamaCppTimings); it is recorded in ground truth.
func (f *openAIFrontEnd) timings(p *plan) *llamaCppTimings {
	j := f.j
	if j == nil || j.admitted.IsZero() || j.firstReady.IsZero() {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	// llama.cpp keeps t_token_generation at least 1µs; so does the
	// simulator for both, so that the rates stay finite (JSON has no Inf).
	promptMS := ms(max(j.firstReady.Sub(j.admitted), time.Microsecond))
	predictedMS := ms(max(j.lastReady.Sub(j.firstReady), time.Microsecond))
	n := p.outputTokens
	// prompt_n is n_prompt_tokens_processed: the prompt less what the
	// cache held, at least the one token llama.cpp always evaluates.
	promptN := p.promptTokens
	if p.prefix.on {
		promptN = max(p.promptTokens-p.prefix.cached, 1)
	}
	t := &llamaCppTimings{
		PromptN: promptN, PromptMS: promptMS,
		PromptPerTokenMS: promptMS / float64(promptN), PromptPerSecond: 1e3 / promptMS * float64(promptN),
		PredictedN: n, PredictedMS: predictedMS,
		PredictedPerTokenMS: predictedMS / float64(n), PredictedPerSecond: 1e3 / predictedMS * float64(n),
	}
	j.entry.update(func(r *RequestRecord) {
		r.LlamaCppTimings = &LlamaCppTimings{PromptN: t.PromptN, PromptMS: t.PromptMS, PredictedN: t.PredictedN, PredictedMS: t.PredictedMS}
	})
	return t
}

func (f *openAIFrontEnd) errorBody(status int, msg string) []byte {
	return f.errorBodyParam(status, msg, "")
}

func (f *openAIFrontEnd) errorBodyParam(status int, msg, param string) []byte {
	return marshalText(f.errorObject(status, msg, param))
}

// marshalText is json.Marshal without HTML escaping: Python's json.dumps
// (vLLM), serde (TGI) and nlohmann::json (llama.cpp) write <, > and &
// as they are, and error messages quote them.
func marshalText(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// errorType names an error class the way vLLM does (BadRequestError,
// NotFoundError, InternalServerError, ...).
func errorType(status int) string {
	t := strings.ReplaceAll(http.StatusText(status), " ", "")
	t = strings.ReplaceAll(t, "-", "")
	if t == "" {
		t = "Unknown"
	}
	if !strings.HasSuffix(t, "Error") {
		t += "Error"
	}
	return t
}
