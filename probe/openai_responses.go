package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// responsesDriver speaks the OpenAI Responses API, POST /v1/responses
// (OpenAI; vLLM, SGLang, llama.cpp and Ollama serve it too). A streamed
// answer is Server-Sent Events with an `event:` line naming each event's
// type and a JSON `data:` line carrying it again as "type", in the order
// response.created → response.in_progress → output items with their
// deltas → response.completed (or .incomplete / .failed). There is no
// [DONE]: the terminal response.* event ends the stream, and it carries
// the whole response with its usage.
type responsesDriver struct {
	t      *httpTarget
	url    string
	bodies *encoderKey
}

func newOpenAIResponsesDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	t, err := newHTTPTarget(opts, logger)
	if err != nil {
		return nil, err
	}
	return &responsesDriver{t: t, url: endpointURL(t.base, "/responses"), bodies: new(encoderKey)}, nil
}

func (d *responsesDriver) Close() { d.t.close() }

// Probe implements Driver.
func (d *responsesDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.t.done(r)
	body, err := encodeBody(d.bodies, d.encodeBody, req, r.RequestID)
	d.t.roundTrip(ctx, r, d.url, body, err, req.Stream, req.Stream, d)
	return r
}

// responsesRequestBody is the request, fields in encoding/json's map key
// order so that it and the Extra path (a map) give the same bytes.
//
// The sampling settings are chat's (openai.go): seed, stop, ignore_eos
// and min_tokens are sent only when set, as chat sends them; the
// Responses API itself has none of them (vLLM takes its extensions on
// this route too), and an extra entry with a null value removes one for a
// server that refuses it. store is left to the server's default.
type responsesRequestBody struct {
	IgnoreEOS       bool     `json:"ignore_eos,omitempty"`
	Input           any      `json:"input"`
	Instructions    string   `json:"instructions,omitempty"`
	MaxOutputTokens int      `json:"max_output_tokens,omitempty"`
	MinTokens       int      `json:"min_tokens,omitempty"`
	Model           string   `json:"model,omitempty"`
	Seed            *int64   `json:"seed,omitempty"`
	Stop            []string `json:"stop,omitempty"`
	Stream          bool     `json:"stream"`
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
}

// responsesInput is one message of input, EasyInputMessage's shape.
type responsesInput struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (d *responsesDriver) fields(req *Request) *responsesRequestBody {
	b := &responsesRequestBody{
		Model:       req.modelOr(d.t.opts.Model),
		Stream:      req.Stream,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Seed:        req.Seed,
		Stop:        req.Stop,
		IgnoreEOS:   req.IgnoreEOS,
	}
	if req.MaxTokens > 0 {
		b.MaxOutputTokens = req.MaxTokens
	}
	if req.MinTokens > 0 {
		b.MinTokens = req.MinTokens
	}
	if len(req.Messages) == 0 {
		b.Input = req.Prompt
		return b
	}
	// A leading system message becomes instructions, the API's place for
	// it; the rest of the conversation is input, in order.
	msgs := req.Messages
	if msgs[0].Role == "system" {
		b.Instructions = msgs[0].Content
		msgs = msgs[1:]
	}
	in := make([]responsesInput, len(msgs))
	for i, m := range msgs {
		in[i] = responsesInput(m)
	}
	b.Input = in
	return b
}

// encodeBody is the request as a bodyEncoder; the body carries no id. An
// Extra entry overrides a built field, a nil one removes it.
func (d *responsesDriver) encodeBody(req *Request, _ string) ([]byte, error) {
	b := d.fields(req)
	if len(req.Extra) == 0 {
		return json.Marshal(b)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, 8+len(req.Extra))
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	setFields(m, req.Extra)
	return json.Marshal(m)
}

// Event types the driver acts on. Any other type (the API adds some every
// few months: web search, images, MCP, ...) is read and ignored, so that a
// new one never fails a probe.
const (
	evCreated        = "response.created"
	evCompleted      = "response.completed"
	evIncomplete     = "response.incomplete"
	evFailed         = "response.failed"
	evError          = "error"
	evTextDelta      = "response.output_text.delta"
	evRefusalDelta   = "response.refusal.delta"
	evReasoningDelta = "response.reasoning_text.delta"
	evSummaryDelta   = "response.reasoning_summary_text.delta"
	evFunctionDelta  = "response.function_call_arguments.delta"
	evCustomDelta    = "response.custom_tool_call_input.delta"
)

// respEvent is what the driver reads of one event's data: its type and
// sequence number, a delta's text, an error event's fields, and the
// response a response.* event carries. Everything else is skipped.
type respEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int64          `json:"sequence_number"`
	Delta          json.RawMessage `json:"delta"`
	Code           json.RawMessage `json:"code"`
	Message        json.RawMessage `json:"message"`
	Response       *respObject     `json:"response"`
}

// respObject is the Response object: a terminal event's, or a whole
// non-streamed answer.
type respObject struct {
	ID                string          `json:"id"`
	Status            string          `json:"status"`
	Error             *respError      `json:"error"`
	IncompleteDetails *respIncomplete `json:"incomplete_details"`
	Usage             *respUsage      `json:"usage"`
	Output            []respItem      `json:"output"`
	errorFields                       // a whole answer may be an error body
}

type respError struct {
	Code    json.RawMessage `json:"code"`
	Message json.RawMessage `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respUsage struct {
	InputTokens        *int `json:"input_tokens"`
	OutputTokens       *int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens *int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// respItem is an output item of a whole answer: a message's text parts,
// a reasoning item's content and summary, a function call's arguments.
type respItem struct {
	Type      string     `json:"type"`
	Content   []respPart `json:"content"`
	Summary   []respPart `json:"summary"`
	Arguments present    `json:"arguments"`
}

type respPart struct {
	Type string          `json:"type"`
	Text json.RawMessage `json:"text"`
}

// respStream is the state of one streamed answer.
type respStream struct {
	created bool
	// seq is the last sequence_number seen, valid when hasSeq.
	seq    int64
	hasSeq bool
	// last is the type of the last event, for the error of a stream cut.
	last string
	// terminal is the type of the event that ended the response.
	terminal string
	usage    *respUsage
}

// readStream implements answerReader.
func (d *responsesDriver) readStream(ex *exchange, r *Result) {
	st := &respStream{}
	opts := ex.t.opts
	sr := newSSEReader(ex.body, opts.MaxLineBytes, opts.MaxResponseBytes)
	var ev respEvent
	for {
		sev, err := sr.next()
		if err != nil {
			ex.streamBroke(r, err, st.unended(r))
			break
		}
		if d.onEvent(sev, r, st, &ev) {
			if r.Outcome == OutcomeSuccess && !r.Cut() {
				st.drain(ex, sr, r)
			}
			break
		}
	}
	st.finish(r)
}

// drain reads what follows a completed response, briefly (exchange.drain),
// so the connection can be reused. The response is over, so an event
// there means the server broke the protocol (a second response.completed,
// deltas after it): the probe fails, as the answer measured may not be
// the whole of what the server generated. [DONE], which some servers add
// out of habit, is allowed.
func (st *respStream) drain(ex *exchange, sr *sseReader, r *Result) {
	var after int
	var first string
	ex.drain(func() error {
		ev, err := sr.next()
		if err != nil {
			return err
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 || bytes.Equal(data, doneMarker) {
			return nil
		}
		if after == 0 {
			first = sanitize(data)
		}
		after++
		return nil
	})
	if after > 0 {
		r.Outcome = OutcomeProtocolError
		r.Err = fmt.Errorf("%d events after %s, the end of the response (first: %s)", after, st.terminal, first)
	}
}

// unended says what a stream the server closed before its terminal event
// lacked.
func (st *respStream) unended(r *Result) error {
	if !st.created {
		return errors.New("stream ended before response.created: no Responses API event arrived (does the server serve /v1/responses?)")
	}
	return fmt.Errorf("stream ended without response.completed after %d output deltas (last event %s)", len(r.Chunks), st.last)
}

// onEvent handles one SSE event; it returns true when the stream is over
// (r.Outcome set).
func (d *responsesDriver) onEvent(sev *sseEvent, r *Result, st *respStream, ev *respEvent) bool {
	fail := func(o Outcome, err error) bool { return r.end(sev.At, o, err) }
	if sev.ErrorData != nil {
		return fail(streamError(sev.ErrorData))
	}
	data := bytes.TrimSpace(sev.Data)
	if len(data) == 0 {
		return false // a comment or keep-alive
	}
	if bytes.Equal(data, doneMarker) {
		// Not part of the API; a server that sends it before the
		// response ended has cut the response short.
		return fail(OutcomeIncomplete, fmt.Errorf("[DONE] after %d output deltas without response.completed (last event %s)", len(r.Chunks), st.last))
	}
	*ev = respEvent{}
	if err := decodeJSON(data, ev); err != nil {
		return fail(OutcomeProtocolError, fmt.Errorf("event after %d output deltas is not valid JSON (%v): %s", len(r.Chunks), err, sanitize(data)))
	}
	typ := ev.Type
	if typ == "" {
		// The data's type is the API's; the event: line repeats it. Some
		// servers may send only the line.
		typ = string(sev.Type)
	} else if name := string(sev.Type); name != "" && name != "message" && name != typ {
		return fail(OutcomeProtocolError, fmt.Errorf("event: line says %s but its data says %s", sanitize(sev.Type), sanitize([]byte(typ))))
	}
	if typ == "" {
		return fail(OutcomeProtocolError, fmt.Errorf("event without a type after %d output deltas: %s", len(r.Chunks), sanitize(data)))
	}
	// sequence_number only grows; equal numbers are let through, for a
	// server that does not count.
	if s := ev.SequenceNumber; s != nil {
		if st.hasSeq && *s < st.seq {
			return fail(OutcomeProtocolError, fmt.Errorf("event %s has sequence_number %d after %d: events out of order", sanitize([]byte(typ)), *s, st.seq))
		}
		st.seq, st.hasSeq = *s, true
	}
	st.last = sanitize([]byte(typ))
	switch typ {
	case evError:
		if len(ev.Code) == 0 && len(ev.Message) == 0 {
			// Not the API's flat error event: a chat-style
			// {"error":{...}} body, as other routes send.
			return fail(streamError(data))
		}
		e := respAPIError(ev.Code, ev.Message)
		return fail(e.outcome(), fmt.Errorf("error event: %w", e))
	case evCreated:
		if st.created {
			return fail(OutcomeProtocolError, errors.New("a second response.created"))
		}
		st.created = true
		if ev.Response != nil {
			r.ResponseID = responseID(ev.Response.ID)
		}
		return false
	}
	if !st.created {
		if respOutputEvent(typ) || respTerminal(typ) {
			return fail(OutcomeProtocolError, fmt.Errorf("%s before response.created", st.last))
		}
		return false // an event this driver does not know; harmless
	}
	if respTerminal(typ) {
		return d.terminal(typ, ev.Response, r, st, sev.At)
	}
	delta := bytes.TrimSpace(ev.Delta)
	if !respOutputEvent(typ) || len(delta) == 0 || !presentValue(delta) {
		return false // no delta, or an empty one: no output
	}
	if delta[0] != '"' {
		return fail(OutcomeProtocolError, fmt.Errorf("%s delta is not a string: %s", st.last, sanitize(data)))
	}
	since := sev.At.Sub(r.Start)
	if typ == evReasoningDelta || typ == evSummaryDelta {
		r.Reasoning.Seen = true
		if r.Reasoning.FirstReasoning == 0 {
			r.Reasoning.FirstReasoning = since
		}
	} else if r.Reasoning.FirstAnswer == 0 {
		r.Reasoning.FirstAnswer = since
	}
	if r.answer != nil && typ == evTextDelta {
		r.answer.addJSONText(ev.Delta)
	}
	if err := r.addChunk(sev.At, 1); err != nil {
		return r.stopOnChunkError(sev.At, err)
	}
	return false
}

// maxResponseID bounds the response id kept: OpenAI's are about 50
// characters; an id that is longer or not printable ASCII is not kept,
// so a later request never carries what a hostile server made up.
const maxResponseID = 256

func responseID(id string) string {
	if len(id) > maxResponseID {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return ""
		}
	}
	return id
}

// respOutputEvent reports whether events of type typ carry output: the
// answer's text, a refusal, reasoning (raw or summarised) or a tool
// call's arguments. Their deltas are what TTFT and ITL are measured on,
// as chat's content, reasoning and tool-call fragments are.
func respOutputEvent(typ string) bool {
	switch typ {
	case evTextDelta, evRefusalDelta, evReasoningDelta, evSummaryDelta, evFunctionDelta, evCustomDelta:
		return true
	}
	return false
}

func respTerminal(typ string) bool {
	return typ == evCompleted || typ == evIncomplete || typ == evFailed
}

// terminal settles the response from its terminal event.
func (d *responsesDriver) terminal(typ string, resp *respObject, r *Result, st *respStream, at time.Time) bool {
	st.terminal = typ
	if resp == nil {
		return r.end(at, OutcomeProtocolError, fmt.Errorf("%s without its response object", typ))
	}
	st.usage = resp.Usage
	o, err := resp.settle(typ, r)
	return r.end(at, o, err)
}

// settle maps a finished Response (from its terminal event, whose type
// says how it ended, or the status of a whole answer) to the outcome and
// finish reason, in chat's terms: completed is finish_reason "stop";
// incomplete at max_output_tokens is "length", a normal end as it is for
// chat; incomplete for any other reason (content_filter) is incomplete;
// failed maps the error's code like an HTTP status.
func (o *respObject) settle(how string, r *Result) (Outcome, error) {
	switch how {
	case evCompleted, "completed":
		r.FinishReason = "stop"
		return OutcomeSuccess, nil
	case evIncomplete, "incomplete":
		reason := ""
		if o.IncompleteDetails != nil {
			reason = sanitize([]byte(o.IncompleteDetails.Reason))
		}
		if reason == "max_output_tokens" {
			r.FinishReason = "length"
			return OutcomeSuccess, nil
		}
		if reason == "" {
			reason = "no reason given"
		}
		r.FinishReason = reason
		return OutcomeIncomplete, fmt.Errorf("response incomplete: %s", reason)
	case evFailed, "failed":
		var e apiError
		if o.Error != nil {
			e = respAPIError(o.Error.Code, o.Error.Message)
		}
		return e.outcome(), fmt.Errorf("response failed: %w", e)
	}
	return OutcomeProtocolError, fmt.Errorf("response status %q is not an end (completed, incomplete or failed); a background response?", sanitize([]byte(how)))
}

// respAPIError reads a Responses API error code: an HTTP status (as a
// number or a numeric string, as chat errors carry it) or one of the
// API's names (ResponseError.code), mapped to the status the same failure
// gets as an HTTP answer so that the outcome is the one chat gives it.
func respAPIError(code, message json.RawMessage) apiError {
	e := apiError{message: jsonText(message), code: jsonCode(code)}
	if e.code != 0 {
		return e
	}
	name := jsonText(code)
	e.kind = name
	switch {
	case name == "rate_limit_exceeded" || name == "insufficient_quota":
		e.code = http.StatusTooManyRequests
	case name == "server_is_overloaded" || name == "overloaded" || name == "service_unavailable":
		e.code = http.StatusServiceUnavailable
	case name == "server_error" || name == "internal_error" || name == "vector_store_timeout" || strings.HasSuffix(name, "_timeout"):
		e.code = http.StatusInternalServerError
	case strings.HasPrefix(name, "invalid_") || strings.HasSuffix(name, "_policy") ||
		strings.HasSuffix(name, "_policy_violation") || strings.HasPrefix(name, "image_") ||
		name == "context_length_exceeded" || name == "data_residency_mismatch" || name == "unsupported_image_media_type" ||
		name == "empty_image_file" || name == "failed_to_download_image":
		e.code = http.StatusBadRequest
	}
	return e
}

// finish settles token counts once the stream is over (also on failure,
// so partial answers can be inspected): the terminal response's usage,
// else the deltas counted.
func (st *respStream) finish(r *Result) {
	if u := st.usage; u != nil && u.OutputTokens != nil {
		u.apply(r)
		return
	}
	if u := st.usage; u != nil {
		u.apply(r)
	}
	r.countChunkTokens()
}

// apply copies the server's counts into r; negative counts are taken as 0
// and implausible ones are dropped later (checkCounts).
func (u *respUsage) apply(r *Result) {
	if u.OutputTokens != nil {
		r.OutputTokens, r.OutputTokensSource = max(*u.OutputTokens, 0), TokenSourceServer
	}
	if u.InputTokens != nil {
		r.InputTokens, r.InputTokensSource = max(*u.InputTokens, 0), TokenSourceServer
	}
	if c := u.InputTokensDetails.CachedTokens; c != nil && *c >= 0 {
		r.CachedInputTokens, r.HasCachedInputTokens = *c, true
	}
	if n := u.OutputTokensDetails.ReasoningTokens; n != nil && *n >= 0 {
		r.Reasoning.Tokens, r.Reasoning.HasTokens = *n, true
	}
}

// readBody implements answerReader: a whole Response object (stream:
// false), or a JSON answer to a streamed request (usually an error).
func (d *responsesDriver) readBody(ex *exchange, r *Result, wantedStream bool) {
	var o respObject
	if !ex.readAnswer(r, "a JSON Response object", func(b []byte) error { return decodeJSON(b, &o) }) {
		return
	}
	if o.Status == "" {
		// An error body: {"error":{"message","type","code"}} (which
		// decodes into o.Error), or vLLM's older flat shape.
		if o.Error != nil {
			e := respAPIError(o.Error.Code, o.Error.Message)
			r.Outcome, r.Err = e.outcome(), e
			return
		}
		if e, ok := o.apiError(); ok {
			r.Outcome, r.Err = e.outcome(), e
			return
		}
	}
	if wantedStream {
		streamAnsweredWithJSON(r)
		return
	}
	if o.Status == "" {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("answer has no status (not a Response object?)")
		return
	}
	r.Outcome, r.Err = o.settle(o.Status, r)
	r.ResponseID = responseID(o.ID)
	if o.Usage != nil {
		o.Usage.apply(r)
	}
	for i := range o.Output {
		it := &o.Output[i]
		switch it.Type {
		case "reasoning":
			if len(it.Content) > 0 || len(it.Summary) > 0 {
				r.Reasoning.Seen = true
			}
		case "message":
			if r.answer == nil {
				continue
			}
			for _, p := range it.Content {
				if p.Type == "output_text" {
					r.answer.addJSONText(p.Text)
				}
			}
		}
	}
}
