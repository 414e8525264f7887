package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// tritonGenerateDriver speaks Triton's generate extension:
// POST /v2/models/{model}[/versions/{v}]/generate (one JSON answer) and
// /generate_stream (SSE, one event per model response, no terminator).
//
// How a stream's end is judged: Triton closes the chunked body after the
// response flagged final, so a clean close (the chunked terminator arrived)
// after at least one response is success, while a reset or a close without
// the terminator is incomplete. A clean close cannot be told from a server
// that stopped early, except when the model reports a finish reason (the
// vLLM backend with return_finish_reason, the vllm_backend preset): once
// any response carried finish_reason, the last one must carry a real one
// ("length", "stop", …), else the stream is incomplete.
type tritonGenerateDriver struct {
	t      *httpTarget
	triton TritonOptions
	url    string // without the trailing "_stream"
	// bodies names this driver's encodings in workload items' caches.
	bodies *encoderKey
}

func newTritonGenerateDriver(opts TargetOptions, logger *slog.Logger) (Driver, error) {
	tr, err := opts.Triton.resolved()
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", opts.Name, err)
	}
	t, err := newHTTPTarget(opts, logger)
	if err != nil {
		return nil, err
	}
	return &tritonGenerateDriver{t: t, triton: tr, url: tritonModelURL(t.base, opts.Model, tr.ModelVersion), bodies: new(encoderKey)}, nil
}

// tritonModelURL is base + /v2/models/{model}[/versions/{v}]/generate. A
// base that already ends in /v2 is accepted.
func tritonModelURL(base *url.URL, model, version string) string {
	u := *base
	p := strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v2")
	p += "/v2/models/" + url.PathEscape(model)
	if version != "" {
		p += "/versions/" + url.PathEscape(version)
	}
	u.Path = p + "/generate"
	u.RawPath = ""
	return u.String()
}

func (d *tritonGenerateDriver) Close() { d.t.close() }

// Probe implements Driver.
func (d *tritonGenerateDriver) Probe(ctx context.Context, req *Request) *Result {
	req, r := begin(req)
	defer d.t.done(r)
	body, err := encodeBody(d.bodies, d.requestBody, req, r.RequestID)
	endpoint := d.url
	if req.Stream {
		endpoint += "_stream"
	}
	if req.Model != "" && req.Model != d.t.opts.Model {
		endpoint = tritonModelURL(d.t.base, req.Model, d.triton.ModelVersion)
		if req.Stream {
			endpoint += "_stream"
		}
	}
	d.t.roundTrip(ctx, r, endpoint, body, err, req.Stream, req.Stream, d)
	return r
}

// requestBody maps the request through the inputs to top-level JSON keys;
// Triton turns every key naming a model input into that tensor. Extra
// entries are added as further keys (request parameters for Triton).
func (d *tritonGenerateDriver) requestBody(req *Request, id string) ([]byte, error) {
	m := make(map[string]any, len(d.triton.Inputs)+1)
	m["id"] = id
	for i := range d.triton.Inputs {
		in := &d.triton.Inputs[i]
		vals, ok := in.values(req)
		if !ok {
			continue
		}
		v, err := in.jsonValue(vals)
		if err != nil {
			return nil, err
		}
		m[in.Name] = v
	}
	setFields(m, req.Extra)
	return json.Marshal(m)
}

// genResponse is what we read from one generate response: the configured
// text outputs, the vLLM backend's count and finish reason, and errors.
type genResponse struct {
	err          *string
	text         bool
	tokens       int
	hasTokens    bool
	inputTokens  int
	hasInput     bool
	finish       string
	hasFinish    bool
	outputsFound int
}

// parseGenerate decodes one response object. Text outputs may be a string
// or a list of strings (a BYTES tensor of several elements).
func (d *tritonGenerateDriver) parseGenerate(b []byte) (genResponse, error) {
	var g genResponse
	var obj map[string]json.RawMessage
	if err := decodeJSON(b, &obj); err != nil {
		return g, err
	}
	if obj == nil {
		return g, errors.New("not a JSON object")
	}
	if raw, ok := obj["error"]; ok {
		msg := jsonText(raw)
		g.err = &msg
		return g, nil
	}
	for _, name := range d.triton.Outputs {
		raw, ok := obj[name]
		if !ok {
			continue
		}
		g.outputsFound++
		has, err := jsonHasText(raw)
		if err != nil {
			return g, fmt.Errorf("output %s: %w", name, err)
		}
		g.text = g.text || has
	}
	if raw, ok := obj[outputNumTokens]; ok {
		if n, ok := jsonFirstInt(raw); ok {
			g.tokens, g.hasTokens = n, true
		}
	}
	if raw, ok := obj[outputNumInputTokens]; ok {
		g.inputTokens, g.hasInput = jsonFirstInt(raw)
	}
	if raw, ok := obj[outputFinishReason]; ok {
		g.hasFinish = true
		g.finish = realFinishReason(jsonFirstString(raw))
	}
	return g, nil
}

// jsonHasText reports whether a string or list-of-strings output is non-empty.
func jsonHasText(raw json.RawMessage) (bool, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return false, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, err
		}
		return s != "", nil
	case raw[0] == '[':
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			return false, errors.New("want a string or a list of strings")
		}
		for _, s := range l {
			if s != "" {
				return true, nil
			}
		}
		return false, nil
	}
	return false, errors.New("want a string or a list of strings")
}

func jsonFirstInt(raw json.RawMessage) (int, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil || len(l) == 0 {
			return 0, false
		}
		raw = l[0]
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || n < 0 || n > maxTokensPerChunk*64 {
		return 0, false
	}
	return int(n), true
}

func jsonFirstString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var l []string
		if json.Unmarshal(raw, &l) != nil || len(l) == 0 {
			return ""
		}
		return sanitize([]byte(l[0]))
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return sanitize([]byte(s))
}

// tritonStreamError is how a mid-stream {"error": …} event is classed:
// Triton sends it after the 200 head, when inference failed (request
// validation errors come before the head, with a status), so it is the
// server's failure.
func tritonStreamError(msg string) (Outcome, error) {
	return OutcomeHTTP5xx, fmt.Errorf("mid-stream server error: %s", msg)
}

// genStream accumulates one generate_stream answer.
type genStream struct {
	d          *tritonGenerateDriver
	counts     tritonCounts
	responses  int
	lastFinish string
}

func (d *tritonGenerateDriver) readStream(ex *exchange, r *Result) {
	st := genStream{d: d}
	handle := func(ev *sseEvent) bool { return st.onEvent(ev, r) }
	if err := ex.readEvents(handle, r); err != nil {
		st.ended(ex, r, err)
	}
	st.counts.finish(r)
}

// onEvent handles one SSE event; it returns true when the stream failed
// (r.Outcome set). Success comes only with the end of the body.
func (st *genStream) onEvent(ev *sseEvent, r *Result) bool {
	fail := func(o Outcome, err error) bool { return r.end(ev.At, o, err) }
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false
	}
	if typ := string(ev.Type); typ == "error" {
		return fail(tritonStreamError(sanitize(data)))
	} else if typ != "" && typ != "message" {
		return false
	}
	g, err := st.d.parseGenerate(data)
	if err != nil {
		return fail(OutcomeProtocolError, fmt.Errorf("response %d is not a valid generate response (%v): %s", st.responses+1, err, sanitize(data)))
	}
	if g.err != nil {
		return fail(tritonStreamError(*g.err))
	}
	st.responses++
	setInputTokens(r, g.inputTokens, g.hasInput)
	if g.hasFinish {
		st.counts.anyFinish = true
		st.lastFinish = g.finish
	}
	if g.text {
		if err := st.counts.add(r, ev.At, g.tokens, g.hasTokens); err != nil {
			return r.stopOnChunkError(ev.At, err)
		}
	}
	return false
}

// ended judges the end of the body, err (io.EOF for a clean close).
func (st *genStream) ended(ex *exchange, r *Result, err error) {
	r.EndToEnd = time.Since(r.Start)
	if !ex.body.last.IsZero() {
		r.EndToEnd = ex.body.last.Sub(r.Start)
	}
	switch {
	case !errors.Is(err, io.EOF):
		r.Outcome, r.Err = ex.classify(err, "reading the stream")
	case st.responses == 0:
		r.Outcome, r.Err = OutcomeIncomplete, errors.New("stream closed before any response")
	case st.counts.anyFinish && st.lastFinish == "":
		r.Outcome, r.Err = OutcomeIncomplete, fmt.Errorf("stream closed after %d responses, the last without a finish_reason", st.responses)
	default:
		r.Outcome = OutcomeSuccess
		r.FinishReason = st.lastFinish
	}
}

// readBody handles a whole JSON answer (non-streaming, or an error).
func (d *tritonGenerateDriver) readBody(ex *exchange, r *Result, wantedStream bool) {
	var g genResponse
	decode := func(b []byte) (err error) {
		g, err = d.parseGenerate(b)
		return err
	}
	if !ex.readAnswer(r, "a valid generate response", decode) {
		return
	}
	if g.err != nil {
		r.Outcome, r.Err = OutcomeHTTP5xx, fmt.Errorf("server error: %s", *g.err)
		return
	}
	setInputTokens(r, g.inputTokens, g.hasInput)
	if wantedStream {
		r.Outcome, r.Err = OutcomeProtocolError, errors.New("server answered generate_stream with a single JSON document")
		return
	}
	if g.outputsFound == 0 {
		r.Outcome, r.Err = OutcomeProtocolError, fmt.Errorf("answer has none of the outputs %s", strings.Join(d.triton.Outputs, ", "))
		return
	}
	r.FinishReason = g.finish
	if g.hasTokens {
		r.OutputTokens, r.OutputTokensSource = g.tokens, TokenSourceServer
	}
	r.Outcome = OutcomeSuccess
}
