package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// tgiDriver speaks the native API of Hugging Face Text Generation
// Inference: POST /generate_stream (SSE, one token per event, the final
// event carrying generated_text and details) and POST /generate.
type tgiDriver struct {
	t         *httpTarget
	streamURL string
	unaryURL  string
	// bodies names this driver's encodings in workload items' caches.
	bodies *encoderKey
}

const (
	tgiStreamPath = "/generate_stream"
	tgiUnaryPath  = "/generate"
)

func newTGIDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	t, err := newHTTPTarget(opts, logger)
	if err != nil {
		return nil, err
	}
	return &tgiDriver{
		t:         t,
		streamURL: nativeEndpoint(t.base, tgiStreamPath, tgiStreamPath, tgiUnaryPath),
		unaryURL:  nativeEndpoint(t.base, tgiUnaryPath, tgiStreamPath, tgiUnaryPath),
		bodies:    new(encoderKey),
	}, nil
}

// nativeEndpoint appends path to the base URL. A base that already ends in
// one of the protocol's endpoint paths (someone pasted the full URL) has
// that path replaced, so both spellings of a target work.
func nativeEndpoint(base *url.URL, path string, known ...string) string {
	u := *base
	p := strings.TrimRight(u.Path, "/")
	for _, k := range known {
		if strings.HasSuffix(p, k) {
			p = strings.TrimSuffix(p, k)
			break
		}
	}
	u.Path = p + path
	u.RawPath = ""
	return u.String()
}

func (d *tgiDriver) Close() { d.t.close() }

// Probe implements Driver.
func (d *tgiDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.t.done(r)
	body, err := encodeBody(d.bodies, encodeTGIBody, req, r.RequestID)
	endpoint := d.unaryURL
	if req.Stream {
		endpoint = d.streamURL
	}
	d.t.roundTrip(ctx, r, endpoint, body, err, req.Stream, req.Stream, d)
	return r
}

// tgiRequestBody builds {"inputs", "parameters"}.
//
// details is always asked for: it carries the server's generated_tokens
// (and, when streaming, input_length). TGI validates sampling parameters
// strictly and answers 422 to temperature 0 or top_p 1, which other
// servers accept as "greedy" and "no nucleus filtering"; those values are
// therefore left out, which means the same to TGI (do_sample defaults to
// false). TGI has neither ignore_eos nor min_tokens, so they are not sent.
// Extra entries go into parameters, where all of TGI's knobs live (a nil
// value removes a built one).
func tgiRequestBody(req *Request) ([]byte, error) {
	if len(req.Extra) == 0 {
		return json.Marshal(tgiBody(req))
	}
	return tgiRequestBodyMap(req)
}

// encodeTGIBody is tgiRequestBody as a bodyEncoder; the body carries no id.
func encodeTGIBody(req *Request, _ string) ([]byte, error) { return tgiRequestBody(req) }

// tgiRequest is the body tgiRequestBodyMap builds, as structs whose fields
// are in the order encoding/json sorts a map's keys and are omitted
// exactly when the map leaves the key out: the same bytes
// (TestTGIRequestBodyStructMatchesMap) from json's cached struct encoder,
// without a map built, sorted and reflected over.
type tgiRequest struct {
	Inputs     string        `json:"inputs"`
	Parameters tgiParameters `json:"parameters"`
}

type tgiParameters struct {
	Details      bool     `json:"details"`
	MaxNewTokens int      `json:"max_new_tokens,omitempty"`
	Seed         *uint64  `json:"seed,omitempty"`
	Stop         []string `json:"stop,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	TopP         *float64 `json:"top_p,omitempty"`
}

// tgiBody is tgiRequestBodyMap's body for a request without Extra.
func tgiBody(req *Request) *tgiRequest {
	b := &tgiRequest{Inputs: req.promptText(), Parameters: tgiParameters{Details: true}}
	p := &b.Parameters
	if req.MaxTokens > 0 {
		p.MaxNewTokens = req.MaxTokens
	}
	if t := req.Temperature; t != nil && *t > 0 {
		p.Temperature = t
	}
	if tp := req.TopP; tp != nil && *tp > 0 && *tp < 1 {
		p.TopP = tp
	}
	if s := req.Seed; s != nil {
		u := uint64(*s)
		p.Seed = &u
	}
	if len(req.Stop) > 0 {
		p.Stop = req.Stop
	}
	return b
}

// tgiRequestBodyMap builds the body with parameters as a map, which Extra
// entries can override or remove fields of.
func tgiRequestBodyMap(req *Request) ([]byte, error) {
	params := make(map[string]any, 8)
	params["details"] = true
	if req.MaxTokens > 0 {
		params["max_new_tokens"] = req.MaxTokens
	}
	if t := req.Temperature; t != nil && *t > 0 {
		params["temperature"] = *t
	}
	if p := req.TopP; p != nil && *p > 0 && *p < 1 {
		params["top_p"] = *p
	}
	if s := req.Seed; s != nil {
		// TGI's seed is a u64; the bit pattern keeps runs reproducible.
		params["seed"] = uint64(*s)
	}
	if len(req.Stop) > 0 {
		params["stop"] = req.Stop
	}
	setFields(params, req.Extra)
	// The native API applies no chat template; see promptFromMessages.
	inputs := req.promptText()
	return json.Marshal(struct {
		Inputs     string         `json:"inputs"`
		Parameters map[string]any `json:"parameters"`
	}{inputs, params})
}

// tgiEvent is one /generate_stream event or a whole /generate answer:
// only what the measurements need, plus TGI's error shape.
type tgiEvent struct {
	errorFields
	Token         *tgiToken       `json:"token"`
	GeneratedText json.RawMessage `json:"generated_text"`
	Details       *tgiDetails     `json:"details"`
}

type tgiToken struct {
	Text    present `json:"text"`
	Special bool    `json:"special"`
}

type tgiDetails struct {
	FinishReason    string `json:"finish_reason"`
	GeneratedTokens *int   `json:"generated_tokens"`
	// InputLength is only in stream details (TGI ≥ 2.1).
	InputLength *int `json:"input_length"`
}

func (e *tgiEvent) decode(b []byte) error {
	*e = tgiEvent{}
	return decodeJSON(b, e)
}

// final reports whether this is the last event of a stream: TGI sets
// generated_text (and details, when asked for) only there.
func (e *tgiEvent) final() bool {
	g := bytes.TrimSpace(e.GeneratedText)
	return e.Details != nil || (len(g) > 0 && !bytes.Equal(g, []byte("null")))
}

// tgiError maps TGI's error_type to the HTTP status TGI itself uses for it
// (router/src/server.rs, From<InferError>), so an error event inside a 200
// stream is classified as the same error sent as a status would be.
// Validation errors in particular arrive this way on /generate_stream.
func tgiError(f *errorFields) (apiError, bool) {
	e, ok := f.apiError()
	if !ok {
		return e, false
	}
	if e.code == 0 {
		e.code = tgiTypeStatus(f.ErrorType)
	}
	return e, true
}

// tgiTypeStatus is the status TGI answers an InferError of error_type typ
// with (router/src/server.rs, From<InferError> for (StatusCode, …)), 0 for
// a type TGI does not have.
func tgiTypeStatus(typ string) int {
	switch typ {
	case "validation", "template_error", "missing_template_variable", "tool_error":
		return http.StatusUnprocessableEntity
	case "generation":
		return http.StatusFailedDependency
	case "overloaded":
		return http.StatusTooManyRequests
	case "incomplete_generation", "incomplete_generation_stream", "stream_serialization_error":
		return http.StatusInternalServerError
	case "healthcheck":
		return http.StatusServiceUnavailable
	}
	return 0
}

// tgiOpenAIMessages are the Display texts of TGI's InferError variants
// (router/src/infer/mod.rs, #[error(...)], @db931fc), longest first where
// one is a prefix of another, with the error_type of each.
var tgiOpenAIMessages = [...]struct{ prefix, typ string }{
	{"Request failed during generation: ", "generation"},
	{"Model is overloaded", "overloaded"},
	{"Input validation error: ", "validation"},
	{"Incomplete generation stream", "incomplete_generation_stream"},
	{"Incomplete generation", "incomplete_generation"},
	{"Template error: ", "template_error"},
	{"Missing template vatiable: ", "missing_template_variable"}, // sic
	{"Tool error: ", "tool_error"},
	{"Stream event serialization error", "stream_serialization_error"},
}

// tgiOpenAIError classifies an error of TGI's OpenAI routes. There every
// InferError inside a stream is {"error":{"message":e.to_string(),
// "http_status_code":422}} (InferError::into_openai_event, sent at
// router/src/server.rs:890,1241 @db931fc), whatever it was: an overloaded
// server or a failed generation would read as a client error. The
// message is the only thing that tells them apart, so it is matched
// against the variants' texts and the error gets the type and status TGI
// uses for that variant on its native routes, where the same failure has
// the same outcome. An unknown message keeps the status sent.
func tgiOpenAIError(msg string, status int) apiError {
	for _, m := range tgiOpenAIMessages {
		if strings.HasPrefix(msg, m.prefix) {
			return apiError{message: msg, kind: m.typ, code: tgiTypeStatus(m.typ)}
		}
	}
	return apiError{message: msg, code: status}
}

// tgiStream accumulates one /generate_stream answer.
type tgiStream struct {
	ev tgiEvent
	// tokens counts token events, special and empty ones included: TGI
	// sends exactly one generated token per event, so this is an exact
	// count when details are missing.
	tokens int
	// pending counts tokens since the last output chunk that carried no
	// text (special tokens, or bytes of a character not yet complete);
	// they are attributed to the next output chunk, whose gap covers them.
	pending int
	details *tgiDetails
}

// onEvent handles one SSE event; it returns true when the stream is over
// (r.Outcome set).
func (st *tgiStream) onEvent(ev *sseEvent, r *Result) bool {
	fail := func(o Outcome, err error) bool { return r.end(ev.At, o, err) }
	if typ := string(ev.Type); typ != "" && typ != "message" {
		return false
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || bytes.Equal(data, doneMarker) {
		// TGI's native stream has no terminator; a proxy may add one.
		return false
	}
	if err := st.ev.decode(data); err != nil {
		return fail(OutcomeProtocolError, fmt.Errorf("event after %d tokens is not valid JSON (%v): %s",
			st.tokens, err, sanitize(data)))
	}
	if e, ok := tgiError(&st.ev.errorFields); ok {
		return fail(e.outcome(), fmt.Errorf("mid-stream %w", e))
	}
	if tok := st.ev.Token; tok != nil {
		st.tokens++
		if tok.Special || !bool(tok.Text) {
			// EOS and other special tokens are not output, whatever their
			// text: they must not end TTFT early.
			st.pending++
		} else {
			if err := r.addChunk(ev.At, 1+st.pending); err != nil {
				return r.stopOnChunkError(ev.At, err)
			}
			st.pending = 0
		}
	}
	if st.ev.final() {
		noteTGIAnswer(r, &st.ev)
		if dt := st.ev.Details; dt != nil {
			st.details = dt
			r.FinishReason = sanitize([]byte(dt.FinishReason))
		}
		return r.end(ev.At, OutcomeSuccess, nil)
	}
	return false
}

// finish settles token counts (also on failure, for inspection).
func (st *tgiStream) finish(r *Result) {
	if dt := st.details; dt != nil && dt.GeneratedTokens != nil {
		r.OutputTokens, r.OutputTokensSource = max(*dt.GeneratedTokens, 0), TokenSourceServer
	} else {
		r.OutputTokens, r.OutputTokensSource = st.tokens, TokenSourceCounted
	}
	if dt := st.details; dt != nil && dt.InputLength != nil {
		r.InputTokens, r.InputTokensSource = max(*dt.InputLength, 0), TokenSourceServer
	}
}

func (d *tgiDriver) readStream(ex *exchange, r *Result) {
	var st tgiStream
	handle := func(ev *sseEvent) bool { return st.onEvent(ev, r) }
	if err := ex.readEvents(handle, r); err != nil {
		ex.streamBroke(r, err, fmt.Errorf("stream ended without the final event (generated_text, details) after %d tokens", st.tokens))
	}
	st.finish(r)
}

// readBody handles a whole JSON answer of /generate, or a JSON answer to a
// streaming request (an error, or a server that ignored the endpoint).
func (d *tgiDriver) readBody(ex *exchange, r *Result, wantedStream bool) {
	var e tgiEvent
	if !ex.readAnswer(r, "a valid JSON object", e.decode) {
		return
	}
	if ae, ok := tgiError(&e.errorFields); ok {
		r.Outcome, r.Err = ae.outcome(), ae
		return
	}
	if wantedStream {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("server answered a streaming request with a single JSON document (not a TGI /generate_stream endpoint?)")
		return
	}
	if len(bytes.TrimSpace(e.GeneratedText)) == 0 {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("answer has no generated_text")
		return
	}
	noteTGIAnswer(r, &e)
	h := ex.resp.Header
	// The x-* headers are TGI's own per-request accounting (milliseconds);
	// they exist on /generate only, as a stream's head leaves before the
	// work is done.
	for _, m := range []struct{ header, name string }{
		{"X-Total-Time", "total"}, {"X-Validation-Time", "validation"}, {"X-Queue-Time", "queue"},
		{"X-Inference-Time", "inference"}, {"X-Time-Per-Token", "time_per_token"},
	} {
		v := strings.TrimSpace(h.Get(m.header))
		if v == "" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > int64(maxServerTiming/time.Millisecond) {
			r.ServerTimingsInvalid++
			continue
		}
		r.ServerTimings = append(r.ServerTimings, ServerTiming{Name: m.name, Duration: time.Duration(ms) * time.Millisecond})
	}
	switch dt := e.Details; {
	case dt != nil && dt.GeneratedTokens != nil:
		r.OutputTokens, r.OutputTokensSource = max(*dt.GeneratedTokens, 0), TokenSourceServer
		r.FinishReason = sanitize([]byte(dt.FinishReason))
	default:
		if n, ok := headerInt(h, "X-Generated-Tokens"); ok {
			r.OutputTokens, r.OutputTokensSource = n, TokenSourceServer
		}
		if dt != nil {
			r.FinishReason = sanitize([]byte(dt.FinishReason))
		}
	}
	if n, ok := headerInt(h, "X-Prompt-Tokens"); ok {
		r.InputTokens, r.InputTokensSource = n, TokenSourceServer
	}
	r.Outcome = OutcomeSuccess
}

// maxHeaderCount bounds numbers taken from response headers (a day in
// milliseconds is 8.64e7); larger values are ignored rather than trusted.
const maxHeaderCount = 1 << 40

// headerInt reads a non-negative integer header; ok is false when absent
// or not a sane number.
func headerInt(h http.Header, name string) (int, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxHeaderCount {
		return 0, false
	}
	return int(n), true
}
