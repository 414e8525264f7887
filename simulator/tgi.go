package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file is the front-end of Hugging Face Text Generation Inference's
// native API: POST /generate_stream (SSE, one token per event, no [DONE];
// the last event carries generated_text and, when asked for, details),
// POST /generate, GET /info. Errors are {"error","error_type"} with TGI's
// statuses; on /generate_stream, errors found after the request was
// accepted (validation included) are an SSE event in a 200 stream.

// tgiMaxStopSequences is TGI's default --max-stop-sequences.
const tgiMaxStopSequences = 4

type tgiRequest struct {
	Inputs     *string `json:"inputs"`
	Parameters struct {
		MaxNewTokens        *int     `json:"max_new_tokens"`
		Details             bool     `json:"details"`
		DecoderInputDetails bool     `json:"decoder_input_details"`
		Seed                *uint64  `json:"seed"`
		Temperature         *float64 `json:"temperature"`
		TopP                *float64 `json:"top_p"`
		Stop                []string `json:"stop"`
		BestOf              *int     `json:"best_of"`
	} `json:"parameters"`
}

// tgiErrorType names the TGI error class TGI answers with status.
func tgiErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "overloaded"
	case status == http.StatusFailedDependency:
		return "generation"
	case status >= 500:
		return "incomplete_generation"
	default:
		return "validation"
	}
}

// tgiFrontEnd encodes one request's answer; it is per request because the
// final event repeats the whole generated text.
type tgiFrontEnd struct {
	j       *job
	details bool
	seed    *uint64
	index   int
	text    strings.Builder
}

func (f *tgiFrontEnd) streamContentType() string { return "text/event-stream" }

// carriesContent: the end-of-sequence token TGI streams last when the
// model stopped by itself is a special token, not output.
func (f *tgiFrontEnd) carriesContent(ev event, p *plan) bool {
	return ev.tokens > 0 && ev.text != "" && !f.isEOS(ev, p)
}

func (f *tgiFrontEnd) isEOS(ev event, p *plan) bool {
	return ev.kind == kindContent && ev.final && p.finishReason == finishStop
}

func tgiFinishReason(reason string) string {
	if reason == finishStop {
		return "eos_token"
	}
	return reason
}

type tgiToken struct {
	ID      int     `json:"id"`
	Text    string  `json:"text"`
	Logprob float64 `json:"logprob"`
	Special bool    `json:"special"`
}

type tgiStreamDetails struct {
	FinishReason    string  `json:"finish_reason"`
	GeneratedTokens int     `json:"generated_tokens"`
	Seed            *uint64 `json:"seed"`
	InputLength     int     `json:"input_length"`
}

type tgiStreamResponse struct {
	Index         int               `json:"index"`
	Token         tgiToken          `json:"token"`
	GeneratedText *string           `json:"generated_text"`
	Details       *tgiStreamDetails `json:"details"`
}

type tgiErrorBody struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// tgiSSE frames one event as axum does: "data:" without a space.
func tgiSSE(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data:"...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

func (f *tgiFrontEnd) encodeEvent(ev event, p *plan) []byte {
	switch ev.kind {
	case kindContent:
		f.index++
		tok := tgiToken{ID: 1000 + f.index, Text: ev.text, Logprob: -0.25}
		if f.isEOS(ev, p) {
			tok = tgiToken{ID: 2, Text: "</s>", Logprob: -0.01, Special: true}
		} else {
			f.text.WriteString(ev.text)
		}
		resp := tgiStreamResponse{Index: f.index, Token: tok}
		if ev.final {
			text := f.text.String()
			resp.GeneratedText = &text
			if f.details {
				resp.Details = &tgiStreamDetails{
					FinishReason: tgiFinishReason(p.finishReason), GeneratedTokens: p.outputTokens,
					Seed: f.seed, InputLength: p.promptTokens,
				}
			}
		}
		return tgiSSE(resp)
	case kindError:
		msg := ev.msg
		if msg == "" {
			msg = "Request failed during generation: injected fault"
		}
		return tgiSSE(tgiErrorBody{Error: msg, ErrorType: tgiErrorType(ev.status)})
	case kindMalformed:
		return []byte(`data:{"index":` + strconv.Itoa(f.index+1) + `,"token":{"id":7,"text":"unterminated` + "\n\n")
	}
	// No role, usage, finish-only or [DONE] events: the stream ends when
	// the body does.
	return nil
}

// body is /generate's answer. TGI reports its own timings in headers,
// which must be set before the job writes the status line.
func (f *tgiFrontEnd) body(p *plan, text, _ string) []byte {
	j := f.j
	now := time.Now()
	h := j.w.Header()
	msString := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	h.Set("X-Compute-Type", "gpu+optimized")
	h.Set("X-Total-Time", msString(now.Sub(j.received)))
	h.Set("X-Validation-Time", "0")
	if !j.admitted.IsZero() {
		inference := now.Sub(j.admitted)
		h.Set("X-Queue-Time", msString(j.admitted.Sub(j.received)))
		h.Set("X-Inference-Time", msString(inference))
		h.Set("X-Time-Per-Token", msString(inference/time.Duration(max(p.outputTokens, 1))))
	}
	h.Set("X-Prompt-Tokens", strconv.Itoa(p.promptTokens))
	h.Set("X-Generated-Tokens", strconv.Itoa(p.outputTokens))
	type details struct {
		FinishReason    string     `json:"finish_reason"`
		GeneratedTokens int        `json:"generated_tokens"`
		Seed            *uint64    `json:"seed"`
		Prefill         []tgiToken `json:"prefill"`
		Tokens          []tgiToken `json:"tokens"`
	}
	v := struct {
		GeneratedText string   `json:"generated_text"`
		Details       *details `json:"details,omitempty"`
	}{GeneratedText: text}
	if f.details {
		v.Details = &details{FinishReason: tgiFinishReason(p.finishReason), GeneratedTokens: p.outputTokens,
			Seed: f.seed, Prefill: []tgiToken{}, Tokens: []tgiToken{}}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// overload is TGI's answer when max_concurrent_requests is reached
// (router/src/infer/mod.rs: InferError::Overloaded, "Model is overloaded",
// from the semaphore's try_acquire): 429 with error_type "overloaded" on
// /generate; on /generate_stream the same error is an event in a 200
// stream, as every error of infer.generate_stream is there
// (router/src/server.rs generate_stream_internal, impl From<InferError>
// for Event).
func (f *tgiFrontEnd) overload(p *plan) (int, string, bool) {
	return http.StatusTooManyRequests, "Model is overloaded", p.stream
}

func (f *tgiFrontEnd) errorBody(status int, msg string) []byte {
	b, err := json.Marshal(tgiErrorBody{Error: msg, ErrorType: tgiErrorType(status)})
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// nativeStart is the common start of a native-protocol request: request
// id, bounded body, ground-truth entry. On failure it has answered with
// errBody's shape and returns ok=false.
type nativeStart struct {
	id       string
	body     []byte
	entry    *truthEntry
	received time.Time
}

func (s *Server) startNative(w http.ResponseWriter, r *http.Request, protocol string, errBody func(int, string) []byte) (*nativeStart, bool) {
	id, ok := s.requestID(w, r)
	if !ok {
		writeBody(w, http.StatusBadRequest, "application/json",
			errBody(http.StatusBadRequest, HeaderRequestID+" must be 1..128 printable ASCII characters"))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBodyBytes))
	st := &nativeStart{id: id, body: body, received: time.Now()}
	st.entry = s.truth.add(withArrival(r.Context(), RequestRecord{
		ID: id, TraceID: traceIDOf(r.Header.Get(headerTraceParent)),
		Protocol: protocol, Path: r.URL.Path, ReceivedUnixNano: st.received.UnixNano(),
		Faults: []string{}, Chunks: []ChunkRecord{},
	}))
	if err != nil {
		status, msg := http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
		}
		st.reject(s, w, status, "application/json", errBody(status, msg), msg)
		return nil, false
	}
	return st, true
}

// reject answers before the engine saw the request.
func (st *nativeStart) reject(s *Server, w http.ResponseWriter, status int, contentType string, body []byte, msg string) {
	writeBody(w, status, contentType, body)
	st.entry.update(func(rec *RequestRecord) {
		rec.Status = status
		rec.Error = msg
	})
	st.entry.finish(outcomeHTTPError)
	s.logger.Debug("rejected request", "request_id", st.id, "status", status, "err", msg)
}

// run hands a planned request to the shared job machinery.
func (st *nativeStart) run(s *Server, w http.ResponseWriter, r *http.Request, fe frontEnd, p *plan) *job {
	st.entry.update(func(rec *RequestRecord) {
		rec.Model = p.model
		rec.Stream = p.stream
		rec.PromptTokens = p.promptTokens
		rec.MaxTokens = p.maxTokens
		rec.PlannedOutputTokens = p.outputTokens
		rec.Faults = p.faults.strings()
	})
	return &job{s: s, w: w, rc: http.NewResponseController(w), fe: fe, entry: st.entry, p: p, received: st.received, fired: map[string]bool{}}
}

// handleTGI serves /generate_stream (stream) or /generate.
func (s *Server) handleTGI(stream bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fe := &tgiFrontEnd{}
		st, ok := s.startNative(w, r, "tgi", fe.errorBody)
		if !ok {
			return
		}
		seq := s.seq.Add(1)
		p, rej := s.planTGI(st.id, st.body, r.Header, seq, stream, fe)
		switch {
		case rej == nil:
		case rej.validation && stream:
			// Accepted by the HTTP layer, rejected by validation: TGI has
			// already answered 200 and sends the error as an event.
			w.Header().Set("Content-Type", fe.streamContentType())
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(tgiSSE(tgiErrorBody{Error: "Input validation error: " + rej.msg, ErrorType: "validation"}))
			st.entry.update(func(rec *RequestRecord) {
				rec.Status = http.StatusOK
				rec.Error = rej.msg
			})
			st.entry.finish(outcomeErrorEvent)
			return
		case rej.validation:
			st.reject(s, w, http.StatusUnprocessableEntity, "application/json",
				fe.errorBody(http.StatusUnprocessableEntity, "Input validation error: "+rej.msg), rej.msg)
			return
		default:
			// A body that is not the request type: axum's plain-text rejection.
			st.reject(s, w, rej.status, "text/plain; charset=utf-8", []byte(rej.msg), rej.msg)
			return
		}
		j := st.run(s, w, r, fe, p)
		fe.j = j
		j.run(r.Context())
	}
}

// tgiReject is a request TGI would refuse: a validation error (422, or an
// event in a 200 stream) or a body axum cannot deserialize (400/422).
type tgiReject struct {
	validation bool
	status     int
	msg        string
}

func tgiInvalid(format string, args ...any) *tgiReject {
	return &tgiReject{validation: true, status: http.StatusUnprocessableEntity, msg: fmt.Sprintf(format, args...)}
}

// planTGI validates like TGI's router and decides the answer.
func (s *Server) planTGI(id string, body []byte, h http.Header, seq uint64, stream bool, fe *tgiFrontEnd) (*plan, *tgiReject) {
	var req tgiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, &tgiReject{status: http.StatusBadRequest, msg: "Failed to parse the request body as JSON: " + err.Error()}
		}
		return nil, &tgiReject{status: http.StatusUnprocessableEntity, msg: "Failed to deserialize the JSON body into the target type: " + err.Error()}
	}
	if dec.More() {
		return nil, &tgiReject{status: http.StatusBadRequest, msg: "Failed to parse the request body as JSON: trailing characters"}
	}
	if req.Inputs == nil {
		return nil, &tgiReject{status: http.StatusUnprocessableEntity, msg: "Failed to deserialize the JSON body into the target type: missing field `inputs`"}
	}
	par := req.Parameters
	switch {
	case strings.TrimSpace(*req.Inputs) == "":
		return nil, tgiInvalid("`inputs` cannot be empty")
	case par.Temperature != nil && *par.Temperature <= 0:
		return nil, tgiInvalid("`temperature` must be strictly positive")
	case par.TopP != nil && (*par.TopP <= 0 || *par.TopP >= 1):
		return nil, tgiInvalid("`top_p` must be > 0.0 and < 1.0")
	case par.MaxNewTokens != nil && *par.MaxNewTokens <= 0:
		return nil, tgiInvalid("`max_new_tokens` must be strictly positive")
	case len(par.Stop) > tgiMaxStopSequences:
		return nil, tgiInvalid("`stop` supports up to %d stop sequences. Given: %d", tgiMaxStopSequences, len(par.Stop))
	case stream && par.BestOf != nil && *par.BestOf != 1:
		return nil, tgiInvalid("`best_of` != 1 is not supported when streaming tokens")
	case stream && par.DecoderInputDetails:
		return nil, tgiInvalid("`decoder_input_details` == true is not supported when streaming tokens")
	}
	fe.details = par.Details
	fe.seed = par.Seed
	prompt := max(countWords(*req.Inputs), 1)
	maxTokens := s.cfg.MaxModelLen - prompt
	if par.MaxNewTokens != nil {
		maxTokens = *par.MaxNewTokens
	}
	if prompt+maxTokens > s.cfg.MaxModelLen || maxTokens < 1 {
		return nil, tgiInvalid("`inputs` tokens + `max_new_tokens` must be <= %d. Given: %d `inputs` tokens and %d `max_new_tokens`",
			s.cfg.MaxModelLen, prompt, maxTokens)
	}
	var reqSeed *int64
	if par.Seed != nil {
		v := int64(*par.Seed)
		reqSeed = &v
	}
	p, err := s.nativePlan(id, s.cfg.ServedModelNames[0], prompt, maxTokens, *req.Inputs, reqSeed, h, seq, stream)
	if err != nil {
		// The simulator's own headers are wrong: a plain 400, whatever the
		// endpoint, so the mistake is not mistaken for TGI's behaviour.
		return nil, &tgiReject{status: http.StatusBadRequest, msg: err.Error()}
	}
	// One token per event, no reasoning channel, details on the last token.
	if p.answer != nil {
		// A fixed answer that fits ends with TGI's EOS token, one more
		// generated token after its words (planAnswer's "reasoning" slot).
		p.outputTokens, p.finishReason = planAnswer(p.answer, 1, maxTokens)
	}
	p.opts.tokensPerChunk = 1
	p.opts.reasoningTokens = 0
	p.opts.separateFinishChunk = false
	p.opts.roleChunk = RoleChunkOff
	return p, nil
}

// nativePlan draws length, text and faults for a native protocol the way
// planOpenAI does (TGI and Ollama have no ignore_eos or min_tokens).
func (s *Server) nativePlan(id, model string, prompt, maxTokens int, promptText string, reqSeed *int64, h http.Header, seq uint64, stream bool) (*plan, error) {
	opts := defaultOptions(s.cfg.Output)
	var err error
	if v := h.Get(HeaderOptions); v != "" {
		if opts, err = parseOptionsHeader(v, opts); err != nil {
			return nil, err
		}
	}
	text := textRNG(s.cfg.Seed, reqSeed, promptText, seq)
	n, reason := planLength(s.cfg.Output, maxTokens, 0, false, text)
	answer, err := answerWords(h, s.cfg.Output.Answer)
	if err != nil {
		return nil, err
	}
	if answer != nil {
		n, reason = planAnswer(answer, opts.reasoningTokens, maxTokens)
	}
	seqRNG := sequenceRNG(s.cfg.Seed, seq)
	var faults faultSet
	if v, ok := h[http.CanonicalHeaderKey(HeaderFault)]; ok {
		if len(v) != 1 {
			return nil, fmt.Errorf("%s given %d times", HeaderFault, len(v))
		}
		if faults, err = parseFaultHeader(v[0], s.cfg.Faults); err != nil {
			return nil, err
		}
	} else {
		faults = drawFaults(s.cfg.Faults, n, seqRNG)
	}
	return &plan{
		id: id, model: model, stream: stream, promptTokens: prompt, maxTokens: maxTokens,
		outputTokens: n, finishReason: reason, opts: opts, faults: faults,
		created: time.Now().Unix(), text: text, timing: seqRNG, answer: answer,
		prefix: s.planPrefix(promptText, opts),
	}, nil
}

// handleTGIInfo answers GET /info with the fields clients and dashboards
// read from TGI.
func (s *Server) handleTGIInfo(w http.ResponseWriter, _ *http.Request) {
	info := map[string]any{
		"model_id":                s.cfg.ServedModelNames[0],
		"model_sha":               nil,
		"model_dtype":             "torch.float16",
		"model_device_type":       "cuda",
		"model_pipeline_tag":      "text-generation",
		"max_concurrent_requests": s.cfg.Scheduler.MaxRunning + s.cfg.Scheduler.MaxQueue,
		"max_best_of":             2,
		"max_stop_sequences":      tgiMaxStopSequences,
		"max_input_tokens":        s.cfg.MaxModelLen - 1,
		"max_total_tokens":        s.cfg.MaxModelLen,
		"validation_workers":      2,
		"max_client_batch_size":   4,
		"router":                  "text-generation-router",
		"version":                 "3.3.6-sim",
		"sha":                     nil,
		"docker_label":            nil,
		"waiting_served_ratio":    1.2,
		"max_batch_total_tokens":  s.cfg.Scheduler.KVCacheCapacityTokens,
		"max_waiting_tokens":      20,
		"max_batch_size":          s.cfg.Scheduler.MaxRunning,
		"speculate":               0,
		"model_device_count":      1,
	}
	b, _ := json.Marshal(info)
	writeBody(w, http.StatusOK, "application/json", b)
}
