package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"strconv"
	"strings"
	"time"
)

// openAIDriver speaks the OpenAI-compatible /v1/chat/completions
// (chat=true) or /v1/completions API.
type openAIDriver struct {
	t    *httpTarget
	chat bool
	url  string
	// bodies names this driver's encodings in workload items' caches.
	bodies *encoderKey
}

func (d *openAIDriver) Close() { d.t.close() }

// Probe implements Driver.
func (d *openAIDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.t.done(r)
	body, err := encodeBody(d.bodies, d.encodeBody, req, r.RequestID)
	d.t.roundTrip(ctx, r, d.url, body, err, req.Stream, req.Stream, d)
	return r
}

// done finishes every probe: secrets out of the error, one debug line.
func (t *httpTarget) done(r *Result) {
	r.settleAnswer()
	r.checkCounts()
	r.Err = t.redact(r.Err)
	if r.Outcome == "" {
		r.Outcome = OutcomeProtocolError
	}
	if !t.logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []any{"request_id", r.RequestID, "outcome", r.Outcome, "status", r.StatusCode,
		"ttft", r.TTFT, "end_to_end", r.EndToEnd, "output_tokens", r.OutputTokens}
	if r.Err != nil {
		attrs = append(attrs, "err", r.Err)
	}
	t.logger.Debug("probe finished", attrs...)
}

// requestBody builds the JSON body.
//
// Only max_tokens is sent, never max_completion_tokens as well: every
// server in the reference honours max_tokens (vLLM and SGLang deprecate it
// for chat but still apply it, llama.cpp maps it to n_predict, Ollama /v1
// knows only it), while TGI declares max_completion_tokens a serde alias of
// max_tokens, so a body carrying both is rejected there as a duplicate field.
//
// ignore_eos and min_tokens are vLLM/SGLang extensions that TGI and Ollama
// do not know; they are sent only when set. stream_options is sent only when
// streaming because vLLM rejects it with stream=false. An Extra entry
// overrides a built field; an Extra entry with a nil value removes it (e.g.
// stream_options for a server that rejects it).
func (d *openAIDriver) requestBody(req *Request) ([]byte, error) {
	return d.encodeBody(req, "")
}

// encodeBody is requestBody as a bodyEncoder; the body carries no id.
func (d *openAIDriver) encodeBody(req *Request, _ string) ([]byte, error) {
	if len(req.Extra) == 0 {
		return json.Marshal(d.requestFields(req))
	}
	return d.requestBodyMap(req)
}

// oaiRequestBody is the body requestBodyMap builds, as a struct: its fields
// are in the order encoding/json sorts a map's keys and are omitted exactly
// when requestBodyMap leaves the key out, so both give the same bytes
// (TestOpenAIRequestBodyStructMatchesMap), but this one is encoded from
// json's cached struct encoder without a map built, sorted and reflected
// over per request.
type oaiRequestBody struct {
	IgnoreEOS     bool              `json:"ignore_eos,omitempty"`
	MaxTokens     int               `json:"max_tokens,omitempty"`
	Messages      any               `json:"messages,omitempty"`
	MinTokens     int               `json:"min_tokens,omitempty"`
	Model         string            `json:"model,omitempty"`
	Prompt        any               `json:"prompt,omitempty"`
	Seed          *int64            `json:"seed,omitempty"`
	Stop          []string          `json:"stop,omitempty"`
	Stream        bool              `json:"stream"`
	StreamOptions *oaiStreamOptions `json:"stream_options,omitempty"`
	Temperature   *float64          `json:"temperature,omitempty"`
	TopP          *float64          `json:"top_p,omitempty"`
}

type oaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

var includeUsage = &oaiStreamOptions{IncludeUsage: true}

// requestFields is requestBodyMap's body for a request without Extra.
func (d *openAIDriver) requestFields(req *Request) *oaiRequestBody {
	b := &oaiRequestBody{
		Model:       req.modelOr(d.t.opts.Model),
		Stream:      req.Stream,
		Seed:        req.Seed,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		IgnoreEOS:   req.IgnoreEOS,
	}
	if d.chat {
		b.Messages = req.chatMessages()
	} else {
		b.Prompt = req.promptText()
	}
	if req.Stream {
		b.StreamOptions = includeUsage
	}
	if req.MaxTokens > 0 {
		b.MaxTokens = req.MaxTokens
	}
	if req.MinTokens > 0 {
		b.MinTokens = req.MinTokens
	}
	if len(req.Stop) > 0 {
		b.Stop = req.Stop
	}
	return b
}

// requestBodyMap builds the body as a map, which Extra entries can
// override or remove fields of.
func (d *openAIDriver) requestBodyMap(req *Request) ([]byte, error) {
	m := make(map[string]any, 12)
	if model := req.modelOr(d.t.opts.Model); model != "" {
		m["model"] = model
	}
	if d.chat {
		m["messages"] = req.chatMessages()
	} else {
		m["prompt"] = req.promptText()
	}
	m["stream"] = req.Stream
	if req.Stream {
		m["stream_options"] = map[string]any{"include_usage": true}
	}
	req.putVLLMSampling(m)
	setFields(m, req.Extra)
	return json.Marshal(m)
}

// putSampling sets the sampling knobs the request sets, under the names
// and with the meaning OpenAI's API, vLLM's SamplingParams and Ollama's
// options share.
func (r *Request) putSampling(m map[string]any) {
	if r.Temperature != nil {
		m["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		m["top_p"] = *r.TopP
	}
	if r.Seed != nil {
		m["seed"] = *r.Seed
	}
	if len(r.Stop) > 0 {
		m["stop"] = r.Stop
	}
}

// putVLLMSampling is putSampling with max_tokens and vLLM's ignore_eos and
// min_tokens: the SamplingParams fields a probe sets, which vLLM takes
// alike in an OpenAI-compatible body and in its Triton backend's
// sampling_parameters. ignore_eos and min_tokens are sent only when set,
// as other servers do not know them.
func (r *Request) putVLLMSampling(m map[string]any) {
	if r.MaxTokens > 0 {
		m["max_tokens"] = r.MaxTokens
	}
	r.putSampling(m)
	if r.IgnoreEOS {
		m["ignore_eos"] = true
	}
	if r.MinTokens > 0 {
		m["min_tokens"] = r.MinTokens
	}
}

// setFields applies src, the request's Extra entries, to the fields in dst
// a driver built: an entry overrides the field, a nil entry removes it.
func setFields(dst, src map[string]any) {
	for k, v := range src {
		setField(dst, k, v)
	}
}

func setField(dst map[string]any, k string, v any) {
	if v == nil {
		delete(dst, k)
	} else {
		dst[k] = v
	}
}

// promptText is the request as one prompt: Prompt, or the messages
// flattened when only they are set.
func (r *Request) promptText() string {
	if r.Prompt == "" && len(r.Messages) > 0 {
		return promptFromMessages(r.Messages)
	}
	return r.Prompt
}

// chatMessages is the request as a conversation: Messages, or Prompt as a
// single user message when only it is set.
func (r *Request) chatMessages() []Message {
	if len(r.Messages) == 0 {
		return []Message{{Role: "user", Content: r.Prompt}}
	}
	return r.Messages
}

// modelOr is the request's model, or the target's when it names none.
func (r *Request) modelOr(targetModel string) string {
	if r.Model == "" {
		return targetModel
	}
	return r.Model
}

// promptFromMessages flattens chat messages for the completions API. No
// chat template is applied (the prober does not know the model's); the
// contents are joined by blank lines, which keeps the input token count
// close to the chat form.
func promptFromMessages(msgs []Message) string {
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "\n\n")
}

func isJSONContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// oaiChunk is what we read from a streamed chunk or a whole answer: only
// the fields the measurements need, plus every error shape.
type oaiChunk struct {
	errorFields
	Choices oaiChoices   `json:"choices"`
	Usage   *oaiUsage    `json:"usage"`
	Timings llamaTimings `json:"timings"` // llama.cpp
}

// llamaTimings is llama.cpp's non-standard timings object, the server's
// own clock for the request (server_slot::get_timings in
// tools/server/server-context.cpp): prompt_ms from the slot starting on
// the prompt to the first token sampled, predicted_ms from then to the
// last token. It arrives on the final chunk (with finish_reason, or on
// the usage chunk in newer builds) and in non-streamed answers.
//
// It is read leniently, by the same code on the fast and the slow path: a
// value that is not a usable number (llama.cpp writes NaN and Inf, such
// as 0/0 ms per token, as null) marks that field invalid rather than
// failing the chunk, and a timings value that is not an object has no
// usable field. Keys match exactly; escaped or case-variant keys are
// unknown keys. Nothing is allocated.
type llamaTimings struct {
	present                                                      bool
	promptMS, promptPerTokenMS, predictedMS, predictedPerTokenMS timingValue
	// promptN is the prompt tokens the slot evaluated, the cached ones
	// left out: what older builds give for the cache (cachedFallback).
	promptN timingValue
}

// timingValue is one millisecond figure of llamaTimings; ok is false when
// it was absent or not a finite number.
type timingValue struct {
	ms float64
	ok bool
}

func (t *llamaTimings) UnmarshalJSON(b []byte) error {
	t.parse(b)
	return nil
}

// parse reads the timings value b, valid JSON (the decoder checked it).
func (t *llamaTimings) parse(b []byte) {
	*t = llamaTimings{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return
	}
	t.present = true
	if b[0] != '{' {
		return
	}
	i := skipWS(b, 1)
	for i < len(b) && b[i] == '"' {
		end, _ := skipString(b, i)
		key := b[i+1 : max(end-1, i+1)]
		v := skipWS(b, skipWS(b, end)+1) // past ':'
		if v >= len(b) {
			return
		}
		vend := skipValue(b, v)
		switch string(key) {
		case "prompt_ms":
			t.promptMS = timingNumber(b[v:vend])
		case "prompt_per_token_ms":
			t.promptPerTokenMS = timingNumber(b[v:vend])
		case "predicted_ms":
			t.predictedMS = timingNumber(b[v:vend])
		case "predicted_per_token_ms":
			t.predictedPerTokenMS = timingNumber(b[v:vend])
		case "prompt_n":
			t.promptN = timingNumber(b[v:vend])
		}
		i = skipWS(b, vend)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i = skipWS(b, i+1)
	}
}

// timingNumber reads a JSON number; anything else, and a number too large
// for a float64, is not ok.
func timingNumber(raw []byte) timingValue {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return timingValue{}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return timingValue{}
	}
	return timingValue{ms: f, ok: true}
}

// maxServerTiming bounds a duration a server reports about one request;
// a probe taking longer is absurd, and such a value is counted invalid.
const maxServerTiming = time.Hour

// duration is the value as a duration, ok when it is a finite number of
// milliseconds in [0, maxServerTiming].
func (v timingValue) duration() (time.Duration, bool) {
	if !v.ok || v.ms < 0 || v.ms > float64(maxServerTiming/time.Millisecond) {
		return 0, false
	}
	return time.Duration(math.Round(v.ms * float64(time.Millisecond))), true
}

// apply adds the timings to r's ServerTimings under llama.cpp's names
// without the unit, in the object's order, and counts the fields that are
// missing or unusable in r.ServerTimingsInvalid. It runs once per answer,
// on the last timings object seen (llama.cpp's timings_per_token puts one
// on every chunk).
func (t *llamaTimings) apply(r *Result) {
	if !t.present {
		return
	}
	for _, f := range [...]struct {
		name string
		v    timingValue
	}{
		{"prompt", t.promptMS}, {"prompt_per_token", t.promptPerTokenMS},
		{"predicted", t.predictedMS}, {"predicted_per_token", t.predictedPerTokenMS},
	} {
		d, ok := f.v.duration()
		if !ok {
			r.ServerTimingsInvalid++
			continue
		}
		r.ServerTimings = append(r.ServerTimings, ServerTiming{Name: f.name, Duration: d})
	}
}

// oaiChoices refuses, before decoding, an array with an element that is
// not an object: encoding/json would build an error value for every such
// element and keep going, about 100 times the bytes of a line of numbers,
// where one error is all the chunk needs to be a protocol error.
type oaiChoices []oaiChoice

func (c *oaiChoices) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' && !elementsObjectsOrNull(t) {
		return errors.New("choices holds a value that is not an object")
	}
	return json.Unmarshal(b, (*[]oaiChoice)(c))
}

type oaiChoice struct {
	Text         present     `json:"text"`
	Delta        objectDelta `json:"delta"`
	Message      objectDelta `json:"message"`
	FinishReason *string     `json:"finish_reason"`
}

// objectDelta is an oaiDelta that refuses at once a value that is neither
// an object nor null, for the reason oaiChoices gives: one error for the
// chunk rather than one per choice of a hostile line.
type objectDelta struct{ oaiDelta }

func (d *objectDelta) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || (t[0] != '{' && !bytes.Equal(t, []byte("null"))) {
		return errors.New("delta or message is not an object")
	}
	return json.Unmarshal(b, &d.oaiDelta)
}

type oaiDelta struct {
	Content          present `json:"content"`
	ReasoningContent present `json:"reasoning_content"` // vLLM (older), SGLang, llama.cpp, DeepSeek
	Reasoning        present `json:"reasoning"`         // vLLM (newer), Ollama
	// A streamed function call: its name and arguments arrive as
	// fragments in place of content, and are output like it.
	ToolCalls    toolCalls    `json:"tool_calls"`    // OpenAI, vLLM, SGLang, llama.cpp, TGI, Ollama
	FunctionCall functionCall `json:"function_call"` // the legacy OpenAI functions API
}

// toolCalls records whether a tool_calls value carried a fragment of a
// call: a function name or an arguments piece that is present (see
// present). The value is an array of calls; TGI before 3.2 sent a single
// call object, which counts the same. The first fragment's id, type and
// index alone carry no output.
//
// An unexpected shape anywhere in the value (a call or a function that is
// neither an object nor null) makes the whole value carry nothing instead
// of failing the chunk: such a stream was read without complaint before
// tool calls counted as output, and still is. The fast path (oaifast.go)
// handles the ordinary shapes and leaves the rest to this method.
type toolCalls bool

func (t *toolCalls) UnmarshalJSON(b []byte) error {
	*t = toolCalls(toolCallsValue(b))
	return nil
}

// functionCall is the legacy delta.function_call, {"name","arguments"}:
// like one call's function in toolCalls.
type functionCall bool

func (f *functionCall) UnmarshalJSON(b []byte) error {
	var fn oaiFunction
	*f = functionCall(json.Unmarshal(b, &fn) == nil && fn.carries())
	return nil
}

type oaiToolCall struct {
	Function oaiFunction `json:"function"`
}

type oaiFunction struct {
	Name      present `json:"name"`
	Arguments present `json:"arguments"`
}

func (f *oaiFunction) carries() bool { return bool(f.Name || f.Arguments) }

// toolCallsValue is toolCalls' rule on a raw JSON value, which the caller
// is decoding (so it is valid and within the depth bound). Work and memory
// stay linear in len(b): a call decodes to two bools, and an array with an
// element that cannot be a call is refused before decoding, since
// encoding/json would build an error value for each such element, dozens
// of times the bytes of an array of numbers.
func toolCallsValue(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '[':
		if !elementsObjectsOrNull(b) {
			return false // an UnmarshalTypeError for each odd element
		}
		var calls []oaiToolCall
		if json.Unmarshal(b, &calls) != nil {
			return false
		}
		for i := range calls {
			if calls[i].Function.carries() {
				return true
			}
		}
	case '{':
		var call oaiToolCall
		return json.Unmarshal(b, &call) == nil && call.Function.carries()
	}
	return false
}

// elementsObjectsOrNull reports whether every element of the valid JSON
// array b is an object or null, the values that decode into a struct.
func elementsObjectsOrNull(b []byte) bool {
	i := skipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for i < len(b) {
		if b[i] != '{' && b[i] != 'n' {
			return false
		}
		i = skipWS(b, skipValue(b, i))
		if i >= len(b) || b[i] == ']' {
			return true
		}
		i = skipWS(b, i+1) // ','
	}
	return true
}

type oaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// present records whether a text field carried output, without keeping
// (or allocating) the text: null, "" and empty containers carry none.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = present(presentValue(b))
	return nil
}

// presentValue is present's rule on a raw JSON value.
func presentValue(b []byte) bool {
	switch string(bytes.TrimSpace(b)) {
	case "null", `""`, "[]", "{}":
		return false
	}
	return true
}

// hasOutput reports whether any choice carried output: text, reasoning,
// or a fragment of a function call.
func (c *oaiChunk) hasOutput() bool {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if bool(ch.Text) || ch.Delta.hasOutput() || ch.Message.hasOutput() {
			return true
		}
	}
	return false
}

func (d *oaiDelta) hasOutput() bool {
	return bool(d.Content || d.ReasoningContent || d.Reasoning) || bool(d.ToolCalls) || bool(d.FunctionCall)
}

func (c *oaiChunk) finishReason() string {
	for i := range c.Choices {
		if fr := c.Choices[i].FinishReason; fr != nil && *fr != "" {
			return sanitize([]byte(*fr))
		}
	}
	return ""
}

// decode resets c (keeping the choices' backing array) and decodes b: the
// validating fast path for ordinary chunks (oaifast.go), one pass over b;
// else decodeJSON, which also gives the error for invalid input.
func (c *oaiChunk) decode(b []byte) error {
	c.reset()
	if c.decodeFast(b) {
		return nil
	}
	c.reset()
	return decodeJSON(b, c)
}

func (c *oaiChunk) reset() {
	choices := c.Choices[:cap(c.Choices)]
	clear(choices)
	*c = oaiChunk{Choices: choices[:0]}
}

// streamState accumulates what a stream tells us about tokens.
type streamState struct {
	// cum[i] is the cumulative completion_tokens carried by content chunk i
	// (continuous usage stats), -1 when that chunk had no usage.
	cum      []int
	usage    oaiUsage
	hasUsage bool
	// timings is the last llama.cpp timings object of the stream.
	timings llamaTimings
}

var doneMarker = []byte("[DONE]")

func (d *openAIDriver) readStream(ex *exchange, r *Result) {
	st := streamState{cum: make([]int, 0, cap(r.Chunks))}
	var chunk oaiChunk
	handle := func(ev *sseEvent) bool { return d.onEvent(ev, r, &st, &chunk) }
	if err := ex.readEvents(handle, r); err != nil {
		ex.streamBroke(r, err, d.unended(r))
	}
	st.finish(r)
}

// unended says what a stream that the server closed before [DONE] lacked.
// [DONE] is the OpenAI stream's only end: a finish_reason says one choice
// is done, not that the usage chunk (the server's token count) or other
// choices will not follow, and a proxy that cuts a stream after the finish
// chunk looks the same. So such a stream is incomplete even when a
// finish_reason arrived; the error names it, so that a server that never
// sends [DONE] is told apart from one cut short (docs/metrics.md).
func (d *openAIDriver) unended(r *Result) error {
	if r.FinishReason != "" {
		return fmt.Errorf("stream ended without [DONE] after %d output chunks, although finish_reason %q had arrived (a server that never sends [DONE]?)",
			len(r.Chunks), r.FinishReason)
	}
	return fmt.Errorf("stream ended without [DONE] after %d output chunks", len(r.Chunks))
}

// onEvent handles one SSE event; it returns true when the stream is over
// (r.Outcome set).
func (d *openAIDriver) onEvent(ev *sseEvent, r *Result, st *streamState, chunk *oaiChunk) bool {
	fail := func(o Outcome, err error) bool { return r.end(ev.At, o, err) }
	if ev.ErrorData != nil {
		// llama.cpp's `error: {json}` line.
		return fail(streamError(ev.ErrorData))
	}
	typ := string(ev.Type)
	if typ == "error" {
		return fail(streamError(ev.Data))
	}
	if typ != "" && typ != "message" {
		return false // not part of the OpenAI stream (e.g. a ping)
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false
	}
	if bytes.Equal(data, doneMarker) {
		return r.end(ev.At, OutcomeSuccess, nil)
	}
	if err := chunk.decode(data); err != nil {
		return fail(OutcomeProtocolError, fmt.Errorf("chunk after %d output chunks is not valid JSON (%v): %s",
			len(r.Chunks), err, sanitize(data)))
	}
	if e, ok := chunk.apiError(); ok {
		return fail(e.outcome(), fmt.Errorf("mid-stream %w", e))
	}
	if fr := chunk.finishReason(); fr != "" {
		r.FinishReason = fr
	}
	if u := chunk.Usage; u != nil {
		st.usage, st.hasUsage = *u, true
		noteReasoningTokens(r, data)
		noteCachedTokens(r, data)
	}
	if chunk.Timings.present {
		st.timings = chunk.Timings
	}
	if chunk.hasOutput() {
		noteOutput(r, chunk, data, ev.At)
		if err := r.addChunk(ev.At, 1); err != nil {
			return r.stopOnChunkError(ev.At, err)
		}
		c := -1
		if u := chunk.Usage; u != nil {
			c = u.CompletionTokens
		}
		st.cum = append(st.cum, c)
	}
	return false
}

// streamError turns an error event's payload into an outcome.
func streamError(data []byte) (Outcome, error) {
	var f errorFields
	if err := decodeJSON(bytes.TrimSpace(data), &f); err == nil {
		if e, ok := f.apiError(); ok {
			return e.outcome(), fmt.Errorf("mid-stream %w", e)
		}
		// llama.cpp's `error:` line carries the bare inner object
		// {"code","message","type"} without a wrapper.
		var in innerError
		if json.Unmarshal(bytes.TrimSpace(data), &in) == nil && (len(in.Message) > 0 || len(in.Code) > 0) {
			e := in.apiError()
			return e.outcome(), fmt.Errorf("mid-stream %w", e)
		}
	}
	return OutcomeProtocolError, fmt.Errorf("mid-stream error event: %s", sanitize(data))
}

// cachedFallback sets the cached prompt tokens of a llama.cpp answer whose
// usage has no prompt_tokens_details (builds before it, e.g. c392e50,
// 2025-02): timings.prompt_n counts only the prompt tokens the slot
// evaluated, so the rest of usage.prompt_tokens came from its cache. A
// prompt_n that is not a whole number in [0, prompt_tokens] gives nothing.
func (t *llamaTimings) cachedFallback(r *Result, promptTokens int) {
	if r.HasCachedInputTokens || !t.promptN.ok {
		return
	}
	n := t.promptN.ms
	if n < 0 || n != math.Trunc(n) || n > float64(promptTokens) {
		return
	}
	r.CachedInputTokens, r.HasCachedInputTokens = promptTokens-int(n), true
}

// finish settles token counts once the stream is over (also on failure, so
// partial answers can be inspected).
func (st *streamState) finish(r *Result) {
	st.timings.apply(r)
	if st.hasUsage {
		st.timings.cachedFallback(r, st.usage.PromptTokens)
	}
	if st.continuous() {
		prev := 0
		for i, c := range st.cum {
			r.Chunks[i].Tokens = c - prev
			prev = c
		}
	}
	if st.hasUsage {
		r.OutputTokens, r.OutputTokensSource = max(st.usage.CompletionTokens, 0), TokenSourceServer
		r.InputTokens, r.InputTokensSource = max(st.usage.PromptTokens, 0), TokenSourceServer
		return
	}
	r.countChunkTokens()
}

// continuous reports whether every content chunk carried a cumulative
// completion_tokens (vLLM/SGLang continuous_usage_stats) that can be turned
// into per-chunk counts. Usage placeholders that stay at zero (Ollama) or go
// backwards do not qualify; then each chunk counts as one token.
func (st *streamState) continuous() bool {
	if len(st.cum) == 0 {
		return false
	}
	prev := 0
	for _, c := range st.cum {
		if c <= prev || c-prev > maxTokensPerChunk {
			return false
		}
		prev = c
	}
	return true
}

// readBody handles a whole JSON answer: a non-streamed request, or a server
// that answered a streaming request with JSON (usually an error).
func (d *openAIDriver) readBody(ex *exchange, r *Result, wantedStream bool) {
	var c oaiChunk
	decode := func(b []byte) error { return c.decodeAnswer(b, r) }
	if !ex.readAnswer(r, "valid JSON", decode) {
		return
	}
	if e, ok := c.apiError(); ok {
		r.Outcome, r.Err = e.outcome(), e
		return
	}
	if wantedStream {
		streamAnsweredWithJSON(r)
		return
	}
	if len(c.Choices) == 0 {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("answer has no choices")
		return
	}
	r.FinishReason = c.finishReason()
	if c.Usage != nil {
		r.OutputTokens, r.OutputTokensSource = max(c.Usage.CompletionTokens, 0), TokenSourceServer
		r.InputTokens, r.InputTokensSource = max(c.Usage.PromptTokens, 0), TokenSourceServer
		c.Timings.cachedFallback(r, c.Usage.PromptTokens)
	}
	c.Timings.apply(r)
	r.Outcome = OutcomeSuccess
}
